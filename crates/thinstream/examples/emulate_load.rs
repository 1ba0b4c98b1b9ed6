//! Load generator for `thinstream emulate` (bench/emulate): starts the
//! emulator between a paced UDP sender and a sink on 127.0.0.1, then reports
//! what went through, the one-way delay beyond the configured delay, the
//! emulator's CPU time (from /proc) and its own release-error statistics.
//!
//! ```text
//! cargo run --release -p thinstream --example emulate_load -- \
//!     --bin target/release/thinstream --rate 10000 --seconds 10 --link "delay 20ms"
//! ```
//! `--rate 0` sends as fast as one thread can; `--emulate-arg ARG` (repeatable)
//! passes ARG to `thinstream emulate` (e.g. `--emulate-arg --busy-poll`). Everything stays on
//! 127.0.0.1; the run is bounded by `--seconds`.

#![allow(
    clippy::disallowed_methods,
    reason = "a real-time load generator reads the OS clock"
)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Args {
    bin: String,
    rate: u64,
    seconds: u64,
    size: usize,
    link: String,
    delay_us: u64,
    /// Extra arguments for `thinstream emulate` (e.g. `--busy-poll`).
    emulate_args: Vec<String>,
}

fn args() -> Args {
    let mut a = Args {
        bin: "target/release/thinstream".into(),
        rate: 10_000,
        seconds: 10,
        size: 100,
        link: "delay 20ms".into(),
        delay_us: 20_000,
        emulate_args: Vec::new(),
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i + 1 < v.len() {
        let x = v[i + 1].clone();
        match v[i].as_str() {
            "--bin" => a.bin = x,
            "--rate" => a.rate = x.parse().expect("--rate N"),
            "--seconds" => a.seconds = x.parse().expect("--seconds N"),
            "--size" => a.size = x.parse().expect("--size N"),
            "--link" => a.link = x,
            "--delay-us" => a.delay_us = x.parse().expect("--delay-us N"),
            "--emulate-arg" => a.emulate_args.push(x),
            o => panic!("unknown option {o}"),
        }
        i += 2;
    }
    a.size = a.size.max(16);
    a
}

/// utime + stime of a process, seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields after the command: state is index 0, utime 11, stime 12.
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let a = args();
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let json = std::env::temp_dir().join(format!("emulate-load-{}.json", std::process::id()));
    let mut emu = Command::new(&a.bin)
        .args(["emulate", "--listen", "127.0.0.1:0", "--to"])
        .arg(sink.local_addr().unwrap().to_string())
        .args(["--forward", &a.link, "-q", "--json"])
        .arg(&json)
        .args(["--duration", &format!("{}s", a.seconds + 3)])
        .args(&a.emulate_args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("emulator starts");
    let mut line = String::new();
    BufReader::new(emu.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let to: SocketAddr = line.split_whitespace().nth(3).unwrap().parse().unwrap();
    let pid = emu.id();
    let base = Instant::now();
    let cpu0 = cpu_seconds(pid);

    let seconds = a.seconds;
    let rx = std::thread::spawn(move || {
        sink.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 65536];
        let mut n = 0u64;
        let mut hist = vec![0u64; 100_000]; // µs of extra delay
        let mut max_extra = 0u64;
        let mut first: Option<Instant> = None;
        let mut last = Instant::now();
        let end = Instant::now() + Duration::from_secs(seconds + 3);
        while Instant::now() < end {
            let Ok((len, _)) = sink.recv_from(&mut buf) else {
                if n > 0 {
                    break;
                }
                continue;
            };
            if len < 16 {
                continue;
            }
            let now = base.elapsed().as_nanos() as u64;
            let sent = u64::from_be_bytes(buf[8..16].try_into().unwrap());
            let d = now.saturating_sub(sent) / 1000;
            let last_bucket = hist.len() - 1;
            hist[(d as usize).min(last_bucket)] += 1;
            max_extra = max_extra.max(d);
            n += 1;
            first.get_or_insert_with(Instant::now);
            last = Instant::now();
        }
        let span = first.map_or(0.0, |f| (last - f).as_secs_f64());
        (n, hist, max_extra, span)
    });

    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut p = vec![0u8; a.size];
    let t0 = Instant::now();
    let stop = t0 + Duration::from_secs(a.seconds);
    let mut sent = 0u64;
    loop {
        let now = Instant::now();
        if now >= stop {
            break;
        }
        let due = if a.rate == 0 {
            sent + 64
        } else {
            ((now - t0).as_secs_f64() * a.rate as f64) as u64
        };
        if sent >= due {
            std::hint::spin_loop();
            continue;
        }
        while sent < due {
            p[..8].copy_from_slice(&sent.to_be_bytes());
            let ts = base.elapsed().as_nanos() as u64;
            p[8..16].copy_from_slice(&ts.to_be_bytes());
            if tx.send_to(&p, to).is_ok() {
                sent += 1;
            } else {
                break;
            }
        }
    }
    let send_secs = t0.elapsed().as_secs_f64();
    let (received, hist, max_us, span) = rx.join().unwrap();
    let cpu = cpu_seconds(pid) - cpu0;
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
    let _ = emu.wait();
    let report: serde_json::Value = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let q = |f: f64| {
        let rank = ((f * received as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, b) in hist.iter().enumerate() {
            seen += b;
            if seen >= rank {
                return i as u64;
            }
        }
        max_us
    };
    let extra = |us: u64| us as f64 / 1000.0 - a.delay_us as f64 / 1000.0;
    println!(
        "link {:?}, {} B datagrams, offered {:.0}/s for {:.1} s",
        a.link,
        a.size,
        sent as f64 / send_secs,
        send_secs
    );
    println!(
        "sent {sent} received {received} ({:.2} % missing); received rate {:.0}/s",
        100.0 * (sent - received.min(sent)) as f64 / sent.max(1) as f64,
        received as f64 / span.max(1e-9)
    );
    println!(
        "one-way delay minus configured: p50 {:.3} ms p99 {:.3} ms p99.9 {:.3} ms max {:.3} ms",
        extra(q(0.5)),
        extra(q(0.99)),
        extra(q(0.999)),
        extra(max_us)
    );
    // The emulator's own count: at high rates the sink (one thread, default
    // socket buffer) misses datagrams the emulator did send.
    let relayed = report["forward"]["sent"]["packets"].as_u64().unwrap_or(0);
    println!(
        "emulator CPU {cpu:.2} s ({:.0} % of one core) for {relayed} relayed datagrams: {:.0} datagrams per CPU-second",
        100.0 * cpu / send_secs,
        relayed as f64 / cpu.max(1e-9)
    );
    println!(
        "emulator release error (us): {}",
        report["forward"]["release_error"]
    );
    println!(
        "emulator forward: received {} sent {} hold_overflow {}",
        report["forward"]["received"]["packets"],
        report["forward"]["sent"]["packets"],
        report["forward"]["hold_overflow"]["packets"]
    );
}
