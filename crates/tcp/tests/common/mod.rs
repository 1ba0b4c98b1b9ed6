//! A small virtual-time network for the TCP model's tests: pairs of
//! endpoints, a forward link (clients → servers) that may be rate-limited
//! with a drop-tail queue and is shared by all pairs, a reverse link,
//! scripted drops, and random impairments (loss, duplication, reordering).

#![allow(dead_code, unreachable_pub)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use thinstream_base::drive::{AppEvent, Outgoing, Transport};
use thinstream_base::trace::{Record, SentData, TxReason};
use thinstream_base::{Bitrate, Datagram, Duration, Instant, Rng};
use thinstream_tcp::segment::{wire_bytes, Segment};
use thinstream_tcp::{TcpConfig, TcpConnection};

/// What a drop rule sees of a packet.
pub struct Pkt<'a> {
    /// Sending endpoint index (even = client, odd = server).
    pub from: usize,
    /// Index of this packet among all packets sent by `from` (0-based).
    pub index: u64,
    /// Index among `from`'s packets that carry data, if it carries data.
    pub data_index: Option<u64>,
    /// Data units carried, if any.
    pub units: Option<(u64, u64)>,
    pub seg: &'a Segment,
    pub time: Instant,
}

/// Decides whether a packet is dropped.
pub type DropRule = Box<dyn FnMut(&Pkt<'_>) -> bool>;

pub type Dropped = (usize, Instant, Option<(u64, u64)>);

pub struct Link {
    pub delay: Duration,
    pub rate: Option<Bitrate>,
    pub queue_bytes: usize,
    busy_until: Instant,
    /// (departure time, bytes) of packets queued or in service.
    backlog: Vec<(Instant, usize)>,
    pub dropped_by_queue: u64,
}

impl Link {
    pub fn new(delay: Duration) -> Link {
        Link {
            delay,
            rate: None,
            queue_bytes: 0,
            busy_until: Instant::ZERO,
            backlog: Vec::new(),
            dropped_by_queue: 0,
        }
    }

    /// Arrival time at the far end, or `None` if the drop-tail queue is full.
    fn admit(&mut self, now: Instant, bytes: usize) -> Option<Instant> {
        let Some(rate) = self.rate else {
            return Some(now + self.delay);
        };
        self.backlog.retain(|(t, _)| *t > now);
        let queued: usize = self.backlog.iter().map(|(_, b)| b).sum();
        if queued + bytes > self.queue_bytes {
            self.dropped_by_queue += 1;
            return None;
        }
        let start = self.busy_until.max(now);
        let done = start + rate.transmission_time(bytes);
        self.busy_until = done;
        self.backlog.push((done, bytes));
        Some(done + self.delay)
    }
}

pub struct Impair {
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub reorder_max: Duration,
    pub rng: Rng,
}

pub struct Net {
    pub now: Instant,
    pub eps: Vec<TcpConnection>,
    pub addrs: Vec<SocketAddr>,
    pub isns: Vec<u32>,
    pub fwd: Link,
    pub rev: Link,
    queue: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    parked: Vec<Option<Datagram>>,
    order: u64,
    pub drop_rule: Option<DropRule>,
    pub impair: Option<Impair>,
    pub traces: Vec<Vec<Record>>,
    pub apps: Vec<Vec<AppEvent>>,
    pub rx: Vec<Vec<u8>>,
    pub sent_count: Vec<u64>,
    pub data_count: Vec<u64>,
    /// (sender, time, units) of every dropped packet.
    pub dropped: Vec<Dropped>,
}

impl Net {
    /// `flows` client/server pairs; the clients connect at time 0.
    pub fn new(client: &TcpConfig, server: &TcpConfig, flows: usize, one_way: Duration) -> Net {
        let mut eps = Vec::new();
        let mut addrs = Vec::new();
        let mut isns = Vec::new();
        for i in 0..flows {
            let ca: SocketAddr = format!("10.0.0.1:{}", 40000 + i).parse().unwrap();
            let sa: SocketAddr = format!("10.0.1.1:{}", 5000 + i).parse().unwrap();
            let mut cc = client.clone();
            cc.trace = true;
            let mut sc = server.clone();
            sc.trace = true;
            // ISNs near the wrap point exercise sequence arithmetic.
            let ci = 0xFFFF_FF00u32.wrapping_add(1000 * i as u32);
            let si = 0x7FFF_FFF0u32.wrapping_add(77 * i as u32);
            eps.push(TcpConnection::connect(cc, ca, sa, ci, Instant::ZERO).unwrap());
            eps.push(TcpConnection::listen(sc, sa, si).unwrap());
            addrs.push(ca);
            addrs.push(sa);
            isns.push(ci);
            isns.push(si);
        }
        let n = eps.len();
        let mut net = Net {
            now: Instant::ZERO,
            eps,
            addrs,
            isns,
            fwd: Link::new(one_way),
            rev: Link::new(one_way),
            queue: BinaryHeap::new(),
            parked: Vec::new(),
            order: 0,
            drop_rule: None,
            impair: None,
            traces: vec![Vec::new(); n],
            apps: vec![Vec::new(); n],
            rx: vec![Vec::new(); n],
            sent_count: vec![0; n],
            data_count: vec![0; n],
            dropped: Vec::new(),
        };
        net.drain();
        net
    }

    pub fn pair(client: &TcpConfig, server: &TcpConfig, one_way: Duration) -> Net {
        Net::new(client, server, 1, one_way)
    }

    fn index_of(&self, addr: SocketAddr) -> Option<usize> {
        self.addrs.iter().position(|a| *a == addr)
    }

    fn schedule(&mut self, at: Instant, to: usize, d: Datagram) {
        self.parked.push(Some(d));
        self.queue
            .push(Reverse((at, self.order, self.parked.len() - 1)));
        self.order += 1;
        let _ = to;
    }

    fn drain(&mut self) {
        loop {
            let mut progress = false;
            for i in 0..self.eps.len() {
                while let Some(d) = self.eps[i].poll_transmit(self.now) {
                    progress = true;
                    self.route(i, d);
                }
                while let Some(e) = self.eps[i].poll_app() {
                    if let AppEvent::Received { payload, .. } = &e {
                        self.rx[i].extend_from_slice(payload);
                    }
                    self.apps[i].push(e);
                }
                while let Some(r) = self.eps[i].poll_trace() {
                    self.traces[i].push(r);
                }
            }
            if !progress {
                break;
            }
        }
    }

    fn route(&mut self, from: usize, d: Datagram) {
        let index = self.sent_count[from];
        self.sent_count[from] += 1;
        let seg = Segment::decode(&d.payload, d.src, d.dst).expect("model emits valid segments");
        let data_index = if seg.payload.is_empty() {
            None
        } else {
            self.data_count[from] += 1;
            Some(self.data_count[from] - 1)
        };
        let units = (!seg.payload.is_empty()).then(|| {
            let u = u64::from(seg.seq.wrapping_sub(self.isns[from].wrapping_add(1)));
            (u, u + seg.payload.len() as u64)
        });
        let pkt = Pkt {
            from,
            index,
            data_index,
            units,
            seg: &seg,
            time: self.now,
        };
        if let Some(rule) = self.drop_rule.as_mut() {
            if rule(&pkt) {
                self.dropped.push((from, self.now, units));
                return;
            }
        }
        let Some(to) = self.index_of(d.dst) else {
            return;
        };
        let bytes = wire_bytes(d.payload.len());
        let link = if from & 1 == 0 {
            &mut self.fwd
        } else {
            &mut self.rev
        };
        let Some(mut at) = link.admit(self.now, bytes) else {
            self.dropped.push((from, self.now, units));
            return;
        };
        let mut copies = 1;
        if let Some(imp) = self.impair.as_mut() {
            if imp.rng.chance(imp.loss) {
                self.dropped.push((from, self.now, units));
                return;
            }
            if imp.rng.chance(imp.reorder) {
                let extra = imp.rng.below(imp.reorder_max.as_nanos().max(1));
                at += Duration::from_nanos(extra);
            }
            if imp.rng.chance(imp.duplicate) {
                copies = 2;
            }
        }
        for k in 0..copies {
            self.schedule(at + Duration::from_micros(k * 300), to, d.clone());
        }
    }

    fn next_event(&self) -> Option<Instant> {
        let q = self.queue.peek().map(|Reverse((t, _, _))| *t);
        self.eps
            .iter()
            .filter_map(|e| e.poll_timeout())
            .chain(q)
            .min()
    }

    /// Endpoint `ep` writes `count` 100-byte messages (message i filled
    /// with byte i), one every `gap` from `start`.
    pub fn send_every(&mut self, ep: usize, start: Instant, gap: Duration, count: u64) {
        for i in 0..count {
            self.run_until(start + gap * i);
            self.send(ep, &[i as u8; 100]);
        }
    }

    /// Runs events up to and including `t`, then sets the clock to `t`.
    pub fn run_until(&mut self, t: Instant) {
        loop {
            self.drain();
            let Some(next) = self.next_event() else {
                break;
            };
            if next > t {
                break;
            }
            self.now = self.now.max(next);
            if let Some(Reverse((at, _, _))) = self.queue.peek().copied() {
                if at <= self.now {
                    let Reverse((_, _, slot)) = self.queue.pop().unwrap();
                    let d = self.parked[slot].take().unwrap();
                    if let Some(to) = self.index_of(d.dst) {
                        self.eps[to].handle_datagram(self.now, d);
                    }
                    continue;
                }
            }
            for i in 0..self.eps.len() {
                if self.eps[i].poll_timeout().is_some_and(|x| x <= self.now) {
                    self.eps[i].handle_timeout(self.now);
                }
            }
        }
        self.now = self.now.max(t);
        self.drain();
    }

    pub fn run_for(&mut self, d: Duration) {
        let t = self.now + d;
        self.run_until(t);
    }

    pub fn send(&mut self, ep: usize, bytes: &[u8]) -> u64 {
        let id = self.eps[ep]
            .send(
                self.now,
                Outgoing {
                    stream: 0,
                    unordered: false,
                    payload: bytes,
                },
            )
            .expect("send accepted");
        self.drain();
        id
    }

    pub fn close(&mut self, ep: usize) {
        let now = self.now;
        self.eps[ep].close(now);
        self.drain();
    }

    /// Every data piece endpoint `ep` sent, with its time.
    pub fn pieces(&self, ep: usize) -> Vec<(Instant, SentData)> {
        let mut out = Vec::new();
        for r in &self.traces[ep] {
            if let Record::PacketSent { time, data, .. } = r {
                for d in data {
                    out.push((*time, *d));
                }
            }
        }
        out
    }

    /// Times at which `ep` sent a piece containing `unit` with one of `reasons`.
    pub fn sends_of(&self, ep: usize, unit: u64) -> Vec<(Instant, TxReason)> {
        self.pieces(ep)
            .into_iter()
            .filter(|(_, d)| d.units.contains(unit))
            .map(|(t, d)| (t, d.reason))
            .collect()
    }

    /// Time at which the receiver `ep` delivered `unit` to the application.
    pub fn delivered_at(&self, ep: usize, unit: u64) -> Option<Instant> {
        self.traces[ep].iter().find_map(|r| match r {
            Record::Delivered { time, units, .. } if units.contains(unit) => Some(*time),
            _ => None,
        })
    }
}

pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

pub fn at(v: u64) -> Instant {
    Instant::from_millis(v)
}
