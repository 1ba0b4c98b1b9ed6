//! TSN and SSN with serial-number arithmetic (RFC 1982, as RFC 9260 §1.6 asks).

use std::cmp::Ordering;
use std::fmt;

/// Transmission Sequence Number (32-bit serial number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tsn(pub u32);

/// Stream Sequence Number (16-bit serial number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ssn(pub u16);

impl Tsn {
    pub const fn next(self) -> Tsn {
        Tsn(self.0.wrapping_add(1))
    }
    pub const fn prev(self) -> Tsn {
        Tsn(self.0.wrapping_sub(1))
    }
    pub const fn add(self, n: u32) -> Tsn {
        Tsn(self.0.wrapping_add(n))
    }
    /// Signed distance `self - other` in serial arithmetic.
    pub const fn distance(self, other: Tsn) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
}

impl Ssn {
    pub const fn next(self) -> Ssn {
        Ssn(self.0.wrapping_add(1))
    }
    pub const fn distance(self, other: Ssn) -> i16 {
        self.0.wrapping_sub(other.0) as i16
    }
}

// Serial-number comparison is not a total order across a distance of exactly
// 2^31, but within any window an association uses it is. Ord is implemented
// through the signed distance so sorting and BTreeMap keys work in-window.
impl PartialOrd for Tsn {
    fn partial_cmp(&self, other: &Tsn) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Tsn {
    fn cmp(&self, other: &Tsn) -> Ordering {
        self.distance(*other).cmp(&0)
    }
}
impl PartialOrd for Ssn {
    fn partial_cmp(&self, other: &Ssn) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ssn {
    fn cmp(&self, other: &Ssn) -> Ordering {
        self.distance(*other).cmp(&0)
    }
}

impl fmt::Display for Tsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl fmt::Display for Ssn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsn_order_wraps() {
        assert!(Tsn(u32::MAX) < Tsn(0));
        assert!(Tsn(5) > Tsn(u32::MAX - 5));
        assert!(Tsn(1) < Tsn(2));
        assert_eq!(Tsn(u32::MAX).next(), Tsn(0));
        assert_eq!(Tsn(0).distance(Tsn(u32::MAX)), 1);
    }

    #[test]
    fn ssn_order_wraps() {
        assert!(Ssn(u16::MAX) < Ssn(0));
        assert!(Ssn(3) > Ssn(1));
        assert_eq!(Ssn(u16::MAX).next(), Ssn(0));
    }
}
