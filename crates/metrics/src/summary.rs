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

use crate::flow::{FlowAnalysis, LatencyKind};
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
}

impl Summary {
    /// Summarises `flow` with the latency kind of its options.
    pub fn of(flow: &FlowAnalysis) -> Summary {
        let kind = flow.options().summary_latency;
        let by_retransmissions = flow
            .by_retransmissions(kind)
            .iter()
            .map(|g| RetransmissionRow {
                retransmissions: g.retransmissions,
                or_more: g.or_more,
                count: g.stats.map_or(0, |s| s.count),
                mean_ms: g.stats.map(|s| s.mean_ms()),
                p50_ms: g.stats.map(|s| ms(s.p50)),
                p99_ms: g.stats.map(|s| ms(s.p99)),
                max_ms: g.stats.map(|s| ms(s.max)),
            })
            .collect();
        let reasons = TxReason::ALL
            .iter()
            .map(|r| {
                (
                    r.name().to_string(),
                    flow.reasons().get(r).copied().unwrap_or(0),
                )
            })
            .collect();
        Summary {
            messages: flow.messages().len() as u64,
            delivered: flow.has_receiver_trace().then(|| {
                flow.messages()
                    .iter()
                    .filter(|m| m.delivered.is_some())
                    .count() as u64
            }),
            abandoned: flow.messages().iter().filter(|m| m.abandoned).count() as u64,
            latency: kind,
            latency_ms: flow.latency_stats(kind).as_ref().map(LatencyMs::from),
            by_retransmissions,
            reasons,
            spurious: flow.spurious(),
            tohd: flow.tohd(),
            loss_rate: flow.loss().map(|l| l.rate),
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
