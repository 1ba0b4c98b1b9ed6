//! A server `Endpoint` and single-association clients on a virtual
//! network with a fixed 10 ms delay (shared by the endpoint and attack
//! tests).
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::net::SocketAddr;

use thinstream_base::drive::{AppEvent, Transport};
use thinstream_base::{Datagram, Duration, Instant, Seed};
use thinstream_proto::wire::Packet;
use thinstream_proto::{Association, AssociationId, Config, Endpoint};

pub fn server_addr() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 9899))
}
pub fn client_addr(i: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 1, i], 9899))
}

pub struct Net {
    pub now: Instant,
    pub queue: BTreeMap<(Instant, u64), Datagram>,
    pub seq: u64,
    pub server: Endpoint,
    pub clients: Vec<Association>,
    pub server_events: Vec<(AssociationId, AppEvent)>,
    pub client_events: Vec<Vec<AppEvent>>,
}

impl Net {
    pub fn new(n: u8) -> Net {
        Net::with_config(n, Config::default().with_trace())
    }

    pub fn with_config(n: u8, cfg: Config) -> Net {
        let server = Endpoint::new(cfg.clone(), server_addr(), Seed(1), true);
        let clients = (0..n)
            .map(|i| {
                Association::connect(
                    cfg.clone(),
                    Instant::ZERO,
                    client_addr(i),
                    server_addr(),
                    Seed(100 + u64::from(i)),
                )
            })
            .collect();
        Net {
            now: Instant::ZERO,
            queue: BTreeMap::new(),
            seq: 0,
            server,
            clients,
            server_events: Vec::new(),
            client_events: vec![Vec::new(); usize::from(n)],
        }
    }

    pub fn flush(&mut self) {
        let at = self.now + Duration::from_millis(10);
        while let Some(d) = self.server.poll_transmit(self.now) {
            assert_eq!(d.src, server_addr());
            self.seq += 1;
            self.queue.insert((at, self.seq), d);
        }
        while let Some(e) = self.server.poll_event() {
            self.server_events.push(e);
        }
        while self.server.poll_trace().is_some() {}
        for (i, c) in self.clients.iter_mut().enumerate() {
            while let Some(d) = c.poll_transmit(self.now) {
                self.seq += 1;
                self.queue.insert((at, self.seq), d);
            }
            while let Some(e) = c.poll_app() {
                self.client_events[i].push(e);
            }
        }
    }

    pub fn drive_for(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            self.flush();
            let next = [
                self.queue.keys().next().map(|k| k.0),
                self.server.poll_timeout(),
                self.clients.iter().filter_map(|c| c.poll_timeout()).min(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next.filter(|t| *t <= end) else {
                break;
            };
            self.now = self.now.max(next);
            while let Some((&k, _)) = self.queue.iter().next() {
                if k.0 > self.now {
                    break;
                }
                let d = self.queue.remove(&k).unwrap();
                if d.dst == server_addr() {
                    self.server.handle_datagram(self.now, d);
                } else if let Some(c) = self.clients.iter_mut().find(|c| c.local_addr() == d.dst) {
                    c.handle_datagram(self.now, d);
                }
            }
            self.server.handle_timeout(self.now);
            for c in &mut self.clients {
                if c.poll_timeout().is_some_and(|t| t <= self.now) {
                    c.handle_timeout(self.now);
                }
            }
        }
        self.now = end;
        self.flush();
    }
}

/// A packet from `src` to the server, encoded.
pub fn crafted(src: SocketAddr, p: &Packet) -> Datagram {
    Datagram {
        src,
        dst: server_addr(),
        payload: p.to_bytes(),
    }
}
