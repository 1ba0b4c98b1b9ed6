//! RACK-TLP (RFC 8985) recovers a tail loss with a probe, long before the RTO.

mod common;
use common::*;
use thinstream_base::trace::TxReason;
use thinstream_base::Instant;
use thinstream_tcp::TcpConfig;

/// `linux-modern` with exact timers: the instants below are RACK-TLP's
/// arithmetic; the kernel's timer wheel (`timer_hz`) has its own test.
fn exact_modern() -> TcpConfig {
    TcpConfig {
        timer_hz: None,
        ..TcpConfig::linux_modern()
    }
}

/// Five 100-byte messages 1 ms apart from 1 s on a 20 ms RTT path; the first
/// transmissions of the last two are lost. Returns the net after 5 s.
fn tail_loss(cfg: TcpConfig) -> Net {
    let profile = cfg.name.clone();
    let mut net = Net::pair(&cfg, &cfg, ms(10));
    net.drop_rule = Some(Box::new(|p| {
        p.from == 0 && matches!(p.units, Some((300, _)) | Some((400, _))) && p.time < at(1010)
    }));
    net.run_until(at(1000));
    for i in 0..5u64 {
        net.run_until(at(1000 + i));
        net.send(0, &[i as u8; 100]);
    }
    net.run_until(at(5000));
    assert_eq!(net.rx[1].len(), 500, "{profile}");
    net
}

#[test]
fn tail_loss_probe_recovers_much_faster_than_the_rto() {
    let modern = tail_loss(exact_modern());
    // ACKs for the first three arrive at 1020..1022; with two segments still
    // out the PTO is 2·SRTT = 40 ms: the probe resends the last segment at 1062.
    assert_eq!(modern.sends_of(0, 400)[1], (at(1062), TxReason::Probe));
    // Its SACK (1082) lets RACK mark unit 300 lost: fast retransmit at 1082.
    assert_eq!(
        modern.sends_of(0, 300)[1],
        (at(1082), TxReason::FastRetransmit)
    );
    let done_modern = modern.delivered_at(1, 499).unwrap();
    assert_eq!(done_modern, at(1092));
    assert_eq!(modern.eps[0].stats().timeouts, 0);
    assert_eq!(modern.eps[0].stats().tail_loss_probes, 1);

    // The same profile without RACK-TLP waits for the RTO (SRTT + 200 ms
    // after the last ACK at 1022).
    let mut no_rack = exact_modern();
    no_rack.rack = None;
    let old = tail_loss(no_rack);
    assert_eq!(
        old.sends_of(0, 300)[1],
        (at(1242), TxReason::TimeoutRetransmit)
    );
    let done_old: Instant = old.delivered_at(1, 499).unwrap();
    assert!(done_old >= at(1252), "{done_old}");
    assert!(done_old - done_modern >= ms(150));
}

/// One 100-byte message at 1 s on a 20 ms RTT path, its first copy lost;
/// returns the net after 3 s, the message delivered.
fn lone_message_lost_once(cfg: &TcpConfig) -> Net {
    let mut net = Net::pair(cfg, cfg, ms(10));
    let mut first = true;
    net.drop_rule = Some(Box::new(move |p| {
        let hit = p.from == 0 && p.units.is_some() && first;
        first &= !hit;
        hit
    }));
    net.run_until(at(1000));
    net.send(0, &[9; 100]);
    net.run_until(at(3000));
    assert_eq!(net.rx[1], vec![9; 100]);
    net
}

#[test]
fn single_segment_tail_loss_probe_waits_for_the_ack_delay_but_not_past_the_rto() {
    // One message alone, lost once: PTO = 2·SRTT + 200 ms = 240 ms, capped
    // by the RTO (SRTT + 200 ms = 220 ms): the probe leaves at 1220.
    let net = lone_message_lost_once(&exact_modern());
    assert_eq!(net.sends_of(0, 0)[1], (at(1220), TxReason::Probe));
    assert_eq!(net.eps[0].stats().timeouts, 0);
}

#[test]
fn on_the_kernel_s_timer_wheel_the_probe_leaves_at_the_next_jiffy_bucket() {
    // The single-segment case above with `linux-modern`'s HZ 250: the
    // 220 ms probe armed at 1000 ms (jiffy 250) is 55 jiffies, level 0,
    // bucket 306: it leaves at 1224 ms instead of 1220.
    let cfg = TcpConfig::linux_modern();
    assert_eq!(cfg.timer_hz, Some(250));
    let net = lone_message_lost_once(&cfg);
    assert_eq!(net.sends_of(0, 0)[1], (at(1224), TxReason::Probe));
}

#[test]
fn rack_detects_loss_by_time_with_reordering_window() {
    // Ten messages 1 ms apart, the third lost: RACK marks it lost once a
    // later segment is delivered and RACK.rtt + min_rtt/4 has passed since it was sent.
    let cfg = exact_modern();
    let mut net = Net::pair(&cfg, &cfg, ms(10));
    net.drop_rule = Some(Box::new(|p| {
        p.from == 0 && p.units == Some((200, 300)) && p.time < at(1010)
    }));
    net.run_until(at(1000));
    for i in 0..10u64 {
        net.run_until(at(1000 + i));
        net.send(0, &[i as u8; 100]);
    }
    net.run_until(at(3000));
    assert_eq!(net.rx[1].len(), 1000);
    let rtx = net.sends_of(0, 200)[1];
    assert_eq!(rtx.1, TxReason::FastRetransmit);
    // Sent at 1002; the first SACK above it (segment 3) arrives at 1023 and
    // arms the reordering timer for 1002 + 20 ms + min_rtt/4 = 1027, but the
    // third SACK (1025) shrinks the window to zero (RFC 8985 §6.2 step 4,
    // DupThresh segments SACKed): the segment is lost at once.
    assert_eq!(rtx.0, at(1025));
}

#[test]
fn rack_reordering_timer_marks_the_loss() {
    // Four messages, the third lost: one SACK only (1023), so the loss is
    // declared by the reordering timer at 1002 + 20 ms + min_rtt/4 = 1027.
    let cfg = exact_modern();
    let mut net = Net::pair(&cfg, &cfg, ms(10));
    net.drop_rule = Some(Box::new(|p| {
        p.from == 0 && p.units == Some((200, 300)) && p.time < at(1010)
    }));
    net.run_until(at(1000));
    for i in 0..4u64 {
        net.run_until(at(1000 + i));
        net.send(0, &[i as u8; 100]);
    }
    net.run_until(at(3000));
    assert_eq!(net.rx[1].len(), 400);
    assert_eq!(
        net.sends_of(0, 200)[1],
        (at(1027), TxReason::FastRetransmit)
    );
}

#[test]
fn modern_linux_collapses_following_segments_into_a_timeout_retransmission() {
    // Three small segments, all first transmissions lost: the RTO
    // retransmission of the first carries the other two (Linux
    // tcp_retrans_try_collapse); the 2.6.23 profile sends them one by one.
    let run = |cfg: TcpConfig| {
        let mut net = Net::pair(&cfg, &cfg, ms(10));
        net.drop_rule = Some(Box::new(|p| {
            p.from == 0 && p.units.is_some() && p.time >= at(1000) && p.time < at(1100)
        }));
        net.run_until(at(1000));
        for i in 0..3u64 {
            net.run_until(at(1000 + i));
            net.send(0, &[i as u8; 100]);
        }
        net.run_until(at(5000));
        assert_eq!(net.rx[1].len(), 300);
        net.pieces(0)
            .into_iter()
            .filter(|(_, d)| d.reason.is_retransmission())
            .map(|(_, d)| (d.units.start, d.units.end, d.reason))
            .collect::<Vec<_>>()
    };
    let mut modern = exact_modern();
    modern.rack = None; // the RTO path, no probe
    assert_eq!(
        run(modern),
        vec![
            (0, 100, TxReason::TimeoutRetransmit),
            (100, 300, TxReason::BundledOnRetransmit)
        ]
    );
    let old = run(TcpConfig::linux_2_6_23());
    assert_eq!(old[0], (0, 100, TxReason::TimeoutRetransmit));
    assert!(
        old.iter().all(|x| x.2 == TxReason::TimeoutRetransmit),
        "{old:?}"
    );
}

/// Four messages at 1000 ms on a 100 ms RTT path, the first lost: the
/// third SACK (DupThresh) starts recovery at 1100 and the first is
/// retransmitted. A fifth message written at 1101 returns the sent time
/// of its first transmission.
fn write_during_recovery(cfg: &TcpConfig) -> Instant {
    let mut net = Net::pair(cfg, cfg, ms(50));
    let mut first = true;
    net.drop_rule = Some(Box::new(move |p| {
        let hit = p.from == 0 && matches!(p.units, Some((0, _))) && first;
        first &= !hit;
        hit
    }));
    net.run_until(at(1000));
    for i in 0..4u8 {
        net.send(0, &[i; 100]);
    }
    net.run_until(at(1101));
    assert_eq!(
        net.sends_of(0, 0)[1],
        (at(1100), TxReason::FastRetransmit),
        "{}",
        cfg.name
    );
    net.send(0, &[4; 100]);
    net.run_until(at(2000));
    assert_eq!(net.rx[1].len(), 500, "{}", cfg.name);
    net.sends_of(0, 400)[0].0
}

#[test]
fn prr_holds_a_write_in_recovery_until_an_ack_delivers_data() {
    // PRR (linux-modern, as Linux): the ACK that began recovery delivered
    // one segment, so only the retransmission left; with nothing more in
    // flight to be acknowledged, the write waits for the retransmission's
    // ACK (1200), which ends recovery.
    let modern = exact_modern();
    assert!(modern.prr);
    assert_eq!(write_during_recovery(&modern), at(1200));
    // RFC 6675's `cwnd = ssthresh` (5 segments) lets it out at once.
    let mut rfc6675 = exact_modern();
    rfc6675.prr = false;
    assert_eq!(write_during_recovery(&rfc6675), at(1101));
}

/// For a thin stream from 1 s (100 B every 90 ms, RTT 100 ms, so the RTO
/// is SRTT + 200 ms = 300 ms): message 4's ACK, message 5 and message 6's
/// ACK are lost, so the last ACK is message 3's (1370) and the oldest
/// outstanding segment is message 4, sent at 1360.
fn lost_behind_writes(p: &Pkt<'_>) -> bool {
    let ack_of = |t: u64| p.from == 1 && p.time == at(t + 50);
    (p.from == 0 && p.units == Some((500, 600)) && p.time < at(1500))
        || ack_of(1360)
        || ack_of(1540)
}

/// That stream: the sends of message 7 (written at 1630) and whether RACK
/// has seen reordering by 3 s.
fn probe_behind_writes(from_head: bool) -> (Vec<(Instant, TxReason)>, bool) {
    let mut cfg = exact_modern();
    if let Some(r) = cfg.rack.as_mut() {
        r.tlp_rto_from_head = from_head;
    }
    let mut net = Net::pair(&cfg, &cfg, ms(50));
    net.drop_rule = Some(Box::new(|p| lost_behind_writes(p)));
    net.send_every(0, at(1000), ms(90), 12);
    net.run_until(at(3000));
    assert_eq!(net.rx[1].len(), 1200);
    (net.sends_of(0, 700), net.eps[0].reordering_seen())
}

#[test]
fn a_probe_armed_by_new_data_fires_at_the_head_s_rto_and_its_d_sack_is_reordering() {
    // Linux caps the probe at the RTO of the oldest outstanding segment:
    // 1360 + 300 ms = 1660, 30 ms after message 7 left. The probe resends
    // message 7; the original is SACKed (1730), then the copy comes back as
    // a D-SACK (1760): a retransmitted segment already SACKed, which Linux
    // counts as reordering.
    let (sends, reordering) = probe_behind_writes(true);
    assert_eq!(
        sends,
        vec![(at(1630), TxReason::New), (at(1660), TxReason::Probe)]
    );
    assert!(reordering);
    // Capped by the RTO from the last write instead, the probe would wait
    // until 1630 + 2 SRTT; message 7's SACK (1730) starts recovery first.
    let (sends, reordering) = probe_behind_writes(false);
    assert_eq!(sends, vec![(at(1630), TxReason::New)]);
    assert!(!reordering);
}

#[test]
fn a_spurious_timeout_s_d_sack_after_reordering_widens_the_window() {
    // First the probe scenario above sets reordering seen (window 25 ms);
    // then every ACK from 3050 to 3700 is lost while a message is written
    // every 90 ms, so the RTO resends a segment the receiver already has,
    // and its D-SACK (below the cumulative ACK once ACKs pass again) widens
    // the window by one min_rtt/4 step.
    let run = |adaptive: bool| {
        let mut cfg = exact_modern();
        if let Some(r) = cfg.rack.as_mut() {
            r.adaptive_reo_wnd = adaptive;
        }
        let mut net = Net::pair(&cfg, &cfg, ms(50));
        net.drop_rule = Some(Box::new(|p| {
            lost_behind_writes(p) || (p.from == 1 && p.time >= at(3050) && p.time < at(3700))
        }));
        net.send_every(0, at(1000), ms(90), 12);
        net.run_until(at(3000));
        assert!(net.eps[0].reordering_seen());
        let before = net.eps[0].reordering_window_in_recovery();
        net.send_every(0, at(3000), ms(90), 12);
        net.run_until(at(6000));
        assert_eq!(net.rx[1].len(), 2400);
        let timeouts = net.eps[0].stats().timeouts;
        (before, net.eps[0].reordering_window_in_recovery(), timeouts)
    };
    let (before, after, timeouts) = run(true);
    assert!(timeouts >= 1);
    assert_eq!(before, Some(ms(25)));
    assert_eq!(after, Some(ms(50)));
    // Without the adaptive window it stays at min_rtt/4.
    assert_eq!(run(false).1, Some(ms(25)));
}
