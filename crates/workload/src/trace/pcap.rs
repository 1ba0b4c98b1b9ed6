//! A small reader for classic libpcap files (not pcapng), enough to turn a
//! packet capture into per-packet payload sizes and times.
//!
//! Supported: both byte orders, microsecond (`a1b2c3d4`) and nanosecond
//! (`a1b23c4d`) timestamps; link types Ethernet (1, with up to two VLAN
//! tags), BSD loopback (0), raw IP (101, and the historical 12 and 14),
//! raw IPv4/IPv6 (228/229), Linux cooked capture SLL (113) and SLL2 (276);
//! IPv4 and IPv6 (hop-by-hop, routing, destination-options, fragment and AH
//! extension headers skipped); TCP and UDP.
//!
//! Payload size comes from the IP and transport headers, not from the
//! captured length, so a capture with a short snap length still gives true
//! sizes (IPv4 total length 0, as written by segmentation offload, falls back
//! to the captured length). Packets that are not IP, not TCP/UDP, non-first
//! fragments, cut before the end of their transport header, or do not match
//! the filter are skipped and counted in [`PcapStats`]. Headers that
//! contradict themselves (IPv4 header length beyond the total length, TCP
//! data offset beyond the segment) and broken file structure are errors.
//! Timestamps that go backwards (capture reordering) are clamped to the
//! previous record's time.

use serde::{Deserialize, Serialize};
use thinstream_base::Duration;

use super::TraceRecord;
use crate::WorkloadError;

/// Transport protocol selection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    #[default]
    Any,
    Tcp,
    Udp,
}

/// Which packets of the capture to keep: one direction of one flow is
/// usually chosen by its source port (server → client) or destination port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcapFilter {
    pub protocol: Protocol,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
}

/// What happened to the packets of a capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcapStats {
    pub packets: u64,
    pub matched: u64,
    /// Matched but carried no payload (pure ACKs); not replayed.
    pub empty: u64,
    pub not_ip: u64,
    pub not_tcp_udp: u64,
    pub fragments: u64,
    pub truncated: u64,
    pub filtered_out: u64,
}

const GLOBAL_HEADER: usize = 24;
const RECORD_HEADER: usize = 16;
/// A record larger than this is a corrupt length field, not a packet.
const MAX_RECORD: usize = 1 << 28;

fn perr(offset: usize, reason: impl Into<String>) -> WorkloadError {
    WorkloadError::Pcap {
        offset,
        reason: reason.into(),
    }
}

#[derive(Clone, Copy)]
struct Endian {
    big: bool,
}

impl Endian {
    fn u32(self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }
    fn u16(self, b: &[u8]) -> u16 {
        let a = [b[0], b[1]];
        if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        }
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Parses a classic pcap file into the payload records matching `filter`.
pub fn parse(bytes: &[u8], filter: &PcapFilter) -> Result<Vec<TraceRecord>, WorkloadError> {
    parse_with_stats(bytes, filter).map(|(r, _)| r)
}

/// As [`parse`], also returning what was skipped and why.
pub fn parse_with_stats(
    bytes: &[u8],
    filter: &PcapFilter,
) -> Result<(Vec<TraceRecord>, PcapStats), WorkloadError> {
    if bytes.len() < GLOBAL_HEADER {
        return Err(perr(
            0,
            format!(
                "file of {} bytes is shorter than the 24-byte pcap header",
                bytes.len()
            ),
        ));
    }
    let magic = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let (endian, nanos) = match magic {
        0xa1b2_c3d4 => (Endian { big: false }, false),
        0xd4c3_b2a1 => (Endian { big: true }, false),
        0xa1b2_3c4d => (Endian { big: false }, true),
        0x4d3c_b2a1 => (Endian { big: true }, true),
        0x0a0d_0d0a => {
            return Err(perr(
                0,
                "pcapng files are not supported; convert with `editcap -F pcap`",
            ))
        }
        m => return Err(perr(0, format!("not a pcap file (magic {m:#010x})"))),
    };
    let major = endian.u16(&bytes[4..6]);
    if major != 2 {
        return Err(perr(4, format!("unsupported pcap version {major}")));
    }
    // Low 16 bits: link type; the upper bits may carry FCS information.
    let link = endian.u32(&bytes[20..24]) & 0xffff;
    if !matches!(link, 0 | 1 | 12 | 14 | 101 | 113 | 228 | 229 | 276) {
        return Err(perr(20, format!("unsupported link type {link}")));
    }

    let mut stats = PcapStats::default();
    let mut out = Vec::new();
    let mut first: Option<u64> = None;
    let mut last: u64 = 0;
    let mut pos = GLOBAL_HEADER;
    while pos < bytes.len() {
        if bytes.len() - pos < RECORD_HEADER {
            return Err(perr(pos, "file ends inside a record header"));
        }
        let h = &bytes[pos..pos + RECORD_HEADER];
        let secs = u64::from(endian.u32(&h[0..4]));
        let frac = u64::from(endian.u32(&h[4..8]));
        let incl = endian.u32(&h[8..12]) as usize;
        if (nanos && frac >= 1_000_000_000) || (!nanos && frac >= 1_000_000) {
            return Err(perr(
                pos + 4,
                format!("sub-second timestamp {frac} out of range"),
            ));
        }
        if incl > MAX_RECORD {
            return Err(perr(
                pos + 8,
                format!("record length {incl} is implausible"),
            ));
        }
        let data_at = pos + RECORD_HEADER;
        if bytes.len() - data_at < incl {
            return Err(perr(
                pos + 8,
                format!(
                    "record of {incl} bytes but only {} left in the file",
                    bytes.len() - data_at
                ),
            ));
        }
        let frame = &bytes[data_at..data_at + incl];
        stats.packets += 1;
        let ts = secs * 1_000_000_000 + if nanos { frac } else { frac * 1000 };
        match payload_of(frame, link, endian, data_at)? {
            Packet::Skip(reason) => reason.count(&mut stats),
            Packet::L4 {
                proto,
                src,
                dst,
                payload,
            } => {
                let wanted = match filter.protocol {
                    Protocol::Any => true,
                    p => p == proto,
                };
                if !wanted
                    || filter.src_port.is_some_and(|p| p != src)
                    || filter.dst_port.is_some_and(|p| p != dst)
                {
                    stats.filtered_out += 1;
                } else {
                    stats.matched += 1;
                    let t0 = *first.get_or_insert(ts);
                    let t = ts.max(last).max(t0);
                    last = t;
                    if payload == 0 {
                        stats.empty += 1;
                    } else {
                        out.push(TraceRecord {
                            offset: Duration::from_nanos(t - t0),
                            bytes: payload,
                            stream: None,
                        });
                    }
                }
            }
        }
        pos = data_at + incl;
    }
    if out.is_empty() {
        return Err(WorkloadError::EmptyTrace {
            reason: format!("no packet with payload matched the filter ({stats:?})"),
        });
    }
    Ok((out, stats))
}

enum Skip {
    NotIp,
    NotTcpUdp,
    Fragment,
    Truncated,
}

impl Skip {
    fn count(self, s: &mut PcapStats) {
        match self {
            Skip::NotIp => s.not_ip += 1,
            Skip::NotTcpUdp => s.not_tcp_udp += 1,
            Skip::Fragment => s.fragments += 1,
            Skip::Truncated => s.truncated += 1,
        }
    }
}

enum Packet {
    Skip(Skip),
    L4 {
        proto: Protocol,
        src: u16,
        dst: u16,
        payload: u32,
    },
}

/// Strips the link layer; `at` is the frame's file offset for errors.
fn payload_of(frame: &[u8], link: u32, endian: Endian, at: usize) -> Result<Packet, WorkloadError> {
    const IPV4: u16 = 0x0800;
    const IPV6: u16 = 0x86dd;
    let (ethertype, off) = match link {
        1 => {
            if frame.len() < 14 {
                return Ok(Packet::Skip(Skip::Truncated));
            }
            let mut off = 12;
            let mut et = be16(frame, off);
            // 802.1Q / 802.1ad tags: at most two (QinQ).
            for _ in 0..2 {
                if et == 0x8100 || et == 0x88a8 {
                    if frame.len() < off + 6 {
                        return Ok(Packet::Skip(Skip::Truncated));
                    }
                    off += 4;
                    et = be16(frame, off);
                }
            }
            (Some(et), off + 2)
        }
        0 => {
            if frame.len() < 4 {
                return Ok(Packet::Skip(Skip::Truncated));
            }
            // Address family in the capturing host's byte order.
            let fam = endian.u32(&frame[0..4]);
            let et = match fam {
                2 => IPV4,
                24 | 28 | 30 => IPV6,
                _ => 0,
            };
            (Some(et), 4)
        }
        113 => {
            if frame.len() < 16 {
                return Ok(Packet::Skip(Skip::Truncated));
            }
            (Some(be16(frame, 14)), 16)
        }
        276 => {
            if frame.len() < 20 {
                return Ok(Packet::Skip(Skip::Truncated));
            }
            (Some(be16(frame, 0)), 20)
        }
        228 => (Some(IPV4), 0),
        229 => (Some(IPV6), 0),
        // Raw IP: the version nibble decides.
        _ => (None, 0),
    };
    let ip = &frame[off.min(frame.len())..];
    let version = match ethertype {
        Some(IPV4) => 4,
        Some(IPV6) => 6,
        Some(_) => return Ok(Packet::Skip(Skip::NotIp)),
        None => match ip.first() {
            Some(b) => b >> 4,
            None => return Ok(Packet::Skip(Skip::Truncated)),
        },
    };
    let at = at + off;
    match version {
        4 => ipv4(ip, at),
        6 => ipv6(ip, at),
        _ => Ok(Packet::Skip(Skip::NotIp)),
    }
}

fn ipv4(ip: &[u8], at: usize) -> Result<Packet, WorkloadError> {
    if ip.len() < 20 {
        return Ok(Packet::Skip(Skip::Truncated));
    }
    if ip[0] >> 4 != 4 {
        return Err(perr(
            at,
            "link layer says IPv4 but the version field differs",
        ));
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = match usize::from(be16(ip, 2)) {
        0 => ip.len(),
        t => t,
    };
    if ihl < 20 || ihl > total {
        return Err(perr(
            at,
            format!("IPv4 header length {ihl} inconsistent with total length {total}"),
        ));
    }
    let frag_offset = be16(ip, 6) & 0x1fff;
    if frag_offset != 0 {
        return Ok(Packet::Skip(Skip::Fragment));
    }
    transport(ip[9], &ip[ihl.min(ip.len())..], total - ihl, at + ihl)
}

fn ipv6(ip: &[u8], at: usize) -> Result<Packet, WorkloadError> {
    if ip.len() < 40 {
        return Ok(Packet::Skip(Skip::Truncated));
    }
    if ip[0] >> 4 != 6 {
        return Err(perr(
            at,
            "link layer says IPv6 but the version field differs",
        ));
    }
    let mut remaining = usize::from(be16(ip, 4));
    let mut next = ip[6];
    let mut off = 40;
    // Bounded walk over extension headers.
    for _ in 0..8 {
        match next {
            0 | 43 | 60 | 44 | 51 => {
                if ip.len() < off + 8 {
                    return Ok(Packet::Skip(Skip::Truncated));
                }
                let len = match next {
                    44 => {
                        if be16(ip, off + 2) & 0xfff8 != 0 {
                            return Ok(Packet::Skip(Skip::Fragment));
                        }
                        8
                    }
                    51 => (usize::from(ip[off + 1]) + 2) * 4,
                    _ => (usize::from(ip[off + 1]) + 1) * 8,
                };
                if len > remaining {
                    return Err(perr(
                        at + off,
                        "IPv6 extension header beyond the payload length",
                    ));
                }
                next = ip[off];
                off += len;
                remaining -= len;
            }
            _ => return transport(next, &ip[off.min(ip.len())..], remaining, at + off),
        }
    }
    Ok(Packet::Skip(Skip::NotTcpUdp))
}

/// `l4` is the captured transport segment, `len` its true length from IP.
fn transport(proto: u8, l4: &[u8], len: usize, at: usize) -> Result<Packet, WorkloadError> {
    match proto {
        6 => {
            if l4.len() < 20 {
                return Ok(Packet::Skip(Skip::Truncated));
            }
            let data_offset = usize::from(l4[12] >> 4) * 4;
            if data_offset < 20 || data_offset > len {
                return Err(perr(
                    at,
                    format!("TCP data offset {data_offset} inconsistent with segment length {len}"),
                ));
            }
            Ok(Packet::L4 {
                proto: Protocol::Tcp,
                src: be16(l4, 0),
                dst: be16(l4, 2),
                payload: u32::try_from(len - data_offset).unwrap_or(u32::MAX),
            })
        }
        17 => {
            if l4.len() < 8 {
                return Ok(Packet::Skip(Skip::Truncated));
            }
            if len < 8 {
                return Err(perr(
                    at,
                    format!("UDP datagram of {len} bytes is shorter than its header"),
                ));
            }
            // The IP-derived length is authoritative (the UDP length field is 0
            // for IPv6 jumbograms); a UDP length that disagrees is malformed.
            let udp_len = usize::from(be16(l4, 4));
            if udp_len != 0 && (udp_len < 8 || udp_len > len) {
                return Err(perr(
                    at,
                    format!("UDP length {udp_len} does not fit the IP payload of {len} bytes"),
                ));
            }
            let len = if udp_len >= 8 { udp_len } else { len };
            Ok(Packet::L4 {
                proto: Protocol::Udp,
                src: be16(l4, 0),
                dst: be16(l4, 2),
                payload: u32::try_from(len - 8).unwrap_or(u32::MAX),
            })
        }
        _ => Ok(Packet::Skip(Skip::NotTcpUdp)),
    }
}

#[cfg(test)]
mod tests;
