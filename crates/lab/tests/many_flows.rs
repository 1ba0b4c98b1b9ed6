//! Beyond 254 flows: the 1000-thin-stream dumbbell of
//! `scenarios/scale/dumbbell-1000.toml` runs (shortened), every thin stream
//! delivers, and the flows past 254 (addressed in the RFC 2544 range) are
//! among them.

use std::path::Path;

use thinstream_base::Duration;
use thinstream_lab::{run_all, Plan, PlanOptions, RunOptions, Scenario};

#[test]
fn a_thousand_thin_streams_and_twenty_greedy_flows() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/scale/dumbbell-1000.toml");
    let scenario = Scenario::load(&path).expect("scenario");
    let plan = Plan::new(
        scenario,
        &PlanOptions {
            duration: Some(Duration::from_secs(20)),
            drain: Some(Duration::from_secs(3)),
            variants: Some(vec!["production".into()]),
            ..PlanOptions::default()
        },
    )
    .expect("plan");
    let outcomes = run_all(&plan, &RunOptions::default()).expect("runs");
    let o = &outcomes[0];
    assert!(o.fault.is_none(), "{:?}", o.fault);
    assert_eq!(o.flows.len(), 1000, "every thin stream is measured");
    let silent: Vec<usize> = o
        .flows
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.messages().iter().any(|m| m.delivered.is_some()))
        .map(|(i, _)| i)
        .collect();
    assert!(
        silent.is_empty(),
        "thin streams that delivered nothing: {silent:?}"
    );
    // The greedy flows moved data too (throughput series of entry 0).
    let greedy: u64 = o
        .throughput
        .iter()
        .filter(|s| s.entry == 0)
        .map(|s| s.flow_bytes.iter().sum::<u64>())
        .sum();
    assert!(greedy > 1_000_000, "greedy flows acked {greedy} bytes");
}
