//! One run reduced to what `results.json` is pooled from: a [`RunRecord`].
//!
//! [`Results::build`](crate::Results::build) turns every
//! [`RunOutcome`] into a record and pools the records
//! ([`Results::from_records`](crate::Results::from_records)); the shards of
//! a sweep store records ([`crate::shard`]) and a merge pools the records it
//! reads back. One pooling code path, so a merged `results.json` is the one
//! a full run writes (the `wall_s` fields apart).

use serde::{Deserialize, Serialize};
use thinstream_base::{Duration, Instant};
use thinstream_metrics::{FlowDigest, LatencyKind, ResponseSample};

use crate::plan::RunSpec;
use crate::runner::RunOutcome;
use crate::scenario::Scenario;

/// What one run contributes to the pooled results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub spec: RunSpec,
    /// Simulator events processed.
    pub events: u64,
    /// Packets handed to a link, over every link ([`RunOutcome::packet_hops`]).
    #[serde(default)]
    pub packet_hops: u64,
    /// Virtual time at which the run stopped.
    pub end: Instant,
    /// Wall-clock seconds of the run (not deterministic).
    pub wall_s: f64,
    pub fault: Option<String>,
    /// `drop-data-packet` sweeps: the transfer time of the message hit.
    pub mtt: Option<Duration>,
    /// One digest per measured flow, in flow order, with the samples of
    /// [`latency_kinds`] of the scenario.
    pub flows: Vec<FlowDigest>,
    pub throughput: Vec<crate::fairness::EntrySeries>,
    pub responses: Vec<ResponseSample>,
    pub bottleneck: Option<crate::fairness::BottleneckRun>,
    pub worst: Option<crate::worst::WorstPath>,
}

/// The latency kinds results.json reports for `scenario`: the summary's,
/// then the `[metrics] also` kinds, each once.
pub fn latency_kinds(scenario: &Scenario) -> Vec<LatencyKind> {
    let mut kinds = vec![scenario.metrics.latency];
    for k in &scenario.metrics.also {
        if !kinds.contains(k) {
            kinds.push(*k);
        }
    }
    kinds
}

impl RunRecord {
    /// The record of `outcome`, with latency samples of `kinds` (a streamed
    /// outcome's digests hold the samples of [`latency_kinds`]).
    pub fn of(outcome: &RunOutcome, kinds: &[LatencyKind]) -> RunRecord {
        RunRecord {
            spec: outcome.spec,
            events: outcome.events,
            packet_hops: outcome.packet_hops,
            end: outcome.end,
            wall_s: outcome.wall_s,
            fault: outcome.fault.clone(),
            mtt: outcome.mtt,
            flows: match &outcome.digests {
                Some(d) => d.clone(),
                None => outcome.flows.iter().map(|f| f.digest(kinds)).collect(),
            },
            throughput: outcome.throughput.clone(),
            responses: outcome.responses.clone(),
            bottleneck: outcome.bottleneck,
            worst: outcome.worst.clone(),
        }
    }
}
