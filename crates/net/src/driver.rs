//! The socket drive loop.
//!
//! One tokio task owns the UDP socket and the protocol object. Everything the
//! application wants done to the protocol object is sent to that task as a
//! closure ([`Handle::call`]), so the object is only ever touched by one task
//! and the loop stays the same as the simulator's: after every input, drain
//! `poll_transmit`, `poll_event` and `poll_trace`, then wait for the next
//! datagram, command or deadline.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use thinstream_base::drive::{AppEvent, Transport};
use thinstream_base::trace::Record;
use thinstream_base::{Datagram, Instant};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

use crate::Clock;

/// What the socket driver needs from a sans-IO protocol object.
pub trait Sans {
    type Event: Send + 'static;
    fn handle_datagram(&mut self, now: Instant, datagram: Datagram);
    fn handle_timeout(&mut self, now: Instant);
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram>;
    fn poll_timeout(&self) -> Option<Instant>;
    fn poll_event(&mut self) -> Option<Self::Event>;
    fn poll_trace(&mut self) -> Option<Record>;
    /// The driver may stop: nothing more will ever happen.
    fn is_finished(&self) -> bool;
}

/// Every single-connection transport can be driven directly.
impl<T: Transport> Sans for T {
    type Event = AppEvent;
    fn handle_datagram(&mut self, now: Instant, datagram: Datagram) {
        Transport::handle_datagram(self, now, datagram)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Transport::handle_timeout(self, now)
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        Transport::poll_transmit(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Transport::poll_timeout(self)
    }
    fn poll_event(&mut self) -> Option<AppEvent> {
        Transport::poll_app(self)
    }
    fn poll_trace(&mut self) -> Option<Record> {
        Transport::poll_trace(self)
    }
    fn is_finished(&self) -> bool {
        Transport::is_closed(self)
    }
}

type Command<S> = Box<dyn FnOnce(&mut S, Instant) + Send>;

/// The driver task has ended (the protocol object finished or the socket failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverGone;

impl std::fmt::Display for DriverGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the connection's driver has stopped")
    }
}
impl std::error::Error for DriverGone {}

/// The application's side of a running driver.
pub struct Handle<S: Sans> {
    commands: mpsc::UnboundedSender<Command<S>>,
    events: mpsc::UnboundedReceiver<(Instant, S::Event)>,
    traces: Option<mpsc::UnboundedReceiver<Record>>,
    clock: Clock,
    local: SocketAddr,
    task: tokio::task::JoinHandle<io::Result<()>>,
}

impl<S: Sans + Send + 'static> Handle<S> {
    /// Run `f` on the protocol object inside the driver task, then drain its
    /// outputs. Returns what `f` returned.
    pub async fn call<R, F>(&self, f: F) -> Result<R, DriverGone>
    where
        R: Send + 'static,
        F: FnOnce(&mut S, Instant) -> R + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let cmd: Command<S> = Box::new(move |s, now| {
            let _ = tx.send(f(s, now));
        });
        self.commands.send(cmd).map_err(|_| DriverGone)?;
        rx.await.map_err(|_| DriverGone)
    }

    /// The next event from the protocol object with the time it was drained;
    /// `None` once the driver has stopped and every event was read.
    pub async fn next_event(&mut self) -> Option<(Instant, S::Event)> {
        self.events.recv().await
    }

    /// Trace records, if tracing was requested at spawn time.
    pub fn traces(&mut self) -> Option<&mut mpsc::UnboundedReceiver<Record>> {
        self.traces.as_mut()
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Wait for the driver task to end (after the protocol object finished).
    pub async fn join(self) -> io::Result<()> {
        drop(self.commands);
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(io::Error::other(e)),
        }
    }
}

/// Start driving `proto` over `socket`. With `trace`, every record the
/// object emits is forwarded to [`Handle::traces`].
pub fn spawn<S: Sans + Send + 'static>(
    socket: UdpSocket,
    proto: S,
    clock: Clock,
    trace: bool,
) -> io::Result<Handle<S>> {
    let local = socket.local_addr()?;
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (ev_tx, ev_rx) = mpsc::unbounded_channel();
    let (tr_tx, tr_rx) = if trace {
        let (a, b) = mpsc::unbounded_channel();
        (Some(a), Some(b))
    } else {
        (None, None)
    };
    let socket = Arc::new(socket);
    let task = tokio::spawn(run(socket, local, proto, clock, cmd_rx, ev_tx, tr_tx));
    Ok(Handle {
        commands: cmd_tx,
        events: ev_rx,
        traces: tr_rx,
        clock,
        local,
        task,
    })
}

/// Largest datagram we accept: bigger than any IPv4/IPv6 UDP payload on loopback.
const MAX_DATAGRAM: usize = 65_536;

async fn run<S: Sans>(
    socket: Arc<UdpSocket>,
    local: SocketAddr,
    mut proto: S,
    clock: Clock,
    mut commands: mpsc::UnboundedReceiver<Command<S>>,
    events: mpsc::UnboundedSender<(Instant, S::Event)>,
    traces: Option<mpsc::UnboundedSender<Record>>,
) -> io::Result<()> {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut commands_open = true;
    loop {
        // Drain every output the last input produced.
        let now = clock.now();
        while let Some(d) = proto.poll_transmit(now) {
            if let Err(e) = socket.send_to(&d.payload, d.dst).await {
                // A lost datagram is what the protocol is built to survive;
                // only report errors that mean the socket is unusable.
                if !matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionRefused
                        | io::ErrorKind::WouldBlock
                        | io::ErrorKind::HostUnreachable
                        | io::ErrorKind::NetworkUnreachable
                ) {
                    return Err(e);
                }
            }
        }
        while let Some(e) = proto.poll_event() {
            let _ = events.send((now, e));
        }
        while let Some(r) = proto.poll_trace() {
            if let Some(t) = &traces {
                let _ = t.send(r);
            }
        }
        if proto.is_finished() || (!commands_open && events.is_closed()) {
            return Ok(());
        }
        let deadline = proto.poll_timeout();
        tokio::select! {
            r = socket.recv_from(&mut buf) => {
                match r {
                    Ok((n, from)) => {
                        let now = clock.now();
                        proto.handle_datagram(now, Datagram { src: from, dst: local, payload: buf[..n].to_vec() });
                    }
                    // ICMP port unreachable surfaces as an error on Linux; the
                    // association's timers deal with an absent peer.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                    Err(e) => return Err(e),
                }
            }
            c = commands.recv(), if commands_open => {
                match c {
                    Some(f) => f(&mut proto, clock.now()),
                    None => commands_open = false,
                }
            }
            _ = sleep_until_opt(clock, deadline) => {
                proto.handle_timeout(clock.now());
            }
        }
    }
}

async fn sleep_until_opt(clock: Clock, deadline: Option<Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(clock.to_std(t).into()).await,
        None => std::future::pending().await,
    }
}
