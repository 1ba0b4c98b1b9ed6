//! `thinstream run FILE --real` for TCP variants: the host kernel's TCP
//! through the link emulator between two network namespaces.
//!
//! A TCP variant names a model of a TCP stack. A real run can only use the
//! stack the host has, so it runs a TCP variant only when the host kernel
//! is the system that variant models: `linux-modern` (current Linux loss
//! recovery, RACK-TLP, Reno congestion control in the model), optionally
//! with `+lt` (the kernel's `TCP_THIN_LINEAR_TIMEOUTS`) or `+nosack` (the
//! namespace's `net.ipv4.tcp_sack = 0`). Every other TCP preset or
//! override models another system (a 2007 kernel, the removed
//! thin-dupack, RDB, ...) and is refused with the reason.
//!
//! One run: [`TunEmulator`] makes namespaces a and b joined by TUN devices
//! and relays between them through the scenario's links (the simulator's
//! link seeds of the run). Every flow is one kernel TCP connection from a
//! to b: a sending thread in namespace a writes the flow's messages at
//! their times (`TCP_NODELAY`, congestion control `reno`), a receiving
//! thread in b reads the byte stream, checks every byte and notes when
//! each read returned. All share one clock with the relay.
//!
//! The trace records the metrics need come from two places, joined by
//! time as the simulator's are:
//! - the applications: `Submitted` (before each write) and `Delivered`
//!   (each read);
//! - the relay's tap (it sees every IP packet where it leaves a side and
//!   where it reaches the other): the sender's `PacketSent` (data units
//!   from the sequence numbers, new or resent), `PacketReceived` and
//!   `Acked` (cumulative ACK and SACK blocks as they reach the sender),
//!   the receiver's `Arrived` (first or duplicate) and `PacketSent` (its
//!   ACKs).
//!
//! What a capture cannot tell: why the kernel resent data. A resend that
//! leaves within [`ACK_CLOCKED`] of an ACK reaching the sender is recorded
//! as `fast-rtx` (the kernel sends those while it processes the ACK),
//! every other resend as `timeout-rtx` (a timer sent it: RTO, tail loss
//! probe or RACK's reordering timer, not told apart). The kernel's RTO,
//! RTT samples and congestion window are not traced at all; results say
//! so in `real.not_measured`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use serde::Serialize;
use thinstream::clock::Clock;
use thinstream::emulate::tun::{TapPoint, TunConfig, TunEmulator, TUN_ADDR_B};
use thinstream_base::trace::{Record, SentData, TxReason, Units};
use thinstream_base::{Duration, Instant};
use thinstream_lab::{Plan, RunSpec, TransportConfig};
use thinstream_link::HoldLimit;
use thinstream_metrics::{AnalysisOptions, AppSend, FlowAnalysis, FlowInput};
use thinstream_tcp::TcpConfig;

use crate::real::{
    fault_on_messages, payload, real_info, run_record, write_records, Analysed, Due, Got, RealFlow,
    WorkerOutput,
};

/// A resend this soon after an ACK reached the sender is taken as sent
/// on that ACK (`fast-rtx`); later ones as sent by a timer.
pub(crate) const ACK_CLOCKED: Duration = Duration::from_millis(2);

/// The first receiving port; flow k listens on `BASE_PORT + k`.
const BASE_PORT: u16 = 5000;

/// The host kernel settings that stand for a TCP variant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct KernelTcp {
    /// `TCP_CONGESTION` of the sending socket.
    pub(crate) congestion: &'static str,
    /// `TCP_THIN_LINEAR_TIMEOUTS` on the sending socket.
    pub(crate) thin_linear_timeouts: bool,
    /// `net.ipv4.tcp_sack` in both namespaces.
    pub(crate) sack: bool,
}

/// The kernel settings for `c`, or why the host kernel is not the system
/// `c` models.
pub(crate) fn kernel_tcp(c: &TcpConfig) -> Result<KernelTcp, String> {
    let mut modern = TcpConfig::linux_modern();
    modern.name.clone_from(&c.name);
    modern.trace = c.trace;
    modern.thin.linear_timeouts = c.thin.linear_timeouts;
    modern.sack = c.sack;
    if modern != *c {
        let ours = serde_json::to_value(c).unwrap_or_default();
        let theirs = serde_json::to_value(&modern).unwrap_or_default();
        let differ: Vec<String> = match (ours.as_object(), theirs.as_object()) {
            (Some(o), Some(t)) => o
                .iter()
                .filter(|(k, v)| t.get(*k) != Some(*v))
                .map(|(k, _)| k.clone())
                .collect(),
            _ => Vec::new(),
        };
        return Err(format!(
            "only `linux-modern` (the system the host kernel is), with `+lt` or `+nosack`, \
             has a kernel counterpart; this one differs in {}",
            if differ.is_empty() {
                "its settings".to_string()
            } else {
                differ.join(", ")
            }
        ));
    }
    Ok(KernelTcp {
        // The model's congestion control is Reno (it does not model CUBIC).
        congestion: "reno",
        thin_linear_timeouts: c.thin.linear_timeouts,
        sack: c.sack,
    })
}

/// Moves the calling thread into the named network namespace (sockets it
/// creates afterwards live there).
fn enter_namespace(name: &str) -> anyhow::Result<()> {
    let path = format!("/run/netns/{name}");
    let f = std::fs::File::open(&path).with_context(|| format!("cannot open {path}"))?;
    rustix::thread::move_into_link_name_space(
        f.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .with_context(|| format!("cannot enter network namespace {name}"))
}

/// Runs `f` on a new thread inside namespace `ns` and waits for it.
fn in_namespace<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        enter_namespace(&ns)?;
        f()
    })
    .join()
    .map_err(|_| anyhow!("a thread in namespace panicked"))?
}

/// Sets a sysctl inside namespace `ns`.
fn sysctl_in(ns: &str, key: &str, value: &str) -> anyhow::Result<()> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    let value = value.to_string();
    let ns_name = ns.to_string();
    in_namespace(ns, move || {
        std::fs::write(&path, &value).with_context(|| format!("cannot set {path} in {ns_name}"))
    })
}

/// Sleeps until `at` on `clock`.
fn sleep_until(clock: &Clock, at: Instant) {
    let now = clock.now();
    if at > now {
        std::thread::sleep(std::time::Duration::from_nanos(
            at.saturating_duration_since(now).as_nanos(),
        ));
    }
}

/// Time left until `deadline`, at least 1 ms (socket timeouts must not be 0).
fn left(clock: &Clock, deadline: Instant) -> std::time::Duration {
    std::time::Duration::from_nanos(
        deadline
            .saturating_duration_since(clock.now())
            .as_nanos()
            .max(1_000_000),
    )
}

/// What a sending application did.
struct SenderApp {
    submitted: Vec<Record>,
    sends: Vec<AppSend>,
    late_ns: Vec<u64>,
    /// The receiver closed after reading everything (its FIN came back).
    peer_closed: bool,
}

/// The sending application of one flow, in namespace a: connects at
/// `start`, writes each message at its time, closes its side, and waits
/// for the receiver's close.
fn send_flow(
    kernel: &KernelTcp,
    to: SocketAddr,
    start: Instant,
    schedule: &[Due],
    clock: Clock,
    deadline: Instant,
) -> anyhow::Result<SenderApp> {
    use socket2::{Domain, Protocol, Socket, Type};
    sleep_until(&clock, start);
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))
        .context("cannot make a TCP socket")?;
    socket.set_tcp_nodelay(true)?;
    socket
        .set_tcp_congestion(kernel.congestion.as_bytes())
        .with_context(|| format!("cannot set TCP_CONGESTION {}", kernel.congestion))?;
    if kernel.thin_linear_timeouts {
        socket
            .set_tcp_thin_linear_timeouts(true)
            .context("cannot set TCP_THIN_LINEAR_TIMEOUTS")?;
    }
    socket
        .connect_timeout(&to.into(), left(&clock, deadline))
        .with_context(|| format!("cannot connect to {to}"))?;
    let mut stream: TcpStream = socket.into();
    let mut app = SenderApp {
        submitted: Vec::with_capacity(schedule.len()),
        sends: Vec::with_capacity(schedule.len()),
        late_ns: Vec::with_capacity(schedule.len()),
        peer_closed: false,
    };
    // Units are sequence numbers relative to the ISN: the SYN is unit 0.
    let mut unit = 1u64;
    for (i, m) in schedule.iter().enumerate() {
        let time = if clock.now() < m.at {
            sleep_until(&clock, m.at);
            let now = clock.now();
            app.late_ns
                .push(now.saturating_duration_since(m.at).as_nanos());
            now
        } else {
            // Due while an earlier write blocked: generated at its time,
            // and the wait is part of its latency (as in the simulator).
            m.at
        };
        let bytes = payload(i as u64, m.bytes as usize);
        app.submitted.push(Record::Submitted {
            time: clock.now(),
            message: i as u64,
            stream: 0,
            bytes: m.bytes,
            unordered: false,
            units: Units::new(unit, unit + u64::from(m.bytes)),
        });
        app.sends.push(AppSend {
            message: i as u64,
            time,
        });
        unit += u64::from(m.bytes);
        stream.set_write_timeout(Some(left(&clock, deadline)))?;
        stream
            .write_all(&bytes)
            .with_context(|| format!("writing message {i}"))?;
    }
    stream.shutdown(std::net::Shutdown::Write)?;
    // The receiver closes once it has read everything: wait for its FIN.
    let mut buf = [0u8; 64];
    loop {
        stream.set_read_timeout(Some(left(&clock, deadline)))?;
        match stream.read(&mut buf) {
            Ok(0) => {
                app.peer_closed = true;
                break;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
        if clock.now() >= deadline {
            break;
        }
    }
    Ok(app)
}

/// What a receiving application read.
struct ReceiverApp {
    got: Got,
    delivered: Vec<Record>,
}

/// The receiving application of one flow, in namespace b: accepts one
/// connection, reads until the sender closes, checks every message's
/// bytes against what the sender wrote, and notes each read.
fn receive_flow(
    listener: TcpListener,
    schedule: &[Due],
    clock: Clock,
    deadline: Instant,
    stop: &AtomicBool,
) -> anyhow::Result<ReceiverApp> {
    let mut app = ReceiverApp {
        got: Got::new(),
        delivered: Vec::new(),
    };
    listener.set_nonblocking(true)?;
    let mut stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if clock.now() >= deadline || stop.load(Ordering::Relaxed) {
                    return Ok(app);
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => return Err(e).context("accepting the connection"),
        }
    };
    stream.set_nonblocking(false)?;
    let mut buf = vec![0u8; 65_536];
    // The message being read, its expected bytes and how many arrived.
    let mut k = 0usize;
    let mut expected: Vec<u8> = schedule
        .first()
        .map_or_else(Vec::new, |m| payload(0, m.bytes as usize));
    let mut at = 0usize;
    let mut intact = true;
    let mut unit = 1u64;
    loop {
        stream.set_read_timeout(Some(std::time::Duration::from_millis(200)))?;
        let n = match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                if clock.now() >= deadline {
                    break;
                }
                continue;
            }
            Err(e) => return Err(e).context("reading"),
        };
        let now = clock.now();
        app.delivered.push(Record::Delivered {
            time: now,
            stream: 0,
            bytes: n as u32,
            unordered: false,
            units: Units::new(unit, unit + n as u64),
        });
        unit += n as u64;
        let mut data = &buf[..n];
        while !data.is_empty() {
            if k >= schedule.len() {
                app.got.push((None, 0, data.len(), false));
                break;
            }
            let take = (expected.len() - at).min(data.len());
            intact &= data[..take] == expected[at..at + take];
            at += take;
            data = &data[take..];
            if at == expected.len() {
                app.got.push((Some(k as u64), 0, expected.len(), intact));
                k += 1;
                at = 0;
                intact = true;
                expected = schedule
                    .get(k)
                    .map_or_else(Vec::new, |m| payload(k as u64, m.bytes as usize));
            }
        }
    }
    // Closing tells the sender everything was read.
    drop(stream);
    Ok(app)
}

/// A half-open unit range set (few ranges: SACK holes of a thin stream).
#[derive(Default)]
struct RangeSet(Vec<(u64, u64)>);

impl RangeSet {
    /// Adds `[s, e)`; returns the parts that were not in the set.
    fn insert(&mut self, s: u64, e: u64) -> Vec<(u64, u64)> {
        if s >= e {
            return Vec::new();
        }
        let mut new = Vec::new();
        let mut pos = s;
        for &(a, b) in &self.0 {
            if b <= pos {
                continue;
            }
            if a >= e {
                break;
            }
            if a > pos {
                new.push((pos, a));
            }
            pos = pos.max(b);
            if pos >= e {
                break;
            }
        }
        if pos < e {
            new.push((pos, e));
        }
        self.0.push((s, e));
        self.0.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.0.len());
        for &(a, b) in &self.0 {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        self.0 = merged;
        new
    }
}

/// The parts of a TCP/IPv4 packet the tap reads.
struct Segment {
    wire_bytes: u32,
    src_port: u16,
    dst_port: u16,
    seq: u32,
    ack: Option<u32>,
    syn: bool,
    payload: u32,
    sack: Vec<(u32, u32)>,
}

/// Parses an IPv4 packet carrying TCP (`None` for anything else).
fn parse(p: &[u8]) -> Option<Segment> {
    if p.len() < 20 || p[0] >> 4 != 4 || p[9] != 6 {
        return None;
    }
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([p[2], p[3]])).min(p.len());
    let t = p.get(ihl..total)?;
    if t.len() < 20 {
        return None;
    }
    let off = usize::from(t[12] >> 4) * 4;
    if off < 20 || off > t.len() {
        return None;
    }
    let flags = t[13];
    let mut sack = Vec::new();
    let mut o = &t[20..off];
    while let Some(&kind) = o.first() {
        match kind {
            0 => break,
            1 => o = &o[1..],
            _ => {
                let len = usize::from(*o.get(1)?);
                if len < 2 || len > o.len() {
                    break;
                }
                if kind == 5 {
                    for b in o[2..len].chunks_exact(8) {
                        sack.push((
                            u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                            u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
                        ));
                    }
                }
                o = &o[len..];
            }
        }
    }
    let word = |i: usize| u32::from_be_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
    Some(Segment {
        wire_bytes: total as u32,
        src_port: u16::from_be_bytes([t[0], t[1]]),
        dst_port: u16::from_be_bytes([t[2], t[3]]),
        seq: word(4),
        ack: (flags & 0x10 != 0).then(|| word(8)),
        syn: flags & 0x02 != 0,
        payload: (t.len() - off) as u32,
        sack,
    })
}

/// One connection as the relay saw it, turned into trace records.
struct FlowTap {
    /// The sender's initial sequence number (from its SYN).
    isn: Option<u32>,
    /// One past the last data unit the flow will write (acknowledgements
    /// of the FIN are not data).
    data_end: u64,
    /// One past the highest data unit sent so far.
    snd_max: u64,
    acked: RangeSet,
    arrived: RangeSet,
    /// When an ACK last reached the sender.
    last_ack: Option<Instant>,
    sender: Vec<Record>,
    receiver: Vec<Record>,
    /// Resends taken as sent on an ACK, and by a timer.
    ack_clocked: u64,
    timer: u64,
}

impl FlowTap {
    fn new(data_end: u64) -> FlowTap {
        FlowTap {
            isn: None,
            data_end,
            snd_max: 1,
            acked: RangeSet::default(),
            arrived: RangeSet::default(),
            last_ack: None,
            sender: Vec::new(),
            receiver: Vec::new(),
            ack_clocked: 0,
            timer: 0,
        }
    }

    fn unit(&self, seq: u32) -> Option<u64> {
        self.isn.map(|isn| u64::from(seq.wrapping_sub(isn)))
    }

    fn data_units(&self, s: &Segment) -> Option<(u64, u64)> {
        let start = self.unit(s.seq)?;
        (s.payload > 0).then(|| (start, start + u64::from(s.payload)))
    }

    fn packet(&mut self, point: TapPoint, t: Instant, s: &Segment) {
        match point {
            TapPoint::FromA => {
                if s.syn && s.ack.is_none() {
                    self.isn = Some(s.seq);
                }
                let mut data = Vec::new();
                if let Some((a, b)) = self.data_units(s) {
                    if a < self.snd_max {
                        let e = b.min(self.snd_max);
                        let on_ack = self
                            .last_ack
                            .is_some_and(|l| t.saturating_duration_since(l) <= ACK_CLOCKED);
                        if on_ack {
                            self.ack_clocked += 1;
                        } else {
                            self.timer += 1;
                        }
                        data.push(SentData {
                            units: Units::new(a, e),
                            bytes: (e - a) as u32,
                            reason: if on_ack {
                                TxReason::FastRetransmit
                            } else {
                                TxReason::TimeoutRetransmit
                            },
                        });
                    }
                    if b > self.snd_max {
                        let n = a.max(self.snd_max);
                        data.push(SentData {
                            units: Units::new(n, b),
                            bytes: (b - n) as u32,
                            reason: TxReason::New,
                        });
                        self.snd_max = b;
                    }
                }
                let control = u16::from(data.is_empty());
                self.sender.push(Record::PacketSent {
                    time: t,
                    wire_bytes: s.wire_bytes,
                    data: data.into(),
                    control,
                });
            }
            TapPoint::ToA => {
                self.sender.push(Record::PacketReceived {
                    time: t,
                    wire_bytes: s.wire_bytes,
                });
                let Some(ack) = s.ack else { return };
                self.last_ack = Some(t);
                let mut ranges = Vec::new();
                if let Some(cum) = self.unit(ack) {
                    ranges.push((1, cum));
                }
                for &(l, r) in &s.sack {
                    if let (Some(a), Some(b)) = (self.unit(l), self.unit(r)) {
                        ranges.push((a, b));
                    }
                }
                for (a, b) in ranges {
                    let (a, b) = (a.max(1), b.min(self.data_end).min(self.snd_max));
                    for (x, y) in self.acked.insert(a, b) {
                        self.sender.push(Record::Acked {
                            time: t,
                            units: Units::new(x, y),
                        });
                    }
                }
            }
            TapPoint::ToB => {
                self.receiver.push(Record::PacketReceived {
                    time: t,
                    wire_bytes: s.wire_bytes,
                });
                let Some((a, b)) = self.data_units(s) else {
                    return;
                };
                let fresh = self.arrived.insert(a, b);
                let mut pos = a;
                for (x, y) in fresh.into_iter().chain(std::iter::once((b, b))) {
                    if x > pos {
                        self.receiver.push(Record::Arrived {
                            time: t,
                            units: Units::new(pos, x),
                            bytes: (x - pos) as u32,
                            duplicate: true,
                        });
                    }
                    if y > x {
                        self.receiver.push(Record::Arrived {
                            time: t,
                            units: Units::new(x, y),
                            bytes: (y - x) as u32,
                            duplicate: false,
                        });
                    }
                    pos = y.max(pos);
                }
            }
            TapPoint::FromB => {
                // A sink sends no data: ACKs (and its SYN-ACK and FIN).
                self.receiver.push(Record::PacketSent {
                    time: t,
                    wire_bytes: s.wire_bytes,
                    data: Default::default(),
                    control: 1,
                });
            }
        }
    }
}

/// Merges records from several sources into time order (stable: a
/// source's own order is kept between equal times).
fn by_time(mut records: Vec<Record>) -> Vec<Record> {
    records.sort_by_key(Record::time);
    records
}

/// One TCP run in real time (the worker's part): namespaces, relay,
/// applications, records, analysis.
pub(crate) fn run(
    plan: &Plan,
    spec: &RunSpec,
    flows: Vec<RealFlow>,
    tag: &str,
    records: Option<&std::path::Path>,
) -> anyhow::Result<WorkerOutput> {
    let wall_start = thinstream_lab::wall::now();
    let ((forward, forward_seed), (reverse, reverse_seed)) =
        thinstream_lab::two_host_links(plan, spec)
            .ok_or_else(|| anyhow!("--real runs two-host scenarios only"))?;
    let kernels: Vec<KernelTcp> = flows
        .iter()
        .map(|f| match &f.config {
            TransportConfig::Tcp(c) => kernel_tcp(c).map_err(|e| anyhow!(e)),
            TransportConfig::Sctp(_) => bail!("an SCTP flow in a TCP run"),
        })
        .collect::<anyhow::Result<_>>()?;
    if kernels.windows(2).any(|w| w[0].sack != w[1].sack) {
        bail!("--real: flows that differ in SACK cannot share the namespaces' tcp_sack");
    }
    let n: u64 = flows.iter().map(|f| f.schedule.len() as u64).sum();
    let stop_at = plan.stop();
    let clock = Clock::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let emulator = rt.block_on(async {
        TunEmulator::setup(TunConfig {
            tag: tag.to_string(),
            forward,
            reverse,
            seed: spec.seed.0,
            limit: HoldLimit::default(),
            duration: None,
            link_seeds: Some((forward_seed, reverse_seed)),
        })
    })?;
    let [na, nb] = emulator.namespaces().clone();
    if kernels.first().is_some_and(|k| !k.sack) {
        for ns in [&na, &nb] {
            sysctl_in(ns, "net.ipv4.tcp_sack", "0")?;
        }
    }
    // Listeners first (in b), so every connect finds its port.
    let mut listeners = Vec::with_capacity(flows.len());
    for k in 0..flows.len() {
        let addr = SocketAddr::V4(SocketAddrV4::new(TUN_ADDR_B, BASE_PORT + k as u16));
        listeners.push(in_namespace(&nb, move || {
            TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))
        })?);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut receivers = Vec::with_capacity(flows.len());
    let mut senders = Vec::with_capacity(flows.len());
    for (k, (f, listener)) in flows.iter().zip(listeners).enumerate() {
        let (schedule, stop) = (f.schedule.clone(), stop.clone());
        receivers.push(std::thread::spawn(move || {
            receive_flow(listener, &schedule, clock, stop_at, &stop)
        }));
        let (schedule, kernel, start) = (f.schedule.clone(), kernels[k].clone(), f.start);
        let na = na.clone();
        let to = SocketAddr::V4(SocketAddrV4::new(TUN_ADDR_B, BASE_PORT + k as u16));
        senders.push(std::thread::spawn(move || {
            enter_namespace(&na)?;
            send_flow(&kernel, to, start, &schedule, clock, stop_at)
        }));
    }
    // The relay, tapped, until every application is done or the window ends.
    let mut taps: HashMap<u16, FlowTap> = flows
        .iter()
        .enumerate()
        .map(|(k, f)| {
            let bytes: u64 = f.schedule.iter().map(|m| u64::from(m.bytes)).sum();
            (BASE_PORT + k as u16, FlowTap::new(1 + bytes))
        })
        .collect();
    let mut tap = |point: TapPoint, t: Instant, p: &[u8]| {
        let Some(s) = parse(p) else { return };
        let port = match point {
            TapPoint::FromA | TapPoint::ToB => s.dst_port,
            TapPoint::FromB | TapPoint::ToA => s.src_port,
        };
        if let Some(f) = taps.get_mut(&port) {
            f.packet(point, t, &s);
        }
    };
    let until_done = async {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let done = senders.iter().all(|h| h.is_finished())
                && receivers.iter().all(|h| h.is_finished());
            if done || clock.now() >= stop_at {
                break;
            }
        }
        // A little longer, so the last ACKs and FINs cross the relay.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    };
    let report = rt.block_on(emulator.run_tapped(clock, &mut tap, until_done))?;
    stop.store(true, Ordering::Relaxed);
    let end = clock.now();

    let mut faults: Vec<String> = Vec::new();
    let options = AnalysisOptions {
        owd: plan.scenario.metrics.owd.0,
        summary_latency: plan.scenario.metrics.latency,
    };
    let kind = plan.scenario.metrics.latency;
    let mut a = Analysed {
        analyses: Vec::new(),
        unmeasured: Vec::new(),
        traced: Vec::new(),
        responses: Vec::new(),
        worst: None,
    };
    let (mut got_total, mut late_ns) = (0u64, Vec::new());
    let (mut ack_clocked, mut timer) = (0u64, 0u64);
    let mut kept: Vec<(String, Vec<Record>)> = Vec::new();
    for (k, (f, (s, r))) in flows
        .iter()
        .zip(senders.into_iter().zip(receivers))
        .enumerate()
    {
        let name = format!("flow {}", f.flow);
        let sender = s
            .join()
            .map_err(|_| anyhow!("{name}: the sending thread panicked"))?;
        let receiver = r
            .join()
            .map_err(|_| anyhow!("{name}: the receiving thread panicked"))?;
        let (submitted, sends) = match sender {
            Ok(app) => {
                if !app.peer_closed {
                    faults.push(format!(
                        "{name}: the receiver had not read everything and closed by the \
                         run's end"
                    ));
                }
                late_ns.extend(app.late_ns);
                (app.submitted, app.sends)
            }
            Err(e) => {
                faults.push(format!("{name}: sending application: {e:#}"));
                (Vec::new(), Vec::new())
            }
        };
        let (got, delivered) = match receiver {
            Ok(app) => (app.got, app.delivered),
            Err(e) => {
                faults.push(format!("{name}: receiving application: {e:#}"));
                (Got::new(), Vec::new())
            }
        };
        got_total += got.len() as u64;
        fault_on_messages(&mut faults, &name, &got, &f.schedule);
        let tap = taps
            .remove(&(BASE_PORT + k as u16))
            .ok_or_else(|| anyhow!("{name}: no tap"))?;
        ack_clocked += tap.ack_clocked;
        timer += tap.timer;
        let mut s_records = tap.sender;
        s_records.extend(submitted);
        let s_records = by_time(s_records);
        let mut r_records = tap.receiver;
        r_records.extend(delivered);
        let r_records = by_time(r_records);
        let analysis = FlowAnalysis::build(
            FlowInput {
                sender: &s_records,
                receiver: Some(&r_records),
                app_sends: f.measured.then_some(&sends[..]),
                duplicate_reports: None,
            },
            options,
        )
        .map_err(|e| anyhow!("metrics of {name}: {e}"))?;
        if records.is_some() {
            kept.push((format!("flow{}.a", f.flow), s_records.clone()));
            kept.push((format!("flow{}.b", f.flow), r_records.clone()));
        }
        if !f.measured {
            a.traced.push((f.entry, false, a.unmeasured.len()));
            a.unmeasured.push(analysis);
            continue;
        }
        if let Some(w) =
            thinstream_lab::worst::slowest(&analysis, kind, &s_records, &r_records, spec.index)
        {
            if a.worst
                .as_ref()
                .is_none_or(|x| x.path.latency_ms < w.path.latency_ms)
            {
                a.worst = Some(w);
            }
        }
        a.traced.push((f.entry, true, a.analyses.len()));
        a.analyses.push(analysis);
    }
    if let Some(path) = records {
        write_records(path, &kept)?;
    }
    let record = run_record(plan, spec, a, end, wall_start, faults)?;
    let mut real = real_info(plan, spec, wall_start, flows.len(), n, got_total, late_ns);
    real.emulator = crate::sched::with_scheduling(serde_json::to_value(&report)?);
    real.kernel_tcp = Some(serde_json::json!({
        "settings": kernels.first(),
        "kernel_release": std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .ok(),
        "retransmissions_on_ack": ack_clocked,
        "retransmissions_by_timer": timer,
        "ack_clocked_within_ms": ACK_CLOCKED.as_secs_f64() * 1e3,
    }));
    Ok(WorkerOutput { record, real })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_set_returns_only_what_is_new() {
        let mut s = RangeSet::default();
        assert_eq!(s.insert(10, 20), vec![(10, 20)]);
        assert_eq!(s.insert(30, 40), vec![(30, 40)]);
        assert_eq!(s.insert(5, 45), vec![(5, 10), (20, 30), (40, 45)]);
        assert_eq!(s.insert(12, 18), Vec::<(u64, u64)>::new());
        assert_eq!(s.0, vec![(5, 45)]);
        assert_eq!(s.insert(7, 7), Vec::<(u64, u64)>::new());
    }

    #[test]
    fn only_linux_modern_with_lt_or_nosack_has_a_kernel_counterpart() {
        let k = kernel_tcp(&TcpConfig::from_profile("linux-modern+lt").unwrap()).unwrap();
        assert!(k.thin_linear_timeouts && k.sack);
        let k = kernel_tcp(&TcpConfig::from_profile("linux-modern+nosack").unwrap()).unwrap();
        assert!(!k.thin_linear_timeouts && !k.sack);
        for p in [
            "linux-2.6.23",
            "newreno",
            "linux-modern+mfr",
            "linux-modern+rdb",
        ] {
            let why = kernel_tcp(&TcpConfig::from_profile(p).unwrap()).unwrap_err();
            assert!(why.contains("differs in"), "{p}: {why}");
        }
    }

    /// A TCP/IPv4 packet with `payload` bytes of data and SACK blocks.
    fn packet(
        sport: u16,
        dport: u16,
        seq: u32,
        ack: Option<u32>,
        flags: u8,
        sack: &[(u32, u32)],
        payload: usize,
    ) -> Vec<u8> {
        let mut opts = Vec::new();
        if !sack.is_empty() {
            opts.extend([1u8, 1, 5, (2 + 8 * sack.len()) as u8]);
            for (l, r) in sack {
                opts.extend(l.to_be_bytes());
                opts.extend(r.to_be_bytes());
            }
        }
        let tcp_len = 20 + opts.len();
        let total = 20 + tcp_len + payload;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[9] = 6;
        let t = &mut p[20..];
        t[0..2].copy_from_slice(&sport.to_be_bytes());
        t[2..4].copy_from_slice(&dport.to_be_bytes());
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        t[8..12].copy_from_slice(&ack.unwrap_or(0).to_be_bytes());
        t[12] = ((tcp_len / 4) as u8) << 4;
        t[13] = flags | if ack.is_some() { 0x10 } else { 0 };
        t[20..20 + opts.len()].copy_from_slice(&opts);
        p
    }

    #[test]
    fn the_tap_turns_a_loss_and_its_resend_into_the_sender_s_and_receiver_s_records() {
        let isn = u32::MAX - 50; // the sequence space wraps inside the flow
        let ms = |m: u64| Instant::ZERO + Duration::from_millis(m);
        let mut f = FlowTap::new(1 + 300);
        let feed =
            |f: &mut FlowTap, point, t, p: Vec<u8>| f.packet(point, t, &parse(&p).expect("parses"));
        feed(
            &mut f,
            TapPoint::FromA,
            ms(0),
            packet(40000, 5000, isn, None, 0x02, &[], 0),
        );
        // Three 100-byte segments; the second is lost on the link.
        for (k, t) in [(0u32, 10), (1, 20), (2, 30)] {
            let seq = isn.wrapping_add(1 + 100 * k);
            feed(
                &mut f,
                TapPoint::FromA,
                ms(t),
                packet(40000, 5000, seq, Some(1), 0x08, &[], 100),
            );
            if k != 1 {
                feed(
                    &mut f,
                    TapPoint::ToB,
                    ms(t + 50),
                    packet(40000, 5000, seq, Some(1), 0x08, &[], 100),
                );
            }
        }
        // The receiver's ACK for the third reports the hole with a SACK.
        let sack = [(isn.wrapping_add(201), isn.wrapping_add(301))];
        feed(
            &mut f,
            TapPoint::FromB,
            ms(80),
            packet(5000, 40000, 7, Some(isn.wrapping_add(101)), 0, &sack, 0),
        );
        feed(
            &mut f,
            TapPoint::ToA,
            ms(130),
            packet(5000, 40000, 7, Some(isn.wrapping_add(101)), 0, &sack, 0),
        );
        // Resent on that ACK, then once more much later by a timer.
        let seq = isn.wrapping_add(101);
        feed(
            &mut f,
            TapPoint::FromA,
            ms(130) + Duration::from_micros(300),
            packet(40000, 5000, seq, Some(1), 0x08, &[], 100),
        );
        feed(
            &mut f,
            TapPoint::FromA,
            ms(400),
            packet(40000, 5000, seq, Some(1), 0x08, &[], 100),
        );
        feed(
            &mut f,
            TapPoint::ToB,
            ms(450),
            packet(40000, 5000, seq, Some(1), 0x08, &[], 100),
        );
        feed(
            &mut f,
            TapPoint::ToB,
            ms(451),
            packet(40000, 5000, seq, Some(1), 0x08, &[], 100),
        );
        let reasons: Vec<(Units, TxReason)> = f
            .sender
            .iter()
            .filter_map(|r| match r {
                Record::PacketSent { data, .. } => data.first().map(|d| (d.units, d.reason)),
                _ => None,
            })
            .collect();
        assert_eq!(
            reasons,
            vec![
                (Units::new(1, 101), TxReason::New),
                (Units::new(101, 201), TxReason::New),
                (Units::new(201, 301), TxReason::New),
                (Units::new(101, 201), TxReason::FastRetransmit),
                (Units::new(101, 201), TxReason::TimeoutRetransmit),
            ]
        );
        let acked: Vec<Units> = f
            .sender
            .iter()
            .filter_map(|r| match r {
                Record::Acked { units, .. } => Some(*units),
                _ => None,
            })
            .collect();
        assert_eq!(acked, vec![Units::new(1, 101), Units::new(201, 301)]);
        let arrived: Vec<(Units, bool)> = f
            .receiver
            .iter()
            .filter_map(|r| match r {
                Record::Arrived {
                    units, duplicate, ..
                } => Some((*units, *duplicate)),
                _ => None,
            })
            .collect();
        assert_eq!(
            arrived,
            vec![
                (Units::new(1, 101), false),
                (Units::new(201, 301), false),
                (Units::new(101, 201), false),
                (Units::new(101, 201), true),
            ]
        );
        assert_eq!((f.ack_clocked, f.timer), (1, 1));
    }
}
