//! Partial reliability (RFC 3758 PR-SCTP with the RFC 7496 policies) and
//! the payload protocol identifier, end to end over the virtual link:
//! timed messages and limited retransmissions are abandoned whole, the
//! FORWARD TSN (or I-FORWARD-TSN with interleaving) moves the peer on, and
//! the association keeps delivering.

use thinstream_base::drive::AppEvent;
use thinstream_base::trace::{Record, TxReason};
use thinstream_base::{Duration, Seed};
use thinstream_proto::testkit::{Pair, Side};
use thinstream_proto::wire::{chunk_type, Chunk, Packet};
use thinstream_proto::{Config, SendParams};

fn traced() -> Config {
    Config::default().with_trace()
}

fn interleaving() -> Config {
    Config {
        interleaving: true,
        ..traced()
    }
}

fn connected(client: Config, server: Config, seed: u64) -> Pair {
    let mut p = Pair::new(client, server, Duration::from_millis(50), Seed(seed));
    p.connect();
    p
}

/// Whether `p` carries user data (DATA or I-DATA) starting with `prefix`.
fn carries(p: &Packet, prefix: &'static [u8]) -> bool {
    p.chunks.iter().any(|c| match c {
        Chunk::Data(d) => d.payload.starts_with(prefix),
        Chunk::IData(d) => d.payload.starts_with(prefix),
        _ => false,
    })
}

fn send_with(p: &mut Pair, params: SendParams, payload: &[u8]) -> u64 {
    let now = p.now;
    p.client
        .send_with(now, &params, payload)
        .unwrap_or_else(|e| panic!("send_with {params:?}: {e}"))
}

fn received_payloads(p: &mut Pair) -> Vec<Vec<u8>> {
    p.take_received(Side::Server)
        .into_iter()
        .map(|(_, _, b)| b)
        .collect()
}

/// A timed message whose every copy is lost is abandoned once its lifetime
/// has passed; the FORWARD TSN lets the receiver deliver the messages that
/// waited behind it on the same ordered stream, and later messages flow.
fn timed_message_abandoned(client: Config, server: Config, forward_kind: u8) {
    let mut p = connected(client, server, 3);
    p.drop_next(Side::Client, 1000, |pk| carries(pk, b"timed"));
    let timed = SendParams {
        lifetime: Some(Duration::from_millis(300)),
        ..SendParams::default()
    };
    send_with(&mut p, timed, b"timed message");
    p.flush();
    for i in 0..4u8 {
        p.drive_for(Duration::from_millis(10));
        send_with(&mut p, SendParams::default(), &[b'r', i]);
    }
    p.drive_for(Duration::from_secs(5));
    assert_eq!(
        received_payloads(&mut p),
        vec![vec![b'r', 0], vec![b'r', 1], vec![b'r', 2], vec![b'r', 3]],
        "the messages behind the abandoned one are delivered, in order"
    );
    let cs = *p.client.stats();
    assert_eq!(cs.abandoned_messages, 1);
    assert!(cs.forward_tsns_sent >= 1, "{cs:?}");
    assert!(p.server.stats().forward_tsns_received >= 1);
    assert!(p
        .sent
        .iter()
        .any(|s| s.from == Side::Client && s.has(forward_kind)));
    // Abandoned chunks left the flight: nothing outstanding, nothing queued.
    assert_eq!(p.client.flight_size(), 0);
    assert!(p.client.is_idle());
    // The copies of the timed message: none after its lifetime.
    let t0 = p
        .sent
        .iter()
        .find(|s| carries(&s.packet, b"timed"))
        .unwrap()
        .at;
    for s in p.sent.iter().filter(|s| carries(&s.packet, b"timed")) {
        assert!(s.at <= t0 + Duration::from_millis(300), "copy at {}", s.at);
    }
    assert!(p
        .client_trace
        .iter()
        .any(|r| matches!(r, Record::Abandoned { .. })));
    // The association goes on.
    send_with(&mut p, SendParams::default(), b"later");
    p.drive_for(Duration::from_secs(1));
    assert_eq!(received_payloads(&mut p), vec![b"later".to_vec()]);
    assert!(p.client.is_established() && p.server.is_established());
    assert_eq!(p.closed(Side::Client), None);
}

use thinstream_base::drive::Transport;

#[test]
fn timed_message_abandoned_after_loss_forward_tsn() {
    timed_message_abandoned(traced(), traced(), chunk_type::FORWARD_TSN);
}

#[test]
fn timed_message_abandoned_after_loss_i_forward_tsn() {
    timed_message_abandoned(interleaving(), interleaving(), chunk_type::I_FORWARD_TSN);
}

/// RFC 7496 limited retransmissions with a limit of 0: the message is sent
/// once; when that copy is lost, it is skipped instead of retransmitted.
#[test]
fn max_retransmissions_zero_lost_once_is_skipped() {
    let mut p = connected(traced(), traced(), 4);
    p.drop_next(Side::Client, 1, |pk| carries(pk, b"once"));
    let once = SendParams {
        max_retransmissions: Some(0),
        ..SendParams::default()
    };
    send_with(&mut p, once, b"once only");
    p.flush();
    for i in 0..4u8 {
        p.drive_for(Duration::from_millis(5));
        send_with(&mut p, SendParams::default(), &[b'n', i]);
    }
    p.drive_for(Duration::from_secs(5));
    let copies = p
        .sent
        .iter()
        .filter(|s| s.from == Side::Client && carries(&s.packet, b"once"))
        .count();
    assert_eq!(
        copies, 1,
        "a message with max_retransmissions=0 is never resent"
    );
    assert_eq!(
        received_payloads(&mut p),
        (0..4u8).map(|i| vec![b'n', i]).collect::<Vec<_>>()
    );
    assert_eq!(p.client.stats().abandoned_messages, 1);
    assert_eq!(
        p.client.stats().data_chunks_sent(TxReason::FastRetransmit),
        0
    );
    assert!(p.client.is_idle());
}

/// A limit of 2: lost every time, the message is abandoned after its
/// second retransmission; a message lost once is recovered.
#[test]
fn max_retransmissions_limit_counts_retransmissions() {
    let mut p = connected(traced(), traced(), 5);
    p.drop_next(Side::Client, 1000, |pk| carries(pk, b"limited"));
    let two = SendParams {
        max_retransmissions: Some(2),
        stream: 1,
        ..SendParams::default()
    };
    send_with(&mut p, two, b"limited");
    p.drive_for(Duration::from_secs(30));
    let copies = p
        .sent
        .iter()
        .filter(|s| s.from == Side::Client && carries(&s.packet, b"limited"))
        .count();
    assert_eq!(copies, 3, "first transmission + 2 retransmissions");
    assert_eq!(p.client.stats().abandoned_messages, 1);
    p.drop_next(Side::Client, 1, |pk| carries(pk, b"lucky"));
    send_with(&mut p, two, b"lucky");
    p.drive_for(Duration::from_secs(30));
    assert_eq!(received_payloads(&mut p), vec![b"lucky".to_vec()]);
    assert_eq!(p.client.stats().abandoned_messages, 1);
    assert!(p.client.is_idle());
}

/// A fragmented message is abandoned whole: every fragment still queued
/// (the first one arrived and was cumulatively acknowledged before the
/// message expired, so it is no longer the sender's), and no fragment of it
/// is delivered.
#[test]
fn fragmented_message_abandoned_whole() {
    let mut p = connected(traced(), traced(), 6);
    let big: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
    // Lose only the middle fragment, every time.
    let middle = big[1444..1454].to_vec();
    p.drop_next(Side::Client, 1000, move |pk| {
        pk.chunks.iter().any(|c| match c {
            Chunk::Data(d) => d.payload.starts_with(&middle),
            _ => false,
        })
    });
    let timed = SendParams {
        lifetime: Some(Duration::from_millis(200)),
        ..SendParams::default()
    };
    send_with(&mut p, timed, &big);
    send_with(&mut p, SendParams::default(), b"after");
    p.drive_for(Duration::from_secs(5));
    assert_eq!(received_payloads(&mut p), vec![b"after".to_vec()]);
    assert_eq!(p.client.stats().abandoned_messages, 1);
    assert_eq!(
        p.server.held_receive_bytes(),
        0,
        "the fragments that arrived are dropped"
    );
    let abandoned_units: u64 = p
        .client_trace
        .iter()
        .filter_map(|r| match r {
            Record::Abandoned { units, .. } => Some(units.len()),
            _ => None,
        })
        .sum();
    assert_eq!(abandoned_units, 2, "the lost fragment and the one after it");
}

/// Unordered timed messages are skipped without a stream entry; the
/// receiver keeps delivering unordered and ordered data.
#[test]
fn unordered_timed_message_abandoned() {
    let mut p = connected(traced(), traced(), 7);
    p.drop_next(Side::Client, 1000, |pk| carries(pk, b"u-timed"));
    let timed = SendParams {
        unordered: true,
        lifetime: Some(Duration::from_millis(100)),
        ..SendParams::default()
    };
    send_with(&mut p, timed, b"u-timed");
    send_with(
        &mut p,
        SendParams {
            unordered: true,
            ..SendParams::default()
        },
        b"u-reliable",
    );
    send_with(&mut p, SendParams::default(), b"ordered");
    p.drive_for(Duration::from_secs(5));
    let mut got = received_payloads(&mut p);
    got.sort();
    assert_eq!(got, vec![b"ordered".to_vec(), b"u-reliable".to_vec()]);
    let fwd = p
        .sent
        .iter()
        .flat_map(|s| s.packet.chunks.iter())
        .find_map(|c| match c {
            Chunk::ForwardTsn(f) => Some(f.clone()),
            _ => None,
        })
        .expect("a FORWARD TSN was sent");
    assert!(fwd.streams.is_empty(), "unordered: no stream entry {fwd:?}");
    assert!(p.client.is_idle());
}

/// A FORWARD TSN that is lost is sent again when T3 expires.
#[test]
fn lost_forward_tsn_is_retransmitted() {
    let mut p = connected(traced(), traced(), 8);
    p.drop_next(Side::Client, 1000, |pk| carries(pk, b"gone"));
    p.drop_chunk(Side::Client, chunk_type::FORWARD_TSN, 1);
    let once = SendParams {
        max_retransmissions: Some(0),
        ..SendParams::default()
    };
    send_with(&mut p, once, b"gone");
    p.drive_for(Duration::from_secs(10));
    let fwds = p
        .sent
        .iter()
        .filter(|s| s.from == Side::Client && s.has(chunk_type::FORWARD_TSN))
        .count();
    assert!(fwds >= 2, "{fwds} FORWARD TSN packets");
    assert!(
        p.client.is_idle(),
        "the peer's SACK covered the skipped TSN"
    );
    assert_eq!(p.server.stats().forward_tsns_received, (fwds - 1) as u64);
}

/// The PPID travels with the message: DATA and I-DATA, single and
/// fragmented messages.
#[test]
fn ppid_reaches_the_receiver() {
    for cfg in [traced(), interleaving()] {
        let mut p = connected(cfg.clone(), cfg, 9);
        let big = vec![7u8; 5000];
        for (ppid, payload) in [(51u32, &b"small"[..]), (0xdead_beef, &big[..])] {
            let params = SendParams {
                ppid,
                stream: 2,
                ..SendParams::default()
            };
            send_with(&mut p, params, payload);
        }
        p.drive_for(Duration::from_secs(1));
        let got: Vec<(u32, usize)> = p
            .server_events
            .iter()
            .filter_map(|e| match e {
                AppEvent::Received { ppid, payload, .. } => Some((*ppid, payload.len())),
                _ => None,
            })
            .collect();
        assert_eq!(got, vec![(51, 5), (0xdead_beef, 5000)]);
    }
}

/// Random loss with a mix of timed, limited and reliable messages on
/// several streams: the invariants hold at every step (the harness checks
/// them), reliable messages all arrive, each stream's messages arrive in
/// order, nothing is delivered twice, and the association survives.
#[test]
fn random_loss_with_partial_reliability() {
    for (seed, cfg) in [(21u64, traced()), (22, interleaving())] {
        let mut p = connected(cfg.clone(), cfg, seed);
        let mut rng = Seed(seed).derive("loss").rng();
        p.impair = Some(Box::new(move |_, _| {
            if rng.below(100) < 10 {
                Vec::new()
            } else {
                vec![Duration::ZERO]
            }
        }));
        let mut pick = Seed(seed).derive("messages").rng();
        let mut reliable = Vec::new();
        for i in 0..300u32 {
            let stream = (pick.below(3)) as u16;
            let size = 1 + pick.below(3000) as usize;
            let kind = pick.below(3);
            let params = SendParams {
                stream,
                lifetime: (kind == 1).then(|| Duration::from_millis(150)),
                max_retransmissions: (kind == 2).then_some(1),
                ..SendParams::default()
            };
            let mut payload = vec![0u8; size.max(8)];
            payload[..4].copy_from_slice(&i.to_be_bytes());
            payload[4..6].copy_from_slice(&stream.to_be_bytes());
            if kind == 0 {
                reliable.push(i);
            }
            send_with(&mut p, params, &payload);
            p.drive_for(Duration::from_millis(pick.below(30)));
        }
        p.impair = None;
        p.drive_for(Duration::from_secs(120));
        let got = p.take_received(Side::Server);
        let ids: Vec<u32> = got
            .iter()
            .map(|m| u32::from_be_bytes(m.2[..4].try_into().unwrap()))
            .collect();
        let mut seen = ids.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), ids.len(), "a message was delivered twice");
        for r in &reliable {
            assert!(ids.contains(r), "reliable message {r} lost (seed {seed})");
        }
        for s in 0..3u16 {
            let on: Vec<u32> = got
                .iter()
                .filter(|m| m.0 == s)
                .map(|m| u32::from_be_bytes(m.2[..4].try_into().unwrap()))
                .collect();
            assert!(
                on.windows(2).all(|w| w[0] < w[1]),
                "stream {s} out of order"
            );
        }
        assert!(p.client.stats().abandoned_messages > 0);
        assert!(p.client.is_idle(), "seed {seed}: data left over");
        assert_eq!(p.closed(Side::Client), None);
    }
}

/// A burst far beyond the congestion window with a 2 ms lifetime (50 ms
/// one-way delay): the messages that did not fit into the first flight
/// expire before their first transmission. They are abandoned unsent (their
/// TSNs are skipped by FORWARD TSN, never put on the wire), the ones that
/// went out arrive, and the association is idle afterwards.
#[test]
fn burst_expires_before_first_transmission() {
    for cfg in [traced(), interleaving()] {
        let mut p = connected(cfg.clone(), cfg, 3);
        let n = 200u32;
        for i in 0..n {
            let mut payload = vec![0u8; 3000];
            payload[..4].copy_from_slice(&i.to_be_bytes());
            let params = SendParams {
                stream: (i % 3) as u16,
                lifetime: Some(Duration::from_millis(2)),
                ..SendParams::default()
            };
            send_with(&mut p, params, &payload);
        }
        p.drive_for(Duration::from_secs(5));
        let got = received_payloads(&mut p).len() as u64;
        let st = *p.client.stats();
        let sent_ids: std::collections::BTreeSet<u32> = p
            .sent
            .iter()
            .filter(|s| s.from == Side::Client)
            .flat_map(|s| s.packet.chunks.iter())
            .filter_map(|c| match c {
                Chunk::Data(d) if d.beginning => Some(&d.payload),
                Chunk::IData(d) if d.beginning => Some(&d.payload),
                _ => None,
            })
            .map(|b| u32::from_be_bytes(b[..4].try_into().unwrap()))
            .collect();
        assert!(
            got > 0 && st.abandoned_messages > 100,
            "{got} delivered, {st:?}"
        );
        assert_eq!(got + st.abandoned_messages, u64::from(n));
        assert!(
            (sent_ids.len() as u64) < u64::from(n) / 2,
            "most messages were never sent: {}",
            sent_ids.len()
        );
        assert!(st.forward_tsns_sent >= 1);
        assert!(p.client.is_idle());
        assert_eq!(p.client.flight_size(), 0);
        assert_eq!(p.server.held_receive_bytes(), 0);
    }
}
