//! The state shared by the endpoint task and the application's handles.
//!
//! One mutex per endpoint guards the protocol core (which owns every
//! association of the endpoint) and the per-association application queues.
//! Handles lock it briefly to hand a message in or take one out and wake
//! the endpoint task; the endpoint task locks it to feed datagrams and
//! timeouts in and take datagrams and events out. No channel sits between
//! them, so a send costs one lock and at most one wake-up.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;

use thinstream_base::drive::AppEvent;
use thinstream_base::Instant;
use thinstream_proto::endpoint::IdMap;
use thinstream_proto::{AssociationId, Endpoint as ProtoEndpoint};
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::error::AssociationError;
use crate::stats::AssociationStats;
use crate::{Event, Message};

/// Most events kept for an application that never reads them.
const MAX_EVENTS: usize = 64;

pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    /// Wakes the endpoint task: new output may be pending.
    pub(crate) wake: Notify,
    pub(crate) clock: Clock,
    pub(crate) local: std::net::SocketAddr,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock would be a bug in this crate; the
        // state is still consistent enough to shut down, so keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub(crate) struct State {
    pub(crate) ep: ProtoEndpoint,
    pub(crate) slots: IdMap<Slot>,
    pub(crate) incoming: VecDeque<AssociationId>,
    pub(crate) incoming_waker: Option<Waker>,
    pub(crate) max_pending_incoming: usize,
    pub(crate) recv_queue_default: usize,
    /// `Endpoint::close` was called: no new associations.
    pub(crate) closing: bool,
    /// The endpoint task stopped; why.
    pub(crate) gone: Option<String>,
    pub(crate) idle_wakers: Vec<Waker>,
    /// Some association records a trace: drain the core's trace queue.
    pub(crate) tracing: bool,
    /// Associations with a `send` waiting for buffer space.
    pub(crate) senders_waiting: BTreeSet<AssociationId>,
    /// A slot may have become forgettable (closed, last handle gone).
    pub(crate) slots_dirty: bool,
}

/// Most trace records kept per association for an application that does
/// not take them (the oldest are dropped beyond this).
pub(crate) const MAX_TRACE: usize = 1 << 22;

/// The application side of one association.
pub(crate) struct Slot {
    pub(crate) established: bool,
    /// The application holds (or was offered) a handle.
    pub(crate) announced: bool,
    pub(crate) recv: VecDeque<Message>,
    pub(crate) recv_bytes: usize,
    pub(crate) recv_limit: usize,
    pub(crate) recv_waker: Option<Waker>,
    pub(crate) send_wakers: Vec<Waker>,
    pub(crate) events: VecDeque<Event>,
    pub(crate) event_waker: Option<Waker>,
    pub(crate) state_wakers: Vec<Waker>,
    pub(crate) closed: Option<AssociationError>,
    /// Counters as they were when the association ended.
    pub(crate) final_stats: Option<AssociationStats>,
    pub(crate) trace: VecDeque<thinstream_base::trace::Record>,
    pub(crate) trace_dropped: u64,
    /// Live handles ([`crate::Association`] clones); the last one dropped
    /// closes the association.
    pub(crate) handles: usize,
}

impl Slot {
    pub(crate) fn new(recv_limit: usize) -> Slot {
        Slot {
            established: false,
            announced: false,
            recv: VecDeque::new(),
            recv_bytes: 0,
            recv_limit,
            recv_waker: None,
            send_wakers: Vec::new(),
            events: VecDeque::new(),
            event_waker: None,
            state_wakers: Vec::new(),
            closed: None,
            final_stats: None,
            trace: VecDeque::new(),
            trace_dropped: 0,
            handles: 0,
        }
    }

    /// The application cannot take more messages now.
    pub(crate) fn paused(&self) -> bool {
        self.recv_bytes >= self.recv_limit
    }

    fn push_event(&mut self, e: Event) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
        if let Some(w) = self.event_waker.take() {
            w.wake();
        }
    }

    fn wake_state(&mut self) {
        for w in self.state_wakers.drain(..) {
            w.wake();
        }
    }

    fn wake_all(&mut self) {
        self.wake_state();
        for w in self.send_wakers.drain(..) {
            w.wake();
        }
        if let Some(w) = self.recv_waker.take() {
            w.wake();
        }
        if let Some(w) = self.event_waker.take() {
            w.wake();
        }
    }
}

impl State {
    /// Route the protocol core's application events to the slots. Returns
    /// whether an application task waiting to receive or to send was woken.
    /// Move the protocol core's trace records (when tracing) to the slots.
    /// The endpoint task does this after the turn's datagrams have left,
    /// so that recording stays off the round trip's path.
    pub(crate) fn drain_trace(&mut self) {
        if !self.tracing {
            return;
        }
        while let Some((id, r)) = self.ep.poll_trace() {
            if let Some(slot) = id.and_then(|id| self.slots.get_mut(&id)) {
                if slot.trace.len() >= MAX_TRACE {
                    slot.trace.pop_front();
                    slot.trace_dropped += 1;
                }
                slot.trace.push_back(r);
            }
        }
        // Taking the last records lets an ended association go.
        self.forget_ended();
    }

    pub(crate) fn drain_events(&mut self, now: Instant) -> bool {
        let mut woke = false;
        let mut ended = false;
        let mut new_incoming = Vec::new();
        let recv_default = self.recv_queue_default;
        let State {
            ep,
            slots,
            slots_dirty,
            ..
        } = self;
        while let Some((id, ev)) =
            ep.poll_event_unless(|id| slots.get(&id).is_some_and(|s| s.paused()))
        {
            let slot = slots.entry(id).or_insert_with(|| Slot::new(recv_default));
            match ev {
                AppEvent::Established => {
                    slot.established = true;
                    slot.push_event(Event::Established);
                    slot.wake_state();
                    if !slot.announced {
                        new_incoming.push(id);
                    }
                }
                AppEvent::PeerRestarted => slot.push_event(Event::PeerRestarted),
                AppEvent::Received {
                    stream,
                    unordered,
                    payload,
                    ppid,
                } => {
                    slot.recv_bytes += payload.len();
                    slot.recv.push_back(Message {
                        stream,
                        ppid,
                        unordered,
                        data: payload,
                    });
                    if let Some(w) = slot.recv_waker.take() {
                        w.wake();
                        woke = true;
                    }
                }
                AppEvent::Writable => {
                    for w in slot.send_wakers.drain(..) {
                        w.wake();
                        woke = true;
                    }
                }
                AppEvent::Closed { error } => {
                    ended = true;
                    if let Some(a) = ep.association(id) {
                        slot.final_stats = Some(AssociationStats::read(a, now));
                    }
                    let why = AssociationError::from_close(error);
                    *slots_dirty = true;
                    slot.push_event(Event::Closed(why.clone()));
                    slot.closed = Some(why);
                    slot.wake_all();
                }
            }
        }
        // A paused association's events wait in the core behind the
        // messages its application has not taken, `Writable` included. A
        // send waiting for buffer space must not depend on the application
        // reading (an echo server blocked in `send` while its peer keeps
        // sending would never wake): let it retry while there is room.
        let waiting: Vec<AssociationId> = self.senders_waiting.iter().copied().collect();
        for id in waiting {
            let Some(slot) = self.slots.get_mut(&id) else {
                self.senders_waiting.remove(&id);
                continue;
            };
            if slot.send_wakers.is_empty() {
                self.senders_waiting.remove(&id);
                continue;
            }
            if !slot.paused() {
                // `Writable` will come through the core's events.
                continue;
            }
            if let Some(a) = self.ep.association(id) {
                if a.buffered_send_bytes() < a.config().send_buffer {
                    for w in slot.send_wakers.drain(..) {
                        w.wake();
                        woke = true;
                    }
                    self.senders_waiting.remove(&id);
                }
            }
        }
        for id in new_incoming {
            if self.closing || self.incoming.len() >= self.max_pending_incoming {
                let reason = if self.closing {
                    "endpoint closing"
                } else {
                    "too many associations waiting to be accepted"
                };
                self.ep.abort(now, id, reason);
                self.slots.remove(&id);
                continue;
            }
            if let Some(s) = self.slots.get_mut(&id) {
                s.announced = true;
                // Owned by the `Incoming` until accepted or refused.
                s.handles += 1;
            }
            self.incoming.push_back(id);
            if let Some(w) = self.incoming_waker.take() {
                w.wake();
            }
        }
        if ended {
            // Whoever learns of the end now sees the whole trace.
            self.drain_trace();
        }
        self.forget_ended();
        woke
    }

    /// Forget ended associations nobody holds any more, and wake
    /// `wait_idle` once nothing is left.
    fn forget_ended(&mut self) {
        if std::mem::take(&mut self.slots_dirty) {
            self.slots
                .retain(|_, s| !(s.closed.is_some() && s.handles == 0));
        }
        if self.ep.association_count() == 0 && self.slots.is_empty() {
            for w in self.idle_wakers.drain(..) {
                w.wake();
            }
        }
    }

    /// The endpoint task ended: fail every waiter.
    pub(crate) fn fail_all(&mut self, why: String) {
        self.gone = Some(why.clone());
        #[allow(
            clippy::iter_over_hash_type,
            reason = "every slot is failed and woken: the order does not matter"
        )]
        for slot in self.slots.values_mut() {
            if slot.closed.is_none() {
                slot.closed = Some(AssociationError::EndpointGone(why.clone()));
            }
            slot.wake_all();
        }
        if let Some(w) = self.incoming_waker.take() {
            w.wake();
        }
        for w in self.idle_wakers.drain(..) {
            w.wake();
        }
    }
}
