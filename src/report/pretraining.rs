//! LNC during pre-training (the paper's figure on N, "Effect of LNC"): for each encoder of the
//! suite made by an `lfs pretrain` run with LNC (`lfs`, `lfs-cl`), N — the synthetic pairs LNC
//! kept in the batch — per update, from the run's `metrics.jsonl`, averaged over bins of updates,
//! with LNC's distance D and its clip window beside it.
//!
//! An encoder row's source is the pre-training run directory, or the `encoder.safetensors`
//! exported into it; a relative source is taken from the directory `lfs report` runs in, as
//! `lfs suite` took it. A source without a log (an exported file copied elsewhere, a log of a
//! method without LNC) gives no curve; one whose log cannot be read gives a note, not an error:
//! the suite's scores do not depend on it.
//!
//! The same log may hold the online probe's lines ([`super::pretrain_probe`]): they carry no
//! `pretrain/*` key, so they are no update here, and that module reads them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::cells::{for_each_json_line, Cell};
use super::pretrain_probe::{self, ProbeCurve};
use super::scores::{MethodCells, SeedStats};
use super::update_bins::update_bins;

/// The pre-training log beside a run's checkpoint (src/pretrain/run.rs).
pub const PRETRAIN_LOG: &str = crate::run_dir::METRICS_FILE;

/// One method's pre-training log, binned.
#[derive(Debug, Clone, PartialEq)]
pub struct LncCurve {
    /// Index into the report's methods (its colour).
    pub method: usize,
    pub log: PathBuf,
    /// M: pairs per batch (N + real).
    pub batch_size: usize,
    pub bins: Vec<LncBin>,
}

/// Means over the updates `first..=last`.
#[derive(Debug, Clone, PartialEq)]
pub struct LncBin {
    pub first: u64,
    pub last: u64,
    /// N: mean and std (ddof = 0) over the bin's updates.
    pub num_synthetic: f64,
    pub num_synthetic_std: f64,
    /// D: the mean k-NN distance among the real latents.
    pub lnc_d: f64,
    /// The clip window (c − r/2)·D, (c + r/2)·D.
    pub clip_low: f64,
    pub clip_high: f64,
    pub loss: f64,
}

/// A method's N over its pre-training runs, bin by bin, as the report draws it.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodLnc {
    /// Index into the report's methods (its colour).
    pub method: usize,
    /// The runs drawn: those whose bins are the method's first run's.
    pub runs: usize,
    /// The method's other runs (another number of updates, so other bins): not drawn.
    pub left_out: usize,
    pub bins: Vec<MethodBin>,
}

/// One bin of [`MethodLnc`]: the mean N, and the band around it.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodBin {
    /// The bin's last update.
    pub last: u64,
    /// One run: its mean N over the bin. Several: the mean over runs of that.
    pub mean: f64,
    /// One run: ±1 std of N within the bin (the spread of N, not an interval). Several: the
    /// lowest and the highest run's mean N (the spread between pre-training runs).
    pub low: f64,
    pub high: f64,
}

/// Every method's N over its runs ([`MethodLnc`]), in the order of first appearance in
/// `curves`.
pub fn by_method(curves: &[LncCurve]) -> Vec<MethodLnc> {
    /// A method's runs with its first run's bins, and how many others it has.
    struct Runs<'a> {
        method: usize,
        drawn: Vec<&'a LncCurve>,
        left_out: usize,
    }
    let same_bins = |a: &LncCurve, b: &LncCurve| {
        a.bins.len() == b.bins.len()
            && a.bins
                .iter()
                .zip(&b.bins)
                .all(|(x, y)| (x.first, x.last) == (y.first, y.last))
    };
    let mut groups: Vec<Runs> = Vec::new();
    for curve in curves {
        match groups.iter_mut().find(|g| g.method == curve.method) {
            Some(g) if same_bins(g.drawn[0], curve) => g.drawn.push(curve),
            Some(g) => g.left_out += 1,
            None => groups.push(Runs {
                method: curve.method,
                drawn: vec![curve],
                left_out: 0,
            }),
        }
    }
    groups
        .into_iter()
        .map(|g| {
            let first = g.drawn[0];
            let bins = first
                .bins
                .iter()
                .enumerate()
                .map(|(i, bin)| {
                    if g.drawn.len() == 1 {
                        return MethodBin {
                            last: bin.last,
                            mean: bin.num_synthetic,
                            low: bin.num_synthetic - bin.num_synthetic_std,
                            high: bin.num_synthetic + bin.num_synthetic_std,
                        };
                    }
                    let means: Vec<f64> = g.drawn.iter().map(|r| r.bins[i].num_synthetic).collect();
                    MethodBin {
                        last: bin.last,
                        mean: means.iter().sum::<f64>() / means.len() as f64,
                        low: means.iter().copied().fold(f64::INFINITY, f64::min),
                        high: means.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    }
                })
                .collect();
            MethodLnc {
                method: g.method,
                runs: g.drawn.len(),
                left_out: g.left_out,
                bins,
            }
        })
        .collect()
}

/// A source whose log exists but could not be read: the report says so.
#[derive(Debug, Clone, PartialEq)]
pub struct LogNote {
    pub method: String,
    pub log: PathBuf,
    pub reason: String,
}

/// What the report shows of the encoders' pre-training.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pretraining {
    pub curves: Vec<LncCurve>,
    pub notes: Vec<LogNote>,
    /// The online probe of every run that logged one.
    pub probes: Vec<ProbeCurve>,
    /// Logs whose probe lines could not be read.
    pub probe_notes: Vec<LogNote>,
}

/// One update's line, as far as LNC goes.
struct UpdateLine {
    num_synthetic: f64,
    num_real: f64,
    lnc_d: f64,
    clip_low: f64,
    clip_high: f64,
    loss: f64,
}

/// The log of the run that made `source`, if it is one: the directory itself, or the directory
/// of an exported file.
pub fn log_of_source(source: &str) -> Option<PathBuf> {
    if source == "random" {
        return None;
    }
    let path = Path::new(source);
    let dir = if path.is_dir() { path } else { path.parent()? };
    let log = dir.join(PRETRAIN_LOG);
    log.is_file().then_some(log)
}

/// The LNC curves of every pre-training run with LNC that a method's cells name (several for a
/// method with one run per seed), and the online-probe curve of each method's first run when
/// it probed.
pub fn read(cells: &[Cell], methods: &[MethodCells]) -> Pretraining {
    let mut out = Pretraining::default();
    for (i, m) in methods.iter().enumerate() {
        // Every pre-training run the method's cells name, in cell order: one, or one per seed
        // when the suite's source has `{seed}`.
        let mut indices: Vec<usize> = m.by_task.values().flatten().copied().collect();
        indices.sort_unstable();
        let mut logs: Vec<PathBuf> = Vec::new();
        for log in indices
            .iter()
            .filter_map(|&c| log_of_source(&cells[c].meta.encoder_source))
        {
            if !logs.contains(&log) {
                logs.push(log);
            }
        }
        for log in &logs {
            match read_log(log) {
                Ok(Some((batch_size, bins))) => out.curves.push(LncCurve {
                    method: i,
                    log: log.clone(),
                    batch_size,
                    bins,
                }),
                Ok(None) => {}
                Err(reason) => out.notes.push(LogNote {
                    method: m.method.clone(),
                    log: log.clone(),
                    reason,
                }),
            }
        }
        // The online probe of the first run only (its picture has one line per method).
        let Some(log) = logs.into_iter().next() else {
            continue;
        };
        match pretrain_probe::read_log(&log) {
            Ok(Some(probes)) => out.probes.push(ProbeCurve { method: i, log, probes }),
            Ok(None) => {}
            Err(reason) => out.probe_notes.push(LogNote {
                method: m.method.clone(),
                log,
                reason,
            }),
        }
    }
    out
}

/// The binned curve of one log; `None` when no update ran LNC. A resumed run logs the updates
/// after its checkpoint twice: the last line of each update counts.
pub fn read_log(path: &Path) -> std::result::Result<Option<(usize, Vec<LncBin>)>, String> {
    let mut updates: BTreeMap<u64, UpdateLine> = BTreeMap::new();
    for_each_json_line(path, |v| {
        let num = |key: &str| v.get(key).and_then(serde_json::Value::as_f64);
        let (Some(step), Some(lnc_d)) = (v.get("step").and_then(serde_json::Value::as_u64), num("pretrain/lnc_d"))
        else {
            return Ok(()); // not an LNC update (another method, the online probe's line, …)
        };
        let need = |key: &str| num(key).ok_or_else(|| format!("no number `{key}`"));
        updates.insert(
            step,
            UpdateLine {
                num_synthetic: need("pretrain/num_synthetic")?,
                num_real: need("pretrain/num_real")?,
                lnc_d,
                clip_low: need("pretrain/clip_low")?,
                clip_high: need("pretrain/clip_high")?,
                loss: need("pretrain/loss")?,
            },
        );
        Ok(())
    })?;
    let Some(&last) = updates.keys().next_back() else {
        return Ok(None);
    };
    let batch_size = updates
        .values()
        .next()
        .map_or(0, |u| (u.num_synthetic + u.num_real) as usize);
    // Bins of equal width over 1..=last; bins without a logged update are left out.
    let mut bins = Vec::new();
    for (first, end) in update_bins(last) {
        let rows: Vec<&UpdateLine> = updates.range(first..=end).map(|(_, u)| u).collect();
        let n: Vec<f64> = rows.iter().map(|u| u.num_synthetic).collect();
        let Some(n) = SeedStats::of(&n) else {
            continue; // no update logged in this bin
        };
        let mean = |f: fn(&UpdateLine) -> f64| rows.iter().map(|u| f(u)).sum::<f64>() / rows.len() as f64;
        bins.push(LncBin {
            first,
            last: end,
            num_synthetic: n.mean,
            num_synthetic_std: n.std,
            lnc_d: mean(|u| u.lnc_d),
            clip_low: mean(|u| u.clip_low),
            clip_high: mean(|u| u.clip_high),
            loss: mean(|u| u.loss),
        });
    }
    Ok(Some((batch_size, bins)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(method: usize, bins: &[(u64, u64, f64, f64)]) -> LncCurve {
        LncCurve {
            method,
            log: PathBuf::from(format!("run-{method}")),
            batch_size: 64,
            bins: bins
                .iter()
                .map(|&(first, last, n, std)| LncBin {
                    first,
                    last,
                    num_synthetic: n,
                    num_synthetic_std: std,
                    lnc_d: 1.0,
                    clip_low: 0.55,
                    clip_high: 0.65,
                    loss: 6.0,
                })
                .collect(),
        }
    }

    #[test]
    fn a_method_with_several_runs_is_their_mean_between_the_lowest_and_highest() {
        let curves = [
            curve(0, &[(1, 10, 6.0, 2.0), (11, 20, 4.0, 1.0)]),
            curve(1, &[(1, 10, 3.0, 0.5)]),
            curve(0, &[(1, 10, 8.0, 2.0), (11, 20, 7.0, 1.0)]),
            curve(0, &[(1, 10, 7.0, 9.0), (11, 20, 1.0, 9.0)]),
            // Another number of updates: other bins, not drawn, counted.
            curve(0, &[(1, 5, 100.0, 0.0)]),
        ];
        let methods = by_method(&curves);
        assert_eq!(methods.len(), 2);
        let lfs = &methods[0];
        assert_eq!((lfs.method, lfs.runs, lfs.left_out), (0, 3, 1));
        let expect = [(10, 7.0, 6.0, 8.0), (20, 4.0, 1.0, 7.0)];
        for (bin, (last, mean, low, high)) in lfs.bins.iter().zip(expect) {
            assert_eq!(bin.last, last);
            assert!((bin.mean - mean).abs() < 1e-12, "{bin:?}");
            assert_eq!((bin.low, bin.high), (low, high), "{bin:?}");
        }
        // One run: its own bin means, ±1 std within the bin.
        let other = &methods[1];
        assert_eq!((other.runs, other.left_out), (1, 0));
        assert_eq!(
            other.bins,
            vec![MethodBin {
                last: 10,
                mean: 3.0,
                low: 2.5,
                high: 3.5
            }]
        );
    }
}
