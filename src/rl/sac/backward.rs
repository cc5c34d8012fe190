//! SAC's update on constant features, forward and backward written out over raw buffers on the
//! CPU (issue 30): the [`WrittenOut`] path behind [`super::gradients`]' seam, which `lfs eval`
//! runs on a frozen encoder's cached features.
//!
//! candle's autograd cost the update about a fifth of its time: it accumulates every node's
//! gradient into a freshly zero-filled tensor, and its threads idle between ~150 small parallel
//! ops (BENCHMARKS.md, "The agent's update on cached features"). Here each network's forward
//! keeps what its backward needs (a tape), and the backward writes every gradient once, through
//! the same GEMM crate candle calls. The arithmetic is the autograd path's
//! ([`super::gradients::Autograd`]), term for term: Proto-RL's `update_critic` and
//! `update_actor_and_alpha`. The sums are taken in another order, so results differ from the
//! autograd path at float rounding. A unit test in `sac/mod.rs` holds every gradient to candle's
//! autograd's, and tests/sac.rs the two paths over four updates.
//!
//! Nothing here steps an optimiser or reads a generator: [`critic_step`] and [`actor_step`]
//! return gradients by parameter name and the numbers the metrics need.

use std::collections::BTreeMap;

use candle_core::{Device, Layout, StorageRef, Tensor};

use super::gradients::{ActorGradients, CriticGradients, Gradients, Networks};
use super::host_matrix::{column_sums, concat_columns, matmul, sum_of_columns, Mat};
use crate::nn::kernels::cpu_storage::host_f32;
use crate::nn::kernels::row_split::{row_split_parts, row_split_product};
use crate::nn::Params;
use crate::rl::batch::Batch;
use crate::rl::critic::NetworkDims;
use crate::rl::row_ops::{layer_norm_input_grad_row, normalise_row, squash_grad_row, squash_row, Squash, SquashTerms};
use crate::{Error, Result};

// ---- parameters

/// A store's parameters as f32 slices, read-locked for one update's pass.
struct Borrowed<'p> {
    guards: BTreeMap<&'p str, (StorageRef<'p>, &'p Layout)>,
}

impl<'p> Borrowed<'p> {
    fn new(params: &'p Params) -> Self {
        Self {
            guards: params
                .iter()
                .map(|(name, var)| (name.as_str(), var.as_tensor().storage_and_layout()))
                .collect(),
        }
    }

    /// Parameter `name`, checked to hold `len` elements.
    fn get(&self, name: &str, len: usize) -> Result<&[f32]> {
        let (storage, layout) = self
            .guards
            .get(name)
            .ok_or_else(|| Error::Shape(format!("sac backward: no parameter {name}")))?;
        host_f32("sac backward", storage, layout, name, len)
    }
}

/// The f32 data of a contiguous CPU tensor, copied (for the batch's small columns).
fn host_vec(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.flatten_all()?.to_vec1::<f32>()?)
}

// ---- layers

/// `Linear(inp → out)`: weight (out, inp), bias (out), PyTorch's layout.
struct LinearView<'a> {
    weight: &'a [f32],
    bias: &'a [f32],
    inp: usize,
    out: usize,
}

impl<'a> LinearView<'a> {
    fn of(params: &'a Borrowed, name: &str, inp: usize, out: usize) -> Result<Self> {
        Ok(Self {
            weight: params.get(&format!("{name}.weight"), out * inp)?,
            bias: params.get(&format!("{name}.bias"), out)?,
            inp,
            out,
        })
    }

    /// x (b, inp) -> x · Wᵀ + bias (b, out).
    fn forward(&self, x: &[f32], b: usize) -> Vec<f32> {
        let mut y = vec![0f32; b * self.out]; // (b, out)
        matmul(
            &mut y,
            Mat::new(x, b, self.inp),
            Mat::new(self.weight, self.out, self.inp).t(),
        );
        self.add_bias(&mut y);
        y
    }

    fn add_bias(&self, y: &mut [f32]) {
        for row in y.chunks_exact_mut(self.out) {
            row.iter_mut().zip(self.bias).for_each(|(v, b)| *v += b);
        }
    }

    /// Given dy (b, out) and the layer's input x (b, inp): dW (out, inp) = dyᵀ · x, dbias = Σ dy.
    fn weight_grads(&self, x: &[f32], dy: &[f32], b: usize) -> LinearGrads {
        let mut weight = vec![0f32; self.out * self.inp]; // (out, inp)
        matmul(&mut weight, Mat::new(dy, b, self.out).t(), Mat::new(x, b, self.inp));
        LinearGrads {
            weight,
            bias: column_sums(dy, self.out),
        }
    }

    /// dx (b, inp) = dy (b, out) · W.
    fn input_grad(&self, dy: &[f32], b: usize) -> Vec<f32> {
        let mut dx = vec![0f32; b * self.inp]; // (b, inp)
        matmul(
            &mut dx,
            Mat::new(dy, b, self.out),
            Mat::new(self.weight, self.out, self.inp),
        );
        dx
    }
}

/// One Linear layer's gradients, shaped as its parameters.
struct LinearGrads {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

/// `Linear(repr → feature) → LayerNorm(feature)`, `{prefix}.0` and `{prefix}.1` (Proto-RL's
/// SAC trunk, [`super::mlp::TrunkOutput::LayerNorm`]).
struct TrunkView<'a> {
    linear: LinearView<'a>,
    ln_weight: &'a [f32],
    ln_bias: &'a [f32],
}

/// What a trunk's backward needs: the normalised rows and their standard deviations.
struct TrunkTape {
    /// (x − mean) / std per row: (b, feature).
    x_hat: Vec<f32>,
    /// sqrt(var + eps) per row: (b).
    std: Vec<f32>,
    /// The trunk's output x_hat · γ + β: (b, feature).
    out: Vec<f32>,
}

impl<'a> TrunkView<'a> {
    fn of(params: &'a Borrowed, prefix: &str, dims: &NetworkDims) -> Result<Self> {
        let f = dims.feature_dim;
        Ok(Self {
            linear: LinearView::of(params, &format!("{prefix}.0"), dims.repr_dim, f)?,
            ln_weight: params.get(&format!("{prefix}.1.weight"), f)?,
            ln_bias: params.get(&format!("{prefix}.1.bias"), f)?,
        })
    }

    /// h (b, repr) -> the tape, whose `out` is (b, feature).
    fn forward(&self, h: &[f32], b: usize) -> TrunkTape {
        let (repr, f) = (self.linear.inp, self.linear.out);
        // A constant input's long, narrow product: one single-threaded GEMM per block of rows.
        // y: (b, feature).
        let mut y = match row_split_parts(b, repr) {
            Some(parts) => {
                let mut y = row_split_product(h, b, repr, self.linear.weight, f, parts);
                self.linear.add_bias(&mut y);
                y
            }
            None => self.linear.forward(h, b),
        };
        // LayerNorm per row, as candle's layer_norm_slow: centre, divide by sqrt(var + eps).
        let std = y.chunks_exact_mut(f).map(normalise_row).collect();
        let x_hat = y;
        let out = x_hat
            .chunks_exact(f)
            .flat_map(|row| {
                row.iter()
                    .zip(self.ln_weight)
                    .zip(self.ln_bias)
                    .map(|((x, g), b)| x * g + b)
            })
            .collect();
        TrunkTape { x_hat, std, out }
    }

    /// Given the trunk's input h (b, repr) and d out (b, feature): its parameters' gradients.
    fn backward(&self, h: &[f32], tape: &TrunkTape, d_out: &[f32], b: usize) -> TrunkGrads {
        let f = self.linear.out;
        let mut ln_weight = vec![0f32; f];
        let mut ln_bias = vec![0f32; f];
        let mut dy = vec![0f32; b * f]; // d (linear's output), (b, feature)
        for (((dy, d_out), x_hat), std) in dy
            .chunks_exact_mut(f)
            .zip(d_out.chunks_exact(f))
            .zip(tape.x_hat.chunks_exact(f))
            .zip(&tape.std)
        {
            for j in 0..f {
                ln_weight[j] += d_out[j] * x_hat[j];
                ln_bias[j] += d_out[j];
            }
            layer_norm_input_grad_row(dy, d_out, x_hat, *std, self.ln_weight);
        }
        TrunkGrads {
            linear: self.linear.weight_grads(h, &dy, b),
            ln_weight,
            ln_bias,
        }
    }
}

struct TrunkGrads {
    linear: LinearGrads,
    ln_weight: Vec<f32>,
    ln_bias: Vec<f32>,
}

/// `Linear ReLU Linear ReLU Linear`, `{prefix}.{0,2,4}` (super::mlp::Mlp).
struct MlpView<'a> {
    layers: [LinearView<'a>; 3],
}

/// The MLP's activations: both hidden layers after their ReLU (b, hidden) and its output.
struct MlpTape {
    h1: Vec<f32>,
    h2: Vec<f32>,
    out: Vec<f32>,
}

impl<'a> MlpView<'a> {
    fn of(params: &'a Borrowed, prefix: &str, inp: usize, hidden: usize, out: usize) -> Result<Self> {
        Ok(Self {
            layers: [
                LinearView::of(params, &format!("{prefix}.0"), inp, hidden)?,
                LinearView::of(params, &format!("{prefix}.2"), hidden, hidden)?,
                LinearView::of(params, &format!("{prefix}.4"), hidden, out)?,
            ],
        })
    }

    /// x (b, inp) -> the tape, whose `out` is (b, out).
    fn forward(&self, x: &[f32], b: usize) -> MlpTape {
        let relu = |mut v: Vec<f32>| {
            v.iter_mut().for_each(|v| *v = v.max(0.0));
            v
        };
        let h1 = relu(self.layers[0].forward(x, b)); // (b, hidden)
        let h2 = relu(self.layers[1].forward(&h1, b)); // (b, hidden)
        let out = self.layers[2].forward(&h2, b); // (b, out)
        MlpTape { h1, h2, out }
    }

    /// Given the tape and d out (b, out): d h1 and d h2 (b, hidden), through the ReLUs.
    fn hidden_grads(&self, tape: &MlpTape, d_out: &[f32], b: usize) -> (Vec<f32>, Vec<f32>) {
        // The ReLU passes the gradient where its output is positive (candle passes it at an
        // input of exactly 0 too; the two differ on a set of measure zero).
        let through_relu = |mut d: Vec<f32>, h: &[f32]| {
            d.iter_mut().zip(h).for_each(|(d, h)| {
                if *h <= 0.0 {
                    *d = 0.0
                }
            });
            d
        };
        let [_, l2, l4] = &self.layers;
        let d_h2 = through_relu(l4.input_grad(d_out, b), &tape.h2); // (b, hidden)
        let d_h1 = through_relu(l2.input_grad(&d_h2, b), &tape.h1); // (b, hidden)
        (d_h1, d_h2)
    }

    /// Given the tape and d out (b, out): the gradient reaching the input (b, inp) alone (a
    /// network whose parameters are held constant).
    fn input_grad(&self, tape: &MlpTape, d_out: &[f32], b: usize) -> Vec<f32> {
        let (d_h1, _) = self.hidden_grads(tape, d_out, b);
        self.layers[0].input_grad(&d_h1, b) // (b, inp)
    }

    /// Given the input x (b, inp), the tape and d out (b, out): the gradient reaching x and the
    /// layers' gradients.
    fn backward(&self, x: &[f32], tape: &MlpTape, d_out: &[f32], b: usize) -> MlpGrads {
        let (d_h1, d_h2) = self.hidden_grads(tape, d_out, b);
        let [l0, l2, l4] = &self.layers;
        MlpGrads {
            d_x: l0.input_grad(&d_h1, b), // (b, inp)
            layers: [
                l0.weight_grads(x, &d_h1, b),
                l2.weight_grads(&tape.h1, &d_h2, b),
                l4.weight_grads(&tape.h2, d_out, b),
            ],
        }
    }
}

struct MlpGrads {
    d_x: Vec<f32>,
    layers: [LinearGrads; 3],
}

// ---- the networks

/// The actor's trunk and policy MLP over its store.
struct ActorView<'a> {
    trunk: TrunkView<'a>,
    policy: MlpView<'a>,
}

impl<'a> ActorView<'a> {
    fn of(params: &'a Borrowed, dims: &NetworkDims) -> Result<Self> {
        Ok(Self {
            trunk: TrunkView::of(params, "trunk", dims)?,
            policy: MlpView::of(params, "policy", dims.feature_dim, dims.hidden_dim, 2 * dims.action_dim)?,
        })
    }
}

/// The critic's trunk and its two Q heads over its store.
struct CriticView<'a> {
    trunk: TrunkView<'a>,
    q1: MlpView<'a>,
    q2: MlpView<'a>,
}

impl<'a> CriticView<'a> {
    fn of(params: &'a Borrowed, dims: &NetworkDims) -> Result<Self> {
        let head_in = dims.feature_dim + dims.action_dim;
        Ok(Self {
            trunk: TrunkView::of(params, "trunk", dims)?,
            q1: MlpView::of(params, "Q1", head_in, dims.hidden_dim, 1)?,
            q2: MlpView::of(params, "Q2", head_in, dims.hidden_dim, 1)?,
        })
    }
}

/// The squashed Gaussian's reparameterised sample from the policy head (b, 2A) and noise ε
/// (b, A), as [`super::squashed_gaussian`]: μ = head[:, :A], log σ = min + (tanh(raw) + 1)·½
/// (max − min), x = μ + σ·ε, action = tanh(x), log π summed over A.
struct SquashedSample {
    /// tanh of the raw log-std half of the head: (b, A).
    raw_tanh: Vec<f32>,
    /// σ: (b, A).
    std: Vec<f32>,
    /// tanh(x): (b, A).
    action: Vec<f32>,
    /// Σ_A log π(action): (b).
    log_prob: Vec<f32>,
}

fn squashed_sample(head: &[f32], eps: &[f32], a: usize, bounds: (f64, f64)) -> SquashedSample {
    let squash = Squash::new(bounds);
    let b = head.len() / (2 * a);
    let mut s = SquashedSample {
        raw_tanh: Vec::with_capacity(b * a),
        std: Vec::with_capacity(b * a),
        action: Vec::with_capacity(b * a),
        log_prob: Vec::with_capacity(b),
    };
    for (row, eps) in head.chunks_exact(2 * a).zip(eps.chunks_exact(a)) {
        let mut log_prob = 0f32;
        for j in 0..a {
            let terms = squash_row(row[j], row[a + j], eps[j], squash);
            log_prob += terms.log_prob;
            s.raw_tanh.push(terms.raw_tanh);
            s.std.push(terms.std);
            s.action.push(terms.action);
        }
        s.log_prob.push(log_prob);
    }
    s
}

/// d min(q1, q2) / d (q1, q2) per row, as candle's `minimum` (a tie splits it in halves).
fn min_masks(q1: f32, q2: f32) -> (f32, f32) {
    let m = q1.min(q2);
    let (on1, on2) = ((q1 == m) as u8 as f32, (q2 == m) as u8 as f32);
    (on1 / (on2 + 1.0), on2 / (on1 + 1.0))
}

/// A number computed on the host as the 0-d f64 tensor the update reads with the others.
fn host_scalar(v: f64) -> Result<Tensor> {
    Ok(Tensor::new(v, &Device::Cpu)?)
}

fn mean(v: &[f32]) -> f64 {
    v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64
}

/// The gradients of one network by parameter name, as tensors shaped like the parameters.
struct NamedGrads(BTreeMap<String, Tensor>);

impl NamedGrads {
    fn new() -> Self {
        Self(BTreeMap::new())
    }

    fn linear(&mut self, name: &str, l: &LinearView, g: LinearGrads) -> Result<()> {
        let dev = &Device::Cpu;
        self.0.insert(
            format!("{name}.weight"),
            Tensor::from_vec(g.weight, (l.out, l.inp), dev)?,
        );
        self.0
            .insert(format!("{name}.bias"), Tensor::from_vec(g.bias, l.out, dev)?);
        Ok(())
    }

    fn trunk(&mut self, prefix: &str, t: &TrunkView, g: TrunkGrads) -> Result<()> {
        let f = t.linear.out;
        self.linear(&format!("{prefix}.0"), &t.linear, g.linear)?;
        self.0.insert(
            format!("{prefix}.1.weight"),
            Tensor::from_vec(g.ln_weight, f, &Device::Cpu)?,
        );
        self.0.insert(
            format!("{prefix}.1.bias"),
            Tensor::from_vec(g.ln_bias, f, &Device::Cpu)?,
        );
        Ok(())
    }

    fn mlp(&mut self, prefix: &str, m: &MlpView, g: [LinearGrads; 3]) -> Result<()> {
        for ((index, layer), grads) in ["0", "2", "4"].iter().zip(&m.layers).zip(g) {
            self.linear(&format!("{prefix}.{index}"), layer, grads)?;
        }
        Ok(())
    }
}

// ---- the two steps

/// `GradientPath::WrittenOut`: constant features on the CPU.
pub(crate) struct WrittenOut;

impl WrittenOut {
    /// Refuses features this path cannot differentiate: they would silently lose the encoder's
    /// gradient, or live off the host.
    fn check_constant(features: &[&Tensor]) -> Result<()> {
        match features.iter().all(|t| t.device().is_cpu() && !t.track_op()) {
            true => Ok(()),
            false => Err(Error::Training(
                "sac: the written-out update takes constant features on the CPU; an agent whose features carry \
                 their encoder's tape, or live on another device, is built with GradientPath::Autograd"
                    .into(),
            )),
        }
    }
}

impl Gradients for WrittenOut {
    fn critic(&self, nets: &Networks, batch: &Batch, next_eps: &[f32], alpha: f64) -> Result<CriticGradients> {
        Self::check_constant(&[&batch.obs, &batch.next_obs])?;
        critic_step(nets, batch, next_eps, alpha)
    }

    fn actor(&self, nets: &Networks, obs: &Tensor, eps: &[f32], alpha: f64) -> Result<ActorGradients> {
        Self::check_constant(&[obs])?;
        actor_step(nets, obs, eps, alpha)
    }
}

/// [`Gradients::critic`], written out.
fn critic_step(nets: &Networks, batch: &Batch, next_eps: &[f32], alpha: f64) -> Result<CriticGradients> {
    let dims = &nets.dims;
    let (f, a) = (dims.feature_dim, dims.action_dim);
    let b = batch.obs.dim(0)?;
    let (obs_storage, obs_layout) = batch.obs.storage_and_layout();
    let obs = host_f32("sac backward", &obs_storage, obs_layout, "obs", b * dims.repr_dim)?; // (b, repr)
    let (next_storage, next_layout) = batch.next_obs.storage_and_layout();
    let next_obs = host_f32(
        "sac backward",
        &next_storage,
        next_layout,
        "next_obs",
        b * dims.repr_dim,
    )?; // (b, repr)
    let action = host_vec(&batch.action)?; // (b, A)
    let (reward, discount) = (host_vec(&batch.reward)?, host_vec(&batch.discount)?); // (b) each
    let (actor_params, critic_params, target_params) = (
        Borrowed::new(nets.actor_params),
        Borrowed::new(nets.critic_params),
        Borrowed::new(nets.critic_target_params),
    );
    let actor = ActorView::of(&actor_params, dims)?;
    let critic = CriticView::of(&critic_params, dims)?;
    let target = CriticView::of(&target_params, dims)?;

    // The target: the actor and the target critic on s', no gradient.
    let head = actor.policy.forward(&actor.trunk.forward(next_obs, b).out, b).out; // (b, 2A)
    let next = squashed_sample(&head, next_eps, a, nets.log_std_bounds);
    let x = concat_columns(&target.trunk.forward(next_obs, b).out, f, &next.action, a); // (b, F + A)
    let (tq1, tq2) = (target.q1.forward(&x, b).out, target.q2.forward(&x, b).out); // (b, 1) each
    let alpha = alpha as f32;
    let target_q: Vec<f32> = (0..b)
        .map(|i| reward[i] + (tq1[i].min(tq2[i]) - next.log_prob[i] * alpha) * discount[i])
        .collect(); // (b)

    // The critic on (s, a), keeping its tapes.
    let trunk = critic.trunk.forward(obs, b);
    let x = concat_columns(&trunk.out, f, &action, a); // (b, F + A)
    let (t1, t2) = (critic.q1.forward(&x, b), critic.q2.forward(&x, b));
    let (q1, q2) = (&t1.out, &t2.out); // (b, 1) each
    let critic_loss = (0..b)
        .map(|i| ((q1[i] - target_q[i]) as f64).powi(2) + ((q2[i] - target_q[i]) as f64).powi(2))
        .sum::<f64>()
        / b as f64;
    // d MSE / d q = 2 (q − y) / b.
    let scale = 2.0 / b as f32;
    let dq1: Vec<f32> = (0..b).map(|i| (q1[i] - target_q[i]) * scale).collect();
    let dq2: Vec<f32> = (0..b).map(|i| (q2[i] - target_q[i]) * scale).collect();
    let g1 = critic.q1.backward(&x, &t1, &dq1, b);
    let g2 = critic.q2.backward(&x, &t2, &dq2, b);
    // The trunk's output is the first F columns of both heads' input.
    let d_features = sum_of_columns(&g1.d_x, &g2.d_x, f + a, 0, f); // (b, F)
    let trunk_grads = critic.trunk.backward(obs, &trunk, &d_features, b);

    let mut grads = NamedGrads::new();
    grads.trunk("trunk", &critic.trunk, trunk_grads)?;
    grads.mlp("Q1", &critic.q1, g1.layers)?;
    grads.mlp("Q2", &critic.q2, g2.layers)?;
    Ok(CriticGradients {
        grads: grads.0,
        loss: host_scalar(critic_loss)?,
        q1: host_scalar(mean(q1))?,
        target_q: host_scalar(mean(&target_q))?,
        obs_grad: None,
    })
}

/// [`Gradients::actor`], written out.
fn actor_step(nets: &Networks, obs: &Tensor, eps: &[f32], alpha: f64) -> Result<ActorGradients> {
    let dims = &nets.dims;
    let (f, a) = (dims.feature_dim, dims.action_dim);
    let b = obs.dim(0)?;
    let (obs_storage, obs_layout) = obs.storage_and_layout();
    let obs = host_f32("sac backward", &obs_storage, obs_layout, "obs", b * dims.repr_dim)?; // (b, repr)
    let (actor_params, critic_params) = (Borrowed::new(nets.actor_params), Borrowed::new(nets.critic_params));
    let actor = ActorView::of(&actor_params, dims)?;
    let critic = CriticView::of(&critic_params, dims)?;

    let trunk = actor.trunk.forward(obs, b);
    let policy = actor.policy.forward(&trunk.out, b); // out (b, 2A)
    let sample = squashed_sample(&policy.out, eps, a, nets.log_std_bounds);
    let x = concat_columns(&critic.trunk.forward(obs, b).out, f, &sample.action, a); // (b, F + A)
    let (t1, t2) = (critic.q1.forward(&x, b), critic.q2.forward(&x, b));
    let alpha = alpha as f32;
    let actor_loss = (0..b)
        .map(|i| (sample.log_prob[i] * alpha - t1.out[i].min(t2.out[i])) as f64)
        .sum::<f64>()
        / b as f64;

    // d loss / d q through −min(q1, q2) / b; the critic's weights get nothing.
    let (dq1, dq2): (Vec<f32>, Vec<f32>) = (0..b)
        .map(|i| {
            let (m1, m2) = min_masks(t1.out[i], t2.out[i]);
            (-m1 / b as f32, -m2 / b as f32)
        })
        .unzip();
    let d_x1 = critic.q1.input_grad(&t1, &dq1, b);
    let d_x2 = critic.q2.input_grad(&t2, &dq2, b);
    // The action is the last A columns of both heads' input.
    let d_action = sum_of_columns(&d_x1, &d_x2, f + a, f, a); // (b, A)

    // Back through the sample (squash_grad_row); d log π = α / b per row.
    let (squash, d_log_prob) = (Squash::new(nets.log_std_bounds), alpha / b as f32);
    let mut d_head = vec![0f32; b * 2 * a]; // (b, 2A): [d μ | d raw]
    for i in 0..b {
        for j in 0..a {
            let k = i * a + j;
            let terms = SquashTerms {
                raw_tanh: sample.raw_tanh[k],
                std: sample.std[k],
                action: sample.action[k],
                log_prob: 0.0,
            };
            let (d_mu, d_raw) = squash_grad_row(&terms, eps[k], d_action[k], d_log_prob, squash);
            d_head[i * 2 * a + j] = d_mu;
            d_head[i * 2 * a + a + j] = d_raw;
        }
    }
    let g_policy = actor.policy.backward(&trunk.out, &policy, &d_head, b);
    let trunk_grads = actor.trunk.backward(obs, &trunk, &g_policy.d_x, b);

    let mut grads = NamedGrads::new();
    grads.trunk("trunk", &actor.trunk, trunk_grads)?;
    grads.mlp("policy", &actor.policy, g_policy.layers)?;
    let log_prob = Tensor::from_vec(sample.log_prob, (b, 1), &Device::Cpu)?; // (b, 1)
    Ok(ActorGradients {
        grads: grads.0,
        loss: host_scalar(actor_loss)?,
        mean_log_prob: log_prob.mean_all()?,
        log_prob,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The products against a plain triple loop, for each transposition the update uses.
    #[test]
    fn matmul_matches_the_definition_for_every_view() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        let reference = |at: &dyn Fn(usize, usize) -> f32, bt: &dyn Fn(usize, usize) -> f32| {
            let mut c = vec![0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    c[i * n + j] = (0..k).map(|l| at(i, l) * bt(l, j)).sum();
                }
            }
            c
        };
        let close = |x: &[f32], y: &[f32]| x.iter().zip(y).all(|(x, y)| (x - y).abs() < 1e-5);
        // a · b
        let mut c = vec![0f32; m * n];
        matmul(&mut c, Mat::new(&a, m, k), Mat::new(&b, k, n));
        assert!(close(&c, &reference(&|i, l| a[i * k + l], &|l, j| b[l * n + j])));
        // a · bᵀ with b stored (n, k), over the last result (overwritten, not added to)
        matmul(&mut c, Mat::new(&a, m, k), Mat::new(&b, n, k).t());
        assert!(close(&c, &reference(&|i, l| a[i * k + l], &|l, j| b[j * k + l])));
        // aᵀ · b with a stored (k, m)
        matmul(&mut c, Mat::new(&a, k, m).t(), Mat::new(&b, k, n));
        assert!(close(&c, &reference(&|i, l| a[l * m + i], &|l, j| b[l * n + j])));
    }
}
