//! Propagation delay, jitter and deliberate reordering: the part of the path
//! after the bottleneck.

use crate::config::{Jitter, JitterDistribution, Reorder};
use thinstream_base::{Duration, Instant, Rng};

/// How a copy went through the delay line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passage {
    /// Delayed normally (delay plus jitter, clamped unless jitter may reorder).
    Normal,
    /// Chosen for reordering and sent without the propagation delay.
    Immediate,
    /// Chosen for reordering and held back beyond its normal arrival.
    HeldBack,
}

/// Delay, jitter and reordering for one direction. Jitter and reordering,
/// with their random streams, live behind a pointer each: a line without
/// them (most links) is 40 bytes, which a packet reads in one cache line.
#[derive(Clone, Debug)]
pub struct DelayLine {
    delay: Duration,
    /// Packets delayed normally since the last reordered one (netem's
    /// `counter`, compared against `gap - 1`).
    since_reorder: u64,
    /// Latest arrival of a normally delayed copy: the clamp that keeps
    /// jitter from reordering.
    last_in_order: Instant,
    jitter: Option<Box<(Jitter, Rng)>>,
    reorder: Option<Box<(Reorder, Rng)>>,
}

impl DelayLine {
    pub fn new(
        delay: Duration,
        jitter: Option<Jitter>,
        jitter_rng: Rng,
        reorder: Option<Reorder>,
        reorder_rng: Rng,
    ) -> Self {
        DelayLine {
            delay,
            jitter: jitter.map(|j| Box::new((j, jitter_rng))),
            reorder: reorder.map(|r| Box::new((r, reorder_rng))),
            since_reorder: 0,
            last_in_order: Instant::ZERO,
        }
    }

    /// Delay plus one jitter draw, floored at zero.
    fn propagation(&mut self) -> Duration {
        let Some((j, rng)) = self.jitter.as_deref_mut() else {
            return self.delay;
        };
        let spread = j.spread.as_nanos() as f64;
        let offset = match j.distribution {
            JitterDistribution::Uniform => (2.0 * rng.next_f64() - 1.0) * spread,
            JitterDistribution::Normal => rng.normal() * spread,
        };
        let total = self.delay.as_nanos() as f64 + offset;
        Duration::from_nanos(if total <= 0.0 {
            0
        } else {
            total.round() as u64
        })
    }

    /// Arrival time of a copy that left the bottleneck at `departure`
    /// (non-decreasing across calls).
    ///
    /// One jitter draw per copy, always (also for reordered ones), so the
    /// jitter stream does not depend on the reordering settings. The
    /// reordering rule follows netem: a copy is a candidate once `gap - 1`
    /// copies have been delayed normally since the last reordered one, and a
    /// candidate is reordered with the configured probability.
    pub fn arrival(&mut self, departure: Instant) -> (Instant, Passage) {
        let mut normal = departure.saturating_add(self.propagation());
        let allow_jitter_reordering = self.jitter.as_ref().is_some_and(|j| j.0.allow_reordering);
        if !allow_jitter_reordering {
            // A packet never arrives before one sent earlier (unless
            // reordering is asked for): clamp to the previous arrival.
            normal = normal.max(self.last_in_order);
        }
        let reordered = match self.reorder.as_deref_mut() {
            Some((r, rng)) => {
                let candidate = self.since_reorder + 1 >= u64::from(r.gap);
                candidate && rng.chance(r.probability.get())
            }
            None => false,
        };
        if !reordered {
            self.since_reorder += 1;
            self.last_in_order = self.last_in_order.max(normal);
            return (normal, Passage::Normal);
        }
        self.since_reorder = 0;
        match self.reorder.as_ref().and_then(|r| r.0.hold) {
            // Held back: later copies overtake it, so it does not move the clamp.
            Some(hold) => (normal.saturating_add(hold), Passage::HeldBack),
            None => (departure, Passage::Immediate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinstream_base::{Probability, Seed};

    fn line(jitter: Option<Jitter>, reorder: Option<Reorder>) -> DelayLine {
        DelayLine::new(
            Duration::from_millis(50),
            jitter,
            Seed(1).rng(),
            reorder,
            Seed(2).rng(),
        )
    }

    // Uniform jitter stays within delay ± spread (before clamping) and, by
    // default, never reorders.
    #[test]
    fn uniform_jitter_is_bounded_and_in_order() {
        let j = Jitter {
            spread: Duration::from_millis(20),
            distribution: JitterDistribution::Uniform,
            allow_reordering: true,
        };
        let mut free = line(Some(j.clone()), None);
        let mut clamped = line(
            Some(Jitter {
                allow_reordering: false,
                ..j
            }),
            None,
        );
        let (mut prev, mut inversions) = (Instant::ZERO, 0);
        for i in 0..10_000u64 {
            let dep = Instant::from_millis(i);
            let (a, _) = free.arrival(dep);
            let d = a - dep;
            assert!(
                d >= Duration::from_millis(30) && d <= Duration::from_millis(70),
                "{d}"
            );
            if a < prev {
                inversions += 1;
            }
            prev = prev.max(a);
            let (c, _) = clamped.arrival(dep);
            assert!(c >= a, "clamping only delays");
        }
        assert!(
            inversions > 1000,
            "free jitter should reorder: {inversions}"
        );
    }

    // netem gap semantics: with gap 3, at least 2 normal copies separate two
    // reordered ones; immediate copies arrive at their departure.
    #[test]
    fn reorder_gap_and_immediate_sending() {
        let r = Reorder {
            probability: Probability::new(0.5).unwrap(),
            gap: 3,
            hold: None,
        };
        let mut l = line(None, Some(r));
        let mut normal_run = 0;
        let mut reordered = 0;
        for i in 0..10_000u64 {
            let dep = Instant::from_millis(i);
            let (a, how) = l.arrival(dep);
            match how {
                Passage::Normal => {
                    assert_eq!(a, dep + Duration::from_millis(50));
                    normal_run += 1;
                }
                Passage::Immediate => {
                    assert_eq!(a, dep);
                    assert!(normal_run >= 2, "gap violated");
                    normal_run = 0;
                    reordered += 1;
                }
                Passage::HeldBack => panic!("no hold configured"),
            }
        }
        // Candidates every 2 normal packets, chosen with 1/2: about 1 in 4.
        assert!((2000..3000).contains(&reordered), "{reordered}");
    }

    // Hold-back: the chosen copy arrives `hold` after its normal time and
    // does not delay the copies behind it.
    #[test]
    fn hold_back_lets_later_packets_overtake() {
        let r = Reorder {
            probability: Probability::ONE,
            gap: 2,
            hold: Some(Duration::from_millis(5)),
        };
        let mut l = line(None, Some(r));
        assert_eq!(
            l.arrival(Instant::ZERO),
            (Instant::from_millis(50), Passage::Normal)
        );
        assert_eq!(
            l.arrival(Instant::from_millis(1)),
            (Instant::from_millis(56), Passage::HeldBack)
        );
        assert_eq!(
            l.arrival(Instant::from_millis(2)),
            (Instant::from_millis(52), Passage::Normal)
        );
    }
}
