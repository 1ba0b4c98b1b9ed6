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
/// Deadlines in nanoseconds, [`STOPPED`] for a timer that is not running:
/// 64 bytes, one cache line, where `Option<Instant>` needed two (an
/// association's timers are read on every packet, long after the last).
#[derive(Clone, Debug, PartialEq, Eq)]
#[repr(align(64))]
pub(crate) struct TimerTable {
    at: [u64; 8],
}

// One cache line (see the struct's note).
const _: () = assert!(std::mem::size_of::<TimerTable>() == 64);

/// The table entry of a stopped timer. No timer is ever set to the last
/// representable instant (`set` checks).
const STOPPED: u64 = u64::MAX;

impl Default for TimerTable {
    fn default() -> Self {
        TimerTable { at: [STOPPED; 8] }
    }
}

impl TimerTable {
    pub(crate) fn set(&mut self, t: Timer, at: Instant) {
        assert!(
            at.as_nanos() != STOPPED,
            "timer deadline at the end of virtual time"
        );
        self.at[t as usize] = at.as_nanos();
    }
    pub(crate) fn stop(&mut self, t: Timer) {
        self.at[t as usize] = STOPPED;
    }
    pub(crate) fn is_running(&self, t: Timer) -> bool {
        self.at[t as usize] != STOPPED
    }
    pub(crate) fn stop_all(&mut self) {
        self.at = [STOPPED; 8];
    }
    pub(crate) fn next(&self) -> Option<Instant> {
        let min = self.at.iter().copied().min().unwrap_or(STOPPED);
        (min != STOPPED).then(|| Instant::from_nanos(min))
    }
    pub(crate) fn expired(&self, t: Timer, now: Instant) -> bool {
        let at = self.at[t as usize];
        at != STOPPED && at <= now.as_nanos()
    }
}
