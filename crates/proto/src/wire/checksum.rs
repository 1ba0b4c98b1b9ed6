//! The SCTP checksum: CRC32c (Castagnoli), RFC 9260 §6.8 and Appendix B.
//!
//! Byte order, precisely: the value returned by [`checksum`] is the CRC32c
//! as the usual reflected algorithm reports it (the iSCSI convention of
//! RFC 3720 §B.4, where 32 zero bytes give `0x8A91_36AA`). RFC 9260
//! Appendix B's reference code reverses that value's bytes and then stores
//! the result in network byte order; the net effect is that the four
//! checksum bytes on the wire (packet offsets 8..12) are the
//! **little-endian** encoding of the value: `0x8A91_36AA` travels as
//! `AA 36 91 8A`. Use [`read_checksum_field`] / [`write_checksum_field`]
//! rather than converting by hand.

use super::COMMON_HEADER_LEN;

/// Offset of the checksum field in the common header (RFC 9260 §3.1).
pub const CHECKSUM_OFFSET: usize = 8;

/// CRC32c of an SCTP packet with its checksum field taken as zero, whatever
/// the field holds (RFC 9260 §6.8: the field is zeroed before computing).
///
/// The result is the value to store **little-endian** at offsets 8..12 (see
/// the module docs). A buffer shorter than the common header is summed as
/// if the missing part of the checksum field were zero bytes, which makes
/// the function total; such a buffer is never a valid packet anyway.
pub fn checksum(packet: &[u8]) -> u32 {
    // The common header with its checksum field zeroed, then the rest:
    // two calls into the CRC code instead of one per part (each call has
    // a fixed cost that dominates on a thin stream's small packets).
    let mut header = [0u8; COMMON_HEADER_LEN];
    let n = packet.len().min(COMMON_HEADER_LEN);
    let head = n.min(CHECKSUM_OFFSET);
    header[..head].copy_from_slice(&packet[..head]);
    let mut crc = crc32c::crc32c(&header[..n]);
    if packet.len() > COMMON_HEADER_LEN {
        crc = crc32c::crc32c_append(crc, &packet[COMMON_HEADER_LEN..]);
    }
    crc
}

/// The checksum stored in a packet (little-endian, see the module docs), or
/// `None` if the buffer is shorter than the common header.
pub fn read_checksum_field(packet: &[u8]) -> Option<u32> {
    let field = packet.get(CHECKSUM_OFFSET..COMMON_HEADER_LEN)?;
    Some(u32::from_le_bytes([field[0], field[1], field[2], field[3]]))
}

/// Compute the checksum of `packet` and store it in its checksum field.
/// Returns `false` (and changes nothing) if the buffer is shorter than the
/// common header.
pub fn write_checksum_field(packet: &mut [u8]) -> bool {
    if packet.len() < COMMON_HEADER_LEN {
        return false;
    }
    let crc = checksum(packet);
    packet[CHECKSUM_OFFSET..COMMON_HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    true
}

/// Whether the stored checksum matches the packet's contents.
pub fn checksum_ok(packet: &[u8]) -> bool {
    read_checksum_field(packet) == Some(checksum(packet))
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 3720 §B.4 test vectors. They are plain CRC32c values over the
    // given bytes; our function zeroes bytes 8..12, which these inputs
    // already have zero or which we check through `crc32c` directly.
    #[test]
    fn rfc3720_zeros() {
        assert_eq!(checksum(&[0u8; 32]), 0x8A91_36AA);
    }

    #[test]
    fn rfc3720_ones() {
        // 32 bytes of 0xFF: bytes 8..12 are 0xFF, so go through crc32c.
        assert_eq!(crc32c::crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
    }

    #[test]
    fn rfc3720_incrementing_and_decrementing() {
        let inc: Vec<u8> = (0u8..32).collect();
        let dec: Vec<u8> = (0u8..32).rev().collect();
        assert_eq!(crc32c::crc32c(&inc), 0x46DD_794E);
        assert_eq!(crc32c::crc32c(&dec), 0x113F_DB5C);
    }

    #[test]
    fn rfc3720_iscsi_read_pdu() {
        // The 48-byte "iSCSI - Read (10) Command PDU" vector of RFC 3720 §B.4.
        #[rustfmt::skip]
        let pdu: [u8; 48] = [
            0x01, 0xC0, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
            0x14, 0x00, 0x00, 0x00,  0x00, 0x00, 0x04, 0x00,
            0x00, 0x00, 0x00, 0x14,  0x00, 0x00, 0x00, 0x18,
            0x28, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
            0x02, 0x00, 0x00, 0x00,  0x00, 0x00, 0x00, 0x00,
        ];
        assert_eq!(crc32c::crc32c(&pdu), 0xD9963A56);
        // Bytes 8..12 of this PDU are zero, so the SCTP view agrees.
        assert_eq!(checksum(&pdu), 0xD9963A56);
    }

    #[test]
    fn field_is_ignored_and_stored_little_endian() {
        let mut p = [0u8; 32];
        p[8..12].copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(checksum(&p), 0x8A91_36AA);
        assert!(write_checksum_field(&mut p));
        assert_eq!(&p[8..12], &[0xAA, 0x36, 0x91, 0x8A]);
        assert!(checksum_ok(&p));
        p[31] ^= 1;
        assert!(!checksum_ok(&p));
    }

    #[test]
    fn short_buffers_do_not_panic() {
        for n in 0..=12 {
            let b = vec![0u8; n];
            let _ = checksum(&b);
            assert_eq!(read_checksum_field(&b).is_some(), n == 12);
        }
        let mut b = [0u8; 5];
        assert!(!write_checksum_field(&mut b));
    }

    #[test]
    fn equals_the_crc_of_a_copy_with_the_field_zeroed() {
        // Every length around the header's end, with a non-zero field.
        for n in 0..=80usize {
            let b: Vec<u8> = (0..n)
                .map(|i| (i as u8).wrapping_mul(37).wrapping_add(11))
                .collect();
            let mut z = b.clone();
            for x in z.iter_mut().take(COMMON_HEADER_LEN).skip(CHECKSUM_OFFSET) {
                *x = 0;
            }
            assert_eq!(checksum(&b), crc32c::crc32c(&z), "length {n}");
        }
    }
}
