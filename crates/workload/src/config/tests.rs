//! Config tests: TOML in, generators out; every kind deterministic per seed.

use super::*;
use crate::{take_messages, Message};

fn from_toml(text: &str) -> WorkloadConfig {
    toml::from_str(text).unwrap_or_else(|e| panic!("{text}\n{e}"))
}

fn messages(cfg: &WorkloadConfig, seed: u64, n: usize) -> Vec<Message> {
    let mut g = cfg.build(Instant::from_millis(1000), Seed(seed)).unwrap();
    take_messages(&mut g, n)
}

#[test]
fn toml_examples_parse_with_defaults() {
    let c = from_toml("kind = \"constant\"\niat = \"85ms\"\nbytes = 120\nduration = \"10m\"\n");
    assert_eq!(
        c,
        WorkloadConfig::Constant {
            iat: Duration::from_millis(85),
            bytes: 120,
            streams: 1,
            unordered: false,
            count: None,
            duration: Some(Duration::from_secs(600)),
        }
    );
    let p = from_toml("kind = \"profile\"\nname = \"anarchy-online\"\nstreams = 3\n");
    assert_eq!(p.stream_count(), 3);
    let b = from_toml(
        "kind = \"bursts\"\npattern = \"uniform-size\"\nburst-size = 7\ngap = \"100ms\"\n",
    );
    match b {
        WorkloadConfig::Bursts {
            bursts,
            bytes,
            intra_gap,
            ..
        } => {
            assert_eq!((bursts, bytes, intra_gap), (12, 200, Duration::ZERO));
        }
        other => panic!("{other:?}"),
    }
    let e = from_toml("kind = \"echo\"\nstreams = 4\n");
    assert_eq!(e.peer_behaviour(), PeerBehaviour::Echo);
    match e {
        WorkloadConfig::Echo {
            bytes, mean_iat, ..
        } => {
            assert_eq!((bytes, mean_iat), (64, Duration::from_millis(10)))
        }
        other => panic!("{other:?}"),
    }
    let h = from_toml("kind = \"http\"\nmean-request-gap = \"900ms\"\n");
    assert!(h.produces_flows());
    match h {
        WorkloadConfig::Http {
            clients,
            mean_request_gap,
            max_bytes,
            ..
        } => {
            assert_eq!(
                (clients, mean_request_gap, max_bytes),
                (81, Duration::from_millis(900), 64 << 20)
            )
        }
        other => panic!("{other:?}"),
    }
    let t = from_toml(
        "kind = \"trace-pcap\"\npath = \"traces/ao.pcap\"\nprotocol = \"tcp\"\nsrc-port = 7000\n",
    );
    assert_eq!(t.kind_name(), "trace-pcap");
    // A bare number is milliseconds.
    let n = from_toml("kind = \"exponential\"\nmean-iat = 250\nbytes = 100\n");
    assert!(
        matches!(n, WorkloadConfig::Exponential { mean_iat, .. } if mean_iat == Duration::from_millis(250))
    );
}

#[test]
fn typos_and_bad_values_are_errors() {
    for text in [
        "kind = \"constant\"\niat = \"85ms\"\nbytes = 120\nstreamz = 2\n",
        "kind = \"profile\"\nname = \"quake\"\n",
        "kind = \"teleport\"\n",
        "kind = \"constant\"\niat = \"fast\"\nbytes = 1\n",
        "kind = \"constant\"\niat = -5\nbytes = 1\n",
        "kind = \"trace-csv\"\npath = \"x.csv\"\ntime-unit = \"hours\"\n",
    ] {
        assert!(
            toml::from_str::<WorkloadConfig>(text).is_err(),
            "accepted: {text}"
        );
    }
    let zero_bytes = from_toml("kind = \"constant\"\niat = \"85ms\"\nbytes = 0\n");
    assert!(matches!(
        zero_bytes.build(Instant::ZERO, Seed(0)),
        Err(WorkloadError::InvalidConfig { .. })
    ));
    let zero_iat = from_toml("kind = \"constant\"\niat = 0\nbytes = 10\n");
    assert!(zero_iat.build(Instant::ZERO, Seed(0)).is_err());
    let bad_uniform = from_toml("kind = \"uniform\"\nmin-iat = 20\nmax-iat = 10\nbytes = 10\n");
    assert!(bad_uniform.build(Instant::ZERO, Seed(0)).is_err());
    let no_streams = from_toml("kind = \"echo\"\nstreams = 0\n");
    assert!(no_streams.build(Instant::ZERO, Seed(0)).is_err());
    let http = from_toml("kind = \"http\"\n");
    assert!(matches!(
        http.build(Instant::ZERO, Seed(0)),
        Err(WorkloadError::WrongOutputKind { .. })
    ));
    assert!(matches!(
        zero_bytes.build_flows(Instant::ZERO, Seed(0)),
        Err(WorkloadError::WrongOutputKind { .. })
    ));
    let missing = from_toml(
        "kind = \"trace-csv\"\npath = \"/nonexistent/thinstream.csv\"\ntime-unit = \"s\"\n",
    );
    assert!(matches!(
        missing.build(Instant::ZERO, Seed(0)),
        Err(WorkloadError::Io { .. })
    ));
}

#[test]
fn serialization_round_trips() {
    let all = [
        "kind = \"constant\"\niat = \"85ms\"\nbytes = 120\ncount = 5\n",
        "kind = \"exponential\"\nmean-iat = \"1500us\"\nbytes = 100\nstreams = 2\nunordered = true\n",
        "kind = \"uniform\"\nmin-iat = \"10ms\"\nmax-iat = \"30ms\"\nbytes = 50\nduration = \"1s\"\n",
        "kind = \"profile\"\nname = \"casa\"\niid = true\n",
        "kind = \"bursts\"\npattern = \"exponential-gap\"\nburst-size = 4\ngap = \"200ms\"\n",
        "kind = \"echo\"\n",
        "kind = \"bulk\"\ntotal-bytes = 1000000\n",
        "kind = \"http\"\n",
        "kind = \"trace-csv\"\npath = \"a.csv\"\ntime-unit = \"ms\"\nstreams = 4\n",
        "kind = \"trace-pcap\"\npath = \"a.pcap\"\nprotocol = \"udp\"\ndst-port = 5000\n",
    ];
    for text in all {
        let c = from_toml(text);
        let written = toml::to_string(&c).unwrap();
        assert_eq!(from_toml(&written), c, "{text} -> {written}");
    }
}

/// Constant: exact times, sizes, round-robin streams; count and duration limits.
#[test]
fn constant_is_exact() {
    let c =
        from_toml("kind = \"constant\"\niat = \"250ms\"\nbytes = 100\nstreams = 2\ncount = 40\n");
    let m = messages(&c, 1, 1000);
    assert_eq!(m.len(), 40);
    for (i, msg) in m.iter().enumerate() {
        assert_eq!(msg.at, Instant::from_millis(1000 + 250 * i as u64));
        assert_eq!(
            (msg.bytes, msg.stream, msg.unordered),
            (100, (i % 2) as u16, false)
        );
    }
    let d = from_toml("kind = \"constant\"\niat = \"250ms\"\nbytes = 100\nduration = \"1s\"\n");
    assert_eq!(messages(&d, 1, 1000).len(), 4);
}

/// Exponential: mean within 1 %, coefficient of variation ≈ 1, P(IAT < mean) ≈ 1 − 1/e.
#[test]
fn exponential_statistics() {
    let c = from_toml("kind = \"exponential\"\nmean-iat = \"100ms\"\nbytes = 100\n");
    let m = messages(&c, 2, 200_001);
    let iats: Vec<f64> = m
        .windows(2)
        .map(|w| (w[1].at - w[0].at).as_millis_f64())
        .collect();
    let mean = iats.iter().sum::<f64>() / iats.len() as f64;
    let sd = (iats.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / iats.len() as f64).sqrt();
    assert!((mean - 100.0).abs() < 1.0, "mean {mean}");
    assert!((sd / mean - 1.0).abs() < 0.02, "cv {}", sd / mean);
    let below = iats.iter().filter(|x| **x < 100.0).count() as f64 / iats.len() as f64;
    assert!((below - 0.632).abs() < 0.005, "P(< mean) {below}");
}

/// Uniform: bounds respected, mean and variance of U[10, 30].
#[test]
fn uniform_statistics() {
    let c = from_toml("kind = \"uniform\"\nmin-iat = \"10ms\"\nmax-iat = \"30ms\"\nbytes = 10\n");
    let m = messages(&c, 3, 100_001);
    let iats: Vec<f64> = m
        .windows(2)
        .map(|w| (w[1].at - w[0].at).as_millis_f64())
        .collect();
    assert!(iats.iter().all(|x| (10.0..=30.0).contains(x)));
    let mean = iats.iter().sum::<f64>() / iats.len() as f64;
    let var = iats.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / iats.len() as f64;
    assert!((mean - 20.0).abs() < 0.1, "mean {mean}");
    assert!((var - 400.0 / 12.0).abs() < 1.0, "var {var}");
}

/// Every message workload is deterministic per seed and messages are time-ordered;
/// randomised kinds change with the seed.
#[test]
fn every_kind_is_deterministic() {
    let dir = std::env::temp_dir().join(format!("thinstream-workload-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("t.csv"),
        "time,size,stream\n0,100,0\n0.5,200,1\n1.25,300,1\n",
    )
    .unwrap();
    let kinds = [
        ("kind = \"constant\"\niat = \"85ms\"\nbytes = 120\n", false),
        (
            "kind = \"exponential\"\nmean-iat = \"85ms\"\nbytes = 120\n",
            true,
        ),
        (
            "kind = \"uniform\"\nmin-iat = \"10ms\"\nmax-iat = \"30ms\"\nbytes = 50\n",
            true,
        ),
        ("kind = \"profile\"\nname = \"wow\"\n", true),
        ("kind = \"profile\"\nname = \"casa\"\n", true),
        (
            "kind = \"bursts\"\npattern = \"exponential-gap\"\nburst-size = 4\ngap = \"200ms\"\n",
            true,
        ),
        (
            "kind = \"bursts\"\npattern = \"uniform-size\"\nburst-size = 7\ngap = \"100ms\"\n",
            true,
        ),
        ("kind = \"echo\"\nstreams = 3\n", true),
        ("kind = \"bulk\"\n", false),
        (
            "kind = \"trace-csv\"\npath = \"t.csv\"\ntime-unit = \"s\"\nstreams = 2\n",
            false,
        ),
    ];
    for (text, random) in kinds {
        let mut c = from_toml(text);
        c.resolve_paths(&dir);
        let a = messages(&c, 7, 300);
        let b = messages(&c, 7, 300);
        assert!(!a.is_empty(), "{text}");
        assert_eq!(a, b, "{text}");
        assert!(
            a.windows(2).all(|w| w[0].at <= w[1].at),
            "{text}: not time-ordered"
        );
        assert!(
            a.iter().all(|m| m.bytes > 0 && m.stream < c.stream_count()),
            "{text}"
        );
        if random {
            assert_ne!(a, messages(&c, 8, 300), "{text}: seed has no effect");
        }
    }
    // The CSV replays exactly, offset to `start`.
    let mut c =
        from_toml("kind = \"trace-csv\"\npath = \"t.csv\"\ntime-unit = \"s\"\nstreams = 2\n");
    c.resolve_paths(&dir);
    let m = messages(&c, 0, 10);
    let got: Vec<(u64, u32, u16)> = m
        .iter()
        .map(|x| (x.at.as_nanos() / 1_000_000, x.bytes, x.stream))
        .collect();
    assert_eq!(got, [(1000, 100, 0), (1500, 200, 1), (2250, 300, 1)]);
    // A stream column beyond `streams` is refused.
    let mut narrow = from_toml("kind = \"trace-csv\"\npath = \"t.csv\"\ntime-unit = \"s\"\n");
    narrow.resolve_paths(&dir);
    assert!(narrow.build(Instant::ZERO, Seed(0)).is_err());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn http_builds_flows() {
    let c = from_toml("kind = \"http\"\nclients = 3\ncount = 20\n");
    let mut g = c.build_flows(Instant::ZERO, Seed(1)).unwrap();
    assert_eq!(g.clients().len(), 3);
    assert_eq!(g.clients()[2].rtt, Duration::from_millis(405));
    let flows: Vec<_> = std::iter::from_fn(|| g.next_flow()).collect();
    assert_eq!(flows.len(), 20);
    assert!(flows.iter().all(|f| f.client < 3));
}

#[test]
fn describe_prints_derived_parameters() {
    let h = from_toml("kind = \"http\"\n").describe();
    assert!(
        h.contains("alpha 1.043") && h.contains("81 clients") && h.contains("5ms..405ms"),
        "{h}"
    );
    let p = from_toml("kind = \"profile\"\nname = \"casa\"\n").describe();
    assert!(
        p.contains("bursts of 4") && p.contains("Casa (sensor network)"),
        "{p}"
    );
    let c = from_toml("kind = \"constant\"\niat = \"85ms\"\nbytes = 120\n").describe();
    assert_eq!(c, "constant: 120 B every 85ms over 1 stream(s)");
}

/// A pcap file on disk replays one direction through the config layer.
#[test]
fn pcap_file_replays_through_config() {
    // Raw-IP (link type 101) little-endian microsecond capture, two UDP
    // datagrams 20 ms apart from port 4000, one from port 5000.
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, 101] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    let datagram = |src: u16, payload: usize| {
        let mut ip = vec![0u8; 28];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((28 + payload) as u16).to_be_bytes());
        ip[9] = 17;
        ip[20..22].copy_from_slice(&src.to_be_bytes());
        ip[22..24].copy_from_slice(&9u16.to_be_bytes());
        ip[24..26].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        ip.resize(28 + payload, 0);
        ip
    };
    for (usec, src, payload) in [
        (100u32, 4000u16, 40usize),
        (10_100, 5000, 99),
        (20_100, 4000, 60),
    ] {
        let d = datagram(src, payload);
        for v in [7u32, usec, d.len() as u32, d.len() as u32] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        f.extend_from_slice(&d);
    }
    let dir = std::env::temp_dir().join(format!("thinstream-workload-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("c.pcap"), &f).unwrap();
    let mut c = from_toml("kind = \"trace-pcap\"\npath = \"c.pcap\"\nprotocol = \"udp\"\nsrc-port = 4000\nstream = 2\n");
    c.resolve_paths(&dir);
    assert_eq!(c.stream_count(), 3);
    let m = messages(&c, 0, 10);
    let got: Vec<(u64, u32, u16)> = m
        .iter()
        .map(|x| (x.at.as_nanos() / 1_000_000, x.bytes, x.stream))
        .collect();
    assert_eq!(got, [(1000, 40, 2), (1020, 60, 2)]);
    std::fs::remove_dir_all(&dir).ok();
}
