//! # thinstream
//!
//! Reliable, message-oriented transport for **thin streams**, the traffic of
//! interactive programs (games, remote desktops, SSH, trading, signalling,
//! sensor control): small messages with long gaps between them. Over TCP or
//! a stock SCTP stack one lost packet can hold such a stream up for seconds,
//! because loss recovery waits for signals only a busy stream produces.
//! thinstream is SCTP (RFC 9260) carried in UDP (RFC 6951), wire-compatible
//! with unmodified SCTP stacks, whose sender detects a thin stream and then
//! recovers the way a thin stream needs (linear timeouts, fast retransmit on
//! the first loss report, a 200 ms RTO floor, timer-restart correction,
//! redundant bundling), all per association and all on the sending side.
//!
//! ## Shape
//!
//! - [`Endpoint`]: one UDP socket serving any number of associations from
//!   one tokio task. [`Endpoint::connect`] opens an association;
//!   [`Endpoint::accept`] yields the ones peers open.
//! - [`Association`]: [`send`](Association::send) (awaits while the send
//!   buffer is full), [`recv`](Association::recv), [`close`](Association::close),
//!   [`abort`](Association::abort), [`stats`](Association::stats),
//!   [`event`](Association::event).
//! - [`AssociationConfig`]: SCTP parameters and the thin-stream mechanisms.
//!   The default is the **production preset**; the presets that reproduce
//!   the research documents' kernels are available by name.
//! - [`emulate`]: the real-time UDP link emulator behind `thinstream
//!   emulate` (the simulator's link model, `thinstream-link`, in real time).
//!
//! ## Example
//!
//! ```
//! use thinstream::{AssociationConfig, Endpoint, EndpointConfig, SendOptions};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> anyhow::Result<()> {
//! let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::server())?;
//! let addr = server.local_addr();
//! // An echo server.
//! tokio::spawn(async move {
//!     while let Some(incoming) = server.accept().await {
//!         let Ok(a) = incoming.accept() else { continue };
//!         tokio::spawn(async move {
//!             while let Ok(m) = a.recv().await {
//!                 let opts = SendOptions { unordered: m.unordered, ..SendOptions::default() };
//!                 if a.send(m.stream, m.data, opts).await.is_err() { break; }
//!             }
//!         });
//!     }
//! });
//! let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::client())?;
//! let a = client.connect(addr, AssociationConfig::default()).await?;
//! a.send(0, "ping", SendOptions::default()).await?;
//! assert_eq!(&a.recv().await?.data[..], b"ping");
//! a.close().await;
//! # Ok(()) }
//! ```
//!
//! ## Randomness
//!
//! Verification tags, initial TSNs and the cookie secret come from the OS
//! random source. [`EndpointConfig::testing_fixed_seed`] replaces it with a
//! seed, for tests only.

#![warn(missing_docs)]

mod association;
pub mod clock;
mod config;
pub mod emulate;
mod endpoint;
mod error;
mod state;
mod stats;
mod udp;

/// Trace records ([`Association::take_trace`]) and the time types they use.
pub mod trace {
    pub use thinstream_base::trace::*;
    pub use thinstream_base::{Duration, Instant};
}

pub use association::{Association, Event, Message, SendOptions};
pub use bytes::Bytes;
pub use config::{AssociationConfig, EndpointConfig, PathMtu, LOOPBACK_PMTU_CAP};
pub use endpoint::{Endpoint, Incoming};
pub use error::{AssociationError, BindError, ConnectError, SendError};
pub use stats::{AssociationStats, RetransmissionsByCause};
/// The protocol core's configuration and mechanism types, for full control.
pub use thinstream_proto::{
    config::{DelayedSack, RECEIVERS},
    mechanism::{self, Mechanisms, PresetError},
    Config as TransportConfig,
};
