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
//! * one byte counter per interval of the window (fixed when it is made);
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
    bins: Vec<u64>,
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
        let bins = (to - from).as_nanos().div_ceil(interval.as_nanos()) as usize;
        Ok(ThroughputStream {
            from,
            to,
            interval,
            bins: vec![0; bins],
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
                        self.bins[k] += newly;
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

    /// The series: bytes acknowledged per interval.
    pub fn finish(self) -> Vec<u64> {
        self.bins
    }
}
