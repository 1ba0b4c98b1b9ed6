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
                    data: data.into(),
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

    // The same, taking and releasing the intervals complete after each
    // chunk, as a long run does: the counts taken equal the whole series,
    // and the stream never holds many intervals.
    let mut s = ThroughputStream::new(from, to, interval).unwrap();
    let (mut taken, mut held) = (Vec::new(), 0);
    for part in records.chunks(chunk) {
        s.push(part).unwrap();
        held = held.max(s.held_intervals());
        let complete = s.complete_at(part.last().unwrap().time());
        taken.extend((taken.len()..complete).map(|k| s.bin(k)));
        s.release(complete);
    }
    taken.extend(s.finish());
    assert_eq!(taken, full, "released as the records are read");
    // A chunk of the long synthetic traces spans at most about a second.
    if full.len() >= 25 && chunk <= 100 {
        assert!(
            held <= full.len() / 2,
            "held {held} of {} intervals",
            full.len()
        );
    }
}

/// An acknowledgement inside an interval already released is out of
/// time order: an error, not a count lost.
#[test]
fn an_acknowledgement_in_a_released_interval_is_refused() {
    let records = synthetic(4, 400, 0.0);
    let (from, to) = (Instant::from_nanos(0), Instant::from_nanos(5_000_000_000));
    let mut s = ThroughputStream::new(
        from,
        to,
        thinstream_base::Duration::from_nanos(1_000_000_000),
    )
    .unwrap();
    assert_eq!(s.intervals(), 5);
    let half = records.len() / 2;
    s.push(&records[..half]).unwrap();
    // Release every interval, though later records still fall in them.
    s.release(5);
    assert_eq!(s.bin(0), 0, "a released interval reads as zero");
    let err = s.push(&records[half..]).unwrap_err();
    assert!(
        matches!(err, MetricsError::UnorderedRecords { .. }),
        "got {err:?}"
    );
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

/// A synthetic two-sided trace for the cumulative ACK latency: `n`
/// messages of 1..=3 units every 10 ms on one ordered stream; each unit's
/// copy is lost with probability `loss` and sent again 200 ms later; each
/// unit is acknowledged on its own, 20..50 ms after it arrived, so a
/// message is often acknowledged piece by piece and later units before
/// earlier ones; some messages are abandoned (after arriving, with or
/// without an acknowledgement), and, if `stuck`, one message near the end
/// is never acknowledged. Returns (sender, receiver) records.
fn two_sided(seed: u64, n: u64, loss: f64, stuck: bool) -> (Vec<Record>, Vec<Record>) {
    let mut rng = Seed(seed).rng();
    let mut tx: Vec<(u64, u64, Record)> = Vec::new();
    let mut rx: Vec<(u64, u64, Record)> = Vec::new();
    let mut order = 0u64;
    let mut push = |v: &mut Vec<(u64, u64, Record)>, t: u64, r: Record| {
        order += 1;
        v.push((t, order, r));
    };
    let at = Instant::from_nanos;
    let ms = 1_000_000u64;
    let mut unit = 0u64;
    let mut delivered_up_to = 0u64;
    for id in 0..n {
        let t0 = id * 10 * ms;
        let len = rng.range_inclusive(1, 3);
        let units = Units::new(unit, unit + len);
        unit += len;
        push(
            &mut tx,
            t0,
            Record::Submitted {
                time: at(t0),
                message: id,
                stream: 0,
                bytes: 100 * len as u32,
                unordered: false,
                units,
            },
        );
        let abandon = rng.chance(0.02);
        let abandon_acked = abandon && rng.chance(0.5);
        let never_acked = stuck && id == n - 20;
        let mut last_arrival = 0;
        let mut last_ack = 0;
        for u in units.start..units.end {
            let mut t = t0;
            let mut reason = TxReason::New;
            let arrival = loop {
                push(
                    &mut tx,
                    t,
                    Record::PacketSent {
                        time: at(t),
                        wire_bytes: 0,
                        data: thinstream_base::trace::pieces![SentData {
                            units: Units::one(u),
                            bytes: 100,
                            reason,
                        }],
                        control: 0,
                    },
                );
                if !rng.chance(loss) {
                    break t + 20 * ms;
                }
                t += 200 * ms;
                reason = TxReason::TimeoutRetransmit;
            };
            push(
                &mut rx,
                arrival,
                Record::Arrived {
                    time: at(arrival),
                    units: Units::one(u),
                    bytes: 100,
                    duplicate: false,
                },
            );
            last_arrival = last_arrival.max(arrival);
            if !never_acked && (!abandon || abandon_acked) {
                let a = arrival + rng.range_inclusive(20, 50) * ms;
                last_ack = last_ack.max(a);
                push(
                    &mut tx,
                    a,
                    Record::Acked {
                        time: at(a),
                        units: Units::one(u),
                    },
                );
            }
        }
        // Given up on after what it got (an acknowledgement after the
        // message was final would be a fact the streamed analysis cannot
        // take back).
        if abandon {
            let a = last_arrival.max(last_ack) + 5 * ms;
            push(&mut tx, a, Record::Abandoned { time: at(a), units });
        }
        // In order: delivered once it and every earlier message arrived.
        delivered_up_to = delivered_up_to.max(last_arrival);
        push(
            &mut rx,
            delivered_up_to,
            Record::Delivered {
                time: at(delivered_up_to),
                stream: 0,
                bytes: 100 * len as u32,
                unordered: false,
                units,
            },
        );
    }
    let sorted = |mut v: Vec<(u64, u64, Record)>| {
        v.sort_by_key(|(t, o, _)| (*t, *o));
        v.into_iter().map(|(_, _, r)| r).collect::<Vec<_>>()
    };
    (sorted(tx), sorted(rx))
}

/// The whole-trace analysis of a two-sided trace, raw latencies.
fn whole_two_sided(tx: &[Record], rx: &[Record]) -> FlowAnalysis {
    FlowAnalysis::build(
        FlowInput {
            sender: tx,
            receiver: Some(rx),
            app_sends: None,
            duplicate_reports: None,
        },
        AnalysisOptions {
            owd: OwdCorrection::None,
            summary_latency: LatencyKind::AckCumulative,
        },
    )
    .unwrap()
}

/// The streamed cumulative ACK latency (samples, and the slowest message
/// chosen by it) against the whole-trace analysis, records fed `chunk`
/// milliseconds at a time. Returns the most messages waiting at once.
fn compare_cumulative(seed: u64, n: u64, loss: f64, stuck: bool, chunk_ms: u64) -> usize {
    use crate::joined::FlowStream;
    let (tx, rx) = two_sided(seed, n, loss, stuck);
    let kinds = [LatencyKind::AckFromFirstTx, LatencyKind::AckCumulative];
    let whole = whole_two_sided(&tx, &rx);
    let mut s = FlowStream::new(
        OwdCorrection::None,
        &kinds,
        Some(LatencyKind::AckCumulative),
    )
    .unwrap();
    let end = tx.iter().chain(&rx).map(Record::time).max().unwrap();
    let step = thinstream_base::Duration::from_millis(chunk_ms);
    let (mut i, mut j) = (0, 0);
    let mut upto = Instant::from_nanos(0);
    while upto <= end {
        upto = upto + step;
        let a = i + tx[i..].partition_point(|r| r.time() <= upto);
        let b = j + rx[j..].partition_point(|r| r.time() <= upto);
        s.push(tx[i..a].to_vec(), rx[j..b].to_vec(), upto).unwrap();
        (i, j) = (a, b);
    }
    let peak = s.peak_cumulative_waiting();
    let (digest, slowest) = s.finish().unwrap();
    let full = whole.digest(&kinds);
    let cum = &full.latencies[&LatencyKind::AckCumulative];
    let mine = &digest.latencies[&LatencyKind::AckCumulative];
    let first_diff = mine.iter().zip(cum).position(|(a, b)| a != b);
    assert_eq!(
        (mine.len(), first_diff),
        (cum.len(), None),
        "seed {seed}: cumulative samples"
    );
    assert_eq!(
        digest.latencies[&LatencyKind::AckFromFirstTx],
        full.latencies[&LatencyKind::AckFromFirstTx],
        "seed {seed}: ack samples"
    );
    // The slowest message by the cumulative latency: same value, same
    // message (ties: the earliest).
    let best = whole
        .latencies(LatencyKind::AckCumulative)
        .into_iter()
        .fold(
            None::<(&MessageOutcome, thinstream_base::Duration)>,
            |b, (m, l)| match b {
                Some((_, x)) if x >= l => b,
                _ => Some((m, l)),
            },
        );
    let slowest = slowest.expect("a slowest message");
    let (m, l) = best.expect("some cumulative latency");
    assert_eq!(
        slowest.message.latency,
        Some(l),
        "seed {seed}: slowest value"
    );
    assert_eq!(
        slowest.message.outcome.message, m.message,
        "seed {seed}: slowest message"
    );
    peak
}

#[test]
fn streamed_cumulative_ack_latency_matches_the_whole_trace() {
    // Loss and piecewise, reordered acknowledgements: the cumulative value
    // exceeds the first-acknowledgement one for some messages, and the
    // messages waiting behind an open one stay bounded (a recovery of up to
    // a few 200-ms rounds at one message per 10 ms), whatever `n` is.
    for (seed, n, loss, chunk) in [(1, 3000, 0.05, 10), (2, 3000, 0.2, 1000), (3, 500, 0.0, 7)] {
        let peak = compare_cumulative(seed, n, loss, false, chunk);
        assert!(peak < 200, "seed {seed}: {peak} messages waiting at once");
        let (tx, rx) = two_sided(seed, n, loss, false);
        let whole = whole_two_sided(&tx, &rx);
        let ack = whole.latencies(LatencyKind::AckFromFirstTx);
        let cum = whole.latencies(LatencyKind::AckCumulative);
        assert!(
            cum.len() + 40 > n as usize,
            "seed {seed}: {} values",
            cum.len()
        );
        if loss > 0.0 {
            let later = cum
                .iter()
                .filter(|(m, c)| ack.iter().any(|(a, l)| a.message == m.message && l < c))
                .count();
            assert!(
                later > 50,
                "seed {seed}: {later} messages waited for an earlier one"
            );
        }
    }
    // A message never acknowledged holds back every later one.
    compare_cumulative(4, 1000, 0.05, true, 50);
}

/// A TCP-like trace where a redundant bundle (RDB) carries bytes of a
/// message that was already selectively acknowledged, had arrived and was
/// delivered, while the cumulative ACK for the hole below it was still in
/// flight: the streamed digest equals the whole-trace one, that copy
/// counting in the message's retransmissions and in the reason table's
/// row by number.
#[test]
fn streamed_copy_of_a_sacked_delivered_message_counts_as_in_the_whole_trace() {
    use crate::joined::FlowStream;
    let t = Instant::from_millis;
    let sent = |at: u64, units: Units, reason: TxReason| Record::PacketSent {
        time: t(at),
        wire_bytes: 0,
        data: thinstream_base::trace::pieces![SentData {
            units,
            bytes: units.len() as u32,
            reason,
        }],
        control: 0,
    };
    let submitted = |message: u64, units: Units| Record::Submitted {
        time: t(0),
        message,
        stream: 0,
        bytes: units.len() as u32,
        unordered: false,
        units,
    };
    let (a, b, c) = (
        Units::new(0, 100),
        Units::new(100, 200),
        Units::new(200, 300),
    );
    let tx = vec![
        submitted(0, a),
        submitted(1, b),
        sent(0, a, TxReason::New),
        sent(1, b, TxReason::New),
        // B is SACKed above the hole at A.
        Record::Acked {
            time: t(100),
            units: b,
        },
        sent(150, a, TxReason::FastRetransmit),
        // New data C with a redundant bundle from snd_una (A and B) while
        // the cumulative ACK for A is in flight.
        Record::Submitted {
            time: t(260),
            message: 2,
            stream: 0,
            bytes: 100,
            unordered: false,
            units: c,
        },
        sent(260, Units::new(0, 200), TxReason::RedundantBundle),
        sent(260, c, TxReason::New),
        Record::Acked {
            time: t(300),
            units: a,
        },
        Record::Acked {
            time: t(360),
            units: c,
        },
    ];
    let rx = vec![
        Record::Arrived {
            time: t(50),
            units: b,
            bytes: 100,
            duplicate: false,
        },
        Record::Arrived {
            time: t(200),
            units: a,
            bytes: 100,
            duplicate: false,
        },
        Record::Delivered {
            time: t(200),
            stream: 0,
            bytes: 200,
            unordered: false,
            units: Units::new(0, 200),
        },
        Record::Arrived {
            time: t(310),
            units: Units::new(0, 200),
            bytes: 200,
            duplicate: true,
        },
        Record::Arrived {
            time: t(310),
            units: c,
            bytes: 100,
            duplicate: false,
        },
        Record::Delivered {
            time: t(310),
            stream: 0,
            bytes: 100,
            unordered: false,
            units: c,
        },
    ];
    let kinds = [LatencyKind::Application, LatencyKind::AckFromFirstTx];
    let full = whole_two_sided(&tx, &rx).digest(&kinds);
    // The whole trace counts the bundle as B's second transmission.
    let retransmissions: Vec<u32> = full.latencies[&LatencyKind::Application]
        .iter()
        .map(|s| s.retransmissions)
        .collect();
    assert_eq!(retransmissions, [2, 1, 0]);
    for chunk_ms in [1, 1000] {
        let mut s = FlowStream::new(OwdCorrection::None, &kinds, None).unwrap();
        let step = thinstream_base::Duration::from_millis(chunk_ms);
        let (mut i, mut j) = (0, 0);
        let mut upto = Instant::from_nanos(0);
        while i < tx.len() || j < rx.len() {
            upto = upto + step;
            let a = i + tx[i..].partition_point(|r| r.time() < upto);
            let b = j + rx[j..].partition_point(|r| r.time() < upto);
            s.push(tx[i..a].to_vec(), rx[j..b].to_vec(), upto).unwrap();
            (i, j) = (a, b);
        }
        let (digest, _) = s.finish().unwrap();
        assert_eq!(digest, full, "records fed {chunk_ms} ms at a time");
    }
}

// Exact samples keep the submission index in 32 bits; a flow whose index
// passes that (four billion messages) moves the kind to the histogram:
// counts, mean and maximum stay exact, and nothing is lost or panics.
#[test]
fn a_submission_index_beyond_32_bits_moves_the_kind_to_the_histogram() {
    use crate::joined::FlowStream;
    let (tx, rx) = two_sided(7, 200, 0.05, false);
    let kinds = [LatencyKind::AckFromFirstTx];
    let run = |skip: u64| {
        let mut s = FlowStream::new(OwdCorrection::None, &kinds, None).unwrap();
        s.skip_submissions(skip);
        let end = tx.iter().chain(&rx).map(Record::time).max().unwrap();
        s.push(tx.clone(), rx.clone(), end).unwrap();
        s.finish().unwrap().0
    };
    let exact = run(0);
    assert!(exact.histograms.is_empty());
    let samples = &exact.latencies[&LatencyKind::AckFromFirstTx];
    assert!(samples.len() > 150, "{}", samples.len());
    // The first messages get indices below 2^32, the rest above.
    let past = run(u64::from(u32::MAX) - 20);
    assert!(past.latencies[&LatencyKind::AckFromFirstTx].is_empty());
    let h = &past.histograms[&LatencyKind::AckFromFirstTx];
    assert_eq!(h.count(), samples.len() as u64);
    let all = h.stats(None).unwrap();
    let n = samples.len() as f64;
    let mean = samples.iter().map(|x| x.nanos as f64).sum::<f64>() / n;
    assert!(
        (all.mean_ns - mean).abs() < 1e-6 * mean,
        "{} {mean}",
        all.mean_ns
    );
    let max = samples.iter().map(|x| x.nanos).max().unwrap();
    assert_eq!(all.max.as_nanos(), max);
    for g in 0..4 {
        let in_group = samples
            .iter()
            .filter(|x| (x.retransmissions as usize).min(3) == g)
            .count() as u64;
        assert_eq!(
            h.stats(Some(g)).map_or(0, |st| st.count),
            in_group,
            "group {g}"
        );
    }
}
