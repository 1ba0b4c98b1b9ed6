//! Association setup and teardown over the virtual link.

use thinstream_base::Duration;
use thinstream_proto::testkit::{Pair, Side};
use thinstream_proto::State;

// The four-way handshake completes in two round trips.
#[test]
fn handshake_completes() {
    let mut p = Pair::default_traced(1);
    p.connect();
    assert_eq!(p.client.state(), State::Established);
    assert_eq!(p.server.state(), State::Established);
    // INIT at 0, INIT ACK at 50 ms, COOKIE ECHO at 100, COOKIE ACK at 150,
    // which reaches the client at 200 ms.
    assert_eq!(p.now, thinstream_base::Instant::from_millis(200));
    assert_eq!(p.client.outbound_streams(), 10);
    assert_eq!(p.server.inbound_streams(), 10);
    assert_eq!(p.client.peer_tag(), p.server.local_tag());
    assert_eq!(p.server.peer_tag(), p.client.local_tag());
}

// A message goes through and is delivered once.
#[test]
fn one_message() {
    let mut p = Pair::default_traced(2);
    p.connect();
    p.send(Side::Client, 0, false, b"hello").unwrap();
    p.drive_for(Duration::from_secs(1));
    assert_eq!(
        p.take_received(Side::Server),
        vec![(0, false, b"hello".to_vec())]
    );
}

use thinstream_base::{Instant, Seed};
use thinstream_proto::testkit::{client_addr, server_addr};
use thinstream_proto::wire::{chunk_type, Chunk};
use thinstream_proto::{Association, Config};

fn established_at(p: &Pair, side: Side) -> Option<Instant> {
    let trace = match side {
        Side::Client => &p.client_trace,
        Side::Server => &p.server_trace,
    };
    trace.iter().find_map(|r| match r {
        thinstream_base::trace::Record::State { time, state } if state == "established" => {
            Some(*time)
        }
        _ => None,
    })
}

fn lose_once(kind: u8, from: Side) -> Pair {
    let mut p = Pair::default_traced(3);
    p.drop_chunk(from, kind, 1);
    p.connect();
    p
}

// Losing the INIT: T1-init retransmits it after RTO.Initial (1 s).
#[test]
fn lost_init_is_retransmitted() {
    let p = lose_once(chunk_type::INIT, Side::Client);
    assert_eq!(
        established_at(&p, Side::Client),
        Some(Instant::from_millis(1200))
    );
    assert_eq!(p.client.stats().init_retransmits, 1);
    assert_eq!(
        p.client.rto(),
        Duration::from_secs(2),
        "T1 backed off the RTO"
    );
}

// Losing the INIT ACK: the INIT is retransmitted and answered afresh.
#[test]
fn lost_init_ack_is_recovered() {
    let p = lose_once(chunk_type::INIT_ACK, Side::Server);
    assert_eq!(
        established_at(&p, Side::Client),
        Some(Instant::from_millis(1200))
    );
    assert_eq!(
        established_at(&p, Side::Server),
        Some(Instant::from_millis(1150))
    );
}

// Losing the COOKIE ECHO: T1-cookie retransmits it (started at 100 ms).
#[test]
fn lost_cookie_echo_is_retransmitted() {
    let p = lose_once(chunk_type::COOKIE_ECHO, Side::Client);
    assert_eq!(
        established_at(&p, Side::Server),
        Some(Instant::from_millis(1150))
    );
    assert_eq!(
        established_at(&p, Side::Client),
        Some(Instant::from_millis(1200))
    );
}

// Losing the COOKIE ACK: the server is established, the client's
// retransmitted COOKIE ECHO hits the existing TCB (§5.2.4 D) and is acked.
#[test]
fn lost_cookie_ack_is_recovered() {
    let p = lose_once(chunk_type::COOKIE_ACK, Side::Server);
    assert_eq!(
        established_at(&p, Side::Server),
        Some(Instant::from_millis(150))
    );
    assert_eq!(
        established_at(&p, Side::Client),
        Some(Instant::from_millis(1200))
    );
    let server_established = p
        .server_events
        .iter()
        .filter(|e| **e == thinstream_base::drive::AppEvent::Established)
        .count();
    assert_eq!(
        server_established, 1,
        "a duplicate COOKIE ECHO is not a new association"
    );
}

// With every INIT lost the client gives up after Max.Init.Retransmits.
#[test]
fn init_retransmits_exhausted() {
    let mut p = Pair::default_traced(4);
    p.drop_chunk(Side::Client, chunk_type::INIT, 100);
    p.drive_for(Duration::from_secs(400));
    let err = p
        .closed(Side::Client)
        .expect("client closed")
        .expect("with an error");
    assert!(err.contains("Max.Init.Retransmits"), "{err}");
    assert_eq!(p.client.stats().init_retransmits, 8);
    let inits: Vec<_> = p
        .sent_by(Side::Client, Instant::ZERO)
        .iter()
        .map(|s| s.at.as_secs_f64())
        .collect();
    // 1, 2, 4, ..., capped at RTO.max = 60 s.
    assert_eq!(
        inits,
        vec![0.0, 1.0, 3.0, 7.0, 15.0, 31.0, 63.0, 123.0, 183.0]
    );
}

// Both ends open at once (§5.2.1): one association results.
#[test]
fn simultaneous_open() {
    let c = Config::default().with_trace();
    let a = Association::connect(
        c.clone(),
        Instant::ZERO,
        client_addr(),
        server_addr(),
        Seed(10),
    );
    let b = Association::connect(c, Instant::ZERO, server_addr(), client_addr(), Seed(11));
    let mut p = Pair::from_parts(a, b, Duration::from_millis(50));
    p.connect();
    assert_eq!(p.client.peer_tag(), p.server.local_tag());
    assert_eq!(p.server.peer_tag(), p.client.local_tag());
    p.send(Side::Client, 0, false, b"ping").unwrap();
    p.send(Side::Server, 0, false, b"pong").unwrap();
    p.drive_for(Duration::from_secs(1));
    assert_eq!(
        p.take_received(Side::Server),
        vec![(0, false, b"ping".to_vec())]
    );
    assert_eq!(
        p.take_received(Side::Client),
        vec![(0, false, b"pong".to_vec())]
    );
}

// Graceful shutdown: everything queued is delivered before both ends close.
#[test]
fn graceful_shutdown_delivers_everything_first() {
    let mut p = Pair::default_traced(5);
    p.connect();
    p.drop_chunk(Side::Client, chunk_type::DATA, 1);
    for i in 0..10u8 {
        p.send(Side::Client, 0, false, &[i; 500]).unwrap();
    }
    use thinstream_base::Transport;
    let now = p.now;
    p.client.close(now);
    assert!(p.send(Side::Client, 0, false, b"late").is_err());
    p.drive_for(Duration::from_secs(10));
    assert_eq!(p.take_received(Side::Server).len(), 10);
    assert_eq!(p.closed(Side::Client), Some(None));
    assert_eq!(p.closed(Side::Server), Some(None));
    assert!(p.client.is_closed() && p.server.is_closed());
    let order: Vec<u8> = p
        .sent
        .iter()
        .filter_map(|s| {
            s.packet.chunks.iter().map(|c| c.kind()).find(|k| {
                [
                    chunk_type::SHUTDOWN,
                    chunk_type::SHUTDOWN_ACK,
                    chunk_type::SHUTDOWN_COMPLETE,
                ]
                .contains(k)
            })
        })
        .collect();
    assert_eq!(
        order,
        vec![
            chunk_type::SHUTDOWN,
            chunk_type::SHUTDOWN_ACK,
            chunk_type::SHUTDOWN_COMPLETE
        ]
    );
}

// Losing the SHUTDOWN COMPLETE: the retransmitted SHUTDOWN ACK reaches a
// closed association, which answers with a T-bit SHUTDOWN COMPLETE (§8.4).
#[test]
fn lost_shutdown_complete() {
    let mut p = Pair::default_traced(6);
    p.connect();
    p.drop_chunk(Side::Client, chunk_type::SHUTDOWN_COMPLETE, 1);
    use thinstream_base::Transport;
    let now = p.now;
    p.client.close(now);
    p.drive_for(Duration::from_secs(5));
    assert_eq!(p.closed(Side::Client), Some(None));
    assert_eq!(p.closed(Side::Server), Some(None));
}

// ABORT closes both ends at once with an error on the peer.
#[test]
fn abort() {
    let mut p = Pair::default_traced(7);
    p.connect();
    p.send(Side::Client, 0, false, b"data").unwrap();
    let now = p.now;
    p.client.abort(now, "bye");
    p.drive_for(Duration::from_secs(1));
    assert_eq!(
        p.closed(Side::Client),
        Some(Some("aborted locally: bye".into()))
    );
    let e = p.closed(Side::Server).unwrap().unwrap();
    assert!(
        e.contains("aborted by peer") && e.contains("User-Initiated Abort"),
        "{e}"
    );
}

// A COOKIE ECHO arriving after Valid.Cookie.Life gets a Stale Cookie error;
// the client retries with a Cookie Preservative and succeeds (§5.2.6).
#[test]
fn stale_cookie_recovery() {
    let mut s = Config::default().with_trace();
    s.valid_cookie_life = Duration::from_millis(50);
    let mut p = Pair::new(
        Config::default().with_trace(),
        s,
        Duration::from_millis(40),
        Seed(8),
    );
    p.connect();
    assert!(p
        .sent
        .iter()
        .any(|x| x.from == Side::Server && x.has(chunk_type::ERROR)));
    let inits = p.sent.iter().filter(|x| x.has(chunk_type::INIT)).count();
    assert_eq!(inits, 2);
}

// The peer restarts (new association from the same address while one
// exists, §5.2.4 A): the server resets its TCB and data flows again.
#[test]
fn peer_restart() {
    let mut p = Pair::default_traced(9);
    p.connect();
    let old_tag = p.server.local_tag();
    let now = p.now;
    p.client = Association::connect(
        Config::default().with_trace(),
        now,
        client_addr(),
        server_addr(),
        Seed(99),
    );
    p.client_events.clear();
    p.connect();
    assert_ne!(p.server.local_tag(), old_tag);
    assert!(p.server_trace.iter().any(
        |r| matches!(r, thinstream_base::trace::Record::State { state, .. } if state == "restarted")
    ));
    // The server's application learns of the restart, once, and sees no
    // second `Established`.
    use thinstream_base::drive::AppEvent;
    let restarted = p
        .server_events
        .iter()
        .filter(|e| **e == AppEvent::PeerRestarted)
        .count();
    let established = p
        .server_events
        .iter()
        .filter(|e| **e == AppEvent::Established)
        .count();
    assert_eq!((restarted, established), (1, 1), "{:?}", p.server_events);
    assert!(!p.client_events.contains(&AppEvent::PeerRestarted));
    p.send(Side::Client, 0, false, b"after restart").unwrap();
    p.drive_for(Duration::from_secs(1));
    assert_eq!(
        p.take_received(Side::Server),
        vec![(0, false, b"after restart".to_vec())]
    );
}

// §5.2.4 B: our INIT is lost, the peer's INIT reaches us in COOKIE-WAIT; we
// answer with our own tag, the peer's COOKIE ECHO carries our tag and a
// peer tag we did not know yet: the association is set up from it.
#[test]
fn collision_case_b() {
    let c = Config::default().with_trace();
    let a = Association::connect(
        c.clone(),
        Instant::ZERO,
        client_addr(),
        server_addr(),
        Seed(12),
    );
    let b = Association::connect(
        c,
        Instant::from_millis(1),
        server_addr(),
        client_addr(),
        Seed(13),
    );
    let mut p = Pair::from_parts(a, b, Duration::from_millis(50));
    p.drop_chunk(Side::Client, chunk_type::INIT, 1);
    p.connect();
    assert!(
        p.now < Instant::from_millis(1000),
        "no T1 retransmission needed"
    );
    assert_eq!(p.client.peer_tag(), p.server.local_tag());
    assert_eq!(p.server.peer_tag(), p.client.local_tag());
    p.send(Side::Client, 0, false, b"b-case").unwrap();
    p.drive_for(Duration::from_secs(1));
    assert_eq!(
        p.take_received(Side::Server),
        vec![(0, false, b"b-case".to_vec())]
    );
}

// Both ends close at the same time: SHUTDOWNs cross, both end gracefully.
#[test]
fn simultaneous_shutdown() {
    use thinstream_base::Transport;
    let mut p = Pair::default_traced(14);
    p.connect();
    let now = p.now;
    p.client.close(now);
    p.server.close(now);
    p.drive_for(Duration::from_secs(5));
    assert_eq!(p.closed(Side::Client), Some(None));
    assert_eq!(p.closed(Side::Server), Some(None));
}

// Every SHUTDOWN lost: T2-shutdown retransmits with backoff and gives up
// after Association.Max.Retrans.
#[test]
fn shutdown_retransmissions_exhausted() {
    use thinstream_base::Transport;
    let mut c = Config::default().with_trace();
    c.rto_max = Duration::from_secs(2);
    let mut p = Pair::new(c, Config::default(), Duration::from_millis(50), Seed(15));
    p.connect();
    p.drop_chunk(Side::Client, chunk_type::SHUTDOWN, 1000);
    let now = p.now;
    p.client.close(now);
    p.drive_for(Duration::from_secs(60));
    let err = p.closed(Side::Client).unwrap().unwrap();
    assert!(err.contains("shutdown failed"), "{err}");
    let shutdowns = p
        .sent
        .iter()
        .filter(|s| s.has(chunk_type::SHUTDOWN))
        .count();
    assert_eq!(
        shutdowns, 11,
        "first SHUTDOWN + Max.Retrans (10) retransmissions"
    );
}

// Nobody listening: the INIT is answered with ABORT (§8.4 rule 3) and the
// client fails at once instead of retrying for minutes.
#[test]
fn connection_refused() {
    use thinstream_base::Transport;
    let mut p = Pair::default_traced(16);
    p.server.close(Instant::ZERO); // stop listening
    p.server_events.clear();
    p.drive_for(Duration::from_secs(1));
    let err = p.closed(Side::Client).unwrap().unwrap();
    assert!(err.contains("aborted by peer"), "{err}");
    assert_eq!(p.client.stats().init_retransmits, 0);
}

/// The ABORT `side` sent last, if any: (its tag, whether the T bit is set).
fn last_abort(p: &Pair, side: Side) -> Option<(u32, bool)> {
    p.sent
        .iter()
        .rev()
        .filter(|s| s.from == side)
        .find_map(|s| {
            s.packet.chunks.iter().find_map(|c| match c {
                Chunk::Abort(a) => Some((s.packet.verification_tag, a.t_bit)),
                _ => None,
            })
        })
}

// When an association gives up on its peer (§8.1: Association.Max.Retrans
// exceeded by T3 expiries; §8.3 unanswered heartbeats; T1-cookie
// exhausted), it tells the peer with an ABORT carrying the peer's tag, so
// a peer that is alive but cut off in one direction closes too instead of
// waiting for its own timeouts.
#[test]
fn giving_up_sends_abort() {
    let small = Config {
        association_max_retrans: 2,
        max_init_retransmits: 2,
        ..Config::default().with_trace()
    };
    // 1. T3: every DATA packet is lost.
    let mut p = Pair::new(
        small.clone(),
        small.clone(),
        Duration::from_millis(50),
        Seed(41),
    );
    p.connect();
    p.drop_chunk(Side::Client, chunk_type::DATA, 1000);
    p.send(Side::Client, 0, false, b"into the void").unwrap();
    p.drive_for(Duration::from_secs(60));
    let why = p
        .closed(Side::Client)
        .expect("client gave up")
        .expect("an error");
    assert!(why.contains("too many retransmissions"), "{why}");
    assert_eq!(
        last_abort(&p, Side::Client),
        Some((p.server.local_tag(), false))
    );
    let peer = p
        .closed(Side::Server)
        .expect("server closed")
        .expect("an error");
    assert!(peer.contains("aborted by peer"), "{peer}");

    // 2. Heartbeats: the server's packets never arrive.
    let mut p = Pair::new(
        small.clone(),
        small.clone(),
        Duration::from_millis(50),
        Seed(42),
    );
    p.connect();
    let server_tag = p.client.peer_tag();
    p.drop_next(Side::Server, 100_000, |_| true);
    p.drive_for(Duration::from_secs(600));
    let why = p
        .closed(Side::Client)
        .expect("client gave up")
        .expect("an error");
    assert!(why.contains("heartbeats"), "{why}");
    assert_eq!(last_abort(&p, Side::Client), Some((server_tag, false)));
    assert!(p.closed(Side::Server).expect("server closed").is_some());

    // 3. COOKIE-ECHOED: the COOKIE ACKs are lost, the server is established.
    let mut p = Pair::new(small.clone(), small, Duration::from_millis(50), Seed(43));
    p.drop_chunk(Side::Server, chunk_type::COOKIE_ACK, 1000);
    p.drive_for(Duration::from_secs(60));
    let why = p
        .closed(Side::Client)
        .expect("client gave up")
        .expect("an error");
    assert!(why.contains("Max.Init.Retransmits"), "{why}");
    assert!(last_abort(&p, Side::Client).is_some());
    assert!(p.closed(Side::Server).expect("server closed").is_some());
}
