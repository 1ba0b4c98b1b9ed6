//! Randomized end-to-end runs over a lossy, duplicating, reordering link
//! (implemented here with the base `Rng`): every message is delivered
//! exactly once, in order within each ordered stream, and the same seed
//! gives an identical trace.
//!
//! Size: `RANDOM_SEEDS` (default 200) seeds × `RANDOM_MESSAGES` (default
//! 2000) messages, plus `RANDOM_CONFIG_SEEDS` (default 60) randomized
//! configurations; seconds in the test profile. `RANDOM_SEED_BASE` shifts
//! the seed ranges to explore new seeds (long sweeps: `--release`).

use std::collections::BTreeMap;

use thinstream_base::drive::Transport;
use thinstream_base::trace::Record;
use thinstream_base::{Duration, Seed};
use thinstream_proto::testkit::{Pair, Side};
use thinstream_proto::Config;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Outcome {
    client_trace: Vec<Record>,
    server_trace: Vec<Record>,
}

#[derive(Clone, Copy)]
struct Params {
    loss: f64,
    dup: f64,
    reorder: f64,
    /// Also send from the server to the client.
    both_ways: bool,
    max_len: u64,
    /// Gap between messages: uniform below this many microseconds.
    max_gap_us: u64,
}

const DEFAULT: Params = Params {
    loss: 0.10,
    dup: 0.02,
    reorder: 0.05,
    both_ways: false,
    max_len: 2000,
    max_gap_us: 10_000,
};

fn run(seed: u64, messages: usize) -> Outcome {
    run_with(seed, messages, Config::default().with_trace(), DEFAULT)
}

fn run_with(seed: u64, messages: usize, cfg: Config, params: Params) -> Outcome {
    let mut p = Pair::new(cfg.clone(), cfg, Duration::from_millis(20), Seed(seed));
    p.log_packets = false;
    let mut link = Seed(seed).derive("link").rng();
    p.impair = Some(Box::new(move |_side, _pkt| {
        // `loss` (default 10 %), 2 % duplication, 5 % of packets delayed by
        // up to 30 ms extra (reordering).
        if link.chance(params.loss) {
            return vec![];
        }
        let mut copies = vec![Duration::ZERO];
        if link.chance(params.dup) {
            copies.push(Duration::from_micros(link.below(10_000)));
        }
        for c in copies.iter_mut() {
            if link.chance(params.reorder) {
                *c += Duration::from_micros(link.below(30_000));
            }
        }
        copies
    }));
    p.connect_within(Duration::from_secs(300));
    let mut work = Seed(seed).derive("workload").rng();
    let mut expected: BTreeMap<u32, (u16, bool)> = BTreeMap::new();
    let mut back = 0u32;
    for i in 0..messages as u32 {
        let len = 4 + work.below(params.max_len) as usize;
        let stream = work.below(4) as u16;
        let unordered = work.chance(0.2);
        let mut payload = vec![(i % 251) as u8; len];
        payload[..4].copy_from_slice(&i.to_be_bytes());
        loop {
            match p.send(Side::Client, stream, unordered, &payload) {
                Ok(_) => break,
                Err(e) => {
                    assert_eq!(
                        e,
                        thinstream_base::drive::SendError::BufferFull,
                        "seed {seed} at {}: client {:?} {:?}, server {:?} {:?}",
                        p.now,
                        p.client.state(),
                        p.closed(Side::Client),
                        p.server.state(),
                        p.closed(Side::Server)
                    );
                    p.drive_for(Duration::from_millis(10));
                }
            }
        }
        expected.insert(i, (stream, unordered));
        if params.both_ways
            && work.chance(0.5)
            && p.send(Side::Server, 0, false, &back.to_be_bytes()).is_ok()
        {
            back += 1;
        }
        let gap = Duration::from_micros(work.below(params.max_gap_us));
        p.drive_for(gap);
    }
    let now = p.now;
    p.client.close(now);
    let limit = p.now + Duration::from_secs(3600);
    while !(p.client.is_closed() && p.server.is_closed()) && p.now < limit {
        p.drive_for(Duration::from_secs(1));
    }
    if !(p.client.is_closed() && p.server.is_closed()) {
        eprintln!(
            "seed {seed} stuck at {}: client {:?} buffered {} flight {} peer_rwnd {} cwnd {:?} rto {}; server {:?} rwnd {} buffered {}\nclient {:?}\nserver {:?}",
            p.now,
            p.client.state(),
            p.client.buffered_send_bytes(),
            p.client.flight_size(),
            p.client.peer_rwnd(),
            p.client.congestion(),
            p.client.rto(),
            p.server.state(),
            p.server.local_rwnd(),
            p.server.buffered_send_bytes(),
            p.client.stats(),
            p.server.stats(),
        );
    }
    assert_eq!(
        p.closed(Side::Client),
        Some(None),
        "seed {seed}: client did not close gracefully"
    );
    assert_eq!(
        p.closed(Side::Server),
        Some(None),
        "seed {seed}: server did not close gracefully"
    );

    let got = p.take_received(Side::Server);
    let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
    let mut last_in_stream: BTreeMap<u16, u32> = BTreeMap::new();
    for (stream, unordered, payload) in &got {
        let i = u32::from_be_bytes(payload[..4].try_into().unwrap());
        assert!(
            payload[4..].iter().all(|b| *b == (i % 251) as u8),
            "seed {seed}: corrupted message {i}"
        );
        *seen.entry(i).or_default() += 1;
        assert_eq!(
            expected.get(&i),
            Some(&(*stream, *unordered)),
            "seed {seed}: message {i} on wrong stream"
        );
        if !unordered {
            if let Some(prev) = last_in_stream.insert(*stream, i) {
                assert!(
                    prev < i,
                    "seed {seed}: stream {stream} delivered {i} after {prev}"
                );
            }
        }
    }
    assert_eq!(seen.len(), messages, "seed {seed}: messages missing");
    assert!(
        seen.values().all(|n| *n == 1),
        "seed {seed}: duplicate delivery"
    );
    let replies: Vec<u32> = p
        .take_received(Side::Client)
        .iter()
        .map(|m| u32::from_be_bytes(m.2[..4].try_into().unwrap()))
        .collect();
    assert_eq!(
        replies,
        (0..back).collect::<Vec<_>>(),
        "seed {seed}: replies"
    );
    check_trace(seed, &p.client_trace, &p.server_trace);
    Outcome {
        client_trace: std::mem::take(&mut p.client_trace),
        server_trace: std::mem::take(&mut p.server_trace),
    }
}

// Exactly-once, in-order delivery over a hostile link for many seeds.
#[test]
fn random_lossy_runs_deliver_exactly_once_in_order() {
    let seeds = env_or("RANDOM_SEEDS", 200);
    let messages = env_or("RANDOM_MESSAGES", 2000) as usize;
    let base = env_or("RANDOM_SEED_BASE", 0);
    for seed in base..base + seeds {
        run(1000 + seed, messages);
    }
}

// Randomized configurations: PMTU, buffers, Nagle, delayed SACK, Max.Burst,
// loss rates up to 15 %, traffic in both directions.
#[test]
fn random_configurations() {
    let seeds = env_or("RANDOM_CONFIG_SEEDS", 60);
    let base = env_or("RANDOM_SEED_BASE", 0);
    for seed in base..base + seeds {
        let mut r = Seed(seed).derive("config").rng();
        let mut cfg = Config::default().with_trace();
        cfg.pmtu = 200 + r.below(1300) as usize;
        cfg.receive_buffer = 4096 + r.below(128 * 1024) as u32;
        cfg.no_delay = r.chance(0.5);
        if r.chance(0.3) {
            cfg.delayed_sack = thinstream_proto::DelayedSack::off();
        }
        cfg.max_burst = 1 + r.below(6) as u32;
        cfg.send_buffer = 16 * 1024 + r.below(256 * 1024) as usize;
        cfg.max_message_size = 12 * 1024;
        let params = Params {
            dup: 0.02,
            reorder: 0.05,
            loss: r.below(16) as f64 / 100.0,
            both_ways: true,
            max_len: 1 + r.below(6 * 1024),
            max_gap_us: 10_000,
        };
        run_with(5000 + seed, 300, cfg, params);
    }
}

// A harsh link: 30 % loss, 10 % duplication, 20 % reordering, both
// directions (retransmission limits raised so the association does not
// legitimately give up).
#[test]
fn harsh_link() {
    let seeds = env_or("RANDOM_HARSH_SEEDS", 20);
    let base = env_or("RANDOM_SEED_BASE", 0);
    for seed in base..base + seeds {
        let mut cfg = Config::default().with_trace();
        cfg.association_max_retrans = 1000;
        cfg.max_init_retransmits = 1000;
        cfg.rto_max = Duration::from_secs(4);
        let params = Params {
            loss: 0.30,
            dup: 0.10,
            reorder: 0.20,
            both_ways: true,
            max_len: 3000,
            max_gap_us: 10_000,
        };
        run_with(9000 + seed, 200, cfg, params);
    }
}

/// Every documented preset, and all mechanisms on at once.
const PRESETS: [&str; 8] = [
    "rfc",
    "linux",
    "lksctp-mod",
    "thin",
    "thin+nodelack+rdb+er-packet+efr+cc004+stcp",
    "linux+rdb-always+er-byte+efr",
    "thin+thin-tcp+rdb-bytes=300+rdb-iat+stcp",
    "lksctp-mod+lt+minrto+mfr+bfr+rdb-pif=3+frt=3",
];

// Exactly-once, in-order delivery with every preset, both on a greedy-ish
// workload (the default) and on a thin one (small messages up to 300 ms
// apart), where the thin-stream mechanisms are active.
#[test]
fn random_runs_with_every_preset() {
    let seeds = env_or("RANDOM_PRESET_SEEDS", 4);
    let base = env_or("RANDOM_SEED_BASE", 0);
    let thin = Params {
        loss: 0.10,
        dup: 0.02,
        reorder: 0.05,
        both_ways: true,
        max_len: 300,
        max_gap_us: 300_000,
    };
    for (k, preset) in PRESETS.iter().enumerate() {
        let mut cfg = Config::from_preset(preset).unwrap().with_trace();
        cfg.association_max_retrans = 100;
        for seed in base..base + seeds {
            let s = 20_000 + 100 * k as u64 + seed;
            run_with(s, 200, cfg.clone(), DEFAULT);
            run_with(s, 150, cfg.clone(), thin);
        }
    }
    // All mechanisms on over a harsh link (30 % loss, duplication, reordering).
    let harsh = Params {
        loss: 0.30,
        dup: 0.10,
        reorder: 0.20,
        ..thin
    };
    let mut cfg = Config::from_preset(PRESETS[4]).unwrap().with_trace();
    cfg.association_max_retrans = 1000;
    cfg.max_init_retransmits = 1000;
    cfg.rto_max = Duration::from_secs(4);
    for seed in base..base + seeds {
        run_with(29_000 + seed, 100, cfg.clone(), harsh);
    }
}

// The same seed gives the same trace, record for record.
#[test]
fn same_seed_same_trace() {
    let a = run(77, 500);
    let b = run(77, 500);
    assert!(a.client_trace.len() > 1000);
    assert_eq!(a.client_trace, b.client_trace);
    assert_eq!(a.server_trace, b.server_trace);
    let c = run(78, 500);
    assert_ne!(
        a.client_trace, c.client_trace,
        "different seeds should differ"
    );
}

/// The trace contract: the receiver's `Delivered` units are exactly the
/// sender's `Submitted` units, every unit is sent new once, acknowledged once
/// and arrives (non-duplicate) once.
fn check_trace(seed: u64, client: &[Record], server: &[Record]) {
    use thinstream_base::trace::TxReason;
    let mut submitted = Vec::new();
    let mut acked = BTreeMap::<u64, u32>::new();
    let mut new_sent = BTreeMap::<u64, u32>::new();
    for r in client {
        match r {
            Record::Submitted { units, .. } => submitted.push(*units),
            Record::Acked { units, .. } => {
                for u in units.start..units.end {
                    *acked.entry(u).or_default() += 1;
                }
            }
            Record::PacketSent { data, .. } => {
                for d in data.iter().filter(|d| d.reason == TxReason::New) {
                    *new_sent.entry(d.units.start).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    let mut delivered = Vec::new();
    let mut arrived = BTreeMap::<u64, u32>::new();
    for r in server {
        match r {
            Record::Delivered { units, .. } => delivered.push(*units),
            Record::Arrived {
                units,
                duplicate: false,
                ..
            } => *arrived.entry(units.start).or_default() += 1,
            _ => {}
        }
    }
    let total = submitted.iter().map(|u| u.end).max().unwrap_or(0);
    submitted.sort();
    delivered.sort();
    assert_eq!(
        submitted, delivered,
        "seed {seed}: delivered units differ from submitted units"
    );
    for (name, m) in [
        ("acked", &acked),
        ("sent new", &new_sent),
        ("arrived", &arrived),
    ] {
        assert_eq!(m.len() as u64, total, "seed {seed}: not every unit {name}");
        assert!(
            m.values().all(|n| *n == 1),
            "seed {seed}: a unit {name} twice"
        );
    }
}
