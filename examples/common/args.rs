//! The benchmarks' shared command-line helper (included with `#[path]`; not an example).

use anyhow::Context;

/// The number after `name` in `args`, or `default` when `name` is absent.
pub fn arg(args: &[String], name: &str, default: usize) -> anyhow::Result<usize> {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .with_context(|| format!("{name} needs a value"))?
            .parse()
            .with_context(|| format!("{name} must be a number")),
        None => Ok(default),
    }
}
