//! The discrete-event engine: one queue of events ordered by (virtual time,
//! insertion sequence), endpoints driven through the `base::drive` contract,
//! links from the `link` crate, routing by destination address.
//!
//! Events: a datagram leaving a link (it then reaches a host, which hands it
//! to the endpoint with that address, or a router, which puts it on the next
//! link); a datagram between two endpoints of the same host; an endpoint's
//! transport timer; an endpoint's application timer (a workload message
//! falling due); the scenario stop.

use crate::app::{App, AppCtx};
use crate::pcap::PcapWriter;
use crate::prefetch;
use crate::queue::{EventQueue, Handle};
use crate::result::{EndpointResult, EndpointStats, LinkResult, RunHeader, RunResult, StopReason};
use crate::topology::{self, endpoint_addr, Node, Topology, TopologyError};
use crate::{EndpointId, FlowId, LinkId, Side};
use std::fmt;
use std::net::SocketAddr;
use thinstream_base::drive::Transport;
use thinstream_base::trace::Record;
use thinstream_base::{Datagram, Duration, Instant, Seed};
use thinstream_link::{DropPredicate, Link};

/// What a transport factory is told about the endpoint it builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointSetup {
    pub endpoint: EndpointId,
    pub flow: FlowId,
    pub side: Side,
    pub local: SocketAddr,
    pub peer: SocketAddr,
    /// Derived from the master seed with the label `flow{i}.a` / `flow{i}.b`.
    pub seed: Seed,
    /// When the flow starts: the factory is called, and the app started, at
    /// this virtual time (pass it as `now` to a connecting transport).
    pub start: Instant,
}

/// Builds an endpoint's transport once addresses and seed are known.
pub type TransportFactory = Box<dyn FnOnce(&EndpointSetup) -> Box<dyn Transport>>;

/// One endpoint of a flow: its transport and its application.
pub struct EndpointSpec {
    pub transport: TransportFactory,
    pub app: Box<dyn App>,
}

impl EndpointSpec {
    pub fn new<F, A>(transport: F, app: A) -> Self
    where
        F: FnOnce(&EndpointSetup) -> Box<dyn Transport> + 'static,
        A: App + 'static,
    {
        EndpointSpec {
            transport: Box::new(transport),
            app: Box::new(app),
        }
    }
}

impl fmt::Debug for EndpointSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EndpointSpec")
    }
}

/// One connection: endpoint A (the initiator, left side) and endpoint B.
#[derive(Debug)]
pub struct FlowSpec {
    pub a: EndpointSpec,
    pub b: EndpointSpec,
    /// UDP port of both endpoints (default 9899, RFC 6951 §5.1).
    pub port: u16,
    /// When both endpoints start (default: time zero). Before that the
    /// endpoints do not exist: datagrams reaching them are dropped and counted.
    pub start: Instant,
}

impl FlowSpec {
    pub fn new(a: EndpointSpec, b: EndpointSpec) -> Self {
        FlowSpec {
            a,
            b,
            port: crate::pcap::SCTP_UDP_PORT,
            start: Instant::ZERO,
        }
    }
    /// Starts the flow at `start` instead of time zero.
    pub fn starting_at(mut self, start: Instant) -> Self {
        self.start = start;
        self
    }
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }
}

/// Writes one datagram to a capture: in UDP, or straight after the IP
/// header when the transport carries its own header (`ip_protocol`).
fn capture(
    w: &mut PcapWriter,
    now: Instant,
    datagram: &Datagram,
    ip_protocol: Option<u8>,
) -> Result<(), crate::pcap::PcapError> {
    match ip_protocol {
        Some(p) => w.write_ip(now, datagram, p),
        None => w.write(now, datagram),
    }
}

/// Where a pcap capture sees packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapturePoint {
    /// When an endpoint emits a datagram, before any link (sender side).
    Send,
    /// When a datagram is handed to its destination endpoint.
    Receive,
}

#[derive(Debug)]
enum Event {
    /// A pause of [`Simulation::run_until_pausing`] (not counted as an event).
    Pause {
        generation: u64,
    },
    LinkExit {
        link: u32,
        datagram: QueuedDatagram,
    },
    Local {
        endpoint: u32,
        datagram: QueuedDatagram,
    },
    TransportTimer {
        endpoint: EndpointId,
        generation: u64,
    },
    AppTimer {
        endpoint: EndpointId,
        generation: u64,
    },
    Stop {
        generation: u64,
    },
    Start {
        endpoint: EndpointId,
    },
}

// An event fills at most one of the queue's 64-byte slots.
const _: () = assert!(std::mem::size_of::<Option<Event>>() <= 64);

/// A datagram waiting in the event queue, addresses packed: an IPv4
/// socket address in 6 bytes instead of the 32 of `SocketAddr`, so that an
/// event fits one 64-byte slot (a popped event is usually no longer
/// cached, and its slot is read whole). Converts back exactly.
#[derive(Debug)]
struct QueuedDatagram {
    src: PackedAddr,
    dst: PackedAddr,
    payload: Vec<u8>,
}

#[derive(Debug)]
enum PackedAddr {
    V4 { ip: u32, port: u16 },
    V6(Box<std::net::SocketAddrV6>),
}

impl From<SocketAddr> for PackedAddr {
    fn from(addr: SocketAddr) -> Self {
        match addr {
            SocketAddr::V4(a) => PackedAddr::V4 {
                ip: a.ip().to_bits(),
                port: a.port(),
            },
            SocketAddr::V6(a) => PackedAddr::V6(Box::new(a)),
        }
    }
}

impl From<PackedAddr> for SocketAddr {
    fn from(addr: PackedAddr) -> Self {
        match addr {
            PackedAddr::V4 { ip, port } => {
                SocketAddr::V4(std::net::SocketAddrV4::new(ip.into(), port))
            }
            PackedAddr::V6(a) => SocketAddr::V6(*a),
        }
    }
}

impl From<Datagram> for QueuedDatagram {
    fn from(d: Datagram) -> Self {
        QueuedDatagram {
            src: d.src.into(),
            dst: d.dst.into(),
            payload: d.payload,
        }
    }
}

impl From<QueuedDatagram> for Datagram {
    fn from(d: QueuedDatagram) -> Self {
        Datagram {
            src: d.src.into(),
            dst: d.dst.into(),
            payload: d.payload,
        }
    }
}

/// An endpoint or link index as carried in an event (the builder's limits
/// keep them far below 2^32).
fn slot_index(i: usize) -> u32 {
    u32::try_from(i).expect("index fits 32 bits")
}

/// What every event of an endpoint touches. The parts read only when the
/// endpoint starts or the run ends live apart in [`EndpointSetupState`], so
/// that with thousands of endpoints an event pulls fewer cache lines
/// (aligned to a line: four lines, not five at an unlucky offset).
#[repr(align(64))]
struct Endpoint {
    node: usize,
    /// The transport was built (the flow has started).
    started: bool,
    transport: Box<dyn Transport>,
    app: Box<dyn App>,
    /// The transport deadline currently scheduled, its generation and its
    /// event (cancelled when the deadline changes).
    timer_at: Option<Instant>,
    timer_generation: u64,
    timer_event: Option<Handle>,
    /// What the app asked for, and what is scheduled.
    app_timer: Option<Instant>,
    app_timer_at: Option<Instant>,
    app_timer_generation: u64,
    app_timer_event: Option<Handle>,
    /// Consecutive timer firings at one instant (livelock guard).
    same_instant_fires: (Instant, u32),
    records: Vec<Record>,
    /// Which trace records are kept ([`Simulation::keep_records`]).
    keep: RecordFilter,
    stats: EndpointStats,
}

/// The parts of an endpoint that the run does not touch per event.
struct EndpointSetupState {
    flow: FlowId,
    side: Side,
    addr: SocketAddr,
    peer: SocketAddr,
    seed: Seed,
    /// Until the flow starts: the factory and what it will be told.
    pending: Option<(TransportFactory, EndpointSetup)>,
    start: Instant,
}

/// Which of an endpoint's trace records the simulation keeps: all of them
/// by default, none or those a predicate accepts for a driver that reads
/// only some (see [`Simulation::keep_records`]).
#[derive(Clone, Copy, Debug, Default)]
pub enum RecordFilter {
    #[default]
    All,
    None,
    Only(fn(&Record) -> bool),
}

/// A link, aligned to a cache line: the link's hot fields, which come
/// first, fill its first two lines. The node it leads to is in
/// `Simulation::link_to`.
#[repr(C, align(64))]
struct SimLink {
    link: Link,
}

/// Where an endpoint's transport and app live (address and size in bytes;
/// zero until the endpoint starts): read to prefetch them, never
/// dereferenced.
#[derive(Clone, Copy, Default)]
struct Warm {
    transport: usize,
    transport_len: u32,
    app: usize,
    app_len: u32,
}

/// What names a link; read only by the API and at the end of the run.
struct LinkName {
    label: String,
    seed: Seed,
}

/// Endpoints from which the run prefetches each event's state
/// ([`Simulation::prefetch_next`]). With fewer, every flow's state stays
/// in the caches between its events and the hints only cost instructions
/// (about 4 % more CPU per message with 100 thin streams and 20 greedy
/// flows, 240 endpoints; about 20 % less with 2000 streams: docs/memory.md,
/// "Cost per flow").
const PREFETCH_MIN_ENDPOINTS: usize = 512;

/// Rounds of the drain loop for one input before the engine declares a
/// livelock (each round past the first must follow an app event, so a
/// healthy transport and app need a handful).
const MAX_DRIVE_ROUNDS: u32 = 100_000;
/// Timer firings at one instant for one endpoint before declaring a livelock
/// (a transport whose deadline never moves past `now`).
const MAX_SAME_INSTANT_FIRES: u32 = 10_000;

/// A simulation under construction or in progress.
pub struct Simulation {
    header: RunHeader,
    now: Instant,
    started: bool,
    queue: EventQueue<Event>,
    endpoints: Vec<Endpoint>,
    /// Indexed like `endpoints`: where its transport and app live, for
    /// the prefetch of the next event's state.
    warm: Vec<Warm>,
    /// Indexed like `endpoints`.
    setups: Vec<EndpointSetupState>,
    nodes: Vec<Node>,
    links: Vec<SimLink>,
    /// Indexed like `links`: the node each leads to (apart from the links,
    /// so that it stays cached while they do not).
    link_to: Vec<u32>,
    /// Indexed like `links`.
    link_names: Vec<LinkName>,
    /// Reused buffer: drained transmits.
    tx_buf: Vec<Datagram>,
    capture: Option<(CapturePoint, PcapWriter)>,
    pcap_skipped: u64,
    events: u64,
    stale_events: u64,
    unroutable: u64,
    event_limit: u64,
    stop_generation: u64,
    fault: Option<String>,
    /// The last `run_loop` ended at a pause of `run_until_pausing`.
    paused: bool,
    /// Whether to prefetch: only with [`PREFETCH_MIN_ENDPOINTS`] or more.
    prefetch: bool,
}

impl fmt::Debug for Simulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulation")
            .field("now", &self.now)
            .field("events", &self.events)
            .field("pending", &self.queue.len())
            .finish()
    }
}

impl Simulation {
    /// Builds the network and every endpoint. Seeds: links use their label
    /// (`link.forward`, `link.bottleneck.forward`, `link.flow3.a.up`, ...),
    /// transports `flow{i}.a` / `flow{i}.b`, all derived from `master`.
    pub fn new(
        master: Seed,
        topology: &Topology,
        flows: Vec<FlowSpec>,
    ) -> Result<Simulation, TopologyError> {
        let addrs: Vec<(SocketAddr, SocketAddr)> = flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                (
                    endpoint_addr(i, Side::A, f.port),
                    endpoint_addr(i, Side::B, f.port),
                )
            })
            .collect();
        let plan = topology::plan(topology, &addrs, master)?;
        let mut header = RunHeader {
            master,
            seeds: Vec::new(),
            endpoints: Vec::new(),
            links: Vec::new(),
        };
        let mut endpoints = Vec::with_capacity(flows.len() * 2);
        let mut setups = Vec::with_capacity(flows.len() * 2);
        for (i, flow) in flows.into_iter().enumerate() {
            let (a_addr, b_addr) = addrs[i];
            let flow_start = flow.start;
            for (side, spec, local, peer) in [
                (Side::A, flow.a, a_addr, b_addr),
                (Side::B, flow.b, b_addr, a_addr),
            ] {
                let id = topology::endpoint_id(FlowId(i), side);
                let label = format!("flow{i}.{}", side.label());
                let seed = master.derive(&label);
                header.seeds.push((label.clone(), seed));
                header.endpoints.push((label, local));
                let setup = EndpointSetup {
                    endpoint: id,
                    flow: FlowId(i),
                    side,
                    local,
                    peer,
                    seed,
                    start: flow_start,
                };
                debug_assert_eq!(endpoints.len(), id.0);
                setups.push(EndpointSetupState {
                    flow: FlowId(i),
                    side,
                    addr: local,
                    peer,
                    seed,
                    pending: Some((spec.transport, setup)),
                    start: flow_start,
                });
                endpoints.push(Endpoint {
                    node: plan.endpoint_node[id.0],
                    started: false,
                    transport: Box::new(NotStarted),
                    app: spec.app,
                    timer_at: None,
                    timer_generation: 0,
                    timer_event: None,
                    app_timer: None,
                    app_timer_at: None,
                    app_timer_generation: 0,
                    app_timer_event: None,
                    same_instant_fires: (Instant::ZERO, 0),
                    records: Vec::new(),
                    keep: RecordFilter::All,
                    stats: EndpointStats::default(),
                });
            }
        }
        let n_endpoints = endpoints.len();
        let mut links = Vec::with_capacity(plan.links.len());
        let mut link_to = Vec::with_capacity(plan.links.len());
        let mut link_names = Vec::with_capacity(plan.links.len());
        for l in plan.links {
            header.seeds.push((l.label.clone(), l.seed));
            header.links.push((l.label.clone(), l.config.clone()));
            let link = Link::new(&l.config, l.seed);
            links.push(SimLink { link });
            link_to.push(slot_index(l.to));
            link_names.push(LinkName {
                label: l.label,
                seed: l.seed,
            });
        }
        Ok(Simulation {
            header,
            now: Instant::ZERO,
            started: false,
            queue: EventQueue::new(),
            warm: vec![Warm::default(); n_endpoints],
            endpoints,
            setups,
            nodes: plan.nodes,
            link_to,
            links,
            link_names,
            tx_buf: Vec::new(),
            capture: None,
            pcap_skipped: 0,
            events: 0,
            stale_events: 0,
            unroutable: 0,
            event_limit: u64::MAX,
            stop_generation: 0,
            fault: None,
            paused: false,
            prefetch: n_endpoints >= PREFETCH_MIN_ENDPOINTS,
        })
    }

    /// The master seed and every derived parameter; print it before running.
    pub fn header(&self) -> &RunHeader {
        &self.header
    }

    /// Records every datagram at `point` into a pcap file (in memory,
    /// returned in the result).
    pub fn capture_pcap(&mut self, point: CapturePoint) {
        self.capture = Some((point, PcapWriter::new()));
    }

    /// Stops the run after this many processed events (a guard for tests
    /// and sweeps; default unlimited).
    pub fn set_event_limit(&mut self, limit: u64) {
        self.event_limit = limit;
    }

    /// Installs (or with `None` removes) a drop predicate on the link
    /// `label` (e.g. "drop the packet carrying TSN t"); see
    /// `link::Link::set_drop_predicate`. Returns false if no link has that
    /// label. May be called between `run_until` calls.
    pub fn set_drop_predicate(&mut self, label: &str, predicate: Option<DropPredicate>) -> bool {
        match self.link_names.iter().position(|l| l.label == label) {
            Some(i) => {
                self.links[i].link.set_drop_predicate(predicate);
                true
            }
            None => false,
        }
    }

    /// The labels of every link, in [`LinkId`] order.
    pub fn link_labels(&self) -> impl Iterator<Item = &str> {
        self.link_names.iter().map(|l| l.label.as_str())
    }

    /// Endpoints of the run (two per flow).
    pub fn endpoint_count(&self) -> usize {
        self.endpoints.len()
    }

    /// The id of endpoint `side` of `flow`.
    pub fn endpoint_id(&self, flow: FlowId, side: Side) -> EndpointId {
        topology::endpoint_id(flow, side)
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    /// Events processed so far (stale timer events excluded).
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The trace records collected so far from one endpoint.
    pub fn records(&self, endpoint: EndpointId) -> &[Record] {
        &self.endpoints[endpoint.0].records
    }

    /// Hands out and forgets the trace records collected so far from one
    /// endpoint: a driver that reads them as the run goes (between
    /// [`Simulation::run_until`] calls) keeps memory independent of the
    /// run's length. The records taken are not in the final [`RunResult`].
    pub fn take_records(&mut self, endpoint: EndpointId) -> Vec<Record> {
        // The next chunk is likely about as long: no regrowing from empty,
        // and an eighth more room, so that a chunk a little longer than the
        // last does not double its vector (copying every record, cold with
        // many flows, and holding twice the room it needs).
        let records = &mut self.endpoints[endpoint.0].records;
        let next = Vec::with_capacity((records.len() + records.len() / 8).min(4096));
        std::mem::replace(records, next)
    }

    /// Which of `endpoint`'s trace records to keep from now on (the
    /// transport still makes every one; the others are dropped as they
    /// come): a driver that reads only some keeps memory to what it reads.
    pub fn keep_records(&mut self, endpoint: EndpointId, keep: RecordFilter) {
        self.endpoints[endpoint.0].keep = keep;
    }

    /// [`App::keep_history`] of one endpoint's app.
    pub fn keep_app_history(&mut self, endpoint: EndpointId, keep: bool) {
        self.endpoints[endpoint.0].app.keep_history(keep);
    }

    /// [`App::keep_digests`] of one endpoint's app.
    pub fn keep_app_digests(&mut self, endpoint: EndpointId, keep: bool) {
        self.endpoints[endpoint.0].app.keep_digests(keep);
    }

    /// [`App::drain_history`] of one endpoint's app.
    pub fn drain_app_history(&mut self, endpoint: EndpointId) -> crate::app::AppHistory {
        self.endpoints[endpoint.0].app.drain_history()
    }

    /// The transport of one endpoint, for inspection between runs.
    pub fn transport(&self, endpoint: EndpointId) -> &dyn Transport {
        &*self.endpoints[endpoint.0].transport
    }

    /// Runs until virtual time `stop` (events due at `stop` that were
    /// scheduled before this call still run), until nothing is left to do,
    /// or until the event limit.
    pub fn run_until(&mut self, stop: Instant) -> StopReason {
        self.stop_generation += 1;
        let generation = self.stop_generation;
        self.queue
            .push(stop.max(self.now), Event::Stop { generation });
        self.run_loop()
    }

    /// [`Simulation::run_until`] that pauses every `every` of virtual time
    /// (and a last time at `stop`) to call `at_pause`, which may read and
    /// drain what was collected so far ([`Simulation::take_records`],
    /// [`Simulation::drain_app_history`]). The run itself is the one
    /// `run_until(stop)` does, event for event: a pause is not an event
    /// and changes no order.
    pub fn run_until_pausing(
        &mut self,
        stop: Instant,
        every: Duration,
        mut at_pause: impl FnMut(&mut Simulation),
    ) -> StopReason {
        self.stop_generation += 1;
        let generation = self.stop_generation;
        let stop = stop.max(self.now);
        self.queue.push(stop, Event::Stop { generation });
        let every = every.max(Duration::from_nanos(1));
        loop {
            let next = self.now + every;
            if next < stop {
                self.queue.push(next, Event::Pause { generation });
            }
            self.paused = false;
            let reason = self.run_loop();
            at_pause(self);
            if !self.paused {
                return reason;
            }
        }
    }

    /// Runs until no event is pending (or the event limit).
    pub fn run_until_idle(&mut self) -> StopReason {
        self.stop_generation += 1;
        self.run_loop()
    }

    /// Runs until `stop` and returns everything recorded.
    pub fn run(mut self, stop: Instant) -> RunResult {
        let reason = self.run_until(stop);
        self.finish(reason)
    }

    fn start(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        let now = self.now;
        for i in 0..self.endpoints.len() {
            let start = self.setups[i].start;
            if start <= now {
                self.start_endpoint(EndpointId(i), now);
            } else {
                self.queue.push(
                    start,
                    Event::Start {
                        endpoint: EndpointId(i),
                    },
                );
            }
        }
    }

    /// Builds the endpoint's transport, starts its app and drives it once
    /// (a connecting transport emits its first packet here).
    fn start_endpoint(&mut self, id: EndpointId, now: Instant) {
        let Some((factory, setup)) = self.setups[id.0].pending.take() else {
            return;
        };
        let ep = &mut self.endpoints[id.0];
        ep.transport = factory(&setup);
        ep.started = true;
        let transport: &dyn Transport = &*ep.transport;
        let app: &dyn App = &*ep.app;
        self.warm[id.0] = Warm {
            transport: (transport as *const dyn Transport).cast::<u8>() as usize,
            transport_len: u32::try_from(std::mem::size_of_val(transport)).unwrap_or(u32::MAX),
            app: (app as *const dyn App).cast::<u8>() as usize,
            app_len: u32::try_from(std::mem::size_of_val(app)).unwrap_or(u32::MAX),
        };
        let mut ctx = AppCtx::new(now, id, &mut *ep.transport, &mut ep.app_timer);
        ep.app.on_start(&mut ctx);
        self.drive(id, now);
    }

    fn run_loop(&mut self) -> StopReason {
        self.start();
        if let Some(f) = &self.fault {
            return StopReason::Fault(f.clone());
        }
        while self.events < self.event_limit {
            let Some((at, event)) = self.queue.pop() else {
                return StopReason::Idle;
            };
            if self.prefetch {
                self.prefetch_next();
            }
            debug_assert!(at >= self.now, "event at {at} before now {}", self.now);
            self.now = at;
            match event {
                Event::Stop { generation } => {
                    if generation == self.stop_generation {
                        return StopReason::StopTime;
                    }
                    self.stale_events += 1;
                    continue;
                }
                Event::Pause { generation } => {
                    if generation == self.stop_generation {
                        self.paused = true;
                        return StopReason::StopTime;
                    }
                    self.stale_events += 1;
                    continue;
                }
                Event::Start { endpoint } => self.start_endpoint(endpoint, at),
                Event::LinkExit { link, datagram } => {
                    self.link_exit(LinkId(link as usize), at, datagram.into())
                }
                Event::Local { endpoint, datagram } => {
                    self.deliver(EndpointId(endpoint as usize), at, datagram.into())
                }
                Event::TransportTimer {
                    endpoint,
                    generation,
                } => {
                    let ep = &mut self.endpoints[endpoint.0];
                    if generation != ep.timer_generation {
                        self.stale_events += 1;
                        continue;
                    }
                    ep.timer_at = None;
                    ep.timer_event = None;
                    ep.stats.timer_fires += 1;
                    if ep.same_instant_fires.0 == at {
                        ep.same_instant_fires.1 += 1;
                        if ep.same_instant_fires.1 > MAX_SAME_INSTANT_FIRES {
                            self.fault = Some(format!(
                                "endpoint {} ({}): timer fired {MAX_SAME_INSTANT_FIRES} times at {at} without its deadline moving",
                                endpoint.0, self.setups[endpoint.0].addr
                            ));
                        }
                    } else {
                        ep.same_instant_fires = (at, 1);
                    }
                    self.prefetch_inner(endpoint.0);
                    let ep = &mut self.endpoints[endpoint.0];
                    ep.transport.handle_timeout(at);
                    self.drive(endpoint, at);
                }
                Event::AppTimer {
                    endpoint,
                    generation,
                } => {
                    let ep = &mut self.endpoints[endpoint.0];
                    if generation != ep.app_timer_generation {
                        self.stale_events += 1;
                        continue;
                    }
                    ep.app_timer = None;
                    ep.app_timer_at = None;
                    ep.app_timer_event = None;
                    self.prefetch_inner(endpoint.0);
                    let ep = &mut self.endpoints[endpoint.0];
                    let mut ctx = AppCtx::new(at, endpoint, &mut *ep.transport, &mut ep.app_timer);
                    ep.app.on_timer(&mut ctx);
                    self.drive(endpoint, at);
                }
            }
            self.events += 1;
            if let Some(f) = &self.fault {
                return StopReason::Fault(f.clone());
            }
        }
        StopReason::EventLimit
    }

    /// Asks the processor to load what the next event will touch while
    /// this one runs (the next event is usually the heap's new top; one
    /// this event schedules earlier makes the hint useless, not wrong):
    /// its endpoint's entry, transport and app, or its link, the
    /// datagram's first bytes and the endpoint the link delivers to; and
    /// the queue slot of the event likely after it. With thousands of
    /// flows all of these were last touched long ago and have left the
    /// caches (docs/memory.md, "Cost per flow"). Reads only what is
    /// already cached (the queue's top, the tables of addresses) and
    /// changes nothing.
    fn prefetch_next(&self) {
        let (next, after) = self.queue.lookahead();
        if let Some(slot) = after {
            prefetch::lines(slot, 64);
        }
        match next {
            Some(Event::LinkExit { link, datagram }) => {
                // The link left needs only its `to`, from `link_to`; what
                // the event touches is the node after it: the endpoint a
                // host delivers to, or the link a router sends on.
                prefetch::lines(datagram.payload.as_ptr(), datagram.payload.len().min(128));
                let to = self.link_to.get(*link as usize).map(|&t| t as usize);
                // Nothing here is read that is not cached already: the
                // endpoint's id is decoded from its address (the host's table
                // only confirms it), and of a router's table only the
                // entry's line is prefetched (read by the event itself).
                if let PackedAddr::V4 { ip, port } = &datagram.dst {
                    let dst = SocketAddr::V4(std::net::SocketAddrV4::new((*ip).into(), *port));
                    match to.and_then(|t| self.nodes.get(t)) {
                        Some(Node::Host { .. }) => {
                            if let Some(ep) = topology::endpoint_of_ip(dst) {
                                self.prefetch_endpoint(ep.0);
                            }
                        }
                        Some(Node::Router { routes }) => {
                            if let Some(entry) = routes.entry_address(dst) {
                                prefetch::lines(entry, 8);
                            }
                        }
                        None => {}
                    }
                }
            }
            Some(Event::Local { endpoint, datagram }) => {
                prefetch::lines(datagram.payload.as_ptr(), datagram.payload.len().min(128));
                self.prefetch_endpoint(*endpoint as usize);
            }
            Some(Event::TransportTimer { endpoint, .. } | Event::AppTimer { endpoint, .. }) => {
                self.prefetch_endpoint(endpoint.0)
            }
            _ => {}
        }
    }

    fn prefetch_endpoint(&self, id: usize) {
        let Some(w) = self.warm.get(id) else { return };
        prefetch::lines(
            self.endpoints.as_ptr().wrapping_add(id).cast::<u8>(),
            std::mem::size_of::<Endpoint>(),
        );
        prefetch::lines(w.transport as *const u8, w.transport_len as usize);
        prefetch::lines(w.app as *const u8, w.app_len as usize);
    }

    /// The second step of [`Simulation::prefetch_next`], when the event
    /// has come and its endpoint's entry and transport are cached (read
    /// without a miss): the heap blocks the transport names, where the
    /// next trace record goes, and the link the endpoint sends on.
    fn prefetch_inner(&self, id: usize) {
        if !self.prefetch {
            return;
        }
        let ep = &self.endpoints[id];
        ep.transport.hot_memory(&mut prefetch::lines);
        ep.app.hot_memory(&mut prefetch::lines);
        prefetch::lines(
            ep.records
                .as_ptr()
                .wrapping_add(ep.records.len())
                .cast::<u8>(),
            64,
        );
        if let Some(Node::Host { uplink, .. }) = self.nodes.get(ep.node) {
            self.prefetch_link(uplink.0);
        }
    }

    fn prefetch_link(&self, link: usize) {
        prefetch::lines(
            self.links.as_ptr().wrapping_add(link).cast::<u8>(),
            std::mem::size_of::<SimLink>(),
        );
    }

    /// The drive loop of `base::drive`, after an input has been fed to
    /// `endpoint`'s transport (or its app has run): drain transmits, app
    /// events (the app may send, which is new input, so drain again) and
    /// trace records until a round runs no app event, then reschedule the
    /// endpoint's timers. The endpoint task of the `thinstream` crate runs the same loop.
    fn drive(&mut self, id: EndpointId, now: Instant) {
        let mut tx = std::mem::take(&mut self.tx_buf);
        let mut rounds = 0u32;
        loop {
            let ep = &mut self.endpoints[id.0];
            // Only the app, handling an event, gives the transport new
            // input within this loop: without one the transport has nothing
            // new to transmit, report or trace, and a further round would
            // find every queue empty.
            let mut app_ran = false;
            while let Some(d) = ep.transport.poll_transmit(now) {
                tx.push(d);
            }
            while let Some(event) = ep.transport.poll_app() {
                app_ran = true;
                ep.stats.app_events += 1;
                let mut ctx = AppCtx::new(now, id, &mut *ep.transport, &mut ep.app_timer);
                ep.app.on_event(&mut ctx, event);
            }
            match ep.keep {
                RecordFilter::All => ep.transport.drain_trace(&mut ep.records),
                RecordFilter::None => while ep.transport.poll_trace().is_some() {},
                RecordFilter::Only(f) => {
                    while let Some(r) = ep.transport.poll_trace() {
                        if f(&r) {
                            ep.records.push(r);
                        }
                    }
                }
            }
            for d in tx.drain(..) {
                self.emit(id, now, d);
            }
            if !app_ran {
                break;
            }
            rounds += 1;
            if rounds >= MAX_DRIVE_ROUNDS {
                self.fault = Some(format!(
                    "endpoint {}: output still pending after {MAX_DRIVE_ROUNDS} drain rounds at {now}",
                    id.0
                ));
                break;
            }
        }
        self.tx_buf = tx;
        self.reschedule(id, now);
    }

    /// Keeps exactly one pending timer event per endpoint and timer kind:
    /// when the wanted deadline changed, cancel the event already queued,
    /// bump the generation (a second guard against a superseded event) and
    /// queue a new one.
    fn reschedule(&mut self, id: EndpointId, now: Instant) {
        let ep = &mut self.endpoints[id.0];
        let want = ep.transport.poll_timeout();
        if want != ep.timer_at {
            // The event queued for the old deadline, if any, is superseded.
            if let Some(h) = ep.timer_event.take() {
                self.queue.cancel(h);
            }
            ep.timer_generation += 1;
            ep.timer_at = want;
            if let Some(t) = want {
                let generation = ep.timer_generation;
                ep.timer_event = Some(self.queue.push(
                    t.max(now),
                    Event::TransportTimer {
                        endpoint: id,
                        generation,
                    },
                ));
            }
        }
        let ep = &mut self.endpoints[id.0];
        if ep.app_timer != ep.app_timer_at {
            if let Some(h) = ep.app_timer_event.take() {
                self.queue.cancel(h);
            }
            ep.app_timer_generation += 1;
            ep.app_timer_at = ep.app_timer;
            if let Some(t) = ep.app_timer {
                let generation = ep.app_timer_generation;
                ep.app_timer_event = Some(self.queue.push(
                    t.max(now),
                    Event::AppTimer {
                        endpoint: id,
                        generation,
                    },
                ));
            }
        }
    }

    /// A datagram leaves endpoint `id`.
    fn emit(&mut self, id: EndpointId, now: Instant, datagram: Datagram) {
        let ep = &mut self.endpoints[id.0];
        ep.stats.datagrams_sent += 1;
        ep.stats.bytes_sent += datagram.payload.len() as u64;
        let node = ep.node;
        if let Some((CapturePoint::Send, w)) = &mut self.capture {
            if capture(w, now, &datagram, ep.transport.ip_protocol()).is_err() {
                self.pcap_skipped += 1;
            }
        }
        match &self.nodes[node] {
            Node::Host { endpoints, uplink } => {
                if let Some(local) = endpoints.get(datagram.dst) {
                    self.queue.push(
                        now,
                        Event::Local {
                            endpoint: slot_index(local.0),
                            datagram: datagram.into(),
                        },
                    );
                } else {
                    let uplink = *uplink;
                    self.send_on_link(uplink, now, datagram);
                }
            }
            Node::Router { .. } => unreachable!("endpoints live on hosts"),
        }
    }

    fn send_on_link(&mut self, link: LinkId, now: Instant, mut datagram: Datagram) {
        // The datagram stays here while the link decides (a move through
        // the link and back costs copies of its 88 bytes).
        let admission = self.links[link.0].link.admit(now, &mut datagram);
        if let Some(at) = admission.arrival {
            self.push_link_exit(link, now, at, datagram);
        }
        if let Some((at, copy)) = admission.duplicate {
            self.push_link_exit(link, now, at, copy);
        }
    }

    fn push_link_exit(&mut self, link: LinkId, now: Instant, at: Instant, datagram: Datagram) {
        debug_assert!(
            at >= now,
            "link {} delivers into the past",
            self.link_names[link.0].label
        );
        self.queue.push(
            at.max(now),
            Event::LinkExit {
                link: slot_index(link.0),
                datagram: datagram.into(),
            },
        );
    }

    fn link_exit(&mut self, link: LinkId, now: Instant, datagram: Datagram) {
        let node = self.link_to[link.0] as usize;
        match &self.nodes[node] {
            Node::Host { endpoints, .. } => match endpoints.get(datagram.dst) {
                Some(ep) => self.deliver(ep, now, datagram),
                None => self.unroutable += 1,
            },
            Node::Router { routes } => match routes.get(datagram.dst) {
                Some(next) => self.send_on_link(next, now, datagram),
                None => self.unroutable += 1,
            },
        }
    }

    fn deliver(&mut self, id: EndpointId, now: Instant, datagram: Datagram) {
        let ep = &mut self.endpoints[id.0];
        if let Some((CapturePoint::Receive, w)) = &mut self.capture {
            if capture(w, now, &datagram, ep.transport.ip_protocol()).is_err() {
                self.pcap_skipped += 1;
            }
        }
        if !ep.started {
            ep.stats.dropped_before_start += 1;
            return;
        }
        self.prefetch_inner(id.0);
        let ep = &mut self.endpoints[id.0];
        ep.stats.datagrams_received += 1;
        ep.stats.bytes_received += datagram.payload.len() as u64;
        ep.transport.handle_datagram(now, datagram);
        self.drive(id, now);
    }

    /// Ends the run: collects records, app reports, link statistics and the capture.
    pub fn finish(self, stop: StopReason) -> RunResult {
        let endpoints = self
            .endpoints
            .into_iter()
            .zip(self.setups)
            .enumerate()
            .map(|(i, (ep, setup))| EndpointResult {
                id: EndpointId(i),
                flow: setup.flow,
                side: setup.side,
                addr: setup.addr,
                peer: setup.peer,
                seed: setup.seed,
                established: ep.transport.is_established(),
                closed: ep.transport.is_closed(),
                records: ep.records,
                app: ep.app.finish(),
                stats: ep.stats,
            })
            .collect();
        let links = self
            .links
            .iter()
            .zip(self.link_names)
            .enumerate()
            .map(|(i, (l, name))| LinkResult {
                id: LinkId(i),
                label: name.label,
                seed: name.seed,
                config: l.link.config().clone(),
                stats: l.link.stats().clone(),
            })
            .collect();
        RunResult {
            header: self.header,
            stop,
            end: self.now,
            events: self.events,
            stale_events: self.stale_events + self.queue.cancelled(),
            unroutable: self.unroutable,
            endpoints,
            links,
            pcap: self.capture.map(|(_, w)| w.into_bytes()),
            pcap_skipped: self.pcap_skipped,
        }
    }
}

/// The transport of an endpoint whose flow has not started: no output, no
/// timers, refuses to send. Replaced by the real one at the start time.
struct NotStarted;

impl Transport for NotStarted {
    fn handle_datagram(&mut self, _now: Instant, _datagram: Datagram) {}
    fn handle_timeout(&mut self, _now: Instant) {}
    fn poll_transmit(&mut self, _now: Instant) -> Option<Datagram> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn poll_app(&mut self) -> Option<thinstream_base::drive::AppEvent> {
        None
    }
    fn poll_trace(&mut self) -> Option<Record> {
        None
    }
    fn send(
        &mut self,
        _now: Instant,
        _message: thinstream_base::drive::Outgoing<'_>,
    ) -> Result<u64, thinstream_base::drive::SendError> {
        Err(thinstream_base::drive::SendError::NotConnected)
    }
    fn close(&mut self, _now: Instant) {}
    fn is_established(&self) -> bool {
        false
    }
    fn is_closed(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A datagram comes out of the queue's packed form exactly as it went in,
    // IPv6 flow label and scope included.
    #[test]
    fn queued_datagrams_convert_back_exactly() {
        let v6 = SocketAddr::V6(std::net::SocketAddrV6::new(
            "2001:db8::7".parse().unwrap(),
            9899,
            0x12345,
            3,
        ));
        for (src, dst) in [
            (
                "192.0.2.1:9899".parse().unwrap(),
                "198.19.255.254:1".parse().unwrap(),
            ),
            ("0.0.0.0:0".parse().unwrap(), v6),
            (v6, "255.255.255.255:65535".parse().unwrap()),
        ] {
            let d = Datagram {
                src,
                dst,
                payload: vec![1, 2, 3],
            };
            let back: Datagram = QueuedDatagram::from(d.clone()).into();
            assert_eq!(back, d);
        }
    }
}
