use bytes::Bytes;
use thinstream_base::drive::{AppEvent, Transport};
use thinstream_base::{Duration, Instant, Seed};

use crate::association::{Association, State};
use crate::config::{Config, DelayedSack};
use crate::testkit::{client_addr, server_addr, Pair};
use crate::wire::*;

/// An established server association and the view of its (fake) client.
struct Fx {
    a: Association,
    now: Instant,
    /// The next TSN the fake client would send.
    tsn: Tsn,
}

fn established_server(cfg: Config) -> Fx {
    let mut p = Pair::new(Config::default(), cfg, Duration::from_millis(50), Seed(1));
    p.connect();
    p.drive_for(Duration::from_millis(1));
    let Pair { server, now, .. } = p;
    let tsn = server.rx.cum_tsn().next();
    Fx {
        a: server,
        now,
        tsn,
    }
}

fn established_client(cfg: Config) -> (Association, Instant) {
    let mut p = Pair::new(cfg, Config::default(), Duration::from_millis(50), Seed(2));
    p.connect();
    p.drive_for(Duration::from_millis(1));
    let Pair { client, now, .. } = p;
    (client, now)
}

fn data(tsn: Tsn, stream: u16, ssn: u16, payload: &'static [u8]) -> Chunk {
    Chunk::Data(DataChunk {
        tsn,
        stream,
        ssn: Ssn(ssn),
        ppid: 0,
        unordered: false,
        beginning: true,
        ending: true,
        immediate: false,
        payload: Bytes::from_static(payload),
    })
}

fn unknown(kind: u8) -> Chunk {
    Chunk::Unknown(UnknownChunk {
        kind,
        flags: 0,
        value: Bytes::from_static(b"abcd"),
    })
}

impl Fx {
    fn packet(&self, chunks: Vec<Chunk>) -> Packet {
        Packet {
            src_port: 5000,
            dst_port: 5000,
            verification_tag: self.a.local_tag(),
            chunks,
        }
    }
    fn feed(&mut self, chunks: Vec<Chunk>) {
        let p = self.packet(chunks);
        self.feed_packet(p);
    }
    fn feed_packet(&mut self, p: Packet) {
        let len = p.encoded_len();
        self.a.handle_packet(self.now, client_addr(), p, len);
    }
    /// Everything the association sends now.
    fn out(&mut self) -> Vec<Packet> {
        let mut v = Vec::new();
        while let Some((dst, p)) = self.a.poll_packet(self.now) {
            assert_eq!(dst, client_addr());
            v.push(p);
        }
        v
    }
    fn kinds(&mut self) -> Vec<Vec<u8>> {
        self.out()
            .iter()
            .map(|p| p.chunks.iter().map(|c| c.kind()).collect())
            .collect()
    }
    fn cum(&self) -> Tsn {
        self.a.rx.cum_tsn()
    }
    fn received(&mut self) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        while let Some(e) = self.a.poll_app() {
            if let AppEvent::Received { payload, .. } = e {
                v.push(payload.to_vec());
            }
        }
        v
    }
}

fn sack_of(p: &Packet) -> SackChunk {
    p.chunks
        .iter()
        .find_map(|c| match c {
            Chunk::Sack(s) => Some(s.clone()),
            _ => None,
        })
        .expect("a SACK")
}

// §6.2: DATA without user data is answered with ABORT "No User Data".
#[test]
fn empty_data_aborts() {
    let mut f = established_server(Config::default());
    let t = f.tsn;
    f.feed(vec![data(t, 0, 0, b"")]);
    let out = f.out();
    assert_eq!(out.len(), 1);
    let Chunk::Abort(a) = &out[0].chunks[0] else {
        panic!("{out:?}")
    };
    assert_eq!(a.causes[0].code, cause_code::NO_USER_DATA);
    assert_eq!(a.causes[0].no_user_data_tsn(), Some(t));
    assert_eq!(out[0].verification_tag, f.a.peer_tag());
    assert_eq!(f.a.state(), State::Closed);
}

// §3.2, type 0x41 (01): stop processing the packet and report. (0x40 is
// I-DATA, RFC 8260.)
#[test]
fn unknown_chunk_stop_and_report() {
    let mut f = established_server(Config::default());
    let (t, cum) = (f.tsn, f.cum());
    f.feed(vec![unknown(0x41), data(t, 0, 0, b"x")]);
    assert_eq!(
        f.cum(),
        cum,
        "DATA after the unknown chunk must not be processed"
    );
    let out = f.out();
    assert_eq!(out.len(), 1);
    let Chunk::Error(e) = &out[0].chunks[0] else {
        panic!("{out:?}")
    };
    assert_eq!(e.causes[0].code, cause_code::UNRECOGNIZED_CHUNK_TYPE);
    assert_eq!(
        &e.causes[0].info[..],
        &[0x41, 0, 0, 8, b'a', b'b', b'c', b'd']
    );
}

// Type 0x80 (10): skip silently and continue.
#[test]
fn unknown_chunk_skip_silently() {
    let mut f = established_server(Config::default().clone());
    let t = f.tsn;
    f.feed(vec![unknown(0x80), data(t, 0, 0, b"x")]);
    assert_eq!(f.cum(), t);
    // Nothing but (possibly delayed) SACK: no ERROR.
    assert!(f.kinds().iter().flatten().all(|k| *k != chunk_type::ERROR));
    assert_eq!(f.received(), vec![b"x".to_vec()]);
}

// Type 0xC1 (11): skip, continue and report.
#[test]
fn unknown_chunk_skip_and_report() {
    let mut f = established_server(Config::default());
    let t = f.tsn;
    f.feed(vec![unknown(0xC1), data(t, 0, 0, b"x")]);
    assert_eq!(f.cum(), t);
    assert_eq!(f.kinds(), vec![vec![chunk_type::ERROR]]);
}

// Type 0x3F (00): stop silently.
#[test]
fn unknown_chunk_stop_silently() {
    let mut f = established_server(Config::default());
    let (t, cum) = (f.tsn, f.cum());
    f.feed(vec![unknown(0x3F), data(t, 0, 0, b"x")]);
    assert_eq!(f.cum(), cum);
    assert!(f.out().is_empty());
}

// §8.5: a packet with a wrong verification tag is dropped silently.
#[test]
fn wrong_tag_is_discarded() {
    let mut f = established_server(Config::default());
    let (t, cum) = (f.tsn, f.cum());
    let mut p = f.packet(vec![data(t, 0, 0, b"x")]);
    p.verification_tag ^= 1;
    let before = f.a.stats().discarded_packets;
    f.feed_packet(p);
    assert_eq!(f.cum(), cum);
    assert!(f.out().is_empty());
    assert_eq!(f.a.stats().discarded_packets, before + 1);
}

// §6.2, §6.7: gaps and duplicates are reported at once.
#[test]
fn sack_reports_gaps_and_duplicates() {
    let mut f = established_server(Config::default());
    let t = f.tsn;
    f.feed(vec![data(t, 0, 0, b"a")]);
    f.feed(vec![data(t.add(2), 0, 2, b"c")]);
    f.feed(vec![data(t.add(2), 0, 2, b"c")]);
    f.feed(vec![data(t.add(4), 0, 4, b"e")]);
    let out = f.out();
    assert_eq!(
        out.len(),
        1,
        "SACKs are coalesced into the packet being built"
    );
    let s = sack_of(&out[0]);
    assert_eq!(s.cum_tsn_ack, t);
    assert_eq!(
        s.gap_blocks,
        vec![GapBlock { start: 2, end: 2 }, GapBlock { start: 4, end: 4 }]
    );
    assert_eq!(s.duplicate_tsns, vec![t.add(2)]);
    assert_eq!(f.received(), vec![b"a".to_vec()]);
    // Filling the gaps delivers in order and SACKs at once.
    f.feed(vec![data(t.add(1), 0, 1, b"b"), data(t.add(3), 0, 3, b"d")]);
    let s = sack_of(&f.out()[0]);
    assert_eq!(s.cum_tsn_ack, t.add(4));
    assert!(s.gap_blocks.is_empty() && s.duplicate_tsns.is_empty());
    assert_eq!(
        f.received(),
        vec![b"b".to_vec(), b"c".to_vec(), b"d".to_vec(), b"e".to_vec()]
    );
}

// A broken peer sends two complete messages with the same waiting SSN under
// different TSNs: the first is kept, the buffer accounting holds (the I-DATA
// form, the same MID twice, was found by the endpoint fuzz target).
#[test]
fn a_second_message_with_a_waiting_ssn_is_dropped() {
    let mut f = established_server(Config::default());
    let t = f.tsn;
    f.feed(vec![data(t.add(1), 0, 1, b"first")]);
    f.feed(vec![data(t.add(2), 0, 1, b"second, longer")]);
    f.a.check_invariants().unwrap();
    f.feed(vec![data(t, 0, 0, b"zero")]);
    f.a.check_invariants().unwrap();
    assert_eq!(f.received(), vec![b"zero".to_vec(), b"first".to_vec()]);
    assert_eq!(f.a.rx.held, 0);
}

// Delayed SACK: one in-sequence packet starts the 200 ms timer.
#[test]
fn delayed_sack_timer() {
    let mut f = established_server(Config::default());
    let t = f.tsn;
    f.feed(vec![data(t, 0, 0, b"a")]);
    assert!(f.out().is_empty());
    assert_eq!(f.a.poll_timeout(), Some(f.now + Duration::from_millis(200)));
    f.now = f.now + Duration::from_millis(200);
    f.a.handle_timeout(f.now);
    let out = f.out();
    assert_eq!(sack_of(&out[0]).cum_tsn_ack, t);
}

// §6.5: DATA for a stream that does not exist: ERROR, TSN acknowledged.
#[test]
fn invalid_stream() {
    let mut cfg = Config::default();
    cfg.delayed_sack = DelayedSack::off();
    let mut f = established_server(cfg);
    let t = f.tsn;
    f.feed(vec![data(t, 999, 0, b"a")]);
    let out = f.out();
    let kinds: Vec<u8> = out[0].chunks.iter().map(|c| c.kind()).collect();
    assert_eq!(kinds, vec![chunk_type::ERROR, chunk_type::SACK]);
    let Chunk::Error(e) = &out[0].chunks[0] else {
        unreachable!()
    };
    assert_eq!(e.causes[0].stream_identifier(), Some(999));
    assert_eq!(sack_of(&out[0]).cum_tsn_ack, t);
    assert!(f.received().is_empty());
}

// RFC 3758: FORWARD TSN skips a lost message and releases what follows.
#[test]
fn forward_tsn_skips_and_delivers() {
    let mut f = established_server(Config::default());
    let t = f.tsn;
    // TSN t (ssn 0) lost; TSN t+1 (ssn 1) arrives and waits for order.
    f.feed(vec![data(t.add(1), 0, 1, b"second")]);
    assert!(f.received().is_empty());
    f.feed(vec![Chunk::ForwardTsn(ForwardTsnChunk {
        new_cum_tsn: t,
        streams: vec![ForwardTsnStream {
            stream: 0,
            ssn: Ssn(0),
        }],
    })]);
    assert_eq!(f.cum(), t.add(1));
    assert_eq!(f.received(), vec![b"second".to_vec()]);
    assert_eq!(sack_of(&f.out()[0]).cum_tsn_ack, t.add(1));
}

// RFC 3758 §3.6: a complete message held for order whose SSN is at or
// below the skipped one arrived whole and is delivered (before the messages
// behind it), not dropped; a partial message of the skipped SSN is dropped.
#[test]
fn forward_tsn_delivers_complete_held_messages_in_order() {
    let mut f = established_server(Config::default());
    let t = f.tsn;
    // t: ssn 0 lost. t+1: ssn 1 complete. t+2: first fragment of ssn 2.
    // t+3: lost. t+4: ssn 3 complete.
    let mut frag = data(t.add(2), 0, 2, b"part");
    if let Chunk::Data(d) = &mut frag {
        d.ending = false;
    }
    f.feed(vec![
        data(t.add(1), 0, 1, b"one"),
        frag,
        data(t.add(4), 0, 3, b"three"),
    ]);
    assert!(f.received().is_empty());
    // The sender abandoned ssn 0 (TSN t) and ssn 2 (TSNs t+2, t+3).
    f.feed(vec![Chunk::ForwardTsn(ForwardTsnChunk {
        new_cum_tsn: t.add(3),
        streams: vec![ForwardTsnStream {
            stream: 0,
            ssn: Ssn(2),
        }],
    })]);
    assert_eq!(f.received(), vec![b"one".to_vec(), b"three".to_vec()]);
    assert_eq!(f.cum(), t.add(4));
    assert_eq!(f.a.held_receive_bytes(), 0);
    f.a.check_invariants().unwrap();
}

// §5.2.2: INIT in ESTABLISHED: INIT ACK with a new tag and the current tags
// as tie-tags; the association is unchanged.
#[test]
fn init_in_established() {
    let mut f = established_server(Config::default());
    let init = InitChunk {
        initiate_tag: 0xABCD,
        a_rwnd: 10_000,
        outbound_streams: 2,
        inbound_streams: 2,
        initial_tsn: Tsn(5),
        params: vec![],
    };
    let p = Packet {
        src_port: 5000,
        dst_port: 5000,
        verification_tag: 0,
        chunks: vec![Chunk::Init(init)],
    };
    f.feed_packet(p);
    let out = f.out();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].verification_tag, 0xABCD);
    let Chunk::InitAck(ia) = &out[0].chunks[0] else {
        panic!()
    };
    assert_ne!(ia.initiate_tag, f.a.local_tag());
    let cookie = ia
        .params
        .iter()
        .find_map(|p| match p {
            Param::StateCookie(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    let c = f.a.cookie_key.open(&cookie, f.now).unwrap();
    assert_eq!(
        (c.local_tie_tag, c.peer_tie_tag),
        (f.a.local_tag(), f.a.peer_tag())
    );
    assert_eq!(f.a.state(), State::Established);
}

fn listener() -> Association {
    Association::accept(Config::default(), Instant::ZERO, server_addr(), Seed(3))
}

fn init_packet(params: Vec<Param>, tag: u32, os: u16) -> Packet {
    Packet {
        src_port: 5000,
        dst_port: 5000,
        verification_tag: 0,
        chunks: vec![Chunk::Init(InitChunk {
            initiate_tag: tag,
            a_rwnd: 10_000,
            outbound_streams: os,
            inbound_streams: 2,
            initial_tsn: Tsn(5),
            params,
        })],
    }
}

fn drain(a: &mut Association) -> Vec<Packet> {
    let mut v = Vec::new();
    while let Some((_, p)) = a.poll_packet(Instant::ZERO) {
        v.push(p);
    }
    v
}

// §3.2.1: unrecognized INIT parameters are handled by their upper two bits
// and reported in the INIT ACK; the listener stays stateless.
#[test]
fn unrecognized_init_parameters() {
    let mut a = listener();
    let u = |kind: u16| Param::Unknown {
        kind,
        value: Bytes::from_static(b"zz"),
    };
    let p = init_packet(vec![u(0x8001), u(0xC002), u(0x4003), u(0xC004)], 7, 2);
    a.handle_packet(Instant::ZERO, client_addr(), p, 100);
    let out = drain(&mut a);
    let Chunk::InitAck(ia) = &out[0].chunks[0] else {
        panic!()
    };
    let reported: Vec<u16> = ia
        .params
        .iter()
        .filter_map(|p| match p {
            Param::UnrecognizedParameter(b) => Some(u16::from_be_bytes([b[0], b[1]])),
            _ => None,
        })
        .collect();
    // 0x8001 skipped silently, 0xC002 reported, 0x4003 reported and stops.
    assert_eq!(reported, vec![0xC002, 0x4003]);
    assert_eq!(a.state(), State::Closed, "no state before COOKIE ECHO");
    assert_eq!(a.remote_addr(), None);
}

// §3.3.2: Initiate Tag 0 is discarded; zero streams are aborted.
#[test]
fn invalid_inits() {
    let mut a = listener();
    a.handle_packet(Instant::ZERO, client_addr(), init_packet(vec![], 0, 2), 100);
    assert!(drain(&mut a).is_empty());
    a.handle_packet(Instant::ZERO, client_addr(), init_packet(vec![], 9, 0), 100);
    let out = drain(&mut a);
    assert_eq!(out[0].verification_tag, 9);
    assert!(
        matches!(&out[0].chunks[0], Chunk::Abort(x) if x.causes[0].code == cause_code::INVALID_MANDATORY_PARAMETER)
    );
}

// §5.1.5: a forged cookie is discarded silently; §8.4: other OOTB packets
// get a T-bit ABORT with the packet's tag.
#[test]
fn forged_cookie_and_ootb() {
    let mut a = listener();
    let p = Packet {
        src_port: 5000,
        dst_port: 5000,
        verification_tag: 42,
        chunks: vec![Chunk::CookieEcho(CookieEchoChunk {
            cookie: Bytes::from(vec![1u8; crate::cookie::COOKIE_LEN]),
        })],
    };
    a.handle_packet(Instant::ZERO, client_addr(), p, 100);
    assert!(drain(&mut a).is_empty());
    assert_eq!(a.state(), State::Closed);
    let p = Packet {
        src_port: 5000,
        dst_port: 5000,
        verification_tag: 42,
        chunks: vec![data(Tsn(1), 0, 0, b"x")],
    };
    a.handle_packet(Instant::ZERO, client_addr(), p, 100);
    let out = drain(&mut a);
    assert_eq!(out[0].verification_tag, 42);
    assert!(matches!(&out[0].chunks[0], Chunk::Abort(x) if x.t_bit));
}

// §8.5.1 B: ABORT with the T bit must carry the peer's tag.
#[test]
fn abort_tag_rules() {
    let mut f = established_server(Config::default());
    let mut p = f.packet(vec![Chunk::Abort(AbortChunk {
        t_bit: true,
        causes: vec![],
    })]);
    // T bit with our own tag: wrong, ignored.
    f.feed_packet(p.clone());
    assert_eq!(f.a.state(), State::Established);
    p.verification_tag = f.a.peer_tag();
    f.feed_packet(p);
    assert_eq!(f.a.state(), State::Closed);
    assert!(f.received().is_empty());
}

// §9.2: SHUTDOWN with nothing outstanding: SHUTDOWN ACK, then SHUTDOWN
// COMPLETE closes.
#[test]
fn shutdown_sequence_receiver_side() {
    let mut f = established_server(Config::default());
    let cum = f.a.tx.cum_tsn();
    f.feed(vec![Chunk::Shutdown(ShutdownChunk { cum_tsn_ack: cum })]);
    assert_eq!(f.a.state(), State::ShutdownAckSent);
    assert_eq!(f.kinds(), vec![vec![chunk_type::SHUTDOWN_ACK]]);
    assert!(f
        .a
        .send(
            f.now,
            thinstream_base::drive::Outgoing {
                stream: 0,
                unordered: false,
                payload: b"x"
            }
        )
        .is_err());
    f.feed(vec![Chunk::ShutdownComplete(ShutdownCompleteChunk {
        t_bit: false,
    })]);
    assert_eq!(f.a.state(), State::Closed);
    let mut closed = false;
    while let Some(e) = f.a.poll_app() {
        closed |= e == AppEvent::Closed { error: None };
    }
    assert!(closed);
}

// §6.2.1 D i: a SACK older than the cumulative ack point is ignored.
#[test]
fn out_of_date_sack_is_ignored() {
    let (mut a, now) = established_client(Config::default().with_trace());
    let out = thinstream_base::drive::Outgoing {
        stream: 0,
        unordered: false,
        payload: b"hello",
    };
    a.send(now, out).unwrap();
    let (_, p) = a.poll_packet(now).unwrap();
    let Chunk::Data(d) = &p.chunks[0] else {
        panic!()
    };
    let tag = a.local_tag();
    let sack = |cum: Tsn, rwnd: u32| Packet {
        src_port: 5000,
        dst_port: 5000,
        verification_tag: tag,
        chunks: vec![Chunk::Sack(SackChunk {
            cum_tsn_ack: cum,
            a_rwnd: rwnd,
            gap_blocks: vec![],
            duplicate_tsns: vec![],
        })],
    };
    let fresh = sack(d.tsn, 50_000);
    a.handle_packet(now, server_addr(), fresh, 28);
    assert_eq!(a.flight_size(), 0);
    assert_eq!(a.peer_rwnd(), 50_000);
    let old = sack(d.tsn.prev(), 1);
    a.handle_packet(now, server_addr(), old, 28);
    assert_eq!(a.peer_rwnd(), 50_000, "the old SACK must not update rwnd");
}

// §5.2.1: INIT in COOKIE-ECHOED: INIT ACK with our original Initiate Tag;
// the state and T1-cookie are unchanged.
#[test]
fn init_in_cookie_echoed() {
    let mut a = Association::connect(
        Config::default(),
        Instant::ZERO,
        client_addr(),
        server_addr(),
        Seed(4),
    );
    let _init = a.poll_packet(Instant::ZERO).unwrap();
    let my_tag = a.local_tag();
    // A fake INIT ACK from the server.
    let ia = Packet {
        src_port: 5000,
        dst_port: 5000,
        verification_tag: my_tag,
        chunks: vec![Chunk::InitAck(InitChunk {
            initiate_tag: 0x5555,
            a_rwnd: 10_000,
            outbound_streams: 2,
            inbound_streams: 2,
            initial_tsn: Tsn(100),
            params: vec![Param::StateCookie(Bytes::from_static(b"cookie"))],
        })],
    };
    let t = Instant::from_millis(100);
    a.handle_packet(t, server_addr(), ia, 60);
    assert_eq!(a.state(), State::CookieEchoed);
    let echo = a.poll_packet(t).unwrap().1;
    assert_eq!(echo.verification_tag, 0x5555);
    assert!(matches!(echo.chunks[0], Chunk::CookieEcho(_)));
    let t1 = a.poll_timeout();
    a.handle_packet(t, server_addr(), init_packet(vec![], 0x7777, 2), 60);
    let (_, out) = a.poll_packet(t).unwrap();
    assert_eq!(out.verification_tag, 0x7777);
    let Chunk::InitAck(ack) = &out.chunks[0] else {
        panic!()
    };
    assert_eq!(ack.initiate_tag, my_tag);
    assert_eq!(a.state(), State::CookieEchoed);
    assert_eq!(a.poll_timeout(), t1);
    // §5.2.3: an INIT ACK outside COOKIE-WAIT is discarded.
    let dup = Packet {
        src_port: 5000,
        dst_port: 5000,
        verification_tag: my_tag,
        chunks: vec![Chunk::InitAck(InitChunk {
            initiate_tag: 0x6666,
            a_rwnd: 1,
            outbound_streams: 1,
            inbound_streams: 1,
            initial_tsn: Tsn(1),
            params: vec![Param::StateCookie(Bytes::from_static(b"other"))],
        })],
    };
    a.handle_packet(t, server_addr(), dup, 60);
    assert_eq!(a.peer_tag(), 0x5555);
    assert!(a.poll_packet(t).is_none());
}

// The drive contract: handle_timeout before the deadline does nothing.
#[test]
fn early_timeout_is_a_no_op() {
    let mut a = Association::connect(
        Config::default(),
        Instant::ZERO,
        client_addr(),
        server_addr(),
        Seed(5),
    );
    let _ = a.poll_packet(Instant::ZERO).unwrap();
    let deadline = a.poll_timeout().unwrap();
    assert_eq!(deadline, Instant::from_secs(1));
    a.handle_timeout(Instant::from_millis(999));
    assert!(a.poll_packet(Instant::from_millis(999)).is_none());
    assert_eq!(a.poll_timeout(), Some(deadline));
    a.handle_timeout(deadline);
    assert!(matches!(
        a.poll_packet(deadline).unwrap().1.chunks[0],
        Chunk::Init(_)
    ));
    assert_eq!(a.poll_timeout(), Some(Instant::from_secs(3)));
}

// DATA far beyond the cumulative ack (more than a gap block can express)
// is dropped, not buffered.
#[test]
fn data_far_beyond_window_is_dropped() {
    let mut f = established_server(Config::default());
    let t = f.tsn;
    f.feed(vec![data(t.add(70_000), 0, 0, b"far")]);
    assert_eq!(f.a.rx.held, 0);
    assert_eq!(f.cum(), t.prev());
}

// §6.2.1: a gap-acked chunk that a later SACK no longer reports (below its
// highest reported TSN) is outstanding again and retransmitted on T3.
#[test]
fn renege_makes_chunks_outstanding_again() {
    let (mut a, now) = established_client(Config::default().with_trace());
    let mut tsns = Vec::new();
    for payload in [&b"one"[..], b"two", b"three"] {
        let m = thinstream_base::drive::Outgoing {
            stream: 0,
            unordered: false,
            payload,
        };
        a.send(now, m).unwrap();
        let (_, p) = a.poll_packet(now).unwrap();
        tsns.extend(p.chunks.iter().filter_map(|c| match c {
            Chunk::Data(d) => Some(d.tsn),
            _ => None,
        }));
    }
    let tsns: Vec<Tsn> = tsns;
    assert_eq!(tsns.len(), 3);
    let tag = a.local_tag();
    let sack = |gaps: Vec<GapBlock>| Packet {
        src_port: 5000,
        dst_port: 5000,
        verification_tag: tag,
        chunks: vec![Chunk::Sack(SackChunk {
            cum_tsn_ack: tsns[0].prev(),
            a_rwnd: 100_000,
            gap_blocks: gaps,
            duplicate_tsns: vec![],
        })],
    };
    a.handle_packet(
        now,
        server_addr(),
        sack(vec![GapBlock { start: 2, end: 3 }]),
        32,
    );
    assert_eq!(a.flight_size(), 3);
    a.check_invariants().unwrap();
    a.handle_packet(
        now,
        server_addr(),
        sack(vec![GapBlock { start: 3, end: 3 }]),
        32,
    );
    assert_eq!(a.flight_size(), 3 + 3, "\"two\" is outstanding again");
    a.check_invariants().unwrap();
    // T3 retransmits both unacknowledged chunks.
    let t3 = a.poll_timeout().unwrap();
    a.handle_timeout(t3);
    let (_, p) = a.poll_packet(t3).unwrap();
    let resent: Vec<Tsn> = p
        .chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::Data(d) => Some(d.tsn),
            _ => None,
        })
        .collect();
    assert_eq!(resent, vec![tsns[0], tsns[1]]);
    // Each unit is reported acknowledged at most once in the trace.
    let mut acked = Vec::new();
    while let Some(r) = a.poll_trace() {
        if let thinstream_base::trace::Record::Acked { units, .. } = r {
            acked.push(units.start);
        }
    }
    let mut dedup = acked.clone();
    dedup.dedup();
    assert_eq!(acked, dedup);
}

// TSN and SSN wrap-around: units keep counting, gaps and the cum ack are
// computed in serial arithmetic.
#[test]
fn tsn_and_ssn_wrap_around() {
    let mut f = established_server(Config::default());
    let mut rx = crate::association::receiver::Receiver::new(Tsn(u32::MAX - 1), 64 * 1024);
    rx.set_streams(f.a.in_streams);
    rx.streams[0].next_ssn = Ssn(65534);
    f.a.rx = rx;
    let t0 = Tsn(u32::MAX - 1);
    // Ordered SSNs wrap too: 65534, 65535, 0, 1.
    f.feed(vec![data(t0.add(2), 0, 0, b"c")]);
    f.feed(vec![data(t0, 0, 65534, b"a")]);
    let s = sack_of(&f.out()[0]);
    assert_eq!(s.cum_tsn_ack, t0);
    assert_eq!(s.gap_blocks, vec![GapBlock { start: 2, end: 2 }]);
    assert_eq!(f.received(), vec![b"a".to_vec()]);
    f.feed(vec![
        data(t0.add(1), 0, 65535, b"b"),
        data(t0.add(3), 0, 1, b"d"),
    ]);
    assert_eq!(f.cum(), Tsn(1));
    assert_eq!(
        f.received(),
        vec![b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
    );
    f.a.check_invariants().unwrap();
}

// Sender side of the wrap: TSNs assigned across 2^32, SACKs in serial
// arithmetic, units keep counting.
#[test]
fn sender_tsn_wrap_around() {
    let (mut a, now) = established_client(Config::default().with_trace());
    let mut tx = crate::association::sender::Sender::new(Tsn(u32::MAX - 1), 100_000);
    tx.ssn = vec![Ssn(0); usize::from(a.out_streams)];
    tx.frag = a.config.max_fragment();
    a.tx = tx;
    let mut tsns = Vec::new();
    for _ in 0..4 {
        let m = thinstream_base::drive::Outgoing {
            stream: 0,
            unordered: false,
            payload: b"xyz",
        };
        a.send(now, m).unwrap();
        let (_, p) = a.poll_packet(now).unwrap();
        for c in &p.chunks {
            if let Chunk::Data(d) = c {
                tsns.push(d.tsn);
            }
        }
    }
    assert_eq!(tsns, vec![Tsn(u32::MAX - 1), Tsn(u32::MAX), Tsn(0), Tsn(1)]);
    let tag = a.local_tag();
    let p = Packet {
        src_port: 5000,
        dst_port: 5000,
        verification_tag: tag,
        chunks: vec![Chunk::Sack(SackChunk {
            cum_tsn_ack: Tsn(u32::MAX),
            a_rwnd: 100_000,
            gap_blocks: vec![GapBlock { start: 2, end: 2 }],
            duplicate_tsns: vec![],
        })],
    };
    a.handle_packet(now, server_addr(), p, 32);
    a.check_invariants().unwrap();
    assert_eq!(a.flight_size(), 3, "only TSN 0 is outstanding");
    let mut acked = Vec::new();
    while let Some(r) = a.poll_trace() {
        if let thinstream_base::trace::Record::Acked { units, .. } = r {
            acked.push(units.start);
        }
    }
    assert_eq!(acked, vec![0, 1, 3]);
}

// A partially reliable message needs the peer's FORWARD TSN support
// (RFC 3758 §3.3); without it `send_with` refuses, reliable sends go on.
#[test]
fn partial_reliability_needs_forward_tsn_support() {
    use crate::association::SendParams;
    let (mut a, now) = established_client(Config::default());
    assert!(a.peer_supports_forward_tsn());
    a.peer_forward_tsn = false;
    for p in [
        SendParams {
            lifetime: Some(Duration::from_millis(10)),
            ..SendParams::default()
        },
        SendParams {
            max_retransmissions: Some(3),
            ..SendParams::default()
        },
    ] {
        assert_eq!(
            a.send_with(now, &p, b"x"),
            Err(thinstream_base::drive::SendError::Unsupported(
                "partial reliability: the peer does not support FORWARD TSN"
            ))
        );
    }
    assert!(a.send_with(now, &SendParams::default(), b"x").is_ok());
    assert_eq!(a.stats().messages_submitted, 1);
}
