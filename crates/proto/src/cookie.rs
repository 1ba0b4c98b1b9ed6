//! The State Cookie (RFC 9260 §5.1.3): everything needed to build the TCB
//! when a COOKIE ECHO arrives, signed with HMAC-SHA256 so the listener keeps
//! no per-association state before then (§5.1.3, "stateless" INIT ACK).
//!
//! Layout (all big-endian), version 1:
//! `ver u8 | created u64 ns | life u64 ns | local_tag u32 | peer_tag u32 |
//!  local_tie u32 | peer_tie u32 | local_tsn u32 | peer_tsn u32 | peer_rwnd u32 |
//!  out_streams u16 | in_streams u16 | flags u8 (bit 0 FORWARD TSN, bit 1 I-DATA) | family u8 | ip [16] |
//!  udp_port u16 | peer_sctp_port u16 | local_sctp_port u16 | mac [32]`.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use thinstream_base::{Duration, Instant, Rng};

type HmacSha256 = Hmac<Sha256>;

const VERSION: u8 = 1;
const BODY_LEN: usize = 1 + 8 + 8 + 4 * 7 + 2 + 2 + 1 + 1 + 16 + 2 + 2 + 2;
const MAC_LEN: usize = 32;
/// Encoded cookie size.
pub(crate) const COOKIE_LEN: usize = BODY_LEN + MAC_LEN;

/// The signing secret and the cookie lifetime.
#[derive(Clone)]
pub(crate) struct CookieKey {
    secret: [u8; 32],
    pub(crate) lifetime: Duration,
}

impl std::fmt::Debug for CookieKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        f.debug_struct("CookieKey")
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

/// What the cookie carries (§5.1.3: "a State Cookie ... contains all the
/// information needed to create the association").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CookieContents {
    pub(crate) created: Instant,
    pub(crate) lifetime: Duration,
    pub(crate) local_tag: u32,
    pub(crate) peer_tag: u32,
    /// Tie-tags (§5.2.2): the tags of an existing TCB, 0 if none.
    pub(crate) local_tie_tag: u32,
    pub(crate) peer_tie_tag: u32,
    pub(crate) local_initial_tsn: u32,
    pub(crate) peer_initial_tsn: u32,
    pub(crate) peer_rwnd: u32,
    pub(crate) out_streams: u16,
    pub(crate) in_streams: u16,
    pub(crate) peer_forward_tsn: bool,
    /// The INIT offered I-DATA (RFC 8260); flags bit 1.
    pub(crate) peer_idata: bool,
    pub(crate) peer_addr: SocketAddr,
    pub(crate) peer_port: u16,
    pub(crate) local_port: u16,
}

/// Why a cookie was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CookieError {
    /// Wrong length, version or signature: silently discarded (§5.1.5 step 2).
    Invalid,
    /// Valid but expired (§5.1.5 step 3): report Stale Cookie, with the
    /// staleness in microseconds.
    Stale {
        staleness_us: u32,
        local_tag: u32,
        peer_tag: u32,
    },
}

impl CookieKey {
    /// A key from the caller's randomness.
    pub(crate) fn generate(rng: &mut Rng, lifetime: Duration) -> Self {
        let mut secret = [0u8; 32];
        rng.fill_bytes(&mut secret);
        CookieKey { secret, lifetime }
    }

    /// A key from secret bytes the caller drew.
    pub(crate) fn from_secret(secret: [u8; 32], lifetime: Duration) -> Self {
        CookieKey { secret, lifetime }
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC accepts keys of any length; 32 bytes cannot fail.
        match HmacSha256::new_from_slice(&self.secret) {
            Ok(m) => m,
            Err(_) => unreachable!("HMAC-SHA256 accepts any key length"),
        }
    }

    pub(crate) fn seal(&self, c: &CookieContents) -> Vec<u8> {
        let mut b = Vec::with_capacity(COOKIE_LEN);
        b.push(VERSION);
        b.extend_from_slice(&c.created.as_nanos().to_be_bytes());
        b.extend_from_slice(&c.lifetime.as_nanos().to_be_bytes());
        for v in [
            c.local_tag,
            c.peer_tag,
            c.local_tie_tag,
            c.peer_tie_tag,
            c.local_initial_tsn,
            c.peer_initial_tsn,
            c.peer_rwnd,
        ] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        b.extend_from_slice(&c.out_streams.to_be_bytes());
        b.extend_from_slice(&c.in_streams.to_be_bytes());
        b.push(u8::from(c.peer_forward_tsn) | (u8::from(c.peer_idata) << 1));
        match c.peer_addr.ip() {
            IpAddr::V4(a) => {
                b.push(4);
                let mut ip = [0u8; 16];
                ip[..4].copy_from_slice(&a.octets());
                b.extend_from_slice(&ip);
            }
            IpAddr::V6(a) => {
                b.push(6);
                b.extend_from_slice(&a.octets());
            }
        }
        b.extend_from_slice(&c.peer_addr.port().to_be_bytes());
        b.extend_from_slice(&c.peer_port.to_be_bytes());
        b.extend_from_slice(&c.local_port.to_be_bytes());
        debug_assert_eq!(b.len(), BODY_LEN);
        let mut mac = self.mac();
        mac.update(&b);
        b.extend_from_slice(&mac.finalize().into_bytes());
        b
    }

    /// Check signature, then lifetime (§5.1.5 steps 1-3).
    pub(crate) fn open(&self, bytes: &[u8], now: Instant) -> Result<CookieContents, CookieError> {
        if bytes.len() != COOKIE_LEN || bytes[0] != VERSION {
            return Err(CookieError::Invalid);
        }
        let (body, tag) = bytes.split_at(BODY_LEN);
        let mut mac = self.mac();
        mac.update(body);
        mac.verify_slice(tag).map_err(|_| CookieError::Invalid)?;
        let mut r = Reader { b: body, at: 1 };
        let created = Instant::from_nanos(r.u64());
        let lifetime = Duration::from_nanos(r.u64());
        let local_tag = r.u32();
        let peer_tag = r.u32();
        let local_tie_tag = r.u32();
        let peer_tie_tag = r.u32();
        let local_initial_tsn = r.u32();
        let peer_initial_tsn = r.u32();
        let peer_rwnd = r.u32();
        let out_streams = r.u16();
        let in_streams = r.u16();
        let flags = r.u8();
        let peer_forward_tsn = flags & 1 != 0;
        let peer_idata = flags & 2 != 0;
        let family = r.u8();
        let ip = r.take16();
        let udp_port = r.u16();
        let peer_port = r.u16();
        let local_port = r.u16();
        let ip = match family {
            4 => IpAddr::V4(Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3])),
            6 => IpAddr::V6(Ipv6Addr::from(ip)),
            _ => return Err(CookieError::Invalid),
        };
        let expires = created.saturating_add(lifetime);
        if now > expires {
            let us = (now - expires).as_micros();
            return Err(CookieError::Stale {
                staleness_us: u32::try_from(us).unwrap_or(u32::MAX),
                local_tag,
                peer_tag,
            });
        }
        Ok(CookieContents {
            created,
            lifetime,
            local_tag,
            peer_tag,
            local_tie_tag,
            peer_tie_tag,
            local_initial_tsn,
            peer_initial_tsn,
            peer_rwnd,
            out_streams,
            in_streams,
            peer_forward_tsn,
            peer_idata,
            peer_addr: SocketAddr::new(ip, udp_port),
            peer_port,
            local_port,
        })
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

// Lengths were checked against BODY_LEN before reading, so the slices below
// are always in range.
impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.b[self.at..self.at + N]);
        self.at += N;
        out
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.take())
    }
    fn take16(&mut self) -> [u8; 16] {
        self.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinstream_base::Seed;

    fn contents() -> CookieContents {
        CookieContents {
            created: Instant::from_secs(10),
            lifetime: Duration::from_secs(60),
            local_tag: 1,
            peer_tag: 2,
            local_tie_tag: 0,
            peer_tie_tag: 0,
            local_initial_tsn: 100,
            peer_initial_tsn: 200,
            peer_rwnd: 65536,
            out_streams: 3,
            in_streams: 4,
            peer_forward_tsn: true,
            peer_idata: false,
            peer_addr: "[::1]:9899".parse().unwrap(),
            peer_port: 5000,
            local_port: 5001,
        }
    }

    #[test]
    fn round_trip_and_tamper_and_stale() {
        let key = CookieKey::generate(&mut Seed(1).rng(), Duration::from_secs(60));
        let c = contents();
        let mut b = key.seal(&c);
        assert_eq!(b.len(), COOKIE_LEN);
        assert_eq!(key.open(&b, Instant::from_secs(20)), Ok(c));
        assert_eq!(
            key.open(&b, Instant::from_secs(71)),
            Err(CookieError::Stale {
                staleness_us: 1_000_000,
                local_tag: 1,
                peer_tag: 2
            })
        );
        b[5] ^= 1;
        assert_eq!(
            key.open(&b, Instant::from_secs(20)),
            Err(CookieError::Invalid)
        );
        let other = CookieKey::generate(&mut Seed(2).rng(), Duration::from_secs(60));
        b[5] ^= 1;
        assert_eq!(
            other.open(&b, Instant::from_secs(20)),
            Err(CookieError::Invalid)
        );
        assert_eq!(
            key.open(&b[..10], Instant::from_secs(20)),
            Err(CookieError::Invalid)
        );
    }
}
