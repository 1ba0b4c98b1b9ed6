//! `report.md` and `report.html`: every scenario's results beside the
//! numbers the documents report (`[reference]` of the scenario file), with
//! plots ([`crate::plots`]), computed verdicts on the `[[reference.compare]]`
//! rows ([`crate::verdict`]) and a long-format CSV ([`crate::tidy`]) per
//! scenario. Plots, verdicts and CSV are drawn from the stored
//! `results.json` (read back from disk by `thinstream reproduce`), never by
//! re-running.

use std::fmt::Write as _;

use thinstream_metrics::{markdown_table, Summary};

use crate::plots::Plot;
use crate::realsim::RealComparison;
use crate::results::Results;
use crate::verdict::{RowVerdict, Verdict};

fn cell(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.decimals$}"))
}

/// Flattens a reference table into `key.path: value` lines.
fn reference_lines(prefix: &str, v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                reference_lines(&p, x, out);
            }
        }
        serde_json::Value::String(s) => out.push(format!("`{prefix}`: {s}")),
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                reference_lines(&format!("{prefix}[{i}]"), x, out);
            }
        }
        other => out.push(format!("`{prefix}`: {other}")),
    }
}

/// Looks up a dotted path in a results JSON value. A segment is an object
/// key, optionally followed by `[field=value,...]` to pick the first array
/// element whose fields have those values (compared as text), e.g.
/// `variants[name=lksctp].also.ack.latency_ms.max` or
/// `variants[name=lksctp].retransmission_causes[retransmission=1,reason=timeout-rtx].share`.
pub fn lookup<'a>(root: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let mut v = root;
    // Dots inside `[...]` belong to a filter value (`points[value=0.5%]`).
    let mut segments = Vec::new();
    let (mut depth, mut from) = (0usize, 0usize);
    for (i, c) in path.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '.' if depth == 0 => {
                segments.push(&path[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    segments.push(&path[from..]);
    for segment in segments {
        let (key, filter) = match segment.split_once('[') {
            Some((k, rest)) => (k, Some(rest.strip_suffix(']')?)),
            None => (segment, None),
        };
        if !key.is_empty() {
            v = v.get(key)?;
        }
        if let Some(filter) = filter {
            let conditions: Vec<(&str, &str)> = filter
                .split(',')
                .map(|c| c.split_once('='))
                .collect::<Option<_>>()?;
            v = v.as_array()?.iter().find(|item| {
                conditions.iter().all(|(f, want)| {
                    item.get(*f).is_some_and(|got| match got {
                        serde_json::Value::String(s) => s == want,
                        other => other.to_string().as_str() == *want,
                    })
                })
            })?;
        }
    }
    Some(v)
}

fn show(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Number(n) => match n.as_f64() {
            Some(x) if x.fract() != 0.0 => format!("{x:.3}"),
            _ => n.to_string(),
        },
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// The `[[reference.compare]]` table: `what`, `ours` (a [`lookup`] path
/// into this scenario's results), `theirs` (the document's value),
/// `source`, and the computed verdict with the check made.
fn comparison_table(results: &serde_json::Value) -> Option<String> {
    let rows = crate::verdict::evaluate_all(results);
    if rows.is_empty() {
        return None;
    }
    let mut out = String::from(
        "Side by side (ours looked up in results.json; theirs as the document states it; verdict by the rule at the top):\n\n\
         | what | ours | theirs | source | verdict | check |\n|---|---:|---|---|---|---|\n",
    );
    for (row, v) in rows {
        let text = |k: &str| row.get(k).map(show).unwrap_or_default();
        let ours = row
            .get("ours")
            .and_then(|p| p.as_str())
            .map_or("-".to_string(), |p| {
                lookup(results, p).map_or("(not in results)".to_string(), show)
            });
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | **{}** | {} |",
            text("what"),
            ours,
            text("theirs"),
            text("source"),
            v.verdict,
            v.detail.replace('|', "\\|")
        );
    }
    out.push('\n');
    Some(out)
}

/// One scenario's material for the report.
#[derive(Clone, Debug)]
pub struct Section {
    pub results: Results,
    /// `results.json` as stored (read back from disk).
    pub json: serde_json::Value,
    /// Path of `results.json` relative to the report.
    pub json_path: String,
    /// Path of the long-format CSV relative to the report.
    pub csv_path: Option<String>,
    /// Plots written beside `results.json`: path relative to the report, plot.
    pub plots: Vec<(String, Plot)>,
}

impl Section {
    /// The verdicts of this scenario's compare rows.
    pub fn verdicts(&self) -> Vec<RowVerdict> {
        crate::verdict::evaluate_all(&self.json)
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    }
}

/// GitHub-style heading anchor: lower case, spaces to `-`, only
/// alphanumerics, `-` and `_` kept.
pub fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// One scenario's section.
pub fn scenario_section(sec: &Section) -> String {
    let r = &sec.results;
    let json_path = sec.json_path.as_str();
    let mut out = String::new();
    let _ = writeln!(out, "## {}\n", r.scenario);
    if !r.description.is_empty() {
        let _ = writeln!(out, "{}\n", r.description);
    }
    if !r.source.is_empty() {
        let _ = writeln!(out, "Reproduces: {}\n", r.source);
    }
    let _ = writeln!(
        out,
        "Master seed {}, {} run(s) of {:.0} s simulated each, {} repetition(s) per variant{}. Results: `{}`.\n",
        r.seed,
        r.runs,
        r.simulated_s,
        r.repetitions,
        r.sweep
            .as_ref()
            .map(|s| format!(" and {} point", s.parameter))
            .unwrap_or_default(),
        json_path
    );
    if let Some(csv) = &sec.csv_path {
        let _ = writeln!(
            out,
            "Long-format data for analysis (`scenario,variant,point,metric,statistic,value`): `{csv}`.\n"
        );
    }
    let counts = crate::verdict::counts(&sec.verdicts());
    if counts.iter().sum::<usize>() > 0 {
        let _ = writeln!(
            out,
            "Verdicts on the documents' statements: {}.\n",
            verdict_counts_text(&counts)
        );
    }
    let rows: Vec<(&str, &Summary)> = r
        .variants
        .iter()
        .filter_map(|v| v.summary.as_ref().map(|s| (v.name.as_str(), s)))
        .collect();
    if rows.is_empty() {
        let _ = writeln!(out, "No variant could run in this build.\n");
    } else {
        let _ = writeln!(
            out,
            "Our numbers ({}; pooled over all runs of a variant):\n",
            crate::plots::latency_label(&r.latency, &r.owd)
        );
        out.push_str(&markdown_table(&rows));
        out.push('\n');
    }
    out.push_str(&recovery_table(r));
    out.push_str(&worst_table(r));
    // The documents plot ACK latency per retransmission number (002 Fig. 5.6).
    let ack: Vec<_> = r
        .variants
        .iter()
        .filter_map(|v| v.also.get("ack").map(|a| (v.name.as_str(), a)))
        .collect();
    if !ack.is_empty() {
        let _ = writeln!(
            out,
            "ACK latency (first transmission to acknowledgement, ms; the documents' box plots) by retransmission number, `mean / p99 / max (count)`:\n"
        );
        out.push_str("| variant | all | 1st | 2nd | 3rd+ |\n|---|---|---|---|---|\n");
        for (name, a) in ack {
            let all = a.latency_ms.map_or("-".to_string(), |l| {
                format!("{:.0} / {:.0} / {:.0}", l.mean, l.p99, l.max)
            });
            let g = |i: usize| {
                a.by_retransmissions.get(i).map_or("-".to_string(), |r| {
                    if r.count == 0 {
                        "- (0)".to_string()
                    } else {
                        format!(
                            "{} / {} / {} ({})",
                            cell(r.mean_ms, 0),
                            cell(r.p99_ms, 0),
                            cell(r.max_ms, 0),
                            r.count
                        )
                    }
                })
            };
            let _ = writeln!(out, "| {name} | {all} | {} | {} | {} |", g(1), g(2), g(3));
        }
        out.push('\n');
    }
    let with_causes: Vec<_> = r
        .variants
        .iter()
        .filter(|v| v.available && v.retransmission_causes.iter().any(|c| c.count > 0))
        .collect();
    if !with_causes.is_empty() {
        let _ = writeln!(
            out,
            "Retransmitted data pieces by retransmission number and reason (002 Fig. 5.26 / Table 5.6): `reason count (share of that number, spurious)`:\n"
        );
        out.push_str("| variant | 1st | 2nd | 3rd+ |\n|---|---|---|---|\n");
        for v in with_causes {
            let _ = write!(out, "| {} |", v.name);
            for nth in 1..=3u32 {
                let _ = write!(out, " {} |", crate::table::causes_cell(v, nth));
            }
            out.push('\n');
        }
        out.push('\n');
    }
    out.push_str(&crate::table::traffic_markdown(r));
    if let Some(sw) = &r.sweep {
        let mtt = r
            .variants
            .iter()
            .any(|v| v.points.iter().any(|p| p.mtt_ms_compared.is_some()));
        let cells = r
            .mtt_reduction
            .as_ref()
            .is_some_and(|red| red.values().any(|x| !x.cells.is_empty()));
        if mtt && cells {
            out.push_str(&cells_markdown(r));
        } else if mtt {
            let avail: Vec<_> = r.variants.iter().filter(|v| v.available).collect();
            let _ = writeln!(
                out,
                "Message transfer time of the message hit by the drop ({} over repetitions, ms) per {}:\n",
                r.mtt_statistic.name(),
                sw.parameter
            );
            let _ = write!(out, "| {} |", sw.parameter);
            for v in &avail {
                let _ = write!(out, " {} |", v.name);
            }
            out.push('\n');
            out.push_str(&"|---".repeat(avail.len() + 1));
            out.push_str("|\n");
            for (i, value) in sw.values.iter().enumerate() {
                let _ = write!(out, "| {value} |");
                for v in &avail {
                    let _ = write!(out, " {} |", v.points[i].mtt_text(r.mtt_statistic));
                }
                out.push('\n');
            }
            out.push('\n');
            if let Some(red) = &r.mtt_reduction {
                for (name, x) in red {
                    let _ = writeln!(
                        out,
                        "- average MTT reduction of {name} vs {}: {}%",
                        x.baseline,
                        cell(x.mean.map(|m| m * 100.0), 1)
                    );
                }
                if red.is_empty() {
                    let _ = writeln!(
                        out,
                        "- no MTT reduction computed: no variant besides the baseline ran"
                    );
                }
                out.push('\n');
            }
        }
    }
    let missing: Vec<_> = r.variants.iter().filter(|v| !v.available).collect();
    if !missing.is_empty() {
        let _ = writeln!(out, "Not run in this build:\n");
        for v in missing {
            let _ = writeln!(
                out,
                "- {} (`{}`): {}",
                v.name,
                v.preset,
                v.error.as_deref().unwrap_or("")
            );
        }
        out.push('\n');
    }
    for v in &r.variants {
        for f in &v.faults {
            let _ = writeln!(out, "- FAULT in {}: {f}", v.name);
        }
    }
    if !sec.plots.is_empty() {
        let _ = writeln!(out, "### Plots: {}\n", r.scenario);
        for (path, plot) in &sec.plots {
            let _ = writeln!(out, "![{}]({path})\n\n*{}*\n", plot.caption, plot.caption);
        }
    }
    if let Some(table) = comparison_table(&sec.json) {
        let _ = writeln!(out, "### Against the documents: {}\n", r.scenario);
        out.push_str(&table);
    }
    if let Some(text) = discussion(r.reference.as_ref()) {
        let _ = writeln!(
            out,
            "### Where we differ, and why: {}\n\n{text}\n",
            r.scenario
        );
    }
    if let Some(reference) = &r.reference {
        let _ = writeln!(
            out,
            "What the documents report (from the scenario's `[reference]`; compare with the tables above):\n"
        );
        let mut lines = Vec::new();
        let mut rest = reference.clone();
        if let Some(m) = rest.as_object_mut() {
            m.remove("compare");
            m.remove("discussion");
        }
        reference_lines("", &rest, &mut lines);
        for l in lines {
            let _ = writeln!(out, "- {l}");
        }
        out.push('\n');
    }
    out
}

/// `[reference] discussion`: the scenario file's reasoning where our
/// numbers differ from the documents' (a string, or a list of paragraphs
/// shown as a list).
pub(crate) fn discussion(reference: Option<&serde_json::Value>) -> Option<String> {
    match reference?.get("discussion")? {
        serde_json::Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        serde_json::Value::Array(items) => {
            let lines: Vec<String> = items
                .iter()
                .filter_map(|x| x.as_str())
                .map(|x| format!("- {}", x.trim()))
                .collect();
            (!lines.is_empty()).then(|| lines.join("\n"))
        }
        _ => None,
    }
}

fn pct_of(part: Option<u64>, whole: u64) -> String {
    match part {
        Some(p) if whole > 0 => format!("{:.3}", p as f64 * 100.0 / whole as f64),
        _ => "-".into(),
    }
}

/// `timeout-rtx 3, fast-rtx 1` for the non-zero spurious causes other than
/// redundant copies, or `-`.
fn spurious_causes(s: &Summary) -> String {
    let parts: Vec<String> = s
        .spurious_by_reason
        .iter()
        .flatten()
        .filter(|(r, c)| **c > 0 && r.as_str() != "redundant-bundle")
        .map(|(r, c)| format!("{r} {c}"))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// One row of the recovery table.
fn recovery_row(name: &str, point: &str, s: &Summary) -> String {
    let l = s.latency_ms;
    format!(
        "| {name} | {point} | {} | {} | {} | {} | {} | {} | {} ({}) | {} / {} | {} ({}) | {} ({}) |\n",
        s.messages,
        cell(l.map(|l| l.p99), 1),
        cell(l.map(|l| l.p999), 1),
        cell(l.map(|l| l.max), 1),
        pct_of(s.spurious_excluding_redundant, s.messages),
        spurious_causes(s),
        s.t3_expiries,
        s.t3_spurious.map_or("-".into(), |x| x.to_string()),
        cell(s.tohd_retransmissions.map(|x| x * 100.0), 2),
        cell(s.tohd_redundant.map(|x| x * 100.0), 2),
        s.data_rtt_samples,
        s.rtt_samples,
        cell(s.thin_share.map(|x| x * 100.0), 2),
        s.thin_transitions,
    )
}

/// The MTT reduction per cell of a grid (the axes other than the drop
/// position), every variant against the baseline: the mean over the
/// cell's positions (what the compare rows use), and the mean over
/// repetitions with its 95% confidence half-width.
fn cells_markdown(r: &Results) -> String {
    let Some(red) = &r.mtt_reduction else {
        return String::new();
    };
    let Some(sw) = &r.sweep else {
        return String::new();
    };
    let axes: Vec<&str> = sw
        .axes
        .iter()
        .map(|a| a.parameter.as_str())
        .filter(|p| *p != "drop-data-packet")
        .collect();
    let mut out = format!(
        "Average MTT reduction per {} (MTT: {} over repetitions per position; reduction averaged over the positions; ± the 95% confidence half-width over repetitions, jackknife, for means), %:\n\n| {} |",
        axes.join(" × "),
        r.mtt_statistic.name(),
        axes.join(" / ")
    );
    for (name, x) in red {
        let _ = write!(out, " {name} vs {} | ± 95% CI |", x.baseline);
    }
    out.push('\n');
    out.push_str(&"|---".repeat(1 + 2 * red.len()));
    out.push_str("|\n");
    let mut order: Vec<&str> = Vec::new();
    for x in red.values() {
        for c in &x.cells {
            if !order.contains(&c.cell.as_str()) {
                order.push(&c.cell);
            }
        }
    }
    for c in order {
        let _ = write!(out, "| {c} |");
        for x in red.values() {
            match x.cells.iter().find(|y| y.cell == c) {
                Some(y) => {
                    let _ = write!(
                        out,
                        " {} | {} |",
                        cell(y.mean.map(|m| m * 100.0), 1),
                        cell(y.ci95.map(|m| m * 100.0), 1)
                    );
                }
                None => out.push_str(" - | - |"),
            }
        }
        out.push('\n');
    }
    out.push('\n');
    for (name, x) in red {
        let _ = writeln!(
            out,
            "- {name} vs {}: over all cells {}% (cells from {}% to {}%)",
            x.baseline,
            cell(x.mean.map(|m| m * 100.0), 1),
            cell(x.cell_min.map(|m| m * 100.0), 1),
            cell(x.cell_max.map(|m| m * 100.0), 1)
        );
    }
    out.push('\n');
    out
}

/// The recovery table (issue recovery): per variant, and per sweep point
/// if the scenario has a sweep, latency tail, spurious retransmissions
/// other than redundant copies by cause, T3 expiries with the spurious
/// ones, `tohd` split into retransmissions and redundant copies, RTT
/// samples and the share of time classified thin.
pub fn recovery_table(r: &Results) -> String {
    let mut rows = String::new();
    for v in &r.variants {
        let Some(s) = &v.summary else { continue };
        // Per point for one-axis sweeps; a grid's hundreds of points are
        // pooled per variant (results.csv has them per point).
        let one_axis = r.sweep.as_ref().is_some_and(|s| s.axes.len() <= 1);
        if one_axis && !v.points.is_empty() {
            for p in &v.points {
                rows.push_str(&recovery_row(&v.name, &p.value, &p.summary));
            }
        } else {
            rows.push_str(&recovery_row(&v.name, "all", s));
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "Recovery{} ({}; spurious = retransmissions of data that had already arrived, redundant RDB copies left out, in % of messages; T3 = timeout retransmissions, one per expiry, with the spurious ones in brackets; `tohd` split into retransmissions / redundant copies, %; RTT samples on data (all); share of the sending time classified thin, % (verdict changes)):\n\n",
        r.sweep
            .as_ref()
            .filter(|s| s.axes.len() <= 1)
            .map(|s| format!(" per {}", s.parameter))
            .unwrap_or_default(),
        crate::plots::latency_label(&r.latency, &r.owd)
    );
    out.push_str("| variant | point | messages | p99 | p99.9 | max | spurious % | spurious by cause | T3 (spurious) | tohd % rtx / RDB | RTT samples | thin % |\n|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|\n");
    out.push_str(&rows);
    out.push('\n');
    out
}

/// The slowest message of every variant (at the last sweep point, usually
/// the heaviest loss) and the path its trace shows ([`crate::worst`]).
pub fn worst_table(r: &Results) -> String {
    let last = r.sweep.as_ref().and_then(|s| s.values.last().cloned());
    let rows: Vec<String> = r
        .variants
        .iter()
        .filter_map(|v| {
            let w = match &last {
                Some(value) => v
                    .points
                    .iter()
                    .find(|p| &p.value == value)?
                    .worst_path
                    .as_ref(),
                None => v.worst_path.as_ref(),
            }?;
            Some(format!(
                "| {} | {} | {:.1} s | {} |",
                v.name,
                cell(w.path.latency_ms, 1),
                w.path.sent_s,
                w.text().replace('|', "\\|")
            ))
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "Slowest message of each variant{} and how it got there, read from its trace (copies of its data in send order with their fate; `[not thin]`: the sender had classified the stream not thin, so its thin-stream mechanisms were off for that copy):\n\n| variant | max, ms | sent at | path |\n|---|---:|---:|---|\n{}\n\n",
        last.map(|v| format!(
            " at {} = {v}",
            r.sweep.as_ref().map_or("", |s| s.parameter.as_str())
        ))
        .unwrap_or_default(),
        rows.join("\n")
    )
}

fn verdict_counts_text(c: &[usize; 4]) -> String {
    Verdict::ALL
        .iter()
        .zip(c)
        .map(|(v, n)| format!("{n} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A part of the report: a title, an introduction and its scenarios
/// (`thinstream reproduce` writes the documents' experiments, then the
/// robustness set).
#[derive(Clone, Debug)]
pub struct Part {
    pub title: String,
    pub intro: String,
    pub sections: Vec<Section>,
}

fn summary_rows(sections: &[Section], out: &mut String, total: &mut [usize; 4]) {
    for sec in sections {
        let c = crate::verdict::counts(&sec.verdicts());
        for (t, n) in total.iter_mut().zip(c) {
            *t += n;
        }
        let _ = writeln!(
            out,
            "| [{}](#{}) | {} | {} | {} | {} | {} |",
            sec.results.scenario,
            slug(&sec.results.scenario),
            c[0],
            c[1],
            c[2],
            c[3],
            sec.plots.len()
        );
    }
}

/// The header, summary of verdicts and table of contents.
fn front_matter(parts: &[Part], real: &[RealComparison], quick: bool) -> String {
    let mut out = String::from("# thinstream reproduction report\n\n");
    let _ = writeln!(
        out,
        "Every experiment under `scenarios/seeds/` run in the deterministic simulator{}. \
         Each section gives our numbers, plots drawn from the stored `results.json`, and our \
         numbers beside what the source documents report for the same setup, with a verdict \
         computed for each statement. Latencies are in milliseconds; delivery latencies \
         (application, transport) are above the minimum one-way delay unless a table says \
         otherwise; `tohd` and loss in percent. Percentiles are nearest-rank over the pooled \
         per-message latencies; a flow with more than {limit} messages (per latency kind; fewer \
         when a run measures more than 32 flows, at least {floor}) is summarised by a \
         histogram instead (HDR bucket layout, {sigfig} significant digits): its percentiles are \
         never below the exact ones and at most 1/1024 (0.1 %) above them, counts, means and \
         maxima stay exact (docs/memory.md).\n",
        if quick {
            " with shortened durations (`--quick`: at most 5 simulated minutes of messages, one repetition; the real-against-simulated part keeps its full length), so tail statistics are rougher than the documents'"
        } else {
            ""
        },
        limit = crate::runner::STREAM_SAMPLE_LIMIT,
        floor = crate::runner::STREAM_SAMPLE_FLOOR,
        sigfig = thinstream_metrics::HISTOGRAM_SIGFIG,
    );
    out.push_str("## Summary\n\n");
    let _ = writeln!(out, "How verdicts are computed: {}\n", crate::verdict::RULE);
    out.push_str(
        "| scenario | reproduced | partly | differs | not comparable | plots |\n|---|---:|---:|---:|---:|---:|\n",
    );
    let mut total = [0usize; 4];
    for part in parts {
        if parts.len() > 1 && !part.title.is_empty() {
            let _ = writeln!(out, "| *{}* | | | | | |", part.title);
        }
        summary_rows(&part.sections, &mut out, &mut total);
    }
    let _ = writeln!(
        out,
        "| **all** | **{}** | **{}** | **{}** | **{}** | {} |\n",
        total[0],
        total[1],
        total[2],
        total[3],
        parts
            .iter()
            .flat_map(|p| &p.sections)
            .map(|s| s.plots.len())
            .sum::<usize>()
    );
    for rc in real {
        out.push_str(&crate::realsim::summary_line(rc));
        out.push('\n');
    }
    out.push_str("## Contents\n\n");
    for part in parts {
        let indent = if parts.len() > 1 && !part.title.is_empty() {
            let _ = writeln!(out, "- [{}](#{})", part.title, slug(&part.title));
            "  "
        } else {
            ""
        };
        for sec in &part.sections {
            let _ = writeln!(
                out,
                "{indent}- [{}](#{}){}",
                sec.results.scenario,
                slug(&sec.results.scenario),
                if sec.results.description.is_empty() {
                    String::new()
                } else {
                    format!(": {}", sec.results.description)
                }
            );
        }
    }
    if !real.is_empty() {
        let _ = writeln!(
            out,
            "- [{}](#{})",
            crate::realsim::TITLE,
            slug(crate::realsim::TITLE)
        );
    }
    out.push('\n');
    out
}

/// The whole report of one untitled part: a header, the summary,
/// contents, one section per scenario.
pub fn markdown(sections: &[Section], quick: bool) -> String {
    markdown_parts(
        &[Part {
            title: String::new(),
            intro: String::new(),
            sections: sections.to_vec(),
        }],
        quick,
    )
}

/// The whole report: a header, the summary, contents, then each part
/// (its title as a top-level heading when there are several) with one
/// section per scenario.
pub fn markdown_parts(parts: &[Part], quick: bool) -> String {
    markdown_report(parts, &[], quick)
}

/// [`markdown_parts`] and, after the parts, the real-against-simulated
/// part ([`crate::realsim`]) with each of `real` (their summary lines at
/// the top; none: no part).
pub fn markdown_report(parts: &[Part], real: &[RealComparison], quick: bool) -> String {
    let mut out = front_matter(parts, real, quick);
    for part in parts {
        if parts.len() > 1 && !part.title.is_empty() {
            let _ = writeln!(out, "# {}\n", part.title);
        }
        if !part.intro.is_empty() {
            let _ = writeln!(out, "{}\n", part.intro.trim_end());
        }
        for sec in &part.sections {
            out.push_str(&scenario_section(sec));
        }
    }
    if !real.is_empty() {
        out.push_str(&crate::realsim::markdown_all(real));
    }
    out
}

const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;line-height:1.45;color:#222}\
table{border-collapse:collapse;margin:0.5rem 0 1rem;font-size:0.9rem}\
th,td{border:1px solid #ccc;padding:0.25rem 0.5rem;vertical-align:top}\
th{background:#f3f3f3}tr:nth-child(even) td{background:#fafafa}\
code{background:#f3f3f3;padding:0 0.2rem;border-radius:3px;font-size:0.9em}\
h2{border-bottom:2px solid #ddd;padding-bottom:0.2rem;margin-top:2.5rem}\
figure{margin:1rem 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}\
p.caption{font-size:0.85rem;color:#555;margin-top:0}";

/// `report.html`: the Markdown report rendered to one self-contained page
/// (no network): every image whose path is in `svgs` is replaced by the SVG
/// itself, headings get the anchors the contents link to.
pub fn html(markdown: &str, svgs: &std::collections::BTreeMap<String, String>) -> String {
    use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};
    let parser = Parser::new_ext(markdown, Options::ENABLE_TABLES);
    let mut events: Vec<Event> = Vec::new();
    let mut in_image: Option<String> = None;
    let mut heading: Option<(pulldown_cmark::HeadingLevel, String)> = None;
    for ev in parser {
        if let Some(dest) = &in_image {
            if matches!(ev, Event::End(TagEnd::Image)) {
                let svg = svgs.get(dest).map_or_else(
                    || format!("<a href=\"{dest}\">{dest}</a>"),
                    |s| {
                        // Drop the XML declaration: not allowed inside HTML.
                        let body = s.find("<svg").map_or(s.as_str(), |i| &s[i..]);
                        body.to_string()
                    },
                );
                events.push(Event::Html(CowStr::from(format!("<figure>{svg}</figure>"))));
                in_image = None;
            }
            continue;
        }
        match ev {
            Event::Start(Tag::Image { dest_url, .. }) => in_image = Some(dest_url.to_string()),
            Event::Start(Tag::Heading { level, .. }) => heading = Some((level, String::new())),
            Event::End(TagEnd::Heading(_)) => {
                if let Some((level, text)) = heading.take() {
                    let n = level as usize;
                    events.push(Event::Html(CowStr::from(format!(
                        "<h{n} id=\"{}\">{}</h{n}>\n",
                        slug(&text),
                        escape(&text)
                    ))));
                }
            }
            Event::Text(t) | Event::Code(t) if heading.is_some() => {
                if let Some((_, h)) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            _ if heading.is_some() => {}
            other => events.push(other),
        }
    }
    let mut body = String::new();
    pulldown_cmark::html::push_html(&mut body, events.into_iter());
    // A plot is a block of its own, not inside a paragraph; the caption
    // line under it reads as the figure's caption.
    let body = body
        .replace("<p><figure>", "<figure>")
        .replace("</figure></p>", "</figure>")
        .replace("</figure>\n<p><em>", "</figure>\n<p class=\"caption\"><em>");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>thinstream reproduction report</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Writes a scenario's plots and CSV beside its stored `results.json`
/// (`dir`), from the stored JSON; returns the written plots and the CSV
/// file name.
pub fn write_artifacts(
    dir: &std::path::Path,
    json: &serde_json::Value,
) -> std::io::Result<(Vec<Plot>, String)> {
    let plots = crate::plots::plots(json);
    for p in &plots {
        std::fs::write(dir.join(&p.file), &p.svg)?;
    }
    let csv = "results.csv".to_string();
    std::fs::write(dir.join(&csv), crate::tidy::csv(json))?;
    Ok((plots, csv))
}

#[cfg(test)]
mod tests {
    use super::lookup;

    #[test]
    fn lookup_paths() {
        let v: serde_json::Value = serde_json::json!({
            "variants": [
                {"name": "a", "x": {"y": 1.5}, "rows": [{"n": 1, "r": "t", "share": 0.25}]},
                {"name": "b", "x": {"y": 2}}
            ],
            "mtt_reduction": {"er-packet": {"mean": 0.4}}
        });
        assert_eq!(
            lookup(&v, "variants[name=b].x.y"),
            Some(&serde_json::json!(2))
        );
        assert_eq!(
            lookup(&v, "variants[name=a].rows[n=1,r=t].share"),
            Some(&serde_json::json!(0.25))
        );
        assert_eq!(
            lookup(&v, "mtt_reduction.er-packet.mean"),
            Some(&serde_json::json!(0.4))
        );
        assert_eq!(lookup(&v, "variants[name=c].x"), None);
        assert_eq!(lookup(&v, "variants[name=a].rows[n=2].share"), None);
        assert_eq!(lookup(&v, "variants[broken"), None);
    }
}
