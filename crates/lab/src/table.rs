//! Readable text tables of a [`Results`] for the terminal.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::results::Results;

fn cell(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.decimals$}"))
}

/// Lays out rows with right-aligned columns (the first left-aligned).
fn layout(header: &[String], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut width = vec![0usize; cols];
    for r in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        for (i, c) in r.iter().enumerate().take(cols) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |r: &[String], out: &mut String| {
        for (i, c) in r.iter().enumerate().take(cols) {
            if i == 0 {
                let _ = write!(out, "{c:<w$}", w = width[i]);
            } else {
                let _ = write!(out, "  {c:>w$}", w = width[i]);
            }
        }
        out.push('\n');
    };
    line(header, &mut out);
    let total: usize = width.iter().sum::<usize>() + 2 * (cols.saturating_sub(1));
    out.push_str(&"-".repeat(total));
    out.push('\n');
    for r in rows {
        line(r, &mut out);
    }
    out
}

/// The retransmitted pieces of retransmission number `nth` by reason:
/// `reason count (share %, spurious)`, `;`-separated, or `-`.
pub(crate) fn causes_cell(v: &crate::results::VariantResult, nth: u32) -> String {
    let parts: Vec<String> = v
        .retransmission_causes
        .iter()
        .filter(|c| c.retransmission == nth && c.count > 0)
        .map(|c| {
            format!(
                "{} {} ({:.0}%, {})",
                c.reason,
                c.count,
                c.share * 100.0,
                c.spurious.map_or("-".into(), |s| s.to_string())
            )
        })
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join("; ")
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The per-variant tables: latency, latency by retransmission count,
/// retransmission reasons; and, for a drop sweep, MTT per position.
pub fn render(r: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{}, pooled over {} run(s):",
        crate::plots::latency_label(&r.latency, &r.owd),
        r.runs
    );
    let header = strings(&[
        "variant",
        "messages",
        "delivered",
        "mean",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        "loss %",
        "tohd %",
        "spurious",
        "wall s",
    ]);
    let mut rows = Vec::new();
    for v in &r.variants {
        let Some(s) = &v.summary else {
            let mut row = vec![v.name.clone(), "unavailable".into()];
            row.resize(header.len(), String::new());
            rows.push(row);
            continue;
        };
        let l = s.latency_ms;
        rows.push(vec![
            v.name.clone(),
            s.messages.to_string(),
            s.delivered.map_or("-".into(), |d| d.to_string()),
            cell(l.map(|l| l.mean), 1),
            cell(l.map(|l| l.p50), 1),
            cell(l.map(|l| l.p90), 1),
            cell(l.map(|l| l.p99), 1),
            cell(l.map(|l| l.p999), 1),
            cell(l.map(|l| l.max), 1),
            cell(s.loss_rate.map(|x| x * 100.0), 2),
            cell(s.tohd.map(|x| x * 100.0), 2),
            s.spurious.map_or("-".into(), |d| d.to_string()),
            format!("{:.2}", v.wall_s),
        ]);
    }
    out.push_str(&layout(&header, &rows));
    // A backlog at the end of the run is not in the percentiles: say so.
    for v in &r.variants {
        let Some(s) = &v.summary else { continue };
        if let Some(n) = s.undelivered.filter(|n| *n > 0) {
            let _ = writeln!(
                out,
                "note: {}: {n} message(s) were still queued or in flight when the runs ended (waited up to {:.1} ms, median {:.1} ms); the latency columns cover delivered messages only",
                v.name,
                s.undelivered_waited_max_ms.unwrap_or(0.0),
                s.undelivered_waited_p50_ms.unwrap_or(0.0),
            );
        }
    }

    let _ = writeln!(
        out,
        "\n{} by retransmissions of the message (count / mean / p99 / max, ms):",
        crate::plots::latency_name(&r.latency, &r.owd)
    );
    let header = strings(&["variant", "0", "1", "2", "3+"]);
    let mut rows = Vec::new();
    for v in &r.variants {
        let Some(s) = &v.summary else { continue };
        let mut row = vec![v.name.clone()];
        for g in &s.by_retransmissions {
            row.push(if g.count == 0 {
                "0".into()
            } else {
                format!(
                    "{} / {} / {} / {}",
                    g.count,
                    cell(g.mean_ms, 1),
                    cell(g.p99_ms, 1),
                    cell(g.max_ms, 1)
                )
            });
        }
        rows.push(row);
    }
    out.push_str(&layout(&header, &rows));

    // Only reasons some variant used, so the table stays narrow.
    let used: BTreeSet<&str> = r
        .variants
        .iter()
        .filter_map(|v| v.summary.as_ref())
        .flat_map(|s| {
            s.reasons
                .iter()
                .filter(|(_, c)| **c > 0)
                .map(|(k, _)| k.as_str())
        })
        .collect();
    let _ = writeln!(out, "\ndata pieces sent, by reason:");
    let mut header = vec!["variant".to_string()];
    header.extend(used.iter().map(|s| s.to_string()));
    let mut rows = Vec::new();
    for v in &r.variants {
        let Some(s) = &v.summary else { continue };
        let mut row = vec![v.name.clone()];
        for k in &used {
            row.push(s.reasons.get(*k).copied().unwrap_or(0).to_string());
        }
        rows.push(row);
    }
    out.push_str(&layout(&header, &rows));

    let _ = writeln!(
        out,
        "\nretransmitted data pieces by retransmission number and reason: count (share of that number %, spurious):"
    );
    let header = strings(&["variant", "1st", "2nd", "3rd+"]);
    let mut rows = Vec::new();
    for v in r.variants.iter().filter(|v| v.available) {
        let mut row = vec![v.name.clone()];
        for nth in 1..=3u32 {
            row.push(causes_cell(v, nth));
        }
        rows.push(row);
    }
    out.push_str(&layout(&header, &rows));

    if let Some(sw) = &r.sweep {
        let mtt = r
            .variants
            .iter()
            .any(|v| v.points.iter().any(|p| p.mtt_ms.is_some()));
        let cells = r
            .mtt_reduction
            .as_ref()
            .is_some_and(|red| red.values().any(|x| !x.cells.is_empty()));
        if mtt && cells {
            out.push('\n');
        } else if mtt {
            let _ = writeln!(
                out,
                "\nmessage transfer time of the message hit by the drop ({} over repetitions, ms), per {}:",
                r.mtt_statistic.name(),
                sw.parameter
            );
        } else {
            let _ = writeln!(
                out,
                "\n{} p99 (ms) per {}:",
                crate::plots::latency_name(&r.latency, &r.owd),
                sw.parameter
            );
        }
        let avail: Vec<_> = r.variants.iter().filter(|v| v.available).collect();
        let mut header = vec![sw.parameter.to_string()];
        header.extend(avail.iter().map(|v| v.name.clone()));
        let reductions = r.mtt_reduction.as_ref();
        if let Some(red) = reductions {
            header.extend(red.keys().map(|k| format!("{k} reduction %")));
        }
        let mut rows = Vec::new();
        // A grid with drop positions inside each cell: the cells' table
        // below says it; one row per point would be hundreds.
        for (i, value) in sw.values.iter().enumerate().filter(|_| !cells) {
            let mut row = vec![value.clone()];
            for v in &avail {
                let p = &v.points[i];
                row.push(if mtt {
                    p.mtt_text(r.mtt_statistic)
                } else {
                    cell(p.summary.latency_ms.map(|l| l.p99), 1)
                });
            }
            if let Some(red) = reductions {
                for x in red.values() {
                    row.push(cell(
                        x.per_point.get(i).copied().flatten().map(|f| f * 100.0),
                        1,
                    ));
                }
            }
            rows.push(row);
        }
        if !cells {
            out.push_str(&layout(&header, &rows));
        }
        if let Some(red) = reductions {
            for (name, x) in red {
                let _ = writeln!(
                    out,
                    "average MTT reduction of {name} vs {}: {}%",
                    x.baseline,
                    cell(x.mean.map(|m| m * 100.0), 1)
                );
            }
            if cells {
                out.push_str(&cells_text(sw, red));
            }
        }
    }
    out.push_str(&traffic_text(r));
    for v in &r.variants {
        if let Some(e) = &v.error {
            let _ = writeln!(out, "variant {} did not run: {e}", v.name);
        }
        for f in &v.faults {
            let _ = writeln!(out, "variant {} FAULT {f}", v.name);
        }
    }
    out
}

/// The reduction per cell of a grid (the axes other than the drop
/// position): mean over positions, with the 95% confidence half-width over
/// repetitions for means, in %.
fn cells_text(
    sw: &crate::results::SweepInfo,
    red: &std::collections::BTreeMap<String, crate::results::Reduction>,
) -> String {
    let mut out = String::new();
    let axes: Vec<&str> = sw
        .axes
        .iter()
        .map(|a| a.parameter.as_str())
        .filter(|p| *p != "drop-data-packet")
        .collect();
    let _ = writeln!(
        out,
        "\naverage MTT reduction per {} (mean over positions ± 95% CI over repetitions), %:",
        axes.join(" x ")
    );
    let mut header = vec![axes.join(" / ")];
    header.extend(red.keys().map(|k| format!("{k} vs {}", red[k].baseline)));
    let cells: Vec<&str> = red
        .values()
        .flat_map(|x| x.cells.iter().map(|c| c.cell.as_str()))
        .fold(Vec::new(), |mut acc, c| {
            if !acc.contains(&c) {
                acc.push(c);
            }
            acc
        });
    let rows: Vec<Vec<String>> = cells
        .iter()
        .map(|c| {
            let mut row = vec![(*c).to_string()];
            for x in red.values() {
                row.push(match x.cells.iter().find(|y| y.cell == *c) {
                    Some(y) => format!(
                        "{} ± {}",
                        cell(y.mean.map(|m| m * 100.0), 1),
                        cell(y.ci95.map(|m| m * 100.0), 1)
                    ),
                    None => "-".into(),
                });
            }
            row
        })
        .collect();
    out.push_str(&layout(&header, &rows));
    out
}

fn pct(x: Option<f64>) -> String {
    cell(x.map(|v| v * 100.0), 2)
}

/// Rows of the bottleneck, throughput and response-time results (empty
/// strings when a scenario has none): `(title, header, rows)`.
fn traffic_tables(r: &Results) -> Vec<(String, Vec<String>, Vec<Vec<String>>)> {
    let mut tables = Vec::new();
    let rows: Vec<Vec<String>> = r
        .variants
        .iter()
        .filter_map(|v| {
            let b = v.bottleneck.as_ref()?;
            Some(vec![
                v.name.clone(),
                pct(b.forward.drop_rate),
                pct(b.forward.utilisation),
                pct(b.reverse.drop_rate),
                pct(b.reverse.utilisation),
                pct(v.summary.as_ref().and_then(|s| s.loss_rate)),
            ])
        })
        .collect();
    if !rows.is_empty() {
        tables.push((
            "bottleneck (whole runs): drop rate and utilisation per direction, and the measured flows' loss".to_string(),
            strings(&[
                "variant",
                "fwd drop %",
                "fwd util %",
                "rev drop %",
                "rev util %",
                "measured loss %",
            ]),
            rows,
        ));
    }
    let rows: Vec<Vec<String>> = r
        .variants
        .iter()
        .flat_map(|v| {
            v.throughput.iter().map(move |t| {
                vec![
                    v.name.clone(),
                    format!("flows[{}] x{}", t.entry, t.flows),
                    cell(t.aggregate_kbps_mean, 1),
                    cell(t.aggregate_kbps_median, 1),
                    cell(t.aggregate_kbps_min, 1),
                    cell(t.aggregate_kbps_max, 1),
                    cell(t.jain_mean, 4),
                    cell(t.jain_of_totals, 4),
                ]
            })
        })
        .collect();
    if !rows.is_empty() {
        let interval = r
            .variants
            .iter()
            .find_map(|v| v.throughput.first())
            .map_or(0.0, |t| t.interval_s);
        tables.push((
            format!("throughput per {interval:.0} s interval (acked, kbit/s; aggregate of each flows entry) and Jain's index among its flows (002 §5.2.5)"),
            strings(&[
                "variant", "entry", "mean", "median", "min", "max", "Jain/interval", "Jain totals",
            ]),
            rows,
        ));
    }
    let rows: Vec<Vec<String>> = r
        .variants
        .iter()
        .flat_map(|v| {
            let row = |point: &str,
                       resp: &crate::echo::ResponseResult,
                       model: Option<&crate::echo::ModelResult>| {
                let l = resp.response_ms;
                vec![
                    v.name.clone(),
                    point.to_string(),
                    format!("{}/{}", resp.answered, resp.requests),
                    cell(l.map(|l| l.mean), 1),
                    cell(l.map(|l| l.p99), 1),
                    cell(l.map(|l| l.max), 1),
                    cell(model.map(|m| m.response_time_ms), 1),
                    model.map_or("-".into(), |m| m.scheme.clone()),
                ]
            };
            // A sweep: one row per point (responses and the model at that
            // point's loss or delay), never pooled over the points.
            let per_point: Vec<Vec<String>> = v
                .points
                .iter()
                .filter_map(|p| Some(row(&p.value, p.responses.as_ref()?, p.model.as_ref())))
                .collect();
            if per_point.is_empty() {
                v.responses
                    .as_ref()
                    .map(|r| row("all", r, v.model.as_ref()))
                    .into_iter()
                    .collect()
            } else {
                per_point
            }
        })
        .collect();
    if !rows.is_empty() {
        tables.push((
            "response time (request sent -> echo delivered, ms) beside the HOL model's eq. (5) (001 §III)".to_string(),
            strings(&["variant", "point", "answered", "mean", "p99", "max", "model", "model scheme"]),
            rows,
        ));
    }
    tables
}

/// The bottleneck, throughput and response-time tables for the terminal.
pub fn traffic_text(r: &Results) -> String {
    let mut out = String::new();
    for (title, header, rows) in traffic_tables(r) {
        let _ = writeln!(out, "\n{title}:");
        out.push_str(&layout(&header, &rows));
    }
    out
}

/// The same tables as markdown (the reproduction report).
pub fn traffic_markdown(r: &Results) -> String {
    let mut out = String::new();
    for (title, header, rows) in traffic_tables(r) {
        let _ = writeln!(out, "{}{}:\n", title[..1].to_uppercase(), &title[1..]);
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
        for row in rows {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        out.push('\n');
    }
    out
}
