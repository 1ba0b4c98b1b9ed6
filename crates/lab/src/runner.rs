//! Running a plan: each run builds its `Simulation` inside a rayon worker
//! (a `Simulation` holds boxed transports that are not `Send`; what leaves
//! the worker is the reduced [`RunOutcome`]), runs it, and reduces the trace
//! records to per-flow analyses at once, so the records of many runs are
//! never held together. Outcomes are returned in run-index order whatever
//! order the workers finish in.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use thinstream_base::trace::{Record, Units};
use thinstream_base::{Datagram, Duration, Instant};
use thinstream_link::LinkConfig;
use thinstream_metrics::{
    transfer_time_at_loss, AnalysisOptions, AppSend, FlowAnalysis, FlowDigest, FlowInput,
    FlowStream, OwdCorrection, ThroughputStream,
};
use thinstream_sim::topology::endpoint_addr;
use thinstream_sim::{
    Access, App, Dumbbell, Echo, EndpointSpec, FlowId, FlowSpec, MessageSource, MessageSpec,
    RecordFilter, Side, Simulation, Sink, StopReason, Topology,
};
use thinstream_workload::Generator;

use crate::error::LabError;
use crate::plan::{Plan, RunSpec};
use crate::record::RunRecord;
use crate::scenario::{
    FlowEntry, PeerKind, SweepPoint, ThroughputSpec, TopologySpec, TransportKind,
};
use crate::transport::TransportConfig;
use crate::wall;

/// What one run leaves behind.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    pub spec: RunSpec,
    /// One analysis per measured flow, in flow order (empty when the run
    /// was analysed while it ran: then `digests` holds the results).
    pub flows: Vec<FlowAnalysis>,
    /// A run analysed while it ran ([`Detail::stream`]): one digest per
    /// measured flow, in flow order, with the samples of
    /// [`crate::record::latency_kinds`].
    pub digests: Option<Vec<FlowDigest>>,
    /// A streamed run: the most state its analyses held at a pause.
    pub stream_peak: Option<StreamPeak>,
    /// Simulator events processed.
    pub events: u64,
    /// Packets handed to a link, summed over every link (a packet crossing
    /// a dumbbell counts three times): the simulator's work in packet hops.
    pub packet_hops: u64,
    /// Virtual time at which the run stopped.
    pub end: Instant,
    /// Wall-clock seconds of build + run + reduction (not deterministic).
    pub wall_s: f64,
    /// Set if a transport misbehaved (the simulator stopped the run).
    pub fault: Option<String>,
    /// `drop-data-packet` sweeps: the units in the dropped packet, and the
    /// transfer time of the message that held its first unit (003 §3).
    pub dropped_units: Option<Units>,
    pub mtt: Option<Duration>,
    /// `[metrics] throughput`: bytes acknowledged per interval of every
    /// flow but HTTP cross traffic, reduced per `[[flows]]` entry.
    pub throughput: Vec<crate::fairness::EntrySeries>,
    /// Echo flows: the response time of every request (001 §IV.A).
    pub responses: Vec<thinstream_metrics::ResponseSample>,
    /// Dumbbell runs: the bottleneck links' statistics.
    pub bottleneck: Option<crate::fairness::BottleneckRun>,
    /// The slowest message over the measured flows and its path
    /// ([`crate::worst`]).
    pub worst: Option<crate::worst::WorstPath>,
    /// The capture, if this run was asked for one.
    pub pcap: Option<Vec<u8>>,
    /// Every endpoint's trace records (`flow{i}.a` / `flow{i}.b`, in
    /// endpoint order), if this run was asked for them.
    pub records: Option<Vec<(String, Vec<Record>)>>,
}

/// What to keep of one run beyond its metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Detail {
    /// Capture the run's packets, seen where this says.
    pub pcap: Option<thinstream_sim::CapturePoint>,
    pub records: bool,
    /// Analyse the run while it runs ([`thinstream_metrics::FlowStream`]),
    /// so that memory does not grow with the simulated duration; the
    /// outcome then has digests instead of per-message analyses. Ignored
    /// (the full analysis is made) when the run needs per-message data
    /// after its end: a capture or records of this run, echo peers
    /// (response times), a `drop-data-packet` sweep (transfer time of the
    /// message hit) or the drift-corrected one-way delay. Throughput series
    /// stream too ([`thinstream_metrics::ThroughputStream`]). See [`streams`].
    pub stream: bool,
}

/// Virtual time between two reads of the trace records of a streamed run
/// that measures at most 100 flows ([`stream_pause`]).
pub const STREAM_PAUSE: Duration = Duration::from_secs(10);

/// The shortest time between two reads of a streamed run's records.
pub const STREAM_PAUSE_MIN: Duration = Duration::from_secs(1);

/// Virtual time between two reads of the trace records of a streamed run
/// measuring `flows` flows: [`STREAM_PAUSE`] up to 100 flows, then
/// shorter in proportion, [`STREAM_PAUSE_MIN`] from 1000 flows on. The
/// records are held until they are read, so up to 1000 flows they stay
/// about as many as 100 flows write in 10 s; the limit is there because
/// a read also costs a little per flow (each flow's analysis state is
/// brought back into the caches), which with 2000 flows read every second
/// already outweighs what the smaller record buffers save (docs/memory.md,
/// "Records read more often with many flows"). Results do not depend on
/// it.
pub fn stream_pause(flows: usize) -> Duration {
    let scaled = STREAM_PAUSE.as_nanos() * 100 / flows.max(100) as u64;
    Duration::from_nanos(scaled.max(STREAM_PAUSE_MIN.as_nanos()))
}

/// Exact latency samples a streamed run keeps per flow and latency kind
/// at most; beyond, a histogram (`metrics::LatencyHistogram`: percentiles
/// at most 0.1 % above the exact ones, plus the one-way delay's share for
/// `min-observed`, see there). 2^16 samples: a thin stream sending every
/// 250 ms reaches it after 4.5 simulated hours. A run of more than
/// [`STREAM_SAMPLE_BUDGET`] / 2^16 = 32 measured flows keeps fewer per
/// flow: [`stream_sample_limit`].
pub const STREAM_SAMPLE_LIMIT: usize = 1 << 16;

/// Exact latency samples a streamed run keeps over all its measured flows
/// per latency kind (16 bytes each: 32 MiB), so that its memory stops
/// growing with the simulated duration however many flows it measures.
pub const STREAM_SAMPLE_BUDGET: usize = 1 << 21;

/// The fewest exact samples a flow keeps per kind, however many flows.
pub const STREAM_SAMPLE_FLOOR: usize = 1 << 10;

/// Exact samples each of `flows` measured flows keeps per latency kind:
/// the budget shared out, between [`STREAM_SAMPLE_FLOOR`] and
/// [`STREAM_SAMPLE_LIMIT`].
pub fn stream_sample_limit(flows: usize) -> usize {
    (STREAM_SAMPLE_BUDGET / flows.max(1)).clamp(STREAM_SAMPLE_FLOOR, STREAM_SAMPLE_LIMIT)
}

/// The most state the analyses of a streamed run held at any pause (the
/// largest over its measured flows), to show that it does not grow with
/// the simulated duration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamPeak {
    /// Messages not yet final, and final ones waiting behind them for
    /// their cumulative ACK latency (when it is asked for).
    pub open_messages: usize,
    /// Unit ranges stored for them, and the coalesced final units.
    pub stored_ranges: usize,
    /// Exact latency samples (all kinds).
    pub exact_samples: usize,
    /// Paths of final messages kept for the slowest message's blocker.
    pub kept_paths: usize,
    /// Trace records read at one pause (both endpoints).
    pub records_per_pause: usize,
}

/// Whether runs of `plan` can be analysed while they run (see [`Detail::stream`]).
pub fn streams(plan: &Plan) -> bool {
    let s = &plan.scenario;
    let drop_sweep = s
        .sweep
        .as_ref()
        .is_some_and(|sw| sw.has(crate::scenario::SweepParameter::DropDataPacket));
    !drop_sweep
        && !matches!(
            s.metrics.owd.0,
            OwdCorrection::MinObservedDriftCorrected { .. }
        )
        && !s
            .flows
            .iter()
            .any(|f| f.is_measured() && f.peer_kind() == PeerKind::Echo)
}

/// How to run a plan.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Worker threads (at least 1).
    pub jobs: usize,
    /// Show a progress bar on stderr (drawn only if stderr is a terminal).
    pub progress: bool,
    /// Capture a pcap of this run index.
    pub pcap_run: Option<usize>,
    /// Where that capture sees packets: as endpoints send them (before
    /// any link's loss and delay) or as they arrive.
    pub pcap_point: thinstream_sim::CapturePoint,
    /// Keep the trace records of this run index.
    pub records_run: Option<usize>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            jobs: 1,
            progress: false,
            pcap_run: None,
            pcap_point: thinstream_sim::CapturePoint::Send,
            records_run: None,
        }
    }
}

/// Runs every run of `plan`; outcomes in index order.
pub fn run_all(plan: &Plan, options: &RunOptions) -> Result<Vec<RunOutcome>, LabError> {
    run_each(plan, &plan.runs, options, false, |o| o)
}

/// Runs `specs` (runs of `plan`, e.g. one shard's) and reduces each
/// outcome to its [`RunRecord`] inside the worker, so the per-message
/// analyses of many runs are never held together; records in the order of
/// `specs`. Detail options (pcap, records) are ignored. Runs are analysed
/// while they run where the scenario allows it ([`streams`]): the records
/// are the same, memory does not grow with the simulated duration.
pub fn run_records(
    plan: &Plan,
    specs: &[RunSpec],
    options: &RunOptions,
) -> Result<Vec<RunRecord>, LabError> {
    let kinds = crate::record::latency_kinds(&plan.scenario);
    let options = RunOptions {
        pcap_run: None,
        records_run: None,
        ..options.clone()
    };
    run_each(plan, specs, &options, true, |o| RunRecord::of(&o, &kinds))
}

fn run_each<T: Send>(
    plan: &Plan,
    specs: &[RunSpec],
    options: &RunOptions,
    stream: bool,
    reduce: impl Fn(RunOutcome) -> T + Sync,
) -> Result<Vec<T>, LabError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(options.jobs.max(1))
        .build()
        .map_err(|e| LabError::Selection(format!("cannot start worker threads: {e}")))?;
    let bar = ProgressBar::with_draw_target(
        Some(specs.len() as u64),
        if options.progress {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    if options.progress {
        // Redraw the elapsed time while long runs are in flight.
        bar.enable_steady_tick(std::time::Duration::from_millis(500));
    }
    let outcomes: Vec<Result<T, LabError>> = pool.install(|| {
        specs
            .par_iter()
            .map(|spec| {
                let detail = Detail {
                    pcap: (options.pcap_run == Some(spec.index)).then_some(options.pcap_point),
                    records: options.records_run == Some(spec.index),
                    stream,
                };
                let out = run_one(plan, spec, detail).map(&reduce);
                bar.set_message(plan.variants[spec.variant].spec.name.clone());
                bar.inc(1);
                out
            })
            .collect()
    });
    bar.finish_and_clear();
    outcomes.into_iter().collect()
}

/// Builds, runs and reduces one run.
pub fn run_one(plan: &Plan, spec: &RunSpec, detail: Detail) -> Result<RunOutcome, LabError> {
    let started = wall::now();
    let run_err = |message: String| LabError::Run {
        run: spec.index,
        message,
    };
    let variant = &plan.variants[spec.variant];
    let Ok(variant_config) = &variant.config else {
        return Err(run_err(format!(
            "variant {} is not available",
            variant.spec.name
        )));
    };
    let point: &[SweepPoint] = spec.point.map_or(&[], |p| plan.points[p].coords());
    let scenario = &plan.scenario;
    let topology = build_topology(plan, point, &scenario.flows_at(&variant.spec, point));
    let generation_end = Instant::ZERO + plan.duration;

    let mut flows = Vec::new();
    // (flow index, transport kind) of every measured flow.
    let mut measured: Vec<(usize, TransportKind)> = Vec::new();
    // The `[[flows]]` entry of every flow.
    let mut entry_of: Vec<usize> = Vec::new();
    // No link can change a byte and no capture shows the packets: the TCP
    // checksum would never reject one, so it is not computed (the results
    // are the same; a test compares them).
    let offload_checksums = !topology.may_corrupt() && detail.pcap.is_none();
    let entries = scenario.flows_at(&variant.spec, point);
    for (e, entry) in entries.iter().enumerate() {
        let config: TransportConfig = plan.fixed[e]
            .clone()
            .unwrap_or_else(|| variant_config.clone())
            .with_checksum_offload(offload_checksums);
        let kind = config.kind();
        if entry.workload.produces_flows() {
            let start = Instant::ZERO + entry.start;
            let schedules = crate::http::client_schedules(
                &entry.workload,
                start + entry.app_start,
                workload_seed(spec, entry).derive(&format!("workload.flows{e}.http")),
                generation_end,
            )
            .map_err(|err| run_err(format!("flows[{e}] workload: {err}")))?;
            for schedule in schedules {
                let (ca, cb) = (config.clone(), config.clone());
                let a = EndpointSpec {
                    transport: Box::new(move |s| ca.client(s)),
                    app: Box::new(MessageSource::new(schedule).with_stream_framing()),
                };
                let b = EndpointSpec {
                    transport: Box::new(move |s| cb.server(s)),
                    app: Box::new(Sink::stream()),
                };
                flows.push(FlowSpec::new(a, b).starting_at(start));
                entry_of.push(e);
            }
            continue;
        }
        let streams = entry.workload.stream_count();
        let split = crate::echo::splits(kind, streams);
        for k in 0..entry.count {
            let i = flows.len();
            let start = flow_start(entry, k);
            let force_unordered = variant.spec.unordered && plan.fixed[e].is_none();
            let schedule =
                message_schedule(spec, entry, e, i, start, generation_end, force_unordered)
                    .map_err(run_err)?;
            // TCP has one ordered byte stream per connection: a workload
            // over N streams becomes N connections, one per stream (001
            // §III.E's N TCP connections, messages round robin over them).
            // The message draws are the same as for SCTP variants.
            let schedules: Vec<Box<dyn Iterator<Item = MessageSpec>>> = if split {
                let mut per: Vec<Vec<MessageSpec>> = vec![Vec::new(); usize::from(streams)];
                for m in schedule {
                    if let Some(list) = per.get_mut(usize::from(m.stream)) {
                        list.push(MessageSpec {
                            stream: 0,
                            unordered: false,
                            ..m
                        });
                    }
                }
                per.into_iter()
                    .map(|v| Box::new(v.into_iter()) as Box<dyn Iterator<Item = MessageSpec>>)
                    .collect()
            } else {
                vec![Box::new(schedule)]
            };
            for schedule in schedules {
                let i = flows.len();
                let mut source = MessageSource::new(schedule);
                if kind == TransportKind::Tcp {
                    source = source.with_stream_framing();
                }
                let peer: Box<dyn App> = match (entry.peer_kind(), kind) {
                    (PeerKind::Echo, TransportKind::Sctp) => Box::new(Echo::new()),
                    (PeerKind::Echo, TransportKind::Tcp) => {
                        let size =
                            crate::echo::fixed_request_bytes(&entry.workload).ok_or_else(|| {
                                run_err(format!(
                                    "flows[{e}]: a TCP echo peer needs fixed-size requests"
                                ))
                            })?;
                        Box::new(crate::echo::FramedEcho::new(size))
                    }
                    (PeerKind::Sink, TransportKind::Tcp) => Box::new(Sink::stream()),
                    (PeerKind::Sink, TransportKind::Sctp) => Box::new(Sink::messages()),
                };
                let ca = config.clone();
                let cb = receiver_config(plan, spec, e, entry, &config);
                if entry.app_start_from == crate::scenario::AppStartFrom::Established {
                    source = source.starting_when_established(start);
                }
                let a = EndpointSpec {
                    transport: Box::new(move |s| ca.client(s)),
                    app: Box::new(source),
                };
                let b = EndpointSpec {
                    transport: Box::new(move |s| cb.server(s)),
                    app: peer,
                };
                flows.push(FlowSpec::new(a, b).starting_at(start));
                entry_of.push(e);
                if entry.is_measured() {
                    measured.push((i, kind));
                }
            }
        }
    }
    let port = flows[0].port;
    let mut sim =
        Simulation::new(spec.seed, &topology, flows).map_err(|e| run_err(e.to_string()))?;
    if let Some(point) = detail.pcap {
        sim.capture_pcap(point);
    }
    // Nothing here compares the apps' payload digests: not computed.
    for i in 0..sim.endpoint_count() {
        sim.keep_app_digests(thinstream_sim::EndpointId(i), false);
    }
    let drop_k = point.iter().find_map(|x| match x {
        SweepPoint::DropDataPacket(k) => Some(*k),
        _ => None,
    });
    if let Some(k) = drop_k {
        let (flow, kind) = measured[0];
        let src = endpoint_addr(flow, Side::A, port);
        let label = match scenario.topology {
            TopologySpec::TwoHost { .. } => "link.forward",
            TopologySpec::Dumbbell { .. } => "link.bottleneck.forward",
        };
        let mut seen = 0u64;
        let predicate = Box::new(move |d: &Datagram| {
            if d.src != src || !carries_data(kind, &d.payload) {
                return false;
            }
            seen += 1;
            seen == k
        });
        if !sim.set_drop_predicate(label, Some(predicate)) {
            return Err(run_err(format!("no link {label} to drop on")));
        }
    }

    let options = AnalysisOptions {
        owd: scenario.metrics.owd.0,
        summary_latency: scenario.metrics.latency,
    };
    let streaming = detail.stream && detail.pcap.is_none() && !detail.records && streams(plan);
    let (result, streamed) = if streaming {
        // Throughput covers every traced flow (see the full analysis below).
        let traced: Vec<(usize, usize)> = entry_of
            .iter()
            .enumerate()
            .filter(|(_, e)| !scenario.flows[**e].workload.produces_flows())
            .map(|(flow, e)| (*e, flow))
            .collect();
        let throughput = scenario
            .metrics
            .throughput
            .as_ref()
            .map(|t| (t, traced.as_slice(), generation_end));
        let (r, s) = run_streaming(sim, plan, &measured, throughput, options, spec.index)
            .map_err(|e| run_err(format!("metrics: {e}")))?;
        (r, Some(s))
    } else {
        (sim.run(plan.stop()), None)
    };
    let mut fault = match &result.stop {
        StopReason::Fault(m) => Some(m.clone()),
        StopReason::EventLimit => Some("event limit reached".into()),
        StopReason::StopTime | StopReason::Idle => None,
    };
    // A message the transport refused for good (not "wait and retry") is
    // a fault of the run, never a silent gap in the results.
    for e in &result.endpoints {
        if let Some(first) = e.app.source().and_then(|s| s.rejected.first()) {
            let n = e.app.source().map_or(0, |s| s.rejected.len());
            let m = format!(
                "flow{}.{}: {n} message(s) rejected by the transport, the first (stream {}, {} B): {}",
                e.flow.0,
                e.side.label(),
                first.spec.stream,
                first.spec.bytes,
                first.error
            );
            fault = Some(match fault {
                Some(f) => format!("{f}; {m}"),
                None => m,
            });
        }
    }
    // A measured flow that never handed a message to its transport (a
    // connection that never came up, e.g. SYNs lost at a full bottleneck)
    // would be a silent gap in the latency tables.
    let silent: Vec<String> = measured
        .iter()
        .enumerate()
        .filter(|(k, (flow, _))| {
            let app = &result.endpoint(FlowId(*flow), Side::A).app;
            match &streamed {
                Some(s) => app.source().is_some() && s.sent[*k] == 0,
                None => app
                    .source()
                    .is_some_and(|s| s.app_send_times().next().is_none()),
            }
        })
        .map(|(_, (flow, _))| format!("flow{flow}"))
        .collect();
    if !silent.is_empty() {
        let m = format!(
            "{} measured flow(s) never handed a message to the transport (connection never up?): {}",
            silent.len(),
            silent.join(", ")
        );
        fault = Some(match fault {
            Some(f) => format!("{f}; {m}"),
            None => m,
        });
    }
    if let Some(streamed) = streamed {
        return Ok(RunOutcome {
            spec: *spec,
            flows: Vec::new(),
            digests: Some(streamed.digests),
            stream_peak: Some(streamed.peak),
            events: result.events,
            packet_hops: result.links.iter().map(|l| l.stats.offered.packets).sum(),
            end: result.end,
            wall_s: wall::seconds_since(started),
            fault,
            dropped_units: None,
            mtt: None,
            throughput: streamed.throughput,
            bottleneck: crate::fairness::bottleneck_stats(&result, plan.stop()),
            responses: Vec::new(),
            worst: streamed.worst,
            records: None,
            pcap: None,
        });
    }
    let mut analyses = Vec::with_capacity(measured.len());
    let mut responses = Vec::new();
    let mut worst: Option<crate::worst::WorstPath> = None;
    for (flow, _) in &measured {
        let a = result.endpoint(FlowId(*flow), Side::A);
        let b = result.endpoint(FlowId(*flow), Side::B);
        let sends: Vec<AppSend> = a
            .app
            .source()
            .map(|s| {
                s.app_send_times()
                    .map(|(message, time)| AppSend { message, time })
                    .collect()
            })
            .unwrap_or_default();
        let analysis = FlowAnalysis::build(
            FlowInput {
                sender: &a.records,
                receiver: Some(&b.records),
                app_sends: Some(&sends),
                duplicate_reports: None,
            },
            options,
        )
        .map_err(|e| run_err(format!("metrics of flow {flow}: {e}")))?;
        if scenario.flows[entry_of[*flow]].peer_kind() == PeerKind::Echo {
            // 001 §IV.A: request sent -> echo delivered to the client.
            let reverse = FlowAnalysis::build(
                FlowInput {
                    sender: &b.records,
                    receiver: Some(&a.records),
                    app_sends: None,
                    duplicate_reports: None,
                },
                options,
            )
            .map_err(|e| run_err(format!("metrics of flow {flow} (echoes): {e}")))?;
            responses.extend(
                thinstream_metrics::response_times(&analysis, &reverse)
                    .map_err(|e| run_err(format!("response times of flow {flow}: {e}")))?,
            );
        }
        if let Some(w) = crate::worst::slowest(
            &analysis,
            scenario.metrics.latency,
            &a.records,
            &b.records,
            spec.index,
        ) {
            if worst
                .as_ref()
                .is_none_or(|x| x.path.latency_ms < w.path.latency_ms)
            {
                worst = Some(w);
            }
        }
        analyses.push(analysis);
    }
    // Throughput covers every traced flow (measured or not: greedy
    // competitors are usually not part of the latency tables), but not the
    // HTTP cross traffic, which is not traced.
    let throughput = match &scenario.metrics.throughput {
        Some(t) => {
            let mut extra = Vec::new();
            let mut pairs: Vec<(usize, usize)> = Vec::new(); // (entry, index into all)
            for (flow, e) in entry_of.iter().enumerate() {
                if scenario.flows[*e].workload.produces_flows() {
                    continue;
                }
                match measured.iter().position(|(f, _)| *f == flow) {
                    Some(k) => pairs.push((*e, k)),
                    None => {
                        let a = result.endpoint(FlowId(flow), Side::A);
                        let b = result.endpoint(FlowId(flow), Side::B);
                        let analysis = FlowAnalysis::build(
                            FlowInput {
                                sender: &a.records,
                                receiver: Some(&b.records),
                                app_sends: None,
                                duplicate_reports: None,
                            },
                            options,
                        )
                        .map_err(|e| run_err(format!("throughput of flow {flow}: {e}")))?;
                        extra.push(analysis);
                        pairs.push((*e, analyses.len() + extra.len() - 1));
                    }
                }
            }
            let all: Vec<&FlowAnalysis> = analyses.iter().chain(extra.iter()).collect();
            let flows: Vec<(usize, &FlowAnalysis)> =
                pairs.iter().map(|(e, k)| (*e, all[*k])).collect();
            let series = crate::fairness::series(t, &flows, scenario, generation_end)
                .map_err(|e| run_err(format!("throughput: {e}")))?;
            crate::fairness::EntrySeries::reduce(&series)
        }
        None => Vec::new(),
    };
    let bottleneck = crate::fairness::bottleneck_stats(&result, plan.stop());
    let (dropped_units, mtt) = match drop_k {
        Some(k) => {
            let sender = &result.endpoint(FlowId(measured[0].0), Side::A).records;
            let units = nth_data_packet(sender, k);
            let mtt = units.and_then(|u| transfer_time_at_loss(&analyses[0], u.start));
            (units, mtt)
        }
        None => (None, None),
    };
    Ok(RunOutcome {
        spec: *spec,
        flows: analyses,
        digests: None,
        stream_peak: None,
        events: result.events,
        packet_hops: result.links.iter().map(|l| l.stats.offered.packets).sum(),
        end: result.end,
        wall_s: wall::seconds_since(started),
        fault,
        dropped_units,
        mtt,
        throughput,
        bottleneck,
        responses,
        worst,
        records: detail.records.then(|| {
            result
                .endpoints
                .iter()
                .map(|e| {
                    (
                        format!("flow{}.{}", e.flow.0, e.side.label()),
                        e.records.clone(),
                    )
                })
                .collect()
        }),
        pcap: result.pcap,
    })
}

/// What a streamed run leaves behind.
struct Streamed {
    digests: Vec<FlowDigest>,
    worst: Option<crate::worst::WorstPath>,
    /// Messages each measured flow's source handed to its transport.
    sent: Vec<u64>,
    peak: StreamPeak,
    /// `[metrics] throughput` series of the traced flows, per entry.
    throughput: Vec<crate::fairness::EntrySeries>,
}

/// `[metrics] throughput` of a streamed run: the spec, the traced flows as
/// (`[[flows]]` entry, flow index), and the end of message generation.
type ThroughputPlan<'a> = (&'a ThroughputSpec, &'a [(usize, usize)], Instant);

/// Runs `sim` to the plan's stop, reading every endpoint's records every
/// [`stream_pause`] of virtual time: those of measured flows go into their
/// [`FlowStream`]s, the senders' records of every traced flow go into a
/// [`ThroughputStream`] when the scenario asks for throughput series, the
/// others are dropped, as are the apps' per-message histories.
fn run_streaming(
    mut sim: Simulation,
    plan: &Plan,
    measured: &[(usize, TransportKind)],
    throughput: Option<ThroughputPlan<'_>>,
    options: AnalysisOptions,
    run: usize,
) -> Result<(thinstream_sim::RunResult, Streamed), thinstream_metrics::MetricsError> {
    // (flow, entry, series) per traced flow when throughput is measured.
    let mut series: Vec<(usize, usize, ThroughputStream)> = match throughput {
        Some((spec, traced, generation_end)) => {
            let (from, to) = crate::fairness::whole_window(spec, &plan.scenario, generation_end);
            traced
                .iter()
                .map(|(e, flow)| Ok((*flow, *e, ThroughputStream::new(from, to, spec.interval)?)))
                .collect::<Result<_, thinstream_metrics::MetricsError>>()?
        }
        None => Vec::new(),
    };
    // Each interval is folded into its entry's series once every flow's
    // count for it is final, and then forgotten: memory flat in the number
    // of intervals.
    let mut folder = crate::fairness::SeriesFolder::new(series.iter().map(|(_, e, _)| *e));
    let kinds = crate::record::latency_kinds(&plan.scenario);
    let limit = stream_sample_limit(measured.len());
    let mut streams = measured
        .iter()
        .map(|_| {
            FlowStream::new(options.owd, &kinds, Some(options.summary_latency))
                .map(|s| s.with_sample_limit(limit))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Keep only the records something reads: every record of measured
    // flows, the senders' transmissions and acknowledgements of the other
    // traced flows when throughput is measured, nothing of the rest.
    // The same for the apps' per-message histories: only measured flows'.
    for i in 0..sim.endpoint_count() {
        sim.keep_records(thinstream_sim::EndpointId(i), RecordFilter::None);
        sim.keep_app_history(thinstream_sim::EndpointId(i), false);
    }
    for (flow, _, _) in &series {
        let a = sim.endpoint_id(FlowId(*flow), Side::A);
        sim.keep_records(a, RecordFilter::Only(throughput_record));
    }
    // Of the apps' histories only the senders' is read (the application
    // send times); a receiver's deliveries are in its trace records.
    for (flow, _) in measured {
        for side in [Side::A, Side::B] {
            let id = sim.endpoint_id(FlowId(*flow), side);
            sim.keep_records(id, RecordFilter::All);
            sim.keep_app_history(id, side == Side::A);
        }
    }
    // Each measured flow's throughput series, and whether a series is
    // of a measured flow: looked up once here, not searched at every
    // pause (with thousands of flows that search was quadratic).
    let series_by_flow: std::collections::BTreeMap<usize, usize> = series
        .iter()
        .enumerate()
        .map(|(i, (f, _, _))| (*f, i))
        .collect();
    let series_of: Vec<Option<usize>> = measured
        .iter()
        .map(|(flow, _)| series_by_flow.get(flow).copied())
        .collect();
    let series_measured: Vec<bool> = {
        let mut m = vec![false; series.len()];
        for i in series_of.iter().flatten() {
            m[*i] = true;
        }
        m
    };
    let mut sent = vec![0u64; measured.len()];
    let mut error = None;
    let mut peak = StreamPeak::default();
    let endpoints = sim.endpoint_count();
    let reason = sim.run_until_pausing(plan.stop(), stream_pause(measured.len()), |sim| {
        let upto = sim.now();
        let mut read = vec![false; endpoints];
        for (k, (flow, _)) in measured.iter().enumerate() {
            let a = sim.endpoint_id(FlowId(*flow), Side::A);
            let b = sim.endpoint_id(FlowId(*flow), Side::B);
            read[a.0] = true;
            read[b.0] = true;
            let history = sim.drain_app_history(a);
            sim.drain_app_history(b);
            sent[k] += history.sent.len() as u64;
            streams[k].app_sends(history.sent.iter().map(|m| AppSend {
                message: m.transport_id,
                time: m.due,
            }));
            let (s, r) = (sim.take_records(a), sim.take_records(b));
            peak.records_per_pause = peak.records_per_pause.max(s.len() + r.len());
            if let Some((_, _, t)) = series_of[k].map(|i| &mut series[i]) {
                if let Err(e) = t.push(&s) {
                    error.get_or_insert(e);
                }
            }
            if let Err(e) = streams[k].push(s, r, upto) {
                error.get_or_insert(e);
            }
            let f = &streams[k];
            peak.open_messages = peak
                .open_messages
                .max(f.open_messages() + f.cumulative_waiting());
            peak.stored_ranges = peak.stored_ranges.max(f.stored_ranges());
            peak.exact_samples = peak.exact_samples.max(f.exact_samples());
            peak.kept_paths = peak.kept_paths.max(f.kept_paths());
        }
        // Traced flows outside the latency tables: their senders' records
        // for the throughput series only.
        for ((flow, _, t), of_measured) in series.iter_mut().zip(&series_measured) {
            if *of_measured {
                continue;
            }
            let a = sim.endpoint_id(FlowId(*flow), Side::A);
            read[a.0] = true;
            if let Err(e) = t.push(&sim.take_records(a)) {
                error.get_or_insert(e);
            }
        }
        for (i, done) in read.iter().enumerate() {
            if !done {
                let id = thinstream_sim::EndpointId(i);
                sim.take_records(id);
                sim.drain_app_history(id);
            }
        }
        // Every traced sender's records before `upto` are read: the
        // intervals ending by then are final.
        if let Some((_, _, first)) = series.first() {
            let complete = first.complete_at(upto);
            folder.fold(complete, |f, k| series[f].2.bin(k));
            for (_, _, t) in &mut series {
                t.release(complete);
            }
        }
    });
    if let Some(e) = error {
        return Err(e);
    }
    let result = sim.finish(reason);
    let mut digests = Vec::with_capacity(streams.len());
    let mut worst: Option<crate::worst::WorstPath> = None;
    for stream in streams {
        let (digest, slowest) = stream.finish()?;
        digests.push(digest);
        if let Some(w) = slowest.map(|t| crate::worst::from_trail(&t, run)) {
            if worst
                .as_ref()
                .is_none_or(|x| x.path.latency_ms < w.path.latency_ms)
            {
                worst = Some(w);
            }
        }
    }
    Ok((
        result,
        Streamed {
            digests,
            worst,
            sent,
            peak,
            throughput: {
                let intervals = series.first().map_or(0, |(_, _, t)| t.intervals());
                folder.fold(intervals, |f, k| series[f].2.bin(k));
                folder.finish()
            },
        },
    ))
}

/// The records a [`ThroughputStream`] reads.
fn throughput_record(r: &Record) -> bool {
    matches!(r, Record::PacketSent { .. } | Record::Acked { .. })
}

/// When the `k`-th flow of a `[[flows]]` entry starts: the entry's start
/// plus its share `k / count` of `start_spread`.
pub fn flow_start(entry: &FlowEntry, k: u32) -> Instant {
    let spread = Duration::from_nanos(
        (u128::from(entry.start_spread.as_nanos()) * u128::from(k) / u128::from(entry.count.max(1)))
            as u64,
    );
    Instant::ZERO + entry.start + spread
}

/// The seed an entry's workload draws from: its fixed `workload_seed`,
/// else the run's seed.
fn workload_seed(spec: &RunSpec, entry: &FlowEntry) -> thinstream_base::Seed {
    entry.workload_seed.map_or(spec.seed, thinstream_base::Seed)
}

/// The message schedule of flow `flow` (the `flow`-th flow of the run),
/// the `e`-th `[[flows]]` entry, starting at `start`: its workload's
/// messages generated before `generation_end`, drawn from the run's seed
/// (the same draws in the simulator and in a real run).
pub fn message_schedule(
    spec: &RunSpec,
    entry: &FlowEntry,
    e: usize,
    flow: usize,
    start: Instant,
    generation_end: Instant,
    force_unordered: bool,
) -> Result<impl Iterator<Item = MessageSpec> + Send, String> {
    let generator = entry
        .workload
        .build(
            start + entry.app_start,
            workload_seed(spec, entry).derive(&format!("workload.flow{flow}")),
        )
        .map_err(|err| format!("flows[{e}] workload: {err}"))?;
    let generator: Box<dyn Generator + Send> = if entry.app_timer_jitter.is_zero() {
        generator
    } else {
        Box::new(thinstream_workload::TimerJitter::new(
            generator,
            entry.app_timer_jitter,
            spec.seed
                .derive(&format!("workload.flow{flow}.timer"))
                .rng(),
        ))
    };
    Ok(generator
        .into_messages()
        .take_while(move |m| m.at < generation_end)
        .map(move |m| MessageSpec {
            at: m.at,
            stream: m.stream,
            bytes: m.bytes,
            unordered: m.unordered || force_unordered,
        }))
}

/// The receiving end's configuration of a flow of entry `e` whose sender
/// uses `config`: the receiver profile (the variant's, else the entry's;
/// only the entry's for an entry with its own preset) replaces an SCTP
/// receiver's delayed-SACK policy.
pub fn receiver_config(
    plan: &Plan,
    spec: &RunSpec,
    e: usize,
    entry: &FlowEntry,
    config: &TransportConfig,
) -> TransportConfig {
    let variant = &plan.variants[spec.variant];
    let mut cb = config.clone();
    let receiver = if plan.fixed[e].is_none() {
        variant.spec.receiver.as_ref().or(entry.receiver.as_ref())
    } else {
        entry.receiver.as_ref()
    };
    if let (Some(r), TransportConfig::Sctp(c)) = (receiver, &mut cb) {
        if let Some(policy) = thinstream_proto::DelayedSack::receiver(r) {
            c.delayed_sack = policy;
        }
    }
    cb
}

/// A two-host run's forward and reverse links (the sweep point applied)
/// with the seeds the simulator gives them; `None` for other topologies.
pub fn two_host_links(
    plan: &Plan,
    spec: &RunSpec,
) -> Option<(
    (LinkConfig, thinstream_base::Seed),
    (LinkConfig, thinstream_base::Seed),
)> {
    let point: &[SweepPoint] = spec.point.map_or(&[], |p| plan.points[p].coords());
    let variant = &plan.variants[spec.variant];
    let entries = plan.scenario.flows_at(&variant.spec, point);
    match build_topology(plan, point, &entries) {
        Topology::TwoHost { forward, reverse } => Some((
            (
                forward,
                spec.seed.derive(thinstream_sim::topology::FORWARD_LINK),
            ),
            (
                reverse,
                spec.seed.derive(thinstream_sim::topology::REVERSE_LINK),
            ),
        )),
        Topology::Dumbbell(_) => None,
    }
}

/// The topology of one run: the scenario's links with the sweep point applied.
fn build_topology(plan: &Plan, point: &[SweepPoint], entries: &[FlowEntry]) -> Topology {
    let adjust = |link: &LinkConfig| -> LinkConfig {
        let mut l = link.clone();
        for x in point {
            match *x {
                SweepPoint::Loss(p) => {
                    l.loss = Some(thinstream_link::LossModel::Bernoulli { p });
                }
                SweepPoint::Delay(d) => l.delay = d,
                SweepPoint::Rate(rate) => {
                    l.bottleneck = Some(match l.bottleneck.take() {
                        Some(b) => thinstream_link::Bottleneck { rate, ..b },
                        None => thinstream_link::Bottleneck {
                            rate,
                            overhead_bytes: 0,
                            limit_packets: None,
                            limit_bytes: None,
                        },
                    });
                }
                SweepPoint::DropDataPacket(_) | SweepPoint::Iat(_) | SweepPoint::Flows(_) => {}
            }
        }
        l
    };
    match &plan.scenario.topology {
        TopologySpec::TwoHost { forward, reverse } => Topology::TwoHost {
            forward: adjust(&forward.0),
            reverse: adjust(&reverse.as_ref().unwrap_or(forward).0),
        },
        TopologySpec::Dumbbell {
            bottleneck_forward,
            bottleneck_reverse,
            access,
        } => {
            let fwd = adjust(&bottleneck_forward.0);
            let rev = adjust(&bottleneck_reverse.as_ref().unwrap_or(bottleneck_forward).0);
            // `access` lists the flows other than HTTP clients, in order.
            let mut listed = 0usize;
            let mut links: Vec<Access> = Vec::new();
            for entry in entries {
                if entry.workload.produces_flows() {
                    links.extend(crate::http::client_access(
                        &entry.workload,
                        fwd.delay + rev.delay,
                    ));
                    continue;
                }
                for _ in 0..entry.count {
                    let spec = access.get(listed).or(access.first());
                    listed += 1;
                    links.push(spec.map_or_else(Access::default, |s| Access {
                        a: s.a.0.clone(),
                        b: s.b.0.clone(),
                    }));
                }
            }
            Topology::Dumbbell(Dumbbell {
                bottleneck_forward: fwd,
                bottleneck_reverse: rev,
                access: links,
            })
        }
    }
}

/// Whether a datagram carries user data. SCTP (RFC 9260 §3.2): any chunk
/// of type 0 (DATA) after the 12-byte common header; TCP: payload beyond
/// the header length given by the data offset (RFC 9293 §3.1).
pub fn carries_data(kind: TransportKind, packet: &[u8]) -> bool {
    match kind {
        TransportKind::Sctp => {
            let mut at = 12;
            while at + 4 <= packet.len() {
                if packet[at] == 0 {
                    return true;
                }
                let len = usize::from(u16::from_be_bytes([packet[at + 2], packet[at + 3]]));
                if len < 4 {
                    return false;
                }
                at += (len + 3) & !3;
            }
            false
        }
        TransportKind::Tcp => {
            let Some(b) = packet.get(12) else {
                return false;
            };
            packet.len() > usize::from(b >> 4) * 4
        }
    }
}

/// The units of the first data piece of the `k`-th (from 1) packet with
/// data that a sender's trace records.
fn nth_data_packet(records: &[Record], k: u64) -> Option<Units> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::PacketSent { data, .. } if !data.is_empty() => Some(data[0].units),
            _ => None,
        })
        .nth(usize::try_from(k.checked_sub(1)?).ok()?)
}
