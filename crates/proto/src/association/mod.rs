//! One end of one SCTP association (RFC 9260), sans-IO.
//!
//! Split by responsibility: `handshake` (setup, teardown, collisions,
//! verification-tag exceptions), `sender` (send queue, SACK processing,
//! retransmission, packetization of DATA), `receiver` (TSN tracking,
//! reassembly, ordered/unordered delivery, SACK generation), `timers`,
//! `rto`, [`congestion`].
//!
//! # Implementation choices and deviations (RFC 9260 unless noted)
//!
//! - Flight size, outstanding bytes and the peer's rwnd count DATA payload
//!   bytes only (no chunk header overhead).
//! - "cwnd fully utilized" (§7.2.1, §7.2.2) means flight + MTU > cwnd: no
//!   further full-sized packet would have fit.
//! - Max.Burst (§6.1) limits DATA-carrying packets per input event (each
//!   datagram, timeout or send call is one send opportunity).
//! - Nagle-like delay (`no_delay = false`) holds new data while data is
//!   outstanding and less than one full DATA chunk is queued.
//! - The receiver has no partial delivery API: the next TSN in sequence is
//!   always accepted, beyond the receive buffer by at most
//!   `max_message_size`, so a buffer full of pieces waiting for it (large
//!   or interleaved messages, ordered messages behind a lost one) cannot
//!   deadlock the association.
//! - Reneging (§6.2.1) is detected only below the highest TSN a SACK
//!   reports, so reordered older SACKs do not look like reneging.
//! - An ABORT received in SHUTDOWN-ACK-SENT (all data in both directions
//!   acknowledged) is reported as a graceful close.
//! - The idle cwnd decay of §7.2.1 is applied lazily when sending resumes
//!   and never raises cwnd (switch: `Config::idle_cwnd_decay`).
//! - Thin-stream and loss-recovery mechanisms ([`crate::mechanism`]) only
//!   change the decisions the hooks return; with every switch off the
//!   behaviour is bit for bit the RFC core's (tests/mechanisms_off.rs).
//!   Always on, also with `rfc`: SACK duplicate TSNs are recorded as
//!   `Record::DuplicateReported` (trace only), and the T3 restart hook
//!   receives the earliest send time of a chunk in flight.
//! - Giving up (§8.1 Association.Max.Retrans by T3 expiries, §8.3
//!   unanswered heartbeats, T2-shutdown and Max.Init.Retransmits in
//!   COOKIE-ECHOED): RFC 9260 only asks to report the failure to the upper
//!   layer; like usrsctp and Linux we also send an ABORT (no error cause,
//!   the peer's tag) whenever the peer may hold a TCB, so a peer that is
//!   merely cut off in one direction learns it at once. In COOKIE-WAIT the
//!   peer's tag is unknown and nothing is sent.
//! - Association matching (§8.5, §1.5.2): an association is named by both
//!   addresses and both SCTP ports. A packet from the peer's address with
//!   another source port (or to another local port) is discarded as
//!   "wrong-port" even if its tag matches; the [`Endpoint`](crate::Endpoint)
//!   routes by (address, port, tag) and never hands such a packet over.
//! - Peer restart (§5.2.4 A): the TCB is rebuilt from the cookie and the
//!   application gets `AppEvent::PeerRestarted` (instead of a second
//!   `Established`); queued and in-flight data of the old incarnation is
//!   dropped, as the RFC's restart implies.
//! - PPID: carried both ways ([`SendParams::ppid`], `AppEvent::Received`'s
//!   `ppid`, the PPID of a message's first fragment).
//! - Not implemented: T5-shutdown-guard, path MTU discovery (the PMTU is
//!   configured), multi-homing, ECN, stream reconfiguration (RFC 6525),
//!   peer addresses from an INIT on the passive side (not in the cookie).
//!
//! # Partial reliability (RFC 3758, RFC 7496)
//!
//! RFC 3758 lets a sender give up ("abandon") user messages and tell the
//! receiver with a FORWARD TSN, which moves the receiver's cumulative TSN
//! past them and names, per ordered stream, the last skipped SSN. The
//! policy deciding when to give up is left open; RFC 7496 names the common
//! ones. We offer two per message ([`SendParams`]): timed reliability
//! (`lifetime`, RFC 3758's example policy and RFC 7496 "TTL") and limited
//! retransmissions (`max_retransmissions`, RFC 7496 "RTX"). A partially
//! reliable message is refused unless the peer listed FORWARD TSN support.
//!
//! What we do (`sender`):
//! - The check runs before every transmission of new data, before every
//!   retransmission, right after T3 marks the flight for retransmission
//!   and after fast retransmit marks lost chunks (RFC 3758 §3.5 A1-A3): a
//!   message is abandoned if its lifetime has passed (any state, also
//!   never sent) or if one of its chunks needs a retransmission beyond the
//!   limit (0 = sent once). Chunks merely in flight are not abandoned when
//!   their lifetime passes: they may still arrive, and the next
//!   retransmission decision catches them.
//! - Abandoning covers the whole message: every fragment still queued
//!   (in flight, marked, gap-acked or unsent; with I-DATA the fragments not
//!   yet cut are cut and numbered first, so trace units stay in step).
//!   Abandoned chunks leave the flight and the outstanding bytes at once,
//!   so they no longer hold cwnd, and are never retransmitted. A
//!   `Record::Abandoned` names their units; `Stats::abandoned_messages`
//!   counts messages.
//! - Advanced.Peer.Ack.Point (§3.5 C1-C2) is the cumulative TSN ack plus
//!   the run of abandoned chunks right after it. While it is ahead (after
//!   an abandonment, and again on a SACK that does not cover it, C3, if
//!   the ack point moved since the last FORWARD TSN or that one is older
//!   than a smoothed round trip: SACKs that merely crossed it on the way do
//!   not repeat it), the next packet carries a FORWARD TSN behind the SACK (if one is
//!   owed) and in front of any DATA, or alone. It lists, per ordered
//!   stream, the highest SSN among the skipped chunks; unordered messages
//!   need no entry. T3 is started for it if not running; when T3 expires
//!   with only the FORWARD TSN unanswered, it is sent again with the usual
//!   back-off and error counting (§3.5 A3 / F2).
//! - With I-DATA, the I-FORWARD-TSN of RFC 8260 §2.3.1 replaces FORWARD
//!   TSN: ordered entries carry the highest skipped MID per stream,
//!   unordered entries one per skipped message (unordered MIDs say nothing
//!   about each other, so the receiver drops exactly the listed ones).
//!
//! The receiving side is in `receiver` (module docs there).
//!
//! # Message interleaving (RFC 8260)
//!
//! With DATA, a message's fragments must carry consecutive TSNs (§6.9), so
//! a large message blocks every message submitted after it, on any stream,
//! until its last fragment is sent. I-DATA names fragments by (stream,
//! MID, FSN) instead, so TSNs are free to interleave messages. RFC 8260
//! §2.2.3: I-DATA is used only when both ends list it in Supported
//! Extensions, and then for all user data in both directions (a DATA chunk
//! after that, or an I-DATA chunk without it, is a protocol violation
//! answered with ABORT; likewise FORWARD TSN vs I-FORWARD-TSN).
//!
//! What we do: [`Config::interleaving`] offers I-DATA and I-FORWARD-TSN.
//! When both sides offered it, `send` puts messages into a per-stream
//! scheduler instead of assigning TSNs; each time a DATA chunk is needed
//! the scheduler cuts the next fragment, and only then assigns the TSN, the MID (per stream, separate counters for ordered and
//! unordered messages, at the first fragment) and the FSN. Streams with
//! queued messages take turns round robin; a turn ends when a message is
//! complete or after 4 fragments of a longer one (`SCHED_QUANTUM`).
//! Round robin per fragment would also meet RFC 8260's goal, but would
//! stretch every message over all competing streams' packets: a burst of
//! timed 3 KB messages on three streams then expires half-sent instead of
//! completing one after the other. Within a stream messages go whole and
//! in order. A 1 MB message
//! on stream 1 therefore shares each congestion window with 100-byte
//! messages on stream 0 instead of delaying them by its whole transfer
//! (tests/interleave.rs). The I-DATA header is 4 bytes longer, so a
//! fragment carries 4 bytes less ([`Config::max_fragment_idata`]).
//!
//! Trace units with I-DATA: units remain TSN offsets (the receiver sees
//! nothing else), but TSNs are assigned when fragments are cut, after the
//! `Submitted` record was written. `Submitted.units` is the range the
//! message gets if the scheduler sends in submission order, which is exact
//! while at most one stream has queued data (every preset-driven lab
//! scenario). When several streams compete, the scheduler interleaves and
//! the recorded ranges are approximate; per-chunk records (`PacketSent`,
//! `Acked`, `Abandoned`, `Arrived`, `Delivered`) stay exact, and a
//! delivered interleaved message gets one `Delivered` record per run of
//! consecutive units.

pub mod congestion;
mod handshake;
pub mod pmtu;
pub(crate) mod receiver;
pub(crate) mod rto;
pub(crate) mod sender;
mod timers;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::net::SocketAddr;

use bytes::Bytes;
use thinstream_base::drive::{visit_deque, AppEvent, Outgoing, SendError, Transport};
use thinstream_base::trace::Record;
use thinstream_base::{Datagram, Duration, Instant, Rng, Seed};

use crate::config::Config;
use crate::cookie::CookieKey;
use crate::mechanism::{Mechanisms, SenderView, ThinTracker};
use crate::trace::{Stats, Tracer};
use crate::wire::{Chunk, Packet, Tsn, COMMON_HEADER_LEN};

use congestion::Congestion;
pub(crate) use handshake::{answer_init_statelessly, ootb_response};
use receiver::Receiver;
use rto::RtoEstimator;
use sender::Sender;
use timers::{Timer, TimerTable};

/// Largest chunk list kept for reuse between packets.
const MAX_SCRATCH_CHUNKS: usize = 256;

/// How one message is sent ([`Association::send_with`],
/// [`Endpoint::send_with`](crate::Endpoint::send_with)). The default is
/// stream 0, ordered, PPID 0, fully reliable.
///
/// Partial reliability (RFC 3758 PR-SCTP) needs the peer's FORWARD TSN
/// support; `send_with` refuses a partially reliable message otherwise.
/// Both limits may be set; the message is abandoned when either is hit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendParams {
    pub stream: u16,
    pub unordered: bool,
    /// Payload protocol identifier (RFC 9260 §3.3.1), passed to the peer's
    /// application untouched.
    pub ppid: u32,
    /// Timed reliability (RFC 3758 §5 "timed reliability", RFC 7496
    /// SCTP_PR_SCTP_TTL): give the message up once this long has passed
    /// since `send_with` and it still needs a (re)transmission.
    pub lifetime: Option<Duration>,
    /// Limited retransmissions (RFC 7496 §4 SCTP_PR_SCTP_RTX): give the
    /// message up when it would need more than this many retransmissions
    /// (0: sent once, never retransmitted).
    pub max_retransmissions: Option<u32>,
}

/// Association states (RFC 9260 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    Closed,
    CookieWait,
    CookieEchoed,
    Established,
    ShutdownPending,
    ShutdownSent,
    ShutdownReceived,
    ShutdownAckSent,
}

impl State {
    /// The stable name used in `Record::State`.
    pub const fn name(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::CookieWait => "cookie-wait",
            State::CookieEchoed => "cookie-echoed",
            State::Established => "established",
            State::ShutdownPending => "shutdown-pending",
            State::ShutdownSent => "shutdown-sent",
            State::ShutdownReceived => "shutdown-received",
            State::ShutdownAckSent => "shutdown-ack-sent",
        }
    }
}

/// One end of one SCTP association with one peer address (single-homed: the
/// INIT carries no address parameters, peer address parameters are
/// recorded and never contacted; only the address packets come from is used).
///
/// # Drive contract (see `thinstream_base::drive`)
///
/// Methods fall into four groups:
/// - **inputs**: [`Transport::handle_datagram`] (or [`Association::handle_packet`]
///   with an already parsed packet), [`Transport::handle_timeout`];
/// - **application commands**: [`Transport::send`], [`Transport::close`],
///   [`Association::abort`];
/// - **outputs**: [`Transport::poll_transmit`] (or [`Association::poll_packet`]
///   for the representation), [`Transport::poll_app`], [`Transport::poll_trace`];
/// - **getters** (`&self`).
///
/// After every input or command, drain `poll_transmit` until `None`, then
/// `poll_app` and `poll_trace` until `None`, then read `poll_timeout` and
/// wait until that deadline or the next input. Every input and command may
/// change `poll_timeout`; outputs never make it later than what was last read
/// unless they also consumed work. `handle_timeout` before the deadline is a
/// no-op; `now` must never decrease between calls.
///
/// # Layout
///
/// An association is visited once per packet sent or received, and with
/// many associations in one process its memory has left the caches since
/// the last visit, so every cache line a packet touches is a miss
/// (docs/memory.md, "Cost per flow"). The fields are therefore laid out in
/// declaration order (`repr(C)`), aligned to a cache line: what every
/// packet reads or writes first (flags, tags and counters, timers, RTO and
/// congestion state, the queues, sender and receiver, the per-packet
/// statistics, the configuration), then what only the handshake, path MTU
/// probing or the getters use.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Association {
    // ----- read or written for every packet ------------------------------
    /// Data packets sent since the last input (Max.Burst, §6.1).
    pub(crate) burst: u32,
    pub(crate) local_tag: u32,
    pub(crate) peer_tag: u32,
    pub(crate) error_count: u32,
    pub(crate) path_error_count: u32,
    pub(crate) peer_port: u16,
    pub(crate) out_streams: u16,
    pub(crate) in_streams: u16,
    pub(crate) state: State,
    /// Answers INITs statelessly and accepts a valid COOKIE ECHO while Closed.
    pub(crate) listening: bool,
    /// Ever left CLOSED (a TCB existed): decides OOTB handling once closed.
    pub(crate) had_tcb: bool,
    pub(crate) peer_forward_tsn: bool,
    /// The peer offered I-DATA (RFC 8260) in its INIT / INIT ACK.
    pub(crate) peer_idata: bool,
    pub(crate) closed_reported: bool,
    /// The thin verdict last written as `Record::Thin`.
    pub(crate) thin_recorded: Option<bool>,
    pub(crate) cc: Congestion,
    pub(crate) timers: TimerTable,
    pub(crate) tracer: Tracer,
    /// Outstanding heartbeat: (nonce, sent at).
    pub(crate) heartbeat: Option<(u64, Instant)>,
    pub(crate) rto: RtoEstimator,
    /// When the application last submitted a message, and the interval
    /// before that (RDB's IAT > RTT limit, 002 §7.3).
    pub(crate) last_submit: Option<Instant>,
    pub(crate) last_message_interval: Option<Duration>,
    /// Since when the stream has been classified thin (None: thick or not tracked).
    pub(crate) thin_since: Option<Instant>,
    /// A probe packet to send next: (heartbeat nonce, packet size).
    pub(crate) pmtu_probe_out: Option<(u64, usize)>,
    /// Chunk lists kept from sent packets so that building the next one
    /// does not allocate.
    scratch_chunks: Vec<Chunk>,
    pub(crate) remote: Option<SocketAddr>,
    pub(crate) app: VecDeque<AppEvent>,
    /// Control chunks for the next packet(s), sent with the peer's tag.
    pub(crate) control: VecDeque<Chunk>,
    /// Whole packets with their own destination and tag (INIT ACK answers,
    /// ABORT, SHUTDOWN COMPLETE, OOTB responses).
    pub(crate) stateless: VecDeque<(SocketAddr, Packet)>,
    scratch_data: Vec<Chunk>,
    /// The chunk list of the packet just handled, emptied: the endpoint
    /// takes it back to parse its next datagram into
    /// ([`Association::handle_packet_returning`]); never kept between
    /// packets (one list per association would be one more cold block per
    /// packet where many associations take turns).
    scratch_rx: Vec<Chunk>,
    pub(crate) tx: Sender,
    pub(crate) rx: Receiver,
    /// Thin-stream packet list and loss estimate (002 §4.2.1), kept only
    /// when a mechanism needs it ([`Association::tracks_thin`]).
    pub(crate) thin: ThinTracker,
    pub(crate) stats: Stats,
    pub(crate) config: Config,
    pub(crate) local: SocketAddr,
    // ----- handshake, path MTU probing, getters -------------------------
    pub(crate) init_retransmits: u32,
    /// When our INIT was sent, if it was not retransmitted (handshake RTT seed).
    pub(crate) init_sent: Option<Instant>,
    /// Path MTU search (RFC 8899), when `Config::pmtu_probe_max` asks for it.
    pub(crate) pmtu_search: Option<pmtu::PmtuSearch>,
    pub(crate) rng: Rng,
    pub(crate) cookie_key: CookieKey,
    /// Addresses the peer listed in its INIT / INIT ACK: recorded, never used.
    pub(crate) peer_addresses: Vec<std::net::IpAddr>,
    /// Our INIT (for T1-init retransmission and §5.2.1 answers).
    pub(crate) init: Option<crate::wire::InitChunk>,
    /// The cookie we echo (T1-cookie retransmission).
    pub(crate) cookie: Option<Bytes>,
}

impl Association {
    /// Active open: queue an INIT to `remote` (state COOKIE-WAIT). Tags,
    /// initial TSN and the cookie secret come from `seed`.
    pub fn connect(
        config: Config,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        seed: Seed,
    ) -> Self {
        let mut a = Self::new(config, local, seed, None);
        a.remote = Some(remote);
        a.peer_port = a.config.remote_port;
        a.start_connect(now);
        a
    }

    /// Active open sharing an endpoint's cookie key.
    pub(crate) fn connect_with_key(
        config: Config,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        seed: Seed,
        key: CookieKey,
    ) -> Self {
        let mut a = Self::new(config, local, seed, Some(key));
        a.remote = Some(remote);
        a.peer_port = a.config.remote_port;
        a.start_connect(now);
        a
    }

    /// Passive open for exactly one peer: answer INITs statelessly and
    /// become established on the first valid COOKIE ECHO; packets from other
    /// addresses are discarded afterwards. For many peers use
    /// [`Endpoint`](crate::Endpoint).
    pub fn accept(config: Config, _now: Instant, local: SocketAddr, seed: Seed) -> Self {
        let mut a = Self::new(config, local, seed, None);
        a.listening = true;
        a
    }

    /// A listening association sharing an endpoint's cookie key.
    pub(crate) fn for_endpoint(
        config: Config,
        local: SocketAddr,
        seed: Seed,
        key: CookieKey,
    ) -> Self {
        let mut a = Self::new(config, local, seed, Some(key));
        a.listening = true;
        a
    }

    fn new(config: Config, local: SocketAddr, seed: Seed, key: Option<CookieKey>) -> Self {
        let mut rng = seed.derive("association").rng();
        let cookie_key = key.unwrap_or_else(|| {
            CookieKey::generate(
                &mut seed.derive("cookie-secret").rng(),
                config.valid_cookie_life,
            )
        });
        let mtu = config.mtu_bytes();
        let initial_tsn = Tsn(rng.next_u32());
        let mut a = Association {
            local,
            remote: None,
            state: State::Closed,
            listening: false,
            had_tcb: false,
            cookie_key,
            local_tag: 0,
            peer_tag: 0,
            peer_port: config.remote_port,
            out_streams: 0,
            in_streams: 0,
            peer_forward_tsn: false,
            peer_idata: false,
            peer_addresses: Vec::new(),
            init: None,
            cookie: None,
            init_retransmits: 0,
            error_count: 0,
            path_error_count: 0,
            timers: TimerTable::default(),
            rto: RtoEstimator::new(config.rto_initial),
            cc: Congestion::new(config.initial_cwnd_bytes(), mtu),
            tx: Sender::new(initial_tsn, 0),
            rx: Receiver::new(Tsn(0), config.receive_buffer),
            control: VecDeque::new(),
            stateless: VecDeque::new(),
            app: VecDeque::new(),
            tracer: Tracer::new(config.trace),
            scratch_chunks: Vec::new(),
            scratch_data: Vec::new(),
            scratch_rx: Vec::new(),
            stats: Stats::default(),
            heartbeat: None,
            burst: 0,
            closed_reported: false,
            thin: ThinTracker::new(&config.mechanisms.thin),
            thin_recorded: None,
            last_submit: None,
            last_message_interval: None,
            thin_since: None,
            init_sent: None,
            pmtu_search: pmtu::PmtuSearch::new(config.effective_pmtu(), config.pmtu_probe_max),
            pmtu_probe_out: None,
            rng,
            config,
        };
        a.tx.rtt_mode = a.config.mechanisms.rtt_sampling;
        a
    }

    // ----- getters -------------------------------------------------------

    pub fn state(&self) -> State {
        self.state
    }
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    pub fn config(&self) -> &Config {
        &self.config
    }
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
    /// The peer's address, once known.
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        self.remote
    }
    /// The peer's SCTP port (common header), once known.
    pub fn peer_port(&self) -> u16 {
        self.peer_port
    }
    /// Our verification tag (the peer puts it in every packet to us).
    pub fn local_tag(&self) -> u32 {
        self.local_tag
    }
    /// The peer's verification tag.
    pub fn peer_tag(&self) -> u32 {
        self.peer_tag
    }
    /// Addresses the peer announced (recorded only, never contacted).
    pub fn peer_addresses(&self) -> &[std::net::IpAddr] {
        &self.peer_addresses
    }
    /// Whether the peer announced FORWARD TSN support (RFC 3758).
    pub fn peer_supports_forward_tsn(&self) -> bool {
        self.peer_forward_tsn
    }
    /// Whether user data travels as I-DATA (RFC 8260): both sides offered
    /// it ([`Config::interleaving`] here, I-DATA in the peer's Supported
    /// Extensions).
    pub fn interleaving(&self) -> bool {
        self.tx.idata
    }
    /// Negotiated outbound streams (0 before the handshake).
    pub fn outbound_streams(&self) -> u16 {
        self.out_streams
    }
    /// Negotiated inbound streams.
    pub fn inbound_streams(&self) -> u16 {
        self.in_streams
    }
    pub fn rto(&self) -> Duration {
        self.rto.rto
    }
    pub fn srtt(&self) -> Option<Duration> {
        self.rto.srtt
    }
    pub fn congestion(&self) -> Congestion {
        self.cc
    }
    /// Payload bytes in flight.
    pub fn flight_size(&self) -> u32 {
        self.tx.flight
    }
    /// The peer's receive window as last computed (§6.2.1).
    pub fn peer_rwnd(&self) -> u32 {
        self.tx.peer_rwnd
    }
    /// Bytes of user data queued and not yet cumulatively acknowledged.
    pub fn buffered_send_bytes(&self) -> usize {
        self.tx.queued_bytes
    }
    /// Bytes held by the receiver: under reassembly, waiting for order, or
    /// delivered but not yet taken with `poll_app`.
    pub fn held_receive_bytes(&self) -> usize {
        self.rx.held
    }
    /// The receive window we would advertise now.
    pub fn local_rwnd(&self) -> u32 {
        self.rx.a_rwnd()
    }
    /// Whether nothing is queued or in flight (all data acknowledged).
    pub fn is_idle(&self) -> bool {
        self.tx.chunks.is_empty() && self.tx.sched.is_empty()
    }
    /// A snapshot of the sender as the mechanism hooks see it.
    pub fn sender_view(&self, now: Instant) -> SenderView {
        self.view(now)
    }
    /// Whether there is anything for `poll_app`, `poll_trace` or
    /// `poll_transmit` without new input (used by endpoints to reap).
    pub fn has_pending_output(&self) -> bool {
        !self.app.is_empty() || !self.tracer.is_empty() || !self.stateless.is_empty()
    }

    /// Whether `poll_app` has an event now.
    pub fn has_app_events(&self) -> bool {
        !self.app.is_empty()
    }

    /// Whether `poll_trace` has a record now.
    pub fn has_trace_records(&self) -> bool {
        !self.tracer.is_empty()
    }

    /// Append the next datagram to `out` (no allocation of its own once the
    /// association's scratch space has grown; the caller's buffer may hold
    /// earlier datagrams) and return its destination.
    pub fn poll_transmit_into(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<SocketAddr> {
        let (dst, p) = self.poll_packet(now)?;
        p.emit(out);
        self.recycle(p);
        Some(dst)
    }

    /// Keep a sent packet's chunk list for the next packet.
    fn recycle(&mut self, p: Packet) {
        let mut chunks = p.chunks;
        chunks.clear();
        if chunks.capacity() <= MAX_SCRATCH_CHUNKS
            && chunks.capacity() > self.scratch_chunks.capacity()
        {
            self.scratch_chunks = chunks;
        }
    }

    // ----- application commands -----------------------------------------

    /// Queue a message with the options of [`SendParams`] (stream,
    /// ordering, PPID, partial reliability); returns the sender-local
    /// message id used in trace records. [`Transport::send`] is this with
    /// PPID 0 and full reliability.
    pub fn send_with(
        &mut self,
        now: Instant,
        params: &SendParams,
        payload: &[u8],
    ) -> Result<u64, SendError> {
        self.burst = 0;
        self.queue_message(now, params, payload)
    }

    /// Abort the association (user-initiated ABORT, §9.1): send ABORT with
    /// a "User-Initiated Abort" cause carrying `reason`, drop all queued
    /// data, report `Closed { error }`.
    pub fn abort(&mut self, now: Instant, reason: &str) {
        if self.state == State::Closed {
            return;
        }
        let cause = crate::wire::ErrorCause::user_initiated_abort(Bytes::copy_from_slice(
            reason.as_bytes(),
        ));
        if self.state != State::CookieWait {
            self.queue_abort(vec![cause], false);
        }
        self.enter_closed(now, Some(format!("aborted locally: {reason}")));
    }

    // ----- inputs --------------------------------------------------------

    /// A parsed packet from `src` (`wire_len` = its size on the wire, for
    /// statistics). [`Transport::handle_datagram`] parses and calls this.
    pub fn handle_packet(
        &mut self,
        now: Instant,
        src: SocketAddr,
        packet: Packet,
        wire_len: usize,
    ) {
        self.receive(now, src, packet, wire_len);
        self.scratch_rx = Vec::new();
    }

    /// [`Association::handle_packet`], giving back the packet's emptied
    /// chunk list for the next parse (empty if it was not kept).
    pub(crate) fn handle_packet_returning(
        &mut self,
        now: Instant,
        src: SocketAddr,
        packet: Packet,
        wire_len: usize,
    ) -> Vec<Chunk> {
        self.receive(now, src, packet, wire_len);
        std::mem::take(&mut self.scratch_rx)
    }

    fn receive(&mut self, now: Instant, src: SocketAddr, packet: Packet, wire_len: usize) {
        self.burst = 0;
        self.stats.packets_received += 1;
        self.stats.bytes_received += wire_len as u64;
        self.tracer.record(|| Record::PacketReceived {
            time: now,
            wire_bytes: wire_len as u32,
        });
        self.process_packet(now, src, packet);
    }

    /// The next packet to send, as a representation (destination, packet).
    /// [`Transport::poll_transmit`] encodes it.
    pub fn poll_packet(&mut self, now: Instant) -> Option<(SocketAddr, Packet)> {
        let out = self.build_packet(now)?;
        let wire = out.1.encoded_len();
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += wire as u64;
        if self.tracer.enabled() {
            let data: thinstream_base::trace::SentPieces =
                self.tx.last_sent_data.drain(..).collect();
            let control = (out.1.chunks.len() - data.len()) as u16;
            self.tracer.record(|| Record::PacketSent {
                time: now,
                wire_bytes: wire as u32,
                data,
                control,
            });
        }
        Some(out)
    }

    // ----- internals shared by the submodules ----------------------------

    /// The mechanisms of this association.
    pub fn mechanisms(&self) -> &Mechanisms {
        &self.config.mechanisms
    }

    /// Change the mechanisms of this association from now on (per
    /// association, e.g. from [`Endpoint::set_mechanisms`](crate::Endpoint::set_mechanisms)).
    /// The thin-stream packet list starts empty if it was not kept before,
    /// so the test counts packets sent after the call.
    pub fn set_mechanisms(&mut self, mechanisms: Mechanisms) {
        let was = self.tracks_thin();
        self.config.mechanisms = mechanisms;
        self.tx.rtt_mode = self.config.mechanisms.rtt_sampling;
        if !was && self.tracks_thin() {
            self.thin = ThinTracker::new(&self.config.mechanisms.thin);
        }
    }

    /// Time classified thin from the first verdict up to `now`.
    pub fn time_thin(&self, now: Instant) -> Duration {
        let open = self
            .thin_since
            .map_or(0, |s| now.saturating_duration_since(s).as_nanos());
        Duration::from_nanos(self.stats.thin_ns + open)
    }

    /// The thin-stream tracker (packet list, loss estimate).
    pub fn thin_tracker(&self) -> &ThinTracker {
        &self.thin
    }

    /// Whether the thin-stream packet list is kept.
    pub(crate) fn tracks_thin(&self) -> bool {
        let m = &self.config.mechanisms;
        m.uses_thin_detection() || m.rdb.enabled
    }

    /// The thin verdict now (false when no mechanism keeps the list).
    /// Whether the stream is classified thin right now (false when no
    /// thin-stream mechanism asks for the classification).
    pub fn is_thin(&self) -> bool {
        self.tracks_thin() && self.thin.is_thin(&self.config.mechanisms.thin)
    }

    /// Write `Record::Thin` when the verdict changed (only when a
    /// thin-gated mechanism or `thin-detect` is on).
    pub(crate) fn note_thin(&mut self, now: Instant) {
        if !self.config.mechanisms.uses_thin_detection() {
            return;
        }
        let thin = self.thin.is_thin(&self.config.mechanisms.thin);
        if self.thin_recorded != Some(thin) {
            if self.thin_recorded.is_some() {
                self.stats.thin_transitions += 1;
            }
            self.thin_recorded = Some(thin);
            if thin {
                self.thin_since = Some(now);
            } else if let Some(since) = self.thin_since.take() {
                self.stats.thin_ns += now.saturating_duration_since(since).as_nanos();
            }
            let pif = self.thin.packets_in_flight();
            self.tracer.record(|| Record::Thin {
                time: now,
                thin,
                packets_in_flight: pif,
            });
        }
    }

    pub(crate) fn view(&self, now: Instant) -> SenderView {
        let tracks = self.tracks_thin();
        SenderView {
            now,
            packets_in_flight: if tracks {
                self.thin.packets_in_flight()
            } else {
                self.tx.packets_in_flight()
            },
            thin_threshold: self.thin.threshold(&self.config.mechanisms.thin),
            thin: self.is_thin(),
            flight_size: self.tx.flight,
            outstanding_chunks: self.tx.outstanding_chunks(),
            unsent_chunks: self.tx.unsent_chunks().min(u64::from(u32::MAX)) as u32,
            cwnd: self.cc.cwnd,
            ssthresh: self.cc.ssthresh,
            mtu: self.cc.mtu,
            peer_rwnd: self.tx.peer_rwnd,
            srtt: self.rto.srtt,
            rttvar: self.rto.rttvar,
            rto: self.rto.rto,
            last_message_interval: self.last_message_interval,
        }
    }

    pub(crate) fn set_state(&mut self, now: Instant, state: State) {
        if self.state == state {
            return;
        }
        self.state = state;
        if state != State::Closed {
            self.had_tcb = true;
        }
        if state == State::Established && self.pmtu_search.is_some() {
            self.timers.set(Timer::PmtuProbe, now);
        }
        self.tracer.record(|| Record::State {
            time: now,
            state: state.name().to_string(),
        });
    }

    /// The association gives up on its peer (§8.1, §8.2: too many
    /// retransmissions, unanswered heartbeats or T2 expiries): tell the
    /// peer with an ABORT, as usrsctp and Linux do (RFC 9260 only asks to
    /// report the failure; a peer that is merely slow learns it at once
    /// instead of at its own timeout), then close with `why`.
    pub(crate) fn give_up(&mut self, now: Instant, why: &str) {
        if self.has_peer_tcb() && self.peer_tag != 0 {
            self.queue_abort(Vec::new(), false);
        }
        self.enter_closed(now, Some(why.to_string()));
    }

    /// Destroy the TCB: stop timers, drop queued data, report `Closed`.
    pub(crate) fn enter_closed(&mut self, now: Instant, error: Option<String>) {
        if self.state == State::Closed {
            return;
        }
        self.set_state(now, State::Closed);
        self.listening = false;
        self.timers.stop_all();
        self.control.clear();
        self.tx.clear();
        if !self.closed_reported {
            self.closed_reported = true;
            self.app.push_back(AppEvent::Closed { error });
        }
    }

    pub(crate) fn discard(&mut self, now: Instant, why: &'static str) {
        self.stats.discarded_packets += 1;
        self.tracer.record(|| Record::Discarded {
            time: now,
            why: why.to_string(),
        });
    }

    pub(crate) fn record_rto(&mut self, now: Instant) {
        let (rto, srtt) = (self.rto.rto, self.rto.srtt);
        self.tracer.record(|| Record::Rto {
            time: now,
            rto,
            srtt,
        });
    }

    pub(crate) fn record_congestion(&mut self, now: Instant) {
        let (cwnd, ssthresh, flight) = (self.cc.cwnd, self.cc.ssthresh, self.tx.flight);
        self.tracer.record(|| Record::Congestion {
            time: now,
            cwnd,
            ssthresh,
            flight,
        });
    }

    /// Packet header towards the peer with the peer's tag.
    pub(crate) fn header(&self, vtag: u32, chunks: Vec<Chunk>) -> Packet {
        Packet {
            src_port: self.config.local_port,
            dst_port: self.peer_port,
            verification_tag: vtag,
            chunks,
        }
    }

    /// Whether DATA may be sent in this state (§9.2: queued data still goes
    /// out in SHUTDOWN-PENDING and SHUTDOWN-RECEIVED).
    fn may_send_data(&self) -> bool {
        matches!(
            self.state,
            State::Established | State::ShutdownPending | State::ShutdownReceived
        )
    }

    fn build_packet(&mut self, now: Instant) -> Option<(SocketAddr, Packet)> {
        if let Some(p) = self.stateless.pop_front() {
            return Some(p);
        }
        if self.state == State::Closed {
            return None;
        }
        let remote = self.remote?;
        if let Some((nonce, size)) = self.pmtu_probe_out.take() {
            if self.may_send_data() {
                return Some((remote, self.pmtu_probe_packet(now, nonce, size)));
            }
        }
        let pmtu = self.config.effective_pmtu();
        let mut room = pmtu - COMMON_HEADER_LEN;
        let mut chunks = std::mem::take(&mut self.scratch_chunks);
        self.tx.last_sent_data.clear();
        if self.tx.pr_live > 0 && self.may_send_data() {
            // Partial reliability: give up what may not be (re)sent before
            // choosing what goes into this packet.
            self.pr_sweep(now);
        }

        // INIT travels alone with tag 0 (§8.5.1 A, §6.10).
        if matches!(self.control.front(), Some(Chunk::Init(_))) {
            let init = self.control.pop_front()?;
            return Some((remote, self.header(0, vec![init])));
        }
        while let Some(c) = self.control.front() {
            if matches!(c, Chunk::Init(_)) {
                break;
            }
            let len = c.encoded_len();
            if len > room && !chunks.is_empty() {
                break;
            }
            room = room.saturating_sub(len);
            if let Some(c) = self.control.pop_front() {
                chunks.push(c);
            }
        }
        let control_count = chunks.len();

        // SACK first among the non-handshake chunks (§6.5 bundling order):
        // reserve room if one is owed, add it if due or if DATA goes out.
        let sack_owed = self.rx.ack_owed() && self.has_peer_tcb();
        let sack_len = if sack_owed {
            self.rx.sack_len_estimate(room)
        } else {
            0
        };
        let mut data_room = room.saturating_sub(sack_len);
        // RFC 3758 §3.5 C3: the FORWARD TSN rides in front of the DATA of
        // this packet (or alone, with the SACK if one is owed).
        let mut forward = None;
        if self.tx.fwd_pending && self.has_peer_tcb() {
            self.tx.fwd_pending = false;
            if let Some(f) = self.build_forward_tsn() {
                data_room = data_room.saturating_sub(f.encoded_len());
                forward = Some(f);
            }
        }
        let mut data_chunks = std::mem::take(&mut self.scratch_data);
        let mut sack_owed = sack_owed;
        if self.may_send_data() {
            self.fill_data(now, &mut data_chunks, &mut data_room);
            if data_chunks.is_empty() && sack_owed && !self.rx.sack_due() {
                // New data never waits for the delayed-SACK timer: when it
                // does not fit beside the owed SACK it goes alone, and the
                // SACK keeps its own deadline.
                let mut full = room;
                self.fill_data(now, &mut data_chunks, &mut full);
                if !data_chunks.is_empty() {
                    sack_owed = false;
                }
            }
        }
        let sent_data = !data_chunks.is_empty();
        if sent_data && self.config.mechanisms.sack_immediately && self.is_thin() {
            // RFC 7053: ask the peer to SACK this packet at once.
            match data_chunks
                .iter_mut()
                .rev()
                .find(|c| matches!(c, Chunk::Data(_) | Chunk::IData(_)))
            {
                Some(Chunk::Data(d)) => {
                    d.immediate = true;
                    self.stats.sack_immediately_sent += 1;
                }
                Some(Chunk::IData(d)) => {
                    d.immediate = true;
                    self.stats.sack_immediately_sent += 1;
                }
                _ => {}
            }
        }
        if sack_owed && (self.rx.sack_due() || sent_data || forward.is_some()) {
            let sack = self.build_sack(now, room);
            chunks.insert(control_count, Chunk::Sack(sack));
        }
        if let Some(f) = forward {
            if let Chunk::ForwardTsn(crate::wire::ForwardTsnChunk { new_cum_tsn, .. })
            | Chunk::IForwardTsn(crate::wire::IForwardTsnChunk { new_cum_tsn, .. }) = &f
            {
                self.tx.fwd_last = Some((*new_cum_tsn, now));
            }
            chunks.push(f);
            self.stats.forward_tsns_sent += 1;
            // RFC 3758 §3.5 F2 (with A3): T3 guards the FORWARD TSN.
            if !self.timers.is_running(Timer::T3Rtx) {
                self.timers.set(Timer::T3Rtx, now + self.rto.rto);
            }
        }
        chunks.append(&mut data_chunks);
        self.scratch_data = data_chunks;
        if chunks.is_empty() {
            self.scratch_chunks = chunks;
            return None;
        }
        Some((remote, self.header(self.peer_tag, chunks)))
    }

    /// Whether a TCB with peer information exists (SACKs make sense).
    fn has_peer_tcb(&self) -> bool {
        !matches!(self.state, State::Closed | State::CookieWait)
    }

    fn process_packet(&mut self, now: Instant, src: SocketAddr, mut packet: Packet) {
        if packet.dst_port != self.config.local_port {
            self.discard(now, "wrong-port");
            return;
        }
        if packet.chunks.is_empty() {
            self.discard(now, "no-chunks");
            return;
        }
        if let Some(remote) = self.remote {
            if remote != src {
                self.discard(now, "unknown-peer");
                return;
            }
            // §8.5 with §1.5.2: an association is named by both addresses
            // and both ports; a packet from the peer's address with another
            // SCTP source port belongs to some other association, even if
            // its tag happens to match ours.
            if self.state != State::Closed && packet.src_port != self.peer_port {
                self.discard(now, "wrong-port");
                return;
            }
        }
        if self.state == State::Closed {
            self.process_closed(now, src, packet);
            return;
        }
        if !self.check_tag(now, &packet) {
            return;
        }
        let mut had_data = false;
        let mut stop = false;
        let mut reports: Vec<crate::wire::ErrorCause> = Vec::new();
        // The chunks are taken by value: DATA payloads move into the
        // receive side instead of being cloned.
        let mut chunks = std::mem::take(&mut packet.chunks);
        for chunk in chunks.drain(..) {
            if stop || self.state == State::Closed {
                break;
            }
            match chunk {
                Chunk::Data(d) => {
                    had_data = true;
                    if self.tx.idata {
                        // RFC 8260 §2.2.3: DATA after I-DATA was negotiated.
                        self.protocol_violation(now, "DATA chunk while I-DATA is in use");
                        stop = true;
                    } else if !self.on_data(now, d) {
                        stop = true;
                    }
                }
                Chunk::IData(d) => {
                    had_data = true;
                    if !self.tx.idata {
                        // RFC 8260 §2.2.3: I-DATA that was not negotiated.
                        self.protocol_violation(
                            now,
                            "I-DATA chunk while I-DATA was not negotiated",
                        );
                        stop = true;
                    } else if !self.on_idata(now, d) {
                        stop = true;
                    }
                }
                Chunk::Init(init) => {
                    // check_tag guaranteed INIT is the only chunk.
                    self.on_init(now, src, packet.src_port, &init);
                    stop = true;
                }
                Chunk::InitAck(ia) => self.on_init_ack(now, &ia),
                Chunk::Sack(s) => self.on_sack(now, &s),
                Chunk::Heartbeat(hb) => self.on_heartbeat(&hb),
                Chunk::HeartbeatAck(hb) => self.on_heartbeat_ack(now, &hb),
                Chunk::Abort(a) => {
                    self.on_abort(now, &a);
                    stop = true;
                }
                Chunk::Shutdown(s) => self.on_shutdown(now, &s),
                Chunk::ShutdownAck => self.on_shutdown_ack(now),
                Chunk::Error(e) => self.on_error(now, &e),
                Chunk::CookieEcho(c) => {
                    self.on_cookie_echo(now, src, &packet, &c.cookie);
                }
                Chunk::CookieAck => self.on_cookie_ack(now),
                Chunk::ShutdownComplete(_) => self.on_shutdown_complete(now),
                Chunk::ForwardTsn(f) => {
                    if self.tx.idata {
                        // RFC 8260 §2.3: I-FORWARD-TSN replaces FORWARD TSN.
                        self.protocol_violation(now, "FORWARD TSN chunk while I-DATA is in use");
                        stop = true;
                    } else {
                        self.on_forward_tsn(now, &f);
                    }
                }
                Chunk::IForwardTsn(f) => {
                    if !self.tx.idata {
                        self.protocol_violation(
                            now,
                            "I-FORWARD-TSN chunk while I-DATA was not negotiated",
                        );
                        stop = true;
                    } else {
                        self.on_iforward_tsn(now, &f);
                    }
                }
                Chunk::Unknown(u) => {
                    let action = crate::wire::Unrecognized::for_chunk(u.kind);
                    let chunk = Chunk::Unknown(u);
                    self.stats.unknown_chunks += 1;
                    // §3.2: the upper two bits of the type decide.
                    if action.reports() && chunk.encoded_len() <= 1024 {
                        reports.push(crate::wire::ErrorCause::unrecognized_chunk(&chunk));
                    }
                    if !action.skips() {
                        stop = true;
                    }
                }
            }
        }
        if !reports.is_empty() && self.state != State::Closed && self.has_peer_tcb() {
            self.control
                .push_back(Chunk::Error(crate::wire::ErrorChunk { causes: reports }));
        }
        if chunks.capacity() <= MAX_SCRATCH_CHUNKS {
            self.scratch_rx = chunks;
        }
        if had_data && self.state != State::Closed {
            self.after_data_packet(now);
        }
    }

    /// Verification-tag rules of §8.5 and the exceptions of §8.5.1 for a
    /// packet reaching an existing TCB. Returns false (and counts the
    /// discard) if the packet must be dropped.
    fn check_tag(&mut self, now: Instant, packet: &Packet) -> bool {
        let vtag = packet.verification_tag;
        let ok = match &packet.chunks[0] {
            // §8.5.1 A: INIT has tag 0 and is alone in its packet.
            Chunk::Init(_) => vtag == 0 && packet.chunks.len() == 1,
            // §8.5.1 B/C: T bit set = the sender reflected our peer's tag.
            Chunk::Abort(a) if a.t_bit => vtag == self.peer_tag && self.peer_tag != 0,
            Chunk::ShutdownComplete(s) if s.t_bit => vtag == self.peer_tag && self.peer_tag != 0,
            Chunk::Abort(_) | Chunk::ShutdownComplete(_) => vtag == self.local_tag,
            // §8.5.1 D: the COOKIE ECHO is checked against the tag in the
            // cookie (handshake.rs), which may legitimately differ (restart).
            Chunk::CookieEcho(_) => true,
            _ => vtag == self.local_tag,
        };
        if !ok {
            self.discard(now, "bad-verification-tag");
        }
        ok
    }

    /// ABORT with a "Protocol Violation" cause and close (RFC 9260 §3.3.10.13).
    pub(crate) fn protocol_violation(&mut self, now: Instant, what: &'static str) {
        if !self.has_peer_tcb() {
            self.discard(now, "protocol-violation");
            return;
        }
        self.queue_abort(
            vec![crate::wire::ErrorCause::protocol_violation(
                Bytes::from_static(what.as_bytes()),
            )],
            false,
        );
        self.enter_closed(now, Some(format!("protocol violation: {what}")));
    }

    pub(crate) fn queue_abort(&mut self, causes: Vec<crate::wire::ErrorCause>, t_bit: bool) {
        if let Some(remote) = self.remote {
            let vtag = if t_bit { self.local_tag } else { self.peer_tag };
            let p = self.header(
                vtag,
                vec![Chunk::Abort(crate::wire::AbortChunk { t_bit, causes })],
            );
            self.stateless.push_back((remote, p));
        }
    }

    fn on_timers(&mut self, now: Instant) {
        self.burst = 0;
        for t in Timer::ALL {
            if !self.timers.expired(t, now) {
                continue;
            }
            self.timers.stop(t);
            match t {
                Timer::T1Init => self.on_t1_init(now),
                Timer::T1Cookie => self.on_t1_cookie(now),
                Timer::T2Shutdown => self.on_t2_shutdown(now),
                Timer::T3Rtx => self.on_t3_expiry(now),
                Timer::DelayedSack => self.rx.delayed_sack_expired(),
                Timer::Heartbeat => self.on_heartbeat_timer(now),
                Timer::EarlyFastRtx => self.on_efr_expiry(now),
                Timer::PmtuProbe => self.on_pmtu_timer(now),
            }
        }
    }
}

impl Transport for Association {
    fn handle_datagram(&mut self, now: Instant, datagram: Datagram) {
        let len = datagram.payload.len();
        match Packet::parse_bytes(&Bytes::from(datagram.payload)) {
            Ok(p) => self.handle_packet(now, datagram.src, p, len),
            Err(_) => {
                self.stats.malformed_packets += 1;
                self.tracer.record(|| Record::Discarded {
                    time: now,
                    why: "malformed".to_string(),
                });
            }
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.on_timers(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        let mut payload = Vec::new();
        let dst = self.poll_transmit_into(now, &mut payload)?;
        Some(Datagram {
            src: self.local,
            dst,
            payload,
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    fn hot_memory(&self, visit: &mut dyn FnMut(*const u8, usize)) {
        self.tx.hot_memory(visit);
        self.rx.hot_memory(visit);
        self.thin.hot_memory(visit);
        self.tracer.hot_memory(visit);
        visit_deque(&self.app, visit);
        visit_deque(&self.control, visit);
        for scratch in [&self.scratch_chunks, &self.scratch_data] {
            if scratch.capacity() > 0 {
                visit(
                    scratch.as_ptr().cast::<u8>(),
                    (scratch.capacity() * std::mem::size_of::<Chunk>()).min(256),
                );
            }
        }
    }

    fn poll_app(&mut self) -> Option<AppEvent> {
        let ev = self.app.pop_front()?;
        if let AppEvent::Received { payload, .. } = &ev {
            self.on_app_read(payload.len());
        }
        Some(ev)
    }

    fn poll_trace(&mut self) -> Option<Record> {
        self.tracer.pop()
    }

    fn send(&mut self, now: Instant, message: Outgoing<'_>) -> Result<u64, SendError> {
        let params = SendParams {
            stream: message.stream,
            unordered: message.unordered,
            ..SendParams::default()
        };
        self.send_with(now, &params, message.payload)
    }

    fn close(&mut self, now: Instant) {
        self.burst = 0;
        self.begin_shutdown(now);
    }

    fn is_established(&self) -> bool {
        matches!(
            self.state,
            State::Established | State::ShutdownPending | State::ShutdownReceived
        )
    }

    fn is_closed(&self) -> bool {
        self.state == State::Closed && (self.had_tcb || self.closed_reported)
    }
}

impl Association {
    /// Check the internal accounting (test harnesses and `thinstream
    /// torture` call this after every step; it walks the send and receive
    /// queues, so it is not for a hot path). Returns a description of the
    /// first violated invariant.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.tx.check()?;
        let app_bytes: usize = self
            .app
            .iter()
            .map(|e| match e {
                AppEvent::Received { payload, .. } => payload.len(),
                _ => 0,
            })
            .sum();
        self.rx.check(app_bytes)
    }
}
