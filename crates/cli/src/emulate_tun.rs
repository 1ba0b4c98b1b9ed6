//! `thinstream emulate --tun`: the namespace mode (the relay and the
//! namespaces are `thinstream::emulate::tun`; this runs the --run-a/--run-b
//! commands, waits for signals, prints and writes JSON).

use anyhow::Context;
use std::cell::RefCell;
use std::process::ExitCode;
use thinstream::emulate::tun::{TunConfig, TunEmulator, TunReport};
use thinstream_link::HoldLimit;

use crate::emulate::{direction, link, Args};
use crate::util::out;

/// Process groups started inside the namespaces; dropping this stops what
/// is still running in them (SIGTERM, then SIGKILL after a short wait), so
/// the namespaces can go.
#[derive(Default)]
struct Children {
    groups: Vec<rustix::process::Pid>,
    /// The relay thread runs under SCHED_FIFO, which a child would inherit:
    /// start the commands through `chrt --other 0` (util-linux), back under
    /// the normal policy.
    normal_policy: bool,
}

impl Children {
    fn spawn(&mut self, ns: &str, cmd: &str) -> anyhow::Result<tokio::process::Child> {
        let mut argv = vec!["netns", "exec", ns];
        if self.normal_policy {
            argv.extend(["chrt", "--other", "0"]);
        }
        argv.extend(["sh", "-c", cmd]);
        let child = tokio::process::Command::new("ip")
            .args(&argv)
            // Own process group: a terminal's Ctrl-C reaches the emulator
            // only, which then stops the group itself after the report.
            .process_group(0)
            .kill_on_drop(false)
            .spawn()
            .with_context(|| format!("starting `{cmd}` in {ns}"))?;
        if let Some(pid) = child
            .id()
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            self.groups.push(pid);
        }
        Ok(child)
    }

    fn signal_all(&self, sig: rustix::process::Signal) -> bool {
        let mut alive = false;
        for g in &self.groups {
            // ESRCH: the whole group is gone.
            alive |= rustix::process::kill_process_group(*g, sig).is_ok();
        }
        alive
    }

    fn stop(&mut self) {
        use rustix::process::Signal;
        if self.signal_all(Signal::TERM) {
            for _ in 0..20 {
                std::thread::sleep(std::time::Duration::from_millis(50));
                // Signal 0 is not available as a `Signal`; CONT is harmless
                // and tells whether any member is left.
                if !self.signal_all(Signal::CONT) {
                    break;
                }
            }
            self.signal_all(Signal::KILL);
        }
        self.groups.clear();
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.stop();
    }
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        _ => 1,
    }
}

pub(crate) fn main(args: &Args) -> anyhow::Result<ExitCode> {
    let config = TunConfig {
        tag: std::process::id().to_string(),
        forward: link(&args.forward, "forward")?,
        reverse: link(&args.reverse, "reverse")?,
        seed: args.seed,
        limit: HoldLimit {
            packets: args.hold_packets,
            bytes: args.hold_bytes,
        },
        duration: args.duration,
        link_seeds: None,
    };
    // The relay runs on this thread (a current-thread runtime).
    let scheduling = crate::sched::apply(args.priority, false)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let children = RefCell::new(Children {
        groups: Vec::new(),
        normal_policy: scheduling.realtime,
    });
    let a_status: RefCell<Option<std::process::ExitStatus>> = RefCell::new(None);
    let failure: RefCell<Option<anyhow::Error>> = RefCell::new(None);
    let report: anyhow::Result<TunReport> = rt.block_on(async {
        let emulator = TunEmulator::setup(config)?;
        let [na, nb] = emulator.namespaces().clone();
        out(&format!(
            "emulate --tun: side a = namespace {na} (10.201.0.1), side b = namespace {nb} (10.201.0.2); \
             enter with `ip netns exec {na} CMD` / `ip netns exec {nb} CMD`\n"
        ));
        let signals = async {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut hup)) =
                (signal(SignalKind::terminate()), signal(SignalKind::hangup()))
            else {
                return std::future::pending::<()>().await;
            };
            tokio::select! {
                r = tokio::signal::ctrl_c() => if r.is_err() { std::future::pending::<()>().await },
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
        };
        let commands = async {
            let run = async {
                let mut b = match &args.run_b {
                    Some(cmd) => Some(children.borrow_mut().spawn(&nb, cmd)?),
                    None => None,
                };
                let Some(cmd) = &args.run_a else {
                    // No a command: run until a signal or --duration.
                    if let Some(b) = &mut b {
                        let _ = b.wait().await;
                        eprintln!("thinstream: note: the --run-b command exited");
                    }
                    return std::future::pending().await;
                };
                if b.is_some() {
                    tokio::time::sleep(std::time::Duration::from_nanos(args.a_after.as_nanos()))
                        .await;
                }
                let mut a = children.borrow_mut().spawn(&na, cmd)?;
                let status = a.wait().await.context("waiting for the --run-a command")?;
                *a_status.borrow_mut() = Some(status);
                if let Some(b) = &mut b {
                    let grace = std::time::Duration::from_nanos(args.b_grace.as_nanos());
                    let _ = tokio::time::timeout(grace, b.wait()).await;
                }
                anyhow::Ok(())
            };
            if let Err(e) = run.await {
                *failure.borrow_mut() = Some(e);
            }
        };
        let stop = async {
            tokio::select! {
                () = signals => {}
                () = commands => {}
            }
        };
        anyhow::Ok(emulator.run(stop).await?)
    });
    // Commands first (they keep the namespaces alive), then report.
    children.borrow_mut().stop();
    let report = report?;
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    if let Some(path) = &args.json {
        crate::emulate::write_json(path, &report)?;
    }
    if !args.quiet {
        let mut s = format!(
            "emulate --tun: stopped by {} after {:.1} s; namespaces {} and {} removed\n",
            report.stopped_by, report.elapsed_s, report.namespaces[0], report.namespaces[1]
        );
        s += &direction("forward (a -> b)", &report.forward);
        s += &direction("reverse (b -> a)", &report.reverse);
        s += &format!("  relay thread: {}\n", scheduling.text);
        out(&s);
    }
    Ok(match a_status.into_inner() {
        Some(status) => ExitCode::from(exit_code(status)),
        None => ExitCode::SUCCESS,
    })
}
