//! ACK processing, loss detection and recovery, congestion control, the
//! retransmission timers, the transmit loop, and the thin-stream mechanisms
//! (002 §4.1: linear timeouts, modified fast retransmit, RDB).
//!
//! Loss recovery follows Linux's structure (`tcp_fastretrans_alert`): a
//! congestion-avoidance state (Open, Disorder, Recovery, Loss), a scoreboard
//! of segments marked SACKed / lost / retransmitted, and a transmit loop that
//! sends while `pipe < cwnd` (RFC 6675 §5): lost segments first, then new
//! data.
//! - With SACK and without RACK, segments are marked lost by RFC 6675
//!   `IsLost` (DupThresh SACKed segments above them), and recovery starts when
//!   the first unacknowledged segment is lost.
//! - Without SACK, New Reno (RFC 6582): recovery after DupThresh duplicate
//!   ACKs, each partial ACK retransmits the next segment; duplicate ACKs count
//!   as segments that left the network (Linux `tcp_add_reno_sack`), which also
//!   gives limited transmit (RFC 3042).
//! - With RACK (RFC 8985), only RACK marks segments lost; RACK-triggered
//!   retransmissions are traced as `FastRetransmit`.
//! - Entering recovery sets `ssthresh = max(cwnd/2, 2 segments)` and
//!   `cwnd = ssthresh` (RFC 6675 §5 step 4.2 rather than Linux's rate
//!   halving); leaving it at `recovery_point` keeps `cwnd = ssthresh`. With
//!   `prr` (linux-modern) every ACK in recovery sets `cwnd = pipe + sndcnt`
//!   instead (RFC 6937, Linux `tcp_cwnd_reduction`).
//! - RACK's reordering flag compares what an ACK delivers with the highest
//!   SACK before that ACK (Linux `prior_fack`).

use crate::config::CwndUnit;
use crate::conn::{CaState, State, TcpConnection, TimerKind};
use crate::segment::Flags;
use thinstream_base::drive::AppEvent;
use thinstream_base::trace::{Record, SentData, SentPieces, TxReason, Units};
use thinstream_base::{Duration, Instant};

/// What (re)arms the retransmission timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rearm {
    /// An ACK advanced the cumulative ACK: restart the RTO (RFC 6298 §5.3).
    Advanced,
    /// An ACK SACKed new data: reschedule the probe (RFC 8985 §7.2).
    Sacked,
    /// New data was sent: reschedule the probe.
    NewData,
    /// Nothing was sent but data is outstanding with no timer running.
    Idle,
}

trait ElapsedSince {
    fn is_none_or_elapsed(&self, now: Instant, gap: Duration) -> bool;
}

impl ElapsedSince for Option<Instant> {
    fn is_none_or_elapsed(&self, now: Instant, gap: Duration) -> bool {
        match self {
            None => true,
            Some(t) => now.saturating_duration_since(*t) >= gap,
        }
    }
}

impl TcpConnection {
    fn unit_amount(&self) -> u64 {
        match self.cfg.cwnd_unit {
            CwndUnit::Bytes => self.mss,
            CwndUnit::Packets => 1,
        }
    }

    /// `pipe` (RFC 6675 §4) minus New Reno's duplicate-ACK credit.
    fn pipe(&self) -> u64 {
        let p = self.sq.pipe(self.cfg.cwnd_unit);
        p.saturating_sub(self.reno_sacked * self.unit_amount())
    }

    fn data_state(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        )
    }

    /// Processes the acknowledgement fields of a segment in a synchronized state.
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        ack: u64,
        window: u64,
        sack: &[(u64, u64)],
        tsecr: Option<u32>,
        has_data: bool,
    ) {
        let snd_nxt = self.snd_nxt();
        if ack > snd_nxt {
            // Acknowledges something never sent (RFC 9293 §3.10.7.4): answer
            // with an ACK, at most one per 500 ms (Linux
            // `tcp_invalid_ratelimit`, RFC 5961 §7) so that two desynchronised
            // endpoints cannot ping-pong ACKs forever.
            self.discard(now, "ack-beyond-snd-nxt");
            let quiet = self
                .last_challenge_ack
                .is_none_or_elapsed(now, Duration::from_millis(500));
            if quiet {
                self.last_challenge_ack = Some(now);
                self.rcv.force_ack();
            }
            return;
        }
        if ack < self.snd_una {
            return; // an old ACK; its window is stale too
        }
        // The window in a SYN is never scaled (RFC 7323 §2.2), so the first
        // scaled window differs without being a window update worth noting.
        let window_changed = window != self.snd_wnd && !self.syn_window;
        self.syn_window = false;
        self.snd_wnd = window;
        let prior_una = self.snd_una;
        let prior_pipe = self.pipe();
        let prior_packets = self.sq.rtx.len() as u64;
        let min_rtt = self.rtt.min_rtt();

        if let Some(rack) = self.rack.as_mut() {
            rack.start_ack();
        }
        if self.cfg.dsack {
            self.on_dsack(ack, sack);
        }
        // SACK blocks (RFC 2018): mark whole segments, record first acknowledgement.
        let mut newly_sacked = 0u64;
        let mut newly_sacked_units = 0u64;
        // The send time of the most recently sent segment this ACK delivers
        // (RACK's adaptive window counts round trips by it).
        let mut newest_delivered: Option<Instant> = None;
        for &(l, r) in sack {
            if r <= ack {
                continue; // D-SACK or stale block
            }
            for i in self.sq.sack(l.max(ack), r) {
                newly_sacked += 1;
                let s = self.sq.rtx[i].clone();
                newly_sacked_units += s.amount(self.cfg.cwnd_unit);
                newest_delivered = newest_delivered.max(Some(s.xmit));
                if let Some(rack) = self.rack.as_mut() {
                    rack.on_delivered(
                        now,
                        s.xmit,
                        s.tx_order,
                        s.seq_end(),
                        s.retransmitted,
                        min_rtt,
                    );
                }
                if self.cfg.trace && s.len() > 0 {
                    self.trace.push(Record::Acked {
                        time: now,
                        units: Units::new(s.start, s.end),
                    });
                }
            }
        }

        // Cumulative acknowledgement.
        let mut acked_packets = 0u64;
        let mut acked_bytes = 0u64;
        let mut any_retransmitted = false;
        let mut oldest_xmit: Option<Instant> = None;
        let mut fin_acked = false;
        // Units newly delivered by this ACK (Linux `tp->delivered`): newly
        // SACKed, and cumulatively acknowledged without an earlier SACK.
        let mut newly_delivered = newly_sacked_units;
        if ack > prior_una {
            let fin_seq = if self.sq.fin_queued {
                Some(self.sq.written + 1)
            } else {
                None
            };
            let mut acked = std::mem::take(&mut self.acked_scratch);
            self.sq.ack_into(ack, &mut acked);
            self.snd_una = ack;
            for a in &acked {
                if a.whole {
                    acked_packets += 1;
                }
                acked_bytes += a.end - a.start;
                any_retransmitted |= a.retransmitted;
                if oldest_xmit.is_none() {
                    oldest_xmit = Some(a.xmit);
                }
                if !a.was_sacked {
                    newly_delivered += match self.cfg.cwnd_unit {
                        CwndUnit::Packets => u64::from(a.whole),
                        CwndUnit::Bytes => a.end - a.start,
                    };
                    newest_delivered = newest_delivered.max(Some(a.xmit));
                    if let Some(rack) = self.rack.as_mut() {
                        rack.on_delivered(
                            now,
                            a.xmit,
                            a.tx_order,
                            a.seq_end,
                            a.retransmitted,
                            min_rtt,
                        );
                    }
                    if self.cfg.trace && a.end > a.start {
                        self.trace.push(Record::Acked {
                            time: now,
                            units: Units::new(a.start, a.end),
                        });
                    }
                }
            }
            self.acked_scratch = acked;
            fin_acked = fin_seq.is_some_and(|f| ack > f);
            // RTT sample: timestamps (Linux tcp_ack_saw_tstamp) or Karn's rule
            // on the oldest newly acknowledged segment (tcp_ack_no_tstamp).
            let sample = match tsecr {
                Some(ecr) => Some(Self::ts_sample(now, ecr)),
                None if !self.ts_ok && !any_retransmitted => {
                    oldest_xmit.map(|t| now.saturating_duration_since(t))
                }
                None => None,
            };
            if let Some(s) = sample {
                self.rtt.on_sample(s, self.snd_una, self.snd_nxt());
            }
            self.retransmits = 0;
            if self.tlp_high_seq.is_some_and(|h| ack >= h) {
                self.tlp_high_seq = None;
            }
        }
        let advanced = ack > prior_una;
        let is_dupack = !advanced
            && prior_packets > 0
            && !has_data
            && !window_changed
            && (!self.sack_ok || newly_sacked > 0);

        // Congestion window growth (RFC 5681 §3.1) outside recovery, only
        // when the window was the limit (RFC 7661 spirit, Linux tcp_is_cwnd_limited).
        if advanced && self.ca != CaState::Recovery && self.cwnd > 0 {
            if self.cfg.cwnd_growth_per_window {
                let slow_start = self.cwnd < self.ssthresh;
                if self.cwnd_was_limited || slow_start && self.cwnd < 2 * self.max_out {
                    self.grow_cwnd_by_delivered(newly_delivered);
                }
            } else {
                if self.window_full(prior_pipe) {
                    self.grow_cwnd(acked_bytes);
                }
            }
        }

        if let Some(rack) = self.rack.as_mut() {
            rack.update_reo_wnd(now, newest_delivered);
        }
        let lost_before = self.lost_count();
        self.update_recovery(now, advanced, is_dupack, acked_packets, newly_sacked);
        if self.cfg.prr && self.ca == CaState::Recovery {
            let newly_lost = self.lost_count() > lost_before;
            self.prr_reduce(newly_delivered, advanced, newly_lost);
        }

        if fin_acked {
            self.on_fin_acked(now);
        }
        if self.state == State::Closed || self.state == State::TimeWait {
            return;
        }
        if advanced {
            self.rearm_timer(now, Rearm::Advanced);
            if self.blocked_writer && self.sq.buffered() < u64::from(self.cfg.snd_buf) {
                self.blocked_writer = false;
                self.app.push_back(AppEvent::Writable);
            }
        } else if newly_sacked > 0 && self.rack.is_some() {
            // RFC 8985 §7.2: reschedule the probe timer on ACKs that deliver data.
            self.rearm_timer(now, Rearm::Sacked);
        }
    }

    /// Whether `pipe` leaves no room in the window for another segment.
    fn window_full(&self, pipe: u64) -> bool {
        match self.cfg.cwnd_unit {
            CwndUnit::Packets => pipe >= self.cwnd,
            CwndUnit::Bytes => pipe + self.mss > self.cwnd,
        }
    }

    fn grow_cwnd(&mut self, acked_bytes: u64) {
        match self.cfg.cwnd_unit {
            CwndUnit::Bytes => {
                if self.cwnd < self.ssthresh {
                    self.cwnd += acked_bytes.min(self.mss);
                } else {
                    self.ca_acc += acked_bytes;
                    if self.ca_acc >= self.cwnd {
                        self.ca_acc -= self.cwnd;
                        self.cwnd += self.mss;
                    }
                }
            }
            CwndUnit::Packets => {
                if self.cwnd < self.ssthresh {
                    self.cwnd += 1;
                } else {
                    self.ca_acc += 1;
                    if self.ca_acc >= self.cwnd {
                        self.ca_acc = 0;
                        self.cwnd += 1;
                    }
                }
            }
        }
    }

    /// Linux `tcp_reno_cong_avoid` with `tcp_slow_start`: slow start adds
    /// what the ACK delivered up to ssthresh, the rest counts towards
    /// congestion avoidance's one unit per window (`tcp_cong_avoid_ai`).
    fn grow_cwnd_by_delivered(&mut self, delivered: u64) {
        let mut left = delivered;
        if self.cwnd < self.ssthresh {
            let grown = (self.cwnd + left).min(self.ssthresh);
            left -= grown - self.cwnd;
            self.cwnd = grown;
            if left == 0 {
                return;
            }
        }
        let unit = self.unit_amount();
        let w = self.cwnd.max(unit);
        if self.ca_acc >= w {
            self.ca_acc = 0;
            self.cwnd += unit;
        }
        self.ca_acc += left;
        if self.ca_acc >= w {
            let steps = self.ca_acc / w;
            self.ca_acc -= steps * w;
            self.cwnd += steps * unit;
        }
    }

    /// Linux `tcp_cwnd_validate` after a send of new data was attempted:
    /// `limited` when the window was full afterwards.
    fn validate_cwnd(&mut self, limited: bool) {
        // Everything outstanding, SACKed and lost segments included (Linux
        // `packets_out`); one unit per segment when counting packets.
        let out: u64 = match self.cfg.cwnd_unit {
            CwndUnit::Packets => self.sq.rtx.len() as u64,
            CwndUnit::Bytes => self
                .sq
                .rtx
                .iter()
                .map(|s| s.amount(self.cfg.cwnd_unit))
                .sum(),
        };
        if self.snd_una >= self.cwnd_usage_seq
            || limited
            || (!self.cwnd_was_limited && out > self.max_out)
        {
            self.cwnd_was_limited = limited;
            self.max_out = out;
            self.cwnd_usage_seq = self.snd_nxt();
        }
    }

    /// The congestion-avoidance state machine after an ACK.
    fn update_recovery(
        &mut self,
        now: Instant,
        advanced: bool,
        is_dupack: bool,
        acked_packets: u64,
        newly_sacked: u64,
    ) {
        if self.sq.rtx.is_empty() {
            self.reno_sacked = 0;
            self.dupacks = 0;
            if self.ca != CaState::Open {
                self.end_recovery_episode();
                self.exit_recovery();
            }
            return;
        }
        let dupthresh = u64::from(self.cfg.dupthresh);
        let packets = self.sq.rtx.len() as u64;
        if advanced {
            self.dupacks = 0;
        }
        if !self.sack_ok {
            if advanced {
                // Linux tcp_remove_reno_sacks: the head segment was not one of them.
                self.reno_sacked = self
                    .reno_sacked
                    .saturating_sub(acked_packets.saturating_sub(1));
            }
            if is_dupack {
                self.dupacks += 1;
                self.reno_sacked = (self.reno_sacked + 1).min(packets.saturating_sub(1));
            }
        } else if is_dupack {
            self.dupacks += 1;
        }
        // Loss marking.
        let mut rack_marked = false;
        if let Some(rack) = self.rack.clone() {
            let in_recovery = matches!(self.ca, CaState::Recovery | CaState::Loss);
            let reo = rack.reo_wnd(
                in_recovery,
                self.sq.sacked_count(),
                dupthresh,
                self.rtt.min_rtt(),
                self.rtt.srtt(),
            );
            let (marked, timeout) = rack.detect_loss(now, &mut self.sq.rtx, reo);
            rack_marked = marked;
            self.reo_timer = timeout.map(|t| self.timer_at(now, t));
        } else if self.sack_ok && self.ca == CaState::Recovery {
            self.sq.mark_lost_by_sack(dupthresh, self.mss);
        }
        match self.ca {
            CaState::Recovery => {
                if self.snd_una >= self.recovery_point {
                    self.end_recovery_episode();
                    self.exit_recovery();
                    self.open_or_recover(now, newly_sacked, rack_marked);
                } else if advanced && !self.sack_ok {
                    // RFC 6582 §3.2 step 5: a partial ACK retransmits the next segment.
                    if let Some(head) = self.sq.rtx.front_mut() {
                        head.lost = true;
                        head.retrans_out = false;
                        self.force_rtx = true;
                    }
                }
            }
            CaState::Loss => {
                if self.snd_una >= self.high_seq {
                    self.end_recovery_episode();
                    self.ca = CaState::Open;
                    self.open_or_recover(now, newly_sacked, rack_marked);
                }
            }
            CaState::Open | CaState::Disorder => {
                self.open_or_recover(now, newly_sacked, rack_marked)
            }
        }
    }

    /// A D-SACK (RFC 2883) in this ACK's SACK blocks, as Linux reads one
    /// (`tcp_check_dsack`): a first block below the cumulative ACK, or
    /// within the second. One whose data was never retransmitted (more
    /// duplicates reported than segments resent) is ignored. Above the
    /// cumulative ACK, a D-SACK covering a retransmitted segment already
    /// SACKed before this ACK is reordering (`tcp_sacktag_one`,
    /// `tcp_check_sack_reordering`).
    fn on_dsack(&mut self, ack: u64, sack: &[(u64, u64)]) {
        let Some(&(l0, r0)) = sack.first() else {
            return;
        };
        let within_second = sack.get(1).is_some_and(|&(l1, r1)| l0 >= l1 && r0 <= r1);
        if l0 >= r0 || !(l0 < ack || within_second) {
            return;
        }
        let len = r0 - l0;
        self.dsack_dups += len.div_ceil(self.mss).max(1);
        if self.dsack_dups > self.stats.retransmissions {
            return;
        }
        let of_probe = len <= self.mss && self.tlp_high_seq == Some(r0);
        let resent_and_sacked = l0 >= ack
            && self
                .sq
                .rtx
                .iter()
                .any(|s| s.retransmitted && s.sacked && s.seq_start() < r0 && s.seq_end() > l0);
        if let Some(rack) = self.rack.as_mut() {
            if self.cfg.rack.is_some_and(|r| r.adaptive_reo_wnd) {
                rack.on_dsack(of_probe);
            }
            if resent_and_sacked {
                rack.note_reordering(l0);
            }
        }
    }

    /// A fast recovery or a timeout recovery ends (Linux
    /// `tcp_try_undo_recovery`; the model has no undo).
    fn end_recovery_episode(&mut self) {
        if matches!(self.ca, CaState::Recovery | CaState::Loss) {
            if let Some(rack) = self.rack.as_mut() {
                rack.on_recovery_end();
            }
        }
    }

    /// Linux `tcp_time_to_recover`, plus the modified fast retransmit test.
    fn open_or_recover(&mut self, now: Instant, _newly_sacked: u64, rack_marked: bool) {
        if self.sq.rtx.is_empty() {
            self.ca = CaState::Open;
            return;
        }
        let dupthresh = u64::from(self.cfg.dupthresh);
        let sacked = self.sq.sacked_count();
        let mut recover = if self.rack.is_some() {
            rack_marked || self.sq.rtx.iter().any(|s| s.lost && !s.retrans_out)
        } else if self.sack_ok {
            sacked >= dupthresh || {
                self.sq.mark_lost_by_sack(dupthresh, self.mss);
                self.sq.rtx.front().is_some_and(|s| s.lost)
            }
        } else {
            self.dupacks >= dupthresh
        };
        // 002 §4.1.4: recover on the first indication of loss while thin
        // (App. E: `tcp_fackets_out(tp) > 1 && tcp_stream_is_thin(tp)`).
        let indication = if self.sack_ok {
            sacked >= 1
        } else {
            self.dupacks >= 1
        };
        if self.cfg.thin.modified_fast_retransmit && self.is_thin() && indication {
            recover = true;
        }
        if recover {
            self.enter_recovery(now);
        } else if sacked > 0 || self.dupacks > 0 {
            self.ca = CaState::Disorder;
        } else {
            self.ca = CaState::Open;
        }
    }

    fn halve(&self) -> u64 {
        let two = 2 * self.unit_amount();
        (self.cwnd / 2).max(two)
    }

    fn enter_recovery(&mut self, _now: Instant) {
        self.stats.fast_recoveries += 1;
        self.prior_cwnd = self.cwnd;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.ssthresh = self.halve();
        self.cwnd = self.ssthresh;
        self.ca_acc = 0;
        self.recovery_point = self.snd_nxt();
        self.ca = CaState::Recovery;
        self.tlp_high_seq = None;
        if self.sack_ok && self.rack.is_none() {
            self.sq
                .mark_lost_by_sack(u64::from(self.cfg.dupthresh), self.mss);
        }
        // RFC 6675 §5 step 4.3 / RFC 6582 step 2: retransmit the first
        // unacknowledged segment now, whatever the pipe says.
        if let Some(head) = self.sq.rtx.front_mut() {
            if !head.sacked && !head.retrans_out {
                head.lost = true;
            }
        }
        self.force_rtx = true;
    }

    /// RFC 6937 PRR after an ACK in recovery, as Linux
    /// `tcp_cwnd_reduction` computes it: `delivered` units newly delivered
    /// by the ACK. While pipe exceeds ssthresh, sending follows
    /// `ssthresh / prior_cwnd` of what is delivered; below it, at most what
    /// this ACK delivered (one more on a cumulative advance that marked
    /// nothing lost) and never past ssthresh; the ACK that begins recovery
    /// always lets the retransmission out.
    fn prr_reduce(&mut self, delivered: u64, advanced: bool, newly_lost: bool) {
        if delivered == 0 || self.prior_cwnd == 0 {
            return;
        }
        let unit = self.unit_amount() as i64;
        let pipe = self.pipe() as i64;
        let delta = self.ssthresh as i64 - pipe;
        self.prr_delivered += delivered;
        let (prr_delivered, prr_out) = (self.prr_delivered as i64, self.prr_out as i64);
        let mut sndcnt = if delta < 0 {
            let dividend = self.ssthresh as i64 * prr_delivered + self.prior_cwnd as i64 - 1;
            dividend / self.prior_cwnd as i64 - prr_out
        } else {
            let mut n = (prr_delivered - prr_out).max(delivered as i64);
            if advanced && !newly_lost {
                n += unit;
            }
            n.min(delta)
        };
        sndcnt = sndcnt.max(if prr_out > 0 { 0 } else { unit });
        self.cwnd = (pipe + sndcnt).max(0) as u64;
    }

    /// Segments marked lost and not SACKed.
    fn lost_count(&self) -> usize {
        self.sq.rtx.iter().filter(|s| s.lost && !s.sacked).count()
    }

    fn exit_recovery(&mut self) {
        if self.ca == CaState::Recovery {
            self.cwnd = self.ssthresh.max(self.unit_amount());
        }
        self.ca = CaState::Open;
        self.reno_sacked = 0;
        self.dupacks = 0;
    }

    /// The retransmission timer fired (RFC 6298 §5.4-5.6, Linux
    /// `tcp_retransmit_timer`), with linear timeouts (002 §4.1.3, Fig. 4.7).
    pub(crate) fn on_rto(&mut self, now: Instant) {
        if self.sq.rtx.is_empty() {
            return;
        }
        self.retransmits += 1;
        if self.retransmits > self.cfg.max_retries {
            self.abort(now, "retransmission limit reached");
            return;
        }
        self.stats.timeouts += 1;
        // Linux tcp_enter_loss: reduce ssthresh once per loss episode and,
        // with `loss_ssthresh_once`, not again inside a fast recovery's
        // window that already reduced it.
        let reduce = if self.cfg.loss_ssthresh_once {
            match self.ca {
                CaState::Open | CaState::Disorder => true,
                CaState::Recovery => self.snd_una >= self.recovery_point,
                CaState::Loss => self.snd_una >= self.high_seq || self.retransmits == 1,
            }
        } else {
            self.ca != CaState::Loss || self.retransmits == 1
        };
        if reduce {
            self.ssthresh = self.halve();
        }
        self.ca_acc = 0;
        // Which segments the timeout marks lost: all but the SACKed ones;
        // with RACK (Linux `tcp_timeout_mark_lost`) the first one and those
        // sent at least RACK.rtt ago, so segments sent within the last round
        // trip stay in flight.
        let recent = self
            .rack
            .as_ref()
            .and_then(|r| r.rtt())
            .map(|rtt| now.saturating_sub(rtt));
        for (i, s) in self.sq.rtx.iter_mut().enumerate() {
            if s.sacked {
                continue;
            }
            if i > 0 && recent.is_some_and(|r| s.xmit > r) {
                continue;
            }
            s.lost = true;
            s.retrans_out = false;
        }
        // Linux: cwnd = packets in flight + 1 (one segment when every
        // unSACKed segment is marked lost, RFC 5681's loss window).
        self.cwnd = self.pipe() + self.unit_amount();
        self.ca = CaState::Loss;
        self.high_seq = self.snd_nxt();
        self.reno_sacked = 0;
        self.dupacks = 0;
        self.tlp_high_seq = None;
        self.reo_timer = None;
        self.force_rtx = true;
        self.transmit_inner(now);
        // Back off, or stay linear while thin and established.
        let thin = self.is_thin();
        let lt = &self.cfg.thin;
        let within_cap = match lt.lt_max_linear {
            Some(cap) => self.retransmits <= cap,
            None => true,
        };
        let linear = lt.linear_timeouts && thin && self.state == State::Established && within_cap;
        if linear {
            self.rtt.linear();
        } else {
            self.rtt.back_off();
        }
        self.rtx_timer = Some((self.timer_at(now, now + self.rtt.rto()), TimerKind::Rto));
    }

    /// The tail loss probe timer fired (RFC 8985 §7.3).
    pub(crate) fn on_pto(&mut self, now: Instant) {
        if self.sq.rtx.is_empty() {
            return;
        }
        self.stats.tail_loss_probes += 1;
        let window_ok = self
            .sq
            .unsent
            .front()
            .is_some_and(|s| s.seq_end() <= self.snd_una + self.snd_wnd.max(1));
        if window_ok {
            self.send_new(now);
        } else if let Some(i) = (0..self.sq.rtx.len())
            .rev()
            .find(|&i| !self.sq.rtx[i].sacked)
        {
            self.send_segment(now, i, TxReason::Probe);
        }
        self.tlp_high_seq = Some(self.snd_nxt());
        self.rtx_timer = Some((self.timer_at(now, now + self.rtt.rto()), TimerKind::Rto));
    }

    /// RACK's reordering timer fired (RFC 8985 §6.3).
    pub(crate) fn on_reorder_timeout(&mut self, now: Instant) {
        let Some(rack) = self.rack.clone() else {
            return;
        };
        let in_recovery = matches!(self.ca, CaState::Recovery | CaState::Loss);
        let reo = rack.reo_wnd(
            in_recovery,
            self.sq.sacked_count(),
            u64::from(self.cfg.dupthresh),
            self.rtt.min_rtt(),
            self.rtt.srtt(),
        );
        let (marked, timeout) = rack.detect_loss(now, &mut self.sq.rtx, reo);
        self.reo_timer = timeout.map(|t| self.timer_at(now, t));
        if marked && matches!(self.ca, CaState::Open | CaState::Disorder) {
            self.enter_recovery(now);
            if self.cfg.prr {
                // Linux `tcp_rack_reo_timeout`: the reduction counts one
                // delivered segment.
                self.prr_reduce(self.unit_amount(), false, true);
            }
        }
        self.transmit(now);
    }

    /// (Re)arms the retransmission timer after `why` (see [`Rearm`]).
    pub(crate) fn rearm_timer(&mut self, now: Instant, why: Rearm) {
        if self.sq.rtx.is_empty() {
            self.rtx_timer = None;
            return;
        }
        let restart = why == Rearm::Advanced;
        // Linux (`tcp_rto_delta_us`): after new data the RTO counts from the
        // last transmission of the oldest outstanding segment, not from now.
        let head_rto = match self.cfg.rack {
            Some(r) if r.tlp_rto_from_head && why == Rearm::NewData => {
                self.sq.rtx.front().map(|s| s.xmit + self.rtt.rto())
            }
            _ => None,
        };
        // The RTO's deadline, and whether it is an armed timer kept as is
        // (already on the kernel's wheel with `timer_hz`).
        let (rto_deadline, kept) = match (self.rtx_timer, head_rto) {
            (Some((t, TimerKind::Rto)), _) if !restart => (t, true),
            // Linux `tcp_rearm_rto` with a probe pending: at least one tick.
            (Some((_, TimerKind::Pto)), Some(h)) => (h.max(now), false),
            _ => (now + self.rtt.rto(), false),
        };
        let tlp = self.cfg.rack.is_some_and(|r| r.tlp)
            && self.sack_ok
            && self.ca == CaState::Open
            && self.tlp_high_seq.is_none()
            && self.state == State::Established;
        if let (true, Some(srtt)) = (tlp, self.rtt.srtt()) {
            if why != Rearm::Idle || self.rtx_timer.is_none() {
                let mut pto = srtt * 2;
                if self.sq.rtx.len() == 1 {
                    pto += self
                        .cfg
                        .rack
                        .map_or(Duration::ZERO, |r| r.tlp_max_ack_delay);
                }
                // RFC 8985 §7.2: never later than the RTO. Linux
                // (`tcp_schedule_loss_probe`) caps a probe armed by new
                // data at the head's RTO only while that is still ahead.
                let cap = match head_rto {
                    Some(h) if h > now => h,
                    Some(_) => now + pto,
                    None => rto_deadline,
                };
                let at = (now + pto).min(cap);
                self.rtx_timer = Some((self.timer_at(now, at), TimerKind::Pto));
                return;
            }
        }
        if restart
            || self.rtx_timer.is_none()
            || matches!(self.rtx_timer, Some((_, TimerKind::Pto))) && !tlp
        {
            let at = if kept {
                rto_deadline
            } else {
                self.timer_at(now, rto_deadline)
            };
            self.rtx_timer = Some((at, TimerKind::Rto));
        }
    }

    /// Sends what the windows allow: lost segments first, then new data.
    pub(crate) fn transmit(&mut self, now: Instant) {
        if self.data_state() {
            self.transmit_inner(now);
        }
        let ack_allowed = match self.state {
            State::Listen | State::SynSent => false,
            State::Closed => self.graceful,
            _ => true,
        };
        if self.rcv.ack_now && ack_allowed && self.remote.is_some() {
            self.send_ack(now);
        }
    }

    fn cwnd_allows(&self, amount: u64) -> bool {
        let pipe = self.pipe();
        match self.cfg.cwnd_unit {
            CwndUnit::Packets => pipe < self.cwnd,
            CwndUnit::Bytes => pipe + amount <= self.cwnd || pipe == 0,
        }
    }

    fn transmit_inner(&mut self, now: Instant) {
        let mut sent_new = false;
        let mut tried_new = false;
        loop {
            // 1. Segments marked lost (RFC 6675 NextSeg rule 1).
            if matches!(self.ca, CaState::Recovery | CaState::Loss) || self.force_rtx {
                if let Some(i) = self
                    .sq
                    .rtx
                    .iter()
                    .position(|s| s.lost && !s.retrans_out && !s.sacked)
                {
                    let amount = self.sq.rtx[i].amount(self.cfg.cwnd_unit);
                    if !self.force_rtx && !self.cwnd_allows(amount) {
                        break;
                    }
                    self.force_rtx = false;
                    let reason = if self.ca == CaState::Loss {
                        TxReason::TimeoutRetransmit
                    } else {
                        TxReason::FastRetransmit
                    };
                    self.send_segment(now, i, reason);
                    if i == 0 && reason == TxReason::FastRetransmit {
                        // Linux `tcp_xmit_retransmit_queue` restarts the RTO
                        // when it retransmits the head; without this, a fast
                        // retransmission made close to the RTO deadline
                        // (thin streams: third dupACK ≈ RTO) is followed by a
                        // timeout retransmission of the same segment.
                        self.rtx_timer =
                            Some((self.timer_at(now, now + self.rtt.rto()), TimerKind::Rto));
                    }
                    continue;
                }
                self.force_rtx = false;
            }
            // 2. New data (RFC 6675 NextSeg rule 2), within both windows.
            let Some(next) = self.sq.unsent.front() else {
                break;
            };
            tried_new = true;
            let amount = next.amount(self.cfg.cwnd_unit);
            let in_rwnd =
                next.end < self.snd_una + self.snd_wnd || self.sq.rtx.is_empty() && next.len() == 0;
            if !in_rwnd || !self.cwnd_allows(amount) {
                break;
            }
            self.send_new(now);
            sent_new = true;
        }
        if tried_new && self.cfg.cwnd_growth_per_window {
            let limited = self.window_full(self.pipe());
            if sent_new || limited {
                self.validate_cwnd(limited);
            }
        }
        if sent_new {
            self.rearm_timer(now, Rearm::NewData);
        } else if self.rtx_timer.is_none() && !self.sq.rtx.is_empty() {
            self.rearm_timer(now, Rearm::Idle);
        }
    }

    /// The RDB / collapse limit on a packet's total payload.
    fn bundle_limit(&self) -> u64 {
        self.cfg
            .thin
            .rdb_max_bundle_bytes
            .map_or(self.mss, |l| u64::from(l).min(self.mss))
    }

    /// Sends the first unsent segment, with RDB bundling of the unacknowledged
    /// bytes before it (002 §4.3.1, App. E `tcp_trans_merge_prev`).
    pub(crate) fn send_new(&mut self, now: Instant) {
        let Some(mut skb) = self.sq.unsent.pop_front() else {
            return;
        };
        if self.ca == CaState::Recovery {
            self.prr_out += skb.amount(self.cfg.cwnd_unit);
        }
        let una_unit = self.snd_una.saturating_sub(1);
        let mut bundle_start = skb.start;
        if self.cfg.thin.rdb && !skb.fin && skb.len() > 0 && skb.len() < self.bundle_limit() {
            if let Some(prev) = self.sq.rtx.back() {
                // The previous segment's last transmission carried
                // [prev.bundle_start, prev.end); its unacknowledged part is bundled
                // whole or not at all (refusals 2, 4, 5 of App. E).
                let ua_start = prev.bundle_start.max(una_unit);
                if !prev.sacked && !prev.fin && prev.end == skb.start && ua_start < prev.end {
                    let total = skb.end - ua_start;
                    if total <= self.bundle_limit() {
                        bundle_start = ua_start;
                    }
                }
            }
        }
        // One piece (kept inline), two with a bundle.
        let mut data = SentPieces::new();
        if bundle_start < skb.start {
            data.push(SentData {
                units: Units::new(bundle_start, skb.start),
                bytes: (skb.start - bundle_start) as u32,
                reason: TxReason::RedundantBundle,
            });
            self.mark_resent(now, bundle_start, skb.start);
        }
        if skb.len() > 0 {
            data.push(SentData {
                units: Units::new(skb.start, skb.end),
                bytes: skb.len() as u32,
                reason: TxReason::New,
            });
        }
        skb.bundle_start = bundle_start;
        skb.xmit = now;
        self.tx_count += 1;
        skb.tx_order = self.tx_count;
        let payload = Some((bundle_start, skb.end));
        let mut flags = Flags::ACK;
        if skb.len() > 0 {
            flags |= Flags::PSH;
        }
        if skb.fin {
            flags |= Flags::FIN;
        }
        let seq = bundle_start + 1;
        self.sq.rtx.push_back(skb);
        self.emit(now, seq, flags, payload, data, false);
    }

    /// Marks the segments covering `[start, end)` as sent again (a redundant
    /// or bundled copy): Karn's rule applies to them and RACK sees the new time.
    fn mark_resent(&mut self, now: Instant, start: u64, end: u64) {
        for s in self.sq.rtx.iter_mut() {
            if s.end <= start || s.len() == 0 {
                continue;
            }
            if s.start >= end {
                break;
            }
            s.retransmitted = true;
            s.xmit = now;
            self.tx_count += 1;
            s.tx_order = self.tx_count;
            if s.lost && !s.sacked {
                s.retrans_out = true;
            }
        }
    }

    /// Retransmits scoreboard segment `i` (or probes with it), bundling the
    /// following outstanding segments when RDB (002 §4.3.2) or Linux's
    /// retransmission collapsing (`tcp_retrans_try_collapse`) applies. The
    /// segments stay separate in the scoreboard (Linux merges them, which
    /// lowers `packets_out`; the model does not).
    pub(crate) fn send_segment(&mut self, now: Instant, i: usize, reason: TxReason) {
        self.stats.retransmissions += 1;
        if self.ca == CaState::Recovery {
            self.prr_out += self.sq.rtx[i].amount(self.cfg.cwnd_unit);
        }
        let (start, mut end, mut fin) = {
            self.tx_count += 1;
            let s = &mut self.sq.rtx[i];
            s.retransmitted = true;
            s.xmit = now;
            s.tx_order = self.tx_count;
            s.retrans_out = true;
            (s.start, s.end, s.fin)
        };
        // RDB (002 §4.3.2) replaces Linux's collapsing, which is bounded by the MSS.
        let limit = if self.cfg.thin.rdb {
            self.bundle_limit()
        } else {
            self.mss
        };
        let bundle = self.cfg.thin.rdb || self.cfg.retrans_collapse;
        if bundle && !fin && reason != TxReason::Probe {
            let mut j = i + 1;
            while j < self.sq.rtx.len() {
                let n = &self.sq.rtx[j];
                if n.sacked || n.start != end || (n.end - start) > limit {
                    break;
                }
                if n.end + 1 + u64::from(n.fin) > self.snd_una + self.snd_wnd.max(1) {
                    break;
                }
                end = n.end;
                fin = n.fin;
                j += 1;
                if fin {
                    break;
                }
            }
        }
        let mut data = SentPieces::new();
        let own_end = self.sq.rtx[i].end;
        if own_end > start {
            data.push(SentData {
                units: Units::new(start, own_end),
                bytes: (own_end - start) as u32,
                reason,
            });
        }
        if end > own_end {
            data.push(SentData {
                units: Units::new(own_end, end),
                bytes: (end - own_end) as u32,
                reason: TxReason::BundledOnRetransmit,
            });
            self.mark_resent(now, own_end, end);
        }
        let payload = Some((start, end));
        let mut flags = Flags::ACK;
        if end > start {
            flags |= Flags::PSH;
        }
        if fin {
            flags |= Flags::FIN;
        }
        self.emit(now, start + 1, flags, payload, data, false);
    }

    /// Called after every input: tracing of changed variables.
    pub(crate) fn after_event(&mut self, now: Instant) {
        self.trace_changes(now);
    }
}
