//! Partial reliability (RFC 3758 timed reliability) over a lossy path.
//!
//! A game client sends a position update every 20 ms on stream 1, each
//! useless after 100 ms (`SendOptions::lifetime`), and a chat line every
//! 200 ms on stream 0, fully reliable. Between client and server sits a
//! small UDP relay in this process that drops 10% of the datagrams each way
//! (a seeded generator: the same run every time). The association uses
//! the `thin` preset (the documents' thin-stream mechanisms without
//! redundant bundling): with the production preset's bundling, every
//! following packet carries a copy of a lost update and almost nothing is
//! ever late enough to give up. The sender gives up on
//! updates it could not deliver in time and tells the receiver with
//! FORWARD TSN, so later updates are never held behind a lost one; every
//! chat line still arrives. Exits 0 when all chat lines arrived, some
//! updates were abandoned, and every update was delivered or abandoned.
//! (An update can still arrive after its 100 ms: the lifetime bounds when
//! the sender may transmit it, not when it lands; the count is printed.)
//!
//! ```sh
//! cargo run --release -p thinstream --example partial_reliability
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "an example on real sockets timestamps its messages with the OS clock"
)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use thinstream::{AssociationConfig, Endpoint, EndpointConfig, SendOptions};
use tokio::net::UdpSocket;

const UPDATES: u32 = 250;
const CHAT: u32 = 25;

/// Forwards datagrams between the client (the first sender seen) and
/// `server`, dropping `loss` of them each way.
async fn lossy_relay(sock: UdpSocket, server: SocketAddr, loss: f64) {
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let mut client: Option<SocketAddr> = None;
    let mut buf = vec![0u8; 65_536];
    while let Ok((n, from)) = sock.recv_from(&mut buf).await {
        // xorshift64*: a fixed sequence, so every run drops the same ones.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let r = (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
        let to = if from == server {
            match client {
                Some(c) => c,
                None => continue,
            }
        } else {
            client = Some(from);
            server
        };
        if r >= loss {
            let _ = sock.send_to(&buf[..n], to).await;
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<std::process::ExitCode> {
    let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::server())?;
    let relay = UdpSocket::bind("127.0.0.1:0").await?;
    let relay_addr = relay.local_addr()?;
    tokio::spawn(lossy_relay(relay, server.local_addr(), 0.10));

    let receiver = tokio::spawn(async move {
        let b = server.accept().await.expect("an association").accept()?;
        let (mut chat, mut updates, mut late, mut last_update) = (0u32, 0u32, 0u32, None);
        while let Ok(m) = b.recv().await {
            if m.stream == 0 {
                chat += 1;
                continue;
            }
            // Update: "<index> <send time>", on a clock both ends share
            // (they are in one process).
            let text = String::from_utf8_lossy(&m.data).to_string();
            let mut f = text.split(' ');
            let idx: u32 = f.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            let sent_us: u64 = f.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            if now_us() > sent_us + 100_000 {
                late += 1;
            }
            updates += 1;
            last_update = Some(idx);
        }
        anyhow::Ok((chat, updates, late, last_update))
    });

    let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::client())?;
    let a = client
        .connect(relay_addr, AssociationConfig::preset("thin")?)
        .await?;
    let update = SendOptions {
        unordered: true,
        lifetime: Some(Duration::from_millis(100)),
        ..SendOptions::default()
    };
    for i in 0..UPDATES {
        a.send(1, format!("{i} {}", now_us()), update).await?;
        if i % 10 == 0 {
            a.send(0, format!("chat line {}", i / 10), SendOptions::default())
                .await?;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let the last chat lines get through (a retransmission may need a
    // few timeouts), then end.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = a.stats();
    a.close().await;
    let (chat, updates, late, last) = receiver.await??;
    println!(
        "chat lines {chat}/{CHAT}; updates delivered {updates}/{UPDATES} (last #{last:?}), late {late}; \
         abandoned by the sender {}, FORWARD TSNs {}, retransmissions {}",
        stats.abandoned_messages,
        stats.forward_tsns_sent,
        stats.retransmitted_chunks()
    );
    let ok = chat == CHAT
        && stats.abandoned_messages > 0
        && u64::from(updates) + stats.abandoned_messages >= u64::from(UPDATES);
    Ok(if ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

/// Microseconds on a process-wide monotonic clock.
fn now_us() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}
