//! How late an association's retransmission timer fires on this host.
//!
//! A client and a server in one process on loopback, joined by a small
//! relay that drops every datagram during an outage. Each cycle the client
//! sends one message and the relay then drops everything for `--outage`
//! (default 1.1 s), so the retransmission timer expires again and again,
//! each expiry restarting it for one RTO; then the message gets through
//! and the next cycle starts after a pause. From the client's own trace
//! (the core's timestamps), the lateness of an expiry is the time between
//! two consecutive expiries minus the RTO the first one restarted the
//! timer with.
//!
//! ```sh
//! cargo run --release -p thinstream --example timer_lateness -- [--cycles 40] [--preset production]
//! ```
//!
//! Prints the count, p50, p90, p99 and max lateness in microseconds, and
//! the same as one JSON line (`--json`). Everything stays on 127.0.0.1;
//! the run is bounded by the cycle count (about 1.5 s each).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thinstream::trace::{Record, TxReason};
use thinstream::{AssociationConfig, Endpoint, EndpointConfig, SendOptions};
use tokio::net::UdpSocket;

struct Args {
    cycles: u32,
    preset: String,
    outage: Duration,
    json: bool,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        cycles: 40,
        preset: "production".into(),
        outage: Duration::from_millis(1100),
        json: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| anyhow::anyhow!("{k} needs a value"))
        };
        match k.as_str() {
            "--cycles" => a.cycles = value()?.parse()?,
            "--preset" => a.preset = value()?,
            "--outage-ms" => a.outage = Duration::from_millis(value()?.parse()?),
            "--json" => a.json = true,
            "-h" | "--help" => {
                println!(
                    "timer_lateness [--cycles N] [--preset P] [--outage-ms MS] [--json]: \
                     retransmission timer lateness of a loopback association"
                );
                std::process::exit(0);
            }
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    anyhow::ensure!(
        a.cycles > 0 && a.cycles <= 10_000,
        "--cycles must be 1..=10000"
    );
    Ok(a)
}

/// Relays client <-> server, dropping everything while `down` is set.
async fn relay(sock: UdpSocket, server: SocketAddr, down: Arc<AtomicBool>) -> anyhow::Result<()> {
    let up = UdpSocket::bind("127.0.0.1:0").await?;
    let mut client: Option<SocketAddr> = None;
    let mut a = vec![0u8; 65536];
    let mut b = vec![0u8; 65536];
    loop {
        tokio::select! {
            r = sock.recv_from(&mut a) => {
                let (n, from) = r?;
                client = Some(from);
                if !down.load(Ordering::Relaxed) {
                    up.send_to(&a[..n], server).await?;
                }
            }
            r = up.recv_from(&mut b) => {
                let (n, _) = r?;
                if let (Some(c), false) = (client, down.load(Ordering::Relaxed)) {
                    sock.send_to(&b[..n], c).await?;
                }
            }
        }
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::server())?;
    let srv = server.clone();
    tokio::spawn(async move {
        while let Some(incoming) = srv.accept().await {
            let Ok(a) = incoming.accept() else { continue };
            tokio::spawn(async move { while a.recv().await.is_ok() {} });
        }
    });
    let down = Arc::new(AtomicBool::new(false));
    let sock = UdpSocket::bind("127.0.0.1:0").await?;
    let relay_addr = sock.local_addr()?;
    tokio::spawn(relay(sock, server.local_addr(), down.clone()));

    let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::client())?;
    let mut config = AssociationConfig::preset(&args.preset)?;
    config.trace(true);
    let a = client.connect(relay_addr, config).await?;
    // RTT samples first, so that the RTO is the preset's floor rather than
    // the initial 3 s.
    for _ in 0..20 {
        a.send(0, vec![7u8; 100], SendOptions::default()).await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..args.cycles {
        down.store(true, Ordering::Relaxed);
        a.send(0, vec![7u8; 100], SendOptions::default()).await?;
        tokio::time::sleep(args.outage).await;
        down.store(false, Ordering::Relaxed);
        // The next expiry carries the message through; the SACK ends the cycle.
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let trace = a.take_trace();
    a.close().await;
    if std::env::var_os("TIMER_LATENESS_DUMP").is_some() {
        for r in &trace {
            eprintln!("{r:?}");
        }
    }

    // Consecutive expiries within a cycle. An expiry is handled at the
    // time of the RTO record that precedes its timeout retransmission (the
    // timer restarts then, with that RTO); the deadline of the next one is
    // that time plus that RTO.
    let mut rto_at = None;
    let mut last: Option<(thinstream::trace::Instant, thinstream::trace::Duration)> = None;
    let mut late_us = Vec::new();
    for r in &trace {
        match r {
            Record::Rto { time, rto, .. } => rto_at = Some((*time, *rto)),
            Record::PacketSent { data, .. } => {
                if !data.iter().any(|p| p.reason == TxReason::TimeoutRetransmit) {
                    continue;
                }
                let Some((expired, rto)) = rto_at else {
                    continue;
                };
                if let Some((prev, prev_rto)) = last {
                    let gap = expired.as_nanos() as f64 - prev.as_nanos() as f64;
                    late_us.push((gap - prev_rto.as_nanos() as f64) / 1e3);
                }
                last = Some((expired, rto));
            }
            Record::Acked { .. } => last = None,
            _ => {}
        }
    }
    anyhow::ensure!(
        !late_us.is_empty(),
        "no consecutive timeout retransmissions were traced"
    );
    late_us.sort_by(f64::total_cmp);
    let (p50, p90, p99, max) = (
        quantile(&late_us, 0.5),
        quantile(&late_us, 0.9),
        quantile(&late_us, 0.99),
        late_us[late_us.len() - 1],
    );
    println!(
        "retransmission timer lateness ({} expiries, preset {}): p50 {:.0} us, p90 {:.0} us, p99 {:.0} us, max {:.0} us (min {:.0} us)",
        late_us.len(),
        args.preset,
        p50,
        p90,
        p99,
        max,
        late_us[0]
    );
    if args.json {
        println!(
            "{{\"expiries\":{},\"p50_us\":{p50:.1},\"p90_us\":{p90:.1},\"p99_us\":{p99:.1},\"max_us\":{max:.1},\"min_us\":{:.1}}}",
            late_us.len(),
            late_us[0]
        );
    }
    Ok(())
}
