//! Classic libpcap capture files of simulated traffic.
//!
//! The simulator moves UDP payloads between socket addresses; a capture wraps
//! each payload in a synthesised IPv4 (or IPv6) and UDP header so Wireshark
//! and tshark read it like a real trace. SCTP over UDP (RFC 6951) uses UDP
//! port 9899, so `tshark -r run.pcap -d udp.port==9899,sctp` decodes the
//! SCTP packets inside. A transport that carries its own header where UDP's
//! would be (the TCP model's datagrams are whole TCP segments with a real
//! checksum) is written straight after an IP header with its protocol
//! number ([`PcapWriter::write_ip`]), so the capture holds ordinary TCP/IP
//! packets that tshark decodes without help.
//!
//! Format: the classic pcap file header with the nanosecond magic
//! `0xa1b23c4d` (virtual time is integer nanoseconds, so nothing is rounded),
//! written little-endian, link type `LINKTYPE_RAW` (101: each record starts
//! with the IP header). The IPv4 header checksum is correct (RFC 791 §3.1);
//! the UDP checksum is computed too (RFC 768), which IPv6 requires (RFC 8200
//! §8.1) and IPv4 permits.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use thinstream_base::{Datagram, Instant};

/// pcap magic for nanosecond-resolution timestamps.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// `LINKTYPE_RAW`: the packet begins with an IPv4 or IPv6 header.
pub const LINKTYPE_RAW: u32 = 101;
/// Snapshot length announced in the file header.
pub const SNAPLEN: u32 = 0xffff;
/// The IANA-registered UDP port of SCTP over UDP (RFC 6951 §5.1).
pub const SCTP_UDP_PORT: u16 = 9899;

const IPV4_HEADER: usize = 20;
const IPV6_HEADER: usize = 40;
const UDP_HEADER: usize = 8;
const IPPROTO_UDP: u8 = 0x11;
const IPPROTO_TCP: u8 = 6;

/// Why a packet could not be written or a file could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PcapError {
    /// The payload does not fit in one IP packet.
    TooLarge { bytes: usize },
    /// Source and destination are of different IP versions.
    MixedFamilies,
    /// The file ended inside a header or a record.
    Truncated { offset: usize },
    /// The file does not start with a pcap magic this reader knows.
    BadMagic { magic: u32 },
    /// The file uses a link type other than `LINKTYPE_RAW`.
    UnsupportedLinkType { linktype: u32 },
    /// A record's IP or UDP header is malformed.
    BadPacket { index: usize, why: &'static str },
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PcapError::TooLarge { bytes } => {
                write!(f, "a {bytes}-byte payload does not fit in one IP packet")
            }
            PcapError::MixedFamilies => {
                write!(f, "source and destination use different IP versions")
            }
            PcapError::Truncated { offset } => write!(f, "capture truncated at byte {offset}"),
            PcapError::BadMagic { magic } => write!(f, "not a pcap file (magic {magic:#010x})"),
            PcapError::UnsupportedLinkType { linktype } => {
                write!(f, "link type {linktype} is not LINKTYPE_RAW (101)")
            }
            PcapError::BadPacket { index, why } => write!(f, "packet {index}: {why}"),
        }
    }
}

impl std::error::Error for PcapError {}

/// Builds a pcap file in memory. Reuses one scratch buffer per packet.
#[derive(Debug, Clone)]
pub struct PcapWriter {
    bytes: Vec<u8>,
    packets: u64,
    ip_id: u16,
}

impl Default for PcapWriter {
    fn default() -> Self {
        PcapWriter::new()
    }
}

impl PcapWriter {
    pub fn new() -> Self {
        let mut bytes = Vec::with_capacity(4096);
        bytes.extend_from_slice(&MAGIC_NANOS.to_le_bytes());
        bytes.extend_from_slice(&2u16.to_le_bytes()); // version major
        bytes.extend_from_slice(&4u16.to_le_bytes()); // version minor
        bytes.extend_from_slice(&0i32.to_le_bytes()); // thiszone: virtual time is UTC-less
        bytes.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        bytes.extend_from_slice(&SNAPLEN.to_le_bytes());
        bytes.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
        PcapWriter {
            bytes,
            packets: 0,
            ip_id: 0,
        }
    }

    /// Appends one datagram seen at virtual time `at`, its payload in a UDP
    /// header.
    pub fn write(&mut self, at: Instant, datagram: &Datagram) -> Result<(), PcapError> {
        self.append(at, datagram, IPPROTO_UDP)
    }

    /// Appends one datagram whose payload already begins with the header of
    /// IP protocol `protocol` (e.g. 6: a TCP segment, its checksum over the
    /// datagram's addresses): the payload follows the IP header directly.
    /// With 17 this is [`PcapWriter::write`].
    pub fn write_ip(
        &mut self,
        at: Instant,
        datagram: &Datagram,
        protocol: u8,
    ) -> Result<(), PcapError> {
        self.append(at, datagram, protocol)
    }

    fn append(&mut self, at: Instant, datagram: &Datagram, protocol: u8) -> Result<(), PcapError> {
        let payload = &datagram.payload;
        let udp = protocol == IPPROTO_UDP;
        let ip_payload_len = payload.len() + if udp { UDP_HEADER } else { 0 };
        let (ip_header_len, v4) = match (datagram.src.ip(), datagram.dst.ip()) {
            (IpAddr::V4(_), IpAddr::V4(_)) => (IPV4_HEADER, true),
            (IpAddr::V6(_), IpAddr::V6(_)) => (IPV6_HEADER, false),
            _ => return Err(PcapError::MixedFamilies),
        };
        let total = ip_header_len + ip_payload_len;
        let limit = if v4 { 0xffff } else { 0xffff + IPV6_HEADER };
        if total > limit || total > SNAPLEN as usize {
            return Err(PcapError::TooLarge {
                bytes: payload.len(),
            });
        }
        let ns = at.as_nanos();
        // Record header: seconds, nanoseconds, captured and original lengths.
        self.bytes.extend_from_slice(
            &u32::try_from(ns / 1_000_000_000)
                .unwrap_or(u32::MAX)
                .to_le_bytes(),
        );
        self.bytes
            .extend_from_slice(&((ns % 1_000_000_000) as u32).to_le_bytes());
        self.bytes.extend_from_slice(&(total as u32).to_le_bytes());
        self.bytes.extend_from_slice(&(total as u32).to_le_bytes());

        let start = self.bytes.len();
        match (datagram.src.ip(), datagram.dst.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let id = self.ip_id;
                self.ip_id = self.ip_id.wrapping_add(1);
                let b = &mut self.bytes;
                b.push(0x45); // version 4, IHL 5 words
                b.push(0); // DSCP/ECN
                b.extend_from_slice(&(total as u16).to_be_bytes());
                b.extend_from_slice(&id.to_be_bytes());
                b.extend_from_slice(&0x4000u16.to_be_bytes()); // DF, offset 0
                b.push(64); // TTL
                b.push(protocol);
                b.extend_from_slice(&[0, 0]); // checksum, filled below
                b.extend_from_slice(&s.octets());
                b.extend_from_slice(&d.octets());
                let sum = internet_checksum(&b[start..start + IPV4_HEADER], 0);
                b[start + 10..start + 12].copy_from_slice(&sum.to_be_bytes());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let b = &mut self.bytes;
                b.extend_from_slice(&0x6000_0000u32.to_be_bytes());
                b.extend_from_slice(&(ip_payload_len as u16).to_be_bytes());
                b.push(protocol);
                b.push(64); // hop limit
                b.extend_from_slice(&s.octets());
                b.extend_from_slice(&d.octets());
            }
            _ => unreachable!("families checked above"),
        }
        let b = &mut self.bytes;
        if udp {
            let udp_start = b.len();
            b.extend_from_slice(&datagram.src.port().to_be_bytes());
            b.extend_from_slice(&datagram.dst.port().to_be_bytes());
            b.extend_from_slice(&(ip_payload_len as u16).to_be_bytes());
            b.extend_from_slice(&[0, 0]);
            b.extend_from_slice(payload);
            let pseudo = pseudo_header_sum(
                datagram.src.ip(),
                datagram.dst.ip(),
                IPPROTO_UDP,
                ip_payload_len,
            );
            let mut sum = internet_checksum(&b[udp_start..], pseudo);
            // RFC 768: a computed zero is sent as all ones (zero means "none").
            if sum == 0 {
                sum = 0xffff;
            }
            b[udp_start + 6..udp_start + 8].copy_from_slice(&sum.to_be_bytes());
        } else {
            b.extend_from_slice(payload);
        }
        self.packets += 1;
        Ok(())
    }

    /// Number of packets written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// The file contents so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

fn pseudo_header_sum(src: IpAddr, dst: IpAddr, protocol: u8, len: usize) -> u32 {
    let mut sum = 0u32;
    let mut add = |bytes: &[u8]| {
        for pair in bytes.chunks(2) {
            sum += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
        }
    };
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            add(&s.octets());
            add(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            add(&s.octets());
            add(&d.octets());
        }
        _ => {}
    }
    sum + u32::from(protocol) + len as u32
}

/// RFC 1071 one's-complement checksum of `data`, starting from `initial`.
pub fn internet_checksum(data: &[u8], initial: u32) -> u16 {
    let mut sum = u64::from(initial);
    let mut chunks = data.chunks_exact(2);
    for pair in &mut chunks {
        sum += u64::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(u16::from_be_bytes([*last, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// One packet read back from a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedPacket {
    pub time: Instant,
    /// The IP header's protocol: 17 (UDP) or 6 (TCP).
    pub protocol: u8,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub payload: Vec<u8>,
}

fn u32_le(bytes: &[u8], at: usize) -> Result<u32, PcapError> {
    bytes
        .get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or(PcapError::Truncated { offset: at })
}

/// Parses a capture written by [`PcapWriter`] (nanosecond magic,
/// little-endian, `LINKTYPE_RAW`, UDP or TCP), checking the IPv4 header
/// checksum, the UDP or TCP checksum and every length field. A UDP packet
/// reads back as its payload; a TCP packet as the whole segment, its ports
/// those of the TCP header (the TCP model puts the datagram's there).
pub fn read(bytes: &[u8]) -> Result<Vec<CapturedPacket>, PcapError> {
    let magic = u32_le(bytes, 0)?;
    if magic != MAGIC_NANOS {
        return Err(PcapError::BadMagic { magic });
    }
    if bytes.len() < 24 {
        return Err(PcapError::Truncated {
            offset: bytes.len(),
        });
    }
    let linktype = u32_le(bytes, 20)?;
    if linktype != LINKTYPE_RAW {
        return Err(PcapError::UnsupportedLinkType { linktype });
    }
    let mut at = 24;
    let mut out = Vec::new();
    while at < bytes.len() {
        let index = out.len();
        let secs = u64::from(u32_le(bytes, at)?);
        let nanos = u64::from(u32_le(bytes, at + 4)?);
        let incl = u32_le(bytes, at + 8)? as usize;
        let orig = u32_le(bytes, at + 12)? as usize;
        at += 16;
        let pkt = bytes
            .get(at..at + incl)
            .ok_or(PcapError::Truncated { offset: at })?;
        at += incl;
        if incl != orig {
            return Err(PcapError::BadPacket {
                index,
                why: "truncated record",
            });
        }
        let bad = |why| PcapError::BadPacket { index, why };
        let (src_ip, dst_ip, protocol, body): (IpAddr, IpAddr, u8, &[u8]) =
            match pkt.first().map(|b| b >> 4) {
                Some(4) => {
                    if pkt.len() < IPV4_HEADER || pkt[0] != 0x45 {
                        return Err(bad("IPv4 header malformed"));
                    }
                    if internet_checksum(&pkt[..IPV4_HEADER], 0) != 0 {
                        return Err(bad("IPv4 header checksum wrong"));
                    }
                    if usize::from(u16::from_be_bytes([pkt[2], pkt[3]])) != pkt.len() {
                        return Err(bad("IPv4 total length wrong"));
                    }
                    let s: [u8; 4] = pkt[12..16].try_into().expect("4 bytes");
                    let d: [u8; 4] = pkt[16..20].try_into().expect("4 bytes");
                    (s.into(), d.into(), pkt[9], &pkt[IPV4_HEADER..])
                }
                Some(6) => {
                    if pkt.len() < IPV6_HEADER {
                        return Err(bad("IPv6 header truncated"));
                    }
                    if usize::from(u16::from_be_bytes([pkt[4], pkt[5]])) + IPV6_HEADER != pkt.len()
                    {
                        return Err(bad("IPv6 payload length wrong"));
                    }
                    let s: [u8; 16] = pkt[8..24].try_into().expect("16 bytes");
                    let d: [u8; 16] = pkt[24..40].try_into().expect("16 bytes");
                    (s.into(), d.into(), pkt[6], &pkt[IPV6_HEADER..])
                }
                _ => return Err(bad("not an IP packet")),
            };
        let (src_port, dst_port, payload) = match protocol {
            IPPROTO_UDP => {
                if body.len() < UDP_HEADER
                    || usize::from(u16::from_be_bytes([body[4], body[5]])) != body.len()
                {
                    return Err(bad("UDP length wrong"));
                }
                let stored = u16::from_be_bytes([body[6], body[7]]);
                if stored != 0 {
                    let pseudo = pseudo_header_sum(src_ip, dst_ip, IPPROTO_UDP, body.len());
                    if internet_checksum(body, pseudo) != 0 {
                        return Err(bad("UDP checksum wrong"));
                    }
                }
                (&body[0..2], &body[2..4], &body[UDP_HEADER..])
            }
            IPPROTO_TCP => {
                // The payload is the whole segment, header included, as
                // the transport handed it over.
                let offset = body.get(12).map_or(0, |b| usize::from(b >> 4) * 4);
                if body.len() < 20 || offset < 20 || offset > body.len() {
                    return Err(bad("TCP header malformed"));
                }
                let pseudo = pseudo_header_sum(src_ip, dst_ip, IPPROTO_TCP, body.len());
                if internet_checksum(body, pseudo) != 0 {
                    return Err(bad("TCP checksum wrong"));
                }
                (&body[0..2], &body[2..4], body)
            }
            _ => return Err(bad("neither UDP nor TCP")),
        };
        out.push(CapturedPacket {
            time: Instant::from_nanos(secs * 1_000_000_000 + nanos),
            protocol,
            src: SocketAddr::new(src_ip, u16::from_be_bytes([src_port[0], src_port[1]])),
            dst: SocketAddr::new(dst_ip, u16::from_be_bytes([dst_port[0], dst_port[1]])),
            payload: payload.to_vec(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dg(src: &str, dst: &str, payload: &[u8]) -> Datagram {
        Datagram {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            payload: payload.to_vec(),
        }
    }

    // The RFC 1071 example: checksum of a known IPv4 header is the known value.
    #[test]
    fn ipv4_checksum_known_header() {
        // A widely used worked example: 45 00 00 73 00 00 40 00 40 11 [b8 61] c0 a8 00 01 c0 a8 00 c7
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&h, 0), 0xb861);
        h[10] = 0xb8;
        h[11] = 0x61;
        assert_eq!(internet_checksum(&h, 0), 0);
    }

    // Written packets read back with the same times, addresses and payloads (odd lengths too).
    #[test]
    fn round_trip_v4_and_v6() {
        let mut w = PcapWriter::new();
        let a = dg("192.0.2.1:9899", "198.51.100.1:9899", b"hello");
        let b = dg("[2001:db8::1]:9899", "[2001:db8::2]:5000", &[0xff; 301]);
        let c = dg("198.51.100.1:9899", "192.0.2.1:9899", b"");
        w.write(Instant::from_nanos(1_500_000_123), &a).unwrap();
        w.write(Instant::from_secs(2), &b).unwrap();
        w.write(Instant::from_nanos(7), &c).unwrap();
        assert_eq!(w.packets(), 3);
        let back = read(w.as_bytes()).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back[0].time, Instant::from_nanos(1_500_000_123));
        assert_eq!((back[0].src, back[0].dst), (a.src, a.dst));
        assert_eq!(back[0].payload, a.payload);
        assert_eq!(back[1].payload, b.payload);
        assert_eq!(back[1].dst, b.dst);
        assert_eq!(back[2].payload, Vec::<u8>::new());
    }

    // A flipped payload bit is caught by the UDP checksum; a flipped header bit by the IPv4 one.
    #[test]
    fn reader_detects_corruption() {
        let mut w = PcapWriter::new();
        w.write(
            Instant::ZERO,
            &dg("192.0.2.1:9899", "198.51.100.1:9899", b"abcdef"),
        )
        .unwrap();
        let good = w.into_bytes();
        let mut payload_flip = good.clone();
        let last = payload_flip.len() - 1;
        payload_flip[last] ^= 1;
        assert!(matches!(
            read(&payload_flip),
            Err(PcapError::BadPacket {
                why: "UDP checksum wrong",
                ..
            })
        ));
        let mut header_flip = good.clone();
        header_flip[24 + 16 + 8] ^= 1; // TTL
        assert!(matches!(
            read(&header_flip),
            Err(PcapError::BadPacket {
                why: "IPv4 header checksum wrong",
                ..
            })
        ));
        assert!(matches!(
            read(&good[..good.len() - 2]),
            Err(PcapError::Truncated { .. })
        ));
        assert!(matches!(read(b"nope"), Err(PcapError::BadMagic { .. })));
    }

    /// A TCP segment (header without options, then `data`) from `src` to
    /// `dst` with its checksum over the pseudo-header, as the TCP model
    /// encodes one.
    fn tcp_segment(src: &str, dst: &str, data: &[u8]) -> Datagram {
        let mut d = dg(src, dst, &[0; 20]);
        d.payload[0..2].copy_from_slice(&d.src.port().to_be_bytes());
        d.payload[2..4].copy_from_slice(&d.dst.port().to_be_bytes());
        d.payload[4..8].copy_from_slice(&1234u32.to_be_bytes());
        d.payload[12] = 5 << 4; // data offset: five words
        d.payload[13] = 0x18; // PSH, ACK
        d.payload.extend_from_slice(data);
        let pseudo = pseudo_header_sum(d.src.ip(), d.dst.ip(), IPPROTO_TCP, d.payload.len());
        let sum = internet_checksum(&d.payload, pseudo);
        d.payload[16..18].copy_from_slice(&sum.to_be_bytes());
        d
    }

    // A TCP segment is written right after the IP header (protocol 6, no UDP
    // header) and reads back whole, beside UDP packets in the same file.
    #[test]
    fn tcp_segments_follow_the_ip_header() {
        let mut w = PcapWriter::new();
        let seg = tcp_segment("192.0.2.1:5001", "198.51.100.1:5001", b"odd");
        let seg6 = tcp_segment("[2001:db8::1]:80", "[2001:db8::2]:8080", &[7; 100]);
        let udp = dg("192.0.2.1:9899", "198.51.100.1:9899", b"sctp");
        w.write_ip(Instant::from_millis(1), &seg, 6).unwrap();
        w.write(Instant::from_millis(2), &udp).unwrap();
        w.write_ip(Instant::from_millis(3), &seg6, 6).unwrap();
        let bytes = w.as_bytes().to_vec();
        // The first record: IPv4 total length 20 + 23, protocol 6.
        let ip = &bytes[24 + 16..];
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 43);
        assert_eq!(ip[9], 6);
        assert_eq!(&ip[20..43], &seg.payload[..]);
        let back = read(&bytes).unwrap();
        let summary: Vec<_> = back.iter().map(|p| (p.protocol, p.src, p.dst)).collect();
        assert_eq!(
            summary,
            vec![
                (6, seg.src, seg.dst),
                (17, udp.src, udp.dst),
                (6, seg6.src, seg6.dst)
            ]
        );
        assert_eq!(back[0].payload, seg.payload);
        assert_eq!(back[1].payload, udp.payload);
        assert_eq!(back[2].payload, seg6.payload);
        // A flipped data bit fails the TCP checksum.
        let mut flipped = bytes.clone();
        flipped[24 + 16 + 20 + 20] ^= 1;
        assert!(matches!(
            read(&flipped),
            Err(PcapError::BadPacket {
                index: 0,
                why: "TCP checksum wrong"
            })
        ));
        // Another protocol is refused by the reader.
        let mut other = PcapWriter::new();
        other.write_ip(Instant::ZERO, &seg, 132).unwrap();
        assert!(matches!(
            read(other.as_bytes()),
            Err(PcapError::BadPacket {
                why: "neither UDP nor TCP",
                ..
            })
        ));
    }

    #[test]
    fn oversized_and_mixed_are_errors() {
        let mut w = PcapWriter::new();
        let big = dg("192.0.2.1:1", "192.0.2.2:1", &vec![0; 70_000]);
        assert_eq!(
            w.write(Instant::ZERO, &big),
            Err(PcapError::TooLarge { bytes: 70_000 })
        );
        let mixed = dg("192.0.2.1:1", "[2001:db8::2]:1", b"x");
        assert_eq!(
            w.write(Instant::ZERO, &mixed),
            Err(PcapError::MixedFamilies)
        );
        assert_eq!(w.packets(), 0);
        assert_eq!(read(w.as_bytes()).unwrap(), vec![]);
    }
}
