//! Property tests of the wire codec:
//! 1. every (encodable) representation round-trips exactly;
//! 2. decoding random bytes and mutated valid packets (bit flips,
//!    truncation, length-field edits, splices) never panics, with or
//!    without checksum verification, and whatever decodes re-encodes to
//!    the same representation;
//! 3. `encoded_len` equals the emitted length, chunk by chunk.

use std::net::{Ipv4Addr, Ipv6Addr};

use bytes::Bytes;
use proptest::prelude::*;
use thinstream_proto::wire::*;

const KNOWN_CHUNKS: [u8; 16] = [
    chunk_type::DATA,
    chunk_type::INIT,
    chunk_type::INIT_ACK,
    chunk_type::SACK,
    chunk_type::HEARTBEAT,
    chunk_type::HEARTBEAT_ACK,
    chunk_type::ABORT,
    chunk_type::SHUTDOWN,
    chunk_type::SHUTDOWN_ACK,
    chunk_type::ERROR,
    chunk_type::COOKIE_ECHO,
    chunk_type::COOKIE_ACK,
    chunk_type::SHUTDOWN_COMPLETE,
    chunk_type::FORWARD_TSN,
    chunk_type::I_DATA,
    chunk_type::I_FORWARD_TSN,
];

const KNOWN_PARAMS: [u16; 9] = [
    param_type::IPV4_ADDRESS,
    param_type::IPV6_ADDRESS,
    param_type::STATE_COOKIE,
    param_type::UNRECOGNIZED_PARAMETER,
    param_type::COOKIE_PRESERVATIVE,
    param_type::HOST_NAME_ADDRESS,
    param_type::SUPPORTED_ADDRESS_TYPES,
    param_type::FORWARD_TSN_SUPPORTED,
    param_type::SUPPORTED_EXTENSIONS,
];

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..=max).prop_map(Bytes::from)
}

fn tsn() -> impl Strategy<Value = Tsn> {
    any::<u32>().prop_map(Tsn)
}

fn ssn() -> impl Strategy<Value = Ssn> {
    any::<u16>().prop_map(Ssn)
}

fn param() -> impl Strategy<Value = Param> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|o| Param::Ipv4Address(Ipv4Addr::from(o))),
        any::<[u8; 16]>().prop_map(|o| Param::Ipv6Address(Ipv6Addr::from(o))),
        bytes(40).prop_map(Param::StateCookie),
        any::<u32>().prop_map(Param::CookiePreservative),
        bytes(20).prop_map(Param::HostNameAddress),
        prop::collection::vec(any::<u16>(), 0..5).prop_map(Param::SupportedAddressTypes),
        bytes(20).prop_map(Param::UnrecognizedParameter),
        Just(Param::ForwardTsnSupported),
        prop::collection::vec(any::<u8>(), 0..7).prop_map(Param::SupportedExtensions),
        (
            any::<u16>().prop_filter("kind the codec knows", |k| !KNOWN_PARAMS.contains(k)),
            bytes(12)
        )
            .prop_map(|(kind, value)| Param::Unknown { kind, value }),
    ]
}

fn cause() -> impl Strategy<Value = ErrorCause> {
    (any::<u16>(), bytes(11)).prop_map(|(code, info)| ErrorCause { code, info })
}

fn init() -> impl Strategy<Value = InitChunk> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        any::<u16>(),
        tsn(),
        prop::collection::vec(param(), 0..6),
    )
        .prop_map(
            |(initiate_tag, a_rwnd, outbound_streams, inbound_streams, initial_tsn, params)| {
                InitChunk {
                    initiate_tag,
                    a_rwnd,
                    outbound_streams,
                    inbound_streams,
                    initial_tsn,
                    params,
                }
            },
        )
}

fn chunk() -> impl Strategy<Value = Chunk> {
    prop_oneof![
        4 => (tsn(), any::<u16>(), ssn(), any::<u32>(), any::<[bool; 4]>(), bytes(33)).prop_map(
            |(tsn, stream, ssn, ppid, [unordered, beginning, ending, immediate], payload)| {
                Chunk::Data(DataChunk {
                    tsn,
                    stream,
                    ssn,
                    ppid,
                    unordered,
                    beginning,
                    ending,
                    immediate,
                    payload,
                })
            }
        ),
        1 => init().prop_map(Chunk::Init),
        1 => init().prop_map(Chunk::InitAck),
        2 => (
            tsn(),
            any::<u32>(),
            prop::collection::vec(any::<(u16, u16)>(), 0..6),
            prop::collection::vec(tsn(), 0..4)
        )
            .prop_map(|(cum_tsn_ack, a_rwnd, gaps, duplicate_tsns)| {
                Chunk::Sack(SackChunk {
                    cum_tsn_ack,
                    a_rwnd,
                    gap_blocks: gaps.into_iter().map(|(start, end)| GapBlock { start, end }).collect(),
                    duplicate_tsns,
                })
            }),
        1 => bytes(30).prop_map(|info| Chunk::Heartbeat(HeartbeatChunk { info })),
        1 => bytes(30).prop_map(|info| Chunk::HeartbeatAck(HeartbeatChunk { info })),
        1 => (any::<bool>(), prop::collection::vec(cause(), 0..4))
            .prop_map(|(t_bit, causes)| Chunk::Abort(AbortChunk { t_bit, causes })),
        1 => tsn().prop_map(|cum_tsn_ack| Chunk::Shutdown(ShutdownChunk { cum_tsn_ack })),
        1 => Just(Chunk::ShutdownAck),
        1 => prop::collection::vec(cause(), 0..4).prop_map(|causes| Chunk::Error(ErrorChunk { causes })),
        1 => bytes(50).prop_map(|cookie| Chunk::CookieEcho(CookieEchoChunk { cookie })),
        1 => Just(Chunk::CookieAck),
        1 => any::<bool>().prop_map(|t_bit| Chunk::ShutdownComplete(ShutdownCompleteChunk { t_bit })),
        1 => (tsn(), prop::collection::vec((any::<u16>(), ssn()), 0..5)).prop_map(|(new_cum_tsn, s)| {
            Chunk::ForwardTsn(ForwardTsnChunk {
                new_cum_tsn,
                streams: s.into_iter().map(|(stream, ssn)| ForwardTsnStream { stream, ssn }).collect(),
            })
        }),
        2 => (
            tsn(),
            any::<u16>(),
            any::<u32>(),
            any::<u32>(),
            any::<[bool; 4]>(),
            bytes(40)
        )
            .prop_map(|(tsn, stream, mid, ppid_fsn, [unordered, beginning, ending, immediate], payload)| {
                Chunk::IData(IDataChunk {
                    tsn,
                    stream,
                    mid,
                    ppid_fsn,
                    unordered,
                    beginning,
                    ending,
                    immediate,
                    payload,
                })
            }),
        1 => (tsn(), prop::collection::vec((any::<u16>(), any::<bool>(), any::<u32>()), 0..5)).prop_map(
            |(new_cum_tsn, s)| {
                Chunk::IForwardTsn(IForwardTsnChunk {
                    new_cum_tsn,
                    streams: s
                        .into_iter()
                        .map(|(stream, unordered, mid)| IForwardTsnStream { stream, unordered, mid })
                        .collect(),
                })
            }
        ),
        1 => (any::<u8>().prop_filter("kind the codec knows", |k| !KNOWN_CHUNKS.contains(k)), any::<u8>(), bytes(21))
            .prop_map(|(kind, flags, value)| Chunk::Unknown(UnknownChunk { kind, flags, value })),
    ]
}

fn packet() -> impl Strategy<Value = Packet> {
    (
        any::<u16>(),
        any::<u16>(),
        any::<u32>(),
        prop::collection::vec(chunk(), 0..6),
    )
        .prop_map(|(src_port, dst_port, verification_tag, chunks)| Packet {
            src_port,
            dst_port,
            verification_tag,
            chunks,
        })
}

/// Whatever decodes must re-encode to a packet that decodes to the same
/// representation (the fuzz target's property).
fn decode_all_ways(buf: &[u8]) {
    let checked = Packet::parse(buf);
    let unchecked = Packet::parse_unchecked(buf);
    let shared = Bytes::copy_from_slice(buf);
    assert_eq!(Packet::parse_bytes(&shared), checked);
    assert_eq!(Packet::parse_bytes_unchecked(&shared), unchecked);
    match (&checked, &unchecked) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Ok(_), Err(e)) => panic!("checked parse succeeded, unchecked failed: {e}"),
        (Err(_), _) => {}
    }
    if let Ok(p) = unchecked {
        let out = p.to_bytes();
        assert_eq!(out.len(), p.encoded_len());
        assert_eq!(Packet::parse(&out), Ok(p));
    }
    let _ = peek_header(buf);
    let _ = checksum(buf);
}

/// Byte offsets of every chunk header in an emitted packet.
fn chunk_offsets(p: &Packet) -> Vec<usize> {
    let mut at = COMMON_HEADER_LEN;
    p.chunks
        .iter()
        .map(|c| {
            let here = at;
            at += c.encoded_len();
            here
        })
        .collect()
}

#[derive(Clone, Debug)]
enum Mutation {
    FlipBit(usize, u8),
    Truncate(usize),
    SetChunkLength(usize, u16),
    NudgeChunkLength(usize, i8),
    SetU16(usize, u16),
    Append(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        2 => (any::<usize>(), any::<u16>()).prop_map(|(i, v)| Mutation::SetChunkLength(i, v)),
        2 => (any::<usize>(), -8i8..=8).prop_map(|(i, d)| Mutation::NudgeChunkLength(i, d)),
        2 => (any::<usize>(), any::<u16>()).prop_map(|(i, v)| Mutation::SetU16(i, v)),
        1 => prop::collection::vec(any::<u8>(), 1..9).prop_map(Mutation::Append),
    ]
}

fn apply(buf: &mut Vec<u8>, offsets: &[usize], m: &Mutation) {
    match *m {
        Mutation::FlipBit(i, b) if !buf.is_empty() => {
            let n = buf.len();
            buf[i % n] ^= 1 << b;
        }
        Mutation::Truncate(n) => buf.truncate(n % (buf.len() + 1)),
        Mutation::SetChunkLength(i, v) if !offsets.is_empty() => {
            let at = offsets[i % offsets.len()] + 2;
            if at + 2 <= buf.len() {
                buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
            }
        }
        Mutation::NudgeChunkLength(i, d) if !offsets.is_empty() => {
            let at = offsets[i % offsets.len()] + 2;
            if at + 2 <= buf.len() {
                let v =
                    u16::from_be_bytes([buf[at], buf[at + 1]]).wrapping_add_signed(i16::from(d));
                buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
            }
        }
        Mutation::SetU16(i, v) if buf.len() >= 2 => {
            let at = i % (buf.len() - 1);
            buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
        }
        Mutation::Append(ref extra) => buf.extend_from_slice(extra),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn representations_round_trip(p in packet()) {
        let wire = p.to_bytes();
        prop_assert_eq!(wire.len() % 4, 0);
        prop_assert!(checksum_ok(&wire));
        prop_assert_eq!(Packet::parse(&wire), Ok(p.clone()));
        prop_assert_eq!(Packet::parse_unchecked(&wire), Ok(p.clone()));
        prop_assert_eq!(Packet::parse_bytes(&Bytes::from(wire.clone())), Ok(p.clone()));
        prop_assert_eq!(peek_header(&wire), Some((p.src_port, p.dst_port, p.verification_tag)));
    }

    #[test]
    fn encoded_len_matches_emit(p in packet()) {
        let wire = p.to_bytes();
        prop_assert_eq!(p.encoded_len(), wire.len());
        for (c, at) in p.chunks.iter().zip(chunk_offsets(&p)) {
            let mut one = Vec::new();
            c.emit(&mut one);
            prop_assert_eq!(one.len(), c.encoded_len());
            prop_assert_eq!(c.encoded_len(), padded(c.length_field()));
            prop_assert_eq!(&wire[at..at + one.len()], &one[..]);
            let length = u16::from_be_bytes([wire[at + 2], wire[at + 3]]);
            prop_assert_eq!(usize::from(length), c.length_field());
            prop_assert_eq!(wire[at], c.kind());
            prop_assert_eq!(wire[at + 1], c.flags());
            if let Chunk::Data(d) = c {
                prop_assert_eq!(d.encoded_len(), data_chunk_len(d.payload.len()));
            }
        }
    }

    #[test]
    fn random_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..200)) {
        decode_all_ways(&buf);
    }

    #[test]
    fn random_chunks_behind_a_header_never_panic(
        body in prop::collection::vec(any::<u8>(), 0..120),
        kind in prop::sample::select(KNOWN_CHUNKS.to_vec()),
        flags in any::<u8>(),
    ) {
        // A plausible chunk header with a length that fits, so the decoder
        // gets past framing and into every chunk body parser.
        let mut buf = vec![0, 1, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, kind, flags];
        buf.extend_from_slice(&((4 + body.len()) as u16).to_be_bytes());
        buf.extend_from_slice(&body);
        write_checksum_field(&mut buf);
        decode_all_ways(&buf);
    }

    #[test]
    fn mutated_packets_never_panic(
        p in packet(),
        ms in prop::collection::vec(mutation(), 1..4),
    ) {
        let offsets = chunk_offsets(&p);
        let mut buf = p.to_bytes();
        for m in &ms {
            apply(&mut buf, &offsets, m);
        }
        // As received: the checksum most likely no longer matches.
        decode_all_ways(&buf);
        // With the checksum repaired, so checked parsing reaches the chunks.
        write_checksum_field(&mut buf);
        decode_all_ways(&buf);
    }
}
