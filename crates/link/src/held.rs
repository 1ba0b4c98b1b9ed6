//! [`HeldLink`]: a [`Link`] plus the datagrams it holds until their arrival
//! times, for callers that move packets in real time (the emulator) rather
//! than through a simulator's event queue.
//!
//! Still sans-IO: the caller passes `now` (from whatever clock it has), asks
//! for the next release time, sleeps on its own, and collects what is due.
//! The same seed and the same offer times give the same releases.

use crate::link::{Link, SendReport};
use crate::stats::Counter;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use thinstream_base::{Datagram, Instant};

/// Bounds on what a [`HeldLink`] holds at once. A copy that would exceed
/// either bound is dropped at the tail and counted in
/// [`HeldLink::overflow`] (apart from the link's own drop causes: this is
/// the emulator's memory bound, not a modelled router queue).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HoldLimit {
    pub packets: usize,
    pub bytes: usize,
}

impl Default for HoldLimit {
    fn default() -> Self {
        HoldLimit {
            packets: 100_000,
            bytes: 64 << 20,
        }
    }
}

struct Held {
    release: Instant,
    /// Offer order, so that equal release times leave in the order they
    /// were handed out by the link.
    seq: u64,
    datagram: Datagram,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.release, self.seq) == (other.release, other.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.release, self.seq).cmp(&(other.release, other.seq))
    }
}

/// One direction of an emulated link: the [`Link`] decides drops,
/// duplicates, corruption and arrival times; this keeps the survivors in a
/// heap ordered by arrival time until the caller releases them.
pub struct HeldLink {
    link: Link,
    heap: BinaryHeap<Reverse<Held>>,
    limit: HoldLimit,
    held_bytes: usize,
    seq: u64,
    scratch: Vec<(Instant, Datagram)>,
    overflow: Counter,
    max_held: usize,
}

impl std::fmt::Debug for HeldLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldLink")
            .field("link", &self.link)
            .field("held", &self.heap.len())
            .field("overflow", &self.overflow)
            .finish_non_exhaustive()
    }
}

impl HeldLink {
    pub fn new(link: Link, limit: HoldLimit) -> HeldLink {
        HeldLink {
            link,
            heap: BinaryHeap::new(),
            limit,
            held_bytes: 0,
            seq: 0,
            scratch: Vec::with_capacity(2),
            overflow: Counter::default(),
            max_held: 0,
        }
    }

    /// Offers a datagram at `now` (non-decreasing across calls, as for
    /// [`Link::send`]). Copies the link delivers are held until their
    /// arrival time unless the hold limit is reached.
    pub fn offer(&mut self, now: Instant, datagram: Datagram) -> SendReport {
        let report = self.link.send_report(now, datagram, &mut self.scratch);
        for (release, datagram) in self.scratch.drain(..) {
            let len = datagram.payload.len();
            if self.heap.len() >= self.limit.packets || self.held_bytes + len > self.limit.bytes {
                self.overflow.add(len);
                continue;
            }
            self.held_bytes += len;
            self.seq += 1;
            self.heap.push(Reverse(Held {
                release,
                seq: self.seq,
                datagram,
            }));
        }
        self.max_held = self.max_held.max(self.heap.len());
        report
    }

    /// When the earliest held datagram is due, if any is held.
    pub fn next_release(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(h)| h.release)
    }

    /// Moves up to `max` datagrams due at or before `now` to `out`, earliest
    /// first, each with its scheduled release time. Returns how many moved.
    pub fn release_due(
        &mut self,
        now: Instant,
        max: usize,
        out: &mut Vec<(Instant, Datagram)>,
    ) -> usize {
        let mut n = 0;
        while n < max {
            match self.heap.peek() {
                Some(Reverse(h)) if h.release <= now => {}
                _ => break,
            }
            if let Some(Reverse(h)) = self.heap.pop() {
                self.held_bytes -= h.datagram.payload.len();
                out.push((h.release, h.datagram));
                n += 1;
            }
        }
        n
    }

    /// Datagrams held now.
    pub fn held(&self) -> usize {
        self.heap.len()
    }

    /// Most datagrams held at once so far.
    pub fn max_held(&self) -> usize {
        self.max_held
    }

    /// Copies dropped because the hold limit was reached.
    pub fn overflow(&self) -> Counter {
        self.overflow
    }

    /// The link (its config and [`crate::LinkStats`]).
    pub fn link(&self) -> &Link {
        &self.link
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LinkConfig;
    use thinstream_base::{Duration, Seed};

    fn d(i: u32) -> Datagram {
        Datagram {
            src: "127.0.0.1:1".parse().unwrap(),
            dst: "127.0.0.1:2".parse().unwrap(),
            payload: i.to_be_bytes().to_vec(),
        }
    }

    fn id(d: &Datagram) -> u32 {
        u32::from_be_bytes(d.payload[..4].try_into().unwrap())
    }

    #[test]
    fn releases_at_arrival_time_in_order() {
        let cfg = LinkConfig::parse_netem("delay 20ms").unwrap();
        let mut h = HeldLink::new(Link::new(&cfg, Seed(1)), HoldLimit::default());
        for i in 0..10u32 {
            h.offer(Instant::ZERO + Duration::from_millis(u64::from(i)), d(i));
        }
        assert_eq!(
            h.next_release(),
            Some(Instant::ZERO + Duration::from_millis(20))
        );
        let mut out = Vec::new();
        assert_eq!(
            h.release_due(Instant::ZERO + Duration::from_millis(19), 100, &mut out),
            0
        );
        assert_eq!(
            h.release_due(Instant::ZERO + Duration::from_millis(24), 3, &mut out),
            3
        );
        assert_eq!(
            h.release_due(Instant::ZERO + Duration::from_millis(24), 100, &mut out),
            2
        );
        let ids: Vec<u32> = out.iter().map(|(_, d)| id(d)).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4]);
        for (i, (t, _)) in out.iter().enumerate() {
            assert_eq!(*t, Instant::ZERO + Duration::from_millis(20 + i as u64));
        }
        assert_eq!(h.held(), 5);
    }

    #[test]
    fn hold_limit_drops_at_the_tail_and_counts() {
        let cfg = LinkConfig::parse_netem("delay 1s").unwrap();
        let limit = HoldLimit {
            packets: 3,
            bytes: 1 << 20,
        };
        let mut h = HeldLink::new(Link::new(&cfg, Seed(1)), limit);
        for i in 0..5u32 {
            h.offer(Instant::ZERO, d(i));
        }
        assert_eq!(h.held(), 3);
        assert_eq!(h.overflow().packets, 2);
        let mut out = Vec::new();
        h.release_due(Instant::MAX, 10, &mut out);
        let ids: Vec<u32> = out.iter().map(|(_, d)| id(d)).collect();
        assert_eq!(ids, vec![0, 1, 2]);
        // Byte bound.
        let mut h = HeldLink::new(
            Link::new(&cfg, Seed(1)),
            HoldLimit {
                packets: 100,
                bytes: 10,
            },
        );
        for i in 0..5u32 {
            h.offer(Instant::ZERO, d(i));
        }
        assert_eq!((h.held(), h.overflow().packets), (2, 3));
    }

    #[test]
    fn same_seed_same_releases_as_the_bare_link() {
        let cfg = LinkConfig::parse_netem("delay 10ms 5ms loss 20% duplicate 5%").unwrap();
        let mut bare = Link::new(&cfg, Seed(9));
        let mut h = HeldLink::new(Link::new(&cfg, Seed(9)), HoldLimit::default());
        let mut expect = Vec::new();
        for i in 0..500u32 {
            let now = Instant::ZERO + Duration::from_micros(u64::from(i) * 300);
            bare.send(now, d(i), &mut expect);
            h.offer(now, d(i));
        }
        let mut got = Vec::new();
        h.release_due(Instant::MAX, usize::MAX, &mut got);
        expect.sort_by_key(|(t, _)| *t);
        let key = |v: &Vec<(Instant, Datagram)>| -> Vec<(Instant, u32)> {
            v.iter().map(|(t, d)| (*t, id(d))).collect()
        };
        assert_eq!(key(&got), key(&expect));
        assert_eq!(h.link().stats(), bare.stats());
    }
}
