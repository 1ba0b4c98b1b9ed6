//! The order of the event queue's keys: a calendar (a timing wheel) in front
//! of a small heap, popping keys in exactly the order a heap would.
//!
//! A key is `(time, word)` with unique words, so "the smallest key" is one
//! well-defined order whatever holds the keys; this structure only changes
//! what a push and a pop touch. With thousands of flows tens of thousands of
//! keys are pending, and a heap's pop walks from the root to a leaf through
//! levels that have left the caches (a miss per level below the first few).
//! Here time is cut into buckets of [`BUCKET_NS`] (about a millisecond):
//!
//! - the keys of the current bucket and earlier (`front`) are a 4-ary heap,
//!   a few hundred keys that stay cached: pops and same-instant pushes
//!   work there;
//! - the keys of the next [`BUCKETS`] buckets (about two seconds, which
//!   holds link delays, application gaps and retransmission timers) are
//!   appended, unordered, to their bucket's vector: a push touches the end of
//!   one vector, usually cached because the bucket was pushed to a moment ago;
//! - keys further out (heartbeats, backed-off timers) wait in a second heap
//!   (`far`) and move to their bucket when the window reaches them.
//!
//! When the front empties, the next occupied bucket (found in a bitmap)
//! becomes the front: its vector is made a heap in one linear pass. The old
//! front's storage goes on a stack of spare vectors, and a bucket that
//! receives its first key takes the spare freed last (still cached, where a
//! vector left in its bucket would have waited two seconds of simulated
//! time): steady state allocates nothing and touches few lines.
//!
//! Invariant: every key in `front` is in a bucket `<= cursor`; every key in
//! `wheel` is in a bucket `b` with `cursor < b < cursor + BUCKETS`, stored
//! at `b % BUCKETS`; every key in `far` is in a bucket `>= cursor +
//! BUCKETS`. So while `front` is non-empty its smallest key is the
//! smallest of all.

use dary_heap::QuaternaryHeap;
use std::cmp::Reverse;
use thinstream_base::Instant;

/// log2 of a bucket's width in nanoseconds (2^20 ns = 1.048576 ms).
const BUCKET_SHIFT: u32 = 20;
/// A bucket's width in nanoseconds.
#[cfg(test)]
const BUCKET_NS: u64 = 1 << BUCKET_SHIFT;
/// Buckets in the window (2048: 2.15 s of simulated time).
pub(crate) const BUCKETS: usize = 2048;
const WORDS: usize = BUCKETS / 64;

/// A queue key: the time, then a word unique to the key.
pub(crate) type Key = (Instant, u64);

fn bucket(key: &Key) -> u64 {
    key.0.as_nanos() >> BUCKET_SHIFT
}

/// Keys, popped smallest first.
#[derive(Debug)]
pub(crate) struct Calendar {
    front: QuaternaryHeap<Reverse<Key>>,
    wheel: Vec<Vec<Reverse<Key>>>,
    /// Bit `i`: `wheel[i]` is not empty.
    occupied: [u64; WORDS],
    far: QuaternaryHeap<Reverse<Key>>,
    /// Empty vectors with capacity, the last freed on top.
    spare: Vec<Vec<Reverse<Key>>>,
    /// The bucket of the front.
    cursor: u64,
    len: usize,
}

impl Default for Calendar {
    fn default() -> Self {
        Calendar::new()
    }
}

impl Calendar {
    pub(crate) fn new() -> Self {
        Calendar {
            front: QuaternaryHeap::new(),
            wheel: (0..BUCKETS).map(|_| Vec::new()).collect(),
            occupied: [0; WORDS],
            far: QuaternaryHeap::new(),
            spare: Vec::new(),
            cursor: 0,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn push(&mut self, key: Key) {
        self.len += 1;
        self.place(key);
    }

    fn place(&mut self, key: Key) {
        let b = bucket(&key);
        if b <= self.cursor {
            self.front.push(Reverse(key));
        } else if b - self.cursor < BUCKETS as u64 {
            let i = (b % BUCKETS as u64) as usize;
            let keys = &mut self.wheel[i];
            if keys.capacity() == 0 {
                if let Some(spare) = self.spare.pop() {
                    *keys = spare;
                }
            }
            keys.push(Reverse(key));
            self.occupied[i / 64] |= 1 << (i % 64);
        } else {
            self.far.push(Reverse(key));
        }
    }

    /// Removes the smallest key. The next smallest is then at the front
    /// (for [`Calendar::front`]) unless a smaller one is pushed.
    pub(crate) fn pop(&mut self) -> Option<Key> {
        if self.front.is_empty() {
            self.advance();
        }
        let Reverse(key) = self.front.pop()?;
        self.len -= 1;
        if self.front.is_empty() {
            self.advance();
        }
        Some(key)
    }

    /// The front heap's keys, smallest first at index 0 (a max-heap of
    /// `Reverse` keys): what pops next, and its children.
    pub(crate) fn front(&self) -> &[Reverse<Key>] {
        self.front.as_slice()
    }

    /// Makes the next occupied bucket the front (the front is empty).
    fn advance(&mut self) {
        debug_assert!(self.front.is_empty());
        if self.len == 0 {
            return;
        }
        let next = match self.next_occupied() {
            Some(d) => self.cursor + d,
            None => {
                // Nothing in the window: jump to the earliest far key.
                let Some(Reverse(k)) = self.far.peek() else {
                    unreachable!("{} keys counted but none held", self.len)
                };
                bucket(k)
            }
        };
        self.cursor = next;
        let i = (next % BUCKETS as u64) as usize;
        if self.occupied[i / 64] & (1 << (i % 64)) != 0 {
            self.occupied[i / 64] &= !(1 << (i % 64));
            let keys = std::mem::take(&mut self.wheel[i]);
            let spare = std::mem::replace(&mut self.front, QuaternaryHeap::from(keys));
            self.free(spare.into_vec());
        }
        // The window's end moved: far keys now inside it go to their
        // bucket (or to the front, for the cursor's own bucket).
        while let Some(Reverse(k)) = self.far.peek() {
            if bucket(k) - self.cursor >= BUCKETS as u64 {
                break;
            }
            let Some(Reverse(k)) = self.far.pop() else {
                break;
            };
            self.place(k);
        }
        debug_assert!(!self.front.is_empty());
    }

    /// Keeps an emptied vector's storage for the next bucket to fill.
    fn free(&mut self, keys: Vec<Reverse<Key>>) {
        debug_assert!(keys.is_empty());
        if keys.capacity() > 0 {
            self.spare.push(keys);
        }
    }

    /// Distance from the cursor to the nearest occupied bucket after it
    /// within the window.
    fn next_occupied(&self) -> Option<u64> {
        let start = ((self.cursor + 1) % BUCKETS as u64) as usize;
        // Scan the bitmap from `start` round to `start - 1`; WORDS + 1
        // words cover the wrap (the first word is read twice, masked).
        for step in 0..=WORDS {
            let w = (start / 64 + step) % WORDS;
            let mut bits = self.occupied[w];
            if step == 0 {
                bits &= !0u64 << (start % 64);
            } else if step == WORDS {
                bits &= !(!0u64 << (start % 64));
            }
            if bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                let d = (i + BUCKETS - start) % BUCKETS + 1;
                return Some(d as u64);
            }
        }
        None
    }

    /// Keeps the keys for which `keep` is true; the order of the rest is
    /// unchanged.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Key) -> bool) {
        self.front.retain(|Reverse(k)| keep(k));
        self.far.retain(|Reverse(k)| keep(k));
        let mut len = self.front.len() + self.far.len();
        for i in 0..BUCKETS {
            let keys = &mut self.wheel[i];
            if keys.is_empty() {
                continue;
            }
            keys.retain(|Reverse(k)| keep(k));
            len += keys.len();
            if keys.is_empty() {
                self.occupied[i / 64] &= !(1 << (i % 64));
                let keys = std::mem::take(keys);
                self.free(keys);
            }
        }
        self.len = len;
        if self.front.is_empty() {
            self.advance();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn lcg(x: &mut u64) -> u64 {
        *x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *x >> 11
    }

    // Against an ordered set, under the simulator's pattern (pushes at or
    // after the last popped time) with every distance the structure
    // distinguishes: the same instant, inside the current bucket, the
    // window, its edge, far beyond it, and after an idle jump.
    #[test]
    fn pops_in_key_order_like_an_ordered_set() {
        for seed in 1..=20u64 {
            let mut x = seed;
            let mut cal = Calendar::new();
            let mut set = BTreeSet::new();
            let mut now = 0u64;
            let mut word = 0u64;
            for step in 0..20_000 {
                let r = lcg(&mut x);
                if r % 5 < 3 || set.is_empty() {
                    let ahead = match lcg(&mut x) % 8 {
                        0 => 0,
                        1 => lcg(&mut x) % BUCKET_NS,
                        2 => lcg(&mut x) % (BUCKET_NS * BUCKETS as u64),
                        3 => BUCKET_NS * BUCKETS as u64 - 1 + lcg(&mut x) % 3 * BUCKET_NS,
                        4 => lcg(&mut x) % (60 * 1_000_000_000),
                        5 => lcg(&mut x) % 1_000_000,
                        6 => 200_000_000,
                        _ => lcg(&mut x) % 100_000_000,
                    };
                    let key = (Instant::from_nanos(now + ahead), word);
                    word += 1;
                    cal.push(key);
                    set.insert(key);
                } else {
                    let want = set.pop_first();
                    let got = cal.pop();
                    assert_eq!(got, want, "seed {seed} step {step}");
                    if let Some((at, _)) = got {
                        now = at.as_nanos();
                    }
                    if let Some(&first) = set.first() {
                        assert_eq!(cal.front().first().map(|r| r.0), Some(first));
                    }
                }
                assert_eq!(cal.len(), set.len());
            }
            while let Some(want) = set.pop_first() {
                assert_eq!(cal.pop(), Some(want));
            }
            assert_eq!(cal.pop(), None);
            assert_eq!(cal.len(), 0);
        }
    }

    // Retain drops exactly the keys refused, wherever they are held, and
    // the rest still pop in order.
    #[test]
    fn retain_keeps_the_order_of_the_rest() {
        let mut cal = Calendar::new();
        let mut set = BTreeSet::new();
        let mut x = 7u64;
        for w in 0..5000u64 {
            let key = (Instant::from_nanos(lcg(&mut x) % 10_000_000_000), w);
            cal.push(key);
            set.insert(key);
        }
        for _ in 0..100 {
            let k = cal.pop();
            assert_eq!(k, set.pop_first());
        }
        cal.retain(|k| k.1 % 3 != 0);
        set.retain(|k| k.1 % 3 != 0);
        assert_eq!(cal.len(), set.len());
        let mut got = Vec::new();
        while let Some(k) = cal.pop() {
            got.push(k);
        }
        assert_eq!(got, set.into_iter().collect::<Vec<_>>());
    }

    // Retaining nothing leaves an empty calendar that works afterwards.
    #[test]
    fn retain_of_nothing_empties_it() {
        let mut cal = Calendar::new();
        for w in 0..100u64 {
            cal.push((Instant::from_millis(w * 37), w));
        }
        cal.retain(|_| false);
        assert_eq!(cal.len(), 0);
        assert_eq!(cal.pop(), None);
        cal.push((Instant::from_secs(100), 1));
        cal.push((Instant::from_secs(99), 2));
        assert_eq!(cal.pop(), Some((Instant::from_secs(99), 2)));
        assert_eq!(cal.pop(), Some((Instant::from_secs(100), 1)));
    }
}
