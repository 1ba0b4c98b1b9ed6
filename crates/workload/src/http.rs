//! HTTP-like cross traffic (000 §6.2; 002 §5.1.3, §5.2.2).
//!
//! A population of web clients (81 in the documents: "the number of different
//! delays that one netem instance can assign") each start transfers
//! ("streams") continuously across the bottleneck:
//!
//! * **Transfer size**: Pareto with minimum 1000 bytes, mean ≈ 9200 bytes,
//!   maximum ≈ 64 MB (002 §5.1.3 footnote 4). The shape α is not stated. For
//!   an untruncated Pareto, mean = α·L/(α − 1) gives α = 9200/8200 ≈ 1.122,
//!   but truncation at H removes mean, so we solve α for the *truncated* law
//!   (see [`TruncPareto::with_mean`]): with L = 1000 B and H = 64 MiB =
//!   67 108 864 B, α ≈ 1.0434 makes the truncated mean exactly 9200 B. The
//!   sizes are heavy-tailed: the median is ≈ 1.94 kB and a sample mean
//!   converges slowly (standard deviation ≈ 212 kB per transfer).
//! * **Request gaps**: exponential per client, mean 655 ms (000 §6.2; 002 uses
//!   "a preset mean value" tuned for high or low loss, so it is configurable).
//!   Clients are open-loop: a client's next request does not wait for its
//!   previous transfer to finish (the documents do not say; "started new
//!   streams continuously" suggests independence). Each client's first
//!   request comes one exponential gap after `start`, so the population does
//!   not start in lock-step.
//! * **RTTs**: "between 5 and 405 ms, equally distributed over 81
//!   connections" (002 §5.2.2): client *i* has RTT `5 + 5·i` ms. The
//!   generator only exposes them ([`HttpCrossTraffic::clients`]); applying
//!   them is the simulator's job.
//!
//! A [`Flow`] stands for one web transfer as made by 002's
//! `http-client`/`http-server` pair (002 App. B): client *c* asks the server
//! for a file and the server sends `bytes` bytes back over its own TCP
//! connection, so the bulk of the bytes crosses the bottleneck from the
//! server side. How the request is sized and whether a connection is reused
//! is the simulator's choice; the documents do not say.
//!
//! The output is a time-ordered sequence of [`Flow`]s (ties broken by client
//! index). Each client draws from its own [`Rng`] derived from the seed with
//! the label `"client{i}"`, so changing the number of clients does not change
//! the flows of the others.

use thinstream_base::{Duration, Instant, Rng, Seed};

use crate::dist::TruncPareto;
use crate::WorkloadError;

/// Documented defaults (000 §6.2; 002 §5.1.3, §5.2.2).
pub mod defaults {
    use thinstream_base::Duration;
    pub const CLIENTS: u16 = 81;
    pub const MEAN_REQUEST_GAP: Duration = Duration::from_millis(655);
    pub const MIN_BYTES: u64 = 1000;
    pub const MEAN_BYTES: u64 = 9200;
    /// "approximately 64 MB", taken as 64 MiB.
    pub const MAX_BYTES: u64 = 64 * 1024 * 1024;
    pub const RTT_MIN: Duration = Duration::from_millis(5);
    pub const RTT_MAX: Duration = Duration::from_millis(405);
}

/// One transfer: client `client` starts fetching `bytes` at `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    pub start: Instant,
    pub client: u16,
    pub bytes: u64,
}

/// A client of the population and the RTT its path should have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpClient {
    pub index: u16,
    pub rtt: Duration,
}

/// Parameters of the cross-traffic population.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpParams {
    pub clients: u16,
    pub mean_request_gap: Duration,
    pub min_bytes: u64,
    pub mean_bytes: u64,
    pub max_bytes: u64,
    pub rtt_min: Duration,
    pub rtt_max: Duration,
}

impl Default for HttpParams {
    fn default() -> Self {
        HttpParams {
            clients: defaults::CLIENTS,
            mean_request_gap: defaults::MEAN_REQUEST_GAP,
            min_bytes: defaults::MIN_BYTES,
            mean_bytes: defaults::MEAN_BYTES,
            max_bytes: defaults::MAX_BYTES,
            rtt_min: defaults::RTT_MIN,
            rtt_max: defaults::RTT_MAX,
        }
    }
}

#[derive(Debug)]
struct ClientState {
    next: Instant,
    rng: Rng,
}

/// The cross-traffic generator.
#[derive(Debug)]
pub struct HttpCrossTraffic {
    clients: Vec<HttpClient>,
    state: Vec<ClientState>,
    sizes: TruncPareto,
    mean_gap: Duration,
    remaining: Option<u64>,
    until: Option<Instant>,
}

impl HttpCrossTraffic {
    /// `count` bounds the number of flows, `duration` their start times
    /// (flows starting at or after `start + duration` are not produced).
    pub fn new(
        params: &HttpParams,
        start: Instant,
        seed: Seed,
        count: Option<u64>,
        duration: Option<Duration>,
    ) -> Result<HttpCrossTraffic, WorkloadError> {
        if params.clients == 0 {
            return Err(WorkloadError::invalid(
                "http.clients",
                "need at least one client",
            ));
        }
        if params.mean_request_gap.is_zero() {
            return Err(WorkloadError::invalid(
                "http.mean-request-gap",
                "must be positive",
            ));
        }
        if params.rtt_max < params.rtt_min {
            return Err(WorkloadError::invalid(
                "http.rtt-max",
                "must not be below rtt-min",
            ));
        }
        let sizes = TruncPareto::with_mean(
            params.min_bytes as f64,
            params.max_bytes as f64,
            params.mean_bytes as f64,
        )?;
        let n = u64::from(params.clients);
        let spread = params.rtt_max - params.rtt_min;
        let clients: Vec<HttpClient> = (0..params.clients)
            .map(|i| HttpClient {
                index: i,
                rtt: params.rtt_min
                    + if n > 1 {
                        // Equal steps from rtt_min to rtt_max inclusive.
                        Duration::from_nanos(
                            (u128::from(spread.as_nanos()) * u128::from(i) / u128::from(n - 1))
                                as u64,
                        )
                    } else {
                        Duration::ZERO
                    },
            })
            .collect();
        let state = clients
            .iter()
            .map(|c| {
                let mut rng = seed.derive(&format!("client{}", c.index)).rng();
                let first = exp_gap(&mut rng, params.mean_request_gap);
                ClientState {
                    next: start.saturating_add(first),
                    rng,
                }
            })
            .collect();
        Ok(HttpCrossTraffic {
            clients,
            state,
            sizes,
            mean_gap: params.mean_request_gap,
            remaining: count,
            until: duration.map(|d| start.saturating_add(d)),
        })
    }

    /// The clients and their RTTs, in index order.
    pub fn clients(&self) -> &[HttpClient] {
        &self.clients
    }

    /// The transfer-size law (its `alpha` is the derived shape).
    pub fn sizes(&self) -> TruncPareto {
        self.sizes
    }

    /// The next flow in start-time order (`None` once a limit is reached).
    pub fn next_flow(&mut self) -> Option<Flow> {
        if self.remaining == Some(0) {
            return None;
        }
        // Earliest next request; the first index wins ties. 81 clients make a
        // linear scan cheaper than a heap and trivially deterministic.
        let (idx, st) = self
            .state
            .iter_mut()
            .enumerate()
            .min_by_key(|(i, s)| (s.next, *i))?;
        let at = st.next;
        if at == Instant::MAX || self.until.is_some_and(|u| at >= u) {
            self.remaining = Some(0);
            return None;
        }
        let bytes = (self.sizes.sample(&mut st.rng).round() as u64).max(1);
        st.next = at.saturating_add(exp_gap(&mut st.rng, self.mean_gap));
        if let Some(r) = self.remaining.as_mut() {
            *r -= 1;
        }
        Some(Flow {
            start: at,
            client: idx as u16,
            bytes,
        })
    }
}

impl Iterator for HttpCrossTraffic {
    type Item = Flow;
    fn next(&mut self) -> Option<Flow> {
        self.next_flow()
    }
}

fn exp_gap(rng: &mut Rng, mean: Duration) -> Duration {
    Duration::from_secs_f64(rng.exponential(mean.as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_gen(seed: u64) -> HttpCrossTraffic {
        HttpCrossTraffic::new(
            &HttpParams::default(),
            Instant::ZERO,
            Seed(seed),
            None,
            None,
        )
        .unwrap()
    }

    #[test]
    fn clients_and_rtts() {
        let g = default_gen(1);
        let c = g.clients();
        assert_eq!(c.len(), 81);
        assert_eq!(c[0].rtt, Duration::from_millis(5));
        assert_eq!(c[1].rtt, Duration::from_millis(10));
        assert_eq!(c[80].rtt, Duration::from_millis(405));
        assert!((g.sizes().alpha - 1.0434).abs() < 1e-3);
    }

    /// Truncated Pareto sizes: min 1000, max 64 MiB, mean ≈ 9200 within 10 %
    /// over 10^6 transfers (the sd of that sample mean is ≈ 2.3 %).
    #[test]
    fn transfer_sizes_have_the_documented_mean() {
        let g = default_gen(2);
        let flows: Vec<Flow> = g.take(1_000_000).collect();
        let mut sum = 0u128;
        for f in &flows {
            assert!((1000..=64 * 1024 * 1024).contains(&f.bytes));
            sum += u128::from(f.bytes);
        }
        let mean = sum as f64 / flows.len() as f64;
        assert!((mean - 9200.0).abs() / 9200.0 < 0.10, "mean {mean}");
        let mut sizes: Vec<u64> = flows.iter().map(|f| f.bytes).collect();
        sizes.sort_unstable();
        // Median of the fitted law: L·(1 − 0.5·(1 − (L/H)^α))^(−1/α) ≈ 1943 B.
        let median = sizes[sizes.len() / 2] as f64;
        let expected = g_median();
        assert!(
            (median - expected).abs() / expected < 0.02,
            "median {median} vs {expected}"
        );
    }

    fn g_median() -> f64 {
        default_gen(0).sizes().quantile(0.5)
    }

    /// Flows are time-ordered; per client the gaps average 655 ms; the whole
    /// population makes 81/0.655 ≈ 123.7 flows per second.
    #[test]
    fn request_gaps_and_order() {
        let g = HttpCrossTraffic::new(
            &HttpParams::default(),
            Instant::from_secs(1),
            Seed(3),
            None,
            Some(Duration::from_secs(600)),
        )
        .unwrap();
        let flows: Vec<Flow> = g.collect();
        assert!(flows.windows(2).all(|w| w[0].start <= w[1].start));
        assert!(flows
            .iter()
            .all(|f| f.start >= Instant::from_secs(1) && f.start < Instant::from_secs(601)));
        let rate = flows.len() as f64 / 600.0;
        assert!(
            (rate - 81.0 / 0.655).abs() / (81.0 / 0.655) < 0.02,
            "rate {rate}"
        );
        let c7: Vec<Instant> = flows
            .iter()
            .filter(|f| f.client == 7)
            .map(|f| f.start)
            .collect();
        let gaps: Vec<f64> = c7
            .windows(2)
            .map(|w| (w[1] - w[0]).as_millis_f64())
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!(
            (mean - 655.0).abs() / 655.0 < 0.1,
            "client 7 mean gap {mean}"
        );
    }

    #[test]
    fn deterministic_and_seed_dependent() {
        let a: Vec<Flow> = default_gen(5).take(1000).collect();
        let b: Vec<Flow> = default_gen(5).take(1000).collect();
        let c: Vec<Flow> = default_gen(6).take(1000).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut limited = HttpCrossTraffic::new(
            &HttpParams::default(),
            Instant::ZERO,
            Seed(5),
            Some(10),
            None,
        )
        .unwrap();
        assert_eq!(std::iter::from_fn(|| limited.next_flow()).count(), 10);
    }

    #[test]
    fn rejects_bad_parameters() {
        let bad = |f: fn(&mut HttpParams)| {
            let mut p = HttpParams::default();
            f(&mut p);
            HttpCrossTraffic::new(&p, Instant::ZERO, Seed(0), None, None).is_err()
        };
        assert!(bad(|p| p.clients = 0));
        assert!(bad(|p| p.mean_request_gap = Duration::ZERO));
        assert!(bad(|p| p.mean_bytes = 500));
        assert!(bad(|p| p.max_bytes = 900));
        assert!(bad(|p| p.rtt_max = Duration::from_millis(1)));
    }
}
