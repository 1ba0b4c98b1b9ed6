//! Sweeps beyond one machine: a deterministic slice of a plan's runs (a
//! *shard*) written as Parquet, and the merge of all shards into the
//! results of one full run.
//!
//! Shard `i/n` (`i` counts from 0, `0 <= i < n`) holds the runs whose index
//! is `i` modulo `n`: interleaved, so every shard gets a similar mix of
//! variants and sweep points (and so of run costs). A run's index, and so
//! its seed, comes from the plan alone ([`crate::Plan`]), never from the
//! shard that runs it.
//!
//! A shard directory holds (docs/sharding.md has the columns):
//! - `manifest.json` ([`Manifest`]): the scenario text and plan options,
//!   their hash, `i/n`, run counts, the tool version;
//! - `runs.parquet`: one row per run: identity, counters and the run's
//!   [`RunRecord`] (without latency samples) as JSON in column `record`;
//! - `samples.parquet`: one row per message and latency kind: the latency
//!   samples the percentiles and CDFs are pooled from (a flow past the
//!   streaming sample limit has a histogram instead, in its record JSON:
//!   `metrics::FlowDigest::histograms`).
//!
//! [`merge`] refuses shards of different scenarios, options or tool
//! versions, a shard count that disagrees, and missing or duplicated
//! shards, then pools the records in run-index order
//! ([`Results::from_records`](crate::Results::from_records)): the merged
//! `results.json` equals a full run's, the `wall_s` fields apart.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, Float64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thinstream_metrics::{LatencyKind, LatencySample};

use crate::error::LabError;
use crate::plan::{Plan, PlanOptions, RunSpec};
use crate::record::RunRecord;
use crate::runner::{run_records, RunOptions};
use crate::scenario::Scenario;

/// `manifest.json`'s `format`.
pub const FORMAT: &str = "thinstream-shard";
/// Version of the shard layout; bumped when files or columns change.
pub const FORMAT_VERSION: u32 = 2;
/// The version of the tool that writes shards (shards of different versions
/// are not merged: the simulator may have changed).
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");
/// Most shards one plan may be split into.
pub const MAX_SHARDS: u32 = 1_000_000;
/// Rows per Parquet record batch (bounds the writer's buffers).
const BATCH_ROWS: usize = 1 << 16;

/// Shard `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ShardSpec {
    /// From 0.
    pub index: u32,
    pub count: u32,
}

impl ShardSpec {
    /// Whether run `index` of the plan belongs to this shard.
    pub fn holds(&self, run_index: usize) -> bool {
        run_index as u64 % u64::from(self.count) == u64::from(self.index)
    }

    /// The runs of `plan` in this shard, in index order.
    pub fn runs(&self, plan: &Plan) -> Vec<RunSpec> {
        plan.runs
            .iter()
            .filter(|r| self.holds(r.index))
            .copied()
            .collect()
    }
}

impl fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for ShardSpec {
    type Err = String;

    /// `i/n` with `0 <= i < n <= MAX_SHARDS`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("shard {s:?} is not of the form i/n (e.g. 0/4: the first of four shards, counting from 0)"))?;
        let index: u32 = i
            .trim()
            .parse()
            .map_err(|_| format!("shard {s:?}: {i:?} is not a shard number"))?;
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("shard {s:?}: {n:?} is not a shard count"))?;
        if count == 0 || count > MAX_SHARDS {
            return Err(format!(
                "shard {s:?}: the shard count must be 1 to {MAX_SHARDS}"
            ));
        }
        if index >= count {
            return Err(format!(
                "shard {s:?}: shards count from 0, so i must be below n (the shards of {count} are 0/{count} .. {}/{count})",
                count - 1
            ));
        }
        Ok(ShardSpec { index, count })
    }
}

/// `manifest.json` of a shard directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// [`TOOL_VERSION`] of the writer.
    pub tool_version: String,
    /// The scenario's name.
    pub scenario: String,
    /// Where the scenario was read from (relative paths inside it resolve
    /// against this when the plan is rebuilt).
    pub scenario_path: PathBuf,
    /// The scenario file's text.
    pub scenario_toml: String,
    /// Command-line adjustments to the scenario.
    pub options: PlanOptions,
    /// SHA-256 over the format version, scenario text and options: shards
    /// of one plan share it.
    pub plan_hash: String,
    pub shard: ShardSpec,
    /// Runs of the whole plan, and of this shard.
    pub plan_runs: usize,
    pub runs: usize,
    /// Wall-clock seconds this shard took (not deterministic).
    pub wall_s: f64,
    /// The Parquet files beside the manifest.
    pub files: Vec<String>,
}

/// The hash that identifies a plan across shards.
pub fn plan_hash(scenario_toml: &str, options: &PlanOptions) -> String {
    let mut h = Sha256::new();
    h.update(format!("{FORMAT} {FORMAT_VERSION}\n").as_bytes());
    h.update((scenario_toml.len() as u64).to_le_bytes());
    h.update(scenario_toml.as_bytes());
    h.update(
        serde_json::to_string(options)
            .unwrap_or_default()
            .as_bytes(),
    );
    h.finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
}

fn shard_err(m: impl Into<String>) -> LabError {
    LabError::Shard(m.into())
}

fn io_err(path: &Path, e: impl fmt::Display) -> LabError {
    shard_err(format!("{}: {e}", path.display()))
}

/// The plan of a scenario text, as a shard and a merge build it.
pub fn plan_of(
    scenario_toml: &str,
    scenario_path: &Path,
    options: &PlanOptions,
) -> Result<Plan, LabError> {
    let scenario = Scenario::parse(scenario_toml, scenario_path)?;
    Plan::new(scenario, options)
}

/// Runs shard `shard` of the plan of `scenario_toml` (read from
/// `scenario_path`) and writes it into `out` (created). Returns the manifest.
pub fn run_shard(
    scenario_toml: &str,
    scenario_path: &Path,
    options: &PlanOptions,
    shard: ShardSpec,
    run_options: &RunOptions,
    out: &Path,
) -> Result<Manifest, LabError> {
    let plan = plan_of(scenario_toml, scenario_path, options)?;
    if plan.runs.is_empty() {
        return Err(LabError::Selection(format!(
            "no variant of {} can run in this build",
            plan.scenario.name
        )));
    }
    let specs = shard.runs(&plan);
    let started = crate::wall::now();
    let records = run_records(&plan, &specs, run_options)?;
    let wall_s = crate::wall::seconds_since(started);
    let manifest = Manifest {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        tool_version: TOOL_VERSION.into(),
        scenario: plan.scenario.name.clone(),
        scenario_path: scenario_path.to_path_buf(),
        scenario_toml: scenario_toml.to_string(),
        options: options.clone(),
        plan_hash: plan_hash(scenario_toml, options),
        shard,
        plan_runs: plan.runs.len(),
        runs: records.len(),
        wall_s,
        files: vec![RUNS_FILE.into(), SAMPLES_FILE.into()],
    };
    write_shard(out, &plan, &manifest, &records)?;
    Ok(manifest)
}

const MANIFEST_FILE: &str = "manifest.json";
const RUNS_FILE: &str = "runs.parquet";
const SAMPLES_FILE: &str = "samples.parquet";

fn runs_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("run", DataType::UInt64, false),
        Field::new("variant", DataType::Utf8, false),
        Field::new("point", DataType::Utf8, true),
        Field::new("repetition", DataType::UInt32, false),
        Field::new("seed", DataType::UInt64, false),
        Field::new("events", DataType::UInt64, false),
        Field::new("end_ns", DataType::UInt64, false),
        Field::new("wall_s", DataType::Float64, false),
        Field::new("fault", DataType::Utf8, true),
        Field::new("mtt_ns", DataType::UInt64, true),
        Field::new("messages", DataType::UInt64, false),
        Field::new("delivered", DataType::UInt64, true),
        Field::new("record", DataType::Utf8, false),
    ]))
}

fn samples_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("run", DataType::UInt64, false),
        Field::new("flow", DataType::UInt32, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("retransmissions", DataType::UInt32, false),
        Field::new("latency_ns", DataType::UInt64, false),
    ]))
}

fn kind_name(k: LatencyKind) -> String {
    match serde_json::to_value(k) {
        Ok(serde_json::Value::String(s)) => s,
        _ => k.name().to_string(),
    }
}

fn kind_of(name: &str) -> Option<LatencyKind> {
    serde_json::from_value(serde_json::Value::String(name.to_string())).ok()
}

fn writer(path: &Path, schema: SchemaRef) -> Result<ArrowWriter<File>, LabError> {
    let file = File::create(path).map_err(|e| io_err(path, e))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    ArrowWriter::try_new(file, schema, Some(props)).map_err(|e| io_err(path, e))
}

fn batch(path: &Path, schema: &SchemaRef, columns: Vec<ArrayRef>) -> Result<RecordBatch, LabError> {
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| io_err(path, e))
}

/// Writes `manifest.json`, `runs.parquet` and `samples.parquet` into `dir`.
pub fn write_shard(
    dir: &Path,
    plan: &Plan,
    manifest: &Manifest,
    records: &[RunRecord],
) -> Result<(), LabError> {
    std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;

    let path = dir.join(RUNS_FILE);
    let schema = runs_schema();
    let mut w = writer(&path, schema.clone())?;
    for chunk in records.chunks(BATCH_ROWS) {
        let mut json = Vec::with_capacity(chunk.len());
        for r in chunk {
            // The samples go to samples.parquet.
            let mut bare = r.clone();
            for f in &mut bare.flows {
                f.latencies.clear();
            }
            json.push(serde_json::to_string(&bare).map_err(|e| io_err(&path, e))?);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from_iter_values(
                chunk.iter().map(|r| r.spec.index as u64),
            )),
            Arc::new(StringArray::from_iter_values(
                chunk
                    .iter()
                    .map(|r| plan.variants[r.spec.variant].spec.name.as_str()),
            )),
            Arc::new(StringArray::from_iter(chunk.iter().map(|r| {
                r.spec
                    .point
                    .and_then(|p| plan.points.get(p))
                    .map(|p| p.label())
            }))),
            Arc::new(UInt32Array::from_iter_values(
                chunk.iter().map(|r| r.spec.repetition),
            )),
            Arc::new(UInt64Array::from_iter_values(
                chunk.iter().map(|r| r.spec.seed.0),
            )),
            Arc::new(UInt64Array::from_iter_values(
                chunk.iter().map(|r| r.events),
            )),
            Arc::new(UInt64Array::from_iter_values(
                chunk.iter().map(|r| r.end.since_epoch().as_nanos()),
            )),
            Arc::new(Float64Array::from_iter_values(
                chunk.iter().map(|r| r.wall_s),
            )),
            Arc::new(StringArray::from_iter(
                chunk.iter().map(|r| r.fault.as_deref()),
            )),
            Arc::new(UInt64Array::from_iter(
                chunk.iter().map(|r| r.mtt.map(|d| d.as_nanos())),
            )),
            Arc::new(UInt64Array::from_iter_values(
                chunk
                    .iter()
                    .map(|r| r.flows.iter().map(|f| f.messages).sum::<u64>()),
            )),
            Arc::new(UInt64Array::from_iter(chunk.iter().map(|r| {
                r.flows
                    .iter()
                    .try_fold(0u64, |a, f| f.delivered.map(|d| a + d))
            }))),
            Arc::new(StringArray::from_iter_values(json)),
        ];
        w.write(&batch(&path, &schema, columns)?)
            .map_err(|e| io_err(&path, e))?;
    }
    w.close().map_err(|e| io_err(&path, e))?;

    let path = dir.join(SAMPLES_FILE);
    let schema = samples_schema();
    let mut w = writer(&path, schema.clone())?;
    #[derive(Default)]
    struct Cols {
        run: Vec<u64>,
        flow: Vec<u32>,
        kind: Vec<String>,
        rtx: Vec<u32>,
        nanos: Vec<u64>,
    }
    let mut c = Cols::default();
    let flush = |c: &mut Cols, w: &mut ArrowWriter<File>| -> Result<(), LabError> {
        if c.run.is_empty() {
            return Ok(());
        }
        let cols = std::mem::take(c);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(cols.run)),
            Arc::new(UInt32Array::from(cols.flow)),
            Arc::new(StringArray::from(cols.kind)),
            Arc::new(UInt32Array::from(cols.rtx)),
            Arc::new(UInt64Array::from(cols.nanos)),
        ];
        w.write(&batch(&path, &schema, columns)?)
            .map_err(|e| io_err(&path, e))
    };
    for r in records {
        for (fi, f) in r.flows.iter().enumerate() {
            for (kind, samples) in &f.latencies {
                let name = kind_name(*kind);
                for s in samples {
                    c.run.push(r.spec.index as u64);
                    c.flow.push(fi as u32);
                    c.kind.push(name.clone());
                    c.rtx.push(s.retransmissions);
                    c.nanos.push(s.nanos);
                    if c.run.len() >= BATCH_ROWS {
                        flush(&mut c, &mut w)?;
                    }
                }
            }
        }
    }
    flush(&mut c, &mut w)?;
    w.close().map_err(|e| io_err(&path, e))?;

    let path = dir.join(MANIFEST_FILE);
    let mut text = serde_json::to_string_pretty(manifest).map_err(|e| io_err(&path, e))?;
    text.push('\n');
    std::fs::write(&path, text).map_err(|e| io_err(&path, e))
}

/// Reads a shard directory's manifest.
pub fn read_manifest(dir: &Path) -> Result<Manifest, LabError> {
    let path = dir.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        shard_err(format!(
            "{} is not a shard directory (cannot read {MANIFEST_FILE}: {e})",
            dir.display()
        ))
    })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| io_err(&path, format!("not JSON: {e}")))?;
    if v.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(io_err(&path, format!("not a {FORMAT} manifest")));
    }
    match v.get("format_version").and_then(|f| f.as_u64()) {
        Some(n) if n == u64::from(FORMAT_VERSION) => {}
        other => {
            return Err(io_err(
                &path,
                format!(
                    "shard format version {} but this build reads {FORMAT_VERSION} (re-run the shard with this build)",
                    other.map_or("missing".to_string(), |n| n.to_string())
                ),
            ))
        }
    }
    serde_json::from_value(v).map_err(|e| io_err(&path, format!("not a shard manifest: {e}")))
}

fn read_batches(path: &Path, schema: &SchemaRef) -> Result<Vec<RecordBatch>, LabError> {
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.with_batch_size(BATCH_ROWS).build())
        .map_err(|e| io_err(path, e))?;
    let mut out = Vec::new();
    for b in reader {
        let b = b.map_err(|e| io_err(path, e))?;
        for f in schema.fields() {
            match b.column_by_name(f.name()) {
                Some(c) if c.data_type() == f.data_type() => {}
                _ => {
                    return Err(io_err(
                        path,
                        format!("no column {} of type {}", f.name(), f.data_type()),
                    ))
                }
            }
        }
        out.push(b);
    }
    Ok(out)
}

fn column<'a, T: 'static>(path: &Path, b: &'a RecordBatch, name: &str) -> Result<&'a T, LabError> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| io_err(path, format!("column {name} missing or of another type")))
}

/// Reads the run records of a shard directory (latency samples included),
/// in the order stored.
pub fn read_records(dir: &Path) -> Result<Vec<RunRecord>, LabError> {
    let path = dir.join(RUNS_FILE);
    let mut records: Vec<RunRecord> = Vec::new();
    let mut at: BTreeMap<usize, usize> = BTreeMap::new();
    for b in read_batches(&path, &runs_schema())? {
        let runs = column::<UInt64Array>(&path, &b, "run")?;
        let json = column::<StringArray>(&path, &b, "record")?;
        for row in 0..b.num_rows() {
            if json.is_null(row) {
                return Err(io_err(&path, format!("row {row}: no record")));
            }
            let r: RunRecord = serde_json::from_str(json.value(row))
                .map_err(|e| io_err(&path, format!("row {row}: {e}")))?;
            if r.spec.index as u64 != runs.value(row) {
                return Err(io_err(
                    &path,
                    format!(
                        "row {row}: column run says {} but its record run {}",
                        runs.value(row),
                        r.spec.index
                    ),
                ));
            }
            if at.insert(r.spec.index, records.len()).is_some() {
                return Err(io_err(&path, format!("run {} twice", r.spec.index)));
            }
            records.push(r);
        }
    }
    let path = dir.join(SAMPLES_FILE);
    for b in read_batches(&path, &samples_schema())? {
        let run = column::<UInt64Array>(&path, &b, "run")?;
        let flow = column::<UInt32Array>(&path, &b, "flow")?;
        let kind = column::<StringArray>(&path, &b, "kind")?;
        let rtx = column::<UInt32Array>(&path, &b, "retransmissions")?;
        let nanos = column::<UInt64Array>(&path, &b, "latency_ns")?;
        let mut last: Option<(u64, u32, String, LatencyKind)> = None;
        for row in 0..b.num_rows() {
            let (r, f, k) = (run.value(row), flow.value(row), kind.value(row));
            let lk = match &last {
                Some((lr, lf, ln, lk)) if *lr == r && *lf == f && ln == k => *lk,
                _ => {
                    let lk = kind_of(k).ok_or_else(|| {
                        io_err(&path, format!("row {row}: unknown latency kind {k:?}"))
                    })?;
                    last = Some((r, f, k.to_string(), lk));
                    lk
                }
            };
            let rec = usize::try_from(r)
                .ok()
                .and_then(|r| at.get(&r))
                .and_then(|i| records.get_mut(*i))
                .ok_or_else(|| {
                    io_err(&path, format!("row {row}: run {r} is not in {RUNS_FILE}"))
                })?;
            let digest = rec.flows.get_mut(f as usize).ok_or_else(|| {
                io_err(
                    &path,
                    format!("row {row}: run {r} has no measured flow {f}"),
                )
            })?;
            digest.latencies.entry(lk).or_default().push(LatencySample {
                retransmissions: rtx.value(row),
                nanos: nanos.value(row),
            });
        }
    }
    Ok(records)
}

/// The merged shards of one plan.
#[derive(Debug)]
pub struct Merged {
    pub plan: Plan,
    /// Every run's record, in run-index order.
    pub records: Vec<RunRecord>,
    /// The shards' manifests, by shard index.
    pub manifests: Vec<Manifest>,
    /// Wall-clock seconds summed over the shards (not deterministic).
    pub wall_s: f64,
}

/// Reads and checks the shard directories `dirs` (every shard of one plan,
/// in any order) and returns the plan with every run's record.
pub fn merge(dirs: &[PathBuf]) -> Result<Merged, LabError> {
    if dirs.is_empty() {
        return Err(shard_err("no shard directories to merge"));
    }
    let mut manifests: Vec<(PathBuf, Manifest)> = Vec::with_capacity(dirs.len());
    for d in dirs {
        manifests.push((d.clone(), read_manifest(d)?));
    }
    let (first_dir, first) = &manifests[0];
    for (d, m) in &manifests[1..] {
        if m.plan_hash != first.plan_hash {
            return Err(shard_err(format!(
                "{} and {} are shards of different plans (scenario {:?} vs {:?}, plan hash {} vs {}): the scenario text or the run options differ",
                first_dir.display(),
                d.display(),
                first.scenario,
                m.scenario,
                &first.plan_hash[..12.min(first.plan_hash.len())],
                &m.plan_hash[..12.min(m.plan_hash.len())]
            )));
        }
        if m.tool_version != first.tool_version {
            return Err(shard_err(format!(
                "{} was written by thinstream {} but {} by {}: re-run the shards with one version",
                first_dir.display(),
                first.tool_version,
                d.display(),
                m.tool_version
            )));
        }
        if m.shard.count != first.shard.count {
            return Err(shard_err(format!(
                "{} is shard {} but {} is shard {}: the shard counts differ",
                first_dir.display(),
                first.shard,
                d.display(),
                m.shard
            )));
        }
    }
    let count = first.shard.count;
    let mut by_index: BTreeMap<u32, usize> = BTreeMap::new();
    for (k, (d, m)) in manifests.iter().enumerate() {
        if let Some(other) = by_index.insert(m.shard.index, k) {
            return Err(shard_err(format!(
                "shard {} given twice: {} and {}",
                m.shard,
                manifests[other].0.display(),
                d.display()
            )));
        }
    }
    let missing: Vec<String> = (0..count)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(10).map(String::as_str).collect();
        return Err(shard_err(format!(
            "{} of {count} shard(s) missing: {}{}",
            missing.len(),
            shown.join(", "),
            if missing.len() > shown.len() {
                ", ..."
            } else {
                ""
            }
        )));
    }

    let plan = plan_of(&first.scenario_toml, &first.scenario_path, &first.options)?;
    if plan.runs.len() != first.plan_runs {
        return Err(shard_err(format!(
            "the plan rebuilt from {} has {} runs but its manifest says {}",
            first_dir.display(),
            plan.runs.len(),
            first.plan_runs
        )));
    }
    let mut records: Vec<Option<RunRecord>> = vec![None; plan.runs.len()];
    let mut wall_s = 0.0;
    for k in by_index.values() {
        let (d, m) = &manifests[*k];
        wall_s += m.wall_s;
        let mine = read_records(d)?;
        if mine.len() != m.runs {
            return Err(shard_err(format!(
                "{}: {} runs stored but the manifest says {}",
                d.display(),
                mine.len(),
                m.runs
            )));
        }
        for r in mine {
            let i = r.spec.index;
            let Some(expected) = plan.runs.get(i) else {
                return Err(shard_err(format!(
                    "{}: run {i} is beyond the plan's {} runs",
                    d.display(),
                    plan.runs.len()
                )));
            };
            if !m.shard.holds(i) {
                return Err(shard_err(format!(
                    "{}: run {i} does not belong to shard {}",
                    d.display(),
                    m.shard
                )));
            }
            if r.spec != *expected {
                return Err(shard_err(format!(
                    "{}: run {i} is {:?} but the plan's run {i} is {:?}",
                    d.display(),
                    r.spec,
                    expected
                )));
            }
            records[i] = Some(r);
        }
    }
    let absent: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_none())
        .map(|(i, _)| i)
        .collect();
    if let Some(i) = absent.first() {
        return Err(shard_err(format!(
            "{} run(s) of the plan are in no shard (first: run {i}, which belongs to shard {}/{count})",
            absent.len(),
            *i as u64 % u64::from(count)
        )));
    }
    let mut list: Vec<(u32, Manifest)> = manifests
        .into_iter()
        .map(|(_, m)| (m.shard.index, m))
        .collect();
    list.sort_by_key(|(i, _)| *i);
    Ok(Merged {
        plan,
        records: records.into_iter().flatten().collect(),
        manifests: list.into_iter().map(|(_, m)| m).collect(),
        wall_s,
    })
}
