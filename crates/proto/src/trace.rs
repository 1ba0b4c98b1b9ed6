//! Observability: the trace-record queue (records defined in
//! `thinstream_base::trace`) and the association's counters.

use std::collections::VecDeque;
use thinstream_base::trace::{Record, TxReason};

/// Counters of one association (or, summed, of an endpoint). Plain data:
/// fields may be added, never renamed.
///
/// The counters a packet updates come first (in two cache lines, the
/// counts by reason in a third), since an association's statistics are
/// written on every packet: see the layout note on
/// [`Association`](crate::Association).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
#[repr(C, align(64))]
pub struct Stats {
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub data_bytes_sent: u64,
    pub sacks_sent: u64,
    pub sacks_received: u64,
    pub data_chunks_received: u64,
    pub messages_submitted: u64,
    pub messages_delivered: u64,
    pub bytes_delivered: u64,
    /// RTT samples applied to the estimator (DATA, HEARTBEAT-ACK, handshake).
    pub rtt_samples: u64,
    /// Of those, samples measured on DATA.
    pub data_rtt_samples: u64,
    /// DATA packets sent with the SACK-IMMEDIATELY flag (RFC 7053).
    pub sack_immediately_sent: u64,
    /// Payload bytes sent as redundant copies (RDB), apart from
    /// retransmissions.
    pub redundant_bytes: u64,
    /// TSNs the peer reported as received more than once (SACK Duplicate
    /// TSNs, RFC 9260 §3.3.4): the sender's estimate of its spurious
    /// retransmissions (RDB copies excluded: the peer reports those too,
    /// so the count is an upper bound while RDB is on).
    pub duplicates_reported: u64,
    /// DATA chunks put on the wire, by [`TxReason`] (index: position in
    /// [`TxReason::ALL`]); see [`Stats::data_chunks_sent`].
    pub data_chunks_by_reason: [u64; 8],
    /// Datagrams that did not parse (bad checksum, bad framing, ...).
    pub malformed_packets: u64,
    /// Parsed packets dropped (wrong tag, unexpected in this state, ...).
    pub discarded_packets: u64,
    pub t3_expiries: u64,
    /// Fast-retransmit events (SACKs that marked at least one chunk).
    pub fast_retransmits: u64,
    /// Entries into fast recovery (window reductions).
    pub fast_recoveries: u64,
    pub duplicate_tsns_received: u64,
    /// DATA dropped because the receive buffer was full.
    pub data_dropped_no_buffer: u64,
    pub heartbeats_sent: u64,
    pub heartbeat_acks_received: u64,
    pub init_retransmits: u64,
    pub forward_tsns_received: u64,
    /// FORWARD TSN / I-FORWARD-TSN chunks sent (partial reliability).
    pub forward_tsns_sent: u64,
    /// Messages given up on by partial reliability (lifetime passed or
    /// retransmission limit reached, RFC 3758 / RFC 7496).
    pub abandoned_messages: u64,
    /// Unrecognized chunk types received.
    pub unknown_chunks: u64,
    /// T3 expiries postponed once for a newer packet's SACK
    /// (`t3_wait_for_newer_sack`).
    pub t3_postponed: u64,
    /// Changes of the thin-stream verdict.
    pub thin_transitions: u64,
    /// Nanoseconds classified thin, up to the latest verdict change (see
    /// `Association::time_thin` for the time up to now).
    pub thin_ns: u64,
    /// Path MTU probe packets sent (RFC 8899; `Config::pmtu_probe_max`).
    pub pmtu_probes_sent: u64,
    /// Falls back to the base packet size after repeated timeouts at a
    /// discovered size.
    pub pmtu_black_holes: u64,
}

impl Stats {
    /// DATA chunks sent for `reason`.
    pub fn data_chunks_sent(&self, reason: TxReason) -> u64 {
        self.data_chunks_by_reason[reason_index(reason)]
    }
    /// DATA chunks sent for any reason other than `New`.
    pub fn retransmitted_chunks(&self) -> u64 {
        TxReason::ALL
            .iter()
            .filter(|r| r.is_retransmission())
            .map(|r| self.data_chunks_sent(*r))
            .sum()
    }
    pub(crate) fn count_data(&mut self, reason: TxReason, bytes: usize) {
        self.data_chunks_by_reason[reason_index(reason)] += 1;
        self.data_bytes_sent += bytes as u64;
    }
    /// Field-wise sum (for endpoint totals).
    pub fn add(&mut self, o: &Stats) {
        macro_rules! sum {
            ($($f:ident),*) => { $( self.$f += o.$f; )* };
        }
        sum!(
            packets_sent,
            bytes_sent,
            packets_received,
            bytes_received,
            malformed_packets,
            discarded_packets,
            data_bytes_sent,
            t3_expiries,
            fast_retransmits,
            fast_recoveries,
            sacks_sent,
            sacks_received,
            data_chunks_received,
            duplicate_tsns_received,
            data_dropped_no_buffer,
            messages_submitted,
            messages_delivered,
            bytes_delivered,
            heartbeats_sent,
            heartbeat_acks_received,
            init_retransmits,
            forward_tsns_received,
            forward_tsns_sent,
            abandoned_messages,
            unknown_chunks,
            rtt_samples,
            data_rtt_samples,
            redundant_bytes,
            t3_postponed,
            sack_immediately_sent,
            thin_transitions,
            thin_ns,
            duplicates_reported,
            pmtu_probes_sent,
            pmtu_black_holes
        );
        for (a, b) in self
            .data_chunks_by_reason
            .iter_mut()
            .zip(o.data_chunks_by_reason)
        {
            *a += b;
        }
    }
}

fn reason_index(r: TxReason) -> usize {
    TxReason::ALL.iter().position(|x| *x == r).unwrap_or(0)
}

/// The record queue; records are built only when enabled.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tracer {
    enabled: bool,
    records: VecDeque<Record>,
}

impl Tracer {
    /// Where the next record goes (see `Transport::hot_memory`).
    pub(crate) fn hot_memory(&self, visit: &mut dyn FnMut(*const u8, usize)) {
        thinstream_base::drive::visit_deque(&self.records, visit);
    }

    pub(crate) fn new(enabled: bool) -> Self {
        Tracer {
            enabled,
            records: VecDeque::new(),
        }
    }
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }
    /// Record lazily: `f` only runs when tracing is on.
    #[inline]
    pub(crate) fn record(&mut self, f: impl FnOnce() -> Record) {
        if self.enabled {
            self.records.push_back(f());
        }
    }
    pub(crate) fn pop(&mut self) -> Option<Record> {
        self.records.pop_front()
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}
