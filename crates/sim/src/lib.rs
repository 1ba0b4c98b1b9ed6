//! Deterministic discrete-event simulator driving the real protocol code.
//!
//! A [`Simulation`] is built from a master [`Seed`], a [`Topology`] (two
//! hosts, or a dumbbell with a shared bottleneck) and one [`FlowSpec`] per
//! connection: a transport factory (anything implementing
//! `base::drive::Transport`: the SCTP association, the TCP model, or the toy
//! transports in [`toy`]) and an [`App`] for each end. It runs on one event
//! queue ordered by (virtual time, insertion sequence) and returns a
//! [`RunResult`] with every endpoint's trace records, the apps' reports,
//! per-link statistics and, on request, a pcap capture.
//!
//! Nothing here reads a clock or draws a random number it was not seeded
//! for: the same seed and inputs give the same records and the same pcap
//! bytes. Every component's seed is derived from the master seed with a
//! stable label ([`RunHeader`] lists them).
//!
//! A `Simulation` holds boxed transports and apps that need not be `Send`:
//! to run many in parallel, build each one inside its worker thread (the
//! [`RunResult`] it returns is `Send`).
//!
//! ```
//! use thinstream_base::{Duration, Instant, Seed};
//! use thinstream_link::LinkConfig;
//! use thinstream_sim::toy::UnreliableDatagram;
//! use thinstream_sim::{EndpointSpec, FlowId, FlowSpec, MessageSource, MessageSpec, Side, Simulation, Sink, Topology};
//!
//! let path = LinkConfig::parse_netem("delay 50ms rate 10mbit").unwrap();
//! let topology = Topology::TwoHost { forward: path.clone(), reverse: path };
//! // One 100-byte message every 250 ms for ten seconds.
//! let schedule = (0..40u64).map(|i| MessageSpec {
//!     at: Instant::ZERO + Duration::from_millis(250) * i,
//!     stream: 0,
//!     bytes: 100,
//!     unordered: false,
//! });
//! let transport = |s: &thinstream_sim::EndpointSetup| {
//!     Box::new(UnreliableDatagram::new(s.local, s.peer)) as Box<dyn thinstream_base::Transport>
//! };
//! let flow = FlowSpec::new(
//!     EndpointSpec::new(transport, MessageSource::new(schedule)),
//!     EndpointSpec::new(transport, Sink::messages()),
//! );
//! let sim = Simulation::new(Seed(7), &topology, vec![flow]).unwrap();
//! println!("{}", sim.header()); // master seed and every derived seed first
//! let result = sim.run(Instant::from_secs(11));
//! let sink = result.endpoint(FlowId(0), Side::B).app.received().unwrap();
//! assert_eq!(sink.deliveries.len(), 40);
//! ```
//!
//! [`Seed`]: thinstream_base::Seed

pub mod app;
mod calendar;
mod engine;
pub mod pcap;
mod prefetch;
pub mod queue;
mod result;
pub mod topology;
pub mod toy;

pub use app::{App, AppCtx, AppHistory, AppReport, Echo, Idle, MessageSource, MessageSpec, Sink};
pub use engine::{
    CapturePoint, EndpointSetup, EndpointSpec, FlowSpec, RecordFilter, Simulation, TransportFactory,
};
pub use result::{EndpointResult, EndpointStats, LinkResult, RunHeader, RunResult, StopReason};
pub use topology::{Access, Dumbbell, Topology, TopologyError};

/// Index of an endpoint: flow `i` has side A at `2i` and side B at `2i + 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EndpointId(pub usize);

/// Index of a flow (a connection between an A and a B endpoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId(pub usize);

/// Index of a link in creation order (see [`RunResult::links`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub usize);

/// Which end of a flow: A initiates and sits on the left (192.0.2.0/24),
/// B sits on the right (198.51.100.0/24).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    A,
    B,
}

impl Side {
    /// `"a"` or `"b"`, as used in seed labels.
    pub const fn label(self) -> &'static str {
        match self {
            Side::A => "a",
            Side::B => "b",
        }
    }
}
