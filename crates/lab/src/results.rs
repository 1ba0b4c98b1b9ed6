//! The result store: run outcomes pooled per variant (and per sweep point)
//! into the JSON written as `results.json`.
//!
//! Shape (field order is declaration order; maps are sorted; everything but
//! `wall_s` is a function of the scenario and seed):
//!
//! ```json
//! {"schema_version": 3, "scenario": "000-fig8-uniform", "description": "...", "source": "...",
//!  "seed": 1, "simulated_s": 7260.0, "wall_s": 3.2, "repetitions": 1, "runs": 5,
//!  "latency": "application", "owd": "min-observed", "sweep": null,
//!  "variants": [
//!    {"name": "linux", "transport": "sctp", "preset": "linux", "available": true,
//!     "error": null, "runs": 1, "events": 123456, "packet_hops": 45678, "wall_s": 0.7, "faults": [],
//!     "messages": 28800, "delivered": 28800, ... (metrics::Summary fields) ...,
//!     "latency_cdf_ms": [{"q": 0.0, "ms": 0.0}, ...],
//!     "also": {"ack": {"latency_ms": {...}, "by_retransmissions": [...], "latency_cdf_ms": [...]}},
//!     "points": []}
//!  ],
//!  "mtt_reduction": null,
//!  "reference": {...}}
//! ```
//!
//! With a sweep, `points` lists each value with its own pooled summary and,
//! for `drop-data-packet`, the message transfer time of the message hit by
//! the drop in every repetition and their median (003 §3 reports the median
//! of three replications for pattern (i)). `mtt_reduction` then gives, per
//! variant, `(MTT_baseline − MTT_variant) / MTT_baseline` per point and
//! averaged over points (003's "average reduction in MTT").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thinstream_base::Duration;
use thinstream_metrics::{
    mean_ci95, median, mtt_reduction, FlowDigest, LatencyMs, RetransmissionRow, Summary,
};

use crate::plan::Plan;
use crate::record::RunRecord;
use crate::runner::RunOutcome;
use crate::scenario::{GridPoint, MttStatistic, Overrides, PlotOptions, SweepParameter};

/// Version of the `results.json` shape; bumped when fields are added or
/// change meaning. 2: `schema_version` itself, `latency_cdf_ms` per variant
/// and per `also` kind, `model.curve`. 3: the recovery fields of
/// `metrics::Summary` (`spurious_by_reason`, `spurious_excluding_redundant`,
/// `t3_expiries`, `t3_spurious`, `redundant_bytes`, `tohd_redundant`,
/// `tohd_retransmissions`, `rtt_samples`, `data_rtt_samples`, `thin_share`,
/// `thin_transitions`) per variant and point, `worst_path` per variant and
/// point. 4: per sweep point `also`, `retransmission_causes`,
/// `responses`, `model` and `throughput` (a sweep's variant-level `model` is gone: the
/// model applies per point). 5: sweeps with several axes: `sweep.axes`
/// (each axis's parameter and values), `coords` per point (its value on
/// each axis), `sweep.parameter` names every axis (`"rate x delay"`);
/// `mtt_reduction` per variant adds `ci95` (jackknife over repetitions)
/// and, when the drop position is one axis among others,
/// `cells` (the reduction per combination of the other axes) with
/// `cell_max` and `cell_min`; per variant and point `rto_measured_*`
/// (`metrics::Summary`); `plots` (the scenario's `[plots]` options).
/// 6: `mode` (`simulated`, or `real` for `thinstream run --real`) and
/// `real` (how the real runs went, and which fields they cannot measure);
/// a variant's `events` is `null` in real mode.
pub const SCHEMA_VERSION: u32 = 6;

/// The quantiles stored as `latency_cdf_ms` (fixed, so CDFs of different
/// runs and variants line up).
pub const CDF_QUANTILES: [f64; 27] = [
    0.0, 0.01, 0.05, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.92, 0.94,
    0.95, 0.96, 0.97, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9999, 1.0,
];

/// One point of an empirical CDF: the fraction `q` of samples at or below `ms`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct CdfPoint {
    pub q: f64,
    pub ms: f64,
}

/// [`CDF_QUANTILES`] of the latency samples of `kind` pooled over `flows`
/// (nearest rank on the sorted samples); empty without samples.
pub fn latency_cdf<'a>(
    flows: impl Iterator<Item = &'a thinstream_metrics::FlowAnalysis>,
    kind: thinstream_metrics::LatencyKind,
) -> Vec<CdfPoint> {
    let mut all: Vec<u64> = flows
        .flat_map(|f| f.latencies(kind).into_iter().map(|(_, l)| l.as_nanos()))
        .collect();
    all.sort_unstable();
    cdf_of_sorted(&all)
}

/// [`latency_cdf`] from digests (which must hold the samples of `kind`).
pub fn latency_cdf_digests<'a>(
    flows: impl Iterator<Item = &'a FlowDigest>,
    kind: thinstream_metrics::LatencyKind,
) -> Vec<CdfPoint> {
    let flows: Vec<&FlowDigest> = flows.collect();
    if let Some(h) = FlowDigest::pooled_histogram(flows.iter().copied(), kind) {
        return cdf_of_histogram(&h);
    }
    let mut all: Vec<u64> = flows
        .iter()
        .flat_map(|f| f.samples(kind).iter().map(|s| s.nanos))
        .collect();
    all.sort_unstable();
    cdf_of_sorted(&all)
}

/// [`cdf_of_sorted`] of a histogram's samples (each value within the
/// histogram's bound, see `metrics::LatencyHistogram`).
pub fn cdf_of_histogram(h: &thinstream_metrics::LatencyHistogram) -> Vec<CdfPoint> {
    cdf_by_rank(h.count() as usize, |rank| {
        h.value_at_rank(rank as u64).unwrap_or(0)
    })
}

/// [`CDF_QUANTILES`] of sorted nanosecond samples: the sample of rank
/// `ceil(q·n)` (at least 1), in milliseconds.
pub fn cdf_of_sorted(sorted_nanos: &[u64]) -> Vec<CdfPoint> {
    cdf_by_rank(sorted_nanos.len(), |rank| sorted_nanos[rank - 1])
}

/// [`CDF_QUANTILES`] of `n` samples given the value of each rank (1-based).
fn cdf_by_rank(n: usize, at: impl Fn(usize) -> u64) -> Vec<CdfPoint> {
    if n == 0 {
        return Vec::new();
    }
    CDF_QUANTILES
        .iter()
        .map(|q| {
            let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
            CdfPoint {
                q: *q,
                ms: at(rank) as f64 / 1e6,
            }
        })
        .collect()
}

/// The whole `results.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Results {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `simulated`, or `real`: the runs went over real sockets in real
    /// time (`thinstream run --real`); then `real` says how.
    #[serde(default = "simulated")]
    pub mode: String,
    pub scenario: String,
    pub description: String,
    pub source: String,
    pub seed: u64,
    /// Simulated seconds of one run (generation window + drain).
    pub simulated_s: f64,
    /// Wall-clock seconds for all runs (not deterministic).
    pub wall_s: f64,
    pub repetitions: u32,
    pub runs: usize,
    pub latency: String,
    /// One-way-delay removal for delivery latencies (`[metrics] owd`):
    /// `none`, `min-observed`, `drift-corrected` or the given duration.
    pub owd: String,
    pub sweep: Option<SweepInfo>,
    pub variants: Vec<VariantResult>,
    pub mtt_reduction: Option<BTreeMap<String, Reduction>>,
    /// `"median"` or `"mean"`: the MTT statistic of `mtt_ms_compared`.
    pub mtt_statistic: MttStatistic,
    /// The scenario's `[plots]` options (how the report draws these results).
    #[serde(default)]
    pub plots: PlotOptions,
    pub reference: Option<serde_json::Value>,
    /// Real mode: when and how the runs went ([`RealInfo`]); `null` when
    /// simulated.
    #[serde(default)]
    pub real: Option<RealInfo>,
}

fn simulated() -> String {
    "simulated".into()
}

/// How the runs of a real-mode `results.json` went.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RealInfo {
    /// Wall-clock start of the first run (UTC, RFC 3339).
    pub started_utc: String,
    /// Runs at once.
    pub jobs: usize,
    /// Fields of the results a real run cannot measure, with the reason
    /// (they are `null` in the variants).
    pub not_measured: BTreeMap<String, String>,
    /// Per run: what its emulator did, and its own checks.
    pub runs: Vec<RealRun>,
}

/// One real run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RealRun {
    pub index: usize,
    pub variant: String,
    pub repetition: u32,
    pub point: Option<String>,
    /// Seconds from the start of the first run to this run's start.
    pub started_s: f64,
    pub wall_s: f64,
    /// Flows (associations) of the run.
    #[serde(default = "one_flow")]
    pub flows: usize,
    /// Messages generated, and delivered to the receiving applications
    /// (counted by the applications, each checked once and in order),
    /// summed over the flows.
    pub messages: u64,
    pub received: u64,
    /// Echoes read by the clients, summed over the flows (echo peers
    /// only).
    #[serde(default)]
    pub echoes: Option<u64>,
    /// The emulator's report of this run (`thinstream emulate --json`'s
    /// shape: per direction datagrams, drops by cause, release error).
    pub emulator: serde_json::Value,
    /// Application timer lateness: how late the sending application woke
    /// for its messages (µs: p50, p99, max; `null` if it never slept).
    pub app_wake_late_us: Option<[f64; 3]>,
    /// A TCP variant's run: the host kernel's TCP that carried it
    /// (congestion control, socket options, kernel release) and how its
    /// records were made (`null` for SCTP runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_tcp: Option<serde_json::Value>,
}

fn one_flow() -> usize {
    1
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepInfo {
    /// The parameter of a one-axis sweep, or every axis's joined by ` x `.
    pub parameter: String,
    /// The points' labels (`coords` joined by `/` with several axes).
    pub values: Vec<String>,
    /// Each axis: its parameter and values, first axis outermost.
    pub axes: Vec<AxisInfo>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AxisInfo {
    pub parameter: String,
    pub values: Vec<String>,
}

/// One variant, pooled over every run of it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VariantResult {
    pub name: String,
    pub transport: String,
    pub preset: String,
    #[serde(default, skip_serializing_if = "Overrides::is_empty")]
    pub overrides: Overrides,
    pub available: bool,
    /// Why the variant did not run.
    pub error: Option<String>,
    pub runs: usize,
    /// Simulator events processed (`null` in real mode).
    pub events: Option<u64>,
    /// Packets handed to a link, summed over every link and run (`null` in
    /// real mode).
    pub packet_hops: Option<u64>,
    /// Wall-clock seconds summed over this variant's runs (not deterministic).
    pub wall_s: f64,
    /// Runs the simulator stopped because a transport misbehaved.
    pub faults: Vec<String>,
    #[serde(flatten)]
    pub summary: Option<Summary>,
    /// The CDF of the summary's latency kind at [`CDF_QUANTILES`].
    pub latency_cdf_ms: Vec<CdfPoint>,
    /// The `[metrics] also` latency kinds.
    pub also: BTreeMap<String, OtherLatency>,
    /// Retransmitted data pieces by retransmission number (1, 2, 3 = "3 or
    /// more") and reason, with spurious counts and the reason's share of
    /// that retransmission number (002 §5.3.4 Fig. 5.26, Table 5.6).
    pub retransmission_causes: Vec<CauseRow>,
    /// Dumbbell topologies: drop rate and utilisation of both bottleneck
    /// directions, pooled over the runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<crate::fairness::BottleneckResult>,
    /// Echo workloads: response times (request sent -> echo delivered,
    /// 001 §IV.A) pooled over runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub responses: Option<crate::echo::ResponseResult>,
    /// Echo workloads on a two-host path with Bernoulli loss: the
    /// head-of-line model's prediction for this variant (001 §III).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<crate::echo::ModelResult>,
    /// `[metrics] throughput`: per `[[flows]]` entry (HTTP cross traffic excepted),
    /// throughput per interval and Jain's index (002 §5.2.5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throughput: Vec<crate::fairness::EntryThroughput>,
    /// The slowest message over all runs and the path that produced it,
    /// read from its trace ([`crate::worst`]).
    pub worst_path: Option<crate::worst::WorstPath>,
    pub points: Vec<PointResult>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CauseRow {
    pub retransmission: u32,
    pub or_more: bool,
    pub reason: String,
    pub count: u64,
    pub spurious: Option<u64>,
    /// `count` over all pieces with this retransmission number.
    pub share: f64,
}

/// Pools the flows' reason tables.
fn causes<'a>(flows: impl Iterator<Item = &'a FlowDigest>) -> Vec<CauseRow> {
    use thinstream_base::trace::TxReason;
    // Every (number, reason) row exists, zeros included, so the shape of
    // results.json does not depend on what happened to occur.
    let mut rows: BTreeMap<(u32, TxReason), (u64, Option<u64>)> = (1..=3u32)
        .flat_map(|n| {
            TxReason::ALL
                .iter()
                .filter(|r| r.is_retransmission())
                .map(move |r| ((n, *r), (0, Some(0))))
        })
        .collect();
    for f in flows {
        for r in &f.reason_table {
            let e = rows
                .entry((r.retransmission, r.reason))
                .or_insert((0, Some(0)));
            e.0 += r.count;
            e.1 = e.1.zip(r.spurious).map(|(a, b)| a + b);
        }
    }
    let mut per_nth: BTreeMap<u32, u64> = BTreeMap::new();
    for ((nth, _), (count, _)) in &rows {
        *per_nth.entry(*nth).or_insert(0) += count;
    }
    rows.into_iter()
        .map(|((nth, reason), (count, spurious))| CauseRow {
            retransmission: nth,
            or_more: nth == 3,
            reason: reason.name().to_string(),
            count,
            spurious,
            // Zero when no piece needed this many retransmissions.
            share: count as f64 / per_nth[&nth].max(1) as f64,
        })
        .collect()
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OtherLatency {
    pub latency_ms: Option<LatencyMs>,
    pub by_retransmissions: Vec<RetransmissionRow>,
    pub latency_cdf_ms: Vec<CdfPoint>,
}

/// One sweep point of one variant.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PointResult {
    pub value: String,
    /// The point's value on each axis (one entry for a one-axis sweep).
    pub coords: Vec<String>,
    pub summary: Summary,
    /// `drop-data-packet`: MTT of the message hit, per repetition (`null`
    /// if the run had fewer data packets or the message was not delivered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtt_ms: Option<Vec<Option<f64>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtt_median_ms: Option<f64>,
    /// Mean over repetitions and the half-width of its 95% confidence
    /// interval (Student's t; needs two or more repetitions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtt_mean_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtt_ci95_ms: Option<f64>,
    /// The statistic `[metrics] mtt` selects (what tables and reductions use).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtt_ms_compared: Option<f64>,
    /// The slowest message at this point and its path.
    pub worst_path: Option<crate::worst::WorstPath>,
    /// The `[metrics] also` latency kinds at this point.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub also: BTreeMap<String, OtherLatency>,
    /// Retransmission causes at this point (as the variant's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retransmission_causes: Vec<CauseRow>,
    /// Echo workloads: response times at this point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responses: Option<crate::echo::ResponseResult>,
    /// Echo workloads on a two-host path with Bernoulli loss: the model's
    /// prediction at this point's loss rate or delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<crate::echo::ModelResult>,
    /// `[metrics] throughput` at this point.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throughput: Vec<crate::fairness::EntryThroughput>,
}

impl PointResult {
    /// The compared MTT as text: `123.4`, or `123.4 ± 5.6` for a mean
    /// with its 95% confidence half-width; `-` if unknown.
    pub fn mtt_text(&self, statistic: MttStatistic) -> String {
        match (self.mtt_ms_compared, statistic, self.mtt_ci95_ms) {
            (None, _, _) => "-".into(),
            (Some(m), MttStatistic::Mean, Some(h)) => format!("{m:.1} ± {h:.1}"),
            (Some(m), _, _) => format!("{m:.1}"),
        }
    }
}

/// MTT reduction of one variant against the baseline.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reduction {
    pub baseline: String,
    /// Mean over the points where both compared MTTs exist.
    pub mean: Option<f64>,
    pub per_point: Vec<Option<f64>>,
    /// Half-width of a 95% confidence interval of `mean` over the
    /// repetitions (jackknife: `mean` recomputed with each repetition left
    /// out, Student's t with n − 1 degrees of freedom); `[metrics] mtt =
    /// "mean"` with two or more repetitions only (003 §4.2-4.3's intervals
    /// over 40 replications).
    pub ci95: Option<f64>,
    /// The drop position is one axis among others: the reduction per
    /// combination of the other axes' values (003 Figs. 3, 5, 7, 8, 10, 11).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cells: Vec<CellReduction>,
    /// The largest and smallest `mean` over `cells`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_min: Option<f64>,
}

/// [`Reduction`] over the drop positions of one combination of the other
/// axes' values.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellReduction {
    /// The other axes' values joined by `/` (`2000kbit/5ms`).
    pub cell: String,
    pub coords: Vec<String>,
    /// Mean over the cell's positions of the per-point reduction.
    pub mean: Option<f64>,
    /// Positions where both compared MTTs exist.
    pub positions: usize,
    /// As [`Reduction::ci95`], for this cell.
    pub ci95: Option<f64>,
}

/// Mean of the known values.
fn mean_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let known: Vec<f64> = values.flatten().collect();
    (!known.is_empty()).then(|| known.iter().sum::<f64>() / known.len() as f64)
}

/// Mean of the known values of `xs`, leaving out index `skip`.
fn mean_without(xs: &[Option<f64>], skip: Option<usize>) -> Option<f64> {
    mean_of(
        xs.iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != skip)
            .map(|(_, x)| *x),
    )
}

/// Reduction statistics over the points `idx` of a baseline and a variant:
/// (mean of the per-point reductions, positions where both are known, and
/// for the `mean` statistic the 95% half-width of that mean over the
/// repetitions by the jackknife).
fn reduction_over(
    idx: &[usize],
    base: &[PointResult],
    var: &[PointResult],
    per_point: &[Option<f64>],
    statistic: MttStatistic,
) -> (Option<f64>, usize, Option<f64>) {
    let mean = mean_of(idx.iter().map(|&i| per_point[i]));
    let positions = idx.iter().filter(|&&i| per_point[i].is_some()).count();
    let n = idx
        .iter()
        .filter_map(|&i| Some(base[i].mtt_ms.as_ref()?.len()))
        .max()
        .unwrap_or(0);
    let ci95 = match (statistic, mean) {
        (MttStatistic::Mean, Some(theta)) if n >= 2 => {
            // The statistic with repetition `j` left out; its pseudo-values
            // `n θ − (n − 1) θ_j` have the jackknife variance as their
            // sample variance over n, so their t interval is the jackknife
            // interval.
            let loo = |j: usize| {
                mean_of(idx.iter().map(|&i| {
                    let s = mean_without(base[i].mtt_ms.as_ref()?, Some(j))?;
                    let v = mean_without(var[i].mtt_ms.as_ref()?, Some(j))?;
                    (s > 0.0).then(|| (s - v) / s)
                }))
            };
            let pseudo: Option<Vec<f64>> = (0..n)
                .map(|j| loo(j).map(|t| n as f64 * theta - (n as f64 - 1.0) * t))
                .collect();
            pseudo.and_then(|p| mean_ci95(&p)).map(|(_, h)| h)
        }
        _ => None,
    };
    (mean, positions, ci95)
}

/// The slowest message over `runs` (ties: the earliest run).
fn slowest_of<'a>(runs: impl Iterator<Item = &'a RunRecord>) -> Option<crate::worst::WorstPath> {
    runs.filter_map(|o| o.worst.as_ref())
        .fold(None::<&crate::worst::WorstPath>, |best, w| match best {
            Some(b) if b.path.latency_ms >= w.path.latency_ms => Some(b),
            _ => Some(w),
        })
        .cloned()
}

/// The `[metrics] also` latency kinds (other than the main one) over `flows`.
fn also_kinds<'a, I>(
    s: &crate::scenario::Scenario,
    kind: thinstream_metrics::LatencyKind,
    flows: impl Fn() -> I,
) -> BTreeMap<String, OtherLatency>
where
    I: Iterator<Item = &'a FlowDigest> + Clone,
{
    s.metrics
        .also
        .iter()
        .filter(|k| **k != kind)
        .map(|k| {
            let sm = Summary::pooled_digests(flows(), *k);
            (
                k.name().to_string(),
                OtherLatency {
                    latency_ms: sm.latency_ms,
                    by_retransmissions: sm.by_retransmissions,
                    latency_cdf_ms: latency_cdf_digests(flows(), *k),
                },
            )
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

/// Each axis's parameter and the values the plan's points take on it, in
/// order of first appearance (`--points` may have selected some).
fn axes_of(plan: &Plan) -> Vec<AxisInfo> {
    let params = plan
        .scenario
        .sweep
        .as_ref()
        .map(|s| s.parameters())
        .unwrap_or_default();
    params
        .iter()
        .enumerate()
        .map(|(a, p)| {
            let mut values: Vec<String> = Vec::new();
            for point in &plan.points {
                if let Some(x) = point.coords().get(a) {
                    let l = x.label();
                    if !values.contains(&l) {
                        values.push(l);
                    }
                }
            }
            AxisInfo {
                parameter: p.name().to_string(),
                values,
            }
        })
        .collect()
}

/// With the drop position on one axis among others: the plan's points
/// grouped by their values on the other axes (in order of appearance),
/// each group's coordinates and point indices. Empty otherwise.
fn cells_of(plan: &Plan) -> Vec<(Vec<String>, Vec<usize>)> {
    let mut cells: Vec<(Vec<String>, Vec<usize>)> = Vec::new();
    let multi = plan.points.first().is_some_and(|p| p.coords().len() > 1);
    if !multi {
        return cells;
    }
    for (i, p) in plan.points.iter().enumerate() {
        let key: Vec<String> = p
            .coords()
            .iter()
            .filter(|x| x.parameter() != SweepParameter::DropDataPacket)
            .map(crate::scenario::SweepPoint::label)
            .collect();
        match cells.iter_mut().find(|c| c.0 == key) {
            Some(c) => c.1.push(i),
            None => cells.push((key, vec![i])),
        }
    }
    cells
}

impl Results {
    /// Pools `outcomes` (in run-index order) per variant and point.
    pub fn build(plan: &Plan, outcomes: &[RunOutcome], wall_s: f64) -> Results {
        let kinds = crate::record::latency_kinds(&plan.scenario);
        let records: Vec<RunRecord> = outcomes.iter().map(|o| RunRecord::of(o, &kinds)).collect();
        Results::from_records(plan, &records, wall_s)
    }

    /// Pools run records per variant and point; the records are taken in
    /// run-index order whatever order they come in, so the result does not
    /// depend on it (records of several shards give the results of one full
    /// run).
    pub fn from_records(plan: &Plan, records: &[RunRecord], wall_s: f64) -> Results {
        let mut sorted: Vec<&RunRecord> = records.iter().collect();
        sorted.sort_by_key(|r| r.spec.index);
        let outcomes = sorted.as_slice();
        let s = &plan.scenario;
        let kind = s.metrics.latency;
        let drop_sweep = s
            .sweep
            .as_ref()
            .is_some_and(|sw| sw.has(SweepParameter::DropDataPacket));
        let mut variants = Vec::with_capacity(plan.variants.len());
        for (vi, v) in plan.variants.iter().enumerate() {
            let mine: Vec<&RunRecord> = outcomes
                .iter()
                .copied()
                .filter(|o| o.spec.variant == vi)
                .collect();
            let flows = mine.iter().flat_map(|o| o.flows.iter());
            let available = v.config.is_ok();
            let summary = available.then(|| Summary::pooled_digests(flows.clone(), kind));
            let also = if available {
                also_kinds(s, kind, || flows.clone())
            } else {
                BTreeMap::new()
            };
            let echo = available
                && s.flows
                    .iter()
                    .any(|f| f.is_measured() && f.peer_kind() == crate::scenario::PeerKind::Echo);
            let points = plan
                .points
                .iter()
                .enumerate()
                .filter(|_| available)
                .map(|(pi, p)| {
                    let here: Vec<&RunRecord> = mine
                        .iter()
                        .copied()
                        .filter(|o| o.spec.point == Some(pi))
                        .collect();
                    let pflows = || here.iter().flat_map(|o| o.flows.iter());
                    let summary = Summary::pooled_digests(pflows(), kind);
                    let mut point = PointResult {
                        value: p.label(),
                        coords: p.labels(),
                        summary,
                        mtt_ms: None,
                        mtt_median_ms: None,
                        mtt_mean_ms: None,
                        mtt_ci95_ms: None,
                        mtt_ms_compared: None,
                        worst_path: slowest_of(here.iter().copied()),
                        also: also_kinds(s, kind, pflows),
                        retransmission_causes: causes(pflows()),
                        responses: echo.then(|| {
                            crate::echo::pool_responses(
                                here.iter().flat_map(|o| o.responses.iter()),
                            )
                        }),
                        model: v
                            .config
                            .as_ref()
                            .ok()
                            .and_then(|c| crate::echo::predict(s, c, &v.spec, p.coords())),
                        throughput: match &s.metrics.throughput {
                            Some(t) => {
                                let runs: Vec<&[crate::fairness::EntrySeries]> =
                                    here.iter().map(|o| o.throughput.as_slice()).collect();
                                crate::fairness::pool_throughput(s, t.interval, &runs)
                            }
                            None => Vec::new(),
                        },
                    };
                    if drop_sweep {
                        let per: Vec<Option<Duration>> = here.iter().map(|o| o.mtt).collect();
                        let known: Vec<Duration> = per.iter().flatten().copied().collect();
                        let known_ms: Vec<f64> = known.iter().map(|d| ms(*d)).collect();
                        point.mtt_ms = Some(per.iter().map(|m| m.map(ms)).collect());
                        point.mtt_median_ms = median(&known).map(ms);
                        point.mtt_mean_ms = (!known_ms.is_empty())
                            .then(|| known_ms.iter().sum::<f64>() / known_ms.len() as f64);
                        point.mtt_ci95_ms = mean_ci95(&known_ms).map(|(_, h)| h);
                        point.mtt_ms_compared = match s.metrics.mtt {
                            MttStatistic::Median => point.mtt_median_ms,
                            MttStatistic::Mean => point.mtt_mean_ms,
                        };
                    }
                    point
                })
                .collect();
            variants.push(VariantResult {
                name: v.spec.name.clone(),
                transport: v.transport.name().to_string(),
                preset: v.spec.preset.clone(),
                overrides: v.spec.overrides.clone(),
                available,
                error: v.config.as_ref().err().cloned(),
                runs: mine.len(),
                events: Some(mine.iter().map(|o| o.events).sum()),
                packet_hops: Some(mine.iter().map(|o| o.packet_hops).sum()),
                wall_s: mine.iter().map(|o| o.wall_s).sum(),
                faults: mine
                    .iter()
                    .filter_map(|o| {
                        o.fault
                            .as_ref()
                            .map(|f| format!("run {}: {f}", o.spec.index))
                    })
                    .collect(),
                summary,
                latency_cdf_ms: if available {
                    latency_cdf_digests(mine.iter().flat_map(|o| o.flows.iter()), kind)
                } else {
                    Vec::new()
                },
                also,
                retransmission_causes: causes(mine.iter().flat_map(|o| o.flows.iter())),
                responses: echo.then(|| {
                    crate::echo::pool_responses(mine.iter().flat_map(|o| o.responses.iter()))
                }),
                // A loss or delay sweep has one prediction per point
                // (`points[].model`); pooled over the points there is none.
                model: match &s.sweep {
                    Some(_) => None,
                    None => v
                        .config
                        .as_ref()
                        .ok()
                        .and_then(|c| crate::echo::predict(s, c, &v.spec, &[])),
                },
                bottleneck: crate::fairness::pool_bottleneck(
                    mine.iter().filter_map(|o| o.bottleneck.as_ref()),
                ),
                worst_path: slowest_of(mine.iter().copied()),
                throughput: match &s.metrics.throughput {
                    Some(t) if available => {
                        let runs: Vec<&[crate::fairness::EntrySeries]> =
                            mine.iter().map(|o| o.throughput.as_slice()).collect();
                        crate::fairness::pool_throughput(s, t.interval, &runs)
                    }
                    _ => Vec::new(),
                },
                points,
            });
        }
        let mtt_reduction = match (&s.metrics.baseline, drop_sweep) {
            (Some(base), true) => variants
                .iter()
                .find(|v| &v.name == base && v.available)
                .map(|b| {
                    variants
                        .iter()
                        .filter(|v| v.available && v.name != *base)
                        .map(|v| {
                            let per_point: Vec<Option<f64>> = b
                                .points
                                .iter()
                                .zip(&v.points)
                                .map(|(pb, pv)| {
                                    let std = pb.mtt_ms_compared?;
                                    let imp = pv.mtt_ms_compared?;
                                    mtt_reduction(
                                        Duration::from_nanos((std * 1e6) as u64),
                                        Duration::from_nanos((imp * 1e6) as u64),
                                    )
                                })
                                .collect();
                            let all: Vec<usize> = (0..per_point.len()).collect();
                            let (mean, _, ci95) = reduction_over(
                                &all,
                                &b.points,
                                &v.points,
                                &per_point,
                                s.metrics.mtt,
                            );
                            let cells: Vec<CellReduction> = cells_of(plan)
                                .into_iter()
                                .map(|(coords, idx)| {
                                    let (mean, positions, ci95) = reduction_over(
                                        &idx,
                                        &b.points,
                                        &v.points,
                                        &per_point,
                                        s.metrics.mtt,
                                    );
                                    CellReduction {
                                        cell: coords.join(crate::scenario::LABEL_SEPARATOR),
                                        coords,
                                        mean,
                                        positions,
                                        ci95,
                                    }
                                })
                                .collect();
                            let cell_means = || cells.iter().filter_map(|c| c.mean);
                            let cell_max = cell_means().reduce(f64::max);
                            let cell_min = cell_means().reduce(f64::min);
                            (
                                v.name.clone(),
                                Reduction {
                                    baseline: base.clone(),
                                    mean,
                                    per_point,
                                    ci95,
                                    cells,
                                    cell_max,
                                    cell_min,
                                },
                            )
                        })
                        .collect()
                }),
            _ => None,
        };
        Results {
            schema_version: SCHEMA_VERSION,
            mode: simulated(),
            real: None,
            scenario: s.name.clone(),
            description: s.description.clone(),
            source: s.source.clone(),
            seed: plan.seed.0,
            simulated_s: plan.stop().since_epoch().as_secs_f64(),
            wall_s,
            repetitions: plan.repetitions,
            runs: outcomes.len(),
            latency: kind.name().to_string(),
            owd: match s.metrics.owd.0 {
                thinstream_metrics::OwdCorrection::None => "none".into(),
                thinstream_metrics::OwdCorrection::MinObserved => "min-observed".into(),
                thinstream_metrics::OwdCorrection::MinObservedDriftCorrected { .. } => {
                    "drift-corrected".into()
                }
                thinstream_metrics::OwdCorrection::Given(d) => d.to_string(),
            },
            sweep: s.sweep.as_ref().map(|sw| SweepInfo {
                parameter: sw.name(),
                values: plan.points.iter().map(GridPoint::label).collect(),
                axes: axes_of(plan),
            }),
            variants,
            mtt_reduction,
            mtt_statistic: s.metrics.mtt,
            plots: s.plots.clone(),
            reference: s
                .reference
                .as_ref()
                .and_then(|r| serde_json::to_value(r).ok()),
        }
    }

    /// Reads a stored `results.json` back (for rebuilding a report without
    /// re-running). Fails on another schema version.
    pub fn from_json(text: &str) -> Result<Results, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        match v.get("schema_version").and_then(serde_json::Value::as_u64) {
            Some(n) if n == u64::from(SCHEMA_VERSION) => {}
            other => {
                return Err(format!(
                    "schema_version {} but this build reads {SCHEMA_VERSION} (re-run the scenario)",
                    other.map_or("missing".to_string(), |n| n.to_string())
                ))
            }
        }
        serde_json::from_value(v).map_err(|e| format!("not a results.json: {e}"))
    }

    /// Pretty JSON with a final newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": \"serialization failed: {e}\"}}"));
        s.push('\n');
        s
    }
}
