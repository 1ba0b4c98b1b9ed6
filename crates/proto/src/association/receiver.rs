//! Receiving side: TSN tracking with gap ranges, duplicate detection,
//! reassembly (§6.9), ordered and unordered delivery (§6.5, §6.6), the
//! receive window (§6.2), SACK generation with gap blocks and duplicate
//! TSNs (§6.2, §6.7), delayed SACK, and FORWARD TSN (RFC 3758 §3.6).
//!
//! # I-DATA (RFC 8260)
//! TSNs only drive acknowledgement; a message is named by (stream,
//! ordered/unordered, MID) and its fragments by FSN, so fragments of
//! different messages may arrive interleaved. Reassembly is keyed by that
//! triple: a message is complete when FSN 0 (B) through the FSN carrying E
//! are all here. Unordered messages are delivered at once; ordered ones in
//! MID order per stream (32-bit serial numbers). A fragment of an ordered
//! message whose MID was already delivered or skipped is acknowledged and
//! dropped. The `Delivered` trace record is written once per run of
//! consecutive TSNs of the message (one record for DATA, possibly several
//! for an interleaved I-DATA message), so units never overlap other
//! messages'.
//!
//! # FORWARD TSN and I-FORWARD-TSN
//! RFC 3758 §3.6: TSNs up to the new cumulative TSN count as received.
//! FORWARD TSN (DATA): fragments up to it are dropped (they can only belong
//! to abandoned messages, whose fragments have consecutive TSNs); for each
//! listed stream, complete messages held for order with an SSN up to the
//! listed one are delivered (they arrived whole; usrsctp does the same),
//! the next expected SSN moves past the listed one, and the messages that
//! waited behind the abandoned one are delivered. I-FORWARD-TSN (RFC 8260
//! §2.3.1): nothing is dropped by TSN (a live interleaved message may own
//! TSNs below the new cumulative TSN); an ordered entry drops partial
//! messages of that stream up to its MID, delivers complete held ones up to
//! it and moves the next expected MID past it; an unordered entry drops the
//! partial message with exactly that MID (our sender lists every skipped
//! unordered message).

use std::collections::BTreeMap;

use bytes::Bytes;
use smallvec::{smallvec, SmallVec};
use thinstream_base::drive::AppEvent;
use thinstream_base::trace::{Record, Units};
use thinstream_base::Instant;

use super::timers::Timer;
use super::{Association, State};
use crate::wire::{
    Chunk, DataChunk, ErrorCause, ErrorChunk, ForwardTsnChunk, GapBlock, IDataChunk,
    IForwardTsnChunk, SackChunk, ShutdownChunk, Ssn, Tsn, SACK_CHUNK_HEADER_LEN,
};

/// Duplicate TSNs remembered for the next SACK (more are counted, not listed).
const MAX_DUPS: usize = 32;

#[derive(Clone, Debug)]
pub(crate) struct RxChunk {
    stream: u16,
    ssn: Ssn,
    ppid: u32,
    unordered: bool,
    beginning: bool,
    ending: bool,
    payload: Bytes,
}

#[derive(Clone, Debug)]
struct Message {
    stream: u16,
    unordered: bool,
    ppid: u32,
    payload: Bytes,
    /// Runs of consecutive units and their payload bytes (one for every
    /// message but an I-DATA message whose fragments took TSNs out of
    /// order, so kept inline).
    runs: SmallVec<[(Units, u32); 1]>,
}

#[derive(Clone, Debug)]
pub(crate) struct InStream {
    pub(crate) next_ssn: Ssn,
    /// Complete ordered messages waiting for earlier SSNs.
    pending: BTreeMap<Ssn, Message>,
    /// I-DATA: the next ordered MID to deliver, and complete ordered
    /// messages waiting for earlier MIDs.
    pub(crate) next_mid: u32,
    pending_mid: BTreeMap<u32, Message>,
}

/// An I-DATA message under reassembly.
#[derive(Clone, Debug, Default)]
struct IPartial {
    /// FSN -> (unit, payload).
    frags: BTreeMap<u32, (u64, Bytes)>,
    /// FSN of the fragment with E.
    last: Option<u32>,
    ppid: u32,
}

/// `a` is after `b` in 32-bit serial arithmetic (MIDs, RFC 8260 §2.1).
fn mid_after(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < 1 << 31
}

/// Receiver state. Units count TSNs since the peer's initial TSN.
/// Aligned to a cache line: see the layout note on [`Association`].
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct Receiver {
    pub(crate) initial_tsn: Tsn,
    /// First unit not yet received in sequence (cum TSN = unit - 1).
    pub(crate) cum_next: u64,
    /// Received units above the cum ack: start -> end (exclusive), disjoint.
    above: BTreeMap<u64, u64>,
    dups: Vec<Tsn>,
    reasm: BTreeMap<u64, RxChunk>,
    /// I-DATA reassembly by (stream, unordered, MID).
    ireasm: BTreeMap<(u16, bool, u32), IPartial>,
    pub(crate) streams: Vec<InStream>,
    /// Bytes held: in reassembly, waiting for order, or not yet read by the app.
    pub(crate) held: usize,
    /// Of `held`: delivered messages the application has not read yet.
    unread: usize,
    capacity: u32,
    /// Packets with DATA since the last SACK.
    packets_unacked: u32,
    /// A SACK is owed (some DATA not yet acknowledged).
    owed: bool,
    /// A SACK is due now.
    due: bool,
    had_gap: bool,
    last_advertised: u32,
}

impl Receiver {
    /// The heap memory the next DATA packet touches (see
    /// `Transport::hot_memory`).
    pub(crate) fn hot_memory(&self, visit: &mut dyn FnMut(*const u8, usize)) {
        thinstream_base::drive::visit_vec(&self.streams, visit);
    }

    pub(crate) fn new(initial_tsn: Tsn, capacity: u32) -> Self {
        Receiver {
            initial_tsn,
            cum_next: 0,
            above: BTreeMap::new(),
            dups: Vec::new(),
            reasm: BTreeMap::new(),
            ireasm: BTreeMap::new(),
            streams: Vec::new(),
            held: 0,
            unread: 0,
            capacity,
            packets_unacked: 0,
            owed: false,
            due: false,
            had_gap: false,
            last_advertised: capacity,
        }
    }

    pub(crate) fn set_streams(&mut self, n: u16) {
        let fresh = InStream {
            next_ssn: Ssn(0),
            pending: BTreeMap::new(),
            next_mid: 0,
            pending_mid: BTreeMap::new(),
        };
        self.streams = vec![fresh; usize::from(n)];
    }

    pub(crate) fn cum_tsn(&self) -> Tsn {
        self.initial_tsn.add(self.cum_next as u32).prev()
    }

    /// Unit of `tsn`; negative = before the peer's initial TSN window.
    fn unit_of(&self, tsn: Tsn) -> i64 {
        self.cum_next as i64 + i64::from(tsn.distance(self.cum_tsn().next()))
    }

    fn has(&self, unit: u64) -> bool {
        unit < self.cum_next
            || self
                .above
                .range(..=unit)
                .next_back()
                .is_some_and(|(_, &end)| end > unit)
    }

    fn highest(&self) -> Option<u64> {
        self.above
            .iter()
            .next_back()
            .map(|(_, &e)| e - 1)
            .or_else(|| self.cum_next.checked_sub(1))
    }

    /// Record `unit` as received (not already present).
    fn insert(&mut self, unit: u64) {
        if unit == self.cum_next {
            self.cum_next += 1;
        } else {
            let prev = self.above.range(..unit).next_back().map(|(&s, &e)| (s, e));
            match prev {
                Some((s, e)) if e == unit => {
                    self.above.insert(s, unit + 1);
                }
                _ => {
                    self.above.insert(unit, unit + 1);
                }
            }
            // Merge with the following range.
            let (s, e) = match self.above.range(..=unit).next_back() {
                Some((&s, &e)) => (s, e),
                None => return,
            };
            if let Some(next_end) = self.above.get(&e).copied() {
                self.above.remove(&e);
                self.above.insert(s, next_end);
            }
        }
        self.absorb();
    }

    /// Move ranges adjacent to the cum ack into it.
    fn absorb(&mut self) {
        while let Some((&s, &e)) = self.above.iter().next() {
            if s > self.cum_next {
                break;
            }
            self.above.remove(&s);
            self.cum_next = self.cum_next.max(e);
        }
    }

    pub(crate) fn check(&self, app_bytes: usize) -> Result<(), String> {
        let reasm: usize = self.reasm.values().map(|c| c.payload.len()).sum::<usize>()
            + self
                .ireasm
                .values()
                .flat_map(|p| p.frags.values())
                .map(|(_, b)| b.len())
                .sum::<usize>();
        let pending: usize = self
            .streams
            .iter()
            .flat_map(|s| s.pending.values().chain(s.pending_mid.values()))
            .map(|m| m.payload.len())
            .sum();
        if reasm + pending + app_bytes != self.held {
            return Err(format!(
                "receiver holds {} but reassembly {reasm} + pending {pending} + app {app_bytes}",
                self.held
            ));
        }
        if app_bytes != self.unread {
            return Err(format!(
                "receiver counts {} unread bytes, the application queue holds {app_bytes}",
                self.unread
            ));
        }
        let mut prev_end = self.cum_next;
        for (&s, &e) in &self.above {
            if s <= prev_end || e <= s {
                return Err(format!(
                    "bad gap ranges {:?} (cum_next {})",
                    self.above, self.cum_next
                ));
            }
            prev_end = e;
        }
        if self.reasm.keys().next().is_some_and(|&u| !self.has(u)) {
            return Err("reassembly holds a unit not marked received".into());
        }
        Ok(())
    }

    pub(crate) fn a_rwnd(&self) -> u32 {
        self.capacity
            .saturating_sub(self.held.min(u32::MAX as usize) as u32)
    }

    pub(crate) fn ack_owed(&self) -> bool {
        self.owed || self.due
    }

    pub(crate) fn sack_due(&self) -> bool {
        self.due
    }

    pub(crate) fn delayed_sack_expired(&mut self) {
        if self.owed {
            self.due = true;
        }
    }

    /// Length of the SACK that would be built now, capped to `room`.
    pub(crate) fn sack_len_estimate(&self, room: usize) -> usize {
        (SACK_CHUNK_HEADER_LEN + 4 * (self.above.len() + self.dups.len())).min(room)
    }

    fn gap_blocks(&self, max: usize) -> Vec<GapBlock> {
        // Offsets count from the cum TSN (unit cum_next - 1): cum_next is 1.
        let base = self.cum_next;
        let mut v = Vec::with_capacity(self.above.len().min(max));
        for (&s, &e) in &self.above {
            if v.len() >= max {
                break;
            }
            let start = s - base + 1;
            let end = e - 1 - base + 1;
            if end > u64::from(u16::MAX) {
                break;
            }
            v.push(GapBlock {
                start: start as u16,
                end: end as u16,
            });
        }
        v
    }
}

impl Association {
    /// The TSN handling shared by DATA and I-DATA (§6.2): duplicate
    /// detection, stream and buffer checks, recording the TSN as received.
    /// The next TSN in sequence is accepted beyond the buffer (see below).
    /// `Err(())`: the association was aborted; `Ok(None)`:
    /// the chunk was handled (duplicate, dropped, invalid stream);
    /// `Ok(Some(unit))`: accepted, the caller keeps the payload (already
    /// counted in `held`).
    fn accept_tsn(
        &mut self,
        now: Instant,
        tsn: Tsn,
        stream: u16,
        payload_len: usize,
        immediate: bool,
    ) -> Result<Option<u64>, ()> {
        if !matches!(
            self.state,
            State::CookieEchoed
                | State::Established
                | State::ShutdownPending
                | State::ShutdownSent
                | State::ShutdownReceived
        ) {
            return Ok(None);
        }
        self.stats.data_chunks_received += 1;
        if payload_len == 0 {
            // §6.2: "If an endpoint receives a DATA chunk with no user data
            // (i.e., the Length field is set to 16), it MUST send an ABORT
            // with an error cause set to "No User Data"." (RFC 8260 §2.1:
            // the same for I-DATA.)
            self.queue_abort(vec![ErrorCause::no_user_data(tsn)], false);
            self.enter_closed(
                now,
                Some("protocol violation: DATA without user data".into()),
            );
            return Err(());
        }
        self.rx.owed = true;
        let unit = self.rx.unit_of(tsn);
        let bytes = payload_len as u32;
        if unit < 0 || self.rx.has(unit as u64) {
            // §6.2: duplicates are reported in the next SACK, which goes out
            // at once (§6.7).
            self.stats.duplicate_tsns_received += 1;
            if self.rx.dups.len() < MAX_DUPS {
                self.rx.dups.push(tsn);
            }
            // §6.2 (§6.7): SACK at once on a duplicate (receiver profiles
            // that do so only while a gap is open wait for the normal rule).
            if self.config.delayed_sack.immediate_on_duplicate || !self.rx.above.is_empty() {
                self.rx.due = true;
            }
            if unit >= 0 {
                let u = unit as u64;
                self.tracer.record(|| Record::Arrived {
                    time: now,
                    units: Units::one(u),
                    bytes,
                    duplicate: true,
                });
            }
            return Ok(None);
        }
        let unit = unit as u64;
        if unit - self.rx.cum_next > u64::from(u16::MAX) {
            // Beyond what a SACK gap block can describe: far outside any
            // window the peer could legitimately use (§6.2 drop rule).
            self.stats.data_dropped_no_buffer += 1;
            self.discard(now, "data-beyond-window");
            return Ok(None);
        }
        if stream >= self.in_streams {
            // §6.5: acknowledge the TSN, drop the data, report the stream.
            self.control.push_back(Chunk::Error(ErrorChunk {
                causes: vec![ErrorCause::invalid_stream_identifier(stream)],
            }));
            self.rx.insert(unit);
            self.rx.due = true;
            return Ok(None);
        }
        // Without a partial delivery API, a full buffer can hold nothing
        // but pieces that wait for a lower TSN: fragments of messages too
        // large for the free space, or messages behind an earlier one of
        // their ordered stream. Refusing that lower TSN would wedge the
        // association for good (found by `thinstream torture`, e.g. a
        // 5 KB receive buffer under interleaved 9 KB messages). So the next
        // TSN in sequence, which is what unblocks delivery, is accepted
        // beyond the buffer by at most one maximum-size message, unless the
        // application is the one not keeping up (delivered messages wait
        // to be read): then the window stays shut.
        let next_in_sequence = unit == self.rx.cum_next
            && self.rx.unread == 0
            && self.rx.held + payload_len
                <= self.rx.capacity as usize + self.config.max_message_size;
        if self.rx.held + payload_len > self.rx.capacity as usize
            && self.rx.highest().is_some_and(|h| unit > h)
            && !next_in_sequence
        {
            // §6.2: with no buffer space, drop DATA beyond the highest TSN
            // received; the sender will retransmit it.
            self.stats.data_dropped_no_buffer += 1;
            self.rx.due = true;
            return Ok(None);
        }
        self.rx.insert(unit);
        self.tracer.record(|| Record::Arrived {
            time: now,
            units: Units::one(unit),
            bytes,
            duplicate: false,
        });
        self.rx.held += payload_len;
        if immediate && self.config.delayed_sack.honour_immediate {
            // RFC 7053: the sender asked for an immediate SACK.
            self.rx.due = true;
        }
        Ok(Some(unit))
    }

    /// One DATA chunk (§6.2). Returns false if processing of the packet
    /// must stop (the association was aborted).
    pub(crate) fn on_data(&mut self, now: Instant, d: DataChunk) -> bool {
        let unit = match self.accept_tsn(now, d.tsn, d.stream, d.payload.len(), d.immediate) {
            Err(()) => return false,
            Ok(None) => return true,
            Ok(Some(u)) => u,
        };
        self.rx.reasm.insert(
            unit,
            RxChunk {
                stream: d.stream,
                ssn: d.ssn,
                ppid: d.ppid,
                unordered: d.unordered,
                beginning: d.beginning,
                ending: d.ending,
                payload: d.payload,
            },
        );
        self.try_assemble(now, unit);
        true
    }

    /// One I-DATA chunk (RFC 8260 §2.1, module docs). Returns false if
    /// processing of the packet must stop.
    pub(crate) fn on_idata(&mut self, now: Instant, d: IDataChunk) -> bool {
        let key = (d.stream, d.unordered, d.mid);
        let unit = match self.accept_tsn(now, d.tsn, d.stream, d.payload.len(), d.immediate) {
            Err(()) => return false,
            Ok(None) => return true,
            Ok(Some(u)) => u,
        };
        let s = usize::from(d.stream);
        if !d.unordered && !mid_after(d.mid, self.rx.streams[s].next_mid.wrapping_sub(1)) {
            // A message already delivered or skipped (I-FORWARD-TSN): keep
            // the acknowledgement, drop the bytes.
            self.rx.held = self.rx.held.saturating_sub(d.payload.len());
            return true;
        }
        let fsn = d.fsn();
        let msg = if d.beginning && d.ending && self.rx.ireasm.is_empty() {
            // A whole message in one fragment with nothing under
            // reassembly (every message of a thin stream): what the
            // reassembly map below would give, without touching its node.
            let len = d.payload.len() as u32;
            Message {
                stream: d.stream,
                unordered: d.unordered,
                ppid: d.ppid(),
                payload: d.payload,
                runs: smallvec![(Units::one(unit), len)],
            }
        } else {
            let ppid = d.ppid();
            let part = self.rx.ireasm.entry(key).or_default();
            if let Some((_, old)) = part.frags.insert(fsn, (unit, d.payload)) {
                // The same fragment under another TSN (a broken peer): keep one.
                self.rx.held = self.rx.held.saturating_sub(old.len());
            }
            if d.beginning {
                part.ppid = ppid;
            }
            if d.ending {
                part.last = Some(fsn);
            }
            let complete = part
                .last
                .is_some_and(|last| u64::from(last) + 1 == part.frags.len() as u64)
                && part.frags.contains_key(&0);
            if !complete {
                return true;
            }
            let Some(part) = self.rx.ireasm.remove(&key) else {
                return true;
            };
            let mut payload = Vec::new();
            let mut units: Vec<(u64, u32)> = Vec::with_capacity(part.frags.len());
            for (_, (u, b)) in part.frags {
                payload.extend_from_slice(&b);
                units.push((u, b.len() as u32));
            }
            units.sort_unstable();
            let mut runs: SmallVec<[(Units, u32); 1]> = SmallVec::new();
            for (u, b) in units {
                match runs.last_mut() {
                    Some((r, bytes)) if r.end == u => {
                        r.end += 1;
                        *bytes += b;
                    }
                    _ => runs.push((Units::one(u), b)),
                }
            }
            Message {
                stream: d.stream,
                unordered: d.unordered,
                ppid: part.ppid,
                payload: Bytes::from(payload),
                runs,
            }
        };
        if d.unordered {
            self.deliver(now, msg);
            return true;
        }
        let st = &mut self.rx.streams[s];
        if d.mid == st.next_mid {
            st.next_mid = d.mid.wrapping_add(1);
            self.deliver(now, msg);
            self.drain_stream_mid(now, s);
        } else if st.pending_mid.contains_key(&d.mid) {
            // A second complete message with this MID under other TSNs (a
            // broken or hostile peer): keep the first, drop the bytes.
            // Found by the endpoint fuzz target.
            self.rx.held = self.rx.held.saturating_sub(msg.payload.len());
        } else {
            st.pending_mid.insert(d.mid, msg);
        }
        true
    }

    fn drain_stream_mid(&mut self, now: Instant, s: usize) {
        loop {
            let st = &mut self.rx.streams[s];
            let next = st.next_mid;
            let Some(m) = st.pending_mid.remove(&next) else {
                break;
            };
            st.next_mid = next.wrapping_add(1);
            self.deliver(now, m);
        }
    }

    /// After all chunks of a packet with DATA: decide when to SACK (§6.2, §6.7).
    pub(crate) fn after_data_packet(&mut self, now: Instant) {
        if !self.rx.owed && !self.rx.due {
            return;
        }
        self.rx.packets_unacked += 1;
        let gap = !self.rx.above.is_empty();
        let filled = self.rx.had_gap && !gap && self.config.delayed_sack.immediate_on_gap_closed;
        self.rx.had_gap = gap;
        let ds = self.config.delayed_sack;
        if !ds.enabled || self.rx.packets_unacked >= ds.every_packets.max(1) || gap || filled {
            self.rx.due = true;
        }
        if self.state == State::ShutdownSent {
            // §9.2: answer every packet with DATA with SACK and SHUTDOWN,
            // and restart T2-shutdown.
            // One SHUTDOWN waiting to go is enough: it is brought up to
            // date rather than joined by another (several packets arriving
            // before the next transmission once queued one each).
            self.rx.due = true;
            let cum = self.rx.cum_tsn();
            match self.control.iter_mut().find_map(|c| match c {
                Chunk::Shutdown(s) => Some(s),
                _ => None,
            }) {
                Some(s) => s.cum_tsn_ack = cum,
                None => self
                    .control
                    .push_back(Chunk::Shutdown(ShutdownChunk { cum_tsn_ack: cum })),
            }
            self.timers.set(Timer::T2Shutdown, now + self.rto.rto);
        }
        if self.rx.due {
            self.timers.stop(Timer::DelayedSack);
        } else if !self.timers.is_running(Timer::DelayedSack) {
            self.timers.set(Timer::DelayedSack, now + ds.timeout);
        }
    }

    /// Build the SACK for the packet being assembled (`room` bytes left).
    pub(crate) fn build_sack(&mut self, now: Instant, room: usize) -> SackChunk {
        let _ = now;
        let slots = room.saturating_sub(SACK_CHUNK_HEADER_LEN) / 4;
        let gaps = self.rx.gap_blocks(slots);
        let ndups = self.rx.dups.len().min(slots - gaps.len().min(slots));
        let dups: Vec<Tsn> = self.rx.dups.drain(..).take(ndups).collect();
        let a_rwnd = self.rx.a_rwnd();
        self.rx.last_advertised = a_rwnd;
        self.rx.packets_unacked = 0;
        self.rx.owed = false;
        self.rx.due = false;
        self.timers.stop(Timer::DelayedSack);
        self.stats.sacks_sent += 1;
        SackChunk {
            cum_tsn_ack: self.rx.cum_tsn(),
            a_rwnd,
            gap_blocks: gaps,
            duplicate_tsns: dups,
        }
    }

    /// The application took `bytes` of delivered data: the window opens.
    /// §6.2: send a window update when it has grown substantially.
    pub(crate) fn on_app_read(&mut self, bytes: usize) {
        self.rx.held = self.rx.held.saturating_sub(bytes);
        self.rx.unread = self.rx.unread.saturating_sub(bytes);
        let now_rwnd = self.rx.a_rwnd();
        let mtu = self.config.mtu_bytes();
        if self.rx.last_advertised < now_rwnd
            && now_rwnd - self.rx.last_advertised
                >= (self.rx.capacity / 4).max(mtu).min(self.rx.capacity)
            && matches!(
                self.state,
                State::Established
                    | State::ShutdownPending
                    | State::ShutdownSent
                    | State::ShutdownReceived
            )
        {
            self.rx.owed = true;
            self.rx.due = true;
        }
    }

    /// Reassemble the message containing `unit` if all its fragments are
    /// here (§6.9: fragments carry consecutive TSNs, B on the first, E on
    /// the last), then deliver or hold it for order.
    fn try_assemble(&mut self, now: Instant, unit: u64) {
        let Some(c) = self.rx.reasm.get(&unit) else {
            return;
        };
        let (stream, ssn, unordered, ppid) = (c.stream, c.ssn, c.unordered, c.ppid);
        let same = |x: &RxChunk| {
            x.stream == stream && x.unordered == unordered && (unordered || x.ssn == ssn)
        };
        let mut first = unit;
        loop {
            let Some(x) = self.rx.reasm.get(&first) else {
                return;
            };
            if !same(x) {
                return;
            }
            if x.beginning {
                break;
            }
            if first == 0 {
                return;
            }
            first -= 1;
        }
        let mut last = unit;
        loop {
            let Some(x) = self.rx.reasm.get(&last) else {
                return;
            };
            if !same(x) || (last != first && x.beginning) {
                return;
            }
            if x.ending {
                break;
            }
            last += 1;
        }
        let payload = if first == last {
            // One chunk (every message of a thin stream): its bytes as they are.
            self.rx
                .reasm
                .remove(&first)
                .map(|x| x.payload)
                .unwrap_or_default()
        } else {
            let mut joined = Vec::new();
            for u in first..=last {
                if let Some(x) = self.rx.reasm.remove(&u) {
                    joined.extend_from_slice(&x.payload);
                }
            }
            Bytes::from(joined)
        };
        let bytes = payload.len() as u32;
        let msg = Message {
            stream,
            unordered,
            ppid,
            payload,
            runs: smallvec![(Units::new(first, last + 1), bytes)],
        };
        if unordered {
            self.deliver(now, msg);
            return;
        }
        let s = usize::from(stream);
        let st = &mut self.rx.streams[s];
        if ssn == st.next_ssn {
            st.next_ssn = ssn.next();
            self.deliver(now, msg);
            self.drain_stream(now, s);
        } else if ssn > st.next_ssn && !st.pending.contains_key(&ssn) {
            st.pending.insert(ssn, msg);
        } else {
            // An SSN already delivered, or a second complete message with an
            // SSN already waiting (a broken peer's other TSNs): keep the
            // first, drop the bytes.
            self.rx.held = self.rx.held.saturating_sub(msg.payload.len());
        }
    }

    fn drain_stream(&mut self, now: Instant, s: usize) {
        loop {
            let st = &mut self.rx.streams[s];
            let next = st.next_ssn;
            let Some(m) = st.pending.remove(&next) else {
                break;
            };
            st.next_ssn = next.next();
            self.deliver(now, m);
        }
    }

    fn deliver(&mut self, now: Instant, m: Message) {
        self.stats.messages_delivered += 1;
        self.stats.bytes_delivered += m.payload.len() as u64;
        let (stream, unordered) = (m.stream, m.unordered);
        for &(units, bytes) in &m.runs {
            self.tracer.record(|| Record::Delivered {
                time: now,
                stream,
                bytes,
                unordered,
                units,
            });
        }
        self.rx.unread += m.payload.len();
        self.app.push_back(AppEvent::Received {
            stream,
            unordered,
            ppid: m.ppid,
            payload: m.payload,
        });
    }

    /// Shared start of FORWARD TSN and I-FORWARD-TSN (RFC 3758 §3.6,
    /// RFC 8260 §2.3.1): SACK at once, treat TSNs up to the new cumulative
    /// TSN as received. Returns the new cumulative unit, or `None` if the
    /// chunk is to be ignored (wrong state, or not ahead of our ack point).
    fn forward_cum(&mut self, new_cum_tsn: Tsn) -> Option<u64> {
        if !matches!(
            self.state,
            State::Established
                | State::ShutdownPending
                | State::ShutdownSent
                | State::ShutdownReceived
        ) {
            return None;
        }
        self.stats.forward_tsns_received += 1;
        self.rx.owed = true;
        self.rx.due = true;
        let new_unit = self.rx.unit_of(new_cum_tsn);
        if new_unit < self.rx.cum_next as i64 {
            return None;
        }
        let through = new_unit as u64;
        // Everything up to `through` counts as received.
        let keep: Vec<(u64, u64)> = self.rx.above.iter().map(|(&s, &e)| (s, e)).collect();
        self.rx.above.clear();
        self.rx.cum_next = through + 1;
        for (s, e) in keep {
            if e > self.rx.cum_next {
                self.rx.above.insert(s.max(self.rx.cum_next), e);
            }
        }
        self.rx.absorb();
        Some(through)
    }

    /// FORWARD TSN (RFC 3758 §3.6, module docs): TSNs up to the new
    /// cumulative TSN count as received, their fragments are dropped, the
    /// listed streams skip the abandoned SSNs and deliver what became
    /// deliverable; SACK at once.
    pub(crate) fn on_forward_tsn(&mut self, now: Instant, f: &ForwardTsnChunk) {
        let Some(through) = self.forward_cum(f.new_cum_tsn) else {
            return;
        };
        // Drop abandoned fragments.
        let stale: Vec<u64> = self.rx.reasm.range(..=through).map(|(&u, _)| u).collect();
        for u in stale {
            if let Some(x) = self.rx.reasm.remove(&u) {
                self.rx.held = self.rx.held.saturating_sub(x.payload.len());
            }
        }
        for fs in &f.streams {
            let s = usize::from(fs.stream);
            if s >= self.rx.streams.len() {
                continue;
            }
            if fs.ssn >= self.rx.streams[s].next_ssn {
                // Complete messages held for order up to the skipped SSN
                // arrived whole: deliver them in order, then skip.
                loop {
                    let st = &mut self.rx.streams[s];
                    let Some((&k, _)) = st.pending.iter().next() else {
                        break;
                    };
                    if k > fs.ssn {
                        break;
                    }
                    let Some(m) = st.pending.remove(&k) else {
                        break;
                    };
                    self.deliver(now, m);
                }
                self.rx.streams[s].next_ssn = fs.ssn.next();
            }
            // The messages that waited behind the abandoned one.
            self.drain_stream(now, s);
        }
        // Fragments right after the new cum ack may now complete a message.
        if let Some((&u, _)) = self.rx.reasm.iter().next() {
            self.try_assemble(now, u);
        }
        self.rx.had_gap = !self.rx.above.is_empty();
        self.timers.stop(Timer::DelayedSack);
    }

    /// I-FORWARD-TSN (RFC 8260 §2.3.1, module docs).
    pub(crate) fn on_iforward_tsn(&mut self, now: Instant, f: &IForwardTsnChunk) {
        if self.forward_cum(f.new_cum_tsn).is_none() {
            return;
        }
        for e in &f.streams {
            let s = usize::from(e.stream);
            if s >= self.rx.streams.len() {
                continue;
            }
            if e.unordered {
                if let Some(p) = self.rx.ireasm.remove(&(e.stream, true, e.mid)) {
                    let bytes: usize = p.frags.values().map(|(_, b)| b.len()).sum();
                    self.rx.held = self.rx.held.saturating_sub(bytes);
                }
                continue;
            }
            let next = self.rx.streams[s].next_mid;
            let end = e.mid.wrapping_add(1);
            if end == next || mid_after(next, end) {
                // Already past this MID: nothing to skip.
                continue;
            }
            // Drop partial ordered messages of this stream up to the MID.
            let stale: Vec<(u16, bool, u32)> = self
                .rx
                .ireasm
                .range((e.stream, false, 0)..=(e.stream, false, u32::MAX))
                .map(|(k, _)| *k)
                .filter(|k| !mid_after(k.2, e.mid))
                .collect();
            for k in stale {
                if let Some(p) = self.rx.ireasm.remove(&k) {
                    let bytes: usize = p.frags.values().map(|(_, b)| b.len()).sum();
                    self.rx.held = self.rx.held.saturating_sub(bytes);
                }
            }
            // Deliver complete held messages up to it in MID order (they
            // all lie at or after `next`), then skip.
            let mut held: Vec<u32> = self.rx.streams[s]
                .pending_mid
                .keys()
                .copied()
                .filter(|&k| !mid_after(k, e.mid))
                .collect();
            held.sort_by_key(|&k| k.wrapping_sub(next));
            for k in held {
                if let Some(msg) = self.rx.streams[s].pending_mid.remove(&k) {
                    self.deliver(now, msg);
                }
            }
            self.rx.streams[s].next_mid = end;
            self.drain_stream_mid(now, s);
        }
        self.rx.had_gap = !self.rx.above.is_empty();
        self.timers.stop(Timer::DelayedSack);
    }
}
