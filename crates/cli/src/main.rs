//! The `thinstream` command line. Thin: parses arguments, calls the library
//! crates, prints. Every subcommand lives in its own module.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod compare;
mod emulate;
mod emulate_tun;
mod listen;
mod mechanisms;
mod merge;
mod oneway;
mod real;
mod real_tcp;
mod reproduce;
mod run;
mod sched;
mod send;
mod torture;
mod util;

/// Low-latency reliable messaging for thin streams, and the laboratory that measures it.
#[derive(Parser, Debug)]
#[command(name = "thinstream", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once per process; boxing would only obscure the arguments"
)]
enum Command {
    /// Accept SCTP-over-UDP associations and echo or discard what arrives.
    Listen(listen::Args),
    /// Send a thin stream of messages to a listener and report latency.
    Send(send::Args),
    /// Run a scenario file in the simulator and write results.json.
    Run(run::Args),
    /// Join the shard directories of `thinstream run --shard i/n` into the
    /// results.json (and results.csv) of one full run.
    ///
    /// Every shard 0/n .. n-1/n of one scenario and set of options must be
    /// given, each once; shards of different scenarios, options, shard
    /// counts or thinstream versions are refused. The merged results equal
    /// those of a full `thinstream run` with the same options (the wall_s
    /// fields apart: the merged one is the shards' sum).
    Merge(merge::Args),
    /// Two stored results side by side as markdown: latency by
    /// retransmission number (count, mean, p99) per variant and latency
    /// kind, with the difference in percent (e.g. a simulated run against
    /// the same scenario run with `run --real`).
    Compare(compare::Args),
    /// Reproduce the documents' experiments in the simulator and write a report.
    Reproduce(reproduce::Args),
    /// Relay UDP through emulated links in real time (delay, loss, rate, ...).
    ///
    /// Every source address other than --to is a client (up to --max-clients;
    /// further ones are counted and discarded). Each client gets its own
    /// upstream socket (an ephemeral port on the --listen address: the server
    /// sees one peer per client, as behind a NAT) and its own --forward and
    /// --reverse links, seeded from --seed and the client's index (order of
    /// first appearance). Client datagrams pass its --forward link to --to;
    /// datagrams from --to to its upstream socket pass its --reverse link back
    /// to the client. Links use the scenario files' netem-like words, e.g.
    /// "delay 50ms 5ms loss 5%", "loss gemodel 1% 10% 70% 0.1%",
    /// "rate 2mbit limit 50", "reorder 1% gap 5", "duplicate 1%",
    /// "outage 10s 2s", "loss-trace 0010... repeat".
    ///
    /// Statistics (per direction, totals and per client: packets in/out, drops
    /// by cause, release timing error p50/p99/max) are printed on exit: Ctrl-C,
    /// --duration, or --count.
    ///
    /// With --tun (root): the same links between two network namespaces the
    /// command creates and removes, for kernel TCP or any other program:
    /// `thinstream emulate --tun --forward "delay 50ms" --reverse "delay 50ms"
    /// --run-b "iperf3 -s -1" --run-a "iperf3 -c 10.201.0.2"`, or enter the
    /// sides with `ip netns exec ts-a-<pid> CMD` / `ts-b-<pid>`.
    Emulate(emulate::Args),
    /// List the SCTP mechanisms and presets (or expand one preset string).
    Mechanisms(mechanisms::Args),
    /// Torture the SCTP core in the simulator: random adversarial cases
    /// from seeds, with safety and liveness checks.
    ///
    /// Each seed picks both ends' presets (random bases, switches and
    /// parameters), path MTU, buffers, streams, interleaving, 1..3
    /// associations, workloads (thin, bursty, back to back; 12 B .. 20 KB;
    /// ordered/unordered; reliable or partially reliable), reader stalls and
    /// a link adversary per direction (delay, jitter, loss up to 50 % random
    /// or in bursts, reordering, duplication, corruption, rate limits,
    /// blackouts). Safety: every delivered message was sent, is intact,
    /// arrives once and in order within its ordered stream, association
    /// accounting holds after every step, cwnd >= 1 MTU, no association
    /// fails. Liveness: with the adversary replaced by clean links, every
    /// reliable message arrives within a bound, then a graceful shutdown
    /// completes. A failure prints its replay command; exit status 1.
    Torture(torture::Args),
    /// Internal: one run of `thinstream run --real`, inside the network
    /// namespace its parent made.
    #[command(hide = true)]
    RealWorker(real::WorkerArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Listen(args) => listen::main(args),
        Command::Send(args) => send::main(args),
        Command::Run(args) => run::main(args),
        Command::Merge(args) => merge::main(args),
        Command::Compare(args) => compare::main(args),
        Command::Reproduce(args) => reproduce::main(args),
        Command::Mechanisms(args) => mechanisms::main(args),
        Command::Torture(args) => torture::main(args),
        Command::Emulate(args) => emulate::main(args),
        Command::RealWorker(args) => real::worker(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("thinstream: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
