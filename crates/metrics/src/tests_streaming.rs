//! The bounded-memory [`StreamingFlow`] against the whole-trace
//! [`FlowAnalysis`] on the same sender records: every counter equal, every
//! message's retransmission count and acknowledgement time equal, and the
//! open-message state empty once everything is final.

use thinstream_base::trace::{Record, SentData, TxReason, Units};
use thinstream_base::{Instant, Seed};

use crate::*;

/// A synthetic sender trace: `n` messages of 1..=3 units every 10 ms, each
/// transmission lost with probability `loss` and retransmitted (fast or by
/// timeout, with bundles and redundant copies), some duplicate reports,
/// thin-verdict changes, RTT samples and a few abandoned messages.
fn synthetic(seed: u64, n: u64, loss: f64) -> Vec<Record> {
    let mut rng = Seed(seed).rng();
    // RTO records drawn apart, so that the rest of the trace is the same.
    let mut rto_rng = Seed(seed ^ 0x5254_4f00).rng();
    let mut recs: Vec<(u64, u64, Record)> = Vec::new(); // (time ns, order, record)
    let mut order = 0u64;
    let mut push = |t: u64, r: Record, recs: &mut Vec<(u64, u64, Record)>| {
        order += 1;
        recs.push((t, order, r));
    };
    let mut unit = 0u64;
    // The previous message's units and when they were acknowledged (a
    // redundant copy only carries data not yet acknowledged, as RDB does).
    let mut prev: Option<(Units, u64)> = None;
    for id in 0..n {
        let t0 = id * 10_000_000;
        let len = rng.range_inclusive(1, 3);
        let units = Units::new(unit, unit + len);
        unit += len;
        push(
            t0,
            Record::Submitted {
                time: Instant::from_nanos(t0),
                message: id,
                stream: (id % 2) as u16,
                bytes: 100 * len as u32,
                unordered: false,
                units,
            },
            &mut recs,
        );
        let abandon = rng.chance(0.01);
        let mut acked_at = u64::MAX;
        let mut t = t0;
        let mut reason = TxReason::New;
        for attempt in 0..6 {
            // One piece per unit, the first piece of a retransmission with
            // its reason, the rest bundled.
            let data: Vec<SentData> = (units.start..units.end)
                .enumerate()
                .map(|(i, u)| SentData {
                    units: Units::one(u),
                    bytes: 100,
                    reason: if i == 0 || reason == TxReason::New {
                        reason
                    } else {
                        TxReason::BundledOnRetransmit
                    },
                })
                .collect();
            let mut data = data;
            if let Some((p, _)) = prev.filter(|(_, a)| *a > t && rng.chance(0.5)) {
                data.push(SentData {
                    units: Units::one(p.end - 1),
                    bytes: 100,
                    reason: TxReason::RedundantBundle,
                });
            }
            push(
                t,
                Record::PacketSent {
                    time: Instant::from_nanos(t),
                    wire_bytes: 0,
                    data,
                    control: 0,
                },
                &mut recs,
            );
            if abandon && attempt == 1 {
                push(
                    t + 1,
                    Record::Abandoned {
                        time: Instant::from_nanos(t + 1),
                        units,
                    },
                    &mut recs,
                );
                break;
            }
            let lost = attempt < 5 && rng.chance(loss);
            if !lost {
                let ack = t + 20_000_000 + rng.below(5_000_000);
                acked_at = ack;
                push(
                    ack,
                    Record::Acked {
                        time: Instant::from_nanos(ack),
                        units,
                    },
                    &mut recs,
                );
                push(
                    ack,
                    Record::RttSample {
                        time: Instant::from_nanos(ack),
                        rtt: thinstream_base::Duration::from_millis(20),
                        data: rng.chance(0.7),
                    },
                    &mut recs,
                );
                if attempt > 0 && rng.chance(0.3) {
                    push(
                        ack + 1,
                        Record::DuplicateReported {
                            time: Instant::from_nanos(ack + 1),
                            units: Units::one(units.start),
                        },
                        &mut recs,
                    );
                }
                break;
            }
            t += 30_000_000 + rng.below(200_000_000);
            reason = if rng.chance(0.5) {
                TxReason::FastRetransmit
            } else {
                TxReason::TimeoutRetransmit
            };
            if reason == TxReason::TimeoutRetransmit && rto_rng.chance(0.7) {
                // The RTO set some time before (or at) the expiry.
                let at = t.saturating_sub(rto_rng.below(2) * 5_000_000);
                push(
                    at,
                    Record::Rto {
                        time: Instant::from_nanos(at),
                        rto: thinstream_base::Duration::from_millis(200 + rto_rng.below(800)),
                        srtt: None,
                    },
                    &mut recs,
                );
            }
        }
        prev = Some((units, acked_at));
        if rng.chance(0.05) {
            push(
                t0 + 3,
                Record::Thin {
                    time: Instant::from_nanos(t0 + 3),
                    thin: rng.chance(0.5),
                    packets_in_flight: 1,
                },
                &mut recs,
            );
        }
        if rng.chance(0.5) {
            push(
                t0 + 4,
                Record::PacketReceived {
                    time: Instant::from_nanos(t0 + 4),
                    wire_bytes: 60,
                },
                &mut recs,
            );
        }
    }
    recs.sort_by_key(|(t, o, _)| (*t, *o));
    recs.into_iter().map(|(_, _, r)| r).collect()
}

fn compare(seed: u64, n: u64, loss: f64, chunk: usize) {
    let records = synthetic(seed, n, loss);
    let duplicates: Vec<DuplicateReport> = records
        .iter()
        .filter_map(|r| match r {
            Record::DuplicateReported { time, units } => Some(DuplicateReport {
                time: *time,
                units: *units,
            }),
            _ => None,
        })
        .collect();
    let whole = FlowAnalysis::build(
        FlowInput {
            sender: &records,
            receiver: None,
            app_sends: None,
            duplicate_reports: Some(&duplicates),
        },
        AnalysisOptions {
            owd: OwdCorrection::None,
            summary_latency: LatencyKind::AckFromSend,
        },
    )
    .unwrap();
    let mut s = StreamingFlow::new();
    let mut finished = Vec::new();
    let mut max_open = 0;
    for part in records.chunks(chunk) {
        for r in part {
            s.push(r).unwrap();
        }
        max_open = max_open.max(s.open_messages());
        finished.extend(s.drain_finished());
    }
    s.finish();
    finished.extend(s.drain_finished());
    assert_eq!(
        s.open_messages(),
        0,
        "no state left once everything is final"
    );
    // A message is open from submission to its last acknowledgement: at most
    // the messages of the longest recovery (6 attempts of up to 230 ms) at
    // one per 10 ms, whatever `n` is.
    assert!(max_open < 160, "open messages stay bounded: {max_open}");

    assert_eq!(finished.len() as u64, n);
    finished.sort_by_key(|f| f.message);
    for (f, m) in finished.iter().zip(whole.messages()) {
        assert_eq!(f.message, m.message);
        assert_eq!(
            f.retransmissions, m.retransmissions,
            "message {}",
            m.message
        );
        assert_eq!(f.acked, m.acked, "message {}", m.message);
        assert_eq!(f.abandoned, m.abandoned, "message {}", m.message);
        assert_eq!(f.first_tx, m.first_tx, "message {}", m.message);
    }
    assert_eq!(s.reasons(), whole.reasons());
    let table: std::collections::BTreeMap<(u32, TxReason), u64> = whole
        .reason_table()
        .into_iter()
        .map(|r| ((r.retransmission, r.reason), r.count))
        .collect();
    assert_eq!(s.reason_table(), &table);
    assert_eq!(Some(s.spurious_estimate()), whole.spurious());
    assert_eq!(s.payload_bytes_sent(), whole.payload_bytes_sent());
    assert_eq!(s.unique_bytes_sent(), whole.unique_bytes_sent());
    assert_eq!(s.thin_time(), whole.recovery().thin_time);

    // The summary: everything but the latency fields, which the caller
    // supplies from the receiver.
    let full = whole.summary();
    let mine = s.summary(
        full.latency,
        full.latency_ms,
        full.by_retransmissions.clone(),
        full.delivered,
    );
    // One timed-out piece per packet here: one measurement each, the
    // measured RTO included.
    assert_eq!(full.rto_measured_count, full.t3_expiries);
    assert!(loss == 0.0 || full.rto_measured_count > 0);
    assert!(loss == 0.0 || full.rto_at_expiry_mean_ms.is_some());
    assert_eq!(mine, full);
}

#[test]
fn streaming_matches_the_whole_trace_analysis() {
    compare(1, 2000, 0.05, 7);
    compare(2, 3000, 0.3, 100);
    compare(3, 500, 0.0, 1);
}

// The cumulative ACK latency needs every earlier message: the streaming
// analysis refuses it instead of reporting nothing.
#[test]
fn streaming_refuses_the_cumulative_ack_latency() {
    for (kinds, slowest) in [
        (vec![LatencyKind::AckCumulative], None),
        (
            vec![LatencyKind::Application],
            Some(LatencyKind::AckCumulative),
        ),
    ] {
        let r = crate::joined::FlowStream::new(OwdCorrection::MinObserved, &kinds, slowest);
        assert!(
            matches!(r, Err(MetricsError::StreamingUnsupported { .. })),
            "accepted {kinds:?} / {slowest:?}"
        );
    }
}

/// Bytes acknowledged per interval, read chunk by chunk, equal the whole
/// trace's series.
fn compare_throughput(records: &[Record], chunk: usize, from: u64, to: u64, interval: u64) {
    let whole = FlowAnalysis::build(
        FlowInput {
            sender: records,
            receiver: None,
            app_sends: None,
            duplicate_reports: None,
        },
        AnalysisOptions {
            owd: OwdCorrection::None,
            summary_latency: LatencyKind::AckFromSend,
        },
    )
    .unwrap();
    let (from, to) = (Instant::from_nanos(from), Instant::from_nanos(to));
    let interval = thinstream_base::Duration::from_nanos(interval);
    let full = whole
        .throughput(ThroughputSource::Acked, from, to, interval)
        .unwrap();
    let mut s = ThroughputStream::new(from, to, interval).unwrap();
    let mut peak = 0;
    for part in records.chunks(chunk) {
        s.push(part).unwrap();
        peak = peak.max(s.stored_ranges());
    }
    assert!(
        full.iter().sum::<u64>() > 0,
        "the window must see acknowledgements"
    );
    assert_eq!(s.finish(), full);
    // Acknowledged units are forgotten but for the coalesced set.
    assert!(peak < 200, "stored ranges stay bounded: {peak}");
}

#[test]
fn streamed_throughput_matches_the_whole_trace_series() {
    for (seed, loss, chunk) in [(1, 0.05, 7), (2, 0.3, 100), (3, 0.0, 1)] {
        let records = synthetic(seed, 3000, loss);
        // 3000 messages over 30 s: a window from 2 s to 27.5 s in 1-s and 7-ms bins.
        compare_throughput(
            &records,
            chunk,
            2_000_000_000,
            27_500_000_000,
            1_000_000_000,
        );
        compare_throughput(&records, chunk, 0, 31_000_000_000, 7_000_000);
    }
}

// Pieces of several units (SCTP bundles, TCP segments), acknowledged in
// parts, out of order, and again: bytes pro rata of the piece that first
// carried each unit, counted once.
#[test]
fn streamed_throughput_splits_pieces_like_the_whole_trace() {
    let at = Instant::from_nanos;
    let sent = |t: u64, pieces: &[(u64, u64, u32)]| Record::PacketSent {
        time: at(t),
        wire_bytes: 0,
        data: pieces
            .iter()
            .map(|(s, e, b)| SentData {
                units: Units::new(*s, *e),
                bytes: *b,
                reason: TxReason::New,
            })
            .collect(),
        control: 0,
    };
    let acked = |t: u64, s: u64, e: u64| Record::Acked {
        time: at(t),
        units: Units::new(s, e),
    };
    let records = vec![
        sent(0, &[(0, 3, 100), (3, 10, 1000)]),
        sent(1, &[(10, 13, 7)]),
        acked(5, 1, 2),
        acked(6, 4, 9),
        // A retransmission of acknowledged and unacknowledged units: the
        // first transmission counts.
        sent(7, &[(0, 13, 5000)]),
        acked(12, 0, 11),
        acked(13, 0, 13),
        acked(14, 0, 13),
        sent(15, &[(13, 20, 700)]),
        acked(25, 13, 20),
    ];
    for chunk in 1..=records.len() {
        compare_throughput(&records, chunk, 0, 30, 4);
        compare_throughput(&records, chunk, 6, 26, 3);
    }
}
