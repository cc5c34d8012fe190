//! The device seam's checks (issue 29): candle's ops on `--device` against our CPU kernels on the
//! same inputs and seeds, each as a relative error ‖a − b‖ / ‖b‖ over a tensor (the worst tensor
//! of each check is reported; every check must be ≤ 1e-4), one JSON line per check:
//! - the encoder's features and its parameters' gradients (input offsets 0 and −0.5);
//! - one update of LFS, ATC and CURL: loss, online, target and Adam tensors;
//! - one SAC update from pixels, the critic's gradient stepping the encoder (`lfs train`'s
//!   SAC + critic gradient): critic loss, every agent tensor, the encoder;
//! - one DrQ-v2 update from pixels (encoder input offset −0.5, the critic's gradient stepping
//!   the encoder), and one TACO update: DrQ-v2's with latent actions, then the TACO loss on
//!   three more views stepping the heads, the action encoder and the encoder through an Adam of
//!   its own (`lfs train`'s order, src/rl_loop/workspace.rs);
//! - the replay's rows on the device (issue 52): pixel batches stacked and shifted from a copy of
//!   the frames (`DeviceFrames`), and the feature cache's rows as f32 and f16
//!   (`DeviceFeatureCache`), against the host replay's batches and `CachedFeatures`' rows, through
//!   evictions and a ring that grows (exact: every relative error 0);
//! - checkpoints across the two sides: the state after one update written to a safetensors file
//!   on one side and read into the other, then one more update on both (each way, for LFS and
//!   for SAC).
//!
//! `--bench` then times updates on `--device` alone (JSON lines, seconds per update, the median
//! of 10 after 3 warm-ups): LFS at B=512, with its parts, SAC on cached features at B=128
//! and 512, and DrQ-v2 from pixels at B=256 (frames on the device). `--bench-only` times them without the checks. Each bench's timed updates are
//! marked for a profiler (`cuProfilerStart`/`Stop`: eval/gpu/kprof, Nsight's capture range).
//! `--training-batch B` sets the batch of the last check, "encoder at a training batch" (256 on
//! a GPU, 4 on the CPU); `--training-batch-only` runs that check alone and prints every
//! tensor's error (h, then each gradient).
//!
//! On a build without CUDA, `--device cpu` checks candle's CPU ops, the code a GPU runs
//! (`tests/device.rs`); `make gpu-check` runs `--device cuda` on a lent GPU.
//!
//! `--precision tf32` (a CUDA device) runs candle's f32 GEMMs in TF32, as `run.precision`.
//!
//!     cargo run --release --example device_check -- --device cpu [--bench | --bench-only] [--precision tf32]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use candle_core::{Device, Tensor, Var};
use lfs::data::moving_squares::moving_square_episodes;
use lfs::data::{FrameStore, RandomShift};
use lfs::device::{Backend, DeviceChoice, Precision};
use lfs::nn::checkpoint;
use lfs::nn::encoder::Encoded;
use lfs::nn::{Adam, AdamConfig, Encoder, EncoderConfig, Params};
use lfs::objectives::Trainer;
use lfs::observation::StackIndices;
use lfs::pretrain::run::video_pair_sampler;
use lfs::pretrain::PretrainConfig;
use lfs::rl::{
    Batch, CachedFeatures, DeviceFeatureCache, DeviceFrames, DrQv2Agent, DrQv2Config, FeatureDtype, GradientPath,
    NStep, ReplayBuffer, SacAgent, SacConfig, SequenceViews, TacoAgent, TacoSettings,
};
use lfs::shards::Episode;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// As the `lfs` binary (src/alloc.rs).
#[global_allocator]
static GLOBAL: lfs::alloc::Allocator = lfs::alloc::Allocator {};

/// Every check's limit on the relative error (issue 29).
const LIMIT: f64 = 1e-4;
/// Pixels per observation: 9 × 84 × 84 (three stacked RGB frames).
const OBS_LEN: usize = 9 * 84 * 84;
const PREFIX: &str = "encoder";

fn main() -> anyhow::Result<()> {
    lfs::alloc::keep_freed_memory();
    let argv: Vec<String> = std::env::args().collect();
    let choice: DeviceChoice = flag_value(&argv, "--device")?.unwrap_or_default();
    // `--precision tf32`: candle's f32 GEMMs on the tensor cores (run.precision).
    let precision: Precision = flag_value(&argv, "--precision")?.unwrap_or_default();
    let device = choice.open(precision)?;
    // The side under test: candle's ops on the device (on the CPU too).
    let tested = Backend::candle(&device);
    let reference = Backend::default();
    let mut failed = Vec::new();
    let mut report = |check: &str, worst: Worst| {
        let ok = worst.rel_err <= LIMIT;
        println!(
            "{{\"check\":\"{check}\",\"device\":\"{choice}\",\"worst\":\"{}\",\"rel_err\":{:e},\"limit\":{LIMIT:e},\"ok\":{ok}}}",
            worst.name, worst.rel_err
        );
        if !ok {
            failed.push(check.to_string());
        }
    };
    let episodes = pretraining_episodes();
    if argv.iter().any(|a| a == "--bench-only") {
        return bench(&tested, &episodes);
    }
    if let Some(updates) = flag_value::<Count>(&argv, "--long")? {
        let batch: Option<Count> = flag_value(&argv, "--long-batch")?;
        return long_checks(&tested, &reference, &episodes, updates.0, batch.map(|b| b.0));
    }
    if let Some(updates) = flag_value::<Count>(&argv, "--memory")? {
        return memory_check(&tested, &episodes, updates.0);
    }
    // `--training-batch-only`: the last check alone (a diagnosis on a GPU, batch by batch).
    let only_training_batch = argv.iter().any(|a| a == "--training-batch-only");
    for offset in [0.0, -0.5] {
        if only_training_batch {
            break;
        }
        report(
            &format!("encoder offset={offset}"),
            encoder_check(&tested, &reference, offset, 6)?,
        );
    }
    if !only_training_batch {
        for method in ["lfs", "atc", "curl"] {
            report(
                &format!("pretrain {method}"),
                pretrain_check(method, &episodes, &tested, &reference, false)?,
            );
        }
        report(
            "pretrain lfs, resumed across",
            pretrain_check("lfs", &episodes, &tested, &reference, true)?,
        );
        report("sac from pixels", sac_check(&tested, &reference, false)?);
        report("sac from pixels, resumed across", sac_check(&tested, &reference, true)?);
        report("replay rows on the device", replay_rows_check(&device)?);
        report("drqv2 from pixels", drqv2_check(&tested, &reference, false)?);
        report("taco from pixels", drqv2_check(&tested, &reference, true)?);
    }
    // The encoder at a training batch (256 on a GPU; 4 on the CPU, where it checks the same code
    // as the first check), where a GPU's convolution algorithms are those of the real runs.
    // `--training-batch B` sets it (on the CPU, 256 compares candle's path with the kernels at
    // the GPU's size).
    let batch = match flag_value::<Count>(&argv, "--training-batch")? {
        Some(Count(b)) => b,
        None if device.is_cpu() => 4,
        None => 256,
    };
    let worst = encoder_check(&tested, &reference, 0.0, batch)?;
    if only_training_batch {
        // The diagnosis prints every tensor: the features h, then each parameter's gradient.
        for (name, rel_err) in &worst.each {
            println!("{{\"tensor\":\"{name}\",\"batch\":{batch},\"rel_err\":{rel_err:e}}}");
        }
    }
    report("encoder at a training batch", worst);
    if argv.iter().any(|a| a == "--bench") {
        bench(&tested, &episodes)?;
    }
    if !failed.is_empty() {
        bail!("{} check(s) over {LIMIT:e}: {}", failed.len(), failed.join(", "));
    }
    Ok(())
}

/// A count from the command line.
struct Count(usize);

impl std::str::FromStr for Count {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.parse().map(Count).map_err(|e| format!("{s:?}: {e}"))
    }
}

/// SAC's hidden width in the checks: the paper's 1024 on a GPU, whose GEMMs are then those of
/// the real runs; 256 on the CPU, where the orthogonal init of a 1024² layer (1.7 s, three per
/// agent, six agents) was a third of `tests/device.rs`' time, and the code checked is the same.
/// DrQ-v2 and TACO keep 1024: with DrQ-v2 at 256 and this check's data seed, the TACO loss's
/// gradients upstream of proj_sa's ReLU differ by 0.1–0.7% between the sides (those after it
/// agree, as the loss does to 1e-6): one hidden unit's input is +1.5e-6 on one side and −1.2e-6
/// on the other (BENCHMARKS.md, 2026-11-29); seeds 12 and 13 pass at 256, and 11–15 at 1024.
fn checks_hidden_dim(tested: &Backend) -> usize {
    if tested.device.is_cpu() {
        256
    } else {
        SacConfig::default().hidden_dim
    }
}

/// `--long N`: N updates of each training step the paper's runs take on a GPU, on both sides
/// from the same initial tensors and the same data, at the real batch sizes (LFS B=512, SAC on
/// cached features B=128 and 512, DrQ-v2 from pixels B=256; `--long-batch B` shrinks them all,
/// for the CPU's test). Each update's loss on the device against the CPU kernels': one JSON
/// line per step with both series, the largest relative gap and the first update past 1e-4.
/// The stated band: every update within 5% of the reference's loss (|Δ| ≤ 0.05·max(|ref|,
/// 0.01)). Rounding differences grow over updates, and LFS's LNC keeps a candidate or not by a
/// threshold on distances, so the two runs may part; the band says they stay the same training.
fn long_checks(
    tested: &Backend,
    reference: &Backend,
    episodes: &[Episode],
    updates: usize,
    batch: Option<usize>,
) -> anyhow::Result<()> {
    let mut failed = Vec::new();
    let mut report = |name: &str, b: usize, a: Vec<f64>, r: Vec<f64>| {
        const BAND: f64 = 0.05;
        let gaps: Vec<f64> = a
            .iter()
            .zip(&r)
            .map(|(x, y)| (x - y).abs() / y.abs().max(0.01))
            .collect();
        let max_gap = gaps.iter().copied().fold(0.0, f64::max);
        let first = gaps.iter().position(|g| *g > 1e-4).map(|i| i + 1);
        let ok = gaps.iter().all(|g| g.is_finite() && *g <= BAND);
        println!(
            "{}",
            serde_json::json!({"long": name, "batch": b, "updates": a.len(), "band": BAND, "max_rel_gap": max_gap,
                "first_update_over_1e-4": first, "ok": ok, "tested": a, "reference": r})
        );
        if !ok {
            failed.push(format!("{name} B={b}"));
        }
    };
    // LFS pre-training, each side's batches as its runs make them.
    let b = batch.unwrap_or(512);
    let cfg = pretrain_config("lfs", b)?;
    let mut losses = [Vec::new(), Vec::new()];
    for (side, backend) in [tested, reference].into_iter().enumerate() {
        let mut trainer = Trainer::new(&cfg.trainer_config(), backend)?;
        let mut source = video_pair_sampler(&cfg, episodes, &backend.device)?;
        for _ in 0..updates {
            losses[side].push(trainer.update(&mut source)?.loss);
        }
    }
    let [a, r] = losses;
    report("lfs", b, a, r);
    // SAC on cached features (a frozen encoder's): the same features and transitions each update.
    for b in batch.map_or(vec![128, 512], |b| vec![b]) {
        let cfg = SacConfig {
            batch_size: b,
            hidden_dim: checks_hidden_dim(tested),
            ..SacConfig::default()
        };
        let repr = Encoder::new(
            &EncoderConfig::default(),
            PREFIX,
            &mut Params::new(&Device::Cpu),
            &mut ChaCha8Rng::seed_from_u64(0),
        )?
        .repr_dim();
        let mut losses = [Vec::new(), Vec::new()];
        for (side, backend) in [tested, reference].into_iter().enumerate() {
            let device = &backend.device;
            let path = GradientPath::for_features(device, false);
            let mut agent = SacAgent::new(&cfg, repr, ACTION_DIM, path, device, &mut ChaCha8Rng::seed_from_u64(3))?;
            let (mut data_rng, mut rng) = (ChaCha8Rng::seed_from_u64(11), ChaCha8Rng::seed_from_u64(5));
            for step in 0..updates {
                let features: Vec<f32> = (0..2 * b * repr).map(|_| data_rng.random_range(0.0..0.5)).collect();
                let data = SacData::new(b, &mut data_rng);
                let batch = Batch {
                    obs: Tensor::from_slice(&features[..b * repr], (b, repr), device)?,
                    next_obs: Tensor::from_slice(&features[b * repr..], (b, repr), device)?,
                    action: Tensor::from_slice(&data.action, (b, ACTION_DIM), device)?,
                    reward: Tensor::from_slice(&data.reward, (b, 1), device)?,
                    discount: Tensor::full(0.99f32, (b, 1), device)?,
                };
                losses[side].push(agent.update(&batch, step as u64, &mut rng)?.critic_loss);
            }
        }
        let [a, r] = losses;
        report("sac on cached features", b, a, r);
    }
    // DrQ-v2 from pixels, the critic's gradient stepping the encoder.
    let b = batch.unwrap_or(256);
    let init = encoder_init(&drqv2_encoder_config())?;
    let mut losses = [Vec::new(), Vec::new()];
    for (side, backend) in [tested, reference].into_iter().enumerate() {
        let mut agent = DrQv2Side::new(&init, backend, false)?;
        let (mut data_rng, mut rng) = (ChaCha8Rng::seed_from_u64(11), ChaCha8Rng::seed_from_u64(5));
        for _ in 0..updates {
            let data = SacData::new(b, &mut data_rng);
            let views = TacoData::new(0, &mut data_rng);
            losses[side].push(agent.update(&data, &views, &mut rng)?.0);
        }
    }
    let [a, r] = losses;
    report("drqv2 from pixels", b, a, r);
    if !failed.is_empty() {
        bail!("outside the band: {}", failed.join(", "));
    }
    Ok(())
}

/// `--memory N`: N LFS updates at B=512 on the tested device alone, its memory in use (the
/// driver's total − free) read every 100 updates: one JSON line with the series and the growth
/// after update 200 (the allocator's pools warm up before it), which must stay under 64 MB.
fn memory_check(tested: &Backend, episodes: &[Episode], updates: usize) -> anyhow::Result<()> {
    let Some(_) = lfs::device::memory(&tested.device) else {
        println!(
            "{}",
            serde_json::json!({"memory": "lfs", "note": "no memory to read on the CPU"})
        );
        return Ok(());
    };
    let cfg = pretrain_config("lfs", 512)?;
    let mut trainer = Trainer::new(&cfg.trainer_config(), tested)?;
    let mut source = video_pair_sampler(&cfg, episodes, &tested.device)?;
    let mut used_mb = Vec::new();
    for i in 1..=updates {
        trainer.update(&mut source)?;
        if i % 100 == 0 {
            let (free, total) = lfs::device::memory(&tested.device).context("the device's memory")?;
            used_mb.push((total - free) as f64 / 1e6);
        }
    }
    let after = used_mb.get(1).copied().unwrap_or(0.0);
    let growth = used_mb.iter().skip(1).fold(0.0f64, |g, u| g.max(u - after));
    let ok = growth <= 64.0;
    println!(
        "{}",
        serde_json::json!({"memory": "lfs", "batch": 512, "updates": updates, "used_mb_every_100": used_mb,
            "growth_mb_after_200": growth, "limit_mb": 64, "ok": ok})
    );
    if !ok {
        bail!("the LFS update's memory grew {growth:.0} MB over {updates} updates");
    }
    Ok(())
}

/// The value after `flag` in `argv`, parsed; `None` without the flag.
fn flag_value<T: std::str::FromStr<Err = String>>(argv: &[String], flag: &str) -> anyhow::Result<Option<T>> {
    let Some(i) = argv.iter().position(|a| a == flag) else {
        return Ok(None);
    };
    let text = argv.get(i + 1).with_context(|| format!("{flag} needs a value"))?;
    Ok(Some(text.parse().map_err(anyhow::Error::msg)?))
}

/// The largest relative error of a check, and the tensor it was on.
#[derive(Debug, Default)]
struct Worst {
    name: String,
    rel_err: f64,
    /// Every tensor's relative error, in the order compared.
    each: Vec<(String, f64)>,
}

impl Worst {
    /// ‖a − b‖ / ‖b‖ on the host in f64 (b the reference), kept when it is the largest.
    fn compare(&mut self, name: &str, a: &Tensor, b: &Tensor) -> anyhow::Result<()> {
        let host = |t: &Tensor| -> anyhow::Result<Vec<f64>> {
            Ok(t.to_device(&Device::Cpu)?
                .flatten_all()?
                .to_dtype(candle_core::DType::F64)?
                .to_vec1()?)
        };
        let (a, b) = (host(a)?, host(b)?);
        if a.len() != b.len() {
            bail!("{name}: {} against {} elements", a.len(), b.len());
        }
        let diff = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt();
        let norm = b.iter().map(|y| y * y).sum::<f64>().sqrt();
        let rel_err = if norm > 0.0 { diff / norm } else { diff };
        self.each.push((name.to_string(), rel_err));
        if !rel_err.is_finite() || rel_err > self.rel_err || self.name.is_empty() {
            self.name = name.to_string();
            self.rel_err = if rel_err.is_finite() { rel_err } else { f64::INFINITY };
        }
        Ok(())
    }

    /// Every tensor of `b` against the same name in `a` (a missing one is an error).
    fn compare_all(&mut self, a: &BTreeMap<String, Tensor>, b: &BTreeMap<String, Tensor>) -> anyhow::Result<()> {
        for (name, reference) in b {
            let tested = a
                .get(name)
                .with_context(|| format!("{name}: missing on the tested side"))?;
            self.compare(name, tested, reference)?;
        }
        Ok(())
    }

    fn compare_scalar(&mut self, name: &str, a: f64, b: f64) -> anyhow::Result<()> {
        self.compare(name, &Tensor::new(a, &Device::Cpu)?, &Tensor::new(b, &Device::Cpu)?)
    }
}

fn random_pixels(n: usize, rng: &mut ChaCha8Rng) -> Vec<u8> {
    (0..n * OBS_LEN).map(|_| rng.random()).collect()
}

/// The encoder's initial tensors, made on the host (seed 7), for both sides.
fn encoder_init(cfg: &EncoderConfig) -> anyhow::Result<BTreeMap<String, Tensor>> {
    let mut host = Params::new(&Device::Cpu);
    Encoder::new(cfg, PREFIX, &mut host, &mut ChaCha8Rng::seed_from_u64(7))?;
    Ok(host.snapshot()?)
}

/// The paper's encoder on each side from the same host initialisation.
fn encoder_pair(cfg: &EncoderConfig, tested: &Backend, reference: &Backend) -> anyhow::Result<[(Params, Encoder); 2]> {
    let init = encoder_init(cfg)?;
    let side = |backend: &Backend| -> anyhow::Result<(Params, Encoder)> {
        let params = Params::from_tensors(&init, backend)?;
        let encoder = Encoder::from_params(cfg, PREFIX, &params)?;
        Ok((params, encoder))
    };
    Ok([side(tested)?, side(reference)?])
}

/// Features of 6 observations and the gradients for a random dh over rows with a repeat.
fn encoder_check(tested: &Backend, reference: &Backend, input_offset: f64, n: usize) -> anyhow::Result<Worst> {
    let cfg = EncoderConfig {
        input_offset,
        ..EncoderConfig::default()
    };
    let [(_, a), (_, b)] = encoder_pair(&cfg, tested, reference)?;
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let obs = random_pixels(n, &mut rng);
    let (ea, eb) = (a.encode(&obs, n, true)?, b.encode(&obs, n, true)?);
    let mut worst = Worst::default();
    worst.compare("h", &ea.h, &eb.h)?;
    // Rows of the batch (one twice, as LNC's selection may): 0, 2, 2, n − 1, and every third.
    let rows: Vec<usize> = [0, 2, 2, n - 1].into_iter().chain((3..n - 1).step_by(3)).collect();
    let dh: Vec<f32> = (0..rows.len() * a.repr_dim())
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let dh = Tensor::from_vec(dh, (rows.len(), a.repr_dim()), &Device::Cpu)?; // (rows, repr)
    let grads_a: BTreeMap<String, Tensor> = a.backward(&ea, &rows, &dh)?.into_iter().collect();
    let grads_b: BTreeMap<String, Tensor> = b.backward(&eb, &rows, &dh)?.into_iter().collect();
    // The gradients go through every ReLU, whose mask a forward that differs by rounding flips
    // where a pre-activation is within rounding of 0: at 256 samples a few such flips move the
    // gradients by ~1e-3 whatever the backward (examples/relu_kink.rs: weights perturbed by 1e-7
    // of themselves on the CPU give 8e-4). So when the tested side kept its activations (candle's
    // path), the reference's backward runs on those same activations, the same masks, and the
    // gradients check the backward alone; the forward is checked by h above. The gradients
    // against the reference's own forward are printed beside it (not checked). On the CPU,
    // where candle's forward and the kernels' give the same bits, against the kernels' backward.
    let on_reference = match tested.device.same_device(&reference.device) {
        true => None,
        false => ea.to_device(&reference.device).ok(),
    };
    let Some(ea_on_reference) = on_reference else {
        worst.compare_all(&grads_a, &grads_b)?;
        return Ok(worst);
    };
    let mut own_forward = Worst::default();
    own_forward.compare_all(&grads_a, &grads_b)?;
    println!(
        "{}",
        serde_json::json!({"note": "gradients against the reference's own forward (ReLU masks may differ)",
            "batch": n, "worst": own_forward.name, "rel_err": own_forward.rel_err})
    );
    let grads_b: BTreeMap<String, Tensor> = b.backward(&ea_on_reference, &rows, &dh)?.into_iter().collect();
    worst.compare_all(&grads_a, &grads_b)?;
    Ok(worst)
}

/// A host replay of random 84×84 frames that drops episodes, its frames copied to `device`
/// (`DeviceFrames`, 64 rows: it grows) and random features into two device caches (f32, f16;
/// 16 rows of 300) beside host `CachedFeatures`; each episode's batches (B=32, shift pad 4,
/// 3-step returns) from the device against the host's.
fn replay_rows_check(device: &Device) -> anyhow::Result<Worst> {
    const FRAME: usize = 3 * 84 * 84;
    const REPR: usize = 300;
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut replay = ReplayBuffer::new(120, FRAME, 1, 0, FeatureDtype::F32);
    let mut frames = DeviceFrames::new(64, (3, 84, 84), device)?;
    let dtypes = [FeatureDtype::F32, FeatureDtype::F16];
    let mut caches = dtypes.map(|d| DeviceFeatureCache::new(16, REPR, d, device).expect("a device cache"));
    let mut host: [Vec<CachedFeatures>; 2] = [Vec::new(), Vec::new()];
    let shift = RandomShift { pad: 4 };
    let returns = NStep { n: 3, discount: 0.99 };
    let mut worst = Worst::default();
    let store = |replay: &ReplayBuffer,
                 frames: &mut DeviceFrames,
                 caches: &mut [DeviceFeatureCache; 2],
                 host: &mut [Vec<CachedFeatures>; 2],
                 frame: &[u8],
                 rng: &mut ChaCha8Rng|
     -> anyhow::Result<()> {
        frames.drop_before(replay.first_episode());
        frames.push(frame)?;
        let h: Vec<f32> = (0..REPR).map(|_| rng.random_range(-50.0f32..50.0)).collect();
        for ((cache, host), dtype) in caches.iter_mut().zip(host.iter_mut()).zip(dtypes) {
            cache.drop_before(replay.first_episode());
            cache.push(&Tensor::from_vec(h.clone(), (1, REPR), device)?)?;
            while host.len() > replay.episodes().len() {
                host.remove(0);
            }
            if host.len() < replay.episodes().len() {
                host.push(CachedFeatures::new(dtype));
            }
            host.last_mut().expect("an episode").extend(&h)?;
        }
        Ok(())
    };
    for length in [40, 30, 50, 20, 45] {
        let first = random_pixels(1, &mut rng)[..FRAME].to_vec();
        replay.start_episode(&first)?;
        frames.start_episode(replay.first_episode());
        for cache in caches.iter_mut() {
            cache.check()?;
            cache.start_episode(replay.first_episode());
        }
        store(&replay, &mut frames, &mut caches, &mut host, &first, &mut rng)?;
        for _ in 0..length {
            let frame = random_pixels(1, &mut rng)[..FRAME].to_vec();
            replay.add(&[0.0], 1.0, &frame)?;
            store(&replay, &mut frames, &mut caches, &mut host, &frame, &mut rng)?;
        }
        let n = 32;
        let mut t = replay.sample(n, returns, &mut rng)?;
        let offsets = [shift.draw_offsets(n, &mut rng), shift.draw_offsets(n, &mut rng)].concat();
        let mut pick = offsets.iter();
        for obs in [&mut t.obs, &mut t.next_obs] {
            // the host's shift at the same offsets
            for image in obs.chunks_mut(OBS_LEN) {
                let mut out = vec![0u8; OBS_LEN];
                shift.shift_image(image, (9, 84, 84), *pick.next().expect("an offset"), &mut out);
                image.copy_from_slice(&out);
            }
        }
        let (obs, next) = frames.gather_shifted(&t.locations, returns.n, &offsets, &shift)?;
        let bytes = |b: &[u8]| Tensor::from_vec(b.to_vec(), (n, 9, 84, 84), &Device::Cpu);
        worst.compare("frames: O_t", &obs, &bytes(&t.obs)?)?;
        worst.compare("frames: O_t+n", &next, &bytes(&t.next_obs)?)?;
        for ((cache, host), dtype) in caches.iter().zip(&host).zip(dtypes) {
            let (a, b) = cache.gather(&t.locations, returns.n)?;
            let (mut want_a, mut want_b) = (Vec::new(), Vec::new());
            for &(e, i) in &t.locations {
                host[e].read_into(i * REPR..(i + 1) * REPR, &mut want_a);
                host[e].read_into((i + 3) * REPR..(i + 4) * REPR, &mut want_b);
            }
            let name = dtype.name();
            worst.compare(
                &format!("cache {name}: O_t"),
                &a,
                &Tensor::from_vec(want_a, (n, REPR), &Device::Cpu)?,
            )?;
            worst.compare(
                &format!("cache {name}: O_t+n"),
                &b,
                &Tensor::from_vec(want_b, (n, REPR), &Device::Cpu)?,
            )?;
        }
    }
    Ok(worst)
}

/// Two tasks of moving squares, 84×84.
fn pretraining_episodes() -> Vec<Episode> {
    let mut episodes = moving_square_episodes("walker_run", 0, 2, 16, None);
    episodes.extend(moving_square_episodes("cartpole_swingup", 1, 2, 16, None));
    episodes
}

fn pretrain_config(method: &str, batch: usize) -> anyhow::Result<PretrainConfig> {
    // Run from the checkout's root (make gpu-check, tests/device.rs).
    let overrides = [format!("objective.method={method}"), format!("run.batch_size={batch}")];
    PretrainConfig::load(Path::new("pipelines/tiny.toml"), &overrides)
        .context("run device_check from the checkout's root")
}

/// One update of `method` on each side (with `across`: one update, the state moved to a fresh
/// trainer of the other side, then a second update), compared tensor by tensor.
fn pretrain_check(
    method: &str,
    episodes: &[Episode],
    tested: &Backend,
    reference: &Backend,
    across: bool,
) -> anyhow::Result<Worst> {
    let cfg = pretrain_config(method, 16)?;
    let mut a = Trainer::new(&cfg.trainer_config(), tested)?;
    let mut b = Trainer::new(&cfg.trainer_config(), reference)?;
    // Each side's sampler as its runs make it: the frames on a GPU, the host's way on the CPU.
    let (mut source_a, mut source_b) = (
        video_pair_sampler(&cfg, episodes, &tested.device)?,
        video_pair_sampler(&cfg, episodes, &reference.device)?,
    );
    let mut worst = Worst::default();
    let (ma, mb) = (a.update(&mut source_a)?, b.update(&mut source_b)?);
    worst.compare_scalar("loss", ma.loss, mb.loss)?;
    if across {
        // Each side's state resumes on the other through a file: a (tested) continues from
        // b's, b from a's.
        let (state_a, state_b) = (through_file(a.state()?)?, through_file(b.state()?)?);
        a = Trainer::new(&cfg.trainer_config(), tested)?;
        a.load_state(&state_b.tensors, &state_b.counters, &state_b.path)?;
        let mut b_from_a = Trainer::new(&cfg.trainer_config(), reference)?;
        b_from_a.load_state(&state_a.tensors, &state_a.counters, &state_a.path)?;
        let (ma, mb, mba) = (
            a.update(&mut source_a)?,
            b.update(&mut source_b)?,
            b_from_a.update(&mut source_b)?,
        );
        worst.compare_scalar("loss after resuming", ma.loss, mb.loss)?;
        worst.compare_scalar("loss after resuming on the CPU", mba.loss, mb.loss)?;
    }
    worst.compare_all(&a.state()?.0, &b.state()?.0)?;
    Ok(worst)
}

/// A state as read back from the safetensors file it was written to.
struct Saved {
    path: PathBuf,
    tensors: BTreeMap<String, Tensor>,
    counters: BTreeMap<String, String>,
}

/// Writes `tensors` with `counters` as metadata (as the checkpoints do) and reads them back.
fn through_file((tensors, counters): (BTreeMap<String, Tensor>, BTreeMap<String, String>)) -> anyhow::Result<Saved> {
    let dir = std::env::temp_dir().join(format!("lfs-device-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("checkpoint.safetensors");
    let metadata: HashMap<String, String> = counters.into_iter().collect();
    checkpoint::save_atomic(&path, &tensors, &metadata)?;
    let file = checkpoint::load(&path)?;
    std::fs::remove_dir_all(&dir)?;
    Ok(Saved {
        path,
        tensors: file.tensors,
        counters: file.metadata.into_iter().collect(),
    })
}

/// SAC's networks and the encoder the critic trains, on one side.
struct SacSide {
    params: Params,
    encoder: Encoder,
    adam: Adam,
    agent: SacAgent,
    device: Device,
}

const ACTION_DIM: usize = 6;

impl SacSide {
    fn new(init: &BTreeMap<String, Tensor>, backend: &Backend, cfg: &SacConfig) -> anyhow::Result<Self> {
        let params = Params::from_tensors(init, backend)?;
        let encoder = Encoder::from_params(&EncoderConfig::default(), PREFIX, &params)?;
        let adam = Adam::new(AdamConfig::default(), &params);
        // The critic's gradient trains the encoder: features with their tape.
        let agent = SacAgent::new(
            cfg,
            encoder.repr_dim(),
            ACTION_DIM,
            GradientPath::for_features(&backend.device, true),
            &backend.device,
            &mut ChaCha8Rng::seed_from_u64(3),
        )?;
        Ok(Self {
            params,
            encoder,
            adam,
            agent,
            device: backend.device.clone(),
        })
    }

    /// One SAC update on shifted-free pixels, at agent step 0 (critic, actor, α and target), the
    /// critic's gradient stepping the encoder: returns the critic loss.
    fn update(&mut self, data: &SacData, rng: &mut ChaCha8Rng) -> anyhow::Result<f64> {
        let b = data.reward.len();
        let (encoded, batch) = data.encoded(&self.encoder, &self.device)?;
        let (metrics, dh) = self.agent.update_with_obs_grad(&batch, 0, rng)?;
        let dh = dh.context("the critic loss does not reach the encoder")?;
        let rows: Vec<usize> = (0..b).collect();
        let grads: BTreeMap<String, Tensor> = self.encoder.backward(&encoded, &rows, &dh)?.into_iter().collect();
        self.adam.step_named(&self.params, &grads)?;
        Ok(metrics.critic_loss)
    }

    fn tensors(&self) -> anyhow::Result<BTreeMap<String, Tensor>> {
        let mut all = self.agent.state()?.0;
        all.extend(self.params.snapshot()?);
        Ok(all)
    }

    /// A fresh side on `backend` restored from `other`'s state (the agent, the encoder and its
    /// Adam) through a file, as a checkpoint carries it.
    fn resumed(other: &SacSide, backend: &Backend, cfg: &SacConfig) -> anyhow::Result<Self> {
        let (mut tensors, meta) = other.agent.state()?;
        let mut counters: BTreeMap<String, String> = meta.into_iter().collect();
        tensors.extend(other.params.snapshot()?);
        tensors.extend(other.adam.state_tensors(&other.params)?);
        counters.insert("encoder_adam_step".into(), other.adam.step.to_string());
        let saved = through_file((tensors, counters))?;
        let encoder: BTreeMap<String, Tensor> = saved
            .tensors
            .iter()
            .filter(|(name, _)| name.starts_with(&format!("{PREFIX}.")))
            .map(|(name, t)| (name.clone(), t.clone()))
            .collect();
        let mut side = SacSide::new(&encoder, backend, cfg)?;
        let meta: HashMap<String, String> = saved.counters.clone().into_iter().collect();
        side.agent.load_state(&saved.tensors, &meta)?;
        let step = saved.counters["encoder_adam_step"].parse()?;
        side.adam.load_state(&side.params, &saved.tensors, step)?;
        Ok(side)
    }
}

/// A batch of pixels and transitions (host memory).
struct SacData {
    obs: Vec<u8>,
    next_obs: Vec<u8>,
    action: Vec<f32>,
    reward: Vec<f32>,
}

impl SacData {
    /// The batch with its observations encoded by `encoder` (obs a leaf whose gradient the
    /// encoder's backward takes, with its tape), on `device`.
    fn encoded(&self, encoder: &Encoder, device: &Device) -> anyhow::Result<(Encoded, Batch)> {
        let b = self.reward.len();
        let encoded = encoder.encode(&self.obs, b, true)?;
        let obs = Var::from_tensor(&encoded.h)?.as_tensor().clone(); // (b, repr), a leaf
        let next_obs = encoder.encode(&self.next_obs, b, false)?.h;
        let batch = Batch {
            obs,
            next_obs,
            action: Tensor::from_slice(&self.action, (b, ACTION_DIM), device)?,
            reward: Tensor::from_slice(&self.reward, (b, 1), device)?,
            discount: Tensor::full(0.99f32, (b, 1), device)?,
        };
        Ok((encoded, batch))
    }

    fn new(b: usize, rng: &mut ChaCha8Rng) -> Self {
        Self {
            obs: random_pixels(b, rng),
            next_obs: random_pixels(b, rng),
            action: (0..b * ACTION_DIM).map(|_| rng.random_range(-1.0..1.0)).collect(),
            reward: (0..b).map(|_| rng.random()).collect(),
        }
    }
}

/// One SAC update from pixels on each side (with `across`: the agent's state after it moved to
/// a fresh agent of the other side, then a second update), compared tensor by tensor.
fn sac_check(tested: &Backend, reference: &Backend, across: bool) -> anyhow::Result<Worst> {
    let cfg = SacConfig {
        batch_size: 8,
        hidden_dim: checks_hidden_dim(tested),
        ..SacConfig::default()
    };
    let init = encoder_init(&EncoderConfig::default())?;
    let (mut a, mut b) = (
        SacSide::new(&init, tested, &cfg)?,
        SacSide::new(&init, reference, &cfg)?,
    );
    let mut data_rng = ChaCha8Rng::seed_from_u64(11);
    let mut worst = Worst::default();
    let data = SacData::new(cfg.batch_size, &mut data_rng);
    let (mut rng_a, mut rng_b) = (ChaCha8Rng::seed_from_u64(5), ChaCha8Rng::seed_from_u64(5));
    worst.compare_scalar(
        "critic loss",
        a.update(&data, &mut rng_a)?,
        b.update(&data, &mut rng_b)?,
    )?;
    if across {
        // Each side's state (agent, encoder, the encoder's Adam) resumes on the other.
        let mut a2 = SacSide::resumed(&b, tested, &cfg)?;
        let mut b2 = SacSide::resumed(&a, reference, &cfg)?;
        let data = SacData::new(cfg.batch_size, &mut data_rng);
        let mut rng_b2 = rng_b.clone();
        let (la, lb, lb2) = (
            a2.update(&data, &mut rng_a)?,
            b.update(&data, &mut rng_b)?,
            b2.update(&data, &mut rng_b2)?,
        );
        worst.compare_scalar("critic loss after resuming", la, lb)?;
        worst.compare_scalar("critic loss after resuming on the CPU", lb2, lb)?;
        a = a2;
    }
    worst.compare_all(&a.tensors()?, &b.tensors()?)?;
    Ok(worst)
}

/// DrQ-v2's agent, or TACO's, and the encoder they train, on one side.
enum PixelAgent {
    DrQv2(Box<DrQv2Agent>),
    Taco(Box<TacoAgent>),
}

struct DrQv2Side {
    params: Params,
    encoder: Encoder,
    /// The encoder's Adam for the critic's gradient, and TACO's own (one each, as `lfs train`).
    critic_adam: Adam,
    taco_adam: Adam,
    agent: PixelAgent,
    device: Device,
}

/// K of TACO's action sequences (its default).
const TACO_K: usize = 3;

impl DrQv2Side {
    fn new(init: &BTreeMap<String, Tensor>, backend: &Backend, taco: bool) -> anyhow::Result<Self> {
        let params = Params::from_tensors(init, backend)?;
        let encoder = Encoder::from_params(&drqv2_encoder_config(), PREFIX, &params)?;
        let cfg = DrQv2Config {
            batch_size: 8,
            ..DrQv2Config::default()
        };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (repr, device) = (encoder.repr_dim(), &backend.device);
        let agent = match taco {
            false => PixelAgent::DrQv2(Box::new(DrQv2Agent::new(&cfg, repr, ACTION_DIM, device, &mut rng)?)),
            true => PixelAgent::Taco(Box::new(TacoAgent::new(
                &cfg,
                &TacoSettings::default(),
                repr,
                ACTION_DIM,
                device,
                &mut rng,
            )?)),
        };
        Ok(Self {
            critic_adam: Adam::new(AdamConfig::default(), &params),
            taco_adam: Adam::new(AdamConfig::default(), &params),
            params,
            encoder,
            agent,
            device: backend.device.clone(),
        })
    }

    /// One update at agent step 0 on `data` (TACO: then its loss on `views`' pixels, encoded by
    /// the encoder after its critic step); returns the critic loss and TACO's.
    fn update(&mut self, data: &SacData, views: &TacoData, rng: &mut ChaCha8Rng) -> anyhow::Result<(f64, f64)> {
        let (encoded, batch) = data.encoded(&self.encoder, &self.device)?;
        self.update_encoded(&encoded, &batch, views, rng)
    }

    /// [`DrQv2Side::update`] of a batch whose observations `encoded` encoded (with its tape).
    fn update_encoded(
        &mut self,
        encoded: &Encoded,
        batch: &Batch,
        views: &TacoData,
        rng: &mut ChaCha8Rng,
    ) -> anyhow::Result<(f64, f64)> {
        let b = batch.reward.dim(0)?;
        let rows: Vec<usize> = (0..b).collect();
        let (critic_loss, dh, mut taco_metrics) = match &mut self.agent {
            PixelAgent::DrQv2(agent) => {
                let (m, dh) = agent.update(batch, 0, rng)?;
                (m.critic_loss, dh, None)
            }
            PixelAgent::Taco(agent) => {
                let (m, dh) = agent.update(batch, 0, rng)?;
                (m.agent.critic_loss, dh, Some(m))
            }
        };
        let dh = dh.context("the critic loss does not reach the encoder")?;
        let grads: BTreeMap<String, Tensor> = self.encoder.backward(encoded, &rows, &dh)?.into_iter().collect();
        self.critic_adam.step_named(&self.params, &grads)?;
        let (PixelAgent::Taco(agent), Some(metrics)) = (&mut self.agent, taco_metrics.as_mut()) else {
            return Ok((critic_loss, 0.0));
        };
        let anchor = self.encoder.encode(&views.anchor, b, true)?;
        let sequence = SequenceViews {
            anchor: Var::from_tensor(&anchor.h)?.as_tensor().clone(),
            positive: self.encoder.encode(&views.positive, b, false)?.h,
            future: self.encoder.encode(&views.future, b, false)?.h,
            action_seq: Tensor::from_slice(&views.action_seq, (b, TACO_K, ACTION_DIM), &self.device)?,
        };
        let dh = agent
            .update_taco(&sequence, &batch.reward, metrics)?
            .context("the TACO loss does not reach the encoder")?;
        let grads: BTreeMap<String, Tensor> = self.encoder.backward(&anchor, &rows, &dh)?.into_iter().collect();
        self.taco_adam.step_named(&self.params, &grads)?;
        Ok((critic_loss, metrics.taco_loss))
    }

    fn tensors(&self) -> anyhow::Result<BTreeMap<String, Tensor>> {
        let mut all = match &self.agent {
            PixelAgent::DrQv2(agent) => agent.state()?.0,
            PixelAgent::Taco(agent) => agent.state()?.0,
        };
        all.extend(self.params.snapshot()?);
        for (name, adam) in [("critic_adam", &self.critic_adam), ("taco_adam", &self.taco_adam)] {
            all.extend(
                adam.state_tensors(&self.params)?
                    .into_iter()
                    .map(|(k, t)| (format!("{name}.{k}"), t)),
            );
        }
        Ok(all)
    }
}

/// DrQ-v2's encoder: the paper's, on pixels / 255 − 0.5.
fn drqv2_encoder_config() -> EncoderConfig {
    EncoderConfig {
        input_offset: -0.5,
        ..EncoderConfig::default()
    }
}

/// TACO's views of a batch: two more shifts of O_t, one of O_{t+K} (pixels), and a_t … a_{t+K−1}.
struct TacoData {
    anchor: Vec<u8>,
    positive: Vec<u8>,
    future: Vec<u8>,
    action_seq: Vec<f32>,
}

impl TacoData {
    fn new(b: usize, rng: &mut ChaCha8Rng) -> Self {
        Self {
            anchor: random_pixels(b, rng),
            positive: random_pixels(b, rng),
            future: random_pixels(b, rng),
            action_seq: (0..b * TACO_K * ACTION_DIM)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect(),
        }
    }
}

/// One DrQ-v2 update from pixels (with `taco`: TACO's update and its loss's) on each side,
/// compared tensor by tensor: the agent's state, the encoder and both of its Adams.
fn drqv2_check(tested: &Backend, reference: &Backend, taco: bool) -> anyhow::Result<Worst> {
    let init = encoder_init(&drqv2_encoder_config())?;
    let (mut a, mut b) = (
        DrQv2Side::new(&init, tested, taco)?,
        DrQv2Side::new(&init, reference, taco)?,
    );
    let mut data_rng = ChaCha8Rng::seed_from_u64(11);
    let data = SacData::new(8, &mut data_rng);
    let views = TacoData::new(8, &mut data_rng);
    let (mut rng_a, mut rng_b) = (ChaCha8Rng::seed_from_u64(5), ChaCha8Rng::seed_from_u64(5));
    let ((critic_a, taco_a), (critic_b, taco_b)) = (
        a.update(&data, &views, &mut rng_a)?,
        b.update(&data, &views, &mut rng_b)?,
    );
    let mut worst = Worst::default();
    worst.compare_scalar("critic loss", critic_a, critic_b)?;
    if taco {
        worst.compare_scalar("taco loss", taco_a, taco_b)?;
    }
    worst.compare_all(&a.tensors()?, &b.tensors()?)?;
    Ok(worst)
}

/// `--bench`: updates before the timed ones, and timed ones (each reported as their median).
const WARMUP: usize = 3;
const TIMED: usize = 10;

/// Seconds per update on the tested device: LFS at B=512 with its parts, SAC on cached
/// features at B=128 and 512 (the median of TIMED after WARMUP updates).
fn bench(tested: &Backend, episodes: &[Episode]) -> anyhow::Result<()> {
    let cfg = pretrain_config("lfs", 512)?;
    let mut trainer = Trainer::new(&cfg.trainer_config(), tested)?;
    let mut source = video_pair_sampler(&cfg, episodes, &tested.device)?;
    eprintln!("lfs update bench: {}", source.describe_frames());
    // The whole update, and the trainer's own parts of it (data: sampling, shift and LNC's
    // selection, which reads its scores on the host; on a GPU the later parts' boundaries are
    // where the host waits, so only their sum is exact).
    let mut parts: [Vec<f64>; 5] = Default::default();
    for i in 0..(WARMUP + TIMED) {
        if i == WARMUP {
            profiler_range(&tested.device, true);
        }
        let start = Instant::now();
        let m = trainer.update(&mut source)?; // its loss is read on the host: the update has finished
        if i >= WARMUP {
            let seconds = start.elapsed().as_secs_f64();
            for (v, x) in parts.iter_mut().zip([
                seconds,
                m.seconds_data,
                m.seconds_forward,
                m.seconds_backward,
                m.seconds_optimizer,
            ]) {
                v.push(x);
            }
        }
    }
    profiler_range(&tested.device, false);
    let [whole, data, forward, backward, optimizer] = parts;
    let median = |v: Vec<f64>| Spread::of(v).median_s;
    let mut line = bench_line("lfs update", 512, whole);
    for (name, v) in [
        ("data", data),
        ("forward", forward),
        ("backward", backward),
        ("optimizer", optimizer),
    ] {
        line[name] = serde_json::json!(median(v));
    }
    println!("{line}");
    for batch in [128, 512] {
        let cfg = SacConfig {
            batch_size: batch,
            ..SacConfig::default()
        };
        let device = &tested.device;
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let repr = Encoder::new(
            &EncoderConfig::default(),
            PREFIX,
            &mut Params::new(&Device::Cpu),
            &mut rng,
        )?
        .repr_dim();
        let path = GradientPath::for_features(device, false);
        let mut agent = SacAgent::new(&cfg, repr, ACTION_DIM, path, device, &mut rng)?;
        let features: Vec<f32> = (0..batch * repr).map(|_| rng.random_range(0.0..0.5)).collect();
        let obs = Tensor::from_vec(features, (batch, repr), device)?;
        let data = SacData::new(batch, &mut rng);
        let sac_batch = Batch {
            obs: obs.clone(),
            next_obs: obs,
            action: Tensor::from_slice(&data.action, (batch, ACTION_DIM), device)?,
            reward: Tensor::from_slice(&data.reward, (batch, 1), device)?,
            discount: Tensor::full(0.99f32, (batch, 1), device)?,
        };
        let mut times = Vec::new();
        for i in 0..(WARMUP + TIMED) {
            if i == WARMUP {
                profiler_range(device, true);
            }
            let start = Instant::now();
            // Even steps: the actor, α and the target too. Its metrics are read on the host (α
            // last), so the update has finished when it returns.
            agent.update(&sac_batch, 2 * i as u64, &mut rng)?;
            if i >= WARMUP {
                times.push(start.elapsed().as_secs_f64());
            }
        }
        profiler_range(device, false);
        println!("{}", bench_line("sac update, cached features", batch, times));
    }
    println!(
        "{}",
        bench_line("drqv2 update", DRQV2_BENCH_BATCH, drqv2_bench(tested)?)
    );
    Ok(())
}

/// The spread of a bench's timed updates, as strong_torch.py's summary line reports PyTorch's:
/// median, extremes and quartiles (Python's `statistics.quantiles(n=4)`, its exclusive method).
#[derive(serde::Serialize)]
struct Spread {
    median_s: f64,
    min_s: f64,
    max_s: f64,
    q1_s: f64,
    q3_s: f64,
}

impl Spread {
    fn of(mut t: Vec<f64>) -> Self {
        t.sort_by(f64::total_cmp);
        let n = t.len();
        let median = match n % 2 {
            1 => t[n / 2],
            _ => (t[n / 2 - 1] + t[n / 2]) / 2.0,
        };
        // statistics.quantiles(t, n=4): m = n + 1, j = i·m div 4, δ = i·m mod 4.
        let quartile = |i: usize| {
            let (j, delta) = ((i * (n + 1)) / 4, ((i * (n + 1)) % 4) as f64);
            let (lo, hi) = (t[j.clamp(1, n) - 1], t[j.min(n - 1)]);
            (lo * (4.0 - delta) + hi * delta) / 4.0
        };
        Self {
            median_s: median,
            min_s: t[0],
            max_s: t[n - 1],
            q1_s: quartile(1),
            q3_s: quartile(3),
        }
    }
}

/// One bench's JSON line: its name, batch, the median as `seconds` and the spread.
fn bench_line(bench: &str, batch: usize, times: Vec<f64>) -> serde_json::Value {
    let updates = times.len();
    let spread = Spread::of(times);
    let mut line = serde_json::json!({"bench": bench, "batch": batch, "seconds": spread.median_s, "updates": updates});
    if let (Some(line), Ok(serde_json::Value::Object(spread))) = (line.as_object_mut(), serde_json::to_value(&spread)) {
        line.extend(spread);
    }
    line
}

/// DrQ-v2's batch in the bench, as strong_torch.py's `--batch-drqv2` default (upstream's 256).
const DRQV2_BENCH_BATCH: usize = 256;

/// Seconds of each timed DrQ-v2 update from pixels as `lfs train` makes it on a GPU, the work of
/// strong_torch.py's "drqv2" suite: the observations' frames kept on the device (random bytes),
/// each update's obs and next_obs gathered there with a random shift of ±4 pixels, encoded (obs
/// with its tape), then the agent's update (critic, actor, target's EMA), the encoder's backward
/// and its Adam step. Its critic loss is read on the host, so each update has finished.
fn drqv2_bench(tested: &Backend) -> anyhow::Result<Vec<f64>> {
    let b = DRQV2_BENCH_BATCH;
    let device = &tested.device;
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let mut side = DrQv2Side::new(&encoder_init(&drqv2_encoder_config())?, tested, false)?;
    // 2B observations of 3 frames each, every frame its own row of the store.
    let frames = Tensor::from_vec(random_pixels(2 * b, &mut rng), (2 * b * 3, OBS_LEN / 3), device)?;
    let store = FrameStore::new(frames, (3, 84, 84))?;
    let stacks: Vec<StackIndices> = (0..2 * b).map(|i| [3 * i, 3 * i + 1, 3 * i + 2]).collect();
    let views = TacoData::new(0, &mut rng);
    let mut times = Vec::new();
    for i in 0..(WARMUP + TIMED) {
        if i == WARMUP {
            profiler_range(device, true);
        }
        let action: Vec<f32> = (0..b * ACTION_DIM).map(|_| rng.random_range(-1.0..1.0)).collect();
        let reward: Vec<f32> = (0..b).map(|_| rng.random()).collect();
        let start = Instant::now();
        let shifts: Vec<(isize, isize)> = (0..2 * b)
            .map(|_| {
                (
                    rng.random_range(-4i32..=4) as isize,
                    rng.random_range(-4i32..=4) as isize,
                )
            })
            .collect();
        let pixels = store.gather(&stacks, &shifts)?; // (2B, 9, 84, 84) u8
        let encoded = side.encoder.encode_tensor(&pixels.narrow(0, 0, b)?, true)?;
        let batch = Batch {
            obs: Var::from_tensor(&encoded.h)?.as_tensor().clone(), // (B, repr), a leaf
            next_obs: side.encoder.encode_tensor(&pixels.narrow(0, b, b)?, false)?.h,
            action: Tensor::from_vec(action, (b, ACTION_DIM), device)?,
            reward: Tensor::from_vec(reward, (b, 1), device)?,
            discount: Tensor::full(0.99f32, (b, 1), device)?,
        };
        side.update_encoded(&encoded, &batch, &views, &mut rng)?;
        if i >= WARMUP {
            times.push(start.elapsed().as_secs_f64());
        }
    }
    profiler_range(device, false);
    Ok(times)
}

/// Marks the timed updates of a bench for a profiler (`cuProfilerStart` / `cuProfilerStop`,
/// which eval/gpu/kprof and Nsight Systems' `--capture-range=cudaProfilerApi` follow), after the
/// device has finished what came before; nothing on the CPU.
fn profiler_range(device: &Device, start: bool) {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(dev) = device {
        use candle_core::cuda::cudarc::driver::sys;
        let _ = dev.cuda_stream().synchronize();
        // SAFETY: no arguments; the result (profiling not available) is not needed.
        unsafe {
            let _ = if start {
                sys::cuProfilerStart()
            } else {
                sys::cuProfilerStop()
            };
        }
    }
    let _ = (device, start);
}
