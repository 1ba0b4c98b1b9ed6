//! Expansion: a scenario becomes a list of runs, one per
//! (variant × sweep point × repetition), each with its own seed.
//!
//! Seeds (one master seed, every other derived from it by name): the run seed is
//! `master.derive("point{p}.rep{r}")`. It does not depend on the variant, so
//! every variant of one (point, repetition) sees the same link randomness
//! and workload draws until the transports' behaviour diverges (common
//! random numbers make variant differences less noisy).

use std::fmt::Write as _;

use thinstream_base::{Duration, Seed};

use crate::error::LabError;
use crate::scenario::{GridPoint, PeerKind, Scenario, TransportKind, VariantSpec};
use crate::transport::{self, PresetIssue, TransportConfig};

/// Most simulated time per run (duration + drain).
pub const MAX_SIMULATED: thinstream_base::Duration =
    thinstream_base::Duration::from_secs(7 * 24 * 3600);
/// Most repetitions per variant and sweep point.
pub const MAX_REPETITIONS: u32 = 100_000;
/// Most runs one scenario expands to.
pub const MAX_RUNS: u64 = 1_000_000;

/// Command-line adjustments to a scenario.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlanOptions {
    /// Replaces the scenario's master seed.
    pub seed: Option<u64>,
    /// Replaces the generation window (`duration`); the drain is kept.
    pub duration: Option<Duration>,
    /// Replaces the drain time.
    pub drain: Option<Duration>,
    /// Only these variants (by name), in scenario order.
    pub variants: Option<Vec<String>>,
    /// Only these sweep points (by label, e.g. `"12"`, `"5%"`, or
    /// `"500kbit/5ms/9"` for a point of a sweep with several axes).
    pub points: Option<Vec<String>>,
    /// Replaces the repetition count.
    pub repetitions: Option<u32>,
}

/// A variant with its resolved transport (or why it cannot run).
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedVariant {
    pub spec: VariantSpec,
    pub transport: TransportKind,
    /// `Err` = not available in this build (the message says why); the
    /// variant's runs are skipped and reported as unavailable.
    pub config: Result<TransportConfig, String>,
}

/// One simulation to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunSpec {
    /// Position in the plan; results are ordered by it.
    pub index: usize,
    pub variant: usize,
    /// Index into [`Plan::points`] (`None` without a sweep).
    pub point: Option<usize>,
    pub repetition: u32,
    pub seed: Seed,
}

/// The expanded scenario.
#[derive(Clone, Debug)]
pub struct Plan {
    pub scenario: Scenario,
    pub seed: Seed,
    /// Messages are generated in `[0, duration)`.
    pub duration: Duration,
    /// The run stops at `duration + drain`.
    pub drain: Duration,
    pub repetitions: u32,
    pub variants: Vec<PlannedVariant>,
    /// Sweep points (empty without a sweep), each with one value per axis.
    pub points: Vec<GridPoint>,
    /// Fixed-preset configuration of each `[[flows]]` entry (`None`: the variant's).
    pub fixed: Vec<Option<TransportConfig>>,
    /// Runs of available variants, in index order.
    pub runs: Vec<RunSpec>,
}

impl Plan {
    /// Expands `scenario` with `options`. Unknown presets, bad overrides and
    /// selections that match nothing are errors; presets that name a
    /// mechanism not built yet make their variant unavailable.
    pub fn new(mut scenario: Scenario, options: &PlanOptions) -> Result<Plan, LabError> {
        // Limits that turn an absurd request into a clear error before any
        // memory is committed to it.
        let seed = Seed(options.seed.unwrap_or(scenario.seed));
        let duration = options.duration.unwrap_or(scenario.duration);
        if duration.is_zero() {
            return Err(LabError::Selection("--duration must be positive".into()));
        }
        let drain = options.drain.unwrap_or(scenario.drain);
        if duration.as_nanos().saturating_add(drain.as_nanos()) > MAX_SIMULATED.as_nanos() {
            return Err(LabError::Selection(format!(
                "duration {duration} + drain {drain} is beyond the limit of {MAX_SIMULATED} of simulated time per run (the metrics keep a record per message, about 1 KiB each, until the run ends)"
            )));
        }
        let repetitions = options.repetitions.unwrap_or(scenario.repetitions);
        if repetitions == 0 {
            return Err(LabError::Selection(
                "--repetitions must be at least 1".into(),
            ));
        }
        if repetitions > MAX_REPETITIONS {
            return Err(LabError::Selection(format!(
                "repetitions = {repetitions} is beyond the limit of {MAX_REPETITIONS}"
            )));
        }

        if let Some(names) = &options.variants {
            for n in names {
                if !scenario.variants.iter().any(|v| &v.name == n) {
                    return Err(LabError::Selection(format!(
                        "variant {n:?} is not in the scenario (it has: {})",
                        scenario
                            .variants
                            .iter()
                            .map(|v| v.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            }
            scenario.variants.retain(|v| names.contains(&v.name));
        }

        let mut points = match &scenario.sweep {
            Some(s) => s.points().map_err(|m| LabError::Invalid {
                path: scenario.path.clone(),
                message: m,
            })?,
            None => Vec::new(),
        };
        if let Some(wanted) = &options.points {
            if points.is_empty() {
                return Err(LabError::Selection(
                    "--points given but the scenario has no [sweep]".into(),
                ));
            }
            for w in wanted {
                if !points.iter().any(|p| &p.label() == w) {
                    return Err(LabError::Selection(format!(
                        "sweep point {w:?} is not in the scenario's sweep"
                    )));
                }
            }
            points.retain(|p| wanted.contains(&p.label()));
        }

        // The transport of the measured flows decides a variant's default.
        let measured_kind = scenario
            .flows
            .iter()
            .find(|f| f.is_measured() && f.preset.is_none())
            .and_then(|f| f.transport)
            .unwrap_or(TransportKind::Sctp);

        let mut fixed = Vec::with_capacity(scenario.flows.len());
        for (i, f) in scenario.flows.iter().enumerate() {
            fixed.push(match &f.preset {
                Some(p) => {
                    let kind = f.transport.unwrap_or(TransportKind::Sctp);
                    let config = transport::resolve(kind, p, &Default::default()).map_err(|e| {
                        LabError::UnknownPreset {
                            variant: format!("flows[{i}]"),
                            preset: p.clone(),
                            reason: e.to_string(),
                        }
                    })?;
                    // Cross traffic is never analysed; its trace records
                    // (a million packets per bottleneck-filling run) would
                    // only cost memory.
                    Some(if f.workload.produces_flows() {
                        config.without_trace()
                    } else {
                        config
                    })
                }
                None => None,
            });
        }

        let mut variants = Vec::with_capacity(scenario.variants.len());
        for v in &scenario.variants {
            let kind = v.transport.unwrap_or(measured_kind);
            if v.unordered && kind != TransportKind::Sctp {
                return Err(LabError::Invalid {
                    path: scenario.path.clone(),
                    message: format!(
                        "variant {:?}: `unordered` needs SCTP (TCP has no unordered delivery)",
                        v.name
                    ),
                });
            }
            let config = match transport::resolve(kind, &v.preset, &v.overrides) {
                Ok(c) => Ok(c),
                Err(PresetIssue::NotAvailable(m)) => Err(m),
                Err(e) => {
                    return Err(LabError::UnknownPreset {
                        variant: v.name.clone(),
                        preset: v.preset.clone(),
                        reason: e.to_string(),
                    })
                }
            };
            variants.push(PlannedVariant {
                spec: v.clone(),
                transport: kind,
                config,
            });
        }

        // SCTP: a workload over more streams than the association offers
        // would have messages rejected; say so before anything runs.
        for (i, f) in scenario.flows.iter().enumerate() {
            // (who, config, streams the workload uses under it)
            let configs: Vec<(String, &TransportConfig, u16)> = match &fixed[i] {
                Some(c) => vec![(format!("flows[{i}].preset"), c, f.workload.stream_count())],
                None => variants
                    .iter()
                    .filter_map(|v| {
                        Some((
                            format!("variant {:?}", v.spec.name),
                            v.config.as_ref().ok()?,
                            v.spec
                                .workload_streams
                                .unwrap_or_else(|| f.workload.stream_count()),
                        ))
                    })
                    .collect(),
            };
            for (who, c, needed) in configs {
                if let Some(offered) = c.sctp_streams() {
                    if needed > offered {
                        return Err(LabError::Invalid {
                            path: scenario.path.clone(),
                            message: format!(
                                "flows[{i}]: the workload uses {needed} SCTP streams but {who} offers {offered}; set `overrides = {{ streams = {needed} }}` on the variant"
                            ),
                        });
                    }
                }
            }
        }

        // A TCP variant splits a multi-stream workload into one connection
        // per stream (`echo::splits`); the dumbbell's access list is per
        // listed flow, so that needs the two-host topology. A TCP echo peer
        // needs fixed-size requests to find them in the byte stream.
        for (i, f) in scenario.flows.iter().enumerate() {
            let tcp_somewhere = match &fixed[i] {
                Some(c) => c.kind() == TransportKind::Tcp,
                None => variants.iter().any(|v| v.transport == TransportKind::Tcp),
            };
            if !tcp_somewhere {
                continue;
            }
            let bad = |message: String| LabError::Invalid {
                path: scenario.path.clone(),
                message,
            };
            if f.peer_kind() == PeerKind::Echo
                && crate::echo::fixed_request_bytes(&f.workload).is_none()
            {
                return Err(bad(format!(
                    "flows[{i}]: a TCP echo peer needs fixed-size requests (an `echo` or `constant` workload)"
                )));
            }
            let most = if fixed[i].is_some() {
                f.workload.stream_count()
            } else {
                variants
                    .iter()
                    .filter(|v| v.transport == TransportKind::Tcp)
                    .map(|v| {
                        v.spec
                            .workload_streams
                            .unwrap_or_else(|| f.workload.stream_count())
                    })
                    .max()
                    .unwrap_or(1)
            };
            if most > 1
                && !matches!(
                    scenario.topology,
                    crate::scenario::TopologySpec::TwoHost { .. }
                )
            {
                return Err(bad(format!(
                    "flows[{i}]: {most} streams over TCP become one connection per stream, which needs a two-host topology"
                )));
            }
        }

        let total = (variants.len() as u64)
            .saturating_mul(points.len().max(1) as u64)
            .saturating_mul(u64::from(repetitions));
        if total > MAX_RUNS {
            return Err(LabError::Selection(format!(
                "{} variant(s) x {} sweep point(s) x {repetitions} repetition(s) = {total} runs, beyond the limit of {MAX_RUNS} runs per scenario",
                variants.len(),
                points.len().max(1)
            )));
        }
        let mut runs = Vec::new();
        let point_slots: Vec<Option<usize>> = if points.is_empty() {
            vec![None]
        } else {
            (0..points.len()).map(Some).collect()
        };
        for (vi, v) in variants.iter().enumerate() {
            if v.config.is_err() {
                continue;
            }
            for p in &point_slots {
                for r in 0..repetitions {
                    let label = format!("point{}.rep{r}", p.unwrap_or(0));
                    runs.push(RunSpec {
                        index: runs.len(),
                        variant: vi,
                        point: *p,
                        repetition: r,
                        seed: seed.derive(&label),
                    });
                }
            }
        }

        Ok(Plan {
            scenario,
            seed,
            duration,
            drain,
            repetitions,
            variants,
            points,
            fixed,
            runs,
        })
    }

    /// The virtual time at which every run stops.
    pub fn stop(&self) -> thinstream_base::Instant {
        thinstream_base::Instant::ZERO + self.duration + self.drain
    }

    /// The header printed before running: master seed, settings and the
    /// expanded run list (one seed explains a run).
    pub fn describe(&self) -> String {
        let s = &self.scenario;
        let mut out = String::new();
        let _ = writeln!(out, "scenario {} ({})", s.name, s.path.display());
        if !s.source.is_empty() {
            let _ = writeln!(out, "  source: {}", s.source);
        }
        let _ = writeln!(out, "master seed {}", self.seed.0);
        let _ = writeln!(
            out,
            "  messages generated for {}, runs stop at {} (drain {}), {} repetition(s)",
            self.duration,
            self.duration + self.drain,
            self.drain,
            self.repetitions
        );
        for (label, link) in s.links() {
            let _ = writeln!(out, "  link {label}: {}", netem_or_perfect(link));
        }
        for (i, f) in s.flows.iter().enumerate() {
            let _ = writeln!(
                out,
                "  flows[{i}]: {} x {}{}{}, peer {:?}{}",
                f.count,
                f.workload.describe(),
                if f.start.is_zero() {
                    String::new()
                } else {
                    format!(", start {}", f.start)
                },
                match &f.preset {
                    Some(p) => format!(", fixed preset {p}"),
                    None => String::new(),
                },
                f.peer_kind(),
                if f.is_measured() { ", measured" } else { "" }
            );
        }
        for v in &self.variants {
            let _ = write!(
                out,
                "  variant {}: {} {}",
                v.spec.name,
                v.transport.name(),
                v.spec.preset
            );
            if !v.spec.overrides.is_empty() {
                let _ = write!(
                    out,
                    " with {}",
                    serde_json::to_string(&v.spec.overrides).unwrap_or_default()
                );
            }
            if let Err(why) = &v.config {
                let _ = write!(out, " -- UNAVAILABLE: {why}");
            }
            out.push('\n');
        }
        if let Some(sw) = &s.sweep {
            let _ = writeln!(
                out,
                "  sweep {} over {} point(s): {}",
                sw.name(),
                self.points.len(),
                self.points
                    .iter()
                    .map(GridPoint::label)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let _ = writeln!(out, "{} run(s):", self.runs.len());
        for r in &self.runs {
            let _ = writeln!(
                out,
                "  run {:>4}: variant {}{}, repetition {}, seed {}",
                r.index,
                self.variants[r.variant].spec.name,
                match r.point {
                    Some(p) => format!(
                        ", {} {}",
                        s.sweep.as_ref().map_or(String::new(), |sw| sw.name()),
                        self.points[p].label()
                    ),
                    None => String::new(),
                },
                r.repetition,
                r.seed.0
            );
        }
        out
    }
}

fn netem_or_perfect(link: &thinstream_link::LinkConfig) -> String {
    let t = link.to_netem();
    if t.is_empty() {
        "perfect".into()
    } else {
        t
    }
}
