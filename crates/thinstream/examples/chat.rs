//! A thin-stream chat: one server, three clients, all in this process on
//! loopback. Every client sends a short line every few hundred
//! milliseconds; the server relays each line to the other clients. Each
//! line carries its send time, so every client reports how long lines took
//! to reach it. Exits 0 when every client received every other client's
//! lines.
//!
//! ```sh
//! cargo run --release -p thinstream --example chat
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "an example on real sockets timestamps its lines with the OS clock"
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use thinstream::{Association, AssociationConfig, Endpoint, EndpointConfig, SendOptions};

const CLIENTS: usize = 3;
const LINES: usize = 15;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<std::process::ExitCode> {
    let epoch = Instant::now();
    let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::server())?;
    let addr = server.local_addr();

    // The server: every accepted association joins the room; each line is
    // relayed to everybody else.
    let room: Arc<Mutex<Vec<Association>>> = Arc::default();
    let srv = server.clone();
    let members = room.clone();
    tokio::spawn(async move {
        while let Some(incoming) = srv.accept().await {
            let Ok(a) = incoming.accept() else { continue };
            members.lock().expect("room lock").push(a.clone());
            let members = members.clone();
            tokio::spawn(async move {
                while let Ok(m) = a.recv().await {
                    let others: Vec<Association> = members
                        .lock()
                        .expect("room lock")
                        .iter()
                        .filter(|o| o.remote_addr() != a.remote_addr())
                        .cloned()
                        .collect();
                    for o in others {
                        let _ = o.send(0, m.data.clone(), SendOptions::default()).await;
                    }
                }
            });
        }
    });

    // The clients: one endpoint each, like separate programs.
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let ep = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::client())?;
        let a = ep.connect(addr, AssociationConfig::default()).await?;
        tasks.push(tokio::spawn(async move {
            let _keep = ep;
            let reader = a.clone();
            let expected = LINES * (CLIENTS - 1);
            let read = tokio::spawn(async move {
                let mut delays = Vec::new();
                while delays.len() < expected {
                    let Ok(Ok(m)) =
                        tokio::time::timeout(Duration::from_secs(5), reader.recv()).await
                    else {
                        break;
                    };
                    // "<sender> <line> <micros since epoch>"
                    let text = String::from_utf8_lossy(&m.data).to_string();
                    let sent: u64 = text
                        .rsplit(' ')
                        .next()
                        .and_then(|t| t.parse().ok())
                        .unwrap_or(0);
                    let now = epoch.elapsed().as_micros() as u64;
                    delays.push(now.saturating_sub(sent));
                }
                delays
            });
            // Let every client join before talking.
            tokio::time::sleep(Duration::from_millis(200)).await;
            for line in 0..LINES {
                let text = format!("client{c} line{line} {}", epoch.elapsed().as_micros());
                a.send(0, text, SendOptions::default()).await?;
                tokio::time::sleep(Duration::from_millis(150 + 50 * c as u64)).await;
            }
            let delays = read.await?;
            let stats = a.stats();
            a.close().await;
            anyhow::Ok((c, delays, stats.thin, stats.retransmitted_chunks()))
        }));
    }
    let mut ok = true;
    for t in tasks {
        let (c, mut delays, thin, retx) = t.await??;
        delays.sort_unstable();
        let got = delays.len();
        let want = LINES * (CLIENTS - 1);
        ok &= got == want;
        let p = |q: f64| {
            delays
                .get(((got as f64 - 1.0) * q) as usize)
                .copied()
                .unwrap_or(0)
        };
        println!(
            "client{c}: {got}/{want} lines, delay p50 {} us, max {} us; classified thin: {thin}; retransmissions {retx}",
            p(0.5),
            p(1.0)
        );
    }
    Ok(if ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}
