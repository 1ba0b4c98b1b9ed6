//! Deterministic drops, decided by packet number (from 1, in offer order) or
//! by time: listed packets, periodic drops, loss traces, outages.
//!
//! These are the tools for "drop exactly this packet" experiments (003
//! precomputed per-packet loss patterns; 002 §5.1.2 losses at regular
//! intervals).

use crate::config::{LossTrace, Outage, PeriodicDrop};
use thinstream_base::{Instant, Rng};

/// Drops the packets whose numbers are listed.
#[derive(Clone, Debug, Default)]
pub struct ListedDrops {
    sorted: Vec<u64>,
}

impl ListedDrops {
    pub fn new(list: &[u64]) -> Self {
        let mut sorted = list.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        ListedDrops { sorted }
    }

    pub fn drops(&self, packet_number: u64) -> bool {
        self.sorted.binary_search(&packet_number).is_ok()
    }

    /// No packet is listed.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }
}

/// Drops at regular intervals; see [`PeriodicDrop`] for the forms.
#[derive(Clone, Debug)]
pub struct PeriodicDrops {
    every: u64,
    kind: Kind,
    rng: Rng,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Drop `first`, `first + every`, ... (also RandomPhase once drawn).
    Phase { first: u64 },
    /// One drop per block at `position` (0-based) of the current block.
    PerBlock { position: u64 },
}

impl PeriodicDrops {
    /// `every` must be at least 1 (checked by [`crate::LinkConfig::validate`]);
    /// a zero is treated as 1 rather than dividing by zero.
    pub fn new(form: &PeriodicDrop, mut rng: Rng) -> Self {
        let every = form.every().max(1);
        let kind = match *form {
            PeriodicDrop::Fixed { first, .. } => Kind::Phase { first },
            PeriodicDrop::RandomPhase { .. } => Kind::Phase {
                first: 1 + rng.below(every),
            },
            // Drawn when each block starts (packet 1 starts block 0).
            PeriodicDrop::OnePerBlock { .. } => Kind::PerBlock { position: 0 },
        };
        PeriodicDrops { every, kind, rng }
    }

    /// Must be called for every packet number in order (1, 2, 3, ...).
    pub fn drops(&mut self, packet_number: u64) -> bool {
        match &mut self.kind {
            Kind::Phase { first } => {
                packet_number >= *first && (packet_number - *first).is_multiple_of(self.every)
            }
            Kind::PerBlock { position } => {
                let offset = (packet_number.saturating_sub(1)) % self.every;
                if offset == 0 {
                    *position = self.rng.below(self.every);
                }
                offset == *position
            }
        }
    }
}

/// Trace-driven loss: one bit per packet.
#[derive(Clone, Debug)]
pub struct TraceDrops {
    pattern: Vec<bool>,
    repeat: bool,
}

impl TraceDrops {
    pub fn new(trace: &LossTrace) -> Self {
        TraceDrops {
            pattern: trace.pattern.bytes().map(|b| b == b'1').collect(),
            repeat: trace.repeat,
        }
    }

    pub fn drops(&self, packet_number: u64) -> bool {
        if self.pattern.is_empty() || packet_number == 0 {
            return false;
        }
        let i = packet_number - 1;
        let len = self.pattern.len() as u64;
        if i < len {
            self.pattern[i as usize]
        } else if self.repeat {
            self.pattern[(i % len) as usize]
        } else {
            false
        }
    }
}

/// Whether `now` falls in any outage window.
pub fn in_outage(outages: &[Outage], now: Instant) -> bool {
    outages.iter().any(|o| o.contains(now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinstream_base::{Duration, Seed};

    // Listed drops hit exactly the listed numbers, whatever their order.
    #[test]
    fn listed_drops_are_exact() {
        let l = ListedDrops::new(&[12, 3, 7, 3]);
        let dropped: Vec<u64> = (1..=20).filter(|k| l.drops(*k)).collect();
        assert_eq!(dropped, vec![3, 7, 12]);
    }

    // Fixed: every 5th packet from packet 5; with first = 2: 2, 7, 12, ...
    #[test]
    fn fixed_periodic_drops_are_exact() {
        let mut p = PeriodicDrops::new(&PeriodicDrop::Fixed { every: 5, first: 5 }, Seed(1).rng());
        let dropped: Vec<u64> = (1..=20).filter(|k| p.drops(*k)).collect();
        assert_eq!(dropped, vec![5, 10, 15, 20]);
        let mut p = PeriodicDrops::new(&PeriodicDrop::Fixed { every: 5, first: 2 }, Seed(1).rng());
        let dropped: Vec<u64> = (1..=20).filter(|k| p.drops(*k)).collect();
        assert_eq!(dropped, vec![2, 7, 12, 17]);
    }

    // Random phase: still exactly every n-th packet; the phase depends on the seed.
    #[test]
    fn random_phase_is_periodic_with_seeded_phase() {
        let mut firsts = std::collections::BTreeSet::new();
        for seed in 0..50 {
            let mut p =
                PeriodicDrops::new(&PeriodicDrop::RandomPhase { every: 10 }, Seed(seed).rng());
            let dropped: Vec<u64> = (1..=100).filter(|k| p.drops(*k)).collect();
            assert_eq!(dropped.len(), 10);
            assert!(dropped.windows(2).all(|w| w[1] - w[0] == 10));
            assert!((1..=10).contains(&dropped[0]));
            firsts.insert(dropped[0]);
        }
        assert!(
            firsts.len() > 3,
            "phase should vary with the seed: {firsts:?}"
        );
    }

    // One per block: exactly one drop in each block of n, positions vary.
    #[test]
    fn one_per_block_drops_exactly_one_per_block() {
        let n = 20;
        let mut p = PeriodicDrops::new(&PeriodicDrop::OnePerBlock { every: n }, Seed(5).rng());
        let mut positions = std::collections::BTreeSet::new();
        for block in 0..1000u64 {
            let hits: Vec<u64> = (1..=n).filter(|i| p.drops(block * n + i)).collect();
            assert_eq!(hits.len(), 1, "block {block}");
            positions.insert(hits[0]);
        }
        assert!(positions.len() > 10);
    }

    // Traces: bit i decides packet i+1; repeat or stop at the end.
    #[test]
    fn traces_follow_the_pattern() {
        let t = LossTrace::parse("0 1 1\n0 # comment 1111\n", false).unwrap();
        assert_eq!(t.pattern, "0110");
        let d = TraceDrops::new(&t);
        let dropped: Vec<u64> = (1..=10).filter(|k| d.drops(*k)).collect();
        assert_eq!(dropped, vec![2, 3]);
        let d = TraceDrops::new(&LossTrace { repeat: true, ..t });
        let dropped: Vec<u64> = (1..=10).filter(|k| d.drops(*k)).collect();
        assert_eq!(dropped, vec![2, 3, 6, 7, 10]);
        assert!(LossTrace::parse("01x", false)
            .unwrap_err()
            .to_string()
            .contains("'x'"));
        assert!(LossTrace::parse("# nothing\n", false).is_err());
    }

    // Outage windows are half-open.
    #[test]
    fn outage_windows_are_half_open() {
        let o = [Outage {
            start: Instant::from_millis(100),
            duration: Duration::from_millis(50),
        }];
        assert!(!in_outage(&o, Instant::from_millis(99)));
        assert!(in_outage(&o, Instant::from_millis(100)));
        assert!(in_outage(&o, Instant::from_nanos(149_999_999)));
        assert!(!in_outage(&o, Instant::from_millis(150)));
    }
}
