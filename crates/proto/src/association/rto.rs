//! RTO estimation (RFC 9260 §6.3.1), with Karn's rule enforced by the caller
//! (samples only from chunks transmitted once, one measurement at a time).

use thinstream_base::Duration;

/// SRTT, RTTVAR and RTO of the one destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RtoEstimator {
    pub(crate) srtt: Option<Duration>,
    pub(crate) rttvar: Duration,
    pub(crate) rto: Duration,
}

impl RtoEstimator {
    /// C1: RTO = RTO.Initial until the first measurement.
    pub(crate) fn new(initial: Duration) -> Self {
        RtoEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            rto: initial,
        }
    }

    /// C2/C3 with RTO.Alpha = 1/8 and RTO.Beta = 1/4, then C4 (granularity),
    /// C6 (`floor`, from the mechanism hook) and C7 (`max`). `rttvar_min`
    /// (0 = none) floors RTTVAR after the update (mechanism::rtt).
    pub(crate) fn on_sample(
        &mut self,
        r: Duration,
        granularity: Duration,
        floor: Duration,
        max: Duration,
        rttvar_min: Duration,
    ) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                // RTTVAR <- (1 - 1/4) * RTTVAR + 1/4 * |SRTT - R'|
                self.rttvar = (self.rttvar * 3 + srtt.abs_diff(r)) / 4;
                // SRTT <- (1 - 1/8) * SRTT + 1/8 * R'
                self.srtt = Some((srtt * 7 + r) / 8);
            }
        }
        // C3/G: "if RTTVAR computes to 0, adjust RTTVAR <- G".
        if self.rttvar.is_zero() {
            self.rttvar = granularity;
        }
        self.rttvar = self.rttvar.max(rttvar_min);
        let srtt = self.srtt.unwrap_or(r);
        self.rto = (srtt + self.rttvar * 4).max(floor).min(max);
    }

    /// Re-apply bounds (used when a mechanism changes its floor).
    pub(crate) fn set(&mut self, rto: Duration) {
        self.rto = rto;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Duration = Duration::from_millis(1);

    #[test]
    fn first_sample_and_update() {
        let mut e = RtoEstimator::new(Duration::from_secs(1));
        e.on_sample(
            Duration::from_millis(100),
            G,
            Duration::ZERO,
            Duration::from_secs(60),
            Duration::ZERO,
        );
        assert_eq!(e.srtt, Some(Duration::from_millis(100)));
        assert_eq!(e.rttvar, Duration::from_millis(50));
        assert_eq!(e.rto, Duration::from_millis(300));
        e.on_sample(
            Duration::from_millis(200),
            G,
            Duration::ZERO,
            Duration::from_secs(60),
            Duration::ZERO,
        );
        // rttvar = (3*50 + 100)/4 = 62.5 ms ; srtt = (7*100+200)/8 = 112.5 ms
        assert_eq!(e.rttvar, Duration::from_micros(62_500));
        assert_eq!(e.srtt, Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto, Duration::from_micros(362_500));
    }

    #[test]
    fn floor_and_cap() {
        let mut e = RtoEstimator::new(Duration::from_secs(1));
        e.on_sample(
            Duration::from_millis(10),
            G,
            Duration::from_secs(1),
            Duration::from_secs(60),
            Duration::ZERO,
        );
        assert_eq!(e.rto, Duration::from_secs(1));
        e.on_sample(
            Duration::from_secs(100),
            G,
            Duration::from_secs(1),
            Duration::from_secs(60),
            Duration::ZERO,
        );
        assert_eq!(e.rto, Duration::from_secs(60));
    }
}
