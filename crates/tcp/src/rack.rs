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
    /// `RACK.reordering_seen`.
    pub(crate) reordering_seen: bool,
}

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
        if !retransmitted && end_seq < self.fack {
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
        let w = min_rtt.map_or(Duration::ZERO, |m| m / 4);
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
