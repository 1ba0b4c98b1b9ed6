//! `thinstream run --shard i/n` + `thinstream merge`: a sweep run as shards
//! (in any order) and merged gives the results.json of one full run, byte
//! for byte apart from the `wall_s` fields, and the same results.csv; bad
//! shard specifications and bad shard sets are clear errors (exit 2).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/seeds")
        .join(name)
}

fn thinstream(args: &[&str]) -> (i32, String, String) {
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

fn ok(args: &[&str]) -> String {
    let (code, out, err) = thinstream(args);
    assert_eq!(code, 0, "thinstream {args:?} failed:\n{out}\n{err}");
    out
}

/// results.json with the value of every `"wall_s":` line blanked (the
/// only fields that are not a function of the scenario and seed).
fn without_wall(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blanked = 0;
    for line in text.lines() {
        match line.find("\"wall_s\":") {
            Some(at) => {
                out.push_str(&line[..at]);
                out.push_str("\"wall_s\": _");
                if line.ends_with(',') {
                    out.push(',');
                }
                blanked += 1;
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    assert!(blanked >= 2, "wall_s lines found: {blanked}");
    out
}

/// Runs `file` with `opts` fully and as `n` shards (merged in a scrambled
/// order); the merged results.json and results.csv equal the full run's.
fn full_equals_merged(tag: &str, file: &str, opts: &[&str], n: u32) -> serde_json::Value {
    let dir = common::tempdir(tag);
    let s = scenario(file);
    let s = s.to_str().unwrap();
    let full = dir.join("full");
    let mut args = vec![
        "run",
        s,
        "--quiet",
        "--jobs",
        "2",
        "--out",
        full.to_str().unwrap(),
    ];
    args.extend_from_slice(opts);
    ok(&args);

    let mut shard_dirs = Vec::new();
    for i in 0..n {
        let d = dir.join(format!("shard{i}"));
        let spec = format!("{i}/{n}");
        let mut args = vec![
            "run",
            s,
            "--quiet",
            "--jobs",
            "1",
            "--shard",
            &spec,
            "--out",
            d.to_str().unwrap(),
        ];
        args.extend_from_slice(opts);
        let out = ok(&args);
        assert!(out.contains(&format!("shard {i}/{n}")), "{out}");
        for f in ["manifest.json", "runs.parquet", "samples.parquet"] {
            assert!(d.join(f).is_file(), "{f} in {}", d.display());
        }
        shard_dirs.push(d);
    }
    // Any order: the last shard first.
    shard_dirs.rotate_right(1);
    let merged = dir.join("merged");
    let mut args = vec!["merge", "--quiet", "--out", merged.to_str().unwrap()];
    let names: Vec<String> = shard_dirs
        .iter()
        .map(|d| d.to_str().unwrap().to_string())
        .collect();
    args.extend(names.iter().map(String::as_str));
    let out = ok(&args);
    assert!(out.contains(&format!("merged {n} shard(s)")), "{out}");

    let full_text = std::fs::read_to_string(full.join("results.json")).unwrap();
    let merged_text = std::fs::read_to_string(merged.join("results.json")).unwrap();
    let (a, b) = (without_wall(&full_text), without_wall(&merged_text));
    if a != b {
        let first = a
            .lines()
            .zip(b.lines())
            .position(|(x, y)| x != y)
            .unwrap_or(0);
        panic!(
            "{file}: merged results.json differs from the full run's at line {}:\nfull:   {:?}\nmerged: {:?}",
            first + 1,
            a.lines().nth(first),
            b.lines().nth(first)
        );
    }
    let value: serde_json::Value = serde_json::from_str(&full_text).unwrap();
    let csv = std::fs::read_to_string(merged.join("results.csv")).unwrap();
    assert_eq!(
        csv,
        thinstream_lab::tidy::csv(&value),
        "{file}: merged results.csv is the tidy CSV of the full run"
    );
    assert!(csv.lines().count() > 100, "{csv}");
    value
}

#[test]
fn drop_sweep_as_three_shards_merges_to_the_full_run() {
    // 3 variants x 4 loss positions x 3 repetitions = 36 runs; MTT medians
    // and reductions per point, latency percentiles and CDFs pooled.
    let v = full_equals_merged(
        "shard-003",
        "003-exp-gap.toml",
        &["--points", "9,10,11,12", "--repetitions", "3"],
        3,
    );
    assert_eq!(v["runs"], 36);
    let p = &v["variants"][0]["points"][0];
    assert_eq!(p["mtt_ms"].as_array().map(Vec::len), Some(3), "{p}");
    assert!(v["mtt_reduction"]["er-packet"]["mean"].is_number(), "{v}");
}

#[test]
fn echo_loss_sweep_as_more_shards_than_some_have_runs_merges_to_the_full_run() {
    // Echo responses, the 001 model per point, several latency kinds; 7
    // shards of 2 variants x 3 points = 6 runs, so one shard is empty.
    let v = full_equals_merged(
        "shard-001",
        "001-hol-loss.toml",
        &[
            "--duration",
            "20s",
            "--drain",
            "5s",
            "--points",
            "0%,2%,5%",
            "--variants",
            "sctp-4-streams,tcp-1-connection",
        ],
        7,
    );
    assert_eq!(v["runs"], 6);
    assert!(
        v["variants"][0]["points"][1]["responses"]["response_ms"]["p99"].is_number(),
        "{}",
        v["variants"][0]["points"][1]
    );
}

#[test]
fn bad_shard_specifications_and_shard_sets_are_clear_errors() {
    let s = scenario("003-exp-gap.toml");
    let s = s.to_str().unwrap();
    for (spec, says) in [
        ("3/2", "i must be below n"),
        ("2/2", "i must be below n"),
        ("1/0", "shard count must be"),
        ("x/3", "not a shard number"),
        ("3", "not of the form i/n"),
    ] {
        let (code, _, err) = thinstream(&["run", s, "--shard", spec]);
        assert_eq!(code, 2, "--shard {spec}: {err}");
        assert!(err.contains(says), "--shard {spec}: {err}");
    }

    let dir = common::tempdir("shard-bad");
    let opts = ["--points", "9", "--repetitions", "2", "--duration", "3s"];
    let shard = |name: &str, spec: &str, extra: &[&str]| -> String {
        let d = dir.join(name);
        let mut args = vec![
            "run",
            s,
            "--quiet",
            "--shard",
            spec,
            "--out",
            d.to_str().unwrap(),
        ];
        args.extend_from_slice(&opts);
        args.extend_from_slice(extra);
        ok(&args);
        d.to_str().unwrap().to_string()
    };
    let a0 = shard("a0", "0/2", &[]);
    let a1 = shard("a1", "1/2", &[]);
    let other_seed = shard("b1", "1/2", &["--seed", "99"]);
    let three = shard("c1", "1/3", &[]);
    let out = dir.join("merged");
    let out = out.to_str().unwrap();
    for (shards, says) in [
        (vec![a0.as_str()], "1 of 2 shard(s) missing: 1/2"),
        (
            vec![a0.as_str(), a1.as_str(), a1.as_str()],
            "shard 1/2 given twice",
        ),
        (
            vec![a0.as_str(), other_seed.as_str()],
            "shards of different plans",
        ),
        (vec![a0.as_str(), three.as_str()], "the shard counts differ"),
        (vec![a0.as_str(), s], "is not a shard directory"),
    ] {
        let mut args = vec!["merge", "--out", out];
        args.extend(shards.iter().copied());
        let (code, _, err) = thinstream(&args);
        assert_eq!(code, 2, "{shards:?}: {err}");
        assert!(err.contains(says), "{shards:?}: {err}");
    }
    ok(&["merge", "--quiet", "--out", out, &a1, &a0]);
    assert!(Path::new(out).join("results.json").is_file());
}

#[test]
fn dumbbell_throughput_sweep_as_four_shards_merges_to_the_full_run() {
    // Throughput per interval and Jain's index per point, bottleneck drop
    // rate and utilisation: 2 variants x 6 points = 12 runs.
    let v = full_equals_merged(
        "shard-000",
        "000-fig12-sctp-fairness.toml",
        &["--duration", "15s", "--drain", "2s"],
        4,
    );
    assert_eq!(v["runs"], 12);
    let t = &v["variants"][0]["points"][0]["throughput"][0];
    assert!(t["aggregate_kbps_mean"].is_number(), "{t}");
    assert!(
        v["variants"][0]["bottleneck"]["forward"]["utilisation"].is_number(),
        "{}",
        v["variants"][0]["bottleneck"]
    );
}

#[test]
fn streamed_long_thin_stream_past_the_sample_limit_as_two_shards_merges_to_the_full_run() {
    // 5 simulated hours of 250-ms messages: 72 000 per flow, past the
    // streamed runs' 65 536 exact samples, so each run's digest carries
    // histograms (through the record JSON of runs.parquet).
    let v = full_equals_merged(
        "shard-stream",
        "../bench/thin-long.toml",
        &["--duration", "5h"],
        2,
    );
    assert_eq!(v["runs"], 3);
    for variant in v["variants"].as_array().unwrap() {
        assert_eq!(variant["messages"], 72_000, "{variant}");
        assert!(variant["latency_ms"]["p99"].is_number(), "{variant}");
    }
}
