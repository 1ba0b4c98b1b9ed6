//! A real-time UDP link emulator: a relay between one client and one
//! server that applies the `thinstream-link` stages (the same model and the
//! same netem-like link strings as the simulator's scenario files) in each
//! direction. This is what `thinstream emulate` runs.
//!
//! One UDP socket listens. The first datagram from a source other than the
//! server defines the client; the client's datagrams go through the forward
//! link to the server, the server's datagrams (to the listening socket) go
//! through the reverse link back to the client. The server sees the
//! emulator's listening address as its peer, so there is one client per
//! emulator (datagrams from any third address are counted and discarded).
//!
//! Timing: each direction is a [`HeldLink`], a heap of release times. The
//! loop sleeps with tokio (1 ms timer resolution) until shortly before the
//! next release, then polls the socket and the clock without sleeping until
//! the release is due, so datagrams leave within a few microseconds of their
//! scheduled time on an idle machine. Everything due in one turn is sent as
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

/// Everything the emulator did, for printing and `--json`.
#[derive(Clone, Debug, Serialize)]
pub struct EmulatorReport {
    /// The bound listening address.
    pub listen: SocketAddr,
    /// The server.
    pub to: SocketAddr,
    /// The client, once one sent something.
    pub client: Option<SocketAddr>,
    /// The run seed.
    pub seed: u64,
    /// Wall time from start to stop, seconds.
    pub elapsed_s: f64,
    /// Why it stopped: `signal`, `duration` or `count`.
    pub stopped_by: &'static str,
    /// Client → server.
    pub forward: DirectionReport,
    /// Server → client.
    pub reverse: DirectionReport,
    /// Datagrams from neither the client nor the server (discarded).
    pub unknown_source: Counter,
    /// Datagrams from the server before any client was known (discarded).
    pub before_client: Counter,
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
            buckets: vec![0; HIST_US],
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
        match self.buckets.get_mut((ns / 1000) as usize) {
            Some(b) => *b += 1,
            None => self.over += 1,
        }
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

/// A bound emulator, ready to [`run`](Emulator::run).
pub struct Emulator {
    config: EmulatorConfig,
    io: UdpIo,
    listen: SocketAddr,
    forward: Direction,
    reverse: Direction,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("listen", &self.listen)
            .field("to", &self.config.to)
            .finish_non_exhaustive()
    }
}

/// Datagrams read per turn before due releases are looked at again.
const RECV_PER_TURN: usize = 512;
/// Datagrams released per batch send.
const SEND_BATCH: usize = 256;
/// How long before a release the loop stops sleeping and starts polling:
/// tokio's timer fires up to 1 ms late, plus wake-up latency.
const SPIN_MARGIN: Duration = Duration::from_micros(2_000);
/// Kernel socket buffer asked for, each way.
const SOCKET_BUFFER: usize = 8 << 20;

impl Emulator {
    /// Checks the addresses, builds the links and binds the listening
    /// socket. Must be called inside a tokio runtime.
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
        let seed = Seed(config.seed);
        let forward = Direction::new(
            &config.forward,
            seed.derive("forward"),
            config.limit,
            "forward",
        )?;
        let reverse = Direction::new(
            &config.reverse,
            seed.derive("reverse"),
            config.limit,
            "reverse",
        )?;
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
            forward,
            reverse,
        })
    }

    /// The bound listening address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listen
    }

    /// Relays until `stop` completes, the duration is over, or the count is
    /// reached and drained. Returns the statistics; an `Err` only for a
    /// socket error that leaves the socket unusable.
    pub async fn run(mut self, stop: impl Future<Output = ()>) -> io::Result<EmulatorReport> {
        let clock = Clock::new();
        let to = self.config.to;
        let end = self.config.duration.map(|d| Instant::ZERO + d);
        let count = self.config.count.unwrap_or(u64::MAX);
        let mut rx = RxBuffers::new();
        let mut tx = TxBatch::default();
        let mut due: Vec<(Instant, Datagram)> = Vec::with_capacity(SEND_BATCH);
        let mut client: Option<SocketAddr> = None;
        let mut unknown_source = Counter::default();
        let mut before_client = Counter::default();
        let mut offered: u64 = 0;
        let mut draining = false;
        let stopped_by;
        tokio::pin!(stop);
        let mut stop_fired = false;

        loop {
            // 1. Read what is queued, bounded per turn.
            let mut read = 0;
            while !draining && read < RECV_PER_TURN {
                let now = clock.now();
                let (fwd, rev) = (&mut self.forward, &mut self.reverse);
                let n = self.io.try_recv(&mut rx, |src, payload| {
                    if offered >= count {
                        return;
                    }
                    if src == to {
                        match client {
                            Some(c) => {
                                add(&mut rev.received, payload.len());
                                offered += 1;
                                rev.held.offer(
                                    now,
                                    Datagram {
                                        src,
                                        dst: c,
                                        payload: payload.to_vec(),
                                    },
                                );
                            }
                            None => add(&mut before_client, payload.len()),
                        }
                        return;
                    }
                    let c = *client.get_or_insert(src);
                    if src != c {
                        add(&mut unknown_source, payload.len());
                        return;
                    }
                    add(&mut fwd.received, payload.len());
                    offered += 1;
                    fwd.held.offer(
                        now,
                        Datagram {
                            src,
                            dst: to,
                            payload: payload.to_vec(),
                        },
                    );
                })?;
                if n == 0 {
                    break;
                }
                read += n;
            }
            if offered >= count {
                draining = true;
            }

            // 2. Send everything due, in batches.
            let mut now = clock.now();
            loop {
                due.clear();
                tx.clear();
                for dir in [&mut self.forward, &mut self.reverse] {
                    dir.held.release_due(now, SEND_BATCH - due.len(), &mut due);
                }
                if due.is_empty() {
                    break;
                }
                for (_, d) in &due {
                    tx.push(d.dst, &d.payload);
                }
                let sent_at = clock.now();
                self.io.send(&tx).await?;
                for (scheduled, d) in &due {
                    let dir = if d.dst == to {
                        &mut self.forward
                    } else {
                        &mut self.reverse
                    };
                    add(&mut dir.sent, d.payload.len());
                    dir.errors
                        .record(sent_at.saturating_duration_since(*scheduled).as_nanos());
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
            let next = [
                self.forward.held.next_release(),
                self.reverse.held.next_release(),
            ]
            .into_iter()
            .flatten()
            .min();
            if draining && next.is_none() {
                stopped_by = "count";
                break;
            }

            // 4. Wait: poll near a release, sleep otherwise.
            let wake = match (next, end) {
                (Some(n), Some(e)) => Some(n.min(e)),
                (n, e) => n.or(e),
            };
            match wake {
                Some(w) if w.saturating_duration_since(now) <= SPIN_MARGIN => {
                    // Poll without sleeping; yielding to the runtime also
                    // lets it look at signals and other tasks.
                    tokio::select! {
                        biased;
                        () = &mut stop => stop_fired = true,
                        () = tokio::task::yield_now() => {}
                    }
                }
                _ => {
                    let sleep_until = wake.map(|w| w.saturating_sub(SPIN_MARGIN));
                    let sleep = async {
                        match sleep_until {
                            Some(t) => tokio::time::sleep_until(clock.to_std(t).into()).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        biased;
                        () = &mut stop => stop_fired = true,
                        r = self.io.readable(), if !draining => r?,
                        () = sleep => {}
                    }
                }
            }
        }

        let elapsed = clock.now().since_epoch();
        Ok(EmulatorReport {
            listen: self.listen,
            to,
            client,
            seed: self.config.seed,
            elapsed_s: elapsed.as_secs_f64(),
            stopped_by,
            forward: self.forward.report(),
            reverse: self.reverse.report(),
            unknown_source,
            before_client,
        })
    }
}
