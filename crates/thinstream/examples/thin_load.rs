//! Many thin associations from one endpoint: each sends a small message at a
//! fixed interval to an echo server (`thinstream listen --echo`) and times
//! the echo. Reports round-trip percentiles over all messages, and this
//! process's CPU time and peak memory. Used by `bench/many-thin`.
//!
//! ```sh
//! cargo run --release -p thinstream --example thin_load -- --to 127.0.0.1:9899 --associations 1000
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "a load generator on real sockets times messages with the OS clock"
)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use thinstream::{AssociationConfig, Endpoint, EndpointConfig, SendOptions};

#[derive(Parser, Debug)]
struct Args {
    /// The echo server's UDP address (loopback only).
    #[arg(long)]
    to: SocketAddr,
    /// Associations to open, all from one endpoint.
    #[arg(long, default_value_t = 1000)]
    associations: usize,
    /// Time between two messages of one association, ms.
    #[arg(long, default_value_t = 100)]
    interval_ms: u64,
    /// Message size, bytes (at least 16).
    #[arg(long, default_value_t = 100)]
    size: usize,
    /// How long to send, s (after every association is up).
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Preset of the associations.
    #[arg(long, default_value = "production")]
    preset: String,
}

/// CPU seconds (user + system) of this process.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rfind(')').map(|i| &stat[i + 2..]).unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / 100.0
}

/// Peak resident memory of this process, MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.to.ip().is_loopback(),
        "load tests go to loopback addresses only"
    );
    anyhow::ensure!(args.size >= 16, "--size must be at least 16");
    anyhow::ensure!(
        (1..=50_000).contains(&args.associations),
        "--associations must be 1..=50000"
    );
    let local: SocketAddr = if args.to.is_ipv6() {
        "[::1]:0".parse()?
    } else {
        "127.0.0.1:0".parse()?
    };
    let endpoint = Endpoint::bind(local, EndpointConfig::client())?;
    let config = AssociationConfig::preset(&args.preset)?;
    let setup = Instant::now();
    let mut assocs = Vec::with_capacity(args.associations);
    for chunk in (0..args.associations).collect::<Vec<_>>().chunks(100) {
        let opening: Vec<_> = chunk
            .iter()
            .map(|&i| {
                // One pair of SCTP ports per association.
                let mut c = config.clone();
                c.sctp_ports(10_000 + i as u16, 5000);
                let (ep, to) = (endpoint.clone(), args.to);
                tokio::spawn(async move { ep.connect(to, c).await })
            })
            .collect();
        for a in opening {
            assocs.push(a.await??);
        }
    }
    eprintln!(
        "{} associations up in {:.2} s",
        assocs.len(),
        setup.elapsed().as_secs_f64()
    );
    let epoch = Instant::now();
    let cpu0 = cpu_s();
    let stop = epoch + Duration::from_secs(args.seconds);
    let interval = Duration::from_millis(args.interval_ms);
    let mut tasks = Vec::new();
    for (i, a) in assocs.into_iter().enumerate() {
        // Spread the associations' phases over the interval.
        let phase = interval * (i as u32) / (args.associations as u32);
        let size = args.size;
        tasks.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
            let mut sent = 0u64;
            let mut lost = 0u64;
            let mut tick = tokio::time::interval_at((epoch + phase).into(), interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut outstanding = 0u64;
            loop {
                tokio::select! {
                    t = tick.tick() => {
                        if Instant::from(t) >= stop { break; }
                        let mut body = vec![0u8; size];
                        let ns = epoch.elapsed().as_nanos() as u64;
                        body[..8].copy_from_slice(&ns.to_le_bytes());
                        if a.send(0, body, SendOptions::default()).await.is_err() { break; }
                        sent += 1;
                        outstanding += 1;
                    }
                    m = a.recv() => {
                        let Ok(m) = m else { break };
                        let now = epoch.elapsed().as_nanos() as u64;
                        let t0 = u64::from_le_bytes(m.data[..8].try_into().expect("8 bytes"));
                        let _ = h.record((now.saturating_sub(t0) / 1000).max(1));
                        outstanding -= 1;
                    }
                }
            }
            // Collect the last echoes.
            let wait = Instant::now() + Duration::from_secs(2);
            while outstanding > 0 {
                match tokio::time::timeout_at(wait.into(), a.recv()).await {
                    Ok(Ok(m)) => {
                        let now = epoch.elapsed().as_nanos() as u64;
                        let t0 = u64::from_le_bytes(m.data[..8].try_into().expect("8 bytes"));
                        let _ = h.record((now.saturating_sub(t0) / 1000).max(1));
                        outstanding -= 1;
                    }
                    _ => {
                        lost = outstanding;
                        break;
                    }
                }
            }
            let retx = a.stats().retransmitted_chunks();
            a.close().await;
            (h, sent, lost, retx)
        }));
    }
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let (mut sent, mut lost, mut retx) = (0u64, 0u64, 0u64);
    for t in tasks {
        let (h, s, l, r) = t.await?;
        all.add(h)?;
        sent += s;
        lost += l;
        retx += r;
    }
    let cpu = cpu_s() - cpu0;
    let wall = epoch.elapsed().as_secs_f64();
    let ms = |q: f64| all.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{{\"associations\":{},\"messages\":{sent},\"echoed\":{},\"lost\":{lost},\"retransmissions\":{retx},\"rtt_ms\":{{\"p50\":{:.3},\"p99\":{:.3},\"p999\":{:.3},\"max\":{:.3}}},\"client_cpu_cores\":{:.3},\"client_peak_rss_mib\":{:.1}}}",
        args.associations,
        all.len(),
        ms(0.5),
        ms(0.99),
        ms(0.999),
        all.max() as f64 / 1000.0,
        cpu / wall,
        peak_rss_mib()
    );
    Ok(())
}
