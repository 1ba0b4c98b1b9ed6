//! `thinstream mechanisms [PRESET]`: list every SCTP mechanism and preset
//! token with one line and its document section, and the preset bases with
//! their content; with a preset string, parse it and print what it sets.
//! The table lives in `thinstream_proto::mechanism::preset` (one source for
//! the docs, the parser and this command).

use std::process::ExitCode;

use clap::Args as ClapArgs;
use thinstream_proto::mechanism::preset::{TokenKind, CATALOGUE, PRESETS};
use thinstream_proto::Config;

#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// A preset to parse and expand (e.g. `lksctp-mod+lt+nodelack`).
    pub(crate) preset: Option<String>,
}

pub(crate) fn main(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(spec) = args.preset {
        let c = Config::from_preset(&spec)?;
        crate::util::out(&format!("{}\n", describe(&spec, &c)));
        return Ok(ExitCode::SUCCESS);
    }
    crate::util::out(&catalogue());
    Ok(ExitCode::SUCCESS)
}

/// The whole catalogue as text.
pub(crate) fn catalogue() -> String {
    let mut out = String::from("SCTP presets: base[+token...]\n\nBases:\n");
    for (name, content) in PRESETS {
        out += &format!("  {name:<14} {content}\n");
    }
    for (kind, title) in [
        (TokenKind::Base, "Bases (sources)"),
        (TokenKind::Switch, "Switches (+name)"),
        (TokenKind::Parameter, "Parameters (+name=N, times in ms)"),
    ] {
        out += &format!("\n{title}:\n");
        for e in CATALOGUE.iter().filter(|e| e.kind == kind) {
            out += &format!(
                "  {:<14} {}\n  {:<14}   from {}\n",
                e.token, e.summary, "", e.source
            );
        }
    }
    out
}

fn describe(spec: &str, c: &Config) -> String {
    let mut out = format!(
        "{spec}:\n  rto initial/min/max: {} / {} / {}\n  delayed SACK: {}\n  fast retransmit after {} missing reports\n  mechanisms (fields of thinstream::Mechanisms):\n",
        c.rto_initial,
        c.rto_min,
        c.rto_max,
        if c.delayed_sack.enabled {
            format!("on, {}", c.delayed_sack.timeout)
        } else {
            "off".to_string()
        },
        c.fast_retransmit_threshold,
    );
    for (name, value) in mechanism_fields(&c.mechanisms) {
        out += &format!("    {name} = {value}\n");
    }
    out.truncate(out.trim_end().len());
    out
}

/// Fields of `Mechanisms` that hold a duration (serialised as nanoseconds).
const DURATION_FIELDS: [&str; 3] = ["thin_min_rto", "efr_min", "rttvar_min"];

/// Every field of `m` as `(dotted name, value)`, in alphabetical order,
/// durations written with their unit and absent limits as `none`.
fn mechanism_fields(m: &thinstream_proto::Mechanisms) -> Vec<(String, String)> {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    let name = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&name, v, out);
                }
            }
            serde_json::Value::Null => out.push((prefix.to_string(), "none".into())),
            serde_json::Value::String(s) => out.push((prefix.to_string(), s.clone())),
            serde_json::Value::Number(n) if DURATION_FIELDS.contains(&prefix) => {
                let d = n
                    .as_u64()
                    .map(|ns| thinstream_base::Duration::from_nanos(ns).to_string());
                out.push((prefix.to_string(), d.unwrap_or_else(|| n.to_string())));
            }
            other => out.push((prefix.to_string(), other.to_string())),
        }
    }
    let mut out = Vec::new();
    match serde_json::to_value(m) {
        Ok(v) => walk("", &v, &mut out),
        Err(e) => out.push(("(cannot list)".into(), e.to_string())),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_lists_every_token_and_base() {
        let text = catalogue();
        for e in CATALOGUE {
            assert!(text.contains(e.token), "{}", e.token);
            assert!(text.contains(e.source), "{}", e.source);
        }
        for (name, _) in PRESETS {
            assert!(text.contains(name));
        }
    }

    #[test]
    fn every_field_is_listed_and_durations_are_known() {
        // A new field of `Mechanisms` shows up here; if it holds a duration
        // it must join DURATION_FIELDS (else it would print as nanoseconds).
        let names: Vec<String> = mechanism_fields(&thinstream_proto::Mechanisms::default())
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let mut expected = [
            "thin.rule",
            "thin.pttfr",
            "thin.fixed_threshold",
            "thin.recompute_every",
            "thin.trace",
            "min_rto",
            "thin_min_rto",
            "restart_correction",
            "linear_timeouts",
            "modified_fast_retransmit",
            "bundle_on_fast_retransmit",
            "rdb.enabled",
            "rdb.only_when_thin",
            "rdb.max_bytes",
            "rdb.only_when_iat_exceeds_rtt",
            "rdb.max_packets_in_flight",
            "early_retransmit",
            "early_fast_retransmit",
            "cc_decrease_0875",
            "cc_scalable_increase",
            "efr_min",
            "rtt_sampling",
            "rttvar_min",
            "control_rtt_seed_only",
            "handshake_rtt",
            "sack_immediately",
            "t3_wait_for_newer_sack",
        ];
        expected.sort_unstable();
        assert_eq!(names, expected);
        for d in DURATION_FIELDS {
            assert!(names.iter().any(|n| n == d), "{d}");
        }
    }

    #[test]
    fn a_preset_is_expanded_and_a_bad_one_fails() {
        let c = Config::from_preset("lksctp-mod+lt").unwrap();
        let d = describe("lksctp-mod+lt", &c);
        assert!(
            d.contains("    linear_timeouts = true\n")
                && d.contains("    restart_correction = true\n")
                && d.contains("    modified_fast_retransmit = false\n")
                && d.ends_with("    thin_min_rto = 200ms")
                && d.contains("    rdb.max_bytes = none\n"),
            "{d}"
        );
        assert!(main(Args {
            preset: Some("linux+bogus".into())
        })
        .is_err());
    }
}
