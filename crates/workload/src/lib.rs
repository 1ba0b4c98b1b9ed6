//! Traffic generators: thin streams, application profiles, signalling bursts,
//! echo, bulk, HTTP-like cross traffic, trace replay.
//!
//! Every generator is sans-IO and deterministic: it never reads a clock, its
//! time origin is the `start` [`Instant`] handed to it, and its only source of
//! randomness is a [`thinstream_base::Rng`] derived from the caller's
//! [`Seed`](thinstream_base::Seed). Two generators built from the same
//! configuration, start and seed yield identical sequences.
//!
//! # Two kinds of output
//!
//! * **Messages** ([`Message`], [`Generator`]): what one application endpoint
//!   wants to write, when, on which stream and how large. Thin streams,
//!   profiles of 002 Table 2.1, 003 bursts, the 001 echo requests, greedy bulk
//!   and trace replay produce messages.
//! * **Flows** ([`http::Flow`], [`http::HttpCrossTraffic`]): the HTTP-like cross
//!   traffic of 000 §6.2 / 002 §5.1.3 is a population of clients that each open
//!   transfers of a random size; its output is "client *c* starts a transfer of
//!   *n* bytes at *t*", and the simulator turns each flow into a (TCP) transfer.
//!
//! Scenario files describe either kind with one serde type, [`WorkloadConfig`]
//! (see [`config`]); [`WorkloadConfig::build`] makes message generators and
//! [`WorkloadConfig::build_flows`] makes the cross-traffic generator.
//!
//! # Contract with the driver (simulator or socket driver)
//!
//! * [`Generator::next_message`] returns messages in non-decreasing `at`
//!   order. The driver pulls one message, waits until `at` (virtual time), hands
//!   it to the transport, then pulls the next. A generator may be infinite (a
//!   thin stream without `count`/`duration`, bulk without `total-bytes`): never
//!   collect one without a bound.
//! * `stream` is the SCTP stream index, or the index of the parallel TCP
//!   connection when a workload is run over N TCP connections (001 §IV.A).
//!   [`WorkloadConfig::stream_count`] says how many streams/connections the
//!   workload needs.
//! * `unordered` asks for SCTP unordered delivery (the U bit); TCP ignores it.
//! * Greedy bulk ([`bulk`]) yields every message with `at = start`: it always
//!   has data, and the driver paces it by pulling the next message only when
//!   the transport's send buffer accepts more.
//! * Echo ([`echo`]): the generator produces the requests only; the peer's
//!   behaviour is [`PeerBehaviour::Echo`] (see [`WorkloadConfig::peer_behaviour`]):
//!   the receiving side writes each complete message back, same size, same
//!   stream/connection, same `unordered` flag, as soon as it is delivered.

pub mod bulk;
pub mod bursts;
pub mod config;
pub mod dist;
pub mod echo;
mod error;
pub mod http;
pub mod jitter;
pub mod profiles;
pub mod serde_duration;
pub mod thin;
pub mod trace;

pub use config::{PeerBehaviour, WorkloadConfig};
pub use error::WorkloadError;
pub use http::{Flow, HttpClient, HttpCrossTraffic};
pub use jitter::TimerJitter;
pub use profiles::ProfileName;

use thinstream_base::Instant;

/// What the application wants to send next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// When the application hands the message to the transport.
    pub at: Instant,
    /// SCTP stream index, or index of the parallel TCP connection.
    pub stream: u16,
    /// Application payload size in bytes (user message size, not wire size).
    pub bytes: u32,
    /// Request unordered delivery (SCTP U bit); ignored by TCP.
    pub unordered: bool,
}

/// A source of application messages.
pub trait Generator {
    /// The next message, at or after the previous one (`None` = finished).
    /// Deterministic given the configuration, start instant and seed.
    fn next_message(&mut self) -> Option<Message>;

    /// The generator as an [`Iterator`] of messages (for drivers that take a
    /// schedule as an iterator; `Box<dyn Generator + Send>` works too).
    fn into_messages(self) -> Messages<Self>
    where
        Self: Sized,
    {
        Messages(self)
    }
}

/// Iterator adapter over a [`Generator`] (see [`Generator::into_messages`]).
#[derive(Debug)]
pub struct Messages<G>(pub G);

impl<G: Generator> Iterator for Messages<G> {
    type Item = Message;
    fn next(&mut self) -> Option<Message> {
        self.0.next_message()
    }
}

impl<G: Generator + ?Sized> Generator for Box<G> {
    fn next_message(&mut self) -> Option<Message> {
        (**self).next_message()
    }
}

/// Pulls at most `limit` messages from a generator (the bound keeps infinite
/// generators safe to collect).
pub fn take_messages(generator: &mut dyn Generator, limit: usize) -> Vec<Message> {
    let mut out = Vec::with_capacity(limit.min(1 << 16));
    while out.len() < limit {
        match generator.next_message() {
            Some(m) => out.push(m),
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinstream_base::{Duration, Seed};

    #[test]
    fn boxed_generator_iterates() {
        let cfg = WorkloadConfig::Constant {
            iat: Duration::from_millis(10),
            bytes: 5,
            streams: 1,
            unordered: false,
            count: Some(3),
            duration: None,
        };
        let g = cfg.build(Instant::ZERO, Seed(0)).unwrap();
        let at: Vec<u64> = g
            .into_messages()
            .map(|m| m.at.as_nanos() / 1_000_000)
            .collect();
        assert_eq!(at, [0, 10, 20]);
    }
}
