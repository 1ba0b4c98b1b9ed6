//! The `production` preset's safeguards and the fixes of the recovery
//! issue, each pinned against an unmodified-receiver behaviour: delayed
//! SACKs, an ignored SACK-IMMEDIATELY flag, lost SACKs, redundancy and a
//! reader that stalls (module docs: `thinstream_proto::mechanism::rtt`).

mod mech_util;

use mech_util::*;
use thinstream_base::trace::{Record, TxReason};
use thinstream_base::Duration;
use thinstream_proto::testkit::Side;
use thinstream_proto::State;

/// 100-byte messages every `iat` for `n` messages.
fn stream(p: &mut thinstream_proto::testkit::Pair, n: u32, iat: Duration) {
    for i in 0..n {
        send_now(p, 100, i);
        p.drive_for(iat);
    }
    p.drive_for(Duration::from_secs(5));
}

fn count(p: &thinstream_proto::testkit::Pair, reason: TxReason) -> usize {
    client_data(p).iter().filter(|d| d.2 == reason).count()
}

// Point 1: the documents' receivers delay SACKs and ignore the I bit. At
// 100 ms between messages over a 100 ms round trip the first packet of each
// pair is acknowledged 200 ms after it left; the production preset samples
// that wait (one sample per SACK from its oldest newly acknowledged chunk)
// and never times it out.
#[test]
fn production_never_races_a_delayed_sack() {
    let mut p = pair(preset("production"), preset("linux"), 50, 1);
    stream(&mut p, 600, Duration::from_millis(100));
    assert_eq!(delivered_tags(&mut p).len(), 600);
    assert_eq!(count(&p, TxReason::TimeoutRetransmit), 0);
    assert_eq!(count(&p, TxReason::FastRetransmit), 0);
    assert!(
        p.client.rto() > Duration::from_millis(200),
        "{:?}",
        p.client.rto()
    );
    // Every SACK gave a sample: about one per two packets.
    assert!(p.client.stats().data_rtt_samples >= 290);
}

// SACK-IMMEDIATELY: a receiver that honours it acknowledges every packet of
// a thin stream at once, so the estimate is the path's round trip.
#[test]
fn sack_immediately_is_sent_while_thin_and_honoured() {
    let mut p = pair(preset("production"), preset("rfc"), 50, 2);
    stream(&mut p, 50, Duration::from_millis(250));
    let flagged = p
        .sent
        .iter()
        .filter(|s| s.from == Side::Client)
        .flat_map(|s| s.packet.chunks.iter())
        .filter(|c| matches!(c, thinstream_proto::wire::Chunk::Data(d) if d.immediate))
        .count();
    assert_eq!(flagged, 50);
    assert_eq!(p.client.stats().sack_immediately_sent, 50);
    let srtt = p.client.srtt().unwrap();
    assert!(srtt < Duration::from_millis(110), "{srtt:?}");
    // A receiver of the documents' era ignores it: 200 ms delay remains.
    let mut q = pair(preset("production"), preset("linux"), 50, 2);
    stream(&mut q, 50, Duration::from_millis(250));
    assert!(q.client.srtt().unwrap() >= Duration::from_millis(290));
    assert_eq!(count(&q, TxReason::TimeoutRetransmit), 0);
}

// Point 2: with redundant bundling every chunk is sent twice; Karn's rule
// then leaves no sample and the RTO stays at RTO.Initial. The documents'
// lksctp (first-ack sampling, 000 §8) and the production preset keep
// measuring.
#[test]
fn redundancy_does_not_starve_rtt_sampling() {
    let mut karn = pair(preset("thin+rdb+rtt-karn"), preset("linux"), 50, 3);
    stream(&mut karn, 200, Duration::from_millis(100));
    assert_eq!(karn.client.stats().data_rtt_samples, 0);
    assert_eq!(karn.client.rto(), Duration::from_secs(3));
    for spec in ["thin+rdb", "production"] {
        let mut p = pair(preset(spec), preset("linux"), 50, 3);
        stream(&mut p, 200, Duration::from_millis(100));
        let s = p.client.stats();
        assert!(s.data_rtt_samples > 50, "{spec}: {s:?}");
        assert!(p.client.rto() < Duration::from_secs(1), "{spec}");
        assert!(
            s.redundant_bytes >= 100 * 50,
            "{spec}: {}",
            s.redundant_bytes
        );
        let traced = p
            .client_trace
            .iter()
            .filter(|r| matches!(r, Record::RttSample { data: true, .. }))
            .count() as u64;
        assert_eq!(traced, s.data_rtt_samples, "{spec}");
    }
}

// The handshake seeds the RTO: a first message lost right after the
// handshake is recovered after a few RTTs, not after RTO.Initial.
#[test]
fn handshake_round_trip_seeds_the_rto() {
    let p = pair(preset("production"), preset("production"), 50, 4);
    assert_eq!(p.client.srtt(), Some(Duration::from_millis(100)));
    assert_eq!(p.server.srtt(), Some(Duration::from_millis(100)));
    assert!(p.client.rto() <= Duration::from_millis(300));
    let q = pair(preset("linux"), preset("linux"), 50, 4);
    assert_eq!(q.client.srtt(), None);
    assert_eq!(q.client.rto(), Duration::from_secs(3));
}

// A lost SACK: the next packet's SACK reports on the older one. With 150 ms
// between messages over a 100 ms round trip, the T3 of a packet whose SACK
// was lost (200 ms) would expire before the next packet's SACK (250 ms);
// it waits once for it instead.
#[test]
fn t3_waits_once_for_the_next_sack() {
    let run = |wait: bool| {
        let mut c = preset("production");
        c.mechanisms.t3_wait_for_newer_sack = wait;
        let mut p = pair(c, preset("rfc"), 50, 5);
        stream(&mut p, 20, Duration::from_millis(150));
        p.drop_chunk(Side::Server, thinstream_proto::wire::chunk_type::SACK, 1);
        stream(&mut p, 20, Duration::from_millis(150));
        assert_eq!(delivered_tags(&mut p).len(), 40);
        (
            count(&p, TxReason::TimeoutRetransmit),
            p.client.stats().t3_postponed,
        )
    };
    assert_eq!(run(true), (0, 1));
    assert_eq!(run(false), (1, 0));
}

// Point 6: zero-window probes answered by SACKs do not count toward
// Association.Max.Retrans (RFC 9260 §6.1 A): a reader that stalls for ten
// minutes keeps its association and gets everything afterwards.
#[test]
fn a_stalled_reader_keeps_its_association() {
    let mut server = preset("rfc");
    server.receive_buffer = 4_000;
    let mut p = pair(preset("production"), server, 50, 6);
    p.server_reads = false;
    for i in 0..600u32 {
        let mut payload = vec![0u8; 100];
        payload[..4].copy_from_slice(&i.to_be_bytes());
        let _ = p.send(Side::Client, 0, false, &payload);
        p.drive_for(Duration::from_secs(1));
    }
    assert_eq!(p.client.state(), State::Established);
    assert!(p.client.stats().t3_expiries > 10);
    p.server_reads = true;
    p.drive_for(Duration::from_secs(120));
    assert_eq!(p.client.state(), State::Established);
    let got = delivered_tags(&mut p);
    assert!(got.len() >= 100, "{}", got.len());
    assert!(got.windows(2).all(|w| w[0] + 1 == w[1]));
}

// Point 7: a message that does not fit beside an owed SACK goes alone at
// once instead of waiting for the delayed-SACK timer.
#[test]
fn new_data_never_waits_for_the_delayed_sack_timer() {
    let mut p = pair(preset("rfc"), preset("rfc"), 50, 7);
    // The server owes a SACK for one packet (delayed), then sends a message
    // that fills a packet on its own.
    send_now(&mut p, 100, 1);
    p.drive_for(Duration::from_millis(60));
    let t0 = p.now;
    let payload = vec![7u8; 1429];
    p.send(Side::Server, 0, false, &payload).unwrap();
    p.flush();
    let first = p
        .sent
        .iter()
        .filter(|s| s.from == Side::Server && s.at >= t0)
        .find(|s| !s.data_tsns().is_empty())
        .map(|s| s.at)
        .expect("server data sent");
    assert_eq!(first, t0, "data left at {:?}, asked at {:?}", first, t0);
}

// Point 4: FreeBSD's minimum early-fast-retransmit timer (250 ms) keeps EFR
// from firing before a delayed SACK (000 Table 2: "rarely triggers").
#[test]
fn efr_waits_for_delayed_sacks() {
    for iat in [100, 150, 250] {
        let mut p = pair(preset("rfc+efr"), preset("rfc"), 50, 8);
        stream(&mut p, 200, Duration::from_millis(iat));
        assert_eq!(count(&p, TxReason::EarlyFastRetransmit), 0, "iat {iat}");
        assert_eq!(delivered_tags(&mut p).len(), 200);
    }
}

// Thin detection by packets per round trip stays on through lost SACKs.
#[test]
fn thin_by_rate_is_immune_to_lost_sacks() {
    let mut p = pair(preset("production"), preset("rfc"), 50, 9);
    p.drop_chunk(Side::Server, thinstream_proto::wire::chunk_type::SACK, 3);
    stream(&mut p, 100, Duration::from_millis(100));
    assert_eq!(p.client.stats().thin_transitions, 0);
    let thin = p.client.time_thin(p.now);
    assert!(thin >= Duration::from_secs(9), "{thin:?}");
}
