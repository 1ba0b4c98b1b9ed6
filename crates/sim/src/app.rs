//! Applications at simulated endpoints: the [`App`] trait the scenario layer
//! implements, and three built-ins: a [`MessageSource`] fed by a schedule, a
//! [`Sink`] that records deliveries, and an [`Echo`] server.
//!
//! Payloads are generated deterministically: the first four bytes carry the
//! message id (big-endian), the rest is a pattern derived from the id and the
//! offset, so a sink can tell which message arrived and whether it arrived
//! intact, without a side channel. Messages shorter than the header (the
//! documents' traces have 1- and 4-byte messages, 002 Table 2.1) are sent as
//! a truncated header and counted as unidentifiable by the sink. Metrics do
//! not depend on this: they join trace records on units (`base::trace`).

use crate::EndpointId;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use thinstream_base::drive::{AppEvent, Outgoing, SendError, Transport};
use thinstream_base::{Duration, Instant};

/// Bytes of the message-id header at the start of every generated payload.
pub const HEADER_BYTES: usize = 4;

/// Writes the payload of message `id` with `len` bytes into `buf` (cleared first).
pub fn fill_payload(id: u32, len: usize, buf: &mut Vec<u8>) {
    buf.clear();
    let header = id.to_be_bytes();
    buf.extend_from_slice(&header[..len.min(HEADER_BYTES)]);
    // `pattern_byte` repeats every 256 offsets: whole runs of the table
    // below, XORed with the message's byte (vectorised, not byte by byte).
    let mix = id_byte(id);
    let mut k = HEADER_BYTES;
    buf.reserve(len.saturating_sub(k));
    while k < len {
        let lo = k % 256;
        let n = (256 - lo).min(len - k);
        buf.extend(OFFSET_BYTES[lo..lo + n].iter().map(|b| b ^ mix));
        k += n;
    }
}

/// `(offset as u8) * 31` for every offset modulo 256.
const OFFSET_BYTES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut k = 0;
    while k < 256 {
        t[k] = (k as u8).wrapping_mul(31);
        k += 1;
    }
    t
};

fn id_byte(id: u32) -> u8 {
    (id.wrapping_mul(0x9E37_79B1) >> 24) as u8
}

#[cfg(test)]
fn pattern_byte(id: u32, offset: usize) -> u8 {
    // Any fixed function works; mixing the id in makes a message body differ
    // from its neighbours', so a swapped body is caught.
    id_byte(id) ^ (offset as u8).wrapping_mul(31)
}

/// What a sink can tell from one received payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadCheck {
    /// The payload is exactly what [`fill_payload`] generates for this id.
    Intact { id: u32 },
    /// The header names `id` but the body differs from the generated one.
    Corrupt { id: u32 },
    /// Shorter than [`HEADER_BYTES`]: cannot be identified.
    TooShort,
}

pub fn check_payload(payload: &[u8]) -> PayloadCheck {
    let Some(header) = payload.get(..HEADER_BYTES) else {
        return PayloadCheck::TooShort;
    };
    let id = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    let mix = id_byte(id);
    let mut intact = true;
    let mut k = HEADER_BYTES;
    while intact && k < payload.len() {
        let lo = k % 256;
        let n = (256 - lo).min(payload.len() - k);
        intact = payload[k..k + n]
            .iter()
            .zip(&OFFSET_BYTES[lo..lo + n])
            .all(|(b, t)| *b == t ^ mix);
        k += n;
    }
    if intact {
        PayloadCheck::Intact { id }
    } else {
        PayloadCheck::Corrupt { id }
    }
}

/// What an app can do while handling a callback: read the time, send through
/// its transport, and ask for a wake-up.
pub struct AppCtx<'a> {
    now: Instant,
    endpoint: EndpointId,
    transport: &'a mut dyn Transport,
    timer: &'a mut Option<Instant>,
}

impl<'a> AppCtx<'a> {
    pub(crate) fn new(
        now: Instant,
        endpoint: EndpointId,
        transport: &'a mut dyn Transport,
        timer: &'a mut Option<Instant>,
    ) -> Self {
        AppCtx {
            now,
            endpoint,
            transport,
            timer,
        }
    }
    pub fn now(&self) -> Instant {
        self.now
    }
    pub fn endpoint(&self) -> EndpointId {
        self.endpoint
    }
    /// Hands a message to the transport (see [`Transport::send`]).
    pub fn send(&mut self, stream: u16, unordered: bool, payload: &[u8]) -> Result<u64, SendError> {
        self.transport.send(
            self.now,
            Outgoing {
                stream,
                unordered,
                payload,
            },
        )
    }
    /// Begins a graceful close of the connection.
    pub fn close(&mut self) {
        self.transport.close(self.now);
    }
    pub fn is_established(&self) -> bool {
        self.transport.is_established()
    }
    /// Asks for [`App::on_timer`] at `at` (replaces any earlier request; a
    /// time in the past means "now").
    pub fn set_timer(&mut self, at: Instant) {
        *self.timer = Some(at);
    }
    pub fn cancel_timer(&mut self) {
        *self.timer = None;
    }
    pub fn timer(&self) -> Option<Instant> {
        *self.timer
    }
}

/// An application at one endpoint. Callbacks run inside the engine's drive
/// loop; anything sent is drained before time advances.
pub trait App {
    /// Called once at the start of the run.
    fn on_start(&mut self, ctx: &mut AppCtx<'_>);
    /// Called for every event the transport reports.
    fn on_event(&mut self, ctx: &mut AppCtx<'_>, event: AppEvent);
    /// Called when the time set with [`AppCtx::set_timer`] is reached.
    fn on_timer(&mut self, ctx: &mut AppCtx<'_>);
    /// What the app observed, consumed at the end of the run.
    fn finish(self: Box<Self>) -> AppReport;
    /// Hands out and forgets the per-message history recorded so far (the
    /// messages a source sent, the deliveries a sink saw), for a driver
    /// that consumes it while the run goes so that memory does not grow
    /// with the run's length. What was drained is not in [`App::finish`]'s
    /// report. Apps without such history return nothing.
    fn drain_history(&mut self) -> AppHistory {
        AppHistory::default()
    }
    /// Whether to record per-message history from now on (the default):
    /// a driver that never reads an endpoint's history turns it off, so
    /// that memory does not grow with the run's length. Counters and
    /// digests in the final report are kept either way.
    fn keep_history(&mut self, keep: bool) {
        let _ = keep;
    }
    /// Whether to keep the payload digests ([`StreamDigest`]: bytes and a
    /// CRC over every byte sent or received) of the final report (the
    /// default). A driver that never compares them (see
    /// [`verify_delivery`]) turns them off and saves the CRC over every
    /// payload; the report's per-stream digests then stay empty.
    fn keep_digests(&mut self, keep: bool) {
        let _ = keep;
    }
    /// Names memory outside the app's own struct that its next event will
    /// touch, as address ranges for a prefetch (see
    /// `Transport::hot_memory`): a hint, nothing is read through them.
    fn hot_memory(&self, visit: &mut dyn FnMut(*const u8, usize)) {
        let _ = visit;
    }
}

/// Where the next element pushed onto `v` goes.
fn visit_tail<T>(v: &Vec<T>, visit: &mut dyn FnMut(*const u8, usize)) {
    if v.capacity() > v.len() {
        visit(
            v.as_ptr().wrapping_add(v.len()).cast::<u8>(),
            std::mem::size_of::<T>(),
        );
    }
}

/// The records in `v`, leaving it empty with room for as many (the next
/// chunk of history is likely as long: no regrowing from empty).
fn take_keeping_capacity<T>(v: &mut Vec<T>) -> Vec<T> {
    let next = Vec::with_capacity(v.len());
    std::mem::replace(v, next)
}

/// Per-message history drained from an app ([`App::drain_history`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AppHistory {
    /// Messages handed to the transport, in order.
    pub sent: Vec<SentMessage>,
    /// Whole messages received (message framing), in order.
    pub deliveries: Vec<Delivery>,
}

/// The observations of one app at the end of a run.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AppReport {
    Source(SourceReport),
    Sink(SinkReport),
    Echo(EchoReport),
    /// An app that reports nothing.
    None,
}

impl AppReport {
    pub fn source(&self) -> Option<&SourceReport> {
        match self {
            AppReport::Source(s) => Some(s),
            _ => None,
        }
    }
    /// The received side: a sink's report, or what a source received (responses).
    pub fn received(&self) -> Option<&SinkReport> {
        match self {
            AppReport::Sink(s) => Some(s),
            AppReport::Source(s) => Some(&s.received),
            AppReport::Echo(e) => Some(&e.received),
            _ => None,
        }
    }
}

/// An app that does nothing (an endpoint that only answers at transport level).
#[derive(Debug, Default, Clone, Copy)]
pub struct Idle;

impl App for Idle {
    fn on_start(&mut self, _ctx: &mut AppCtx<'_>) {}
    fn on_event(&mut self, _ctx: &mut AppCtx<'_>, _event: AppEvent) {}
    fn on_timer(&mut self, _ctx: &mut AppCtx<'_>) {}
    fn finish(self: Box<Self>) -> AppReport {
        AppReport::None
    }
}

/// One message of a source's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageSpec {
    /// When the application wants to send it.
    pub at: Instant,
    pub stream: u16,
    pub bytes: u32,
    pub unordered: bool,
}

/// A digest (CRC32C) and length of a byte stream, for stream
/// transports (TCP) where message boundaries are not preserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamDigest {
    pub bytes: u64,
    /// CRC32C (Castagnoli) of the bytes so far: the same for any chunking
    /// of the same bytes, and hardware-accelerated (the `crc32c` crate uses
    /// the CPU's CRC instruction), so hashing a greedy flow's whole byte
    /// stream costs little beside the simulation.
    pub crc: u32,
}

impl Default for StreamDigest {
    fn default() -> Self {
        StreamDigest { bytes: 0, crc: 0 }
    }
}

impl StreamDigest {
    pub fn update(&mut self, data: &[u8]) {
        self.crc = crc32c::crc32c_append(self.crc, data);
        self.bytes += data.len() as u64;
    }
}

/// A message the source handed to its transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentMessage {
    /// Source-local id, carried in the payload header.
    pub id: u32,
    /// The id the transport returned (used in `Record::Submitted`).
    pub transport_id: u64,
    pub stream: u16,
    pub bytes: u32,
    pub unordered: bool,
    /// When the schedule wanted it sent.
    pub due: Instant,
    /// When the transport accepted it (later than `due` if the transport
    /// was not connected or its buffer was full).
    pub sent: Instant,
}

/// A message the transport refused for good (not a retryable condition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedMessage {
    pub id: u32,
    pub spec: MessageSpec,
    pub error: SendError,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SourceReport {
    pub sent: Vec<SentMessage>,
    pub rejected: Vec<RejectedMessage>,
    /// 1 if a due message was still waiting for the transport (not
    /// connected / buffer full) at the end, else 0. Later due messages stay
    /// in the schedule: it is pulled one message at a time.
    pub waiting: usize,
    /// Digest of the accepted payload bytes, per stream.
    pub streams: BTreeMap<u16, StreamDigest>,
    /// What came back (responses), recorded like a message [`Sink`].
    pub received: SinkReport,
}

impl SourceReport {
    /// `(transport message id, time the schedule wanted it sent)` for every
    /// accepted message: the application send times a metric needs to
    /// count time spent waiting for the transport (`metrics::AppSend`).
    pub fn app_send_times(&self) -> impl Iterator<Item = (u64, Instant)> + '_ {
        self.sent.iter().map(|m| (m.transport_id, m.due))
    }
}

/// Most messages a source hands over in one wake-up before yielding to
/// other events at the same instant (greedy bulk over a transport without
/// flow control would otherwise never let time advance).
const MAX_SENDS_PER_WAKE: u32 = 4096;

/// Sends the messages of a schedule at their times; records what it sent
/// and what it received.
///
/// The schedule is pulled lazily, one message at a time, and the next
/// message is pulled only once the previous one was accepted: a message the
/// transport cannot take yet (not connected, buffer full) waits and goes out
/// on `Established`/`Writable`. So an infinite schedule whose messages are
/// all due at once (greedy bulk, `workload::bulk`) is paced by the
/// transport's send buffer. A `workload::Generator` plugs in as
/// `std::iter::from_fn(move || g.next_message().map(|m| MessageSpec { at: m.at,
/// stream: m.stream, bytes: m.bytes, unordered: m.unordered }))`.
pub struct MessageSource {
    schedule: Box<dyn Iterator<Item = MessageSpec>>,
    /// The next message of the schedule, not yet due or not yet pulled into `head`.
    next: Option<MessageSpec>,
    /// A due message the transport has not accepted yet.
    head: Option<(u32, MessageSpec)>,
    next_id: u32,
    buf: Vec<u8>,
    report: SourceReport,
    sink: Sink,
    /// Record every sent message in the report ([`App::keep_history`]).
    history: bool,
    /// Keep the per-stream digests ([`App::keep_digests`]).
    digests: bool,
    /// `Some(base)`: the schedule counts from `base`, and is shifted to
    /// start when the transport reports `Established` (until then nothing
    /// is due). `shift` is that offset once known.
    wait_established: Option<Instant>,
    shift: Option<Duration>,
}

impl fmt::Debug for MessageSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageSource")
            .field("next", &self.next)
            .field("head", &self.head)
            .field("sent", &self.report.sent.len())
            .finish()
    }
}

impl MessageSource {
    /// A source sending `schedule` (which should be ordered by time; a
    /// message due earlier than the current time is sent at once).
    pub fn new(schedule: impl IntoIterator<Item = MessageSpec> + 'static) -> Self {
        MessageSource {
            schedule: Box::new(schedule.into_iter()),
            next: None,
            head: None,
            next_id: 0,
            buf: Vec::new(),
            report: SourceReport {
                sent: Vec::new(),
                rejected: Vec::new(),
                waiting: 0,
                streams: BTreeMap::new(),
                received: SinkReport::new(Framing::Message),
            },
            sink: Sink::messages(),
            history: true,
            digests: true,
            wait_established: None,
            shift: None,
        }
    }

    /// The schedule (whose times count from `base`) starts once the
    /// transport is established: every message time is shifted by
    /// `established - base`, so handshake losses do not hold messages back.
    pub fn starting_when_established(mut self, base: Instant) -> Self {
        self.wait_established = Some(base);
        self
    }

    fn pull(&mut self) -> Option<MessageSpec> {
        let mut m = self.schedule.next()?;
        if let Some(d) = self.shift {
            m.at += d;
        }
        Some(m)
    }

    /// A source whose received data is framed as a byte stream (TCP).
    pub fn with_stream_framing(mut self) -> Self {
        self.sink = Sink::stream();
        self
    }

    /// Offers one message; false if the transport cannot take it yet.
    fn offer(&mut self, ctx: &mut AppCtx<'_>, id: u32, spec: MessageSpec) -> bool {
        fill_payload(id, spec.bytes as usize, &mut self.buf);
        match ctx.send(spec.stream, spec.unordered, &self.buf) {
            Ok(transport_id) => {
                if self.digests {
                    self.report
                        .streams
                        .entry(spec.stream)
                        .or_default()
                        .update(&self.buf);
                }
                if !self.history {
                    return true;
                }
                self.report.sent.push(SentMessage {
                    id,
                    transport_id,
                    stream: spec.stream,
                    bytes: spec.bytes,
                    unordered: spec.unordered,
                    due: spec.at,
                    sent: ctx.now(),
                });
                true
            }
            // Retryable: wait for Established / Writable.
            Err(SendError::NotConnected | SendError::BufferFull) => false,
            Err(error) => {
                self.report
                    .rejected
                    .push(RejectedMessage { id, spec, error });
                true
            }
        }
    }

    /// Sends every due message the transport accepts, then sets the timer
    /// for the next one (or, when blocked, waits for an app event).
    fn pump(&mut self, ctx: &mut AppCtx<'_>) {
        let mut budget = MAX_SENDS_PER_WAKE;
        loop {
            if self.head.is_none() {
                match self.next {
                    Some(spec) if spec.at <= ctx.now() => {
                        self.head = Some((self.next_id, spec));
                        self.next_id = self.next_id.wrapping_add(1);
                        self.next = self.pull();
                    }
                    _ => break,
                }
            }
            let Some((id, spec)) = self.head else { break };
            if !self.offer(ctx, id, spec) {
                // Blocked: Established / Writable will call pump again.
                ctx.cancel_timer();
                return;
            }
            self.head = None;
            budget -= 1;
            if budget == 0 {
                ctx.set_timer(ctx.now());
                return;
            }
        }
        match self.next {
            Some(spec) => ctx.set_timer(spec.at),
            None => ctx.cancel_timer(),
        }
    }
}

impl App for MessageSource {
    fn hot_memory(&self, visit: &mut dyn FnMut(*const u8, usize)) {
        let schedule: &dyn Iterator<Item = MessageSpec> = &*self.schedule;
        visit(
            (schedule as *const dyn Iterator<Item = MessageSpec>).cast::<u8>(),
            std::mem::size_of_val(schedule),
        );
        if !self.buf.is_empty() {
            visit(self.buf.as_ptr(), self.buf.len().min(128));
        }
        visit_tail(&self.report.sent, visit);
        self.sink.hot_memory(visit);
    }

    fn on_start(&mut self, ctx: &mut AppCtx<'_>) {
        if self.wait_established.is_some() {
            return;
        }
        self.next = self.schedule.next();
        if let Some(spec) = self.next {
            ctx.set_timer(spec.at);
        }
    }

    fn on_event(&mut self, ctx: &mut AppCtx<'_>, event: AppEvent) {
        match event {
            AppEvent::Established if self.wait_established.is_some() && self.shift.is_none() => {
                let base = self.wait_established.unwrap_or(ctx.now());
                self.shift = Some(ctx.now().saturating_duration_since(base));
                self.next = self.pull();
                self.pump(ctx);
            }
            AppEvent::Established | AppEvent::Writable => self.pump(ctx),
            other => self.sink.on_event(ctx, other),
        }
    }

    fn on_timer(&mut self, ctx: &mut AppCtx<'_>) {
        self.pump(ctx);
    }

    fn drain_history(&mut self) -> AppHistory {
        AppHistory {
            sent: take_keeping_capacity(&mut self.report.sent),
            deliveries: take_keeping_capacity(&mut self.sink.report.deliveries),
        }
    }

    fn keep_history(&mut self, keep: bool) {
        self.history = keep;
        self.sink.keep_history(keep);
    }

    fn keep_digests(&mut self, keep: bool) {
        self.digests = keep;
        self.sink.keep_digests(keep);
    }

    fn finish(self: Box<Self>) -> AppReport {
        let mut report = self.report;
        report.waiting = usize::from(self.head.is_some());
        report.received = self.sink.report;
        AppReport::Source(report)
    }
}

/// How a sink splits what it receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Each `Received` is one whole message (SCTP).
    Message,
    /// `Received` carries the next bytes of a stream (TCP); only digests are kept.
    Stream,
}

/// One message handed to a sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub time: Instant,
    pub stream: u16,
    pub unordered: bool,
    pub bytes: u32,
    pub check: PayloadCheck,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SinkReport {
    pub framing: Framing,
    /// Message framing: every delivery in order of arrival.
    pub deliveries: Vec<Delivery>,
    /// Digest of every received byte, per stream (both framings).
    pub streams: BTreeMap<u16, StreamDigest>,
    pub established: Option<Instant>,
    /// `Some(error)` once the transport reported `Closed`.
    pub closed: Option<Option<String>>,
}

impl SinkReport {
    fn new(framing: Framing) -> Self {
        SinkReport {
            framing,
            deliveries: Vec::new(),
            streams: BTreeMap::new(),
            established: None,
            closed: None,
        }
    }
}

/// Records everything it receives.
#[derive(Clone, Debug)]
pub struct Sink {
    report: SinkReport,
    /// Record every delivery in the report ([`App::keep_history`]).
    history: bool,
    /// Keep the per-stream digests ([`App::keep_digests`]).
    digests: bool,
}

impl Sink {
    pub fn messages() -> Self {
        Sink {
            report: SinkReport::new(Framing::Message),
            history: true,
            digests: true,
        }
    }
    pub fn stream() -> Self {
        Sink {
            report: SinkReport::new(Framing::Stream),
            history: true,
            digests: true,
        }
    }
}

impl App for Sink {
    fn on_start(&mut self, _ctx: &mut AppCtx<'_>) {}

    fn on_event(&mut self, ctx: &mut AppCtx<'_>, event: AppEvent) {
        match event {
            AppEvent::Established => self.report.established = Some(ctx.now()),
            AppEvent::Received {
                stream,
                unordered,
                payload,
                ..
            } => {
                if self.digests {
                    self.report
                        .streams
                        .entry(stream)
                        .or_default()
                        .update(&payload);
                }
                if self.history && self.report.framing == Framing::Message {
                    self.report.deliveries.push(Delivery {
                        time: ctx.now(),
                        stream,
                        unordered,
                        bytes: u32::try_from(payload.len()).unwrap_or(u32::MAX),
                        check: check_payload(&payload),
                    });
                }
            }
            AppEvent::Closed { error } => self.report.closed = Some(error),
            AppEvent::Writable | AppEvent::PeerRestarted => {}
        }
    }

    fn on_timer(&mut self, _ctx: &mut AppCtx<'_>) {}

    fn finish(self: Box<Self>) -> AppReport {
        AppReport::Sink(self.report)
    }

    fn hot_memory(&self, visit: &mut dyn FnMut(*const u8, usize)) {
        visit_tail(&self.report.deliveries, visit);
    }

    fn drain_history(&mut self) -> AppHistory {
        AppHistory {
            sent: Vec::new(),
            deliveries: take_keeping_capacity(&mut self.report.deliveries),
        }
    }

    fn keep_history(&mut self, keep: bool) {
        self.history = keep;
    }

    fn keep_digests(&mut self, keep: bool) {
        self.digests = keep;
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct EchoReport {
    pub echoed: u64,
    /// Messages refused for good by the transport.
    pub rejected: Vec<SendError>,
    /// Messages still waiting for buffer space at the end.
    pub waiting: usize,
    pub received: SinkReport,
}

/// Sends every received message back on the same stream, with the same
/// ordering flag (the echo server of 001 §IV.A).
#[derive(Debug)]
pub struct Echo {
    sink: Sink,
    waiting: VecDeque<(u16, bool, bytes::Bytes)>,
    echoed: u64,
    rejected: Vec<SendError>,
}

impl Default for Echo {
    fn default() -> Self {
        Echo::new()
    }
}

impl Echo {
    pub fn new() -> Self {
        Echo {
            sink: Sink::messages(),
            waiting: VecDeque::new(),
            echoed: 0,
            rejected: Vec::new(),
        }
    }

    fn flush(&mut self, ctx: &mut AppCtx<'_>) {
        while let Some((stream, unordered, payload)) = self.waiting.front() {
            match ctx.send(*stream, *unordered, payload) {
                Ok(_) => self.echoed += 1,
                Err(SendError::NotConnected | SendError::BufferFull) => return,
                Err(e) => self.rejected.push(e),
            }
            self.waiting.pop_front();
        }
    }
}

impl App for Echo {
    fn on_start(&mut self, _ctx: &mut AppCtx<'_>) {}

    fn on_event(&mut self, ctx: &mut AppCtx<'_>, event: AppEvent) {
        if let AppEvent::Received {
            stream,
            unordered,
            payload,
            ..
        } = &event
        {
            self.waiting
                .push_back((*stream, *unordered, payload.clone()));
        }
        let retry = matches!(
            event,
            AppEvent::Received { .. } | AppEvent::Writable | AppEvent::Established
        );
        self.sink.on_event(ctx, event);
        if retry {
            self.flush(ctx);
        }
    }

    fn on_timer(&mut self, _ctx: &mut AppCtx<'_>) {}

    fn finish(self: Box<Self>) -> AppReport {
        AppReport::Echo(EchoReport {
            echoed: self.echoed,
            rejected: self.rejected,
            waiting: self.waiting.len(),
            received: self.sink.report,
        })
    }
}

/// How a delivery check failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeliveryError {
    /// A message arrived whose body does not match its id.
    Corrupt { id: u32 },
    /// A message arrived more than once.
    Duplicate { id: u32 },
    /// A message arrived that the source never sent.
    Unknown { id: u32 },
    /// An ordered message overtook an earlier ordered message of its stream.
    OutOfOrder { stream: u16, id: u32, after: u32 },
    /// Messages the source sent never arrived (first few ids listed).
    Missing { count: usize, first: Vec<u32> },
    /// A delivered message arrived on another stream or with another flag than sent.
    Mismatch { id: u32 },
    /// Stream framing: the received bytes differ from the sent bytes.
    StreamDiffers {
        stream: u16,
        sent: StreamDigest,
        received: StreamDigest,
    },
    /// Messages too short to carry an id were received; they cannot be checked.
    Unidentifiable { count: usize },
}

impl fmt::Display for DeliveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for DeliveryError {}

/// What [`verify_delivery`] counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeliverySummary {
    pub sent: usize,
    pub delivered: usize,
}

/// Checks exactly-once delivery of everything `source` sent, as seen by
/// `sink`: every message arrives once, intact, on its stream, and ordered
/// messages of a stream arrive in the order they were sent. With
/// `require_all = false`, missing messages are allowed (e.g. partial
/// reliability, or a run stopped early) but all other checks still apply.
pub fn verify_delivery(
    source: &SourceReport,
    sink: &SinkReport,
    require_all: bool,
) -> Result<DeliverySummary, DeliveryError> {
    match sink.framing {
        Framing::Stream => {
            for (stream, sent) in &source.streams {
                let received = sink.streams.get(stream).copied().unwrap_or_default();
                let ok = if require_all {
                    received == *sent
                } else {
                    received.bytes <= sent.bytes
                };
                if !ok {
                    return Err(DeliveryError::StreamDiffers {
                        stream: *stream,
                        sent: *sent,
                        received,
                    });
                }
            }
            Ok(DeliverySummary {
                sent: source.sent.len(),
                delivered: source.sent.len(),
            })
        }
        Framing::Message => {
            let by_id: BTreeMap<u32, &SentMessage> =
                source.sent.iter().map(|m| (m.id, m)).collect();
            let mut seen = BTreeSet::new();
            let mut last_ordered: BTreeMap<u16, u32> = BTreeMap::new();
            let mut unidentifiable = 0;
            for d in &sink.deliveries {
                let id = match d.check {
                    PayloadCheck::Intact { id } => id,
                    PayloadCheck::Corrupt { id } => return Err(DeliveryError::Corrupt { id }),
                    PayloadCheck::TooShort => {
                        unidentifiable += 1;
                        continue;
                    }
                };
                let Some(sent) = by_id.get(&id) else {
                    return Err(DeliveryError::Unknown { id });
                };
                if sent.stream != d.stream || sent.unordered != d.unordered || sent.bytes != d.bytes
                {
                    return Err(DeliveryError::Mismatch { id });
                }
                if !seen.insert(id) {
                    return Err(DeliveryError::Duplicate { id });
                }
                if !d.unordered {
                    if let Some(&after) = last_ordered.get(&d.stream) {
                        if id < after {
                            return Err(DeliveryError::OutOfOrder {
                                stream: d.stream,
                                id,
                                after,
                            });
                        }
                    }
                    last_ordered.insert(d.stream, id);
                }
            }
            if unidentifiable > 0 {
                return Err(DeliveryError::Unidentifiable {
                    count: unidentifiable,
                });
            }
            if require_all && seen.len() != by_id.len() {
                let missing: Vec<u32> = by_id
                    .keys()
                    .filter(|id| !seen.contains(id))
                    .copied()
                    .collect();
                return Err(DeliveryError::Missing {
                    count: missing.len(),
                    first: missing.into_iter().take(10).collect(),
                });
            }
            Ok(DeliverySummary {
                sent: source.sent.len(),
                delivered: seen.len(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The table-driven fill writes the byte-wise pattern, at every length
    // across the 256-byte period.
    #[test]
    fn payload_follows_the_byte_pattern() {
        let mut buf = Vec::new();
        for id in [0u32, 1, 0x1234_5678, u32::MAX] {
            for len in (0..1100).chain([4096, 65_537]) {
                fill_payload(id, len, &mut buf);
                let header = id.to_be_bytes();
                let want: Vec<u8> = (0..len)
                    .map(|k| {
                        if k < HEADER_BYTES {
                            header[k]
                        } else {
                            pattern_byte(id, k)
                        }
                    })
                    .collect();
                assert_eq!(buf, want, "id {id}, {len} bytes");
                if len > HEADER_BYTES {
                    assert_eq!(check_payload(&buf), PayloadCheck::Intact { id });
                    let last = len - 1;
                    buf[last] ^= 1;
                    assert_eq!(check_payload(&buf), PayloadCheck::Corrupt { id });
                }
            }
        }
    }

    // Generated payloads check as intact; a changed byte is corrupt; short ones are unidentifiable.
    #[test]
    fn payload_round_trip() {
        let mut buf = Vec::new();
        for (id, len) in [(0u32, 4usize), (7, 100), (0xdead_beef, 1400), (3, 5)] {
            fill_payload(id, len, &mut buf);
            assert_eq!(buf.len(), len);
            assert_eq!(check_payload(&buf), PayloadCheck::Intact { id });
        }
        fill_payload(9, 50, &mut buf);
        buf[20] ^= 0x40;
        assert_eq!(check_payload(&buf), PayloadCheck::Corrupt { id: 9 });
        fill_payload(9, 3, &mut buf);
        assert_eq!(buf.len(), 3);
        assert_eq!(check_payload(&buf), PayloadCheck::TooShort);
        // Two ids give different bodies, so swapped bodies are noticed.
        let mut other = Vec::new();
        fill_payload(1, 64, &mut buf);
        fill_payload(2, 64, &mut other);
        assert_ne!(buf[HEADER_BYTES..], other[HEADER_BYTES..]);
    }

    fn sent_msg(id: u32, stream: u16, unordered: bool) -> SentMessage {
        SentMessage {
            id,
            transport_id: u64::from(id),
            stream,
            bytes: 10,
            unordered,
            due: Instant::ZERO,
            sent: Instant::ZERO,
        }
    }

    fn delivery(id: u32, stream: u16, unordered: bool) -> Delivery {
        let mut buf = Vec::new();
        fill_payload(id, 10, &mut buf);
        Delivery {
            time: Instant::ZERO,
            stream,
            unordered,
            bytes: 10,
            check: check_payload(&buf),
        }
    }

    // Stream framing compares byte digests: equal passes, a changed or missing byte fails.
    #[test]
    fn verify_stream_framing() {
        let mut sent = StreamDigest::default();
        sent.update(b"hello, ");
        sent.update(b"world");
        let mut source = SourceReport {
            sent: vec![],
            rejected: vec![],
            waiting: 0,
            streams: BTreeMap::from([(0, sent)]),
            received: SinkReport::new(Framing::Message),
        };
        source.sent.push(sent_msg(0, 0, false));
        let mut sink = SinkReport::new(Framing::Stream);
        let mut got = StreamDigest::default();
        // Different chunking, same bytes.
        got.update(b"hel");
        got.update(b"lo, world");
        sink.streams.insert(0, got);
        assert!(verify_delivery(&source, &sink, true).is_ok());
        let mut short = StreamDigest::default();
        short.update(b"hello, worl");
        sink.streams.insert(0, short);
        assert!(matches!(
            verify_delivery(&source, &sink, true),
            Err(DeliveryError::StreamDiffers { stream: 0, .. })
        ));
        assert!(verify_delivery(&source, &sink, false).is_ok());
        let mut wrong = StreamDigest::default();
        wrong.update(b"hellO, world");
        sink.streams.insert(0, wrong);
        assert!(verify_delivery(&source, &sink, true).is_err());
    }

    // The checker accepts a correct delivery and names each kind of fault.
    #[test]
    fn verify_catches_each_fault() {
        let source = SourceReport {
            sent: vec![
                sent_msg(0, 0, false),
                sent_msg(1, 0, false),
                sent_msg(2, 1, true),
                sent_msg(3, 1, true),
            ],
            rejected: vec![],
            waiting: 0,
            streams: BTreeMap::new(),
            received: SinkReport::new(Framing::Message),
        };
        let mut sink = SinkReport::new(Framing::Message);
        sink.deliveries = vec![
            delivery(0, 0, false),
            delivery(3, 1, true),
            delivery(1, 0, false),
            delivery(2, 1, true),
        ];
        assert_eq!(
            verify_delivery(&source, &sink, true),
            Ok(DeliverySummary {
                sent: 4,
                delivered: 4
            })
        );
        let mut dup = sink.clone();
        dup.deliveries.push(delivery(2, 1, true));
        assert_eq!(
            verify_delivery(&source, &dup, true),
            Err(DeliveryError::Duplicate { id: 2 })
        );
        let mut swapped = sink.clone();
        swapped.deliveries.swap(0, 2);
        assert_eq!(
            verify_delivery(&source, &swapped, true),
            Err(DeliveryError::OutOfOrder {
                stream: 0,
                id: 0,
                after: 1
            })
        );
        let mut missing = sink.clone();
        missing.deliveries.pop();
        assert_eq!(
            verify_delivery(&source, &missing, true),
            Err(DeliveryError::Missing {
                count: 1,
                first: vec![2]
            })
        );
        assert!(verify_delivery(&source, &missing, false).is_ok());
        let mut unknown = sink.clone();
        unknown.deliveries.push(delivery(99, 0, false));
        assert_eq!(
            verify_delivery(&source, &unknown, true),
            Err(DeliveryError::Unknown { id: 99 })
        );
        let mut wrong_stream = sink;
        wrong_stream.deliveries[0].stream = 5;
        assert_eq!(
            verify_delivery(&source, &wrong_stream, true),
            Err(DeliveryError::Mismatch { id: 0 })
        );
    }
}
