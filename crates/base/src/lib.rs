//! The vocabulary every thinstream crate shares.
//!
//! Nothing here has behaviour worth testing at length: virtual time
//! ([`Instant`], [`Duration`]), units ([`Bitrate`], [`Probability`]), the
//! [`Datagram`] that crosses links and sockets, seed derivation and the one
//! deterministic random generator ([`Seed`], [`Rng`]), the trace records
//! every transport emits ([`trace`]), and the drive contract that both the
//! simulator and the socket driver use ([`drive`]).

#![forbid(unsafe_code)]

pub mod datagram;
pub mod drive;
pub mod rng;
pub mod time;
pub mod trace;
pub mod units;

pub use datagram::Datagram;
pub use drive::Transport;
pub use rng::{Rng, Seed};
pub use time::{Duration, Instant};
pub use units::{Bitrate, ParseUnitError, Probability};
