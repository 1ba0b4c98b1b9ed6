//! The unit that crosses a link or a socket.

use crate::Instant;
use std::net::SocketAddr;

/// One UDP datagram: addresses and payload. For SCTP over UDP (RFC 6951) the
/// payload starts with the SCTP common header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub payload: Vec<u8>,
}

/// A datagram a transport wants sent, with the time it was produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub at: Instant,
    pub datagram: Datagram,
}
