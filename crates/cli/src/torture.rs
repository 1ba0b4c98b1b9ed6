//! `thinstream torture`: seeded adversarial simulations of the SCTP core
//! with safety and liveness checks (the `thinstream-torture` crate).

#![allow(
    clippy::disallowed_methods,
    reason = "the tool reports its own wall time; the cases themselves run on virtual time"
)]

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use thinstream_torture::{run_case, Case, Failure};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Number of seeds to run.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    seeds: u64,
    /// First seed (a failure prints the seed to pass here with `--seeds 1`).
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Worker threads (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Print every case (presets, knobs, links, workload) and its outcome,
    /// and every failure with the state of each association.
    #[arg(long, short)]
    verbose: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    /// Stop at the first failure.
    #[arg(long)]
    fail_fast: bool,
}

/// Failures kept for the final report (all are counted).
const KEEP_FAILURES: usize = 20;

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    let Some(end) = args.from.checked_add(args.seeds) else {
        eprintln!(
            "error: --from {} + --seeds {} overflows",
            args.from, args.seeds
        );
        return Ok(ExitCode::from(2));
    };
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs).build()?;
    eprintln!(
        "torture: seeds {}..{} on {jobs} thread(s); each seed picks presets, knobs, links, workload and reader stalls, then runs safety (adversary on), liveness (clean links) and shutdown phases",
        args.from,
        end - 1
    );
    let bar = ProgressBar::with_draw_target(
        Some(args.seeds),
        if args.quiet || args.verbose {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        },
    );
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} seeds {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    let failed = AtomicU64::new(0);
    let (messages, delivered, shut, datagrams) = (
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
    );
    let kept: Mutex<Vec<Failure>> = Mutex::new(Vec::new());
    let stop = std::sync::atomic::AtomicBool::new(false);
    let started = std::time::Instant::now();
    pool.install(|| {
        (args.from..end).into_par_iter().for_each(|seed| {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let case = Case::generate(seed);
            let outcome = run_case(&case);
            match &outcome {
                Ok(s) => {
                    messages.fetch_add(s.messages as u64, Ordering::Relaxed);
                    delivered.fetch_add(s.delivered as u64, Ordering::Relaxed);
                    datagrams.fetch_add(s.datagrams, Ordering::Relaxed);
                    shut.fetch_add(u64::from(s.zero_window_steps > 0), Ordering::Relaxed);
                    if args.verbose {
                        println!(
                            "{case}\n  passed: {} of {} messages delivered ({} given up under partial reliability), {} datagrams, ended at {}",
                            s.delivered, s.messages, s.given_up, s.datagrams, s.ended
                        );
                    }
                }
                Err(f) => {
                    let n = failed.fetch_add(1, Ordering::Relaxed) + 1;
                    bar.set_message(format!("{n} failed"));
                    bar.suspend(|| {
                        eprintln!("{f}");
                        if args.verbose {
                            eprintln!("{case}\n{}", f.detail);
                        }
                    });
                    if let Ok(mut k) = kept.lock() {
                        if k.len() < KEEP_FAILURES {
                            k.push(f.clone());
                        }
                    }
                    if args.fail_fast {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            }
            bar.inc(1);
        });
    });
    bar.finish_and_clear();
    let failed = failed.into_inner();
    let ran = bar.position();
    println!(
        "torture: {ran} seeds in {:.1} s: {} passed, {failed} failed; {} messages, {} delivered (the rest given up under partial reliability), {} datagrams; {} seeds shut a receive window",
        started.elapsed().as_secs_f64(),
        ran - failed,
        messages.into_inner(),
        delivered.into_inner(),
        datagrams.into_inner(),
        shut.into_inner(),
    );
    if failed > 0 {
        let kept = kept.into_inner().unwrap_or_default();
        println!("failures (replay each with the command shown):");
        for f in &kept {
            println!("  {f}");
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
