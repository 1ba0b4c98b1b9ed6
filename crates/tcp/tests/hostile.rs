//! Hostile input: well-formed segments with random field values (valid
//! checksums) thrown at established endpoints never panic, and a connection
//! that only sees garbage from a third party keeps working.

mod common;
use common::*;
use thinstream_base::drive::Transport;
use thinstream_base::{Datagram, Seed};
use thinstream_tcp::segment::{Flags, Options, Segment};
use thinstream_tcp::TcpConfig;

#[test]
fn random_well_formed_segments_do_not_panic() {
    let mut rng = Seed(99).rng();
    for profile in ["newreno", "linux-2.6.23+all", "linux-modern+rdb"] {
        let cfg = TcpConfig::from_profile(profile).unwrap();
        let mut net = Net::pair(&cfg, &cfg, ms(10));
        net.run_until(at(100));
        for i in 0..20u64 {
            net.send(0, &[i as u8; 300]);
            net.send(1, &[i as u8; 50]);
        }
        for round in 0..3000u32 {
            let to = (round % 2) as usize;
            let from = 1 - to;
            let base_seq = net.isns[from];
            let base_ack = net.isns[to];
            let near = |rng: &mut thinstream_base::Rng, base: u32| {
                if rng.chance(0.7) {
                    base.wrapping_add(rng.below(20_000) as u32)
                } else {
                    rng.next_u32()
                }
            };
            let nblocks = rng.below(5) as usize;
            let sack: Vec<(u32, u32)> = (0..nblocks.min(3))
                .map(|_| (near(&mut rng, base_ack), near(&mut rng, base_ack)))
                .collect();
            let seg = Segment {
                src_port: net.addrs[from].port(),
                dst_port: net.addrs[to].port(),
                seq: near(&mut rng, base_seq),
                ack: near(&mut rng, base_ack),
                // No RST: a reset would end the connection and the rest of
                // the inputs would only exercise the closed state.
                flags: Flags(rng.below(64) as u8 & !Flags::RST),
                window: rng.next_u32() as u16,
                options: Options {
                    mss: None,
                    window_scale: None,
                    sack_permitted: false,
                    sack: sack.into(),
                    timestamps: rng.chance(0.5).then(|| {
                        (
                            rng.next_u32(),
                            if rng.chance(0.5) { 0 } else { rng.next_u32() },
                        )
                    }),
                },
                payload: vec![0xEE; rng.below(1500) as usize].into(),
            };
            let payload = seg.encode(net.addrs[from], net.addrs[to]).unwrap();
            let now = net.now;
            net.eps[to].handle_datagram(
                now,
                Datagram {
                    src: net.addrs[from],
                    dst: net.addrs[to],
                    payload,
                },
            );
            if round % 50 == 0 {
                net.run_for(ms(3));
            }
        }
        let established = net.eps.iter().filter(|e| e.is_established()).count();
        let discarded: u64 = net.eps.iter().map(|e| e.stats().discarded).sum();
        assert!(discarded > 0, "{profile}: some inputs must be rejected");
        assert!(
            established > 0 || net.eps.iter().all(|e| e.is_closed()),
            "{profile}"
        );
        // Whatever state they reached, the endpoints keep running without panicking.
        net.run_for(ms(200_000));
    }
}

#[test]
fn third_party_segments_are_ignored() {
    let cfg = TcpConfig::linux_2_6_23();
    let mut net = Net::pair(&cfg, &cfg, ms(10));
    net.run_until(at(100));
    let stranger: std::net::SocketAddr = "10.9.9.9:1234".parse().unwrap();
    let seg = Segment {
        src_port: 1234,
        dst_port: net.addrs[1].port(),
        seq: 1,
        ack: 1,
        flags: Flags(Flags::RST | Flags::ACK),
        window: 100,
        options: Options::default(),
        payload: Vec::new().into(),
    };
    let payload = seg.encode(stranger, net.addrs[1]).unwrap();
    let now = net.now;
    net.eps[1].handle_datagram(
        now,
        Datagram {
            src: stranger,
            dst: net.addrs[1],
            payload,
        },
    );
    net.send(0, b"unaffected");
    net.run_for(ms(100));
    assert_eq!(net.rx[1], b"unaffected");
}
