//! `results.csv`: every evaluation of every done cell in DrQ-v2's long format (its
//! `curves/dmc_*.csv`: `agent,task,seed,frame,episode_reward,hour`, plus the encoder column),
//! so anyone can plot the suite with their own tools. Floats are written in Rust's shortest
//! round-tripping form; text fields are quoted as RFC 4180 says when they need it.

use super::cells::Cell;
use crate::{Error, Result};

/// The file's columns.
pub const HEADER: [&str; 7] = ["agent", "encoder", "task", "seed", "frame", "episode_reward", "hour"];

/// One row: one evaluation of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultRow {
    pub agent: String,
    pub encoder: String,
    pub task: String,
    pub seed: u64,
    pub frame: u64,
    pub episode_reward: f64,
    /// Wall-clock hours since the run began (`eval.csv`'s `total_time` / 3600).
    pub hour: f64,
}

/// The rows of the done cells, in cell order.
pub fn rows(cells: &[Cell]) -> Vec<ResultRow> {
    let mut rows = Vec::new();
    for cell in cells {
        let Some(finished) = &cell.finished else { continue };
        for eval in &finished.evals {
            rows.push(ResultRow {
                agent: cell.meta.agent.clone(),
                encoder: cell.meta.encoder.clone(),
                task: cell.meta.task.name().to_string(),
                seed: cell.meta.seed,
                frame: eval.frame,
                episode_reward: eval.episode_reward,
                hour: eval.total_time / 3600.0,
            });
        }
    }
    rows
}

/// Quote a field if it holds a comma, a quote or a line break.
pub(crate) fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The file's text.
pub fn to_csv(rows: &[ResultRow]) -> String {
    let mut out = HEADER.join(",");
    out.push('\n');
    for r in rows {
        let line = [
            field(&r.agent),
            field(&r.encoder),
            field(&r.task),
            r.seed.to_string(),
            r.frame.to_string(),
            r.episode_reward.to_string(),
            r.hour.to_string(),
        ];
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

/// Split one CSV record into fields (quoted fields may hold commas and doubled quotes; line
/// breaks inside fields are not needed by any name this report writes and are not read).
fn split_record(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (false, '"') if cur.is_empty() => quoted = true,
            (false, ',') => fields.push(std::mem::take(&mut cur)),
            (_, c) => cur.push(c),
        }
    }
    if quoted {
        return Err("unterminated quoted field".into());
    }
    fields.push(cur);
    Ok(fields)
}

/// Read a `results.csv` back (the round trip the tests check).
pub fn from_csv(text: &str) -> Result<Vec<ResultRow>> {
    let bad = |line: usize, why: String| Error::Config(format!("results.csv line {line}: {why}"));
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.is_empty());
    let header = lines.next().map(|(_, l)| l).unwrap_or_default();
    if header != HEADER.join(",") {
        return Err(bad(1, format!("header {header:?}, expected {:?}", HEADER.join(","))));
    }
    lines
        .map(|(i, line)| {
            let f = split_record(line).map_err(|e| bad(i + 1, e))?;
            if f.len() != HEADER.len() {
                return Err(bad(i + 1, format!("{} fields", f.len())));
            }
            let num = |k: usize| -> Result<f64> { f[k].parse().map_err(|_| bad(i + 1, format!("bad {}", HEADER[k]))) };
            let count =
                |k: usize| -> Result<u64> { f[k].parse().map_err(|_| bad(i + 1, format!("bad {}", HEADER[k]))) };
            Ok(ResultRow {
                agent: f[0].clone(),
                encoder: f[1].clone(),
                task: f[2].clone(),
                seed: count(3)?,
                frame: count(4)?,
                episode_reward: num(5)?,
                hour: num(6)?,
            })
        })
        .collect()
}
