//! Profile tests: the fitted table agrees with its derivation, and every
//! profile reproduces the Table 2.1 statistics over a long sample.

use super::*;
use crate::take_messages;
use thinstream_base::Seed;

/// Prints the derivation in the layout of [`FITTED`] (run with
/// `--nocapture` when the method changes).
#[test]
fn fitted_table_matches_derivation() {
    let derived: Vec<ProfileFit> = TABLE_2_1.iter().map(|r| r.derive_fit().unwrap()).collect();
    for d in &derived {
        println!(
            "        fit(P::{:?}, [{}], {:.6}, ({}, {}, {:.8})),",
            d.name,
            d.iat_knots_ms.map(|k| format!("{k:?}")).join(", "),
            d.iat_k_up,
            d.size_min,
            d.size_max,
            d.size_theta
        );
    }
    for ((row, pinned), d) in TABLE_2_1.iter().zip(FITTED.iter()).zip(derived) {
        assert_eq!(row.name, pinned.name);
        for (a, b) in d.iat_knots_ms.iter().zip(pinned.iat_knots_ms) {
            assert!(
                (a - b).abs() <= 1e-6 * a.abs().max(1.0),
                "{}: knots {a} vs {b}",
                row.name
            );
        }
        assert!(
            (d.iat_k_up - pinned.iat_k_up).abs() < 1e-5,
            "{}: k_up {} vs {}",
            row.name,
            d.iat_k_up,
            pinned.iat_k_up
        );
        assert_eq!((d.size_min, d.size_max), (pinned.size_min, pinned.size_max));
        assert!(
            (d.size_theta - pinned.size_theta).abs() < 1e-7,
            "{}: theta {} vs {}",
            row.name,
            d.size_theta,
            pinned.size_theta
        );
    }
}

fn within(actual: f64, expected: f64, tol: f64) -> bool {
    (actual - expected).abs() <= tol * expected.abs()
}

/// Sample statistics of a profile stream: (sizes, IATs in ms).
fn sample(name: ProfileName, iid: bool, n: usize, seed: u64) -> (Vec<u32>, Vec<f64>) {
    let mut g = profile_stream(name, Instant::ZERO, 1, false, iid, Seed(seed).rng());
    let msgs = take_messages(&mut g, n);
    assert_eq!(msgs.len(), n, "{name}: profile streams are unbounded");
    let sizes = msgs.iter().map(|m| m.bytes).collect();
    let iats = msgs
        .windows(2)
        .map(|w| (w[1].at - w[0].at).as_millis_f64())
        .collect();
    (sizes, iats)
}

fn quantile_of_sorted(v: &[f64], q: f64) -> f64 {
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Every Table 2.1 profile, over at least 100 000 packets, reproduces its
/// row within 10 %: average size, average IAT and median IAT (a "< 1" median is checked
/// as "sample median below 1 ms"; a "< 1" average as "below 1 ms and within
/// 10 % of the bandwidth-derived value"); sizes and IATs stay within the
/// stated min/max; the 99th percentile is within 10 % where it is a number.
/// The sample is large enough that the standard error of the mean IAT is at
/// most 2.5 % (10 % = 4 standard errors): only FTP, whose 339 ms maximum
/// against a 0.146 ms mean makes the tail dominate, needs more than 10^5.
#[test]
fn every_profile_reproduces_table_2_1() {
    for (i, row) in TABLE_2_1.iter().enumerate() {
        let fit = row.name.fit().iat();
        let rel_sd = fit.variance().sqrt() / fit.mean();
        let n = ((rel_sd / 0.025).powi(2).ceil() as usize).max(100_000);
        let (sizes, mut iats) = sample(row.name, false, n, 1000 + i as u64);
        let name = row.name;

        let size_avg = sizes.iter().map(|&s| f64::from(s)).sum::<f64>() / n as f64;
        assert!(
            within(size_avg, f64::from(row.size_avg), 0.10),
            "{name}: avg size {size_avg} vs {}",
            row.size_avg
        );
        assert!(
            sizes
                .iter()
                .all(|s| (row.size_min..=row.size_max).contains(s)),
            "{name}: size out of [min, max]"
        );

        let iat_avg = iats.iter().sum::<f64>() / iats.len() as f64;
        match row.iat_avg {
            Cell::Ms(v) => assert!(within(iat_avg, v, 0.10), "{name}: avg IAT {iat_avg} vs {v}"),
            Cell::BelowOneMs => {
                assert!(iat_avg < 1.0, "{name}: avg IAT {iat_avg} should be < 1 ms");
                assert!(
                    within(iat_avg, row.iat_avg_ms(), 0.10),
                    "{name}: avg IAT {iat_avg} vs derived {}",
                    row.iat_avg_ms()
                );
            }
        }
        iats.sort_by(f64::total_cmp);
        let median = quantile_of_sorted(&iats, 0.5);
        match row.iat_median {
            Cell::Ms(v) => assert!(
                within(median, v, 0.10),
                "{name}: median IAT {median} vs {v}"
            ),
            Cell::BelowOneMs => {
                assert!(median < 1.0, "{name}: median IAT {median} should be < 1 ms")
            }
        }
        // Min and max respected (1 ns of rounding to virtual time allowed).
        let (lo, hi) = (iats[0], iats[iats.len() - 1]);
        let min_ms = match row.iat_min {
            Cell::Ms(v) => v,
            Cell::BelowOneMs => 0.0,
        };
        assert!(lo >= min_ms - 1e-6, "{name}: IAT {lo} below min {min_ms}");
        assert!(
            hi <= row.iat_max_ms + 1e-6,
            "{name}: IAT {hi} above max {}",
            row.iat_max_ms
        );
        if let Cell::BelowOneMs = row.iat_min {
            assert!(lo < 1.0, "{name}: smallest IAT {lo} should be < 1 ms");
        }
        let p99 = quantile_of_sorted(&iats, 0.99);
        match row.iat_p99 {
            Cell::Ms(v) => assert!(within(p99, v, 0.10), "{name}: p99 IAT {p99} vs {v}"),
            Cell::BelowOneMs => assert!(p99 < 1.0, "{name}: p99 IAT {p99} should be < 1 ms"),
        }
    }
}

/// The i.i.d. fit of the Casa row meets the same checks as the burst model.
#[test]
fn casa_iid_fit_also_matches() {
    let (_, mut iats) = sample(ProfileName::Casa, true, 100_000, 7);
    let avg = iats.iter().sum::<f64>() / iats.len() as f64;
    assert!(within(avg, 7287.0, 0.10), "avg {avg}");
    iats.sort_by(f64::total_cmp);
    assert!(within(quantile_of_sorted(&iats, 0.5), 307.0, 0.10));
}

/// Casa: bursts of exactly four packets with ~305 ms spacing, then one long
/// heartbeat gap (002 §2.2.2).
#[test]
fn casa_bursts_of_four() {
    let (_, iats) = sample(ProfileName::Casa, false, 4001, 3);
    for (i, chunk) in iats.chunks(4).enumerate() {
        for &small in &chunk[..3.min(chunk.len())] {
            assert!(
                (305.0..=309.0).contains(&small),
                "cycle {i}: intra-burst IAT {small}"
            );
        }
        if chunk.len() == 4 {
            assert!(
                (26556.0..=29898.0).contains(&chunk[3]),
                "cycle {i}: gap {}",
                chunk[3]
            );
        }
    }
}

#[test]
fn profiles_are_deterministic_per_seed() {
    for name in ProfileName::ALL {
        let a = sample(name, false, 500, 11);
        let b = sample(name, false, 500, 11);
        let c = sample(name, false, 500, 12);
        assert_eq!(a.0, b.0);
        assert_eq!(a.1, b.1);
        assert_ne!(a.0, c.0, "{name}: a different seed should change the sizes");
    }
}

#[test]
fn names_round_trip() {
    for name in ProfileName::ALL {
        assert_eq!(ProfileName::parse(name.as_str()).unwrap(), name);
        assert_eq!(name.row().name, name);
        assert_eq!(name.fit().name, name);
    }
    assert!(ProfileName::parse("quake").is_err());
}
