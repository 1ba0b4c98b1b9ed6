//! Application profiles: synthetic streams that reproduce the packet
//! statistics of 002 Table 2.1 (000 Table 1 repeats nine of its rows).
//!
//! # What the table gives, and what is fitted
//!
//! Per application the table states payload size avg/min/max and packet IAT
//! avg/median/min/max/1st/99th percentile ([`TABLE_2_1`], transcribed
//! verbatim; "< 1" cells kept as [`Cell::BelowOneMs`]). Nothing about the
//! shape between those numbers, nor any correlation between successive
//! packets, is known. Each profile therefore draws every IAT and every size
//! independently from a fitted distribution:
//!
//! * **IAT**: a quantile function through the five known quantiles
//!   (min, p1, median, p99, max), linear between min–p1–median and
//!   `x0 + (x1 − x0)·t^k` on median–p99–max with one exponent `k_up` solved in
//!   closed form so the mean equals the table's average
//!   ([`QuantileFit`]). Min, p1, median, p99 and max
//!   are hit exactly and the mean by construction. `k_up > 1` (all rows)
//!   means a convex upper quantile function: most of the upper half sits just
//!   above the median with a thin tail to the maximum, as in the heavy-tailed
//!   traces.
//! * **Size**: the maximum-entropy law on the integers `[min, max]` with the
//!   table's mean, a truncated geometric
//!   ([`TruncGeometric`]).
//!
//! # Fitted parameters (the values of [`FITTED`])
//!
//! | profile | IAT min / p1 / median / p99 / max (ms) | k_up | size (B) | size θ |
//! |---|---|---|---|---|
//! | `casa` | 305 / 305 / 307 / 29898 / 29898 | 1.17 | 93..572 | -0.0119 |
//! | `rdp` | 1 / 2 / 159 / 3892 / 12254 | 10.83 | 8..1417 | -0.0097 |
//! | `vnc-client` | 0 / 0 / 8 / 517 / 5451 | 12.02 | 1..106 | -0.1335 |
//! | `vnc-server` | 0 / 0 / 0.5 / 571 / 3557 | 8.69 | 2..1448 | +0.0006 |
//! | `skype-udp` | 0 / 18 / 24 / 44 / 20015 | 27.24 | 11..316 | -0.0073 |
//! | `skype-tcp` | 0 / 4 / 40 / 80 / 1671 | 11.68 | 14..1267 | -0.0044 |
//! | `ssh` | 0 / 32 / 159 / 3616 / 76610 | 13.96 | 16..752 | -0.0308 |
//! | `anarchy-online` | 7 / 83 / 449 / 4195 / 17032 | 7.21 | 8..1333 | -0.0110 |
//! | `wow` | 0 / 0 / 133 / 3785 / 14855 | 9.65 | 6..1228 | -0.0488 |
//! | `age-of-conan` | 0 / 24 / 57 / 386 / 1375 | 4.00 | 5..1460 | -0.0132 |
//! | `bzflag` | 0 / 0 / 0.5 / 151 / 540 | 2.51 | 4..1448 | -0.0377 |
//! | `halo3-high` | 0 / 32 / 33 / 182 / 1403 | 43.27 | 32..1264 | -0.0045 |
//! | `halo3-moderate` | 32 / 64 / 66 / 69 / 716 | 3.84 | 32..280 | +0.0953 |
//! | `wic-server` | 0 / 0 / 100 / 300 / 315 | 2.57 | 4..1361 | -0.0024 |
//! | `wic-client` | 16 / 44 / 100 / 299 / 1022 | 5.01 | 4..113 | -1.6094 |
//! | `youtube` | 0 / 0 / 0.5 / 127 / 1335 | 9.06 | 112..1448 | +0.4055 |
//! | `http-download` | 0 / 0 / 0.428 / 8 / 186 | 10.89 | 64..1448 | +0.6931 |
//! | `ftp-download` | 0 / 0 / 0.073 / 0.292 / 339 | 38.01 | 40..1448 | +0.6931 |
//!
//! # Interpreting "< 1 ms"
//!
//! The true value of a "< 1" cell lies in `[0, 1)` ms. We use:
//! * min "< 1" → 0 ms (back-to-back writes);
//! * 1st percentile "< 1" → 0 ms (every such row also has min "< 1");
//! * median "< 1" → 0.5 ms, or avg/2 when the average is itself below 1 ms;
//! * 99th percentile "< 1" (FTP only) → min(2·avg, 0.99) ms;
//! * average "< 1" (HTTP and FTP downloads, whose pps is "> 1000") → derived
//!   from the bandwidth column: `(payload avg + 52 B of IPv4/TCP headers with
//!   timestamps) · 8 / bps`, i.e. 0.857 ms (HTTP, 1167 pps) and 0.146 ms (FTP,
//!   6838 pps), both consistent with "> 1000 pps".
//!
//! A payload average that equals a bound (World in Conflict client: avg 4 =
//! min 4) cannot be told apart from the bound after rounding; the fit targets
//! the middle of the rounding interval inside the support (min + 0.25).
//!
//! # Casa
//!
//! 002 §2.2.2 describes the Casa radar control stream as "a burst of four
//! packets with an interarrival time of about 305 ms ... sent every 30
//! seconds". The `casa` profile models that structure explicitly
//! ([`CasaStream`]): bursts of exactly four packets, the three intra-burst
//! IATs uniform on [305, 309] ms (min 305, and the overall median, the 2/3
//! quantile of this uniform, is 307.7 ≈ 307), and the heartbeat gap after the
//! fourth packet uniform on [26 556, 29 898] ms, whose mean 28 227 ms makes the
//! overall mean IAT (3·307 + 28 227)/4 = 7287 ms as in the table and whose top
//! is the table's max (and p99 ≈ the gap's 96th percentile = 29 764 ms). The
//! heartbeat period is then 29.1 s on average: the table's mean and maximum
//! take precedence over the prose's rounded "30 seconds". The i.i.d. fit of
//! the Casa row is kept in [`FITTED`] and can be selected with `iid = true`.
//!
//! # Limitations
//!
//! * No autocorrelation: real traces have on/off periods (WoW's bursts in
//!   002 Fig. 2.2, VNC screen updates) that an i.i.d. draw does not show.
//! * Size and IAT are independent; in the traces they are not.
//! * One exponent shapes both upper segments, so with a large `k_up` the top
//!   percent sits close to p99 and the maximum is approached only rarely
//!   (e.g. Skype UDP's 20 s gap). Where the maximum is far above the mean
//!   (FTP: 339 ms against 0.146 ms) the rare long gaps carry much of the
//!   mean, and short samples underestimate it; the statistics test sizes its
//!   sample from the fit's exact variance for that reason.
//! * The shape between known quantiles is an assumption (piecewise power),
//!   not a measurement; only the stated statistics are reproduced.
//! * The greedy rows (YouTube, HTTP, FTP) are packet-level captures of
//!   congestion-controlled flows; replaying them as an application stream is
//!   only meaningful as a reference load. Use [`crate::bulk`] for a real
//!   greedy sender.

use serde::{Deserialize, Serialize};
use thinstream_base::{Duration, Instant, Rng};

use crate::dist::{IatDist, QuantileFit, SizeDist, TruncGeometric};
use crate::thin::{IidStream, StreamRoundRobin};
use crate::{Generator, Message, WorkloadError};

/// The 18 applications of 002 Table 2.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProfileName {
    Casa,
    Rdp,
    VncClient,
    VncServer,
    SkypeUdp,
    SkypeTcp,
    Ssh,
    AnarchyOnline,
    Wow,
    AgeOfConan,
    Bzflag,
    Halo3High,
    Halo3Moderate,
    WicServer,
    WicClient,
    Youtube,
    HttpDownload,
    FtpDownload,
}

impl ProfileName {
    pub const ALL: [ProfileName; 18] = [
        ProfileName::Casa,
        ProfileName::Rdp,
        ProfileName::VncClient,
        ProfileName::VncServer,
        ProfileName::SkypeUdp,
        ProfileName::SkypeTcp,
        ProfileName::Ssh,
        ProfileName::AnarchyOnline,
        ProfileName::Wow,
        ProfileName::AgeOfConan,
        ProfileName::Bzflag,
        ProfileName::Halo3High,
        ProfileName::Halo3Moderate,
        ProfileName::WicServer,
        ProfileName::WicClient,
        ProfileName::Youtube,
        ProfileName::HttpDownload,
        ProfileName::FtpDownload,
    ];

    /// The name used in scenario files (`"vnc-client"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileName::Casa => "casa",
            ProfileName::Rdp => "rdp",
            ProfileName::VncClient => "vnc-client",
            ProfileName::VncServer => "vnc-server",
            ProfileName::SkypeUdp => "skype-udp",
            ProfileName::SkypeTcp => "skype-tcp",
            ProfileName::Ssh => "ssh",
            ProfileName::AnarchyOnline => "anarchy-online",
            ProfileName::Wow => "wow",
            ProfileName::AgeOfConan => "age-of-conan",
            ProfileName::Bzflag => "bzflag",
            ProfileName::Halo3High => "halo3-high",
            ProfileName::Halo3Moderate => "halo3-moderate",
            ProfileName::WicServer => "wic-server",
            ProfileName::WicClient => "wic-client",
            ProfileName::Youtube => "youtube",
            ProfileName::HttpDownload => "http-download",
            ProfileName::FtpDownload => "ftp-download",
        }
    }

    pub fn parse(text: &str) -> Result<ProfileName, WorkloadError> {
        ProfileName::ALL
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| {
                WorkloadError::invalid(
                    "profile.name",
                    format!(
                        "unknown profile {text:?}; known: {}",
                        ProfileName::ALL.map(|p| p.as_str()).join(", ")
                    ),
                )
            })
    }

    fn index(self) -> usize {
        ProfileName::ALL
            .iter()
            .position(|p| *p == self)
            .expect("ALL lists every variant")
    }

    /// The transcribed Table 2.1 row.
    pub fn row(self) -> &'static TableRow {
        &TABLE_2_1[self.index()]
    }

    /// The fitted parameters used for sampling.
    pub fn fit(self) -> &'static ProfileFit {
        &FITTED[self.index()]
    }
}

impl std::fmt::Display for ProfileName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Table 2.1 IAT cell in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell {
    Ms(f64),
    /// Printed as "< 1".
    BelowOneMs,
}

/// One row of 002 Table 2.1, as printed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TableRow {
    pub name: ProfileName,
    /// The application as named in the table.
    pub label: &'static str,
    pub size_avg: u32,
    pub size_min: u32,
    pub size_max: u32,
    pub iat_avg: Cell,
    pub iat_median: Cell,
    pub iat_min: Cell,
    pub iat_max_ms: f64,
    pub iat_p1: Cell,
    pub iat_p99: Cell,
    /// Average packets per second (`None` where printed "> 1000").
    pub pps: Option<f64>,
    /// Average bandwidth in bits per second (K = 1000, M = 10^6).
    pub bps: f64,
}

use Cell::{BelowOneMs as LT1, Ms};

#[allow(clippy::too_many_arguments)]
const fn row(
    name: ProfileName,
    label: &'static str,
    size: (u32, u32, u32),
    iat_avg: Cell,
    iat_median: Cell,
    iat_min: Cell,
    iat_max_ms: f64,
    iat_p1: Cell,
    iat_p99: Cell,
    pps: Option<f64>,
    bps: f64,
) -> TableRow {
    TableRow {
        name,
        label,
        size_avg: size.0,
        size_min: size.1,
        size_max: size.2,
        iat_avg,
        iat_median,
        iat_min,
        iat_max_ms,
        iat_p1,
        iat_p99,
        pps,
        bps,
    }
}

/// 002 Table 2.1, row by row: payload (avg, min, max) bytes; IAT avg,
/// median, min, max, 1st, 99th percentile (ms); pps; bps.
#[rustfmt::skip]
pub const TABLE_2_1: [TableRow; 18] = {
    use ProfileName as P;
    [
        row(P::Casa, "Casa (sensor network)", (175, 93, 572), Ms(7287.0), Ms(307.0), Ms(305.0), 29898.0, Ms(305.0), Ms(29898.0), Some(0.137), 269.0),
        row(P::Rdp, "Windows remote desktop", (111, 8, 1417), Ms(318.0), Ms(159.0), Ms(1.0), 12254.0, Ms(2.0), Ms(3892.0), Some(3.145), 4497.0),
        row(P::VncClient, "VNC (from client)", (8, 1, 106), Ms(34.0), Ms(8.0), LT1, 5451.0, LT1, Ms(517.0), Some(29.412), 17e3),
        row(P::VncServer, "VNC (from server)", (827, 2, 1448), Ms(38.0), LT1, LT1, 3557.0, LT1, Ms(571.0), Some(26.316), 187e3),
        row(P::SkypeUdp, "Skype (2 users) (UDP)", (111, 11, 316), Ms(30.0), Ms(24.0), LT1, 20015.0, Ms(18.0), Ms(44.0), Some(33.333), 37e3),
        row(P::SkypeTcp, "Skype (2 users) (TCP)", (236, 14, 1267), Ms(34.0), Ms(40.0), LT1, 1671.0, Ms(4.0), Ms(80.0), Some(29.412), 69e3),
        row(P::Ssh, "SSH text session", (48, 16, 752), Ms(323.0), Ms(159.0), LT1, 76610.0, Ms(32.0), Ms(3616.0), Some(3.096), 2825.0),
        row(P::AnarchyOnline, "Anarchy Online", (98, 8, 1333), Ms(632.0), Ms(449.0), Ms(7.0), 17032.0, Ms(83.0), Ms(4195.0), Some(1.582), 2168.0),
        row(P::Wow, "World of Warcraft", (26, 6, 1228), Ms(314.0), Ms(133.0), LT1, 14855.0, LT1, Ms(3785.0), Some(3.185), 2046.0),
        row(P::AgeOfConan, "Age of Conan", (80, 5, 1460), Ms(86.0), Ms(57.0), LT1, 1375.0, Ms(24.0), Ms(386.0), Some(11.628), 12e3),
        row(P::Bzflag, "BZFlag", (30, 4, 1448), Ms(24.0), LT1, LT1, 540.0, LT1, Ms(151.0), Some(41.667), 31e3),
        row(P::Halo3High, "Halo 3 - high intensity (UDP)", (247, 32, 1264), Ms(36.0), Ms(33.0), LT1, 1403.0, Ms(32.0), Ms(182.0), Some(27.778), 60e3),
        row(P::Halo3Moderate, "Halo 3 - mod. intensity (UDP)", (270, 32, 280), Ms(67.0), Ms(66.0), Ms(32.0), 716.0, Ms(64.0), Ms(69.0), Some(14.925), 36e3),
        row(P::WicServer, "World in Conflict (from server)", (365, 4, 1361), Ms(104.0), Ms(100.0), LT1, 315.0, LT1, Ms(300.0), Some(9.615), 31e3),
        row(P::WicClient, "World in Conflict (from client)", (4, 4, 113), Ms(105.0), Ms(100.0), Ms(16.0), 1022.0, Ms(44.0), Ms(299.0), Some(9.524), 4443.0),
        row(P::Youtube, "YouTube stream (greedy)", (1446, 112, 1448), Ms(9.0), LT1, LT1, 1335.0, LT1, Ms(127.0), Some(111.111), 1278e3),
        row(P::HttpDownload, "HTTP download (greedy)", (1447, 64, 1448), LT1, LT1, LT1, 186.0, LT1, Ms(8.0), None, 14e6),
        row(P::FtpDownload, "FTP download (greedy)", (1447, 40, 1448), LT1, LT1, LT1, 339.0, LT1, LT1, None, 82e6),
    ]
};

/// IPv4 (20) + TCP (20) + timestamp option (12) bytes, used only to turn the
/// bandwidth column into an average IAT for the "< 1 ms" rows.
pub const TCP_IPV4_HEADER_BYTES: f64 = 52.0;

impl TableRow {
    /// The target mean IAT in ms ("< 1" resolved from the bandwidth column).
    pub fn iat_avg_ms(&self) -> f64 {
        match self.iat_avg {
            Ms(v) => v,
            LT1 => (f64::from(self.size_avg) + TCP_IPV4_HEADER_BYTES) * 8.0 / self.bps * 1e3,
        }
    }

    /// The five IAT knots (min, p1, median, p99, max) in ms with "< 1"
    /// resolved as documented in the module docs.
    pub fn iat_knots_ms(&self) -> [f64; 5] {
        let avg = self.iat_avg_ms();
        let min = match self.iat_min {
            Ms(v) => v,
            LT1 => 0.0,
        };
        let p1 = match self.iat_p1 {
            Ms(v) => v,
            LT1 => min,
        };
        let median = match self.iat_median {
            Ms(v) => v,
            LT1 if avg < 1.0 => avg / 2.0,
            LT1 => 0.5,
        };
        let p99 = match self.iat_p99 {
            Ms(v) => v,
            LT1 => (2.0 * avg).min(0.99),
        };
        [min, p1, median, p99, self.iat_max_ms]
    }

    /// The target mean payload size: the table's average, moved to the middle
    /// of its rounding interval when it coincides with a bound.
    pub fn size_target_mean(&self) -> f64 {
        let avg = f64::from(self.size_avg);
        if avg - f64::from(self.size_min) < 0.5 {
            f64::from(self.size_min) + 0.25
        } else if f64::from(self.size_max) - avg < 0.5 {
            f64::from(self.size_max) - 0.25
        } else {
            avg
        }
    }

    /// Derives the fit from the row (what [`FITTED`] stores).
    pub fn derive_fit(&self) -> Result<ProfileFit, WorkloadError> {
        let iat = QuantileFit::with_mean(self.iat_knots_ms(), self.iat_avg_ms())?;
        let size =
            TruncGeometric::with_mean(self.size_min, self.size_max, self.size_target_mean())?;
        Ok(ProfileFit {
            name: self.name,
            iat_knots_ms: iat.knots,
            iat_k_up: iat.k_up,
            size_min: size.min,
            size_max: size.max,
            size_theta: size.theta,
        })
    }
}

/// The fitted parameters of one profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProfileFit {
    pub name: ProfileName,
    /// IAT quantiles at 0, 0.01, 0.5, 0.99, 1 in ms.
    pub iat_knots_ms: [f64; 5],
    /// Exponent of the median–p99 and p99–max segments.
    pub iat_k_up: f64,
    pub size_min: u32,
    pub size_max: u32,
    /// Log-ratio of successive size probabilities (< 0: mass near min).
    pub size_theta: f64,
}

impl ProfileFit {
    pub fn iat(&self) -> QuantileFit {
        QuantileFit {
            knots: self.iat_knots_ms,
            k_up: self.iat_k_up,
        }
    }
    pub fn size(&self) -> TruncGeometric {
        TruncGeometric {
            min: self.size_min,
            max: self.size_max,
            theta: self.size_theta,
        }
    }
}

const fn fit(name: ProfileName, knots: [f64; 5], k_up: f64, size: (u32, u32, f64)) -> ProfileFit {
    ProfileFit {
        name,
        iat_knots_ms: knots,
        iat_k_up: k_up,
        size_min: size.0,
        size_max: size.1,
        size_theta: size.2,
    }
}

/// All fitted parameters, in table order. Generated by
/// [`TableRow::derive_fit`] and pinned here so a change of method shows up
/// as a reviewed diff; the test `fitted_table_matches_derivation` checks they
/// agree. Knots in ms (min, p1, median, p99, max); size law on [min, max]
/// with log-ratio θ. (θ = ln 2 for the HTTP/FTP rows is a fitted value: a
/// mean 1 byte below the maximum of a long support makes successive
/// probabilities halve.)
#[allow(clippy::approx_constant)]
#[rustfmt::skip]
pub const FITTED: [ProfileFit; 18] = {
    use ProfileName as P;
    [
        fit(P::Casa, [305.0, 305.0, 307.0, 29898.0, 29898.0], 1.169104, (93, 572, -0.01189086)),
        fit(P::Rdp, [1.0, 2.0, 159.0, 3892.0, 12254.0], 10.828520, (8, 1417, -0.00966175)),
        fit(P::VncClient, [0.0, 0.0, 8.0, 517.0, 5451.0], 12.017429, (1, 106, -0.13353004)),
        fit(P::VncServer, [0.0, 0.0, 0.5, 571.0, 3557.0], 8.692380, (2, 1448, 0.00059169)),
        fit(P::SkypeUdp, [0.0, 18.0, 24.0, 44.0, 20015.0], 27.235849, (11, 316, -0.00726373)),
        fit(P::SkypeTcp, [0.0, 4.0, 40.0, 80.0, 1671.0], 11.682143, (14, 1267, -0.00439377)),
        fit(P::Ssh, [0.0, 32.0, 159.0, 3616.0, 76610.0], 13.964470, (16, 752, -0.03077166)),
        fit(P::AnarchyOnline, [7.0, 83.0, 449.0, 4195.0, 17032.0], 7.208610, (8, 1333, -0.01104977)),
        fit(P::Wow, [0.0, 0.0, 133.0, 3785.0, 14855.0], 9.651532, (6, 1228, -0.04879016)),
        fit(P::AgeOfConan, [0.0, 24.0, 57.0, 386.0, 1375.0], 3.996350, (5, 1460, -0.01324523)),
        fit(P::Bzflag, [0.0, 0.0, 0.5, 151.0, 540.0], 2.509323, (4, 1448, -0.03774033)),
        fit(P::Halo3High, [0.0, 32.0, 33.0, 182.0, 1403.0], 43.270130, (32, 1264, -0.00454416)),
        fit(P::Halo3Moderate, [32.0, 64.0, 66.0, 69.0, 716.0], 3.841463, (32, 280, 0.09531018)),
        fit(P::WicServer, [0.0, 0.0, 100.0, 300.0, 315.0], 2.569091, (4, 1361, -0.00240939)),
        fit(P::WicClient, [16.0, 44.0, 100.0, 299.0, 1022.0], 5.009180, (4, 113, -1.60943791)),
        fit(P::Youtube, [0.0, 0.0, 0.5, 127.0, 1335.0], 9.059762, (112, 1448, 0.40546511)),
        fit(P::HttpDownload, [0.0, 0.0, 0.42828571428571427, 8.0, 186.0], 10.889045, (64, 1448, 0.69314718)),
        fit(P::FtpDownload, [0.0, 0.0, 0.07312195121951219, 0.29248780487804876, 339.0], 38.012986, (40, 1448, 0.69314718)),
    ]
};

/// Parameters of the explicit Casa burst model (002 §2.2.2; see module docs).
pub mod casa {
    /// Packets per heartbeat burst ("a burst of four packets").
    pub const BURST_PACKETS: u32 = 4;
    /// Intra-burst IAT range in ms ("about 305 ms"; table min 305, median 307).
    pub const INTRA_MS: (f64, f64) = (305.0, 309.0);
    /// Heartbeat gap range in ms: top = table max; mean 28 227 ms =
    /// 4·7287 − 3·307 so that the overall mean IAT is the table's 7287 ms.
    pub const GAP_MS: (f64, f64) = (26556.0, 29898.0);
}

/// The Casa stream: bursts of four packets ~305 ms apart, one heartbeat gap.
#[derive(Debug)]
pub struct CasaStream {
    next_at: Instant,
    /// Position of the next packet within its burst (0-based).
    in_burst: u32,
    size: SizeDist,
    streams: StreamRoundRobin,
    unordered: bool,
    rng: Rng,
}

impl CasaStream {
    pub fn new(start: Instant, streams: u16, unordered: bool, rng: Rng) -> Self {
        CasaStream {
            next_at: start,
            in_burst: 0,
            size: SizeDist::Geometric(ProfileName::Casa.fit().size()),
            streams: StreamRoundRobin::new(streams),
            unordered,
            rng,
        }
    }
}

fn uniform_ms(rng: &mut Rng, (lo, hi): (f64, f64)) -> Duration {
    Duration::from_secs_f64((lo + (hi - lo) * rng.next_f64()) / 1e3)
}

impl Generator for CasaStream {
    fn next_message(&mut self) -> Option<Message> {
        let at = self.next_at;
        if at == Instant::MAX {
            return None;
        }
        let bytes = self.size.sample(&mut self.rng);
        self.in_burst += 1;
        let gap = if self.in_burst < casa::BURST_PACKETS {
            uniform_ms(&mut self.rng, casa::INTRA_MS)
        } else {
            self.in_burst = 0;
            uniform_ms(&mut self.rng, casa::GAP_MS)
        };
        self.next_at = at.checked_add(gap).unwrap_or(Instant::MAX);
        Some(Message {
            at,
            stream: self.streams.next_stream(),
            bytes,
            unordered: self.unordered,
        })
    }
}

/// Builds the generator of a profile (unlimited; wrap in
/// [`Limited`](crate::thin::Limited) for count/duration). `iid` forces the
/// i.i.d. fit even for Casa.
pub fn profile_stream(
    name: ProfileName,
    start: Instant,
    streams: u16,
    unordered: bool,
    iid: bool,
    rng: Rng,
) -> Box<dyn Generator + Send> {
    if name == ProfileName::Casa && !iid {
        return Box::new(CasaStream::new(start, streams, unordered, rng));
    }
    let fit = name.fit();
    Box::new(IidStream::new(
        start,
        IatDist::Quantile(fit.iat()),
        SizeDist::Geometric(fit.size()),
        streams,
        unordered,
        rng,
    ))
}

#[cfg(test)]
mod tests;
