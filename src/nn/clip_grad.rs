//! Gradient clipping by the global norm, as `torch.nn.utils.clip_grad_norm_` does it (rlpyt's
//! ATC clips at 10): the L2 norm over every parameter's gradient together; when it exceeds
//! `max_norm`, every gradient is scaled by `max_norm / (norm + 1e-6)`.

use candle_core::backprop::GradStore;

use super::Params;
use crate::Result;

/// Clips the gradients of `params` in `grads` in place; returns the norm before clipping.
pub fn clip_grad_norm(params: &Params, grads: &mut GradStore, max_norm: f64) -> Result<f64> {
    let mut sum_sq = 0.0f64;
    for (_, var) in params.iter() {
        if let Some(g) = grads.get(var.as_tensor()) {
            sum_sq += g
                .sqr()?
                .sum_all()?
                .to_dtype(candle_core::DType::F64)?
                .to_scalar::<f64>()?;
        }
    }
    let norm = sum_sq.sqrt();
    // torch: clip_coef = max_norm / (total_norm + 1e-6), applied only when below 1.
    let coef = max_norm / (norm + 1e-6);
    if coef < 1.0 {
        for (_, var) in params.iter() {
            if let Some(g) = grads.remove(var.as_tensor()) {
                grads.insert(var.as_tensor(), (g * coef)?);
            }
        }
    }
    Ok(norm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    #[test]
    fn clips_the_global_norm_like_torch() {
        // By hand: gradients (3, 4) and (12) have the global norm sqrt(9 + 16 + 144) = 13.
        // Clipped at 6.5 they are halved (coefficient 6.5 / (13 + 1e-6)); at 20 untouched.
        let mut params = Params::new(&Device::Cpu);
        let a = params
            .insert("a", Tensor::zeros(2, candle_core::DType::F32, &Device::Cpu).unwrap())
            .unwrap();
        let b = params
            .insert("b", Tensor::zeros(1, candle_core::DType::F32, &Device::Cpu).unwrap())
            .unwrap();
        let loss = ((&a * &Tensor::new(&[3f32, 4.0], &Device::Cpu).unwrap())
            .unwrap()
            .sum_all()
            .unwrap()
            + (&b * 12.0).unwrap().sum_all().unwrap())
        .unwrap();
        let grads_of = |grads: &GradStore, t: &Tensor| grads.get(t).unwrap().to_vec1::<f32>().unwrap();
        let mut grads = loss.backward().unwrap();
        let norm = clip_grad_norm(&params, &mut grads, 20.0).unwrap();
        assert!((norm - 13.0).abs() < 1e-6, "{norm}");
        assert_eq!(grads_of(&grads, &a), vec![3.0, 4.0]);
        let norm = clip_grad_norm(&params, &mut grads, 6.5).unwrap();
        assert!((norm - 13.0).abs() < 1e-6);
        let (ga, gb) = (grads_of(&grads, &a), grads_of(&grads, &b));
        for (got, want) in ga.iter().chain(&gb).zip([1.5f32, 2.0, 6.0]) {
            assert!((got - want).abs() < 1e-5, "{got} vs {want}");
        }
    }
}
