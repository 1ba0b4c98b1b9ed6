//! The reproduction report's "Real sockets vs the simulator" part: a
//! scenario run on real sockets by `thinstream run --real` (results stored
//! in the repository) beside the same scenario simulated with the same
//! master seed, repetitions and duration, row by row per variant, latency
//! kind and retransmission number ([`crate::compare::rows`]), each row with
//! a computed agreement mark ([`crate::compare::Row::agreement`]), box
//! plots real against simulated ([`crate::plots::real_vs_sim_plots`]), a
//! long-format CSV, and the scenario file's `[reference] discussion`
//! saying where and why the two differ. Everything is drawn from the two
//! stored `results.json`, never by re-running.

use std::fmt::Write as _;

use crate::compare::{self, Agreement, Row};
use crate::plots::Plot;
use crate::results::Results;

/// Rows whose mean or p99 differ by more than this (in % of the simulated
/// value, and more than [`compare::FLOOR_MS`]) are marked as differing.
pub const LIMIT_PERCENT: f64 = 10.0;

/// The part's heading.
pub const TITLE: &str = "Real sockets vs the simulator";

/// How rows are marked, as the report states it.
pub fn rule() -> String {
    format!(
        "a row **agrees** when its mean and its 99th percentile each differ from the simulated \
         value by at most {LIMIT_PERCENT:.0} % or by at most {floor} ms (a real host's timers and \
         the emulator's release times are good to about a millisecond, and a latency near zero \
         would turn that into hundreds of percent); it **differs** otherwise. A row with fewer \
         than {few} messages on either side is marked *too few samples* and not judged (its p99 \
         is its largest value or two). diff = (real − simulated) / simulated, in ms where the \
         simulated value is 0.",
        floor = compare::FLOOR_MS,
        few = compare::FEW_SAMPLES,
    )
}

/// A real result and its simulated twin, read back from disk.
#[derive(Clone, Debug)]
pub struct RealVsSim {
    pub sim: Results,
    pub real: Results,
    /// Paths relative to the report: the simulated and the real
    /// `results.json`.
    pub sim_path: String,
    pub real_path: String,
    /// Where the stored real results came from (as given to `reproduce`).
    pub source: String,
    /// The control: the same scenario simulated with the next master seed
    /// (how far two simulated runs differ by the same rule), and its path
    /// relative to the report.
    pub control: Option<(Results, String)>,
    /// The long-format CSV ([`csv`]) relative to the report.
    pub csv_path: Option<String>,
    /// Plots ([`crate::plots::real_vs_sim_plots`]): path relative to the
    /// report, plot.
    pub plots: Vec<(String, Plot)>,
}

/// The part as the report shows it: the comparison, or why there is none.
#[derive(Clone, Debug)]
pub enum RealComparison {
    Available(Box<RealVsSim>),
    NotAvailable(String),
}

/// Whether `real` is a real run of the scenario `sim` simulated, with the
/// same seed, repetitions, duration, latency kind and variants; the
/// mismatch in words otherwise.
pub fn check(sim: &Results, real: &Results) -> Result<(), String> {
    if real.mode != "real" {
        return Err(format!(
            "the stored real results are not a real run (mode `{}`)",
            real.mode
        ));
    }
    if sim.mode != "simulated" {
        return Err(format!(
            "the simulated side is not simulated (mode `{}`)",
            sim.mode
        ));
    }
    let same = |what: &str, a: String, b: String| {
        if a == b {
            Ok(())
        } else {
            Err(format!(
                "the stored real results do not match the scenario: {what} {b} (real) against {a} (scenario file now); re-run `thinstream run FILE --real`"
            ))
        }
    };
    same("scenario", sim.scenario.clone(), real.scenario.clone())?;
    same("master seed", sim.seed.to_string(), real.seed.to_string())?;
    same(
        "repetitions",
        sim.repetitions.to_string(),
        real.repetitions.to_string(),
    )?;
    same(
        "seconds per run",
        sim.simulated_s.to_string(),
        real.simulated_s.to_string(),
    )?;
    same("latency kind", sim.latency.clone(), real.latency.clone())?;
    same("one-way delay removal", sim.owd.clone(), real.owd.clone())?;
    let variants = |r: &Results| {
        r.variants
            .iter()
            .map(|v| {
                format!(
                    "{} = {} {}",
                    v.name,
                    v.preset,
                    serde_json::to_string(&v.overrides).unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    same("variants", variants(sim), variants(real))
}

/// Latency kinds both sides report, the summary kind first.
pub fn kinds(rs: &RealVsSim) -> Vec<String> {
    compare::common_kinds(&rs.sim, &rs.real)
}

/// Per variant present on both sides: its rows of latency `kind`
/// (`0`, `1`, `2`, `3+`, `all`), simulated against real.
pub fn rows(rs: &RealVsSim, kind: &str) -> Vec<(String, Vec<Row>)> {
    pair_rows(&rs.sim, &rs.real, kind)
}

/// Per variant present in both `a` and `b`: its rows of latency `kind`.
fn pair_rows(a: &Results, b: &Results, kind: &str) -> Vec<(String, Vec<Row>)> {
    a.variants
        .iter()
        .filter_map(|va| {
            let vb = b.variants.iter().find(|v| v.name == va.name)?;
            Some((va.name.clone(), compare::rows(a, va, b, vb, kind)))
        })
        .collect()
}

/// Rows of latency `kind` of `a` against `b` by [`Agreement`] (in
/// [`Agreement::ALL`] order), over every variant, retransmission numbers
/// and `all`.
fn pair_tally(a: &Results, b: &Results, kind: &str) -> [usize; 3] {
    let mut out = [0; 3];
    for (_, rows) in pair_rows(a, b, kind) {
        for r in rows {
            let m = r.agreement(LIMIT_PERCENT, compare::FLOOR_MS);
            if let Some(i) = Agreement::ALL.iter().position(|x| *x == m) {
                out[i] += 1;
            }
        }
    }
    out
}

/// Rows of latency `kind`, simulated against real, by [`Agreement`] (in
/// [`Agreement::ALL`] order).
pub fn tally(rs: &RealVsSim, kind: &str) -> [usize; 3] {
    pair_tally(&rs.sim, &rs.real, kind)
}

/// The same for the control: simulated against simulated with the next
/// master seed.
pub fn control_tally(rs: &RealVsSim, kind: &str) -> Option<[usize; 3]> {
    rs.control
        .as_ref()
        .map(|(c, _)| pair_tally(&rs.sim, c, kind))
}

/// Every row of every kind in long format:
/// `scenario,variant,latency,retransmissions,side,statistic,value` with
/// side `sim` or `real` and statistic `count`, `mean_ms`, `p99_ms`.
pub fn csv(rs: &RealVsSim) -> String {
    let mut out = String::from("scenario,variant,latency,retransmissions,side,statistic,value\n");
    for kind in kinds(rs) {
        for (variant, rows) in rows(rs, &kind) {
            for r in rows {
                for (side, count, mean, p99) in [
                    ("sim", r.count.0, r.mean.0, r.p99.0),
                    ("real", r.count.1, r.mean.1, r.p99.1),
                ] {
                    let mut line = |stat: &str, value: String| {
                        let _ = writeln!(
                            out,
                            "{},{variant},{kind},{},{side},{stat},{value}",
                            rs.sim.scenario, r.retransmissions
                        );
                    };
                    line("count", count.to_string());
                    if let Some(m) = mean {
                        line("mean_ms", m.to_string());
                    }
                    if let Some(p) = p99 {
                        line("p99_ms", p.to_string());
                    }
                }
            }
        }
    }
    out
}

/// The one-line summary for the top of the report.
pub fn summary_line(rc: &RealComparison) -> String {
    let anchor = crate::report::slug(TITLE);
    match rc {
        RealComparison::NotAvailable(why) => {
            format!("[{TITLE}](#{anchor}): not available ({why}).\n")
        }
        RealComparison::Available(rs) => {
            let [agree, differ, few] = tally(rs, &rs.sim.latency);
            let control = control_tally(rs, &rs.sim.latency).map_or(String::new(), |[a, d, _]| {
                format!(
                    " (control, the simulator against itself with master seed {}: {a} agree, {d} differ)",
                    rs.control.as_ref().map_or(0, |(c, _)| c.seed)
                )
            });
            format!(
                "[{TITLE}](#{anchor}) (`{}`, {}): of {} rows (variant × retransmission number) with \
                 enough samples, **{agree} agree** within {LIMIT_PERCENT:.0} % and **{differ} differ**{control}; \
                 {few} rows have too few samples to judge.\n",
                rs.sim.scenario,
                crate::plots::latency_name(&rs.sim.latency, &rs.sim.owd),
                agree + differ
            )
        }
    }
}

fn mark(a: Agreement) -> String {
    match a {
        Agreement::Differs => format!("**{}**", a.text()),
        Agreement::FewSamples => format!("*{}*", a.text()),
        Agreement::Agrees => a.text().to_string(),
    }
}

/// The part of the report: heading, what was compared, the rule, counts
/// per latency kind, the table of the summary kind, plots, the CSV and the
/// scenario's explanation.
pub fn markdown(rc: &RealComparison) -> String {
    format!("# {TITLE}\n\n{}", body(rc))
}

/// The part for several stored real results: one heading, then each
/// comparison under its scenario's name (one alone reads as
/// [`markdown`]).
pub fn markdown_all(rcs: &[RealComparison]) -> String {
    if let [one] = rcs {
        return markdown(one);
    }
    let mut out = format!("# {TITLE}\n\n");
    for rc in rcs {
        match rc {
            RealComparison::Available(rs) => {
                let _ = writeln!(out, "## {}\n", rs.sim.scenario);
            }
            RealComparison::NotAvailable(_) => out.push_str("## Not available\n\n"),
        }
        out.push_str(&body(rc));
    }
    out
}

/// One comparison without the part's heading.
fn body(rc: &RealComparison) -> String {
    let mut out = String::new();
    let rs = match rc {
        RealComparison::NotAvailable(why) => {
            let _ = writeln!(out, "Not available: {why}.\n");
            return out;
        }
        RealComparison::Available(rs) => rs,
    };
    let (sim, real) = (&rs.sim, &rs.real);
    let kernel_tcp = real
        .real
        .as_ref()
        .is_some_and(|i| i.runs.iter().any(|r| r.kernel_tcp.is_some()));
    let how = if kernel_tcp {
        "the host kernel's TCP between two network namespaces joined by the link emulator, \
         one clock for the emulator and both applications, the trace records derived from the \
         packets the emulator relayed and from the applications' writes and reads"
    } else {
        "both endpoints and the link emulator on its loopback with one clock"
    };
    let _ = writeln!(
        out,
        "`{}` ({}) on real sockets, `thinstream run --real`: every run (variant × repetition) in \
         its own network namespace, {how}, in real time, through the scenario's links with the \
         simulator's link seeds for that run and the workload from the run's seed, analysed by \
         the simulator's own analysis of both endpoints' traces. The real results are stored in \
         the repository (`{}`, copied to `{}`); the simulated side is the same scenario run by \
         this `reproduce` with the same master seed, repetitions and duration (`{}`; not \
         shortened by `--quick`).\n",
        sim.scenario, sim.description, rs.source, rs.real_path, rs.sim_path
    );
    let _ = writeln!(out, "- real: {}", compare::describe(real));
    let _ = writeln!(out, "- simulated: {}", compare::describe(sim));
    if let Some(info) = &real.real {
        let got: Vec<(u64, u64)> = info.runs.iter().map(|r| (r.received, r.messages)).collect();
        let all = got.iter().filter(|(r, m)| r == m).count();
        let _ = writeln!(
            out,
            "- real runs delivering every message to the application (each checked once and in \
             order): {all} of {}",
            got.len()
        );
    }
    let _ = writeln!(out, "\nHow rows are marked: {}\n", rule());
    let kinds = kinds(rs);
    if let Some((c, path)) = &rs.control {
        let _ = writeln!(
            out,
            "Control: how far two simulations differ by the same rule, the simulated side against \
             the same scenario simulated with master seed {} (`{path}`). A real run meets its \
             simulated twin's workload and, packet for packet, the same loss draws until the two \
             packet sequences part; another seed draws other losses from the start.\n",
            c.seed
        );
    }
    out.push_str(
        "| latency kind | rows | agree | differ | too few samples | control: agree | control: differ |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for kind in &kinds {
        let [a, d, f] = tally(rs, kind);
        let (ca, cd) = control_tally(rs, kind)
            .map_or(("-".to_string(), "-".to_string()), |[ca, cd, _]| {
                (ca.to_string(), cd.to_string())
            });
        let _ = writeln!(
            out,
            "| {} | {} | {a} | {d} | {f} | {ca} | {cd} |",
            crate::plots::latency_name(kind, &sim.owd),
            a + d + f
        );
    }
    out.push('\n');
    let label = crate::plots::latency_label(&sim.latency, &sim.owd);
    let _ = writeln!(
        out,
        "### Per retransmission number: {label}\n\nPooled over all runs of a variant; `rtx` is \
         the number of retransmissions the message needed, `all` every message.\n"
    );
    out.push_str(
        "| variant | rtx | n sim | n real | mean sim | mean real | diff | p99 sim | p99 real | diff | mark |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for (variant, rows) in rows(rs, &sim.latency) {
        for r in rows {
            let _ = writeln!(
                out,
                "| {variant} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.retransmissions,
                r.count.0,
                r.count.1,
                compare::num(r.mean.0),
                compare::num(r.mean.1),
                compare::pct(r.mean, LIMIT_PERCENT, compare::FLOOR_MS),
                compare::num(r.p99.0),
                compare::num(r.p99.1),
                compare::pct(r.p99, LIMIT_PERCENT, compare::FLOOR_MS),
                mark(r.agreement(LIMIT_PERCENT, compare::FLOOR_MS))
            );
        }
    }
    out.push('\n');
    if kinds.len() > 1 {
        let _ = writeln!(
            out,
            "The other latency kinds' rows ({}) are in the CSV below and in \
             `thinstream compare {} {}`.\n",
            kinds[1..].join(", "),
            rs.sim_path,
            rs.real_path
        );
    }
    if let Some(csv) = &rs.csv_path {
        let _ = writeln!(
            out,
            "Every row of every latency kind, long format \
             (`scenario,variant,latency,retransmissions,side,statistic,value`): `{csv}`.\n"
        );
    }
    if !rs.plots.is_empty() {
        let _ = writeln!(out, "### Plots: real against simulated\n");
        for (path, plot) in &rs.plots {
            let _ = writeln!(out, "![{}]({path})\n\n*{}*\n", plot.caption, plot.caption);
        }
    }
    match crate::report::discussion(sim.reference.as_ref()) {
        Some(text) => {
            let _ = writeln!(
                out,
                "### Where real and simulated differ, and why\n\nFrom the scenario file's \
                 `[reference] discussion` (written for the stored real results named above):\n\n{text}\n"
            );
        }
        None => {
            let _ = writeln!(
                out,
                "The scenario file has no `[reference] discussion` explaining the differences.\n"
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RealInfo;

    const THIN: &str = r#"
name = "realsim-test"
source = "test"
duration = "120s"
drain = "10s"
[topology]
kind = "two-host"
forward = "delay 30ms loss 8%"
reverse = "delay 30ms loss 8%"
[[flows]]
workload = { kind = "constant", iat = "100ms", bytes = 100 }
[[variants]]
name = "linux"
preset = "linux"
[[variants]]
name = "thin"
preset = "thin"
[metrics]
also = ["ack"]
[reference]
discussion = ["why they differ: a test paragraph"]
"#;

    fn simulated() -> Results {
        crate::compare::tests::results_of(THIN)
    }

    /// A "real" result made from the simulated one: the same numbers, one
    /// row of `thin` (1 retransmission) 20 % slower on average.
    fn fixture(sim: &Results) -> Results {
        let mut real = sim.clone();
        real.mode = "real".into();
        real.real = Some(RealInfo {
            started_utc: "2026-01-01T00:00:00Z".into(),
            jobs: 2,
            not_measured: Default::default(),
            runs: Vec::new(),
        });
        let one = real.variants[1]
            .summary
            .as_mut()
            .unwrap()
            .by_retransmissions
            .iter_mut()
            .find(|r| r.retransmissions == 1)
            .unwrap();
        assert!(
            one.count >= compare::FEW_SAMPLES,
            "the test needs a judged row"
        );
        one.mean_ms = one.mean_ms.map(|m| m * 1.2);
        real
    }

    fn comparison(sim: Results, real: Results, control: Option<Results>) -> RealVsSim {
        RealVsSim {
            sim,
            real,
            sim_path: "x/results.json".into(),
            real_path: "x/real/results.json".into(),
            source: "stored.json".into(),
            control: control.map(|c| (c, "x/control/results.json".into())),
            csv_path: Some("x/real-vs-sim.csv".into()),
            plots: Vec::new(),
        }
    }

    // Marks are computed from the rows: the slowed row differs, rows with
    // fewer than FEW_SAMPLES messages are not judged, the rest agree; the
    // counts, the summary line and the discussion follow.
    #[test]
    fn marks_are_computed_per_row() {
        let sim = simulated();
        let real = fixture(&sim);
        assert_eq!(check(&sim, &real), Ok(()));
        let rs = comparison(sim.clone(), real, Some(sim.clone()));
        let rows = rows(&rs, "application");
        let mut want = [0usize; 3];
        for (variant, rows) in &rows {
            for r in rows {
                let m = r.agreement(LIMIT_PERCENT, compare::FLOOR_MS);
                let expect = if r.few() {
                    Agreement::FewSamples
                } else if variant == "thin" && r.retransmissions == "1" {
                    Agreement::Differs
                } else {
                    Agreement::Agrees
                };
                assert_eq!(m, expect, "{variant} {}", r.retransmissions);
                want[Agreement::ALL.iter().position(|x| *x == m).unwrap()] += 1;
            }
        }
        assert_eq!(want[1], 1);
        assert!(want[0] > 0 && want[2] > 0, "{want:?}");
        assert_eq!(tally(&rs, "application"), want);
        // The control is the simulated side itself here: nothing differs.
        assert_eq!(control_tally(&rs, "application").unwrap()[1], 0);
        let md = markdown(&RealComparison::Available(Box::new(rs.clone())));
        assert!(md.starts_with("# Real sockets vs the simulator\n"), "{md}");
        assert!(
            md.contains("| thin | 1 |") && md.contains("**+20%** |"),
            "{md}"
        );
        assert_eq!(md.matches("| **differs** |").count(), 1, "{md}");
        assert_eq!(md.matches("| *too few samples* |").count(), want[2], "{md}");
        assert_eq!(md.matches("| agrees |").count(), want[0], "{md}");
        assert!(md.contains("- why they differ: a test paragraph"), "{md}");
        assert!(md.contains("x/real-vs-sim.csv"), "{md}");
        let line = summary_line(&RealComparison::Available(Box::new(rs.clone())));
        assert!(
            line.contains(&format!("**{} agree**", want[0]))
                && line.contains("**1 differ**")
                && line.contains("master seed 1: "),
            "{line}"
        );
        let csv = csv(&rs);
        assert!(csv.starts_with("scenario,variant,latency,retransmissions,side,statistic,value\n"));
        assert!(csv.contains("realsim-test,thin,ack,1,real,count,"), "{csv}");
    }

    #[test]
    fn mismatches_and_missing_results_are_not_available() {
        let sim = simulated();
        let real = fixture(&sim);
        assert!(check(&sim, &sim).unwrap_err().contains("not a real run"));
        let mut other = real.clone();
        other.seed = 7;
        assert!(check(&sim, &other)
            .unwrap_err()
            .contains("master seed 7 (real)"));
        let mut other = real.clone();
        other.variants[1].preset = "rfc".into();
        assert!(check(&sim, &other).unwrap_err().contains("variants"));
        let md = markdown(&RealComparison::NotAvailable(
            "no stored real results".into(),
        ));
        assert_eq!(
            md,
            "# Real sockets vs the simulator\n\nNot available: no stored real results.\n\n"
        );
    }

    // Several stored real results: one part, a heading per scenario, each
    // comparison complete; a kernel TCP run says how it was made; one
    // comparison alone reads as before.
    #[test]
    fn several_comparisons_share_one_part() {
        let sim = simulated();
        let real = fixture(&sim);
        let mut tcp_real = real.clone();
        tcp_real.scenario = "realsim-tcp".into();
        if let Some(info) = tcp_real.real.as_mut() {
            info.runs.push(crate::RealRun {
                index: 0,
                variant: "linux".into(),
                repetition: 0,
                point: None,
                started_s: 0.0,
                wall_s: 1.0,
                flows: 1,
                messages: 1,
                received: 1,
                echoes: None,
                emulator: serde_json::Value::Null,
                app_wake_late_us: None,
                kernel_tcp: Some(serde_json::json!({"settings": {"congestion": "reno"}})),
            });
        }
        let mut tcp_sim = sim.clone();
        tcp_sim.scenario = "realsim-tcp".into();
        let all = [
            RealComparison::Available(Box::new(comparison(sim.clone(), real, None))),
            RealComparison::Available(Box::new(comparison(tcp_sim, tcp_real, None))),
            RealComparison::NotAvailable("no stored real results at y".into()),
        ];
        let md = markdown_all(&all);
        assert_eq!(
            md.matches("# Real sockets vs the simulator\n").count(),
            1,
            "{md}"
        );
        let (first, rest) = md.split_at(md.find("## realsim-tcp\n").expect("second heading"));
        assert!(first.contains("## realsim-test\n"), "{first}");
        assert!(first.contains("both endpoints and the link emulator on its loopback"));
        assert!(rest.contains("the host kernel's TCP between two network namespaces"));
        assert_eq!(md.matches("| **differs** |").count(), 2, "{md}");
        assert!(rest.contains("## Not available\n\nNot available: no stored real results at y."));
        assert_eq!(markdown_all(&all[..1]), markdown(&all[0]));
    }
}
