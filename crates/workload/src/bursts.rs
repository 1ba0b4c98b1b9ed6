//! Bursty signalling traffic of 003 §3 (Table 1).
//!
//! Three patterns, each a fixed number of bursts (12 in 003: the first two are
//! discarded by the measurement, 003 §4.1 footnote 3, which is the metric's
//! business, not the generator's):
//!
//! * [`BurstPattern::Static`]: `n` messages per burst, fixed inter-burst gap;
//! * [`BurstPattern::ExponentialGap`]: `n` messages per burst, gap drawn from
//!   an exponential law whose mean is the configured gap;
//! * [`BurstPattern::UniformSize`]: burst size drawn from the discrete uniform
//!   law on `[n − 3, n + 3]` (003: "the ranges of the uniform distributions
//!   were [n − 3, n + 3]"), fixed gap. Needs `n ≥ 4` so every burst has at
//!   least one message.
//!
//! 003 pairs burst size 4 with gap 200 ms and size 7 with gap 100 ms. The
//! message payload is not stated; the default 200 bytes follows the example
//! of 003 §2.3.
//!
//! Timing: the messages of one burst are all due at the same instant unless
//! `intra_gap` is set (003 writes them back to back; they left as separate
//! packets, 003 §4.1 — whether that holds here is the transport's bundling
//! and Nagle configuration, not the generator's). The inter-burst gap runs
//! from the last message of a burst to the first of the next, so with
//! `intra_gap = 0` it is also the spacing of burst starts.

use serde::{Deserialize, Serialize};
use thinstream_base::{Duration, Instant, Rng};

use crate::thin::StreamRoundRobin;
use crate::{Generator, Message, WorkloadError};

/// Which of the three 003 patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BurstPattern {
    /// (i) static burst size, static gap.
    Static,
    /// (ii) static burst size, exponential gap with the configured mean.
    ExponentialGap,
    /// (iii) burst size uniform on `[n − 3, n + 3]`, static gap.
    UniformSize,
}

/// Half-width of the burst-size range of pattern (iii), 003 §3.
pub const UNIFORM_SIZE_SPREAD: u32 = 3;

/// Generator of one run of bursts.
#[derive(Debug)]
pub struct BurstStream {
    pattern: BurstPattern,
    burst_size: u32,
    gap: Duration,
    intra_gap: Duration,
    bytes: u32,
    bursts_left: u32,
    /// Messages still to send in the current burst.
    left_in_burst: u32,
    next_at: Instant,
    streams: StreamRoundRobin,
    unordered: bool,
    rng: Rng,
}

impl BurstStream {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        start: Instant,
        pattern: BurstPattern,
        burst_size: u32,
        gap: Duration,
        intra_gap: Duration,
        bursts: u32,
        bytes: u32,
        streams: u16,
        unordered: bool,
        rng: Rng,
    ) -> Result<BurstStream, WorkloadError> {
        if burst_size == 0 {
            return Err(WorkloadError::invalid(
                "bursts.burst-size",
                "must be at least 1",
            ));
        }
        if pattern == BurstPattern::UniformSize && burst_size <= UNIFORM_SIZE_SPREAD {
            return Err(WorkloadError::invalid(
                "bursts.burst-size",
                format!(
                    "pattern uniform-size draws from [n-3, n+3] and needs n >= 4, got {burst_size}"
                ),
            ));
        }
        if pattern == BurstPattern::ExponentialGap && gap.is_zero() {
            return Err(WorkloadError::invalid(
                "bursts.gap",
                "an exponential gap needs a positive mean",
            ));
        }
        let mut s = BurstStream {
            pattern,
            burst_size,
            gap,
            intra_gap,
            bytes,
            bursts_left: bursts,
            left_in_burst: 0,
            next_at: start,
            streams: StreamRoundRobin::new(streams),
            unordered,
            rng,
        };
        s.begin_burst();
        Ok(s)
    }

    /// Draws the size of the next burst and counts it.
    fn begin_burst(&mut self) {
        if self.bursts_left == 0 {
            self.left_in_burst = 0;
            return;
        }
        self.bursts_left -= 1;
        self.left_in_burst = match self.pattern {
            BurstPattern::UniformSize => self.rng.range_inclusive(
                u64::from(self.burst_size - UNIFORM_SIZE_SPREAD),
                u64::from(self.burst_size + UNIFORM_SIZE_SPREAD),
            ) as u32,
            _ => self.burst_size,
        };
    }
}

impl Generator for BurstStream {
    fn next_message(&mut self) -> Option<Message> {
        if self.left_in_burst == 0 {
            return None;
        }
        let at = self.next_at;
        self.left_in_burst -= 1;
        let step = if self.left_in_burst > 0 {
            self.intra_gap
        } else {
            self.begin_burst();
            match self.pattern {
                BurstPattern::ExponentialGap => {
                    Duration::from_secs_f64(self.rng.exponential(self.gap.as_secs_f64()))
                }
                _ => self.gap,
            }
        };
        self.next_at = at.saturating_add(step);
        Some(Message {
            at,
            stream: self.streams.next_stream(),
            bytes: self.bytes,
            unordered: self.unordered,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::take_messages;
    use thinstream_base::Seed;

    fn run(pattern: BurstPattern, n: u32, gap_ms: u64, seed: u64) -> Vec<Message> {
        let mut g = BurstStream::new(
            Instant::from_millis(10),
            pattern,
            n,
            Duration::from_millis(gap_ms),
            Duration::ZERO,
            12,
            200,
            1,
            false,
            Seed(seed).rng(),
        )
        .unwrap();
        take_messages(&mut g, 10_000)
    }

    /// Groups messages by identical `at` (a burst is written at one instant).
    fn bursts(msgs: &[Message]) -> Vec<(Instant, usize)> {
        let mut out: Vec<(Instant, usize)> = Vec::new();
        for m in msgs {
            match out.last_mut() {
                Some((t, c)) if *t == m.at => *c += 1,
                _ => out.push((m.at, 1)),
            }
        }
        out
    }

    /// (i) 12 bursts of exactly n messages, exactly `gap` apart, for both 003 pairs.
    #[test]
    fn static_pattern_is_exact() {
        for (n, gap) in [(4u32, 200u64), (7, 100)] {
            let msgs = run(BurstPattern::Static, n, gap, 1);
            assert_eq!(msgs.len(), 12 * n as usize);
            let b = bursts(&msgs);
            assert_eq!(b.len(), 12);
            for (i, (t, c)) in b.iter().enumerate() {
                assert_eq!(*c, n as usize);
                assert_eq!(*t, Instant::from_millis(10 + i as u64 * gap));
            }
            assert!(msgs.iter().all(|m| m.bytes == 200 && m.stream == 0));
        }
    }

    /// (ii) 12 bursts of n; gaps vary, and over many runs their mean is the configured mean.
    #[test]
    fn exponential_gap_pattern() {
        let mut gaps = Vec::new();
        for seed in 0..400 {
            let msgs = run(BurstPattern::ExponentialGap, 4, 200, seed);
            let b = bursts(&msgs);
            // Two bursts at the same instant would merge (gap of exactly 0 ns:
            // probability ~0); every burst has exactly 4 messages.
            assert_eq!(msgs.len(), 48);
            assert_eq!(b.len(), 12, "seed {seed}");
            assert!(b.iter().all(|(_, c)| *c == 4));
            gaps.extend(b.windows(2).map(|w| (w[1].0 - w[0].0).as_millis_f64()));
        }
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean - 200.0).abs() < 10.0, "mean gap {mean}");
        // 003 eq. 1: about 63 % of the gaps are shorter than the mean.
        let short = gaps.iter().filter(|g| **g < 200.0).count() as f64 / gaps.len() as f64;
        assert!((short - 0.632).abs() < 0.03, "fraction below mean {short}");
    }

    /// (iii) sizes cover exactly [n-3, n+3] with mean ≈ n; gaps static.
    #[test]
    fn uniform_size_pattern() {
        for (n, gap) in [(4u32, 200u64), (7, 100)] {
            let mut counts = std::collections::BTreeMap::new();
            for seed in 0..300 {
                let msgs = run(BurstPattern::UniformSize, n, gap, seed);
                let b = bursts(&msgs);
                assert_eq!(b.len(), 12);
                for (i, (t, c)) in b.iter().enumerate() {
                    assert_eq!(*t, Instant::from_millis(10 + i as u64 * gap));
                    *counts.entry(*c as u32).or_insert(0u32) += 1;
                }
            }
            let keys: Vec<u32> = counts.keys().copied().collect();
            assert_eq!(keys, ((n - 3)..=(n + 3)).collect::<Vec<_>>());
            let total: u32 = counts.values().sum();
            let mean = counts.iter().map(|(k, v)| f64::from(k * v)).sum::<f64>() / f64::from(total);
            assert!((mean - f64::from(n)).abs() < 0.15, "mean burst {mean}");
        }
    }

    #[test]
    fn intra_gap_spaces_messages_and_gap_follows_last() {
        let mut g = BurstStream::new(
            Instant::ZERO,
            BurstPattern::Static,
            3,
            Duration::from_millis(100),
            Duration::from_millis(5),
            2,
            50,
            2,
            true,
            Seed(0).rng(),
        )
        .unwrap();
        let at: Vec<u64> = take_messages(&mut g, 100)
            .iter()
            .map(|m| m.at.as_nanos() / 1_000_000)
            .collect();
        assert_eq!(at, [0, 5, 10, 110, 115, 120]);
    }

    #[test]
    fn rejects_bad_settings() {
        let mk = |p, n, gap| {
            BurstStream::new(
                Instant::ZERO,
                p,
                n,
                gap,
                Duration::ZERO,
                12,
                200,
                1,
                false,
                Seed(0).rng(),
            )
        };
        assert!(mk(BurstPattern::Static, 0, Duration::from_millis(1)).is_err());
        assert!(mk(BurstPattern::UniformSize, 3, Duration::from_millis(1)).is_err());
        assert!(mk(BurstPattern::UniformSize, 4, Duration::from_millis(1)).is_ok());
        assert!(mk(BurstPattern::ExponentialGap, 4, Duration::ZERO).is_err());
    }
}
