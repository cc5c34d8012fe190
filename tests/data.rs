//! Frame stacks, frame-mask indices, random shift and the pair sampler (docs/design.md §1–2).

use lfs::data::{frame_mask_pair, real_pair, PairKind, PairSampler, RandomShift, SamplerConfig, TaskBatching};
use lfs::observation::stack_frames;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::synthetic_episodes::counting_episode;

#[test]
fn frame_mask_drops_the_middle_frame() {
    // By hand from docs/design.md §2 / paper Eq. 2, oldest first: prev [F_{t-4}, F_{t-3}, F_{t-1}],
    // cur [F_{t-3}, F_{t-1}, F_t].
    let p = frame_mask_pair(10).unwrap();
    assert_eq!(p.prev, [6, 7, 9]);
    assert_eq!(p.cur, [7, 9, 10]);
    let p = frame_mask_pair(4).unwrap();
    assert_eq!((p.prev, p.cur), ([0, 1, 3], [1, 3, 4]));
    // Five real frames are needed.
    assert!(frame_mask_pair(3).is_none());
}

#[test]
fn real_pairs_repeat_the_first_frame_at_episode_start() {
    // O_0 = [F0, F0, F0], O_1 = [F0, F0, F1], O_2 = [F0, F1, F2] (dm_control frame stack).
    let p = real_pair(1).unwrap();
    assert_eq!((p.prev, p.cur), ([0, 0, 0], [0, 0, 1]));
    let p = real_pair(2).unwrap();
    assert_eq!((p.prev, p.cur), ([0, 0, 1], [0, 1, 2]));
    let p = real_pair(7).unwrap();
    assert_eq!((p.prev, p.cur), ([4, 5, 6], [5, 6, 7]));
    assert!(real_pair(0).is_none());
}

#[test]
fn stacked_observation_is_oldest_first_in_channels() {
    let ep = counting_episode(6, 2, 3);
    let mut out = vec![0u8; 9 * 6];
    stack_frames(&ep, [1, 3, 5], &mut out);
    // Channels 0..3 hold frame 1, 3..6 frame 3, 6..9 frame 5.
    let per_frame: Vec<u8> = out.chunks(3 * 6).map(|c| c[0]).collect();
    assert_eq!(per_frame, vec![1, 3, 5]);
    assert!(out.chunks(3 * 6).all(|c| c.iter().all(|v| *v == c[0])));
}

#[test]
fn random_shift_is_replicate_pad_then_crop() {
    // A 1×3×3 image; pad 1: offset (0, 0) moves the image down-right by one pixel with the
    // top row / left column replicated; offset (2, 2) moves it up-left. Worked by hand.
    let shift = RandomShift { pad: 1 };
    let src = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
    let mut out = [0u8; 9];
    shift.shift_image(&src, (1, 3, 3), (0, 0), &mut out);
    assert_eq!(out, [1, 1, 2, 1, 1, 2, 4, 4, 5]);
    shift.shift_image(&src, (1, 3, 3), (2, 2), &mut out);
    assert_eq!(out, [5, 6, 6, 8, 9, 9, 8, 9, 9]);
    shift.shift_image(&src, (1, 3, 3), (1, 1), &mut out);
    assert_eq!(out, src);
}

#[test]
fn random_shift_offsets_cover_zero_to_two_pad() {
    // An image with a single bright pixel in the middle shows the offset of each shift.
    let shift = RandomShift { pad: 2 };
    let (h, w) = (9, 9);
    let mut img = vec![0u8; h * w];
    img[4 * w + 4] = 255;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..400 {
        let mut batch = img.clone();
        shift.apply_batch(&mut batch, (1, 1, h, w), &mut rng);
        let pos = batch.iter().position(|v| *v == 255).unwrap();
        // The bright pixel lands at 4 − (d − pad) on each axis, d ∈ 0..=4.
        seen.insert((pos / w, pos % w));
    }
    let rows: std::collections::BTreeSet<usize> = seen.iter().map(|p| p.0).collect();
    assert_eq!(rows, (2..=6).collect());
    assert_eq!(seen.len(), 25);
}

#[test]
fn pairs_never_cross_an_episode_boundary() {
    // Two episodes with disjoint frame values: ep A frames 0..7, ep B frames 100..107.
    let a = counting_episode(8, 2, 2);
    let mut b = counting_episode(8, 2, 2);
    b.frames.iter_mut().for_each(|v| *v += 100);
    b.episode_index = 1;
    let episodes = vec![a, b];
    let sampler = PairSampler::new(
        &episodes,
        SamplerConfig {
            task_batching: TaskBatching::Mixed,
        },
    )
    .unwrap();
    // Real pairs end at t = 1..7 per episode, synthetic at t = 4..7.
    assert_eq!(sampler.num_pairs(), (14, 8));
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    for kind in [PairKind::Real, PairKind::Synthetic] {
        let batch = sampler.sample(kind, None, 200, &mut rng).unwrap();
        let n = 9 * 4;
        for i in 0..batch.len {
            let frames = |v: &[u8]| -> Vec<u8> { v[i * n..(i + 1) * n].chunks(12).map(|c| c[0]).collect() };
            let (prev, cur) = (
                frames(&batch.prev.to_host().unwrap()),
                frames(&batch.cur.to_host().unwrap()),
            );
            let all: Vec<u8> = prev.iter().chain(&cur).copied().collect();
            assert!(
                all.iter().all(|v| *v < 100) || all.iter().all(|v| *v >= 100),
                "{kind:?} pair mixes episodes: {all:?}"
            );
            let base = if all[0] >= 100 { 100 } else { 0 };
            let t = (cur[2] - base) as usize;
            let expect = match kind {
                PairKind::Real => real_pair(t).unwrap(),
                PairKind::Synthetic => frame_mask_pair(t).unwrap(),
            };
            let rel = |v: &[u8]| -> Vec<usize> { v.iter().map(|x| (x - base) as usize).collect() };
            assert_eq!(rel(&prev), expect.prev.to_vec());
            assert_eq!(rel(&cur), expect.cur.to_vec());
        }
    }
}

#[test]
fn round_robin_visits_tasks_in_turn() {
    let mut a = counting_episode(6, 2, 2);
    a.task = "walker_run".into();
    let mut b = counting_episode(6, 2, 2);
    b.task = "cartpole_swingup".into();
    let episodes = vec![a, b];
    let sampler = PairSampler::new(
        &episodes,
        SamplerConfig {
            task_batching: TaskBatching::RoundRobin,
        },
    )
    .unwrap();
    assert_eq!(
        sampler.task_names(),
        vec!["cartpole_swingup".to_string(), "walker_run".to_string()]
    );
    assert_eq!(
        (0..4).map(|s| sampler.task_for_update(s)).collect::<Vec<_>>(),
        vec![Some(0), Some(1), Some(0), Some(1)]
    );
    let mixed = PairSampler::new(
        &episodes,
        SamplerConfig {
            task_batching: TaskBatching::Mixed,
        },
    )
    .unwrap();
    assert_eq!(mixed.task_for_update(5), None);
}

#[test]
fn short_episodes_give_a_clear_error_for_synthetic_pairs() {
    let episodes = vec![counting_episode(3, 2, 2)];
    let sampler = PairSampler::new(
        &episodes,
        SamplerConfig {
            task_batching: TaskBatching::Mixed,
        },
    )
    .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let err = sampler
        .sample(PairKind::Synthetic, None, 4, &mut rng)
        .unwrap_err()
        .to_string();
    assert!(err.contains("at least 5 frames"), "{err}");
    assert!(sampler.sample(PairKind::Real, None, 4, &mut rng).is_ok());
}

#[test]
fn random_shift_matches_clamped_indexing_at_every_offset() {
    // The row fast path (edge fills + one copy) against the definition
    // out[y][x] = in[clamp(y + dy − pad)][clamp(x + dx − pad)], pad 4, every offset.
    let shift = RandomShift { pad: 4 };
    let (c, h, w) = (2, 11, 13);
    let src: Vec<u8> = (0..c * h * w).map(|i| (i * 37 % 251) as u8).collect();
    let clamp = |v: isize, n: usize| v.clamp(0, n as isize - 1) as usize;
    let mut out = vec![0u8; c * h * w];
    for dy in 0..=8 {
        for dx in 0..=8 {
            shift.shift_image(&src, (c, h, w), (dy, dx), &mut out);
            for ch in 0..c {
                for y in 0..h {
                    for x in 0..w {
                        let sy = clamp(y as isize + dy as isize - 4, h);
                        let sx = clamp(x as isize + dx as isize - 4, w);
                        assert_eq!(out[(ch * h + y) * w + x], src[(ch * h + sy) * w + sx], "({dy},{dx})");
                    }
                }
            }
        }
    }
    // A batch is shifted with offsets drawn in image order, dy then dx.
    let mut batch: Vec<u8> = src.iter().chain(src.iter().rev()).copied().collect();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut draws = ChaCha8Rng::seed_from_u64(5);
    shift.apply_batch(&mut batch, (2, c, h, w), &mut rng);
    let rev: Vec<u8> = src.iter().rev().copied().collect();
    for (i, img) in [&src, &rev].into_iter().enumerate() {
        let offset = (draws.random_range(0..=8), draws.random_range(0..=8));
        shift.shift_image(img, (c, h, w), offset, &mut out);
        assert_eq!(&batch[i * c * h * w..(i + 1) * c * h * w], &out[..], "image {i}");
    }
}

#[test]
fn algorithm_1s_queue_gives_the_frame_mask_pair_of_the_right_five_observations() {
    // Issue 13: the queue of the paper's Algorithm 1 fed O_0, O_1, … of an episode whose frame t
    // holds the value t. From O_4 on, each observation yields the pair frame_mask_pair(t) builds
    // from the episode's frames ([F_{t-4}, F_{t-3}, F_{t-1}] → [F_{t-3}, F_{t-1}, F_t]), and the
    // pseudo-code's own asserts hold; a reset starts a new episode.
    let (h, w) = (2, 3);
    let ep = counting_episode(12, h, w);
    let obs_len = 9 * h * w;
    let observation = |t: usize| {
        let mut out = vec![0u8; obs_len];
        stack_frames(&ep, lfs::observation::stack_indices(t), &mut out);
        out
    };
    let mut queue = crate::observation_queue::ObservationQueue::new(3 * h * w);
    for round in 0..2 {
        queue.reset();
        for t in 0..ep.num_frames {
            let pair = queue.push(&observation(t)).unwrap();
            let Some(expected) = frame_mask_pair(t) else {
                assert!(pair.is_none(), "round {round}: a pair before O_4 (t = {t})");
                continue;
            };
            let pair = pair.unwrap_or_else(|| panic!("no pair at t = {t}"));
            let (mut prev, mut cur) = (vec![0u8; obs_len], vec![0u8; obs_len]);
            stack_frames(&ep, expected.prev, &mut prev);
            stack_frames(&ep, expected.cur, &mut cur);
            assert_eq!((pair.prev, pair.cur), (prev, cur), "t = {t}");
            // By value: frame t holds t.
            let firsts = |o: &[u8]| [0, 1, 2].map(|k| o[k * 3 * h * w]);
            assert_eq!(firsts(&observation(t)), [t as u8 - 2, t as u8 - 1, t as u8]);
        }
    }
    // A skipped observation breaks the pseudo-code's asserts: a named error, not a wrong pair.
    queue.reset();
    for t in [0, 1, 2, 3, 5] {
        let result = queue.push(&observation(t));
        if t == 5 {
            let err = result.unwrap_err().to_string();
            assert!(err.contains("not consecutive observations of one episode"), "{err}");
        }
    }
    let err = queue.push(&[0u8; 3]).unwrap_err().to_string();
    assert!(err.contains("3 bytes"), "{err}");
}

#[test]
fn batches_from_frames_on_a_device_are_the_hosts_bytes() {
    // Episodes of random pixels (a shift shows), of two tasks and three lengths; the sampler's
    // frames kept "on a device" (the CPU's candle tensors, the code a GPU runs) must give the
    // host path's bytes for the same draws: sampled, shifted, selected and joined as LNC does.
    let (h, w) = (10, 12);
    let mut pixels = ChaCha8Rng::seed_from_u64(3);
    let episodes: Vec<_> = [(7, "a"), (12, "b"), (9, "a")]
        .iter()
        .enumerate()
        .map(|(i, &(len, task))| {
            let mut e = counting_episode(len, h, w);
            e.frames.iter_mut().for_each(|v| *v = pixels.random());
            e.episode_index = i as u64;
            e.task = task.into();
            e
        })
        .collect();
    for batching in [TaskBatching::Mixed, TaskBatching::RoundRobin] {
        let cfg = SamplerConfig {
            task_batching: batching,
        };
        let host = PairSampler::new(&episodes, cfg.clone()).unwrap();
        let mut device = PairSampler::new(&episodes, cfg).unwrap();
        let bytes = device.keep_frames_on(&candle_core::Device::Cpu).unwrap();
        assert_eq!(bytes, (7 + 12 + 9) * 3 * h * w);
        assert!(device.describe_frames().starts_with("frames on the device"));
        for pad in [2, 0] {
            let shift = RandomShift { pad };
            let (mut rng_h, mut rng_d) = (
                ChaCha8Rng::seed_from_u64(pad as u64),
                ChaCha8Rng::seed_from_u64(pad as u64),
            );
            for step in 0..4u64 {
                let task = host.task_for_update(step);
                let draw = |s: &PairSampler, rng: &mut ChaCha8Rng| {
                    let mut real = s.sample(PairKind::Real, task, 16, rng).unwrap();
                    let mut syn = s.sample(PairKind::Synthetic, task, 16, rng).unwrap();
                    real.augment(&shift, rng).unwrap();
                    syn.augment(&shift, rng).unwrap();
                    let online = real.prev.clone().concat(&syn.prev).unwrap();
                    let batch = syn.select(&[3, 0, 3, 15]).concat(&real.select(&[1, 2])).unwrap();
                    (online, batch)
                };
                let (online_h, batch_h) = draw(&host, &mut rng_h);
                let (online_d, batch_d) = draw(&device, &mut rng_d);
                assert!(matches!(online_d, lfs::data::Stacks::Frames(_)));
                assert_eq!(
                    online_d.to_host().unwrap(),
                    online_h.to_host().unwrap(),
                    "{batching:?} pad {pad}"
                );
                assert_eq!(batch_d.len, 6);
                assert_eq!(batch_d.prev.to_host().unwrap(), batch_h.prev.to_host().unwrap());
                assert_eq!(batch_d.cur.to_host().unwrap(), batch_h.cur.to_host().unwrap());
            }
            assert_eq!(rng_h.random::<u64>(), rng_d.random::<u64>(), "the same draws");
        }
    }
    // A clamped crop of a crop is no crop: frames on a device are shifted once.
    let mut device = PairSampler::new(
        &episodes,
        SamplerConfig {
            task_batching: TaskBatching::Mixed,
        },
    )
    .unwrap();
    device.keep_frames_on(&candle_core::Device::Cpu).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut batch = device.sample(PairKind::Real, None, 4, &mut rng).unwrap();
    let shift = RandomShift { pad: 4 };
    batch.augment(&shift, &mut rng).unwrap();
    assert!(batch
        .augment(&shift, &mut rng)
        .unwrap_err()
        .to_string()
        .contains("shifted twice"));
}
