//! Verdicts on `[[reference.compare]]` rows, computed from stored results.
//!
//! A compare row may carry a machine-checkable expectation, written from
//! what the document's statement (`theirs`, `source`) says and nothing else:
//!
//! ```toml
//! [[reference.compare]]
//! what = "lksctp: maximum ACK latency, ms"
//! ours = "variants[name=lksctp].also.ack.latency_ms.max"
//! theirs = "more than 4000"
//! source = "002 §5.3.4 (Fig. 5.26)"
//! expect = { op = ">", value = 4000 }
//! ```
//!
//! `expect` is one table or an array of tables (all must hold; the row gets
//! the worst of their verdicts). A table has `op` and exactly one of
//! `value` (a number the document states) or `other` (a [`lookup`] path
//! into the same results: the document states a direction or an equality
//! against another variant or the model), and optionally `factor` (the
//! reference is `factor × value/other`, e.g. "64% below standard" is
//! `op = "approx", other = ..., factor = 0.36`) and `offset` (added after
//! the factor: "about 10 ms above the model" is `other = <model>, offset =
//! 10`).
//!
//! The rule ([`RULE`]):
//! - `approx`: relative difference `|ours − ref| / |ref|` at most 10% →
//!   reproduced, at most 25% → partly, else differs (with `ref = 0`: equal
//!   → reproduced, else differs);
//! - `<`, `<=`, `>`, `>=`: the direction holds → reproduced, else differs
//!   (the size of the effect is not judged);
//! - a value missing from the results, or not a number → not comparable;
//! - rows without `expect`: not comparable. Those must say
//!   `qualitative = true` (the statement gives no number or direction that
//!   the row's value can be checked against); a test keeps the repository's
//!   scenarios to that.
//!
//! Verdicts are never written by hand: no field sets one.

use std::fmt;

use serde_json::Value;

use crate::report::lookup;

/// The rule as the report states it.
pub const RULE: &str = "Each compare row's expectation (`expect` in the scenario file, written from the \
document's statement) is checked against our value. `approx`: within 10% of the document's value → \
**reproduced**, within 25% → **partly**, otherwise **differs** (a reference of 0 must be met exactly). \
`<`, `<=`, `>`, `>=` against a stated number or against another value of our results (the direction of \
an effect): holds → **reproduced**, wrong direction → **differs**; the size of such an effect is not \
judged. Several expectations on one row: the worst verdict counts. Rows whose statement is only \
qualitative (no number, no direction) and values missing from the results are **not comparable**.";

/// Relative tolerance for "reproduced".
pub const WITHIN_REPRODUCED: f64 = 0.10;
/// Relative tolerance for "partly".
pub const WITHIN_PARTLY: f64 = 0.25;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    Reproduced,
    Partly,
    Differs,
    NotComparable,
}

impl Verdict {
    pub const ALL: [Verdict; 4] = [
        Verdict::Reproduced,
        Verdict::Partly,
        Verdict::Differs,
        Verdict::NotComparable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Partly => "partly",
            Verdict::Differs => "differs",
            Verdict::NotComparable => "not comparable",
        }
    }

    /// Worse of two verdicts of one row (not comparable beats everything:
    /// a part that cannot be checked makes the row uncheckable).
    fn worst(self, other: Verdict) -> Verdict {
        self.max(other)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Comparison operator of an expectation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Approx,
    Less,
    LessEq,
    Greater,
    GreaterEq,
}

impl Op {
    pub fn parse(text: &str) -> Option<Op> {
        Some(match text {
            "approx" | "~" => Op::Approx,
            "<" => Op::Less,
            "<=" => Op::LessEq,
            ">" => Op::Greater,
            ">=" => Op::GreaterEq,
            _ => return None,
        })
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Op::Approx => "≈",
            Op::Less => "<",
            Op::LessEq => "≤",
            Op::Greater => ">",
            Op::GreaterEq => "≥",
        }
    }
}

/// What the reference side of an expectation is.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Value(f64),
    Other(String),
}

/// One parsed expectation.
#[derive(Clone, Debug, PartialEq)]
pub struct Expectation {
    pub op: Op,
    pub target: Target,
    pub factor: f64,
    /// Added after `factor` ("about 10 ms above the model": `offset = 10`).
    pub offset: f64,
}

impl Expectation {
    /// Parses one `expect` table.
    pub fn parse(v: &Value) -> Result<Expectation, String> {
        let o = v
            .as_object()
            .ok_or_else(|| format!("expect must be a table, not {v}"))?;
        for k in o.keys() {
            if !matches!(k.as_str(), "op" | "value" | "other" | "factor" | "offset") {
                return Err(format!("unknown key `{k}` in expect"));
            }
        }
        let op = o
            .get("op")
            .and_then(Value::as_str)
            .ok_or("expect needs `op`")?;
        let op = Op::parse(op).ok_or_else(|| format!("unknown op `{op}` in expect"))?;
        let target = match (o.get("value"), o.get("other")) {
            (Some(x), None) => Target::Value(
                x.as_f64()
                    .ok_or_else(|| format!("expect.value must be a number, not {x}"))?,
            ),
            (None, Some(p)) => Target::Other(
                p.as_str()
                    .ok_or_else(|| format!("expect.other must be a path, not {p}"))?
                    .to_string(),
            ),
            _ => return Err("expect needs exactly one of `value` and `other`".into()),
        };
        let factor = match o.get("factor") {
            None => 1.0,
            Some(f) => f
                .as_f64()
                .ok_or_else(|| format!("expect.factor must be a number, not {f}"))?,
        };
        let offset = match o.get("offset") {
            None => 0.0,
            Some(f) => f
                .as_f64()
                .ok_or_else(|| format!("expect.offset must be a number, not {f}"))?,
        };
        Ok(Expectation {
            op,
            target,
            factor,
            offset,
        })
    }

    /// All expectations of a compare row: none, one table, or an array.
    pub fn of_row(row: &Value) -> Result<Vec<Expectation>, String> {
        match row.get("expect") {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) if !a.is_empty() => a.iter().map(Expectation::parse).collect(),
            Some(Value::Array(_)) => Err("expect is an empty array".into()),
            Some(v) => Ok(vec![Expectation::parse(v)?]),
        }
    }

    /// The reference number, looked up in `results` for `other`.
    pub fn reference(&self, results: &Value) -> Option<f64> {
        let base = match &self.target {
            Target::Value(x) => *x,
            Target::Other(p) => lookup(results, p)?.as_f64()?,
        };
        Some(base * self.factor + self.offset)
    }

    /// Short text: `> 4000`, `≈ 0.36 × variants[...]`.
    pub fn describe(&self) -> String {
        let factor = if self.factor == 1.0 {
            String::new()
        } else {
            format!("{} × ", self.factor)
        };
        let offset = if self.offset == 0.0 {
            String::new()
        } else if self.offset > 0.0 {
            format!(" + {}", self.offset)
        } else {
            format!(" − {}", -self.offset)
        };
        match &self.target {
            Target::Value(x) => format!("{} {factor}{x}{offset}", self.op.symbol()),
            Target::Other(p) => format!("{} {factor}`{p}`{offset}", self.op.symbol()),
        }
    }
}

/// The rule for one expectation with both numbers known.
pub fn judge(op: Op, ours: f64, reference: f64) -> Verdict {
    if !ours.is_finite() || !reference.is_finite() {
        return Verdict::NotComparable;
    }
    match op {
        Op::Approx => {
            let rel = if reference == 0.0 {
                if ours == 0.0 {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                (ours - reference).abs() / reference.abs()
            };
            // A little slack for floating-point noise at the boundaries.
            if rel <= WITHIN_REPRODUCED + 1e-12 {
                Verdict::Reproduced
            } else if rel <= WITHIN_PARTLY + 1e-12 {
                Verdict::Partly
            } else {
                Verdict::Differs
            }
        }
        Op::Less if ours < reference => Verdict::Reproduced,
        Op::LessEq if ours <= reference => Verdict::Reproduced,
        Op::Greater if ours > reference => Verdict::Reproduced,
        Op::GreaterEq if ours >= reference => Verdict::Reproduced,
        _ => Verdict::Differs,
    }
}

/// A compare row with its computed verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct RowVerdict {
    pub verdict: Verdict,
    /// Our value as a number, if the path found one.
    pub ours: Option<f64>,
    /// The checks made, e.g. `4175 > 4000`, or why none could be.
    pub detail: String,
}

/// Computes the verdict of one `[[reference.compare]]` row against
/// `results` (a `results.json` value).
pub fn evaluate(row: &Value, results: &Value) -> RowVerdict {
    let ours = row
        .get("ours")
        .and_then(Value::as_str)
        .and_then(|p| lookup(results, p))
        .and_then(Value::as_f64);
    let expectations = match Expectation::of_row(row) {
        Ok(e) => e,
        Err(e) => {
            return RowVerdict {
                verdict: Verdict::NotComparable,
                ours,
                detail: format!("bad expectation: {e}"),
            }
        }
    };
    if expectations.is_empty() {
        let why = if row.get("qualitative").and_then(Value::as_bool) == Some(true) {
            "qualitative statement"
        } else {
            "no expectation"
        };
        return RowVerdict {
            verdict: Verdict::NotComparable,
            ours,
            detail: why.into(),
        };
    }
    let Some(x) = ours else {
        return RowVerdict {
            verdict: Verdict::NotComparable,
            ours,
            detail: "our value is not in the results".into(),
        };
    };
    let mut verdict = Verdict::Reproduced;
    let mut details = Vec::new();
    for e in &expectations {
        match e.reference(results) {
            None => {
                verdict = verdict.worst(Verdict::NotComparable);
                details.push(format!("{}: reference not in the results", e.describe()));
            }
            Some(r) => {
                let v = judge(e.op, x, r);
                verdict = verdict.worst(v);
                let mut d = format!("{} {} {}", num(x), e.op.symbol(), num(r));
                if e.op == Op::Approx && r != 0.0 {
                    d.push_str(&format!(" ({:+.0}%)", (x - r) / r.abs() * 100.0));
                }
                if matches!(e.target, Target::Other(_)) {
                    d.push_str(&format!(" [{}]", e.describe()));
                }
                details.push(d);
            }
        }
    }
    RowVerdict {
        verdict,
        ours,
        detail: details.join("; "),
    }
}

fn num(x: f64) -> String {
    if x.abs() >= 100.0 || x.fract() == 0.0 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// Verdicts of every compare row of a results value, in row order.
pub fn evaluate_all(results: &Value) -> Vec<(Value, RowVerdict)> {
    results
        .get("reference")
        .and_then(|r| r.get("compare"))
        .and_then(Value::as_array)
        .map(|rows| {
            rows.iter()
                .map(|row| (row.clone(), evaluate(row, results)))
                .collect()
        })
        .unwrap_or_default()
}

/// Counts per verdict, in [`Verdict::ALL`] order.
pub fn counts(verdicts: &[RowVerdict]) -> [usize; 4] {
    let mut c = [0; 4];
    for v in verdicts {
        c[Verdict::ALL
            .iter()
            .position(|x| *x == v.verdict)
            .unwrap_or(3)] += 1;
    }
    c
}

/// Checks that a scenario's compare rows are well formed: each has a
/// parseable `expect` or `qualitative = true` (not both). Returns one
/// message per bad row.
pub fn check_rows(reference: &Value) -> Vec<String> {
    let rows = reference
        .get("compare")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut bad = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let what = row.get("what").and_then(Value::as_str).unwrap_or("?");
        let qualitative = row.get("qualitative").and_then(Value::as_bool) == Some(true);
        match Expectation::of_row(row) {
            Err(e) => bad.push(format!("row {i} ({what}): {e}")),
            Ok(e) if e.is_empty() && !qualitative => bad.push(format!(
                "row {i} ({what}): neither `expect` nor `qualitative = true`"
            )),
            Ok(e) if !e.is_empty() && qualitative => bad.push(format!(
                "row {i} ({what}): both `expect` and `qualitative = true`"
            )),
            Ok(_) => {}
        }
    }
    bad
}
