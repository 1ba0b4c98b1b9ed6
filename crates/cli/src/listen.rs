//! `thinstream listen`: accept associations, echo or discard, report.
//!
//! One-way messages of `thinstream send` (ppid [`PPID_DATA`]) are measured,
//! never echoed: delivery latency from the header's CLOCK_MONOTONIC send
//! time, joined with the sender's retransmission counts in bounded memory
//! ([`crate::oneway::Joiner`]), returned to the sender at the end.

use anyhow::Context;
use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use thinstream::TransportConfig as Config;
use thinstream::{
    Association, AssociationConfig, AssociationError, Endpoint, EndpointConfig, Event, SendError,
    SendOptions,
};
use thinstream_metrics::{LatencyMs, RetransmissionRow};

use crate::oneway::{self, End, Group, Joiner, PPID_CONTROL, PPID_DATA};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Local UDP address to listen on (SCTP over UDP, RFC 6951).
    #[arg(long, default_value = "127.0.0.1:9899", value_parser = crate::util::parse_socket_addr)]
    bind: SocketAddr,
    /// Send every message back on the stream it came from (the default).
    #[arg(long, conflicts_with = "discard")]
    echo: bool,
    /// Count and drop every message.
    #[arg(long)]
    discard: bool,
    /// Local SCTP port (in the SCTP common header).
    #[arg(long, default_value_t = 5000)]
    sctp_port: u16,
    /// Exit after the first association ends (its report is the result).
    #[arg(long)]
    once: bool,
    /// Write the per-association reports as JSON to this file on exit.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Transport configuration: a preset plus mechanism tokens, e.g. `rfc`,
    /// `linux`, `thin`, `linux+lt+mfr`, `rfc+rdb+minrto` (list: `thinstream mechanisms`).
    #[arg(long, alias = "mech", default_value = "production", value_parser = crate::util::parse_preset)]
    preset: Config,
    #[command(flatten)]
    endpoint: crate::util::EndpointArgs,
    /// Largest SCTP packet (common header and chunks) in one UDP datagram
    /// for the associations peers open: `auto` (default: start at 1472 B
    /// (IPv6: 1452) and probe up to the bound address's route MTU, at most
    /// 16 KiB on loopback; RFC 8899) or a fixed size in bytes, 128..=65507.
    #[arg(long, default_value = "auto", value_parser = crate::util::parse_pmtu)]
    pmtu: thinstream::PathMtu,
    /// Print each association as it starts and ends.
    #[arg(long, short)]
    verbose: bool,
    /// One-way messages: write one line per message to this CSV file as it
    /// is joined with its retransmission count:
    /// association,message,latency_ms,retransmissions. Without it nothing
    /// per message is kept beyond the messages in flight (HDR histograms,
    /// 3 significant digits, hold the latencies).
    #[arg(long)]
    records: Option<std::path::PathBuf>,
    /// No live progress line (it is shown only when stderr is a terminal:
    /// one-way messages delivered, one-way latency p50/p99, once a second).
    #[arg(long, short)]
    quiet: bool,
}

/// What the progress line shows, over all associations.
#[derive(Default)]
struct Live {
    delivered: u64,
    latency: Group,
}

type Records = Arc<Mutex<Option<std::io::BufWriter<std::fs::File>>>>;

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    // One thread: the endpoint task and the per-association tasks hand
    // work to each other without waking another thread (lower latency;
    // one endpoint task is one core at most anyway).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(run(args))
}

/// Counters of one association as the listener saw it.
#[derive(Clone, Debug, Default, serde::Serialize)]
struct PeerReport {
    peer: String,
    messages: u64,
    bytes: u64,
    echoed: u64,
    /// Times the peer restarted the association (RFC 9260 §5.2.4).
    restarts: u64,
    /// `None` for a graceful end, the reason otherwise.
    error: Option<String>,
    /// One-way messages, if any came.
    #[serde(skip_serializing_if = "Option::is_none")]
    one_way: Option<OneWayReport>,
}

/// The one-way measurement of one association (the listener's view; the
/// sender's `--json` holds the same plus its own counts).
#[derive(Clone, Debug, serde::Serialize)]
struct OneWayReport {
    delivered: u64,
    duplicates: u64,
    malformed: u64,
    unjoined: u64,
    max_pending: u64,
    out_of_order: u64,
    /// Whether the sender's end-of-run message came (else latencies of
    /// messages without retransmission news are not in the rows).
    ended: bool,
    latency_ms: Option<LatencyMs>,
    by_retransmissions: Vec<RetransmissionRow>,
}

/// The per-association context of [`serve`].
#[derive(Clone)]
struct Ctx {
    echo: bool,
    id: u64,
    verbose: bool,
    live: Arc<Mutex<Live>>,
    records: Records,
}

fn write_filed(ctx: &Ctx, j: &mut Joiner) {
    let mut rec = ctx.records.lock().expect("not poisoned");
    let Some(w) = rec.as_mut() else { return };
    for f in j.drain_filed() {
        // A full disk loses records, not the measurement.
        let _ = writeln!(
            w,
            "{},{},{:.3},{}",
            ctx.id,
            f.id,
            f.latency_ns as f64 / 1e6,
            f.retransmissions
        );
    }
}

async fn serve(a: Association, ctx: Ctx) -> PeerReport {
    let id = ctx.id;
    let mut r = PeerReport {
        peer: a.remote_addr().map(|p| p.to_string()).unwrap_or_default(),
        ..PeerReport::default()
    };
    if ctx.verbose {
        eprintln!("assoc{id}: established with {}", r.peer);
    }
    let events = a.clone();
    let restarts = tokio::spawn(async move {
        let mut n = 0u64;
        while let Some(e) = events.event().await {
            if e == Event::PeerRestarted {
                eprintln!("assoc{id}: the peer restarted the association");
                n += 1;
            }
        }
        n
    });
    let mut joiner: Option<Joiner> = None;
    let mut ended = false;
    let keep = ctx.records.lock().expect("not poisoned").is_some();
    let end = loop {
        match a.recv().await {
            Ok(m) if m.ppid == PPID_DATA => {
                let now = oneway::mono_ns();
                r.messages += 1;
                r.bytes += m.data.len() as u64;
                let j = joiner.get_or_insert_with(|| Joiner::new(keep));
                let before = j.results().delivered;
                if j.on_data(&m.data, now, m.stream, !m.unordered).is_some()
                    && j.results().delivered > before
                {
                    if let Some(h) = oneway::DataHeader::parse(&m.data) {
                        let mut live = ctx.live.lock().expect("not poisoned");
                        live.delivered += 1;
                        live.latency.record(now.saturating_sub(h.sent_ns));
                    }
                }
                if keep {
                    write_filed(&ctx, j);
                }
            }
            Ok(m) if m.ppid == PPID_CONTROL => {
                let Some(e) = End::parse(&m.data) else {
                    continue;
                };
                let j = joiner.get_or_insert_with(|| Joiner::new(keep));
                j.on_end(&e);
                if keep {
                    write_filed(&ctx, j);
                }
                if e.last {
                    ended = true;
                    let opts = SendOptions {
                        ppid: PPID_CONTROL,
                        ..SendOptions::default()
                    };
                    match a.send(m.stream, j.results().encode(), opts).await {
                        Ok(()) => {}
                        Err(SendError::Closed(e)) => break e,
                        Err(e) => eprintln!("assoc{id}: cannot return the one-way results: {e}"),
                    }
                }
            }
            Ok(m) => {
                r.messages += 1;
                r.bytes += m.data.len() as u64;
                if ctx.echo {
                    let opts = SendOptions {
                        unordered: m.unordered,
                        ppid: m.ppid,
                        ..SendOptions::default()
                    };
                    match a.send(m.stream, m.data, opts).await {
                        Ok(()) => r.echoed += 1,
                        Err(SendError::Closed(e)) => break e,
                        // The peer sees the echo missing.
                        Err(_) => {}
                    }
                }
            }
            Err(e) => break e,
        }
    };
    r.restarts = restarts.await.unwrap_or(0);
    if end != AssociationError::Closed {
        r.error = Some(end.to_string());
    }
    r.one_way = joiner.map(|j| {
        let res = j.results();
        OneWayReport {
            delivered: res.delivered,
            duplicates: res.duplicates,
            malformed: res.malformed,
            unjoined: res.unjoined,
            max_pending: res.max_pending,
            out_of_order: res.out_of_order,
            ended,
            latency_ms: res.all().latency_ms(),
            by_retransmissions: res.rows(),
        }
    });
    r
}

async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut transport = args.preset.clone();
    transport.local_port = args.sctp_port;
    let mut config = EndpointConfig::server();
    let mut association = AssociationConfig::from_transport(transport);
    association.pmtu(args.pmtu);
    config.association(association);
    args.endpoint.apply(&mut config);
    let endpoint = Endpoint::bind(args.bind, config)?;
    let local = endpoint.local_addr();
    let echo = !args.discard;
    eprintln!(
        "listening on udp {local} ({}), sctp port {}",
        if echo { "echo" } else { "discard" },
        args.sctp_port
    );
    let records: Records = Arc::new(Mutex::new(match &args.records {
        Some(p) => {
            let mut w = std::io::BufWriter::new(
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
            );
            writeln!(w, "association,message,latency_ms,retransmissions")?;
            Some(w)
        }
        None => None,
    }));
    let live: Arc<Mutex<Live>> = Arc::default();
    let progress = !args.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<(u64, PeerReport)>(64);
    let mut open: std::collections::BTreeMap<u64, Association> = Default::default();
    let mut ended: Vec<PeerReport> = Vec::new();
    let mut next_id = 0u64;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            inc = endpoint.accept() => {
                let Some(inc) = inc else { anyhow::bail!("the listener's endpoint stopped unexpectedly") };
                let Ok(a) = inc.accept() else { continue };
                let id = next_id;
                next_id += 1;
                open.insert(id, a.clone());
                let tx = done_tx.clone();
                let ctx = Ctx {
                    echo,
                    id,
                    verbose: args.verbose,
                    live: live.clone(),
                    records: records.clone(),
                };
                tokio::spawn(async move {
                    let r = serve(a, ctx).await;
                    let _ = tx.send((id, r)).await;
                });
            }
            _ = tick.tick(), if progress => {
                let l = live.lock().expect("not poisoned");
                if l.delivered > 0 {
                    eprint!(
                        "\rassociations {}  one-way delivered {}  latency p50 {:.1} ms p99 {:.1} ms   ",
                        open.len(),
                        l.delivered,
                        l.latency.quantile_ms(0.5).unwrap_or(0.0),
                        l.latency.quantile_ms(0.99).unwrap_or(0.0)
                    );
                }
            }
            Some((id, report)) = done_rx.recv() => {
                open.remove(&id);
                if progress {
                    eprintln!();
                }
                eprintln!(
                    "assoc{id}: ended ({}): {} messages, {} bytes received, {} echoed",
                    report.error.as_deref().unwrap_or("graceful"),
                    report.messages, report.bytes, report.echoed
                );
                ended.push(report);
                if args.once { break; }
            }
            _ = &mut ctrl_c => {
                for a in open.values() {
                    let s = a.stats();
                    ended.push(PeerReport {
                        peer: a.remote_addr().map(|p| p.to_string()).unwrap_or_default(),
                        messages: s.messages_received,
                        bytes: s.bytes_delivered,
                        ..PeerReport::default()
                    });
                }
                break;
            }
        }
    }
    if let Some(w) = records.lock().expect("not poisoned").as_mut() {
        w.flush().context("writing --records")?;
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&serde_json::json!({ "associations": ended }))?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    let failed = ended.iter().any(|r| r.error.is_some());
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
