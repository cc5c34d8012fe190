//! Actor-critic layers written out as tensor ops: each forward keeps what its backward needs and
//! each backward writes every gradient once, with no autograd graph, zero-filled accumulators or
//! adds of parts (on a GPU, where the agents' updates are bound by kernel launches, most of
//! their cost). SAC's and DrQ-v2's updates on a GPU ([`super::sac::on_device`],
//! [`super::drqv2::on_device`]) are made of these: the trunk `Linear → LayerNorm (→ tanh)`, the
//! `Linear ReLU Linear ReLU Linear` heads, the twin-Q minimum's gradient; the LayerNorm's
//! row-wise parts are [`super::row_ops`]' ops, one kernel each on CUDA.

use std::collections::BTreeMap;

use candle_core::{DType, Tensor};

use super::mlp::TrunkOutput;
use super::row_ops;
use crate::nn::Params;
use crate::{Error, Result};

/// A parameter's tensor, detached: the ops below record no graph.
pub(crate) fn param(params: &Params, name: &str) -> Result<Tensor> {
    params
        .get(name)
        .map(|var| var.as_tensor().detach())
        .ok_or_else(|| Error::Shape(format!("written out: no parameter {name}")))
}

/// `Linear(inp → out)`: weight (out, inp), bias (out), PyTorch's layout.
pub(crate) struct Linear {
    pub(crate) name: String,
    pub(crate) weight: Tensor,
    pub(crate) bias: Tensor,
}

/// One Linear layer's gradients, shaped as its parameters.
pub(crate) struct LinearGrads {
    pub(crate) weight: Tensor,
    pub(crate) bias: Tensor,
}

impl Linear {
    pub(crate) fn of(params: &Params, name: &str) -> Result<Self> {
        Ok(Self {
            name: name.to_owned(),
            weight: param(params, &format!("{name}.weight"))?,
            bias: param(params, &format!("{name}.bias"))?,
        })
    }

    /// x (b, inp) -> x · Wᵀ + bias (b, out).
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.matmul(&self.weight.t()?)?.broadcast_add(&self.bias)?)
    }

    /// Given the layer's input x (b, inp) and dy (b, out): dW (out, inp) = dyᵀ · x, dbias = Σ dy.
    pub(crate) fn grads(&self, x: &Tensor, dy: &Tensor) -> Result<LinearGrads> {
        Ok(LinearGrads {
            weight: dy.t()?.matmul(x)?, // (out, inp)
            bias: dy.sum(0)?,           // (out)
        })
    }

    /// dx (b, inp) = dy (b, out) · W.
    pub(crate) fn input_grad(&self, dy: &Tensor) -> Result<Tensor> {
        Ok(dy.matmul(&self.weight)?)
    }
}

/// `Linear(repr → feature) → LayerNorm(feature)` (→ tanh), `{prefix}.0` and `{prefix}.1`.
pub(crate) struct Trunk {
    pub(crate) linear: Linear,
    pub(crate) ln_weight: Tensor,
    pub(crate) ln_bias: Tensor,
    /// With a tanh after the LayerNorm (DrQ-v2's) or without (Proto-RL's SAC).
    pub(crate) output: TrunkOutput,
}

/// What a trunk's backward needs: the Linear's output y (b, feature), from which [`row_ops`]
/// recompute each row's statistics, and the trunk's output x_hat · γ + β, or its tanh
/// (b, feature).
pub(crate) struct TrunkTape {
    y: Tensor,
    out: Tensor,
}

impl TrunkTape {
    pub(crate) fn out(&self) -> &Tensor {
        &self.out
    }
}

/// A trunk's gradients, and the one reaching its input when asked for.
pub(crate) struct TrunkGrads {
    pub(crate) linear: LinearGrads,
    pub(crate) ln_weight: Tensor,
    pub(crate) ln_bias: Tensor,
    /// d input (b, repr).
    pub(crate) d_input: Option<Tensor>,
}

impl Trunk {
    pub(crate) fn of(params: &Params, prefix: &str, output: TrunkOutput) -> Result<Self> {
        Ok(Self {
            linear: Linear::of(params, &format!("{prefix}.0"))?,
            ln_weight: param(params, &format!("{prefix}.1.weight"))?,
            ln_bias: param(params, &format!("{prefix}.1.bias"))?,
            output,
        })
    }

    /// h (b, repr) -> the tape, whose `out` is (b, feature); LayerNorm as candle's
    /// `layer_norm_slow` computes it (the autograd path's), row by row in [`row_ops`].
    pub(crate) fn forward(&self, h: &Tensor) -> Result<TrunkTape> {
        let y = self.linear.forward(h)?; // (b, F)
        let out = self.squash(row_ops::layer_norm(&y, &self.ln_weight, &self.ln_bias)?)?; // (b, F)
        Ok(TrunkTape { y, out })
    }

    /// The LayerNorm's output through the trunk's tanh, if it has one.
    fn squash(&self, ln_out: Tensor) -> Result<Tensor> {
        Ok(match self.output {
            TrunkOutput::LayerNorm => ln_out,
            TrunkOutput::LayerNormTanh => ln_out.tanh()?,
        })
    }

    /// Given the trunk's input h (b, repr), its tape and d out (b, F): the parameters'
    /// gradients, and d h when `input_grad`.
    pub(crate) fn backward(
        &self,
        h: &Tensor,
        tape: &TrunkTape,
        d_out: &Tensor,
        input_grad: bool,
    ) -> Result<TrunkGrads> {
        // Through the tanh: d (LayerNorm's output) = d out · (1 − out²).
        let d_ln = match self.output {
            TrunkOutput::LayerNorm => d_out.clone(),
            TrunkOutput::LayerNormTanh => (d_out * (1.0 - tape.out().sqr()?)?)?,
        };
        let d_out = &d_ln; // (b, F)
        let dy = row_ops::layer_norm_input_grad(&tape.y, &self.ln_weight, d_out)?; // (b, F)
        let (ln_weight, ln_bias) = row_ops::layer_norm_param_grads(&tape.y, d_out)?; // (F) each
        Ok(TrunkGrads {
            linear: self.linear.grads(h, &dy)?,
            ln_weight,
            ln_bias,
            d_input: match input_grad {
                true => Some(self.linear.input_grad(&dy)?),
                false => None,
            },
        })
    }
}

/// `Linear ReLU Linear ReLU Linear`, `{prefix}.{0,2,4}`.
pub(crate) struct Mlp {
    pub(crate) layers: [Linear; 3],
}

/// Both hidden layers after their ReLU (b, hidden) and the output.
pub(crate) struct MlpTape {
    pub(crate) h1: Tensor,
    pub(crate) h2: Tensor,
    pub(crate) out: Tensor,
}

/// The gradient reaching the MLP's input (b, inp) and its layers' gradients.
pub(crate) struct MlpGrads {
    pub(crate) d_x: Tensor,
    pub(crate) layers: [LinearGrads; 3],
}

/// d through a ReLU whose output is `h`: passed where h > 0 (h ≥ 0, so sign(h) is the mask).
pub(crate) fn through_relu(d: &Tensor, h: &Tensor) -> Result<Tensor> {
    Ok((d * h.sign()?)?)
}

impl Mlp {
    pub(crate) fn of(params: &Params, prefix: &str) -> Result<Self> {
        Ok(Self {
            layers: [
                Linear::of(params, &format!("{prefix}.0"))?,
                Linear::of(params, &format!("{prefix}.2"))?,
                Linear::of(params, &format!("{prefix}.4"))?,
            ],
        })
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<MlpTape> {
        let h1 = self.layers[0].forward(x)?.relu()?; // (b, hidden)
        let h2 = self.layers[1].forward(&h1)?.relu()?; // (b, hidden)
        let out = self.layers[2].forward(&h2)?; // (b, out)
        Ok(MlpTape { h1, h2, out })
    }

    /// d h1 and d h2 (b, hidden), through the ReLUs.
    pub(crate) fn hidden_grads(&self, tape: &MlpTape, d_out: &Tensor) -> Result<(Tensor, Tensor)> {
        let d_h2 = through_relu(&self.layers[2].input_grad(d_out)?, &tape.h2)?;
        let d_h1 = through_relu(&self.layers[1].input_grad(&d_h2)?, &tape.h1)?;
        Ok((d_h1, d_h2))
    }

    /// The gradient reaching the input (b, inp) alone (parameters held constant).
    pub(crate) fn input_grad(&self, tape: &MlpTape, d_out: &Tensor) -> Result<Tensor> {
        let (d_h1, _) = self.hidden_grads(tape, d_out)?;
        self.layers[0].input_grad(&d_h1)
    }

    pub(crate) fn backward(&self, x: &Tensor, tape: &MlpTape, d_out: &Tensor) -> Result<MlpGrads> {
        let (d_h1, d_h2) = self.hidden_grads(tape, d_out)?;
        let [l0, l2, l4] = &self.layers;
        Ok(MlpGrads {
            d_x: l0.input_grad(&d_h1)?,
            layers: [
                l0.grads(x, &d_h1)?,
                l2.grads(&tape.h1, &d_h2)?,
                l4.grads(&tape.h2, d_out)?,
            ],
        })
    }
}

/// An actor's trunk and policy MLP (`trunk.*`, `policy.*`).
pub(crate) struct ActorNets {
    pub(crate) trunk: Trunk,
    pub(crate) policy: Mlp,
}

impl ActorNets {
    pub(crate) fn of(params: &Params, output: TrunkOutput) -> Result<Self> {
        Ok(Self {
            trunk: Trunk::of(params, "trunk", output)?,
            policy: Mlp::of(params, "policy")?,
        })
    }
}

/// A critic's trunk and its two Q heads (`trunk.*`, `Q1.*`, `Q2.*`).
pub(crate) struct CriticNets {
    pub(crate) trunk: Trunk,
    pub(crate) q1: Mlp,
    pub(crate) q2: Mlp,
}

impl CriticNets {
    pub(crate) fn of(params: &Params, output: TrunkOutput) -> Result<Self> {
        Ok(Self {
            trunk: Trunk::of(params, "trunk", output)?,
            q1: Mlp::of(params, "Q1")?,
            q2: Mlp::of(params, "Q2")?,
        })
    }
}

/// A critic's step on MSE(Q1, y) + MSE(Q2, y): its gradients by name, the loss, both Q (b, 1),
/// and d loss / d obs (b, repr) when asked for.
pub(crate) struct Regression {
    pub(crate) grads: BTreeMap<String, Tensor>,
    pub(crate) loss: Tensor,
    pub(crate) q1: Tensor,
    pub(crate) q2: Tensor,
    pub(crate) obs_grad: Option<Tensor>,
}

/// min(Q1, Q2) of an action (b, 1) and d (−mean min Q) / d action (b, A), the critic's
/// parameters held constant (the actor's step).
pub(crate) struct MinQ {
    pub(crate) value: Tensor,
    pub(crate) action_grad: Tensor,
}

impl CriticNets {
    /// The critic on (obs, action) (b, repr), (b, A) regressed onto `target_q` (b, 1), without a
    /// graph: MSE(Q1, y) + MSE(Q2, y) and every gradient written once; with `obs_grad` also the
    /// gradient reaching obs (an encoder the critic trains).
    pub(crate) fn regress(
        &self,
        obs: &Tensor,
        action: &Tensor,
        target_q: &Tensor,
        obs_grad: bool,
    ) -> Result<Regression> {
        let b = obs.dim(0)?;
        let f = self.trunk.ln_weight.dim(0)?;
        let trunk = self.trunk.forward(obs)?;
        let x = Tensor::cat(&[trunk.out(), action], 1)?; // (b, F + A)
        let (t1, t2) = (self.q1.forward(&x)?, self.q2.forward(&x)?);
        let (e1, e2) = ((&t1.out - target_q)?, (&t2.out - target_q)?); // (b, 1) each
        let loss = (e1.sqr()?.mean_all()? + e2.sqr()?.mean_all()?)?;
        // d MSE / d q = 2 (q − y) / b.
        let scale = 2.0 / b as f64;
        let g1 = self.q1.backward(&x, &t1, &(e1 * scale)?)?;
        let g2 = self.q2.backward(&x, &t2, &(e2 * scale)?)?;
        // The trunk's output is the first F columns of both heads' input.
        let d_features = (g1.d_x.narrow(1, 0, f)? + g2.d_x.narrow(1, 0, f)?)?; // (b, F)
        let trunk_grads = self.trunk.backward(obs, &trunk, &d_features, obs_grad)?;
        let obs_grad = trunk_grads.d_input.clone();
        let mut grads = NamedGrads::new();
        grads.trunk("trunk", &self.trunk, trunk_grads);
        grads.mlp(&self.q1, g1.layers);
        grads.mlp(&self.q2, g2.layers);
        Ok(Regression {
            grads: grads.0,
            loss,
            q1: t1.out,
            q2: t2.out,
            obs_grad,
        })
    }

    /// min(Q1, Q2)(obs, action) and the gradient of −mean min Q with respect to the action.
    pub(crate) fn min_q(&self, obs: &Tensor, action: &Tensor) -> Result<MinQ> {
        let b = obs.dim(0)?;
        let (f, a) = (self.trunk.ln_weight.dim(0)?, action.dim(1)?);
        let x = Tensor::cat(&[self.trunk.forward(obs)?.out(), action], 1)?; // (b, F + A)
        let (t1, t2) = (self.q1.forward(&x)?, self.q2.forward(&x)?);
        let value = t1.out.minimum(&t2.out)?; // (b, 1)
        let (m1, m2) = min_masks(&t1.out, &t2.out, &value)?;
        let per_row = -1.0 / b as f64;
        let d_x1 = self.q1.input_grad(&t1, &(m1 * per_row)?)?; // (b, F + A)
        let d_x2 = self.q2.input_grad(&t2, &(m2 * per_row)?)?; // (b, F + A)
        Ok(MinQ {
            value,
            // The action is the last A columns of both heads' input.
            action_grad: (d_x1.narrow(1, f, a)? + d_x2.narrow(1, f, a)?)?,
        })
    }
}

/// d min(q1, q2) / d (q1, q2), as candle's `minimum` (a tie splits it in halves): (b, 1) each,
/// given the minimum `m` = min(q1, q2).
fn min_masks(q1: &Tensor, q2: &Tensor, m: &Tensor) -> Result<(Tensor, Tensor)> {
    let on1 = m.eq(q1)?.to_dtype(DType::F32)?;
    let on2 = m.eq(q2)?.to_dtype(DType::F32)?;
    Ok(((&on1 / (&on2 + 1.0)?)?, (&on2 / (&on1 + 1.0)?)?))
}

// ---- gradients by name

/// The gradients of one network by parameter name.
pub(crate) struct NamedGrads(pub(crate) BTreeMap<String, Tensor>);

impl NamedGrads {
    pub(crate) fn new() -> Self {
        Self(BTreeMap::new())
    }

    pub(crate) fn linear(&mut self, layer: &Linear, g: LinearGrads) {
        self.0.insert(format!("{}.weight", layer.name), g.weight);
        self.0.insert(format!("{}.bias", layer.name), g.bias);
    }

    pub(crate) fn trunk(&mut self, prefix: &str, trunk: &Trunk, g: TrunkGrads) {
        self.linear(&trunk.linear, g.linear);
        self.0.insert(format!("{prefix}.1.weight"), g.ln_weight);
        self.0.insert(format!("{prefix}.1.bias"), g.ln_bias);
    }

    pub(crate) fn mlp(&mut self, mlp: &Mlp, g: [LinearGrads; 3]) {
        for (layer, grads) in mlp.layers.iter().zip(g) {
            self.linear(layer, grads);
        }
    }
}

/// What the written-out paths' tests share: a random batch, and the comparisons with candle's
/// autograd.
#[cfg(test)]
pub(crate) mod test_support {
    use std::collections::BTreeMap;

    use candle_core::{Device, Tensor};
    use rand::Rng;

    use crate::nn::Params;
    use crate::rl::batch::Batch;

    pub(crate) fn batch(repr: usize, b: usize, a: usize, rng: &mut impl Rng) -> Batch {
        let mut t = |dims: (usize, usize), lo: f32, hi: f32| {
            let v: Vec<f32> = (0..dims.0 * dims.1).map(|_| rng.random_range(lo..hi)).collect();
            Tensor::from_vec(v, dims, &Device::Cpu).unwrap()
        };
        Batch {
            obs: t((b, repr), 0.0, 1.0),
            action: t((b, a), -1.0, 1.0),
            reward: t((b, 1), 0.0, 1.0),
            discount: t((b, 1), 0.9, 1.0),
            next_obs: t((b, repr), 0.0, 1.0),
        }
    }

    /// Worst |ours − candle's| over a parameter's gradient, relative to candle's largest entry.
    pub(crate) fn worst_relative(ours: &Tensor, reference: &Tensor) -> f32 {
        let (x, y) = (
            ours.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            reference.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        );
        assert_eq!(x.len(), y.len());
        let scale = y.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-12);
        x.iter().zip(&y).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
    }

    /// A scalar tensor's value (a step's loss or metric), as f64.
    pub(crate) fn value(t: &Tensor) -> f64 {
        t.to_dtype(candle_core::DType::F64).unwrap().to_scalar::<f64>().unwrap()
    }

    /// Two numbers within 1e-5, relative to the larger of 1 and the reference.
    pub(crate) fn close(ours: f64, reference: f64) -> bool {
        (ours - reference).abs() <= 1e-5 * reference.abs().max(1.0)
    }

    /// A step's loss and gradients against candle's autograd's on the same networks, batch and
    /// noise: the loss, and a gradient for every parameter of `params`, each within 1e-4 of the
    /// reference's largest entry.
    pub(crate) fn assert_step_matches(
        (loss, reference_loss): (f64, f64),
        (grads, reference_grads): (&BTreeMap<String, Tensor>, &BTreeMap<String, Tensor>),
        params: &Params,
        what: &str,
    ) {
        assert!(close(loss, reference_loss), "{what}: loss {loss} vs {reference_loss}");
        assert_eq!(grads.len(), params.len(), "{what}");
        assert_eq!(reference_grads.len(), params.len(), "{what}");
        for (name, _) in params.iter() {
            let worst = worst_relative(&grads[name], &reference_grads[name]);
            assert!(worst < 1e-4, "{what}, {name}: {worst}");
        }
    }
}
