//! `thinstream merge SHARD_DIR... --out DIR`: the shards of a sweep
//! (`thinstream run --shard i/n`) joined into the results of one full run.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args as ClapArgs;
use thinstream_lab::Results;

#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// Shard directories (each holds manifest.json, runs.parquet,
    /// samples.parquet), in any order.
    #[arg(required = true)]
    pub(crate) shards: Vec<PathBuf>,
    /// Output folder for results.json and results.csv.
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Print only the summary line, not the tables.
    #[arg(long)]
    pub(crate) quiet: bool,
}

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    let merged = thinstream_lab::shard::merge(&args.shards)?;
    let results = Results::from_records(&merged.plan, &merged.records, merged.wall_s);
    if !args.quiet {
        crate::util::out(&thinstream_lab::table::render(&results));
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let json = results.to_json();
    let json_path = args.out.join("results.json");
    std::fs::write(&json_path, &json)
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&json)?;
    let csv_path = args.out.join("results.csv");
    std::fs::write(&csv_path, thinstream_lab::tidy::csv(&value))
        .with_context(|| format!("cannot write {}", csv_path.display()))?;
    crate::util::out(&format!(
        "scenario {}: merged {} shard(s), {} run(s), {:.2} s wall summed over the shards; wrote {} and {}\n",
        merged.plan.scenario.name,
        merged.manifests.len(),
        merged.records.len(),
        merged.wall_s,
        json_path.display(),
        csv_path.display()
    ));
    Ok(ExitCode::SUCCESS)
}
