//! Scenario parsing and validation, expansion, determinism and the drop
//! sweep, on small scenarios (each run a few simulated seconds).

use std::path::Path;

use crate::plan::{Plan, PlanOptions};
use crate::results::Results;
use crate::runner::{carries_data, run_all, RunOptions};
use crate::scenario::{Scenario, SweepPoint, TransportKind};
use crate::LabError;
use thinstream_base::Duration;

const SMALL: &str = r#"
name = "small"
duration = "10s"
drain = "20s"
seed = 5
repetitions = 2

[topology]
kind = "two-host"
forward = "delay 20ms loss 5%"

[[flows]]
workload = { kind = "constant", iat = "100ms", bytes = 100 }

[[variants]]
name = "rfc"
preset = "rfc"
overrides = { delayed_sack = false }

[[variants]]
name = "tcp"
transport = "tcp"
preset = "newreno"
"#;

fn parse(text: &str) -> Result<Scenario, LabError> {
    Scenario::parse(text, Path::new("test.toml"))
}

fn parse_err(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

/// Strips every `wall_s` member (the only non-deterministic field).
fn without_wall(json: &str) -> String {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("wall_s");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    strip(&mut v);
    serde_json::to_string_pretty(&v).unwrap()
}

fn run_json(text: &str, options: &PlanOptions, jobs: usize) -> String {
    let run = RunOptions {
        jobs,
        ..RunOptions::default()
    };
    run_with(text, options, &run).0
}

/// The results JSON of `text` run with these options, and the outcomes.
fn run_with(
    text: &str,
    options: &PlanOptions,
    run: &RunOptions,
) -> (String, Vec<crate::runner::RunOutcome>) {
    let plan = Plan::new(parse(text).unwrap(), options).unwrap();
    let outcomes = run_all(&plan, run).unwrap();
    (Results::build(&plan, &outcomes, 1.0).to_json(), outcomes)
}

// A small file parses; the reverse link defaults to the forward one.
#[test]
fn small_scenario_parses_with_defaults() {
    let s = parse(SMALL).unwrap();
    assert_eq!(s.name, "small");
    assert_eq!(s.duration, Duration::from_secs(10));
    assert_eq!(s.flows[0].count, 1);
    assert!(s.flows[0].is_measured());
    let links = s.links();
    assert_eq!(links[0].1, links[1].1);
    assert_eq!(links[0].1.delay, Duration::from_millis(20));
}

// Unknown keys are errors that name the file, line and key.
#[test]
fn unknown_keys_are_reported_with_line() {
    let text = SMALL.replace("repetitions = 2", "repetitions = 2\ncolour = \"red\"");
    let e = parse_err(&text);
    assert!(e.starts_with("test.toml:7:"), "{e}");
    assert!(e.contains("colour"), "{e}");

    let text = SMALL.replace(
        "overrides = { delayed_sack = false }",
        "overrides = { delay_sack = false }",
    );
    let e = parse_err(&text);
    assert!(e.contains("delay_sack"), "{e}");
    assert!(e.starts_with("test.toml:18:"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
}

// Bad values and inconsistent files get one clear line each.
#[test]
fn validation_errors() {
    let e = parse_err(&SMALL.replace("delay 20ms loss 5%", "delay 20 loss 5%"));
    assert!(e.contains("link"), "{e}");
    let e = parse_err(&SMALL.replace("name = \"tcp\"", "name = \"rfc\""));
    assert!(e.contains("listed twice"), "{e}");
    let e = parse_err(&SMALL.replace("repetitions = 2", "repetitions = 0"));
    assert!(e.contains("repetitions"), "{e}");
    let e = parse_err(&format!("{SMALL}\n[metrics]\nbaseline = \"nope\"\n"));
    assert!(e.contains("baseline"), "{e}");
    let e = parse_err(&format!("{SMALL}\n[sweep]\nparameter = \"loss\"\n"));
    assert!(e.contains("values"), "{e}");
    let e = parse_err(&format!(
        "{SMALL}\n[sweep]\nparameter = \"drop-data-packet\"\nvalues = [0]\n"
    ));
    assert!(e.contains(">= 1"), "{e}");
    let e = parse_err(&SMALL.replace(
        "{ kind = \"constant\", iat = \"100ms\", bytes = 100 }",
        "{ kind = \"http\" }",
    ));
    assert!(e.contains("dumbbell"), "{e}");
    let missing = Scenario::load(Path::new("/nonexistent/scenario.toml")).unwrap_err();
    assert!(matches!(missing, LabError::Read { .. }), "{missing}");
}

// A typo in a preset stops the plan; a known but unbuilt mechanism only skips its variant.
#[test]
fn unknown_presets_fail_unavailable_ones_are_skipped() {
    let typo = parse(&SMALL.replace("preset = \"newreno\"", "preset = \"newrenoo\"")).unwrap();
    let e = Plan::new(typo, &PlanOptions::default()).unwrap_err();
    assert!(matches!(e, LabError::UnknownPreset { .. }), "{e}");
    assert!(e.to_string().contains("newrenoo"), "{e}");

    let text = SMALL.replace("preset = \"rfc\"", "preset = \"rfc+er-packet\"");
    let plan = Plan::new(parse(&text).unwrap(), &PlanOptions::default()).unwrap();
    match &plan.variants[0].config {
        // Once thinstream_proto parses presets, the variant simply runs.
        Ok(_) => assert_eq!(plan.runs.len(), 4),
        Err(why) => {
            assert!(why.contains("not available"), "{why}");
            assert!(plan.runs.iter().all(|r| r.variant == 1));
            assert_eq!(plan.runs.len(), 2);
            assert!(plan.describe().contains("UNAVAILABLE"));
        }
    }
}

// variants x points x repetitions; the seed depends on point and repetition only.
#[test]
fn expansion_and_seeds() {
    let text = format!("{SMALL}\n[sweep]\nparameter = \"loss\"\nvalues = [1, \"2.5%\", 5]\n");
    let plan = Plan::new(parse(&text).unwrap(), &PlanOptions::default()).unwrap();
    assert_eq!(plan.points.len(), 3);
    assert_eq!(plan.points[1].label(), "2.5%");
    assert_eq!(plan.runs.len(), 2 * 3 * 2);
    for (i, r) in plan.runs.iter().enumerate() {
        assert_eq!(r.index, i);
    }
    let rfc0 = plan
        .runs
        .iter()
        .find(|r| r.variant == 0 && r.point == Some(1) && r.repetition == 1);
    let tcp0 = plan
        .runs
        .iter()
        .find(|r| r.variant == 1 && r.point == Some(1) && r.repetition == 1);
    assert_eq!(rfc0.unwrap().seed, tcp0.unwrap().seed);
    let mut seeds: Vec<u64> = plan
        .runs
        .iter()
        .filter(|r| r.variant == 0)
        .map(|r| r.seed.0)
        .collect();
    seeds.sort_unstable();
    seeds.dedup();
    assert_eq!(seeds.len(), 6, "every (point, repetition) has its own seed");
    assert_eq!(plan.variants[1].transport, TransportKind::Tcp);

    let narrowed = Plan::new(
        parse(&text).unwrap(),
        &PlanOptions {
            variants: Some(vec!["tcp".into()]),
            points: Some(vec!["5%".into()]),
            repetitions: Some(1),
            seed: Some(99),
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert_eq!(narrowed.runs.len(), 1);
    assert_eq!(
        narrowed.points,
        vec![crate::scenario::GridPoint(vec![SweepPoint::Loss(
            thinstream_base::Probability::new(0.05).unwrap()
        )])]
    );
    assert_eq!(narrowed.seed.0, 99);
    let e = Plan::new(
        parse(&text).unwrap(),
        &PlanOptions {
            variants: Some(vec!["quic".into()]),
            ..PlanOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("quic"), "{e}");
}

// Same seed: identical results.json apart from wall_s, whatever the thread count; another seed differs.
#[test]
fn results_are_deterministic() {
    let a = run_json(SMALL, &PlanOptions::default(), 1);
    let b = run_json(SMALL, &PlanOptions::default(), 2);
    assert_eq!(without_wall(&a), without_wall(&b));
    let c = run_json(
        SMALL,
        &PlanOptions {
            seed: Some(6),
            ..PlanOptions::default()
        },
        2,
    );
    assert_ne!(without_wall(&a), without_wall(&c));
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    for variant in v["variants"].as_array().unwrap() {
        // 10 s of 100 ms messages, twice; reliable transports deliver all.
        assert_eq!(variant["messages"], 200, "{variant}");
        assert_eq!(variant["delivered"], 200, "{variant}");
        let loss = variant["loss_rate"].as_f64().unwrap();
        assert!(loss > 0.0 && loss < 0.2, "{loss}");
        // Cause shares of each retransmission number add up to one, and
        // the causes count every retransmitted piece.
        let causes = variant["retransmission_causes"].as_array().unwrap();
        assert!(!causes.is_empty(), "5% loss causes retransmissions");
        for nth in 1..=3 {
            let rows: Vec<_> = causes
                .iter()
                .filter(|c| c["retransmission"] == nth)
                .collect();
            let pieces: u64 = rows.iter().map(|c| c["count"].as_u64().unwrap()).sum();
            if pieces > 0 {
                let total: f64 = rows.iter().map(|c| c["share"].as_f64().unwrap()).sum();
                assert!((total - 1.0).abs() < 1e-9, "{total}");
            }
        }
        let pieces: u64 = causes.iter().map(|c| c["count"].as_u64().unwrap()).sum();
        let rtx: u64 = variant["reasons"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.as_str() != "new")
            .map(|(_, v)| v.as_u64().unwrap())
            .sum();
        assert_eq!(pieces, rtx);
    }
}

// One drop at data packet k: exactly that message is retransmitted and its MTT recorded.
#[test]
fn drop_sweep_hits_one_packet_and_measures_mtt() {
    let text = r#"
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
name = "rfc"
preset = "rfc"
overrides = { rto_min = "100ms", rto_initial = "200ms", rto_max = "400ms", sack_delay = "40ms" }
[metrics]
baseline = "rfc"
[sweep]
parameter = "drop-data-packet"
values = [5, 8]
"#;
    let plan = Plan::new(parse(text).unwrap(), &PlanOptions::default()).unwrap();
    let outcomes = run_all(&plan, &RunOptions::default()).unwrap();
    assert_eq!(outcomes.len(), 2);
    for o in &outcomes {
        let f = &o.flows[0];
        assert_eq!(f.messages().len(), 16);
        let rtx: Vec<_> = f
            .messages()
            .iter()
            .filter(|m| m.retransmissions > 0)
            .collect();
        assert_eq!(rtx.len(), 1, "exactly the dropped message is retransmitted");
        let units = o.dropped_units.unwrap();
        assert!(rtx[0].units.start <= units.start && units.start < rtx[0].units.end);
        let mtt = o.mtt.unwrap();
        // Recovery takes at least the 100 ms RTO floor or a fast retransmit round trip.
        assert!(mtt > Duration::from_millis(30), "{mtt}");
        assert!(mtt < Duration::from_secs(2), "{mtt}");
    }
    // The first of a burst (5) recovers faster than the last (8): 003 §4.1.
    assert!(outcomes[0].mtt.unwrap() < outcomes[1].mtt.unwrap());
    let r = Results::build(&plan, &outcomes, 0.0);
    assert!(r.variants[0].points[0].mtt_median_ms.is_some());
    assert!(
        r.mtt_reduction.as_ref().unwrap().is_empty(),
        "no variant besides the baseline"
    );
}

// DATA detection on raw packets: SCTP by chunk type, TCP by payload beyond the header.
#[test]
fn data_detection() {
    let mut sctp = vec![0u8; 12];
    // SACK chunk (type 3), 16 bytes.
    sctp.extend_from_slice(&[3, 0, 0, 16]);
    sctp.extend_from_slice(&[0; 12]);
    assert!(!carries_data(TransportKind::Sctp, &sctp));
    // DATA chunk (type 0) after it.
    sctp.extend_from_slice(&[0, 3, 0, 17]);
    sctp.extend_from_slice(&[0; 13]);
    assert!(carries_data(TransportKind::Sctp, &sctp));
    // A zero chunk length ends the walk.
    assert!(!carries_data(
        TransportKind::Sctp,
        &[0u8; 12]
            .iter()
            .chain(&[1, 0, 0, 0])
            .copied()
            .collect::<Vec<_>>()
    ));
    let mut tcp = vec![0u8; 20];
    tcp[12] = 5 << 4;
    assert!(!carries_data(TransportKind::Tcp, &tcp));
    tcp.push(42);
    assert!(carries_data(TransportKind::Tcp, &tcp));
    assert!(!carries_data(TransportKind::Tcp, &[0u8; 4]));
}

// The seed scenarios in the repository parse and expand.
#[test]
fn repository_scenarios_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/seeds");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let s = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
            let plan = Plan::new(s, &PlanOptions::default()).unwrap_or_else(|e| panic!("{e}"));
            assert!(!plan.variants.is_empty());
            n += 1;
        }
    }
    assert!(n >= 2, "found {n} scenarios in {}", dir.display());
}

// Links as tables, a dumbbell with one access entry for all flows, several identical flows.
#[test]
fn dumbbell_with_link_tables_runs() {
    let text = r#"
name = "dumbbell"
duration = "5s"
drain = "10s"
[topology]
kind = "dumbbell"
bottleneck_forward = { delay = "20ms", loss = { model = "bernoulli", p = "2%" }, bottleneck = { rate = "1mbit", limit_packets = 20 } }
access = [{ a = "delay 5ms", b = "delay 1ms" }]
[[flows]]
workload = { kind = "constant", iat = "50ms", bytes = 120 }
count = 3
[[variants]]
name = "rfc"
preset = "rfc"
[sweep]
parameter = "drop-data-packet"
values = [10]
"#;
    let s = parse(text).unwrap();
    assert_eq!(s.flow_count(), 3);
    let plan = Plan::new(s, &PlanOptions::default()).unwrap();
    let outcomes = run_all(&plan, &RunOptions::default()).unwrap();
    let o = &outcomes[0];
    assert_eq!(o.flows.len(), 3, "all three flows are measured");
    for f in &o.flows {
        assert_eq!(f.messages().len(), 100);
        assert!(f.messages().iter().all(|m| m.delivered.is_some()));
    }
    assert!(o.mtt.is_some(), "the drop on the bottleneck hit flow 0");
    assert!(o.fault.is_none());
}

// Every `[[reference.compare]]` path of the repository's scenarios finds a value in a (short) run's results.
#[test]
fn repository_compare_paths_resolve() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/seeds");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let s = Scenario::load(&path).unwrap();
        // Throughput needs at least one whole interval in the window.
        let short = match &s.metrics.throughput {
            Some(t) => t.from.unwrap_or(Duration::ZERO) + t.interval * 2,
            None => Duration::from_secs(20),
        };
        let options = PlanOptions {
            duration: Some(s.duration.min(short)),
            drain: Some(s.drain.min(Duration::from_secs(10))),
            repetitions: Some(1),
            ..PlanOptions::default()
        };
        let plan = Plan::new(s, &options).unwrap();
        let outcomes = run_all(
            &plan,
            &RunOptions {
                jobs: 2,
                ..RunOptions::default()
            },
        )
        .unwrap();
        let results = Results::build(&plan, &outcomes, 0.0);
        let json = serde_json::to_value(&results).unwrap();
        let rows = results
            .reference
            .as_ref()
            .and_then(|r| r.get("compare"))
            .and_then(|c| c.as_array())
            .cloned()
            .unwrap_or_default();
        // A statistic of a retransmission group may be null in a short
        // run (no second retransmission happened), a confidence interval
        // with one repetition; the path must still exist, so a typo is
        // caught.
        let found = |p: &str| {
            crate::report::lookup(&json, p).is_some_and(|v| {
                !v.is_null() || p.contains("by_retransmissions[") || p.ends_with(".ci95")
            })
        };
        for row in rows {
            let p = row["ours"].as_str().unwrap();
            assert!(found(p), "{}: {p} not found", path.display());
            checked += 1;
            // Expectations against another value of the results name one
            // that exists.
            for e in crate::verdict::Expectation::of_row(&row).unwrap() {
                if let crate::verdict::Target::Other(o) = &e.target {
                    assert!(found(o), "{}: expect.other {o} not found", path.display());
                }
            }
        }
    }
    assert!(checked >= 10, "only {checked} compare rows");
}

fn streams_scenario(streams: u16, variant: &str) -> String {
    format!(
        r#"
name = "streams"
duration = "5s"
drain = "5s"
[topology]
kind = "two-host"
forward = "delay 10ms"
[[flows]]
workload = {{ kind = "constant", iat = "50ms", bytes = 100, streams = {streams} }}
{variant}
"#
    )
}

// More SCTP streams than the association offers is an error before
// anything runs, naming the override; with `streams` set the workload runs
// and every message arrives; `streams` is SCTP only.
#[test]
fn stream_counts_are_checked_and_configurable() {
    let plain = "[[variants]]\nname = \"rfc\"\npreset = \"rfc\"";
    let e = Plan::new(
        parse(&streams_scenario(12, plain)).unwrap(),
        &PlanOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("uses 12 SCTP streams but variant \"rfc\" offers 10")
            && e.contains("streams = 12"),
        "{e}"
    );
    let ok = "[[variants]]\nname = \"rfc\"\npreset = \"rfc\"\noverrides = { streams = 12 }";
    let json: serde_json::Value = serde_json::from_str(&run_json(
        &streams_scenario(12, ok),
        &PlanOptions::default(),
        1,
    ))
    .unwrap();
    let v = &json["variants"][0];
    assert_eq!(v["messages"], 100);
    assert_eq!(v["delivered"], 100);
    assert_eq!(v["faults"], serde_json::json!([]));
    let tcp = "[[variants]]\nname = \"tcp\"\ntransport = \"tcp\"\npreset = \"newreno\"\noverrides = { streams = 2 }";
    let e = Plan::new(
        parse(&streams_scenario(1, tcp)).unwrap(),
        &PlanOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`streams` applies to SCTP only"), "{e}");
}

// A message the transport refuses for good (here larger than SCTP's
// 256 KiB maximum message size) is a fault of the run, with the reason.
#[test]
fn rejected_messages_are_faults() {
    let text = streams_scenario(1, "[[variants]]\nname = \"rfc\"\npreset = \"rfc\"")
        .replace("bytes = 100", "bytes = 300000");
    let json: serde_json::Value =
        serde_json::from_str(&run_json(&text, &PlanOptions::default(), 1)).unwrap();
    let faults = json["variants"][0]["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 1, "{faults:?}");
    let f = faults[0].as_str().unwrap();
    assert!(
        f.contains("flow0.a: 100 message(s) rejected by the transport") && f.contains("300000 B"),
        "{f}"
    );
}

const TCP_LOSSY: &str = r#"
name = "tcp-lossy"
duration = "60s"
drain = "20s"
seed = 11
repetitions = 1

[topology]
kind = "two-host"
forward = "delay 50ms loss 5%"

[[flows]]
transport = "tcp"
workload = { kind = "constant", iat = "250ms", bytes = 100 }

[[variants]]
name = "newreno"
preset = "newreno"
"#;

fn run_tcp_json(text: &str, options: RunOptions) -> (String, Vec<crate::runner::RunOutcome>) {
    run_with(text, &PlanOptions::default(), &options)
}

// Without a corrupting link or a capture, a run leaves TCP's checksum to
// the path; with a capture it computes it. The results are the same either
// way, and the captured segments carry real checksums.
#[test]
fn tcp_checksum_offload_changes_no_result() {
    let records = RunOptions {
        records_run: Some(0),
        ..RunOptions::default()
    };
    let pcap = RunOptions {
        pcap_run: Some(0),
        ..RunOptions::default()
    };
    let (offloaded, _) = run_tcp_json(TCP_LOSSY, records);
    let (computed, outcomes) = run_tcp_json(TCP_LOSSY, pcap);
    assert_eq!(without_wall(&offloaded), without_wall(&computed));
    let capture = outcomes[0].pcap.as_ref().expect("a capture was asked for");
    // `read` checks every TCP checksum.
    let packets = thinstream_sim::pcap::read(capture).expect("valid checksums");
    assert!(
        packets.len() > 400,
        "a minute of segments: {}",
        packets.len()
    );
}

// A link that flips bits keeps the checksum on: the receiver discards the
// corrupted segments instead of delivering wrong bytes.
#[test]
fn tcp_checksum_is_computed_when_a_link_corrupts() {
    let text = TCP_LOSSY.replace("loss 5%", "loss 5% corrupt 5%");
    let (_, outcomes) = run_tcp_json(
        &text,
        RunOptions {
            records_run: Some(0),
            ..RunOptions::default()
        },
    );
    let records = outcomes[0]
        .records
        .as_ref()
        .expect("records were asked for");
    let bad = records
        .iter()
        .flat_map(|(_, r)| r)
        .filter(|r| {
            matches!(r, thinstream_base::trace::Record::Discarded { why, .. } if why == "bad-checksum")
        })
        .count();
    assert!(bad > 0, "corrupted segments were discarded");
}
