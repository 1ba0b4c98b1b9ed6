//! `thinstream run` on the repository's seed scenarios with short
//! durations: the command succeeds, prints the seed and run list first,
//! writes results.json with the documented fields, and the numbers are
//! sane. Bad input is one line on stderr and exit status 2.

use std::path::{Path, PathBuf};
use std::process::Command;

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/seeds")
        .join(name)
}

fn out_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("thinstream-run-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_thinstream"))
        .args(args)
        .output()
        .expect("binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn read_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json written");
    serde_json::from_str(&text).expect("valid JSON")
}

/// Checks the documented per-variant fields of an available variant.
fn check_variant(v: &serde_json::Value) {
    for key in [
        "name",
        "messages",
        "delivered",
        "latency_ms",
        "by_retransmissions",
        "reasons",
        "spurious",
        "tohd",
        "loss_rate",
        "wall_s",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    for key in ["mean", "p50", "p90", "p99", "p999", "max"] {
        assert!(
            v["latency_ms"][key].as_f64().is_some(),
            "latency_ms.{key} in {v}"
        );
    }
    let l = &v["latency_ms"];
    assert!(l["p50"].as_f64().unwrap() >= 0.0);
    assert!(l["p50"].as_f64().unwrap() <= l["p99"].as_f64().unwrap());
    assert!(l["p99"].as_f64().unwrap() <= l["max"].as_f64().unwrap());
    let rows = v["by_retransmissions"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["retransmissions"], i as u64);
        for key in ["count", "mean_ms", "p50_ms", "p99_ms", "max_ms"] {
            assert!(r.get(key).is_some(), "missing {key} in {r}");
        }
    }
    let counted: u64 = rows.iter().map(|r| r["count"].as_u64().unwrap()).sum();
    assert_eq!(
        Some(counted),
        v["delivered"].as_u64(),
        "every delivered message is in a group"
    );
    // Reliable transports: everything submitted is delivered.
    assert_eq!(v["delivered"], v["messages"], "{v}");
    assert!(v["messages"].as_u64().unwrap() > 0);
}

// 000 Fig. 8 for 60 simulated seconds: fields present, all delivered, loss near the configured 5%.
#[test]
fn fig8_short_run() {
    let dir = out_dir("fig8");
    let (code, stdout, stderr) = run(&[
        "run",
        scenario("000-fig8-uniform.toml").to_str().unwrap(),
        "--duration",
        "60s",
        "--drain",
        "30s",
        "--out",
        dir.to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    // The seed and the run list come before the tables.
    let seed_at = stdout.find("master seed 1").expect("seed printed");
    let runs_at = stdout.find("run(s):").expect("run list printed");
    let table_at = stdout
        .find("application latency above min OWD, ms")
        .expect("table printed, saying the one-way delay is removed");
    assert!(seed_at < runs_at && runs_at < table_at, "{stdout}");

    let j = read_json(&dir);
    assert_eq!(j["scenario"], "000-fig8-uniform");
    assert_eq!(j["seed"], 1);
    assert_eq!(j["simulated_s"], 90.0);
    assert!(j["wall_s"].as_f64().is_some());
    assert!(j["reference"].is_object(), "reference data copied");
    let variants = j["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 7);
    let mut ran = 0;
    let (mut sent, mut lost_weighted) = (0.0, 0.0);
    for v in variants {
        if v["available"] == false {
            assert!(
                v["error"].as_str().unwrap().contains("not available"),
                "{v}"
            );
            continue;
        }
        ran += 1;
        check_variant(v);
        // 60 s of one message every 250 ms.
        assert_eq!(v["messages"], 240, "{v}");
        let m = v["messages"].as_f64().unwrap();
        sent += m;
        lost_weighted += v["loss_rate"].as_f64().unwrap() * m;
    }
    assert!(ran >= 1, "at least the TCP reference runs");
    let loss = lost_weighted / sent;
    assert!(
        (0.01..0.12).contains(&loss),
        "loss {loss} far from the configured 5%"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// 003 with three loss positions: MTT per position, first-of-burst faster than last.
#[test]
fn static_bursts_subset() {
    let dir = out_dir("003");
    let (code, stdout, stderr) = run(&[
        "run",
        scenario("003-static-bursts.toml").to_str().unwrap(),
        "--points",
        "9,12,13",
        "--repetitions",
        "1",
        "--out",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("message transfer time"), "{stdout}");
    let j = read_json(&dir);
    assert_eq!(j["sweep"]["parameter"], "drop-data-packet");
    assert_eq!(j["sweep"]["values"], serde_json::json!(["9", "12", "13"]));
    let standard = j["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "standard")
        .unwrap();
    check_variant(standard);
    let points = standard["points"].as_array().unwrap();
    assert_eq!(points.len(), 3);
    let mtt: Vec<f64> = points
        .iter()
        .map(|p| p["mtt_median_ms"].as_f64().expect("MTT measured"))
        .collect();
    // 003 §4.1: the first message of a burst (9, 13) recovers faster than the fourth (12).
    assert!(mtt[0] < mtt[1] && mtt[2] < mtt[1], "{mtt:?}");
    // Nothing recovers faster than a round trip (2 x 15 ms) or slower than RTO_max + RTT.
    assert!(mtt.iter().all(|m| (30.0..1000.0).contains(m)), "{mtt:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

// Errors are one line on stderr with exit status 2.
#[test]
fn bad_input_is_one_line_exit_2() {
    let dir = out_dir("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\nduration = \"1s\"\nwat = 1\n").unwrap();
    for args in [
        vec!["run", "/nonexistent/scenario.toml"],
        vec!["run", bad.to_str().unwrap()],
        vec![
            "run",
            scenario("003-static-bursts.toml").to_str().unwrap(),
            "--variants",
            "nope",
        ],
        vec![
            "run",
            scenario("003-static-bursts.toml").to_str().unwrap(),
            "--points",
            "999",
        ],
    ] {
        let (code, _stdout, stderr) = run(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("thinstream: error:"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (_, _, stderr) = run(&["run", bad.to_str().unwrap()]);
    assert!(stderr.contains("bad.toml:3:"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

// `reproduce` runs every scenario of a folder and writes results.json files and report.md with the reference data.
#[test]
fn reproduce_writes_report() {
    let dir = out_dir("reproduce");
    let scen = dir.join("scenarios");
    std::fs::create_dir_all(&scen).unwrap();
    for (name, loss) in [("a-small", "2%"), ("b-small", "5%")] {
        std::fs::write(
            scen.join(format!("{name}.toml")),
            format!(
                r#"name = "{name}"
source = "test"
duration = "20s"
drain = "10s"
[topology]
kind = "two-host"
forward = "delay 30ms loss {loss}"
[[flows]]
workload = {{ kind = "constant", iat = "100ms", bytes = 100 }}
[[variants]]
name = "tcp"
transport = "tcp"
preset = "linux-2.6.23"
[metrics]
also = ["ack"]
[reference]
claim = "the documents say something about {name}"
[[reference.compare]]
what = "messages"
ours = "variants[name=tcp].messages"
theirs = "200"
source = "test"
expect = {{ op = "approx", value = 200 }}
[[reference.compare]]
what = "p99 against max"
ours = "variants[name=tcp].also.ack.latency_ms.p99"
theirs = "above the maximum"
source = "test"
expect = {{ op = ">", other = "variants[name=tcp].also.ack.latency_ms.max" }}
[[reference.compare]]
what = "words"
ours = "variants[name=tcp].tohd"
theirs = "small"
source = "test"
qualitative = true
"#
            ),
        )
        .unwrap();
    }
    // The robustness part: one small cell with a loss sweep.
    let robust = dir.join("robustness");
    std::fs::create_dir_all(&robust).unwrap();
    std::fs::write(
        robust.join("cell.toml"),
        r#"name = "robust-cell"
duration = "30s"
drain = "10s"
[topology]
kind = "two-host"
forward = "delay 50ms"
[[flows]]
workload = { kind = "constant", iat = "100ms", bytes = 100 }
app_start_from = "established"
app_timer_jitter = "4ms"
[sweep]
parameter = "loss"
values = [0, 5]
[[variants]]
name = "thin@linux-2.6"
preset = "thin"
receiver = "linux-2.6"
[[variants]]
name = "production@linux"
preset = "production"
receiver = "linux"
"#,
    )
    .unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = run(&[
        "reproduce",
        "--quick",
        "--quiet",
        "--scenarios",
        scen.to_str().unwrap(),
        "--robustness",
        robust.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("[1/3]") && stderr.contains("[3/3]"),
        "progress: {stderr}"
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for name in ["a-small", "b-small"] {
        assert!(report.contains(&format!("## {name}")), "{report}");
        assert!(out.join(name).join("results.json").exists());
        assert!(
            report.contains(&format!("the documents say something about {name}")),
            "{report}"
        );
    }
    assert!(
        report.contains("| tcp | application | 200 | 200 |"),
        "{report}"
    );
    // Verdicts are computed: per scenario one reproduced (200 messages),
    // one differs (p99 > max is impossible), one not comparable.
    assert!(report.contains("## Summary"), "{report}");
    assert!(
        report.contains("| [a-small](#a-small) | 1 | 0 | 1 | 1 |"),
        "{report}"
    );
    assert!(
        report.contains("| **all** | **2** | **0** | **2** | **2** |"),
        "{report}"
    );
    assert!(report.contains("| **reproduced** |"), "{report}");
    assert!(report.contains("| **differs** |"), "{report}");
    assert!(
        report.contains("application latency above min OWD"),
        "{report}"
    );
    for name in ["a-small", "b-small"] {
        let d = out.join(name);
        for f in ["latency-by-rtx.svg", "ack-latency-cdf.svg", "results.csv"] {
            assert!(d.join(f).exists(), "{name}/{f}");
            assert!(report.contains(&format!("{name}/{f}")), "{name}/{f} linked");
        }
        let csv = std::fs::read_to_string(d.join("results.csv")).unwrap();
        assert!(csv.starts_with("scenario,variant,point,metric,statistic,value\n"));
        assert!(
            csv.contains(&format!("{name},tcp,all,messages,value,200\n")),
            "{csv}"
        );
    }
    // The robustness part: its own heading, the recovery table per loss
    // point, and the slowest message at 5% with its path from the trace.
    assert!(
        report.contains("# Robustness against unmodified receivers\n"),
        "{report}"
    );
    assert!(report.contains("- [robust-cell](#robust-cell)"), "{report}");
    assert!(report.contains("Recovery per loss"), "{report}");
    assert!(report.contains("| thin@linux-2.6 | 5% | 300 |"), "{report}");
    assert!(
        report.contains("Slowest message of each variant at loss = 5%"),
        "{report}"
    );
    assert!(report.contains("| production@linux | "), "{report}");
    assert!(report.contains(" new lost → "), "{report}");
    // The whole report again from the stored results, without running.
    let first_md = report.clone();
    std::fs::remove_file(out.join("report.md")).unwrap();
    std::fs::remove_file(out.join("a-small").join("results.csv")).unwrap();
    let (code, stdout, stderr) = run(&["reproduce", "--from", out.to_str().unwrap()]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("rebuilt the report of 3 scenario(s)"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("report.md")).unwrap(),
        first_md
    );
    assert!(out.join("a-small").join("results.csv").exists());
    let (code, _, stderr) = run(&["reproduce", "--from", dir.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("manifest.json"), "{stderr}");
    // No stored real results where the defaults point (the test runs in
    // the crate's folder): the part says so for each, nothing fails.
    assert!(
        first_md.contains("# Real sockets vs the simulator\n\n## Not available\n\nNot available: no stored real results at scenarios/real/000-fig8-uniform-10min"),
        "{first_md}"
    );
    assert!(
        first_md.contains(
            "Not available: no stored real results at scenarios/real/thin-tcp-kernel-10min"
        ),
        "{first_md}"
    );
    assert!(
        first_md.contains(
            "[Real sockets vs the simulator](#real-sockets-vs-the-simulator): not available"
        ),
        "{first_md}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<h2 id=\"a-small\">"), "anchors");
    assert!(html.matches("<svg").count() >= 4, "plots inlined");
    assert!(!html.contains("<img") && !html.contains("<script") && !html.contains("<link"));
    let _ = std::fs::remove_dir_all(&dir);
}

// `reproduce --real-results`: a stored real result (a fixture made from a
// simulated run: mode `real`, one row 20% slower) against the scenario
// simulated by reproduce with the same seed: the part has computed marks,
// plots, CSV, the discussion, survives `--from`; a real result of another
// seed is "not available"; a missing file named on the command line is an
// error before anything runs.
#[test]
fn reproduce_compares_stored_real_results() {
    let dir = out_dir("reproduce-real");
    let seeds = dir.join("seeds");
    std::fs::create_dir_all(&seeds).unwrap();
    std::fs::write(
        seeds.join("tiny.toml"),
        r#"name = "tiny"
source = "test"
duration = "20s"
drain = "10s"
[topology]
kind = "two-host"
forward = "delay 30ms loss 2%"
[[flows]]
workload = { kind = "constant", iat = "100ms", bytes = 100 }
[[variants]]
name = "thin"
preset = "thin"
"#,
    )
    .unwrap();
    let scenario = dir.join("real-scenario.toml");
    std::fs::write(
        &scenario,
        r#"name = "real-fixture"
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
discussion = ["the fixture's thin row is 20% slower by construction"]
"#,
    )
    .unwrap();
    let made = dir.join("made");
    let (code, _, stderr) = run(&[
        "run",
        scenario.to_str().unwrap(),
        "--quiet",
        "--out",
        made.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let mut real = read_json(&made);
    real["mode"] = "real".into();
    real["real"] = serde_json::json!({
        "started_utc": "2026-01-01T00:00:00Z", "jobs": 2, "not_measured": {}, "runs": []
    });
    let row = real["variants"][1]["by_retransmissions"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["retransmissions"] == 1)
        .unwrap();
    assert!(row["count"].as_u64().unwrap() >= 30, "{row}");
    row["mean_ms"] = (row["mean_ms"].as_f64().unwrap() * 1.2).into();
    let fixture = dir.join("stored-real.json");
    std::fs::write(&fixture, real.to_string()).unwrap();
    let out = dir.join("out");
    let reproduce = |real_results: &Path, out: &Path| {
        run(&[
            "reproduce",
            "--quick",
            "--quiet",
            "--no-robustness",
            "--scenarios",
            seeds.to_str().unwrap(),
            "--real-results",
            real_results.to_str().unwrap(),
            "--real-scenario",
            scenario.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let (code, stdout, stderr) = reproduce(&fixture, &out);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    let part = &report[report
        .find("# Real sockets vs the simulator\n")
        .expect("the part")..];
    assert!(part.contains("| thin | 1 |"), "{part}");
    assert_eq!(part.matches("| **differs** |").count(), 1, "{part}");
    assert!(part.contains("| agrees |"), "{part}");
    assert!(part.contains("- the fixture's thin row is 20% slower by construction"));
    assert!(
        report.contains("**1 differ** (control, the simulator against itself with master seed 2: ")
    );
    for f in [
        "real-vs-sim-thin.svg",
        "real-vs-sim-linux.svg",
        "real-vs-sim.csv",
    ] {
        assert!(out.join("real-fixture").join(f).exists(), "{f}");
    }
    assert!(out.join("real-fixture/real/results.json").exists());
    assert!(out.join("real-fixture/control/results.json").exists());
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("<h1 id=\"real-sockets-vs-the-simulator\">"),
        "anchor"
    );
    assert!(
        html.contains("real-fixture, thin: application latency"),
        "plot inlined"
    );
    // Rebuilt from the stored results alone.
    let first = report.clone();
    std::fs::remove_file(out.join("report.md")).unwrap();
    let (code, stdout, stderr) = run(&["reproduce", "--from", out.to_str().unwrap()]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(out.join("report.md")).unwrap(),
        first
    );
    // Real results of other variants do not belong to this simulation.
    real["variants"][1]["preset"] = "rfc".into();
    std::fs::write(&fixture, real.to_string()).unwrap();
    let out2 = dir.join("out2");
    let (code, _, stderr) = reproduce(&fixture, &out2);
    assert_eq!(code, 0, "{stderr}");
    let report = std::fs::read_to_string(out2.join("report.md")).unwrap();
    assert!(
        report
            .contains("Not available: the stored real results do not match the scenario: variants"),
        "{report}"
    );
    // A file named on the command line must exist.
    let (code, _, stderr) = reproduce(&dir.join("missing.json"), &dir.join("out3"));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--real-results: cannot read"), "{stderr}");
    assert!(!dir.join("out3").exists(), "nothing ran");
    let _ = std::fs::remove_dir_all(&dir);
}

// Two invocations with the same seed write the same results.json apart from wall_s.
#[test]
fn same_seed_same_results_json() {
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
    let mut texts = Vec::new();
    for jobs in ["1", "2"] {
        let dir = out_dir(&format!("det{jobs}"));
        let (code, stdout, stderr) = run(&[
            "run",
            scenario("000-fig8-uniform.toml").to_str().unwrap(),
            "--duration",
            "30s",
            "--seed",
            "77",
            "--jobs",
            jobs,
            "--quiet",
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
        let mut v = read_json(&dir);
        assert_eq!(v["seed"], 77);
        strip(&mut v);
        texts.push(serde_json::to_string(&v).unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(texts[0], texts[1]);
}

// --pcap and --records keep one run's capture and trace records; the record stream shows the single drop.
#[test]
fn pcap_and_records_of_one_run() {
    let dir = out_dir("detail");
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("run.pcap");
    let records = dir.join("run.jsonl");
    // Point 12 (one data packet dropped), one run, into `out`.
    let one_run = |out: &std::path::Path, extra: &[&str]| {
        let scenario = scenario("003-static-bursts.toml");
        let mut args = vec![
            "run",
            scenario.to_str().unwrap(),
            "--points",
            "12",
            "--repetitions",
            "1",
            "--variants",
            "standard",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    };
    one_run(
        &dir,
        &[
            "--pcap",
            pcap.to_str().unwrap(),
            "--records",
            records.to_str().unwrap(),
        ],
    );
    let bytes = std::fs::read(&pcap).unwrap();
    // pcap global header magic (microsecond or nanosecond, either byte order).
    assert!(bytes.len() > 24, "capture too short");
    let magic = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    assert!(
        [0xa1b2_c3d4, 0xa1b2_3c4d, 0xd4c3_b2a1, 0x4d3c_b2a1].contains(&magic),
        "{magic:x}"
    );
    let text = std::fs::read_to_string(&records).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.iter().any(|l| l["endpoint"] == "flow0.a"));
    assert!(lines.iter().any(|l| l["endpoint"] == "flow0.b"));
    // 48 messages submitted by the sender, and the dropped one sent again.
    let submitted = lines
        .iter()
        .filter(|l| l["endpoint"] == "flow0.a" && l["record"]["kind"] == "submitted")
        .count();
    assert_eq!(submitted, 48, "{}", &text[..text.len().min(2000)]);
    let resent = lines
        .iter()
        .filter(|l| l["endpoint"] == "flow0.a" && l["record"]["kind"] == "packet-sent")
        .flat_map(|l| l["record"]["data"].as_array().cloned().unwrap_or_default())
        .filter(|d| d["reason"] != "new")
        .count();
    assert!(resent >= 1, "the dropped message was never sent again");
    // The same run seen where packets arrive: the one dropped packet is
    // missing, every other is there.
    let received = dir.join("received.pcap");
    one_run(
        &dir.join("again"),
        &["--pcap", received.to_str().unwrap(), "--pcap-at", "receive"],
    );
    let sent = pcap_records(&bytes);
    assert!(sent > 48, "{sent} packets");
    assert_eq!(pcap_records(&std::fs::read(&received).unwrap()), sent - 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Packets in a little-endian pcap file: the records after the 24-byte
/// file header, each a 16-byte header and its captured length.
fn pcap_records(bytes: &[u8]) -> usize {
    let (mut at, mut n) = (24, 0);
    while at + 16 <= bytes.len() {
        let incl = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + incl;
        n += 1;
    }
    assert_eq!(at, bytes.len(), "the capture ends inside a record");
    n
}

// 000-fig8-crosstraffic, 10 s: the 81 HTTP clients load the bottleneck and
// results.json reports its drop rate and utilisation.
#[test]
fn crosstraffic_short_run() {
    let dir = out_dir("crosstraffic");
    let (code, stdout, stderr) = run(&[
        "run",
        scenario("000-fig8-crosstraffic.toml").to_str().unwrap(),
        "--duration",
        "10s",
        "--drain",
        "5s",
        "--variants",
        "lksctp",
        "--out",
        dir.to_str().unwrap(),
        "--jobs",
        "1",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let j = read_json(&dir);
    let v = &j["variants"][0];
    check_variant(v);
    assert_eq!(v["faults"], serde_json::json!([]), "{v}");
    let fwd = &v["bottleneck"]["forward"];
    assert!(fwd["offered_packets"].as_u64().unwrap() > 5000, "{fwd}");
    let u = fwd["utilisation"].as_f64().unwrap();
    assert!(u > 0.3 && u < 1.05, "{fwd}");
    assert!(fwd["drop_rate"].as_f64().is_some(), "{fwd}");
    let _ = std::fs::remove_dir_all(&dir);
}

// 002-tcp-fairness, one 30 s interval: greedy and thin throughput per entry
// with Jain's index; RDB thin streams leave the greedy ones less.
#[test]
fn fairness_short_run() {
    let dir = out_dir("fairness");
    let (code, stdout, stderr) = run(&[
        "run",
        scenario("002-tcp-fairness.toml").to_str().unwrap(),
        "--duration",
        "36s",
        "--drain",
        "2s",
        "--variants",
        "newreno,RDB",
        "--out",
        dir.to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let j = read_json(&dir);
    let greedy = |i: usize| {
        let t = &j["variants"][i]["throughput"][0];
        assert_eq!(t["entry"], 0, "{t}");
        assert_eq!(t["flows"], 4, "{t}");
        let jain = t["jain_mean"].as_f64().unwrap();
        assert!(jain > 0.25 && jain <= 1.0 + 1e-9, "{t}");
        t["aggregate_kbps_mean"].as_f64().unwrap()
    };
    let (with_newreno, with_rdb) = (greedy(0), greedy(1));
    assert!(
        with_newreno > 500.0 && with_newreno < 1000.0,
        "{with_newreno}"
    );
    assert!(with_rdb < with_newreno, "{with_rdb} vs {with_newreno}");
    let _ = std::fs::remove_dir_all(&dir);
}

// 001-hol-echo, 20 s: response times for 1, 2, 4, 8 SCTP streams,
// unordered SCTP and one and four TCP connections, each beside the model's
// prediction for its own number of streams or connections.
#[test]
fn hol_echo_short_run() {
    let dir = out_dir("echo");
    let (code, stdout, stderr) = run(&[
        "run",
        scenario("001-hol-echo.toml").to_str().unwrap(),
        "--duration",
        "20s",
        "--drain",
        "5s",
        "--out",
        dir.to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let j = read_json(&dir);
    let variants = j["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 7);
    let scheme = |name: &str| {
        variants
            .iter()
            .find(|v| v["name"] == name)
            .map(|v| v["model"]["scheme"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(scheme("sctp-1-stream"), "SctpStreams { streams: 1 }");
    assert_eq!(scheme("sctp-8-streams"), "SctpStreams { streams: 8 }");
    assert_eq!(
        scheme("tcp-1-connection"),
        "TcpConnections { connections: 1 }"
    );
    assert_eq!(
        scheme("tcp-4-connections"),
        "TcpConnections { connections: 4 }"
    );
    for v in variants {
        let r = &v["responses"];
        assert_eq!(r["answered"], r["requests"], "{v}");
        let mean = r["response_ms"]["mean"].as_f64().unwrap();
        let model = v["model"]["response_time_ms"].as_f64().unwrap();
        // RTT 20 ms is the floor of both; at p = 1% both stay near it.
        assert!((20.0..60.0).contains(&mean), "{v}");
        assert!((20.0..60.0).contains(&model), "{v}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// A reader that goes away (`thinstream run … | head`) does not make the
// command panic: it finishes quietly, results.json is still written.
#[test]
fn closed_stdout_is_not_a_panic() {
    use std::process::Stdio;
    let dir = out_dir("pipe");
    let mut child = Command::new(env!("CARGO_BIN_EXE_thinstream"))
        .args([
            "run",
            scenario("000-fig8-uniform.toml").to_str().unwrap(),
            "--duration",
            "20s",
            "--out",
            dir.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    // Read one line, then close the pipe like `head -1`.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(dir.join("results.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
