#![doc = include_str!("../README.md")]

mod config;
mod error;
mod held;
mod link;
mod netem;
pub mod stage;
mod stats;
mod units_serde;

pub use config::{
    Bottleneck, Jitter, JitterDistribution, LinkConfig, LossModel, LossTrace, Outage, PeriodicDrop,
    Reorder, PRESET_NAMES,
};
pub use error::LinkConfigError;
pub use held::{HeldLink, HoldLimit};
pub use link::{Admission, DropPredicate, Link, SendReport};
pub use stats::{Counter, DropCause, DropCounters, LinkStats};

#[cfg(test)]
mod tests;
