//! Application timer jitter: the application's timer does not fire at the
//! exact instant its schedule says, but a little later (the timer's
//! granularity, scheduling latency). 002 §5.4.2 notes it for its own
//! senders: the application meant to send 10 packets per second sent
//! "marginally less on average due to the timing granularity in user
//! space". A simulated application without it is perfectly periodic, which
//! can phase-lock with the protocol's timers (an IAT equal to the RTT and
//! to the receiver's delayed-SACK and RTO times makes a SACK and a T3
//! expiry fall on the same instant every time) in a way no real sender
//! shows.
//!
//! Model: message *i* of the wrapped generator, due at `t_i`, is handed
//! over at `t_i + u_i` with `u_i` uniform on `[0, jitter)`, drawn from its
//! own seeded [`Rng`]; the schedule itself stays on the nominal grid (an
//! absolute-time timer), so the mean rate is unchanged and lateness does
//! not accumulate. Order is kept: a message is never handed over before the
//! previous one (`max` with the previous time). Deterministic given the
//! seed; a zero jitter returns the wrapped generator's messages unchanged.

use thinstream_base::{Duration, Instant, Rng};

use crate::{Generator, Message};

/// Delays every message of `inner` by a uniform draw in `[0, jitter)`.
#[derive(Debug)]
pub struct TimerJitter<G> {
    inner: G,
    jitter: Duration,
    rng: Rng,
    last: Instant,
}

impl<G: Generator> TimerJitter<G> {
    pub fn new(inner: G, jitter: Duration, rng: Rng) -> Self {
        TimerJitter {
            inner,
            jitter,
            rng,
            last: Instant::ZERO,
        }
    }
}

impl<G: Generator> Generator for TimerJitter<G> {
    fn next_message(&mut self) -> Option<Message> {
        let mut m = self.inner.next_message()?;
        if !self.jitter.is_zero() {
            let late = Duration::from_nanos(self.rng.below(self.jitter.as_nanos()));
            m.at =
                m.at.checked_add(late)
                    .unwrap_or(Instant::MAX)
                    .max(self.last);
        }
        self.last = m.at;
        Some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkloadConfig;
    use thinstream_base::Seed;

    fn constant(count: u64) -> Box<dyn Generator + Send> {
        WorkloadConfig::Constant {
            iat: Duration::from_millis(100),
            bytes: 100,
            streams: 1,
            unordered: false,
            count: Some(count),
            duration: None,
        }
        .build(Instant::ZERO, Seed(1))
        .unwrap()
    }

    fn times(g: impl Generator) -> Vec<u64> {
        g.into_messages().map(|m| m.at.as_nanos()).collect()
    }

    #[test]
    fn lateness_is_within_the_jitter_and_the_grid_is_kept() {
        let j = Duration::from_millis(4);
        let at = times(TimerJitter::new(constant(2000), j, Seed(7).rng()));
        assert_eq!(at.len(), 2000);
        let mut lateness = Vec::new();
        for (i, t) in at.iter().enumerate() {
            let nominal = i as u64 * 100_000_000;
            assert!(
                *t >= nominal && *t < nominal + j.as_nanos(),
                "message {i} at {t}"
            );
            lateness.push(t - nominal);
        }
        // Uniform on [0, 4 ms): mean near 2 ms, both halves used.
        let mean = lateness.iter().sum::<u64>() as f64 / lateness.len() as f64 / 1e6;
        assert!((mean - 2.0).abs() < 0.15, "mean lateness {mean} ms");
        assert!(lateness.iter().any(|l| *l < 1_000_000));
        assert!(lateness.iter().any(|l| *l > 3_000_000));
        // The mean interval stays the nominal 100 ms (no drift).
        let span = (at[at.len() - 1] - at[0]) as f64 / (at.len() - 1) as f64 / 1e6;
        assert!((span - 100.0).abs() < 0.01, "mean interval {span} ms");
    }

    #[test]
    fn deterministic_ordered_and_zero_is_identity() {
        let j = Duration::from_millis(150); // more than the IAT: order must hold
        let a = times(TimerJitter::new(constant(500), j, Seed(3).rng()));
        let b = times(TimerJitter::new(constant(500), j, Seed(3).rng()));
        let c = times(TimerJitter::new(constant(500), j, Seed(4).rng()));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        let plain = times(constant(500));
        let zero = times(TimerJitter::new(
            constant(500),
            Duration::ZERO,
            Seed(3).rng(),
        ));
        assert_eq!(plain, zero);
    }
}
