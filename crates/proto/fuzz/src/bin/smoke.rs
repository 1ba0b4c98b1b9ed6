//! Stable-toolchain stand-in for the libFuzzer targets: runs one target's
//! check ([`thinstream_proto_fuzz::check_decode`], `check_endpoint` or
//! `check_preset`) over every file in the given files/directories (a
//! corpus), then over seeded random mutations of them and over random
//! inputs. Deterministic for a given `--seed`.
//!
//! usage: smoke [--target decode|endpoint|preset] [--iterations N] [--seed S] PATH...

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use thinstream_base::Seed;
use thinstream_proto_fuzz::{check_decode, check_endpoint, check_preset, mutate};

fn collect(path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        entries.sort();
        for e in entries {
            collect(&e, out)?;
        }
    } else {
        out.push(path.to_path_buf());
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut iterations: u64 = 200_000;
    let mut seed = Seed(1);
    let mut target = String::from("decode");
    let mut paths = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let value =
            |args: &mut dyn Iterator<Item = String>| -> Option<u64> { args.next()?.parse().ok() };
        match a.as_str() {
            "--iterations" => match value(&mut args) {
                Some(n) => iterations = n,
                None => return usage("--iterations needs a number"),
            },
            "--seed" => match value(&mut args) {
                Some(s) => seed = Seed(s),
                None => return usage("--seed needs a number"),
            },
            "--target" => match args.next() {
                Some(t) if ["decode", "endpoint", "preset"].contains(&t.as_str()) => target = t,
                _ => return usage("--target needs decode, endpoint or preset"),
            },
            "-h" | "--help" => return usage(""),
            _ => paths.push(PathBuf::from(a)),
        }
    }
    let mut files = Vec::new();
    for p in &paths {
        if let Err(e) = collect(p, &mut files) {
            eprintln!("smoke: cannot read {}: {e}", p.display());
            return ExitCode::FAILURE;
        }
    }
    let mut corpus = Vec::new();
    for f in &files {
        match std::fs::read(f) {
            Ok(b) => corpus.push(b),
            Err(e) => {
                eprintln!("smoke: cannot read {}: {e}", f.display());
                return ExitCode::FAILURE;
            }
        }
    }
    if target != "decode" {
        return run_other(&target, &corpus, iterations, seed);
    }
    let corpus_ok = corpus.iter().filter(|c| check_decode(c)).count();
    println!("corpus: {} inputs, {corpus_ok} decode", corpus.len());

    let mut rng = seed.derive("fuzz.smoke").rng();
    let (mut mutated, mut mutated_ok, mut random, mut random_ok) = (0u64, 0u64, 0u64, 0u64);
    for _ in 0..iterations {
        if !corpus.is_empty() && rng.below(4) != 0 {
            let base = &corpus[rng.below(corpus.len() as u64) as usize];
            let input = mutate(base, &mut rng);
            mutated += 1;
            mutated_ok += u64::from(check_decode(&input));
        } else {
            let len = rng.below(96) as usize;
            let mut input = vec![0u8; len];
            rng.fill_bytes(&mut input);
            random += 1;
            random_ok += u64::from(check_decode(&input));
        }
    }
    println!("seed {seed}: {mutated} mutated inputs ({mutated_ok} decode), {random} random inputs ({random_ok} decode), no failures");
    ExitCode::SUCCESS
}

/// The endpoint and preset targets: corpus, mutations, random inputs.
fn run_other(target: &str, corpus: &[Vec<u8>], iterations: u64, seed: Seed) -> ExitCode {
    let mut deep = 0u64;
    let mut check = |data: &[u8]| {
        if target == "endpoint" {
            deep += u64::from(check_endpoint(data) > 0);
        } else {
            check_preset(data);
        }
    };
    for c in corpus {
        check(c);
    }
    let mut rng = seed.derive(&format!("fuzz.smoke.{target}")).rng();
    const TOKENS: &[&str] = &[
        "rfc",
        "linux",
        "thin",
        "production",
        "lksctp-mod",
        "+",
        "rdb",
        "lt",
        "mfr",
        "frt=",
        "rto-min=",
        "rto-max=",
        "rto-initial=",
        "delack=",
        "0",
        "1",
        "4",
        "200",
        "99999999999",
        "-1",
        "=",
        "thin-limit=",
        "rdb-bytes=",
        "pttfr=",
        "all",
        "nodelack",
        "efr",
        "er-byte",
    ];
    for _ in 0..iterations {
        let input = if !corpus.is_empty() && rng.below(2) == 0 {
            let base = &corpus[rng.below(corpus.len() as u64) as usize];
            let mut b = base.clone();
            for _ in 0..1 + rng.below(4) {
                if b.is_empty() {
                    break;
                }
                let i = rng.below(b.len() as u64) as usize;
                b[i] = rng.next_u32() as u8;
            }
            b
        } else if target == "preset" {
            let mut s = String::new();
            for _ in 0..rng.below(8) {
                s.push_str(TOKENS[rng.below(TOKENS.len() as u64) as usize]);
            }
            s.into_bytes()
        } else {
            let len = rng.below(600) as usize;
            let mut input = vec![0u8; len];
            rng.fill_bytes(&mut input);
            // Mostly traffic and tag-patched datagrams: start with a few
            // rounds of real exchange so that associations exist.
            for (i, b) in input.iter_mut().enumerate().take(8) {
                if i % 2 == 1 {
                    *b = 0;
                }
            }
            input
        };
        check(&input);
    }
    println!(
        "{target}: seed {seed}: {} corpus inputs and {iterations} generated inputs, no failures{}",
        corpus.len(),
        if target == "endpoint" {
            format!(" ({deep} reached an established association)")
        } else {
            String::new()
        }
    );
    ExitCode::SUCCESS
}

fn usage(why: &str) -> ExitCode {
    if !why.is_empty() {
        eprintln!("smoke: {why}");
    }
    eprintln!("usage: smoke [--target decode|endpoint|preset] [--iterations N] [--seed S] PATH...");
    if why.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
