//! A sender-side flow analysis in bounded memory, for long real runs.
//!
//! [`FlowAnalysis`](crate::FlowAnalysis) keeps every message and every
//! retransmitted piece of a flow until the end, which is right for a
//! simulated run and wrong for a sender that runs for hours. A
//! [`StreamingFlow`] reads the same sender records incrementally (feed it
//! the records as they are taken from the association) and keeps:
//!
//! * per *open* message (submitted, not yet fully acknowledged or abandoned):
//!   its unit range and, per unit, the transmission count and whether it was
//!   acknowledged — about 40 bytes plus 5 bytes per unit (SCTP: one unit per
//!   DATA chunk), dropped the moment the message is final;
//! * the last [`SPURIOUS_WINDOW`] retransmitted pieces, to match duplicate
//!   reports against (the estimate of
//!   [`FlowAnalysis::spurious`](crate::FlowAnalysis::spurious) without a
//!   receiver trace; a duplicate report older than the window's pieces is
//!   not matched);
//! * fixed-size counters: pieces per reason, per (retransmission number,
//!   reason), payload and unique bytes (tohd), packets (eq. 5.2 loss), RTT
//!   samples, the thin verdict's time.
//!
//! A message becomes *final* when every unit of it was acknowledged, or when
//! a unit was abandoned; [`StreamingFlow::drain_finished`] hands out its
//! outcome (the transmission count no longer changes: a sender does not
//! transmit acknowledged data again). The outcome's `retransmissions` is
//! defined as in [`MessageOutcome`](crate::MessageOutcome). Given the same
//! records, every counter equals the one `FlowAnalysis` computes from the
//! sender trace alone (tested), except the spurious estimate beyond the
//! window and the transmission count of data sent again after it was
//! acknowledged (SCTP renege, not done by this stack). The measured RTO
//! (`Summary::rto_measured_*`) needs when each timed-out unit was last
//! sent: kept per unit while its message is open (a timed-out unit is
//! unacknowledged, so its message is open).
//!
//! Designed for SCTP (units are TSNs): a message of `n` units costs `13·n`
//! bytes while open; TCP byte units would cost per byte (the simulator's
//! joint analysis, [`crate::FlowStream`], keeps unit ranges instead).

use std::collections::{BTreeMap, VecDeque};

use thinstream_base::trace::{Record, TxReason, Units};
use thinstream_base::{Duration, Instant};

use crate::error::{MetricsError, Side};
use crate::flow::{units_ok, InOrder, RecoveryCounts, RtoClock};
use crate::summary::{LatencyMs, RetransmissionRow, Summary};
use crate::LatencyKind;

/// Time classified thin, computed as the data window grows (what the
/// whole-trace analysis computes from every verdict change at the end):
/// a change is folded in once the window reaches it (its time clamped into
/// the window cannot move any more); the others wait.
#[derive(Clone, Debug, Default)]
pub(crate) struct ThinClock {
    pending: Vec<(Instant, bool)>,
    state: bool,
    since: Option<Instant>,
    ns: u64,
}

impl ThinClock {
    pub(crate) fn change(&mut self, at: Instant, thin: bool) {
        self.pending.push((at, thin));
    }

    /// Folds the changes inside `window` so far, or every change (`all`,
    /// at the end of the flow).
    pub(crate) fn fold(&mut self, window: Option<(Instant, Instant)>, all: bool) {
        let Some((from, to)) = window else {
            return;
        };
        if self.pending.is_empty() {
            return;
        }
        let keep = if all {
            0
        } else {
            self.pending.iter().filter(|(c, _)| *c > to).count()
        };
        let n = self.pending.len() - keep;
        if n == 0 {
            return;
        }
        for i in 0..n {
            let (c, thin) = self.pending[i];
            let at = c.clamp(from, to);
            if self.state {
                if let Some(s) = self.since {
                    self.ns += at.saturating_duration_since(s).as_nanos();
                }
            }
            self.state = thin;
            self.since = Some(at);
        }
        self.pending.drain(..n);
    }

    /// Thin time up to the end of `window`.
    pub(crate) fn total(&self, (from, to): (Instant, Instant)) -> Duration {
        let mut ns = self.ns;
        if self.state {
            if let Some(s) = self.since {
                ns += to.saturating_duration_since(s.clamp(from, to)).as_nanos();
            }
        }
        Duration::from_nanos(ns)
    }
}

/// Retransmitted pieces kept for matching duplicate reports.
pub const SPURIOUS_WINDOW: usize = 16_384;

/// What happened to one message, once final.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FinishedMessage {
    pub message: u64,
    pub stream: u16,
    pub bytes: u32,
    pub submitted: Instant,
    pub first_tx: Option<Instant>,
    /// Max over its units of (transmissions − 1), every copy counted.
    pub retransmissions: u32,
    /// When its last unit was acknowledged (`None` if not every unit was).
    pub acked: Option<Instant>,
    pub abandoned: bool,
}

#[derive(Clone, Debug)]
struct Open {
    stream: u16,
    bytes: u32,
    units: Units,
    submitted: Instant,
    first_tx: Option<Instant>,
    tx: Vec<u32>,
    /// When each unit was last transmitted.
    last_tx: Vec<Option<Instant>>,
    acked: Vec<bool>,
    unacked: u64,
    last_ack: Option<Instant>,
    abandoned: bool,
}

#[derive(Clone, Copy, Debug)]
struct Piece {
    time: Instant,
    units: Units,
    matched: bool,
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct StreamingFlow {
    open: BTreeMap<u64, Open>,
    /// First unit of each open message → its id.
    by_unit: BTreeMap<u64, u64>,
    finished: Vec<FinishedMessage>,
    messages: u64,
    abandoned: u64,
    reasons: BTreeMap<TxReason, u64>,
    /// (retransmission number capped at 3, reason) → pieces.
    causes: BTreeMap<(u32, TxReason), u64>,
    pieces: VecDeque<Piece>,
    spurious: u64,
    payload_bytes_sent: u64,
    unique_bytes_sent: u64,
    /// One past the highest unit ever sent (units of no open message above
    /// it are new).
    high_unit: u64,
    packets_sent: u64,
    data_packets_sent: u64,
    retransmission_packets: u64,
    packets_received: u64,
    redundant_bytes: u64,
    rtt_samples: u64,
    rtt_sample_nanos: u64,
    /// `Rto` records and the measured RTO (the `rto_*` fields of
    /// `RecoveryCounts`; it needs when each timed-out unit was last sent).
    rto_counts: RecoveryCounts,
    rto: RtoClock,
    data_rtt_samples: u64,
    thin_transitions: u64,
    last_thin: Option<bool>,
    thin: ThinClock,
    window: Option<(Instant, Instant)>,
    order: InOrder,
}

impl Default for StreamingFlow {
    fn default() -> Self {
        StreamingFlow::new()
    }
}

impl StreamingFlow {
    pub fn new() -> StreamingFlow {
        StreamingFlow {
            open: BTreeMap::new(),
            by_unit: BTreeMap::new(),
            finished: Vec::new(),
            messages: 0,
            abandoned: 0,
            reasons: TxReason::ALL.iter().map(|r| (*r, 0)).collect(),
            causes: BTreeMap::new(),
            pieces: VecDeque::new(),
            spurious: 0,
            payload_bytes_sent: 0,
            unique_bytes_sent: 0,
            high_unit: 0,
            packets_sent: 0,
            data_packets_sent: 0,
            retransmission_packets: 0,
            packets_received: 0,
            redundant_bytes: 0,
            rtt_samples: 0,
            rtt_sample_nanos: 0,
            rto_counts: RecoveryCounts::default(),
            rto: RtoClock::default(),
            data_rtt_samples: 0,
            thin_transitions: 0,
            last_thin: None,
            thin: ThinClock::default(),
            window: None,
            order: InOrder::default(),
        }
    }

    /// Reads one sender record (records must come in time order).
    pub fn push(&mut self, rec: &Record) -> Result<(), MetricsError> {
        let index = self.order.next(Side::Sender, rec)?;
        let time = rec.time();
        let ok = |u: Units| units_ok(u, Side::Sender, index);
        match rec {
            Record::Submitted {
                message,
                stream,
                bytes,
                units,
                ..
            } => {
                let units = ok(*units)?;
                if self.open.contains_key(message) {
                    return Err(MetricsError::DuplicateMessage { message: *message });
                }
                if self.owner_range(units).next().is_some() {
                    return Err(MetricsError::OverlappingMessage { message: *message });
                }
                let n = units.len() as usize;
                self.messages += 1;
                self.by_unit.insert(units.start, *message);
                self.open.insert(
                    *message,
                    Open {
                        stream: *stream,
                        bytes: *bytes,
                        units,
                        submitted: time,
                        first_tx: None,
                        tx: vec![0; n],
                        last_tx: vec![None; n],
                        acked: vec![false; n],
                        unacked: units.len(),
                        last_ack: None,
                        abandoned: false,
                    },
                );
            }
            Record::PacketSent { data, .. } => {
                self.packets_sent += 1;
                if !data.is_empty() {
                    self.data_packets_sent += 1;
                    self.extend_window(time);
                }
                let mut rtx = false;
                let mut timer_waited: Option<Duration> = None;
                for p in data {
                    let units = ok(p.units)?;
                    if p.reason == TxReason::TimeoutRetransmit {
                        if let Some(w) = self.since_previous_tx(units.start, time) {
                            timer_waited = Some(timer_waited.map_or(w, |x| x.max(w)));
                        }
                    }
                    rtx |= self.on_piece(time, units, p.bytes, p.reason);
                }
                if let Some(w) = timer_waited {
                    self.rto.fired(time, w, &mut self.rto_counts);
                }
                if rtx {
                    self.retransmission_packets += 1;
                }
            }
            Record::Acked { units, .. } => {
                let units = ok(*units)?;
                self.extend_window(time);
                for id in self.owner_range(units).collect::<Vec<_>>() {
                    let Some(m) = self.open.get_mut(&id) else {
                        continue;
                    };
                    let lo = units.start.max(m.units.start);
                    let hi = units.end.min(m.units.end);
                    for u in lo..hi {
                        let i = (u - m.units.start) as usize;
                        if !m.acked[i] {
                            m.acked[i] = true;
                            m.unacked -= 1;
                            m.last_ack = Some(time);
                        }
                    }
                    if m.unacked == 0 {
                        self.finish_one(id);
                    }
                }
            }
            Record::Abandoned { units, .. } => {
                let units = ok(*units)?;
                for id in self.owner_range(units).collect::<Vec<_>>() {
                    if let Some(m) = self.open.get_mut(&id) {
                        m.abandoned = true;
                    }
                    self.finish_one(id);
                }
            }
            Record::RttSample { data, rtt, .. } => {
                self.rtt_samples += 1;
                self.rtt_sample_nanos = self.rtt_sample_nanos.saturating_add(rtt.as_nanos());
                if *data {
                    self.data_rtt_samples += 1;
                }
            }
            Record::Rto { rto, .. } => self.rto.set(time, *rto, &mut self.rto_counts),
            Record::Thin { thin, .. } => {
                if self.last_thin.is_some_and(|t| t != *thin) {
                    self.thin_transitions += 1;
                }
                self.last_thin = Some(*thin);
                self.thin.change(time, *thin);
            }
            Record::DuplicateReported { units, .. } => {
                let unit = ok(*units)?.start;
                // The most recent unmatched piece sent before the report
                // that contains the unit.
                if let Some(p) = self
                    .pieces
                    .iter_mut()
                    .rev()
                    .find(|p| !p.matched && p.units.contains(unit) && p.time <= time)
                {
                    p.matched = true;
                    self.spurious += 1;
                }
            }
            Record::PacketReceived { .. } => self.packets_received += 1,
            _ => {}
        }
        Ok(())
    }

    /// How long ago `unit` was last transmitted, if its message is open and
    /// it was sent.
    fn since_previous_tx(&self, unit: u64, time: Instant) -> Option<Duration> {
        let id = self.owner_range(Units::one(unit)).next()?;
        let m = self.open.get(&id)?;
        let last = m.last_tx[(unit - m.units.start) as usize]?;
        Some(time.saturating_duration_since(last))
    }

    /// Ids of open messages whose units overlap `units`.
    fn owner_range(&self, units: Units) -> impl Iterator<Item = u64> + '_ {
        let first = self
            .by_unit
            .range(..=units.start)
            .next_back()
            .map(|(s, _)| *s)
            .unwrap_or(units.start);
        self.by_unit
            .range(first..units.end)
            .map(|(_, id)| *id)
            .filter(move |id| {
                self.open
                    .get(id)
                    .is_some_and(|m| m.units.start < units.end && units.start < m.units.end)
            })
    }

    fn finish_one(&mut self, id: u64) {
        let Some(m) = self.open.remove(&id) else {
            return;
        };
        self.by_unit.remove(&m.units.start);
        if m.abandoned {
            self.abandoned += 1;
        }
        self.finished.push(FinishedMessage {
            message: id,
            stream: m.stream,
            bytes: m.bytes,
            submitted: m.submitted,
            first_tx: m.first_tx,
            retransmissions: m.tx.iter().copied().max().unwrap_or(0).saturating_sub(1),
            acked: if m.unacked == 0 { m.last_ack } else { None },
            abandoned: m.abandoned,
        });
    }

    fn extend_window(&mut self, t: Instant) {
        let (from, _) = *self.window.get_or_insert((t, t));
        self.window = Some((from, t));
        self.thin.fold(self.window, false);
    }

    fn on_piece(&mut self, time: Instant, units: Units, bytes: u32, reason: TxReason) -> bool {
        *self.reasons.entry(reason).or_insert(0) += 1;
        self.payload_bytes_sent += u64::from(bytes);
        if reason == TxReason::RedundantBundle {
            self.redundant_bytes += u64::from(bytes);
        }
        let mut new_units = 0u64;
        let mut before = 0u32;
        let mut owned = 0u64;
        for id in self.owner_range(units).collect::<Vec<_>>() {
            let Some(m) = self.open.get_mut(&id) else {
                continue;
            };
            m.first_tx.get_or_insert(time);
            let lo = units.start.max(m.units.start);
            let hi = units.end.min(m.units.end);
            for u in lo..hi {
                m.last_tx[(u - m.units.start) as usize] = Some(time);
                let c = &mut m.tx[(u - m.units.start) as usize];
                before = before.max(*c);
                if *c == 0 {
                    new_units += 1;
                }
                *c = c.saturating_add(1);
                owned += 1;
            }
        }
        // Units of no open message: new if never sent before; otherwise
        // they belonged to a message already final (sent at least once).
        if owned < units.len() {
            let fresh_from = units.start.max(self.high_unit);
            if units.end > fresh_from {
                new_units += units.end - fresh_from;
            }
            if units.start < self.high_unit {
                before = before.max(1);
            }
        }
        self.high_unit = self.high_unit.max(units.end);
        self.unique_bytes_sent += crate::flow::pro_rata(bytes, units.len(), new_units);
        if !reason.is_retransmission() {
            return false;
        }
        *self.causes.entry((before.clamp(1, 3), reason)).or_insert(0) += 1;
        if self.pieces.len() == SPURIOUS_WINDOW {
            self.pieces.pop_front();
        }
        self.pieces.push_back(Piece {
            time,
            units,
            matched: false,
        });
        reason != TxReason::RedundantBundle
    }

    /// Outcomes of the messages that became final since the last call.
    pub fn drain_finished(&mut self) -> std::vec::Drain<'_, FinishedMessage> {
        self.finished.drain(..)
    }

    /// Ends the flow: every message still open becomes final (not
    /// acknowledged), and the verdict changes are folded in.
    pub fn finish(&mut self) {
        let ids: Vec<u64> = self.open.keys().copied().collect();
        for id in ids {
            self.finish_one(id);
        }
        self.thin.fold(self.window, true);
    }

    /// Messages submitted and not yet final.
    pub fn open_messages(&self) -> usize {
        self.open.len()
    }

    /// The lowest id of a message not yet final.
    pub fn lowest_open(&self) -> Option<u64> {
        self.open.keys().next().copied()
    }

    /// Open messages and their current retransmission count.
    pub fn open_retransmissions(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.open.iter().map(|(id, m)| {
            (
                *id,
                m.tx.iter().copied().max().unwrap_or(0).saturating_sub(1),
            )
        })
    }

    /// Retransmitted pieces currently kept for the spurious estimate.
    pub fn kept_pieces(&self) -> usize {
        self.pieces.len()
    }

    pub fn messages(&self) -> u64 {
        self.messages
    }

    pub fn abandoned(&self) -> u64 {
        self.abandoned
    }

    /// Data pieces per reason, every reason present (as [`crate::FlowAnalysis::reasons`]).
    pub fn reasons(&self) -> &BTreeMap<TxReason, u64> {
        &self.reasons
    }

    /// Retransmitted pieces by (retransmission number, 3 = "3 or more";
    /// reason), as [`crate::FlowAnalysis::reason_table`] counts them.
    pub fn reason_table(&self) -> &BTreeMap<(u32, TxReason), u64> {
        &self.causes
    }

    /// Duplicate reports matched to retransmitted pieces.
    pub fn spurious_estimate(&self) -> u64 {
        self.spurious
    }

    pub fn payload_bytes_sent(&self) -> u64 {
        self.payload_bytes_sent
    }

    pub fn unique_bytes_sent(&self) -> u64 {
        self.unique_bytes_sent
    }

    /// Thin time and window so far (as [`crate::RecoveryCounts::thin_time`];
    /// exact after [`Self::finish`]).
    pub fn thin_time(&self) -> Option<(Duration, Duration)> {
        self.last_thin?;
        let (from, to) = self.window?;
        Some((self.thin.total((from, to)), to - from))
    }

    /// The summary fields this sender-side analysis knows, in the shape of
    /// [`Summary`] (what `thinstream run` stores per variant). The caller
    /// supplies what only the receiver knows: the latency distribution of
    /// `kind`, its rows by retransmission count and the delivered count
    /// (`None` where unknown). Fields that need the receiver's trace
    /// (`spurious_by_reason`, `spurious_excluding_redundant`, `t3_spurious`)
    /// are `None`; `spurious` is the duplicate-report estimate and
    /// `loss_rate` is eq. 5.2 (sender only), as for a sender-only
    /// [`crate::FlowAnalysis`].
    pub fn summary(
        &self,
        kind: LatencyKind,
        latency_ms: Option<LatencyMs>,
        by_retransmissions: Vec<RetransmissionRow>,
        delivered: Option<u64>,
    ) -> Summary {
        let r = &self.rto_counts;
        let omega = self.payload_bytes_sent;
        let unique = self.unique_bytes_sent.min(omega);
        let repeated = omega - unique;
        let redundant = self.redundant_bytes;
        let part = |b: u64| (omega > 0).then(|| b as f64 / omega as f64);
        Summary {
            messages: self.messages,
            delivered,
            abandoned: self.abandoned,
            latency: kind,
            latency_ms,
            by_retransmissions,
            reasons: self
                .reasons
                .iter()
                .map(|(r, c)| (r.name().to_string(), *c))
                .collect(),
            spurious: Some(self.spurious),
            tohd: part(repeated),
            loss_rate: (self.data_packets_sent > 0)
                .then(|| self.retransmission_packets as f64 / self.data_packets_sent as f64),
            spurious_by_reason: None,
            spurious_excluding_redundant: None,
            t3_expiries: self
                .reasons
                .get(&TxReason::TimeoutRetransmit)
                .copied()
                .unwrap_or(0),
            t3_spurious: None,
            redundant_bytes: redundant,
            tohd_redundant: part(redundant.min(repeated)),
            tohd_retransmissions: part(repeated - redundant.min(repeated)),
            rtt_samples: self.rtt_samples,
            data_rtt_samples: self.data_rtt_samples,
            thin_share: self.thin_time().and_then(|(t, w)| {
                (!w.is_zero()).then(|| t.as_nanos() as f64 / w.as_nanos() as f64)
            }),
            thin_transitions: self.thin_transitions,
            // Messages neither delivered nor given up; how long they waited
            // is not kept by this streaming analysis.
            undelivered: delivered.map(|d| {
                self.messages
                    .saturating_sub(d)
                    .saturating_sub(self.abandoned)
            }),
            undelivered_waited_max_ms: None,
            undelivered_waited_p50_ms: None,
            rtt_sample_mean_ms: (self.rtt_samples > 0)
                .then(|| self.rtt_sample_nanos as f64 / self.rtt_samples as f64 / 1e6),
            rto_mean_ms: (r.rto_updates > 0)
                .then(|| r.rto_nanos as f64 / r.rto_updates as f64 / 1e6),
            rto_measured_count: r.rto_measured,
            rto_measured_mean_ms: (r.rto_measured > 0)
                .then(|| r.rto_measured_nanos as f64 / r.rto_measured as f64 / 1e6),
            rto_measured_max_ms: (r.rto_measured > 0)
                .then(|| r.rto_measured_max_nanos as f64 / 1e6),
            rto_at_expiry_mean_ms: (r.rto_in_force > 0)
                .then(|| r.rto_in_force_nanos as f64 / r.rto_in_force as f64 / 1e6),
        }
    }
}
