//! The native half of the `thinstream` Python package: runs scenarios in
//! the simulator through the `lab` crate (with the GIL released), and
//! exposes presets, links and the 001 head-of-line model. The Python half
//! (`thinstream/__init__.py`) turns results into pandas and Arrow.

use std::path::PathBuf;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use thinstream_base::{Duration, Probability};
use thinstream_lab::{run_all, Plan, PlanOptions, Results, RunOptions, Scenario};
use thinstream_metrics::LatencyKind;

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Per-message samples of every measured flow of every run, as columns.
#[derive(Default)]
struct Samples {
    run: Vec<u64>,
    variant: Vec<String>,
    point: Vec<String>,
    repetition: Vec<u32>,
    flow: Vec<u32>,
    message: Vec<u64>,
    stream: Vec<u16>,
    bytes: Vec<u32>,
    sent_s: Vec<f64>,
    retransmissions: Vec<u32>,
    abandoned: Vec<bool>,
    delivered: Vec<bool>,
    latency_ms: Vec<Option<f64>>,
    ack_latency_ms: Vec<Option<f64>>,
}

/// Run a scenario file; returns (results.json text, samples or None).
#[pyfunction]
#[pyo3(signature = (scenario, seed=None, variants=None, duration=None, drain=None, repetitions=None, points=None, jobs=None, samples=false, progress=false))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    scenario: PathBuf,
    seed: Option<u64>,
    variants: Option<Vec<String>>,
    duration: Option<String>,
    drain: Option<String>,
    repetitions: Option<u32>,
    points: Option<Vec<String>>,
    jobs: Option<usize>,
    samples: bool,
    progress: bool,
) -> PyResult<(String, Option<PyObject>)> {
    let options = plan_options(seed, variants, duration, drain, repetitions, points)?;
    let scenario = Scenario::load(&scenario).map_err(value_error)?;
    let plan = Plan::new(scenario, &options).map_err(value_error)?;
    let run_options = RunOptions {
        jobs: jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1),
        progress,
        pcap_run: None,
        records_run: None,
        ..RunOptions::default()
    };
    let (json, columns) = py
        .allow_threads(|| -> Result<(String, Option<Samples>), String> {
            // Without per-message samples, each run is reduced to its record
            // as it runs (streamed where the scenario allows it: memory does
            // not grow with the simulated duration); with them, every run
            // keeps its full analysis.
            if !samples {
                let records = thinstream_lab::run_records(&plan, &plan.runs, &run_options)
                    .map_err(|e| e.to_string())?;
                return Ok((Results::from_records(&plan, &records, 0.0).to_json(), None));
            }
            let outcomes = run_all(&plan, &run_options).map_err(|e| e.to_string())?;
            let results = Results::build(&plan, &outcomes, 0.0);
            let columns = samples.then(|| {
                let mut s = Samples::default();
                for o in &outcomes {
                    let spec = &o.spec;
                    let variant = plan.variants[spec.variant].spec.name.clone();
                    let point = spec
                        .point
                        .and_then(|p| plan.points.get(p))
                        .map_or_else(|| "all".to_string(), |p| p.label());
                    for (fi, f) in o.flows.iter().enumerate() {
                        for m in f.messages() {
                            s.run.push(spec.index as u64);
                            s.variant.push(variant.clone());
                            s.point.push(point.clone());
                            s.repetition.push(spec.repetition);
                            s.flow.push(fi as u32);
                            s.message.push(m.message);
                            s.stream.push(m.stream);
                            s.bytes.push(m.bytes);
                            s.sent_s.push(m.sent.as_secs_f64());
                            s.retransmissions.push(m.retransmissions);
                            s.abandoned.push(m.abandoned);
                            s.delivered.push(m.delivered.is_some());
                            s.latency_ms.push(
                                f.latency(m, f.options().summary_latency)
                                    .map(|d| d.as_millis_f64()),
                            );
                            s.ack_latency_ms.push(
                                f.latency(m, LatencyKind::AckFromFirstTx)
                                    .map(|d| d.as_millis_f64()),
                            );
                        }
                    }
                }
                s
            });
            Ok((results.to_json(), columns))
        })
        .map_err(PyRuntimeError::new_err)?;
    let columns = match columns {
        None => None,
        Some(s) => {
            let d = PyDict::new(py);
            d.set_item("run", s.run)?;
            d.set_item("variant", s.variant)?;
            d.set_item("point", s.point)?;
            d.set_item("repetition", s.repetition)?;
            d.set_item("flow", s.flow)?;
            d.set_item("message", s.message)?;
            d.set_item("stream", s.stream)?;
            d.set_item("bytes", s.bytes)?;
            d.set_item("sent_s", s.sent_s)?;
            d.set_item("retransmissions", s.retransmissions)?;
            d.set_item("abandoned", s.abandoned)?;
            d.set_item("delivered", s.delivered)?;
            d.set_item("latency_ms", s.latency_ms)?;
            d.set_item("ack_latency_ms", s.ack_latency_ms)?;
            Some(d.into_any().unbind())
        }
    };
    Ok((json, columns))
}

#[allow(clippy::too_many_arguments)]
fn plan_options(
    seed: Option<u64>,
    variants: Option<Vec<String>>,
    duration: Option<String>,
    drain: Option<String>,
    repetitions: Option<u32>,
    points: Option<Vec<String>>,
) -> PyResult<PlanOptions> {
    let parse = |d: Option<String>| -> PyResult<Option<Duration>> {
        d.map(|t| Duration::parse(&t).map_err(value_error))
            .transpose()
    };
    Ok(PlanOptions {
        seed,
        duration: parse(duration)?,
        drain: parse(drain)?,
        variants,
        points,
        repetitions,
    })
}

/// The number of runs the plan of a scenario text has (for sizing shards).
#[pyfunction]
#[pyo3(signature = (scenario_toml, scenario_path, seed=None, variants=None, duration=None, drain=None, repetitions=None, points=None))]
#[allow(clippy::too_many_arguments)]
fn plan_runs(
    scenario_toml: &str,
    scenario_path: PathBuf,
    seed: Option<u64>,
    variants: Option<Vec<String>>,
    duration: Option<String>,
    drain: Option<String>,
    repetitions: Option<u32>,
    points: Option<Vec<String>>,
) -> PyResult<usize> {
    let options = plan_options(seed, variants, duration, drain, repetitions, points)?;
    let plan = thinstream_lab::shard::plan_of(scenario_toml, &scenario_path, &options)
        .map_err(value_error)?;
    Ok(plan.runs.len())
}

/// Runs shard `index` of `count` of the plan of a scenario text (as
/// `thinstream run --shard index/count`) and writes the shard directory
/// `out`; returns its manifest.json text.
#[pyfunction]
#[pyo3(signature = (scenario_toml, scenario_path, index, count, out, seed=None, variants=None, duration=None, drain=None, repetitions=None, points=None, jobs=None, progress=false))]
#[allow(clippy::too_many_arguments)]
fn run_shard(
    py: Python<'_>,
    scenario_toml: String,
    scenario_path: PathBuf,
    index: u32,
    count: u32,
    out: PathBuf,
    seed: Option<u64>,
    variants: Option<Vec<String>>,
    duration: Option<String>,
    drain: Option<String>,
    repetitions: Option<u32>,
    points: Option<Vec<String>>,
    jobs: Option<usize>,
    progress: bool,
) -> PyResult<String> {
    let shard: thinstream_lab::shard::ShardSpec =
        format!("{index}/{count}").parse().map_err(value_error)?;
    let options = plan_options(seed, variants, duration, drain, repetitions, points)?;
    let run_options = RunOptions {
        jobs: jobs.unwrap_or(1).max(1),
        progress,
        pcap_run: None,
        records_run: None,
        ..RunOptions::default()
    };
    let manifest = py
        .allow_threads(|| {
            thinstream_lab::shard::run_shard(
                &scenario_toml,
                &scenario_path,
                &options,
                shard,
                &run_options,
                &out,
            )
        })
        .map_err(|e| match e {
            thinstream_lab::LabError::Run { .. } | thinstream_lab::LabError::Shard(_) => {
                PyRuntimeError::new_err(e.to_string())
            }
            other => value_error(other),
        })?;
    serde_json::to_string_pretty(&manifest).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Merges shard directories (every shard of one plan, any order) as
/// `thinstream merge` does; returns (results.json text, results.csv text).
#[pyfunction]
fn merge(py: Python<'_>, dirs: Vec<PathBuf>) -> PyResult<(String, String)> {
    py.allow_threads(|| -> Result<(String, String), String> {
        let merged = thinstream_lab::shard::merge(&dirs).map_err(|e| e.to_string())?;
        let results = Results::from_records(&merged.plan, &merged.records, merged.wall_s);
        let json = results.to_json();
        let value: serde_json::Value = serde_json::from_str(&json).map_err(|e| e.to_string())?;
        Ok((json, thinstream_lab::tidy::csv(&value)))
    })
    .map_err(PyValueError::new_err)
}

/// The long ("tidy") CSV of a results.json text.
#[pyfunction]
fn tidy_csv(results_json: &str) -> PyResult<String> {
    let v: serde_json::Value = serde_json::from_str(results_json).map_err(value_error)?;
    Ok(thinstream_lab::tidy::csv(&v))
}

/// The preset bases: (name, what it contains).
#[pyfunction]
fn presets() -> Vec<(String, String)> {
    thinstream_proto::mechanism::preset::PRESETS
        .iter()
        .map(|(n, d)| (n.to_string(), d.to_string()))
        .collect()
}

/// Every base, switch and parameter of the preset grammar: (token, kind, meaning, source).
#[pyfunction]
fn preset_tokens() -> Vec<(String, String, String, String)> {
    thinstream_proto::mechanism::preset::CATALOGUE
        .iter()
        .map(|e| {
            (
                e.token.to_string(),
                format!("{:?}", e.kind).to_lowercase(),
                e.summary.to_string(),
                e.source.to_string(),
            )
        })
        .collect()
}

/// A preset string's configuration, as a dict of its main fields.
#[pyfunction]
fn preset(py: Python<'_>, spec: &str) -> PyResult<PyObject> {
    let c = thinstream_proto::Config::from_preset(spec).map_err(value_error)?;
    let d = PyDict::new(py);
    d.set_item("rto_initial_ms", c.rto_initial.as_millis_f64())?;
    d.set_item("rto_min_ms", c.rto_min.as_millis_f64())?;
    d.set_item("rto_max_ms", c.rto_max.as_millis_f64())?;
    d.set_item("fast_retransmit_threshold", c.fast_retransmit_threshold)?;
    d.set_item("delayed_sack", c.delayed_sack.enabled)?;
    d.set_item("delayed_sack_ms", c.delayed_sack.timeout.as_millis_f64())?;
    d.set_item("interleaving", c.interleaving)?;
    d.set_item("mechanisms", format!("{:?}", c.mechanisms))?;
    Ok(d.into_any().unbind())
}

/// A link string: (canonical netem-like text, mean loss probability,
/// fixed delay in ms).
#[pyfunction]
fn link(text: &str) -> PyResult<(String, f64, f64)> {
    let c = thinstream_link::LinkConfig::parse_netem(text).map_err(value_error)?;
    let loss = c.loss.as_ref().map_or(0.0, |l| l.mean_loss());
    Ok((c.to_netem(), loss, c.delay.as_millis_f64()))
}

/// The 001 head-of-line model (eqs. 1-5) for one scheme:
/// `scheme` = "streams" (with `n` ordered streams), "unordered" or "tcp"
/// (with `n` connections).
#[pyfunction]
#[pyo3(signature = (loss, scheme="streams", n=1, rtt_ms=20.0, rto_ms=1000.0, rate_per_s=100.0, processing_ms=0.5))]
fn hol_model(
    py: Python<'_>,
    loss: f64,
    scheme: &str,
    n: u32,
    rtt_ms: f64,
    rto_ms: f64,
    rate_per_s: f64,
    processing_ms: f64,
) -> PyResult<PyObject> {
    use thinstream_model::hol::{HolParams, Scheme};
    let loss = Probability::new(loss)
        .ok_or_else(|| PyValueError::new_err(format!("loss {loss} is not within 0..=1")))?;
    let ms = |x: f64| Duration::from_secs_f64(x / 1000.0);
    let params = HolParams {
        rtt: ms(rtt_ms),
        rto: ms(rto_ms),
        loss,
        interarrival: Duration::ZERO,
        processing: ms(processing_ms),
    }
    .with_rate(rate_per_s)
    .map_err(value_error)?;
    let scheme = match scheme {
        "streams" => Scheme::SctpStreams { streams: n },
        "unordered" => Scheme::SctpUnordered,
        "tcp" => Scheme::TcpConnections { connections: n },
        other => {
            return Err(PyValueError::new_err(format!(
                "scheme {other:?}: use \"streams\", \"unordered\" or \"tcp\""
            )))
        }
    };
    let p = params.predict(scheme).map_err(value_error)?;
    let d = PyDict::new(py);
    d.set_item("detection_ms", p.detection.as_millis_f64())?;
    d.set_item("by_fast_retransmit", p.by_fast_retransmit)?;
    d.set_item("queued", p.queued)?;
    d.set_item("delay_increase_ms", p.delay_increase_ms)?;
    d.set_item("one_way_delay_ms", p.one_way_delay_ms)?;
    d.set_item("response_time_ms", p.response_time_ms)?;
    Ok(d.into_any().unbind())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(tidy_csv, m)?)?;
    m.add_function(wrap_pyfunction!(plan_runs, m)?)?;
    m.add_function(wrap_pyfunction!(run_shard, m)?)?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(preset_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(preset, m)?)?;
    m.add_function(wrap_pyfunction!(link, m)?)?;
    m.add_function(wrap_pyfunction!(hol_model, m)?)?;
    Ok(())
}
