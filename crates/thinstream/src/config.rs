//! What an endpoint and its associations are configured with.

use std::time::Duration;

use thinstream_proto::{Config as TransportConfig, Mechanisms, PresetError};

/// How one association behaves: the SCTP parameters (timers, buffers,
/// streams, ports) and the thin-stream mechanisms.
///
/// [`AssociationConfig::default`] is the **production preset**: RFC 9260
/// timers with the thin-stream mechanisms tuned to hold against unmodified
/// receivers (delayed and lost SACKs). Presets that reproduce the research
/// documents' kernels are available by name through
/// [`AssociationConfig::preset`]; see [`thinstream_proto::mechanism::PRESETS`]
/// for the list.
///
/// ```
/// use thinstream::AssociationConfig;
/// // The default: the production preset.
/// let prod = AssociationConfig::default();
/// assert!(prod.mechanisms().uses_thin_detection());
/// // The documents' modified lksctp, with redundant bundling added.
/// let lab = AssociationConfig::preset("lksctp-mod+rdb").unwrap();
/// assert!(lab.mechanisms().rdb.enabled);
/// // Bad names are errors, not silent defaults.
/// assert!(AssociationConfig::preset("no-such-preset").is_err());
/// ```
#[derive(Clone, Debug)]
pub struct AssociationConfig {
    pub(crate) transport: TransportConfig,
    pub(crate) recv_queue_bytes: usize,
    pub(crate) close_timeout: Duration,
    pub(crate) path_mtu: PathMtu,
}

/// How large an association's SCTP packets (common header and chunks, the
/// payload of one UDP datagram) may be.
///
/// ```
/// use thinstream::{AssociationConfig, PathMtu};
/// use std::net::SocketAddr;
/// let loopback: SocketAddr = "127.0.0.1:9899".parse().unwrap();
/// // The default starts at an Ethernet-sized packet and may discover more.
/// assert_eq!(PathMtu::Auto.base(loopback), 1472);
/// assert!(PathMtu::Auto.limit(loopback) <= thinstream::LOOPBACK_PMTU_CAP);
/// // A fixed size is used as given, and nothing is probed.
/// let mut c = AssociationConfig::default();
/// c.pmtu(PathMtu::Fixed(1200));
/// assert_eq!(c.path_mtu().limit(loopback), 1200);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathMtu {
    /// The default: start with an Ethernet-sized packet (1472 bytes over
    /// IPv4, 1452 over IPv6) and discover larger ones (RFC 8899 packetization
    /// layer path MTU discovery: padded HEARTBEAT probes, see
    /// [`thinstream_proto::association::pmtu`]) up to the kernel's MTU for
    /// the route to the peer (a connected probe socket's `IP_MTU`, less the
    /// IP and UDP headers), and for a loopback peer at most
    /// [`LOOPBACK_PMTU_CAP`]. A size counts only once the peer has answered
    /// a probe of it, so a peer that reads small datagrams, ignores probes
    /// (pion/sctp v1.11.3 drops packets with a PAD chunk) or a path that
    /// drops large packets keeps the association at a size that works. Incoming associations use the route of the
    /// endpoint's bound address.
    Auto,
    /// Exactly this many bytes (clamped to 128..=65507); no probing.
    Fixed(usize),
}

/// Largest SCTP packet [`PathMtu::Auto`] tries towards a loopback peer:
/// 16 KiB. Larger packets were measured to overflow a receiver's default
/// Linux socket buffer (212 992 bytes, charged by allocation size) during
/// bulk transfer; 16 KiB kept every run clean (docs/api.md, "Packet size").
pub const LOOPBACK_PMTU_CAP: usize = 16 * 1024;

/// UDP payload of a 1500-byte Ethernet frame over IPv4 / IPv6.
const ETHERNET_UDP_V4: usize = 1500 - 20 - 8;
const ETHERNET_UDP_V6: usize = 1500 - 40 - 8;

impl PathMtu {
    /// The packet size an association towards `peer` starts with.
    pub fn base(self, peer: std::net::SocketAddr) -> usize {
        match self {
            PathMtu::Fixed(n) => n.clamp(128, 65_507),
            PathMtu::Auto if peer.is_ipv4() => ETHERNET_UDP_V4,
            PathMtu::Auto => ETHERNET_UDP_V6,
        }
    }

    /// The largest packet size an association towards `peer` may use
    /// (asks the kernel for the route's MTU when [`PathMtu::Auto`]).
    pub fn limit(self, peer: std::net::SocketAddr) -> usize {
        match self {
            PathMtu::Fixed(_) => self.base(peer),
            PathMtu::Auto => {
                let route = crate::udp::route_udp_payload(peer).unwrap_or(0);
                let cap = if peer.ip().is_loopback() {
                    LOOPBACK_PMTU_CAP
                } else {
                    65_507
                };
                route.min(cap).max(self.base(peer))
            }
        }
    }

    /// Set the transport's packet size and probing bound for `peer`.
    pub(crate) fn apply(self, peer: std::net::SocketAddr, t: &mut TransportConfig) {
        t.pmtu = self.base(peer);
        let limit = self.limit(peer);
        t.pmtu_probe_max = (limit > t.pmtu).then_some(limit);
    }
}

impl Default for AssociationConfig {
    fn default() -> Self {
        AssociationConfig::from_transport(TransportConfig::production())
    }
}

impl AssociationConfig {
    /// A preset by name, with `+token` and `param=value` modifiers (the same
    /// grammar as the CLI's `--mechanisms`): `production`, `rfc`, `linux`,
    /// `thin`, `lksctp-mod`, `thin+rdb`, `production+rto-min=300`, ...
    pub fn preset(spec: &str) -> Result<AssociationConfig, PresetError> {
        TransportConfig::from_preset(spec).map(AssociationConfig::from_transport)
    }

    /// Every SCTP knob, from the protocol crate's configuration.
    pub fn from_transport(transport: TransportConfig) -> AssociationConfig {
        AssociationConfig {
            recv_queue_bytes: 64 * 1024,
            close_timeout: Duration::from_secs(10),
            path_mtu: PathMtu::Auto,
            transport,
        }
    }

    /// The SCTP packet size rule (default [`PathMtu::Auto`]). It decides
    /// the transport's `pmtu` when the association opens: a `pmtu` set
    /// through [`Self::transport_mut`] is used only with
    /// `PathMtu::Fixed`.
    pub fn pmtu(&mut self, rule: PathMtu) -> &mut Self {
        self.path_mtu = rule;
        self
    }

    /// The SCTP packet size rule in use.
    pub fn path_mtu(&self) -> PathMtu {
        self.path_mtu
    }

    /// The protocol configuration (timers, buffers, streams, mechanisms).
    pub fn transport(&self) -> &TransportConfig {
        &self.transport
    }

    /// Mutable access to the protocol configuration.
    pub fn transport_mut(&mut self) -> &mut TransportConfig {
        &mut self.transport
    }

    /// The thin-stream mechanisms in use.
    pub fn mechanisms(&self) -> &Mechanisms {
        &self.transport.mechanisms
    }

    /// Replace the thin-stream mechanisms (other parameters unchanged).
    pub fn set_mechanisms(&mut self, mechanisms: Mechanisms) -> &mut Self {
        self.transport.mechanisms = mechanisms;
        self
    }

    /// Bytes of queued but not yet sent data (RFC 9260's send buffer)
    /// before [`crate::Association::send`] waits. Default 256 KiB.
    pub fn send_buffer(&mut self, bytes: usize) -> &mut Self {
        self.transport.send_buffer = bytes;
        self
    }

    /// The receive buffer advertised to the peer (a_rwnd). Default 256 KiB.
    pub fn receive_buffer(&mut self, bytes: u32) -> &mut Self {
        self.transport.receive_buffer = bytes;
        self
    }

    /// Bytes of delivered messages the library holds for an application
    /// that has not called [`crate::Association::recv`] yet. Beyond this,
    /// messages stay with the protocol and count against the advertised
    /// window, so a slow reader slows the peer down. Default 64 KiB.
    pub fn recv_queue(&mut self, bytes: usize) -> &mut Self {
        self.recv_queue_bytes = bytes.max(1);
        self
    }

    /// Outbound streams requested (the peer may grant fewer). Default 10.
    pub fn streams(&mut self, outbound: u16) -> &mut Self {
        self.transport.outbound_streams = outbound.max(1);
        self
    }

    /// The SCTP ports (inside the UDP encapsulation). Both default to 5000.
    pub fn sctp_ports(&mut self, local: u16, remote: u16) -> &mut Self {
        self.transport.local_port = local;
        self.transport.remote_port = remote;
        self
    }

    /// Record a trace of every protocol event, read with
    /// [`crate::Association::take_trace`]. Off by default (it costs memory
    /// and time).
    pub fn trace(&mut self, on: bool) -> &mut Self {
        self.transport.trace = on;
        self
    }

    /// How long [`crate::Association::close`] waits for the graceful
    /// shutdown before it aborts. Default 10 s.
    pub fn close_timeout(&mut self, t: Duration) -> &mut Self {
        self.close_timeout = t;
        self
    }
}

/// How an [`crate::Endpoint`] runs.
///
/// ```
/// use thinstream::EndpointConfig;
/// let server = EndpointConfig::server();
/// assert!(server.accepts_incoming());
/// let client = EndpointConfig::client();
/// assert!(!client.accepts_incoming());
/// ```
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    pub(crate) association: AssociationConfig,
    pub(crate) accept_incoming: bool,
    pub(crate) max_pending_incoming: usize,
    pub(crate) socket_buffer: usize,
    pub(crate) fixed_seed: Option<u64>,
    pub(crate) gso: bool,
    pub(crate) busy_poll: Option<std::time::Duration>,
    pub(crate) clock: Option<crate::clock::Clock>,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig::client()
    }
}

impl EndpointConfig {
    /// An endpoint that only opens associations ([`crate::Endpoint::connect`]).
    pub fn client() -> EndpointConfig {
        EndpointConfig {
            association: AssociationConfig::default(),
            accept_incoming: false,
            max_pending_incoming: 1024,
            socket_buffer: 4 << 20,
            fixed_seed: None,
            gso: true,
            busy_poll: None,
            clock: None,
        }
    }

    /// An endpoint that also answers peers ([`crate::Endpoint::accept`]).
    pub fn server() -> EndpointConfig {
        EndpointConfig {
            accept_incoming: true,
            ..EndpointConfig::client()
        }
    }

    /// Whether the endpoint answers peers.
    pub fn accepts_incoming(&self) -> bool {
        self.accept_incoming
    }

    /// Answer INITs from unknown peers.
    pub fn accept_incoming(&mut self, yes: bool) -> &mut Self {
        self.accept_incoming = yes;
        self
    }

    /// The configuration incoming associations start with (also the default
    /// for [`crate::Endpoint::connect`]).
    pub fn association(&mut self, config: AssociationConfig) -> &mut Self {
        self.association = config;
        self
    }

    /// The configuration incoming associations start with.
    pub fn association_config(&self) -> &AssociationConfig {
        &self.association
    }

    /// Established associations waiting for [`crate::Endpoint::accept`]
    /// beyond which new ones are aborted ("busy"). Default 1024.
    pub fn max_pending_incoming(&mut self, n: usize) -> &mut Self {
        self.max_pending_incoming = n.max(1);
        self
    }

    /// Kernel socket buffer size asked for, each direction. Default 4 MiB
    /// (the kernel may cap it: see `net.core.rmem_max`).
    pub fn socket_buffer(&mut self, bytes: usize) -> &mut Self {
        self.socket_buffer = bytes;
        self
    }

    /// Send runs of equal-size datagrams to one peer with one system call
    /// (UDP generic segmentation offload, where the OS has it). On by
    /// default; turn it off when capturing on loopback, where a capture
    /// shows each run as one oversized datagram.
    pub fn segmentation_offload(&mut self, on: bool) -> &mut Self {
        self.gso = on;
        self
    }

    /// Busy polling: after sending, the endpoint's task keeps reading the
    /// socket without sleeping for up to `window` before it waits in the
    /// OS. A reply that arrives within the window is handled at once,
    /// without the wake-up of a sleeping thread (tens of microseconds, more
    /// for an idle CPU or a virtual machine), which trims the tail of round
    /// trips on fast paths such as loopback or a LAN. It costs CPU (up to
    /// `window` per burst sent), so it is off by default; 50-200 µs suits a
    /// request/response thin stream on a LAN. The other tasks of the
    /// runtime run between two reads, and an application's send ends the
    /// window at once, so even a window longer than the gap between
    /// messages delays nothing (it then keeps the thread polling: a core
    /// busy for as long as the traffic lasts).
    pub fn busy_poll(&mut self, window: Option<std::time::Duration>) -> &mut Self {
        self.busy_poll = window.filter(|w| !w.is_zero());
        self
    }

    /// The clock the endpoint's associations read (and time-stamp their
    /// trace records with). By default each endpoint starts its own, with
    /// its epoch at [`crate::Endpoint::bind`]; endpoints given one clock
    /// share a time base, so the traces of both ends of an association in
    /// one process join directly (the laboratory's real runs do this).
    pub fn clock(&mut self, clock: crate::clock::Clock) -> &mut Self {
        self.clock = Some(clock);
        self
    }

    /// **Testing only.** Derive the cookie secret, verification tags and
    /// initial TSNs from `seed` instead of the OS random source. Every
    /// process given the same seed picks the same tags: an off-path attacker
    /// who knows the seed can forge packets. Never use it in production.
    pub fn testing_fixed_seed(&mut self, seed: u64) -> &mut Self {
        self.fixed_seed = Some(seed);
        self
    }
}
