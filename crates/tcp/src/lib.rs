//! Sans-IO TCP model (New Reno, SACK, RACK-TLP) with the TCP thin-stream
//! mechanisms of the dissertation (002 §4.1, App. E).
//!
//! Written for the deterministic simulator: it is the baseline every
//! experiment compares against and the cross traffic. It speaks real-looking
//! TCP segments but is not meant to interoperate byte-for-byte with kernels.
//!
//! # Driving it
//!
//! [`TcpConnection`] implements [`thinstream_base::drive::Transport`]:
//! - client: [`TcpConnection::connect`]`(config, local, remote, iss, now)` sends a SYN;
//! - server: [`TcpConnection::listen`]`(config, local, iss)` answers the first SYN;
//! - [`TcpConfig::from_profile`]`("linux-2.6.23+lt+mfr")` builds a configuration;
//!   set `config.trace = true` to get [`thinstream_base::trace::Record`]s from `poll_trace`.
//!
//! `send` takes stream 0, ordered, only (TCP is one byte stream; other values
//! return `SendError::InvalidStream`). Each accepted write gets a message id
//! and a `Submitted` record whose units are its byte range. Received bytes
//! are handed over as `AppEvent::Received { stream: 0, .. }` once in order.
//!
//! # Wire size
//!
//! `Datagram.payload` is the TCP segment: 20-byte header, options (SACK
//! permitted, window scale, MSS on SYNs; timestamps, 12 bytes, when
//! negotiated; SACK blocks, 4 + 8·n bytes, when there are holes) and data.
//! The IP header is not in the payload: the size on the wire is
//! `20 + payload.len()` ([`segment::wire_bytes`]); the simulator must add
//! [`segment::IP_HEADER_BYTES`] (and no UDP header) when it charges a link.
//! `PacketSent`/`PacketReceived` records already report that wire size. With
//! timestamps, a full segment is 20 + 20 + 12 + 1448 = 1500 bytes. A segment
//! carrying SACK blocks and a full MSS of data may exceed 1500 bytes; the
//! model does not enforce an MTU.
//!
//! # Units
//!
//! Trace units are stream bytes relative to ISN + 1: the first data byte is
//! unit 0. The receiver reports `Arrived` per segment, split into duplicate
//! and new pieces (one record per contiguous piece), and `Delivered` per
//! in-order advance.
//!
//! # Model simplifications (documented, deliberate)
//!
//! - TIME-WAIT lasts `time_wait` (default zero); a closed endpoint still
//!   re-acknowledges a retransmitted FIN. Simultaneous open, urgent data,
//!   PAWS, D-SACK, zero-window probing (the receive window is the whole
//!   buffer because the model's application reads at once) and
//!   restart-after-idle are not modelled.
//! - Congestion control is Reno/New Reno AIMD (CUBIC is out of scope); in
//!   recovery `cwnd = ssthresh` (RFC 6675) rather than rate halving or PRR.
//! - Linux's retransmission collapsing (`tcp_retrans_collapse`) is not
//!   modelled; with RDB the retransmission bundling of 002 §4.3.2 is.
//! - RACK-TLP: TLP retransmits the last segment (reason `Probe`) or sends new
//!   data (reason `New`); loss detected by RACK is retransmitted with reason
//!   `FastRetransmit`; TLP's own loss detection (RFC 8985 §7.4) is omitted.

pub mod config;
mod conn;
mod rack;
mod receiver;
mod recovery;
mod rtt;
pub mod segment;
mod sender;

pub use config::{
    CwndUnit, InitialWindow, ProfileError, RackConfig, RttEstimator, TcpConfig, ThinConfig,
};
pub use conn::{CaState, ConfigError, State, Stats, TcpConnection};
