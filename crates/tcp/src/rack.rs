//! RACK time-based loss detection (RFC 8985 §6), as Linux runs it with
//! `tcp_recovery=1`. The tail loss probe (§7) is scheduled by the connection.

use crate::sender::Skb;
use std::collections::VecDeque;
use thinstream_base::{Duration, Instant};

#[derive(Clone, Debug, Default)]
pub(crate) struct Rack {
    /// `RACK.xmit_ts`/`RACK.end_seq`: the most recently sent segment known delivered.
    xmit: Option<Instant>,
    end_seq: u64,
    /// Its place in the send order (`Skb::tx_order`), for ties of time.
    order: u64,
    /// `RACK.rtt`.
    rtt: Duration,
    /// Highest end of any delivered segment (`RACK.fack`).
    fack: u64,
    /// `RACK.fack` before the ACK being processed (Linux `prior_fack`).
    prior_fack: u64,
    /// `RACK.reordering_seen`.
    pub(crate) reordering_seen: bool,
    /// `RACK.reo_wnd_mult` (Linux `reo_wnd_steps`); 0 stands for 1.
    reo_wnd_mult: u32,
    /// A D-SACK arrived that may widen the window (Linux `rack.dsack_seen`).
    dsack_round: bool,
    /// When the multiplier last grew: it grows at most once per round trip.
    last_grow: Option<Instant>,
    /// Recoveries left before the multiplier falls back to 1
    /// (`RACK.reo_wnd_persist`).
    persist: u32,
}

/// Recoveries a widened reordering window lasts (RFC 8985 §6.2 step 4,
/// Linux `TCP_RACK_RECOVERY_THRESH`).
const REO_WND_PERSIST: u32 = 16;

/// RFC 8985 `RACK_sent_after`, with ties of time broken by transmission
/// order. The RFC breaks them by sequence number, which is the same order
/// for the segments of one burst, the only way a kernel's timestamps tie. In
/// the simulator a retransmission and new data often leave at the same
/// instant (the periodic workload's write coincides with the SACK that
/// triggers the retransmission); by sequence the retransmission would count
/// as sent before the new segment, and the new segment's SACK, arriving just
/// ahead of the retransmission's, would mark it lost again at once.
fn sent_after(t1: Instant, order1: u64, t2: Instant, order2: u64) -> bool {
    t1 > t2 || (t1 == t2 && order1 > order2)
}

impl Rack {
    /// An ACK arrives: what it delivers is judged for reordering against
    /// the segments delivered before it. Linux compares a newly SACKed or
    /// cumulatively acknowledged, never retransmitted segment with the
    /// highest SACKed sequence before this ACK (`prior_fack` in `tcp_ack`,
    /// `tcp_clean_rtx_queue`), so an ACK that acknowledges a segment whose
    /// own ACK was lost while SACKing past a hole is not reordering.
    pub(crate) fn start_ack(&mut self) {
        self.prior_fack = self.fack;
    }

    /// Reordering reported another way (a D-SACK of a retransmitted
    /// segment already SACKed, starting at `seq`): seen if below the
    /// highest SACKed sequence (Linux `tcp_check_sack_reordering`).
    pub(crate) fn note_reordering(&mut self, seq: u64) {
        if seq < self.fack {
            self.reordering_seen = true;
        }
    }

    /// A D-SACK arrived (RFC 8985 §6.2 step 4). As Linux 6.x
    /// (`tcp_dsack_seen`), it widens the window only when reordering was
    /// seen before this ACK and it does not answer a tail loss probe (a
    /// timer, not RACK, sent that copy).
    pub(crate) fn on_dsack(&mut self, of_probe: bool) {
        if self.reordering_seen && !of_probe {
            self.dsack_round = true;
        }
    }

    /// After an ACK's deliveries (Linux `tcp_rack_update_reo_wnd`):
    /// `newest` is the send time of the most recently sent segment it newly
    /// delivered (`None`: it delivered nothing, and nothing changes). A
    /// pending D-SACK adds one `min_rtt / 4` step unless that segment left
    /// before the last step (once per round trip), and keeps the window for
    /// the next 16 recoveries; when they are spent, it falls back to one step.
    pub(crate) fn update_reo_wnd(&mut self, now: Instant, newest: Option<Instant>) {
        let Some(newest) = newest else {
            return;
        };
        if self.last_grow.is_some_and(|g| newest < g) {
            self.dsack_round = false;
        }
        if self.dsack_round {
            self.reo_wnd_mult = (self.reo_wnd_mult.max(1) + 1).min(255);
            self.dsack_round = false;
            self.last_grow = Some(now);
            self.persist = REO_WND_PERSIST;
        } else if self.persist == 0 {
            self.reo_wnd_mult = 1;
        }
    }

    /// `RACK.rtt`, once a segment has been delivered.
    pub(crate) fn rtt(&self) -> Option<Duration> {
        self.xmit.map(|_| self.rtt)
    }

    /// A recovery (fast or after a timeout) ended.
    pub(crate) fn on_recovery_end(&mut self) {
        self.persist = self.persist.saturating_sub(1);
    }

    /// §6.2 steps 1-3 for one newly delivered (cumulatively or selectively
    /// acknowledged) segment. `min_rtt` filters ambiguous samples from
    /// retransmitted segments (step 2; the model has no TSecr check).
    pub(crate) fn on_delivered(
        &mut self,
        now: Instant,
        xmit: Instant,
        order: u64,
        end_seq: u64,
        retransmitted: bool,
        min_rtt: Option<Duration>,
    ) {
        let rtt = now.saturating_duration_since(xmit);
        if !retransmitted && end_seq < self.prior_fack {
            self.reordering_seen = true;
        }
        self.fack = self.fack.max(end_seq);
        if retransmitted && min_rtt.is_some_and(|m| rtt < m) {
            return;
        }
        let newer = match self.xmit {
            None => true,
            Some(x) => sent_after(xmit, order, x, self.order),
        };
        if newer {
            self.xmit = Some(xmit);
            self.order = order;
            self.end_seq = end_seq;
            self.rtt = rtt;
        }
    }

    /// §6.2 step 4: the reordering window.
    pub(crate) fn reo_wnd(
        &self,
        in_recovery: bool,
        sacked: u64,
        dupthresh: u64,
        min_rtt: Option<Duration>,
        srtt: Option<Duration>,
    ) -> Duration {
        if !self.reordering_seen && (in_recovery || sacked >= dupthresh) {
            return Duration::ZERO;
        }
        let w = min_rtt.map_or(Duration::ZERO, |m| {
            m / 4 * u64::from(self.reo_wnd_mult.max(1))
        });
        match srtt {
            Some(s) => w.min(s),
            None => w,
        }
    }

    /// §6.2 step 5: marks segments sent before the last delivered one and
    /// older than `RACK.rtt + reo_wnd` as lost. Returns whether any was newly
    /// marked, and when to look again (the reordering timer).
    pub(crate) fn detect_loss(
        &self,
        now: Instant,
        rtx: &mut VecDeque<Skb>,
        reo_wnd: Duration,
    ) -> (bool, Option<Instant>) {
        let Some(rack_xmit) = self.xmit else {
            return (false, None);
        };
        let mut marked = false;
        let mut timeout: Option<Instant> = None;
        for s in rtx.iter_mut() {
            let in_flight = !s.sacked && (!s.lost || s.retrans_out);
            if !in_flight || !sent_after(rack_xmit, self.order, s.xmit, s.tx_order) {
                continue;
            }
            let deadline = s.xmit + self.rtt + reo_wnd;
            if deadline <= now {
                s.lost = true;
                s.retrans_out = false;
                marked = true;
            } else {
                timeout = Some(timeout.map_or(deadline, |t: Instant| t.max(deadline)));
            }
        }
        (marked, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn a_d_sack_below_the_highest_sack_is_reordering() {
        let mut rack = Rack::default();
        rack.start_ack();
        rack.on_delivered(t(120), t(20), 3, 300, false, None);
        rack.note_reordering(300);
        assert!(!rack.reordering_seen, "not below the highest SACK");
        rack.note_reordering(200);
        assert!(rack.reordering_seen);
        assert_eq!(
            rack.reo_wnd(true, 1, 3, Some(Duration::from_millis(100)), None),
            Duration::from_millis(25)
        );
    }

    #[test]
    fn d_sacks_after_reordering_widen_the_window_once_per_round_trip_for_16_recoveries() {
        let min_rtt = Some(Duration::from_millis(100));
        let srtt = Some(Duration::from_millis(110));
        let wnd = |r: &Rack| r.reo_wnd(true, 1, 3, min_rtt, srtt);
        let mut rack = Rack::default();
        // Before any reordering a D-SACK changes nothing.
        rack.on_dsack(false);
        rack.update_reo_wnd(t(100), Some(t(0)));
        assert_eq!(wnd(&rack), Duration::ZERO);
        rack.reordering_seen = true;
        assert_eq!(wnd(&rack), Duration::from_millis(25));
        // The D-SACK of a probe does not count.
        rack.on_dsack(true);
        rack.update_reo_wnd(t(200), Some(t(100)));
        assert_eq!(wnd(&rack), Duration::from_millis(25));
        // Another one does: 50 ms.
        rack.on_dsack(false);
        rack.update_reo_wnd(t(300), Some(t(200)));
        assert_eq!(wnd(&rack), Duration::from_millis(50));
        // A second D-SACK for data sent before that step: same round trip.
        rack.on_dsack(false);
        rack.update_reo_wnd(t(310), Some(t(250)));
        assert_eq!(wnd(&rack), Duration::from_millis(50));
        // An ACK that delivers nothing leaves it pending; the next round does count.
        rack.on_dsack(false);
        rack.update_reo_wnd(t(400), None);
        rack.update_reo_wnd(t(420), Some(t(320)));
        assert_eq!(wnd(&rack), Duration::from_millis(75));
        // Never beyond SRTT.
        for k in 0..3 {
            rack.on_dsack(false);
            rack.update_reo_wnd(t(500 + 100 * k), Some(t(450 + 100 * k)));
        }
        assert_eq!(wnd(&rack), Duration::from_millis(110));
        // 16 recoveries without a D-SACK: back to one step.
        for _ in 0..15 {
            rack.on_recovery_end();
        }
        rack.update_reo_wnd(t(900), Some(t(850)));
        assert_eq!(wnd(&rack), Duration::from_millis(110));
        rack.on_recovery_end();
        rack.update_reo_wnd(t(1000), Some(t(950)));
        assert_eq!(wnd(&rack), Duration::from_millis(25));
    }

    #[test]
    fn an_ack_after_a_lost_ack_is_not_reordering() {
        // Segments 1-3 (ends 100, 200, 300) sent at 0, 10, 20 ms; segment 2
        // lost, the ACK of segment 1 lost: the ACK of segment 3 acknowledges
        // segment 1 cumulatively and SACKs segment 3 (its SACK block is
        // processed first).
        let mut rack = Rack::default();
        rack.start_ack();
        rack.on_delivered(t(120), t(20), 3, 300, false, None);
        rack.on_delivered(t(120), t(0), 1, 100, false, None);
        assert!(!rack.reordering_seen);
        assert_eq!(
            rack.reo_wnd(true, 1, 3, Some(Duration::from_millis(100)), None),
            Duration::ZERO
        );
    }

    #[test]
    fn a_segment_delivered_below_an_earlier_ack_s_sack_is_reordering() {
        // Segment 3 SACKed by one ACK, segment 2 (never retransmitted)
        // delivered by a later one: it arrived out of order.
        let mut rack = Rack::default();
        rack.start_ack();
        rack.on_delivered(t(120), t(20), 3, 300, false, None);
        rack.start_ack();
        rack.on_delivered(t(125), t(10), 2, 200, false, None);
        assert!(rack.reordering_seen);
        assert_eq!(
            rack.reo_wnd(true, 1, 3, Some(Duration::from_millis(100)), None),
            Duration::from_millis(25)
        );
        // A retransmitted segment below it is not.
        let mut rack = Rack::default();
        rack.start_ack();
        rack.on_delivered(t(120), t(20), 3, 300, false, None);
        rack.start_ack();
        rack.on_delivered(t(225), t(125), 2, 200, true, None);
        assert!(!rack.reordering_seen);
    }
}
