//! The path of the slowest message: what happened to the message with the
//! largest latency of a run, read from its trace records (never written by
//! hand). The report states, for every variant, its maximum and the chain
//! of events that produced it, e.g. `new lost → timeout-rtx after 210 ms
//! (T3 expiry) lost → timeout-rtx after 420 ms (T3 expiry 2) arrived →
//! delivered at 680 ms`.
//!
//! How a copy's fate is decided: every transmission of one of the message's
//! units is a *copy*; every `Arrived` record of its units is matched to the
//! latest copy sent at least the flow's minimum one-way delay earlier
//! (exact on links with a fixed delay, as in the robustness cells; with
//! delay jitter a late copy may be credited to a later one). A copy no
//! arrival matches was lost. A copy sent after all its units had arrived is
//! marked `already there` (spurious). When the message arrived but was
//! handed to the application later, the message it waited for (in-order
//! delivery) is named with its own chain. A copy sent while a sender that
//! tracks the thin-stream verdict had classified the stream *not* thin is
//! marked `[not thin]`: its thin-stream mechanisms were off for it.

use serde::{Deserialize, Serialize};
use thinstream_base::trace::{Record, SentData, TxReason, Units};
use thinstream_base::{Duration, Instant};
use thinstream_metrics::{FlowAnalysis, LatencyKind, MessageOutcome, MessageTrail, SlowestTrail};

/// One transmission of the message's data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Copy {
    /// Milliseconds after the application sent the message.
    pub at_ms: f64,
    pub reason: String,
    /// `arrived`, `lost`, or `already there` (sent after every unit had arrived).
    pub fate: String,
    /// Milliseconds since the previous copy (or since the send for the
    /// first): for a timeout retransmission, how long the timer ran since
    /// the previous copy (the RTO in force may have changed meanwhile: a
    /// new RTT sample recomputes it and undoes a backoff, a running timer
    /// keeps its deadline).
    pub after_ms: f64,
    /// The sender's thin-stream verdict when the copy went out (the last
    /// `Thin` record at or before it; `null` if the sender does not track it).
    pub thin: Option<bool>,
}

/// What happened to one message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessagePath {
    pub message: u64,
    /// Simulated seconds at which the application sent it.
    pub sent_s: f64,
    /// The latency the scenario reports (`null` if the message never got there).
    pub latency_ms: Option<f64>,
    /// Milliseconds from the application's send to the first transmission.
    pub queued_ms: f64,
    pub copies: Vec<Copy>,
    /// Milliseconds after the send: all units arrived, delivered.
    pub arrived_ms: Option<f64>,
    pub delivered_ms: Option<f64>,
    /// The cause chain in words.
    pub chain: String,
}

/// The slowest message of a run (or of a variant / point, the slowest over
/// its runs) and, if it waited for an earlier message, that message's path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorstPath {
    /// Run index it comes from.
    pub run: usize,
    pub latency: String,
    #[serde(flatten)]
    pub path: MessagePath,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_by: Option<MessagePath>,
}

impl WorstPath {
    /// One line: the chain, and the blocking message's chain if any.
    pub fn text(&self) -> String {
        match &self.blocked_by {
            Some(b) => format!(
                "{}; it waited for message {} (sent {:.1} ms earlier): {}",
                self.path.chain,
                b.message,
                (self.path.sent_s - b.sent_s) * 1e3,
                b.chain
            ),
            None => self.path.chain.clone(),
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_millis_f64()
}

fn overlaps(a: Units, b: Units) -> bool {
    a.start < b.end && b.start < a.end
}

/// The path of the message with the largest `kind` latency of `flow`
/// (ties: the earliest), from the sender's and receiver's records.
pub fn slowest(
    flow: &FlowAnalysis,
    kind: LatencyKind,
    sender: &[Record],
    receiver: &[Record],
    run: usize,
) -> Option<WorstPath> {
    let (worst, latency) = flow.latencies(kind).into_iter().fold(
        None::<(&MessageOutcome, Duration)>,
        |best, (m, l)| match best {
            Some((_, b)) if b >= l => best,
            _ => Some((m, l)),
        },
    )?;
    // The path's minimum one-way delay, to match arrivals to copies.
    let owd = flow
        .messages()
        .iter()
        .filter_map(|m| Some(m.arrived?.saturating_duration_since(m.first_tx?)))
        .min()
        .unwrap_or(Duration::ZERO);
    let path = message_path(worst, Some(latency), owd, sender, receiver);
    // In-order delivery: the earlier message of the same stream that
    // arrived last before this one was delivered, if this one had arrived
    // earlier than it was delivered.
    let blocked_by = match (worst.arrived, worst.delivered) {
        (Some(a), Some(d)) if d > a && !worst.unordered => flow
            .messages()
            .iter()
            .take_while(|m| m.message != worst.message)
            .filter(|m| m.stream == worst.stream && !m.unordered)
            .filter(|m| m.arrived.is_some_and(|x| x > a && x <= d))
            .max_by_key(|m| m.arrived)
            .map(|m| message_path(m, flow.latency(m, kind), owd, sender, receiver)),
        _ => None,
    };
    Some(WorstPath {
        run,
        latency: kind.name().to_string(),
        path,
        blocked_by,
    })
}

/// The [`WorstPath`] of a streamed flow's slowest message: the path
/// [`slowest`] reads from the full records, read from the copies and
/// arrivals the streaming analysis kept for that message.
pub(crate) fn from_trail(t: &SlowestTrail, run: usize) -> WorstPath {
    let path = |m: &MessageTrail| {
        let mut sender = Vec::with_capacity(m.copies.len() * 2);
        for (time, units, reason, thin) in &m.copies {
            if t.thin_tracked {
                sender.push(Record::Thin {
                    time: *time,
                    thin: thin.unwrap_or(false),
                    packets_in_flight: 0,
                });
            }
            sender.push(Record::PacketSent {
                time: *time,
                wire_bytes: 0,
                data: thinstream_base::trace::pieces![SentData {
                    units: *units,
                    bytes: 0,
                    reason: *reason,
                }],
                control: 0,
            });
        }
        let receiver: Vec<Record> = m
            .arrivals
            .iter()
            .map(|(time, units)| Record::Arrived {
                time: *time,
                units: *units,
                bytes: 0,
                duplicate: false,
            })
            .collect();
        message_path(&m.outcome, m.latency, t.min_one_way, &sender, &receiver)
    };
    WorstPath {
        run,
        latency: t.kind.name().to_string(),
        path: path(&t.message),
        blocked_by: t.blocked_by.as_ref().map(path),
    }
}

fn message_path(
    m: &MessageOutcome,
    latency: Option<Duration>,
    owd: Duration,
    sender: &[Record],
    receiver: &[Record],
) -> MessagePath {
    let rel = |t: Instant| ms(t.saturating_duration_since(m.sent));
    // Copies of its units, in send order: (time, units, reason).
    let mut copies: Vec<(Instant, Units, TxReason)> = Vec::new();
    // Thin verdict changes, to tell whether the thin-stream mechanisms
    // were on when each copy went out.
    let mut verdicts: Vec<(Instant, bool)> = Vec::new();
    for r in sender {
        match r {
            Record::PacketSent { time, data, .. } => {
                for piece in data.iter().filter(|p| overlaps(p.units, m.units)) {
                    copies.push((*time, piece.units, piece.reason));
                }
            }
            Record::Thin { time, thin, .. } => verdicts.push((*time, *thin)),
            _ => {}
        }
    }
    let arrivals: Vec<(Instant, Units)> = receiver
        .iter()
        .filter_map(|r| match r {
            Record::Arrived { time, units, .. } if overlaps(*units, m.units) => {
                Some((*time, *units))
            }
            _ => None,
        })
        .collect();
    let mut arrived = vec![false; copies.len()];
    for (t, units) in &arrivals {
        let latest = copies
            .iter()
            .enumerate()
            .filter(|(i, (s, u, _))| {
                !arrived[*i] && overlaps(*u, *units) && *s + owd <= *t + Duration::from_micros(1)
            })
            .map(|(i, _)| i)
            .next_back();
        if let Some(i) = latest {
            arrived[i] = true;
        }
    }
    // When every unit of the message had arrived (first copies).
    let all_there = m.arrived;
    let mut out = Vec::with_capacity(copies.len());
    let mut prev = m.sent;
    for (i, (t, units, reason)) in copies.iter().enumerate() {
        let already = all_there.is_some_and(|a| a <= *t)
            || arrivals
                .iter()
                .any(|(at, u)| *at <= *t && u.start <= units.start && units.end <= u.end);
        let fate = if already {
            "already there"
        } else if arrived[i] {
            "arrived"
        } else {
            "lost"
        };
        out.push(Copy {
            at_ms: rel(*t),
            reason: reason.name().to_string(),
            fate: fate.to_string(),
            after_ms: ms(t.saturating_duration_since(prev)),
            thin: (!verdicts.is_empty()).then(|| {
                verdicts
                    .iter()
                    .take_while(|(vt, _)| vt <= t)
                    .last()
                    .is_some_and(|(_, v)| *v)
            }),
        });
        prev = *t;
    }
    let queued = m
        .first_tx
        .map_or(Duration::ZERO, |f| f.saturating_duration_since(m.sent));
    let chain = chain_text(&out, queued, m, rel);
    MessagePath {
        message: m.message,
        sent_s: m.sent.since_epoch().as_secs_f64(),
        latency_ms: latency.map(ms),
        queued_ms: ms(queued),
        copies: out,
        arrived_ms: m.arrived.map(rel),
        delivered_ms: m.delivered.map(rel),
        chain,
    }
}

/// `new lost → timeout-rtx after 210 ms (T3 expiry) arrived → delivered at 260 ms`.
fn chain_text(
    copies: &[Copy],
    queued: Duration,
    m: &MessageOutcome,
    rel: impl Fn(Instant) -> f64,
) -> String {
    let mut parts = Vec::new();
    if queued >= Duration::from_millis(1) {
        parts.push(format!("waited {:.0} ms in the send queue", ms(queued)));
    }
    // Copies that change nothing (spurious ones after arrival) are summed up.
    let mut after_arrival = 0usize;
    let mut timeouts = 0usize;
    for (i, c) in copies.iter().enumerate() {
        if c.fate == "already there" {
            after_arrival += 1;
            continue;
        }
        let mut s = if i == 0 {
            c.reason.to_string()
        } else {
            format!("{} after {:.0} ms", c.reason, c.after_ms)
        };
        if c.reason == TxReason::TimeoutRetransmit.name() {
            timeouts += 1;
            s.push_str(&if timeouts == 1 {
                " (T3 expiry)".to_string()
            } else {
                format!(" (T3 expiry {timeouts})")
            });
        }
        if c.thin == Some(false) {
            s.push_str(" [not thin]");
        }
        s.push(' ');
        s.push_str(&c.fate);
        parts.push(s);
    }
    if after_arrival > 0 {
        parts.push(format!("{after_arrival} more copies after it had arrived"));
    }
    match (m.arrived, m.delivered) {
        (Some(a), Some(d)) if d > a => parts.push(format!(
            "arrived at {:.0} ms, delivered at {:.0} ms (waited {:.0} ms for an earlier message)",
            rel(a),
            rel(d),
            ms(d - a)
        )),
        (_, Some(d)) => parts.push(format!("delivered at {:.0} ms", rel(d))),
        (Some(a), None) => parts.push(format!("arrived at {:.0} ms, never delivered", rel(a))),
        (None, None) => parts.push("never arrived".into()),
    }
    parts.join(" → ")
}
