//! The sampling distributions the generators share: inter-arrival times
//! ([`IatDist`]) and message sizes ([`SizeDist`]), plus the two fitted
//! families used by the Table 2.1 profiles ([`QuantileFit`],
//! [`TruncGeometric`]) and the truncated Pareto of the HTTP cross traffic
//! ([`TruncPareto`]).
//!
//! All sampling goes through [`Rng`]; every function here is pure given the
//! generator state.

use thinstream_base::{Duration, Rng};

use crate::WorkloadError;

/// An inter-arrival-time distribution.
#[derive(Clone, Debug, PartialEq)]
pub enum IatDist {
    /// Always the same gap.
    Constant(Duration),
    /// Exponential with the given mean (a Poisson arrival process).
    Exponential { mean: Duration },
    /// Uniform on `[min, max]`.
    Uniform { min: Duration, max: Duration },
    /// A fitted quantile function in milliseconds (Table 2.1 profiles).
    Quantile(QuantileFit),
}

impl IatDist {
    pub fn sample(&self, rng: &mut Rng) -> Duration {
        match self {
            IatDist::Constant(d) => *d,
            IatDist::Exponential { mean } => {
                Duration::from_secs_f64(rng.exponential(mean.as_secs_f64()))
            }
            IatDist::Uniform { min, max } => Duration::from_nanos(
                rng.range_inclusive(min.as_nanos(), max.as_nanos().max(min.as_nanos())),
            ),
            IatDist::Quantile(q) => Duration::from_secs_f64(q.sample(rng) / 1e3),
        }
    }

    /// The distribution's mean (exact, not sampled).
    pub fn mean(&self) -> Duration {
        match self {
            IatDist::Constant(d) => *d,
            IatDist::Exponential { mean } => *mean,
            IatDist::Uniform { min, max } => {
                Duration::from_nanos(min.as_nanos() / 2 + max.as_nanos() / 2)
            }
            IatDist::Quantile(q) => Duration::from_secs_f64(q.mean() / 1e3),
        }
    }
}

/// A message-size distribution (bytes).
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    Constant(u32),
    /// Uniform integer on `[min, max]`.
    Uniform {
        min: u32,
        max: u32,
    },
    /// Truncated geometric on `[min, max]` (Table 2.1 profiles).
    Geometric(TruncGeometric),
}

impl SizeDist {
    pub fn sample(&self, rng: &mut Rng) -> u32 {
        match self {
            SizeDist::Constant(b) => *b,
            SizeDist::Uniform { min, max } => {
                rng.range_inclusive(u64::from(*min), u64::from(*max.max(min))) as u32
            }
            SizeDist::Geometric(g) => g.sample(rng),
        }
    }
    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Constant(b) => f64::from(*b),
            SizeDist::Uniform { min, max } => (f64::from(*min) + f64::from(*max)) / 2.0,
            SizeDist::Geometric(g) => g.mean(),
        }
    }
}

/// A continuous distribution given by its quantile function through five
/// knots `(0, min)`, `(0.01, p1)`, `(0.5, median)`, `(0.99, p99)`, `(1, max)`.
///
/// Between two knots `(u0, x0)` and `(u1, x1)` the quantile function is
/// `x0 + (x1 − x0)·t^k` with `t = (u − u0)/(u1 − u0)`: `k = 1` is a uniform
/// density on the segment, `k > 1` piles the mass up near `x0` with a thin
/// tail towards `x1` (convex quantile function, as in heavy-tailed data). The
/// two lower segments use `k = 1`; the two upper segments share one exponent
/// `k_up`, chosen in closed form so that the mean equals a target (see
/// [`QuantileFit::with_mean`]). Because the knots are exact quantiles, the
/// fitted distribution reproduces min, p1, median, p99 and max exactly and the
/// mean by construction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantileFit {
    /// Values at u = 0, 0.01, 0.5, 0.99, 1 (non-decreasing).
    pub knots: [f64; 5],
    /// Exponent of the two upper segments.
    pub k_up: f64,
}

/// Probability levels of the five knots.
pub const QUANTILE_LEVELS: [f64; 5] = [0.0, 0.01, 0.5, 0.99, 1.0];

impl QuantileFit {
    /// Solves `k_up` so that the mean is `mean`. The mean of segment *i* is
    /// `w_i·(x_i + (x_{i+1} − x_i)/(k_i + 1))` with weights 0.01, 0.49,
    /// 0.49, 0.01, so with the lower `k = 1` fixed,
    /// `mean = L + U0 + U_span/(k_up + 1)` and `k_up` follows directly.
    /// Fails if no positive `k_up` reaches the mean (it would need a lower
    /// segment reshaped too).
    pub fn with_mean(knots: [f64; 5], mean: f64) -> Result<QuantileFit, WorkloadError> {
        if knots.windows(2).any(|w| w[1] < w[0]) || knots[0] < 0.0 || !knots[4].is_finite() {
            return Err(WorkloadError::invalid(
                "quantile-fit.knots",
                format!("knots must be finite, non-negative and non-decreasing: {knots:?}"),
            ));
        }
        let w = segment_weights();
        let lower = w[0] * (knots[0] + knots[1]) / 2.0 + w[1] * (knots[1] + knots[2]) / 2.0;
        let u0 = w[2] * knots[2] + w[3] * knots[3];
        let span = w[2] * (knots[3] - knots[2]) + w[3] * (knots[4] - knots[3]);
        let need = mean - lower - u0;
        if span <= 0.0 {
            if need.abs() <= 1e-9 * mean.max(1.0) {
                return Ok(QuantileFit { knots, k_up: 1.0 });
            }
            return Err(WorkloadError::invalid(
                "quantile-fit.mean",
                "the upper knots coincide, so the mean cannot be adjusted",
            ));
        }
        if need <= 0.0 || need >= span {
            return Err(WorkloadError::invalid(
                "quantile-fit.mean",
                format!(
                    "mean {mean} is outside the range ({}, {}) reachable by shaping the upper segments",
                    lower + u0,
                    lower + u0 + span
                ),
            ));
        }
        Ok(QuantileFit {
            knots,
            k_up: span / need - 1.0,
        })
    }

    /// The quantile function at `u` in `[0, 1]`.
    pub fn quantile(&self, u: f64) -> f64 {
        let u = u.clamp(0.0, 1.0);
        let seg = QUANTILE_LEVELS[1..]
            .iter()
            .position(|&l| u <= l)
            .unwrap_or(3);
        let (u0, u1) = (QUANTILE_LEVELS[seg], QUANTILE_LEVELS[seg + 1]);
        let (x0, x1) = (self.knots[seg], self.knots[seg + 1]);
        let t = (u - u0) / (u1 - u0);
        let k = if seg >= 2 { self.k_up } else { 1.0 };
        x0 + (x1 - x0) * t.powf(k)
    }

    pub fn sample(&self, rng: &mut Rng) -> f64 {
        self.quantile(rng.next_f64())
    }

    /// Exact mean.
    pub fn mean(&self) -> f64 {
        let w = segment_weights();
        (0..4)
            .map(|i| {
                let k = if i >= 2 { self.k_up } else { 1.0 };
                w[i] * (self.knots[i] + (self.knots[i + 1] - self.knots[i]) / (k + 1.0))
            })
            .sum()
    }

    /// Exact variance. On a segment `x = a + b·t^k` with `t` uniform,
    /// `E[x²] = a² + 2ab/(k + 1) + b²/(2k + 1)`.
    pub fn variance(&self) -> f64 {
        let w = segment_weights();
        let second: f64 = (0..4)
            .map(|i| {
                let k = if i >= 2 { self.k_up } else { 1.0 };
                let (a, b) = (self.knots[i], self.knots[i + 1] - self.knots[i]);
                w[i] * (a * a + 2.0 * a * b / (k + 1.0) + b * b / (2.0 * k + 1.0))
            })
            .sum();
        (second - self.mean().powi(2)).max(0.0)
    }
}

fn segment_weights() -> [f64; 4] {
    let l = QUANTILE_LEVELS;
    [l[1] - l[0], l[2] - l[1], l[3] - l[2], l[4] - l[3]]
}

/// Truncated geometric distribution on the integers `[min, max]`:
/// `P(min + j) ∝ e^{θ·j}` for `j = 0..=max−min`.
///
/// Among all distributions on `[min, max]` with a given mean this is the one
/// of maximum entropy, i.e. the least committal choice when only min, max and
/// mean are known (Table 2.1's payload columns). `θ < 0` puts the mass near
/// `min`, `θ > 0` near `max`, `θ = 0` is uniform.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TruncGeometric {
    pub min: u32,
    pub max: u32,
    /// Log of the ratio between successive probabilities.
    pub theta: f64,
}

impl TruncGeometric {
    /// Solves `θ` by bisection so that the mean is `mean` (strictly inside
    /// `(min, max)` unless `min == max`).
    pub fn with_mean(min: u32, max: u32, mean: f64) -> Result<TruncGeometric, WorkloadError> {
        if max < min {
            return Err(WorkloadError::invalid(
                "size",
                format!("max {max} < min {min}"),
            ));
        }
        if min == max {
            return Ok(TruncGeometric {
                min,
                max,
                theta: 0.0,
            });
        }
        let n = f64::from(max - min);
        let target = mean - f64::from(min);
        if !(target > 0.0 && target < n) {
            return Err(WorkloadError::invalid(
                "size.mean",
                format!("mean {mean} must lie strictly between min {min} and max {max}"),
            ));
        }
        // The mean is increasing in θ; ±60 covers every reachable target to
        // far below a byte.
        let (mut lo, mut hi) = (-60.0f64, 60.0f64);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if geometric_offset_mean(n, mid) < target {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(TruncGeometric {
            min,
            max,
            theta: 0.5 * (lo + hi),
        })
    }

    /// Exact mean.
    pub fn mean(&self) -> f64 {
        f64::from(self.min) + geometric_offset_mean(f64::from(self.max - self.min), self.theta)
    }

    pub fn sample(&self, rng: &mut Rng) -> u32 {
        let n = self.max - self.min;
        if n == 0 {
            return self.min;
        }
        if self.theta.abs() < 1e-12 {
            return self.min + rng.below(u64::from(n) + 1) as u32;
        }
        // Inverse CDF of the decreasing form (θ' = −|θ| < 0): the smallest j
        // with F(j) = (1 − e^{θ'(j+1)})/(1 − e^{θ'(n+1)}) ≥ u; mirrored when
        // θ > 0.
        let th = -self.theta.abs();
        let u = rng.next_f64();
        let j = ((u * (th * (f64::from(n) + 1.0)).exp_m1()).ln_1p() / th).ceil() - 1.0;
        let j = j.clamp(0.0, f64::from(n)) as u32;
        if self.theta > 0.0 {
            self.max - j
        } else {
            self.min + j
        }
    }
}

/// Mean of `j` for `P(j) ∝ e^{θj}`, `j = 0..=n`.
fn geometric_offset_mean(n: f64, theta: f64) -> f64 {
    if theta.abs() < 1e-7 {
        // Series around the uniform case avoids cancellation.
        return n / 2.0 + theta * n * (n + 2.0) / 12.0;
    }
    if theta > 0.0 {
        return n - geometric_offset_mean(n, -theta);
    }
    let r = theta.exp();
    // r/(1−r) − (n+1)·r^{n+1}/(1 − r^{n+1})
    let rn1 = ((n + 1.0) * theta).exp();
    r / (-theta.exp_m1()) - (n + 1.0) * rn1 / (-((n + 1.0) * theta).exp_m1())
}

/// Pareto distribution with minimum `min` truncated at `max`:
/// `P(X > x) ∝ (min/x)^α − (min/max)^α` on `[min, max]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TruncPareto {
    pub min: f64,
    pub max: f64,
    pub alpha: f64,
}

impl TruncPareto {
    /// Exact mean: `L^α/(1 − (L/H)^α) · α/(α − 1) · (L^{1−α} − H^{1−α})`,
    /// and `L·ln(H/L)/(1 − L/H)` at `α = 1`.
    pub fn mean(&self) -> f64 {
        let (l, h, a) = (self.min, self.max, self.alpha);
        let tail = (l / h).powf(a);
        if (a - 1.0).abs() < 1e-9 {
            return l * (h / l).ln() / (1.0 - l / h);
        }
        l.powf(a) / (1.0 - tail) * a / (a - 1.0) * (l.powf(1.0 - a) - h.powf(1.0 - a))
    }

    /// Solves `α` by bisection so the truncated mean is `mean`. The mean falls
    /// from `(H − L)/ln(H/L)` at α → 0 towards `L` as α grows.
    pub fn with_mean(min: f64, max: f64, mean: f64) -> Result<TruncPareto, WorkloadError> {
        if !(min > 0.0 && max > min && min.is_finite() && max.is_finite()) {
            return Err(WorkloadError::invalid(
                "http.transfer-size",
                format!("need 0 < min < max, got min {min}, max {max}"),
            ));
        }
        let at = |alpha: f64| TruncPareto { min, max, alpha }.mean();
        let (mut lo, mut hi) = (1e-3f64, 50.0f64);
        if !(mean < at(lo) && mean > at(hi)) {
            return Err(WorkloadError::invalid(
                "http.mean-bytes",
                format!(
                    "mean {mean} is not reachable by a Pareto truncated to [{min}, {max}] (range {:.0}..{:.0})",
                    at(hi),
                    at(lo)
                ),
            ));
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if at(mid) > mean {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(TruncPareto {
            min,
            max,
            alpha: 0.5 * (lo + hi),
        })
    }

    /// Inverse CDF: `x = L / (1 − u·(1 − (L/H)^α))^{1/α}`.
    pub fn quantile(&self, u: f64) -> f64 {
        let c = 1.0 - (self.min / self.max).powf(self.alpha);
        (self.min / (1.0 - u * c).powf(1.0 / self.alpha)).clamp(self.min, self.max)
    }

    pub fn sample(&self, rng: &mut Rng) -> f64 {
        self.quantile(rng.next_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinstream_base::Seed;

    #[test]
    fn quantile_fit_hits_knots_and_mean() {
        let knots = [1.0, 2.0, 159.0, 3892.0, 12254.0];
        let q = QuantileFit::with_mean(knots, 318.0).unwrap();
        for (u, x) in QUANTILE_LEVELS.iter().zip(knots) {
            assert!((q.quantile(*u) - x).abs() < 1e-9, "u={u}");
        }
        assert!((q.mean() - 318.0).abs() < 1e-9);
        // Sampled mean and variance agree with the closed forms.
        let mut rng = Seed(1).rng();
        let n = 400_000;
        let xs: Vec<f64> = (0..n).map(|_| q.sample(&mut rng)).collect();
        let m = xs.iter().sum::<f64>() / n as f64;
        let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n as f64;
        assert!((m - 318.0).abs() / 318.0 < 0.03, "sampled mean {m}");
        assert!(
            (v.sqrt() / q.variance().sqrt() - 1.0).abs() < 0.1,
            "sd {} vs {}",
            v.sqrt(),
            q.variance().sqrt()
        );
    }

    #[test]
    fn quantile_fit_rejects_unreachable_means() {
        let knots = [0.0, 10.0, 20.0, 30.0, 40.0];
        assert!(QuantileFit::with_mean(knots, 5.0).is_err());
        assert!(QuantileFit::with_mean(knots, 39.0).is_err());
        assert!(QuantileFit::with_mean([3.0, 2.0, 1.0, 4.0, 5.0], 3.0).is_err());
    }

    #[test]
    fn geometric_mean_solve_and_sampling() {
        for (min, max, mean) in [
            (8u32, 1417u32, 111.0),
            (112, 1448, 1446.0),
            (4, 113, 4.25),
            (1, 9, 5.0),
        ] {
            let g = TruncGeometric::with_mean(min, max, mean).unwrap();
            assert!(
                (g.mean() - mean).abs() < 1e-6,
                "{min} {max} {mean}: {}",
                g.mean()
            );
            let mut rng = Seed(2).rng();
            let n = 100_000;
            let mut sum = 0u64;
            for _ in 0..n {
                let s = g.sample(&mut rng);
                assert!((min..=max).contains(&s));
                sum += u64::from(s);
            }
            let m = sum as f64 / n as f64;
            assert!(
                (m - mean).abs() / mean < 0.02,
                "{min} {max} {mean}: sampled {m}"
            );
        }
        assert!(TruncGeometric::with_mean(4, 113, 4.0).is_err());
        assert!(TruncGeometric::with_mean(10, 5, 7.0).is_err());
    }

    #[test]
    fn pareto_alpha_for_http_defaults() {
        let p = TruncPareto::with_mean(1000.0, 64.0 * 1024.0 * 1024.0, 9200.0).unwrap();
        assert!((p.mean() - 9200.0).abs() < 1e-6);
        assert!((p.alpha - 1.0434).abs() < 1e-3, "alpha {}", p.alpha);
        assert_eq!(p.quantile(0.0), 1000.0);
        assert!((p.quantile(1.0) - 64.0 * 1024.0 * 1024.0).abs() < 1e-3);
        assert!(TruncPareto::with_mean(1000.0, 2000.0, 9200.0).is_err());
    }
}
