//! Engine throughput with trivial transports (no criterion; run with
//! `cargo bench -p thinstream-sim --bench events`).
//!
//! Measures wall-clock time around `Simulation::run` and reports processed
//! events per second, for three shapes:
//! - `datagram-flood`: unreliable datagram transport, tracing off, 1 ms
//!   message interval over a 10 ms link (link exits plus app timers);
//! - `stop-and-wait`: reliable toy with ACKs and timers over a lossy link,
//!   tracing on (every packet also produces trace records);
//! - `thin-2h`: a two-hour thin stream, 28,800 messages at 250 ms, with the
//!   stop-and-wait toy (the target is well under 0.5 s);
//! - `sctp-thin-2h`: the same stream over the real SCTP association
//!   (`thinstream-proto`, tracing on, 2% loss each way).
//!
//! The wall clock is read here only to time the run; the simulation itself
//! never reads it.

#![allow(clippy::disallowed_methods)]

use std::time::Instant as WallClock;
use thinstream_base::{Duration, Instant, Seed};
use thinstream_link::LinkConfig;
use thinstream_proto::{Association, Config};
use thinstream_sim::toy::{StopAndWait, UnreliableDatagram};
use thinstream_sim::{
    EndpointSpec, FlowSpec, MessageSource, MessageSpec, Simulation, Sink, Topology,
};

fn schedule(count: u64, iat: Duration, bytes: u32) -> Vec<MessageSpec> {
    (0..count)
        .map(|i| MessageSpec {
            at: Instant::ZERO + iat * i,
            stream: 0,
            bytes,
            unordered: false,
        })
        .collect()
}

fn measure(name: &str, sim: Simulation, stop: Instant, messages: u64) {
    let start = WallClock::now();
    let result = sim.run(stop);
    let wall = start.elapsed().as_secs_f64();
    let delivered: usize = result
        .endpoints
        .iter()
        .filter_map(|e| e.app.received())
        .map(|r| r.deliveries.len())
        .sum();
    println!(
        "{name:>15}: {events:>9} events in {ms:8.1} ms = {rate:6.2} M events/s; {delivered}/{messages} messages delivered, virtual {end}",
        events = result.events,
        ms = wall * 1e3,
        rate = result.events as f64 / wall / 1e6,
        end = result.end,
    );
}

fn datagram_flood(flows: usize, messages: u64) -> Simulation {
    let topology = Topology::TwoHost {
        forward: LinkConfig::parse_netem("delay 10ms").unwrap(),
        reverse: LinkConfig::parse_netem("delay 10ms").unwrap(),
    };
    let flows = (0..flows)
        .map(|_| {
            FlowSpec::new(
                EndpointSpec::new(
                    |s| Box::new(UnreliableDatagram::new(s.local, s.peer).without_trace()),
                    MessageSource::new(schedule(messages, Duration::from_millis(1), 100)),
                ),
                EndpointSpec::new(
                    |s| Box::new(UnreliableDatagram::new(s.local, s.peer).without_trace()),
                    Sink::messages(),
                ),
            )
        })
        .collect();
    Simulation::new(Seed(1), &topology, flows).unwrap()
}

fn stop_and_wait(messages: u64, iat: Duration) -> Simulation {
    let lossy = LinkConfig::parse_netem("delay 50ms loss 2%").unwrap();
    let topology = Topology::TwoHost {
        forward: lossy.clone(),
        reverse: lossy,
    };
    let rto = Duration::from_millis(200);
    let flow = FlowSpec::new(
        EndpointSpec::new(
            move |s| Box::new(StopAndWait::new(s.local, s.peer, rto, 1 << 20)),
            MessageSource::new(schedule(messages, iat, 100)),
        ),
        EndpointSpec::new(
            move |s| Box::new(StopAndWait::new(s.local, s.peer, rto, 1 << 20)),
            Sink::messages(),
        ),
    );
    Simulation::new(Seed(2), &topology, vec![flow]).unwrap()
}

fn sctp_thin(messages: u64, iat: Duration) -> Simulation {
    let lossy = LinkConfig::parse_netem("delay 50ms loss 2%").unwrap();
    let topology = Topology::TwoHost {
        forward: lossy.clone(),
        reverse: lossy,
    };
    let flow = FlowSpec::new(
        EndpointSpec::new(
            |s| {
                Box::new(Association::connect(
                    Config::default().with_trace(),
                    s.start,
                    s.local,
                    s.peer,
                    s.seed,
                ))
            },
            MessageSource::new(schedule(messages, iat, 100)),
        ),
        EndpointSpec::new(
            |s| {
                Box::new(Association::accept(
                    Config::default().with_trace(),
                    s.start,
                    s.local,
                    s.seed,
                ))
            },
            Sink::messages(),
        ),
    );
    Simulation::new(Seed(3), &topology, vec![flow]).unwrap()
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument is ignored.
    measure(
        "datagram-flood",
        datagram_flood(4, 250_000),
        Instant::from_secs(3600),
        1_000_000,
    );
    measure(
        "stop-and-wait",
        stop_and_wait(200_000, Duration::from_millis(150)),
        Instant::from_secs(40_000),
        200_000,
    );
    measure(
        "thin-2h",
        stop_and_wait(28_800, Duration::from_millis(250)),
        Instant::from_secs(7300),
        28_800,
    );
    measure(
        "sctp-thin-2h",
        sctp_thin(28_800, Duration::from_millis(250)),
        Instant::from_secs(7300),
        28_800,
    );
}
