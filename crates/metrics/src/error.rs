//! Typed errors for inconsistent traces and bad analysis parameters.

use std::fmt;
use thinstream_base::Instant;

/// Which record stream a problem was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Sender,
    Receiver,
}

/// Why a trace could not be analysed. Traces come from our own transports,
/// but also from files and real runs, so an inconsistency is reported, never
/// a panic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetricsError {
    /// Record `index` is earlier than the record before it.
    UnorderedRecords { side: Side, index: usize },
    /// Record `index` names an empty or reversed unit range.
    EmptyUnits { side: Side, index: usize },
    /// Two `Submitted` records carry the same message id.
    DuplicateMessage { message: u64 },
    /// A message's units overlap those of an earlier message.
    OverlappingMessage { message: u64 },
    /// An application send time names a message that was never submitted.
    UnknownMessage { message: u64 },
    /// Two application send times for one message.
    DuplicateAppSend { message: u64 },
    /// The application sent the message after the transport accepted it.
    AppSendAfterSubmit {
        message: u64,
        app: Instant,
        submitted: Instant,
    },
    /// A throughput window with a zero interval or `to < from`.
    BadWindow,
    /// The drift-corrected OWD estimate needs a window of at least one message.
    BadOwdWindow,
    /// An echo (reverse-direction message) without a request on its stream.
    UnpairedEcho { stream: u16, index: usize },
    /// The streaming analysis ([`crate::FlowStream`]) cannot compute this.
    StreamingUnsupported { what: &'static str },
}

impl fmt::Display for MetricsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricsError::UnorderedRecords { side, index } => {
                write!(f, "{side:?} record {index} is earlier than the one before it")
            }
            MetricsError::EmptyUnits { side, index } => {
                write!(f, "{side:?} record {index} has an empty unit range")
            }
            MetricsError::DuplicateMessage { message } => write!(f, "message {message} submitted twice"),
            MetricsError::OverlappingMessage { message } => {
                write!(f, "message {message} occupies units of an earlier message")
            }
            MetricsError::UnknownMessage { message } => {
                write!(f, "application send time for unknown message {message}")
            }
            MetricsError::DuplicateAppSend { message } => {
                write!(f, "two application send times for message {message}")
            }
            MetricsError::AppSendAfterSubmit { message, app, submitted } => write!(
                f,
                "message {message} was sent by the application at {app}, after the transport accepted it at {submitted}"
            ),
            MetricsError::BadWindow => write!(f, "throughput window needs a positive interval and from <= to"),
            MetricsError::BadOwdWindow => write!(f, "the OWD drift window must hold at least one message"),
            MetricsError::UnpairedEcho { stream, index } => {
                write!(f, "echo {index} on stream {stream} has no request")
            }
            MetricsError::StreamingUnsupported { what } => {
                write!(f, "the streaming analysis cannot compute {what}")
            }
        }
    }
}

impl std::error::Error for MetricsError {}
