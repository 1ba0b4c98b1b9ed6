//! Interop with pion/sctp v1.11.3 (Go), the SCTP stack of pion's WebRTC
//! data channels, in both directions, over UDP encapsulation (RFC 6951) on
//! 127.0.0.1.
//!
//! The peer is `pionpeer` (interop/pion, built by scripts/setup into
//! target/interop/pionpeer, or wherever THINSTREAM_PIONPEER points): a pion
//! association over a UDP socket, as a `server` that echoes and a `client`
//! that sends indexed messages and checks every echo. pion uses SCTP port
//! 5000 on both sides, as our CLI does by default.
//!
//! Every case runs in a private network namespace with only `lo` up
//! (`unshare -n`). Needs root, `unshare` and pionpeer; without them the
//! tests print SKIPPED, and with THINSTREAM_REQUIRE_INTEROP=1 (set by CI)
//! they fail instead.

mod common;

use std::path::PathBuf;
use std::process::Command;

fn pionpeer() -> PathBuf {
    match std::env::var_os("THINSTREAM_PIONPEER") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/interop/pionpeer"),
    }
}

/// `Some(reason)` if pionpeer is missing.
fn missing_prerequisite() -> Option<String> {
    let p = pionpeer();
    (!p.is_file()).then(|| {
        format!(
            "{} not found (scripts/setup builds it when `go` is installed; or set THINSTREAM_PIONPEER)",
            p.display()
        )
    })
}

/// Runs `script` in a private network namespace with `$TS` (our CLI) and
/// `$P` (pionpeer) set.
fn in_netns(name: &str, script: &str) -> Option<String> {
    let prelude = format!("P={}", pionpeer().display());
    common::in_netns(name, missing_prerequisite(), &prelude, script)
}

fn read_json(path: &std::path::Path, context: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("no report at {}: {e}\n{context}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("bad JSON in {}: {e}\n{text}\n{context}", path.display()))
}

/// One workload: `count` messages of `size` (`N` or `MIN..MAX`) every
/// `interval`, round robin over `streams`.
struct Load {
    count: u64,
    size: &'static str,
    interval: &'static str,
    streams: u16,
    unordered: bool,
}

/// A thin stream: 200 messages of 100 B, one every 5 ms.
const THIN: Load = Load {
    count: 200,
    size: "100",
    interval: "5ms",
    streams: 1,
    unordered: false,
};

/// Sizes 1..4000 B (so messages are fragmented), 500 messages 1 ms apart
/// over 3 streams.
const VARIED: Load = Load {
    count: 500,
    size: "1..4000",
    interval: "1ms",
    streams: 3,
    unordered: false,
};

/// Back to back: 3000 messages of 1..8000 B over 4 streams, as fast as
/// the sender can go (pion queues all of them at once; its send queue is
/// unbounded), so every buffer on both sides fills.
const BULK: Load = Load {
    count: 3000,
    size: "1..8000",
    interval: "0",
    streams: 4,
    unordered: false,
};

fn unordered(l: Load) -> Load {
    Load {
        unordered: true,
        ..l
    }
}

/// Our `send --expect-echo` against pion's echo server. Checks both reports:
/// every message echoed once with its content and per-stream order, pion
/// counted exactly what we sent, our SHUTDOWN ended pion's association.
/// With `capture`, also checks the packets on `lo` (see `check_capture`).
fn send_to_pion_echo(name: &str, load: Load, preset: &str, capture: bool) {
    let dir = tempdir();
    let ours = dir.join("send.json");
    let theirs = dir.join("pion.json");
    let pcap = dir.join("cap.pcap");
    let (flag, pion_flag) = if load.unordered {
        ("--unordered", "--unordered")
    } else {
        ("", "")
    };
    let (cap_start, cap_stop) = if capture {
        (
            format!(
                // Wait until tcpdump has written its file header (it is
                // capturing), however loaded the machine is.
                "tcpdump -i lo -U -w {p} udp > /dev/null 2>&1 &\nCAP=$!\n\
                 for i in $(seq 100); do [ -s {p} ] && break; sleep 0.05; done\nsleep 0.2",
                p = pcap.display()
            ),
            "sleep 1; kill $CAP; wait $CAP 2>/dev/null".to_string(),
        )
    } else {
        (String::new(), String::new())
    };
    let script = format!(
        r#"
{cap_start}
$P server --listen 127.0.0.1:9899 --mode echo {pion_flag} --deadline 60s > {theirs} 2> {d}/pion.log &
SRV=$!
sleep 0.3
$TS send --to 127.0.0.1:9899 --sctp-port 5000 --local-sctp-port 5000 --count {n} --size {size} \
    --interval {iv} --streams {k} {flag} --expect-echo --seed 11 --preset {preset} \
    --no-gso --json {ours} --quiet
status=$?
wait $SRV
pion=$?
{cap_stop}
echo "send exit $status, pion server exit $pion"
cat {d}/pion.log
[ $status -eq 0 ] && [ $pion -eq 0 ]
"#,
        d = dir.display(),
        theirs = theirs.display(),
        ours = ours.display(),
        n = load.count,
        size = load.size,
        iv = load.interval,
        k = load.streams,
    );
    let Some(out) = in_netns(name, &script) else {
        return;
    };
    let r = read_json(&ours, &out);
    let p = read_json(&theirs, &out);
    let both = format!("ours: {r:#}\npion: {p:#}\n{out}");
    let n = load.count;
    assert_eq!(r["sent"], n, "{both}");
    assert_eq!(r["echoed"], n, "{both}");
    assert_eq!(r["corrupted"], 0, "{both}");
    assert_eq!(r["out_of_order"], 0, "{both}");
    assert_eq!(r["lost"], 0, "{both}");
    assert!(r["association_error"].is_null(), "{both}");
    assert_eq!(p["messages"], n, "{both}");
    assert_eq!(p["echoed"], n, "{both}");
    assert_eq!(p["bytes"], r["bytes_sent"], "{both}");
    assert_eq!(p["streams"], u64::from(load.streams).min(n), "{both}");
    assert!(p.get("error").is_none(), "{both}");
    eprintln!(
        "{name}: {n} echoed by pion, RTT ms p50 {} p99 {} max {}, {} retransmissions",
        r["latency_ms"]["p50"],
        r["latency_ms"]["p99"],
        r["latency_ms"]["max"],
        r["retransmissions"]
    );
    if capture {
        // The production preset offers I-DATA, and pion accepts it.
        check_capture(&pcap, n, preset.starts_with("production"));
    }
}

/// Everything on the wire: loopback only, SCTP ports 5000/5000, every
/// CRC32c correct, no ABORT or ERROR chunk, no address parameter (5, 6)
/// and no Supported Address Types (12, which pion v1.11.3 answers by
/// dropping the INIT) in our INIT, and the graceful end: SHUTDOWN,
/// SHUTDOWN ACK, SHUTDOWN COMPLETE. Only for thin streams: on `lo` a
/// capture shows a batch sent with UDP GSO as one datagram holding several
/// SCTP packets, which tshark decodes as one packet with a bad checksum.
fn check_capture(pcap: &std::path::Path, messages: u64, interleaved: bool) {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-o", "sctp.checksum:CRC-32C", "-d", "udp.port==9899,sctp"])
        .args(["-T", "fields", "-E", "separator=/t"])
        .args(["-e", "ip.dst", "-e", "sctp.srcport", "-e", "sctp.dstport"])
        .args(["-e", "sctp.checksum.status", "-e", "sctp.chunk_type"])
        .args(["-e", "sctp.parameter_type"])
        .output()
        .expect("tshark runs (apt-get install tshark)");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut chunks: std::collections::BTreeMap<u32, u64> = Default::default();
    for l in text.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        assert!(f.len() >= 5, "unexpected tshark line: {l}\n{text}");
        assert_eq!(f[0], "127.0.0.1", "packet leaves loopback: {l}");
        assert_eq!((f[1], f[2]), ("5000", "5000"), "SCTP ports: {l}");
        assert_eq!(f[3], "1", "bad CRC32c (1 = good): {l}");
        for c in f[4].split(',') {
            let c: u32 = c
                .parse()
                .unwrap_or_else(|_| panic!("chunk type {c:?}: {l}"));
            *chunks.entry(c).or_default() += 1;
        }
        let params = f.get(5).copied().unwrap_or("");
        assert!(
            !params.split(',').any(|p| matches!(p, "5" | "6" | "12")),
            "an INIT/INIT ACK carried an address or address-type parameter: {l}"
        );
    }
    let count = |t: u32| chunks.get(&t).copied().unwrap_or(0);
    // DATA 0, INIT 1, INIT ACK 2, ABORT 6, SHUTDOWN 7, SHUTDOWN ACK 8,
    // ERROR 9, COOKIE ECHO 10, COOKIE ACK 11, SHUTDOWN COMPLETE 14,
    // I-DATA 64 (RFC 8260: pion offers it, and so does our production
    // preset, so messages travel as I-DATA then, never as both).
    assert!(
        count(0) + count(64) >= 2 * messages,
        "DATA / I-DATA chunks {chunks:?}"
    );
    assert!(
        count(0) == 0 || count(64) == 0,
        "DATA and I-DATA mixed in one association: {chunks:?}"
    );
    assert_eq!(
        count(64) > 0,
        interleaved,
        "I-DATA expected {interleaved}: {chunks:?}"
    );
    for t in [1, 2, 10, 11, 7, 8, 14] {
        assert!(count(t) >= 1, "no chunk of type {t}: {chunks:?}\n{text}");
    }
    assert_eq!(count(6) + count(9), 0, "ABORT or ERROR seen: {chunks:?}");
}

#[test]
fn our_thin_stream_to_pion_echo_ordered() {
    send_to_pion_echo("thin_ordered", THIN, "production", true);
}

#[test]
fn our_thin_stream_to_pion_echo_unordered() {
    send_to_pion_echo("thin_unordered", unordered(THIN), "production", false);
}

#[test]
fn our_varied_sizes_to_pion_echo_ordered() {
    send_to_pion_echo("varied_ordered", VARIED, "production", false);
}

#[test]
fn our_varied_sizes_to_pion_echo_unordered() {
    send_to_pion_echo("varied_unordered", unordered(VARIED), "production", false);
}

#[test]
fn our_bulk_to_pion_echo() {
    send_to_pion_echo("bulk_to_pion", BULK, "production", false);
}

/// The dissertation's thin-stream set with redundant bundling: pion, an
/// unmodified receiver, still gets each message exactly once. (On a
/// loss-free loopback the mechanisms rarely trigger; the simulator tests pin
/// their behaviour.)
#[test]
fn our_thin_rdb_thin_stream_to_pion_echo() {
    send_to_pion_echo("thin_rdb_thin", THIN, "thin+rdb", true);
}

#[test]
fn our_thin_rdb_varied_sizes_to_pion_echo() {
    send_to_pion_echo("thin_rdb_varied", VARIED, "thin+rdb", false);
}

/// pion's client against our `listen --echo`: pion checks every echo
/// (content, stream, per-stream order, ppid), our listener counts exactly
/// what pion sent and sees a graceful end.
fn pion_client_to_our_listener(name: &str, load: Load, preset: &str) {
    let dir = tempdir();
    let ours = dir.join("listen.json");
    let theirs = dir.join("pion.json");
    let flag = if load.unordered { "--unordered" } else { "" };
    // pion's data-channel "binary" ppid, which our listener echoes back.
    let script = format!(
        r#"
$TS listen --bind 127.0.0.1:9899 --echo --once --preset {preset} --json {ours} 2> {d}/listen.log &
LST=$!
sleep 0.3
$P client --to 127.0.0.1:9899 --count {n} --size {size} --interval {iv} --streams {k} {flag} \
    --ppid 53 --deadline 60s > {theirs} 2> {d}/pion.log
status=$?
wait $LST
listen=$?
echo "pion client exit $status, listen exit $listen"
cat {d}/pion.log {d}/listen.log
[ $status -eq 0 ] && [ $listen -eq 0 ]
"#,
        d = dir.display(),
        theirs = theirs.display(),
        ours = ours.display(),
        n = load.count,
        size = load.size,
        iv = load.interval,
        k = load.streams,
    );
    let Some(out) = in_netns(name, &script) else {
        return;
    };
    let p = read_json(&theirs, &out);
    let l = read_json(&ours, &out);
    let both = format!("pion: {p:#}\nours: {l:#}\n{out}");
    let n = load.count;
    assert_eq!(p["sent"], n, "{both}");
    assert_eq!(p["echoed"], n, "{both}");
    assert_eq!(p["corrupted"], 0, "{both}");
    assert_eq!(p["out_of_order"], 0, "{both}");
    assert_eq!(p["bad_ppid"], 0, "{both}");
    assert!(p.get("error").is_none(), "{both}");
    let a = &l["associations"];
    assert_eq!(a.as_array().map(Vec::len), Some(1), "{both}");
    assert_eq!(a[0]["messages"], n, "{both}");
    assert_eq!(a[0]["echoed"], n, "{both}");
    assert_eq!(a[0]["bytes"], p["bytes_sent"], "{both}");
    assert_eq!(a[0]["restarts"], 0, "{both}");
    assert!(a[0]["error"].is_null(), "{both}");
    eprintln!(
        "{name}: {n} echoed to pion, RTT ms p50 {} p99 {} max {}",
        p["rtt_p50_ms"], p["rtt_p99_ms"], p["rtt_max_ms"]
    );
}

#[test]
fn pion_thin_stream_to_our_listener_ordered() {
    pion_client_to_our_listener("pion_thin_ordered", THIN, "production");
}

#[test]
fn pion_thin_stream_to_our_listener_unordered() {
    pion_client_to_our_listener("pion_thin_unordered", unordered(THIN), "production");
}

#[test]
fn pion_varied_sizes_to_our_listener_ordered() {
    pion_client_to_our_listener("pion_varied_ordered", VARIED, "production");
}

#[test]
fn pion_varied_sizes_to_our_listener_unordered() {
    pion_client_to_our_listener("pion_varied_unordered", unordered(VARIED), "production");
}

/// pion fills our receive queue while our listener waits to send echoes:
/// the send must wake when pion acknowledges, though the listener reads
/// nothing meanwhile (it used to close its window and stall for good).
#[test]
fn pion_bulk_to_our_listener() {
    pion_client_to_our_listener("pion_bulk", BULK, "production");
}

#[test]
fn pion_bulk_unordered_to_our_listener() {
    pion_client_to_our_listener("pion_bulk_unordered", unordered(BULK), "production");
}

#[test]
fn pion_thin_stream_to_our_thin_rdb_listener() {
    pion_client_to_our_listener("pion_thin_to_thin_rdb", THIN, "thin+rdb");
}

#[test]
fn pion_varied_sizes_to_our_thin_rdb_listener() {
    pion_client_to_our_listener("pion_varied_to_thin_rdb", VARIED, "thin+rdb");
}

/// pion sends ppid 53 (WebRTC binary) and expects it back: our listener
/// echoes each message with the ppid it arrived with.
#[test]
fn ppid_round_trips_through_our_listener() {
    let dir = tempdir();
    let theirs = dir.join("pion.json");
    let script = format!(
        r#"
$TS listen --bind 127.0.0.1:9899 --echo --once &
sleep 0.3
# Exits non-zero on a wrong ppid; the report says which check failed.
$P client --to 127.0.0.1:9899 --count 20 --size 100 --interval 1ms --ppid 53 > {theirs}
wait
true
"#,
        theirs = theirs.display()
    );
    let Some(out) = in_netns("ppid_round_trips_through_our_listener", &script) else {
        return;
    };
    let p = read_json(&theirs, &out);
    assert_eq!(p["echoed"], 20, "{p:#}\n{out}");
    assert_eq!(p["bad_ppid"], 0, "{p:#}\n{out}");
}

fn tempdir() -> PathBuf {
    common::tempdir("pion")
}
