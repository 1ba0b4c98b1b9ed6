//! Attack regressions: crafted packets against a server endpoint, in the
//! simulator's virtual network (RFC 9260 §5.1.3 cookies, §8.5 verification
//! tags with the T bit, §6.2 receive window, §8.3 heartbeat failure).
//! Each test states the attack and what must hold afterwards.

mod net;

use bytes::Bytes;
use net::{client_addr, crafted, server_addr, Net};
use thinstream_base::drive::{AppEvent, Transport};
use thinstream_base::{Datagram, Duration, Instant};
use thinstream_proto::wire::{
    AbortChunk, Chunk, CookieEchoChunk, DataChunk, ErrorChunk, ForwardTsnChunk, GapBlock,
    HeartbeatChunk, Packet, SackChunk, ShutdownChunk, ShutdownCompleteChunk, Ssn, Tsn,
};
use thinstream_proto::{AssociationId, Config};

/// An established client/server pair; the server association's id, tags,
/// ports and next expected TSN.
struct Live {
    net: Net,
    id: AssociationId,
    local_tag: u32,
    peer_tag: u32,
    peer_port: u16,
    local_port: u16,
}

fn live(cfg: Config) -> Live {
    let mut net = Net::with_config(1, cfg);
    net.drive_for(Duration::from_millis(100));
    let id = net.server.associations().next().expect("established");
    let a = net.server.association(id).expect("association");
    assert!(a.is_established());
    Live {
        id,
        local_tag: a.local_tag(),
        peer_tag: a.peer_tag(),
        peer_port: a.peer_port(),
        local_port: net.server.config().local_port,
        net,
    }
}

impl Live {
    fn inject(&mut self, tag: u32, chunk: Chunk) {
        let p = Packet {
            src_port: self.peer_port,
            dst_port: self.local_port,
            verification_tag: tag,
            chunks: vec![chunk],
        };
        let now = self.net.now;
        self.net
            .server
            .handle_datagram(now, crafted(client_addr(0), &p));
        self.net.flush();
    }
    fn closed_events(&self) -> usize {
        self.net
            .server_events
            .iter()
            .filter(|(i, e)| *i == self.id && matches!(e, AppEvent::Closed { .. }))
            .count()
    }
    fn check(&self) {
        if let Some(a) = self.net.server.association(self.id) {
            a.check_invariants().expect("server accounting");
        }
    }
}

fn data(tsn: u32, len: usize) -> Chunk {
    Chunk::Data(DataChunk {
        tsn: Tsn(tsn),
        stream: 0,
        ssn: Ssn(0),
        ppid: 0,
        unordered: true,
        beginning: true,
        ending: true,
        immediate: false,
        payload: Bytes::from(vec![0xAB; len]),
    })
}

// 100 000 INITs from 100 000 source addresses: every one is answered
// statelessly (RFC 9260 §5.1.3: the state travels in the cookie), none
// creates an association or leaves anything queued.
#[test]
fn init_flood_leaves_no_state() {
    let mut net = Net::new(1);
    let init = net.clients[0].poll_transmit(Instant::ZERO).expect("INIT");
    let mut answers = 0u32;
    for i in 0..100_000u32 {
        let src = std::net::SocketAddr::from((
            [10, 2, (i >> 8) as u8, i as u8],
            1024 + (i % 60_000) as u16,
        ));
        let now = Instant::from_micros(u64::from(i));
        net.server.handle_datagram(
            now,
            Datagram {
                src,
                dst: server_addr(),
                payload: init.payload.clone(),
            },
        );
        while let Some(d) = net.server.poll_transmit(now) {
            assert_eq!(d.dst, src);
            answers += 1;
        }
    }
    assert_eq!(answers, 100_000, "every INIT gets its INIT ACK");
    assert_eq!(net.server.associations().count(), 0);
    assert!(net.server.poll_event().is_none());
}

// Forged, expired and replayed COOKIE ECHOs (RFC 9260 §5.1.3, §5.2.4).
#[test]
fn forged_expired_and_replayed_cookies() {
    let mut net = Net::new(1);
    let init = net.clients[0].poll_transmit(Instant::ZERO).expect("INIT");
    net.server.handle_datagram(Instant::ZERO, init);
    let ack = net.server.poll_transmit(Instant::ZERO).expect("INIT ACK");
    net.clients[0].handle_datagram(Instant::from_millis(10), ack);
    let echo = net.clients[0]
        .poll_transmit(Instant::from_millis(10))
        .expect("COOKIE ECHO");
    let parsed = Packet::parse(&echo.payload).expect("parses");

    // A cookie of random bytes with the right header.
    let forged = Packet {
        chunks: vec![Chunk::CookieEcho(CookieEchoChunk {
            cookie: Bytes::from(vec![0x42; 300]),
        })],
        ..parsed.clone()
    };
    let t = Instant::from_millis(20);
    net.server
        .handle_datagram(t, crafted(client_addr(0), &forged));
    assert_eq!(net.server.associations().count(), 0, "forged cookie");

    // The genuine cookie, presented after Valid.Cookie.Life: refused with a
    // Stale Cookie error, no association.
    let late = Instant::ZERO + net.server.config().valid_cookie_life + Duration::from_secs(2);
    net.server.handle_datagram(late, echo.clone());
    assert_eq!(net.server.associations().count(), 0, "expired cookie");
    let mut stale = false;
    while let Some(d) = net.server.poll_transmit(late) {
        let p = Packet::parse(&d.payload).expect("parses");
        stale |= p.chunks.iter().any(|c| {
            matches!(c, Chunk::Error(ErrorChunk { causes }) if causes.iter().any(|e| e.code == 3))
        });
    }
    assert!(stale, "a Stale Cookie error answers the expired cookie");

    // In time it creates exactly one association; replaying it (an
    // attacker who captured it) creates no second one and disturbs nothing.
    let t = Instant::from_millis(30);
    net.server.handle_datagram(t, echo.clone());
    assert_eq!(net.server.associations().count(), 1);
    while net.server.poll_transmit(t).is_some() {}
    let events = |net: &mut Net| {
        let mut v = Vec::new();
        while let Some(e) = net.server.poll_event() {
            v.push(e.1);
        }
        v
    };
    assert_eq!(events(&mut net), vec![AppEvent::Established]);
    for k in 0..5 {
        let t = Instant::from_millis(40 + k);
        net.server.handle_datagram(t, echo.clone());
        while net.server.poll_transmit(t).is_some() {}
    }
    assert_eq!(net.server.associations().count(), 1, "replayed cookie");
    let after = events(&mut net);
    assert!(
        !after
            .iter()
            .any(|e| matches!(e, AppEvent::PeerRestarted | AppEvent::Closed { .. })),
        "{after:?}"
    );
}

// Every chunk type with a wrong verification tag is discarded (RFC 9260
// §8.5); ABORT and SHUTDOWN COMPLETE follow the T-bit rule of §8.5.1: with
// the T bit the tag must be the peer's own, without it ours.
#[test]
fn wrong_tags_on_every_chunk_type() {
    let mut l = live(Config::default().with_trace());
    let wrong = l.local_tag ^ 0x5A5A_0001;
    let received_before = l
        .net
        .server
        .association(l.id)
        .unwrap()
        .stats()
        .data_chunks_received;
    let chunks = vec![
        data(1, 10),
        Chunk::Sack(SackChunk {
            cum_tsn_ack: Tsn(1),
            a_rwnd: 0,
            gap_blocks: vec![],
            duplicate_tsns: vec![],
        }),
        Chunk::Heartbeat(HeartbeatChunk {
            info: Bytes::from_static(b"x"),
        }),
        Chunk::HeartbeatAck(HeartbeatChunk {
            info: Bytes::from_static(b"x"),
        }),
        Chunk::Abort(AbortChunk {
            t_bit: false,
            causes: vec![],
        }),
        Chunk::Shutdown(ShutdownChunk {
            cum_tsn_ack: Tsn(0),
        }),
        Chunk::ShutdownAck,
        Chunk::ShutdownComplete(ShutdownCompleteChunk { t_bit: false }),
        Chunk::CookieAck,
        Chunk::Error(ErrorChunk { causes: vec![] }),
        Chunk::ForwardTsn(ForwardTsnChunk {
            new_cum_tsn: Tsn(u32::MAX / 2),
            streams: vec![],
        }),
    ];
    for c in chunks {
        l.inject(wrong, c);
        l.check();
    }
    // The T bit with our own tag is wrong too (it claims a reflected tag).
    l.inject(
        l.local_tag,
        Chunk::Abort(AbortChunk {
            t_bit: true,
            causes: vec![],
        }),
    );
    l.net.drive_for(Duration::from_millis(100));
    let a = l.net.server.association(l.id).expect("still there");
    assert!(a.is_established());
    assert_eq!(a.stats().data_chunks_received, received_before);
    assert_eq!(l.closed_events(), 0);
    // The same ABORT with the peer's tag and the T bit is genuine.
    let peer_tag = l.peer_tag;
    l.inject(
        peer_tag,
        Chunk::Abort(AbortChunk {
            t_bit: true,
            causes: vec![],
        }),
    );
    assert_eq!(l.closed_events(), 1, "a reflected-tag ABORT is accepted");
}

// DATA far outside any window, and SACKs that make no sense (cumulative
// ack beyond what was sent, inverted, overlapping and out-of-range gap
// blocks, a thousand of them): dropped or ignored, accounting intact, and
// the association still carries data afterwards.
#[test]
fn out_of_window_tsns_and_absurd_sacks() {
    let mut l = live(Config::default().with_trace());
    let held = l.net.server.association(l.id).unwrap().held_receive_bytes();
    let tag = l.local_tag;
    for far in [1u32 << 20, 1 << 30, u32::MAX - 5] {
        l.inject(tag, data(far, 1000));
        l.check();
    }
    assert_eq!(
        l.net.server.association(l.id).unwrap().held_receive_bytes(),
        held,
        "nothing outside the window is stored"
    );
    // The server sends some data so that its SACK handling has state.
    let now = l.net.now;
    for _ in 0..5 {
        let _ = l.net.server.send(
            now,
            l.id,
            thinstream_base::drive::Outgoing {
                stream: 0,
                unordered: false,
                payload: &[1u8; 500],
            },
        );
    }
    l.net.flush();
    let sacks = vec![
        (Tsn(u32::MAX / 3), vec![]),
        (
            Tsn(0),
            vec![
                GapBlock { start: 9, end: 2 },
                GapBlock {
                    start: 1,
                    end: 60_000,
                },
                GapBlock { start: 5, end: 5 },
            ],
        ),
        (
            Tsn(7),
            (0..1000u16)
                .map(|i| GapBlock {
                    start: i.wrapping_mul(37),
                    end: i.wrapping_mul(37).wrapping_add(3),
                })
                .collect(),
        ),
    ];
    for (cum, gaps) in sacks {
        l.inject(
            tag,
            Chunk::Sack(SackChunk {
                cum_tsn_ack: cum,
                a_rwnd: u32::MAX,
                gap_blocks: gaps,
                duplicate_tsns: vec![Tsn(1); 50],
            }),
        );
        l.check();
    }
    // The genuine peer still gets everything.
    l.net.drive_for(Duration::from_secs(10));
    l.check();
    let got: usize = l.net.client_events[0]
        .iter()
        .filter(|e| matches!(e, AppEvent::Received { .. }))
        .count();
    assert_eq!(got, 5, "data still flows after the absurd SACKs");
    assert!(l.net.server.association(l.id).unwrap().is_established());
}

// A peer that never fills a gap: it sends everything but the next TSN.
// The receiver stores no more than its buffer; the rest is dropped.
#[test]
fn a_gap_never_filled_is_bounded_by_the_receive_buffer() {
    let mut cfg = Config::default().with_trace();
    cfg.receive_buffer = 64 * 1024;
    let mut l = live(cfg);
    let tag = l.local_tag;
    // Learn the peer's current TSN the way an on-path attacker would: from
    // a DATA packet the genuine client sends (delivered, so the server's
    // cumulative TSN is that one). The attack skips the TSN after it.
    let base = {
        let now = l.net.now;
        let _ = l.net.clients[0].send(
            now,
            thinstream_base::drive::Outgoing {
                stream: 0,
                unordered: true,
                payload: b"probe",
            },
        );
        let d = l.net.clients[0].poll_transmit(now).expect("DATA");
        let p = Packet::parse(&d.payload).expect("parses");
        let tsn = p
            .chunks
            .iter()
            .find_map(|c| match c {
                Chunk::Data(d) => Some(d.tsn.0),
                _ => None,
            })
            .expect("a DATA chunk");
        l.net.server.handle_datagram(now, d);
        l.net.flush();
        tsn
    };
    for k in 2..2000u32 {
        // Ordered, on a stream position the receiver is not at, so that
        // each message waits (unordered ones would be delivered at once).
        let mut c = data(base.wrapping_add(k), 1000);
        if let Chunk::Data(d) = &mut c {
            d.unordered = false;
            d.ssn = Ssn(1000 + k as u16);
        }
        l.inject(tag, c);
        if k % 100 == 0 {
            l.check();
        }
    }
    let a = l.net.server.association(l.id).unwrap();
    assert!(
        a.held_receive_bytes() <= 64 * 1024,
        "held {} beyond the 64 KiB buffer",
        a.held_receive_bytes()
    );
    assert!(
        a.stats().data_dropped_no_buffer > 1000,
        "{:?} held {}",
        a.stats(),
        a.held_receive_bytes()
    );
    assert!(a.is_established());
}

// A peer that completes the handshake and then falls silent is given up
// by heartbeat failure within a bound set by the configuration (RFC 9260
// §8.3 with Association.Max.Retrans), reported with its cause, and the
// endpoint forgets it.
#[test]
fn silent_association_is_reaped_by_heartbeat_failure() {
    let mut cfg = Config::default();
    cfg.hb_interval = Duration::from_secs(1);
    cfg.association_max_retrans = 3;
    cfg.rto_max = Duration::from_secs(2);
    let mut l = live(cfg);
    // The client vanishes: nothing more from it, nothing reaches it.
    l.net.clients.clear();
    // Bound: each unanswered heartbeat costs at most HB.interval + RTO.max
    // (+ RTO jitter), one more for the failure to be declared.
    let bound = Duration::from_secs((1 + 2 + 1) * (3 + 2));
    l.net.drive_for(bound);
    let why = l
        .net
        .server_events
        .iter()
        .find_map(|(i, e)| match e {
            AppEvent::Closed { error: Some(why) } if *i == l.id => Some(why.clone()),
            _ => None,
        })
        .expect("the silent association is closed within the bound");
    assert!(
        why.contains("heartbeat") || why.contains("unreachable"),
        "{why}"
    );
    l.net.drive_for(Duration::from_millis(10));
    assert_eq!(l.net.server.associations().count(), 0, "and forgotten");
}
