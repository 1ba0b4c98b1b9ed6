//! Message interleaving (RFC 8260 I-DATA) over the virtual link:
//! negotiation, the stream scheduler interleaving a large message with
//! small ones, and reassembly/ordering under loss.

use thinstream_base::drive::AppEvent;
use thinstream_base::{Duration, Instant, Seed};
use thinstream_proto::testkit::{Pair, Side};
use thinstream_proto::wire::{chunk_type, Chunk, Param};
use thinstream_proto::Config;

fn cfg(interleaving: bool) -> Config {
    Config {
        interleaving,
        ..Config::default().with_trace()
    }
}

/// Whether the INIT or INIT ACK `side` sent lists I-DATA as supported.
fn offered(p: &Pair, side: Side) -> bool {
    p.sent
        .iter()
        .filter(|s| s.from == side)
        .flat_map(|s| s.packet.chunks.iter())
        .filter_map(|c| match c {
            Chunk::Init(i) | Chunk::InitAck(i) => Some(i),
            _ => None,
        })
        .flat_map(|i| i.params.iter())
        .any(|p| matches!(p, Param::SupportedExtensions(e) if e.contains(&chunk_type::I_DATA)))
}

// RFC 8260 §2.2.3: I-DATA is used only when both ends list it in their
// Supported Extensions; otherwise both send DATA. Data flows either way.
#[test]
fn idata_negotiated_only_when_both_offer() {
    for (client, server) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut p = Pair::new(cfg(client), cfg(server), Duration::from_millis(20), Seed(1));
        p.connect();
        assert_eq!(offered(&p, Side::Client), client);
        assert_eq!(offered(&p, Side::Server), server);
        let both = client && server;
        assert_eq!(p.client.interleaving(), both, "{client} {server}");
        assert_eq!(p.server.interleaving(), both, "{client} {server}");
        let big = vec![3u8; 4000];
        p.send(Side::Client, 1, false, &big).unwrap();
        p.send(Side::Server, 0, true, b"back").unwrap();
        p.drive_for(Duration::from_secs(1));
        assert_eq!(p.take_received(Side::Server), vec![(1, false, big)]);
        assert_eq!(
            p.take_received(Side::Client),
            vec![(0, true, b"back".to_vec())]
        );
        let (mut data, mut idata) = (0, 0);
        for s in &p.sent {
            data += usize::from(s.has(chunk_type::DATA));
            idata += usize::from(s.has(chunk_type::I_DATA));
        }
        if both {
            assert_eq!((data, idata > 0), (0, true));
        } else {
            assert_eq!((data > 0, idata), (true, 0));
        }
    }
}

/// Drive in 1 ms steps until `until`, timestamping the server's deliveries:
/// (time, stream, payload length, first byte).
fn deliveries(p: &mut Pair, until: Instant, out: &mut Vec<(Instant, u16, usize, u8)>) {
    while p.now < until {
        p.drive_for(Duration::from_millis(1));
        for e in p.server_events.drain(..) {
            if let AppEvent::Received {
                stream, payload, ..
            } = e
            {
                out.push((p.now, stream, payload.len(), payload[0]));
            }
        }
    }
}

/// A 1 MB message on stream 1, then 100-byte messages on stream 0 every
/// 10 ms while it is transferred. Returns (small-message latencies in ms,
/// time the large message took in ms).
fn large_and_small(interleaving: bool) -> (Vec<u64>, u64) {
    let c = Config {
        max_message_size: 2 << 20,
        send_buffer: 4 << 20,
        receive_buffer: 4 << 20,
        ..cfg(interleaving)
    };
    let mut p = Pair::new(c.clone(), c, Duration::from_millis(10), Seed(5));
    p.log_packets = interleaving;
    p.connect();
    let t0 = p.now;
    let big: Vec<u8> = vec![0xbb; 1 << 20];
    p.send(Side::Client, 1, false, &big).unwrap();
    let mut sent_at = Vec::new();
    let mut got = Vec::new();
    for i in 0..30u8 {
        let mut small = vec![i; 100];
        small[0] = i;
        p.send(Side::Client, 0, false, &small).unwrap();
        sent_at.push(p.now);
        let next = p.now + Duration::from_millis(10);
        deliveries(&mut p, next, &mut got);
    }
    let end = p.now + Duration::from_secs(30);
    while p.now < end && got.iter().all(|d| d.1 != 1) {
        let next = p.now + Duration::from_millis(50);
        deliveries(&mut p, next, &mut got);
    }
    let big_done = got
        .iter()
        .find(|d| d.1 == 1)
        .map(|d| d.0)
        .expect("the large message arrives");
    assert_eq!(got.iter().find(|d| d.1 == 1).unwrap().2, 1 << 20);
    let small: Vec<_> = got.iter().filter(|d| d.1 == 0).collect();
    assert_eq!(small.len(), 30, "every small message arrives");
    // Per-stream order.
    assert!(small.windows(2).all(|w| w[0].3 < w[1].3));
    let lat = small
        .iter()
        .map(|d| (d.0 - sent_at[usize::from(d.3)]).as_millis())
        .collect();
    if interleaving {
        // Fragments of the large message and small messages alternate on
        // the wire: some stream-0 I-DATA goes out between the first and the
        // last fragment of the large message.
        let frags: Vec<(Instant, bool)> = p
            .sent
            .iter()
            .filter(|s| s.from == Side::Client)
            .flat_map(|s| s.packet.chunks.iter().map(move |c| (s.at, c)))
            .filter_map(|(at, c)| match c {
                Chunk::IData(d) => Some((at, d.stream == 1)),
                _ => None,
            })
            .collect();
        let first = frags.iter().position(|f| f.1).unwrap();
        let last = frags.iter().rposition(|f| f.1).unwrap();
        let between = frags[first..last].iter().filter(|f| !f.1).count();
        // Every small message submitted before the large one's last
        // fragment left went out among its fragments.
        let last_at = frags[last].0;
        let during = sent_at.iter().filter(|t| **t < last_at).count();
        assert!(
            between + 1 >= during && during >= 10,
            "{between} of {during} small messages between the fragments"
        );
    }
    (lat, (big_done - t0).as_millis())
}

// The goal of RFC 8260: a large message on one stream does not hold back
// small messages on another. With DATA the small messages queue behind the
// large message's remaining fragments (TSNs are assigned in submission
// order); with I-DATA the scheduler sends them in the next packet.
#[test]
fn large_message_does_not_hold_back_small_ones() {
    let (with, big_with) = large_and_small(true);
    let (without, big_without) = large_and_small(false);
    let max_with = *with.iter().max().unwrap();
    let max_without = *without.iter().max().unwrap();
    eprintln!(
        "small-message latency max: {max_with} ms interleaved, {max_without} ms with DATA; \
         1 MB took {big_with} ms / {big_without} ms"
    );
    // One-way delay 10 ms; a small message waits at most for cwnd room
    // (about one round trip) when interleaved.
    assert!(max_with <= 45, "interleaved latencies {with:?}");
    assert!(
        big_with > 4 * max_with,
        "the large transfer ({big_with} ms) outlasts the small messages' latency"
    );
    // Without interleaving the first small message waits for most of the
    // large message.
    assert!(
        max_without > 3 * max_with && max_without > big_without / 2,
        "DATA latencies {without:?}"
    );
}

/// Random loss and reordering with interleaved, fragmented messages on
/// several streams, ordered and unordered: everything arrives intact,
/// ordered streams in order, nothing twice.
#[test]
fn interleaved_reassembly_under_loss() {
    for seed in [31u64, 32, 33] {
        let mut p = Pair::new(cfg(true), cfg(true), Duration::from_millis(15), Seed(seed));
        p.connect();
        let mut rng = Seed(seed).derive("loss").rng();
        p.impair = Some(Box::new(move |_, _| match rng.below(100) {
            0..=7 => Vec::new(),
            8..=11 => vec![Duration::from_millis(7)],
            _ => vec![Duration::ZERO],
        }));
        let mut pick = Seed(seed).derive("messages").rng();
        let mut expect = Vec::new();
        for i in 0..200u32 {
            let stream = pick.below(4) as u16;
            let unordered = pick.below(4) == 0;
            let size = 8 + pick.below(6000) as usize;
            let mut payload: Vec<u8> = (0..size).map(|k| (k as u32 ^ i) as u8).collect();
            payload[..4].copy_from_slice(&i.to_be_bytes());
            p.send(Side::Client, stream, unordered, &payload).unwrap();
            expect.push((stream, unordered, payload));
            p.drive_for(Duration::from_millis(pick.below(8)));
        }
        p.impair = None;
        p.drive_for(Duration::from_secs(120));
        let got = p.take_received(Side::Server);
        assert_eq!(got.len(), expect.len(), "seed {seed}");
        let id = |m: &(u16, bool, Vec<u8>)| u32::from_be_bytes(m.2[..4].try_into().unwrap());
        for m in &got {
            assert_eq!(
                m,
                &expect[id(m) as usize],
                "seed {seed}: message {} damaged",
                id(m)
            );
        }
        for s in 0..4u16 {
            let ids: Vec<u32> = got.iter().filter(|m| m.0 == s && !m.1).map(id).collect();
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "seed {seed} stream {s}"
            );
        }
        assert!(p.client.is_idle());
        assert_eq!(p.server.held_receive_bytes(), 0);
    }
}
