//! The emulator's clock tick: a timer-driven emulator (dummynet on a kernel
//! with `HZ` ticks per second) moves packets only when its clock ticks, so a
//! copy leaves the link at the first tick at or after the time the rest of
//! the pipeline computed. Ticks fall on the multiples of the tick length
//! from the start of the clock. Rounding up never reorders: it is monotone.

use thinstream_base::{Duration, Instant};

/// `arrival` rounded up to the next multiple of `tick` (unchanged if it is
/// one already; a zero tick changes nothing).
pub fn release(arrival: Instant, tick: Duration) -> Instant {
    let t = tick.as_nanos();
    if t == 0 {
        return arrival;
    }
    let ns = arrival.as_nanos();
    let rest = ns % t;
    if rest == 0 {
        arrival
    } else {
        Instant::from_nanos(ns.saturating_add(t - rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_up_to_the_next_tick() {
        let ms = Duration::from_millis(1);
        let at = |us: u64| Instant::from_nanos(us * 1000);
        assert_eq!(release(at(0), ms), at(0));
        assert_eq!(release(at(1), ms), at(1000));
        assert_eq!(release(at(999), ms), at(1000));
        assert_eq!(release(at(1000), ms), at(1000));
        assert_eq!(release(at(3648), ms), at(4000));
        assert_eq!(release(at(3648), Duration::from_millis(4)), at(4000));
        assert_eq!(release(at(4001), Duration::from_millis(4)), at(8000));
        assert_eq!(release(at(3648), Duration::ZERO), at(3648));
        // Monotone: a later input never leaves earlier.
        let mut last = Instant::ZERO;
        for us in (0..20_000).step_by(37) {
            let r = release(at(us), ms);
            assert!(r >= at(us) && r < at(us) + ms && r >= last);
            last = r;
        }
    }
}
