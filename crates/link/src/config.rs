//! What a link does, as data: [`LinkConfig`] and its parts.
//!
//! A config is plain data (TOML in scenario files, or netem-like text through
//! [`LinkConfig::parse_netem`]). It says nothing about random state; a
//! [`crate::Link`] is built from a config and a seed.

use crate::error::LinkConfigError;
use crate::units_serde;
use serde::{Deserialize, Serialize};
use thinstream_base::{Bitrate, Duration, Instant, Probability};

/// One direction of a link, as data. Every part is optional; the default is
/// a perfect link (no delay, no loss, infinite rate).
///
/// Pipeline order (see the crate docs): outage, drop predicate, listed drops,
/// periodic drops, loss trace, loss model, duplication, bottleneck queue,
/// corruption, propagation delay with jitter and reordering.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkConfig {
    /// Fixed propagation delay, added after the bottleneck queue.
    #[serde(with = "units_serde::duration")]
    pub delay: Duration,
    /// Random variation of the propagation delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Jitter>,
    /// The emulator's clock tick: every arrival is rounded up to the next
    /// multiple of it (a timer-driven emulator such as dummynet moves
    /// packets only on its kernel's clock ticks, 1 ms at `HZ = 1000`).
    /// `None`: a perfectly precise emulator.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "units_serde::opt_duration"
    )]
    pub tick: Option<Duration>,
    /// Deliberate reordering (netem `reorder`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder: Option<Reorder>,
    /// Random loss model (Bernoulli or Gilbert-Elliott).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossModel>,
    /// Drop exactly these packets of this direction, numbered from 1 in the
    /// order they are offered to the link.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drop_packets: Vec<u64>,
    /// Drop packets at regular intervals ("uniform loss", 002 §5.1.2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drop_every: Option<PeriodicDrop>,
    /// Trace-driven loss: one 0/1 per offered packet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_trace: Option<LossTrace>,
    /// Time windows during which every offered packet is dropped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outages: Vec<Outage>,
    /// Rate limit with a drop-tail queue (the bottleneck router).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<Bottleneck>,
    /// Probability that a surviving packet is sent twice.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "units_serde::opt_probability"
    )]
    pub duplicate: Option<Probability>,
    /// Probability that a delivered copy has one random payload bit flipped.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "units_serde::opt_probability"
    )]
    pub corrupt: Option<Probability>,
}

/// Random variation of the propagation delay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Jitter {
    /// Uniform: the offset is drawn from `[-spread, +spread]`. Normal: the
    /// standard deviation. (Both as in netem `delay D J [distribution normal]`.)
    #[serde(with = "units_serde::duration")]
    pub spread: Duration,
    #[serde(default)]
    pub distribution: JitterDistribution,
    /// `false` (default): a packet never arrives before a packet sent earlier
    /// on this link; its arrival is clamped to the previous arrival. `true`:
    /// jitter may reorder packets, as netem does by default.
    #[serde(default)]
    pub allow_reordering: bool,
}

/// Shape of the jitter distribution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JitterDistribution {
    /// Uniform in `[-spread, +spread]` (netem's default).
    #[default]
    Uniform,
    /// Normal with standard deviation `spread` (netem `distribution normal`).
    Normal,
}

/// Deliberate reordering, after netem `reorder P% [gap G]`.
///
/// A packet is a *candidate* once at least `gap - 1` packets have gone through
/// the delay line normally since the last reordered one (with `gap = 1`
/// every packet is a candidate). A candidate is reordered with probability
/// `probability`. A reordered packet either skips the propagation delay and
/// jitter (`hold = None`, netem's behaviour: it overtakes everything sent in
/// the last `delay`), or is held back `hold` beyond its normal arrival so
/// that later packets overtake it (`hold = Some(..)`, an extension).
/// Without a delay or jitter there is nothing to skip, so the immediate form
/// changes nothing on such a link; use `hold` there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reorder {
    #[serde(with = "units_serde::probability")]
    pub probability: Probability,
    #[serde(default = "one")]
    pub gap: u32,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "units_serde::opt_duration"
    )]
    pub hold: Option<Duration>,
}

fn one() -> u32 {
    1
}

/// Random loss models.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LossModel {
    /// Each packet is lost independently with probability `p`.
    Bernoulli {
        #[serde(with = "units_serde::probability")]
        p: Probability,
    },
    /// Two-state Markov chain, netem `loss gemodel p r 1-h 1-k`.
    ///
    /// The chain starts in Good. The state *before* a packet decides its
    /// fate: in Good it is lost with `loss_in_good` (netem `1-k`), in Bad with
    /// `loss_in_bad` (netem `1-h`). After each packet the chain moves Good→Bad
    /// with probability `p` and Bad→Good with probability `r`. Stationary
    /// P(Bad) = p / (p + r); mean loss = P(Good)·loss_in_good + P(Bad)·loss_in_bad;
    /// with loss_in_bad = 1 and loss_in_good = 0 (Simple Gilbert) the mean
    /// loss burst is 1/r packets.
    GilbertElliott {
        #[serde(with = "units_serde::probability")]
        p: Probability,
        #[serde(with = "units_serde::probability")]
        r: Probability,
        #[serde(with = "units_serde::probability")]
        loss_in_bad: Probability,
        #[serde(with = "units_serde::probability")]
        loss_in_good: Probability,
    },
}

impl LossModel {
    /// Long-run fraction of packets lost.
    pub fn mean_loss(&self) -> f64 {
        match self {
            LossModel::Bernoulli { p } => p.get(),
            LossModel::GilbertElliott {
                p,
                r,
                loss_in_bad,
                loss_in_good,
            } => {
                let (p, r) = (p.get(), r.get());
                if p + r == 0.0 {
                    // Never leaves Good.
                    return loss_in_good.get();
                }
                let bad = p / (p + r);
                bad * loss_in_bad.get() + (1.0 - bad) * loss_in_good.get()
            }
        }
    }
}

/// Drops at regular intervals of the offered-packet number (numbered from 1).
///
/// 002 §5.1.2 reports that netem loss gave "a predictable loss rate with
/// packet losses occurring at regular intervals"; these forms produce exactly
/// that, with or without randomness in where the losses fall.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "form", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PeriodicDrop {
    /// Drop packets `first`, `first + every`, `first + 2·every`, ...
    Fixed { every: u64, first: u64 },
    /// As `Fixed`, with `first` drawn uniformly from `1..=every` by the seed.
    RandomPhase { every: u64 },
    /// Exactly one drop in each block of `every` packets (1..=every,
    /// every+1..=2·every, ...), at a uniformly random position in the block:
    /// the loss rate is exactly 1/every, the spacing varies.
    OnePerBlock { every: u64 },
}

impl PeriodicDrop {
    pub fn every(&self) -> u64 {
        match *self {
            PeriodicDrop::Fixed { every, .. }
            | PeriodicDrop::RandomPhase { every }
            | PeriodicDrop::OnePerBlock { every } => every,
        }
    }
}

/// Trace-driven loss: character `i` of `pattern` (`'1'` = drop) decides the
/// fate of offered packet `i + 1`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossTrace {
    /// Only `'0'` and `'1'`; see [`LossTrace::parse`] for the accepted input.
    pub pattern: String,
    /// Start over at the end of the pattern (`true`) or stop dropping (`false`).
    #[serde(default)]
    pub repeat: bool,
}

impl LossTrace {
    /// Reads a loss trace from text (a string or a file's contents): the
    /// characters `0` and `1`; whitespace and commas are ignored, and `#`
    /// starts a comment that runs to the end of the line.
    pub fn parse(text: &str, repeat: bool) -> Result<LossTrace, LinkConfigError> {
        let mut pattern = String::new();
        for (line_no, line) in text.lines().enumerate() {
            let content = line.split('#').next().unwrap_or("");
            for c in content.chars() {
                match c {
                    '0' | '1' => pattern.push(c),
                    c if c.is_whitespace() || c == ',' => {}
                    other => {
                        return Err(LinkConfigError::invalid(
                            "loss_trace",
                            format!(
                                "line {}: unexpected character {other:?}; a loss trace is \
                                 made of 0 (deliver) and 1 (drop)",
                                line_no + 1
                            ),
                        ))
                    }
                }
            }
        }
        let trace = LossTrace { pattern, repeat };
        trace.validate()?;
        Ok(trace)
    }

    fn validate(&self) -> Result<(), LinkConfigError> {
        if self.pattern.is_empty() {
            return Err(LinkConfigError::invalid(
                "loss_trace",
                "the pattern is empty",
            ));
        }
        if let Some(c) = self.pattern.chars().find(|c| *c != '0' && *c != '1') {
            return Err(LinkConfigError::invalid(
                "loss_trace",
                format!("pattern contains {c:?}; only 0 and 1 are allowed"),
            ));
        }
        Ok(())
    }
}

/// A window `[start, start + duration)` during which everything is dropped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outage {
    #[serde(with = "units_serde::instant")]
    pub start: Instant,
    #[serde(with = "units_serde::duration")]
    pub duration: Duration,
}

impl Outage {
    pub fn contains(&self, t: Instant) -> bool {
        t >= self.start && t < self.start.saturating_add(self.duration)
    }
}

/// The bottleneck router: a rate limit with a drop-tail FIFO in front of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bottleneck {
    #[serde(with = "units_serde::bitrate")]
    pub rate: Bitrate,
    /// Bytes added to each datagram's payload length when computing its
    /// serialisation time and queue footprint (netem `rate R packetoverhead`).
    /// A datagram's payload is the UDP payload, so 28 models IPv4 + UDP
    /// headers; may be negative, the size is floored at zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overhead_bytes: i32,
    /// Most packets that may wait (not counting the one being serialised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_packets: Option<u32>,
    /// Most bytes (with overhead) that may wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

impl Bottleneck {
    /// Size on the wire of a datagram with `payload_len` bytes of payload.
    pub fn wire_bytes(&self, payload_len: usize) -> usize {
        let size = payload_len as i64 + i64::from(self.overhead_bytes);
        usize::try_from(size.max(0)).unwrap_or(usize::MAX)
    }
}

impl LinkConfig {
    /// A perfect link: no delay, no loss, no rate limit.
    pub fn perfect() -> LinkConfig {
        LinkConfig::default()
    }

    /// Checks every value that the types alone cannot rule out. Called by
    /// [`LinkConfig::parse_netem`] and [`crate::Link::try_new`]; call it
    /// after deserialising a config from a file.
    pub fn validate(&self) -> Result<(), LinkConfigError> {
        if self.tick.is_some_and(|t| t.is_zero()) {
            return Err(LinkConfigError::invalid("tick", "must be positive"));
        }
        if let Some(r) = &self.reorder {
            if r.gap == 0 {
                return Err(LinkConfigError::invalid(
                    "reorder.gap",
                    "must be at least 1",
                ));
            }
            // Immediate reordering on a link without delay or jitter has
            // nothing to skip and changes nothing (tc refuses it); it is
            // accepted so that netem text like "duplicate 2% reorder 1%"
            // reads, and the crate docs say so.
            if r.hold.is_some_and(|h| h.is_zero()) {
                return Err(LinkConfigError::invalid("reorder.hold", "must be positive"));
            }
        }
        if let Some(k) = self.drop_packets.iter().find(|k| **k == 0) {
            return Err(LinkConfigError::invalid(
                "drop_packets",
                format!("packet number {k}: packets are numbered from 1"),
            ));
        }
        if let Some(d) = &self.drop_every {
            if d.every() == 0 {
                return Err(LinkConfigError::invalid(
                    "drop_every.every",
                    "must be at least 1",
                ));
            }
            if let PeriodicDrop::Fixed { first: 0, .. } = d {
                return Err(LinkConfigError::invalid(
                    "drop_every.first",
                    "packets are numbered from 1",
                ));
            }
        }
        if let Some(t) = &self.loss_trace {
            t.validate()?;
        }
        if let Some(b) = &self.bottleneck {
            if b.rate.bits_per_sec() == 0 {
                return Err(LinkConfigError::invalid(
                    "bottleneck.rate",
                    "must be at least 1 bit/s",
                ));
            }
        }
        Ok(())
    }

    /// Named configurations, each traceable to a document's setup (or plain).
    /// Returns `None` for an unknown name; [`PRESET_NAMES`] lists them.
    pub fn preset(name: &str) -> Option<LinkConfig> {
        let text = PRESETS.iter().find(|(n, _, _)| *n == name)?.1;
        // The table is checked by a test, so this parse cannot fail.
        Some(LinkConfig::parse_netem(text).expect("preset table entry is valid netem text"))
    }
}

/// Names accepted by [`LinkConfig::preset`].
pub const PRESET_NAMES: &[&str] = &[
    "perfect",
    "bernoulli-1pct",
    "bernoulli-2pct",
    "bernoulli-5pct",
    "bernoulli-10pct",
    "periodic-1pct",
    "periodic-2pct",
    "periodic-5pct",
    "periodic-10pct",
    "cross-traffic-bottleneck",
    "nistnet-10ms-1pct",
];

/// (name, netem text, where it comes from).
pub(crate) const PRESETS: &[(&str, &str, &str)] = &[
    ("perfect", "", "no impairment"),
    ("bernoulli-1pct", "loss 1%", "independent random loss"),
    ("bernoulli-2pct", "loss 2%", "independent random loss"),
    ("bernoulli-5pct", "loss 5%", "independent random loss"),
    ("bernoulli-10pct", "loss 10%", "independent random loss"),
    (
        "periodic-1pct",
        "drop-every 100",
        "002 §5.1.2 losses at regular intervals",
    ),
    (
        "periodic-2pct",
        "drop-every 50",
        "002 §5.1.2 losses at regular intervals",
    ),
    (
        "periodic-5pct",
        "drop-every 20",
        "002 §5.1.2 losses at regular intervals",
    ),
    (
        "periodic-10pct",
        "drop-every 10",
        "002 §5.1.2 losses at regular intervals",
    ),
    (
        "cross-traffic-bottleneck",
        "rate 10mbit limit 100",
        "002 §5.1.3: 10 Mbit/s HTB bottleneck, tail-drop queue of 100 packets",
    ),
    (
        "nistnet-10ms-1pct",
        "delay 10ms loss 1%",
        "001 §IV.A: NIST Net, 10 ms each direction, random drops",
    ),
];
