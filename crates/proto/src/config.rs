//! Association configuration: a plain struct whose `Default` is the RFC 9260
//! protocol parameter set (§16) plus the implementation choices this crate
//! makes (PMTU, buffers, delayed SACK).

use crate::mechanism::Mechanisms;
use thinstream_base::Duration;

/// Delayed SACK (RFC 9260 §6.2): a SACK is sent at the latest after
/// `every_packets` packets carrying DATA or after `timeout`, whichever comes
/// first. Disabled means every packet with DATA is acknowledged at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelayedSack {
    pub enabled: bool,
    /// The RFC requires at most 500 ms; 200 ms is the common default.
    pub timeout: Duration,
    /// Acknowledge at least every this many packets with DATA (RFC: 2).
    pub every_packets: u32,
    /// SACK at once when a DATA chunk carries the SACK-IMMEDIATELY flag
    /// (RFC 7053 I bit). Receivers older than RFC 7053 ignore it.
    pub honour_immediate: bool,
    /// SACK at once when a duplicate TSN arrives (RFC 9260 §6.2).
    pub immediate_on_duplicate: bool,
    /// SACK at once on the packet that closes the last gap.
    pub immediate_on_gap_closed: bool,
}

impl Default for DelayedSack {
    fn default() -> Self {
        DelayedSack {
            enabled: true,
            timeout: Duration::from_millis(200),
            every_packets: 2,
            honour_immediate: true,
            immediate_on_duplicate: true,
            immediate_on_gap_closed: true,
        }
    }
}

impl DelayedSack {
    /// Delayed SACK switched off: every packet with DATA is SACKed at once.
    pub const fn off() -> Self {
        DelayedSack {
            enabled: false,
            timeout: Duration::from_millis(200),
            every_packets: 1,
            honour_immediate: true,
            immediate_on_duplicate: true,
            immediate_on_gap_closed: true,
        }
    }

    /// The acknowledgement policy of a named receiver (see [`RECEIVERS`]).
    pub fn receiver(name: &str) -> Option<DelayedSack> {
        let d = DelayedSack::default();
        Some(match name {
            "linux-2.6" => DelayedSack {
                honour_immediate: false,
                immediate_on_duplicate: false,
                immediate_on_gap_closed: false,
                ..d
            },
            "linux" | "usrsctp" | "dcsctp" => d,
            "pion" => DelayedSack {
                immediate_on_duplicate: false,
                immediate_on_gap_closed: false,
                ..d
            },
            "every-packet" => DelayedSack::off(),
            _ => return None,
        })
    }
}

/// Receiver acknowledgement policies named after real stacks, for the
/// simulator's receiving peer (`receiver = "..."` in scenarios). Defaults
/// read from each stack's source (November 2026):
///
/// | name | delay | every | SACKs at once on | I bit |
/// |---|---|---|---|---|
/// | `linux-2.6` | 200 ms | 2 | a gap (Linux 2.6.16-2.6.23, the documents' kernels; predates RFC 7053) | ignored |
/// | `linux` | 200 ms (`sack_timeout`) | 2 (`sackfreq`) | gap, gap closed, duplicate TSN | honoured |
/// | `usrsctp` | 200 ms | 2 | gap open or just closed, duplicate TSN (usrsctp / FreeBSD) | honoured |
/// | `dcsctp` | min(RTO/2, 200 ms), 200 ms in practice | 2 | gap, duplicate TSN (WebRTC's dcSCTP) | honoured |
/// | `pion` | 200 ms | 2 | gap; a duplicate only while a gap is open (pion/sctp) | honoured |
/// | `every-packet` | none | 1 | every packet with DATA | - |
pub const RECEIVERS: &[&str] = &[
    "linux-2.6",
    "linux",
    "usrsctp",
    "dcsctp",
    "pion",
    "every-packet",
];

/// Everything an [`Association`](crate::Association) or
/// [`Endpoint`](crate::Endpoint) can be told. Build with `Config::default()`
/// and change fields; nothing is validated until use, where out-of-range
/// values are clamped (documented per field).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// RTO.Initial (RFC 9260 §16: 1 s).
    pub rto_initial: Duration,
    /// RTO.Min (1 s). Mechanisms may lower the floor (see [`Mechanisms`]).
    pub rto_min: Duration,
    /// RTO.Max (60 s).
    pub rto_max: Duration,
    /// Clock granularity G of §6.3.1 C3 (RTTVAR never drops below it).
    pub clock_granularity: Duration,
    /// Max.Burst (4): data-carrying packets sent per input event.
    pub max_burst: u32,
    /// Association.Max.Retrans (10): consecutive unanswered retransmissions
    /// (T3, T2, unacknowledged heartbeats) before the association is closed.
    pub association_max_retrans: u32,
    /// Path.Max.Retrans (5): kept for statistics (single-homed: the path
    /// being inactive does not stop retransmission, the association limit does).
    pub path_max_retrans: u32,
    /// Max.Init.Retransmits (8): INIT / COOKIE ECHO retransmissions.
    pub max_init_retransmits: u32,
    /// Valid.Cookie.Life (60 s).
    pub valid_cookie_life: Duration,
    /// HB.interval (30 s). Heartbeats are sent on an idle path every
    /// RTO + HB.interval (±50 % jitter of RTO, §8.3).
    pub hb_interval: Duration,
    /// Whether heartbeats are sent at all.
    pub heartbeat: bool,
    pub delayed_sack: DelayedSack,
    /// Missing reports that trigger a fast retransmit (§7.2.4: 3).
    pub fast_retransmit_threshold: u32,
    /// Largest SCTP packet (common header + chunks) sent. Default 1472:
    /// Ethernet MTU 1500 - IPv4 20 - UDP 8 (RFC 6951 encapsulation).
    /// Clamped to at least 128.
    pub pmtu: usize,
    /// Path MTU discovery (RFC 8899, see `association::pmtu`): once the
    /// association is up, probe packet sizes up to this many bytes with
    /// padded HEARTBEATs and use the largest the peer answers. `None` (the
    /// default, and every preset): packets stay at `pmtu`.
    pub pmtu_probe_max: Option<usize>,
    /// `true`: new data is sent as soon as the windows allow (like
    /// SCTP_NODELAY). `false`: a packet that is not full is held back while
    /// data is outstanding (Nagle-like, §6.1 bundling delay).
    pub no_delay: bool,
    /// Outbound streams requested (OS in INIT); the association uses
    /// min(this, peer's MIS).
    pub outbound_streams: u16,
    /// Maximum inbound streams accepted (MIS in INIT).
    pub max_inbound_streams: u16,
    /// Receive buffer in bytes; the advertised a_rwnd is this minus the
    /// bytes held for reassembly, reordering and not yet read by the app.
    pub receive_buffer: u32,
    /// Bytes of user data queued and not yet cumulatively acknowledged
    /// beyond which `send` returns `BufferFull`.
    pub send_buffer: usize,
    /// Largest user message accepted by `send`.
    pub max_message_size: usize,
    /// Initial cwnd in bytes; `None` = §7.2.1: min(4*MTU, max(2*MTU, 4380)).
    pub initial_cwnd: Option<u32>,
    /// §7.2.1 (SHOULD): halve cwnd (not below 4*MTU) per RTO without DATA
    /// sent, applied when sending resumes.
    pub idle_cwnd_decay: bool,
    /// Local SCTP port (common header).
    pub local_port: u16,
    /// Peer SCTP port used by `connect` (pion/sctp uses 5000/5000).
    pub remote_port: u16,
    /// Record trace records for `poll_trace` (off: no records are kept).
    pub trace: bool,
    /// Thin-stream and loss-recovery mechanisms; default = RFC behaviour.
    pub mechanisms: Mechanisms,
    /// Message interleaving (RFC 8260): advertise I-DATA and I-FORWARD-TSN
    /// in the Supported Extensions parameter and, when the peer advertises
    /// I-DATA too, send user data as I-DATA so fragments of a large message
    /// on one stream interleave with messages of other streams (see
    /// `association::sender`). Off by default: plain DATA as in RFC 9260.
    pub interleaving: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            rto_initial: Duration::from_secs(1),
            rto_min: Duration::from_secs(1),
            rto_max: Duration::from_secs(60),
            clock_granularity: Duration::from_millis(1),
            max_burst: 4,
            association_max_retrans: 10,
            path_max_retrans: 5,
            max_init_retransmits: 8,
            valid_cookie_life: Duration::from_secs(60),
            hb_interval: Duration::from_secs(30),
            heartbeat: true,
            delayed_sack: DelayedSack::default(),
            fast_retransmit_threshold: 3,
            pmtu: 1472,
            pmtu_probe_max: None,
            no_delay: true,
            outbound_streams: 10,
            max_inbound_streams: 10,
            receive_buffer: 256 * 1024,
            send_buffer: 1024 * 1024,
            max_message_size: 256 * 1024,
            initial_cwnd: None,
            idle_cwnd_decay: true,
            local_port: 5000,
            remote_port: 5000,
            trace: false,
            mechanisms: Mechanisms::default(),
            interleaving: false,
        }
    }
}

impl Config {
    /// The effective PMTU (clamped to at least 128 bytes so a DATA chunk
    /// always has room).
    pub fn effective_pmtu(&self) -> usize {
        self.pmtu.max(128)
    }

    /// Largest user-data payload of one DATA chunk: the PMTU minus the common
    /// header and the DATA chunk header, rounded down to 4 so padding never
    /// pushes a full chunk over the PMTU.
    pub fn max_fragment(&self) -> usize {
        (self.effective_pmtu()
            - crate::wire::COMMON_HEADER_LEN
            - crate::wire::DATA_CHUNK_HEADER_LEN)
            & !3
    }

    /// Largest user-data payload of one I-DATA chunk (RFC 8260: its header
    /// is 4 bytes longer than DATA's), rounded down to 4 like
    /// [`Config::max_fragment`].
    pub fn max_fragment_idata(&self) -> usize {
        (self.effective_pmtu()
            - crate::wire::COMMON_HEADER_LEN
            - crate::wire::I_DATA_CHUNK_HEADER_LEN)
            & !3
    }

    /// The MTU used by congestion control (§7.2: "MTU" is the PMTU).
    pub fn mtu_bytes(&self) -> u32 {
        self.effective_pmtu() as u32
    }

    /// Initial cwnd (§7.2.1: min(4*MTU, max(2*MTU, 4380 bytes))).
    pub fn initial_cwnd_bytes(&self) -> u32 {
        let mtu = self.mtu_bytes();
        self.initial_cwnd
            .unwrap_or_else(|| (4 * mtu).min((2 * mtu).max(4380)))
            .max(mtu)
    }

    /// A config with tracing on.
    pub fn with_trace(mut self) -> Self {
        self.trace = true;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_rfc_9260() {
        let c = Config::default();
        assert_eq!(c.rto_initial, Duration::from_secs(1));
        assert_eq!(c.rto_min, Duration::from_secs(1));
        assert_eq!(c.rto_max, Duration::from_secs(60));
        assert_eq!(c.max_burst, 4);
        assert_eq!(c.association_max_retrans, 10);
        assert_eq!(c.path_max_retrans, 5);
        assert_eq!(c.max_init_retransmits, 8);
        assert_eq!(c.valid_cookie_life, Duration::from_secs(60));
        assert_eq!(c.hb_interval, Duration::from_secs(30));
        assert_eq!(c.fast_retransmit_threshold, 3);
        assert_eq!(c.pmtu, 1472);
        // min(4*1472, max(2*1472, 4380)) = min(5888, 4380) = 4380
        assert_eq!(c.initial_cwnd_bytes(), 4380);
        assert_eq!(c.max_fragment(), 1444);
    }
}
