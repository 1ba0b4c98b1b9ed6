//! Redundant data bundling (002 §4.1.5, App. E) against an unmodified receiver.

mod common;
use common::*;
use thinstream_base::trace::{Record, TxReason, Units};
use thinstream_tcp::TcpConfig;

fn rdb_pair(profile: &str) -> Net {
    let cfg = TcpConfig::from_profile(profile).unwrap();
    Net::pair(&cfg, &TcpConfig::newreno(), ms(50))
}

/// (time ms, [(units, reason)]) of every data packet endpoint 0 sent.
fn packets(net: &Net) -> Vec<(u64, Vec<(Units, TxReason)>)> {
    net.traces[0]
        .iter()
        .filter_map(|r| match r {
            Record::PacketSent { time, data, .. } if !data.is_empty() => Some((
                time.as_nanos() / 1_000_000,
                data.iter().map(|d| (d.units, d.reason)).collect(),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn lost_segment_is_delivered_by_the_next_bundle() {
    let mut net = rdb_pair("newreno+rdb");
    let mut first = true;
    net.drop_rule = Some(Box::new(move |p| {
        let hit = p.from == 0 && p.data_index == Some(0) && first;
        first &= !hit;
        hit
    }));
    net.run_until(at(1000));
    net.send(0, &[1; 100]);
    net.run_until(at(1020));
    net.send(0, &[2; 100]);
    net.run_until(at(3000));
    let p = packets(&net);
    assert_eq!(p[0], (1000, vec![(Units::new(0, 100), TxReason::New)]));
    assert_eq!(
        p[1],
        (
            1020,
            vec![
                (Units::new(0, 100), TxReason::RedundantBundle),
                (Units::new(100, 200), TxReason::New)
            ]
        )
    );
    assert_eq!(p.len(), 2, "no retransmission needed: {p:?}");
    // The bundle arrives at 1070 and the unmodified receiver delivers both.
    assert_eq!(net.delivered_at(1, 0), Some(at(1070)));
    assert_eq!(net.delivered_at(1, 199), Some(at(1070)));
    assert_eq!(net.rx[1], [vec![1; 100], vec![2; 100]].concat());
    // The receiver's cumulative ACK covers both segments.
    let acked: Vec<Units> = net.traces[0]
        .iter()
        .filter_map(|r| match r {
            Record::Acked { units, .. } => Some(*units),
            _ => None,
        })
        .collect();
    assert_eq!(acked, vec![Units::new(0, 100), Units::new(100, 200)]);
    // The receiver saw units 0..100 once (the first copy was lost).
    let dup = net.traces[1].iter().any(|r| {
        matches!(
            r,
            Record::Arrived {
                duplicate: true,
                ..
            }
        )
    });
    assert!(!dup);
}

#[test]
fn bundles_start_at_the_cumulative_ack() {
    // 100-byte messages every 60 ms on a 100 ms RTT path: the bundle grows
    // until an ACK arrives, then drops the acknowledged bytes.
    let mut net = rdb_pair("newreno+rdb");
    net.run_until(at(1000));
    for i in 0..5u64 {
        net.run_until(at(1000 + 60 * i));
        net.send(0, &[i as u8; 100]);
    }
    net.run_until(at(3000));
    let p = packets(&net);
    let starts: Vec<(u64, u64)> = p.iter().map(|(t, d)| (*t, d[0].0.start)).collect();
    // 1000: [0,100). 1060: [0,200). The receiver ACKs the 2nd segment at
    // once (two segments pending), so ACK 200 reaches the sender at 1160:
    // 1120: [0,300) is sent before it; 1180: [200,400), trimmed.
    assert_eq!(starts[0], (1000, 0));
    assert_eq!(starts[1], (1060, 0));
    assert_eq!(starts[2], (1120, 0));
    assert_eq!(starts[3], (1180, 200));
    // Invariant: a redundant piece never starts below what was cumulatively
    // acknowledged when the packet left.
    let mut cum = 0u64;
    let mut acks: Vec<(u64, u64)> = Vec::new();
    for r in &net.traces[0] {
        if let Record::Acked { time, units } = r {
            acks.push((time.as_nanos() / 1_000_000, units.end));
        }
    }
    for (t, d) in &p {
        for (time, end) in &acks {
            if *time <= *t {
                cum = cum.max(*end);
            }
        }
        assert!(d[0].0.start >= cum, "packet at {t} starts below ACK {cum}");
        let total: u64 = d.iter().map(|x| x.0.len()).sum();
        assert!(total <= 1448);
    }
    assert_eq!(net.rx[1].len(), 500);
}

#[test]
fn bundle_limit_is_honoured() {
    // Limit 700 with 250-byte messages: at most one extra segment, and a
    // segment whose predecessor already carried a bundle that would not fit
    // goes alone (App. E refusal 5).
    let mut net = rdb_pair("newreno+rdb=700");
    net.run_until(at(1000));
    for i in 0..6u64 {
        net.run_until(at(1000 + 10 * i));
        net.send(0, &[i as u8; 250]);
    }
    net.run_until(at(3000));
    let p = packets(&net);
    let shapes: Vec<Vec<Units>> = p
        .iter()
        .map(|(_, d)| d.iter().map(|x| x.0).collect())
        .collect();
    assert_eq!(
        shapes,
        vec![
            vec![Units::new(0, 250)],
            vec![Units::new(0, 250), Units::new(250, 500)],
            vec![Units::new(500, 750)],
            vec![Units::new(500, 750), Units::new(750, 1000)],
            vec![Units::new(1000, 1250)],
            vec![Units::new(1000, 1250), Units::new(1250, 1500)],
        ]
    );
    for (_, d) in &p {
        assert!(d.iter().map(|x| x.0.len()).sum::<u64>() <= 700);
    }
    assert_eq!(net.rx[1].len(), 1500);
}

#[test]
fn timeout_retransmission_bundles_following_segments() {
    // Lose everything sent between 1000 and 1100 (three 100-byte messages):
    // the timeout retransmission of the first carries the other two.
    let mut net = rdb_pair("newreno+rdb");
    net.drop_rule = Some(Box::new(|p| {
        p.from == 0 && p.units.is_some() && p.time >= at(1000) && p.time < at(1100)
    }));
    net.run_until(at(1000));
    for i in 0..3u64 {
        net.run_until(at(1000 + 10 * i));
        net.send(0, &[i as u8; 100]);
    }
    net.run_until(at(5000));
    let p = packets(&net);
    assert_eq!(
        p[3],
        (
            2000,
            vec![
                (Units::new(0, 100), TxReason::TimeoutRetransmit),
                (Units::new(100, 300), TxReason::BundledOnRetransmit)
            ]
        )
    );
    assert_eq!(p.len(), 4, "{p:?}");
    assert_eq!(net.rx[1].len(), 300);
}
