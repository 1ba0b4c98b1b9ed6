//! One-way latency between `thinstream send` and `thinstream listen` on one
//! host (design: docs/one-way.md).
//!
//! * Each data message carries a header ([`PPID_DATA`]): its id, its send
//!   time on `CLOCK_MONOTONIC` (one clock for every process of the host) and
//!   the sender's *retransmission news*: a watermark `w` (every message below
//!   it is final at the sender: acknowledged or abandoned) and, for final
//!   messages that needed retransmissions, `(id, retransmissions)` pairs, as
//!   many as fit in the message's own padding. Messages keep their size; the
//!   news costs no packet.
//! * The receiver ([`Joiner`]) computes each message's delivery latency
//!   when it is delivered and files it under its retransmission count as
//!   soon as the news tells it; it keeps only messages delivered and not yet
//!   filed (bounded by what is in flight) and five histograms.
//! * After the workload the sender sends the rest of the news ([`End`],
//!   [`PPID_CONTROL`]); the receiver answers with its histograms
//!   ([`Results`]), so `send --json` holds the whole one-way result.

#![allow(
    clippy::disallowed_methods,
    reason = "one-way latency reads the OS monotonic clock"
)]

use std::collections::{BTreeMap, BTreeSet, HashMap};

use hdrhistogram::Histogram;
use thinstream_metrics::{LatencyMs, RetransmissionRow};

/// Payload protocol identifier of one-way data messages ("TSO1").
pub(crate) const PPID_DATA: u32 = 0x5453_4f31;
/// Payload protocol identifier of the end-of-run exchange ("TSOC").
pub(crate) const PPID_CONTROL: u32 = 0x5453_4f43;
/// Header bytes of a data message (messages are at least this long).
pub(crate) const HEADER: usize = 26;
const VERSION: u8 = 1;
/// Bytes per `(id, retransmissions)` pair.
const PAIR: usize = 9;
/// Latencies are recorded in microseconds, 3 significant digits (relative
/// error at most 0.1%); mean, min and max are exact (nanoseconds).
const SIGFIG: u8 = 3;
/// Largest bytes of one control message.
const CONTROL_CHUNK: usize = 60_000;

/// Now on `CLOCK_MONOTONIC`, in nanoseconds.
pub(crate) fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The parsed header of a data message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DataHeader {
    pub(crate) id: u64,
    pub(crate) sent_ns: u64,
    pub(crate) w: u64,
    pub(crate) news: Vec<(u64, u8)>,
}

impl DataHeader {
    pub(crate) fn parse(b: &[u8]) -> Option<DataHeader> {
        if b.len() < HEADER || b[0] != VERSION {
            return None;
        }
        let n = usize::from(b[1]);
        if b.len() < HEADER + n * PAIR {
            return None;
        }
        let news = (0..n)
            .map(|i| {
                let at = HEADER + i * PAIR;
                Some((u64_at(b, at)?, b[at + 8]))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(DataHeader {
            id: u64_at(b, 2)?,
            sent_ns: u64_at(b, 10)?,
            w: u64_at(b, 18)?,
            news,
        })
    }
}

/// The sender's side of the news: final messages that needed
/// retransmissions and have not been told yet, and the watermark.
#[derive(Debug, Default)]
pub(crate) struct News {
    untold: std::collections::VecDeque<(u64, u8)>,
    w: u64,
    /// Most untold pairs held at once.
    pub(crate) max_untold: usize,
}

impl News {
    /// Message `id` is final after `retransmissions` retransmissions.
    pub(crate) fn finished(&mut self, id: u64, retransmissions: u32) {
        if retransmissions > 0 {
            self.untold.push_back((id, retransmissions.min(255) as u8));
            self.max_untold = self.max_untold.max(self.untold.len());
        }
    }

    /// Every message below `w` is final (and reported to [`Self::finished`]).
    pub(crate) fn set_watermark(&mut self, w: u64) {
        self.w = self.w.max(w);
    }

    /// A data message of `size` bytes (at least [`HEADER`]) for `id` sent
    /// at `sent_ns`, carrying as much news as fits.
    pub(crate) fn message(&mut self, id: u64, sent_ns: u64, size: usize) -> Vec<u8> {
        let size = size.max(HEADER);
        let n = ((size - HEADER) / PAIR).min(255).min(self.untold.len());
        let mut b = Vec::with_capacity(size);
        b.push(VERSION);
        b.push(n as u8);
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&sent_ns.to_le_bytes());
        let told: Vec<(u64, u8)> = self.untold.drain(..n).collect();
        // The watermark may only cover messages whose news is told by now.
        let w = self
            .untold
            .front()
            .map_or(self.w, |(id, _)| self.w.min(*id));
        b.extend_from_slice(&w.to_le_bytes());
        for (id, r) in told {
            b.extend_from_slice(&id.to_le_bytes());
            b.push(r);
        }
        let mut fill = (id as u8).wrapping_mul(31);
        while b.len() < size {
            b.push(fill);
            fill = fill.wrapping_add(7);
        }
        b
    }

    /// The end-of-run messages: everything untold, the watermark `total`.
    pub(crate) fn end(&mut self, total: u64) -> Vec<Vec<u8>> {
        let per = (CONTROL_CHUNK - 14) / PAIR;
        let mut out = Vec::new();
        loop {
            let n = per.min(self.untold.len());
            let last = n == self.untold.len();
            let mut b = Vec::with_capacity(14 + n * PAIR);
            b.push(b'E');
            b.push(u8::from(last));
            b.extend_from_slice(&total.to_le_bytes());
            b.extend_from_slice(&(n as u32).to_le_bytes());
            for (id, r) in self.untold.drain(..n) {
                b.extend_from_slice(&id.to_le_bytes());
                b.push(r);
            }
            out.push(b);
            if last {
                return out;
            }
        }
    }
}

/// One end-of-run message from the sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct End {
    pub(crate) last: bool,
    pub(crate) total: u64,
    pub(crate) news: Vec<(u64, u8)>,
}

impl End {
    pub(crate) fn parse(b: &[u8]) -> Option<End> {
        if b.len() < 14 || b[0] != b'E' {
            return None;
        }
        let n = u32::from_le_bytes(b[10..14].try_into().ok()?) as usize;
        if b.len() != 14 + n.checked_mul(PAIR)? {
            return None;
        }
        Some(End {
            last: b[1] == 1,
            total: u64_at(b, 2)?,
            news: (0..n)
                .map(|i| {
                    let at = 14 + i * PAIR;
                    Some((u64_at(b, at)?, b[at + 8]))
                })
                .collect::<Option<Vec<_>>>()?,
        })
    }
}

/// Latencies of one group: an HDR histogram (µs) plus exact count, sum,
/// min and max (ns).
#[derive(Clone, Debug)]
pub(crate) struct Group {
    hist: Histogram<u32>,
    pub(crate) count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
}

impl Default for Group {
    fn default() -> Self {
        let mut hist =
            Histogram::new_with_bounds(1, 10_000_000, SIGFIG).expect("valid histogram bounds");
        hist.auto(true);
        Group {
            hist,
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }
}

impl Group {
    pub(crate) fn record(&mut self, ns: u64) {
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        // Auto-resizing: recording cannot fail short of u64::MAX µs.
        let _ = self.hist.record((ns / 1000).max(1));
    }

    pub(crate) fn merge(&mut self, o: &Group) {
        self.count += o.count;
        self.sum_ns += o.sum_ns;
        self.min_ns = self.min_ns.min(o.min_ns);
        self.max_ns = self.max_ns.max(o.max_ns);
        let _ = self.hist.add(&o.hist);
    }

    /// Quantile `q` (0..=1) in ms: the histogram's value (upper edge of its
    /// bucket), never above the exact max.
    pub(crate) fn quantile_ms(&self, q: f64) -> Option<f64> {
        (self.count > 0).then(|| {
            let us = self.hist.value_at_quantile(q);
            (us as f64 / 1e3).min(self.max_ns as f64 / 1e6)
        })
    }

    pub(crate) fn mean_ms(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64 / 1e6)
    }

    pub(crate) fn min_ms(&self) -> Option<f64> {
        (self.count > 0).then(|| self.min_ns as f64 / 1e6)
    }

    pub(crate) fn max_ms(&self) -> Option<f64> {
        (self.count > 0).then(|| self.max_ns as f64 / 1e6)
    }

    /// The summary's latency distribution.
    pub(crate) fn latency_ms(&self) -> Option<LatencyMs> {
        Some(LatencyMs {
            mean: self.mean_ms()?,
            p50: self.quantile_ms(0.5)?,
            p90: self.quantile_ms(0.9)?,
            p99: self.quantile_ms(0.99)?,
            p999: self.quantile_ms(0.999)?,
            max: self.max_ms()?,
        })
    }

    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.count.to_le_bytes());
        b.extend_from_slice(&(self.sum_ns.min(u128::from(u64::MAX)) as u64).to_le_bytes());
        b.extend_from_slice(&self.min_ns.to_le_bytes());
        b.extend_from_slice(&self.max_ns.to_le_bytes());
        let buckets: Vec<(u64, u64)> = self
            .hist
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), u64::from(v.count_at_value())))
            .collect();
        b.extend_from_slice(&(buckets.len() as u32).to_le_bytes());
        for (v, c) in buckets {
            b.extend_from_slice(&v.to_le_bytes());
            b.extend_from_slice(&c.to_le_bytes());
        }
    }

    fn decode(b: &[u8], at: &mut usize) -> Option<Group> {
        let mut g = Group::default();
        let next = |at: &mut usize| {
            let v = u64_at(b, *at);
            *at += 8;
            v
        };
        g.count = next(at)?;
        g.sum_ns = u128::from(next(at)?);
        g.min_ns = next(at)?;
        g.max_ns = next(at)?;
        let n = u32::from_le_bytes(b.get(*at..*at + 4)?.try_into().ok()?);
        *at += 4;
        for _ in 0..n {
            let v = next(at)?;
            let c = next(at)?;
            g.hist
                .record_n(v, u32::try_from(c).unwrap_or(u32::MAX))
                .ok()?;
        }
        Some(g)
    }
}

/// What the receiver measured, returned to the sender at the end.
#[derive(Clone, Debug, Default)]
pub(crate) struct Results {
    /// Data messages delivered (distinct ids).
    pub(crate) delivered: u64,
    /// Data messages whose id had been delivered before.
    pub(crate) duplicates: u64,
    /// Messages with the data ppid but a header that does not parse.
    pub(crate) malformed: u64,
    /// Delivered messages never filed (no news about them arrived).
    pub(crate) unjoined: u64,
    /// Most delivered-but-unfiled messages held at once (the join's memory).
    pub(crate) max_pending: u64,
    /// Ordered messages delivered after a later message of their stream.
    pub(crate) out_of_order: u64,
    /// By retransmission count: 0, 1, 2, 3 or more.
    pub(crate) groups: [Group; 4],
}

impl Results {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = vec![b'R', 1];
        for v in [
            self.delivered,
            self.duplicates,
            self.malformed,
            self.unjoined,
            self.max_pending,
            self.out_of_order,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for g in &self.groups {
            g.encode(&mut b);
        }
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Results> {
        if b.len() < 2 || b[0] != b'R' || b[1] != 1 {
            return None;
        }
        let mut at = 2;
        let mut next = || {
            let v = u64_at(b, at);
            at += 8;
            v
        };
        let mut r = Results {
            delivered: next()?,
            duplicates: next()?,
            malformed: next()?,
            unjoined: next()?,
            max_pending: next()?,
            out_of_order: next()?,
            ..Results::default()
        };
        for g in &mut r.groups {
            *g = Group::decode(b, &mut at)?;
        }
        (at == b.len()).then_some(r)
    }

    /// All groups together.
    pub(crate) fn all(&self) -> Group {
        let mut all = Group::default();
        for g in &self.groups {
            all.merge(g);
        }
        all
    }

    /// The four rows of `by_retransmissions`, as `thinstream run` writes them.
    pub(crate) fn rows(&self) -> Vec<RetransmissionRow> {
        self.groups
            .iter()
            .enumerate()
            .map(|(i, g)| RetransmissionRow {
                retransmissions: i as u32,
                or_more: i == 3,
                count: g.count,
                mean_ms: g.mean_ms(),
                p50_ms: g.quantile_ms(0.5),
                p99_ms: g.quantile_ms(0.99),
                max_ms: g.max_ms(),
            })
            .collect()
    }
}

/// One filed message (for `listen --records`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Filed {
    pub(crate) id: u64,
    pub(crate) latency_ns: u64,
    pub(crate) retransmissions: u8,
}

/// The receiver's join of delivery latencies with the sender's news.
///
/// Memory: `pending` (delivered, retransmission count not known yet),
/// `known` (news about messages not delivered yet), `above` (ids delivered
/// past the first gap) and `announced` (watermarks waiting for the
/// messages before them) hold only what is in flight between the two ends;
/// each entry is dropped once filed. A message that is never delivered
/// (abandoned under partial reliability) holds back `above` and
/// `announced` until the end of the run.
#[derive(Debug, Default)]
pub(crate) struct Joiner {
    /// Every id below is delivered.
    d: u64,
    above: BTreeSet<u64>,
    /// Watermark carried by message `m` → applied once every message up
    /// to `m` was delivered (so all news sent before it is in).
    announced: BTreeMap<u64, u64>,
    w: u64,
    pending: BTreeMap<u64, u64>,
    known: HashMap<u64, u8>,
    results: Results,
    filed: Vec<Filed>,
    keep_filed: bool,
    /// Highest id delivered per stream (ordered messages).
    last_per_stream: BTreeMap<u16, u64>,
}

impl Joiner {
    /// `keep_filed`: collect every filed message for
    /// [`Self::drain_filed`] (records to a file).
    pub(crate) fn new(keep_filed: bool) -> Joiner {
        Joiner {
            keep_filed,
            ..Joiner::default()
        }
    }

    /// Entries held now (the bounded-memory check).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.pending.len() + self.known.len() + self.above.len() + self.announced.len()
    }

    fn file(&mut self, id: u64, latency_ns: u64, r: u8) {
        self.results.groups[usize::from(r).min(3)].record(latency_ns);
        if self.keep_filed {
            self.filed.push(Filed {
                id,
                latency_ns,
                retransmissions: r,
            });
        }
    }

    fn news(&mut self, news: &[(u64, u8)]) {
        for &(id, r) in news {
            match self.pending.remove(&id) {
                Some(lat) => self.file(id, lat, r),
                None => {
                    // Already filed (duplicate news) or not delivered yet.
                    if id >= self.d && !self.above.contains(&id) {
                        self.known.insert(id, r);
                    }
                }
            }
        }
    }

    fn advance(&mut self, w: u64) {
        if w <= self.w {
            return;
        }
        self.w = w;
        let below: Vec<u64> = self.pending.range(..w).map(|(id, _)| *id).collect();
        for id in below {
            if let Some(lat) = self.pending.remove(&id) {
                self.file(id, lat, 0);
            }
        }
    }

    /// A data message delivered at `now_ns` on `stream` (`ordered`: sent
    /// ordered, so ids must grow within the stream); `None` if its header is
    /// bad.
    pub(crate) fn on_data(
        &mut self,
        payload: &[u8],
        now_ns: u64,
        stream: u16,
        ordered: bool,
    ) -> Option<()> {
        let Some(h) = DataHeader::parse(payload) else {
            self.results.malformed += 1;
            return None;
        };
        if h.id < self.d || self.above.contains(&h.id) {
            self.results.duplicates += 1;
            return Some(());
        }
        if ordered {
            let last = self.last_per_stream.entry(stream).or_insert(h.id);
            if h.id < *last {
                self.results.out_of_order += 1;
            }
            *last = (*last).max(h.id);
        }
        self.results.delivered += 1;
        self.above.insert(h.id);
        while self.above.remove(&self.d) {
            self.d += 1;
        }
        self.news(&h.news);
        let lat = now_ns.saturating_sub(h.sent_ns);
        if let Some(r) = self.known.remove(&h.id) {
            self.file(h.id, lat, r);
        } else if h.id < self.w {
            self.file(h.id, lat, 0);
        } else {
            self.pending.insert(h.id, lat);
            self.results.max_pending = self.results.max_pending.max(self.pending.len() as u64);
        }
        self.announced
            .entry(h.id)
            .and_modify(|w| *w = (*w).max(h.w))
            .or_insert(h.w);
        let ready: Vec<u64> = self.announced.range(..self.d).map(|(m, _)| *m).collect();
        let mut w = self.w;
        for m in ready {
            if let Some(x) = self.announced.remove(&m) {
                w = w.max(x);
            }
        }
        self.advance(w);
        Some(())
    }

    /// An end-of-run message; after the last one every delivered message is
    /// filed (messages without news count as unjoined).
    pub(crate) fn on_end(&mut self, end: &End) {
        self.news(&end.news);
        if end.last {
            self.advance(end.total);
            self.announced.clear();
            let rest = std::mem::take(&mut self.pending);
            self.results.unjoined += rest.len() as u64;
            self.known.clear();
        }
    }

    pub(crate) fn results(&self) -> &Results {
        &self.results
    }

    pub(crate) fn drain_filed(&mut self) -> std::vec::Drain<'_, Filed> {
        self.filed.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_news_fit_the_padding() {
        let mut n = News::default();
        for id in 0..20 {
            n.finished(id, u32::from(id % 3 == 0));
        }
        n.set_watermark(20);
        // 100 bytes: (100 - 26) / 9 = 8 pairs fit.
        let m = n.message(20, 12345, 100);
        assert_eq!(m.len(), 100);
        let h = DataHeader::parse(&m).unwrap();
        assert_eq!((h.id, h.sent_ns), (20, 12345));
        assert_eq!(
            h.news.len(),
            7,
            "7 messages of 0..20 needed retransmissions"
        );
        assert_eq!(h.w, 20);
        // Small messages grow to the header; news that does not fit holds
        // the watermark back.
        let mut n = News::default();
        n.finished(3, 2);
        n.set_watermark(10);
        let m = n.message(11, 1, 10);
        assert_eq!(m.len(), HEADER);
        let h = DataHeader::parse(&m).unwrap();
        assert!(h.news.is_empty());
        assert_eq!(h.w, 3, "message 3's news is untold");
        let ends = n.end(12);
        assert_eq!(ends.len(), 1);
        let e = End::parse(&ends[0]).unwrap();
        assert_eq!((e.last, e.total, e.news.clone()), (true, 12, vec![(3, 2)]));
        assert!(DataHeader::parse(&[1, 0, 0]).is_none());
        assert!(End::parse(b"E\x01").is_none());
    }

    #[test]
    fn join_files_every_message_once_and_holds_only_what_is_in_flight() {
        // Sender side: messages 0..1000, every 10th needs 1 retransmission,
        // every 100th 3; a message is final 5 messages after it was sent,
        // and is delivered in order (retransmitted ones 3 messages late).
        let mut news = News::default();
        let mut j = Joiner::new(true);
        let mut in_transit: Vec<(u64, Vec<u8>, u64)> = Vec::new(); // (deliver at step, payload, sent)
        let rtx = |id: u64| -> u32 {
            if id.is_multiple_of(100) {
                3
            } else {
                u32::from(id.is_multiple_of(10))
            }
        };
        let mut max_held = 0;
        let mut filed = Vec::new();
        for step in 0..1010u64 {
            if step < 1000 {
                let id = step;
                if id >= 5 {
                    news.finished(id - 5, rtx(id - 5));
                    news.set_watermark(id - 4);
                }
                let delay = if rtx(id) > 0 { 3 } else { 0 };
                in_transit.push((step + delay, news.message(id, id * 1000, 100), id));
            }
            // Deliver in id order what is due (ordered stream).
            in_transit.sort_by_key(|(_, _, id)| *id);
            while in_transit.first().is_some_and(|(at, _, _)| *at <= step) {
                let (_, p, id) = in_transit.remove(0);
                j.on_data(
                    &p,
                    id * 1000 + 20_000_000 + u64::from(rtx(id)) * 1_000_000,
                    0,
                    true,
                )
                .unwrap();
            }
            max_held = max_held.max(j.held());
            filed.extend(j.drain_filed());
        }
        for e in news.end(1000) {
            j.on_end(&End::parse(&e).unwrap());
        }
        filed.extend(j.drain_filed());
        assert_eq!(j.held(), 0, "nothing held after the end");
        assert!(max_held <= 20, "held entries stay bounded: {max_held}");
        let r = j.results();
        assert_eq!(r.delivered, 1000);
        assert_eq!(r.unjoined, 0);
        assert_eq!(r.out_of_order, 0);
        assert_eq!(filed.len(), 1000);
        for f in &filed {
            assert_eq!(u32::from(f.retransmissions), rtx(f.id), "message {}", f.id);
            assert_eq!(f.latency_ns, 20_000_000 + u64::from(rtx(f.id)) * 1_000_000);
        }
        let counts: Vec<u64> = r.groups.iter().map(|g| g.count).collect();
        assert_eq!(counts, [900, 90, 0, 10]);
        // The results survive the wire.
        let back = Results::decode(&r.encode()).unwrap();
        assert_eq!(back.delivered, 1000);
        let rows = back.rows();
        assert_eq!(rows[1].count, 90);
        assert!(
            (rows[1].p50_ms.unwrap() - 21.0).abs() < 0.03,
            "{:?}",
            rows[1]
        );
        assert!((back.all().mean_ms().unwrap() - r.all().mean_ms().unwrap()).abs() < 1e-9);
        assert!(Results::decode(&r.encode()[..40]).is_none());
    }

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = mono_ns();
        let b = mono_ns();
        assert!(b >= a && a > 0);
    }
}
