//! How `thinstream emulate` schedules its relay thread.
//!
//! The relay sleeps until the next release on a timer. A normal thread
//! that wakes up waits for a core when the programs it carries keep both
//! busy, and on a small virtual machine that wait is the release error's
//! tail (README "emulate": p99 of hundreds of microseconds at 10 000
//! datagrams/s). A thread under the real-time policy `SCHED_FIFO` runs
//! as soon as it wakes, ahead of every normal thread, and it still gives
//! the core back whenever it sleeps. Setting it needs root (or
//! `CAP_SYS_NICE`); the kernel's real-time throttling (by default 95 % of
//! each second at most) bounds what such a thread can take even if it
//! never slept.

use anyhow::bail;
use thread_priority::{
    set_thread_priority_and_policy, thread_native_id, RealtimeThreadSchedulePolicy, ThreadPriority,
    ThreadPriorityValue, ThreadSchedulePolicy,
};

/// The real-time priority the relay thread asks for (1 to 99 under
/// `SCHED_FIFO`; any of them runs before every normal thread, and a low
/// one leaves the kernel's own real-time threads above it).
pub(crate) const RT_PRIORITY: u8 = 10;

/// `--priority`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Priority {
    /// Real-time when the system allows it, normal otherwise; normal
    /// with --busy-poll (a thread that never sleeps would hold its core
    /// against everything else).
    Auto,
    /// Real-time (`SCHED_FIFO`), or an error when the system refuses it.
    Realtime,
    /// The normal policy the process started with.
    Normal,
}

/// What the relay thread runs under, for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Whether the thread is under `SCHED_FIFO` (programs the emulator
    /// starts must then be put back to the normal policy).
    pub(crate) realtime: bool,
    /// E.g. `SCHED_FIFO 10`, `normal`, `normal (real-time refused: ...)`.
    pub(crate) text: String,
}

impl Priority {
    /// The value's name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Priority::Auto => "auto",
            Priority::Realtime => "realtime",
            Priority::Normal => "normal",
        }
    }
}

/// What the last [`apply`] of this process gave, for reports written
/// far from where it was called (`run --real`'s worker).
static APPLIED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `report` (an emulator report as JSON) with `scheduling`: what this
/// process's thread runs under, when [`apply`] ran.
pub(crate) fn with_scheduling(mut report: serde_json::Value) -> serde_json::Value {
    if let (Some(text), Some(map)) = (APPLIED.get(), report.as_object_mut()) {
        map.insert("scheduling".into(), text.as_str().into());
    }
    report
}

/// Applies `want` to the calling thread (the relay's: the emulator runs
/// on a current-thread runtime). An error only for `Realtime` refused, or
/// `Realtime` with busy polling.
pub(crate) fn apply(want: Priority, busy_poll: bool) -> anyhow::Result<Applied> {
    let applied = apply_policy(want, busy_poll)?;
    let _ = APPLIED.set(applied.text.clone());
    Ok(applied)
}

fn apply_policy(want: Priority, busy_poll: bool) -> anyhow::Result<Applied> {
    let normal = |text: String| Applied {
        realtime: false,
        text,
    };
    match (want, busy_poll) {
        (Priority::Normal, _) => return Ok(normal("normal".into())),
        (Priority::Auto, true) => return Ok(normal("normal (busy polling)".into())),
        (Priority::Realtime, true) => bail!(
            "--priority realtime with --busy-poll: a real-time thread that never sleeps would \
             hold its core against every other program (use one or the other)"
        ),
        _ => {}
    }
    let value = ThreadPriorityValue::try_from(RT_PRIORITY)
        .map_err(|e| anyhow::anyhow!("real-time priority {RT_PRIORITY}: {e}"))?;
    match set_thread_priority_and_policy(
        thread_native_id(),
        ThreadPriority::Crossplatform(value),
        ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
    ) {
        Ok(()) => Ok(Applied {
            realtime: true,
            text: format!("SCHED_FIFO {RT_PRIORITY}"),
        }),
        Err(e) => {
            let why = describe(&e);
            if want == Priority::Realtime {
                bail!(
                    "--priority realtime: the system refused SCHED_FIFO {RT_PRIORITY} ({why}); \
                     it needs root or CAP_SYS_NICE and a real-time budget for this cgroup"
                );
            }
            Ok(normal(format!("normal (real-time refused: {why})")))
        }
    }
}

fn describe(e: &thread_priority::Error) -> String {
    match e {
        thread_priority::Error::OS(code) => std::io::Error::from_raw_os_error(*code).to_string(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_polling_keeps_the_normal_policy_or_refuses_realtime() {
        let auto = apply(Priority::Auto, true).expect("auto with busy polling");
        assert!(!auto.realtime);
        assert_eq!(auto.text, "normal (busy polling)");
        let err = apply(Priority::Realtime, true).expect_err("realtime with busy polling");
        assert!(err.to_string().contains("--busy-poll"), "{err}");
        let normal = apply(Priority::Normal, false).expect("normal");
        assert!(!normal.realtime);
        assert_eq!(normal.text, "normal");
    }
}
