//! HTTP-like cross traffic on a dumbbell (000 §6.2; 002 §5.1.3, §5.2.2): an `http` workload entry becomes one TCP connection per
//! client of `thinstream_workload::http`.
//!
//! Model, and how it simplifies 002's `http-client`/`http-server` pair
//! (002 App. B):
//!
//! * **One persistent connection per client.** The documents open a
//!   connection per transfer. Here client *c*'s transfers all go over one
//!   connection, opened at the entry's `start`; a transfer that is requested
//!   while an earlier one is still being sent waits behind it (the client is
//!   still open-loop: requests do not wait for answers). What is lost is the
//!   per-transfer handshake and the slow start from the initial window of
//!   every new transfer (the TCP model has no restart-after-idle either, so
//!   a persistent connection keeps the window it had). Short transfers are
//!   the majority (median ≈ 1.9 kB), so per-transfer connections would make
//!   the traffic slightly burstier at the start of each transfer; the
//!   offered load (what sets the loss rate) is the same.
//! * **The server writes, the client reads.** The bulk of the bytes crosses
//!   the bottleneck from the server side (002 App. B), in the same direction
//!   as the measured thin stream, so the server is flow side A (left of the
//!   bottleneck) and the client side B. Side A also opens the connection
//!   (the simulator's initiator); with a persistent connection opened once
//!   at the start, which end opened it does not change the transfers. Each transfer is written at its
//!   request time in [`CHUNK`]-byte writes: the TCP send buffer paces the
//!   writes (`sim::MessageSource` retries on `Writable`). The request bytes
//!   themselves are not modelled (a few hundred bytes against a mean
//!   transfer of 9200 B).
//! * **RTTs.** Client *i* gets RTT `rtt_min + i·(rtt_max − rtt_min)/(n − 1)`
//!   (5..405 ms for 81 clients, 002 §5.2.2) by a delay on its A-side access
//!   link (which the packets cross twice per round trip): `(rtt − bottleneck
//!   delays) / 2`, floored at zero. The B-side access link is perfect.
//! * Cross traffic is not measured; its tracing is off (see `plan`). The
//!   bottleneck's drop rate and utilisation are reported instead
//!   (`results.json` `bottleneck`).

use thinstream_base::{Duration, Instant, Seed};
use thinstream_link::LinkConfig;
use thinstream_sim::{Access, MessageSpec};
use thinstream_workload::{WorkloadConfig, WorkloadError};

/// Bytes per application write of a transfer.
pub const CHUNK: u32 = 16 * 1024;

/// Client `c`'s writes: each transfer that starts before `until`, split
/// into [`CHUNK`]-byte writes due at its request time. Clients are in index
/// order; the iterators are lazy (a 64 MB transfer is 4096 writes).
pub fn client_schedules(
    workload: &WorkloadConfig,
    start: Instant,
    seed: Seed,
    until: Instant,
) -> Result<Vec<impl Iterator<Item = MessageSpec> + 'static>, WorkloadError> {
    let generator = workload.build_flows(start, seed)?;
    let clients = generator.clients().len();
    let mut transfers: Vec<Vec<(Instant, u64)>> = vec![Vec::new(); clients];
    for flow in generator.take_while(|f| f.start < until) {
        if let Some(list) = transfers.get_mut(usize::from(flow.client)) {
            list.push((flow.start, flow.bytes));
        }
    }
    Ok(transfers
        .into_iter()
        .map(|list| {
            list.into_iter().flat_map(|(at, bytes)| {
                let chunks = bytes.div_ceil(u64::from(CHUNK));
                (0..chunks).map(move |k| MessageSpec {
                    at,
                    stream: 0,
                    bytes: (bytes - k * u64::from(CHUNK)).min(u64::from(CHUNK)) as u32,
                    unordered: false,
                })
            })
        })
        .collect())
}

/// The access links that give each client its RTT, given the sum of the
/// bottleneck's forward and reverse delays. Empty if the workload is not a
/// valid `http` workload (the run then fails with the workload's error).
pub fn client_access(workload: &WorkloadConfig, bottleneck_rtt: Duration) -> Vec<Access> {
    let Ok(generator) = workload.build_flows(Instant::ZERO, Seed(0)) else {
        return Vec::new();
    };
    generator
        .clients()
        .iter()
        .map(|c| Access {
            a: LinkConfig {
                delay: Duration::from_nanos(c.rtt.saturating_sub(bottleneck_rtt).as_nanos() / 2),
                ..LinkConfig::default()
            },
            b: LinkConfig::default(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(gap: &str) -> WorkloadConfig {
        toml::from_str(&format!("kind = \"http\"\nmean-request-gap = \"{gap}\"")).unwrap()
    }

    // Every byte of every transfer is written, in chunks of at most CHUNK,
    // at the transfer's request time; 81 clients by default.
    #[test]
    fn schedules_split_transfers_into_chunks() {
        let w = http("655ms");
        let until = Instant::ZERO + Duration::from_secs(60);
        let total: u64 = w
            .build_flows(Instant::ZERO, Seed(3))
            .unwrap()
            .take_while(|f| f.start < until)
            .map(|f| f.bytes)
            .sum();
        let schedules = client_schedules(&w, Instant::ZERO, Seed(3), until).unwrap();
        assert_eq!(schedules.len(), 81);
        let mut written = 0u64;
        for s in schedules {
            let writes: Vec<MessageSpec> = s.collect();
            assert!(writes.windows(2).all(|p| p[0].at <= p[1].at));
            assert!(writes.iter().all(|m| m.bytes >= 1 && m.bytes <= CHUNK));
            written += writes.iter().map(|m| u64::from(m.bytes)).sum::<u64>();
        }
        assert_eq!(written, total);
        assert!(total > 0);
    }

    // RTTs 5..405 ms: the A-side access delay is half of what the bottleneck
    // does not already give.
    #[test]
    fn access_links_give_each_client_its_rtt() {
        let a = client_access(&http("655ms"), Duration::from_millis(4));
        assert_eq!(a.len(), 81);
        assert_eq!(a[0].a.delay, Duration::from_nanos(500_000));
        assert_eq!(
            a[80].a.delay,
            Duration::from_millis(200) + Duration::from_micros(500)
        );
        assert_eq!(a[80].b, LinkConfig::default());
        let b = client_access(&http("655ms"), Duration::from_millis(100));
        assert_eq!(b[0].a.delay, Duration::ZERO, "floored at zero");
    }
}
