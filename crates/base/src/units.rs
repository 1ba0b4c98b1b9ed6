//! Units with typed parsing: bit rates and probabilities.

use std::fmt;

/// A unit string that could not be parsed; says what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseUnitError {
    pub input: String,
    pub expected: &'static str,
}

impl ParseUnitError {
    pub fn new(input: &str, expected: &'static str) -> Self {
        ParseUnitError {
            input: input.to_string(),
            expected,
        }
    }
}

impl fmt::Display for ParseUnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot read {:?}: expected {}",
            self.input, self.expected
        )
    }
}

impl std::error::Error for ParseUnitError {}

/// Splits `"1.5ms"` into the number (1.5) and the trimmed unit (`"ms"`);
/// `example` names the expected form in the error.
pub(crate) fn split_number_unit<'a>(
    original: &str,
    text: &'a str,
    example: &'static str,
) -> Result<(f64, &'a str), ParseUnitError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value = num
        .parse()
        .map_err(|_| ParseUnitError::new(original, example))?;
    Ok((value, unit.trim()))
}

/// A bit rate in bits per second.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Bitrate(pub u64);

impl Bitrate {
    pub const fn bits_per_sec(self) -> u64 {
        self.0
    }
    /// Time to serialise `bytes` at this rate (rounded up to the nanosecond).
    pub fn transmission_time(self, bytes: usize) -> crate::Duration {
        if self.0 == 0 {
            return crate::Duration::MAX;
        }
        let bits = bytes as u128 * 8 * 1_000_000_000;
        let ns = bits.div_ceil(self.0 as u128);
        crate::Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }
    /// Parses tc-style rates: `10mbit`, `2000kbit`, `1gbit`, `500bit`, `1mbps` (bytes), `2000kbps`.
    pub fn parse(text: &str) -> Result<Bitrate, ParseUnitError> {
        let lower = text.to_ascii_lowercase();
        let (value, unit) = split_number_unit(text, &lower, "a rate such as 10mbit or 2000kbit")?;
        let scale = match unit {
            "bit" | "bps" => 1.0,
            "kbit" => 1e3,
            "mbit" => 1e6,
            "gbit" => 1e9,
            "kbps" => 8e3,
            "mbps" => 8e6,
            "gbps" => 8e9,
            _ => {
                return Err(ParseUnitError::new(
                    text,
                    "a rate with unit bit, kbit, mbit, gbit (or kbps/mbps/gbps for bytes)",
                ))
            }
        };
        let bps = value * scale;
        if !bps.is_finite() || bps < 1.0 {
            return Err(ParseUnitError::new(text, "a rate of at least 1 bit/s"));
        }
        Ok(Bitrate(bps.round() as u64))
    }
}

impl fmt::Display for Bitrate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= 1_000_000_000 && b.is_multiple_of(1_000_000) {
            write!(f, "{}gbit", b as f64 / 1e9)
        } else if b >= 1_000_000 && b.is_multiple_of(1_000) {
            write!(f, "{}mbit", b as f64 / 1e6)
        } else if b >= 1_000 {
            write!(f, "{}kbit", b as f64 / 1e3)
        } else {
            write!(f, "{b}bit")
        }
    }
}

/// A probability in `[0, 1]`.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, serde::Serialize, serde::Deserialize)]
pub struct Probability(f64);

impl Probability {
    pub const ZERO: Probability = Probability(0.0);
    pub const ONE: Probability = Probability(1.0);

    /// `None` unless `0 <= p <= 1`.
    pub fn new(p: f64) -> Option<Probability> {
        (0.0..=1.0).contains(&p).then_some(Probability(p))
    }
    pub const fn get(self) -> f64 {
        self.0
    }
    /// Parses `5%`, `0.05`, `12.5%`.
    pub fn parse(text: &str) -> Result<Probability, ParseUnitError> {
        let t = text.trim();
        let (num, scale) = match t.strip_suffix('%') {
            Some(n) => (n.trim(), 0.01),
            None => (t, 1.0),
        };
        let v: f64 = num
            .parse()
            .map_err(|_| ParseUnitError::new(text, "a probability such as 5% or 0.05"))?;
        Probability::new(v * scale)
            .ok_or_else(|| ParseUnitError::new(text, "a probability between 0% and 100%"))
    }
}

impl fmt::Display for Probability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0 * 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitrates() {
        assert_eq!(Bitrate::parse("10mbit").unwrap(), Bitrate(10_000_000));
        assert_eq!(Bitrate::parse("2000kbit").unwrap(), Bitrate(2_000_000));
        assert_eq!(Bitrate::parse("1mbps").unwrap(), Bitrate(8_000_000));
        assert!(Bitrate::parse("fast").is_err());
        assert!(Bitrate::parse("0bit").is_err());
        // 1500 bytes at 10 Mbit/s = 1.2 ms
        assert_eq!(
            Bitrate(10_000_000).transmission_time(1500),
            crate::Duration::from_micros(1200)
        );
    }

    #[test]
    fn probabilities() {
        assert_eq!(Probability::parse("5%").unwrap().get(), 0.05);
        assert_eq!(Probability::parse("0.25").unwrap().get(), 0.25);
        assert!(Probability::parse("120%").is_err());
        assert!(Probability::parse("-1").is_err());
        assert!(Probability::parse("lots").is_err());
    }
}
