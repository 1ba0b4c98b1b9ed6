//! `report.md`: every scenario's results beside the numbers the documents
//! report (`[reference]` of the scenario file). Drawn from stored results
//! only ([`Results`]), so a report can be rebuilt without rerunning.
//!
//! What it does not do yet, and says so in the report: plots (CDFs, box
//! plots), and automatic verdicts on the documents' qualitative claims; the
//! reference data is printed next to our tables for a reader to compare.

use std::fmt::Write as _;

use thinstream_metrics::{markdown_table, Summary};

use crate::results::Results;

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
    for segment in path.split('.') {
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
/// into this scenario's results), `theirs` (the document's value), `source`.
fn comparison_table(r: &Results, reference: &serde_json::Value) -> Option<String> {
    let rows = reference.get("compare")?.as_array()?;
    let results = serde_json::to_value(r).ok()?;
    let mut out = String::from(
        "Side by side (ours looked up in results.json; theirs as the document states it):\n\n\
         | what | ours | theirs | source |\n|---|---:|---:|---|\n",
    );
    for row in rows {
        let text = |k: &str| row.get(k).map(show).unwrap_or_default();
        let ours = row
            .get("ours")
            .and_then(|p| p.as_str())
            .map_or("-".to_string(), |p| {
                lookup(&results, p).map_or("(not in results)".to_string(), show)
            });
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            text("what"),
            ours,
            text("theirs"),
            text("source")
        );
    }
    out.push('\n');
    Some(out)
}

/// One scenario's section.
pub fn scenario_section(r: &Results, json_path: &str) -> String {
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
            "Our numbers ({} latency, ms; pooled over all runs of a variant):\n",
            r.latency
        );
        out.push_str(&markdown_table(&rows));
        out.push('\n');
    }
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
        if mtt {
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
    if let Some(table) = r.reference.as_ref().and_then(|x| comparison_table(r, x)) {
        out.push_str(&table);
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
        }
        reference_lines("", &rest, &mut lines);
        for l in lines {
            let _ = writeln!(out, "- {l}");
        }
        out.push('\n');
    }
    out
}

/// The whole report: a header and one section per scenario.
pub fn markdown(sections: &[(Results, String)], quick: bool) -> String {
    let mut out = String::from("# thinstream reproduction report\n\n");
    let _ = writeln!(
        out,
        "Every experiment under `scenarios/seeds/` run in the deterministic simulator{}. \
         Each section gives our numbers and, below them, what the source documents report \
         for the same setup. Latencies are in milliseconds; `tohd` and loss in percent.\n",
        if quick {
            " with shortened durations (`--quick`: at most 10 simulated minutes of messages, one repetition), so tail statistics are rougher than the documents'"
        } else {
            ""
        }
    );
    out.push_str(
        "Not compared yet: the documents' figures are box plots and CDFs whose values are not in \
         their text, so only the numbers and claims their text states are listed; no plots are \
         drawn yet, and the qualitative claims are not checked automatically.\n\n",
    );
    for (r, path) in sections {
        out.push_str(&scenario_section(r, path));
    }
    out
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
