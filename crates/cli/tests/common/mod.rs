//! Shared by the interop tests: private network namespaces and temporary
//! folders.

#![allow(dead_code, reason = "each test binary uses its own part")]

use std::path::PathBuf;
use std::process::Command;

/// Our CLI binary.
pub(crate) fn thinstream() -> &'static str {
    env!("CARGO_BIN_EXE_thinstream")
}

/// Runs our CLI with `args`; its exit code (-1 if killed) and
/// stderr + stdout.
pub(crate) fn run_cli(args: &[&str]) -> (i32, String) {
    let out = Command::new(thinstream())
        .args(args)
        .output()
        .expect("binary runs");
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    (out.status.code().unwrap_or(-1), text)
}

/// `Some(reason)` if no private network namespace can be made here.
pub(crate) fn netns_unavailable() -> Option<String> {
    let ok = Command::new("unshare")
        .args(["-n", "true"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    (!ok).then(|| "cannot create a network namespace (`unshare -n` needs root)".into())
}

/// Runs `script` with bash inside a fresh network namespace whose only
/// interface is `lo`, after `set -u`, `ip link set lo up`, `TS=<our CLI>`
/// and `prelude`. Returns stdout+stderr, panics with them on failure.
/// With `missing` set (a prerequisite is absent), prints SKIPPED and
/// returns `None`, or panics if THINSTREAM_REQUIRE_INTEROP=1 (CI).
pub(crate) fn in_netns(
    name: &str,
    missing: Option<String>,
    prelude: &str,
    script: &str,
) -> Option<String> {
    if let Some(why) = missing.or_else(netns_unavailable) {
        if std::env::var("THINSTREAM_REQUIRE_INTEROP").as_deref() == Ok("1") {
            panic!("interop prerequisite missing: {why}");
        }
        eprintln!("SKIPPED {name}: {why}");
        return None;
    }
    let full = format!(
        "set -u\nip link set lo up\nTS={ts}\n{prelude}\n{script}",
        ts = thinstream()
    );
    let out = Command::new("timeout")
        .args(["120", "unshare", "-n", "bash", "-c", &full])
        .output()
        .expect("running unshare");
    let text = format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{name} failed ({}):\n{text}",
        out.status
    );
    Some(text)
}

/// A fresh folder under the system's temporary folder.
pub(crate) fn tempdir(prefix: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "thinstream-{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}
