//! Run a range of seeds and print failures: `cargo run --release -p
//! thinstream-torture --example sweep -- FROM COUNT`.
fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (from, count) = (
        args.first().copied().unwrap_or(0),
        args.get(1).copied().unwrap_or(100),
    );
    let mut fails = 0;
    let mut steps = 0;
    let mut zw = 0;
    for seed in from..from + count {
        match thinstream_torture::run_seed(seed) {
            Ok(s) => {
                steps += s.steps;
                zw += u64::from(s.zero_window_steps > 0);
                if count <= 5 {
                    println!("{}\n  -> {s:?}", thinstream_torture::Case::generate(seed));
                }
            }
            Err(f) => {
                fails += 1;
                println!("{f}");
                if count == 1 {
                    println!("{}\n{}", thinstream_torture::Case::generate(seed), f.detail);
                }
            }
        }
    }
    println!("{count} seeds, {fails} failed, {steps} steps in passing ones, {zw} with a shut receive window");
}
