//! Timer mechanisms pinned to the documents: timer-restart correction
//! (002 §4.2.4, Fig. 4.19), linear timeouts (002 §4.2.5), the thin RTO
//! floor (002 §4.2.3).

mod mech_util;

use mech_util::*;
use thinstream_base::trace::{Record, TxReason};
use thinstream_base::Duration;
use thinstream_proto::testkit::Side;

/// 002 Fig. 4.19: RTT 200 ms, RTO.min 1 s, delayed SACK 200 ms. Message A
/// at t0, message B at t0 + 250 ms and lost; the delayed SACK for A arrives
/// at t0 + 400 ms. Returns when B was retransmitted (ms after t0).
fn fig_4_19(spec: &str) -> (u64, TxReason) {
    let cfg = preset(spec);
    // One-way 100 ms = RTT 200 ms; the receiver is an unmodified (rfc) SCTP
    // with delayed SACK 200 ms.
    let mut p = pair(cfg, preset("rfc"), 100, 3);
    // Warm up so the measured RTT (200 ms + 200 ms SACK delay) gives an
    // RTO at the 1 s floor, as in the figure.
    warm_up(&mut p, 3, Duration::from_secs(2));
    assert_eq!(p.client.rto(), Duration::from_secs(1));
    let t0 = p.now;
    send_now(&mut p, 100, 0);
    let b = next_tsn(&p);
    let b_unit = client_data(&p).last().unwrap().1 + 1;
    p.drop_tsn(Side::Client, b, 1);
    p.drive_until(t0 + Duration::from_millis(250));
    send_now(&mut p, 100, 1);
    p.drive_for(Duration::from_secs(3));
    let r = retransmissions_of(&p, b_unit);
    assert_eq!(r.len(), 1, "{spec}: {r:?}");
    assert_eq!(delivered_tags(&mut p), vec![0, 1]);
    (ms(r[0].0, t0), r[0].1)
}

// 002 §4.2.4 worked example: 1400 ms without the correction, 1250 ms with it.
#[test]
fn timer_restart_correction_fig_4_19() {
    assert_eq!(fig_4_19("rfc"), (1400, TxReason::TimeoutRetransmit));
    assert_eq!(fig_4_19("rfc+restart"), (1250, TxReason::TimeoutRetransmit));
    // The documents' patched kernel has it on for every modified variant.
    assert_eq!(
        fig_4_19("lksctp-mod+rto-initial=1000"),
        (1250, TxReason::TimeoutRetransmit)
    );
    assert_eq!(
        fig_4_19("linux+rto-initial=1000"),
        (1400, TxReason::TimeoutRetransmit)
    );
}

/// One message, its first `losses` transmissions dropped; times (ms after
/// the first send) of every transmission.
fn lost_repeatedly(spec: &str, messages: usize, losses: u32) -> Vec<u64> {
    let mut p = pair(preset(spec), preset("rfc"), 50, 5);
    p.drop_chunk(
        Side::Client,
        thinstream_proto::wire::chunk_type::DATA,
        losses,
    );
    let t0 = p.now;
    for i in 0..messages {
        // Separate packets: each send is flushed at once.
        send_now(&mut p, 100, i as u32);
    }
    p.drive_for(Duration::from_secs(30));
    assert_eq!(
        delivered_tags(&mut p),
        (0..messages as u32).collect::<Vec<_>>()
    );
    let mut times: Vec<u64> = client_data(&p)
        .iter()
        .filter(|d| d.1 == 0)
        .map(|d| ms(d.0, t0))
        .collect();
    times.dedup();
    times
}

// 002 §4.2.5: a thin stream lost three times retransmits at RTO, 2 RTO,
// 3 RTO (RTO.initial 1 s, no RTT sample); RFC: RTO, 3 RTO, 7 RTO.
#[test]
fn linear_timeouts_while_thin() {
    assert_eq!(lost_repeatedly("rfc", 1, 3), vec![0, 1000, 3000, 7000]);
    assert_eq!(lost_repeatedly("rfc+lt", 1, 3), vec![0, 1000, 2000, 3000]);
    assert_eq!(
        lost_repeatedly("thin+rto-initial=1000", 1, 3),
        vec![0, 1000, 2000, 3000]
    );
}

// 002 §4.2.5: with 4 packets in flight (>= the threshold 4) the stream is
// not thin and the timer still doubles.
#[test]
fn linear_timeouts_not_applied_when_thick() {
    // 4 packets of the first flight plus 2 lost retransmission packets.
    assert_eq!(lost_repeatedly("rfc+lt", 4, 6), vec![0, 1000, 3000, 7000]);
    assert_eq!(lost_repeatedly("rfc", 4, 6), vec![0, 1000, 3000, 7000]);
}

// 002 §4.2.3: measured RTT 20 ms, RTO.min 1 s: a thin stream's timeout
// fires 200 ms after the send; RFC: 1 s.
#[test]
fn rto_floor_200ms_while_thin() {
    for (spec, want) in [("rfc+nodelack", 1000), ("rfc+nodelack+minrto", 200)] {
        // One-way 10 ms: RTT 20 ms, SACKs at once.
        let mut p = pair(preset(spec), preset("rfc+nodelack"), 10, 9);
        warm_up(&mut p, 3, Duration::from_millis(500));
        assert_eq!(p.client.srtt(), Some(Duration::from_millis(20)), "{spec}");
        assert_eq!(p.client.rto(), Duration::from_millis(want), "{spec}");
        let t0 = p.now;
        p.drop_tsn(Side::Client, next_tsn(&p), 1);
        send_now(&mut p, 100, 8);
        let u = client_data(&p).last().unwrap().1;
        p.drive_for(Duration::from_secs(3));
        let r = retransmissions_of(&p, u);
        assert_eq!(r.len(), 1, "{spec}: {r:?}");
        assert_eq!(
            (ms(r[0].0, t0), r[0].1),
            (want, TxReason::TimeoutRetransmit),
            "{spec}"
        );
        assert_eq!(delivered_tags(&mut p), vec![8]);
    }
    // The thin floor never raises the RTO above a lower RTO.Min.
    let mut p = pair(
        preset("rfc+nodelack+minrto+rto-min=100"),
        preset("rfc+nodelack"),
        10,
        9,
    );
    warm_up(&mut p, 3, Duration::from_millis(500));
    assert_eq!(p.client.rto(), Duration::from_millis(100));
    assert!(p
        .client_trace
        .iter()
        .any(|r| matches!(r, Record::Rto { rto, .. } if *rto == Duration::from_millis(100))));
}

// Mechanisms are per association: switching LT on for one association
// mid-life changes its timeouts from then on; the Endpoint setter reaches
// one association by id.
#[test]
fn set_mechanisms_per_association() {
    use thinstream_proto::{AssociationId, Endpoint};
    let mut p = pair(preset("rfc"), preset("rfc"), 50, 5);
    let lt = thinstream_proto::Config::from_preset("rfc+lt")
        .unwrap()
        .mechanisms;
    p.client.set_mechanisms(lt.clone());
    assert_eq!(p.client.mechanisms(), &lt);
    p.drop_chunk(Side::Client, thinstream_proto::wire::chunk_type::DATA, 3);
    let t0 = p.now;
    send_now(&mut p, 100, 0);
    p.drive_for(Duration::from_secs(10));
    let times: Vec<u64> = client_data(&p).iter().map(|d| ms(d.0, t0)).collect();
    assert_eq!(times, vec![0, 1000, 2000, 3000]);
    assert_eq!(delivered_tags(&mut p), vec![0]);

    let mut e = Endpoint::new(
        thinstream_proto::Config::default(),
        thinstream_proto::testkit::client_addr(),
        thinstream_base::Seed(1),
        false,
    );
    let id = e.connect(
        thinstream_base::Instant::ZERO,
        thinstream_proto::testkit::server_addr(),
    );
    assert!(e.set_mechanisms(id, lt.clone()));
    assert_eq!(e.association(id).unwrap().mechanisms(), &lt);
    assert!(!e.set_mechanisms(AssociationId(id.0 + 100), lt));
}
