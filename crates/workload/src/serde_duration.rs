//! Durations in scenario files as readable text (`"250ms"`, `"1.5s"`,
//! `"20us"`), for `#[serde(with = "...")]`.
//!
//! Reading accepts what [`Duration::parse`] accepts, or a bare number meaning
//! milliseconds (so `iat = 250` and `iat = "250ms"` are the same). Writing is
//! exact: the largest of `s`, `ms`, `us`, `ns` that divides the value, so a
//! written file reads back to the same nanosecond.

use serde::de::{self, Visitor};
use serde::{Deserializer, Serializer};
use std::fmt;
use thinstream_base::Duration;

/// Exact text for a duration (`"250ms"`, `"1500us"`, `"7ns"`).
// `%` rather than `is_multiple_of`: the workspace supports Rust 1.80.
#[allow(clippy::manual_is_multiple_of)]
pub fn to_text(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns != 0 && ns % 1_000_000_000 == 0 {
        format!("{}s", ns / 1_000_000_000)
    } else if ns % 1_000_000 == 0 {
        format!("{}ms", ns / 1_000_000)
    } else if ns % 1_000 == 0 {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&to_text(*d))
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    d.deserialize_any(DurationVisitor)
}

struct DurationVisitor;

impl<'de> Visitor<'de> for DurationVisitor {
    type Value = Duration;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a duration such as \"250ms\", \"1.5s\" or a number of milliseconds"
        )
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        Duration::parse(v).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
        v.checked_mul(1_000_000)
            .map(Duration::from_nanos)
            .ok_or_else(|| E::custom("duration too large"))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
        u64::try_from(v)
            .map_err(|_| E::custom("a duration cannot be negative"))
            .and_then(|v| self.visit_u64(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
        if !v.is_finite() || v < 0.0 {
            return Err(E::custom("a duration must be a finite non-negative number"));
        }
        Ok(Duration::from_secs_f64(v / 1e3))
    }
}

/// The same for `Option<Duration>` fields (absent = `None`); use with
/// `#[serde(default, with = "crate::serde_duration::option")]`.
pub mod option {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&to_text(*d)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        super::deserialize(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_exact() {
        assert_eq!(to_text(Duration::from_millis(250)), "250ms");
        assert_eq!(to_text(Duration::from_secs(3)), "3s");
        assert_eq!(to_text(Duration::from_micros(1500)), "1500us");
        assert_eq!(to_text(Duration::from_nanos(7)), "7ns");
        assert_eq!(to_text(Duration::ZERO), "0ms");
        for ns in [1u64, 999, 1_000, 1_234_567, 5_000_000_000, 1_000_000_001] {
            let d = Duration::from_nanos(ns);
            assert_eq!(Duration::parse(&to_text(d)).unwrap(), d, "{ns}");
        }
    }
}
