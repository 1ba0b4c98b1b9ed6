//! The compact per-variant result that `thinstream run` stores as JSON.
//!
//! Shape (field order fixed by declaration order; maps are `BTreeMap`s, so
//! the same analysis always serializes to the same bytes; every float is
//! computed from integers in a fixed order; absent values are `null`):
//!
//! ```json
//! {"messages":3,"delivered":3,"abandoned":0,"latency":"application",
//!  "latency_ms":{"mean":..,"p50":..,"p90":..,"p99":..,"p999":..,"max":..},
//!  "by_retransmissions":[{"retransmissions":0,"or_more":false,"count":2,
//!     "mean_ms":..,"p50_ms":..,"p99_ms":..,"max_ms":..}, ... 4 rows ...],
//!  "reasons":{"bundled-on-rtx":0,...,"new":3,...},
//!  "spurious":0,"tohd":0.0476,"loss_rate":0.05}
//! ```
//!
//! `by_retransmissions` always has four rows (0, 1, 2, and 3 with
//! `or_more: true`); `reasons` always names every [`TxReason`] by
//! [`TxReason::name`], counting data pieces. `tohd` and `loss_rate` are
//! fractions, not percent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thinstream_base::trace::TxReason;
use thinstream_base::Duration;

use crate::digest::FlowDigest;
use crate::flow::{FlowAnalysis, LatencyKind, LossMethod};
use crate::stats::LatencyStats;

fn ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

/// Latency distribution in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl From<&LatencyStats> for LatencyMs {
    fn from(s: &LatencyStats) -> Self {
        LatencyMs {
            mean: s.mean_ms(),
            p50: ms(s.p50),
            p90: ms(s.p90),
            p99: ms(s.p99),
            p999: ms(s.p999),
            max: ms(s.max),
        }
    }
}

/// One row of the per-retransmission-count table.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetransmissionRow {
    pub retransmissions: u32,
    pub or_more: bool,
    pub count: u64,
    pub mean_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// The per-flow (or per-variant) summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Messages submitted.
    pub messages: u64,
    /// Messages delivered to the receiving application (`null` without a receiver trace).
    pub delivered: Option<u64>,
    /// Messages with abandoned units (partial reliability).
    pub abandoned: u64,
    /// Which latency `latency_ms` and `by_retransmissions` describe.
    pub latency: LatencyKind,
    pub latency_ms: Option<LatencyMs>,
    pub by_retransmissions: Vec<RetransmissionRow>,
    pub reasons: BTreeMap<String, u64>,
    pub spurious: Option<u64>,
    pub tohd: Option<f64>,
    pub loss_rate: Option<f64>,
    /// Spurious retransmitted pieces by reason (retransmission reasons
    /// only, zeros included; `null` without a receiver trace).
    #[serde(default)]
    pub spurious_by_reason: Option<BTreeMap<String, u64>>,
    /// Spurious retransmitted pieces other than redundant copies (RDB
    /// copies of data that arrived are spurious by design).
    #[serde(default)]
    pub spurious_excluding_redundant: Option<u64>,
    /// Timeout retransmissions (`timeout-rtx` pieces): for SCTP one per T3
    /// expiry (the lowest outstanding chunk; the rest ride along as
    /// `bundled-on-rtx`).
    #[serde(default)]
    pub t3_expiries: u64,
    /// Of those, expiries whose retransmitted chunk had already arrived.
    #[serde(default)]
    pub t3_spurious: Option<u64>,
    /// Payload bytes sent as redundant copies (RDB).
    #[serde(default)]
    pub redundant_bytes: u64,
    /// `tohd` split: redundant copies / ω and everything else that repeats
    /// data (retransmissions and what rides along with them) / ω; the two
    /// add up to `tohd`.
    #[serde(default)]
    pub tohd_redundant: Option<f64>,
    #[serde(default)]
    pub tohd_retransmissions: Option<f64>,
    /// RTT samples that reached the estimator, and those measured on data.
    #[serde(default)]
    pub rtt_samples: u64,
    #[serde(default)]
    pub data_rtt_samples: u64,
    /// Share of the sending window classified thin (`null` if the sender
    /// did not track the verdict), and verdict changes.
    #[serde(default)]
    pub thin_share: Option<f64>,
    #[serde(default)]
    pub thin_transitions: u64,
    /// Messages neither delivered nor given up (partial reliability) when
    /// the run ended: still queued or in flight, e.g. a sender that could
    /// not keep up. The latency statistics cover delivered messages only,
    /// so they say nothing about these. `null` without a receiver trace.
    #[serde(default)]
    pub undelivered: Option<u64>,
    /// How long the undelivered messages had waited when the run ended
    /// (from their application send time to the end of the trace): the
    /// longest and the median, in ms. `null` when there are none.
    #[serde(default)]
    pub undelivered_waited_max_ms: Option<f64>,
    #[serde(default)]
    pub undelivered_waited_p50_ms: Option<f64>,
    /// Mean of the RTT samples that reached the estimator, and mean of the
    /// RTO values it set (each `Rto` record counts once), ms; `null`
    /// without samples or records (000 Fig. 4: calculated RTO).
    #[serde(default)]
    pub rtt_sample_mean_ms: Option<f64>,
    #[serde(default)]
    pub rto_mean_ms: Option<f64>,
    /// Timeout retransmissions (per packet) and how long the timer actually
    /// ran before each: the time since the oldest timed-out piece was last
    /// sent, mean and maximum, ms (000 Fig. 4's measured RTO: above the
    /// calculated one when restarts on partial acknowledgements pushed the
    /// expiry out). `null` without a timeout or in the streaming analysis.
    #[serde(default)]
    pub rto_measured_count: u64,
    #[serde(default)]
    pub rto_measured_mean_ms: Option<f64>,
    #[serde(default)]
    pub rto_measured_max_ms: Option<f64>,
    /// At those expiries, the mean RTO in force when the timer fired (the
    /// value set before that instant, back-offs included), ms: the
    /// calculated counterpart of `rto_measured_mean_ms` (a timer armed
    /// before a later RTT sample changed the RTO runs with the older value).
    #[serde(default)]
    pub rto_at_expiry_mean_ms: Option<f64>,
}

impl Summary {
    /// Summarises `flow` with the latency kind of its options.
    pub fn of(flow: &FlowAnalysis) -> Summary {
        Summary::pooled([flow], flow.options().summary_latency)
    }

    /// One summary for several flows of a variant (e.g. the parallel thin
    /// streams of 002 §5.2.1): latency samples are pooled before the
    /// statistics are taken; counts, bytes and packets are summed, so `tohd`
    /// is `Σ(ω − unique) / Σω` and the loss rate uses the summed packet
    /// counts. The loss rate is `null` if the flows mix eq. 5.1 and eq. 5.2;
    /// `delivered` and `spurious` are `null` if any flow lacks what they need.
    pub fn pooled<'a>(
        flows: impl IntoIterator<Item = &'a FlowAnalysis>,
        kind: LatencyKind,
    ) -> Summary {
        let digests: Vec<FlowDigest> = flows.into_iter().map(|f| f.digest(&[kind])).collect();
        Summary::pooled_digests(&digests, kind)
    }

    /// [`Summary::pooled`] from the flows' digests (which must hold the
    /// samples of `kind`): the same summary, to the byte, whether the
    /// digests were just made or stored and read back.
    pub fn pooled_digests<'a>(
        flows: impl IntoIterator<Item = &'a FlowDigest>,
        kind: LatencyKind,
    ) -> Summary {
        let flows: Vec<&FlowDigest> = flows.into_iter().collect();
        let mut all: Vec<u64> = Vec::new();
        let mut groups: [Vec<u64>; 4] = Default::default();
        let mut messages = 0u64;
        let mut delivered = Some(0u64);
        let mut abandoned = 0u64;
        let mut spurious = Some(0u64);
        let mut reasons: BTreeMap<TxReason, u64> = TxReason::ALL.iter().map(|r| (*r, 0)).collect();
        let (mut omega, mut unique) = (0u64, 0u64);
        let mut loss: Option<(LossMethod, u64, u64)> = None;
        let mut loss_known = true;
        let mut spurious_by_reason: Option<BTreeMap<TxReason, u64>> = Some(
            TxReason::ALL
                .iter()
                .filter(|r| r.is_retransmission())
                .map(|r| (*r, 0))
                .collect(),
        );
        let mut t3_expiries = 0u64;
        let (mut redundant, mut rtt_samples, mut data_rtt_samples, mut transitions) =
            (0u64, 0u64, 0u64, 0u64);
        let mut thin: Option<(u64, u64)> = None;
        let mut waited: Vec<u64> = Vec::new();
        let mut undelivered_known = !flows.is_empty();
        let (mut rtt_nanos, mut rto_updates, mut rto_nanos) = (0u64, 0u64, 0u64);
        let (mut fired, mut fired_nanos, mut fired_max) = (0u64, 0u64, 0u64);
        let (mut in_force, mut in_force_nanos) = (0u64, 0u64);
        for f in &flows {
            match &f.undelivered_waited_nanos {
                Some(w) => waited.extend_from_slice(w),
                None => undelivered_known = false,
            }
            let rc = &f.recovery;
            rtt_nanos = rtt_nanos.saturating_add(rc.rtt_sample_nanos);
            rto_updates += rc.rto_updates;
            rto_nanos = rto_nanos.saturating_add(rc.rto_nanos);
            fired += rc.rto_measured;
            fired_nanos = fired_nanos.saturating_add(rc.rto_measured_nanos);
            fired_max = fired_max.max(rc.rto_measured_max_nanos);
            in_force += rc.rto_in_force;
            in_force_nanos = in_force_nanos.saturating_add(rc.rto_in_force_nanos);
            redundant += rc.redundant_bytes;
            rtt_samples += rc.rtt_samples;
            data_rtt_samples += rc.data_rtt_samples;
            transitions += rc.thin_transitions;
            if let Some((t, w)) = rc.thin_time {
                let (a, b) = thin.unwrap_or((0, 0));
                thin = Some((a + t.as_nanos(), b + w.as_nanos()));
            }
            t3_expiries += f
                .reasons
                .get(&TxReason::TimeoutRetransmit)
                .copied()
                .unwrap_or(0);
            spurious_by_reason = match (spurious_by_reason, &f.spurious_by_reason) {
                (Some(mut all), Some(mine)) => {
                    for (r, c) in mine {
                        *all.entry(*r).or_insert(0) += c;
                    }
                    Some(all)
                }
                _ => None,
            };
            for s in f.samples(kind) {
                all.push(s.nanos);
                groups[(s.retransmissions as usize).min(3)].push(s.nanos);
            }
            messages += f.messages;
            abandoned += f.abandoned;
            delivered = delivered.zip(f.delivered).map(|(d, mine)| d + mine);
            spurious = spurious.zip(f.spurious).map(|(a, b)| a + b);
            for (r, c) in &f.reasons {
                *reasons.entry(*r).or_insert(0) += c;
            }
            omega += f.payload_bytes_sent;
            unique += f.unique_bytes_sent.min(f.payload_bytes_sent);
            match (f.loss, loss) {
                (None, _) => {}
                (Some(l), None) => loss = Some((l.method, l.sent, l.counted)),
                (Some(l), Some((m, s, c))) if l.method == m => {
                    loss = Some((m, s + l.sent, c + l.counted))
                }
                (Some(_), Some(_)) => loss_known = false,
            }
        }
        let stats = |mut v: Vec<u64>| {
            v.sort_unstable();
            LatencyStats::from_sorted_nanos(&v)
        };
        // Past a streaming analysis's sample limit: from one histogram.
        let hist = FlowDigest::pooled_histogram(flows.iter().copied(), kind);
        let overall = match &hist {
            Some(h) => h.stats(None),
            None => stats(all),
        };
        let by_retransmissions = groups
            .into_iter()
            .enumerate()
            .map(|(i, g)| {
                let s = match &hist {
                    Some(h) => h.stats(Some(i)),
                    None => stats(g),
                };
                RetransmissionRow {
                    retransmissions: i as u32,
                    or_more: i == 3,
                    count: s.map_or(0, |s| s.count),
                    mean_ms: s.map(|s| s.mean_ms()),
                    p50_ms: s.map(|s| ms(s.p50)),
                    p99_ms: s.map(|s| ms(s.p99)),
                    max_ms: s.map(|s| ms(s.max)),
                }
            })
            .collect();
        let loss_rate = match loss {
            Some((LossMethod::SenderAndReceiver, sent, received)) if loss_known && sent > 0 => {
                Some(sent.saturating_sub(received) as f64 / sent as f64)
            }
            Some((LossMethod::SenderOnly, sent, rtx)) if loss_known && sent > 0 => {
                Some(rtx as f64 / sent as f64)
            }
            _ => None,
        };
        let spurious_known = !flows.is_empty() && spurious_by_reason.is_some();
        let spurious_by_reason = spurious_by_reason.filter(|_| spurious_known);
        let tohd_part = |bytes: u64| (omega > 0).then(|| bytes as f64 / omega as f64);
        let repeated = omega - unique;
        Summary {
            spurious_excluding_redundant: spurious_by_reason.as_ref().map(|m| {
                m.iter()
                    .filter(|(r, _)| **r != TxReason::RedundantBundle)
                    .map(|(_, c)| c)
                    .sum()
            }),
            t3_spurious: spurious_by_reason
                .as_ref()
                .map(|m| m.get(&TxReason::TimeoutRetransmit).copied().unwrap_or(0)),
            spurious_by_reason: spurious_by_reason.map(|m| {
                m.into_iter()
                    .map(|(r, c)| (r.name().to_string(), c))
                    .collect()
            }),
            t3_expiries,
            redundant_bytes: redundant,
            tohd_redundant: tohd_part(redundant.min(repeated)),
            tohd_retransmissions: tohd_part(repeated - redundant.min(repeated)),
            rtt_samples,
            data_rtt_samples,
            thin_share: thin.and_then(|(t, w)| (w > 0).then(|| t as f64 / w as f64)),
            thin_transitions: transitions,
            undelivered: undelivered_known.then_some(waited.len() as u64),
            undelivered_waited_max_ms: waited.iter().max().map(|w| *w as f64 / 1e6),
            undelivered_waited_p50_ms: {
                waited.sort_unstable();
                crate::stats::percentile_sorted(&waited, 0.5).map(|w| w as f64 / 1e6)
            },
            rtt_sample_mean_ms: (rtt_samples > 0)
                .then(|| rtt_nanos as f64 / rtt_samples as f64 / 1e6),
            rto_mean_ms: (rto_updates > 0).then(|| rto_nanos as f64 / rto_updates as f64 / 1e6),
            rto_measured_count: fired,
            rto_measured_mean_ms: (fired > 0).then(|| fired_nanos as f64 / fired as f64 / 1e6),
            rto_measured_max_ms: (fired > 0).then(|| fired_max as f64 / 1e6),
            rto_at_expiry_mean_ms: (in_force > 0)
                .then(|| in_force_nanos as f64 / in_force as f64 / 1e6),
            messages,
            delivered: if flows.is_empty() { None } else { delivered },
            abandoned,
            latency: kind,
            latency_ms: overall.as_ref().map(LatencyMs::from),
            by_retransmissions,
            reasons: reasons
                .into_iter()
                .map(|(r, c)| (r.name().to_string(), c))
                .collect(),
            spurious: if flows.is_empty() { None } else { spurious },
            tohd: (omega > 0).then(|| (omega - unique) as f64 / omega as f64),
            loss_rate,
        }
    }

    /// Compact JSON (deterministic for a given summary).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

impl FlowAnalysis {
    /// Shorthand for [`Summary::of`].
    pub fn summary(&self) -> Summary {
        Summary::of(self)
    }
}

fn cell(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.decimals$}"))
}

/// A Markdown table of summaries, one row per `(variant name, summary)`, in
/// the layout of the documents' result tables: latency in ms (one decimal),
/// the 99th percentile per retransmission group, `tohd` and loss in percent
/// (two decimals), `-` where a value is unknown.
pub fn markdown_table(rows: &[(&str, &Summary)]) -> String {
    let mut out = String::from(
        "| variant | latency | messages | delivered | mean | p50 | p99 | p99.9 | max | p99 rtx 1 | p99 rtx 2 | p99 rtx 3+ | tohd % | loss % | spurious |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (name, s) in rows {
        let l = s.latency_ms;
        let rtx = |i: usize| cell(s.by_retransmissions.get(i).and_then(|r| r.p99_ms), 1);
        out.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            s.latency.name(),
            s.messages,
            s.delivered
                .map_or_else(|| "-".to_string(), |d| d.to_string()),
            cell(l.map(|l| l.mean), 1),
            cell(l.map(|l| l.p50), 1),
            cell(l.map(|l| l.p99), 1),
            cell(l.map(|l| l.p999), 1),
            cell(l.map(|l| l.max), 1),
            rtx(1),
            rtx(2),
            rtx(3),
            cell(s.tohd.map(|t| t * 100.0), 2),
            cell(s.loss_rate.map(|t| t * 100.0), 2),
            s.spurious
                .map_or_else(|| "-".to_string(), |d| d.to_string()),
        ));
    }
    out
}
