//! Packetization-layer path MTU discovery for SCTP (RFC 8899 §6.2.1), in a
//! small form: once the association is up, the sender probes larger packet
//! sizes with a HEARTBEAT chunk padded by a PAD chunk (RFC 4820) to the size
//! under test, sent on its own. A HEARTBEAT ACK for a probe proves that
//! packets of that size reach the peer and are accepted by it; the
//! association then builds packets (and fragments new messages) up to that
//! size. A probe that is not answered within max(RTO, 1 s) is sent again;
//! after [`MAX_PROBES`] unanswered probes the size counts as too large and
//! the search halves the interval between the largest confirmed and the
//! smallest failed size, until the two are within [`RESOLUTION`] bytes.
//!
//! The probe tests the receiving stack as well as the path: a peer that
//! reads datagrams into smaller buffers than the path carries truncates the
//! probe, the checksum fails, and the search settles below that size
//! instead of breaking the association; a peer that drops any packet with a
//! chunk type it does not know (pion/sctp v1.11.3 does, although PAD's type
//! asks to be skipped) never answers, and the association keeps its base
//! size. usrsctp answers.
//!
//! Black holes after confirmation: when the retransmission timer expires
//! twice in a row while the packet size is above the configured base, the
//! association returns to the base size and searches again after
//! [`RAISE_INTERVAL`] (RFC 8899's PMTU_RAISE_TIMER). Chunks already built
//! at the larger size keep their size (a TSN is never re-fragmented).
//!
//! Off unless [`crate::Config::pmtu_probe_max`] is above
//! [`crate::Config::pmtu`]: the presets and the simulator never probe.

use bytes::Bytes;
use thinstream_base::{Duration, Instant};

use super::timers::Timer;
use super::Association;
use crate::wire::{Chunk, HeartbeatChunk, Packet, UnknownChunk, COMMON_HEADER_LEN};

/// The PAD chunk's type (RFC 4820): its two high bits (10) tell a receiver
/// that does not know it to skip it and go on with the packet.
pub const PAD_CHUNK_TYPE: u8 = 0x84;

/// Unanswered probes of one size before it counts as too large (RFC 8899
/// MAX_PROBES).
pub const MAX_PROBES: u32 = 3;
/// The search stops when confirmed and failed sizes are this close.
pub const RESOLUTION: usize = 64;
/// After a fall back to the base size, the search restarts this much later
/// (RFC 8899 PMTU_RAISE_TIMER).
pub const RAISE_INTERVAL: Duration = Duration::from_secs(600);
/// Shortest wait for a probe's answer (RFC 8899 §5.1.1: PROBE_TIMER not
/// below 1 s).
pub const MIN_PROBE_WAIT: Duration = Duration::from_secs(1);

/// The state of the search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PmtuSearch {
    /// The configured size: always usable, the fall-back.
    base: usize,
    /// The largest size to try.
    max: usize,
    /// Largest confirmed size (starts at `base`).
    floor: usize,
    /// Smallest size found too large (`None`: none yet).
    ceiling: Option<usize>,
    /// The outstanding probe: (heartbeat nonce, size).
    probe: Option<(u64, usize)>,
    /// Unanswered probes of the current candidate.
    tries: u32,
    /// Probe packets sent, and sizes confirmed (statistics).
    pub(crate) probes_sent: u64,
    pub(crate) confirmed: u64,
}

/// What the association does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Send a probe of `size` bytes with heartbeat nonce `nonce`, and wait.
    Probe { size: usize },
    /// The search is over (for now).
    Done,
}

impl PmtuSearch {
    /// `None` when probing is off (`max <= base`).
    pub(crate) fn new(base: usize, max: Option<usize>) -> Option<PmtuSearch> {
        let max = max?.min(65_507) & !3;
        (max > base).then_some(PmtuSearch {
            base,
            max,
            floor: base,
            ceiling: None,
            probe: None,
            tries: 0,
            probes_sent: 0,
            confirmed: 0,
        })
    }

    /// The size the next probe tests, or `None` when the search is over.
    fn candidate(&self) -> Option<usize> {
        match self.ceiling {
            // Try the largest size first: on loopback and most LANs it is
            // the answer, found with one probe.
            None => Some(self.max),
            Some(c) if c > self.floor + RESOLUTION => {
                Some((self.floor + (c - self.floor) / 2) & !3)
            }
            Some(_) => None,
        }
    }

    /// The probe timer fired (or the search starts): what to send now.
    pub(crate) fn on_timer(&mut self, nonce: u64) -> Step {
        if let Some((_, size)) = self.probe.take() {
            self.tries += 1;
            if self.tries >= MAX_PROBES {
                self.tries = 0;
                self.ceiling = Some(size);
            }
        }
        match self.candidate() {
            Some(size) => {
                self.probe = Some((nonce, size));
                self.probes_sent += 1;
                Step::Probe { size }
            }
            None => Step::Done,
        }
    }

    /// A HEARTBEAT ACK with `nonce` arrived: the confirmed size if it
    /// answers the outstanding probe.
    pub(crate) fn on_ack(&mut self, nonce: u64) -> Option<usize> {
        match self.probe {
            Some((n, size)) if n == nonce => {
                self.probe = None;
                self.tries = 0;
                self.floor = size;
                self.confirmed += 1;
                if size >= self.max {
                    self.ceiling = Some(size);
                }
                Some(size)
            }
            _ => None,
        }
    }

    /// Repeated timeouts at a confirmed size above the base: forget what
    /// was confirmed; returns the base size to fall back to.
    pub(crate) fn black_hole(&mut self) -> usize {
        self.floor = self.base;
        self.ceiling = None;
        self.probe = None;
        self.tries = 0;
        self.base
    }

    /// How long to wait for a probe's answer.
    pub(crate) fn wait(rto: Duration) -> Duration {
        rto.max(MIN_PROBE_WAIT)
    }

    /// Whether the search ended (nothing left to try).
    pub(crate) fn finished(&self) -> bool {
        self.probe.is_none() && self.candidate().is_none()
    }

    /// The size the association may use now.
    #[cfg(test)]
    pub(crate) fn current(&self) -> usize {
        self.floor
    }
}

impl Association {
    /// The probe timer: send the next probe (the previous one, if any, went
    /// unanswered), or end the search.
    pub(crate) fn on_pmtu_timer(&mut self, now: Instant) {
        if !self.may_send_data() {
            return;
        }
        let nonce = self.rng.next_u64();
        let Some(search) = self.pmtu_search.as_mut() else {
            return;
        };
        if let Step::Probe { size } = search.on_timer(nonce) {
            self.pmtu_probe_out = Some((nonce, size));
            self.timers
                .set(Timer::PmtuProbe, now + PmtuSearch::wait(self.rto.rto));
        }
    }

    /// A probe packet of exactly `size` bytes: a HEARTBEAT (nonce and
    /// time, the layout of ordinary heartbeats) and a PAD chunk.
    pub(crate) fn pmtu_probe_packet(&mut self, now: Instant, nonce: u64, size: usize) -> Packet {
        let mut info = Vec::with_capacity(16);
        info.extend_from_slice(&nonce.to_be_bytes());
        info.extend_from_slice(&now.as_nanos().to_be_bytes());
        let hb = Chunk::Heartbeat(HeartbeatChunk { info: info.into() });
        let pad = size.saturating_sub(COMMON_HEADER_LEN + hb.encoded_len() + 4) & !3;
        let pad = Chunk::Unknown(UnknownChunk {
            kind: PAD_CHUNK_TYPE,
            flags: 0,
            value: Bytes::from(vec![0u8; pad]),
        });
        self.stats.pmtu_probes_sent += 1;
        self.header(self.peer_tag, vec![hb, pad])
    }

    /// A HEARTBEAT ACK with `nonce`: if it answers the outstanding probe,
    /// packets of the probed size are used from now on and the search
    /// goes on at once. Returns whether it was a probe's answer.
    pub(crate) fn on_pmtu_probe_ack(&mut self, now: Instant, nonce: u64) -> bool {
        let Some(size) = self.pmtu_search.as_mut().and_then(|s| s.on_ack(nonce)) else {
            return false;
        };
        self.use_pmtu(size);
        if self.pmtu_search.as_ref().is_some_and(|s| !s.finished()) {
            self.timers.set(Timer::PmtuProbe, now);
        } else {
            self.timers.stop(Timer::PmtuProbe);
        }
        true
    }

    /// Called on every retransmission timeout: the second in a row at a
    /// discovered size above the base sends the association back to the
    /// base size, and the search resumes [`RAISE_INTERVAL`] later.
    pub(crate) fn pmtu_on_timeout(&mut self, now: Instant) {
        let Some(search) = self.pmtu_search.as_mut() else {
            return;
        };
        if self.error_count < 2 || self.config.pmtu <= search.base {
            return;
        }
        let base = search.black_hole();
        self.stats.pmtu_black_holes += 1;
        self.use_pmtu(base);
        self.timers.set(Timer::PmtuProbe, now + RAISE_INTERVAL);
    }

    /// Build packets of up to `size` bytes, and fragment new messages to
    /// fit them.
    fn use_pmtu(&mut self, size: usize) {
        self.config.pmtu = size;
        let frag = if self.tx.idata {
            self.config.max_fragment_idata()
        } else {
            self.config.max_fragment()
        };
        // Messages queued in the interleaving scheduler were counted in
        // fragments of the old size: the new size waits for it to empty.
        if self.tx.idata && !self.tx.sched.is_empty() {
            self.tx.frag_next = Some(frag);
        } else {
            self.tx.frag = frag;
            self.tx.frag_next = None;
        }
        self.cc.mtu = self.config.mtu_bytes();
        // The window always admits one packet of the new size.
        self.cc.cwnd = self.cc.cwnd.max(self.cc.mtu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_unless_the_maximum_is_above_the_base() {
        assert!(PmtuSearch::new(1472, None).is_none());
        assert!(PmtuSearch::new(1472, Some(1472)).is_none());
        assert!(PmtuSearch::new(1472, Some(1000)).is_none());
    }

    #[test]
    fn the_largest_size_answered_at_once_ends_the_search() {
        let mut s = PmtuSearch::new(1472, Some(16_384)).unwrap();
        assert_eq!(s.on_timer(7), Step::Probe { size: 16_384 });
        assert_eq!(s.on_ack(8), None, "another heartbeat's nonce");
        assert_eq!(s.on_ack(7), Some(16_384));
        assert!(s.finished());
        assert_eq!(s.current(), 16_384);
    }

    /// A peer that accepts up to 8192 bytes: the search converges below it
    /// within the resolution, after MAX_PROBES losses per failed size.
    #[test]
    fn a_limit_inside_the_range_is_found_within_the_resolution() {
        let limit = 8192;
        let mut s = PmtuSearch::new(1472, Some(16_384)).unwrap();
        let mut nonce = 0;
        let mut probes = 0;
        while let Step::Probe { size } = s.on_timer(nonce) {
            probes += 1;
            assert!(probes < 100, "the search must end");
            if size <= limit {
                assert_eq!(s.on_ack(nonce), Some(size));
            }
            nonce += 1;
        }
        assert!(
            s.current() <= limit && s.current() + RESOLUTION >= limit,
            "{}",
            s.current()
        );
        assert!(s.current() % 4 == 0);
    }

    #[test]
    fn a_peer_that_never_answers_leaves_the_base_size() {
        let mut s = PmtuSearch::new(1472, Some(9000)).unwrap();
        let mut probes = 0;
        while let Step::Probe { .. } = s.on_timer(probes) {
            probes += 1;
            assert!(probes < 100);
        }
        assert_eq!(s.current(), 1472);
        // Each size halves the interval: log2(7528 / 64) ~ 7 sizes.
        assert!(probes <= 8 * u64::from(MAX_PROBES), "{probes}");
    }

    #[test]
    fn a_black_hole_returns_to_the_base_and_searches_again() {
        let mut s = PmtuSearch::new(1200, Some(9000)).unwrap();
        assert_eq!(s.on_timer(1), Step::Probe { size: 9000 });
        assert_eq!(s.on_ack(1), Some(9000));
        assert_eq!(s.black_hole(), 1200);
        assert_eq!(s.current(), 1200);
        assert!(!s.finished());
        assert_eq!(s.on_timer(2), Step::Probe { size: 9000 });
    }
}
