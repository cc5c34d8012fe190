//! The wall-clock limit of one source (`lfs ingest --timeout`): hashing and decoding share it.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::Error;

/// A point in time after which work on one source stops, and the limit it came from.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    timeout: Duration,
}

impl Deadline {
    /// `timeout` from now.
    pub fn after(timeout: Duration) -> Self {
        Self {
            at: Instant::now() + timeout,
            timeout,
        }
    }

    pub fn passed(&self) -> bool {
        Instant::now() >= self.at
    }

    /// FFmpeg's interrupt callback: blocking reads inside FFmpeg give up at the deadline.
    pub fn interrupt(&self) -> impl FnMut() -> bool + 'static {
        let at = self.at;
        move || Instant::now() >= at
    }

    /// The error for `path`, saying what was going on (`while hashing`, `while decoding`).
    pub fn error(&self, path: &Path, during: &str) -> Error {
        Error::decode(
            path,
            format!(
                "timed out after {} s (--timeout) {during}",
                format_seconds(self.timeout.as_secs_f64())
            ),
        )
    }
}

/// `1`, `0.5`, `0.000001`: the limit as the user wrote it, not rounded to 0.
fn format_seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}
