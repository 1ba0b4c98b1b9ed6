//! Metrics from trace records: latencies, retransmission statistics,
//! overhead, throughput, fairness.
//!
//! Everything is computed from [`thinstream_base::trace::Record`]s, joined
//! on units (SCTP: one unit per DATA chunk; TCP: one unit per byte), never
//! from payloads. The definitions follow the documents:
//!
//! * ACK latency, transport- and application-layer delivery latency with
//!   the one-way delay removed (002 §5.1.6, §5.1.9) — [`FlowAnalysis`],
//!   [`LatencyKind`], [`OwdCorrection`];
//! * statistics grouped by the number of retransmissions a message needed
//!   (002 Fig. 5.6) — [`FlowAnalysis::by_retransmissions`];
//! * retransmission reasons and spurious retransmissions (002 §5.1.6,
//!   §5.3.4) — [`FlowAnalysis::reasons`], [`FlowAnalysis::spurious`],
//!   [`FlowAnalysis::reason_table`];
//! * loss estimation, Definitions 1 and 2 (002 §5.1.7) — [`FlowAnalysis::loss`];
//! * transmission overhead, Definition 3 (002 §5.1.8) — [`FlowAnalysis::tohd`];
//! * throughput per interval and Jain's fairness index (002 §5.2.5,
//!   §5.3.6) — [`FlowAnalysis::throughput`], [`jain_index`];
//! * message transfer time per loss position (003 §3) —
//!   [`transfer_time_at_loss`], [`mtt_reduction`], [`mean_ci95`];
//! * response time of request/echo transactions (001 §IV.A) — [`response_times`];
//! * nearest-rank percentiles, CDFs ([`Cdf`]) and the JSON [`Summary`].
//!
//! ```
//! use thinstream_base::trace::{Record, SentData, TxReason, Units};
//! use thinstream_base::Instant;
//! use thinstream_metrics::{AnalysisOptions, FlowAnalysis, LatencyKind};
//!
//! let at = Instant::from_millis;
//! let sender = vec![
//!     Record::Submitted { time: at(0), message: 0, stream: 0, bytes: 100, unordered: false, units: Units::one(0) },
//!     Record::PacketSent {
//!         time: at(0),
//!         wire_bytes: 148,
//!         data: thinstream_base::trace::pieces![SentData { units: Units::one(0), bytes: 100, reason: TxReason::New }],
//!         control: 0,
//!     },
//!     Record::Acked { time: at(40), units: Units::one(0) },
//! ];
//! let receiver = vec![
//!     Record::Arrived { time: at(20), units: Units::one(0), bytes: 100, duplicate: false },
//!     Record::Delivered { time: at(20), stream: 0, bytes: 100, unordered: false, units: Units::one(0) },
//! ];
//! let flow = FlowAnalysis::new(&sender, Some(&receiver), AnalysisOptions::default())?;
//! assert_eq!(flow.latency_stats(LatencyKind::AckFromFirstTx).unwrap().max.as_millis(), 40);
//! let json = flow.summary().to_json().unwrap();
//! assert!(json.starts_with(r#"{"messages":1,"delivered":1,"#));
//! # Ok::<(), thinstream_metrics::MetricsError>(())
//! ```
//!
//! Cost: building a [`FlowAnalysis`] is `O(r log r)` in the number of
//! records; per-unit facts are kept per unit *range* (see `ranges`), so a
//! bulk TCP flow costs per segment, not per byte.

mod digest;
mod error;
mod flow;
mod hist;
mod joined;
mod ranges;
mod stats;
mod streaming;
mod summary;
mod throughput;
mod transaction;

pub use digest::{FlowDigest, LatencySample, LossCounts};
pub use error::{MetricsError, Side};
pub use flow::{
    AnalysisOptions, AppSend, DuplicateReport, FlowAnalysis, FlowInput, LatencyKind, LossEstimate,
    LossMethod, MessageOutcome, OwdCorrection, ReasonRow, RecoveryCounts, RetransmissionGroup,
    RetransmittedPiece, ThroughputSource,
};
pub use hist::{LatencyHistogram, HISTOGRAM_SIGFIG};
pub use joined::{FlowStream, MessageTrail, PathCopy, SlowestTrail, RECENT_PATHS};
pub use stats::{
    jain_index, jain_per_interval, mean_ci95, median, percentile_sorted, Cdf, CdfPoint,
    LatencyStats,
};
pub use streaming::{FinishedMessage, StreamingFlow, SPURIOUS_WINDOW};
pub use summary::{markdown_table, LatencyMs, RetransmissionRow, Summary};
pub use throughput::ThroughputStream;
pub use transaction::{mtt_reduction, response_times, transfer_time_at_loss, ResponseSample};

#[cfg(test)]
mod reference_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_streaming;
