//! SCTP wire codec: parse byte strings into representations, emit
//! representations into bytes (RFC 9260, FORWARD TSN of RFC 3758, I-DATA
//! and I-FORWARD-TSN of RFC 8260, carried in UDP per RFC 6951: the UDP
//! payload is exactly the SCTP packet).
//!
//! Decoding never panics on any input: malformed input is a [`WireError`].
//! Representations only hold what the wire can carry; emitting a
//! representation always yields a packet that parses back to it (with the
//! two caveats under "Round trips" below).
//!
//! # Entry points
//! - [`Packet::parse`] (checksum verified), [`Packet::parse_unchecked`],
//!   and the zero-copy [`Packet::parse_bytes`] / [`Packet::parse_bytes_unchecked`]
//!   whose payloads share the input [`Bytes`].
//! - [`Packet::emit`] appends to a caller's `Vec<u8>` (no per-chunk
//!   allocation), [`Packet::to_bytes`], [`Packet::encoded_len`];
//!   [`Chunk::encoded_len`] / [`data_chunk_len`] give exact sizes including
//!   padding for packing decisions.
//! - [`checksum`], [`peek_header`] (ports and tag without parsing).
//! - [`ErrorCause`] constructors (`no_user_data`, `unrecognized_chunk`, ...)
//!   and [`Unrecognized`] (the upper-two-bits rule of RFC 9260 §3.2/§3.2.1).
//!
//! # Encoding decisions
//! - **Checksum** (RFC 9260 §6.8, App. B): CRC32c over the whole packet with
//!   the checksum field as zero. [`checksum`] returns the CRC as the
//!   reflected algorithm reports it (32 zero bytes → `0x8A9136AA`, the
//!   RFC 3720 §B.4 vector); it is stored **little-endian** at offsets 8..12,
//!   so that value travels as `AA 36 91 8A`. This matches RFC 9260 App. B's
//!   reference code (byte-reverse, then network order) and real stacks.
//! - **Padding** (RFC 9260 §3.2): a chunk's Length excludes its trailing
//!   padding; inside a chunk, every parameter / error cause but the last is
//!   padded and counted, the last one's padding is not counted. We emit
//!   exactly that, zero padding bytes, and pad the last chunk of a packet
//!   too. On parse, padding contents are ignored, a missing pad after the
//!   last chunk is tolerated, and a Length that does count the last
//!   parameter's padding is accepted. Any other left-over byte (1–3 bytes
//!   that cannot be padding, or a chunk header with a bad Length) rejects the
//!   whole packet.
//! - **Framing errors vs semantics.** The codec rejects what it cannot
//!   frame: Length fields below the minimum or past the end
//!   ([`WireError::BadChunkLength`], [`WireError::BadParamLength`]), fixed
//!   size chunks/parameters with another size (SHUTDOWN 8, SHUTDOWN ACK /
//!   COOKIE ACK / SHUTDOWN COMPLETE 4, IPv4 8, IPv6 20, Cookie Preservative
//!   8, Forward-TSN-Supported 4, FORWARD TSN 8+4n, I-FORWARD-TSN 8+8n,
//!   I-DATA at least 20, Supported Address Types
//!   with an odd value length), a SACK whose Length disagrees with its block
//!   counts, a HEARTBEAT that is not exactly one Heartbeat Info TLV
//!   ([`WireError::Malformed`]). It keeps what is a protocol decision for the
//!   association: DATA with no user data (RFC 9260 §6.2, answered with ABORT
//!   "No User Data"), INIT with Initiate Tag 0 or zero inbound/outbound
//!   streams (§3.3.2), INIT bundled with other chunks (§6.10), a non-zero
//!   tag on INIT, a zero-chunk packet, unknown chunks and parameters.
//! - **Unknown types** become [`Chunk::Unknown`] / [`Param::Unknown`] with
//!   their raw value; [`Unrecognized::for_chunk`] / [`Unrecognized::for_param`]
//!   say what RFC 9260 §3.2 asks for. Known parameters of other extensions
//!   (ECN 0x8000, AUTH 0x8002–0x8004, ADD-IP, ...) are deliberately kept as
//!   `Param::Unknown` so the association reports them as unrecognized.
//!   Heartbeat Info (0x0001) is only meaningful inside HEARTBEAT; in INIT it
//!   is `Param::Unknown`.
//! - **Flags.** DATA and I-DATA: U 0x04, B 0x02, E 0x01, I 0x08 (RFC 7053);
//!   other DATA flag bits are ignored on parse and sent as zero.
//! - **I-DATA's shared field** (RFC 8260 §2.1): the fourth word is the PPID
//!   when B is set (the FSN is then 0 by definition) and the FSN otherwise.
//!   [`IDataChunk::ppid_fsn`] keeps the raw word; [`IDataChunk::ppid`] and
//!   [`IDataChunk::fsn`] read it according to B. I-FORWARD-TSN entries keep
//!   only the U flag of their 16-bit flags field (the rest is reserved, sent
//!   as zero, ignored on parse). ABORT and SHUTDOWN
//!   COMPLETE: T 0x01. Chunks without flags ignore them on parse and send
//!   zero (§3.2). [`UnknownChunk`] keeps its flags byte.
//! - **Errors** carry the offending type and Length; error causes with a
//!   bad Length use [`WireError::BadParamLength`] with the cause code.
//! - **Bounds.** Every Length is checked against the bytes present before
//!   use; allocations are bounded by the input length.
//!
//! # Round trips
//! `Packet::parse_unchecked(&p.to_bytes()) == Ok(p)` for every encodable
//! representation, except: (1) an `Unknown` chunk or parameter whose kind
//! is one the codec knows parses back as the known variant (or fails if
//! its value does not fit that variant); (2) a chunk longer than 65 535
//! bytes cannot be encoded and [`Chunk::emit`] panics on it
//! ([`Chunk::is_encodable`] checks first).
//!
//! # Testing
//! `tests/wire_vectors.rs` (hand-built vectors per chunk type, framing
//! errors), `tests/wire_usrsctp.rs` (15 packets captured from usrsctp
//! 0.9.5, re-emitted byte-exact), `tests/wire_prop.rs` (round trips,
//! `encoded_len`, random and mutated input), and `fuzz/` (cargo-fuzz target
//! `decode`, plus a stable `smoke` runner: see `fuzz/Cargo.toml`).

use bytes::Bytes;
use std::net::{Ipv4Addr, Ipv6Addr};

mod cause;
mod checksum;
mod emit;
mod error;
mod parse;
mod serial;
pub use cause::Unrecognized;
pub use checksum::{
    checksum, checksum_ok, read_checksum_field, write_checksum_field, CHECKSUM_OFFSET,
};
pub(crate) use emit::data_flag_bits;
pub use emit::{data_chunk_len, idata_chunk_len, padded};
pub use parse::peek_header;
pub use serial::{Ssn, Tsn};

/// The default UDP port for SCTP over UDP (RFC 6951 §5.1, IANA "sctp-tunneling").
pub const SCTP_UDP_TUNNELING_PORT: u16 = 9899;

/// Size of the SCTP common header.
pub const COMMON_HEADER_LEN: usize = 12;
/// Size of a DATA chunk header (type, flags, length, TSN, stream, SSN, PPID).
pub const DATA_CHUNK_HEADER_LEN: usize = 16;
/// Size of an I-DATA chunk header (type, flags, length, TSN, stream,
/// reserved, MID, PPID/FSN; RFC 8260 §2.1).
pub const I_DATA_CHUNK_HEADER_LEN: usize = 20;
/// Size of the fixed part of INIT / INIT ACK (chunk header included).
pub const INIT_CHUNK_HEADER_LEN: usize = 20;
/// Size of the fixed part of SACK (chunk header included).
pub const SACK_CHUNK_HEADER_LEN: usize = 16;

/// DATA chunk flag bits (RFC 9260 §3.3.1, RFC 7053 §3).
pub mod data_flags {
    /// I bit: the receiver should SACK immediately (RFC 7053).
    pub const IMMEDIATE: u8 = 0x08;
    /// U bit: unordered.
    pub const UNORDERED: u8 = 0x04;
    /// B bit: first fragment of a user message.
    pub const BEGINNING: u8 = 0x02;
    /// E bit: last fragment of a user message.
    pub const ENDING: u8 = 0x01;
}

/// The T bit of ABORT and SHUTDOWN COMPLETE (RFC 9260 §3.3.7, §3.3.13): the
/// sender filled in the peer's tag, not its own.
pub const T_BIT: u8 = 0x01;

/// Chunk type codes (RFC 9260 §3.2, RFC 3758 §3.2, RFC 8260 §2.1, §2.3.1).
pub mod chunk_type {
    pub const DATA: u8 = 0x00;
    pub const INIT: u8 = 0x01;
    pub const INIT_ACK: u8 = 0x02;
    pub const SACK: u8 = 0x03;
    pub const HEARTBEAT: u8 = 0x04;
    pub const HEARTBEAT_ACK: u8 = 0x05;
    pub const ABORT: u8 = 0x06;
    pub const SHUTDOWN: u8 = 0x07;
    pub const SHUTDOWN_ACK: u8 = 0x08;
    pub const ERROR: u8 = 0x09;
    pub const COOKIE_ECHO: u8 = 0x0A;
    pub const COOKIE_ACK: u8 = 0x0B;
    pub const SHUTDOWN_COMPLETE: u8 = 0x0E;
    pub const FORWARD_TSN: u8 = 0xC0;
    pub const I_DATA: u8 = 0x40;
    pub const I_FORWARD_TSN: u8 = 0xC2;
}

/// INIT/INIT ACK parameter type codes (RFC 9260 §3.3.2, RFC 3758, RFC 5061).
pub mod param_type {
    pub const HEARTBEAT_INFO: u16 = 0x0001;
    pub const IPV4_ADDRESS: u16 = 0x0005;
    pub const IPV6_ADDRESS: u16 = 0x0006;
    pub const STATE_COOKIE: u16 = 0x0007;
    pub const UNRECOGNIZED_PARAMETER: u16 = 0x0008;
    pub const COOKIE_PRESERVATIVE: u16 = 0x0009;
    pub const HOST_NAME_ADDRESS: u16 = 0x000B;
    pub const SUPPORTED_ADDRESS_TYPES: u16 = 0x000C;
    pub const ECN_CAPABLE: u16 = 0x8000;
    pub const FORWARD_TSN_SUPPORTED: u16 = 0xC000;
    pub const SUPPORTED_EXTENSIONS: u16 = 0x8008;
}

/// Error cause codes (RFC 9260 §3.3.10).
pub mod cause_code {
    pub const INVALID_STREAM_IDENTIFIER: u16 = 1;
    pub const MISSING_MANDATORY_PARAMETER: u16 = 2;
    pub const STALE_COOKIE: u16 = 3;
    pub const OUT_OF_RESOURCE: u16 = 4;
    pub const UNRESOLVABLE_ADDRESS: u16 = 5;
    pub const UNRECOGNIZED_CHUNK_TYPE: u16 = 6;
    pub const INVALID_MANDATORY_PARAMETER: u16 = 7;
    pub const UNRECOGNIZED_PARAMETERS: u16 = 8;
    pub const NO_USER_DATA: u16 = 9;
    pub const COOKIE_RECEIVED_WHILE_SHUTTING_DOWN: u16 = 10;
    pub const RESTART_WITH_NEW_ADDRESSES: u16 = 11;
    pub const USER_INITIATED_ABORT: u16 = 12;
    pub const PROTOCOL_VIOLATION: u16 = 13;

    /// The RFC 9260 name of a cause code ("unknown cause" otherwise).
    pub fn name(code: u16) -> &'static str {
        super::error::cause_name(code)
    }
}

/// A whole SCTP packet: common header and chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    pub src_port: u16,
    pub dst_port: u16,
    pub verification_tag: u32,
    pub chunks: Vec<Chunk>,
}

/// One chunk. Unknown chunk types are kept (type, flags, value) so the
/// association can act on the upper two bits of the type (RFC 9260 §3.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Chunk {
    Data(DataChunk),
    Init(InitChunk),
    InitAck(InitChunk),
    Sack(SackChunk),
    Heartbeat(HeartbeatChunk),
    HeartbeatAck(HeartbeatChunk),
    Abort(AbortChunk),
    Shutdown(ShutdownChunk),
    ShutdownAck,
    Error(ErrorChunk),
    CookieEcho(CookieEchoChunk),
    CookieAck,
    ShutdownComplete(ShutdownCompleteChunk),
    ForwardTsn(ForwardTsnChunk),
    IData(IDataChunk),
    IForwardTsn(IForwardTsnChunk),
    Unknown(UnknownChunk),
}

/// DATA (RFC 9260 §3.3.1). `immediate` is the I bit of RFC 7053.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataChunk {
    pub tsn: Tsn,
    pub stream: u16,
    pub ssn: Ssn,
    pub ppid: u32,
    pub unordered: bool,
    pub beginning: bool,
    pub ending: bool,
    pub immediate: bool,
    pub payload: Bytes,
}

/// I-DATA (RFC 8260 §2.1): like DATA, but fragments are named by the
/// message (MID, per stream and per ordered/unordered) and their place in
/// it (FSN) instead of consecutive TSNs, so fragments of different
/// messages may interleave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IDataChunk {
    pub tsn: Tsn,
    pub stream: u16,
    /// Message Identifier.
    pub mid: u32,
    /// PPID if `beginning`, else the Fragment Sequence Number.
    pub ppid_fsn: u32,
    pub unordered: bool,
    pub beginning: bool,
    pub ending: bool,
    pub immediate: bool,
    pub payload: Bytes,
}

impl IDataChunk {
    /// The PPID: carried by the first fragment only (0 on the others).
    pub fn ppid(&self) -> u32 {
        if self.beginning {
            self.ppid_fsn
        } else {
            0
        }
    }
    /// The Fragment Sequence Number: 0 on the first fragment.
    pub fn fsn(&self) -> u32 {
        if self.beginning {
            0
        } else {
            self.ppid_fsn
        }
    }
}

/// I-FORWARD-TSN (RFC 8260 §2.3.1): FORWARD TSN for I-DATA; entries name
/// the last skipped message per (stream, ordered/unordered) by MID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IForwardTsnChunk {
    pub new_cum_tsn: Tsn,
    pub streams: Vec<IForwardTsnStream>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IForwardTsnStream {
    pub stream: u16,
    pub unordered: bool,
    pub mid: u32,
}

/// INIT and INIT ACK share this layout (RFC 9260 §3.3.2, §3.3.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitChunk {
    pub initiate_tag: u32,
    pub a_rwnd: u32,
    pub outbound_streams: u16,
    pub inbound_streams: u16,
    pub initial_tsn: Tsn,
    pub params: Vec<Param>,
}

/// Variable-length parameters of INIT / INIT ACK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    Ipv4Address(Ipv4Addr),
    Ipv6Address(Ipv6Addr),
    StateCookie(Bytes),
    /// Suggested cookie life-span increment, in milliseconds.
    CookiePreservative(u32),
    HostNameAddress(Bytes),
    SupportedAddressTypes(Vec<u16>),
    /// Carried in an INIT ACK: the parameters of the INIT that were not
    /// recognised, each as its full TLV bytes.
    UnrecognizedParameter(Bytes),
    ForwardTsnSupported,
    /// Chunk types the sender supports (RFC 5061 §4.2.7).
    SupportedExtensions(Vec<u8>),
    /// A parameter this codec does not interpret, kept as type and value.
    Unknown {
        kind: u16,
        value: Bytes,
    },
}

/// SACK (RFC 9260 §3.3.4). Gap blocks are offsets from `cum_tsn_ack`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SackChunk {
    pub cum_tsn_ack: Tsn,
    pub a_rwnd: u32,
    pub gap_blocks: Vec<GapBlock>,
    pub duplicate_tsns: Vec<Tsn>,
}

/// A gap ack block: TSNs `cum_tsn_ack + start ..= cum_tsn_ack + end` were received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GapBlock {
    pub start: u16,
    pub end: u16,
}

/// HEARTBEAT and HEARTBEAT ACK: the opaque Heartbeat Info parameter value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatChunk {
    pub info: Bytes,
}

/// ABORT (RFC 9260 §3.3.7). `t_bit`: the tag is reflected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbortChunk {
    pub t_bit: bool,
    pub causes: Vec<ErrorCause>,
}

/// SHUTDOWN (RFC 9260 §3.3.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownChunk {
    pub cum_tsn_ack: Tsn,
}

/// ERROR (RFC 9260 §3.3.10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorChunk {
    pub causes: Vec<ErrorCause>,
}

/// An error cause: code and the cause-specific information (undecoded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorCause {
    pub code: u16,
    pub info: Bytes,
}

/// COOKIE ECHO (RFC 9260 §3.3.11).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CookieEchoChunk {
    pub cookie: Bytes,
}

/// SHUTDOWN COMPLETE (RFC 9260 §3.3.13).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownCompleteChunk {
    pub t_bit: bool,
}

/// FORWARD TSN (RFC 3758 §3.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardTsnChunk {
    pub new_cum_tsn: Tsn,
    pub streams: Vec<ForwardTsnStream>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForwardTsnStream {
    pub stream: u16,
    pub ssn: Ssn,
}

/// A chunk of a type this codec does not know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownChunk {
    pub kind: u8,
    pub flags: u8,
    pub value: Bytes,
}

/// Why a byte string is not a valid SCTP packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than the common header.
    Truncated,
    /// The CRC32c checksum does not match.
    BadChecksum { expected: u32, found: u32 },
    /// A chunk's length field is below its minimum or runs past the packet.
    BadChunkLength { kind: u8, length: u16 },
    /// A parameter's length field is invalid.
    BadParamLength { kind: u16, length: u16 },
    /// A chunk is well framed but its contents are invalid (e.g. a DATA chunk
    /// with no user data, an INIT with zero streams).
    Malformed { kind: u8, why: &'static str },
}
