//! The integration tests, one module per capability.

// Running the `lfs` binary and the FFmpeg command line (fixture maker and reference decoder).
mod common;

// `lfs ingest` / `lfs inspect` end to end: fixture videos, frame counts, pixel values,
// LeRobot column types, resume, bad input.
mod ingest;
// Frame stack, frame-mask indices, random shift, pair sampler (no episode-boundary crossing).
mod data;
// Orthogonal init, encoder shapes, EMA, Adam vs torch's rule, atomic checkpoint io.
mod nn;
// The CPU kernels: 3×3 conv ops (plain and bias + ReLU fused) vs candle's conv2d and autograd, tiles vs loops.
mod kernels;
// Sinkhorn, LNC window, LFS loss on a fixed batch, InfoNCE, ATC and CURL vs float64
// transcriptions of rlpyt and MishaLaskin/curl (reference values with provenance).
mod objectives;
// `lfs pretrain`: configs, every method on tiny, metrics log, resume = uninterrupted.
mod pretrain;
// `lfs export`: state_dict names, metadata, example file, the PyTorch loader when available.
mod export;
// The queue of Algorithm 1 as the paper's pseudo-code builds it: the reference the frame-mask
// pairs of `lfs::data` are checked against (data, e2e).
mod observation_queue;
// In-memory episodes (moving squares, counting frames) shared by the modules above.
mod synthetic_episodes;
// DMControl through the worker pool: parity with dm_control in Python, seeds, frame stack,
// render quality, PhysicsError, killed and hung workers, missing dependencies (needs `make setup`).
mod env;
// `lfs collect`: lossless videos that replay from their sidecars, resume, a killed worker,
// the tiny set.
mod collect;
// The SAC agent: formulas vs a float64 transcription of Proto-RL, LayerNorm gradients, updates.
mod sac;
// DrQ-v2: its formulas vs a float64 transcription of facebookresearch/drqv2 (schedule, n-step
// returns, truncated normal, losses and gradients, random shift), its update, and `lfs train` /
// `lfs eval` with it: a killed run resumes exactly, bad input refused.
mod drqv2;
// `replay.sampling = "drqv2"`: which episodes each sample comes from against a Python
// transcription of DrQ-v2's replay loader, its state resumed exactly, the setting in configs.
mod replay;
// TACO: its loss, latent actions and gradients vs a float64 transcription of FrankZheng2022/TACO,
// action sequences from the replay, `lfs train` with it resuming exactly, refusals by name.
mod taco;
// DrQ-v2's and TACO's task groups (easy/medium) as their repositories file the nine tasks, against
// our pipelines, docs/design.md §13 and every suite cell that runs them (URLB's setting on Jaco).
mod task_groups;
// `lfs explore`: Proto-RL's update and reward vs a float64 transcription of denisyarats/proto,
// the exploration loop resuming exactly, its export, bad input refused.
mod explore;
// `lfs eval` on DMControl: bad input refused with nothing written, a killed run resumes exactly.
mod eval;
// `lfs train` (end-to-end LFS + SAC): the objective moves the encoder and SAC does not, synthetic
// pairs are the queue's, N logged per update, a killed run resumes exactly, bad input refused.
mod e2e;
// `lfs suite`: suite files and job indices checked, a killed suite resumes to the results of an
// uninterrupted pool, and a real one-node SLURM cluster runs the tiny suite as a job array to
// the same results (needs root and slurm-wlm + munge, or LFS_SKIP_SLURM=1).
mod suite;
// Every config and suite file under pipelines/ and eval/suites/ loads and validates, through the
// command that reads it (`lfs suite sbatch`) or, for pre-training, its loader.
mod configs;
// `lfs report`: rliable's aggregates vs rliable, a synthetic suite's report and pictures,
// mismatched cells refused with nothing written, results.csv read back (and by pandas), study
// 4's committed verdicts written again from its committed cells.
mod report;
// The linear probe's numerical core: ridge by group k-fold CV in the dual form on synthetic data,
// the protocol vs eval/probe_reference.py (numpy, primal form), the held-out R² bootstrap.
mod probe;
// `lfs probe` on a recorded probe set (its report, its refusals) and the online probe of
// `lfs pretrain` (logged, and training unchanged by it).
mod probe_command;
// The README's commands and `make help`'s targets run as written in a fresh folder, at tiny
// budgets: every one walked or its reason given (needs `make setup`).
mod readme;
// The device seam: candle's ops (the CUDA path) against the CPU kernels for encoder features and
// gradients, one update of each pre-training method and of SAC from pixels, checkpoints across
// the two; `run.device` in configs; `--device cuda` refused by a CPU build.
mod device;
// eval/gpu/session_summary.py over the committed dry runs of the GPU session's pool and
// drqv2-seeds stages: its same-round ratios and returns against the log's own lines.
mod gpu_summary;
// APT (URLB's icm_apt, `lfs explore`): the ICM's loss, gradients and Adam steps, the PBE reward in
// every kNN setting and DrQ-v2's DDPG on it vs a float64 transcription of url_benchmark; the
// export's folded input offset; the explorer's state resumed exactly.
mod apt;
