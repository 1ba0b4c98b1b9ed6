//! Helpers shared by the `mechanisms_*` tests.
#![allow(dead_code, unreachable_pub)]

use thinstream_base::trace::{Record, TxReason};
use thinstream_base::{Duration, Instant, Seed};
use thinstream_proto::testkit::{Pair, Side};
use thinstream_proto::wire::{Chunk, Tsn};
use thinstream_proto::Config;

/// A preset with tracing on.
pub fn preset(spec: &str) -> Config {
    Config::from_preset(spec)
        .unwrap_or_else(|e| panic!("{e}"))
        .with_trace()
}

/// A connected pair with `one_way` delay.
pub fn pair(client: Config, server: Config, one_way_ms: u64, seed: u64) -> Pair {
    let mut p = Pair::new(
        client,
        server,
        Duration::from_millis(one_way_ms),
        Seed(seed),
    );
    p.connect();
    p
}

/// Every DATA piece the client sent: (time, unit, reason), in order.
pub fn client_data(p: &Pair) -> Vec<(Instant, u64, TxReason)> {
    p.client_trace
        .iter()
        .filter_map(|r| match r {
            Record::PacketSent { time, data, .. } => {
                Some(data.iter().map(move |d| (*time, d.units.start, d.reason)))
            }
            _ => None,
        })
        .flatten()
        .collect()
}

/// Retransmissions (anything but `New`) of `unit`: (time, reason).
pub fn retransmissions_of(p: &Pair, unit: u64) -> Vec<(Instant, TxReason)> {
    client_data(p)
        .into_iter()
        .filter(|&(_, u, r)| u == unit && r != TxReason::New)
        .map(|(t, _, r)| (t, r))
        .collect()
}

/// Milliseconds since `t0`.
pub fn ms(t: Instant, t0: Instant) -> u64 {
    (t - t0).as_millis()
}

/// The TSN the client's next new DATA chunk will carry: one after the
/// highest TSN it sent so far (or its initial TSN if none was sent).
pub fn next_tsn(p: &Pair) -> Tsn {
    let mut last = None;
    for s in p.sent.iter().filter(|s| s.from == Side::Client) {
        for c in &s.packet.chunks {
            if let Chunk::Data(d) = c {
                last = Some(match last {
                    Some(l) if Tsn::distance(l, d.tsn) >= 0 => l,
                    _ => d.tsn,
                });
            }
        }
    }
    match last {
        Some(t) => t.add(1),
        None => panic!("no DATA sent yet: send a warm-up message first"),
    }
}

/// Send one message of `len` bytes from the client now and put it on the wire.
pub fn send_now(p: &mut Pair, len: usize, tag: u32) {
    let mut payload = vec![0u8; len.max(4)];
    payload[..4].copy_from_slice(&tag.to_be_bytes());
    p.send(Side::Client, 0, false, &payload).unwrap();
    p.flush();
}

/// Messages the server delivered, by tag (first 4 bytes), in delivery order.
pub fn delivered_tags(p: &mut Pair) -> Vec<u32> {
    p.take_received(Side::Server)
        .iter()
        .map(|m| u32::from_be_bytes(m.2[..4].try_into().unwrap()))
        .collect()
}

/// Warm up: `n` messages `gap` apart, all delivered (RTT samples).
pub fn warm_up(p: &mut Pair, n: u32, gap: Duration) {
    for i in 0..n {
        send_now(p, 100, 1_000_000 + i);
        p.drive_for(gap);
    }
    p.take_received(Side::Server);
}

/// A trace with the records a mechanism adds without changing behaviour
/// (`Thin`) removed.
pub fn without_thin(trace: &[Record]) -> Vec<Record> {
    trace
        .iter()
        .filter(|r| !matches!(r, Record::Thin { .. }))
        .cloned()
        .collect()
}
