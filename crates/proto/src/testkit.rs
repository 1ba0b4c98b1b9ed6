//! Two associations joined by a virtual link with editable in-flight
//! queues: the scenario harness of this crate's tests, exported under the
//! `testkit` feature for other crates' tests.
//!
//! Time is virtual: [`Pair::drive_until`] jumps from event to event (packet
//! arrivals, timer deadlines). Every sent packet is logged as a parsed
//! [`Packet`] in [`Pair::sent`]; tests drop, duplicate or delay packets with
//! one-shot [`Pair::drop_next`] rules or a general [`Pair::impair`] function.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use thinstream_base::drive::{AppEvent, Outgoing, SendError, Transport};
use thinstream_base::trace::Record;
use thinstream_base::{Datagram, Duration, Instant, Seed};

use crate::wire::{Chunk, Packet, Tsn};
use crate::{Association, Config};

/// Which end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// A packet as it left an endpoint.
#[derive(Clone, Debug)]
pub struct Sent {
    pub at: Instant,
    pub from: Side,
    pub packet: Packet,
    /// Whether the link dropped it.
    pub dropped: bool,
}

impl Sent {
    /// TSNs of the DATA chunks it carries.
    pub fn data_tsns(&self) -> Vec<Tsn> {
        self.packet
            .chunks
            .iter()
            .filter_map(|c| match c {
                Chunk::Data(d) => Some(d.tsn),
                _ => None,
            })
            .collect()
    }
    /// Whether it carries a chunk of this type.
    pub fn has(&self, kind: u8) -> bool {
        self.packet.chunks.iter().any(|c| c.kind() == kind)
    }
}

type Matcher = Box<dyn FnMut(&Packet) -> bool>;
/// Extra delays of the copies to deliver: empty = drop, one = deliver, two = duplicate.
pub type Impairment = Box<dyn FnMut(Side, &Packet) -> Vec<Duration>>;

/// What a one-shot rule does to a matching packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleAction {
    Drop,
    /// Deliver it this much later than the link delay (reordering).
    Delay(Duration),
    /// Deliver it twice, the copy this much later.
    Duplicate(Duration),
}

struct DropRule {
    from: Side,
    matcher: Matcher,
    remaining: u32,
    action: RuleAction,
}

/// Client and server associations on a virtual link.
pub struct Pair {
    pub now: Instant,
    /// One-way delay of the link.
    pub delay: Duration,
    pub client: Association,
    pub server: Association,
    /// Whether the application reads (polls `poll_app`) on each side.
    pub client_reads: bool,
    pub server_reads: bool,
    pub client_events: Vec<AppEvent>,
    pub server_events: Vec<AppEvent>,
    pub client_trace: Vec<Record>,
    pub server_trace: Vec<Record>,
    /// Every packet sent, in order.
    pub sent: Vec<Sent>,
    /// Whether to keep `sent` (off for long randomized runs).
    pub log_packets: bool,
    /// Datagrams in flight, by (arrival time, sequence) -> (destination, datagram).
    pub in_flight: BTreeMap<(Instant, u64), (Side, Datagram)>,
    pub impair: Option<Impairment>,
    rules: Vec<DropRule>,
    seq: u64,
}

/// The client's address.
pub fn client_addr() -> SocketAddr {
    SocketAddr::from(([192, 0, 2, 1], 9899))
}
/// The server's address.
pub fn server_addr() -> SocketAddr {
    SocketAddr::from(([192, 0, 2, 2], 9899))
}

impl Pair {
    /// A client (active open at time 0) and a listening server.
    pub fn new(client: Config, server: Config, delay: Duration, seed: Seed) -> Pair {
        let now = Instant::ZERO;
        let c = Association::connect(
            client,
            now,
            client_addr(),
            server_addr(),
            seed.derive("client"),
        );
        let s = Association::accept(server, now, server_addr(), seed.derive("server"));
        Pair {
            now,
            delay,
            client: c,
            server: s,
            client_reads: true,
            server_reads: true,
            client_events: Vec::new(),
            server_events: Vec::new(),
            client_trace: Vec::new(),
            server_trace: Vec::new(),
            sent: Vec::new(),
            log_packets: true,
            in_flight: BTreeMap::new(),
            impair: None,
            rules: Vec::new(),
            seq: 0,
        }
    }

    /// Two associations built by the caller (e.g. both active for an
    /// INIT collision). `client` and `server` must use [`client_addr`] and
    /// [`server_addr`].
    pub fn from_parts(client: Association, server: Association, delay: Duration) -> Pair {
        let mut p = Pair::new(Config::default(), Config::default(), delay, Seed(0));
        p.client = client;
        p.server = server;
        p
    }

    /// Default configs with tracing on, 50 ms one-way delay.
    pub fn default_traced(seed: u64) -> Pair {
        let c = Config::default().with_trace();
        Pair::new(c.clone(), c, Duration::from_millis(50), Seed(seed))
    }

    pub fn assoc(&mut self, side: Side) -> &mut Association {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    /// Drop the next `times` packets from `from` that match.
    pub fn drop_next(
        &mut self,
        from: Side,
        times: u32,
        matcher: impl FnMut(&Packet) -> bool + 'static,
    ) {
        self.act_on_next(from, times, RuleAction::Drop, matcher);
    }

    /// Apply `action` to the next `times` packets from `from` that match.
    pub fn act_on_next(
        &mut self,
        from: Side,
        times: u32,
        action: RuleAction,
        matcher: impl FnMut(&Packet) -> bool + 'static,
    ) {
        self.rules.push(DropRule {
            from,
            matcher: Box::new(matcher),
            remaining: times,
            action,
        });
    }

    /// Drop the next packet from `from` carrying a chunk of type `kind`.
    pub fn drop_chunk(&mut self, from: Side, kind: u8, times: u32) {
        self.drop_next(from, times, move |p| {
            p.chunks.iter().any(|c| c.kind() == kind)
        });
    }

    /// Drop the next `times` packets from `from` carrying DATA with `tsn`.
    pub fn drop_tsn(&mut self, from: Side, tsn: Tsn, times: u32) {
        self.drop_next(from, times, move |p| {
            p.chunks
                .iter()
                .any(|c| matches!(c, Chunk::Data(d) if d.tsn == tsn))
        });
    }

    /// Queue a message at the current time.
    pub fn send(
        &mut self,
        side: Side,
        stream: u16,
        unordered: bool,
        payload: &[u8],
    ) -> Result<u64, SendError> {
        let now = self.now;
        self.assoc(side).send(
            now,
            Outgoing {
                stream,
                unordered,
                payload,
            },
        )
    }

    /// Messages received so far on `side` (stream, unordered, payload), drained.
    pub fn take_received(&mut self, side: Side) -> Vec<(u16, bool, Vec<u8>)> {
        let events = match side {
            Side::Client => &mut self.client_events,
            Side::Server => &mut self.server_events,
        };
        let mut out = Vec::new();
        events.retain(|e| match e {
            AppEvent::Received {
                stream,
                unordered,
                payload,
                ..
            } => {
                out.push((*stream, *unordered, payload.to_vec()));
                false
            }
            _ => true,
        });
        out
    }

    /// Whether `side` reported `Established`.
    pub fn established(&self, side: Side) -> bool {
        let ev = match side {
            Side::Client => &self.client_events,
            Side::Server => &self.server_events,
        };
        ev.contains(&AppEvent::Established)
    }

    /// The `Closed` event of `side`, if any.
    pub fn closed(&self, side: Side) -> Option<Option<String>> {
        let ev = match side {
            Side::Client => &self.client_events,
            Side::Server => &self.server_events,
        };
        ev.iter().find_map(|e| match e {
            AppEvent::Closed { error } => Some(error.clone()),
            _ => None,
        })
    }

    /// Run the handshake (bounded to 10 s of virtual time).
    pub fn connect(&mut self) {
        self.connect_within(Duration::from_secs(10));
    }

    /// Run the handshake, allowing `max` of virtual time (lossy links).
    pub fn connect_within(&mut self, max: Duration) {
        let limit = self.now + max;
        loop {
            self.flush();
            if (self.established(Side::Client) && self.established(Side::Server))
                || self.now >= limit
            {
                break;
            }
            let next = self.next_event().unwrap_or(limit).min(limit);
            self.drive_until(next);
        }
        assert!(
            self.established(Side::Client) && self.established(Side::Server),
            "handshake did not complete by {}: client {:?} {:?}, server {:?} {:?}",
            self.now,
            self.client.state(),
            self.closed(Side::Client),
            self.server.state(),
            self.closed(Side::Server)
        );
    }

    /// Send out everything both sides want to send; collect events/traces.
    pub fn flush(&mut self) {
        loop {
            let mut progress = false;
            for side in [Side::Client, Side::Server] {
                let now = self.now;
                while let Some(d) = self.assoc(side).poll_transmit(now) {
                    progress = true;
                    self.transmit(side, d);
                }
            }
            progress |= self.collect();
            if !progress {
                break;
            }
        }
        for (side, a) in [(Side::Client, &self.client), (Side::Server, &self.server)] {
            if let Err(e) = a.check_invariants() {
                panic!("{side:?} invariant violated at {}: {e}", self.now);
            }
            // Drive contract: after draining, no deadline lies in the past.
            if let Some(t) = a.poll_timeout() {
                assert!(
                    t >= self.now,
                    "{side:?} asks for a wake-up in the past: {t} < {}",
                    self.now
                );
            }
        }
    }

    fn collect(&mut self) -> bool {
        let mut progress = false;
        if self.client_reads {
            while let Some(e) = self.client.poll_app() {
                self.client_events.push(e);
                progress = true;
            }
        }
        if self.server_reads {
            while let Some(e) = self.server.poll_app() {
                self.server_events.push(e);
                progress = true;
            }
        }
        while let Some(r) = self.client.poll_trace() {
            self.client_trace.push(r);
        }
        while let Some(r) = self.server.poll_trace() {
            self.server_trace.push(r);
        }
        progress
    }

    fn transmit(&mut self, from: Side, d: Datagram) {
        let packet = match Packet::parse(&d.payload) {
            Ok(p) => p,
            Err(e) => panic!("{from:?} sent an unparsable packet: {e:?}"),
        };
        let mut action = None;
        for r in self.rules.iter_mut() {
            if r.remaining > 0 && r.from == from && (r.matcher)(&packet) {
                r.remaining -= 1;
                action = Some(r.action);
                break;
            }
        }
        self.rules.retain(|r| r.remaining > 0);
        let copies = if let Some(a) = action {
            match a {
                RuleAction::Drop => Vec::new(),
                RuleAction::Delay(d) => vec![d],
                RuleAction::Duplicate(d) => vec![Duration::ZERO, d],
            }
        } else if let Some(f) = self.impair.as_mut() {
            f(from, &packet)
        } else {
            vec![Duration::ZERO]
        };
        for extra in &copies {
            self.seq += 1;
            let at = self.now + self.delay + *extra;
            self.in_flight
                .insert((at, self.seq), (from.other(), d.clone()));
        }
        if self.log_packets {
            self.sent.push(Sent {
                at: self.now,
                from,
                packet,
                dropped: copies.is_empty(),
            });
        }
    }

    /// The next arrival or timer deadline.
    pub fn next_event(&self) -> Option<Instant> {
        let a = self.in_flight.keys().next().map(|k| k.0);
        [a, self.client.poll_timeout(), self.server.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Advance virtual time to `t`, processing every arrival and timer on
    /// the way in time order.
    pub fn drive_until(&mut self, t: Instant) {
        loop {
            self.flush();
            let Some(next) = self.next_event() else { break };
            if next > t {
                break;
            }
            self.now = self.now.max(next);
            let now = self.now;
            while let Some((&(at, seq), _)) = self.in_flight.iter().next() {
                if at > now {
                    break;
                }
                if let Some((to, d)) = self.in_flight.remove(&(at, seq)) {
                    self.assoc(to).handle_datagram(now, d);
                    // The drive contract: drain after every input.
                    self.flush();
                }
            }
            for side in [Side::Client, Side::Server] {
                if self.assoc(side).poll_timeout().is_some_and(|x| x <= now) {
                    self.assoc(side).handle_timeout(now);
                }
            }
        }
        self.now = self.now.max(t);
        self.flush();
    }

    /// Drive for `d` of virtual time.
    pub fn drive_for(&mut self, d: Duration) {
        let t = self.now + d;
        self.drive_until(t);
    }

    /// Drive until nothing is in flight and no timer is due within `horizon`
    /// beyond the last event (the heartbeat keeps associations alive forever).
    pub fn drive_until_quiet(&mut self, horizon: Duration, limit: Instant) {
        loop {
            self.flush();
            if self.now >= limit {
                break;
            }
            if self.in_flight.is_empty()
                && self.next_event().map_or(true, |t| t > self.now + horizon)
                && self.client.is_idle()
                && self.server.is_idle()
            {
                break;
            }
            let next = self.next_event().unwrap_or(limit).min(limit);
            self.drive_until(next);
        }
    }

    /// Packets sent by `from` (after `since`).
    pub fn sent_by(&self, from: Side, since: Instant) -> Vec<&Sent> {
        self.sent
            .iter()
            .filter(|s| s.from == from && s.at >= since)
            .collect()
    }
}
