//! A server: one SCTP endpoint on one UDP socket serving any number of
//! peers, echoing or discarding what arrives. The application logic runs
//! inside the driver task (no round trip per message).

use std::collections::{BTreeMap, VecDeque};
use thinstream_base::drive::{AppEvent, Outgoing, SendError};
use thinstream_base::trace::Record;
use thinstream_base::{Datagram, Instant};
use thinstream_proto::{AssociationId, Endpoint};

use crate::driver::Sans;

/// What the server does with each received message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Send every message back on the same stream with the same ordering flag.
    Echo,
    /// Count and drop.
    Discard,
}

/// Counters of one association as seen by the server.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PeerReport {
    pub peer: String,
    pub messages: u64,
    pub bytes: u64,
    pub echoed: u64,
    /// `None` for a graceful end, the error text otherwise.
    pub error: Option<String>,
}

/// What the server tells its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerEvent {
    Established(AssociationId, String),
    Ended(AssociationId, PeerReport),
}

/// An [`Endpoint`] plus the echo/discard application.
pub struct Server {
    endpoint: Endpoint,
    mode: Mode,
    peers: BTreeMap<AssociationId, PeerReport>,
    /// Echoes refused with `BufferFull`, retried on `Writable`.
    backlog: BTreeMap<AssociationId, VecDeque<(u16, bool, Vec<u8>)>>,
    events: VecDeque<ServerEvent>,
}

impl Server {
    pub fn new(endpoint: Endpoint, mode: Mode) -> Server {
        Server {
            endpoint,
            mode,
            peers: BTreeMap::new(),
            backlog: BTreeMap::new(),
            events: VecDeque::new(),
        }
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Reports of the associations that are still open.
    pub fn open_reports(&self) -> Vec<PeerReport> {
        self.peers.values().cloned().collect()
    }

    fn flush_backlog(&mut self, now: Instant, id: AssociationId) {
        let Some(q) = self.backlog.get_mut(&id) else {
            return;
        };
        while let Some((stream, unordered, payload)) = q.front() {
            let m = Outgoing {
                stream: *stream,
                unordered: *unordered,
                payload,
            };
            match self.endpoint.send(now, id, m) {
                Ok(_) => {
                    q.pop_front();
                    if let Some(p) = self.peers.get_mut(&id) {
                        p.echoed += 1;
                    }
                }
                Err(SendError::BufferFull) => return,
                Err(_) => {
                    // The association is gone or refuses the stream: the
                    // echo cannot be delivered; the peer sees it missing.
                    q.clear();
                    return;
                }
            }
        }
    }

    /// Run the application on every event the endpoint produced.
    fn process(&mut self, now: Instant) {
        while let Some((id, ev)) = self.endpoint.poll_event() {
            match ev {
                AppEvent::Established => {
                    let peer = self
                        .endpoint
                        .association(id)
                        .and_then(|a| a.remote_addr())
                        .map(|a| a.to_string())
                        .unwrap_or_default();
                    self.peers.insert(
                        id,
                        PeerReport {
                            peer: peer.clone(),
                            ..PeerReport::default()
                        },
                    );
                    self.events.push_back(ServerEvent::Established(id, peer));
                }
                AppEvent::Received {
                    stream,
                    unordered,
                    payload,
                    ..
                } => {
                    let p = self.peers.entry(id).or_default();
                    p.messages += 1;
                    p.bytes += payload.len() as u64;
                    if self.mode == Mode::Echo {
                        self.backlog
                            .entry(id)
                            .or_default()
                            .push_back((stream, unordered, payload));
                        self.flush_backlog(now, id);
                    }
                }
                AppEvent::Writable => self.flush_backlog(now, id),
                AppEvent::PeerRestarted => {}
                AppEvent::Closed { error } => {
                    let mut p = self.peers.remove(&id).unwrap_or_default();
                    p.error = error;
                    self.backlog.remove(&id);
                    self.events.push_back(ServerEvent::Ended(id, p));
                }
            }
        }
    }
}

impl Sans for Server {
    type Event = ServerEvent;
    fn handle_datagram(&mut self, now: Instant, datagram: Datagram) {
        self.endpoint.handle_datagram(now, datagram);
        self.process(now);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.process(now);
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        self.endpoint.poll_transmit(now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.endpoint.poll_timeout()
    }
    fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }
    fn poll_trace(&mut self) -> Option<Record> {
        self.endpoint.poll_trace().map(|(_, r)| r)
    }
    fn is_finished(&self) -> bool {
        false
    }
}
