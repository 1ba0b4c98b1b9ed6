//! The namespace mode of the emulator (`thinstream emulate --tun`): the
//! same link model between two network namespaces, so that kernel TCP or
//! any other program crosses the identical links as the UDP relay's
//! clients.
//!
//! [`TunEmulator::setup`] creates two network namespaces (`ts-a-<tag>` and
//! `ts-b-<tag>`, only `lo` besides the TUN device), one TUN device per
//! namespace whose file descriptor this process keeps, and point-to-point
//! addresses inside the namespaces: side a has [`TUN_ADDR_A`] with a /32
//! route to [`TUN_ADDR_B`], and the other way round. The root namespace
//! gets no address and no route: the devices are created there down and
//! without addresses, then moved. IPv6 is switched off on the devices, so
//! only what the programs send crosses the emulator (and is counted).
//!
//! [`TunEmulator::run`] reads IP packets from both devices and applies the
//! forward link to a → b and the reverse link to b → a, with the same timing
//! loop as the UDP relay (a high-resolution timer for the next release).
//!
//! Cleanup: the devices vanish when their descriptors close; the namespaces
//! are deleted by [`Namespaces`]' `Drop` (so also on error and on unwind).
//! Processes still running inside a namespace keep it alive until they
//! exit; whoever started them must stop them first.
//!
//! Linux only, needs root (`CAP_NET_ADMIN` and `CAP_SYS_ADMIN`), `/dev/net/tun`
//! and the `ip` command (iproute2).

use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::Command;

use serde::Serialize;
use thinstream_base::{Datagram, Duration, Instant, Seed};
use thinstream_link::{HoldLimit, LinkConfig};

use super::{add, Direction, DirectionReport, EmulateError, SPIN_MARGIN};
use crate::clock::Clock;

/// Side a's address (inside namespace a).
pub const TUN_ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
/// Side b's address (inside namespace b).
pub const TUN_ADDR_B: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
/// MTU of both devices.
pub const TUN_MTU: u16 = 1500;

/// What to emulate between the namespaces.
#[derive(Clone, Debug)]
pub struct TunConfig {
    /// Appended to the namespace and device names; unique per run (the
    /// command line uses its process id).
    pub tag: String,
    /// a → b.
    pub forward: LinkConfig,
    /// b → a.
    pub reverse: LinkConfig,
    /// Run seed; the directions draw from `seed.derive("forward")` and
    /// `seed.derive("reverse")` (as the UDP relay's first client).
    pub seed: u64,
    /// Memory bound per direction.
    pub limit: HoldLimit,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// The forward and reverse links' own seeds, replacing the ones
    /// derived from `seed` (`thinstream run --real` passes the simulator's
    /// link seeds, so a real run's links drop what the simulated run's do).
    pub link_seeds: Option<(Seed, Seed)>,
}

/// Where a tapped relay ([`TunEmulator::run_tapped`]) saw a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TapPoint {
    /// Read from side a's device: a packet side a sent, before the
    /// forward link (also those the link then drops).
    FromA,
    /// Read from side b's device, before the reverse link.
    FromB,
    /// Written to side b's device: the forward link let it through.
    ToB,
    /// Written to side a's device: the reverse link let it through.
    ToA,
}

/// Why the namespace mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum TunError {
    /// Not running as root.
    #[error(
        "emulate --tun needs root (it creates network namespaces and TUN devices); \
         effective uid is {0}: run it as root, e.g. with sudo"
    )]
    NotRoot(u32),
    /// No TUN driver.
    #[error("/dev/net/tun is missing (no TUN driver: modprobe tun)")]
    NoTunDevice,
    /// A tag that would make invalid names.
    #[error("tag {0:?}: 1..=8 characters of [a-z0-9] expected")]
    BadTag(String),
    /// A link that does not validate.
    #[error(transparent)]
    Link(#[from] EmulateError),
    /// An `ip` command failed.
    #[error("`ip {args}` failed: {message}")]
    Ip {
        /// Its arguments.
        args: String,
        /// Its stderr, or why it could not run.
        message: String,
    },
    /// Creating a TUN device failed.
    #[error("creating TUN device {name}: {source}")]
    Tun {
        /// The device name.
        name: String,
        /// The OS error.
        source: io::Error,
    },
}

/// The effective user id, from `/proc/self/status` (no libc call needed).
pub fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Why the namespace mode cannot run here, if it cannot: not root, or no
/// `/dev/net/tun`. Tests use this to skip with a reason.
pub fn unavailable() -> Option<TunError> {
    match effective_uid() {
        Some(0) => {}
        Some(uid) => return Some(TunError::NotRoot(uid)),
        None => return Some(TunError::NotRoot(u32::MAX)),
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some(TunError::NoTunDevice);
    }
    None
}

fn ip(args: &[&str]) -> Result<(), TunError> {
    let fail = |message: String| TunError::Ip {
        args: args.join(" "),
        message,
    };
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| fail(format!("cannot run `ip`: {e} (install iproute2)")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(fail(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

/// The two namespaces; dropping this deletes them (errors are printed,
/// not raised: a drop cannot fail).
#[derive(Debug)]
pub struct Namespaces {
    created: Vec<String>,
}

impl Namespaces {
    fn add(&mut self, name: &str) -> Result<(), TunError> {
        ip(&["netns", "add", name])?;
        self.created.push(name.to_string());
        ip(&["-n", name, "link", "set", "lo", "up"])
    }

    /// Deletes the namespaces now (also what `Drop` does).
    pub fn delete(&mut self) {
        for name in self.created.drain(..) {
            if let Err(e) = ip(&["netns", "delete", &name]) {
                eprintln!("thinstream: warning: {e}");
            }
        }
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        self.delete();
    }
}

/// What the namespace mode did.
#[derive(Clone, Debug, Serialize)]
pub struct TunReport {
    /// Namespace of side a, then side b.
    pub namespaces: [String; 2],
    /// Address of side a, then side b.
    pub addresses: [Ipv4Addr; 2],
    /// The run seed.
    pub seed: u64,
    /// Wall time from start to stop, seconds.
    pub elapsed_s: f64,
    /// Why it stopped: `stop` (the caller's future: signal or command
    /// exit) or `duration`.
    pub stopped_by: &'static str,
    /// a → b: IP packets and their bytes.
    pub forward: DirectionReport,
    /// b → a.
    pub reverse: DirectionReport,
}

/// Namespaces and devices, ready to [`run`](TunEmulator::run).
pub struct TunEmulator {
    // Field order matters: the devices close before the namespaces go.
    a: tun_rs::AsyncDevice,
    b: tun_rs::AsyncDevice,
    config: TunConfig,
    names: [String; 2],
    namespaces: Namespaces,
}

impl std::fmt::Debug for TunEmulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunEmulator")
            .field("namespaces", &self.names)
            .finish_non_exhaustive()
    }
}

/// Packets read per device and turn.
const RECV_PER_TURN: usize = 256;

fn side_addr(ip: Ipv4Addr) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(ip, 0))
}

impl TunEmulator {
    /// Checks privileges and links, creates the namespaces and devices.
    /// Must be called inside a tokio runtime. On error, whatever was
    /// created is removed.
    pub fn setup(config: TunConfig) -> Result<TunEmulator, TunError> {
        if let Some(e) = unavailable() {
            return Err(e);
        }
        let tag = &config.tag;
        if tag.is_empty()
            || tag.len() > 8
            || !tag
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            return Err(TunError::BadTag(tag.clone()));
        }
        let seed = Seed(config.seed);
        // Only checks that the links validate (the run draws its own seeds).
        Direction::new(&config.forward, seed, config.limit, "forward")?;
        Direction::new(&config.reverse, seed, config.limit, "reverse")?;
        let names = [format!("ts-a-{tag}"), format!("ts-b-{tag}")];
        let mut namespaces = Namespaces {
            created: Vec::new(),
        };
        let mut devices = Vec::new();
        for (side, (ns, (mine, peer))) in ["a", "b"].iter().zip(
            names
                .iter()
                .zip([(TUN_ADDR_A, TUN_ADDR_B), (TUN_ADDR_B, TUN_ADDR_A)]),
        ) {
            namespaces.add(ns)?;
            // Created down and without address in the root namespace, then
            // moved: nothing is ever reachable from the root namespace.
            let dev = format!("ts{side}{tag}");
            let device = tun_rs::DeviceBuilder::new()
                .name(&dev)
                .mtu(TUN_MTU)
                .packet_information(false)
                .enable(false)
                .build_async()
                .map_err(|source| TunError::Tun {
                    name: dev.clone(),
                    source,
                })?;
            devices.push(device);
            ip(&["link", "set", "dev", &dev, "netns", ns])?;
            let disable_v6 = format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6");
            // Written from inside the namespace (sysctls are per namespace).
            let out = Command::new("ip")
                .args(["netns", "exec", ns, "sh", "-c"])
                .arg(format!("[ ! -e {disable_v6} ] || echo 1 > {disable_v6}"))
                .output()
                .map_err(|e| TunError::Ip {
                    args: format!("netns exec {ns} sh -c ..."),
                    message: e.to_string(),
                })?;
            if !out.status.success() {
                return Err(TunError::Ip {
                    args: format!("netns exec {ns} (disable IPv6 on {dev})"),
                    message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
                });
            }
            let (mine, peer) = (mine.to_string(), format!("{peer}/32"));
            ip(&["-n", ns, "addr", "add", &mine, "peer", &peer, "dev", &dev])?;
            ip(&["-n", ns, "link", "set", "dev", &dev, "up"])?;
        }
        let b = devices.pop().expect("two devices");
        let a = devices.pop().expect("two devices");
        Ok(TunEmulator {
            a,
            b,
            config,
            names,
            namespaces,
        })
    }

    /// The namespaces' names: side a, side b.
    pub fn namespaces(&self) -> &[String; 2] {
        &self.names
    }

    /// Relays until `stop` completes or the duration is over, then closes
    /// the devices and deletes the namespaces. An `Err` only when a device
    /// fails.
    pub async fn run(self, stop: impl Future<Output = ()>) -> io::Result<TunReport> {
        self.run_tapped(Clock::new(), &mut |_, _, _| {}, stop).await
    }

    /// [`run`](TunEmulator::run) on `clock`, handing every IP packet to
    /// `tap` where it was read from a device and where it was written to
    /// one, with the time the relay stamped it (the time the link model
    /// used). A caller that shares `clock` with its own programs joins
    /// the two by time.
    pub async fn run_tapped(
        self,
        clock: Clock,
        tap: &mut dyn FnMut(TapPoint, Instant, &[u8]),
        stop: impl Future<Output = ()>,
    ) -> io::Result<TunReport> {
        let TunEmulator {
            a,
            b,
            config,
            names,
            mut namespaces,
        } = self;
        let result = relay(&a, &b, &config, clock, tap, stop).await;
        drop(a);
        drop(b);
        namespaces.delete();
        let (elapsed, stopped_by, fwd, rev) = result?;
        Ok(TunReport {
            namespaces: names,
            addresses: [TUN_ADDR_A, TUN_ADDR_B],
            seed: config.seed,
            elapsed_s: elapsed,
            stopped_by,
            forward: fwd.report(),
            reverse: rev.report(),
        })
    }
}

/// Reads what is queued on `dev` (bounded) into `dir`.
#[allow(clippy::too_many_arguments)]
fn read_into(
    dev: &tun_rs::AsyncDevice,
    dir: &mut Direction,
    clock: &Clock,
    buf: &mut [u8],
    src: SocketAddr,
    dst: SocketAddr,
    tap: &mut dyn FnMut(TapPoint, Instant, &[u8]),
    point: TapPoint,
) -> io::Result<usize> {
    let mut n = 0;
    while n < RECV_PER_TURN {
        match dev.try_recv(buf) {
            Ok(len) => {
                // Stamped after the read returned: never before arrival.
                let now = clock.now();
                tap(point, now, &buf[..len]);
                dir.take(now, src, dst, buf[..len].to_vec());
                n += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Writes every packet of `dir` due at `now` to `dev`.
async fn release(
    dev: &tun_rs::AsyncDevice,
    dir: &mut Direction,
    clock: &Clock,
    due: &mut Vec<(Instant, Datagram)>,
    tap: &mut dyn FnMut(TapPoint, Instant, &[u8]),
    point: TapPoint,
) -> io::Result<()> {
    loop {
        due.clear();
        dir.held.release_due(clock.now(), 64, due);
        if due.is_empty() {
            return Ok(());
        }
        for (scheduled, d) in due.iter() {
            let sent_at = clock.now();
            match dev.send(&d.payload).await {
                Ok(_) => {
                    add(&mut dir.sent, d.payload.len());
                    tap(point, sent_at, &d.payload);
                }
                // The namespace's stack refused this packet as malformed
                // (the link's corruption stage can do that): not sent.
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => continue,
                Err(e) => return Err(e),
            }
            dir.errors
                .record(sent_at.saturating_duration_since(*scheduled).as_nanos());
        }
    }
}

async fn relay(
    a: &tun_rs::AsyncDevice,
    b: &tun_rs::AsyncDevice,
    config: &TunConfig,
    clock: Clock,
    tap: &mut dyn FnMut(TapPoint, Instant, &[u8]),
    stop: impl Future<Output = ()>,
) -> io::Result<(f64, &'static str, Direction, Direction)> {
    let seed = Seed(config.seed);
    let (forward_seed, reverse_seed) = config
        .link_seeds
        .unwrap_or((seed.derive("forward"), seed.derive("reverse")));
    let link_err = |e: EmulateError| io::Error::other(e.to_string());
    let mut fwd =
        Direction::new(&config.forward, forward_seed, config.limit, "forward").map_err(link_err)?;
    let mut rev =
        Direction::new(&config.reverse, reverse_seed, config.limit, "reverse").map_err(link_err)?;
    let (sa, sb) = (side_addr(TUN_ADDR_A), side_addr(TUN_ADDR_B));
    let started = clock.now();
    let mut timer = crate::clock::PreciseTimer::new();
    if !timer.is_precise() {
        return Err(io::Error::other(
            "no high-resolution timer (timerfd) for the emulator's releases",
        ));
    }
    let end = config.duration.map(|d| started + d);
    let mut buf = vec![0u8; 65_536];
    let mut due = Vec::new();
    tokio::pin!(stop);
    let stopped_by;
    loop {
        read_into(a, &mut fwd, &clock, &mut buf, sa, sb, tap, TapPoint::FromA)?;
        read_into(b, &mut rev, &clock, &mut buf, sb, sa, tap, TapPoint::FromB)?;
        release(b, &mut fwd, &clock, &mut due, tap, TapPoint::ToB).await?;
        release(a, &mut rev, &clock, &mut due, tap, TapPoint::ToA).await?;
        let now = clock.now();
        if end.is_some_and(|e| now >= e) {
            stopped_by = "duration";
            break;
        }
        let next = [fwd.held.next_release(), rev.held.next_release()]
            .into_iter()
            .flatten()
            .min();
        let wake = match (next, end) {
            (Some(n), Some(e)) => Some(n.min(e)),
            (n, e) => n.or(e),
        };
        let spin = wake.is_some_and(|w| w.saturating_duration_since(now) <= SPIN_MARGIN);
        let sleep = async {
            if spin {
                tokio::task::yield_now().await;
                return;
            }
            match wake {
                // The high-resolution timer (see the UDP relay's loop).
                Some(w) => timer.sleep_until(clock.to_std(w)).await,
                None => std::future::pending().await,
            }
        };
        let stopped = tokio::select! {
            biased;
            () = &mut stop => true,
            r = a.readable(), if !spin => { r?; false }
            r = b.readable(), if !spin => { r?; false }
            () = sleep => false,
        };
        if stopped {
            stopped_by = "stop";
            break;
        }
    }
    Ok((
        clock.now().saturating_duration_since(started).as_secs_f64(),
        stopped_by,
        fwd,
        rev,
    ))
}
