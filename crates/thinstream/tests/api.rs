//! Behaviour of the public API on real loopback sockets.

use std::time::Duration;

use thinstream::{
    AssociationConfig, AssociationError, ConnectError, Endpoint, EndpointConfig, SendError,
    SendOptions,
};
use tokio::time::timeout;

fn v4() -> std::net::SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

async fn pair(
    server_cfg: EndpointConfig,
    client_cfg: AssociationConfig,
) -> (
    Endpoint,
    Endpoint,
    thinstream::Association,
    thinstream::Association,
) {
    let server = Endpoint::bind(v4(), server_cfg).unwrap();
    let client = Endpoint::bind(v4(), EndpointConfig::client()).unwrap();
    let (a, b) = tokio::join!(client.connect(server.local_addr(), client_cfg), async {
        server.accept().await.unwrap().accept().unwrap()
    });
    (server, client, a.unwrap(), b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_arrive_whole_and_in_order_on_ipv4_and_ipv6() {
    for local in ["127.0.0.1:0", "[::1]:0"] {
        let local: std::net::SocketAddr = local.parse().unwrap();
        let server = Endpoint::bind(local, EndpointConfig::server()).unwrap();
        let client = Endpoint::bind(local, EndpointConfig::client()).unwrap();
        let (a, b) = tokio::join!(
            client.connect(server.local_addr(), AssociationConfig::default()),
            async { server.accept().await.unwrap().accept().unwrap() }
        );
        let a = a.unwrap();
        assert_eq!(a.remote_addr(), Some(server.local_addr()));
        for i in 0..300u32 {
            let body = vec![i as u8; 1 + (i as usize * 13) % 3000];
            a.send((i % 3) as u16, body, SendOptions::default())
                .await
                .unwrap();
        }
        let mut next = [0u32, 1, 2];
        for _ in 0..300 {
            let m = timeout(Duration::from_secs(5), b.recv())
                .await
                .unwrap()
                .unwrap();
            let s = m.stream as usize;
            let i = next[s];
            assert_eq!(m.data.len(), 1 + (i as usize * 13) % 3000, "{local}");
            assert!(m.data.iter().all(|&x| x == i as u8));
            assert!(!m.unordered);
            next[s] += 3;
        }
        assert_eq!(a.close().await, AssociationError::Closed);
        // The peer reads the end of the association after its messages.
        assert_eq!(
            timeout(Duration::from_secs(5), b.recv()).await.unwrap(),
            Err(AssociationError::Closed)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_waits_while_the_peer_does_not_read_then_everything_arrives() {
    let mut server_assoc = AssociationConfig::default();
    server_assoc.receive_buffer(16 * 1024).recv_queue(4 * 1024);
    let mut server_cfg = EndpointConfig::server();
    server_cfg.association(server_assoc);
    let mut client_cfg = AssociationConfig::default();
    client_cfg.send_buffer(16 * 1024);
    let (_s, _c, a, b) = pair(server_cfg, client_cfg).await;

    let sender = a.clone();
    let task = tokio::spawn(async move {
        for i in 0..200u32 {
            sender
                .send(0, i.to_be_bytes().repeat(250), SendOptions::default())
                .await?;
        }
        Ok::<_, SendError>(())
    });
    // 200 kB cannot fit in 16 kB + 16 kB + 4 kB of buffers: the sender waits.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!task.is_finished(), "send must wait for buffer space");
    assert!(a.stats().buffered_send_bytes > 0);
    for i in 0..200u32 {
        let m = timeout(Duration::from_secs(10), b.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&m.data[..4], &i.to_be_bytes());
    }
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_association_is_aborted_with_the_reason() {
    let server = Endpoint::bind(v4(), EndpointConfig::server()).unwrap();
    let client = Endpoint::bind(v4(), EndpointConfig::client()).unwrap();
    let peer = server.local_addr();
    let srv = tokio::spawn(async move {
        server.accept().await.unwrap().refuse("no room");
        server
    });
    let a = client
        .connect(peer, AssociationConfig::default())
        .await
        .unwrap();
    let why = timeout(Duration::from_secs(5), a.closed()).await.unwrap();
    match why {
        AssociationError::PeerAborted(r) => assert!(r.contains("no room"), "{r}"),
        other => panic!("expected an abort from the peer, got {other:?}"),
    }
    let _server = srv.await.unwrap();
    assert!(matches!(
        a.send(0, b"x", SendOptions::default()).await,
        Err(SendError::Closed(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_survive_the_end_of_the_association_and_serialise() {
    let (_s, _c, a, b) = pair(EndpointConfig::server(), AssociationConfig::default()).await;
    for _ in 0..50 {
        a.send(0, [7u8; 100], SendOptions::default()).await.unwrap();
    }
    for _ in 0..50 {
        b.recv().await.unwrap();
    }
    a.close().await;
    let s = a.stats();
    assert_eq!(s.messages_sent, 50);
    assert!(s.data_chunks_new >= 50);
    assert!(s.packets_sent > 0 && s.packets_received > 0);
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["messages_sent"], 50);
    assert!(json["retransmissions"]["timeout"].is_u64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_nobody_fails_with_the_reason() {
    // A bound socket that never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let client = Endpoint::bind(v4(), EndpointConfig::client()).unwrap();
    let mut cfg = AssociationConfig::default();
    cfg.transport_mut().rto_initial = thinstream::trace::Duration::from_millis(50);
    cfg.transport_mut().max_init_retransmits = 2;
    let r = timeout(
        Duration::from_secs(10),
        client.connect(silent.local_addr().unwrap(), cfg),
    )
    .await
    .unwrap();
    match r {
        Err(ConnectError::Setup(AssociationError::TimedOut(why))) => {
            assert!(why.contains("Max.Init.Retransmits"), "{why}")
        }
        other => panic!("expected a setup time-out, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_without_queueing() {
    let (_s, _c, a, _b) = pair(EndpointConfig::server(), AssociationConfig::default()).await;
    assert_eq!(
        a.send(0, b"", SendOptions::default()).await,
        Err(SendError::Empty)
    );
    let streams = a.outbound_streams();
    assert!(matches!(
        a.send(streams, b"x", SendOptions::default()).await,
        Err(SendError::InvalidStream { .. })
    ));
    assert_eq!(a.stats().messages_sent, 0);
}

/// A receiver application that reads nothing for a while keeps its
/// association (RFC 9260 §6.1 A: window probes answered by SACKs do not
/// count toward Association.Max.Retrans). The sender's limits are lowered
/// (3 retransmissions, RTO at most 1 s) so that counting the probes would
/// kill the association within about 5 s; the reader stalls `STALL`.
/// `THINSTREAM_STALL_SECS=600 cargo test --release -p thinstream --test api
/// stalled` runs the ten-minute case of the [recovery] acceptance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_reader_keeps_its_association() {
    let stall = Duration::from_secs(
        std::env::var("THINSTREAM_STALL_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(12),
    );
    let mut server_assoc = AssociationConfig::default();
    server_assoc.receive_buffer(4096).recv_queue(1);
    let mut server_cfg = EndpointConfig::server();
    server_cfg.association(server_assoc);
    let mut client_cfg = AssociationConfig::default();
    client_cfg.transport_mut().association_max_retrans = 3;
    client_cfg.transport_mut().rto_max = thinstream::trace::Duration::from_secs(1);
    let (_s, _c, a, b) = pair(server_cfg, client_cfg).await;
    let sender = a.clone();
    let task = tokio::spawn(async move {
        for i in 0..40u32 {
            sender
                .send(0, i.to_be_bytes().repeat(100), SendOptions::default())
                .await?;
        }
        Ok::<_, SendError>(())
    });
    tokio::time::sleep(stall).await;
    assert_eq!(
        a.close_reason(),
        None,
        "the association died while the reader stalled"
    );
    let probes = a.stats().t3_expiries;
    assert!(
        probes >= 3,
        "the sender probed the closed window ({probes} expiries)"
    );
    for i in 0..40u32 {
        let m = timeout(Duration::from_secs(20), b.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&m.data[..4], &i.to_be_bytes());
    }
    task.await.unwrap().unwrap();
    assert_eq!(a.close().await, AssociationError::Closed);
}

/// A sender waiting for buffer space must not depend on its own
/// application reading: messages the application has not taken yet hold
/// back the association's other events in the core, `Writable` included.
/// (Found against pion: `listen --echo` blocked in `send` while pion kept
/// sending, closed its window and never woke.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_wakes_while_the_application_does_not_read() {
    let mut server_assoc = AssociationConfig::default();
    server_assoc.send_buffer(8 * 1024).recv_queue(1024);
    let mut server_cfg = EndpointConfig::server();
    server_cfg.association(server_assoc);
    let (_s, _c, a, b) = pair(server_cfg, AssociationConfig::default()).await;
    // Fill b's receive queue: b never reads until the end.
    for i in 0..32u32 {
        a.send(0, i.to_be_bytes().repeat(256), SendOptions::default())
            .await
            .unwrap();
    }
    let reader = a.clone();
    let read = tokio::spawn(async move {
        for i in 0..200u32 {
            let m = reader.recv().await?;
            assert_eq!(&m.data[..4], &i.to_be_bytes());
        }
        Ok::<_, AssociationError>(())
    });
    // 200 KB through an 8 KiB send buffer, b not reading.
    let sends = async {
        for i in 0..200u32 {
            b.send(1, i.to_be_bytes().repeat(250), SendOptions::default())
                .await
                .unwrap();
        }
    };
    timeout(Duration::from_secs(10), sends)
        .await
        .expect("b's send never woke: its Writable waits behind unread messages");
    timeout(Duration::from_secs(10), read)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    for i in 0..32u32 {
        let m = timeout(Duration::from_secs(5), b.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&m.data[..4], &i.to_be_bytes());
    }
    assert_eq!(a.close().await, AssociationError::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_associations_from_one_endpoint_to_one_peer() {
    let server = Endpoint::bind(v4(), EndpointConfig::server()).unwrap();
    let client = Endpoint::bind(v4(), EndpointConfig::client()).unwrap();
    let peer = server.local_addr();
    let srv = tokio::spawn(async move {
        let mut got = Vec::new();
        for _ in 0..5 {
            let a = server.accept().await.unwrap().accept().unwrap();
            got.push(a);
        }
        let mut ports = Vec::new();
        for a in &got {
            let m = timeout(Duration::from_secs(5), a.recv())
                .await
                .unwrap()
                .unwrap();
            ports.push(u16::from_be_bytes([m.data[0], m.data[1]]));
        }
        ports.sort();
        // The server's associations are returned, not dropped: dropping
        // them would close the associations while the client checks below
        // that the same ports are still taken.
        (ports, got)
    });
    let mut assocs = Vec::new();
    for i in 0..5u16 {
        let mut cfg = AssociationConfig::default();
        cfg.sctp_ports(20_000 + i, 5000);
        assocs.push(client.connect(peer, cfg));
    }
    let mut up = Vec::new();
    for (i, c) in assocs.into_iter().enumerate() {
        let a = timeout(Duration::from_secs(5), c).await.unwrap().unwrap();
        a.send(0, (20_000 + i as u16).to_be_bytes(), SendOptions::default())
            .await
            .unwrap();
        up.push(a);
    }
    let (ports, _server_side) = srv.await.unwrap();
    assert_eq!(ports, vec![20_000, 20_001, 20_002, 20_003, 20_004]);
    // The same ports again is the same association: refused.
    let mut dup = AssociationConfig::default();
    dup.sctp_ports(20_000, 5000);
    assert!(matches!(
        client.connect(peer, dup).await,
        Err(ConnectError::AlreadyConnected { .. })
    ));
}

/// The default packet size follows the loopback route (larger packets,
/// fewer of them); a fixed size is honoured; large messages arrive whole
/// either way, over IPv4 and IPv6.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packet_size_follows_the_loopback_route_unless_fixed() {
    use thinstream::{PathMtu, LOOPBACK_PMTU_CAP};
    for local in ["127.0.0.1:0", "[::1]:0"] {
        let local: std::net::SocketAddr = local.parse().unwrap();
        let mut packets = Vec::new();
        for rule in [PathMtu::Auto, PathMtu::Fixed(1200)] {
            let server = Endpoint::bind(local, EndpointConfig::server()).unwrap();
            let client = Endpoint::bind(local, EndpointConfig::client()).unwrap();
            let mut cfg = AssociationConfig::default();
            cfg.pmtu(rule);
            let (a, b) = tokio::join!(client.connect(server.local_addr(), cfg), async {
                server.accept().await.unwrap().accept().unwrap()
            });
            let a = a.unwrap();
            // Probing takes a round trip or two.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while rule == PathMtu::Auto
                && (a.stats().pmtu <= 1472 || b.stats().pmtu <= 1472)
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let (sent, seen) = (a.stats().pmtu, b.stats().pmtu);
            match rule {
                PathMtu::Fixed(n) => assert_eq!(sent, n, "{local}"),
                PathMtu::Auto => {
                    // The loopback MTU is 64 KiB unless someone lowered it.
                    assert!(sent > 1472 && sent <= LOOPBACK_PMTU_CAP, "{local}: {sent}");
                    // The server is bound to loopback: the same rule.
                    assert_eq!(seen, sent, "{local}");
                }
            }
            for i in 0..20u8 {
                a.send(0, vec![i; 40_000], SendOptions::default())
                    .await
                    .unwrap();
            }
            for i in 0..20u8 {
                let m = timeout(Duration::from_secs(5), b.recv())
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(m.data.len(), 40_000);
                assert!(m.data.iter().all(|&x| x == i), "{local} {rule:?}");
            }
            packets.push(a.stats().packets_sent);
            assert_eq!(a.close().await, AssociationError::Closed);
        }
        // 800 kB in 16 KiB packets against 1200 B packets.
        assert!(
            packets[0] * 4 < packets[1],
            "{local}: {} packets with the route's size, {} with 1200 B",
            packets[0],
            packets[1]
        );
    }
}

/// A client association to a server whose task echoes every message back;
/// the endpoints are returned so they live as long as the caller needs.
async fn echo_pair(
    server_cfg: EndpointConfig,
    client_cfg: EndpointConfig,
) -> (
    thinstream::Association,
    tokio::task::JoinHandle<()>,
    (Endpoint, Endpoint),
) {
    let server = Endpoint::bind(v4(), server_cfg).unwrap();
    let client = Endpoint::bind(v4(), client_cfg).unwrap();
    let (a, b) = tokio::join!(
        client.connect(server.local_addr(), AssociationConfig::default()),
        async { server.accept().await.unwrap().accept().unwrap() }
    );
    let echo = tokio::spawn(async move {
        while let Ok(m) = b.recv().await {
            if b.send(m.stream, m.data, SendOptions::default())
                .await
                .is_err()
            {
                break;
            }
        }
    });
    (a.unwrap(), echo, (server, client))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_polling_endpoints_answer_each_other() {
    // Both ends poll after every send; each answer must still come from the
    // other end's task (a poller that kept the CPU would starve it).
    let mut server_cfg = EndpointConfig::server();
    server_cfg.busy_poll(Some(Duration::from_micros(200)));
    let mut client_cfg = EndpointConfig::client();
    client_cfg.busy_poll(Some(Duration::from_micros(200)));
    let (a, echo, _endpoints) = echo_pair(server_cfg, client_cfg).await;
    for i in 0..200u32 {
        a.send(0, i.to_be_bytes().to_vec(), SendOptions::default())
            .await
            .unwrap();
        let m = timeout(Duration::from_secs(5), a.recv())
            .await
            .expect("an answer within 5 s")
            .unwrap();
        assert_eq!(&m.data[..], &i.to_be_bytes()[..]);
    }
    assert_eq!(a.close().await, AssociationError::Closed);
    timeout(Duration::from_secs(5), echo)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_busy_poll_window_holds_back_no_other_task() {
    // Both endpoints and both applications share one thread, and the
    // client polls for 2 s after every send: far longer than a round trip.
    // The other tasks must still run while it polls (the server answering,
    // the client's application sending its next message), so 20 round
    // trips take a small part of one window, not a window each.
    let mut client_cfg = EndpointConfig::client();
    client_cfg.busy_poll(Some(Duration::from_secs(2)));
    let (a, echo, _endpoints) = echo_pair(EndpointConfig::server(), client_cfg).await;
    let start = tokio::time::Instant::now();
    for i in 0..20u32 {
        a.send(0, i.to_be_bytes().to_vec(), SendOptions::default())
            .await
            .unwrap();
        let m = timeout(Duration::from_secs(10), a.recv())
            .await
            .expect("an answer within 10 s")
            .unwrap();
        assert_eq!(&m.data[..], &i.to_be_bytes()[..]);
    }
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "20 round trips took {took:?} with a 2-s busy-poll window"
    );
    assert_eq!(a.close().await, AssociationError::Closed);
    timeout(Duration::from_secs(5), echo)
        .await
        .unwrap()
        .unwrap();
}
