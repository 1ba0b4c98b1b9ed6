//! With every mechanism off the association behaves bit for bit as the
//! RFC core did before the mechanisms existed (golden digests computed at
//! commit 17feffb), switched-off parameters change nothing, and mechanisms
//! that cannot trigger on a loss-free stream with IAT > RTT change nothing.

use thinstream_base::trace::Record;
use thinstream_base::{Duration, Seed};
use thinstream_proto::mechanism::{Mechanisms, Rdb, ThinDetection, ThinRule};
use thinstream_proto::testkit::{Pair, Side};
use thinstream_proto::Config;

fn fnv(h: &mut u64, s: &str) {
    for b in s.as_bytes() {
        *h ^= u64::from(*b);
        *h = h.wrapping_mul(0x100_0000_01b3);
    }
}

/// A lossy, reordering, two-way run of `messages` random messages; returns
/// the pair after both sides closed.
fn lossy_run(cfg: Config, seed: u64, messages: u32) -> Pair {
    let mut p = Pair::new(cfg.clone(), cfg, Duration::from_millis(30), Seed(seed));
    let mut link = Seed(seed).derive("link").rng();
    p.impair = Some(Box::new(move |_side, _pkt| {
        if link.chance(0.08) {
            return vec![];
        }
        let mut d = Duration::ZERO;
        if link.chance(0.05) {
            d = Duration::from_micros(link.below(40_000));
        }
        vec![d]
    }));
    p.connect_within(Duration::from_secs(300));
    let mut w = Seed(seed).derive("work").rng();
    for i in 0..messages {
        let big = w.chance(0.2);
        let len = 4 + w.below(if big { 3000 } else { 200 }) as usize;
        let payload = vec![(i % 251) as u8; len];
        let _ = p.send(Side::Client, (i % 3) as u16, w.chance(0.1), &payload);
        if w.chance(0.3) {
            let _ = p.send(Side::Server, 0, false, &payload[..4.min(len)]);
        }
        p.drive_for(Duration::from_micros(w.below(300_000)));
    }
    let now = p.now;
    thinstream_base::drive::Transport::close(&mut p.client, now);
    p.drive_for(Duration::from_secs(600));
    p
}

/// Digest of both traces and the packet log. Records the core did not
/// write before the mechanisms work (`DuplicateReported`, and `Thin`,
/// which only a thin-gated mechanism writes) are left out.
fn digest(p: &Pair) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for (name, t) in [("c", &p.client_trace), ("s", &p.server_trace)] {
        fnv(&mut h, name);
        for r in t.iter() {
            let s = format!("{r:?}");
            if !s.starts_with("DuplicateReported")
                && !s.starts_with("Thin ")
                && !s.starts_with("RttSample")
            {
                fnv(&mut h, &s);
            }
        }
    }
    for s in &p.sent {
        fnv(
            &mut h,
            &format!("{:?}{:?}{:?}{}", s.at, s.from, s.packet, s.dropped),
        );
    }
    h
}

// Computed with this file's `digest` on the tree of the commit before the
// mechanisms work (the RFC core alone).
// Recomputed once, for one deliberate change of the core: new data no
// longer waits for the delayed-SACK timer when it does not fit beside an
// owed SACK (it goes alone). With that change switched off the previous
// digests (16616101661027098558, 1695565393722294884, 15429199579578597593)
// were reproduced exactly, so nothing else moved.
const GOLDEN: [(u64, u64); 3] = [
    (1, 9804660011908260157),
    (2, 906396687212951347),
    (3, 16234418910058525378),
];

// Bit-for-bit: the rfc behaviour equals the pre-mechanisms core.
#[test]
fn rfc_matches_the_core_before_mechanisms() {
    let mut got = Vec::new();
    for (seed, _) in GOLDEN {
        let p = lossy_run(Config::default().with_trace(), seed, 150);
        got.push((seed, digest(&p)));
    }
    println!("digests: {got:?}");
    assert_eq!(got, GOLDEN.to_vec());
}

// Tuning parameters with their switches off change nothing (same seed,
// identical traces and packets).
#[test]
fn switched_off_parameters_change_nothing() {
    let mut tuned = Config::default().with_trace();
    tuned.mechanisms = Mechanisms {
        thin: ThinDetection {
            rule: ThinRule::TcpPacketsOut,
            pttfr: 7,
            fixed_threshold: Some(2),
            recompute_every: 5,
            trace: false,
        },
        thin_min_rto: Duration::from_millis(10),
        rdb: Rdb {
            enabled: false,
            only_when_thin: false,
            max_bytes: Some(100),
            only_when_iat_exceeds_rtt: true,
            max_packets_in_flight: Some(1),
        },
        ..Mechanisms::rfc()
    };
    for seed in [4, 5] {
        let a = lossy_run(Config::default().with_trace(), seed, 150);
        let b = lossy_run(tuned.clone(), seed, 150);
        assert_eq!(a.client_trace, b.client_trace);
        assert_eq!(a.server_trace, b.server_trace);
        assert_eq!(digest(&a), digest(&b));
    }
}

/// A loss-free thin stream with IAT 400 ms > RTT 100 ms (+ 200 ms delayed
/// SACK): every message is acknowledged before the next is sent.
fn idle_thin_stream(spec: &str) -> Pair {
    let cfg = Config::from_preset(spec).unwrap().with_trace();
    let mut p = Pair::new(
        cfg,
        Config::default().with_trace(),
        Duration::from_millis(50),
        Seed(8),
    );
    p.connect();
    for i in 0..40u32 {
        p.send(Side::Client, 0, false, &[i as u8; 120]).unwrap();
        p.drive_for(Duration::from_millis(400));
    }
    p
}

fn without_thin(t: &[Record]) -> Vec<Record> {
    t.iter()
        .filter(|r| !matches!(r, Record::Thin { .. }))
        .cloned()
        .collect()
}

// Mechanisms that act only on loss, on outstanding data or in congestion
// avoidance change nothing on such a stream (002 §4.1.5: RDB "is not
// active if only one segment is on the wire at any given time"; the
// restart correction only acts on a partial ack; LT, mFR, bundling on FR,
// ER, EFR only after a loss; 004 CC only on loss / in congestion avoidance).
// The thin verdict is traced (Record::Thin) and removed before comparing.
#[test]
fn mechanisms_that_never_trigger_change_nothing() {
    let base = idle_thin_stream("rfc");
    for spec in [
        "rfc+rdb",
        "rfc+rdb-always",
        "rfc+restart",
        "rfc+lt",
        "rfc+mfr",
        "rfc+bfr",
        "rfc+er-byte",
        "rfc+er-packet",
        "rfc+efr",
        "rfc+cc004",
        "rfc+stcp",
        "rfc+thin-detect",
        "rfc+lt+mfr+bfr+restart+rdb+er-packet+cc004+stcp",
    ] {
        let p = idle_thin_stream(spec);
        assert_eq!(
            without_thin(&p.client_trace),
            without_thin(&base.client_trace),
            "{spec}"
        );
        assert_eq!(p.server_trace, base.server_trace, "{spec}");
        assert_eq!(digest(&p), digest(&base), "{spec}");
    }
    // The verdict is traced when a thin-gated mechanism is on, never for rfc.
    let thin = idle_thin_stream("rfc+rdb");
    assert!(thin
        .client_trace
        .iter()
        .any(|r| matches!(r, Record::Thin { thin: true, .. })));
    assert!(!base
        .client_trace
        .iter()
        .any(|r| matches!(r, Record::Thin { .. })));
}
