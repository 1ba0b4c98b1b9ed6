//! `thinstream reproduce`: run every scenario under `scenarios/seeds/` (the
//! documents' experiments) and `scenarios/robustness/` (the thin-stream
//! presets against unmodified receivers), write each `results.json`, plots
//! and CSV, a `manifest.json` naming the report's parts and scenarios, and
//! `report.md` / `report.html` that put our numbers beside the documents'
//! (`[reference]` of each scenario). `--from DIR` rebuilds plots, CSV and
//! the report from the stored results of an earlier run without running
//! anything. The report ends with real sockets against the simulator
//! ([`thinstream_lab::realsim`]): the stored results of `run --real` on a
//! scenario (in the repository, `--real-results`) beside that scenario
//! simulated here with the same seed, repetitions and duration.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Context};
use clap::Args as ClapArgs;
use serde::{Deserialize, Serialize};
use thinstream_base::Duration;
use thinstream_lab::realsim::{self, RealComparison, RealVsSim};
use thinstream_lab::{report, wall, Results};

use crate::run;

#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// Output folder (one sub-folder per scenario, report.md on top).
    #[arg(long, default_value = "out/reproduce")]
    pub(crate) out: PathBuf,
    /// Shorter runs: at most 5 simulated minutes of messages, one repetition.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Folder of scenario files (the documents' experiments).
    #[arg(long, default_value = "scenarios/seeds")]
    pub(crate) scenarios: PathBuf,
    /// Folder of the robustness scenarios (their own part of the report).
    #[arg(long, default_value = "scenarios/robustness")]
    pub(crate) robustness: PathBuf,
    /// Leave the robustness part out.
    #[arg(long)]
    pub(crate) no_robustness: bool,
    /// Rebuild plots, CSV and the report from the stored results under this
    /// folder (an earlier `reproduce --out`), without running anything; the
    /// report is written there.
    #[arg(long, conflicts_with_all = ["quick", "no_robustness"])]
    pub(crate) from: Option<PathBuf>,
    /// Worker threads (default: available cores).
    #[arg(long)]
    pub(crate) jobs: Option<usize>,
    /// No progress bar and no run lists.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Stored results of `thinstream run SCENARIO --real` for the report's
    /// "Real sockets vs the simulator" part, instead of the repository's
    /// [default: each of scenarios/real/*.real-results.json beside its
    /// scenario file (SCTP: 000-fig8-uniform-10min; the kernel's TCP:
    /// thin-tcp-kernel-10min); a missing one makes its comparison "not
    /// available"; a file given here must be readable].
    #[arg(long, value_name = "FILE", conflicts_with = "from")]
    pub(crate) real_results: Option<PathBuf>,
    /// The scenario file of --real-results, simulated here with their
    /// master seed, repetitions and full duration (also under --quick)
    /// [default: scenarios/real/000-fig8-uniform-10min.toml].
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "from",
        requires = "real_results"
    )]
    pub(crate) real_scenario: Option<PathBuf>,
}

/// The repository's stored real results and their scenario files, in
/// report order (`--real-results` replaces them).
const REAL_PAIRS: [(&str, &str); 2] = [
    (
        "scenarios/real/000-fig8-uniform-10min.toml",
        "scenarios/real/000-fig8-uniform-10min.real-results.json",
    ),
    (
        "scenarios/real/thin-tcp-kernel-10min.toml",
        "scenarios/real/thin-tcp-kernel-10min.real-results.json",
    ),
];

/// `--quick` caps: enough loss events for the tables, minutes not hours.
const QUICK_DURATION: Duration = Duration::from_secs(300);
const QUICK_DRAIN: Duration = Duration::from_secs(30);

/// What `reproduce` ran, in report order (`manifest.json`).
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    quick: bool,
    parts: Vec<PartEntry>,
    /// Scenarios that could not run in this build, with the reason.
    skipped: Vec<String>,
    /// The real-against-simulated part: per stored real result its two
    /// results, or why there are none (one object, or `null`, in
    /// manifests written before there could be several).
    #[serde(default, deserialize_with = "one_or_many")]
    real: Vec<RealEntry>,
}

/// `real` of a manifest: a list, one entry, or `null`.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<RealEntry>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        Many(Vec<RealEntry>),
        One(RealEntry),
    }
    Ok(match Option::<OneOrMany>::deserialize(d)? {
        None => Vec::new(),
        Some(OneOrMany::One(e)) => vec![e],
        Some(OneOrMany::Many(v)) => v,
    })
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RealEntry {
    /// `results.json` of both sides relative to the output folder, and
    /// where the real one was read from.
    Available {
        sim: String,
        real: String,
        source: String,
        /// The control: the simulated side with the next master seed.
        control: Option<String>,
    },
    NotAvailable {
        reason: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct PartEntry {
    title: String,
    intro: String,
    /// `results.json` of each scenario, relative to the output folder.
    results: Vec<String>,
}

const MANIFEST: &str = "manifest.json";

const SEEDS_TITLE: &str = "Reproduction of the documents";
const ROBUSTNESS_TITLE: &str = "Robustness against unmodified receivers";

fn robustness_intro(quick: bool) -> String {
    format!(
        "The thin-stream presets that reproduce the documents (`linux`, `lksctp-mod`, `thin`, \
         `thin+rdb`) and the `production` preset, each against the acknowledgement policy of six \
         real receivers (`linux-2.6`: the documents' kernels, 200 ms / every 2nd packet, ignores \
         RFC 7053's I bit; `linux`, `usrsctp`, `dcsctp`, `pion` of today; `every-packet`), at 0, 1 \
         and 5% loss each way, RTT 100 ms, 100-byte messages every 50, 100 and 250 ms, plus a \
         1..4000-byte size sweep. The workload starts once the association is established (as \
         the documents measured) and the application's timer fires up to 4 ms late, uniformly \
         (`app_timer_jitter`, a 2.6-kernel jiffy; 002 §5.4.2 notes the user-space timer \
         granularity of its senders): a perfectly periodic sender at IAT = RTT phase-locks with \
         the receiver's delayed-SACK timer and the RTO. {} The documents' presets keep their \
         kernels' behaviour, quirks included; `production` is the recommended preset. The \
         recovery table of each cell gives spurious retransmissions by cause (RDB copies left \
         out), T3 expiries, `tohd` split into retransmissions and redundant copies, RTT samples \
         and the share of time classified thin; the slowest-message table gives every variant's \
         maximum at 5% loss and the path its trace shows.",
        if quick {
            "Cells are 1 h of messages in a full run; this `--quick` report shortens them to 5 minutes, so maxima and rare events are rougher."
        } else {
            "Each cell is 1 h of messages."
        }
    )
}

fn scenario_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| {
            format!(
                "cannot list {} (run from the repository root or pass --scenarios / --robustness, or --no-robustness)",
                dir.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(anyhow!("no scenario files in {}", dir.display()));
    }
    Ok(files)
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .map_or_else(|_| p.display().to_string(), |p| p.display().to_string())
}

/// Reads a stored `results.json`, writes its plots and CSV beside it, and
/// returns the report section (everything drawn from the stored file).
fn section_from_stored(root: &Path, json_file: &Path) -> anyhow::Result<report::Section> {
    let text = std::fs::read_to_string(json_file)
        .with_context(|| format!("cannot read {}", json_file.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON", json_file.display()))?;
    let results = Results::from_json(&text).map_err(|e| anyhow!("{}: {e}", json_file.display()))?;
    let dir = json_file
        .parent()
        .map_or_else(|| root.to_path_buf(), Path::to_path_buf);
    let (plots, csv) = report::write_artifacts(&dir, &json)
        .with_context(|| format!("cannot write plots or CSV in {}", dir.display()))?;
    Ok(report::Section {
        results,
        json,
        json_path: rel(root, json_file),
        csv_path: Some(rel(root, &dir.join(&csv))),
        plots: plots
            .into_iter()
            .map(|p| (rel(root, &dir.join(&p.file)), p))
            .collect(),
    })
}

/// Reads stored real results: the text and the parsed results.
fn read_real(file: &Path) -> Result<(String, Results), String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let results = Results::from_json(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    if results.mode != "real" {
        return Err(format!(
            "{} is not the result of `thinstream run --real` (mode `{}`)",
            file.display(),
            results.mode
        ));
    }
    Ok((text, results))
}

/// The real-against-simulated part from the two stored `results.json`:
/// writes its plots and CSV beside the simulated one.
fn real_from_stored(
    root: &Path,
    sim_file: &Path,
    real_file: &Path,
    control_file: Option<&Path>,
    source: String,
) -> anyhow::Result<RealComparison> {
    let read = |f: &Path| -> anyhow::Result<(String, Results)> {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        let r = Results::from_json(&text).map_err(|e| anyhow!("{}: {e}", f.display()))?;
        Ok((text, r))
    };
    let (sim_text, sim) = read(sim_file)?;
    let control = match control_file {
        Some(f) => Some((read(f)?.1, rel(root, f))),
        None => None,
    };
    let (real_text, real) = read_real(real_file).map_err(|e| anyhow!(e))?;
    if let Err(why) = realsim::check(&sim, &real) {
        return Ok(RealComparison::NotAvailable(why));
    }
    let value = |t: &str, f: &Path| {
        serde_json::from_str::<serde_json::Value>(t)
            .with_context(|| format!("{} is not JSON", f.display()))
    };
    let plots = thinstream_lab::plots::real_vs_sim_plots(
        &value(&sim_text, sim_file)?,
        &value(&real_text, real_file)?,
    );
    let dir = sim_file
        .parent()
        .map_or_else(|| root.to_path_buf(), Path::to_path_buf);
    for p in &plots {
        let f = dir.join(&p.file);
        std::fs::write(&f, &p.svg).with_context(|| format!("cannot write {}", f.display()))?;
    }
    let mut rs = RealVsSim {
        sim,
        real,
        sim_path: rel(root, sim_file),
        real_path: rel(root, real_file),
        source,
        control,
        csv_path: None,
        plots: plots
            .into_iter()
            .map(|p| (rel(root, &dir.join(&p.file)), p))
            .collect(),
    };
    let csv = dir.join("real-vs-sim.csv");
    std::fs::write(&csv, realsim::csv(&rs))
        .with_context(|| format!("cannot write {}", csv.display()))?;
    rs.csv_path = Some(rel(root, &csv));
    Ok(RealComparison::Available(Box::new(rs)))
}

/// Runs the simulated side of the stored real results (same master seed,
/// repetitions, full duration), stores both under `--out`, and returns the
/// part with its manifest entry. What is missing or does not match is the
/// part's "not available" note, not a failure.
fn real_part(args: &Args) -> anyhow::Result<Vec<(RealComparison, RealEntry)>> {
    let pairs: Vec<(PathBuf, PathBuf, bool)> = match &args.real_results {
        Some(file) => vec![(
            args.real_scenario
                .clone()
                .unwrap_or_else(|| PathBuf::from(REAL_PAIRS[0].0)),
            file.clone(),
            true,
        )],
        None => REAL_PAIRS
            .iter()
            .map(|(s, f)| (PathBuf::from(s), PathBuf::from(f), false))
            .collect(),
    };
    pairs
        .iter()
        .map(|(scenario, file, named)| {
            eprintln!(
                "[real] {} against its stored real results",
                scenario.display()
            );
            real_pair(args, scenario, file, *named)
        })
        .collect()
}

/// One stored real result (`file`, of `scenario`; `named` on the command
/// line) against its simulation.
fn real_pair(
    args: &Args,
    real_scenario: &Path,
    file: &Path,
    named: bool,
) -> anyhow::Result<(RealComparison, RealEntry)> {
    let not_available = |why: String| {
        Ok((
            RealComparison::NotAvailable(why.clone()),
            RealEntry::NotAvailable { reason: why },
        ))
    };
    if !named && !file.exists() {
        return not_available(format!(
            "no stored real results at {} (make them as root with `thinstream run {} --real \
             --out DIR` and pass `--real-results DIR/results.json`)",
            file.display(),
            real_scenario.display()
        ));
    }
    let (real_text, real) = match read_real(file) {
        Ok(x) => x,
        Err(why) => return not_available(why),
    };
    let scenario = match thinstream_lab::Scenario::load(real_scenario) {
        Ok(s) => s,
        Err(e) => return not_available(format!("scenario {}: {e}", real_scenario.display())),
    };
    if scenario.name != real.scenario {
        return not_available(format!(
            "{} holds results of scenario `{}`, but --real-scenario {} is `{}`",
            file.display(),
            real.scenario,
            real_scenario.display(),
            scenario.name
        ));
    }
    let dir = args.out.join(&scenario.name);
    let run_args = run::Args {
        scenario: real_scenario.to_path_buf(),
        seed: Some(real.seed),
        out: Some(dir.clone()),
        pcap: None,
        records: None,
        pcap_run: 0,
        pcap_at: run::PcapAt::Send,
        duration: None,
        drain: None,
        variants: None,
        points: None,
        repetitions: Some(real.repetitions),
        jobs: args.jobs,
        quiet: args.quiet,
        shard: None,
        real: false,
        allow_long: false,
        priority: crate::sched::Priority::Auto,
    };
    let (_plan, _results, sim_file) = run::execute(&run_args, &mut |s| crate::util::out(s))?;
    let control_args = run::Args {
        seed: Some(real.seed.wrapping_add(1)),
        out: Some(dir.join("control")),
        quiet: true,
        ..run_args
    };
    let (_plan, _results, control_file) =
        run::execute(&control_args, &mut |s| crate::util::out(s))?;
    let real_dir = dir.join("real");
    std::fs::create_dir_all(&real_dir)
        .with_context(|| format!("cannot create {}", real_dir.display()))?;
    let real_file = real_dir.join("results.json");
    std::fs::write(&real_file, &real_text)
        .with_context(|| format!("cannot write {}", real_file.display()))?;
    let source = file.display().to_string();
    let rc = real_from_stored(
        &args.out,
        &sim_file,
        &real_file,
        Some(&control_file),
        source.clone(),
    )?;
    let entry = match &rc {
        RealComparison::Available(_) => RealEntry::Available {
            sim: rel(&args.out, &sim_file),
            real: rel(&args.out, &real_file),
            source,
            control: Some(rel(&args.out, &control_file)),
        },
        RealComparison::NotAvailable(why) => RealEntry::NotAvailable {
            reason: why.clone(),
        },
    };
    Ok((rc, entry))
}

/// Writes report.md and report.html under `root`; returns their paths.
fn write_report(
    root: &Path,
    parts: &[report::Part],
    real: &[RealComparison],
    quick: bool,
    skipped: &[String],
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let mut text = report::markdown_report(parts, real, quick);
    if !skipped.is_empty() {
        text.push_str("## Scenarios that could not run\n\n");
        for s in skipped {
            text.push_str(&format!("- {s}\n"));
        }
    }
    std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
    let path = root.join("report.md");
    std::fs::write(&path, &text).with_context(|| format!("cannot write {}", path.display()))?;
    let real_plots = real.iter().flat_map(|rc| match rc {
        RealComparison::Available(rs) => rs.plots.as_slice(),
        RealComparison::NotAvailable(_) => &[],
    });
    let svgs = parts
        .iter()
        .flat_map(|p| &p.sections)
        .flat_map(|s| s.plots.iter())
        .chain(real_plots)
        .map(|(p, plot)| (p.clone(), plot.svg.clone()))
        .collect();
    let html_path = root.join("report.html");
    std::fs::write(&html_path, report::html(&text, &svgs))
        .with_context(|| format!("cannot write {}", html_path.display()))?;
    Ok((path, html_path))
}

/// `--from`: the report again from stored results.
fn rebuild(root: &Path) -> anyhow::Result<ExitCode> {
    let file = root.join(MANIFEST);
    let text = std::fs::read_to_string(&file).with_context(|| {
        format!(
            "cannot read {} (--from needs the folder of an earlier `thinstream reproduce`)",
            file.display()
        )
    })?;
    let manifest: Manifest = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a reproduce manifest", file.display()))?;
    let mut parts = Vec::new();
    for p in &manifest.parts {
        let sections = p
            .results
            .iter()
            .map(|r| section_from_stored(root, &root.join(r)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        parts.push(report::Part {
            title: p.title.clone(),
            intro: p.intro.clone(),
            sections,
        });
    }
    let real = if manifest.real.is_empty() {
        vec![RealComparison::NotAvailable(format!(
            "{} was written by a build without this part",
            file.display()
        ))]
    } else {
        manifest
            .real
            .into_iter()
            .map(|entry| match entry {
                RealEntry::Available {
                    sim,
                    real,
                    source,
                    control,
                } => real_from_stored(
                    root,
                    &root.join(sim),
                    &root.join(real),
                    control.map(|c| root.join(c)).as_deref(),
                    source,
                ),
                RealEntry::NotAvailable { reason } => Ok(RealComparison::NotAvailable(reason)),
            })
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    let (md, html) = write_report(root, &parts, &real, manifest.quick, &manifest.skipped)?;
    crate::util::out(&format!(
        "rebuilt the report of {} scenario(s) from stored results: {} and {}\n",
        parts.iter().map(|p| p.sections.len()).sum::<usize>(),
        md.display(),
        html.display()
    ));
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(from) = &args.from {
        return rebuild(from);
    }
    let mut groups = vec![(SEEDS_TITLE, String::new(), scenario_files(&args.scenarios)?)];
    if !args.no_robustness {
        groups.push((
            ROBUSTNESS_TITLE,
            robustness_intro(args.quick),
            scenario_files(&args.robustness)?,
        ));
    }
    // A file named on the command line must be there before anything runs.
    if let Some(f) = &args.real_results {
        read_real(f).map_err(|e| anyhow!("--real-results: {e}"))?;
    }
    let total: usize = groups.iter().map(|g| g.2.len()).sum();
    let started = wall::now();
    let mut parts = Vec::new();
    let mut manifest = Manifest {
        quick: args.quick,
        parts: Vec::new(),
        skipped: Vec::new(),
        real: Vec::new(),
    };
    let mut done = 0;
    for (title, intro, files) in groups {
        let mut sections = Vec::new();
        let mut stored = Vec::new();
        for file in &files {
            done += 1;
            eprintln!(
                "[{done}/{total}] {} ({:.0} s so far)",
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
                pcap_at: run::PcapAt::Send,
                duration,
                drain,
                variants: None,
                points: None,
                repetitions,
                jobs: args.jobs,
                quiet: args.quiet,
                shard: None,
                real: false,
                allow_long: false,
                priority: crate::sched::Priority::Auto,
            };
            match run::execute(&run_args, &mut |s| crate::util::out(s)) {
                // Plots, CSV and verdicts come from the stored results.
                Ok((_plan, _results, json_file)) => {
                    sections.push(section_from_stored(&args.out, &json_file)?);
                    stored.push(rel(&args.out, &json_file));
                }
                // A scenario none of whose variants this build can run is
                // reported, not fatal: the others still run.
                Err(e) if e.to_string().contains("can run in this build") => {
                    eprintln!("thinstream: skipping {name}: {e}");
                    manifest.skipped.push(format!("{name}: {e}"));
                }
                Err(e) => return Err(e),
            }
        }
        manifest.parts.push(PartEntry {
            title: title.to_string(),
            intro: intro.clone(),
            results: stored,
        });
        parts.push(report::Part {
            title: title.to_string(),
            intro,
            sections,
        });
    }
    let mut real = Vec::new();
    for (rc, entry) in real_part(&args)? {
        if let RealComparison::NotAvailable(why) = &rc {
            eprintln!("thinstream: real sockets vs the simulator not available: {why}");
        }
        real.push(rc);
        manifest.real.push(entry);
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let manifest_path = args.out.join(MANIFEST);
    std::fs::write(
        &manifest_path,
        serde_json::to_string_pretty(&manifest).context("manifest")? + "\n",
    )
    .with_context(|| format!("cannot write {}", manifest_path.display()))?;
    let (path, html_path) = write_report(&args.out, &parts, &real, args.quick, &manifest.skipped)?;
    crate::util::out(&format!(
        "\nreproduced {} scenario(s) in {:.1} s; report: {} and {}\n",
        parts.iter().map(|p| p.sections.len()).sum::<usize>(),
        wall::seconds_since(started),
        path.display(),
        html_path.display()
    ));
    Ok(ExitCode::SUCCESS)
}
