//! Real packets from usrsctp 0.9.5.0 (Debian `libusrsctp-examples`):
//! `echo_server 9899 9900` and `client 127.0.0.1 7 0 9900 9899` sending
//! "hello\n", captured with tcpdump on `lo` inside a private network
//! namespace (`unshare -n`, only loopback up). Each constant is one UDP
//! payload (RFC 6951: the payload is the SCTP packet). Field values were
//! cross-checked against tshark's SCTP dissector.
//!
//! These pin the codec to what a widely deployed peer actually sends:
//! checksum byte order, parameter padding, Supported Address Types,
//! AUTH/ECN parameters we must keep as unknown, and byte-exact re-emission.

use std::net::{Ipv4Addr, Ipv6Addr};

use thinstream_proto::wire::*;

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() & 1 == 0);
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

const INIT: &str = concat!(
    "f570000700000000c653060e01000080924225ee00020000000a0800270dd93b",
    "80000004c000000480080009c00fc18082000000800200248f21bf9e1ffe2b9d",
    "b170115753be3cd8b43ebc7a8b97c1c924e1f356d341e5ba8004000600010000",
    "8003000680c10000000c00080005000600060014000000000000000000000000",
    "00000001000500087f000001",
);
const INIT_ACK: &str = concat!(
    "0007f570924225ee268750a1020001f8ddf8400e00020000000a080092c9c2f5",
    "80000004c000000480080009c00fc1808200000080020024d45789b2f4ef9583",
    "cab62963f34317c80348ee8f6d8e37f122053c20f907df6b8004000600010000",
    "8003000680c10000000600140000000000000000000000000000000100050008",
    "7f000001000701804b414d452d42534420312e3100000000fd72026b00000000",
    "b1130f000000000060ea00000000000000000000ee254292ddf8400e7f000001",
    "000000000000000000000000050000007f000001000000000000000000000000",
    "0500000000000000f570000701010000010101000000000001000080924225ee",
    "00020000000a0800270dd93b80000004c000000480080009c00fc18082000000",
    "800200248f21bf9e1ffe2b9db170115753be3cd8b43ebc7a8b97c1c924e1f356",
    "d341e5ba80040006000100008003000680c10000000c00080005000600060014",
    "00000000000000000000000000000001000500087f000001020001f8ddf8400e",
    "00020000000a080092c9c2f580000004c000000480080009c00fc18082000000",
    "80020024d45789b2f4ef9583cab62963f34317c80348ee8f6d8e37f122053c20",
    "f907df6b80040006000100008003000680c10000000600140000000000000000",
    "0000000000000001000500087f000001f049902a64198587e586b09871c964bc",
    "b48b854a",
);
const COOKIE_ECHO: &str = concat!(
    "f5700007ddf8400ec872c0490a0001804b414d452d42534420312e3100000000",
    "fd72026b00000000b1130f000000000060ea00000000000000000000ee254292",
    "ddf8400e7f000001000000000000000000000000050000007f00000100000000",
    "00000000000000000500000000000000f5700007010100000101010000000000",
    "01000080924225ee00020000000a0800270dd93b80000004c000000480080009",
    "c00fc18082000000800200248f21bf9e1ffe2b9db170115753be3cd8b43ebc7a",
    "8b97c1c924e1f356d341e5ba80040006000100008003000680c10000000c0008",
    "000500060006001400000000000000000000000000000001000500087f000001",
    "020001f8ddf8400e00020000000a080092c9c2f580000004c000000480080009",
    "c00fc1808200000080020024d45789b2f4ef9583cab62963f34317c80348ee8f",
    "6d8e37f122053c20f907df6b80040006000100008003000680c1000000060014",
    "00000000000000000000000000000001000500087f000001f049902a64198587",
    "e586b09871c964bcb48b854a",
);
const COOKIE_ACK: &str = "0007f570924225ee9176fb010b000004";
const HEARTBEAT_SERVER: &str = concat!(
    "0007f570924225eed884fc940400002c00010028fd72026b60140f007e5bdf9d",
    "739245a70a1c000000000000000000000000000000000001",
);
const HEARTBEAT_CLIENT: &str = concat!(
    "f5700007ddf8400ea985fe070400002c00010028fd72026bd4140f003a7b2f88",
    "98a52cb30a1c000000000000000000000000000000000001",
);
const HEARTBEAT_ACK_CLIENT: &str = concat!(
    "f5700007ddf8400ebd4dd9e20500002c00010028fd72026b60140f007e5bdf9d",
    "739245a70a1c000000000000000000000000000000000001",
);
const DATA_CLIENT: &str = concat!(
    "f5700007ddf8400e93ea508500030016270dd93b000000000000000068656c6c",
    "6f0a0000",
);
const HEARTBEAT_ACK_SERVER: &str = concat!(
    "0007f570924225eecc4cdb710500002c00010028fd72026bd4140f003a7b2f88",
    "98a52cb30a1c000000000000000000000000000000000001",
);
const SACK_SERVER: &str = "0007f570924225ee431c43bb03000010270dd93b0001fd6200000000";
const DATA_SERVER: &str = concat!(
    "0007f570924225eeff68f89a0003001692c9c2f5000000000000000068656c6c",
    "6f0a0000",
);
const SACK_CLIENT: &str = "f5700007ddf8400e7fbff9540300001092c9c2f50002000000000000";
const SHUTDOWN: &str = "f5700007ddf8400e07f0b1600700000892c9c2f5";
const SHUTDOWN_ACK: &str = "0007f570924225eea8ffd96308000004";
const SHUTDOWN_COMPLETE: &str = "f5700007ddf8400e607d285e0e000004";

const ALL: [&str; 15] = [
    INIT,
    INIT_ACK,
    COOKIE_ECHO,
    COOKIE_ACK,
    HEARTBEAT_SERVER,
    HEARTBEAT_CLIENT,
    HEARTBEAT_ACK_CLIENT,
    DATA_CLIENT,
    HEARTBEAT_ACK_SERVER,
    SACK_SERVER,
    DATA_SERVER,
    SACK_CLIENT,
    SHUTDOWN,
    SHUTDOWN_ACK,
    SHUTDOWN_COMPLETE,
];

const CLIENT_TAG: u32 = 0x9242_25ee;
const SERVER_TAG: u32 = 0xddf8_400e;

#[test]
fn every_capture_verifies_and_reemits_byte_exact() {
    for (i, h) in ALL.iter().enumerate() {
        let bytes = hex(h);
        let p = Packet::parse(&bytes).unwrap_or_else(|e| panic!("capture {i}: {e}"));
        assert_eq!(p.encoded_len(), bytes.len(), "capture {i}");
        assert_eq!(p.to_bytes(), bytes, "capture {i} re-emits differently");
        assert!(checksum_ok(&bytes));
        // The zero-copy path agrees.
        let shared = bytes::Bytes::from(bytes.clone());
        assert_eq!(Packet::parse_bytes(&shared), Ok(p), "capture {i}");
    }
}

#[test]
fn checksum_is_stored_little_endian() {
    let bytes = hex(INIT);
    // tshark shows the field as 0xc653060e reading big-endian; the CRC32c
    // value is its byte reversal.
    assert_eq!(&bytes[8..12], &[0xc6, 0x53, 0x06, 0x0e]);
    assert_eq!(checksum(&bytes), 0x0e06_53c6);
    assert_eq!(read_checksum_field(&bytes), Some(0x0e06_53c6));
    let mut broken = bytes.clone();
    broken[8] ^= 0x01;
    assert_eq!(
        Packet::parse(&broken),
        Err(WireError::BadChecksum {
            expected: 0x0e06_53c6,
            found: 0x0e06_53c7
        })
    );
    assert!(Packet::parse_unchecked(&broken).is_ok());
}

#[test]
fn init_fields() {
    let p = Packet::parse(&hex(INIT)).unwrap();
    assert_eq!((p.src_port, p.dst_port, p.verification_tag), (62832, 7, 0));
    assert_eq!(peek_header(&hex(INIT)), Some((62832, 7, 0)));
    assert_eq!(p.chunks.len(), 1);
    let Chunk::Init(init) = &p.chunks[0] else {
        panic!("not INIT: {:?}", p.chunks[0])
    };
    assert_eq!(p.chunks[0].kind(), chunk_type::INIT);
    assert_eq!(p.chunks[0].length_field(), 128);
    assert_eq!(init.initiate_tag, CLIENT_TAG);
    assert_eq!(init.a_rwnd, 131_072);
    assert_eq!(init.outbound_streams, 10);
    assert_eq!(init.inbound_streams, 2048);
    assert_eq!(init.initial_tsn, Tsn(655_219_003));
    let random = hex("8f21bf9e1ffe2b9db170115753be3cd8b43ebc7a8b97c1c924e1f356d341e5ba");
    assert_eq!(
        init.params,
        vec![
            Param::Unknown {
                kind: param_type::ECN_CAPABLE,
                value: Default::default()
            },
            Param::ForwardTsnSupported,
            Param::SupportedExtensions(vec![0xc0, 0x0f, 0xc1, 0x80, 0x82]),
            Param::Unknown {
                kind: 0x8002,
                value: random.into()
            },
            Param::Unknown {
                kind: 0x8004,
                value: vec![0x00, 0x01].into()
            },
            Param::Unknown {
                kind: 0x8003,
                value: vec![0x80, 0xc1].into()
            },
            Param::SupportedAddressTypes(vec![5, 6]),
            Param::Ipv6Address(Ipv6Addr::LOCALHOST),
            Param::Ipv4Address(Ipv4Addr::LOCALHOST),
        ]
    );
    // What the association must do with the unknown ones (RFC 9260 §3.2.1):
    // all of usrsctp's extension parameters are "skip, do not report".
    assert_eq!(Unrecognized::for_param(0x8002), Unrecognized::Skip);
}

#[test]
fn init_ack_fields() {
    let p = Packet::parse(&hex(INIT_ACK)).unwrap();
    assert_eq!(
        (p.src_port, p.dst_port, p.verification_tag),
        (7, 62832, CLIENT_TAG)
    );
    let Chunk::InitAck(ack) = &p.chunks[0] else {
        panic!("not INIT ACK")
    };
    assert_eq!(p.chunks[0].length_field(), 504);
    assert_eq!(ack.initiate_tag, SERVER_TAG);
    assert_eq!(ack.a_rwnd, 131_072);
    assert_eq!((ack.outbound_streams, ack.inbound_streams), (10, 2048));
    assert_eq!(ack.initial_tsn, Tsn(2_462_696_181));
    assert_eq!(ack.params.len(), 9);
    let Some(Param::StateCookie(cookie)) = ack.params.last() else {
        panic!("no cookie last")
    };
    assert_eq!(cookie.len(), 380);
    assert_eq!(&cookie[..16], &hex("4b414d452d42534420312e3100000000")[..]);
    // The COOKIE ECHO carries the same cookie back.
    let echo = Packet::parse(&hex(COOKIE_ECHO)).unwrap();
    assert_eq!(echo.verification_tag, SERVER_TAG);
    assert_eq!(
        echo.chunks,
        vec![Chunk::CookieEcho(CookieEchoChunk {
            cookie: cookie.clone()
        })]
    );
}

#[test]
fn handshake_tail_and_shutdown_fields() {
    let ack = Packet::parse(&hex(COOKIE_ACK)).unwrap();
    assert_eq!(ack.verification_tag, CLIENT_TAG);
    assert_eq!(ack.chunks, vec![Chunk::CookieAck]);

    let s = Packet::parse(&hex(SHUTDOWN)).unwrap();
    assert_eq!(s.verification_tag, SERVER_TAG);
    assert_eq!(
        s.chunks,
        vec![Chunk::Shutdown(ShutdownChunk {
            cum_tsn_ack: Tsn(2_462_696_181)
        })]
    );
    let sa = Packet::parse(&hex(SHUTDOWN_ACK)).unwrap();
    assert_eq!(sa.chunks, vec![Chunk::ShutdownAck]);
    let sc = Packet::parse(&hex(SHUTDOWN_COMPLETE)).unwrap();
    assert_eq!(sc.verification_tag, SERVER_TAG);
    assert_eq!(
        sc.chunks,
        vec![Chunk::ShutdownComplete(ShutdownCompleteChunk {
            t_bit: false
        })]
    );
}

#[test]
fn data_and_sack_fields() {
    let d = Packet::parse(&hex(DATA_CLIENT)).unwrap();
    assert_eq!(
        (d.src_port, d.dst_port, d.verification_tag),
        (62832, 7, SERVER_TAG)
    );
    assert_eq!(
        d.chunks,
        vec![Chunk::Data(DataChunk {
            tsn: Tsn(655_219_003),
            stream: 0,
            ssn: Ssn(0),
            ppid: 0,
            unordered: false,
            beginning: true,
            ending: true,
            immediate: false,
            payload: b"hello\n"[..].into(),
        })]
    );
    assert_eq!(d.chunks[0].length_field(), 22);
    assert_eq!(d.chunks[0].encoded_len(), 24);
    assert_eq!(data_chunk_len(6), 24);

    let s = Packet::parse(&hex(SACK_SERVER)).unwrap();
    assert_eq!(
        s.chunks,
        vec![Chunk::Sack(SackChunk {
            cum_tsn_ack: Tsn(655_219_003),
            a_rwnd: 130_402,
            gap_blocks: vec![],
            duplicate_tsns: vec![],
        })]
    );
}

#[test]
fn heartbeat_fields() {
    let hb = Packet::parse(&hex(HEARTBEAT_SERVER)).unwrap();
    assert_eq!(hb.verification_tag, CLIENT_TAG);
    let Chunk::Heartbeat(h) = &hb.chunks[0] else {
        panic!("not HEARTBEAT")
    };
    assert_eq!(hb.chunks[0].length_field(), 44);
    assert_eq!(h.info.len(), 36);
    assert_eq!(
        &h.info[..],
        &hex("fd72026b60140f007e5bdf9d739245a70a1c000000000000000000000000000000000001")[..]
    );
    // Each HEARTBEAT ACK echoes the other side's HEARTBEAT info unchanged
    // (RFC 9260 §8.3): server HB → client HB ACK, client HB → server HB ACK.
    let info_of = |h: &str| match &Packet::parse(&hex(h)).unwrap().chunks[..] {
        [Chunk::Heartbeat(h)] => (true, h.info.clone()),
        [Chunk::HeartbeatAck(h)] => (false, h.info.clone()),
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(info_of(HEARTBEAT_ACK_CLIENT), (false, h.info.clone()));
    let (is_hb, client_info) = info_of(HEARTBEAT_CLIENT);
    assert!(is_hb);
    assert_ne!(client_info, h.info);
    assert_eq!(info_of(HEARTBEAT_ACK_SERVER), (false, client_info));
}
