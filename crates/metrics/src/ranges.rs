//! A map from disjoint unit ranges to values.
//!
//! Metrics need "when did each unit first arrive / get acked / get
//! delivered" and "how often was each unit sent". For SCTP a unit is a chunk
//! and a per-unit map would do, but for TCP a unit is a byte and a bulk flow
//! has millions of them, so values are kept per maximal range as written,
//! and the number of stored ranges is bounded by twice the number of
//! operations.
//!
//! Storage is one sorted double-ended queue of ranges, found by binary
//! search: a lookup costs `O(log n + k)` with `k` the stored ranges it
//! touches, and an insertion or removal moves the entries between it and
//! the nearer end of the queue. Units are written and forgotten almost in
//! order (a stream's new data at the back, its final messages at the
//! front), so that distance is small, and a thin stream's few ranges sit in
//! one contiguous buffer instead of tree nodes.

use std::collections::VecDeque;
use thinstream_base::trace::Units;

#[derive(Clone, Debug, Default)]
pub(crate) struct RangeMap<V> {
    /// (start, end, value) by start; ranges are disjoint and non-empty, so
    /// their ends are sorted too.
    map: VecDeque<(u64, u64, V)>,
}

impl<V: Copy> RangeMap<V> {
    pub(crate) fn new() -> Self {
        RangeMap {
            map: VecDeque::new(),
        }
    }

    /// Index of the first stored range ending after `unit`.
    fn first_ending_after(&self, unit: u64) -> usize {
        self.map.partition_point(|(_, e, _)| *e <= unit)
    }

    /// Index of the first stored range starting at or after `unit`.
    fn first_starting_from(&self, unit: u64) -> usize {
        self.map.partition_point(|(s, _, _)| *s < unit)
    }

    /// Every stored range overlapping `r`, clipped to `r`, in unit order.
    pub(crate) fn overlapping(&self, r: Units) -> impl Iterator<Item = (Units, V)> + '_ {
        let from = if r.is_empty() {
            self.map.len()
        } else {
            self.first_ending_after(r.start)
        };
        self.map
            .range(from..)
            .take_while(move |(s, _, _)| *s < r.end)
            .map(move |(s, e, v)| (Units::new((*s).max(r.start), (*e).min(r.end)), *v))
    }

    /// Stores `v` for the units of `r` that have no value yet ("first time"
    /// semantics); returns how many units were newly covered.
    pub(crate) fn fill_gaps(&mut self, r: Units, v: V) -> u64 {
        if r.is_empty() {
            return 0;
        }
        if self.map.back().is_none_or(|(_, e, _)| *e <= r.start) {
            // Above every range (new data of an in-order stream).
            self.map.push_back((r.start, r.end, v));
            return r.len();
        }
        let mut i = self.first_ending_after(r.start);
        let mut cursor = r.start;
        let mut added = 0;
        while let Some(&(s, e, _)) = self.map.get(i).filter(|(s, _, _)| *s < r.end) {
            if s > cursor {
                self.map.insert(i, (cursor, s, v));
                added += s - cursor;
                i += 1;
            }
            cursor = cursor.max(e.min(r.end));
            i += 1;
        }
        if cursor < r.end {
            self.map.insert(i, (cursor, r.end, v));
            added += r.end - cursor;
        }
        added
    }

    /// Applies `f` to the value of every unit of `r`, giving units without a
    /// value `init` first. Returns the maximum value over `r` *before* the
    /// update (`init` for units that had none).
    pub(crate) fn update(&mut self, r: Units, init: V, mut f: impl FnMut(&mut V)) -> Option<V>
    where
        V: Ord,
    {
        if r.is_empty() {
            return None;
        }
        if self.map.back().is_none_or(|(_, e, _)| *e <= r.start) {
            // Above every range: one new range from `init`.
            let mut v = init;
            f(&mut v);
            self.map.push_back((r.start, r.end, v));
            return Some(init);
        }
        self.split_at(r.start);
        self.split_at(r.end);
        let mut before_max: Option<V> = None;
        let mut note = |v: V| {
            before_max = Some(match before_max {
                Some(m) if m >= v => m,
                _ => v,
            })
        };
        let mut i = self.first_starting_from(r.start);
        let mut cursor = r.start;
        while let Some(&(s, e, _)) = self.map.get(i).filter(|(s, _, _)| *s < r.end) {
            if s > cursor {
                note(init);
                let mut v = init;
                f(&mut v);
                self.map.insert(i, (cursor, s, v));
                i += 1;
            }
            let v = &mut self.map[i].2;
            note(*v);
            f(v);
            cursor = e;
            i += 1;
        }
        if cursor < r.end {
            note(init);
            let mut v = init;
            f(&mut v);
            self.map.insert(i, (cursor, r.end, v));
        }
        before_max
    }

    /// The value of `r` if it is stored as one range exactly, at the back
    /// or the front (a one-range message written or finishing in order).
    pub(crate) fn exactly(&self, r: Units) -> Option<V> {
        [self.map.back(), self.map.front()]
            .into_iter()
            .flatten()
            .find(|(s, e, _)| *s == r.start && *e == r.end)
            .map(|(_, _, v)| *v)
    }

    /// The maximum value over `r` if every unit of `r` has a value.
    pub(crate) fn max_if_covered(&self, r: Units) -> Option<V>
    where
        V: Ord,
    {
        if r.is_empty() {
            return None;
        }
        if let Some(v) = self.exactly(r) {
            return Some(v);
        }
        let mut cursor = r.start;
        let mut best: Option<V> = None;
        for (u, v) in self.overlapping(r) {
            if u.start != cursor {
                return None;
            }
            cursor = u.end;
            best = Some(match best {
                Some(b) if b >= v => b,
                _ => v,
            });
        }
        (cursor == r.end).then_some(best).flatten()
    }

    /// The minimum value over the units of `r` that have one.
    pub(crate) fn min_any(&self, r: Units) -> Option<V>
    where
        V: Ord,
    {
        self.overlapping(r).map(|(_, v)| v).min()
    }

    pub(crate) fn get(&self, unit: u64) -> Option<V> {
        self.overlapping(Units::one(unit)).next().map(|(_, v)| v)
    }

    /// One past the last unit of the run of covered units starting at
    /// `unit` (`unit` itself if it has no value).
    pub(crate) fn covered_end(&self, unit: u64) -> u64 {
        let mut end = unit;
        for &(s, e, _) in self.map.range(self.first_ending_after(unit)..) {
            if s > end {
                break;
            }
            end = e;
        }
        end
    }

    fn split_at(&mut self, pos: u64) {
        let i = self.first_starting_from(pos);
        if i == 0 {
            return;
        }
        let (s, e, v) = self.map[i - 1];
        if e > pos {
            self.map[i - 1] = (s, pos, v);
            self.map.insert(i, (pos, e, v));
        }
    }

    /// Forgets the values of the units of `r`.
    /// One search: a final message's units are usually whole ranges at
    /// the front.
    pub(crate) fn remove(&mut self, r: Units) {
        if r.is_empty() {
            return;
        }
        if self
            .map
            .front()
            .is_some_and(|&(s, e, _)| s == r.start && e == r.end)
        {
            self.map.pop_front();
            return;
        }
        self.remove_from(self.first_ending_after(r.start), r);
    }

    /// Forgets the values of the units of `r` and says what they were
    /// (one search for what `max_if_covered`, `min_any` and `remove`
    /// would do in turn).
    pub(crate) fn take(&mut self, r: Units) -> Taken<V>
    where
        V: Ord,
    {
        let mut t = Taken {
            covered: false,
            min: None,
            max: None,
        };
        if r.is_empty() {
            return t;
        }
        if let Some(&(s, e, v)) = self.map.front() {
            if s == r.start && e == r.end {
                // A message finishing in order: its one range at the front.
                self.map.pop_front();
                return Taken {
                    covered: true,
                    min: Some(v),
                    max: Some(v),
                };
            }
        }
        let from = self.first_ending_after(r.start);
        let mut cursor = Some(r.start);
        for &(s, e, v) in self.map.range(from..) {
            if s >= r.end {
                break;
            }
            if cursor != Some(s.max(r.start)) {
                cursor = None;
            } else {
                cursor = Some(e.min(r.end));
            }
            t.min = Some(t.min.map_or(v, |m: V| m.min(v)));
            t.max = Some(match t.max {
                Some(m) if m >= v => m,
                _ => v,
            });
        }
        t.covered = cursor == Some(r.end);
        self.remove_from(from, r);
        t
    }

    /// `remove` with the index of the first range ending after `r.start`.
    fn remove_from(&mut self, mut from: usize, r: Units) {
        let Some(&(s, e, v)) = self.map.get(from).filter(|(s, _, _)| *s < r.end) else {
            return;
        };
        if s < r.start {
            // Keep the part below `r` (and above, if `r` is inside).
            self.map[from] = (s, r.start, v);
            if e > r.end {
                self.map.insert(from + 1, (r.end, e, v));
                return;
            }
            from += 1;
        }
        let mut to = from;
        while self.map.get(to).is_some_and(|(_, e, _)| *e <= r.end) {
            to += 1;
        }
        if let Some(next) = self.map.get_mut(to).filter(|(s, _, _)| *s < r.end) {
            next.0 = r.end;
        }
        if from == 0 {
            for _ in 0..to {
                self.map.pop_front();
            }
        } else {
            self.map.drain(from..to);
        }
    }

    /// Stored ranges.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// The parts of a unit range (see [`UnitSet::outside`]): the first one
/// inline, since there is almost always one at most.
/// What [`RangeMap::take`] removed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Taken<V> {
    /// Every unit had a value.
    pub covered: bool,
    pub min: Option<V>,
    pub max: Option<V>,
}

impl<V: Copy> Taken<V> {
    /// The largest value if every unit had one (`max_if_covered`).
    pub(crate) fn max_if_covered(&self) -> Option<V> {
        if self.covered {
            self.max
        } else {
            None
        }
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Parts {
    first: Option<Units>,
    rest: Vec<Units>,
}

impl Parts {
    fn push(&mut self, u: Units) {
        if self.first.is_none() {
            self.first = Some(u);
        } else {
            self.rest.push(u);
        }
    }
}

impl IntoIterator for Parts {
    type Item = Units;
    type IntoIter = std::iter::Chain<std::option::IntoIter<Units>, std::vec::IntoIter<Units>>;
    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

/// Coalesced set of unit ranges (start, end), sorted.
#[derive(Clone, Debug, Default)]
pub(crate) struct UnitSet {
    map: VecDeque<(u64, u64)>,
}

impl UnitSet {
    pub(crate) fn insert(&mut self, r: Units) {
        let (mut s, mut e) = (r.start, r.end);
        match self.map.back_mut() {
            // In-order finishing: the set grows at its end.
            Some(b) if b.0 <= s && b.1 == s => {
                b.1 = b.1.max(e);
                return;
            }
            Some(b) if b.1 < s => {
                self.map.push_back((s, e));
                return;
            }
            None => {
                self.map.push_back((s, e));
                return;
            }
            _ => {}
        }
        // The first range starting after `s`.
        let next = self.map.partition_point(|(ps, _)| *ps <= s);
        let mut from = next;
        if next > 0 && self.map[next - 1].1 >= s {
            from = next - 1;
            s = self.map[from].0;
            e = e.max(self.map[from].1);
        }
        let mut to = next;
        while let Some(&(_, ne)) = self.map.get(to).filter(|(ns, _)| *ns <= e) {
            e = e.max(ne);
            to += 1;
        }
        if from == to {
            self.map.insert(from, (s, e));
        } else {
            self.map[from] = (s, e);
            self.map.drain(from + 1..to);
        }
    }

    /// The parts of `r` outside the set, and how many units of `r` are in it.
    pub(crate) fn outside(&self, r: Units) -> (Parts, u64) {
        let mut out = Parts::default();
        let mut cursor = r.start;
        let mut inside = 0;
        if self.map.back().is_none_or(|(_, e)| *e <= r.start) {
            // Nothing final at or above `r`.
            if cursor < r.end {
                out.push(r);
            }
            return (out, inside);
        }
        let first = self
            .map
            .partition_point(|(s, _)| *s <= r.start)
            .saturating_sub(1);
        for &(s, e) in self.map.range(first..) {
            if s >= r.end {
                break;
            }
            if e <= cursor {
                continue;
            }
            if s > cursor {
                out.push(Units::new(cursor, s.min(r.end)));
            }
            let hi = e.min(r.end);
            inside += hi - s.max(cursor);
            cursor = hi;
            if cursor >= r.end {
                break;
            }
        }
        if cursor < r.end {
            out.push(Units::new(cursor, r.end));
        }
        (out, inside)
    }

    pub(crate) fn ranges(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_gaps_keeps_first_values() {
        let mut m = RangeMap::new();
        assert_eq!(m.fill_gaps(Units::new(10, 20), 1u32), 10);
        assert_eq!(m.fill_gaps(Units::new(5, 25), 2), 10);
        assert_eq!(m.fill_gaps(Units::new(12, 18), 3), 0);
        assert_eq!(m.get(4), None);
        assert_eq!(m.get(5), Some(2));
        assert_eq!(m.get(10), Some(1));
        assert_eq!(m.get(19), Some(1));
        assert_eq!(m.get(20), Some(2));
        assert_eq!(m.get(25), None);
        assert_eq!(m.max_if_covered(Units::new(5, 25)), Some(2));
        assert_eq!(m.max_if_covered(Units::new(11, 13)), Some(1));
        assert_eq!(m.max_if_covered(Units::new(4, 6)), None);
        assert_eq!(m.max_if_covered(Units::new(24, 26)), None);
        assert_eq!(m.min_any(Units::new(0, 100)), Some(1));
    }

    #[test]
    fn covered_end_follows_adjacent_ranges() {
        let mut m = RangeMap::new();
        assert_eq!(m.covered_end(3), 3);
        m.fill_gaps(Units::new(0, 3), 7u32);
        m.fill_gaps(Units::new(3, 5), 8);
        m.fill_gaps(Units::new(6, 9), 9);
        assert_eq!(m.covered_end(0), 5);
        assert_eq!(m.covered_end(4), 5);
        assert_eq!(m.covered_end(5), 5);
        assert_eq!(m.covered_end(6), 9);
        assert_eq!(m.covered_end(9), 9);
        m.fill_gaps(Units::new(5, 6), 1);
        assert_eq!(m.covered_end(1), 9);
    }

    #[test]
    fn holes_are_not_covered() {
        let mut m = RangeMap::new();
        m.fill_gaps(Units::new(0, 3), 7u32);
        m.fill_gaps(Units::new(4, 6), 9);
        assert_eq!(m.max_if_covered(Units::new(0, 6)), None);
        assert_eq!(m.max_if_covered(Units::new(4, 6)), Some(9));
        assert_eq!(m.fill_gaps(Units::new(0, 6), 11), 1);
        assert_eq!(m.max_if_covered(Units::new(0, 6)), Some(11));
    }

    #[test]
    fn update_counts_and_reports_previous_maximum() {
        let mut m: RangeMap<u32> = RangeMap::new();
        assert_eq!(m.update(Units::new(0, 10), 0, |c| *c += 1), Some(0));
        assert_eq!(m.update(Units::new(5, 15), 0, |c| *c += 1), Some(1));
        assert_eq!(m.update(Units::new(7, 8), 0, |c| *c += 1), Some(2));
        assert_eq!(m.get(0), Some(1));
        assert_eq!(m.get(5), Some(2));
        assert_eq!(m.get(7), Some(3));
        assert_eq!(m.get(8), Some(2));
        assert_eq!(m.get(12), Some(1));
        assert_eq!(m.get(15), None);
        assert_eq!(m.max_if_covered(Units::new(0, 15)), Some(3));
        // Stored ranges: [0,5) [5,7) [7,8) [8,10) [10,15).
        assert_eq!(m.len(), 5);
        assert_eq!(m.update(Units::new(3, 3), 0, |c| *c += 1), None);
    }

    #[test]
    fn byte_ranges_scale() {
        // A bulk TCP flow: 10 000 segments of 1448 bytes cost 10 000 ranges, not 14.5M entries.
        let mut m = RangeMap::new();
        for i in 0..10_000u64 {
            m.fill_gaps(Units::new(i * 1448, (i + 1) * 1448), i);
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.get(1448 * 5000 + 7), Some(5000));
        assert_eq!(m.max_if_covered(Units::new(0, 1448 * 10_000)), Some(9_999));
    }

    /// Random operations against a per-unit model: every query agrees.
    #[test]
    fn random_operations_match_a_per_unit_model() {
        const N: u64 = 48;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..200 {
            let mut m: RangeMap<u32> = RangeMap::new();
            let mut model: Vec<Option<u32>> = vec![None; N as usize];
            let mut set = UnitSet::default();
            let mut in_set = vec![false; N as usize];
            for step in 0..60u32 {
                let a = next(N);
                let r = Units::new(a, (a + 1 + next(8)).min(N));
                let cells = r.start as usize..r.end as usize;
                match next(4) {
                    0 => {
                        let added = m.fill_gaps(r, step);
                        let mut want = 0;
                        for c in &mut model[cells.clone()] {
                            if c.is_none() {
                                *c = Some(step);
                                want += 1;
                            }
                        }
                        assert_eq!(added, want);
                    }
                    1 => {
                        let got = m.update(r, 0, |v| *v += 1);
                        let want = model[cells.clone()].iter().map(|c| c.unwrap_or(0)).max();
                        for c in &mut model[cells.clone()] {
                            *c = Some(c.unwrap_or(0) + 1);
                        }
                        assert_eq!(got, want);
                    }
                    2 if step % 2 == 0 => {
                        m.remove(r);
                        model[cells.clone()].iter_mut().for_each(|c| *c = None);
                    }
                    2 => {
                        let t = m.take(r);
                        let rc = &model[cells.clone()];
                        let covered = rc.iter().all(Option::is_some);
                        assert_eq!(t.covered, covered);
                        assert_eq!(t.min, rc.iter().flatten().min().copied());
                        assert_eq!(t.max, rc.iter().flatten().max().copied());
                        model[cells.clone()].iter_mut().for_each(|c| *c = None);
                    }
                    _ => {
                        set.insert(r);
                        in_set[cells.clone()].iter_mut().for_each(|c| *c = true);
                    }
                }
                let q = Units::new(next(N), N);
                let q = Units::new(q.start, (q.start + 1 + next(12)).min(N));
                let qc = &model[q.start as usize..q.end as usize];
                let covered = qc.iter().all(Option::is_some);
                let max = qc.iter().flatten().max().copied();
                assert_eq!(m.max_if_covered(q), max.filter(|_| covered));
                assert_eq!(m.min_any(q), qc.iter().flatten().min().copied());
                assert_eq!(m.get(q.start), qc[0]);
                let (parts, inside) = set.outside(q);
                let mut out = vec![false; N as usize];
                for p in parts {
                    assert!(!p.is_empty() && q.start <= p.start && p.end <= q.end);
                    out[p.start as usize..p.end as usize]
                        .iter_mut()
                        .for_each(|c| *c = true);
                }
                for u in q.start..q.end {
                    assert_eq!(out[u as usize], !in_set[u as usize]);
                }
                let want_inside = in_set[q.start as usize..q.end as usize]
                    .iter()
                    .filter(|c| **c)
                    .count() as u64;
                assert_eq!(inside, want_inside);
                // Stored ranges stay disjoint, sorted and non-empty; the set
                // stays coalesced.
                assert!(m.map.iter().all(|(s, e, _)| s < e));
                assert!(m
                    .map
                    .iter()
                    .zip(m.map.iter().skip(1))
                    .all(|(x, y)| x.1 <= y.0));
                assert!(set
                    .map
                    .iter()
                    .zip(set.map.iter().skip(1))
                    .all(|(x, y)| x.1 < y.0));
            }
        }
    }
}
