//! Thin-stream detection (002 §4.2.1, App. F): the verdict follows the
//! packets in flight at each decision and is traced on every change.

mod mech_util;

use mech_util::*;
use thinstream_base::trace::Record;
use thinstream_base::Duration;

fn verdicts(p: &thinstream_proto::testkit::Pair) -> Vec<(bool, u32)> {
    p.client_trace
        .iter()
        .filter_map(|r| match r {
            Record::Thin {
                thin,
                packets_in_flight,
                ..
            } => Some((*thin, *packets_in_flight)),
            _ => None,
        })
        .collect()
}

// A burst of 5 packets makes the stream thick at the 4th packet in flight
// (thin <=> packets_in_flight < 4); the cumulative SACKs make it thin again.
#[test]
fn verdict_changes_are_traced() {
    let mut p = pair(
        preset("rfc+nodelack+thin-detect"),
        preset("rfc+nodelack"),
        50,
        1,
    );
    for i in 0..5 {
        send_now(&mut p, 100, i);
    }
    p.drive_for(Duration::from_secs(1));
    assert_eq!(verdicts(&p), vec![(true, 1), (false, 4), (true, 3)]);
    assert_eq!(p.client.thin_tracker().packets_in_flight(), 0);
    assert_eq!(p.client.thin_tracker().total_packets(), 5);
    // thin-limit=6: never thick with 5 packets.
    let mut q = pair(
        preset("rfc+nodelack+thin-detect+thin-limit=6"),
        preset("rfc+nodelack"),
        50,
        1,
    );
    for i in 0..5 {
        send_now(&mut q, 100, i);
    }
    q.drive_for(Duration::from_secs(1));
    assert_eq!(verdicts(&q), vec![(true, 1)]);
    // The verdict is in the view the mechanisms see.
    let v = q.client.sender_view(q.now);
    assert!(v.thin && v.thin_threshold == 6);
}

// Timeouts count packets as lost (sent more than min RTT + 10 ms ago): the
// loss estimate feeds the threshold recomputed every 30 packets.
#[test]
fn timeouts_feed_the_loss_estimate() {
    let mut p = pair(
        preset("rfc+nodelack+thin-detect"),
        preset("rfc+nodelack"),
        50,
        2,
    );
    warm_up(&mut p, 2, Duration::from_millis(300));
    p.drop_tsn(thinstream_proto::testkit::Side::Client, next_tsn(&p), 1);
    send_now(&mut p, 100, 0);
    p.drive_for(Duration::from_secs(3));
    assert_eq!(p.client.thin_tracker().lost_packets(), 1);
    assert_eq!(delivered_tags(&mut p), vec![0]);
}
