//! HTTP cross traffic on a dumbbell, bottleneck statistics, throughput and
//! Jain's index, on small scenarios (a few simulated seconds each).

use std::path::Path;

use crate::plan::{Plan, PlanOptions};
use crate::results::Results;
use crate::runner::{run_all, RunOptions};
use crate::scenario::Scenario;
use crate::LabError;

const CROSS: &str = r#"
name = "cross"
duration = "20s"
drain = "5s"
seed = 9

[topology]
kind = "dumbbell"
bottleneck_forward = "rate 2mbit limit 20"
access = [{ a = "delay 20ms" }]

[[flows]]
workload = { kind = "constant", iat = "100ms", bytes = 100 }
app_start = "1s"

[[flows]]
transport = "tcp"
preset = "newreno"
workload = { kind = "http", clients = 6, mean-request-gap = "100ms" }

[[variants]]
name = "rfc"
preset = "rfc"
"#;

fn parse(text: &str) -> Result<Scenario, LabError> {
    Scenario::parse(text, Path::new("test.toml"))
}

fn built(text: &str) -> Results {
    let plan = Plan::new(parse(text).unwrap(), &PlanOptions::default()).unwrap();
    let outcomes = run_all(&plan, &RunOptions::default()).unwrap();
    Results::build(&plan, &outcomes, 0.0)
}

fn results(text: &str) -> serde_json::Value {
    serde_json::from_str(&built(text).to_json()).unwrap()
}

// An http entry expands into one connection per client; the cross traffic
// loads the bottleneck (drops, utilisation reported) and the measured
// thin stream still gets every message through.
#[test]
fn http_cross_traffic_loads_the_bottleneck() {
    let s = parse(CROSS).unwrap();
    assert_eq!(s.flow_count(), 7);
    assert_eq!(s.listed_flow_count(), 1);
    let r = results(CROSS);
    let v = &r["variants"][0];
    assert_eq!(v["faults"], serde_json::json!([]));
    assert_eq!(v["messages"], v["delivered"], "{v}");
    let fwd = &v["bottleneck"]["forward"];
    let offered = fwd["offered_packets"].as_u64().unwrap();
    // The thin stream alone sends ~190 packets; 6 clients asking for
    // 9200 B on average every 100 ms offer ~4.4 Mbit/s to a 2 Mbit/s link.
    assert!(offered > 2000, "{fwd}");
    assert!(fwd["dropped_packets"].as_u64().unwrap() > 0, "{fwd}");
    let u = fwd["utilisation"].as_f64().unwrap();
    assert!(u > 0.5 && u < 1.05, "{fwd}");
    let rate = fwd["drop_rate"].as_f64().unwrap();
    assert!(rate > 0.0 && rate < 0.5, "{fwd}");
    // Deterministic.
    assert_eq!(
        results(CROSS)["variants"][0]["bottleneck"],
        v["bottleneck"],
        "same seed, same bottleneck"
    );
}

#[test]
fn http_cross_traffic_is_validated() {
    let err = |text: &str| match parse(text) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    };
    let e = err(&CROSS.replace("preset = \"newreno\"\n", ""));
    assert!(e.contains("fixed"), "{e}");
    let e = err(&CROSS.replace("transport = \"tcp\"\n", ""));
    assert!(e.contains("tcp"), "{e}");
    let e = err(&CROSS.replace(
        "preset = \"newreno\"\n",
        "preset = \"newreno\"\nmeasured = true\n",
    ));
    assert!(e.contains("measured"), "{e}");
    let e = err(&CROSS.replace(
        "preset = \"newreno\"\n",
        "preset = \"newreno\"\ncount = 2\n",
    ));
    assert!(e.contains("clients"), "{e}");
    // `access` lists the other flows only: two entries for one flow is wrong.
    let e = err(&CROSS.replace(
        "access = [{ a = \"delay 20ms\" }]",
        "access = [{ a = \"delay 20ms\" }, { a = \"delay 20ms\" }]",
    ));
    assert!(e.contains("access"), "{e}");
}

const FAIR: &str = r#"
name = "fair"
duration = "20s"
drain = "2s"
seed = 4

[topology]
kind = "dumbbell"
bottleneck_forward = "rate 1000kbit limit 30"
access = [{ a = "delay 25ms" }]

[[flows]]
transport = "tcp"
preset = "linux-2.6.23"
count = 2
workload = { kind = "bulk" }

[[flows]]
transport = "tcp"
count = 3
workload = { kind = "constant", iat = "85ms", bytes = 120 }

[[variants]]
name = "newreno"
preset = "linux-2.6.23"

[metrics]
throughput = { interval = "5s", from = "2s" }
"#;

// Throughput per interval per entry: the greedy pair fills what the thin
// streams leave, and Jain's index stays in (0, 1].
#[test]
fn throughput_and_jain_per_entry() {
    let built = built(FAIR);
    let text = crate::table::render(&built);
    assert!(
        text.contains("Jain/interval") && text.contains("flows[0] x2"),
        "{text}"
    );
    let md = crate::table::traffic_markdown(&built);
    assert!(md.contains("| newreno | flows[1] x3 |"), "{md}");
    assert!(
        md.contains("| variant | fwd drop % |"),
        "bottleneck table: {md}"
    );
    let r: serde_json::Value = serde_json::from_str(&built.to_json()).unwrap();
    let t = r["variants"][0]["throughput"].as_array().unwrap();
    assert_eq!(t.len(), 2, "{t:?}");
    let greedy = &t[0];
    let thin = &t[1];
    assert_eq!(greedy["entry"], 0);
    assert_eq!(greedy["flows"], 2);
    assert_eq!(thin["flows"], 3);
    // Window [2 s, 20 s) in whole 5 s intervals: 3.
    let g: Vec<f64> = greedy["aggregate_kbps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(g.len(), 3);
    // Three thin streams: 120 B every 85 ms ≈ 11.3 kbit/s each.
    let thin_mean = thin["aggregate_kbps_mean"].as_f64().unwrap();
    assert!((25.0..=40.0).contains(&thin_mean), "{thin_mean}");
    // Greedy streams take most of the rest of 1000 kbit/s, never more.
    for x in &g[1..] {
        assert!(*x > 600.0 && *x < 1000.0, "{g:?}");
    }
    for j in greedy["jain_per_interval"].as_array().unwrap() {
        let j = j.as_f64().unwrap();
        assert!(j > 0.5 && j <= 1.0 + 1e-12, "{j}");
    }
    let jt = greedy["jain_of_totals"].as_f64().unwrap();
    assert!(jt > 0.5 && jt <= 1.0 + 1e-12, "{jt}");
    // The report's throughput plot and CSV rows come from these numbers.
    let plots = crate::plots::plots(&r);
    let p = plots
        .iter()
        .find(|p| p.file == "throughput.svg")
        .expect("throughput plot");
    assert!(p.svg.contains("newreno: entry 0") && p.svg.contains("newreno: entry 1"));
    assert!(p.svg.contains("<polyline"), "series drawn");
    let csv = crate::tidy::csv(&r);
    for (i, x) in g.iter().enumerate() {
        let line = format!("fair,newreno,all,throughput.entry0_kbps,interval{i},{x}");
        assert!(csv.lines().any(|l| l == line), "{line} in\n{csv}");
    }
    assert!(csv.contains("fair,newreno,all,jain.entry0,of_totals,"));
}

const ECHO: &str = r#"
name = "echo"
duration = "20s"
drain = "5s"
seed = 2

[topology]
kind = "two-host"
forward = "delay 10ms loss 2%"

[[flows]]
workload = { kind = "echo", bytes = 100, mean-iat = "10ms", streams = 4 }
peer = "echo"
app_start = "1s"

[[variants]]
name = "sctp"
preset = "rfc"
overrides = { delayed_sack = false }

[[variants]]
name = "unordered"
preset = "rfc"
overrides = { delayed_sack = false }
unordered = true

[[variants]]
name = "tcp"
transport = "tcp"
preset = "linux-2.6.23"
"#;

// Echo over SCTP streams, unordered SCTP and one TCP connection per stream:
// every request is answered, no response is faster than the RTT, the same
// requests are sent in every variant, and the model's prediction sits
// beside the measurement.
#[test]
fn echo_response_times_and_model_per_variant() {
    let plan = Plan::new(parse(ECHO).unwrap(), &PlanOptions::default()).unwrap();
    let outcomes = run_all(&plan, &RunOptions::default()).unwrap();
    // The TCP run measures four connections, the SCTP runs one association.
    assert_eq!(outcomes[0].flows.len(), 1);
    assert_eq!(outcomes[2].flows.len(), 4);
    let r: serde_json::Value =
        serde_json::from_str(&Results::build(&plan, &outcomes, 0.0).to_json()).unwrap();
    let mut requests = None;
    for v in r["variants"].as_array().unwrap() {
        assert_eq!(v["faults"], serde_json::json!([]), "{v}");
        let resp = &v["responses"];
        let n = resp["requests"].as_u64().unwrap();
        assert!(n > 1500, "{resp}");
        assert_eq!(resp["answered"], resp["requests"], "{}: {resp}", v["name"]);
        assert_eq!(
            *requests.get_or_insert(n),
            n,
            "same requests in every variant"
        );
        let min_ok = resp["response_ms"]["p50"].as_f64().unwrap();
        assert!(min_ok >= 20.0 - 1e-9, "{resp}");
        let m = &v["model"];
        assert!(m["response_time_ms"].as_f64().unwrap() > 20.0, "{m}");
    }
    let text = crate::table::render(&Results::build(&plan, &outcomes, 0.0));
    assert!(
        text.contains("response time") && text.contains("SctpUnordered"),
        "{text}"
    );
    let model_scheme = |i: usize| {
        r["variants"][i]["model"]["scheme"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(model_scheme(0).contains("SctpStreams"));
    assert_eq!(model_scheme(1), "SctpUnordered");
    assert!(model_scheme(2).contains("TcpConnections"));
}

#[test]
fn echo_over_tcp_is_validated() {
    let bad = |text: &str| match Plan::new(parse(text).unwrap(), &PlanOptions::default()) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    };
    let e = bad(&ECHO.replace(
        "preset = \"linux-2.6.23\"",
        "preset = \"linux-2.6.23\"\nunordered = true",
    ));
    assert!(e.contains("unordered"), "{e}");
    let e = bad(&ECHO.replace(
        "{ kind = \"echo\", bytes = 100, mean-iat = \"10ms\", streams = 4 }",
        "{ kind = \"exponential\", bytes = 100, mean-iat = \"10ms\" }",
    ));
    assert!(e.contains("fixed-size"), "{e}");
}

// `workload_streams` on a variant: the same requests over 1 TCP connection
// or 2 SCTP streams instead of the workload's 4, and the model follows.
#[test]
fn workload_streams_per_variant() {
    let text = ECHO
        .replace(
            "name = \"tcp\"\ntransport = \"tcp\"",
            "name = \"tcp\"\nworkload_streams = 1\ntransport = \"tcp\"",
        )
        .replace(
            "name = \"sctp\"\npreset = \"rfc\"",
            "name = \"sctp\"\nworkload_streams = 2\npreset = \"rfc\"",
        );
    let plan = Plan::new(parse(&text).unwrap(), &PlanOptions::default()).unwrap();
    let outcomes = run_all(&plan, &RunOptions::default()).unwrap();
    assert_eq!(outcomes[2].flows.len(), 1, "one TCP connection");
    let r: serde_json::Value =
        serde_json::from_str(&Results::build(&plan, &outcomes, 0.0).to_json()).unwrap();
    let scheme = |i: usize| {
        r["variants"][i]["model"]["scheme"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(scheme(0), "SctpStreams { streams: 2 }");
    assert_eq!(scheme(2), "TcpConnections { connections: 1 }");
    let n = |i: usize| r["variants"][i]["responses"]["requests"].as_u64().unwrap();
    assert_eq!(n(0), n(2), "the same requests");
    // Zero, or more streams than the association offers, is refused.
    let bad = |t: &str| Plan::new(parse(t)?, &PlanOptions::default()).map(|_| ());
    let e = bad(&text.replace("workload_streams = 2", "workload_streams = 0")).unwrap_err();
    assert!(e.to_string().contains("at least 1"), "{e}");
    let e = bad(&text.replace("workload_streams = 2", "workload_streams = 12")).unwrap_err();
    assert!(e.to_string().contains("offers 10"), "{e}");
}

// A loss sweep over echo: responses and the model per point, the model at
// each point's loss rate, no variant-level model pooled over the points.
#[test]
fn echo_loss_sweep_reports_per_point() {
    let text = ECHO.replace("duration = \"20s\"", "duration = \"10s\"")
        + "\n[sweep]\nparameter = \"loss\"\nvalues = [0, 0.5, 3]\n";
    let plan = Plan::new(parse(&text).unwrap(), &PlanOptions::default()).unwrap();
    let outcomes = run_all(&plan, &RunOptions::default()).unwrap();
    let r: serde_json::Value =
        serde_json::from_str(&Results::build(&plan, &outcomes, 0.0).to_json()).unwrap();
    for v in r["variants"].as_array().unwrap() {
        assert!(v["model"].is_null(), "{}", v["name"]);
        let pts = v["points"].as_array().unwrap();
        assert_eq!(pts.len(), 3);
        let loss: Vec<f64> = pts
            .iter()
            .map(|p| p["model"]["loss"].as_f64().unwrap())
            .collect();
        assert_eq!(loss, vec![0.0, 0.005, 0.03]);
        let model: Vec<f64> = pts
            .iter()
            .map(|p| p["model"]["response_time_ms"].as_f64().unwrap())
            .collect();
        assert!(model[0] < model[1] && model[1] < model[2], "{model:?}");
        for p in pts {
            assert!(p["responses"]["requests"].as_u64().unwrap() > 500);
            assert!(!p["responses"]["response_cdf_ms"]
                .as_array()
                .unwrap()
                .is_empty());
        }
        // Without loss every response takes the RTT.
        let lossless = pts[0]["responses"]["response_ms"]["max"].as_f64().unwrap();
        assert!(lossless < 21.0, "{lossless}");
        // The dotted filter value is one path segment.
        let path = format!(
            "variants[name={}].points[value=0.5%].model.loss",
            v["name"].as_str().unwrap()
        );
        assert_eq!(
            crate::report::lookup(&r, &path).and_then(|x| x.as_f64()),
            Some(0.005)
        );
    }
    let text = crate::table::render(&Results::build(&plan, &outcomes, 0.0));
    assert!(text.contains("0.5%") && text.contains("3%"), "{text}");
}

// An `iat` sweep sets the workload's mean gap per point: more requests at
// the shorter gap, and the model's interarrival time follows.
#[test]
fn echo_iat_sweep_sets_the_load() {
    let text = ECHO.replace("duration = \"20s\"", "duration = \"10s\"")
        + "\n[sweep]\nparameter = \"iat\"\nvalues = [\"50ms\", \"5ms\"]\n";
    let plan = Plan::new(parse(&text).unwrap(), &PlanOptions::default()).unwrap();
    let outcomes = run_all(&plan, &RunOptions::default()).unwrap();
    let r: serde_json::Value =
        serde_json::from_str(&Results::build(&plan, &outcomes, 0.0).to_json()).unwrap();
    for v in r["variants"].as_array().unwrap() {
        let pts = v["points"].as_array().unwrap();
        let n = |i: usize| pts[i]["responses"]["requests"].as_f64().unwrap();
        // 9 s of requests: ~180 at 50 ms, ~1800 at 5 ms.
        assert!((120.0..260.0).contains(&n(0)), "{}", n(0));
        assert!(n(1) > 6.0 * n(0), "{} vs {}", n(1), n(0));
        assert_eq!(pts[0]["model"]["interarrival_ms"], 50.0);
        assert_eq!(pts[1]["model"]["interarrival_ms"], 5.0);
    }
    // A workload without one interval cannot be swept.
    let bad = text.replace(
        "{ kind = \"echo\", bytes = 100, mean-iat = \"10ms\", streams = 4 }",
        "{ kind = \"uniform\", bytes = 100, min-iat = \"10ms\", max-iat = \"20ms\" }",
    );
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.contains("iat"), "{e}");
}

// A `flows` sweep sets the count of the measured entries per point.
#[test]
fn flows_sweep_sets_the_count() {
    let text = r#"
name = "count"
duration = "5s"
drain = "2s"
seed = 4

[topology]
kind = "two-host"
forward = "delay 10ms"

[[flows]]
workload = { kind = "constant", iat = "100ms", bytes = 100 }

[sweep]
parameter = "flows"
values = [1, 3]

[[variants]]
name = "rfc"
preset = "rfc"
"#;
    let plan = Plan::new(parse(text).unwrap(), &PlanOptions::default()).unwrap();
    let outcomes = run_all(&plan, &RunOptions::default()).unwrap();
    assert_eq!(outcomes[0].flows.len(), 1);
    assert_eq!(outcomes[1].flows.len(), 3);
    assert!(outcomes.iter().all(|o| o.fault.is_none()));
    let too_many = text.replace("values = [1, 3]", "values = [1, 70000]");
    assert!(parse(&too_many).is_err());
}
