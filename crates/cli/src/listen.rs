//! `thinstream listen`: accept associations, echo or discard, report.

use anyhow::Context;
use std::net::SocketAddr;
use std::process::ExitCode;
use thinstream_base::Seed;
use thinstream_net::{Clock, Mode, PeerReport, Server, ServerEvent};
use thinstream_proto::{Config, Endpoint};

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
    #[arg(long, alias = "mech", default_value = "rfc", value_parser = crate::util::parse_preset)]
    preset: Config,
    /// Seed for verification tags, initial TSNs and the cookie secret
    /// (default: from the OS clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Print each association as it starts and ends.
    #[arg(long, short)]
    verbose: bool,
}

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let socket = tokio::net::UdpSocket::bind(args.bind)
        .await
        .with_context(|| format!("cannot bind UDP {}", args.bind))?;
    let local = socket.local_addr()?;
    let mode = if args.discard {
        Mode::Discard
    } else {
        Mode::Echo
    };
    let config = Config {
        local_port: args.sctp_port,
        ..args.preset.clone()
    };
    let seed = Seed(args.seed.unwrap_or_else(crate::send::seed_from_clock));
    let server = Server::new(Endpoint::new(config, local, seed, true), mode);
    let mut handle = thinstream_net::spawn(socket, server, Clock::new(), false)?;
    eprintln!(
        "listening on udp {local} ({}), sctp port {}",
        if mode == Mode::Echo {
            "echo"
        } else {
            "discard"
        },
        args.sctp_port
    );
    let mut ended: Vec<PeerReport> = Vec::new();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            ev = handle.next_event() => match ev {
                Some((_, ServerEvent::Established(id, peer))) => {
                    if args.verbose { eprintln!("{id}: established with {peer}"); }
                }
                Some((_, ServerEvent::Ended(id, report))) => {
                    eprintln!(
                        "{id}: ended ({}): {} messages, {} bytes received, {} echoed",
                        report.error.as_deref().unwrap_or("graceful"),
                        report.messages, report.bytes, report.echoed
                    );
                    ended.push(report);
                    if args.once { break; }
                }
                None => anyhow::bail!("the listener's driver stopped unexpectedly"),
            },
            _ = &mut ctrl_c => {
                let open = handle.call(|s: &mut Server, _| s.open_reports()).await.unwrap_or_default();
                ended.extend(open);
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
