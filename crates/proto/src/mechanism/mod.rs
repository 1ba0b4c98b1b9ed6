//! Decision points of loss recovery and congestion control.
//!
//! The association core never hard-codes a rule that a thin-stream mechanism
//! (design.md "Mechanisms"; spec §5) changes. Instead it asks [`Mechanisms`]
//! through one method per decision, with a [`SenderView`] of the sender
//! state. With `Mechanisms::default()` every method returns the RFC 9260
//! answer; the thin-stream switches are added as fields of [`Mechanisms`]
//! and consulted inside these methods, so a preset is a value, never a fork.
//!
//! Decision points (one method each):
//! - [`Mechanisms::rto_floor`]: the RTO lower bound after an RTT sample (§6.3.1 C6).
//! - [`Mechanisms::t3_backoff`]: the RTO after a T3-rtx expiry (§6.3.3 E2).
//! - [`Mechanisms::fast_retransmit_threshold`]: missing reports before FR (§7.2.4).
//! - [`Mechanisms::queue_on_fast_retransmit`]: which chunks a fast retransmit queues.
//! - [`Mechanisms::bundle_on_new_data`]: what rides along with new data.
//! - [`Mechanisms::t3_restart_on_partial_ack`]: the T3 deadline when a SACK
//!   acknowledges some but not all outstanding data (§6.3.2 R3).
//! - [`Mechanisms::cwnd_on_ack`] / [`Mechanisms::cwnd_on_loss`]: congestion
//!   window updates (§7.2.1, §7.2.2, §7.2.3).

use crate::association::congestion::{AckInfo, Congestion, LossKind};
use thinstream_base::trace::TxReason;
use thinstream_base::{Duration, Instant};

/// A read-only snapshot of the sender, handed to every decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderView {
    pub now: Instant,
    /// Packets sent that still carry at least one DATA chunk in flight
    /// (neither acknowledged nor marked for retransmission); the thin-stream
    /// test of seed 002 §4.2.1 compares this with its threshold.
    pub packets_in_flight: u32,
    /// Bytes of DATA payload in flight.
    pub flight_size: u32,
    /// DATA chunks sent and not yet acknowledged (cumulatively or by gap).
    pub outstanding_chunks: u32,
    /// DATA chunks queued and never sent.
    pub unsent_chunks: u32,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub mtu: u32,
    pub peer_rwnd: u32,
    pub srtt: Option<Duration>,
    pub rto: Duration,
}

/// What the fast-retransmit decision sees of one outstanding chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkView {
    /// Units (TSNs since the initial TSN) of the chunk.
    pub unit: u64,
    /// Acknowledged by a gap ack block.
    pub gap_acked: bool,
    /// Reached the fast-retransmit threshold in this SACK.
    pub reported_lost: bool,
    /// Transmissions so far.
    pub transmissions: u32,
    pub last_sent: Instant,
}

/// What to put in front of new data in a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewDataBundling {
    /// Only new data (RFC behaviour).
    Nothing,
    /// Outstanding, not gap-acknowledged chunks first (oldest first, as many
    /// as fit), then the new data (spec §5.6; recorded as
    /// [`TxReason::RedundantBundle`]).
    OutstandingFirst,
}

/// The mechanism switches of one association. `Default` is RFC 9260 with no
/// thin-stream mechanism. Fields are added by the mechanisms work; each
/// decision method below consults them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mechanisms {}

impl Mechanisms {
    /// The RFC 9260 behaviour (no mechanism).
    pub fn rfc() -> Self {
        Mechanisms::default()
    }

    /// §6.3.1 C6: "Whenever RTO is computed, if it is less than RTO.Min
    /// seconds, then it is rounded up to RTO.Min seconds."
    pub fn rto_floor(&self, _view: &SenderView, rto_min: Duration) -> Duration {
        rto_min
    }

    /// §6.3.3 E2: "set RTO <- RTO * 2 ('back off the timer')", capped by
    /// RTO.max (§6.3.1 C7).
    pub fn t3_backoff(&self, _view: &SenderView, rto: Duration, rto_max: Duration) -> Duration {
        rto.saturating_mul(2).min(rto_max)
    }

    /// §7.2.4: fast retransmit after `configured` (3) miss indications.
    pub fn fast_retransmit_threshold(&self, _view: &SenderView, configured: u32) -> u32 {
        configured.max(1)
    }

    /// Called on a fast retransmit for every outstanding chunk: `Some(reason)`
    /// queues it for retransmission. RFC: exactly the chunks reported lost.
    pub fn queue_on_fast_retransmit(
        &self,
        _view: &SenderView,
        chunk: &ChunkView,
    ) -> Option<TxReason> {
        chunk.reported_lost.then_some(TxReason::FastRetransmit)
    }

    /// What to bundle in front of new data. RFC: nothing.
    pub fn bundle_on_new_data(&self, _view: &SenderView) -> NewDataBundling {
        NewDataBundling::Nothing
    }

    /// §6.3.2 R3: "Whenever a SACK chunk is received that acknowledges the
    /// DATA chunk with the earliest outstanding TSN for that address, restart
    /// the T3-rtx timer for that address with its current RTO". `oldest_sent`
    /// is when the oldest chunk still outstanding was last sent.
    pub fn t3_restart_on_partial_ack(
        &self,
        view: &SenderView,
        rto: Duration,
        _oldest_sent: Option<Instant>,
    ) -> Instant {
        view.now + rto
    }

    /// Congestion window on a SACK that newly acknowledged data.
    pub fn cwnd_on_ack(&self, _view: &SenderView, cc: &mut Congestion, ack: &AckInfo) {
        cc.rfc_on_ack(ack);
    }

    /// Congestion window on loss detection (fast retransmit entering fast
    /// recovery, or T3-rtx expiry).
    pub fn cwnd_on_loss(&self, _view: &SenderView, cc: &mut Congestion, kind: LossKind) {
        cc.rfc_on_loss(kind);
    }
}
