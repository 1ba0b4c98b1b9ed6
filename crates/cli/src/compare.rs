//! `thinstream compare A B`: two stored results side by side (markdown).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args as ClapArgs;
use thinstream_lab::Results;

#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// The first results.json (or the folder holding it): the reference,
    /// e.g. the simulated run.
    pub(crate) a: PathBuf,
    /// The second results.json (or its folder), e.g. the same scenario
    /// run with --real.
    pub(crate) b: PathBuf,
    /// Labels of A and B in the tables (default: each one's mode,
    /// `simulated` or `real`): `--names sim,real`.
    #[arg(long, value_delimiter = ',')]
    pub(crate) names: Option<Vec<String>>,
    /// Mark differences larger than this, percent.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) limit: f64,
    /// Never mark a difference of at most this many milliseconds (the
    /// timing resolution of a real host; latencies near 0 would otherwise
    /// differ by hundreds of percent).
    #[arg(long, default_value_t = thinstream_lab::compare::FLOOR_MS)]
    pub(crate) floor_ms: f64,
    /// Write the markdown here instead of standard output.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
}

fn load(path: &Path) -> anyhow::Result<Results> {
    let file = if path.is_dir() {
        path.join("results.json")
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    Results::from_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    if !(args.limit.is_finite() && args.limit >= 0.0) {
        bail!(
            "--limit must be a non-negative percentage, not {}",
            args.limit
        );
    }
    if args.names.as_ref().is_some_and(|n| n.len() != 2) {
        bail!("--names takes two labels, A's and B's: --names sim,real");
    }
    if !(args.floor_ms.is_finite() && args.floor_ms >= 0.0) {
        bail!(
            "--floor-ms must be a non-negative number of milliseconds, not {}",
            args.floor_ms
        );
    }
    let a = load(&args.a)?;
    let b = load(&args.b)?;
    if a.scenario != b.scenario {
        eprintln!(
            "thinstream: note: comparing different scenarios ({} and {})",
            a.scenario, b.scenario
        );
    }
    let names = match &args.names {
        Some(n) => (n[0].clone(), n[1].clone()),
        None if a.mode == b.mode => (format!("A ({})", a.mode), format!("B ({})", b.mode)),
        None => (a.mode.clone(), b.mode.clone()),
    };
    let md =
        thinstream_lab::compare::markdown(&a, &b, (&names.0, &names.1), args.limit, args.floor_ms);
    match &args.out {
        Some(path) => {
            std::fs::write(path, &md)
                .with_context(|| format!("cannot write {}", path.display()))?;
            crate::util::out(&format!("wrote {}\n", path.display()));
        }
        None => crate::util::out(&md),
    }
    Ok(ExitCode::SUCCESS)
}
