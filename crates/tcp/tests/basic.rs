//! Handshake, transfer, close, and the trace contract.

mod common;
use common::*;
use thinstream_base::drive::{AppEvent, Outgoing, SendError, Transport};
use thinstream_base::trace::{Record, TxReason, Units};
use thinstream_tcp::{State, TcpConfig};

#[test]
fn handshake_transfer_and_close() {
    for profile in [
        "newreno",
        "linux-2.6.23",
        "linux-modern",
        "linux-2.6.23+all",
    ] {
        let cfg = TcpConfig::from_profile(profile).unwrap();
        let mut net = Net::pair(&cfg, &cfg, ms(25));
        net.run_until(at(49));
        assert_eq!(net.eps[0].state(), State::SynSent, "{profile}");
        net.run_until(at(50));
        assert_eq!(net.eps[0].state(), State::Established, "{profile}");
        assert_eq!(net.eps[1].state(), State::SynReceived);
        net.run_until(at(75));
        assert_eq!(net.eps[1].state(), State::Established);
        assert_eq!(net.apps[0][0], AppEvent::Established);
        assert_eq!(net.apps[1][0], AppEvent::Established);

        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + 3) as u8).collect();
        for chunk in data.chunks(1000) {
            net.send(0, chunk);
        }
        net.send(1, b"reply from the server");
        net.run_for(ms(2000));
        assert_eq!(net.rx[1], data, "{profile}");
        assert_eq!(net.rx[0], b"reply from the server");
        net.close(0);
        net.run_for(ms(2000));
        assert_eq!(net.eps[0].state(), State::Closed, "{profile}");
        assert_eq!(net.eps[1].state(), State::Closed, "{profile}");
        assert!(net.apps[0].contains(&AppEvent::Closed { error: None }));
        assert!(net.apps[1].contains(&AppEvent::Closed { error: None }));
        assert_eq!(net.eps[0].poll_timeout(), None);
        // No retransmission without loss.
        assert!(
            net.pieces(0).iter().all(|(_, d)| d.reason == TxReason::New),
            "{profile}"
        );
    }
}

#[test]
fn trace_units_and_wire_sizes() {
    let cfg = TcpConfig::linux_2_6_23();
    let mut net = Net::pair(&cfg, &cfg, ms(10));
    net.run_until(at(30));
    let id0 = net.send(0, &[1; 100]);
    let id1 = net.send(0, &[2; 1448 + 10]);
    assert_eq!((id0, id1), (0, 1));
    net.run_for(ms(500));
    let submitted: Vec<(u64, Units)> = net.traces[0]
        .iter()
        .filter_map(|r| match r {
            Record::Submitted { message, units, .. } => Some((*message, *units)),
            _ => None,
        })
        .collect();
    assert_eq!(
        submitted,
        vec![(0, Units::new(0, 100)), (1, Units::new(100, 1558))]
    );
    let sizes: Vec<(u32, Vec<Units>)> = net.traces[0]
        .iter()
        .filter_map(|r| match r {
            Record::PacketSent {
                wire_bytes, data, ..
            } if !data.is_empty() => Some((*wire_bytes, data.iter().map(|d| d.units).collect())),
            _ => None,
        })
        .collect();
    // 20 IP + 20 TCP + 12 timestamps + payload; each write its own segment(s).
    assert_eq!(
        sizes,
        vec![
            (152, vec![Units::new(0, 100)]),
            (1500, vec![Units::new(100, 1548)]),
            (62, vec![Units::new(1548, 1558)]),
        ]
    );
    let acked: u64 = net.traces[0]
        .iter()
        .filter_map(|r| match r {
            Record::Acked { units, .. } => Some(units.len()),
            _ => None,
        })
        .sum();
    assert_eq!(acked, 1558);
    let delivered: Vec<Units> = net.traces[1]
        .iter()
        .filter_map(|r| match r {
            Record::Delivered { units, .. } => Some(*units),
            _ => None,
        })
        .collect();
    assert_eq!(
        delivered,
        vec![
            Units::new(0, 100),
            Units::new(100, 1548),
            Units::new(1548, 1558)
        ]
    );
    assert!(net.traces[1]
        .iter()
        .any(|r| matches!(r, Record::State { state, .. } if state == "established")));
}

#[test]
fn send_rejects_streams_unordered_and_before_connect() {
    let cfg = TcpConfig::newreno();
    let mut net = Net::pair(&cfg, &cfg, ms(10));
    let msg = |stream, unordered| Outgoing {
        stream,
        unordered,
        payload: b"x",
    };
    assert_eq!(
        net.eps[0].send(net.now, msg(0, false)),
        Err(SendError::NotConnected)
    );
    net.run_until(at(40));
    assert!(matches!(
        net.eps[0].send(net.now, msg(1, false)),
        Err(SendError::InvalidStream { .. })
    ));
    assert!(matches!(
        net.eps[0].send(net.now, msg(0, true)),
        Err(SendError::Unsupported(_))
    ));
    let empty = Outgoing {
        stream: 0,
        unordered: false,
        payload: b"",
    };
    assert_eq!(net.eps[0].send(net.now, empty), Err(SendError::Empty));
    let big = vec![0u8; cfg.snd_buf as usize + 1];
    let m = Outgoing {
        stream: 0,
        unordered: false,
        payload: &big,
    };
    assert!(matches!(
        net.eps[0].send(net.now, m),
        Err(SendError::TooLarge { .. })
    ));
}

#[test]
fn send_buffer_fills_and_signals_writable() {
    let mut cfg = TcpConfig::newreno();
    cfg.snd_buf = 8000;
    let mut net = Net::pair(&cfg, &cfg, ms(10));
    net.run_until(at(40));
    let now = net.now;
    let m = Outgoing {
        stream: 0,
        unordered: false,
        payload: &[5u8; 3000],
    };
    assert!(net.eps[0].send(now, m).is_ok());
    assert!(net.eps[0].send(now, m).is_ok());
    assert_eq!(net.eps[0].send(now, m), Err(SendError::BufferFull));
    net.run_for(ms(200));
    assert!(net.apps[0].contains(&AppEvent::Writable));
    assert_eq!(net.rx[1].len(), 6000);
}

#[test]
fn lost_syn_and_syn_ack_are_retransmitted_after_the_initial_rto() {
    let cfg = TcpConfig::linux_2_6_23();
    let mut net = Net::pair(&cfg, &cfg, ms(10));
    // The first SYN left when the pair was built. Drop the server's first two
    // packets, so the SYN-ACK at 10 ms and the answer to
    // the client's SYN retransmission (3 s, initial RTO) are both lost.
    net.drop_rule = Some(Box::new(|p| p.from == 1 && p.index < 2));
    net.run_until(at(20_000));
    assert_eq!(net.eps[0].state(), State::Established);
    assert_eq!(net.eps[1].state(), State::Established);
    // Server: SYN-ACK at 10 ms (lost); the client's SYN retransmission (3 s,
    // the initial RTO) arrives at 3.010 s and is answered at once (lost),
    // which restarts the server's timer: 3.010 + 3 = 6.010 s, arriving 6.020 s.
    assert!(net.apps[0].contains(&AppEvent::Established));
    let est = net.traces[0].iter().find_map(|r| match r {
        Record::State { time, state } if state == "established" => Some(*time),
        _ => None,
    });
    assert_eq!(est, Some(at(6020)));
}

#[test]
fn garbage_is_discarded_and_the_connection_survives() {
    let cfg = TcpConfig::newreno();
    let mut net = Net::pair(&cfg, &cfg, ms(10));
    net.run_until(at(40));
    let (src, dst) = (net.addrs[0], net.addrs[1]);
    let mut rng = thinstream_base::Seed(11).rng();
    for len in [0usize, 3, 19, 20, 21, 40, 60, 200] {
        let mut payload = vec![0u8; len];
        rng.fill_bytes(&mut payload);
        let now = net.now;
        net.eps[1].handle_datagram(now, thinstream_base::Datagram { src, dst, payload });
    }
    assert!(net.eps[1].stats().discarded >= 8);
    net.send(0, b"still alive");
    net.run_for(ms(100));
    assert_eq!(net.rx[1], b"still alive");
}

#[test]
fn small_receive_window_limits_the_sender() {
    let mut server = TcpConfig::newreno();
    server.rcv_buf = 4 * 1448;
    let client = TcpConfig::from_profile("linux-modern").unwrap(); // IW 10 > window
    let mut net = Net::pair(&client, &server, ms(20));
    net.run_until(at(100));
    let data: Vec<u8> = (0..60_000u32).map(|i| (i % 251) as u8).collect();
    for chunk in data.chunks(6000) {
        net.send(0, chunk);
    }
    // Never more than the advertised window beyond the cumulative ACK.
    let mut max_out = 0u64;
    for _ in 0..400 {
        net.run_for(ms(5));
        max_out = max_out.max(net.eps[0].packets_out());
    }
    assert_eq!(net.rx[1], data);
    // Exactly four full segments fit the window (the congestion window allows ten).
    assert_eq!(max_out, 4);
}
