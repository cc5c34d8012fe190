//! The `lfs` command line: one subcommand per stage of the pipeline, each a thin wrapper over
//! the library (`src/cli/<stage>.rs` parses arguments and calls into `lfs::…`).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

/// mimalloc, keeping freed memory (src/alloc.rs).
#[global_allocator]
static GLOBAL: lfs::alloc::Allocator = lfs::alloc::Allocator {};

#[derive(Parser)]
#[command(
    name = "lfs",
    version,
    about = "Pre-train visual encoders for RL on action-free videos (LFS)",
    // A later `--flag value` replaces an earlier one, so a documented command can be run at a
    // smaller budget by appending to it (`... --episodes 320 ... --episodes 2`). Repeatable
    // flags (`--set`) still add up.
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode a folder of videos into Parquet frame shards (LeRobot v3 layout).
    Ingest(cli::ingest::Args),
    /// Summarise an ingested dataset; optionally write a contact sheet of sampled frames.
    Inspect(cli::inspect::Args),
    /// Pre-train an encoder (LFS or a baseline) on ingested datasets; resumes a killed run.
    Pretrain(cli::pretrain::Args),
    /// Export a checkpoint's encoder (and projector) as PyTorch-loadable safetensors.
    Export(cli::export::Args),
    /// How much of each task's state and reward an encoder's frozen features hold: held-out R²
    /// of linear probes, in minutes and without RL.
    Probe(cli::probe::Args),
    /// Record random-policy DMControl episodes as lossless videos with JSON sidecars.
    Collect(cli::collect::Args),
    /// Train SAC on a DMControl task on top of a frozen encoder and evaluate it; resumes a
    /// killed run.
    Eval(cli::eval::Args),
    /// Train SAC end to end with an auxiliary objective (LFS, an ablation, ATC, CURL or none)
    /// on the same encoder, the paper's Algorithm 1; resumes a killed run.
    Train(cli::train::Args),
    /// Pre-train an encoder by exploring reward-free DMControl environments (Proto-RL, APT);
    /// resumes a killed run and leaves the encoder in `lfs export`'s format.
    Explore(cli::explore::Args),
    /// Run a benchmark suite (encoders × tasks × seeds of `lfs eval`) locally or on SLURM.
    Suite(cli::suite::Args),
    /// Turn a benchmark-suite directory into report.md, results.csv and pictures (per-task
    /// curves, normalised IQM, rliable's aggregates with bootstrap intervals).
    Report(cli::report::Args),
}

fn main() -> ExitCode {
    lfs::alloc::keep_freed_memory();
    let cli = Cli::parse();
    if let Err(err) = lfs::switches::check() {
        eprintln!("lfs: error: {err:#}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Ingest(args) => cli::ingest::run(args),
        Command::Inspect(args) => cli::inspect::run(args),
        Command::Pretrain(args) => cli::pretrain::run(args),
        Command::Export(args) => cli::export::run(args),
        Command::Probe(args) => cli::probe::run(args),
        Command::Collect(args) => cli::collect::run(args),
        Command::Eval(args) => cli::eval::run(args),
        Command::Train(args) => cli::train::run(args),
        Command::Explore(args) => cli::explore::run(args),
        Command::Suite(args) => cli::suite::run(args),
        Command::Report(args) => cli::report::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // `{:#}` prints the whole context chain on one line (ripgrep's convention).
            eprintln!("lfs: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
