//! Pre-training curves in bins of updates: the pre-training section's loss and LNC curves
//! (`pretraining.rs`) and the online probe's (`pretrain_probe.rs`) use the same bins, so their
//! tables line up.

/// Bins of updates per curve (and rows per table).
pub const NUM_BINS: usize = 20;

/// The bins over updates 1..=last, each as (first, last) update: [`NUM_BINS`] of equal width,
/// fewer when there are fewer updates than bins.
pub fn update_bins(last: u64) -> impl Iterator<Item = (u64, u64)> {
    let width = last.div_ceil(NUM_BINS as u64).max(1);
    (0..NUM_BINS as u64)
        .map(move |k| (k * width + 1, ((k + 1) * width).min(last)))
        // Past the last update nothing is left (and BTreeMap::range would panic on first > last).
        .take_while(|(first, end)| first <= end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_cover_every_update_once() {
        for last in [1, 7, 19, 20, 21, 100, 6000, 12_345] {
            let bins: Vec<(u64, u64)> = update_bins(last).collect();
            assert!(bins.len() <= NUM_BINS, "{last}: {bins:?}");
            assert_eq!(bins[0].0, 1);
            assert_eq!(bins.last().unwrap().1, last);
            for pair in bins.windows(2) {
                assert_eq!(pair[1].0, pair[0].1 + 1, "{last}: {bins:?}");
            }
        }
        assert_eq!(update_bins(100).collect::<Vec<_>>()[..2], [(1, 5), (6, 10)]);
    }
}
