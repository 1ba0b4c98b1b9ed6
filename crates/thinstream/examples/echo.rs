//! An echo server and a client in one process on loopback: the client sends
//! 1000 messages of varying size over 4 streams, the server sends each one
//! back, the client checks every echo (content, stream, order) and exits 0.
//!
//! ```sh
//! cargo run --release -p thinstream --example echo
//! ```

use std::process::ExitCode;

use thinstream::{AssociationConfig, Endpoint, EndpointConfig, SendOptions};

const MESSAGES: u32 = 1000;
const STREAMS: u16 = 4;

fn payload(i: u32) -> Vec<u8> {
    // 1..=1200 bytes, content tied to the index so a mix-up is caught.
    let len = 1 + (i as usize * 37) % 1200;
    (0..len).map(|k| (i as usize + k) as u8).collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::server())?;
    let addr = server.local_addr();
    let srv = server.clone();
    tokio::spawn(async move {
        while let Some(incoming) = srv.accept().await {
            let Ok(a) = incoming.accept() else { continue };
            tokio::spawn(async move {
                while let Ok(m) = a.recv().await {
                    let opts = SendOptions {
                        unordered: m.unordered,
                        ppid: m.ppid,
                        ..SendOptions::default()
                    };
                    if a.send(m.stream, m.data, opts).await.is_err() {
                        break;
                    }
                }
            });
        }
    });

    let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::client())?;
    let a = client.connect(addr, AssociationConfig::default()).await?;
    println!("connected to {addr}");

    let sender = a.clone();
    let send_task = tokio::spawn(async move {
        for i in 0..MESSAGES {
            let stream = (i % u32::from(STREAMS)) as u16;
            sender
                .send(stream, payload(i), SendOptions::default())
                .await?;
        }
        anyhow::Ok(())
    });

    // Within a stream, echoes come back in order.
    let mut next = [0u32; STREAMS as usize];
    for s in 0..STREAMS {
        next[s as usize] = u32::from(s);
    }
    let mut bad = 0;
    for _ in 0..MESSAGES {
        let m = tokio::time::timeout(std::time::Duration::from_secs(10), a.recv()).await??;
        let s = m.stream as usize;
        let i = next[s];
        if m.data[..] != payload(i)[..] {
            eprintln!(
                "echo {i} on stream {s}: wrong content ({} bytes)",
                m.data.len()
            );
            bad += 1;
        }
        next[s] += u32::from(STREAMS);
    }
    send_task.await??;
    let stats = a.stats();
    a.close().await;
    println!(
        "{MESSAGES} messages echoed, {bad} wrong; srtt {:?} ms, {} retransmissions",
        stats.srtt_ms,
        stats.retransmitted_chunks()
    );
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
