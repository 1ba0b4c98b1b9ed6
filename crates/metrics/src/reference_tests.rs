//! Random traces checked against a naive per-unit reference: the range-based
//! analysis must give exactly what a per-unit `BTreeMap` computes.

use std::collections::BTreeMap;

use thinstream_base::trace::{Record, SentData, TxReason, Units};
use thinstream_base::{Duration, Instant, Rng, Seed};

use crate::*;

struct Generated {
    sender: Vec<Record>,
    receiver: Vec<Record>,
    /// (time, units, bytes, reason) of every data piece, in send order.
    pieces: Vec<(Instant, Units, u32, TxReason)>,
    /// (time, units) of every copy that arrived.
    arrivals: Vec<(Instant, Units)>,
    messages: Vec<Units>,
}

const UNIT_BYTES: u32 = 100;

fn generate(seed: u64) -> Generated {
    let mut rng = Rng::new(Seed(seed).derive("metrics.reference"));
    let reasons = [
        TxReason::FastRetransmit,
        TxReason::TimeoutRetransmit,
        TxReason::BundledOnRetransmit,
        TxReason::RedundantBundle,
        TxReason::EarlyRetransmit,
    ];
    // (time, sequence, record) so that equal times keep generation order.
    let mut tx: Vec<(Instant, usize, Record)> = Vec::new();
    let mut pieces = Vec::new();
    let mut arrivals = Vec::new();
    let mut messages = Vec::new();
    let mut next_unit = 0u64;
    let mut seq = 0usize;
    let mut push = |v: &mut Vec<(Instant, usize, Record)>, t: Instant, r: Record| {
        v.push((t, seq, r));
        seq += 1;
    };
    for k in 0..300u64 {
        let at = Instant::from_millis(k * 10);
        let len = rng.range_inclusive(1, 3);
        let units = Units::new(next_unit, next_unit + len);
        next_unit += len;
        messages.push(units);
        push(
            &mut tx,
            at,
            Record::Submitted {
                time: at,
                message: k,
                stream: (k % 3) as u16,
                bytes: UNIT_BYTES * len as u32,
                unordered: true,
                units,
            },
        );
        // First transmission: one piece per unit or one piece for the message.
        let mut copies: Vec<(Instant, Units, TxReason)> = if rng.chance(0.5) {
            vec![(at, units, TxReason::New)]
        } else {
            (units.start..units.end)
                .map(|u| (at, Units::one(u), TxReason::New))
                .collect()
        };
        // Extra copies of a random sub-range, later.
        while rng.chance(0.3) {
            let s = rng.range_inclusive(units.start, units.end - 1);
            let e = rng.range_inclusive(s + 1, units.end);
            let when = at + Duration::from_millis(rng.range_inclusive(1, 400));
            copies.push((
                when,
                Units::new(s, e),
                reasons[rng.below(reasons.len() as u64) as usize],
            ));
        }
        for (when, u, reason) in copies {
            let bytes = UNIT_BYTES * u.len() as u32;
            pieces.push((when, u, bytes, reason));
            push(
                &mut tx,
                when,
                Record::PacketSent {
                    time: when,
                    wire_bytes: bytes + 48,
                    data: thinstream_base::trace::pieces![SentData {
                        units: u,
                        bytes,
                        reason,
                    }],
                    control: 0,
                },
            );
            if rng.chance(0.8) {
                let arrive = when + Duration::from_millis(20 + rng.below(6));
                arrivals.push((arrive, u));
            }
        }
    }
    // Receiver: every arriving copy, then per-unit first arrival drives acks and deliveries.
    let mut first_arrival: BTreeMap<u64, Instant> = BTreeMap::new();
    let mut sorted_arrivals = arrivals.clone();
    sorted_arrivals.sort();
    let mut rx: Vec<(Instant, usize, Record)> = Vec::new();
    for (i, (t, u)) in sorted_arrivals.iter().enumerate() {
        let dup = (u.start..u.end).all(|x| first_arrival.contains_key(&x));
        for x in u.start..u.end {
            first_arrival.entry(x).or_insert(*t);
        }
        rx.push((
            *t,
            i,
            Record::Arrived {
                time: *t,
                units: *u,
                bytes: UNIT_BYTES * u.len() as u32,
                duplicate: dup,
            },
        ));
    }
    for (x, t) in &first_arrival {
        let ack = *t + Duration::from_millis(20);
        push(
            &mut tx,
            ack,
            Record::Acked {
                time: ack,
                units: Units::one(*x),
            },
        );
    }
    for (k, units) in messages.iter().enumerate() {
        let all: Option<Vec<Instant>> = (units.start..units.end)
            .map(|x| first_arrival.get(&x).copied())
            .collect();
        if let Some(times) = all {
            let t = *times.iter().max().unwrap_or(&Instant::ZERO);
            rx.push((
                t,
                usize::MAX / 2 + k,
                Record::Delivered {
                    time: t,
                    stream: (k % 3) as u16,
                    bytes: UNIT_BYTES * units.len() as u32,
                    unordered: true,
                    units: *units,
                },
            ));
        }
    }
    tx.sort_by_key(|(t, s, _)| (*t, *s));
    rx.sort_by_key(|(t, s, _)| (*t, *s));
    Generated {
        sender: tx.into_iter().map(|(_, _, r)| r).collect(),
        receiver: rx.into_iter().map(|(_, _, r)| r).collect(),
        pieces,
        arrivals,
        messages,
    }
}

#[test]
fn range_analysis_matches_per_unit_reference() {
    for seed in 0..8 {
        let g = generate(seed);
        let f = FlowAnalysis::new(
            &g.sender,
            Some(&g.receiver),
            AnalysisOptions {
                owd: OwdCorrection::None,
                summary_latency: LatencyKind::Application,
            },
        )
        .unwrap();

        // Reference, one map entry per unit.
        let mut first_tx: BTreeMap<u64, Instant> = BTreeMap::new();
        let mut count: BTreeMap<u64, u32> = BTreeMap::new();
        for (t, u, _, _) in &g.pieces {
            for x in u.start..u.end {
                let e = first_tx.entry(x).or_insert(*t);
                *e = (*e).min(*t);
                *count.entry(x).or_insert(0) += 1;
            }
        }
        let mut arrival: BTreeMap<u64, Instant> = BTreeMap::new();
        for (t, u) in &g.arrivals {
            for x in u.start..u.end {
                let e = arrival.entry(x).or_insert(*t);
                *e = (*e).min(*t);
            }
        }
        let all_max = |m: &BTreeMap<u64, Instant>, u: &Units| -> Option<Instant> {
            (u.start..u.end)
                .map(|x| m.get(&x).copied())
                .collect::<Option<Vec<_>>>()?
                .into_iter()
                .max()
        };
        for (k, units) in g.messages.iter().enumerate() {
            let m = f.message(k as u64).unwrap();
            let want_first = (units.start..units.end)
                .filter_map(|x| first_tx.get(&x).copied())
                .min();
            let want_rtx = (units.start..units.end)
                .map(|x| count.get(&x).copied().unwrap_or(0))
                .max()
                .unwrap_or(0);
            let want_arrived = all_max(&arrival, units);
            let want_acked = want_arrived.map(|_| {
                (units.start..units.end)
                    .map(|x| arrival[&x] + Duration::from_millis(20))
                    .max()
                    .unwrap_or(Instant::ZERO)
            });
            assert_eq!(m.first_tx, want_first, "seed {seed} message {k}");
            assert_eq!(
                m.retransmissions,
                want_rtx.saturating_sub(1),
                "seed {seed} message {k}"
            );
            assert_eq!(m.arrived, want_arrived, "seed {seed} message {k}");
            assert_eq!(m.delivered, want_arrived, "seed {seed} message {k}");
            assert_eq!(m.acked, want_acked, "seed {seed} message {k}");
        }
        let omega: u64 = g.pieces.iter().map(|p| u64::from(p.2)).sum();
        let unique = first_tx.len() as u64 * u64::from(UNIT_BYTES);
        assert_eq!(
            (f.payload_bytes_sent(), f.unique_bytes_sent()),
            (omega, unique),
            "seed {seed}"
        );
        let want_spurious = g
            .pieces
            .iter()
            .filter(|(t, u, _, r)| {
                r.is_retransmission()
                    && (u.start..u.end).all(|x| arrival.get(&x).is_some_and(|a| a <= t))
            })
            .count() as u64;
        assert_eq!(f.spurious(), Some(want_spurious), "seed {seed}");
        let mut reasons: BTreeMap<TxReason, u64> = BTreeMap::new();
        for p in &g.pieces {
            *reasons.entry(p.3).or_insert(0) += 1;
        }
        for (r, c) in f.reasons() {
            assert_eq!(
                *c,
                reasons.get(r).copied().unwrap_or(0),
                "seed {seed} {r:?}"
            );
        }
        // Arrived-bytes throughput over one big interval equals the unique bytes that arrived.
        let end = Instant::from_secs(100);
        let total: u64 = f
            .throughput(
                ThroughputSource::Arrived,
                Instant::ZERO,
                end,
                Duration::from_secs(100),
            )
            .unwrap()
            .iter()
            .sum();
        assert_eq!(
            total,
            arrival.len() as u64 * u64::from(UNIT_BYTES),
            "seed {seed}"
        );
        let acked: u64 = f
            .throughput(
                ThroughputSource::Acked,
                Instant::ZERO,
                end,
                Duration::from_secs(100),
            )
            .unwrap()
            .iter()
            .sum();
        assert_eq!(acked, total, "seed {seed}");
    }
}
