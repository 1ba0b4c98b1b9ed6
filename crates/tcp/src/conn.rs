//! One TCP endpoint: connection states, segment emission and intake, timers,
//! tracing, and the [`Transport`] implementation. Loss recovery, congestion
//! control and the transmit loop are in `recovery.rs`.

use crate::config::{CwndUnit, TcpConfig};
use crate::rack::Rack;
use crate::receiver::Receiver;
use crate::rtt::Rtt;
use crate::segment::{wire_bytes, Checksum, Flags, Options, Segment, IPPROTO_TCP};
use crate::sender::SendQueue;
use bytes::Bytes;
use std::collections::VecDeque;
use std::net::SocketAddr;
use thinstream_base::drive::{AppEvent, Outgoing, SendError, Transport};
use thinstream_base::trace::{Record, SentPieces, Units};
use thinstream_base::{Datagram, Duration, Instant};

/// Connection states (RFC 9293 §3.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Listen,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
    Closed,
}

impl State {
    /// The stable name used in [`Record::State`].
    pub fn name(self) -> &'static str {
        match self {
            State::Listen => "listen",
            State::SynSent => "syn-sent",
            State::SynReceived => "syn-received",
            State::Established => "established",
            State::FinWait1 => "fin-wait-1",
            State::FinWait2 => "fin-wait-2",
            State::CloseWait => "close-wait",
            State::Closing => "closing",
            State::LastAck => "last-ack",
            State::TimeWait => "time-wait",
            State::Closed => "closed",
        }
    }
}

/// Linux's congestion-avoidance states (`tcp_ca_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaState {
    /// Nothing outstanding looks lost.
    Open,
    /// Duplicate ACKs or SACKs seen, below the recovery trigger.
    Disorder,
    /// Fast recovery (RFC 6675 / RFC 6582).
    Recovery,
    /// After a retransmission timeout.
    Loss,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimerKind {
    Rto,
    Pto,
}

/// Counters for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub segments_sent: u64,
    pub segments_received: u64,
    pub data_segments_sent: u64,
    pub retransmissions: u64,
    pub timeouts: u64,
    pub fast_recoveries: u64,
    pub tail_loss_probes: u64,
    pub discarded: u64,
}

/// One TCP endpoint (client or server side of one connection).
#[derive(Debug)]
pub struct TcpConnection {
    pub(crate) cfg: TcpConfig,
    pub(crate) local: SocketAddr,
    pub(crate) remote: Option<SocketAddr>,
    pub(crate) state: State,
    pub(crate) iss: u32,
    pub(crate) irs: u32,
    // Negotiated at the handshake.
    pub(crate) sack_ok: bool,
    pub(crate) ts_ok: bool,
    /// Shift applied to windows the peer advertises.
    pub(crate) snd_wscale: u8,
    /// Shift applied to the windows we advertise.
    pub(crate) rcv_wscale: u8,
    pub(crate) wscale_ok: bool,
    /// Effective send MSS (payload bytes).
    pub(crate) mss: u64,
    // Send side.
    pub(crate) sq: SendQueue,
    /// Oldest unacknowledged sequence offset (SYN = 0).
    pub(crate) snd_una: u64,
    pub(crate) snd_wnd: u64,
    /// `snd_wnd` still holds the unscaled window of the peer's SYN.
    pub(crate) syn_window: bool,
    pub(crate) syn_sent_at: Option<Instant>,
    pub(crate) syn_retransmitted: bool,
    pub(crate) syn_tries: u32,
    pub(crate) next_message: u64,
    pub(crate) blocked_writer: bool,
    // Congestion control and recovery.
    pub(crate) ca: CaState,
    pub(crate) cwnd: u64,
    pub(crate) ssthresh: u64,
    pub(crate) ca_acc: u64,
    pub(crate) recovery_point: u64,
    pub(crate) high_seq: u64,
    pub(crate) dupacks: u64,
    /// New Reno: duplicate ACKs counted as segments that left the network.
    pub(crate) reno_sacked: u64,
    pub(crate) force_rtx: bool,
    /// PRR (RFC 6937): data delivered and sent since recovery began, and
    /// the cwnd when it began (units of the congestion window).
    pub(crate) prr_delivered: u64,
    pub(crate) prr_out: u64,
    pub(crate) prior_cwnd: u64,
    /// `cwnd_growth_per_window` (Linux `tcp_cwnd_validate`): whether the
    /// window limited a send during the current window, the most data
    /// outstanding then (cwnd units), and the sequence number ending it.
    pub(crate) cwnd_was_limited: bool,
    pub(crate) max_out: u64,
    pub(crate) cwnd_usage_seq: u64,
    pub(crate) rtt: Rtt,
    pub(crate) rack: Option<Rack>,
    /// The segments the last cumulative ACK took off the queue (a buffer
    /// reused from one ACK to the next).
    pub(crate) acked_scratch: Vec<crate::sender::AckedSkb>,
    /// Transmissions so far (each data segment sent gets the next number:
    /// `Skb::tx_order`).
    pub(crate) tx_count: u64,
    /// Consecutive retransmission timeouts (Linux `icsk_retransmits`).
    pub(crate) retransmits: u32,
    pub(crate) tlp_high_seq: Option<u64>,
    /// Segments reported duplicate by D-SACKs (Linux `dsack_dups`).
    pub(crate) dsack_dups: u64,
    /// Last ACK sent in answer to an unacceptable ACK (rate limit).
    pub(crate) last_challenge_ack: Option<Instant>,
    // Timers.
    pub(crate) rtx_timer: Option<(Instant, TimerKind)>,
    pub(crate) reo_timer: Option<Instant>,
    pub(crate) close_timer: Option<Instant>,
    // Receive side.
    pub(crate) rcv: Receiver,
    /// We reached Closed gracefully: still re-acknowledge a retransmitted FIN.
    pub(crate) graceful: bool,
    // Outputs.
    pub(crate) out: VecDeque<Datagram>,
    pub(crate) app: VecDeque<AppEvent>,
    /// Trace records not yet taken, oldest first. A vector: the simulator
    /// takes them all at once after every event ([`Transport::drain_trace`],
    /// one append), and single pops (`poll_trace`) see a few at a time.
    pub(crate) trace: Vec<Record>,
    pub(crate) stats: Stats,
    last_rto: Option<(Duration, Option<Duration>)>,
    last_cc: Option<(u32, u32, u32)>,
    last_thin: Option<bool>,
}

/// Why a connection could not be created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid TCP configuration: {}", self.0)
    }
}

impl std::error::Error for ConfigError {}

impl TcpConnection {
    fn new(
        cfg: TcpConfig,
        local: SocketAddr,
        remote: Option<SocketAddr>,
        iss: u32,
        state: State,
    ) -> Result<TcpConnection, ConfigError> {
        cfg.validate().map_err(|e| ConfigError(e.to_string()))?;
        let mut rcv_wscale = 0u8;
        while (u64::from(cfg.rcv_buf) >> rcv_wscale) > 0xFFFF && rcv_wscale < 14 {
            rcv_wscale += 1;
        }
        let mss = u64::from(cfg.mss);
        Ok(TcpConnection {
            rtt: Rtt::new(&cfg),
            rack: cfg.rack.map(|_| Rack::default()),
            acked_scratch: Vec::new(),
            tx_count: 0,
            rcv: Receiver::new(
                cfg.rcv_buf,
                cfg.delayed_ack,
                cfg.quickack_initial,
                cfg.ack_pushed_on_read,
                cfg.dsack,
            )
            .on_timer_wheel(cfg.timer_hz),
            cwnd: 0,
            ssthresh: u64::MAX / 4,
            cfg,
            local,
            remote,
            state,
            iss,
            irs: 0,
            sack_ok: false,
            ts_ok: false,
            snd_wscale: 0,
            rcv_wscale,
            wscale_ok: false,
            mss,
            sq: SendQueue::default(),
            snd_una: 0,
            snd_wnd: 0,
            syn_window: false,
            syn_sent_at: None,
            syn_retransmitted: false,
            syn_tries: 0,
            next_message: 0,
            blocked_writer: false,
            ca: CaState::Open,
            ca_acc: 0,
            recovery_point: 0,
            high_seq: 0,
            dupacks: 0,
            reno_sacked: 0,
            force_rtx: false,
            prr_delivered: 0,
            prr_out: 0,
            prior_cwnd: 0,
            cwnd_was_limited: false,
            max_out: 0,
            cwnd_usage_seq: 0,
            retransmits: 0,
            tlp_high_seq: None,
            dsack_dups: 0,
            last_challenge_ack: None,
            rtx_timer: None,
            reo_timer: None,
            close_timer: None,
            graceful: false,
            out: VecDeque::new(),
            app: VecDeque::new(),
            trace: Vec::new(),
            stats: Stats::default(),
            last_rto: None,
            last_cc: None,
            last_thin: None,
        })
    }

    /// Active open: sends a SYN to `remote` at `now`. `iss` is the initial
    /// sequence number (draw it from the run's `Rng`).
    pub fn connect(
        cfg: TcpConfig,
        local: SocketAddr,
        remote: SocketAddr,
        iss: u32,
        now: Instant,
    ) -> Result<TcpConnection, ConfigError> {
        let mut c = TcpConnection::new(cfg, local, Some(remote), iss, State::SynSent)?;
        c.trace_state(now);
        c.send_syn(now);
        Ok(c)
    }

    /// Passive open: waits for a SYN on `local`; the peer's address is taken
    /// from the first SYN.
    pub fn listen(
        cfg: TcpConfig,
        local: SocketAddr,
        iss: u32,
    ) -> Result<TcpConnection, ConfigError> {
        TcpConnection::new(cfg, local, None, iss, State::Listen)
    }

    /// Switches trace records on or off (also `TcpConfig::trace`).
    pub fn set_trace(&mut self, on: bool) {
        self.cfg.trace = on;
    }

    pub fn state(&self) -> State {
        self.state
    }
    pub fn ca_state(&self) -> CaState {
        self.ca
    }
    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }
    pub fn stats(&self) -> Stats {
        self.stats
    }
    /// Current RTO (with backoff).
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }
    /// Whether RACK has seen reordering (`RACK.reordering_seen`, Linux
    /// `reord_seen`): its window then stays open in recovery.
    pub fn reordering_seen(&self) -> bool {
        self.rack.as_ref().is_some_and(|r| r.reordering_seen)
    }
    /// RACK's reordering window in recovery now (`None` without RACK).
    pub fn reordering_window_in_recovery(&self) -> Option<Duration> {
        self.rack.as_ref().map(|r| {
            r.reo_wnd(
                true,
                self.sq.sacked_count(),
                u64::from(self.cfg.dupthresh),
                self.rtt.min_rtt(),
                self.rtt.srtt(),
            )
        })
    }
    /// Congestion window in bytes (packets × MSS when counting packets).
    pub fn cwnd_bytes(&self) -> u64 {
        self.to_bytes(self.cwnd)
    }
    /// Segments sent and not cumulatively acknowledged (Linux `packets_out`).
    pub fn packets_out(&self) -> u64 {
        self.sq.rtx.len() as u64
    }
    /// The thin-stream test of 002 §4.1.1 (App. E `tcp_stream_is_thin`).
    pub fn is_thin(&self) -> bool {
        self.packets_out() < 4
    }
    /// Bytes written and not yet cumulatively acknowledged.
    pub fn send_buffered(&self) -> u64 {
        self.sq.buffered()
    }
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        self.remote
    }

    pub(crate) fn to_bytes(&self, amount: u64) -> u64 {
        match self.cfg.cwnd_unit {
            CwndUnit::Bytes => amount,
            CwndUnit::Packets => amount.saturating_mul(self.mss),
        }
    }

    pub(crate) fn snd_nxt(&self) -> u64 {
        self.sq.snd_nxt(self.snd_una)
    }

    // ----- segment emission -------------------------------------------------

    /// The timestamp clock: milliseconds, offset by one so that a segment
    /// sent at time zero does not carry TSval 0 (which would read as "no echo").
    fn ts_now(now: Instant) -> u32 {
        ((now.as_nanos() / 1_000_000) as u32).wrapping_add(1)
    }

    /// Builds, records and queues one segment; `payload` is the range of
    /// the send queue it carries (`None`: no data).
    fn checksum_mode(&self) -> Checksum {
        if self.cfg.checksum_offload {
            Checksum::Offload
        } else {
            Checksum::Compute
        }
    }

    pub(crate) fn emit(
        &mut self,
        now: Instant,
        seq: u64,
        flags: u8,
        payload: Option<(u64, u64)>,
        data: SentPieces,
        syn_options: bool,
    ) {
        let Some(remote) = self.remote else {
            return;
        };
        let mut options = Options::default();
        let with_ack = flags & Flags::ACK != 0;
        if syn_options {
            options.mss =
                Some((self.cfg.mss + if self.cfg.timestamps { 12 } else { 0 }).min(0xFFFF) as u16);
            // RFC 7323 §1.3: a SYN-ACK carries the option only if the SYN did.
            if self.state == State::SynSent || self.wscale_ok {
                options.window_scale = Some(self.rcv_wscale);
            }
            options.sack_permitted =
                self.cfg.sack && (self.state == State::SynSent || self.sack_ok);
            if self.cfg.timestamps && (self.state == State::SynSent || self.ts_ok) {
                options.timestamps = Some((Self::ts_now(now), self.rcv.ts_recent.unwrap_or(0)));
            }
        } else {
            if self.ts_ok {
                options.timestamps = Some((Self::ts_now(now), self.rcv.ts_recent.unwrap_or(0)));
            }
            if self.sack_ok && with_ack {
                let max = Options::max_sack_blocks(self.ts_ok);
                options.sack = self
                    .rcv
                    .sack_blocks(max)
                    .into_iter()
                    .map(|(l, r)| {
                        (
                            self.irs.wrapping_add(l as u32),
                            self.irs.wrapping_add(r as u32),
                        )
                    })
                    .collect();
            }
        }
        let window = if flags & Flags::SYN != 0 {
            self.rcv.window().min(0xFFFF)
        } else {
            let shift = if self.wscale_ok { self.rcv_wscale } else { 0 };
            (self.rcv.window() >> shift).min(0xFFFF)
        };
        let seg = Segment {
            src_port: self.local.port(),
            dst_port: remote.port(),
            seq: self.iss.wrapping_add(seq as u32),
            ack: if with_ack {
                self.irs.wrapping_add(self.rcv.rcv_nxt as u32)
            } else {
                0
            },
            flags: Flags(flags),
            window: window as u16,
            options,
            payload: Bytes::new(),
        };
        let parts = match payload {
            Some((start, end)) => self.sq.slices(start, end),
            None => [&[][..], &[][..]],
        };
        let bytes = match seg.encode_checksummed(&parts, self.local, remote, self.checksum_mode()) {
            Ok(b) => b,
            Err(e) => {
                // Options are bounded by construction; report rather than panic.
                self.discard(now, e.name());
                return;
            }
        };
        if with_ack {
            self.rcv.on_ack_sent();
        }
        if !data.is_empty() {
            self.rcv.on_data_sent(now);
        }
        self.stats.segments_sent += 1;
        if !data.is_empty() {
            self.stats.data_segments_sent += 1;
        }
        if self.cfg.trace {
            let control = u16::from(data.is_empty());
            self.trace.push(Record::PacketSent {
                time: now,
                wire_bytes: wire_bytes(bytes.len()) as u32,
                data,
                control,
            });
        }
        self.out.push_back(Datagram {
            src: self.local,
            dst: remote,
            payload: bytes,
        });
    }

    pub(crate) fn send_ack(&mut self, now: Instant) {
        let seq = self.snd_nxt();
        self.emit(now, seq, Flags::ACK, None, SentPieces::new(), false);
    }

    fn send_syn(&mut self, now: Instant) {
        self.syn_sent_at = Some(now);
        self.syn_tries += 1;
        let flags = if self.state == State::SynSent {
            Flags::SYN
        } else {
            Flags::SYN | Flags::ACK
        };
        self.emit(now, 0, flags, None, SentPieces::new(), true);
        self.rtx_timer = Some((self.timer_at(now, now + self.rtt.rto()), TimerKind::Rto));
    }

    /// When a timer armed now for `at` fires (config `timer_hz`).
    pub(crate) fn timer_at(&self, now: Instant, at: Instant) -> Instant {
        crate::timer::fire_at(self.cfg.timer_hz, now, at)
    }

    pub(crate) fn discard(&mut self, now: Instant, why: &str) {
        self.stats.discarded += 1;
        if self.cfg.trace {
            self.trace.push(Record::Discarded {
                time: now,
                why: why.to_string(),
            });
        }
    }

    // ----- state and tracing ------------------------------------------------

    pub(crate) fn set_state(&mut self, now: Instant, state: State) {
        if self.state == state {
            return;
        }
        self.state = state;
        self.trace_state(now);
        match state {
            State::Established => self.app.push_back(AppEvent::Established),
            State::TimeWait | State::Closed => {
                if state == State::TimeWait || !self.graceful {
                    self.graceful = true;
                    self.app.push_back(AppEvent::Closed { error: None });
                }
                self.rtx_timer = None;
                self.reo_timer = None;
                self.rcv.delack_deadline = None;
                if state == State::TimeWait {
                    if self.cfg.time_wait.is_zero() {
                        self.state = State::Closed;
                        self.trace_state(now);
                    } else {
                        self.close_timer = Some(now + self.cfg.time_wait);
                    }
                }
            }
            _ => {}
        }
    }

    /// Ends the connection with an error (retries exhausted, reset).
    pub(crate) fn abort(&mut self, now: Instant, error: &str) {
        self.graceful = false;
        self.state = State::Closed;
        self.trace_state(now);
        self.rtx_timer = None;
        self.reo_timer = None;
        self.close_timer = None;
        self.rcv.delack_deadline = None;
        self.app.push_back(AppEvent::Closed {
            error: Some(error.to_string()),
        });
    }

    fn trace_state(&mut self, now: Instant) {
        if self.cfg.trace {
            self.trace.push(Record::State {
                time: now,
                state: self.state.name().to_string(),
            });
        }
    }

    /// Emits `Rto`, `Congestion` and `Thin` records for whatever changed.
    pub(crate) fn trace_changes(&mut self, now: Instant) {
        if !self.cfg.trace {
            return;
        }
        let rto = (self.rtt.rto(), self.rtt.srtt());
        if self.last_rto != Some(rto) {
            self.last_rto = Some(rto);
            self.trace.push(Record::Rto {
                time: now,
                rto: rto.0,
                srtt: rto.1,
            });
        }
        if self.cwnd == 0 {
            return; // not established yet
        }
        let clamp = |v: u64| v.min(u64::from(u32::MAX)) as u32;
        let window = (
            clamp(self.to_bytes(self.cwnd)),
            clamp(self.to_bytes(self.ssthresh)),
        );
        if self.last_cc.map(|(c, s, _)| (c, s)) != Some(window) {
            // The flight (a walk over the queue) only when recorded.
            let flight = clamp(self.to_bytes(self.sq.pipe(self.cfg.cwnd_unit)));
            let cc = (window.0, window.1, flight);
            self.last_cc = Some(cc);
            self.trace.push(Record::Congestion {
                time: now,
                cwnd: cc.0,
                ssthresh: cc.1,
                flight: cc.2,
            });
        }
        let thin = self.is_thin();
        if self.last_thin != Some(thin) {
            self.last_thin = Some(thin);
            self.trace.push(Record::Thin {
                time: now,
                thin,
                packets_in_flight: self.packets_out() as u32,
            });
        }
    }

    // ----- intake -----------------------------------------------------------

    /// Unwraps a 32-bit sequence number relative to `isn` near offset `reference`.
    fn unwrap(wire: u32, isn: u32, reference: u64) -> Option<u64> {
        let diff = wire.wrapping_sub(isn.wrapping_add(reference as u32)) as i32;
        let v = reference as i64 + i64::from(diff);
        (v >= 0).then_some(v as u64)
    }

    fn on_datagram(&mut self, now: Instant, dgram: Datagram) {
        if dgram.dst != self.local {
            self.discard(now, "wrong-destination");
            return;
        }
        if let Some(r) = self.remote {
            if dgram.src != r {
                self.discard(now, "wrong-source");
                return;
            }
        }
        let wire = wire_bytes(dgram.payload.len()) as u32;
        let seg = match Segment::decode_owned_checksummed(
            dgram.payload,
            dgram.src,
            dgram.dst,
            self.checksum_mode(),
        ) {
            Ok(s) => s,
            Err(e) => {
                self.discard(now, e.name());
                return;
            }
        };
        self.stats.segments_received += 1;
        if self.cfg.trace {
            self.trace.push(Record::PacketReceived {
                time: now,
                wire_bytes: wire,
            });
        }
        if seg.flags.rst() {
            if !matches!(self.state, State::Listen | State::Closed | State::TimeWait) {
                self.abort(now, "connection reset by peer");
            }
            return;
        }
        match self.state {
            State::Listen => self.on_listen(now, dgram.src, &seg),
            State::SynSent => self.on_syn_sent(now, &seg),
            State::Closed | State::TimeWait => {
                // What TIME-WAIT is for: re-acknowledge a retransmitted FIN, or
                // data retransmitted because our last ACK was lost (RFC 9293
                // §3.10.7.4: an unacceptable segment is answered with an ACK).
                if self.graceful && (seg.flags.fin() || !seg.payload.is_empty()) {
                    self.send_ack(now);
                }
            }
            _ => self.on_synchronized(now, seg),
        }
    }

    fn negotiate(&mut self, seg: &Segment) {
        let o = &seg.options;
        self.sack_ok = self.cfg.sack && o.sack_permitted;
        self.ts_ok = self.cfg.timestamps && o.timestamps.is_some();
        match o.window_scale {
            Some(s) => {
                self.wscale_ok = true;
                self.snd_wscale = s;
            }
            None => {
                self.wscale_ok = false;
                self.snd_wscale = 0;
                // RFC 7323 §2.2: without the peer's option neither side scales.
            }
        }
        let peer_mss = u64::from(o.mss.unwrap_or(536));
        let peer_payload = if self.ts_ok {
            peer_mss.saturating_sub(12)
        } else {
            peer_mss
        };
        self.mss = u64::from(self.cfg.mss).min(peer_payload.max(64));
        if let Some((val, _)) = o.timestamps {
            if self.ts_ok {
                self.rcv.ts_recent = Some(val);
            }
        }
        self.snd_wnd = u64::from(seg.window);
        self.syn_window = true;
    }

    fn on_listen(&mut self, now: Instant, src: SocketAddr, seg: &Segment) {
        if !seg.flags.syn() || seg.flags.ack() {
            self.discard(now, "not-a-syn");
            return;
        }
        self.remote = Some(src);
        self.irs = seg.seq;
        self.rcv.on_syn();
        self.negotiate(seg);
        self.set_state(now, State::SynReceived);
        self.send_syn(now);
    }

    fn on_syn_sent(&mut self, now: Instant, seg: &Segment) {
        if !(seg.flags.syn() && seg.flags.ack()) || seg.ack != self.iss.wrapping_add(1) {
            // Simultaneous open is not modelled.
            self.discard(now, "unexpected-in-syn-sent");
            return;
        }
        self.irs = seg.seq;
        self.rcv.on_syn();
        self.negotiate(seg);
        self.established(now, seg);
        self.send_ack(now);
    }

    /// Our SYN (or SYN-ACK) has been acknowledged.
    fn established(&mut self, now: Instant, seg: &Segment) {
        self.snd_una = 1;
        self.rtx_timer = None;
        let sample = if self.ts_ok {
            seg.options
                .timestamps
                .filter(|(_, ecr)| *ecr != 0)
                .map(|(_, ecr)| Self::ts_sample(now, ecr))
        } else if !self.syn_retransmitted {
            self.syn_sent_at.map(|t| now.saturating_duration_since(t))
        } else {
            None
        };
        if let Some(s) = sample {
            self.rtt.on_sample(s, 1, 1);
        }
        self.cwnd = match self.cfg.cwnd_unit {
            CwndUnit::Bytes => self.cfg.initial_window_bytes(self.mss as u32),
            CwndUnit::Packets => self.cfg.initial_window_bytes(self.mss as u32) / self.mss,
        };
        self.set_state(now, State::Established);
        self.trace_changes(now);
    }

    pub(crate) fn ts_sample(now: Instant, ecr: u32) -> Duration {
        let ms = Self::ts_now(now).wrapping_sub(ecr);
        // Linux: a zero sample counts as one tick.
        Duration::from_millis(u64::from(ms.clamp(1, 0x7FFF_FFFF)))
    }

    fn on_synchronized(&mut self, now: Instant, seg: Segment) {
        if seg.flags.syn() {
            if seg.seq == self.irs {
                // A retransmitted SYN or SYN-ACK: our answer was lost.
                if self.state == State::SynReceived {
                    self.send_syn(now);
                } else {
                    self.send_ack(now);
                }
            } else {
                self.discard(now, "unexpected-syn");
            }
            return;
        }
        if !seg.flags.ack() {
            self.discard(now, "no-ack-flag");
            return;
        }
        let Some(ack) = Self::unwrap(seg.ack, self.iss, self.snd_una) else {
            self.discard(now, "ack-before-isn");
            return;
        };
        if self.state == State::SynReceived {
            if ack == 0 {
                self.discard(now, "ack-of-nothing");
                return;
            }
            self.established(now, &seg);
        }
        let Some(seq) = Self::unwrap(seg.seq, self.irs, self.rcv.rcv_nxt) else {
            self.discard(now, "seq-before-isn");
            return;
        };
        if seq == 0 {
            self.discard(now, "seq-is-syn");
            return;
        }
        if self.ts_ok {
            if let Some((val, _)) = seg.options.timestamps {
                self.rcv.note_timestamp(seq, val);
            }
        }
        let shift = if self.wscale_ok { self.snd_wscale } else { 0 };
        let window = u64::from(seg.window) << shift;
        let sack: smallvec::SmallVec<[(u64, u64); 4]> = if self.sack_ok {
            seg.options
                .sack
                .iter()
                .filter_map(|&(l, r)| {
                    let l = Self::unwrap(l, self.iss, self.snd_una)?;
                    let r = Self::unwrap(r, self.iss, self.snd_una)?;
                    (l < r).then_some((l, r))
                })
                .collect()
        } else {
            smallvec::SmallVec::new()
        };
        let tsecr = seg
            .options
            .timestamps
            .map(|(_, e)| e)
            .filter(|e| self.ts_ok && *e != 0);
        let has_data = !seg.payload.is_empty() || seg.flags.fin();
        self.on_ack(now, ack, window, &sack, tsecr, has_data);
        if self.state == State::Closed {
            return;
        }
        if has_data {
            let (fin, push) = (seg.flags.fin(), seg.flags.psh());
            self.on_data(now, seq, seg.payload, fin, push);
        }
        self.transmit(now);
    }

    fn on_data(&mut self, now: Instant, seq: u64, payload: Bytes, fin: bool, push: bool) {
        let end = seq + payload.len() as u64;
        let o = self
            .rcv
            .on_segment(now, seq, payload, fin, push, self.rtt.rto());
        if o.arrived.is_empty() && !o.fin_reached && end > self.rcv.rcv_nxt + self.rcv.window() {
            self.rcv.force_ack();
        }
        if self.cfg.trace {
            for (s, e, dup) in &o.arrived {
                self.trace.push(Record::Arrived {
                    time: now,
                    units: Units::new(*s, *e),
                    bytes: (*e - *s) as u32,
                    duplicate: *dup,
                });
            }
        }
        self.rcv.recycle(o.arrived);
        if let Some((unit, bytes)) = o.delivered {
            if self.cfg.trace {
                self.trace.push(Record::Delivered {
                    time: now,
                    stream: 0,
                    bytes: bytes.len() as u32,
                    unordered: false,
                    units: Units::new(unit, unit + bytes.len() as u64),
                });
            }
            self.app.push_back(AppEvent::Received {
                stream: 0,
                unordered: false,
                ppid: 0,
                payload: bytes,
            });
        }
        if o.fin_reached {
            match self.state {
                State::Established => {
                    self.set_state(now, State::CloseWait);
                    if self.cfg.close_on_peer_fin {
                        self.close_inner(now);
                    }
                }
                State::FinWait1 => self.set_state(now, State::Closing),
                State::FinWait2 => self.set_state(now, State::TimeWait),
                _ => {}
            }
        }
    }

    /// Moves the closing states forward once our FIN is acknowledged.
    pub(crate) fn on_fin_acked(&mut self, now: Instant) {
        match self.state {
            State::FinWait1 => self.set_state(now, State::FinWait2),
            State::Closing => self.set_state(now, State::TimeWait),
            State::LastAck => self.set_state(now, State::Closed),
            _ => {}
        }
    }

    fn close_inner(&mut self, now: Instant) {
        match self.state {
            State::Established => self.set_state(now, State::FinWait1),
            State::CloseWait => self.set_state(now, State::LastAck),
            State::SynSent | State::Listen => {
                self.graceful = true;
                self.state = State::Closed;
                self.trace_state(now);
                self.rtx_timer = None;
                self.app.push_back(AppEvent::Closed { error: None });
                return;
            }
            _ => return,
        }
        self.sq.queue_fin(now);
        self.transmit(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        if let Some(t) = self.close_timer {
            if t <= now {
                self.close_timer = None;
                if self.state == State::TimeWait {
                    self.state = State::Closed;
                    self.trace_state(now);
                }
            }
        }
        if let Some(t) = self.rcv.delack_deadline {
            if t <= now {
                self.rcv.delack_deadline = None;
                self.rcv.on_delack_timeout();
                if !matches!(self.state, State::Closed | State::TimeWait) {
                    self.send_ack(now);
                }
            }
        }
        if let Some(t) = self.reo_timer {
            if t <= now {
                self.reo_timer = None;
                self.on_reorder_timeout(now);
            }
        }
        if let Some((t, kind)) = self.rtx_timer {
            if t <= now {
                self.rtx_timer = None;
                match (self.state, kind) {
                    (State::SynSent | State::SynReceived, _) => self.on_syn_timeout(now),
                    (_, TimerKind::Pto) => self.on_pto(now),
                    (_, TimerKind::Rto) => self.on_rto(now),
                }
            }
        }
    }

    fn on_syn_timeout(&mut self, now: Instant) {
        if self.syn_tries > self.cfg.syn_retries {
            self.abort(now, "connection attempt timed out");
            return;
        }
        self.stats.timeouts += 1;
        self.syn_retransmitted = true;
        self.rtt.back_off();
        self.send_syn(now);
    }
}

impl Transport for TcpConnection {
    fn ip_protocol(&self) -> Option<u8> {
        // A datagram's payload is a whole TCP segment (crate::segment).
        Some(IPPROTO_TCP)
    }

    fn handle_datagram(&mut self, now: Instant, datagram: Datagram) {
        self.on_datagram(now, datagram);
        self.after_event(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.on_timeout(now);
        self.after_event(now);
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<Datagram> {
        self.out.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        // The earliest of the four deadlines (asked after every event).
        let earlier = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, None) => x,
            (None, y) => y,
        };
        earlier(
            earlier(self.rtx_timer.map(|(t, _)| t), self.reo_timer),
            earlier(self.rcv.delack_deadline, self.close_timer),
        )
    }

    fn poll_app(&mut self) -> Option<AppEvent> {
        self.app.pop_front()
    }

    fn poll_trace(&mut self) -> Option<Record> {
        (!self.trace.is_empty()).then(|| self.trace.remove(0))
    }

    fn drain_trace(&mut self, out: &mut Vec<Record>) {
        out.append(&mut self.trace);
    }

    fn send(&mut self, now: Instant, message: Outgoing<'_>) -> Result<u64, SendError> {
        // TCP is one ordered byte stream: stream 0, ordered, only.
        if message.unordered {
            return Err(SendError::Unsupported("unordered delivery over TCP"));
        }
        if message.stream != 0 {
            return Err(SendError::InvalidStream {
                stream: message.stream,
                streams: 1,
            });
        }
        if message.payload.is_empty() {
            return Err(SendError::Empty);
        }
        if !matches!(self.state, State::Established | State::CloseWait) || self.sq.fin_queued {
            return Err(SendError::NotConnected);
        }
        let cap = u64::from(self.cfg.snd_buf);
        let len = message.payload.len() as u64;
        if len > cap {
            return Err(SendError::TooLarge {
                bytes: message.payload.len(),
                max: cap as usize,
            });
        }
        if self.sq.buffered() + len > cap {
            self.blocked_writer = true;
            return Err(SendError::BufferFull);
        }
        let (start, end) = self.sq.write(message.payload, self.mss, cap, now);
        let id = self.next_message;
        self.next_message += 1;
        if self.cfg.trace {
            self.trace.push(Record::Submitted {
                time: now,
                message: id,
                stream: 0,
                bytes: message.payload.len() as u32,
                unordered: false,
                units: Units::new(start, end),
            });
        }
        self.transmit(now);
        self.after_event(now);
        Ok(id)
    }

    fn close(&mut self, now: Instant) {
        self.close_inner(now);
        self.after_event(now);
    }

    fn is_established(&self) -> bool {
        matches!(self.state, State::Established | State::CloseWait)
    }

    fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed | State::TimeWait)
    }
}
