//! Metrics that span two flows or several runs: request/response time (001
//! §IV.A) and message transfer time per loss position (003 §3).

use std::collections::BTreeMap;

use thinstream_base::{Duration, Instant};

use crate::error::MetricsError;
use crate::flow::FlowAnalysis;

/// The response time of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResponseSample {
    /// The request's message id (forward flow).
    pub request: u64,
    pub stream: u16,
    /// When the client application sent the request.
    pub sent: Instant,
    /// Request send → echo delivered to the client application; `None` if
    /// the echo never arrived (or was never sent).
    pub response: Option<Duration>,
}

/// Response times of an echo workload (001 §IV.A: "the load generator
/// calculates the response time" from sending a request to receiving its
/// echo).
///
/// `forward` is the client → server flow (client records as sender, server
/// records as receiver), `reverse` the server → client flow (server records
/// as sender, client records as receiver). The echo server answers each
/// request on the same stream (001 §IV.A), so the `k`-th message the server
/// submits on stream `s` is the echo of the `k`-th request on `s`. With
/// TCP (one stream) that is the `k`-th message of the connection; the echo's
/// byte range comes from the server's own `Submitted` record, so the byte
/// stream needs no message boundaries of its own. Returned in request order.
pub fn response_times(
    forward: &FlowAnalysis,
    reverse: &FlowAnalysis,
) -> Result<Vec<ResponseSample>, MetricsError> {
    let mut echoes: BTreeMap<u16, Vec<Option<Instant>>> = BTreeMap::new();
    for m in reverse.messages() {
        echoes.entry(m.stream).or_default().push(m.delivered);
    }
    let mut position: BTreeMap<u16, usize> = BTreeMap::new();
    let mut out = Vec::with_capacity(forward.messages().len());
    for m in forward.messages() {
        let k = position.entry(m.stream).or_insert(0);
        let echo = echoes
            .get(&m.stream)
            .and_then(|e| e.get(*k))
            .copied()
            .flatten();
        *k += 1;
        out.push(ResponseSample {
            request: m.message,
            stream: m.stream,
            sent: m.sent,
            response: echo.map(|t| t.saturating_duration_since(m.sent)),
        });
    }
    for (stream, e) in &echoes {
        let requests = position.get(stream).copied().unwrap_or(0);
        if e.len() > requests {
            return Err(MetricsError::UnpairedEcho {
                stream: *stream,
                index: requests,
            });
        }
    }
    Ok(out)
}

/// MTT of the message that lost `unit` (a TSN offset or byte offset) in a
/// run where the emulator dropped exactly that packet (003 §3).
pub fn transfer_time_at_loss(flow: &FlowAnalysis, unit: u64) -> Option<Duration> {
    flow.message_transfer_time(flow.message_at_unit(unit)?.message)
}

/// Relative MTT reduction `(standard − improved) / standard` (003 §3,
/// "average reduction in MTT"; positive when `improved` is faster). `None`
/// if `standard` is zero.
pub fn mtt_reduction(standard: Duration, improved: Duration) -> Option<f64> {
    if standard.is_zero() {
        return None;
    }
    Some((standard.as_nanos() as f64 - improved.as_nanos() as f64) / standard.as_nanos() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduction() {
        let r = mtt_reduction(Duration::from_millis(400), Duration::from_millis(300)).unwrap();
        assert_eq!(r, 0.25);
        assert_eq!(
            mtt_reduction(Duration::ZERO, Duration::from_millis(1)),
            None
        );
        let worse = mtt_reduction(Duration::from_millis(100), Duration::from_millis(150)).unwrap();
        assert_eq!(worse, -0.5);
    }
}
