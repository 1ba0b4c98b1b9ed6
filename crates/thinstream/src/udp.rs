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
use tokio::io::Interest;
use tokio::net::UdpSocket;

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

pub(crate) struct UdpIo {
    socket: UdpSocket,
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
        let socket = UdpSocket::from_std(std_socket)?;
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
        self.socket.local_addr()
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

    /// Wait until a datagram can be read.
    async fn send_one(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        loop {
            self.socket.writable().await?;
            match self.socket.try_io(Interest::WRITABLE, || {
                self.state.try_send((&self.socket).into(), transmit)
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r,
            }
        }
    }

    pub(crate) async fn readable(&self) -> io::Result<()> {
        self.socket.readable().await
    }

    /// Poll form of [`Self::readable`] (to wait on several sockets).
    pub(crate) fn poll_readable(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        self.socket.poll_recv_ready(cx)
    }

    /// Read what is queued without waiting; calls `f(src, payload)` for each
    /// datagram (GRO runs are split). Returns the number of datagrams, 0 if
    /// none was queued.
    pub(crate) fn try_recv(
        &self,
        rx: &mut RxBuffers,
        f: impl FnMut(SocketAddr, &[u8]),
    ) -> io::Result<usize> {
        self.recv_batch(rx, f, true)
    }

    /// Like [`UdpIo::try_recv`], asking the socket itself rather than the
    /// runtime's readiness flag (which only the runtime's poller sets, and
    /// it does not run while the endpoint task busy-polls).
    pub(crate) fn recv_now(
        &self,
        rx: &mut RxBuffers,
        f: impl FnMut(SocketAddr, &[u8]),
    ) -> io::Result<usize> {
        self.recv_batch(rx, f, false)
    }

    fn recv_batch(
        &self,
        rx: &mut RxBuffers,
        mut f: impl FnMut(SocketAddr, &[u8]),
        via_runtime: bool,
    ) -> io::Result<usize> {
        // The slices live on the stack: nothing is allocated per call.
        let mut regions = rx.bytes.chunks_exact_mut(RX_BUF);
        let mut slices: [IoSliceMut<'_>; RX_SLOTS] =
            std::array::from_fn(|_| IoSliceMut::new(regions.next().unwrap_or_default()));
        let slots = rx.slots;
        let mut recv = || {
            self.state.recv(
                (&self.socket).into(),
                &mut slices[..slots],
                &mut rx.meta[..slots],
            )
        };
        let r = if via_runtime {
            self.socket.try_io(Interest::READABLE, recv)
        } else {
            recv()
        };
        rx.filled = false;
        let n = match r {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
            // ICMP port unreachable for an earlier send: the association's
            // timers deal with an absent peer.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Ok(0),
            Err(e) => return Err(e),
        };
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
