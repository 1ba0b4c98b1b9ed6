//! Bytes acknowledged per interval, read while a flow runs: a
//! [`ThroughputStream`].
//!
//! [`FlowAnalysis::throughput`](crate::FlowAnalysis::throughput) with
//! [`ThroughputSource::Acked`](crate::ThroughputSource::Acked) keeps one
//! `(time, bytes)` event per acknowledgement and the first transmission of
//! every unit until the end of the run: for a greedy TCP flow that is most
//! of a run's memory. A [`ThroughputStream`] reads the same sender records
//! chunk by chunk and keeps:
//!
//! * one byte counter per interval of the window (fixed when it is made)
//!   not yet released: a reader that has consumed the intervals before
//!   some time releases them ([`ThroughputStream::release`]), so a long
//!   run holds only the intervals still open;
//! * the units acknowledged so far as a coalesced set (one range for a
//!   flow acknowledged in order, plus the selectively acknowledged islands);
//! * the first transmission (the piece's bytes and units) of units sent and
//!   not yet acknowledged only: an acknowledged unit never counts again, so
//!   its first transmission is forgotten.
//!
//! The series equals `FlowAnalysis::throughput(Acked, from, to, interval)`
//! for the same records: the newly acknowledged bytes of an `Acked` record
//! are those of the units outside the acknowledged set, pro rata of the
//! piece that first carried them, summed over the same stored ranges (a
//! range is only ever cut at the edge of acknowledged units, which never
//! lies inside a run of unacknowledged units).

use thinstream_base::trace::{Record, Units};
use thinstream_base::{Duration, Instant};

use crate::error::{MetricsError, Side};
use crate::flow::{pro_rata, units_ok, InOrder};
use crate::ranges::{RangeMap, UnitSet};

/// The piece that first carried a unit: its bytes and its length in units.
#[derive(Clone, Copy, Debug)]
struct FirstPiece {
    bytes: u32,
    len: u64,
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct ThroughputStream {
    from: Instant,
    to: Instant,
    interval: Duration,
    /// Intervals `first..first + bins.len()` (later ones are zero so far).
    bins: std::collections::VecDeque<u64>,
    first: usize,
    /// Intervals in the window.
    total: usize,
    acked: UnitSet,
    first_tx: RangeMap<FirstPiece>,
    order: InOrder,
}

impl ThroughputStream {
    /// Bytes acknowledged per `interval` from `from`, counting
    /// acknowledgements before `to` (the last interval may extend past
    /// `to`), as [`FlowAnalysis::throughput`](crate::FlowAnalysis::throughput).
    pub fn new(from: Instant, to: Instant, interval: Duration) -> Result<Self, MetricsError> {
        if interval.is_zero() || to < from {
            return Err(MetricsError::BadWindow);
        }
        let total = (to - from).as_nanos().div_ceil(interval.as_nanos()) as usize;
        Ok(ThroughputStream {
            from,
            to,
            interval,
            bins: std::collections::VecDeque::new(),
            first: 0,
            total,
            acked: UnitSet::default(),
            first_tx: RangeMap::new(),
            order: InOrder::default(),
        })
    }

    /// Reads the sender's records made since the last call, in time order.
    pub fn push(&mut self, sender: &[Record]) -> Result<(), MetricsError> {
        for rec in sender {
            let index = self.order.next(Side::Sender, rec)?;
            let time = rec.time();
            let nonempty = |units: Units| units_ok(units, Side::Sender, index);
            match rec {
                Record::PacketSent { data, .. } => {
                    for piece in data {
                        let units = nonempty(piece.units)?;
                        let first = FirstPiece {
                            bytes: piece.bytes,
                            len: units.len(),
                        };
                        for part in self.acked.outside(units).0 {
                            self.first_tx.fill_gaps(part, first);
                        }
                    }
                }
                Record::Acked { units, .. } => {
                    let units = nonempty(*units)?;
                    let mut newly = 0;
                    for part in self.acked.outside(units).0 {
                        for (p, f) in self.first_tx.overlapping(part) {
                            newly += pro_rata(f.bytes, f.len, p.len());
                        }
                        self.first_tx.remove(part);
                    }
                    self.acked.insert(units);
                    if newly > 0 && time >= self.from && time < self.to {
                        let k = ((time - self.from).as_nanos() / self.interval.as_nanos()) as usize;
                        // A released interval was declared complete: an
                        // acknowledgement in it is out of time order.
                        let at =
                            k.checked_sub(self.first)
                                .ok_or(MetricsError::UnorderedRecords {
                                    side: Side::Sender,
                                    index,
                                })?;
                        if at >= self.bins.len() {
                            self.bins.resize(at + 1, 0);
                        }
                        self.bins[at] += newly;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Unit ranges held now (first transmissions of unacknowledged units
    /// and the acknowledged set): what the stream's state costs.
    pub fn stored_ranges(&self) -> usize {
        self.first_tx.len() + self.acked.ranges()
    }

    /// Intervals held now (not released, up to the latest acknowledged).
    pub fn held_intervals(&self) -> usize {
        self.bins.len()
    }

    /// Intervals in the window.
    pub fn intervals(&self) -> usize {
        self.total
    }

    /// How many intervals of the window end at or before `t`: once the
    /// records before `t` are read, their counts are final.
    pub fn complete_at(&self, t: Instant) -> usize {
        if t <= self.from {
            return 0;
        }
        let whole = ((t - self.from).as_nanos() / self.interval.as_nanos()) as usize;
        whole.min(self.total)
    }

    /// Bytes acknowledged in interval `k` so far (0 for a released one,
    /// as for one beyond the window).
    pub fn bin(&self, k: usize) -> u64 {
        k.checked_sub(self.first)
            .and_then(|at| self.bins.get(at))
            .copied()
            .unwrap_or(0)
    }

    /// Forgets the intervals before `k`: the reader has taken them, and an
    /// acknowledgement in one of them later is an error.
    pub fn release(&mut self, k: usize) {
        let k = k.min(self.total);
        while self.first < k {
            self.bins.pop_front();
            self.first += 1;
        }
    }

    /// The series: bytes acknowledged per interval, from the first interval
    /// not released to the end of the window.
    pub fn finish(self) -> Vec<u64> {
        let mut out: Vec<u64> = self.bins.into_iter().collect();
        out.resize(self.total - self.first, 0);
        out
    }
}
