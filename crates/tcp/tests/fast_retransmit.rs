//! Fast retransmit after DupThresh duplicate ACKs versus modified fast
//! retransmit on the first one while thin (002 §4.1.4).

mod common;
use common::*;
use thinstream_base::trace::TxReason;
use thinstream_base::Instant;
use thinstream_tcp::TcpConfig;

/// `n` 100-byte messages 10 ms apart from t = 1 s on a 100 ms RTT path; the
/// first transmission of the first message is lost. Returns the
/// retransmissions of unit 0.
fn retransmissions(cfg: TcpConfig, n: usize) -> Vec<(Instant, TxReason)> {
    retransmissions_with(cfg, TcpConfig::newreno(), n)
}

fn retransmissions_with(cfg: TcpConfig, server: TcpConfig, n: usize) -> Vec<(Instant, TxReason)> {
    let mut net = Net::pair(&cfg, &server, ms(50));
    let mut first = true;
    net.drop_rule = Some(Box::new(move |p| {
        if p.from == 0 && p.units.is_some_and(|(s, _)| s == 0) && first {
            first = false;
            return true;
        }
        false
    }));
    net.run_until(at(1000));
    for i in 0..n {
        net.run_until(at(1000 + 10 * i as u64));
        net.send(0, &[i as u8; 100]);
    }
    net.run_until(at(10_000));
    assert_eq!(net.rx[1].len(), 100 * n);
    net.sends_of(0, 0).into_iter().skip(1).collect()
}

fn profile(p: &str) -> TcpConfig {
    TcpConfig::from_profile(p).unwrap()
}

#[test]
fn thick_stream_fast_retransmits_on_the_third_dupack() {
    // Duplicate ACKs for the messages sent at 1010, 1020, 1030 arrive at
    // 1110, 1120, 1130: the third triggers fast retransmit.
    let want = vec![(at(1130), TxReason::FastRetransmit)];
    assert_eq!(retransmissions(profile("newreno"), 6), want);
    let mut no_sack = profile("newreno");
    no_sack.sack = false;
    assert_eq!(retransmissions(no_sack, 6), want, "New Reno without SACK");
    // A peer that does not offer SACK: New Reno on both sides.
    let mut peer = profile("newreno");
    peer.sack = false;
    assert_eq!(
        retransmissions_with(profile("newreno"), peer, 6),
        want,
        "peer without SACK"
    );
    // mFR does not apply: six packets are out at the first dupACK.
    assert_eq!(retransmissions(profile("newreno+mfr"), 6), want);
}

#[test]
fn thin_stream_waits_for_the_rto_without_mfr() {
    // One dupACK only; the RTO (1 s floor) started at 1000 fires at 2000.
    assert_eq!(
        retransmissions(profile("newreno"), 2),
        vec![(at(2000), TxReason::TimeoutRetransmit)]
    );
}

#[test]
fn thin_stream_fast_retransmits_on_the_first_dupack_with_mfr() {
    let want = vec![(at(1110), TxReason::FastRetransmit)];
    assert_eq!(retransmissions(profile("newreno+mfr"), 2), want);
    let mut no_sack = profile("newreno+mfr");
    no_sack.sack = false;
    assert_eq!(retransmissions(no_sack, 2), want, "New Reno without SACK");
    assert_eq!(retransmissions(profile("linux-2.6.23+mfr"), 2), want);
}

#[test]
fn new_reno_partial_ack_retransmits_the_next_hole() {
    // Lose the first transmissions of messages 0 and 2 of 8, without SACK.
    let mut cfg = profile("newreno");
    cfg.sack = false;
    let mut net = Net::pair(&cfg, &cfg, ms(50));
    net.drop_rule = Some(Box::new(|p| {
        p.from == 0 && matches!(p.data_index, Some(0) | Some(2))
    }));
    net.run_until(at(1000));
    for i in 0..8u64 {
        net.run_until(at(1000 + 10 * i));
        net.send(0, &[i as u8; 100]);
    }
    net.run_until(at(10_000));
    assert_eq!(net.rx[1].len(), 800);
    // DupACKs come from messages 1, 3, 4 (sent 1010, 1030, 1040): fast
    // retransmit of unit 0 at 1140; its ACK (1240) is partial and
    // retransmits unit 200 at once (RFC 6582 §3.2 step 5).
    assert_eq!(net.sends_of(0, 0)[1], (at(1140), TxReason::FastRetransmit));
    assert_eq!(
        net.sends_of(0, 200)[1],
        (at(1240), TxReason::FastRetransmit)
    );
    assert_eq!(net.eps[0].stats().timeouts, 0);
}

#[test]
fn limited_transmit_sends_new_data_on_the_first_dupacks() {
    // RFC 3042 through the pipe: each SACKed segment leaves the pipe, so a
    // new segment may go even though cwnd (4380 bytes, 3 segments) was full.
    for sack in [true, false] {
        let mut cfg = profile("newreno");
        cfg.sack = sack;
        let mut net = Net::pair(&cfg, &cfg, ms(50));
        net.drop_rule = Some(Box::new(|p| p.from == 0 && p.data_index == Some(0)));
        net.run_until(at(1000));
        for _ in 0..6 {
            net.send(0, &[3; 1448]);
        }
        net.run_until(at(10_000));
        assert_eq!(net.rx[1].len(), 6 * 1448);
        // Segments 2 and 3 arrive at 1050 and draw two dupACKs (1100): the
        // 4th and 5th segments leave then, before any retransmission.
        assert_eq!(
            net.sends_of(0, 3 * 1448)[0],
            (at(1100), TxReason::New),
            "sack {sack}"
        );
        assert_eq!(
            net.sends_of(0, 4 * 1448)[0],
            (at(1100), TxReason::New),
            "sack {sack}"
        );
        // The third dupACK (from segment 4, 1200) triggers fast retransmit.
        assert_eq!(
            net.sends_of(0, 0)[1],
            (at(1200), TxReason::FastRetransmit),
            "sack {sack}"
        );
    }
}

/// 002 §5.2.1's thin stream (RTT 150 ms, 100 B every 100 ms) with the
/// first transmission of message 20 lost. The third dupACK arrives about
/// 450 ms after the original was sent, close to the RTO (≈ 460 ms), so a
/// timer that kept running from the original transmission would fire a
/// few ms after the fast retransmission and send the segment a second
/// time (and back off). Linux restarts the timer when it retransmits the
/// head of the retransmission queue (`tcp_xmit_retransmit_queue`), so the
/// fast retransmission is the only one.
#[test]
fn fast_retransmission_of_the_head_restarts_the_rto() {
    for p in ["linux-2.6.23", "linux-2.6.23+lt", "linux-modern"] {
        let cfg = profile(p);
        let mut net = Net::pair(&cfg, &cfg, ms(75));
        let mut first = true;
        net.drop_rule = Some(Box::new(move |pkt| {
            if pkt.from == 0 && pkt.units.is_some_and(|(s, _)| s == 2000) && first {
                first = false;
                return true;
            }
            false
        }));
        for i in 0..40u64 {
            net.run_until(at(1000 + 100 * i));
            net.send(0, &[i as u8; 100]);
        }
        net.run_until(at(10_000));
        assert_eq!(net.rx[1].len(), 4000, "{p}");
        let rtx: Vec<_> = net.sends_of(0, 2000).into_iter().skip(1).collect();
        assert_eq!(rtx.len(), 1, "{p}: {rtx:?}");
        assert_ne!(rtx[0].1, TxReason::TimeoutRetransmit, "{p}: {rtx:?}");
    }
}
