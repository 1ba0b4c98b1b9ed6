//! pcap reader tests on captures built here byte by byte.

use super::*;

/// Builds a classic pcap file.
struct Writer {
    big: bool,
    nanos: bool,
    buf: Vec<u8>,
}

impl Writer {
    fn new(link: u32, big: bool, nanos: bool) -> Writer {
        let mut w = Writer {
            big,
            nanos,
            buf: Vec::new(),
        };
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        w.u32(magic);
        w.u16(2);
        w.u16(4);
        w.u32(0);
        w.u32(0);
        w.u32(65535);
        w.u32(link);
        w
    }
    fn u32(&mut self, v: u32) {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    fn u16(&mut self, v: u16) {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    /// A record at `t_us` microseconds; `snap` cuts the captured bytes.
    fn record(&mut self, t_us: u64, frame: &[u8], snap: usize) {
        let incl = frame.len().min(snap);
        self.u32((t_us / 1_000_000) as u32);
        let frac = t_us % 1_000_000;
        self.u32(if self.nanos {
            (frac * 1000) as u32
        } else {
            frac as u32
        });
        self.u32(incl as u32);
        self.u32(frame.len() as u32);
        self.buf.extend_from_slice(&frame[..incl]);
    }
}

fn tcp(src: u16, dst: u16, payload: usize, options: usize) -> Vec<u8> {
    let mut t = vec![0u8; 20 + options];
    t[0..2].copy_from_slice(&src.to_be_bytes());
    t[2..4].copy_from_slice(&dst.to_be_bytes());
    t[12] = (((20 + options) / 4) as u8) << 4;
    t.resize(t.len() + payload, 0xab);
    t
}

fn udp(src: u16, dst: u16, payload: usize) -> Vec<u8> {
    let mut u = vec![0u8; 8];
    u[0..2].copy_from_slice(&src.to_be_bytes());
    u[2..4].copy_from_slice(&dst.to_be_bytes());
    u[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    u.resize(u.len() + payload, 0xcd);
    u
}

fn ipv4(proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut ip = vec![0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip.extend_from_slice(l4);
    ip
}

fn ipv6(next: u8, l4: &[u8]) -> Vec<u8> {
    let mut ip = vec![0u8; 40];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
    ip[6] = next;
    ip.extend_from_slice(l4);
    ip
}

fn ethernet(ethertype: u16, vlan: bool, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    if vlan {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&[0, 5]);
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    // Minimum frame padding: the reader must use the IP length, not this.
    while f.len() < 60 {
        f.push(0);
    }
    f
}

fn sll(protocol: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    f.extend_from_slice(&protocol.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Ethernet capture of a TCP conversation: server port 7000 → client. The
/// filter on the source port keeps the server's data segments, drops the
/// client's, counts pure ACKs as empty, and reads sizes from IP/TCP headers
/// even when the snap length cuts the payload.
#[test]
fn ethernet_tcp_one_direction() {
    let mut w = Writer::new(1, false, false);
    w.record(
        1_000_000,
        &ethernet(0x0800, false, &ipv4(6, &tcp(7000, 40000, 100, 12))),
        1500,
    );
    w.record(
        1_050_000,
        &ethernet(0x0800, false, &ipv4(6, &tcp(40000, 7000, 0, 12))),
        1500,
    ); // client ACK
    w.record(
        1_250_000,
        &ethernet(0x0800, true, &ipv4(6, &tcp(7000, 40000, 1448, 12))),
        96,
    ); // snap 96
    w.record(1_300_000, &ethernet(0x0806, false, &[0u8; 28]), 1500); // ARP
    w.record(
        1_400_000,
        &ethernet(0x0800, false, &ipv4(6, &tcp(7000, 40000, 0, 0))),
        1500,
    ); // server pure ACK
    w.record(
        1_500_000,
        &ethernet(0x0800, false, &ipv4(17, &udp(7000, 40000, 30))),
        1500,
    ); // UDP, not TCP
    let filter = PcapFilter {
        protocol: Protocol::Tcp,
        src_port: Some(7000),
        dst_port: None,
    };
    let (r, stats) = parse_with_stats(&w.buf, &filter).unwrap();
    assert_eq!(
        r,
        [
            TraceRecord {
                offset: Duration::ZERO,
                bytes: 100,
                stream: None
            },
            TraceRecord {
                offset: Duration::from_millis(250),
                bytes: 1448,
                stream: None
            },
        ]
    );
    assert_eq!(stats.packets, 6);
    assert_eq!(stats.matched, 3);
    assert_eq!(stats.empty, 1);
    assert_eq!(stats.not_ip, 1);
    assert_eq!(stats.filtered_out, 2);
}

/// Big-endian nanosecond file, Linux SLL, UDP both directions, dst filter.
#[test]
fn sll_udp_big_endian_nanos() {
    let mut w = Writer::new(113, true, true);
    w.record(
        5_000_000,
        &sll(0x0800, &ipv4(17, &udp(9899, 5000, 64))),
        65535,
    );
    w.record(
        5_000_010,
        &sll(0x0800, &ipv4(17, &udp(5000, 9899, 64))),
        65535,
    );
    w.record(
        5_010_000,
        &sll(0x86dd, &ipv6(17, &udp(9899, 5000, 200))),
        65535,
    );
    let filter = PcapFilter {
        protocol: Protocol::Udp,
        src_port: None,
        dst_port: Some(5000),
    };
    let r = parse(&w.buf, &filter).unwrap();
    assert_eq!(r.iter().map(|x| x.bytes).collect::<Vec<_>>(), [64, 200]);
    assert_eq!(r[1].offset, Duration::from_millis(10));
}

/// Raw IP link type: IPv4 and IPv6 (with a hop-by-hop header), and a
/// non-first fragment that is skipped; backward time is clamped.
#[test]
fn raw_ip_with_extension_headers_and_fragments() {
    let mut w = Writer::new(101, false, false);
    w.record(10, &ipv4(6, &tcp(80, 1234, 500, 0)), 65535);
    let mut hbh = vec![6u8, 0, 0, 0, 0, 0, 0, 0]; // next = TCP, length 8
    hbh.extend(tcp(80, 1234, 700, 0));
    w.record(5, &ipv6(0, &hbh), 65535); // 5 µs: earlier than the previous record
    let mut frag = ipv4(6, &tcp(80, 1234, 300, 0));
    frag[6..8].copy_from_slice(&100u16.to_be_bytes());
    w.record(30, &frag, 65535);
    let (r, stats) = parse_with_stats(&w.buf, &PcapFilter::default()).unwrap();
    assert_eq!(r.iter().map(|x| x.bytes).collect::<Vec<_>>(), [500, 700]);
    assert_eq!(r[1].offset, Duration::ZERO, "backward time is clamped");
    assert_eq!(stats.fragments, 1);
}

#[test]
fn malformed_files_are_errors() {
    let good = {
        let mut w = Writer::new(1, false, false);
        w.record(0, &ethernet(0x0800, false, &ipv4(17, &udp(1, 2, 10))), 1500);
        w.buf
    };
    assert!(parse(&good, &PcapFilter::default()).is_ok());

    let expect_pcap_err = |bytes: &[u8], word: &str| match parse(bytes, &PcapFilter::default()) {
        Err(WorkloadError::Pcap { reason, .. }) => assert!(reason.contains(word), "{reason}"),
        other => panic!("expected a pcap error mentioning {word:?}, got {other:?}"),
    };
    expect_pcap_err(&good[..10], "shorter");
    expect_pcap_err(&[0u8; 24], "not a pcap");
    expect_pcap_err(
        &[
            0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
        "pcapng",
    );
    expect_pcap_err(&good[..good.len() - 5], "left in the file");
    expect_pcap_err(&good[..30], "record header");
    let mut bad_link = good.clone();
    bad_link[20] = 200;
    expect_pcap_err(&bad_link, "link type");
    let mut bad_version = good.clone();
    bad_version[4] = 9;
    expect_pcap_err(&bad_version, "version");
    // IHL of 15 words = 60 bytes > total length 38.
    let mut bad_ihl = good.clone();
    bad_ihl[24 + 16 + 14] = 0x4f;
    expect_pcap_err(&bad_ihl, "header length");
    // UDP length field larger than the IP payload.
    let mut bad_udp = good.clone();
    let udp_len_at = 24 + 16 + 14 + 20 + 4;
    bad_udp[udp_len_at..udp_len_at + 2].copy_from_slice(&500u16.to_be_bytes());
    expect_pcap_err(&bad_udp, "UDP length");
    // TCP data offset beyond the segment.
    let mut w = Writer::new(101, false, false);
    let mut seg = tcp(1, 2, 0, 0);
    seg[12] = 0xf0; // 60 bytes of header in a 20-byte segment
    w.record(0, &ipv4(6, &seg), 65535);
    expect_pcap_err(&w.buf, "data offset");
    // A microsecond field of a million is out of range.
    let mut bad_ts = good.clone();
    bad_ts[28..32].copy_from_slice(&1_000_000u32.to_le_bytes());
    expect_pcap_err(&bad_ts, "timestamp");
    // Nothing matches: a distinct error.
    let only_other_port = PcapFilter {
        src_port: Some(9),
        ..PcapFilter::default()
    };
    assert!(matches!(
        parse(&good, &only_other_port),
        Err(WorkloadError::EmptyTrace { .. })
    ));
}
