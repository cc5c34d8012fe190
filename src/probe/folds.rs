//! Group k-fold: cross-validation folds made of whole groups (episodes), so that frames of one
//! episode, which are nearly alike, are never on both sides of a split.
//!
//! The assignment is deterministic: the distinct group ids sorted ascending, the group of rank
//! `r` in fold `r % num_folds` (round robin). Each fold must hold at least 2 groups, so that a
//! fold's score does not hang on a single episode.

use std::collections::BTreeMap;

use crate::{Error, Result};

/// The smallest number of groups a fold may hold.
pub const MIN_GROUPS_PER_FOLD: usize = 2;

/// The fold of every row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupFolds {
    pub num_folds: usize,
    /// Distinct groups among the rows.
    pub num_groups: usize,
    /// `fold_of_row[i]` in `0..num_folds`.
    pub fold_of_row: Vec<usize>,
}

impl GroupFolds {
    /// Rows in fold `fold` (its validation rows), ascending.
    pub fn rows_in(&self, fold: usize) -> Vec<usize> {
        (0..self.fold_of_row.len())
            .filter(|&i| self.fold_of_row[i] == fold)
            .collect()
    }

    /// Rows outside fold `fold` (its training rows), ascending.
    pub fn rows_out(&self, fold: usize) -> Vec<usize> {
        (0..self.fold_of_row.len())
            .filter(|&i| self.fold_of_row[i] != fold)
            .collect()
    }
}

/// Group k-fold over `groups` (one id per row): sorted groups dealt round robin into
/// `num_folds` folds. [`Error::Config`] for fewer than 2 folds or fewer than
/// [`MIN_GROUPS_PER_FOLD`] groups per fold.
pub fn group_folds(groups: &[u64], num_folds: usize) -> Result<GroupFolds> {
    if num_folds < 2 {
        return Err(Error::Config(format!(
            "probe: cross-validation needs at least 2 folds, got {num_folds}"
        )));
    }
    // BTreeMap: the ids in ascending order, each with its rank
    let mut rank_of_group: BTreeMap<u64, usize> = groups.iter().map(|&g| (g, 0)).collect();
    for (rank, slot) in rank_of_group.values_mut().enumerate() {
        *slot = rank;
    }
    let num_groups = rank_of_group.len();
    let needed = MIN_GROUPS_PER_FOLD * num_folds;
    if num_groups < needed {
        return Err(Error::Config(format!(
            "probe: group {num_folds}-fold cross-validation needs at least {MIN_GROUPS_PER_FOLD} groups \
             (episodes) per fold, {needed} in all, but the training rows come from {num_groups}: \
             use fewer folds or more episodes"
        )));
    }
    let fold_of_row = groups.iter().map(|g| rank_of_group[g] % num_folds).collect();
    Ok(GroupFolds {
        num_folds,
        num_groups,
        fold_of_row,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_groups_are_dealt_round_robin() {
        // groups 30, 10, 20, 40 → ranks 2, 0, 1, 3 → folds 0, 0, 1, 1
        let folds = group_folds(&[30, 10, 10, 20, 40, 30], 2).unwrap();
        assert_eq!(folds.fold_of_row, vec![0, 0, 0, 1, 1, 0]);
        assert_eq!(folds.num_groups, 4);
        assert_eq!(folds.rows_in(1), vec![3, 4]);
        assert_eq!(folds.rows_out(1), vec![0, 1, 2, 5]);
    }

    #[test]
    fn too_few_groups_is_a_config_error() {
        let err = group_folds(&[1, 2, 3, 4, 5], 3).unwrap_err().to_string();
        assert!(err.contains("at least 2 groups (episodes) per fold, 6 in all"), "{err}");
        assert!(err.contains("come from 5"), "{err}");
        assert!(group_folds(&[1, 2, 3, 4], 1)
            .unwrap_err()
            .to_string()
            .contains("at least 2 folds"));
    }
}
