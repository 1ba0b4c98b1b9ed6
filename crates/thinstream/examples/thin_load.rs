//! Many thin associations from one endpoint: each sends a small message at a
//! fixed interval to an echo server (`thinstream listen --echo`) and times
//! the echo. Reports round-trip percentiles over all messages, and this
//! process's CPU time and peak memory. Used by `bench/api-perf`.
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
    /// Only the first N associations send (the rest stay idle).
    #[arg(long)]
    active: Option<usize>,
    /// Preset of the associations.
    #[arg(long, default_value = "production")]
    preset: String,
    /// After sending, wait up to this long (s) for the remaining echoes;
    /// what has not come back by then is reported as `lost`.
    #[arg(long, default_value_t = 0.5)]
    drain_s: f64,
    /// Write every echo as a CSV row (association, sent at in µs since
    /// the first send, round trip in µs) to this file, to see when the
    /// slow ones happened.
    #[arg(long)]
    samples: Option<std::path::PathBuf>,
    /// Send the messages in bursts of this many (same average rate: a
    /// burst every BURST message intervals), to see how a burst from many
    /// associations is answered. 1: evenly spread.
    #[arg(long, default_value_t = 1)]
    burst: u32,
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
    let active = args.active.unwrap_or(args.associations);
    let (busy, idle) = assocs.split_at(active);
    let _idle = idle.to_vec();
    // One receiver task per association: it records each echo's round
    // trip in microseconds (the sent time travels in the payload).
    let mut receivers = Vec::new();
    let echoed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    for a in busy.iter() {
        let a = a.clone();
        let echoed = echoed.clone();
        receivers.push(tokio::spawn(async move {
            let mut rtts: Vec<(u64, u32)> = Vec::new();
            while let Ok(m) = a.recv().await {
                echoed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let now = epoch.elapsed().as_nanos() as u64;
                let t0 = u64::from_le_bytes(m.data[..8].try_into().expect("8 bytes"));
                rtts.push((t0 / 1000, (now.saturating_sub(t0) / 1000).max(1) as u32));
            }
            rtts
        }));
    }
    // One pacing task sends for every association, each at its own phase
    // of the interval (a timer per association would measure the async
    // runtime's timer wheel, not the transport).
    let mut sent = 0u64;
    anyhow::ensure!(args.burst >= 1, "--burst must be at least 1");
    let step = interval / (active as u32).max(1) * args.burst;
    let mut next = epoch;
    let mut k = 0usize;
    while next < stop {
        tokio::time::sleep_until(next.into()).await;
        // Send everything due (a late wake-up catches up at once).
        let now = Instant::now();
        while next <= now && next < stop {
            for _ in 0..args.burst {
                let mut body = vec![0u8; args.size];
                let ns = epoch.elapsed().as_nanos() as u64;
                body[..8].copy_from_slice(&ns.to_le_bytes());
                busy[k % active]
                    .send(0, body, SendOptions::default())
                    .await?;
                sent += 1;
                k += 1;
            }
            next += step;
        }
    }
    // The last echoes (up to --drain-s), then close every association.
    let drain_end = Instant::now() + Duration::from_secs_f64(args.drain_s.max(0.0));
    while echoed.load(std::sync::atomic::Ordering::Relaxed) < sent && Instant::now() < drain_end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (mut retx, mut pkts_out, mut pkts_in, mut sacks_out, mut sacks_in) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    for a in busy {
        let st = a.stats();
        retx += st.retransmitted_chunks();
        pkts_out += st.packets_sent;
        pkts_in += st.packets_received;
        sacks_out += st.sacks_sent;
        sacks_in += st.sacks_received;
    }
    let cpu_window = cpu_s() - cpu0;
    let wall_window = epoch.elapsed().as_secs_f64();
    for a in busy.iter().chain(_idle.iter()) {
        a.abort("load test over");
    }
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut csv = match &args.samples {
        Some(path) => {
            let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
            std::io::Write::write_all(&mut f, b"association,sent_us,rtt_us\n")?;
            Some(f)
        }
        None => None,
    };
    for (i, r) in receivers.into_iter().enumerate() {
        for (t0, v) in r.await? {
            all.record(u64::from(v))?;
            if let Some(f) = csv.as_mut() {
                std::io::Write::write_all(f, format!("{i},{t0},{v}\n").as_bytes())?;
            }
        }
    }
    if let Some(mut f) = csv {
        std::io::Write::flush(&mut f)?;
    }
    let lost = sent - all.len();
    let (cpu, wall) = (cpu_window, wall_window);
    let ms = |q: f64| all.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{{\"associations\":{},\"messages\":{sent},\"echoed\":{},\"lost\":{lost},\"retransmissions\":{retx},\"packets_sent\":{pkts_out},\"packets_received\":{pkts_in},\"sacks_sent\":{sacks_out},\"sacks_received\":{sacks_in},\"rtt_ms\":{{\"p50\":{:.3},\"p99\":{:.3},\"p999\":{:.3},\"max\":{:.3}}},\"client_cpu_cores\":{:.3},\"client_peak_rss_mib\":{:.1}}}",
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
