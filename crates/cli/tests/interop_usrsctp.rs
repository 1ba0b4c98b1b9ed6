//! Interop with an unmodified SCTP stack: usrsctp's example programs
//! (Debian `libusrsctp-examples`), over UDP encapsulation (RFC 6951) on
//! 127.0.0.1.
//!
//! Every case runs in a private network namespace with only `lo` up
//! (`unshare -n`): usrsctp's examples bind every local address and send
//! heartbeats to each, so nothing may leave the namespace. Needs root and
//! the usrsctp examples; without them the tests print SKIPPED, and with
//! THINSTREAM_REQUIRE_INTEROP=1 (set by CI) they fail instead.

mod common;

use std::path::Path;
use std::process::Command;

const USRSCTP: &str = "/usr/lib/usrsctp";

/// `Some(reason)` if usrsctp's example programs are missing.
fn missing_prerequisite() -> Option<String> {
    (!Path::new(USRSCTP).join("echo_server").exists())
        .then(|| format!("{USRSCTP}/echo_server not found (apt-get install libusrsctp-examples)"))
}

/// Runs `script` in a private network namespace with `$TS` and `$U` set.
fn in_netns(name: &str, script: &str) -> Option<String> {
    common::in_netns(
        name,
        missing_prerequisite(),
        &format!("U={USRSCTP}"),
        script,
    )
}

fn json_field(text: &str, key: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(text).expect("valid JSON report");
    v[key].clone()
}

/// Our sender against usrsctp's echo server: 1000 messages of 1..4000 bytes
/// (so messages are fragmented), every echo checked byte for byte.
fn send_to_usrsctp_echo(unordered: bool, preset: &str) {
    let dir = tempdir();
    let report = dir.join("send.json");
    let flag = if unordered { "--unordered" } else { "" };
    let script = format!(
        r#"
$U/echo_server 9899 9900 > {d}/echo.log 2>&1 &
sleep 0.5
$TS send --to 127.0.0.1:9899 --bind 127.0.0.1:9900 --sctp-port 7 --count 1000 \
    --size 1..4000 --interval 1ms --streams 3 {flag} --expect-echo --seed 11 \
    --preset {preset} --json {r} --quiet
status=$?
kill %1 2>/dev/null
exit $status
"#,
        d = dir.display(),
        r = report.display()
    );
    let Some(_) = in_netns("send_to_usrsctp_echo", &script) else {
        return;
    };
    let text = std::fs::read_to_string(&report).expect("send wrote its report");
    assert_eq!(json_field(&text, "sent"), 1000, "{text}");
    assert_eq!(json_field(&text, "echoed"), 1000, "{text}");
    assert_eq!(json_field(&text, "corrupted"), 0, "{text}");
    assert_eq!(json_field(&text, "lost"), 0, "{text}");
    assert!(json_field(&text, "association_error").is_null(), "{text}");
}

#[test]
fn our_send_to_usrsctp_echo_server_ordered() {
    send_to_usrsctp_echo(false, "rfc");
}

/// Every sender-side mechanism switched on (the thin set, redundant bundling
/// without the thin gate, packet-based Early Retransmit): the unmodified
/// receiver still echoes each message exactly once. (On a loss-free loopback
/// the mechanisms rarely trigger; the simulator tests pin their behaviour.)
#[test]
fn our_send_with_thin_mechanisms_to_usrsctp_echo_server() {
    send_to_usrsctp_echo(false, "thin+rdb+rdb-always+er-packet");
}

#[test]
fn our_send_to_usrsctp_echo_server_unordered() {
    send_to_usrsctp_echo(true, "rfc");
}

/// Partial reliability against an unmodified receiver (RFC 3758): a burst
/// of 400 messages of 2000..4000 bytes with a 2 ms lifetime on three ordered
/// streams. Most of them wait for the congestion window longer than their
/// lifetime and are abandoned before or after their first transmission; we
/// skip them with FORWARD TSNs carrying the streams' SSNs. usrsctp must
/// accept those (no ABORT, no stall), deliver and echo every message that
/// was not abandoned (echoed + abandoned covers all 400), in order, and
/// in particular messages sent after an abandoned one on the same stream.
#[test]
fn our_forward_tsn_is_accepted_by_usrsctp() {
    let dir = tempdir();
    let report = dir.join("send.json");
    let script = format!(
        r#"
$U/echo_server 9899 9900 > {d}/echo.log 2>&1 &
sleep 0.5
$TS send --to 127.0.0.1:9899 --bind 127.0.0.1:9900 --sctp-port 7 --count 400 \
    --size 2000..4000 --interval 0 --streams 3 --expect-echo --seed 5 \
    --lifetime-ms 2 --linger 20s --json {r} --quiet
status=$?
kill %1 2>/dev/null
exit $status
"#,
        d = dir.display(),
        r = report.display()
    );
    let Some(_) = in_netns("our_forward_tsn_is_accepted_by_usrsctp", &script) else {
        return;
    };
    let text = std::fs::read_to_string(&report).expect("send wrote its report");
    let n = |k: &str| {
        json_field(&text, k)
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {text}"))
    };
    assert_eq!(n("sent"), 400, "{text}");
    assert!(n("abandoned") > 0, "nothing was abandoned: {text}");
    assert!(n("forward_tsns_sent") > 0, "{text}");
    assert!(n("echoed") + n("abandoned") >= 400, "{text}");
    assert!(n("echoed_after_abandoned") > 0, "{text}");
    assert_eq!(n("corrupted"), 0, "{text}");
    assert_eq!(n("out_of_order"), 0, "{text}");
    assert!(json_field(&text, "association_error").is_null(), "{text}");
}

/// Message interleaving offered to a peer that does not offer it (RFC 8260
/// §2.2.3): usrsctp supports I-DATA, but its example programs leave the
/// `sctp_interleaving_supported` default (off), so its INIT ACK lists no
/// I-DATA. Our INIT offers it, both sides then use DATA, and fragmented
/// messages on three streams all come back. (An I-DATA exchange with
/// usrsctp would need a program that switches the option on; none of the
/// Debian examples does.)
#[test]
fn our_interleaving_offer_falls_back_to_data_with_usrsctp() {
    if Command::new("tcpdump").arg("--version").output().is_err() {
        if std::env::var("THINSTREAM_REQUIRE_INTEROP").as_deref() == Ok("1") {
            panic!("tcpdump is missing");
        }
        eprintln!("SKIPPED: tcpdump missing");
        return;
    }
    let dir = tempdir();
    let report = dir.join("send.json");
    let pcap = dir.join("cap.pcap");
    let script = format!(
        r#"
tcpdump -i lo -U -w {p} udp > /dev/null 2>&1 &
sleep 1
$U/echo_server 9899 9900 > {d}/echo.log 2>&1 &
sleep 0.5
$TS send --to 127.0.0.1:9899 --bind 127.0.0.1:9900 --sctp-port 7 --count 200 \
    --size 1..4000 --interval 1ms --streams 3 --expect-echo --seed 7 \
    --interleave --no-gso --json {r} --quiet
status=$?
sleep 0.5
kill %1 %2 2>/dev/null
wait %1 2>/dev/null
exit $status
"#,
        p = pcap.display(),
        d = dir.display(),
        r = report.display()
    );
    let Some(_) = in_netns(
        "our_interleaving_offer_falls_back_to_data_with_usrsctp",
        &script,
    ) else {
        return;
    };
    let text = std::fs::read_to_string(&report).expect("send wrote its report");
    assert_eq!(json_field(&text, "echoed"), 200, "{text}");
    assert_eq!(json_field(&text, "interleaving"), false, "{text}");
    assert!(json_field(&text, "association_error").is_null(), "{text}");
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(&pcap)
        .args([
            "-d",
            "udp.port==9899,sctp",
            "-d",
            "udp.port==9900,sctp",
            "-T",
            "fields",
            "-e",
            "udp.srcport",
            "-e",
            "sctp.chunk_type",
            "-e",
            "sctp.supported_chunk_type",
        ])
        .output()
        .expect("tshark runs");
    let fields = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<&str>> = fields.lines().map(|l| l.split('\t').collect()).collect();
    // Our INIT (chunk type 1, from 9900) lists I-DATA (64); usrsctp's INIT
    // ACK (type 2) does not.
    let listed = |port: &str, kind: &str| {
        rows.iter().any(|r| {
            r.first() == Some(&port)
                && r.get(1) == Some(&kind)
                && r.get(2).is_some_and(|t| t.split(',').any(|x| x == "64"))
        })
    };
    assert!(
        listed("9900", "1"),
        "our INIT does not offer I-DATA:\n{fields}"
    );
    assert!(!listed("9899", "2"), "usrsctp offered I-DATA:\n{fields}");
    // No I-DATA chunk in either direction, plenty of DATA.
    let chunks = |kind: &str| {
        rows.iter()
            .filter(|r| r.get(1).is_some_and(|c| c.split(',').any(|x| x == kind)))
            .count()
    };
    assert_eq!(chunks("64"), 0, "{fields}");
    assert!(chunks("0") >= 200, "{fields}");
}

/// usrsctp's interactive client against our echo listener: every line comes back.
#[test]
fn usrsctp_client_to_our_echo_listener() {
    let dir = tempdir();
    let report = dir.join("listen.json");
    let script = format!(
        r#"
$TS listen --bind 127.0.0.1:9899 --echo --once --json {r} &
sleep 0.5
(for i in $(seq 1 100); do echo "message-$i-$(printf '%0*d' $i 0)"; sleep 0.005; done; sleep 1) \
    | timeout 30 $U/client 127.0.0.1 5000 0 9900 9899 > {d}/client.log 2>&1
wait
echo "echoed lines: $(grep -c '^message-' {d}/client.log)"
"#,
        d = dir.display(),
        r = report.display()
    );
    let Some(out) = in_netns("usrsctp_client_to_our_echo_listener", &script) else {
        return;
    };
    let client = std::fs::read_to_string(dir.join("client.log")).unwrap();
    for i in 1..=100 {
        let line = format!("message-{i}-{}", "0".repeat(i));
        assert!(
            client.lines().any(|l| l == line),
            "line {i} did not come back:\n{out}\n{client}"
        );
    }
    let text = std::fs::read_to_string(&report).expect("listen wrote its report");
    let assoc = &json_field(&text, "associations")[0];
    // The client sends what each read of stdin returned, so messages need
    // not match lines; bytes and echoes must.
    let stdin_bytes: usize = (1..=100)
        .map(|i| format!("message-{i}-{}\n", "0".repeat(i)).len())
        .sum();
    assert_eq!(assoc["bytes"], stdin_bytes, "{text}");
    assert_eq!(assoc["echoed"], assoc["messages"], "{text}");
    assert!(assoc["error"].is_null(), "{text}");
}

/// usrsctp's tsctp bulk sender against our discard listener: the byte count
/// received equals what was sent.
#[test]
fn usrsctp_tsctp_bulk_to_our_discard_listener() {
    let dir = tempdir();
    let report = dir.join("listen.json");
    let script = format!(
        r#"
$TS listen --bind 127.0.0.1:9899 --discard --once --json {r} &
sleep 0.5
timeout 60 $U/tsctp -E 9900 -U 9899 -L 127.0.0.1 -p 5000 -n 2000 -l 1200 127.0.0.1 > {d}/tsctp.log 2>&1
wait
"#,
        d = dir.display(),
        r = report.display()
    );
    let Some(_) = in_netns("usrsctp_tsctp_bulk_to_our_discard_listener", &script) else {
        return;
    };
    let text = std::fs::read_to_string(&report).expect("listen wrote its report");
    let assoc = &json_field(&text, "associations")[0];
    assert_eq!(assoc["messages"], 2000, "{text}");
    assert_eq!(assoc["bytes"], 2000 * 1200, "{text}");
    assert!(assoc["error"].is_null(), "{text}");
}

/// A capture of a whole exchange shows that we only ever talk to the
/// address we were given (no address parameters in our INIT, no packets to
/// anything outside loopback).
#[test]
fn we_only_contact_the_given_loopback_address() {
    if Command::new("tcpdump").arg("--version").output().is_err() {
        if std::env::var("THINSTREAM_REQUIRE_INTEROP").as_deref() == Ok("1") {
            panic!("tcpdump is missing");
        }
        eprintln!("SKIPPED: tcpdump missing");
        return;
    }
    let dir = tempdir();
    let pcap = dir.join("cap.pcap");
    let script = format!(
        r#"
tcpdump -i lo -U -w {p} udp > /dev/null 2>&1 &
sleep 0.5
$TS listen --bind 127.0.0.1:9899 --echo --once --no-gso &
sleep 0.3
$TS send --to 127.0.0.1:9899 --count 20 --interval 5ms --size 200 --expect-echo --seed 3 --no-gso --quiet
wait %2
sleep 0.3
kill %1
wait %1 2>/dev/null
true
"#,
        p = pcap.display()
    );
    let Some(_) = in_netns("we_only_contact_the_given_loopback_address", &script) else {
        return;
    };
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(&pcap)
        .args([
            "-d",
            "udp.port==9899,sctp",
            "-T",
            "fields",
            "-e",
            "ip.dst",
            "-e",
            "ipv6.dst",
            "-e",
            "sctp.parameter_type",
        ])
        .output()
        .expect("tshark runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 40, "capture too small:\n{text}");
    for l in &lines {
        let mut f = l.split('\t');
        let v4 = f.next().unwrap_or("");
        let v6 = f.next().unwrap_or("");
        assert!(
            v4 == "127.0.0.1" || v6 == "::1",
            "packet to a non-loopback address: {l}"
        );
        // Parameter types 5 and 6 are IPv4/IPv6 address parameters.
        let params = f.next().unwrap_or("");
        assert!(
            !params
                .split(',')
                .any(|p| p == "5" || p == "6" || p == "0x0005" || p == "0x0006"),
            "an INIT/INIT ACK advertised an address: {l}"
        );
    }
}

fn tempdir() -> std::path::PathBuf {
    common::tempdir("interop")
}
