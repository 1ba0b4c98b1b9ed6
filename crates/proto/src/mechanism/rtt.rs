//! How RTT samples are taken, and the other timer safeguards of the
//! `production` preset (issue "recovery": thin-stream recovery against
//! unmodified receivers).
//!
//! # Why the RTO raced the peer's delayed SACK
//!
//! Every unmodified receiver delays its SACK (RFC 9260 §6.2: at most 200 ms,
//! or at the second packet): Linux, usrsctp/FreeBSD, dcSCTP and pion all use
//! 200 ms and every second packet. A thin stream's lone packet is therefore
//! acknowledged `RTT + 200 ms` after it was sent, and the first packet of a
//! pair `RTT + IAT` after. RFC 9260 (and lksctp) time one chunk at a time
//! (C4), and which chunk that is depends on the phase between the
//! application's sends and the SACKs: with 100 ms between messages over a
//! 100 ms round trip the timed chunk is always the *second* of a pair, whose
//! SACK is not delayed. SRTT settles at the path's 100 ms, RTTVAR decays to
//! the clock granularity G, the RTO sits on the 200 ms floor of `minrto`,
//! and the T3 timer of every first-of-pair packet expires exactly when its
//! SACK arrives: a spurious timeout for every second message (tohd ≈ 50 %
//! on a loss-free path). Nothing in the estimator is wrong; the samples
//! never see the delay the other half of the packets experiences.
//!
//! With redundant data bundling every chunk is sent again in the next
//! packet, so under Karn's rule (C5: no sample from a chunk sent more than
//! once) no chunk ever yields a sample and the RTO stays at RTO.Initial
//! (3 s for the `linux` family) for as long as the stream keeps sending.
//!
//! # What the documents' kernel did
//!
//! 000 §8 states that lksctp's RTO "remains unstable" because "the first
//! acknowledgement to arrive for a sample chunk ... is taken into account
//! without any means of detecting whether it is an acknowledgement of the
//! original transmission": the kernel of the documents did not apply Karn's
//! rule to its sample chunk. [`RttSampling::FirstAck`] models that, and the
//! `linux` family uses it: the timed chunk gives a sample at its first
//! acknowledgement, measured from its first transmission, whether or not it
//! was retransmitted or bundled since. With RDB this keeps samples flowing
//! (no 3 s RTO), and after a loss it inflates the estimate (the sample spans
//! the retransmission), which is the instability 000 §8 and 002 Fig. 5.23
//! describe.
//!
//! # What the `production` preset does (and why)
//!
//! - [`RttSampling::PerSack`]: every SACK that newly acknowledges data gives
//!   one sample, the time since the *earliest first transmission* among the
//!   chunks it newly acknowledges that were never retransmitted for loss
//!   (redundant copies do not disqualify a chunk: the sample is measured
//!   from the first copy, an upper bound of the true round trip, so it can
//!   only make the RTO larger, never cause a spurious timeout). Each SACK
//!   thus measures how long its oldest packet waited, delayed-SACK time
//!   included, whatever the phase.
//! - `rttvar_min` (RTTVAR floor, after dcSCTP's idea of sizing the variance
//!   for "RTT plus the delayed-ack time"): 4·RTTVAR is the only margin
//!   between the RTO and an acknowledgement that always arrives after the
//!   same delay; steady samples shrink it to G, about the receivers' timer
//!   slop (0-10 ms). A 10 ms floor keeps ≥ 40 ms.
//! - `control_rtt_seed_only`: HEARTBEAT-ACKs (and the handshake) are never
//!   delayed, so their round trips would pull an RTO that covers a
//!   delayed-SACK peer back down; they only seed the estimate before the
//!   first DATA sample.
//! - `handshake_rtt`: the INIT → INIT ACK round trip (active side) or the
//!   INIT ACK → COOKIE ECHO round trip measured with the cookie's own
//!   timestamp (passive side) seeds the estimate, so the first messages are
//!   not covered by RTO.Initial (3 s under `linux`, 1 s in RFC 9260).
//! - `sack_immediately`: the SACK-IMMEDIATELY flag (RFC 7053 I bit) on
//!   every DATA packet while the stream is thin. Linux, usrsctp/FreeBSD,
//!   dcSCTP and pion honour it; every packet of a thin stream is then
//!   acknowledged at once (thin streams send few packets, so the extra SACKs
//!   are cheap) and the RTT estimate is the path's. The documents' kernels
//!   predate RFC 7053 and ignore it: the other safeguards cover them.
//! - `t3_wait_for_newer_sack`: when T3 expires while a packet sent after
//!   the oldest outstanding one may still be acknowledged (its send time
//!   plus SRTT + 4·RTTVAR has not passed), the expiry is postponed once,
//!   to that time: that SACK reports on the older data too (it either
//!   acknowledges it, or opens a gap that fast retransmit acts on at once).
//!   Without it a lost SACK (5 % of them on the path) makes the T3
//!   of its packet race the next packet's SACK, exactly as the delayed SACK
//!   did. Postponed at most once per oldest chunk, so a blackout still
//!   times out.
//! - thin detection by packets per round trip
//!   ([`super::ThinRule::PacketsPerRtt`]): the App. F packet list counts a
//!   packet until a SACK *without gap blocks* covers it, so lost SACKs and
//!   an open gap inflate "packets in flight" exactly during recovery, and
//!   the stream loses its thin-stream mechanisms when it needs them. The
//!   production test counts the packets with new data the sender itself put
//!   on the wire within the last SRTT, which no lost or delayed SACK
//!   changes.

use serde::{Deserialize, Serialize};

/// Which RTT samples the estimator gets (RFC 9260 §6.3.1 C4/C5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RttSampling {
    /// RFC 9260 C4/C5: one chunk is timed at a time (the first new chunk
    /// sent while none is timed); no sample if it was sent more than once
    /// (Karn), redundant copies included.
    #[default]
    Karn,
    /// lksctp of the documents (000 §8): one chunk timed at a time; its first
    /// acknowledgement gives a sample measured from its first transmission,
    /// even if it was retransmitted or bundled since.
    FirstAck,
    /// Production: one sample per SACK that newly acknowledges data, from
    /// the earliest first transmission among the newly acknowledged chunks
    /// never retransmitted for loss (redundant copies allowed).
    PerSack,
}
