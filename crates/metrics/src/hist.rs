//! Latency distributions in bounded memory: [`LatencyHistogram`].
//!
//! A histogram per retransmission group (0, 1, 2, 3 or more
//! retransmissions) with the bucket layout of an HDR histogram of
//! [`HISTOGRAM_SIGFIG`] significant decimal digits, plus the exact count,
//! sum, minimum and maximum of each group. What it gives:
//!
//! * exact: counts, the mean (from the exact sum), minimum and maximum;
//! * a percentile (nearest rank, as [`crate::percentile_sorted`]): the
//!   highest value of the histogram bucket that holds the sample of that
//!   rank, clamped to the exact maximum. Buckets are 1 ns wide below
//!   2048 ns and at most `v / 1024` wide above, so the value reported is
//!   never below the exact percentile `v` and at most `v / 1024` (0.098 %)
//!   above it. A histogram whose values were shifted by `d` after
//!   recording ([`LatencyHistogram::shifted_up`], `shifted_down`) keeps
//!   the bucket width of the unshifted value and is bucketed again: at
//!   most `(2·v + d) / 1024` above. (The streaming analysis records
//!   delivery latencies with the smallest one-way delay seen so far
//!   removed and shifts only when a smaller one turns up later, by the
//!   difference: rare, and small.)
//!
//! Memory: per chunk of 64 neighbouring buckets (a sixteenth of a power
//! of two) that holds a sample, 64 bytes of one-byte counters while every
//! count of the chunk stays below 256, then 256 bytes of 4-byte counters,
//! whatever the number of samples. Chunks are allocated when first used,
//! rather than the `hdrhistogram` crate's one dense array: that array holds every
//! bucket from 0 ns up to the largest value, about 128 KiB per group for
//! latencies of seconds, where one flow's latencies are spread thinly
//! over some tens of chunks. With a thousand flows the dense arrays took
//! 480 KiB per flow. The layout is the crate's, checked against it bucket
//! by bucket in the tests, so every reported value is the one the crate
//! gives.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thinstream_base::Duration;

use crate::stats::LatencyStats;

/// Significant decimal digits of every latency histogram: the bucket
/// layout of an HDR histogram with this precision (2048 one-nanosecond
/// buckets below 2048 ns, then 1024 buckets per power of two).
pub const HISTOGRAM_SIGFIG: u8 = 3;

/// Bits of a value below which every bucket is 1 ns wide (2^11 = 2048).
const SUB_BITS: u32 = 11;
/// Buckets per power of two above 2048 ns.
const HALF: u64 = 1 << (SUB_BITS - 1);

/// The bucket of `v`: buckets are numbered in ascending order of value.
/// A value of `s + 11` significant bits (`s >= 1`) is cut to its top 11
/// bits: bucket `1024·s + (v >> s)`, `2^s` ns wide.
#[inline]
fn bucket_of(v: u64) -> u32 {
    let shift = (64 - (v | ((1 << SUB_BITS) - 1)).leading_zeros()) - SUB_BITS;
    (u64::from(shift) * HALF + (v >> shift)) as u32
}

/// The highest value bucket `b` holds (what a percentile reports).
#[inline]
fn bucket_top(b: u32) -> u64 {
    let b = u64::from(b);
    if b < 2 * HALF {
        return b;
    }
    let shift = b / HALF - 1;
    let sub = b - shift * HALF;
    (sub << shift) + ((1u64 << shift) - 1)
}

/// Buckets per chunk of counters: a sixteenth of a power of two. Smaller
/// chunks hold fewer empty counters but are more to search and allocate:
/// with 4000 flows for 600 s, 16 buckets took 232 MiB of peak RSS, 64
/// took 265 and 256 took 337; at 1000 flows for 1800 s, 16 took 3-8 %
/// more CPU time than 256, 64 within the spread (docs/memory.md; those
/// figures are from 4-byte counters, before [`Counts`] started narrow).
const CHUNK: usize = 64;

/// The counters of one chunk. Most of a flow's chunks hold the rare
/// values of its tail, a few samples each: one byte per counter (one
/// cache line per chunk) until a count passes 255, then four.
#[derive(Clone, Debug)]
enum Counts {
    Narrow(Box<[u8; CHUNK]>),
    Wide(Box<[u32; CHUNK]>),
}

impl Counts {
    fn new() -> Counts {
        Counts::Narrow(Box::new([0; CHUNK]))
    }

    /// Adds `n` to counter `i` (saturating at `u32::MAX`), widening the
    /// chunk when the sum does not fit a byte.
    fn add(&mut self, i: usize, n: u32) {
        match self {
            Counts::Narrow(c) => {
                let sum = u32::from(c[i]).saturating_add(n);
                if let Ok(b) = u8::try_from(sum) {
                    c[i] = b;
                    return;
                }
                let mut w = Box::new([0u32; CHUNK]);
                for (w, &b) in w.iter_mut().zip(c.iter()) {
                    *w = u32::from(b);
                }
                w[i] = sum;
                *self = Counts::Wide(w);
            }
            Counts::Wide(c) => c[i] = c[i].saturating_add(n),
        }
    }

    fn get(&self, i: usize) -> u32 {
        match self {
            Counts::Narrow(c) => u32::from(c[i]),
            Counts::Wide(c) => c[i],
        }
    }
}

#[derive(Clone, Debug)]
struct Group {
    /// Counters of the buckets in use, in chunks of [`CHUNK`] neighbouring
    /// buckets allocated when one of them is first used: `(chunk, counts)`
    /// by chunk, bucket `b` in chunk `b / CHUNK` at `b % CHUNK`. A flow's
    /// latencies fill some tens of chunks (64 or 256 bytes each, see
    /// [`Counts`]), whatever their number.
    chunks: Vec<(u32, Counts)>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Group {
    fn new() -> Group {
        Group {
            chunks: Vec::new(),
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// The counters of chunk `c`, allocated if new.
    fn chunk(&mut self, c: u32) -> &mut Counts {
        let i = match self.chunks.binary_search_by_key(&c, |(k, _)| *k) {
            Ok(i) => i,
            Err(i) => {
                self.chunks.insert(i, (c, Counts::new()));
                i
            }
        };
        &mut self.chunks[i].1
    }

    /// `n` samples into `v`'s bucket only (a bucket's count saturates at
    /// `u32::MAX`; the exact count is `count`).
    fn put(&mut self, v: u64, n: u64) {
        if n == 0 {
            return;
        }
        let b = bucket_of(v) as usize;
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        self.chunk((b / CHUNK) as u32).add(b % CHUNK, n);
    }

    fn record_n(&mut self, nanos: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.put(nanos, n);
        self.count += n;
        self.sum += u128::from(nanos) * u128::from(n);
        self.min = self.min.min(nanos);
        self.max = self.max.max(nanos);
    }

    /// Adds every sample of `o`.
    fn add(&mut self, o: &Group) {
        if o.count == 0 {
            return;
        }
        for (c, counts) in &o.chunks {
            let mine = self.chunk(*c);
            for i in 0..CHUNK {
                let n = counts.get(i);
                if n > 0 {
                    mine.add(i, n);
                }
            }
        }
        self.count += o.count;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// `(highest value of the bucket, count)` of every non-empty bucket, ascending.
    fn buckets(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for (c, counts) in &self.chunks {
            for i in 0..CHUNK {
                let n = counts.get(i);
                if n > 0 {
                    out.push((bucket_top(*c * CHUNK as u32 + i as u32), u64::from(n)));
                }
            }
        }
        out
    }
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    groups: [Group; 4],
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl PartialEq for LatencyHistogram {
    fn eq(&self, o: &Self) -> bool {
        self.groups.iter().zip(&o.groups).all(|(a, b)| {
            (a.count, a.sum, a.min, a.max) == (b.count, b.sum, b.min, b.max)
                && a.buckets() == b.buckets()
        })
    }
}

impl LatencyHistogram {
    pub fn new() -> LatencyHistogram {
        LatencyHistogram {
            groups: [Group::new(), Group::new(), Group::new(), Group::new()],
        }
    }

    /// Records one message's latency; `retransmissions` picks the group (3 = "3 or more").
    pub fn record(&mut self, retransmissions: u32, nanos: u64) {
        self.groups[(retransmissions as usize).min(3)].record_n(nanos, 1);
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (g, o) in self.groups.iter_mut().zip(&other.groups) {
            g.add(o);
        }
    }

    /// Every value moved down by `d` (values below `d` become 0).
    pub fn shifted_down(&self, d: Duration) -> LatencyHistogram {
        self.shifted(d, false)
    }

    /// Every value moved up by `d`.
    pub fn shifted_up(&self, d: Duration) -> LatencyHistogram {
        self.shifted(d, true)
    }

    fn shifted(&self, d: Duration, up: bool) -> LatencyHistogram {
        let d = d.as_nanos();
        let mv = |v: u64| {
            if up {
                v.saturating_add(d)
            } else {
                v.saturating_sub(d)
            }
        };
        let mut out = LatencyHistogram::new();
        for (g, o) in out.groups.iter_mut().zip(&self.groups) {
            for (v, c) in o.buckets() {
                // A bucket's highest value may lie above the exact maximum.
                g.put(mv(v.min(o.max)), c);
            }
            if o.count > 0 {
                g.count = o.count;
                let total = u128::from(d) * u128::from(o.count);
                g.sum = if up {
                    o.sum + total
                } else {
                    o.sum.saturating_sub(total)
                };
                g.min = mv(o.min);
                g.max = mv(o.max);
            }
        }
        out
    }

    /// Samples recorded (all groups).
    pub fn count(&self) -> u64 {
        self.groups.iter().map(|g| g.count).sum()
    }

    /// All groups in one.
    fn pooled(&self) -> Group {
        let mut all = Group::new();
        for g in &self.groups {
            all.add(g);
        }
        all
    }

    /// Statistics of group `i` (0, 1, 2, 3 = "3 or more"), or of all
    /// groups with `None`; `None` when empty.
    pub fn stats(&self, group: Option<usize>) -> Option<LatencyStats> {
        let pooled;
        let g = match group {
            Some(i) => self.groups.get(i)?,
            None => {
                pooled = self.pooled();
                &pooled
            }
        };
        stats_of(g)
    }

    /// The value of rank `rank` (1-based, ascending) over all groups, as a
    /// percentile is reported (see the module documentation).
    pub fn value_at_rank(&self, rank: u64) -> Option<u64> {
        let g = self.pooled();
        at_rank(&g, rank)
    }
}

fn at_rank(g: &Group, rank: u64) -> Option<u64> {
    if g.count == 0 {
        return None;
    }
    let rank = rank.clamp(1, g.count);
    let mut seen = 0u64;
    for (v, c) in g.buckets() {
        seen += c;
        if seen >= rank {
            return Some(v.clamp(g.min, g.max));
        }
    }
    Some(g.max)
}

fn stats_of(g: &Group) -> Option<LatencyStats> {
    if g.count == 0 {
        return None;
    }
    let n = u128::from(g.count);
    // Nearest rank with q in 1/1000 percent, as `percentile_sorted`.
    let at = |milli: u128| {
        let rank = (milli * n).div_ceil(100_000).max(1) as u64;
        Duration::from_nanos(at_rank(g, rank).unwrap_or(g.max))
    };
    Some(LatencyStats {
        count: g.count,
        min: Duration::from_nanos(g.min),
        mean_ns: g.sum as f64 / g.count as f64,
        p50: at(50_000),
        p90: at(90_000),
        p99: at(99_000),
        p999: at(99_900),
        max: Duration::from_nanos(g.max),
    })
}

#[derive(Serialize, Deserialize)]
struct GroupForm {
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
    /// `[highest value of the bucket, count]`, ascending.
    buckets: Vec<(u64, u64)>,
}

impl Serialize for LatencyHistogram {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let groups: Vec<GroupForm> = self
            .groups
            .iter()
            .map(|g| GroupForm {
                count: g.count,
                sum: g.sum,
                min: g.min,
                max: g.max,
                buckets: g.buckets(),
            })
            .collect();
        groups.serialize(s)
    }
}

impl<'de> Deserialize<'de> for LatencyHistogram {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let forms: Vec<GroupForm> = Vec::deserialize(d)?;
        if forms.len() != 4 {
            return Err(serde::de::Error::custom(format!(
                "a latency histogram has 4 retransmission groups, not {}",
                forms.len()
            )));
        }
        let mut out = LatencyHistogram::new();
        for (g, f) in out.groups.iter_mut().zip(forms) {
            for &(v, c) in &f.buckets {
                g.put(v, c);
            }
            g.count = f.count;
            g.sum = f.sum;
            g.min = f.min;
            g.max = f.max;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyStats;

    // Percentiles within the stated bound of the exact ones, never below;
    // counts, mean, min and max exact; a JSON round trip changes nothing.
    #[test]
    fn percentiles_within_the_bound_and_round_trip() {
        let mut h = LatencyHistogram::new();
        let mut exact: Vec<u64> = Vec::new();
        let mut x = 12345u64;
        for i in 0..200_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = match i % 5 {
                0 => 0,
                1 => 200_000_000,
                _ => (x >> 33) % 3_000_000_000,
            };
            h.record(0, v);
            exact.push(v);
        }
        exact.sort_unstable();
        let e = LatencyStats::from_sorted_nanos(&exact).unwrap();
        let s = h.stats(None).unwrap();
        assert_eq!((s.count, s.min, s.max), (e.count, e.min, e.max));
        assert_eq!(s.mean_ns, e.mean_ns);
        for (a, b) in [
            (s.p50, e.p50),
            (s.p90, e.p90),
            (s.p99, e.p99),
            (s.p999, e.p999),
        ] {
            let (a, b) = (a.as_nanos(), b.as_nanos());
            assert!(a >= b && a - b <= b / 1024, "{a} vs exact {b}");
        }
        let json = serde_json::to_string(&h).unwrap();
        let back: LatencyHistogram = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.stats(None), h.stats(None));
        let bad = serde_json::from_str::<LatencyHistogram>("[]").unwrap_err();
        assert!(bad.to_string().contains("4 retransmission groups"), "{bad}");
    }

    // The sparse buckets are the `hdrhistogram` crate's (3 digits): the
    // same (highest value, count) list for values on every bucket edge
    // and spread over the whole range.
    #[test]
    fn buckets_are_those_of_an_hdr_histogram() {
        let mut ours = LatencyHistogram::new();
        let mut hdr = hdrhistogram::Histogram::<u32>::new(HISTOGRAM_SIGFIG).unwrap();
        let mut values = vec![0u64, 1, 2047, 2048, 2049, 4095, 4096, 1 << 40];
        for s in 0..52u32 {
            for d in [0u64, 1, 1023, 1024, 2047] {
                let base = 1024u64 << s;
                values.extend([base + (d << s), (base + (d << s)).saturating_sub(1)]);
            }
        }
        let mut x = 99u64;
        for _ in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            values.push((x >> 20) >> ((x >> 8) % 40));
        }
        for &v in &values {
            ours.record(2, v);
            hdr.record(v).unwrap();
        }
        let theirs: Vec<(u64, u64)> = hdr
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), u64::from(v.count_at_value())))
            .collect();
        assert_eq!(ours.groups[2].buckets(), theirs);
        assert!(theirs.len() > 10_000, "{}", theirs.len());
        // The top of every bucket lies in that bucket, the next value in
        // the next bucket.
        for (top, _) in theirs {
            assert_eq!(bucket_top(bucket_of(top)), top);
            if top < u64::MAX {
                assert_eq!(bucket_of(top + 1), bucket_of(top) + 1);
            }
        }
    }

    // Counters start as one byte and widen when a count passes 255, in
    // recording and in merging, with the counts of the chunk's other
    // buckets kept; a count saturates at u32::MAX (the exact count stays
    // exact).
    #[test]
    fn narrow_counters_widen_without_losing_counts() {
        use std::collections::BTreeMap;
        // Two values in one chunk, one in another.
        let (a, b, far) = (100_000_000u64, 100_000_000 + (1 << 17), 900_000_000u64);
        assert_eq!(bucket_of(a) / CHUNK as u32, bucket_of(b) / CHUNK as u32);
        let mut h = LatencyHistogram::new();
        let mut want: BTreeMap<u64, u64> = BTreeMap::new();
        let mut note = |v: u64, n: u64| *want.entry(bucket_top(bucket_of(v))).or_default() += n;
        for _ in 0..255 {
            h.record(0, a);
            note(a, 1);
        }
        h.record(0, b);
        note(b, 1);
        h.record(0, far);
        note(far, 1);
        let narrow = |h: &LatencyHistogram| {
            h.groups[0]
                .chunks
                .iter()
                .filter(|(_, c)| matches!(c, Counts::Narrow(_)))
                .count()
        };
        assert_eq!(narrow(&h), 2, "255 still fits a byte");
        h.record(0, a);
        note(a, 1);
        assert_eq!(narrow(&h), 1, "the chunk of `a` widened, `far`'s did not");
        let mut other = LatencyHistogram::new();
        for _ in 0..200 {
            other.record(0, b);
            note(b, 1);
        }
        for _ in 0..300 {
            other.record(0, far);
            note(far, 1);
        }
        assert_eq!(
            narrow(&other),
            1,
            "200 at `b` fits a byte, 300 at `far` does not"
        );
        h.merge(&other);
        assert_eq!(narrow(&h), 0, "merging 1 + 300 at `far` widened its chunk");
        let got: BTreeMap<u64, u64> = h.groups[0].buckets().into_iter().collect();
        assert_eq!(got, want);
        assert_eq!(h.count(), 256 + 1 + 1 + 500);
        // Saturation at u32::MAX, through a narrow chunk.
        let mut g = Group::new();
        g.put(a, u64::from(u32::MAX) + 7);
        g.put(a, 3);
        g.put(b, 9);
        assert_eq!(
            g.buckets(),
            vec![
                (bucket_top(bucket_of(a)), u64::from(u32::MAX)),
                (bucket_top(bucket_of(b)), 9)
            ]
        );
    }

    #[test]
    fn shift_keeps_exact_fields_and_bound() {
        let mut h = LatencyHistogram::new();
        for v in [50_000_000u64, 50_000_001, 250_000_000, 1_050_000_000] {
            h.record(1, v);
        }
        let s = h
            .shifted_down(Duration::from_millis(50))
            .stats(Some(1))
            .unwrap();
        assert_eq!(s.min.as_nanos(), 0);
        assert_eq!(s.max.as_nanos(), 1_000_000_000);
        assert_eq!(s.mean_ns, (1.0 + 200_000_000.0 + 1_000_000_000.0) / 4.0);
        let p50 = s.p50.as_nanos();
        assert!((1..=1 + 50_000_001 / 1024).contains(&p50), "{p50}");
        assert!(h.stats(Some(0)).is_none());
    }
}
