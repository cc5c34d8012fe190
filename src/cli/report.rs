//! `lfs report SUITE_DIR --out report/ [--allow-mismatch] [--budget FRAMES]… [--probe probe.json]…`

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use lfs::report::aggregate::BootstrapConfig;
use lfs::report::{self, ReportOptions};

#[derive(clap::Args)]
pub struct Args {
    /// Benchmark-suite directory (its cells/<name>/ folders, as `lfs suite run` writes them).
    pub suite_dir: PathBuf,
    /// Report folder: report.md, results.csv and the pictures (PNG and SVG).
    #[arg(long)]
    pub out: PathBuf,
    /// Report cells that differ in render quality, feature cache, budget, action repeat or
    /// episode length (listing the differences in report.md) instead of refusing.
    #[arg(long)]
    pub allow_mismatch: bool,
    /// Score runs at this many frames (their last evaluation at or before it); repeatable,
    /// e.g. --budget 100000 --budget 500000. Default: the cells' own budgets.
    #[arg(long = "budget", value_name = "FRAMES")]
    pub budgets: Vec<u64>,
    /// Bootstrap replications for the intervals (rliable's default).
    #[arg(long, default_value_t = 50_000)]
    pub reps: usize,
    /// Seed of the bootstrap resampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// A probe.json of `lfs probe` to set beside the SAC returns of the encoder row it probed
    /// (matched by the export's sha256, or `random`), or `ROW=FILE` to bind it to the encoder
    /// row ROW (an encoder regenerated elsewhere, whose export's bytes differ); repeatable. The
    /// probe.json beside each row's exported encoder is read without asking.
    #[arg(long = "probe", value_name = "[ROW=]FILE")]
    pub probes: Vec<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.reps > 0, "--reps must be at least 1");
    let opts = ReportOptions {
        allow_mismatch: args.allow_mismatch,
        budgets: args.budgets,
        bootstrap: BootstrapConfig {
            reps: args.reps,
            seed: args.seed,
            ..BootstrapConfig::default()
        },
        probes: args.probes,
    };
    let analysed = report::analyse(&args.suite_dir, &opts).map_err(|err| {
        let hint = match err {
            lfs::Error::CellMismatch(_) => " (--allow-mismatch reports them anyway)",
            _ => "",
        };
        anyhow::Error::new(err).context(format!("reading the suite {}{hint}", args.suite_dir.display()))
    })?;
    let files = report::render(&analysed).context("drawing the report")?;
    let paths = report::write(&files, &args.out).with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "{} of {} cells done; {} files in {}: {}",
        analysed.progress.done,
        analysed.progress.total(),
        paths.len(),
        args.out.display(),
        args.out.join(report::REPORT_MD).display()
    );
    Ok(ExitCode::SUCCESS)
}
