//! [`Link`]: one direction of a link, the stages chained in pipeline order.

use crate::config::LinkConfig;
use crate::error::LinkConfigError;
use crate::stage::delay::{DelayLine, Passage};
use crate::stage::labels;
use crate::stage::loss::LossProcess;
use crate::stage::mangle::{Corrupter, Duplicator};
use crate::stage::queue::BottleneckQueue;
use crate::stage::schedule::{in_outage, ListedDrops, PeriodicDrops, TraceDrops};
use crate::stats::{DropCause, LinkStats};
use std::fmt;
use thinstream_base::Duration;
use thinstream_base::{Datagram, Instant, Seed};

/// A caller-supplied drop rule: `true` drops the datagram. Lets the simulator
/// drop, say, "the packet carrying DATA TSN t" without this crate knowing SCTP.
pub type DropPredicate = Box<dyn FnMut(&Datagram) -> bool + Send>;

/// What happened to one offered datagram (for traces and pcap notes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendReport {
    /// Why the original copy was dropped, if it was.
    pub dropped: Option<DropCause>,
    /// Copies handed back (0, 1 or 2).
    pub delivered: u8,
    /// Whether a duplicate was made.
    pub duplicated: bool,
    /// Delivered copies with a flipped bit.
    pub corrupted: u8,
}

/// What [`Link::admit`] decided for one offered datagram.
#[derive(Debug)]
pub struct Admission {
    /// What happened, as [`Link::send_report`] says it.
    pub report: SendReport,
    /// When the offered datagram arrives, if it passes.
    pub arrival: Option<Instant>,
    /// A duplicate that passes, with its arrival.
    pub duplicate: Option<(Instant, Datagram)>,
}

/// One direction of a link, built from a [`LinkConfig`] and a seed.
///
/// Pipeline (a bottleneck router followed by a propagation path):
/// 1. drop decisions, each stage consulted for every offered packet, blame
///    going to the first in this order: outage, predicate, listed, periodic,
///    trace, loss model (netem also applies loss before any queue);
/// 2. duplication of a survivor (the copy follows the original);
/// 3. the bottleneck: drop-tail queue and serialisation at the rate;
/// 4. corruption of a copy that the queue accepted;
///
/// Layout: what every packet touches comes first (`repr(C)` keeps the
/// order), and the stages most links lack live behind one pointer, so a
/// simulation with thousands of links pulls a few cache lines per packet
/// and link rather than the whole kilobyte the stages and the config take.
#[repr(C)]
pub struct Link {
    /// Number of the last offered packet (packets are numbered from 1).
    offered: u64,
    last_now: Instant,
    /// Latest arrival handed out so far, to count reordering (zero before
    /// the first: no arrival is earlier).
    latest_arrival: Instant,
    /// Stages present on few links; `None` when none of them is.
    rare: Option<Box<RareStages>>,
    loss: Option<Box<LossProcess>>,
    queue: Option<Box<BottleneckQueue>>,
    delay: DelayLine,
    /// `config.tick`, kept here: the boxed config is a cache line of its
    /// own that a packet would otherwise read only for this.
    tick: Option<Duration>,
    stats: LinkStats,
    config: Box<LinkConfig>,
}

/// The stages most links do not have.
struct RareStages {
    outages: Vec<crate::config::Outage>,
    predicate: Option<DropPredicate>,
    listed: ListedDrops,
    periodic: Option<PeriodicDrops>,
    trace: Option<TraceDrops>,
    duplicator: Option<Duplicator>,
    corrupter: Option<Corrupter>,
}

impl RareStages {
    fn is_empty(&self) -> bool {
        self.outages.is_empty()
            && self.predicate.is_none()
            && self.listed.is_empty()
            && self.periodic.is_none()
            && self.trace.is_none()
            && self.duplicator.is_none()
            && self.corrupter.is_none()
    }

    fn none() -> RareStages {
        RareStages {
            outages: Vec::new(),
            predicate: None,
            listed: ListedDrops::new(&[]),
            periodic: None,
            trace: None,
            duplicator: None,
            corrupter: None,
        }
    }
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field("offered", &self.offered)
            .field(
                "has_predicate",
                &self.rare.as_ref().is_some_and(|r| r.predicate.is_some()),
            )
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Link {
    /// Builds a link. Each stage draws from `seed.derive(label)` with the
    /// labels in [`crate::stage::labels`].
    ///
    /// # Panics
    /// If `config.validate()` fails. Configs from [`LinkConfig::parse_netem`]
    /// are already valid; for configs read from files use [`Link::try_new`].
    pub fn new(config: &LinkConfig, seed: Seed) -> Link {
        match Link::try_new(config, seed) {
            Ok(link) => link,
            Err(e) => panic!("invalid link config: {e}"),
        }
    }

    /// Builds a link, refusing an invalid config.
    pub fn try_new(config: &LinkConfig, seed: Seed) -> Result<Link, LinkConfigError> {
        config.validate()?;
        let rng = |label: &str| seed.derive(label).rng();
        let rare = RareStages {
            outages: config.outages.clone(),
            predicate: None,
            listed: ListedDrops::new(&config.drop_packets),
            periodic: config
                .drop_every
                .as_ref()
                .map(|d| PeriodicDrops::new(d, rng(labels::PERIODIC))),
            trace: config.loss_trace.as_ref().map(TraceDrops::new),
            duplicator: config
                .duplicate
                .map(|p| Duplicator::new(p, rng(labels::DUPLICATE))),
            corrupter: config
                .corrupt
                .map(|p| Corrupter::new(p, rng(labels::CORRUPT))),
        };
        Ok(Link {
            tick: config.tick,
            config: Box::new(config.clone()),
            rare: (!rare.is_empty()).then(|| Box::new(rare)),
            loss: config
                .loss
                .as_ref()
                .map(|m| Box::new(LossProcess::new(m.clone(), rng(labels::LOSS)))),
            queue: config
                .bottleneck
                .as_ref()
                .map(|b| Box::new(BottleneckQueue::new(b))),
            delay: DelayLine::new(
                config.delay,
                config.jitter.clone(),
                rng(labels::JITTER),
                config.reorder.clone(),
                rng(labels::REORDER),
            ),
            offered: 0,
            last_now: Instant::ZERO,
            latest_arrival: Instant::ZERO,
            stats: LinkStats::default(),
        })
    }

    /// Adds a drop predicate (not part of [`LinkConfig`]: closures are not
    /// data). It is called once for every offered datagram, in offer order,
    /// so it may keep state, e.g. drop only the first packet that matches:
    ///
    /// ```
    /// use thinstream_base::{Datagram, Instant, Seed};
    /// use thinstream_link::{DropCause, Link, LinkConfig};
    ///
    /// // Drop the first datagram whose payload starts with 0x07, once.
    /// let mut armed = true;
    /// let mut link = Link::new(&LinkConfig::perfect(), Seed(1)).with_drop_predicate(move |d| {
    ///     let hit = armed && d.payload.first() == Some(&0x07);
    ///     armed &= !hit;
    ///     hit
    /// });
    /// let d = |b: u8| Datagram {
    ///     src: "10.0.0.1:1".parse().unwrap(),
    ///     dst: "10.0.0.2:1".parse().unwrap(),
    ///     payload: vec![b; 8],
    /// };
    /// let mut out = Vec::new();
    /// let first = link.send_report(Instant::ZERO, d(7), &mut out);
    /// let again = link.send_report(Instant::ZERO, d(7), &mut out);
    /// assert_eq!(first.dropped, Some(DropCause::Predicate));
    /// assert_eq!(again.dropped, None);
    /// assert_eq!(out.len(), 1);
    /// ```
    pub fn with_drop_predicate(
        mut self,
        predicate: impl FnMut(&Datagram) -> bool + Send + 'static,
    ) -> Link {
        self.set_drop_predicate(Some(Box::new(predicate)));
        self
    }

    /// Replaces (or with `None` removes) the drop predicate mid-run.
    pub fn set_drop_predicate(&mut self, predicate: Option<DropPredicate>) {
        match (&mut self.rare, predicate) {
            (Some(rare), predicate) => rare.predicate = predicate,
            (None, None) => {}
            (None, Some(predicate)) => {
                let mut rare = RareStages::none();
                rare.predicate = Some(predicate);
                self.rare = Some(Box::new(rare));
            }
        }
    }

    /// Offer a datagram to the link at `now`. Appends zero or more (arrival
    /// time, datagram) pairs to `out` (zero = dropped, two = duplicated,
    /// corrupted payloads are modified copies). Arrival times are >= now.
    /// Calls must come in non-decreasing `now` order.
    pub fn send(&mut self, now: Instant, datagram: Datagram, out: &mut Vec<(Instant, Datagram)>) {
        self.send_report(now, datagram, out);
    }

    /// [`Link::send`], also saying what happened to the datagram.
    pub fn send_report(
        &mut self,
        now: Instant,
        datagram: Datagram,
        out: &mut Vec<(Instant, Datagram)>,
    ) -> SendReport {
        let mut datagram = datagram;
        let admission = self.admit(now, &mut datagram);
        if let Some(at) = admission.arrival {
            out.push((at, datagram));
        }
        if let Some(copy) = admission.duplicate {
            out.push(copy);
        }
        admission.report
    }

    /// Offers `datagram` to the link and says when it arrives, leaving it
    /// with the caller (corrupted in place if the corruption stage hit it):
    /// the same decisions, in the same order, as [`Link::send_report`],
    /// without moving the datagram through the link. A duplicate, if one
    /// is made and passes, is handed back with its arrival.
    pub fn admit(&mut self, now: Instant, datagram: &mut Datagram) -> Admission {
        debug_assert!(
            now >= self.last_now,
            "Link::send: time went backwards ({now} < {})",
            self.last_now
        );
        // In release builds a caller's time regression is absorbed rather
        // than letting the queue compute departures in the past.
        let now = now.max(self.last_now);
        self.last_now = now;
        self.offered += 1;
        let k = self.offered;
        let len = datagram.payload.len();
        self.stats.offered.add(len);

        // Every drop stage sees every packet, so one stage's decisions (and
        // random stream) never depend on whether another stage is present.
        let (outage, predicate, listed, periodic, trace) = match &mut self.rare {
            None => (false, false, false, false, false),
            Some(r) => (
                in_outage(&r.outages, now),
                r.predicate.as_mut().is_some_and(|f| f(datagram)),
                r.listed.drops(k),
                r.periodic.as_mut().is_some_and(|p| p.drops(k)),
                r.trace.as_ref().is_some_and(|t| t.drops(k)),
            ),
        };
        let model = self.loss.as_mut().is_some_and(|l| l.next_lost());
        let duplicated = self.rare.as_mut().is_some_and(|r| {
            r.duplicator
                .as_mut()
                .is_some_and(Duplicator::next_duplicated)
        });

        let cause = [
            (outage, DropCause::Outage),
            (predicate, DropCause::Predicate),
            (listed, DropCause::Listed),
            (periodic, DropCause::Periodic),
            (trace, DropCause::Trace),
            (model, DropCause::LossModel),
        ]
        .into_iter()
        .find_map(|(hit, cause)| hit.then_some(cause));
        let mut admission = Admission {
            report: SendReport::default(),
            arrival: None,
            duplicate: None,
        };
        if let Some(cause) = cause {
            self.stats.record_drop(cause, len);
            admission.report.dropped = Some(cause);
            return admission;
        }

        // The copy is taken before the original can be corrupted.
        let mut copy = if duplicated {
            self.stats.duplicated += 1;
            admission.report.duplicated = true;
            Some(datagram.clone())
        } else {
            None
        };
        admission.arrival = self.pass(now, len, &mut datagram.payload, &mut admission.report);
        if admission.arrival.is_none() {
            admission.report.dropped = Some(DropCause::QueueOverflow);
        }
        if let Some(mut d) = copy.take() {
            if let Some(at) = self.pass(now, len, &mut d.payload, &mut admission.report) {
                admission.duplicate = Some((at, d));
            }
        }
        admission
    }

    /// One copy through the queue, the corruption stage and the delay
    /// line: its arrival, or `None` if the queue overflowed.
    #[inline(always)]
    fn pass(
        &mut self,
        now: Instant,
        len: usize,
        payload: &mut [u8],
        report: &mut SendReport,
    ) -> Option<Instant> {
        let departure = match &mut self.queue {
            Some(q) => match q.offer(now, len) {
                Some(t) => t,
                None => {
                    self.stats.record_drop(DropCause::QueueOverflow, len);
                    return None;
                }
            },
            None => now,
        };
        if self.rare.as_mut().is_some_and(|r| {
            r.corrupter
                .as_mut()
                .is_some_and(|c| c.maybe_corrupt(payload))
        }) {
            self.stats.corrupted += 1;
            report.corrupted += 1;
        }
        let (arrival, _passage): (Instant, Passage) = self.delay.arrival(departure);
        let arrival = match self.tick {
            Some(t) => crate::stage::tick::release(arrival, t),
            None => arrival,
        };
        debug_assert!(arrival >= now);
        if arrival < self.latest_arrival {
            self.stats.reordered += 1;
        } else {
            self.latest_arrival = arrival;
        }
        self.stats.delivered.add(len);
        report.delivered += 1;
        Some(arrival)
    }

    /// The config this link was built from (for printing a run's parameters).
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Counters so far.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Packets offered so far (the number of the last offered packet).
    pub fn offered_packets(&self) -> u64 {
        self.offered
    }
}
