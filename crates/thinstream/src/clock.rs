//! Maps the OS monotonic clock onto the protocol core's time base
//! ([`thinstream_base::Instant`], nanoseconds since an epoch).

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
