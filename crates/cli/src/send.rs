//! `thinstream send`: a thin stream of messages to a listener, with a
//! latency report. Exits non-zero if anything was lost, corrupted, or the
//! association failed.
//!
//! Memory is bounded in the number of messages: the sender analyses its
//! trace as it goes ([`thinstream_metrics::StreamingFlow`]: state only for
//! messages not yet acknowledged), keeps latencies in HDR histograms, and
//! writes per-message records only with `--records FILE`, streamed to the
//! file. One-way latency: see [`crate::oneway`] and docs/one-way.md.

#![allow(
    clippy::disallowed_methods,
    reason = "a tool on real sockets times messages with the OS clock"
)]

use anyhow::Context;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use thinstream::TransportConfig as Config;
use thinstream::{
    AssociationConfig, AssociationError, Endpoint, EndpointConfig, SendError, SendOptions,
};
use thinstream_base::{Duration, Seed};
use thinstream_metrics::LatencyKind;

use crate::oneway::{self, Group, News, Results, PPID_CONTROL, PPID_DATA};
use crate::util::{parse_duration, parse_size, SizeSpec};
use thinstream_metrics::{StreamingFlow, Summary};
use thinstream_workload::{Generator, ProfileName, WorkloadConfig};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The listener's UDP address (SCTP over UDP, RFC 6951): `IP:PORT` or
    /// `NAME:PORT` (a name's first IPv4 address if it has one).
    #[arg(long, value_parser = crate::util::parse_socket_addr)]
    to: SocketAddr,
    /// Number of messages to send (default 100 for the --iat workload;
    /// profiles, --workload and traces run until their end or --duration).
    #[arg(long)]
    count: Option<u64>,
    /// Message size in bytes: `N`, or `MIN..MAX` drawn per message from the
    /// seed (the --iat workload). One-way messages are at least 26 bytes
    /// (the header); smaller ones are sent as 26 bytes and counted.
    #[arg(long, default_value = "100", value_parser = parse_size)]
    size: SizeSpec,
    /// Time between messages (`250ms`, `1s`, `0` for back to back).
    #[arg(long, alias = "iat", default_value = "250ms", value_parser = parse_duration)]
    interval: Duration,
    /// Workload: an application profile of the workload crate (002 Table
    /// 2.1), e.g. anarchy-online, wow, age-of-conan, casa, ssh, rdp,
    /// skype-udp, bzflag, halo3-high (list: an unknown name prints them).
    #[arg(long, value_parser = parse_profile, conflicts_with_all = ["trace", "workload"])]
    profile: Option<ProfileName>,
    /// Workload: replay a CSV trace (`time,size[,stream]` per line, the
    /// scenario files' `trace-csv` format; times in --trace-time-unit).
    #[arg(long, conflicts_with = "workload")]
    trace: Option<std::path::PathBuf>,
    /// Unit of the trace's time column: `ms` or `s`.
    #[arg(long, default_value = "ms", value_parser = ["ms", "s"])]
    trace_time_unit: String,
    /// Workload: any workload of the scenario files as an inline TOML
    /// table body, e.g. `kind = "exponential", mean-iat = "100ms", bytes = 100`.
    #[arg(long)]
    workload: Option<String>,
    /// Spread messages round robin over this many streams.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    streams: u16,
    /// Send unordered messages (U bit).
    #[arg(long)]
    unordered: bool,
    /// Expect every message back (from `thinstream listen --echo` or any echo
    /// server) and check its content; latency is then the round trip, from
    /// the library accepting the message (the call to send, or the end of a
    /// wait for send-buffer space) to its echo's arrival.
    /// Without it, latency is one way: each message carries its id and its
    /// send time on CLOCK_MONOTONIC (shared by every process of the host, so
    /// sender and `thinstream listen` must run on the same host), the
    /// listener measures delivery latency and returns its results at the
    /// end. With another receiver, the report falls back to ACK latency.
    #[arg(long)]
    expect_echo: bool,
    /// Write the report as JSON to this file. `summary` holds the fields of
    /// `thinstream run`'s per-variant summary (latency "application" =
    /// one-way delivery latency, no OWD removed).
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Write one line per message to this CSV file as messages become
    /// final: message,stream,bytes,retransmissions,ack_ms,abandoned.
    /// Without it no per-message record is kept: the sender holds state only
    /// for messages not yet acknowledged, the last 16384 retransmitted
    /// pieces (spurious estimate) and HDR histograms (3 significant digits).
    #[arg(long)]
    records: Option<std::path::PathBuf>,
    /// How long to wait for the listener's one-way results after the end.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    result_timeout: Duration,
    /// Local UDP address (default: an ephemeral port on the matching loopback).
    #[arg(long, value_parser = crate::util::parse_socket_addr)]
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
    #[command(flatten)]
    endpoint: crate::util::EndpointArgs,
    /// Largest SCTP packet (common header and chunks) in one UDP datagram:
    /// `auto` (default: start at 1472 B (IPv6: 1452) and probe larger sizes
    /// up to the route's MTU, at most 16 KiB towards a loopback peer, using
    /// a size once the peer has answered a probe of it; RFC 8899) or a
    /// fixed size in bytes, 128..=65507, with no probing.
    #[arg(long, default_value = "auto", value_parser = crate::util::parse_pmtu)]
    pmtu: thinstream::PathMtu,
    /// Bulk mode: send back to back (ignores --interval) without tracing,
    /// and report goodput, the longest stall and CPU time instead of
    /// per-message latency. With --duration, stop sending after that time.
    #[arg(long)]
    bulk: bool,
    /// Stop sending after this time even if --count is not reached.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Print nothing but errors (the JSON file still gets the report). The
    /// live progress line (stderr, once a second: messages sent and
    /// acknowledged, ACK latency p50/p99, retransmissions) is shown only
    /// when stderr is a terminal.
    #[arg(long, short)]
    quiet: bool,
}

fn parse_profile(s: &str) -> Result<ProfileName, String> {
    ProfileName::parse(s).map_err(|e| e.to_string())
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
    /// One-way mode: messages the listener delivered (distinct), `null`
    /// when it returned no results.
    delivered: Option<u64>,
    corrupted: u64,
    out_of_order: u64,
    lost: u64,
    association_error: Option<String>,
    /// What `latency_ms` measures: `one-way` (send → delivered to the
    /// listening application), `round-trip`, `ack` (send → acknowledged)
    /// or `none (bulk)`.
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
    /// The fields of `thinstream run`'s per-variant summary (results.json),
    /// from this run; `null` fields cannot be computed in real mode (see
    /// `summary_notes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<Summary>,
    /// Retransmitted pieces by retransmission number and reason, as
    /// results.json's `retransmission_causes` (`spurious` is `null`: it
    /// needs the receiver's trace).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    retransmission_causes: Vec<thinstream_lab::results::CauseRow>,
    /// How the summary was obtained and why fields are `null`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    summary_notes: BTreeMap<&'static str, String>,
    /// One-way mode: the measurement's own facts.
    #[serde(skip_serializing_if = "Option::is_none")]
    one_way: Option<OneWay>,
    /// Bulk mode: payload bytes over the time from the first send to the
    /// last acknowledgement, in Mbit/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    goodput_mbps: Option<f64>,
    /// Bulk mode: the longest wait between two consecutive sends returning.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_send_gap_ms: Option<f64>,
    /// Bulk mode: the association's state around the longest wait between
    /// two sends (when it was at least `STALL_MIN`), to tell after the fact
    /// what the sender waited for.
    #[serde(skip_serializing_if = "Option::is_none")]
    longest_stall: Option<Stall>,
    /// Bulk mode: CPU time of this process (user + system) per message sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_us_per_message: Option<f64>,
    /// The association's counters at its end.
    stats: Option<thinstream::AssociationStats>,
}

/// Waits between two sends shorter than this are not described.
const STALL_MIN: std::time::Duration = std::time::Duration::from_millis(20);
/// How often the association's state is sampled for [`Stall`].
const STALL_SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(10);
/// Samples kept (the last 640 ms).
const STALL_SAMPLES: usize = 64;

/// The longest wait between two sends of a bulk run, with the association's
/// state sampled every 10 ms by a task of its own from just before the
/// wait began to its end. Samples that keep coming while nothing moves
/// show the process was running (the sender waited for the network or
/// the peer); a hole in them shows the process itself did not run.
#[derive(Debug, serde::Serialize)]
struct Stall {
    /// Seconds from the first send to the send that ended the wait.
    ended_at_s: f64,
    ms: f64,
    samples: Vec<StallSample>,
}

/// The association's state at one moment of a bulk run.
#[derive(Clone, Debug, serde::Serialize)]
struct StallSample {
    /// Seconds from the first send.
    at_s: f64,
    /// Messages sent so far.
    sent: u64,
    #[serde(flatten)]
    stats: thinstream::AssociationStats,
}

/// Facts of a one-way measurement.
#[derive(Debug, Default, serde::Serialize)]
struct OneWay {
    /// The clock of the send timestamps and delivery times.
    clock: &'static str,
    /// Whether the listener returned its results (else why not).
    results: String,
    /// Messages sent larger than asked because they were below the header size.
    padded_messages: u64,
    /// Messages the listener received twice / with a bad header.
    duplicates: Option<u64>,
    malformed: Option<u64>,
    /// Delivered messages the listener could not join with a
    /// retransmission count (should be 0).
    unjoined: Option<u64>,
    /// Memory of the measurement: most messages the sender held open, most
    /// retransmission counts waiting to be told, most delivered messages the
    /// listener held before their count was known.
    max_open_messages: u64,
    max_untold: u64,
    max_pending_at_listener: Option<u64>,
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

/// Percentiles from HDR histograms (3 significant digits: within 0.1%);
/// min, mean and max exact.
#[derive(Debug, serde::Serialize)]
struct LatencyMs {
    min: f64,
    mean: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
}

impl LatencyMs {
    fn of(g: &Group) -> Option<LatencyMs> {
        Some(LatencyMs {
            min: g.min_ms()?,
            mean: g.mean_ms()?,
            p50: g.quantile_ms(0.5)?,
            p90: g.quantile_ms(0.9)?,
            p99: g.quantile_ms(0.99)?,
            max: g.max_ms()?,
        })
    }
}

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    if args.count == Some(0) {
        anyhow::bail!("--count must be at least 1");
    }
    // Fail before connecting if the workload does not build.
    schedule(&args, Seed(0))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // The run is a task of its own, not the runtime's main future: a woken
    // task is queued in the runtime's thread without the self-pipe write a
    // woken main future costs, and it runs before the endpoint task's
    // next turn (which is queued behind it), so an echo is timed before
    // the SACK for it is sent.
    let args = std::sync::Arc::new(args);
    let task_args = args.clone();
    let report = rt
        .block_on(async move { tokio::spawn(async move { run(&task_args).await }).await })
        .context("the send task failed")??;
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
        "sent {}/{} messages ({} bytes) to {}; acknowledged {}{}{}\n",
        r.sent,
        r.messages,
        r.bytes_sent,
        r.to,
        r.acked,
        match r.echoed {
            Some(e) => format!("; echoed {e}"),
            None => String::new(),
        },
        match r.delivered {
            Some(d) => format!("; delivered {d} (listener)"),
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
            "PROBLEMS: {} lost{}, {} corrupted, {} out of order\n",
            r.lost,
            if r.sent == 0 && r.lost > 0 {
                " (none sent)"
            } else {
                ""
            },
            r.corrupted,
            r.out_of_order
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
    if let Some(s) = &r.summary {
        let rows: Vec<String> = s
            .by_retransmissions
            .iter()
            .filter(|row| row.count > 0)
            .map(|row| {
                format!(
                    "{}{}: {} msgs p50 {:.1} p99 {:.1}",
                    row.retransmissions,
                    if row.or_more { "+" } else { "" },
                    row.count,
                    row.p50_ms.unwrap_or(0.0),
                    row.p99_ms.unwrap_or(0.0)
                )
            })
            .collect();
        if !rows.is_empty() {
            println!(
                "by retransmissions ({} latency, ms): {}",
                s.latency.name(),
                rows.join("; ")
            );
        }
    }
    if let Some(w) = &r.one_way {
        if w.results != "returned" {
            println!("one-way: {}", w.results);
        }
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

/// The `--iat`/`--size` workload: messages every `interval` (0: back to
/// back), sizes from the seed, round robin over the streams.
struct Paced {
    next: u64,
    count: u64,
    interval: Duration,
    size: SizeSpec,
    streams: u16,
    unordered: bool,
    sizes: thinstream_base::Rng,
}

impl Generator for Paced {
    fn next_message(&mut self) -> Option<thinstream_workload::Message> {
        if self.next >= self.count {
            return None;
        }
        let i = self.next;
        self.next += 1;
        let bytes = self
            .sizes
            .range_inclusive(self.size.min as u64, self.size.max as u64) as u32;
        Some(thinstream_workload::Message {
            at: thinstream_base::Instant::ZERO + self.interval.saturating_mul(i),
            stream: (i % u64::from(self.streams)) as u16,
            bytes,
            unordered: self.unordered,
        })
    }
}

/// The message schedule the arguments ask for (times from `Instant::ZERO`).
fn schedule(args: &Args, seed: Seed) -> anyhow::Result<Box<dyn Generator + Send>> {
    let duration = args.duration;
    let config = if let Some(name) = args.profile {
        if args.count.is_none() && duration.is_none() {
            anyhow::bail!("--profile needs --count or --duration (profiles do not end)");
        }
        WorkloadConfig::Profile {
            name,
            iid: false,
            streams: args.streams,
            unordered: args.unordered,
            count: args.count,
            duration,
        }
    } else if let Some(path) = &args.trace {
        WorkloadConfig::TraceCsv {
            path: path.clone(),
            time_unit: serde_json::from_value(serde_json::Value::String(
                args.trace_time_unit.clone(),
            ))
            .context("--trace-time-unit")?,
            stream: 0,
            streams: args.streams,
            unordered: args.unordered,
            count: args.count,
            duration,
        }
    } else if let Some(text) = &args.workload {
        let table: toml::Table = toml::from_str(&format!("w = {{ {text} }}"))
            .with_context(|| format!("--workload {text:?} is not a TOML table body"))?;
        let w = table.get("w").cloned().expect("parsed above");
        let mut config: WorkloadConfig = w
            .try_into()
            .with_context(|| format!("--workload {text:?}"))?;
        if config.produces_flows() {
            anyhow::bail!(
                "--workload: {} produces flows, not messages",
                config.kind_name()
            );
        }
        if config.peer_behaviour() == thinstream_workload::PeerBehaviour::Echo && !args.expect_echo
        {
            anyhow::bail!("--workload: an echo workload needs --expect-echo");
        }
        if let Ok(dir) = std::env::current_dir() {
            config.resolve_paths(&dir);
        }
        config
    } else {
        return Ok(Box::new(Paced {
            next: 0,
            count: args.count.unwrap_or(100),
            interval: args.interval,
            size: args.size,
            streams: args.streams,
            unordered: args.unordered,
            sizes: seed.derive("cli.send.sizes").rng(),
        }));
    };
    config
        .build(
            thinstream_base::Instant::ZERO,
            seed.derive("cli.send.workload"),
        )
        .map_err(|e| anyhow::anyhow!("workload: {e}"))
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
    args.endpoint.apply(&mut ep_config);
    let endpoint = Endpoint::bind(bind, ep_config)?;
    let seed = Seed(args.seed.unwrap_or_else(seed_from_clock));
    let mut transport = args.preset.clone();
    transport.local_port = args.local_sctp_port;
    transport.remote_port = args.sctp_port;
    transport.max_message_size = args.size.max.max(transport.max_message_size);
    transport.interleaving |= args.interleave;
    let streams = if args.trace.is_some() || args.workload.is_some() || args.profile.is_some() {
        // Workloads name their streams; open as many as any may use.
        args.streams.max(16)
    } else {
        args.streams
    };
    let mut config = AssociationConfig::from_transport(transport);
    config.pmtu(args.pmtu);
    config.trace(!args.bulk);
    config.streams(streams);

    let mut report = Report {
        to: args.to.to_string(),
        messages: args.count.unwrap_or(100),
        latency: if args.expect_echo {
            "round-trip"
        } else {
            "ack"
        },
        ..Report::default()
    };

    let began = std::time::Instant::now();
    let connect = tokio::time::timeout(
        args.connect_timeout.to_std(),
        endpoint.connect(args.to, config.clone()),
    )
    .await;
    let a = match connect {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => {
            report.association_error = Some(e.to_string());
            report.lost = report.messages;
            report.elapsed_s = began.elapsed().as_secs_f64();
            return Ok(report);
        }
        Err(_) => {
            report.association_error = Some(format!(
                "no association with {} within {}",
                args.to, args.connect_timeout
            ));
            report.lost = report.messages;
            report.elapsed_s = began.elapsed().as_secs_f64();
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
        run_paced(args, a, report, seed).await?
    };
    report.peer_restarts = restarts.await.unwrap_or(0);
    Ok(report)
}

/// Run `send` and return when the library accepted the message: when
/// `send` was called if it took the message at once (a send may put it on
/// the wire before returning, and that time belongs to the round trip, as
/// in the bare-UDP floor), else when room in the send buffer let it in.
async fn accepted_at(
    send: impl std::future::Future<Output = Result<(), SendError>>,
) -> Result<std::time::Instant, SendError> {
    let called = std::time::Instant::now();
    let mut send = std::pin::pin!(send);
    let mut waited = false;
    std::future::poll_fn(|cx| {
        let p = send.as_mut().poll(cx);
        waited |= p.is_pending();
        p
    })
    .await?;
    Ok(if waited {
        std::time::Instant::now()
    } else {
        called
    })
}

/// The sender's running analysis: its trace read as it goes, latencies in
/// histograms, optional per-message records.
struct Tally {
    flow: StreamingFlow,
    news: News,
    /// ACK latency (submitted → acknowledged) by retransmission count.
    ack: [Group; 4],
    acked: u64,
    /// First abandoned message per stream.
    first_abandoned: BTreeMap<u16, u64>,
    records: Option<std::io::BufWriter<std::fs::File>>,
    max_open: usize,
}

impl Tally {
    fn absorb(&mut self, records: Vec<thinstream::trace::Record>) -> anyhow::Result<()> {
        for r in &records {
            self.flow
                .push(r)
                .map_err(|e| anyhow::anyhow!("analysing the association's trace: {e}"))?;
        }
        self.max_open = self.max_open.max(self.flow.open_messages());
        for f in self.flow.drain_finished() {
            self.news.finished(f.message, f.retransmissions);
            let ack = f.acked.map(|t| t.saturating_duration_since(f.submitted));
            if let Some(l) = ack {
                self.acked += 1;
                self.ack[(f.retransmissions as usize).min(3)].record(l.as_nanos());
            }
            if f.abandoned {
                let e = self.first_abandoned.entry(f.stream).or_insert(f.message);
                *e = (*e).min(f.message);
            }
            if let Some(w) = &mut self.records {
                writeln!(
                    w,
                    "{},{},{},{},{},{}",
                    f.message,
                    f.stream,
                    f.bytes,
                    f.retransmissions,
                    ack.map_or(String::new(), |l| format!("{:.3}", l.as_millis_f64())),
                    f.abandoned
                )
                .context("writing --records")?;
            }
        }
        let seen = self.flow.messages();
        self.news
            .set_watermark(self.flow.lowest_open().unwrap_or(seen).min(seen));
        Ok(())
    }

    fn ack_all(&self) -> Group {
        let mut g = Group::default();
        for x in &self.ack {
            g.merge(x);
        }
        g
    }
}

/// Messages from the workload, with echo checks or one-way headers, and the
/// latency analysis.
async fn run_paced(
    args: &Args,
    a: thinstream::Association,
    mut report: Report,
    seed: Seed,
) -> anyhow::Result<Report> {
    let one_way = !args.expect_echo;
    let mut workload = schedule(args, seed)?;
    let mut upcoming = workload.next_message();
    let start = std::time::Instant::now();
    let linger = args.linger.to_std();
    let progress = !args.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let records = match &args.records {
        Some(p) => {
            let mut w = std::io::BufWriter::new(
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
            );
            writeln!(w, "message,stream,bytes,retransmissions,ack_ms,abandoned")?;
            Some(w)
        }
        None => None,
    };
    let mut tally = Tally {
        flow: StreamingFlow::new(),
        news: News::default(),
        ack: Default::default(),
        acked: 0,
        first_abandoned: BTreeMap::new(),
        records,
        max_open: 0,
    };
    // Outstanding echoes by content, oldest first; per-stream order check.
    let mut waiting: HashMap<Vec<u8>, VecDeque<(u64, std::time::Instant)>> = HashMap::new();
    let mut next_echo_per_stream: BTreeMap<u16, u64> = BTreeMap::new();
    let mut rtts = Group::default();
    let mut echoed = 0u64;
    let partial = args.lifetime_ms.is_some() || args.max_rtx.is_some();
    // Only under partial reliability (to count echoes after an abandoned
    // message): echoed indices, one per echo.
    let mut echoed_indices: Vec<(u16, u64)> = Vec::new();
    let mut next = 0u64;
    let mut padded = 0u64;
    let mut closed_error: Option<AssociationError> = None;
    let mut last_send = start;
    // The message being handed to the association (its send may wait).
    // Its output is when the library accepted the message (the timer of
    // its round trip starts then).
    type Queued<'a> = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<std::time::Instant, SendError>> + Send + 'a>,
    >;
    let mut queued: Option<Queued<'_>> = None;
    let mut queued_body: Vec<u8> = Vec::new();
    let mut queued_len = 0usize;
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // Each message at its time, to tens of microseconds (tokio's own
    // timer would send it up to 1 ms late, and the jitter between two
    // messages would end up in every recovery the next message triggers).
    let mut pacer = thinstream::clock::PreciseTimer::new();
    let due_at = |m: Option<thinstream_workload::Message>| {
        m.map_or(start, |m| start + m.at.since_epoch().to_std())
    };
    let mut last_progress = start;
    let show = |tally: &Tally, sent: u64, a: &thinstream::Association| {
        let g = tally.ack_all();
        eprint!(
            "\rsent {sent}  acked {}  ack latency p50 {:.1} ms p99 {:.1} ms  retransmissions {}   ",
            tally.acked,
            g.quantile_ms(0.5).unwrap_or(0.0),
            g.quantile_ms(0.99).unwrap_or(0.0),
            a.stats().retransmitted_chunks()
        );
    };

    loop {
        let more = upcoming.is_some() && args.duration.is_none_or(|d| start.elapsed() < d.to_std());
        let sending = more || queued.is_some();
        if !sending && (!args.expect_echo || echoed + report.corrupted >= report.sent) {
            break;
        }
        let give_up = last_send + linger;
        tokio::select! {
            r = a.recv(), if args.expect_echo => match r {
                Ok(m) => {
                    let at = std::time::Instant::now();
                    match waiting.get_mut(&m.data[..]).and_then(|q| q.pop_front()) {
                        Some((index, sent_at)) => {
                            if waiting.get(&m.data[..]).is_some_and(VecDeque::is_empty) {
                                waiting.remove(&m.data[..]);
                            }
                            echoed += 1;
                            if partial {
                                echoed_indices.push((m.stream, index));
                            }
                            rtts.record((at - sent_at).as_nanos() as u64);
                            if !m.unordered {
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
            () = pacer.sleep_until(due_at(upcoming)), if more && queued.is_none() => {
                let m = upcoming.take().expect("sending");
                upcoming = workload.next_message();
                let size = m.bytes as usize;
                let body = if one_way {
                    if size < oneway::HEADER { padded += 1; }
                    tally.news.message(next, oneway::mono_ns(), size)
                } else {
                    payload(next, size)
                };
                let options = SendOptions {
                    unordered: m.unordered || args.unordered,
                    ppid: if one_way { PPID_DATA } else { 0 },
                    lifetime: args.lifetime_ms.map(std::time::Duration::from_millis),
                    max_retransmissions: args.max_rtx,
                };
                queued_len = body.len();
                queued = Some(Box::pin(accepted_at(a.send(m.stream, body.clone(), options))));
                queued_body = if args.expect_echo { body } else { Vec::new() };
            }
            // Waits while the send buffer is full, reading echoes meanwhile:
            // an echo server with bounded buffers stops reading while its
            // echoes cannot leave, so a sender that stops reading deadlocks.
            r = async { queued.as_mut().expect("guarded").await }, if queued.is_some() => {
                queued = None;
                match r {
                    Ok(accepted) => {
                        let now = std::time::Instant::now();
                        report.sent += 1;
                        report.bytes_sent += queued_len as u64;
                        if args.expect_echo {
                            waiting.entry(std::mem::take(&mut queued_body)).or_default().push_back((next, accepted));
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
                if idle && (!args.expect_echo || echoed + report.corrupted + s.abandoned_messages >= report.sent) {
                    break;
                }
            }
            // The trace, read as it grows (bounded memory), and the
            // progress line.
            _ = tick.tick() => {
                tally.absorb(a.take_trace())?;
                if progress && last_progress.elapsed() >= std::time::Duration::from_secs(1) {
                    last_progress = std::time::Instant::now();
                    show(&tally, report.sent, &a);
                }
            }
        }
    }
    // Messages of the run: all of --count for the --iat workload (unsent
    // ones count as lost), else (and when --duration ended the run) those
    // the workload produced until it stopped.
    let paced = args.trace.is_none() && args.profile.is_none() && args.workload.is_none();
    let by_duration = args.duration.is_some_and(|d| start.elapsed() >= d.to_std());
    report.messages = if paced && !by_duration {
        args.count.unwrap_or(100)
    } else {
        report.sent + u64::from(queued.is_some())
    };
    drop(queued);

    // Within what is left of the linger time: wait until everything is
    // acknowledged.
    let give_up = last_send + linger;
    if closed_error.is_none() {
        loop {
            tally.absorb(a.take_trace())?;
            let s = a.stats();
            if s.buffered_send_bytes == 0 && s.flight_bytes == 0 {
                break;
            }
            if std::time::Instant::now() >= give_up {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    tally.absorb(a.take_trace())?;

    // One way: tell the listener the rest of the retransmission counts,
    // and read its results.
    let mut results: Option<Results> = None;
    let mut results_note = String::from("not requested");
    if one_way && closed_error.is_none() {
        let open: Vec<(u64, u32)> = tally.flow.open_retransmissions().collect();
        for (id, r) in open {
            tally.news.finished(id, r);
        }
        let ends = tally.news.end(report.sent);
        let opts = SendOptions {
            ppid: PPID_CONTROL,
            ..SendOptions::default()
        };
        results_note = "the listener returned no results (is it `thinstream listen`?)".into();
        let wait = async {
            for e in ends {
                if let Err(e) = a.send(0, e, opts).await {
                    return Err(format!("cannot send the end of the run: {e}"));
                }
            }
            loop {
                match a.recv().await {
                    Ok(m) if m.ppid == PPID_CONTROL => match Results::decode(&m.data) {
                        Some(r) => return Ok(r),
                        None => return Err("the listener's results do not parse".into()),
                    },
                    // Echoes of a plain echo server.
                    Ok(_) => {}
                    Err(e) => {
                        return Err(format!("the association ended before results came: {e}"))
                    }
                }
            }
        };
        match tokio::time::timeout(args.result_timeout.to_std(), wait).await {
            Ok(Ok(r)) => {
                results = Some(r);
                results_note = "returned".into();
            }
            Ok(Err(e)) => results_note = e,
            Err(_) => {}
        }
    }
    // The flow is the workload's messages: records of the end exchange
    // (its messages, their SACKs, the shutdown) are not analysed in one-way
    // mode.
    let absorb_more = !one_way;

    if closed_error.is_none() {
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
    if progress {
        eprintln!();
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
    let rest = a.take_trace();
    if absorb_more {
        tally.absorb(rest)?;
    }
    tally.flow.finish();
    tally.absorb(Vec::new())?;
    if let Some(w) = &mut tally.records {
        w.flush().context("writing --records")?;
    }
    // The control messages of the end exchange are not workload messages.
    let data_messages = report.sent;
    report.spurious_estimate = Some(tally.flow.spurious_estimate());
    report.acked = tally.acked.min(data_messages);
    if !args.unordered && partial {
        report.echoed_after_abandoned = echoed_indices
            .iter()
            .filter(|(stream, i)| tally.first_abandoned.get(stream).is_some_and(|a| i > a))
            .count() as u64;
    }
    let ack_all = tally.ack_all();
    let ack_rows = Results {
        groups: tally.ack.clone(),
        ..Results::default()
    }
    .rows();
    let mut notes: BTreeMap<&'static str, String> = BTreeMap::new();
    notes.insert(
        "spurious",
        "estimate: duplicate TSNs the peer reported, matched to retransmissions (no receiver trace in real mode)".into(),
    );
    for f in [
        "spurious_by_reason",
        "spurious_excluding_redundant",
        "t3_spurious",
    ] {
        notes.insert(
            f,
            "null: needs the receiver's trace (which copies had arrived when each retransmission left)".into(),
        );
    }
    notes.insert(
        "loss_rate",
        "eq. 5.2 (002 §5.1.7): packets carrying a retransmission / data packets sent, from the sender alone".into(),
    );
    notes.insert(
        "percentiles",
        "HDR histograms, 3 significant digits (within 0.1%); mean and max exact".into(),
    );
    if args.expect_echo {
        report.echoed = Some(echoed);
        report.lost = report.messages - echoed.min(report.messages);
        report.latency_ms = LatencyMs::of(&rtts);
    } else {
        report.lost = report.messages - report.acked.min(report.messages);
        report.latency_ms = LatencyMs::of(&ack_all);
    }
    let summary = match (&results, one_way) {
        (Some(r), _) => {
            report.latency = "one-way";
            report.delivered = Some(r.delivered);
            // The listener's count is the truth about delivery and order.
            report.lost = report.lost.max(report.messages.saturating_sub(r.delivered));
            report.out_of_order += r.out_of_order;
            let all = r.all();
            report.latency_ms = LatencyMs::of(&all);
            notes.insert(
                "latency",
                "application: message generated at the sender -> delivered to the listening application, one way on CLOCK_MONOTONIC, no OWD removed (compare with a scenario whose [metrics] owd = \"none\")".into(),
            );
            tally.flow.summary(
                LatencyKind::Application,
                all.latency_ms(),
                r.rows(),
                Some(r.delivered),
            )
        }
        (None, _) => {
            notes.insert(
                "latency",
                "ack-from-send: submitted -> acknowledged, measured at the sender (no one-way results)".into(),
            );
            notes.insert(
                "delivered",
                "null: only the receiver knows (no one-way results)".into(),
            );
            tally.flow.summary(
                LatencyKind::AckFromSend,
                ack_all.latency_ms(),
                ack_rows,
                None,
            )
        }
    };
    report.retransmission_causes = causes(&tally.flow);
    report.summary = Some(summary);
    report.summary_notes = notes;
    if one_way {
        report.one_way = Some(OneWay {
            clock: "CLOCK_MONOTONIC",
            results: results_note,
            padded_messages: padded,
            duplicates: results.as_ref().map(|r| r.duplicates),
            malformed: results.as_ref().map(|r| r.malformed),
            unjoined: results.as_ref().map(|r| r.unjoined),
            max_open_messages: tally.max_open as u64,
            max_untold: tally.news.max_untold as u64,
            max_pending_at_listener: results.as_ref().map(|r| r.max_pending),
        });
    }
    Ok(report)
}

/// results.json's `retransmission_causes` from the sender's counts.
fn causes(flow: &StreamingFlow) -> Vec<thinstream_lab::results::CauseRow> {
    use thinstream::trace::TxReason;
    let table = flow.reason_table();
    let mut out = Vec::new();
    for n in 1..=3u32 {
        let total: u64 = table
            .iter()
            .filter(|((k, _), _)| *k == n)
            .map(|(_, c)| c)
            .sum();
        for r in TxReason::ALL.iter().filter(|r| r.is_retransmission()) {
            let count = table.get(&(n, *r)).copied().unwrap_or(0);
            out.push(thinstream_lab::results::CauseRow {
                retransmission: n,
                or_more: n == 3,
                reason: r.name().to_string(),
                count,
                spurious: None,
                share: count as f64 / total.max(1) as f64,
            });
        }
    }
    out
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
    // Sent messages, for the sampler; and its last STALL_SAMPLES samples.
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let samples = std::sync::Arc::new(std::sync::Mutex::new(VecDeque::<StallSample>::new()));
    let sampler = tokio::spawn({
        let (a, sent, samples) = (a.clone(), sent.clone(), samples.clone());
        async move {
            let mut tick = tokio::time::interval(STALL_SAMPLE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                let sample = StallSample {
                    at_s: start.elapsed().as_secs_f64(),
                    sent: sent.load(std::sync::atomic::Ordering::Relaxed),
                    stats: a.stats(),
                };
                let mut q = samples
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if q.len() == STALL_SAMPLES {
                    q.pop_front();
                }
                q.push_back(sample);
            }
        }
    });
    for i in 0..args.count.unwrap_or(100) {
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
                let gap = now - last;
                if gap > max_gap {
                    max_gap = gap;
                    if gap >= STALL_MIN {
                        let from = (last - start).as_secs_f64() - STALL_SAMPLE_EVERY.as_secs_f64();
                        let q = samples
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        report.longest_stall = Some(Stall {
                            ended_at_s: (now - start).as_secs_f64(),
                            ms: gap.as_secs_f64() * 1e3,
                            samples: q.iter().filter(|s| s.at_s >= from).cloned().collect(),
                        });
                    }
                }
                last = now;
                report.sent += 1;
                sent.store(report.sent, std::sync::atomic::Ordering::Relaxed);
                report.bytes_sent += body.len() as u64;
            }
            Err(SendError::Closed(e)) => {
                closed_error = Some(e);
                break;
            }
            Err(e) => anyhow::bail!("cannot send message {i}: {e}"),
        }
    }
    sampler.abort();
    // Its handle on the association is gone before the close below.
    let _ = sampler.await;
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
    report.interleaving = stats.interleaving;
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
