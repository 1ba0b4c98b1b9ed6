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
