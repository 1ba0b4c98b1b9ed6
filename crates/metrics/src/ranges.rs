//! A map from disjoint unit ranges to values.
//!
//! Metrics need "when did each unit first arrive / get acked / get
//! delivered" and "how often was each unit sent". For SCTP a unit is a chunk
//! and a per-unit map would do, but for TCP a unit is a byte and a bulk flow
//! has millions of them, so values are kept per maximal range as written:
//! the cost of every operation is `O(log n + k)` with `k` the number of
//! stored ranges it touches, and the number of stored ranges is bounded by
//! twice the number of operations.

use std::collections::BTreeMap;
use thinstream_base::trace::Units;

#[derive(Clone, Debug, Default)]
pub(crate) struct RangeMap<V> {
    /// start → (end, value); ranges are disjoint and non-empty.
    map: BTreeMap<u64, (u64, V)>,
}

impl<V: Copy> RangeMap<V> {
    pub(crate) fn new() -> Self {
        RangeMap {
            map: BTreeMap::new(),
        }
    }

    /// Every stored range overlapping `r`, clipped to `r`, in unit order.
    pub(crate) fn overlapping(&self, r: Units) -> impl Iterator<Item = (Units, V)> + '_ {
        let before = self
            .map
            .range(..=r.start)
            .next_back()
            .filter(|(_, (end, _))| *end > r.start)
            .map(|(s, v)| (*s, *v));
        let after = self
            .map
            .range(r.start.saturating_add(1)..r.end.max(r.start.saturating_add(1)))
            .map(|(s, v)| (*s, *v));
        before
            .into_iter()
            .chain(after)
            .filter(move |_| !r.is_empty())
            .map(move |(s, (e, v))| (Units::new(s.max(r.start), e.min(r.end)), v))
    }

    /// Stores `v` for the units of `r` that have no value yet ("first time"
    /// semantics); returns how many units were newly covered.
    pub(crate) fn fill_gaps(&mut self, r: Units, v: V) -> u64 {
        if r.is_empty() {
            return 0;
        }
        let covered: Vec<Units> = self.overlapping(r).map(|(u, _)| u).collect();
        let mut cursor = r.start;
        let mut added = 0;
        for u in covered
            .into_iter()
            .chain(std::iter::once(Units::new(r.end, r.end)))
        {
            if u.start > cursor {
                self.map.insert(cursor, (u.start, v));
                added += u.start - cursor;
            }
            cursor = cursor.max(u.end);
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
        self.split_at(r.start);
        self.split_at(r.end);
        let inside: Vec<(u64, u64)> = self
            .map
            .range(r.start..r.end)
            .map(|(s, (e, _))| (*s, *e))
            .collect();
        let mut before_max: Option<V> = None;
        let mut note = |v: V| {
            before_max = Some(match before_max {
                Some(m) if m >= v => m,
                _ => v,
            })
        };
        let mut cursor = r.start;
        for (s, e) in inside.into_iter().chain(std::iter::once((r.end, r.end))) {
            if s > cursor {
                note(init);
                let mut v = init;
                f(&mut v);
                self.map.insert(cursor, (s, v));
            }
            if e > s {
                // The key was just listed from the map, so it is present.
                if let Some((_, v)) = self.map.get_mut(&s) {
                    note(*v);
                    f(v);
                }
            }
            cursor = cursor.max(e);
        }
        before_max
    }

    /// The maximum value over `r` if every unit of `r` has a value.
    pub(crate) fn max_if_covered(&self, r: Units) -> Option<V>
    where
        V: Ord,
    {
        if r.is_empty() {
            return None;
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

    fn split_at(&mut self, pos: u64) {
        let hit = self
            .map
            .range(..pos)
            .next_back()
            .filter(|(_, (end, _))| *end > pos)
            .map(|(s, (e, v))| (*s, *e, *v));
        if let Some((s, e, v)) = hit {
            self.map.insert(s, (pos, v));
            self.map.insert(pos, (e, v));
        }
    }

    /// Forgets the values of the units of `r`.
    pub(crate) fn remove(&mut self, r: Units) {
        if r.is_empty() {
            return;
        }
        self.split_at(r.start);
        self.split_at(r.end);
        let inside: Vec<u64> = self.map.range(r.start..r.end).map(|(s, _)| *s).collect();
        for s in inside {
            self.map.remove(&s);
        }
    }

    /// Stored ranges.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// Coalesced set of unit ranges (start → end).
#[derive(Clone, Debug, Default)]
pub(crate) struct UnitSet {
    map: BTreeMap<u64, u64>,
}

impl UnitSet {
    pub(crate) fn insert(&mut self, r: Units) {
        let (mut s, mut e) = (r.start, r.end);
        if let Some((&ps, &pe)) = self.map.range(..=s).next_back() {
            if pe >= s {
                s = ps;
                e = e.max(pe);
                self.map.remove(&ps);
            }
        }
        while let Some((&ns, &ne)) = self.map.range(s..).next() {
            if ns > e {
                break;
            }
            e = e.max(ne);
            self.map.remove(&ns);
        }
        self.map.insert(s, e);
    }

    /// The parts of `r` outside the set, and how many units of `r` are in it.
    pub(crate) fn outside(&self, r: Units) -> (Vec<Units>, u64) {
        let mut out = Vec::new();
        let mut cursor = r.start;
        let mut inside = 0;
        let first = self
            .map
            .range(..=r.start)
            .next_back()
            .map_or(r.start, |(s, _)| *s);
        for (&s, &e) in self.map.range(first..r.end) {
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
}
