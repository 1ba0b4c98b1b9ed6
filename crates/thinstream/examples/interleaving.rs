//! Message interleaving (RFC 8260 I-DATA) keeps a thin stream fast beside a
//! bulk message. On loopback, stream 0 carries 100-byte messages every
//! 10 ms, echoed by the server; the round-trip percentiles are measured
//! twice: alone, and beside 1 MB messages on stream 1. With interleaving
//! (the production preset negotiates it with our own server) stream 0's
//! p99 stays within 2 ms of the run without the bulk messages; exits
//! non-zero otherwise. With `--no-interleaving` the same run shows the
//! head-of-line blocking that plain DATA chunks cause.
//!
//! Options:
//! * `--bulk-every-ms N`: one 1 MB message every N ms (a large message
//!   now and then, the processor mostly idle). Without it (or with 0) the
//!   1 MB messages go out back to back for the whole run: the bulk
//!   transfer then takes every free cycle of the machine, and on a small
//!   machine the thin stream also waits for a processor;
//! * `--messages N`: stream 0's messages per run (default 300; the p99 of
//!   300 round trips is their fourth largest);
//! * `--receive-buffer-kib N`: the receive buffer both ends advertise
//!   (default 4096). Close to the message size, the receiver's window
//!   shuts while a whole message waits to be read, which exercises the
//!   window update the endpoint sends once the application reads.
//!
//! ```sh
//! cargo run --release -p thinstream --example interleaving -- --bulk-every-ms 50 --messages 2000
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "an example on real sockets timestamps its messages with the OS clock"
)]

use std::time::{Duration, Instant};

use thinstream::{AssociationConfig, Endpoint, EndpointConfig, SendOptions};

struct Options {
    interleaving: bool,
    /// `None`: back to back.
    bulk_every: Option<Duration>,
    messages: usize,
    receive_buffer: u32,
}

impl Options {
    fn parse() -> anyhow::Result<Options> {
        let mut o = Options {
            interleaving: true,
            bulk_every: None,
            messages: 300,
            receive_buffer: 4 << 20,
        };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            let mut value = |name: &str| -> anyhow::Result<u64> {
                let v = args
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("{name} needs a number"))?;
                v.parse()
                    .map_err(|e| anyhow::anyhow!("{name} {v:?}: {e} (a whole number expected)"))
            };
            match a.as_str() {
                "--no-interleaving" => o.interleaving = false,
                "--bulk-every-ms" => {
                    let ms = value("--bulk-every-ms")?;
                    o.bulk_every = (ms > 0).then(|| Duration::from_millis(ms));
                }
                "--messages" => {
                    o.messages = usize::try_from(value("--messages")?)?;
                    anyhow::ensure!(
                        (100..=1_000_000).contains(&o.messages),
                        "--messages must be between 100 and 1000000"
                    );
                }
                "--receive-buffer-kib" => {
                    let kib = value("--receive-buffer-kib")?;
                    anyhow::ensure!(
                        (1025..=65536).contains(&kib),
                        "--receive-buffer-kib must be between 1025 (above one 1 MB message) and 65536"
                    );
                    o.receive_buffer = u32::try_from(kib << 10)?;
                }
                other => anyhow::bail!(
                    "unknown option {other:?} (options: --no-interleaving, --bulk-every-ms N, --messages N, --receive-buffer-kib N)"
                ),
            }
        }
        Ok(o)
    }
}

async fn run(bulk: bool, o: &Options) -> anyhow::Result<Vec<f64>> {
    let (interleaving, count) = (o.interleaving, o.messages);
    let mut cfg = AssociationConfig::default();
    cfg.transport_mut().interleaving = interleaving;
    cfg.transport_mut().max_message_size = 2 << 20;
    cfg.send_buffer(4 << 20)
        .receive_buffer(o.receive_buffer)
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
        let mut v = Vec::with_capacity(count);
        while v.len() < count {
            let Ok(Ok(m)) = tokio::time::timeout(Duration::from_secs(10), reader.recv()).await
            else {
                break;
            };
            let t0 = u64::from_le_bytes(m.data[..8].try_into().expect("8 bytes"));
            v.push((epoch.elapsed().as_nanos() as u64 - t0) as f64 / 1e6);
        }
        v
    });
    // Set before the run's end aborts the association, so the bulk task's
    // refused send is then not reported as a failure.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if bulk {
        let bulk_sender = a.clone();
        let done = done.clone();
        let every = o.bulk_every;
        tokio::spawn(async move {
            // Back to back: stream 1 always has a 1 MB message in progress
            // (bounded by the send buffer), for the whole run. Paced: one
            // 1 MB message every `every`.
            let start = Instant::now();
            let end = start + Duration::from_millis(10 * count as u64);
            let mut next = start;
            while Instant::now() < end {
                if let Some(every) = every {
                    tokio::time::sleep_until(next.into()).await;
                    next += every;
                }
                let big = vec![7u8; 1 << 20];
                if let Err(e) = bulk_sender.send(1, big, SendOptions::default()).await {
                    if !done.load(std::sync::atomic::Ordering::Relaxed) {
                        eprintln!("bulk message refused: {e}");
                    }
                    break;
                }
            }
        });
    }
    let mut next = Instant::now();
    for _ in 0..count {
        tokio::time::sleep_until(next.into()).await;
        let mut body = vec![0u8; 100];
        body[..8].copy_from_slice(&(epoch.elapsed().as_nanos() as u64).to_le_bytes());
        a.send(0, body, SendOptions::default()).await?;
        next += Duration::from_millis(10);
    }
    let mut v = rtts.await?;
    anyhow::ensure!(
        v.len() == count,
        "only {} of {count} echoes came back",
        v.len()
    );
    let stats = a.stats();
    anyhow::ensure!(
        stats.interleaving == interleaving,
        "interleaving negotiated: {}",
        stats.interleaving
    );
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    a.abort("done");
    v.sort_by(f64::total_cmp);
    Ok(v)
}

fn pct(v: &[f64], q: f64) -> f64 {
    v[((v.len() - 1) as f64 * q).round() as usize]
}

#[tokio::main]
async fn main() -> anyhow::Result<std::process::ExitCode> {
    let o = match Options::parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("interleaving: {e}");
            return Ok(std::process::ExitCode::from(2));
        }
    };
    let interleaving = o.interleaving;
    let alone = run(false, &o).await?;
    let beside = run(true, &o).await?;
    let (p99a, p99b) = (pct(&alone, 0.99), pct(&beside, 0.99));
    let bulk = match o.bulk_every {
        Some(d) => format!("a 1 MB message every {} ms", d.as_millis()),
        None => "1 MB messages back to back".to_string(),
    };
    println!(
        "I-DATA {}, {} messages: stream 0 round trip alone p50 {:.3} p99 {:.3} ms; beside {bulk} on stream 1 p50 {:.3} p99 {:.3} max {:.3} ms",
        if interleaving { "on" } else { "off" },
        o.messages,
        pct(&alone, 0.5),
        p99a,
        pct(&beside, 0.5),
        p99b,
        pct(&beside, 1.0)
    );
    println!(
        "{{\"interleaving\":{interleaving},\"bulk_every_ms\":{},\"messages\":{},\"p99_alone_ms\":{p99a:.3},\"p99_beside_bulk_ms\":{p99b:.3}}}",
        o.bulk_every.map_or(0, |d| d.as_millis()),
        o.messages
    );
    Ok(if !interleaving || p99b <= p99a + 2.0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}
