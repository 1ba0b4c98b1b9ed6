//! RTT estimation and the retransmission timeout (RFC 6298, and the Linux
//! estimator the dissertation's baseline used, 002 §3.1.2 / Fig. 3.7).

use crate::config::{RttEstimator, TcpConfig};
use thinstream_base::Duration;

/// SRTT/RTTVAR state and the current (possibly backed-off) RTO.
#[derive(Clone, Debug)]
pub(crate) struct Rtt {
    kind: RttEstimator,
    rto_min: u64,
    rto_max: u64,
    granularity: u64,
    /// Smoothed RTT (ns); `None` before the first sample.
    srtt: Option<u64>,
    /// RFC 6298 RTTVAR (ns).
    rttvar_rfc: u64,
    /// Linux `mdev` (4 × mean deviation, ns).
    mdev: u64,
    /// Linux `mdev_max`: the largest `mdev` in the current RTT, floored at rto_min.
    mdev_max: u64,
    /// Linux `rttvar`: what is added to SRTT to form the RTO.
    rttvar_linux: u64,
    /// Linux `rtt_seq`: once snd_una passes it, one RTT has elapsed.
    rtt_seq: u64,
    /// Current RTO including backoff (Linux `icsk_rto`).
    rto: u64,
    /// Consecutive backoffs (Linux `icsk_backoff`).
    pub(crate) backoff: u32,
    min_rtt: Option<u64>,
    latest: Option<u64>,
}

impl Rtt {
    pub(crate) fn new(cfg: &TcpConfig) -> Rtt {
        Rtt {
            kind: cfg.rtt_estimator,
            rto_min: cfg.rto_min.as_nanos(),
            rto_max: cfg.rto_max.as_nanos(),
            granularity: cfg.clock_granularity.as_nanos(),
            srtt: None,
            rttvar_rfc: 0,
            mdev: 0,
            mdev_max: 0,
            rttvar_linux: 0,
            rtt_seq: 0,
            rto: cfg.initial_rto.as_nanos().min(cfg.rto_max.as_nanos()),
            backoff: 0,
            min_rtt: None,
            latest: None,
        }
    }

    pub(crate) fn rto(&self) -> Duration {
        Duration::from_nanos(self.rto)
    }
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.srtt.map(Duration::from_nanos)
    }
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.map(Duration::from_nanos)
    }
    #[allow(dead_code)]
    pub(crate) fn latest(&self) -> Option<Duration> {
        self.latest.map(Duration::from_nanos)
    }

    /// Feeds one valid RTT sample (Karn's rule is the caller's job). `snd_una`
    /// and `snd_nxt` drive Linux's once-per-RTT RTTVAR decay. A valid sample
    /// clears the backoff (RFC 6298 §5.7 and Linux `tcp_ack_no_tstamp`).
    pub(crate) fn on_sample(&mut self, sample: Duration, snd_una: u64, snd_nxt: u64) {
        let m = sample.as_nanos().max(1);
        self.latest = Some(m);
        self.min_rtt = Some(self.min_rtt.map_or(m, |x| x.min(m)));
        match self.kind {
            RttEstimator::Rfc6298 => match self.srtt {
                None => {
                    self.srtt = Some(m);
                    self.rttvar_rfc = m / 2;
                }
                Some(srtt) => {
                    // RFC 6298 §2.3: RTTVAR first, with the old SRTT.
                    self.rttvar_rfc = (3 * self.rttvar_rfc + srtt.abs_diff(m)) / 4;
                    self.srtt = Some((7 * srtt + m) / 8);
                }
            },
            RttEstimator::Linux => match self.srtt {
                None => {
                    self.srtt = Some(m);
                    self.mdev = 2 * m; // "make sure rto = 3*rtt"
                    self.mdev_max = self.mdev.max(self.rto_min);
                    self.rttvar_linux = self.mdev_max;
                    self.rtt_seq = snd_nxt;
                }
                Some(srtt) => {
                    let err = m as i128 - srtt as i128;
                    self.srtt = Some((srtt as i128 + err / 8).max(1) as u64);
                    let quarter = (self.mdev / 4) as i128;
                    let delta = if err < 0 {
                        // A falling RTT is weighted 1/32, not 1/4 (Linux's
                        // "smoothed negative correction").
                        let d = -err - quarter;
                        if d > 0 {
                            d / 8
                        } else {
                            d
                        }
                    } else {
                        err - quarter
                    };
                    self.mdev = (self.mdev as i128 + delta).max(0) as u64;
                    if self.mdev > self.mdev_max {
                        self.mdev_max = self.mdev;
                        if self.mdev_max > self.rttvar_linux {
                            self.rttvar_linux = self.mdev_max;
                        }
                    }
                    if snd_una > self.rtt_seq {
                        if self.mdev_max < self.rttvar_linux {
                            self.rttvar_linux -= (self.rttvar_linux - self.mdev_max) / 4;
                        }
                        self.rtt_seq = snd_nxt;
                        self.mdev_max = self.rto_min;
                    }
                }
            },
        }
        self.backoff = 0;
        self.rto = self.base_rto_nanos();
    }

    /// The RTO computed from SRTT and RTTVAR without backoff (Linux
    /// `__tcp_set_rto` + `tcp_bound_rto`); the initial RTO before any sample.
    fn base_rto_nanos(&self) -> u64 {
        let Some(srtt) = self.srtt else {
            return self.rto;
        };
        let rto = match self.kind {
            RttEstimator::Rfc6298 => {
                (srtt + self.granularity.max(4 * self.rttvar_rfc)).max(self.rto_min)
            }
            RttEstimator::Linux => srtt + self.rttvar_linux,
        };
        rto.min(self.rto_max)
    }

    /// Exponential backoff on a retransmission timeout (RFC 6298 §5.5).
    pub(crate) fn back_off(&mut self) {
        self.backoff += 1;
        self.rto = self.rto.saturating_mul(2).min(self.rto_max);
    }

    /// Linear timeouts (002 §4.1.3, Fig. 4.7): reset the backoff and recompute
    /// the RTO from SRTT and RTTVAR instead of doubling.
    pub(crate) fn linear(&mut self) {
        self.backoff = 0;
        self.rto = self.base_rto_nanos();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6298_first_sample_and_floor() {
        let mut r = Rtt::new(&TcpConfig::newreno());
        assert_eq!(r.rto(), Duration::from_secs(1));
        r.on_sample(Duration::from_millis(100), 1, 2);
        // 100 + 4*50 = 300 ms, floored at 1 s.
        assert_eq!(r.rto(), Duration::from_secs(1));
        let mut cfg = TcpConfig::newreno();
        cfg.rto_min = Duration::from_millis(10);
        let mut r = Rtt::new(&cfg);
        r.on_sample(Duration::from_millis(100), 1, 2);
        assert_eq!(r.rto(), Duration::from_millis(300));
        r.on_sample(Duration::from_millis(100), 1, 2);
        // rttvar = 3/4*50 = 37.5; rto = 100 + 150
        assert_eq!(r.rto(), Duration::from_millis(250));
        r.back_off();
        assert_eq!(r.rto(), Duration::from_millis(500));
        r.linear();
        assert_eq!(r.rto(), Duration::from_millis(250));
    }

    #[test]
    fn linux_rto_is_rtt_plus_200ms_for_stable_rtt() {
        let mut r = Rtt::new(&TcpConfig::linux_2_6_23());
        assert_eq!(r.rto(), Duration::from_secs(3));
        r.on_sample(Duration::from_millis(100), 1, 2);
        // mdev = 200 ms = rto_min → RTO = 100 + 200.
        assert_eq!(r.rto(), Duration::from_millis(300));
        for i in 0..50 {
            r.on_sample(Duration::from_millis(100), 3 + i, 4 + i);
        }
        assert_eq!(r.rto(), Duration::from_millis(300));
        let mut r = Rtt::new(&TcpConfig::linux_2_6_23());
        r.on_sample(Duration::from_millis(10), 1, 2);
        assert_eq!(r.rto(), Duration::from_millis(210));
        // A large sample raises RTTVAR at once.
        r.on_sample(Duration::from_millis(410), 3, 4);
        assert_eq!(r.rto(), Duration::from_millis(475));
        r.back_off();
        r.back_off();
        let backed = r.rto();
        r.linear();
        assert_eq!(r.rto().as_nanos() * 4, backed.as_nanos());
    }
}
