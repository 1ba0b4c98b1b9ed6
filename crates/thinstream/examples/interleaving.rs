//! Message interleaving (RFC 8260 I-DATA) keeps a thin stream fast beside a
//! bulk message. On loopback, stream 0 carries 100-byte messages every
//! 10 ms, echoed by the server; the round-trip percentiles are measured
//! twice: alone, and while 1 MB messages go out back to back on stream 1
//! for the whole run. With interleaving (the production preset
//! negotiates it with our own server) stream 0's p99 stays within 2 ms of
//! the run without the bulk messages; exits non-zero otherwise. With
//! `--no-interleaving` the same run shows the head-of-line blocking that
//! plain DATA chunks cause.
//!
//! ```sh
//! cargo run --release -p thinstream --example interleaving
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "an example on real sockets timestamps its messages with the OS clock"
)]

use std::time::{Duration, Instant};

use thinstream::{AssociationConfig, Endpoint, EndpointConfig, SendOptions};

const SMALL: usize = 300;

async fn run(bulk: bool, interleaving: bool) -> anyhow::Result<Vec<f64>> {
    let mut cfg = AssociationConfig::default();
    cfg.transport_mut().interleaving = interleaving;
    cfg.transport_mut().max_message_size = 2 << 20;
    cfg.send_buffer(4 << 20)
        .receive_buffer(4 << 20)
        .recv_queue(4 << 20);
    let mut scfg = EndpointConfig::server();
    scfg.association(cfg.clone());
    let server = Endpoint::bind("127.0.0.1:0".parse()?, scfg)?;
    let addr = server.local_addr();
    tokio::spawn(async move {
        let Some(inc) = server.accept().await else {
            return;
        };
        let Ok(b) = inc.accept() else { return };
        // Echo stream 0; read and drop stream 1.
        while let Ok(m) = b.recv().await {
            if m.stream == 0 && b.send(0, m.data, SendOptions::default()).await.is_err() {
                break;
            }
        }
    });
    let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::client())?;
    let a = client.connect(addr, cfg).await?;
    let epoch = Instant::now();
    let reader = a.clone();
    let rtts = tokio::spawn(async move {
        let mut v = Vec::with_capacity(SMALL);
        while v.len() < SMALL {
            let Ok(Ok(m)) = tokio::time::timeout(Duration::from_secs(10), reader.recv()).await
            else {
                break;
            };
            let t0 = u64::from_le_bytes(m.data[..8].try_into().expect("8 bytes"));
            v.push((epoch.elapsed().as_nanos() as u64 - t0) as f64 / 1e6);
        }
        v
    });
    if bulk {
        let bulk_sender = a.clone();
        tokio::spawn(async move {
            // Back to back: stream 1 always has a 1 MB message in progress
            // (bounded by the send buffer), for the whole run.
            let end = Instant::now() + Duration::from_millis(10 * SMALL as u64);
            while Instant::now() < end {
                let big = vec![7u8; 1 << 20];
                if let Err(e) = bulk_sender.send(1, big, SendOptions::default()).await {
                    eprintln!("bulk message refused: {e}");
                    break;
                }
            }
        });
    }
    let mut next = Instant::now();
    for _ in 0..SMALL {
        tokio::time::sleep_until(next.into()).await;
        let mut body = vec![0u8; 100];
        body[..8].copy_from_slice(&(epoch.elapsed().as_nanos() as u64).to_le_bytes());
        a.send(0, body, SendOptions::default()).await?;
        next += Duration::from_millis(10);
    }
    let mut v = rtts.await?;
    anyhow::ensure!(
        v.len() == SMALL,
        "only {} of {SMALL} echoes came back",
        v.len()
    );
    let stats = a.stats();
    anyhow::ensure!(
        stats.interleaving == interleaving,
        "interleaving negotiated: {}",
        stats.interleaving
    );
    a.abort("done");
    v.sort_by(f64::total_cmp);
    Ok(v)
}

fn pct(v: &[f64], q: f64) -> f64 {
    v[((v.len() - 1) as f64 * q).round() as usize]
}

#[tokio::main]
async fn main() -> anyhow::Result<std::process::ExitCode> {
    let interleaving = !std::env::args().any(|a| a == "--no-interleaving");
    let alone = run(false, interleaving).await?;
    let beside = run(true, interleaving).await?;
    let (p99a, p99b) = (pct(&alone, 0.99), pct(&beside, 0.99));
    println!(
        "I-DATA {}: stream 0 round trip alone p50 {:.3} p99 {:.3} ms; beside 1 MB messages on stream 1 p50 {:.3} p99 {:.3} max {:.3} ms",
        if interleaving { "on" } else { "off" },
        pct(&alone, 0.5),
        p99a,
        pct(&beside, 0.5),
        p99b,
        pct(&beside, 1.0)
    );
    println!(
        "{{\"interleaving\":{interleaving},\"p99_alone_ms\":{p99a:.3},\"p99_beside_bulk_ms\":{p99b:.3}}}"
    );
    Ok(if !interleaving || p99b <= p99a + 2.0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}
