//! Decoding: bytes → representation.
//!
//! Every length read from the input is checked against the bytes actually
//! present before it is used, so decoding never panics and never allocates
//! more than a small multiple of the input length (all vectors grow by
//! `push` as elements are decoded, or are sized from counts that were first
//! checked against the chunk length).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::Range;

use bytes::Bytes;

use super::checksum::{checksum, read_checksum_field};
use super::*;

/// Where decoded variable-length fields come from: a plain slice (fields are
/// copied) or a [`Bytes`] the fields can share without copying.
#[derive(Clone, Copy)]
struct Src<'a> {
    buf: &'a [u8],
    owner: Option<&'a Bytes>,
}

impl Src<'_> {
    /// The bytes in `range`; the caller has checked the range is in bounds.
    fn bytes(&self, range: Range<usize>) -> Bytes {
        match self.owner {
            Some(owner) => owner.slice(range),
            None => Bytes::copy_from_slice(&self.buf[range]),
        }
    }
}

/// Round `n` up to a multiple of 4 (RFC 9260 §3.2: chunks and parameters are
/// padded to 4-byte boundaries).
pub(crate) const fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Read the source port, destination port and verification tag of a packet
/// without parsing or checking anything else. `None` if the buffer is
/// shorter than the 12-byte common header.
pub fn peek_header(buf: &[u8]) -> Option<(u16, u16, u32)> {
    if buf.len() < COMMON_HEADER_LEN {
        return None;
    }
    Some((be16(buf, 0), be16(buf, 2), be32(buf, 4)))
}

impl Packet {
    /// Parse a packet and verify its CRC32c (RFC 9260 §6.8, Appendix B).
    /// Never panics; variable-length fields are copied out of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Packet, WireError> {
        Packet::parse_reusing(buf, Vec::new())
    }

    /// [`Packet::parse`] into a chunk list kept from an earlier packet
    /// (cleared first), so that a steady stream of packets does not
    /// allocate one list each.
    pub(crate) fn parse_reusing(buf: &[u8], chunks: Vec<Chunk>) -> Result<Packet, WireError> {
        parse_packet(Src { buf, owner: None }, true, chunks)
    }

    /// [`Packet::parse_bytes`] into a kept chunk list, as
    /// [`Packet::parse_reusing`].
    pub(crate) fn parse_bytes_reusing(
        buf: &Bytes,
        chunks: Vec<Chunk>,
    ) -> Result<Packet, WireError> {
        parse_packet(
            Src {
                buf: buf.as_ref(),
                owner: Some(buf),
            },
            true,
            chunks,
        )
    }

    /// Parse without checking the checksum (captures, tests, fuzzing).
    pub fn parse_unchecked(buf: &[u8]) -> Result<Packet, WireError> {
        parse_packet(Src { buf, owner: None }, false, Vec::new())
    }

    /// Like [`Packet::parse`], but payloads, cookies and other
    /// variable-length fields share `buf`'s storage instead of being copied.
    pub fn parse_bytes(buf: &Bytes) -> Result<Packet, WireError> {
        Packet::parse_bytes_reusing(buf, Vec::new())
    }

    /// Like [`Packet::parse_unchecked`], sharing `buf`'s storage.
    pub fn parse_bytes_unchecked(buf: &Bytes) -> Result<Packet, WireError> {
        parse_packet(
            Src {
                buf: buf.as_ref(),
                owner: Some(buf),
            },
            false,
            Vec::new(),
        )
    }
}

fn parse_packet(src: Src<'_>, verify: bool, mut chunks: Vec<Chunk>) -> Result<Packet, WireError> {
    let buf = src.buf;
    let (src_port, dst_port, verification_tag) = peek_header(buf).ok_or(WireError::Truncated)?;
    if verify {
        // `peek_header` succeeded, so the field is present.
        let found = read_checksum_field(buf).ok_or(WireError::Truncated)?;
        let expected = checksum(buf);
        if found != expected {
            return Err(WireError::BadChecksum { expected, found });
        }
    }
    chunks.clear();
    let mut off = COMMON_HEADER_LEN;
    while off < buf.len() {
        let rest = buf.len() - off;
        if rest < 4 {
            // Not padding (the previous chunk ended aligned or its padding
            // was skipped) and too short for a chunk header: garbage.
            return Err(WireError::Malformed {
                kind: buf[off],
                why: "trailing bytes shorter than a chunk header",
            });
        }
        let kind = buf[off];
        let flags = buf[off + 1];
        let length = be16(buf, off + 2);
        let len = usize::from(length);
        if len < 4 || len > rest {
            return Err(WireError::BadChunkLength { kind, length });
        }
        chunks.push(parse_chunk(src, kind, flags, length, off + 4..off + len)?);
        // The length field excludes the padding (RFC 9260 §3.2). The sender
        // must pad the last chunk too, but a missing final pad is harmless,
        // so it is tolerated.
        off = (off + pad4(len)).min(buf.len());
    }
    Ok(Packet {
        src_port,
        dst_port,
        verification_tag,
        chunks,
    })
}

fn parse_chunk(
    src: Src<'_>,
    kind: u8,
    flags: u8,
    length: u16,
    v: Range<usize>,
) -> Result<Chunk, WireError> {
    let val = &src.buf[v.clone()];
    let bad_len = WireError::BadChunkLength { kind, length };
    let chunk = match kind {
        chunk_type::DATA => {
            // RFC 9260 §3.3.1. A zero-length payload is representable; the
            // association answers it with a "No User Data" ABORT (§6.2).
            if val.len() < DATA_CHUNK_HEADER_LEN - 4 {
                return Err(bad_len);
            }
            Chunk::Data(DataChunk {
                tsn: Tsn(be32(val, 0)),
                stream: be16(val, 4),
                ssn: Ssn(be16(val, 6)),
                ppid: be32(val, 8),
                unordered: flags & data_flags::UNORDERED != 0,
                beginning: flags & data_flags::BEGINNING != 0,
                ending: flags & data_flags::ENDING != 0,
                immediate: flags & data_flags::IMMEDIATE != 0,
                payload: src.bytes(v.start + 12..v.end),
            })
        }
        chunk_type::INIT | chunk_type::INIT_ACK => {
            // RFC 9260 §3.3.2 / §3.3.3. Zero tags or stream counts are
            // semantic violations the association handles; the codec keeps
            // them.
            if val.len() < INIT_CHUNK_HEADER_LEN - 4 {
                return Err(bad_len);
            }
            let init = InitChunk {
                initiate_tag: be32(val, 0),
                a_rwnd: be32(val, 4),
                outbound_streams: be16(val, 8),
                inbound_streams: be16(val, 10),
                initial_tsn: Tsn(be32(val, 12)),
                params: parse_params(src, kind, v.start + 16..v.end)?,
            };
            if kind == chunk_type::INIT {
                Chunk::Init(init)
            } else {
                Chunk::InitAck(init)
            }
        }
        chunk_type::SACK => {
            // RFC 9260 §3.3.4: the counts must describe the chunk exactly.
            if val.len() < SACK_CHUNK_HEADER_LEN - 4 {
                return Err(bad_len);
            }
            let n_gaps = usize::from(be16(val, 8));
            let n_dups = usize::from(be16(val, 10));
            if val.len() != 12 + 4 * (n_gaps + n_dups) {
                return Err(WireError::Malformed {
                    kind,
                    why: "SACK length does not match its gap block and duplicate TSN counts",
                });
            }
            // Both counts were just bounded by the chunk length.
            let mut gap_blocks = Vec::with_capacity(n_gaps);
            for i in 0..n_gaps {
                let at = 12 + 4 * i;
                gap_blocks.push(GapBlock {
                    start: be16(val, at),
                    end: be16(val, at + 2),
                });
            }
            let mut duplicate_tsns = Vec::with_capacity(n_dups);
            for i in 0..n_dups {
                duplicate_tsns.push(Tsn(be32(val, 12 + 4 * (n_gaps + i))));
            }
            Chunk::Sack(SackChunk {
                cum_tsn_ack: Tsn(be32(val, 0)),
                a_rwnd: be32(val, 4),
                gap_blocks,
                duplicate_tsns,
            })
        }
        chunk_type::HEARTBEAT | chunk_type::HEARTBEAT_ACK => {
            // RFC 9260 §3.3.5/§3.3.6: exactly one Heartbeat Info TLV.
            if val.len() < 4 {
                return Err(bad_len);
            }
            let ptype = be16(val, 0);
            let plen = be16(val, 2);
            if ptype != param_type::HEARTBEAT_INFO {
                return Err(WireError::Malformed {
                    kind,
                    why: "HEARTBEAT does not start with a Heartbeat Info parameter",
                });
            }
            let p = usize::from(plen);
            if p < 4 || p > val.len() {
                return Err(WireError::BadParamLength {
                    kind: ptype,
                    length: plen,
                });
            }
            if val.len() > pad4(p) {
                return Err(WireError::Malformed {
                    kind,
                    why: "bytes after the Heartbeat Info parameter",
                });
            }
            let hb = HeartbeatChunk {
                info: src.bytes(v.start + 4..v.start + p),
            };
            if kind == chunk_type::HEARTBEAT {
                Chunk::Heartbeat(hb)
            } else {
                Chunk::HeartbeatAck(hb)
            }
        }
        chunk_type::ABORT => Chunk::Abort(AbortChunk {
            t_bit: flags & T_BIT != 0,
            causes: parse_causes(src, kind, v)?,
        }),
        chunk_type::SHUTDOWN => {
            if val.len() != 4 {
                return Err(bad_len);
            }
            Chunk::Shutdown(ShutdownChunk {
                cum_tsn_ack: Tsn(be32(val, 0)),
            })
        }
        chunk_type::SHUTDOWN_ACK => {
            if !val.is_empty() {
                return Err(bad_len);
            }
            Chunk::ShutdownAck
        }
        chunk_type::ERROR => Chunk::Error(ErrorChunk {
            causes: parse_causes(src, kind, v)?,
        }),
        chunk_type::COOKIE_ECHO => Chunk::CookieEcho(CookieEchoChunk {
            cookie: src.bytes(v),
        }),
        chunk_type::COOKIE_ACK => {
            if !val.is_empty() {
                return Err(bad_len);
            }
            Chunk::CookieAck
        }
        chunk_type::SHUTDOWN_COMPLETE => {
            if !val.is_empty() {
                return Err(bad_len);
            }
            Chunk::ShutdownComplete(ShutdownCompleteChunk {
                t_bit: flags & T_BIT != 0,
            })
        }
        chunk_type::FORWARD_TSN => {
            // RFC 3758 §3.2: new cumulative TSN, then (stream, SSN) pairs.
            if val.len() < 4 || (val.len() - 4) & 3 != 0 {
                return Err(bad_len);
            }
            let n = (val.len() - 4) / 4;
            let mut streams = Vec::with_capacity(n);
            for i in 0..n {
                let at = 4 + 4 * i;
                streams.push(ForwardTsnStream {
                    stream: be16(val, at),
                    ssn: Ssn(be16(val, at + 2)),
                });
            }
            Chunk::ForwardTsn(ForwardTsnChunk {
                new_cum_tsn: Tsn(be32(val, 0)),
                streams,
            })
        }
        chunk_type::I_DATA => {
            // RFC 8260 §2.1. As for DATA, an empty payload is the
            // association's business (ABORT "No User Data").
            if val.len() < I_DATA_CHUNK_HEADER_LEN - 4 {
                return Err(bad_len);
            }
            Chunk::IData(IDataChunk {
                tsn: Tsn(be32(val, 0)),
                stream: be16(val, 4),
                mid: be32(val, 8),
                ppid_fsn: be32(val, 12),
                unordered: flags & data_flags::UNORDERED != 0,
                beginning: flags & data_flags::BEGINNING != 0,
                ending: flags & data_flags::ENDING != 0,
                immediate: flags & data_flags::IMMEDIATE != 0,
                payload: src.bytes(v.start + 16..v.end),
            })
        }
        chunk_type::I_FORWARD_TSN => {
            // RFC 8260 §2.3.1: new cumulative TSN, then 8-byte entries
            // (stream, flags with U in the lowest bit, MID).
            if val.len() < 4 || (val.len() - 4) & 7 != 0 {
                return Err(bad_len);
            }
            let n = (val.len() - 4) / 8;
            let mut streams = Vec::with_capacity(n);
            for i in 0..n {
                let at = 4 + 8 * i;
                streams.push(IForwardTsnStream {
                    stream: be16(val, at),
                    unordered: be16(val, at + 2) & 1 != 0,
                    mid: be32(val, at + 4),
                });
            }
            Chunk::IForwardTsn(IForwardTsnChunk {
                new_cum_tsn: Tsn(be32(val, 0)),
                streams,
            })
        }
        _ => Chunk::Unknown(UnknownChunk {
            kind,
            flags,
            value: src.bytes(v),
        }),
    };
    Ok(chunk)
}

/// Walk a list of type-length-value items (INIT parameters, error causes)
/// in `range`, calling `each(type, length, value_range)`.
///
/// Padding (RFC 9260 §3.2): every item but the last is padded inside the
/// chunk; the chunk length excludes the last item's padding. Senders that
/// count that padding anyway are accepted too, since the skip after the
/// last item simply reaches the end.
fn walk_tlvs(
    src: Src<'_>,
    chunk_kind: u8,
    range: Range<usize>,
    mut each: impl FnMut(u16, u16, Range<usize>) -> Result<(), WireError>,
) -> Result<(), WireError> {
    let buf = src.buf;
    let mut off = range.start;
    while off < range.end {
        let rest = range.end - off;
        if rest < 4 {
            return Err(WireError::Malformed {
                kind: chunk_kind,
                why: "trailing bytes shorter than a parameter header",
            });
        }
        let kind = be16(buf, off);
        let length = be16(buf, off + 2);
        let len = usize::from(length);
        if len < 4 || len > rest {
            return Err(WireError::BadParamLength { kind, length });
        }
        each(kind, length, off + 4..off + len)?;
        off += pad4(len);
    }
    Ok(())
}

fn parse_params(
    src: Src<'_>,
    chunk_kind: u8,
    range: Range<usize>,
) -> Result<Vec<Param>, WireError> {
    let mut params = Vec::new();
    walk_tlvs(src, chunk_kind, range, |kind, length, v| {
        params.push(parse_param(src, kind, length, v)?);
        Ok(())
    })?;
    Ok(params)
}

fn parse_param(src: Src<'_>, kind: u16, length: u16, v: Range<usize>) -> Result<Param, WireError> {
    let val = &src.buf[v.clone()];
    let bad_len = WireError::BadParamLength { kind, length };
    let param = match kind {
        param_type::IPV4_ADDRESS => {
            let octets: [u8; 4] = val.try_into().map_err(|_| bad_len)?;
            Param::Ipv4Address(Ipv4Addr::from(octets))
        }
        param_type::IPV6_ADDRESS => {
            let octets: [u8; 16] = val.try_into().map_err(|_| bad_len)?;
            Param::Ipv6Address(Ipv6Addr::from(octets))
        }
        param_type::STATE_COOKIE => Param::StateCookie(src.bytes(v)),
        param_type::COOKIE_PRESERVATIVE => {
            if val.len() != 4 {
                return Err(bad_len);
            }
            Param::CookiePreservative(be32(val, 0))
        }
        param_type::HOST_NAME_ADDRESS => Param::HostNameAddress(src.bytes(v)),
        param_type::SUPPORTED_ADDRESS_TYPES => {
            if val.len() & 1 != 0 {
                return Err(bad_len);
            }
            Param::SupportedAddressTypes(val.chunks_exact(2).map(|t| be16(t, 0)).collect())
        }
        param_type::UNRECOGNIZED_PARAMETER => Param::UnrecognizedParameter(src.bytes(v)),
        param_type::FORWARD_TSN_SUPPORTED => {
            if !val.is_empty() {
                return Err(bad_len);
            }
            Param::ForwardTsnSupported
        }
        param_type::SUPPORTED_EXTENSIONS => Param::SupportedExtensions(val.to_vec()),
        _ => Param::Unknown {
            kind,
            value: src.bytes(v),
        },
    };
    Ok(param)
}

fn parse_causes(
    src: Src<'_>,
    chunk_kind: u8,
    range: Range<usize>,
) -> Result<Vec<ErrorCause>, WireError> {
    let mut causes = Vec::new();
    walk_tlvs(src, chunk_kind, range, |code, _length, v| {
        causes.push(ErrorCause {
            code,
            info: src.bytes(v),
        });
        Ok(())
    })?;
    Ok(causes)
}
