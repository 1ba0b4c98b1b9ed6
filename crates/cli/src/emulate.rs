//! `thinstream emulate`: a real-time UDP relay applying the link model in
//! each direction (the loop is `thinstream::emulate`; this parses, prints
//! and writes JSON).

use anyhow::Context;
use std::net::SocketAddr;
use std::process::ExitCode;
use thinstream::emulate::{DirectionReport, Emulator, EmulatorConfig, EmulatorReport};
use thinstream_base::Duration;
use thinstream_link::{DropCause, HoldLimit, LinkConfig};

use crate::util::out;

/// Arguments; the long help is the `Emulate` variant's doc in `main.rs`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Address the client sends to (port 0: any free port; the bound address
    /// is printed on the first line of output).
    #[arg(long)]
    listen: SocketAddr,
    /// The server datagrams are relayed to.
    #[arg(long)]
    to: SocketAddr,
    /// Client → server link (netem-like words; empty = perfect).
    #[arg(long, default_value = "")]
    forward: String,
    /// Server → client link (default: perfect).
    #[arg(long, default_value = "")]
    reverse: String,
    /// Seed of the links' randomness (loss, jitter, reordering, ...).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the statistics as JSON to this file on exit.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Stop after this long (e.g. `30s`); datagrams still held are not sent.
    #[arg(long, value_parser = crate::util::parse_duration)]
    duration: Option<Duration>,
    /// Stop reading after this many datagrams (both directions), send what
    /// is held, then stop.
    #[arg(long)]
    count: Option<u64>,
    /// Most datagrams held per direction (memory bound; extra copies are
    /// dropped at the tail and counted as hold-overflow).
    #[arg(long, default_value_t = HoldLimit::default().packets)]
    hold_packets: usize,
    /// Most payload bytes held per direction.
    #[arg(long, default_value_t = HoldLimit::default().bytes)]
    hold_bytes: usize,
    /// Most clients (source addresses); each gets its own upstream socket
    /// and links. Datagrams from further clients are counted and dropped.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_clients: u32,
    /// Allow --listen/--to outside 127.0.0.0/8 and ::1.
    #[arg(long)]
    allow_non_loopback: bool,
    /// Print only the first line (the bound address), not the statistics.
    #[arg(long, short)]
    quiet: bool,
}

fn link(text: &str, which: &str) -> anyhow::Result<LinkConfig> {
    LinkConfig::parse_netem(text).with_context(|| format!("--{which} {text:?}"))
}

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    let config = EmulatorConfig {
        listen: args.listen,
        to: args.to,
        forward: link(&args.forward, "forward")?,
        reverse: link(&args.reverse, "reverse")?,
        seed: args.seed,
        limit: HoldLimit {
            packets: args.hold_packets,
            bytes: args.hold_bytes,
        },
        allow_non_loopback: args.allow_non_loopback,
        duration: args.duration,
        count: args.count,
        max_clients: args.max_clients as usize,
    };
    // One thread: the relay loop is one task and one core.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let report = rt.block_on(async {
        let emulator = Emulator::bind(config)?;
        out(&format!(
            "emulate: listening on {} -> {}\n",
            emulator.local_addr(),
            args.to
        ));
        let stop = async {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        anyhow::Ok(emulator.run(stop).await?)
    })?;
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    if !args.quiet {
        out(&render(&report));
    }
    Ok(ExitCode::SUCCESS)
}

fn render(r: &EmulatorReport) -> String {
    let mut s = format!(
        "emulate: stopped by {} after {:.1} s; {} client{}{}\n",
        r.stopped_by,
        r.elapsed_s,
        r.clients.len(),
        if r.clients.len() == 1 { "" } else { "s" },
        if r.clients.len() > 1 {
            " (totals, then per client)"
        } else {
            ""
        }
    );
    for (name, d) in [("forward", &r.forward), ("reverse", &r.reverse)] {
        s += &direction(name, d);
    }
    for c in r.clients.iter().filter(|_| r.clients.len() > 1) {
        s += &format!(
            "  client {} {} (upstream {}):\n",
            c.index, c.addr, c.upstream
        );
        for (name, d) in [("forward", &c.forward), ("reverse", &c.reverse)] {
            s += &direction(name, d);
        }
    }
    if r.unknown_source.packets + r.server_at_listen.packets + r.over_limit.packets > 0 {
        s += &format!(
            "  discarded: {} from clients over the limit of {}, {} from unknown sources, {} from the server at the listening address\n",
            r.over_limit.packets, r.max_clients, r.unknown_source.packets, r.server_at_listen.packets
        );
    }
    s
}

fn direction(name: &str, d: &DirectionReport) -> String {
    let l = &d.link_stats;
    let mut drops: Vec<String> = DropCause::ALL
        .iter()
        .filter(|c| l.dropped(**c).packets > 0)
        .map(|c| format!("{c} {}", l.dropped(*c).packets))
        .collect();
    if d.hold_overflow.packets > 0 {
        drops.push(format!("hold-overflow {}", d.hold_overflow.packets));
    }
    let e = &d.release_error;
    format!(
        "  {name} [{}]: in {} out {} dropped {}{} duplicated {} reordered {} corrupted {} held at exit {}\n    release error (actual - scheduled): p50 {:.0} us, p99 {:.0} us, p99.9 {:.0} us, max {:.0} us over {} datagrams\n",
        if d.link.is_empty() { "perfect" } else { &d.link },
        d.received.packets,
        d.sent.packets,
        l.dropped_total().packets + d.hold_overflow.packets,
        if drops.is_empty() { String::new() } else { format!(" ({})", drops.join(", ")) },
        l.duplicated,
        l.reordered,
        l.corrupted,
        d.held_at_exit,
        e.p50_us,
        e.p99_us,
        e.p999_us,
        e.max_us,
        e.count,
    )
}
