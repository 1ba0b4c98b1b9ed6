//! A few thousand torture seeds in the test command (`TORTURE_SEEDS` and
//! `TORTURE_FROM` change the range; long sweeps: `thinstream torture`).

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn torture_seeds_pass() {
    let from = env_or("TORTURE_FROM", 0);
    let count = env_or("TORTURE_SEEDS", 3000);
    let mut failures = Vec::new();
    let (mut messages, mut shut) = (0usize, 0u64);
    for seed in from..from + count {
        match thinstream_torture::run_seed(seed) {
            Ok(s) => {
                messages += s.messages;
                shut += u64::from(s.zero_window_steps > 0);
            }
            Err(f) => failures.push(f.to_string()),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The cases must actually exercise the transport.
    assert!(messages as u64 > count * 50, "only {messages} messages");
    assert!(shut > count / 20, "only {shut} seeds shut a receive window");
}
