//! Cells whose scores cannot stand side by side. Render quality changes the pixels the encoder
//! sees (docs/design.md §8 uses dm_control's own), the feature cache turns the random-shift
//! augmentation off (docs/design.md §6), and the budget, the action repeat and episodes cut
//! short (`env.episode_frames`) change what a "final" score measures. Cells that differ in any
//! of them are refused unless the user says otherwise, and the report then lists the
//! differences.

use std::collections::BTreeMap;

use super::cells::{Cell, CellSettings};

/// One setting that is not the same in every done cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// The config field, as `section.key` of `config.resolved.toml`.
    pub field: &'static str,
    /// Each value seen, with the cells that have it.
    pub values: Vec<(String, Vec<String>)>,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let values: Vec<String> = self
            .values
            .iter()
            .map(|(value, cells)| format!("{value} in {}", name_list(cells)))
            .collect();
        write!(f, "{}: {}", self.field, values.join("; "))
    }
}

/// At most a handful of names, then a count.
fn name_list(cells: &[String]) -> String {
    const SHOWN: usize = 6;
    let mut s = cells.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if cells.len() > SHOWN {
        s.push_str(&format!(" and {} more", cells.len() - SHOWN));
    }
    format!("{} ({s})", if cells.len() == 1 { "cell" } else { "cells" })
}

/// The settings that matter, as (field, value) of a cell.
fn compared(s: &CellSettings) -> [(&'static str, String); 5] {
    [
        ("env.render_quality", s.render_quality.clone()),
        // with its storage: "true (f16)"
        (
            "replay.feature_cache",
            match s.feature_cache {
                true => format!("true ({})", s.feature_cache_dtype),
                false => "false".to_string(),
            },
        ),
        ("run.num_train_frames", s.num_train_frames.to_string()),
        ("env.action_repeat", s.action_repeat.to_string()),
        ("env.episode_frames", episode_length(s.episode_frames)),
    ]
}

/// An episode's length as the report states it.
pub fn episode_length(episode_frames: Option<u64>) -> String {
    match episode_frames {
        Some(frames) => format!("cut at {frames} frames"),
        None => "the task's own".to_string(),
    }
}

/// Every setting that differs between the done cells; empty when they can be compared.
pub fn find_mismatches(cells: &[Cell]) -> Vec<Mismatch> {
    let mut by_field: BTreeMap<&'static str, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for cell in cells {
        let Some(finished) = &cell.finished else { continue };
        for (field, value) in compared(&finished.settings) {
            by_field
                .entry(field)
                .or_default()
                .entry(value)
                .or_default()
                .push(cell.name.clone());
        }
    }
    by_field
        .into_iter()
        .filter(|(_, values)| values.len() > 1)
        .map(|(field, values)| Mismatch {
            field,
            values: values.into_iter().collect(),
        })
        .collect()
}
