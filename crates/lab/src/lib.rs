//! Experiments as data: scenario files → runs → results.
//!
//! A scenario (TOML, [`scenario`]; user docs in `scenarios/README.md`)
//! names a topology, flows with workloads, the transport variants to
//! compare, metric options and an optional sweep. [`Plan::new`] expands it
//! into runs (variant × sweep point × repetition, each with a seed derived
//! from the master seed), [`run_all`] runs them in parallel (each
//! `Simulation` is built inside its worker thread; results come back in
//! run-index order), and [`Results::build`] pools them per variant into the
//! `results.json` shape (the metrics crate's `Summary`, plus per-point MTT
//! for loss-position sweeps, retransmission causes per retransmission
//! number). [`table::render`] prints the terminal tables and
//! [`report::markdown`] the reproduction report, which puts each scenario's
//! `[reference]` numbers (and `[[reference.compare]]` rows, looked up with
//! [`report::lookup`]) beside ours, with verdicts computed from each row's
//! `expect` ([`verdict`]), SVG plots ([`plots`]) and a long-format CSV
//! ([`tidy`]) drawn from the stored `results.json`, and [`report::html`]
//! for a self-contained page, in parts ([`report::Part`]: the documents'
//! experiments, then the robustness set) with a recovery table per variant
//! and sweep point and the slowest message of each variant with the path
//! its trace shows ([`worst`]). [`Results::from_json`] reads a stored
//! `results.json` back, so the report can be rebuilt without re-running.
//! [`Detail`] keeps one run's pcap and trace records for a closer look.
//!
//! Pooling goes through [`RunRecord`]s ([`record`]: what each run
//! contributes, per measured flow a `metrics::FlowDigest`), so a sweep can
//! be split into shards that run anywhere and are merged into the same
//! `results.json` ([`shard`]: `i/n` slices, Parquet shard directories,
//! [`shard::merge`]; docs/sharding.md).
//!
//! SCTP variants are `thinstream_proto::Config::from_preset` strings, TCP
//! variants `thinstream_tcp::TcpConfig::from_profile` strings, with
//! [`scenario::Overrides`] on top; tracing is on for everything but HTTP
//! cross traffic.
//!
//! Traffic beyond one measured flow: [`http`] expands an `http` workload
//! into one TCP connection per client on a dumbbell (000 §6.2); [`fairness`]
//! computes throughput per interval, Jain's index and the bottleneck's drop
//! rate and utilisation (002 §5.2.5); [`echo`] runs echo peers
//! over TCP (framed by request size; N streams become N connections),
//! response times, and the head-of-line model's prediction (001 §III-IV).
//!
//! Same scenario and seed → byte-identical `results.json` apart from the
//! `wall_s` fields.
//!
//! ```no_run
//! use thinstream_lab::{run_all, Plan, PlanOptions, Results, RunOptions, Scenario};
//! let scenario = Scenario::load("scenarios/seeds/000-fig8-uniform.toml".as_ref())?;
//! let plan = Plan::new(scenario, &PlanOptions::default())?;
//! println!("{}", plan.describe());
//! let outcomes = run_all(&plan, &RunOptions::default())?;
//! let results = Results::build(&plan, &outcomes, 0.0);
//! println!("{}", thinstream_lab::table::render(&results));
//! # Ok::<(), thinstream_lab::LabError>(())
//! ```

pub mod compare;
pub mod echo;
mod error;
pub mod fairness;
pub mod http;
pub mod plan;
pub mod plots;
pub mod realsim;
pub mod record;
pub mod report;
pub mod results;
pub mod runner;
pub mod scenario;
pub mod shard;
pub mod table;
pub mod tidy;
pub mod transport;
pub mod verdict;
pub mod wall;
pub mod worst;

pub use error::LabError;
pub use plan::{Plan, PlanOptions, PlannedVariant, RunSpec};
pub use record::RunRecord;
pub use results::{PointResult, RealInfo, RealRun, Results, VariantResult};
pub use runner::{
    flow_start, message_schedule, receiver_config, run_all, run_one, run_records, stream_pause,
    stream_sample_limit, streams, two_host_links, Detail, RunOptions, RunOutcome, StreamPeak,
    STREAM_PAUSE, STREAM_PAUSE_MIN, STREAM_SAMPLE_BUDGET, STREAM_SAMPLE_FLOOR, STREAM_SAMPLE_LIMIT,
};
pub use scenario::{GridPoint, Scenario, SweepParameter, SweepPoint, TransportKind};
pub use thinstream_sim::CapturePoint;
pub use transport::{resolve, sctp_config, tcp_config, PresetIssue, TransportConfig};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_grid;
#[cfg(test)]
mod tests_recovery;
#[cfg(test)]
mod tests_report;
#[cfg(test)]
mod tests_stream;
#[cfg(test)]
mod tests_traffic;
