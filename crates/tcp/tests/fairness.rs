//! Fairness smoke test: greedy New Reno flows sharing a drop-tail bottleneck
//! (the 002 §5.2.5 setting: 1000 kbit/s, RTT 100 ms) get equal shares.

mod common;
use common::*;
use thinstream_base::drive::{Outgoing, Transport};
use thinstream_base::trace::Record;
use thinstream_base::{Bitrate, Instant};
use thinstream_tcp::TcpConfig;

/// Bytes each server delivered within `[from, to)`.
fn delivered_between(net: &Net, ep: usize, from: Instant, to: Instant) -> u64 {
    net.traces[ep]
        .iter()
        .filter_map(|r| match r {
            Record::Delivered { time, bytes, .. } if *time >= from && *time < to => {
                Some(u64::from(*bytes))
            }
            _ => None,
        })
        .sum()
}

fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    s * s / (x.len() as f64 * q)
}

fn greedy(profile: &str, late_start_ms: u64) -> (Vec<u64>, f64) {
    let cfg = TcpConfig::from_profile(profile).unwrap();
    let mut net = Net::new(&cfg, &cfg, 2, ms(50));
    net.fwd.rate = Some(Bitrate(1_000_000));
    net.fwd.queue_bytes = 20_000;
    let chunk = vec![0x5A; 8192];
    let end = at(120_000);
    while net.now < end {
        for flow in 0..2 {
            if flow == 1 && net.now < at(late_start_ms) {
                continue;
            }
            let ep = 2 * flow;
            if !net.eps[ep].is_established() {
                continue;
            }
            loop {
                let now = net.now;
                let r = net.eps[ep].send(
                    now,
                    Outgoing {
                        stream: 0,
                        unordered: false,
                        payload: &chunk,
                    },
                );
                if r.is_err() {
                    break;
                }
            }
        }
        net.run_for(ms(10));
    }
    let from = at(20_000);
    let got: Vec<u64> = (0..2)
        .map(|f| delivered_between(&net, 2 * f + 1, from, end))
        .collect();
    let secs = (end - from).as_secs_f64();
    let util = got.iter().sum::<u64>() as f64 * 8.0 / secs / 1e6;
    assert!(net.fwd.dropped_by_queue > 0, "the queue must overflow");
    (got, util)
}

#[test]
fn two_greedy_newreno_flows_share_the_bottleneck_fairly() {
    for (profile, late) in [
        ("newreno", 0),
        ("newreno", 5_000),
        ("linux-2.6.23", 3_000),
        ("linux-modern", 0),
    ] {
        let (got, util) = greedy(profile, late);
        let x: Vec<f64> = got.iter().map(|b| *b as f64).collect();
        let j = jain(&x);
        eprintln!(
            "{profile}, late start {late} ms: Jain {j:.4}, bytes {got:?}, goodput {util:.3} Mbit/s"
        );
        assert!(
            j > 0.95,
            "{profile}, late start {late} ms: Jain {j:.3}, bytes {got:?}"
        );
        // Payload goodput of at least 85% of the 1 Mbit/s link (headers take ~3%).
        assert!(util > 0.85, "utilisation {util:.3} Mbit/s");
    }
}
