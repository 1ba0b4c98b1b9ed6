//! What a run leaves behind: the header printed before it (master seed and
//! every derived parameter), and the result the metrics are computed from
//! (every endpoint's trace records with its flow and side, app reports,
//! per-link statistics, the optional capture).

use crate::app::AppReport;
use crate::{EndpointId, FlowId, LinkId, Side};
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use thinstream_base::trace::Record;
use thinstream_base::{Instant, Seed};
use thinstream_link::{LinkConfig, LinkStats};

/// The master seed and everything derived from it by name.
#[derive(Clone, Debug, PartialEq)]
pub struct RunHeader {
    pub master: Seed,
    /// Every derived seed with its label, in creation order.
    pub seeds: Vec<(String, Seed)>,
    /// Every endpoint label (`flow0.a`) with its address.
    pub endpoints: Vec<(String, SocketAddr)>,
    /// Every link label with its config.
    pub links: Vec<(String, LinkConfig)>,
}

impl RunHeader {
    /// The line a failing test or run prints.
    pub fn reproduce_hint(&self) -> String {
        format!("reproduce with THINSTREAM_SEED={}", self.master)
    }
}

impl fmt::Display for RunHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "master seed {}", self.master)?;
        for (label, addr) in &self.endpoints {
            writeln!(f, "  endpoint {label} at {addr}")?;
        }
        for (label, config) in &self.links {
            writeln!(f, "  {label}: {config:?}")?;
        }
        for (label, seed) in &self.seeds {
            writeln!(f, "  seed {label} = {seed}")?;
        }
        Ok(())
    }
}

/// Why a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The requested stop time was reached.
    StopTime,
    /// No event was pending.
    Idle,
    /// The event limit was reached.
    EventLimit,
    /// A transport misbehaved (never-ending output, a deadline that never
    /// moves); the message says which endpoint and when.
    Fault(String),
}

/// Counters kept by the engine for one endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    pub datagrams_sent: u64,
    pub bytes_sent: u64,
    pub datagrams_received: u64,
    pub bytes_received: u64,
    /// Transport timer events that fired (stale ones excluded).
    pub timer_fires: u64,
    pub app_events: u64,
    /// Datagrams that arrived before the endpoint's flow started.
    pub dropped_before_start: u64,
}

/// Everything one endpoint produced.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointResult {
    pub id: EndpointId,
    pub flow: FlowId,
    pub side: Side,
    pub addr: SocketAddr,
    pub peer: SocketAddr,
    pub seed: Seed,
    /// Every trace record the transport emitted, in order.
    pub records: Vec<Record>,
    pub app: AppReport,
    pub stats: EndpointStats,
    pub established: bool,
    pub closed: bool,
}

/// One link's identity and statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkResult {
    pub id: LinkId,
    pub label: String,
    pub seed: Seed,
    pub config: LinkConfig,
    pub stats: LinkStats,
}

/// The outcome of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    pub header: RunHeader,
    pub stop: StopReason,
    /// Virtual time when the run stopped.
    pub end: Instant,
    /// Events processed (stale timer events excluded).
    pub events: u64,
    /// Timer and stop events that were superseded before they came due
    /// (counted when they come due, or when the engine drops a crowd of
    /// superseded timer events from its queue earlier).
    pub stale_events: u64,
    /// Datagrams addressed to no known endpoint (dropped).
    pub unroutable: u64,
    /// Indexed by `EndpointId`: flow `i` has A at `2i`, B at `2i + 1`.
    pub endpoints: Vec<EndpointResult>,
    pub links: Vec<LinkResult>,
    /// The pcap file, if a capture was requested.
    pub pcap: Option<Vec<u8>>,
    /// Datagrams the capture could not represent (too large for one IP packet).
    pub pcap_skipped: u64,
}

impl RunResult {
    pub fn endpoint(&self, flow: FlowId, side: Side) -> &EndpointResult {
        &self.endpoints[crate::topology::endpoint_id(flow, side).0]
    }

    pub fn link(&self, label: &str) -> Option<&LinkResult> {
        self.links.iter().find(|l| l.label == label)
    }

    /// Writes the capture to `path`; an error if no capture was requested.
    pub fn write_pcap(&self, path: &Path) -> std::io::Result<()> {
        match &self.pcap {
            Some(bytes) => std::fs::write(path, bytes),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no capture was requested for this run (Simulation::capture_pcap)",
            )),
        }
    }
}
