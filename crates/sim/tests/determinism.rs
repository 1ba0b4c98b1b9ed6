//! Same seed, same run (records and pcap bytes); another seed on a lossy
//! link, another run. Seed derivation and the run header. pcap framing,
//! read back by our parser and, when installed, by tshark.

mod common;

use common::*;
use std::process::Command;
use thinstream_base::{Duration, Instant, Seed};
use thinstream_link::LinkConfig;
use thinstream_sim::app::verify_delivery;
use thinstream_sim::{
    pcap, CapturePoint, FlowId, FlowSpec, MessageSource, RunResult, Side, Simulation, Sink,
    Topology,
};

fn lossy_run(seed: Seed, point: CapturePoint) -> RunResult {
    let lossy = LinkConfig::parse_netem("delay 15ms 5ms loss 10%").unwrap();
    let topology = Topology::TwoHost {
        forward: lossy.clone(),
        reverse: lossy,
    };
    let flows = (0..2)
        .map(|_| {
            FlowSpec::new(
                stop_and_wait_endpoint(
                    Duration::from_millis(120),
                    MessageSource::new(periodic(
                        Instant::from_millis(3),
                        Duration::from_millis(40),
                        100,
                        90,
                    )),
                ),
                stop_and_wait_endpoint(Duration::from_millis(120), Sink::messages()),
            )
        })
        .collect();
    let mut sim = Simulation::new(seed, &topology, flows).unwrap();
    sim.capture_pcap(point);
    sim.run(Instant::from_secs(60))
}

// Same seed: identical records, app reports and pcap bytes; different seed: different records.
#[test]
fn same_seed_same_run_other_seed_other_run() {
    let seed = test_seed(11);
    let _r = Reproduce(seed);
    let one = lossy_run(seed, CapturePoint::Send);
    let two = lossy_run(seed, CapturePoint::Send);
    for (a, b) in one.endpoints.iter().zip(&two.endpoints) {
        assert!(!a.records.is_empty());
        assert_eq!(a.records, b.records, "endpoint {:?}", a.id);
        assert_eq!(a.app, b.app);
    }
    assert_eq!(one.pcap, two.pcap);
    assert_eq!(one.events, two.events);
    assert_eq!(one.header, two.header);
    // Every message still arrives exactly once on both flows.
    for f in 0..2 {
        let s = one.endpoint(FlowId(f), Side::A).app.source().unwrap();
        let r = one.endpoint(FlowId(f), Side::B).app.received().unwrap();
        assert_eq!(verify_delivery(s, r, true).unwrap().delivered, 100);
    }
    let other = lossy_run(Seed(seed.0 ^ 0x5eed), CapturePoint::Send);
    assert_ne!(one.endpoints[0].records, other.endpoints[0].records);
    assert_ne!(one.pcap, other.pcap);
}

// The header lists the master seed and every derived seed under its stable label.
#[test]
fn header_lists_derived_seeds() {
    let seed = Seed(1234);
    let result = lossy_run(seed, CapturePoint::Send);
    let h = &result.header;
    assert_eq!(h.master, seed);
    let get = |label: &str| h.seeds.iter().find(|(l, _)| l == label).map(|(_, s)| *s);
    assert_eq!(get("flow0.a"), Some(seed.derive("flow0.a")));
    assert_eq!(get("flow1.b"), Some(seed.derive("flow1.b")));
    assert_eq!(get("link.forward"), Some(seed.derive("link.forward")));
    assert_eq!(get("link.reverse"), Some(seed.derive("link.reverse")));
    assert_eq!(
        result.endpoint(FlowId(1), Side::B).seed,
        seed.derive("flow1.b")
    );
    assert_eq!(
        result.link("link.reverse").unwrap().seed,
        seed.derive("link.reverse")
    );
    let text = h.to_string();
    assert!(text.starts_with("master seed 1234\n"), "{text}");
    assert!(
        text.contains("endpoint flow1.a at 192.0.2.2:9899"),
        "{text}"
    );
    assert_eq!(h.reproduce_hint(), "reproduce with THINSTREAM_SEED=1234");
}

// The capture holds exactly the datagrams the endpoints sent, at their send times.
#[test]
fn pcap_matches_sent_datagrams() {
    let seed = test_seed(12);
    let _r = Reproduce(seed);
    let result = lossy_run(seed, CapturePoint::Send);
    let packets = capture_of_everything_sent(&result);
    // Times never go backwards and every packet is between the two hosts.
    assert!(packets.windows(2).all(|w| w[0].time <= w[1].time));
    let first_a = packets
        .iter()
        .find(|p| p.src == result.endpoint(FlowId(0), Side::A).addr)
        .unwrap();
    assert_eq!(first_a.time, Instant::from_millis(3));
    assert_eq!(first_a.dst, result.endpoint(FlowId(0), Side::B).addr);
    assert_eq!(first_a.payload.len(), 12 + 90);
    // Link statistics balance with what the endpoints sent and received.
    let a_sent: u64 = result
        .endpoints
        .iter()
        .filter(|e| e.side == Side::A)
        .map(|e| e.stats.datagrams_sent)
        .sum();
    let b_received: u64 = result
        .endpoints
        .iter()
        .filter(|e| e.side == Side::B)
        .map(|e| e.stats.datagrams_received)
        .sum();
    let forward = &result.link("link.forward").unwrap().stats;
    assert_eq!(forward.offered.packets, a_sent);
    assert_eq!(forward.delivered.packets, b_received);
    assert_eq!(
        forward.offered.packets,
        forward.delivered.packets + forward.dropped_total().packets
    );
    assert!(
        forward.dropped_total().packets > 0,
        "a 10% loss link dropped nothing"
    );
    // A receive-side capture sees fewer packets on a lossy path.
    let rx = lossy_run(seed, CapturePoint::Receive);
    let received: u64 = rx
        .endpoints
        .iter()
        .map(|e| e.stats.datagrams_received)
        .sum();
    assert_eq!(
        pcap::read(rx.pcap.as_ref().unwrap()).unwrap().len() as u64,
        received
    );
    assert!(received < packets.len() as u64);
}

// tshark (when installed) reads the capture: IPv4 checksums good, UDP framing and times right.
#[test]
fn tshark_reads_the_capture() {
    if Command::new("tshark").arg("--version").output().is_err() {
        eprintln!(
            "SKIPPED: tshark is not installed; the pcap framing is only checked by our own parser"
        );
        return;
    }
    let seed = test_seed(13);
    let _r = Reproduce(seed);
    let result = lossy_run(seed, CapturePoint::Send);
    let ours = pcap::read(result.pcap.as_ref().unwrap()).unwrap();
    let text = tshark_fields(result.pcap.as_ref().unwrap(), "good");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        ours.len(),
        "tshark saw a different number of packets"
    );
    for (line, p) in lines.iter().zip(&ours) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 8, "{line}");
        // Epoch seconds with nanoseconds, e.g. "0.003000000".
        let t: f64 = f[0].parse().unwrap();
        assert!(
            (t - p.time.as_secs_f64()).abs() < 1e-9,
            "{line} vs {:?}",
            p.time
        );
        assert_eq!(f[1], p.src.ip().to_string(), "{line}");
        assert_eq!(f[2], p.dst.ip().to_string(), "{line}");
        assert_eq!(f[3], "9899", "{line}");
        assert_eq!(f[4], "9899", "{line}");
        assert_eq!(f[5], (8 + p.payload.len()).to_string(), "{line}");
        // Checksum status 1 = good (Wireshark: 0 bad, 1 good, 2 unverified).
        assert_eq!(f[6], "1", "IPv4 checksum not good: {line}");
        assert_eq!(f[7], "1", "UDP checksum not good: {line}");
    }
    // The check can fail: flip the first packet's TTL and tshark calls its IPv4 checksum bad.
    let mut broken = result.pcap.clone().unwrap();
    broken[24 + 16 + 8] ^= 1;
    let text = tshark_fields(&broken, "broken");
    let first: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    assert_eq!(
        first[6], "0",
        "tshark did not notice a bad IPv4 checksum: {first:?}"
    );
}

fn tshark_fields(pcap_bytes: &[u8], tag: &str) -> String {
    let path =
        std::env::temp_dir().join(format!("thinstream-sim-{}-{tag}.pcap", std::process::id()));
    std::fs::write(&path, pcap_bytes).unwrap();
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
        ])
        .args(["-T", "fields", "-E", "separator=,"])
        .args([
            "-e",
            "frame.time_epoch",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
            "-e",
            "udp.srcport",
        ])
        .args([
            "-e",
            "udp.dstport",
            "-e",
            "udp.length",
            "-e",
            "ip.checksum.status",
            "-e",
            "udp.checksum.status",
        ])
        .output()
        .expect("tshark runs");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
