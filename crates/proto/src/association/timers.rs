//! All timers of an association in one table with one `next` deadline.

use thinstream_base::Instant;

/// The timers of one association (RFC 9260 names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    /// T1-init: retransmit INIT (§5.1 A).
    T1Init = 0,
    /// T1-cookie: retransmit COOKIE ECHO (§5.1 C).
    T1Cookie = 1,
    /// T2-shutdown: retransmit SHUTDOWN or SHUTDOWN ACK (§9.2).
    T2Shutdown = 2,
    /// T3-rtx: retransmit outstanding DATA (§6.3).
    T3Rtx = 3,
    /// Delayed SACK (§6.2).
    DelayedSack = 4,
    /// Heartbeat on an idle path (§8.3).
    Heartbeat = 5,
    /// FreeBSD-style early fast retransmit (000 §2; mechanism, never runs
    /// unless switched on).
    EarlyFastRtx = 6,
    /// Path MTU probe: send the next probe, or give up on the outstanding
    /// one (RFC 8899 PROBE_TIMER; see `association::pmtu`).
    PmtuProbe = 7,
}

impl Timer {
    pub(crate) const ALL: [Timer; 8] = [
        Timer::T1Init,
        Timer::T1Cookie,
        Timer::T2Shutdown,
        Timer::T3Rtx,
        Timer::DelayedSack,
        Timer::Heartbeat,
        Timer::EarlyFastRtx,
        Timer::PmtuProbe,
    ];
}

/// Deadlines indexed by [`Timer`]; `None` = stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TimerTable {
    at: [Option<Instant>; 8],
}

impl TimerTable {
    pub(crate) fn set(&mut self, t: Timer, at: Instant) {
        self.at[t as usize] = Some(at);
    }
    pub(crate) fn stop(&mut self, t: Timer) {
        self.at[t as usize] = None;
    }
    pub(crate) fn is_running(&self, t: Timer) -> bool {
        self.at[t as usize].is_some()
    }
    pub(crate) fn stop_all(&mut self) {
        self.at = [None; 8];
    }
    /// The earliest deadline of all running timers.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.at.iter().flatten().min().copied()
    }
    /// Whether `t` is running and due at `now`.
    pub(crate) fn expired(&self, t: Timer, now: Instant) -> bool {
        matches!(self.at[t as usize], Some(at) if at <= now)
    }
}
