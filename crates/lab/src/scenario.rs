//! Scenario files: the TOML schema, loading with file/line context, and
//! validation. `scenarios/README.md` is the user-facing description of the
//! same schema; keep the two in step.
//!
//! ```toml
//! name = "000-fig8-uniform"           # also the default output folder name
//! description = "..."
//! source = "000 §6.1 Fig. 8(a)"       # document and section reproduced
//! duration = "2h"                      # messages are generated in [0, duration)
//! drain = "60s"                        # then the run continues this long (default 60 s)
//! seed = 1                             # master seed (default 1; `--seed` overrides)
//! repetitions = 1                      # runs per variant and sweep point
//!
//! [topology]                           # kind = "two-host" | "dumbbell"
//! kind = "two-host"
//! forward = "delay 50ms loss 5%"       # netem-like text, or a LinkConfig table
//! reverse = "delay 50ms loss 5%"       # default: same as forward
//!
//! [[flows]]
//! transport = "sctp"                   # "sctp" (default) | "tcp"
//! workload = { kind = "constant", iat = "250ms", bytes = 100 }
//! peer = "sink"                        # "sink" | "echo" (default: what the workload asks for)
//! count = 1                            # identical flows
//! start = "0s"
//! app_start = "0s"                     # workload begins this long after `start`
//! app_start_from = "connect"           # "connect" | "established": what app_start counts from
//! app_timer_jitter = "0ms"             # each message late by uniform [0, jitter) (timer granularity)
//! workload_seed = 7                    # optional: the same workload draws in every run
//!
//! [[flows]]                            # HTTP-like cross traffic (dumbbell only):
//! transport = "tcp"                    # one TCP connection per client (`crate::http`)
//! preset = "newreno"
//! workload = { kind = "http", mean-request-gap = "270ms" }
//!
//! [[variants]]
//! name = "linux"
//! preset = "linux"                     # transport preset string
//! overrides = { delayed_sack = false } # optional config overrides
//! unordered = false                    # SCTP: every message unordered (001 §III.D)
//! workload_streams = 4                 # messages over 4 streams / TCP connections
//!
//! [metrics]
//! latency = "application"              # the latency the tables report
//! owd = "min-observed"                 # "none" | "min-observed" | "drift-corrected" | "50ms"
//! also = ["ack"]                       # further latency kinds stored in results.json
//! baseline = "standard"                # MTT reductions against this variant (drop sweeps)
//! mtt = "median"                       # or "mean": the per-point MTT statistic compared
//! throughput = { interval = "30s" }    # acked bytes per interval, Jain's index (002 §5.2.5)
//!
//! [sweep]                              # optional: one parameter varied
//! parameter = "drop-data-packet"       # | "loss" | "delay" | "iat" | "flows" | "rate"
//! values = [9, 10, 11]                 # or from = 9, to = 48 (inclusive), step = 1
//! # or up to three axes, their cartesian product (first axis outermost):
//! # axes = [{ parameter = "rate", values = ["500kbit", "2000kbit"] },
//! #         { parameter = "delay", values = ["5ms", "25ms"] },
//! #         { parameter = "drop-data-packet", from = 9, to = 48 }]
//!
//! [plots]
//! ccdf_log = true                      # also complementary CDFs on a log y axis
//!
//! [reference]                          # free-form: the documents' numbers, copied to results.json
//! ```
//!
//! Unknown keys are errors, reported with the file, line and column.
//! Paths inside the file (trace workloads) are relative to the file.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use thinstream_base::{Duration, Probability};
use thinstream_link::LinkConfig;
use thinstream_metrics::{LatencyKind, OwdCorrection};
use thinstream_workload::{serde_duration, PeerBehaviour, WorkloadConfig};

use crate::error::LabError;

fn one_u32() -> u32 {
    1
}
fn default_seed() -> u64 {
    1
}
fn default_drain() -> Duration {
    Duration::from_secs(60)
}

/// A whole scenario file.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Document and section the scenario reproduces.
    #[serde(default)]
    pub source: String,
    /// Messages are generated while `t < duration`.
    #[serde(with = "serde_duration")]
    pub duration: Duration,
    /// Extra simulated time after `duration` so retransmissions can finish.
    #[serde(default = "default_drain", with = "serde_duration")]
    pub drain: Duration,
    #[serde(default = "default_seed")]
    pub seed: u64,
    #[serde(default = "one_u32")]
    pub repetitions: u32,
    pub topology: TopologySpec,
    pub flows: Vec<FlowEntry>,
    pub variants: Vec<VariantSpec>,
    #[serde(default)]
    pub metrics: MetricsSpec,
    #[serde(default)]
    pub sweep: Option<SweepSpec>,
    /// How the report draws this scenario's results.
    #[serde(default)]
    pub plots: PlotOptions,
    /// The documents' reported numbers (free-form), copied into results.json.
    #[serde(default)]
    pub reference: Option<toml::Table>,
    /// The file this was loaded from (set by [`Scenario::load`]).
    #[serde(skip)]
    pub path: PathBuf,
}

/// How hosts are connected.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum TopologySpec {
    /// Two hosts, one link per direction shared by every flow.
    TwoHost {
        forward: LinkSpec,
        #[serde(default)]
        reverse: Option<LinkSpec>,
    },
    /// Senders and receivers behind a shared bottleneck.
    Dumbbell {
        bottleneck_forward: LinkSpec,
        #[serde(default)]
        bottleneck_reverse: Option<LinkSpec>,
        /// One entry per flow (after `count` expansion), or one entry for all.
        #[serde(default)]
        access: Vec<AccessSpec>,
    },
}

/// The access links of one dumbbell flow (default: perfect).
#[derive(Clone, Debug, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessSpec {
    #[serde(default)]
    pub a: LinkSpec,
    #[serde(default)]
    pub b: LinkSpec,
}

/// One link direction: netem-like text (`"delay 50ms loss 5%"`, see
/// `thinstream_link::LinkConfig::parse_netem`) or a `LinkConfig` table.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LinkSpec(pub LinkConfig);

impl<'de> Deserialize<'de> for LinkSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<LinkSpec, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LinkSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("netem-like text such as \"delay 50ms loss 5%\" or a link table")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LinkSpec, E> {
                LinkConfig::parse_netem(v)
                    .map(LinkSpec)
                    .map_err(|e| E::custom(format!("link {v:?}: {e}")))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<LinkSpec, A::Error> {
                LinkConfig::deserialize(de::value::MapAccessDeserializer::new(map)).map(LinkSpec)
            }
        }
        d.deserialize_any(V)
    }
}

/// Which transport a flow uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    Sctp,
    Tcp,
}

impl TransportKind {
    pub const fn name(self) -> &'static str {
        match self {
            TransportKind::Sctp => "sctp",
            TransportKind::Tcp => "tcp",
        }
    }
}

/// What the receiving application does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeerKind {
    Sink,
    Echo,
}

/// One `[[flows]]` entry: `count` identical connections.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowEntry {
    /// Default: the variant's transport, else `sctp`.
    #[serde(default)]
    pub transport: Option<TransportKind>,
    pub workload: WorkloadConfig,
    #[serde(default)]
    pub peer: Option<PeerKind>,
    #[serde(default = "one_u32")]
    pub count: u32,
    /// When both endpoints start (the initiator connects then).
    #[serde(default, with = "serde_duration")]
    pub start: Duration,
    /// Spread the `count` flows' starts evenly over this window: flow k
    /// (0-based) of the entry starts at `start + k * start_spread / count`
    /// (many associations opening at the same instant into a small
    /// drop-tail queue would mostly lose their handshakes together).
    #[serde(default, with = "serde_duration")]
    pub start_spread: Duration,
    /// Delay from `start` to the workload's first message (lets the
    /// association come up first, so early messages are not held back and
    /// bundled while it does).
    #[serde(default, with = "serde_duration")]
    pub app_start: Duration,
    /// What `app_start` counts from: `"connect"` (the flow's `start`, the
    /// default: messages generated during the handshake wait for it) or
    /// `"established"` (the association or connection is up, as the
    /// documents measured).
    #[serde(default)]
    pub app_start_from: AppStartFrom,
    /// Application timer jitter (`thinstream_workload::jitter`): every
    /// message is handed over late by a uniform draw in `[0, jitter)` from
    /// its nominal time, seeded per flow; the nominal schedule (and so the
    /// mean rate) is kept. Default 0: a perfectly periodic application.
    #[serde(default, with = "serde_duration")]
    pub app_timer_jitter: Duration,
    /// A fixed workload seed: the entry's workload (message times, sizes,
    /// burst gaps) is drawn from this seed in every run, so every
    /// repetition and sweep point sends the same schedule; links, timer
    /// jitter and everything else still draw from the run's seed. Default:
    /// the run's seed (a fresh schedule per run).
    #[serde(default)]
    pub workload_seed: Option<u64>,
    /// The receiving peer's acknowledgement policy, named after a real
    /// stack (`thinstream_proto::config::RECEIVERS`: `linux-2.6`, `linux`,
    /// `usrsctp`, `dcsctp`, `pion`, `every-packet`); SCTP only. Default:
    /// the variant's own setting.
    #[serde(default)]
    pub receiver: Option<String>,
    /// A fixed preset: the flow ignores the variants (cross traffic).
    #[serde(default)]
    pub preset: Option<String>,
    /// Whether the flow's metrics count (default: true unless `preset` is set).
    #[serde(default)]
    pub measured: Option<bool>,
}

/// What a flow's `app_start` counts from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AppStartFrom {
    #[default]
    Connect,
    Established,
}

impl FlowEntry {
    /// Connections this entry stands for: `count`, or one per client of
    /// an HTTP workload.
    pub fn expanded_count(&self) -> u32 {
        match &self.workload {
            WorkloadConfig::Http { clients, .. } => u32::from(*clients),
            _ => self.count,
        }
    }
    pub fn is_measured(&self) -> bool {
        self.measured.unwrap_or(self.preset.is_none())
    }
    pub fn peer_kind(&self) -> PeerKind {
        self.peer.unwrap_or(match self.workload.peer_behaviour() {
            PeerBehaviour::Echo => PeerKind::Echo,
            PeerBehaviour::Sink => PeerKind::Sink,
        })
    }
}

/// One `[[variants]]` entry: a transport configuration to compare.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    pub name: String,
    /// SCTP: `rfc`, `linux`, `thin`, `linux+lt`, ...; TCP: `newreno`,
    /// `linux-2.6.23+lt+mfr`, ... (see `transport`).
    pub preset: String,
    /// Overrides the flows' transport (e.g. a TCP reference among SCTP variants).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportKind>,
    #[serde(default, skip_serializing_if = "Overrides::is_empty")]
    pub overrides: Overrides,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// SCTP: send every message of the flows that follow the variants
    /// unordered (the U flag; 001 §III.D), whatever the workload says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unordered: bool,
    /// SCTP: the receiving peer's acknowledgement policy for the flows that
    /// follow the variants (a name of `thinstream_proto::config::RECEIVERS`;
    /// overrides the flow's `receiver`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<String>,
    /// The flows that follow the variants spread their messages round robin
    /// over this many streams (SCTP) or connections (TCP) instead of the
    /// workload's `streams`, all draws unchanged (001 §III.E compares 1, 2,
    /// 4 and 8 streams or connections on one workload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_streams: Option<u16>,
}

/// Config fields a variant may set on top of its preset. Each applies to
/// SCTP, TCP or both (applying one to the wrong transport is an error).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Overrides {
    /// Both: `false` acknowledges every data packet at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayed_sack: Option<bool>,
    /// Both: the delayed SACK / ACK timer (switches delaying on).
    #[serde(
        default,
        with = "serde_duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub sack_delay: Option<Duration>,
    /// Both: initial RTO.
    #[serde(
        default,
        with = "serde_duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub rto_initial: Option<Duration>,
    /// Both: RTO floor.
    #[serde(
        default,
        with = "serde_duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub rto_min: Option<Duration>,
    /// Both: RTO ceiling.
    #[serde(
        default,
        with = "serde_duration::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub rto_max: Option<Duration>,
    /// Both: missing reports (SCTP) / duplicate ACKs (TCP) before fast retransmit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_retransmit_threshold: Option<u32>,
    /// SCTP: Max.Burst.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_burst: Option<u32>,
    /// SCTP: heartbeats on/off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<bool>,
    /// SCTP: Nagle-like hold-back off (`true`, default) or on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_delay: Option<bool>,
    /// TCP: sender MSS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mss: Option<u32>,
    /// SCTP: streams each side offers (outbound streams and the maximum of
    /// inbound streams it accepts; the association uses the smaller of the
    /// two sides'). Presets offer 10; a workload over more streams needs
    /// this (checked before anything runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u16>,
}

impl Overrides {
    pub fn is_empty(&self) -> bool {
        *self == Overrides::default()
    }
}

/// `[metrics]`: what the tables report.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSpec {
    /// The latency of `latency_ms` and `by_retransmissions` (default application-layer delivery).
    #[serde(default = "application")]
    pub latency: LatencyKind,
    /// One-way-delay correction of delivery latencies.
    #[serde(default)]
    pub owd: OwdSpec,
    /// Further latency kinds stored per variant in results.json.
    #[serde(default)]
    pub also: Vec<LatencyKind>,
    /// The variant that MTT reductions are computed against (003 §3).
    #[serde(default)]
    pub baseline: Option<String>,
    /// Which MTT statistic per point the reductions and tables use: the
    /// median (003 pattern (i), 3 replications) or the mean (patterns (ii)
    /// and (iii), 40 replications with 95% confidence intervals).
    #[serde(default)]
    pub mtt: MttStatistic,
    /// Throughput per interval of every traced flow, per `[[flows]]`
    /// entry, with Jain's fairness index (002 §5.2.5 Fig. 5.20).
    #[serde(default)]
    pub throughput: Option<ThroughputSpec>,
}

/// `[metrics] throughput = { interval = "30s" }`: bytes acknowledged per
/// interval (002 §5.2.5 measures "by analysing the acknowledgements ... on
/// a sender side dump" every 30 s), counted from `from` (default: each
/// entry's `start + app_start`, after the connections are up, as 002
/// §5.2.5 does) to the end of the generation window.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThroughputSpec {
    #[serde(with = "serde_duration")]
    pub interval: Duration,
    #[serde(default, with = "serde_duration::option")]
    pub from: Option<Duration>,
}

/// `[plots]`: drawing options, copied to results.json (the report draws
/// from it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PlotOptions {
    /// Also draw complementary CDFs, `P(X > x)`, on a log-scale y axis
    /// down to 10⁻⁴ (001 Fig. 6's CCDF of the response time at p = 1%).
    #[serde(default)]
    pub ccdf_log: bool,
}

/// See [`MetricsSpec::mtt`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MttStatistic {
    #[default]
    Median,
    Mean,
}

impl MttStatistic {
    pub const fn name(self) -> &'static str {
        match self {
            MttStatistic::Median => "median",
            MttStatistic::Mean => "mean",
        }
    }
}

fn application() -> LatencyKind {
    LatencyKind::Application
}

impl Default for MetricsSpec {
    fn default() -> Self {
        MetricsSpec {
            latency: LatencyKind::Application,
            owd: OwdSpec::default(),
            also: Vec::new(),
            baseline: None,
            mtt: MttStatistic::Median,
            throughput: None,
        }
    }
}

/// `owd = "none" | "min-observed" | "drift-corrected" | "<duration>"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwdSpec(pub OwdCorrection);

impl Default for OwdSpec {
    fn default() -> Self {
        OwdSpec(OwdCorrection::MinObserved)
    }
}

impl<'de> Deserialize<'de> for OwdSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<OwdSpec, D::Error> {
        let text = String::deserialize(d)?;
        match text.as_str() {
            "none" => Ok(OwdSpec(OwdCorrection::None)),
            "min-observed" => Ok(OwdSpec(OwdCorrection::MinObserved)),
            // 002 eq. 5.3 uses the first and last 1000 packets.
            "drift-corrected" => Ok(OwdSpec(OwdCorrection::MinObservedDriftCorrected {
                window: 1000,
            })),
            other => Duration::parse(other)
                .map(|d| OwdSpec(OwdCorrection::Given(d)))
                .map_err(|_| {
                    de::Error::custom(format!(
                        "owd {other:?}: expected \"none\", \"min-observed\", \"drift-corrected\" or a duration"
                    ))
                }),
        }
    }
}

/// Which parameter a sweep varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SweepParameter {
    /// Drop exactly the k-th DATA-carrying packet (counted from 1, every
    /// transmission counts) that the first measured flow's sender puts on
    /// the forward path (003 §3: "a single packet from the flow was dropped").
    DropDataPacket,
    /// Bernoulli loss in percent on both directions (replaces the loss model).
    Loss,
    /// One-way propagation delay on both directions (two-host only).
    Delay,
    /// The (mean) interarrival time of the workloads of the flows that
    /// follow the variants (`constant`, `exponential`, `echo`): the offered
    /// load (001 §IV.D Figs. 7-8).
    Iat,
    /// How many identical flows each measured `[[flows]]` entry that
    /// follows the variants expands into (its `count`; 002 §5.2.5 Fig.
    /// 5.20's number of competing thin streams).
    Flows,
    /// The bottleneck rate of both directions (two-host: the forward and
    /// reverse links; dumbbell: the bottleneck links): netem-like text such
    /// as `"500kbit"` (003 Table 1's bandwidths). The links' queue limits
    /// and overhead are kept.
    Rate,
}

impl SweepParameter {
    pub const fn name(self) -> &'static str {
        match self {
            SweepParameter::DropDataPacket => "drop-data-packet",
            SweepParameter::Loss => "loss",
            SweepParameter::Delay => "delay",
            SweepParameter::Iat => "iat",
            SweepParameter::Flows => "flows",
            SweepParameter::Rate => "rate",
        }
    }
}

/// `[sweep]`: one axis (`parameter` with `values` or `from`/`to`/`step`),
/// or up to [`MAX_AXES`] axes (`axes = [{ parameter = ..., values = ... },
/// ...]`) whose cartesian product are the sweep's points, the first axis
/// outermost (003 §4's bandwidth × delay grids, each cell a sweep of the
/// dropped packet's position).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    #[serde(default)]
    pub parameter: Option<SweepParameter>,
    /// Explicit values: integers for `drop-data-packet`, percent numbers or
    /// `"5%"` for `loss`, durations for `delay`.
    #[serde(default)]
    pub values: Vec<toml::Value>,
    /// Integer range `from..=to` (alternative to `values`).
    #[serde(default)]
    pub from: Option<u64>,
    #[serde(default)]
    pub to: Option<u64>,
    #[serde(default)]
    pub step: Option<u64>,
    /// Several axes (instead of the keys above).
    #[serde(default)]
    pub axes: Vec<SweepAxis>,
}

/// Most axes of one sweep.
pub const MAX_AXES: usize = 3;

/// One axis of a sweep: a parameter and its values.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepAxis {
    pub parameter: SweepParameter,
    #[serde(default)]
    pub values: Vec<toml::Value>,
    #[serde(default)]
    pub from: Option<u64>,
    #[serde(default)]
    pub to: Option<u64>,
    #[serde(default)]
    pub step: Option<u64>,
}

/// One point of a sweep: one value per axis, in axis order (one value for
/// a one-axis sweep).
#[derive(Clone, Debug, PartialEq)]
pub struct GridPoint(pub Vec<SweepPoint>);

/// Joins the axis values of a point's label (`500kbit/5ms/9`).
pub const LABEL_SEPARATOR: &str = "/";

impl GridPoint {
    /// The point as text (results.json `value`, tables, `--points`): the
    /// value of a one-axis sweep as before, else the axis values joined by
    /// [`LABEL_SEPARATOR`].
    pub fn label(&self) -> String {
        self.labels().join(LABEL_SEPARATOR)
    }
    /// Each axis's value as text.
    pub fn labels(&self) -> Vec<String> {
        self.0.iter().map(SweepPoint::label).collect()
    }
    /// The values of every axis.
    pub fn coords(&self) -> &[SweepPoint] {
        &self.0
    }
}

/// One value of a sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SweepPoint {
    DropDataPacket(u64),
    Loss(Probability),
    Delay(Duration),
    Iat(Duration),
    Flows(u32),
    Rate(thinstream_base::Bitrate),
}

impl SweepPoint {
    /// Which parameter this value belongs to.
    pub const fn parameter(&self) -> SweepParameter {
        match self {
            SweepPoint::DropDataPacket(_) => SweepParameter::DropDataPacket,
            SweepPoint::Loss(_) => SweepParameter::Loss,
            SweepPoint::Delay(_) => SweepParameter::Delay,
            SweepPoint::Iat(_) => SweepParameter::Iat,
            SweepPoint::Flows(_) => SweepParameter::Flows,
            SweepPoint::Rate(_) => SweepParameter::Rate,
        }
    }

    /// The value as text (results.json, tables, `--points`).
    pub fn label(&self) -> String {
        match self {
            SweepPoint::DropDataPacket(k) => k.to_string(),
            SweepPoint::Flows(n) => n.to_string(),
            SweepPoint::Loss(p) => format!("{}%", trim_float(p.get() * 100.0)),
            SweepPoint::Delay(d) | SweepPoint::Iat(d) => serde_duration::to_text(*d),
            // In kbit/s, as 003's Table 1 gives bandwidths.
            SweepPoint::Rate(r) if r.0 % 1000 == 0 => format!("{}kbit", r.0 / 1000),
            SweepPoint::Rate(r) => format!("{}bit", r.0),
        }
    }
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

impl SweepSpec {
    /// The axes: the one the top-level keys describe, or `axes`.
    pub fn axes(&self) -> Result<Vec<SweepAxis>, String> {
        let single = self.parameter.is_some()
            || !self.values.is_empty()
            || self.from.is_some()
            || self.to.is_some()
            || self.step.is_some();
        match (single, self.axes.is_empty()) {
            (true, true) => Ok(vec![SweepAxis {
                parameter: self.parameter.ok_or("sweep: `parameter` is missing")?,
                values: self.values.clone(),
                from: self.from,
                to: self.to,
                step: self.step,
            }]),
            (false, false) => {
                if self.axes.len() > MAX_AXES {
                    return Err(format!(
                        "sweep: {} axes; at most {MAX_AXES}",
                        self.axes.len()
                    ));
                }
                for (i, a) in self.axes.iter().enumerate() {
                    if self.axes[..i].iter().any(|b| b.parameter == a.parameter) {
                        return Err(format!(
                            "sweep: parameter {:?} is on two axes",
                            a.parameter.name()
                        ));
                    }
                }
                Ok(self.axes.clone())
            }
            (true, false) => {
                Err("sweep: give either `parameter` with its values or `axes`, not both".into())
            }
            (false, true) => Err("sweep: `parameter` (or `axes`) is missing".into()),
        }
    }

    /// Every point: the cartesian product of the axes' values, the first
    /// axis outermost (the last one varies fastest).
    pub fn points(&self) -> Result<Vec<GridPoint>, String> {
        let axes = self.axes()?;
        let mut per_axis = Vec::with_capacity(axes.len());
        let mut total: u64 = 1;
        for a in &axes {
            let values = a.points()?;
            if values.is_empty() {
                return Err(format!("sweep {}: no values", a.parameter.name()));
            }
            total = total.saturating_mul(values.len() as u64);
            per_axis.push(values);
        }
        if total > 100_000 {
            return Err(format!("sweep: {total} points, more than 100000"));
        }
        let mut points = vec![GridPoint(Vec::new())];
        for values in &per_axis {
            points = points
                .into_iter()
                .flat_map(|p| {
                    values.iter().map(move |v| {
                        let mut q = p.0.clone();
                        q.push(*v);
                        GridPoint(q)
                    })
                })
                .collect();
        }
        Ok(points)
    }

    /// The parameters of the axes, in order (empty if the spec is invalid).
    pub fn parameters(&self) -> Vec<SweepParameter> {
        self.axes()
            .map(|a| a.iter().map(|x| x.parameter).collect())
            .unwrap_or_default()
    }

    /// The sweep's name: the parameter, or the axes' joined by ` x `.
    pub fn name(&self) -> String {
        self.parameters()
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(" x ")
    }

    /// Whether one of the axes is `p`.
    pub fn has(&self, p: SweepParameter) -> bool {
        self.parameters().contains(&p)
    }
}

impl SweepAxis {
    /// The axis's values in file order.
    pub fn points(&self) -> Result<Vec<SweepPoint>, String> {
        let explicit = !self.values.is_empty();
        let range = self.from.is_some() || self.to.is_some();
        if explicit == range {
            return Err(format!(
                "sweep {}: give either `values` or `from`/`to` (one of them)",
                self.parameter.name()
            ));
        }
        if range {
            let (Some(from), Some(to)) = (self.from, self.to) else {
                return Err("sweep: `from` and `to` go together".into());
            };
            let step = self.step.unwrap_or(1);
            if step == 0 || to < from {
                return Err("sweep: need from <= to and step >= 1".into());
            }
            if (to - from) / step >= 100_000 {
                return Err("sweep: more than 100000 points".into());
            }
            return (from..=to)
                .step_by(step as usize)
                .map(|v| self.point_from_int(v))
                .collect();
        }
        self.values.iter().map(|v| self.point(v)).collect()
    }

    fn point_from_int(&self, v: u64) -> Result<SweepPoint, String> {
        self.point(&toml::Value::Integer(i64::try_from(v).unwrap_or(i64::MAX)))
    }

    fn point(&self, v: &toml::Value) -> Result<SweepPoint, String> {
        let bad = |what: &str| format!("sweep {}: value {v} is not {what}", self.parameter.name());
        match self.parameter {
            SweepParameter::DropDataPacket => match v {
                toml::Value::Integer(k) if *k >= 1 => Ok(SweepPoint::DropDataPacket(*k as u64)),
                _ => Err(bad("a packet number >= 1")),
            },
            SweepParameter::Loss => {
                let pct = match v {
                    toml::Value::Integer(i) => *i as f64,
                    toml::Value::Float(f) => *f,
                    toml::Value::String(s) => s
                        .trim()
                        .trim_end_matches('%')
                        .parse::<f64>()
                        .map_err(|_| bad("a percentage"))?,
                    _ => return Err(bad("a percentage")),
                };
                Probability::new(pct / 100.0)
                    .map(SweepPoint::Loss)
                    .ok_or_else(|| bad("a percentage in [0, 100]"))
            }
            SweepParameter::Delay => match v {
                toml::Value::Integer(ms) if *ms >= 0 => {
                    Ok(SweepPoint::Delay(Duration::from_millis(*ms as u64)))
                }
                toml::Value::String(s) => Duration::parse(s)
                    .map(SweepPoint::Delay)
                    .map_err(|_| bad("a duration")),
                _ => Err(bad("a duration")),
            },
            SweepParameter::Flows => match v {
                toml::Value::Integer(n) if (1..=i64::from(MAX_FLOWS)).contains(n) => {
                    Ok(SweepPoint::Flows(*n as u32))
                }
                _ => Err(bad(&format!("a flow count from 1 to {MAX_FLOWS}"))),
            },
            SweepParameter::Rate => match v {
                toml::Value::String(s) => thinstream_base::Bitrate::parse(s)
                    .map(SweepPoint::Rate)
                    .map_err(|_| bad("a rate such as \"500kbit\"")),
                _ => Err(bad("a rate such as \"500kbit\"")),
            },
            SweepParameter::Iat => match v {
                toml::Value::Integer(ms) if *ms >= 1 => {
                    Ok(SweepPoint::Iat(Duration::from_millis(*ms as u64)))
                }
                toml::Value::String(s) => Duration::parse(s)
                    .ok()
                    .filter(|d| !d.is_zero())
                    .map(SweepPoint::Iat)
                    .ok_or_else(|| bad("a positive duration")),
                _ => Err(bad("a positive duration")),
            },
        }
    }
}

/// Most flows a topology can address (sim's `topology::MAX_FLOWS`).
const MAX_FLOWS: u32 = thinstream_sim::topology::MAX_FLOWS as u32;

impl Scenario {
    /// Reads, parses and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, LabError> {
        let text = std::fs::read_to_string(path).map_err(|e| LabError::Read {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Scenario::parse(&text, path)
    }

    /// Parses and validates scenario text; `path` is used for messages and
    /// to resolve relative paths.
    pub fn parse(text: &str, path: &Path) -> Result<Scenario, LabError> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| {
            let (line, column) = match e.span() {
                Some(span) => {
                    let (l, c) = line_col(text, span.start);
                    (Some(l), Some(c))
                }
                None => (None, None),
            };
            LabError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                message: one_line(e.message()),
            }
        })?;
        s.path = path.to_path_buf();
        let base = path.parent().unwrap_or(Path::new("."));
        for f in &mut s.flows {
            f.workload.resolve_paths(base);
        }
        s.validate()?;
        Ok(s)
    }

    fn invalid(&self, message: impl Into<String>) -> LabError {
        LabError::Invalid {
            path: self.path.clone(),
            message: message.into(),
        }
    }

    /// The `[[flows]]` entries as variant `v` runs them: its
    /// `workload_streams` replaces the stream count of every flow that
    /// follows the variants (validation made sure each such workload has
    /// one).
    pub fn flows_for(&self, v: &VariantSpec) -> Vec<FlowEntry> {
        self.flows_at(v, &[])
    }

    /// [`Self::flows_for`] at a sweep point (its values, one per axis;
    /// empty without a sweep): an `iat` value replaces the (mean)
    /// interarrival time of every flow that follows the variants, a `flows`
    /// value the count of the measured ones.
    pub fn flows_at(&self, v: &VariantSpec, point: &[SweepPoint]) -> Vec<FlowEntry> {
        self.flows
            .iter()
            .map(|f| {
                let mut f = f.clone();
                if f.preset.is_none() {
                    if let Some(w) = v.workload_streams.and_then(|n| f.workload.with_streams(n)) {
                        f.workload = w;
                    }
                    for x in point {
                        match *x {
                            SweepPoint::Iat(d) => {
                                if let Some(w) = f.workload.with_mean_iat(d) {
                                    f.workload = w;
                                }
                            }
                            SweepPoint::Flows(n)
                                if f.is_measured() && !f.workload.produces_flows() =>
                            {
                                f.count = n;
                            }
                            _ => {}
                        }
                    }
                }
                f
            })
            .collect()
    }

    /// Checks everything that does not need a transport preset.
    pub fn validate(&self) -> Result<(), LabError> {
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(self.invalid(format!(
                "name {:?}: use letters, digits, '-', '_' or '.' (it names the output folder)",
                self.name
            )));
        }
        if self.duration.is_zero() {
            return Err(self.invalid("duration must be positive"));
        }
        if self.repetitions == 0 {
            return Err(self.invalid("repetitions must be at least 1"));
        }
        if self.flows.is_empty() {
            return Err(self.invalid("at least one [[flows]] entry is needed"));
        }
        let mut total = 0u32;
        for (i, f) in self.flows.iter().enumerate() {
            if f.count == 0 {
                return Err(self.invalid(format!("flows[{i}].count must be at least 1")));
            }
            for r in f
                .receiver
                .iter()
                .chain(self.variants.iter().filter_map(|v| v.receiver.as_ref()))
            {
                if thinstream_proto::DelayedSack::receiver(r).is_none() {
                    return Err(self.invalid(format!(
                        "flows[{i}].receiver {r:?}: valid receivers: {}",
                        thinstream_proto::config::RECEIVERS.join(", ")
                    )));
                }
            }
            if f.workload.produces_flows() {
                self.validate_http(i, f)?;
            }
            total = total.saturating_add(f.expanded_count());
            if f.measured == Some(true) && f.preset.is_some() {
                // Allowed: a measured flow with a fixed preset is compared
                // across the other flows' variants.
            }
        }
        if total > MAX_FLOWS {
            return Err(self.invalid(format!(
                "{total} flows; at most {MAX_FLOWS} can be addressed"
            )));
        }
        if !self.flows.iter().any(FlowEntry::is_measured) {
            return Err(self.invalid("no flow is measured (set `measured = true` on one)"));
        }
        if self.variants.is_empty() {
            return Err(self.invalid("at least one [[variants]] entry is needed"));
        }
        let mut names = BTreeSet::new();
        for v in &self.variants {
            if v.name.is_empty() || v.name.contains(',') {
                return Err(self.invalid(format!(
                    "variant name {:?}: must be non-empty and contain no ','",
                    v.name
                )));
            }
            if !names.insert(v.name.as_str()) {
                return Err(self.invalid(format!("variant {:?} is listed twice", v.name)));
            }
            if let Some(n) = v.workload_streams {
                if n == 0 {
                    return Err(self.invalid(format!(
                        "variant {:?}: workload_streams must be at least 1",
                        v.name
                    )));
                }
                for (i, f) in self.flows.iter().enumerate() {
                    if f.preset.is_none() && f.workload.with_streams(n).is_none() {
                        return Err(self.invalid(format!(
                            "variant {:?}: workload_streams cannot apply to flows[{i}] (a {} workload takes its streams from elsewhere)",
                            v.name,
                            f.workload.kind_name()
                        )));
                    }
                }
            }
        }
        if let Some(b) = &self.metrics.baseline {
            if !names.contains(b.as_str()) {
                return Err(self.invalid(format!("metrics.baseline {b:?} is not a variant")));
            }
        }
        for (label, link) in self.links() {
            link.validate()
                .map_err(|e| self.invalid(format!("topology.{label}: {e}")))?;
        }
        if let TopologySpec::Dumbbell { access, .. } = &self.topology {
            // HTTP cross-traffic clients get their access links from their
            // RTTs (see `FlowEntry::http_clients`), so `access` covers the
            // other flows only.
            let listed = self.listed_flow_count();
            if access.len() > 1 && access.len() != listed {
                return Err(self.invalid(format!(
                    "topology.access lists {} entries for {listed} flows (HTTP cross-traffic \
                     clients not counted): give one per flow or one for all",
                    access.len()
                )));
            }
        }
        if let Some(t) = &self.metrics.throughput {
            if t.interval.is_zero() {
                return Err(self.invalid("metrics.throughput.interval must be positive"));
            }
        }
        if let Some(sweep) = &self.sweep {
            let points = sweep.points().map_err(|m| self.invalid(m))?;
            if points.is_empty() {
                return Err(self.invalid("sweep has no values"));
            }
            if sweep.has(SweepParameter::Delay)
                && !matches!(self.topology, TopologySpec::TwoHost { .. })
            {
                return Err(self.invalid("sweep parameter \"delay\" needs a two-host topology"));
            }
            if sweep.has(SweepParameter::Flows) {
                if let TopologySpec::Dumbbell { access, .. } = &self.topology {
                    if access.len() > 1 {
                        return Err(self.invalid(
                            "sweep parameter \"flows\" needs one `access` entry for all flows (the flow count changes per point)",
                        ));
                    }
                }
                let fixed: u32 = self
                    .flows
                    .iter()
                    .filter(|f| {
                        !(f.preset.is_none() && f.is_measured()) || f.workload.produces_flows()
                    })
                    .map(FlowEntry::expanded_count)
                    .sum();
                let swept = self
                    .flows
                    .iter()
                    .filter(|f| {
                        f.preset.is_none() && f.is_measured() && !f.workload.produces_flows()
                    })
                    .count() as u32;
                let most = points
                    .iter()
                    .flat_map(|p| p.coords())
                    .filter_map(|p| match p {
                        SweepPoint::Flows(n) => Some(*n),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(0);
                if fixed.saturating_add(swept.saturating_mul(most)) > MAX_FLOWS {
                    return Err(self.invalid(format!(
                        "sweep flows: {most} flows per swept entry make more than {MAX_FLOWS} flows"
                    )));
                }
            }
            if sweep.has(SweepParameter::Iat) {
                for (i, f) in self.flows.iter().enumerate() {
                    if f.preset.is_none()
                        && f.workload.with_mean_iat(Duration::from_millis(1)).is_none()
                    {
                        return Err(self.invalid(format!(
                            "sweep parameter \"iat\": flows[{i}] has a {} workload (constant, exponential or echo needed)",
                            f.workload.kind_name()
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Every configured link with a label, for validation and printing.
    pub fn links(&self) -> Vec<(String, &LinkConfig)> {
        match &self.topology {
            TopologySpec::TwoHost { forward, reverse } => vec![
                ("forward".into(), &forward.0),
                ("reverse".into(), &reverse.as_ref().unwrap_or(forward).0),
            ],
            TopologySpec::Dumbbell {
                bottleneck_forward,
                bottleneck_reverse,
                access,
            } => {
                let mut v = vec![
                    ("bottleneck_forward".into(), &bottleneck_forward.0),
                    (
                        "bottleneck_reverse".into(),
                        &bottleneck_reverse.as_ref().unwrap_or(bottleneck_forward).0,
                    ),
                ];
                for (i, a) in access.iter().enumerate() {
                    v.push((format!("access[{i}].a"), &a.a.0));
                    v.push((format!("access[{i}].b"), &a.b.0));
                }
                v
            }
        }
    }

    /// Total number of flows after `count` and HTTP-client expansion.
    pub fn flow_count(&self) -> usize {
        self.flows.iter().map(|f| f.expanded_count() as usize).sum()
    }

    /// Flows that `topology.access` describes: every flow but HTTP clients.
    pub fn listed_flow_count(&self) -> usize {
        self.flows
            .iter()
            .filter(|f| !f.workload.produces_flows())
            .map(|f| f.count as usize)
            .sum()
    }

    /// An `http` workload (000 §6.2, 002 §5.1.3) expands into one TCP
    /// connection per client across a dumbbell; it is cross traffic, so it
    /// has a fixed preset and is not measured.
    fn validate_http(&self, i: usize, f: &FlowEntry) -> Result<(), LabError> {
        if !matches!(self.topology, TopologySpec::Dumbbell { .. }) {
            return Err(self.invalid(format!(
                "flows[{i}]: HTTP cross traffic needs a dumbbell topology (each client gets \
                 its own access links for its RTT)"
            )));
        }
        if f.transport != Some(TransportKind::Tcp) || f.preset.is_none() {
            return Err(self.invalid(format!(
                "flows[{i}]: HTTP cross traffic needs `transport = \"tcp\"` and a fixed \
                 `preset` (e.g. \"newreno\"); it does not follow the variants"
            )));
        }
        if f.measured == Some(true) {
            return Err(self.invalid(format!(
                "flows[{i}]: HTTP cross traffic cannot be measured (report the bottleneck \
                 statistics instead)"
            )));
        }
        if f.count != 1 {
            return Err(self.invalid(format!(
                "flows[{i}]: an HTTP workload already stands for all its clients; use `clients`, not `count`"
            )));
        }
        if f.peer.is_some_and(|p| p != PeerKind::Sink) {
            return Err(self.invalid(format!("flows[{i}]: HTTP cross traffic has a sink peer")));
        }
        Ok(())
    }

    /// The scenario's folder (for relative paths).
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }
}

/// 1-based line and column of byte offset `at`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
