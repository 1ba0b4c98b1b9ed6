//! Congestion control state and the RFC 9260 §7.2 rules (single path).

/// Why the window is being reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossKind {
    /// Fast retransmit entering fast recovery (§7.2.4 step 1 / §7.2.3).
    FastRetransmit,
    /// T3-rtx expiry (§7.2.3).
    Timeout,
}

/// What a SACK acknowledged, as the window update needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckInfo {
    /// Payload bytes newly acknowledged by the cumulative ack and gap blocks.
    pub bytes_acked: u32,
    /// Flight size before the SACK was processed.
    pub flight_before: u32,
    /// Whether the cumulative TSN ack point advanced.
    pub cum_advanced: bool,
    /// Whether the sender is in fast recovery.
    pub in_fast_recovery: bool,
    /// Whether all outstanding data is now acknowledged.
    pub all_acked: bool,
}

/// cwnd, ssthresh and partial_bytes_acked of the one destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Congestion {
    pub cwnd: u32,
    pub ssthresh: u32,
    pub partial_bytes_acked: u32,
    pub mtu: u32,
}

impl Congestion {
    /// §7.2.1: initial cwnd as configured, ssthresh "arbitrarily high" (the
    /// peer's a_rwnd is used once known).
    pub fn new(initial_cwnd: u32, mtu: u32) -> Self {
        Congestion {
            cwnd: initial_cwnd,
            ssthresh: u32::MAX,
            partial_bytes_acked: 0,
            mtu,
        }
    }

    /// Slow start or congestion avoidance (§7.2.1, §7.2.2).
    pub fn rfc_on_ack(&mut self, ack: &AckInfo) {
        if ack.in_fast_recovery {
            // §7.2.1/§7.2.2: cwnd is not increased while in fast recovery.
            if ack.all_acked {
                self.partial_bytes_acked = 0;
            }
            return;
        }
        // "Fully utilized" (§7.2.1, §7.2.2): not even one more full-sized
        // packet would have fit, i.e. flight + MTU > cwnd. Comparing flight
        // >= cwnd exactly would never hold when packets are a little
        // smaller than the window's remainder.
        let full = ack.flight_before.saturating_add(self.mtu) > self.cwnd;
        if self.cwnd <= self.ssthresh {
            // §7.2.1: increase by at most min(bytes acked, MTU), only when the
            // window was fully used and the cum ack advanced.
            if ack.cum_advanced && full {
                self.cwnd = self.cwnd.saturating_add(ack.bytes_acked.min(self.mtu));
            }
        } else {
            // §7.2.2: partial_bytes_acked grows by every newly acked byte;
            // once it reaches cwnd (and the window was full) cwnd grows by one MTU.
            self.partial_bytes_acked = self.partial_bytes_acked.saturating_add(ack.bytes_acked);
            if self.partial_bytes_acked >= self.cwnd && full {
                self.partial_bytes_acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(self.mtu);
            }
        }
        // §7.2.2: "When all of the data transmitted by the sender has been
        // acknowledged by the receiver, partial_bytes_acked is initialized to 0."
        if ack.all_acked {
            self.partial_bytes_acked = 0;
        }
    }

    /// §7.2.3: ssthresh = max(cwnd/2, 4*MTU); cwnd = ssthresh on fast
    /// retransmit, 1*MTU on T3-rtx expiry.
    pub fn rfc_on_loss(&mut self, kind: LossKind) {
        self.ssthresh = (self.cwnd / 2).max(4 * self.mtu);
        self.cwnd = match kind {
            LossKind::FastRetransmit => self.ssthresh,
            LossKind::Timeout => self.mtu,
        };
        self.partial_bytes_acked = 0;
    }

    /// 004 §4 eq. 2: "cwnd = cwnd - [0.125 * cwnd]" on the first detection
    /// of congestion instead of halving. ssthresh takes the reduced value
    /// (with the §7.2.3 floor of 4*MTU) so fast recovery continues from it;
    /// a T3-rtx expiry still restarts from 1*MTU (§7.2.3; 004 changes only
    /// the decrease factor).
    pub fn decrease_0875_on_loss(&mut self, kind: LossKind) {
        self.ssthresh = (self.cwnd - self.cwnd / 8).max(4 * self.mtu);
        self.cwnd = match kind {
            LossKind::FastRetransmit => self.ssthresh,
            LossKind::Timeout => self.mtu,
        };
        self.partial_bytes_acked = 0;
    }

    /// Scalable TCP increase (004 §4 eq. 1 as 002 §3.1.8 states it:
    /// `cwnd += 0.01` per ACK with cwnd in packets, i.e. +0.01*MTU per MTU
    /// acknowledged, +1 % of cwnd per RTT) in congestion avoidance; slow
    /// start and the "fully utilized" condition as in §7.2.1/§7.2.2. The
    /// literal per-ACK `+0.01*cwnd` would grow exponentially within an RTT
    /// and is not used.
    pub fn scalable_on_ack(&mut self, ack: &AckInfo) {
        if ack.in_fast_recovery || self.cwnd <= self.ssthresh {
            self.rfc_on_ack(ack);
            return;
        }
        let full = ack.flight_before.saturating_add(self.mtu) > self.cwnd;
        if full {
            self.cwnd = self.cwnd.saturating_add((ack.bytes_acked / 100).max(1));
        }
        if ack.all_acked {
            self.partial_bytes_acked = 0;
        }
    }

    /// §7.2.1 idle reset is optional and not applied (noted in the report).
    /// Whether new data may start a packet: flight below cwnd (§6.1 B).
    pub fn allows(&self, flight: u32) -> bool {
        flight < self.cwnd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(bytes: u32, flight: u32) -> AckInfo {
        AckInfo {
            bytes_acked: bytes,
            flight_before: flight,
            cum_advanced: true,
            in_fast_recovery: false,
            all_acked: false,
        }
    }

    #[test]
    fn slow_start_grows_by_at_most_one_mtu_per_sack_when_window_full() {
        let mut c = Congestion::new(4380, 1472);
        c.rfc_on_ack(&ack(3000, 4380));
        assert_eq!(c.cwnd, 4380 + 1472);
        // Window not fully used (room for another full packet): no growth.
        c.rfc_on_ack(&ack(3000, 100));
        assert_eq!(c.cwnd, 4380 + 1472);
        c.rfc_on_ack(&ack(3000, 5852 - 1472));
        assert_eq!(c.cwnd, 4380 + 1472);
    }

    #[test]
    fn congestion_avoidance_grows_one_mtu_per_cwnd_acked() {
        let mut c = Congestion::new(10_000, 1000);
        c.ssthresh = 5000;
        c.rfc_on_ack(&ack(6000, 10_000));
        assert_eq!(c.cwnd, 10_000);
        c.rfc_on_ack(&ack(4000, 10_000));
        assert_eq!(c.cwnd, 11_000);
        assert_eq!(c.partial_bytes_acked, 0);
    }

    #[test]
    fn loss_reductions() {
        let mut c = Congestion::new(20_000, 1000);
        c.rfc_on_loss(LossKind::FastRetransmit);
        assert_eq!((c.cwnd, c.ssthresh), (10_000, 10_000));
        c.rfc_on_loss(LossKind::Timeout);
        assert_eq!((c.cwnd, c.ssthresh), (1000, 5000));
        c.rfc_on_loss(LossKind::Timeout);
        assert_eq!(
            (c.cwnd, c.ssthresh),
            (1000, 4000),
            "ssthresh floor is 4*MTU"
        );
    }

    #[test]
    fn decrease_0875_of_004() {
        let mut c = Congestion::new(80_000, 1000);
        c.decrease_0875_on_loss(LossKind::FastRetransmit);
        assert_eq!((c.cwnd, c.ssthresh), (70_000, 70_000));
        c.decrease_0875_on_loss(LossKind::Timeout);
        assert_eq!((c.cwnd, c.ssthresh), (1000, 61_250));
    }

    #[test]
    fn scalable_increase_one_percent_of_acked() {
        let mut c = Congestion::new(100_000, 1000);
        c.ssthresh = 50_000;
        c.scalable_on_ack(&ack(10_000, 100_000));
        assert_eq!(c.cwnd, 100_100);
        // Slow start unchanged.
        let mut s = Congestion::new(4000, 1000);
        s.scalable_on_ack(&ack(1000, 4000));
        assert_eq!(s.cwnd, 5000);
    }
}
