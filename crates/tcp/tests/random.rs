//! Randomized transfers under loss, reordering and duplication: the byte
//! stream must arrive exactly, in order, with every profile and mechanism.

mod common;
use common::*;
use thinstream_base::drive::{AppEvent, Outgoing, SendError, Transport};
use thinstream_base::trace::Record;
use thinstream_base::{Duration, Instant, Seed};
use thinstream_tcp::{State, TcpConfig};

const PROFILES: [&str; 9] = [
    "newreno",
    "newreno+all",
    "linux-2.6.23",
    "linux-2.6.23+lt",
    "linux-2.6.23+mfr",
    "linux-2.6.23+rdb",
    "linux-2.6.23+all",
    "linux-modern",
    "linux-modern+all+rdb=600",
];

/// One run: `total` bytes from client to server (and a few back), written
/// in random sizes at random times. Returns a failure description, if any.
fn run(seed: u64, total: usize, harsh: bool) -> Result<(), String> {
    let seed = Seed(seed);
    let mut rng = seed.derive("workload").rng();
    let profile = PROFILES[(seed.0 % PROFILES.len() as u64) as usize];
    let mut cfg = TcpConfig::from_profile(profile).unwrap();
    if seed.0 % 4 == 1 {
        cfg.sack = false;
    }
    let one_way = Duration::from_millis(5 + rng.below(60));
    let mut net = Net::pair(&cfg, &cfg, one_way);
    net.impair = Some(Impair {
        loss: if harsh { 0.25 } else { 0.10 },
        duplicate: 0.03,
        reorder: if harsh { 0.2 } else { 0.05 },
        reorder_max: Duration::from_millis(if harsh { 80 } else { 30 }),
        rng: seed.derive("impair").rng(),
    });
    // Harsh runs write small messages (thin-stream-like, RDB bundles).
    let max_write = if harsh { 300 } else { 3000 };
    let mut data = vec![0u8; total];
    rng.fill_bytes(&mut data);
    let back = b"server says hello".to_vec();
    let mut sent = 0usize;
    let mut sent_back = false;
    let deadline = Instant::from_secs(3600);
    while net.now < deadline {
        if net.eps[0].is_established() && sent < total {
            let n = (1 + rng.below(max_write) as usize).min(total - sent);
            let now = net.now;
            let r = net.eps[0].send(
                now,
                Outgoing {
                    stream: 0,
                    unordered: false,
                    payload: &data[sent..sent + n],
                },
            );
            match r {
                Ok(_) => sent += n,
                Err(SendError::BufferFull) => {}
                Err(e) => return Err(format!("{profile}: send failed: {e}")),
            }
            if sent == total {
                net.close(0);
            }
        }
        if !sent_back && net.eps[1].is_established() {
            let now = net.now;
            net.eps[1]
                .send(
                    now,
                    Outgoing {
                        stream: 0,
                        unordered: false,
                        payload: &back,
                    },
                )
                .map_err(|e| format!("server send: {e}"))?;
            sent_back = true;
        }
        let step = Duration::from_micros(rng.below(20_000));
        net.run_for(step);
        if sent == total && net.eps[0].is_closed() && net.eps[1].is_closed() {
            break;
        }
    }
    // Let straggling duplicates drain; nothing may change any more.
    net.run_for(Duration::from_secs(5));
    if net.rx[1] != data {
        let common = net.rx[1]
            .iter()
            .zip(&data)
            .take_while(|(a, b)| a == b)
            .count();
        return Err(format!(
            "{profile} sack={}: server got {} of {} bytes, first difference at {common}",
            cfg.sack,
            net.rx[1].len(),
            total
        ));
    }
    // Loss must have been exercised: retransmissions, or (RDB) redundant copies.
    let rtx = net
        .pieces(0)
        .iter()
        .filter(|(_, d)| d.reason.is_retransmission())
        .count();
    if net.dropped.is_empty() || rtx == 0 {
        return Err(format!(
            "{profile}: no loss exercised ({} drops, {rtx} retransmissions)",
            net.dropped.len()
        ));
    }
    if net.rx[0] != back {
        return Err(format!("{profile}: client got {:?}", net.rx[0]));
    }
    for (i, ep) in net.eps.iter().enumerate() {
        if ep.state() != State::Closed {
            return Err(format!("{profile}: endpoint {i} ended in {:?}", ep.state()));
        }
    }
    if !net.apps[1].contains(&AppEvent::Closed { error: None }) {
        return Err(format!(
            "{profile}: server did not close gracefully: {:?}",
            net.apps[1].last()
        ));
    }
    // Trace consistency: delivered units are contiguous from 0, and no unit
    // is reported acknowledged twice.
    let mut next = 0u64;
    for r in &net.traces[1] {
        if let Record::Delivered { units, .. } = r {
            if units.start != next {
                return Err(format!("{profile}: delivery gap at {next}"));
            }
            next = units.end;
        }
    }
    let mut acked: Vec<(u64, u64)> = net.traces[0]
        .iter()
        .filter_map(|r| match r {
            Record::Acked { units, .. } => Some((units.start, units.end)),
            _ => None,
        })
        .collect();
    acked.sort_unstable();
    let mut end = 0u64;
    for (s, e) in acked {
        if s != end {
            return Err(format!(
                "{profile}: Acked records overlap or leave a gap at {s} (expected {end})"
            ));
        }
        end = e;
    }
    if end != total as u64 {
        return Err(format!("{profile}: Acked covers {end} of {total}"));
    }
    Ok(())
}

/// `TCP_RANDOM_SEEDS=n` runs n seeds instead (deterministic either way).
fn sweep(seeds: u64, total: usize, harsh: bool) {
    let seeds = std::env::var("TCP_RANDOM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(seeds);
    let failures: Vec<String> = (0..seeds)
        .filter_map(|s| run(s, total, harsh).err().map(|e| format!("seed {s}: {e}")))
        .collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// 200 seeds × 10^5 bytes (about 0.2 s even in debug builds).
#[test]
fn streams_arrive_exactly_under_loss_reordering_duplication() {
    sweep(200, 100_000, false);
}

/// 25% loss, 20% of packets delayed up to 80 ms, small writes.
#[test]
fn streams_arrive_exactly_under_harsh_impairments() {
    sweep(100, 20_000, true);
}

#[test]
fn runs_are_deterministic() {
    let trace = |seed: u64| {
        let cfg = TcpConfig::from_profile("linux-modern+rdb").unwrap();
        let mut net = Net::pair(&cfg, &cfg, Duration::from_millis(20));
        net.impair = Some(Impair {
            loss: 0.1,
            duplicate: 0.05,
            reorder: 0.1,
            reorder_max: Duration::from_millis(15),
            rng: Seed(seed).rng(),
        });
        net.run_until(Instant::from_millis(100));
        for i in 0..200u64 {
            net.run_until(Instant::from_millis(100 + 7 * i));
            net.send(0, &[i as u8; 150]);
        }
        net.run_until(Instant::from_secs(30));
        assert_eq!(net.rx[1].len(), 200 * 150);
        (net.traces[0].clone(), net.traces[1].clone())
    };
    assert_eq!(trace(5), trace(5));
    assert_ne!(trace(5), trace(6));
}
