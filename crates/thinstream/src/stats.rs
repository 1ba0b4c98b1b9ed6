//! A serialisable snapshot of one association's state and counters.

use serde::Serialize;
use thinstream_base::trace::TxReason;
use thinstream_base::Instant;
use thinstream_proto::Association as Proto;

/// Retransmitted DATA chunks by what caused them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RetransmissionsByCause {
    /// Fast retransmission on missing reports (or, thin, the first one).
    pub fast: u64,
    /// Retransmission timer (T3-rtx) expiry.
    pub timeout: u64,
    /// Outstanding data that rode along with a fast or timeout retransmission.
    pub bundled: u64,
    /// Early Retransmit (RFC 5827 family).
    pub early: u64,
    /// FreeBSD-style early fast retransmit.
    pub early_fast: u64,
    /// Zero-window or tail-loss probes.
    pub probe: u64,
}

/// One association's state and counters at the time of the call (or at
/// its end, once it has closed). Plain data; serialises with serde.
///
/// Durations are in milliseconds (floating point) so a JSON reader needs no
/// unit conversion.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AssociationStats {
    /// Smoothed RTT, `None` before the first sample.
    pub srtt_ms: Option<f64>,
    /// Current retransmission timeout.
    pub rto_ms: f64,
    /// Congestion window, bytes.
    pub cwnd: u32,
    /// Slow-start threshold, bytes.
    pub ssthresh: u32,
    /// Bytes in flight.
    pub flight_bytes: u32,
    /// The peer's advertised receive window, bytes.
    pub peer_rwnd: u32,
    /// Bytes queued by the application and not yet acknowledged.
    pub buffered_send_bytes: usize,
    /// Whether the stream is classified thin now.
    pub thin: bool,
    /// Time classified thin since the association started.
    pub time_thin_ms: f64,
    /// Thin/not-thin verdict changes.
    pub thin_transitions: u64,
    /// RTT samples taken (DATA, HEARTBEAT-ACK, handshake).
    pub rtt_samples: u64,
    /// Of those, samples measured on DATA.
    pub data_rtt_samples: u64,
    /// DATA chunks sent for the first time.
    pub data_chunks_new: u64,
    /// Retransmitted DATA chunks by cause.
    pub retransmissions: RetransmissionsByCause,
    /// Redundant copies sent by bundling (RDB), chunks.
    pub redundant_chunks: u64,
    /// Payload bytes of those copies.
    pub redundant_bytes: u64,
    /// Retransmission timer expiries.
    pub t3_expiries: u64,
    /// Expiries postponed once to wait for a newer packet's SACK.
    pub t3_postponed: u64,
    /// Messages given up on (partial reliability).
    pub abandoned_messages: u64,
    /// FORWARD TSN / I-FORWARD-TSN chunks sent to tell the peer.
    pub forward_tsns_sent: u64,
    /// Message interleaving (RFC 8260 I-DATA) in use.
    pub interleaving: bool,
    /// Fast-recovery episodes.
    pub fast_recoveries: u64,
    /// TSNs the peer reported receiving twice: an upper bound on spurious
    /// retransmissions (RDB copies count too).
    pub spurious_estimate: u64,
    /// SCTP packets sent.
    pub packets_sent: u64,
    /// Bytes sent (SCTP packets, the UDP payload).
    pub bytes_sent: u64,
    /// SCTP packets received.
    pub packets_received: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// DATA chunks received.
    pub data_chunks_received: u64,
    /// Of those, duplicates.
    pub duplicate_chunks_received: u64,
    /// User messages handed in by the application.
    pub messages_sent: u64,
    /// User messages delivered to the application.
    pub messages_received: u64,
    /// Payload bytes delivered to the application.
    pub bytes_delivered: u64,
    /// SACKs sent.
    pub sacks_sent: u64,
    /// SACKs received.
    pub sacks_received: u64,
    /// Heartbeats sent.
    pub heartbeats_sent: u64,
    /// Largest SCTP packet this association sends, in bytes (see
    /// [`crate::PathMtu`]).
    pub pmtu: usize,
}

impl AssociationStats {
    pub(crate) fn read(a: &Proto, now: Instant) -> AssociationStats {
        let s = a.stats();
        let cc = a.congestion();
        let by = |r| s.data_chunks_sent(r);
        AssociationStats {
            srtt_ms: a.srtt().map(|d| d.as_millis_f64()),
            rto_ms: a.rto().as_millis_f64(),
            cwnd: cc.cwnd,
            ssthresh: cc.ssthresh,
            flight_bytes: a.flight_size(),
            peer_rwnd: a.peer_rwnd(),
            buffered_send_bytes: a.buffered_send_bytes(),
            thin: a.is_thin(),
            time_thin_ms: a.time_thin(now).as_millis_f64(),
            thin_transitions: s.thin_transitions,
            rtt_samples: s.rtt_samples,
            data_rtt_samples: s.data_rtt_samples,
            data_chunks_new: by(TxReason::New),
            retransmissions: RetransmissionsByCause {
                fast: by(TxReason::FastRetransmit),
                timeout: by(TxReason::TimeoutRetransmit),
                bundled: by(TxReason::BundledOnRetransmit),
                early: by(TxReason::EarlyRetransmit),
                early_fast: by(TxReason::EarlyFastRetransmit),
                probe: by(TxReason::Probe),
            },
            redundant_chunks: by(TxReason::RedundantBundle),
            redundant_bytes: s.redundant_bytes,
            t3_expiries: s.t3_expiries,
            t3_postponed: s.t3_postponed,
            fast_recoveries: s.fast_recoveries,
            abandoned_messages: s.abandoned_messages,
            forward_tsns_sent: s.forward_tsns_sent,
            interleaving: a.interleaving(),
            spurious_estimate: s.duplicates_reported,
            packets_sent: s.packets_sent,
            bytes_sent: s.bytes_sent,
            packets_received: s.packets_received,
            bytes_received: s.bytes_received,
            data_chunks_received: s.data_chunks_received,
            duplicate_chunks_received: s.duplicate_tsns_received,
            messages_sent: s.messages_submitted,
            messages_received: s.messages_delivered,
            bytes_delivered: s.bytes_delivered,
            sacks_sent: s.sacks_sent,
            sacks_received: s.sacks_received,
            heartbeats_sent: s.heartbeats_sent,
            pmtu: a.config().effective_pmtu(),
        }
    }

    /// Every retransmitted chunk, whatever the cause (RDB copies excluded).
    pub fn retransmitted_chunks(&self) -> u64 {
        let r = &self.retransmissions;
        r.fast + r.timeout + r.bundled + r.early + r.early_fast + r.probe
    }
}
