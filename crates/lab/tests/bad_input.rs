//! Bad scenario input: clear errors before any work, never a panic.
//!
//! - absurd sizes (repetitions, simulated time, runs) are refused by the
//!   plan with a message naming the field and the limit;
//! - numeric fields at zero, negative, huge and of the wrong type;
//! - a seeded mutation smoke of the scenario parser over every scenario
//!   file of the repository: whatever the text, parsing and planning
//!   return a scenario or an error.

use std::path::{Path, PathBuf};

use thinstream_base::{Duration, Seed};
use thinstream_lab::{LabError, Plan, PlanOptions, Scenario};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scenario_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["scenarios/seeds", "scenarios/robustness", "scenarios/real"] {
        let Ok(entries) = std::fs::read_dir(root().join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "toml") {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

fn exp_gap() -> Scenario {
    Scenario::load(&root().join("scenarios/seeds/003-exp-gap.toml")).expect("scenario")
}

fn plan_error(options: PlanOptions) -> String {
    match Plan::new(exp_gap(), &options) {
        Ok(p) => panic!("accepted: {} runs", p.runs.len()),
        Err(e @ LabError::Selection(_)) => e.to_string(),
        Err(e) => panic!("unexpected error kind: {e}"),
    }
}

#[test]
fn absurd_sizes_are_refused_with_the_limit() {
    let e = plan_error(PlanOptions {
        repetitions: Some(100_000_000),
        ..PlanOptions::default()
    });
    assert!(e.contains("repetitions") && e.contains("100000"), "{e}");
    let e = plan_error(PlanOptions {
        duration: Some(Duration::from_secs(100_000 * 3600)),
        ..PlanOptions::default()
    });
    assert!(e.contains("duration") && e.contains("limit"), "{e}");
    let e = plan_error(PlanOptions {
        repetitions: Some(0),
        ..PlanOptions::default()
    });
    assert!(e.contains("at least 1"), "{e}");
    // Within the limits the same scenario plans fine.
    assert!(Plan::new(exp_gap(), &PlanOptions::default()).is_ok());
}

#[test]
fn numeric_fields_at_zero_negative_huge_and_wrong_type() {
    let base = std::fs::read_to_string(root().join("scenarios/seeds/003-exp-gap.toml"))
        .expect("scenario text");
    for (field, line) in [
        ("duration", "duration = \"10s\""),
        ("repetitions", "repetitions = 40"),
        ("seed", "seed = 3"),
        ("drain", "drain = \"5s\""),
    ] {
        assert!(base.contains(line), "{line} not in the file");
        for bad in [
            "0",
            "-1",
            "1e400",
            "99999999999999999999999",
            "\"ten\"",
            "[]",
        ] {
            let text = base.replace(line, &format!("{field} = {bad}"));
            let planned = Scenario::parse(&text, Path::new("bad.toml"))
                .and_then(|s| Plan::new(s, &PlanOptions::default()));
            match planned {
                Err(e) => {
                    let msg = e.to_string();
                    // The field by name, or the file position of the value.
                    let line = text
                        .lines()
                        .position(|l| l.starts_with(&format!("{field} =")))
                        .map_or(0, |i| i + 1);
                    assert!(
                        msg.contains(field) || msg.contains(&format!("bad.toml:{line}:")),
                        "{field} = {bad}: the error does not say what is wrong: {msg}"
                    );
                }
                Ok(_) => assert!(
                    matches!((field, bad), ("seed", "0") | ("drain", "0")),
                    "{field} = {bad} was accepted"
                ),
            }
        }
    }
}

fn mutate(text: &str, rng: &mut thinstream_base::Rng) -> String {
    const PIECES: &[&str] = &[
        "-1",
        "0",
        "1e309",
        "100000000",
        "\"100000h\"",
        "\"0ms\"",
        "[",
        "]",
        "{",
        "}",
        "\"",
        "=",
        "\n",
        "[[flows]]",
        "[[variants]]",
        "[sweep]",
        "\"loss 200%\"",
        "nan",
        "inf",
        "\"linux+frt=0\"",
        "65535",
        "4294967295",
    ];
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..1 + rng.below(4) {
        if lines.is_empty() {
            break;
        }
        let i = rng.below(lines.len() as u64) as usize;
        match rng.below(5) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let dup = lines[i].clone();
                lines.insert(i, dup);
            }
            2 => {
                // Replace the value of a key.
                if let Some(eq) = lines[i].find('=') {
                    let piece = PIECES[rng.below(PIECES.len() as u64) as usize];
                    lines[i] = format!("{}= {piece}", &lines[i][..eq]);
                }
            }
            3 => {
                let piece = PIECES[rng.below(PIECES.len() as u64) as usize];
                let at = rng.below(lines[i].len() as u64 + 1) as usize;
                if lines[i].is_char_boundary(at) {
                    lines[i].insert_str(at, piece);
                }
            }
            _ => {
                let mut b = lines[i].as_bytes().to_vec();
                if !b.is_empty() {
                    let j = rng.below(b.len() as u64) as usize;
                    b[j] = rng.next_u32() as u8;
                    lines[i] = String::from_utf8_lossy(&b).into_owned();
                }
            }
        }
    }
    lines.join("\n")
}

#[test]
fn scenario_parser_mutation_smoke() {
    let files = scenario_files();
    assert!(files.len() >= 5, "scenario files not found");
    let texts: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("read"))
        .collect();
    let mut rng = Seed(11).derive("scenario-fuzz").rng();
    let (mut ok, mut err) = (0, 0);
    for _ in 0..4000 {
        let k = rng.below(files.len() as u64) as usize;
        let m = mutate(&texts[k], &mut rng);
        match Scenario::parse(&m, &files[k]) {
            Ok(s) => {
                ok += 1;
                // Planning a parsed scenario must not panic either.
                let _ = Plan::new(s, &PlanOptions::default());
            }
            Err(_) => err += 1,
        }
    }
    // Both outcomes must occur, or the mutations are not doing anything.
    assert!(ok > 100 && err > 100, "ok {ok}, errors {err}");
}
