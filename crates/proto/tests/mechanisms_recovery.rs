//! Loss-recovery mechanisms pinned to the documents: modified fast
//! retransmit (002 §4.2.6), Early Retransmit byte- and packet-based (003
//! §2.2, §2.3), early fast retransmit (000 §2), bundling on fast retransmit
//! (002 §4.2.7), redundant data bundling (002 §4.2.8), the 004 congestion
//! decrease, duplicate-TSN reports.

mod mech_util;

use mech_util::*;
use thinstream_base::trace::{Record, TxReason};
use thinstream_base::{Duration, Instant};
use thinstream_proto::testkit::{Pair, Side};

/// `n` messages of `len` bytes, `gap` apart, each in its own packet; the
/// messages in `lost` lose their first transmission. Returns the pair and
/// the time of the first send.
fn spaced(
    spec: &str,
    receiver: &str,
    one_way_ms: u64,
    n: u32,
    len: usize,
    gap_ms: u64,
    lost: &[u32],
) -> (Pair, Instant, u64) {
    let mut p = pair(preset(spec), preset(receiver), one_way_ms, 11);
    warm_up(&mut p, 2, Duration::from_millis(500));
    let t0 = p.now;
    let first_unit = client_data(&p).last().unwrap().1 + 1;
    for i in 0..n {
        p.drive_until(t0 + Duration::from_millis(gap_ms * u64::from(i)));
        if lost.contains(&i) {
            p.drop_tsn(Side::Client, next_tsn(&p), 1);
        }
        send_now(&mut p, len, i);
    }
    (p, t0, first_unit)
}

// 002 §4.2.6: thin (1 packet outstanding behind the loss) -> fast
// retransmit on the first missing report; RFC waits for the timeout.
#[test]
fn modified_fast_retransmit_on_first_report_when_thin() {
    for (spec, want) in [
        ("rfc+nodelack", (1000, TxReason::TimeoutRetransmit)),
        ("rfc+nodelack+mfr", (110, TxReason::FastRetransmit)),
    ] {
        // Message 0 lost at t0, message 1 at t0+10 ms; its SACK (one missing
        // report) arrives at t0 + 110 ms.
        let (mut p, t0, u0) = spaced(spec, "rfc+nodelack", 50, 2, 100, 10, &[0]);
        p.drive_for(Duration::from_secs(3));
        let r = retransmissions_of(&p, u0);
        assert_eq!((ms(r[0].0, t0), r[0].1), want, "{spec}: {r:?}");
        assert_eq!(delivered_tags(&mut p), vec![0, 1]);
    }
}

// 002 §4.2.6: not thin (8 packets in flight) -> the configured threshold
// still applies: FR at the 3rd report (rfc), at the 4th with frt=4.
#[test]
fn modified_fast_retransmit_keeps_threshold_when_thick() {
    // Messages every 10 ms; the SACK of message k arrives at t0 + 10k + 100.
    for (spec, want) in [
        ("rfc+nodelack", 130),
        ("rfc+nodelack+mfr", 130),
        ("rfc+nodelack+mfr+frt=4", 140),
    ] {
        let (mut p, t0, u0) = spaced(spec, "rfc+nodelack", 50, 8, 100, 10, &[0]);
        p.drive_for(Duration::from_secs(3));
        let r = retransmissions_of(&p, u0);
        assert_eq!(
            (ms(r[0].0, t0), r[0].1),
            (want, TxReason::FastRetransmit),
            "{spec}: {r:?}"
        );
        assert_eq!(delivered_tags(&mut p), (0..8).collect::<Vec<_>>());
    }
}

// 003 §2.3: five 200-byte messages in five packets, the 4th lost. Packet-
// based ER: 2 packets outstanding, 1 acknowledged -> retransmit as soon as
// the 5th is reported. Byte-based ER: ownd (400 B) < SMSS, so
// `ownd - SMSS` can never be acknowledged -> the timeout.
#[test]
fn packet_based_early_retransmit_003() {
    // One-way 10 ms, 5 ms between messages: SACK of message 4 (the 5th) at
    // t0 + 40 ms; SACK of message 2 restarts T3 at t0 + 30 ms (RTO 1 s).
    for (spec, want) in [
        ("rfc+nodelack", (1030, TxReason::TimeoutRetransmit)),
        ("rfc+nodelack+er-byte", (1030, TxReason::TimeoutRetransmit)),
        ("rfc+nodelack+er-packet", (40, TxReason::EarlyRetransmit)),
    ] {
        let (mut p, t0, u0) = spaced(spec, "rfc+nodelack", 10, 5, 200, 5, &[3]);
        p.drive_for(Duration::from_secs(3));
        let r = retransmissions_of(&p, u0 + 3);
        assert_eq!(r.len(), 1, "{spec}: {r:?}");
        assert_eq!((ms(r[0].0, t0), r[0].1), want, "{spec}: {r:?}");
        assert_eq!(delivered_tags(&mut p), (0..5).collect::<Vec<_>>());
    }
}

// 003 §2.2: byte-based ER does work with large segments: three 1000-byte
// messages (ownd 3000 < 4*SMSS), the first lost: when 2000 >= ownd - SMSS
// bytes are acknowledged (2nd report) it fires; RFC needs 3 reports.
#[test]
fn byte_based_early_retransmit_with_large_messages() {
    for (spec, want) in [
        ("rfc+nodelack", TxReason::TimeoutRetransmit),
        ("rfc+nodelack+er-byte", TxReason::EarlyRetransmit),
        ("rfc+nodelack+er-packet", TxReason::EarlyRetransmit),
    ] {
        let (mut p, t0, u0) = spaced(spec, "rfc+nodelack", 10, 3, 1000, 5, &[0]);
        p.drive_for(Duration::from_secs(3));
        let r = retransmissions_of(&p, u0);
        let at = if want == TxReason::TimeoutRetransmit {
            1000
        } else {
            30
        };
        assert_eq!((ms(r[0].0, t0), r[0].1), (at, want), "{spec}: {r:?}");
        assert_eq!(delivered_tags(&mut p), vec![0, 1, 2]);
    }
}

// 003 §2.2/§2.3: ER only when no new data can be sent (nothing unsent,
// or the peer's rwnd does not admit it); and never with one packet.
#[test]
fn early_retransmit_conditions() {
    use thinstream_proto::mechanism::{EarlyRetransmit, Mechanisms, OutstandingView};
    let m = Mechanisms {
        early_retransmit: EarlyRetransmit::Packets,
        ..Mechanisms::rfc()
    };
    let o = OutstandingView {
        packets: 3,
        packets_acked: 2,
        bytes: 600,
        bytes_acked: 400,
        smss: 1444,
        can_send_new: false,
        dup_threshold: 3,
    };
    assert!(m.early_retransmit(&o));
    assert!(!m.early_retransmit(&OutstandingView {
        can_send_new: true,
        ..o
    }));
    assert!(!m.early_retransmit(&OutstandingView {
        packets_acked: 1,
        ..o
    }));
    assert!(!m.early_retransmit(&OutstandingView {
        packets: 4,
        packets_acked: 3,
        ..o
    }));
    assert!(!m.early_retransmit(&OutstandingView {
        packets: 1,
        packets_acked: 0,
        ..o
    }));
    // With four reports needed (RFC 2960, lksctp 2.6.15) the bound is
    // `threshold + 1` = 5 packets: 4 outstanding, 3 acknowledged fires.
    let four = OutstandingView {
        packets: 4,
        packets_acked: 3,
        dup_threshold: 4,
        ..o
    };
    assert!(m.early_retransmit(&four));
    assert!(!m.early_retransmit(&OutstandingView {
        packets_acked: 2,
        ..four
    }));
    assert!(!m.early_retransmit(&OutstandingView {
        packets: 5,
        packets_acked: 4,
        ..four
    }));
    let b = Mechanisms {
        early_retransmit: EarlyRetransmit::Bytes,
        ..Mechanisms::rfc()
    };
    // ownd <= SMSS: "ownd - SMSS can not be acknowledged" (003 §2.3).
    assert!(!b.early_retransmit(&o));
    let big = OutstandingView {
        bytes: 3000,
        bytes_acked: 1556,
        ..o
    };
    assert!(b.early_retransmit(&big));
    assert!(!b.early_retransmit(&OutstandingView {
        bytes_acked: 1555,
        ..big
    }));
    assert!(!b.early_retransmit(&OutstandingView {
        bytes: 5776,
        bytes_acked: 5000,
        ..big
    }));
    // ... but below 5*SMSS with a threshold of four.
    assert!(b.early_retransmit(&OutstandingView {
        bytes: 5776,
        bytes_acked: 5000,
        dup_threshold: 4,
        ..big
    }));
    assert!(!Mechanisms::rfc().early_retransmit(&big));
}

// 000 §2: FreeBSD-style EFR retransmits after SRTT + RTTVAR while the
// flight is below cwnd, without slow start (cwnd - 1 MTU). `efr-min=0`
// lifts FreeBSD's 250 ms minimum timer to show the SRTT + RTTVAR rule.
#[test]
fn early_fast_retransmit_timer() {
    let (mut p, t0, u0) = spaced(
        "rfc+nodelack+efr+efr-min=0",
        "rfc+nodelack",
        50,
        1,
        100,
        10,
        &[0],
    );
    let cwnd = p.client.congestion().cwnd;
    let srtt = p.client.srtt().unwrap();
    assert_eq!(srtt, Duration::from_millis(100));
    p.drive_for(Duration::from_secs(3));
    let r = retransmissions_of(&p, u0);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0].1, TxReason::EarlyFastRetransmit);
    // RTTVAR after two 100 ms samples: 50 -> 37.5 ms.
    assert_eq!(r[0].0 - t0, srtt + Duration::from_micros(37_500));
    assert_eq!(
        p.client.congestion().cwnd,
        cwnd - p.client.config().mtu_bytes()
    );
    assert_eq!(delivered_tags(&mut p), vec![0]);
    // FreeBSD's default minimum timer: the early retransmission waits 250 ms.
    let (mut m, t0, u0) = spaced("rfc+nodelack+efr", "rfc+nodelack", 50, 1, 100, 10, &[0]);
    m.drive_for(Duration::from_secs(3));
    let r = retransmissions_of(&m, u0);
    assert_eq!(
        (ms(r[0].0, t0), r[0].1),
        (250, TxReason::EarlyFastRetransmit)
    );
    // Off: the same loss waits for T3.
    let (mut q, t0, u0) = spaced("rfc+nodelack", "rfc+nodelack", 50, 1, 100, 10, &[0]);
    q.drive_for(Duration::from_secs(3));
    let r = retransmissions_of(&q, u0);
    assert_eq!(
        (ms(r[0].0, t0), r[0].1),
        (1000, TxReason::TimeoutRetransmit)
    );
}

fn packet_with(p: &Pair, unit: u64, reason: TxReason) -> Vec<(u64, TxReason)> {
    p.client_trace
        .iter()
        .find_map(|r| match r {
            Record::PacketSent { data, .. }
                if data
                    .iter()
                    .any(|d| d.units.start == unit && d.reason == reason) =>
            {
                Some(data.iter().map(|d| (d.units.start, d.reason)).collect())
            }
            _ => None,
        })
        .unwrap_or_default()
}

// 002 §4.2.7: message 0 lost, message 1 reported, message 2 still in
// flight: with bundling on FR the fast retransmission carries 0 and 2;
// the unmodified (rfc) receiver delivers each message once and reports
// the duplicate TSN, which the sender records (Record::DuplicateReported).
#[test]
fn bundling_on_fast_retransmit() {
    for (spec, want) in [
        ("rfc+nodelack+mfr", vec![(0, TxReason::FastRetransmit)]),
        (
            "rfc+nodelack+mfr+bfr",
            vec![
                (0, TxReason::FastRetransmit),
                (2, TxReason::BundledOnRetransmit),
            ],
        ),
    ] {
        let (mut p, _t0, u0) = spaced(spec, "rfc+nodelack", 50, 3, 100, 20, &[0]);
        p.drive_for(Duration::from_secs(3));
        let got: Vec<(u64, TxReason)> = packet_with(&p, u0, TxReason::FastRetransmit)
            .into_iter()
            .map(|(u, r)| (u - u0, r))
            .collect();
        assert_eq!(got, want, "{spec}");
        assert_eq!(delivered_tags(&mut p), vec![0, 1, 2]);
        let dups: Vec<u64> = p
            .client_trace
            .iter()
            .filter_map(|r| match r {
                Record::DuplicateReported { units, .. } => Some(units.start - u0),
                _ => None,
            })
            .collect();
        let want_dups: Vec<u64> = if want.len() == 2 { vec![2] } else { vec![] };
        assert_eq!(dups, want_dups, "{spec}");
    }
}

// 002 §4.2.8: with RDB the packet after a loss carries the lost chunk
// (oldest first, TSNs increasing), so it arrives one IAT later without any
// retransmission; the rfc receiver delivers every message exactly once.
#[test]
fn redundant_data_bundling_recovers_with_the_next_packet() {
    // IAT 40 ms, RTT 100 ms: 2-3 packets in flight (thin).
    let (mut p, t0, u0) = spaced("rfc+nodelack+rdb", "rfc+nodelack", 50, 6, 100, 40, &[2]);
    p.drive_for(Duration::from_secs(3));
    // Message 3's packet (sent at t0 + 120 ms) carries 1, 2 and 3: message 1
    // is not acknowledged yet at 120 ms (its SACK comes at 140 ms).
    let pkt = packet_with(&p, u0 + 3, TxReason::New);
    let rel: Vec<(u64, TxReason)> = pkt.iter().map(|(u, r)| (u - u0, *r)).collect();
    assert_eq!(
        rel,
        vec![
            (1, TxReason::RedundantBundle),
            (2, TxReason::RedundantBundle),
            (3, TxReason::New)
        ]
    );
    // Unit 2 arrived first at t0 + 120 + 50 ms, from that packet.
    let arrived = p.server_trace.iter().find_map(|r| match r {
        Record::Arrived {
            time,
            units,
            duplicate: false,
            ..
        } if units.start == u0 + 2 => Some(*time),
        _ => None,
    });
    assert_eq!(arrived.map(|t| ms(t, t0)), Some(170));
    assert!(!client_data(&p)
        .iter()
        .any(|d| matches!(d.2, TxReason::FastRetransmit | TxReason::TimeoutRetransmit)));
    assert_eq!(delivered_tags(&mut p), (0..6).collect::<Vec<_>>());
    // The rfc receiver saw duplicate TSNs and reported them.
    assert!(p
        .client_trace
        .iter()
        .any(|r| matches!(r, Record::DuplicateReported { .. })));
}

// RDB's byte limit and packets-in-flight cap (002 §4.1.5, §7.3).
#[test]
fn rdb_limits() {
    // rdb-bytes=250: new (100) + one bundled (100) fit, a second does not.
    let (p, _, u0) = spaced(
        "rfc+nodelack+rdb-bytes=250",
        "rfc+nodelack",
        50,
        6,
        100,
        40,
        &[2],
    );
    let pkt = packet_with(&p, u0 + 3, TxReason::New);
    assert_eq!(pkt.len(), 2, "{pkt:?}");
    assert_eq!(pkt[0], (u0 + 1, TxReason::RedundantBundle));
    // rdb-pif=1: message 3 goes out with 2 packets in flight: no bundling.
    let (p, _, u0) = spaced(
        "rfc+nodelack+rdb-pif=1",
        "rfc+nodelack",
        50,
        6,
        100,
        40,
        &[2],
    );
    assert_eq!(
        packet_with(&p, u0 + 3, TxReason::New),
        vec![(u0 + 3, TxReason::New)]
    );
    // rdb-iat: IAT 40 ms < SRTT 100 ms: no bundling.
    let (p, _, u0) = spaced("rfc+nodelack+rdb-iat", "rfc+nodelack", 50, 6, 100, 40, &[2]);
    assert_eq!(
        packet_with(&p, u0 + 3, TxReason::New),
        vec![(u0 + 3, TxReason::New)]
    );
    // Not thin (thin-limit=1 means never thin): nothing; rdb-always ignores it.
    let (p, _, u0) = spaced(
        "rfc+nodelack+rdb+thin-limit=1",
        "rfc+nodelack",
        50,
        6,
        100,
        40,
        &[2],
    );
    assert_eq!(
        packet_with(&p, u0 + 3, TxReason::New),
        vec![(u0 + 3, TxReason::New)]
    );
    let (p, _, u0) = spaced(
        "rfc+nodelack+rdb-always+thin-limit=1",
        "rfc+nodelack",
        50,
        6,
        100,
        40,
        &[2],
    );
    assert_eq!(packet_with(&p, u0 + 3, TxReason::New).len(), 3);
}

/// cwnd just before and just after the first fast retransmit of a burst
/// whose first packet is lost.
fn cwnd_around_first_loss(spec: &str) -> (u32, u32, u32) {
    let mut c = preset(spec);
    c.initial_cwnd = Some(40_000);
    let mut p = pair(c, preset("rfc+nodelack"), 50, 21);
    let before = p.client.congestion().cwnd;
    // Lose the first packet of the burst.
    let mut first = true;
    p.drop_next(Side::Client, 1, move |pkt| {
        let has = pkt
            .chunks
            .iter()
            .any(|c| matches!(c, thinstream_proto::wire::Chunk::Data(_)));
        if has && first {
            first = false;
            return true;
        }
        false
    });
    for i in 0..20 {
        send_now(&mut p, 1000, i);
    }
    p.drive_for(Duration::from_secs(2));
    let after = p
        .client_trace
        .iter()
        .find_map(|r| match r {
            Record::Congestion { cwnd, ssthresh, .. } if *cwnd != before => {
                Some((*cwnd, *ssthresh))
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(delivered_tags(&mut p), (0..20).collect::<Vec<_>>());
    (before, after.0, after.1)
}

// 004 §4 eq. 2: on the first loss indication cwnd := 0.875 cwnd (rfc: 1/2).
#[test]
fn congestion_decrease_004() {
    assert_eq!(cwnd_around_first_loss("rfc"), (40_000, 20_000, 20_000));
    assert_eq!(
        cwnd_around_first_loss("rfc+cc004"),
        (40_000, 35_000, 35_000)
    );
}

// 003 §4.1 (Fig. 2, Fig. 4) against its baseline, lksctp 2.6.15, which
// needs four missing reports (003 footnote 4), with Table 1's timers and
// 40 ms SACK delay. A burst of messages 1 ms apart, 15 ms one way:
// - first of 4 lost: 4 packets outstanding, the 3 others acknowledged by
//   gap -> packet-based ER at the 3rd report (SACK of the 4th message,
//   t0 + 3 + 30 ms); the standard version never gets a 4th report and
//   waits for T3 (RTO 100 ms after two 70 ms samples of the warm-up, each
//   delayed by the receiver's 40 ms SACK timer: 70 + 4*26.25 = 175 ms).
// - 4th of 7 lost (003 §4.1: "does not have to wait for duplicate
//   acknowledgments generated by the next burst"): ER at the SACK of
//   message 7 (t0 + 6 + 30); standard: T3, restarted when the cum ack
//   reached message 3 (SACK of message 5, t0 + 4 + 30), with the RTO
//   recomputed after the 31 ms sample of message 1 (182.9 ms) -> t0 + 216.
// - last of 4 lost: no report at all before the next burst, so ER and
//   standard both time out (003: the last message "similar to standard
//   SCTP, required about 200 ms"), T3 restarted by the delayed SACK of
//   message 3 (t0 + 2 + 15 + 40 + 15) with RTO 182.9 ms -> t0 + 254.
#[test]
fn packet_based_early_retransmit_against_a_four_report_baseline() {
    const TABLE1: &str = "+frt=4+delack=40+rto-initial=200+rto-min=100+rto-max=400";
    let cases: [(u32, u32, &str, (u64, TxReason)); 6] = [
        (4, 0, "", (175, TxReason::TimeoutRetransmit)),
        (4, 0, "+er-packet", (33, TxReason::EarlyRetransmit)),
        (7, 3, "", (216, TxReason::TimeoutRetransmit)),
        (7, 3, "+er-packet", (36, TxReason::EarlyRetransmit)),
        (4, 3, "", (254, TxReason::TimeoutRetransmit)),
        (4, 3, "+er-packet", (254, TxReason::TimeoutRetransmit)),
    ];
    for (n, lost, mech, want) in cases {
        let spec = format!("rfc{TABLE1}{mech}");
        let (mut p, t0, u0) = spaced(&spec, "rfc+delack=40", 15, n, 200, 1, &[lost]);
        p.drive_for(Duration::from_secs(3));
        let r = retransmissions_of(&p, u0 + u64::from(lost));
        assert_eq!(r.len(), 1, "{spec} n={n} lost={lost}: {r:?}");
        assert_eq!(
            (ms(r[0].0, t0), r[0].1),
            want,
            "{spec} n={n} lost={lost}: {r:?}"
        );
        assert_eq!(delivered_tags(&mut p), (0..n).collect::<Vec<_>>());
    }
}

// The `linux` base fast-retransmits after 3 missing reports (lksctp
// 2.6.16.13: `tsn_missing_report >= 3`, 002 App. F; 000 §5.1). In the
// thin stream of 002 Fig. 5.26(a) (RTT 100 ms, a message every 250 ms,
// delayed SACK off) a lost message is then fast-retransmitted when the
// SACK of the third later message returns (t0 + 750 + 100 ms), before the
// 1 s RTO; with 2.6.15's four reports (`+frt=4`, 003 footnote 4) the T3
// timer (started at t0, RTO.Min 1 s) fires first.
#[test]
fn linux_fast_retransmits_after_three_reports() {
    for (spec, want) in [
        ("linux+nodelack", (850, TxReason::FastRetransmit)),
        ("linux+nodelack+frt=4", (1000, TxReason::TimeoutRetransmit)),
    ] {
        let (mut p, t0, u0) = spaced(spec, "linux+nodelack", 50, 5, 100, 250, &[0]);
        p.drive_for(Duration::from_secs(5));
        let r = retransmissions_of(&p, u0);
        assert_eq!(r.len(), 1, "{spec}: {r:?}");
        assert_eq!((ms(r[0].0, t0), r[0].1), want, "{spec}: {r:?}");
        assert_eq!(delivered_tags(&mut p), (0..5).collect::<Vec<_>>());
    }
}
