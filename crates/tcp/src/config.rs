//! Connection configuration and the named profiles.
//!
//! A profile is a [`TcpConfig`] preset named after the system it models;
//! thin-stream mechanisms are switched on with `+flag` suffixes:
//! `linux-2.6.23+lt+mfr+rdb` (see [`TcpConfig::from_profile`]).

use serde::{Deserialize, Serialize};
use std::fmt;
use thinstream_base::Duration;

/// How the RTO is derived from RTT samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RttEstimator {
    /// RFC 6298 §2: `RTO = SRTT + max(G, 4·RTTVAR)`, then clamped to `[rto_min, rto_max]`.
    Rfc6298,
    /// Linux `tcp_rtt_estimator` (002 Fig. 3.7, §3.1.2): `RTO = SRTT + RTTVAR`
    /// where RTTVAR (kept as 4× the mean deviation) is floored at `rto_min`
    /// once per RTT, which makes `rto_min` an additive floor: RTO ≥ SRTT + 200 ms.
    Linux,
}

/// What the congestion window counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CwndUnit {
    /// Bytes, RFC 5681 (slow start `+min(acked, SMSS)` per ACK, appropriate
    /// byte counting in congestion avoidance).
    Bytes,
    /// Packets, as Linux (`snd_cwnd` counts segments of any size; `+1` per ACK
    /// in slow start, `+1` per window of ACKs in congestion avoidance).
    Packets,
}

/// The initial congestion window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitialWindow {
    /// RFC 3390: `min(4·MSS, max(2·MSS, 4380 bytes))` (3 segments of 1448 bytes).
    Rfc3390,
    /// A fixed number of segments (RFC 6928: 10).
    Segments(u32),
}

/// RACK-TLP (RFC 8985) parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RackConfig {
    /// Tail loss probes (RFC 8985 §7).
    pub tlp: bool,
    /// Worst-case delayed-ACK time added to the PTO when one segment is in
    /// flight (RFC 8985 §7.2 `WCDelAckT`; Linux adds `TCP_RTO_MIN` = 200 ms).
    pub tlp_max_ack_delay: Duration,
    /// A probe timer armed by sending new data is capped by the RTO counted
    /// from the last transmission of the oldest outstanding segment (Linux
    /// `tcp_schedule_loss_probe` with `tcp_rto_delta_us`), not from now. So
    /// when ACKs stop while the application keeps writing, the probe fires
    /// where the RTO would, resending the segment written last, which may
    /// have left just before; its duplicate comes back as a D-SACK.
    /// Off: capped by the RTO from now (RFC 8985 §7.2 read literally).
    #[serde(default)]
    pub tlp_rto_from_head: bool,
    /// The reordering window grows by `min_rtt / 4` per round trip with a
    /// D-SACK, up to SRTT, once reordering has been seen, and falls back
    /// after 16 recoveries without one (RFC 8985 §6.2 step 4
    /// `RACK.reo_wnd_mult`, as Linux 6.x `tcp_rack_update_reo_wnd` and
    /// `tcp_dsack_seen`). Needs D-SACK (`TcpConfig::dsack`). Off: always
    /// `min_rtt / 4`.
    #[serde(default)]
    pub adaptive_reo_wnd: bool,
}

/// Everything that shapes one endpoint's behaviour.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TcpConfig {
    /// The profile name this was built from (informational).
    pub name: String,
    /// Sender MSS in bytes of payload (default 1448 = 1500 − 20 IP − 20 TCP − 12 timestamps).
    pub mss: u32,
    /// Offer and use SACK (RFC 2018). Without it (or if the peer declines) New Reno (RFC 6582) is used.
    pub sack: bool,
    /// Offer and use timestamps (RFC 7323); RTT samples then come from TSecr (as Linux).
    pub timestamps: bool,
    pub initial_window: InitialWindow,
    pub cwnd_unit: CwndUnit,
    pub rtt_estimator: RttEstimator,
    /// RTO before any RTT sample (RFC 6298: 1 s; Linux 2.6.23: 3 s).
    pub initial_rto: Duration,
    pub rto_min: Duration,
    pub rto_max: Duration,
    /// Clock granularity `G` of RFC 6298 §2 (unused by the Linux estimator).
    pub clock_granularity: Duration,
    /// Duplicate-ACK threshold (RFC 5681 §3.2, RFC 6675 DupThresh).
    pub dupthresh: u32,
    /// Delayed-ACK timer; `None` acknowledges every segment at once.
    pub delayed_ack: Option<Duration>,
    /// Segments acknowledged at once after connection start (Linux quick-ack mode).
    pub quickack_initial: u32,
    /// Linux `tcp_cleanup_rbuf`: when the application's read empties the
    /// receive queue and a segment shorter than the receive-MSS estimate
    /// arrived with PSH since the last ACK, acknowledge at once instead of
    /// waiting for the delayed-ACK timer; in interactive (pingpong) mode only
    /// once two such segments are pending. The model's application reads at
    /// once, so on a Linux receiver every small pushed in-order segment of a
    /// one-way stream is acknowledged immediately.
    #[serde(default)]
    pub ack_pushed_on_read: bool,
    /// Linux `tcp_retrans_collapse`: a retransmission also carries the
    /// following outstanding, un-SACKed segments up to one MSS.
    pub retrans_collapse: bool,
    /// Proportional Rate Reduction in recovery (RFC 6937, as Linux
    /// `tcp_cwnd_reduction`): on each ACK in recovery `cwnd = pipe +
    /// sndcnt`, where sndcnt paces the sending to what the ACKs deliver
    /// (with Linux's conservative bound once pipe is below ssthresh).
    /// Off: `cwnd = ssthresh` for the whole recovery (RFC 6675 §5).
    #[serde(default)]
    pub prr: bool,
    /// D-SACK (RFC 2883). The receiver reports a duplicate segment in the
    /// first SACK block of its next ACK (Linux `tcp_dsack_set`); the sender
    /// counts a D-SACK of a retransmitted segment it had already seen
    /// SACKed above the cumulative ACK as reordering (Linux
    /// `tcp_sacktag_one`), which RACK never forgets: its reordering window
    /// then stays `min_rtt / 4` in recovery too.
    #[serde(default)]
    pub dsack: bool,
    /// Linux `tcp_enter_loss`: a retransmission timeout while a fast
    /// recovery's window is not yet acknowledged (or a repeated timeout of
    /// the same loss episode) leaves ssthresh where the recovery set it,
    /// since it was already reduced for this window. Off: every first
    /// timeout after leaving Loss halves again, also inside a recovery.
    #[serde(default)]
    pub loss_ssthresh_once: bool,
    /// Linux's cwnd growth since 4.x (`tcp_cwnd_validate`,
    /// `tcp_is_cwnd_limited`, `tcp_slow_start`): the window may grow on an
    /// ACK if it limited a send of new data during the current window (one
    /// flight, until that send's data is acknowledged), or, in slow start,
    /// while it is below twice the most segments outstanding (SACKed and
    /// lost ones included) during that window; slow start adds what the
    /// ACK delivered, SACKed segments included, up to ssthresh. Off: it
    /// grows only if the pipe before the ACK filled it, one segment per ACK
    /// in slow start (2.6.23 without TSO, RFC 5681).
    #[serde(default)]
    pub cwnd_growth_per_window: bool,
    /// Linux's timer wheel at this HZ: every timer (retransmission,
    /// probe, RACK's reordering timer, delayed ACK) is armed in whole
    /// jiffies and fires at its wheel bucket, rounded up to the level's
    /// granularity (1 jiffy up to 62, 8 up to 503, 64 up to 4031 jiffies),
    /// never early: at HZ 250 a 300 ms RTO fires 4-36 ms late. `None`:
    /// every timer fires at its exact time.
    #[serde(default)]
    pub timer_hz: Option<u32>,
    /// RACK-TLP loss detection; `None` uses DupThresh / RFC 6675 `IsLost`.
    pub rack: Option<RackConfig>,
    /// Receive buffer (the advertised window), bytes.
    pub rcv_buf: u32,
    /// Send buffer: bytes written but not yet cumulatively acknowledged.
    pub snd_buf: u32,
    /// SYN retransmissions before giving up (Linux `tcp_syn_retries` = 5).
    pub syn_retries: u32,
    /// Data retransmission timeouts before giving up (Linux `tcp_retries2` = 15).
    pub max_retries: u32,
    /// TIME-WAIT duration. Zero closes at once; a closed endpoint still
    /// re-acknowledges a retransmitted FIN, which is what TIME-WAIT is for.
    pub time_wait: Duration,
    /// Queue our own FIN when the peer's FIN arrives (the model's application
    /// closes on end of stream).
    pub close_on_peer_fin: bool,
    /// Thin-stream mechanisms (002 §4.1).
    pub thin: ThinConfig,
    /// Emit trace records through `poll_trace`.
    pub trace: bool,
    /// Checksum offload, as a network card does it: segments leave with a
    /// zero checksum field and arriving ones are not checked. Only for a
    /// path that cannot change a byte in flight and whose packets nobody
    /// captures; the simulator's runs set it when no link corrupts and no
    /// pcap is written (the checksum then never rejects anything, so the
    /// results are the same; ns-3 leaves checksums off by default for the
    /// same reason). Off by default: both ends compute and check the real
    /// checksum.
    #[serde(default)]
    pub checksum_offload: bool,
}

/// The TCP thin-stream mechanisms of 002 §4.1 / App. E. All off by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThinConfig {
    /// Linear timeouts (002 §4.1.3): on RTO expiry while thin and ESTABLISHED,
    /// reset the backoff and recompute the RTO instead of doubling it.
    pub linear_timeouts: bool,
    /// After this many consecutive linear timeouts, back off again (Linux
    /// mainline `TCP_THIN_LINEAR_RETRIES` = 6). `None`: no cap, as the 002 patch.
    pub lt_max_linear: Option<u32>,
    /// Modified fast retransmit (002 §4.1.4): recover on the first dupACK while thin.
    pub modified_fast_retransmit: bool,
    /// Redundant data bundling (002 §4.1.5). Not gated by the thin test.
    pub rdb: bool,
    /// RDB limit on a bundled packet's total payload (`tcp_rdb_max_bundle_bytes`); `None` = MSS.
    pub rdb_max_bundle_bytes: Option<u32>,
}

/// A profile string that names nothing known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileError {
    pub input: String,
    pub reason: String,
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown TCP profile {:?}: {}", self.input, self.reason)
    }
}

impl std::error::Error for ProfileError {}

impl std::str::FromStr for TcpConfig {
    type Err = ProfileError;
    /// Same as [`TcpConfig::from_profile`].
    fn from_str(s: &str) -> Result<TcpConfig, ProfileError> {
        TcpConfig::from_profile(s)
    }
}

impl TcpConfig {
    /// Base profile names accepted by [`TcpConfig::from_profile`].
    pub const BASES: [&'static str; 3] = ["newreno", "linux-2.6.23", "linux-modern"];
    /// Flags accepted after `+` (`all` = `lt+mfr+rdb`; `rdb=N` sets the bundle limit,
    /// `ltcap=N` the linear-timeout cap; `nosack` turns SACK off (New Reno),
    /// `nodelack` acknowledges every segment at once; `pushack` / `nopushack`
    /// turn `ack_pushed_on_read` on / off).
    pub const FLAGS: [&'static str; 10] = [
        "lt",
        "mfr",
        "rdb",
        "all",
        "rdb=<bytes>",
        "ltcap=<n>",
        "nosack",
        "nodelack",
        "pushack",
        "nopushack",
    ];

    /// RFC New Reno with SACK: RTO.min 1 s, initial RTO 1 s (RFC 6298), IW per
    /// RFC 3390, delayed ACK 200 ms, no timestamps, cwnd in bytes.
    pub fn newreno() -> TcpConfig {
        TcpConfig {
            name: "newreno".into(),
            mss: 1448,
            sack: true,
            timestamps: false,
            initial_window: InitialWindow::Rfc3390,
            cwnd_unit: CwndUnit::Bytes,
            rtt_estimator: RttEstimator::Rfc6298,
            initial_rto: Duration::from_secs(1),
            rto_min: Duration::from_secs(1),
            rto_max: Duration::from_secs(120),
            clock_granularity: Duration::from_millis(1),
            dupthresh: 3,
            delayed_ack: Some(Duration::from_millis(200)),
            quickack_initial: 0,
            ack_pushed_on_read: false,
            retrans_collapse: false,
            prr: false,
            dsack: false,
            loss_ssthresh_once: false,
            cwnd_growth_per_window: false,
            timer_hz: None,
            rack: None,
            rcv_buf: 256 * 1024,
            snd_buf: 256 * 1024,
            syn_retries: 5,
            max_retries: 15,
            time_wait: Duration::ZERO,
            close_on_peer_fin: true,
            thin: ThinConfig::default(),
            trace: false,
            checksum_offload: false,
        }
    }

    /// The dissertation's baseline (002 §5.2): Linux 2.6.23 New Reno with
    /// SACK and timestamps, RTO.min 200 ms via the RTTVAR floor, initial RTO
    /// 3 s, IW per RFC 3390, cwnd in packets, delayed ACK 40 ms (`TCP_ATO_MIN`)
    /// with quick-ack mode. No retransmission collapsing: 2.6.23 refused to
    /// collapse segments whose data sat in page fragments (`nr_frags != 0`),
    /// which is where `tcp_sendmsg` put it on scatter-gather/GSO interfaces.
    /// A timeout inside a fast recovery keeps that recovery's ssthresh
    /// (`tcp_enter_loss`, `loss_ssthresh_once`).
    pub fn linux_2_6_23() -> TcpConfig {
        TcpConfig {
            name: "linux-2.6.23".into(),
            timestamps: true,
            cwnd_unit: CwndUnit::Packets,
            rtt_estimator: RttEstimator::Linux,
            initial_rto: Duration::from_secs(3),
            rto_min: Duration::from_millis(200),
            delayed_ack: Some(Duration::from_millis(40)),
            quickack_initial: 16,
            loss_ssthresh_once: true,
            ..TcpConfig::newreno()
        }
    }

    /// Current Linux loss recovery (`tcp_recovery=1`, `tcp_early_retrans=3`):
    /// RACK-TLP (RFC 8985), IW 10, RTO.min 200 ms, initial RTO 1 s,
    /// retransmission collapsing, PRR in recovery (RFC 6937), D-SACK (RFC 2883)
    /// with RACK's reordering rules for it, the probe capped at the oldest
    /// segment's RTO, Linux's cwnd growth rule for a window that an
    /// application leaves partly unused (`cwnd_growth_per_window`). Reno
    /// congestion control (CUBIC is not modelled).
    /// The receiver acknowledges a small pushed segment when the application
    /// reads it (`ack_pushed_on_read`, Linux `tcp_cleanup_rbuf`): a capture of
    /// Linux 6.18 on the bench workload shows 88 % of the data segments
    /// acknowledged one path RTT after they left, none 40 ms later.
    pub fn linux_modern() -> TcpConfig {
        TcpConfig {
            name: "linux-modern".into(),
            ack_pushed_on_read: true,
            initial_window: InitialWindow::Segments(10),
            initial_rto: Duration::from_secs(1),
            retrans_collapse: true,
            prr: true,
            dsack: true,
            cwnd_growth_per_window: true,
            // The kernel measured against (Linux 6.18, CONFIG_HZ=250).
            timer_hz: Some(250),
            rack: Some(RackConfig {
                tlp: true,
                tlp_max_ack_delay: Duration::from_millis(200),
                tlp_rto_from_head: true,
                adaptive_reo_wnd: true,
            }),
            ..TcpConfig::linux_2_6_23()
        }
    }

    /// Parses `base[+flag...]`, e.g. `linux-2.6.23+lt+mfr`, `newreno+rdb=700`.
    pub fn from_profile(profile: &str) -> Result<TcpConfig, ProfileError> {
        let err = |reason: String| ProfileError {
            input: profile.to_string(),
            reason,
        };
        let mut parts = profile.trim().split('+');
        let base = parts.next().unwrap_or("").trim();
        let mut cfg = match base {
            "newreno" => TcpConfig::newreno(),
            "linux-2.6.23" => TcpConfig::linux_2_6_23(),
            "linux-modern" => TcpConfig::linux_modern(),
            other => {
                return Err(err(format!(
                    "base {other:?} is not one of {}",
                    TcpConfig::BASES.join(", ")
                )))
            }
        };
        for flag in parts {
            let flag = flag.trim();
            match flag {
                "lt" => cfg.thin.linear_timeouts = true,
                "mfr" => cfg.thin.modified_fast_retransmit = true,
                "rdb" => cfg.thin.rdb = true,
                "nosack" => cfg.sack = false,
                "nodelack" => cfg.delayed_ack = None,
                "pushack" => cfg.ack_pushed_on_read = true,
                "nopushack" => cfg.ack_pushed_on_read = false,
                "all" => {
                    cfg.thin.linear_timeouts = true;
                    cfg.thin.modified_fast_retransmit = true;
                    cfg.thin.rdb = true;
                }
                _ => {
                    if let Some(n) = flag.strip_prefix("rdb=") {
                        let n: u32 = n
                            .parse()
                            .ok()
                            .filter(|n| *n > 0)
                            .ok_or_else(|| err(format!("bad RDB limit in {flag:?}")))?;
                        cfg.thin.rdb = true;
                        cfg.thin.rdb_max_bundle_bytes = Some(n);
                    } else if let Some(n) = flag.strip_prefix("ltcap=") {
                        let n: u32 = n
                            .parse()
                            .map_err(|_| err(format!("bad linear-timeout cap in {flag:?}")))?;
                        cfg.thin.linear_timeouts = true;
                        cfg.thin.lt_max_linear = Some(n);
                    } else {
                        return Err(err(format!(
                            "flag {flag:?} is not one of {}",
                            TcpConfig::FLAGS.join(", ")
                        )));
                    }
                }
            }
        }
        cfg.name = profile.trim().to_string();
        Ok(cfg)
    }

    /// Checks the values a connection relies on.
    pub fn validate(&self) -> Result<(), ProfileError> {
        let bad = |reason: &str| {
            Err(ProfileError {
                input: self.name.clone(),
                reason: reason.to_string(),
            })
        };
        if self.mss < 64 || self.mss > 65_495 {
            return bad("mss must be within 64..=65495 bytes");
        }
        if self.dupthresh == 0 {
            return bad("dupthresh must be at least 1");
        }
        if self.rto_min.is_zero() || self.rto_min > self.rto_max || self.initial_rto.is_zero() {
            return bad("need 0 < rto_min <= rto_max and a non-zero initial RTO");
        }
        if self.rcv_buf < self.mss || self.snd_buf < self.mss {
            return bad("buffers must hold at least one MSS");
        }
        if self.rcv_buf > (1 << 30) {
            return bad("rcv_buf above 1 GiB cannot be advertised");
        }
        if self.timer_hz.is_some_and(|hz| !(24..=10_000).contains(&hz)) {
            return bad(
                "timer_hz must be within 24..=10000 (Linux's CONFIG_HZ: 100, 250, 300, 1000)",
            );
        }
        if let Some(d) = self.delayed_ack {
            if d.is_zero() || d > Duration::from_millis(500) {
                return bad("delayed ACK must be within (0, 500 ms] (RFC 1122 §4.2.3.2)");
            }
        }
        Ok(())
    }

    /// RFC 3390 / fixed initial window in bytes for a given MSS.
    pub(crate) fn initial_window_bytes(&self, mss: u32) -> u64 {
        match self.initial_window {
            InitialWindow::Rfc3390 => u64::from((4 * mss).min((2 * mss).max(4380))),
            InitialWindow::Segments(n) => u64::from(n.max(1)) * u64::from(mss),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_with_flags() {
        let c = TcpConfig::from_profile("linux-2.6.23+lt+mfr").unwrap();
        assert!(c.thin.linear_timeouts && c.thin.modified_fast_retransmit && !c.thin.rdb);
        assert_eq!(c.rto_min, Duration::from_millis(200));
        assert_eq!(c.initial_rto, Duration::from_secs(3));
        let c = TcpConfig::from_profile("linux-2.6.23+all").unwrap();
        assert!(c.thin.linear_timeouts && c.thin.modified_fast_retransmit && c.thin.rdb);
        let c = TcpConfig::from_profile("newreno+rdb=700").unwrap();
        assert_eq!(c.thin.rdb_max_bundle_bytes, Some(700));
        let c = TcpConfig::from_profile("linux-2.6.23+nosack+nodelack+lt").unwrap();
        assert!(!c.sack && c.delayed_ack.is_none() && c.thin.linear_timeouts);
        assert!(!c.ack_pushed_on_read);
        assert!(
            TcpConfig::from_profile("linux-modern")
                .unwrap()
                .ack_pushed_on_read
        );
        assert!(
            !TcpConfig::from_profile("linux-modern+nopushack")
                .unwrap()
                .ack_pushed_on_read
        );
        assert!(
            TcpConfig::from_profile("linux-2.6.23+pushack")
                .unwrap()
                .ack_pushed_on_read
        );
        let c: TcpConfig = "linux-modern".parse().unwrap();
        assert!(c.rack.is_some());
        assert_eq!(c.initial_window_bytes(1448), 14480);
        assert!(TcpConfig::from_profile("cubic").is_err());
        assert!(TcpConfig::from_profile("newreno+fast").is_err());
        assert!(TcpConfig::from_profile("newreno+rdb=0").is_err());
        for base in TcpConfig::BASES {
            TcpConfig::from_profile(base).unwrap().validate().unwrap();
        }
    }

    #[test]
    fn rfc3390_window() {
        let c = TcpConfig::newreno();
        assert_eq!(c.initial_window_bytes(1448), 4380);
        assert_eq!(c.initial_window_bytes(536), 2144);
        assert_eq!(c.initial_window_bytes(4000), 8000);
    }
}
