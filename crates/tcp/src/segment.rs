//! The TCP segment codec: a real RFC 9293 header with the options this model
//! uses (MSS, window scale, SACK-permitted, SACK blocks, timestamps).
//!
//! A segment is carried as the whole payload of a [`thinstream_base::Datagram`]:
//! `payload = TCP header (20 bytes) + options (padded to 4 bytes) + data`.
//! The IP header is not encoded; the wire size of a segment is
//! `IP_HEADER_BYTES + payload.len()` (see [`wire_bytes`]). The checksum is the
//! real TCP checksum over the IPv4/IPv6 pseudo-header built from the
//! datagram's addresses, so a link that corrupts bits makes the segment fail
//! to parse instead of delivering wrong bytes. With checksum offload
//! ([`Checksum::Offload`], `TcpConfig::checksum_offload`) the field is left
//! zero and not checked, as a network card that computes it would leave it
//! to the card: for paths that cannot corrupt a byte, where the check
//! never rejects anything.
//!
//! Parsing never panics: every malformed input is a [`SegmentError`].

use bytes::{Buf, Bytes};
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// Bytes of the (IPv4, option-less) IP header the simulator should add to
/// `Datagram.payload.len()` to obtain the size of the packet on the wire.
pub const IP_HEADER_BYTES: usize = 20;
/// Bytes of a TCP header without options.
pub const TCP_HEADER_BYTES: usize = 20;
/// TCP's IP protocol number (in the checksum's pseudo-header, and in the IP
/// header a capture writes in front of a segment).
pub const IPPROTO_TCP: u8 = 6;
/// The most option bytes a TCP header can carry (data offset of 15 words).
pub const MAX_OPTION_BYTES: usize = 40;

/// On-the-wire size of a datagram payload produced by this crate.
pub const fn wire_bytes(payload_len: usize) -> usize {
    IP_HEADER_BYTES + payload_len
}

/// TCP control flags (RFC 9293 §3.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags(pub u8);

impl Flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;

    pub const fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
    pub fn fin(self) -> bool {
        self.has(Self::FIN)
    }
    pub fn syn(self) -> bool {
        self.has(Self::SYN)
    }
    pub fn psh(self) -> bool {
        self.has(Self::PSH)
    }
    pub fn rst(self) -> bool {
        self.has(Self::RST)
    }
    pub fn ack(self) -> bool {
        self.has(Self::ACK)
    }
}

/// The SACK blocks of one segment: at most four fit in its options.
pub type SackBlocks = smallvec::SmallVec<[(u32, u32); 4]>;

/// The options of one segment. Unknown options are skipped when parsing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Maximum segment size (kind 2, SYN only).
    pub mss: Option<u16>,
    /// Window scale shift (kind 3, SYN only, RFC 7323 §2).
    pub window_scale: Option<u8>,
    /// SACK-permitted (kind 4, SYN only, RFC 2018 §2).
    pub sack_permitted: bool,
    /// SACK blocks as wire sequence numbers `[left, right)` (kind 5, RFC 2018 §3).
    /// Forty bytes of options hold at most four blocks, so they are kept
    /// inline: parsing or building an ACK allocates nothing for them.
    pub sack: SackBlocks,
    /// Timestamps `(TSval, TSecr)` (kind 8, RFC 7323 §3).
    pub timestamps: Option<(u32, u32)>,
}

impl Options {
    /// Encoded length including padding to a multiple of 4.
    pub fn encoded_len(&self) -> usize {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.window_scale.is_some() {
            n += 4; // NOP + 3-byte option
        }
        if self.timestamps.is_some() {
            n += 12; // NOP NOP + 10-byte option (the usual Linux layout)
        }
        if self.sack_permitted && self.timestamps.is_none() {
            n += 4; // NOP NOP + 2-byte option
        } else if self.sack_permitted {
            // Linux puts SACK-permitted in front of the timestamp, replacing its two NOPs.
        }
        if !self.sack.is_empty() {
            n += 4 + 8 * self.sack.len(); // NOP NOP kind len + blocks
        }
        n
    }

    /// How many SACK blocks fit next to the other options (RFC 2018 §3: 4
    /// without timestamps, 3 with).
    pub fn max_sack_blocks(timestamps: bool) -> usize {
        if timestamps {
            3
        } else {
            4
        }
    }

    fn emit(&self, out: &mut Vec<u8>) {
        if let Some(mss) = self.mss {
            out.extend_from_slice(&[2, 4]);
            out.extend_from_slice(&mss.to_be_bytes());
        }
        match (self.sack_permitted, self.timestamps) {
            (true, Some((val, ecr))) => {
                out.extend_from_slice(&[4, 2, 8, 10]);
                out.extend_from_slice(&val.to_be_bytes());
                out.extend_from_slice(&ecr.to_be_bytes());
            }
            (false, Some((val, ecr))) => {
                out.extend_from_slice(&[1, 1, 8, 10]);
                out.extend_from_slice(&val.to_be_bytes());
                out.extend_from_slice(&ecr.to_be_bytes());
            }
            (true, None) => out.extend_from_slice(&[1, 1, 4, 2]),
            (false, None) => {}
        }
        if let Some(shift) = self.window_scale {
            out.extend_from_slice(&[1, 3, 3, shift]);
        }
        if !self.sack.is_empty() {
            out.extend_from_slice(&[1, 1, 5, (2 + 8 * self.sack.len()) as u8]);
            for (l, r) in &self.sack {
                out.extend_from_slice(&l.to_be_bytes());
                out.extend_from_slice(&r.to_be_bytes());
            }
        }
    }

    #[inline(always)]
    fn parse(mut b: &[u8]) -> Result<Options, SegmentError> {
        let mut o = Options::default();
        while let Some((&kind, rest)) = b.split_first() {
            match kind {
                0 => break,
                1 => {
                    b = rest;
                    continue;
                }
                _ => {}
            }
            let len = *rest.first().ok_or(SegmentError::BadOption { kind })? as usize;
            if len < 2 || len > b.len() {
                return Err(SegmentError::BadOption { kind });
            }
            let body = &b[2..len];
            match kind {
                2 if len == 4 => o.mss = Some(u16::from_be_bytes([body[0], body[1]])),
                3 if len == 3 => o.window_scale = Some(body[0].min(14)),
                4 if len == 2 => o.sack_permitted = true,
                5 if len >= 10 && (len - 2) & 7 == 0 => {
                    for block in body.chunks_exact(8) {
                        let l = u32::from_be_bytes([block[0], block[1], block[2], block[3]]);
                        let r = u32::from_be_bytes([block[4], block[5], block[6], block[7]]);
                        o.sack.push((l, r));
                    }
                }
                8 if len == 10 => {
                    let val = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
                    let ecr = u32::from_be_bytes([body[4], body[5], body[6], body[7]]);
                    o.timestamps = Some((val, ecr));
                }
                2..=5 | 8 => return Err(SegmentError::BadOption { kind }),
                _ => {} // unknown option: skipped (RFC 9293 §3.2)
            }
            b = &b[len..];
        }
        Ok(o)
    }
}

/// One parsed or to-be-emitted segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: Flags,
    /// The raw 16-bit window field (unscaled).
    pub window: u16,
    pub options: Options,
    /// The data: decoding a datagram's own bytes keeps their buffer (see
    /// [`Segment::decode_owned`]).
    pub payload: Bytes,
}

/// Why a byte string is not a TCP segment this model accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SegmentError {
    /// Shorter than a TCP header.
    Truncated { len: usize },
    /// The data offset points outside the datagram or below 20 bytes.
    BadDataOffset { offset: usize, len: usize },
    /// A malformed option of the given kind.
    BadOption { kind: u8 },
    /// The checksum does not match the pseudo-header and contents.
    BadChecksum,
    /// The options do not fit in 40 bytes (emit side).
    OptionsTooLong { len: usize },
}

impl fmt::Display for SegmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SegmentError::Truncated { len } => write!(f, "truncated segment of {len} bytes"),
            SegmentError::BadDataOffset { offset, len } => {
                write!(f, "data offset {offset} invalid for a {len}-byte segment")
            }
            SegmentError::BadOption { kind } => write!(f, "malformed TCP option of kind {kind}"),
            SegmentError::BadChecksum => write!(f, "TCP checksum mismatch"),
            SegmentError::OptionsTooLong { len } => {
                write!(f, "{len} option bytes exceed the 40-byte limit")
            }
        }
    }
}

impl std::error::Error for SegmentError {}

impl SegmentError {
    /// Short stable name for [`thinstream_base::trace::Record::Discarded`].
    pub fn name(&self) -> &'static str {
        match self {
            SegmentError::Truncated { .. } => "truncated",
            SegmentError::BadDataOffset { .. } => "bad-data-offset",
            SegmentError::BadOption { .. } => "bad-option",
            SegmentError::BadChecksum => "bad-checksum",
            SegmentError::OptionsTooLong { .. } => "options-too-long",
        }
    }
}

/// Whether an endpoint computes and checks the TCP checksum itself, or
/// leaves it to the path (see `TcpConfig::checksum_offload`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checksum {
    /// Written on sending, checked on receiving.
    Compute,
    /// Left zero on sending, not checked on receiving.
    Offload,
}

impl Segment {
    /// Encodes the segment with a checksum over the pseudo-header of `src`/`dst`.
    pub fn encode(&self, src: SocketAddr, dst: SocketAddr) -> Result<Vec<u8>, SegmentError> {
        self.encode_with(&[&self.payload], src, dst)
    }

    /// Encodes the segment's header with the concatenation of `payload` as
    /// its payload (instead of `self.payload`): a sender writes its data
    /// straight from its buffer into the datagram.
    pub fn encode_with(
        &self,
        payload: &[&[u8]],
        src: SocketAddr,
        dst: SocketAddr,
    ) -> Result<Vec<u8>, SegmentError> {
        self.encode_checksummed(payload, src, dst, Checksum::Compute)
    }

    /// [`Segment::encode_with`], with the checksum computed or, offloaded,
    /// left zero.
    pub fn encode_checksummed(
        &self,
        payload: &[&[u8]],
        src: SocketAddr,
        dst: SocketAddr,
        checksum_mode: Checksum,
    ) -> Result<Vec<u8>, SegmentError> {
        let opt_len = self.options.encoded_len();
        if opt_len > MAX_OPTION_BYTES {
            return Err(SegmentError::OptionsTooLong { len: opt_len });
        }
        let header = TCP_HEADER_BYTES + opt_len;
        let payload_len: usize = payload.iter().map(|p| p.len()).sum();
        let mut out = Vec::with_capacity(header + payload_len);
        out.extend_from_slice(&self.src_port.to_be_bytes());
        out.extend_from_slice(&self.dst_port.to_be_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.ack.to_be_bytes());
        out.push(((header / 4) as u8) << 4);
        out.push(self.flags.0);
        out.extend_from_slice(&self.window.to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
        self.options.emit(&mut out);
        debug_assert_eq!(out.len(), header);
        for p in payload {
            out.extend_from_slice(p);
        }
        if checksum_mode == Checksum::Compute {
            let sum = checksum(src.ip(), dst.ip(), &out);
            out[16..18].copy_from_slice(&sum.to_be_bytes());
        }
        Ok(out)
    }

    /// Parses a segment; `src`/`dst` are the datagram's addresses (for the checksum).
    pub fn decode(bytes: &[u8], src: SocketAddr, dst: SocketAddr) -> Result<Segment, SegmentError> {
        let (header, offset) = Header::decode(bytes, src, dst, Checksum::Compute)?;
        Ok(header.with(Bytes::copy_from_slice(&bytes[offset..])))
    }

    /// [`Segment::decode`] of a datagram's bytes that are not needed
    /// afterwards: the payload keeps their buffer, past the header (no
    /// copy; no allocation either when the vector is exactly full, as
    /// [`Segment::encode_with`] makes it).
    pub fn decode_owned(
        bytes: Vec<u8>,
        src: SocketAddr,
        dst: SocketAddr,
    ) -> Result<Segment, SegmentError> {
        Segment::decode_owned_checksummed(bytes, src, dst, Checksum::Compute)
    }

    /// [`Segment::decode_owned`], with the checksum checked or, offloaded,
    /// taken as good.
    pub fn decode_owned_checksummed(
        bytes: Vec<u8>,
        src: SocketAddr,
        dst: SocketAddr,
        checksum_mode: Checksum,
    ) -> Result<Segment, SegmentError> {
        let (header, offset) = Header::decode(&bytes, src, dst, checksum_mode)?;
        let mut payload = Bytes::from(bytes);
        payload.advance(offset);
        Ok(header.with(payload))
    }
}

/// A segment's fields but its data, as parsed (built whole with its data
/// afterwards, no placeholder written first).
struct Header {
    src_port: u16,
    dst_port: u16,
    seq: u32,
    ack: u32,
    flags: Flags,
    window: u16,
    options: Options,
}

impl Header {
    /// The header of `bytes`, and where its data starts. The three steps
    /// of a decode (this, `Options::parse` and `with`) are inlined into
    /// one: returned whole from separate calls, the options went through
    /// the stack several times, each copy written in pieces and read back
    /// whole, which the processor cannot forward (3 % of the one-flow
    /// thin stream's CPU time, docs/memory.md).
    #[inline(always)]
    fn decode(
        bytes: &[u8],
        src: SocketAddr,
        dst: SocketAddr,
        checksum_mode: Checksum,
    ) -> Result<(Header, usize), SegmentError> {
        if bytes.len() < TCP_HEADER_BYTES {
            return Err(SegmentError::Truncated { len: bytes.len() });
        }
        let offset = usize::from(bytes[12] >> 4) * 4;
        if offset < TCP_HEADER_BYTES || offset > bytes.len() {
            return Err(SegmentError::BadDataOffset {
                offset,
                len: bytes.len(),
            });
        }
        if checksum_mode == Checksum::Compute && checksum(src.ip(), dst.ip(), bytes) != 0 {
            return Err(SegmentError::BadChecksum);
        }
        let be16 = |i: usize| u16::from_be_bytes([bytes[i], bytes[i + 1]]);
        let be32 =
            |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let header = Header {
            src_port: be16(0),
            dst_port: be16(2),
            seq: be32(4),
            ack: be32(8),
            flags: Flags(bytes[13] & 0x3F),
            window: be16(14),
            options: Options::parse(&bytes[TCP_HEADER_BYTES..offset])?,
        };
        Ok((header, offset))
    }

    #[inline(always)]
    fn with(self, payload: Bytes) -> Segment {
        Segment {
            src_port: self.src_port,
            dst_port: self.dst_port,
            seq: self.seq,
            ack: self.ack,
            flags: self.flags,
            window: self.window,
            options: self.options,
            payload,
        }
    }
}

/// RFC 1071 ones'-complement sum over the pseudo-header (RFC 9293 §3.1,
/// RFC 8200 §8.1) and the segment. Verifying a correct segment yields 0.
fn checksum(src: IpAddr, dst: IpAddr, segment: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    // Each slice starts at an even offset of the summed data. Eight bytes
    // at a time as one 64-bit big-endian word with end-around carry:
    // 2^64 is 1 modulo 2^16 - 1, so folding that sum gives the same
    // ones'-complement sum as 16-bit words (RFC 1071 §2 (B), parallel
    // summation) with a quarter of the additions. The carries are counted
    // apart (`wraps`) and added after the fold.
    let mut wraps: u64 = 0;
    let mut add = |b: &[u8]| {
        let mut words = b.chunks_exact(8);
        let mut word = |v: u64| {
            let (s, carried) = sum.overflowing_add(v);
            sum = s;
            wraps += u64::from(carried);
        };
        for w in &mut words {
            word(u64::from_be_bytes([
                w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7],
            ]));
        }
        let mut chunks = words.remainder().chunks_exact(2);
        for c in &mut chunks {
            word(u64::from(u16::from_be_bytes([c[0], c[1]])));
        }
        if let [last] = chunks.remainder() {
            word(u64::from(u16::from_be_bytes([*last, 0])));
        }
    };
    let pseudo = match (src, dst) {
        // The IPv4 pseudo-header as 32-bit words: each address, then zero,
        // protocol 6 and the length.
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            u64::from(s.to_bits())
                + u64::from(d.to_bits())
                + (u64::from(IPPROTO_TCP) << 16)
                + u64::from(segment.len() as u16)
        }
        _ => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
                IpAddr::V6(v) => v.octets(),
            };
            add(&v6(src));
            add(&v6(dst));
            add(&(segment.len() as u32).to_be_bytes());
            add(&[0, 0, 0, IPPROTO_TCP]);
            0
        }
    };
    add(segment);
    // Down to 32 bits, then the carries and the pseudo-header (all far
    // below 2^63: nothing overflows).
    let mut sum = (sum >> 32) + (sum & 0xFFFF_FFFF) + wraps + pseudo;
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs() -> (SocketAddr, SocketAddr) {
        (
            "10.0.0.1:4000".parse().unwrap(),
            "10.0.0.2:80".parse().unwrap(),
        )
    }

    #[test]
    fn round_trip_with_all_options() {
        let (a, b) = addrs();
        let seg = Segment {
            src_port: 4000,
            dst_port: 80,
            seq: 0xFFFF_FFF0,
            ack: 12345,
            flags: Flags(Flags::SYN | Flags::ACK),
            window: 65535,
            options: Options {
                mss: Some(1460),
                window_scale: Some(7),
                sack_permitted: true,
                sack: SackBlocks::new(),
                timestamps: Some((1, 2)),
            },
            payload: Bytes::new(),
        };
        let bytes = seg.encode(a, b).unwrap();
        assert_eq!(bytes.len(), 20 + seg.options.encoded_len());
        assert_eq!(bytes.len() % 4, 0);
        assert_eq!(Segment::decode(&bytes, a, b).unwrap(), seg);
    }

    /// A data segment with timestamps and two SACK blocks.
    fn data_segment(payload: Vec<u8>) -> Segment {
        Segment {
            src_port: 4000,
            dst_port: 80,
            seq: 7,
            ack: 9,
            flags: Flags(Flags::ACK | Flags::PSH),
            window: 100,
            options: Options {
                timestamps: Some((5, 6)),
                sack: smallvec::smallvec![(100, 200), (300, 400)],
                ..Options::default()
            },
            payload: payload.into(),
        }
    }

    #[test]
    fn data_segment_with_sack_and_timestamps_is_32_bytes_of_header_plus_blocks() {
        let (a, b) = addrs();
        let seg = data_segment(vec![1, 2, 3]);
        let bytes = seg.encode(a, b).unwrap();
        assert_eq!(bytes.len(), 20 + 12 + 4 + 16 + 3);
        assert_eq!(Segment::decode(&bytes, a, b).unwrap(), seg);
    }

    #[test]
    fn an_offloaded_checksum_is_left_zero_and_not_checked() {
        let (a, b) = addrs();
        let seg = data_segment(vec![1, 2, 3]);
        let payload: &[u8] = &seg.payload;
        let computed = seg
            .encode_checksummed(&[payload], a, b, Checksum::Compute)
            .unwrap();
        let offloaded = seg
            .encode_checksummed(&[payload], a, b, Checksum::Offload)
            .unwrap();
        assert_ne!(computed[16..18], [0, 0]);
        assert_eq!(offloaded[16..18], [0, 0]);
        assert_eq!(computed[..16], offloaded[..16]);
        assert_eq!(computed[18..], offloaded[18..]);
        // A byte changed in flight: rejected when checked, taken as it is
        // when the check is offloaded.
        let mut bad = computed.clone();
        *bad.last_mut().unwrap() ^= 0x10;
        assert_eq!(
            Segment::decode_owned_checksummed(bad.clone(), a, b, Checksum::Compute),
            Err(SegmentError::BadChecksum)
        );
        let taken = Segment::decode_owned_checksummed(bad, a, b, Checksum::Offload).unwrap();
        assert_eq!(taken.payload[..], [1, 2, 0x13]);
        assert_eq!(
            Segment::decode_owned_checksummed(offloaded, a, b, Checksum::Offload).unwrap(),
            seg
        );
    }

    #[test]
    fn payload_in_parts_and_owned_decoding_give_the_same_segment() {
        let (a, b) = addrs();
        let mut seg = data_segment((0..200u8).collect());
        let whole = seg.encode(a, b).unwrap();
        let payload = std::mem::take(&mut seg.payload);
        for cut in [0, 1, 77, 200] {
            let (x, y) = payload.split_at(cut);
            assert_eq!(seg.encode_with(&[x, y], a, b).unwrap(), whole);
        }
        seg.payload = payload;
        assert_eq!(Segment::decode_owned(whole.clone(), a, b).unwrap(), seg);
        let mut bad = whole;
        bad[30] ^= 1;
        assert_eq!(
            Segment::decode_owned(bad, a, b),
            Err(SegmentError::BadChecksum)
        );
    }

    #[test]
    fn corruption_and_garbage_are_errors_not_panics() {
        let (a, b) = addrs();
        let seg = Segment {
            src_port: 1,
            dst_port: 2,
            seq: 3,
            ack: 4,
            flags: Flags(Flags::ACK),
            window: 5,
            options: Options::default(),
            payload: Bytes::from_static(b"hello"),
        };
        let mut bytes = seg.encode(a, b).unwrap();
        bytes[22] ^= 0x40;
        assert_eq!(
            Segment::decode(&bytes, a, b),
            Err(SegmentError::BadChecksum)
        );
        let mut rng = thinstream_base::Seed(5).rng();
        for len in 0..80 {
            for _ in 0..50 {
                let mut junk = vec![0u8; len];
                rng.fill_bytes(&mut junk);
                let _ = Segment::decode(&junk, a, b);
            }
        }
    }

    // The word-at-a-time sum equals RFC 1071's 16-bit sum for every length
    // and alignment of the tail, IPv4 and IPv6 pseudo-headers alike.
    #[test]
    fn checksum_matches_the_16_bit_reference_sum() {
        fn reference(src: IpAddr, dst: IpAddr, segment: &[u8]) -> u16 {
            let v6 = |a: IpAddr| match a {
                IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
                IpAddr::V6(v) => v.octets(),
            };
            let mut data = Vec::new();
            match (src, dst) {
                (IpAddr::V4(s), IpAddr::V4(d)) => {
                    data.extend_from_slice(&s.octets());
                    data.extend_from_slice(&d.octets());
                    data.extend_from_slice(&[0, 6]);
                    data.extend_from_slice(&(segment.len() as u16).to_be_bytes());
                }
                _ => {
                    data.extend_from_slice(&v6(src));
                    data.extend_from_slice(&v6(dst));
                    data.extend_from_slice(&(segment.len() as u32).to_be_bytes());
                    data.extend_from_slice(&[0, 0, 0, 6]);
                }
            }
            data.extend_from_slice(segment);
            if data.len() % 2 == 1 {
                data.push(0);
            }
            let mut sum: u32 = 0;
            for c in data.chunks(2) {
                sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
                sum = (sum & 0xFFFF) + (sum >> 16);
            }
            !(sum as u16)
        }
        let mut rng = thinstream_base::Seed(9).rng();
        let pairs: [(IpAddr, IpAddr); 2] = [
            ("10.0.0.1".parse().unwrap(), "198.51.100.7".parse().unwrap()),
            (
                "2001:db8::1".parse().unwrap(),
                "2001:db8::ff".parse().unwrap(),
            ),
        ];
        for (src, dst) in pairs {
            for len in 0..200 {
                for fill in [None, Some(0x00), Some(0xFF)] {
                    let mut seg = vec![0u8; len];
                    match fill {
                        None => rng.fill_bytes(&mut seg),
                        Some(b) => seg.fill(b),
                    }
                    assert_eq!(
                        checksum(src, dst, &seg),
                        reference(src, dst, &seg),
                        "{len} bytes, {src} -> {dst}, fill {fill:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn malformed_option_length_is_rejected() {
        assert_eq!(
            Options::parse(&[5, 30, 0, 0]),
            Err(SegmentError::BadOption { kind: 5 })
        );
        assert_eq!(
            Options::parse(&[2]),
            Err(SegmentError::BadOption { kind: 2 })
        );
        assert!(Options::parse(&[1, 1, 0, 99]).is_ok());
    }
}
