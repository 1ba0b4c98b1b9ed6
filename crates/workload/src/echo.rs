//! Request/response (echo) workload of 001 §IV.A.
//!
//! 001's load generator writes messages of a constant 64 octets with
//! exponentially distributed inter-arrival times (mean d = 10 ms, λ = 100/s in
//! its Figs. 4–6), round robin over N parallel TCP connections or N streams of
//! one SCTP association, with "nodelay" set. The echo server "waits until it
//! has received a complete message and returns it on the same connection or
//! stream pair"; the generator logs the response time.
//!
//! Here the generator produces the **requests** only (an [`IidStream`] with
//! constant size and exponential IAT, streams assigned round robin). The echo
//! side is the peer's behaviour, [`PeerBehaviour::Echo`](crate::PeerBehaviour):
//! the driver delivers each complete request to the peer application, which
//! immediately writes a message of the same size back on the same stream (or
//! connection index), with the same `unordered` flag. The response time of a
//! request is the instant its echo is delivered to the requester minus the
//! request's `at`, 001's metric.

use thinstream_base::{Duration, Instant, Rng};

use crate::dist::{IatDist, SizeDist};
use crate::thin::IidStream;

/// 001 §IV.A message size.
pub const DEFAULT_REQUEST_BYTES: u32 = 64;
/// 001 §IV.A mean inter-arrival time (λ = 100 /s).
pub const DEFAULT_MEAN_IAT: Duration = Duration::from_millis(10);

/// The request stream of an echo workload.
pub fn request_stream(
    start: Instant,
    bytes: u32,
    mean_iat: Duration,
    streams: u16,
    unordered: bool,
    rng: Rng,
) -> IidStream {
    IidStream::new(
        start,
        IatDist::Exponential { mean: mean_iat },
        SizeDist::Constant(bytes),
        streams,
        unordered,
        rng,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::take_messages;
    use thinstream_base::Seed;

    /// 64-byte requests, round robin over 3 streams, mean IAT 10 ms, CV ≈ 1.
    #[test]
    fn requests_follow_001() {
        let mut g = request_stream(
            Instant::ZERO,
            DEFAULT_REQUEST_BYTES,
            DEFAULT_MEAN_IAT,
            3,
            true,
            Seed(4).rng(),
        );
        let msgs = take_messages(&mut g, 100_000);
        assert!(msgs.iter().all(|m| m.bytes == 64 && m.unordered));
        assert!(msgs
            .iter()
            .enumerate()
            .all(|(i, m)| m.stream == (i % 3) as u16));
        let iats: Vec<f64> = msgs
            .windows(2)
            .map(|w| (w[1].at - w[0].at).as_millis_f64())
            .collect();
        let mean = iats.iter().sum::<f64>() / iats.len() as f64;
        let var = iats.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / iats.len() as f64;
        assert!((mean - 10.0).abs() < 0.15, "mean {mean}");
        assert!(
            (var.sqrt() / mean - 1.0).abs() < 0.03,
            "cv {}",
            var.sqrt() / mean
        );
    }
}
