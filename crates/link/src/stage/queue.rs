//! The bottleneck: a rate limit fed by a drop-tail FIFO.
//!
//! Because the link is a pure function of its inputs, a packet's departure
//! time is known when it is enqueued: it starts serialising when the packet
//! ahead of it has left (or at once if the line is idle) and leaves one
//! serialisation time (`Bitrate::transmission_time` of its wire size) later.
//! The queue's occupancy at any moment is therefore the set of packets whose
//! departure lies in the future, minus the one being serialised; nothing
//! else needs to be simulated.

use crate::config::Bottleneck;
use std::collections::VecDeque;
use thinstream_base::Instant;

/// Rate limit plus drop-tail queue; see the module docs.
#[derive(Clone, Debug)]
pub struct BottleneckQueue {
    config: Bottleneck,
    /// Packets not yet departed, in FIFO order: (departure, wire bytes).
    /// The front one is being serialised (its start is at or before the last
    /// `offer` time), the rest are waiting.
    in_system: VecDeque<(Instant, u64)>,
    bytes_in_system: u64,
    busy_until: Instant,
}

impl BottleneckQueue {
    pub fn new(config: &Bottleneck) -> Self {
        BottleneckQueue {
            config: config.clone(),
            in_system: VecDeque::new(),
            bytes_in_system: 0,
            busy_until: Instant::ZERO,
        }
    }

    /// Offers a datagram of `payload_len` bytes at `now` (non-decreasing
    /// across calls). Returns its departure time, or `None` if the queue is
    /// full and the datagram is dropped (tail drop).
    pub fn offer(&mut self, now: Instant, payload_len: usize) -> Option<Instant> {
        while let Some(&(departure, bytes)) = self.in_system.front() {
            if departure > now {
                break;
            }
            self.in_system.pop_front();
            self.bytes_in_system -= bytes;
        }
        let wire = self.config.wire_bytes(payload_len) as u64;
        // Every packet still in the system departs after `now`; all but the
        // front one have not started yet, so they are the queue.
        if let Some(&(_, front_bytes)) = self.in_system.front() {
            let waiting = self.in_system.len() as u64 - 1;
            let waiting_bytes = self.bytes_in_system - front_bytes;
            let over_packets = self
                .config
                .limit_packets
                .is_some_and(|l| waiting >= u64::from(l));
            let over_bytes = self
                .config
                .limit_bytes
                .is_some_and(|l| waiting_bytes.saturating_add(wire) > l);
            if over_packets || over_bytes {
                return None;
            }
        }
        let start = now.max(self.busy_until);
        let departure = start.saturating_add(self.config.rate.transmission_time(wire as usize));
        self.busy_until = departure;
        self.in_system.push_back((departure, wire));
        self.bytes_in_system += wire;
        Some(departure)
    }

    /// Packets waiting (not counting the one being serialised) as of the last offer.
    pub fn waiting_packets(&self) -> usize {
        self.in_system.len().saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinstream_base::{Bitrate, Duration};

    fn queue(
        limit_packets: Option<u32>,
        limit_bytes: Option<u64>,
        overhead: i32,
    ) -> BottleneckQueue {
        BottleneckQueue::new(&Bottleneck {
            rate: Bitrate(1_000_000),
            overhead_bytes: overhead,
            limit_packets,
            limit_bytes,
        })
    }

    // An idle line serialises at once; 1000 bytes at 1 Mbit/s take 8 ms.
    #[test]
    fn idle_line_departs_after_one_serialisation_time() {
        let mut q = queue(Some(0), None, 0);
        assert_eq!(
            q.offer(Instant::from_millis(5), 1000),
            Some(Instant::from_millis(13))
        );
        // Limit 0: nothing may wait, so a second packet while busy is dropped...
        assert_eq!(q.offer(Instant::from_millis(6), 1000), None);
        // ...but once the line is idle again it is accepted.
        assert_eq!(
            q.offer(Instant::from_millis(13), 1000),
            Some(Instant::from_millis(21))
        );
    }

    // Overhead bytes count towards the serialisation time: 972 + 28 = 1000 bytes.
    #[test]
    fn overhead_is_serialised_too() {
        let mut q = queue(None, None, 28);
        assert_eq!(q.offer(Instant::ZERO, 972), Some(Instant::from_millis(8)));
        let mut q = queue(None, None, -2000);
        assert_eq!(q.offer(Instant::ZERO, 972), Some(Instant::ZERO));
    }

    // Packet limit: one in service plus `limit` waiting; the next is dropped.
    #[test]
    fn packet_limit_counts_waiting_packets() {
        let mut q = queue(Some(3), None, 0);
        for i in 0..4 {
            assert_eq!(
                q.offer(Instant::ZERO, 1000),
                Some(Instant::ZERO + Duration::from_millis(8) * (i + 1))
            );
        }
        assert_eq!(q.waiting_packets(), 3);
        assert_eq!(q.offer(Instant::ZERO, 1000), None);
        // After the first departure one slot is free again.
        assert_eq!(
            q.offer(Instant::from_millis(8), 10),
            Some(Instant::from_micros(32_080))
        );
        assert_eq!(q.offer(Instant::from_millis(8), 10), None);
    }

    // Byte limit: waiting bytes plus the newcomer must fit.
    #[test]
    fn byte_limit_counts_waiting_bytes() {
        let mut q = queue(None, Some(2500), 0);
        assert!(q.offer(Instant::ZERO, 1000).is_some()); // in service
        assert!(q.offer(Instant::ZERO, 1000).is_some()); // waiting 1000
        assert!(q.offer(Instant::ZERO, 1000).is_some()); // waiting 2000
        assert!(q.offer(Instant::ZERO, 1000).is_none()); // 3000 > 2500
        assert!(q.offer(Instant::ZERO, 500).is_some()); // 2500 fits
        assert!(q.offer(Instant::ZERO, 1).is_none());
    }
}
