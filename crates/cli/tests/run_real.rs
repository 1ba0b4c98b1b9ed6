//! `thinstream run FILE --real`: a tiny two-host scenario (20 s, two
//! variants, 5 % loss each way) on real sockets, each run in its own
//! network namespace, against the same scenario in the simulator; several
//! flows between the two hosts and an echo peer, each against the
//! simulator; and what --real refuses. The real runs need root and `unshare`; without them the
//! test prints SKIPPED, and with THINSTREAM_REQUIRE_INTEROP=1 (CI) it fails
//! instead. The refusals need neither.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// A two-host test scenario: its name, length, seed and link (each way),
/// then `body` ([[flows]] and [[variants]]); application latency above the
/// minimum one-way delay.
fn two_host(name: &str, duration: &str, seed: u32, link: &str, body: &str) -> String {
    format!(
        r#"
name = "{name}"
description = "a test scenario for --real"
source = "test"
duration = "{duration}"
drain = "30s"
seed = {seed}
repetitions = 1

[topology]
kind = "two-host"
forward = "{link}"
reverse = "{link}"
{body}
[metrics]
latency = "application"
owd = "min-observed"
"#
    )
}

/// A thin stream through 5% loss each way, two variants.
fn tiny() -> String {
    two_host(
        "real-tiny",
        "20s",
        7,
        "delay 20ms loss 5%",
        r#"
[[flows]]
transport = "sctp"
workload = { kind = "constant", iat = "50ms", bytes = 100 }
peer = "sink"

[[variants]]
name = "lksctp"
preset = "linux"
overrides = { delayed_sack = false }

[[variants]]
name = "all-mods"
preset = "thin"
overrides = { delayed_sack = false }
"#,
    ) + "also = [\"ack\"]\n"
}

/// Three flows between the two hosts: one thin stream, and a
/// `[[flows]]` entry of two more starting 0.5 s apart, all through the
/// same two links.
fn two_flows() -> String {
    two_host(
        "real-two-flows",
        "15s",
        7,
        "delay 20ms loss 5%",
        r#"
[[flows]]
transport = "sctp"
workload = { kind = "constant", iat = "50ms", bytes = 100 }
peer = "sink"

[[flows]]
transport = "sctp"
count = 2
start_spread = "1s"
workload = { kind = "constant", iat = "100ms", bytes = 200 }
peer = "sink"

[[variants]]
name = "all-mods"
preset = "thin"
overrides = { delayed_sack = false }
"#,
    )
}

/// Request/response over an echo peer, requests round robin over four
/// streams (001-hol-echo's setting, shorter and lossier).
fn echo() -> String {
    two_host(
        "real-echo",
        "15s",
        11,
        "delay 10ms loss 3%",
        r#"
[[flows]]
workload = { kind = "echo", bytes = 100, mean-iat = "20ms", streams = 4 }
peer = "echo"

[[variants]]
name = "sctp-4-streams"
preset = "rfc"
overrides = { delayed_sack = false }
"#,
    )
}

/// Whether real runs can be made here; prints SKIPPED (or fails under
/// THINSTREAM_REQUIRE_INTEROP=1) when not.
fn real_runs_possible(test: &str) -> bool {
    let Some(why) = common::netns_unavailable() else {
        return true;
    };
    if std::env::var("THINSTREAM_REQUIRE_INTEROP").as_deref() == Ok("1") {
        panic!("--real prerequisite missing: {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
    false
}

/// Runs `text` (a scenario) with --real (bounded to 300 s) and in the
/// simulator; returns the directory and both results.json.
fn real_and_sim(name: &str, text: &str) -> (std::path::PathBuf, Value, Value) {
    let dir = common::tempdir(name);
    let scenario = dir.join("scenario.toml");
    std::fs::write(&scenario, text).unwrap();
    let scenario = scenario.to_str().unwrap();
    let real_dir = dir.join("real");
    let sim_dir = dir.join("sim");
    let (code, text) = Command::new("timeout")
        .args([
            "300",
            common::thinstream(),
            "run",
            scenario,
            "--real",
            "--out",
        ])
        .arg(&real_dir)
        .output()
        .map(|o| {
            (
                o.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&o.stderr).to_string()
                    + &String::from_utf8_lossy(&o.stdout),
            )
        })
        .expect("binary runs");
    assert_eq!(code, 0, "{text}");
    let (code, text) = run(&[
        "run",
        scenario,
        "--quiet",
        "--out",
        sim_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{text}");
    let real = read(&real_dir.join("results.json"));
    let sim = read(&sim_dir.join("results.json"));
    assert_eq!(real["mode"], "real");
    (dir, real, sim)
}

fn run(args: &[&str]) -> (i32, String) {
    common::run_cli(args)
}

fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("results.json is JSON")
}

/// Every key path of `v` (array elements share `[]`), leaving out `skip`.
fn key_paths(v: &Value, at: &str, skip: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{at}/{k}");
                if p == skip {
                    continue;
                }
                out.insert(p.clone());
                key_paths(x, &p, skip, out);
            }
        }
        Value::Array(xs) => {
            for x in xs {
                key_paths(x, &format!("{at}[]"), skip, out);
            }
        }
        _ => {}
    }
}

#[test]
fn a_real_run_delivers_every_message_and_writes_the_simulators_results_shape() {
    if !real_runs_possible("a_real_run_...") {
        return;
    }
    let (dir, real, sim) = real_and_sim("run-real", &tiny());
    let (real_dir, sim_dir) = (dir.join("real"), dir.join("sim"));
    assert_eq!(sim["mode"], "simulated");
    assert!(sim["real"].is_null());
    // Same structure: every key of one is a key of the other (the `real`
    // section is null in the simulator's).
    let (mut kr, mut ks) = (BTreeSet::new(), BTreeSet::new());
    key_paths(&real, "", "/real", &mut kr);
    key_paths(&sim, "", "/real", &mut ks);
    assert_eq!(
        kr, ks,
        "results.json keys differ between real and simulated"
    );

    // 20 s of one message every 50 ms.
    let expected = 400u64;
    let variants = real["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2);
    for v in variants {
        let name = v["name"].as_str().unwrap();
        assert_eq!(v["messages"].as_u64(), Some(expected), "{name}");
        assert_eq!(v["delivered"].as_u64(), Some(expected), "{name}");
        // The worker's own checks (each message once, in order, intact,
        // the association's message ids) land in `faults`.
        assert_eq!(v["faults"].as_array().map(Vec::len), Some(0), "{name}: {v}");
        assert!(
            v["events"].is_null(),
            "{name}: events are not measured for real"
        );
        // The loss happened, and was recovered from.
        let retransmitted: u64 = v["by_retransmissions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["retransmissions"].as_u64() > Some(0))
            .map(|r| r["count"].as_u64().unwrap())
            .sum();
        assert!(
            retransmitted > 0,
            "{name}: no message needed a retransmission"
        );
    }
    let runs = real["real"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        assert_eq!(r["messages"].as_u64(), Some(expected), "{r}");
        assert_eq!(r["received"].as_u64(), Some(expected), "{r}");
        for d in ["forward", "reverse"] {
            let stats = &r["emulator"][d]["link_stats"];
            assert!(
                stats["drops"]["loss_model"]["packets"].as_u64() > Some(0),
                "{d}: the emulator lost nothing: {stats}"
            );
        }
    }
    assert!(real["real"]["not_measured"]["variants[].events"].is_string());

    // The comparison of the two writes a row per retransmission number.
    let md = dir.join("compare.md");
    let (code, text) = run(&[
        "compare",
        sim_dir.to_str().unwrap(),
        real_dir.to_str().unwrap(),
        "--out",
        md.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{text}");
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("| application | 1 |"), "{md}");
    assert!(md.contains("### all-mods"), "{md}");
}

/// Every variant's messages and deliveries, real and simulated: the same
/// schedules (same counts), everything delivered, no fault.
fn delivered_everything(real: &Value, sim: &Value) {
    let (rv, sv) = (
        real["variants"].as_array().unwrap(),
        sim["variants"].as_array().unwrap(),
    );
    assert_eq!(rv.len(), sv.len());
    for (r, s) in rv.iter().zip(sv) {
        let name = r["name"].as_str().unwrap();
        assert!(r["messages"].as_u64() > Some(0), "{name}");
        assert_eq!(r["messages"], s["messages"], "{name}: real vs simulated");
        assert_eq!(r["delivered"], r["messages"], "{name}");
        assert_eq!(r["faults"].as_array().map(Vec::len), Some(0), "{name}: {r}");
    }
}

/// `text` run for real and simulated (`None`: real runs cannot be made
/// here), each delivering everything.
fn delivered_real_and_sim(test: &str, text: &str) -> Option<(Value, Value)> {
    if !real_runs_possible(test) {
        return None;
    }
    let (_dir, real, sim) = real_and_sim(&format!("run-real-{}", &test[..8]), text);
    delivered_everything(&real, &sim);
    Some((real, sim))
}

/// The row of `v`'s `by_retransmissions` for `k` retransmissions.
fn by_rtx(v: &Value, k: u64) -> &Value {
    v["by_retransmissions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["retransmissions"].as_u64() == Some(k))
        .unwrap_or_else(|| panic!("no row for {k} retransmissions: {v}"))
}

#[test]
fn several_flows_between_the_two_hosts_run_real_and_match_the_simulator() {
    let Some((real, sim)) = delivered_real_and_sim("several_flows_...", &two_flows()) else {
        return;
    };
    // 15 s of one message every 50 ms, and two flows of one every 100 ms
    // starting 0 s and 0.5 s after it: the simulator's schedules, each
    // message counted once.
    let v = &real["variants"][0];
    let messages = v["messages"].as_u64().unwrap();
    assert!((590..=600).contains(&messages), "{messages}");
    let run = &real["real"]["runs"][0];
    assert_eq!(run["flows"].as_u64(), Some(3), "{run}");
    assert_eq!(run["messages"].as_u64(), Some(messages));
    assert_eq!(run["received"].as_u64(), Some(messages));
    // One association per flow, all on the scenario's two links.
    let clients = run["emulator"]["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 3, "{run}");
    assert!(clients.iter().all(|c| c["links"] == 0), "{run}");
    assert!(
        run["emulator"]["forward"]["link_stats"]["drops"]["loss_model"]["packets"].as_u64()
            > Some(0)
    );
    // Real against simulated (latency above the minimum one-way delay), on
    // the messages that needed no retransmission (over 500 of them on both
    // sides): their medians agree within 2 ms. Not their means: a message
    // sent once still waits for an earlier one being retransmitted
    // (ordered delivery), so that row's mean moves with which packets the
    // link happens to lose (same link seeds, but the n-th datagram into a
    // link is not always the same one), as the retransmitted rows do: five
    // real runs of this scenario gave 5.1, 5.6, 7.2, 14.4 and 20.0 ms
    // against the simulator's 6.0. Most messages wait for nothing, so the
    // median is the one-way delay the emulator added and the time the
    // hosts took, which is what this compares. The retransmitted rows come
    // in steps of whole retransmission timeouts (1 retransmission: 146 vs
    // 98 ms seen); the 10-minute comparison in the report judges those.
    let s = &sim["variants"][0];
    let (r, m) = (by_rtx(v, 0), by_rtx(s, 0));
    assert!(r["count"].as_u64() > Some(500), "{v}");
    assert!(m["count"].as_u64() > Some(500), "{s}");
    let (a, b) = (r["p50_ms"].as_f64().unwrap(), m["p50_ms"].as_f64().unwrap());
    // On failure, the host's timing during the run: the emulator's release
    // error per direction and how late the sending applications woke.
    assert!(
        (a - b).abs() <= 2.0,
        "0 retransmissions: real median {a:.2} ms vs simulated {b:.2} ms; release error forward {}, \
         reverse {}; application wake-up lateness (us: p50, p99, max) {}",
        run["emulator"]["forward"]["release_error"],
        run["emulator"]["reverse"]["release_error"],
        run["app_wake_late_us"]
    );
}

#[test]
fn an_echo_peer_runs_real_and_its_response_times_match_the_simulator() {
    let Some((real, sim)) = delivered_real_and_sim("an_echo_peer_...", &echo()) else {
        return;
    };
    let v = &real["variants"][0];
    let messages = v["messages"].as_u64().unwrap();
    // Every request answered, the echoes checked by the client.
    let responses = &v["responses"];
    assert_eq!(
        responses["requests"].as_u64(),
        Some(messages),
        "{responses}"
    );
    assert_eq!(
        responses["answered"].as_u64(),
        Some(messages),
        "{responses}"
    );
    let run = &real["real"]["runs"][0];
    assert_eq!(run["echoes"].as_u64(), Some(messages), "{run}");
    assert_eq!(run["received"].as_u64(), Some(messages), "{run}");
    // Response time, request sent -> echo delivered at the client: an
    // unhurt request takes one round trip (20 ms), in both. The tail of a
    // 15 s run is a handful of losses (and with RTO.min 1 s, whether one
    // timed out), so only the median is compared: within 2 ms.
    let s = &sim["variants"][0]["responses"];
    let (a, b) = (
        responses["response_ms"]["p50"].as_f64().unwrap(),
        s["response_ms"]["p50"].as_f64().unwrap(),
    );
    assert!(
        (a - b).abs() <= 2.0,
        "median response: real {a:.2} ms vs simulated {b:.2} ms"
    );
    assert!(
        (20.0..25.0).contains(&a),
        "median response {a:.2} ms, one RTT is 20 ms"
    );
}

/// A TCP thin stream through 5 % loss each way: the host kernel's TCP
/// for real, the `linux-modern` model in the simulator.
fn tcp() -> String {
    two_host(
        "real-tcp",
        "20s",
        7,
        "delay 20ms loss 5%",
        r#"
[[flows]]
transport = "tcp"
workload = { kind = "constant", iat = "50ms", bytes = 100 }
peer = "sink"

[[variants]]
name = "linux-modern"
transport = "tcp"
preset = "linux-modern"

[[variants]]
name = "linux-modern+lt"
transport = "tcp"
preset = "linux-modern+lt"
"#,
    )
}

#[test]
fn a_tcp_variant_runs_on_the_kernel_between_two_namespaces_and_matches_the_simulator() {
    let test = "a_tcp_variant_...";
    if !std::path::Path::new("/dev/net/tun").exists() {
        let why = "no /dev/net/tun";
        if std::env::var("THINSTREAM_REQUIRE_INTEROP").as_deref() == Ok("1") {
            panic!("--real prerequisite missing: {why}");
        }
        eprintln!("SKIPPED {test}: {why}");
        return;
    }
    let before = namespaces();
    let Some((real, sim)) = delivered_real_and_sim(test, &tcp()) else {
        return;
    };
    // The same shape as the simulator's results.
    let (mut kr, mut ks) = (BTreeSet::new(), BTreeSet::new());
    key_paths(&real, "", "/real", &mut kr);
    key_paths(&sim, "", "/real", &mut ks);
    assert_eq!(
        kr, ks,
        "results.json keys differ between real and simulated"
    );
    // 20 s of one message every 50 ms, each read back intact by the
    // receiving application (the worker's checks land in `faults`).
    for (k, v) in real["variants"].as_array().unwrap().iter().enumerate() {
        let name = v["name"].as_str().unwrap();
        assert_eq!(v["messages"].as_u64(), Some(400), "{name}");
        // The losses were recovered from, and the capture saw the resends.
        let retransmitted: u64 = v["by_retransmissions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["retransmissions"].as_u64() > Some(0))
            .map(|r| r["count"].as_u64().unwrap())
            .sum();
        assert!(
            retransmitted > 0,
            "{name}: no message needed a retransmission"
        );
        let run = &real["real"]["runs"][k];
        assert_eq!(run["variant"], v["name"]);
        let kernel = &run["kernel_tcp"];
        assert_eq!(kernel["settings"]["congestion"], "reno", "{kernel}");
        assert_eq!(
            kernel["settings"]["thin_linear_timeouts"].as_bool(),
            Some(name.ends_with("+lt")),
            "{kernel}"
        );
        let resends = kernel["retransmissions_on_ack"].as_u64().unwrap()
            + kernel["retransmissions_by_timer"].as_u64().unwrap();
        assert!(resends > 0, "{kernel}");
        assert!(
            run["emulator"]["forward"]["link_stats"]["drops"]["loss_model"]["packets"].as_u64()
                > Some(0),
            "{run}"
        );
        // Against the simulator's linux-modern: the median message (not
        // held up by a loss) within 3 ms, and about as many messages
        // retransmitted. Means and tails are not judged in a 20-s run: a
        // TCP stream's latency there is dominated by the one or two loss
        // bursts it happens to meet (the same link seeds drop the n-th
        // packet, and the kernel's n-th packet is not the model's: one run
        // seen here met four losses in a row and stalled for 800 ms). The
        // 10-minute comparison judges those.
        let s = &sim["variants"][k];
        let (a, b) = (
            v["latency_ms"]["p50"].as_f64().unwrap(),
            s["latency_ms"]["p50"].as_f64().unwrap(),
        );
        assert!(
            (a - b).abs() <= 3.0,
            "{name}: median latency real {a:.2} ms vs simulated {b:.2} ms"
        );
        let sim_retransmitted: u64 = s["by_retransmissions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["retransmissions"].as_u64() > Some(0))
            .map(|r| r["count"].as_u64().unwrap())
            .sum();
        let ratio = retransmitted as f64 / sim_retransmitted.max(1) as f64;
        assert!(
            (0.4..=2.5).contains(&ratio),
            "{name}: {retransmitted} messages retransmitted for real, {sim_retransmitted} simulated"
        );
    }
    let not_measured = &real["real"]["not_measured"];
    assert!(
        not_measured["variants[].reasons (TCP variants)"].is_string(),
        "{not_measured}"
    );
    // Nothing left behind: the runs' namespaces are gone.
    let left: Vec<String> = namespaces()
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
}

/// The named network namespaces of the emulator (`ts-*`).
fn namespaces() -> BTreeSet<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with("ts-"))
                .collect()
        })
        .unwrap_or_default()
}

fn seed(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/seeds")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn real_refuses_what_it_cannot_run() {
    let dir = common::tempdir("run-real-refusals");
    let out = dir.to_str().unwrap();
    let tcp_flow = dir.join("tcp-flow.toml");
    std::fs::write(
        &tcp_flow,
        two_flows().replace(
            "transport = \"sctp\"\ncount = 2",
            "transport = \"tcp\"\npreset = \"linux-modern\"\ncount = 2",
        ),
    )
    .unwrap();
    let mixed = dir.join("mixed.toml");
    std::fs::write(
        &mixed,
        format!(
            "{}\n[[flows]]\nworkload = {{ kind = \"constant\", iat = \"100ms\", bytes = 200 }}\npeer = \"sink\"\n",
            echo()
        ),
    )
    .unwrap();
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let tcp_echo = dir.join("tcp-echo.toml");
    std::fs::write(
        &tcp_echo,
        two_host(
            "real-tcp-echo",
            "15s",
            11,
            "delay 10ms loss 3%",
            r#"
[[flows]]
workload = { kind = "echo", bytes = 100, mean-iat = "20ms" }
peer = "echo"

[[variants]]
name = "tcp"
transport = "tcp"
preset = "linux-modern"
"#,
        ),
    )
    .unwrap();
    let cases: [(Vec<String>, &str); 8] = [
        (
            vec![seed("000-fig12-sctp-fairness.toml")],
            "two-host scenarios only",
        ),
        // Its TCP variant models a 2007 kernel: the host's TCP is not that.
        (
            vec![seed("000-fig8-uniform.toml")],
            "is TCP \"linux-2.6.23\", which runs on the host kernel's TCP",
        ),
        (
            vec![
                seed("000-fig8-uniform.toml"),
                "--variants".into(),
                "lksctp".into(),
            ],
            "--allow-long",
        ),
        (vec![seed("003-exp-gap.toml")], "drop-data-packet"),
        (vec![path(&tcp_flow)], "mixes SCTP and TCP flows"),
        (vec![path(&tcp_echo)], "TCP with an echo peer"),
        (vec![path(&mixed)], "mixes echo and sink peers"),
        (
            vec![
                seed("000-fig8-uniform.toml"),
                "--shard".into(),
                "0/2".into(),
            ],
            "--shard",
        ),
    ];
    for (args, expect) in cases {
        let mut all: Vec<&str> = vec!["run", "--real", "--out", out];
        all.extend(args.iter().map(String::as_str));
        let (code, text) = run(&all);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(
            text.contains(expect),
            "{args:?}: expected {expect:?} in {text}"
        );
        assert!(!text.contains("panicked"), "{text}");
    }
    // --allow-long only with --real.
    let (code, text) = run(&["run", &seed("000-fig8-uniform.toml"), "--allow-long"]);
    assert_eq!(code, 2, "{text}");
    // compare: a missing file.
    let (code, text) = run(&["compare", "/nonexistent/a.json", "/nonexistent/b.json"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("cannot read"), "{text}");
}
