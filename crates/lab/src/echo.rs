//! Request/response over echo peers (001 §IV.A): the TCP echo
//! peer, response times in results.json, and the head-of-line model's
//! prediction beside them (`thinstream_model::hol`, 001 §III).
//!
//! TCP is a byte stream, so a TCP echo peer cannot see message boundaries.
//! The requests of the echo workloads have a fixed size, so [`FramedEcho`]
//! cuts the received bytes into requests of that size and writes each one
//! back whole: its `k`-th write is the answer to the `k`-th request, which
//! is what `metrics::response_times` pairs (the client "frames responses by
//! size": a response is complete when its last byte is delivered).
//!
//! 001's N TCP connections (§III.E) are modelled by splitting a workload
//! over N streams into one connection per stream (see `runner`).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use thinstream_base::drive::{AppEvent, SendError};
use thinstream_base::{Duration, Probability};
use thinstream_link::LossModel;
use thinstream_metrics::{LatencyMs, LatencyStats, ResponseSample};
use thinstream_model::{HolParams, Scheme};
use thinstream_sim::app::{EchoReport, SinkReport};
use thinstream_sim::{App, AppCtx, AppReport, Sink};
use thinstream_workload::WorkloadConfig;

use crate::scenario::{Scenario, SweepPoint, TopologySpec, TransportKind, VariantSpec};
use crate::transport::TransportConfig;

/// The fixed request size of a workload, if it has one (what a TCP echo
/// peer needs to find the requests in the byte stream).
pub fn fixed_request_bytes(w: &WorkloadConfig) -> Option<u32> {
    match w {
        WorkloadConfig::Echo { bytes, .. } | WorkloadConfig::Constant { bytes, .. } => Some(*bytes),
        _ => None,
    }
}

/// A TCP echo peer: writes back every complete `size`-byte request.
#[derive(Debug)]
pub struct FramedEcho {
    size: usize,
    partial: Vec<u8>,
    waiting: VecDeque<Vec<u8>>,
    echoed: u64,
    rejected: Vec<SendError>,
    sink: Sink,
}

impl FramedEcho {
    pub fn new(size: u32) -> FramedEcho {
        FramedEcho {
            size: (size as usize).max(1),
            partial: Vec::new(),
            waiting: VecDeque::new(),
            echoed: 0,
            rejected: Vec::new(),
            sink: Sink::stream(),
        }
    }

    fn flush(&mut self, ctx: &mut AppCtx<'_>) {
        while let Some(payload) = self.waiting.front() {
            match ctx.send(0, false, payload) {
                Ok(_) => self.echoed += 1,
                Err(SendError::NotConnected | SendError::BufferFull) => return,
                Err(e) => self.rejected.push(e),
            }
            self.waiting.pop_front();
        }
    }
}

impl App for FramedEcho {
    fn on_start(&mut self, _ctx: &mut AppCtx<'_>) {}

    fn on_event(&mut self, ctx: &mut AppCtx<'_>, event: AppEvent) {
        if let AppEvent::Received { payload, .. } = &event {
            self.partial.extend_from_slice(payload);
            while self.partial.len() >= self.size {
                let rest = self.partial.split_off(self.size);
                self.waiting
                    .push_back(std::mem::replace(&mut self.partial, rest));
            }
        }
        let retry = matches!(
            event,
            AppEvent::Received { .. } | AppEvent::Writable | AppEvent::Established
        );
        self.sink.on_event(ctx, event);
        if retry {
            self.flush(ctx);
        }
    }

    fn on_timer(&mut self, _ctx: &mut AppCtx<'_>) {}

    fn finish(self: Box<Self>) -> AppReport {
        let received: SinkReport = match Box::new(self.sink).finish() {
            AppReport::Sink(r) => r,
            // `Sink::finish` always reports a sink.
            _ => unreachable!("Sink::finish returns AppReport::Sink"),
        };
        AppReport::Echo(EchoReport {
            echoed: self.echoed,
            rejected: self.rejected,
            waiting: self.waiting.len(),
            received,
        })
    }
}

/// Response times of a variant, pooled over its runs and echo flows.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResponseResult {
    pub requests: usize,
    /// Requests whose echo arrived.
    pub answered: usize,
    pub response_ms: Option<LatencyMs>,
    /// The response time at the fixed quantiles of
    /// [`crate::results::CDF_QUANTILES`] (001 Fig. 6 plots its complement).
    #[serde(default)]
    pub response_cdf_ms: Vec<crate::results::CdfPoint>,
}

pub fn pool_responses<'a>(samples: impl Iterator<Item = &'a ResponseSample>) -> ResponseResult {
    let mut requests = 0;
    let mut times: Vec<Duration> = Vec::new();
    for s in samples {
        requests += 1;
        times.extend(s.response);
    }
    let mut sorted: Vec<u64> = times.iter().map(|d| d.as_nanos()).collect();
    sorted.sort_unstable();
    ResponseResult {
        requests,
        answered: times.len(),
        response_ms: LatencyStats::from_durations(times)
            .as_ref()
            .map(LatencyMs::from),
        response_cdf_ms: crate::results::cdf_of_sorted(&sorted),
    }
}

/// The head-of-line model's prediction for one variant (001 §III, eq. 1-5).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModelResult {
    pub scheme: String,
    pub rtt_ms: f64,
    pub rto_ms: f64,
    pub loss: f64,
    pub interarrival_ms: f64,
    pub detection_ms: f64,
    pub by_fast_retransmit: bool,
    pub queued: u64,
    pub delay_increase_ms: f64,
    pub one_way_delay_ms: f64,
    pub response_time_ms: f64,
    /// The same prediction at the loss rates of [`MODEL_CURVE_LOSS`] (all
    /// else equal), for the report's response-time-vs-loss plot (001 Fig. 4).
    pub curve: Vec<ModelPoint>,
}

/// One point of the model's response time as a function of the loss rate.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct ModelPoint {
    pub loss: f64,
    pub response_time_ms: f64,
}

/// Loss rates at which the model curve is evaluated (001 Fig. 4 spans 0-5%).
pub const MODEL_CURVE_LOSS: [f64; 11] = [
    0.0, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
];

/// The prediction for an echo scenario on a two-host path with Bernoulli
/// loss: `HolParams::testbed_001(p)` (001's δ) with the scenario's RTT,
/// the variant's RTO floor as `RTO` for SCTP (001 §III.B: the RTO is at its
/// minimum on such a path), RTT + the floor for TCP (001 §IV.C), and the
/// workload's total message rate. `None` when the
/// scenario does not fit the model (no echo flow, not two-host, no
/// Bernoulli loss, a non-exponential workload).
pub fn predict(
    scenario: &Scenario,
    config: &TransportConfig,
    variant: &VariantSpec,
    point: &[SweepPoint],
) -> Option<ModelResult> {
    let variant_unordered = variant.unordered;
    let flows = scenario.flows_at(variant, point);
    let entry = flows
        .iter()
        .find(|f| f.is_measured() && matches!(f.workload, WorkloadConfig::Echo { .. }))?;
    let WorkloadConfig::Echo {
        mean_iat,
        streams,
        unordered,
        ..
    } = &entry.workload
    else {
        return None;
    };
    let TopologySpec::TwoHost { forward, reverse } = &scenario.topology else {
        return None;
    };
    let reverse = reverse.as_ref().unwrap_or(forward);
    // A sweep point replaces the loss model or the delay of both
    // directions (`runner::build_topology`); the model follows it.
    let mut p = match forward.0.loss {
        Some(LossModel::Bernoulli { p }) => Some(p),
        _ => None,
    };
    let mut rtt = forward.0.delay + reverse.0.delay;
    for x in point {
        match *x {
            SweepPoint::Loss(q) => p = Some(q),
            SweepPoint::Delay(d) => rtt = d + d,
            SweepPoint::DropDataPacket(_) => return None,
            // The model has no serialisation time.
            SweepPoint::Iat(_) | SweepPoint::Flows(_) | SweepPoint::Rate(_) => {}
        }
    }
    let p: Probability = p?;
    let rtt: Duration = rtt;
    let (scheme, rto) = match config {
        TransportConfig::Sctp(c) if *unordered || variant_unordered => {
            (Scheme::SctpUnordered, c.rto_min)
        }
        TransportConfig::Sctp(c) => (
            Scheme::SctpStreams {
                streams: u32::from((*streams).max(1)),
            },
            c.rto_min,
        ),
        // Linux TCP's RTO on a steady path is the RTT plus its 200 ms
        // floor on the variance term, which 001 §IV.C states as
        // "RTO = RTT + 200 ms"; lksctp's RTO sits at its floor instead.
        TransportConfig::Tcp(c) => (
            Scheme::TcpConnections {
                connections: u32::from((*streams).max(1)),
            },
            rtt.saturating_add(c.rto_min),
        ),
    };
    let mut params = HolParams::testbed_001(p);
    params.rtt = rtt;
    params.rto = rto;
    params.interarrival = *mean_iat;
    let pr = params.predict(scheme).ok()?;
    let ms = |d: Duration| d.as_nanos() as f64 / 1e6;
    let curve = MODEL_CURVE_LOSS
        .iter()
        .filter_map(|q| {
            let mut at = params;
            at.loss = Probability::new(*q)?;
            let r = at.predict(scheme).ok()?;
            Some(ModelPoint {
                loss: *q,
                response_time_ms: r.response_time_ms,
            })
        })
        .collect();
    Some(ModelResult {
        scheme: format!("{scheme:?}"),
        rtt_ms: ms(rtt),
        rto_ms: ms(rto),
        loss: p.get(),
        interarrival_ms: ms(*mean_iat),
        detection_ms: ms(pr.detection),
        by_fast_retransmit: pr.by_fast_retransmit,
        queued: pr.queued,
        delay_increase_ms: pr.delay_increase_ms,
        one_way_delay_ms: pr.one_way_delay_ms,
        response_time_ms: pr.response_time_ms,
        curve,
    })
}

/// Whether flows of this kind carrying `streams` streams are split into one
/// connection per stream (TCP has one ordered byte stream per connection).
pub fn splits(kind: TransportKind, streams: u16) -> bool {
    kind == TransportKind::Tcp && streams > 1
}
