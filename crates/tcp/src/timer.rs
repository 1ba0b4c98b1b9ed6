//! When a Linux kernel timer fires (config `timer_hz`).
//!
//! The kernel arms TCP's timers (retransmission, tail loss probe, RACK's
//! reordering timer, delayed ACK) in whole jiffies on its timer wheel, not
//! at the microsecond: a timeout in microseconds is converted to jiffies
//! rounding up, and the wheel files the timer in a bucket whose expiry is
//! rounded up to its level's granularity, so that it never fires early.
//! Level n holds timeouts up to `63 << 3n` jiffies and has a granularity of
//! `8^n` jiffies; every bucket lies past the requested jiffy. At HZ 250 a
//! 200 ms probe (50 jiffies, level 0) fires 4-8 ms late and a 300 ms RTO
//! (75 jiffies, level 1, 8-jiffy buckets) 4-36 ms late. Jiffies count from
//! the simulation's time 0.
//!
//! Without `timer_hz` a timer fires at its exact time (the simulator's own
//! timers, and every preset but `linux-modern`).

use thinstream_base::Instant;

/// Bits per level of the wheel's index (64 buckets per level).
const LEVEL_BITS: u32 = 6;
/// Each level's granularity is this many bits coarser than the one below.
const LEVEL_SHIFT: u32 = 3;
/// Levels of the wheel (HZ above 100).
const LEVELS: u32 = 9;

/// The instant a timer armed at `now` for `at` fires on a kernel timer
/// wheel ticking at `hz` (`None`: at `at` exactly).
pub(crate) fn fire_at(hz: Option<u32>, now: Instant, at: Instant) -> Instant {
    let Some(hz) = hz.filter(|h| *h > 0) else {
        return at;
    };
    let jiffy = 1_000_000_000 / u64::from(hz);
    let now_j = now.as_nanos() / jiffy;
    let delta = at.saturating_duration_since(now).as_nanos().div_ceil(jiffy);
    let expires = now_j + delta;
    // The level: the first whose range holds the delay (level n starts at
    // (64 - 1) << 3(n - 1) jiffies).
    let start = |n: u32| ((1u64 << LEVEL_BITS) - 1) << (LEVEL_SHIFT * (n - 1));
    let level = (1..LEVELS)
        .find(|&n| delta < start(n))
        .map_or(LEVELS - 1, |n| n - 1);
    let shift = LEVEL_SHIFT * level;
    let bucket = ((expires >> shift) + 1) << shift;
    Instant::from_nanos(bucket.saturating_mul(jiffy))
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinstream_base::Duration;

    fn ms(x: f64) -> Instant {
        Instant::from_nanos((x * 1e6) as u64)
    }

    #[test]
    fn exact_without_a_tick() {
        assert_eq!(fire_at(None, ms(1.0), ms(301.5)), ms(301.5));
    }

    #[test]
    fn short_timeouts_round_up_to_the_next_jiffy_boundary_past_the_requested_one() {
        // HZ 250: 4 ms jiffies. Armed at 1 ms (jiffy 0) for 40 ms: 10
        // jiffies, level 0, bucket 11 -> 44 ms.
        assert_eq!(fire_at(Some(250), ms(1.0), ms(41.0)), ms(44.0));
        // A fraction of a jiffy rounds up: 40.5 ms is 11 jiffies -> bucket 12.
        assert_eq!(fire_at(Some(250), ms(1.0), ms(41.5)), ms(48.0));
        // Never early, whatever the phase.
        for k in 0..400 {
            let now = ms(f64::from(k) * 0.37);
            for d in [1.0, 39.9, 200.0, 251.0, 300.5, 1000.0, 3000.0] {
                let at = now + Duration::from_nanos((d * 1e6) as u64);
                let fired = fire_at(Some(250), now, at);
                assert!(fired >= at, "{now:?} + {d} ms fired at {fired:?}");
            }
        }
    }

    #[test]
    fn level_one_timeouts_land_on_eight_jiffy_buckets() {
        // A 300 ms RTO armed at 0: 75 jiffies, level 1 (63..504 jiffies),
        // bucket ((75 >> 3) + 1) << 3 = 80 jiffies = 320 ms.
        assert_eq!(fire_at(Some(250), ms(0.0), ms(300.0)), ms(320.0));
        // Armed at 10 ms (jiffy 2) for 300 ms: expires at jiffy 77 -> 80.
        assert_eq!(fire_at(Some(250), ms(10.0), ms(310.0)), ms(320.0));
        // 62 jiffies is still level 0; 63 is level 1.
        assert_eq!(fire_at(Some(250), ms(0.0), ms(248.0)), ms(252.0));
        assert_eq!(fire_at(Some(250), ms(0.0), ms(252.0)), ms(256.0));
        // A 2.4 s timeout (600 jiffies, level 2: 64-jiffy buckets) at HZ 250.
        assert_eq!(fire_at(Some(250), ms(0.0), ms(2400.0)), ms(2560.0));
        // HZ 1000: 300 jiffies, level 1, bucket 304 ms.
        assert_eq!(fire_at(Some(1000), ms(0.0), ms(300.0)), ms(304.0));
    }
}
