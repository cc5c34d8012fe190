//! The commands of the README and of the guide (docs/guide/*.md), and `make help`'s targets, run
//! as a new user runs them (issues 27, 56): each command exactly as written, with only budget
//! flags appended (`--set`, a later `--episodes` replacing an earlier one, or a Makefile variable
//! the Makefile documents) and, where the walk does not check what a run renders, the cost flag
//! of fast rendering (issue 77), in a fresh folder that sees the checkout's files but has no `runs/`
//! and no `videos/` of its own. A command a page gains, or a target `make help` gains, fails the
//! first test until this file says how it is walked or why it is not; a step no page shows any
//! more fails it too.
//!
//! `make` targets run as `make -o build -o setup TARGET`: the binary and venv are the ones this
//! test run was built with (`make test`), and cargo in a second folder would rebuild them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::common::{output_text, repo, wait_for};

/// How a command of the README or a target of `make help` is walked.
enum Walk {
    /// Run to completion, `append` after the command as written.
    Run { append: &'static str },
    /// Started as written, stopped once its first cell has begun (`lfs suite run` of a suite of
    /// day-long cells).
    UntilFirstCell,
    /// Started as written, stopped once it serves the walk's runs (TensorBoard, a server).
    UntilServing,
    /// Run to completion as written when `.venv` has torch (`make setup-torch`, which CI runs);
    /// otherwise skipped loudly, and under `CI=true` a failure.
    WithTorch,
    /// A command of the CUDA build's (docs/guide/gpu.md) run as far as a CPU allows: with the
    /// CPU build's binary for `target-cuda/release/lfs` and `--device cpu` for `--device cuda`,
    /// `append` after it.
    OnCpu { append: &'static str },
    /// Not run here, and why.
    Skip(&'static str),
}

/// One command as written (README, guide) or `make TARGET` (`make help`), and how it is walked.
struct Step {
    written: &'static str,
    walk: Walk,
}

const fn run(written: &'static str, append: &'static str) -> Step {
    Step {
        written,
        walk: Walk::Run { append },
    }
}

const fn on_cpu(written: &'static str, append: &'static str) -> Step {
    Step {
        written,
        walk: Walk::OnCpu { append },
    }
}

const fn skip(written: &'static str, why: &'static str) -> Step {
    Step {
        written,
        walk: Walk::Skip(why),
    }
}

/// Every tiny RL run's budget: 600 frames, updates from 400, evaluations (one episode) at 0 and
/// 600, every episode cut at 250 frames (a whole DMControl evaluation episode is 1000, and two
/// of them were most of a tiny run's time), a small agent.
macro_rules! tiny_run {
    () => {
        "--set run.num_train_frames=600 --set run.num_seed_frames=400 \
         --set run.eval_every_frames=600 --set run.num_eval_episodes=1 --set env.episode_frames=250 \
         --set agent.hidden_dim=32 --set agent.feature_dim=8"
    };
}
/// SAC at the tiny budget, with a small batch.
macro_rules! sac_budget {
    () => {
        concat!(tiny_run!(), " --set agent.batch_size=16")
    };
}
/// `lfs train` at the same budget, with a small objective head.
macro_rules! train_budget {
    () => {
        concat!(
            tiny_run!(),
            " --set aux.model.num_prototypes=32 --set aux.model.predictor_hidden_dim=64"
        )
    };
}
/// A run's cost flag beside its budget: fast rendering (no shadow map, no multisampling), ~4x
/// cheaper on a CPU's software renderer, where rendering is most of a tiny run's time. For a
/// run that is not where the walk checks the render quality; one with a pre-trained encoder
/// also says the mismatch is meant.
macro_rules! render_fast {
    () => {
        " --set env.render_quality=fast --allow-render-quality-mismatch"
    };
}
const SAC_BUDGET: &str = sac_budget!();
const SAC_BUDGET_FAST: &str = concat!(sac_budget!(), render_fast!());
const TRAIN_BUDGET_FAST: &str = concat!(train_budget!(), render_fast!());
/// DrQ-v2 end to end at the same budget (updates every 2 agent steps from 400 frames).
const DRQV2_BUDGET_FAST: &str = concat!(tiny_run!(), render_fast!());

/// `lfs explore` at a few hundred frames per domain: updates from frame 200 to 300 (reach_duplo's
/// episodes end at 250), at the config's render quality (the guide probes the encoder on a
/// default-quality probe set), with a small agent (the exported encoder does not depend on it).
macro_rules! explore_budget {
    () => {
        "--set run.num_train_frames=300 --set run.num_seed_frames=200 --set agent.hidden_dim=64"
    };
}
const EXPLORE_BUDGET: &str = explore_budget!();

/// The paper's exploration configs at the same budget, with a small batch, rendered fast, and
/// small widths of their own methods too: at the paper's, the orthogonal init of the agents'
/// 1024² layers and of APT's ICM trunk (512 × 39,200, 19 s) was 43% of the APT step (150 s →
/// 35 s; Proto's 60 s → 42 s; BENCHMARKS.md, 2026-11-29).
macro_rules! explore_paper_budget {
    () => {
        concat!(
            explore_budget!(),
            " --set agent.batch_size=16 --set env.render_quality=fast"
        )
    };
}
const EXPLORE_PROTO_PAPER_BUDGET: &str =
    concat!(explore_paper_budget!(), " --set explore.proto.predictor_hidden_dim=64");
const EXPLORE_APT_PAPER_BUDGET: &str = concat!(
    explore_paper_budget!(),
    " --set explore.apt.icm_hidden_dim=64 --set explore.apt.icm_rep_dim=64"
);

/// The walk, in three parts that run as tests of their own, side by side, each in a folder of its
/// own: what each part's commands read, its part wrote before them.
///
/// The first part: the default job and the Makefile's stages, then [`GUIDE_START`] and
/// [`MAKE_TARGETS_AFTER_GUIDE_START`].
const MAKE_TARGETS: &[Step] = &[
    run("make help", ""),
    skip(
        "make deps",
        ".ci/run runs it first on a bare machine (apt-get, as root)",
    ),
    run("make", "SET='--set run.num_updates=100'"),
    skip("make test", "this test is part of it"),
    skip(
        "make setup-torch",
        "5.3 GB of torch for one test; .ci/run runs it before make test",
    ),
    skip(
        "make test-fast",
        "make test's tests less the slow ones; this test is among those",
    ),
    skip(
        "make build",
        "cargo test built the binary these steps run; cargo in a second folder would rebuild it",
    ),
    run("make pretrain", "SET='--set run.num_updates=100'"),
    run("make setup", ""),
    run("make sample", ""),
    run("make export", ""),
    skip("make lint", ".ci/run runs it"),
    skip(
        "make check-lerobot",
        "installs LeRobot and torch (several GB); run by hand",
    ),
    skip("make bench", "hours of benchmarks for BENCHMARKS.md"),
    skip("make study-mini", "the study: about 6.5 hours"),
    skip(
        "make study-2",
        "the second study: about 10.6 hours over several sessions",
    ),
    skip(
        "make study-3",
        "the third study: about 12-14 hours over several sessions",
    ),
    skip(
        "make study-4",
        "the fourth study: tens of hours of SAC cells over several sessions",
    ),
    skip(
        "make replay-ablation",
        "issue 55's replay ablation: six DrQ-v2 cells of an hour or more each",
    ),
    skip(
        "make upstream-drqv2",
        "upstream DrQ-v2's own train.py on the CPU: hours per seed, and its own Python packages",
    ),
    // The tiny suite (8 cells) and its report into runs/suite-tiny, once: the guide's `lfs suite
    // run eval/suites/tiny.toml --out runs/suite-tiny` below then finds every cell done.
    run("make suite", ""),
    run("make suite-tiny", "SET='--set run.num_updates=100'"),
    skip(
        "make build-cuda",
        "1.2 GB of CUDA wheels and a 30-minute second build; measured by hand (BENCHMARKS.md)",
    ),
    skip(
        "make gpu-check",
        "needs a GPU and make build-cuda's binaries; its checks run here on the CPU (tests/device.rs)",
    ),
    skip(
        "make gpu-e2e",
        "needs a GPU and make gpu-pack's archive; dry-run on the CPU by hand (eval/gpu/gpu-e2e.sh)",
    ),
    run("make eval", SAC_MAKE_SET),
    run("make train", TRAIN_MAKE_SET),
    run("make collect", "COLLECT_EPISODES=1"),
    // The probe set at a tiny budget: one task, the 14 episodes the probe needs, 12 frames each.
    run(
        "make probe-set",
        "PROBE_SEEDS=cartpole_swingup:1000000 PROBE_EPISODES=14 PROBE_FRAMES=12",
    ),
    run("make probe", "ENCODER=random"),
    run(
        "target/release/lfs probe --encoder random --dataset runs/probe-set-fast/dataset --out runs/probe/random.json",
        "",
    ),
];

/// After [`GUIDE_START`] in the first part: the rest of the pre-training and export pages, whose
/// PyTorch snippets read the encoders `make` and the guide's export wrote, then the suites and
/// report pages on the tiny suite `make suite-tiny` ran.
const MAKE_TARGETS_AFTER_GUIDE_START: &[Step] = &[
    // docs/guide/pretrain.md
    run(
        "target/release/lfs pretrain --config pipelines/tiny.toml --set 'data.datasets=[\"runs/mine/dataset\"]' --set objective.method=atc --out-dir runs/mine-atc",
        "--set run.num_updates=5",
    ),
    // docs/guide/export.md
    run(
        "target/release/lfs export runs/mine/checkpoint.safetensors --out runs/mine/encoder-only.safetensors --encoder-only",
        "",
    ),
    run(".venv/bin/python python/load_encoder_numpy.py runs/mine/encoder.safetensors", ""),
    Step {
        written: ".venv/bin/python python/load_encoder_torch.py runs/mine/encoder.safetensors",
        walk: Walk::WithTorch,
    },
    // docs/guide/suites.md: the tiny suite is its own budget (8 cells of 1000 frames).
    run("target/release/lfs suite run eval/suites/tiny.toml --out runs/suite-tiny", ""),
    run("target/release/lfs suite status runs/suite-tiny", ""),
    run(
        "target/release/lfs suite run eval/suites/tiny.toml --out runs/suite-tiny --job-index 3",
        "",
    ),
    run(
        "target/release/lfs suite sbatch eval/suites/tiny.toml --out runs/suite-tiny --cpus-per-task 1 --time 00:30:00",
        "",
    ),
    skip(
        "sbatch runs/suite-paper/slurm/paper.sbatch",
        "needs a SLURM cluster and days per cell; tests/suite.rs submits the tiny suite's array \
         to a one-node cluster it starts (eval/slurm/run_suite.sh)",
    ),
    // docs/guide/report.md
    run(
        "target/release/lfs report runs/suite-tiny --out runs/suite-tiny/report",
        "",
    ),
    run(
        "target/release/lfs report runs/suite-tiny --out runs/suite-tiny/report-500 --budget 500 --probe runs/probe/random.json",
        "",
    ),
];

/// The second part: the README's pipeline on videos `lfs collect` just wrote, its benchmark commands and the
/// report, the GPU page, and TensorBoard over the runs they wrote.
const README_PIPELINE: &[Step] = &[
    run(
        "target/release/lfs collect --tasks reach_duplo,walker_run,cartpole_swingup --episodes 320 --video-frames 250 --out videos/",
        "--episodes 1",
    ),
    run("target/release/lfs ingest videos/ --out runs/paper/dataset", ""),
    run(
        "target/release/lfs collect --tasks reach_duplo,walker_run,cartpole_swingup --episodes 320 --video-frames 250 --dataset runs/paper-direct/dataset",
        "--episodes 1 --video-frames 20",
    ),
    run("target/release/lfs inspect runs/paper/dataset --contact-sheet sheet.png", ""),
    run(
        "target/release/lfs pretrain --config pipelines/mini.toml --set 'data.datasets=[\"runs/paper/dataset\"]' --out-dir runs/paper",
        "--set run.num_updates=2",
    ),
    run(
        "target/release/lfs export runs/paper/checkpoint.safetensors --out runs/paper/encoder.safetensors",
        "",
    ),
    run(
        "make pretrain VIDEOS=videos/ PRETRAIN_CONFIG=pipelines/mini.toml",
        "SET='--set run.num_updates=2'",
    ),
    run(
        "make pretrain VIDEOS=videos/ PRETRAIN_CONFIG=pipelines/paper.toml",
        "SET='--set run.num_updates=1 --set run.batch_size=32'",
    ),
    run(
        "target/release/lfs eval --config pipelines/sac/mini.toml --encoder runs/videos-mini/encoder.safetensors --task walker_walk --seed 1 --out-dir runs/eval/walker_walk/1",
        SAC_BUDGET,
    ),
    run(
        "target/release/lfs train --config pipelines/e2e/tiny.toml --task walker_stand --seed 1 --out-dir runs/train/walker_stand/1",
        TRAIN_BUDGET_FAST,
    ),
    run(
        "target/release/lfs train --config pipelines/drqv2/tiny.toml --task cartpole_swingup --seed 1 --out-dir runs/drqv2/cartpole_swingup/1",
        DRQV2_BUDGET_FAST,
    ),
    Step {
        written: "target/release/lfs suite run eval/suites/mini.toml --out runs/suite-mini",
        walk: Walk::UntilFirstCell,
    },
    run("target/release/lfs suite status runs/suite-mini", ""),
    // docs/guide/suites.md: the paper suite's other Table 3 rows, at one update or a few
    // hundred frames, so that its sbatch below finds every row's encoder
    run(
        "target/release/lfs pretrain --config pipelines/paper.toml --set 'data.datasets=[\"runs/videos-paper/dataset\"]' --set objective.method=atc --out-dir runs/videos-paper-atc",
        "--set run.num_updates=1 --set run.batch_size=32",
    ),
    run(
        "target/release/lfs pretrain --config pipelines/paper.toml --set 'data.datasets=[\"runs/videos-paper/dataset\"]' --set objective.method=curl --out-dir runs/videos-paper-curl",
        "--set run.num_updates=1 --set run.batch_size=32",
    ),
    run(
        "target/release/lfs export runs/videos-paper-atc/checkpoint.safetensors --out runs/videos-paper-atc/encoder.safetensors",
        "",
    ),
    run(
        "target/release/lfs export runs/videos-paper-curl/checkpoint.safetensors --out runs/videos-paper-curl/encoder.safetensors",
        "",
    ),
    run(
        "target/release/lfs explore --config pipelines/explore/proto/paper.toml --out-dir runs/explore-proto-paper",
        EXPLORE_PROTO_PAPER_BUDGET,
    ),
    run(
        "target/release/lfs explore --config pipelines/explore/apt/paper.toml --out-dir runs/explore-apt-paper",
        EXPLORE_APT_PAPER_BUDGET,
    ),
    run(
        "target/release/lfs suite sbatch eval/suites/paper.toml --out runs/suite-paper --cpus-per-task 8 --time 72:00:00",
        "",
    ),
    run(
        "target/release/lfs report results/study-mini --out runs/report-study-mini",
        "",
    ),
    Step {
        written: ".venv/bin/tensorboard --logdir runs/",
        walk: Walk::UntilServing,
    },
];

/// The start of the guide's running example, `runs/mine` (the embedded sample ingested as a
/// user's own videos, pre-trained and exported), which the first and third parts both read.
const GUIDE_START: &[Step] = &[
    // docs/guide/collect-and-ingest.md: the embedded sample stands in for the user's folder.
    run("target/release/lfs ingest datasets/tiny/videos --out runs/mine/dataset", ""),
    run(
        "target/release/lfs inspect runs/mine/dataset --verify --contact-sheet runs/mine/contact-sheet.png",
        "",
    ),
    // docs/guide/pretrain.md
    run(
        "target/release/lfs pretrain --config pipelines/tiny.toml --set 'data.datasets=[\"runs/mine/dataset\"]' --out-dir runs/mine",
        "--set run.num_updates=20",
    ),
    // docs/guide/export.md
    run(
        "target/release/lfs export runs/mine/checkpoint.safetensors --out runs/mine/encoder.safetensors",
        "",
    ),
];

/// After [`GUIDE_START`] in the third part: the guide's pages in the order of its index.
const GUIDE: &[Step] = &[
    // docs/guide/eval.md
    run(
        "target/release/lfs eval --config pipelines/sac/tiny.toml --encoder runs/mine/encoder.safetensors --task cartpole_swingup --seed 1 --out-dir runs/eval/mine/cartpole_swingup/1",
        SAC_BUDGET_FAST,
    ),
    // docs/guide/train.md (its LFS and DrQ-v2 commands are the README's, walked above)
    run(
        "target/release/lfs train --config pipelines/e2e/tiny.toml --init-encoder runs/mine/encoder.safetensors --task walker_stand --seed 1 --out-dir runs/train/mine-init/walker_stand/1",
        TRAIN_BUDGET_FAST,
    ),
    // docs/guide/probe.md: a probe set at the sample's render quality, as make probe-set's above.
    run(
        "make probe-set PROBE_RENDER_QUALITY=default",
        "PROBE_SEEDS=cartpole_swingup:1000000 PROBE_EPISODES=14 PROBE_FRAMES=12",
    ),
    run(
        "target/release/lfs probe --encoder runs/mine/encoder.safetensors --dataset runs/probe-set-default/dataset",
        "",
    ),
    run(
        "target/release/lfs probe --encoder random --dataset runs/probe-set-default/dataset --out runs/probe/random-default.json",
        "",
    ),
    run(
        "python3 eval/probe_compare.py runs/probe/random-default.json runs/mine/probe.json",
        "",
    ),
    // docs/guide/gpu.md, on the CPU (make build-cuda and gpu-check are make help's, above): its
    // commands as written but for the CPU binary and device, at one update or a few hundred
    // frames, after the probe page's probe set
    on_cpu(
        "target-cuda/release/lfs pretrain --config pipelines/paper.toml --set 'data.datasets=[\"runs/mine/dataset\"]' --out-dir runs/mine-gpu --device cuda",
        "--set run.num_updates=1 --set run.batch_size=32",
    ),
    run(
        "target/release/lfs export runs/mine-gpu/checkpoint.safetensors --out runs/mine-gpu/encoder.safetensors",
        "",
    ),
    run(
        "target/release/lfs probe --encoder runs/mine-gpu/encoder.safetensors --dataset runs/probe-set-default/dataset",
        "",
    ),
    on_cpu(
        "target-cuda/release/lfs eval --config pipelines/sac/paper.toml --encoder runs/mine-gpu/encoder.safetensors --task cartpole_swingup --seed 1 --out-dir runs/eval-gpu/mine/cartpole_swingup/1 --device cuda",
        SAC_BUDGET_FAST,
    ),
    run(
        "target/release/lfs pretrain --config pipelines/tiny.toml --set 'data.datasets=[\"runs/mine/dataset\"]' --set probe.every_updates=100 --set 'probe.dataset=\"runs/probe-set-default/dataset\"' --out-dir runs/mine-probed",
        "--set run.num_updates=3",
    ),
    // docs/guide/explore.md, at a few hundred frames per domain; after the probe page, whose
    // default-quality probe set its probe command reads
    run(
        "target/release/lfs explore --config pipelines/explore/proto/tiny.toml --out-dir runs/explore/proto-tiny",
        EXPLORE_BUDGET,
    ),
    run(
        "target/release/lfs explore --config pipelines/explore/apt/tiny.toml --out-dir runs/explore/apt-tiny",
        EXPLORE_BUDGET,
    ),
    run(
        "target/release/lfs probe --encoder runs/explore/proto-tiny/encoder.safetensors --dataset runs/probe-set-default/dataset",
        "",
    ),
    run(
        "target/release/lfs eval --config pipelines/sac/tiny.toml --encoder runs/explore/proto-tiny/encoder.safetensors --task cartpole_swingup --seed 1 --out-dir runs/eval/proto-tiny/cartpole_swingup/1",
        SAC_BUDGET_FAST,
    ),
    // docs/guide/logs.md
    run("tail -n 1 runs/mine/metrics.jsonl", ""),
    run("cat runs/eval/mine/cartpole_swingup/1/eval.csv", ""),
    run("cat runs/mine/summary.json", ""),
];

/// Every step of the walk, part by part.
fn all_steps() -> impl Iterator<Item = &'static Step> {
    WALK_PARTS.into_iter().flatten().flat_map(|steps| steps.iter())
}

/// The three parts, each as the lists of steps it walks in order.
const WALK_PARTS: [&[&[Step]]; 3] = [
    &[MAKE_TARGETS, GUIDE_START, MAKE_TARGETS_AFTER_GUIDE_START],
    &[README_PIPELINE],
    &[GUIDE_START, GUIDE],
];

/// `make eval`'s and `make train`'s SET: the budgets above.
const SAC_MAKE_SET: &str = concat!("SET='", sac_budget!(), "'");
const TRAIN_MAKE_SET: &str = concat!("SET='", train_budget!(), " --set env.render_quality=fast'");

/// The pages whose shell blocks are walked: the README, then the guide's pages by name.
fn shown_pages() -> Vec<PathBuf> {
    let mut guide: Vec<PathBuf> = std::fs::read_dir(repo().join("docs/guide"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    guide.sort();
    std::iter::once(repo().join("README.md")).chain(guide).collect()
}

/// The commands of every page's shell blocks (```sh, ```bash, ```shell), with the page
/// (relative to the checkout) that shows each: continuation lines joined, comments dropped,
/// `a && b` split, white space folded.
fn shown_commands() -> Vec<(String, String)> {
    let mut shown = Vec::new();
    for page in shown_pages() {
        let name = page.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        for command in shell_commands(&text) {
            shown.push((name.clone(), command));
        }
    }
    shown
}

/// The commands of one page's shell blocks.
fn shell_commands(text: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let (mut in_block, mut current) = (false, String::new());
    for line in text.lines() {
        if let Some(fence) = line.strip_prefix("```") {
            let lang = fence.split_whitespace().next().unwrap_or("");
            in_block = !in_block && ["sh", "bash", "shell"].contains(&lang);
            continue;
        }
        if !in_block || line.trim_start().starts_with('#') {
            continue;
        }
        let code = match line.find(" #") {
            Some(i) => &line[..i],
            None => line,
        };
        if let Some(part) = code.trim_end().strip_suffix('\\') {
            current.push_str(part);
            current.push(' ');
            continue;
        }
        current.push_str(code);
        for command in current.split("&&") {
            let folded = command.split_whitespace().collect::<Vec<_>>().join(" ");
            if !folded.is_empty() {
                commands.push(folded);
            }
        }
        current.clear();
    }
    commands
}

/// The targets `make help` lists, as `make` (the default goal, `all`) or `make TARGET`.
fn make_help_targets(dir: &Path) -> Vec<String> {
    let out = bash(dir, "exec make help").output().unwrap();
    assert!(out.status.success(), "make help: {}", output_text(&out));
    // A target line is indented: "  name  what it does".
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .map(|t| {
            if t == "all" {
                "make".to_string()
            } else {
                format!("make {t}")
            }
        })
        .collect()
}

/// A fresh folder that sees the checkout's files (links) but writes its own runs/ and videos/.
fn user_folder() -> crate::common::TestDir {
    let dir = crate::common::temp_dir("readme");
    for name in [
        "Makefile",
        "pipelines",
        "eval",
        "python",
        "datasets",
        "results",
        "target",
        ".venv",
        "README.md",
    ] {
        std::os::unix::fs::symlink(repo().join(name), dir.join(name)).unwrap();
    }
    dir
}

#[test]
fn every_readme_command_and_make_target_is_walked_or_says_why_not() {
    let dir = user_folder();
    let targets = make_help_targets(&dir);
    let shown = shown_commands();
    let pages = shown_pages();
    assert!(pages.len() > 1, "the guide's pages: {pages:?}");
    let mut missing = Vec::new();
    for (page, command) in shown
        .iter()
        .map(|(p, c)| (p.as_str(), c))
        .chain(targets.iter().map(|t| ("make help", t)))
    {
        if !all_steps().any(|s| s.written == command.as_str()) {
            missing.push(format!("{page}: {command}"));
        }
    }
    assert!(
        missing.is_empty(),
        "commands shown to users that tests/readme.rs neither runs nor explains: {missing:#?}"
    );
    // The reverse: a step whose command no page shows any more (reworded, moved, dropped) is
    // stale, and would go on being walked for nobody. A bare `make TARGET` is make help's and
    // may run ahead of the Makefile it names; the check above covers the targets it lists.
    let bare_target = |w: &str| w == "make" || (w.starts_with("make ") && !w[5..].contains(' '));
    let stale: Vec<&str> = all_steps()
        .map(|s| s.written)
        .filter(|w| !bare_target(w) && !shown.iter().any(|(_, c)| c == w))
        .collect();
    assert!(
        stale.is_empty(),
        "steps of tests/readme.rs that neither the README, the guide nor make help shows: {stale:#?}"
    );
    for step in all_steps() {
        if let Walk::Skip(why) = step.walk {
            assert!(!why.is_empty(), "{}: a skipped step says why", step.written);
        }
    }
}

/// The shell line a step runs: `make` with the build and venv taken as current.
fn shell_line(written: &str, append: &str) -> String {
    let line = match written.strip_prefix("make") {
        Some(rest) => format!("make -o build -o setup{rest}"),
        None => written.to_string(),
    };
    format!("exec {line} {append}")
}

/// `line` in bash in `dir`, as a user's shell runs it: headless MuJoCo, and nothing inherited
/// from a `make test` around this test (its MAKEFLAGS, MAKELEVEL) or a scheduler.
fn bash(dir: &Path, line: &str) -> Command {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", line])
        .current_dir(dir)
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL")
        .env("MUJOCO_GL", std::env::var("MUJOCO_GL").unwrap_or_else(|_| "egl".into()))
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX");
    cmd
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_readme_walk_through_runs_as_written_1_make_targets() {
    walk(WALK_PARTS[0]);
}

#[test]
fn the_readme_walk_through_runs_as_written_2_readme_pipeline() {
    walk(WALK_PARTS[1]);
}

#[test]
fn the_readme_walk_through_runs_as_written_3_guide() {
    walk(WALK_PARTS[2]);
}

/// Runs one part of the walk in a fresh user folder, each step as written, and checks what it
/// left behind.
fn walk(part: &[&[Step]]) {
    let dir = user_folder();
    for step in part.iter().flat_map(|steps| steps.iter()) {
        let started = Instant::now();
        match step.walk {
            Walk::Skip(_) => continue,
            Walk::Run { append } => run_as_written(&dir, step.written, append),
            Walk::OnCpu { append } => {
                assert!(
                    step.written.contains("target-cuda/release/lfs ") && step.written.ends_with(" --device cuda"),
                    "{}: not a CUDA build's command",
                    step.written
                );
                let on_cpu = step
                    .written
                    .replace("target-cuda/release/lfs ", "target/release/lfs ")
                    .replace(" --device cuda", " --device cpu");
                run_as_written(&dir, &on_cpu, append);
            }
            Walk::WithTorch => {
                let torch = bash(&dir, "exec .venv/bin/python -c 'import torch'").output().unwrap();
                if torch.status.success() {
                    run_as_written(&dir, step.written, "");
                } else {
                    crate::common::missing("torch in .venv", "make setup-torch");
                    continue;
                }
            }
            Walk::UntilFirstCell => {
                let mut child = bash(&dir, &shell_line(step.written, ""))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                let cells = dir.join("runs/suite-mini/cells");
                wait_for(&mut child, 300, "the first cell's run.json", || {
                    std::fs::read_dir(&cells).is_ok_and(|mut d| d.any(|e| e.unwrap().path().join("run.json").exists()))
                });
                // SIGKILL: the pool's cells die with it (the suite tests' kill).
                child.kill().unwrap();
                child.wait().unwrap();
            }
            Walk::UntilServing => tensorboard_serves_the_runs(&dir, step.written),
        }
        eprintln!("{}: {:.0} s", step.written, started.elapsed().as_secs_f64());
        check_after(&dir, step.written);
    }
}

/// Runs `written` with `append` after it and asserts it succeeded.
fn run_as_written(dir: &Path, written: &str, append: &str) {
    let out = bash(dir, &shell_line(written, append)).output().unwrap();
    assert!(
        out.status.success(),
        "`{written} {append}` failed in {}:\n{}",
        dir.display(),
        output_text(&out)
    );
}

/// Starts TensorBoard as written and waits until it lists the walk's pre-training, eval and
/// train runs and serves a pre-training run's loss and an eval run's returns, then stops it.
fn tensorboard_serves_the_runs(dir: &Path, written: &str) {
    let log = dir.join("tensorboard.log");
    let mut child = bash(dir, &format!("{} > tensorboard.log 2>&1", shell_line(written, "")))
        .spawn()
        .unwrap();
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_for(&mut child, 120, "TensorBoard's address", || {
        said().contains("http://localhost:")
    });
    let text = said();
    let port: u16 = text
        .split("http://localhost:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in TensorBoard's output: {text}"));
    // GET a JSON endpoint of the running server (Python's urllib: no HTTP client in the tests).
    let get = |path: &str| -> Option<serde_json::Value> {
        let out = Command::new(crate::common::python())
            .args([
                "-c",
                "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())",
            ])
            .arg(format!("http://localhost:{port}{path}"))
            .output()
            .ok()?;
        serde_json::from_slice(&out.stdout).ok()
    };
    let wanted = ["videos-mini", "eval/walker_walk/1", "train/walker_stand/1"];
    let lists_them = || {
        get("/data/runs").is_some_and(|runs| {
            wanted
                .iter()
                .all(|w| runs.as_array().is_some_and(|a| a.iter().any(|r| r == w)))
        })
    };
    wait_for(&mut child, 120, "TensorBoard listing the runs", lists_them);
    for (run, tag) in [
        ("videos-mini", "pretrain/loss"),
        ("eval/walker_walk/1", "eval/episode_reward"),
    ] {
        let points = get(&format!(
            "/data/plugin/scalars/scalars?run={}&tag={}",
            run.replace('/', "%2F"),
            tag.replace('/', "%2F")
        ));
        assert!(
            points
                .as_ref()
                .and_then(|p| p.as_array())
                .is_some_and(|p| !p.is_empty()),
            "{run} {tag}: {points:?}\n{}",
            said()
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The first ```python block of `page` (relative to the checkout), run as written with the
/// walk's torch Python from the walk's folder: what it printed.
fn python_snippet_prints(dir: &Path, page: &str) -> String {
    let text = std::fs::read_to_string(repo().join(page)).unwrap();
    let block = text
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .unwrap_or_else(|| panic!("{page}: no ```python block"));
    let file = dir.join("snippet.py");
    std::fs::write(&file, block).unwrap();
    let out = bash(dir, "exec .venv/bin/python snippet.py").output().unwrap();
    assert!(
        out.status.success(),
        "{page}'s Python snippet failed:\n{}",
        output_text(&out)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What a step must have left behind, beyond exit 0.
fn check_after(dir: &Path, written: &str) {
    let runs = dir.join("runs");
    match written {
        // torch is there (a WithTorch step): the README's and export.md's PyTorch snippets run as
        // written on the encoders `make` and the guide's export wrote, and print what they say.
        ".venv/bin/python python/load_encoder_torch.py runs/mine/encoder.safetensors" => {
            assert_eq!(python_snippet_prints(dir, "README.md"), "lfs (8, 39200)");
            assert_eq!(
                python_snippet_prints(dir, "docs/guide/export.md"),
                "lfs (8, 39200) (8, 128)"
            );
        }
        "make" => {
            assert!(runs.join("tiny/encoder.safetensors").is_file());
            assert!(runs.join("tiny/contact-sheet.png").is_file());
            render_quality_pinned_against_the_encoder_is_refused(dir);
        }
        "make eval" => {
            // The out-dir names the encoder by its run folder, not `encoder.safetensors`.
            let run = runs.join("eval/tiny/cartpole_swingup/tiny/1");
            let info = json(&run.join("run.json"));
            // tiny.toml follows the encoder, trained on the embedded sample's default renders.
            assert_eq!(info["render_quality"], "default", "{info}");
            assert_eq!(info["encoder_render_quality"], "default", "{info}");
            assert_eq!(info["render_quality_from"], "encoder", "{info}");
            assert_eq!(std::fs::read_to_string(run.join("eval.csv")).unwrap().lines().count(), 3);
        }
        "make train" => {
            let run = runs.join("train/tiny/cartpole_swingup/lfs/1");
            let info = json(&run.join("run.json"));
            assert_eq!(info["command"], "train", "{info}");
            assert!(run.join("aux.jsonl").is_file());
        }
        "make collect" => {
            for task in ["reach_duplo", "walker_run", "cartpole_swingup"] {
                let n = std::fs::read_dir(dir.join("videos").join(task)).unwrap().count();
                assert!(n >= 2, "videos/{task}: a video and its sidecar, found {n} files");
            }
        }
        "target/release/lfs collect --tasks reach_duplo,walker_run,cartpole_swingup --episodes 320 --video-frames 250 --dataset runs/paper-direct/dataset" => {
            let ds = lfs::shards::Dataset::open(&runs.join("paper-direct/dataset")).unwrap();
            assert_eq!((ds.episodes.len(), ds.tasks.len()), (3, 3), "{:?}", ds.tasks);
            assert!(ds.episodes.iter().all(|e| e.length == 20), "{:?}", ds.episodes);
        }
        "make probe" => {
            let report = json(&runs.join("probe/random-1.json"));
            assert_eq!(report["tasks"][0]["task"], "cartpole_swingup", "{report}");
        }
        "target/release/lfs probe --encoder random --dataset runs/probe-set-fast/dataset --out runs/probe/random.json" => {
            let report = json(&runs.join("probe/random.json"));
            assert_eq!(report["tasks"][0]["test_episodes"], 4, "{report}");
        }
        "target/release/lfs eval --config pipelines/sac/mini.toml --encoder runs/videos-mini/encoder.safetensors --task walker_walk --seed 1 --out-dir runs/eval/walker_walk/1" => {
            let info = json(&runs.join("eval/walker_walk/1/run.json"));
            assert_eq!(info["render_quality"], "default", "{info}");
        }
        "target/release/lfs suite status runs/suite-mini" => {
            assert!(runs.join("suite-mini/sac.resolved.toml").is_file());
        }
        "target/release/lfs suite sbatch eval/suites/paper.toml --out runs/suite-paper --cpus-per-task 8 --time 72:00:00" => {
            let scripts = std::fs::read_dir(runs.join("suite-paper/slurm"))
                .unwrap()
                .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "sbatch"))
                .count();
            assert_eq!(scripts, 1, "the job-array script");
        }
        "target/release/lfs report results/study-mini --out runs/report-study-mini" => {
            assert!(runs.join("report-study-mini/report.md").is_file());
        }
        // The guide's pages: what each says its command leaves behind.
        "target/release/lfs inspect runs/mine/dataset --verify --contact-sheet runs/mine/contact-sheet.png" => {
            assert!(runs.join("mine/contact-sheet.png").is_file());
        }
        "target/release/lfs export runs/mine/checkpoint.safetensors --out runs/mine/encoder-only.safetensors --encoder-only" => {
            let bytes = std::fs::metadata(runs.join("mine/encoder-only.safetensors")).unwrap().len();
            assert!(bytes < 1_000_000, "the conv encoder alone (~120 KB), found {bytes} bytes");
            assert!(runs.join("mine/encoder-only.example.safetensors").is_file());
        }
        "target/release/lfs eval --config pipelines/sac/tiny.toml --encoder runs/mine/encoder.safetensors --task cartpole_swingup --seed 1 --out-dir runs/eval/mine/cartpole_swingup/1" => {
            let run = runs.join("eval/mine/cartpole_swingup/1");
            for file in ["train.jsonl", "run.json", "config.resolved.toml", "checkpoint.safetensors", "events.out.tfevents.lfs"] {
                assert!(run.join(file).is_file(), "{file}");
            }
            assert_eq!(std::fs::read_to_string(run.join("eval.csv")).unwrap().lines().count(), 3);
        }
        "target/release/lfs train --config pipelines/e2e/tiny.toml --init-encoder runs/mine/encoder.safetensors --task walker_stand --seed 1 --out-dir runs/train/mine-init/walker_stand/1" => {
            // The online encoder starts from the export, and run.json says so.
            let info = json(&runs.join("train/mine-init/walker_stand/1/run.json"));
            let id = info["encoder_sha256"].as_str().unwrap_or_default();
            assert!(id.starts_with("online:lfs:init="), "{info}");
        }
        "target/release/lfs probe --encoder runs/mine/encoder.safetensors --dataset runs/probe-set-default/dataset" => {
            // The report goes beside the encoder by default.
            let report = json(&runs.join("mine/probe.json"));
            assert_eq!(report["tasks"][0]["task"], "cartpole_swingup", "{report}");
        }
        "target/release/lfs pretrain --config pipelines/tiny.toml --set 'data.datasets=[\"runs/mine/dataset\"]' --set probe.every_updates=100 --set 'probe.dataset=\"runs/probe-set-default/dataset\"' --out-dir runs/mine-probed" => {
            let log = std::fs::read_to_string(runs.join("mine-probed/metrics.jsonl")).unwrap();
            assert!(log.contains("probe/state_r2"), "the online probe logged: {log}");
        }
        "target/release/lfs suite run eval/suites/tiny.toml --out runs/suite-tiny" => {
            let cells: Vec<_> = std::fs::read_dir(runs.join("suite-tiny/cells")).unwrap().map(|e| e.unwrap().path()).collect();
            assert_eq!(cells.len(), 8, "{cells:?}");
            for cell in cells {
                let record = json(&cell.join("cell.json"));
                assert_eq!(record["state"], "done", "{}: {record}", cell.display());
            }
        }
        "target/release/lfs suite sbatch eval/suites/tiny.toml --out runs/suite-tiny --cpus-per-task 1 --time 00:30:00" => {
            assert!(runs.join("suite-tiny/slurm/tiny.sbatch").is_file());
            the_guides_suite_file_is_accepted(dir);
        }
        "target/release/lfs report runs/suite-tiny --out runs/suite-tiny/report" => {
            assert!(runs.join("suite-tiny/report/report.md").is_file());
            assert!(runs.join("suite-tiny/report/results.csv").is_file());
        }
        _ => {}
    }
}

/// The suite file that docs/guide/suites.md shows (its one ```toml block) is one `lfs suite`
/// accepts: written out as a user would copy it, its job-array script is made without error.
fn the_guides_suite_file_is_accepted(dir: &Path) {
    let page = std::fs::read_to_string(repo().join("docs/guide/suites.md")).unwrap();
    let block: Vec<&str> = page
        .lines()
        .skip_while(|l| *l != "```toml")
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .collect();
    assert!(
        block.len() > 5,
        "docs/guide/suites.md has a ```toml suite file: {block:?}"
    );
    std::fs::write(dir.join("runs/guide-suite.toml"), block.join("\n") + "\n").unwrap();
    let line = "exec target/release/lfs suite sbatch runs/guide-suite.toml --out runs/suite-guide";
    let out = bash(dir, line).output().unwrap();
    assert!(
        out.status.success(),
        "docs/guide/suites.md's suite file: {}",
        output_text(&out)
    );
}

/// A config that pins a render quality the encoder was not trained at is refused by name, with
/// nothing written; the flag lets it run.
fn render_quality_pinned_against_the_encoder_is_refused(dir: &Path) {
    let line = format!(
        "exec target/release/lfs eval --config pipelines/sac/tiny.toml --encoder runs/tiny/encoder.safetensors \
         --task cartpole_swingup --out-dir runs/refused --set env.render_quality=fast {SAC_BUDGET}"
    );
    let out = bash(dir, &line).output().unwrap();
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("pre-trained on videos rendered at quality \"default\", and env.render_quality pins \"fast\""),
        "{text}"
    );
    assert!(text.contains("--allow-render-quality-mismatch"), "{text}");
    assert!(!dir.join("runs/refused").exists(), "nothing written");
    let mut child = bash(dir, &format!("{line} --allow-render-quality-mismatch"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let info = dir.join("runs/refused/run.json");
    wait_for(&mut child, 120, "run.json", || info.exists());
    child.kill().unwrap();
    child.wait().unwrap();
    let info = json(&info);
    assert_eq!(info["render_quality"], "fast", "{info}");
    assert_eq!(info["render_quality_from"], "config", "{info}");
}
