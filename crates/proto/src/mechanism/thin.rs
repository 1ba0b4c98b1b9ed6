//! Thin-stream detection (seed 002 §4.2.1, Fig. 4.15, App. F; 000 §5.1).
//!
//! SCTP has no packet count of its own (chunks are re-bundled freely), so,
//! as the App. F patch does, one record per transmitted packet that carries
//! DATA is kept, represented by the highest TSN in it:
//!
//! - on transmit: append a record; `packets_in_flight += 1`; every
//!   `recompute_every` (30) packets recompute the threshold;
//! - on a SACK with gap blocks: for each record whose highest TSN lies in a
//!   block, mark it gap-acked (`packets_in_flight -= 1`); for each record
//!   whose highest TSN lies in a gap below the last block, count a loss
//!   indication; it is marked lost at the 3rd indication, or at the 1st
//!   while thin (App. F `loss_indication_update`). TSNs are visited in
//!   ascending order as the patch walks them;
//! - on a SACK without gap blocks: remove every record whose highest TSN is
//!   cumulatively acknowledged (decrementing `packets_in_flight` unless it
//!   was gap-acked). A SACK with gap blocks removes nothing: a patch quirk
//!   kept here on purpose, so the count matches the
//!   documents' kernel;
//! - on a T3-rtx timeout: mark lost every record not gap-acked and not yet
//!   lost that was sent more than `min_rtt + 10 ms` ago.
//!
//! Threshold (App. F lines 275-303, integer arithmetic, `L` = loss rate in
//! whole percent, truncated, capped at 99 so the division is defined):
//! `threshold = (pttfr+1) * (1000000 / (10000 - L*100)) / 100`, i.e.
//! `(pttfr + 1)/(1 - lossrate)` truncated. It starts at `pttfr + 1` = 4 (the
//! patch never initialises it, so we start from its first computed value
//! with no loss). The test is the
//! code's strict `packets_in_flight < threshold`.
//!
//! [`ThinRule::TcpPacketsOut`] is the TCP form of 002 §4.1.1 (`packets_out <
//! 4`, no loss adjustment), counted over the same packet list.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use thinstream_base::{Duration, Instant};

use super::ThinDetection;

/// Which thin-stream test.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThinRule {
    /// 002 eq. 4.2 / App. F: `packets_in_flight < (pttfr+1)/(1-lossrate)`,
    /// recomputed every 30 packets.
    #[default]
    SctpLossAdjusted,
    /// 002 §4.1.1 / App. E: `packets_in_flight < pttfr + 1` (= 4).
    TcpPacketsOut,
    /// Production ([`super::rtt`]): packets carrying new data that the
    /// sender put on the wire within the last SRTT (up to and including the
    /// latest) `< pttfr + 1`. Immune to lost or delayed SACKs, which inflate
    /// the App. F packet list during recovery. Before the first RTT sample
    /// the stream counts as thin.
    PacketsPerRtt,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PktStat {
    /// Highest unit (TSN) of the DATA chunks in the packet.
    highest: u64,
    sent: Instant,
    gap_acked: bool,
    marked_lost: bool,
    indicated_lost: u32,
}

/// The per-association packet list and loss estimate of App. F.
/// Aligned to a cache line (two lines): it is read on every packet (see
/// the layout note on [`Association`](crate::Association)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[repr(align(64))]
pub struct ThinTracker {
    list: VecDeque<PktStat>,
    packets_in_flight: u32,
    lost_packets: u64,
    total_xmt_packets: u64,
    /// Loss-adjusted threshold (App. F `thin_stream_threshold`); 0 = not yet set.
    adjusted: u32,
    min_rtt: Option<Duration>,
    /// Send times of the latest packets with new data ([`ThinRule::PacketsPerRtt`]).
    recent: VecDeque<Instant>,
    /// The smoothed RTT last reported ([`ThinRule::PacketsPerRtt`]).
    srtt: Option<Duration>,
    /// Packets with new data sent within one SRTT, counted at the latest one.
    per_rtt: u32,
}

impl ThinTracker {
    /// The heap memory the next packet touches (see `Transport::hot_memory`).
    pub(crate) fn hot_memory(&self, visit: &mut dyn FnMut(*const u8, usize)) {
        thinstream_base::drive::visit_deque(&self.list, visit);
        thinstream_base::drive::visit_deque(&self.recent, visit);
    }

    pub fn new(cfg: &ThinDetection) -> Self {
        ThinTracker {
            adjusted: cfg.pttfr.saturating_add(1),
            ..ThinTracker::default()
        }
    }

    pub fn packets_in_flight(&self) -> u32 {
        self.packets_in_flight
    }

    /// Packets with new data sent within one SRTT, counted when the latest
    /// was sent ([`ThinRule::PacketsPerRtt`]).
    pub fn packets_per_rtt(&self) -> u32 {
        self.per_rtt
    }

    /// The smoothed RTT changed (used by [`ThinRule::PacketsPerRtt`]).
    pub fn set_srtt(&mut self, srtt: Option<Duration>) {
        self.srtt = srtt;
    }

    /// Packets classified lost so far (for the loss estimate).
    pub fn lost_packets(&self) -> u64 {
        self.lost_packets
    }

    /// DATA packets transmitted so far.
    pub fn total_packets(&self) -> u64 {
        self.total_xmt_packets
    }

    /// The threshold in force: thin ⇔ packets in flight `<` this.
    pub fn threshold(&self, cfg: &ThinDetection) -> u32 {
        if let Some(t) = cfg.fixed_threshold {
            return t;
        }
        match cfg.rule {
            ThinRule::SctpLossAdjusted => self.adjusted,
            ThinRule::TcpPacketsOut | ThinRule::PacketsPerRtt => cfg.pttfr.saturating_add(1),
        }
    }

    pub fn is_thin(&self, cfg: &ThinDetection) -> bool {
        let count = match cfg.rule {
            ThinRule::PacketsPerRtt => self.per_rtt,
            _ => self.packets_in_flight,
        };
        count < self.threshold(cfg)
    }

    /// A packet carrying DATA (new or retransmitted) left; `highest` is the
    /// highest unit in it, `new_data` whether it carried never-sent data.
    pub fn on_packet_sent(
        &mut self,
        cfg: &ThinDetection,
        highest: u64,
        now: Instant,
        new_data: bool,
    ) {
        if cfg.rule == ThinRule::PacketsPerRtt && new_data {
            const KEEP: usize = 16;
            if self.recent.len() == KEEP {
                self.recent.pop_front();
            }
            self.recent.push_back(now);
            self.per_rtt = match self.srtt {
                Some(srtt) => self
                    .recent
                    .iter()
                    .filter(|&&t| now.saturating_duration_since(t) < srtt)
                    .count() as u32,
                None => 1,
            };
        }
        self.list.push_back(PktStat {
            highest,
            sent: now,
            gap_acked: false,
            marked_lost: false,
            indicated_lost: 0,
        });
        self.packets_in_flight += 1;
        self.total_xmt_packets += 1;
        if cfg.recompute_every > 0
            && self
                .total_xmt_packets
                .is_multiple_of(u64::from(cfg.recompute_every))
        {
            self.adjusted =
                Self::loss_adjusted(cfg.pttfr, self.lost_packets, self.total_xmt_packets);
        }
    }

    /// App. F lines 275-303 with `4` generalised to `pttfr + 1`.
    pub fn loss_adjusted(pttfr: u32, lost: u64, total: u64) -> u32 {
        let base = u64::from(pttfr) + 1;
        if total == 0 {
            return base as u32;
        }
        let loss_rate_x100 = lost.saturating_mul(10_000) / total;
        let l = (loss_rate_x100 / 100).min(99);
        let lim = base * (1_000_000 / (10_000 - (l * 10_000) / 100)) / 100;
        u32::try_from(lim).unwrap_or(u32::MAX)
    }

    /// A SACK: `cum` = units below it are cumulatively acknowledged;
    /// `blocks` = gap-acked unit ranges (inclusive), ascending.
    pub fn on_sack(&mut self, cfg: &ThinDetection, cum: u64, blocks: &[(u64, u64)]) {
        if blocks.is_empty() {
            let mut pif = self.packets_in_flight;
            self.list.retain(|p| {
                let keep = p.highest >= cum;
                if !keep && !p.gap_acked {
                    pif -= 1;
                }
                keep
            });
            self.packets_in_flight = pif;
            return;
        }
        let top = blocks.iter().map(|b| b.1).max().unwrap_or(0);
        // Records touched, visited in ascending TSN order (stable for equal
        // TSNs: transmission order), as the patch walks TSNs.
        let mut touched: Vec<(u64, usize)> = self
            .list
            .iter()
            .enumerate()
            .filter(|(_, p)| p.highest >= cum && p.highest <= top)
            .map(|(i, p)| (p.highest, i))
            .collect();
        touched.sort_by_key(|&(h, _)| h);
        for (h, i) in touched {
            let in_block = blocks.iter().any(|&(lo, hi)| lo <= h && h <= hi);
            let threshold = self.threshold(cfg);
            let pif = self.packets_in_flight;
            let p = &mut self.list[i];
            if in_block {
                if !p.gap_acked {
                    p.gap_acked = true;
                    self.packets_in_flight -= 1;
                }
            } else if !p.marked_lost && !p.gap_acked {
                p.indicated_lost += 1;
                if p.indicated_lost == 3 || (pif < threshold && p.indicated_lost == 1) {
                    p.marked_lost = true;
                    self.lost_packets += 1;
                }
            }
        }
    }

    /// T3-rtx expiry (App. F lines 1078-1094).
    pub fn on_timeout(&mut self, now: Instant) {
        let grace = self.min_rtt.unwrap_or(Duration::ZERO) + Duration::from_millis(10);
        for p in self.list.iter_mut() {
            if !p.gap_acked && !p.marked_lost && now.saturating_duration_since(p.sent) > grace {
                p.marked_lost = true;
                self.lost_packets += 1;
            }
        }
    }

    /// An RTT sample (App. F keeps the transport's minimum).
    pub fn on_rtt_sample(&mut self, r: Duration) {
        self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
    }

    /// Forget everything in flight (association closed).
    pub fn clear(&mut self) {
        self.list.clear();
        self.packets_in_flight = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_table_of_spec_2_2() {
        // Spec §2.2's table: L = 0..19 % -> 4; 20, 25, 30 -> 5; 40 -> 6;
        // 50 -> 8; 60 -> 10; 75 -> 16. (The integer formula already gives 6
        // from L = 34: 4 * (1000000 / 6600) / 100 = 4 * 151 / 100.)
        for (l, want) in [
            (0, 4),
            (19, 4),
            (20, 5),
            (25, 5),
            (30, 5),
            (33, 5),
            (34, 6),
            (40, 6),
            (50, 8),
            (60, 10),
            (75, 16),
        ] {
            assert_eq!(ThinTracker::loss_adjusted(3, l, 100), want, "L = {l}%");
        }
        // 100 % loss does not divide by zero.
        assert_eq!(ThinTracker::loss_adjusted(3, 100, 100), 400);
    }

    #[test]
    fn recomputed_every_30_packets_only() {
        let cfg = ThinDetection::default();
        let mut t = ThinTracker::new(&cfg);
        assert_eq!(t.threshold(&cfg), 4);
        let at = Instant::ZERO;
        for u in 0..29 {
            t.on_packet_sent(&cfg, u, at, true);
        }
        // 10 of 29 lost (34 %): not yet recomputed.
        t.lost_packets = 10;
        assert_eq!(t.threshold(&cfg), 4);
        t.on_packet_sent(&cfg, 29, at, true);
        // 10/30 = 33 % -> 4 * (1000000 / 6700) / 100 = 4 * 149 / 100 = 5.
        assert_eq!(t.threshold(&cfg), 5);
    }

    #[test]
    fn gap_ack_and_loss_indications() {
        let cfg = ThinDetection::default();
        let mut t = ThinTracker::new(&cfg);
        let at = Instant::ZERO;
        for u in 0..3 {
            t.on_packet_sent(&cfg, u, at, true);
        }
        assert_eq!(t.packets_in_flight(), 3);
        assert!(t.is_thin(&cfg));
        // SACK: cum = 0 (nothing), unit 1..=2 gap-acked: unit 0 indicated once.
        t.on_sack(&cfg, 0, &[(1, 2)]);
        assert_eq!(t.packets_in_flight(), 1);
        assert_eq!(t.lost_packets(), 1, "thin: lost at the first indication");
        // Cum ack without gaps removes the rest.
        t.on_sack(&cfg, 3, &[]);
        assert_eq!(t.packets_in_flight(), 0);
    }

    #[test]
    fn thick_needs_three_indications_and_tcp_rule_is_fixed() {
        let cfg = ThinDetection::default();
        let mut t = ThinTracker::new(&cfg);
        for u in 0..8 {
            t.on_packet_sent(&cfg, u, Instant::ZERO, true);
        }
        assert!(!t.is_thin(&cfg));
        t.on_sack(&cfg, 0, &[(1, 1)]);
        t.on_sack(&cfg, 0, &[(1, 2)]);
        assert_eq!(t.lost_packets(), 0);
        t.on_sack(&cfg, 0, &[(1, 3)]);
        assert_eq!(t.lost_packets(), 1);
        let tcp = ThinDetection {
            rule: ThinRule::TcpPacketsOut,
            ..cfg
        };
        assert_eq!(t.threshold(&tcp), 4);
        let fixed = ThinDetection {
            fixed_threshold: Some(9),
            ..cfg
        };
        assert!(t.is_thin(&fixed));
    }
}
