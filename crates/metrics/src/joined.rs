//! The joint sender + receiver flow analysis in bounded memory: a
//! [`FlowStream`].
//!
//! [`FlowAnalysis`](crate::FlowAnalysis) keeps every message and every
//! retransmitted piece until the end of a run. A simulated 24-hour thin
//! stream then holds hundreds of MiB of records and outcomes. A
//! [`FlowStream`] reads the same records (the sender's and the
//! receiver's, plus the application send times) while the run goes and
//! keeps:
//!
//! * per *open* message (submitted, not yet final): its outcome so far and,
//!   for the slowest-message path, the copies of its units and their
//!   arrivals;
//! * per-unit facts (transmission count, first/last transmission, first
//!   acknowledgement, arrival, delivery, abandonment) as unit *ranges* (see
//!   `ranges`), only for units of open messages: a final message's units
//!   are removed from every map and remembered as one coalesced set of
//!   final units (one range for a stream whose messages finish in order);
//! * fixed-size counters (pieces per reason, the reason table with
//!   spurious counts, bytes for tohd, packets for the loss rate, the
//!   recovery counts of [`RecoveryCounts`], the thin time);
//! * per latency kind asked for: the latency of each final message (its
//!   retransmission count and nanoseconds): exact, 16 bytes per message
//!   and kind, or with [`FlowStream::with_sample_limit`] exact up to a
//!   limit and an HDR histogram beyond it (see [`crate::LatencyHistogram`]);
//! * the slowest message so far (and the message it waited for) with its
//!   copies, and the last [`RECENT_PATHS`] final messages' paths to find
//!   that blocking message;
//! * for the cumulative ACK latency ([`LatencyKind::AckCumulative`]): the
//!   running cumulative ACK point (the latest acknowledgement of every
//!   message passed so far, in unit order) and the final messages waiting
//!   behind the lowest message not yet final. Their value is known once
//!   every earlier message is final, so the queue holds the messages sent
//!   during the oldest open message's recovery (a bounded number for a
//!   flow whose messages are acknowledged), not the flow.
//!
//! A message is *final* once every unit of it was acknowledged, had arrived
//! and was delivered, or once it was abandoned and every unit had arrived
//! (an abandoned message that never arrives stays open until the end), and
//! every unit of it lies below the *resend floor*: the lowest unit neither
//! acknowledged nor abandoned, which is the sender's cumulative point (TCP
//! `snd_una`; SCTP the cumulative TSN ack with abandoned chunks skipped).
//! None of its facts can change afterwards: a sender does not transmit data
//! below its cumulative point again, and only first arrivals,
//! acknowledgements and deliveries count. Data acknowledged only
//! selectively can be sent again (a TCP RDB bundle starts at `snd_una` and
//! carries SACKed bytes above a hole), so a message acknowledged, arrived
//! and delivered above the floor stays open until the floor passes it, and
//! such copies count in its retransmissions as in the full analysis. Its
//! latency sample and retransmission group are recorded when it becomes
//! final.
//!
//! Given the same records, [`FlowStream::finish`] gives the
//! [`FlowDigest`] that [`FlowAnalysis::digest`](crate::FlowAnalysis::digest)
//! gives, field for field (tested on simulated SCTP and TCP runs with
//! loss, TCP RDB on a congested bottleneck) as long as no data below the
//! resend floor is transmitted again (see `FlowStream::advance_floor`; a
//! piece carrying such units counts them as sent before, once) and the
//! one-way-delay correction is not `drift-corrected` (which needs the first
//! and last 1000 samples of the flow; refused with
//! [`MetricsError::StreamingUnsupported`]). The cumulative ACK latency
//! further needs messages to be submitted in unit order (every transport
//! here numbers units in submission order); a message submitted below the
//! cumulative point already passed is refused with the same error.
//!
//! Feeding: the records of both endpoints in time order per endpoint,
//! chunk by chunk; [`FlowStream::push`] takes what each endpoint recorded
//! up to an instant and holds back the records *at* that instant, so that
//! at equal times the receiver's records are read before the sender's
//! (an arrival at the instant of a retransmission makes it spurious, as
//! in [`FlowAnalysis`](crate::FlowAnalysis)).

use std::collections::{BTreeMap, VecDeque};

use thinstream_base::trace::{Record, TxReason, Units};
use thinstream_base::{Duration, Instant};

use crate::digest::{FlowDigest, LatencySample, LossCounts};
use crate::error::{MetricsError, Side};
use crate::flow::{
    pro_rata, AppSend, LatencyKind, LossMethod, MessageOutcome, OwdCorrection, ReasonRow,
    RecoveryCounts, RtoClock,
};
use crate::hist::LatencyHistogram;
use crate::ranges::{RangeMap, UnitSet};
use crate::streaming::ThinClock;

/// Final messages whose paths are kept to name the message the slowest one
/// waited for (in-order delivery).
pub const RECENT_PATHS: usize = 256;

/// Emptied path buffers kept for reuse.
const SPARE_PATHS: usize = 16;

/// A message path's two vectors (copies, arrivals), kept emptied for reuse.
type PathBuffers = (Vec<PathCopy>, Vec<(Instant, Units)>);

/// One transmission of a message's data: time, the piece's units, why,
/// and the sender's thin verdict at that time (`None` before any).
pub type PathCopy = (Instant, Units, TxReason, Option<bool>);

/// What happened to one message, with the copies of its units and their
/// arrivals at the receiver, in time order.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageTrail {
    pub outcome: MessageOutcome,
    /// Its latency of the slowest-message kind (one-way delay removed as the
    /// analysis options say), if it has one.
    pub latency: Option<Duration>,
    pub copies: Vec<PathCopy>,
    pub arrivals: Vec<(Instant, Units)>,
}

/// The slowest message of a flow and the message it waited for.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowestTrail {
    pub kind: LatencyKind,
    pub message: MessageTrail,
    pub blocked_by: Option<MessageTrail>,
    /// The smallest `arrived − first_tx` over the flow's messages (to match
    /// arrivals to copies).
    pub min_one_way: Duration,
    /// Whether the sender recorded thin verdicts at all.
    pub thin_tracked: bool,
}

#[derive(Clone, Debug)]
struct Open {
    index: u64,
    outcome: MessageOutcome,
    acked_units: u64,
    arrived_units: u64,
    delivered_units: u64,
    copies: Vec<PathCopy>,
    arrivals: Vec<(Instant, Units)>,
}

/// Latency samples of one kind: (submission index, retransmissions, raw
/// nanoseconds: one-way delay not yet removed), 16 bytes each. A flow
/// whose submission index passes `u32::MAX` (four billion messages) puts
/// the kind's samples into the histogram from then on, as past the limit.
/// Past the sample limit, a histogram of the values (the one-way delay
/// removed where known while recording: `none` and a given delay; the
/// `min-observed` one is removed at the end, see
/// [`LatencyHistogram::shifted_down`]).
#[derive(Clone, Debug, Default)]
struct Samples {
    exact: Vec<(u32, u32, u64)>,
    /// Boxed: a flow's kinds that never reach the sample limit (most, in a
    /// run of many short flows) then take a word each instead of the
    /// histogram's few hundred bytes.
    hist: Option<Box<LatencyHistogram>>,
    /// `min-observed`: the one-way delay removed from the histogram's
    /// values so far (the smallest seen when they were recorded).
    base: Duration,
}

/// A final message waiting for its cumulative ACK latency: it is known
/// once every message below it in unit order is final.
#[derive(Clone, Debug)]
struct CumWaiting {
    index: u64,
    retransmissions: u32,
    first_tx: Option<Instant>,
    acked: Option<Instant>,
    abandoned: bool,
    /// One past its last unit.
    end: u64,
    /// Its path, when the slowest message is chosen by this latency.
    trail: Option<MessageTrail>,
}

/// The running cumulative ACK point ([`LatencyKind::AckCumulative`]), as
/// `FlowAnalysis` computes it over all messages in unit order: an
/// abandoned message never acknowledged is skipped, one never
/// acknowledged (and not abandoned) holds back every later one.
#[derive(Clone, Debug, Default)]
struct CumAck {
    /// Final messages by first unit, not yet passed.
    /// Sorted by first unit (mostly appended: messages become final in
    /// order).
    waiting: VecDeque<(u64, CumWaiting)>,
    /// Latest acknowledgement over the messages passed.
    front: Option<Instant>,
    /// A passed message was never acknowledged: no later one has a value.
    blocked: bool,
    /// One past the highest unit passed.
    passed: u64,
    /// The most messages waiting at once.
    peak: usize,
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct FlowStream {
    owd: OwdCorrection,
    kinds: Vec<LatencyKind>,
    slowest_kind: Option<LatencyKind>,
    sample_limit: Option<usize>,
    /// Open messages by their first unit (disjoint, so sorted by last
    /// unit too); new ones come at the back, final ones mostly leave at
    /// the front.
    open: VecDeque<Open>,
    /// Application send times not yet matched to a `Submitted` record.
    /// Sorted by message; mostly appended at the back and taken from the
    /// front (messages are submitted in the order the application sent them).
    app_sends: VecDeque<(u64, Instant)>,
    submitted: u64,
    done: UnitSet,
    first_tx: RangeMap<Instant>,
    last_tx: RangeMap<Instant>,
    tx_count: RangeMap<u32>,
    acked: RangeMap<Instant>,
    arrived: RangeMap<Instant>,
    delivered: RangeMap<Instant>,
    abandoned: RangeMap<Instant>,
    /// Units of no message ever sent: one past the highest unit sent.
    high_unit: u64,
    /// The lowest unit neither acknowledged nor abandoned: the sender's
    /// cumulative point as its records show it. No sender here transmits
    /// a unit below it again (see [`FlowStream::advance_floor`]), so only
    /// final messages below it are forgotten.
    resend_floor: u64,
    messages: u64,
    abandoned_messages: u64,
    delivered_messages: u64,
    undelivered_waited: Vec<(u64, Instant)>,
    samples: BTreeMap<LatencyKind, Samples>,
    /// The keys of `samples`, in order (read per final message).
    sample_kinds: Vec<LatencyKind>,
    min_one_way: Option<Duration>,
    reasons: BTreeMap<TxReason, u64>,
    /// (nth capped at 3, reason) → (count, spurious).
    reason_rows: BTreeMap<(u32, TxReason), (u64, u64)>,
    payload_bytes_sent: u64,
    unique_bytes_sent: u64,
    tx_packets: u64,
    tx_data_packets: u64,
    tx_retransmission_packets: u64,
    tx_packets_received: u64,
    rx_packets_sent: u64,
    rx_packets_received: u64,
    recovery: RecoveryCounts,
    rto: RtoClock,
    thin_seen: bool,
    thin_last: Option<bool>,
    thin: ThinClock,
    window: Option<(Instant, Instant)>,
    /// The time of each side's last record read (each side's records come
    /// in time order, so the later of the two is the end of the flow's
    /// records).
    last: [Option<Instant>; 2],
    seen: [u64; 2],
    held: [Vec<Record>; 2],
    slowest: Option<(u64, MessageTrail, Option<MessageTrail>)>,
    /// Paths of final messages that could still be the message a later one
    /// waited for, each with its finalization number: among the last
    /// [`RECENT_PATHS`] final ones, those that arrived after every message
    /// that is open or yet to come could (see [`FlowStream::prune_recent`]).
    recent: VecDeque<(u64, u64, MessageTrail)>,
    /// Messages made final so far.
    finalized: u64,
    /// Emptied path buffers of forgotten final messages, reused by new
    /// messages (at most [`SPARE_PATHS`]; no allocation per message).
    spare_paths: Vec<PathBuffers>,
    peak_open: usize,
    /// Present when the cumulative ACK latency is asked for (as a kind or
    /// for the slowest message).
    cum: Option<CumAck>,
}

impl FlowStream {
    /// A stream computing the latency samples of `kinds`, and, if
    /// `slowest` is given, the path of the slowest message by that kind.
    pub fn new(
        owd: OwdCorrection,
        kinds: &[LatencyKind],
        slowest: Option<LatencyKind>,
    ) -> Result<FlowStream, MetricsError> {
        if let OwdCorrection::MinObservedDriftCorrected { .. } = owd {
            return Err(MetricsError::StreamingUnsupported {
                what: "the drift-corrected one-way delay (it needs the first and last samples of the flow)",
            });
        }
        let cum = (kinds.contains(&LatencyKind::AckCumulative)
            || slowest == Some(LatencyKind::AckCumulative))
        .then(CumAck::default);
        Ok(FlowStream {
            owd,
            kinds: kinds.to_vec(),
            slowest_kind: slowest,
            sample_limit: None,
            open: VecDeque::new(),
            app_sends: VecDeque::new(),
            submitted: 0,
            done: UnitSet::default(),
            first_tx: RangeMap::new(),
            last_tx: RangeMap::new(),
            tx_count: RangeMap::new(),
            acked: RangeMap::new(),
            arrived: RangeMap::new(),
            delivered: RangeMap::new(),
            abandoned: RangeMap::new(),
            high_unit: 0,
            resend_floor: 0,
            messages: 0,
            abandoned_messages: 0,
            delivered_messages: 0,
            undelivered_waited: Vec::new(),
            samples: kinds.iter().map(|k| (*k, Samples::default())).collect(),
            sample_kinds: {
                let mut k = kinds.to_vec();
                k.sort();
                k.dedup();
                k
            },
            min_one_way: None,
            reasons: TxReason::ALL.iter().map(|r| (*r, 0)).collect(),
            reason_rows: BTreeMap::new(),
            payload_bytes_sent: 0,
            unique_bytes_sent: 0,
            tx_packets: 0,
            tx_data_packets: 0,
            tx_retransmission_packets: 0,
            tx_packets_received: 0,
            rx_packets_sent: 0,
            rx_packets_received: 0,
            recovery: RecoveryCounts::default(),
            rto: RtoClock::default(),
            thin_seen: false,
            thin_last: None,
            thin: ThinClock::default(),
            window: None,
            last: [None, None],
            seen: [0, 0],
            held: [Vec::new(), Vec::new()],
            slowest: None,
            recent: VecDeque::new(),
            finalized: 0,
            spare_paths: Vec::new(),
            peak_open: 0,
            cum,
        })
    }

    /// Keeps at most `limit` exact latency samples per kind: beyond that,
    /// the kind's samples go into a [`LatencyHistogram`] (the digest then
    /// holds the histogram instead of samples), so that memory stays flat
    /// however long the flow runs. Counts, means, minima and maxima stay
    /// exact; percentiles get the histogram's bound.
    pub fn with_sample_limit(mut self, limit: usize) -> FlowStream {
        self.sample_limit = Some(limit);
        self
    }

    /// Counts `n` submissions as already made (tests: a flow past four
    /// billion messages without making them).
    #[cfg(test)]
    pub(crate) fn skip_submissions(&mut self, n: u64) {
        self.submitted += n;
    }

    /// Latency samples held exactly now, over all kinds.
    pub fn exact_samples(&self) -> usize {
        self.samples.values().map(|s| s.exact.len()).sum()
    }

    /// Application send times (`metrics::AppSend`) of messages submitted in
    /// this chunk or later; each is applied when its `Submitted` record is
    /// read (and must not be later than it).
    pub fn app_sends(&mut self, sends: impl IntoIterator<Item = AppSend>) {
        for a in sends {
            match self.app_sends.back() {
                Some((m, _)) if *m >= a.message => {
                    match self.app_sends.binary_search_by_key(&a.message, |(m, _)| *m) {
                        Ok(i) => self.app_sends[i].1 = a.time,
                        Err(i) => self.app_sends.insert(i, (a.message, a.time)),
                    }
                }
                _ => self.app_sends.push_back((a.message, a.time)),
            }
        }
    }

    /// Reads the records both endpoints made since the last call, every one
    /// of them at or before `upto`; those at `upto` are held back until the
    /// next call (or [`FlowStream::finish`]).
    pub fn push(
        &mut self,
        sender: Vec<Record>,
        receiver: Vec<Record>,
        upto: Instant,
    ) -> Result<(), MetricsError> {
        let mut sides = [sender, receiver];
        for (k, recs) in sides.iter_mut().enumerate() {
            // The chunk itself when nothing was held back (no copy).
            let mut all = std::mem::take(recs);
            if !self.held[k].is_empty() {
                let mut held = std::mem::take(&mut self.held[k]);
                held.append(&mut all);
                all = held;
            }
            let cut = all.partition_point(|r| r.time() < upto);
            self.held[k] = all.split_off(cut);
            *recs = all;
        }
        let [sender, receiver] = sides;
        self.merge(&sender, &receiver)
    }

    fn merge(&mut self, sender: &[Record], receiver: &[Record]) -> Result<(), MetricsError> {
        let mut rx = receiver.iter().peekable();
        for s in sender {
            let t = s.time();
            while let Some(r) = rx.next_if(|r| r.time() <= t) {
                self.receiver_record(r)?;
            }
            self.sender_record(s)?;
        }
        for r in rx {
            self.receiver_record(r)?;
        }
        Ok(())
    }

    /// Messages open now.
    pub fn open_messages(&self) -> usize {
        self.open.len()
    }

    /// Paths of final messages kept now to find the message a later one
    /// waited for (at most [`RECENT_PATHS`]).
    pub fn kept_paths(&self) -> usize {
        self.recent.len()
    }

    /// The most messages open at once so far.
    pub fn peak_open_messages(&self) -> usize {
        self.peak_open
    }

    /// Final messages waiting for their cumulative ACK latency now (0
    /// unless that latency is asked for).
    pub fn cumulative_waiting(&self) -> usize {
        self.cum.as_ref().map_or(0, |c| c.waiting.len())
    }

    /// The most final messages waiting for their cumulative ACK latency at
    /// once so far.
    pub fn peak_cumulative_waiting(&self) -> usize {
        self.cum.as_ref().map_or(0, |c| c.peak)
    }

    /// Stored unit ranges over every per-unit map and the final-unit set
    /// (what the per-unit state costs).
    pub fn stored_ranges(&self) -> usize {
        self.first_tx.len()
            + self.last_tx.len()
            + self.tx_count.len()
            + self.acked.len()
            + self.arrived.len()
            + self.delivered.len()
            + self.abandoned.len()
            + self.done.ranges()
    }

    fn check(&mut self, side: Side, rec: &Record) -> Result<Instant, MetricsError> {
        let k = usize::from(side == Side::Receiver);
        let index = self.seen[k] as usize;
        self.seen[k] += 1;
        let t = rec.time();
        if self.last[k].is_some_and(|l| t < l) {
            return Err(MetricsError::UnorderedRecords { side, index });
        }
        self.last[k] = Some(t);
        Ok(t)
    }

    fn units_ok(&self, side: Side, units: Units) -> Result<Units, MetricsError> {
        if units.is_empty() {
            let k = usize::from(side == Side::Receiver);
            Err(MetricsError::EmptyUnits {
                side,
                index: self.seen[k] as usize - 1,
            })
        } else {
            Ok(units)
        }
    }

    /// Indices in `open` of the open messages overlapping `r`.
    fn owners(&self, r: Units) -> std::ops::Range<usize> {
        let n = self.open.len();
        if !r.is_empty() {
            // The common cases without a search: `r` at or above the
            // newest open message's start (its units, or new ones), or
            // inside the oldest one.
            match (self.open.front(), self.open.back()) {
                (_, Some(b)) if b.outcome.units.start <= r.start => {
                    let from = if b.outcome.units.end > r.start {
                        n - 1
                    } else {
                        n
                    };
                    return from..n;
                }
                (Some(f), _)
                    if f.outcome.units.start <= r.start && r.end <= f.outcome.units.end =>
                {
                    return 0..1;
                }
                (None, None) => return 0..0,
                _ => {}
            }
        }
        let from = self
            .open
            .partition_point(|m| m.outcome.units.end <= r.start);
        let to = self.open.partition_point(|m| m.outcome.units.start < r.end);
        from..to.max(from)
    }

    fn receiver_record(&mut self, rec: &Record) -> Result<(), MetricsError> {
        let time = self.check(Side::Receiver, rec)?;
        match rec {
            Record::Arrived { units, .. } => {
                let units = self.units_ok(Side::Receiver, *units)?;
                let (parts, in_done) = self.done.outside(units);
                if in_done > 0 {
                    // A late copy of a final message: still part of the
                    // paths kept for the slowest message.
                    self.each_final_trail(|t| {
                        let u = t.outcome.units;
                        if u.start < units.end && units.start < u.end {
                            t.arrivals.push((time, units));
                        }
                    });
                }
                for part in parts {
                    if self.arrived.fill_gaps(part, time) == 0 {
                        continue;
                    }
                    for i in self.owners(part) {
                        let m = &mut self.open[i];
                        m.arrived_units = covered(&self.arrived, m.outcome.units);
                        if m.arrived_units == m.outcome.units.len() {
                            m.outcome.arrived = self.arrived.max_if_covered(m.outcome.units);
                        }
                    }
                }
                // Every arrival (duplicates too) belongs to the path.
                for i in self.owners(units) {
                    self.open[i].arrivals.push((time, units));
                }
                self.finish_ready(units, time);
            }
            Record::Delivered { units, .. } => {
                let units = self.units_ok(Side::Receiver, *units)?;
                for part in self.done.outside(units).0 {
                    if self.delivered.fill_gaps(part, time) == 0 {
                        continue;
                    }
                    for i in self.owners(part) {
                        let m = &mut self.open[i];
                        m.delivered_units = covered(&self.delivered, m.outcome.units);
                        if m.delivered_units == m.outcome.units.len() {
                            m.outcome.delivered = self.delivered.max_if_covered(m.outcome.units);
                        }
                    }
                }
                self.finish_ready(units, time);
            }
            Record::PacketReceived { .. } => self.rx_packets_received += 1,
            Record::PacketSent { .. } => self.rx_packets_sent += 1,
            _ => {}
        }
        Ok(())
    }

    fn sender_record(&mut self, rec: &Record) -> Result<(), MetricsError> {
        let time = self.check(Side::Sender, rec)?;
        match rec {
            Record::Submitted {
                message,
                stream,
                bytes,
                unordered,
                units,
                ..
            } => {
                let units = self.units_ok(Side::Sender, *units)?;
                if !self.owners(units).is_empty() || self.done.outside(units).1 > 0 {
                    return Err(MetricsError::OverlappingMessage { message: *message });
                }
                if self.cum.as_ref().is_some_and(|c| units.start < c.passed) {
                    return Err(MetricsError::StreamingUnsupported {
                        what: "the cumulative ACK latency of a message submitted below units already passed by the cumulative ACK point",
                    });
                }
                let app = match self.app_sends.front() {
                    Some((m, _)) if m == message => self.app_sends.pop_front(),
                    _ => self
                        .app_sends
                        .binary_search_by_key(message, |(m, _)| *m)
                        .ok()
                        .and_then(|i| self.app_sends.remove(i)),
                };
                let sent = match app.map(|(_, t)| t) {
                    Some(t) if t > time => {
                        return Err(MetricsError::AppSendAfterSubmit {
                            message: *message,
                            app: t,
                            submitted: time,
                        })
                    }
                    Some(t) => t,
                    None => time,
                };
                self.messages += 1;
                let (copies, arrivals) = self.spare_paths.pop().unwrap_or_default();
                let index = self.submitted;
                self.submitted += 1;
                let at = match self.open.back() {
                    Some(b) if b.outcome.units.start >= units.start => self
                        .open
                        .partition_point(|m| m.outcome.units.start < units.start),
                    _ => self.open.len(),
                };
                let m = Open {
                    index,
                    outcome: MessageOutcome::submitted(
                        *message, *stream, *bytes, *unordered, units, sent, time,
                    ),
                    acked_units: 0,
                    arrived_units: 0,
                    delivered_units: 0,
                    copies,
                    arrivals,
                };
                if at == self.open.len() {
                    self.open.push_back(m);
                } else {
                    self.open.insert(at, m);
                }
                self.peak_open = self.peak_open.max(self.open.len());
            }
            Record::PacketSent { data, .. } => {
                self.tx_packets += 1;
                if !data.is_empty() {
                    self.tx_data_packets += 1;
                    self.extend_window(time);
                }
                let mut carries_retransmission = false;
                let mut timer_waited: Option<Duration> = None;
                for piece in data {
                    let units = self.units_ok(Side::Sender, piece.units)?;
                    if piece.reason == TxReason::TimeoutRetransmit {
                        if let Some(w) = self.since_previous_tx(units, time) {
                            timer_waited = Some(timer_waited.map_or(w, |x| x.max(w)));
                        }
                    }
                    carries_retransmission |= self.on_piece(time, units, piece.bytes, piece.reason);
                }
                if let Some(w) = timer_waited {
                    self.rto.fired(time, w, &mut self.recovery);
                }
                if carries_retransmission {
                    self.tx_retransmission_packets += 1;
                }
            }
            Record::Acked { units, .. } => {
                let units = self.units_ok(Side::Sender, *units)?;
                for part in self.done.outside(units).0 {
                    if self.acked.fill_gaps(part, time) == 0 {
                        continue;
                    }
                    for i in self.owners(part) {
                        let m = &mut self.open[i];
                        m.acked_units = covered(&self.acked, m.outcome.units);
                        if m.acked_units == m.outcome.units.len() {
                            m.outcome.acked = self.acked.max_if_covered(m.outcome.units);
                        }
                    }
                }
                self.extend_window(time);
                self.advance_floor(time);
                self.finish_ready(units, time);
            }
            Record::Abandoned { units, .. } => {
                let units = self.units_ok(Side::Sender, *units)?;
                for part in self.done.outside(units).0 {
                    self.abandoned.fill_gaps(part, time);
                    for i in self.owners(part) {
                        self.open[i].outcome.abandoned = true;
                    }
                }
                self.advance_floor(time);
                self.finish_ready(units, time);
            }
            Record::Rto { rto, .. } => self.rto.set(time, *rto, &mut self.recovery),
            Record::RttSample { data, rtt, .. } => {
                self.recovery.rtt_samples += 1;
                self.recovery.rtt_sample_nanos = self
                    .recovery
                    .rtt_sample_nanos
                    .saturating_add(rtt.as_nanos());
                if *data {
                    self.recovery.data_rtt_samples += 1;
                }
            }
            Record::Thin { thin, .. } => {
                if self.thin_last.is_some_and(|t| t != *thin) {
                    self.recovery.thin_transitions += 1;
                }
                self.thin_last = Some(*thin);
                self.thin_seen = true;
                self.thin.change(time, *thin);
                self.thin.fold(self.window, false);
                // A copy's verdict is the last one at or before its
                // instant, later records of the same instant included.
                let verdict = Some(*thin);
                self.each_trail(|copies, _| {
                    for c in copies.iter_mut().rev().take_while(|c| c.0 == time) {
                        c.3 = verdict;
                    }
                });
            }
            Record::PacketReceived { .. } => self.tx_packets_received += 1,
            _ => {}
        }
        Ok(())
    }

    /// How long ago the first unit of `units` was last transmitted (as
    /// `FlowAnalysis` measures it); `None` if never sent or already final.
    fn since_previous_tx(&self, units: Units, time: Instant) -> Option<Duration> {
        let last = self.last_tx.get(units.start)?;
        Some(time.saturating_duration_since(last))
    }

    fn on_piece(&mut self, time: Instant, units: Units, bytes: u32, reason: TxReason) -> bool {
        *self.reasons.entry(reason).or_insert(0) += 1;
        self.payload_bytes_sent += u64::from(bytes);
        if reason == TxReason::RedundantBundle {
            self.recovery.redundant_bytes += u64::from(bytes);
        }
        let (parts, in_done) = self.done.outside(units);
        let mut new_units = 0;
        // Units of forgotten messages lie below the resend floor, which no
        // sender here transmits again; were they, they would count as sent
        // before, once.
        let mut before: Option<u32> = (in_done > 0).then_some(1);
        let mut spurious = true;
        for part in parts {
            new_units += self.first_tx.fill_gaps(part, time);
            self.last_tx.update(part, time, |v| *v = time);
            if let Some(b) = self.tx_count.update(part, 0, |c| *c = c.saturating_add(1)) {
                before = Some(before.map_or(b, |x| x.max(b)));
            }
            spurious &= self.arrived.max_if_covered(part).is_some();
            let thin = self.thin_last;
            for i in self.owners(part) {
                let m = &mut self.open[i];
                m.outcome.first_tx.get_or_insert(time);
                if m.copies.last().is_none_or(|c| c.0 != time || c.1 != units) {
                    m.copies.push((time, units, reason, thin));
                }
            }
        }
        // Units above everything sent so far and of no message are new too.
        self.high_unit = self.high_unit.max(units.end);
        self.unique_bytes_sent += pro_rata(bytes, units.len(), new_units);
        if !reason.is_retransmission() {
            return false;
        }
        let nth = before.unwrap_or(0).max(1).min(3);
        let row = self.reason_rows.entry((nth, reason)).or_insert((0, 0));
        row.0 += 1;
        if spurious {
            row.1 += 1;
        }
        reason != TxReason::RedundantBundle
    }

    fn extend_window(&mut self, t: Instant) {
        self.window = Some(match self.window {
            None => (t, t),
            Some((a, b)) => (a.min(t), b.max(t)),
        });
        self.thin.fold(self.window, false);
    }

    /// Calls `f` with the copies and arrivals of every message whose path
    /// is kept (open, recent, slowest).
    fn each_trail(&mut self, mut f: impl FnMut(&mut Vec<PathCopy>, &mut Vec<(Instant, Units)>)) {
        for m in self.open.iter_mut() {
            f(&mut m.copies, &mut m.arrivals);
        }
        self.each_final_trail(|t| f(&mut t.copies, &mut t.arrivals));
    }

    /// Calls `f` with every kept path of a final message (recent, slowest,
    /// waiting for the cumulative ACK point).
    fn each_final_trail(&mut self, mut f: impl FnMut(&mut MessageTrail)) {
        for (_, _, t) in self.recent.iter_mut() {
            f(t);
        }
        if let Some(c) = &mut self.cum {
            for (_, w) in c.waiting.iter_mut() {
                if let Some(t) = &mut w.trail {
                    f(t);
                }
            }
        }
        if let Some((_, w, b)) = &mut self.slowest {
            f(w);
            if let Some(b) = b {
                f(b);
            }
        }
    }

    /// Moves the resend floor over the units acknowledged or abandoned
    /// since, and forgets the final messages it passed.
    ///
    /// Why no unit below it is sent again: TCP (`tcp`) records a unit as
    /// acknowledged when a SACK block or the cumulative ACK covers it
    /// first; it never takes a SACK mark back and reads SACK blocks only
    /// above the ACK's cumulative point, and a receiver there keeps the
    /// data it reported, so the lowest unit not acknowledged is `snd_una`,
    /// below which nothing is sent (an RDB bundle or a retransmission
    /// starts at `snd_una`). SCTP (`proto`) records a chunk as acknowledged
    /// at or below the cumulative TSN ack or in a gap block (which never
    /// holds the chunk right after the cumulative TSN ack: the receiver
    /// would have acknowledged it cumulatively), drops SACKs older than its
    /// cumulative point, and never sends an abandoned chunk again. The one
    /// case that could send below the floor: a chunk gap-acked above an
    /// abandoned one and then taken back as reneged (its copy would count
    /// as sent before, once).
    fn advance_floor(&mut self, now: Instant) {
        let from = self.resend_floor;
        loop {
            let p = self.resend_floor;
            let next = self.acked.covered_end(p).max(self.abandoned.covered_end(p));
            if next == p {
                break;
            }
            self.resend_floor = next;
        }
        if self.resend_floor > from {
            self.finish_ready(Units::new(from, self.resend_floor), now);
        }
    }

    /// Finalizes the open messages overlapping `units` that became final:
    /// acknowledged, arrived and delivered, or abandoned and arrived, and
    /// below the resend floor.
    fn finish_ready(&mut self, units: Units, now: Instant) {
        let std::ops::Range {
            start: mut i,
            end: mut to,
        } = self.owners(units);
        let floor = self.resend_floor;
        // In unit order; a finalized message leaves `open`, so the next one
        // takes its index.
        while i < to {
            let m = &self.open[i];
            let n = m.outcome.units.len();
            let ready = m.outcome.units.end <= floor
                && m.arrived_units == n
                && (m.outcome.abandoned || (m.acked_units == n && m.delivered_units == n));
            if ready {
                self.finalize(i, Some(now));
                to -= 1;
            } else {
                i += 1;
            }
        }
    }

    /// Makes the open message at index `i` final; `now` is the time of the
    /// record that did (`None` at the end of the flow).
    fn finalize(&mut self, i: usize, now: Option<Instant>) {
        let taken = if i == 0 {
            self.open.pop_front()
        } else {
            self.open.remove(i)
        };
        let Some(mut m) = taken else {
            return;
        };
        let u = m.outcome.units;
        // Each map's facts of the message, taken out of it.
        m.outcome.first_tx = self.first_tx.take(u).min;
        m.outcome.retransmissions = self.tx_count.take(u).max.unwrap_or(0).saturating_sub(1);
        m.outcome.acked = self.acked.take(u).max_if_covered();
        m.outcome.arrived = self.arrived.take(u).max_if_covered();
        m.outcome.delivered = self.delivered.take(u).max_if_covered();
        m.outcome.abandoned = self.abandoned.take(u).max.is_some();
        self.last_tx.remove(u);
        self.done.insert(u);
        self.account(m, now);
    }

    /// Counts a final message.
    fn account(&mut self, m: Open, now: Option<Instant>) {
        let o = m.outcome;
        if o.abandoned {
            self.abandoned_messages += 1;
        }
        if o.delivered.is_some() {
            self.delivered_messages += 1;
        } else if !o.abandoned {
            self.undelivered_waited.push((m.index, o.sent));
        }
        if let (Some(tx), Some(a)) = (o.first_tx, o.arrived) {
            let d = a.saturating_duration_since(tx);
            self.min_one_way = Some(self.min_one_way.map_or(d, |x| x.min(d)));
        }
        for k in 0..self.sample_kinds.len() {
            let kind = self.sample_kinds[k];
            if let Some(raw) = raw_latency(&o, kind) {
                self.record(kind, m.index, o.retransmissions, raw);
            }
        }
        let trail = match self.slowest_kind {
            Some(kind) => Some(MessageTrail {
                outcome: o,
                latency: raw_latency(&o, kind).map(|l| corrected_now(self.owd, kind, l)),
                copies: m.copies,
                arrivals: m.arrivals,
            }),
            None => {
                self.recycle(m.copies, m.arrivals);
                None
            }
        };
        match &mut self.cum {
            Some(cum) => {
                // The trail waits too if the slowest message is chosen by
                // the cumulative latency: its value is not known yet.
                let by_cum = self.slowest_kind == Some(LatencyKind::AckCumulative);
                let (trail, at_once) = if by_cum { (trail, None) } else { (None, trail) };
                let w = CumWaiting {
                    index: m.index,
                    retransmissions: o.retransmissions,
                    first_tx: o.first_tx,
                    acked: o.acked,
                    abandoned: o.abandoned,
                    end: o.units.end,
                    trail,
                };
                let key = o.units.start;
                match cum.waiting.back() {
                    Some((k, _)) if *k >= key => {
                        match cum.waiting.binary_search_by_key(&key, |(k, _)| *k) {
                            Ok(i) => cum.waiting[i].1 = w,
                            Err(i) => cum.waiting.insert(i, (key, w)),
                        }
                    }
                    _ => cum.waiting.push_back((key, w)),
                }
                cum.peak = cum.peak.max(cum.waiting.len());
                if let Some(t) = at_once {
                    self.keep_trail(m.index, t, now);
                }
                self.pass_cumulative(now);
            }
            None => {
                if let Some(t) = trail {
                    self.keep_trail(m.index, t, now);
                }
            }
        }
    }

    /// Keeps a forgotten path's buffers, emptied, for a new message.
    fn recycle(&mut self, mut copies: Vec<PathCopy>, mut arrivals: Vec<(Instant, Units)>) {
        spare_path(&mut self.spare_paths, &mut copies, &mut arrivals);
    }

    /// Records one latency sample of `kind` (raw: one-way delay not removed).
    fn record(&mut self, kind: LatencyKind, index: u64, retransmissions: u32, raw: Duration) {
        let owd = self.owd;
        let min = self.min_one_way.unwrap_or(Duration::ZERO);
        let limit = self.sample_limit;
        let Some(s) = self.samples.get_mut(&kind) else {
            return;
        };
        // With `min-observed`, histogram values have the smallest
        // one-way delay so far removed (every delivery latency is at
        // least that): a later, smaller one shifts them up.
        let provisional = matches!(owd, OwdCorrection::MinObserved) && kind.owd_corrected();
        let index = u32::try_from(index).ok();
        if s.hist.is_none() && (limit.is_some_and(|l| s.exact.len() >= l) || index.is_none()) {
            let mut h = LatencyHistogram::new();
            s.base = if provisional { min } else { Duration::ZERO };
            for (_, r, v) in s.exact.drain(..) {
                let v = corrected_now(owd, kind, Duration::from_nanos(v));
                h.record(r, v.saturating_sub(s.base).as_nanos());
            }
            s.exact.shrink_to_fit();
            s.hist = Some(Box::new(h));
        }
        match &mut s.hist {
            Some(h) => {
                if provisional && min < s.base {
                    **h = h.shifted_up(s.base - min);
                    s.base = min;
                }
                let v = corrected_now(owd, kind, raw).saturating_sub(s.base);
                h.record(retransmissions, v.as_nanos());
            }
            None => {
                // A histogram was made above for an index beyond u32.
                let index = index.unwrap_or(u32::MAX);
                s.exact.push((index, retransmissions, raw.as_nanos()));
            }
        }
    }

    /// Passes the cumulative ACK point over every waiting message with no
    /// open message below it, in unit order: each gets its cumulative ACK
    /// latency (and, if it waited with its path, becomes a slowest-message
    /// candidate).
    fn pass_cumulative(&mut self, now: Option<Instant>) {
        loop {
            let lowest_open = self.open.front().map(|m| m.outcome.units.start);
            let Some(cum) = &mut self.cum else {
                return;
            };
            let Some(&(key, _)) = cum.waiting.front() else {
                return;
            };
            if lowest_open.is_some_and(|o| o < key) {
                return;
            }
            let Some((start, w)) = cum.waiting.pop_front() else {
                return;
            };
            debug_assert!(start >= cum.passed);
            cum.passed = cum.passed.max(w.end);
            let point = if w.abandoned && w.acked.is_none() {
                None
            } else {
                match w.acked {
                    Some(a) if !cum.blocked => {
                        let t = cum.front.map_or(a, |f| f.max(a));
                        cum.front = Some(t);
                        Some(t)
                    }
                    _ => {
                        cum.blocked = true;
                        None
                    }
                }
            };
            let latency = point
                .zip(w.first_tx)
                .map(|(end, tx)| end.saturating_duration_since(tx));
            if let Some(l) = latency {
                self.record(LatencyKind::AckCumulative, w.index, w.retransmissions, l);
            }
            if let Some(mut t) = w.trail {
                t.latency = latency;
                self.keep_trail(w.index, t, now);
            }
        }
    }

    /// A final message's path: the slowest so far if it is, and among the
    /// recent ones.
    fn keep_trail(&mut self, index: u64, trail: MessageTrail, now: Option<Instant>) {
        if let Some(l) = trail.latency {
            let better = match &self.slowest {
                None => true,
                Some((i, w, _)) => {
                    let b = w.latency.unwrap_or(Duration::ZERO);
                    l > b || (l == b && index < *i)
                }
            };
            if better {
                let blocked_by = self.blocker(index, &trail);
                self.slowest = Some((index, trail.clone(), blocked_by));
            }
        }
        self.finalized += 1;
        let floor = now.map(|now| self.arrival_floor(now));
        if floor.is_some_and(|f| trail.outcome.arrived.is_none_or(|x| x <= f)) {
            // `prune_recent` would forget it at once (the in-order case):
            // not stored.
            self.recycle(trail.copies, trail.arrivals);
        } else {
            self.recent.push_back((self.finalized, index, trail));
        }
        self.prune_recent(floor);
    }

    /// The earliest time a message open, waiting with its path for the
    /// cumulative ACK point, or yet to come can arrive, given the time
    /// `now` of the record being read (see [`FlowStream::prune_recent`]).
    fn arrival_floor(&self, now: Instant) -> Instant {
        // Final messages whose path waits for the cumulative ACK point are
        // kept (and look for their blocker) later, like open ones.
        let waiting = self
            .cum
            .iter()
            .flat_map(|c| c.waiting.iter().map(|(_, w)| w));
        self.open
            .iter()
            .filter_map(|m| m.outcome.arrived)
            .chain(waiting.filter_map(|w| w.trail.as_ref().and_then(|t| t.outcome.arrived)))
            .fold(now, Instant::min)
    }

    /// Forgets the kept paths that cannot be the message a later one waited
    /// for: those of messages more than [`RECENT_PATHS`] final messages ago,
    /// and, while records still come (`floor`: see
    /// [`FlowStream::arrival_floor`]), those that did not arrive after the
    /// earliest time a message open, waiting with its path for the
    /// cumulative ACK point, or yet to come can arrive (a blocker arrived
    /// after the blocked message: see [`FlowStream::blocker`]). An open
    /// message arrived at its `outcome.arrived` or arrives at the time of
    /// the record being read or later; so does every message submitted
    /// later.
    fn prune_recent(&mut self, floor: Option<Instant>) {
        let oldest = self.finalized.saturating_sub(RECENT_PATHS as u64);
        while self.recent.front().is_some_and(|(n, _, _)| *n <= oldest) {
            if let Some((_, _, t)) = self.recent.pop_front() {
                self.recycle(t.copies, t.arrivals);
            }
        }
        let Some(floor) = floor else {
            return;
        };
        let spare = &mut self.spare_paths;
        self.recent.retain_mut(|(_, _, t)| {
            let keep = t.outcome.arrived.is_some_and(|x| x > floor);
            if !keep {
                spare_path(spare, &mut t.copies, &mut t.arrivals);
            }
            keep
        });
    }

    /// The earlier message of the same stream that arrived last before
    /// `w` was delivered, if `w` arrived earlier than it was delivered
    /// (ties: the later submitted), among the open and recent messages.
    fn blocker(&self, index: u64, w: &MessageTrail) -> Option<MessageTrail> {
        let o = &w.outcome;
        let (Some(a), Some(d)) = (o.arrived, o.delivered) else {
            return None;
        };
        if d <= a || o.unordered {
            return None;
        }
        let open = self.open.iter().map(|m| {
            (
                m.index,
                MessageTrail {
                    outcome: m.outcome,
                    latency: None,
                    copies: m.copies.clone(),
                    arrivals: m.arrivals.clone(),
                },
            )
        });
        let recent = self.recent.iter().map(|(_, i, t)| (*i, t.clone()));
        let mut best: Option<(u64, MessageTrail)> = None;
        for (i, t) in recent.chain(open) {
            let m = &t.outcome;
            if i >= index || m.stream != o.stream || m.unordered {
                continue;
            }
            let Some(x) = m.arrived else { continue };
            if x <= a || x > d {
                continue;
            }
            let take = match &best {
                None => true,
                Some((bi, b)) => {
                    let bx = b.outcome.arrived;
                    Some(x) > bx || (Some(x) == bx && i > *bi)
                }
            };
            if take {
                best = Some((i, t));
            }
        }
        best.map(|(_, mut t)| {
            // A cumulative latency is not a function of the message alone:
            // a recent trail carries the value it was passed with (an
            // earlier message of the stream is below this one in unit
            // order, so it was passed first).
            if self.slowest_kind != Some(LatencyKind::AckCumulative) {
                t.latency = self.slowest_kind.and_then(|k| raw_latency(&t.outcome, k));
            }
            t
        })
    }

    /// Ends the flow: reads the held-back records, makes every open message
    /// final with what it has, and returns the digest (latency samples in
    /// submission order) and the slowest message's trail.
    pub fn finish(mut self) -> Result<(FlowDigest, Option<SlowestTrail>), MetricsError> {
        let [s, r] = std::mem::take(&mut self.held);
        self.merge(&s, &r)?;
        // Open messages become final in submission order.
        let mut rest: Vec<(u64, u64)> = self
            .open
            .iter()
            .map(|m| (m.index, m.outcome.units.start))
            .collect();
        rest.sort_unstable();
        for (_, start) in rest {
            let i = self.open.partition_point(|m| m.outcome.units.start < start);
            self.finalize(i, None);
        }
        self.thin.fold(self.window, true);
        if let (Some((from, to)), true) = (self.window, self.thin_seen) {
            self.recovery.thin_time = Some((self.thin.total((from, to)), to - from));
        }
        let owd = match self.owd {
            OwdCorrection::None => Duration::ZERO,
            OwdCorrection::Given(d) => d,
            _ => self.min_one_way.unwrap_or(Duration::ZERO),
        };
        let end = self.last[0].max(self.last[1]);
        self.undelivered_waited.sort_unstable();
        let undelivered = self
            .undelivered_waited
            .iter()
            .map(|(_, sent)| end.map_or(0, |e| e.saturating_duration_since(*sent).as_nanos()))
            .collect();
        let mut histograms = BTreeMap::new();
        let latencies = self
            .kinds
            .iter()
            .map(|k| {
                let Samples {
                    exact: mut v,
                    hist,
                    base,
                } = self.samples.remove(k).unwrap_or_default();
                if let Some(h) = hist.map(|h| *h) {
                    // `base` is 0 or the provisional one-way delay, which
                    // is at least the final one.
                    let h = if base > owd {
                        h.shifted_up(base - owd)
                    } else {
                        h
                    };
                    histograms.insert(*k, h);
                }
                v.sort_unstable_by_key(|(i, _, _)| *i);
                let fix = if k.owd_corrected() {
                    owd
                } else {
                    Duration::ZERO
                };
                (
                    *k,
                    v.into_iter()
                        .map(|(_, retransmissions, raw)| LatencySample {
                            retransmissions,
                            nanos: Duration::from_nanos(raw).saturating_sub(fix).as_nanos(),
                        })
                        .collect(),
                )
            })
            .collect();
        let reason_table = self
            .reason_rows
            .iter()
            .map(|((nth, reason), (count, spurious))| ReasonRow {
                retransmission: *nth,
                or_more: *nth == 3,
                reason: *reason,
                count: *count,
                spurious: Some(*spurious),
            })
            .collect();
        let mut spurious_by_reason = BTreeMap::new();
        for ((_, reason), (_, spurious)) in &self.reason_rows {
            if *spurious > 0 {
                *spurious_by_reason.entry(*reason).or_insert(0) += spurious;
            }
        }
        let digest = FlowDigest {
            messages: self.messages,
            abandoned: self.abandoned_messages,
            delivered: Some(self.delivered_messages),
            undelivered_waited_nanos: Some(undelivered),
            recovery: self.recovery,
            reasons: self.reasons.clone(),
            reason_table,
            spurious: Some(spurious_by_reason.values().sum()),
            spurious_by_reason: Some(spurious_by_reason),
            payload_bytes_sent: self.payload_bytes_sent,
            unique_bytes_sent: self.unique_bytes_sent,
            loss: (self.tx_packets > 0).then_some(LossCounts {
                method: LossMethod::SenderAndReceiver,
                sent: self.tx_packets,
                counted: self.rx_packets_received,
            }),
            latencies,
            histograms,
        };
        let thin_tracked = self.thin_seen;
        let min_one_way = self.min_one_way.unwrap_or(Duration::ZERO);
        let slowest = self.slowest.take().map(|(_, mut message, blocked_by)| {
            let fix = |t: &mut MessageTrail| {
                if let (Some(l), Some(k)) = (t.latency, self.slowest_kind) {
                    if k.owd_corrected() && !matches!(self.owd, OwdCorrection::Given(_)) {
                        t.latency = Some(l.saturating_sub(owd));
                    }
                }
            };
            fix(&mut message);
            let blocked_by = blocked_by.map(|mut b| {
                b.latency = b.latency.map(|l| {
                    if self.slowest_kind.is_some_and(LatencyKind::owd_corrected) {
                        l.saturating_sub(owd)
                    } else {
                        l
                    }
                });
                b
            });
            SlowestTrail {
                kind: self.slowest_kind.unwrap_or(LatencyKind::Application),
                message,
                blocked_by,
                min_one_way,
                thin_tracked,
            }
        });
        Ok((digest, slowest))
    }
}

/// The latency with a constant one-way delay removed where it is known
/// while the flow runs (`Given`); `MinObserved` is removed at the end (the
/// order of latencies does not change: every delivery latency is at least
/// the smallest one-way sample, so none is cut at zero).
fn corrected_now(owd: OwdCorrection, kind: LatencyKind, raw: Duration) -> Duration {
    match owd {
        OwdCorrection::Given(d) if kind.owd_corrected() => raw.saturating_sub(d),
        _ => raw,
    }
}

/// Moves a forgotten path's buffers, emptied, to `spare` (if not full).
fn spare_path(
    spare: &mut Vec<PathBuffers>,
    copies: &mut Vec<PathCopy>,
    arrivals: &mut Vec<(Instant, Units)>,
) {
    if spare.len() < SPARE_PATHS {
        let (mut c, mut a) = (std::mem::take(copies), std::mem::take(arrivals));
        c.clear();
        a.clear();
        spare.push((c, a));
    }
}

/// Units of `r` that have a value in `map`.
fn covered<V: Copy>(map: &RangeMap<V>, r: Units) -> u64 {
    if map.exactly(r).is_some() {
        return r.len();
    }
    map.overlapping(r).map(|(u, _)| u.len()).sum()
}

/// A message's latency of `kind` before any one-way delay is removed.
fn raw_latency(m: &MessageOutcome, kind: LatencyKind) -> Option<Duration> {
    let (end, start) = match kind {
        LatencyKind::AckFromFirstTx => (m.acked?, m.first_tx?),
        LatencyKind::AckFromSend => (m.acked?, m.sent),
        // Not a function of the message alone: see `FlowStream::pass_cumulative`.
        LatencyKind::AckCumulative => return None,
        LatencyKind::Transport => (m.arrived?, m.sent),
        LatencyKind::Application => (m.delivered?, m.sent),
        LatencyKind::TransportFromFirstTx => (m.arrived?, m.first_tx?),
        LatencyKind::ApplicationFromFirstTx => (m.delivered?, m.first_tx?),
    };
    Some(end.saturating_duration_since(start))
}
