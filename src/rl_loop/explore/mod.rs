//! `lfs explore` (docs/design.md §15, issue 54): reward-free exploration pre-training, the paper's
//! Table 3 "Pre-training with URL" columns. An exploring method ([`Explorer`]: Proto-RL in
//! [`proto`], APT in [`apt`]) trains one encoder shared by the domains it explores, each domain
//! with its own environment, replay and agent learning from the method's intrinsic reward; the
//! run leaves that encoder in `lfs export`'s format for `lfs eval`, `lfs probe` and suites.

pub mod apt;
pub mod config;
pub mod domain;
pub mod explorer;
pub mod proto;
pub mod run;

pub use config::{ExploreConfig, ExploreMethod};
pub use explorer::{Explorer, IntrinsicReward};
pub use run::{run, ExploreEvent, ExploreSummary};
