//! Two stored `results.json` side by side (`thinstream compare A B`):
//! per variant (matched by name) and latency kind, latency by
//! retransmission number of the message (count, mean, p99) with the
//! difference of B from A in percent. Made for a real run against the
//! simulated run of the same scenario (`thinstream run --real`), but any
//! two results with variants of the same names compare.

use std::fmt::Write as _;

use thinstream_metrics::{LatencyMs, RetransmissionRow};

use crate::results::{OtherLatency, Results, VariantResult};

/// Below this many samples on either side a difference is marked as
/// resting on few samples.
pub const FEW_SAMPLES: u64 = 30;

/// Differences of at most this many milliseconds are never marked,
/// whatever their percentage: a real host's timers and the emulator's
/// release times are good to about a millisecond, and a latency near zero
/// (no loss, one-way delay removed) would otherwise turn that into
/// hundreds of percent.
pub const FLOOR_MS: f64 = 2.0;

/// `(b − a) / a` in percent, if both exist and `a` is not zero.
pub fn diff_percent(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let (a, b) = (a?, b?);
    (a != 0.0).then(|| (b - a) / a * 100.0)
}

/// How the two sides of a [`Row`] relate ([`Row::agreement`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agreement {
    /// Mean and p99 both within the limit (or within the floor in ms).
    Agrees,
    /// Mean or p99 beyond the limit and beyond the floor.
    Differs,
    /// Fewer than [`FEW_SAMPLES`] messages on a side: not judged.
    FewSamples,
}

impl Agreement {
    pub const ALL: [Agreement; 3] = [Self::Agrees, Self::Differs, Self::FewSamples];

    /// Words for tables.
    pub fn text(self) -> &'static str {
        match self {
            Self::Agrees => "agrees",
            Self::Differs => "differs",
            Self::FewSamples => "too few samples",
        }
    }
}

/// One row of a comparison table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// `0`, `1`, `2`, `3+` or `all`.
    pub retransmissions: String,
    pub count: (u64, u64),
    pub mean: (Option<f64>, Option<f64>),
    pub p99: (Option<f64>, Option<f64>),
}

impl Row {
    pub fn mean_diff(&self) -> Option<f64> {
        diff_percent(self.mean.0, self.mean.1)
    }
    pub fn p99_diff(&self) -> Option<f64> {
        diff_percent(self.p99.0, self.p99.1)
    }
    /// Whether either side has fewer than [`FEW_SAMPLES`] messages.
    pub fn few(&self) -> bool {
        self.count.0 < FEW_SAMPLES || self.count.1 < FEW_SAMPLES
    }
    /// The row's mark: too few samples on a side, else whether it
    /// [`exceeds`](Self::exceeds) `limit` percent and `floor_ms`.
    pub fn agreement(&self, limit: f64, floor_ms: f64) -> Agreement {
        if self.few() {
            Agreement::FewSamples
        } else if self.exceeds(limit, floor_ms) {
            Agreement::Differs
        } else {
            Agreement::Agrees
        }
    }
    /// Whether the mean or the p99 differ by more than `limit` percent
    /// and more than `floor_ms`.
    pub fn exceeds(&self, limit: f64, floor_ms: f64) -> bool {
        [self.mean, self.p99]
            .iter()
            .any(|pair| beyond(*pair, limit, floor_ms))
    }
}

/// The latency of one kind of one variant: overall and by retransmissions.
struct Kind<'a> {
    all: Option<&'a LatencyMs>,
    rows: &'a [RetransmissionRow],
}

fn kind_of<'a>(r: &'a Results, v: &'a VariantResult, kind: &str) -> Option<Kind<'a>> {
    if r.latency == kind {
        let s = v.summary.as_ref()?;
        return Some(Kind {
            all: s.latency_ms.as_ref(),
            rows: &s.by_retransmissions,
        });
    }
    v.also.get(kind).map(|o: &OtherLatency| Kind {
        all: o.latency_ms.as_ref(),
        rows: &o.by_retransmissions,
    })
}

fn label(r: &RetransmissionRow) -> String {
    if r.or_more {
        format!("{}+", r.retransmissions)
    } else {
        r.retransmissions.to_string()
    }
}

/// The rows of one variant and latency kind, both sides.
pub fn rows(
    a: &Results,
    va: &VariantResult,
    b: &Results,
    vb: &VariantResult,
    kind: &str,
) -> Vec<Row> {
    let (Some(ka), Some(kb)) = (kind_of(a, va, kind), kind_of(b, vb, kind)) else {
        return Vec::new();
    };
    let mut labels: Vec<String> = ka.rows.iter().map(label).collect();
    for l in kb.rows.iter().map(label) {
        if !labels.contains(&l) {
            labels.push(l);
        }
    }
    let find = |rows: &[RetransmissionRow], l: &str| rows.iter().find(|r| label(r) == l).cloned();
    let mut out: Vec<Row> = labels
        .iter()
        .map(|l| {
            let (ra, rb) = (find(ka.rows, l), find(kb.rows, l));
            Row {
                retransmissions: l.clone(),
                count: (
                    ra.as_ref().map_or(0, |r| r.count),
                    rb.as_ref().map_or(0, |r| r.count),
                ),
                mean: (
                    ra.as_ref().and_then(|r| r.mean_ms),
                    rb.as_ref().and_then(|r| r.mean_ms),
                ),
                p99: (
                    ra.as_ref().and_then(|r| r.p99_ms),
                    rb.as_ref().and_then(|r| r.p99_ms),
                ),
            }
        })
        .collect();
    out.push(Row {
        retransmissions: "all".into(),
        count: (
            ka.rows.iter().map(|r| r.count).sum(),
            kb.rows.iter().map(|r| r.count).sum(),
        ),
        mean: (ka.all.map(|l| l.mean), kb.all.map(|l| l.mean)),
        p99: (ka.all.map(|l| l.p99), kb.all.map(|l| l.p99)),
    });
    out
}

/// Whether `b` differs from `a` by more than `limit` percent of `a` and
/// more than `floor_ms`.
fn beyond((a, b): (Option<f64>, Option<f64>), limit: f64, floor_ms: f64) -> bool {
    let (Some(a), Some(b)) = (a, b) else {
        return false;
    };
    (b - a).abs() > floor_ms && (a == 0.0 || ((b - a) / a * 100.0).abs() > limit)
}

pub(crate) fn num(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.1}"))
}

/// The difference of a pair: in percent of `a`, in ms when `a` is 0;
/// bold when [`beyond`].
pub(crate) fn pct(pair: (Option<f64>, Option<f64>), limit: f64, floor_ms: f64) -> String {
    let text = match pair {
        (Some(a), Some(b)) if a == 0.0 => format!("{:+.1} ms", b - a),
        (Some(a), Some(b)) => format!("{:+.0}%", (b - a) / a * 100.0),
        _ => return "-".into(),
    };
    if beyond(pair, limit, floor_ms) {
        format!("**{text}**")
    } else {
        text
    }
}

/// Latency kinds both results report: A's summary kind first, then the
/// other kinds in A's order.
pub fn common_kinds(a: &Results, b: &Results) -> Vec<String> {
    let has =
        |r: &Results, k: &str| r.latency == k || r.variants.iter().any(|v| v.also.contains_key(k));
    let mut kinds = vec![a.latency.clone()];
    if let Some(v) = a.variants.first() {
        kinds.extend(v.also.keys().cloned());
    }
    kinds.retain(|k| has(b, k));
    kinds.dedup();
    kinds
}

/// One line on where a result comes from: scenario, mode, runs, seed;
/// for a real result also its start, runs at once, and the worst
/// emulator release error and application timer lateness of its runs.
pub fn describe(r: &Results) -> String {
    let mut s = format!(
        "scenario `{}`, {} ({} run(s), {:.0} s per run, seed {})",
        r.scenario, r.mode, r.runs, r.simulated_s, r.seed
    );
    if let Some(real) = &r.real {
        let p99: Vec<f64> = real
            .runs
            .iter()
            .flat_map(|run| {
                ["forward", "reverse"].into_iter().filter_map(|d| {
                    run.emulator
                        .get(d)?
                        .get("release_error")?
                        .get("p99_us")?
                        .as_f64()
                })
            })
            .collect();
        let late: Vec<f64> = real
            .runs
            .iter()
            .filter_map(|run| run.app_wake_late_us.map(|l| l[1]))
            .collect();
        let max = |xs: &[f64]| xs.iter().copied().fold(f64::NAN, f64::max);
        let _ = write!(
            s,
            "; started {}, {} at once; emulator release error p99 up to {:.2} ms, \
             application timer lateness p99 up to {:.2} ms",
            real.started_utc,
            real.jobs,
            max(&p99) / 1e3,
            max(&late) / 1e3
        );
    }
    s
}

/// The comparison as markdown: `a` and `b` are the stored results,
/// `names` their labels (e.g. `sim`, `real`), `limit` the difference in
/// percent beyond which a cell is marked (if it also differs by more than
/// `floor_ms`).
pub fn markdown(
    a: &Results,
    b: &Results,
    names: (&str, &str),
    limit: f64,
    floor_ms: f64,
) -> String {
    let (na, nb) = names;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## {na} against {nb}: latency by retransmission number\n"
    );
    let _ = writeln!(md, "- {na}: {}", describe(a));
    let _ = writeln!(md, "- {nb}: {}", describe(b));
    let _ = writeln!(
        md,
        "\nPer variant and latency kind: messages (n), mean and 99th percentile in ms by the \
         number of retransmissions the message needed; diff = ({nb} − {na}) / {na} (in ms \
         where {na} is 0). Differences over {limit:.0}% and over {floor_ms} ms are **bold**; \
         `few` marks rows with fewer than {FEW_SAMPLES} messages on a side.\n"
    );
    let kinds = common_kinds(a, b);
    let mut over = 0usize;
    let mut total = 0usize;
    for va in &a.variants {
        let Some(vb) = b.variants.iter().find(|v| v.name == va.name) else {
            let _ = writeln!(md, "### {}\n\nonly in {na}\n", va.name);
            continue;
        };
        let _ = writeln!(md, "### {} (`{}`)\n", va.name, va.preset);
        if let (Some(sa), Some(sb)) = (&va.summary, &vb.summary) {
            let _ = writeln!(
                md,
                "messages {} / {}, delivered {} / {} ({na} / {nb})\n",
                sa.messages,
                sb.messages,
                sa.delivered.map_or("-".into(), |d| d.to_string()),
                sb.delivered.map_or("-".into(), |d| d.to_string()),
            );
        }
        let _ = writeln!(
            md,
            "| latency | rtx | n {na} | n {nb} | mean {na} | mean {nb} | diff | p99 {na} | p99 {nb} | diff | |"
        );
        let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        for kind in &kinds {
            for r in rows(a, va, b, vb, kind) {
                let few = r.few();
                if r.count.0 > 0 && r.count.1 > 0 {
                    total += 1;
                    if r.exceeds(limit, floor_ms) {
                        over += 1;
                    }
                }
                let _ = writeln!(
                    md,
                    "| {kind} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.retransmissions,
                    r.count.0,
                    r.count.1,
                    num(r.mean.0),
                    num(r.mean.1),
                    pct(r.mean, limit, floor_ms),
                    num(r.p99.0),
                    num(r.p99.1),
                    pct(r.p99, limit, floor_ms),
                    if few { "few" } else { "" }
                );
            }
        }
        md.push('\n');
    }
    for vb in &b.variants {
        if !a.variants.iter().any(|v| v.name == vb.name) {
            let _ = writeln!(md, "### {}\n\nonly in {nb}\n", vb.name);
        }
    }
    let _ = writeln!(
        md,
        "{over} of {total} rows with messages on both sides differ by more than {limit:.0}% \
         (and {floor_ms} ms) in mean or p99."
    );
    md
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{run_all, Plan, PlanOptions, RunOptions, Scenario};

    const THIN: &str = r#"
name = "compare-test"
source = "test"
duration = "30s"
drain = "10s"
[topology]
kind = "two-host"
forward = "delay 30ms loss 5%"
[[flows]]
workload = { kind = "constant", iat = "100ms", bytes = 100 }
[[variants]]
name = "linux"
preset = "linux"
[[variants]]
name = "thin"
preset = "thin"
[metrics]
also = ["ack"]
"#;

    /// The pooled results of a scenario file's text, simulated.
    pub(crate) fn results_of(scenario: &str) -> Results {
        let s = Scenario::parse(scenario, std::path::Path::new("t.toml")).unwrap();
        let plan = Plan::new(s, &PlanOptions::default()).unwrap();
        let outcomes = run_all(&plan, &RunOptions::default()).unwrap();
        Results::build(&plan, &outcomes, 0.0)
    }

    fn results() -> Results {
        results_of(THIN)
    }

    #[test]
    fn differences_are_relative_to_the_first() {
        let d = diff_percent(Some(200.0), Some(220.0)).unwrap();
        assert!((d - 10.0).abs() < 1e-9, "{d}");
        let d = diff_percent(Some(200.0), Some(150.0)).unwrap();
        assert!((d + 25.0).abs() < 1e-9, "{d}");
        // 1 ms on 0.1 ms is 1000% but within the floor; 3 ms is not.
        assert!(!beyond((Some(0.1), Some(1.1)), 10.0, FLOOR_MS));
        assert!(beyond((Some(0.1), Some(3.2)), 10.0, FLOOR_MS));
        assert!(beyond((Some(0.0), Some(3.0)), 10.0, FLOOR_MS));
        assert!(!beyond((Some(100.0), Some(109.0)), 10.0, FLOOR_MS));
        assert!(beyond((Some(100.0), Some(111.0)), 10.0, FLOOR_MS));
        assert_eq!(diff_percent(Some(0.0), Some(1.0)), None);
        assert_eq!(diff_percent(None, Some(1.0)), None);
    }

    // Results against themselves: every row equal, none marked; a variant
    // whose 1-retransmission mean is 20% higher on one side is marked in
    // that row and nowhere else.
    #[test]
    fn rows_follow_the_results_and_mark_large_differences() {
        let a = results();
        let rows_aa = rows(&a, &a.variants[0], &a, &a.variants[0], "application");
        let s = a.variants[0].summary.as_ref().unwrap();
        assert_eq!(rows_aa.len(), s.by_retransmissions.len() + 1);
        for (r, want) in rows_aa.iter().zip(&s.by_retransmissions) {
            assert_eq!(r.count, (want.count, want.count));
            assert_eq!(r.mean, (want.mean_ms, want.mean_ms));
            assert!(!r.exceeds(10.0, FLOOR_MS));
        }
        let all = rows_aa.last().unwrap();
        assert_eq!(all.retransmissions, "all");
        assert_eq!(all.p99.0, s.latency_ms.as_ref().map(|l| l.p99));
        let md = markdown(&a, &a, ("x", "y"), 10.0, FLOOR_MS);
        assert!(md.contains("\n0 of "), "{md}");
        assert!(md.contains("| ack | 1 |"), "{md}");

        let mut b = a.clone();
        let one = b.variants[1]
            .summary
            .as_mut()
            .unwrap()
            .by_retransmissions
            .iter_mut()
            .find(|r| r.retransmissions == 1)
            .unwrap();
        assert!(one.count > 0, "the test needs retransmitted messages");
        one.mean_ms = one.mean_ms.map(|m| m * 1.2);
        let rows_ab = rows(&a, &a.variants[1], &b, &b.variants[1], "application");
        let marked: Vec<&str> = rows_ab
            .iter()
            .filter(|r| r.exceeds(10.0, FLOOR_MS))
            .map(|r| r.retransmissions.as_str())
            .collect();
        assert_eq!(marked, ["1"]);
        let md = markdown(&a, &b, ("x", "y"), 10.0, FLOOR_MS);
        assert!(md.contains("**+20%**"), "{md}");
        assert!(md.contains("\n1 of "), "{md}");
    }
}
