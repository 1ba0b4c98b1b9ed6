//! netem-like text for links: [`LinkConfig::parse_netem`] and
//! [`LinkConfig::to_netem`].
//!
//! The words follow `tc qdisc ... netem` (iproute2 `tc-netem(8)`) where netem
//! has the feature, and add a few words of our own for what netem lacks:
//!
//! ```text
//! delay TIME [JITTER] [distribution uniform|normal] [jitter-reorders]
//! loss [random] PCT | loss gemodel P [R [1-H [1-K]]]
//! duplicate PCT        corrupt PCT
//! reorder PCT [gap N] [hold TIME]
//! rate RATE [PACKETOVERHEAD]   limit PACKETS   limit-bytes BYTES
//! drop-packets K1,K2,...       drop-every N [first K | random-phase | one-per-block]
//! loss-trace 0010... [repeat]  outage START DURATION
//! tick TIME            (arrivals rounded up to the emulator's clock tick)
//! ```
//!
//! Times need a unit (`50ms`, `200us`; tc reads a bare number as
//! microseconds, so a bare number is refused rather than guessed).
//! Percentages need a `%` sign (tc reads `0.05` as 0.05 %). `gemodel`
//! defaults follow `tc-netem(8)`: with only `p`, `r = 1 - p`, `1-h = 100%`,
//! `1-k = 0%` (which is Bernoulli loss with probability p); with `p r`,
//! `1-h = 100%`, `1-k = 0%` (Simple Gilbert).
//!
//! Differences from netem, on purpose:
//! - `limit` bounds the bottleneck queue in front of `rate` (a router's
//!   tail-drop queue, 002 §5.1.3), not netem's whole delay line; so `limit`
//!   without `rate` is refused.
//! - Jitter does not reorder unless `jitter-reorders` (or `reorder`) is given.
//! - Correlation values (`loss 5% 25%`), `loss state`, `slot`, `ecn`, and the
//!   `pareto` distributions are not implemented and are refused with a hint.

use crate::config::{
    Bottleneck, Jitter, JitterDistribution, LinkConfig, LossModel, LossTrace, Outage, PeriodicDrop,
    Reorder,
};
use crate::error::LinkConfigError;
use crate::units_serde::{
    bitrate_text, duration_text, parse_duration_with_unit, parse_probability, percent_text,
};
use thinstream_base::{Bitrate, Duration, Instant, Probability};

const KEYWORDS: &str = "delay, loss, duplicate, corrupt, reorder, gap, hold, rate, limit, \
                        limit-bytes, distribution, jitter-reorders, drop-packets, drop-every, \
                        loss-trace, outage or tick";

struct Words<'a> {
    words: Vec<&'a str>,
    /// Index of the next word to read.
    next: usize,
}

impl<'a> Words<'a> {
    fn new(text: &'a str) -> Self {
        Words {
            words: text.split_whitespace().collect(),
            next: 0,
        }
    }

    /// 1-based position of the word most recently read.
    fn position(&self) -> usize {
        self.next
    }

    fn peek(&self) -> Option<&'a str> {
        self.words.get(self.next).copied()
    }

    fn take(&mut self) -> Option<&'a str> {
        let w = self.peek()?;
        self.next += 1;
        Some(w)
    }

    fn syntax(&self, token: &str, expected: impl Into<String>) -> LinkConfigError {
        LinkConfigError::Syntax {
            position: self.position(),
            token: token.to_string(),
            expected: expected.into(),
        }
    }

    /// The next word, or an error saying what should have followed.
    fn expect(&mut self, expected: &str) -> Result<&'a str, LinkConfigError> {
        match self.take() {
            Some(w) => Ok(w),
            None => Err(LinkConfigError::Syntax {
                position: self.words.len() + 1,
                token: "<end of text>".to_string(),
                expected: expected.to_string(),
            }),
        }
    }

    fn duration(&mut self, what: &str) -> Result<Duration, LinkConfigError> {
        let w = self.expect(what)?;
        parse_duration_with_unit(w).map_err(|e| self.syntax(w, format!("{what} ({e})")))
    }

    fn percent(&mut self, what: &str) -> Result<Probability, LinkConfigError> {
        let w = self.expect(what)?;
        parse_probability(w, false).map_err(|e| self.syntax(w, format!("{what} ({e})")))
    }

    fn integer<T: std::str::FromStr>(&mut self, what: &str) -> Result<T, LinkConfigError> {
        let w = self.expect(what)?;
        w.parse::<T>().map_err(|_| self.syntax(w, what.to_string()))
    }

    /// True when the next word starts like a number (an optional argument).
    fn next_is_number(&self) -> bool {
        self.peek().is_some_and(|w| {
            let w = w.strip_prefix('-').unwrap_or(w);
            w.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        })
    }

    /// netem allows a correlation after most values; we do not model it.
    fn refuse_correlation(&mut self) -> Result<(), LinkConfigError> {
        if let Some(w) = self.peek() {
            if self.next_is_number() && w.ends_with('%') {
                self.take();
                let zero = parse_probability(w, false).is_ok_and(|p| p.get() == 0.0);
                if !zero {
                    return Err(LinkConfigError::Unsupported {
                        position: self.position(),
                        token: w.to_string(),
                        feature: "correlation",
                        hint: "use `loss gemodel` for bursty loss",
                    });
                }
            }
        }
        Ok(())
    }
}

fn once(
    seen: &mut Vec<&'static str>,
    key: &'static str,
    words: &Words<'_>,
    token: &str,
) -> Result<(), LinkConfigError> {
    if seen.contains(&key) {
        return Err(words.syntax(token, format!("`{key}` at most once")));
    }
    seen.push(key);
    Ok(())
}

impl LinkConfig {
    /// Reads netem-like text (see the module docs of `netem` for the words),
    /// e.g. `"delay 50ms 5ms loss 5% rate 10mbit limit 100"`,
    /// `"loss gemodel 1% 10% 70% 0.1%"`, `"duplicate 2% reorder 1% corrupt 0.1%"`.
    /// An empty text is a perfect link. The result is validated.
    pub fn parse_netem(text: &str) -> Result<LinkConfig, LinkConfigError> {
        let mut w = Words::new(text);
        let mut c = LinkConfig::default();
        let mut seen: Vec<&'static str> = Vec::new();
        let mut distribution: Option<(usize, JitterDistribution)> = None;
        let mut jitter_reorders: Option<usize> = None;
        let mut reorder_p: Option<Probability> = None;
        let mut gap: Option<(usize, u32)> = None;
        let mut hold: Option<(usize, Duration)> = None;
        let mut rate: Option<(Bitrate, i32)> = None;
        let mut limit_packets: Option<(usize, u32)> = None;
        let mut limit_bytes: Option<(usize, u64)> = None;

        while let Some(word) = w.take() {
            let key = word.to_ascii_lowercase();
            match key.as_str() {
                "delay" | "latency" => {
                    once(&mut seen, "delay", &w, word)?;
                    c.delay = w.duration("a delay such as 50ms")?;
                    if w.next_is_number() && !w.peek().is_some_and(|t| t.ends_with('%')) {
                        let spread = w.duration("a jitter such as 5ms")?;
                        c.jitter = Some(Jitter {
                            spread,
                            distribution: JitterDistribution::Uniform,
                            allow_reordering: false,
                        });
                    }
                    w.refuse_correlation()?;
                }
                "distribution" => {
                    once(&mut seen, "distribution", &w, word)?;
                    let name = w.expect("a distribution name (uniform or normal)")?;
                    let d = match name.to_ascii_lowercase().as_str() {
                        "uniform" => JitterDistribution::Uniform,
                        "normal" => JitterDistribution::Normal,
                        "pareto" | "paretonormal" | "experimental" => {
                            return Err(LinkConfigError::Unsupported {
                                position: w.position(),
                                token: name.to_string(),
                                feature: "this delay distribution",
                                hint: "use uniform or normal",
                            })
                        }
                        _ => return Err(w.syntax(name, "uniform or normal")),
                    };
                    distribution = Some((w.position(), d));
                }
                "tick" => {
                    once(&mut seen, "tick", &w, word)?;
                    c.tick = Some(w.duration("a clock tick such as 1ms")?);
                }
                "jitter-reorders" => {
                    once(&mut seen, "jitter-reorders", &w, word)?;
                    jitter_reorders = Some(w.position());
                }
                "loss" => {
                    once(&mut seen, "loss", &w, word)?;
                    let model_word = w.peek().map(str::to_ascii_lowercase);
                    match model_word.as_deref() {
                        Some("random") => {
                            w.take();
                            c.loss = Some(LossModel::Bernoulli {
                                p: w.percent("a loss percentage such as 5%")?,
                            });
                            w.refuse_correlation()?;
                        }
                        Some("gemodel") => {
                            w.take();
                            let p = w.percent("the good-to-bad probability p, e.g. 1%")?;
                            let mut r = Probability::new(1.0 - p.get()).unwrap_or(Probability::ONE);
                            let mut bad = Probability::ONE;
                            let mut good = Probability::ZERO;
                            if w.next_is_number() {
                                r = w.percent("the bad-to-good probability r, e.g. 10%")?;
                                if w.next_is_number() {
                                    bad = w.percent("the loss probability in bad, 1-h, e.g. 70%")?;
                                    if w.next_is_number() {
                                        good = w.percent("the loss probability in good, 1-k, e.g. 0.1%")?;
                                    }
                                }
                            }
                            c.loss = Some(LossModel::GilbertElliott {
                                p,
                                r,
                                loss_in_bad: bad,
                                loss_in_good: good,
                            });
                        }
                        Some("state") => {
                            return Err(LinkConfigError::Unsupported {
                                position: w.position() + 1,
                                token: "state".to_string(),
                                feature: "the 4-state Markov loss model",
                                hint: "use `loss gemodel p r 1-h 1-k`",
                            })
                        }
                        _ => {
                            c.loss = Some(LossModel::Bernoulli {
                                p: w.percent("a loss percentage such as 5%, or `gemodel`")?,
                            });
                            w.refuse_correlation()?;
                        }
                    }
                }
                "duplicate" => {
                    once(&mut seen, "duplicate", &w, word)?;
                    c.duplicate = Some(w.percent("a duplication percentage such as 1%")?);
                    w.refuse_correlation()?;
                }
                "corrupt" => {
                    once(&mut seen, "corrupt", &w, word)?;
                    c.corrupt = Some(w.percent("a corruption percentage such as 0.1%")?);
                    w.refuse_correlation()?;
                }
                "reorder" => {
                    once(&mut seen, "reorder", &w, word)?;
                    reorder_p = Some(w.percent("a reordering percentage such as 1%")?);
                    w.refuse_correlation()?;
                }
                "gap" => {
                    once(&mut seen, "gap", &w, word)?;
                    gap = Some((w.position(), w.integer("a packet count of at least 1 for gap")?));
                }
                "hold" => {
                    once(&mut seen, "hold", &w, word)?;
                    hold = Some((w.position(), w.duration("a hold time such as 20ms")?));
                }
                "rate" => {
                    once(&mut seen, "rate", &w, word)?;
                    let t = w.expect("a rate such as 10mbit")?;
                    let r = Bitrate::parse(t).map_err(|e| w.syntax(t, e.to_string()))?;
                    let mut overhead = 0;
                    if w.next_is_number() {
                        overhead = w.integer("a packet overhead in bytes (may be negative)")?;
                        if w.next_is_number() {
                            let cell_word = w.peek().unwrap_or_default();
                            let cell: u32 = w.integer("a cell size in bytes")?;
                            if cell != 0 {
                                return Err(LinkConfigError::Unsupported {
                                    position: w.position(),
                                    token: cell_word.to_string(),
                                    feature: "cell-based rate accounting",
                                    hint: "give only `rate RATE [PACKETOVERHEAD]`",
                                });
                            }
                            if w.next_is_number() {
                                let _cell_overhead: i32 = w.integer("a cell overhead in bytes")?;
                            }
                        }
                    }
                    rate = Some((r, overhead));
                }
                "limit" => {
                    once(&mut seen, "limit", &w, word)?;
                    limit_packets = Some((w.position(), w.integer("a queue length in packets")?));
                }
                "limit-bytes" => {
                    once(&mut seen, "limit-bytes", &w, word)?;
                    limit_bytes = Some((w.position(), w.integer("a queue length in bytes")?));
                }
                "drop-packets" => {
                    once(&mut seen, "drop-packets", &w, word)?;
                    let t = w.expect("a comma-separated list of packet numbers such as 3,7,12")?;
                    let mut list = Vec::new();
                    for part in t.split(',').filter(|p| !p.is_empty()) {
                        let k: u64 = part
                            .parse()
                            .map_err(|_| w.syntax(t, "packet numbers (from 1) separated by commas, e.g. 3,7,12"))?;
                        list.push(k);
                    }
                    c.drop_packets = list;
                }
                "drop-every" => {
                    once(&mut seen, "drop-every", &w, word)?;
                    let every: u64 = w.integer("a packet interval such as 20")?;
                    let form = w.peek().map(str::to_ascii_lowercase);
                    c.drop_every = Some(match form.as_deref() {
                        Some("first") => {
                            w.take();
                            let first = w.integer("the number (from 1) of the first dropped packet")?;
                            PeriodicDrop::Fixed { every, first }
                        }
                        Some("random-phase") => {
                            w.take();
                            PeriodicDrop::RandomPhase { every }
                        }
                        Some("one-per-block") => {
                            w.take();
                            PeriodicDrop::OnePerBlock { every }
                        }
                        _ => PeriodicDrop::Fixed { every, first: every },
                    });
                }
                "loss-trace" => {
                    once(&mut seen, "loss-trace", &w, word)?;
                    let t = w.expect("a pattern of 0 and 1 such as 0001001")?;
                    let repeat = w.peek().is_some_and(|n| n.eq_ignore_ascii_case("repeat"));
                    if repeat {
                        w.take();
                    }
                    let trace = LossTrace::parse(t, repeat).map_err(|e| w.syntax(t, e.to_string()))?;
                    c.loss_trace = Some(trace);
                }
                "outage" => {
                    let start = w.duration("an outage start time such as 2s")?;
                    let duration = w.duration("an outage length such as 500ms")?;
                    c.outages.push(Outage {
                        start: Instant::from_nanos(start.as_nanos()),
                        duration,
                    });
                }
                "slot" | "ecn" | "seed" => {
                    return Err(LinkConfigError::Unsupported {
                        position: w.position(),
                        token: word.to_string(),
                        feature: "this netem option",
                        hint: "the link model is seeded by the run's seed; slots and ECN marking are not modelled",
                    })
                }
                _ => return Err(w.syntax(word, format!("one of the keywords {KEYWORDS}"))),
            }
        }

        // Options that qualify another option: refuse them on their own.
        match (&mut c.jitter, distribution) {
            (Some(j), Some((_, d))) => j.distribution = d,
            (None, Some((pos, _))) => {
                return Err(LinkConfigError::Syntax {
                    position: pos,
                    token: "distribution".to_string(),
                    expected: "a jitter first (`delay 50ms 5ms distribution normal`)".to_string(),
                })
            }
            _ => {}
        }
        match (&mut c.jitter, jitter_reorders) {
            (Some(j), Some(_)) => j.allow_reordering = true,
            (None, Some(pos)) => {
                return Err(LinkConfigError::Syntax {
                    position: pos,
                    token: "jitter-reorders".to_string(),
                    expected: "a jitter first (`delay 50ms 5ms jitter-reorders`)".to_string(),
                })
            }
            _ => {}
        }
        match reorder_p {
            Some(probability) => {
                c.reorder = Some(Reorder {
                    probability,
                    gap: gap.map_or(1, |g| g.1),
                    hold: hold.map(|h| h.1),
                });
            }
            None => {
                if let Some((pos, _)) = gap {
                    return Err(LinkConfigError::Syntax {
                        position: pos,
                        token: "gap".to_string(),
                        expected: "`reorder PCT` together with `gap`".to_string(),
                    });
                }
                if let Some((pos, _)) = hold {
                    return Err(LinkConfigError::Syntax {
                        position: pos,
                        token: "hold".to_string(),
                        expected: "`reorder PCT` together with `hold`".to_string(),
                    });
                }
            }
        }
        match rate {
            Some((rate, overhead_bytes)) => {
                c.bottleneck = Some(Bottleneck {
                    rate,
                    overhead_bytes,
                    limit_packets: limit_packets.map(|l| l.1),
                    limit_bytes: limit_bytes.map(|l| l.1),
                });
            }
            None => {
                let limit = limit_packets
                    .map(|(pos, _)| (pos, "limit"))
                    .or(limit_bytes.map(|(pos, _)| (pos, "limit-bytes")));
                if let Some((pos, token)) = limit {
                    return Err(LinkConfigError::Syntax {
                        position: pos,
                        token: token.to_string(),
                        expected: "a `rate` too: the limit bounds the bottleneck queue in front \
                                   of the rate limit (netem's delay-line limit is not modelled)"
                            .to_string(),
                    });
                }
            }
        }
        c.validate()?;
        Ok(c)
    }

    /// The netem-like text of this config; [`LinkConfig::parse_netem`] reads
    /// it back to an equal config. Used to print a run's parameters.
    pub fn to_netem(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if !self.delay.is_zero() || self.jitter.is_some() {
            let mut s = format!("delay {}", duration_text(self.delay));
            if let Some(j) = &self.jitter {
                s += &format!(" {}", duration_text(j.spread));
                if j.distribution == JitterDistribution::Normal {
                    s += " distribution normal";
                }
                if j.allow_reordering {
                    s += " jitter-reorders";
                }
            }
            parts.push(s);
        }
        match &self.loss {
            Some(LossModel::Bernoulli { p }) => parts.push(format!("loss {}", percent_text(*p))),
            Some(LossModel::GilbertElliott {
                p,
                r,
                loss_in_bad,
                loss_in_good,
            }) => parts.push(format!(
                "loss gemodel {} {} {} {}",
                percent_text(*p),
                percent_text(*r),
                percent_text(*loss_in_bad),
                percent_text(*loss_in_good)
            )),
            None => {}
        }
        if let Some(r) = &self.reorder {
            let mut s = format!("reorder {} gap {}", percent_text(r.probability), r.gap);
            if let Some(h) = r.hold {
                s += &format!(" hold {}", duration_text(h));
            }
            parts.push(s);
        }
        if let Some(p) = self.duplicate {
            parts.push(format!("duplicate {}", percent_text(p)));
        }
        if let Some(p) = self.corrupt {
            parts.push(format!("corrupt {}", percent_text(p)));
        }
        if let Some(b) = &self.bottleneck {
            let mut s = format!("rate {}", bitrate_text(b.rate));
            if b.overhead_bytes != 0 {
                s += &format!(" {}", b.overhead_bytes);
            }
            if let Some(l) = b.limit_packets {
                s += &format!(" limit {l}");
            }
            if let Some(l) = b.limit_bytes {
                s += &format!(" limit-bytes {l}");
            }
            parts.push(s);
        }
        if !self.drop_packets.is_empty() {
            let list: Vec<String> = self.drop_packets.iter().map(u64::to_string).collect();
            parts.push(format!("drop-packets {}", list.join(",")));
        }
        match &self.drop_every {
            Some(PeriodicDrop::Fixed { every, first }) => {
                parts.push(format!("drop-every {every} first {first}"))
            }
            Some(PeriodicDrop::RandomPhase { every }) => {
                parts.push(format!("drop-every {every} random-phase"))
            }
            Some(PeriodicDrop::OnePerBlock { every }) => {
                parts.push(format!("drop-every {every} one-per-block"))
            }
            None => {}
        }
        if let Some(t) = &self.loss_trace {
            parts.push(format!(
                "loss-trace {}{}",
                t.pattern,
                if t.repeat { " repeat" } else { "" }
            ));
        }
        for o in &self.outages {
            parts.push(format!(
                "outage {} {}",
                duration_text(o.start.since_epoch()),
                duration_text(o.duration)
            ));
        }
        if let Some(t) = self.tick {
            parts.push(format!("tick {}", duration_text(t)));
        }
        parts.join(" ")
    }
}
