//! Bad input gets a clear message and a non-zero exit, never a panic.

mod common;

fn run(args: &[&str]) -> (i32, String) {
    common::run_cli(args)
}

#[test]
fn send_rejects_bad_arguments_with_a_reason() {
    let (code, text) = run(&["send", "--to", "not-an-address"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--to"), "{text}");

    let (code, text) = run(&["send", "--to", "127.0.0.1:9", "--size", "0"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("at least 1 byte"), "{text}");

    let (code, text) = run(&["send", "--to", "127.0.0.1:9", "--interval", "soon"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("duration"), "{text}");

    let (code, text) = run(&["send", "--to", "127.0.0.1:9", "--streams", "0"]);
    assert_eq!(code, 2, "{text}");
    assert!(!text.contains("panicked"), "{text}");

    let (code, text) = run(&["send", "--to", "127.0.0.1:9", "--count", "0"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--count"), "{text}");
}

#[test]
fn listen_reports_an_unusable_address() {
    // 192.0.2.1 (TEST-NET-1) is not a local address, so binding fails; no
    // packet is sent anywhere.
    let (code, text) = run(&["listen", "--bind", "192.0.2.1:9899"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("cannot bind"), "{text}");
}

#[test]
fn send_to_nobody_fails_cleanly() {
    // Nothing listens on this loopback port: the association cannot come up
    // and every message counts as lost.
    let (code, text) = run(&[
        "send",
        "--to",
        "127.0.0.1:1",
        "--count",
        "3",
        "--connect-timeout",
        "300ms",
    ]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("no association"), "{text}");
    assert!(text.contains("3 lost (none sent)"), "{text}");
    // The time spent waiting for the association is the run's elapsed time.
    let elapsed: f64 = text
        .split("elapsed ")
        .nth(1)
        .and_then(|t| t.split('s').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no elapsed time in {text}"));
    assert!(elapsed >= 0.29, "elapsed {elapsed} s in {text}");
}

#[test]
fn send_resolves_a_host_name() {
    // `localhost` (from the hosts file) is resolved to its loopback
    // address; nothing listens on port 1, so the association fails there.
    let (code, text) = run(&[
        "send",
        "--to",
        "localhost:1",
        "--count",
        "1",
        "--connect-timeout",
        "300ms",
    ]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("no association with 127.0.0.1:1")
            || text.contains("no association with [::1]:1"),
        "{text}"
    );
    let (code, text) = run(&["send", "--to", "localhost", "--count", "1"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("has no port"), "{text}");
}
