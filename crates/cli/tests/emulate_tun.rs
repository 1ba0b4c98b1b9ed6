//! `thinstream emulate --tun` (root only): kernel TCP between the two
//! namespaces the emulator creates, through `delay 20ms` each way. The
//! round trip measured by the client is at least 40 ms, 1 MiB arrives intact
//! (the server answers with a checksum of what it read), the emulator exits
//! with the client's status and its namespaces are gone afterwards.
//!
//! Skipped with a printed reason when not root or without /dev/net/tun (CI
//! runs as root, so there it runs). No harness: this binary is also the
//! client (`--run-a`) and the server (`--run-b`); everything it sends stays
//! inside the two namespaces (10.201.0.1 ↔ 10.201.0.2), every loop is
//! bounded in count and time.

#![allow(
    clippy::disallowed_methods,
    reason = "a real-time test measures with the OS clock"
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

const PORT: u16 = 5099;
const BYTES: usize = 1 << 20;
const PINGS: usize = 5;

/// FNV-1a over the stream, the payload is a counter pattern.
fn fnv(hash: &mut u64, data: &[u8]) {
    for b in data {
        *hash ^= u64::from(*b);
        *hash = hash.wrapping_mul(0x100_0000_01b3);
    }
}

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 8)) as u8
}

fn server() -> Result<(), String> {
    let l = TcpListener::bind(("10.201.0.2", PORT)).map_err(|e| format!("bind: {e}"))?;
    let (mut c, _) = l.accept().map_err(|e| format!("accept: {e}"))?;
    c.set_read_timeout(Some(Duration::from_secs(20))).ok();
    c.set_nodelay(true).ok();
    let mut one = [0u8; 1];
    for _ in 0..PINGS {
        c.read_exact(&mut one).map_err(|e| format!("ping: {e}"))?;
        c.write_all(&one).map_err(|e| format!("pong: {e}"))?;
    }
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut buf = vec![0u8; 65536];
    let mut n = 0;
    while n < BYTES {
        let want = (BYTES - n).min(buf.len());
        let got = c.read(&mut buf[..want]).map_err(|e| format!("read: {e}"))?;
        if got == 0 {
            return Err(format!("EOF after {n} bytes"));
        }
        fnv(&mut hash, &buf[..got]);
        n += got;
    }
    c.write_all(&hash.to_be_bytes())
        .map_err(|e| format!("hash: {e}"))?;
    Ok(())
}

fn client() -> Result<(), String> {
    let to: SocketAddr = ([10, 201, 0, 2], PORT).into();
    let start = Instant::now();
    // The server starts first (--a-after); retry briefly anyway.
    let mut c = loop {
        match TcpStream::connect_timeout(&to, Duration::from_secs(5)) {
            Ok(c) => break c,
            Err(e) if start.elapsed() < Duration::from_secs(5) => {
                eprintln!("connect: {e}, retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(format!("connect: {e}")),
        }
    };
    let handshake = start.elapsed();
    c.set_read_timeout(Some(Duration::from_secs(20))).ok();
    c.set_nodelay(true).ok();
    let mut rtt_min = Duration::MAX;
    let mut one = [7u8; 1];
    for _ in 0..PINGS {
        let t = Instant::now();
        c.write_all(&one).map_err(|e| format!("ping: {e}"))?;
        c.read_exact(&mut one).map_err(|e| format!("pong: {e}"))?;
        rtt_min = rtt_min.min(t.elapsed());
    }
    let data: Vec<u8> = (0..BYTES).map(pattern).collect();
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    fnv(&mut hash, &data);
    c.write_all(&data).map_err(|e| format!("write: {e}"))?;
    let mut theirs = [0u8; 8];
    c.read_exact(&mut theirs)
        .map_err(|e| format!("hash: {e}"))?;
    let intact = u64::from_be_bytes(theirs) == hash;
    println!(
        "tun-client: handshake_ms={:.3} rtt_min_ms={:.3} bytes={BYTES} intact={intact}",
        handshake.as_secs_f64() * 1e3,
        rtt_min.as_secs_f64() * 1e3
    );
    if intact {
        Ok(())
    } else {
        Err("checksum mismatch".into())
    }
}

fn netns_list() -> String {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn tcp_through_tun() -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let me = me.display();
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_thinstream"))
        .args([
            "emulate",
            "--tun",
            "--forward",
            "delay 20ms",
            "--reverse",
            "delay 20ms",
            "--duration",
            "60s",
            "--b-grace",
            "2s",
            "--run-b",
            &format!("'{me}' server"),
            "--run-a",
            &format!("'{me}' client"),
        ])
        .output()
        .map_err(|e| format!("running thinstream: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}{stderr}(took {:.1} s)", t.elapsed().as_secs_f64());
    if !out.status.success() {
        return Err(format!("emulate --tun exited with {}", out.status));
    }
    let first = stdout.lines().next().unwrap_or("");
    let names: Vec<&str> = first
        .split_whitespace()
        .filter(|w| w.starts_with("ts-a-") || w.starts_with("ts-b-"))
        .take(2)
        .collect();
    if names.len() != 2 {
        return Err(format!("no namespace names on the first line: {first:?}"));
    }
    let line = stdout
        .lines()
        .find(|l| l.starts_with("tun-client:"))
        .ok_or("no client line")?;
    let field = |k: &str| -> Option<String> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")).map(str::to_string))
    };
    let rtt: f64 = field("rtt_min_ms")
        .and_then(|v| v.parse().ok())
        .ok_or("no rtt")?;
    let handshake: f64 = field("handshake_ms")
        .and_then(|v| v.parse().ok())
        .ok_or("no handshake")?;
    if rtt < 40.0 || handshake < 40.0 {
        return Err(format!(
            "round trip {rtt} ms / handshake {handshake} ms below the 40 ms the links add"
        ));
    }
    if rtt > 200.0 {
        return Err(format!("round trip {rtt} ms: far above 40 ms"));
    }
    if field("intact").as_deref() != Some("true") {
        return Err("data not intact".into());
    }
    // The forward direction carried at least the 1 MiB (plus headers).
    if !stdout.contains("forward (a -> b) [delay 20ms]: in ") {
        return Err("no forward statistics".into());
    }
    let left = netns_list();
    for n in names {
        if left.lines().any(|l| l.split_whitespace().next() == Some(n)) {
            return Err(format!("namespace {n} still exists: {left}"));
        }
        let dev = format!("ts{}", &n[3..].replace('-', ""));
        let links = Command::new("ip")
            .args(["-o", "link"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        if links.contains(&format!(" {dev}:")) {
            return Err(format!("device {dev} still exists in the root namespace"));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let role = args.get(1).map(String::as_str);
    let result = match role {
        Some("server") => server(),
        Some("client") => client(),
        _ => {
            // Test mode (cargo passes libtest flags; they are ignored).
            if let Some(why) = skip_reason() {
                println!("emulate_tun: skipped: {why}");
                println!("0 passed, 0 failed, 1 skipped");
                return ExitCode::SUCCESS;
            }
            let r = tcp_through_tun();
            match &r {
                Ok(()) => println!("tcp_through_tun ... ok\n1 passed, 0 failed"),
                Err(e) => println!("tcp_through_tun ... FAILED: {e}\n0 passed, 1 failed"),
            }
            r
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("emulate_tun {}: {e}", role.unwrap_or("test"));
            ExitCode::FAILURE
        }
    }
}

fn skip_reason() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let euid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or("?");
    if euid != "0" {
        return Some(format!("not root (effective uid {euid})"));
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun missing".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("no `ip` command (iproute2)".into());
    }
    None
}
