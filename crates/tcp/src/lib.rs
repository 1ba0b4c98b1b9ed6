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
//! ```
//! use thinstream_base::drive::{Outgoing, Transport};
//! use thinstream_base::{Duration, Instant};
//! use thinstream_tcp::{TcpConfig, TcpConnection};
//!
//! let cfg: TcpConfig = "linux-2.6.23+lt+mfr".parse().unwrap();
//! let (a, b) = ("10.0.0.1:4000".parse().unwrap(), "10.0.0.2:80".parse().unwrap());
//! let mut client = TcpConnection::connect(cfg.clone(), a, b, 1, Instant::ZERO).unwrap();
//! let mut server = TcpConnection::listen(cfg, b, 2).unwrap();
//! // A zero-delay loop: hand every datagram straight to the other side.
//! let mut now = Instant::ZERO;
//! let mut sent = false;
//! for _ in 0..100 {
//!     while let Some(d) = client.poll_transmit(now) { server.handle_datagram(now, d) }
//!     while let Some(d) = server.poll_transmit(now) { client.handle_datagram(now, d) }
//!     if client.is_established() && !sent {
//!         client.send(now, Outgoing { stream: 0, unordered: false, payload: b"hi" }).unwrap();
//!         sent = true;
//!     }
//!     now = now + Duration::from_millis(10);
//!     for e in [&mut client, &mut server] {
//!         if e.poll_timeout().is_some_and(|t| t <= now) { e.handle_timeout(now) }
//!     }
//! }
//! let mut got = Vec::new();
//! while let Some(ev) = server.poll_app() {
//!     if let thinstream_base::drive::AppEvent::Received { payload, .. } = ev { got.extend(payload) }
//! }
//! assert_eq!(got, b"hi");
//! ```
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
//! and new pieces (one record per contiguous piece, in sequence order), and
//! `Delivered` per in-order advance. The sender reports `Acked` once per
//! byte range, when it is first SACKed or cumulatively acknowledged; an RDB
//! packet is one `PacketSent` with a `RedundantBundle` piece (the old bytes)
//! and a `New` piece. `Thin` records follow the test `packets_out < 4`;
//! `Congestion` records follow changes of cwnd or ssthresh (in bytes, packets
//! × MSS for the Linux profiles); `Rto` records follow changes of the RTO.
//!
//! # Profiles
//!
//! | profile | RTO | init. RTO | IW | cwnd | loss detection | delayed ACK | RTT samples |
//! |---|---|---|---|---|---|---|---|
//! | `newreno` | RFC 6298, min 1 s | 1 s | RFC 3390 | bytes | SACK `IsLost` (RFC 6675), New Reno without SACK | 200 ms | Karn, no timestamps |
//! | `linux-2.6.23` | SRTT + RTTVAR (≥ 200 ms) | 3 s | RFC 3390 | packets | as `newreno` | 40 ms, 16 quick ACKs | timestamps |
//! | `linux-modern` | SRTT + RTTVAR (≥ 200 ms) | 1 s | 10 | packets | RACK-TLP with D-SACK, PRR in recovery | 40 ms, 16 quick ACKs, ACK on reading a small pushed segment | timestamps |
//!
//! Flags: `+lt` linear timeouts, `+ltcap=N` linear for N timeouts then
//! backoff (Linux mainline uses 6), `+mfr` modified fast retransmit, `+rdb`
//! redundant data bundling, `+rdb=N` with an N-byte packet payload limit,
//! `+all` = `+lt+mfr+rdb`, `+nosack` (New Reno), `+nodelack` (ACK every
//! segment), `+pushack` / `+nopushack` (ACK on reading a small pushed
//! segment, below). All can be set on a [`TcpConfig`] directly.
//!
//! The ACK schedule (RFC 1122 §4.2.3.2, RFC 5681 §4.2, Linux): ACK at once
//! when more than one segment's worth of data (the size of the last segment)
//! is unacknowledged, i.e. every second segment; for out-of-order data, a
//! segment that fills a hole, a duplicate, a FIN; for the first
//! `quickack_initial` data segments; and for a segment arriving more than an
//! RTO after the previous one (Linux `tcp_event_data_recv`). Otherwise the
//! `delayed_ack` timer runs. Linux's adaptive ATO (40 to 200 ms) is fixed at
//! its floor, 40 ms, which is what a stream with gaps above 40 ms sees.
//! With `ack_pushed_on_read` (on in `linux-modern`), Linux's
//! `tcp_cleanup_rbuf` rule also applies: the application's read that empties
//! the receive queue after a pushed segment shorter than the receive-MSS
//! estimate (536 bytes until a larger segment arrives) is acknowledged at
//! once, unless the connection is interactive (this end sent data within
//! the delayed-ACK time of receiving; left when the delayed-ACK timer fires)
//! and only one such segment is pending. The model's application reads at
//! once, so a one-way thin stream of small writes is acknowledged segment by
//! segment, as a capture of Linux 6.18 shows; a request-response server's
//! ACK still rides on its reply.
//!
//! # Model simplifications (documented, deliberate)
//!
//! - TIME-WAIT lasts `time_wait` (default zero); a closed endpoint still
//!   re-acknowledges a retransmitted FIN or data segment, which is what
//!   TIME-WAIT is for. With `close_on_peer_fin` (default) an endpoint closes
//!   its side when the peer's FIN arrives.
//! - Not modelled: simultaneous open, RST generation, urgent data, PAWS,
//!   undo (Eifel, F-RTO, D-SACK undo), zero-window probing (the model's
//!   application reads at once, so the window is the whole buffer),
//!   restart-after-idle, Nagle (always off, as `TCP_NODELAY`), TSO/GSO.
//! - Congestion control is Reno/New Reno AIMD (CUBIC is out of scope); in
//!   recovery `cwnd = ssthresh` (RFC 6675) rather than rate halving, except
//!   `linux-modern`, which reduces by PRR (RFC 6937) as Linux
//!   `tcp_cwnd_reduction` does: on the ACK that starts recovery it sends
//!   only as much as that ACK delivered, so a write held by the window does
//!   not leave with the retransmission.
//!   cwnd grows only when it limited the previous flight (RFC 7661 spirit);
//!   with `cwnd_growth_per_window` (`linux-modern`) by Linux's rule instead:
//!   when it limited a send during the current window, or in slow start
//!   while below twice the most segments outstanding in it, by what each ACK
//!   delivered.
//! - A retransmission timeout inside a fast recovery's window keeps the
//!   ssthresh that recovery set (`loss_ssthresh_once`, both Linux presets,
//!   as `tcp_enter_loss`); with RACK it marks lost only the first segment and
//!   those sent at least RACK.rtt ago (`tcp_timeout_mark_lost`), and cwnd
//!   becomes what is still in flight plus one segment.
//! - Linux's retransmission collapsing (`retrans_collapse`, on in
//!   `linux-modern`) puts following segments into a retransmission (traced
//!   as `BundledOnRetransmit`) but, unlike Linux, keeps them separate in the
//!   scoreboard; with RDB the retransmission bundling of 002 §4.3.2 applies.
//! - Timestamps tick in milliseconds (RFC 7323 §4.3 `TS.Recent` rules) and
//!   give an RTT sample on every ACK of new data, as Linux; without them,
//!   Karn's rule on the oldest newly acknowledged segment.
//! - RACK-TLP: TLP retransmits the last segment (reason `Probe`) or sends new
//!   data (reason `New`); loss detected by RACK is retransmitted with reason
//!   `FastRetransmit` (not `EarlyRetransmit`); TLP's own loss detection
//!   (RFC 8985 §7.4) is omitted. The reordering window is `min_rtt/4`, zero
//!   before reordering is seen once DupThresh segments are SACKed or in recovery.
//! - D-SACK (RFC 2883; `dsack`, on in `linux-modern`): the receiver reports
//!   a duplicate in the first SACK block of its next ACK. `linux-modern`'s
//!   sender uses it only as Linux's RACK does: a D-SACK of a retransmitted
//!   segment already SACKed counts as reordering, and after reordering
//!   D-SACKs widen the reordering window by `min_rtt/4` per round trip up
//!   to SRTT for 16 recoveries (`RackConfig::adaptive_reo_wnd`). A probe
//!   armed by new data is capped by the RTO of the oldest outstanding
//!   segment, not the RTO from now (`RackConfig::tlp_rto_from_head`, Linux
//!   `tcp_schedule_loss_probe`).
//! - Timers fire at their exact times, except with `timer_hz` (set to 250 by
//!   `linux-modern`): then every timer is armed in whole jiffies on a model
//!   of Linux's timer wheel and fires at its bucket, never early (a 300 ms
//!   RTO 4-36 ms late at HZ 250; `timer` module).
//! - Linear timeouts apply only in ESTABLISHED (002 §4.1.3), like the patch.

pub mod config;
mod conn;
mod rack;
mod receiver;
mod recovery;
mod rtt;
pub mod segment;
mod sender;
mod timer;

pub use config::{
    CwndUnit, InitialWindow, ProfileError, RackConfig, RttEstimator, TcpConfig, ThinConfig,
};
pub use conn::{CaState, ConfigError, State, Stats, TcpConnection};
