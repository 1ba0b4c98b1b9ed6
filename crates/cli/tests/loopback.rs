//! Our `send` against our `listen` on 127.0.0.1 (real sockets).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn thinstream() -> Command {
    Command::new(env!("CARGO_BIN_EXE_thinstream"))
}

/// A listener on a free loopback port; killed on drop.
struct Listener(Child, u16);

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free loopback port, for a listener to bind.
fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn listener(extra: &[&str]) -> Listener {
    let port = free_port();
    let child = thinstream()
        .args(["listen", "--bind", &format!("127.0.0.1:{port}"), "--echo"])
        .args(extra)
        .stderr(Stdio::null())
        .spawn()
        .expect("listener starts");
    std::thread::sleep(Duration::from_millis(300));
    Listener(child, port)
}

fn send_json(port: u16, args: &[&str]) -> serde_json::Value {
    let dir =
        std::env::temp_dir().join(format!("thinstream-loopback-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("send.json");
    let out = thinstream()
        .args([
            "send",
            "--to",
            &format!("127.0.0.1:{port}"),
            "--quiet",
            "--json",
        ])
        .arg(&json)
        .args(args)
        .output()
        .expect("send runs");
    assert!(
        out.status.success(),
        "send failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// [recovery] point 7 on real sockets: messages of 1..4000 bytes (one to
/// three packets) every 20 ms; no message may wait for the receiver's
/// 200 ms delayed-SACK timer, so every round trip stays far below it.
#[test]
fn message_sizes_1_to_4000_never_wait_for_a_delayed_sack() {
    let l = listener(&[]);
    let r = send_json(
        l.1,
        &[
            "--count",
            "150",
            "--size",
            "1..4000",
            "--interval",
            "20ms",
            "--expect-echo",
            "--seed",
            "5",
        ],
    );
    assert_eq!(r["echoed"], 150, "{r}");
    let max = r["latency_ms"]["max"].as_f64().unwrap();
    let p99 = r["latency_ms"]["p99"].as_f64().unwrap();
    // Loopback round trips take well under a millisecond; a delayed SACK
    // holding new data would add up to 200 ms.
    assert!(max < 50.0 && p99 < 20.0, "p99 {p99} ms, max {max} ms: {r}");
    assert_eq!(r["retransmissions"], 0, "{r}");
}

/// Counters are read at the association's end: a run that closed still
/// reports what it sent (they used to read 0).
#[test]
fn the_report_carries_the_association_counters() {
    let l = listener(&[]);
    let r = send_json(
        l.1,
        &["--count", "20", "--interval", "2ms", "--expect-echo"],
    );
    assert_eq!(r["stats"]["messages_sent"], 20, "{r}");
    assert!(r["stats"]["packets_sent"].as_u64().unwrap() >= 20, "{r}");
    assert!(r["stats"]["srtt_ms"].as_f64().is_some(), "{r}");
    assert!(r["association_error"].is_null(), "{r}");
}

/// Bulk mode describes its longest wait between two sends: a listener
/// stopped (SIGSTOP) for 300 ms stops acknowledging, the sender's send
/// buffer fills, and the report's `longest_stall` holds the sampled state
/// of that wait: samples kept coming (the sender ran) while no SACK came.
#[test]
fn a_bulk_report_describes_its_longest_stall() {
    let port = free_port();
    let child = thinstream()
        .args([
            "listen",
            "--bind",
            &format!("127.0.0.1:{port}"),
            "--discard",
        ])
        .stderr(Stdio::null())
        .spawn()
        .expect("listener starts");
    std::thread::sleep(Duration::from_millis(300));
    let l = Listener(child, port);
    let pid = l.0.id().to_string();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(800));
        let signal = |s: &str| {
            let ok = Command::new("kill")
                .args([s, &pid])
                .status()
                .is_ok_and(|st| st.success());
            assert!(ok, "kill {s} {pid}");
        };
        signal("-STOP");
        std::thread::sleep(Duration::from_millis(300));
        signal("-CONT");
    });
    let r = send_json(
        l.1,
        &[
            "--bulk",
            "--duration",
            "2s",
            "--count",
            "1000000000",
            "--size",
            "1200",
        ],
    );
    stopper.join().unwrap();
    let gap = r["max_send_gap_ms"].as_f64().unwrap();
    assert!(gap >= 250.0, "longest gap {gap} ms: {r}");
    let stall = &r["longest_stall"];
    assert_eq!(stall["ms"].as_f64(), Some(gap), "{r}");
    let samples = stall["samples"].as_array().unwrap();
    // Some two samples 150 ms or more apart with no SACK between them.
    let quiet = samples.iter().any(|a| {
        samples.iter().any(|b| {
            b["at_s"].as_f64().unwrap() - a["at_s"].as_f64().unwrap() >= 0.15
                && b["sacks_received"] == a["sacks_received"]
        })
    });
    assert!(quiet, "no quiet stretch in {stall}");
    // The sampler ran through the wait (10 ms apart; a loaded machine may
    // delay a few).
    let times: Vec<f64> = samples
        .iter()
        .map(|s| s["at_s"].as_f64().unwrap())
        .collect();
    assert!(times.len() >= 10, "{stall}");
    assert!(times.windows(2).all(|w| w[1] - w[0] < 0.15), "{stall}");
}
