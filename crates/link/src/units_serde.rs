//! Serde forms of units in scenario files.
//!
//! `base` serialises [`Duration`] and [`Bitrate`] as bare integers (ns, bit/s),
//! which is exact but unreadable in a TOML scenario. Here durations are
//! strings with a unit (`"50ms"`), rates are strings (`"10mbit"`) or integers
//! in bit/s, and probabilities are floats (`0.05`) or percent strings
//! (`"5%"`). Serialisation picks the largest unit that represents the value
//! exactly, so a config survives a round trip bit for bit.

use serde::de::{self, Visitor};
use serde::{Deserializer, Serializer};
use std::fmt;
use thinstream_base::{Bitrate, Duration, Instant, Probability};

/// Exact text for a duration: the largest unit (s, ms, us, ns) that divides it.
pub(crate) fn duration_text(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0ms".to_string()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// Exact text for a rate: the largest tc unit (gbit, mbit, kbit, bit) that divides it.
pub(crate) fn bitrate_text(r: Bitrate) -> String {
    let b = r.bits_per_sec();
    if b != 0 && b.is_multiple_of(1_000_000_000) {
        format!("{}gbit", b / 1_000_000_000)
    } else if b != 0 && b.is_multiple_of(1_000_000) {
        format!("{}mbit", b / 1_000_000)
    } else if b != 0 && b.is_multiple_of(1_000) {
        format!("{}kbit", b / 1_000)
    } else {
        format!("{b}bit")
    }
}

/// Reads a duration that must carry a unit. A bare number is refused because
/// tc reads it as microseconds while `Duration::parse` reads milliseconds.
pub(crate) fn parse_duration_with_unit(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "cannot read {t:?}: a time needs a unit (ns, us, ms, s), e.g. 50ms"
        ));
    }
    Duration::parse(t).map_err(|e| e.to_string())
}

/// Reads `5%` (percent) or, when `allow_fraction`, a bare fraction `0.05`.
pub(crate) fn parse_probability(text: &str, allow_fraction: bool) -> Result<Probability, String> {
    let t = text.trim();
    let value = match t.strip_suffix('%') {
        Some(num) => percent_to_fraction(num.trim()).filter(|v| v.is_finite()),
        None if allow_fraction => t.parse::<f64>().ok().filter(|v| v.is_finite()),
        None => {
            return Err(format!(
                "cannot read {t:?}: expected a percentage with a % sign, e.g. 5% \
                 (tc would read a bare 0.05 as 0.05%)"
            ))
        }
    };
    let v = value.ok_or_else(|| format!("cannot read {t:?}: expected a percentage such as 5%"))?;
    Probability::new(v).ok_or_else(|| format!("{t:?} is not between 0% and 100%"))
}

/// `"12.5"` (percent) to 0.125 by moving the decimal point in the text, so
/// the result is the correctly rounded value of the exact decimal; dividing
/// a parsed float by 100 would round twice and could not reach every value.
/// Text with an exponent falls back to that division.
fn percent_to_fraction(num: &str) -> Option<f64> {
    let plain = num.bytes().filter(|b| *b == b'.').count() <= 1
        && num.bytes().any(|b| b.is_ascii_digit())
        && num.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if !plain {
        return num.parse::<f64>().ok().map(|v| v / 100.0);
    }
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let int = format!("{int:0>2}");
    let (hi, lo) = int.split_at(int.len() - 2);
    let hi = if hi.is_empty() { "0" } else { hi };
    format!("{hi}.{lo}{frac}").parse().ok()
}

/// A probability as a percentage that [`parse_probability`] reads back to
/// exactly the same value: the shortest decimal of the fraction, with the
/// decimal point moved two places.
pub(crate) fn percent_text(p: Probability) -> String {
    let fraction = format!("{}", p.get());
    let (int, frac) = fraction.split_once('.').unwrap_or((&fraction, ""));
    let frac = format!("{frac:0<2}");
    let (moved, rest) = frac.split_at(2);
    let int = format!("{int}{moved}");
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    if rest.is_empty() {
        format!("{int}%")
    } else {
        format!("{int}.{rest}%")
    }
}

pub(crate) mod duration {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&duration_text(*d))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(DurationVisitor)
    }

    pub(super) struct DurationVisitor;

    impl Visitor<'_> for DurationVisitor {
        type Value = Duration;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a duration string with a unit, such as \"50ms\" or \"1.5s\"")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            parse_duration_with_unit(v).map_err(E::custom)
        }
    }
}

pub(crate) mod opt_duration {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&duration_text(*d)),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        d.deserialize_any(duration::DurationVisitor).map(Some)
    }
}

pub(crate) mod instant {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(t: &Instant, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&duration_text(t.since_epoch()))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Instant, D::Error> {
        d.deserialize_any(duration::DurationVisitor)
            .map(|d| Instant::from_nanos(d.as_nanos()))
    }
}

pub(crate) mod bitrate {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(r: &Bitrate, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&bitrate_text(*r))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bitrate, D::Error> {
        d.deserialize_any(BitrateVisitor)
    }

    struct BitrateVisitor;

    impl Visitor<'_> for BitrateVisitor {
        type Value = Bitrate;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a rate such as \"10mbit\" or an integer number of bit/s")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Bitrate, E> {
            Bitrate::parse(v).map_err(E::custom)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Bitrate, E> {
            if v == 0 {
                return Err(E::custom("a rate of at least 1 bit/s"));
            }
            Ok(Bitrate(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Bitrate, E> {
            u64::try_from(v)
                .map_err(|_| E::custom("a rate cannot be negative"))
                .and_then(|v| self.visit_u64(v))
        }
    }
}

pub(crate) mod probability {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(p: &Probability, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(p.get())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Probability, D::Error> {
        d.deserialize_any(ProbabilityVisitor)
    }

    pub(super) struct ProbabilityVisitor;

    impl Visitor<'_> for ProbabilityVisitor {
        type Value = Probability;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a probability: a number in [0, 1] or a percentage string such as \"5%\"")
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Probability, E> {
            Probability::new(v).ok_or_else(|| E::custom(format!("{v} is not in [0, 1]")))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Probability, E> {
            self.visit_f64(v as f64)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Probability, E> {
            self.visit_f64(v as f64)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Probability, E> {
            parse_probability(v, true).map_err(E::custom)
        }
    }
}

pub(crate) mod opt_probability {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        p: &Option<Probability>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match p {
            Some(p) => s.serialize_some(&p.get()),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Probability>, D::Error> {
        d.deserialize_any(probability::ProbabilityVisitor).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_texts_parse_back() {
        for ns in [
            0,
            1,
            999,
            1_000,
            1_234_567,
            50_000_000,
            1_250_000_000,
            3_000_000_000,
        ] {
            let d = Duration::from_nanos(ns);
            assert_eq!(
                parse_duration_with_unit(&duration_text(d)).unwrap(),
                d,
                "{ns}"
            );
        }
        for b in [1, 999, 1_500, 2_000_000, 1_500_000, 10_000_000_000] {
            let r = Bitrate(b);
            assert_eq!(Bitrate::parse(&bitrate_text(r)).unwrap(), r, "{b}");
        }
    }

    #[test]
    fn bare_numbers_are_refused_where_ambiguous() {
        assert!(parse_duration_with_unit("50").unwrap_err().contains("unit"));
        assert!(parse_probability("0.05", false).unwrap_err().contains('%'));
        assert_eq!(parse_probability("0.05", true).unwrap().get(), 0.05);
        assert_eq!(parse_probability("5%", false).unwrap().get(), 0.05);
        assert!(parse_probability("150%", false).is_err());
        assert!(parse_probability("NaN%", false).is_err());
        assert_eq!(parse_probability("12.5%", false).unwrap().get(), 0.125);
        assert_eq!(parse_probability("100%", false).unwrap().get(), 1.0);
        assert_eq!(parse_probability("1e1%", false).unwrap().get(), 0.1);
    }

    // Percent text reads back bit for bit, including values that x / 100
    // cannot produce from any decimal x.
    #[test]
    fn percent_text_is_exact() {
        let mut r = thinstream_base::Seed(1).rng();
        let fixed = [
            0.0,
            1.0,
            0.05,
            0.001,
            0.125,
            0.012770682353886297,
            1e-9,
            0.999_999_999,
        ];
        let random = (0..10_000).map(|_| r.next_f64());
        for v in fixed.into_iter().chain(random) {
            let p = Probability::new(v).unwrap();
            let text = percent_text(p);
            assert_eq!(parse_probability(&text, false).unwrap(), p, "{v} -> {text}");
        }
        assert_eq!(percent_text(Probability::new(0.05).unwrap()), "5%");
        assert_eq!(percent_text(Probability::new(0.001).unwrap()), "0.1%");
        assert_eq!(percent_text(Probability::ONE), "100%");
        assert_eq!(percent_text(Probability::ZERO), "0%");
    }
}
