//! `replay.sampling`: the replay drawing as DrQ-v2's loader does (`drqv2`), against a Python
//! transcription of facebookresearch/drqv2 @c0c650b's loader (tests/fixtures/replay/
//! drqv2_loader.py: which episodes each sample of each batch can come from); its state resumed
//! exactly; the setting written only when chosen, and chosen by every DrQ-v2 and TACO pipeline.

use std::collections::BTreeSet;
use std::path::PathBuf;

use lfs::rl::replay_sampling::DrQv2Loader;
use lfs::rl::{FeatureDtype, NStep, ReplayBuffer, ReplaySampling, SamplingState, StoredEpisode, Transitions};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

/// 3-step returns: an episode of 10 transitions has 8 valid steps.
const RETURNS: NStep = NStep { n: 3, discount: 0.99 };
const FRAME_LEN: usize = 12;

/// The reference's timeline and, per batch, the episodes each sample is drawn from.
struct Reference {
    episode_length: u64,
    seed_steps: u64,
    update_every_steps: u64,
    batch_size: usize,
    batches: Vec<RefBatch>,
}

struct RefBatch {
    shard: usize,
    finished: u64,
    /// (first sample, episodes held from there on); empty: upstream's worker holds nothing.
    segments: Vec<(usize, Vec<u64>)>,
}

impl RefBatch {
    /// The episodes sample `i` is drawn from: upstream's, or where its worker holds none (it
    /// would raise), lfs's fallback: every finished episode.
    fn expected(&self, i: usize) -> Vec<u64> {
        let held = self
            .segments
            .iter()
            .rev()
            .find(|(from, _)| *from <= i)
            .map(|(_, held)| held.clone())
            .unwrap_or_default();
        match held.is_empty() {
            true => (0..self.finished).collect(),
            false => held,
        }
    }
}

fn reference() -> Reference {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/replay/drqv2_loader.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let int = |v: &Value| v.as_u64().unwrap();
    Reference {
        episode_length: int(&v["episode_length"]),
        seed_steps: int(&v["seed_steps"]),
        update_every_steps: int(&v["update_every_steps"]),
        batch_size: int(&v["batch_size"]) as usize,
        batches: v["batches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| RefBatch {
                shard: int(&b["shard"]) as usize,
                finished: int(&b["finished"]),
                segments: b["segments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| (int(&s[0]) as usize, s[1].as_array().unwrap().iter().map(int).collect()))
                    .collect(),
            })
            .collect(),
    }
}

/// Frame k of episode e: every byte (e·10 + k) mod 256, so a sample says where it came from.
fn frame(e: u64, k: u64) -> Vec<u8> {
    vec![((e * 10 + k) % 256) as u8; FRAME_LEN]
}

fn buffer(capacity: usize, sampling: ReplaySampling) -> ReplayBuffer {
    ReplayBuffer::new(capacity, FRAME_LEN, 1, 0, FeatureDtype::F32).with_sampling(sampling)
}

/// lfs's loop on the reference's timeline, agent steps `steps`: an episode starts at every
/// multiple of its length, a batch is drawn (before the step's transition is stored) at the
/// reference's update steps, and `on_batch(u, replay, batch)` sees batch u.
fn drive(
    r: &Reference,
    replay: &mut ReplayBuffer,
    steps: std::ops::Range<u64>,
    rng: &mut ChaCha8Rng,
    mut on_batch: impl FnMut(usize, &mut ReplayBuffer, &Transitions),
) {
    for s in steps {
        let (e, k) = (s / r.episode_length, s % r.episode_length);
        if k == 0 {
            replay.start_episode(&frame(e, 0)).unwrap();
        }
        if s >= r.seed_steps && (s - r.seed_steps).is_multiple_of(r.update_every_steps) {
            let u = ((s - r.seed_steps) / r.update_every_steps) as usize;
            if u < r.batches.len() {
                let t = replay.sample(r.batch_size, RETURNS, rng).unwrap();
                on_batch(u, replay, &t);
            }
        }
        replay.add(&[k as f32], (e * 100 + k) as f32, &frame(e, k + 1)).unwrap();
    }
}

/// The steps that draw every batch of the reference.
fn all_steps(r: &Reference) -> std::ops::Range<u64> {
    0..r.seed_steps + r.update_every_steps * r.batches.len() as u64
}

/// The episode number of each sample of `t`.
fn numbers(replay: &ReplayBuffer, t: &Transitions) -> Vec<u64> {
    t.locations
        .iter()
        .map(|&(e, _)| replay.first_episode() + e as u64)
        .collect()
}

/// Runs the reference's timeline on `replay` (`meddle` may change it before batch u) and checks
/// that every sample comes from an episode the reference's worker holds then; Err names the
/// first that does not. Ok: the (shard, episode) pairs drawn.
fn check_draws(
    replay: &mut ReplayBuffer,
    mut meddle: impl FnMut(usize, &mut ReplayBuffer),
) -> Result<BTreeSet<(usize, u64)>, String> {
    let r = reference();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut drawn = BTreeSet::new();
    let mut first_error = None;
    // The batch after u's: `meddle` runs before each batch is drawn.
    meddle(0, replay);
    drive(&r, replay, all_steps(&r), &mut rng, |u, replay, t| {
        let b = &r.batches[u];
        for (i, number) in numbers(replay, t).into_iter().enumerate() {
            if !b.expected(i).contains(&number) && first_error.is_none() {
                first_error = Some(format!(
                    "batch {u} (shard {}), sample {i}: episode {number}, not among {:?}",
                    b.shard,
                    b.expected(i)
                ));
            }
            drawn.insert((b.shard, number));
        }
        meddle(u + 1, replay);
    });
    first_error.map_or(Ok(drawn), Err)
}

#[test]
fn drqv2_sampling_holds_what_drqv2s_loader_holds() {
    let r = reference();
    // The loader's own rule, sample by sample, against the reference's sets exactly.
    let mut loader = DrQv2Loader::default();
    for (u, b) in r.batches.iter().enumerate() {
        let shard = loader.start_batch();
        assert_eq!(shard, b.shard, "batch {u}");
        assert_eq!(shard, u % 4, "batch {u}: the shards take turns");
        let step = r.seed_steps + r.update_every_steps * u as u64;
        // Every stored episode (nothing is dropped here): 8 valid steps each once finished, the
        // one being recorded as many as its transitions allow.
        let counts: Vec<usize> = (0..=b.finished)
            .map(|e| match e < b.finished {
                true => 8,
                false => ((step % r.episode_length) as usize + 1).saturating_sub(3),
            })
            .collect();
        for i in 0..r.batch_size {
            let visible = loader.before_sample(shard, b.finished);
            let ours: Vec<u64> = DrQv2Loader::episodes(shard, visible, 0, &counts)
                .into_iter()
                .map(|e| e as u64)
                .collect();
            assert_eq!(ours, b.expected(i), "batch {u}, sample {i}");
        }
    }

    // The buffer's draws: each from a set the reference holds, and over the run every episode
    // of every set drawn by its shard.
    let mut replay = buffer(1_000_000, ReplaySampling::DrQv2);
    let drawn = check_draws(&mut replay, |_, _| {}).unwrap();
    let possible: BTreeSet<(usize, u64)> = r
        .batches
        .iter()
        .flat_map(|b| (0..r.batch_size).flat_map(move |i| b.expected(i).into_iter().map(move |e| (b.shard, e))))
        .collect();
    assert_eq!(drawn, possible);

    // By hand, from the timeline (episodes of 10 steps, batches of 64 from step 25, one per step):
    // shard 0 draws batches 0, 4, 8, … and refreshes at its samples 0, 1000, … : 1000 = 15
    // batches of 64 + 40, so at batch 60's sample 40 (step 85). Episode 4 ends at step 50, yet
    // shard 0 draws only episode 0 until then, and episode 4 (not the running 8) from there.
    // (Shards 2 and 3 hold nothing until their refresh at batches 62 and 63: they fall back to
    // every finished episode, episode 4 among them.)
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut replay = buffer(1_000_000, ReplaySampling::DrQv2);
    let mut first_draw_of_4 = None;
    drive(&r, &mut replay, all_steps(&r), &mut rng, |u, replay, t| {
        for (i, number) in numbers(replay, t).into_iter().enumerate() {
            if u < 60 || (u == 60 && i < 40) {
                if u % 4 == 0 {
                    assert_eq!(number, 0, "batch {u}, sample {i}");
                }
            } else if u == 60 {
                assert!([0, 4].contains(&number), "batch 60, sample {i}: episode {number}");
            }
            if u % 4 == 0 && number == 4 && first_draw_of_4.is_none() {
                first_draw_of_4 = Some((u, i));
            }
        }
    });
    let (u, i) = first_draw_of_4.unwrap();
    assert!(
        (u, i) >= (60, 40),
        "shard 0 first drew episode 4 at batch {u}, sample {i}"
    );
}

#[test]
fn the_reference_check_catches_uniform_draws_and_an_early_refresh() {
    // Uniform sampling draws the episode being recorded and other shards' episodes.
    let err = check_draws(&mut buffer(1_000_000, ReplaySampling::Uniform), |_, _| {}).unwrap_err();
    assert!(err.contains("batch 0 (shard 0)"), "{err}");
    // A loader that refreshes at batch 30 rather than at its 1000th sample draws episode 4
    // (finished at step 50) before batch 60.
    let early = |u: usize, replay: &mut ReplayBuffer| {
        if u == 30 {
            let mut state = replay.sampling_state().unwrap();
            for shard in &mut state.loader.shards {
                shard.since_fetch = 1000;
            }
            replay.restore_sampling(state).unwrap();
        }
    };
    let err = check_draws(&mut buffer(1_000_000, ReplaySampling::DrQv2), early).unwrap_err();
    assert!(err.contains("episode 4, not among [0]"), "{err}");
}

/// What a checkpoint keeps of `replay`'s episodes.
fn stored(replay: &ReplayBuffer) -> Vec<StoredEpisode> {
    replay
        .episodes()
        .iter()
        .map(|e| StoredEpisode {
            frames: e.frames.clone(),
            actions: e.actions.clone(),
            rewards: e.rewards.clone(),
        })
        .collect()
}

/// Each batch's samples: (episode number, step, reward, the newest byte of O_t).
type Draws = Vec<Vec<(u64, usize, f32, u8)>>;

fn record(draws: &mut Draws, replay: &ReplayBuffer, t: &Transitions) {
    let obs_len = t.obs.len() / t.len;
    draws.push(
        (0..t.len)
            .map(|i| {
                let (e, step) = t.locations[i];
                (
                    replay.first_episode() + e as u64,
                    step,
                    t.reward[i],
                    t.obs[(i + 1) * obs_len - 1],
                )
            })
            .collect(),
    );
}

#[test]
fn drqv2_sampling_resumes_exactly_from_its_state() {
    let r = reference();
    let end = all_steps(&r).end;
    // 45 transitions: the buffer drops its oldest episodes, so numbers no longer start at 0.
    let capacity = 45;
    let mut whole = Draws::new();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut replay = buffer(capacity, ReplaySampling::DrQv2);
    drive(&r, &mut replay, 0..end, &mut rng, |_, replay, t| {
        record(&mut whole, replay, t)
    });

    // Stopped at an episode's end (where the loop checkpoints: step 150, after batch 124's
    // refresh), its state written as the checkpoint writes it, and resumed in a new buffer.
    let stop = 150;
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut replay = buffer(capacity, ReplaySampling::DrQv2);
    let mut before = Draws::new();
    drive(&r, &mut replay, 0..stop, &mut rng, |_, replay, t| {
        record(&mut before, replay, t)
    });
    let state = replay.sampling_state().unwrap();
    assert!(state.first_episode > 0, "{state:?}");
    assert!(
        state.loader.shards.iter().all(|s| s.since_fetch > 0 && s.visible > 0),
        "{state:?}"
    );
    let json = serde_json::to_string(&state).unwrap();
    let resume = |with_state: bool| -> Draws {
        let mut again = buffer(capacity, ReplaySampling::DrQv2);
        again.restore(stored(&replay)).unwrap();
        if with_state {
            again
                .restore_sampling(serde_json::from_str::<SamplingState>(&json).unwrap())
                .unwrap();
        }
        let mut rng = rng.clone();
        let mut after = before.clone();
        drive(&r, &mut again, stop..end, &mut rng, |_, replay, t| {
            record(&mut after, replay, t)
        });
        after
    };
    assert_eq!(resume(true), whole);
    // Without its state (counts restarted, episodes renumbered from 0) the draws differ.
    assert_ne!(resume(false), whole);
    // A uniformly sampling buffer has no state to keep, and takes none.
    let mut uniform = buffer(capacity, ReplaySampling::Uniform);
    assert!(uniform.sampling_state().is_none());
    assert!(uniform.restore_sampling(state).is_err());
}

#[test]
fn drqv2_sampling_draws_the_running_episode_only_before_any_has_finished() {
    let mut replay = buffer(100, ReplaySampling::DrQv2);
    replay.start_episode(&frame(0, 0)).unwrap();
    for k in 0..5 {
        replay.add(&[0.0], 0.0, &frame(0, k + 1)).unwrap();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let t = replay.sample(32, RETURNS, &mut rng).unwrap();
    assert!(
        t.locations.iter().all(|&(e, step)| e == 0 && step < 3),
        "{:?}",
        t.locations
    );
    // Once it has ended, the next (running) episode is never drawn.
    replay.start_episode(&frame(1, 0)).unwrap();
    for k in 0..5 {
        replay.add(&[0.0], 0.0, &frame(1, k + 1)).unwrap();
    }
    for _ in 0..8 {
        let t = replay.sample(32, RETURNS, &mut rng).unwrap();
        assert!(t.locations.iter().all(|&(e, _)| e == 0), "{:?}", t.locations);
    }
}

#[test]
fn replay_sampling_is_written_only_when_drqv2_and_every_drqv2_and_taco_pipeline_chooses_it() {
    use lfs::rl_loop::train::TrainConfig;
    use lfs::rl_loop::LoopConfig;
    // Not chosen, or chosen as the default: nothing written, as before the setting existed.
    let default = LoopConfig::default().to_toml().unwrap();
    assert!(!default.contains("sampling"), "{default}");
    assert!(!TrainConfig::default().to_toml().unwrap().contains("sampling"));
    let uniform = LoopConfig::from_toml_str("[replay]\nsampling = \"uniform\"\n", &[]).unwrap();
    assert_eq!(uniform.to_toml().unwrap(), default);
    // Chosen: written, and read back the same.
    let drqv2 = LoopConfig::from_toml_str("[replay]\nsampling = \"drqv2\"\n", &[]).unwrap();
    assert_eq!(drqv2.replay.sampling, ReplaySampling::DrQv2);
    let text = drqv2.to_toml().unwrap();
    assert!(text.contains("sampling = \"drqv2\""), "{text}");
    assert_eq!(LoopConfig::from_toml_str(&text, &[]).unwrap(), drqv2);
    assert_ne!(drqv2.resume_key().unwrap(), uniform.resume_key().unwrap());
    let err = LoopConfig::from_toml_str("[replay]\nsampling = \"upstream\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("`uniform`") && err.contains("`drqv2`"), "{err}");

    let repo = crate::common::repo();
    for dir in ["drqv2", "taco", "e2e", "sac"] {
        for entry in std::fs::read_dir(repo.join("pipelines").join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let sampling = match dir {
                "sac" => LoopConfig::load(&path, &[]).unwrap().replay.sampling,
                _ => TrainConfig::load(&path, &[]).unwrap().replay.sampling,
            };
            let expected = match dir {
                "drqv2" | "taco" => ReplaySampling::DrQv2,
                _ => ReplaySampling::Uniform,
            };
            assert_eq!(sampling, expected, "{}", path.display());
        }
    }
}
