//! Two deliberately tiny transports for exercising the engine without the
//! real protocols: an unreliable datagram "transport" (one message, one
//! datagram, no state) and a stop-and-wait transport (one message in flight,
//! fixed retransmission timeout). Both follow the drive contract of
//! `base::drive` and emit trace records, so engine, metrics and benchmarks
//! can be tested before SCTP and TCP exist. Neither is a protocol of this
//! project; do not measure anything with them but the engine.
//!
//! Wire format (both): `kind u8 | flags u8 | stream u16 | seq u64 | payload`,
//! big-endian. Kinds: 0 = datagram, 1 = stop-and-wait data, 2 = stop-and-wait ack.

use std::collections::VecDeque;
use std::net::SocketAddr;
use thinstream_base::drive::{AppEvent, Outgoing, SendError, Transport};
use thinstream_base::trace::{Record, SentData, TxReason, Units};
use thinstream_base::{Datagram, Duration, Instant};

/// Bytes of the toy header.
pub const TOY_HEADER: usize = 12;
const KIND_DATAGRAM: u8 = 0;
const KIND_DATA: u8 = 1;
const KIND_ACK: u8 = 2;
const FLAG_UNORDERED: u8 = 1;

struct ToyHeader {
    kind: u8,
    flags: u8,
    stream: u16,
    seq: u64,
}

fn encode(h: &ToyHeader, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(TOY_HEADER + payload.len());
    v.push(h.kind);
    v.push(h.flags);
    v.extend_from_slice(&h.stream.to_be_bytes());
    v.extend_from_slice(&h.seq.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn decode(bytes: &[u8]) -> Option<ToyHeader> {
    let b = bytes.get(..TOY_HEADER)?;
    Some(ToyHeader {
        kind: b[0],
        flags: b[1],
        stream: u16::from_be_bytes([b[2], b[3]]),
        seq: u64::from_be_bytes(b[4..12].try_into().ok()?),
    })
}

fn wire_len(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Sends each message as one datagram, immediately; delivers whatever
/// arrives. Losses are losses. Established from the start.
#[derive(Debug)]
pub struct UnreliableDatagram {
    local: SocketAddr,
    peer: SocketAddr,
    tx: VecDeque<Datagram>,
    app: VecDeque<AppEvent>,
    trace: VecDeque<Record>,
    tracing: bool,
    next_seq: u64,
}

impl UnreliableDatagram {
    pub fn new(local: SocketAddr, peer: SocketAddr) -> Self {
        let mut app = VecDeque::new();
        app.push_back(AppEvent::Established);
        UnreliableDatagram {
            local,
            peer,
            tx: VecDeque::new(),
            app,
            trace: VecDeque::new(),
            tracing: true,
            next_seq: 0,
        }
    }
    /// Turns trace records off (benchmarks measure the engine, not tracing).
    pub fn without_trace(mut self) -> Self {
        self.tracing = false;
        self
    }
}

impl Transport for UnreliableDatagram {
    fn handle_datagram(&mut self, now: Instant, datagram: Datagram) {
        let wire_bytes = wire_len(datagram.payload.len());
        let Some(h) = decode(&datagram.payload).filter(|h| h.kind == KIND_DATAGRAM) else {
            if self.tracing {
                self.trace.push_back(Record::Discarded {
                    time: now,
                    why: "toy-malformed".into(),
                });
            }
            return;
        };
        let mut payload = datagram.payload;
        payload.drain(..TOY_HEADER);
        let bytes = wire_len(payload.len());
        let unordered = h.flags & FLAG_UNORDERED != 0;
        if self.tracing {
            let units = Units::one(h.seq);
            self.trace.push_back(Record::PacketReceived {
                time: now,
                wire_bytes,
            });
            self.trace.push_back(Record::Arrived {
                time: now,
                units,
                bytes,
                duplicate: false,
            });
            self.trace.push_back(Record::Delivered {
                time: now,
                stream: h.stream,
                bytes,
                unordered,
                units,
            });
        }
        self.app.push_back(AppEvent::Received {
            stream: h.stream,
            unordered,
            ppid: 0,
            payload: payload.into(),
        });
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn poll_transmit(&mut self, _now: Instant) -> Option<Datagram> {
        self.tx.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn poll_app(&mut self) -> Option<AppEvent> {
        self.app.pop_front()
    }

    fn poll_trace(&mut self) -> Option<Record> {
        self.trace.pop_front()
    }

    fn send(&mut self, now: Instant, message: Outgoing<'_>) -> Result<u64, SendError> {
        if message.payload.is_empty() {
            return Err(SendError::Empty);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let h = ToyHeader {
            kind: KIND_DATAGRAM,
            flags: if message.unordered { FLAG_UNORDERED } else { 0 },
            stream: message.stream,
            seq,
        };
        let payload = encode(&h, message.payload);
        if self.tracing {
            let bytes = wire_len(message.payload.len());
            self.trace.push_back(Record::Submitted {
                time: now,
                message: seq,
                stream: message.stream,
                bytes,
                unordered: message.unordered,
                units: Units::one(seq),
            });
            self.trace.push_back(Record::PacketSent {
                time: now,
                wire_bytes: wire_len(payload.len()),
                data: thinstream_base::trace::pieces![SentData {
                    units: Units::one(seq),
                    bytes,
                    reason: TxReason::New,
                }],
                control: 0,
            });
        }
        self.tx.push_back(Datagram {
            src: self.local,
            dst: self.peer,
            payload,
        });
        Ok(seq)
    }

    fn close(&mut self, _now: Instant) {
        self.app.push_back(AppEvent::Closed { error: None });
    }

    fn is_established(&self) -> bool {
        true
    }

    fn is_closed(&self) -> bool {
        false
    }
}

/// One message in flight at a time; the receiver acknowledges every data
/// packet; the sender retransmits after a fixed timeout. Both directions
/// work at once. The send queue holds `capacity` messages; beyond that
/// `send` returns `BufferFull` and `Writable` follows when space frees up.
#[derive(Debug)]
pub struct StopAndWait {
    local: SocketAddr,
    peer: SocketAddr,
    rto: Duration,
    capacity: usize,
    // Sender.
    queue: VecDeque<(u16, bool, Vec<u8>)>,
    next_seq: u64,
    in_flight: Option<(u64, u16, bool, Vec<u8>)>,
    deadline: Option<Instant>,
    send_now: Option<TxReason>,
    blocked: bool,
    // Receiver.
    expected: u64,
    acks: VecDeque<u64>,
    // Outputs.
    app: VecDeque<AppEvent>,
    trace: VecDeque<Record>,
}

impl StopAndWait {
    pub fn new(local: SocketAddr, peer: SocketAddr, rto: Duration, capacity: usize) -> Self {
        let mut app = VecDeque::new();
        app.push_back(AppEvent::Established);
        StopAndWait {
            local,
            peer,
            rto,
            capacity: capacity.max(1),
            queue: VecDeque::new(),
            next_seq: 0,
            in_flight: None,
            deadline: None,
            send_now: None,
            blocked: false,
            expected: 0,
            acks: VecDeque::new(),
            app,
            trace: VecDeque::new(),
        }
    }

    fn start_next(&mut self) {
        if self.in_flight.is_some() {
            return;
        }
        if let Some((stream, unordered, payload)) = self.queue.pop_front() {
            self.in_flight = Some((self.next_seq, stream, unordered, payload));
            self.next_seq += 1;
            self.send_now = Some(TxReason::New);
            if self.blocked {
                self.blocked = false;
                self.app.push_back(AppEvent::Writable);
            }
        }
    }
}

impl Transport for StopAndWait {
    fn handle_datagram(&mut self, now: Instant, datagram: Datagram) {
        let wire_bytes = wire_len(datagram.payload.len());
        let Some(h) = decode(&datagram.payload) else {
            self.trace.push_back(Record::Discarded {
                time: now,
                why: "toy-malformed".into(),
            });
            return;
        };
        self.trace.push_back(Record::PacketReceived {
            time: now,
            wire_bytes,
        });
        match h.kind {
            KIND_DATA => {
                let bytes = wire_len(datagram.payload.len() - TOY_HEADER);
                let duplicate = h.seq < self.expected;
                self.trace.push_back(Record::Arrived {
                    time: now,
                    units: Units::one(h.seq),
                    bytes,
                    duplicate,
                });
                if h.seq == self.expected {
                    self.expected += 1;
                    let unordered = h.flags & FLAG_UNORDERED != 0;
                    self.trace.push_back(Record::Delivered {
                        time: now,
                        stream: h.stream,
                        bytes,
                        unordered,
                        units: Units::one(h.seq),
                    });
                    let mut payload = datagram.payload;
                    payload.drain(..TOY_HEADER);
                    self.app.push_back(AppEvent::Received {
                        stream: h.stream,
                        unordered,
                        ppid: 0,
                        payload: payload.into(),
                    });
                }
                // A sequence number from the future cannot happen with one
                // message in flight; acknowledge what we have either way.
                if h.seq < self.expected {
                    self.acks.push_back(h.seq);
                }
            }
            KIND_ACK => {
                if matches!(self.in_flight, Some((seq, ..)) if seq == h.seq) {
                    self.in_flight = None;
                    self.deadline = None;
                    self.trace.push_back(Record::Acked {
                        time: now,
                        units: Units::one(h.seq),
                    });
                    self.start_next();
                }
            }
            _ => self.trace.push_back(Record::Discarded {
                time: now,
                why: "toy-unknown-kind".into(),
            }),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        match self.deadline {
            Some(d) if d <= now => {
                self.deadline = None;
                self.send_now = Some(TxReason::TimeoutRetransmit);
            }
            _ => {}
        }
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        if let Some(seq) = self.acks.pop_front() {
            let h = ToyHeader {
                kind: KIND_ACK,
                flags: 0,
                stream: 0,
                seq,
            };
            let payload = encode(&h, &[]);
            self.trace.push_back(Record::PacketSent {
                time: now,
                wire_bytes: wire_len(payload.len()),
                data: Default::default(),
                control: 1,
            });
            return Some(Datagram {
                src: self.local,
                dst: self.peer,
                payload,
            });
        }
        let reason = self.send_now.take()?;
        let (seq, stream, unordered, body) = self.in_flight.as_ref()?;
        let h = ToyHeader {
            kind: KIND_DATA,
            flags: if *unordered { FLAG_UNORDERED } else { 0 },
            stream: *stream,
            seq: *seq,
        };
        let payload = encode(&h, body);
        self.trace.push_back(Record::PacketSent {
            time: now,
            wire_bytes: wire_len(payload.len()),
            data: thinstream_base::trace::pieces![SentData {
                units: Units::one(*seq),
                bytes: wire_len(body.len()),
                reason,
            }],
            control: 0,
        });
        self.deadline = Some(now + self.rto);
        Some(Datagram {
            src: self.local,
            dst: self.peer,
            payload,
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    fn poll_app(&mut self) -> Option<AppEvent> {
        self.app.pop_front()
    }

    fn poll_trace(&mut self) -> Option<Record> {
        self.trace.pop_front()
    }

    fn send(&mut self, now: Instant, message: Outgoing<'_>) -> Result<u64, SendError> {
        if message.payload.is_empty() {
            return Err(SendError::Empty);
        }
        if self.queue.len() >= self.capacity {
            self.blocked = true;
            return Err(SendError::BufferFull);
        }
        // The message takes the unit after everything queued before it
        // (`next_seq` is already past the message in flight).
        let unit = self.next_seq + self.queue.len() as u64;
        self.trace.push_back(Record::Submitted {
            time: now,
            message: unit,
            stream: message.stream,
            bytes: wire_len(message.payload.len()),
            unordered: message.unordered,
            units: Units::one(unit),
        });
        self.queue
            .push_back((message.stream, message.unordered, message.payload.to_vec()));
        self.start_next();
        Ok(unit)
    }

    fn close(&mut self, _now: Instant) {
        self.app.push_back(AppEvent::Closed { error: None });
    }

    fn is_established(&self) -> bool {
        true
    }

    fn is_closed(&self) -> bool {
        false
    }
}
