//! Encoding: representation → bytes, and exact encoded sizes.
//!
//! Emitting writes straight into the caller's `Vec<u8>` with no temporary
//! buffers: every length field is computed from the representation before
//! the item is written (the same functions give `encoded_len`), so the
//! simulator's hot path makes at most one reservation per packet.

use super::checksum::{checksum, CHECKSUM_OFFSET};
use super::parse::pad4;
use super::*;

/// Largest value a 16-bit length field can hold.
const MAX_LEN: usize = u16::MAX as usize;

/// Size on the wire of a DATA chunk carrying `payload_len` bytes of user
/// data, including the padding to a multiple of 4 (RFC 9260 §3.3.1).
pub const fn data_chunk_len(payload_len: usize) -> usize {
    pad4(DATA_CHUNK_HEADER_LEN + payload_len)
}

/// Size on the wire of an I-DATA chunk carrying `payload_len` bytes of
/// user data, including padding (RFC 8260 §2.1).
pub const fn idata_chunk_len(payload_len: usize) -> usize {
    pad4(I_DATA_CHUNK_HEADER_LEN + payload_len)
}

/// Round `n` up to a multiple of 4 (RFC 9260 §3.2).
pub const fn padded(n: usize) -> usize {
    pad4(n)
}

fn put16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Append zero bytes until `out.len() - start` is a multiple of 4.
fn pad_from(out: &mut Vec<u8>, start: usize) {
    let written = out.len() - start;
    out.resize(start + pad4(written), 0);
}

/// Length-field value of a list of TLVs closing a chunk: every item but the
/// last counts its padding, the last does not (RFC 9260 §3.2).
fn tlv_list_len<T>(items: &[T], tlv_len: impl Fn(&T) -> usize) -> usize {
    match items.split_last() {
        None => 0,
        Some((last, rest)) => rest.iter().map(|i| pad4(tlv_len(i))).sum::<usize>() + tlv_len(last),
    }
}

impl Packet {
    /// Append the encoded packet to `out`: common header, each chunk padded
    /// to 4 bytes (the last one too, RFC 9260 §3.2), checksum filled in
    /// (stored little-endian, see [`checksum`]).
    ///
    /// # Panics
    /// If a chunk's length does not fit the 16-bit length field (more than
    /// 65 535 bytes): such a representation cannot exist on the wire and
    /// building one is a bug in the caller, not a network condition.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.reserve(self.encoded_len());
        put16(out, self.src_port);
        put16(out, self.dst_port);
        put32(out, self.verification_tag);
        put32(out, 0);
        for chunk in &self.chunks {
            chunk.emit(out);
        }
        let crc = checksum(&out[start..]);
        let field = start + CHECKSUM_OFFSET;
        out[field..field + 4].copy_from_slice(&crc.to_le_bytes());
    }

    /// The encoded packet in a new vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.emit(&mut out);
        out
    }

    /// Exact number of bytes [`Packet::emit`] appends.
    pub fn encoded_len(&self) -> usize {
        COMMON_HEADER_LEN + self.chunks.iter().map(Chunk::encoded_len).sum::<usize>()
    }
}

impl Chunk {
    /// The chunk type code (e.g. [`chunk_type::DATA`]).
    pub fn kind(&self) -> u8 {
        match self {
            Chunk::Data(_) => chunk_type::DATA,
            Chunk::Init(_) => chunk_type::INIT,
            Chunk::InitAck(_) => chunk_type::INIT_ACK,
            Chunk::Sack(_) => chunk_type::SACK,
            Chunk::Heartbeat(_) => chunk_type::HEARTBEAT,
            Chunk::HeartbeatAck(_) => chunk_type::HEARTBEAT_ACK,
            Chunk::Abort(_) => chunk_type::ABORT,
            Chunk::Shutdown(_) => chunk_type::SHUTDOWN,
            Chunk::ShutdownAck => chunk_type::SHUTDOWN_ACK,
            Chunk::Error(_) => chunk_type::ERROR,
            Chunk::CookieEcho(_) => chunk_type::COOKIE_ECHO,
            Chunk::CookieAck => chunk_type::COOKIE_ACK,
            Chunk::ShutdownComplete(_) => chunk_type::SHUTDOWN_COMPLETE,
            Chunk::ForwardTsn(_) => chunk_type::FORWARD_TSN,
            Chunk::IData(_) => chunk_type::I_DATA,
            Chunk::IForwardTsn(_) => chunk_type::I_FORWARD_TSN,
            Chunk::Unknown(u) => u.kind,
        }
    }

    /// The flags byte as it is emitted. Chunks without defined flags send
    /// zero (RFC 9260 §3.2); reserved bits of DATA are sent as zero.
    pub fn flags(&self) -> u8 {
        match self {
            Chunk::Data(d) => d.flags(),
            Chunk::IData(d) => {
                crate::wire::data_flag_bits(d.unordered, d.beginning, d.ending, d.immediate)
            }
            Chunk::Abort(a) => u8::from(a.t_bit) * T_BIT,
            Chunk::ShutdownComplete(s) => u8::from(s.t_bit) * T_BIT,
            Chunk::Unknown(u) => u.flags,
            _ => 0,
        }
    }

    /// The value of the chunk's Length field: header and value, without
    /// the chunk's trailing padding.
    pub fn length_field(&self) -> usize {
        4 + match self {
            Chunk::Data(d) => DATA_CHUNK_HEADER_LEN - 4 + d.payload.len(),
            Chunk::Init(i) | Chunk::InitAck(i) => {
                INIT_CHUNK_HEADER_LEN - 4 + tlv_list_len(&i.params, Param::tlv_len)
            }
            Chunk::Sack(s) => {
                SACK_CHUNK_HEADER_LEN - 4 + 4 * (s.gap_blocks.len() + s.duplicate_tsns.len())
            }
            Chunk::Heartbeat(h) | Chunk::HeartbeatAck(h) => 4 + h.info.len(),
            Chunk::Abort(a) => tlv_list_len(&a.causes, ErrorCause::tlv_len),
            Chunk::Shutdown(_) => 4,
            Chunk::ShutdownAck | Chunk::CookieAck | Chunk::ShutdownComplete(_) => 0,
            Chunk::Error(e) => tlv_list_len(&e.causes, ErrorCause::tlv_len),
            Chunk::CookieEcho(c) => c.cookie.len(),
            Chunk::ForwardTsn(f) => 4 + 4 * f.streams.len(),
            Chunk::IData(d) => I_DATA_CHUNK_HEADER_LEN - 4 + d.payload.len(),
            Chunk::IForwardTsn(f) => 4 + 8 * f.streams.len(),
            Chunk::Unknown(u) => u.value.len(),
        }
    }

    /// Encoded size including the padding to a multiple of 4: what the chunk
    /// costs in a packet.
    pub fn encoded_len(&self) -> usize {
        pad4(self.length_field())
    }

    /// Whether the chunk fits the 16-bit length field, i.e. whether
    /// [`Chunk::emit`] accepts it.
    pub fn is_encodable(&self) -> bool {
        self.length_field() <= MAX_LEN
    }

    /// Append this chunk, padded to a multiple of 4 bytes. Also what an
    /// "Unrecognized Chunk Type" cause carries (RFC 9260 §3.3.10.6).
    ///
    /// # Panics
    /// If [`Chunk::is_encodable`] is false.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let length = self.length_field();
        assert!(
            length <= MAX_LEN,
            "SCTP chunk of type {:#04x} is {length} bytes, over the 65535-byte length field",
            self.kind()
        );
        let start = out.len();
        out.push(self.kind());
        out.push(self.flags());
        put16(out, length as u16);
        match self {
            Chunk::Data(d) => {
                put32(out, d.tsn.0);
                put16(out, d.stream);
                put16(out, d.ssn.0);
                put32(out, d.ppid);
                out.extend_from_slice(&d.payload);
            }
            Chunk::Init(i) | Chunk::InitAck(i) => {
                put32(out, i.initiate_tag);
                put32(out, i.a_rwnd);
                put16(out, i.outbound_streams);
                put16(out, i.inbound_streams);
                put32(out, i.initial_tsn.0);
                for p in &i.params {
                    p.emit(out);
                }
            }
            Chunk::Sack(s) => {
                put32(out, s.cum_tsn_ack.0);
                put32(out, s.a_rwnd);
                // In range: the chunk length bound above caps both counts.
                put16(out, s.gap_blocks.len() as u16);
                put16(out, s.duplicate_tsns.len() as u16);
                for g in &s.gap_blocks {
                    put16(out, g.start);
                    put16(out, g.end);
                }
                for t in &s.duplicate_tsns {
                    put32(out, t.0);
                }
            }
            Chunk::Heartbeat(h) | Chunk::HeartbeatAck(h) => {
                put16(out, param_type::HEARTBEAT_INFO);
                put16(out, (4 + h.info.len()) as u16);
                out.extend_from_slice(&h.info);
            }
            Chunk::Abort(AbortChunk { causes, .. }) | Chunk::Error(ErrorChunk { causes }) => {
                for c in causes {
                    c.emit(out);
                }
            }
            Chunk::Shutdown(s) => put32(out, s.cum_tsn_ack.0),
            Chunk::ShutdownAck | Chunk::CookieAck | Chunk::ShutdownComplete(_) => {}
            Chunk::CookieEcho(c) => out.extend_from_slice(&c.cookie),
            Chunk::ForwardTsn(f) => {
                put32(out, f.new_cum_tsn.0);
                for s in &f.streams {
                    put16(out, s.stream);
                    put16(out, s.ssn.0);
                }
            }
            Chunk::IData(d) => {
                put32(out, d.tsn.0);
                put16(out, d.stream);
                put16(out, 0);
                put32(out, d.mid);
                put32(out, d.ppid_fsn);
                out.extend_from_slice(&d.payload);
            }
            Chunk::IForwardTsn(f) => {
                put32(out, f.new_cum_tsn.0);
                for s in &f.streams {
                    put16(out, s.stream);
                    put16(out, u16::from(s.unordered));
                    put32(out, s.mid);
                }
            }
            Chunk::Unknown(u) => out.extend_from_slice(&u.value),
        }
        pad_from(out, start);
        debug_assert_eq!(
            out.len() - start,
            pad4(length),
            "length_field disagrees with emit"
        );
    }
}

impl DataChunk {
    /// The flags byte: U (0x04), B (0x02), E (0x01), I (0x08, RFC 7053).
    pub fn flags(&self) -> u8 {
        data_flag_bits(self.unordered, self.beginning, self.ending, self.immediate)
    }

    /// Encoded size including padding; equals `data_chunk_len(payload.len())`.
    pub fn encoded_len(&self) -> usize {
        data_chunk_len(self.payload.len())
    }
}

/// The DATA / I-DATA flags byte from its four bits.
pub(crate) fn data_flag_bits(
    unordered: bool,
    beginning: bool,
    ending: bool,
    immediate: bool,
) -> u8 {
    let mut f = 0;
    if unordered {
        f |= data_flags::UNORDERED;
    }
    if beginning {
        f |= data_flags::BEGINNING;
    }
    if ending {
        f |= data_flags::ENDING;
    }
    if immediate {
        f |= data_flags::IMMEDIATE;
    }
    f
}

impl IDataChunk {
    /// The flags byte (same bits as DATA).
    pub fn flags(&self) -> u8 {
        data_flag_bits(self.unordered, self.beginning, self.ending, self.immediate)
    }

    /// Encoded size including padding; equals `idata_chunk_len(payload.len())`.
    pub fn encoded_len(&self) -> usize {
        idata_chunk_len(self.payload.len())
    }
}

impl Param {
    /// The parameter type code.
    pub fn kind(&self) -> u16 {
        match self {
            Param::Ipv4Address(_) => param_type::IPV4_ADDRESS,
            Param::Ipv6Address(_) => param_type::IPV6_ADDRESS,
            Param::StateCookie(_) => param_type::STATE_COOKIE,
            Param::CookiePreservative(_) => param_type::COOKIE_PRESERVATIVE,
            Param::HostNameAddress(_) => param_type::HOST_NAME_ADDRESS,
            Param::SupportedAddressTypes(_) => param_type::SUPPORTED_ADDRESS_TYPES,
            Param::UnrecognizedParameter(_) => param_type::UNRECOGNIZED_PARAMETER,
            Param::ForwardTsnSupported => param_type::FORWARD_TSN_SUPPORTED,
            Param::SupportedExtensions(_) => param_type::SUPPORTED_EXTENSIONS,
            Param::Unknown { kind, .. } => *kind,
        }
    }

    /// The value of the parameter's Length field (type, length and value,
    /// no padding).
    pub fn tlv_len(&self) -> usize {
        4 + match self {
            Param::Ipv4Address(_) => 4,
            Param::Ipv6Address(_) => 16,
            Param::StateCookie(b) | Param::HostNameAddress(b) | Param::UnrecognizedParameter(b) => {
                b.len()
            }
            Param::CookiePreservative(_) => 4,
            Param::SupportedAddressTypes(t) => 2 * t.len(),
            Param::ForwardTsnSupported => 0,
            Param::SupportedExtensions(e) => e.len(),
            Param::Unknown { value, .. } => value.len(),
        }
    }

    /// Encoded size including padding to a multiple of 4.
    pub fn encoded_len(&self) -> usize {
        pad4(self.tlv_len())
    }

    /// Append the parameter's type, length and value, without padding —
    /// the form an "Unrecognized Parameter" (RFC 9260 §3.3.3.1) or an
    /// "Unrecognized Parameters" cause (§3.3.10.8) carries.
    pub fn emit_tlv(&self, out: &mut Vec<u8>) {
        let length = self.tlv_len();
        assert!(
            length <= MAX_LEN,
            "SCTP parameter is {length} bytes, over the length field"
        );
        put16(out, self.kind());
        put16(out, length as u16);
        match self {
            Param::Ipv4Address(a) => out.extend_from_slice(&a.octets()),
            Param::Ipv6Address(a) => out.extend_from_slice(&a.octets()),
            Param::StateCookie(b) | Param::HostNameAddress(b) | Param::UnrecognizedParameter(b) => {
                out.extend_from_slice(b)
            }
            Param::CookiePreservative(ms) => put32(out, *ms),
            Param::SupportedAddressTypes(types) => {
                for t in types {
                    put16(out, *t);
                }
            }
            Param::ForwardTsnSupported => {}
            Param::SupportedExtensions(e) => out.extend_from_slice(e),
            Param::Unknown { value, .. } => out.extend_from_slice(value),
        }
    }

    /// Append the parameter padded to a multiple of 4 bytes.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        self.emit_tlv(out);
        pad_from(out, start);
    }
}

impl ErrorCause {
    /// The value of the cause's Length field (code, length, information).
    pub fn tlv_len(&self) -> usize {
        4 + self.info.len()
    }

    /// Encoded size including padding to a multiple of 4.
    pub fn encoded_len(&self) -> usize {
        pad4(self.tlv_len())
    }

    /// Append the cause padded to a multiple of 4 bytes.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let length = self.tlv_len();
        assert!(
            length <= MAX_LEN,
            "SCTP error cause is {length} bytes, over the length field"
        );
        put16(out, self.code);
        put16(out, length as u16);
        out.extend_from_slice(&self.info);
        pad_from(out, start);
    }
}
