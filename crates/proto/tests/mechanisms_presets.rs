//! Preset parsing: every documented name parses to what its docs say,
//! unknown tokens fail with a message naming them.

use thinstream_base::Duration;
use thinstream_proto::mechanism::preset::{TokenKind, CATALOGUE, PRESETS};
use thinstream_proto::mechanism::{EarlyRetransmit, Mechanisms, RttSampling, ThinRule};
use thinstream_proto::Config;

#[test]
fn every_catalogue_entry_parses() {
    for e in CATALOGUE {
        let spec = match e.kind {
            TokenKind::Base => e.token.to_string(),
            TokenKind::Switch => format!("linux+{}", e.token),
            TokenKind::Parameter => {
                let name = e.token.split('=').next().unwrap();
                // RTO.Max may not fall below `rfc`'s RTO.Min of 1 s.
                let v = if name == "rto-max" { 2000 } else { 200 };
                format!("rfc+{name}={v}")
            }
        };
        Config::from_preset(&spec).unwrap_or_else(|err| panic!("{spec}: {err}"));
    }
    for (name, _) in PRESETS {
        Config::from_preset(name).unwrap();
    }
}

#[test]
fn bases_have_the_documented_content() {
    assert_eq!(Config::from_preset("rfc").unwrap(), Config::default());
    let linux = Config::from_preset("linux").unwrap();
    assert_eq!(linux.rto_initial, Duration::from_secs(3));
    assert_eq!(linux.rto_min, Duration::from_secs(1));
    assert_eq!(linux.rto_max, Duration::from_secs(60));
    assert!(linux.delayed_sack.enabled);
    assert_eq!(linux.delayed_sack.timeout, Duration::from_millis(200));
    // 002 App. F: lksctp 2.6.16.13 fast-retransmits at `tsn_missing_report >= 3`.
    assert_eq!(linux.fast_retransmit_threshold, 3);
    // 000 §8: the documents' lksctp took its sample chunk's first
    // acknowledgement, retransmitted or not; as a receiver it predates
    // RFC 7053 (the I bit is ignored).
    assert_eq!(
        linux.mechanisms,
        Mechanisms {
            rtt_sampling: RttSampling::FirstAck,
            ..Mechanisms::rfc()
        }
    );
    assert!(!linux.delayed_sack.honour_immediate);
    // 003 footnote 4: lksctp 2.6.15 needed four reports.
    let old = Config::from_preset("linux+frt=4").unwrap();
    assert_eq!(old.fast_retransmit_threshold, 4);
    assert_eq!(
        Config {
            fast_retransmit_threshold: 3,
            ..old
        },
        linux
    );

    let m = Config::from_preset("lksctp-mod").unwrap().mechanisms;
    assert_eq!(
        m,
        Mechanisms {
            restart_correction: true,
            rtt_sampling: RttSampling::FirstAck,
            ..Mechanisms::rfc()
        }
    );
    let thin = Config::from_preset("thin").unwrap();
    assert_eq!(
        thin.mechanisms,
        Mechanisms {
            rtt_sampling: RttSampling::FirstAck,
            ..Mechanisms::thin_002()
        }
    );
    let prod = Config::from_preset("production").unwrap();
    assert_eq!(prod.mechanisms, Mechanisms::production());
    assert_eq!(prod.rto_initial, Duration::from_secs(1));
    assert!(prod.delayed_sack.honour_immediate);
    assert_eq!(thin.fast_retransmit_threshold, 3);
    assert_eq!(Config::from_preset("linux+all").unwrap(), thin);
    let t = &thin.mechanisms;
    assert!(t.min_rto && t.restart_correction && t.linear_timeouts);
    assert!(t.modified_fast_retransmit && t.bundle_on_fast_retransmit);
    assert!(!t.rdb.enabled && t.early_retransmit == EarlyRetransmit::Off);
    // The documents' variants run on the patched kernel with the restart correction.
    assert_eq!(
        Config::from_preset("lksctp-mod+lt").unwrap(),
        Config::from_preset("linux+restart+lt").unwrap()
    );
}

#[test]
fn tokens_set_their_fields() {
    let c = Config::from_preset(
        " rfc + rdb-bytes=700 + rdb-pif=3 + rdb-iat + pttfr=2 + thin-limit=5 + thin-tcp + er-packet + efr + cc004 + stcp + nodelack + frt=4 + rto-min=200 + thin-minrto=100",
    )
    .unwrap();
    let m = &c.mechanisms;
    assert!(m.rdb.enabled && m.rdb.only_when_thin && m.rdb.only_when_iat_exceeds_rtt);
    assert_eq!(m.rdb.max_bytes, Some(700));
    assert_eq!(m.rdb.max_packets_in_flight, Some(3));
    assert_eq!((m.thin.pttfr, m.thin.fixed_threshold), (2, Some(5)));
    assert_eq!(m.thin.rule, ThinRule::TcpPacketsOut);
    assert_eq!(m.early_retransmit, EarlyRetransmit::Packets);
    assert!(m.early_fast_retransmit && m.cc_decrease_0875 && m.cc_scalable_increase);
    assert!(!c.delayed_sack.enabled);
    assert_eq!(c.fast_retransmit_threshold, 4);
    assert_eq!(c.rto_min, Duration::from_millis(200));
    assert!(m.min_rto);
    assert_eq!(m.thin_min_rto, Duration::from_millis(100));
    let b = Config::from_preset("rfc+er-byte+rdb-always+delack=40").unwrap();
    assert_eq!(b.mechanisms.early_retransmit, EarlyRetransmit::Bytes);
    assert!(b.mechanisms.rdb.enabled && !b.mechanisms.rdb.only_when_thin);
    assert_eq!(b.delayed_sack.timeout, Duration::from_millis(40));
}

#[test]
fn unknown_and_bad_tokens_are_named() {
    let e = Config::from_preset("bsd").unwrap_err().to_string();
    assert!(e.contains("\"bsd\"") && e.contains("lksctp-mod"), "{e}");
    let e = Config::from_preset("linux+lt+fancy")
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"fancy\"") && e.contains("er-packet"), "{e}");
    let e = Config::from_preset("linux+speed=3")
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"speed\"") && e.contains("rdb-bytes"), "{e}");
    let e = Config::from_preset("linux+rdb-bytes=lots")
        .unwrap_err()
        .to_string();
    assert!(e.contains("rdb-bytes"), "{e}");
    assert!(Config::from_preset("linux++lt").is_err());
    assert!(Config::from_preset("linux+thin-limit=0").is_err());
    assert!(Config::from_preset("linux+delack=900").is_err());
    assert!(Config::from_preset("LINUX").is_err());
}

#[test]
fn mechanisms_round_trip_through_serde() {
    let m = Config::from_preset("thin+rdb-bytes=600+er-packet")
        .unwrap()
        .mechanisms;
    let json = serde_json::to_string(&m).unwrap();
    assert_eq!(serde_json::from_str::<Mechanisms>(&json).unwrap(), m);
    let t = toml::to_string(&m).unwrap();
    assert_eq!(toml::from_str::<Mechanisms>(&t).unwrap(), m);
    // Missing fields take their defaults; unknown fields are rejected.
    let partial: Mechanisms =
        toml::from_str("linear_timeouts = true\n[rdb]\nenabled = true\n").unwrap();
    assert!(partial.linear_timeouts && partial.rdb.enabled && partial.rdb.only_when_thin);
    assert!(toml::from_str::<Mechanisms>("linear_timeout = true").is_err());
}

// The TOML example of the `Mechanisms` docs parses as documented.
#[test]
fn documented_toml_example_parses() {
    let m: Mechanisms = toml::from_str(
        "linear_timeouts = true\nmin_rto = true\nthin_min_rto = 200000000\nearly_retransmit = \"packets\"\n[rdb]\nenabled = true\nmax_bytes = 700\n[thin]\nrule = \"sctp-loss-adjusted\"\n",
    )
    .unwrap();
    assert!(m.linear_timeouts && m.min_rto && m.rdb.enabled);
    assert_eq!(m.thin_min_rto, Duration::from_millis(200));
    assert_eq!(m.early_retransmit, EarlyRetransmit::Packets);
    assert_eq!(m.rdb.max_bytes, Some(700));
    let t: Mechanisms = toml::from_str("[thin]\nrule = \"tcp-packets-out\"\n").unwrap();
    assert_eq!(t.thin.rule, ThinRule::TcpPacketsOut);
}
