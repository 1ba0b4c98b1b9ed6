//! The send side's data: the send buffer, the queue of segments not yet sent,
//! and the scoreboard of segments sent and not cumulatively acknowledged
//! (Linux's write queue and retransmission queue, RFC 6675's scoreboard).
//!
//! Positions are units (byte offsets of the stream, unit 0 = first data
//! byte). A segment ("skb") owns a non-overlapping unit range; a FIN rides on
//! the last one and takes one sequence number after its data. A segment is
//! only ever trimmed at its front by a cumulative ACK, never re-split, so
//! every transmission covers whole segments and the peer's SACK blocks fall
//! on segment boundaries.

use crate::config::CwndUnit;
use std::collections::VecDeque;
use thinstream_base::Instant;

#[derive(Clone, Debug)]
pub(crate) struct Skb {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) fin: bool,
    /// RDB: first unit of this segment's last new-data transmission (it
    /// carried `[bundle_start, end)`, 002 App. E `tcp_trans_merge_prev`).
    pub(crate) bundle_start: u64,
    /// Time of the last transmission (RACK's `xmit_ts`).
    pub(crate) xmit: Instant,
    /// Place of the last transmission in the connection's send order: what
    /// "sent after" means between transmissions at the same instant (the
    /// simulator's clock is exact; a kernel's transmissions at one
    /// timestamp are one burst, in this order too).
    pub(crate) tx_order: u64,
    /// Sent more than once (Karn's rule, RACK RTT filtering).
    pub(crate) retransmitted: bool,
    pub(crate) sacked: bool,
    /// Deemed lost and not yet retransmitted (or its retransmission deemed lost too).
    pub(crate) lost: bool,
    /// A retransmission is in flight (counts in the pipe, RFC 6675 §4).
    pub(crate) retrans_out: bool,
}

impl Skb {
    pub(crate) fn len(&self) -> u64 {
        self.end - self.start
    }
    /// Sequence offset of the first byte (SYN = 0, unit 0 = 1).
    pub(crate) fn seq_start(&self) -> u64 {
        self.start + 1
    }
    pub(crate) fn seq_end(&self) -> u64 {
        self.end + 1 + u64::from(self.fin)
    }
    /// What the segment counts for in the pipe and congestion window.
    pub(crate) fn amount(&self, unit: CwndUnit) -> u64 {
        match unit {
            CwndUnit::Bytes => self.len().max(1),
            CwndUnit::Packets => 1,
        }
    }
    /// In the network as far as the scoreboard knows (RFC 6675 `pipe`).
    pub(crate) fn in_flight(&self) -> u64 {
        if self.sacked {
            0
        } else {
            u64::from(!self.lost) + u64::from(self.retrans_out)
        }
    }
}

/// A segment acknowledged by a cumulative ACK (whole, or the acked front).
#[derive(Clone, Debug)]
pub(crate) struct AckedSkb {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) whole: bool,
    pub(crate) was_sacked: bool,
    pub(crate) retransmitted: bool,
    pub(crate) xmit: Instant,
    pub(crate) tx_order: u64,
    pub(crate) seq_end: u64,
}

#[derive(Debug, Default)]
pub(crate) struct SendQueue {
    buf: VecDeque<u8>,
    /// Unit of `buf[0]`.
    buf_start: u64,
    /// Units written by the application so far.
    pub(crate) written: u64,
    pub(crate) rtx: VecDeque<Skb>,
    pub(crate) unsent: VecDeque<Skb>,
    pub(crate) fin_queued: bool,
}

impl SendQueue {
    /// Appends an application write. Written data joins the tail segment only
    /// while that segment waits unsent behind the window (Linux
    /// `tcp_sendmsg` fills the last unsent skb up to the MSS); otherwise each
    /// write starts its own segment(s).
    ///
    /// `limit` is the most the buffer will ever hold (the send buffer size):
    /// its storage grows by doubling but never past that, so a writer that
    /// keeps the buffer full (a thin stream behind a congested bottleneck)
    /// costs `limit` bytes, not the next doubling above it.
    pub(crate) fn write(&mut self, data: &[u8], mss: u64, limit: u64, now: Instant) -> (u64, u64) {
        let start = self.written;
        let need = self.buf.len() + data.len();
        if need > self.buf.capacity() {
            let limit = usize::try_from(limit).unwrap_or(usize::MAX).max(need);
            let target = self.buf.capacity().saturating_mul(2).clamp(need, limit);
            self.buf.reserve_exact(target - self.buf.len());
        }
        self.buf.extend(data);
        let end = start + data.len() as u64;
        let mut pos = start;
        if let Some(tail) = self.unsent.back_mut() {
            if !tail.fin && tail.end == pos && tail.len() < mss {
                let take = (mss - tail.len()).min(end - pos);
                tail.end += take;
                pos += take;
            }
        }
        while pos < end {
            let e = end.min(pos + mss);
            self.unsent.push_back(Skb {
                start: pos,
                end: e,
                fin: false,
                bundle_start: pos,
                xmit: now,
                tx_order: 0,
                retransmitted: false,
                sacked: false,
                lost: false,
                retrans_out: false,
            });
            pos = e;
        }
        self.written = end;
        (start, end)
    }

    /// Queues the FIN after all written data.
    pub(crate) fn queue_fin(&mut self, now: Instant) {
        if self.fin_queued {
            return;
        }
        self.fin_queued = true;
        if let Some(tail) = self.unsent.back_mut() {
            tail.fin = true;
            return;
        }
        self.unsent.push_back(Skb {
            start: self.written,
            end: self.written,
            fin: true,
            bundle_start: self.written,
            xmit: now,
            tx_order: 0,
            retransmitted: false,
            sacked: false,
            lost: false,
            retrans_out: false,
        });
    }

    /// Copies units `[start, end)` out of the buffer.
    #[cfg(test)]
    pub(crate) fn bytes(&self, start: u64, end: u64) -> Vec<u8> {
        self.slices(start, end).concat()
    }

    /// Units `[start, end)` of the buffer, in place: the parts of them in
    /// the ring buffer's two halves (either may be empty).
    pub(crate) fn slices(&self, start: u64, end: u64) -> [&[u8]; 2] {
        let lo = (start - self.buf_start) as usize;
        let hi = (end - self.buf_start) as usize;
        let (front, back) = self.buf.as_slices();
        let a = if lo < front.len() {
            &front[lo..hi.min(front.len())]
        } else {
            &[][..]
        };
        let b = if hi > front.len() {
            &back[lo.saturating_sub(front.len())..hi - front.len()]
        } else {
            &[][..]
        };
        [a, b]
    }

    /// Bytes held in the send buffer (written, not cumulatively acknowledged).
    pub(crate) fn buffered(&self) -> u64 {
        self.buf.len() as u64
    }

    /// Sequence offset of the next new byte (`snd_nxt`).
    pub(crate) fn snd_nxt(&self, snd_una: u64) -> u64 {
        self.rtx.back().map_or(snd_una, |s| s.seq_end())
    }

    /// Removes what the cumulative ACK `una` (sequence offset) covers.
    #[cfg(test)]
    pub(crate) fn ack(&mut self, una: u64) -> Vec<AckedSkb> {
        let mut out = Vec::new();
        self.ack_into(una, &mut out);
        out
    }

    /// [`SendQueue::ack`] into `out` (cleared first), a buffer the caller
    /// reuses from one ACK to the next.
    pub(crate) fn ack_into(&mut self, una: u64, out: &mut Vec<AckedSkb>) {
        out.clear();
        while let Some(front) = self.rtx.front_mut() {
            if front.seq_end() <= una {
                let s = self.rtx.pop_front().expect("front exists");
                out.push(AckedSkb {
                    start: s.start,
                    end: s.end,
                    whole: true,
                    was_sacked: s.sacked,
                    retransmitted: s.retransmitted,
                    xmit: s.xmit,
                    tx_order: s.tx_order,
                    seq_end: s.seq_end(),
                });
            } else {
                if front.seq_start() < una {
                    // Partial ACK inside a segment: trim its front (002 §4.3.3
                    // for RDB; Linux trims before retransmitting in any case).
                    let cut = una - 1;
                    out.push(AckedSkb {
                        start: front.start,
                        end: cut,
                        whole: false,
                        was_sacked: front.sacked,
                        retransmitted: front.retransmitted,
                        xmit: front.xmit,
                        tx_order: front.tx_order,
                        seq_end: una,
                    });
                    front.start = cut;
                    front.bundle_start = front.bundle_start.max(cut);
                }
                break;
            }
        }
        let data_una = una.saturating_sub(1).min(self.written);
        while self.buf_start < data_una {
            let n = ((data_una - self.buf_start) as usize).min(self.buf.len());
            self.buf.drain(..n);
            self.buf_start += n as u64;
            if n == 0 {
                break;
            }
        }
    }

    /// Marks segments wholly inside the SACK block `[l, r)` (sequence
    /// offsets); returns the indices newly marked.
    pub(crate) fn sack(&mut self, l: u64, r: u64) -> Vec<usize> {
        let mut out = Vec::new();
        // Segments are sorted; find the first whose end is beyond l.
        let first = self.rtx.partition_point(|s| s.seq_end() <= l);
        for i in first..self.rtx.len() {
            let s = &mut self.rtx[i];
            if s.seq_start() >= r {
                break;
            }
            if !s.sacked && s.seq_start() >= l && s.seq_end() <= r {
                s.sacked = true;
                s.lost = false;
                s.retrans_out = false;
                out.push(i);
            }
        }
        out
    }

    /// RFC 6675 `pipe` in the congestion window's unit.
    pub(crate) fn pipe(&self, unit: CwndUnit) -> u64 {
        self.rtx
            .iter()
            .map(|s| s.in_flight() * s.amount(unit))
            .sum()
    }

    pub(crate) fn sacked_count(&self) -> u64 {
        self.rtx.iter().filter(|s| s.sacked).count() as u64
    }

    /// RFC 6675 §4 `IsLost`: marks not-yet-lost segments with at least
    /// `dupthresh` SACKed segments, or more than `(dupthresh-1)·MSS` SACKed
    /// bytes, above them. Returns whether anything was newly marked.
    pub(crate) fn mark_lost_by_sack(&mut self, dupthresh: u64, mss: u64) -> bool {
        let mut count = 0u64;
        let mut bytes = 0u64;
        let mut marked = false;
        for s in self.rtx.iter_mut().rev() {
            if s.sacked {
                count += 1;
                bytes += s.len();
                continue;
            }
            if !s.lost && !s.retrans_out && (count >= dupthresh || bytes > (dupthresh - 1) * mss) {
                s.lost = true;
                marked = true;
            }
        }
        marked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_coalesce_only_while_unsent() {
        let mut q = SendQueue::default();
        let t = Instant::ZERO;
        q.write(&[1; 100], 1448, u64::MAX, t);
        q.write(&[2; 100], 1448, u64::MAX, t);
        assert_eq!(q.unsent.len(), 1);
        assert_eq!(q.unsent[0].len(), 200);
        let s = q.unsent.pop_front().unwrap();
        q.rtx.push_back(s);
        q.write(&[3; 3000], 1448, u64::MAX, t);
        let lens: Vec<u64> = q.unsent.iter().map(|s| s.len()).collect();
        assert_eq!(lens, vec![1448, 1448, 104]);
        assert_eq!(q.bytes(199, 201), vec![2, 3]);
    }

    // Copies out of the ring buffer are right across its wrap point.
    #[test]
    fn bytes_across_the_ring_buffers_wrap_point() {
        let mut q = SendQueue::default();
        let t = Instant::ZERO;
        let mut written: Vec<u8> = Vec::new();
        let mut wrapped = 0;
        for round in 0..40u32 {
            let data: Vec<u8> = (0..97u32).map(|i| (i * 7 + round) as u8).collect();
            q.write(&data, 1448, u64::MAX, t);
            written.extend_from_slice(&data);
            while let Some(s) = q.unsent.pop_front() {
                q.rtx.push_back(s);
            }
            // Acknowledge all but the last 150 bytes, so the buffer's front
            // moves on and later writes wrap around its storage.
            let una = q.written.saturating_sub(150);
            q.ack(una + 1);
            let base = q.buf_start;
            wrapped += usize::from(!q.buf.as_slices().1.is_empty());
            for (lo, hi) in [
                (base, q.written),
                (base + 3, q.written - 5),
                (q.written, q.written),
            ] {
                assert_eq!(
                    q.bytes(lo, hi),
                    written[lo as usize..hi as usize].to_vec(),
                    "round {round}, [{lo}, {hi})"
                );
            }
        }
        assert!(wrapped > 0, "the buffer never wrapped");
    }

    // A writer keeping the buffer full (small writes up to the send buffer
    // size, the front acknowledged and refilled) never makes the storage
    // grow past that size.
    #[test]
    fn storage_stays_within_the_send_buffer_size() {
        let mut q = SendQueue::default();
        let t = Instant::ZERO;
        let limit = 256 * 1024;
        for round in 0..3u64 {
            while q.buffered() + 120 <= limit {
                q.write(&[round as u8; 120], 1448, limit, t);
            }
            assert!(q.buf.capacity() as u64 >= q.buffered());
            assert!(
                q.buf.capacity() as u64 <= limit,
                "round {round}: capacity {} above the limit {limit}",
                q.buf.capacity()
            );
            while let Some(s) = q.unsent.pop_front() {
                q.rtx.push_back(s);
            }
            let una = q.written - 1000;
            q.ack(una + 1);
        }
        assert_eq!(q.bytes(q.written - 1, q.written), vec![2]);
    }

    #[test]
    fn partial_ack_trims_and_sack_marks_whole_segments() {
        let mut q = SendQueue::default();
        let t = Instant::ZERO;
        for _ in 0..4 {
            q.write(&[0; 100], 1448, u64::MAX, t);
            let s = q.unsent.pop_front().unwrap();
            q.rtx.push_back(s);
        }
        assert_eq!(q.sack(201, 301), vec![2]);
        assert!(q.sack(150, 260).is_empty());
        assert!(q.mark_lost_by_sack(1, 1448));
        assert!(q.rtx[0].lost && q.rtx[1].lost && !q.rtx[3].lost);
        let acked = q.ack(51);
        assert_eq!(acked.len(), 1);
        assert!(!acked[0].whole);
        assert_eq!(q.rtx[0].start, 50);
        assert_eq!(q.buffered(), 350);
        let acked = q.ack(401);
        assert_eq!(acked.len(), 4);
        assert!(q.rtx.is_empty());
        assert_eq!(q.buffered(), 0);
    }
}
