//! Hand-built byte vectors, laid out from the RFC 9260 §3 / RFC 3758 §3.2
//! figures, checked field by field in both directions, and the framing
//! errors the codec must report.
//!
//! The checksum of the bundled packet was computed with an independent
//! bit-at-a-time CRC32c (polynomial 0x82F63B78, reflected), not with the
//! crate under test.

use std::net::{Ipv4Addr, Ipv6Addr};

use bytes::Bytes;
use thinstream_proto::wire::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    assert!(s.len() & 1 == 0, "odd hex literal");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Common header used by the single-chunk vectors (ports 5000 → 5001,
/// tag 0x01020304, checksum left zero: these go through `parse_unchecked`).
const HDR: &str = "1388 1389 01020304 00000000";

fn packet_of(chunks: Vec<Chunk>) -> Packet {
    Packet {
        src_port: 5000,
        dst_port: 5001,
        verification_tag: 0x0102_0304,
        chunks,
    }
}

/// `chunk_hex` parses to `chunk`, and `chunk` emits exactly `chunk_hex`.
fn check_chunk(chunk_hex: &str, chunk: Chunk) {
    let wire = hex(&format!("{HDR} {chunk_hex}"));
    let parsed = Packet::parse_unchecked(&wire).unwrap_or_else(|e| panic!("{chunk_hex}: {e}"));
    assert_eq!(
        parsed,
        packet_of(vec![chunk.clone()]),
        "parse of {chunk_hex}"
    );
    assert_eq!(
        chunk.encoded_len(),
        wire.len() - 12,
        "encoded_len of {chunk_hex}"
    );
    let mut out = Vec::new();
    chunk.emit(&mut out);
    assert_eq!(out, hex(chunk_hex), "emit of {chunk:?}");
    // And through a whole packet, with a valid checksum this time.
    let emitted = packet_of(vec![chunk]).to_bytes();
    assert_eq!(&emitted[12..], &wire[12..]);
    assert_eq!(Packet::parse(&emitted), Ok(parsed));
}

fn parse_err(chunk_hex: &str) -> WireError {
    let wire = hex(&format!("{HDR} {chunk_hex}"));
    match Packet::parse_unchecked(&wire) {
        Ok(p) => panic!("{chunk_hex} parsed as {p:?}"),
        Err(e) => e,
    }
}

#[test]
fn bundled_packet_with_known_checksum() {
    let wire = hex("1388 1389 01020304 5c4d6779
         0300001c 00000064 00010000 0002 0001 0002 0003 0005 0005 00000063
         00030013 00000065 0001 0007 00000033 616263 00
         000c0014 00000066 0002 0000 00000000 deadbeef
         c0000010 00000060 0001 0007 0002 0000");
    assert_eq!(checksum(&wire), 0x7967_4d5c);
    let expected = packet_of(vec![
        Chunk::Sack(SackChunk {
            cum_tsn_ack: Tsn(100),
            a_rwnd: 65_536,
            gap_blocks: vec![GapBlock { start: 2, end: 3 }, GapBlock { start: 5, end: 5 }],
            duplicate_tsns: vec![Tsn(99)],
        }),
        Chunk::Data(DataChunk {
            tsn: Tsn(101),
            stream: 1,
            ssn: Ssn(7),
            ppid: 51,
            unordered: false,
            beginning: true,
            ending: true,
            immediate: false,
            payload: Bytes::from_static(b"abc"),
        }),
        Chunk::Data(DataChunk {
            tsn: Tsn(102),
            stream: 2,
            ssn: Ssn(0),
            ppid: 0,
            unordered: true,
            beginning: false,
            ending: false,
            immediate: true,
            payload: Bytes::from_static(&[0xde, 0xad, 0xbe, 0xef]),
        }),
        Chunk::ForwardTsn(ForwardTsnChunk {
            new_cum_tsn: Tsn(96),
            streams: vec![
                ForwardTsnStream {
                    stream: 1,
                    ssn: Ssn(7),
                },
                ForwardTsnStream {
                    stream: 2,
                    ssn: Ssn(0),
                },
            ],
        }),
    ]);
    assert_eq!(Packet::parse(&wire), Ok(expected.clone()));
    assert_eq!(expected.to_bytes(), wire);
    assert_eq!(expected.encoded_len(), 96);
    let kinds: Vec<u8> = expected.chunks.iter().map(Chunk::kind).collect();
    assert_eq!(
        kinds,
        [
            chunk_type::SACK,
            chunk_type::DATA,
            chunk_type::DATA,
            chunk_type::FORWARD_TSN
        ]
    );
    // Appending after existing bytes leaves them alone and sums only the packet.
    let mut out = vec![0xEE; 3];
    expected.emit(&mut out);
    assert_eq!(&out[..3], &[0xEE; 3]);
    assert_eq!(&out[3..], &wire[..]);
}

#[test]
fn data_vectors() {
    check_chunk(
        "00 03 0013 00000065 0001 0007 00000033 616263 00",
        Chunk::Data(DataChunk {
            tsn: Tsn(101),
            stream: 1,
            ssn: Ssn(7),
            ppid: 51,
            unordered: false,
            beginning: true,
            ending: true,
            immediate: false,
            payload: Bytes::from_static(b"abc"),
        }),
    );
    // Zero-length user data is representable (RFC 9260 §6.2 is the
    // association's business): flags U|B|E, length exactly 16.
    check_chunk(
        "00 07 0010 ffffffff ffff ffff 12345678",
        Chunk::Data(DataChunk {
            tsn: Tsn(u32::MAX),
            stream: 0xffff,
            ssn: Ssn(0xffff),
            ppid: 0x1234_5678,
            unordered: true,
            beginning: true,
            ending: true,
            immediate: false,
            payload: Bytes::new(),
        }),
    );
    assert_eq!(data_chunk_len(0), 16);
    assert_eq!(data_chunk_len(1), 20);
    assert_eq!(data_chunk_len(4), 20);
    assert_eq!(data_chunk_len(1200), 1216);
    // Reserved flag bits are ignored on receipt and sent as zero.
    let p = Packet::parse_unchecked(&hex(&format!(
        "{HDR} 00 f8 0010 00000001 0000 0000 00000000"
    )))
    .unwrap();
    let Chunk::Data(d) = &p.chunks[0] else {
        panic!()
    };
    assert!(d.immediate && !d.unordered && !d.beginning && !d.ending);
    assert_eq!(p.chunks[0].flags(), data_flags::IMMEDIATE);
}

#[test]
fn init_vector_with_every_parameter_kind() {
    // Initiate tag 0 and zero outbound streams are protocol violations the
    // association handles (RFC 9260 §3.3.2); the codec must keep them.
    check_chunk(
        "01 00 0048 00000000 00010000 0000 ffff ffffffff
         0005 0008 c0000201
         0009 0008 00002710
         000b 000f 6578616d706c652e6f7267 00
         000c 0006 0005 0000
         c006 0008 00000001
         c000 0004",
        Chunk::Init(InitChunk {
            initiate_tag: 0,
            a_rwnd: 65_536,
            outbound_streams: 0,
            inbound_streams: 0xffff,
            initial_tsn: Tsn(u32::MAX),
            params: vec![
                Param::Ipv4Address(Ipv4Addr::new(192, 0, 2, 1)),
                Param::CookiePreservative(10_000),
                Param::HostNameAddress(Bytes::from_static(b"example.org")),
                Param::SupportedAddressTypes(vec![5]),
                Param::Unknown {
                    kind: 0xc006,
                    value: Bytes::from_static(&[0, 0, 0, 1]),
                },
                Param::ForwardTsnSupported,
            ],
        }),
    );
}

#[test]
fn init_ack_vector_last_parameter_padding_not_counted() {
    // The last parameter (Supported Extensions, 5 bytes) is padded inside
    // the packet but not counted in the chunk length: 20 + 24 + 8 + 12 + 5.
    let chunk = "02 00 0045 aabbccdd 00002000 0400 0800 00000001
         0006 0014 20010db8000000000000000000000001
         0007 0008 c0ffee00
         0008 0010 80000004 c123 0005 07 000000
         8008 0005 c0 000000";
    let init = InitChunk {
        initiate_tag: 0xaabb_ccdd,
        a_rwnd: 8192,
        outbound_streams: 1024,
        inbound_streams: 2048,
        initial_tsn: Tsn(1),
        params: vec![
            Param::Ipv6Address(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
            Param::StateCookie(Bytes::from_static(&[0xc0, 0xff, 0xee, 0x00])),
            Param::UnrecognizedParameter(Bytes::from(hex("80000004 c123 0005 07 000000"))),
            Param::SupportedExtensions(vec![chunk_type::FORWARD_TSN]),
        ],
    };
    check_chunk(chunk, Chunk::InitAck(init.clone()));
    assert_eq!(Chunk::InitAck(init.clone()).length_field(), 0x45);

    // A sender that counts the last parameter's padding in the chunk length
    // is accepted and means the same thing.
    let counted = chunk.replacen("0045", "0048", 1);
    let p = Packet::parse_unchecked(&hex(&format!("{HDR} {counted}"))).unwrap();
    assert_eq!(p.chunks, vec![Chunk::InitAck(init.clone())]);

    // A packet whose final padding is missing altogether is tolerated.
    let mut short = hex(&format!("{HDR} {chunk}"));
    short.truncate(short.len() - 3);
    let p = Packet::parse_unchecked(&short).unwrap();
    assert_eq!(p.chunks, vec![Chunk::InitAck(init)]);
}

#[test]
fn sack_vectors() {
    check_chunk(
        "03 00 0010 00000000 00000000 0000 0000",
        Chunk::Sack(SackChunk {
            cum_tsn_ack: Tsn(0),
            a_rwnd: 0,
            gap_blocks: vec![],
            duplicate_tsns: vec![],
        }),
    );
    check_chunk(
        "03 00 0020 80000000 0001fffe 0002 0002 0001 0001 0003 ffff 7fffffff 80000000",
        Chunk::Sack(SackChunk {
            cum_tsn_ack: Tsn(0x8000_0000),
            a_rwnd: 0x0001_fffe,
            gap_blocks: vec![
                GapBlock { start: 1, end: 1 },
                GapBlock {
                    start: 3,
                    end: 0xffff,
                },
            ],
            duplicate_tsns: vec![Tsn(0x7fff_ffff), Tsn(0x8000_0000)],
        }),
    );
}

#[test]
fn heartbeat_vectors() {
    check_chunk(
        "04 00 000b 0001 0007 010203 00",
        Chunk::Heartbeat(HeartbeatChunk {
            info: Bytes::from_static(&[1, 2, 3]),
        }),
    );
    check_chunk(
        "05 00 0008 0001 0004",
        Chunk::HeartbeatAck(HeartbeatChunk { info: Bytes::new() }),
    );
}

#[test]
fn abort_and_error_vectors() {
    check_chunk(
        "06 01 0011 0009 0008 0000002a 000d 0005 78 000000",
        Chunk::Abort(AbortChunk {
            t_bit: true,
            causes: vec![
                ErrorCause::no_user_data(Tsn(42)),
                ErrorCause::protocol_violation(Bytes::from_static(b"x")),
            ],
        }),
    );
    check_chunk(
        "06 00 0004",
        Chunk::Abort(AbortChunk {
            t_bit: false,
            causes: vec![],
        }),
    );
    // A non-last cause with odd length is padded and counted.
    check_chunk(
        "09 00 0010 000c 0006 6869 0000 0004 0004",
        Chunk::Error(ErrorChunk {
            causes: vec![
                ErrorCause::user_initiated_abort(Bytes::from_static(b"hi")),
                ErrorCause::out_of_resource(),
            ],
        }),
    );
    check_chunk(
        "09 00 000c 0001 0008 0005 0000",
        Chunk::Error(ErrorChunk {
            causes: vec![ErrorCause::invalid_stream_identifier(5)],
        }),
    );
}

#[test]
fn cookie_shutdown_and_other_fixed_vectors() {
    check_chunk(
        "0a 00 0007 aabbcc 00",
        Chunk::CookieEcho(CookieEchoChunk {
            cookie: Bytes::from_static(&[0xaa, 0xbb, 0xcc]),
        }),
    );
    check_chunk("0b 00 0004", Chunk::CookieAck);
    check_chunk(
        "07 00 0008 00000001",
        Chunk::Shutdown(ShutdownChunk {
            cum_tsn_ack: Tsn(1),
        }),
    );
    check_chunk("08 00 0004", Chunk::ShutdownAck);
    check_chunk(
        "0e 01 0004",
        Chunk::ShutdownComplete(ShutdownCompleteChunk { t_bit: true }),
    );
    check_chunk(
        "0e 00 0004",
        Chunk::ShutdownComplete(ShutdownCompleteChunk { t_bit: false }),
    );
    check_chunk(
        "c0 00 0008 fffffffe",
        Chunk::ForwardTsn(ForwardTsnChunk {
            new_cum_tsn: Tsn(0xffff_fffe),
            streams: vec![],
        }),
    );
    // Flags of flagless chunks are ignored on receipt (RFC 9260 §3.2).
    let p = Packet::parse_unchecked(&hex(&format!("{HDR} 0b ff 0004"))).unwrap();
    assert_eq!(p.chunks, vec![Chunk::CookieAck]);
}

#[test]
fn unknown_chunk_keeps_type_flags_and_value() {
    check_chunk(
        "82 5a 0006 0102 0000",
        Chunk::Unknown(UnknownChunk {
            kind: 0x82,
            flags: 0x5a,
            value: Bytes::from_static(&[1, 2]),
        }),
    );
    assert_eq!(Unrecognized::for_chunk(0x82), Unrecognized::Skip);
    // An unknown chunk followed by a known one: both kept, in order.
    let p = Packet::parse_unchecked(&hex(&format!("{HDR} 41 00 0004 0b 00 0004"))).unwrap();
    assert_eq!(
        p.chunks,
        vec![
            Chunk::Unknown(UnknownChunk {
                kind: 0x41,
                flags: 0,
                value: Bytes::new()
            }),
            Chunk::CookieAck
        ]
    );
}

#[test]
fn header_only_packet_has_no_chunks() {
    let wire = hex(HDR);
    assert_eq!(Packet::parse_unchecked(&wire), Ok(packet_of(vec![])));
    assert_eq!(peek_header(&wire), Some((5000, 5001, 0x0102_0304)));
    assert_eq!(peek_header(&wire[..11]), None);
}

#[test]
fn framing_errors() {
    use WireError::*;
    for n in 0..12 {
        assert_eq!(Packet::parse(&vec![0; n]), Err(Truncated));
        assert_eq!(Packet::parse_unchecked(&vec![0; n]), Err(Truncated));
    }
    // Chunk length below 4, past the end, below the type's minimum.
    assert_eq!(
        parse_err("0b 00 0003"),
        BadChunkLength {
            kind: 0x0b,
            length: 3
        }
    );
    assert_eq!(
        parse_err("0a 00 0009 aabbcc 00"),
        BadChunkLength {
            kind: 0x0a,
            length: 9
        }
    );
    assert_eq!(
        parse_err("00 03 000f 00000001 0000 0000 000000"),
        BadChunkLength {
            kind: 0,
            length: 15
        }
    );
    assert_eq!(
        parse_err("01 00 0010 00000001 00000000 0001 0001"),
        BadChunkLength {
            kind: 1,
            length: 16
        }
    );
    // Fixed-size chunks with another size.
    assert_eq!(
        parse_err("07 00 000c 00000001 00000000"),
        BadChunkLength {
            kind: 7,
            length: 12
        }
    );
    assert_eq!(
        parse_err("0b 00 0008 00000000"),
        BadChunkLength {
            kind: 0x0b,
            length: 8
        }
    );
    assert_eq!(
        parse_err("c0 00 000a 00000001 0001 0000"),
        BadChunkLength {
            kind: 0xc0,
            length: 10
        }
    );
    // Garbage after a valid chunk: too short for a header, or a bad header.
    assert!(matches!(
        parse_err("0b 00 0004 0000"),
        Malformed { kind: 0, .. }
    ));
    assert_eq!(
        parse_err("0b 00 0004 00000000"),
        BadChunkLength { kind: 0, length: 0 }
    );
    // SACK whose counts disagree with its length, either way.
    assert!(matches!(
        parse_err("03 00 0010 00000000 00000000 0001 0000"),
        Malformed { kind: 3, .. }
    ));
    assert!(matches!(
        parse_err("03 00 0014 00000000 00000000 0000 0000 00000001"),
        Malformed { kind: 3, .. }
    ));
    // HEARTBEAT without a Heartbeat Info TLV, with a bad TLV length, with extra bytes.
    assert!(matches!(
        parse_err("04 00 0008 0002 0004"),
        Malformed { kind: 4, .. }
    ));
    assert_eq!(
        parse_err("04 00 0008 0001 0009"),
        BadParamLength { kind: 1, length: 9 }
    );
    assert!(matches!(
        parse_err("04 00 000c 0001 0004 00000000"),
        Malformed { kind: 4, .. }
    ));
    // INIT parameters: short length, running past the chunk, wrong fixed size.
    let init = "01 00 {len} 00000001 00010000 0001 0001 00000001";
    let with =
        |len: &str, params: &str| parse_err(&format!("{} {params}", init.replace("{len}", len)));
    assert_eq!(
        with("0018", "0005 0003 00000000"),
        BadParamLength { kind: 5, length: 3 }
    );
    assert_eq!(
        with("0018", "0007 0010 00000000"),
        BadParamLength {
            kind: 7,
            length: 16
        }
    );
    assert_eq!(
        with("001b", "0005 0007 c00002 00"),
        BadParamLength { kind: 5, length: 7 }
    );
    assert_eq!(
        with("001c", "c000 0008 00000000"),
        BadParamLength {
            kind: 0xc000,
            length: 8
        }
    );
    assert_eq!(
        with("001b", "000c 0007 000500 00"),
        BadParamLength {
            kind: 0xc,
            length: 7
        }
    );
    assert_eq!(
        with("001a", "0009 0006 0000 0000"),
        BadParamLength { kind: 9, length: 6 }
    );
    assert_eq!(
        with(
            "002c",
            "0006 0010 00000000000000000000000000000000 00000000"
        ),
        BadParamLength {
            kind: 6,
            length: 16
        }
    );
    assert!(matches!(
        with("001a", "c000 0004 0000 0000"),
        Malformed { kind: 1, .. }
    ));
    // Error cause with a length below 4.
    assert_eq!(
        parse_err("06 00 0008 0009 0002"),
        BadParamLength { kind: 9, length: 2 }
    );
}

#[test]
fn errors_display() {
    let e = WireError::BadChecksum {
        expected: 0x8a91_36aa,
        found: 0,
    };
    assert_eq!(
        e.to_string(),
        "CRC32c mismatch: contents give 0x8a9136aa, packet carries 0x00000000"
    );
    let e: Box<dyn std::error::Error> = Box::new(WireError::BadChunkLength { kind: 0, length: 3 });
    assert_eq!(e.to_string(), "chunk type 0x00 has invalid length 3");
    assert_eq!(cause_code::name(cause_code::NO_USER_DATA), "No User Data");
}

// RFC 8260 §2.1: I-DATA = type 64, flags (I U B E), length, TSN, stream,
// 16 reserved bits, MID, then PPID on the first fragment / FSN on the others.
#[test]
fn idata_chunk_layout() {
    let first = IDataChunk {
        tsn: Tsn(0x0102_0304),
        stream: 7,
        mid: 0x0a0b_0c0d,
        ppid_fsn: 51,
        unordered: false,
        beginning: true,
        ending: false,
        immediate: true,
        payload: Bytes::from_static(b"abcde"),
    };
    assert_eq!((first.ppid(), first.fsn()), (51, 0));
    check_chunk(
        "40 0a 0019 01020304 0007 0000 0a0b0c0d 00000033 6162636465 000000",
        Chunk::IData(first),
    );
    let later = IDataChunk {
        tsn: Tsn(9),
        stream: 1,
        mid: 2,
        ppid_fsn: 3,
        unordered: true,
        beginning: false,
        ending: true,
        immediate: false,
        payload: Bytes::from_static(b"wxyz"),
    };
    assert_eq!((later.ppid(), later.fsn()), (0, 3));
    check_chunk(
        "40 05 0018 00000009 0001 0000 00000002 00000003 7778797a",
        Chunk::IData(later),
    );
    // Shorter than the 20-byte header: a framing error, not a panic.
    let short = hex(&format!("{HDR} 40 03 0010 00000001 0000 0000 00000000"));
    assert!(matches!(
        Packet::parse_unchecked(&short),
        Err(WireError::BadChunkLength { kind: 0x40, .. })
    ));
}

// RFC 8260 §2.3.1: I-FORWARD-TSN = type 194, new cumulative TSN, then
// 8-byte entries (stream, 15 reserved bits and U, MID).
#[test]
fn iforward_tsn_chunk_layout() {
    check_chunk(
        "c2 00 0018 00000063 0001 0000 00000006 0002 0001 00000008",
        Chunk::IForwardTsn(IForwardTsnChunk {
            new_cum_tsn: Tsn(99),
            streams: vec![
                IForwardTsnStream {
                    stream: 1,
                    unordered: false,
                    mid: 6,
                },
                IForwardTsnStream {
                    stream: 2,
                    unordered: true,
                    mid: 8,
                },
            ],
        }),
    );
    // An entry cut short: a framing error.
    let bad = hex(&format!("{HDR} c2 00 000c 00000063 0001 0000"));
    assert!(matches!(
        Packet::parse_unchecked(&bad),
        Err(WireError::BadChunkLength { kind: 0xc2, .. })
    ));
}
