//! The receive side: reassembly, in-order delivery, SACK blocks (RFC 2018),
//! timestamps echo (RFC 7323 §4.3) and the ACK schedule (RFC 1122
//! §4.2.3.2, RFC 5681 §4.2, Linux quick-ack).
//!
//! Sequence positions here are offsets from the peer's ISN: its SYN is 0 and
//! the first data byte is 1 (unit 0).

use bytes::Bytes;
use std::collections::BTreeMap;
use thinstream_base::{Duration, Instant};

/// The in-order bytes one segment makes deliverable: usually one piece
/// (the segment's own buffer, or one that waited), joined into one buffer
/// only when a filled hole releases several.
#[derive(Default)]
struct InOrder {
    first: Bytes,
    joined: Vec<u8>,
}

impl InOrder {
    fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    fn push(&mut self, piece: Bytes) {
        if self.first.is_empty() {
            self.first = piece;
            return;
        }
        if self.joined.is_empty() {
            self.joined.extend_from_slice(&self.first);
        }
        self.joined.extend_from_slice(&piece);
    }

    fn finish(self) -> Bytes {
        if self.joined.is_empty() {
            self.first
        } else {
            Bytes::from(self.joined)
        }
    }
}

/// Result of accepting one segment's data.
#[derive(Debug, Default)]
pub(crate) struct RxOutcome {
    /// Pieces of the segment that reached the transport, in units, with a
    /// duplicate flag (already held or already delivered).
    pub arrived: Vec<(u64, u64, bool)>,
    /// In-order bytes now deliverable, with the unit of their first byte.
    pub delivered: Option<(u64, Bytes)>,
    /// The peer's FIN has been reached in order.
    pub fin_reached: bool,
}

#[derive(Debug)]
pub(crate) struct Receiver {
    /// Next expected sequence offset.
    pub(crate) rcv_nxt: u64,
    /// Out-of-order data keyed by start offset; pieces never overlap.
    ooo: BTreeMap<u64, Bytes>,
    ooo_bytes: u64,
    /// Offset of the peer's FIN, once seen.
    fin: Option<u64>,
    fin_done: bool,
    /// SACK blocks in the order RFC 2018 §4 wants them reported (most recent first).
    sack_recent: Vec<(u64, u64)>,
    rcv_buf: u64,
    // ACK schedule.
    delayed_ack: Option<Duration>,
    /// The kernel timer wheel the delayed-ACK timer is armed on (config
    /// `timer_hz`; set by the connection).
    pub(crate) timer_hz: Option<u32>,
    pub(crate) delack_deadline: Option<Instant>,
    pub(crate) ack_now: bool,
    pending_bytes: u64,
    rcv_mss: u64,
    quickack: u32,
    last_data: Option<Instant>,
    // Linux `tcp_cleanup_rbuf` (config `ack_pushed_on_read`).
    ack_pushed_on_read: bool,
    /// Linux `icsk_ack.rcv_mss`: the largest segment seen, from 536 bytes.
    push_mss: u64,
    /// Small pushed segments since the last ACK (`ICSK_ACK_PUSHED`, `PUSHED2`).
    pushed: u8,
    /// Interactive mode: this end sent data within the delayed-ACK time of
    /// receiving some (Linux `tcp_event_data_sent`); left when the
    /// delayed-ACK timer fires.
    pingpong: bool,
    // Timestamps.
    pub(crate) ts_recent: Option<u32>,
    last_ack_sent: u64,
    /// The buffer of the last outcome's `arrived`, handed back by
    /// [`Receiver::recycle`] to be reused (no allocation per segment).
    spare_arrived: Vec<(u64, u64, bool)>,
    /// D-SACK (RFC 2883) on: a duplicate segment is reported in the first
    /// SACK block of the next ACK (Linux `tcp_dsack_set`).
    dsack_on: bool,
    /// The duplicate range to report, until an ACK carries it.
    dsack: Option<(u64, u64)>,
}

impl Receiver {
    /// Arms the delayed-ACK timer on the kernel's timer wheel at `hz`.
    pub(crate) fn on_timer_wheel(mut self, hz: Option<u32>) -> Receiver {
        self.timer_hz = hz;
        self
    }

    pub(crate) fn new(
        rcv_buf: u32,
        delayed_ack: Option<Duration>,
        quickack: u32,
        ack_pushed_on_read: bool,
        dsack_on: bool,
    ) -> Receiver {
        Receiver {
            rcv_nxt: 0,
            ooo: BTreeMap::new(),
            ooo_bytes: 0,
            fin: None,
            fin_done: false,
            sack_recent: Vec::new(),
            rcv_buf: u64::from(rcv_buf),
            delayed_ack,
            timer_hz: None,
            delack_deadline: None,
            ack_now: false,
            pending_bytes: 0,
            rcv_mss: 536,
            quickack,
            last_data: None,
            ack_pushed_on_read,
            push_mss: 536,
            pushed: 0,
            pingpong: false,
            ts_recent: None,
            last_ack_sent: 0,
            spare_arrived: Vec::new(),
            dsack_on,
            dsack: None,
        }
    }

    #[allow(dead_code)]
    pub(crate) fn fin_done(&self) -> bool {
        self.fin_done
    }

    /// Bytes the peer may send beyond `rcv_nxt`. The model's application
    /// reads everything delivered at once, so only out-of-order data occupies
    /// the buffer, and it lies inside the window already: the right edge
    /// `rcv_nxt + rcv_buf` never moves left.
    pub(crate) fn window(&self) -> u64 {
        self.rcv_buf
    }

    /// RFC 7323 §4.3: remember TSval of a segment that covers the left edge.
    pub(crate) fn note_timestamp(&mut self, seq: u64, tsval: u32) {
        let older = self
            .ts_recent
            .is_some_and(|r| (tsval.wrapping_sub(r) as i32) < 0);
        if seq <= self.last_ack_sent && !older {
            self.ts_recent = Some(tsval);
        }
    }

    /// Accepts the payload (and FIN) of a segment starting at offset `seq`,
    /// `push` its PSH flag. `rto` is the endpoint's current RTO, for Linux's
    /// "long gap" quick-ack.
    pub(crate) fn on_segment(
        &mut self,
        now: Instant,
        seq: u64,
        mut payload: Bytes,
        fin: bool,
        push: bool,
        rto: Duration,
    ) -> RxOutcome {
        let payload_len = payload.len() as u64;
        let mut out = RxOutcome {
            arrived: std::mem::take(&mut self.spare_arrived),
            ..RxOutcome::default()
        };
        out.arrived.clear();
        let before = self.rcv_nxt;
        let had_holes = !self.ooo.is_empty();
        let right_edge = self.rcv_nxt + self.rcv_buf;
        let end = seq + payload_len;
        let kept_end = end.min(right_edge);
        let mut fully_duplicate = !payload.is_empty();
        let mut data = InOrder::default();
        if seq == self.rcv_nxt && kept_end > seq && self.ooo.is_empty() {
            // In order with nothing held (a thin stream's every segment but
            // after a loss): the kept bytes are delivered at once, exactly as
            // storing them and draining the store would; the segment's own
            // buffer, no copy.
            out.arrived.push((seq - 1, kept_end - 1, false));
            let mut kept = std::mem::take(&mut payload);
            kept.truncate((kept_end - seq) as usize);
            data.push(kept);
            self.rcv_nxt = kept_end;
            fully_duplicate = false;
        }
        // Split [seq, kept_end) into duplicate and new pieces (nothing left
        // after the in-order case).
        let mut pos = if data.is_empty() { seq } else { kept_end };
        // The duplicate bytes of this segment (D-SACK).
        let mut dup: Option<(u64, u64)> = None;
        while pos < kept_end {
            if pos < self.rcv_nxt {
                let e = kept_end.min(self.rcv_nxt);
                out.arrived.push((pos - 1, e - 1, true));
                dup = Some(dup.map_or((pos, e), |(l, r): (u64, u64)| (l.min(pos), r.max(e))));
                pos = e;
                continue;
            }
            // The stored piece at or before pos, if it covers pos.
            let covering = self
                .ooo
                .range(..=pos)
                .next_back()
                .map(|(s, v)| (*s, *s + v.len() as u64))
                .filter(|(_, e)| *e > pos);
            if let Some((_, e)) = covering {
                let e = e.min(kept_end);
                out.arrived.push((pos - 1, e - 1, true));
                dup = Some(dup.map_or((pos, e), |(l, r): (u64, u64)| (l.min(pos), r.max(e))));
                pos = e;
                continue;
            }
            // A gap up to the next stored piece.
            let next = self
                .ooo
                .range(pos + 1..)
                .next()
                .map(|(s, _)| *s)
                .unwrap_or(u64::MAX);
            let e = next.min(kept_end);
            let lo = (pos - seq) as usize;
            let hi = (e - seq) as usize;
            self.ooo.insert(pos, payload.slice(lo..hi));
            self.ooo_bytes += e - pos;
            out.arrived.push((pos - 1, e - 1, false));
            fully_duplicate = false;
            pos = e;
        }
        merge_adjacent_pieces(&mut out.arrived);
        if self.dsack_on && dup.is_some() {
            self.dsack = dup;
        }
        if fin && kept_end == end && self.fin.is_none() {
            self.fin = Some(end);
        }
        // Drain in-order data.
        while let Some(entry) = self.ooo.first_entry() {
            if *entry.key() != self.rcv_nxt {
                break;
            }
            let v = entry.remove();
            self.ooo_bytes -= v.len() as u64;
            self.rcv_nxt += v.len() as u64;
            data.push(v);
        }
        if !data.is_empty() {
            out.delivered = Some((before - 1, data.finish()));
        }
        if self.fin == Some(self.rcv_nxt) && !self.fin_done {
            self.rcv_nxt += 1;
            self.fin_done = true;
            out.fin_reached = true;
        }
        // SACK bookkeeping: the block holding this segment goes first.
        self.sack_recent.retain(|(_, e)| *e > self.rcv_nxt);
        if payload_len > 0 && seq > self.rcv_nxt {
            if let Some(block) = self.block_containing(seq) {
                self.sack_recent
                    .retain(|b| !(b.0 <= block.1 && block.0 <= b.1));
                self.sack_recent.insert(0, block);
                self.sack_recent.truncate(8);
            }
        }
        // ACK schedule.
        let has_data = payload_len > 0;
        if has_data || fin {
            let out_of_order = seq > before || !self.ooo.is_empty();
            let filled_hole = had_holes && self.rcv_nxt > before;
            let long_gap = self
                .last_data
                .is_some_and(|t| now.saturating_duration_since(t) > rto);
            if has_data {
                self.last_data = Some(now);
                let len = payload_len;
                self.pending_bytes += len;
                // Linux tcp_measure_rcv_mss, simplified: the last segment's size.
                self.rcv_mss = len;
                // Linux tcp_measure_rcv_mss: a segment below the estimate
                // counts as pushed unless, with its 20-byte header, it reaches
                // 556 bytes (TCP_MSS_DEFAULT + header), or 108 bytes
                // (TCP_MIN_MSS + header) without PSH.
                let with_header = len + 20;
                if len >= self.push_mss {
                    self.push_mss = len;
                } else if with_header < 556 && (push || with_header < 108) {
                    self.pushed = self.pushed.saturating_add(1);
                }
            }
            // Linux tcp_cleanup_rbuf: the application has read everything
            // (the model's reads at once) and nothing waits out of order
            // (`sk_rmem_alloc` counts that queue too).
            let read_pushed = self.ack_pushed_on_read
                && out.delivered.is_some()
                && self.ooo.is_empty()
                && (self.pushed >= 2 || self.pushed == 1 && !self.pingpong);
            // A segment wholly below rcv_nxt (a retransmission whose ACK was
            // lost, or a repeated FIN) is answered at once (RFC 5681 §4.2).
            let stale = end + u64::from(fin) <= before;
            let immediate = self.delayed_ack.is_none()
                || stale
                || out_of_order
                || filled_hole
                || fully_duplicate
                || out.fin_reached
                || long_gap
                || self.pending_bytes > self.rcv_mss
                || self.quickack > 0
                || read_pushed;
            if immediate {
                if self.quickack > 0 && has_data {
                    self.quickack -= 1;
                }
                self.ack_now = true;
            } else if self.delack_deadline.is_none() {
                if let Some(d) = self.delayed_ack {
                    self.delack_deadline = Some(crate::timer::fire_at(self.timer_hz, now, now + d));
                }
            }
        }
        out
    }

    /// Gives back an outcome's `arrived` buffer once read.
    pub(crate) fn recycle(&mut self, arrived: Vec<(u64, u64, bool)>) {
        self.spare_arrived = arrived;
    }

    fn block_containing(&self, seq: u64) -> Option<(u64, u64)> {
        let (&s0, v0) = self.ooo.range(..=seq).next_back()?;
        let mut start = s0;
        let mut end = s0 + v0.len() as u64;
        if end <= seq {
            return None;
        }
        // Extend left over adjacent pieces.
        while let Some((&s, v)) = self.ooo.range(..start).next_back() {
            if s + v.len() as u64 == start {
                start = s;
            } else {
                break;
            }
        }
        // Extend right.
        while let Some(v) = self.ooo.get(&end) {
            end += v.len() as u64;
        }
        Some((start, end))
    }

    /// SACK blocks to report now (offsets), most recent first, at most
    /// `max`; a pending D-SACK first (RFC 2883 §4).
    pub(crate) fn sack_blocks(&self, max: usize) -> smallvec::SmallVec<[(u64, u64); 4]> {
        let mut out = smallvec::SmallVec::<[(u64, u64); 4]>::new();
        if let Some(d) = self.dsack {
            out.push(d);
        }
        if self.sack_recent.is_empty() || out.len() >= max {
            return out;
        }
        for &(s, _) in &self.sack_recent {
            if let Some(b) = self.block_containing(s.max(self.rcv_nxt)) {
                if !out[usize::from(self.dsack.is_some())..].contains(&b) {
                    out.push(b);
                }
            }
            if out.len() == max {
                return out;
            }
        }
        out
    }

    /// An ACK (pure or piggybacked) is being sent now.
    pub(crate) fn on_ack_sent(&mut self) {
        self.dsack = None;
        self.ack_now = false;
        self.delack_deadline = None;
        self.pending_bytes = 0;
        self.pushed = 0;
        self.last_ack_sent = self.rcv_nxt;
    }

    /// This end sent data: within the delayed-ACK time of the last data
    /// received, the connection is interactive (Linux `tcp_event_data_sent`,
    /// `TCP_PINGPONG_THRESH` = 1).
    pub(crate) fn on_data_sent(&mut self, now: Instant) {
        if let (Some(t), Some(ato)) = (self.last_data, self.delayed_ack) {
            if now.saturating_duration_since(t) < ato {
                self.pingpong = true;
            }
        }
    }

    /// The delayed-ACK timer fired: Linux `tcp_delack_timer_handler` leaves
    /// interactive mode.
    pub(crate) fn on_delack_timeout(&mut self) {
        self.pingpong = false;
    }

    /// Whether out-of-order data is held.
    #[allow(dead_code)]
    pub(crate) fn has_holes(&self) -> bool {
        !self.ooo.is_empty()
    }

    /// Forces an immediate ACK (e.g. for a segment outside the window).
    pub(crate) fn force_ack(&mut self) {
        self.ack_now = true;
    }

    /// Starts the sequence space after the peer's SYN at offset 0.
    pub(crate) fn on_syn(&mut self) {
        self.rcv_nxt = 1;
        self.last_ack_sent = 1;
    }
}

fn merge_adjacent_pieces(v: &mut Vec<(u64, u64, bool)>) {
    if v.len() < 2 {
        return;
    }
    let mut out: Vec<(u64, u64, bool)> = Vec::with_capacity(v.len());
    for &p in v.iter() {
        match out.last_mut() {
            Some(last) if last.1 == p.0 && last.2 == p.2 => last.1 = p.1,
            _ => out.push(p),
        }
    }
    *v = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rx_dsack() -> Receiver {
        let mut r = Receiver::new(10_000, Some(Duration::from_millis(40)), 0, false, true);
        r.on_syn();
        r
    }

    #[test]
    fn a_duplicate_is_reported_first_as_a_d_sack_once() {
        let now = Instant::ZERO;
        let rto = Duration::from_millis(200);
        let mut r = rx_dsack();
        r.on_segment(now, 1, Bytes::from(vec![0u8; 100]), false, true, rto);
        // 101..201 is lost; 201..301 arrives, then is sent again.
        r.on_segment(now, 201, Bytes::from(vec![0u8; 100]), false, true, rto);
        assert_eq!(r.sack_blocks(3).as_slice(), &[(201, 301)]);
        r.on_ack_sent();
        r.on_segment(now, 201, Bytes::from(vec![0u8; 100]), false, true, rto);
        assert_eq!(r.sack_blocks(3).as_slice(), &[(201, 301), (201, 301)]);
        r.on_ack_sent();
        assert_eq!(r.sack_blocks(3).as_slice(), &[(201, 301)]);
        // Below rcv_nxt: the first segment again.
        r.on_segment(now, 1, Bytes::from(vec![0u8; 100]), false, true, rto);
        assert_eq!(r.sack_blocks(3).as_slice(), &[(1, 101), (201, 301)]);
        // Without D-SACK, nothing of the kind.
        let mut plain = rx();
        plain.on_segment(now, 1, Bytes::from(vec![0u8; 100]), false, true, rto);
        plain.on_segment(now, 1, Bytes::from(vec![0u8; 100]), false, true, rto);
        assert!(plain.sack_blocks(3).is_empty());
    }

    fn rx() -> Receiver {
        let mut r = Receiver::new(10_000, Some(Duration::from_millis(40)), 0, false, false);
        r.on_syn();
        r
    }

    #[test]
    fn in_order_then_hole_then_fill() {
        let mut r = rx();
        let t = Instant::ZERO;
        let rto = Duration::from_secs(1);
        let o = r.on_segment(t, 1, Bytes::from_static(&[1; 100]), false, true, rto);
        assert_eq!(o.arrived, vec![(0, 100, false)]);
        assert_eq!(o.delivered.as_ref().unwrap().0, 0);
        assert!(!r.ack_now && r.delack_deadline.is_some());
        let o = r.on_segment(t, 201, Bytes::from_static(&[3; 100]), false, true, rto);
        assert!(o.delivered.is_none());
        assert!(r.ack_now);
        assert_eq!(r.sack_blocks(3).as_slice(), &[(201, 301)]);
        r.on_ack_sent();
        let o = r.on_segment(t, 401, Bytes::from_static(&[5; 50]), false, true, rto);
        assert!(o.delivered.is_none());
        assert_eq!(r.sack_blocks(3).as_slice(), &[(401, 451), (201, 301)]);
        // Overlapping segment: 150 bytes from 51, of which 50 duplicate, 100 new.
        let o = r.on_segment(t, 51, Bytes::from_static(&[9; 200]), false, true, rto);
        assert_eq!(
            o.arrived,
            vec![(50, 100, true), (100, 200, false), (200, 250, true)]
        );
        let (unit, data) = o.delivered.unwrap();
        assert_eq!((unit, data.len()), (100, 200));
        assert_eq!(r.rcv_nxt, 301);
        assert_eq!(r.sack_blocks(3).as_slice(), &[(401, 451)]);
        assert!(r.ack_now, "filling a hole is acknowledged at once");
    }

    #[test]
    fn every_second_segment_is_acked_and_fin_is_delivered_in_order() {
        let mut r = rx();
        let t = Instant::ZERO;
        let rto = Duration::from_secs(1);
        r.on_segment(t, 1, Bytes::from_static(&[0; 100]), false, true, rto);
        assert!(!r.ack_now);
        r.on_segment(t, 101, Bytes::from_static(&[0; 100]), false, true, rto);
        assert!(r.ack_now);
        r.on_ack_sent();
        let o = r.on_segment(t, 301, Bytes::new(), true, false, rto);
        assert!(!o.fin_reached);
        let o = r.on_segment(t, 201, Bytes::from_static(&[0; 100]), false, true, rto);
        assert!(o.fin_reached && r.fin_done());
        assert_eq!(r.rcv_nxt, 302);
    }
}
