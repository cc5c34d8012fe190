//! Argument parsing and run functions for each `lfs` subcommand.

pub mod collect;
pub mod eval;
pub mod explore;
pub mod export;
pub mod ingest;
pub mod inspect;
pub mod pretrain;
pub mod probe;
pub mod progress;
pub mod report;
pub mod run_args;
pub mod suite;
pub mod train;
