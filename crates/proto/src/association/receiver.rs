//! Receiving side: TSN tracking with gap ranges, duplicate detection,
//! reassembly (§6.9), ordered and unordered delivery (§6.5, §6.6), the
//! receive window (§6.2), SACK generation with gap blocks and duplicate
//! TSNs (§6.2, §6.7), delayed SACK, and FORWARD TSN (RFC 3758 §3.6).

use std::collections::BTreeMap;

use bytes::Bytes;
use thinstream_base::drive::AppEvent;
use thinstream_base::trace::{Record, Units};
use thinstream_base::Instant;

use super::timers::Timer;
use super::{Association, State};
use crate::wire::{
    Chunk, DataChunk, ErrorCause, ErrorChunk, ForwardTsnChunk, GapBlock, SackChunk, ShutdownChunk,
    Ssn, Tsn, SACK_CHUNK_HEADER_LEN,
};

/// Duplicate TSNs remembered for the next SACK (more are counted, not listed).
const MAX_DUPS: usize = 32;

#[derive(Clone, Debug)]
pub(crate) struct RxChunk {
    stream: u16,
    ssn: Ssn,
    unordered: bool,
    beginning: bool,
    ending: bool,
    payload: Bytes,
}

#[derive(Clone, Debug)]
struct Message {
    stream: u16,
    unordered: bool,
    payload: Vec<u8>,
    units: Units,
}

#[derive(Clone, Debug)]
pub(crate) struct InStream {
    pub(crate) next_ssn: Ssn,
    /// Complete ordered messages waiting for earlier SSNs.
    pending: BTreeMap<Ssn, Message>,
}

/// Receiver state. Units count TSNs since the peer's initial TSN.
#[derive(Debug)]
pub(crate) struct Receiver {
    pub(crate) initial_tsn: Tsn,
    /// First unit not yet received in sequence (cum TSN = unit - 1).
    pub(crate) cum_next: u64,
    /// Received units above the cum ack: start -> end (exclusive), disjoint.
    above: BTreeMap<u64, u64>,
    dups: Vec<Tsn>,
    reasm: BTreeMap<u64, RxChunk>,
    pub(crate) streams: Vec<InStream>,
    /// Bytes held: in reassembly, waiting for order, or not yet read by the app.
    pub(crate) held: usize,
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
    pub(crate) fn new(initial_tsn: Tsn, capacity: u32) -> Self {
        Receiver {
            initial_tsn,
            cum_next: 0,
            above: BTreeMap::new(),
            dups: Vec::new(),
            reasm: BTreeMap::new(),
            streams: Vec::new(),
            held: 0,
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

    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn check(&self, app_bytes: usize) -> Result<(), String> {
        let reasm: usize = self.reasm.values().map(|c| c.payload.len()).sum();
        let pending: usize = self
            .streams
            .iter()
            .flat_map(|s| s.pending.values())
            .map(|m| m.payload.len())
            .sum();
        if reasm + pending + app_bytes != self.held {
            return Err(format!(
                "receiver holds {} but reassembly {reasm} + pending {pending} + app {app_bytes}",
                self.held
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
    /// One DATA chunk (§6.2). Returns false if processing of the packet
    /// must stop (the association was aborted).
    pub(crate) fn on_data(&mut self, now: Instant, d: &DataChunk) -> bool {
        if !matches!(
            self.state,
            State::CookieEchoed
                | State::Established
                | State::ShutdownPending
                | State::ShutdownSent
                | State::ShutdownReceived
        ) {
            return true;
        }
        self.stats.data_chunks_received += 1;
        if d.payload.is_empty() {
            // §6.2: "If an endpoint receives a DATA chunk with no user data
            // (i.e., the Length field is set to 16), it MUST send an ABORT
            // with an error cause set to "No User Data"."
            self.queue_abort(vec![ErrorCause::no_user_data(d.tsn)], false);
            self.enter_closed(
                now,
                Some("protocol violation: DATA without user data".into()),
            );
            return false;
        }
        self.rx.owed = true;
        let unit = self.rx.unit_of(d.tsn);
        let bytes = d.payload.len() as u32;
        if unit < 0 || self.rx.has(unit as u64) {
            // §6.2: duplicates are reported in the next SACK, which goes out
            // at once (§6.7).
            self.stats.duplicate_tsns_received += 1;
            if self.rx.dups.len() < MAX_DUPS {
                self.rx.dups.push(d.tsn);
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
            return true;
        }
        let unit = unit as u64;
        if unit - self.rx.cum_next > u64::from(u16::MAX) {
            // Beyond what a SACK gap block can describe: far outside any
            // window the peer could legitimately use (§6.2 drop rule).
            self.stats.data_dropped_no_buffer += 1;
            self.discard(now, "data-beyond-window");
            return true;
        }
        if d.stream >= self.in_streams {
            // §6.5: acknowledge the TSN, drop the data, report the stream.
            self.control.push_back(Chunk::Error(ErrorChunk {
                causes: vec![ErrorCause::invalid_stream_identifier(d.stream)],
            }));
            self.rx.insert(unit);
            self.rx.due = true;
            return true;
        }
        // Without a partial delivery API, a message larger than the free
        // buffer could never complete once the buffer is full of its
        // fragments: the next in-sequence fragment of a message under
        // reassembly is accepted beyond the buffer (by at most one
        // maximum-size message).
        let continues_message = unit == self.rx.cum_next
            && unit > 0
            && self.rx.reasm.get(&(unit - 1)).is_some_and(|c| !c.ending)
            && self.rx.held + d.payload.len()
                <= self.rx.capacity as usize + self.config.max_message_size;
        if self.rx.held + d.payload.len() > self.rx.capacity as usize
            && self.rx.highest().is_some_and(|h| unit > h)
            && !continues_message
        {
            // §6.2: with no buffer space, drop DATA beyond the highest TSN
            // received; the sender will retransmit it.
            self.stats.data_dropped_no_buffer += 1;
            self.rx.due = true;
            return true;
        }
        self.rx.insert(unit);
        self.tracer.record(|| Record::Arrived {
            time: now,
            units: Units::one(unit),
            bytes,
            duplicate: false,
        });
        self.rx.held += d.payload.len();
        self.rx.reasm.insert(
            unit,
            RxChunk {
                stream: d.stream,
                ssn: d.ssn,
                unordered: d.unordered,
                beginning: d.beginning,
                ending: d.ending,
                payload: d.payload.clone(),
            },
        );
        if d.immediate && self.config.delayed_sack.honour_immediate {
            // RFC 7053: the sender asked for an immediate SACK.
            self.rx.due = true;
        }
        self.try_assemble(now, unit);
        true
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
            self.rx.due = true;
            let cum = self.rx.cum_tsn();
            self.control
                .push_back(Chunk::Shutdown(ShutdownChunk { cum_tsn_ack: cum }));
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
        let (stream, ssn, unordered) = (c.stream, c.ssn, c.unordered);
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
        let mut payload = Vec::new();
        for u in first..=last {
            if let Some(x) = self.rx.reasm.remove(&u) {
                payload.extend_from_slice(&x.payload);
            }
        }
        let msg = Message {
            stream,
            unordered,
            payload,
            units: Units::new(first, last + 1),
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
        } else if ssn > st.next_ssn {
            st.pending.insert(ssn, msg);
        } else {
            // An SSN already delivered: cannot happen without a duplicate
            // TSN, which was filtered; drop it defensively.
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
        let (stream, unordered, units, bytes) =
            (m.stream, m.unordered, m.units, m.payload.len() as u32);
        self.tracer.record(|| Record::Delivered {
            time: now,
            stream,
            bytes,
            unordered,
            units,
        });
        self.app.push_back(AppEvent::Received {
            stream,
            unordered,
            payload: m.payload,
        });
    }

    /// FORWARD TSN (RFC 3758 §3.6): treat TSNs up to the new cumulative TSN
    /// as received, drop their fragments, advance the streams' SSNs and
    /// deliver what became deliverable; SACK at once.
    pub(crate) fn on_forward_tsn(&mut self, now: Instant, f: &ForwardTsnChunk) {
        if !matches!(
            self.state,
            State::Established
                | State::ShutdownPending
                | State::ShutdownSent
                | State::ShutdownReceived
        ) {
            return;
        }
        self.stats.forward_tsns_received += 1;
        self.rx.owed = true;
        self.rx.due = true;
        let new_unit = self.rx.unit_of(f.new_cum_tsn);
        if new_unit < self.rx.cum_next as i64 {
            return;
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
            let st = &mut self.rx.streams[s];
            if fs.ssn >= st.next_ssn {
                // Messages up to this SSN were abandoned; drop any held ones.
                let dropped: Vec<Ssn> = st.pending.range(..=fs.ssn).map(|(&k, _)| k).collect();
                for k in dropped {
                    if let Some(m) = st.pending.remove(&k) {
                        self.rx.held = self.rx.held.saturating_sub(m.payload.len());
                    }
                }
                let st = &mut self.rx.streams[s];
                st.next_ssn = fs.ssn.next();
            }
            self.drain_stream(now, s);
        }
        // Fragments right after the new cum ack may now complete a message.
        if let Some((&u, _)) = self.rx.reasm.iter().next() {
            self.try_assemble(now, u);
        }
        self.rx.had_gap = !self.rx.above.is_empty();
        self.timers.stop(Timer::DelayedSack);
    }
}
