#!/usr/bin/env python3
"""Kernel TCP thin-stream peer for bench/thin-latency (runs inside the
namespaces of `thinstream emulate --tun`; same host clock on both sides).

  tcp_thin.py recv ADDR PORT OUTFILE
      accept one connection, read 100-byte records until EOF, write each
      record's one-way latency in ms (one per line) to OUTFILE.
  tcp_thin.py send ADDR PORT COUNT INTERVAL_MS SIZE CC [thin]
      connect, TCP_NODELAY, TCP_CONGESTION=CC, with `thin`
      TCP_THIN_LINEAR_TIMEOUTS; send COUNT records of SIZE bytes on an
      absolute schedule: id (u64 LE), CLOCK_MONOTONIC ns (u64 LE), padding.
"""
import socket
import struct
import sys
import time

TCP_THIN_LINEAR_TIMEOUTS = 16


def recv(addr, port, outfile, size=100):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((addr, int(port)))
    l.listen(1)
    l.settimeout(60)
    c, _ = l.accept()
    c.settimeout(60)
    buf = b""
    n = 0
    with open(outfile, "w") as out:
        while True:
            d = c.recv(65536)
            if not d:
                break
            now = time.monotonic_ns()
            buf += d
            while len(buf) >= size:
                rec, buf = buf[:size], buf[size:]
                _, sent = struct.unpack_from("<QQ", rec)
                out.write("%.3f\n" % ((now - sent) / 1e6))
                n += 1
    print('{"role":"tcp-recv","messages":%d}' % n)


def send(addr, port, count, interval_ms, size, cc, thin=False):
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    if thin:
        s.setsockopt(socket.IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, 1)
    for attempt in range(50):
        try:
            s.connect((addr, int(port)))
            break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit("connect failed")
    size, count, interval = int(size), int(count), float(interval_ms) / 1e3
    pad = b"\0" * (size - 16)
    t0 = time.monotonic()
    for i in range(count):
        at = t0 + i * interval
        d = at - time.monotonic()
        if d > 0:
            time.sleep(d)
        s.sendall(struct.pack("<QQ", i, time.monotonic_ns()) + pad)
    got = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
    s.shutdown(socket.SHUT_WR)
    s.settimeout(30)
    try:
        s.recv(1)  # wait for the receiver's FIN: everything was delivered
    except OSError:
        pass
    s.close()
    print('{"role":"tcp-send","messages":%d,"congestion":"%s","thin_linear_timeouts":%s}'
          % (count, got, "true" if thin else "false"))


if __name__ == "__main__":
    if sys.argv[1] == "recv":
        recv(*sys.argv[2:5])
    else:
        send(*sys.argv[2:8], thin=len(sys.argv) > 8 and sys.argv[8] == "thin")
