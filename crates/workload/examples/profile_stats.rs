//! Prints, for every 002 Table 2.1 profile, the table's statistics next to
//! those of a long synthetic sample, and the fitted parameters.
//!
//! `cargo run --release -p thinstream-workload --example profile_stats [packets] [seed]`

use thinstream_base::{Instant, Seed};
use thinstream_workload::profiles::{profile_stream, Cell, TABLE_2_1};
use thinstream_workload::take_messages;

fn cell(c: Cell) -> String {
    match c {
        Cell::Ms(v) => format!("{v}"),
        Cell::BelowOneMs => "<1".into(),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    println!("{n} packets per profile, seed {seed}; IAT in ms (table / sample)");
    println!(
        "{:<15} {:>13} {:>17} {:>15} {:>17} {:>15}  {:>8} {:>9}",
        "profile", "size avg", "IAT avg", "IAT median", "IAT p99", "IAT min..max", "k_up", "size θ"
    );
    for (i, row) in TABLE_2_1.iter().enumerate() {
        let mut g = profile_stream(
            row.name,
            Instant::ZERO,
            1,
            false,
            false,
            Seed(seed + i as u64).rng(),
        );
        let msgs = take_messages(&mut g, n);
        let size_avg = msgs.iter().map(|m| f64::from(m.bytes)).sum::<f64>() / msgs.len() as f64;
        let mut iats: Vec<f64> = msgs
            .windows(2)
            .map(|w| (w[1].at - w[0].at).as_millis_f64())
            .collect();
        let avg = iats.iter().sum::<f64>() / iats.len() as f64;
        iats.sort_by(f64::total_cmp);
        let q = |p: f64| iats[((iats.len() - 1) as f64 * p).round() as usize];
        let fit = row.name.fit();
        println!(
            "{:<15} {:>5}/{:>7.1} {:>6}/{:>10.3} {:>6}/{:>8.3} {:>6}/{:>10.3} {:>6.3}..{:>7.0}  {:>8.3} {:>9.5}",
            row.name.as_str(),
            row.size_avg,
            size_avg,
            cell(row.iat_avg),
            avg,
            cell(row.iat_median),
            q(0.5),
            cell(row.iat_p99),
            q(0.99),
            iats[0],
            iats[iats.len() - 1],
            fit.iat_k_up,
            fit.size_theta,
        );
    }
}
