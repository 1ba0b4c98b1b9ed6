//! `thinstream run FILE --real`: a two-host scenario's runs over real
//! sockets, in real time, through the link emulator.
//!
//! The parent checks that the scenario is one a real run can do, then
//! starts every run (variant x sweep point x repetition) as its own process
//! in its own network namespace (`unshare -n <self> real-worker ...`), up
//! to `--jobs` at once, each bounded in time (generation + drain + margin)
//! and killed past it. A worker brings `lo` up and runs, in one process on
//! 127.0.0.1, every flow of the run as the simulator builds it: each its
//! own association from its own client endpoint (the variant's preset and
//! overrides, or the entry's own SCTP preset), one server endpoint for all
//! (the receiver profile, as the simulator does; a sink or an echo peer),
//! the emulator between them with the scenario's forward and reverse links
//! shared by every flow and the simulator's link seeds of that run, and
//! each flow's workload drawn from the run's seed. All endpoints share one
//! clock, so their trace records join as the simulator's do: each flow is
//! analysed by the same `FlowAnalysis` (echo flows' response times by the
//! same `response_times`) and the run reduced to the same `RunRecord`,
//! which the worker writes to a file. The parent pools the records exactly
//! as a simulated run's and writes `results.json` with `mode = "real"` and
//! a `real` section (per run: the emulator's statistics, the application's
//! own delivery checks, timer lateness; the fields a real run cannot
//! measure, with the reason).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context};
use clap::Args as ClapArgs;
use serde::{Deserialize, Serialize};
use thinstream::clock::Clock;
use thinstream::emulate::{Emulator, EmulatorConfig};
use thinstream::{Association, AssociationConfig, Endpoint, EndpointConfig, PathMtu, SendOptions};
use thinstream_base::trace::Record;
use thinstream_base::{Duration, Instant};
use thinstream_lab::scenario::{AppStartFrom, PeerKind, TopologySpec};
use thinstream_lab::{
    Plan, PlanOptions, RealInfo, RealRun, Results, RunOutcome, RunRecord, RunSpec, Scenario,
    SweepParameter, TransportConfig, TransportKind,
};
use thinstream_link::HoldLimit;
use thinstream_metrics::{AnalysisOptions, AppSend, FlowAnalysis, FlowInput};

/// Most flows in one real run (each is two endpoints, an association and
/// an emulator upstream socket in one process).
const MAX_REAL_FLOWS: usize = 64;
/// Longest generation + drain of one run without `--allow-long`.
pub(crate) const MAX_REAL_WINDOW: Duration = Duration::from_secs(30 * 60);
/// Most runs at once by default (each is mostly asleep: a thin stream
/// costs little CPU; more at once would load the host's timers).
const DEFAULT_JOBS_CAP: usize = 16;
/// Time a run may take beyond its window (namespace, handshake, teardown)
/// before the parent kills it.
const MARGIN: std::time::Duration = std::time::Duration::from_secs(60);

/// The hidden `real-worker` subcommand: one run of a scenario, inside a
/// network namespace the parent made.
#[derive(ClapArgs, Debug)]
pub(crate) struct WorkerArgs {
    /// Scenario file.
    scenario: PathBuf,
    /// The run index in the plan.
    #[arg(long)]
    run: usize,
    /// Where to write the run's record (JSON).
    #[arg(long)]
    out: PathBuf,
    #[arg(long)]
    seed: u64,
    #[arg(long, value_parser = crate::util::parse_duration)]
    duration: Option<Duration>,
    #[arg(long, value_parser = crate::util::parse_duration)]
    drain: Option<Duration>,
    #[arg(long, value_delimiter = ',')]
    variants: Option<Vec<String>>,
    #[arg(long, value_delimiter = ',')]
    points: Option<Vec<String>>,
    #[arg(long)]
    repetitions: Option<u32>,
    /// Names this run's network namespaces (TCP runs: `ts-a-TAG`,
    /// `ts-b-TAG`), so the parent can remove them if the worker is killed.
    #[arg(long, default_value = "real")]
    tag: String,
    /// Write every flow's trace records here (`run --records`).
    #[arg(long)]
    records: Option<PathBuf>,
    /// Scheduling of the worker's one thread (`run --priority`).
    #[arg(long, value_enum, default_value_t = crate::sched::Priority::Auto)]
    priority: crate::sched::Priority,
}

/// Writes `flows`' trace records for `run --records` (simulated or real),
/// one JSON object per line: {"endpoint": "flow0.a", "record": {...}}.
pub(crate) fn write_records(path: &Path, flows: &[(String, Vec<Record>)]) -> anyhow::Result<()> {
    let mut text = String::new();
    for (endpoint, list) in flows {
        for r in list {
            let line = serde_json::json!({ "endpoint": endpoint, "record": r });
            text.push_str(&line.to_string());
            text.push('\n');
        }
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// What a worker hands back.
#[derive(Serialize, Deserialize)]
pub(crate) struct WorkerOutput {
    pub(crate) record: RunRecord,
    pub(crate) real: RealRun,
}

/// Why a scenario cannot run with `--real` (or `None`).
fn refusal(plan: &Plan, allow_long: bool) -> Option<String> {
    let s = &plan.scenario;
    if !matches!(s.topology, TopologySpec::TwoHost { .. }) {
        return Some(format!(
            "--real runs two-host scenarios only; {} has a dumbbell topology \
             (shared bottlenecks and cross traffic need the simulator)",
            s.name
        ));
    }
    if let Some(sw) = &s.sweep {
        if sw.has(SweepParameter::DropDataPacket) {
            return Some(
                "--real cannot sweep drop-data-packet: dropping the k-th data packet needs \
                 the simulator's drop hook"
                    .into(),
            );
        }
    }
    // What cannot run at all before what only takes long.
    for spec in &plan.runs {
        if let Some(why) = run_refusal(plan, spec) {
            return Some(why);
        }
    }
    let window = plan.duration + plan.drain;
    if window > MAX_REAL_WINDOW && !allow_long {
        return Some(format!(
            "--real: duration + drain is {window} per run, over {MAX_REAL_WINDOW}; \
             pass --allow-long to run it in real time anyway"
        ));
    }
    None
}

/// One flow of a real run, as the simulator builds it: its `[[flows]]`
/// entry, its index among the run's flows, its sender's transport, its
/// start and its messages.
pub(crate) struct RealFlow {
    /// The `[[flows]]` entry.
    pub(crate) entry: usize,
    /// The flow's index in the run (the simulator's numbering: it picks
    /// the workload's seed).
    pub(crate) flow: usize,
    pub(crate) config: TransportConfig,
    pub(crate) start: Instant,
    pub(crate) schedule: Vec<Due>,
    pub(crate) measured: bool,
    pub(crate) echo: bool,
}

/// One message of a flow's schedule.
#[derive(Clone, Copy)]
pub(crate) struct Due {
    pub(crate) at: Instant,
    pub(crate) stream: u16,
    pub(crate) bytes: u32,
    pub(crate) unordered: bool,
}

/// A run's flows and the receiving end's transport (one for all of them:
/// one server endpoint answers every association), or why the run cannot
/// go real.
fn the_flows(plan: &Plan, spec: &RunSpec) -> Result<(Vec<RealFlow>, TransportConfig), String> {
    let variant = &plan.variants[spec.variant];
    let variant_config = variant
        .config
        .as_ref()
        .map_err(|e| format!("variant {} is not available: {e}", variant.spec.name))?;
    let point = spec.point.map_or(&[][..], |p| plan.points[p].coords());
    let entries = plan.scenario.flows_at(&variant.spec, point);
    let generation_end = Instant::ZERO + plan.duration;
    let mut flows: Vec<RealFlow> = Vec::new();
    let mut receiver: Option<TransportConfig> = None;
    let mut kind: Option<TransportKind> = None;
    for (e, entry) in entries.iter().enumerate() {
        if entry.workload.produces_flows() {
            return Err(format!(
                "--real: {}'s flows[{e}] is an HTTP workload (many client connections of \
                 cross traffic); it needs the simulator",
                plan.scenario.name
            ));
        }
        if entry.app_start_from == AppStartFrom::Established {
            return Err(format!(
                "--real: flows[{e}] has app-start-from = \"established\", which is not built \
                 for --real (the workload starts at its scheduled times)"
            ));
        }
        let config = plan.fixed[e]
            .clone()
            .unwrap_or_else(|| variant_config.clone());
        if let TransportConfig::Tcp(c) = &config {
            // Which kernel settings stand for it, or why none can.
            crate::real_tcp::kernel_tcp(c).map_err(|why| {
                format!(
                    "--real: flows[{e}] of {} (variant {}) is TCP {:?}, which runs on the \
                     host kernel's TCP in a real run; {why}",
                    plan.scenario.name, variant.spec.name, c.name
                )
            })?;
            if entry.peer_kind() == PeerKind::Echo {
                return Err(format!(
                    "--real: flows[{e}] of {} is TCP with an echo peer; real TCP runs have \
                     sink peers only",
                    plan.scenario.name
                ));
            }
        }
        match kind {
            Some(k) if k != config.kind() => {
                return Err(format!(
                    "--real: {} mixes SCTP and TCP flows in one run; a real run carries one \
                     kind (SCTP through the UDP relay, TCP through the host kernel between two \
                     namespaces)",
                    plan.scenario.name
                ))
            }
            _ => kind = Some(config.kind()),
        }
        let rx = thinstream_lab::receiver_config(plan, spec, e, entry, &config);
        match &receiver {
            Some(r) if *r != rx => {
                return Err(format!(
                    "--real: the flows of {} need different receiving configurations \
                     (receiver profiles or presets); one server endpoint answers every \
                     association of a real run",
                    plan.scenario.name
                ))
            }
            Some(_) => {}
            None => receiver = Some(rx),
        }
        let force_unordered = variant.spec.unordered && plan.fixed[e].is_none();
        for k in 0..entry.count {
            let flow = flows.len();
            let start = thinstream_lab::flow_start(entry, k);
            let schedule = thinstream_lab::message_schedule(
                spec,
                entry,
                e,
                flow,
                start,
                generation_end,
                force_unordered,
            )?
            .map(|m| Due {
                at: m.at,
                stream: m.stream,
                bytes: m.bytes,
                unordered: m.unordered,
            })
            .collect();
            flows.push(RealFlow {
                entry: e,
                flow,
                config: config.clone(),
                start,
                schedule,
                measured: entry.is_measured(),
                echo: entry.peer_kind() == PeerKind::Echo,
            });
        }
    }
    if !flows.iter().any(|f| f.measured) {
        return Err(format!(
            "--real: {} has no measured flow (every flow has `measured = false`)",
            plan.scenario.name
        ));
    }
    if flows.iter().any(|f| f.echo) && !flows.iter().all(|f| f.echo) {
        return Err(format!(
            "--real: {} mixes echo and sink peers; one server endpoint answers every \
             association of a real run, so all its flows need the same peer",
            plan.scenario.name
        ));
    }
    if flows.len() > MAX_REAL_FLOWS {
        return Err(format!(
            "--real runs at most {MAX_REAL_FLOWS} flows per run; {} has {}",
            plan.scenario.name,
            flows.len()
        ));
    }
    let receiver = receiver.ok_or_else(|| format!("{} has no flows", plan.scenario.name))?;
    Ok((flows, receiver))
}

fn run_refusal(plan: &Plan, spec: &RunSpec) -> Option<String> {
    the_flows(plan, spec).err()
}

/// Whether this process can make network namespaces.
fn netns_problem() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some(
            "--real needs root: each run gets its own network namespace (`unshare -n`)".into(),
        );
    }
    match Command::new("unshare")
        .args(["-n", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!(
            "--real: `unshare -n true` failed ({s}); a network namespace cannot be made here"
        )),
        Err(e) => Some(format!(
            "--real needs `unshare` (util-linux) to make a network namespace per run: {e}"
        )),
    }
}

/// `thinstream run FILE --real`.
pub(crate) fn execute(
    args: &crate::run::Args,
    print: &mut dyn FnMut(&str),
) -> anyhow::Result<(Plan, Results, PathBuf)> {
    if args.pcap.is_some() || args.shard.is_some() {
        bail!("--real cannot be combined with --pcap or --shard");
    }
    let scenario = Scenario::load(&args.scenario)?;
    let options = crate::run::plan_options(args);
    let plan = Plan::new(scenario, &options)?;
    if plan.runs.is_empty() {
        bail!("no variant of {} can run in this build", plan.scenario.name);
    }
    if let Some(why) = refusal(&plan, args.allow_long) {
        bail!("{why}");
    }
    if args.records.is_some() && args.pcap_run >= plan.runs.len() {
        bail!(
            "--pcap-run {} is out of range: the plan has {} run(s)",
            args.pcap_run,
            plan.runs.len()
        );
    }
    if let Some(why) = netns_problem() {
        bail!("{why}");
    }
    let tcp = plan
        .variants
        .iter()
        .any(|v| v.transport == TransportKind::Tcp);
    if tcp {
        if let Some(e) = thinstream::emulate::tun::unavailable() {
            bail!("--real runs TCP variants on the kernel between two namespaces: {e}");
        }
    }
    let jobs = args
        .jobs
        .unwrap_or(plan.runs.len().min(DEFAULT_JOBS_CAP))
        .max(1);
    let window = plan.duration + plan.drain;
    print(&format!(
        "scenario {} on real sockets: master seed {}, {} run(s) of {} ({} generation + {} drain) \
         each, {} at once\n",
        plan.scenario.name,
        plan.seed.0,
        plan.runs.len(),
        window,
        plan.duration,
        plan.drain,
        jobs
    ));
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("out").join(format!("{}-real", plan.scenario.name)));
    let runs_dir = out_dir.join("runs");
    std::fs::create_dir_all(&runs_dir)
        .with_context(|| format!("cannot create {}", runs_dir.display()))?;
    let scenario_path = std::fs::canonicalize(&args.scenario)
        .with_context(|| format!("cannot resolve {}", args.scenario.display()))?;
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let started_utc = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let started = thinstream_lab::wall::now();

    let worker_args = |spec: &RunSpec, out: &Path| -> Vec<String> {
        let mut a = vec![
            "real-worker".to_string(),
            scenario_path.display().to_string(),
            "--run".into(),
            spec.index.to_string(),
            "--out".into(),
            out.display().to_string(),
            "--seed".into(),
            plan.seed.0.to_string(),
            "--tag".into(),
            namespace_tag(spec.index),
            "--priority".into(),
            args.priority.name().into(),
        ];
        if let Some(r) = args
            .records
            .as_ref()
            .filter(|_| spec.index == args.pcap_run)
        {
            a.extend(["--records".into(), r.display().to_string()]);
        }
        if let Some(d) = args.duration {
            a.extend(["--duration".into(), format!("{}ns", d.as_nanos())]);
        }
        if let Some(d) = args.drain {
            a.extend(["--drain".into(), format!("{}ns", d.as_nanos())]);
        }
        if let Some(v) = &args.variants {
            a.extend(["--variants".into(), v.join(",")]);
        }
        if let Some(p) = &args.points {
            a.extend(["--points".into(), p.join(",")]);
        }
        if let Some(r) = args.repetitions {
            a.extend(["--repetitions".into(), r.to_string()]);
        }
        a
    };

    // Progress: run-seconds done of all runs' windows.
    let total_s = plan.runs.len() as u64 * window.as_secs_f64().ceil() as u64;
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total_s.max(1)),
        if !args.quiet && std::io::stderr().is_terminal() {
            indicatif::ProgressDrawTarget::stderr()
        } else {
            indicatif::ProgressDrawTarget::hidden()
        },
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {percent}% of run time, {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    // Per run: when it started (seconds since `started`), and its outcome.
    let starts: Mutex<Vec<Option<f64>>> = Mutex::new(vec![None; plan.runs.len()]);
    let outcomes: Mutex<Vec<Option<anyhow::Result<WorkerOutput>>>> =
        Mutex::new((0..plan.runs.len()).map(|_| None).collect());
    let bound = std::time::Duration::from_nanos(window.as_nanos()) + MARGIN;
    let finished_s = Arc::new(Mutex::new(0.0f64));
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(plan.runs.len()) {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(spec) = plan.runs.get(k) else { break };
                let out = runs_dir.join(format!("run-{}.json", spec.index));
                let log = runs_dir.join(format!("run-{}.log", spec.index));
                let _ = std::fs::remove_file(&out);
                if let Ok(mut s) = starts.lock() {
                    s[k] = Some(thinstream_lab::wall::seconds_since(started));
                }
                let result = run_child(&exe, &worker_args(spec, &out), &out, &log, bound);
                remove_namespaces(&namespace_tag(spec.index));
                let result = result.with_context(|| {
                    format!(
                        "run {} (variant {}, repetition {})",
                        spec.index, plan.variants[spec.variant].spec.name, spec.repetition
                    )
                });
                if let Ok(mut o) = outcomes.lock() {
                    o[k] = Some(result);
                }
                if let Ok(mut f) = finished_s.lock() {
                    *f += window.as_secs_f64();
                }
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
        // The bar: finished runs count whole, running ones by their age.
        while done.load(Ordering::Relaxed) < plan.runs.len() {
            let now = thinstream_lab::wall::seconds_since(started);
            let running: f64 = starts
                .lock()
                .map(|s| {
                    s.iter()
                        .enumerate()
                        .filter_map(|(k, t)| {
                            let finished = outcomes.lock().is_ok_and(|o| o[k].is_some());
                            t.filter(|_| !finished)
                                .map(|t| (now - t).min(window.as_secs_f64()))
                        })
                        .sum()
                })
                .unwrap_or(0.0);
            let finished = finished_s.lock().map_or(0.0, |f| *f);
            bar.set_position((finished + running) as u64);
            bar.set_message(format!(
                "{}/{} runs done",
                done.load(Ordering::Relaxed),
                plan.runs.len()
            ));
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    });
    bar.finish_and_clear();
    let wall_s = thinstream_lab::wall::seconds_since(started);
    let starts = starts.into_inner().unwrap_or_default();
    let mut records = Vec::with_capacity(plan.runs.len());
    let mut real_runs = Vec::with_capacity(plan.runs.len());
    let mut failures = Vec::new();
    for (k, o) in outcomes
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        match o {
            Some(Ok(mut w)) => {
                w.real.started_s = starts.get(k).copied().flatten().unwrap_or(0.0);
                records.push(w.record);
                real_runs.push(w.real);
            }
            Some(Err(e)) => failures.push(format!("{e:#}")),
            None => failures.push(format!("run {k} never started")),
        }
    }
    if !failures.is_empty() {
        bail!(
            "{} of {} real run(s) failed (logs in {}):\n  {}",
            failures.len(),
            plan.runs.len(),
            runs_dir.display(),
            failures.join("\n  ")
        );
    }
    let mut results = Results::from_records(&plan, &records, wall_s);
    mark_real(&mut results, started_utc, jobs, real_runs, tcp);
    print(&thinstream_lab::table::render(&results));
    let json_path = out_dir.join("results.json");
    std::fs::write(&json_path, results.to_json())
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    if let Some(path) = &args.records {
        print(&format!(
            "wrote the trace records of run {} to {}\n",
            args.pcap_run,
            path.display()
        ));
    }
    print(&format!(
        "\n{} real run(s) of {:.1} s each, {:.1} s wall; wrote {}\n",
        results.runs,
        window.as_secs_f64(),
        wall_s,
        json_path.display()
    ));
    Ok((plan, results, json_path))
}

/// Marks pooled results as real: `mode`, the `real` section, and `null`
/// for what a real run cannot measure.
fn mark_real(
    results: &mut Results,
    started_utc: String,
    jobs: usize,
    runs: Vec<RealRun>,
    tcp: bool,
) {
    results.mode = "real".into();
    for v in &mut results.variants {
        v.events = None;
        v.packet_hops = None;
    }
    let not_measured = [
        (
            "variants[].events",
            "simulator events: a real run has none (it is driven by the OS clock and sockets)",
        ),
        (
            "variants[].packet_hops",
            "simulated link hand-overs: a real run's packets are counted by the emulator (real.runs[].emulator)",
        ),
    ]
    .into_iter()
    .chain(TCP_NOT_MEASURED.iter().copied().filter(|_| tcp))
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    results.real = Some(RealInfo {
        started_utc,
        jobs,
        not_measured,
        runs,
    });
}

/// The tag of run `index`'s namespaces (TCP runs): unique among the runs
/// of this process and, by the process id, among other processes.
fn namespace_tag(index: usize) -> String {
    format!("{:04x}{:04x}", std::process::id() & 0xffff, index & 0xffff)
}

/// Removes the named namespaces of tag `tag` if a worker left them (it
/// removes them itself unless it was killed).
fn remove_namespaces(tag: &str) {
    for side in ["a", "b"] {
        let name = format!("ts-{side}-{tag}");
        if Path::new("/run/netns").join(&name).exists() {
            let _ = Command::new("ip")
                .args(["netns", "del", &name])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// What a TCP variant's real run cannot measure (the kernel's TCP is seen
/// only through the packets it sends and the applications' reads).
const TCP_NOT_MEASURED: &[(&str, &str)] = &[
    (
        "variants[].reasons (TCP variants)",
        "inferred: the kernel does not say why it resent data. A resend leaving within 2 ms \
         of an ACK reaching the sender counts as fast-rtx, any other as timeout-rtx (RTO, \
         tail loss probe and RACK's reordering timer are not told apart); real.runs[].\
         kernel_tcp has the two counts",
    ),
    (
        "variants[].recovery RTO, RTT samples and thin-stream state (TCP variants)",
        "not traced: the kernel's estimator, timers and congestion window are not \
         observable from packets; their counts read 0",
    ),
];

/// Runs one worker in its own network namespace, bounded by `bound`;
/// returns what it wrote to `out`.
fn run_child(
    exe: &Path,
    args: &[String],
    out: &Path,
    log: &Path,
    bound: std::time::Duration,
) -> anyhow::Result<WorkerOutput> {
    let log_file =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let mut child: Child = Command::new("unshare")
        .arg("-n")
        .arg("--")
        .arg(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .spawn()
        .context("cannot start `unshare -n`")?;
    let started = thinstream_lab::wall::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if thinstream_lab::wall::seconds_since(started) > bound.as_secs_f64() {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "did not finish within {:.0} s (its window plus {} s): killed; see {}",
                bound.as_secs_f64(),
                MARGIN.as_secs(),
                log.display()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        bail!(
            "worker failed ({status}): {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        );
    }
    let text =
        std::fs::read_to_string(out).with_context(|| format!("no record at {}", out.display()))?;
    serde_json::from_str(&text).with_context(|| format!("bad record in {}", out.display()))
}

/// The hidden `real-worker` subcommand.
pub(crate) fn worker(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    // Everything of the run (endpoints, applications, emulator; the TCP
    // path's sockets and relay) runs on this one thread.
    crate::sched::apply(args.priority, false)?;
    // `unshare` execs this program, so the parent is `run --real`: if it
    // dies (even by SIGKILL), this run and its namespace go with it.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .context("cannot ask to end with the parent")?;
    let lo = Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .context("cannot run `ip link set lo up`")?;
    if !lo.success() {
        bail!("`ip link set lo up` failed ({lo}): is this a network namespace of our own?");
    }
    let scenario = Scenario::load(&args.scenario)?;
    let plan = Plan::new(
        scenario,
        &PlanOptions {
            seed: Some(args.seed),
            duration: args.duration,
            drain: args.drain,
            variants: args.variants.clone(),
            points: args.points.clone(),
            repetitions: args.repetitions,
        },
    )?;
    let spec = *plan
        .runs
        .iter()
        .find(|r| r.index == args.run)
        .ok_or_else(|| anyhow!("the plan has no run {}", args.run))?;
    if let Some(why) = refusal(&plan, true) {
        bail!("{why}");
    }
    let (flows, _) = the_flows(&plan, &spec).map_err(|e| anyhow!(e))?;
    if flows
        .first()
        .is_some_and(|f| f.config.kind() == TransportKind::Tcp)
    {
        let output = crate::real_tcp::run(&plan, &spec, flows, &args.tag, args.records.as_deref())?;
        let text = serde_json::to_string(&output)?;
        std::fs::write(&args.out, text)
            .with_context(|| format!("cannot write {}", args.out.display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    // One thread: both endpoints, the emulator and the application tasks
    // (a thin stream is light; one thread keeps them off each other's
    // cores' wake-up paths).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // The emulator's task is not `Send`: it runs on a local set.
    let output = tokio::task::LocalSet::new()
        .block_on(&rt, real_run(&plan, &spec, args.records.as_deref()))?;
    let text = serde_json::to_string(&output)?;
    std::fs::write(&args.out, text)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// An association configuration for a real run of `config`: the
/// simulator's packet size (no probing), tracing on.
fn association(config: &TransportConfig) -> anyhow::Result<AssociationConfig> {
    let TransportConfig::Sctp(c) = config else {
        bail!("--real runs SCTP variants only");
    };
    let mut a = AssociationConfig::from_transport(c.clone());
    a.pmtu(PathMtu::Fixed(c.pmtu)).trace(true);
    // Room for everything a thin stream can have queued: the application
    // reads at once, but the queue must never push back on the protocol
    // where the simulator's sink would not.
    a.recv_queue(16 << 20);
    Ok(a)
}

/// What a receiving application read, in order: (message index, stream,
/// length, intact). A message too short to carry its index has index
/// `None` (counted, not checked).
pub(crate) type Got = Vec<(Option<u64>, u16, usize, bool)>;

/// Bytes of the message index at the start of every payload (as many as
/// fit in a shorter message).
const INDEX_BYTES: usize = 8;

pub(crate) fn payload(index: u64, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    let head = index.to_be_bytes();
    let n = len.min(INDEX_BYTES);
    p[..n].copy_from_slice(&head[..n]);
    for (k, b) in p.iter_mut().enumerate().skip(INDEX_BYTES) {
        *b = (index as u8).wrapping_mul(31) ^ (k as u8);
    }
    p
}

/// The index and intactness of a received payload.
fn read_payload(data: &[u8]) -> (Option<u64>, bool) {
    if data.len() < INDEX_BYTES {
        return (None, true);
    }
    let mut head = [0u8; INDEX_BYTES];
    head.copy_from_slice(&data[..INDEX_BYTES]);
    let i = u64::from_be_bytes(head);
    (Some(i), data == &payload(i, data.len())[..])
}

/// Faults for a flow whose `got` differs from its schedule: a count short
/// of the schedule, and the first of the problems `check_delivery` finds.
/// `words`: who received, what (plural), what (as `check_delivery` names
/// it), and the kind of problem.
fn fault_on_delivery(
    faults: &mut Vec<String>,
    name: &str,
    got: &Got,
    schedule: &[Due],
    [who, plural, what, kind]: [&str; 4],
) {
    let expected = schedule.len();
    if got.len() != expected {
        faults.push(format!(
            "{name}: {who} got {} of {expected} {plural}",
            got.len()
        ));
    }
    let problems = check_delivery(got, schedule, what);
    if let Some(p) = problems.first() {
        faults.push(format!(
            "{name}: {} {kind} problem(s), the first: {p}",
            problems.len()
        ));
    }
}

/// [`fault_on_delivery`] for what a receiving application read.
pub(crate) fn fault_on_messages(faults: &mut Vec<String>, name: &str, got: &Got, schedule: &[Due]) {
    fault_on_delivery(
        faults,
        name,
        got,
        schedule,
        [
            "the receiving application",
            "messages",
            "message",
            "delivery",
        ],
    );
}

/// Problems in what an application read against what was sent: each
/// message once, intact, on its stream, and in order within its stream
/// unless sent unordered. `what` names the messages (`message`, `echo`).
fn check_delivery(got: &Got, schedule: &[Due], what: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = vec![false; schedule.len()];
    let mut last: std::collections::HashMap<u16, u64> = Default::default();
    for &(index, stream, len, intact) in got {
        let Some(i) = index else { continue };
        let Some(k) = usize::try_from(i).ok().filter(|k| *k < seen.len()) else {
            problems.push(format!("{what} with unknown index {i}"));
            continue;
        };
        if seen[k] {
            problems.push(format!("{what} {i} delivered twice"));
        }
        seen[k] = true;
        let m = &schedule[k];
        if !intact || len != m.bytes as usize || stream != m.stream {
            problems.push(format!("{what} {i} arrived damaged or on the wrong stream"));
        }
        if !m.unordered {
            if let Some(prev) = last.insert(stream, i) {
                if prev > i {
                    problems.push(format!(
                        "{what} {i} delivered after {prev} on stream {stream}"
                    ));
                }
            }
        }
    }
    problems
}

/// Reads `association` until it closes, recording every message; with
/// `echo`, sends each back on its stream with its ordering (the
/// simulator's echo peer). `count` counts what was read.
async fn reader(association: Association, echo: bool, count: Arc<AtomicU64>) -> Got {
    let mut got = Got::new();
    while let Ok(m) = association.recv().await {
        let (index, intact) = read_payload(&m.data);
        got.push((index, m.stream, m.data.len(), intact));
        count.fetch_add(1, Ordering::Relaxed);
        if echo {
            let options = SendOptions {
                unordered: m.unordered,
                ..SendOptions::default()
            };
            if association.send(m.stream, &m.data, options).await.is_err() {
                break;
            }
        }
    }
    got
}

/// What a sending application did: its messages' send times, and how late
/// each of its wake-ups was (ns).
type Sent = (Vec<AppSend>, Vec<u64>);

/// The sending application of one flow: each message at its time, in
/// real time.
async fn sender(
    association: Association,
    schedule: Vec<Due>,
    clock: Clock,
) -> anyhow::Result<Sent> {
    let mut sends = Vec::with_capacity(schedule.len());
    let mut late_ns = Vec::with_capacity(schedule.len());
    // To tens of microseconds (tokio's own timer: up to 1 ms late).
    let mut timer = thinstream::clock::PreciseTimer::new();
    for (i, m) in schedule.iter().enumerate() {
        let time = if clock.now() < m.at {
            timer.sleep_until(clock.to_std(m.at)).await;
            // The application wakes a little late (the OS's wake-up
            // latency): the message is generated when it runs.
            let now = clock.now();
            late_ns.push(now.saturating_duration_since(m.at).as_nanos());
            now
        } else {
            // Due while an earlier send waited (or before the association
            // was up): generated at its time, and the wait is part of its
            // latency, as in the simulator.
            m.at
        };
        let options = SendOptions {
            unordered: m.unordered,
            ..SendOptions::default()
        };
        association
            .send(m.stream, payload(i as u64, m.bytes as usize), options)
            .await
            .map_err(|e| anyhow!("message {i}: {e}"))?;
        sends.push(AppSend {
            message: i as u64,
            time,
        });
    }
    Ok((sends, late_ns))
}

/// The client side of one flow while the run goes.
struct ClientSide {
    endpoint: Endpoint,
    association: Option<Association>,
    records: Vec<Record>,
    sending: Option<tokio::task::JoinHandle<anyhow::Result<Sent>>>,
    /// Echoes read (echo peers).
    echoes: Option<tokio::task::JoinHandle<Got>>,
    echoes_read: Arc<AtomicU64>,
}

/// An association the server accepted.
struct ServerSide {
    remote: Option<SocketAddr>,
    association: Association,
    records: Vec<Record>,
    reading: Option<tokio::task::JoinHandle<Got>>,
}

/// One run, in real time: every flow its own association from its own
/// client endpoint, through one emulator whose links all flows share (the
/// scenario's two links), to one server endpoint.
async fn real_run(
    plan: &Plan,
    spec: &RunSpec,
    records: Option<&Path>,
) -> anyhow::Result<WorkerOutput> {
    let wall_start = thinstream_lab::wall::now();
    let (flows, receiver) = the_flows(plan, spec).map_err(|e| anyhow!(e))?;
    let ((forward, forward_seed), (reverse, reverse_seed)) =
        thinstream_lab::two_host_links(plan, spec)
            .ok_or_else(|| anyhow!("--real runs two-host scenarios only"))?;
    let n: u64 = flows.iter().map(|f| f.schedule.len() as u64).sum();
    let echo_flows = flows.iter().filter(|f| f.echo).count();
    let stop_at = plan.stop();

    let clock = Clock::new();
    let fixed = |label: &str| spec.seed.derive(label).0;
    let mut server_config = EndpointConfig::server();
    server_config
        .association(association(&receiver)?)
        .clock(clock)
        .testing_fixed_seed(fixed("real.endpoint.b"));
    let loopback: SocketAddr = "127.0.0.1:0".parse()?;
    let server = Endpoint::bind(loopback, server_config)?;
    let emulator = Emulator::bind(EmulatorConfig {
        listen: loopback,
        to: server.local_addr(),
        forward,
        reverse,
        seed: spec.seed.0,
        limit: HoldLimit::default(),
        allow_non_loopback: false,
        duration: None,
        count: None,
        max_clients: flows.len(),
        link_seeds: Some((forward_seed, reverse_seed)),
        // The scenario's two links carry every flow, as in the simulator.
        shared_links: true,
        busy_poll: false,
    })?;
    let relay = emulator.local_addr();
    let (stop_emulator, stopped) = tokio::sync::oneshot::channel::<()>();
    let emulator_task = tokio::task::spawn_local(emulator.run(async {
        let _ = stopped.await;
    }));

    // The server: accepts every association and reads (or echoes) it.
    // Which flow an association is shows at the end, from the emulator's
    // client table (its remote address is the flow's upstream socket).
    let received = Arc::new(AtomicU64::new(0));
    let accepted: Arc<Mutex<Vec<ServerSide>>> = Arc::default();
    let echo = echo_flows > 0;
    let accepting = tokio::spawn({
        let (server, accepted, received) = (server.clone(), accepted.clone(), received.clone());
        let expected = flows.len();
        async move {
            for _ in 0..expected {
                let Some(incoming) = server.accept().await else {
                    break;
                };
                let remote = incoming.remote_addr();
                let Ok(association) = incoming.accept() else {
                    continue;
                };
                let reading = tokio::spawn(reader(association.clone(), echo, received.clone()));
                if let Ok(mut a) = accepted.lock() {
                    a.push(ServerSide {
                        remote,
                        association,
                        records: Vec::new(),
                        reading: Some(reading),
                    });
                }
            }
        }
    });

    // The clients: each flow connects at its start, then sends.
    let deadline = tokio::time::Instant::from_std(clock.to_std(stop_at));
    let mut clients: Vec<ClientSide> = Vec::with_capacity(flows.len());
    let mut connecting = Vec::with_capacity(flows.len());
    for f in &flows {
        let mut client_config = EndpointConfig::client();
        // Flow 0 keeps the one-flow run's seed label.
        let label = if f.flow == 0 {
            "real.endpoint.a".to_string()
        } else {
            format!("real.endpoint.a{}", f.flow)
        };
        client_config.clock(clock).testing_fixed_seed(fixed(&label));
        let endpoint = Endpoint::bind(loopback, client_config)?;
        let config = association(&f.config)?;
        let (ep, start, schedule) = (endpoint.clone(), f.start, f.schedule.clone());
        connecting.push(tokio::spawn(async move {
            tokio::time::sleep_until(tokio::time::Instant::from_std(clock.to_std(start))).await;
            let a = tokio::time::timeout_at(deadline, ep.connect(relay, config))
                .await
                .map_err(|_| anyhow!("the association did not come up before the run's end"))??;
            let sending = tokio::spawn(sender(a.clone(), schedule, clock));
            anyhow::Ok((a, sending))
        }));
        clients.push(ClientSide {
            endpoint,
            association: None,
            records: Vec::new(),
            sending: None,
            echoes: None,
            echoes_read: Arc::new(AtomicU64::new(0)),
        });
    }

    // Collect the traces as the run goes (the library keeps a bounded
    // number per association), until everything is delivered (and
    // echoed) and acknowledged, or the run's window is over.
    let mut faults: Vec<String> = Vec::new();
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(200));
    let done = loop {
        tick.tick().await;
        for (k, c) in clients.iter_mut().enumerate() {
            if c.association.is_none() && connecting[k].is_finished() {
                match (&mut connecting[k]).await {
                    Ok(Ok((a, sending))) => {
                        if flows[k].echo {
                            c.echoes = Some(tokio::spawn(reader(
                                a.clone(),
                                false,
                                c.echoes_read.clone(),
                            )));
                        }
                        c.association = Some(a);
                        c.sending = Some(sending);
                    }
                    Ok(Err(e)) => faults.push(format!("flow {}: {e:#}", flows[k].flow)),
                    Err(e) => faults.push(format!("flow {}: {e}", flows[k].flow)),
                }
            }
            if let Some(a) = &c.association {
                c.records.extend(a.take_trace());
            }
        }
        if let Ok(mut acc) = accepted.lock() {
            for s in acc.iter_mut() {
                s.records.extend(s.association.take_trace());
            }
        }
        if tokio::time::Instant::now() >= deadline || !faults.is_empty() {
            break false;
        }
        let idle =
            |st: thinstream::AssociationStats| st.flight_bytes == 0 && st.buffered_send_bytes == 0;
        let clients_done = clients.iter().zip(&flows).all(|(c, f)| {
            c.sending.as_ref().is_some_and(|s| s.is_finished())
                && c.association.as_ref().is_some_and(|a| idle(a.stats()))
                && (!f.echo || c.echoes_read.load(Ordering::Relaxed) >= f.schedule.len() as u64)
        });
        let servers_done = accepted.lock().is_ok_and(|acc| {
            acc.len() == flows.len() && acc.iter().all(|s| idle(s.association.stats()))
        });
        if clients_done && servers_done && received.load(Ordering::Relaxed) >= n {
            break true;
        }
    };
    let end = clock.now();
    if !done && faults.is_empty() {
        faults.push(format!(
            "the run's window ({}) ended before every message was delivered{} and acknowledged",
            plan.duration + plan.drain,
            if echo { ", echoed" } else { "" }
        ));
    }
    accepting.abort();
    let mut servers: Vec<ServerSide> = accepted
        .lock()
        .map(|mut a| std::mem::take(&mut *a))
        .unwrap_or_default();
    for c in &mut clients {
        if let Some(a) = &c.association {
            c.records.extend(a.take_trace());
            a.abort("run over");
        }
    }
    for s in &mut servers {
        s.records.extend(s.association.take_trace());
        s.association.abort("run over");
    }
    for c in &connecting {
        c.abort();
    }
    let _ = stop_emulator.send(());
    let report = emulator_task.await??;
    for c in &clients {
        c.endpoint.close();
    }
    server.close();

    // Which server association is which flow: its remote address is the
    // upstream socket the emulator gave the flow's client endpoint.
    let mut flow_of_server: Vec<Option<usize>> = vec![None; servers.len()];
    for client in &report.clients {
        let k = clients
            .iter()
            .position(|c| c.endpoint.local_addr() == client.addr);
        let s = servers
            .iter()
            .position(|s| s.remote == Some(client.upstream));
        if let (Some(k), Some(s)) = (k, s) {
            flow_of_server[s] = Some(k);
        }
    }
    let mut server_of_flow: Vec<Option<usize>> = vec![None; flows.len()];
    for (s, k) in flow_of_server.iter().enumerate() {
        if let Some(k) = k {
            server_of_flow[*k] = Some(s);
        }
    }

    // Per flow: the applications' checks, then the analysis.
    let mut got_total = 0u64;
    let mut echoes_total = 0u64;
    let mut late_ns = Vec::new();
    let mut analyses = Vec::new();
    // Flows outside the latency tables, for the throughput series.
    let mut unmeasured: Vec<FlowAnalysis> = Vec::new();
    // Every flow in order: (entry, measured, index into its list).
    let mut traced: Vec<(usize, bool, usize)> = Vec::new();
    let mut responses = Vec::new();
    let mut worst: Option<thinstream_lab::worst::WorstPath> = None;
    let kind = plan.scenario.metrics.latency;
    let options = AnalysisOptions {
        owd: plan.scenario.metrics.owd.0,
        summary_latency: kind,
    };
    let empty: Vec<Record> = Vec::new();
    let mut kept: Vec<(String, Vec<Record>)> = Vec::new();
    for (k, f) in flows.iter().enumerate() {
        let c = &mut clients[k];
        let name = format!("flow {}", f.flow);
        let sends = match c.sending.take() {
            Some(s) if s.is_finished() => match s.await? {
                Ok((sends, late)) => {
                    late_ns.extend(late);
                    sends
                }
                Err(e) => {
                    faults.push(format!("{name}: sending application: {e}"));
                    Vec::new()
                }
            },
            Some(s) => {
                s.abort();
                faults.push(format!("{name}: the sending application had not finished"));
                Vec::new()
            }
            None => Vec::new(),
        };
        let s = server_of_flow[k];
        let got = match s.and_then(|s| servers[s].reading.take()) {
            Some(r) => r.await.unwrap_or_default(),
            None => Got::new(),
        };
        got_total += got.len() as u64;
        fault_on_messages(&mut faults, &name, &got, &f.schedule);
        if let Some(r) = c.echoes.take() {
            let echoes = r.await.unwrap_or_default();
            echoes_total += echoes.len() as u64;
            fault_on_delivery(
                &mut faults,
                &name,
                &echoes,
                &f.schedule,
                ["the client", "echoes", "echo", "echo"],
            );
        }
        // The association numbers messages 0, 1, 2, ... in submission
        // order; the application's indices must be the same numbers.
        let submitted = c.records.iter().filter_map(|r| match r {
            Record::Submitted { message, .. } => Some(*message),
            _ => None,
        });
        if submitted.enumerate().any(|(i, m)| m != i as u64) {
            faults.push(format!(
                "{name}: the association's message ids differ from the application's"
            ));
        }
        let server_records = s.map_or(&empty, |s| &servers[s].records);
        if records.is_some() {
            kept.push((format!("flow{}.a", f.flow), c.records.clone()));
            kept.push((format!("flow{}.b", f.flow), server_records.clone()));
        }
        let analysis = FlowAnalysis::build(
            FlowInput {
                sender: &c.records,
                receiver: Some(server_records),
                app_sends: f.measured.then_some(&sends[..]),
                duplicate_reports: None,
            },
            options,
        )
        .map_err(|e| anyhow!("metrics of {name}: {e}"))?;
        if !f.measured {
            traced.push((f.entry, false, unmeasured.len()));
            unmeasured.push(analysis);
            continue;
        }
        if f.echo {
            // 001 §IV.A: request sent -> echo delivered to the client.
            let reverse = FlowAnalysis::build(
                FlowInput {
                    sender: server_records,
                    receiver: Some(&c.records),
                    app_sends: None,
                    duplicate_reports: None,
                },
                options,
            )
            .map_err(|e| anyhow!("metrics of {name} (echoes): {e}"))?;
            responses.extend(
                thinstream_metrics::response_times(&analysis, &reverse)
                    .map_err(|e| anyhow!("response times of {name}: {e}"))?,
            );
        }
        if let Some(w) =
            thinstream_lab::worst::slowest(&analysis, kind, &c.records, server_records, spec.index)
        {
            if worst
                .as_ref()
                .is_none_or(|x| x.path.latency_ms < w.path.latency_ms)
            {
                worst = Some(w);
            }
        }
        traced.push((f.entry, true, analyses.len()));
        analyses.push(analysis);
    }
    if let Some(path) = records {
        write_records(path, &kept)?;
    }
    let record = run_record(
        plan,
        spec,
        Analysed {
            analyses,
            unmeasured,
            traced,
            responses,
            worst,
        },
        end,
        wall_start,
        faults,
    )?;
    let mut real = real_info(plan, spec, wall_start, flows.len(), n, got_total, late_ns);
    real.echoes = echo.then_some(echoes_total);
    real.emulator = crate::sched::with_scheduling(serde_json::to_value(&report)?);
    Ok(WorkerOutput { record, real })
}

/// A real run's `real.runs[]` entry: what every run has (the emulator's
/// report, echoes and kernel TCP left for the caller).
pub(crate) fn real_info(
    plan: &Plan,
    spec: &RunSpec,
    wall_start: thinstream_lab::wall::WallInstant,
    flows: usize,
    messages: u64,
    received: u64,
    late_ns: Vec<u64>,
) -> RealRun {
    RealRun {
        index: spec.index,
        variant: plan.variants[spec.variant].spec.name.clone(),
        repetition: spec.repetition,
        point: spec.point.map(|p| plan.points[p].label()),
        started_s: 0.0,
        wall_s: thinstream_lab::wall::seconds_since(wall_start),
        flows,
        messages,
        received,
        echoes: None,
        emulator: serde_json::Value::Null,
        app_wake_late_us: quantiles_us(late_ns),
        kernel_tcp: None,
    }
}

/// A run's flows after analysis: the measured ones (`analyses`), the
/// others (`unmeasured`, for throughput series), every flow in order as
/// (its `[[flows]]` entry, measured, index into its list), echo response
/// times and the slowest message's path.
pub(crate) struct Analysed {
    pub(crate) analyses: Vec<FlowAnalysis>,
    pub(crate) unmeasured: Vec<FlowAnalysis>,
    pub(crate) traced: Vec<(usize, bool, usize)>,
    pub(crate) responses: Vec<thinstream_metrics::ResponseSample>,
    pub(crate) worst: Option<thinstream_lab::worst::WorstPath>,
}

/// A real run's record, reduced as the simulator's: throughput series,
/// and the outcome with its faults.
pub(crate) fn run_record(
    plan: &Plan,
    spec: &RunSpec,
    a: Analysed,
    end: Instant,
    wall_start: thinstream_lab::wall::WallInstant,
    faults: Vec<String>,
) -> anyhow::Result<RunRecord> {
    let Analysed {
        analyses,
        unmeasured,
        traced,
        responses,
        worst,
    } = a;
    let generation_end = Instant::ZERO + plan.duration;
    let throughput = match &plan.scenario.metrics.throughput {
        Some(t) => {
            let pairs: Vec<(usize, &FlowAnalysis)> = traced
                .iter()
                .map(|&(e, measured, i)| {
                    (
                        e,
                        if measured {
                            &analyses[i]
                        } else {
                            &unmeasured[i]
                        },
                    )
                })
                .collect();
            let series =
                thinstream_lab::fairness::series(t, &pairs, &plan.scenario, generation_end)
                    .map_err(|e| anyhow!("throughput: {e}"))?;
            thinstream_lab::fairness::EntrySeries::reduce(&series)
        }
        None => Vec::new(),
    };
    let wall_s = thinstream_lab::wall::seconds_since(wall_start);
    let outcome = RunOutcome {
        spec: *spec,
        flows: analyses,
        digests: None,
        stream_peak: None,
        events: 0,
        packet_hops: 0,
        end,
        wall_s,
        fault: (!faults.is_empty()).then(|| faults.join("; ")),
        dropped_units: None,
        mtt: None,
        throughput,
        responses,
        bottleneck: None,
        worst,
        pcap: None,
        records: None,
    };
    let kinds = thinstream_lab::record::latency_kinds(&plan.scenario);
    Ok(RunRecord::of(&outcome, &kinds))
}

/// p50, p99 and max of nanosecond values, in microseconds (`None` if
/// there are none).
fn quantiles_us(mut ns: Vec<u64>) -> Option<[f64; 3]> {
    if ns.is_empty() {
        return None;
    }
    ns.sort_unstable();
    let at = |q: f64| {
        let rank = ((q * ns.len() as f64).ceil() as usize).clamp(1, ns.len());
        ns[rank - 1] as f64 / 1e3
    };
    Some([at(0.5), at(0.99), ns[ns.len() - 1] as f64 / 1e3])
}
