//! What pooling needs of a flow, and nothing more: a [`FlowDigest`].
//!
//! [`Summary::pooled`](crate::Summary::pooled) reduces each
//! [`FlowAnalysis`] to a digest and pools the digests with
//! [`Summary::pooled_digests`](crate::Summary::pooled_digests), so a summary
//! pooled from digests that were stored and read back (e.g. the shards of a
//! sweep run on several machines, merged later) is the one pooled from the
//! analyses themselves, to the byte.
//!
//! A digest holds counters (fixed size), the reason table, the waiting
//! times of undelivered messages, and, per latency kind asked for, one
//! [`LatencySample`] per message that has that latency (in submission
//! order). The latency samples are what the exact nearest-rank percentiles
//! need; everything else adds up.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thinstream_base::trace::TxReason;

use crate::flow::{FlowAnalysis, LatencyKind, LossMethod, ReasonRow, RecoveryCounts};
use crate::hist::LatencyHistogram;

/// One message's latency of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencySample {
    /// The message's retransmission count ([`crate::MessageOutcome::retransmissions`]).
    pub retransmissions: u32,
    pub nanos: u64,
}

/// A loss estimate's method and counts (the rate is recomputed from the
/// pooled counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LossCounts {
    pub method: LossMethod,
    pub sent: u64,
    pub counted: u64,
}

/// The per-flow facts [`Summary`](crate::Summary), latency CDFs and
/// retransmission-cause tables are pooled from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowDigest {
    /// Messages submitted.
    pub messages: u64,
    /// Messages with abandoned units.
    pub abandoned: u64,
    /// Messages delivered (`None` without a receiver trace).
    pub delivered: Option<u64>,
    /// With a receiver trace: how long each message that was neither
    /// delivered nor abandoned had waited at the end of the trace, ns.
    pub undelivered_waited_nanos: Option<Vec<u64>>,
    pub recovery: RecoveryCounts,
    /// Data pieces sent per reason (every reason, zeros too).
    pub reasons: BTreeMap<TxReason, u64>,
    pub reason_table: Vec<ReasonRow>,
    pub spurious: Option<u64>,
    pub spurious_by_reason: Option<BTreeMap<TxReason, u64>>,
    pub payload_bytes_sent: u64,
    pub unique_bytes_sent: u64,
    pub loss: Option<LossCounts>,
    /// Per latency kind asked for: the samples, in submission order.
    /// Kinds not asked for are absent (pooling an absent kind is a
    /// programming error and pools no samples).
    pub latencies: BTreeMap<LatencyKind, Vec<LatencySample>>,
    /// Per latency kind whose samples a streaming analysis
    /// ([`crate::FlowStream::with_sample_limit`]) put in a histogram once
    /// there were more than its limit: the distribution (and no samples
    /// for that kind in `latencies`). Pooling with any histogram gives
    /// percentiles within the histogram's bound ([`crate::LatencyHistogram`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub histograms: BTreeMap<LatencyKind, LatencyHistogram>,
}

impl FlowDigest {
    /// The samples of `kind` (empty if the kind was not digested).
    pub fn samples(&self, kind: LatencyKind) -> &[LatencySample] {
        self.latencies.get(&kind).map_or(&[], Vec::as_slice)
    }

    /// The distribution of `kind` pooled over `flows` in one histogram, if
    /// any of them holds a histogram of that kind (exact samples are
    /// recorded into it); `None` if all of them hold exact samples.
    pub fn pooled_histogram<'a>(
        flows: impl IntoIterator<Item = &'a FlowDigest>,
        kind: LatencyKind,
    ) -> Option<LatencyHistogram> {
        let flows: Vec<&FlowDigest> = flows.into_iter().collect();
        if !flows.iter().any(|f| f.histograms.contains_key(&kind)) {
            return None;
        }
        let mut h = LatencyHistogram::new();
        for f in flows {
            if let Some(mine) = f.histograms.get(&kind) {
                h.merge(mine);
            }
            for s in f.samples(kind) {
                h.record(s.retransmissions, s.nanos);
            }
        }
        Some(h)
    }
}

impl FlowAnalysis {
    /// The digest of this flow with the latency samples of `kinds`.
    pub fn digest(&self, kinds: &[LatencyKind]) -> FlowDigest {
        let undelivered_waited_nanos = self.has_receiver_trace().then(|| {
            let end = self.span().map(|(_, e)| e);
            self.messages()
                .iter()
                .filter(|m| m.delivered.is_none() && !m.abandoned)
                .map(|m| end.map_or(0, |e| e.saturating_duration_since(m.sent).as_nanos()))
                .collect()
        });
        FlowDigest {
            messages: self.messages().len() as u64,
            abandoned: self.messages().iter().filter(|m| m.abandoned).count() as u64,
            delivered: self.has_receiver_trace().then(|| {
                self.messages()
                    .iter()
                    .filter(|m| m.delivered.is_some())
                    .count() as u64
            }),
            undelivered_waited_nanos,
            recovery: *self.recovery(),
            reasons: self.reasons().clone(),
            reason_table: self.reason_table(),
            spurious: self.spurious(),
            spurious_by_reason: self.spurious_by_reason(),
            payload_bytes_sent: self.payload_bytes_sent(),
            unique_bytes_sent: self.unique_bytes_sent(),
            loss: self.loss().map(|l| LossCounts {
                method: l.method,
                sent: l.sent,
                counted: l.counted,
            }),
            latencies: kinds
                .iter()
                .map(|k| {
                    (
                        *k,
                        self.latencies(*k)
                            .into_iter()
                            .map(|(m, l)| LatencySample {
                                retransmissions: m.retransmissions,
                                nanos: l.as_nanos(),
                            })
                            .collect(),
                    )
                })
                .collect(),
            histograms: BTreeMap::new(),
        }
    }
}
