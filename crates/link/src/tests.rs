//! Link-level tests: the whole pipeline through `Link::send`.

use crate::*;
use std::net::SocketAddr;
use thinstream_base::{Bitrate, Datagram, Duration, Instant, Probability, Seed};

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], port))
}

/// A datagram whose payload carries its sequence number.
fn dgram(seq: u32, len: usize) -> Datagram {
    let mut payload = vec![0u8; len.max(4)];
    payload[..4].copy_from_slice(&seq.to_be_bytes());
    Datagram {
        src: addr(1),
        dst: addr(2),
        payload,
    }
}

fn seq_of(d: &Datagram) -> u32 {
    u32::from_be_bytes(d.payload[..4].try_into().unwrap())
}

fn netem(text: &str) -> LinkConfig {
    LinkConfig::parse_netem(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// Sends `n` datagrams, one every `interval`, and returns everything delivered.
fn run(link: &mut Link, n: u32, interval: Duration, len: usize) -> Vec<(Instant, Datagram)> {
    let mut out = Vec::new();
    for i in 0..n {
        let now = Instant::ZERO + interval * u64::from(i);
        let before = out.len();
        link.send(now, dgram(i, len), &mut out);
        assert!(
            out[before..].iter().all(|(t, _)| *t >= now),
            "arrival before send"
        );
    }
    out
}

fn delivered_seqs(out: &[(Instant, Datagram)]) -> Vec<u32> {
    out.iter().map(|(_, d)| seq_of(d)).collect()
}

fn assert_balanced(s: &LinkStats) {
    assert_eq!(
        s.offered.packets + s.duplicated,
        s.delivered.packets + s.dropped_total().packets,
        "{s}"
    );
}

// A link can move to another thread (the real-time emulator holds one per
// direction) and keeps the config it was built from.
#[test]
fn link_is_send_and_keeps_its_config() {
    fn assert_send<T: Send>(_: &T) {}
    let c = netem("delay 10ms loss 1%");
    let l = Link::new(&c, Seed(1)).with_drop_predicate(|_| false);
    assert_send(&l);
    assert_eq!(l.config(), &c);
    assert!(format!("{l:?}").contains("has_predicate: true"));
}

// A perfect link delivers everything at once, in order.
#[test]
fn perfect_link_delivers_immediately() {
    let mut l = Link::new(&LinkConfig::perfect(), Seed(1));
    let out = run(&mut l, 100, Duration::from_millis(1), 100);
    assert_eq!(out.len(), 100);
    for (i, (t, d)) in out.iter().enumerate() {
        assert_eq!(*t, Instant::from_millis(i as u64));
        assert_eq!(seq_of(d), i as u32);
    }
    assert_eq!(l.stats().delivered.bytes, 100 * 100);
    assert_balanced(l.stats());
}

// Bernoulli loss 5 % over 2·10^5 packets: within 4 sigma, blamed on the loss model.
#[test]
fn bernoulli_loss_rate_through_the_link() {
    let n = 200_000u32;
    let mut l = Link::new(&netem("loss 5%"), Seed(2));
    let out = run(&mut l, n, Duration::from_micros(10), 8);
    let lost = f64::from(n) - out.len() as f64;
    let (mean, sigma) = (f64::from(n) * 0.05, (f64::from(n) * 0.05 * 0.95).sqrt());
    assert!((lost - mean).abs() < 4.0 * sigma, "lost {lost}");
    assert_eq!(l.stats().dropped(DropCause::LossModel).packets, lost as u64);
    assert_balanced(l.stats());
}

// Periodic drops are exact: every 20th packet, nothing else.
#[test]
fn periodic_drops_are_exact() {
    let mut l = Link::new(&netem("drop-every 20"), Seed(3));
    let out = run(&mut l, 1000, Duration::from_millis(1), 10);
    let got = delivered_seqs(&out);
    let expected: Vec<u32> = (0..1000).filter(|i| (i + 1) % 20 != 0).collect();
    assert_eq!(got, expected);
    assert_eq!(l.stats().dropped(DropCause::Periodic).packets, 50);
}

// Listed drops: exactly the 1st, 3rd and 10th packets of this direction.
#[test]
fn kth_packet_drops_are_exact() {
    let mut l = Link::new(&netem("drop-packets 1,3,10"), Seed(4));
    let out = run(&mut l, 12, Duration::from_millis(1), 10);
    assert_eq!(delivered_seqs(&out), vec![1, 3, 4, 5, 6, 7, 8, 10, 11]);
    assert_eq!(l.stats().dropped(DropCause::Listed).packets, 3);
}

// A loss trace drops where it says, and repeats when asked.
#[test]
fn trace_loss_through_the_link() {
    let mut l = Link::new(&netem("loss-trace 0101 repeat"), Seed(5));
    let out = run(&mut l, 8, Duration::from_millis(1), 10);
    assert_eq!(delivered_seqs(&out), vec![0, 2, 4, 6]);
    assert_eq!(l.stats().dropped(DropCause::Trace).packets, 4);
}

// The predicate sees each datagram once and drops what it selects.
#[test]
fn drop_predicate_selects_packets() {
    let mut l =
        Link::new(&LinkConfig::perfect(), Seed(6)).with_drop_predicate(|d| seq_of(d) % 7 == 3);
    let out = run(&mut l, 50, Duration::from_millis(1), 10);
    assert!(delivered_seqs(&out).iter().all(|s| s % 7 != 3));
    assert_eq!(l.stats().dropped(DropCause::Predicate).packets, 7);
    l.set_drop_predicate(None);
    let mut out = Vec::new();
    l.send(Instant::from_secs(1), dgram(3, 10), &mut out);
    assert_eq!(out.len(), 1);
}

// Outages drop everything offered inside the window.
#[test]
fn outage_drops_a_time_window() {
    let mut l = Link::new(&netem("delay 10ms outage 20ms 10ms"), Seed(7));
    let out = run(&mut l, 40, Duration::from_millis(1), 10);
    let expected: Vec<u32> = (0..40).filter(|i| !(20..30).contains(i)).collect();
    assert_eq!(delivered_seqs(&out), expected);
    assert_eq!(l.stats().dropped(DropCause::Outage).packets, 10);
}

// Feeding a 1 Mbit/s bottleneck at twice its rate: the server is busy from
// the first packet on, so exactly 1 + limit + floor(t_last / tx) packets get
// through; the rest are tail-dropped, and deliveries are spaced by exactly
// one serialisation time (1000 bytes -> 8 ms).
#[test]
fn queue_at_twice_the_rate_drops_the_excess_and_paces_deliveries() {
    let limit = 10u64;
    let n = 1000u32;
    let tx = Bitrate(1_000_000).transmission_time(1000);
    assert_eq!(tx, Duration::from_millis(8));
    let interval = tx / 2;
    let mut l = Link::new(&netem("delay 20ms rate 1mbit limit 10"), Seed(8));
    let out = run(&mut l, n, interval, 1000);
    let t_last = interval * u64::from(n - 1);
    let expected = 1 + limit + t_last.as_nanos() / tx.as_nanos();
    assert_eq!(out.len() as u64, expected);
    assert_eq!(
        l.stats().dropped(DropCause::QueueOverflow).packets,
        u64::from(n) - expected
    );
    // First packet: serialisation plus propagation.
    assert_eq!(out[0].0, Instant::ZERO + tx + Duration::from_millis(20));
    for w in out.windows(2) {
        assert_eq!(w[1].0 - w[0].0, tx);
    }
    // Roughly half the offered load is lost, as it must at twice the rate.
    let dropped = l.stats().dropped_total().packets as f64 / f64::from(n);
    assert!((dropped - 0.5).abs() < 0.02, "{dropped}");
}

// Overhead bytes: 28 bytes of IPv4+UDP make a 972-byte payload take 8 ms.
#[test]
fn bottleneck_overhead_counts_in_serialisation() {
    let mut l = Link::new(&netem("rate 1mbit 28"), Seed(9));
    let out = run(&mut l, 3, Duration::ZERO, 972);
    let times: Vec<u64> = out.iter().map(|(t, _)| t.as_nanos()).collect();
    assert_eq!(times, vec![8_000_000, 16_000_000, 24_000_000]);
}

// Delay and jitter (uniform and normal) never reorder unless asked.
#[test]
fn jitter_never_reorders_unless_asked() {
    for text in [
        "delay 50ms 20ms",
        "delay 50ms 30ms distribution normal",
        "delay 5ms 20ms rate 10mbit",
    ] {
        let mut l = Link::new(&netem(text), Seed(10));
        let out = run(&mut l, 20_000, Duration::from_micros(500), 100);
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0), "{text}");
        assert_eq!(
            delivered_seqs(&out),
            (0..20_000).collect::<Vec<_>>(),
            "{text}"
        );
        assert_eq!(l.stats().reordered, 0, "{text}");
    }
    // With jitter-reorders, inversions happen and the counter counts them.
    let mut l = Link::new(&netem("delay 50ms 20ms jitter-reorders"), Seed(10));
    let out = run(&mut l, 20_000, Duration::from_micros(500), 100);
    let mut latest = Instant::ZERO;
    let mut inversions = 0;
    for (t, _) in &out {
        if *t < latest {
            inversions += 1;
        }
        latest = latest.max(*t);
    }
    assert!(inversions > 1000, "{inversions}");
    assert_eq!(l.stats().reordered, inversions);
}

// netem reorder: about P of the packets skip the 50 ms delay and overtake
// the ones sent in the last 50 ms; all others arrive exactly 50 ms later.
#[test]
fn reorder_sends_chosen_packets_immediately() {
    let n = 100_000u32;
    let mut l = Link::new(&netem("delay 50ms reorder 10%"), Seed(11));
    let out = run(&mut l, n, Duration::from_millis(1), 10);
    assert_eq!(out.len(), n as usize);
    let mut immediate = 0u64;
    for (t, d) in &out {
        let sent = Instant::from_millis(u64::from(seq_of(d)));
        if *t == sent {
            immediate += 1;
        } else {
            assert_eq!(*t, sent + Duration::from_millis(50));
        }
    }
    let (mean, sigma) = (f64::from(n) * 0.1, (f64::from(n) * 0.1 * 0.9).sqrt());
    assert!((immediate as f64 - mean).abs() < 4.0 * sigma, "{immediate}");
    // Every immediate packet after the first 50 ms overtakes an earlier one.
    assert!(l.stats().reordered >= immediate - 50 && l.stats().reordered <= immediate);
}

// Duplication: rate within 4 sigma, the copy is identical and not earlier.
#[test]
fn duplication_rate_and_copies() {
    let n = 200_000u32;
    let mut l = Link::new(&netem("delay 10ms duplicate 2%"), Seed(12));
    let out = run(&mut l, n, Duration::from_micros(100), 8);
    let dups = out.len() as f64 - f64::from(n);
    let (mean, sigma) = (f64::from(n) * 0.02, (f64::from(n) * 0.02 * 0.98).sqrt());
    assert!((dups - mean).abs() < 4.0 * sigma, "{dups}");
    assert_eq!(l.stats().duplicated, dups as u64);
    for w in out.windows(2) {
        if seq_of(&w[0].1) == seq_of(&w[1].1) {
            assert_eq!(w[0].1, w[1].1);
            assert!(w[1].0 >= w[0].0);
        }
    }
    assert_balanced(l.stats());
}

// Corruption through the link: exactly one bit differs from what was sent.
#[test]
fn corruption_flips_one_bit_of_delivered_copies() {
    let mut l = Link::new(&netem("corrupt 50%"), Seed(13));
    let mut corrupted = 0;
    for i in 0..2000u32 {
        let sent = Datagram {
            src: addr(1),
            dst: addr(2),
            payload: (0..64u8)
                .map(|b| b.wrapping_mul(31).wrapping_add(i as u8))
                .collect(),
        };
        let mut out = Vec::new();
        let report = l.send_report(Instant::from_millis(u64::from(i)), sent.clone(), &mut out);
        assert_eq!(out.len(), 1);
        let got = &out[0].1;
        assert_eq!(got.payload.len(), sent.payload.len());
        let bits: u32 = got
            .payload
            .iter()
            .zip(&sent.payload)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert!(bits <= 1);
        assert_eq!(bits == 1, report.corrupted == 1);
        corrupted += bits;
    }
    assert_eq!(u64::from(corrupted), l.stats().corrupted);
    assert!((800..1200).contains(&corrupted), "{corrupted}");
}

// `admit` leaves the datagram with the caller: a duplicate is taken before
// the original can be corrupted, so each copy differs from what was sent by
// its own corruption draw only, and the report counts exactly those.
#[test]
fn admit_corrupts_each_copy_on_its_own_draw() {
    let mut l = Link::new(&netem("delay 5ms duplicate 50% corrupt 50%"), Seed(21));
    let bits = |a: &Datagram, b: &Datagram| -> u32 {
        a.payload
            .iter()
            .zip(&b.payload)
            .map(|(x, y)| (x ^ y).count_ones())
            .sum()
    };
    let (mut duplicates, mut corrupted) = (0u64, 0u64);
    for i in 0..2000u32 {
        let sent = dgram(i, 64);
        let mut d = sent.clone();
        let now = Instant::from_millis(u64::from(i));
        let a = l.admit(now, &mut d);
        assert_eq!(a.arrival, Some(now + Duration::from_millis(5)));
        let mut flipped = bits(&d, &sent);
        if let Some((at, copy)) = &a.duplicate {
            assert!(a.report.duplicated);
            assert_eq!(*at, now + Duration::from_millis(5));
            flipped += bits(copy, &sent) * 16;
            duplicates += 1;
        } else {
            assert!(!a.report.duplicated);
        }
        // At most one bit per copy, and the report says which copies.
        assert!(flipped & 0xf <= 1 && flipped >> 4 <= 1, "{flipped}");
        let copies_hit = u8::from(flipped & 0xf == 1) + u8::from(flipped >> 4 == 1);
        assert_eq!(a.report.corrupted, copies_hit);
        assert_eq!(a.report.delivered, 1 + u8::from(a.duplicate.is_some()));
        corrupted += u64::from(copies_hit);
    }
    assert_eq!(l.stats().duplicated, duplicates);
    assert_eq!(l.stats().corrupted, corrupted);
    assert!((800..1200).contains(&duplicates), "{duplicates}");
    assert_balanced(l.stats());
}

const RICH: &str = "delay 30ms 10ms loss gemodel 2% 30% 80% 0.5% duplicate 3% corrupt 1% \
                    reorder 5% gap 2 rate 2mbit 28 limit 20";

fn rich_run(seed: u64) -> (Vec<(Instant, Datagram)>, LinkStats) {
    let mut l = Link::new(&netem(RICH), Seed(seed));
    let out = run(&mut l, 5000, Duration::from_micros(2500), 300);
    (out, l.stats().clone())
}

// Same seed, same everything; another seed, different outcomes.
#[test]
fn same_seed_same_output_different_seed_different_output() {
    let (a, sa) = rich_run(77);
    let (b, sb) = rich_run(77);
    assert_eq!(a, b);
    assert_eq!(sa, sb);
    let (c, sc) = rich_run(78);
    assert_ne!(a, c);
    assert_ne!(sa, sc);
    assert_balanced(&sa);
    assert!(sa.dropped(DropCause::LossModel).packets > 0);
    assert!(sa.duplicated > 0 && sa.corrupted > 0 && sa.reordered > 0);
}

// Stage independence: adding duplication, corruption, jitter or a predicate
// does not change which packets the loss model drops.
#[test]
fn adding_a_stage_does_not_shift_another_stages_randomness() {
    let lost_by_model = |text: &str, predicate: bool| -> Vec<u64> {
        let mut l = Link::new(&netem(text), Seed(99));
        if predicate {
            l = l.with_drop_predicate(|d| seq_of(d) % 10 == 0);
        }
        let mut lost = Vec::new();
        for i in 0..5000u32 {
            let mut out = Vec::new();
            let r = l.send_report(Instant::from_millis(u64::from(i)), dgram(i, 20), &mut out);
            if r.dropped == Some(DropCause::LossModel) {
                lost.push(u64::from(i));
            }
        }
        lost
    };
    let base = lost_by_model("loss 10%", false);
    assert!(!base.is_empty());
    assert_eq!(
        base,
        lost_by_model("loss 10% duplicate 20% corrupt 5% delay 5ms 2ms", false)
    );
    // With the predicate, packets it takes are blamed on it instead.
    let with_pred = lost_by_model("loss 10%", true);
    let expected: Vec<u64> = base.iter().copied().filter(|i| i % 10 != 0).collect();
    assert_eq!(with_pred, expected);
}

// The documented netem syntax is accepted and means what it says.
#[test]
fn parse_netem_accepts_the_documented_syntax() {
    let c = netem("delay 50ms 5ms loss 5% rate 10mbit limit 100");
    assert_eq!(c.delay, Duration::from_millis(50));
    let j = c.jitter.as_ref().unwrap();
    assert_eq!(
        (j.spread, j.distribution, j.allow_reordering),
        (Duration::from_millis(5), JitterDistribution::Uniform, false)
    );
    assert_eq!(
        c.loss,
        Some(LossModel::Bernoulli {
            p: Probability::new(0.05).unwrap()
        })
    );
    let b = c.bottleneck.as_ref().unwrap();
    assert_eq!(
        (b.rate, b.limit_packets, b.limit_bytes, b.overhead_bytes),
        (Bitrate(10_000_000), Some(100), None, 0)
    );

    let c = netem("loss gemodel 1% 10% 70% 0.1%");
    let LossModel::GilbertElliott {
        p,
        r,
        loss_in_bad,
        loss_in_good,
    } = c.loss.unwrap()
    else {
        panic!("not GE")
    };
    assert_eq!(
        (p.get(), r.get(), loss_in_bad.get(), loss_in_good.get()),
        (0.01, 0.1, 0.7, 0.001)
    );
    // tc-netem(8) defaults: p alone is Bernoulli (r = 1 - p, 1-h = 100%, 1-k = 0).
    let LossModel::GilbertElliott {
        r,
        loss_in_bad,
        loss_in_good,
        ..
    } = netem("loss gemodel 5%").loss.unwrap()
    else {
        panic!("not GE")
    };
    assert_eq!(
        (r.get(), loss_in_bad.get(), loss_in_good.get()),
        (0.95, 1.0, 0.0)
    );

    let c = netem("duplicate 2% reorder 1% corrupt 0.1%");
    assert_eq!(c.duplicate.unwrap().get(), 0.02);
    assert_eq!(c.corrupt.unwrap().get(), 0.001);
    let r = c.reorder.as_ref().unwrap();
    assert_eq!((r.probability.get(), r.gap, r.hold), (0.01, 1, None));

    let c = netem("DELAY 10ms 2ms distribution normal jitter-reorders reorder 25% gap 5 hold 3ms");
    assert_eq!(
        c.jitter.as_ref().unwrap().distribution,
        JitterDistribution::Normal
    );
    assert!(c.jitter.as_ref().unwrap().allow_reordering);
    assert_eq!(
        c.reorder,
        Some(Reorder {
            probability: Probability::new(0.25).unwrap(),
            gap: 5,
            hold: Some(Duration::from_millis(3))
        })
    );

    let c = netem("drop-every 10 first 3 drop-packets 4,8 loss-trace 0011 limit-bytes 3000 rate 500kbit -4 limit 7");
    assert_eq!(
        c.drop_every,
        Some(PeriodicDrop::Fixed {
            every: 10,
            first: 3
        })
    );
    assert_eq!(c.drop_packets, vec![4, 8]);
    assert_eq!(
        c.loss_trace,
        Some(LossTrace {
            pattern: "0011".into(),
            repeat: false
        })
    );
    let b = c.bottleneck.unwrap();
    assert_eq!(
        (b.rate, b.overhead_bytes, b.limit_packets, b.limit_bytes),
        (Bitrate(500_000), -4, Some(7), Some(3000))
    );
    assert_eq!(
        netem("drop-every 7 one-per-block").drop_every,
        Some(PeriodicDrop::OnePerBlock { every: 7 })
    );
    assert_eq!(
        netem("drop-every 7 random-phase").drop_every,
        Some(PeriodicDrop::RandomPhase { every: 7 })
    );
    assert_eq!(
        netem("loss random 3%").loss,
        Some(LossModel::Bernoulli {
            p: Probability::new(0.03).unwrap()
        })
    );
    assert_eq!(netem("delay 10ms 0ms 0%").delay, Duration::from_millis(10));
    assert_eq!(netem("   "), LinkConfig::default());
}

/// The error text of a refused netem text.
fn refused(text: &str) -> String {
    match LinkConfig::parse_netem(text) {
        Ok(c) => panic!("{text:?} was accepted as {c:?}"),
        Err(e) => e.to_string(),
    }
}

// Garbage is refused with the offending word, its position and what was expected.
#[test]
fn parse_netem_rejects_garbage_clearly() {
    let e = refused("delay 50ms lossy 5%");
    assert!(
        e.contains("word 3") && e.contains("\"lossy\"") && e.contains("one of the keywords"),
        "{e}"
    );
    let e = refused("delay fast");
    assert!(
        e.contains("\"fast\"") && e.contains("a delay such as 50ms"),
        "{e}"
    );
    let e = refused("delay 50");
    assert!(e.contains("unit"), "{e}");
    let e = refused("loss 0.05");
    assert!(e.contains('%'), "{e}");
    let e = refused("loss 150%");
    assert!(e.contains("between 0% and 100%"), "{e}");
    let e = refused("loss");
    assert!(e.contains("<end of text>") && e.contains("word 2"), "{e}");
    let e = refused("loss 5% 25%");
    assert!(e.contains("correlation is not implemented"), "{e}");
    let e = refused("loss state 1% 2%");
    assert!(e.contains("4-state"), "{e}");
    let e = refused("delay 10ms 2ms distribution pareto");
    assert!(e.contains("not implemented"), "{e}");
    let e = refused("delay 10ms distribution normal");
    assert!(e.contains("a jitter first"), "{e}");
    let e = refused("limit 100");
    assert!(e.contains("rate"), "{e}");
    let e = refused("delay 5ms limit-bytes 3000");
    assert!(
        e.contains("word 3 (\"limit-bytes\")") && e.contains("rate"),
        "{e}"
    );
    let e = refused("gap 5");
    assert!(e.contains("reorder"), "{e}");
    let e = refused("loss 1% loss 2%");
    assert!(e.contains("at most once"), "{e}");
    let e = refused("rate fastish");
    assert!(e.contains("\"fastish\""), "{e}");
    let e = refused("rate 1mbit 20 64");
    assert!(e.contains("cell"), "{e}");
    let e = refused("drop-packets 1,x");
    assert!(e.contains("packet numbers"), "{e}");
    let e = refused("drop-packets 0,2");
    assert!(e.contains("numbered from 1"), "{e}");
    let e = refused("drop-every 0");
    assert!(e.contains("at least 1"), "{e}");
    let e = refused("loss-trace 01a1");
    assert!(e.contains("'a'"), "{e}");
    let e = refused("reorder 5% gap 0 delay 5ms");
    assert!(e.contains("gap"), "{e}");
    let e = refused("slot 10ms");
    assert!(e.contains("not implemented"), "{e}");
}

// to_netem writes text that parse_netem reads back to an equal config.
#[test]
fn netem_text_round_trip() {
    for text in [
        "",
        "delay 50ms 5ms loss 5% rate 10mbit limit 100",
        "loss gemodel 1% 10% 70% 0.1%",
        "duplicate 2% reorder 1% corrupt 0.1%",
        "delay 1234567ns 3us distribution normal jitter-reorders reorder 33.3% gap 4 hold 7ms",
        "rate 1500kbit -4 limit 3 limit-bytes 4500 drop-packets 9,2,5",
        "drop-every 20 random-phase loss-trace 0010 repeat outage 1s 250ms outage 3s 1ms",
        "drop-every 20 one-per-block loss 0.7%",
        "drop-every 20 first 4",
        "delay 5ms rate 500kbit tick 1ms",
    ] {
        let c = netem(text);
        let written = c.to_netem();
        assert_eq!(netem(&written), c, "{text:?} -> {written:?}");
    }
}

// Configs survive a TOML round trip; hand-written TOML with units reads.
#[test]
fn toml_round_trip_and_readable_form() {
    for text in [
        RICH,
        "delay 1234567ns 3us distribution normal jitter-reorders reorder 33.3% gap 4 hold 7ms",
        "drop-every 20 random-phase loss-trace 0010 repeat outage 1s 250ms drop-packets 3,4",
        "loss 5%",
        "",
    ] {
        let c = netem(text);
        let s = toml::to_string(&c).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let back: LinkConfig = toml::from_str(&s).unwrap_or_else(|e| panic!("{s}\n{e}"));
        assert_eq!(back, c, "{s}");
    }
    let hand = r#"
        delay = "50ms"
        duplicate = "1%"
        drop_packets = [3, 5]
        [jitter]
        spread = "5ms"
        distribution = "normal"
        [loss]
        model = "gilbert-elliott"
        p = "1%"
        r = 0.1
        loss_in_bad = 0.7
        loss_in_good = "0.1%"
        [bottleneck]
        rate = "10mbit"
        overhead_bytes = 28
        limit_packets = 100
        [drop_every]
        form = "fixed"
        every = 20
        first = 20
        [[outages]]
        start = "2s"
        duration = "500ms"
    "#;
    let c: LinkConfig = toml::from_str(hand).unwrap();
    c.validate().unwrap();
    assert_eq!(
        c,
        netem(
            "delay 50ms 5ms distribution normal duplicate 1% drop-packets 3,5 \
             loss gemodel 1% 10% 70% 0.1% rate 10mbit 28 limit 100 drop-every 20 outage 2s 500ms"
        )
    );
    // Typos and out-of-range values are refused by the deserializer.
    assert!(toml::from_str::<LinkConfig>("dealy = \"5ms\"").is_err());
    assert!(toml::from_str::<LinkConfig>("delay = 50")
        .unwrap_err()
        .to_string()
        .contains("unit"));
    assert!(toml::from_str::<LinkConfig>("duplicate = 1.5").is_err());
    assert!(toml::from_str::<LinkConfig>("[loss]\nmodel = \"bernoulli\"\np = \"120%\"").is_err());
}

// Every preset name parses, and the names list matches the table.
#[test]
fn presets_are_valid() {
    for name in PRESET_NAMES {
        let c = LinkConfig::preset(name).unwrap_or_else(|| panic!("{name}"));
        Link::try_new(&c, Seed(1)).unwrap();
    }
    assert_eq!(PRESET_NAMES.len(), crate::config::PRESETS.len());
    assert!(LinkConfig::preset("no-such-preset").is_none());
    assert_eq!(
        LinkConfig::preset("cross-traffic-bottleneck")
            .unwrap()
            .bottleneck
            .unwrap()
            .limit_packets,
        Some(100)
    );
}

// Invalid configs are typed errors from try_new; new() panics with the reason.
#[test]
fn invalid_configs_are_refused() {
    let c = LinkConfig {
        drop_every: Some(PeriodicDrop::Fixed { every: 0, first: 1 }),
        ..LinkConfig::default()
    };
    let e = Link::try_new(&c, Seed(1)).unwrap_err();
    assert!(
        matches!(
            e,
            LinkConfigError::Invalid {
                field: "drop_every.every",
                ..
            }
        ),
        "{e}"
    );
    let c = LinkConfig {
        loss_trace: Some(LossTrace {
            pattern: "01x".into(),
            repeat: false,
        }),
        ..LinkConfig::default()
    };
    assert!(Link::try_new(&c, Seed(1)).is_err());
}

#[test]
#[should_panic(expected = "invalid link config")]
fn new_panics_on_an_invalid_config() {
    let c = LinkConfig {
        drop_packets: vec![0],
        ..LinkConfig::default()
    };
    let _ = Link::new(&c, Seed(1));
}

// Stats serialise (results store) and print readably.
#[test]
fn stats_serialise_and_display() {
    let (_, s) = rich_run(5);
    let text = toml::to_string(&s).unwrap();
    assert!(text.contains("[drops.loss_model]"), "{text}");
    let back: LinkStats = toml::from_str(&text).unwrap();
    assert_eq!(back, s);
    let shown = s.to_string();
    assert!(shown.starts_with(&format!(
        "offered {} delivered {}",
        s.offered.packets, s.delivered.packets
    )));
    assert!(shown.contains("loss-model="), "{shown}");
}

/// A random but valid config drawn from `r`, covering every part.
fn random_config(r: &mut thinstream_base::Rng) -> LinkConfig {
    let p = |r: &mut thinstream_base::Rng, max: f64| Probability::new(r.next_f64() * max).unwrap();
    let dur =
        |r: &mut thinstream_base::Rng, max_us: u64| Duration::from_micros(r.below(max_us + 1));
    let mut c = LinkConfig {
        delay: dur(r, 80_000),
        ..LinkConfig::default()
    };
    if r.chance(0.5) {
        c.jitter = Some(Jitter {
            spread: dur(r, 30_000),
            distribution: if r.chance(0.5) {
                JitterDistribution::Uniform
            } else {
                JitterDistribution::Normal
            },
            allow_reordering: r.chance(0.3),
        });
    }
    if r.chance(0.3) {
        c.reorder = Some(Reorder {
            probability: p(r, 0.3),
            gap: 1 + r.below(5) as u32,
            hold: r
                .chance(0.5)
                .then(|| Duration::from_micros(1 + r.below(20_000))),
        });
    }
    c.loss = match r.below(3) {
        0 => None,
        1 => Some(LossModel::Bernoulli { p: p(r, 0.3) }),
        _ => Some(LossModel::GilbertElliott {
            p: p(r, 0.2),
            r: p(r, 1.0),
            loss_in_bad: p(r, 1.0),
            loss_in_good: p(r, 0.1),
        }),
    };
    if r.chance(0.3) {
        c.drop_packets = (0..r.below(5)).map(|_| 1 + r.below(300)).collect();
    }
    if r.chance(0.3) {
        let every = 1 + r.below(30);
        c.drop_every = Some(match r.below(3) {
            0 => PeriodicDrop::Fixed {
                every,
                first: 1 + r.below(40),
            },
            1 => PeriodicDrop::RandomPhase { every },
            _ => PeriodicDrop::OnePerBlock { every },
        });
    }
    if r.chance(0.3) {
        let pattern: String = (0..1 + r.below(40))
            .map(|_| if r.chance(0.2) { '1' } else { '0' })
            .collect();
        c.loss_trace = Some(LossTrace {
            pattern,
            repeat: r.chance(0.5),
        });
    }
    if r.chance(0.2) {
        c.outages.push(Outage {
            start: Instant::from_micros(r.below(1_000_000)),
            duration: dur(r, 200_000),
        });
    }
    if r.chance(0.5) {
        c.bottleneck = Some(Bottleneck {
            rate: Bitrate(10_000 + r.below(20_000_000)),
            overhead_bytes: r.below(60) as i32 - 10,
            limit_packets: r.chance(0.7).then(|| r.below(50) as u32),
            limit_bytes: r.chance(0.3).then(|| r.below(100_000)),
        });
    }
    if r.chance(0.3) {
        c.duplicate = Some(p(r, 0.2));
    }
    if r.chance(0.3) {
        c.corrupt = Some(p(r, 0.2));
    }
    c
}

// For many random configs: text and TOML round trips, arrivals never
// before the send time, the stats balance, and order is kept unless
// reordering was asked for.
#[test]
fn random_configs_keep_the_invariants() {
    let mut r = Seed(2024).rng();
    for case in 0..300 {
        let c = random_config(&mut r);
        c.validate()
            .unwrap_or_else(|e| panic!("case {case}: {e}\n{c:?}"));
        let text = c.to_netem();
        assert_eq!(
            LinkConfig::parse_netem(&text).unwrap(),
            c,
            "case {case}: {text}"
        );
        let back: LinkConfig = toml::from_str(&toml::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c, "case {case}");

        let mut l = Link::new(&c, Seed(case));
        let mut out = Vec::new();
        let mut t = Instant::ZERO;
        for i in 0..400u32 {
            t += Duration::from_micros(r.below(5_000));
            let before = out.len();
            let len = r.below(1400) as usize;
            let report = l.send_report(t, dgram(i, len), &mut out);
            assert_eq!(
                usize::from(report.delivered),
                out.len() - before,
                "case {case}"
            );
            assert!(out[before..].iter().all(|(a, _)| *a >= t), "case {case}");
        }
        let s = l.stats();
        assert_balanced(s);
        assert_eq!(s.offered.packets, 400);
        let may_reorder =
            c.reorder.is_some() || c.jitter.as_ref().is_some_and(|j| j.allow_reordering);
        if !may_reorder {
            assert_eq!(s.reordered, 0, "case {case}: {text}");
            assert!(
                out.windows(2).all(|w| w[0].0 <= w[1].0),
                "case {case}: {text}"
            );
        }
    }
}

// parse_netem never panics, whatever the words.
#[test]
fn parse_netem_never_panics() {
    let words = [
        "delay",
        "latency",
        "loss",
        "random",
        "gemodel",
        "state",
        "duplicate",
        "corrupt",
        "reorder",
        "gap",
        "hold",
        "rate",
        "limit",
        "limit-bytes",
        "distribution",
        "normal",
        "pareto",
        "jitter-reorders",
        "drop-packets",
        "drop-every",
        "first",
        "random-phase",
        "one-per-block",
        "loss-trace",
        "repeat",
        "outage",
        "5%",
        "0%",
        "100%",
        "250%",
        "-3%",
        "%",
        "0.5",
        "10ms",
        "0ms",
        "1s",
        "-5ms",
        "ms",
        "10",
        "0",
        "-4",
        "18446744073709551616",
        "1,2,3",
        ",",
        "0101",
        "10mbit",
        "0bit",
        "1e400%",
        "NaN%",
        "inf",
        "µs",
        "5us",
        "ecn",
        "slot",
        "",
    ];
    let mut r = Seed(7).rng();
    let mut accepted = 0;
    for _ in 0..20_000 {
        let n = r.below(8) as usize;
        let text: Vec<&str> = (0..n)
            .map(|_| words[r.below(words.len() as u64) as usize])
            .collect();
        let text = text.join(" ");
        if let Ok(c) = LinkConfig::parse_netem(&text) {
            accepted += 1;
            // Whatever was accepted can be built and written back.
            Link::try_new(&c, Seed(1)).unwrap();
            assert_eq!(LinkConfig::parse_netem(&c.to_netem()).unwrap(), c, "{text}");
        }
    }
    assert!(
        accepted > 100,
        "the vocabulary should produce some valid texts: {accepted}"
    );
}

// `tick`: every arrival moves to the first multiple of the tick at or after
// the time the rest of the pipeline gives it (a 228-byte packet at
// 500 kbit/s: 3.648 ms on the wire, plus 5 ms, arrives at 9 ms on a 1-ms
// tick); order and count are kept, and a zero tick is refused.
#[test]
fn tick_rounds_arrivals_up_to_the_emulator_clock() {
    let plain = run(
        &mut Link::new(&netem("delay 5ms rate 500kbit"), Seed(1)),
        20,
        Duration::from_micros(10),
        228,
    );
    let ticked = run(
        &mut Link::new(&netem("delay 5ms rate 500kbit tick 1ms"), Seed(1)),
        20,
        Duration::from_micros(10),
        228,
    );
    assert_eq!(delivered_seqs(&plain), delivered_seqs(&ticked));
    assert_eq!(plain[0].0, Instant::ZERO + Duration::from_micros(8648));
    assert_eq!(ticked[0].0, Instant::ZERO + Duration::from_millis(9));
    let ms = Duration::from_millis(1).as_nanos();
    for ((p, _), (t, _)) in plain.iter().zip(&ticked) {
        assert_eq!(t.as_nanos() % ms, 0, "{t} not on a tick");
        assert!(*t >= *p && t.as_nanos() - p.as_nanos() < ms, "{p} -> {t}");
    }
    assert!(plain.iter().any(|(t, _)| t.as_nanos() % ms != 0));
    assert!(LinkConfig::parse_netem("delay 5ms tick 0ms").is_err());
}
