//! Argument parsing and run functions for each `lfs` subcommand.

pub mod ingest;
pub mod inspect;
