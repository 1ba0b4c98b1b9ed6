//! `thinstream listen`: accept associations, echo or discard, report.

use anyhow::Context;
use std::net::SocketAddr;
use std::process::ExitCode;
use thinstream::TransportConfig as Config;
use thinstream::{
    Association, AssociationConfig, AssociationError, Endpoint, EndpointConfig, Event, SendError,
    SendOptions,
};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Local UDP address to listen on (SCTP over UDP, RFC 6951).
    #[arg(long, default_value = "127.0.0.1:9899")]
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
    /// Print each association as it starts and ends.
    #[arg(long, short)]
    verbose: bool,
}

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
}

async fn serve(a: Association, echo: bool, id: u64, verbose: bool) -> PeerReport {
    let mut r = PeerReport {
        peer: a.remote_addr().map(|p| p.to_string()).unwrap_or_default(),
        ..PeerReport::default()
    };
    if verbose {
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
    let end = loop {
        match a.recv().await {
            Ok(m) => {
                r.messages += 1;
                r.bytes += m.data.len() as u64;
                if echo {
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
    r
}

async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut transport = args.preset.clone();
    transport.local_port = args.sctp_port;
    let mut config = EndpointConfig::server();
    config.association(AssociationConfig::from_transport(transport));
    if let Some(seed) = args.testing_fixed_seed {
        config.testing_fixed_seed(seed);
    }
    config.segmentation_offload(!args.no_gso);
    let endpoint = Endpoint::bind(args.bind, config)?;
    let local = endpoint.local_addr();
    let echo = !args.discard;
    eprintln!(
        "listening on udp {local} ({}), sctp port {}",
        if echo { "echo" } else { "discard" },
        args.sctp_port
    );
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
                let verbose = args.verbose;
                tokio::spawn(async move {
                    let r = serve(a, echo, id, verbose).await;
                    let _ = tx.send((id, r)).await;
                });
            }
            Some((id, report)) = done_rx.recv() => {
                open.remove(&id);
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
