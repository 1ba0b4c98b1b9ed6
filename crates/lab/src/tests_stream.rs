//! Streamed runs (`Detail::stream`, `metrics::FlowStream`) against the full
//! analysis: every exact field equal, on SCTP and TCP with loss both ways,
//! thin and greedy flows, several streams, unordered delivery; and the
//! open state of a long streamed run stays bounded.

use std::path::Path;

use crate::plan::{Plan, PlanOptions};
use crate::record::{latency_kinds, RunRecord};
use crate::runner::{run_one, streams, Detail};
use crate::scenario::Scenario;

fn plan(text: &str) -> Plan {
    let scenario = Scenario::parse(text, Path::new("stream.toml")).unwrap();
    Plan::new(scenario, &PlanOptions::default()).unwrap()
}

/// Every run of `text` analysed both ways: the records must be equal
/// (wall time apart).
fn assert_streaming_exact(text: &str) {
    let plan = plan(text);
    assert!(streams(&plan), "the scenario must be one that streams");
    let kinds = latency_kinds(&plan.scenario);
    for spec in &plan.runs {
        let full = run_one(&plan, spec, Detail::default()).unwrap();
        assert!(full.digests.is_none() && !full.flows.is_empty());
        let streamed = run_one(
            &plan,
            spec,
            Detail {
                stream: true,
                ..Detail::default()
            },
        )
        .unwrap();
        assert!(streamed.flows.is_empty() && streamed.digests.is_some());
        let mut a = RunRecord::of(&full, &kinds);
        let mut b = RunRecord::of(&streamed, &kinds);
        a.wall_s = 0.0;
        b.wall_s = 0.0;
        let name = &plan.variants[spec.variant].spec.name;
        assert_eq!(a.flows.len(), b.flows.len());
        for (fa, fb) in a.flows.iter().zip(&b.flows) {
            assert!(fa.messages > 100, "{name}: too few messages to mean much");
            assert_eq!(fa.messages, fb.messages, "{name}: messages");
            assert_eq!(fa.reason_table, fb.reason_table, "{name}: reason table");
            assert_eq!(fa.spurious, fb.spurious, "{name}: spurious");
            assert_eq!(fa.recovery, fb.recovery, "{name}: recovery counts");
            assert_eq!(
                (fa.payload_bytes_sent, fa.unique_bytes_sent),
                (fb.payload_bytes_sent, fb.unique_bytes_sent),
                "{name}: tohd bytes"
            );
            for k in &kinds {
                let (sa, sb) = (fa.samples(*k), fb.samples(*k));
                let differ: Vec<usize> = (0..sa.len().max(sb.len()))
                    .filter(|i| sa.get(*i) != sb.get(*i))
                    .collect();
                assert!(
                    differ.is_empty(),
                    "{name}: {} samples: {} of {} differ (full / streamed), first: {:?}",
                    k.name(),
                    differ.len(),
                    sa.len(),
                    differ
                        .iter()
                        .take(3)
                        .map(|i| (sa.get(*i), sb.get(*i)))
                        .collect::<Vec<_>>()
                );
            }
        }
        if plan.scenario.metrics.throughput.is_some() {
            let traced: u32 = plan.scenario.flows.iter().map(|f| f.expanded_count()).sum();
            assert_eq!(
                a.throughput
                    .iter()
                    .map(|s| s.flow_bytes.len())
                    .sum::<usize>(),
                traced as usize,
                "{name}: a total per traced flow"
            );
            assert!(
                a.throughput
                    .iter()
                    .all(|s| s.flow_bytes.iter().all(|b| *b > 0)),
                "{name}: every flow acknowledges bytes"
            );
            assert!(
                a.throughput.iter().all(|s| !s.aggregate_bytes.is_empty()
                    && s.jain.len() == s.aggregate_bytes.len()
                    && s.aggregate_bytes.iter().sum::<u64>() == s.flow_bytes.iter().sum::<u64>()),
                "{name}: the per-interval sums add up to the flows' totals"
            );
            assert_eq!(a.throughput, b.throughput, "{name}: throughput series");
        }
        assert_eq!(a.worst, b.worst, "{name}: slowest message path");
        assert_eq!(a, b, "{name}: run record");
    }
}

// SCTP presets with different recovery (RDB bundles, fast retransmit,
// timeouts) and TCP, one thin stream, 5 % loss both ways.
#[test]
fn streamed_thin_streams_equal_the_full_analysis() {
    assert_streaming_exact(
        r#"
name = "stream-thin"
duration = "10min"
drain = "30s"
seed = 3
repetitions = 1

[topology]
kind = "two-host"
forward = "delay 50ms loss 5%"
reverse = "delay 50ms loss 5%"

[[flows]]
workload = { kind = "constant", iat = "250ms", bytes = 100 }

[[variants]]
name = "production"
preset = "production"

[[variants]]
name = "linux"
preset = "linux"
overrides = { delayed_sack = false }

[[variants]]
name = "thin"
preset = "thin"

[[variants]]
name = "tcp"
transport = "tcp"
preset = "linux-modern"

[[variants]]
name = "tcp-newreno"
transport = "tcp"
preset = "linux-2.6.23"

[metrics]
latency = "application"
owd = "min-observed"
also = ["ack", "transport", "ack-from-send", "application-from-first-tx"]
"#,
    );
}

// Greedy flows (TCP byte units by the megabyte, SCTP bulk) over a lossy
// bottleneck, several streams and unordered delivery, a given one-way delay.
#[test]
fn streamed_bulk_and_multistream_flows_equal_the_full_analysis() {
    assert_streaming_exact(
        r#"
name = "stream-bulk"
duration = "20s"
drain = "5s"
seed = 8
repetitions = 1

[topology]
kind = "two-host"
forward = "delay 20ms rate 5mbit limit 50 loss 1%"
reverse = "delay 20ms loss 1%"

[[flows]]
workload = { kind = "bulk" }

[[variants]]
name = "sctp"
preset = "rfc"

[[variants]]
name = "tcp"
transport = "tcp"
preset = "linux-modern"

[metrics]
latency = "ack"
owd = "20ms"
also = ["application"]
"#,
    );
    assert_streaming_exact(
        r#"
name = "stream-streams"
duration = "5min"
drain = "30s"
seed = 9
repetitions = 1

[topology]
kind = "two-host"
forward = "delay 30ms loss 4%"
reverse = "delay 30ms loss 4%"

[[flows]]
workload = { kind = "exponential", mean-iat = "40ms", bytes = 200, streams = 4 }

[[variants]]
name = "four-streams"
preset = "rfc"

[[variants]]
name = "unordered"
preset = "thin"
unordered = true

[[variants]]
name = "tcp-per-stream"
transport = "tcp"
preset = "linux-modern"

[metrics]
latency = "application"
owd = "none"
also = ["transport"]
"#,
    );
}

// Throughput series ([metrics] throughput): a thin stream and greedy TCP
// and SCTP flows over a lossy dumbbell, the greedy flows outside the
// latency tables; the series of every flow streamed equal the full
// analysis's.
#[test]
fn streamed_throughput_series_equal_the_full_analysis() {
    assert_streaming_exact(
        r#"
name = "stream-throughput"
duration = "90s"
drain = "5s"
seed = 5
repetitions = 1

[topology]
kind = "dumbbell"
bottleneck_forward = "rate 4mbit limit 40 loss 1%"
bottleneck_reverse = "rate 4mbit limit 40"
access = [{ a = "delay 20ms" }]

[[flows]]
workload = { kind = "constant", iat = "100ms", bytes = 120 }

[[flows]]
transport = "tcp"
preset = "newreno"
measured = false
count = 3
workload = { kind = "bulk" }

[[flows]]
preset = "rfc"
measured = false
workload = { kind = "bulk" }

[[variants]]
name = "sctp"
preset = "production"

[[variants]]
name = "tcp"
transport = "tcp"
preset = "linux-modern"

[metrics]
latency = "application"
throughput = { interval = "7s", from = "3s" }
"#,
    );
}

// A six-hour thin stream, SCTP and TCP, 5 % loss: the streamed analysis's
// state (open messages, stored unit ranges, exact samples, records read
// per pause) stays under fixed bounds and is no larger than after one
// hour; past the sample limit the digest holds histograms, and the pooled
// summary keeps counts, means and maxima exact and percentiles within the
// histogram's bound.
#[test]
fn streamed_long_run_state_is_bounded_and_percentiles_within_bound() {
    use crate::runner::STREAM_SAMPLE_LIMIT;
    use thinstream_metrics::{LatencyKind, Summary};
    let text = |duration: &str| {
        format!(
            r#"
name = "stream-long"
duration = "{duration}"
drain = "60s"
seed = 21
repetitions = 1

[topology]
kind = "two-host"
forward = "delay 50ms loss 5%"
reverse = "delay 50ms loss 5%"

[[flows]]
workload = {{ kind = "constant", iat = "250ms", bytes = 100 }}

[[variants]]
name = "linux"
preset = "linux"

[[variants]]
name = "tcp"
transport = "tcp"
preset = "linux-modern"

[metrics]
latency = "application"
owd = "min-observed"
also = ["ack"]
"#
        )
    };
    let streamed = |plan: &Plan, i: usize| {
        run_one(
            plan,
            &plan.runs[i],
            Detail {
                stream: true,
                ..Detail::default()
            },
        )
        .unwrap()
    };
    let short = plan(&text("1h"));
    let long = plan(&text("6h"));
    for i in 0..long.runs.len() {
        let name = &long.variants[long.runs[i].variant].spec.name;
        let p1 = streamed(&short, i).stream_peak.unwrap();
        let out = streamed(&long, i);
        let p6 = out.stream_peak.unwrap();
        assert!(p6.open_messages <= 64, "{name}: {p6:?}");
        assert!(p6.stored_ranges <= 1024, "{name}: {p6:?}");
        assert!(
            p6.exact_samples <= 2 * STREAM_SAMPLE_LIMIT,
            "{name}: {p6:?}"
        );
        assert!(p6.records_per_pause <= 2000, "{name}: {p6:?}");
        // Only paths that can still be a blocker (0 or 1 here), not the
        // 256 most recent final messages.
        assert!(p6.kept_paths <= 8, "{name}: {p6:?}");
        assert!(
            p6.open_messages <= p1.open_messages.max(16)
                && p6.stored_ranges <= p1.stored_ranges.max(64),
            "{name}: state grew with the duration: 1 h {p1:?}, 6 h {p6:?}"
        );
        let digests = out.digests.unwrap();
        let kind = LatencyKind::Application;
        assert!(
            digests[0].histograms.contains_key(&kind),
            "{name}: 86400 messages > limit"
        );
        assert!(digests[0].samples(kind).is_empty());

        let full = run_one(&long, &long.runs[i], Detail::default()).unwrap();
        let exact = Summary::pooled(&full.flows, kind);
        let approx = Summary::pooled_digests(&digests, kind);
        assert_eq!(exact.messages, approx.messages);
        assert_eq!(exact.delivered, approx.delivered);
        assert_eq!(exact.reasons, approx.reasons);
        assert_eq!(exact.spurious, approx.spurious);
        assert_eq!(exact.tohd, approx.tohd);
        assert_eq!(exact.rto_measured_count, approx.rto_measured_count);
        let owd_ms = 50.0;
        let within = |e: f64, a: f64, what: &str| {
            let bound = (2.0 * e + owd_ms + 1.0) / 1024.0;
            assert!(
                a >= e - 1e-9 && a - e <= bound,
                "{name}: {what}: {a} ms vs exact {e} ms (bound {bound})"
            );
        };
        let (e, a) = (exact.latency_ms.unwrap(), approx.latency_ms.unwrap());
        assert_eq!(
            (e.mean, e.max),
            (a.mean, a.max),
            "{name}: mean and max exact"
        );
        within(e.p50, a.p50, "p50");
        within(e.p90, a.p90, "p90");
        within(e.p99, a.p99, "p99");
        within(e.p999, a.p999, "p99.9");
        for (re, ra) in exact
            .by_retransmissions
            .iter()
            .zip(&approx.by_retransmissions)
        {
            assert_eq!(
                (re.count, re.mean_ms, re.max_ms),
                (ra.count, ra.mean_ms, ra.max_ms)
            );
            if let (Some(e), Some(a)) = (re.p99_ms, ra.p99_ms) {
                within(e, a, "p99 by retransmissions");
            }
        }
    }
}

// The cumulative ACK latency streams (a running cumulative ACK point): the
// streamed record equals the full one, and its values are never below the
// first-acknowledgement ones and above them for some message when segments
// are lost (those behind a lost one wait for its retransmission).
#[test]
fn cumulative_ack_latency_streams_exactly() {
    use thinstream_metrics::LatencyKind;
    let text = r#"
name = "cumulative"
duration = "5min"
drain = "30s"
seed = 3
repetitions = 1

[topology]
kind = "two-host"
forward = "delay 75ms loss 5%"
reverse = "delay 75ms loss 5%"

[[flows]]
transport = "tcp"
workload = { kind = "constant", iat = "100ms", bytes = 100 }
app_start_from = "established"

[[variants]]
name = "newreno"
preset = "linux-2.6.23"

[metrics]
latency = "application"
also = ["ack", "ack-cumulative"]
"#;
    assert_streaming_exact(text);
    let plan = plan(text);
    let kinds = latency_kinds(&plan.scenario);
    let out = run_one(
        &plan,
        &plan.runs[0],
        Detail {
            stream: true,
            ..Detail::default()
        },
    )
    .unwrap();
    assert!(out.digests.is_some() && out.flows.is_empty());
    let rec = RunRecord::of(&out, &kinds);
    let f = &rec.flows[0];
    let ack = f.samples(LatencyKind::AckFromFirstTx);
    let cum = f.samples(LatencyKind::AckCumulative);
    assert!(ack.len() > 2000 && cum.len() == ack.len());
    assert!(ack.iter().zip(cum).all(|(a, c)| c.nanos >= a.nanos));
    assert!(ack.iter().zip(cum).any(|(a, c)| c.nanos > a.nanos));
}

// The slowest message chosen by the cumulative ACK latency (its value known
// only once every earlier message is final): same path as the full analysis,
// on SCTP with four streams, unordered messages and loss both ways, and on TCP.
#[test]
fn slowest_by_cumulative_ack_latency_streams_exactly() {
    assert_streaming_exact(
        r#"
name = "cumulative-slowest"
duration = "5min"
drain = "30s"
seed = 11
repetitions = 1

[topology]
kind = "two-host"
forward = "delay 40ms loss 5%"
reverse = "delay 40ms loss 3%"

[[flows]]
workload = { kind = "exponential", mean-iat = "50ms", bytes = 200, streams = 4 }

[[variants]]
name = "linux"
preset = "linux"

[[variants]]
name = "unordered"
preset = "thin"
unordered = true

[[variants]]
name = "tcp"
transport = "tcp"
preset = "linux-2.6.23"

[metrics]
latency = "ack-cumulative"
also = ["ack", "application"]
"#,
    );
}

// TCP RDB over a congested bottleneck: a redundant bundle starts at the
// cumulative ACK point and can carry bytes of messages that were already
// acknowledged (selectively), had arrived and were delivered. The streamed
// analysis keeps such messages until the cumulative point passes them, so
// those copies count in their retransmission group and in the reason
// table's row by number, as in the full analysis.
#[test]
fn streamed_rdb_over_a_congested_bottleneck_equals_the_full_analysis() {
    assert_streaming_exact(
        r#"
name = "stream-rdb"
duration = "90s"
drain = "10s"
seed = 3
repetitions = 1

[topology]
kind = "dumbbell"
bottleneck_forward = "rate 1000kbit limit 100"
bottleneck_reverse = "rate 1000kbit limit 100"
access = [{ a = "delay 50ms" }]

[[flows]]
transport = "tcp"
preset = "linux-2.6.23"
measured = false
count = 2
workload = { kind = "bulk" }
app_start = "1s"

[[flows]]
transport = "tcp"
count = 6
workload = { kind = "constant", iat = "85ms", bytes = 120 }
app_start = "1s"

[[variants]]
name = "RDB"
preset = "linux-2.6.23+rdb"

[[variants]]
name = "all-mods"
preset = "linux-2.6.23+all"

[metrics]
latency = "application"
owd = "min-observed"
also = ["ack", "ack-cumulative"]
"#,
    );
}

// The exact samples of a streamed run are shared out over its measured
// flows: a run of up to 32 flows keeps 2^16 per flow, more flows keep the
// budget between them, and no flow fewer than the floor.
#[test]
fn exact_samples_are_shared_out_over_the_measured_flows() {
    use crate::runner::{
        stream_sample_limit, STREAM_SAMPLE_BUDGET, STREAM_SAMPLE_FLOOR, STREAM_SAMPLE_LIMIT,
    };
    assert_eq!(stream_sample_limit(0), STREAM_SAMPLE_LIMIT);
    assert_eq!(stream_sample_limit(1), STREAM_SAMPLE_LIMIT);
    assert_eq!(stream_sample_limit(32), STREAM_SAMPLE_LIMIT);
    assert!(stream_sample_limit(33) < STREAM_SAMPLE_LIMIT);
    for flows in [33, 100, 1000, 2048] {
        let l = stream_sample_limit(flows);
        assert!(l * flows <= STREAM_SAMPLE_BUDGET, "{flows}: {l}");
        assert!(l * flows > STREAM_SAMPLE_BUDGET - flows, "{flows}: {l}");
    }
    assert_eq!(stream_sample_limit(2049), STREAM_SAMPLE_FLOOR);
    assert_eq!(stream_sample_limit(1_000_000), STREAM_SAMPLE_FLOOR);
}

// A streamed run of few flows reads its records every 10 s of virtual
// time; with more flows, proportionally more often (the records held
// between two reads stay about as many), never more than every second.
#[test]
fn records_are_read_more_often_the_more_flows_a_run_measures() {
    use crate::runner::{stream_pause, STREAM_PAUSE, STREAM_PAUSE_MIN};
    use thinstream_base::Duration;
    for flows in [0, 1, 100] {
        assert_eq!(stream_pause(flows), STREAM_PAUSE);
    }
    assert_eq!(stream_pause(200), Duration::from_secs(5));
    assert_eq!(stream_pause(1000), Duration::from_secs(1));
    assert_eq!(stream_pause(500), Duration::from_secs(2));
    assert_eq!(STREAM_PAUSE_MIN, Duration::from_secs(1));
    assert_eq!(stream_pause(4000), STREAM_PAUSE_MIN);
    assert_eq!(stream_pause(1_000_000), STREAM_PAUSE_MIN);
}
