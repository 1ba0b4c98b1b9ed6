//! Exact virtual times of retransmission timeouts: exponential backoff
//! versus linear timeouts (002 §4.1.3).

mod common;
use common::*;
use thinstream_base::trace::{Record, TxReason};
use thinstream_base::Instant;
use thinstream_tcp::{InitialWindow, TcpConfig};

/// One 100-byte message at 1 s on a 100 ms RTT path; its first `lost`
/// transmissions are dropped. Returns the send times of unit 0.
fn thin_stream_times(profile: &str, lost: u64) -> Vec<(Instant, TxReason)> {
    let cfg = TcpConfig::from_profile(profile).unwrap();
    let mut net = Net::pair(&cfg, &cfg, ms(50));
    let mut dropped = 0;
    net.drop_rule = Some(Box::new(move |p| {
        if p.from == 0 && p.units.is_some_and(|(s, _)| s == 0) && dropped < lost {
            dropped += 1;
            return true;
        }
        false
    }));
    net.run_until(at(1000));
    // Handshake RTT sample 100 ms → Linux RTO = SRTT + max(RTTVAR, 200 ms) = 300 ms.
    assert_eq!(net.eps[0].rto(), ms(300), "{profile}");
    net.send(0, &[7; 100]);
    net.run_until(at(20_000));
    assert_eq!(net.rx[1], vec![7; 100], "{profile}");
    net.sends_of(0, 0)
}

#[test]
fn thin_stream_backs_off_exponentially_without_lt() {
    let times = thin_stream_times("linux-2.6.23", 5);
    let expect: Vec<(Instant, TxReason)> = [1000, 1300, 1900, 3100, 5500, 10300]
        .iter()
        .enumerate()
        .map(|(i, t)| {
            (
                at(*t),
                if i == 0 {
                    TxReason::New
                } else {
                    TxReason::TimeoutRetransmit
                },
            )
        })
        .collect();
    assert_eq!(times, expect);
}

#[test]
fn thin_stream_with_linear_timeouts_retransmits_at_equal_spacing() {
    let times = thin_stream_times("linux-2.6.23+lt", 5);
    let t: Vec<Instant> = times.iter().map(|x| x.0).collect();
    assert_eq!(t, [1000, 1300, 1600, 1900, 2200, 2500].map(at));
}

#[test]
fn linear_timeout_cap_resumes_backoff() {
    // Linux mainline caps linear timeouts at 6 retries; a cap of 2 here.
    let times = thin_stream_times("linux-2.6.23+ltcap=2", 5);
    let t: Vec<Instant> = times.iter().map(|x| x.0).collect();
    // Linear after the 1st and 2nd timeout, doubling from the 3rd.
    assert_eq!(t, [1000, 1300, 1600, 1900, 2500, 3700].map(at));
}

/// Five segments in flight (not thin): all data lost for 7 s.
fn thick_stream_times(profile: &str) -> Vec<Instant> {
    let cfg = TcpConfig::from_profile(profile).unwrap();
    let mut net = Net::pair(&cfg, &cfg, ms(50));
    net.run_until(at(500));
    // Open the congestion window (3 packets initially) with a few exchanges.
    for _ in 0..10 {
        net.send(0, &[1; 1448]);
    }
    net.run_until(at(1000));
    assert!(
        net.eps[0].cwnd_bytes() >= 5 * 1448,
        "cwnd {}",
        net.eps[0].cwnd_bytes()
    );
    net.drop_rule = Some(Box::new(|p| {
        p.from == 0 && p.units.is_some() && p.time >= at(1000) && p.time < at(7000)
    }));
    for _ in 0..5 {
        net.send(0, &[2; 100]);
    }
    assert_eq!(net.eps[0].packets_out(), 5);
    assert!(!net.eps[0].is_thin());
    net.run_until(at(20_000));
    assert_eq!(net.rx[1].len(), 14480 + 500);
    net.sends_of(0, 14480).into_iter().map(|x| x.0).collect()
}

#[test]
fn thick_stream_backs_off_even_with_lt() {
    let expect = [1000, 1300, 1900, 3100, 5500, 10300].map(at);
    assert_eq!(thick_stream_times("linux-2.6.23"), expect);
    assert_eq!(thick_stream_times("linux-2.6.23+lt"), expect);
}

#[test]
fn rfc_profile_uses_one_second_floor() {
    let cfg = TcpConfig::newreno();
    let mut net = Net::pair(&cfg, &cfg, ms(50));
    let mut dropped = 0;
    net.drop_rule = Some(Box::new(move |p| {
        if p.from == 0 && p.units.is_some() && dropped < 2 {
            dropped += 1;
            return true;
        }
        false
    }));
    net.run_until(at(1000));
    assert_eq!(net.eps[0].rto(), ms(1000));
    net.send(0, &[1; 10]);
    net.run_until(at(10_000));
    let t: Vec<Instant> = net.sends_of(0, 0).into_iter().map(|x| x.0).collect();
    assert_eq!(t, [1000, 2000, 4000].map(at));
}

/// A thin stream from 1 s (100 B every 100 ms, RTT 100 ms) whose message 5
/// (bytes 500-600) is lost twice: its first copy, and the fast
/// retransmission sent when message 6's SACK arrives. The RTO then fires
/// inside the fast recovery's window. Returns the net after 5 s, every
/// message delivered, and the time of that timeout.
fn timeout_inside_recovery(cfg: &TcpConfig) -> (Net, Instant) {
    let mut net = Net::pair(cfg, cfg, ms(50));
    let mut dropped = 0;
    net.drop_rule = Some(Box::new(move |p| {
        let hit = p.from == 0 && p.units.is_some_and(|(s, _)| s == 500) && dropped < 2;
        dropped += u32::from(hit);
        hit
    }));
    net.send_every(0, at(1000), ms(100), 30);
    net.run_until(at(5000));
    assert_eq!(net.rx[1].len(), 3000, "{}", cfg.name);
    let sends = net.sends_of(0, 500);
    assert_eq!(
        sends[1].1,
        TxReason::FastRetransmit,
        "{}: {sends:?}",
        cfg.name
    );
    assert_eq!(
        sends[2].1,
        TxReason::TimeoutRetransmit,
        "{}: {sends:?}",
        cfg.name
    );
    let rto = sends[2].0;
    (net, rto)
}

/// ssthresh as recorded at `t` (the last congestion record at or before it).
fn ssthresh_at(net: &Net, t: Instant) -> u32 {
    net.traces[0]
        .iter()
        .rev()
        .find_map(|r| match r {
            Record::Congestion { time, ssthresh, .. } if *time <= t => Some(*ssthresh),
            _ => None,
        })
        .expect("a congestion record")
}

#[test]
fn a_timeout_inside_a_fast_recovery_keeps_the_recovery_s_ssthresh_as_linux_does() {
    // A 10-segment initial window, so the fast recovery sets ssthresh to 5
    // segments. Linux (tcp_enter_loss) does not reduce it again for a
    // timeout before that recovery's window is acknowledged; without the
    // rule (the RFC preset) the timeout halves once more, to the floor.
    // 2.6.23 retransmits on the first SACK only with `mfr` (thin streams).
    let mss = 1448;
    for profile in ["linux-modern", "linux-2.6.23+mfr"] {
        let mut cfg = TcpConfig::from_profile(profile).unwrap();
        cfg.timer_hz = None;
        cfg.initial_window = InitialWindow::Segments(10);
        assert!(cfg.loss_ssthresh_once, "{profile}");
        let (net, rto) = timeout_inside_recovery(&cfg);
        let recovery = net.sends_of(0, 500)[1].0;
        assert_eq!(ssthresh_at(&net, recovery), 5 * mss, "{profile}");
        assert_eq!(ssthresh_at(&net, rto), 5 * mss, "{profile}");
        cfg.loss_ssthresh_once = false;
        let (net, rto) = timeout_inside_recovery(&cfg);
        assert_eq!(ssthresh_at(&net, rto), 2 * mss, "{profile}");
    }
}

/// A thin stream from 1 s (100 B every 90 ms, RTT 100 ms) whose ACKs leaving
/// the receiver between 1400 and 1700 ms are lost: the RTO (armed by the
/// last ACK, at 1370 ms) fires with the segments sent at 1360, 1450, 1540
/// and 1630 ms outstanding. Returns the timeout's time and the congestion
/// record (cwnd, flight) made then.
fn timeout_with_recent_sends(cfg: &TcpConfig) -> (Instant, (u32, u32)) {
    let (net, rto) = recent_sends_net(cfg);
    (rto, congestion_at(&net, rto))
}

/// The last congestion record (cwnd, flight) made at `t`.
fn congestion_at(net: &Net, t: Instant) -> (u32, u32) {
    net.traces[0]
        .iter()
        .rev()
        .find_map(|r| match r {
            Record::Congestion {
                time, cwnd, flight, ..
            } if *time == t => Some((*cwnd, *flight)),
            _ => None,
        })
        .expect("a congestion record")
}

/// The net of `timeout_with_recent_sends` after 5 s, and the timeout's time.
fn recent_sends_net(cfg: &TcpConfig) -> (Net, Instant) {
    let mut net = Net::pair(cfg, cfg, ms(50));
    net.drop_rule = Some(Box::new(|p| {
        p.from == 1 && p.time >= at(1400) && p.time < at(1700)
    }));
    net.send_every(0, at(1000), ms(90), 20);
    net.run_until(at(5000));
    assert_eq!(net.rx[1].len(), 2000, "{}", cfg.name);
    let rto = net.sends_of(0, 400)[1];
    assert_eq!(rto.1, TxReason::TimeoutRetransmit, "{}", cfg.name);
    (net, rto.0)
}

/// `linux-modern` with exact timers, no probe and no collapsing: the
/// timeout alone.
fn modern_timeout_alone() -> TcpConfig {
    let mut cfg = TcpConfig::linux_modern();
    cfg.timer_hz = None;
    cfg.retrans_collapse = false;
    if let Some(r) = cfg.rack.as_mut() {
        r.tlp = false;
    }
    cfg
}

#[test]
fn with_rack_a_timeout_leaves_segments_sent_within_the_last_round_trip_in_flight() {
    // Linux tcp_timeout_mark_lost: the timeout marks the first segment and
    // those sent at least RACK.rtt (100 ms) ago lost; the one sent at 1630,
    // 40 ms before, stays in flight, so cwnd is 2 (in flight + 1) and
    // carries it and the first segment's retransmission. No probe and no
    // collapsing here, to see the timeout alone.
    let cfg = modern_timeout_alone();
    let (rto, cc) = timeout_with_recent_sends(&cfg);
    assert_eq!(rto, at(1670));
    assert_eq!(cc, (2 * 1448, 2 * 1448));
    // Without RACK every outstanding segment is marked lost: cwnd 1, and
    // only the retransmission is in flight.
    let mut old = TcpConfig::linux_2_6_23();
    old.timer_hz = None;
    let (_, cc) = timeout_with_recent_sends(&old);
    assert_eq!(cc, (1448, 1448));
}

#[test]
fn linux_grows_a_window_that_limited_a_send_by_what_the_ack_delivered() {
    // The timeout above leaves cwnd 2 and ssthresh 5; the write at 1720 is
    // held (2 in flight), so the window limited a send. The ACK at 1770
    // acknowledges the four segments sent before the timeout: Linux's slow
    // start adds the four delivered, up to ssthresh (5 segments). Counting
    // one segment per ACK when the pipe before it filled the window gives 3.
    let mut cfg = modern_timeout_alone();
    assert!(cfg.cwnd_growth_per_window);
    let (net, _) = recent_sends_net(&cfg);
    assert_eq!(
        net.sends_of(0, 800)[0].0,
        at(1770),
        "the write of 1720 waited"
    );
    assert_eq!(congestion_at(&net, at(1770)).0, 5 * 1448);
    cfg.cwnd_growth_per_window = false;
    let (net, _) = recent_sends_net(&cfg);
    assert_eq!(congestion_at(&net, at(1770)).0, 3 * 1448);
}
