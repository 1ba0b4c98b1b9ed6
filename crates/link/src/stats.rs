//! Counters of what a link did.

use std::fmt;

/// Packets and payload bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counter {
    pub packets: u64,
    pub bytes: u64,
}

impl Counter {
    pub(crate) fn add(&mut self, bytes: usize) {
        self.packets += 1;
        self.bytes += bytes as u64;
    }

    /// Adds another counter (totals over several links).
    pub fn merge(&mut self, other: Counter) {
        self.packets += other.packets;
        self.bytes += other.bytes;
    }
}

/// Why a datagram was dropped. Listed in pipeline order: when several stages
/// would drop the same packet, the first one gets the blame.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum DropCause {
    /// Offered during an outage window.
    Outage,
    /// The caller's drop predicate said so.
    Predicate,
    /// The packet number is in `drop_packets`.
    Listed,
    /// A periodic drop (`drop_every`).
    Periodic,
    /// The loss trace has a 1 for this packet.
    Trace,
    /// The random loss model (Bernoulli or Gilbert-Elliott).
    LossModel,
    /// The bottleneck queue was full (tail drop).
    QueueOverflow,
}

impl DropCause {
    pub const ALL: [DropCause; 7] = [
        DropCause::Outage,
        DropCause::Predicate,
        DropCause::Listed,
        DropCause::Periodic,
        DropCause::Trace,
        DropCause::LossModel,
        DropCause::QueueOverflow,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DropCause::Outage => "outage",
            DropCause::Predicate => "predicate",
            DropCause::Listed => "listed",
            DropCause::Periodic => "periodic",
            DropCause::Trace => "trace",
            DropCause::LossModel => "loss-model",
            DropCause::QueueOverflow => "queue-overflow",
        }
    }
}

impl fmt::Display for DropCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What one direction of a link did so far. Bytes are payload bytes (the
/// UDP payload), without the bottleneck's overhead.
///
/// Balance: `offered + duplicated = delivered + dropped_total()`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[repr(C)] // the per-packet counters first, beside the link's hot fields
pub struct LinkStats {
    /// Datagrams handed to [`crate::Link::send`].
    pub offered: Counter,
    /// Copies handed back with an arrival time (duplicates included).
    pub delivered: Counter,
    /// Drops by cause; also readable through [`LinkStats::dropped`].
    pub drops: DropCounters,
    /// Extra copies made by duplication (each also counts in `delivered`
    /// or, if the queue refused it, in queue-overflow drops).
    pub duplicated: u64,
    /// Delivered copies with one bit flipped.
    pub corrupted: u64,
    /// Delivered copies that arrive before a copy handed over earlier
    /// (deliberate reordering, or jitter when it may reorder).
    pub reordered: u64,
}

impl LinkStats {
    /// Adds another link's counters (totals over several links).
    pub fn merge(&mut self, other: &LinkStats) {
        self.offered.merge(other.offered);
        self.delivered.merge(other.delivered);
        for c in DropCause::ALL {
            self.drops.get_mut(c).merge(*other.drops.get(c));
        }
        self.duplicated += other.duplicated;
        self.corrupted += other.corrupted;
        self.reordered += other.reordered;
    }

    /// Drops blamed on one cause.
    pub fn dropped(&self, cause: DropCause) -> Counter {
        *self.drops.get(cause)
    }

    /// All drops.
    pub fn dropped_total(&self) -> Counter {
        DropCause::ALL.iter().fold(Counter::default(), |a, c| {
            let c = self.dropped(*c);
            Counter {
                packets: a.packets + c.packets,
                bytes: a.bytes + c.bytes,
            }
        })
    }

    pub(crate) fn record_drop(&mut self, cause: DropCause, bytes: usize) {
        self.drops.get_mut(cause).add(bytes);
    }
}

impl fmt::Display for LinkStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "offered {} delivered {} duplicated {} corrupted {} reordered {} dropped {}",
            self.offered.packets,
            self.delivered.packets,
            self.duplicated,
            self.corrupted,
            self.reordered,
            self.dropped_total().packets
        )?;
        let causes: Vec<String> = DropCause::ALL
            .iter()
            .filter(|c| self.dropped(**c).packets > 0)
            .map(|c| format!("{}={}", c, self.dropped(*c).packets))
            .collect();
        if !causes.is_empty() {
            write!(f, " ({})", causes.join(", "))?;
        }
        Ok(())
    }
}

/// Drops, one counter per [`DropCause`].
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DropCounters {
    pub outage: Counter,
    pub predicate: Counter,
    pub listed: Counter,
    pub periodic: Counter,
    pub trace: Counter,
    pub loss_model: Counter,
    pub queue_overflow: Counter,
}

impl DropCounters {
    pub fn get(&self, cause: DropCause) -> &Counter {
        match cause {
            DropCause::Outage => &self.outage,
            DropCause::Predicate => &self.predicate,
            DropCause::Listed => &self.listed,
            DropCause::Periodic => &self.periodic,
            DropCause::Trace => &self.trace,
            DropCause::LossModel => &self.loss_model,
            DropCause::QueueOverflow => &self.queue_overflow,
        }
    }

    fn get_mut(&mut self, cause: DropCause) -> &mut Counter {
        match cause {
            DropCause::Outage => &mut self.outage,
            DropCause::Predicate => &mut self.predicate,
            DropCause::Listed => &mut self.listed,
            DropCause::Periodic => &mut self.periodic,
            DropCause::Trace => &mut self.trace,
            DropCause::LossModel => &mut self.loss_model,
            DropCause::QueueOverflow => &mut self.queue_overflow,
        }
    }
}
