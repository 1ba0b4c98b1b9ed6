//! Helpers shared by the integration tests: seeds from `THINSTREAM_SEED`,
//! a reproduce hint on failure, and small scenario builders.

#![allow(dead_code, unreachable_pub)]

use thinstream_base::{Bitrate, Duration, Instant, Seed};
use thinstream_link::{Bottleneck, LinkConfig};
use thinstream_sim::pcap::{self, CapturedPacket};
use thinstream_sim::toy::{StopAndWait, UnreliableDatagram};
use thinstream_sim::{App, EndpointSpec, MessageSpec, RunResult};

/// The seed of a test: `THINSTREAM_SEED` if set (to replay a failure), else `default`.
pub fn test_seed(default: u64) -> Seed {
    match std::env::var("THINSTREAM_SEED") {
        Ok(v) => Seed(v.trim().parse().expect("THINSTREAM_SEED must be a u64")),
        Err(_) => Seed(default),
    }
}

/// Prints the reproduce line if the test panics while this guard lives.
pub struct Reproduce(pub Seed);

impl Drop for Reproduce {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("reproduce with THINSTREAM_SEED={}", self.0);
        }
    }
}

/// A link with a fixed delay and, optionally, a rate limit without overhead.
pub fn link(delay_ms: u64, rate_bps: Option<u64>) -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(delay_ms),
        bottleneck: rate_bps.map(|r| Bottleneck {
            rate: Bitrate(r),
            overhead_bytes: 0,
            limit_packets: None,
            limit_bytes: None,
        }),
        ..LinkConfig::default()
    }
}

pub fn datagram_endpoint(app: impl App + 'static) -> EndpointSpec {
    EndpointSpec::new(|s| Box::new(UnreliableDatagram::new(s.local, s.peer)), app)
}

pub fn stop_and_wait_endpoint(rto: Duration, app: impl App + 'static) -> EndpointSpec {
    EndpointSpec::new(
        move |s| Box::new(StopAndWait::new(s.local, s.peer, rto, 1000)),
        app,
    )
}

/// `count` messages of `bytes` on stream 0, ordered, every `iat` from `start`.
pub fn periodic(start: Instant, iat: Duration, count: u64, bytes: u32) -> Vec<MessageSpec> {
    (0..count)
        .map(|i| MessageSpec {
            at: start + iat * i,
            stream: 0,
            bytes,
            unordered: false,
        })
        .collect()
}

/// The run's capture read back, checked to hold every datagram the
/// endpoints sent (a capture at the send point) and nothing skipped.
#[allow(dead_code)] // not every test file captures
pub fn capture_of_everything_sent(result: &RunResult) -> Vec<CapturedPacket> {
    let packets = pcap::read(result.pcap.as_ref().expect("a capture was asked for")).unwrap();
    let sent: u64 = result
        .endpoints
        .iter()
        .map(|e| e.stats.datagrams_sent)
        .sum();
    assert_eq!(packets.len() as u64, sent);
    assert_eq!(result.pcap_skipped, 0);
    packets
}
