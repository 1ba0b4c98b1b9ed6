//! Engine behaviour with toy transports: exact delivery times on two-host
//! and dumbbell paths, timer rescheduling and cancellation, routing, faults.

mod common;

use common::*;
use std::cell::RefCell;
use std::rc::Rc;
use thinstream_base::drive::{AppEvent, Outgoing, SendError, Transport};
use thinstream_base::trace::Record;
use thinstream_base::{Datagram, Duration, Instant, Seed};
use thinstream_sim::app::{verify_delivery, PayloadCheck};
use thinstream_sim::{
    Access, Dumbbell, Echo, EndpointSpec, FlowId, FlowSpec, Idle, MessageSource, MessageSpec, Side,
    Simulation, Sink, StopReason, Topology,
};

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

fn ns(v: u64) -> Instant {
    Instant::from_nanos(v)
}

// Two-host path: arrival = send time + queueing + serialisation + propagation, to the nanosecond.
#[test]
fn two_host_delivery_times_are_exact() {
    let seed = test_seed(1);
    let _r = Reproduce(seed);
    let schedule = vec![
        MessageSpec {
            at: ms(1),
            stream: 0,
            bytes: 100,
            unordered: false,
        },
        MessageSpec {
            at: ms(1),
            stream: 0,
            bytes: 100,
            unordered: false,
        },
        MessageSpec {
            at: ms(10),
            stream: 0,
            bytes: 100,
            unordered: false,
        },
    ];
    let topology = Topology::TwoHost {
        forward: link(50, Some(10_000_000)),
        reverse: link(50, None),
    };
    let flow = FlowSpec::new(
        datagram_endpoint(MessageSource::new(schedule)),
        datagram_endpoint(Sink::messages()),
    );
    let sim = Simulation::new(seed, &topology, vec![flow]).unwrap();
    let result = sim.run(ms(1000));
    assert_eq!(result.stop, StopReason::StopTime);
    let sink = result.endpoint(FlowId(0), Side::B).app.received().unwrap();
    let times: Vec<Instant> = sink.deliveries.iter().map(|d| d.time).collect();
    // 100 bytes + 12-byte toy header = 112 bytes = 896 bits at 10 Mbit/s = 89.6 us.
    // The second message of t=1ms waits for the first to be serialised.
    assert_eq!(times, vec![ns(51_089_600), ns(51_179_200), ns(60_089_600)]);
    let source = result.endpoint(FlowId(0), Side::A).app.source().unwrap();
    assert_eq!(verify_delivery(source, sink, true).unwrap().delivered, 3);
    // Trace records reached the result with their endpoint.
    let a = result.endpoint(FlowId(0), Side::A);
    assert_eq!(
        a.records
            .iter()
            .filter(|r| matches!(r, Record::Submitted { .. }))
            .count(),
        3
    );
    let b = result.endpoint(FlowId(0), Side::B);
    let delivered: Vec<Instant> = b
        .records
        .iter()
        .filter(|r| matches!(r, Record::Delivered { .. }))
        .map(Record::time)
        .collect();
    assert_eq!(delivered, times);
    assert_eq!(result.link("link.forward").unwrap().label, "link.forward");
}

// Dumbbell: individual access delays, FIFO queueing at the shared bottleneck, and the echo back.
#[test]
fn dumbbell_delivery_times_are_exact() {
    let seed = test_seed(2);
    let _r = Reproduce(seed);
    let access = |a_ms| Access {
        a: link(a_ms, None),
        b: link(1, None),
    };
    let topology = Topology::Dumbbell(Dumbbell {
        bottleneck_forward: link(10, Some(1_000_000)),
        bottleneck_reverse: link(10, None),
        access: vec![access(5), access(5), access(20)],
    });
    let one = |_| {
        vec![MessageSpec {
            at: Instant::ZERO,
            stream: 0,
            bytes: 100,
            unordered: false,
        }]
    };
    let flows = (0..3)
        .map(|i| {
            FlowSpec::new(
                datagram_endpoint(MessageSource::new(one(i))),
                datagram_endpoint(Echo::new()),
            )
        })
        .collect();
    let sim = Simulation::new(seed, &topology, flows).unwrap();
    let result = sim.run(ms(500));
    // 112 bytes at 1 Mbit/s = 896 us. Flow 0 reaches the bottleneck at 5 ms
    // and leaves at 5.896 ms; flow 1 arrives at the same instant (queued
    // after flow 0, which was sent first) and leaves at 6.792 ms; flow 2
    // arrives at 20 ms to an idle line. Then 10 ms bottleneck + 1 ms access.
    let arrival = |f| {
        let b = result.endpoint(FlowId(f), Side::B).app.received().unwrap();
        assert_eq!(b.deliveries.len(), 1, "flow {f}");
        b.deliveries[0].time
    };
    assert_eq!(arrival(0), ns(16_896_000));
    assert_eq!(arrival(1), ns(17_792_000));
    assert_eq!(arrival(2), ns(31_896_000));
    // Echo: 1 ms access + 10 ms reverse bottleneck (no rate) + access a.
    let response = |f| {
        let a = result.endpoint(FlowId(f), Side::A).app.received().unwrap();
        assert_eq!(a.deliveries.len(), 1, "flow {f}");
        assert_eq!(a.deliveries[0].check, PayloadCheck::Intact { id: 0 });
        a.deliveries[0].time
    };
    assert_eq!(response(0), ns(32_896_000));
    assert_eq!(response(1), ns(33_792_000));
    assert_eq!(response(2), ns(62_896_000));
    // Addresses come from the documentation ranges.
    assert_eq!(
        result.endpoint(FlowId(2), Side::A).addr.to_string(),
        "192.0.2.3:9899"
    );
    assert_eq!(
        result.endpoint(FlowId(2), Side::B).addr.to_string(),
        "198.51.100.3:9899"
    );
    assert_eq!(result.unroutable, 0);
    // 4 links per flow plus 2 bottleneck links.
    assert_eq!(result.links.len(), 14);
}

/// What a scripted transport saw.
#[derive(Default, Debug)]
struct Log {
    fired: Vec<Instant>,
    early: Vec<Instant>,
    received: Vec<Instant>,
}

/// A transport whose deadline follows a script: it starts at `initial`,
/// moves to 200 ms when a datagram arrives, and on each firing takes the
/// next value of `after_fire`.
struct Scripted {
    deadline: Option<Instant>,
    after_fire: Vec<Option<Instant>>,
    poke: Option<Datagram>,
    log: Rc<RefCell<Log>>,
}

impl Transport for Scripted {
    fn handle_datagram(&mut self, now: Instant, _d: Datagram) {
        self.log.borrow_mut().received.push(now);
        self.deadline = Some(ms(200));
    }
    fn handle_timeout(&mut self, now: Instant) {
        match self.deadline {
            Some(d) if d <= now => {
                self.log.borrow_mut().fired.push(now);
                self.deadline = if self.after_fire.is_empty() {
                    None
                } else {
                    self.after_fire.remove(0)
                };
            }
            _ => self.log.borrow_mut().early.push(now),
        }
    }
    fn poll_transmit(&mut self, _now: Instant) -> Option<Datagram> {
        self.poke.take()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }
    fn poll_app(&mut self) -> Option<AppEvent> {
        None
    }
    fn poll_trace(&mut self) -> Option<Record> {
        None
    }
    fn send(&mut self, _now: Instant, _m: Outgoing<'_>) -> Result<u64, SendError> {
        Err(SendError::NotConnected)
    }
    fn close(&mut self, _now: Instant) {}
    fn is_established(&self) -> bool {
        false
    }
    fn is_closed(&self) -> bool {
        false
    }
}

// A moved deadline cancels the old timer event; a deadline in the past fires at once; None disarms.
#[test]
fn timers_are_rescheduled_and_cancelled() {
    let seed = test_seed(3);
    let _r = Reproduce(seed);
    let log_a = Rc::new(RefCell::new(Log::default()));
    let la = log_a.clone();
    let a = EndpointSpec::new(
        move |_s| {
            Box::new(Scripted {
                deadline: Some(ms(100)),
                // 200 ms fires -> 300 ms; 300 ms fires -> 250 ms (already past) -> None.
                after_fire: vec![Some(ms(300)), Some(ms(250)), None],
                poke: None,
                log: la,
            }) as Box<dyn Transport>
        },
        Idle,
    );
    let b = EndpointSpec::new(
        |s| {
            Box::new(Scripted {
                deadline: None,
                after_fire: vec![],
                poke: Some(Datagram {
                    src: s.local,
                    dst: s.peer,
                    payload: vec![1, 2, 3],
                }),
                log: Rc::new(RefCell::new(Log::default())),
            }) as Box<dyn Transport>
        },
        Idle,
    );
    let topology = Topology::TwoHost {
        forward: link(50, None),
        reverse: link(50, None),
    };
    let mut sim = Simulation::new(seed, &topology, vec![FlowSpec::new(a, b)]).unwrap();
    // Nothing keeps the run going after the last timer is disarmed.
    assert_eq!(sim.run_until_idle(), StopReason::Idle);
    let log = log_a.borrow();
    assert_eq!(log.received, vec![ms(50)]);
    // The 100 ms timer was cancelled by the datagram at 50 ms.
    assert_eq!(log.fired, vec![ms(200), ms(300), ms(300)]);
    assert!(
        log.early.is_empty(),
        "handle_timeout called before the deadline: {:?}",
        log.early
    );
    assert_eq!(sim.now(), ms(300));
    let result = sim.finish(StopReason::Idle);
    assert_eq!(result.endpoint(FlowId(0), Side::A).stats.timer_fires, 3);
    // The superseded 100 ms event is counted as stale, not processed.
    assert_eq!(result.stale_events, 1);
    // Events: arrival at 50 ms, fires at 200, 300, 300.
    assert_eq!(result.events, 4);
}

// Stepping: run_until stops at the requested time and can be resumed; a later stop wins.
#[test]
fn run_until_can_be_resumed() {
    let seed = test_seed(4);
    let _r = Reproduce(seed);
    let topology = Topology::TwoHost {
        forward: link(10, None),
        reverse: link(10, None),
    };
    let flow = FlowSpec::new(
        datagram_endpoint(MessageSource::new(periodic(
            Instant::ZERO,
            Duration::from_millis(100),
            10,
            50,
        ))),
        datagram_endpoint(Sink::messages()),
    );
    let mut sim = Simulation::new(seed, &topology, vec![flow]).unwrap();
    assert_eq!(sim.run_until(ms(455)), StopReason::StopTime);
    assert_eq!(sim.now(), ms(455));
    let b = sim.endpoint_id(FlowId(0), Side::B);
    let delivered = |sim: &Simulation| {
        sim.records(b)
            .iter()
            .filter(|r| matches!(r, Record::Delivered { .. }))
            .count()
    };
    assert_eq!(delivered(&sim), 5); // sent at 0..400 ms, arrived by 410 ms
    assert_eq!(sim.run_until(ms(2000)), StopReason::StopTime);
    assert_eq!(delivered(&sim), 10);
    // With the schedule exhausted nothing is pending: the run goes idle.
    assert_eq!(sim.run_until_idle(), StopReason::Idle);
}

/// A transport that wants its timer now, forever.
struct Stuck;

impl Transport for Stuck {
    fn handle_datagram(&mut self, _now: Instant, _d: Datagram) {}
    fn handle_timeout(&mut self, _now: Instant) {}
    fn poll_transmit(&mut self, _now: Instant) -> Option<Datagram> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Some(Instant::ZERO)
    }
    fn poll_app(&mut self) -> Option<AppEvent> {
        None
    }
    fn poll_trace(&mut self) -> Option<Record> {
        None
    }
    fn send(&mut self, _now: Instant, _m: Outgoing<'_>) -> Result<u64, SendError> {
        Err(SendError::NotConnected)
    }
    fn close(&mut self, _now: Instant) {}
    fn is_established(&self) -> bool {
        false
    }
    fn is_closed(&self) -> bool {
        false
    }
}

// A transport whose deadline never moves is reported as a fault instead of hanging the run.
#[test]
fn stuck_timer_is_a_fault() {
    let topology = Topology::TwoHost {
        forward: link(1, None),
        reverse: link(1, None),
    };
    let flow = FlowSpec::new(
        EndpointSpec::new(|_| Box::new(Stuck) as Box<dyn Transport>, Idle),
        datagram_endpoint(Sink::messages()),
    );
    let sim = Simulation::new(Seed(5), &topology, vec![flow]).unwrap();
    let result = sim.run(ms(10));
    match &result.stop {
        StopReason::Fault(msg) => assert!(msg.contains("192.0.2.1:9899"), "{msg}"),
        other => panic!("expected a fault, got {other:?}"),
    }
    assert_eq!(result.end, Instant::ZERO);
}

// Datagrams to an address nobody has are dropped and counted.
#[test]
fn unknown_destinations_are_counted() {
    let seed = test_seed(6);
    let poke = EndpointSpec::new(
        |s| {
            Box::new(Scripted {
                deadline: None,
                after_fire: vec![],
                poke: Some(Datagram {
                    src: s.local,
                    dst: "198.51.100.77:9899".parse().unwrap(),
                    payload: vec![0],
                }),
                log: Rc::new(RefCell::new(Log::default())),
            }) as Box<dyn Transport>
        },
        Idle,
    );
    let topology = Topology::TwoHost {
        forward: link(1, None),
        reverse: link(1, None),
    };
    let sim = Simulation::new(
        seed,
        &topology,
        vec![FlowSpec::new(poke, datagram_endpoint(Sink::messages()))],
    )
    .unwrap();
    let result = sim.run(ms(10));
    assert_eq!(result.unroutable, 1);
    assert_eq!(
        result.endpoint(FlowId(0), Side::B).stats.datagrams_received,
        0
    );
}

// Stop-and-wait over a lossy path in both directions delivers every message exactly once, in order.
#[test]
fn reliable_toy_delivers_exactly_once_over_loss() {
    let seed = test_seed(7);
    let _r = Reproduce(seed);
    let lossy = thinstream_link::LinkConfig::parse_netem("delay 20ms loss 20%").unwrap();
    let topology = Topology::TwoHost {
        forward: lossy.clone(),
        reverse: lossy,
    };
    let flow = FlowSpec::new(
        stop_and_wait_endpoint(
            Duration::from_millis(100),
            MessageSource::new(periodic(Instant::ZERO, Duration::from_millis(50), 300, 120)),
        ),
        stop_and_wait_endpoint(Duration::from_millis(100), Sink::messages()),
    );
    let sim = Simulation::new(seed, &topology, vec![flow]).unwrap();
    let result = sim.run(Instant::from_secs(120));
    let source = result.endpoint(FlowId(0), Side::A).app.source().unwrap();
    let sink = result.endpoint(FlowId(0), Side::B).app.received().unwrap();
    assert_eq!(source.sent.len(), 300);
    let summary = verify_delivery(source, sink, true).unwrap();
    assert_eq!(summary.delivered, 300);
    // Loss happened and was repaired by timeouts.
    let a = result.endpoint(FlowId(0), Side::A);
    assert!(
        a.stats.timer_fires > 10,
        "only {} timer fires",
        a.stats.timer_fires
    );
    let retransmissions = a
        .records
        .iter()
        .filter(|r| matches!(r, Record::PacketSent { data, .. } if data.iter().any(|d| d.reason.is_retransmission())))
        .count();
    assert!(
        retransmissions > 10,
        "only {retransmissions} retransmissions"
    );
}

// Buffer-full sends wait and go out on Writable, in order.
#[test]
fn source_waits_for_buffer_space() {
    let seed = test_seed(8);
    let topology = Topology::TwoHost {
        forward: link(10, None),
        reverse: link(10, None),
    };
    // Capacity 1: a burst of 5 at t=0 can only queue one at a time.
    let a = EndpointSpec::new(
        |s| {
            Box::new(thinstream_sim::toy::StopAndWait::new(
                s.local,
                s.peer,
                Duration::from_millis(500),
                1,
            )) as Box<dyn Transport>
        },
        MessageSource::new(periodic(Instant::ZERO, Duration::ZERO, 5, 40)),
    );
    let flow = FlowSpec::new(
        a,
        stop_and_wait_endpoint(Duration::from_millis(500), Sink::messages()),
    );
    let result = Simulation::new(seed, &topology, vec![flow])
        .unwrap()
        .run(ms(1000));
    let source = result.endpoint(FlowId(0), Side::A).app.source().unwrap();
    let sink = result.endpoint(FlowId(0), Side::B).app.received().unwrap();
    assert_eq!(verify_delivery(source, sink, true).unwrap().delivered, 5);
    // Message 0 is in flight at once, message 1 queued; the rest wait for Writable.
    let sent: Vec<Instant> = source.sent.iter().map(|m| m.sent).collect();
    assert_eq!(sent, vec![ms(0), ms(0), ms(20), ms(40), ms(60)]);
    assert!(source.sent.iter().all(|m| m.due == Instant::ZERO));
    assert_eq!(source.waiting, 0);
}

// Topology errors are typed, not panics.
#[test]
fn bad_topologies_are_errors() {
    let topology = Topology::Dumbbell(Dumbbell {
        bottleneck_forward: link(1, None),
        bottleneck_reverse: link(1, None),
        access: vec![Access::default()],
    });
    let flows = || {
        vec![
            FlowSpec::new(datagram_endpoint(Idle), datagram_endpoint(Idle)),
            FlowSpec::new(datagram_endpoint(Idle), datagram_endpoint(Idle)),
        ]
    };
    assert_eq!(
        Simulation::new(Seed(1), &topology, flows()).unwrap_err(),
        thinstream_sim::TopologyError::AccessCount {
            flows: 2,
            access: 1
        }
    );
    assert_eq!(
        Simulation::new(Seed(1), &topology, vec![]).unwrap_err(),
        thinstream_sim::TopologyError::NoFlows
    );
}

// A drop predicate installed by link label drops exactly the chosen datagram; the toy repairs it.
#[test]
fn drop_predicate_by_link_label() {
    let seed = test_seed(9);
    let _r = Reproduce(seed);
    let topology = Topology::TwoHost {
        forward: link(10, None),
        reverse: link(10, None),
    };
    let flow = FlowSpec::new(
        stop_and_wait_endpoint(
            Duration::from_millis(100),
            MessageSource::new(periodic(Instant::ZERO, Duration::from_millis(200), 3, 30)),
        ),
        stop_and_wait_endpoint(Duration::from_millis(100), Sink::messages()),
    );
    let mut sim = Simulation::new(seed, &topology, vec![flow]).unwrap();
    assert!(!sim.set_drop_predicate("link.nowhere", None));
    let mut seen = 0;
    // Drop the second datagram offered to the forward link (message 1's first copy).
    assert!(sim.set_drop_predicate(
        "link.forward",
        Some(Box::new(move |_d: &Datagram| {
            seen += 1;
            seen == 2
        }))
    ));
    let result = sim.run(ms(2000));
    let sink = result.endpoint(FlowId(0), Side::B).app.received().unwrap();
    let times: Vec<Instant> = sink.deliveries.iter().map(|d| d.time).collect();
    // Message 1 sent at 200 ms is lost, retransmitted at 300 ms, arrives at 310 ms.
    assert_eq!(times, vec![ms(10), ms(310), ms(410)]);
    let forward = &result.link("link.forward").unwrap().stats;
    assert_eq!(
        forward
            .dropped(thinstream_link::DropCause::Predicate)
            .packets,
        1
    );
}

// An infinite schedule with everything due at once (greedy bulk) is paced by the transport's buffer.
#[test]
fn greedy_schedule_is_paced_by_the_transport() {
    let seed = test_seed(10);
    let _r = Reproduce(seed);
    let topology = Topology::TwoHost {
        forward: link(10, None),
        reverse: link(10, None),
    };
    let bulk = std::iter::repeat(MessageSpec {
        at: Instant::ZERO,
        stream: 0,
        bytes: 500,
        unordered: false,
    });
    let a = EndpointSpec::new(
        |s| {
            Box::new(thinstream_sim::toy::StopAndWait::new(
                s.local,
                s.peer,
                Duration::from_millis(500),
                4,
            )) as Box<dyn Transport>
        },
        MessageSource::new(bulk),
    );
    let flow = FlowSpec::new(
        a,
        stop_and_wait_endpoint(Duration::from_millis(500), Sink::messages()),
    );
    let result = Simulation::new(seed, &topology, vec![flow])
        .unwrap()
        .run(ms(1000));
    assert_eq!(result.stop, StopReason::StopTime);
    let source = result.endpoint(FlowId(0), Side::A).app.source().unwrap();
    let sink = result.endpoint(FlowId(0), Side::B).app.received().unwrap();
    // One message per 20 ms round trip: deliveries at 10, 30, ..., 990 ms.
    assert_eq!(sink.deliveries.len(), 50);
    // Message 49 arrived at 990 ms but its ack reaches the sender at 1000 ms,
    // after the stop (scheduled first): it is still in flight there, with 4
    // more queued (m50..m53), and one more pulled message waits for space.
    assert_eq!(source.sent.len(), 54);
    assert_eq!(source.waiting, 1);
    assert!(verify_delivery(source, sink, false).is_ok());
}

// A flow with a later start builds its transport then; datagrams reaching it earlier are dropped.
#[test]
fn flows_start_at_their_start_time() {
    let seed = test_seed(14);
    let _r = Reproduce(seed);
    let topology = Topology::TwoHost {
        forward: link(10, None),
        reverse: link(10, None),
    };
    let started = Rc::new(RefCell::new(Vec::new()));
    let log = started.clone();
    let early = FlowSpec::new(
        datagram_endpoint(MessageSource::new(periodic(
            Instant::ZERO,
            Duration::from_millis(100),
            3,
            20,
        ))),
        datagram_endpoint(Sink::messages()),
    );
    // Flow 1's B side starts at 150 ms; its A side sends from 0 ms (also starting at 150 ms: same flow).
    let late = FlowSpec::new(
        EndpointSpec::new(
            move |s| {
                log.borrow_mut().push((s.side, s.start));
                Box::new(thinstream_sim::toy::UnreliableDatagram::new(
                    s.local, s.peer,
                )) as Box<dyn Transport>
            },
            MessageSource::new(periodic(Instant::ZERO, Duration::from_millis(100), 3, 20)),
        ),
        datagram_endpoint(Sink::messages()),
    )
    .starting_at(ms(150));
    let result = Simulation::new(seed, &topology, vec![early, late])
        .unwrap()
        .run(ms(1000));
    assert_eq!(*started.borrow(), vec![(Side::A, ms(150))]);
    let times = |f| -> Vec<Instant> {
        result
            .endpoint(FlowId(f), Side::B)
            .app
            .received()
            .unwrap()
            .deliveries
            .iter()
            .map(|d| d.time)
            .collect()
    };
    assert_eq!(times(0), vec![ms(10), ms(110), ms(210)]);
    // The late source's schedule was already due at its start: 0 and 100 ms go out at 150 ms.
    assert_eq!(times(1), vec![ms(160), ms(160), ms(210)]);
}

// A datagram reaching an endpoint whose flow has not started is dropped and counted.
#[test]
fn datagrams_before_start_are_dropped() {
    let poke = EndpointSpec::new(
        |s| {
            Box::new(Scripted {
                deadline: None,
                after_fire: vec![],
                // Addressed to flow 1's B endpoint, which starts at 100 ms.
                poke: Some(Datagram {
                    src: s.local,
                    dst: "198.51.100.2:9899".parse().unwrap(),
                    payload: vec![0],
                }),
                log: Rc::new(RefCell::new(Log::default())),
            }) as Box<dyn Transport>
        },
        Idle,
    );
    let topology = Topology::TwoHost {
        forward: link(1, None),
        reverse: link(1, None),
    };
    let flows = vec![
        FlowSpec::new(poke, datagram_endpoint(Idle)),
        FlowSpec::new(datagram_endpoint(Idle), datagram_endpoint(Sink::messages()))
            .starting_at(ms(100)),
    ];
    let result = Simulation::new(Seed(15), &topology, flows)
        .unwrap()
        .run(ms(200));
    let b1 = result.endpoint(FlowId(1), Side::B);
    assert_eq!(b1.stats.dropped_before_start, 1);
    assert_eq!(b1.stats.datagrams_received, 0);
    assert_eq!(result.unroutable, 0);
}

// Digests off: the reports carry no per-stream digest, everything else
// (deliveries, what was sent) is as with them on.
#[test]
fn payload_digests_can_be_turned_off() {
    let seed = test_seed(9);
    let _r = Reproduce(seed);
    let run = |digests: bool| {
        let schedule: Vec<MessageSpec> = (0..20)
            .map(|i| MessageSpec {
                at: ms(1 + 10 * i),
                stream: (i % 2) as u16,
                bytes: 100,
                unordered: false,
            })
            .collect();
        let topology = Topology::TwoHost {
            forward: link(50, Some(10_000_000)),
            reverse: link(50, None),
        };
        let flow = FlowSpec::new(
            datagram_endpoint(MessageSource::new(schedule)),
            datagram_endpoint(Sink::messages()),
        );
        let mut sim = Simulation::new(seed, &topology, vec![flow]).unwrap();
        for side in [Side::A, Side::B] {
            let id = sim.endpoint_id(FlowId(0), side);
            sim.keep_app_digests(id, digests);
        }
        sim.run(ms(1000))
    };
    let (on, off) = (run(true), run(false));
    let parts = |r: &thinstream_sim::RunResult| {
        let source = r.endpoint(FlowId(0), Side::A).app.source().unwrap().clone();
        let sink = r
            .endpoint(FlowId(0), Side::B)
            .app
            .received()
            .unwrap()
            .clone();
        (source, sink)
    };
    let ((src_on, sink_on), (src_off, sink_off)) = (parts(&on), parts(&off));
    assert_eq!(src_on.streams.len(), 2);
    assert_eq!(sink_on.streams.len(), 2);
    assert!(src_off.streams.is_empty() && sink_off.streams.is_empty());
    assert_eq!(sink_on.deliveries, sink_off.deliveries);
    assert_eq!(sink_off.deliveries.len(), 20);
    assert_eq!(src_on.sent, src_off.sent);
    assert_eq!(
        verify_delivery(&src_on, &sink_on, true).unwrap().delivered,
        20
    );
}
