//! URLB's ICM, the representation `icm_apt` trains (docs/design.md §15): a trunk embedding the
//! encoder's features, a forward model predicting the next embedding from (embedding, action)
//! and an inverse model predicting the action from the two embeddings. Transcribed from
//! rll-research/url_benchmark @bb98f0c `agent/icm_apt.py`, class `ICM` (l.11-52):
//!
//! ```text
//! trunk        = Linear(obs_dim, rep_dim) → LayerNorm(rep_dim) → Tanh       icm.trunk.{0,1}
//! forward_net  = Linear(rep_dim + A, hidden) → ReLU → Linear(hidden, rep_dim) icm.forward_net.{0,2}
//! backward_net = Linear(2 rep_dim, hidden) → ReLU → Linear(hidden, A) → Tanh  icm.backward_net.{0,2}
//! forward_error  = ‖e′ − forward_net(e, a)‖₂,  backward_error = ‖a − backward_net(e, e′)‖₂
//! ```
//!
//! and `ICMAPTAgent.update_icm` (l.76-94): loss = mean forward_error + mean backward_error.
//! Initialised as `utils.weight_init` (l.59-69): orthogonal Linear weights (gain 1), zero
//! biases, LayerNorm γ = 1, β = 0.

use candle_core::Tensor;
use candle_nn::Linear;
use rand::Rng;

use crate::nn::projector::init_linear;
use crate::nn::Params;
use crate::rl::mlp::{join, linear, Trunk, TrunkOutput};
use crate::Result;

/// The sizes of one ICM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmDims {
    /// The encoder's features per observation (39200).
    pub repr_dim: usize,
    /// |A|, the domain's action size.
    pub action_dim: usize,
    /// `icm_rep_dim`, the embedding e (512).
    pub rep_dim: usize,
    /// `hidden_dim` of the forward and inverse models (1024).
    pub hidden_dim: usize,
}

/// `Linear(in → hidden) ReLU Linear(hidden → out)`, a PyTorch `nn.Sequential` registered as
/// `{prefix}.{0,2}`.
#[derive(Debug, Clone)]
struct TwoLayer {
    first: Linear,
    second: Linear,
}

impl TwoLayer {
    fn new<R: Rng + ?Sized>(dims: [usize; 3], prefix: &str, params: &mut Params, rng: &mut R) -> Result<Self> {
        let [input, hidden, output] = dims;
        Ok(Self {
            first: init_linear(input, hidden, 1.0, &join(prefix, "0"), params, rng)?,
            second: init_linear(hidden, output, 1.0, &join(prefix, "2"), params, rng)?,
        })
    }

    fn from_params(dims: [usize; 3], prefix: &str, params: &Params) -> Result<Self> {
        let [input, hidden, output] = dims;
        let layer = |name: &str, i: usize, o: usize| -> Result<Linear> {
            let name = join(prefix, name);
            Ok(Linear::new(
                params.tensor(&format!("{name}.weight"), &[o, i])?,
                Some(params.tensor(&format!("{name}.bias"), &[o])?),
            ))
        };
        Ok(Self {
            first: layer("0", input, hidden)?,
            second: layer("2", hidden, output)?,
        })
    }

    /// Shapes: x (b, in) -> (b, out).
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = linear(&self.first, x)?.relu()?; // (b, hidden)
        linear(&self.second, &x) // (b, out)
    }
}

/// URLB's `ICM` module (`agent/icm_apt.py` l.11-52), parameters views of a [`Params`] store:
/// an optimiser step on the store is seen here.
#[derive(Debug, Clone)]
pub struct Icm {
    dims: IcmDims,
    /// `icm.trunk`: Linear → LayerNorm → Tanh.
    trunk: Trunk,
    /// `icm.forward_net`: (e, a) → ê′.
    forward_net: TwoLayer,
    /// `icm.backward_net` without its final Tanh: (e, e′) → pre-tanh â.
    backward_net: TwoLayer,
}

/// What the ICM's loss measured on a batch (`ICM.forward`, l.42-52, and `update_icm`, l.76-94).
pub struct IcmLoss {
    /// mean forward_error + mean backward_error: a scalar, joined to the graph.
    pub loss: Tensor,
    /// ‖e′ − forward_net(e, a)‖₂: (b, 1).
    pub forward_error: Tensor,
    /// ‖a − backward_net(e, e′)‖₂: (b, 1).
    pub backward_error: Tensor,
}

impl Icm {
    /// Registers `{prefix}.trunk.{0,1}`, `{prefix}.forward_net.{0,2}` and
    /// `{prefix}.backward_net.{0,2}` in `params`, as `utils.weight_init` initialises them.
    pub fn new<R: Rng + ?Sized>(dims: IcmDims, prefix: &str, params: &mut Params, rng: &mut R) -> Result<Self> {
        let IcmDims {
            repr_dim,
            action_dim,
            rep_dim,
            hidden_dim,
        } = dims;
        // Created in the upstream module's order (trunk, forward_net, backward_net).
        let trunk = Trunk::new(
            repr_dim,
            rep_dim,
            TrunkOutput::LayerNormTanh,
            &join(prefix, "trunk"),
            params,
            rng,
        )?;
        let forward_net = TwoLayer::new(
            [rep_dim + action_dim, hidden_dim, rep_dim],
            &join(prefix, "forward_net"),
            params,
            rng,
        )?;
        let backward_net = TwoLayer::new(
            [2 * rep_dim, hidden_dim, action_dim],
            &join(prefix, "backward_net"),
            params,
            rng,
        )?;
        Ok(Self {
            dims,
            trunk,
            forward_net,
            backward_net,
        })
    }

    /// The ICM over the `{prefix}.*` tensors already in `params`; errors name a missing or
    /// mis-shaped one.
    pub fn from_params(dims: IcmDims, prefix: &str, params: &Params) -> Result<Self> {
        let IcmDims {
            repr_dim,
            action_dim,
            rep_dim,
            hidden_dim,
        } = dims;
        Ok(Self {
            dims,
            trunk: Trunk::from_params(
                repr_dim,
                rep_dim,
                TrunkOutput::LayerNormTanh,
                &join(prefix, "trunk"),
                params,
            )?,
            forward_net: TwoLayer::from_params(
                [rep_dim + action_dim, hidden_dim, rep_dim],
                &join(prefix, "forward_net"),
                params,
            )?,
            backward_net: TwoLayer::from_params(
                [2 * rep_dim, hidden_dim, action_dim],
                &join(prefix, "backward_net"),
                params,
            )?,
        })
    }

    pub fn dims(&self) -> IcmDims {
        self.dims
    }

    /// `icm.trunk(h)`, the embedding e (what `compute_intr_reward`, l.96-100, takes the kNN
    /// of). Shapes: h (b, repr) -> (b, rep_dim).
    pub fn trunk(&self, h: &Tensor) -> Result<Tensor> {
        self.trunk.forward(h)
    }

    /// `ICM.forward(obs, action, next_obs)` (l.42-52) and the loss of `update_icm` (l.83-86),
    /// differentiable in the parameters and in `h`. Shapes: h, next_h (b, repr), action (b, A).
    pub fn loss(&self, h: &Tensor, action: &Tensor, next_h: &Tensor) -> Result<IcmLoss> {
        let e = self.trunk.forward(h)?; // (b, rep)
        let e_next = self.trunk.forward(next_h)?; // (b, rep)
        let e_a = Tensor::cat(&[&e, action], 1)?; // (b, rep + A)
        let next_pred = self.forward_net.forward(&e_a)?; // (b, rep)
        let e_e_next = Tensor::cat(&[&e, &e_next], 1)?; // (b, 2 rep)
        let action_pred = self.backward_net.forward(&e_e_next)?.tanh()?; // (b, A)
                                                                         // torch.norm(·, dim=-1, p=2, keepdim=True)
        let forward_error = (&e_next - &next_pred)?.sqr()?.sum_keepdim(1)?.sqrt()?; // (b, 1)
        let backward_error = (action - &action_pred)?.sqr()?.sum_keepdim(1)?.sqrt()?; // (b, 1)
        let loss = (forward_error.mean_all()? + backward_error.mean_all()?)?; // ()
        Ok(IcmLoss {
            loss,
            forward_error,
            backward_error,
        })
    }
}
