//! End-to-end sanity check against the documents' result (000 §6, 002
//! §5.3): on a thin stream (100-byte messages every 250 ms, RTT 100 ms,
//! random loss, delayed SACK off) the 002 §4.2 modifications cut the tail
//! of the delivery latency compared with unmodified lksctp.

use std::collections::BTreeMap;

use thinstream_base::trace::Record;
use thinstream_base::{Duration, Seed};
use thinstream_proto::testkit::{Pair, Side};
use thinstream_proto::Config;

/// Delivery latencies (ms) of every message, sender submit to receiver delivery.
fn latencies(spec: &str, seed: u64, messages: u32, loss: f64) -> Vec<u64> {
    let cfg = Config::from_preset(spec).unwrap().with_trace();
    let rx = Config::from_preset("rfc+nodelack").unwrap().with_trace();
    let mut p = Pair::new(cfg, rx, Duration::from_millis(50), Seed(seed));
    p.log_packets = false;
    p.connect();
    let mut link = Seed(seed).derive("loss").rng();
    p.impair = Some(Box::new(move |_, _| {
        if link.chance(loss) {
            vec![]
        } else {
            vec![Duration::ZERO]
        }
    }));
    for i in 0..messages {
        p.send(Side::Client, 0, false, &[i as u8; 100]).unwrap();
        p.drive_for(Duration::from_millis(250));
    }
    p.drive_for(Duration::from_secs(120));
    let mut sent = BTreeMap::new();
    for r in &p.client_trace {
        if let Record::Submitted { time, units, .. } = r {
            sent.insert(units.start, *time);
        }
    }
    let mut out = Vec::new();
    for r in &p.server_trace {
        if let Record::Delivered { time, units, .. } = r {
            out.push((*time - sent[&units.start]).as_millis());
        }
    }
    assert_eq!(out.len(), messages as usize, "{spec}: not all delivered");
    out
}

fn quantile(v: &mut [u64], q: f64) -> u64 {
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

#[test]
fn thin_modifications_cut_the_latency_tail() {
    let (mut lk, mut th) = (Vec::new(), Vec::new());
    for seed in 0..3 {
        lk.extend(latencies("linux+nodelack", seed, 800, 0.05));
        th.extend(latencies("thin+nodelack", seed, 800, 0.05));
    }
    let (lk99, th99) = (quantile(&mut lk, 0.99), quantile(&mut th, 0.99));
    let (lkmax, thmax) = (*lk.last().unwrap(), *th.last().unwrap());
    println!("p99 {lk99} -> {th99} ms, max {lkmax} -> {thmax} ms");
    // Loss-free messages take one one-way delay either way.
    assert_eq!(quantile(&mut th, 0.5), 50);
    assert!(th99 < lk99, "p99 {lk99} -> {th99}");
    assert!(thmax < lkmax, "max {lkmax} -> {thmax}");
    // lksctp waits at least RTO.min = 1 s for a lost message (thin: no FR).
    assert!(lk99 >= 1000, "{lk99}");
}
