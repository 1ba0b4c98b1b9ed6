//! A dumbbell with mixed real transports: an SCTP thin stream shares a
//! drop-tail bottleneck with a TCP bulk transfer. Both deliver everything
//! exactly once (TCP: the byte stream, compared by digest) while the queue
//! overflows.

mod common;

use common::*;
use thinstream_base::{Instant, Transport};
use thinstream_link::{Bottleneck, DropCause};
use thinstream_proto::{Association, Config};
use thinstream_sim::app::verify_delivery;
use thinstream_sim::{
    Access, Dumbbell, EndpointSetup, EndpointSpec, FlowId, FlowSpec, MessageSource, MessageSpec,
};
use thinstream_sim::{CapturePoint, Side, Simulation, Sink, Topology};
use thinstream_tcp::segment::Segment;
use thinstream_tcp::{TcpConfig, TcpConnection};

fn tcp_client(s: &EndpointSetup) -> Box<dyn Transport> {
    let mut cfg = TcpConfig::newreno();
    cfg.trace = true;
    let iss = s.seed.rng().next_u32();
    Box::new(TcpConnection::connect(cfg, s.local, s.peer, iss, s.start).unwrap())
}

fn tcp_server(s: &EndpointSetup) -> Box<dyn Transport> {
    let mut cfg = TcpConfig::newreno();
    cfg.trace = true;
    let iss = s.seed.rng().next_u32();
    Box::new(TcpConnection::listen(cfg, s.local, iss).unwrap())
}

// SCTP thin stream and TCP bulk through a 1 Mbit/s, 20-packet drop-tail bottleneck.
#[test]
fn sctp_thin_stream_and_tcp_bulk_share_a_bottleneck() {
    let seed = test_seed(41);
    let _r = Reproduce(seed);
    let mut bottleneck = link(20, None);
    bottleneck.bottleneck = Some(Bottleneck {
        rate: thinstream_base::Bitrate(1_000_000),
        overhead_bytes: 28,
        limit_packets: Some(20),
        limit_bytes: None,
    });
    let topology = Topology::Dumbbell(Dumbbell {
        bottleneck_forward: bottleneck,
        bottleneck_reverse: link(20, None),
        access: vec![
            Access {
                a: link(5, None),
                b: link(1, None),
            },
            Access {
                a: link(15, None),
                b: link(1, None),
            },
        ],
    });
    let thin: Vec<MessageSpec> = (0..150u64)
        .map(|i| MessageSpec {
            at: Instant::from_millis(200 * i),
            stream: 0,
            bytes: 120,
            unordered: false,
        })
        .collect();
    // 400 kB written at once: far more than the path holds, so the queue overflows.
    let bulk: Vec<MessageSpec> = (0..400)
        .map(|_| MessageSpec {
            at: Instant::ZERO,
            stream: 0,
            bytes: 1000,
            unordered: false,
        })
        .collect();
    let flows = vec![
        FlowSpec::new(
            EndpointSpec::new(
                |s: &EndpointSetup| {
                    Box::new(Association::connect(
                        Config::default().with_trace(),
                        s.start,
                        s.local,
                        s.peer,
                        s.seed,
                    )) as Box<dyn Transport>
                },
                MessageSource::new(thin),
            ),
            EndpointSpec::new(
                |s: &EndpointSetup| {
                    Box::new(Association::accept(
                        Config::default().with_trace(),
                        s.start,
                        s.local,
                        s.seed,
                    )) as Box<dyn Transport>
                },
                Sink::messages(),
            ),
        ),
        FlowSpec::new(
            EndpointSpec::new(tcp_client, MessageSource::new(bulk)),
            EndpointSpec::new(tcp_server, Sink::stream()),
        )
        .with_port(5001),
    ];
    let mut sim = Simulation::new(seed, &topology, flows).unwrap();
    sim.capture_pcap(CapturePoint::Send);
    let result = sim.run(Instant::from_secs(120));
    let bn = &result.link("link.bottleneck.forward").unwrap().stats;
    assert!(
        bn.dropped(DropCause::QueueOverflow).packets > 0,
        "the bottleneck never overflowed: {bn:?}"
    );
    for f in 0..2 {
        let source = result.endpoint(FlowId(f), Side::A).app.source().unwrap();
        let sink = result.endpoint(FlowId(f), Side::B).app.received().unwrap();
        assert!(
            source.rejected.is_empty(),
            "flow {f}: {:?}",
            source.rejected
        );
        assert_eq!(source.waiting, 0, "flow {f} still had data waiting");
        verify_delivery(source, sink, true).unwrap_or_else(|e| panic!("flow {f}: {e}"));
    }
    let tcp_bytes = result
        .endpoint(FlowId(1), Side::B)
        .app
        .received()
        .unwrap()
        .streams[&0]
        .bytes;
    assert_eq!(tcp_bytes, 400_000);
    assert_eq!(
        result
            .endpoint(FlowId(0), Side::B)
            .app
            .received()
            .unwrap()
            .deliveries
            .len(),
        150
    );
    // The TCP flow's address carries its own port.
    assert_eq!(
        result.endpoint(FlowId(1), Side::A).addr.to_string(),
        "192.0.2.2:5001"
    );
    // The capture holds every datagram sent: SCTP in UDP, and the TCP
    // flow's segments as TCP packets that decode as such.
    let packets = capture_of_everything_sent(&result);
    let mut tcp = 0;
    for p in &packets {
        if p.src.port() == 5001 {
            assert_eq!(p.protocol, 6);
            Segment::decode(&p.payload, p.src, p.dst).unwrap();
            tcp += 1;
        } else {
            assert_eq!(p.protocol, 17);
        }
    }
    assert!(
        tcp > 400 && tcp < packets.len(),
        "{tcp} of {}",
        packets.len()
    );
}
