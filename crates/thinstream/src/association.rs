//! [`Association`]: the application's handle on one SCTP association.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use thinstream_base::drive::SendError as CoreSendError;
use thinstream_proto::{AssociationId, Mechanisms, SendParams};

use crate::error::{AssociationError, SendError};
use crate::state::Shared;
use crate::stats::AssociationStats;

/// A message received from the peer: one whole SCTP user message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The stream it arrived on.
    pub stream: u16,
    /// Payload protocol identifier set by the sender (opaque to SCTP).
    pub ppid: u32,
    /// Sent unordered (delivered as soon as it arrived whole).
    pub unordered: bool,
    /// The payload.
    pub data: Bytes,
}

/// How to send one message.
///
/// ```
/// use std::time::Duration;
/// use thinstream::SendOptions;
/// // Ordered, fully reliable, ppid 0: the default.
/// let reliable = SendOptions::default();
/// // A game-state update that is useless after 200 ms.
/// let timed = SendOptions { unordered: true, lifetime: Some(Duration::from_millis(200)), ..SendOptions::default() };
/// assert!(timed.is_partially_reliable() && !reliable.is_partially_reliable());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendOptions {
    /// Deliver as soon as it arrives, not in stream order.
    pub unordered: bool,
    /// Payload protocol identifier carried to the peer.
    pub ppid: u32,
    /// Partial reliability, timed (RFC 3758): give up on the message if it is
    /// not acknowledged this long after it was handed in.
    pub lifetime: Option<Duration>,
    /// Partial reliability, limited retransmissions (RFC 7496): give up
    /// after this many retransmissions (0: send once).
    pub max_retransmissions: Option<u32>,
}

impl SendOptions {
    /// Whether the message may be abandoned.
    pub fn is_partially_reliable(&self) -> bool {
        self.lifetime.is_some() || self.max_retransmissions.is_some()
    }
}

/// What happened to an association, in order. Read with
/// [`Association::event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed.
    Established,
    /// The peer restarted (a new INIT on a live association, RFC 9260
    /// §5.2.4): its earlier state, and data in flight, are gone.
    PeerRestarted,
    /// The association ended, and why.
    Closed(AssociationError),
}

/// One SCTP association. Cheap to clone; clones share it. When the last
/// clone is dropped the association is shut down gracefully.
pub struct Association {
    inner: Arc<Handle>,
}

impl Clone for Association {
    fn clone(&self) -> Self {
        Association {
            inner: self.inner.clone(),
        }
    }
}

impl std::fmt::Debug for Association {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Association")
            .field("id", &self.inner.id.0)
            .finish_non_exhaustive()
    }
}

struct Handle {
    shared: Arc<Shared>,
    id: AssociationId,
    close_timeout: Duration,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        let now = self.shared.clock.now();
        let last = match st.slots.get_mut(&self.id) {
            Some(s) => {
                s.handles = s.handles.saturating_sub(1);
                if s.handles == 0 {
                    // Nobody will read: drop what is queued and let the
                    // protocol deliver (and discard) the rest.
                    s.recv.clear();
                    s.recv_bytes = 0;
                    s.recv_limit = usize::MAX;
                    s.closed.is_none()
                } else {
                    false
                }
            }
            None => false,
        };
        if last {
            st.ep.close(now, self.id);
        }
        st.slots_dirty = true;
        drop(st);
        self.shared.wake.notify_one();
    }
}

impl Association {
    pub(crate) fn new(shared: Arc<Shared>, id: AssociationId, close_timeout: Duration) -> Self {
        Association {
            inner: Arc::new(Handle {
                shared,
                id,
                close_timeout,
            }),
        }
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// The peer's UDP address.
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        let st = self.shared().lock();
        st.ep
            .association(self.inner.id)
            .and_then(|a| a.remote_addr())
    }

    /// Whether message interleaving (RFC 8260 I-DATA) is in use: both
    /// sides offered it ([`crate::TransportConfig::interleaving`]).
    pub fn interleaving(&self) -> bool {
        let st = self.shared().lock();
        st.ep
            .association(self.inner.id)
            .is_some_and(|a| a.interleaving())
    }

    /// Outbound streams negotiated with the peer (0 before the handshake
    /// completes or after the association ends).
    pub fn outbound_streams(&self) -> u16 {
        let st = self.shared().lock();
        st.ep
            .association(self.inner.id)
            .map(|a| a.outbound_streams())
            .unwrap_or(0)
    }

    /// Send one message on `stream`. Waits while the send buffer is full
    /// (backpressure); returns once the message is queued, not when it is
    /// acknowledged.
    pub async fn send(
        &self,
        stream: u16,
        data: impl AsRef<[u8]>,
        options: SendOptions,
    ) -> Result<(), SendError> {
        let data = data.as_ref();
        let params = SendParams {
            stream,
            unordered: options.unordered,
            ppid: options.ppid,
            lifetime: options
                .lifetime
                .map(|d| thinstream_base::Duration::from_nanos(d.as_nanos() as u64)),
            max_retransmissions: options.max_retransmissions,
        };
        let id = self.inner.id;
        let r = poll_fn(|cx| {
            let mut st = self.shared().lock();
            let Some(slot) = st.slots.get(&id) else {
                return Poll::Ready(Err(SendError::Closed(AssociationError::Closed)));
            };
            if let Some(e) = &slot.closed {
                return Poll::Ready(Err(SendError::Closed(e.clone())));
            }
            let now = self.shared().clock.now();
            match st.ep.send_with(now, id, &params, data) {
                Ok(_) => Poll::Ready(Ok(())),
                Err(CoreSendError::BufferFull) => {
                    if let Some(slot) = st.slots.get_mut(&id) {
                        slot.send_wakers.push(cx.waker().clone());
                    }
                    st.senders_waiting.insert(id);
                    Poll::Pending
                }
                Err(e) => Poll::Ready(Err(convert_send_error(e, slot_closed(&st, id)))),
            }
        })
        .await;
        if r.is_ok() {
            self.shared().wake.notify_one();
        }
        r
    }

    /// The next message, in arrival order across streams (in stream order
    /// within an ordered stream). Fails once the association has ended and
    /// every message that arrived before was read.
    pub async fn recv(&self) -> Result<Message, AssociationError> {
        let id = self.inner.id;
        let (m, unpaused) = poll_fn(|cx| {
            let mut st = self.shared().lock();
            let gone = st.gone.clone();
            let Some(slot) = st.slots.get_mut(&id) else {
                return Poll::Ready(Err(AssociationError::Closed));
            };
            if let Some(m) = slot.recv.pop_front() {
                let was_paused = slot.paused();
                slot.recv_bytes -= m.data.len();
                return Poll::Ready(Ok((m, was_paused && !slot.paused())));
            }
            if let Some(e) = &slot.closed {
                return Poll::Ready(Err(e.clone()));
            }
            if let Some(g) = gone {
                return Poll::Ready(Err(AssociationError::EndpointGone(g)));
            }
            slot.recv_waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await?;
        if unpaused {
            // Messages may be waiting in the protocol core.
            self.shared().wake.notify_one();
        }
        Ok(m)
    }

    /// The next [`Event`]; `None` after [`Event::Closed`] was read.
    pub async fn event(&self) -> Option<Event> {
        let id = self.inner.id;
        poll_fn(|cx| {
            let mut st = self.shared().lock();
            let Some(slot) = st.slots.get_mut(&id) else {
                return Poll::Ready(None);
            };
            if let Some(e) = slot.events.pop_front() {
                return Poll::Ready(Some(e));
            }
            if slot.closed.is_some() {
                return Poll::Ready(None);
            }
            slot.event_waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Messages received and not read yet.
    pub fn queued_messages(&self) -> usize {
        let st = self.shared().lock();
        st.slots.get(&self.inner.id).map_or(0, |s| s.recv.len())
    }

    /// Why the association ended, `None` while it is alive.
    pub fn close_reason(&self) -> Option<AssociationError> {
        let st = self.shared().lock();
        st.slots.get(&self.inner.id).and_then(|s| s.closed.clone())
    }

    /// Shut down gracefully: queued messages are delivered first, then the
    /// SHUTDOWN exchange. Waits at most the configured close timeout, then
    /// aborts. Returns how it ended.
    pub async fn close(&self) -> AssociationError {
        {
            let mut st = self.shared().lock();
            let now = self.shared().clock.now();
            st.ep.close(now, self.inner.id);
        }
        self.shared().wake.notify_one();
        match tokio::time::timeout(self.inner.close_timeout, self.closed()).await {
            Ok(e) => e,
            Err(_) => {
                self.abort("graceful shutdown timed out");
                self.closed().await
            }
        }
    }

    /// Abort at once: queued data is dropped, the peer gets an ABORT
    /// carrying `reason`.
    pub fn abort(&self, reason: &str) {
        {
            let mut st = self.shared().lock();
            let now = self.shared().clock.now();
            st.ep.abort(now, self.inner.id, reason);
        }
        self.shared().wake.notify_one();
    }

    /// Wait until the association has ended; returns why.
    pub async fn closed(&self) -> AssociationError {
        let id = self.inner.id;
        poll_fn(|cx| {
            let mut st = self.shared().lock();
            let gone = st.gone.clone();
            let Some(slot) = st.slots.get_mut(&id) else {
                return Poll::Ready(AssociationError::Closed);
            };
            if let Some(e) = &slot.closed {
                return Poll::Ready(e.clone());
            }
            if let Some(g) = gone {
                return Poll::Ready(AssociationError::EndpointGone(g));
            }
            slot.state_wakers.push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Counters and state now; after the association ended, as they were
    /// at its end.
    pub fn stats(&self) -> AssociationStats {
        let st = self.shared().lock();
        let now = self.shared().clock.now();
        if let Some(a) = st.ep.association(self.inner.id) {
            return AssociationStats::read(a, now);
        }
        st.slots
            .get(&self.inner.id)
            .and_then(|s| s.final_stats.clone())
            .unwrap_or_default()
    }

    /// Take the trace records collected so far (only with
    /// [`crate::AssociationConfig::trace`] on): every packet, chunk,
    /// retransmission, RTT sample and state change, with its time on the
    /// endpoint's clock. At most about four million records are kept;
    /// take them regularly on long runs.
    pub fn take_trace(&self) -> Vec<crate::trace::Record> {
        let mut st = self.shared().lock();
        st.slots
            .get_mut(&self.inner.id)
            .map(|s| s.trace.drain(..).collect())
            .unwrap_or_default()
    }

    /// The thin-stream mechanisms in use.
    pub fn mechanisms(&self) -> Option<Mechanisms> {
        let st = self.shared().lock();
        st.ep
            .association(self.inner.id)
            .map(|a| a.mechanisms().clone())
    }

    /// Switch the thin-stream mechanisms of a live association (they take
    /// effect from the next event on).
    pub fn set_mechanisms(&self, mechanisms: Mechanisms) {
        let mut st = self.shared().lock();
        st.ep.set_mechanisms(self.inner.id, mechanisms);
    }
}

fn slot_closed(st: &crate::state::State, id: AssociationId) -> Option<AssociationError> {
    st.slots.get(&id).and_then(|s| s.closed.clone())
}

fn convert_send_error(e: CoreSendError, closed: Option<AssociationError>) -> SendError {
    match e {
        CoreSendError::NotConnected => SendError::Closed(closed.unwrap_or(
            AssociationError::Failed("the association is not established".into()),
        )),
        CoreSendError::BufferFull => unreachable!("handled by the caller"),
        CoreSendError::InvalidStream { stream, streams } => {
            SendError::InvalidStream { stream, streams }
        }
        CoreSendError::TooLarge { bytes, max } => SendError::TooLarge { bytes, max },
        CoreSendError::Empty => SendError::Empty,
        CoreSendError::Unsupported(w) => SendError::Unsupported(w.to_string()),
    }
}
