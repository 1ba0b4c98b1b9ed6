//! Random loss processes: Bernoulli and Gilbert-Elliott.

use crate::config::LossModel;
use thinstream_base::Rng;

/// State of the Gilbert-Elliott chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelState {
    Good,
    Bad,
}

/// A loss process: one decision per offered packet.
#[derive(Clone, Debug)]
pub struct LossProcess {
    model: LossModel,
    state: ChannelState,
    rng: Rng,
}

impl LossProcess {
    /// The chain starts in Good (netem does the same).
    pub fn new(model: LossModel, rng: Rng) -> Self {
        LossProcess {
            model,
            state: ChannelState::Good,
            rng,
        }
    }

    pub fn state(&self) -> ChannelState {
        self.state
    }

    /// Decides the fate of the next packet: `true` = lost.
    ///
    /// Gilbert-Elliott as netem's `loss gemodel`: the state the packet finds
    /// decides its loss probability (Good: `loss_in_good` = 1-k, Bad:
    /// `loss_in_bad` = 1-h); then the chain moves (Good→Bad with p, Bad→Good
    /// with r). Two draws per packet, always, so the stream position depends
    /// only on the packet count.
    pub fn next_lost(&mut self) -> bool {
        match &self.model {
            LossModel::Bernoulli { p } => self.rng.chance(p.get()),
            LossModel::GilbertElliott {
                p,
                r,
                loss_in_bad,
                loss_in_good,
            } => {
                let (loss, leave) = match self.state {
                    ChannelState::Good => (loss_in_good.get(), p.get()),
                    ChannelState::Bad => (loss_in_bad.get(), r.get()),
                };
                let lost = self.rng.chance(loss);
                if self.rng.chance(leave) {
                    self.state = match self.state {
                        ChannelState::Good => ChannelState::Bad,
                        ChannelState::Bad => ChannelState::Good,
                    };
                }
                lost
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinstream_base::{Probability, Seed};

    fn prob(p: f64) -> Probability {
        Probability::new(p).unwrap()
    }

    const N: usize = 1_000_000;

    // Bernoulli 5 %: the count of losses in 10^6 packets lies within 4 sigma
    // of the binomial mean.
    #[test]
    fn bernoulli_rate_within_four_sigma() {
        let p = 0.05;
        let mut l = LossProcess::new(LossModel::Bernoulli { p: prob(p) }, Seed(11).rng());
        let lost = (0..N).filter(|_| l.next_lost()).count() as f64;
        let mean = N as f64 * p;
        let sigma = (N as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (lost - mean).abs() < 4.0 * sigma,
            "lost {lost}, expected {mean} ± {}",
            4.0 * sigma
        );
    }

    /// Variance of the sample mean of the loss indicator of a stationary
    /// two-state chain: Bernoulli part plus the lag covariances
    /// π_G·π_B·(e_B − e_G)²·λ^k summed over both sides, λ = 1 − p − r.
    fn ge_sample_mean_sd(p: f64, r: f64, e_bad: f64, e_good: f64, n: usize) -> f64 {
        let pb = p / (p + r);
        let m = pb * e_bad + (1.0 - pb) * e_good;
        let lambda = 1.0 - p - r;
        let cov0 = pb * (1.0 - pb) * (e_bad - e_good).powi(2);
        let var = m * (1.0 - m) + 2.0 * cov0 * lambda / (1.0 - lambda);
        (var / n as f64).sqrt()
    }

    // Full four-parameter Gilbert-Elliott: the mean loss matches the
    // stationary value P(G)(1-k) + P(B)(1-h) within 4 sigma (chain-corrected).
    #[test]
    fn gilbert_elliott_mean_loss_matches_stationary_value() {
        let (p, r, e_bad, e_good) = (0.02, 0.25, 0.6, 0.005);
        let model = LossModel::GilbertElliott {
            p: prob(p),
            r: prob(r),
            loss_in_bad: prob(e_bad),
            loss_in_good: prob(e_good),
        };
        let expected = model.mean_loss();
        let pb = p / (p + r);
        assert!((expected - (pb * e_bad + (1.0 - pb) * e_good)).abs() < 1e-15);
        let mut l = LossProcess::new(model, Seed(12).rng());
        let rate = (0..N).filter(|_| l.next_lost()).count() as f64 / N as f64;
        let sd = ge_sample_mean_sd(p, r, e_bad, e_good, N);
        assert!(
            (rate - expected).abs() < 4.0 * sd,
            "rate {rate}, expected {expected} ± {}",
            4.0 * sd
        );
    }

    // Simple Gilbert (1-h = 1, 1-k = 0): mean loss p/(p+r) and mean burst
    // (run of consecutive losses) 1/r, the latter within 4 sigma of the
    // geometric run-length distribution.
    #[test]
    fn simple_gilbert_mean_loss_and_burst_length() {
        let (p, r) = (0.01, 0.3);
        let model = LossModel::GilbertElliott {
            p: prob(p),
            r: prob(r),
            loss_in_bad: Probability::ONE,
            loss_in_good: Probability::ZERO,
        };
        let mut l = LossProcess::new(model.clone(), Seed(13).rng());
        let (mut lost, mut bursts, mut run) = (0u64, 0u64, 0u64);
        for _ in 0..N {
            if l.next_lost() {
                lost += 1;
                run += 1;
            } else if run > 0 {
                bursts += 1;
                run = 0;
            }
        }
        let rate = lost as f64 / N as f64;
        let sd = ge_sample_mean_sd(p, r, 1.0, 0.0, N);
        assert!((rate - model.mean_loss()).abs() < 4.0 * sd, "rate {rate}");
        // Bursts counted only once they end; the loss count of a trailing
        // unfinished burst is excluded.
        let mean_burst = (lost - run) as f64 / bursts as f64;
        let expected = 1.0 / r;
        let burst_sd = ((1.0 - r) / (r * r)).sqrt() / (bursts as f64).sqrt();
        assert!(
            (mean_burst - expected).abs() < 4.0 * burst_sd,
            "mean burst {mean_burst}, expected {expected} ± {}",
            4.0 * burst_sd
        );
    }

    // Full Gilbert-Elliott: mean loss-burst length against the closed form
    // m / P(loss at n, no loss at n+1), where that pair probability is
    // sum over s, s' of pi_s e_s T(s, s') (1 - e_s'). The bound is 4 sigma of
    // the batch-means estimate (100 batches of 10^4 packets).
    #[test]
    fn gilbert_elliott_mean_burst_matches_closed_form() {
        let (p, r, e_bad, e_good) = (0.03, 0.2, 0.8, 0.01);
        let model = LossModel::GilbertElliott {
            p: prob(p),
            r: prob(r),
            loss_in_bad: prob(e_bad),
            loss_in_good: prob(e_good),
        };
        let pb = p / (p + r);
        let pi = [1.0 - pb, pb];
        let e = [e_good, e_bad];
        let t = [[1.0 - p, p], [r, 1.0 - r]];
        let mut end_of_burst = 0.0;
        for s in 0..2 {
            for s2 in 0..2 {
                end_of_burst += pi[s] * e[s] * t[s][s2] * (1.0 - e[s2]);
            }
        }
        let mean_loss = model.mean_loss();
        let expected = mean_loss / end_of_burst;

        let mut l = LossProcess::new(model, Seed(15).rng());
        let (batches, per_batch) = (100, 10_000);
        let mut batch_means = Vec::new();
        let (mut total_lost, mut total_ends, mut prev) = (0u64, 0u64, false);
        for _ in 0..batches {
            let (mut lost, mut ends) = (0u64, 0u64);
            for _ in 0..per_batch {
                let now = l.next_lost();
                lost += u64::from(now);
                ends += u64::from(prev && !now);
                prev = now;
            }
            batch_means.push(lost as f64 / ends as f64);
            total_lost += lost;
            total_ends += ends;
        }
        let estimate = total_lost as f64 / total_ends as f64;
        let mean = batch_means.iter().sum::<f64>() / batches as f64;
        let var =
            batch_means.iter().map(|b| (b - mean).powi(2)).sum::<f64>() / (batches - 1) as f64;
        let sd = (var / batches as f64).sqrt();
        assert!(
            (estimate - expected).abs() < 4.0 * sd,
            "mean burst {estimate}, expected {expected} ± {}",
            4.0 * sd
        );
        // The model is genuinely bursty: bursts are longer than Bernoulli
        // loss at the same rate would give (1 / (1 - m)).
        assert!(expected > 1.5 / (1.0 - mean_loss), "{expected}");
    }

    // gemodel with only p (r = 1 - p, 1-h = 1, 1-k = 0, the tc-netem(8)
    // defaults) is Bernoulli: the chance of a loss after a loss equals p.
    #[test]
    fn gemodel_with_only_p_is_bernoulli() {
        let p = 0.1;
        let model = LossModel::GilbertElliott {
            p: prob(p),
            r: prob(1.0 - p),
            loss_in_bad: Probability::ONE,
            loss_in_good: Probability::ZERO,
        };
        let mut l = LossProcess::new(model, Seed(14).rng());
        let (mut after_loss, mut loss_after_loss, mut prev) = (0u64, 0u64, false);
        for _ in 0..200_000 {
            let now = l.next_lost();
            if prev {
                after_loss += 1;
                loss_after_loss += u64::from(now);
            }
            prev = now;
        }
        let cond = loss_after_loss as f64 / after_loss as f64;
        let sd = (p * (1.0 - p) / after_loss as f64).sqrt();
        assert!((cond - p).abs() < 4.0 * sd, "P(loss | loss) = {cond}");
    }
}
