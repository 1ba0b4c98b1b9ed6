//! Flow-level tests on hand-built traces; every expected value is worked out
//! in the comment above it.

use thinstream_base::trace::{Record, SentData, TxReason, Units};
use thinstream_base::{Duration, Instant};

use crate::*;

fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}
fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}
fn submit(at: u64, id: u64, stream: u16, units: (u64, u64), bytes: u32) -> Record {
    Record::Submitted {
        time: t(at),
        message: id,
        stream,
        bytes,
        unordered: false,
        units: Units::new(units.0, units.1),
    }
}
fn sent(at: u64, pieces: &[(u64, u64, u32, TxReason)]) -> Record {
    Record::PacketSent {
        time: t(at),
        wire_bytes: 0,
        data: pieces
            .iter()
            .map(|&(s, e, bytes, reason)| SentData {
                units: Units::new(s, e),
                bytes,
                reason,
            })
            .collect(),
        control: 0,
    }
}
fn acked(at: u64, s: u64, e: u64) -> Record {
    Record::Acked {
        time: t(at),
        units: Units::new(s, e),
    }
}
fn arrived(at: u64, s: u64, e: u64, bytes: u32, duplicate: bool) -> Record {
    Record::Arrived {
        time: t(at),
        units: Units::new(s, e),
        bytes,
        duplicate,
    }
}
fn delivered(at: u64, stream: u16, s: u64, e: u64, bytes: u32) -> Record {
    Record::Delivered {
        time: t(at),
        stream,
        bytes,
        unordered: false,
        units: Units::new(s, e),
    }
}
fn received(at: u64) -> Record {
    Record::PacketReceived {
        time: t(at),
        wire_bytes: 0,
    }
}
fn opts(owd: OwdCorrection) -> AnalysisOptions {
    AnalysisOptions {
        owd,
        summary_latency: LatencyKind::Application,
    }
}

/// SCTP, one stream, one chunk per message, 20 ms one way:
/// m0 at 0 ok; m1 at 100 lost, fast-retransmitted at 300; m2 at 200 ok but
/// head-of-line blocked behind m1 until 320.
fn hol_trace() -> (Vec<Record>, Vec<Record>) {
    let n = TxReason::New;
    let sender = vec![
        submit(0, 0, 0, (0, 1), 100),
        sent(0, &[(0, 1, 100, n)]),
        received(40),
        acked(40, 0, 1),
        submit(100, 1, 0, (1, 2), 100),
        sent(100, &[(1, 2, 100, n)]),
        submit(200, 2, 0, (2, 3), 100),
        sent(200, &[(2, 3, 100, n)]),
        received(240),
        acked(240, 2, 3),
        sent(300, &[(1, 2, 100, TxReason::FastRetransmit)]),
        received(340),
        acked(340, 1, 2),
    ];
    let receiver = vec![
        received(20),
        arrived(20, 0, 1, 100, false),
        delivered(20, 0, 0, 1, 100),
        sent(20, &[]),
        received(220),
        arrived(220, 2, 3, 100, false),
        sent(220, &[]),
        received(320),
        arrived(320, 1, 2, 100, false),
        delivered(320, 0, 1, 2, 100),
        delivered(320, 0, 2, 3, 100),
        sent(320, &[]),
    ];
    (sender, receiver)
}

// Δt = arrived − first tx: 20, 220, 20 ms → OWD = 20 ms.
// Application: m0 20−0−20 = 0; m1 320−100−20 = 200; m2 320−200−20 = 100.
// Transport: 0, 200, 0. ACK latency (raw): 40, 240, 40.
#[test]
fn latencies_with_min_observed_owd() {
    let (s, r) = hol_trace();
    let f = FlowAnalysis::new(&s, Some(&r), opts(OwdCorrection::MinObserved)).unwrap();
    let lat = |k| {
        f.latencies(k)
            .into_iter()
            .map(|(_, l)| l)
            .collect::<Vec<_>>()
    };
    assert_eq!(lat(LatencyKind::Application), vec![ms(0), ms(200), ms(100)]);
    assert_eq!(lat(LatencyKind::Transport), vec![ms(0), ms(200), ms(0)]);
    assert_eq!(
        lat(LatencyKind::AckFromFirstTx),
        vec![ms(40), ms(240), ms(40)]
    );
    assert_eq!(lat(LatencyKind::AckFromSend), vec![ms(40), ms(240), ms(40)]);
    // Cumulative: m2 was gap-acknowledged at 240 but the cumulative point
    // passed it only with m1's retransmission's acknowledgement at 340.
    assert_eq!(
        lat(LatencyKind::AckCumulative),
        vec![ms(40), ms(240), ms(140)]
    );
    let m1 = f.message(1).unwrap();
    assert_eq!(m1.first_tx, Some(t(100)));
    assert_eq!(m1.retransmissions, 1);
    assert_eq!(m1.arrived, Some(t(320)));
    assert_eq!(f.owd_for(m1), ms(20));
    // Feedback direction: the receiver sent 3 SACK packets, the sender received all 3.
    assert_eq!(
        f.reverse_loss().map(|l| (l.sent, l.counted, l.rate)),
        Some((3, 3, 0.0))
    );
    // MTT of the dropped unit 1 (003 §3): 320 − 100, no OWD removed.
    assert_eq!(transfer_time_at_loss(&f, 1), Some(ms(220)));
    assert_eq!(f.message_at_unit(2).map(|m| m.message), Some(2));
    assert_eq!(f.message_at_unit(3), None);
}

// A given OWD of 10 ms: m0 application latency 20 − 10 = 10; no correction: 20, 220, 120.
#[test]
fn latencies_with_given_or_no_owd() {
    let (s, r) = hol_trace();
    let f = FlowAnalysis::new(&s, Some(&r), opts(OwdCorrection::Given(ms(10)))).unwrap();
    let app: Vec<_> = f
        .latencies(LatencyKind::Application)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    assert_eq!(app, vec![ms(10), ms(210), ms(110)]);
    let f = FlowAnalysis::new(&s, Some(&r), opts(OwdCorrection::None)).unwrap();
    let app: Vec<_> = f
        .latencies(LatencyKind::Application)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    assert_eq!(app, vec![ms(20), ms(220), ms(120)]);
    // A given OWD larger than a latency saturates at zero.
    let f = FlowAnalysis::new(&s, Some(&r), opts(OwdCorrection::Given(ms(50)))).unwrap();
    let app: Vec<_> = f
        .latencies(LatencyKind::Application)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    assert_eq!(app, vec![ms(0), ms(170), ms(70)]);
}

// Groups by retransmission count, application latency with OWD 20 ms:
// 0 → {0, 100}: count 2, mean 50, p50 = rank ceil(0.5·2) = 1 → 0, p99 = max = 100.
// 1 → {200}. 2 and 3+ empty.
#[test]
fn grouping_by_retransmissions() {
    let (s, r) = hol_trace();
    let f = FlowAnalysis::new(&s, Some(&r), opts(OwdCorrection::MinObserved)).unwrap();
    let g = f.by_retransmissions(LatencyKind::Application);
    let g0 = g[0].stats.unwrap();
    assert_eq!(
        (g0.count, g0.mean_ms(), g0.p50, g0.p99, g0.max),
        (2, 50.0, ms(0), ms(100), ms(100))
    );
    let g1 = g[1].stats.unwrap();
    assert_eq!((g1.count, g1.p50, g1.max), (1, ms(200), ms(200)));
    assert!(g[2].stats.is_none() && g[3].stats.is_none());
    assert!(g[3].or_more && !g[2].or_more);
    assert_eq!(g[3].retransmissions, 3);
}

// Messages with 3 and 5 retransmissions both fall in the "3 or more" group.
#[test]
fn three_or_more_group() {
    let n = TxReason::New;
    let to = TxReason::TimeoutRetransmit;
    let mut sender = vec![
        submit(0, 0, 0, (0, 1), 10),
        submit(0, 1, 0, (1, 2), 10),
        sent(0, &[(0, 2, 20, n)]),
    ];
    for i in 1..=5 {
        let pieces: &[(u64, u64, u32, TxReason)] = if i <= 3 {
            &[(0, 2, 20, to)]
        } else {
            &[(1, 2, 10, to)]
        };
        sender.push(sent(i * 100, pieces));
    }
    sender.push(acked(600, 0, 2));
    let f = FlowAnalysis::new(&sender, None, opts(OwdCorrection::None)).unwrap();
    assert_eq!(f.message(0).unwrap().retransmissions, 3);
    assert_eq!(f.message(1).unwrap().retransmissions, 5);
    let g = f.by_retransmissions(LatencyKind::AckFromFirstTx);
    assert_eq!(g[3].stats.unwrap().count, 2);
    // The 4th and 5th copies are the 4th and 5th retransmission of unit 1.
    let nth: Vec<u32> = f.retransmitted_pieces().iter().map(|p| p.nth).collect();
    assert_eq!(nth, vec![1, 2, 3, 4, 5]);
}

// 100 messages of one 100-byte chunk; 5 of them retransmitted once:
// ω = 10 500, unique = 10 000 → tohd = 500 / 10 500 = 0.05/1.05 ≈ 4.76%.
// 105 packets sent, 100 received → loss (eq. 5.1) = 5/105; sender-only (eq. 5.2) = 5/105 too.
#[test]
fn tohd_and_loss() {
    let mut s = Vec::new();
    let mut r = Vec::new();
    for i in 0..100u64 {
        s.push(submit(i * 10, i, 0, (i, i + 1), 100));
        s.push(sent(i * 10, &[(i, i + 1, 100, TxReason::New)]));
        if i % 20 == 0 {
            s.push(sent(
                i * 10 + 5,
                &[(i, i + 1, 100, TxReason::FastRetransmit)],
            ));
        }
        r.push(received(i * 10 + 7));
        r.push(arrived(i * 10 + 7, i, i + 1, 100, false));
    }
    let f = FlowAnalysis::new(&s, Some(&r), opts(OwdCorrection::None)).unwrap();
    assert_eq!(f.payload_bytes_sent(), 10_500);
    assert_eq!(f.unique_bytes_sent(), 10_000);
    assert_eq!(f.tohd(), Some(500.0 / 10_500.0));
    assert!((f.tohd().unwrap() - 0.05 / 1.05).abs() < 1e-12);
    let loss = f.loss().unwrap();
    assert_eq!(
        (loss.method, loss.sent, loss.counted),
        (LossMethod::SenderAndReceiver, 105, 100)
    );
    assert_eq!(loss.rate, 5.0 / 105.0);
    let f = FlowAnalysis::new(&s, None, opts(OwdCorrection::None)).unwrap();
    let loss = f.loss().unwrap();
    assert_eq!(
        (loss.method, loss.sent, loss.counted),
        (LossMethod::SenderOnly, 105, 5)
    );
    // This receiver trace sent no packets, so the feedback direction has no estimate.
    assert_eq!(
        FlowAnalysis::new(&s, Some(&r), opts(OwdCorrection::None))
            .unwrap()
            .reverse_loss(),
        None
    );
    // Link statistics: 200 offered, 190 delivered.
    assert_eq!(
        LossEstimate::from_counts(200, 190).map(|l| l.rate),
        Some(10.0 / 200.0)
    );
    assert_eq!(LossEstimate::from_counts(0, 0), None);
    // Nothing sent: no tohd, no loss estimate.
    let f = FlowAnalysis::new(&[], None, opts(OwdCorrection::None)).unwrap();
    assert_eq!((f.tohd(), f.loss()), (None, None));
    // One bundled old chunk per new one: ω = 2 × unique → 50% (002 §5.2.1 reports ≈ 52%).
    let mut s = vec![];
    for i in 0..10u64 {
        s.push(submit(i, i, 0, (i, i + 1), 100));
        let mut p = vec![(i, i + 1, 100, TxReason::New)];
        if i > 0 {
            p.insert(0, (i - 1, i, 100, TxReason::RedundantBundle));
        }
        s.push(sent(i, &p));
    }
    let f = FlowAnalysis::new(&s, None, opts(OwdCorrection::None)).unwrap();
    assert_eq!(f.tohd(), Some(900.0 / 1900.0));
}

// Unit 0: sent at 0, arrives at 50, its SACK is lost, timeout retransmission at 60 → spurious.
// Unit 1: sent at 100, lost, timeout retransmission at 200 arrives at 250 → needed;
// a redundant copy at 300 (already there since 250) → spurious.
fn spurious_trace() -> (Vec<Record>, Vec<Record>) {
    let to = TxReason::TimeoutRetransmit;
    let s = vec![
        submit(0, 0, 0, (0, 1), 100),
        sent(0, &[(0, 1, 100, TxReason::New)]),
        sent(60, &[(0, 1, 100, to)]),
        submit(100, 1, 0, (1, 2), 100),
        sent(100, &[(1, 2, 100, TxReason::New)]),
        sent(200, &[(1, 2, 100, to)]),
        sent(300, &[(1, 2, 100, TxReason::RedundantBundle)]),
    ];
    let r = vec![
        arrived(50, 0, 1, 100, false),
        arrived(110, 0, 1, 100, true),
        arrived(250, 1, 2, 100, false),
        arrived(350, 1, 2, 100, true),
    ];
    (s, r)
}

#[test]
fn spurious_retransmissions_from_the_receiver_trace() {
    let (s, r) = spurious_trace();
    let f = FlowAnalysis::new(&s, Some(&r), opts(OwdCorrection::None)).unwrap();
    assert_eq!(f.spurious(), Some(2));
    assert!(f.reverse_loss().is_none());
    let by = f.spurious_by_reason().unwrap();
    assert_eq!(by.get(&TxReason::TimeoutRetransmit), Some(&1));
    assert_eq!(by.get(&TxReason::RedundantBundle), Some(&1));
    let flags: Vec<_> = f
        .retransmitted_pieces()
        .iter()
        .map(|p| p.spurious)
        .collect();
    assert_eq!(flags, vec![Some(true), Some(false), Some(true)]);
    assert_eq!(
        f.reason_table(),
        vec![
            ReasonRow {
                retransmission: 1,
                or_more: false,
                reason: TxReason::TimeoutRetransmit,
                count: 2,
                spurious: Some(1)
            },
            ReasonRow {
                retransmission: 2,
                or_more: false,
                reason: TxReason::RedundantBundle,
                count: 1,
                spurious: Some(1)
            },
        ]
    );
    let reasons = f.reasons();
    assert_eq!(reasons[&TxReason::New], 2);
    assert_eq!(reasons[&TxReason::TimeoutRetransmit], 2);
    assert_eq!(reasons[&TxReason::FastRetransmit], 0);
}

// Real mode: no receiver trace. Without duplicate reports the count is unknown;
// a duplicate report for unit 0 at 110 matches the retransmission at 60 → 1;
// a report for unit 1 at 150 precedes every retransmission of unit 1 → no match.
#[test]
fn spurious_estimate_from_duplicate_reports() {
    let (s, _) = spurious_trace();
    let f = FlowAnalysis::new(&s, None, opts(OwdCorrection::None)).unwrap();
    assert_eq!(f.spurious(), None);
    assert!(f
        .retransmitted_pieces()
        .iter()
        .all(|p| p.spurious.is_none()));
    let reports = [
        DuplicateReport {
            time: t(110),
            units: Units::one(0),
        },
        DuplicateReport {
            time: t(150),
            units: Units::one(1),
        },
    ];
    let f = FlowAnalysis::build(
        FlowInput {
            sender: &s,
            duplicate_reports: Some(&reports),
            ..FlowInput::default()
        },
        opts(OwdCorrection::None),
    )
    .unwrap();
    assert_eq!(f.spurious(), Some(1));
}

// TCP: messages m0 = bytes [0,100), m1 = [100,300), m2 = [300,350).
// Segments A = [0,150) and B = [150,300) at 0, C = [300,350) at 10. A is lost and
// retransmitted at 200; arrivals B 20, C 30, A 220. The application reads
// [0,120) at 220 and [120,350) at 225, so m1's last byte is delivered at 225.
#[test]
fn tcp_byte_ranges_map_to_messages() {
    let n = TxReason::New;
    let s = vec![
        submit(0, 0, 0, (0, 100), 100),
        submit(0, 1, 0, (100, 300), 200),
        sent(0, &[(0, 150, 150, n)]),
        sent(0, &[(150, 300, 150, n)]),
        submit(10, 2, 0, (300, 350), 50),
        sent(10, &[(300, 350, 50, n)]),
        acked(40, 150, 300),
        acked(50, 300, 350),
        sent(200, &[(0, 150, 150, TxReason::TimeoutRetransmit)]),
        acked(240, 0, 350),
    ];
    let r = vec![
        arrived(20, 150, 300, 150, false),
        arrived(30, 300, 350, 50, false),
        arrived(220, 0, 150, 150, false),
        delivered(220, 0, 0, 120, 120),
        delivered(225, 0, 120, 350, 230),
    ];
    let f = FlowAnalysis::new(&s, Some(&r), opts(OwdCorrection::None)).unwrap();
    let m: Vec<_> = f
        .messages()
        .iter()
        .map(|m| (m.retransmissions, m.arrived, m.delivered, m.acked))
        .collect();
    assert_eq!(
        m,
        vec![
            (1, Some(t(220)), Some(t(220)), Some(t(240))),
            (1, Some(t(220)), Some(t(225)), Some(t(240))),
            (0, Some(t(30)), Some(t(225)), Some(t(50))),
        ]
    );
    let app: Vec<_> = f
        .latencies(LatencyKind::Application)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    assert_eq!(app, vec![ms(220), ms(225), ms(215)]);
    // Throughput per 100 ms over [0, 300): acked 150 + 50 in the first bin and the
    // remaining 150 (the acked-again [150,350) does not count twice) in the third.
    let w = |src| f.throughput(src, t(0), t(300), ms(100)).unwrap();
    assert_eq!(w(ThroughputSource::Acked), vec![200, 0, 150]);
    assert_eq!(w(ThroughputSource::Arrived), vec![200, 0, 150]);
    assert_eq!(w(ThroughputSource::Delivered), vec![0, 0, 350]);
    // A window ending inside a bin keeps the partial bin: [0, 250) → 3 bins, A's arrival at 220 included.
    assert_eq!(
        f.throughput(ThroughputSource::Arrived, t(0), t(250), ms(100))
            .unwrap(),
        vec![200, 0, 150]
    );
    assert_eq!(
        f.throughput(ThroughputSource::Acked, t(0), t(0), ms(100))
            .unwrap(),
        Vec::<u64>::new()
    );
    assert_eq!(
        f.throughput(ThroughputSource::Acked, t(5), t(0), ms(100)),
        Err(MetricsError::BadWindow)
    );
    assert_eq!(
        f.throughput(ThroughputSource::Acked, t(0), t(5), Duration::ZERO),
        Err(MetricsError::BadWindow)
    );
    // tohd: ω = 150 + 150 + 50 + 150 = 500, unique 350 → 150/500.
    assert_eq!(f.tohd(), Some(0.3));
    // Byte-weighted CDF of application latency: 100 B at 220, 50 B at 215, 200 B at 225.
    let cdf = f.cdf(LatencyKind::Application, true);
    let pts: Vec<(f64, f64)> = cdf
        .points
        .iter()
        .map(|p| (p.value_ms, p.fraction))
        .collect();
    assert_eq!(
        pts,
        vec![(215.0, 50.0 / 350.0), (220.0, 150.0 / 350.0), (225.0, 1.0)]
    );
}

// An SCTP message of three chunks whose middle chunk arrives last: it arrived when the
// last of them did (not when its last TSN did).
#[test]
fn multi_chunk_message_waits_for_every_chunk() {
    let n = TxReason::New;
    let s = vec![
        submit(0, 7, 2, (10, 13), 3000),
        sent(0, &[(10, 11, 1000, n), (11, 12, 1000, n)]),
        sent(1, &[(12, 13, 1000, n)]),
        sent(150, &[(11, 12, 1000, TxReason::FastRetransmit)]),
    ];
    let r = vec![
        arrived(20, 10, 11, 1000, false),
        arrived(21, 12, 13, 1000, false),
        arrived(170, 11, 12, 1000, false),
    ];
    let f = FlowAnalysis::new(&s, Some(&r), opts(OwdCorrection::None)).unwrap();
    let m = f.message(7).unwrap();
    assert_eq!(
        (m.arrived, m.retransmissions, m.first_tx, m.delivered),
        (Some(t(170)), 1, Some(t(0)), None)
    );
    assert_eq!(f.summary().delivered, Some(0));
    // Not delivered and not given up: reported as the backlog, with how
    // long it had waited when the trace ended (0 -> 170 ms).
    let sum = f.summary();
    assert_eq!(sum.undelivered, Some(1));
    assert_eq!(sum.undelivered_waited_max_ms, Some(170.0));
    assert_eq!(sum.undelivered_waited_p50_ms, Some(170.0));
    // Without a receiver trace nothing is known about it.
    let sender_only = FlowAnalysis::new(&s, None, opts(OwdCorrection::None)).unwrap();
    assert_eq!(sender_only.summary().undelivered, None);
}

// Application send times: m1 was generated at 50 but accepted at 100 (flow control):
// its application latency grows by 50 ms to 250; first-tx-based latencies do not change.
#[test]
fn application_send_times() {
    let (s, r) = hol_trace();
    let app = [AppSend {
        message: 1,
        time: t(50),
    }];
    let input = FlowInput {
        sender: &s,
        receiver: Some(&r),
        app_sends: Some(&app),
        duplicate_reports: None,
    };
    let f = FlowAnalysis::build(input, opts(OwdCorrection::MinObserved)).unwrap();
    let m1 = f.message(1).unwrap();
    assert_eq!(f.latency(m1, LatencyKind::Application), Some(ms(250)));
    assert_eq!(
        f.latency(m1, LatencyKind::ApplicationFromFirstTx),
        Some(ms(200))
    );
    assert_eq!(f.latency(m1, LatencyKind::AckFromSend), Some(ms(290)));
    assert_eq!(f.message_transfer_time(1), Some(ms(270)));
    let bad = [AppSend {
        message: 1,
        time: t(150),
    }];
    let err = FlowAnalysis::build(
        FlowInput {
            app_sends: Some(&bad),
            ..input
        },
        opts(OwdCorrection::None),
    );
    assert!(matches!(
        err,
        Err(MetricsError::AppSendAfterSubmit { message: 1, .. })
    ));
    let unknown = [AppSend {
        message: 9,
        time: t(0),
    }];
    let err = FlowAnalysis::build(
        FlowInput {
            app_sends: Some(&unknown),
            ..input
        },
        opts(OwdCorrection::None),
    );
    assert_eq!(err.err(), Some(MetricsError::UnknownMessage { message: 9 }));
    let twice = [
        AppSend {
            message: 1,
            time: t(0),
        },
        AppSend {
            message: 1,
            time: t(1),
        },
    ];
    let err = FlowAnalysis::build(
        FlowInput {
            app_sends: Some(&twice),
            ..input
        },
        opts(OwdCorrection::None),
    );
    assert_eq!(
        err.err(),
        Some(MetricsError::DuplicateAppSend { message: 1 })
    );
}

// Drift (002 eq. 5.3): Δt = 10, 11, 12, 13, 14 ms at first tx 0, 100, …, 400.
// Window 1: Δt1 = 10, Δt2 = 14, τ = 4 → OWD_i = 10 + 4·i/4 = Δt_i: all transport latencies 0.
// Plain minimum: 0, 1, 2, 3, 4 ms.
#[test]
fn owd_drift_correction() {
    let mut s = vec![];
    let mut r = vec![];
    for i in 0..5u64 {
        s.push(submit(i * 100, i, 0, (i, i + 1), 10));
        s.push(sent(i * 100, &[(i, i + 1, 10, TxReason::New)]));
        r.push(arrived(i * 100 + 10 + i, i, i + 1, 10, false));
    }
    let lat = |owd| {
        let f = FlowAnalysis::new(&s, Some(&r), opts(owd)).unwrap();
        f.latencies(LatencyKind::Transport)
            .into_iter()
            .map(|(_, l)| l.as_millis())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        lat(OwdCorrection::MinObservedDriftCorrected { window: 1 }),
        vec![0; 5]
    );
    assert_eq!(lat(OwdCorrection::MinObserved), vec![0, 1, 2, 3, 4]);
    // Window 2: Δt1 = min(10, 11) = 10, Δt2 = min(13, 14) = 13, τ = 3 → OWD = 10, 10.75, 11.5, 12.25, 13.
    let f = FlowAnalysis::new(
        &s,
        Some(&r),
        opts(OwdCorrection::MinObservedDriftCorrected { window: 2 }),
    )
    .unwrap();
    let got: Vec<u64> = f
        .latencies(LatencyKind::Transport)
        .into_iter()
        .map(|(_, l)| l.as_micros())
        .collect();
    assert_eq!(got, vec![0, 250, 500, 750, 1000]);
    let err = FlowAnalysis::new(
        &s,
        Some(&r),
        opts(OwdCorrection::MinObservedDriftCorrected { window: 0 }),
    );
    assert_eq!(err.err(), Some(MetricsError::BadOwdWindow));
}

#[test]
fn inconsistent_traces_are_errors() {
    let n = TxReason::New;
    let unordered = [submit(10, 0, 0, (0, 1), 1), submit(5, 1, 0, (1, 2), 1)];
    assert_eq!(
        FlowAnalysis::new(&unordered, None, AnalysisOptions::default()).err(),
        Some(MetricsError::UnorderedRecords {
            side: Side::Sender,
            index: 1
        })
    );
    let dup = [submit(0, 0, 0, (0, 1), 1), submit(1, 0, 0, (1, 2), 1)];
    assert_eq!(
        FlowAnalysis::new(&dup, None, AnalysisOptions::default()).err(),
        Some(MetricsError::DuplicateMessage { message: 0 })
    );
    let overlap = [submit(0, 0, 0, (0, 10), 1), submit(1, 1, 0, (9, 12), 1)];
    assert_eq!(
        FlowAnalysis::new(&overlap, None, AnalysisOptions::default()).err(),
        Some(MetricsError::OverlappingMessage { message: 1 })
    );
    let empty = [submit(0, 0, 0, (0, 1), 1), sent(0, &[(3, 3, 0, n)])];
    assert_eq!(
        FlowAnalysis::new(&empty, None, AnalysisOptions::default()).err(),
        Some(MetricsError::EmptyUnits {
            side: Side::Sender,
            index: 1
        })
    );
    let rx = [arrived(5, 0, 1, 1, false), arrived(4, 1, 2, 1, false)];
    assert_eq!(
        FlowAnalysis::new(&[], Some(&rx), AnalysisOptions::default()).err(),
        Some(MetricsError::UnorderedRecords {
            side: Side::Receiver,
            index: 1
        })
    );
}

// The summary of the head-of-line trace, byte for byte. Application latency with OWD 20 ms:
// {0, 200, 100} → mean 100, p50 = rank 2 → 100, p90/p99/p99.9/max = 200.
// Pieces: 3 new + 1 fast-rtx; 4 packets sent, 3 received → loss 0.25; ω = 400, unique 300 → tohd 0.25.
#[test]
fn summary_json_is_exact_and_deterministic() {
    let (s, r) = hol_trace();
    let f = FlowAnalysis::new(&s, Some(&r), AnalysisOptions::default()).unwrap();
    let json = f.summary().to_json().unwrap();
    let expected = concat!(
        r#"{"messages":3,"delivered":3,"abandoned":0,"latency":"application","#,
        r#""latency_ms":{"mean":100.0,"p50":100.0,"p90":200.0,"p99":200.0,"p999":200.0,"max":200.0},"#,
        r#""by_retransmissions":["#,
        r#"{"retransmissions":0,"or_more":false,"count":2,"mean_ms":50.0,"p50_ms":0.0,"p99_ms":100.0,"max_ms":100.0},"#,
        r#"{"retransmissions":1,"or_more":false,"count":1,"mean_ms":200.0,"p50_ms":200.0,"p99_ms":200.0,"max_ms":200.0},"#,
        r#"{"retransmissions":2,"or_more":false,"count":0,"mean_ms":null,"p50_ms":null,"p99_ms":null,"max_ms":null},"#,
        r#"{"retransmissions":3,"or_more":true,"count":0,"mean_ms":null,"p50_ms":null,"p99_ms":null,"max_ms":null}],"#,
        r#""reasons":{"bundled-on-rtx":0,"early-rtx":0,"efr":0,"fast-rtx":1,"new":3,"probe":0,"redundant-bundle":0,"timeout-rtx":0},"#,
        r#""spurious":0,"tohd":0.25,"loss_rate":0.25,"#,
        r#""spurious_by_reason":{"bundled-on-rtx":0,"early-rtx":0,"efr":0,"fast-rtx":0,"probe":0,"redundant-bundle":0,"timeout-rtx":0},"#,
        r#""spurious_excluding_redundant":0,"t3_expiries":0,"t3_spurious":0,"redundant_bytes":0,"#,
        r#""tohd_redundant":0.0,"tohd_retransmissions":0.25,"rtt_samples":0,"data_rtt_samples":0,"#,
        r#""thin_share":null,"thin_transitions":0,"undelivered":0,"#,
        r#""undelivered_waited_max_ms":null,"undelivered_waited_p50_ms":null,"#,
        r#""rtt_sample_mean_ms":null,"rto_mean_ms":null,"rto_measured_count":0,"#,
        r#""rto_measured_mean_ms":null,"rto_measured_max_ms":null,"rto_at_expiry_mean_ms":null}"#
    );
    assert_eq!(json, expected);
    // A second, independent analysis of the same records gives the same bytes.
    let again = FlowAnalysis::new(&s, Some(&r), AnalysisOptions::default()).unwrap();
    assert_eq!(again.summary().to_json().unwrap(), json);
    let back: Summary = serde_json::from_str(&json).unwrap();
    assert_eq!(back, f.summary());
    // Non-round values: 1/3 ms mean is serialized the same way every time.
    let stats = LatencyStats::from_durations([0, 0, 1].map(Duration::from_millis)).unwrap();
    let a = serde_json::to_string(&LatencyMs::from(&stats)).unwrap();
    assert_eq!(a, serde_json::to_string(&LatencyMs::from(&stats)).unwrap());
    assert!(a.starts_with(r#"{"mean":0.3333333333333333,"#), "{a}");
}

// Without a receiver trace the summary reports what the sender knows: ACK latency works,
// `delivered` and `spurious` are null, loss comes from eq. 5.2.
#[test]
fn sender_only_summary() {
    let (s, _) = hol_trace();
    let options = AnalysisOptions {
        owd: OwdCorrection::None,
        summary_latency: LatencyKind::AckFromFirstTx,
    };
    let sum = FlowAnalysis::new(&s, None, options).unwrap().summary();
    assert_eq!(sum.delivered, None);
    assert_eq!(sum.spurious, None);
    assert_eq!(sum.latency_ms.unwrap().max, 240.0);
    // 1 packet carries a retransmission out of 4 data packets.
    assert_eq!(sum.loss_rate, Some(0.25));
}

// Echo workload (001 §IV.A), SCTP with two streams: requests 0 (stream 0, at 0) and 1 (stream 1,
// at 10); the server echoes on the same stream; echoes reach the client application at 25 and 50.
// Responses: 25 − 0 and 50 − 10. Request 2 on stream 0 (at 20) is never answered.
#[test]
fn request_response_pairing() {
    let client = vec![
        submit(0, 100, 0, (0, 1), 64),
        submit(10, 101, 1, (1, 2), 64),
        submit(20, 102, 0, (2, 3), 64),
        delivered(25, 0, 0, 1, 64),
        delivered(50, 1, 1, 2, 64),
    ];
    let server = vec![
        delivered(5, 0, 0, 1, 64),
        submit(6, 500, 0, (0, 1), 64),
        delivered(15, 1, 1, 2, 64),
        submit(16, 501, 1, (1, 2), 64),
    ];
    let o = opts(OwdCorrection::None);
    let fwd = FlowAnalysis::new(&client, Some(&server), o).unwrap();
    let rev = FlowAnalysis::new(&server, Some(&client), o).unwrap();
    let got: Vec<_> = response_times(&fwd, &rev)
        .unwrap()
        .iter()
        .map(|r| (r.request, r.response))
        .collect();
    assert_eq!(
        got,
        vec![(100, Some(ms(25))), (101, Some(ms(40))), (102, None)]
    );
    // An echo with no request on its stream is an error.
    let mut extra = server.clone();
    extra.push(submit(30, 502, 1, (2, 3), 64));
    let rev = FlowAnalysis::new(&extra, Some(&client), o).unwrap();
    assert_eq!(
        response_times(&fwd, &rev).err(),
        Some(MetricsError::UnpairedEcho {
            stream: 1,
            index: 1
        })
    );
}

// Jain's index over per-flow throughput series from two flows: 600 vs 200 bytes in one
// interval → (800)² / (2 · (600² + 200²)) = 640 000 / 800 000 = 0.8.
#[test]
fn fairness_over_flows() {
    let flow = |bytes: u32| {
        let s = vec![
            submit(0, 0, 0, (0, u64::from(bytes)), bytes),
            sent(0, &[(0, u64::from(bytes), bytes, TxReason::New)]),
            acked(50, 0, u64::from(bytes)),
        ];
        let f = FlowAnalysis::new(&s, None, AnalysisOptions::default()).unwrap();
        f.throughput(ThroughputSource::Acked, t(0), t(100), ms(100))
            .unwrap()[0] as f64
    };
    assert_eq!(jain_index(&[flow(600), flow(200)]), Some(0.8));
}

// Scale: a long thin stream (30 000 messages at 400 ms, ~100 000 records, 5% retransmitted)
// is analysed in one pass; the counts come out exactly.
#[test]
fn thirty_thousand_messages() {
    let mut s = Vec::with_capacity(100_000);
    let mut r = Vec::with_capacity(100_000);
    for i in 0..30_000u64 {
        let at = i * 400;
        s.push(submit(at, i, 0, (i, i + 1), 120));
        s.push(sent(at, &[(i, i + 1, 120, TxReason::New)]));
        let lost = i % 20 == 3;
        if lost {
            s.push(sent(
                at + 200,
                &[(i, i + 1, 120, TxReason::TimeoutRetransmit)],
            ));
        }
        let arrival = if lost { at + 250 } else { at + 50 };
        s.push(acked(arrival + 50, i, i + 1));
        r.push(arrived(arrival, i, i + 1, 120, false));
        r.push(delivered(arrival, 0, i, i + 1, 120));
    }
    let f = FlowAnalysis::new(&s, Some(&r), AnalysisOptions::default()).unwrap();
    let sum = f.summary();
    assert_eq!(sum.messages, 30_000);
    assert_eq!(sum.delivered, Some(30_000));
    assert_eq!(sum.by_retransmissions[1].count, 1_500);
    assert_eq!(sum.by_retransmissions[1].max_ms, Some(200.0));
    assert_eq!(sum.reasons["timeout-rtx"], 1_500);
    assert_eq!(sum.spurious, Some(0));
}

// Pooling two flows: the head-of-line flow (application latencies 0, 200, 100 ms; ω 400,
// unique 300; 4 packets sent, 3 received) and the tohd flow of 100 messages (latencies
// all 0 with its own OWD of 7 ms; ω 10 500, unique 10 000; 105 sent, 100 received).
// Pooled: 103 messages; tohd = (100 + 500) / (400 + 10 500); loss = (1 + 5) / (4 + 105);
// latencies: 101 zeros, 100, 200 → p99 = rank ceil(101.97) = 102 → 100 ms, max 200.
#[test]
fn pooled_summary_over_flows() {
    let (s1, r1) = hol_trace();
    let mut s2 = Vec::new();
    let mut r2 = Vec::new();
    for i in 0..100u64 {
        s2.push(submit(i * 10, i, 0, (i, i + 1), 100));
        s2.push(sent(i * 10, &[(i, i + 1, 100, TxReason::New)]));
        if i % 20 == 0 {
            s2.push(sent(
                i * 10 + 5,
                &[(i, i + 1, 100, TxReason::FastRetransmit)],
            ));
        }
        r2.push(received(i * 10 + 7));
        r2.push(arrived(i * 10 + 7, i, i + 1, 100, false));
        r2.push(delivered(i * 10 + 7, 0, i, i + 1, 100));
    }
    let a = FlowAnalysis::new(&s1, Some(&r1), AnalysisOptions::default()).unwrap();
    let b = FlowAnalysis::new(&s2, Some(&r2), AnalysisOptions::default()).unwrap();
    let p = Summary::pooled([&a, &b], LatencyKind::Application);
    assert_eq!(p.messages, 103);
    assert_eq!(p.delivered, Some(103));
    assert_eq!(p.tohd, Some(600.0 / 10_900.0));
    assert_eq!(p.loss_rate, Some(6.0 / 109.0));
    let l = p.latency_ms.unwrap();
    assert_eq!((l.p50, l.p99, l.max), (0.0, 100.0, 200.0));
    assert_eq!(p.reasons["fast-rtx"], 6);
    assert_eq!(p.reasons["new"], 103);
    // Messages 0, 20, 40, 60, 80 of flow b were retransmitted once (but arrived in time),
    // plus m1 of flow a.
    assert_eq!(p.by_retransmissions[1].count, 6);
    // A single flow pooled alone is its own summary.
    assert_eq!(Summary::pooled([&a], LatencyKind::Application), a.summary());
    // Mixing a flow without receiver trace: delivered and spurious become unknown,
    // and eq. 5.1 and 5.2 do not mix.
    let c = FlowAnalysis::new(&s1, None, AnalysisOptions::default()).unwrap();
    let m = Summary::pooled([&a, &c], LatencyKind::Application);
    assert_eq!((m.delivered, m.spurious, m.loss_rate), (None, None, None));
    let empty = Summary::pooled([], LatencyKind::Application);
    assert_eq!(
        (
            empty.messages,
            empty.delivered,
            empty.latency_ms,
            empty.tohd
        ),
        (0, None, None, None)
    );
}

// The JSON names of latency kinds are their `name()`s.
#[test]
fn latency_kind_names() {
    for k in LatencyKind::ALL {
        assert_eq!(
            serde_json::to_string(&k).unwrap(),
            format!("\"{}\"", k.name())
        );
    }
}

// The head-of-line summary as a table row: latencies {0, 100, 200} ms, the single
// 1-retransmission message at 200 ms, tohd and loss 25%, no spurious retransmission.
#[test]
fn markdown_table_rows() {
    let (s, r) = hol_trace();
    let sum = FlowAnalysis::new(&s, Some(&r), AnalysisOptions::default())
        .unwrap()
        .summary();
    let sender_only = FlowAnalysis::new(&s, None, AnalysisOptions::default())
        .unwrap()
        .summary();
    let table = markdown_table(&[("rfc", &sum), ("rfc (sender dump)", &sender_only)]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(
        lines[2],
        "| rfc | application | 3 | 3 | 100.0 | 100.0 | 200.0 | 200.0 | 200.0 | 200.0 | - | - | 25.00 | 25.00 | 0 |"
    );
    assert_eq!(
        lines[3],
        "| rfc (sender dump) | application | 3 | - | - | - | - | - | - | - | - | - | 25.00 | 25.00 | - |"
    );
}

// Scale, bulk TCP: 20 MiB written as 320 writes of 64 KiB, carried in 14 484 segments of
// 1448 bytes (the last one shorter), each acknowledged and delivered on its own. Units are
// bytes, so per-unit maps would hold 21 million entries; the range maps hold one per segment.
#[test]
fn bulk_tcp_flow_in_byte_units() {
    const MSS: u64 = 1448;
    const WRITE: u64 = 64 * 1024;
    let total = 320 * WRITE;
    let mut s = Vec::new();
    let mut r = Vec::new();
    for k in 0..320u64 {
        s.push(submit(0, k, 0, (k * WRITE, (k + 1) * WRITE), WRITE as u32));
    }
    let mut start = 0u64;
    let mut seg = 0u64;
    while start < total {
        let end = (start + MSS).min(total);
        let len = (end - start) as u32;
        let at = seg / 10; // ten segments per millisecond
        s.push(sent(at, &[(start, end, len, TxReason::New)]));
        r.push(arrived(at + 20, start, end, len, false));
        r.push(delivered(at + 20, 0, start, end, len));
        start = end;
        seg += 1;
    }
    // Acks sorted after all sends would break time order; interleave them by time instead.
    let mut acks: Vec<Record> = Vec::new();
    let mut start = 0u64;
    let mut seg = 0u64;
    while start < total {
        let end = (start + MSS).min(total);
        acks.push(acked(seg / 10 + 40, start, end));
        start = end;
        seg += 1;
    }
    let mut all: Vec<Record> = s.into_iter().chain(acks).collect();
    all.sort_by_key(Record::time);
    let f = FlowAnalysis::new(&all, Some(&r), opts(OwdCorrection::None)).unwrap();
    assert_eq!(seg, 14_484);
    assert_eq!(f.messages().len(), 320);
    assert_eq!(f.unique_bytes_sent(), total);
    assert_eq!(f.tohd(), Some(0.0));
    // The last write's last byte is in the last segment, sent at 14 483 / 10 = 1448 ms.
    let last = f.message(319).unwrap();
    assert_eq!(last.delivered, Some(t(1448 + 20)));
    assert_eq!(last.acked, Some(t(1448 + 40)));
    let per_second = f
        .throughput(
            ThroughputSource::Delivered,
            t(0),
            t(2000),
            Duration::from_secs(1),
        )
        .unwrap();
    assert_eq!(per_second.iter().sum::<u64>(), total);
}

// Recovery counters from the sender's records. One message per 100 ms,
// 20 ms one way: m0 at 0 (new), m1 at 100 (new, with a redundant copy of
// m0), m2 at 200 (new, with a copy of m1) lost; T3 at 500 retransmits m2
// (arrives 520). Copies of m0 and m1 had arrived: both spurious, m2's
// timeout copy is not. ω = 600 (6 pieces of 100), unique 300: tohd 0.5,
// redundant 200/600, retransmissions 100/600. RTT samples: data at 40
// and 140, a heartbeat at 600. Thin from 0 to 150, not thin to 400, thin
// again; the window is first data (0) to the last ack (540): thin 150 +
// 140 = 290 of 540. Two changes after the first verdict.
#[test]
fn recovery_counters_come_from_the_sender_records() {
    let n = TxReason::New;
    let rdb = TxReason::RedundantBundle;
    let thin = |at: u64, thin: bool| Record::Thin {
        time: t(at),
        thin,
        packets_in_flight: 1,
    };
    let rtt = |at: u64, data: bool| Record::RttSample {
        time: t(at),
        rtt: ms(40),
        data,
    };
    let s = [
        thin(0, true),
        submit(0, 0, 0, (0, 1), 100),
        sent(0, &[(0, 1, 100, n)]),
        rtt(40, true),
        acked(40, 0, 1),
        submit(100, 1, 0, (1, 2), 100),
        sent(100, &[(0, 1, 100, rdb), (1, 2, 100, n)]),
        rtt(140, true),
        acked(140, 1, 2),
        thin(150, false),
        submit(200, 2, 0, (2, 3), 100),
        sent(200, &[(1, 2, 100, rdb), (2, 3, 100, n)]),
        thin(400, true),
        sent(500, &[(2, 3, 100, TxReason::TimeoutRetransmit)]),
        acked(540, 2, 3),
        rtt(600, false),
    ];
    let r = [
        arrived(20, 0, 1, 100, false),
        arrived(120, 0, 1, 100, true),
        arrived(120, 1, 2, 100, false),
        arrived(220, 1, 2, 100, true),
        arrived(520, 2, 3, 100, false),
    ];
    let f = FlowAnalysis::new(&s, Some(&r), AnalysisOptions::default()).unwrap();
    let rc = f.recovery();
    assert_eq!((rc.rtt_samples, rc.data_rtt_samples), (3, 2));
    assert_eq!(rc.redundant_bytes, 200);
    assert_eq!(rc.thin_transitions, 2);
    assert_eq!(rc.thin_time, Some((ms(290), ms(540))));
    let sum = f.summary();
    assert_eq!(sum.spurious, Some(2));
    assert_eq!(sum.spurious_excluding_redundant, Some(0));
    assert_eq!((sum.t3_expiries, sum.t3_spurious), (1, Some(0)));
    assert_eq!(sum.redundant_bytes, 200);
    assert_eq!(sum.tohd, Some(0.5));
    assert_eq!(sum.tohd_redundant, Some(200.0 / 600.0));
    assert_eq!(sum.tohd_retransmissions, Some(100.0 / 600.0));
    assert_eq!(sum.thin_share, Some(290.0 / 540.0));
    let by = sum.spurious_by_reason.unwrap();
    assert_eq!(by["redundant-bundle"], 2);
    assert_eq!(by["timeout-rtx"], 0);
    // Pooling two copies of the flow: counts double, shares stay.
    let both = Summary::pooled([&f, &f], LatencyKind::Application);
    assert_eq!(both.rtt_samples, 6);
    assert_eq!(both.thin_share, Some(290.0 / 540.0));
    assert_eq!(both.spurious_excluding_redundant, Some(0));
    // Without a receiver trace spurious counts are unknown, the rest stays.
    let alone = FlowAnalysis::new(&s, None, AnalysisOptions::default()).unwrap();
    let a = alone.summary();
    assert_eq!((a.spurious_by_reason, a.t3_spurious), (None, None));
    assert_eq!(a.t3_expiries, 1);
    assert_eq!(a.data_rtt_samples, 2);
}

// Mean RTT sample and mean calculated RTO from the sender's `RttSample` and
// `Rto` records (000 Fig. 4).
#[test]
fn rtt_and_rto_means_from_records() {
    let (mut s, r) = hol_trace();
    let end = s.last().map(Record::time).unwrap();
    let at = |ms: u64| end + Duration::from_millis(ms);
    s.push(Record::RttSample {
        time: at(1),
        rtt: Duration::from_millis(100),
        data: true,
    });
    s.push(Record::Rto {
        time: at(1),
        rto: Duration::from_millis(300),
        srtt: None,
    });
    s.push(Record::RttSample {
        time: at(2),
        rtt: Duration::from_millis(300),
        data: false,
    });
    s.push(Record::Rto {
        time: at(2),
        rto: Duration::from_millis(500),
        srtt: None,
    });
    let f = FlowAnalysis::new(&s, Some(&r), AnalysisOptions::default()).unwrap();
    let sum = f.summary();
    assert_eq!(sum.rtt_samples, 2);
    assert_eq!(sum.data_rtt_samples, 1);
    assert_eq!(sum.rtt_sample_mean_ms, Some(200.0));
    assert_eq!(sum.rto_mean_ms, Some(400.0));
}

// The measured RTO (000 Fig. 4): per packet carrying a timeout
// retransmission, the time since the oldest timed-out piece was last sent;
// a later timeout counts from the previous retransmission, and a piece
// fast-retransmitted in between moves the start.
#[test]
fn measured_rto_is_the_time_since_the_last_transmission() {
    let (n, t) = (TxReason::New, TxReason::TimeoutRetransmit);
    let sender = vec![
        submit(0, 0, 0, (0, 1), 100),
        sent(0, &[(0, 1, 100, n)]),
        Record::Rto {
            time: Instant::ZERO + Duration::from_millis(50),
            rto: Duration::from_millis(300),
            srtt: None,
        },
        submit(100, 1, 0, (1, 2), 100),
        sent(100, &[(1, 2, 100, n)]),
        // The timer restarted at 100 ms: 0 waited 400 ms, 1 waited 300 ms.
        sent(400, &[(0, 1, 100, t), (1, 2, 100, t)]),
        // The back-off recorded at the expiry's instant: 300 ms was in force.
        Record::Rto {
            time: Instant::ZERO + Duration::from_millis(400),
            rto: Duration::from_millis(600),
            srtt: None,
        },
        // Backed off: 800 ms after the previous copy.
        sent(1200, &[(0, 1, 100, t)]),
        sent(1300, &[(1, 2, 100, TxReason::FastRetransmit)]),
        sent(1500, &[(1, 2, 100, t)]),
        received(1600),
        acked(1600, 0, 2),
    ];
    let f = FlowAnalysis::new(&sender, None, AnalysisOptions::default()).unwrap();
    let sum = f.summary();
    assert_eq!(sum.rto_measured_count, 3);
    assert_eq!(sum.rto_measured_max_ms, Some(800.0));
    // (400 + 800 + 200) / 3
    let mean = sum.rto_measured_mean_ms.unwrap();
    assert!((mean - 1400.0 / 3.0).abs() < 1e-9, "{mean}");
    assert_eq!(sum.t3_expiries, 4);
    // In force at 400 ms: 300; at 1200 and 1500 ms: 600.
    assert_eq!(sum.rto_at_expiry_mean_ms, Some(500.0));
}
