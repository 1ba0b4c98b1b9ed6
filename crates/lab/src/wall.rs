//! The one place the lab reads the OS clock: to report how long runs took
//! (`wall_s` in results.json, the benchmark). Simulations never see it, and
//! determinism checks ignore `wall_s`.

/// A wall-clock reading.
#[derive(Clone, Copy, Debug)]
pub struct WallInstant(std::time::Instant);

/// Reads the wall clock.
#[expect(
    clippy::disallowed_methods,
    reason = "wall time is reported beside results (wall_s) and never enters a simulation"
)]
pub fn now() -> WallInstant {
    WallInstant(std::time::Instant::now())
}

/// Seconds elapsed since `start`.
pub fn seconds_since(start: WallInstant) -> f64 {
    start.0.elapsed().as_secs_f64()
}
