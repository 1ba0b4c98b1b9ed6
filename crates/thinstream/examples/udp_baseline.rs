//! The floor under the one-association round trip: plain UDP ping-pong
//! between two processes, on the same runtime flavour (tokio, one thread)
//! and with the same message pattern as `bench/api-perf`'s thin
//! association (100 B every 5 ms, echoed). No SCTP, no association, no
//! acknowledgement: what is left is the kernel's loopback path and two
//! process wake-ups per round trip. Comparing its percentiles with
//! `thinstream send --expect-echo` on the same machine separates the
//! library's own cost from the machine's scheduling tail.
//!
//! ```sh
//! cargo run --release -p thinstream --example udp_baseline -- echo --bind 127.0.0.1:9901 --seconds 40 &
//! cargo run --release -p thinstream --example udp_baseline -- ping --to 127.0.0.1:9901 --seconds 30
//! ```
//!
//! `ping` prints one JSON line: round-trip percentiles in ms, messages sent
//! and echoed.
//!
//! `load` is the same floor for `bench/api-perf`'s thousand thin
//! associations: one socket sends a datagram every `--interval-us` divided
//! by `--flows` (100 µs for 1000 flows every 100 ms), paced exactly as the
//! `thin_load` example paces its associations, with the send time in the
//! payload, and times every echo while the next ones go out.
//!
//! ```sh
//! cargo run --release -p thinstream --example udp_baseline -- load --to 127.0.0.1:9901 --flows 1000 --interval-us 100000 --seconds 30
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark on real sockets times messages with the OS clock"
)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use hdrhistogram::Histogram;
use tokio::net::UdpSocket;

#[derive(Parser, Debug)]
struct Args {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Echo every datagram back to its sender until `--seconds` pass.
    Echo {
        /// Address to bind (loopback only).
        #[arg(long)]
        bind: SocketAddr,
        /// Stop after this long, s.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    /// Send a datagram every `--interval-us` and time its echo.
    Ping {
        /// The echo process's address (loopback only).
        #[arg(long)]
        to: SocketAddr,
        /// Datagram size, bytes (at least 8).
        #[arg(long, default_value_t = 100)]
        size: usize,
        /// Time between two datagrams, microseconds.
        #[arg(long, default_value_t = 5000)]
        interval_us: u64,
        /// How long to send, s.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
    },
    /// Send for `--flows` flows at once, each a datagram every
    /// `--interval-us` (evenly spread), and time every echo.
    Load {
        /// The echo process's address (loopback only).
        #[arg(long)]
        to: SocketAddr,
        /// Datagram size, bytes (at least 8).
        #[arg(long, default_value_t = 100)]
        size: usize,
        /// Flows whose datagrams are interleaved.
        #[arg(long, default_value_t = 1000)]
        flows: u32,
        /// Time between two datagrams of one flow, microseconds.
        #[arg(long, default_value_t = 100_000)]
        interval_us: u64,
        /// How long to send, s.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
    },
}

fn loopback_only(a: SocketAddr) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.ip().is_loopback(),
        "{a} is not a loopback address: this benchmark only runs on loopback"
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        match args.mode {
            Mode::Echo { bind, seconds } => echo(bind, seconds).await,
            Mode::Ping {
                to,
                size,
                interval_us,
                seconds,
            } => ping(to, size, interval_us, seconds).await,
            Mode::Load {
                to,
                size,
                flows,
                interval_us,
                seconds,
            } => load(to, size, flows, interval_us, seconds).await,
        }
    })
}

async fn echo(bind: SocketAddr, seconds: u64) -> anyhow::Result<()> {
    loopback_only(bind)?;
    let sock = UdpSocket::bind(bind).await?;
    let end = tokio::time::Instant::now() + Duration::from_secs(seconds);
    let mut buf = vec![0u8; 65536];
    loop {
        tokio::select! {
            r = sock.recv_from(&mut buf) => {
                let (n, from) = r?;
                sock.send_to(&buf[..n], from).await?;
            }
            _ = tokio::time::sleep_until(end) => return Ok(()),
        }
    }
}

async fn ping(to: SocketAddr, size: usize, interval_us: u64, seconds: u64) -> anyhow::Result<()> {
    loopback_only(to)?;
    anyhow::ensure!(
        size >= 8,
        "--size must be at least 8 bytes (a sequence number)"
    );
    let local: SocketAddr = if to.is_ipv4() {
        "127.0.0.1:0".parse()?
    } else {
        "[::1]:0".parse()?
    };
    let sock = UdpSocket::bind(local).await?;
    sock.connect(to).await?;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let mut out = vec![0u8; size];
    let mut buf = vec![0u8; 65536];
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_micros(interval_us));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut sent, mut echoed) = (0u64, 0u64);
    // One datagram in flight at a time (as with a 5 ms interval and
    // sub-millisecond round trips); a datagram lost on loopback is given up
    // after 100 ms and not counted.
    while start.elapsed() < Duration::from_secs(seconds) {
        tick.tick().await;
        out[..8].copy_from_slice(&sent.to_be_bytes());
        let t0 = Instant::now();
        sock.send(&out).await?;
        sent += 1;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(100);
        loop {
            tokio::select! {
                r = sock.recv(&mut buf) => {
                    let n = r?;
                    if n >= 8 && buf[..8] == out[..8] {
                        hist.record(t0.elapsed().as_nanos() as u64)?;
                        echoed += 1;
                        break;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
    }
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1e6;
    println!(
        "{{\"messages\":{sent},\"echoed\":{echoed},\"rtt_ms\":{{\"p50\":{:.4},\"p99\":{:.4},\"p999\":{:.4},\"max\":{:.4}}}}}",
        ms(0.5),
        ms(0.99),
        ms(0.999),
        hist.max() as f64 / 1e6
    );
    Ok(())
}

async fn load(
    to: SocketAddr,
    size: usize,
    flows: u32,
    interval_us: u64,
    seconds: u64,
) -> anyhow::Result<()> {
    loopback_only(to)?;
    anyhow::ensure!(size >= 8, "--size must be at least 8 bytes (a timestamp)");
    anyhow::ensure!(flows >= 1, "--flows must be at least 1");
    let local: SocketAddr = if to.is_ipv4() {
        "127.0.0.1:0".parse()?
    } else {
        "[::1]:0".parse()?
    };
    let sock = std::sync::Arc::new(UdpSocket::bind(local).await?);
    sock.connect(to).await?;
    let epoch = Instant::now();
    // Receive and time echoes in their own task, as `thin_load`'s
    // receivers do, while the pacing loop below sends.
    let rx = sock.clone();
    let receiver = tokio::spawn(async move {
        let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
        let mut buf = vec![0u8; 65536];
        loop {
            let n = rx.recv(&mut buf).await?;
            if n >= 8 {
                let now = epoch.elapsed().as_nanos() as u64;
                let t0 = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
                hist.record(now.saturating_sub(t0).max(1))?;
            }
            if n == 1 {
                return anyhow::Ok(hist);
            }
        }
    });
    let step = Duration::from_micros(interval_us) / flows;
    let stop = epoch + Duration::from_secs(seconds);
    let mut next = epoch;
    let mut out = vec![0u8; size];
    let mut sent = 0u64;
    while next < stop {
        tokio::time::sleep_until(next.into()).await;
        // Send everything due (a late wake-up catches up at once).
        let now = Instant::now();
        while next <= now && next < stop {
            let ns = epoch.elapsed().as_nanos() as u64;
            out[..8].copy_from_slice(&ns.to_le_bytes());
            sock.send(&out).await?;
            sent += 1;
            next += step;
        }
    }
    // The last echoes, then a one-byte datagram the echo returns as the
    // end marker (loopback does not reorder one socket's datagrams).
    tokio::time::sleep(Duration::from_millis(200)).await;
    sock.send(&[0u8]).await?;
    let hist = tokio::time::timeout(Duration::from_secs(2), receiver).await???;
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1e6;
    println!(
        "{{\"messages\":{sent},\"echoed\":{},\"rtt_ms\":{{\"p50\":{:.4},\"p99\":{:.4},\"p999\":{:.4},\"max\":{:.4}}}}}",
        hist.len(),
        ms(0.5),
        ms(0.99),
        ms(0.999),
        hist.max() as f64 / 1e6
    );
    Ok(())
}
