//! How widely an episode moved through its task's state space: the particle-based (k-nearest-
//! neighbour) entropy estimate of its visited states, APT's own estimator (Liu & Abbeel 2021,
//! Eq. 4; URLB's `PBE` with `knn_avg` false) applied to dm_control's proprioceptive state
//! instead of a learned embedding. `lfs explore` logs it per episode as
//! `train/state_entropy`, its measure of state coverage (docs/design.md §15).

/// The neighbour whose distance counts (APT's and URLB's `knn_k`).
pub const STATE_ENTROPY_K: usize = 12;

/// `mean_i log(1 + ‖s_i − s_(k,i)‖₂)` over the episode's states, `s_(k,i)` being the k-th
/// nearest other state (ties counted, the state itself excluded; k is capped at n − 1). Raw
/// units: compare episodes of one task, not tasks. `None` for fewer than two states.
pub fn state_entropy(states: &[Vec<f64>], k: usize) -> Option<f64> {
    let n = states.len();
    if n < 2 || k == 0 {
        return None;
    }
    let k = k.min(n - 1);
    let mut total = 0.0;
    let mut row = Vec::with_capacity(n - 1);
    for (i, a) in states.iter().enumerate() {
        row.clear();
        row.extend(
            states
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, b)| a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt()),
        );
        let (_, kth, _) = row.select_nth_unstable_by(k - 1, f64::total_cmp);
        total += kth.ln_1p();
    }
    Some(total / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_on_a_line_by_hand() {
        // 0, 1, 3, 7 on a line: 2nd-nearest other point of each is 3, 2, 3, 6 away.
        let states: Vec<Vec<f64>> = [0.0, 1.0, 3.0, 7.0].iter().map(|x| vec![*x]).collect();
        let want = [3.0f64, 2.0, 3.0, 6.0].iter().map(|d| d.ln_1p()).sum::<f64>() / 4.0;
        assert!((state_entropy(&states, 2).unwrap() - want).abs() < 1e-12);
        // k past the others is the farthest one: 7, 6, 4, 7
        let far = [7.0f64, 6.0, 4.0, 7.0].iter().map(|d| d.ln_1p()).sum::<f64>() / 4.0;
        assert!((state_entropy(&states, 12).unwrap() - far).abs() < 1e-12);
    }

    #[test]
    fn a_wider_spread_scores_higher_and_a_single_state_none() {
        let spread = |w: f64| -> Vec<Vec<f64>> {
            (0..50)
                .map(|i| vec![w * (i as f64).sin(), w * (i as f64 * 0.7).cos()])
                .collect()
        };
        assert!(state_entropy(&spread(2.0), STATE_ENTROPY_K) > state_entropy(&spread(1.0), STATE_ENTROPY_K));
        assert_eq!(state_entropy(&[vec![1.0, 2.0]], STATE_ENTROPY_K), None);
        // Staying put: every distance 0.
        assert_eq!(state_entropy(&vec![vec![0.5, 0.5]; 20], STATE_ENTROPY_K), Some(0.0));
    }
}
