//! `thinstream run SCENARIO`: expand a scenario file, run it in the
//! simulator, print the tables and write `results.json`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Context};
use clap::Args as ClapArgs;
use thinstream_base::Duration;
use thinstream_lab::shard::ShardSpec;
use thinstream_lab::{
    run_all, wall, CapturePoint, Plan, PlanOptions, Results, RunOptions, Scenario,
};

/// Where `--pcap` sees packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PcapAt {
    Send,
    Receive,
}

#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// Scenario file (TOML; see scenarios/README.md).
    pub(crate) scenario: PathBuf,
    /// Master seed (default: the scenario's `seed`).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Output folder for results.json (default: out/<scenario name>).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Write the pcap capture of one run (the first, or --pcap-run) here.
    /// SCTP rides in UDP (decode with `tshark -d udp.port==9899,sctp`); the
    /// TCP model's segments are written as TCP packets.
    #[arg(long)]
    pub(crate) pcap: Option<PathBuf>,
    /// Write every trace record of one run (the first, or --pcap-run) here,
    /// one JSON object per line: {"endpoint": "flow0.a", "record": {...}}
    /// (also with --real).
    #[arg(long)]
    pub(crate) records: Option<PathBuf>,
    /// Which run index --pcap and --records keep.
    #[arg(long, default_value_t = 0)]
    pub(crate) pcap_run: usize,
    /// Where --pcap sees packets: `send`, as each endpoint sends them
    /// (before any link's loss or delay), or `receive`, as they reach their
    /// endpoint (what each side actually got, at its arrival time).
    #[arg(long, value_enum, default_value_t = PcapAt::Send, requires = "pcap")]
    pub(crate) pcap_at: PcapAt,
    /// Override the time messages are generated for (e.g. 60s, for CI).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Override the drain time after message generation stops.
    #[arg(long, value_parser = parse_duration)]
    pub(crate) drain: Option<Duration>,
    /// Only these variants (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    pub(crate) variants: Option<Vec<String>>,
    /// Only these sweep points (comma-separated values as printed).
    #[arg(long, value_delimiter = ',')]
    pub(crate) points: Option<Vec<String>>,
    /// Override the number of repetitions.
    #[arg(long)]
    pub(crate) repetitions: Option<u32>,
    /// Worker threads (default: available cores).
    #[arg(long)]
    pub(crate) jobs: Option<usize>,
    /// No progress bar and no run list.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Run only shard i of n (i counts from 0: 0/4 .. 3/4): the runs whose
    /// index is i modulo n. Writes a shard directory (manifest.json,
    /// runs.parquet, samples.parquet; default out/<scenario>/shard-i-of-n)
    /// instead of results.json; `thinstream merge` joins all n shards into
    /// the results of one full run.
    #[arg(long, value_parser = parse_shard)]
    pub(crate) shard: Option<ShardSpec>,
    /// Run on real sockets in real time instead of the simulator: each run
    /// (variant x point x repetition) in its own network namespace (root
    /// and `unshare` needed), both endpoints and the link emulator on its
    /// 127.0.0.1, up to --jobs runs at once (default: every run, at most
    /// 16). Two-host scenarios with SCTP flows (several: one association
    /// each, all on the scenario's two links) into sinks or echo peers, or
    /// TCP variants whose model is the host kernel (`linux-modern`, `+lt`,
    /// `+nosack`: the kernel's TCP between two namespaces joined by the
    /// emulator's TUN devices; /dev/net/tun needed). Writes the same
    /// results.json with `mode = "real"` (default folder
    /// out/<scenario>-real; per-run logs in its runs/; --records FILE keeps
    /// run --pcap-run's trace records).
    #[arg(long)]
    pub(crate) real: bool,
    /// With --real: allow runs longer than 30 minutes (generation + drain).
    #[arg(long, requires = "real")]
    pub(crate) allow_long: bool,
    /// With --real: scheduling of each run's thread (endpoints, applications
    /// and emulator), as `emulate --priority`: `auto` (SCHED_FIFO 10 where
    /// the system allows it), `realtime` or `normal`. results.json names
    /// the policy per run (`real.runs[].emulator.scheduling`).
    #[arg(long, value_enum, default_value_t = crate::sched::Priority::Auto, requires = "real")]
    pub(crate) priority: crate::sched::Priority,
}

fn parse_shard(s: &str) -> Result<ShardSpec, String> {
    s.parse()
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    Duration::parse(s).map_err(|e| e.to_string())
}

/// The default number of worker threads.
pub(crate) fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs one scenario and writes its results; returns them (for `reproduce`).
pub(crate) fn execute(
    args: &Args,
    print: &mut dyn FnMut(&str),
) -> anyhow::Result<(Plan, Results, PathBuf)> {
    let scenario = Scenario::load(&args.scenario)?;
    let options = plan_options(args);
    let plan = Plan::new(scenario, &options)?;
    if args.quiet {
        print(&format!(
            "scenario {}: master seed {}, {} run(s)\n",
            plan.scenario.name,
            plan.seed.0,
            plan.runs.len()
        ));
    } else {
        print(&plan.describe());
    }
    if plan.runs.is_empty() {
        return Err(anyhow!(
            "no variant of {} can run in this build (see UNAVAILABLE above)",
            plan.scenario.name
        ));
    }
    if (args.pcap.is_some() || args.records.is_some()) && args.pcap_run >= plan.runs.len() {
        return Err(anyhow!(
            "--pcap-run {} but the plan has {} run(s)",
            args.pcap_run,
            plan.runs.len()
        ));
    }
    let run_options = RunOptions {
        jobs: args.jobs.unwrap_or_else(default_jobs).max(1),
        progress: !args.quiet && std::io::stderr().is_terminal(),
        pcap_run: args.pcap.as_ref().map(|_| args.pcap_run),
        pcap_point: match args.pcap_at {
            PcapAt::Send => CapturePoint::Send,
            PcapAt::Receive => CapturePoint::Receive,
        },
        records_run: args.records.as_ref().map(|_| args.pcap_run),
    };
    let started = wall::now();
    // Without --pcap/--records nothing needs a run's full analysis after
    // it is pooled: reduce each run to its record in its worker (the
    // results are the same; the memory is that of the records).
    let keep_detail = args.pcap.is_some() || args.records.is_some();
    let outcomes = if keep_detail {
        run_all(&plan, &run_options)?
    } else {
        Vec::new()
    };
    let records = if keep_detail {
        Vec::new()
    } else {
        thinstream_lab::run_records(&plan, &plan.runs, &run_options)?
    };
    let wall_s = wall::seconds_since(started);
    let results = if keep_detail {
        Results::build(&plan, &outcomes, wall_s)
    } else {
        Results::from_records(&plan, &records, wall_s)
    };
    print(&thinstream_lab::table::render(&results));

    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("out").join(&plan.scenario.name));
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let json_path = out_dir.join("results.json");
    std::fs::write(&json_path, results.to_json())
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    print(&format!(
        "\n{} run(s), {:.1} s simulated each, {:.2} s wall; wrote {}\n",
        results.runs,
        results.simulated_s,
        wall_s,
        json_path.display()
    ));
    if let Some(pcap) = &args.pcap {
        let bytes = outcomes
            .iter()
            .find(|o| o.spec.index == args.pcap_run)
            .and_then(|o| o.pcap.as_ref())
            .ok_or_else(|| anyhow!("run {} produced no capture", args.pcap_run))?;
        std::fs::write(pcap, bytes).with_context(|| format!("cannot write {}", pcap.display()))?;
        print(&format!(
            "wrote the capture of run {} to {}\n",
            args.pcap_run,
            pcap.display()
        ));
    }
    if let Some(path) = &args.records {
        let records = outcomes
            .iter()
            .find(|o| o.spec.index == args.pcap_run)
            .and_then(|o| o.records.as_ref())
            .ok_or_else(|| anyhow!("run {} kept no records", args.pcap_run))?;
        crate::real::write_records(path, records)?;
        print(&format!(
            "wrote the trace records of run {} to {}\n",
            args.pcap_run,
            path.display()
        ));
    }
    Ok((plan, results, json_path))
}

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    if args.real {
        crate::real::execute(&args, &mut |s| crate::util::out(s))?;
        return Ok(ExitCode::SUCCESS);
    }
    match args.shard {
        Some(shard) => run_shard(&args, shard, &mut |s| crate::util::out(s))?,
        None => {
            execute(&args, &mut |s| crate::util::out(s))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn plan_options(args: &Args) -> PlanOptions {
    PlanOptions {
        seed: args.seed,
        duration: args.duration,
        drain: args.drain,
        variants: args.variants.clone(),
        points: args.points.clone(),
        repetitions: args.repetitions,
    }
}

/// `--shard i/n`: runs one shard and writes its directory.
fn run_shard(args: &Args, shard: ShardSpec, print: &mut dyn FnMut(&str)) -> anyhow::Result<()> {
    if args.pcap.is_some() || args.records.is_some() {
        return Err(anyhow!(
            "--pcap and --records keep one run of a full run; they cannot be combined with --shard"
        ));
    }
    let text = std::fs::read_to_string(&args.scenario)
        .with_context(|| format!("cannot read scenario {}", args.scenario.display()))?;
    let options = plan_options(args);
    let plan = thinstream_lab::shard::plan_of(&text, &args.scenario, &options)?;
    let mine = shard.runs(&plan).len();
    print(&format!(
        "scenario {}: master seed {}, shard {shard}: {mine} of {} run(s)\n",
        plan.scenario.name,
        plan.seed.0,
        plan.runs.len()
    ));
    let out_dir = args.out.clone().unwrap_or_else(|| {
        Path::new("out")
            .join(&plan.scenario.name)
            .join(format!("shard-{}-of-{}", shard.index, shard.count))
    });
    let run_options = RunOptions {
        jobs: args.jobs.unwrap_or_else(default_jobs).max(1),
        progress: !args.quiet && std::io::stderr().is_terminal(),
        pcap_run: None,
        records_run: None,
        ..RunOptions::default()
    };
    let m = thinstream_lab::shard::run_shard(
        &text,
        &args.scenario,
        &options,
        shard,
        &run_options,
        &out_dir,
    )?;
    print(&format!(
        "shard {}: {} run(s), {:.2} s wall; wrote {}\n",
        m.shard,
        m.runs,
        m.wall_s,
        out_dir.display()
    ));
    Ok(())
}
