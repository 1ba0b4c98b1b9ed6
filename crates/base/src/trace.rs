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

/// The data pieces of one packet. Most packets of a thin stream carry one,
/// so one is kept inline: recording a packet allocates nothing then.
pub type SentPieces = smallvec::SmallVec<[SentData; 1]>;

/// Builds [`SentPieces`] like `vec!` builds a vector.
pub use smallvec::smallvec as pieces;

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
    fn reason_names_are_unique() {
        let mut names: Vec<_> = TxReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TxReason::ALL.len());
    }
}
