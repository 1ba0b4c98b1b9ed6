//! Thin streams with independent inter-arrival times and sizes: constant
//! (`streamzero` of 002 App. B: fixed size, fixed IAT), exponential (Poisson
//! arrivals), uniform-random IAT; and the building blocks other generators
//! reuse: round-robin stream assignment and count/duration limits.
//!
//! Timing convention (all message generators): the first message is due at
//! `start`; message *i + 1* is due one IAT after message *i*.

use thinstream_base::{Duration, Instant, Rng};

use crate::dist::{IatDist, SizeDist};
use crate::{Generator, Message};

/// Assigns stream indices `0, 1, …, count − 1, 0, 1, …` (round robin, as the
/// 001 §IV.A load generator and the SIMCO example of 001 §II.C do).
#[derive(Clone, Debug)]
pub struct StreamRoundRobin {
    count: u16,
    next: u16,
}

impl StreamRoundRobin {
    /// `count` of 0 is treated as 1.
    pub fn new(count: u16) -> Self {
        StreamRoundRobin {
            count: count.max(1),
            next: 0,
        }
    }
    pub fn next_stream(&mut self) -> u16 {
        let s = self.next;
        self.next = if s + 1 >= self.count { 0 } else { s + 1 };
        s
    }
}

/// A thin stream whose IATs and sizes are drawn independently.
#[derive(Debug)]
pub struct IidStream {
    next_at: Instant,
    iat: IatDist,
    size: SizeDist,
    streams: StreamRoundRobin,
    unordered: bool,
    rng: Rng,
}

impl IidStream {
    pub fn new(
        start: Instant,
        iat: IatDist,
        size: SizeDist,
        streams: u16,
        unordered: bool,
        rng: Rng,
    ) -> Self {
        IidStream {
            next_at: start,
            iat,
            size,
            streams: StreamRoundRobin::new(streams),
            unordered,
            rng,
        }
    }
}

impl Generator for IidStream {
    fn next_message(&mut self) -> Option<Message> {
        let at = self.next_at;
        // Size first, then the gap to the next message: a fixed draw order
        // keeps sequences stable when only one of the two laws changes.
        let bytes = self.size.sample(&mut self.rng);
        let gap = self.iat.sample(&mut self.rng);
        // Virtual time runs out after ~584 years; a generator that far in
        // the future is finished rather than a panic.
        self.next_at = at.checked_add(gap).unwrap_or(Instant::MAX);
        if at == Instant::MAX {
            return None;
        }
        Some(Message {
            at,
            stream: self.streams.next_stream(),
            bytes,
            unordered: self.unordered,
        })
    }
}

/// Stops a generator after `count` messages and/or at `start + duration`
/// (messages due at or after that instant are not produced).
pub struct Limited<G> {
    inner: G,
    remaining: Option<u64>,
    until: Option<Instant>,
}

impl<G: Generator> Limited<G> {
    pub fn new(inner: G, start: Instant, count: Option<u64>, duration: Option<Duration>) -> Self {
        Limited {
            inner,
            remaining: count,
            until: duration.map(|d| start.saturating_add(d)),
        }
    }
}

impl<G: Generator> Generator for Limited<G> {
    fn next_message(&mut self) -> Option<Message> {
        if self.remaining == Some(0) {
            return None;
        }
        let m = self.inner.next_message()?;
        if let Some(until) = self.until {
            if m.at >= until {
                // Messages are time-ordered, so nothing later qualifies.
                self.remaining = Some(0);
                return None;
            }
        }
        if let Some(r) = self.remaining.as_mut() {
            *r -= 1;
        }
        Some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::take_messages;
    use thinstream_base::Seed;

    #[test]
    fn round_robin_cycles() {
        let mut rr = StreamRoundRobin::new(3);
        let v: Vec<u16> = (0..7).map(|_| rr.next_stream()).collect();
        assert_eq!(v, [0, 1, 2, 0, 1, 2, 0]);
        let mut one = StreamRoundRobin::new(0);
        assert_eq!((one.next_stream(), one.next_stream()), (0, 0));
    }

    #[test]
    fn limits_by_count_and_duration() {
        let start = Instant::from_millis(5);
        let mk = || {
            IidStream::new(
                start,
                IatDist::Constant(Duration::from_millis(100)),
                SizeDist::Constant(10),
                1,
                false,
                Seed(0).rng(),
            )
        };
        let mut by_count = Limited::new(mk(), start, Some(3), None);
        assert_eq!(take_messages(&mut by_count, 100).len(), 3);
        // Due at 5, 105, ..., 905 ms: the one at 1005 ms = start + 1 s is excluded.
        let mut by_time = Limited::new(mk(), start, None, Some(Duration::from_secs(1)));
        let v = take_messages(&mut by_time, 100);
        assert_eq!(v.len(), 10);
        assert_eq!(v.last().unwrap().at, Instant::from_millis(905));
        assert!(by_time.next_message().is_none());
    }
}
