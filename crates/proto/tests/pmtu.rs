//! Path MTU discovery (RFC 8899 with padded HEARTBEATs,
//! `Config::pmtu_probe_max`) over the virtual link: the search finds what
//! the path carries, leaves a path that carries nothing larger alone, and
//! falls back when a discovered size stops getting through.

use std::cell::Cell;
use std::rc::Rc;

use thinstream_base::{Duration, Seed};
use thinstream_proto::association::pmtu::{MAX_PROBES, PAD_CHUNK_TYPE, RESOLUTION};
use thinstream_proto::testkit::{Pair, Side};
use thinstream_proto::wire::chunk_type;
use thinstream_proto::Config;

fn probing(max: usize) -> Config {
    Config {
        pmtu_probe_max: Some(max),
        ..Config::production()
    }
}

/// A pair whose link drops every packet larger than `limit` (changeable).
fn pair_with_limit(client: Config, limit: Rc<Cell<usize>>) -> Pair {
    let mut p = Pair::new(
        client,
        Config::production(),
        Duration::from_millis(20),
        Seed(3),
    );
    p.impair = Some(Box::new(move |_, packet| {
        if packet.encoded_len() > limit.get() {
            vec![]
        } else {
            vec![Duration::ZERO]
        }
    }));
    p.connect();
    p
}

fn receive_all(p: &mut Pair, n: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    for _ in 0..200 {
        got.extend(p.take_received(Side::Server).into_iter().map(|m| m.2));
        if got.len() >= n {
            break;
        }
        p.drive_for(Duration::from_millis(500));
    }
    got
}

#[test]
fn the_search_settles_just_below_what_the_path_carries() {
    let limit = Rc::new(Cell::new(4000));
    let mut p = pair_with_limit(probing(9000), limit);
    p.drive_for(Duration::from_secs(60));
    let pmtu = p.client.config().pmtu;
    assert!(
        pmtu <= 4000 && pmtu + RESOLUTION >= 4000,
        "settled at {pmtu}"
    );
    let probes = p.client.stats().pmtu_probes_sent;
    assert!(probes <= 8 * u64::from(MAX_PROBES), "{probes} probes");
    // Probes are a HEARTBEAT and a PAD chunk, alone in their packet.
    let probe = p
        .sent
        .iter()
        .find(|s| s.from == Side::Client && s.has(PAD_CHUNK_TYPE))
        .expect("a probe was sent");
    assert_eq!(probe.packet.chunks.len(), 2);
    assert!(probe.has(chunk_type::HEARTBEAT));
    // New messages are cut to the discovered size and arrive whole.
    let body: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
    p.send(Side::Client, 0, false, &body).unwrap();
    let got = receive_all(&mut p, 1);
    assert_eq!(got, vec![body]);
    let biggest = p
        .sent
        .iter()
        .filter(|s| {
            s.from == Side::Client && (s.has(chunk_type::DATA) || s.has(chunk_type::I_DATA))
        })
        .map(|s| s.packet.encoded_len())
        .max()
        .unwrap();
    assert!(
        biggest > 1472 && biggest <= pmtu,
        "largest DATA packet {biggest}"
    );
    assert!(p.closed(Side::Client).is_none());
}

#[test]
fn a_path_that_carries_nothing_larger_keeps_the_base_size() {
    let limit = Rc::new(Cell::new(1472));
    let mut p = pair_with_limit(probing(16_384), limit);
    p.drive_for(Duration::from_secs(120));
    assert_eq!(p.client.config().pmtu, 1472);
    // The search ended: no probe in the last minute.
    let last_probe = p
        .sent
        .iter()
        .filter(|s| s.has(PAD_CHUNK_TYPE))
        .map(|s| s.at)
        .max()
        .unwrap();
    assert!(p.now - last_probe > Duration::from_secs(60));
    // Unanswered probes are not failures of the association.
    assert!(p.closed(Side::Client).is_none());
    let body = vec![7u8; 5000];
    p.send(Side::Client, 0, false, &body).unwrap();
    assert_eq!(receive_all(&mut p, 1), vec![body]);
}

#[test]
fn without_a_probing_bound_nothing_is_probed() {
    let limit = Rc::new(Cell::new(65_535));
    let mut p = pair_with_limit(Config::production(), limit);
    p.drive_for(Duration::from_secs(30));
    assert_eq!(p.client.stats().pmtu_probes_sent, 0);
    assert!(!p.sent.iter().any(|s| s.has(PAD_CHUNK_TYPE)));
    assert_eq!(p.client.config().pmtu, 1472);
}

#[test]
fn a_black_hole_after_discovery_falls_back_and_data_gets_through() {
    let limit = Rc::new(Cell::new(65_535));
    let mut p = pair_with_limit(probing(9000), limit.clone());
    p.drive_for(Duration::from_secs(5));
    assert_eq!(p.client.config().pmtu, 9000);
    // The path shrinks: large packets vanish from now on.
    limit.set(1472);
    let mut sent = Vec::new();
    for i in 0..50u8 {
        let m = vec![i; 100];
        p.send(Side::Client, 0, false, &m).unwrap();
        sent.push(m);
    }
    let got = receive_all(&mut p, 50);
    assert_eq!(got, sent);
    assert_eq!(p.client.config().pmtu, 1472);
    assert_eq!(p.client.stats().pmtu_black_holes, 1);
    assert!(p.closed(Side::Client).is_none());
}
