//! Decision points of loss recovery and congestion control, and the
//! thin-stream mechanisms that change them.
//!
//! The association core never hard-codes a rule that a thin-stream mechanism
//! changes. Instead it asks [`Mechanisms`]
//! through one method per decision, with a [`SenderView`] of the sender
//! state. With `Mechanisms::default()` every method returns the RFC 9260
//! answer; each switch is a public field, so a preset is a value, never a
//! fork (see [`preset`] for the preset grammar and [`CATALOGUE`] for the
//! list of mechanisms with their sources).
//!
//! Decision points (one method each):
//! - [`Mechanisms::rto_floor`]: the RTO lower bound after an RTT sample (§6.3.1 C6).
//! - [`Mechanisms::t3_backoff`]: the RTO after a T3-rtx expiry (§6.3.3 E2).
//! - [`Mechanisms::fast_retransmit_threshold`]: missing reports before FR (§7.2.4).
//! - [`Mechanisms::early_retransmit`]: whether Early Retransmit fires on this SACK.
//! - [`Mechanisms::queue_on_fast_retransmit`]: which extra chunks a fast retransmit queues.
//! - [`Mechanisms::bundle_on_new_data`]: what rides along with new data.
//! - [`Mechanisms::t3_restart_on_partial_ack`]: the T3 deadline when a SACK
//!   acknowledges some but not all outstanding data (§6.3.2 R3).
//! - [`Mechanisms::cwnd_on_ack`] / [`Mechanisms::cwnd_on_loss`]: congestion
//!   window updates (§7.2.1, §7.2.2, §7.2.3).
//! - [`Mechanisms::efr_delay`]: the FreeBSD-style early fast retransmit timer.
//!
//! The thin-stream test itself (seed 002 §4.2.1) lives in [`thin`]; its
//! verdict at the moment of a decision is [`SenderView::thin`].
//!
//! # Implementation notes (what each switch does here, and where it deviates)
//!
//! - **Thin detection** ([`thin`]): the App. F packet list, kept only when a
//!   thin-gated switch (or `thin.trace`) or RDB is on, so the `rfc` path
//!   is untouched. The verdict is evaluated at each decision and traced as
//!   `Record::Thin` on every change.
//! - **minrto** (002 §4.2.3): while thin, the C6 floor is
//!   `min(RTO.Min, thin_min_rto)`, applied when the RTO is recomputed
//!   after an RTT sample (a stream that becomes thin keeps its RTO until the
//!   next sample, as the document says). The patch sets 200 ms even when
//!   RTO.Min is lower; here the floor is never raised.
//!   Consequence (not a deviation, but it differs from 002 Fig. 5.26(b)):
//!   with a jitter-free 100 ms RTT the RTO settles at the 200 ms floor, so
//!   for a stream sending every 250 ms T3 expires before the next packet
//!   exists and `mfr` can never act on a single loss; the first
//!   retransmissions of `thin` are then ~98% timeouts, where 002 reports
//!   fewer timeouts than unmodified lksctp. 002's share needs an RTO above
//!   IAT + RTT (350 ms) for most losses; what raised it in the testbed is
//!   not stated.
//! - **restart** (002 §4.2.4): when a SACK advances the cumulative ack with
//!   data still outstanding, T3 expires at `earliest send time of a chunk
//!   in flight + RTO`, or at once if that is past. Not gated by thin.
//! - **lt** (002 §4.2.5): the patch's semantics: while
//!   thin the RTO is not doubled on T3 expiry (not recomputed either, unlike
//!   the TCP version). Because the packet list counts every retransmission
//!   as a packet in flight until a gap-free SACK, a chunk lost four times in
//!   a row makes the stream thick and the doubling resumes, as in the patch.
//! - **mfr** (002 §4.2.6): threshold 1 while thin, else the configured
//!   threshold (the patch hard-codes 3, which is also `linux`'s; with
//!   `+frt=N` the N applies when thick).
//! - **bfr** (002 §4.2.7): on a fast retransmit while thin every chunk in
//!   flight is queued too (`BundledOnRetransmit`); the packetizer fills the
//!   first packet up to the PMTU, the rest follows as cwnd allows (the
//!   standard accounting of RFC 9260 §7.2).
//! - **rdb** (002 §4.2.8, App. F): only on packets with new data and no
//!   retransmission; the chunks in flight older than the new data are
//!   spliced in front, oldest first, stopping at the first that does not
//!   fit the PMTU (or the optional payload limit for new + bundled bytes,
//!   002 Table 4.1 semantics). Limits of 002 §7.3: thin only (default;
//!   `rdb-always` lifts it), IAT (interval between the last two application
//!   submissions) > SRTT, and at most N packets in flight. Redundant copies
//!   count as transmissions for Karn's rule.
//! - **er-byte / er-packet** (003 §2.2/§2.3): judged after each SACK with
//!   new gap acks. "Outstanding" = sent and not cumulatively acknowledged
//!   (gap-acked included); packets are counted by the latest transmission
//!   of each chunk. "No new data can be sent" = nothing unsent, or the
//!   peer's rwnd is smaller than the next chunk (cwnd does not count, as in
//!   003). Byte-based never fires with `ownd <= SMSS` (003 §2.3's argument),
//!   SMSS = the largest DATA payload of one packet. The chunks reported
//!   missing by that SACK are retransmitted as `EarlyRetransmit`; the
//!   rest is a fast retransmit (once per chunk, fast recovery, cwnd).
//!   The "four" of 003 (`opkt < 4`, `ownd < 4*SMSS`) is read as the
//!   configured fast-retransmit threshold + 1 (3 + 1 in RFC 9260, where
//!   both readings agree): 003 §2.1 derives it from a threshold of three
//!   ("less than four ... not possible to invoke fast retransmit at all"),
//!   and 003's own baseline needed four reports (§4.1 footnote 4) while its
//!   ER recovered every message but the last of a 4-message burst in
//!   ~60 ms (§4.1, Fig. 2) -- the first message has 4 packets outstanding
//!   and gets only 3 reports, so with a literal `opkt < 4` it would have
//!   waited for the timeout like the standard version (~110 ms). The last
//!   message of a burst gets no report before the next burst, whose
//!   packets are outstanding too, so ER cannot help it (003: "similar to
//!   standard SCTP, required about 200 ms").
//! - **efr** (000 §2; FreeBSD has no published description, so this is the
//!   documents' description): while `flight < cwnd` and an RTT sample exists,
//!   one timer runs to `earliest send time of a chunk in flight + SRTT +
//!   RTTVAR` (the earliest of the per-packet timers). On expiry, if still
//!   `flight < cwnd`, every chunk in flight sent at least SRTT + RTTVAR ago
//!   is retransmitted (`EarlyFastRetransmit`), each at most once (like the
//!   §7.2.4 once-only rule, which keeps it from firing every RTT for a chunk
//!   lost twice), and cwnd is reduced by one MTU (not below one MTU) with no
//!   slow start and no ssthresh change ("reduces the congestion window by
//!   one", the unit not stated; we read it as one MTU).
//!   The timer never runs shorter than `efr_min`, 250 ms by default: that
//!   is FreeBSD's minimum early-fast-retransmit timer
//!   (`net.inet.sctp.early_fast_retran_msec`, "the minimum amount of time
//!   before an early FR"). Without it, against a receiver that delays its
//!   SACKs by up to 200 ms, `SRTT + RTTVAR` (about the path's RTT) expires
//!   before almost every delayed SACK, and EFR resent most messages; with
//!   it EFR acts only when a SACK is really late, which is what 000 Table 2
//!   reports ("rarely triggers").
//! - **RTT sampling, RTTVAR floor, SACK-IMMEDIATELY, handshake seed, T3
//!   waiting for a newer SACK, thin by packets per RTT**: see [`rtt`] (the
//!   `production` preset's safeguards and the `linux` family's
//!   first-acknowledgement sampling of 000 §8).
//! - **cc004** (004 §4 eq. 2): `ssthresh = max(cwnd - cwnd/8, 4*MTU)`;
//!   fast retransmit: `cwnd = ssthresh`; T3 expiry: `cwnd = 1*MTU` as in
//!   §7.2.3 (004 changes only the factor).
//! - **stcp** (004 §4 eq. 1 read as 002 §3.1.8 states Scalable TCP):
//!   `+0.01*MTU` per MTU acknowledged in congestion avoidance (+1 % of cwnd
//!   per RTT), not the literal `+0.01*cwnd` per ACK, which would grow
//!   exponentially within one round trip.
//! - Per association: [`crate::Association::set_mechanisms`],
//!   [`crate::Endpoint::set_mechanisms`].

pub mod preset;
pub mod rtt;
pub mod thin;

use crate::association::congestion::{AckInfo, Congestion, LossKind};
use serde::{Deserialize, Serialize};
use thinstream_base::trace::TxReason;
use thinstream_base::{Duration, Instant};

pub use preset::{PresetError, CATALOGUE, PRESETS};
pub use rtt::RttSampling;
pub use thin::{ThinRule, ThinTracker};

/// A read-only snapshot of the sender, handed to every decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderView {
    pub now: Instant,
    /// Packets in flight as the thin-stream test counts them (seed 002
    /// Fig. 4.15 / App. F packet list; see [`ThinTracker`]).
    pub packets_in_flight: u32,
    /// The thin-stream threshold in force: thin ⇔ `packets_in_flight < thin_threshold`.
    pub thin_threshold: u32,
    /// The thin-stream verdict at this moment (002 §4.2.1, evaluated at
    /// every decision so a stream switches dynamically, 000 §7.2).
    pub thin: bool,
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
    pub rttvar: Duration,
    pub rto: Duration,
    /// Interval between the last two messages the application submitted.
    pub last_message_interval: Option<Duration>,
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

/// What Early Retransmit needs to know about the outstanding data when a
/// SACK has been processed (003 §2.2, §2.3; RFC 5827).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutstandingView {
    /// Packets (latest transmissions) with DATA sent and not cumulatively acknowledged.
    pub packets: u32,
    /// Of those, packets whose every chunk is gap-acknowledged.
    pub packets_acked: u32,
    /// Payload bytes sent and not cumulatively acknowledged (`ownd`).
    pub bytes: u32,
    /// Of those, bytes gap-acknowledged.
    pub bytes_acked: u32,
    /// Sender maximum segment size: the largest DATA payload of one packet.
    pub smss: u32,
    /// Whether new data could be sent now: unsent data exists and the
    /// peer's rwnd admits the next chunk (003 §2.2 condition).
    pub can_send_new: bool,
    /// The configured fast-retransmit threshold (missing reports, §7.2.4;
    /// 3 in RFC 9260, 4 in RFC 2960 / lksctp 2.6.15). Early Retransmit
    /// engages when fewer than `dup_threshold + 1` packets (bytes:
    /// `(dup_threshold + 1) * SMSS`) are outstanding, i.e. when the normal
    /// threshold can no longer be reached (003 §2.1; "four" in 003 §2.2/§2.3
    /// is that bound for a threshold of three).
    pub dup_threshold: u32,
}

/// What to put in front of new data in a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewDataBundling {
    /// Only new data (RFC behaviour).
    Nothing,
    /// Outstanding, not gap-acknowledged chunks first (oldest first, as many
    /// as fit, at most `max_bytes` payload in the packet in total), then the
    /// new data (recorded as [`TxReason::RedundantBundle`]).
    OutstandingFirst { max_bytes: Option<u32> },
}

/// Early Retransmit variant (003 §2.2, §2.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EarlyRetransmit {
    #[default]
    Off,
    /// Byte-based (draft-allman-tcp-early-rexmt / RFC 5827 as 003 §2.2
    /// states it): `ownd < 4*SMSS`, nothing new can be sent, and
    /// `ownd - SMSS` bytes acknowledged (never when `ownd <= SMSS`, 003 §2.3).
    /// The 4 is the fast-retransmit threshold + 1 ([`OutstandingView::dup_threshold`]).
    Bytes,
    /// Packet-based modification of 003 §2.3: `opkt < 4`, nothing new can be
    /// sent, and `opkt - 1` packets acknowledged (4 = threshold + 1, as above).
    Packets,
}

/// The thin-stream test's parameters (seed 002 §4.2.1, §4.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThinDetection {
    pub rule: ThinRule,
    /// Packets required to trigger a fast retransmit (3); the base limit is
    /// `pttfr + 1` (002 eq. 4.2; App. F hard-codes 4).
    pub pttfr: u32,
    /// Fixed threshold overriding the computed one (thin ⇔ packets in
    /// flight `<` this).
    pub fixed_threshold: Option<u32>,
    /// Recompute the loss-adjusted threshold every this many DATA packets (App. F: 30).
    pub recompute_every: u32,
    /// Track and trace (`Record::Thin`) the verdict even if no thin-gated
    /// mechanism is on.
    pub trace: bool,
}

impl Default for ThinDetection {
    fn default() -> Self {
        ThinDetection {
            rule: ThinRule::SctpLossAdjusted,
            pttfr: 3,
            fixed_threshold: None,
            recompute_every: 30,
            trace: false,
        }
    }
}

/// Redundant data bundling on new transmissions (002 §4.2.8, App. F
/// `thin_bundling_outstanding`; limits of 002 §7.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rdb {
    pub enabled: bool,
    /// Only while the stream is thin (App. F gates it so; 002 §7.3).
    pub only_when_thin: bool,
    /// At most this many payload bytes in the packet, new plus bundled
    /// (like `tcp_rdb_max_bundle_bytes`, 002 §4.1.5); `None` = PMTU only.
    pub max_bytes: Option<u32>,
    /// Only when the message inter-arrival time exceeds SRTT (002 §7.3:
    /// RDB then acts only upon loss).
    pub only_when_iat_exceeds_rtt: bool,
    /// Not when more than this many packets are in flight (002 §7.3).
    pub max_packets_in_flight: Option<u32>,
}

impl Default for Rdb {
    fn default() -> Self {
        Rdb {
            enabled: false,
            only_when_thin: true,
            max_bytes: None,
            only_when_iat_exceeds_rtt: false,
            max_packets_in_flight: None,
        }
    }
}

/// The mechanism switches of one association. `Default` is RFC 9260 with no
/// thin-stream mechanism. Serde-friendly (TOML/JSON): every field has a
/// default, unknown fields are rejected; durations are integers of
/// nanoseconds (`thinstream_base::Duration`). In TOML, for example:
///
/// ```toml
/// linear_timeouts = true
/// min_rto = true
/// thin_min_rto = 200000000   # 200 ms
/// early_retransmit = "packets"
/// [rdb]
/// enabled = true
/// max_bytes = 700
/// [thin]
/// rule = "sctp-loss-adjusted"   # or "tcp-packets-out"
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Mechanisms {
    /// Thin-stream detection parameters (used by the thin-gated switches).
    pub thin: ThinDetection,
    /// RTO floor `thin_min_rto` instead of RTO.Min while thin, applied when
    /// the RTO is recomputed (002 §4.2.3, `sctp_thin_minrto`).
    pub min_rto: bool,
    /// The thin RTO floor (200 ms = Linux TCP's RTO_min, 002 §4.2.3).
    pub thin_min_rto: Duration,
    /// T3 restart on a partial ack expires at oldest outstanding send time
    /// + RTO (002 §4.2.4, `sctp_thin_restart_timer`; not gated by thin).
    pub restart_correction: bool,
    /// No RTO doubling on T3 expiry while thin (002 §4.2.5 / App. F,
    /// `sctp_thin_expbackoff`).
    pub linear_timeouts: bool,
    /// Fast retransmit on the first missing report while thin (002 §4.2.6, `sctp_thin_fr`).
    pub modified_fast_retransmit: bool,
    /// On a fast retransmit while thin, queue every outstanding chunk that
    /// is not gap-acked (002 §4.2.7, `sctp_thin_bundling_fr`).
    pub bundle_on_fast_retransmit: bool,
    /// Redundant data bundling on new transmissions (002 §4.2.8).
    pub rdb: Rdb,
    /// Early Retransmit (003 §2.2 byte-based, §2.3 packet-based).
    pub early_retransmit: EarlyRetransmit,
    /// FreeBSD-style early fast retransmit (000 §2; see [`Mechanisms::efr_delay`]).
    pub early_fast_retransmit: bool,
    /// Congestion decrease to 0.875·cwnd instead of ½ (004 §4 eq. 2).
    pub cc_decrease_0875: bool,
    /// Scalable-TCP increase in congestion avoidance (004 §4 eq. 1, 002 §3.1.8).
    pub cc_scalable_increase: bool,
    /// Minimum early-fast-retransmit timer (FreeBSD's
    /// `net.inet.sctp.early_fast_retran_msec`, default 250 ms): the EFR
    /// timer never runs shorter than this.
    pub efr_min: Duration,
    /// Which RTT samples the estimator gets ([`rtt`]).
    pub rtt_sampling: RttSampling,
    /// RTTVAR never below this after a sample (0 = only the clock
    /// granularity G of C3; [`rtt`]).
    pub rttvar_min: Duration,
    /// HEARTBEAT-ACK and handshake round trips only seed the estimate:
    /// ignored once a DATA sample exists ([`rtt`]).
    pub control_rtt_seed_only: bool,
    /// Seed the RTO from the handshake's round trip ([`rtt`]).
    pub handshake_rtt: bool,
    /// Set the SACK-IMMEDIATELY flag (RFC 7053) on DATA packets while thin ([`rtt`]).
    pub sack_immediately: bool,
    /// Postpone a T3 expiry once while a newer packet's SACK is still
    /// expected ([`rtt`]).
    pub t3_wait_for_newer_sack: bool,
}

impl Default for Mechanisms {
    fn default() -> Self {
        Mechanisms {
            thin: ThinDetection::default(),
            min_rto: false,
            thin_min_rto: Duration::from_millis(200),
            restart_correction: false,
            linear_timeouts: false,
            modified_fast_retransmit: false,
            bundle_on_fast_retransmit: false,
            rdb: Rdb::default(),
            early_retransmit: EarlyRetransmit::Off,
            early_fast_retransmit: false,
            cc_decrease_0875: false,
            cc_scalable_increase: false,
            efr_min: Duration::from_millis(250),
            rtt_sampling: RttSampling::Karn,
            rttvar_min: Duration::ZERO,
            control_rtt_seed_only: false,
            handshake_rtt: false,
            sack_immediately: false,
            t3_wait_for_newer_sack: false,
        }
    }
}

impl Mechanisms {
    /// The RFC 9260 behaviour (no mechanism).
    pub fn rfc() -> Self {
        Mechanisms::default()
    }

    /// Every thin-stream mechanism of 002 §4.2 (the `thin` preset's set):
    /// minRTO, timer-restart correction, linear timeouts, modified fast
    /// retransmit, bundling on fast retransmit.
    pub fn thin_002() -> Self {
        Mechanisms {
            min_rto: true,
            restart_correction: true,
            linear_timeouts: true,
            modified_fast_retransmit: true,
            bundle_on_fast_retransmit: true,
            ..Mechanisms::default()
        }
    }

    /// Whether any switch consults the thin-stream test (or tracing of it
    /// was asked for): only then is the packet list kept and `Record::Thin`
    /// written, so the `rfc` trace is unchanged.
    pub fn uses_thin_detection(&self) -> bool {
        self.thin.trace
            || self.min_rto
            || self.linear_timeouts
            || self.modified_fast_retransmit
            || self.bundle_on_fast_retransmit
            || (self.rdb.enabled && self.rdb.only_when_thin)
    }

    /// §6.3.1 C6: "Whenever RTO is computed, if it is less than RTO.Min
    /// seconds, then it is rounded up to RTO.Min seconds." 002 §4.2.3: while
    /// thin the floor is 200 ms (never raised above RTO.Min).
    pub fn rto_floor(&self, view: &SenderView, rto_min: Duration) -> Duration {
        if self.min_rto && view.thin {
            rto_min.min(self.thin_min_rto)
        } else {
            rto_min
        }
    }

    /// §6.3.3 E2: "set RTO <- RTO * 2 ('back off the timer')", capped by
    /// RTO.max (§6.3.1 C7). 002 §4.2.5 (the App. F patch's
    /// semantics): while thin the RTO is left unchanged.
    pub fn t3_backoff(&self, view: &SenderView, rto: Duration, rto_max: Duration) -> Duration {
        if self.linear_timeouts && view.thin {
            rto.min(rto_max)
        } else {
            rto.saturating_mul(2).min(rto_max)
        }
    }

    /// §7.2.4: fast retransmit after `configured` (3) miss indications;
    /// 002 §4.2.6: after the first one while thin.
    pub fn fast_retransmit_threshold(&self, view: &SenderView, configured: u32) -> u32 {
        if self.modified_fast_retransmit && view.thin {
            1
        } else {
            configured.max(1)
        }
    }

    /// Early Retransmit: whether the chunks reported missing by this SACK
    /// (and below the threshold) are retransmitted now, as
    /// [`TxReason::EarlyRetransmit`].
    pub fn early_retransmit(&self, o: &OutstandingView) -> bool {
        if o.can_send_new {
            return false;
        }
        match self.early_retransmit {
            EarlyRetransmit::Off => false,
            // 003 §2.2: ownd < 4*SMSS, FR when ownd - SMSS bytes are
            // acknowledged; 003 §2.3: with ownd <= SMSS that can never happen.
            // The 4 is `dup_threshold + 1` (see `OutstandingView::dup_threshold`).
            EarlyRetransmit::Bytes => {
                let limit = u64::from(o.dup_threshold.max(1)) + 1;
                u64::from(o.bytes) < limit * u64::from(o.smss)
                    && o.bytes > o.smss
                    && o.bytes_acked >= o.bytes - o.smss
            }
            // 003 §2.3: opkt < 4, FR when opkt - 1 packets are acknowledged
            // (a single outstanding packet cannot be early-retransmitted).
            // The 4 is `dup_threshold + 1`: 003's baseline needed four
            // reports (§4.1 footnote 4) and its ER recovered the first
            // message of a 4-message burst (4 packets outstanding, 3
            // reports) in ~60 ms (§4.1, Fig. 2), as well as message 4 of a
            // 7-message burst "without waiting for the next burst" (Fig. 4).
            EarlyRetransmit::Packets => {
                o.packets <= o.dup_threshold.max(1)
                    && o.packets >= 2
                    && o.packets_acked >= o.packets - 1
            }
        }
    }

    /// Called on a fast retransmit for every outstanding chunk that was not
    /// reported lost: `Some(reason)` queues it too. RFC: none. 002 §4.2.7
    /// (`check_stream_before_add`): while thin, every chunk not gap-acked.
    pub fn queue_on_fast_retransmit(
        &self,
        view: &SenderView,
        chunk: &ChunkView,
    ) -> Option<TxReason> {
        if chunk.reported_lost {
            return Some(TxReason::FastRetransmit);
        }
        (self.bundle_on_fast_retransmit && view.thin && !chunk.gap_acked)
            .then_some(TxReason::BundledOnRetransmit)
    }

    /// What to bundle in front of new data. RFC: nothing. 002 §4.2.8 with
    /// the activation limits of 002 §7.3.
    pub fn bundle_on_new_data(&self, view: &SenderView) -> NewDataBundling {
        let r = &self.rdb;
        if !r.enabled || (r.only_when_thin && !view.thin) {
            return NewDataBundling::Nothing;
        }
        if let Some(cap) = r.max_packets_in_flight {
            if view.packets_in_flight > cap {
                return NewDataBundling::Nothing;
            }
        }
        if r.only_when_iat_exceeds_rtt {
            match (view.last_message_interval, view.srtt) {
                (Some(iat), Some(srtt)) if iat > srtt => {}
                _ => return NewDataBundling::Nothing,
            }
        }
        NewDataBundling::OutstandingFirst {
            max_bytes: r.max_bytes,
        }
    }

    /// §6.3.2 R3: "Whenever a SACK chunk is received that acknowledges the
    /// DATA chunk with the earliest outstanding TSN for that address, restart
    /// the T3-rtx timer for that address with its current RTO". `oldest_sent`
    /// is when the earliest-sent chunk still in flight (not gap-acked) was
    /// sent. 002 §4.2.4: with the correction the timer expires one RTO after
    /// that send time (at once if that is already past).
    pub fn t3_restart_on_partial_ack(
        &self,
        view: &SenderView,
        rto: Duration,
        oldest_sent: Option<Instant>,
    ) -> Instant {
        match oldest_sent {
            Some(sent) if self.restart_correction => (sent + rto).max(view.now),
            _ => view.now + rto,
        }
    }

    /// Congestion window on a SACK that newly acknowledged data.
    pub fn cwnd_on_ack(&self, _view: &SenderView, cc: &mut Congestion, ack: &AckInfo) {
        if self.cc_scalable_increase {
            cc.scalable_on_ack(ack);
        } else {
            cc.rfc_on_ack(ack);
        }
    }

    /// Congestion window on loss detection (fast retransmit entering fast
    /// recovery, or T3-rtx expiry).
    pub fn cwnd_on_loss(&self, _view: &SenderView, cc: &mut Congestion, kind: LossKind) {
        if self.cc_decrease_0875 {
            cc.decrease_0875_on_loss(kind);
        } else {
            cc.rfc_on_loss(kind);
        }
    }

    /// FreeBSD-style early fast retransmit (000 §2): `Some(delay)` arms a
    /// timer `delay` after the oldest packet in flight was sent, while the
    /// flight is below cwnd; the timer "closely follows RTT + RTTVAR", and
    /// never runs shorter than `efr_min` (FreeBSD's minimum, 250 ms by
    /// default: why 000 Table 2 finds that EFR "rarely triggers"). No RTT
    /// sample yet: not armed.
    pub fn efr_delay(&self, view: &SenderView) -> Option<Duration> {
        if !self.early_fast_retransmit || view.flight_size >= view.cwnd {
            return None;
        }
        view.srtt.map(|s| (s + view.rttvar).max(self.efr_min))
    }

    /// Production thin-stream set ([`rtt`] explains each safeguard): the
    /// 002 §4.2 mechanisms, redundant data bundling, per-SACK RTT samples
    /// with a 10 ms RTTVAR floor, control round trips as seeds only, a
    /// handshake-seeded RTO, SACK-IMMEDIATELY while thin, T3 waiting once
    /// for a newer packet's SACK, thin detection by packets per round trip.
    pub fn production() -> Self {
        let mut m = Mechanisms::thin_002();
        m.thin.rule = ThinRule::PacketsPerRtt;
        m.rdb.enabled = true;
        m.rtt_sampling = RttSampling::PerSack;
        m.rttvar_min = Duration::from_millis(10);
        m.control_rtt_seed_only = true;
        m.handshake_rtt = true;
        m.sack_immediately = true;
        m.t3_wait_for_newer_sack = true;
        m
    }
}
