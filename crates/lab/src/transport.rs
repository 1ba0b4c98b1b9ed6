//! Variant → transport configuration, and the endpoint factories the
//! simulator calls.
//!
//! SCTP presets come from `thinstream_proto` (see [`sctp_config`]); TCP
//! profiles from `thinstream_tcp::TcpConfig::from_profile`. A variant's
//! [`Overrides`] are applied on top, and tracing is always switched on:
//! every metric is computed from trace records.

use std::fmt;

use thinstream_base::drive::Transport;
use thinstream_proto::mechanism::CATALOGUE;
use thinstream_proto::{Association, Config as SctpConfig, DelayedSack};
use thinstream_sim::EndpointSetup;
use thinstream_tcp::{TcpConfig, TcpConnection};

use crate::scenario::{Overrides, TransportKind};

/// A fully resolved transport configuration (tracing on).
#[derive(Clone, Debug, PartialEq)]
pub enum TransportConfig {
    Sctp(SctpConfig),
    Tcp(TcpConfig),
}

impl TransportConfig {
    /// SCTP: the streams an association of two endpoints with this
    /// configuration can use (the smaller of outbound and accepted inbound
    /// streams); TCP: `None` (one byte stream per connection).
    pub fn sctp_streams(&self) -> Option<u16> {
        match self {
            TransportConfig::Sctp(c) => Some(c.outbound_streams.min(c.max_inbound_streams)),
            TransportConfig::Tcp(_) => None,
        }
    }
}

/// Why a preset string could not be turned into a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PresetIssue {
    /// The string names nothing known (a typo): the scenario is wrong.
    Unknown(String),
    /// The string names a mechanism this build does not implement yet: the
    /// variant is skipped with this message, the others run.
    NotAvailable(String),
    /// An override does not apply to this transport, or has a bad value.
    BadOverride(String),
}

impl fmt::Display for PresetIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PresetIssue::Unknown(m)
            | PresetIssue::NotAvailable(m)
            | PresetIssue::BadOverride(m) => f.write_str(m),
        }
    }
}

/// The SCTP configuration for a preset string (`rfc`, `linux`,
/// `lksctp-mod`, `thin`, `base+token+...`), parsed by
/// `thinstream_proto::Config::from_preset` (grammar and catalogue in
/// `thinstream_proto::mechanism::preset`).
///
/// A string whose every word is in the proto catalogue but which still does
/// not parse names something this build cannot do yet: the variant is
/// reported unavailable (and the others run). Any other failure is a typo
/// in the scenario and an error.
pub fn sctp_config(spec: &str) -> Result<SctpConfig, PresetIssue> {
    SctpConfig::from_preset(spec).map_err(|e| {
        let known = |word: &str| {
            let name = word.split('=').next().unwrap_or("").trim();
            CATALOGUE
                .iter()
                .any(|c| c.token.split('=').next() == Some(name))
        };
        if spec.split('+').all(known) {
            PresetIssue::NotAvailable(e.to_string())
        } else {
            PresetIssue::Unknown(e.to_string())
        }
    })
}

/// The TCP configuration for a profile string (`newreno`, `linux-2.6.23+lt`, ...).
pub fn tcp_config(spec: &str) -> Result<TcpConfig, PresetIssue> {
    TcpConfig::from_profile(spec).map_err(|e| PresetIssue::Unknown(e.to_string()))
}

/// Resolves a preset for `kind` and applies `overrides`; tracing on.
pub fn resolve(
    kind: TransportKind,
    preset: &str,
    overrides: &Overrides,
) -> Result<TransportConfig, PresetIssue> {
    match kind {
        TransportKind::Sctp => {
            let mut c = sctp_config(preset)?;
            apply_sctp(&mut c, overrides)?;
            c.trace = true;
            Ok(TransportConfig::Sctp(c))
        }
        TransportKind::Tcp => {
            let mut c = tcp_config(preset)?;
            apply_tcp(&mut c, overrides)?;
            c.trace = true;
            c.validate()
                .map_err(|e| PresetIssue::BadOverride(e.to_string()))?;
            Ok(TransportConfig::Tcp(c))
        }
    }
}

fn apply_sctp(c: &mut SctpConfig, o: &Overrides) -> Result<(), PresetIssue> {
    if o.mss.is_some() {
        return Err(PresetIssue::BadOverride(
            "override `mss` applies to TCP only (SCTP: the PMTU decides)".into(),
        ));
    }
    if let Some(n) = o.streams {
        if n == 0 {
            return Err(PresetIssue::BadOverride(
                "override `streams` must be at least 1".into(),
            ));
        }
        c.outbound_streams = n;
        c.max_inbound_streams = n;
    }
    if let Some(on) = o.delayed_sack {
        c.delayed_sack = if on {
            DelayedSack {
                enabled: true,
                every_packets: 2,
                ..c.delayed_sack
            }
        } else {
            DelayedSack::off()
        };
    }
    if let Some(d) = o.sack_delay {
        if o.delayed_sack == Some(false) {
            return Err(PresetIssue::BadOverride(
                "overrides `delayed_sack = false` and `sack_delay` contradict each other".into(),
            ));
        }
        c.delayed_sack = DelayedSack {
            enabled: true,
            timeout: d,
            every_packets: 2,
            ..c.delayed_sack
        };
    }
    if let Some(d) = o.rto_initial {
        c.rto_initial = d;
    }
    if let Some(d) = o.rto_min {
        c.rto_min = d;
    }
    if let Some(d) = o.rto_max {
        c.rto_max = d;
    }
    if let Some(n) = o.fast_retransmit_threshold {
        if n == 0 {
            return Err(PresetIssue::BadOverride(
                "fast_retransmit_threshold must be at least 1".into(),
            ));
        }
        c.fast_retransmit_threshold = n;
    }
    if let Some(n) = o.max_burst {
        c.max_burst = n;
    }
    if let Some(b) = o.heartbeat {
        c.heartbeat = b;
    }
    if let Some(b) = o.no_delay {
        c.no_delay = b;
    }
    if c.rto_min > c.rto_max {
        return Err(PresetIssue::BadOverride("rto_min is above rto_max".into()));
    }
    Ok(())
}

fn apply_tcp(c: &mut TcpConfig, o: &Overrides) -> Result<(), PresetIssue> {
    let sctp_only = [
        ("max_burst", o.max_burst.is_some()),
        ("heartbeat", o.heartbeat.is_some()),
        ("no_delay", o.no_delay.is_some()),
        ("streams", o.streams.is_some()),
    ];
    if let Some((name, _)) = sctp_only.iter().find(|(_, set)| *set) {
        return Err(PresetIssue::BadOverride(format!(
            "override `{name}` applies to SCTP only"
        )));
    }
    match (o.delayed_sack, o.sack_delay) {
        (Some(false), Some(_)) => {
            return Err(PresetIssue::BadOverride(
                "overrides `delayed_sack = false` and `sack_delay` contradict each other".into(),
            ))
        }
        (_, Some(d)) => c.delayed_ack = Some(d),
        (Some(false), None) => c.delayed_ack = None,
        (Some(true), None) => {
            if c.delayed_ack.is_none() {
                c.delayed_ack = Some(thinstream_base::Duration::from_millis(200));
            }
        }
        (None, None) => {}
    }
    if let Some(d) = o.rto_initial {
        c.initial_rto = d;
    }
    if let Some(d) = o.rto_min {
        c.rto_min = d;
    }
    if let Some(d) = o.rto_max {
        c.rto_max = d;
    }
    if let Some(n) = o.fast_retransmit_threshold {
        c.dupthresh = n;
    }
    if let Some(n) = o.mss {
        c.mss = n;
    }
    Ok(())
}

impl TransportConfig {
    pub fn kind(&self) -> TransportKind {
        match self {
            TransportConfig::Sctp(_) => TransportKind::Sctp,
            TransportConfig::Tcp(_) => TransportKind::Tcp,
        }
    }

    /// The same configuration with tracing off (unmeasured cross traffic).
    pub fn without_trace(mut self) -> Self {
        match &mut self {
            TransportConfig::Sctp(c) => c.trace = false,
            TransportConfig::Tcp(c) => c.trace = false,
        }
        self
    }

    /// The same configuration with TCP's checksum left to the path
    /// (`TcpConfig::checksum_offload`) when `offload`; SCTP unchanged (its
    /// CRC32c also guards the packet against stale associations).
    pub fn with_checksum_offload(mut self, offload: bool) -> Self {
        if let TransportConfig::Tcp(c) = &mut self {
            c.checksum_offload = offload;
        }
        self
    }

    /// The initiating endpoint (flow side A).
    pub fn client(&self, s: &EndpointSetup) -> Box<dyn Transport> {
        match self {
            TransportConfig::Sctp(c) => Box::new(Association::connect(
                c.clone(),
                s.start,
                s.local,
                s.peer,
                s.seed,
            )),
            TransportConfig::Tcp(c) => {
                let iss = s.seed.derive("iss").rng().next_u32();
                match TcpConnection::connect(c.clone(), s.local, s.peer, iss, s.start) {
                    Ok(t) => Box::new(t),
                    // `resolve` validated this config, and validation is the
                    // constructor's only failure.
                    Err(e) => unreachable!("TCP config validated in resolve(): {e}"),
                }
            }
        }
    }

    /// The accepting endpoint (flow side B).
    pub fn server(&self, s: &EndpointSetup) -> Box<dyn Transport> {
        match self {
            TransportConfig::Sctp(c) => {
                Box::new(Association::accept(c.clone(), s.start, s.local, s.seed))
            }
            TransportConfig::Tcp(c) => {
                let iss = s.seed.derive("iss").rng().next_u32();
                match TcpConnection::listen(c.clone(), s.local, iss) {
                    Ok(t) => Box::new(t),
                    Err(e) => unreachable!("TCP config validated in resolve(): {e}"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinstream_base::Duration;

    #[test]
    fn rfc_is_the_default_config_with_tracing() {
        let c = resolve(TransportKind::Sctp, "rfc", &Overrides::default()).unwrap();
        let TransportConfig::Sctp(c) = c else {
            panic!()
        };
        assert!(c.trace);
        assert_eq!(c.rto_min, SctpConfig::default().rto_min);
    }

    #[test]
    fn unknown_words_are_errors_known_ones_unavailable_or_ok() {
        assert!(matches!(sctp_config("bsd"), Err(PresetIssue::Unknown(_))));
        assert!(matches!(
            sctp_config("linux+xyz"),
            Err(PresetIssue::Unknown(_))
        ));
        match sctp_config("linux+lt") {
            Ok(_) | Err(PresetIssue::NotAvailable(_)) => {}
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            tcp_config("reno-ish"),
            Err(PresetIssue::Unknown(_))
        ));
        assert!(tcp_config("linux-2.6.23+lt+mfr").is_ok());
    }

    #[test]
    fn overrides_apply_and_are_checked_per_transport() {
        let o = Overrides {
            delayed_sack: Some(false),
            rto_min: Some(Duration::from_millis(200)),
            fast_retransmit_threshold: Some(4),
            ..Overrides::default()
        };
        let TransportConfig::Sctp(c) = resolve(TransportKind::Sctp, "rfc", &o).unwrap() else {
            panic!()
        };
        assert!(!c.delayed_sack.enabled);
        assert_eq!(c.rto_min, Duration::from_millis(200));
        assert_eq!(c.fast_retransmit_threshold, 4);
        let TransportConfig::Tcp(t) = resolve(TransportKind::Tcp, "newreno", &o).unwrap() else {
            panic!()
        };
        assert_eq!(t.delayed_ack, None);
        assert_eq!(t.dupthresh, 4);
        assert!(t.trace);
        let sctp_only = Overrides {
            heartbeat: Some(false),
            ..Overrides::default()
        };
        assert!(matches!(
            resolve(TransportKind::Tcp, "newreno", &sctp_only),
            Err(PresetIssue::BadOverride(_))
        ));
        let delay = Overrides {
            sack_delay: Some(Duration::from_millis(40)),
            ..Overrides::default()
        };
        let TransportConfig::Sctp(c) = resolve(TransportKind::Sctp, "rfc", &delay).unwrap() else {
            panic!()
        };
        assert!(c.delayed_sack.enabled);
        assert_eq!(c.delayed_sack.timeout, Duration::from_millis(40));
    }
}
