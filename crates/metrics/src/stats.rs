//! Order statistics, CDFs, fairness and confidence intervals.
//!
//! Percentiles use the **nearest-rank** definition on the sorted sample
//! `x_1 ≤ … ≤ x_n`: the `q`-th percentile (`0 < q ≤ 100`) is `x_k` with
//! `k = ceil(q/100 · n)`; `q = 0` gives `x_1`. Every reported percentile is
//! therefore a value that was observed (no interpolation), `p100` is the
//! maximum, and with `n < 100` the 99th percentile is the maximum too. The
//! rank is computed in integers (`q` in thousandths of a percent) so that
//! `0.999 · 1000` does not land on the wrong side of an integer.
//!
//! Samples are integer nanoseconds; means are computed from an exact `u128`
//! sum, so the same samples always give the same bits.

use serde::{Deserialize, Serialize};
use thinstream_base::Duration;

/// Nearest-rank percentile of an ascending sample; `None` for an empty
/// sample. `q` is in percent and clamped to `[0, 100]`.
pub fn percentile_sorted(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    debug_assert!(
        sorted.windows(2).all(|w| w[0] <= w[1]),
        "sample must be sorted"
    );
    // q in units of 1/1000 percent: 99.9 → 99_900; exact for the percentiles we report.
    let milli = if q.is_nan() {
        0
    } else {
        (q.clamp(0.0, 100.0) * 1000.0).round() as u128
    };
    let n = sorted.len() as u128;
    let rank = (milli * n).div_ceil(100_000).max(1);
    Some(sorted[(rank - 1) as usize])
}

/// Count, mean and the percentiles the result tables use, of a sample of
/// durations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyStats {
    pub count: u64,
    pub min: Duration,
    /// Exact mean in nanoseconds (as `f64`).
    pub mean_ns: f64,
    pub p50: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub p999: Duration,
    pub max: Duration,
}

impl LatencyStats {
    /// Statistics of `samples` (any order); `None` when empty.
    pub fn from_durations(samples: impl IntoIterator<Item = Duration>) -> Option<LatencyStats> {
        let mut ns: Vec<u64> = samples.into_iter().map(Duration::as_nanos).collect();
        ns.sort_unstable();
        Self::from_sorted_nanos(&ns)
    }

    /// Statistics of an ascending sample in nanoseconds; `None` when empty.
    pub fn from_sorted_nanos(sorted: &[u64]) -> Option<LatencyStats> {
        let first = *sorted.first()?;
        let sum: u128 = sorted.iter().map(|&v| u128::from(v)).sum();
        let at = |q| Duration::from_nanos(percentile_sorted(sorted, q).unwrap_or(first));
        Some(LatencyStats {
            count: sorted.len() as u64,
            min: Duration::from_nanos(first),
            mean_ns: sum as f64 / sorted.len() as f64,
            p50: at(50.0),
            p90: at(90.0),
            p99: at(99.0),
            p999: at(99.9),
            max: Duration::from_nanos(*sorted.last()?),
        })
    }

    pub fn mean_ms(&self) -> f64 {
        self.mean_ns / 1e6
    }
}

/// One step of an empirical CDF: the fraction of the sample (or of its
/// weight) that is `≤ value_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CdfPoint {
    pub value_ms: f64,
    pub fraction: f64,
}

/// An empirical CDF with one point per distinct value, ascending.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cdf {
    pub points: Vec<CdfPoint>,
}

impl Cdf {
    /// Every sample counts once.
    pub fn from_durations(samples: impl IntoIterator<Item = Duration>) -> Cdf {
        Cdf::weighted(samples.into_iter().map(|d| (d, 1)))
    }

    /// Each sample counts with its weight, e.g. the bytes of a message: 002
    /// §5.2.1 plots "the share of successfully delivered data (bytes)".
    /// Zero-weight samples are ignored.
    pub fn weighted(samples: impl IntoIterator<Item = (Duration, u64)>) -> Cdf {
        let mut s: Vec<(u64, u64)> = samples
            .into_iter()
            .filter(|(_, w)| *w > 0)
            .map(|(d, w)| (d.as_nanos(), w))
            .collect();
        s.sort_unstable();
        let total: u128 = s.iter().map(|(_, w)| u128::from(*w)).sum();
        let mut points: Vec<CdfPoint> = Vec::new();
        let mut acc: u128 = 0;
        for (i, (v, w)) in s.iter().enumerate() {
            acc += u128::from(*w);
            // One point per distinct value, carrying the cumulative weight after it.
            if s.get(i + 1).is_some_and(|(next, _)| next == v) {
                continue;
            }
            points.push(CdfPoint {
                value_ms: *v as f64 / 1e6,
                fraction: acc as f64 / total as f64,
            });
        }
        Cdf { points }
    }

    /// The fraction of the sample `≤ value_ms` (a step function).
    pub fn fraction_at(&self, value_ms: f64) -> f64 {
        let idx = self.points.partition_point(|p| p.value_ms <= value_ms);
        if idx == 0 {
            0.0
        } else {
            self.points[idx - 1].fraction
        }
    }
}

/// Jain's fairness index `(Σx)² / (n · Σx²)` of per-flow throughputs (002
/// §5.2.5 compares the throughput of competing streams; this condenses it to
/// one number in `[1/n, 1]`). `None` for no flows, all-zero throughput, or a
/// negative or non-finite value.
pub fn jain_index(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite() || *v < 0.0) {
        return None;
    }
    let sum: f64 = values.iter().sum();
    let sq: f64 = values.iter().map(|v| v * v).sum();
    if sq == 0.0 {
        return None;
    }
    Some(sum * sum / (values.len() as f64 * sq))
}

/// Jain's index per interval over several flows' throughput series of equal
/// interval length (e.g. from [`crate::FlowAnalysis::throughput`] with the
/// same window): entry `k` is the index over every flow's bytes in interval
/// `k`. Series shorter than the longest count as zero there.
pub fn jain_per_interval(series: &[Vec<u64>]) -> Vec<Option<f64>> {
    let len = series.iter().map(Vec::len).max().unwrap_or(0);
    (0..len)
        .map(|k| {
            let v: Vec<f64> = series
                .iter()
                .map(|s| s.get(k).copied().unwrap_or(0) as f64)
                .collect();
            jain_index(&v)
        })
        .collect()
}

/// Two-sided 97.5% quantiles of Student's t for 1..=30 degrees of freedom
/// (standard table values).
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

fn t_975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T_975[df - 1],
        // Between table rows the smaller df's (larger) value is used, so the
        // interval is never narrower than the exact one.
        31..=39 => 2.042,
        40..=59 => 2.021,
        60..=119 => 2.000,
        _ => 1.980,
    }
}

/// Mean and the half-width of its 95% confidence interval (Student's t),
/// as 003 §3 reports for its 40-replication patterns. `None` for fewer than
/// two samples or non-finite input.
pub fn mean_ci95(samples: &[f64]) -> Option<(f64, f64)> {
    if samples.len() < 2 || samples.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let var = samples.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
    Some((mean, t_975(samples.len() - 1) * (var / n).sqrt()))
}

/// Median of a sample (nearest-rank, as everywhere here), as 003 §3 reports
/// for its 3-replication pattern.
pub fn median(samples: &[Duration]) -> Option<Duration> {
    let mut ns: Vec<u64> = samples.iter().map(|d| d.as_nanos()).collect();
    ns.sort_unstable();
    percentile_sorted(&ns, 50.0).map(Duration::from_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_at_the_edges() {
        let v: Vec<u64> = (1..=10).collect();
        assert_eq!(percentile_sorted(&v, 0.0), Some(1));
        assert_eq!(percentile_sorted(&v, 10.0), Some(1)); // ceil(1.0) = 1
        assert_eq!(percentile_sorted(&v, 10.1), Some(2)); // ceil(1.01) = 2
        assert_eq!(percentile_sorted(&v, 50.0), Some(5)); // ceil(5.0) = 5, not the average 5.5
        assert_eq!(percentile_sorted(&v, 90.0), Some(9));
        assert_eq!(percentile_sorted(&v, 99.0), Some(10));
        assert_eq!(percentile_sorted(&v, 100.0), Some(10));
        assert_eq!(percentile_sorted(&v, 150.0), Some(10));
        assert_eq!(percentile_sorted(&[], 50.0), None);
        assert_eq!(percentile_sorted(&[7], 0.0), Some(7));
        assert_eq!(percentile_sorted(&[7], 99.9), Some(7));
        // 1000 samples: p99.9 is rank 999 exactly (no float drift to 1000).
        let k: Vec<u64> = (1..=1000).collect();
        assert_eq!(percentile_sorted(&k, 99.9), Some(999));
        assert_eq!(percentile_sorted(&k, 99.0), Some(990));
        // 1001 samples: ceil(999.999) = 1000.
        let k: Vec<u64> = (1..=1001).collect();
        assert_eq!(percentile_sorted(&k, 99.9), Some(1000));
    }

    #[test]
    fn latency_stats() {
        let s = LatencyStats::from_durations([30, 10, 20, 40].map(Duration::from_millis)).unwrap();
        assert_eq!(s.count, 4);
        assert_eq!(s.min, Duration::from_millis(10));
        assert_eq!(s.mean_ms(), 25.0);
        assert_eq!(s.p50, Duration::from_millis(20));
        assert_eq!(s.p90, Duration::from_millis(40));
        assert_eq!(s.max, Duration::from_millis(40));
        assert!(LatencyStats::from_durations([]).is_none());
    }

    #[test]
    fn cdf_steps() {
        let c = Cdf::from_durations([10, 20, 20, 40].map(Duration::from_millis));
        assert_eq!(
            c.points,
            vec![
                CdfPoint {
                    value_ms: 10.0,
                    fraction: 0.25
                },
                CdfPoint {
                    value_ms: 20.0,
                    fraction: 0.75
                },
                CdfPoint {
                    value_ms: 40.0,
                    fraction: 1.0
                },
            ]
        );
        assert_eq!(c.fraction_at(5.0), 0.0);
        assert_eq!(c.fraction_at(25.0), 0.75);
        assert_eq!(c.fraction_at(40.0), 1.0);
        // Weighted by bytes: a 300-byte message at 10 ms and a 100-byte one at 50 ms.
        let w = Cdf::weighted([
            (Duration::from_millis(50), 100),
            (Duration::from_millis(10), 300),
        ]);
        assert_eq!(
            w.points[0],
            CdfPoint {
                value_ms: 10.0,
                fraction: 0.75
            }
        );
        assert_eq!(
            w.points[1],
            CdfPoint {
                value_ms: 50.0,
                fraction: 1.0
            }
        );
    }

    #[test]
    fn jain_known_values() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
        // One flow takes everything: 1/n.
        assert_eq!(jain_index(&[10.0, 0.0, 0.0, 0.0]), Some(0.25));
        // (1+2+3)² / (3 · 14) = 36/42.
        assert!((jain_index(&[1.0, 2.0, 3.0]).unwrap() - 36.0 / 42.0).abs() < 1e-12);
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None);
        assert_eq!(jain_index(&[1.0, -1.0]), None);
        // Interval 0: equal; interval 1: one flow idle; interval 2: nobody sent.
        let per = jain_per_interval(&[vec![10, 10, 0], vec![10, 0]]);
        assert_eq!(per, vec![Some(1.0), Some(0.5), None]);
    }

    #[test]
    fn confidence_interval() {
        // Samples 1..=5: mean 3, s² = 2.5, half-width = 2.776 · sqrt(2.5/5).
        let (m, h) = mean_ci95(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(m, 3.0);
        assert!((h - 2.776 * 0.5f64.sqrt()).abs() < 1e-12);
        assert!(mean_ci95(&[1.0]).is_none());
        assert_eq!(
            median(&[3, 1, 2].map(Duration::from_millis)),
            Some(Duration::from_millis(2))
        );
    }
}
