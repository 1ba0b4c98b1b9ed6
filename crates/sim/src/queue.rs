//! The event queue: a binary heap keyed by (virtual time, insertion sequence).
//!
//! Two events due at the same instant pop in the order they were pushed, so a
//! run never depends on how the heap happens to break ties (the smoltcp
//! netsim and TigerBeetle habit, examples-to-follow habit 7). Payloads live
//! in a slab beside the heap so sifting moves 16-byte keys, not datagrams:
//! the time, and one word holding the sequence number above the slot index
//! (the sequence numbers are unique, so the slot bits never decide an order).
//! The heap is 4-ary (`dary_heap`): half the depth of a binary heap, and a
//! node's children share cache lines, which is what a pop costs once
//! thousands of flows keep tens of thousands of events pending. Keys are
//! unique (the sequence number), so the pop order is the same whatever the
//! heap's arity.

use dary_heap::QuaternaryHeap;
use std::cmp::Reverse;
use thinstream_base::Instant;

/// Bits of a key's second word that hold the slot index.
const SLOT_BITS: u32 = 24;
/// Most events pending at once.
pub const MAX_PENDING: usize = 1 << SLOT_BITS;
/// Most events pushed over a queue's life (2^40, about 10^12).
pub const MAX_PUSHED: u64 = 1 << (64 - SLOT_BITS);

/// A min-queue of `T` ordered by `(at, seq)`, `seq` being the push order.
#[derive(Debug)]
pub struct EventQueue<T> {
    /// `(at, seq << SLOT_BITS | slot)`.
    heap: QuaternaryHeap<Reverse<(Instant, u64)>>,
    slots: Vec<Option<T>>,
    free: Vec<u32>,
    next_seq: u64,
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        EventQueue::new()
    }
}

impl<T> EventQueue<T> {
    pub fn new() -> Self {
        EventQueue {
            heap: QuaternaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            next_seq: 0,
        }
    }

    /// Schedules `event` at `at`; returns its insertion sequence number.
    pub fn push(&mut self, at: Instant, event: T) -> u64 {
        let slot = match self.free.pop() {
            Some(s) => {
                debug_assert!(self.slots[s as usize].is_none());
                self.slots[s as usize] = Some(event);
                s
            }
            None => {
                assert!(
                    self.slots.len() < MAX_PENDING,
                    "more than {MAX_PENDING} events pending at once"
                );
                self.slots.push(Some(event));
                (self.slots.len() - 1) as u32
            }
        };
        let seq = self.next_seq;
        assert!(seq < MAX_PUSHED, "more than {MAX_PUSHED} events pushed");
        self.next_seq += 1;
        self.heap
            .push(Reverse((at, seq << SLOT_BITS | u64::from(slot))));
        seq
    }

    /// Removes and returns the earliest event (ties: first pushed).
    pub fn pop(&mut self) -> Option<(Instant, T)> {
        let Reverse((at, key)) = self.heap.pop()?;
        let slot = (key & ((1 << SLOT_BITS) - 1)) as u32;
        self.free.push(slot);
        // Invariant: every heap key points at an occupied slot; slots are
        // freed only here, together with their key.
        let event = self.slots[slot as usize]
            .take()
            .expect("heap key without payload");
        Some((at, event))
    }

    /// The time of the earliest pending event.
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// How many events have ever been pushed.
    pub fn pushed(&self) -> u64 {
        self.next_seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Events due at the same instant come out in insertion order, whatever the heap layout.
    #[test]
    fn ties_break_by_insertion_sequence() {
        let mut q = EventQueue::new();
        let t = Instant::from_millis(10);
        for i in 0..100u32 {
            // Interleave an earlier and a later event so the heap reshuffles.
            q.push(t, i);
            q.push(Instant::from_millis(u64::from(i % 7) + 20), 1000 + i);
        }
        q.push(Instant::from_millis(5), 9999);
        assert_eq!(q.pop(), Some((Instant::from_millis(5), 9999)));
        for i in 0..100u32 {
            assert_eq!(q.pop(), Some((t, i)));
        }
        let mut last = (Instant::ZERO, 0u32);
        while let Some((at, v)) = q.pop() {
            assert!(
                at > last.0 || (at == last.0 && v > last.1),
                "{at} {v} after {last:?}"
            );
            last = (at, v);
        }
        assert!(q.is_empty());
    }

    // Freed slots are reused, so a steady-state queue does not grow.
    #[test]
    fn slots_are_reused() {
        let mut q = EventQueue::new();
        for i in 0..10_000u64 {
            q.push(Instant::from_nanos(i), i);
            assert_eq!(q.pop(), Some((Instant::from_nanos(i), i)));
        }
        assert_eq!(q.slots.len(), 1);
        assert_eq!(q.pushed(), 10_000);
    }
}
