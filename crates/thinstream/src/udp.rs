//! Batched UDP I/O.
//!
//! The socket work is done by `quinn-udp`, the datagram layer of the quinn
//! QUIC stack: `sendmsg` with UDP GSO (one syscall for a run of same-size
//! datagrams to one peer) and `recvmmsg` with GRO on Linux, with fallbacks
//! elsewhere. It is maintained, fuzzed and used in production by quinn, so we
//! do not write our own `unsafe` syscall wrappers. The endpoint task owns
//! one [`UdpIo`]; the buffers here are allocated once per endpoint.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use quinn_udp::{RecvMeta, Transmit, UdpSocketState};
use tokio::io::unix::{AsyncFd, AsyncFdReadyGuard};
use tokio::io::Interest;

/// Datagrams taken from the protocol core in one turn of the endpoint loop,
/// copied back to back into one buffer.
#[derive(Default)]
pub(crate) struct TxBatch {
    bytes: Vec<u8>,
    /// (destination, start, length)
    items: Vec<(SocketAddr, usize, usize)>,
}

impl TxBatch {
    pub(crate) fn push(&mut self, dst: SocketAddr, payload: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(payload);
        self.items.push((dst, start, payload.len()));
    }

    /// Append one datagram written by `write` (which returns its
    /// destination, or `None` when there is nothing to send). Returns
    /// whether one was added.
    pub(crate) fn push_with(
        &mut self,
        write: impl FnOnce(&mut Vec<u8>) -> Option<SocketAddr>,
    ) -> bool {
        let start = self.bytes.len();
        match write(&mut self.bytes) {
            Some(dst) => {
                self.items.push((dst, start, self.bytes.len() - start));
                true
            }
            None => {
                self.bytes.truncate(start);
                false
            }
        }
    }
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.items.clear();
    }
}

/// Receive buffers: one per datagram of a `recvmmsg` batch, each large
/// enough for a GRO-coalesced run.
pub(crate) struct RxBuffers {
    /// `RX_SLOTS` regions of `RX_BUF` bytes, back to back.
    bytes: Vec<u8>,
    meta: [RecvMeta; RX_SLOTS],
    /// Regions used per receive call (quinn-udp's batch size, at most
    /// `RX_SLOTS`).
    slots: usize,
    /// Whether the last receive call filled every region (more may be
    /// queued); `false` after a call that found the queue emptied.
    pub(crate) filled: bool,
    /// After a batch that emptied the queue, whether to keep the runtime's
    /// "readable" flag and read again at the next turn (see
    /// [`Probe`]).
    probe: Probe,
}

/// Whether to read once more, without a new readiness event, after a batch
/// that emptied the queue.
///
/// Thin traffic: the queue stays empty, so that read only hears "nothing
/// more" (one system call per wake-up for nothing); better to clear the
/// runtime's flag at once. Bulk transfer: acknowledgements arrive while
/// the endpoint sends, so that read usually finds some, without waiting
/// for the runtime's poller (clearing the flag cost one `epoll_wait` per
/// turn and about a tenth of the goodput on loopback). The endpoint learns
/// which case it is in from how those reads went.
#[derive(Default)]
struct Probe {
    /// The flag was kept after the last batch: the next read is a probe.
    pending: bool,
    /// Probes in a row that found nothing.
    empty: u8,
    /// Batches that emptied the queue, counted to probe now and then
    /// (every `PROBE_EVERY`th) even when probes have been finding
    /// nothing, so that a switch to bulk transfer is noticed.
    short_batches: u8,
}

/// Probes in a row finding nothing after which the flag is cleared at once.
const PROBE_GIVE_UP: u8 = 2;
/// When probing has been given up, probe again after this many batches.
const PROBE_EVERY: u8 = 16;

impl Probe {
    /// A read through a readiness guard returned `n` datagrams.
    fn read(&mut self, n: usize) {
        if std::mem::take(&mut self.pending) {
            self.empty = if n == 0 {
                self.empty.saturating_add(1)
            } else {
                0
            };
        }
    }

    /// The batch emptied the queue: keep the flag (probe next turn)?
    fn keep_flag(&mut self) -> bool {
        self.short_batches = (self.short_batches + 1) % PROBE_EVERY;
        self.pending = self.empty < PROBE_GIVE_UP || self.short_batches == 0;
        self.pending
    }
}

const RX_BUF: usize = 64 * 1024;
const RX_SLOTS: usize = 16;
/// Largest GSO run we build (the kernel's limit is 64 KiB of payload).
const GSO_MAX_BYTES: usize = 60_000;

impl RxBuffers {
    pub(crate) fn new() -> RxBuffers {
        RxBuffers {
            bytes: vec![0u8; RX_SLOTS * RX_BUF],
            meta: [RecvMeta::default(); RX_SLOTS],
            slots: quinn_udp::BATCH_SIZE.clamp(1, RX_SLOTS),
            filled: false,
            probe: Probe::default(),
        }
    }
}

/// The largest UDP payload the kernel's route towards `peer` carries
/// unfragmented (the route's MTU less the IP and UDP headers), learned from
/// a connected probe socket (no packet is sent). `None` if the kernel
/// cannot tell (no route, or not Linux).
pub(crate) fn route_udp_payload(peer: SocketAddr) -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        let any: SocketAddr = if peer.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let probe = std::net::UdpSocket::bind(any).ok()?;
        probe.connect(peer).ok()?;
        let (mtu, headers) = if peer.is_ipv4() {
            (rustix::net::sockopt::ip_mtu(&probe).ok()?, 20 + 8)
        } else {
            (rustix::net::sockopt::ipv6_mtu(&probe).ok()?, 40 + 8)
        };
        (mtu as usize).checked_sub(headers)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = peer;
        None
    }
}

/// The endpoint's socket, registered with the runtime for reading only.
///
/// A UDP socket is writable almost always, and with write interest the OS
/// reports every datagram sent (an edge each time the send buffer drains),
/// so the runtime's poller returned once more after every send to report
/// it: one more system call per datagram, and one more turn of the
/// runtime before it sleeps. Sends go straight to the socket; only a send
/// that finds the buffer full waits for room, through a registration made
/// for that wait (see [`UdpIo::send_one`]).
pub(crate) struct UdpIo {
    socket: AsyncFd<std::net::UdpSocket>,
    state: UdpSocketState,
    max_gso: AtomicUsize,
}

/// Send errors that lose one datagram but leave the socket usable.
fn droppable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
            | io::ErrorKind::AddrNotAvailable
            | io::ErrorKind::PermissionDenied
            | io::ErrorKind::ConnectionReset
    ) || quinn_udp::is_msg_size_err(e)
}

/// Errors with which a kernel without (working) UDP GSO refuses a run.
fn gso_refused(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::InvalidInput || e.raw_os_error() == Some(5) /* EIO */
}

impl UdpIo {
    /// Bind `addr`, non-blocking, with kernel buffers of `buffer` bytes each
    /// way if the kernel allows.
    pub(crate) fn bind(addr: SocketAddr, buffer: usize, gso: bool) -> io::Result<UdpIo> {
        let std_socket = std::net::UdpSocket::bind(addr)?;
        std_socket.set_nonblocking(true)?;
        let state = UdpSocketState::new((&std_socket).into())?;
        // Best effort: the kernel caps these at net.core.[rw]mem_max.
        let _ = state.set_send_buffer_size((&std_socket).into(), buffer);
        let _ = state.set_recv_buffer_size((&std_socket).into(), buffer);
        let socket = register(std_socket, Interest::READABLE)?;
        let max_gso = AtomicUsize::new(if gso {
            state.max_gso_segments().max(1)
        } else {
            1
        });
        Ok(UdpIo {
            socket,
            state,
            max_gso,
        })
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.get_ref().local_addr()
    }

    /// Send every datagram of `batch`, coalescing runs of equal-size
    /// datagrams to one peer into one GSO send. Waits while the socket
    /// buffer is full; other errors drop the datagram (the protocol
    /// recovers from loss) and are not reported.
    pub(crate) async fn send(&self, batch: &TxBatch) -> io::Result<()> {
        let items = &batch.items;
        let max_gso = self.max_gso.load(Ordering::Relaxed);
        let mut i = 0;
        while i < items.len() {
            let (dst, start, len) = items[i];
            // Extend the run: same destination, same size, contiguous; the
            // last segment of a run may be shorter.
            let mut j = i + 1;
            let mut total = len;
            while j < items.len()
                && j - i < max_gso
                && items[j].0 == dst
                && items[j].2 <= len
                && total + items[j].2 <= GSO_MAX_BYTES
            {
                total += items[j].2;
                j += 1;
                if items[j - 1].2 < len {
                    break;
                }
            }
            let transmit = Transmit {
                destination: dst,
                ecn: None,
                contents: &batch.bytes[start..start + total],
                segment_size: (j - i > 1).then_some(len),
                src_ip: None,
            };
            match self.send_one(&transmit).await {
                Ok(()) => {}
                // The kernel refused a GSO run (no GSO on this path): send
                // the datagrams one by one and stop using GSO.
                Err(e) if transmit.segment_size.is_some() && gso_refused(&e) => {
                    self.max_gso.store(1, Ordering::Relaxed);
                    for &(d, s, l) in &items[i..j] {
                        let single = Transmit {
                            destination: d,
                            ecn: None,
                            contents: &batch.bytes[s..s + l],
                            segment_size: None,
                            src_ip: None,
                        };
                        match self.send_one(&single).await {
                            Ok(()) => {}
                            Err(e) if droppable(&e) => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                // A datagram the network would have lost anyway: the
                // protocol's loss recovery takes care of it.
                Err(e) if droppable(&e) => {}
                Err(e) => return Err(e),
            }
            i = j;
        }
        Ok(())
    }

    /// Send one datagram (or GSO run); waits while the send buffer is full.
    async fn send_one(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        match self.state.try_send(self.socket.get_ref().into(), transmit) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            r => return r,
        }
        // The buffer is full (bulk transfer): wait for room through a
        // registration with write interest on a duplicate of the socket,
        // dropped once the datagram is out, so that writability is only
        // reported while someone waits for it.
        let waiting = register(self.socket.get_ref().try_clone()?, Interest::WRITABLE)?;
        loop {
            let mut ready = waiting.writable().await?;
            match ready.try_io(|s| self.state.try_send(s.get_ref().into(), transmit)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// Wait until a datagram can be read; the returned handle reads
    /// batches and knows when the queue has been emptied.
    pub(crate) async fn ready_to_read(&self) -> io::Result<ReadReady<'_>> {
        Ok(ReadReady {
            io: self,
            guard: self.socket.readable().await?,
        })
    }

    /// Wait until a datagram can be read.
    pub(crate) async fn readable(&self) -> io::Result<()> {
        self.socket.readable().await?.retain_ready();
        Ok(())
    }

    /// Poll form of [`Self::readable`] (to wait on several sockets).
    pub(crate) fn poll_readable(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        self.socket
            .poll_read_ready(cx)
            .map(|r| r.map(|mut ready| ready.retain_ready()))
    }

    /// Read what is queued without waiting; calls `f(src, payload)` for each
    /// datagram (GRO runs are split). Returns the number of datagrams, 0 if
    /// none was queued.
    pub(crate) fn try_recv(
        &self,
        rx: &mut RxBuffers,
        f: impl FnMut(SocketAddr, &[u8]),
    ) -> io::Result<usize> {
        self.recv_batch(rx, f, Via::Runtime)
    }

    /// Like [`UdpIo::try_recv`], asking the socket itself rather than the
    /// runtime's readiness flag (which only the runtime's poller sets, and
    /// it does not run while the endpoint task busy-polls).
    pub(crate) fn recv_now(
        &self,
        rx: &mut RxBuffers,
        f: impl FnMut(SocketAddr, &[u8]),
    ) -> io::Result<usize> {
        self.recv_batch(rx, f, Via::Socket)
    }

    fn recv_batch(
        &self,
        rx: &mut RxBuffers,
        mut f: impl FnMut(SocketAddr, &[u8]),
        via: Via<'_, '_>,
    ) -> io::Result<usize> {
        // The slices live on the stack: nothing is allocated per call.
        let mut regions = rx.bytes.chunks_exact_mut(RX_BUF);
        let mut slices: [IoSliceMut<'_>; RX_SLOTS] =
            std::array::from_fn(|_| IoSliceMut::new(regions.next().unwrap_or_default()));
        let slots = rx.slots;
        let mut recv = |s: &std::net::UdpSocket| {
            self.state
                .recv(s.into(), &mut slices[..slots], &mut rx.meta[..slots])
        };
        let mut guard = None;
        let r = match via {
            Via::Runtime => self.socket.try_io(Interest::READABLE, recv),
            Via::Socket => recv(self.socket.get_ref()),
            Via::Guard(g) => {
                // A "would block" answer clears the runtime's flag.
                let r = g
                    .try_io(|fd| recv(fd.get_ref()))
                    .unwrap_or_else(|_| Err(io::ErrorKind::WouldBlock.into()));
                guard = Some(g);
                r
            }
        };
        rx.filled = false;
        let n = match r {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            // ICMP port unreachable for an earlier send: the association's
            // timers deal with an absent peer.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Ok(0),
            Err(e) => return Err(e),
        };
        if let Some(g) = guard {
            rx.probe.read(n);
            if n > 0 && n < slots && !rx.probe.keep_flag() {
                // A batch that did not fill up emptied the queue: forget
                // the runtime's "readable" flag now instead of asking the
                // socket once more only to hear "nothing more". The guard
                // clears it only if no newer readiness event arrived since
                // it was taken, so a datagram that came in after this read
                // is not missed.
                g.clear_ready();
            }
        }
        if n == 0 {
            return Ok(0);
        }
        rx.filled = n == slots;
        let mut count = 0;
        for (meta, buf) in rx.meta.iter().zip(slices.iter()).take(n) {
            let stride = meta.stride.max(1);
            let data = &buf[..meta.len];
            for seg in data.chunks(stride) {
                f(meta.addr, seg);
                count += 1;
            }
        }
        Ok(count)
    }
}

/// Register `socket` with the runtime for `interest` only.
#[allow(
    deprecated,
    reason = "tokio deprecated its safe constructor for descriptor types that could \
              change or close the descriptor behind its back; a `std::net::UdpSocket` \
              owns its descriptor until dropped, which is the condition its `unsafe` \
              replacement asks for, and the workspace forbids `unsafe`"
)]
fn register(
    socket: std::net::UdpSocket,
    interest: Interest,
) -> io::Result<AsyncFd<std::net::UdpSocket>> {
    AsyncFd::with_interest(socket, interest)
}

/// How [`UdpIo::recv_batch`] reads.
enum Via<'a, 'g> {
    /// Through the runtime's "readable" flag (no system call when it is
    /// clear; a "would block" answer clears it).
    Runtime,
    /// Straight from the socket (busy polling: the runtime's poller does
    /// not run meanwhile).
    Socket,
    /// Through a readiness guard, which also clears the flag after a batch
    /// that emptied the queue.
    Guard(&'a mut AsyncFdReadyGuard<'g, std::net::UdpSocket>),
}

/// The socket is readable: read batches until [`RxBuffers::filled`] turns
/// false (the queue is empty, and the runtime knows it).
pub(crate) struct ReadReady<'a> {
    io: &'a UdpIo,
    guard: AsyncFdReadyGuard<'a, std::net::UdpSocket>,
}

impl ReadReady<'_> {
    /// Read one batch; calls `f(src, payload)` for each datagram. Returns
    /// the number of datagrams, 0 if none was queued.
    pub(crate) fn recv(
        &mut self,
        rx: &mut RxBuffers,
        f: impl FnMut(SocketAddr, &[u8]),
    ) -> io::Result<usize> {
        self.io.recv_batch(rx, f, Via::Guard(&mut self.guard))
    }
}

#[cfg(test)]
mod tests {
    use super::{Probe, PROBE_EVERY, PROBE_GIVE_UP};

    /// Thin traffic: after each short batch the queue stays empty.
    #[test]
    fn probing_stops_when_probes_find_nothing_and_resumes_now_and_then() {
        let mut p = Probe::default();
        let mut kept = Vec::new();
        for _ in 0..(3 * PROBE_EVERY as usize) {
            p.read(1); // the wake-up's batch: one datagram
            let keep = p.keep_flag();
            kept.push(keep);
            if keep {
                p.read(0); // the probe at the next turn: nothing
            }
        }
        // The first PROBE_GIVE_UP short batches probe; after that only
        // every PROBE_EVERY-th does.
        let first = PROBE_GIVE_UP as usize;
        assert!(kept[..first].iter().all(|&k| k));
        let later: Vec<usize> = (first..kept.len()).filter(|&i| kept[i]).collect();
        assert!(later.len() >= 2, "kept the flag at {later:?}");
        assert!(
            later
                .windows(2)
                .all(|w| w[1] - w[0] == PROBE_EVERY as usize),
            "kept the flag at {later:?}"
        );
    }

    /// Bulk transfer: the probe at the next turn finds acknowledgements.
    #[test]
    fn probing_continues_while_probes_find_datagrams() {
        let mut p = Probe::default();
        for _ in 0..100 {
            p.read(2);
            assert!(p.keep_flag());
        }
        // Thin traffic from here: probing stops after PROBE_GIVE_UP empty
        // probes, and a probe that finds datagrams again restarts it.
        for _ in 0..PROBE_GIVE_UP {
            assert!(p.keep_flag());
            p.read(0);
        }
        p.read(1);
        let mut probed = false;
        for _ in 0..PROBE_EVERY {
            if p.keep_flag() {
                probed = true;
                p.read(3);
                break;
            }
            p.read(1);
        }
        assert!(probed);
        p.read(1);
        assert!(
            p.keep_flag(),
            "a probe that found datagrams restarts probing"
        );
    }
}
