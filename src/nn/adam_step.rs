//! One Adam step's rule, as torch.optim.Adam (foreach=False) applies it: the scalars a step
//! shares across parameters and the per-element update. [`super::adam`]'s optimizer runs it on
//! the CPU; the CUDA kernel of `crate::cuda::adam_ema` is the same rule on the device.

/// The scalars of one step, shared by every parameter.
#[derive(Debug, Clone, Copy)]
pub struct AdamCoeffs {
    pub step_size: f32,
    pub one_minus_beta1: f32,
    pub one_minus_beta2: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub bias_correction2_sqrt: f32,
}

impl AdamCoeffs {
    /// The scalars in the order of the CUDA kernel's parameters (`crate::cuda::adam_ema`).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn kernel_scalars(&self) -> [f32; 7] {
        [
            self.step_size,
            self.one_minus_beta1,
            self.one_minus_beta2,
            self.beta2,
            self.eps,
            self.weight_decay,
            self.bias_correction2_sqrt,
        ]
    }
}

/// torch.optim.Adam's per-element update (foreach=False), applied in place to θ.
pub fn adam_elementwise(c: AdamCoeffs, theta: &mut [f32], grad: &[f32], m: &mut [f32], v: &mut [f32]) {
    for (((t, &g), m), v) in theta.iter_mut().zip(grad).zip(m.iter_mut()).zip(v.iter_mut()) {
        let g = g + c.weight_decay * *t;
        *m += (g - *m) * c.one_minus_beta1; // torch: exp_avg.lerp_(grad, 1 - beta1)
        *v = *v * c.beta2 + c.one_minus_beta2 * g * g;
        let denom = v.sqrt() / c.bias_correction2_sqrt + c.eps;
        *t -= c.step_size * *m / denom;
    }
}
