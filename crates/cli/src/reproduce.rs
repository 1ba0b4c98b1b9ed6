//! `thinstream reproduce`: run every scenario under `scenarios/seeds/` and
//! write each `results.json` plus a `report.md` that puts our numbers
//! beside the documents' (`[reference]` of each scenario).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context};
use clap::Args as ClapArgs;
use thinstream_base::Duration;
use thinstream_lab::{report, wall};

use crate::run;

#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// Output folder (one sub-folder per scenario, report.md on top).
    #[arg(long, default_value = "out/reproduce")]
    pub(crate) out: PathBuf,
    /// Shorter runs: at most 10 simulated minutes of messages, one repetition.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Folder of scenario files.
    #[arg(long, default_value = "scenarios/seeds")]
    pub(crate) scenarios: PathBuf,
    /// Worker threads (default: available cores).
    #[arg(long)]
    pub(crate) jobs: Option<usize>,
    /// No progress bar and no run lists.
    #[arg(long)]
    pub(crate) quiet: bool,
}

/// `--quick` caps: enough loss events for the tables, minutes not hours.
const QUICK_DURATION: Duration = Duration::from_secs(600);
const QUICK_DRAIN: Duration = Duration::from_secs(30);

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(&args.scenarios)
        .with_context(|| {
            format!(
                "cannot list {} (run from the repository root or pass --scenarios)",
                args.scenarios.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(anyhow!("no scenario files in {}", args.scenarios.display()));
    }
    let started = wall::now();
    let mut sections = Vec::new();
    let mut skipped = Vec::new();
    for (i, file) in files.iter().enumerate() {
        eprintln!(
            "[{}/{}] {} ({:.0} s so far)",
            i + 1,
            files.len(),
            file.display(),
            wall::seconds_since(started)
        );
        let scenario = thinstream_lab::Scenario::load(file)?;
        let name = scenario.name.clone();
        let (duration, drain, repetitions) = if args.quick {
            (
                Some(scenario.duration.min(QUICK_DURATION)),
                Some(scenario.drain.min(QUICK_DRAIN)),
                Some(1),
            )
        } else {
            (None, None, None)
        };
        let run_args = run::Args {
            scenario: file.clone(),
            seed: None,
            out: Some(args.out.join(&name)),
            pcap: None,
            records: None,
            pcap_run: 0,
            duration,
            drain,
            variants: None,
            points: None,
            repetitions,
            jobs: args.jobs,
            quiet: args.quiet,
        };
        match run::execute(&run_args, &mut |s| crate::util::out(s)) {
            Ok((_plan, results, json_file)) => {
                let rel = |p: &std::path::Path| {
                    p.strip_prefix(&args.out)
                        .map_or_else(|_| p.display().to_string(), |p| p.display().to_string())
                };
                // Plots, CSV and verdicts come from the stored results.
                let text = std::fs::read_to_string(&json_file)
                    .with_context(|| format!("cannot read {}", json_file.display()))?;
                let json: serde_json::Value = serde_json::from_str(&text)
                    .with_context(|| format!("{} is not JSON", json_file.display()))?;
                let dir = json_file
                    .parent()
                    .map_or_else(|| args.out.clone(), |d| d.to_path_buf());
                let (plots, csv) = report::write_artifacts(&dir, &json)
                    .with_context(|| format!("cannot write plots or CSV in {}", dir.display()))?;
                sections.push(report::Section {
                    results,
                    json,
                    json_path: rel(&json_file),
                    csv_path: Some(rel(&dir.join(&csv))),
                    plots: plots
                        .into_iter()
                        .map(|p| (rel(&dir.join(&p.file)), p))
                        .collect(),
                });
            }
            // A scenario none of whose variants this build can run is
            // reported, not fatal: the others still run.
            Err(e) if e.to_string().contains("can run in this build") => {
                eprintln!("thinstream: skipping {name}: {e}");
                skipped.push(format!("{name}: {e}"));
            }
            Err(e) => return Err(e),
        }
    }
    let mut report = report::markdown(&sections, args.quick);
    if !skipped.is_empty() {
        report.push_str("## Scenarios that could not run\n\n");
        for s in &skipped {
            report.push_str(&format!("- {s}\n"));
        }
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let path = args.out.join("report.md");
    std::fs::write(&path, &report).with_context(|| format!("cannot write {}", path.display()))?;
    let svgs = sections
        .iter()
        .flat_map(|s| {
            s.plots
                .iter()
                .map(|(p, plot)| (p.clone(), plot.svg.clone()))
        })
        .collect();
    let html_path = args.out.join("report.html");
    std::fs::write(&html_path, report::html(&report, &svgs))
        .with_context(|| format!("cannot write {}", html_path.display()))?;
    crate::util::out(&format!(
        "\nreproduced {} scenario(s) in {:.1} s; report: {} and {}\n",
        sections.len(),
        wall::seconds_since(started),
        path.display(),
        html_path.display()
    ));
    Ok(ExitCode::SUCCESS)
}
