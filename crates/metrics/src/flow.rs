//! Per-flow analysis: joins the sender's and the receiver's trace records on
//! units and derives per-message outcomes and per-flow counters.
//!
//! ## Inputs
//!
//! * `sender`: the records of the endpoint that sent the flow's data, in
//!   time order. Used: `Submitted`, `PacketSent` (its data pieces), `Acked`,
//!   `Abandoned`, `PacketReceived`.
//! * `receiver` (optional; absent in a real run where only the local side is
//!   traced): the records of the peer, in time order. Used: `Arrived`,
//!   `Delivered`, `PacketReceived`, `PacketSent`.
//!
//! Each side only reads the record kinds that belong to its role, so the
//! record stream of a bidirectional endpoint can be passed as the sender of
//! its outgoing flow and as the receiver of its incoming flow (that is how
//! [`crate::response_times`] pairs requests and echoes).
//!
//! ## "Send time" of a message
//!
//! `Submitted.time` is when the transport *accepted* the message. If the
//! transport pushed back (SCTP flow control, a full send buffer), the
//! application generated the message earlier and the wait is part of the
//! latency a user sees. The driver that knows the generation times passes
//! them as [`AppSend`] records; every "from send" latency then starts there.
//! Without them the send time is `Submitted.time`.
//!
//! ## Message outcomes (all "first time" events, per message)
//!
//! * `first_tx`: earliest transmission of any of its units.
//! * `retransmissions`: max over its units of (transmissions − 1), counting
//!   every later copy whatever its [`TxReason`] (bundles and redundant copies
//!   included: they are the copies that may have recovered the data).
//! * `acked`, `arrived`, `delivered`: the time by which *all* its units had
//!   been acknowledged / had arrived at the receiving transport / had been
//!   handed to the receiving application — the maximum over its units of the
//!   first such time. For TCP, where a `Delivered` record covers an in-order
//!   advance of the byte stream, this is the record covering the message's
//!   last byte (earlier bytes cannot be delivered later in order); for a
//!   cumulative ACK likewise.
//!
//! ## One-way delay (002 §5.1.9)
//!
//! Delivery latencies have the one-way delay removed so that data delivered
//! within one OWD counts as 0 ms. The OWD estimate is taken once per flow
//! from the transport-layer samples `Δt_i = arrived_i − first_tx_i` (per
//! message, in submission order) and subtracted from both transport- and
//! application-layer latencies (saturating at zero), see [`OwdCorrection`].
//! ACK latencies are never corrected (002 §5.1.6 reports them raw).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thinstream_base::trace::{Record, TxReason, Units};
use thinstream_base::{Duration, Instant};

use crate::error::{MetricsError, Side};
use crate::ranges::RangeMap;
use crate::stats::{Cdf, LatencyStats};

/// The time the application generated message `message` (see module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppSend {
    pub message: u64,
    pub time: Instant,
}

/// A duplicate report received by the sender (an SCTP SACK's duplicate TSN,
/// a TCP D-SACK block): the receiver got `units` again. Only used to
/// estimate spurious retransmissions when no receiver trace exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DuplicateReport {
    pub time: Instant,
    pub units: Units,
}

/// How the one-way delay is removed from delivery latencies (002 §5.1.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OwdCorrection {
    /// Report raw latencies.
    None,
    /// Subtract a known OWD (e.g. the configured link delay).
    Given(Duration),
    /// Subtract the smallest `Δt` of the flow ("we assume that the lowest
    /// recorded difference Δt_i represents the OWD").
    MinObserved,
    /// Eq. 5.3: `Δt_{1,min}` over the first `window` messages, `Δt_{2,min}`
    /// over the last `window`, drift `τ = Δt_{2,min} − Δt_{1,min}` applied
    /// linearly in time between the first and the last sample (002 uses
    /// `window = 1000` packets). For traces whose two clocks drift apart.
    MinObservedDriftCorrected { window: usize },
}

/// Which latency of a message a statistic is about.
/// Serialized by [`LatencyKind::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyKind {
    /// 002 §5.1.6 "ACK latency": first transmission → all units acknowledged.
    #[serde(rename = "ack")]
    AckFromFirstTx,
    /// Application send → all units acknowledged.
    AckFromSend,
    /// First transmission → this message and every message before it (in
    /// unit order) acknowledged: the time the cumulative acknowledgement
    /// passed the message, a SACK or gap report not counting. 002's
    /// analysis tool measured ACK latency this way from sender-side dumps
    /// (002 §3.4, Table 3.1: "the delay before the sent data is
    /// cumulatively ACKed"; §5.1.6, Appendix B `analyzeTCP`). The streaming
    /// analysis computes it with a running cumulative ACK point
    /// (`FlowStream`).
    AckCumulative,
    /// Transport-layer delivery latency: application send → all units
    /// arrived (first copy of each), minus OWD.
    Transport,
    /// Application-layer delivery latency: application send → delivered to
    /// the receiving application (in-order constraint included), minus OWD.
    Application,
    /// As `Transport`, but from the first transmission (002's own definition).
    TransportFromFirstTx,
    /// As `Application`, but from the first transmission (002's own definition).
    ApplicationFromFirstTx,
}

impl LatencyKind {
    pub const ALL: [LatencyKind; 7] = [
        LatencyKind::AckFromFirstTx,
        LatencyKind::AckFromSend,
        LatencyKind::AckCumulative,
        LatencyKind::Transport,
        LatencyKind::Application,
        LatencyKind::TransportFromFirstTx,
        LatencyKind::ApplicationFromFirstTx,
    ];

    /// Stable short name for tables and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            LatencyKind::AckFromFirstTx => "ack",
            LatencyKind::AckFromSend => "ack-from-send",
            LatencyKind::AckCumulative => "ack-cumulative",
            LatencyKind::Transport => "transport",
            LatencyKind::Application => "application",
            LatencyKind::TransportFromFirstTx => "transport-from-first-tx",
            LatencyKind::ApplicationFromFirstTx => "application-from-first-tx",
        }
    }

    pub(crate) const fn owd_corrected(self) -> bool {
        !matches!(
            self,
            LatencyKind::AckFromFirstTx | LatencyKind::AckFromSend | LatencyKind::AckCumulative
        )
    }
}

/// Analysis settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalysisOptions {
    pub owd: OwdCorrection,
    /// The latency that [`crate::Summary`] reports in `latency_ms` and
    /// `by_retransmissions`.
    pub summary_latency: LatencyKind,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        AnalysisOptions {
            owd: OwdCorrection::MinObserved,
            summary_latency: LatencyKind::Application,
        }
    }
}

/// Everything a flow analysis can take.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowInput<'a> {
    pub sender: &'a [Record],
    pub receiver: Option<&'a [Record]>,
    pub app_sends: Option<&'a [AppSend]>,
    pub duplicate_reports: Option<&'a [DuplicateReport]>,
}

/// What happened to one application message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageOutcome {
    pub message: u64,
    pub stream: u16,
    pub bytes: u32,
    pub unordered: bool,
    pub units: Units,
    /// Application send time (`Submitted.time` unless an [`AppSend`] says earlier).
    pub sent: Instant,
    pub submitted: Instant,
    pub first_tx: Option<Instant>,
    pub retransmissions: u32,
    pub acked: Option<Instant>,
    pub arrived: Option<Instant>,
    pub delivered: Option<Instant>,
    /// Some unit of the message was abandoned (partial reliability).
    pub abandoned: bool,
}

impl MessageOutcome {
    /// A message just submitted (`Submitted` record): nothing sent,
    /// acknowledged, arrived or delivered yet.
    pub(crate) fn submitted(
        message: u64,
        stream: u16,
        bytes: u32,
        unordered: bool,
        units: Units,
        sent: Instant,
        submitted: Instant,
    ) -> MessageOutcome {
        MessageOutcome {
            message,
            stream,
            bytes,
            unordered,
            units,
            sent,
            submitted,
            first_tx: None,
            retransmissions: 0,
            acked: None,
            arrived: None,
            delivered: None,
            abandoned: false,
        }
    }
}

/// One retransmitted data piece (a `PacketSent` piece whose reason is not
/// [`TxReason::New`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetransmittedPiece {
    pub time: Instant,
    pub units: Units,
    pub bytes: u32,
    pub reason: TxReason,
    /// Which retransmission of its units this is: 1 + the most times any of
    /// its units had been sent after the first transmission, at that moment.
    pub nth: u32,
    /// Whether the receiver already had all its units when it was sent;
    /// `None` when that cannot be known (no receiver trace).
    pub spurious: Option<bool>,
}

/// Definition 1 or 2 of 002 §5.1.7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossMethod {
    /// Eq. 5.1: (sent packets − received packets) / sent packets.
    SenderAndReceiver,
    /// Eq. 5.2: packets carrying a retransmission / data packets sent.
    SenderOnly,
}

/// A loss-rate estimate and the counts it came from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossEstimate {
    pub method: LossMethod,
    pub rate: f64,
    /// Eq. 5.1: packets sent by the sender; eq. 5.2: data packets sent.
    pub sent: u64,
    /// Eq. 5.1: packets received by the receiver; eq. 5.2: retransmission packets.
    pub counted: u64,
}

impl LossEstimate {
    /// Eq. 5.1 from packet counts obtained elsewhere, e.g. the link's own
    /// statistics (packets offered and delivered by the simulated link).
    /// `None` if nothing was sent.
    pub fn from_counts(sent: u64, received: u64) -> Option<LossEstimate> {
        (sent > 0).then(|| LossEstimate {
            method: LossMethod::SenderAndReceiver,
            rate: sent.saturating_sub(received) as f64 / sent as f64,
            sent,
            counted: received,
        })
    }
}

/// Recovery facts of a flow read from the sender's trace (RTT samples,
/// the thin-stream verdict over time, redundant bytes). Counters the SCTP
/// association keeps in its `Stats` as well; computed here from records so
/// that every driver (simulator, sockets) and both transports get them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryCounts {
    /// `RttSample` records: samples that reached the RTO estimator.
    pub rtt_samples: u64,
    /// Of those, samples measured on data (not HEARTBEAT-ACK or handshake).
    pub data_rtt_samples: u64,
    /// Payload bytes of redundant copies (RDB, [`TxReason::RedundantBundle`]).
    pub redundant_bytes: u64,
    /// Changes of the thin verdict after the first one (`Thin` records).
    pub thin_transitions: u64,
    /// Sum of the RTT samples that reached the estimator, nanoseconds.
    pub rtt_sample_nanos: u64,
    /// `Rto` records (each value the estimator set) and the sum of their
    /// values, nanoseconds: the calculated RTO of 000 Fig. 4.
    pub rto_updates: u64,
    pub rto_nanos: u64,
    /// Packets that carried a timeout retransmission, and per packet the
    /// time since the oldest of its timed-out pieces was last transmitted
    /// (summed and the maximum, nanoseconds): how long the retransmission
    /// timer actually ran before it fired, restarts included (000 Fig. 4's
    /// measured RTO).
    pub rto_measured: u64,
    pub rto_measured_nanos: u64,
    pub rto_measured_max_nanos: u64,
    /// Of those packets, the ones with an RTO known when the timer fired
    /// (the last value set before that instant), and the sum of those
    /// RTOs, nanoseconds: the calculated RTO the measured one is compared
    /// with.
    pub rto_in_force: u64,
    pub rto_in_force_nanos: u64,
    /// Time classified thin and the window it was measured over: from the
    /// first data transmission to the last data transmission or
    /// acknowledgement, whichever is later. `None` without `Thin` records
    /// (the sender did not track the verdict). Before the first `Thin`
    /// record the stream counts as not thin.
    pub thin_time: Option<(Duration, Duration)>,
}

impl RecoveryCounts {
    /// The share of the window classified thin.
    pub fn thin_share(&self) -> Option<f64> {
        let (thin, window) = self.thin_time?;
        (!window.is_zero()).then(|| thin.as_nanos() as f64 / window.as_nanos() as f64)
    }
}

/// The RTO values a sender set, to tell which one was in force when a
/// retransmission timer fired: the latest `Rto` record (time, value) and
/// the value in force before the instant of that record.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RtoClock {
    now: Option<(Instant, Duration)>,
    before: Option<Duration>,
}

impl RtoClock {
    /// An `Rto` record: the estimator set `rto` at `time`.
    pub(crate) fn set(&mut self, time: Instant, rto: Duration, r: &mut RecoveryCounts) {
        if let Some((t, v)) = self.now {
            if t < time {
                self.before = Some(v);
            }
        }
        self.now = Some((time, rto));
        r.rto_updates += 1;
        r.rto_nanos = r.rto_nanos.saturating_add(rto.as_nanos());
    }

    /// A packet carrying a timeout retransmission at `time`, whose timed-out
    /// data was last sent `waited` earlier (000 Fig. 4's measured RTO), and
    /// the RTO in force when the timer fired: the value set before this
    /// instant (the back-off it triggers may be recorded at the same instant).
    pub(crate) fn fired(&self, time: Instant, waited: Duration, r: &mut RecoveryCounts) {
        r.rto_measured += 1;
        r.rto_measured_nanos = r.rto_measured_nanos.saturating_add(waited.as_nanos());
        r.rto_measured_max_nanos = r.rto_measured_max_nanos.max(waited.as_nanos());
        let in_force = match self.now {
            Some((t, v)) if t < time => Some(v),
            _ => self.before,
        };
        if let Some(v) = in_force {
            r.rto_in_force += 1;
            r.rto_in_force_nanos = r.rto_in_force_nanos.saturating_add(v.as_nanos());
        }
    }
}

/// Time classified thin inside `[from, to)` given the verdict changes in time order.
fn time_thin(changes: &[(Instant, bool)], from: Instant, to: Instant) -> Duration {
    let mut total = 0u64;
    let mut state = false;
    let mut since = from;
    for (t, thin) in changes {
        let t = (*t).clamp(from, to);
        if state {
            total += t.saturating_duration_since(since).as_nanos();
        }
        state = *thin;
        since = t;
    }
    if state {
        total += to.saturating_duration_since(since).as_nanos();
    }
    Duration::from_nanos(total)
}

/// What a throughput series counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThroughputSource {
    /// Payload bytes newly acknowledged, at the sender (002 §5.2.5 analysed ACKs in a sender dump).
    Acked,
    /// Payload bytes arriving for the first time at the receiver (004 §5 "goodput").
    Arrived,
    /// Payload bytes handed to the receiving application.
    Delivered,
}

#[derive(Clone, Copy, Debug)]
struct FirstTx {
    time: Instant,
    /// Bytes and units of the piece that first carried these units, to
    /// convert unit counts back to bytes (SCTP chunks have varying sizes).
    bytes: u32,
    len: u64,
}

impl PartialEq for FirstTx {
    fn eq(&self, o: &Self) -> bool {
        self.time == o.time
    }
}
impl Eq for FirstTx {}
impl PartialOrd for FirstTx {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for FirstTx {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.time.cmp(&o.time)
    }
}

/// Bytes of `part`, a sub-range of a piece of `len` units and `bytes` bytes,
/// pro rata (exact for whole pieces and for pieces of one unit).
pub(crate) fn pro_rata(bytes: u32, len: u64, part: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    (u128::from(bytes) * u128::from(part) / u128::from(len)) as u64
}

#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    packets_sent: u64,
    data_packets_sent: u64,
    retransmission_packets: u64,
    packets_received: u64,
}

#[derive(Clone, Copy, Debug)]
enum OwdModel {
    Constant(Duration),
    Drift {
        base_ns: i128,
        tau_ns: i128,
        t_start: Instant,
        t_end: Instant,
    },
}

/// The analysis of one flow. Build it once; every query is cheap.
#[derive(Clone, Debug)]
pub struct FlowAnalysis {
    options: AnalysisOptions,
    messages: Vec<MessageOutcome>,
    by_id: BTreeMap<u64, usize>,
    owner: RangeMap<usize>,
    reasons: BTreeMap<TxReason, u64>,
    retransmitted: Vec<RetransmittedPiece>,
    payload_bytes_sent: u64,
    unique_bytes_sent: u64,
    sender: Counters,
    receiver: Option<Counters>,
    spurious_estimate: Option<u64>,
    acked_bytes: Vec<(Instant, u64)>,
    arrived_bytes: Vec<(Instant, u64)>,
    delivered_bytes: Vec<(Instant, u64)>,
    span: Option<(Instant, Instant)>,
    owd: OwdModel,
    recovery: RecoveryCounts,
    /// Per message (index into `messages`): when it and every message
    /// before it in unit order were acknowledged ([`LatencyKind::AckCumulative`]).
    cum_acked: Vec<Option<Instant>>,
}

/// What the sender's records say, per unit range and in total.
struct SenderScan {
    messages: Vec<MessageOutcome>,
    by_id: BTreeMap<u64, usize>,
    /// Which message (index) occupies each unit.
    owner: RangeMap<usize>,
    first_tx: RangeMap<FirstTx>,
    tx_count: RangeMap<u32>,
    acked: RangeMap<Instant>,
    abandoned: RangeMap<Instant>,
    reasons: BTreeMap<TxReason, u64>,
    retransmitted: Vec<RetransmittedPiece>,
    payload_bytes_sent: u64,
    unique_bytes_sent: u64,
    counters: Counters,
    acked_bytes: Vec<(Instant, u64)>,
    recovery: RecoveryCounts,
    thin_changes: Vec<(Instant, bool)>,
    /// First data transmission, last data transmission or acknowledgement.
    data_window: Option<(Instant, Instant)>,
    rto: RtoClock,
}

impl SenderScan {
    fn scan(records: &[Record]) -> Result<SenderScan, MetricsError> {
        let mut s = SenderScan {
            messages: Vec::new(),
            by_id: BTreeMap::new(),
            owner: RangeMap::new(),
            first_tx: RangeMap::new(),
            tx_count: RangeMap::new(),
            acked: RangeMap::new(),
            abandoned: RangeMap::new(),
            reasons: TxReason::ALL.iter().map(|r| (*r, 0)).collect(),
            retransmitted: Vec::new(),
            payload_bytes_sent: 0,
            unique_bytes_sent: 0,
            counters: Counters::default(),
            acked_bytes: Vec::new(),
            recovery: RecoveryCounts::default(),
            thin_changes: Vec::new(),
            rto: RtoClock::default(),
            data_window: None,
        };
        for (i, rec) in records.iter().enumerate() {
            match rec {
                Record::Submitted {
                    time,
                    message,
                    stream,
                    bytes,
                    unordered,
                    units,
                } => {
                    let units = units_ok(*units, Side::Sender, i)?;
                    if s.by_id.insert(*message, s.messages.len()).is_some() {
                        return Err(MetricsError::DuplicateMessage { message: *message });
                    }
                    if s.owner.fill_gaps(units, s.messages.len()) != units.len() {
                        return Err(MetricsError::OverlappingMessage { message: *message });
                    }
                    s.messages.push(MessageOutcome::submitted(
                        *message, *stream, *bytes, *unordered, units, *time, *time,
                    ));
                }
                Record::PacketSent { time, data, .. } => {
                    s.counters.packets_sent += 1;
                    if !data.is_empty() {
                        s.counters.data_packets_sent += 1;
                        s.extend_window(*time);
                    }
                    let mut carries_retransmission = false;
                    let mut timer_waited: Option<Duration> = None;
                    for piece in data {
                        let units = units_ok(piece.units, Side::Sender, i)?;
                        if piece.reason == TxReason::TimeoutRetransmit {
                            if let Some(w) = s.since_previous_tx(units, *time) {
                                timer_waited = Some(timer_waited.map_or(w, |x| x.max(w)));
                            }
                        }
                        carries_retransmission |=
                            s.on_piece(*time, units, piece.bytes, piece.reason);
                    }
                    if let Some(w) = timer_waited {
                        s.rto.fired(*time, w, &mut s.recovery);
                    }
                    if carries_retransmission {
                        s.counters.retransmission_packets += 1;
                    }
                }
                Record::Acked { time, units } => {
                    s.on_acked(*time, units_ok(*units, Side::Sender, i)?);
                    s.extend_window(*time);
                }
                Record::Rto { rto, time, .. } => s.rto.set(*time, *rto, &mut s.recovery),
                Record::RttSample { data, rtt, .. } => {
                    s.recovery.rtt_samples += 1;
                    s.recovery.rtt_sample_nanos =
                        s.recovery.rtt_sample_nanos.saturating_add(rtt.as_nanos());
                    if *data {
                        s.recovery.data_rtt_samples += 1;
                    }
                }
                Record::Thin { time, thin, .. } => {
                    if s.thin_changes.last().is_some_and(|(_, t)| t != thin) {
                        s.recovery.thin_transitions += 1;
                    }
                    s.thin_changes.push((*time, *thin));
                }
                Record::Abandoned { time, units } => {
                    s.abandoned
                        .fill_gaps(units_ok(*units, Side::Sender, i)?, *time);
                }
                Record::PacketReceived { .. } => s.counters.packets_received += 1,
                _ => {}
            }
        }
        if !s.thin_changes.is_empty() {
            s.recovery.thin_time = s
                .data_window
                .map(|(from, to)| (time_thin(&s.thin_changes, from, to), to - from));
        }
        Ok(s)
    }

    fn extend_window(&mut self, t: Instant) {
        self.data_window = Some(match self.data_window {
            None => (t, t),
            Some((a, b)) => (a.min(t), b.max(t)),
        });
    }

    /// One data piece of a sent packet; returns whether it counts as a
    /// retransmission for eq. 5.2.
    /// How long ago the first unit of `units` was last transmitted (its
    /// first transmission or the latest retransmitted piece holding it),
    /// before a piece sent at `time` is recorded; `None` if never sent.
    fn since_previous_tx(&self, units: Units, time: Instant) -> Option<Duration> {
        let first = self.first_tx.get(units.start)?.time;
        // Pieces are in time order: stop at the first transmission.
        let last = self
            .retransmitted
            .iter()
            .rev()
            .take_while(|p| p.time >= first)
            .find(|p| p.units.contains(units.start))
            .map_or(first, |p| p.time);
        Some(time.saturating_duration_since(last))
    }

    fn on_piece(&mut self, time: Instant, units: Units, bytes: u32, reason: TxReason) -> bool {
        *self.reasons.entry(reason).or_insert(0) += 1;
        self.payload_bytes_sent += u64::from(bytes);
        if reason == TxReason::RedundantBundle {
            self.recovery.redundant_bytes += u64::from(bytes);
        }
        let first = FirstTx {
            time,
            bytes,
            len: units.len(),
        };
        let new_units = self.first_tx.fill_gaps(units, first);
        self.unique_bytes_sent += pro_rata(bytes, units.len(), new_units);
        let before = self
            .tx_count
            .update(units, 0, |c| *c = c.saturating_add(1))
            .unwrap_or(0);
        if !reason.is_retransmission() {
            return false;
        }
        self.retransmitted.push(RetransmittedPiece {
            time,
            units,
            bytes,
            reason,
            nth: before.max(1),
            spurious: None,
        });
        // Eq. 5.2 counts "registered retransmitted packets"; redundant copies
        // sent along with new data are not a reaction to loss.
        reason != TxReason::RedundantBundle
    }

    fn on_acked(&mut self, time: Instant, units: Units) {
        let covered: Vec<Units> = self.acked.overlapping(units).map(|(u, _)| u).collect();
        self.acked.fill_gaps(units, time);
        // Bytes of the newly acknowledged units (the gaps between the ranges
        // acked before), via the piece that first carried them.
        let mut newly = 0u64;
        let mut cursor = units.start;
        for u in covered
            .iter()
            .copied()
            .chain(std::iter::once(Units::new(units.end, units.end)))
        {
            if u.start > cursor {
                for (part, f) in self.first_tx.overlapping(Units::new(cursor, u.start)) {
                    newly += pro_rata(f.bytes, f.len, part.len());
                }
            }
            cursor = cursor.max(u.end);
        }
        if newly > 0 {
            self.acked_bytes.push((time, newly));
        }
    }

    fn apply_app_sends(&mut self, app: &[AppSend]) -> Result<(), MetricsError> {
        let mut seen = BTreeMap::new();
        for a in app {
            let idx = *self
                .by_id
                .get(&a.message)
                .ok_or(MetricsError::UnknownMessage { message: a.message })?;
            if seen.insert(a.message, ()).is_some() {
                return Err(MetricsError::DuplicateAppSend { message: a.message });
            }
            let m = &mut self.messages[idx];
            if a.time > m.submitted {
                return Err(MetricsError::AppSendAfterSubmit {
                    message: a.message,
                    app: a.time,
                    submitted: m.submitted,
                });
            }
            m.sent = a.time;
        }
        Ok(())
    }
}

/// What the receiver's records say.
struct ReceiverScan {
    arrived: RangeMap<Instant>,
    delivered: RangeMap<Instant>,
    arrived_bytes: Vec<(Instant, u64)>,
    delivered_bytes: Vec<(Instant, u64)>,
    counters: Counters,
}

impl ReceiverScan {
    fn scan(records: &[Record]) -> Result<ReceiverScan, MetricsError> {
        let mut r = ReceiverScan {
            arrived: RangeMap::new(),
            delivered: RangeMap::new(),
            arrived_bytes: Vec::new(),
            delivered_bytes: Vec::new(),
            counters: Counters::default(),
        };
        for (i, rec) in records.iter().enumerate() {
            match rec {
                Record::Arrived {
                    time, units, bytes, ..
                } => {
                    // First arrival per unit, whatever the `duplicate` flag says.
                    let units = units_ok(*units, Side::Receiver, i)?;
                    let new_units = r.arrived.fill_gaps(units, *time);
                    let b = pro_rata(*bytes, units.len(), new_units);
                    if b > 0 {
                        r.arrived_bytes.push((*time, b));
                    }
                }
                Record::Delivered {
                    time, units, bytes, ..
                } => {
                    r.delivered
                        .fill_gaps(units_ok(*units, Side::Receiver, i)?, *time);
                    r.delivered_bytes.push((*time, u64::from(*bytes)));
                }
                Record::PacketReceived { .. } => r.counters.packets_received += 1,
                Record::PacketSent { data, .. } => {
                    r.counters.packets_sent += 1;
                    if !data.is_empty() {
                        r.counters.data_packets_sent += 1;
                    }
                }
                _ => {}
            }
        }
        Ok(r)
    }
}

fn check_order(records: &[Record], side: Side) -> Result<(), MetricsError> {
    for (i, w) in records.windows(2).enumerate() {
        if w[1].time() < w[0].time() {
            return Err(MetricsError::UnorderedRecords { side, index: i + 1 });
        }
    }
    Ok(())
}

/// Counts one side's records as they are read and checks that they come in
/// time order (the incremental analyses read records chunk by chunk).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct InOrder {
    last: Option<Instant>,
    seen: usize,
}

impl InOrder {
    /// The index of `rec` among `side`'s records, or an error if it is
    /// earlier than the record before it.
    pub(crate) fn next(&mut self, side: Side, rec: &Record) -> Result<usize, MetricsError> {
        let index = self.seen;
        self.seen += 1;
        let time = rec.time();
        if self.last.is_some_and(|l| time < l) {
            return Err(MetricsError::UnorderedRecords { side, index });
        }
        self.last = Some(time);
        Ok(index)
    }
}

pub(crate) fn units_ok(units: Units, side: Side, index: usize) -> Result<Units, MetricsError> {
    if units.is_empty() {
        Err(MetricsError::EmptyUnits { side, index })
    } else {
        Ok(units)
    }
}

impl FlowAnalysis {
    /// Analyses a flow from its sender's and (if traced) receiver's records.
    pub fn new(
        sender: &[Record],
        receiver: Option<&[Record]>,
        options: AnalysisOptions,
    ) -> Result<FlowAnalysis, MetricsError> {
        FlowAnalysis::build(
            FlowInput {
                sender,
                receiver,
                ..FlowInput::default()
            },
            options,
        )
    }

    /// Analyses a flow with optional application send times and duplicate reports.
    pub fn build(
        input: FlowInput<'_>,
        options: AnalysisOptions,
    ) -> Result<FlowAnalysis, MetricsError> {
        check_order(input.sender, Side::Sender)?;
        if let Some(r) = input.receiver {
            check_order(r, Side::Receiver)?;
        }
        if let OwdCorrection::MinObservedDriftCorrected { window: 0 } = options.owd {
            return Err(MetricsError::BadOwdWindow);
        }

        let mut tx = SenderScan::scan(input.sender)?;
        if let Some(app) = input.app_sends {
            tx.apply_app_sends(app)?;
        }
        let rx = input.receiver.map(ReceiverScan::scan).transpose()?;

        if let Some(rx) = &rx {
            for p in &mut tx.retransmitted {
                // Spurious: every unit had already arrived when the copy was sent.
                // Both traces share one clock in the simulator; an arrival at the
                // very instant of the send counts as "already there".
                p.spurious = Some(
                    rx.arrived
                        .max_if_covered(p.units)
                        .is_some_and(|t| t <= p.time),
                );
            }
        }
        let mut messages = std::mem::take(&mut tx.messages);
        for m in &mut messages {
            m.first_tx = tx.first_tx.min_any(m.units).map(|f| f.time);
            m.retransmissions = tx
                .tx_count
                .overlapping(m.units)
                .map(|(_, c)| c)
                .max()
                .unwrap_or(0)
                .saturating_sub(1);
            m.acked = tx.acked.max_if_covered(m.units);
            m.abandoned = tx.abandoned.overlapping(m.units).next().is_some();
            if let Some(rx) = &rx {
                m.arrived = rx.arrived.max_if_covered(m.units);
                m.delivered = rx.delivered.max_if_covered(m.units);
            }
        }

        let spurious_estimate = match (input.receiver, input.duplicate_reports) {
            (None, Some(reports)) => Some(estimate_spurious(&tx.retransmitted, reports)),
            _ => None,
        };
        let span = {
            let all = input
                .sender
                .iter()
                .chain(input.receiver.unwrap_or(&[]).iter());
            let first = all.clone().map(Record::time).min();
            let last = all.map(Record::time).max();
            first.zip(last)
        };
        let owd = owd_model(&messages, options.owd);
        let (receiver, arrived_bytes, delivered_bytes) = match rx {
            Some(rx) => (Some(rx.counters), rx.arrived_bytes, rx.delivered_bytes),
            None => (None, Vec::new(), Vec::new()),
        };
        let cum_acked = cumulative_acks(&messages);
        Ok(FlowAnalysis {
            options,
            messages,
            by_id: tx.by_id,
            owner: tx.owner,
            reasons: tx.reasons,
            retransmitted: tx.retransmitted,
            payload_bytes_sent: tx.payload_bytes_sent,
            unique_bytes_sent: tx.unique_bytes_sent,
            sender: tx.counters,
            receiver,
            spurious_estimate,
            acked_bytes: tx.acked_bytes,
            arrived_bytes,
            delivered_bytes,
            span,
            owd,
            recovery: tx.recovery,
            cum_acked,
        })
    }

    /// RTT samples, thin verdict over time and redundant bytes (see [`RecoveryCounts`]).
    pub fn recovery(&self) -> &RecoveryCounts {
        &self.recovery
    }

    pub fn options(&self) -> &AnalysisOptions {
        &self.options
    }

    /// Every message in submission order.
    pub fn messages(&self) -> &[MessageOutcome] {
        &self.messages
    }

    pub fn message(&self, id: u64) -> Option<&MessageOutcome> {
        self.by_id.get(&id).map(|&i| &self.messages[i])
    }

    /// The message that occupies `unit` (to map a dropped TSN or byte to its message, 003 §3).
    pub fn message_at_unit(&self, unit: u64) -> Option<&MessageOutcome> {
        self.owner.get(unit).map(|i| &self.messages[i])
    }

    /// Whether the receiver's records were available.
    pub fn has_receiver_trace(&self) -> bool {
        self.receiver.is_some()
    }

    /// First and last record time over both traces.
    pub fn span(&self) -> Option<(Instant, Instant)> {
        self.span
    }

    /// The OWD subtracted from `m`'s delivery latencies.
    pub fn owd_for(&self, m: &MessageOutcome) -> Duration {
        match self.owd {
            OwdModel::Constant(d) => d,
            OwdModel::Drift {
                base_ns,
                tau_ns,
                t_start,
                t_end,
            } => {
                let t = m.first_tx.unwrap_or(m.submitted).clamp(t_start, t_end);
                let total = i128::from((t_end - t_start).as_nanos());
                let part = i128::from((t - t_start).as_nanos());
                let shift = if total == 0 { 0 } else { tau_ns * part / total };
                Duration::from_nanos((base_ns + shift).clamp(0, i128::from(u64::MAX)) as u64)
            }
        }
    }

    /// The latency of kind `kind` of message `m`, if the message got that far.
    pub fn latency(&self, m: &MessageOutcome, kind: LatencyKind) -> Option<Duration> {
        let (end, start) = match kind {
            LatencyKind::AckFromFirstTx => (m.acked?, m.first_tx?),
            LatencyKind::AckFromSend => (m.acked?, m.sent),
            LatencyKind::AckCumulative => {
                let i = *self.by_id.get(&m.message)?;
                (self.cum_acked.get(i).copied().flatten()?, m.first_tx?)
            }
            LatencyKind::Transport => (m.arrived?, m.sent),
            LatencyKind::Application => (m.delivered?, m.sent),
            LatencyKind::TransportFromFirstTx => (m.arrived?, m.first_tx?),
            LatencyKind::ApplicationFromFirstTx => (m.delivered?, m.first_tx?),
        };
        let raw = end.saturating_duration_since(start);
        Some(if kind.owd_corrected() {
            raw.saturating_sub(self.owd_for(m))
        } else {
            raw
        })
    }

    /// `(message, latency)` for every message that has that latency, in submission order.
    pub fn latencies(&self, kind: LatencyKind) -> Vec<(&MessageOutcome, Duration)> {
        self.messages
            .iter()
            .filter_map(|m| self.latency(m, kind).map(|l| (m, l)))
            .collect()
    }

    pub fn latency_stats(&self, kind: LatencyKind) -> Option<LatencyStats> {
        LatencyStats::from_durations(self.latencies(kind).into_iter().map(|(_, l)| l))
    }

    /// Latency statistics per retransmission count: groups 0, 1, 2 and "3 or
    /// more" (002 Fig. 5.6's "1st, 2nd, 3rd retransmission").
    pub fn by_retransmissions(&self, kind: LatencyKind) -> [RetransmissionGroup; 4] {
        let mut groups: [Vec<Duration>; 4] = Default::default();
        for (m, l) in self.latencies(kind) {
            groups[(m.retransmissions as usize).min(3)].push(l);
        }
        let mut out = [RetransmissionGroup::default(); 4];
        for (i, g) in groups.into_iter().enumerate() {
            out[i] = RetransmissionGroup {
                retransmissions: i as u32,
                or_more: i == 3,
                stats: LatencyStats::from_durations(g),
            };
        }
        out
    }

    /// The empirical CDF of a latency, by message or weighted by message bytes.
    pub fn cdf(&self, kind: LatencyKind, weight_by_bytes: bool) -> Cdf {
        Cdf::weighted(self.latencies(kind).into_iter().map(|(m, l)| {
            (
                l,
                if weight_by_bytes {
                    u64::from(m.bytes)
                } else {
                    1
                },
            )
        }))
    }

    /// Data pieces sent per reason (new data included); every reason present, zeros too.
    pub fn reasons(&self) -> &BTreeMap<TxReason, u64> {
        &self.reasons
    }

    pub fn retransmitted_pieces(&self) -> &[RetransmittedPiece] {
        &self.retransmitted
    }

    /// Spurious retransmitted pieces. With a receiver trace: exact (see
    /// [`RetransmittedPiece::spurious`]). Without: the duplicate-report
    /// estimate if reports were given, else `None`.
    pub fn spurious(&self) -> Option<u64> {
        if self.receiver.is_some() {
            Some(
                self.retransmitted
                    .iter()
                    .filter(|p| p.spurious == Some(true))
                    .count() as u64,
            )
        } else {
            self.spurious_estimate
        }
    }

    /// Spurious retransmitted pieces per reason (receiver trace needed).
    pub fn spurious_by_reason(&self) -> Option<BTreeMap<TxReason, u64>> {
        self.receiver.as_ref()?;
        let mut out = BTreeMap::new();
        for p in self
            .retransmitted
            .iter()
            .filter(|p| p.spurious == Some(true))
        {
            *out.entry(p.reason).or_insert(0) += 1;
        }
        Some(out)
    }

    /// 002 Table 5.6 / 000 Table 2: retransmitted pieces by retransmission
    /// number (1, 2, 3 = "3 or more") and reason, with how many were spurious.
    pub fn reason_table(&self) -> Vec<ReasonRow> {
        let mut rows: BTreeMap<(u32, TxReason), (u64, u64)> = BTreeMap::new();
        for p in &self.retransmitted {
            let e = rows.entry((p.nth.min(3), p.reason)).or_insert((0, 0));
            e.0 += 1;
            if p.spurious == Some(true) {
                e.1 += 1;
            }
        }
        let known = self.receiver.is_some();
        rows.into_iter()
            .map(|((nth, reason), (count, spurious))| ReasonRow {
                retransmission: nth,
                or_more: nth == 3,
                reason,
                count,
                spurious: known.then_some(spurious),
            })
            .collect()
    }

    /// All payload bytes the sender put on the wire (ω of 002 Definition 3).
    pub fn payload_bytes_sent(&self) -> u64 {
        self.payload_bytes_sent
    }

    /// Payload bytes of the distinct units sent (`seq_max − seq_min` of Definition 3).
    pub fn unique_bytes_sent(&self) -> u64 {
        self.unique_bytes_sent
    }

    /// Transmission overhead `tohd = (ω − unique) / ω` (002 §5.1.8,
    /// Definition 3), a fraction (multiply by 100 for the documents'
    /// percent). `None` if no payload was sent. The unique part is measured
    /// on the sender: it counts data sent at least once, whether or not it
    /// arrived.
    pub fn tohd(&self) -> Option<f64> {
        (self.payload_bytes_sent > 0).then(|| {
            (self.payload_bytes_sent - self.unique_bytes_sent.min(self.payload_bytes_sent)) as f64
                / self.payload_bytes_sent as f64
        })
    }

    /// Loss of the data direction: eq. 5.1 with a receiver trace, else eq. 5.2.
    pub fn loss(&self) -> Option<LossEstimate> {
        match self.receiver {
            Some(r) => LossEstimate::from_counts(self.sender.packets_sent, r.packets_received),
            None => (self.sender.data_packets_sent > 0).then(|| LossEstimate {
                method: LossMethod::SenderOnly,
                rate: self.sender.retransmission_packets as f64
                    / self.sender.data_packets_sent as f64,
                sent: self.sender.data_packets_sent,
                counted: self.sender.retransmission_packets,
            }),
        }
    }

    /// Loss of the feedback direction (receiver → sender), eq. 5.1; needs the receiver trace.
    pub fn reverse_loss(&self) -> Option<LossEstimate> {
        let r = self.receiver?;
        LossEstimate::from_counts(r.packets_sent, self.sender.packets_received)
    }

    /// Bytes per interval `[from + k·interval, from + (k+1)·interval)` for
    /// every interval that starts before `to`. The last interval may extend
    /// past `to` and only counts events before `to`. `Arrived`/`Delivered`
    /// need the receiver trace (empty series otherwise). Acked bytes of SCTP
    /// chunks that were first sent inside a multi-chunk piece are split pro
    /// rata by units.
    pub fn throughput(
        &self,
        source: ThroughputSource,
        from: Instant,
        to: Instant,
        interval: Duration,
    ) -> Result<Vec<u64>, MetricsError> {
        if interval.is_zero() || to < from {
            return Err(MetricsError::BadWindow);
        }
        let bins = (to - from).as_nanos().div_ceil(interval.as_nanos()) as usize;
        let mut out = vec![0u64; bins];
        let events = match source {
            ThroughputSource::Acked => &self.acked_bytes,
            ThroughputSource::Arrived => &self.arrived_bytes,
            ThroughputSource::Delivered => &self.delivered_bytes,
        };
        for (t, b) in events {
            if *t < from || *t >= to {
                continue;
            }
            let k = ((*t - from).as_nanos() / interval.as_nanos()) as usize;
            out[k] += b;
        }
        Ok(out)
    }

    /// Message transfer time (003 §3): application send → delivery to the
    /// receiving application, raw (no OWD removed; 003 reports absolute MTT).
    pub fn message_transfer_time(&self, id: u64) -> Option<Duration> {
        let m = self.message(id)?;
        Some(m.delivered?.saturating_duration_since(m.sent))
    }
}

/// Latency statistics of the messages that needed `retransmissions` retransmissions.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RetransmissionGroup {
    pub retransmissions: u32,
    /// The group holds `retransmissions` *or more* (the last group).
    pub or_more: bool,
    pub stats: Option<LatencyStats>,
}

/// One row of the reason table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasonRow {
    pub retransmission: u32,
    pub or_more: bool,
    pub reason: TxReason,
    pub count: u64,
    pub spurious: Option<u64>,
}

fn owd_model(messages: &[MessageOutcome], owd: OwdCorrection) -> OwdModel {
    let samples: Vec<(Instant, Duration)> = messages
        .iter()
        .filter_map(|m| {
            let tx = m.first_tx?;
            Some((tx, m.arrived?.saturating_duration_since(tx)))
        })
        .collect();
    match owd {
        OwdCorrection::None => OwdModel::Constant(Duration::ZERO),
        OwdCorrection::Given(d) => OwdModel::Constant(d),
        OwdCorrection::MinObserved => {
            OwdModel::Constant(samples.iter().map(|s| s.1).min().unwrap_or(Duration::ZERO))
        }
        OwdCorrection::MinObservedDriftCorrected { window } => {
            let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
                return OwdModel::Constant(Duration::ZERO);
            };
            let w = window.max(1).min(samples.len());
            let min_of =
                |s: &[(Instant, Duration)]| s.iter().map(|x| x.1.as_nanos()).min().unwrap_or(0);
            let d1 = i128::from(min_of(&samples[..w]));
            let d2 = i128::from(min_of(&samples[samples.len() - w..]));
            OwdModel::Drift {
                base_ns: d1,
                tau_ns: d2 - d1,
                t_start: first.0,
                t_end: last.0.max(first.0),
            }
        }
    }
}

/// Without a receiver trace: each duplicate report is matched to the most
/// recent not yet matched retransmitted piece that was sent before the report
/// and contains the report's first unit; each match counts as one spurious
/// retransmission. An estimate: a duplicate can also come from network
/// duplication, and a lost report hides one.
fn estimate_spurious(pieces: &[RetransmittedPiece], reports: &[DuplicateReport]) -> u64 {
    // start unit → indices of pieces starting there, in send order.
    let mut by_start: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    let mut longest = 0u64;
    for (i, p) in pieces.iter().enumerate() {
        by_start.entry(p.units.start).or_default().push(i);
        longest = longest.max(p.units.len());
    }
    let mut matched = vec![false; pieces.len()];
    let mut count = 0;
    for r in reports {
        let unit = r.units.start;
        let lo = unit.saturating_sub(longest.saturating_sub(1));
        let mut best: Option<usize> = None;
        for (_, idxs) in by_start.range(lo..=unit) {
            for &i in idxs {
                let p = &pieces[i];
                if !matched[i]
                    && p.units.contains(unit)
                    && p.time <= r.time
                    && !matches!(best, Some(b) if pieces[b].time > p.time)
                {
                    best = Some(i);
                }
            }
        }
        if let Some(i) = best {
            matched[i] = true;
            count += 1;
        }
    }
    count
}

/// Per message (same index as `messages`): when the cumulative
/// acknowledgement passed it, i.e. the latest acknowledgement of it and of
/// every message before it in unit order. A message never acknowledged holds
/// back every later one (`None`); an abandoned one does not (the cumulative
/// point skips it), though it has no time of its own.
fn cumulative_acks(messages: &[MessageOutcome]) -> Vec<Option<Instant>> {
    let mut order: Vec<usize> = (0..messages.len()).collect();
    order.sort_by_key(|&i| messages[i].units.start);
    let mut out = vec![None; messages.len()];
    let mut front: Option<Instant> = None;
    let mut blocked = false;
    for i in order {
        let m = &messages[i];
        if m.abandoned && m.acked.is_none() {
            continue;
        }
        match m.acked {
            Some(a) if !blocked => {
                let t = front.map_or(a, |f| f.max(a));
                front = Some(t);
                out[i] = Some(t);
            }
            _ => blocked = true,
        }
    }
    out
}
