//! The real SCTP association (`thinstream-proto`) driven by the simulator
//! over lossy paths: every message is delivered exactly once, ordered
//! messages in order; the capture decodes as SCTP in tshark.

mod common;

use common::*;
use std::process::Command;
use thinstream_base::{Instant, Transport};
use thinstream_link::LinkConfig;
use thinstream_proto::{Association, Config};
use thinstream_sim::app::verify_delivery;
use thinstream_sim::{
    CapturePoint, EndpointSetup, EndpointSpec, FlowId, FlowSpec, MessageSource, MessageSpec,
    RunResult, Side, Simulation, Sink, Topology,
};

fn client(s: &EndpointSetup) -> Box<dyn Transport> {
    Box::new(Association::connect(
        Config::default().with_trace(),
        s.start,
        s.local,
        s.peer,
        s.seed,
    ))
}

fn server(s: &EndpointSetup) -> Box<dyn Transport> {
    Box::new(Association::accept(
        Config::default().with_trace(),
        s.start,
        s.local,
        s.seed,
    ))
}

/// 200 messages of 60..=260 bytes every 100 ms over 4 streams, every fifth unordered.
fn thin_schedule() -> Vec<MessageSpec> {
    (0..200u64)
        .map(|i| MessageSpec {
            at: Instant::from_millis(100 * i),
            stream: (i % 4) as u16,
            bytes: 60 + (i as u32 * 37) % 201,
            unordered: i % 5 == 0,
        })
        .collect()
}

fn run(seed: thinstream_base::Seed, netem: &str) -> RunResult {
    let path = LinkConfig::parse_netem(netem).unwrap();
    let topology = Topology::TwoHost {
        forward: path.clone(),
        reverse: path,
    };
    let flow = FlowSpec::new(
        EndpointSpec::new(client, MessageSource::new(thin_schedule())),
        EndpointSpec::new(server, Sink::messages()),
    );
    let mut sim = Simulation::new(seed, &topology, vec![flow]).unwrap();
    sim.capture_pcap(CapturePoint::Send);
    sim.run(Instant::from_secs(300))
}

// Over 5% loss in both directions every message arrives exactly once, ordered ones in order.
#[test]
fn sctp_over_lossy_path_delivers_exactly_once() {
    let seed = test_seed(31);
    let _r = Reproduce(seed);
    let result = run(seed, "delay 50ms loss 5%");
    let a = result.endpoint(FlowId(0), Side::A);
    let b = result.endpoint(FlowId(0), Side::B);
    assert!(
        a.established && b.established,
        "association not established"
    );
    let source = a.app.source().unwrap();
    let sink = b.app.received().unwrap();
    assert!(source.rejected.is_empty(), "{:?}", source.rejected);
    assert_eq!(source.sent.len(), 200);
    let summary = verify_delivery(source, sink, true).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(summary.delivered, 200);
    // Loss happened on the path and the association repaired it.
    let forward = &result.link("link.forward").unwrap().stats;
    assert!(forward.dropped_total().packets > 0);
    let retransmitted = a
        .records
        .iter()
        .filter(|r| {
            matches!(r, thinstream_base::trace::Record::PacketSent { data, .. }
                if data.iter().any(|d| d.reason.is_retransmission()))
        })
        .count();
    assert!(retransmitted > 0, "losses but no retransmissions");
    // Same seed, same run.
    let again = run(seed, "delay 50ms loss 5%");
    assert_eq!(again.endpoints[0].records, a.records);
    assert_eq!(again.pcap, result.pcap);
}

// tshark decodes the capture as SCTP over UDP 9899 with valid CRC32c checksums.
#[test]
fn sctp_capture_decodes_in_tshark() {
    if Command::new("tshark").arg("--version").output().is_err() {
        eprintln!("SKIPPED: tshark is not installed");
        return;
    }
    let seed = test_seed(32);
    let _r = Reproduce(seed);
    let result = run(seed, "delay 20ms");
    let path =
        std::env::temp_dir().join(format!("thinstream-sim-sctp-{}.pcap", std::process::id()));
    result.write_pcap(&path).unwrap();
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args(["-d", "udp.port==9899,sctp", "-o", "sctp.checksum:CRC-32C"])
        .args([
            "-T",
            "fields",
            "-E",
            "separator=;",
            "-e",
            "sctp.chunk_type",
            "-e",
            "sctp.checksum.status",
        ])
        .output()
        .expect("tshark runs");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 10, "{text}");
    // The handshake: INIT (1), INIT ACK (2), COOKIE ECHO (10), COOKIE ACK (11).
    let first: Vec<&str> = lines
        .iter()
        .take(4)
        .map(|l| l.split(';').next().unwrap())
        .collect();
    assert!(
        first[0].split(',').any(|t| t == "1"),
        "first packet is not an INIT: {first:?}"
    );
    assert!(
        first[1].split(',').any(|t| t == "2"),
        "second packet is not an INIT ACK: {first:?}"
    );
    assert!(
        text.lines()
            .any(|l| l.split(';').next().unwrap().split(',').any(|t| t == "0")),
        "no DATA chunk decoded"
    );
    for l in &lines {
        let status = l.split(';').nth(1).unwrap_or("");
        assert_eq!(status, "1", "SCTP checksum not good in {l:?}");
    }
}
