//! Duplication and bit corruption.

use thinstream_base::{Probability, Rng};

/// Decides, once per offered packet, whether a surviving packet is sent twice.
#[derive(Clone, Debug)]
pub struct Duplicator {
    p: Probability,
    rng: Rng,
}

impl Duplicator {
    pub fn new(p: Probability, rng: Rng) -> Self {
        Duplicator { p, rng }
    }

    pub fn next_duplicated(&mut self) -> bool {
        self.rng.chance(self.p.get())
    }
}

/// Flips one uniformly chosen payload bit of a chosen copy. A receiver's
/// checksum (the SCTP CRC32c, RFC 9260 §6.8) then rejects the packet.
#[derive(Clone, Debug)]
pub struct Corrupter {
    p: Probability,
    rng: Rng,
}

impl Corrupter {
    pub fn new(p: Probability, rng: Rng) -> Self {
        Corrupter { p, rng }
    }

    /// Maybe corrupts `payload`; returns whether a bit was flipped. One draw
    /// per copy decides; an empty payload has no bit to flip.
    pub fn maybe_corrupt(&mut self, payload: &mut [u8]) -> bool {
        if !self.rng.chance(self.p.get()) || payload.is_empty() {
            return false;
        }
        let bit = self.rng.below(payload.len() as u64 * 8);
        payload[(bit / 8) as usize] ^= 1 << (bit % 8);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinstream_base::Seed;

    // Every corruption flips exactly one bit and keeps the length.
    #[test]
    fn corruption_flips_exactly_one_bit() {
        let mut c = Corrupter::new(Probability::ONE, Seed(3).rng());
        let mut seen_bits = std::collections::BTreeSet::new();
        for _ in 0..2000 {
            let original: Vec<u8> = (0..37u8).collect();
            let mut p = original.clone();
            assert!(c.maybe_corrupt(&mut p));
            assert_eq!(p.len(), original.len());
            let flipped: u32 = p
                .iter()
                .zip(&original)
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
            assert_eq!(flipped, 1);
            let pos = p.iter().zip(&original).position(|(a, b)| a != b).unwrap();
            seen_bits.insert(pos * 8 + (p[pos] ^ original[pos]).trailing_zeros() as usize);
        }
        // All 296 bit positions are reachable; 2000 draws hit most of them.
        assert!(seen_bits.len() > 250, "{}", seen_bits.len());
        assert!(!c.maybe_corrupt(&mut []));
    }

    // Probability zero never corrupts.
    #[test]
    fn zero_probability_never_corrupts() {
        let mut c = Corrupter::new(Probability::ZERO, Seed(3).rng());
        let mut p = vec![0u8; 10];
        assert!((0..1000).all(|_| !c.maybe_corrupt(&mut p)));
        assert_eq!(p, vec![0u8; 10]);
    }
}
