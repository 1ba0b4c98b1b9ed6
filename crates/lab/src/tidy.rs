//! `results.csv`: a scenario's numbers in long ("tidy") format for analysis
//! elsewhere, one row per variant × point × metric × statistic, drawn from a
//! stored `results.json` value.
//!
//! Columns: `scenario,variant,point,metric,statistic,value`. `point` is the
//! sweep value, or `all` for numbers pooled over the whole variant.
//! Metrics (latency kinds by their `results.json` names, e.g. `application`,
//! `ack`):
//! - `latency.KIND`: `mean`, `p50`, `p90`, `p99`, `p999`, `max`, and `cdf_qQ`
//!   for the stored CDF quantiles;
//! - `latency.KIND.rtxN` (N = 0, 1, 2, 3 = "3 or more"): `count`, `mean`,
//!   `p50`, `p99`, `max`;
//! - `messages`, `delivered`, `tohd`, `loss_rate`, `spurious`, and the
//!   recovery counters `spurious_excluding_redundant`, `t3_expiries`,
//!   `t3_spurious`, `redundant_bytes`, `tohd_redundant`,
//!   `tohd_retransmissions`, `rtt_samples`, `data_rtt_samples`,
//!   `thin_share`, `thin_transitions`, `rtt_sample_mean_ms`, `rto_mean_ms`, `rto_measured_*`,
//!   `spurious.REASON`: `value`;
//! - `worst_path`: `latency_ms`, `sent_s` (the slowest message; its path
//!   is in results.json);
//! - `response_ms` (echo): the latency statistics and `cdf_qQ`; `model`:
//!   `response_time_ms`, and `response_time_ms_at_loss_P` along the curve;
//! - `throughput.entryE_kbps`: `intervalI`, `mean`, `median`, `min`, `max`;
//!   `jain.entryE`: `intervalI`, `mean`, `of_totals`;
//! - `bottleneck.DIR`: `drop_rate`, `utilisation`;
//! - `retransmission_causes.REASON.rtxN`: `count`, `share`;
//! - per sweep point the same latency, `also`, response, model and cause
//!   rows as per variant, and `mtt_ms`: `repR`, `median`, `mean`, `ci95`,
//!   `compared`; `mtt_reduction`: `value` (against the baseline); per
//!   variant `mtt_reduction`: `mean`, `ci95`, and per cell of a grid (point = the
//!   cell's values, e.g. `2000kbit/5ms`) the same two.
//!   A point of a sweep with several axes is its values joined by `/`.
//!
//! Missing numbers (`null`) are left out.

use std::fmt::Write as _;

use serde_json::Value;

/// The CSV header line (without newline).
pub const HEADER: &str = "scenario,variant,point,metric,statistic,value";

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

struct Rows<'a> {
    scenario: &'a str,
    out: String,
}

impl Rows<'_> {
    /// `also` latency kinds, echo responses and the model of a variant or
    /// of one of its sweep points.
    fn echo_and_also(&mut self, name: &str, point: &str, v: &Value) {
        if let Some(also) = v["also"].as_object() {
            for (kind, a) in also {
                self.latency(name, point, &format!("latency.{kind}"), &a["latency_ms"]);
                self.cdf(name, point, kind, &a["latency_cdf_ms"]);
                self.by_rtx(name, point, kind, &a["by_retransmissions"]);
            }
        }
        if v["responses"].is_object() {
            self.latency(name, point, "response_ms", &v["responses"]["response_ms"]);
            for c in v["responses"]["response_cdf_ms"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let q = c["q"].as_f64().unwrap_or(0.0);
                self.push(name, point, "response_ms", &format!("cdf_q{q}"), &c["ms"]);
            }
        }
        if v["model"].is_object() {
            let m = &v["model"];
            self.push(
                name,
                point,
                "model",
                "response_time_ms",
                &m["response_time_ms"],
            );
            for p in m["curve"].as_array().into_iter().flatten() {
                let loss = p["loss"].as_f64().unwrap_or(0.0);
                self.push(
                    name,
                    point,
                    "model",
                    &format!("response_time_ms_at_loss_{loss}"),
                    &p["response_time_ms"],
                );
            }
        }
    }

    fn causes(&mut self, name: &str, point: &str, v: &Value) {
        for c in v["retransmission_causes"].as_array().into_iter().flatten() {
            let metric = format!(
                "retransmission_causes.{}.rtx{}",
                c["reason"].as_str().unwrap_or("?"),
                c["retransmission"]
            );
            self.push(name, point, &metric, "count", &c["count"]);
            self.push(name, point, &metric, "share", &c["share"]);
        }
    }

    fn push(&mut self, variant: &str, point: &str, metric: &str, statistic: &str, v: &Value) {
        if let Some(x) = v.as_f64() {
            let _ = writeln!(
                self.out,
                "{},{},{},{},{},{}",
                quote(self.scenario),
                quote(variant),
                quote(point),
                quote(metric),
                quote(statistic),
                x
            );
        }
    }

    /// One row per element of the array `values`: statistic `intervalI`.
    fn intervals(&mut self, variant: &str, point: &str, metric: &str, values: &Value) {
        for (i, x) in values.as_array().into_iter().flatten().enumerate() {
            self.push(variant, point, metric, &format!("interval{i}"), x);
        }
    }

    fn latency(&mut self, variant: &str, point: &str, metric: &str, l: &Value) {
        for s in ["mean", "p50", "p90", "p99", "p999", "max"] {
            self.push(variant, point, metric, s, &l[s]);
        }
    }

    fn by_rtx(&mut self, variant: &str, point: &str, kind: &str, rows: &Value) {
        for r in rows.as_array().into_iter().flatten() {
            let n = r["retransmissions"].as_u64().unwrap_or(0);
            let metric = format!("latency.{kind}.rtx{n}");
            self.push(variant, point, &metric, "count", &r["count"]);
            for s in ["mean", "p50", "p99", "max"] {
                self.push(variant, point, &metric, s, &r[format!("{s}_ms").as_str()]);
            }
        }
    }

    fn cdf(&mut self, variant: &str, point: &str, kind: &str, cdf: &Value) {
        let metric = format!("latency.{kind}");
        for p in cdf.as_array().into_iter().flatten() {
            let q = p["q"].as_f64().unwrap_or(0.0);
            self.push(variant, point, &metric, &format!("cdf_q{q}"), &p["ms"]);
        }
    }

    /// The metrics::Summary fields of a variant or point.
    fn summary(&mut self, variant: &str, point: &str, s: &Value) {
        let kind = s["latency"].as_str().unwrap_or("latency").to_string();
        self.latency(variant, point, &format!("latency.{kind}"), &s["latency_ms"]);
        self.cdf(variant, point, &kind, &s["latency_cdf_ms"]);
        self.by_rtx(variant, point, &kind, &s["by_retransmissions"]);
        for m in [
            "messages",
            "delivered",
            "tohd",
            "loss_rate",
            "spurious",
            "spurious_excluding_redundant",
            "t3_expiries",
            "t3_spurious",
            "redundant_bytes",
            "tohd_redundant",
            "tohd_retransmissions",
            "rtt_samples",
            "data_rtt_samples",
            "thin_share",
            "thin_transitions",
            "rtt_sample_mean_ms",
            "rto_mean_ms",
            "rto_measured_count",
            "rto_measured_mean_ms",
            "rto_measured_max_ms",
            "rto_at_expiry_mean_ms",
        ] {
            self.push(variant, point, m, "value", &s[m]);
        }
        for (reason, n) in s["spurious_by_reason"].as_object().into_iter().flatten() {
            self.push(variant, point, &format!("spurious.{reason}"), "value", n);
        }
    }

    /// The slowest message of a variant or point (`worst_path`).
    fn worst(&mut self, variant: &str, point: &str, w: &Value) {
        self.push(variant, point, "worst_path", "latency_ms", &w["latency_ms"]);
        self.push(variant, point, "worst_path", "sent_s", &w["sent_s"]);
    }
}

/// The long-format CSV of one `results.json` value, header included.
pub fn csv(results: &Value) -> String {
    let scenario = results["scenario"].as_str().unwrap_or("");
    let mut rows = Rows {
        scenario,
        out: format!("{HEADER}\n"),
    };
    let reductions = &results["mtt_reduction"];
    for v in results["variants"].as_array().into_iter().flatten() {
        if v["available"].as_bool() != Some(true) {
            continue;
        }
        let name = v["name"].as_str().unwrap_or("");
        rows.summary(name, "all", v);
        rows.worst(name, "all", &v["worst_path"]);
        rows.echo_and_also(name, "all", v);
        for t in v["throughput"].as_array().into_iter().flatten() {
            let e = t["entry"].as_u64().unwrap_or(0);
            let metric = format!("throughput.entry{e}_kbps");
            rows.intervals(name, "all", &metric, &t["aggregate_kbps"]);
            for s in ["mean", "median", "min", "max"] {
                rows.push(
                    name,
                    "all",
                    &metric,
                    s,
                    &t[format!("aggregate_kbps_{s}").as_str()],
                );
            }
            let jain = format!("jain.entry{e}");
            rows.intervals(name, "all", &jain, &t["jain_per_interval"]);
            rows.push(name, "all", &jain, "mean", &t["jain_mean"]);
            rows.push(name, "all", &jain, "of_totals", &t["jain_of_totals"]);
        }
        for dir in ["forward", "reverse"] {
            let b = &v["bottleneck"][dir];
            let metric = format!("bottleneck.{dir}");
            rows.push(name, "all", &metric, "drop_rate", &b["drop_rate"]);
            rows.push(name, "all", &metric, "utilisation", &b["utilisation"]);
        }
        rows.causes(name, "all", v);
        for (pi, p) in v["points"].as_array().into_iter().flatten().enumerate() {
            let point = p["value"].as_str().unwrap_or("").to_string();
            rows.summary(name, &point, &p["summary"]);
            rows.worst(name, &point, &p["worst_path"]);
            rows.echo_and_also(name, &point, p);
            rows.causes(name, &point, p);
            for (r, x) in p["mtt_ms"].as_array().into_iter().flatten().enumerate() {
                rows.push(name, &point, "mtt_ms", &format!("rep{r}"), x);
            }
            for (s, key) in [
                ("median", "mtt_median_ms"),
                ("mean", "mtt_mean_ms"),
                ("ci95", "mtt_ci95_ms"),
                ("compared", "mtt_ms_compared"),
            ] {
                rows.push(name, &point, "mtt_ms", s, &p[key]);
            }
            rows.push(
                name,
                &point,
                "mtt_reduction",
                "value",
                &reductions[name]["per_point"][pi],
            );
        }
        rows.push(
            name,
            "all",
            "mtt_reduction",
            "mean",
            &reductions[name]["mean"],
        );
        rows.push(
            name,
            "all",
            "mtt_reduction",
            "ci95",
            &reductions[name]["ci95"],
        );
        for c in reductions[name]["cells"].as_array().into_iter().flatten() {
            let cell = c["cell"].as_str().unwrap_or("");
            for s in ["mean", "ci95"] {
                rows.push(name, cell, "mtt_reduction", s, &c[s]);
            }
        }
    }
    rows.out
}
