//! The receiver's ACK schedule and the thin-stream trace records.

mod common;
use common::*;
use thinstream_base::trace::{Record, Units};
use thinstream_base::Instant;
use thinstream_tcp::TcpConfig;

/// Times at which endpoint 0 saw units acknowledged.
fn acked(net: &Net) -> Vec<(Instant, Units)> {
    net.traces[0]
        .iter()
        .filter_map(|r| match r {
            Record::Acked { time, units } => Some((*time, *units)),
            _ => None,
        })
        .collect()
}

/// A pair 50 ms apart, endpoint 0 writing `n` 100-byte messages 150 ms
/// apart from 1 s on (more than an RTT: no coalescing; less than the RTO),
/// run until `until` ms.
fn spaced_writes(cfg: &TcpConfig, n: u64, until: u64) -> Net {
    let mut net = Net::pair(cfg, cfg, ms(50));
    net.run_until(at(1000));
    for i in 0..n {
        net.run_until(at(1000 + 150 * i));
        net.send(0, &[1; 100]);
    }
    net.run_until(at(until));
    net
}

#[test]
fn single_segment_waits_for_the_delayed_ack_timer() {
    let cfg = TcpConfig::newreno(); // 200 ms delayed ACK
    let mut net = Net::pair(&cfg, &cfg, ms(50));
    net.run_until(at(1000));
    net.send(0, &[1; 100]);
    net.run_until(at(3000));
    // Arrives 1050, ACK leaves 1250, reaches the sender 1300.
    assert_eq!(acked(&net), vec![(at(1300), Units::new(0, 100))]);
}

#[test]
fn every_second_segment_is_acknowledged_at_once() {
    let cfg = TcpConfig::newreno();
    let mut net = Net::pair(&cfg, &cfg, ms(50));
    net.run_until(at(1000));
    net.send(0, &[1; 100]);
    net.run_until(at(1010));
    net.send(0, &[2; 100]);
    net.run_until(at(3000));
    // The second segment (arrives 1060) triggers the ACK for both.
    assert_eq!(
        acked(&net),
        vec![
            (at(1110), Units::new(0, 100)),
            (at(1110), Units::new(100, 200))
        ]
    );
}

#[test]
fn linux_acks_quickly_after_a_long_gap() {
    // linux-2.6.23: 16 quick ACKs at start, then 40 ms delayed ACKs, but a
    // segment arriving more than an RTO after the previous one is ACKed at once.
    // Messages 150 ms apart: only the quick-ACK budget speeds up the ACKs.
    let mut net = spaced_writes(&TcpConfig::linux_2_6_23(), 17, 4000);
    let a = acked(&net);
    assert_eq!(a[15], (at(3350), Units::new(1500, 1600)), "16th: quick ACK");
    // The 17th segment (sent 3400, arrives 3450) waits for the 40 ms timer.
    assert_eq!(a[16], (at(3540), Units::new(1600, 1700)));
    // Now a message after a 1.6 s gap (> RTO): ACKed on arrival.
    net.run_until(at(5000));
    net.send(0, &[2; 100]);
    net.run_until(at(6000));
    assert_eq!(
        acked(&net).last().copied().unwrap(),
        (at(5100), Units::new(1700, 1800))
    );
}

#[test]
fn thin_records_follow_packets_out() {
    let cfg = TcpConfig::linux_2_6_23();
    let mut net = Net::pair(&cfg, &cfg, ms(50));
    net.run_until(at(500));
    for _ in 0..10 {
        net.send(0, &[1; 1448]);
    }
    net.run_until(at(1000));
    for _ in 0..5 {
        net.send(0, &[1; 100]);
    }
    net.run_until(at(2000));
    let thin: Vec<(Instant, bool, u32)> = net.traces[0]
        .iter()
        .filter_map(|r| match r {
            Record::Thin {
                time,
                thin,
                packets_in_flight,
            } => Some((*time, *thin, *packets_in_flight)),
            _ => None,
        })
        .collect();
    assert_eq!(thin.first().map(|t| t.1), Some(true));
    // Five segments out at 1000: not thin.
    assert!(thin.contains(&(at(1000), false, 4)), "{thin:?}");
    assert!(thin.iter().any(|t| t.0 > at(1000) && t.1), "{thin:?}");
    assert!(net.traces[0]
        .iter()
        .any(|r| matches!(r, Record::Congestion { cwnd, .. } if *cwnd > 3 * 1448)));
}

#[test]
fn duplicate_arrivals_are_split_from_new_bytes() {
    // RDB without loss: every bundle repeats bytes the receiver already has.
    let cfg = TcpConfig::from_profile("newreno+rdb").unwrap();
    let mut net = Net::pair(&cfg, &TcpConfig::newreno(), ms(50));
    net.run_until(at(1000));
    net.send(0, &[1; 100]);
    net.run_until(at(1020));
    net.send(0, &[2; 100]);
    net.run_until(at(2000));
    let arrived: Vec<(Units, bool)> = net.traces[1]
        .iter()
        .filter_map(|r| match r {
            Record::Arrived {
                units, duplicate, ..
            } => Some((*units, *duplicate)),
            _ => None,
        })
        .collect();
    assert_eq!(
        arrived,
        vec![
            (Units::new(0, 100), false),
            (Units::new(0, 100), true),
            (Units::new(100, 200), false)
        ]
    );
    assert_eq!(net.rx[1].len(), 200);
}

#[test]
fn linux_modern_acks_a_small_pushed_segment_when_the_application_reads_it() {
    // Linux tcp_cleanup_rbuf: the read that empties the receive queue after
    // a pushed segment shorter than the receive MSS is acknowledged at once,
    // so a thin stream's segments are not held for the 40 ms delayed ACK
    // (Linux 6.18 on the bench workload: ACKs one path RTT after the data).
    // 20 messages 150 ms apart: the 16 quick ACKs are used up after 16.
    let net = spaced_writes(&TcpConfig::linux_modern(), 20, 5000);
    let a = acked(&net);
    assert_eq!(a.len(), 20);
    for (i, (t, u)) in a.iter().enumerate() {
        let i = i as u64;
        assert_eq!(*u, Units::new(100 * i, 100 * i + 100));
        assert_eq!(
            *t,
            at(1100 + 150 * i),
            "message {i}: ACK one RTT after sending"
        );
    }
    // The older Linux profile keeps the delayed ACK for the 17th onwards.
    let net = spaced_writes(&TcpConfig::linux_2_6_23(), 20, 5000);
    assert_eq!(acked(&net)[16], (at(3540), Units::new(1600, 1700)));
}

#[test]
fn an_interactive_linux_receiver_still_delays_the_ack_for_its_reply() {
    // Request-response: the server answers each request at once, so it is in
    // pingpong mode and its ACK rides on the reply rather than going alone.
    let cfg = TcpConfig::linux_modern();
    let mut net = Net::pair(&cfg, &cfg, ms(50));
    net.run_until(at(1000));
    let mut pure_acks_after_quick = 0;
    for i in 0..30u64 {
        net.run_until(at(1000 + 200 * i));
        net.send(0, &[1; 100]);
        net.run_until(at(1000 + 200 * i + 50));
        let before = net.pieces(1).len();
        net.send(1, &[2; 100]);
        net.run_until(at(1000 + 200 * i + 51));
        assert_eq!(net.pieces(1).len(), before + 1, "reply {i} sent");
    }
    net.run_until(at(8000));
    for r in &net.traces[1] {
        if let Record::PacketSent { time, data, .. } = r {
            if data.is_empty() && *time > at(1000 + 200 * 20) {
                pure_acks_after_quick += 1;
            }
        }
    }
    assert_eq!(
        pure_acks_after_quick, 0,
        "the server's ACKs ride on its replies"
    );
}
