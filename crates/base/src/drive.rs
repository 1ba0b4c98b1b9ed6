//! The drive contract shared by the SCTP association (`proto`), the TCP model
//! (`tcp`), the simulator (`sim`) and the `thinstream` crate's endpoint task.
//!
//! A [`Transport`] is one end of one connection. It never reads a clock or a
//! socket. The driver's loop is the same everywhere:
//!
//! 1. feed inputs: [`Transport::handle_datagram`] for each arriving datagram,
//!    [`Transport::handle_timeout`] when the deadline from
//!    [`Transport::poll_timeout`] has passed, [`Transport::send`] for
//!    application messages;
//! 2. drain outputs: call [`Transport::poll_transmit`] until it returns
//!    `None`, [`Transport::poll_app`] until `None`, [`Transport::poll_trace`]
//!    until `None`;
//! 3. wait until the next input or `poll_timeout()`, whichever comes first.
//!
//! Any input may change what `poll_timeout` returns, so it is read after
//! draining. `handle_timeout` called early (before the deadline) does nothing.

use crate::trace::Record;
use crate::{Datagram, Instant};
use std::fmt;

/// A message handed to a transport by the application.
#[derive(Clone, Copy, Debug)]
pub struct Outgoing<'a> {
    pub stream: u16,
    pub unordered: bool,
    pub payload: &'a [u8],
}

/// What a transport tells the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppEvent {
    /// The connection is up; messages may be sent.
    Established,
    /// Data for the application: one whole message (SCTP), or the next
    /// in-order bytes of the stream (TCP).
    Received {
        stream: u16,
        unordered: bool,
        /// Payload protocol identifier of the message (SCTP: the PPID of
        /// its DATA / I-DATA chunk, RFC 9260 §3.3.1; TCP: always 0).
        ppid: u32,
        payload: bytes::Bytes,
    },
    /// Send buffer space became available after a [`SendError::BufferFull`].
    Writable,
    /// The peer restarted the association (SCTP, RFC 9260 §5.2.4 A): it
    /// lost its state and set up a new incarnation with the same addresses.
    /// The connection stays up, but messages queued or in flight before
    /// the restart were dropped and sequence numbering starts afresh.
    PeerRestarted,
    /// The connection ended. `error` is `None` for a graceful close.
    Closed { error: Option<String> },
}

/// Why [`Transport::send`] refused a message. Nothing was queued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendError {
    /// The connection is not (yet, or any more) established.
    NotConnected,
    /// The send buffer is full; wait for [`AppEvent::Writable`].
    BufferFull,
    /// The stream number is not among the negotiated streams.
    InvalidStream { stream: u16, streams: u16 },
    /// The message is larger than the transport accepts.
    TooLarge { bytes: usize, max: usize },
    /// An empty message (SCTP has no zero-length user messages).
    Empty,
    /// The transport cannot honour an option of the message (e.g. unordered
    /// delivery on a TCP byte stream).
    Unsupported(&'static str),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::NotConnected => write!(f, "the connection is not established"),
            SendError::BufferFull => write!(f, "the send buffer is full"),
            SendError::InvalidStream { stream, streams } => write!(
                f,
                "stream {stream} does not exist: the association has {streams} outbound streams"
            ),
            SendError::TooLarge { bytes, max } => {
                write!(
                    f,
                    "message of {bytes} bytes exceeds the limit of {max} bytes"
                )
            }
            SendError::Empty => write!(f, "empty messages cannot be sent"),
            SendError::Unsupported(what) => write!(f, "not supported by this transport: {what}"),
        }
    }
}

impl std::error::Error for SendError {}

/// One end of one connection, driven by time and datagrams passed in.
pub trait Transport {
    /// A datagram arrived for this endpoint.
    fn handle_datagram(&mut self, now: Instant, datagram: Datagram);
    /// The deadline from [`Transport::poll_timeout`] has been reached.
    fn handle_timeout(&mut self, now: Instant);
    /// The next datagram to send, if any.
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram>;
    /// When [`Transport::handle_timeout`] should next be called.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The next event for the application, if any.
    fn poll_app(&mut self) -> Option<AppEvent>;
    /// The next trace record, if tracing is enabled and one is pending.
    fn poll_trace(&mut self) -> Option<Record>;
    /// Appends every pending trace record to `out`, in order: what calling
    /// [`Transport::poll_trace`] until `None` gives (a transport holding
    /// its records in a queue moves them at once).
    fn drain_trace(&mut self, out: &mut Vec<Record>) {
        while let Some(r) = self.poll_trace() {
            out.push(r);
        }
    }
    /// Queue a message; returns the sender-local message id used in
    /// [`Record::Submitted`].
    fn send(&mut self, now: Instant, message: Outgoing<'_>) -> Result<u64, SendError>;
    /// Begin a graceful close once queued data is delivered.
    fn close(&mut self, now: Instant);
    /// Whether the connection is established (data may flow).
    fn is_established(&self) -> bool;
    /// Whether the connection has ended (gracefully or not).
    fn is_closed(&self) -> bool;
    /// The IP protocol number of the header this transport's datagrams
    /// begin with, when the transport carries its own transport header
    /// where UDP's would be (the TCP model: 6). `None`, the default: the
    /// payload rides in UDP, as SCTP does (RFC 6951). Only packet captures
    /// read it, to write such a payload straight after the IP header so
    /// that capture tools decode it as what it is.
    fn ip_protocol(&self) -> Option<u8> {
        None
    }
    /// Names memory outside the transport's own struct that its next
    /// input will touch (the heap blocks of its queues, near the ends in
    /// use), as address ranges passed to `visit`, so that a driver holding
    /// many transports can have the processor load them together (a
    /// prefetch) rather than one cache miss after another. A hint only:
    /// nothing is read through the ranges, no result depends on them, and
    /// the default names none.
    fn hot_memory(&self, visit: &mut dyn FnMut(*const u8, usize)) {
        let _ = visit;
    }
}

/// Passes to `visit` the ends of `deque` in use: its first element, and
/// its last with the slot after it (where the next push goes).
pub fn visit_deque<T>(
    deque: &std::collections::VecDeque<T>,
    visit: &mut dyn FnMut(*const u8, usize),
) {
    let (a, b) = deque.as_slices();
    if let Some(first) = a.first() {
        visit((first as *const T).cast::<u8>(), std::mem::size_of::<T>());
    }
    if let Some(last) = b.last().or(a.last()) {
        visit(
            (last as *const T).cast::<u8>(),
            2 * std::mem::size_of::<T>(),
        );
    }
}

/// Passes to `visit` the first elements of `v` (at most 256 bytes).
pub fn visit_vec<T>(v: &[T], visit: &mut dyn FnMut(*const u8, usize)) {
    if !v.is_empty() {
        visit(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v).min(256));
    }
}

#[cfg(test)]
mod tests {
    use super::{visit_deque, visit_vec};
    use std::collections::VecDeque;

    fn ranges(f: impl FnOnce(&mut dyn FnMut(*const u8, usize))) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        f(&mut |p, len| out.push((p as usize, len)));
        out
    }

    // The hints name the deque's first element, and its last with the
    // slot after it, also when the contents wrap around the buffer.
    #[test]
    fn a_deque_is_named_by_its_ends() {
        let mut d: VecDeque<u64> = VecDeque::with_capacity(8);
        assert!(ranges(|v| visit_deque(&d, v)).is_empty());
        for i in 0..8 {
            d.push_back(i);
        }
        for _ in 0..5 {
            d.pop_front();
        }
        d.push_back(8);
        d.push_back(9);
        let (a, b) = d.as_slices();
        assert!(!b.is_empty(), "the contents wrap");
        let first = d.front().unwrap() as *const u64 as usize;
        let last = d.back().unwrap() as *const u64 as usize;
        assert_eq!(ranges(|v| visit_deque(&d, v)), vec![(first, 8), (last, 16)]);
        assert_eq!(first, a.as_ptr() as usize);
    }

    #[test]
    fn a_vec_is_named_by_its_first_bytes() {
        let v: Vec<u64> = (0..100).collect();
        assert_eq!(
            ranges(|f| visit_vec(&v, f)),
            vec![(v.as_ptr() as usize, 256)]
        );
        assert_eq!(
            ranges(|f| visit_vec(&v[..3], f)),
            vec![(v.as_ptr() as usize, 24)]
        );
        assert!(ranges(|f| visit_vec(&v[..0], f)).is_empty());
    }
}
