//! [`WorkloadConfig`]: the serde description of a workload used in scenario
//! files, and the one place that turns a description into a generator.
//!
//! In TOML, a workload is a table with a `kind` and kebab-case fields;
//! durations are text (`"250ms"`, `"1.5s"`) or a number of milliseconds;
//! unknown fields are errors. Examples:
//!
//! ```toml
//! # streamzero-like thin stream (002 App. B): 120 B every 85 ms (002 Fig. 5.20)
//! kind = "constant"
//! iat = "85ms"
//! bytes = 120
//! duration = "10m"
//!
//! # Anarchy Online, three streams round robin
//! kind = "profile"
//! name = "anarchy-online"
//! streams = 3
//!
//! # 003 pattern (iii): bursts of [4, 10] messages, 100 ms apart
//! kind = "bursts"
//! pattern = "uniform-size"
//! burst-size = 7
//! gap = "100ms"
//!
//! # 001 echo: 64 B requests, exp. IAT 10 ms, 4 streams
//! kind = "echo"
//! streams = 4
//!
//! # cross traffic with the 000 defaults and a lower request rate
//! kind = "http"
//! mean-request-gap = "900ms"
//!
//! kind = "trace-pcap"
//! path = "traces/ao.pcap"
//! protocol = "tcp"
//! src-port = 7000
//! ```
//!
//! Common fields of the message workloads: `streams` (round robin over
//! `0..streams`, default 1), `unordered` (default false), `count` (stop after
//! that many messages) and `duration` (stop at `start + duration`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thinstream_base::{Duration, Instant, Seed};

use crate::bulk::BulkStream;
use crate::bursts::{BurstPattern, BurstStream};
use crate::dist::{IatDist, SizeDist};
use crate::http::{self, HttpCrossTraffic, HttpParams};
use crate::profiles::{profile_stream, ProfileName};
use crate::serde_duration;
use crate::thin::{IidStream, Limited};
use crate::trace::csv::TimeUnit;
use crate::trace::pcap::{PcapFilter, Protocol};
use crate::trace::{self, ReplayStream};
use crate::{echo, Generator, WorkloadError};

fn one() -> u16 {
    1
}
fn default_burst_bytes() -> u32 {
    200
}
fn default_bursts() -> u32 {
    12
}
fn default_echo_bytes() -> u32 {
    echo::DEFAULT_REQUEST_BYTES
}
fn default_echo_iat() -> Duration {
    echo::DEFAULT_MEAN_IAT
}
fn default_bulk_bytes() -> u32 {
    1448
}
fn http_clients() -> u16 {
    http::defaults::CLIENTS
}
fn http_gap() -> Duration {
    http::defaults::MEAN_REQUEST_GAP
}
fn http_min() -> u64 {
    http::defaults::MIN_BYTES
}
fn http_mean() -> u64 {
    http::defaults::MEAN_BYTES
}
fn http_max() -> u64 {
    http::defaults::MAX_BYTES
}
fn http_rtt_min() -> Duration {
    http::defaults::RTT_MIN
}
fn http_rtt_max() -> Duration {
    http::defaults::RTT_MAX
}
fn is_false(b: &bool) -> bool {
    !*b
}
fn is_zero(d: &Duration) -> bool {
    d.is_zero()
}
fn is_one(v: &u16) -> bool {
    *v == 1
}

/// Serde description of a workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    rename_all_fields = "kebab-case",
    deny_unknown_fields
)]
pub enum WorkloadConfig {
    /// Fixed size, fixed IAT (`streamzero`, 002 App. B).
    Constant {
        #[serde(with = "serde_duration")]
        iat: Duration,
        bytes: u32,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        streams: u16,
        #[serde(default, skip_serializing_if = "is_false")]
        unordered: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        #[serde(
            default,
            with = "serde_duration::option",
            skip_serializing_if = "Option::is_none"
        )]
        duration: Option<Duration>,
    },
    /// Fixed size, exponential IAT (Poisson arrivals).
    Exponential {
        #[serde(with = "serde_duration")]
        mean_iat: Duration,
        bytes: u32,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        streams: u16,
        #[serde(default, skip_serializing_if = "is_false")]
        unordered: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        #[serde(
            default,
            with = "serde_duration::option",
            skip_serializing_if = "Option::is_none"
        )]
        duration: Option<Duration>,
    },
    /// Fixed size, IAT uniform on `[min-iat, max-iat]`.
    Uniform {
        #[serde(with = "serde_duration")]
        min_iat: Duration,
        #[serde(with = "serde_duration")]
        max_iat: Duration,
        bytes: u32,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        streams: u16,
        #[serde(default, skip_serializing_if = "is_false")]
        unordered: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        #[serde(
            default,
            with = "serde_duration::option",
            skip_serializing_if = "Option::is_none"
        )]
        duration: Option<Duration>,
    },
    /// An application of 002 Table 2.1 ([`crate::profiles`]).
    Profile {
        name: ProfileName,
        /// Draw Casa's IATs i.i.d. instead of its burst structure.
        #[serde(default, skip_serializing_if = "is_false")]
        iid: bool,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        streams: u16,
        #[serde(default, skip_serializing_if = "is_false")]
        unordered: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        #[serde(
            default,
            with = "serde_duration::option",
            skip_serializing_if = "Option::is_none"
        )]
        duration: Option<Duration>,
    },
    /// 003 signalling bursts ([`crate::bursts`]).
    Bursts {
        pattern: BurstPattern,
        burst_size: u32,
        #[serde(with = "serde_duration")]
        gap: Duration,
        #[serde(default, with = "serde_duration", skip_serializing_if = "is_zero")]
        intra_gap: Duration,
        #[serde(default = "default_bursts")]
        bursts: u32,
        #[serde(default = "default_burst_bytes")]
        bytes: u32,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        streams: u16,
        #[serde(default, skip_serializing_if = "is_false")]
        unordered: bool,
    },
    /// 001 request/response requests ([`crate::echo`]); the peer echoes.
    Echo {
        #[serde(default = "default_echo_bytes")]
        bytes: u32,
        #[serde(default = "default_echo_iat", with = "serde_duration")]
        mean_iat: Duration,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        streams: u16,
        #[serde(default, skip_serializing_if = "is_false")]
        unordered: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        #[serde(
            default,
            with = "serde_duration::option",
            skip_serializing_if = "Option::is_none"
        )]
        duration: Option<Duration>,
    },
    /// Greedy sender ([`crate::bulk`]).
    Bulk {
        #[serde(default = "default_bulk_bytes")]
        bytes: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total_bytes: Option<u64>,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        streams: u16,
        #[serde(default, skip_serializing_if = "is_false")]
        unordered: bool,
    },
    /// HTTP-like cross traffic ([`crate::http`]); produces flows.
    Http {
        #[serde(default = "http_clients")]
        clients: u16,
        #[serde(default = "http_gap", with = "serde_duration")]
        mean_request_gap: Duration,
        #[serde(default = "http_min")]
        min_bytes: u64,
        #[serde(default = "http_mean")]
        mean_bytes: u64,
        #[serde(default = "http_max")]
        max_bytes: u64,
        #[serde(default = "http_rtt_min", with = "serde_duration")]
        rtt_min: Duration,
        #[serde(default = "http_rtt_max", with = "serde_duration")]
        rtt_max: Duration,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        #[serde(
            default,
            with = "serde_duration::option",
            skip_serializing_if = "Option::is_none"
        )]
        duration: Option<Duration>,
    },
    /// Replay of a CSV trace ([`crate::trace::csv`]).
    TraceCsv {
        path: PathBuf,
        time_unit: TimeUnit,
        /// Stream for records without a stream column.
        #[serde(default)]
        stream: u16,
        /// Streams the association needs; stream-column values must be below.
        #[serde(default = "one", skip_serializing_if = "is_one")]
        streams: u16,
        #[serde(default, skip_serializing_if = "is_false")]
        unordered: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        #[serde(
            default,
            with = "serde_duration::option",
            skip_serializing_if = "Option::is_none"
        )]
        duration: Option<Duration>,
    },
    /// Replay of one direction of a pcap capture ([`crate::trace::pcap`]).
    TracePcap {
        path: PathBuf,
        #[serde(default)]
        protocol: Protocol,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        src_port: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dst_port: Option<u16>,
        #[serde(default)]
        stream: u16,
        #[serde(default, skip_serializing_if = "is_false")]
        unordered: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        #[serde(
            default,
            with = "serde_duration::option",
            skip_serializing_if = "Option::is_none"
        )]
        duration: Option<Duration>,
    },
}

/// What the receiving application does with messages (the driver
/// implements it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerBehaviour {
    /// Consume and record.
    Sink,
    /// Write every complete message back: same size, same stream or
    /// connection, same `unordered` flag (001 §IV.A).
    Echo,
}

fn check_bytes(bytes: u32, field: &'static str) -> Result<(), WorkloadError> {
    if bytes == 0 {
        Err(WorkloadError::invalid(
            field,
            "messages must carry at least one byte",
        ))
    } else {
        Ok(())
    }
}

fn check_streams(streams: u16) -> Result<(), WorkloadError> {
    if streams == 0 {
        Err(WorkloadError::invalid(
            "streams",
            "need at least one stream",
        ))
    } else {
        Ok(())
    }
}

impl WorkloadConfig {
    /// The `kind` as written in scenario files.
    pub fn kind_name(&self) -> &'static str {
        match self {
            WorkloadConfig::Constant { .. } => "constant",
            WorkloadConfig::Exponential { .. } => "exponential",
            WorkloadConfig::Uniform { .. } => "uniform",
            WorkloadConfig::Profile { .. } => "profile",
            WorkloadConfig::Bursts { .. } => "bursts",
            WorkloadConfig::Echo { .. } => "echo",
            WorkloadConfig::Bulk { .. } => "bulk",
            WorkloadConfig::Http { .. } => "http",
            WorkloadConfig::TraceCsv { .. } => "trace-csv",
            WorkloadConfig::TracePcap { .. } => "trace-pcap",
        }
    }

    /// `true` for workloads that produce flows ([`Self::build_flows`]).
    pub fn produces_flows(&self) -> bool {
        matches!(self, WorkloadConfig::Http { .. })
    }

    /// How many streams (SCTP) or parallel connections (TCP) the messages
    /// use: every `stream` value is below this. 0 for flow workloads.
    pub fn stream_count(&self) -> u16 {
        match self {
            WorkloadConfig::Constant { streams, .. }
            | WorkloadConfig::Exponential { streams, .. }
            | WorkloadConfig::Uniform { streams, .. }
            | WorkloadConfig::Profile { streams, .. }
            | WorkloadConfig::Bursts { streams, .. }
            | WorkloadConfig::Echo { streams, .. }
            | WorkloadConfig::Bulk { streams, .. } => (*streams).max(1),
            WorkloadConfig::TraceCsv {
                stream, streams, ..
            } => (*streams).max(stream.saturating_add(1)),
            WorkloadConfig::TracePcap { stream, .. } => stream.saturating_add(1),
            WorkloadConfig::Http { .. } => 0,
        }
    }

    /// The same workload spread round robin over `streams` streams instead
    /// (the same draws otherwise); `None` for workloads whose streams come
    /// from a trace or that produce flows.
    pub fn with_streams(&self, n: u16) -> Option<WorkloadConfig> {
        let mut w = self.clone();
        match &mut w {
            WorkloadConfig::Constant { streams, .. }
            | WorkloadConfig::Exponential { streams, .. }
            | WorkloadConfig::Uniform { streams, .. }
            | WorkloadConfig::Profile { streams, .. }
            | WorkloadConfig::Bursts { streams, .. }
            | WorkloadConfig::Echo { streams, .. }
            | WorkloadConfig::Bulk { streams, .. } => *streams = n.max(1),
            WorkloadConfig::TraceCsv { .. }
            | WorkloadConfig::TracePcap { .. }
            | WorkloadConfig::Http { .. } => return None,
        }
        Some(w)
    }

    /// The same workload with its (mean) interarrival time replaced:
    /// `iat` of `constant`, `mean-iat` of `exponential` and `echo`; `None`
    /// for the other kinds (their timing is not one interval).
    pub fn with_mean_iat(&self, d: Duration) -> Option<WorkloadConfig> {
        let mut w = self.clone();
        match &mut w {
            WorkloadConfig::Constant { iat, .. } => *iat = d,
            WorkloadConfig::Exponential { mean_iat, .. }
            | WorkloadConfig::Echo { mean_iat, .. } => *mean_iat = d,
            _ => return None,
        }
        Some(w)
    }

    /// What the peer application does with the messages.
    pub fn peer_behaviour(&self) -> PeerBehaviour {
        match self {
            WorkloadConfig::Echo { .. } => PeerBehaviour::Echo,
            _ => PeerBehaviour::Sink,
        }
    }

    /// One line with the derived parameters a run should print before it
    /// starts (fitted profile parameters, the derived Pareto shape, ...).
    pub fn describe(&self) -> String {
        let t = serde_duration::to_text;
        match self {
            WorkloadConfig::Constant { iat, bytes, streams, .. } => {
                format!("constant: {bytes} B every {} over {streams} stream(s)", t(*iat))
            }
            WorkloadConfig::Exponential { mean_iat, bytes, streams, .. } => format!(
                "exponential: {bytes} B, IAT exponential with mean {} over {streams} stream(s)",
                t(*mean_iat)
            ),
            WorkloadConfig::Uniform { min_iat, max_iat, bytes, streams, .. } => format!(
                "uniform: {bytes} B, IAT uniform on [{}, {}] over {streams} stream(s)",
                t(*min_iat),
                t(*max_iat)
            ),
            WorkloadConfig::Profile { name, iid, .. } => {
                let f = name.fit();
                let structure = if *name == ProfileName::Casa && !*iid {
                    "Casa bursts of 4 (intra 305..309 ms, gap 26556..29898 ms); "
                } else {
                    ""
                };
                format!(
                    "profile {name} ({}): {structure}IAT quantiles min/p1/p50/p99/max {:?} ms, k_up {:.3}; size on [{}, {}] B, theta {:.5}",
                    name.row().label,
                    f.iat_knots_ms,
                    f.iat_k_up,
                    f.size_min,
                    f.size_max,
                    f.size_theta
                )
            }
            WorkloadConfig::Bursts { pattern, burst_size, gap, bursts, bytes, .. } => format!(
                "bursts ({pattern:?}): {bursts} bursts of {burst_size} x {bytes} B, gap {}",
                t(*gap)
            ),
            WorkloadConfig::Echo { bytes, mean_iat, streams, .. } => format!(
                "echo: {bytes} B requests, IAT exponential with mean {}, round robin over {streams} stream(s); peer echoes",
                t(*mean_iat)
            ),
            WorkloadConfig::Bulk { bytes, total_bytes, .. } => match total_bytes {
                Some(total) => format!("bulk: {total} B in {bytes} B messages"),
                None => format!("bulk: unlimited, {bytes} B messages"),
            },
            WorkloadConfig::Http { clients, mean_request_gap, min_bytes, mean_bytes, max_bytes, rtt_min, rtt_max, .. } => {
                let alpha = crate::dist::TruncPareto::with_mean(*min_bytes as f64, *max_bytes as f64, *mean_bytes as f64)
                    .map(|p| format!("{:.4}", p.alpha))
                    .unwrap_or_else(|e| format!("unreachable ({e})"));
                format!(
                    "http: {clients} clients, RTT {}..{}, request gap exponential mean {}, sizes Pareto alpha {alpha} on [{min_bytes}, {max_bytes}] B (mean {mean_bytes})",
                    t(*rtt_min),
                    t(*rtt_max),
                    t(*mean_request_gap)
                )
            }
            WorkloadConfig::TraceCsv { path, time_unit, .. } => {
                format!("trace-csv: {} (time in {time_unit:?})", path.display())
            }
            WorkloadConfig::TracePcap { path, protocol, src_port, dst_port, .. } => format!(
                "trace-pcap: {} ({protocol:?}, src port {src_port:?}, dst port {dst_port:?})",
                path.display()
            ),
        }
    }

    /// Makes relative trace paths relative to `base` (the scenario file's
    /// directory) instead of the working directory.
    pub fn resolve_paths(&mut self, base: &Path) {
        if let WorkloadConfig::TraceCsv { path, .. } | WorkloadConfig::TracePcap { path, .. } = self
        {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        }
    }

    /// Builds the message generator. The first message is due at `start`
    /// (traces: their first record); all randomness comes from `seed`.
    /// Trace files are read here. Flow workloads (`http`) are an error: use
    /// [`Self::build_flows`].
    pub fn build(
        &self,
        start: Instant,
        seed: Seed,
    ) -> Result<Box<dyn Generator + Send>, WorkloadError> {
        let rng = seed.rng();
        let limited =
            |g: Box<dyn Generator + Send>, count: &Option<u64>, duration: &Option<Duration>| {
                Box::new(Limited::new(g, start, *count, *duration)) as Box<dyn Generator + Send>
            };
        Ok(match self {
            WorkloadConfig::Constant {
                iat,
                bytes,
                streams,
                unordered,
                count,
                duration,
            } => {
                check_bytes(*bytes, "constant.bytes")?;
                check_streams(*streams)?;
                if iat.is_zero() {
                    return Err(WorkloadError::invalid(
                        "constant.iat",
                        "must be positive (use kind = \"bulk\" for back-to-back data)",
                    ));
                }
                let g = IidStream::new(
                    start,
                    IatDist::Constant(*iat),
                    SizeDist::Constant(*bytes),
                    *streams,
                    *unordered,
                    rng,
                );
                limited(Box::new(g), count, duration)
            }
            WorkloadConfig::Exponential {
                mean_iat,
                bytes,
                streams,
                unordered,
                count,
                duration,
            } => {
                check_bytes(*bytes, "exponential.bytes")?;
                check_streams(*streams)?;
                if mean_iat.is_zero() {
                    return Err(WorkloadError::invalid(
                        "exponential.mean-iat",
                        "must be positive",
                    ));
                }
                let g = IidStream::new(
                    start,
                    IatDist::Exponential { mean: *mean_iat },
                    SizeDist::Constant(*bytes),
                    *streams,
                    *unordered,
                    rng,
                );
                limited(Box::new(g), count, duration)
            }
            WorkloadConfig::Uniform {
                min_iat,
                max_iat,
                bytes,
                streams,
                unordered,
                count,
                duration,
            } => {
                check_bytes(*bytes, "uniform.bytes")?;
                check_streams(*streams)?;
                if max_iat < min_iat || max_iat.is_zero() {
                    return Err(WorkloadError::invalid(
                        "uniform.max-iat",
                        "need 0 <= min-iat <= max-iat and max-iat > 0",
                    ));
                }
                let g = IidStream::new(
                    start,
                    IatDist::Uniform {
                        min: *min_iat,
                        max: *max_iat,
                    },
                    SizeDist::Constant(*bytes),
                    *streams,
                    *unordered,
                    rng,
                );
                limited(Box::new(g), count, duration)
            }
            WorkloadConfig::Profile {
                name,
                iid,
                streams,
                unordered,
                count,
                duration,
            } => {
                check_streams(*streams)?;
                let g = profile_stream(*name, start, *streams, *unordered, *iid, rng);
                limited(g, count, duration)
            }
            WorkloadConfig::Bursts {
                pattern,
                burst_size,
                gap,
                intra_gap,
                bursts,
                bytes,
                streams,
                unordered,
            } => {
                check_bytes(*bytes, "bursts.bytes")?;
                check_streams(*streams)?;
                Box::new(BurstStream::new(
                    start,
                    *pattern,
                    *burst_size,
                    *gap,
                    *intra_gap,
                    *bursts,
                    *bytes,
                    *streams,
                    *unordered,
                    rng,
                )?)
            }
            WorkloadConfig::Echo {
                bytes,
                mean_iat,
                streams,
                unordered,
                count,
                duration,
            } => {
                check_bytes(*bytes, "echo.bytes")?;
                check_streams(*streams)?;
                if mean_iat.is_zero() {
                    return Err(WorkloadError::invalid("echo.mean-iat", "must be positive"));
                }
                let g = echo::request_stream(start, *bytes, *mean_iat, *streams, *unordered, rng);
                limited(Box::new(g), count, duration)
            }
            WorkloadConfig::Bulk {
                bytes,
                total_bytes,
                streams,
                unordered,
            } => {
                check_bytes(*bytes, "bulk.bytes")?;
                check_streams(*streams)?;
                Box::new(BulkStream::new(
                    start,
                    *bytes,
                    *total_bytes,
                    *streams,
                    *unordered,
                ))
            }
            WorkloadConfig::Http { .. } => {
                return Err(WorkloadError::WrongOutputKind {
                    kind: "http",
                    expected: "messages",
                })
            }
            WorkloadConfig::TraceCsv {
                path,
                time_unit,
                stream,
                streams,
                unordered,
                count,
                duration,
            } => {
                let text = trace::read_file(path)?;
                let text = String::from_utf8(text).map_err(|e| WorkloadError::Csv {
                    line: 0,
                    reason: format!("not UTF-8 text: {e}"),
                })?;
                let records = trace::csv::parse(&text, *time_unit)?;
                let limit = (*streams).max(stream.saturating_add(1));
                if let Some(bad) = records
                    .iter()
                    .find(|r| r.stream.is_some_and(|s| s >= limit))
                {
                    return Err(WorkloadError::invalid(
                        "trace-csv.streams",
                        format!(
                            "the trace uses stream {} but streams = {limit}",
                            bad.stream.unwrap_or_default()
                        ),
                    ));
                }
                let g = ReplayStream::new(start, records, *stream, *unordered);
                limited(Box::new(g), count, duration)
            }
            WorkloadConfig::TracePcap {
                path,
                protocol,
                src_port,
                dst_port,
                stream,
                unordered,
                count,
                duration,
            } => {
                let bytes = trace::read_file(path)?;
                let filter = PcapFilter {
                    protocol: *protocol,
                    src_port: *src_port,
                    dst_port: *dst_port,
                };
                let records = trace::pcap::parse(&bytes, &filter)?;
                let g = ReplayStream::new(start, records, *stream, *unordered);
                limited(Box::new(g), count, duration)
            }
        })
    }

    /// Builds the cross-traffic generator of an `http` workload; other kinds
    /// are an error (use [`Self::build`]).
    pub fn build_flows(
        &self,
        start: Instant,
        seed: Seed,
    ) -> Result<HttpCrossTraffic, WorkloadError> {
        match self {
            WorkloadConfig::Http {
                clients,
                mean_request_gap,
                min_bytes,
                mean_bytes,
                max_bytes,
                rtt_min,
                rtt_max,
                count,
                duration,
            } => HttpCrossTraffic::new(
                &HttpParams {
                    clients: *clients,
                    mean_request_gap: *mean_request_gap,
                    min_bytes: *min_bytes,
                    mean_bytes: *mean_bytes,
                    max_bytes: *max_bytes,
                    rtt_min: *rtt_min,
                    rtt_max: *rtt_max,
                },
                start,
                seed,
                *count,
                *duration,
            ),
            other => Err(WorkloadError::WrongOutputKind {
                kind: other.kind_name(),
                expected: "flows",
            }),
        }
    }
}

#[cfg(test)]
mod tests;
