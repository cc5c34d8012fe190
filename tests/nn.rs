//! Networks and their plumbing: orthogonal init, encoder shapes, EMA arithmetic, Adam against
//! the torch update rule, atomic checkpoint io.

use std::collections::{BTreeMap, HashMap};

use candle_core::{Device, Tensor};
use lfs::device::Backend;
use lfs::nn::checkpoint::{load, save_atomic};
use lfs::nn::ema::ema_update;
use lfs::nn::init::orthogonal;
use lfs::nn::{Adam, AdamConfig, Encoder, EncoderConfig, Params};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// max |A·Aᵀ − gain²·I| for a row-major (rows, cols) matrix, over rows (`by_rows`) or columns.
fn gram_error(w: &[f32], rows: usize, cols: usize, gain: f64, by_rows: bool) -> f64 {
    let (n, len) = if by_rows { (rows, cols) } else { (cols, rows) };
    let at = |i: usize, k: usize| {
        if by_rows {
            w[i * cols + k] as f64
        } else {
            w[k * cols + i] as f64
        }
    };
    let mut worst: f64 = 0.0;
    for i in 0..n {
        for j in 0..n {
            let dot: f64 = (0..len).map(|k| at(i, k) * at(j, k)).sum();
            let expect = if i == j { gain * gain } else { 0.0 };
            worst = worst.max((dot - expect).abs());
        }
    }
    worst
}

#[test]
fn orthogonal_init_gives_gain_squared_identity() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    // Conv 32 × (9·3·3) with gain √2: rows orthonormal (wide matrix), W Wᵀ = 2·I.
    let w = orthogonal(32, 81, std::f64::consts::SQRT_2, &mut rng).unwrap();
    assert!(gram_error(&w, 32, 81, std::f64::consts::SQRT_2, true) < 1e-5);
    // Prototypes 512 × 128, gain 1: columns orthonormal (tall matrix), Wᵀ W = I.
    let w = orthogonal(512, 128, 1.0, &mut rng).unwrap();
    assert!(gram_error(&w, 512, 128, 1.0, false) < 1e-5);
    // A projector-like wide matrix.
    let w = orthogonal(64, 3000, 1.0, &mut rng).unwrap();
    assert!(gram_error(&w, 64, 3000, 1.0, true) < 1e-5);
    // Square: both.
    let w = orthogonal(16, 16, 1.0, &mut rng).unwrap();
    assert!(gram_error(&w, 16, 16, 1.0, true) < 1e-5 && gram_error(&w, 16, 16, 1.0, false) < 1e-5);
}

#[test]
fn encoder_output_is_39200_and_biases_start_at_zero() {
    let cfg = EncoderConfig::default();
    assert_eq!(cfg.output_size().unwrap(), 35); // 84 → 41 → 39 → 37 → 35 (docs/design.md §4)
    assert_eq!(cfg.repr_dim().unwrap(), 39200);
    let mut params = Params::new(&Device::Cpu);
    let enc = Encoder::new(&cfg, "encoder", &mut params, &mut ChaCha8Rng::seed_from_u64(0)).unwrap();
    assert_eq!(
        params.names(),
        [0, 2, 4, 6]
            .iter()
            .flat_map(|i| [
                format!("encoder.convnet.{i}.bias"),
                format!("encoder.convnet.{i}.weight")
            ])
            .collect::<Vec<_>>()
    );
    assert_eq!(params.get("encoder.convnet.0.weight").unwrap().dims(), &[32, 9, 3, 3]);
    let b = params
        .get("encoder.convnet.6.bias")
        .unwrap()
        .as_tensor()
        .to_vec1::<f32>()
        .unwrap();
    assert!(b.iter().all(|v| *v == 0.0));
    let obs = Tensor::zeros((2, 9, 84, 84), candle_core::DType::F32, &Device::Cpu).unwrap();
    assert_eq!(enc.forward(&obs).unwrap().dims(), &[2, 39200]);
}

#[test]
fn ema_moves_target_by_tau() {
    // By hand: θ' = (1 − 0.05)·1 + 0.05·3 = 1.1; then 0.95·1.1 + 0.05·3 = 1.195.
    let dev = Device::Cpu;
    let mut online = Params::new(&Device::Cpu);
    online.insert("w", Tensor::full(3f32, (2, 2), &dev).unwrap()).unwrap();
    let mut target = Params::new(&Device::Cpu);
    target.insert("w", Tensor::full(1f32, (2, 2), &dev).unwrap()).unwrap();
    ema_update(&online, &target, 0.05).unwrap();
    let read = |p: &Params| {
        p.get("w")
            .unwrap()
            .as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
    };
    let v = read(&target);
    assert!(v.iter().all(|x| (x - 1.1).abs() < 1e-6), "{v:?}");
    ema_update(&online, &target, 0.05).unwrap();
    let v = read(&target);
    assert!(v.iter().all(|x| (x - 1.195).abs() < 1e-6), "{v:?}");
    // Online untouched; a target key missing online is an error naming it.
    assert_eq!(
        online
            .get("w")
            .unwrap()
            .as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap(),
        vec![3.0; 4]
    );
    let mut other = Params::new(&Device::Cpu);
    other.insert("v", Tensor::full(1f32, (2, 2), &dev).unwrap()).unwrap();
    let err = ema_update(&online, &other, 0.05).unwrap_err().to_string();
    assert!(err.contains("checkpoint tensor v"), "{err}");
}

/// θ ← Adam on f(θ) = θ² (grad 2θ) for 3 steps from 1.5, lr 0.1.
fn adam_on_square(weight_decay: f64) -> (f32, Vec<f32>, Vec<f32>) {
    let mut params = Params::new(&Device::Cpu);
    let theta = params
        .insert("theta", Tensor::new(&[1.5f32], &Device::Cpu).unwrap())
        .unwrap();
    let cfg = AdamConfig {
        lr: 0.1,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay,
    };
    let mut adam = Adam::new(cfg, &params);
    for _ in 0..3 {
        let loss = theta.sqr().unwrap().sum_all().unwrap();
        let grads = loss.backward().unwrap();
        adam.step(&params, &grads).unwrap();
    }
    let state = adam.state_tensors(&params).unwrap();
    let get = |k: &str| state[k].to_vec1::<f32>().unwrap();
    (
        theta.to_vec1::<f32>().unwrap()[0],
        get("adam.exp_avg.theta"),
        get("adam.exp_avg_sq.theta"),
    )
}

#[test]
fn adam_matches_the_torch_update_rule() {
    // tests/fixtures/pretrain/reference.py, `adam(1.5, lambda th: 2 * th, 3)`:
    // ADAM_3_STEPS = (1.2009028705180997, 0.7550478125184559, 0.02357665548017245)
    let (theta, m, v) = adam_on_square(0.0);
    assert!((theta - 1.200_902_9).abs() < 1e-6, "{theta}");
    assert!((m[0] - 0.755_047_8).abs() < 1e-6, "{m:?}");
    assert!((v[0] - 0.023_576_655).abs() < 1e-7, "{v:?}");
    // ADAM_3_STEPS_WD (weight_decay 0.1, torch's L2 form) = (1.2009028704691824, 0.7928002031346176, 0.025993262666325102)
    let (_, m, v) = adam_on_square(0.1);
    assert!((m[0] - 0.792_800_2).abs() < 1e-6, "{m:?}");
    assert!((v[0] - 0.025_993_263).abs() < 1e-7, "{v:?}");
}

#[test]
fn adam_state_round_trips() {
    let mut params = Params::new(&Device::Cpu);
    let theta = params
        .insert("theta", Tensor::new(&[1.5f32, -0.5], &Device::Cpu).unwrap())
        .unwrap();
    let mut adam = Adam::new(AdamConfig::default(), &params);
    let grads = theta.sqr().unwrap().sum_all().unwrap().backward().unwrap();
    adam.step(&params, &grads).unwrap();
    let state = adam.state_tensors(&params).unwrap();
    let mut fresh = Adam::new(AdamConfig::default(), &params);
    fresh.load_state(&params, &state, adam.step).unwrap();
    let again = fresh.state_tensors(&params).unwrap();
    for (k, t) in &state {
        assert_eq!(t.to_vec1::<f32>().unwrap(), again[k].to_vec1::<f32>().unwrap(), "{k}");
    }
    assert_eq!(fresh.step, 1);
}

#[test]
fn checkpoint_io_is_atomic_and_keeps_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/ck.safetensors");
    let mut tensors = BTreeMap::new();
    tensors.insert(
        "a.weight".to_string(),
        Tensor::new(&[[1f32, 2.], [3., 4.]], &Device::Cpu).unwrap(),
    );
    tensors.insert("b".to_string(), Tensor::new(&[7u8, 8], &Device::Cpu).unwrap());
    let meta: HashMap<String, String> = [("format".to_string(), "pt".to_string())].into();
    save_atomic(&path, &tensors, &meta).unwrap();
    // No temp file left behind.
    let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(names, vec!["ck.safetensors".to_string()]);
    let back = load(&path).unwrap();
    assert_eq!(back.metadata.get("format").map(String::as_str), Some("pt"));
    assert_eq!(
        back.tensors["a.weight"].to_vec2::<f32>().unwrap(),
        vec![vec![1., 2.], vec![3., 4.]]
    );
    assert_eq!(back.tensors["b"].to_vec1::<u8>().unwrap(), vec![7, 8]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
    }
    let err = load(&dir.path().join("missing.safetensors")).unwrap_err().to_string();
    assert!(err.contains("missing.safetensors"), "{err}");
}

#[test]
fn params_load_reports_shape_mismatch_by_name() {
    let mut params = Params::new(&Device::Cpu);
    params
        .insert(
            "projector.weight",
            Tensor::zeros((2, 3), candle_core::DType::F32, &Device::Cpu).unwrap(),
        )
        .unwrap();
    let mut src = BTreeMap::new();
    src.insert(
        "projector.weight".to_string(),
        Tensor::zeros((3, 2), candle_core::DType::F32, &Device::Cpu).unwrap(),
    );
    let err = params.load_from(&src).unwrap_err().to_string();
    assert!(
        err.contains("projector.weight") && err.contains("[2, 3]") && err.contains("[3, 2]"),
        "{err}"
    );
}

/// max |a − b| / max |b|: the relative error of a whole tensor.
fn rel_err(a: &Tensor, b: &Tensor) -> f32 {
    let a = a.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let b = b.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-30);
    a.iter().zip(&b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

/// A small encoder (9 → 16 channels, 21×21 → 10 → 8 → 6 → 4) and projector (256 → 5) with
/// non-zero biases, so that some ReLUs clamp.
fn small_encoder_projector(rng: &mut ChaCha8Rng) -> (EncoderConfig, Params, Encoder, lfs::nn::Projector) {
    use rand::Rng;
    let cfg = EncoderConfig {
        image_size: 21,
        num_filters: 16,
        ..EncoderConfig::default()
    };
    let repr = cfg.repr_dim().unwrap();
    assert_eq!(repr, 16 * 4 * 4);
    let mut params = Params::new(&Device::Cpu);
    let encoder = Encoder::new(&cfg, "encoder", &mut params, rng).unwrap();
    let projector = lfs::nn::Projector::new(repr, 5, "projector", &mut params, rng).unwrap();
    for (name, var) in params.iter() {
        if name.ends_with("bias") {
            let b: Vec<f32> = (0..var.elem_count()).map(|_| rng.random_range(-0.3..0.3)).collect();
            var.set(&Tensor::from_vec(b, var.shape(), &Device::Cpu).unwrap())
                .unwrap();
        }
    }
    (cfg, params, encoder, projector)
}

/// The encoder with candle's own ops (obs / 255 + the config's input offset, then conv2d,
/// broadcast bias, ReLU per layer): the reference for our kernels. Shapes: (b, 9, s, s) ->
/// (b, repr).
fn stock_encoder(params: &Params, cfg: &EncoderConfig, obs: &Tensor) -> Tensor {
    let mut h = ((obs / 255.0).unwrap() + cfg.input_offset).unwrap();
    for layer in 0..cfg.num_layers {
        let w = params.get(&format!("encoder.convnet.{}.weight", 2 * layer)).unwrap();
        let b = params.get(&format!("encoder.convnet.{}.bias", 2 * layer)).unwrap();
        let stride = if layer == 0 { 2 } else { 1 };
        h = h
            .conv2d(w.as_tensor(), 0, stride, 1, 1)
            .unwrap()
            .broadcast_add(&b.as_tensor().reshape((1, cfg.num_filters, 1, 1)).unwrap())
            .unwrap()
            .relu()
            .unwrap();
    }
    let b = h.dim(0).unwrap();
    h.reshape((b, ())).unwrap()
}

/// What [`check_feature_net_backward`] built, for a test's further checks.
struct BackwardCase {
    cfg: EncoderConfig,
    net: lfs::nn::EncoderProjector,
    obs: Vec<u8>,
    r: Tensor,
    features: lfs::nn::encoder_projector::Features,
    rng: ChaCha8Rng,
}

/// `EncoderProjector::backward` for the loss Σ z[rows] ⊙ r over `b` random 21×21 observations
/// (`rows` may repeat a sample: its gradient then counts as often), against candle's autograd
/// through its stock conv2d and `Projector::forward` on the selected samples.
fn check_feature_net_backward(seed: u64, b: usize, rows: &[usize]) -> BackwardCase {
    check_feature_net_backward_on(seed, b, rows, &Backend::new(&Device::Cpu))
}

/// [`check_feature_net_backward`] with the network's parameters on `backend` (the reference
/// stays candle's stock ops on the CPU).
fn check_feature_net_backward_on(seed: u64, b: usize, rows: &[usize], backend: &Backend) -> BackwardCase {
    use rand::Rng;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (cfg, params, _, projector) = small_encoder_projector(&mut rng);
    let latent = 5;
    let obs: Vec<u8> = (0..b * 9 * 21 * 21).map(|_| rng.random()).collect();
    let r: Vec<f32> = (0..rows.len() * latent).map(|_| rng.random_range(-1.0..1.0)).collect();
    let r = Tensor::from_vec(r, (rows.len(), latent), &Device::Cpu).unwrap();

    let on_backend = Params::from_tensors(&params.snapshot().unwrap(), backend.clone()).unwrap();
    let net = lfs::nn::EncoderProjector::from_params(&cfg, latent, &on_backend).unwrap();
    let features = net.forward_pixels(&obs, b, true).unwrap();
    let grads = net.backward(&features, rows, &r).unwrap();

    let all = Tensor::from_slice(&obs, (b, 9, 21, 21), &Device::Cpu)
        .unwrap()
        .to_dtype(candle_core::DType::F32)
        .unwrap();
    let idx: Vec<u32> = rows.iter().map(|&i| i as u32).collect();
    let idx = Tensor::new(idx.as_slice(), &Device::Cpu).unwrap();
    let h_ref = stock_encoder(&params, &cfg, &all.index_select(&idx, 0).unwrap());
    let z_ref = projector.forward(&h_ref).unwrap();
    let z_ours = features.z.index_select(&idx, 0).unwrap();
    assert!(rel_err(&z_ours, &z_ref) < 1e-6, "z: {}", rel_err(&z_ours, &z_ref));
    let ref_grads = (z_ref * &r).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(grads.len(), params.len());
    for (name, grad) in &grads {
        let expected = ref_grads.get(params.get(name).unwrap().as_tensor()).unwrap();
        assert_eq!(grad.dims(), expected.dims(), "{name}");
        let err = rel_err(grad, expected);
        assert!(err < 1e-5, "{name}: relative error {err}");
    }
    BackwardCase {
        cfg,
        net,
        obs,
        r,
        features,
        rng,
    }
}

#[test]
fn feature_net_backward_with_several_samples_per_group_matches_candle_autograd() {
    // 37 rows: the backward's 16 groups take 3 samples each, one after another on the same
    // scratch buffers, which keep what the sample before left (the test below has one per
    // group).
    let b = 7;
    let rows: Vec<usize> = (0..37).map(|i| (i * 3 + i / 7) % b).collect();
    check_feature_net_backward(12, b, &rows);
}

#[test]
fn feature_net_backward_on_candles_path_matches_candle_autograd() {
    // The GPU's path on the CPU: candle's ops, the forward's activations kept (the default) and
    // the rows' backward from them; few distinct rows (2 of 6, one twice), most (5 of 6), all.
    let candle = Backend::candle(&Device::Cpu);
    for rows in [&[4usize, 1, 4][..], &[0, 1, 2, 3, 4], &[5, 4, 3, 2, 1, 0]] {
        check_feature_net_backward_on(13, 6, rows, &candle);
    }
}

#[test]
fn candles_path_encodes_frames_on_the_device_as_their_bytes() {
    // The GPU's pre-training batches on the CPU: observations as frames of a store, shifted, which
    // candle's path reads as the gather's scaled input (`FrameStacks::gather_input`, one kernel on
    // CUDA), against the same observations' bytes in host memory. The same features and the same
    // gradients, bit for bit, without and with DrQ-v2's input offset.
    use lfs::data::{FrameStacks, FrameStore, RandomShift, Stacks};
    use rand::Rng;
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let (cfg, params, _, _) = small_encoder_projector(&mut rng);
    let (b, rows, latent) = (5, [3usize, 0, 3, 4], 5);
    let frames: Vec<u8> = (0..12 * 3 * 21 * 21).map(|_| rng.random()).collect();
    let store = FrameStore::new(
        Tensor::from_vec(frames, (12, 3 * 21 * 21), &Device::Cpu).unwrap(),
        (3, 21, 21),
    )
    .unwrap();
    let stacks = (0..b)
        .map(|_| std::array::from_fn(|_| rng.random_range(0..12)))
        .collect();
    let mut on_device = Stacks::Frames(FrameStacks::new(&store, stacks));
    let shift = RandomShift { pad: 4 };
    on_device.shift(&shift, (b, 9, 21, 21), &mut rng).unwrap();
    let on_host = Stacks::Host(on_device.to_host().unwrap().into_owned());
    let dz: Vec<f32> = (0..rows.len() * latent).map(|_| rng.random_range(-1.0..1.0)).collect();
    let dz = Tensor::from_vec(dz, (rows.len(), latent), &Device::Cpu).unwrap();
    for offset in [0.0, -0.5] {
        let cfg = EncoderConfig {
            input_offset: offset,
            ..cfg.clone()
        };
        let on_candle = Params::from_tensors(&params.snapshot().unwrap(), Backend::candle(&Device::Cpu)).unwrap();
        let net = lfs::nn::EncoderProjector::from_params(&cfg, latent, &on_candle).unwrap();
        let device = lfs::objectives::stacks::forward_stacks(&net, &on_device, b, true).unwrap();
        let host = lfs::objectives::stacks::forward_stacks(&net, &on_host, b, true).unwrap();
        let bits = |t: &Tensor| -> Vec<u32> {
            t.flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect()
        };
        assert_eq!(bits(&device.z), bits(&host.z), "offset {offset}");
        let grads_device = net.backward(&device, &rows, &dz).unwrap();
        let grads_host = net.backward(&host, &rows, &dz).unwrap();
        assert_eq!(grads_device.len(), grads_host.len());
        for ((name, g), (_, h)) in grads_device.iter().zip(&grads_host) {
            assert_eq!(bits(g), bits(h), "offset {offset}: {name}");
        }
    }
}

#[test]
fn feature_net_backward_matches_candle_autograd() {
    // Samples 3, 0, 4 (0 twice: its gradient counts twice), in that order.
    let (b, rows) = (5, [3usize, 0, 4, 0]);
    let BackwardCase {
        cfg,
        net,
        obs,
        r,
        features,
        mut rng,
    } = check_feature_net_backward(11, b, &rows);
    let latent = 5;
    // The clamped ReLUs matter: some activations of the last layer are exactly zero.
    let h = features.encoded.h.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert!(h.contains(&0.0) && h.iter().any(|v| *v > 0.0));
    // A forward without the tape has no backward, but the same features.
    let plain = net.forward_pixels(&obs, b, false).unwrap();
    assert_eq!(rel_err(&plain.z, &features.z), 0.0);
    let err = net.backward(&plain, &rows, &r).err().unwrap().to_string();
    assert!(err.contains("keep = true"), "{err}");
    // The kernels tile output channels by 16; other widths are refused before any work.
    let narrow = EncoderConfig {
        num_filters: 6,
        ..cfg.clone()
    };
    let mut narrow_params = Params::new(&Device::Cpu);
    let narrow_net = lfs::nn::EncoderProjector::new(&narrow, latent, &mut narrow_params, &mut rng).unwrap();
    let err = narrow_net.forward_pixels(&obs, b, true).err().unwrap().to_string();
    assert!(
        err.contains("num_filters = 6") && err.contains("multiple of 16"),
        "{err}"
    );
}

#[test]
fn encoder_forward_is_one_op_with_candle_gradients() {
    // Encoder::forward on the CPU runs the whole encoder as one op (the tape's kernels) under
    // candle's autograd: features and all 8 gradients against candle's stock ops, loss Σ h ⊙ r.
    // An image that itself tracks a gradient takes the per-layer ops instead: same features.
    use rand::Rng;
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let (cfg, params, encoder, _) = small_encoder_projector(&mut rng);
    let b = 3;
    let pixels: Vec<f32> = (0..b * 9 * 21 * 21)
        .map(|_| rng.random_range(0..=255u8) as f32)
        .collect();
    let obs = Tensor::from_vec(pixels, (b, 9, 21, 21), &Device::Cpu).unwrap();
    let r: Vec<f32> = (0..b * 256).map(|_| rng.random_range(-1.0..1.0)).collect();
    let r = Tensor::from_vec(r, (b, 256), &Device::Cpu).unwrap();
    let h = encoder.forward(&obs).unwrap();
    let h_ref = stock_encoder(&params, &cfg, &obs);
    assert!(rel_err(&h, &h_ref) < 1e-6, "h: {}", rel_err(&h, &h_ref));
    let grads = (&h * &r).unwrap().sum_all().unwrap().backward().unwrap();
    let ref_grads = (&h_ref * &r).unwrap().sum_all().unwrap().backward().unwrap();
    for (name, var) in params.iter().filter(|(n, _)| n.starts_with("encoder.")) {
        let (ours, expected) = (grads.get(var.as_tensor()), ref_grads.get(var.as_tensor()));
        let err = rel_err(ours.expect(name), expected.expect(name));
        assert!(err < 1e-5, "{name}: relative error {err}");
    }
    let tracked = candle_core::Var::from_tensor(&obs).unwrap();
    let h_layers = encoder.forward(tracked.as_tensor()).unwrap();
    assert!(rel_err(&h_layers, &h_ref) < 1e-6);
    let image_grad = (&h_layers * &r).unwrap().sum_all().unwrap().backward().unwrap();
    assert!(image_grad.get(tracked.as_tensor()).is_some());
    // A wrong channel count is named, not a shape error deep inside.
    let rgb = Tensor::zeros((1, 3, 21, 21), candle_core::DType::F32, &Device::Cpu).unwrap();
    let err = encoder.forward(&rgb).unwrap_err().to_string();
    assert!(err.contains("input has 3 channels, the first conv takes 9"), "{err}");
}

#[test]
fn the_input_offset_shifts_every_path_of_the_encoder_alike() {
    // DrQ-v2's `obs / 255 - 0.5`: the kernels' forward with its tape, their backward, and
    // Encoder::forward (one op, and per-layer ops for a tracked image) against candle's stock
    // ops on the shifted input; and the shift changes the features.
    use rand::Rng;
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let (cfg, params, _, _) = small_encoder_projector(&mut rng);
    let cfg = EncoderConfig {
        input_offset: -0.5,
        ..cfg
    };
    let encoder = Encoder::from_params(&cfg, "encoder", &params).unwrap();
    let b = 3;
    let pixels: Vec<u8> = (0..b * 9 * 21 * 21).map(|_| rng.random()).collect();
    let obs = Tensor::from_slice(&pixels, (b, 9, 21, 21), &Device::Cpu)
        .unwrap()
        .to_dtype(candle_core::DType::F32)
        .unwrap();
    let h_ref = stock_encoder(&params, &cfg, &obs);
    let encoded = encoder.encode(&pixels, b, true).unwrap();
    assert!(
        rel_err(&encoded.h, &h_ref) < 1e-6,
        "encode: {}",
        rel_err(&encoded.h, &h_ref)
    );
    assert!(rel_err(&encoder.forward(&obs).unwrap(), &h_ref) < 1e-6, "forward");
    let tracked = candle_core::Var::from_tensor(&obs).unwrap();
    assert!(
        rel_err(&encoder.forward(tracked.as_tensor()).unwrap(), &h_ref) < 1e-6,
        "per-layer forward"
    );
    let unshifted = stock_encoder(
        &params,
        &EncoderConfig {
            input_offset: 0.0,
            ..cfg.clone()
        },
        &obs,
    );
    assert!(rel_err(&h_ref, &unshifted) > 1e-2, "the offset changed nothing");
    // The backward of the kernels' tape against candle's autograd on the shifted input.
    let r: Vec<f32> = (0..b * 256).map(|_| rng.random_range(-1.0..1.0)).collect();
    let r = Tensor::from_vec(r, (b, 256), &Device::Cpu).unwrap();
    let grads = encoder.backward(&encoded, &[0, 1, 2], &r).unwrap();
    let ref_grads = (&h_ref * &r).unwrap().sum_all().unwrap().backward().unwrap();
    for (name, grad) in &grads {
        let expected = ref_grads.get(params.get(name).unwrap().as_tensor()).unwrap();
        let err = rel_err(grad, expected);
        assert!(err < 1e-5, "{name}: relative error {err}");
    }
}
