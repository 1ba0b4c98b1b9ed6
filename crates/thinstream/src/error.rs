//! Error types.

use std::io;

/// Why an association ended. Returned by [`crate::Association::recv`] and
/// friends once it has.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssociationError {
    /// A graceful shutdown (SHUTDOWN sequence), started by either side.
    #[error("the association was closed")]
    Closed,
    /// This side aborted it ([`crate::Association::abort`], or a close that
    /// timed out).
    #[error("aborted locally: {0}")]
    LocallyAborted(String),
    /// The peer sent an ABORT.
    #[error("aborted by the peer: {0}")]
    PeerAborted(String),
    /// The peer stopped answering: retransmission limit reached.
    #[error("the peer stopped answering: {0}")]
    TimedOut(String),
    /// Any other protocol failure.
    #[error("{0}")]
    Failed(String),
    /// The endpoint (its socket task) stopped.
    #[error("the endpoint stopped: {0}")]
    EndpointGone(String),
}

impl AssociationError {
    /// Classify the protocol core's close reason.
    pub(crate) fn from_close(error: Option<String>) -> AssociationError {
        let Some(e) = error else {
            return AssociationError::Closed;
        };
        if let Some(r) = e.strip_prefix("aborted locally: ") {
            AssociationError::LocallyAborted(r.to_string())
        } else if let Some(r) = e.strip_prefix("aborted by peer: ") {
            AssociationError::PeerAborted(r.to_string())
        } else if e.to_ascii_lowercase().contains("retransmi") || e.contains("unreachable") {
            AssociationError::TimedOut(e)
        } else {
            AssociationError::Failed(e)
        }
    }
}

/// Why [`crate::Endpoint::connect`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The endpoint was closed.
    #[error("the endpoint is closed")]
    EndpointClosed,
    /// The association could not be set up.
    #[error("association setup failed: {0}")]
    Setup(AssociationError),
    /// This endpoint already has an association with the peer on these
    /// SCTP ports; a second association needs another local SCTP port
    /// ([`crate::AssociationConfig::sctp_ports`]).
    #[error(
        "an association with {peer} on SCTP ports {local_port} -> {remote_port} exists already"
    )]
    AlreadyConnected {
        /// The peer's UDP address.
        peer: std::net::SocketAddr,
        /// Our SCTP port.
        local_port: u16,
        /// The peer's SCTP port.
        remote_port: u16,
    },
    /// An IPv4 endpoint cannot reach an IPv6 peer and vice versa.
    #[error("address family mismatch: endpoint bound to {local}, peer {peer}")]
    AddressFamily {
        /// The endpoint's address.
        local: std::net::SocketAddr,
        /// The peer's address.
        peer: std::net::SocketAddr,
    },
}

/// Why [`crate::Association::send`] refused a message. Nothing was queued.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The association has ended.
    #[error("{0}")]
    Closed(AssociationError),
    /// The stream does not exist.
    #[error("stream {stream} does not exist: the association has {streams} outbound streams")]
    InvalidStream {
        /// The stream asked for.
        stream: u16,
        /// Outbound streams the association has.
        streams: u16,
    },
    /// Larger than the association accepts.
    #[error("message of {bytes} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The message's size.
        bytes: usize,
        /// The largest message accepted.
        max: usize,
    },
    /// SCTP has no empty user messages.
    #[error("empty messages cannot be sent")]
    Empty,
    /// An option the association cannot honour (e.g. partial reliability
    /// when the peer does not support FORWARD TSN).
    #[error("not supported: {0}")]
    Unsupported(String),
}

/// Errors binding an endpoint.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The socket could not be bound.
    #[error("cannot bind UDP socket {addr}: {source}")]
    Io {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
    /// No OS random source: tags and secrets would be predictable.
    #[error("the OS random source failed: {0}")]
    Random(String),
    /// `Endpoint::bind` was called outside a tokio runtime.
    #[error("bind must run inside a tokio runtime")]
    NoRuntime,
}
