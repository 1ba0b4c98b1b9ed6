//! Sweeps with several axes: parsing, expansion into the cartesian product,
//! the values applied per run, the results' shape (coordinates per point,
//! axes, MTT reduction per cell with confidence intervals) and the plots.

use std::path::Path;

use crate::plan::{Plan, PlanOptions};
use crate::results::Results;
use crate::runner::{run_all, RunOptions};
use crate::scenario::{GridPoint, Scenario, SweepParameter, SweepPoint};
use crate::LabError;
use thinstream_base::{Bitrate, Duration};

fn parse(text: &str) -> Result<Scenario, LabError> {
    Scenario::parse(text, Path::new("grid.toml"))
}

const BASE: &str = r#"
name = "grid"
duration = "3s"
drain = "5s"
seed = 7
repetitions = 2
[topology]
kind = "two-host"
forward = "delay 15ms rate 2000kbit"
[[flows]]
workload = { kind = "bursts", pattern = "exponential-gap", burst-size = 4, gap = "200ms", intra-gap = "10us", bursts = 4, bytes = 200 }
app_start = "1s"
[[variants]]
name = "standard"
preset = "rfc"
overrides = { rto_min = "100ms", rto_initial = "200ms", rto_max = "400ms", sack_delay = "40ms", fast_retransmit_threshold = 4 }
[[variants]]
name = "er"
preset = "rfc+er-packet"
overrides = { rto_min = "100ms", rto_initial = "200ms", rto_max = "400ms", sack_delay = "40ms", fast_retransmit_threshold = 4 }
[metrics]
baseline = "standard"
mtt = "mean"
owd = "none"
"#;

const GRID: &str = r#"
[sweep]
axes = [
  { parameter = "rate", values = ["500kbit", "2000kbit"] },
  { parameter = "delay", values = ["5ms", "25ms"] },
  { parameter = "drop-data-packet", values = [5, 8] },
]
"#;

fn grid() -> String {
    format!("{BASE}{GRID}")
}

// `axes` parse into the cartesian product, first axis outermost; the old
// one-parameter form still parses; mixing the forms, a repeated parameter,
// too many axes and bad values are errors that say so.
#[test]
fn axes_parse_and_expand() {
    let s = parse(&grid()).unwrap();
    let sweep = s.sweep.as_ref().unwrap();
    assert_eq!(
        sweep.parameters(),
        vec![
            SweepParameter::Rate,
            SweepParameter::Delay,
            SweepParameter::DropDataPacket
        ]
    );
    assert_eq!(sweep.name(), "rate x delay x drop-data-packet");
    let points = sweep.points().unwrap();
    assert_eq!(points.len(), 8);
    let labels: Vec<String> = points.iter().map(GridPoint::label).collect();
    assert_eq!(
        labels,
        [
            "500kbit/5ms/5",
            "500kbit/5ms/8",
            "500kbit/25ms/5",
            "500kbit/25ms/8",
            "2000kbit/5ms/5",
            "2000kbit/5ms/8",
            "2000kbit/25ms/5",
            "2000kbit/25ms/8"
        ]
    );
    assert_eq!(
        points[2].coords(),
        &[
            SweepPoint::Rate(Bitrate(500_000)),
            SweepPoint::Delay(Duration::from_millis(25)),
            SweepPoint::DropDataPacket(5)
        ]
    );

    let one = parse(&format!(
        "{BASE}\n[sweep]\nparameter = \"rate\"\nvalues = [\"1mbit\"]\n"
    ))
    .unwrap();
    let p = one.sweep.unwrap().points().unwrap();
    assert_eq!(
        p[0].label(),
        "1000kbit",
        "a one-axis point keeps its plain label"
    );

    for (sweep, why) in [
        (
            "[sweep]\nparameter = \"delay\"\nvalues = [\"5ms\"]\naxes = [{ parameter = \"loss\", values = [1] }]\n",
            "not both",
        ),
        (
            "[sweep]\naxes = [{ parameter = \"loss\", values = [1] }, { parameter = \"loss\", values = [2] }]\n",
            "two axes",
        ),
        (
            "[sweep]\naxes = [{ parameter = \"loss\", values = [1] }, { parameter = \"delay\", values = [1] }, { parameter = \"iat\", values = [10] }, { parameter = \"rate\", values = [\"1mbit\"] }]\n",
            "at most 3",
        ),
        (
            "[sweep]\naxes = [{ parameter = \"rate\", values = [\"fast\"] }]\n",
            "rate",
        ),
        (
            "[sweep]\naxes = [{ parameter = \"delay\", values = [] }]\n",
            "either `values` or `from`/`to`",
        ),
        ("[sweep]\nvalues = [1]\n", "`parameter` is missing"),
    ] {
        let e = parse(&format!("{BASE}{sweep}")).unwrap_err().to_string();
        assert!(e.contains(why), "{sweep}: {e}");
    }
    // Unknown keys inside an axis are errors with a position.
    let e = parse(&format!(
        "{BASE}[sweep]\naxes = [{{ parameter = \"delay\", valuez = [1] }}]\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("valuez"), "{e}");
}

// The plan has variants x points x repetitions runs; the seed depends on the
// point and repetition; `--points` selects by the joined label.
#[test]
fn grid_plan_runs_and_selection() {
    let plan = Plan::new(parse(&grid()).unwrap(), &PlanOptions::default()).unwrap();
    assert_eq!(plan.points.len(), 8);
    assert_eq!(plan.runs.len(), 2 * 8 * 2);
    let mut seeds: Vec<u64> = plan
        .runs
        .iter()
        .filter(|r| r.variant == 0)
        .map(|r| r.seed.0)
        .collect();
    seeds.sort_unstable();
    seeds.dedup();
    assert_eq!(seeds.len(), 16);
    assert!(plan
        .describe()
        .contains("sweep rate x delay x drop-data-packet over 8 point(s)"));
    let narrowed = Plan::new(
        parse(&grid()).unwrap(),
        &PlanOptions {
            points: Some(vec!["2000kbit/25ms/8".into()]),
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert_eq!(narrowed.points.len(), 1);
    assert_eq!(narrowed.runs.len(), 2 * 2);
    let e = Plan::new(
        parse(&grid()).unwrap(),
        &PlanOptions {
            points: Some(vec!["2000kbit".into()]),
            ..PlanOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("not in the scenario"), "{e}");
}

// Each run gets every axis's value: the drop hits its message, the delay
// and the rate show in its transfer time; results.json has the axes, each
// point's coordinates, and the MTT reduction per (rate, delay) cell with a
// confidence interval over the repetitions.
#[test]
fn grid_results_shape_and_values() {
    let plan = Plan::new(parse(&grid()).unwrap(), &PlanOptions::default()).unwrap();
    let outcomes = run_all(&plan, &RunOptions::default()).unwrap();
    for o in &outcomes {
        // The dropped message is retransmitted (a timeout resends whatever
        // else is outstanding too) and its transfer time is known.
        let units = o.dropped_units.expect("the drop happened");
        assert!(o.flows[0].messages().iter().any(|m| m.retransmissions > 0
            && m.units.start <= units.start
            && units.start < m.units.end));
        assert!(o.mtt.is_some(), "run {}", o.spec.index);
    }
    let r = Results::build(&plan, &outcomes, 0.0);
    let j: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(j["schema_version"], crate::results::SCHEMA_VERSION);
    assert_eq!(j["sweep"]["parameter"], "rate x delay x drop-data-packet");
    assert_eq!(j["sweep"]["axes"][0]["parameter"], "rate");
    assert_eq!(
        j["sweep"]["axes"][1]["values"],
        serde_json::json!(["5ms", "25ms"])
    );
    assert_eq!(j["sweep"]["values"].as_array().unwrap().len(), 8);
    let std = &r.variants[0];
    assert_eq!(std.points.len(), 8);
    assert_eq!(std.points[3].value, "500kbit/25ms/8");
    assert_eq!(std.points[3].coords, ["500kbit", "25ms", "8"]);
    // Median delivery latency (one-way delay kept): 20 ms more one way at
    // 25 ms than at 5 ms; a 260-byte packet takes 4.2 ms at 500 kbit/s
    // and 1.0 ms at 2000 kbit/s.
    let p50 = |i: usize| std.points[i].summary.latency_ms.unwrap().p50;
    assert!(p50(2) - p50(0) > 19.0, "{} {}", p50(2), p50(0));
    assert!(p50(0) - p50(4) > 2.5, "{} {}", p50(0), p50(4));
    // MTT reduction: per point, overall, and per cell of the other axes.
    let red = &r.mtt_reduction.as_ref().unwrap()["er"];
    assert_eq!(red.per_point.len(), 8);
    assert_eq!(red.cells.len(), 4);
    let cells: Vec<&str> = red.cells.iter().map(|c| c.cell.as_str()).collect();
    assert_eq!(
        cells,
        [
            "500kbit/5ms",
            "500kbit/25ms",
            "2000kbit/5ms",
            "2000kbit/25ms"
        ]
    );
    for (k, c) in red.cells.iter().enumerate() {
        assert_eq!(c.positions, 2);
        let want = (red.per_point[2 * k].unwrap() + red.per_point[2 * k + 1].unwrap()) / 2.0;
        assert!((c.mean.unwrap() - want).abs() < 1e-12);
        assert!(
            c.ci95.is_some_and(|h| h >= 0.0),
            "two repetitions give an interval"
        );
    }
    let means: Vec<f64> = red.cells.iter().filter_map(|c| c.mean).collect();
    assert_eq!(red.cell_max, means.iter().copied().reduce(f64::max));
    assert_eq!(red.cell_min, means.iter().copied().reduce(f64::min));
    // The stored file reads back and draws a reduction plot per variant.
    let back = Results::from_json(&r.to_json()).unwrap();
    assert_eq!(back.variants[1].points[7].coords.len(), 3);
    let plots = crate::plots::plots(&j);
    assert!(plots.iter().any(|p| p.file == "mtt-reduction-er.svg"));
    assert!(
        !plots.iter().any(|p| p.file == "mtt.svg"),
        "no per-position plot of a grid"
    );
    let csv = crate::tidy::csv(&j);
    assert!(
        csv.contains("grid,er,2000kbit/5ms,mtt_reduction,ci95,"),
        "cell rows in the CSV"
    );
}

// The jackknife interval: with one repetition there is none; it is zero
// when every repetition gives the same reduction.
#[test]
fn grid_interval_needs_repetitions() {
    let plan = Plan::new(
        parse(&grid()).unwrap(),
        &PlanOptions {
            repetitions: Some(1),
            points: Some(vec!["2000kbit/5ms/5".into(), "2000kbit/5ms/8".into()]),
            ..PlanOptions::default()
        },
    )
    .unwrap();
    let outcomes = run_all(&plan, &RunOptions::default()).unwrap();
    let r = Results::build(&plan, &outcomes, 0.0);
    let red = &r.mtt_reduction.as_ref().unwrap()["er"];
    assert_eq!(red.cells.len(), 1);
    assert!(red.cells[0].mean.is_some());
    assert_eq!(red.cells[0].ci95, None);
    assert_eq!(red.ci95, None);
}

// Two axes without a drop position (002 Table 5.1's RTT x IAT matrix): both
// values apply, the points have two coordinates, no reduction cells, and
// the report draws one p99 chart per variant.
#[test]
fn two_axes_without_drops() {
    let text = r#"
name = "matrix"
duration = "20s"
drain = "10s"
seed = 3
[topology]
kind = "two-host"
forward = "delay 50ms loss 2%"
[[flows]]
transport = "tcp"
workload = { kind = "constant", iat = "100ms", bytes = 100 }
[[variants]]
name = "newreno"
preset = "linux-2.6.23"
[[variants]]
name = "lt"
preset = "linux-2.6.23+lt"
[metrics]
owd = "none"
[sweep]
axes = [
  { parameter = "delay", values = ["10ms", "100ms"] },
  { parameter = "iat", values = ["50ms", "200ms"] },
]
"#;
    let plan = Plan::new(parse(text).unwrap(), &PlanOptions::default()).unwrap();
    assert_eq!(plan.runs.len(), 2 * 4);
    let outcomes = run_all(&plan, &RunOptions::default()).unwrap();
    let r = Results::build(&plan, &outcomes, 0.0);
    assert!(r.mtt_reduction.is_none());
    let v = &r.variants[0];
    let labels: Vec<&str> = v.points.iter().map(|p| p.value.as_str()).collect();
    assert_eq!(
        labels,
        ["10ms/50ms", "10ms/200ms", "100ms/50ms", "100ms/200ms"]
    );
    // The IAT sets the message count (20 s / IAT), the delay the latency.
    let msgs: Vec<u64> = v.points.iter().map(|p| p.summary.messages).collect();
    assert_eq!(msgs, [400, 100, 400, 100]);
    let p50 = |i: usize| v.points[i].summary.latency_ms.unwrap().p50;
    assert!(p50(2) - p50(0) > 85.0, "{} {}", p50(2), p50(0));
    let j: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    let files: Vec<String> = crate::plots::plots(&j)
        .into_iter()
        .map(|p| p.file)
        .collect();
    assert!(
        files.contains(&"grid-p99-newreno.svg".to_string()),
        "{files:?}"
    );
    assert!(files.contains(&"grid-p99-lt.svg".to_string()), "{files:?}");
    assert!(!files.contains(&"p99-per-point.svg".to_string()));
    // The report's recovery table pools a grid per variant.
    let table = crate::report::recovery_table(&r);
    assert!(table.contains("| newreno | all |"), "{table}");
}

// `workload_seed` fixes a flow's workload draws: every repetition and every
// sweep point sends the same exponential gaps, where by default each run
// draws its own; the schedule still depends on the fixed seed's value.
#[test]
fn a_fixed_workload_seed_sends_one_schedule_in_every_run() {
    let times = |text: &str| -> Vec<Vec<thinstream_base::Instant>> {
        let plan = Plan::new(parse(text).unwrap(), &PlanOptions::default()).unwrap();
        plan.runs
            .iter()
            .map(|spec| {
                let coords = spec.point.map_or(&[][..], |p| plan.points[p].coords());
                let entry = &plan
                    .scenario
                    .flows_at(&plan.variants[spec.variant].spec, coords)[0];
                let end = thinstream_base::Instant::ZERO + Duration::from_secs(3);
                crate::runner::message_schedule(
                    spec,
                    entry,
                    0,
                    0,
                    thinstream_base::Instant::ZERO,
                    end,
                    false,
                )
                .unwrap()
                .map(|m| m.at)
                .collect()
            })
            .collect()
    };
    let fresh = times(&grid());
    assert_eq!(fresh.len(), 2 * 8 * 2);
    assert!(fresh.iter().all(|t| t.len() == 16));
    let distinct = |runs: &[Vec<thinstream_base::Instant>]| {
        let mut d = runs.to_vec();
        d.sort();
        d.dedup();
        d.len()
    };
    // Variants share a (point, repetition) seed; points and repetitions differ.
    assert_eq!(distinct(&fresh), 8 * 2);

    let fixed_text = |seed: u64| {
        grid().replace(
            "app_start = \"1s\"",
            &format!("app_start = \"1s\"\nworkload_seed = {seed}"),
        )
    };
    assert_ne!(fixed_text(11), grid());
    let fixed = times(&fixed_text(11));
    assert_eq!(distinct(&fixed), 1);
    assert!(!fresh.contains(&fixed[0]));
    let other = times(&fixed_text(12));
    assert_eq!(distinct(&other), 1);
    assert_ne!(other[0], fixed[0]);
}
