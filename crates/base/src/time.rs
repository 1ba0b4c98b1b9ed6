//! Virtual time: integer nanoseconds since an arbitrary epoch.
//!
//! The simulator starts its clock at [`Instant::ZERO`]; the socket driver maps
//! the OS clock onto this type through an epoch it picks at start-up. Neither
//! type reads any clock.

use std::fmt;
use std::ops::{Add, AddAssign, Div, Mul, Sub, SubAssign};

/// A point in (virtual) time, in nanoseconds since the run's epoch.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Instant(u64);

/// A span of time in nanoseconds.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Duration(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    pub const MAX: Instant = Instant(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }
    /// Saturates at [`Instant::MAX`] instead of overflowing.
    pub const fn from_micros(us: u64) -> Self {
        Instant(us.saturating_mul(1_000))
    }
    /// Saturates at [`Instant::MAX`] instead of overflowing.
    pub const fn from_millis(ms: u64) -> Self {
        Instant(ms.saturating_mul(1_000_000))
    }
    /// Saturates at [`Instant::MAX`] instead of overflowing.
    pub const fn from_secs(s: u64) -> Self {
        Instant(s.saturating_mul(1_000_000_000))
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Time since the epoch as a [`Duration`].
    pub const fn since_epoch(self) -> Duration {
        Duration(self.0)
    }
    /// `self - earlier`, or zero if `earlier` is later than `self`.
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    pub const fn checked_duration_since(self, earlier: Instant) -> Option<Duration> {
        match self.0.checked_sub(earlier.0) {
            Some(d) => Some(Duration(d)),
            None => None,
        }
    }
    pub const fn checked_add(self, d: Duration) -> Option<Instant> {
        match self.0.checked_add(d.0) {
            Some(t) => Some(Instant(t)),
            None => None,
        }
    }
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
    pub const fn saturating_sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.0))
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl Duration {
    pub const ZERO: Duration = Duration(0);
    pub const MAX: Duration = Duration(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    /// Saturates at [`Duration::MAX`] (584 years) instead of overflowing.
    pub const fn from_micros(us: u64) -> Self {
        Duration(us.saturating_mul(1_000))
    }
    /// Saturates at [`Duration::MAX`] instead of overflowing.
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms.saturating_mul(1_000_000))
    }
    /// Saturates at [`Duration::MAX`] instead of overflowing.
    pub const fn from_secs(s: u64) -> Self {
        Duration(s.saturating_mul(1_000_000_000))
    }
    /// From floating-point seconds; negative and NaN map to zero, overflow saturates.
    pub fn from_secs_f64(s: f64) -> Self {
        if s.is_nan() || s <= 0.0 {
            Duration(0)
        } else {
            let ns = s * 1e9;
            if ns >= u64::MAX as f64 {
                Duration(u64::MAX)
            } else {
                Duration(ns.round() as u64)
            }
        }
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// The same length as a `std::time::Duration`.
    pub const fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
    pub const fn saturating_sub(self, o: Duration) -> Duration {
        Duration(self.0.saturating_sub(o.0))
    }
    pub const fn saturating_add(self, o: Duration) -> Duration {
        Duration(self.0.saturating_add(o.0))
    }
    pub const fn saturating_mul(self, k: u64) -> Duration {
        Duration(self.0.saturating_mul(k))
    }
    pub const fn checked_sub(self, o: Duration) -> Option<Duration> {
        match self.0.checked_sub(o.0) {
            Some(d) => Some(Duration(d)),
            None => None,
        }
    }
    /// Absolute difference between two durations.
    pub const fn abs_diff(self, o: Duration) -> Duration {
        Duration(self.0.abs_diff(o.0))
    }
    pub fn mul_f64(self, k: f64) -> Duration {
        Duration::from_secs_f64(self.as_secs_f64() * k)
    }

    /// Parses `250ms`, `1.5s`, `20us`, `100ns`, `2m`, `1h`; a bare number is milliseconds.
    pub fn parse(text: &str) -> Result<Duration, crate::ParseUnitError> {
        let (value, unit) =
            crate::units::split_number_unit(text, text, "a duration such as 250ms, 1.5s or 20us")?;
        let scale = match unit {
            "" | "ms" => 1e6,
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "s" | "sec" => 1e9,
            "m" | "min" => 60e9,
            "h" => 3600e9,
            _ => {
                return Err(crate::ParseUnitError::new(
                    text,
                    "a duration with unit ns, us, ms, s, m or h",
                ))
            }
        };
        if !value.is_finite() || value < 0.0 {
            return Err(crate::ParseUnitError::new(text, "a non-negative duration"));
        }
        Ok(Duration::from_secs_f64(value * scale / 1e9))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.checked_add(d.0).expect("virtual time overflow"))
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.checked_sub(d.0).expect("virtual time before epoch"))
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Panics if `rhs` is later than `self`; use [`Instant::saturating_duration_since`] when unsure.
    fn sub(self, rhs: Instant) -> Duration {
        Duration(
            self.0
                .checked_sub(rhs.0)
                .expect("instant subtraction went negative"),
        )
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, o: Duration) -> Duration {
        Duration(self.0.checked_add(o.0).expect("duration overflow"))
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, o: Duration) {
        *self = *self + o;
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, o: Duration) -> Duration {
        Duration(self.0.checked_sub(o.0).expect("duration underflow"))
    }
}
impl SubAssign for Duration {
    fn sub_assign(&mut self, o: Duration) {
        *self = *self - o;
    }
}
impl Mul<u64> for Duration {
    type Output = Duration;
    fn mul(self, k: u64) -> Duration {
        Duration(self.0.checked_mul(k).expect("duration overflow"))
    }
}
impl Div<u64> for Duration {
    type Output = Duration;
    fn div(self, k: u64) -> Duration {
        Duration(self.0 / k)
    }
}
impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Duration(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}
impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> Self {
        std::time::Duration::from_nanos(d.0)
    }
}

fn fmt_ns(ns: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if ns == 0 {
        write!(f, "0s")
    } else if ns.is_multiple_of(1_000_000_000) {
        write!(f, "{}s", ns / 1_000_000_000)
    } else if ns >= 1_000_000_000 {
        write!(f, "{:.3}s", ns as f64 / 1e9)
    } else if ns.is_multiple_of(1_000_000) {
        write!(f, "{}ms", ns / 1_000_000)
    } else if ns >= 1_000_000 {
        write!(f, "{:.3}ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        write!(f, "{:.3}us", ns as f64 / 1e3)
    } else {
        write!(f, "{ns}ns")
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_ns(self.0, f)
    }
}
impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t=")?;
        fmt_ns(self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_readable() {
        assert_eq!(Duration::from_millis(250).to_string(), "250ms");
        assert_eq!(Duration::from_millis(1250).to_string(), "1.250s");
        assert_eq!(Duration::from_secs(3).to_string(), "3s");
        assert_eq!(Duration::from_micros(20).to_string(), "20.000us");
        assert_eq!(Instant::from_millis(1400).to_string(), "t=1.400s");
    }

    #[test]
    fn parse_durations() {
        assert_eq!(
            Duration::parse("250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(
            Duration::parse("1.5s").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(Duration::parse("20us").unwrap(), Duration::from_micros(20));
        assert_eq!(Duration::parse("40").unwrap(), Duration::from_millis(40));
        assert_eq!(Duration::parse("2h").unwrap(), Duration::from_secs(7200));
        assert!(Duration::parse("fast").is_err());
        assert!(Duration::parse("10 parsecs").is_err());
        assert!(Duration::parse("").is_err());
    }

    #[test]
    fn arithmetic() {
        let t = Instant::from_millis(100) + Duration::from_millis(50);
        assert_eq!(t, Instant::from_millis(150));
        assert_eq!(t - Instant::from_millis(100), Duration::from_millis(50));
        assert_eq!(
            Instant::from_millis(1).saturating_duration_since(Instant::from_millis(2)),
            Duration::ZERO
        );
        assert_eq!(Duration::from_millis(300) * 2, Duration::from_millis(600));
    }
}
