//! Render quality in datasets (issue 3). Every episode carries the DMControl render quality
//! its `lfs collect` sidecar states, or none for other videos; the two qualities give visibly
//! different pixels, so a dataset never holds both and a pre-training run never mixes them.
//! On disk they are the names of [`RenderQuality`] (`"default"`, `"fast"`) or null.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Serialize, Serializer};

use crate::env::RenderQuality;

/// Why an episode of render quality `new` cannot join a dataset that holds `have`, if it
/// cannot. Episodes without a render quality (videos not from `lfs collect`) join any dataset.
pub fn render_quality_conflict(have: Option<RenderQuality>, new: Option<RenderQuality>) -> Option<String> {
    match (have, new) {
        (Some(have), Some(new)) if have != new => Some(format!(
            "render quality {:?} differs from this dataset's {:?}; ingest it into another dataset (pre-training refuses to mix them)",
            new.name(),
            have.name()
        )),
        _ => None,
    }
}

/// The render qualities a set of episodes holds; `None` stands for episodes without one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderQualities(BTreeSet<Option<RenderQuality>>);

impl RenderQualities {
    /// The one render quality every episode shares; `None` when they mix qualities (or there
    /// are no episodes).
    pub fn single(&self) -> Option<Option<RenderQuality>> {
        match self.0.len() {
            1 => self.0.first().copied(),
            _ => None,
        }
    }
}

impl FromIterator<Option<RenderQuality>> for RenderQualities {
    fn from_iter<I: IntoIterator<Item = Option<RenderQuality>>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

/// `default`, `fast`, `videos, no render quality`, or `mixed: …` listing them.
impl fmt::Display for RenderQualities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |q: &Option<RenderQuality>| q.map_or("videos, no render quality", RenderQuality::name);
        match self.single() {
            Some(q) => f.write_str(name(&q)),
            None if self.0.is_empty() => f.write_str("no episodes"),
            None => {
                let names: Vec<&str> = self.0.iter().map(name).collect();
                write!(f, "mixed: {}", names.join(" + "))
            }
        }
    }
}

/// The single quality as its name or null (the form runs record in `datasets.json`), a list
/// of them when they mix.
impl Serialize for RenderQualities {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.single() {
            Some(q) => q.serialize(serializer),
            None => self.0.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_quality_serialises_as_its_name_or_null() {
        let json = |q: RenderQualities| serde_json::to_string(&q).expect("serialisable");
        for quality in RenderQuality::ALL {
            assert_eq!(
                json([Some(quality)].into_iter().collect()),
                format!("{:?}", quality.name())
            );
        }
        assert_eq!(json([None].into_iter().collect()), "null");
        let mixed: RenderQualities = [Some(RenderQuality::Fast), Some(RenderQuality::Default)]
            .into_iter()
            .collect();
        assert_eq!(mixed.single(), None);
        assert_eq!(mixed.to_string(), "mixed: default + fast");
    }

    #[test]
    fn only_two_known_qualities_conflict() {
        let (d, f) = (Some(RenderQuality::Default), Some(RenderQuality::Fast));
        assert!(render_quality_conflict(d, f).is_some_and(|r| r.contains("\"fast\"") && r.contains("\"default\"")));
        assert_eq!(render_quality_conflict(d, None), None);
        assert_eq!(render_quality_conflict(None, f), None);
        assert_eq!(render_quality_conflict(d, d), None);
    }
}
