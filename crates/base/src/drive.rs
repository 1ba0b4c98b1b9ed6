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
        payload: Vec<u8>,
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
}
