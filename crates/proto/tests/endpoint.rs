//! A server `Endpoint` with several peers on a virtual network.

mod net;

use std::collections::BTreeMap;

use net::{client_addr, crafted, server_addr, Net};

use thinstream_base::drive::{AppEvent, Outgoing, Transport};
use thinstream_base::{Duration, Instant, Seed};
use thinstream_proto::wire::{Chunk, Packet};
use thinstream_proto::{AssociationId, Config, Endpoint};

fn msg(payload: &[u8]) -> Outgoing<'_> {
    Outgoing {
        stream: 0,
        unordered: false,
        payload,
    }
}

// Three peers connect to one endpoint, exchange messages, are told apart.
#[test]
fn serves_several_peers() {
    let mut net = Net::new(3);
    net.drive_for(Duration::from_millis(100));
    assert!(net.clients.iter().all(|c| c.is_established()));
    let ids: Vec<AssociationId> = net
        .server_events
        .iter()
        .filter(|(_, e)| *e == AppEvent::Established)
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(net.server.associations().count(), 3);
    for (i, c) in net.clients.iter_mut().enumerate() {
        for k in 0..5 {
            c.send(net.now, msg(format!("client {i} message {k}").as_bytes()))
                .unwrap();
        }
    }
    net.drive_for(Duration::from_secs(1));
    let mut by_id: BTreeMap<AssociationId, Vec<String>> = BTreeMap::new();
    for (id, e) in &net.server_events {
        if let AppEvent::Received { payload, .. } = e {
            by_id
                .entry(*id)
                .or_default()
                .push(String::from_utf8(payload.to_vec()).unwrap());
        }
    }
    assert_eq!(by_id.len(), 3);
    for (id, msgs) in &by_id {
        let peer = net.server.association(*id).unwrap().remote_addr().unwrap();
        let i = net
            .clients
            .iter()
            .position(|c| c.local_addr() == peer)
            .unwrap();
        let want: Vec<String> = (0..5).map(|k| format!("client {i} message {k}")).collect();
        assert_eq!(msgs, &want);
        let now = net.now;
        net.server
            .send(now, *id, msg(format!("reply to {i}").as_bytes()))
            .unwrap();
    }
    net.drive_for(Duration::from_secs(1));
    for (i, ev) in net.client_events.iter().enumerate() {
        let got: Vec<_> = ev
            .iter()
            .filter_map(|e| match e {
                AppEvent::Received { payload, .. } => Some(payload.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(got, vec![format!("reply to {i}").into_bytes()]);
    }
}

// An INIT creates no state at the endpoint (§5.1.3); only a valid COOKIE
// ECHO does.
#[test]
fn init_creates_no_state() {
    let mut net = Net::new(1);
    let init = net.clients[0].poll_transmit(Instant::ZERO).unwrap();
    net.server.handle_datagram(Instant::ZERO, init);
    let ack = net.server.poll_transmit(Instant::ZERO).expect("INIT ACK");
    let p = Packet::parse(&ack.payload).unwrap();
    assert!(matches!(p.chunks[0], Chunk::InitAck(_)));
    assert_eq!(net.server.associations().count(), 0);
    net.clients[0].handle_datagram(Instant::from_millis(10), ack);
    let echo = net.clients[0]
        .poll_transmit(Instant::from_millis(10))
        .unwrap();
    // A tampered COOKIE ECHO creates nothing either.
    let mut bad = echo.clone();
    let n = bad.payload.len();
    bad.payload[n - 5] ^= 0xFF;
    let mut parsed = Packet::parse_unchecked(&bad.payload).unwrap();
    parsed.src_port = 5000;
    let mut bytes = Vec::new();
    parsed.emit(&mut bytes);
    bad.payload = bytes;
    net.server.handle_datagram(Instant::from_millis(20), bad);
    assert_eq!(net.server.associations().count(), 0);
    net.server.handle_datagram(Instant::from_millis(20), echo);
    assert_eq!(net.server.associations().count(), 1);
}

// A peer's graceful close removes the association once its events are read.
#[test]
fn closed_associations_are_reaped() {
    let mut net = Net::new(2);
    net.drive_for(Duration::from_millis(100));
    let now = net.now;
    net.clients[0].close(now);
    net.drive_for(Duration::from_secs(1));
    assert!(net.clients[0].is_closed());
    assert!(net
        .server_events
        .iter()
        .any(|(_, e)| *e == AppEvent::Closed { error: None }));
    net.drive_for(Duration::from_millis(1));
    assert_eq!(net.server.associations().count(), 1);
}

// An endpoint can also open associations (client role) to another endpoint.
#[test]
fn endpoint_to_endpoint() {
    let cfg = Config::default();
    let mut a = Endpoint::new(cfg.clone(), client_addr(9), Seed(7), false);
    let mut b = Endpoint::new(cfg, server_addr(), Seed(8), true);
    let id = a.connect(Instant::ZERO, server_addr());
    let mut now = Instant::ZERO;
    let mut got = Vec::new();
    for step in 0..50 {
        now = Instant::from_millis(step * 10);
        a.handle_timeout(now);
        b.handle_timeout(now);
        while let Some(d) = a.poll_transmit(now) {
            b.handle_datagram(now, d);
        }
        while let Some(d) = b.poll_transmit(now) {
            a.handle_datagram(now, d);
        }
        while let Some((i, e)) = a.poll_event() {
            if i == id && e == AppEvent::Established {
                a.send(now, id, msg(b"via endpoints")).unwrap();
            }
        }
        while let Some((_, e)) = b.poll_event() {
            got.push(e);
        }
    }
    let _ = now;
    assert!(got.contains(&AppEvent::Received {
        stream: 0,
        unordered: false,
        ppid: 0,
        payload: bytes::Bytes::from_static(b"via endpoints")
    }));
}

// A message in one chunk reaches the application as the bytes of the
// datagram it came in (no copy on the way through the association): its
// payload lies inside the datagram's buffer.
#[test]
fn one_chunk_message_shares_the_datagram() {
    const MESSAGE: &[u8] = b"shared, not copied";
    let cfg = Config::default();
    let mut a = Endpoint::new(cfg.clone(), client_addr(9), Seed(7), false);
    let mut b = Endpoint::new(cfg, server_addr(), Seed(8), true);
    let id = a.connect(Instant::ZERO, server_addr());
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut delivered = Vec::new();
    for step in 0..50 {
        let now = Instant::from_millis(step * 10);
        a.handle_timeout(now);
        b.handle_timeout(now);
        while let Some(d) = a.poll_transmit(now) {
            // The datagram that carries the message (alive until the
            // message is dropped if the bytes are shared; a copy cannot lie
            // inside memory that is still in use).
            if d.payload.windows(MESSAGE.len()).any(|w| w == MESSAGE) {
                let start = d.payload.as_ptr() as usize;
                spans.push((start, start + d.payload.len()));
            }
            b.handle_datagram(now, d);
        }
        while let Some(d) = b.poll_transmit(now) {
            a.handle_datagram(now, d);
        }
        while let Some((i, e)) = a.poll_event() {
            if i == id && e == AppEvent::Established {
                a.send(now, id, msg(MESSAGE)).unwrap();
            }
        }
        while let Some((_, e)) = b.poll_event() {
            if let AppEvent::Received { payload, .. } = e {
                delivered.push(payload);
            }
        }
    }
    assert_eq!(spans.len(), 1, "the message went out once");
    assert_eq!(delivered.len(), 1, "one message sent, one delivered");
    let p = &delivered[0];
    assert_eq!(&p[..], MESSAGE);
    let at = p.as_ptr() as usize;
    assert!(
        spans.iter().any(|&(s, e)| s <= at && at + p.len() <= e),
        "the delivered bytes are a copy, not part of a received datagram"
    );
}

/// A packet built by hand from client `i`'s address to the server.

// RFC 9260 §8.5 with §1.5.2: an association is named by both addresses and
// both ports. A packet from the peer's address carrying the association's
// verification tag, but from another SCTP source port (or to another local
// port), must not reach it: here an ABORT that would otherwise close it and
// DATA that would otherwise be delivered.
#[test]
fn tag_match_with_other_ports_does_not_touch_the_association() {
    use thinstream_proto::wire::{AbortChunk, DataChunk, Ssn, Tsn};
    let mut net = Net::new(1);
    net.drive_for(Duration::from_millis(100));
    let id = net.server.associations().next().unwrap();
    let a = net.server.association(id).unwrap();
    let (tag, port, local_port) = (a.local_tag(), a.peer_port(), net.server.config().local_port);
    let next_tsn = Tsn(0); // any TSN: the packet must not be looked at
    let data = Chunk::Data(DataChunk {
        tsn: next_tsn,
        stream: 0,
        ssn: Ssn(0),
        ppid: 0,
        unordered: true,
        beginning: true,
        ending: true,
        immediate: false,
        payload: bytes::Bytes::from_static(b"spoofed"),
    });
    let abort = Chunk::Abort(AbortChunk {
        t_bit: false,
        causes: vec![],
    });
    let now = net.now;
    for (src_port, dst_port) in [
        (port.wrapping_add(1), local_port),
        (port, local_port.wrapping_add(1)),
    ] {
        for chunk in [data.clone(), abort.clone()] {
            let p = Packet {
                src_port,
                dst_port,
                verification_tag: tag,
                chunks: vec![chunk],
            };
            net.server.handle_datagram(now, crafted(client_addr(0), &p));
        }
    }
    net.drive_for(Duration::from_millis(100));
    let a = net
        .server
        .association(id)
        .expect("the association is still there");
    assert!(a.is_established());
    assert_eq!(a.stats().data_chunks_received, 0);
    assert!(!net
        .server_events
        .iter()
        .any(|(_, e)| matches!(e, AppEvent::Closed { .. } | AppEvent::Received { .. })));
    // The same packets from the right ports do reach it (the ABORT closes it).
    let p = Packet {
        src_port: port,
        dst_port: local_port,
        verification_tag: tag,
        chunks: vec![abort],
    };
    let now = net.now;
    net.server.handle_datagram(now, crafted(client_addr(0), &p));
    net.flush();
    assert!(net
        .server_events
        .iter()
        .any(|(i, e)| *i == id && matches!(e, AppEvent::Closed { error: Some(_) })));
}

// The single-peer `Association` applies the same rule.
#[test]
fn association_ignores_its_tag_from_another_port() {
    use thinstream_proto::testkit::{server_addr as srv, Pair, Side};
    use thinstream_proto::wire::AbortChunk;
    let mut p = Pair::default_traced(3);
    p.connect();
    let tag = p.client.local_tag();
    let abort = Packet {
        src_port: p.client.peer_port().wrapping_add(7),
        dst_port: p.client.config().local_port,
        verification_tag: tag,
        chunks: vec![Chunk::Abort(AbortChunk {
            t_bit: false,
            causes: vec![],
        })],
    };
    let now = p.now;
    let before = p.client.stats().discarded_packets;
    p.client.handle_packet(now, srv(), abort, 16);
    p.flush();
    assert!(p.client.is_established());
    assert_eq!(p.closed(Side::Client), None);
    assert_eq!(p.client.stats().discarded_packets, before + 1);
    assert!(p.client_trace.iter().any(
        |r| matches!(r, thinstream_base::trace::Record::Discarded { why, .. } if why == "wrong-port")
    ));
}

// A receiver whose application stops reading closes its window; the sender
// stops (its one probe is dropped while delivered messages wait to be
// read). When the application then takes the messages through
// `Endpoint::poll_event`, the receive window opens and the endpoint must
// send the window update at once, with no packet arriving to prompt it:
// otherwise the sender waits for its retransmission timer (a 1 s stall in
// the library on loopback, found beside 1 MB messages).
#[test]
fn reading_through_the_endpoint_sends_the_window_update() {
    let mut cfg = Config::default();
    cfg.receive_buffer = 4000;
    let mut a = Endpoint::new(cfg.clone(), client_addr(9), Seed(7), false);
    let mut b = Endpoint::new(cfg, server_addr(), Seed(8), true);
    let id = a.connect(Instant::ZERO, server_addr());
    let payload = [5u8; 1000];
    let total = 20;
    let mut queued = 0;
    let mut now = Instant::ZERO;
    let exchange = |a: &mut Endpoint, b: &mut Endpoint, now: Instant| {
        a.handle_timeout(now);
        b.handle_timeout(now);
        let mut moved = 0;
        while let Some(d) = a.poll_transmit(now) {
            b.handle_datagram(now, d);
            moved += 1;
        }
        while let Some(d) = b.poll_transmit(now) {
            a.handle_datagram(now, d);
            moved += 1;
        }
        moved
    };
    // Established, then everything queued at the sender; the receiver's
    // application does not read.
    for step in 0..100 {
        now = Instant::from_millis(step);
        exchange(&mut a, &mut b, now);
        while let Some((i, e)) = a.poll_event() {
            if i == id && e == AppEvent::Established {
                while queued < total {
                    a.send(now, id, msg(&payload)).unwrap();
                    queued += 1;
                }
            }
        }
    }
    assert_eq!(queued, total, "the association was not established");
    // Quiet: the window is shut and nothing moves.
    assert_eq!(exchange(&mut a, &mut b, now), 0);
    let mut received = 0;
    while let Some((_, e)) = b.poll_event() {
        if matches!(e, AppEvent::Received { .. }) {
            received += 1;
        }
    }
    assert!(
        (1..total).contains(&received),
        "{received} of {total} messages arrived before the window shut"
    );
    // The window update leaves now, unprompted.
    let update = b.poll_transmit(now);
    assert!(
        update.is_some(),
        "no window update after the application read"
    );
    a.handle_datagram(now, update.unwrap());
    // It opened the window: the sender goes on at once.
    let data = a.poll_transmit(now);
    assert!(data.is_some(), "the sender did not resume after the update");
    b.handle_datagram(now, data.unwrap());
    // And the rest arrives (the probe the receiver dropped is recovered by
    // the usual means).
    let start = now;
    while received < total && now < start + Duration::from_secs(10) {
        now = now + Duration::from_millis(1);
        exchange(&mut a, &mut b, now);
        while let Some((_, e)) = b.poll_event() {
            if matches!(e, AppEvent::Received { .. }) {
                received += 1;
            }
        }
    }
    assert_eq!(received, total, "messages stalled after the window opened");
}
