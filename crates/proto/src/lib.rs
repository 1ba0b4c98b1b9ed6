//! SCTP (RFC 9260) carried in UDP (RFC 6951), sans-IO.
//!
//! [`wire`] parses and emits packets; [`Association`] is one end of one
//! association and implements the shared drive contract
//! ([`thinstream_base::drive::Transport`]); [`Endpoint`] serves many peers
//! behind one address (stateless cookie listener plus demultiplexer).
//! Nothing here reads a clock, opens a socket or draws randomness it was not
//! given: time is passed in, randomness comes from a caller's
//! [`Seed`](thinstream_base::Seed).
//!
//! Thin-stream and loss-recovery mechanisms plug in through [`mechanism`],
//! selected by [`Config::mechanisms`]. Trace records (enable with
//! [`Config::trace`]) follow `thinstream_base::trace`.

pub mod association;
pub mod config;
pub(crate) mod cookie;
pub mod endpoint;
pub mod mechanism;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod trace;
pub mod wire;

pub use association::congestion::{AckInfo, Congestion, LossKind};
pub use association::{Association, State};
pub use config::{Config, DelayedSack};
pub use endpoint::{AssociationId, Endpoint};
pub use mechanism::Mechanisms;
pub use trace::Stats;
