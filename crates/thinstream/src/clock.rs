//! Maps the OS monotonic clock onto the protocol core's time base
//! ([`thinstream_base::Instant`], nanoseconds since an epoch), and a timer
//! precise enough to pace thin streams ([`PreciseTimer`]).

use thinstream_base::Instant;

/// A monotonic clock whose epoch is the moment it was created.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Clock {
    #[allow(
        clippy::disallowed_methods,
        reason = "the library reads the OS clock; the protocol core takes time as input"
    )]
    /// A clock whose epoch is now.
    pub fn new() -> Clock {
        Clock {
            epoch: std::time::Instant::now(),
        }
    }

    /// Now, as nanoseconds since this clock's epoch.
    #[allow(
        clippy::disallowed_methods,
        reason = "the library reads the OS clock; the protocol core takes time as input"
    )]
    pub fn now(&self) -> Instant {
        let ns = self.epoch.elapsed().as_nanos();
        Instant::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// The OS instant of a virtual instant, for sleeping until a deadline.
    pub fn to_std(&self, t: Instant) -> std::time::Instant {
        self.epoch + std::time::Duration::from_nanos(t.as_nanos())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// A one-shot timer precise to tens of microseconds, for pacing messages.
///
/// tokio's own timers fire on a 1 ms wheel: a message paced with
/// `tokio::time::sleep_until` leaves up to a millisecond after its time,
/// and two messages meant to be 100 ms apart leave 99 to 101 ms apart. For
/// a thin stream that matters: a lost message is often recovered when the
/// *next* message's acknowledgement reports the gap, so the jitter of the
/// pacing ends up in the recovery latency.
///
/// On Linux the timer is a `timerfd` registered with the tokio runtime, so
/// it is awaited beside sockets and other futures. Creating one sets the
/// calling thread's timer slack to 1 ns (the default 50 µs would be added
/// to every wake-up). Where that is not available (other systems, or the
/// OS refusing a `timerfd`) it falls back to tokio's timer;
/// [`is_precise`] says which.
///
/// Arming the OS timer is a system call; [`sleep_until`] makes it only
/// when the deadline differs from the one already armed, so a loop that
/// builds the sleep afresh on every turn (as `tokio::select!` does) pays
/// for it once per deadline.
///
/// [`is_precise`]: PreciseTimer::is_precise
/// [`sleep_until`]: PreciseTimer::sleep_until
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::{Duration, Instant};
/// use thinstream::clock::PreciseTimer;
///
/// let mut timer = PreciseTimer::new();
/// let start = Instant::now();
/// for i in 1..=3 {
///     // Message i is due i x 2 ms after the start, whatever the previous
///     // send cost: lateness does not add up.
///     timer.sleep_until(start + Duration::from_millis(2 * i)).await;
///     assert!(start.elapsed() >= Duration::from_millis(2 * i));
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct PreciseTimer {
    #[cfg(target_os = "linux")]
    fd: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
    /// The deadline the OS timer is armed for, until its expiry is read.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    armed: Option<std::time::Instant>,
}

impl PreciseTimer {
    /// A timer.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or (on Linux) in one without I/O enabled,
    /// as tokio's own timers and sockets do.
    pub fn new() -> PreciseTimer {
        PreciseTimer {
            #[cfg(target_os = "linux")]
            fd: timerfd().ok(),
            armed: None,
        }
    }

    /// Whether waits use the high-resolution OS timer (`false`: tokio's
    /// timer, up to about 1 ms late).
    pub fn is_precise(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.fd.is_some();
        #[cfg(not(target_os = "linux"))]
        return false;
    }

    /// Waits until `deadline`; returns at once if it has passed. Dropping
    /// the future before it completes is fine: the next call with another
    /// deadline re-arms the timer, and one with the same deadline goes on
    /// waiting for it.
    #[allow(
        clippy::disallowed_methods,
        reason = "the library reads the OS clock; the protocol core takes time as input"
    )]
    pub async fn sleep_until(&mut self, deadline: std::time::Instant) {
        #[cfg(target_os = "linux")]
        if self.fd.is_some() {
            match self.precise_sleep(deadline).await {
                Ok(()) => return,
                // The OS timer failed (it should not): from now on the
                // runtime's timer.
                Err(_) => self.fd = None,
            }
        }
        tokio::time::sleep_until(deadline.into()).await;
    }

    #[cfg(target_os = "linux")]
    #[allow(
        clippy::disallowed_methods,
        reason = "the library reads the OS clock; the protocol core takes time as input"
    )]
    async fn precise_sleep(&mut self, deadline: std::time::Instant) -> std::io::Result<()> {
        use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags, Timespec};
        let Some(fd) = self.fd.as_ref() else {
            return Err(std::io::Error::other("no timer"));
        };
        let mut buf = [0u8; 8];
        if self.armed != Some(deadline) {
            let now = std::time::Instant::now();
            if deadline <= now {
                return Ok(());
            }
            // An expiry of an earlier deadline whose wait was dropped must
            // not end this one.
            let _ = rustix::io::read(fd.get_ref(), &mut buf);
            let d = deadline - now;
            let spec = Itimerspec {
                it_interval: Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: Timespec {
                    tv_sec: d.as_secs() as _,
                    tv_nsec: d.subsec_nanos() as _,
                },
            };
            timerfd_settime(fd.get_ref(), TimerfdTimerFlags::empty(), &spec)?;
            self.armed = Some(deadline);
        }
        loop {
            let mut guard = fd.readable().await?;
            match rustix::io::read(guard.get_inner(), &mut buf) {
                Ok(_) => {
                    self.armed = None;
                    return Ok(());
                }
                Err(rustix::io::Errno::AGAIN) => guard.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Waits `d` from now.
    #[allow(
        clippy::disallowed_methods,
        reason = "the library reads the OS clock; the protocol core takes time as input"
    )]
    pub async fn sleep(&mut self, d: std::time::Duration) {
        self.sleep_until(std::time::Instant::now() + d).await;
    }
}

impl Default for PreciseTimer {
    fn default() -> Self {
        PreciseTimer::new()
    }
}

/// A non-blocking monotonic `timerfd` registered with the runtime, and the
/// thread's timer slack at 1 ns.
#[cfg(target_os = "linux")]
fn timerfd() -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
    let fd = timerfd_create(
        TimerfdClockId::Monotonic,
        TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
    )?;
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
    // `AsyncFd::new` is deprecated for types whose descriptor could change
    // under the registration; an `OwnedFd` never does, and the replacement
    // is `unsafe`, which this crate forbids.
    #[allow(deprecated)]
    tokio::io::unix::AsyncFd::new(fd)
}
