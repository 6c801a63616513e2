#!/usr/bin/env python3
"""Hold N keep-alive HTTP/1.1 connections to ADDR for SECONDS.

    hold_connections.py N SECONDS ADDR [--interval 10] [--connect-rate 2000]

One process, non-blocking sockets and a selector. Connections are opened at
--connect-rate per second; each sends `GET PATH` as soon as it is connected,
then again about every --interval seconds (each connection keeps its own
random phase, so about N / interval requests per second go out, spread
evenly). Once every connection is open and has been answered once, a line
starting with READY is printed and the SECONDS of holding start. Then no
more requests are sent, answers still due get up to --timeout, every
connection is closed and a summary plus one `RESULT key=value ...` line are
printed.

Errors (each counted): connect failures and connect timeouts, resets, the
server closing a connection, bad responses (not 200, wrong body, unasked
for, `Connection: close`) and answers later than --timeout.

Exit status: 0 if all N connected and nothing went wrong, 1 if not, 2 on a
usage error.
"""

import argparse
import errno
import heapq
import random
import selectors
import socket
import ssl
import statistics
import sys
import time

from loadclient import descriptors_for, parse_addr

CONNECTING, IDLE, WAITING, HANDSHAKING = 0, 1, 2, 3
ERROR_KINDS = ("connect_failed", "connect_timeout", "reset", "closed", "bad", "timeout")


class Conn:
    __slots__ = ("sock", "state", "started", "sent_at", "rbuf", "answers", "due")

    def __init__(self, sock, now):
        self.sock = sock
        self.state = CONNECTING
        self.started = now
        self.sent_at = 0.0
        self.rbuf = b""
        self.answers = 0
        self.due = 0.0


def parse_response(buf):
    """(status_line, body, wants_close, length) once whole, None if not yet,
    or raises ValueError if it cannot be a good response."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > 16384:
            raise ValueError("response head over 16 KiB")
        return None
    lines = buf[:end].decode("latin-1").split("\r\n")
    length, close = None, False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value.strip())
        elif name == "connection" and "close" in value.lower():
            close = True
        elif name == "transfer-encoding":
            raise ValueError("unexpected Transfer-Encoding")
    if length is None:
        raise ValueError("no Content-Length")
    total = end + 4 + length
    if len(buf) < total:
        return None
    return lines[0], buf[end + 4:total], close, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, metavar="N", help="connections to hold")
    ap.add_argument("seconds", type=float, metavar="SECONDS", help="how long to hold them")
    ap.add_argument("addr", type=parse_addr, metavar="ADDR", help="HOST:PORT")
    ap.add_argument("--interval", type=float, default=10.0,
                    help="seconds between a connection's requests (default 10)")
    ap.add_argument("--connect-rate", type=float, default=2000.0,
                    help="new connections per second while opening (default 2000)")
    ap.add_argument("--timeout", type=float, default=5.0,
                    help="seconds to connect, or to get an answer (default 5)")
    ap.add_argument("--path", default="/", help="path to GET (default /)")
    ap.add_argument("--tls", action="store_true",
                    help="TLS over each connection (the certificate is not checked), for the memory of "
                    "idle TLS connections")
    ap.add_argument("--expect-body", default="hello\n",
                    help="the body every answer must have (default 'hello\\n')")
    args = ap.parse_args()
    if args.n < 1 or args.seconds <= 0 or args.interval <= 0 or args.connect_rate <= 0:
        ap.error("N, SECONDS, --interval and --connect-rate must be positive")

    limit = descriptors_for(args.n)
    if limit is None:
        return 1

    host, port = args.addr
    request = f"GET {args.path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    expect_body = args.expect_body.encode()
    errors = dict.fromkeys(ERROR_KINDS, 0)
    first_error = {}
    sel = selectors.DefaultSelector()
    tls = None
    if args.tls:
        tls = ssl.create_default_context()
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
        tls.set_alpn_protocols(["http/1.1"])
    conns = set()
    fresh = set()  # connections not answered yet
    due = []  # heap of (time, sequence, conn)
    seq = 0
    latencies = []
    counts = {"started": 0, "established": 0, "requests": 0, "answered": 0}
    rng = random.Random()

    def fail(conn, kind, detail):
        errors[kind] += 1
        first_error.setdefault(kind, detail)
        fresh.discard(conn)
        if conn in conns:
            conns.discard(conn)
            sel.unregister(conn.sock)
            conn.sock.close()

    def schedule(conn, when):
        nonlocal seq
        seq += 1
        conn.due = when
        heapq.heappush(due, (when, seq, conn))

    def send_request(conn, now):
        try:
            sent = conn.sock.send(request)
        except OSError as e:
            fail(conn, "reset", f"send: {e}")
            return
        if sent != len(request):
            fail(conn, "bad", "short send of a 40-byte request")
            return
        conn.state = WAITING
        conn.sent_at = now
        counts["requests"] += 1

    def on_readable(conn, now):
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except OSError as e:
            fail(conn, "reset", f"recv: {e}")
            return
        if not data:
            fail(conn, "closed", "server closed a held connection")
            return
        if conn.state != WAITING:
            fail(conn, "bad", f"unasked-for data: {data[:60]!r}")
            return
        conn.rbuf += data
        try:
            parsed = parse_response(conn.rbuf)
        except ValueError as e:
            fail(conn, "bad", str(e))
            return
        if parsed is None:
            return
        status, body, close, total = parsed
        if not status.startswith("HTTP/1.1 200") or body != expect_body or close:
            fail(conn, "bad", f"{status!r} body={body[:40]!r} close={close}")
            return
        if total != len(conn.rbuf):
            fail(conn, "bad", "extra bytes after the response")
            return
        conn.rbuf = b""
        conn.state = IDLE
        conn.answers += 1
        counts["answered"] += 1
        latencies.append(now - conn.sent_at)
        if conn.answers == 1:
            fresh.discard(conn)
            schedule(conn, now + rng.uniform(0.0, args.interval))
        else:
            schedule(conn, conn.due + args.interval)

    def on_connected(conn, now):
        err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            fail(conn, "connect_failed", errno.errorcode.get(err, str(err)))
            return
        if tls is not None:
            sel.unregister(conn.sock)
            conn.sock = tls.wrap_socket(conn.sock, server_hostname=host, do_handshake_on_connect=False)
            sel.register(conn.sock, selectors.EVENT_WRITE, conn)
            conn.state = HANDSHAKING
            on_handshake(conn, now)
            return
        counts["established"] += 1
        sel.modify(conn.sock, selectors.EVENT_READ, conn)
        send_request(conn, now)

    def on_handshake(conn, now):
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            sel.modify(conn.sock, selectors.EVENT_READ, conn)
            return
        except ssl.SSLWantWriteError:
            sel.modify(conn.sock, selectors.EVENT_WRITE, conn)
            return
        except OSError as e:
            fail(conn, "connect_failed", f"TLS handshake: {e}")
            return
        counts["established"] += 1
        sel.modify(conn.sock, selectors.EVENT_READ, conn)
        send_request(conn, now)

    def open_one(now):
        counts["started"] += 1
        try:
            sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                                 socket.SOCK_STREAM)
        except OSError as e:
            errors["connect_failed"] += 1
            first_error.setdefault("connect_failed", f"socket: {e}")
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rc = sock.connect_ex((host, port))
        if rc not in (0, errno.EINPROGRESS):
            sock.close()
            errors["connect_failed"] += 1
            first_error.setdefault("connect_failed", errno.errorcode.get(rc, str(rc)))
            return
        conn = Conn(sock, now)
        conns.add(conn)
        fresh.add(conn)
        sel.register(sock, selectors.EVENT_WRITE, conn)

    t0 = time.monotonic()
    hold_start = hold_end = drain_end = None
    next_check = next_progress = t0 + 1.0
    print(f"hold_connections: {args.n} connections to {host}:{port}, GET {args.path} "
          f"every ~{args.interval:g} s each, open-files limit {limit}", flush=True)
    while True:
        now = time.monotonic()
        # Open more connections, at the configured rate.
        if counts["started"] < args.n:
            allowed = min(args.n, int((now - t0) * args.connect_rate) + 1)
            while counts["started"] < allowed:
                open_one(now)
        # Every connection opened and each either answered once or gone.
        if hold_start is None and counts["started"] == args.n and not fresh:
            hold_start, hold_end = now, now + args.seconds
            total_errors = sum(errors.values())
            print(f"READY open={len(conns)} errors={total_errors} t={now - t0:.1f}s", flush=True)
        if hold_end is not None and drain_end is None and now >= hold_end:
            drain_end = now + args.timeout
        if drain_end is not None:
            waiting = sum(1 for c in conns if c.state == WAITING)
            if waiting == 0 or now >= drain_end:
                break
        # Requests that are due, unless we are done sending.
        while due and due[0][0] <= now:
            _, _, conn = heapq.heappop(due)
            if conn in conns and conn.state == IDLE and drain_end is None:
                send_request(conn, now)
        if now >= next_check:
            next_check = now + 0.25
            for conn in list(conns):
                if conn.state in (CONNECTING, HANDSHAKING) and now - conn.started > args.timeout:
                    fail(conn, "connect_timeout", f"not connected after {args.timeout:g} s")
                elif conn.state == WAITING and now - conn.sent_at > args.timeout:
                    fail(conn, "timeout", f"no answer after {args.timeout:g} s")
        if now >= next_progress:
            next_progress = now + 10.0
            print(f"  t={now - t0:5.1f}s open={len(conns)} requests={counts['requests']} "
                  f"answered={counts['answered']} errors={sum(errors.values())}", flush=True)
        wait = 0.05
        if due:
            wait = max(0.0, min(wait, due[0][0] - now))
        for key, mask in sel.select(wait):
            conn = key.data
            if conn not in conns:
                continue
            now = time.monotonic()
            if conn.state == CONNECTING:
                if mask & selectors.EVENT_WRITE:
                    on_connected(conn, now)
            elif conn.state == HANDSHAKING:
                on_handshake(conn, now)
            else:
                on_readable(conn, now)

    open_at_end = len(conns)
    for conn in list(conns):
        if conn.state == WAITING:
            fail(conn, "timeout", "still waiting at the end")
        else:
            conns.discard(conn)
            sel.unregister(conn.sock)
            conn.sock.close()
    sel.close()

    total_errors = sum(errors.values())
    held = (hold_end - hold_start) if hold_start is not None else 0.0
    lat = sorted(latencies)

    def ms(q):
        return f"{1000 * lat[min(len(lat) - 1, int(q * len(lat)))]:.1f}" if lat else "nan"

    ramp = f"{hold_start - t0:.1f}" if hold_start is not None else "nan"
    print(f"hold_connections: established {counts['established']} of {args.n} "
          f"(ready after {ramp} s), held {held:.0f} s, {open_at_end} still open at the end")
    print(f"  requests {counts['requests']}, answered {counts['answered']}, "
          f"latency p50 {ms(0.5)} ms p99 {ms(0.99)} ms max {ms(1.0)} ms")
    print(f"  errors {total_errors}: " + ", ".join(f"{k} {errors[k]}" for k in ERROR_KINDS))
    for kind, detail in first_error.items():
        print(f"  first {kind}: {detail}")
    fields = {"target": args.n, "established": counts["established"],
              "open_at_end": open_at_end, "requests": counts["requests"],
              "answered": counts["answered"], "errors": total_errors, **errors,
              "ramp_s": ramp, "p50_ms": ms(0.5), "p99_ms": ms(0.99), "max_ms": ms(1.0),
              "median_ms": f"{1000 * statistics.median(lat):.1f}" if lat else "nan"}
    print("RESULT " + " ".join(f"{k}={v}" for k, v in fields.items()), flush=True)
    return 0 if counts["established"] == args.n and total_errors == 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
