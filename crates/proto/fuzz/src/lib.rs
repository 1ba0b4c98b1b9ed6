//! The property both fuzz entry points check (the libFuzzer target
//! `decode` and the stable `smoke` runner), plus input mutators for the
//! smoke runner.

use thinstream_base::Rng;
use thinstream_proto::wire::{write_checksum_field, Packet, COMMON_HEADER_LEN};

/// Decode `data` with and without checksum verification. Must never panic;
/// if it decodes, the representation must re-encode to bytes that decode
/// (checksum included) to the same representation, and re-encoding that is
/// a fixed point. Returns whether `data` decoded without checksum checking.
pub fn check_decode(data: &[u8]) -> bool {
    let unchecked = Packet::parse_unchecked(data);
    let checked = Packet::parse(data);
    if let Ok(p) = &checked {
        assert_eq!(
            unchecked.as_ref(),
            Ok(p),
            "checked and unchecked parses disagree"
        );
    }
    let Ok(p) = unchecked else { return false };
    let out = p.to_bytes();
    assert_eq!(
        out.len(),
        p.encoded_len(),
        "encoded_len disagrees with emit"
    );
    let again = match Packet::parse(&out) {
        Ok(again) => again,
        Err(e) => panic!("re-emitted packet does not parse: {e}\n{p:?}"),
    };
    assert_eq!(again, p, "re-emitted packet decodes differently");
    assert_eq!(again.to_bytes(), out, "emit is not a fixed point");
    true
}

/// Produce a new input from `seed` by a few random edits: bit flips, byte
/// writes, truncation, chunk-length edits, splices; the checksum is
/// repaired half of the time so verified parsing reaches the chunks.
pub fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut buf = seed.to_vec();
    let edits = 1 + rng.below(4);
    for _ in 0..edits {
        let n = buf.len() as u64;
        match rng.below(6) {
            0 if n > 0 => {
                let i = rng.below(n) as usize;
                buf[i] ^= 1 << rng.below(8);
            }
            1 if n > 0 => {
                let i = rng.below(n) as usize;
                buf[i] = rng.next_u32() as u8;
            }
            2 => buf.truncate(rng.below(n + 1) as usize),
            3 if n as usize >= COMMON_HEADER_LEN + 4 => {
                // Edit a 16-bit field at a 4-aligned offset + 2: where
                // chunk and parameter length fields live.
                let slots = (buf.len() - COMMON_HEADER_LEN) / 4;
                let at = COMMON_HEADER_LEN + 2 + 4 * rng.below(slots as u64) as usize;
                let v = match rng.below(3) {
                    0 => rng.next_u32() as u16,
                    1 => rng.below(24) as u16,
                    _ => u16::from_be_bytes([buf[at], buf[at + 1]])
                        .wrapping_add(rng.below(9) as u16)
                        .wrapping_sub(4),
                };
                buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
            }
            4 => {
                let extra = rng.below(9) as usize;
                for _ in 0..extra {
                    buf.push(rng.next_u32() as u8);
                }
            }
            _ if n > 1 => {
                // Duplicate a slice of the input in place (splice).
                let a = rng.below(n) as usize;
                let b = a + rng.below(n - a as u64 + 1) as usize;
                let piece = buf[a..b.min(buf.len())].to_vec();
                let at = rng.below(buf.len() as u64 + 1) as usize;
                buf.splice(at..at, piece);
            }
            _ => {}
        }
    }
    if rng.below(2) == 0 {
        write_checksum_field(&mut buf);
    }
    buf
}

/// A whole endpoint pair fed operations decoded from `data`: real traffic
/// between a client and a server endpoint, interleaved with arbitrary
/// datagrams (raw, or with the ports, verification tag and checksum of a
/// live association patched in so they reach its state machine in every
/// state), time jumps, sends, closes, aborts and losses. After every
/// operation every association's accounting must hold
/// (`Association::check_invariants`); nothing may panic. Returns how many
/// associations reached ESTABLISHED (how deep the input went).
pub fn check_endpoint(data: &[u8]) -> u32 {
    use std::net::SocketAddr;
    use thinstream_base::{Datagram, Instant, Seed};
    use thinstream_proto::{Config, Endpoint, SendParams};

    const PRESETS: [&str; 5] = ["rfc", "linux", "thin", "production", "thin+rdb+frt=1"];
    let Some((&first, rest)) = data.split_first() else {
        return 0;
    };
    let Ok(mut cfg) = Config::from_preset(PRESETS[usize::from(first % 5)]) else {
        return 0;
    };
    let mut established = 0;
    cfg.interleaving = first & 0x10 != 0;
    cfg.receive_buffer = if first & 0x20 != 0 { 4096 } else { 65536 };
    cfg.pmtu = if first & 0x40 != 0 { 200 } else { 1472 };
    // Path MTU probing (RFC 8899) on some inputs: probes, their answers and
    // size changes meet every other operation.
    cfg.pmtu_probe_max = (first & 0x08 != 0).then_some(4000);
    let addrs: [SocketAddr; 2] = [
        "10.0.0.1:9899".parse().expect("address"),
        "10.0.0.2:9899".parse().expect("address"),
    ];
    let mut eps = [
        Endpoint::new(cfg.clone(), addrs[0], Seed(1), false),
        Endpoint::new(cfg, addrs[1], Seed(2), true),
    ];
    let mut now = Instant::ZERO;
    eps[0].connect(now, addrs[1]);
    let mut pending: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
    let mut input = rest.iter().copied();
    let mut next = move || input.next();
    let check = |eps: &[Endpoint; 2]| {
        for ep in eps {
            for id in ep.associations() {
                if let Some(a) = ep.association(id) {
                    if let Err(e) = a.check_invariants() {
                        panic!("association {id:?} ({:?}): {e}", a.state());
                    }
                }
            }
        }
    };
    let mut ops = 0;
    while let Some(op) = next() {
        ops += 1;
        if ops > 2000 {
            break;
        }
        let side = usize::from(op >> 7);
        match op & 0x7 {
            0 => {
                // Let the real traffic flow (a few rounds).
                for _ in 0..3 {
                    for from in 0..2 {
                        for d in std::mem::take(&mut pending[from]) {
                            eps[1 - from].handle_slice(now, addrs[from], &d);
                        }
                    }
                    for (s, ep) in eps.iter_mut().enumerate() {
                        while let Some(d) = ep.poll_transmit(now) {
                            pending[s].push(d.payload);
                        }
                    }
                }
            }
            1 | 2 => {
                // An arbitrary datagram for `side`, patched to match a live
                // association when the op says so.
                let len = usize::from(next().unwrap_or(0));
                let mut bytes: Vec<u8> = (0..len).map_while(|_| next()).collect();
                if op & 0x7 == 2 {
                    if bytes.len() < COMMON_HEADER_LEN {
                        bytes.resize(COMMON_HEADER_LEN, 0);
                    }
                    let target = eps[side]
                        .associations()
                        .next()
                        .and_then(|id| eps[side].association(id))
                        .map(|a| (a.peer_port(), a.config().local_port, a.local_tag()));
                    if let Some((src, dst, tag)) = target {
                        bytes[0..2].copy_from_slice(&src.to_be_bytes());
                        bytes[2..4].copy_from_slice(&dst.to_be_bytes());
                        if op & 0x40 == 0 {
                            bytes[4..8].copy_from_slice(&tag.to_be_bytes());
                        }
                    }
                    write_checksum_field(&mut bytes);
                }
                if op & 0x20 != 0 {
                    eps[side].handle_slice(now, addrs[1 - side], &bytes);
                } else {
                    eps[side].handle_datagram(
                        now,
                        Datagram {
                            src: addrs[1 - side],
                            dst: addrs[side],
                            payload: bytes,
                        },
                    );
                }
            }
            3 => {
                let ms = u64::from(next().unwrap_or(0)) * 20;
                now = now + thinstream_base::Duration::from_millis(ms);
                for ep in &mut eps {
                    if ep.poll_timeout().is_some_and(|t| t <= now) {
                        ep.handle_timeout(now);
                    }
                }
            }
            4 => {
                let size = usize::from(next().unwrap_or(0)) * 16 + 1;
                let stream = u16::from(next().unwrap_or(0) % 4);
                let ids: Vec<_> = eps[side].associations().collect();
                for id in ids {
                    let params = SendParams {
                        stream,
                        unordered: op & 0x40 != 0,
                        lifetime: (op & 0x20 != 0)
                            .then(|| thinstream_base::Duration::from_millis(100)),
                        ..SendParams::default()
                    };
                    let _ = eps[side].send_with(now, id, &params, &vec![0x5a; size]);
                }
            }
            5 => {
                let ids: Vec<_> = eps[side].associations().collect();
                for id in ids {
                    eps[side].close(now, id);
                }
            }
            6 => {
                let ids: Vec<_> = eps[side].associations().collect();
                for id in ids {
                    eps[side].abort(now, id, "fuzz");
                }
            }
            _ => pending[side].clear(),
        }
        for (s, ep) in eps.iter_mut().enumerate() {
            while let Some(d) = ep.poll_transmit(now) {
                if pending[s].len() < 256 {
                    pending[s].push(d.payload);
                }
            }
            while let Some((_, e)) = ep.poll_event() {
                established += u32::from(e == thinstream_base::drive::AppEvent::Established);
            }
        }
        check(&eps);
    }
    established
}

/// A preset string: parsing must never panic, and what parses must be a
/// configuration whose timer bounds agree with each other.
pub fn check_preset(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(c) = thinstream_proto::Config::from_preset(&text) {
        assert!(
            c.rto_min <= c.rto_max && c.rto_initial <= c.rto_max,
            "{text:?} parsed to contradicting timer bounds"
        );
    }
}
