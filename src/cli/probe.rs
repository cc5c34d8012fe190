//! `lfs probe --encoder E|random --dataset D [--tasks …] [--out probe.json]`

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::progress::{finish, say, terminal_bar};
use lfs::probe::{probe_dataset, ProbeConfig, ProbeEvent, ProbeReport, ProbeRun};
use lfs::rl_loop::EncoderChoice;

#[derive(clap::Args)]
pub struct Args {
    /// An encoder written by `lfs export`, or `random` (the paper's encoder, orthogonally
    /// initialised from --random-seed).
    #[arg(long)]
    pub encoder: String,
    /// An ingested dataset recorded by `lfs collect`, which carries each frame's state and
    /// reward (`make probe-set` builds the held-out probe sets).
    #[arg(long)]
    pub dataset: PathBuf,
    /// Tasks to probe, comma-separated (default: every task of the dataset).
    #[arg(long, value_delimiter = ',')]
    pub tasks: Option<Vec<String>>,
    /// Where to write the report (JSON); the table goes to stdout. Default: probe.json beside
    /// the encoder file, or runs/probe/random-<seed>.json for the random encoder.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of the random encoder's initialisation.
    #[arg(long, default_value_t = 1)]
    pub random_seed: u64,
    /// A row every this many frames of an episode.
    #[arg(long)]
    pub frame_stride: Option<usize>,
    /// Share of each task's episodes held out (the last ones).
    #[arg(long)]
    pub test_fraction: Option<f64>,
    /// Cross-validation folds over the fitted-on episodes.
    #[arg(long)]
    pub folds: Option<usize>,
    /// Bootstrap resamples of the held-out episodes.
    #[arg(long)]
    pub bootstrap: Option<usize>,
    /// Probe an encoder pre-trained on videos of another render quality than the dataset's.
    #[arg(long)]
    pub allow_render_quality_mismatch: bool,
}

impl Args {
    fn config(&self) -> ProbeConfig {
        let mut cfg = ProbeConfig::default();
        if let Some(s) = self.frame_stride {
            cfg.split.frame_stride = s;
        }
        if let Some(f) = self.test_fraction {
            cfg.split.test_fraction = f;
        }
        if let Some(k) = self.folds {
            cfg.ridge.num_folds = k;
            cfg.split.min_train_episodes = cfg.split.min_train_episodes.max(2 * k);
        }
        if let Some(b) = self.bootstrap {
            cfg.bootstrap.num_resamples = b;
        }
        cfg
    }

    fn out(&self) -> PathBuf {
        match (&self.out, self.encoder.as_str()) {
            (Some(out), _) => out.clone(),
            (None, "random") => PathBuf::from(format!("runs/probe/random-{}.json", self.random_seed)),
            (None, path) => PathBuf::from(path).with_file_name("probe.json"),
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let encoder = match args.encoder.as_str() {
        "random" => EncoderChoice::Random,
        path => EncoderChoice::Exported(PathBuf::from(path)),
    };
    let config = args.config();
    config.validate().context("the probe's settings")?;
    let run = ProbeRun {
        encoder,
        random_seed: args.random_seed,
        dataset: args.dataset.clone(),
        tasks: args.tasks.clone(),
        config,
        allow_render_quality_mismatch: args.allow_render_quality_mismatch,
    };
    let out = args.out();
    let mut bar = None;
    let report = probe_dataset(&run, &mut |event| match event {
        ProbeEvent::Started { tasks, rows } => {
            eprintln!(
                "lfs probe: encoder {} on {} ({tasks} tasks, {rows} frame stacks) → {}",
                args.encoder,
                args.dataset.display(),
                out.display()
            );
            bar = terminal_bar(
                rows,
                "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} frame stacks, ETA {eta} {msg}",
            );
        }
        ProbeEvent::TaskStarted { task, episodes } => {
            if let Some(bar) = &bar {
                bar.set_prefix(format!("probe {task}"));
                bar.set_message(format!("{episodes} episodes"));
            }
        }
        ProbeEvent::Rows(n) => {
            if let Some(bar) = &bar {
                bar.inc(n as u64);
            }
        }
        ProbeEvent::TaskDone(t) => say(
            &bar,
            format!(
                "{}: state R² {:.3}, reward R² {:.3} ({:.1} s)",
                t.task, t.state.held_out.mean.point, t.reward.held_out.mean.point, t.seconds
            ),
        ),
    })
    .with_context(|| format!("probing {} on {}", args.encoder, args.dataset.display()))?;
    finish(bar);
    lfs::fsutil::ensure_parent(&out)?;
    let json = serde_json::to_string_pretty(&report)?;
    lfs::fsutil::write_bytes_atomic(&out, format!("{json}\n").as_bytes())
        .with_context(|| format!("writing {}", out.display()))?;
    print!("{}", table(&report));
    eprintln!("lfs probe: done in {:.0} s; wrote {}", report.seconds, out.display());
    Ok(ExitCode::SUCCESS)
}

/// The report as a Markdown table: per task, held-out R² with 95% intervals.
pub fn table(report: &ProbeReport) -> String {
    let mut s = String::from(
        "| task | episodes (fit / held out) | frame stacks | state R² [95% CI] | reward R² [95% CI] |\n|---|---|---|---|---|\n",
    );
    for t in &report.tasks {
        let ci = |r: &lfs::probe::HeldOutR2| format!("{:.3} [{:.3}, {:.3}]", r.mean.point, r.mean.low, r.mean.high);
        s.push_str(&format!(
            "| {} | {} / {} | {} / {} | {} | {} |\n",
            t.task,
            t.train_episodes,
            t.test_episodes,
            t.train_rows,
            t.test_rows,
            ci(&t.state.held_out),
            ci(&t.reward.held_out)
        ));
    }
    if report.tasks.len() > 1 {
        let mean = |f: &dyn Fn(&lfs::probe::TaskProbe) -> f64| {
            report.tasks.iter().map(f).sum::<f64>() / report.tasks.len() as f64
        };
        s.push_str(&format!(
            "| mean over tasks | | | {:.3} | {:.3} |\n",
            mean(&|t| t.state.held_out.mean.point),
            mean(&|t| t.reward.held_out.mean.point)
        ));
    }
    s
}
