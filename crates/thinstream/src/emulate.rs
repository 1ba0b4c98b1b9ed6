//! A real-time UDP link emulator: a relay between clients and one server
//! that applies the `thinstream-link` stages (the same model and the same
//! netem-like link strings as the simulator's scenario files) in each
//! direction. This is what `thinstream emulate` runs.
//!
//! One UDP socket listens. Each new source address (other than the server)
//! becomes a client, up to [`EmulatorConfig::max_clients`]: it gets its own
//! *upstream* socket (an ephemeral port on the listening address, a NAT-like
//! mapping) and its own pair of links. The client's datagrams go through its
//! forward link and leave from its upstream socket to the server; the
//! server's datagrams to that upstream socket go through the client's
//! reverse link and leave from the listening socket back to the client. The
//! server thus sees one peer address per client. Client `i`'s links draw
//! from `seed.derive("forward")`/`("reverse")` for `i = 0` (as with one
//! client) and from `seed.derive("client{i}").derive("forward")`/`("reverse")`
//! otherwise, so each client's losses depend only on the seed, its index
//! (order of first appearance) and its own traffic. With
//! [`EmulatorConfig::shared_links`] every client keeps its own upstream
//! socket but all share the first client's pair of links: one path whose
//! draws, queue and rate every client's datagrams meet in arrival order (a
//! two-host scenario's links carrying all its flows). Datagrams from
//! further clients are counted and discarded; clients are never forgotten
//! during a run.
//!
//! Timing: each direction is a [`HeldLink`], a heap of release times. On
//! Linux the loop waits for the next release on a high-resolution timer
//! ([`crate::clock::PreciseTimer`]) beside the sockets,
//! so it neither polls nor sleeps past a release: datagrams leave within the
//! OS wake-up latency of their scheduled time and an idle emulator uses no
//! CPU. Elsewhere it sleeps with tokio (1 ms resolution) until shortly before
//! the next release, then polls without sleeping until it is due. Everything due in one turn is sent as
//! one batch (`sendmsg` with UDP GSO for runs of equal-size datagrams,
//! `recvmmsg` on receive). The actual-minus-scheduled release error is
//! recorded per datagram and reported.
//!
//! Network safety: both addresses must be loopback (127.0.0.0/8 or ::1)
//! unless [`EmulatorConfig::allow_non_loopback`] is set.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use serde::Serialize;
use thinstream_base::{Datagram, Duration, Instant, Seed};
use thinstream_link::{Counter, HeldLink, HoldLimit, Link, LinkConfig, LinkConfigError, LinkStats};

use crate::clock::Clock;

#[cfg(all(feature = "tun", target_os = "linux"))]
pub mod tun;
use crate::udp::{RxBuffers, TxBatch, UdpIo};

/// What to emulate.
#[derive(Clone, Debug)]
pub struct EmulatorConfig {
    /// The address clients send to.
    pub listen: SocketAddr,
    /// The server the client's datagrams are relayed to.
    pub to: SocketAddr,
    /// Client → server.
    pub forward: LinkConfig,
    /// Server → client.
    pub reverse: LinkConfig,
    /// Run seed; the directions draw from `seed.derive("forward")` and
    /// `seed.derive("reverse")`.
    pub seed: u64,
    /// Memory bound per direction (tail drops counted as `hold_overflow`).
    pub limit: HoldLimit,
    /// Permit addresses outside 127.0.0.0/8 and ::1.
    pub allow_non_loopback: bool,
    /// Stop after this long (datagrams still held are reported, not sent).
    pub duration: Option<Duration>,
    /// Stop reading after this many datagrams (both directions) have been
    /// offered to the links, then send what is held and stop.
    pub count: Option<u64>,
    /// Most clients (each costs a socket and two links).
    pub max_clients: usize,
    /// Seeds of the first client's forward and reverse links, instead of
    /// `seed.derive("forward")` / `("reverse")`: `thinstream run --real`
    /// gives the simulator's link seeds of the run, so the n-th datagram
    /// into a direction meets the same random draws in both.
    pub link_seeds: Option<(Seed, Seed)>,
    /// One forward and one reverse link for all clients (each still has
    /// its own upstream socket), instead of a pair per client.
    pub shared_links: bool,
    /// Never sleep: poll the sockets and the clock continuously (the thread
    /// keeps a core busy, with or without traffic). Releases then leave
    /// within microseconds of their time, without the operating system's
    /// wake-up latency; on a machine without a core to spare the programs
    /// beside the emulator lose that core instead (measured in
    /// `bench/emulate`'s notes, README "emulate").
    pub busy_poll: bool,
}

/// Why the emulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmulateError {
    /// An address outside loopback without `allow_non_loopback`.
    #[error(
        "{what} address {addr} is not loopback (127.0.0.0/8 or ::1); \
         pass --allow-non-loopback to relay to or listen on other addresses"
    )]
    NotLoopback {
        /// `listen` or `to`.
        what: &'static str,
        /// The address refused.
        addr: SocketAddr,
    },
    /// `listen` and `to` are the same address.
    #[error("--listen and --to are the same address {0}")]
    SameAddress(SocketAddr),
    /// A link config that does not validate.
    #[error("{direction} link: {source}")]
    Link {
        /// `forward` or `reverse`.
        direction: &'static str,
        /// What is wrong with it.
        source: LinkConfigError,
    },
    /// `max_clients` is 0.
    #[error("max_clients must be at least 1")]
    NoClients,
    /// The listening socket.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
}

/// Distribution of release errors (actual minus scheduled release time),
/// in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReleaseError {
    /// Datagrams measured.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median (1 µs resolution).
    pub p50_us: f64,
    /// 99th percentile (1 µs resolution).
    pub p99_us: f64,
    /// 99.9th percentile (1 µs resolution).
    pub p999_us: f64,
    /// Largest, exact.
    pub max_us: f64,
}

/// What one direction did.
#[derive(Clone, Debug, Serialize)]
pub struct DirectionReport {
    /// The link, as netem-like text.
    pub link: String,
    /// Datagrams read from the socket for this direction.
    pub received: Counter,
    /// Datagrams sent on (duplicates included).
    pub sent: Counter,
    /// The link's own counters: offered, delivered, drops by cause,
    /// duplicated, corrupted, reordered.
    pub link_stats: LinkStats,
    /// Copies dropped because the hold limit was reached.
    pub hold_overflow: Counter,
    /// Most datagrams held at once.
    pub max_held: usize,
    /// Datagrams still held when the emulator stopped (not sent).
    pub held_at_exit: usize,
    /// Release timing error.
    pub release_error: ReleaseError,
}

/// One client's mapping and links.
#[derive(Clone, Debug, Serialize)]
pub struct ClientReport {
    /// Order of first appearance, from 0 (also picks the links' seeds).
    pub index: usize,
    /// The link pair it uses: its own index, or 0 for every client with
    /// shared links (whose `forward` / `reverse` are then the shared
    /// pair's, the same for every client).
    pub links: usize,
    /// The client's address.
    pub addr: SocketAddr,
    /// The upstream socket's address (what the server sees as the client).
    pub upstream: SocketAddr,
    /// Client → server.
    pub forward: DirectionReport,
    /// Server → client.
    pub reverse: DirectionReport,
}

/// Everything the emulator did, for printing and `--json`.
#[derive(Clone, Debug, Serialize)]
pub struct EmulatorReport {
    /// The bound listening address.
    pub listen: SocketAddr,
    /// The server.
    pub to: SocketAddr,
    /// The first client, once one sent something.
    pub client: Option<SocketAddr>,
    /// The run seed.
    pub seed: u64,
    /// Wall time from start to stop, seconds.
    pub elapsed_s: f64,
    /// Why it stopped: `signal`, `duration` or `count`.
    pub stopped_by: &'static str,
    /// Client → server, totals over the clients (the link text is the
    /// configured one; release errors pooled).
    pub forward: DirectionReport,
    /// Server → client, totals over the clients.
    pub reverse: DirectionReport,
    /// Per client, in order of first appearance.
    pub clients: Vec<ClientReport>,
    /// The client limit.
    pub max_clients: usize,
    /// Datagrams from clients beyond the limit (discarded).
    pub over_limit: Counter,
    /// Datagrams at an upstream socket from an address other than the
    /// server (discarded).
    pub unknown_source: Counter,
    /// Datagrams from the server at the listening socket (the server
    /// answers the upstream sockets; discarded).
    pub server_at_listen: Counter,
}

/// 1 µs buckets up to this many µs; beyond, only the count and the max.
const HIST_US: usize = 50_000;

struct Histogram {
    buckets: Vec<u64>,
    over: u64,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

impl Histogram {
    fn new() -> Histogram {
        Histogram {
            buckets: Vec::new(),
            over: 0,
            count: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }

    fn record(&mut self, ns: u64) {
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
        let i = (ns / 1000) as usize;
        if i < HIST_US {
            // Grown on demand: release errors are mostly a few µs.
            if i >= self.buckets.len() {
                self.buckets.resize(i + 1, 0);
            }
            self.buckets[i] += 1;
        } else {
            self.over += 1;
        }
    }

    fn merge(&mut self, o: &Histogram) {
        if o.buckets.len() > self.buckets.len() {
            self.buckets.resize(o.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.over += o.over;
        self.count += o.count;
        self.sum_ns += o.sum_ns;
        self.max_ns = self.max_ns.max(o.max_ns);
    }

    /// Upper edge of the bucket holding quantile `q`, in µs (the max when
    /// the quantile lies beyond the buckets).
    fn quantile_us(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b;
            if seen >= rank {
                return ((i + 1) as f64).min(self.max_ns as f64 / 1000.0);
            }
        }
        self.max_ns as f64 / 1000.0
    }

    fn summary(&self) -> ReleaseError {
        if self.count == 0 {
            return ReleaseError::default();
        }
        ReleaseError {
            count: self.count,
            mean_us: self.sum_ns as f64 / self.count as f64 / 1000.0,
            p50_us: self.quantile_us(0.50),
            p99_us: self.quantile_us(0.99),
            p999_us: self.quantile_us(0.999),
            max_us: self.max_ns as f64 / 1000.0,
        }
    }
}

struct Direction {
    held: HeldLink,
    received: Counter,
    sent: Counter,
    errors: Histogram,
}

impl Direction {
    fn new(
        config: &LinkConfig,
        seed: Seed,
        limit: HoldLimit,
        name: &'static str,
    ) -> Result<Direction, EmulateError> {
        let link = Link::try_new(config, seed).map_err(|source| EmulateError::Link {
            direction: name,
            source,
        })?;
        Ok(Direction {
            held: HeldLink::new(link, limit),
            received: Counter::default(),
            sent: Counter::default(),
            errors: Histogram::new(),
        })
    }

    /// Counts a datagram read for this direction and hands it to the link
    /// at `now` (its arrival).
    fn take(&mut self, now: Instant, src: SocketAddr, dst: SocketAddr, payload: Vec<u8>) {
        add(&mut self.received, payload.len());
        self.held.offer(now, Datagram { src, dst, payload });
    }

    fn report(&self) -> DirectionReport {
        DirectionReport {
            link: self.held.link().config().to_netem(),
            received: self.received,
            sent: self.sent,
            link_stats: self.held.link().stats().clone(),
            hold_overflow: self.held.overflow(),
            max_held: self.held.max_held(),
            held_at_exit: self.held.held(),
            release_error: self.errors.summary(),
        }
    }
}

fn add(c: &mut Counter, bytes: usize) {
    c.packets += 1;
    c.bytes += bytes as u64;
}

/// Totals over several directions.
fn total<'a>(dirs: impl Iterator<Item = &'a Direction>, link: String) -> DirectionReport {
    let mut r = DirectionReport {
        link,
        received: Counter::default(),
        sent: Counter::default(),
        link_stats: LinkStats::default(),
        hold_overflow: Counter::default(),
        max_held: 0,
        held_at_exit: 0,
        release_error: ReleaseError::default(),
    };
    let mut errors = Histogram::new();
    for d in dirs {
        r.received.merge(d.received);
        r.sent.merge(d.sent);
        r.link_stats.merge(d.held.link().stats());
        r.hold_overflow.merge(d.held.overflow());
        r.max_held = r.max_held.max(d.held.max_held());
        r.held_at_exit += d.held.held();
        errors.merge(&d.errors);
    }
    r.release_error = errors.summary();
    r
}

/// A forward and a reverse link.
struct LinkPair {
    forward: Direction,
    reverse: Direction,
}

/// One client: its address, upstream socket and links.
struct Client {
    addr: SocketAddr,
    io: UdpIo,
    upstream: SocketAddr,
    /// Index into [`Emulator::links`].
    links: usize,
}

/// A bound emulator, ready to [`run`](Emulator::run).
pub struct Emulator {
    config: EmulatorConfig,
    io: UdpIo,
    listen: SocketAddr,
    clients: Vec<Client>,
    /// One pair per client, or one for all with shared links.
    links: Vec<LinkPair>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("listen", &self.listen)
            .field("to", &self.config.to)
            .finish_non_exhaustive()
    }
}

/// Datagrams read per turn and socket before due releases are looked at again.
const RECV_PER_TURN: usize = 512;
/// Datagrams released per batch send.
const SEND_BATCH: usize = 256;
/// How long before a release the loop stops sleeping and starts polling
/// where there is no precise timer: tokio's timer fires up to 1 ms late,
/// plus wake-up latency.
#[cfg(not(target_os = "linux"))]
const SPIN_MARGIN: Duration = Duration::from_micros(2_000);
/// With the precise timer: releases due this soon are sent now rather than
/// after another wait (a timer cannot usefully wait less).
#[cfg(target_os = "linux")]
const SPIN_MARGIN: Duration = Duration::from_micros(5);

/// Kernel socket buffer asked for, each way (listening socket).
const SOCKET_BUFFER: usize = 8 << 20;
/// Kernel socket buffer of each upstream socket.
const UPSTREAM_BUFFER: usize = 2 << 20;

impl Emulator {
    /// Checks the addresses and links and binds the listening socket.
    /// Must be called inside a tokio runtime.
    pub fn bind(config: EmulatorConfig) -> Result<Emulator, EmulateError> {
        if !config.allow_non_loopback {
            for (what, addr) in [("listen", config.listen), ("to", config.to)] {
                if !addr.ip().is_loopback() {
                    return Err(EmulateError::NotLoopback { what, addr });
                }
            }
        }
        if config.listen == config.to {
            return Err(EmulateError::SameAddress(config.to));
        }
        if config.max_clients == 0 {
            return Err(EmulateError::NoClients);
        }
        // Validate both links now (client 0's), not at the first datagram.
        let seed = Seed(config.seed);
        Direction::new(&config.forward, seed, config.limit, "forward")?;
        Direction::new(&config.reverse, seed, config.limit, "reverse")?;
        let io = UdpIo::bind(config.listen, SOCKET_BUFFER, true).map_err(|source| {
            EmulateError::Bind {
                addr: config.listen,
                source,
            }
        })?;
        let listen = io.local_addr().map_err(|source| EmulateError::Bind {
            addr: config.listen,
            source,
        })?;
        Ok(Emulator {
            config,
            io,
            listen,
            clients: Vec::new(),
            links: Vec::new(),
        })
    }

    /// The bound listening address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listen
    }

    /// A new client's upstream socket, and its links unless shared ones
    /// exist (pushed onto `self.links`).
    fn new_client(&mut self, addr: SocketAddr) -> io::Result<Client> {
        let i = self.clients.len();
        let links = if self.config.shared_links && !self.links.is_empty() {
            0
        } else {
            self.links.push(self.new_links(i)?);
            self.links.len() - 1
        };
        // An ephemeral port on the listening address (same family as the
        // server, since both must be loopback or explicitly allowed).
        let ip = if self.listen.is_ipv4() == self.config.to.is_ipv4() {
            self.listen.ip()
        } else if self.config.to.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        };
        let io = UdpIo::bind(SocketAddr::new(ip, 0), UPSTREAM_BUFFER, true)?;
        let upstream = io.local_addr()?;
        Ok(Client {
            addr,
            io,
            upstream,
            links,
        })
    }

    /// The links of client `i`, drawing from its seeds.
    fn new_links(&self, i: usize) -> io::Result<LinkPair> {
        let seed = Seed(self.config.seed);
        let seed = if i == 0 {
            seed
        } else {
            seed.derive(&format!("client{i}"))
        };
        let link_err = |e: EmulateError| io::Error::other(e.to_string());
        let (forward_seed, reverse_seed) = match self.config.link_seeds {
            Some(seeds) if i == 0 => seeds,
            _ => (seed.derive("forward"), seed.derive("reverse")),
        };
        let forward = Direction::new(
            &self.config.forward,
            forward_seed,
            self.config.limit,
            "forward",
        )
        .map_err(link_err)?;
        let reverse = Direction::new(
            &self.config.reverse,
            reverse_seed,
            self.config.limit,
            "reverse",
        )
        .map_err(link_err)?;
        Ok(LinkPair { forward, reverse })
    }

    /// Relays until `stop` completes, the duration is over, or the count is
    /// reached and drained. Returns the statistics; an `Err` only for a
    /// socket error that leaves a socket unusable.
    pub async fn run(mut self, stop: impl Future<Output = ()>) -> io::Result<EmulatorReport> {
        let clock = Clock::new();
        #[cfg(target_os = "linux")]
        let mut timer = crate::clock::PreciseTimer::new();
        #[cfg(target_os = "linux")]
        if !timer.is_precise() {
            return Err(io::Error::other(
                "no high-resolution timer (timerfd) for the emulator's releases",
            ));
        }
        let to = self.config.to;
        let end = self.config.duration.map(|d| Instant::ZERO + d);
        let count = self.config.count.unwrap_or(u64::MAX);
        let mut rx = RxBuffers::new();
        let mut tx = TxBatch::default();
        let mut back = TxBatch::default();
        let mut due: Vec<(Instant, Datagram)> = Vec::with_capacity(SEND_BATCH);
        let mut back_due: Vec<(usize, Instant, usize)> = Vec::with_capacity(SEND_BATCH);
        let mut by_addr: std::collections::HashMap<SocketAddr, usize> =
            std::collections::HashMap::new();
        let mut over_limit = Counter::default();
        let mut unknown_source = Counter::default();
        let mut server_at_listen = Counter::default();
        let mut offered: u64 = 0;
        let mut draining = false;
        let stopped_by;
        tokio::pin!(stop);
        let mut stop_fired = false;
        let mut new_clients: Vec<SocketAddr> = Vec::new();
        // Datagrams of clients seen for the first time in a batch.
        let mut pending_new: Vec<(SocketAddr, Instant, Vec<u8>)> = Vec::new();

        loop {
            // 1. Read what is queued, bounded per turn: the listening socket
            //    (clients), then every upstream socket (the server).
            let mut read = 0;
            while !draining && read < RECV_PER_TURN {
                // Each datagram is stamped once its read has returned (the
                // first call of the callback per batch), never before: a
                // stamp taken before the read could precede the arrival of
                // what the read returns by however long the thread waited
                // in between, and release it early.
                let mut stamp: Option<Instant> = None;
                new_clients.clear();
                let (clients, links) = (&self.clients, &mut self.links);
                let n = self.io.try_recv(&mut rx, |src, payload| {
                    let now = *stamp.get_or_insert_with(|| clock.now());
                    if offered >= count {
                        return;
                    }
                    if src == to {
                        add(&mut server_at_listen, payload.len());
                        return;
                    }
                    let Some(&i) = by_addr.get(&src) else {
                        // Created after this batch (sockets cannot be
                        // bound inside the callback); the datagram waits
                        // for nothing: it is offered below.
                        if by_addr.len() + new_clients.len() < self.config.max_clients
                            || new_clients.contains(&src)
                        {
                            if !new_clients.contains(&src) {
                                new_clients.push(src);
                            }
                            pending_new.push((src, now, payload.to_vec()));
                        } else {
                            add(&mut over_limit, payload.len());
                        }
                        return;
                    };
                    offered += 1;
                    links[clients[i].links]
                        .forward
                        .take(now, src, to, payload.to_vec());
                })?;
                for addr in new_clients.drain(..) {
                    let c = self.new_client(addr)?;
                    by_addr.insert(addr, self.clients.len());
                    self.clients.push(c);
                }
                for (src, now, payload) in pending_new.drain(..) {
                    if offered >= count {
                        break;
                    }
                    offered += 1;
                    self.links[self.clients[by_addr[&src]].links]
                        .forward
                        .take(now, src, to, payload);
                }
                let mut up = 0;
                for c in &self.clients {
                    let (addr, rev) = (c.addr, &mut self.links[c.links].reverse);
                    let mut stamp: Option<Instant> = None;
                    up += c.io.try_recv(&mut rx, |src, payload| {
                        let now = *stamp.get_or_insert_with(|| clock.now());
                        if offered >= count {
                            return;
                        }
                        if src != to {
                            add(&mut unknown_source, payload.len());
                            return;
                        }
                        offered += 1;
                        rev.take(now, src, addr, payload.to_vec());
                    })?;
                }
                read += n + up;
                if n + up == 0 {
                    break;
                }
            }
            if offered >= count {
                draining = true;
            }

            // 2. Send everything due, in batches: forward copies from each
            //    client's upstream socket, reverse copies from the
            //    listening socket.
            //    A shared link's batch goes out in runs of one client's
            //    datagrams, in release order.
            let mut now = clock.now();
            for link in &mut self.links {
                loop {
                    due.clear();
                    link.forward.held.release_due(now, SEND_BATCH, &mut due);
                    if due.is_empty() {
                        break;
                    }
                    let mut from = 0;
                    while from < due.len() {
                        let src = due[from].1.src;
                        let upto = due[from..]
                            .iter()
                            .position(|(_, d)| d.src != src)
                            .map_or(due.len(), |k| from + k);
                        tx.clear();
                        for (_, d) in &due[from..upto] {
                            tx.push(d.dst, &d.payload);
                        }
                        let sent_at = clock.now();
                        // Every datagram in a link came from a known client.
                        if let Some(&i) = by_addr.get(&src) {
                            self.clients[i].io.send(&tx).await?;
                        }
                        for (scheduled, d) in &due[from..upto] {
                            add(&mut link.forward.sent, d.payload.len());
                            link.forward
                                .errors
                                .record(sent_at.saturating_duration_since(*scheduled).as_nanos());
                        }
                        from = upto;
                    }
                    now = clock.now();
                }
            }
            loop {
                back.clear();
                back_due.clear();
                for (i, link) in self.links.iter_mut().enumerate() {
                    due.clear();
                    link.reverse
                        .held
                        .release_due(now, SEND_BATCH - back.len(), &mut due);
                    for (scheduled, d) in due.drain(..) {
                        back.push(d.dst, &d.payload);
                        back_due.push((i, scheduled, d.payload.len()));
                    }
                    if back.len() >= SEND_BATCH {
                        break;
                    }
                }
                if back.is_empty() {
                    break;
                }
                let sent_at = clock.now();
                self.io.send(&back).await?;
                for &(i, scheduled, len) in &back_due {
                    let r = &mut self.links[i].reverse;
                    add(&mut r.sent, len);
                    r.errors
                        .record(sent_at.saturating_duration_since(scheduled).as_nanos());
                }
                now = clock.now();
            }

            // 3. Stop?
            if stop_fired {
                stopped_by = "signal";
                break;
            }
            if end.is_some_and(|e| now >= e) {
                stopped_by = "duration";
                break;
            }
            let next = self
                .links
                .iter()
                .flat_map(|l| [l.forward.held.next_release(), l.reverse.held.next_release()])
                .flatten()
                .min();
            if draining && next.is_none() {
                stopped_by = "count";
                break;
            }

            // 4. Wait: poll near a release (always, when busy polling),
            //    sleep otherwise.
            let wake = match (next, end) {
                (Some(n), Some(e)) => Some(n.min(e)),
                (n, e) => n.or(e),
            };
            let poll = self.config.busy_poll
                || wake.is_some_and(|w| w.saturating_duration_since(now) <= SPIN_MARGIN);
            match wake {
                _ if poll => {
                    // Poll without sleeping; yielding to the runtime also
                    // lets it look at signals and other tasks.
                    tokio::select! {
                        biased;
                        () = &mut stop => stop_fired = true,
                        () = tokio::task::yield_now() => {}
                    }
                }
                _ => {
                    #[cfg(target_os = "linux")]
                    let sleep = async {
                        match wake {
                            Some(w) => timer.sleep_until(clock.to_std(w)).await,
                            None => std::future::pending().await,
                        }
                    };
                    #[cfg(not(target_os = "linux"))]
                    let sleep = async {
                        let sleep_until = wake.map(|w| w.saturating_sub(SPIN_MARGIN));
                        match sleep_until {
                            Some(t) => tokio::time::sleep_until(clock.to_std(t).into()).await,
                            None => std::future::pending().await,
                        }
                    };
                    let clients = &self.clients;
                    let upstream = std::future::poll_fn(|cx| {
                        for c in clients {
                            if let std::task::Poll::Ready(r) = c.io.poll_readable(cx) {
                                return std::task::Poll::Ready(r);
                            }
                        }
                        std::task::Poll::Pending
                    });
                    tokio::select! {
                        biased;
                        () = &mut stop => stop_fired = true,
                        r = self.io.readable(), if !draining => r?,
                        r = upstream, if !draining => r?,
                        () = sleep => {}
                    }
                }
            }
        }

        let elapsed = clock.now().since_epoch();
        let clients: Vec<ClientReport> = self
            .clients
            .iter()
            .enumerate()
            .map(|(index, c)| ClientReport {
                index,
                links: c.links,
                addr: c.addr,
                upstream: c.upstream,
                forward: self.links[c.links].forward.report(),
                reverse: self.links[c.links].reverse.report(),
            })
            .collect();
        Ok(EmulatorReport {
            listen: self.listen,
            to,
            client: self.clients.first().map(|c| c.addr),
            seed: self.config.seed,
            elapsed_s: elapsed.as_secs_f64(),
            stopped_by,
            forward: total(
                self.links.iter().map(|l| &l.forward),
                self.config.forward.to_netem(),
            ),
            reverse: total(
                self.links.iter().map(|l| &l.reverse),
                self.config.reverse.to_netem(),
            ),
            clients,
            max_clients: self.config.max_clients,
            over_limit,
            unknown_source,
            server_at_listen,
        })
    }
}
