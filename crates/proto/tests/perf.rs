//! Rough throughput of the association code (no link model, no parsing in
//! the harness): run with
//! `cargo test --release -p thinstream-proto --test perf -- --ignored --nocapture`.

use thinstream_base::drive::{AppEvent, Outgoing, Transport};
use thinstream_base::{Duration, Instant, Seed};
use thinstream_proto::testkit::{client_addr, server_addr};
use thinstream_proto::{Association, Config};

fn run(trace: bool, messages: usize, size: usize) -> (std::time::Duration, u64) {
    let mut cfg = Config::default();
    cfg.trace = trace;
    let mut now = Instant::ZERO;
    let mut c = Association::connect(cfg.clone(), now, client_addr(), server_addr(), Seed(1));
    let mut s = Association::accept(cfg, now, server_addr(), Seed(2));
    let payload = vec![0u8; size];
    let mut sent = 0;
    let mut delivered = 0;
    #[allow(clippy::disallowed_methods)]
    let wall = std::time::Instant::now();
    while delivered < messages {
        now += Duration::from_millis(1);
        if c.is_established() && sent < messages {
            if c.send(
                now,
                Outgoing {
                    stream: 0,
                    unordered: false,
                    payload: &payload,
                },
            )
            .is_ok()
            {
                sent += 1;
            }
        }
        while let Some(d) = c.poll_transmit(now) {
            s.handle_datagram(now, d);
        }
        while let Some(d) = s.poll_transmit(now) {
            c.handle_datagram(now, d);
        }
        for a in [&mut c, &mut s] {
            if a.poll_timeout().is_some_and(|t| t <= now) {
                a.handle_timeout(now);
            }
            while a.poll_trace().is_some() {}
        }
        while let Some(e) = s.poll_app() {
            if matches!(e, AppEvent::Received { .. }) {
                delivered += 1;
            }
        }
        while c.poll_app().is_some() {}
    }
    (
        wall.elapsed(),
        c.stats().packets_sent + s.stats().packets_sent,
    )
}

#[test]
#[ignore]
fn association_throughput() {
    for (trace, size) in [(false, 100), (true, 100), (true, 1400)] {
        let (t, packets) = run(trace, 200_000, size);
        println!(
            "trace={trace} size={size}: {packets} packets in {t:?} = {:.0} packets/s",
            packets as f64 / t.as_secs_f64()
        );
    }
}
