//! Hostile input: random bytes never panic and never kill an association.

use thinstream_base::drive::Transport;
use thinstream_base::{Datagram, Duration, Seed};
use thinstream_proto::testkit::{client_addr, server_addr, Pair, Side};
use thinstream_proto::wire::{write_checksum_field, Packet};
use thinstream_proto::State;

fn random_bytes(rng: &mut thinstream_base::Rng, max: u64) -> Vec<u8> {
    let len = rng.below(max) as usize;
    let mut v = vec![0u8; len];
    rng.fill_bytes(&mut v);
    v
}

// Random datagrams (mostly failing the checksum) are counted and dropped;
// the association carries on.
#[test]
fn random_bytes_are_dropped_and_the_association_survives() {
    let mut p = Pair::default_traced(21);
    p.connect();
    let mut rng = Seed(5).rng();
    for _ in 0..20_000 {
        let payload = random_bytes(&mut rng, 300);
        let now = p.now;
        p.server.handle_datagram(
            now,
            Datagram {
                src: client_addr(),
                dst: server_addr(),
                payload,
            },
        );
    }
    assert!(p.server.stats().malformed_packets > 19_000);
    assert_eq!(p.server.state(), State::Established);
    p.send(Side::Client, 0, false, b"still alive").unwrap();
    p.drive_for(Duration::from_secs(1));
    assert_eq!(
        p.take_received(Side::Server),
        vec![(0, false, b"still alive".to_vec())]
    );
}

// Random chunk bytes behind a valid header and checksum reach the state
// machine: no panic, and the accounting invariants hold throughout.
#[test]
fn random_chunks_with_valid_checksum_never_panic() {
    let mut parsed_total = 0;
    for seed in 0..20u64 {
        let mut p = Pair::default_traced(100 + seed);
        p.connect();
        p.send(Side::Client, 0, false, b"some data in flight")
            .unwrap();
        p.send(Side::Server, 1, false, b"and the other way")
            .unwrap();
        let mut rng = Seed(seed).derive("garbage").rng();
        for i in 0..2_000 {
            let side = if i % 2 == 0 {
                Side::Server
            } else {
                Side::Client
            };
            let tag = p.assoc(side).local_tag();
            let mut b = vec![0x13, 0x88, 0x13, 0x88];
            b.extend_from_slice(&tag.to_be_bytes());
            b.extend_from_slice(&[0; 4]);
            // A chunk header with a plausible type and length, then noise.
            let kind = rng.below(16) as u8;
            let body = random_bytes(&mut rng, 64);
            b.push(kind);
            b.push(rng.next_u32() as u8);
            b.extend_from_slice(&((body.len() + 4) as u16).to_be_bytes());
            b.extend_from_slice(&body);
            write_checksum_field(&mut b);
            let parsed = Packet::parse(&b).is_ok();
            let now = p.now;
            let (src, dst) = match side {
                Side::Server => (client_addr(), server_addr()),
                Side::Client => (server_addr(), client_addr()),
            };
            p.assoc(side).handle_datagram(
                now,
                Datagram {
                    src,
                    dst,
                    payload: b,
                },
            );
            parsed_total += usize::from(parsed);
            // flush() checks the invariants of both sides.
            p.drive_for(Duration::from_millis(1));
        }
    }
    // Enough of them decode to exercise the state machine.
    assert!(parsed_total > 2_000, "{parsed_total}");
}
