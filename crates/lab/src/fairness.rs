//! Throughput per interval, Jain's fairness index (002 §5.2.5)
//! and bottleneck statistics (drop rate, utilisation), per run
//! and pooled per variant for `results.json`.

use serde::{Deserialize, Serialize};
use thinstream_base::{Duration, Instant};
use thinstream_metrics::{jain_index, FlowAnalysis, MetricsError, ThroughputSource};
use thinstream_sim::RunResult;

use crate::scenario::{Scenario, ThroughputSpec};

/// One measured flow's bytes acknowledged per interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowSeries {
    /// Its `[[flows]]` entry.
    pub entry: usize,
    pub bytes: Vec<u64>,
}

/// The throughput series of one `[[flows]]` entry's flows in one run,
/// reduced to what [`pool_throughput`] reads: per interval the sum over
/// the flows and Jain's index among them, per flow its total. A run keeps
/// this, not every flow's series, so its size grows with the intervals or
/// with the flows, not with both ([`SeriesFolder`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EntrySeries {
    /// The `[[flows]]` entry.
    pub entry: usize,
    /// Bytes acknowledged per interval of the window, summed over the
    /// entry's flows (one item per interval).
    pub aggregate_bytes: Vec<u64>,
    /// Jain's index among the entry's flows per interval (`None` where no
    /// flow acknowledged anything).
    pub jain: Vec<Option<f64>>,
    /// Each flow's bytes acknowledged over the window, in flow order.
    pub flow_bytes: Vec<u64>,
}

impl EntrySeries {
    /// The entries of `series` (flows in the order given), in the order
    /// their first flow comes.
    pub fn reduce(series: &[FlowSeries]) -> Vec<EntrySeries> {
        let mut folder = SeriesFolder::new(series.iter().map(|s| s.entry));
        let intervals = series.iter().map(|s| s.bytes.len()).max().unwrap_or(0);
        folder.fold(intervals, |flow, k| {
            series[flow].bytes.get(k).copied().unwrap_or(0)
        });
        folder.finish()
    }
}

/// Builds [`EntrySeries`] interval by interval while a run goes on: each
/// interval is folded in once every flow's count for it is final, so no
/// flow's whole series is ever held.
#[derive(Clone, Debug)]
pub struct SeriesFolder {
    /// Per entry (order of first appearance): the entry, its flows' indices.
    entries: Vec<(usize, Vec<usize>)>,
    aggregate: Vec<Vec<u64>>,
    jain: Vec<Vec<Option<f64>>>,
    /// Per flow (index as given): bytes so far.
    totals: Vec<u64>,
    /// Intervals folded so far.
    done: usize,
    values: Vec<f64>,
}

impl SeriesFolder {
    /// A folder for flows whose entries are `entry_of` (flow `i` is the
    /// `i`-th item).
    pub fn new(entry_of: impl IntoIterator<Item = usize>) -> SeriesFolder {
        let mut entries: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut flows = 0;
        for (i, e) in entry_of.into_iter().enumerate() {
            match entries.iter_mut().find(|(x, _)| *x == e) {
                Some((_, v)) => v.push(i),
                None => entries.push((e, vec![i])),
            }
            flows = i + 1;
        }
        SeriesFolder {
            aggregate: vec![Vec::new(); entries.len()],
            jain: vec![Vec::new(); entries.len()],
            entries,
            totals: vec![0; flows],
            done: 0,
            values: Vec::new(),
        }
    }

    /// Intervals folded so far.
    pub fn done(&self) -> usize {
        self.done
    }

    /// Folds intervals `done()..upto`, reading flow `f`'s count of
    /// interval `k` as `bytes(f, k)` (final by now).
    pub fn fold(&mut self, upto: usize, bytes: impl Fn(usize, usize) -> u64) {
        for k in self.done..upto {
            for (i, (_, flows)) in self.entries.iter().enumerate() {
                self.values.clear();
                let mut sum = 0u64;
                for &f in flows {
                    let b = bytes(f, k);
                    sum += b;
                    self.totals[f] += b;
                    self.values.push(b as f64);
                }
                self.aggregate[i].push(sum);
                self.jain[i].push(jain_index(&self.values));
            }
        }
        self.done = self.done.max(upto);
    }

    /// The entries' series over the intervals folded.
    pub fn finish(self) -> Vec<EntrySeries> {
        let SeriesFolder {
            entries,
            aggregate,
            jain,
            totals,
            ..
        } = self;
        entries
            .into_iter()
            .zip(aggregate.into_iter().zip(jain))
            .map(|((entry, flows), (aggregate_bytes, jain))| EntrySeries {
                entry,
                aggregate_bytes,
                jain,
                flow_bytes: flows.iter().map(|&f| totals[f]).collect(),
            })
            .collect()
    }
}

/// The window throughput is counted in: from `spec.from`, else the latest
/// `start + app_start` of a traced entry (002 §5.2.5 counts only once
/// every connection is up), to the end of the generation window (`series`
/// keeps the whole intervals in it).
pub fn window(
    spec: &ThroughputSpec,
    scenario: &Scenario,
    generation_end: Instant,
) -> (Instant, Instant) {
    let from = spec.from.unwrap_or_else(|| {
        scenario
            .flows
            .iter()
            .filter(|f| !f.workload.produces_flows())
            .map(|f| f.start + f.app_start)
            .max()
            .unwrap_or(Duration::ZERO)
    });
    let from = (Instant::ZERO + from).min(generation_end);
    (from, generation_end)
}

/// [`window`] cut to whole intervals: a last, shorter interval would read
/// as a drop in throughput.
pub fn whole_window(
    spec: &ThroughputSpec,
    scenario: &Scenario,
    generation_end: Instant,
) -> (Instant, Instant) {
    let (from, to) = window(spec, scenario, generation_end);
    let whole = (to - from).as_nanos() / spec.interval.as_nanos().max(1);
    (
        from,
        from + Duration::from_nanos(whole * spec.interval.as_nanos()),
    )
}

/// Bytes acknowledged per interval (002 §5.2.5: "measured by analysing the
/// acknowledgements (ACKs) on a sender side dump") of every flow given as
/// (its `[[flows]]` entry, its analysis).
pub fn series(
    spec: &ThroughputSpec,
    flows: &[(usize, &FlowAnalysis)],
    scenario: &Scenario,
    generation_end: Instant,
) -> Result<Vec<FlowSeries>, MetricsError> {
    let (from, to) = whole_window(spec, scenario, generation_end);
    flows
        .iter()
        .map(|(entry, a)| {
            Ok(FlowSeries {
                entry: *entry,
                bytes: a.throughput(ThroughputSource::Acked, from, to, spec.interval)?,
            })
        })
        .collect()
}

/// One bottleneck direction in one run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkUse {
    pub offered_packets: u64,
    pub dropped_packets: u64,
    /// UDP payload bytes (the transport's packets) delivered.
    pub delivered_bytes: u64,
    pub rate_bps: Option<u64>,
    pub seconds: f64,
}

/// Both bottleneck directions of one dumbbell run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BottleneckRun {
    pub forward: LinkUse,
    pub reverse: LinkUse,
}

/// The bottleneck statistics of a dumbbell run (`None` for two-host runs).
pub fn bottleneck_stats(result: &RunResult, stop: Instant) -> Option<BottleneckRun> {
    let seconds = stop.since_epoch().as_secs_f64();
    let one = |label: &str| {
        result.link(label).map(|l| LinkUse {
            offered_packets: l.stats.offered.packets,
            dropped_packets: l.stats.dropped_total().packets,
            delivered_bytes: l.stats.delivered.bytes,
            rate_bps: l.config.bottleneck.as_ref().map(|b| b.rate.bits_per_sec()),
            seconds,
        })
    };
    Some(BottleneckRun {
        forward: one("link.bottleneck.forward")?,
        reverse: one("link.bottleneck.reverse")?,
    })
}

/// One bottleneck direction pooled over a variant's runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinkUseResult {
    pub offered_packets: u64,
    pub dropped_packets: u64,
    /// `dropped / offered` (queue overflow and any configured loss).
    pub drop_rate: Option<f64>,
    pub delivered_bytes: u64,
    /// Delivered bits over rate × simulated time (whole runs, drain
    /// included; UDP payload bytes, so headers the bottleneck's
    /// `overhead_bytes` adds are not counted).
    pub utilisation: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BottleneckResult {
    pub forward: LinkUseResult,
    pub reverse: LinkUseResult,
}

fn pool_link(uses: &[LinkUse]) -> LinkUseResult {
    let offered: u64 = uses.iter().map(|u| u.offered_packets).sum();
    let dropped: u64 = uses.iter().map(|u| u.dropped_packets).sum();
    let delivered: u64 = uses.iter().map(|u| u.delivered_bytes).sum();
    let capacity_bits: Option<f64> = uses
        .iter()
        .map(|u| u.rate_bps.map(|r| r as f64 * u.seconds))
        .sum();
    LinkUseResult {
        offered_packets: offered,
        dropped_packets: dropped,
        drop_rate: (offered > 0).then(|| dropped as f64 / offered as f64),
        delivered_bytes: delivered,
        utilisation: capacity_bits
            .filter(|c| *c > 0.0)
            .map(|c| delivered as f64 * 8.0 / c),
    }
}

/// Pools the bottleneck statistics of runs (`None` if no run had one).
pub fn pool_bottleneck<'a>(
    runs: impl Iterator<Item = &'a BottleneckRun>,
) -> Option<BottleneckResult> {
    let runs: Vec<&BottleneckRun> = runs.collect();
    if runs.is_empty() {
        return None;
    }
    let fwd: Vec<LinkUse> = runs.iter().map(|r| r.forward).collect();
    let rev: Vec<LinkUse> = runs.iter().map(|r| r.reverse).collect();
    Some(BottleneckResult {
        forward: pool_link(&fwd),
        reverse: pool_link(&rev),
    })
}

/// Throughput of one `[[flows]]` entry's measured flows, pooled over runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EntryThroughput {
    pub entry: usize,
    pub workload: String,
    /// Measured flows of this entry per run.
    pub flows: usize,
    pub interval_s: f64,
    /// The entry's aggregate throughput in every interval of every run
    /// (the samples of 002 Fig. 5.20's boxes), kbit/s.
    pub aggregate_kbps: Vec<f64>,
    pub aggregate_kbps_mean: Option<f64>,
    pub aggregate_kbps_median: Option<f64>,
    pub aggregate_kbps_min: Option<f64>,
    pub aggregate_kbps_max: Option<f64>,
    /// Each flow's mean throughput over the window, run after run, kbit/s.
    pub per_flow_kbps: Vec<f64>,
    /// Jain's index over the entry's flows in each interval (all runs).
    pub jain_per_interval: Vec<Option<f64>>,
    pub jain_mean: Option<f64>,
    /// Jain's index over the flows' whole-window throughput (per run, averaged).
    pub jain_of_totals: Option<f64>,
}

fn kbps(bytes: u64, interval: Duration) -> f64 {
    bytes as f64 * 8.0 / interval.as_secs_f64() / 1000.0
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Pools per-run series by entry; `runs[r]` is one run's series.
pub fn pool_throughput(
    scenario: &Scenario,
    interval: Duration,
    runs: &[&[EntrySeries]],
) -> Vec<EntryThroughput> {
    let mut out = Vec::new();
    for (e, entry) in scenario.flows.iter().enumerate() {
        let mut aggregate = Vec::new();
        let mut per_flow = Vec::new();
        let mut jain = Vec::new();
        let mut jain_totals = Vec::new();
        let mut flows = 0;
        for run in runs {
            let Some(mine) = run.iter().find(|s| s.entry == e) else {
                continue;
            };
            if mine.flow_bytes.is_empty() {
                continue;
            }
            flows = mine.flow_bytes.len();
            aggregate.extend(mine.aggregate_bytes.iter().map(|b| kbps(*b, interval)));
            let totals: Vec<f64> = mine
                .flow_bytes
                .iter()
                .map(|b| kbps(*b, interval) / mine.aggregate_bytes.len().max(1) as f64)
                .collect();
            jain_totals.extend(jain_index(&totals));
            per_flow.extend(totals);
            jain.extend(mine.jain.iter().copied());
        }
        if flows == 0 {
            continue;
        }
        let mut sorted = aggregate.clone();
        sorted.sort_by(f64::total_cmp);
        let known: Vec<f64> = jain.iter().flatten().copied().collect();
        out.push(EntryThroughput {
            entry: e,
            workload: entry.workload.describe(),
            flows,
            interval_s: interval.as_secs_f64(),
            aggregate_kbps_mean: mean(&aggregate),
            aggregate_kbps_median: (!sorted.is_empty()).then(|| {
                let n = sorted.len();
                if n % 2 == 1 {
                    sorted[n / 2]
                } else {
                    (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
                }
            }),
            aggregate_kbps_min: sorted.first().copied(),
            aggregate_kbps_max: sorted.last().copied(),
            aggregate_kbps: aggregate,
            per_flow_kbps: per_flow,
            jain_mean: mean(&known),
            jain_per_interval: jain,
            jain_of_totals: mean(&jain_totals),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flows() -> Vec<FlowSeries> {
        let s = |entry, bytes: &[u64]| FlowSeries {
            entry,
            bytes: bytes.to_vec(),
        };
        vec![s(0, &[10, 0, 5]), s(1, &[1, 2, 3]), s(0, &[10, 10, 0])]
    }

    #[test]
    fn an_entry_keeps_sums_jain_per_interval_and_flow_totals() {
        let r = EntrySeries::reduce(&flows());
        assert_eq!(
            r,
            vec![
                EntrySeries {
                    entry: 0,
                    aggregate_bytes: vec![20, 10, 5],
                    // [10, 10]: equal shares; [0, 10] and [5, 0]: one of two.
                    jain: vec![Some(1.0), Some(0.5), Some(0.5)],
                    flow_bytes: vec![15, 20],
                },
                EntrySeries {
                    entry: 1,
                    aggregate_bytes: vec![1, 2, 3],
                    jain: vec![Some(1.0); 3],
                    flow_bytes: vec![6],
                },
            ]
        );
        // An interval where no flow acknowledged anything has no index.
        let idle = EntrySeries::reduce(&[FlowSeries {
            entry: 2,
            bytes: vec![0, 4],
        }]);
        assert_eq!(idle[0].jain, vec![None, Some(1.0)]);
    }

    #[test]
    fn folding_interval_by_interval_equals_folding_at_the_end() {
        let series = flows();
        let mut folder = SeriesFolder::new(series.iter().map(|s| s.entry));
        for upto in [0, 1, 1, 3] {
            folder.fold(upto, |f, k| series[f].bytes[k]);
            assert_eq!(folder.done(), upto);
        }
        assert_eq!(folder.finish(), EntrySeries::reduce(&series));
    }
}
