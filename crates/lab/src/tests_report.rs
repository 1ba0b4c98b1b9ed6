//! The report's computed parts: the verdict rule, the repository's compare
//! rows, plots, the long-format CSV, the HTML page, CDFs and the model
//! curve in results.json.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use crate::plan::{Plan, PlanOptions};
use crate::results::{cdf_of_sorted, Results, CDF_QUANTILES, SCHEMA_VERSION};
use crate::runner::{run_all, RunOptions};
use crate::scenario::Scenario;
use crate::verdict::{check_rows, evaluate, judge, Op, Verdict};

fn results_of(text: &str) -> Value {
    let s = Scenario::parse(text, Path::new("test.toml")).unwrap();
    let plan = Plan::new(s, &PlanOptions::default()).unwrap();
    let outcomes = run_all(
        &plan,
        &RunOptions {
            jobs: 2,
            ..RunOptions::default()
        },
    )
    .unwrap();
    serde_json::from_str(&Results::build(&plan, &outcomes, 0.0).to_json()).unwrap()
}

/// Two variants with loss, ACK latency as an `also` kind, and compare rows.
const LOSSY: &str = r#"
name = "lossy"
duration = "20s"
drain = "20s"
seed = 3
[topology]
kind = "two-host"
forward = "delay 20ms loss 5%"
[[flows]]
workload = { kind = "constant", iat = "100ms", bytes = 100 }
[[variants]]
name = "rfc"
preset = "rfc"
[[variants]]
name = "thin"
preset = "thin"
[metrics]
also = ["ack"]
[reference]
[[reference.compare]]
what = "rfc messages"
ours = "variants[name=rfc].messages"
theirs = "200"
source = "test"
expect = { op = "approx", value = 200 }
[[reference.compare]]
what = "thin p99 below rfc"
ours = "variants[name=thin].also.ack.latency_ms.p99"
theirs = "lower"
source = "test"
expect = { op = "<=", other = "variants[name=rfc].also.ack.latency_ms.p99" }
[[reference.compare]]
what = "words only"
ours = "variants[name=rfc].tohd"
theirs = "small"
source = "test"
qualitative = true
"#;

#[test]
fn approx_rule_sizes() {
    assert_eq!(judge(Op::Approx, 0.75, 0.75), Verdict::Reproduced);
    assert_eq!(judge(Op::Approx, 1.10, 1.0), Verdict::Reproduced);
    assert_eq!(judge(Op::Approx, 0.90, 1.0), Verdict::Reproduced);
    assert_eq!(judge(Op::Approx, 1.11, 1.0), Verdict::Partly);
    assert_eq!(judge(Op::Approx, 0.75, 1.0), Verdict::Partly);
    assert_eq!(judge(Op::Approx, 1.25, 1.0), Verdict::Partly);
    assert_eq!(judge(Op::Approx, 1.26, 1.0), Verdict::Differs);
    assert_eq!(judge(Op::Approx, 0.5, 1.0), Verdict::Differs);
    // Negative references use the magnitude.
    assert_eq!(judge(Op::Approx, -1.05, -1.0), Verdict::Reproduced);
    // A zero reference must be met exactly.
    assert_eq!(judge(Op::Approx, 0.0, 0.0), Verdict::Reproduced);
    assert_eq!(judge(Op::Approx, 0.01, 0.0), Verdict::Differs);
    assert_eq!(judge(Op::Approx, f64::NAN, 1.0), Verdict::NotComparable);
}

#[test]
fn direction_rule() {
    assert_eq!(judge(Op::Greater, 4175.0, 4000.0), Verdict::Reproduced);
    assert_eq!(judge(Op::Greater, 3999.0, 4000.0), Verdict::Differs);
    assert_eq!(judge(Op::Greater, 4000.0, 4000.0), Verdict::Differs);
    assert_eq!(judge(Op::GreaterEq, 4000.0, 4000.0), Verdict::Reproduced);
    assert_eq!(judge(Op::Less, 100.0, 4000.0), Verdict::Reproduced);
    assert_eq!(judge(Op::Less, 4001.0, 4000.0), Verdict::Differs);
    assert_eq!(judge(Op::LessEq, 0.15, 0.15), Verdict::Reproduced);
    assert_eq!(judge(Op::LessEq, 0.16, 0.15), Verdict::Differs);
}

#[test]
fn row_evaluation() {
    let results = json!({
        "variants": [
            {"name": "a", "p99": 100.0, "max": 4175.0},
            {"name": "b", "p99": 300.0, "max": 2100.0}
        ],
        "mtt": {"std": 200.0, "er": 75.0}
    });
    let row = |expect: Value| json!({"what": "w", "ours": "variants[name=a].p99", "theirs": "t", "source": "s", "expect": expect});
    // Direction against another path.
    let v = evaluate(
        &row(json!({"op": "<", "other": "variants[name=b].p99"})),
        &results,
    );
    assert_eq!(v.verdict, Verdict::Reproduced, "{v:?}");
    assert_eq!(v.ours, Some(100.0));
    assert!(v.detail.contains("100 < 300"), "{}", v.detail);
    let v = evaluate(
        &row(json!({"op": ">", "other": "variants[name=b].p99"})),
        &results,
    );
    assert_eq!(v.verdict, Verdict::Differs);
    // A factor: "64% below standard" is approx 0.36 × standard.
    let v = evaluate(
        &json!({"ours": "mtt.er", "expect": {"op": "approx", "other": "mtt.std", "factor": 0.36}}),
        &results,
    );
    assert_eq!(v.verdict, Verdict::Reproduced, "{v:?}"); // 75 vs 72: +4%
                                                         // Several expectations: the worst counts.
    let v = evaluate(
        &row(json!([{"op": "<", "value": 1000}, {"op": "approx", "value": 115}])),
        &results,
    );
    assert_eq!(v.verdict, Verdict::Partly, "{v:?}"); // 100 vs 115: -13%
    let v = evaluate(
        &row(json!([{"op": "<", "value": 1000}, {"op": "approx", "value": 1000}])),
        &results,
    );
    assert_eq!(v.verdict, Verdict::Differs);
    // Missing values and missing expectations are not comparable.
    let v = evaluate(
        &json!({"ours": "variants[name=zzz].p99", "expect": {"op": ">", "value": 1}}),
        &results,
    );
    assert_eq!(v.verdict, Verdict::NotComparable);
    let v = evaluate(
        &row(json!({"op": "<", "other": "variants[name=zzz].p99"})),
        &results,
    );
    assert_eq!(v.verdict, Verdict::NotComparable);
    let v = evaluate(
        &json!({"ours": "variants[name=a].p99", "qualitative": true}),
        &results,
    );
    assert_eq!(v.verdict, Verdict::NotComparable);
    assert_eq!(v.detail, "qualitative statement");
    // Malformed expectations are reported, never judged.
    for bad in [
        json!({"op": "about", "value": 1}),
        json!({"op": "<"}),
        json!({"op": "<", "value": 1, "other": "x"}),
        json!({"op": "<", "value": "1"}),
        json!({"op": "<", "value": 1, "verdict": "reproduced"}),
    ] {
        let v = evaluate(&row(bad.clone()), &results);
        assert_eq!(v.verdict, Verdict::NotComparable, "{bad}");
        assert!(
            v.detail.starts_with("bad expectation"),
            "{bad}: {}",
            v.detail
        );
    }
}

#[test]
fn check_rows_wants_expect_or_qualitative() {
    let reference = json!({"compare": [
        {"what": "ok", "ours": "x", "expect": {"op": ">", "value": 1}},
        {"what": "words", "ours": "x", "qualitative": true},
        {"what": "neither", "ours": "x"},
        {"what": "both", "ours": "x", "qualitative": true, "expect": {"op": ">", "value": 1}},
        {"what": "broken", "ours": "x", "expect": {"op": "?", "value": 1}}
    ]});
    let bad = check_rows(&reference);
    assert_eq!(bad.len(), 3, "{bad:?}");
    assert!(bad[0].contains("neither"));
    assert!(bad[1].contains("both"));
    assert!(bad[2].contains("unknown op"));
}

// Every compare row of the repository's scenarios either carries an
// expectation or is marked qualitative, and the expectations parse.
#[test]
fn repository_compare_rows_have_expectations() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/seeds");
    let mut rows = 0;
    let mut with_expect = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let s = Scenario::load(&path).unwrap();
        let Some(reference) = s.reference.as_ref() else {
            continue;
        };
        let reference = serde_json::to_value(reference).unwrap();
        let bad = check_rows(&reference);
        assert!(bad.is_empty(), "{}: {bad:#?}", path.display());
        for row in reference["compare"].as_array().into_iter().flatten() {
            rows += 1;
            if row.get("expect").is_some() {
                with_expect += 1;
            }
        }
    }
    assert!(rows >= 40, "only {rows} compare rows");
    assert!(
        with_expect * 3 >= rows * 2,
        "only {with_expect} of {rows} rows have an expectation"
    );
}

#[test]
fn cdf_quantiles() {
    assert!(cdf_of_sorted(&[]).is_empty());
    let one = cdf_of_sorted(&[5_000_000]);
    assert_eq!(one.len(), CDF_QUANTILES.len());
    assert!(one.iter().all(|p| p.ms == 5.0));
    let samples: Vec<u64> = (1..=1000u64).map(|i| i * 1_000_000).collect();
    let cdf = cdf_of_sorted(&samples);
    let at = |q: f64| cdf.iter().find(|p| p.q == q).unwrap().ms;
    assert_eq!(at(0.0), 1.0);
    assert_eq!(at(0.5), 500.0);
    assert_eq!(at(0.99), 990.0);
    assert_eq!(at(1.0), 1000.0);
    assert!(cdf
        .windows(2)
        .all(|w| w[0].q < w[1].q && w[0].ms <= w[1].ms));
}

// results.json carries the schema version, CDFs per variant and `also`
// kind, and the owd mode; the report's pieces come from it.
#[test]
fn results_plots_csv_and_verdicts_from_stored_json() {
    let r = results_of(LOSSY);
    assert_eq!(r["schema_version"], SCHEMA_VERSION);
    assert_eq!(r["owd"], "min-observed");
    for v in r["variants"].as_array().unwrap() {
        for cdf in [&v["latency_cdf_ms"], &v["also"]["ack"]["latency_cdf_ms"]] {
            let cdf = cdf.as_array().unwrap();
            assert_eq!(cdf.len(), CDF_QUANTILES.len());
            let ms: Vec<f64> = cdf.iter().map(|p| p["ms"].as_f64().unwrap()).collect();
            assert!(ms.windows(2).all(|w| w[0] <= w[1]), "{ms:?}");
            // The top of the CDF is the maximum the summary reports.
            assert_eq!(cdf.last().unwrap()["q"], 1.0);
        }
        assert_eq!(
            v["latency_cdf_ms"].as_array().unwrap().last().unwrap()["ms"],
            v["latency_ms"]["max"]
        );
    }

    // Verdicts.
    let verdicts = crate::verdict::evaluate_all(&r);
    let got: Vec<Verdict> = verdicts.iter().map(|(_, v)| v.verdict).collect();
    assert_eq!(got[0], Verdict::Reproduced, "{verdicts:?}");
    assert_ne!(got[1], Verdict::NotComparable, "{verdicts:?}");
    assert_eq!(got[2], Verdict::NotComparable);

    // Plots.
    let plots = crate::plots::plots(&r);
    let files: Vec<&str> = plots.iter().map(|p| p.file.as_str()).collect();
    for f in [
        "latency-by-rtx.svg",
        "ack-latency-by-rtx.svg",
        "latency-cdf.svg",
        "latency-cdf-tail.svg",
        "ack-latency-cdf.svg",
    ] {
        assert!(files.contains(&f), "{f} missing from {files:?}");
    }
    for p in &plots {
        assert!(p.svg.starts_with("<svg"), "{}", p.file);
        assert!(p.svg.trim_end().ends_with("</svg>"), "{}", p.file);
        // Text is SVG text, not rendered glyphs: no fonts needed.
        assert!(p.svg.contains("<text"), "{}", p.file);
        for name in ["rfc", "thin"] {
            assert!(p.svg.contains(name), "{} lacks {name}", p.file);
        }
        assert!(!p.caption.is_empty());
    }
    let by_rtx = plots
        .iter()
        .find(|p| p.file == "latency-by-rtx.svg")
        .unwrap();
    assert!(by_rtx.svg.contains("above min OWD"), "axis title");
    assert!(by_rtx.svg.contains("<rect"), "boxes drawn");
    // No MTT, model or throughput plots without their data.
    assert!(!files.contains(&"mtt.svg"));
    assert!(!files.contains(&"response-vs-loss.svg"));
    assert!(!files.contains(&"throughput.svg"));

    // CSV: long format, numbers only, the documented metrics present.
    let csv = crate::tidy::csv(&r);
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(crate::tidy::HEADER));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|c| c.len() == 6), "six columns");
    assert!(rows.iter().all(|c| c[0] == "lossy"));
    assert!(rows.iter().all(|c| c[5].parse::<f64>().is_ok()));
    let has = |variant: &str, metric: &str, stat: &str| {
        rows.iter()
            .any(|c| c[1] == variant && c[2] == "all" && c[3] == metric && c[4] == stat)
    };
    for v in ["rfc", "thin"] {
        assert!(has(v, "latency.application", "p99"));
        assert!(has(v, "latency.application", "cdf_q0.5"));
        assert!(has(v, "latency.ack", "max"));
        assert!(has(v, "latency.ack.rtx1", "count"));
        assert!(has(v, "tohd", "value"));
        assert!(has(v, "retransmission_causes.timeout-rtx.rtx1", "share"));
    }
    let messages = rows
        .iter()
        .find(|c| c[1] == "rfc" && c[3] == "messages")
        .unwrap();
    assert_eq!(messages[5], r["variants"][0]["messages"].to_string());
}

#[test]
fn sweep_plots_mtt_and_csv_points() {
    let r = results_of(
        r#"
name = "drop"
duration = "3s"
drain = "5s"
[topology]
kind = "two-host"
forward = "delay 15ms rate 2000kbit"
[[flows]]
workload = { kind = "bursts", pattern = "static", burst-size = 4, gap = "200ms", intra-gap = "10us", bursts = 4, bytes = 200 }
app_start = "1s"
[[variants]]
name = "standard"
preset = "rfc"
overrides = { rto_min = "100ms", rto_initial = "200ms", rto_max = "400ms", sack_delay = "40ms" }
[[variants]]
name = "er"
preset = "rfc+er-packet"
overrides = { rto_min = "100ms", rto_initial = "200ms", rto_max = "400ms", sack_delay = "40ms" }
[metrics]
baseline = "standard"
[sweep]
parameter = "drop-data-packet"
values = [5, 8]
"#,
    );
    let plots = crate::plots::plots(&r);
    let mtt = plots
        .iter()
        .find(|p| p.file == "mtt.svg")
        .expect("mtt plot");
    assert!(mtt.svg.contains("position of the dropped data packet"));
    assert!(mtt.svg.contains("standard") && mtt.svg.contains("er"));
    let csv = crate::tidy::csv(&r);
    for point in ["5", "8"] {
        assert!(
            csv.lines()
                .any(|l| l.starts_with(&format!("drop,standard,{point},mtt_ms,median,"))),
            "{csv}"
        );
        assert!(
            csv.lines()
                .any(|l| l.starts_with(&format!("drop,er,{point},mtt_reduction,value,"))),
            "{csv}"
        );
    }
}

// The echo scenario's model curve spans the loss rates and passes through
// the scenario's own prediction; the plot draws it with our point.
#[test]
fn model_curve_and_response_plot() {
    let r = results_of(
        r#"
name = "echo"
duration = "20s"
drain = "10s"
[topology]
kind = "two-host"
forward = "delay 10ms loss 1%"
[[flows]]
workload = { kind = "echo", bytes = 100, mean-iat = "10ms", streams = 4 }
peer = "echo"
[[variants]]
name = "sctp"
preset = "rfc"
overrides = { delayed_sack = false }
[metrics]
owd = "none"
"#,
    );
    let m = &r["variants"][0]["model"];
    let curve = m["curve"].as_array().unwrap();
    assert_eq!(curve.len(), crate::echo::MODEL_CURVE_LOSS.len());
    let ys: Vec<f64> = curve
        .iter()
        .map(|p| p["response_time_ms"].as_f64().unwrap())
        .collect();
    assert!(ys.windows(2).all(|w| w[0] <= w[1]), "{ys:?}");
    let at_1 = curve.iter().find(|p| p["loss"] == 0.01).unwrap();
    assert_eq!(at_1["response_time_ms"], m["response_time_ms"]);
    let plots = crate::plots::plots(&r);
    let p = plots
        .iter()
        .find(|p| p.file == "response-vs-loss.svg")
        .expect("model plot");
    assert!(p.svg.contains("sctp (model)"));
    assert!(p.svg.contains("<circle"), "our measured point");
    // owd = "none": the label says the one-way delay is included.
    let by_rtx = plots
        .iter()
        .find(|p| p.file == "latency-by-rtx.svg")
        .unwrap();
    assert!(by_rtx.svg.contains("one-way delay included"));
}

#[test]
fn html_is_self_contained_with_contents() {
    let md = "# Report\n\n## Summary\n\n- [a-b](#a-b)\n\n## a-b\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n![plot one](a-b/p.svg)\n\n*plot one*\n\n![missing](a-b/q.svg)\n";
    let mut svgs = BTreeMap::new();
    svgs.insert(
        "a-b/p.svg".to_string(),
        "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"><text>hello</text></svg>".to_string(),
    );
    let html = crate::report::html(md, &svgs);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<h2 id=\"a-b\">a-b</h2>"), "{html}");
    assert!(html.contains("href=\"#a-b\""), "{html}");
    assert!(html.contains("<figure><svg"), "{html}");
    assert!(!html.contains("<p><figure>"), "figures are blocks: {html}");
    assert!(
        html.contains("<p class=\"caption\"><em>plot one</em>"),
        "{html}"
    );
    assert!(html.contains("<text>hello</text>"));
    assert!(!html.contains("<?xml"), "declaration dropped");
    assert!(!html.contains("<img"), "no external images: {html}");
    assert!(html.contains("<table>"));
    assert!(html.contains("<style>"));
    // A plot that is not available stays a link, not a broken image.
    assert!(html.contains("<a href=\"a-b/q.svg\">"), "{html}");
    assert!(!html.contains("<script"));
}

#[test]
fn slugs_match_headings() {
    assert_eq!(crate::report::slug("000-fig8-uniform"), "000-fig8-uniform");
    assert_eq!(
        crate::report::slug("Plots: 003-exp-gap"),
        "plots-003-exp-gap"
    );
    assert_eq!(crate::report::slug("LT+mFR"), "ltmfr");
}
