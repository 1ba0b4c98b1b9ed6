//! The stages a datagram goes through, one module each.
//!
//! Every stage is a small sans-IO state machine: it is built from its part of
//! the [`crate::LinkConfig`] and its own [`thinstream_base::Rng`] (derived from
//! the link seed with the stable label in [`labels`]), and it decides from
//! `(now, packet number, datagram)` only. Adding or removing one stage never
//! shifts another stage's random stream.
//!
//! - [`loss`]: Bernoulli and Gilbert-Elliott loss processes.
//! - [`schedule`]: deterministic drops: listed packets, periodic drops, loss
//!   traces, outages.
//! - [`queue`]: the bottleneck's rate limit and drop-tail queue.
//! - [`mangle`]: duplication and bit corruption.
//! - [`delay`]: propagation delay, jitter, reordering.
//! - [`tick`]: the emulator's clock tick (arrivals rounded up to it).

pub mod delay;
pub mod loss;
pub mod mangle;
pub mod queue;
pub mod schedule;
pub mod tick;

/// The labels each stage derives its seed with (`link_seed.derive(label)`).
/// Changing one changes every recorded result that used the stage.
pub mod labels {
    pub const LOSS: &str = "loss";
    pub const PERIODIC: &str = "periodic";
    pub const DUPLICATE: &str = "duplicate";
    pub const CORRUPT: &str = "corrupt";
    pub const JITTER: &str = "jitter";
    pub const REORDER: &str = "reorder";
}
