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
    format!(
        "{spec}:\n  rto initial/min/max: {} / {} / {}\n  delayed SACK: {}\n  fast retransmit after {} missing reports\n  mechanisms: {:#?}",
        c.rto_initial,
        c.rto_min,
        c.rto_max,
        if c.delayed_sack.enabled {
            format!("on, {}", c.delayed_sack.timeout)
        } else {
            "off".to_string()
        },
        c.fast_retransmit_threshold,
        c.mechanisms
    )
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
    fn a_preset_is_expanded_and_a_bad_one_fails() {
        let c = Config::from_preset("lksctp-mod+lt").unwrap();
        let d = describe("lksctp-mod+lt", &c);
        assert!(
            d.contains("linear_timeouts: true") && d.contains("restart_correction: true"),
            "{d}"
        );
        assert!(main(Args {
            preset: Some("linux+bogus".into())
        })
        .is_err());
    }
}
