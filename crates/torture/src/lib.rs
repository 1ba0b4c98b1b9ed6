//! Simulation torture for the SCTP core.
//!
//! Each seed describes one complete case: the mechanism presets of both
//! ends (random bases, switches and parameters), the association knobs
//! (path MTU down to 128 bytes, receive and send buffers down to a few KiB,
//! 1..16 streams each way, interleaving, Nagle), 1..3 associations between
//! the two endpoints, a workload per association and direction (thin,
//! bursty or back-to-back; 12 B .. 20 KB messages; ordered and unordered;
//! reliable, timed or limited-retransmission partial reliability), and an
//! adversary on each direction of the path made of the `link` crate's
//! stages (delays 1-300 ms that differ per direction, jitter, loss up to
//! 50 % random or in Gilbert-Elliott bursts, reordering, duplication,
//! corruption, rate limits with small queues, blackouts of several seconds).
//!
//! The run has three phases on virtual time:
//! 1. **safety** (adversary on): after every step every association's
//!    accounting is checked (`Association::check_invariants`: TSN and
//!    queue accounting, flight size, receive window) and cwnd ≥ 1 MTU;
//!    every delivered message must be one that was sent, intact, on its
//!    stream with its ordering flag, delivered once, and in send order
//!    within an ordered stream; no association may fail or restart.
//! 2. **liveness** (the adversary replaced by a clean link with the same
//!    delays): every message that was not given up under partial
//!    reliability is delivered within a bound computed from the case (RTO
//!    ceiling, bytes left, windows), checks still running;
//! 3. **shutdown**: the client closes every association; both ends report
//!    a graceful close within a bound and the endpoints forget them.
//!
//! Same seed, same case, same run: a failure names its seed, and
//! `thinstream torture --from SEED --seeds 1 --verbose` replays it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;
use std::net::SocketAddr;

use thinstream_base::drive::AppEvent;
use thinstream_base::{Datagram, Duration, Instant, Rng, Seed};
use thinstream_link::{Link, LinkConfig};
use thinstream_proto::{AssociationId, Config, Endpoint, SendParams};

/// Which end of the case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    fn index(self) -> usize {
        match self {
            Side::Client => 0,
            Side::Server => 1,
        }
    }
    /// The opposite end.
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// Partial reliability of one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Reliable,
    /// RFC 3758 timed reliability.
    Lifetime(Duration),
    /// RFC 7496 limited retransmissions.
    MaxRetransmissions(u32),
}

/// One message of the workload.
#[derive(Clone, Debug)]
pub struct Planned {
    /// When the application hands it over (it waits in a FIFO while the
    /// association is not up or the send buffer is full).
    pub at: Instant,
    pub from: Side,
    /// Association index (0..associations).
    pub assoc: usize,
    pub stream: u16,
    pub unordered: bool,
    pub size: usize,
    pub policy: Policy,
}

/// Everything a seed decides.
#[derive(Clone, Debug)]
pub struct Case {
    pub seed: u64,
    pub client_preset: String,
    pub server_preset: String,
    pub client: Config,
    pub server: Config,
    /// Adversary on client → server and server → client (link strings).
    pub forward: String,
    pub reverse: String,
    /// The clean links of the liveness phase.
    pub forward_clean: String,
    pub reverse_clean: String,
    pub associations: usize,
    pub plan: Vec<Planned>,
    /// The adversary is replaced by the clean links at this time.
    pub adversary_ends: Instant,
    /// Every reliable message must be delivered this long after that.
    pub liveness_bound: Duration,
    /// The guaranteed pace: one chunk of this many payload bytes per this
    /// long (the shutdown's bound counts what is still queued at its start).
    pub chunk: usize,
    pub chunk_pace: Duration,
    /// Periods (start, end) in which the client's / server's application
    /// reads nothing (its receive window must close, and reopen after).
    pub stalls: [Vec<(Instant, Instant)>; 2],
}

const HEADER: usize = 12;
const MAGIC: u32 = 0x5452_5452;
const CLIENT_ADDR: &str = "10.0.0.1:9899";
const SERVER_ADDR: &str = "10.0.0.2:9899";
const SERVER_PORT: u16 = 5000;

fn pick<'a>(rng: &mut Rng, xs: &[&'a str]) -> &'a str {
    xs[rng.below(xs.len() as u64) as usize]
}

fn uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.next_f64()
}

const BASES: &[&str] = &["rfc", "linux", "lksctp-mod", "thin", "production"];
const SWITCHES: &[&str] = &[
    "lt",
    "minrto",
    "mfr",
    "restart",
    "bfr",
    "rdb",
    "er-byte",
    "er-packet",
    "efr",
    "cc004",
    "stcp",
    "iflag",
    "rtt-karn",
    "rtt-first-ack",
    "rtt-per-sack",
    "ctl-seed",
    "hs-rtt",
    "t3-wait",
    "thin-rate",
    "nodelack",
    "rdb-iat",
    "rdb-always",
    "thin-tcp",
    "all",
];

/// A random preset string and the configuration it parses to (falling
/// back to its base when the combination is refused).
fn preset(rng: &mut Rng) -> (String, Config) {
    let mut spec = pick(rng, BASES).to_string();
    for s in SWITCHES {
        if rng.chance(0.12) {
            spec.push('+');
            spec.push_str(s);
        }
    }
    if rng.chance(0.2) {
        spec += &format!("+frt={}", rng.range_inclusive(1, 4));
    }
    if rng.chance(0.2) {
        spec += &format!("+delack={}", rng.range_inclusive(10, 500));
    }
    if rng.chance(0.2) {
        spec += &format!("+rto-min={}", rng.range_inclusive(10, 1000));
    }
    if rng.chance(0.2) {
        spec += &format!("+rto-max={}", rng.range_inclusive(1000, 60_000));
    }
    if rng.chance(0.1) {
        spec += &format!("+rdb-bytes={}", rng.range_inclusive(200, 1400));
    }
    if rng.chance(0.1) {
        spec += &format!("+thin-limit={}", rng.range_inclusive(1, 8));
    }
    match Config::from_preset(&spec) {
        Ok(c) => (spec, c),
        Err(_) => {
            let base = spec.split('+').next().unwrap_or("rfc").to_string();
            let c = Config::from_preset(&base).unwrap_or_default();
            (format!("{base} (refused: {spec})"), c)
        }
    }
}

/// Knobs beyond the preset, and never giving up on the peer: the
/// adversary may black the path out for longer than any retransmission
/// limit, and torture wants every message through in the end.
fn knobs(rng: &mut Rng, c: &mut Config) {
    c.association_max_retrans = u32::MAX / 2;
    c.max_init_retransmits = u32::MAX / 2;
    c.pmtu = match rng.below(10) {
        0 => 128 + rng.below(200) as usize,
        1 => 576,
        2 => 300 + rng.below(900) as usize,
        _ => 1472,
    };
    c.receive_buffer = match rng.below(8) {
        0 => 4096 + rng.below(8192) as u32,
        1 => 16 * 1024,
        2 => 64 * 1024,
        _ => 256 * 1024,
    };
    c.send_buffer = match rng.below(8) {
        0 => 8 * 1024,
        1 => 64 * 1024,
        _ => 1024 * 1024,
    };
    c.outbound_streams = rng.range_inclusive(1, 16) as u16;
    c.max_inbound_streams = rng.range_inclusive(1, 16) as u16;
    c.interleaving = rng.chance(0.5);
    c.no_delay = !rng.chance(0.2);
    c.heartbeat = !rng.chance(0.1);
}

fn link_string(rng: &mut Rng, delay_ms: u64, outages_until_ms: u64) -> String {
    let mut s = format!("delay {delay_ms}ms");
    if rng.chance(0.2) {
        s += &format!(" {}ms", rng.range_inclusive(1, delay_ms.max(1)));
    }
    match rng.below(10) {
        0..=2 => {}
        3..=6 => s += &format!(" loss {:.2}%", uniform(rng, 0.1, 50.0)),
        _ => {
            s += &format!(
                " loss gemodel {:.1}% {:.1}% {:.1}% {:.1}%",
                uniform(rng, 1.0, 20.0),
                uniform(rng, 10.0, 80.0),
                uniform(rng, 50.0, 100.0),
                uniform(rng, 0.0, 5.0)
            )
        }
    }
    if rng.chance(0.2) {
        s += &format!(" duplicate {:.2}%", uniform(rng, 0.1, 10.0));
    }
    if rng.chance(0.2) {
        s += &format!(" corrupt {:.2}%", uniform(rng, 0.1, 10.0));
    }
    if rng.chance(0.2) {
        s += &format!(
            " reorder {:.1}% gap {}",
            uniform(rng, 1.0, 30.0),
            rng.range_inclusive(1, 5)
        );
    }
    if rng.chance(0.1) {
        s += &format!(
            " rate {}kbit limit {}",
            rng.range_inclusive(64, 10_000),
            rng.range_inclusive(5, 100)
        );
    }
    for _ in 0..rng.below(3) {
        s += &format!(
            " outage {}ms {}ms",
            rng.below(outages_until_ms.max(1)),
            rng.range_inclusive(500, 8000)
        );
    }
    s
}

impl Case {
    /// The case of `seed`.
    pub fn generate(seed: u64) -> Case {
        let mut rng = Seed(seed).derive("torture.case").rng();
        let (client_preset, mut client) = preset(&mut rng);
        let (server_preset, mut server) = preset(&mut rng);
        knobs(&mut rng, &mut client);
        knobs(&mut rng, &mut server);
        // Path MTU probing on a quarter of the ends, from a generator of its
        // own so every other choice of a seed stays what it was.
        let mut probe_rng = Seed(seed).derive("torture.pmtu").rng();
        for c in [&mut client, &mut server] {
            if probe_rng.chance(0.25) {
                c.pmtu_probe_max = Some(c.pmtu + 1 + probe_rng.below(8000) as usize);
            }
        }
        server.local_port = SERVER_PORT;
        let associations = 1 + rng.below(3) as usize;

        // Workload: per association and direction.
        let both_ways = rng.chance(0.5);
        let mut plan = Vec::new();
        let mut last = Instant::ZERO;
        for assoc in 0..associations {
            for from in [Side::Client, Side::Server] {
                if from == Side::Server && !both_ways {
                    continue;
                }
                let (sender, receiver) = match from {
                    Side::Client => (&client, &server),
                    Side::Server => (&server, &client),
                };
                let streams = sender.outbound_streams.min(receiver.max_inbound_streams);
                let pmtu = sender.pmtu.min(receiver.pmtu);
                let count = match rng.below(10) {
                    0 => 300 + rng.below(200),
                    _ => 10 + rng.below(140),
                };
                let unordered_share = [0.0, 0.0, 0.3, 1.0][rng.below(4) as usize];
                let pr_share = [0.0, 0.0, 0.3, 1.0][rng.below(4) as usize];
                let pattern = rng.below(3); // thin, bursty, back to back
                let mean_gap_ms = uniform(&mut rng, 5.0, 300.0);
                let mut t = rng.below(200) as f64;
                for i in 0..count {
                    t += match pattern {
                        0 => rng.exponential(mean_gap_ms),
                        1 if i % 8 == 0 => rng.exponential(mean_gap_ms * 8.0),
                        1 => 0.0,
                        _ => rng.exponential(1.0),
                    };
                    let extra = match rng.below(20) {
                        0 => rng.below(20_000),
                        1..=3 => rng.below(3 * pmtu as u64),
                        _ => rng.below(200),
                    };
                    // A message must fit the sender's buffer (a larger one is
                    // refused, correctly, with `TooLarge`).
                    let size = (HEADER + extra as usize).min(sender.send_buffer);
                    let policy = if rng.chance(pr_share) {
                        if rng.chance(0.5) {
                            Policy::Lifetime(Duration::from_millis(rng.range_inclusive(50, 2000)))
                        } else {
                            Policy::MaxRetransmissions(rng.below(4) as u32)
                        }
                    } else {
                        Policy::Reliable
                    };
                    let at = Instant::from_micros((t * 1000.0) as u64);
                    last = last.max(at);
                    plan.push(Planned {
                        at,
                        from,
                        assoc,
                        stream: rng.below(u64::from(streams.max(1))) as u16,
                        unordered: rng.chance(unordered_share),
                        size,
                        policy,
                    });
                }
            }
        }
        plan.sort_by_key(|p| p.at);

        let (d_fwd, d_rev) = (rng.range_inclusive(1, 300), rng.range_inclusive(1, 300));
        let until = last.as_nanos() / 1_000_000 + 1000;
        let forward = link_string(&mut rng, d_fwd, until);
        let reverse = link_string(&mut rng, d_rev, until);
        let adversary_ends = Instant::from_millis(until + 8000);
        let mut stalls: [Vec<(Instant, Instant)>; 2] = Default::default();
        for side in &mut stalls {
            if rng.chance(0.3) {
                for _ in 0..rng.range_inclusive(1, 3) {
                    let start = Instant::from_millis(rng.below(until));
                    side.push((
                        start,
                        start + Duration::from_millis(rng.range_inclusive(500, 20_000)),
                    ));
                }
            }
        }
        // Bound: the guaranteed pace when a receive buffer is exhausted by
        // pieces waiting for the next TSN in sequence is one chunk per
        // retransmission timeout: that chunk, if it was lost, is resent only
        // by T3 (too few SACKs flow for fast retransmit), and an RTO that
        // the adversary inflated (long samples, e.g. presets that sample
        // retransmitted chunks) may sit at RTO.max long after the path is
        // clean. So: one chunk per max(round trip, RTO.max), plus slack.
        let rto_max = client.rto_max.max(server.rto_max);
        let chunk = client.pmtu.min(server.pmtu).saturating_sub(32).max(16);
        let chunks: u64 = plan.iter().map(|p| p.size.div_ceil(chunk) as u64).sum();
        let round_trip = Duration::from_millis(d_fwd + d_rev + 700);
        let chunk_pace = round_trip.max(rto_max);
        let liveness_bound =
            rto_max.mul_f64(3.0) + Duration::from_secs(60) + chunk_pace.mul_f64(chunks as f64);
        Case {
            seed,
            client_preset,
            server_preset,
            client,
            server,
            forward_clean: format!("delay {d_fwd}ms"),
            reverse_clean: format!("delay {d_rev}ms"),
            forward,
            reverse,
            associations,
            plan,
            adversary_ends,
            liveness_bound,
            chunk,
            chunk_pace,
            stalls,
        }
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let knobs = |c: &Config| {
            format!(
                "pmtu {}{} rcvbuf {} sndbuf {} os/mis {}/{}{}{}{}",
                c.pmtu,
                c.pmtu_probe_max
                    .map(|m| format!(" (probing up to {m})"))
                    .unwrap_or_default(),
                c.receive_buffer,
                c.send_buffer,
                c.outbound_streams,
                c.max_inbound_streams,
                if c.interleaving { " i-data" } else { "" },
                if c.no_delay { "" } else { " nagle" },
                if c.heartbeat { "" } else { " no-heartbeat" },
            )
        };
        let pr = self
            .plan
            .iter()
            .filter(|p| p.policy != Policy::Reliable)
            .count();
        let unordered = self.plan.iter().filter(|p| p.unordered).count();
        let bytes: usize = self.plan.iter().map(|p| p.size).sum();
        writeln!(f, "seed {}", self.seed)?;
        writeln!(
            f,
            "  client: {} ({})",
            self.client_preset,
            knobs(&self.client)
        )?;
        writeln!(
            f,
            "  server: {} ({})",
            self.server_preset,
            knobs(&self.server)
        )?;
        writeln!(f, "  forward: {}", self.forward)?;
        writeln!(f, "  reverse: {}", self.reverse)?;
        for (side, name) in [(0, "client"), (1, "server")] {
            if !self.stalls[side].is_empty() {
                let list: Vec<String> = self.stalls[side]
                    .iter()
                    .map(|(a, b)| format!("{a}..{b}"))
                    .collect();
                writeln!(f, "  {name} reader stalls: {}", list.join(", "))?;
            }
        }
        write!(
            f,
            "  {} association(s), {} messages ({} B, {} unordered, {} partially reliable), adversary until {}, liveness bound {}",
            self.associations,
            self.plan.len(),
            bytes,
            unordered,
            pr,
            self.adversary_ends,
            self.liveness_bound
        )
    }
}

/// Why a case failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub seed: u64,
    pub phase: &'static str,
    pub at: Instant,
    pub what: String,
    /// Every association's state when it failed (for `--verbose`).
    pub detail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {} failed in the {} phase at {}: {} (replay: thinstream torture --from {} --seeds 1 --verbose)",
            self.seed, self.phase, self.at, self.what, self.seed
        )
    }
}

/// What a passing case did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub messages: usize,
    pub delivered: usize,
    /// Partially reliable messages the sender gave up (never delivered).
    pub given_up: usize,
    pub steps: u64,
    pub datagrams: u64,
    /// Virtual time at the end of the shutdown.
    pub ended: Instant,
    /// Steps at which some receive window was shut (0 bytes advertised).
    pub zero_window_steps: u64,
}

fn pattern_byte(seed: u64, id: usize, i: usize) -> u8 {
    let x = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((id as u64) << 20)
        .wrapping_add(i as u64);
    (x ^ (x >> 7) ^ (x >> 13)) as u8
}

fn payload(seed: u64, id: usize, size: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(size);
    v.extend_from_slice(&MAGIC.to_be_bytes());
    v.extend_from_slice(&(id as u32).to_be_bytes());
    v.extend_from_slice(&(size as u32).to_be_bytes());
    v.extend((HEADER..size).map(|i| pattern_byte(seed, id, i)));
    v
}

struct InFlight {
    at: Instant,
    seq: u64,
    to: usize,
    d: Datagram,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Safety,
    Liveness,
    Shutdown,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Safety => "safety",
            Phase::Liveness => "liveness",
            Phase::Shutdown => "shutdown",
        }
    }
}

/// Datagrams remembered for a failure's detail.
const RECENT: usize = 40;

/// A DATA or I-DATA chunk's key fields (B/E/U: beginning, ending, unordered).
fn data_line(
    kind: &str,
    tsn: u32,
    stream: u16,
    seq_name: &str,
    seq: u32,
    (b, e, u): (bool, bool, bool),
    len: usize,
) -> String {
    let flag = |on: bool, c: &'static str| if on { c } else { "" };
    format!(
        "{kind} tsn {tsn} s{stream} {seq_name} {seq} {}{}{} {len}B",
        flag(b, "B"),
        flag(e, "E"),
        flag(u, "U")
    )
}

/// One line about a datagram: its chunks with their key fields.
fn describe(datagram: &[u8]) -> String {
    use thinstream_proto::wire::{Chunk, Packet};
    let Ok(p) = Packet::parse(datagram) else {
        return format!("{} bytes, unparsable", datagram.len());
    };
    let mut parts = vec![format!("{}>{}", p.src_port, p.dst_port)];
    for c in &p.chunks {
        parts.push(match c {
            Chunk::Data(d) => {
                let flags = (d.beginning, d.ending, d.unordered);
                data_line(
                    "DATA",
                    d.tsn.0,
                    d.stream,
                    "ssn",
                    d.ssn.0.into(),
                    flags,
                    d.payload.len(),
                )
            }
            Chunk::IData(d) => {
                let flags = (d.beginning, d.ending, d.unordered);
                data_line(
                    "I-DATA",
                    d.tsn.0,
                    d.stream,
                    "mid",
                    d.mid,
                    flags,
                    d.payload.len(),
                )
            }
            Chunk::Sack(s) => format!(
                "SACK cum {} rwnd {} gaps {:?} dups {}",
                s.cum_tsn_ack.0,
                s.a_rwnd,
                s.gap_blocks
                    .iter()
                    .map(|g| (g.start, g.end))
                    .collect::<Vec<_>>(),
                s.duplicate_tsns.len()
            ),
            Chunk::ForwardTsn(f) => format!("FORWARD-TSN {}", f.new_cum_tsn.0),
            Chunk::IForwardTsn(f) => format!("I-FORWARD-TSN {}", f.new_cum_tsn.0),
            other => format!("{other:?}").chars().take(40).collect(),
        });
    }
    parts.join(" | ")
}

/// Steps after which a case counts as wedged (a livelock spinning at one
/// instant, or a run that never settles).
const MAX_STEPS: u64 = 5_000_000;

struct World<'a> {
    case: &'a Case,
    now: Instant,
    phase: Phase,
    eps: [Endpoint; 2],
    /// Link carrying datagrams sent by side i.
    links: [Link; 2],
    heap: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
    /// Association ids per side and association index.
    ids: [Vec<Option<AssociationId>>; 2],
    established: [Vec<bool>; 2],
    /// Plan indices waiting to be handed over, per side (FIFO).
    backlog: [std::collections::VecDeque<usize>; 2],
    next_plan: usize,
    sent: Vec<bool>,
    delivered: Vec<u32>,
    /// Last delivered plan index per (association, sending side, stream) of
    /// ordered messages.
    last_ordered: BTreeMap<(usize, usize, u16), usize>,
    closed: [Vec<bool>; 2],
    steps: u64,
    zero_window_steps: u64,
    /// The last datagrams sent, described (for a failure's detail).
    recent: std::collections::VecDeque<String>,
    datagrams: u64,
    scratch: Vec<(Instant, Datagram)>,
}

impl<'a> World<'a> {
    fn new(case: &'a Case) -> Result<World<'a>, Failure> {
        let addrs: [SocketAddr; 2] = [
            CLIENT_ADDR.parse().expect("constant address"),
            SERVER_ADDR.parse().expect("constant address"),
        ];
        let seed = Seed(case.seed);
        let link = |text: &str, label: &str| -> Result<Link, Failure> {
            let cfg = LinkConfig::parse_netem(text).map_err(|e| Failure {
                seed: case.seed,
                phase: "setup",
                at: Instant::ZERO,
                what: format!("link {text:?}: {e}"),
                detail: String::new(),
            })?;
            Link::try_new(&cfg, seed.derive(label)).map_err(|e| Failure {
                seed: case.seed,
                phase: "setup",
                at: Instant::ZERO,
                what: format!("link {text:?}: {e}"),
                detail: String::new(),
            })
        };
        let links = [
            link(&case.forward, "torture.forward")?,
            link(&case.reverse, "torture.reverse")?,
        ];
        let n = case.associations;
        let mut eps = [
            Endpoint::new(
                case.client.clone(),
                addrs[0],
                seed.derive("torture.client"),
                false,
            ),
            Endpoint::new(
                case.server.clone(),
                addrs[1],
                seed.derive("torture.server"),
                true,
            ),
        ];
        let mut client_ids = Vec::new();
        for k in 0..n {
            let mut c = case.client.clone();
            c.local_port = SERVER_PORT + 1 + k as u16;
            c.remote_port = SERVER_PORT;
            client_ids.push(Some(eps[0].connect_with(Instant::ZERO, addrs[1], c)));
        }
        Ok(World {
            case,
            now: Instant::ZERO,
            phase: Phase::Safety,
            eps,
            links,
            heap: BinaryHeap::new(),
            seq: 0,
            ids: [client_ids, vec![None; n]],
            established: [vec![false; n], vec![false; n]],
            backlog: Default::default(),
            next_plan: 0,
            sent: vec![false; case.plan.len()],
            delivered: vec![0; case.plan.len()],
            last_ordered: BTreeMap::new(),
            closed: [vec![false; n], vec![false; n]],
            steps: 0,
            zero_window_steps: 0,
            recent: Default::default(),
            datagrams: 0,
            scratch: Vec::new(),
        })
    }

    fn fail(&self, what: String) -> Failure {
        Failure {
            seed: self.case.seed,
            phase: self.phase.name(),
            at: self.now,
            what,
            detail: self.snapshot(),
        }
    }

    /// One line per association: what its sender and receiver hold.
    fn snapshot(&self) -> String {
        let mut out = String::new();
        for (side, name) in [(0, "client"), (1, "server")] {
            let ep = &self.eps[side];
            out += &format!(
                "{name}: next timer {:?}\n",
                ep.poll_timeout().map(|t| t.to_string())
            );
            for id in ep.associations() {
                let Some(a) = ep.association(id) else {
                    continue;
                };
                let cc = a.congestion();
                out += &format!(
                    "  {id:?} {:?} (port {}): cwnd {} ssthresh {} flight {} rto {} srtt {:?} peer_rwnd {} local_rwnd {} buffered {} held {} idle {} thin {}\n",
                    a.state(),
                    a.config().local_port,
                    cc.cwnd,
                    cc.ssthresh,
                    a.flight_size(),
                    a.rto(),
                    a.srtt().map(|d| d.to_string()),
                    a.peer_rwnd(),
                    a.local_rwnd(),
                    a.buffered_send_bytes(),
                    a.held_receive_bytes(),
                    a.is_idle(),
                    a.is_thin(),
                );
            }
        }
        out += "last datagrams sent (before the link):\n";
        for line in &self.recent {
            out += "  ";
            out += line;
            out += "\n";
        }
        out
    }

    /// The association index of `id` on `side`.
    fn index_of(&self, side: usize, id: AssociationId) -> Option<usize> {
        self.ids[side].iter().position(|x| *x == Some(id))
    }

    fn next_time(&self) -> Option<Instant> {
        let mut t = self.heap.peek().map(|Reverse(f)| f.at);
        let mut consider = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t: Instant| t.min(x)));
            }
        };
        consider(self.eps[0].poll_timeout());
        consider(self.eps[1].poll_timeout());
        consider(self.case.plan.get(self.next_plan).map(|p| p.at));
        if self.phase == Phase::Safety {
            consider(Some(self.case.adversary_ends));
        }
        for side in &self.case.stalls {
            consider(side.iter().map(|&(_, b)| b).filter(|&b| b > self.now).min());
        }
        t
    }

    fn flush(&mut self) {
        for side in 0..2 {
            while let Some(d) = self.eps[side].poll_transmit(self.now) {
                self.datagrams += 1;
                if self.recent.len() >= RECENT {
                    self.recent.pop_front();
                }
                self.recent.push_back(format!(
                    "{} {}: {}",
                    self.now,
                    ["c>s", "s>c"][side],
                    describe(&d.payload)
                ));
                self.scratch.clear();
                self.links[side].send(self.now, d, &mut self.scratch);
                for (at, d) in self.scratch.drain(..) {
                    self.seq += 1;
                    self.heap.push(Reverse(InFlight {
                        at,
                        seq: self.seq,
                        to: 1 - side,
                        d,
                    }));
                }
            }
        }
    }

    fn try_sends(&mut self) -> Result<(), Failure> {
        for side in 0..2 {
            while let Some(&i) = self.backlog[side].front() {
                let p = &self.case.plan[i];
                if !self.established[side][p.assoc] {
                    break;
                }
                let Some(id) = self.ids[side][p.assoc] else {
                    break;
                };
                let params = SendParams {
                    stream: p.stream,
                    unordered: p.unordered,
                    ppid: i as u32,
                    lifetime: match p.policy {
                        Policy::Lifetime(d) => Some(d),
                        _ => None,
                    },
                    max_retransmissions: match p.policy {
                        Policy::MaxRetransmissions(n) => Some(n),
                        _ => None,
                    },
                };
                let body = payload(self.case.seed, i, p.size);
                match self.eps[side].send_with(self.now, id, &params, &body) {
                    Ok(_) => {
                        self.sent[i] = true;
                        self.backlog[side].pop_front();
                    }
                    Err(thinstream_base::drive::SendError::BufferFull) => break,
                    Err(e) => return Err(self.fail(format!("send of message {i} refused: {e:?}"))),
                }
            }
        }
        Ok(())
    }

    fn check_message(
        &mut self,
        side: usize,
        assoc: usize,
        stream: u16,
        unordered: bool,
        ppid: u32,
        data: &[u8],
    ) -> Result<(), Failure> {
        if data.len() < HEADER || data[0..4] != MAGIC.to_be_bytes() {
            return Err(self.fail(format!(
                "a {}-byte message that was never sent arrived",
                data.len()
            )));
        }
        let id = u32::from_be_bytes([data[4], data[5], data[6], data[7]]) as usize;
        let Some(p) = self.case.plan.get(id) else {
            return Err(self.fail(format!("message id {id} was never planned")));
        };
        if !self.sent[id] {
            return Err(self.fail(format!("message {id} arrived before it was sent")));
        }
        if p.from.index() == side || p.assoc != assoc {
            return Err(self.fail(format!(
                "message {id} arrived on the wrong association or side"
            )));
        }
        if data.len() != p.size || data != payload(self.case.seed, id, p.size).as_slice() {
            return Err(self.fail(format!(
                "message {id} corrupted ({} bytes, sent {})",
                data.len(),
                p.size
            )));
        }
        if stream != p.stream || unordered != p.unordered || ppid != id as u32 {
            return Err(self.fail(format!(
                "message {id} arrived with stream {stream} unordered {unordered} ppid {ppid}, sent with {} {} {id}",
                p.stream, p.unordered
            )));
        }
        self.delivered[id] += 1;
        if self.delivered[id] > 1 {
            return Err(self.fail(format!("message {id} delivered twice")));
        }
        if !unordered {
            let key = (assoc, p.from.index(), stream);
            if let Some(&last) = self.last_ordered.get(&key) {
                if last > id {
                    return Err(self.fail(format!(
                        "ordered stream {stream}: message {id} delivered after {last}"
                    )));
                }
            }
            self.last_ordered.insert(key, id);
        }
        Ok(())
    }

    fn drain_events(&mut self) -> Result<(), Failure> {
        for side in 0..2 {
            let now = self.now;
            let stalled = self.case.stalls[side]
                .iter()
                .any(|&(a, b)| a <= now && now < b);
            while let Some((id, ev)) = self.eps[side].poll_event_unless(|_| stalled) {
                let k = match self.index_of(side, id) {
                    Some(k) => k,
                    None => {
                        // A new association at the server: which client
                        // association is it (by its SCTP port)?
                        let port = self.eps[side]
                            .association(id)
                            .map(|a| a.peer_port())
                            .unwrap_or(0);
                        let k = usize::from(port.wrapping_sub(SERVER_PORT + 1));
                        if side != 1 || k >= self.case.associations || self.ids[1][k].is_some() {
                            return Err(self.fail(format!(
                                "unexpected association {id:?} on the {} (peer port {port}): {ev:?}",
                                if side == 0 { "client" } else { "server" }
                            )));
                        }
                        self.ids[1][k] = Some(id);
                        k
                    }
                };
                match ev {
                    AppEvent::Established => self.established[side][k] = true,
                    AppEvent::Received {
                        stream,
                        unordered,
                        ppid,
                        payload,
                    } => self.check_message(side, k, stream, unordered, ppid, &payload)?,
                    AppEvent::Writable => {}
                    AppEvent::PeerRestarted => {
                        return Err(self.fail(format!("association {k} saw a peer restart")))
                    }
                    AppEvent::Closed { error } => {
                        if self.phase != Phase::Shutdown || error.is_some() {
                            return Err(self.fail(format!(
                                "association {k} closed on the {}: {}",
                                if side == 0 { "client" } else { "server" },
                                error.as_deref().unwrap_or("graceful")
                            )));
                        }
                        self.closed[side][k] = true;
                    }
                }
            }
        }
        Ok(())
    }

    fn check_invariants(&mut self) -> Result<(), Failure> {
        let mut shut = false;
        for side in 0..2 {
            for id in self.eps[side].associations() {
                let Some(a) = self.eps[side].association(id) else {
                    continue;
                };
                if let Err(e) = a.check_invariants() {
                    return Err(self.fail(format!("association {id:?}: {e}")));
                }
                shut |= a.local_rwnd() == 0;
                let cc = a.congestion();
                if cc.cwnd < cc.mtu {
                    return Err(self.fail(format!(
                        "association {id:?}: cwnd {} below one MTU ({})",
                        cc.cwnd, cc.mtu
                    )));
                }
            }
        }
        self.zero_window_steps += u64::from(shut);
        Ok(())
    }

    /// Reliable messages not delivered yet.
    fn missing(&self) -> Vec<usize> {
        (0..self.case.plan.len())
            .filter(|&i| self.case.plan[i].policy == Policy::Reliable && self.delivered[i] == 0)
            .collect()
    }

    fn step(&mut self) -> Result<bool, Failure> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(self.fail(format!("no end after {MAX_STEPS} steps (wedged)")));
        }
        let Some(t) = self.next_time() else {
            return Ok(false);
        };
        self.now = self.now.max(t);
        if self.phase == Phase::Safety && self.now >= self.case.adversary_ends {
            self.phase = Phase::Liveness;
            let seed = Seed(self.case.seed);
            for (i, text) in [&self.case.forward_clean, &self.case.reverse_clean]
                .into_iter()
                .enumerate()
            {
                let cfg = LinkConfig::parse_netem(text)
                    .map_err(|e| self.fail(format!("clean link {text:?}: {e}")))?;
                self.links[i] = Link::new(&cfg, seed.derive(&format!("torture.clean{i}")));
            }
        }
        while self.heap.peek().is_some_and(|Reverse(f)| f.at <= self.now) {
            let Some(Reverse(f)) = self.heap.pop() else {
                break;
            };
            self.eps[f.to].handle_datagram(self.now, f.d);
        }
        for side in 0..2 {
            if self.eps[side].poll_timeout().is_some_and(|t| t <= self.now) {
                self.eps[side].handle_timeout(self.now);
            }
        }
        while let Some(p) = self.case.plan.get(self.next_plan) {
            if p.at > self.now {
                break;
            }
            self.backlog[p.from.index()].push_back(self.next_plan);
            self.next_plan += 1;
        }
        for _ in 0..2 {
            self.drain_events()?;
            self.try_sends()?;
            self.flush();
        }
        self.drain_events()?;
        self.check_invariants()?;
        Ok(true)
    }

    fn run(mut self) -> Result<Summary, Failure> {
        // Safety phase, then liveness until everything reliable arrived.
        let live_deadline = self.case.adversary_ends + self.case.liveness_bound;
        loop {
            let more = self.step()?;
            let done = self.phase == Phase::Liveness
                && self.next_plan == self.case.plan.len()
                && self.backlog.iter().all(|b| b.is_empty())
                && self.missing().is_empty();
            if done {
                break;
            }
            if !more || self.now > live_deadline {
                let missing = self.missing();
                return Err(self.fail(format!(
                    "{} reliable message(s) not delivered by {} (first: {:?}; {} still waiting to be handed over)",
                    missing.len(),
                    live_deadline,
                    &missing[..missing.len().min(5)],
                    self.backlog.iter().map(|b| b.len()).sum::<usize>()
                )));
            }
        }
        // Shutdown: the client closes every association.
        self.phase = Phase::Shutdown;
        for k in 0..self.case.associations {
            if let Some(id) = self.ids[0][k] {
                self.eps[0].close(self.now, id);
            }
        }
        // Partially reliable messages still queued (a retransmission limit
        // does not expire while unsent) go out before the SHUTDOWN
        // exchange completes: count them at the guaranteed pace.
        let queued: u64 = (0..2)
            .flat_map(|side| {
                let ep = &self.eps[side];
                ep.associations()
                    .filter_map(|id| ep.association(id))
                    .map(|a| a.buffered_send_bytes().div_ceil(self.case.chunk) as u64 + 1)
                    .collect::<Vec<_>>()
            })
            .sum();
        let rto_max = self.case.client.rto_max.max(self.case.server.rto_max);
        let close_deadline = self.now
            + rto_max.mul_f64(3.0)
            + Duration::from_secs(30)
            + self.case.chunk_pace.mul_f64(queued as f64);
        loop {
            let more = self.step()?;
            let all_closed = self.closed.iter().all(|s| s.iter().all(|c| *c));
            if all_closed
                && self.eps[0].associations().next().is_none()
                && self.eps[1].associations().next().is_none()
            {
                break;
            }
            if !more || self.now > close_deadline {
                return Err(self.fail(format!(
                    "shutdown incomplete by {close_deadline}: closed client {:?} server {:?}, {} + {} associations left",
                    self.closed[0],
                    self.closed[1],
                    self.eps[0].associations().count(),
                    self.eps[1].associations().count()
                )));
            }
        }
        let delivered = self.delivered.iter().filter(|d| **d > 0).count();
        Ok(Summary {
            messages: self.case.plan.len(),
            delivered,
            given_up: self.case.plan.len() - delivered,
            steps: self.steps,
            datagrams: self.datagrams,
            ended: self.now,
            zero_window_steps: self.zero_window_steps,
        })
    }
}

/// Run the case of `seed`.
pub fn run_seed(seed: u64) -> Result<Summary, Failure> {
    let case = Case::generate(seed);
    run_case(&case)
}

/// Run one case.
pub fn run_case(case: &Case) -> Result<Summary, Failure> {
    World::new(case)?.run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_case_and_outcome() {
        for seed in 0..20 {
            let (a, b) = (Case::generate(seed), Case::generate(seed));
            assert_eq!(a.to_string(), b.to_string());
            assert_eq!(run_case(&a), run_case(&b));
        }
    }

    #[test]
    fn generated_links_parse() {
        for seed in 0..500 {
            let c = Case::generate(seed);
            for text in [&c.forward, &c.reverse, &c.forward_clean, &c.reverse_clean] {
                LinkConfig::parse_netem(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            }
        }
    }

    #[test]
    fn a_corrupted_delivery_is_caught() {
        // The checker itself must be able to fail: feed it a message whose
        // body differs from what was sent.
        let case = Case::generate(7);
        let mut w = World::new(&case).expect("world");
        let i = 0;
        w.sent[i] = true;
        let p = case.plan[i].clone();
        let mut body = payload(case.seed, i, p.size);
        let last = body.len() - 1;
        body[last] ^= 1;
        let side = p.from.other().index();
        let r = w.check_message(side, p.assoc, p.stream, p.unordered, i as u32, &body);
        if p.size > HEADER {
            assert!(r.is_err_and(|f| f.what.contains("corrupted")));
        }
        // And a second, intact delivery after a first is a duplicate.
        let body = payload(case.seed, i, p.size);
        let first = w.check_message(side, p.assoc, p.stream, p.unordered, i as u32, &body);
        assert!(first.is_ok());
        let again = w.check_message(side, p.assoc, p.stream, p.unordered, i as u32, &body);
        assert!(again.is_err_and(|f| f.what.contains("twice")));
    }
}
