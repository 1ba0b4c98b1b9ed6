//! The event queue: keys ordered by (virtual time, insertion sequence).
//!
//! Two events due at the same instant pop in the order they were pushed, so a
//! run never depends on how a container happens to break ties (as in smoltcp's
//! network simulator and TigerBeetle's deterministic simulation). Payloads live
//! in a slab beside the keys so ordering moves 16-byte keys, not datagrams:
//! the time, and one word holding the sequence number above the slot index
//! (the sequence numbers are unique, so the slot bits never decide an order).
//! The keys are held by a calendar ([`crate::calendar`]): a small heap for
//! the current millisecond, a vector per millisecond for the next two
//! seconds and a heap beyond. Keys are unique, so the pop order is the one
//! a single heap gives; what changes is what a pop touches once thousands
//! of flows keep tens of thousands of events pending (a heap's pop walks
//! down levels that have left the caches).
//!
//! A pending event can be cancelled ([`EventQueue::cancel`]): a bit per slot
//! is cleared and its key is skipped when it comes up. Cancelled keys
//! are also swept out all at once when they are at least
//! [`COMPACT_MIN_CANCELLED`] and half the keys: a transport whose deadline
//! alternates between a near timer and a far one (a retransmission timer
//! and a heartbeat tens of seconds out) supersedes one timer event per
//! change, and with thousands of flows those would otherwise outnumber the
//! live events many times over. A sweep reads only the keys and a bit per
//! slot, and the keys kept pop in the same order.

use crate::calendar::Calendar;
use std::cmp::Reverse;
use thinstream_base::Instant;

/// Bits of a key's second word that hold the slot index.
const SLOT_BITS: u32 = 24;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
/// Most events pending at once.
pub const MAX_PENDING: usize = 1 << SLOT_BITS;
/// Most events pushed over a queue's life (2^40, about 10^12).
pub const MAX_PUSHED: u64 = 1 << (64 - SLOT_BITS);
/// Cancelled keys held from which a sweep may run.
pub const COMPACT_MIN_CANCELLED: usize = 1024;

/// A pending event, for [`EventQueue::cancel`]. Valid until the event pops
/// or is cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle(u32);

/// A payload's place, aligned to a cache line: a payload of up to 64 bytes
/// is read in one line when it pops.
#[derive(Debug)]
#[repr(align(64))]
struct Slot<T>(Option<T>);

/// A min-queue of `T` ordered by `(at, seq)`, `seq` being the push order.
#[derive(Debug)]
pub struct EventQueue<T> {
    /// `(at, seq << SLOT_BITS | slot)`.
    keys: Calendar,
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    /// One bit per slot: its event is pending and not cancelled.
    live: Vec<u64>,
    /// Keys held whose event was cancelled.
    cancelled_pending: usize,
    /// Cancelled events whose key has left the queue (popped or swept).
    cancelled_dropped: u64,
    next_seq: u64,
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        EventQueue::new()
    }
}

fn bit(slot: u32) -> (usize, u64) {
    ((slot / 64) as usize, 1u64 << (slot % 64))
}

impl<T> EventQueue<T> {
    pub fn new() -> Self {
        EventQueue {
            keys: Calendar::new(),
            slots: Vec::new(),
            free: Vec::new(),
            live: Vec::new(),
            cancelled_pending: 0,
            cancelled_dropped: 0,
            next_seq: 0,
        }
    }

    /// Schedules `event` at `at`.
    pub fn push(&mut self, at: Instant, event: T) -> Handle {
        let slot = match self.free.pop() {
            Some(s) => {
                // Drops the payload of a cancelled event left here.
                self.slots[s as usize] = Slot(Some(event));
                s
            }
            None => {
                assert!(
                    self.slots.len() < MAX_PENDING,
                    "more than {MAX_PENDING} events pending at once"
                );
                self.slots.push(Slot(Some(event)));
                if self.slots.len() > self.live.len() * 64 {
                    self.live.push(0);
                }
                (self.slots.len() - 1) as u32
            }
        };
        let seq = self.next_seq;
        assert!(seq < MAX_PUSHED, "more than {MAX_PUSHED} events pushed");
        self.next_seq += 1;
        let (word, mask) = bit(slot);
        self.live[word] |= mask;
        self.keys.push((at, seq << SLOT_BITS | u64::from(slot)));
        Handle(slot)
    }

    /// Removes and returns the earliest event (ties: first pushed),
    /// skipping cancelled ones.
    pub fn pop(&mut self) -> Option<(Instant, T)> {
        loop {
            let (at, key) = self.keys.pop()?;
            let slot = (key & SLOT_MASK) as u32;
            self.free.push(slot);
            let (word, mask) = bit(slot);
            if self.live[word] & mask == 0 {
                self.cancelled_pending -= 1;
                self.cancelled_dropped += 1;
                continue;
            }
            self.live[word] &= !mask;
            // Invariant: every live key points at an occupied slot; slots
            // are freed only with their key.
            let event = self.slots[slot as usize]
                .0
                .take()
                .expect("key without payload");
            return Some((at, event));
        }
    }

    /// For prefetching: the payload of the smallest key (the next to
    /// pop unless it was cancelled or an earlier event is pushed first),
    /// and where the payload of the earliest of its children in the
    /// calendar's front heap (usually the one after) lives. Reads the top
    /// of the front heap and the top's slot only.
    pub fn lookahead(&self) -> (Option<&T>, Option<*const u8>) {
        let keys = self.keys.front();
        let slot = |k: &Reverse<(Instant, u64)>| (k.0 .1 & SLOT_MASK) as usize;
        let next = keys
            .first()
            .and_then(|k| self.slots.get(slot(k)))
            .and_then(|s| s.0.as_ref());
        // The front is a max-heap of `Reverse` keys: the children's largest
        // is their earliest.
        let after = keys
            .get(1..keys.len().min(5))
            .and_then(|children| children.iter().max())
            .map(|k| self.slots.as_ptr().wrapping_add(slot(k)).cast::<u8>());
        (next, after)
    }

    /// Cancels a pending event: it will not pop. Its payload is left in its
    /// slot (not read, so a cancel touches one bit) and dropped when the
    /// slot is reused or the queue dropped.
    ///
    /// # Panics
    /// If the event is no longer pending (it popped or was cancelled).
    pub fn cancel(&mut self, handle: Handle) {
        let (word, mask) = bit(handle.0);
        assert!(
            self.live.get(word).is_some_and(|w| w & mask != 0),
            "cancel of an event that is not pending"
        );
        self.live[word] &= !mask;
        self.cancelled_pending += 1;
        if self.cancelled_pending >= COMPACT_MIN_CANCELLED
            && self.cancelled_pending * 2 > self.keys.len()
        {
            self.sweep();
        }
    }

    /// Takes every cancelled key out of the calendar.
    fn sweep(&mut self) {
        let EventQueue {
            keys, live, free, ..
        } = self;
        keys.retain(|(_, key)| {
            let slot = (key & SLOT_MASK) as u32;
            let (word, mask) = bit(slot);
            let keep = live[word] & mask != 0;
            if !keep {
                free.push(slot);
            }
            keep
        });
        self.cancelled_dropped += self.cancelled_pending as u64;
        self.cancelled_pending = 0;
    }

    /// Cancelled events whose key has left the queue so far.
    pub fn cancelled(&self) -> u64 {
        self.cancelled_dropped
    }

    /// Pending events (cancelled ones excluded).
    pub fn len(&self) -> usize {
        self.keys.len() - self.cancelled_pending
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many events have ever been pushed.
    pub fn pushed(&self) -> u64 {
        self.next_seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Events due at the same instant come out in insertion order, whatever holds the keys.
    #[test]
    fn ties_break_by_insertion_sequence() {
        let mut q = EventQueue::new();
        let t = Instant::from_millis(10);
        for i in 0..100u32 {
            // Interleave an earlier and a later event.
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

    // The prefetch lookahead names the event that pops next and, unless
    // that is the last key of its millisecond, the slot of the one after
    // it, when nothing is pushed in between.
    #[test]
    fn lookahead_names_the_next_two_events() {
        let mut q = EventQueue::new();
        let mut x = 12345u64;
        for i in 0..2000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // 0-16 ms: about 120 keys per bucket.
            q.push(Instant::from_micros(x >> 50), i);
        }
        let slot_of = |q: &EventQueue<u32>, v: u32| {
            let i = q
                .slots
                .iter()
                .position(|s| s.0 == Some(v))
                .expect("pending value has a slot");
            q.slots.as_ptr().wrapping_add(i).cast::<u8>()
        };
        let (mut popped, mut named) = (0, 0);
        loop {
            let (next, after) = q.lookahead();
            let next = next.copied();
            let Some((_, v)) = q.pop() else {
                assert_eq!((next, after), (None, None));
                break;
            };
            assert_eq!(next, Some(v));
            match (q.lookahead().0.copied(), after) {
                (Some(w), Some(after)) => {
                    assert_eq!(after, slot_of(&q, w));
                    named += 1;
                }
                (_, None) => {}
                (None, Some(_)) => panic!("an event after the last named"),
            }
            popped += 1;
        }
        assert_eq!(popped, 2000);
        // Only the last key of each of the 17 buckets has no successor named.
        assert!(named >= 2000 - 17 - 1, "{named} named");
    }

    // Cancelled events never pop, whether skipped at their turn or swept out
    // in bulk; the others keep their order, ties included, and the queue goes
    // on working (pushes after a sweep order after the kept ones).
    #[test]
    fn cancelled_events_do_not_pop_and_the_rest_keep_their_order() {
        let mut q = EventQueue::new();
        let mut expect = Vec::new();
        let mut handles = Vec::new();
        for i in 0..5000u32 {
            let at = Instant::from_millis(u64::from(i * 7919 % 50));
            handles.push((i, q.push(at, i)));
            if i % 3 != 0 {
                expect.push((at, i));
            }
        }
        for &(i, h) in &handles {
            if i % 3 == 0 {
                q.cancel(h);
            }
        }
        // 1667 cancelled of 5000: not half the keys, so no sweep; they are
        // skipped when they come up.
        assert_eq!(q.len(), 5000 - 1667);
        q.push(Instant::from_millis(10), 9000);
        expect.push((Instant::from_millis(10), 9000));
        expect.sort_by_key(|&(at, v)| (at, if v == 9000 { u32::MAX } else { v }));
        let mut got = Vec::new();
        while let Some(e) = q.pop() {
            got.push(e);
        }
        assert_eq!(got, expect);
        assert_eq!(q.cancelled(), 1667);
        assert!(q.is_empty());
    }

    // A sweep runs once cancelled keys are half of all, and the calendar
    // then holds only live keys.
    #[test]
    fn sweep_runs_when_cancelled_keys_are_half() {
        let mut q = EventQueue::new();
        let handles: Vec<Handle> = (0..4000u64)
            .map(|i| q.push(Instant::from_nanos(i), i))
            .collect();
        for &h in &handles[..2001] {
            q.cancel(h);
        }
        assert_eq!(q.keys.len(), 1999);
        assert_eq!(q.cancelled(), 2001);
        assert_eq!(q.pop(), Some((Instant::from_nanos(2001), 2001)));
    }

    #[test]
    #[should_panic(expected = "not pending")]
    fn cancelling_a_popped_event_panics() {
        let mut q = EventQueue::new();
        let h = q.push(Instant::ZERO, 1u8);
        q.pop();
        q.cancel(h);
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
