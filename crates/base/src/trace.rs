//! Trace records: the side channel every transport (SCTP in `proto`, TCP in
//! `tcp`) writes and every metric (in `metrics`) is computed from.
//!
//! Data is named by **units**: a 64-bit offset that never wraps, counted from
//! the start of the connection. For SCTP one unit is one DATA chunk (the TSN
//! unwrapped and made relative to the initial TSN); for TCP one unit is one
//! byte of the stream (the sequence number relative to the ISN). A sender
//! records which units each application message occupies when it is
//! submitted; the receiver records units when they arrive and when they are
//! delivered, so a metric joins both sides on units without inspecting
//! payloads (the documents tagged payload bytes instead; this replaces that).

use crate::{Duration, Instant};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a piece of data was put on the wire. Defined once; `metrics` counts by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TxReason {
    /// First transmission of the data.
    New,
    /// Fast retransmission after missing reports / duplicate ACKs.
    FastRetransmit,
    /// Retransmission on expiry of the retransmission timer.
    TimeoutRetransmit,
    /// Outstanding data that rode along with a fast or timeout retransmission.
    BundledOnRetransmit,
    /// Early Retransmit (RFC 5827 byte-based, or the packet-based variant).
    EarlyRetransmit,
    /// FreeBSD-style early fast retransmit (timer driven).
    EarlyFastRetransmit,
    /// A redundant copy of unacknowledged data bundled with new data (RDB).
    RedundantBundle,
    /// A probe: zero-window probe or tail-loss probe.
    Probe,
}

impl TxReason {
    pub const ALL: [TxReason; 8] = [
        TxReason::New,
        TxReason::FastRetransmit,
        TxReason::TimeoutRetransmit,
        TxReason::BundledOnRetransmit,
        TxReason::EarlyRetransmit,
        TxReason::EarlyFastRetransmit,
        TxReason::RedundantBundle,
        TxReason::Probe,
    ];

    /// Whether this transmission repeats data already sent once.
    pub const fn is_retransmission(self) -> bool {
        !matches!(self, TxReason::New)
    }

    /// The stable short name used in tables and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            TxReason::New => "new",
            TxReason::FastRetransmit => "fast-rtx",
            TxReason::TimeoutRetransmit => "timeout-rtx",
            TxReason::BundledOnRetransmit => "bundled-on-rtx",
            TxReason::EarlyRetransmit => "early-rtx",
            TxReason::EarlyFastRetransmit => "efr",
            TxReason::RedundantBundle => "redundant-bundle",
            TxReason::Probe => "probe",
        }
    }
}

/// A half-open range of units `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Units {
    pub start: u64,
    pub end: u64,
}

impl Units {
    pub const fn new(start: u64, end: u64) -> Units {
        Units { start, end }
    }
    pub const fn one(unit: u64) -> Units {
        Units {
            start: unit,
            end: unit + 1,
        }
    }
    pub const fn len(self) -> u64 {
        self.end.saturating_sub(self.start)
    }
    pub const fn is_empty(self) -> bool {
        self.end <= self.start
    }
    pub const fn contains(self, unit: u64) -> bool {
        self.start <= unit && unit < self.end
    }
}

/// One piece of data inside a transmitted packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentData {
    pub units: Units,
    /// Payload bytes of this piece (user data only, no headers).
    pub bytes: u32,
    pub reason: TxReason,
}

/// The data pieces of one packet. Most packets carry none or one, which
/// are kept inline (no allocation); more go to the heap. As small as one
/// [`SentData`], so that a [`Record`] stays at 40 bytes (the simulator
/// buffers every measured flow's records between two reads).
#[derive(Clone, Default)]
pub struct SentPieces(Pieces);

#[derive(Clone, Default)]
enum Pieces {
    #[default]
    None,
    One(SentData),
    Many(Box<[SentData]>),
}

impl SentPieces {
    pub const fn new() -> SentPieces {
        SentPieces(Pieces::None)
    }

    pub fn from_slice(pieces: &[SentData]) -> SentPieces {
        SentPieces(match pieces {
            [] => Pieces::None,
            [one] => Pieces::One(*one),
            more => Pieces::Many(more.into()),
        })
    }

    /// Appends a piece (a third or later one moves the heap copy).
    pub fn push(&mut self, piece: SentData) {
        match &mut self.0 {
            Pieces::None => self.0 = Pieces::One(piece),
            Pieces::One(first) => {
                let first = *first;
                self.0 = Pieces::Many(Box::new([first, piece]));
            }
            Pieces::Many(more) => {
                let mut v = std::mem::take(more).into_vec();
                v.push(piece);
                *more = v.into_boxed_slice();
            }
        }
    }
}

impl std::ops::Deref for SentPieces {
    type Target = [SentData];
    fn deref(&self) -> &[SentData] {
        match &self.0 {
            Pieces::None => &[],
            Pieces::One(one) => std::slice::from_ref(one),
            Pieces::Many(more) => more,
        }
    }
}

impl<'a> IntoIterator for &'a SentPieces {
    type Item = &'a SentData;
    type IntoIter = std::slice::Iter<'a, SentData>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl From<Vec<SentData>> for SentPieces {
    fn from(v: Vec<SentData>) -> SentPieces {
        match v.len() {
            0 | 1 => SentPieces::from_slice(&v),
            _ => SentPieces(Pieces::Many(v.into_boxed_slice())),
        }
    }
}

impl FromIterator<SentData> for SentPieces {
    fn from_iter<I: IntoIterator<Item = SentData>>(iter: I) -> SentPieces {
        let mut iter = iter.into_iter();
        let Some(first) = iter.next() else {
            return SentPieces::new();
        };
        match iter.next() {
            None => SentPieces(Pieces::One(first)),
            Some(second) => {
                let mut v = vec![first, second];
                v.extend(iter);
                SentPieces(Pieces::Many(v.into_boxed_slice()))
            }
        }
    }
}

impl PartialEq for SentPieces {
    fn eq(&self, other: &SentPieces) -> bool {
        **self == **other
    }
}

impl Eq for SentPieces {}

impl fmt::Debug for SentPieces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for SentPieces {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for SentPieces {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<SentPieces, D::Error> {
        Vec::<SentData>::deserialize(deserializer).map(SentPieces::from)
    }
}

/// Builds [`SentPieces`] as `vec!` builds a vector.
#[macro_export]
macro_rules! pieces {
    () => {
        $crate::trace::SentPieces::new()
    };
    ($($piece:expr),+ $(,)?) => {
        $crate::trace::SentPieces::from_slice(&[$($piece),+])
    };
}
pub use crate::pieces;

/// One trace record. Sender-side and receiver-side records come from the
/// endpoint that observed them; the driver (simulator or socket loop) knows
/// which endpoint and flow that is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Record {
    /// Sender: the application handed over a message, occupying `units`.
    Submitted {
        time: Instant,
        message: u64,
        stream: u16,
        bytes: u32,
        unordered: bool,
        units: Units,
    },
    /// Sender or receiver: a packet left this endpoint. `data` lists every
    /// piece of user data it carried and why; `control` counts the other
    /// chunks/segments (SACK, INIT, HEARTBEAT, pure ACK, ...).
    PacketSent {
        time: Instant,
        wire_bytes: u32,
        data: SentPieces,
        control: u16,
    },
    /// Any packet that reached this endpoint and parsed.
    PacketReceived { time: Instant, wire_bytes: u32 },
    /// Sender: `units` were reported received for the first time (by a
    /// cumulative or a selective acknowledgement).
    Acked { time: Instant, units: Units },
    /// Sender: `units` were given up on (partial reliability).
    Abandoned { time: Instant, units: Units },
    /// Receiver: `units` arrived at the transport; `duplicate` if they had
    /// arrived before.
    Arrived {
        time: Instant,
        units: Units,
        bytes: u32,
        duplicate: bool,
    },
    /// Receiver: data was handed to the application. For SCTP one record per
    /// message; for TCP one record per in-order advance of the byte stream.
    Delivered {
        time: Instant,
        stream: u16,
        bytes: u32,
        unordered: bool,
        units: Units,
    },
    /// The retransmission timeout changed.
    Rto {
        time: Instant,
        rto: Duration,
        srtt: Option<Duration>,
    },
    /// Congestion state changed.
    Congestion {
        time: Instant,
        cwnd: u32,
        ssthresh: u32,
        flight: u32,
    },
    /// An RTT sample reached the estimator (`data`: measured on DATA, else
    /// a HEARTBEAT-ACK or handshake round trip).
    RttSample {
        time: Instant,
        rtt: Duration,
        data: bool,
    },
    /// The thin-stream test changed its verdict.
    Thin {
        time: Instant,
        thin: bool,
        packets_in_flight: u32,
    },
    /// Sender: the peer reported receiving `units` more than once (an SCTP
    /// SACK's duplicate TSNs, RFC 9260 §3.3.4; a TCP D-SACK block). Lets a
    /// sender-only trace estimate spurious retransmissions.
    DuplicateReported { time: Instant, units: Units },
    /// A datagram was dropped as malformed or unexpected; `why` is a short stable name.
    Discarded { time: Instant, why: String },
    /// The connection changed state (`established`, `closed`, ...).
    State { time: Instant, state: String },
}

impl Record {
    pub fn time(&self) -> Instant {
        match self {
            Record::Submitted { time, .. }
            | Record::PacketSent { time, .. }
            | Record::PacketReceived { time, .. }
            | Record::Acked { time, .. }
            | Record::Abandoned { time, .. }
            | Record::Arrived { time, .. }
            | Record::Delivered { time, .. }
            | Record::Rto { time, .. }
            | Record::Congestion { time, .. }
            | Record::Thin { time, .. }
            | Record::RttSample { time, .. }
            | Record::DuplicateReported { time, .. }
            | Record::Discarded { time, .. }
            | Record::State { time, .. } => *time,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_json() {
        let r = Record::PacketSent {
            time: Instant::from_millis(5),
            wire_bytes: 148,
            data: crate::trace::pieces![SentData {
                units: Units::one(3),
                bytes: 100,
                reason: TxReason::FastRetransmit,
            }],
            control: 1,
        };
        let s = serde_json::to_string(&r).unwrap();
        assert!(s.contains("\"kind\":\"packet-sent\""), "{s}");
        assert!(s.contains("fast-retransmit"), "{s}");
        let back: Record = serde_json::from_str(&s).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn sent_pieces_hold_any_number_and_read_as_a_list() {
        let piece = |u: u64| SentData {
            units: Units::one(u),
            bytes: 10,
            reason: TxReason::New,
        };
        let all: Vec<SentData> = (0..5).map(piece).collect();
        let mut built = SentPieces::new();
        for n in 0..=all.len() {
            // Pushed one by one, from a slice, a vector or an iterator:
            // the same pieces, in order, the same JSON as a plain list.
            assert_eq!(&built[..], &all[..n]);
            assert_eq!(SentPieces::from_slice(&all[..n]), built);
            assert_eq!(SentPieces::from(all[..n].to_vec()), built);
            assert_eq!(all[..n].iter().copied().collect::<SentPieces>(), built);
            assert_eq!(built.iter().count(), n);
            let json = serde_json::to_string(&built).unwrap();
            assert_eq!(json, serde_json::to_string(&all[..n]).unwrap());
            let back: SentPieces = serde_json::from_str(&json).unwrap();
            assert_eq!(back, built);
            assert_eq!(format!("{built:?}"), format!("{:?}", &all[..n]));
            if n < all.len() {
                built.push(all[n]);
            }
        }
        assert_ne!(
            SentPieces::from_slice(&all[..2]),
            SentPieces::from_slice(&all[1..3])
        );
        assert!(
            std::mem::size_of::<Record>() <= 40,
            "a record grew: the simulator buffers them"
        );
    }

    #[test]
    fn reason_names_are_unique() {
        let mut names: Vec<_> = TxReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TxReason::ALL.len());
    }
}
