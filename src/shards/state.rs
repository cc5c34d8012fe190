//! Per-frame state and reward (the `observation.state` and `reward` columns). Both come from
//! an `lfs collect` sidecar: `state_names` + `states` (one row per frame, the reset frame
//! first) and `rewards` (one per agent step). They are stored as float32, so every value must
//! be finite once rounded to float32.

/// An episode's proprioceptive state: one row per frame.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeState {
    /// What each value of a row is (dm_control's flattened observation: `position[0]`, …).
    pub names: Vec<String>,
    /// (num_frames, names.len()), row-major.
    pub values: Vec<f32>,
}

impl EpisodeState {
    /// Checks and converts sidecar rows: at least one name, every row `names.len()` wide, every
    /// value finite as float32. The error says which row or value is wrong.
    pub fn from_rows(names: Vec<String>, rows: &[Vec<f64>]) -> Result<Self, String> {
        if names.is_empty() {
            return Err("state_names is empty but states are given".into());
        }
        let mut values = Vec::with_capacity(rows.len() * names.len());
        for (t, row) in rows.iter().enumerate() {
            if row.len() != names.len() {
                return Err(format!(
                    "states row {t} has {} values, state_names has {}",
                    row.len(),
                    names.len()
                ));
            }
            for (i, &v) in row.iter().enumerate() {
                values.push(finite_f32(v).ok_or_else(|| format!("states[{t}][{i}] = {v:e} is not a finite float32"))?);
            }
        }
        Ok(Self { names, values })
    }

    pub fn dim(&self) -> usize {
        self.names.len()
    }

    pub fn num_frames(&self) -> usize {
        self.values.len() / self.dim().max(1)
    }

    /// The state at frame `t`, `dim()` values.
    pub fn row(&self, t: usize) -> &[f32] {
        let d = self.dim();
        &self.values[t * d..(t + 1) * d]
    }
}

/// Sidecar rewards (one per agent step) as float32; an error names the first non-finite one.
pub fn rewards_f32(rewards: &[f64]) -> Result<Vec<f32>, String> {
    rewards
        .iter()
        .enumerate()
        .map(|(t, &r)| finite_f32(r).ok_or_else(|| format!("rewards[{t}] = {r:e} is not a finite float32")))
        .collect()
}

/// `v` rounded to float32, if that is finite (1e300 is a finite f64 but not a finite f32).
fn finite_f32(v: f64) -> Option<f32> {
    let x = v as f32;
    x.is_finite().then_some(x)
}

/// Why a sidecar's state or rewards do not fit a video of `num_frames` decoded frames, if they
/// do not: a state row per frame, a reward per agent step (frames − 1).
pub fn count_mismatch(state: Option<&EpisodeState>, rewards: Option<&[f32]>, num_frames: usize) -> Option<String> {
    if let Some(s) = state {
        if s.num_frames() != num_frames {
            return Some(format!(
                "{} states rows but the video has {num_frames} decoded frames (one row per frame expected)",
                s.num_frames()
            ));
        }
    }
    match rewards {
        Some(r) if r.len() + 1 != num_frames => Some(format!(
            "{} rewards but the video has {num_frames} decoded frames ({} expected: one per agent step, frames - 1)",
            r.len(),
            num_frames.saturating_sub(1)
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("position[{i}]")).collect()
    }

    #[test]
    fn rows_become_row_major_float32() {
        let s = EpisodeState::from_rows(names(2), &[vec![0.5, -1.0], vec![2.0, 1e-3]]).unwrap();
        assert_eq!((s.dim(), s.num_frames()), (2, 2));
        assert_eq!(s.values, vec![0.5, -1.0, 2.0, 1e-3f64 as f32]);
        assert_eq!(s.row(1), &[2.0, 1e-3f64 as f32]);
        assert_eq!(count_mismatch(Some(&s), Some(&[0.25]), 2), None);
    }

    #[test]
    fn bad_rows_are_named() {
        let err = |rows: &[Vec<f64>]| EpisodeState::from_rows(names(2), rows).unwrap_err();
        assert_eq!(
            err(&[vec![0.0, 0.0], vec![0.0]]),
            "states row 1 has 1 values, state_names has 2"
        );
        assert_eq!(err(&[vec![0.0, 1e300]]), "states[0][1] = 1e300 is not a finite float32");
        assert!(EpisodeState::from_rows(Vec::new(), &[vec![]]).is_err());
        assert_eq!(
            rewards_f32(&[1.0, -1e39]).unwrap_err(),
            "rewards[1] = -1e39 is not a finite float32"
        );
    }

    #[test]
    fn counts_must_fit_the_decoded_frames() {
        let s = EpisodeState::from_rows(names(1), &[vec![0.0], vec![1.0], vec![2.0]]).unwrap();
        let why = count_mismatch(Some(&s), None, 4).unwrap();
        assert!(
            why.starts_with("3 states rows but the video has 4 decoded frames"),
            "{why}"
        );
        let why = count_mismatch(None, Some(&[1.0, 2.0, 3.0]), 3).unwrap();
        assert!(
            why.starts_with("3 rewards but the video has 3 decoded frames (2 expected"),
            "{why}"
        );
        // A one-frame video has no agent step.
        assert_eq!(count_mismatch(None, Some(&[]), 1), None);
    }
}
