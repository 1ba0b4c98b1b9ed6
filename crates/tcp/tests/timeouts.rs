//! Exact virtual times of retransmission timeouts: exponential backoff
//! versus linear timeouts (002 §4.1.3).

mod common;
use common::*;
use thinstream_base::trace::TxReason;
use thinstream_base::Instant;
use thinstream_tcp::TcpConfig;

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
