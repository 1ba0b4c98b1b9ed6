//! Sending side: message queue with TSNs assigned at submission (FIFO
//! across streams) or, with I-DATA, by the interleaving scheduler as
//! fragments are cut; SACK processing (§6.2.1), RTT measurement (§6.3.1,
//! Karn), T3-rtx (§6.3.2, §6.3.3), fast retransmit and fast recovery
//! (§7.2.4), congestion and flow control when packetizing (§6.1, §7.2);
//! partial reliability (abandoning messages, the Advanced.Peer.Ack.Point
//! and FORWARD TSN / I-FORWARD-TSN). The policies and choices are described
//! in the [`association`](super) module docs.

use std::collections::{BTreeMap, VecDeque};
use thinstream_base::drive::{visit_deque, visit_vec};

use smallvec::SmallVec;

use bytes::Bytes;
use thinstream_base::drive::{AppEvent, SendError};
use thinstream_base::trace::{Record, SentData, TxReason, Units};
use thinstream_base::Instant;

use super::congestion::{AckInfo, LossKind};
use super::timers::Timer;
use super::{Association, State};
use crate::mechanism::{ChunkView, NewDataBundling, OutstandingView, RttSampling};
use crate::wire::{
    data_chunk_len, idata_chunk_len, Chunk, DataChunk, ForwardTsnChunk, ForwardTsnStream,
    IDataChunk, IForwardTsnChunk, IForwardTsnStream, SackChunk, Ssn, Tsn,
};

/// Where a queued DATA chunk is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChunkState {
    /// Queued, never sent.
    Unsent,
    /// Sent and counted in the flight size.
    InFlight,
    /// Acknowledged by a gap block (kept until cumulatively acked, §6.2.1).
    GapAcked,
    /// Waiting for retransmission with this reason (not in flight).
    Marked(TxReason),
    /// Given up on (partial reliability, RFC 3758): neither in flight nor
    /// outstanding; kept until a FORWARD TSN moved the peer's cumulative
    /// ack point past it.
    Abandoned,
}

/// A queued DATA chunk: 128 bytes, aligned to a cache line, so that one
/// chunk is two cache lines of the send queue (a SACK reads a chunk sent
/// a round trip earlier, long out of the caches with many associations).
#[derive(Clone, Debug)]
#[repr(align(64))]
pub(crate) struct TxChunk {
    pub(crate) tsn: Tsn,
    pub(crate) unit: u64,
    pub(crate) stream: u16,
    pub(crate) ssn: Ssn,
    pub(crate) ppid: u32,
    pub(crate) unordered: bool,
    pub(crate) beginning: bool,
    pub(crate) ending: bool,
    pub(crate) payload: Bytes,
    pub(crate) state: ChunkState,
    pub(crate) transmissions: u32,
    pub(crate) last_sent: Instant,
    pub(crate) missing_reports: u32,
    /// Already fast-retransmitted once: later losses need the T3 timer
    /// (§7.2.4: a chunk is fast-retransmitted at most once).
    pub(crate) fast_retransmitted: bool,
    /// Id of the packet that last carried it (in-flight packet accounting).
    pub(crate) packet: u64,
    /// Reported received once already (the `Acked` record is written once,
    /// even if the peer later reneges on a gap ack).
    pub(crate) acked_once: bool,
    /// When the chunk was first put on the wire (RTT sampling).
    pub(crate) first_sent: Instant,
    /// Retransmitted for loss (fast, early, timeout, bundled on a
    /// retransmission); redundant copies do not count. Such a chunk never
    /// gives a [`RttSampling::PerSack`] sample.
    pub(crate) loss_retransmitted: bool,
    /// Sender-local id of the message the chunk belongs to (the id `send`
    /// returned): partial reliability abandons whole messages.
    pub(crate) msg: u64,
    /// I-DATA Message Identifier and Fragment Sequence Number (RFC 8260).
    pub(crate) mid: u32,
    pub(crate) fsn: u32,
    /// Partial reliability (RFC 3758 timed reliability, RFC 7496 limited
    /// retransmissions): give up after `expires_at` if `expires`, after
    /// `max_rtx` retransmissions if `limited` (flags rather than options:
    /// the chunk stays within 128 bytes; see [`TxChunk::expires`]).
    expires_at: Instant,
    max_rtx: u32,
    expires: bool,
    limited: bool,
    /// Retransmissions for loss so far (fast, early, timeout, bundled).
    pub(crate) rtx: u32,
}

// Two cache lines per queued chunk (see the struct's note).
const _: () = assert!(std::mem::size_of::<TxChunk>() == 128);

impl TxChunk {
    /// The lifetime's end (timed reliability), if any.
    pub(crate) fn expires(&self) -> Option<Instant> {
        self.expires.then_some(self.expires_at)
    }
    /// The retransmission limit (limited retransmissions), if any.
    pub(crate) fn max_rtx(&self) -> Option<u32> {
        self.limited.then_some(self.max_rtx)
    }
    fn len(&self) -> u32 {
        self.payload.len() as u32
    }
    /// The chunk as DATA, or as I-DATA when interleaving is in use.
    fn to_wire(&self, idata: bool) -> Chunk {
        if idata {
            return Chunk::IData(IDataChunk {
                tsn: self.tsn,
                stream: self.stream,
                mid: self.mid,
                ppid_fsn: if self.beginning { self.ppid } else { self.fsn },
                unordered: self.unordered,
                beginning: self.beginning,
                ending: self.ending,
                immediate: false,
                payload: self.payload.clone(),
            });
        }
        Chunk::Data(DataChunk {
            tsn: self.tsn,
            stream: self.stream,
            ssn: self.ssn,
            ppid: self.ppid,
            unordered: self.unordered,
            beginning: self.beginning,
            ending: self.ending,
            immediate: false,
            payload: self.payload.clone(),
        })
    }
    /// Whether partial reliability gives up on it now: its lifetime has
    /// passed, or it needs a retransmission beyond its limit (`marked`).
    fn pr_expired(&self, now: Instant, marked: bool) -> bool {
        self.expires().is_some_and(|t| now > t)
            || (marked && self.max_rtx().is_some_and(|m| self.rtx >= m))
    }
    fn is_pr(&self) -> bool {
        self.expires || self.limited
    }
}

/// Fragments a stream may cut in one turn of the interleaving scheduler
/// before the next stream with queued data gets its turn. Messages of up
/// to this many fragments (about 5.7 KB at the default PMTU) are sent
/// without interruption, so interleaving never delays their completion;
/// longer ones let others in every few packets.
pub(crate) const SCHED_QUANTUM: u32 = 4;

/// A message waiting in the interleaving scheduler (I-DATA in use): no TSN
/// yet; fragments are cut and numbered when the scheduler picks them.
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    pub(crate) msg: u64,
    pub(crate) unordered: bool,
    pub(crate) ppid: u32,
    pub(crate) payload: Bytes,
    /// Bytes already cut into fragments.
    pub(crate) offset: usize,
    pub(crate) fsn: u32,
    /// MID, assigned with the first fragment.
    pub(crate) mid: Option<u32>,
    pub(crate) expires: Option<Instant>,
    pub(crate) max_rtx: Option<u32>,
}

/// The largest emptied queue buffer (in messages) kept for the next one.
const SPARE_QUEUE_MAX: usize = 16;

/// The queues of the interleaving scheduler: (stream, its messages) for
/// the streams with queued messages, sorted by stream. One stream's entry
/// is stored inline: a thin stream's message then touches no block of its
/// own beyond its payload (a search tree kept a node per association that
/// every message read and wrote).
#[derive(Debug, Default)]
pub(crate) struct Sched {
    q: SmallVec<[(u16, VecDeque<Pending>); 1]>,
    /// The buffer of the last queue emptied, for the next queue made: a
    /// stream that empties its queue at every message (a thin stream)
    /// does not allocate one per message.
    spare: VecDeque<Pending>,
}

impl Sched {
    pub(crate) fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
    pub(crate) fn clear(&mut self) {
        self.q.clear();
    }
    fn find(&self, stream: u16) -> Result<usize, usize> {
        self.q.binary_search_by_key(&stream, |e| e.0)
    }
    /// The queues in stream order.
    pub(crate) fn queues(&self) -> impl Iterator<Item = &VecDeque<Pending>> {
        self.q.iter().map(|e| &e.1)
    }
    pub(crate) fn get(&self, stream: u16) -> Option<&VecDeque<Pending>> {
        self.find(stream).ok().map(|i| &self.q[i].1)
    }
    pub(crate) fn get_mut(&mut self, stream: u16) -> Option<&mut VecDeque<Pending>> {
        self.find(stream).ok().map(|i| &mut self.q[i].1)
    }
    /// The queue of `stream`, made (empty) if it has none.
    pub(crate) fn queue(&mut self, stream: u16) -> &mut VecDeque<Pending> {
        let i = match self.find(stream) {
            Ok(i) => i,
            Err(i) => {
                self.q.insert(i, (stream, std::mem::take(&mut self.spare)));
                i
            }
        };
        &mut self.q[i].1
    }
    pub(crate) fn remove(&mut self, stream: u16) {
        if let Ok(i) = self.find(stream) {
            let (_, mut q) = self.q.remove(i);
            if q.capacity() <= SPARE_QUEUE_MAX && q.capacity() > self.spare.capacity() {
                q.clear();
                self.spare = q;
            }
        }
    }
    /// The first stream with a queue from `from` on, else the first one
    /// (round robin).
    pub(crate) fn next_stream(&self, from: u16) -> Option<u16> {
        let i = self.find(from).unwrap_or_else(|i| i);
        self.q.get(i).or_else(|| self.q.first()).map(|e| e.0)
    }
}

/// Sender state. `chunks[i]` has unit `cum_unit + i` and TSN
/// `initial_tsn + cum_unit + i`; `chunks[..next_unsent]` were sent.
/// Laid out in declaration order and aligned to a cache line: see the
/// layout note on [`Association`].
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Sender {
    // What every packet built checks, also at an end that only receives
    // data and sends SACKs: one cache line.
    /// SentData of the packet being built (for the trace).
    pub(crate) last_sent_data: Vec<SentData>,
    /// Queued chunks with a partial-reliability policy (sweeps are skipped
    /// while there are none).
    pub(crate) pr_live: usize,
    next_packet: u64,
    pub(crate) marked: usize,
    pub(crate) next_unsent: usize,
    /// A FORWARD TSN / I-FORWARD-TSN is to be sent (RFC 3758 §3.5 C3).
    pub(crate) fwd_pending: bool,
    /// I-DATA in use (RFC 8260, both sides offered it).
    pub(crate) idata: bool,
    /// The next retransmission packet ignores cwnd (§7.2.4 step 3; §6.3.3 E3).
    pub(crate) rtx_packet_free: bool,
    pub(crate) blocked: bool,
    /// The stream the scheduler serves next (round robin).
    pub(crate) sched_rr: u16,
    // Sending and acknowledging.
    pub(crate) chunks: VecDeque<TxChunk>,
    /// Payload bytes in flight (InFlight chunks).
    pub(crate) flight: u32,
    /// Payload bytes sent and not acknowledged (InFlight + Marked).
    pub(crate) outstanding_bytes: u32,
    /// Chunks in the InFlight state.
    pub(crate) in_flight_chunks: u32,
    pub(crate) peer_rwnd: u32,
    /// Units cumulatively acknowledged (unit of the first queued chunk).
    pub(crate) cum_unit: u64,
    pub(crate) initial_tsn: Tsn,
    /// Fragments cut for `sched_rr` in its current turn.
    pub(crate) sched_turn: u32,
    /// The interleaving scheduler: messages without TSNs, per stream (only
    /// streams with queued messages have an entry).
    pub(crate) sched: Sched,
    /// Payload bytes of never-sent chunks.
    pub(crate) unsent_bytes: usize,
    /// Payload bytes of all queued chunks (send-buffer accounting).
    pub(crate) queued_bytes: usize,
    pub(crate) next_message: u64,
    /// (packet id, DATA chunks of that packet still in flight), sorted by
    /// id, no zero counts. Ids grow, so a new packet goes to the back and
    /// acknowledged ones leave from the front: a deque whose one block a
    /// thin stream keeps to a few entries (a search tree's node took more
    /// cache lines per packet).
    packets: VecDeque<(u64, u32)>,
    /// Karn: the one chunk being timed (unit, sent at).
    pub(crate) rtt_probe: Option<(u64, Instant)>,
    /// Fast recovery exit point (highest unit outstanding at entry).
    pub(crate) fast_recovery: Option<u64>,
    /// When DATA was last put on the wire (idle cwnd decay, §7.2.1).
    pub(crate) last_data_at: Option<Instant>,
    /// Unit of the oldest outstanding chunk whose T3 expiry was postponed
    /// once already (`t3_wait_for_newer_sack`).
    pub(crate) t3_postponed_for: Option<u64>,
    /// A new fragment size (path MTU discovery) waiting for the
    /// interleaving scheduler to empty: its queued messages were counted
    /// in fragments of the old size.
    pub(crate) frag_next: Option<usize>,
    /// Largest fragment payload (DATA or I-DATA header subtracted).
    pub(crate) frag: usize,
    /// Fragments still to cut from the scheduler's messages.
    pub(crate) sched_frags: u64,
    /// Next I-DATA MID per outbound stream, ordered and unordered.
    pub(crate) mid_ordered: Vec<u32>,
    /// The new cumulative TSN of the last FORWARD TSN sent, and when.
    pub(crate) fwd_last: Option<(Tsn, Instant)>,
    /// How RTT samples are taken (copied from the mechanisms).
    pub(crate) rtt_mode: RttSampling,
    pub(crate) ssn: Vec<Ssn>,
    pub(crate) mid_unordered: Vec<u32>,
}

impl Sender {
    /// The heap memory the next packet sent or SACK taken touches (see
    /// `Transport::hot_memory`).
    pub(crate) fn hot_memory(&self, visit: &mut dyn FnMut(*const u8, usize)) {
        visit_deque(&self.chunks, visit);
        visit_deque(&self.packets, visit);
        visit_vec(&self.last_sent_data, visit);
        visit_vec(&self.mid_ordered, visit);
    }

    pub(crate) fn new(initial_tsn: Tsn, peer_rwnd: u32) -> Self {
        Sender {
            initial_tsn,
            cum_unit: 0,
            chunks: VecDeque::new(),
            next_unsent: 0,
            flight: 0,
            outstanding_bytes: 0,
            marked: 0,
            in_flight_chunks: 0,
            unsent_bytes: 0,
            queued_bytes: 0,
            peer_rwnd,
            ssn: Vec::new(),
            next_message: 0,
            packets: VecDeque::new(),
            next_packet: 0,
            rtt_probe: None,
            fast_recovery: None,
            rtx_packet_free: false,
            blocked: false,
            last_sent_data: Vec::new(),
            last_data_at: None,
            rtt_mode: RttSampling::Karn,
            t3_postponed_for: None,
            idata: false,
            mid_ordered: Vec::new(),
            mid_unordered: Vec::new(),
            sched: Sched::default(),
            sched_rr: 0,
            sched_turn: 0,
            sched_frags: 0,
            frag_next: None,
            pr_live: 0,
            fwd_pending: false,
            fwd_last: None,
            frag: 1,
        }
    }

    /// Size on the wire of a DATA or I-DATA chunk with `payload` bytes.
    pub(crate) fn chunk_len(&self, payload: usize) -> usize {
        if self.idata {
            idata_chunk_len(payload)
        } else {
            data_chunk_len(payload)
        }
    }

    /// Whether new data waits (queued chunks not yet sent, or messages in
    /// the interleaving scheduler).
    pub(crate) fn has_unsent(&self) -> bool {
        self.next_unsent < self.chunks.len() || !self.sched.is_empty()
    }

    /// Unsent chunks, counting fragments still in the scheduler.
    pub(crate) fn unsent_chunks(&self) -> u64 {
        (self.chunks.len() - self.next_unsent) as u64 + self.sched_frags
    }

    /// Number of chunks from the cumulative ack point on that were
    /// abandoned: the Advanced.Peer.Ack.Point (RFC 3758 §3.5 C2) lies that
    /// many TSNs beyond the cumulative TSN ack.
    pub(crate) fn abandoned_prefix(&self) -> usize {
        self.chunks
            .iter()
            .take(self.next_unsent)
            .take_while(|c| c.state == ChunkState::Abandoned)
            .count()
    }

    pub(crate) fn clear(&mut self) {
        self.chunks.clear();
        self.next_unsent = 0;
        self.flight = 0;
        self.outstanding_bytes = 0;
        self.marked = 0;
        self.in_flight_chunks = 0;
        self.unsent_bytes = 0;
        self.queued_bytes = 0;
        self.packets.clear();
        self.rtt_probe = None;
        self.fast_recovery = None;
        self.sched.clear();
        self.sched_frags = 0;
        self.pr_live = 0;
        self.fwd_pending = false;
    }

    /// The cumulative TSN ack point (TSN of the last acknowledged chunk).
    pub(crate) fn cum_tsn(&self) -> Tsn {
        self.initial_tsn.add(self.cum_unit as u32).prev()
    }

    pub(crate) fn packets_in_flight(&self) -> u32 {
        self.packets.len() as u32
    }

    pub(crate) fn outstanding_chunks(&self) -> u32 {
        self.in_flight_chunks + self.marked as u32
    }

    fn packet_done(&mut self, id: u64) {
        if let Ok(i) = self.packets.binary_search_by_key(&id, |&(p, _)| p) {
            self.packets[i].1 -= 1;
            if self.packets[i].1 == 0 {
                self.packets.remove(i);
            }
        }
    }

    /// Set the number of DATA chunks in flight in packet `id`.
    fn packet_set(&mut self, id: u64, chunks: u32) {
        match self.packets.binary_search_by_key(&id, |&(p, _)| p) {
            Ok(i) => self.packets[i].1 = chunks,
            Err(i) => self.packets.insert(i, (id, chunks)),
        }
    }

    /// Count `chunks` more DATA chunks in flight in packet `id`.
    fn packet_add(&mut self, id: u64, chunks: u32) {
        match self.packets.binary_search_by_key(&id, |&(p, _)| p) {
            Ok(i) => self.packets[i].1 += chunks,
            Err(i) => self.packets.insert(i, (id, chunks)),
        }
    }

    /// Take chunk `i` out of the flight (acked or marked).
    fn leave_flight(&mut self, i: usize) {
        let (len, id) = (self.chunks[i].len(), self.chunks[i].packet);
        self.flight = self.flight.saturating_sub(len);
        self.in_flight_chunks -= 1;
        self.packet_done(id);
    }

    fn mark(&mut self, i: usize, reason: TxReason) {
        match self.chunks[i].state {
            ChunkState::InFlight => {
                self.leave_flight(i);
                self.marked += 1;
            }
            ChunkState::Marked(_) => {}
            ChunkState::Unsent | ChunkState::GapAcked | ChunkState::Abandoned => return,
        }
        self.chunks[i].state = ChunkState::Marked(reason);
        if self.rtt_mode != RttSampling::FirstAck
            && matches!(self.rtt_probe, Some((u, _)) if u == self.chunks[i].unit)
        {
            // Karn: never time a retransmitted chunk (the documents' lksctp,
            // `FirstAck`, keeps timing it, 000 §8).
            self.rtt_probe = None;
        }
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        let (mut flight, mut outstanding, mut marked, mut inflight, mut unsent, mut queued) =
            (0u32, 0u32, 0usize, 0u32, 0usize, 0usize);
        let mut per_packet: BTreeMap<u64, u32> = BTreeMap::new();
        let mut pr = 0usize;
        for (i, c) in self.chunks.iter().enumerate() {
            pr += usize::from(c.is_pr());
            if c.unit != self.cum_unit + i as u64 || c.tsn != self.initial_tsn.add(c.unit as u32) {
                return Err(format!("chunk {i} has unit {} tsn {}", c.unit, c.tsn));
            }
            // Below `next_unsent` everything was sent (or given up); from
            // there on chunks are unsent, or given up before being sent.
            let consistent = if i < self.next_unsent {
                c.state != ChunkState::Unsent
            } else {
                matches!(c.state, ChunkState::Unsent | ChunkState::Abandoned)
            };
            if !consistent {
                return Err(format!(
                    "chunk {i} state {:?} vs next_unsent {}",
                    c.state, self.next_unsent
                ));
            }
            queued += c.payload.len();
            match c.state {
                ChunkState::Unsent => unsent += c.payload.len(),
                ChunkState::InFlight => {
                    flight += c.len();
                    outstanding += c.len();
                    inflight += 1;
                    *per_packet.entry(c.packet).or_default() += 1;
                }
                ChunkState::Marked(_) => {
                    outstanding += c.len();
                    marked += 1;
                }
                ChunkState::GapAcked | ChunkState::Abandoned => {}
            }
        }
        let (mut frags, mut sched_bytes) = (0u64, 0usize);
        for q in self.sched.queues() {
            if q.is_empty() {
                return Err("empty scheduler queue kept".into());
            }
            for m in q {
                let left = m.payload.len() - m.offset;
                sched_bytes += left;
                frags += left.div_ceil(self.frag.max(1)) as u64;
            }
        }
        if self.sched_frags != frags {
            return Err(format!(
                "scheduler counts {} fragments, queues hold {frags}",
                self.sched_frags
            ));
        }
        unsent += sched_bytes;
        queued += sched_bytes;
        if pr != self.pr_live {
            return Err(format!(
                "pr_live {} but {pr} chunks have a policy",
                self.pr_live
            ));
        }
        let got = (flight, outstanding, marked, inflight, unsent, queued);
        let want = (
            self.flight,
            self.outstanding_bytes,
            self.marked,
            self.in_flight_chunks,
            self.unsent_bytes,
            self.queued_bytes,
        );
        if got != want {
            return Err(format!("sender counters {want:?} but chunks say {got:?}"));
        }
        if !per_packet
            .iter()
            .map(|(&p, &n)| (p, n))
            .eq(self.packets.iter().copied())
        {
            return Err(format!("packet map {:?} vs {:?}", self.packets, per_packet));
        }
        Ok(())
    }

    /// Whether everything sent has been acknowledged.
    pub(crate) fn nothing_outstanding(&self) -> bool {
        self.outstanding_bytes == 0
    }
}

impl Association {
    /// Fragment and queue one message. Without I-DATA, TSNs are assigned
    /// now (§6.9 with consecutive TSNs for the fragments); with I-DATA the
    /// message waits in the interleaving scheduler and gets its TSNs, MID
    /// and FSNs fragment by fragment as packets are built.
    pub(crate) fn queue_message(
        &mut self,
        now: Instant,
        p: &super::SendParams,
        data: &[u8],
    ) -> Result<u64, SendError> {
        if !matches!(self.state, State::Established) {
            return Err(SendError::NotConnected);
        }
        if data.is_empty() {
            return Err(SendError::Empty);
        }
        if p.stream >= self.out_streams {
            return Err(SendError::InvalidStream {
                stream: p.stream,
                streams: self.out_streams,
            });
        }
        let partial = p.lifetime.is_some() || p.max_retransmissions.is_some();
        if partial && !self.peer_forward_tsn {
            return Err(SendError::Unsupported(
                "partial reliability: the peer does not support FORWARD TSN",
            ));
        }
        let max = self
            .config
            .max_message_size
            .min(self.config.send_buffer.max(1));
        if data.len() > max {
            return Err(SendError::TooLarge {
                bytes: data.len(),
                max,
            });
        }
        if self.tx.queued_bytes + data.len() > self.config.send_buffer {
            self.tx.blocked = true;
            return Err(SendError::BufferFull);
        }
        if self.tx.sched.is_empty() {
            if let Some(f) = self.tx.frag_next.take() {
                self.tx.frag = f;
            }
        }
        let frag = self.tx.frag.max(1);
        let mut payload = Bytes::copy_from_slice(data);
        let len = payload.len();
        let stream = usize::from(p.stream);
        let expires = p.lifetime.map(|l| now + l);
        let id = self.tx.next_message;
        self.tx.next_message += 1;
        let n = len.div_ceil(frag);
        // The units the message occupies. With I-DATA this assumes the
        // scheduler sends in submission order, which holds while only one
        // stream has data queued (module docs: trace units and I-DATA).
        let first_unit = self.tx.cum_unit + self.tx.chunks.len() as u64 + self.tx.sched_frags;
        if self.tx.idata {
            self.tx.sched.queue(p.stream).push_back(Pending {
                msg: id,
                unordered: p.unordered,
                ppid: p.ppid,
                payload,
                offset: 0,
                fsn: 0,
                mid: None,
                expires,
                max_rtx: p.max_retransmissions,
            });
            self.tx.sched_frags += n as u64;
        } else {
            // Unordered messages do not consume an SSN (§6.6: the SSN is ignored).
            let ssn = if p.unordered {
                Ssn(0)
            } else {
                let s = self.tx.ssn[stream];
                self.tx.ssn[stream] = s.next();
                s
            };
            for k in 0..n {
                let start = k * frag;
                let end = (start + frag).min(len);
                let unit = first_unit + k as u64;
                self.tx.chunks.push_back(TxChunk {
                    tsn: self.tx.initial_tsn.add(unit as u32),
                    unit,
                    stream: p.stream,
                    ssn,
                    ppid: p.ppid,
                    unordered: p.unordered,
                    beginning: k == 0,
                    ending: k + 1 == n,
                    // One chunk takes the message's bytes as they are
                    // (slicing a fresh `Bytes` makes it allocate a shared
                    // header).
                    payload: if n == 1 {
                        std::mem::take(&mut payload)
                    } else {
                        payload.slice(start..end)
                    },
                    state: ChunkState::Unsent,
                    transmissions: 0,
                    last_sent: now,
                    missing_reports: 0,
                    fast_retransmitted: false,
                    packet: 0,
                    acked_once: false,
                    first_sent: now,
                    loss_retransmitted: false,
                    msg: id,
                    mid: 0,
                    fsn: k as u32,
                    expires_at: expires.unwrap_or(Instant::ZERO),
                    max_rtx: p.max_retransmissions.unwrap_or(0),
                    expires: expires.is_some(),
                    limited: p.max_retransmissions.is_some(),
                    rtx: 0,
                });
            }
            if partial {
                self.tx.pr_live += n;
            }
        }
        self.tx.queued_bytes += len;
        self.tx.unsent_bytes += len;
        if let Some(prev) = self.last_submit {
            self.last_message_interval = Some(now.saturating_duration_since(prev));
        }
        self.last_submit = Some(now);
        self.stats.messages_submitted += 1;
        let bytes = len as u32;
        self.tracer.record(|| Record::Submitted {
            time: now,
            message: id,
            stream: p.stream,
            bytes,
            unordered: p.unordered,
            units: Units::new(first_unit, first_unit + n as u64),
        });
        Ok(id)
    }

    /// The interleaving scheduler (I-DATA): cut the next fragment and append
    /// it to the queue with the next TSN. Streams with queued messages take
    /// turns (round robin): a turn ends with the end of a message or after
    /// [`SCHED_QUANTUM`] fragments of a long one, so small messages finish
    /// in one turn while a large message yields every few packets. Within a
    /// stream, messages go whole and in submission order. Returns false
    /// when nothing waits.
    fn pull_fragment(&mut self, now: Instant) -> bool {
        let tx = &mut self.tx;
        let Some(stream) = tx.sched.next_stream(tx.sched_rr) else {
            return false;
        };
        let frag = tx.frag.max(1);
        let Some(q) = tx.sched.get_mut(stream) else {
            return false;
        };
        let Some(m) = q.front_mut() else {
            return false;
        };
        let s = usize::from(stream);
        let mid = match m.mid {
            Some(mid) => mid,
            None => {
                let counter = if m.unordered {
                    &mut tx.mid_unordered[s]
                } else {
                    &mut tx.mid_ordered[s]
                };
                let mid = *counter;
                *counter = counter.wrapping_add(1);
                m.mid = Some(mid);
                mid
            }
        };
        let start = m.offset;
        let len = m.payload.len();
        let end = (start + frag).min(len);
        let unit = tx.cum_unit + tx.chunks.len() as u64;
        // A message in one fragment gives its bytes as they are (slicing a
        // fresh `Bytes` makes it allocate a shared header); the message
        // leaves the queue below.
        let payload = if start == 0 && end == len {
            std::mem::take(&mut m.payload)
        } else {
            m.payload.slice(start..end)
        };
        let chunk = TxChunk {
            tsn: tx.initial_tsn.add(unit as u32),
            unit,
            stream,
            ssn: Ssn(0),
            ppid: m.ppid,
            unordered: m.unordered,
            beginning: start == 0,
            ending: end == len,
            payload,
            state: ChunkState::Unsent,
            transmissions: 0,
            last_sent: now,
            missing_reports: 0,
            fast_retransmitted: false,
            packet: 0,
            acked_once: false,
            first_sent: now,
            loss_retransmitted: false,
            msg: m.msg,
            mid,
            fsn: m.fsn,
            expires_at: m.expires.unwrap_or(Instant::ZERO),
            max_rtx: m.max_rtx.unwrap_or(0),
            expires: m.expires.is_some(),
            limited: m.max_rtx.is_some(),
            rtx: 0,
        };
        m.offset = end;
        m.fsn = m.fsn.wrapping_add(1);
        if chunk.ending {
            q.pop_front();
            if q.is_empty() {
                tx.sched.remove(stream);
            }
        }
        tx.sched_frags = tx.sched_frags.saturating_sub(1);
        tx.pr_live += usize::from(chunk.is_pr());
        // The stream keeps its turn until the message is complete or it
        // has cut SCHED_QUANTUM fragments in this turn.
        tx.sched_turn += 1;
        if chunk.ending || tx.sched_turn >= SCHED_QUANTUM {
            tx.sched_rr = stream.wrapping_add(1);
            tx.sched_turn = 0;
        } else {
            tx.sched_rr = stream;
        }
        tx.chunks.push_back(chunk);
        true
    }

    /// Partial reliability (RFC 3758 §3.5, RFC 7496): give up on the whole
    /// message that chunk `i` belongs to. Every fragment leaves the flight
    /// and the outstanding bytes; fragments not yet cut (I-DATA) are cut
    /// now and abandoned unsent, so TSNs and trace units stay in step; the
    /// FORWARD TSN goes out with the next packet if the cumulative ack point
    /// can move.
    pub(crate) fn abandon_message(&mut self, now: Instant, i: usize) {
        if self.tx.chunks[i].state == ChunkState::Abandoned {
            // Already given up (with I-DATA a message's unsent fragments
            // need not be contiguous: another message's fragments may sit
            // between them). Count it once.
            self.skip_abandoned_unsent();
            return;
        }
        let msg = self.tx.chunks[i].msg;
        // I-DATA: cut the rest of the message out of the scheduler.
        if self.tx.idata && !self.tx.chunks[i].ending {
            let stream = self.tx.chunks[i].stream;
            let rest = self
                .tx
                .sched
                .get(stream)
                .and_then(|q| q.front())
                .is_some_and(|m| m.msg == msg);
            if rest {
                // Pull fragment by fragment from that stream only.
                loop {
                    let rr = self.tx.sched_rr;
                    self.tx.sched_rr = stream;
                    let more = self
                        .tx
                        .sched
                        .get(stream)
                        .and_then(|q| q.front())
                        .is_some_and(|m| m.msg == msg);
                    if !more || !self.pull_fragment(now) {
                        self.tx.sched_rr = rr;
                        break;
                    }
                    self.tx.sched_rr = rr;
                }
            }
        }
        let mut units: Vec<u64> = Vec::new();
        for j in 0..self.tx.chunks.len() {
            if self.tx.chunks[j].msg != msg {
                continue;
            }
            let len = self.tx.chunks[j].len();
            match self.tx.chunks[j].state {
                ChunkState::Abandoned => continue,
                ChunkState::Unsent => {
                    self.tx.unsent_bytes -= len as usize;
                }
                ChunkState::InFlight => {
                    self.tx.leave_flight(j);
                    self.tx.outstanding_bytes = self.tx.outstanding_bytes.saturating_sub(len);
                }
                ChunkState::Marked(_) => {
                    self.tx.marked -= 1;
                    self.tx.outstanding_bytes = self.tx.outstanding_bytes.saturating_sub(len);
                }
                ChunkState::GapAcked => {}
            }
            let c = &mut self.tx.chunks[j];
            c.state = ChunkState::Abandoned;
            units.push(c.unit);
            if matches!(self.tx.rtt_probe, Some((u, _)) if u == c.unit) {
                self.tx.rtt_probe = None;
            }
        }
        self.skip_abandoned_unsent();
        self.stats.abandoned_messages += 1;
        if self.tracer.enabled() {
            units.sort_unstable();
            let mut k = 0;
            while k < units.len() {
                let start = units[k];
                let mut end = start + 1;
                k += 1;
                while k < units.len() && units[k] == end {
                    end += 1;
                    k += 1;
                }
                self.tracer.record(|| Record::Abandoned {
                    time: now,
                    units: Units::new(start, end),
                });
            }
        }
        if self.tx.abandoned_prefix() > 0 {
            self.tx.fwd_pending = true;
        }
    }

    /// Abandoned chunks that were never sent and come next join the sent
    /// prefix. Abandoned unsent chunks further on (with I-DATA, fragments
    /// of other messages may precede them) are skipped when the new-data
    /// loop reaches them.
    fn skip_abandoned_unsent(&mut self) {
        while self.tx.next_unsent < self.tx.chunks.len()
            && self.tx.chunks[self.tx.next_unsent].state == ChunkState::Abandoned
        {
            self.tx.next_unsent += 1;
        }
    }

    /// Partial reliability sweep: abandon messages with a chunk waiting for
    /// retransmission whose lifetime passed or whose retransmission limit is
    /// reached, and a next new chunk whose lifetime passed (RFC 3758 §3.5
    /// A1-A3: checked before every (re)transmission; called at T3 expiry,
    /// after fast retransmit marking and before each packet is built).
    pub(crate) fn pr_sweep(&mut self, now: Instant) {
        if self.tx.pr_live == 0 {
            return;
        }
        let mut i = 0;
        while i < self.tx.next_unsent {
            let c = &self.tx.chunks[i];
            if matches!(c.state, ChunkState::Marked(_)) && c.pr_expired(now, true) {
                self.abandon_message(now, i);
            }
            i += 1;
        }
        while self.tx.next_unsent < self.tx.chunks.len()
            && self.tx.chunks[self.tx.next_unsent].pr_expired(now, false)
        {
            let n = self.tx.next_unsent;
            self.abandon_message(now, n);
        }
    }

    /// The FORWARD TSN (RFC 3758 §3.2) or I-FORWARD-TSN (RFC 8260 §2.3.1)
    /// announcing the Advanced.Peer.Ack.Point, if it is beyond the
    /// cumulative TSN ack: the new cumulative TSN and, per stream, the last
    /// skipped SSN of ordered messages (FORWARD TSN) or the last skipped MID
    /// per stream and ordering (I-FORWARD-TSN).
    pub(crate) fn build_forward_tsn(&self) -> Option<Chunk> {
        let k = self.tx.abandoned_prefix();
        if k == 0 {
            return None;
        }
        let new_cum_tsn = self.tx.cum_tsn().add(k as u32);
        let skipped = self.tx.chunks.range(..k);
        if self.tx.idata {
            // Ordered: the last skipped MID per stream (the receiver skips
            // everything up to it). Unordered: every skipped message, since
            // unordered MIDs say nothing about each other.
            let mut last: BTreeMap<u16, u32> = BTreeMap::new();
            let mut unordered: Vec<(u16, u32)> = Vec::new();
            for c in skipped {
                if c.unordered {
                    unordered.push((c.stream, c.mid));
                    continue;
                }
                let e = last.entry(c.stream).or_insert(c.mid);
                if c.mid.wrapping_sub(*e) < 1 << 31 {
                    *e = c.mid;
                }
            }
            unordered.sort_unstable();
            unordered.dedup();
            let streams = last
                .into_iter()
                .map(|(stream, mid)| IForwardTsnStream {
                    stream,
                    unordered: false,
                    mid,
                })
                .chain(
                    unordered
                        .into_iter()
                        .map(|(stream, mid)| IForwardTsnStream {
                            stream,
                            unordered: true,
                            mid,
                        }),
                )
                .collect();
            return Some(Chunk::IForwardTsn(IForwardTsnChunk {
                new_cum_tsn,
                streams,
            }));
        }
        let mut last: BTreeMap<u16, Ssn> = BTreeMap::new();
        for c in skipped.filter(|c| !c.unordered) {
            // SSNs grow with TSNs within a stream: the last one is the highest.
            last.insert(c.stream, c.ssn);
        }
        let streams = last
            .into_iter()
            .map(|(stream, ssn)| ForwardTsnStream { stream, ssn })
            .collect();
        Some(Chunk::ForwardTsn(ForwardTsnChunk {
            new_cum_tsn,
            streams,
        }))
    }

    /// SACK processing (§6.2.1 D), loss detection (§7.2.4), window and timer
    /// updates.
    pub(crate) fn on_sack(&mut self, now: Instant, sack: &SackChunk) {
        if !matches!(
            self.state,
            State::Established
                | State::ShutdownPending
                | State::ShutdownSent
                | State::ShutdownReceived
                | State::ShutdownAckSent
        ) {
            return;
        }
        self.stats.sacks_received += 1;
        let d = sack.cum_tsn_ack.distance(self.tx.cum_tsn());
        if d < 0 {
            // §6.2.1 D i: older than the cumulative ack point: out of date.
            self.discard(now, "sack-out-of-date");
            return;
        }
        let d = d as usize;
        if d > self.tx.next_unsent {
            // Acknowledges TSNs never sent: ignore (protocol violation).
            self.discard(now, "sack-beyond-sent");
            return;
        }
        self.stats.duplicates_reported += sack.duplicate_tsns.len() as u64;
        if self.tracer.enabled() && !sack.duplicate_tsns.is_empty() {
            // RFC 9260 §3.3.4: TSNs received more than once since the last
            // SACK. Units relative to the cum ack point before this SACK.
            let cum = self.tx.cum_tsn();
            let base = self.tx.cum_unit as i64 - 1;
            for t in &sack.duplicate_tsns {
                let unit = base + i64::from(t.distance(cum));
                if unit >= 0 {
                    self.tracer.record(|| Record::DuplicateReported {
                        time: now,
                        units: Units::one(unit as u64),
                    });
                }
            }
        }
        let flight_before = self.tx.flight;
        let was_in_recovery = self.tx.fast_recovery.is_some();
        let mut bytes_acked: u32 = 0;
        let mut rtt_sample = None;
        // Earliest first transmission among newly acknowledged chunks never
        // retransmitted for loss (RttSampling::PerSack).
        let mut earliest_clean: Option<Instant> = None;

        // Cumulative ack: pop chunks.
        for _ in 0..d {
            let Some(c) = self.tx.chunks.pop_front() else {
                break;
            };
            self.tx.next_unsent -= 1;
            self.tx.queued_bytes -= c.payload.len();
            self.tx.pr_live -= usize::from(c.is_pr());
            match c.state {
                ChunkState::InFlight => {
                    self.tx.flight = self.tx.flight.saturating_sub(c.len());
                    self.tx.in_flight_chunks -= 1;
                    self.tx.packet_done(c.packet);
                }
                ChunkState::Marked(_) => self.tx.marked -= 1,
                _ => {}
            }
            if c.state == ChunkState::Abandoned {
                // Skipped by a FORWARD TSN: neither acknowledged nor outstanding.
                self.tx.cum_unit += 1;
                continue;
            }
            if c.state != ChunkState::GapAcked {
                self.tx.outstanding_bytes = self.tx.outstanding_bytes.saturating_sub(c.len());
                bytes_acked += c.len();
                if !c.acked_once {
                    self.tracer.record(|| Record::Acked {
                        time: now,
                        units: Units::one(c.unit),
                    });
                }
            }
            if c.state != ChunkState::GapAcked && !c.loss_retransmitted {
                earliest_clean =
                    Some(earliest_clean.map_or(c.first_sent, |e: Instant| e.min(c.first_sent)));
            }
            if let Some((u, at)) = self.tx.rtt_probe {
                if u == c.unit {
                    self.tx.rtt_probe = None;
                    if c.transmissions == 1 || self.tx.rtt_mode == RttSampling::FirstAck {
                        rtt_sample = Some(now.saturating_duration_since(at));
                    }
                }
            }
            self.tx.cum_unit += 1;
        }
        let cum_advanced = d > 0;
        if let Some(exit) = self.tx.fast_recovery {
            // §7.2.4: fast recovery ends when the cum ack reaches the exit point.
            if self.tx.cum_unit > exit {
                self.tx.fast_recovery = None;
            }
        }

        // Gap ack blocks: offsets from the (new) cum ack; chunks[0] is cum+1.
        let mut htna: Option<usize> = None;
        let mut highest_reported: Option<usize> = None;
        let mut blocks: Vec<(usize, usize)> = Vec::with_capacity(sack.gap_blocks.len());
        for g in &sack.gap_blocks {
            if g.start == 0 || g.start > g.end {
                continue;
            }
            let lo = usize::from(g.start) - 1;
            let hi = (usize::from(g.end) - 1).min(self.tx.next_unsent.saturating_sub(1));
            if lo >= self.tx.next_unsent {
                continue;
            }
            blocks.push((lo, hi));
            highest_reported = Some(highest_reported.map_or(hi, |h: usize| h.max(hi)));
            for i in lo..=hi {
                let st = self.tx.chunks[i].state;
                if matches!(st, ChunkState::GapAcked | ChunkState::Abandoned) {
                    continue;
                }
                match st {
                    ChunkState::InFlight => self.tx.leave_flight(i),
                    ChunkState::Marked(_) => self.tx.marked -= 1,
                    _ => {}
                }
                let c = &mut self.tx.chunks[i];
                c.state = ChunkState::GapAcked;
                let first_ack = !c.acked_once;
                c.acked_once = true;
                let (unit, len, tx) = (c.unit, c.len(), c.transmissions);
                if !c.loss_retransmitted {
                    earliest_clean =
                        Some(earliest_clean.map_or(c.first_sent, |e: Instant| e.min(c.first_sent)));
                }
                self.tx.outstanding_bytes = self.tx.outstanding_bytes.saturating_sub(len);
                bytes_acked += len;
                htna = Some(htna.map_or(i, |h: usize| h.max(i)));
                if first_ack {
                    self.tracer.record(|| Record::Acked {
                        time: now,
                        units: Units::one(unit),
                    });
                }
                if let Some((u, at)) = self.tx.rtt_probe {
                    if u == unit {
                        self.tx.rtt_probe = None;
                        if tx == 1 || self.tx.rtt_mode == RttSampling::FirstAck {
                            rtt_sample = Some(now.saturating_duration_since(at));
                        }
                    }
                }
            }
        }

        if let Some(top) = highest_reported {
            self.renege(&mut blocks, top);
        }
        if self.tracks_thin() {
            // 002 App. F: update the packet list before any decision of this SACK.
            let cum = self.tx.cum_unit;
            let mut units: Vec<(u64, u64)> = blocks
                .iter()
                .map(|&(lo, hi)| (cum + lo as u64, cum + hi as u64))
                .collect();
            units.sort_unstable();
            let cfg = self.config.mechanisms.thin;
            self.thin.on_sack(&cfg, cum, &units);
            self.note_thin(now);
        }

        if bytes_acked > 0 {
            // §8.3/§8.1: an acknowledgement of outstanding data clears the
            // error counters.
            self.error_count = 0;
            self.path_error_count = 0;
        }
        if self.tx.rtt_mode == RttSampling::PerSack {
            rtt_sample = earliest_clean.map(|t| now.saturating_duration_since(t));
        }
        if let Some(r) = rtt_sample {
            self.apply_rtt_sample(now, r, true);
        }

        // §6.2.1: rwnd = a_rwnd - bytes still outstanding.
        self.tx.peer_rwnd = sack.a_rwnd.saturating_sub(self.tx.outstanding_bytes);
        // §6.1 A: "If the sender continues to receive SACKs from the peer
        // while doing zero window probing, the unacknowledged window probes
        // SHOULD NOT increment the error counter": a peer whose window is
        // too small for the next chunk is alive and probed, not failing, so
        // its SACKs clear the counters (a reader that stalls for minutes
        // keeps its association).
        let next_len = self
            .tx
            .chunks
            .iter()
            .find(|c| !matches!(c.state, ChunkState::GapAcked | ChunkState::Abandoned))
            .map_or(0, |c| c.len());
        if next_len > 0 && sack.a_rwnd < next_len {
            self.error_count = 0;
            self.path_error_count = 0;
        }

        // Congestion window on acknowledgement (§7.2.1, §7.2.2).
        if bytes_acked > 0 {
            let ack = AckInfo {
                bytes_acked,
                flight_before,
                cum_advanced,
                in_fast_recovery: was_in_recovery,
                all_acked: self.tx.nothing_outstanding(),
            };
            let view = self.view(now);
            let before = self.cc;
            self.config
                .mechanisms
                .cwnd_on_ack(&view, &mut self.cc, &ack);
            if before != self.cc {
                self.record_congestion(now);
            }
        }

        // Miss indications (§7.2.4, HTNA): only TSNs below the highest newly
        // acknowledged TSN; in fast recovery with a cum advance, all TSNs
        // reported missing.
        let limit = if was_in_recovery && cum_advanced {
            highest_reported
        } else {
            htna
        };
        if let Some(limit) = limit {
            let view = self.view(now);
            let threshold = self
                .config
                .mechanisms
                .fast_retransmit_threshold(&view, self.config.fast_retransmit_threshold);
            let early = self.early_retransmit_now();
            let mut lost = Vec::new();
            for i in 0..limit {
                let c = &mut self.tx.chunks[i];
                if c.state == ChunkState::InFlight && !c.fast_retransmitted {
                    c.missing_reports += 1;
                    if c.missing_reports >= threshold {
                        lost.push((i, TxReason::FastRetransmit));
                    } else if early {
                        lost.push((i, TxReason::EarlyRetransmit));
                    }
                }
            }
            if !lost.is_empty() {
                self.fast_retransmit(now, &lost);
                self.pr_sweep(now);
            }
        }

        // RFC 3758 §3.5 C1-C3: while abandoned chunks lie right after the
        // cumulative ack point, (re)send the FORWARD TSN. A SACK that merely
        // crossed our last FORWARD TSN on the way does not repeat it: it is
        // repeated when the ack point moved since, or when a round trip
        // passed without the peer acting on it (T3 covers the rest).
        let skipped = self.tx.abandoned_prefix();
        let forward_owed = skipped > 0;
        if forward_owed {
            let point = self.tx.cum_tsn().add(skipped as u32);
            let rtt = self.rto.srtt.unwrap_or(self.rto.rto);
            let repeat = match self.tx.fwd_last {
                Some((sent, at)) => sent != point || now >= at + rtt,
                None => true,
            };
            if repeat {
                self.tx.fwd_pending = true;
            }
        }

        // T3-rtx rules (§6.3.2 R2, R3).
        if self.tx.nothing_outstanding() && !forward_owed {
            self.timers.stop(Timer::T3Rtx);
        } else if self.tx.nothing_outstanding() {
            // Only a FORWARD TSN is unanswered: T3 retransmits it.
            if !self.timers.is_running(Timer::T3Rtx) {
                self.timers.set(Timer::T3Rtx, now + self.rto.rto);
            }
        } else if cum_advanced {
            // The earliest-sent chunk still in flight (002 §4.2.4: first on
            // the transmitted list, which is in transmission order).
            let oldest = self
                .tx
                .chunks
                .iter()
                .take(self.tx.next_unsent)
                .filter(|c| c.state == ChunkState::InFlight)
                .map(|c| c.last_sent)
                .min();
            let view = self.view(now);
            let at = self
                .config
                .mechanisms
                .t3_restart_on_partial_ack(&view, self.rto.rto, oldest);
            self.timers.set(Timer::T3Rtx, at);
        } else if !self.timers.is_running(Timer::T3Rtx) && self.tx.flight > 0 {
            self.timers.set(Timer::T3Rtx, now + self.rto.rto);
        }

        self.arm_efr(now);
        if self.tx.blocked && self.tx.queued_bytes < self.config.send_buffer {
            self.tx.blocked = false;
            self.app.push_back(AppEvent::Writable);
        }
        self.check_shutdown_progress(now);
    }

    /// §6.2.1: the receiver may drop data it gap-acked ("renege"). A
    /// gap-acked chunk below the highest TSN this SACK reports that no block
    /// covers any more is outstanding again (in flight, so T3 or fast
    /// retransmit recovers it). Chunks above the highest reported TSN are
    /// left alone: a reordered older SACK simply knows less.
    fn renege(&mut self, blocks: &mut [(usize, usize)], top: usize) {
        blocks.sort_unstable();
        let mut b = 0;
        for i in 0..top.min(self.tx.next_unsent) {
            while b < blocks.len() && blocks[b].1 < i {
                b += 1;
            }
            let covered = b < blocks.len() && blocks[b].0 <= i;
            if covered || self.tx.chunks[i].state != ChunkState::GapAcked {
                continue;
            }
            let c = &mut self.tx.chunks[i];
            c.state = ChunkState::InFlight;
            c.missing_reports = 0;
            let (len, id) = (c.len(), c.packet);
            self.tx.flight += len;
            self.tx.outstanding_bytes += len;
            self.tx.in_flight_chunks += 1;
            self.tx.packet_add(id, 1);
        }
    }

    /// §7.2.4: mark the reported chunks (and whatever the mechanism adds),
    /// enter fast recovery once per episode.
    fn fast_retransmit(&mut self, now: Instant, lost: &[(usize, TxReason)]) {
        self.stats.fast_retransmits += 1;
        let view = self.view(now);
        let mech = self.config.mechanisms.clone();
        let mut li = 0;
        for i in 0..self.tx.next_unsent {
            let reported = match lost.get(li) {
                Some(&(j, reason)) if j == i => {
                    li += 1;
                    Some(reason)
                }
                _ => None,
            };
            let c = &self.tx.chunks[i];
            if c.state != ChunkState::InFlight {
                continue;
            }
            let cv = ChunkView {
                unit: c.unit,
                gap_acked: false,
                reported_lost: reported.is_some(),
                transmissions: c.transmissions,
                last_sent: c.last_sent,
            };
            if let Some(reason) = mech.queue_on_fast_retransmit(&view, &cv) {
                // A reported chunk keeps the reason its detection gave it
                // (fast or early retransmit).
                self.tx.mark(i, reported.unwrap_or(reason));
            }
        }
        if self.tx.fast_recovery.is_none() {
            // §7.2.4 step 2: adjust ssthresh and cwnd once per recovery.
            mech.cwnd_on_loss(&view, &mut self.cc, LossKind::FastRetransmit);
            self.stats.fast_recoveries += 1;
            let highest = self.tx.cum_unit + self.tx.next_unsent as u64;
            self.tx.fast_recovery = Some(highest.saturating_sub(1));
            self.record_congestion(now);
            // §7.2.4 step 3: on entering fast recovery, the first packet of
            // retransmissions goes out regardless of cwnd.
            self.tx.rtx_packet_free = true;
        }
    }

    /// T3-rtx expiry (§6.3.3 E1-E3).
    pub(crate) fn on_t3_expiry(&mut self, now: Instant) {
        if self.tx.nothing_outstanding() {
            if self.tx.abandoned_prefix() > 0 {
                self.forward_tsn_timeout(now);
            }
            return;
        }
        if self.postpone_t3(now) {
            return;
        }
        self.stats.t3_expiries += 1;
        let view = self.view(now);
        if self.tracks_thin() {
            // App. F: packets with no chance of a SACK yet are not counted lost.
            self.thin.on_timeout(now);
        }
        self.config
            .mechanisms
            .cwnd_on_loss(&view, &mut self.cc, LossKind::Timeout);
        self.record_congestion(now);
        let rto = self
            .config
            .mechanisms
            .t3_backoff(&view, self.rto.rto, self.config.rto_max);
        self.rto.set(rto);
        self.record_rto(now);
        self.tx.fast_recovery = None;
        // E3: every outstanding chunk is marked; the lowest is the one that
        // timed out, the rest ride along (seed 002 §4.2.1 't'/'b' tagging).
        let mut first = true;
        for i in 0..self.tx.next_unsent {
            if matches!(
                self.tx.chunks[i].state,
                ChunkState::InFlight | ChunkState::Marked(_)
            ) {
                let reason = if first {
                    TxReason::TimeoutRetransmit
                } else {
                    TxReason::BundledOnRetransmit
                };
                first = false;
                self.tx.mark(i, reason);
            }
        }
        if self.tx.rtt_mode != RttSampling::FirstAck {
            self.tx.rtt_probe = None;
        }
        self.tx.rtx_packet_free = true;
        self.error_count += 1;
        self.path_error_count += 1;
        if self.error_count > self.config.association_max_retrans {
            self.give_up(
                now,
                "too many retransmissions: Association.Max.Retrans exceeded",
            );
            return;
        }
        self.pmtu_on_timeout(now);
        // RFC 3758 §3.5 A3: abandon what may not be retransmitted; the
        // FORWARD TSN goes out with the retransmissions.
        self.pr_sweep(now);
        if self.tx.abandoned_prefix() > 0 {
            self.tx.fwd_pending = true;
        }
        self.timers.set(Timer::T3Rtx, now + self.rto.rto);
    }

    /// T3 expired with nothing outstanding but an unanswered FORWARD TSN
    /// (RFC 3758 §3.5: the FORWARD TSN is retransmitted on T3 like data):
    /// back off, count the error, send it again.
    fn forward_tsn_timeout(&mut self, now: Instant) {
        self.stats.t3_expiries += 1;
        self.error_count += 1;
        self.path_error_count += 1;
        if self.error_count > self.config.association_max_retrans {
            self.give_up(
                now,
                "too many retransmissions: Association.Max.Retrans exceeded",
            );
            return;
        }
        let rto = self.rto.rto.saturating_mul(2).min(self.config.rto_max);
        self.rto.set(rto);
        self.record_rto(now);
        self.tx.fwd_pending = true;
        self.timers.set(Timer::T3Rtx, now + self.rto.rto);
    }

    /// One RTT sample: `data` = measured on DATA (else a HEARTBEAT-ACK or
    /// handshake round trip, which `control_rtt_seed_only` ignores once a
    /// DATA sample exists).
    pub(crate) fn apply_rtt_sample(
        &mut self,
        now: Instant,
        r: thinstream_base::Duration,
        data: bool,
    ) {
        let m = &self.config.mechanisms;
        if !data && m.control_rtt_seed_only && self.stats.data_rtt_samples > 0 {
            return;
        }
        if self.tracks_thin() {
            self.thin.on_rtt_sample(r);
        }
        let view = self.view(now);
        let floor = m.rto_floor(&view, self.config.rto_min);
        let g = self.config.clock_granularity.max(m.rttvar_min);
        let rttvar_min = m.rttvar_min;
        self.rto
            .on_sample(r, g, floor, self.config.rto_max, rttvar_min);
        self.thin.set_srtt(self.rto.srtt);
        self.stats.rtt_samples += 1;
        if data {
            self.stats.data_rtt_samples += 1;
        }
        self.tracer.record(|| Record::RttSample {
            time: now,
            rtt: r,
            data,
        });
        self.record_rto(now);
    }

    /// `t3_wait_for_newer_sack` ([`crate::mechanism::rtt`]): postpone a T3
    /// expiry once per oldest outstanding chunk while the SACK of a packet
    /// sent after it may still come. Returns whether it did.
    fn postpone_t3(&mut self, now: Instant) -> bool {
        if !self.config.mechanisms.t3_wait_for_newer_sack {
            return false;
        }
        let Some(oldest) = self
            .tx
            .chunks
            .iter()
            .take(self.tx.next_unsent)
            .find(|c| matches!(c.state, ChunkState::InFlight | ChunkState::Marked(_)))
            .map(|c| (c.unit, c.last_sent))
        else {
            return false;
        };
        if self.tx.t3_postponed_for == Some(oldest.0) {
            return false;
        }
        let (Some(newest), Some(srtt)) = (self.tx.last_data_at, self.rto.srtt) else {
            return false;
        };
        if newest <= oldest.1 {
            return false;
        }
        let wait = srtt + self.rto.rttvar * 4;
        let until = newest + wait;
        if until <= now {
            return false;
        }
        self.tx.t3_postponed_for = Some(oldest.0);
        self.stats.t3_postponed += 1;
        self.timers.set(Timer::T3Rtx, until);
        true
    }

    /// Put DATA into the packet being built: retransmissions first, then new
    /// data as cwnd (§6.1 B), the peer's rwnd (§6.1 A), Nagle and Max.Burst
    /// allow.
    /// A chunk cut for a larger packet size than the one in use now (path
    /// MTU discovery fell back after it was cut) can never fit a packet:
    /// it goes alone, in an oversized packet, rather than never.
    fn oversized_alone(&self, out: &[Chunk], len: usize) -> bool {
        out.is_empty() && len > self.config.effective_pmtu() - crate::wire::COMMON_HEADER_LEN
    }

    pub(crate) fn fill_data(&mut self, now: Instant, out: &mut Vec<Chunk>, room: &mut usize) {
        if self.burst >= self.config.max_burst.max(1) {
            return;
        }
        let pid = self.tx.next_packet;
        let mut added = 0u32;
        // Chunks whose latest copy travels in this packet (redundant copies
        // keep their original packet id).
        let mut live = 0u32;
        let mut retransmitted = false;
        let mut new_data = false;

        if self.tx.marked > 0 && (self.tx.rtx_packet_free || self.cc.allows(self.tx.flight)) {
            for i in 0..self.tx.next_unsent {
                if self.tx.marked == 0 {
                    break;
                }
                let ChunkState::Marked(reason) = self.tx.chunks[i].state else {
                    continue;
                };
                if self.tx.chunks[i].pr_expired(now, true) {
                    // RFC 3758 §3.5 A2: checked again right before resending.
                    self.abandon_message(now, i);
                    continue;
                }
                let len = self.tx.chunk_len(self.tx.chunks[i].payload.len());
                if len > *room && !self.oversized_alone(out, len) {
                    break;
                }
                *room = room.saturating_sub(len);
                self.tx.marked -= 1;
                self.tx.in_flight_chunks += 1;
                self.tx.flight += self.tx.chunks[i].len();
                let idata = self.tx.idata;
                let c = &mut self.tx.chunks[i];
                c.state = ChunkState::InFlight;
                c.transmissions += 1;
                c.rtx += 1;
                c.last_sent = now;
                c.missing_reports = 0;
                c.packet = pid;
                c.loss_retransmitted = true;
                // §7.2.4: fast-retransmitted at most once; early (ER) and
                // early fast (EFR) retransmissions are fast retransmissions.
                let fast = matches!(
                    reason,
                    TxReason::FastRetransmit
                        | TxReason::EarlyRetransmit
                        | TxReason::EarlyFastRetransmit
                );
                if fast {
                    c.fast_retransmitted = true;
                }
                // §7.2.4 step 4: retransmitting the first outstanding chunk
                // restarts T3 (chunks[0] is the lowest outstanding TSN).
                let restart_t3 = fast && i == 0;
                out.push(c.to_wire(idata));
                self.stats.count_data(reason, c.payload.len());
                let (unit, bytes) = (c.unit, c.len());
                self.push_sent(unit, bytes, reason);
                if restart_t3 {
                    self.timers.set(Timer::T3Rtx, now + self.rto.rto);
                }
                added += 1;
                live += 1;
                retransmitted = true;
            }
            if retransmitted {
                self.tx.rtx_packet_free = false;
            }
        }

        let has_new = self.tx.has_unsent();
        if has_new && self.config.idle_cwnd_decay {
            self.idle_decay(now);
        }
        if self.tx.marked == 0 && has_new && self.cc.allows(self.tx.flight) {
            let nagle_hold = !self.config.no_delay
                && !self.tx.nothing_outstanding()
                && self.tx.unsent_bytes < self.tx.frag;
            if !nagle_hold {
                let (start, sent_start, first_new, before) = (
                    out.len(),
                    self.tx.last_sent_data.len(),
                    self.tx.next_unsent,
                    added,
                );
                self.add_new_data(now, out, room, pid, &mut added, &mut live);
                new_data = added > before;
                if !retransmitted && added > before {
                    let at = (start, sent_start, first_new);
                    self.bundle_outstanding(now, out, room, &mut added, at);
                }
            }
        }

        if added > 0 {
            if live > 0 {
                self.tx.packet_set(pid, live);
            }
            if self.tracks_thin() {
                // 002 App. F: one record per DATA packet, named by its highest TSN.
                let base = self.tx.initial_tsn.add(self.tx.cum_unit as u32);
                let cum = self.tx.cum_unit as i64;
                let highest = out
                    .iter()
                    .filter_map(|c| match c {
                        Chunk::Data(d) => Some(cum + i64::from(d.tsn.distance(base))),
                        Chunk::IData(d) => Some(cum + i64::from(d.tsn.distance(base))),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(cum)
                    .max(0) as u64;
                let cfg = self.config.mechanisms.thin;
                self.thin.on_packet_sent(&cfg, highest, now, new_data);
                self.note_thin(now);
            }
            self.tx.next_packet += 1;
            self.burst += 1;
            self.tx.last_data_at = Some(now);
            // §6.3.2 R1: start T3 if it is not running.
            if !self.timers.is_running(Timer::T3Rtx) {
                self.timers.set(Timer::T3Rtx, now + self.rto.rto);
            }
            // Data on the path: it is not idle, postpone the heartbeat.
            if self.config.heartbeat {
                self.timers.set(
                    Timer::Heartbeat,
                    now + self.rto.rto + self.config.hb_interval,
                );
            }
            self.arm_efr(now);
        }
    }

    fn add_new_data(
        &mut self,
        now: Instant,
        out: &mut Vec<Chunk>,
        room: &mut usize,
        pid: u64,
        added: &mut u32,
        live: &mut u32,
    ) {
        loop {
            if self.tx.next_unsent == self.tx.chunks.len() && !self.pull_fragment(now) {
                break;
            }
            let i = self.tx.next_unsent;
            if self.tx.chunks[i].state == ChunkState::Abandoned {
                // Given up before it was ever sent: never send it.
                self.tx.next_unsent += 1;
                continue;
            }
            if self.tx.chunks[i].pr_expired(now, false) {
                // RFC 3758 §3.5 A2: a message whose lifetime passed before
                // it was sent is abandoned, never sent.
                self.abandon_message(now, i);
                continue;
            }
            let plen = self.tx.chunks[i].len();
            let len = self.tx.chunk_len(plen as usize);
            if len > *room && !self.oversized_alone(out, len) {
                break;
            }
            // §6.1 A: no new data beyond the peer's rwnd, except one chunk
            // when nothing is outstanding (zero window probe).
            let probe = plen > self.tx.peer_rwnd;
            if probe && !(self.tx.nothing_outstanding() && *added == 0) {
                break;
            }
            *room = room.saturating_sub(len);
            self.tx.next_unsent += 1;
            self.tx.flight += plen;
            self.tx.in_flight_chunks += 1;
            self.tx.unsent_bytes -= plen as usize;
            self.tx.outstanding_bytes += plen;
            self.tx.peer_rwnd = self.tx.peer_rwnd.saturating_sub(plen);
            let c = &mut self.tx.chunks[i];
            c.state = ChunkState::InFlight;
            c.transmissions = 1;
            c.last_sent = now;
            c.first_sent = now;
            c.packet = pid;
            let idata = self.tx.idata;
            out.push(c.to_wire(idata));
            let unit = c.unit;
            self.stats.count_data(TxReason::New, plen as usize);
            self.push_sent(unit, plen, TxReason::New);
            if self.tx.rtt_probe.is_none() {
                self.tx.rtt_probe = Some((unit, now));
            }
            *added += 1;
            *live += 1;
            if probe {
                break;
            }
        }
    }

    /// Mechanism hook: redundant copies of outstanding chunks in front of
    /// the new data just added (002 App. F
    /// `thin_bundling_outstanding`): the packet already holds its new data;
    /// every in-flight (not gap-acked, not marked) chunk older than it is
    /// spliced in front, oldest first, while it fits in the PMTU and the
    /// optional byte limit (stop at the first that does not), so TSNs
    /// increase within the packet. `at` = (index in `out`, index in the
    /// trace list, first new chunk) where the new data starts.
    fn bundle_outstanding(
        &mut self,
        now: Instant,
        out: &mut Vec<Chunk>,
        room: &mut usize,
        added: &mut u32,
        at: (usize, usize, usize),
    ) {
        let (start, sent_start, first_new) = at;
        let view = self.view(now);
        let NewDataBundling::OutstandingFirst { max_bytes } =
            self.config.mechanisms.bundle_on_new_data(&view)
        else {
            return;
        };
        let mut payload: u64 = self
            .tx
            .chunks
            .range(first_new..self.tx.next_unsent)
            .map(|c| u64::from(c.len()))
            .sum();
        let mut copies = Vec::new();
        let mut traced = Vec::new();
        for i in 0..first_new {
            if self.tx.chunks[i].state != ChunkState::InFlight {
                continue;
            }
            let plen = self.tx.chunks[i].len();
            let len = self.tx.chunk_len(plen as usize);
            let over_limit = max_bytes.is_some_and(|m| payload + u64::from(plen) > u64::from(m));
            if len > *room || over_limit {
                break;
            }
            *room -= len;
            payload += u64::from(plen);
            let c = &mut self.tx.chunks[i];
            // Karn: a chunk sent twice never gives an RTT sample (other
            // sampling modes measure from the first copy, see mechanism::rtt).
            c.transmissions += 1;
            copies.push(c.to_wire(self.tx.idata));
            let unit = c.unit;
            if self.tx.rtt_mode == RttSampling::Karn
                && matches!(self.tx.rtt_probe, Some((u, _)) if u == unit)
            {
                self.tx.rtt_probe = None;
            }
            self.stats.redundant_bytes += u64::from(plen);
            self.stats
                .count_data(TxReason::RedundantBundle, plen as usize);
            if self.tracer.enabled() {
                traced.push(SentData {
                    units: Units::one(unit),
                    bytes: plen,
                    reason: TxReason::RedundantBundle,
                });
            }
            *added += 1;
        }
        out.splice(start..start, copies);
        if !traced.is_empty() {
            self.tx
                .last_sent_data
                .splice(sent_start..sent_start, traced);
        }
    }

    /// Early Retransmit (003 §2.2, §2.3): the state of the outstanding data
    /// after this SACK, judged by the mechanism.
    fn early_retransmit_now(&self) -> bool {
        use crate::mechanism::EarlyRetransmit;
        if self.config.mechanisms.early_retransmit == EarlyRetransmit::Off {
            return false;
        }
        // Packet id -> whether every chunk it carried (last transmission) is gap-acked.
        let mut packets: BTreeMap<u64, bool> = BTreeMap::new();
        let (mut bytes, mut bytes_acked) = (0u32, 0u32);
        for c in self
            .tx
            .chunks
            .range(..self.tx.next_unsent)
            .filter(|c| c.state != ChunkState::Abandoned)
        {
            let acked = c.state == ChunkState::GapAcked;
            bytes = bytes.saturating_add(c.len());
            if acked {
                bytes_acked = bytes_acked.saturating_add(c.len());
            }
            let e = packets.entry(c.packet).or_insert(true);
            *e &= acked;
        }
        let can_send_new = self
            .tx
            .chunks
            .get(self.tx.next_unsent)
            .is_some_and(|c| c.len() <= self.tx.peer_rwnd);
        let o = OutstandingView {
            packets: packets.len() as u32,
            packets_acked: packets.values().filter(|a| **a).count() as u32,
            bytes,
            bytes_acked,
            smss: self.config.max_fragment() as u32,
            can_send_new,
            dup_threshold: self.config.fast_retransmit_threshold,
        };
        self.config.mechanisms.early_retransmit(&o)
    }

    /// Arm (or stop) the early fast retransmit timer (000 §2): it expires
    /// SRTT + RTTVAR after the earliest-sent chunk that EFR may still
    /// resend, while the flight is below cwnd.
    pub(crate) fn arm_efr(&mut self, now: Instant) {
        if !self.config.mechanisms.early_fast_retransmit {
            return;
        }
        let view = self.view(now);
        let oldest = self
            .tx
            .chunks
            .range(..self.tx.next_unsent)
            .filter(|c| c.state == ChunkState::InFlight && !c.fast_retransmitted)
            .map(|c| c.last_sent)
            .min();
        match (self.config.mechanisms.efr_delay(&view), oldest) {
            (Some(d), Some(sent)) => self.timers.set(Timer::EarlyFastRtx, (sent + d).max(now)),
            _ => self.timers.stop(Timer::EarlyFastRtx),
        }
    }

    /// Early fast retransmit timer expiry (000 §2): if the flight is still
    /// below cwnd, resend every chunk in flight sent at least SRTT + RTTVAR
    /// ago ("all packets that could have been acknowledged in the
    /// meantime"), each at most once until a T3 expiry (like §7.2.4's
    /// once-only rule), and reduce cwnd by one MTU (not below one MTU) with
    /// no slow start and no ssthresh change.
    pub(crate) fn on_efr_expiry(&mut self, now: Instant) {
        let view = self.view(now);
        let Some(d) = self.config.mechanisms.efr_delay(&view) else {
            return;
        };
        let mut any = false;
        for i in 0..self.tx.next_unsent {
            let c = &self.tx.chunks[i];
            if c.state == ChunkState::InFlight && !c.fast_retransmitted && c.last_sent + d <= now {
                self.tx.mark(i, TxReason::EarlyFastRetransmit);
                any = true;
            }
        }
        if any {
            self.stats.fast_retransmits += 1;
            self.cc.cwnd = self.cc.cwnd.saturating_sub(self.cc.mtu).max(self.cc.mtu);
            self.record_congestion(now);
        }
        self.arm_efr(now);
    }

    /// §7.2.1: "When the endpoint does not transmit data on a given
    /// transport address, the cwnd of the transport address SHOULD be
    /// adjusted to max(cwnd/2, 4*MTU) per RTO." Applied when sending resumes
    /// after at least one RTO without DATA; never raises cwnd.
    fn idle_decay(&mut self, now: Instant) {
        let Some(last) = self.tx.last_data_at else {
            return;
        };
        let rto = self.rto.rto.as_nanos().max(1);
        let idle = now.saturating_duration_since(last).as_nanos() / rto;
        if idle == 0 || self.tx.flight > 0 {
            return;
        }
        let floor = 4 * self.cc.mtu;
        let before = self.cc.cwnd;
        for _ in 0..idle.min(32) {
            if self.cc.cwnd <= floor {
                break;
            }
            self.cc.cwnd = (self.cc.cwnd / 2).max(floor);
        }
        // Count the idle period once.
        self.tx.last_data_at = Some(now);
        if self.cc.cwnd != before {
            self.record_congestion(now);
        }
    }

    fn push_sent(&mut self, unit: u64, bytes: u32, reason: TxReason) {
        if self.tracer.enabled() {
            self.tx.last_sent_data.push(SentData {
                units: Units::one(unit),
                bytes,
                reason,
            });
        }
    }
}
