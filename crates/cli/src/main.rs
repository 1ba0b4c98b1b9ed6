//! The `thinstream` command line. Thin: parses arguments, calls the library
//! crates, prints. Every subcommand lives in its own module.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod listen;
mod mechanisms;
mod reproduce;
mod run;
mod send;
mod util;

/// Low-latency reliable messaging for thin streams, and the laboratory that measures it.
#[derive(Parser, Debug)]
#[command(name = "thinstream", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Accept SCTP-over-UDP associations and echo or discard what arrives.
    Listen(listen::Args),
    /// Send a thin stream of messages to a listener and report latency.
    Send(send::Args),
    /// Run a scenario file in the simulator and write results.json.
    Run(run::Args),
    /// Reproduce the documents' experiments in the simulator and write a report.
    Reproduce(reproduce::Args),
    /// List the SCTP mechanisms and presets (or expand one preset string).
    Mechanisms(mechanisms::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Listen(args) => listen::main(args),
        Command::Send(args) => send::main(args),
        Command::Run(args) => run::main(args),
        Command::Reproduce(args) => reproduce::main(args),
        Command::Mechanisms(args) => mechanisms::main(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("thinstream: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
