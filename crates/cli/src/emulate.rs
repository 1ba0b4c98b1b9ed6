//! `thinstream emulate`: a real-time UDP relay applying the link model in
//! each direction (the loop is `thinstream::emulate`; this parses, prints
//! and writes JSON).

use anyhow::Context;
use std::net::SocketAddr;
use std::process::ExitCode;
use thinstream::emulate::{DirectionReport, Emulator, EmulatorConfig, EmulatorReport};
use thinstream_base::Duration;
use thinstream_link::{DropCause, HoldLimit, LinkConfig};

use crate::sched::Priority;
use crate::util::out;

/// Arguments; the long help is the `Emulate` variant's doc in `main.rs`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    // Fields are read by `emulate_tun` too.
    /// Address the client sends to (port 0: any free port; the bound address
    /// is printed on the first line of output).
    #[arg(long, required_unless_present = "tun", conflicts_with = "tun",
          value_parser = crate::util::parse_socket_addr)]
    listen: Option<SocketAddr>,
    /// The server datagrams are relayed to.
    #[arg(long, required_unless_present = "tun", conflicts_with = "tun",
          value_parser = crate::util::parse_socket_addr)]
    to: Option<SocketAddr>,
    /// Namespace mode (root only): create two network namespaces
    /// `ts-a-<pid>` (10.201.0.1) and `ts-b-<pid>` (10.201.0.2), each with a
    /// TUN device and a point-to-point route to the other, and apply
    /// --forward to IP packets a → b and --reverse to b → a. Nothing is
    /// routed from the root namespace. Enter a side with
    /// `ip netns exec ts-a-<pid> CMD` (the names are printed on the first
    /// line), or use --run-a/--run-b. Namespaces and devices are removed on
    /// exit (Ctrl-C, SIGTERM, --duration, error).
    #[arg(long)]
    pub(crate) tun: bool,
    /// With --tun: a shell command run inside namespace a (`sh -c`), started
    /// --a-after after --run-b. The emulator stops when it exits (after
    /// waiting up to --b-grace for the b command) and exits with its status.
    #[arg(long, requires = "tun")]
    pub(crate) run_a: Option<String>,
    /// With --tun: a shell command run inside namespace b, started first
    /// (typically the server, listening on 10.201.0.2). Stopped (SIGTERM,
    /// then SIGKILL) if still running when the emulator stops.
    #[arg(long, requires = "tun")]
    pub(crate) run_b: Option<String>,
    /// With --run-a: delay between starting --run-b and --run-a.
    #[arg(long, default_value = "500ms", value_parser = crate::util::parse_duration)]
    pub(crate) a_after: Duration,
    /// With --run-a: after the a command exits, keep relaying while waiting
    /// this long for the b command to exit by itself (e.g. after reading
    /// the end of a TCP stream still in flight through the links).
    #[arg(long, default_value = "5s", value_parser = crate::util::parse_duration)]
    pub(crate) b_grace: Duration,
    /// Client → server link (netem-like words; empty = perfect).
    #[arg(long, default_value = "")]
    pub(crate) forward: String,
    /// Server → client link (default: perfect).
    #[arg(long, default_value = "")]
    pub(crate) reverse: String,
    /// Seed of the links' randomness (loss, jitter, reordering, ...).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Write the statistics as JSON to this file on exit.
    #[arg(long)]
    pub(crate) json: Option<std::path::PathBuf>,
    /// Stop after this long (e.g. `30s`); datagrams still held are not sent.
    #[arg(long, value_parser = crate::util::parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Stop reading after this many datagrams (both directions), send what
    /// is held, then stop.
    #[arg(long, conflicts_with = "tun")]
    count: Option<u64>,
    /// Most datagrams held per direction (memory bound; extra copies are
    /// dropped at the tail and counted as hold-overflow).
    #[arg(long, default_value_t = HoldLimit::default().packets)]
    pub(crate) hold_packets: usize,
    /// Most payload bytes held per direction.
    #[arg(long, default_value_t = HoldLimit::default().bytes)]
    pub(crate) hold_bytes: usize,
    /// Most clients (source addresses); each gets its own upstream socket
    /// and links. Datagrams from further clients are counted and dropped.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_clients: u32,
    /// One forward and one reverse link for all clients (one path carrying
    /// everyone's datagrams: its losses, queue and rate are shared), instead
    /// of a pair per client.
    #[arg(long, conflicts_with = "tun")]
    shared_links: bool,
    /// Never sleep: poll sockets and clock continuously, so releases leave
    /// within microseconds of their time instead of after the OS's wake-up
    /// latency. Keeps one core busy for the whole run, traffic or not: use
    /// it where a core is free (on a 2-core machine it slows the programs
    /// being measured instead).
    #[arg(long, conflicts_with = "tun")]
    busy_poll: bool,
    /// Scheduling of the relay thread. `auto`: the real-time policy
    /// (SCHED_FIFO, priority 10) when the system allows it (root or
    /// CAP_SYS_NICE), so a release is not kept waiting for a core by the
    /// programs being measured; normal otherwise, and with --busy-poll.
    /// `realtime`: SCHED_FIFO or an error. `normal`: leave it as started.
    /// Programs started with --run-a/--run-b run under the normal policy.
    /// The statistics and --json say which applied.
    #[arg(long, value_enum, default_value_t = Priority::Auto)]
    pub(crate) priority: Priority,
    /// Allow --listen/--to outside 127.0.0.0/8 and ::1.
    #[arg(long)]
    allow_non_loopback: bool,
    /// Print only the first line (the bound address), not the statistics.
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

pub(crate) fn link(text: &str, which: &str) -> anyhow::Result<LinkConfig> {
    LinkConfig::parse_netem(text).with_context(|| format!("--{which} {text:?}"))
}

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    if args.tun {
        return crate::emulate_tun::main(&args);
    }
    let (Some(listen), Some(to)) = (args.listen, args.to) else {
        anyhow::bail!("--listen and --to are required without --tun");
    };
    let config = EmulatorConfig {
        listen,
        to,
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
        link_seeds: None,
        shared_links: args.shared_links,
        busy_poll: args.busy_poll,
    };
    // One thread: the relay loop is one task and one core, this one.
    let scheduling = crate::sched::apply(args.priority, args.busy_poll)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let report = rt.block_on(async {
        let emulator = Emulator::bind(config)?;
        out(&format!(
            "emulate: listening on {} -> {}\n",
            emulator.local_addr(),
            to
        ));
        let stop = async {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        anyhow::Ok(emulator.run(stop).await?)
    })?;
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    if !args.quiet {
        out(&render(&report));
        out(&format!("  relay thread: {}\n", scheduling.text));
    }
    Ok(ExitCode::SUCCESS)
}

/// The report as JSON, with `scheduling`: what the relay thread ran under
/// ([`crate::sched::with_scheduling`]).
pub(crate) fn write_json(
    path: &std::path::Path,
    report: &impl serde::Serialize,
) -> anyhow::Result<()> {
    let value = crate::sched::with_scheduling(serde_json::to_value(report)?);
    let text = serde_json::to_string_pretty(&value)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
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

pub(crate) fn direction(name: &str, d: &DirectionReport) -> String {
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
