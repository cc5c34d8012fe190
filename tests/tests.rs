//! The integration tests, one module per capability.

// Running the `lfs` binary and the FFmpeg command line (fixture maker and reference decoder).
mod common;
// `lfs ingest` / `lfs inspect` end to end: fixture videos, frame counts, pixel values,
// LeRobot column types, resume, bad input.
mod ingest;
