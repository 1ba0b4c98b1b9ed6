//! `clock::PreciseTimer`: waits end at or after their deadline, and a wait
//! that was dropped does not disturb the next one.

#![allow(
    clippy::disallowed_methods,
    reason = "a timer on the OS clock is checked against the OS clock"
)]

use std::time::{Duration, Instant};
use thinstream::clock::PreciseTimer;

#[tokio::test(flavor = "current_thread")]
async fn waits_never_end_before_their_deadline() {
    let mut t = PreciseTimer::new();
    #[cfg(target_os = "linux")]
    assert!(t.is_precise(), "Linux has timerfd");
    let start = Instant::now();
    for i in 1..=20u64 {
        let due = start + Duration::from_micros(700 * i);
        t.sleep_until(due).await;
        assert!(Instant::now() >= due, "wait {i} ended early");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_passed_deadline_returns_at_once() {
    let mut t = PreciseTimer::new();
    let past = Instant::now();
    std::thread::sleep(Duration::from_millis(2));
    // A future that completes on its first poll: no wait at all.
    let mut f = std::pin::pin!(t.sleep_until(past));
    assert!(futures_poll_once(f.as_mut()).is_ready());
}

#[tokio::test(flavor = "current_thread")]
async fn a_dropped_wait_neither_ends_the_next_early_nor_is_lost() {
    let mut t = PreciseTimer::new();
    // Armed for 5 ms, then abandoned (as a `select!` branch that lost).
    let first = Instant::now() + Duration::from_millis(5);
    let _ = tokio::time::timeout(Duration::from_millis(1), t.sleep_until(first)).await;
    // Let the abandoned deadline expire, so its expiry is pending.
    std::thread::sleep(Duration::from_millis(10));
    // A later deadline must not end on the stale expiry.
    let second = Instant::now() + Duration::from_millis(20);
    t.sleep_until(second).await;
    assert!(
        Instant::now() >= second,
        "ended on the abandoned deadline's expiry"
    );

    // Abandoned again, then awaited with the same deadline: it still ends,
    // at its time.
    let third = Instant::now() + Duration::from_millis(20);
    let _ = tokio::time::timeout(Duration::from_millis(1), t.sleep_until(third)).await;
    tokio::time::timeout(Duration::from_secs(5), t.sleep_until(third))
        .await
        .expect("the re-awaited deadline never came");
    assert!(Instant::now() >= third);
}

fn futures_poll_once<F: std::future::Future>(
    f: std::pin::Pin<&mut F>,
) -> std::task::Poll<F::Output> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    f.poll(&mut cx)
}
