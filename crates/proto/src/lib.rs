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
//!
//! # Example: two associations, datagrams passed by hand
//!
//! ```
//! use thinstream_base::drive::{AppEvent, Outgoing, Transport};
//! use thinstream_base::{Instant, Seed};
//! use thinstream_proto::{Association, Config};
//!
//! let (a_addr, b_addr) = ("127.0.0.1:9899".parse().unwrap(), "127.0.0.1:9900".parse().unwrap());
//! let now = Instant::ZERO;
//! let mut client = Association::connect(Config::default(), now, a_addr, b_addr, Seed(1));
//! let mut server = Association::accept(Config::default(), now, b_addr, Seed(2));
//! let mut sent = false;
//! for _ in 0..10 {
//!     // Drain each side's output into the other (a zero-delay link).
//!     while let Some(d) = client.poll_transmit(now) { server.handle_datagram(now, d); }
//!     while let Some(d) = server.poll_transmit(now) { client.handle_datagram(now, d); }
//!     if client.is_established() && !sent {
//!         client.send(now, Outgoing { stream: 0, unordered: false, payload: b"hi" }).unwrap();
//!         sent = true;
//!     }
//! }
//! let mut got = Vec::new();
//! while let Some(ev) = server.poll_app() {
//!     if let AppEvent::Received { payload, .. } = ev { got.push(payload); }
//! }
//! assert_eq!(got, vec![b"hi".to_vec()]);
//! ```

#![forbid(unsafe_code)]

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
pub use association::{Association, SendParams, State};
pub use config::{Config, DelayedSack};
pub use endpoint::{AssociationId, Endpoint, Entropy};
pub use mechanism::{Mechanisms, PresetError};
pub use trace::Stats;
