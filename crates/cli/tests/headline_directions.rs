//! The headline directions of the documents, checked on short runs of the
//! seed scenarios (what `thinstream reproduce --quick` runs, shorter still):
//! the thin-stream modifications lower the latency tail of SCTP (000 §6.1,
//! 002 §5.3.2) and TCP (002 §5.2), redundant bundling lowers it most (002
//! §5.2.3), fast retransmit on the first report (mFR, Early Retransmit)
//! shortens recovery (000 §6.1, 003 §4), unordered delivery avoids
//! head-of-line blocking (001 §IV.B). Each check compares two numbers of
//! `results.json` and fails when the simulator gets the direction wrong;
//! the sizes are the report's business (`thinstream_lab::verdict`).
//!
//! Durations are cut so that the whole file stays within about a minute of
//! CPU on two cores; every check was chosen to hold with a wide margin at
//! these lengths (the margins are in the comments, from the full runs).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use thinstream_lab::report::lookup;

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/seeds")
        .join(name)
}

/// Runs a seed scenario with the given extra arguments (`--duration` …)
/// and returns its results.json.
fn run(name: &str, extra: &[&str]) -> Value {
    let dir = std::env::temp_dir().join(format!(
        "thinstream-headline-{}-{}",
        name.trim_end_matches(".toml"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let file = scenario(name);
    let mut args = vec![
        "run",
        file.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
        "--quiet",
        "--jobs",
        "2",
    ];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_thinstream"))
        .args(&args)
        .output()
        .expect("binary runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    let _ = std::fs::remove_dir_all(&dir);
    serde_json::from_str(&text).expect("JSON")
}

fn num(j: &Value, path: &str) -> f64 {
    lookup(j, path)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path} missing from results of {}", j["scenario"]))
}

/// `a < b` (the paths' values), with both in the failure message.
#[track_caller]
fn below(j: &Value, a: &str, b: &str) {
    let (x, y) = (num(j, a), num(j, b));
    assert!(
        x < y,
        "{}: expected {a} = {x:.1} < {b} = {y:.1}",
        j["scenario"]
    );
}

fn v(name: &str, rest: &str) -> String {
    format!("variants[name={name}].{rest}")
}

// 000 §6.1 Fig. 8(a), 002 §5.3.2: 5% uniform loss, RTT 100 ms, 4 msgs/s.
// Full run: ACK p99 lksctp 1100, rfc 1100, minRTO 693, mFR 600, all mods
// 450; application p99 lksctp 1350, all mods 350.
#[test]
fn fig8_uniform_thin_sctp_beats_lksctp_and_rfc() {
    let j = run(
        "000-fig8-uniform.toml",
        &["--duration", "20m", "--drain", "30s"],
    );
    let p99 = "also.ack.latency_ms.p99";
    for thin in ["minRTO", "mFR", "all-mods"] {
        below(&j, &v(thin, p99), &v("lksctp", p99));
        below(&j, &v(thin, p99), &v("rfc", p99));
    }
    // All modifications together beat each one alone.
    for single in ["minRTO", "mFR"] {
        below(&j, &v("all-mods", p99), &v(single, p99));
    }
    below(
        &j,
        &v("all-mods", "latency_ms.p99"),
        &v("lksctp", "latency_ms.p99"),
    );
    below(
        &j,
        &v("all-mods", "also.ack.latency_ms.max"),
        &v("lksctp", "also.ack.latency_ms.max"),
    );
    // Fast retransmit on one report: the first retransmission comes sooner.
    let first = "also.ack.by_retransmissions[retransmissions=1].mean_ms";
    below(&j, &v("mFR", first), &v("lksctp", first));
}

// 000 §6.2 Fig. 8(b): loss from HTTP-like cross traffic. Full run: ACK
// p99 lksctp 1179, all mods 667; ACK mean minRTO below lksctp.
#[test]
fn fig8_crosstraffic_thin_sctp_beats_lksctp() {
    let j = run(
        "000-fig8-crosstraffic.toml",
        &[
            "--duration",
            "4m",
            "--drain",
            "20s",
            "--variants",
            "lksctp,minRTO,all-mods",
        ],
    );
    let p99 = "also.ack.latency_ms.p99";
    below(&j, &v("all-mods", p99), &v("lksctp", p99));
    below(
        &j,
        &v("minRTO", "also.ack.latency_ms.mean"),
        &v("lksctp", "also.ack.latency_ms.mean"),
    );
}

// 002 §5.2 Figs. 5.8-5.10: TCP thin stream, 5% loss, RTT 150 ms. Full run:
// application p99 New Reno 909, mFR 638, LT+mFR 600, RDB 100, all mods 100.
#[test]
fn tcp_uniform_modifications_and_rdb_lower_the_tail() {
    let j = run(
        "002-tcp-uniform.toml",
        &[
            "--duration",
            "20m",
            "--drain",
            "30s",
            "--variants",
            "newreno,mFR,LT+mFR,RDB,all-mods",
        ],
    );
    let p99 = "latency_ms.p99";
    for thin in ["mFR", "LT+mFR", "RDB", "all-mods"] {
        below(&j, &v(thin, p99), &v("newreno", p99));
    }
    // Redundant bundling recovers most losses before any retransmission.
    below(&j, &v("RDB", p99), &v("LT+mFR", p99));
    let first = "also.ack.by_retransmissions[retransmissions=1].mean_ms";
    below(&j, &v("mFR", first), &v("newreno", first));
    // The price: redundant bytes (002 §5.2.3 tohd).
    below(&j, &v("newreno", "tohd"), &v("RDB", "tohd"));
}

// 001 §IV.B Figs. 4-6: echo at 100 requests/s, RTT 20 ms, 1% loss. Full
// run: mean response unordered 21.2, 4 streams 24.1, 4 TCP connections 26.8.
#[test]
fn hol_unordered_avoids_head_of_line_blocking() {
    let j = run("001-hol-echo.toml", &["--duration", "5m", "--drain", "10s"]);
    let mean = "responses.response_ms.mean";
    below(&j, &v("sctp-unordered", mean), &v("sctp-4-streams", mean));
    below(
        &j,
        &v("sctp-unordered", mean),
        &v("tcp-4-connections", mean),
    );
    // Every variant sits above its zero-loss floor (RTT 20 ms) and the
    // model predicts a mean within 25% of ours for the 4 SCTP streams.
    for name in ["sctp-unordered", "sctp-4-streams", "tcp-4-connections"] {
        assert!(num(&j, &v(name, mean)) > 20.0, "{name}");
    }
    let ours = num(&j, &v("sctp-4-streams", mean));
    let model = num(&j, &v("sctp-4-streams", "model.response_time_ms"));
    assert!(
        (ours - model).abs() / model < 0.25,
        "4 streams: ours {ours:.1} vs model {model:.1}"
    );
}

// 003 §4 Figs. 4-6: a single drop in 4-message bursts. Packet-based Early
// Retransmit cuts the mean MTT (full run 48%, document 41%); byte-based ER
// never triggers with small messages.
#[test]
fn early_retransmit_shortens_transfer_time() {
    let j = run("003-static-bursts.toml", &[]);
    let packet = num(&j, "mtt_reduction.er-packet.mean");
    let byte = num(&j, "mtt_reduction.er-byte.mean");
    assert!(packet > 0.25, "er-packet reduction {packet}");
    assert!(byte.abs() < 0.05, "er-byte reduction {byte}");
    // The first message of a burst lost: ER recovers before the standard
    // fast retransmit (4 reports) or the timeout.
    below(
        &j,
        &v("er-packet", "points[value=9].mtt_ms_compared"),
        &v("standard", "points[value=9].mtt_ms_compared"),
    );
}

// 002 §5.2.3 Fig. 5.15: a bundle limit that leaves room for no second
// segment does nothing; one extra segment helps; room for all helps most.
// Full run (RTT 150 ms): p99 New Reno 915, limit 400 915, 700 381, 1000 100.
#[test]
fn rdb_bundle_limit_orders_the_tail() {
    let j = run(
        "002-rdb-bundle-limit.toml",
        &[
            "--duration",
            "30m",
            "--drain",
            "30s",
            "--points",
            "75ms",
            "--variants",
            "newreno,rdb-400,rdb-700,rdb-1000",
        ],
    );
    let p99 = |name: &str| v(name, "points[value=75ms].summary.latency_ms.p99");
    let (nr, l400) = (num(&j, &p99("newreno")), num(&j, &p99("rdb-400")));
    assert!(
        (l400 - nr).abs() <= 0.05 * nr,
        "limit 400 {l400} vs New Reno {nr}"
    );
    below(&j, &p99("rdb-700"), &p99("newreno"));
    below(&j, &p99("rdb-1000"), &p99("rdb-700"));
    let tohd = |name: &str| v(name, "points[value=75ms].summary.tohd");
    below(&j, &tohd("rdb-700"), &tohd("rdb-1000"));
}

// 001 §IV.B Fig. 4 at p = 2%: more streams, lower mean response time;
// unordered lowest. Full run: 1 stream 68, 2 streams 48, 4 37, 8 29,
// unordered 23 ms.
#[test]
fn hol_more_streams_respond_faster() {
    let j = run(
        "001-hol-loss.toml",
        &[
            "--duration",
            "200s",
            "--drain",
            "10s",
            "--points",
            "2%",
            "--variants",
            "sctp-1-stream,sctp-2-streams,sctp-8-streams,sctp-unordered",
        ],
    );
    let mean = |name: &str| v(name, "points[value=2%].responses.response_ms.mean");
    below(&j, &mean("sctp-2-streams"), &mean("sctp-1-stream"));
    below(&j, &mean("sctp-8-streams"), &mean("sctp-2-streams"));
    below(&j, &mean("sctp-unordered"), &mean("sctp-8-streams"));
}
