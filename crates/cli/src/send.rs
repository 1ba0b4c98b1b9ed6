//! `thinstream send`: a thin stream of messages to a listener, with a
//! latency report. Exits non-zero if anything was lost, corrupted, or the
//! association failed.

#![allow(
    clippy::disallowed_methods,
    reason = "a tool on real sockets times messages with the OS clock"
)]

use anyhow::Context;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::process::ExitCode;
use thinstream::trace::Record;
use thinstream::TransportConfig as Config;
use thinstream::{
    AssociationConfig, AssociationError, Endpoint, EndpointConfig, SendError, SendOptions,
};
use thinstream_base::{Duration, Seed};
use thinstream_metrics::{
    AnalysisOptions, DuplicateReport, FlowAnalysis, FlowInput, LatencyKind, LatencyStats,
    OwdCorrection,
};

use crate::util::{parse_duration, parse_size, SizeSpec};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The listener's UDP address (SCTP over UDP, RFC 6951).
    #[arg(long)]
    to: SocketAddr,
    /// Number of messages to send.
    #[arg(long, default_value_t = 100)]
    count: u64,
    /// Message size in bytes: `N`, or `MIN..MAX` drawn per message from the seed.
    #[arg(long, default_value = "100", value_parser = parse_size)]
    size: SizeSpec,
    /// Time between messages (`250ms`, `1s`, `0` for back to back).
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    interval: Duration,
    /// Spread messages round robin over this many streams.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    streams: u16,
    /// Send unordered messages (U bit).
    #[arg(long)]
    unordered: bool,
    /// Expect every message back (from `thinstream listen --echo` or any echo
    /// server) and check its content; latency is then the round trip.
    #[arg(long)]
    expect_echo: bool,
    /// Write the report as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Local UDP address (default: an ephemeral port on the matching loopback).
    #[arg(long)]
    bind: Option<SocketAddr>,
    /// The peer's SCTP port (usrsctp's echo_server uses 7).
    #[arg(long, default_value_t = 5000)]
    sctp_port: u16,
    /// Our SCTP port.
    #[arg(long, default_value_t = 5000)]
    local_sctp_port: u16,
    /// Give up on outstanding messages or echoes this long after the last send.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    linger: Duration,
    /// Give up if the association is not up within this time.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    connect_timeout: Duration,
    /// Transport configuration: a preset plus mechanism tokens, e.g. `rfc`,
    /// `linux`, `thin`, `linux+lt+mfr`, `rfc+rdb+minrto` (list: `thinstream mechanisms`).
    #[arg(long, alias = "mech", default_value = "production", value_parser = crate::util::parse_preset)]
    preset: Config,
    /// Partial reliability (RFC 3758 timed reliability): give a message up
    /// once it still needs a (re)transmission this many milliseconds after
    /// it was sent. Needs a peer with FORWARD TSN support. Abandoned
    /// messages are reported, not counted as lost.
    #[arg(long)]
    lifetime_ms: Option<u64>,
    /// Partial reliability (RFC 7496 limited retransmissions): give a
    /// message up when it would need more retransmissions than this.
    #[arg(long)]
    max_rtx: Option<u32>,
    /// Offer message interleaving (RFC 8260 I-DATA; the production preset
    /// offers it already); used if the peer offers it too.
    #[arg(long)]
    interleave: bool,
    /// Seed for the message sizes (default: from the OS clock).
    #[arg(long)]
    seed: Option<u64>,
    /// TESTING ONLY: derive verification tags, initial TSNs and the cookie
    /// secret from this seed instead of the OS random source (predictable
    /// tags let an off-path attacker inject packets).
    #[arg(long, hide_short_help = true)]
    testing_fixed_seed: Option<u64>,
    /// Send every datagram with its own system call (no UDP segmentation
    /// offload): captures on loopback then show one SCTP packet per
    /// datagram.
    #[arg(long)]
    no_gso: bool,
    /// Bulk mode: send back to back (ignores --interval) without tracing,
    /// and report goodput, the longest stall and CPU time instead of
    /// per-message latency. With --duration, stop sending after that time.
    #[arg(long)]
    bulk: bool,
    /// Stop sending after this time even if --count is not reached.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Print nothing but errors (the JSON file still gets the report).
    #[arg(long, short)]
    quiet: bool,
}

/// A seed for interactive use when none was given.
#[allow(
    clippy::disallowed_methods,
    reason = "the CLI picks a seed when the user gave none"
)]
pub(crate) fn seed_from_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

/// Deterministic payload of message `index`: its index (little endian) then
/// a pattern, cut to `size` bytes. Echoes are checked against it.
fn payload(index: u64, size: usize) -> Vec<u8> {
    let mut p = Vec::with_capacity(size);
    p.extend_from_slice(&index.to_le_bytes()[..size.min(8)]);
    let mut b = (index as u8).wrapping_mul(31);
    while p.len() < size {
        p.push(b);
        b = b.wrapping_add(7);
    }
    p
}

#[derive(Debug, Default, serde::Serialize)]
struct Report {
    to: String,
    messages: u64,
    sent: u64,
    bytes_sent: u64,
    acked: u64,
    echoed: Option<u64>,
    corrupted: u64,
    out_of_order: u64,
    lost: u64,
    association_error: Option<String>,
    latency: &'static str,
    latency_ms: Option<LatencyMs>,
    retransmissions: u64,
    /// Messages given up on (partial reliability, `--lifetime-ms`/`--max-rtx`).
    abandoned: u64,
    /// FORWARD TSN / I-FORWARD-TSN chunks sent.
    forward_tsns_sent: u64,
    /// Whether I-DATA was negotiated (offered by both sides).
    interleaving: bool,
    /// Echoed messages sent after an abandoned message of the same ordered
    /// stream: the peer skipped the hole (FORWARD TSN) and went on.
    echoed_after_abandoned: u64,
    /// Times the peer restarted the association (RFC 9260 §5.2.4: its
    /// earlier state, and data in flight to it, are gone).
    peer_restarts: u64,
    /// Retransmissions the peer reported as duplicates (an estimate of the
    /// spurious ones).
    spurious_estimate: Option<u64>,
    elapsed_s: f64,
    /// Bulk mode: payload bytes over the time from the first send to the
    /// last acknowledgement, in Mbit/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    goodput_mbps: Option<f64>,
    /// Bulk mode: the longest wait between two consecutive sends returning.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_send_gap_ms: Option<f64>,
    /// Bulk mode: CPU time of this process (user + system) per message sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_us_per_message: Option<f64>,
    /// The association's counters at its end.
    stats: Option<thinstream::AssociationStats>,
}

/// CPU time (user + system) this process has used, from /proc (Linux).
fn process_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses).
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    // Clock ticks: 100 per second on every Linux configuration we run on.
    Some((utime + stime) / 100.0)
}

#[derive(Debug, serde::Serialize)]
struct LatencyMs {
    min: f64,
    mean: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
}

impl From<LatencyStats> for LatencyMs {
    fn from(s: LatencyStats) -> Self {
        LatencyMs {
            min: s.min.as_millis_f64(),
            mean: s.mean_ms(),
            p50: s.p50.as_millis_f64(),
            p90: s.p90.as_millis_f64(),
            p99: s.p99.as_millis_f64(),
            max: s.max.as_millis_f64(),
        }
    }
}

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    if args.count == 0 {
        anyhow::bail!("--count must be at least 1");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let report = rt.block_on(run(&args))?;
    if !args.quiet {
        print_report(&report);
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    // Abandoned messages (partial reliability) are given up on purpose.
    let ok = report.association_error.is_none()
        && report.lost <= report.abandoned
        && report.corrupted == 0
        && report.out_of_order == 0
        && report.sent == report.messages;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_report(r: &Report) {
    crate::util::out(&format!(
        "sent {}/{} messages ({} bytes) to {}; acknowledged {}{}\n",
        r.sent,
        r.messages,
        r.bytes_sent,
        r.to,
        r.acked,
        match r.echoed {
            Some(e) => format!("; echoed {e}"),
            None => String::new(),
        }
    ));
    if r.abandoned > 0 || r.forward_tsns_sent > 0 {
        crate::util::out(&format!(
            "abandoned {} messages (FORWARD TSNs sent: {})\n",
            r.abandoned, r.forward_tsns_sent
        ));
    }
    if r.lost.saturating_sub(r.abandoned) + r.corrupted + r.out_of_order > 0 {
        crate::util::out(&format!(
            "PROBLEMS: {} lost, {} corrupted, {} out of order\n",
            r.lost, r.corrupted, r.out_of_order
        ));
    }
    if let Some(e) = &r.association_error {
        crate::util::out(&format!("association failed: {e}\n"));
    }
    if let Some(l) = &r.latency_ms {
        crate::util::out(&format!(
            "{} latency ms: min {:.3}  mean {:.3}  p50 {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}\n",
            r.latency, l.min, l.mean, l.p50, l.p90, l.p99, l.max
        ));
    }
    if let (Some(g), Some(gap)) = (r.goodput_mbps, r.max_send_gap_ms) {
        crate::util::out(&format!(
            "goodput {g:.1} Mbit/s, longest send stall {gap:.1} ms, CPU {} us/message\n",
            r.cpu_us_per_message
                .map_or("?".to_string(), |c| format!("{c:.2}"))
        ));
    }
    crate::util::out(&format!(
        "retransmissions {}, elapsed {:.3}s{}\n",
        r.retransmissions,
        r.elapsed_s,
        if r.interleaving {
            ", message interleaving (I-DATA) in use"
        } else {
            ""
        }
    ));
}

async fn run(args: &Args) -> anyhow::Result<Report> {
    let bind = args.bind.unwrap_or_else(|| {
        if args.to.is_ipv6() {
            "[::1]:0".parse().expect("valid literal")
        } else {
            "127.0.0.1:0".parse().expect("valid literal")
        }
    });
    let mut ep_config = EndpointConfig::client();
    if let Some(seed) = args.testing_fixed_seed {
        ep_config.testing_fixed_seed(seed);
    }
    ep_config.segmentation_offload(!args.no_gso);
    let endpoint = Endpoint::bind(bind, ep_config)?;
    let seed = Seed(args.seed.unwrap_or_else(seed_from_clock));
    let sizes = seed.derive("cli.send.sizes").rng();
    let mut transport = args.preset.clone();
    transport.local_port = args.local_sctp_port;
    transport.remote_port = args.sctp_port;
    transport.max_message_size = args.size.max.max(transport.max_message_size);
    transport.interleaving |= args.interleave;
    let mut config = AssociationConfig::from_transport(transport);
    config.trace(!args.bulk);

    let mut report = Report {
        to: args.to.to_string(),
        messages: args.count,
        latency: if args.expect_echo {
            "round-trip"
        } else {
            "ack"
        },
        ..Report::default()
    };

    let connect = tokio::time::timeout(
        args.connect_timeout.to_std(),
        endpoint.connect(args.to, config.clone()),
    )
    .await;
    let a = match connect {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => {
            report.association_error = Some(e.to_string());
            report.lost = args.count;
            return Ok(report);
        }
        Err(_) => {
            report.association_error = Some(format!(
                "no association with {} within {}",
                args.to, args.connect_timeout
            ));
            report.lost = args.count;
            return Ok(report);
        }
    };

    // Count peer restarts as they happen (reported, and announced on
    // stderr: messages in flight at the restart are lost to the old peer).
    let restarts = {
        let events = a.clone();
        let quiet = args.quiet;
        tokio::spawn(async move {
            let mut n = 0u64;
            while let Some(e) = events.event().await {
                if e == thinstream::Event::PeerRestarted {
                    n += 1;
                    if !quiet {
                        eprintln!("the peer restarted the association");
                    }
                }
            }
            n
        })
    };
    let mut report = if args.bulk {
        run_bulk(args, a, report).await?
    } else {
        run_paced(args, a, report, sizes).await?
    };
    report.peer_restarts = restarts.await.unwrap_or(0);
    Ok(report)
}

/// Messages at the given interval, with echo checks and latency analysis.
async fn run_paced(
    args: &Args,
    a: thinstream::Association,
    mut report: Report,
    mut sizes: thinstream_base::Rng,
) -> anyhow::Result<Report> {
    let start = std::time::Instant::now();
    let linger = args.linger.to_std();
    // Outstanding echoes by content, oldest first; per-stream order check.
    let mut waiting: HashMap<Vec<u8>, VecDeque<(u64, std::time::Instant)>> = HashMap::new();
    let mut next_echo_per_stream: BTreeMap<u16, u64> = BTreeMap::new();
    let mut rtts: Vec<Duration> = Vec::new();
    let mut echoed = 0u64;
    let mut echoed_indices: Vec<u64> = Vec::new();
    let mut next = 0u64;
    let mut closed_error: Option<AssociationError> = None;
    let partial = args.lifetime_ms.is_some() || args.max_rtx.is_some();
    let mut last_send = start;
    // The message being handed to the association (its send may wait).
    type Queued<'a> =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), SendError>> + 'a>>;
    let mut queued: Option<Queued<'_>> = None;
    let mut queued_body: Vec<u8> = Vec::new();

    loop {
        let sending =
            next < args.count && args.duration.is_none_or(|d| start.elapsed() < d.to_std());
        if !sending && (!args.expect_echo || echoed + report.corrupted >= args.count) {
            break;
        }
        let due = start + args.interval.saturating_mul(next).to_std();
        let give_up = last_send + linger;
        tokio::select! {
            r = a.recv(), if args.expect_echo => match r {
                Ok(m) => {
                    let at = std::time::Instant::now();
                    match waiting.get_mut(&m.data[..]).and_then(|q| q.pop_front()) {
                        Some((index, sent_at)) => {
                            echoed += 1;
                            echoed_indices.push(index);
                            rtts.push(Duration::from_nanos((at - sent_at).as_nanos() as u64));
                            if !args.unordered {
                                // Within one ordered stream echoes come back in send order.
                                let expect = next_echo_per_stream.entry(m.stream).or_insert(0);
                                if index < *expect { report.out_of_order += 1; }
                                *expect = (*expect).max(index + 1);
                            }
                        }
                        None => report.corrupted += 1,
                    }
                }
                Err(e) => { closed_error = Some(e); break; }
            },
            e = a.closed(), if !args.expect_echo => { closed_error = Some(e); break; }
            _ = tokio::time::sleep_until(due.into()), if sending && queued.is_none() => {
                let size = sizes.range_inclusive(args.size.min as u64, args.size.max as u64) as usize;
                let body = payload(next, size);
                let stream = (next % u64::from(args.streams)) as u16;
                let options = SendOptions {
                    unordered: args.unordered,
                    lifetime: args.lifetime_ms.map(std::time::Duration::from_millis),
                    max_retransmissions: args.max_rtx,
                    ..SendOptions::default()
                };
                queued = Some(Box::pin(a.send(stream, body.clone(), options)));
                queued_body = body;
            }
            // Waits while the send buffer is full, reading echoes meanwhile:
            // an echo server with bounded buffers stops reading while its
            // echoes cannot leave, so a sender that stops reading deadlocks.
            r = async { queued.as_mut().expect("guarded").await }, if queued.is_some() => {
                queued = None;
                match r {
                    Ok(()) => {
                        let now = std::time::Instant::now();
                        report.sent += 1;
                        report.bytes_sent += queued_body.len() as u64;
                        if args.expect_echo {
                            waiting.entry(std::mem::take(&mut queued_body)).or_default().push_back((next, now));
                        }
                        next += 1;
                        last_send = now;
                    }
                    Err(SendError::Closed(e)) => { closed_error = Some(e); break; }
                    Err(e) => anyhow::bail!("cannot send message {next}: {e}"),
                }
            }
            // Also bounds a send that waits for buffer space.
            _ = tokio::time::sleep_until(give_up.into()), if !sending || queued.is_some() => break,
            // With partial reliability, abandoned messages are never echoed:
            // once everything is sent, look every 20 ms whether the sender
            // is idle and every message is echoed or abandoned.
            _ = tokio::time::sleep(std::time::Duration::from_millis(20)), if !sending && partial => {
                let s = a.stats();
                let idle = s.buffered_send_bytes == 0 && s.flight_bytes == 0;
                if idle && (!args.expect_echo || echoed + report.corrupted + s.abandoned_messages >= args.count) {
                    break;
                }
            }
        }
    }

    // Within what is left of the linger time: wait until everything is
    // acknowledged, then close gracefully (aborting if the time runs out).
    if closed_error.is_none() {
        let give_up = last_send + linger;
        loop {
            let s = a.stats();
            if s.buffered_send_bytes == 0 && s.flight_bytes == 0 {
                break;
            }
            if std::time::Instant::now() >= give_up {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let left = give_up
            .saturating_duration_since(std::time::Instant::now())
            .max(std::time::Duration::from_millis(200));
        closed_error = Some(match tokio::time::timeout(left, a.close()).await {
            Ok(e) => e,
            Err(_) => {
                a.abort("linger time over");
                a.closed().await
            }
        });
    }
    report.elapsed_s = start.elapsed().as_secs_f64();
    if let Some(e) = closed_error {
        if e != AssociationError::Closed {
            report.association_error = Some(e.to_string());
        }
    }
    // Read after the end: the counters are those of the association's end.
    let stats = a.stats();
    report.retransmissions = stats.retransmitted_chunks();
    report.abandoned = stats.abandoned_messages;
    report.forward_tsns_sent = stats.forward_tsns_sent;
    report.interleaving = stats.interleaving;
    report.stats = Some(stats);
    let records = a.take_trace();

    // Acknowledged messages and ACK latency, from the trace records; the
    // peer's duplicate-TSN reports estimate which retransmissions were
    // spurious (no receiver trace exists in real mode).
    let duplicates: Vec<DuplicateReport> = records
        .iter()
        .filter_map(|r| match r {
            Record::DuplicateReported { time, units } => Some(DuplicateReport {
                time: *time,
                units: *units,
            }),
            _ => None,
        })
        .collect();
    let analysis = FlowAnalysis::build(
        FlowInput {
            sender: &records,
            receiver: None,
            app_sends: None,
            duplicate_reports: Some(&duplicates),
        },
        AnalysisOptions {
            owd: OwdCorrection::None,
            summary_latency: LatencyKind::AckFromSend,
        },
    )
    .context("analysing the association's trace")?;
    report.spurious_estimate = analysis.spurious();
    report.acked = analysis
        .messages()
        .iter()
        .filter(|m| analysis.latency(m, LatencyKind::AckFromSend).is_some())
        .count() as u64;
    // The first abandoned message per stream (message ids are our indices:
    // both count accepted sends from 0).
    let mut first_abandoned: BTreeMap<u16, u64> = BTreeMap::new();
    for m in analysis.messages().iter().filter(|m| m.abandoned) {
        let e = first_abandoned.entry(m.stream).or_insert(m.message);
        *e = (*e).min(m.message);
    }
    if !args.unordered {
        report.echoed_after_abandoned = echoed_indices
            .iter()
            .filter(|&&i| {
                let stream = (i % u64::from(args.streams)) as u16;
                first_abandoned.get(&stream).is_some_and(|&a| i > a)
            })
            .count() as u64;
    }
    if args.expect_echo {
        report.echoed = Some(echoed);
        report.lost = args.count - echoed.min(args.count);
        report.latency_ms = LatencyStats::from_durations(rtts).map(Into::into);
    } else {
        report.lost = args.count - report.acked.min(args.count);
        report.latency_ms = analysis
            .latency_stats(LatencyKind::AckFromSend)
            .map(Into::into);
    }
    Ok(report)
}

/// Back-to-back sending without tracing: goodput, stalls, CPU.
async fn run_bulk(
    args: &Args,
    a: thinstream::Association,
    mut report: Report,
) -> anyhow::Result<Report> {
    let cpu0 = process_cpu_s();
    let start = std::time::Instant::now();
    let stop = args.duration.map(|d| start + d.to_std());
    let body = payload(0, args.size.max);
    let mut last = start;
    let mut max_gap = std::time::Duration::ZERO;
    let mut closed_error = None;
    for i in 0..args.count {
        if stop.is_some_and(|t| last >= t) {
            break;
        }
        let stream = (i % u64::from(args.streams)) as u16;
        let options = SendOptions {
            unordered: args.unordered,
            ..SendOptions::default()
        };
        match a.send(stream, &body, options).await {
            Ok(()) => {
                let now = std::time::Instant::now();
                max_gap = max_gap.max(now - last);
                last = now;
                report.sent += 1;
                report.bytes_sent += body.len() as u64;
            }
            Err(SendError::Closed(e)) => {
                closed_error = Some(e);
                break;
            }
            Err(e) => anyhow::bail!("cannot send message {i}: {e}"),
        }
    }
    report.messages = report.sent;
    // Everything acknowledged: the goodput's end.
    let give_up = last + args.linger.to_std();
    let mut acked_at = None;
    while closed_error.is_none() && std::time::Instant::now() < give_up {
        let s = a.stats();
        if s.buffered_send_bytes == 0 && s.flight_bytes == 0 {
            acked_at = Some(std::time::Instant::now());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let cpu1 = process_cpu_s();
    if closed_error.is_none() {
        closed_error = Some(
            match tokio::time::timeout(std::time::Duration::from_secs(5), a.close()).await {
                Ok(e) => e,
                Err(_) => {
                    a.abort("close timed out");
                    a.closed().await
                }
            },
        );
    }
    if let Some(e) = closed_error {
        if e != AssociationError::Closed {
            report.association_error = Some(e.to_string());
        }
    }
    let stats = a.stats();
    report.retransmissions = stats.retransmitted_chunks();
    report.spurious_estimate = Some(stats.spurious_estimate);
    report.elapsed_s = start.elapsed().as_secs_f64();
    report.latency = "none (bulk)";
    match acked_at {
        Some(t) => {
            report.acked = report.sent;
            let secs = (t - start).as_secs_f64();
            report.goodput_mbps = Some(report.bytes_sent as f64 * 8.0 / secs / 1e6);
        }
        None => report.lost = report.sent,
    }
    report.max_send_gap_ms = Some(max_gap.as_secs_f64() * 1e3);
    if let (Some(c0), Some(c1)) = (cpu0, cpu1) {
        if report.sent > 0 {
            report.cpu_us_per_message = Some((c1 - c0) * 1e6 / report.sent as f64);
        }
    }
    report.stats = Some(stats);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::payload;

    #[test]
    fn payloads_are_distinct_and_sized() {
        assert_eq!(payload(5, 3).len(), 3);
        assert_eq!(payload(5, 100).len(), 100);
        assert_ne!(payload(1, 100), payload(2, 100));
    }
}
