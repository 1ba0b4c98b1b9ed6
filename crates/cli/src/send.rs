//! `thinstream send`: a thin stream of messages to a listener, with a
//! latency report. Exits non-zero if anything was lost, corrupted, or the
//! association failed.

use anyhow::Context;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::process::ExitCode;
use thinstream_base::drive::{AppEvent, SendError, Transport};
use thinstream_base::trace::Record;
use thinstream_base::{Duration, Instant, Seed};
use thinstream_metrics::{
    AnalysisOptions, DuplicateReport, FlowAnalysis, FlowInput, LatencyKind, LatencyStats,
    OwdCorrection,
};
use thinstream_net::{Clock, Handle};
use thinstream_proto::{Association, Config, SendParams};

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
    #[arg(long, alias = "mech", default_value = "rfc", value_parser = crate::util::parse_preset)]
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
    /// Offer message interleaving (RFC 8260 I-DATA); used if the peer
    /// offers it too.
    #[arg(long)]
    interleave: bool,
    /// Seed for sizes, tags and initial TSN (default: from the OS clock).
    #[arg(long)]
    seed: Option<u64>,
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
    /// Whether I-DATA was negotiated (`--interleave` and the peer offered it).
    interleaving: bool,
    /// Echoed messages sent after an abandoned message of the same ordered
    /// stream: the peer skipped the hole (FORWARD TSN) and went on.
    echoed_after_abandoned: u64,
    /// Retransmissions the peer reported as duplicates (an estimate of the
    /// spurious ones).
    spurious_estimate: Option<u64>,
    elapsed_s: f64,
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
    println!(
        "sent {}/{} messages ({} bytes) to {}; acknowledged {}{}",
        r.sent,
        r.messages,
        r.bytes_sent,
        r.to,
        r.acked,
        match r.echoed {
            Some(e) => format!("; echoed {e}"),
            None => String::new(),
        }
    );
    if r.abandoned > 0 || r.interleaving {
        println!(
            "abandoned {} messages (FORWARD TSNs sent: {}); I-DATA {}",
            r.abandoned,
            r.forward_tsns_sent,
            if r.interleaving {
                "in use"
            } else {
                "not in use"
            }
        );
    }
    if r.lost.saturating_sub(r.abandoned) + r.corrupted + r.out_of_order > 0 {
        println!(
            "PROBLEMS: {} lost, {} corrupted, {} out of order",
            r.lost, r.corrupted, r.out_of_order
        );
    }
    if let Some(e) = &r.association_error {
        println!("association failed: {e}");
    }
    if let Some(l) = &r.latency_ms {
        println!(
            "{} latency ms: min {:.3}  mean {:.3}  p50 {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}",
            r.latency, l.min, l.mean, l.p50, l.p90, l.p99, l.max
        );
    }
    println!(
        "retransmissions {}, elapsed {:.3}s",
        r.retransmissions, r.elapsed_s
    );
}

async fn run(args: &Args) -> anyhow::Result<Report> {
    let bind = args.bind.unwrap_or_else(|| {
        if args.to.is_ipv6() {
            "[::1]:0".parse().expect("valid literal")
        } else {
            "127.0.0.1:0".parse().expect("valid literal")
        }
    });
    let socket = tokio::net::UdpSocket::bind(bind)
        .await
        .with_context(|| format!("cannot bind UDP {bind}"))?;
    let local = socket.local_addr()?;
    let seed = Seed(args.seed.unwrap_or_else(seed_from_clock));
    let mut sizes = seed.derive("cli.send.sizes").rng();
    let config = Config {
        local_port: args.local_sctp_port,
        remote_port: args.sctp_port,
        max_message_size: args.size.max.max(args.preset.max_message_size),
        trace: true,
        interleaving: args.preset.interleaving || args.interleave,
        ..args.preset.clone()
    };
    let clock = Clock::new();
    let assoc = Association::connect(
        config,
        clock.now(),
        local,
        args.to,
        seed.derive("association"),
    );
    let mut handle = thinstream_net::spawn(socket, assoc, clock, true)?;

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
    let mut records: Vec<Record> = Vec::new();

    // Wait for the association.
    let deadline = clock.now() + args.connect_timeout;
    loop {
        let ev = tokio::time::timeout_at(clock.to_std(deadline).into(), handle.next_event()).await;
        match ev {
            Ok(Some((_, AppEvent::Established))) => break,
            Ok(Some((_, AppEvent::Closed { error }))) => {
                report.association_error = Some(error.unwrap_or_else(|| "closed".into()));
                report.lost = args.count;
                return Ok(report);
            }
            Ok(Some(_)) => {}
            Ok(None) => anyhow::bail!("the association's driver stopped"),
            Err(_) => {
                report.association_error = Some(format!(
                    "no association with {} within {}",
                    args.to, args.connect_timeout
                ));
                report.lost = args.count;
                return Ok(report);
            }
        }
    }

    let start = clock.now();
    // Outstanding echoes by content, oldest first; per-stream order check.
    let mut waiting: HashMap<Vec<u8>, VecDeque<(u64, Instant)>> = HashMap::new();
    let mut next_echo_per_stream: BTreeMap<u16, u64> = BTreeMap::new();
    let mut rtts: Vec<Duration> = Vec::new();
    let mut echoed = 0u64;
    let mut echoed_indices: Vec<u64> = Vec::new();
    let mut next = 0u64;
    let mut blocked = false;
    let mut closed_error: Option<Option<String>> = None;
    let mut last_send = start;

    let all_done = |next: u64, echoed: u64, corrupted: u64| -> bool {
        next == args.count && (!args.expect_echo || echoed + corrupted >= args.count)
    };

    loop {
        if closed_error.is_some() || all_done(next, echoed, report.corrupted) {
            break;
        }
        let due = start + args.interval * next;
        let give_up = last_send + args.linger;
        // With partial reliability, abandoned messages are never echoed:
        // once everything is sent, look every 20 ms whether the sender is
        // idle and every message is echoed or abandoned.
        let partial = args.lifetime_ms.is_some() || args.max_rtx.is_some();
        let wake = if next < args.count && !blocked {
            due
        } else if partial && next == args.count {
            (clock.now() + Duration::from_millis(20)).min(give_up)
        } else {
            give_up
        };
        tokio::select! {
            ev = handle.next_event() => match ev {
                Some((at, AppEvent::Received { stream, payload, .. })) => {
                    if !args.expect_echo { continue; }
                    match waiting.get_mut(&payload).and_then(|q| q.pop_front()) {
                        Some((index, sent_at)) => {
                            echoed += 1;
                            echoed_indices.push(index);
                            rtts.push(at.saturating_duration_since(sent_at));
                            if !args.unordered {
                                // Within one ordered stream echoes come back in send order.
                                let expect = next_echo_per_stream.entry(stream).or_insert(0);
                                if index < *expect { report.out_of_order += 1; }
                                *expect = (*expect).max(index + 1);
                            }
                        }
                        None => report.corrupted += 1,
                    }
                }
                Some((_, AppEvent::Writable)) => blocked = false,
                Some((_, AppEvent::Closed { error })) => closed_error = Some(error),
                Some((_, AppEvent::Established | AppEvent::PeerRestarted)) => {}
                None => closed_error = Some(Some("the association's driver stopped".into())),
            },
            _ = tokio::time::sleep_until(clock.to_std(wake).into()) => {
                if next < args.count && !blocked {
                    let size = sizes.range_inclusive(args.size.min as u64, args.size.max as u64) as usize;
                    let body = payload(next, size);
                    let stream = (next % u64::from(args.streams)) as u16;
                    let params = SendParams {
                        stream,
                        unordered: args.unordered,
                        lifetime: args.lifetime_ms.map(Duration::from_millis),
                        max_retransmissions: args.max_rtx,
                        ..SendParams::default()
                    };
                    let b2 = body.clone();
                    let r = handle
                        .call(move |a: &mut Association, now| {
                            (now, a.send_with(now, &params, &b2))
                        })
                        .await?;
                    match r {
                        (now, Ok(_)) => {
                            report.sent += 1;
                            report.bytes_sent += size as u64;
                            if args.expect_echo {
                                waiting.entry(body).or_default().push_back((next, now));
                            }
                            next += 1;
                            last_send = now;
                        }
                        (_, Err(SendError::BufferFull)) => blocked = true,
                        (_, Err(e)) => anyhow::bail!("cannot send message {next}: {e}"),
                    }
                } else if clock.now() >= give_up {
                    break;
                } else if partial && next == args.count {
                    let (abandoned, idle) = handle
                        .call(|a: &mut Association, _| (a.stats().abandoned_messages, a.is_idle()))
                        .await?;
                    if idle && (!args.expect_echo || echoed + report.corrupted + abandoned >= args.count) {
                        break;
                    }
                }
            }
        }
        drain_traces(&mut handle, &mut records);
    }

    // Counters and the negotiated options as they are before the close (the
    // driver may be gone once the association closed).
    let mut stats = handle
        .call(|a: &mut Association, _| (*a.stats(), a.interleaving()))
        .await
        .ok();
    // Wait (within the linger time) until everything is acknowledged, then
    // close gracefully.
    if closed_error.is_none() {
        let give_up = clock.now() + args.linger;
        loop {
            let idle = handle
                .call(|a: &mut Association, _| a.buffered_send_bytes() == 0 && a.flight_size() == 0)
                .await
                .unwrap_or(true);
            if idle || clock.now() >= give_up {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        if let Ok(s) = handle
            .call(|a: &mut Association, _| (*a.stats(), a.interleaving()))
            .await
        {
            stats = Some(s);
        }
        let _ = handle
            .call(|a: &mut Association, now| Transport::close(a, now))
            .await;
        let close_deadline = clock.now() + Duration::from_secs(5);
        loop {
            let ev =
                tokio::time::timeout_at(clock.to_std(close_deadline).into(), handle.next_event())
                    .await;
            match ev {
                Ok(Some((_, AppEvent::Closed { error }))) => {
                    closed_error = Some(error);
                    break;
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
    if let Ok(s) = handle
        .call(|a: &mut Association, _| (*a.stats(), a.interleaving()))
        .await
    {
        stats = Some(s);
    }
    drain_traces(&mut handle, &mut records);
    report.elapsed_s = clock.now().saturating_duration_since(start).as_secs_f64();
    if let Some(Some(e)) = closed_error {
        report.association_error = Some(e);
    }
    if let Some((s, interleaving)) = stats {
        report.interleaving = interleaving;
        report.retransmissions = s.retransmitted_chunks();
        report.abandoned = s.abandoned_messages;
        report.forward_tsns_sent = s.forward_tsns_sent;
    }

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

fn drain_traces(handle: &mut Handle<Association>, out: &mut Vec<Record>) {
    if let Some(rx) = handle.traces() {
        while let Ok(r) = rx.try_recv() {
            out.push(r);
        }
    }
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
