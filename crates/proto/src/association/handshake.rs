//! Association setup (§5.1), collisions and restarts (§5.2), the stale
//! cookie error (§5.2.6), graceful shutdown (§9.2), ABORT (§9.1),
//! heartbeats (§8.3), out-of-the-blue packets (§8.4) and the handshake
//! timers T1-init, T1-cookie and T2-shutdown.

use std::net::SocketAddr;

use bytes::Bytes;
use thinstream_base::drive::AppEvent;
use thinstream_base::trace::Record;
use thinstream_base::{Duration, Instant, Rng};

use super::congestion::Congestion;
use super::receiver::Receiver;
use super::sender::Sender;
use super::timers::Timer;
use super::{Association, State};
use crate::config::Config;
use crate::cookie::{CookieContents, CookieError, CookieKey};
use crate::wire::{
    cause_code, chunk_type, AbortChunk, Chunk, ErrorCause, ErrorChunk, HeartbeatChunk, InitChunk,
    Packet, Param, SackChunk, ShutdownChunk, ShutdownCompleteChunk, Ssn, Tsn, Unrecognized,
};

/// Upper bound on reflected unrecognized parameters in one INIT ACK, so an
/// INIT full of unknown parameters cannot inflate the answer.
const MAX_REFLECTED_PARAM_BYTES: usize = 512;

/// A non-zero random tag (§5.3.1: tags are random and never 0).
fn random_tag(rng: &mut Rng) -> u32 {
    loop {
        let t = rng.next_u32();
        if t != 0 {
            return t;
        }
    }
}

/// What the INIT / INIT ACK parameters tell us.
#[derive(Debug, Default)]
struct PeerParams {
    forward_tsn: bool,
    /// I-DATA in the Supported Extensions (RFC 8260 §2.2.3).
    idata: bool,
    cookie: Option<Bytes>,
    preservative_ms: u32,
    addresses: Vec<std::net::IpAddr>,
    /// Unrecognized parameters to report (§3.2.1).
    report: Vec<Param>,
}

fn read_params(params: &[Param]) -> PeerParams {
    let mut out = PeerParams::default();
    let mut reflected = 0;
    for p in params {
        match p {
            Param::ForwardTsnSupported => out.forward_tsn = true,
            Param::SupportedExtensions(v) => {
                if v.contains(&chunk_type::FORWARD_TSN) {
                    out.forward_tsn = true;
                }
                if v.contains(&chunk_type::I_DATA) {
                    out.idata = true;
                }
            }
            Param::StateCookie(c) => out.cookie = Some(c.clone()),
            Param::CookiePreservative(ms) => out.preservative_ms = *ms,
            // Recorded only: we talk to the address packets come from.
            Param::Ipv4Address(a) => out.addresses.push((*a).into()),
            Param::Ipv6Address(a) => out.addresses.push((*a).into()),
            Param::Unknown { kind, .. } => {
                let action = Unrecognized::for_param(*kind);
                if action.reports() && reflected + p.encoded_len() <= MAX_REFLECTED_PARAM_BYTES {
                    reflected += p.encoded_len();
                    out.report.push(p.clone());
                }
                if !action.skips() {
                    break;
                }
            }
            _ => {}
        }
    }
    out
}

/// §3.3.2: an INIT with Initiate Tag 0 is silently discarded; zero stream
/// counts are answered with ABORT (Invalid Mandatory Parameter).
fn check_init(init: &InitChunk) -> Result<(), Option<ErrorCause>> {
    if init.initiate_tag == 0 {
        return Err(None);
    }
    if init.outbound_streams == 0 || init.inbound_streams == 0 {
        return Err(Some(ErrorCause::invalid_mandatory_parameter()));
    }
    Ok(())
}

/// Our INIT / INIT ACK parameters: Forward-TSN-Supported (RFC 3758), the
/// Supported Extensions listing FORWARD TSN and, with
/// [`Config::interleaving`], I-DATA and I-FORWARD-TSN (RFC 8260 §2.2.3),
/// and nothing else, in particular no address parameters.
fn our_params(config: &Config) -> Vec<Param> {
    let mut ext = vec![chunk_type::FORWARD_TSN];
    if config.interleaving {
        ext.extend([chunk_type::I_DATA, chunk_type::I_FORWARD_TSN]);
    }
    vec![Param::ForwardTsnSupported, Param::SupportedExtensions(ext)]
}

/// Build the INIT ACK answering `init` from `src` (§5.1 B), with a signed
/// cookie that carries the whole TCB (§5.1.3).
#[allow(clippy::too_many_arguments)]
fn build_init_ack(
    config: &Config,
    key: &CookieKey,
    now: Instant,
    src: SocketAddr,
    src_port: u16,
    init: &InitChunk,
    local_tag: u32,
    local_tsn: Tsn,
    tie: (u32, u32),
) -> Packet {
    let pp = read_params(&init.params);
    let extra = Duration::from_millis(u64::from(pp.preservative_ms)).min(config.valid_cookie_life);
    let contents = CookieContents {
        created: now,
        lifetime: key.lifetime + extra,
        local_tag,
        peer_tag: init.initiate_tag,
        local_tie_tag: tie.0,
        peer_tie_tag: tie.1,
        local_initial_tsn: local_tsn.0,
        peer_initial_tsn: init.initial_tsn.0,
        peer_rwnd: init.a_rwnd,
        out_streams: config.outbound_streams.max(1).min(init.inbound_streams),
        in_streams: config.max_inbound_streams.max(1).min(init.outbound_streams),
        peer_forward_tsn: pp.forward_tsn,
        peer_idata: pp.idata,
        peer_addr: src,
        peer_port: src_port,
        local_port: config.local_port,
    };
    let mut params = vec![Param::StateCookie(Bytes::from(key.seal(&contents)))];
    params.extend(our_params(config));
    for p in &pp.report {
        let mut tlv = Vec::with_capacity(p.encoded_len());
        p.emit(&mut tlv);
        params.push(Param::UnrecognizedParameter(Bytes::from(tlv)));
    }
    Packet {
        src_port: config.local_port,
        dst_port: src_port,
        verification_tag: init.initiate_tag,
        chunks: vec![Chunk::InitAck(InitChunk {
            initiate_tag: local_tag,
            a_rwnd: config.receive_buffer,
            outbound_streams: config.outbound_streams.max(1),
            inbound_streams: config.max_inbound_streams.max(1),
            initial_tsn: local_tsn,
            params,
        })],
    }
}

/// Answer an INIT with no TCB (listener, §5.1 B): fresh random tag and
/// initial TSN, nothing remembered. `None` = discard silently.
pub(crate) fn answer_init_statelessly(
    config: &Config,
    key: &CookieKey,
    rng: &mut Rng,
    now: Instant,
    src: SocketAddr,
    packet: &Packet,
) -> Option<Packet> {
    let Some(Chunk::Init(init)) = packet.chunks.first() else {
        return None;
    };
    // §8.5.1 A: INIT has tag 0 and is the only chunk.
    if packet.verification_tag != 0 || packet.chunks.len() != 1 {
        return None;
    }
    match check_init(init) {
        Ok(()) => {}
        Err(None) => return None,
        Err(Some(cause)) => {
            return Some(Packet {
                src_port: config.local_port,
                dst_port: packet.src_port,
                verification_tag: init.initiate_tag,
                chunks: vec![Chunk::Abort(AbortChunk {
                    t_bit: false,
                    causes: vec![cause],
                })],
            })
        }
    }
    let tag = random_tag(rng);
    let tsn = Tsn(rng.next_u32());
    Some(build_init_ack(
        config,
        key,
        now,
        src,
        packet.src_port,
        init,
        tag,
        tsn,
        (0, 0),
    ))
}

/// §8.4 answers to an out-of-the-blue packet (INIT and COOKIE ECHO are
/// handled by the caller). `None` = discard silently.
pub(crate) fn ootb_response(local_port: u16, packet: &Packet) -> Option<Packet> {
    // Rule 2: never answer an ABORT.
    if packet.chunks.iter().any(|c| matches!(c, Chunk::Abort(_))) {
        return None;
    }
    let chunk = match packet.chunks.first()? {
        // Rule 5: SHUTDOWN ACK -> SHUTDOWN COMPLETE with the T bit.
        Chunk::ShutdownAck => Chunk::ShutdownComplete(ShutdownCompleteChunk { t_bit: true }),
        // Rules 6, 7: SHUTDOWN COMPLETE, COOKIE ACK, ERROR are discarded.
        Chunk::ShutdownComplete(_) | Chunk::CookieAck | Chunk::Error(_) => return None,
        // Rule 3: an INIT nobody will answer gets an ABORT carrying the
        // INIT's Initiate Tag with the T bit clear ("connection refused").
        Chunk::Init(init) => {
            if init.initiate_tag == 0 {
                return None;
            }
            return Some(Packet {
                src_port: local_port,
                dst_port: packet.src_port,
                verification_tag: init.initiate_tag,
                chunks: vec![Chunk::Abort(AbortChunk {
                    t_bit: false,
                    causes: vec![],
                })],
            });
        }
        Chunk::CookieEcho(_) => return None,
        // Rule 8: ABORT with the T bit and the packet's tag.
        _ => Chunk::Abort(AbortChunk {
            t_bit: true,
            causes: vec![],
        }),
    };
    Some(Packet {
        src_port: local_port,
        dst_port: packet.src_port,
        verification_tag: packet.verification_tag,
        chunks: vec![chunk],
    })
}

fn cause_names(causes: &[ErrorCause]) -> String {
    if causes.is_empty() {
        return "no cause".into();
    }
    causes
        .iter()
        .map(|c| {
            // User-Initiated Abort and Protocol Violation carry text from
            // the peer: show it, printable characters only and bounded.
            let texty = matches!(
                c.code,
                crate::wire::cause_code::USER_INITIATED_ABORT
                    | crate::wire::cause_code::PROTOCOL_VIOLATION
            );
            if texty && !c.info.is_empty() {
                let text: String = String::from_utf8_lossy(&c.info)
                    .chars()
                    .filter(|ch| !ch.is_control())
                    .take(200)
                    .collect();
                format!("{} ({text})", c.name())
            } else {
                c.name().to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Association {
    /// §5.1 A: send INIT, start T1-init, enter COOKIE-WAIT.
    pub(crate) fn start_connect(&mut self, now: Instant) {
        self.local_tag = random_tag(&mut self.rng);
        let init = InitChunk {
            initiate_tag: self.local_tag,
            a_rwnd: self.config.receive_buffer,
            outbound_streams: self.config.outbound_streams.max(1),
            inbound_streams: self.config.max_inbound_streams.max(1),
            initial_tsn: self.tx.initial_tsn,
            params: our_params(&self.config),
        };
        self.init = Some(init.clone());
        self.control.push_back(Chunk::Init(init));
        self.set_state(now, State::CookieWait);
        self.timers.set(Timer::T1Init, now + self.rto.rto);
        self.init_sent = Some(now);
    }

    /// Install the TCB from negotiated values.
    #[allow(clippy::too_many_arguments)]
    fn setup_tcb(
        &mut self,
        local_tag: u32,
        local_tsn: Tsn,
        peer_tag: u32,
        peer_tsn: Tsn,
        peer_rwnd: u32,
        out_streams: u16,
        in_streams: u16,
        (forward_tsn, idata): (bool, bool),
    ) {
        self.local_tag = local_tag;
        self.peer_tag = peer_tag;
        self.out_streams = out_streams;
        self.in_streams = in_streams;
        self.peer_forward_tsn = forward_tsn;
        self.peer_idata = idata;
        self.tx = Sender::new(local_tsn, peer_rwnd);
        self.tx.rtt_mode = self.config.mechanisms.rtt_sampling;
        self.tx.ssn = vec![Ssn(0); usize::from(out_streams)];
        // RFC 8260 §2.2.3: I-DATA only when both sides offered it.
        self.tx.idata = self.config.interleaving && idata;
        self.tx.frag = if self.tx.idata {
            self.config.max_fragment_idata()
        } else {
            self.config.max_fragment()
        };
        if self.tx.idata {
            self.tx.mid_ordered = vec![0; usize::from(out_streams)];
            self.tx.mid_unordered = vec![0; usize::from(out_streams)];
        }
        self.rx = Receiver::new(peer_tsn, self.config.receive_buffer);
        self.rx.set_streams(in_streams);
        self.cc = Congestion::new(self.config.initial_cwnd_bytes(), self.config.mtu_bytes());
        // §7.2.1: initial ssthresh may be arbitrarily high; the peer's
        // advertised window is the customary choice.
        self.cc.ssthresh = peer_rwnd.max(self.cc.mtu);
        self.error_count = 0;
        self.path_error_count = 0;
        self.heartbeat = None;
    }

    fn become_established(&mut self, now: Instant) {
        self.timers.stop(Timer::T1Init);
        self.timers.stop(Timer::T1Cookie);
        self.init_retransmits = 0;
        self.set_state(now, State::Established);
        self.app.push_back(AppEvent::Established);
        self.schedule_heartbeat(now);
        self.record_rto(now);
        self.record_congestion(now);
    }

    fn schedule_heartbeat(&mut self, now: Instant) {
        if !self.config.heartbeat {
            return;
        }
        // §8.3: HB.interval + RTO with jitter of ±50 % of the RTO.
        let rto = self.rto.rto;
        let jitter = Duration::from_nanos(self.rng.below(rto.as_nanos().max(1) + 1));
        let at = now + self.config.hb_interval + rto / 2 + jitter;
        self.timers.set(Timer::Heartbeat, at);
    }

    /// Build a TCB from a verified cookie (§5.1 D / §5.2.4 A).
    fn establish_from_cookie(
        &mut self,
        now: Instant,
        c: &CookieContents,
        src: SocketAddr,
        restart: bool,
    ) {
        self.remote = Some(src);
        self.peer_port = c.peer_port;
        self.listening = false;
        self.timers.stop_all();
        self.control.clear();
        self.setup_tcb(
            c.local_tag,
            Tsn(c.local_initial_tsn),
            c.peer_tag,
            Tsn(c.peer_initial_tsn),
            c.peer_rwnd,
            c.out_streams,
            c.in_streams,
            (c.peer_forward_tsn, c.peer_idata),
        );
        if restart {
            self.tracer.record(|| Record::State {
                time: now,
                state: "restarted".into(),
            });
            // Report the new incarnation.
            self.state = State::CookieEchoed;
        }
        self.control.push_back(Chunk::CookieAck);
        self.become_established(now);
        if restart {
            // §5.2.4 A: the association goes on with the new incarnation's
            // tags and TSNs. The application is told the peer lost its
            // state (data of the old incarnation is gone) instead of a
            // second `Established`.
            if self.app.back() == Some(&AppEvent::Established) {
                self.app.pop_back();
            }
            self.app.push_back(AppEvent::PeerRestarted);
        }
    }

    // ----- timers ----------------------------------------------------------

    fn handshake_backoff(&mut self, now: Instant) -> bool {
        if self.init_retransmits >= self.config.max_init_retransmits {
            // In COOKIE-ECHOED the peer has a TCB and its tag is known: it
            // gets an ABORT (give_up); in COOKIE-WAIT there is nobody to tell.
            self.give_up(now, "handshake failed: Max.Init.Retransmits exceeded");
            return false;
        }
        self.init_retransmits += 1;
        self.stats.init_retransmits += 1;
        // §6.3.3 E2 applies to the T1 timers as well (§5.1 A, C).
        self.rto
            .set(self.rto.rto.saturating_mul(2).min(self.config.rto_max));
        self.record_rto(now);
        true
    }

    pub(crate) fn on_t1_init(&mut self, now: Instant) {
        if self.state != State::CookieWait || !self.handshake_backoff(now) {
            return;
        }
        if let Some(init) = self.init.clone() {
            self.control.retain(|c| !matches!(c, Chunk::Init(_)));
            self.control.push_front(Chunk::Init(init));
        }
        // A retransmitted INIT makes the handshake round trip ambiguous.
        self.init_sent = None;
        self.timers.set(Timer::T1Init, now + self.rto.rto);
    }

    pub(crate) fn on_t1_cookie(&mut self, now: Instant) {
        if self.state != State::CookieEchoed || !self.handshake_backoff(now) {
            return;
        }
        if let Some(cookie) = self.cookie.clone() {
            self.control.retain(|c| !matches!(c, Chunk::CookieEcho(_)));
            self.control
                .push_front(Chunk::CookieEcho(crate::wire::CookieEchoChunk { cookie }));
        }
        self.timers.set(Timer::T1Cookie, now + self.rto.rto);
    }

    pub(crate) fn on_t2_shutdown(&mut self, now: Instant) {
        let chunk = match self.state {
            State::ShutdownSent => Chunk::Shutdown(ShutdownChunk {
                cum_tsn_ack: self.rx.cum_tsn(),
            }),
            State::ShutdownAckSent => Chunk::ShutdownAck,
            _ => return,
        };
        self.error_count += 1;
        if self.error_count > self.config.association_max_retrans {
            self.give_up(now, "shutdown failed: too many retransmissions");
            return;
        }
        self.rto
            .set(self.rto.rto.saturating_mul(2).min(self.config.rto_max));
        self.record_rto(now);
        self.control.push_back(chunk);
        self.timers.set(Timer::T2Shutdown, now + self.rto.rto);
    }

    pub(crate) fn on_heartbeat_timer(&mut self, now: Instant) {
        if !self.config.heartbeat
            || !matches!(
                self.state,
                State::Established | State::ShutdownPending | State::ShutdownReceived
            )
        {
            return;
        }
        if self.heartbeat.is_some() {
            // §8.3: an unacknowledged heartbeat counts as a failed attempt.
            self.error_count += 1;
            self.path_error_count += 1;
            if self.error_count > self.config.association_max_retrans {
                self.give_up(now, "peer unreachable: heartbeats unanswered");
                return;
            }
        }
        let nonce = self.rng.next_u64();
        let mut info = Vec::with_capacity(16);
        info.extend_from_slice(&nonce.to_be_bytes());
        info.extend_from_slice(&now.as_nanos().to_be_bytes());
        self.control
            .push_back(Chunk::Heartbeat(HeartbeatChunk { info: info.into() }));
        self.heartbeat = Some((nonce, now));
        self.stats.heartbeats_sent += 1;
        self.schedule_heartbeat(now);
    }

    // ----- chunk handlers ----------------------------------------------------

    /// INIT with a TCB (§5.2.1, §5.2.2); the CLOSED case is stateless.
    pub(crate) fn on_init(
        &mut self,
        now: Instant,
        src: SocketAddr,
        src_port: u16,
        init: &InitChunk,
    ) {
        match check_init(init) {
            Ok(()) => {}
            Err(None) => {
                self.discard(now, "init-tag-zero");
                return;
            }
            Err(Some(cause)) => {
                let p = Packet {
                    src_port: self.config.local_port,
                    dst_port: src_port,
                    verification_tag: init.initiate_tag,
                    chunks: vec![Chunk::Abort(AbortChunk {
                        t_bit: false,
                        causes: vec![cause],
                    })],
                };
                self.stateless.push_back((src, p));
                return;
            }
        }
        let (tag, tsn, tie) = match self.state {
            State::Closed => return,
            // §5.2.1: answer with the parameters of our own INIT (same
            // Initiate Tag); tie-tags are only meaningful once the peer's
            // tag is known.
            State::CookieWait => (self.local_tag, self.tx.initial_tsn, (0, 0)),
            State::CookieEchoed => (
                self.local_tag,
                self.tx.initial_tsn,
                (self.local_tag, self.peer_tag),
            ),
            // §9.2: the SHUTDOWN COMPLETE was probably lost: discard the
            // INIT and retransmit SHUTDOWN ACK.
            State::ShutdownAckSent => {
                self.control.push_back(Chunk::ShutdownAck);
                self.timers.set(Timer::T2Shutdown, now + self.rto.rto);
                return;
            }
            // §5.2.2: a new tag and TSN, the current tags as tie-tags.
            _ => {
                let tag = random_tag(&mut self.rng);
                let tsn = Tsn(self.rng.next_u32());
                (tag, tsn, (self.local_tag, self.peer_tag))
            }
        };
        let p = build_init_ack(
            &self.config,
            &self.cookie_key,
            now,
            src,
            src_port,
            init,
            tag,
            tsn,
            tie,
        );
        self.stateless.push_back((src, p));
    }

    /// INIT ACK (§5.1 C; §5.2.3: discarded outside COOKIE-WAIT).
    pub(crate) fn on_init_ack(&mut self, now: Instant, ia: &InitChunk) {
        if self.state != State::CookieWait {
            self.discard(now, "unexpected-init-ack");
            return;
        }
        if ia.initiate_tag == 0 || ia.outbound_streams == 0 || ia.inbound_streams == 0 {
            if ia.initiate_tag != 0 {
                self.peer_tag = ia.initiate_tag;
                self.queue_abort(vec![ErrorCause::invalid_mandatory_parameter()], false);
            }
            self.enter_closed(now, Some("invalid INIT ACK".into()));
            return;
        }
        let pp = read_params(&ia.params);
        let Some(cookie) = pp.cookie.clone() else {
            self.peer_tag = ia.initiate_tag;
            self.queue_abort(
                vec![ErrorCause::missing_mandatory_parameters(&[
                    crate::wire::param_type::STATE_COOKIE,
                ])],
                false,
            );
            self.enter_closed(now, Some("INIT ACK without State Cookie".into()));
            return;
        };
        let out = self.config.outbound_streams.max(1).min(ia.inbound_streams);
        let inb = self
            .config
            .max_inbound_streams
            .max(1)
            .min(ia.outbound_streams);
        let tsn = self.tx.initial_tsn;
        self.setup_tcb(
            self.local_tag,
            tsn,
            ia.initiate_tag,
            ia.initial_tsn,
            ia.a_rwnd,
            out,
            inb,
            (pp.forward_tsn, pp.idata),
        );
        self.peer_addresses = pp.addresses;
        self.timers.stop(Timer::T1Init);
        if let Some(sent) = self.init_sent.take() {
            if self.config.mechanisms.handshake_rtt {
                // mechanism::rtt: seed the RTO from INIT -> INIT ACK.
                self.apply_rtt_sample(now, now.saturating_duration_since(sent), false);
            }
        }
        // Max.Init.Retransmits bounds the whole setup (INIT and COOKIE ECHO
        // together), so the counter is not reset here.
        self.cookie = Some(cookie.clone());
        self.control.retain(|c| !matches!(c, Chunk::Init(_)));
        self.control
            .push_front(Chunk::CookieEcho(crate::wire::CookieEchoChunk { cookie }));
        if !pp.report.is_empty() {
            // §3.2.1: report unrecognized parameters of an INIT ACK in an
            // ERROR bundled with the COOKIE ECHO.
            self.control.push_back(Chunk::Error(ErrorChunk {
                causes: vec![ErrorCause::unrecognized_parameters(&pp.report)],
            }));
        }
        self.set_state(now, State::CookieEchoed);
        self.timers.set(Timer::T1Cookie, now + self.rto.rto);
    }

    /// COOKIE ECHO (§5.1 D, §5.1.5, §5.2.4).
    pub(crate) fn on_cookie_echo(
        &mut self,
        now: Instant,
        src: SocketAddr,
        packet: &Packet,
        cookie: &[u8],
    ) -> bool {
        let c = match self.cookie_key.open(cookie, now) {
            Ok(c) => c,
            Err(CookieError::Invalid) => {
                self.discard(now, "invalid-cookie");
                return false;
            }
            Err(CookieError::Stale {
                local_tag,
                peer_tag,
                ..
            }) if self.state != State::Closed
                && local_tag == self.local_tag
                && peer_tag == self.peer_tag =>
            {
                // §5.2.4 D with an old cookie: the association it describes
                // exists (both tags match), so its age does not matter: the
                // peer merely missed our COOKIE ACK.
                if packet.verification_tag != local_tag {
                    self.discard(now, "bad-verification-tag");
                    return false;
                }
                self.control.push_back(Chunk::CookieAck);
                return true;
            }
            Err(CookieError::Stale {
                staleness_us,
                peer_tag,
                ..
            }) => {
                // §5.1.5 3: report the staleness.
                let p = Packet {
                    src_port: self.config.local_port,
                    dst_port: packet.src_port,
                    verification_tag: peer_tag,
                    chunks: vec![Chunk::Error(ErrorChunk {
                        causes: vec![ErrorCause::stale_cookie(staleness_us)],
                    })],
                };
                self.stateless.push_back((src, p));
                self.discard(now, "stale-cookie");
                return false;
            }
        };
        // §8.5.1 D: the packet carries the tag we chose in the INIT ACK.
        if packet.verification_tag != c.local_tag {
            self.discard(now, "bad-verification-tag");
            return false;
        }
        if c.peer_addr != src
            || c.local_port != self.config.local_port
            || c.peer_port != packet.src_port
        {
            self.discard(now, "cookie-address-mismatch");
            return false;
        }
        if self.state == State::Closed {
            if !self.listening {
                self.discard(now, "out-of-the-blue");
                return false;
            }
            self.establish_from_cookie(now, &c, src, false);
            if self.config.mechanisms.handshake_rtt && c.created <= now {
                // mechanism::rtt: INIT ACK -> COOKIE ECHO, timed by the cookie.
                self.apply_rtt_sample(now, now.saturating_duration_since(c.created), false);
            }
            return true;
        }
        let lt = c.local_tag == self.local_tag;
        let pt = c.peer_tag == self.peer_tag;
        if !lt && !pt && c.local_tie_tag == self.local_tag && c.peer_tie_tag == self.peer_tag {
            // §5.2.4 A: the peer restarted.
            if self.state == State::ShutdownAckSent {
                self.control.push_back(Chunk::ShutdownAck);
                self.control.push_back(Chunk::Error(ErrorChunk {
                    causes: vec![ErrorCause::cookie_received_while_shutting_down()],
                }));
                return false;
            }
            self.establish_from_cookie(now, &c, src, true);
            true
        } else if lt && !pt {
            // §5.2.4 B: setup collision; take the peer's values.
            if matches!(self.state, State::CookieWait | State::CookieEchoed) {
                self.setup_tcb(
                    c.local_tag,
                    Tsn(c.local_initial_tsn),
                    c.peer_tag,
                    Tsn(c.peer_initial_tsn),
                    c.peer_rwnd,
                    c.out_streams,
                    c.in_streams,
                    (c.peer_forward_tsn, c.peer_idata),
                );
                self.control
                    .retain(|x| !matches!(x, Chunk::Init(_) | Chunk::CookieEcho(_)));
                self.become_established(now);
            } else {
                self.peer_tag = c.peer_tag;
            }
            self.control.push_back(Chunk::CookieAck);
            true
        } else if !lt && pt && c.local_tie_tag == 0 && c.peer_tie_tag == 0 {
            // §5.2.4 C: an old cookie: discard.
            self.discard(now, "old-cookie");
            false
        } else if lt && pt {
            // §5.2.4 D: both tags match (e.g. a retransmitted COOKIE ECHO).
            if matches!(self.state, State::CookieWait | State::CookieEchoed) {
                self.control
                    .retain(|x| !matches!(x, Chunk::Init(_) | Chunk::CookieEcho(_)));
                self.become_established(now);
            }
            self.control.push_back(Chunk::CookieAck);
            true
        } else {
            self.discard(now, "cookie-tag-mismatch");
            false
        }
    }

    /// COOKIE ACK (§5.1 E; §5.2.5: duplicates are discarded).
    pub(crate) fn on_cookie_ack(&mut self, now: Instant) {
        if self.state == State::CookieEchoed {
            self.become_established(now);
        }
    }

    pub(crate) fn on_abort(&mut self, now: Instant, a: &AbortChunk) {
        if self.state == State::ShutdownAckSent {
            // In SHUTDOWN-ACK-SENT both directions are fully acknowledged
            // (§9.2: the SHUTDOWN sender had all its data acked, and we sent
            // SHUTDOWN ACK only after ours was). An ABORT here (typically the
            // peer's §8.4 answer to a late packet after it already closed)
            // loses nothing: report a graceful close.
            self.tracer.record(|| Record::State {
                time: now,
                state: "abort-after-shutdown".into(),
            });
            self.enter_closed(now, None);
            return;
        }
        let why = format!("aborted by peer: {}", cause_names(&a.causes));
        self.enter_closed(now, Some(why));
    }

    /// ERROR (§3.3.10). A Stale Cookie in COOKIE-ECHOED restarts the setup
    /// with a Cookie Preservative (§5.2.6); other causes are informational.
    pub(crate) fn on_error(&mut self, now: Instant, e: &crate::wire::ErrorChunk) {
        for cause in &e.causes {
            if cause.code == cause_code::STALE_COOKIE && self.state == State::CookieEchoed {
                let staleness_us = cause.staleness_us().unwrap_or(0);
                if !self.handshake_backoff(now) {
                    return;
                }
                // Ask for the staleness doubled (in ms), at least 1 ms.
                let ms = (u64::from(staleness_us) * 2)
                    .div_ceil(1000)
                    .clamp(1, u64::from(u32::MAX)) as u32;
                let mut init = match self.init.clone() {
                    Some(i) => i,
                    None => return,
                };
                init.params
                    .retain(|p| !matches!(p, Param::CookiePreservative(_)));
                init.params.push(Param::CookiePreservative(ms));
                self.init = Some(init.clone());
                self.control.clear();
                self.control.push_back(Chunk::Init(init));
                self.timers.stop(Timer::T1Cookie);
                self.set_state(now, State::CookieWait);
                self.timers.set(Timer::T1Init, now + self.rto.rto);
                return;
            }
        }
    }

    pub(crate) fn on_heartbeat(&mut self, hb: &HeartbeatChunk) {
        if self.has_peer_tcb() {
            // §8.3: echo the Heartbeat Info unchanged.
            self.control.push_back(Chunk::HeartbeatAck(HeartbeatChunk {
                info: hb.info.clone(),
            }));
        }
    }

    pub(crate) fn on_heartbeat_ack(&mut self, now: Instant, hb: &HeartbeatChunk) {
        if hb.info.len() != 16 {
            return;
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&hb.info[..8]);
        let nonce = u64::from_be_bytes(n);
        if self.on_pmtu_probe_ack(now, nonce) {
            // The peer answered: it is reachable.
            self.error_count = 0;
            self.path_error_count = 0;
            return;
        }
        match self.heartbeat {
            Some((expected, sent)) if expected == nonce => {
                self.heartbeat = None;
                self.stats.heartbeat_acks_received += 1;
                // §8.3: clear the error counters and measure the RTT.
                self.error_count = 0;
                self.path_error_count = 0;
                self.apply_rtt_sample(now, now.saturating_duration_since(sent), false);
            }
            _ => {}
        }
    }

    /// Application close (§9.2): SHUTDOWN once all data is acknowledged.
    pub(crate) fn begin_shutdown(&mut self, now: Instant) {
        match self.state {
            State::Closed => {
                if self.listening {
                    self.listening = false;
                    if !self.closed_reported {
                        self.closed_reported = true;
                        self.app.push_back(AppEvent::Closed { error: None });
                    }
                }
            }
            State::CookieWait | State::CookieEchoed => self.enter_closed(now, None),
            State::Established => {
                self.set_state(now, State::ShutdownPending);
                self.check_shutdown_progress(now);
            }
            _ => {}
        }
    }

    /// Move the shutdown on once all outstanding data is acknowledged.
    pub(crate) fn check_shutdown_progress(&mut self, now: Instant) {
        if !self.tx.chunks.is_empty() {
            return;
        }
        match self.state {
            State::ShutdownPending => {
                self.control.push_back(Chunk::Shutdown(ShutdownChunk {
                    cum_tsn_ack: self.rx.cum_tsn(),
                }));
                self.timers.stop(Timer::T3Rtx);
                self.timers.set(Timer::T2Shutdown, now + self.rto.rto);
                self.set_state(now, State::ShutdownSent);
            }
            State::ShutdownReceived => {
                self.control.push_back(Chunk::ShutdownAck);
                self.timers.stop(Timer::T3Rtx);
                self.timers.set(Timer::T2Shutdown, now + self.rto.rto);
                self.set_state(now, State::ShutdownAckSent);
            }
            _ => {}
        }
    }

    pub(crate) fn on_shutdown(&mut self, now: Instant, s: &ShutdownChunk) {
        match self.state {
            State::Established | State::ShutdownPending | State::ShutdownReceived => {
                // The SHUTDOWN's cumulative TSN ack acts as a SACK without gaps.
                let sack = SackChunk {
                    cum_tsn_ack: s.cum_tsn_ack,
                    a_rwnd: self.tx.peer_rwnd.saturating_add(self.tx.outstanding_bytes),
                    gap_blocks: vec![],
                    duplicate_tsns: vec![],
                };
                self.on_sack(now, &sack);
                if self.state != State::Closed {
                    self.set_state(now, State::ShutdownReceived);
                    self.check_shutdown_progress(now);
                }
            }
            State::ShutdownSent => {
                // §9.2: simultaneous shutdown: answer with SHUTDOWN ACK.
                self.control.push_back(Chunk::ShutdownAck);
                self.timers.set(Timer::T2Shutdown, now + self.rto.rto);
                self.set_state(now, State::ShutdownAckSent);
            }
            State::ShutdownAckSent => self.control.push_back(Chunk::ShutdownAck),
            _ => {}
        }
    }

    pub(crate) fn on_shutdown_ack(&mut self, now: Instant) {
        match self.state {
            State::ShutdownSent | State::ShutdownAckSent => {
                let p = self.header(
                    self.peer_tag,
                    vec![Chunk::ShutdownComplete(ShutdownCompleteChunk {
                        t_bit: false,
                    })],
                );
                if let Some(r) = self.remote {
                    self.stateless.push_back((r, p));
                }
                self.enter_closed(now, None);
            }
            State::CookieWait | State::CookieEchoed => {
                // §8.5.1 E: treated as out of the blue (§8.4 rule 5).
                if let Some(r) = self.remote {
                    let p = self.header(
                        self.local_tag,
                        vec![Chunk::ShutdownComplete(ShutdownCompleteChunk {
                            t_bit: true,
                        })],
                    );
                    self.stateless.push_back((r, p));
                }
            }
            _ => {}
        }
    }

    pub(crate) fn on_shutdown_complete(&mut self, now: Instant) {
        if self.state == State::ShutdownAckSent {
            self.enter_closed(now, None);
        }
    }

    /// A packet reaching a CLOSED association: the listener's stateless
    /// INIT handling, a COOKIE ECHO creating the TCB, or §8.4.
    pub(crate) fn process_closed(&mut self, now: Instant, src: SocketAddr, mut packet: Packet) {
        match packet.chunks.first() {
            Some(Chunk::Init(_)) if self.listening => {
                let (cfg, key) = (&self.config, &self.cookie_key);
                match answer_init_statelessly(cfg, key, &mut self.rng, now, src, &packet) {
                    Some(p) => self.stateless.push_back((src, p)),
                    None => self.discard(now, "invalid-init"),
                }
            }
            Some(Chunk::CookieEcho(c)) if self.listening => {
                let cookie = c.cookie.clone();
                if self.on_cookie_echo(now, src, &packet, &cookie) && packet.chunks.len() > 1 {
                    // §5.1 D: DATA may be bundled after the COOKIE ECHO.
                    packet.chunks.remove(0);
                    self.process_packet(now, src, packet);
                }
            }
            _ => {
                self.discard(now, "out-of-the-blue");
                if let Some(p) = ootb_response(self.config.local_port, &packet) {
                    self.stateless.push_back((src, p));
                }
            }
        }
    }
}
