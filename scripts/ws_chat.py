#!/usr/bin/env python3
"""Two members of a WebSocket chat room, each on a different backend
behind a balancer: one says something, both must hear exactly that.

    ws_chat.py ADDR [--path /chat] [--upstream-header X-Upstream] [--tries 20]
               [--subscribers MONITOR_URL SUBJECT] [--timeout 5]
    ws_chat.py --self-test

A minimal WebSocket client (RFC 6455) on the standard library only: the
opening handshake, masked frames to the server, unmasked frames read back
(pings answered, fragments joined). Member 1 connects to ADDR (HOST:PORT);
member 2 connects too, and again, up to --tries times, until the
balancer's --upstream-header (nginx's $upstream_addr) on its 101 names
another backend than member 1's. With --subscribers, it then waits until
nats-server's monitoring (MONITOR_URL/connz) shows two connections
subscribed to SUBJECT, so that both backends hear the room. Member 1 sends
one text message; each member's next message must be exactly it, and
nothing more may come for a second.

Prints a line per step, then RESULT ok or RESULT fail. Exit status 0, 1 on
a failed check, 2 on a usage error. --self-test checks the framing and the
handshake key against RFC 6455's own examples, with no network.
"""

import argparse
import base64
import hashlib
import json
import os
import socket
import sys
import time
import urllib.request

from loadclient import parse_addr

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CONTINUATION, CLOSE, PING, PONG = 0x1, 0x2, 0x0, 0x8, 0x9, 0xA


class Failed(Exception):
    """A check did not hold."""


def accept_key(key):
    """The Sec-WebSocket-Accept a server must answer `key` with."""
    digest = hashlib.sha1((key + GUID).encode("ascii")).digest()
    return base64.b64encode(digest).decode("ascii")


def encode_frame(opcode, payload, mask):
    """One final frame; masked with the 4 bytes `mask`, or not if None."""
    head = bytearray([0x80 | opcode])
    bit = 0x80 if mask is not None else 0
    size = len(payload)
    if size < 126:
        head.append(bit | size)
    elif size < 1 << 16:
        head.append(bit | 126)
        head += size.to_bytes(2, "big")
    else:
        head.append(bit | 127)
        head += size.to_bytes(8, "big")
    if mask is None:
        return bytes(head) + payload
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes(head) + mask + masked


def decode_frame(data):
    """(fin, opcode, payload, bytes used) for the frame at the start of
    `data`, or None while it is incomplete."""
    if len(data) < 2:
        return None
    fin, opcode = bool(data[0] & 0x80), data[0] & 0x0F
    masked, size = bool(data[1] & 0x80), data[1] & 0x7F
    at = 2
    if size == 126:
        if len(data) < 4:
            return None
        size, at = int.from_bytes(data[2:4], "big"), 4
    elif size == 127:
        if len(data) < 10:
            return None
        size, at = int.from_bytes(data[2:10], "big"), 10
    mask = None
    if masked:
        if len(data) < at + 4:
            return None
        mask, at = data[at : at + 4], at + 4
    if len(data) < at + size:
        return None
    payload = data[at : at + size]
    if mask is not None:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return fin, opcode, bytes(payload), at + size


class Member:
    """One WebSocket connection, opened at once."""

    def __init__(self, host, port, path, timeout):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode("ascii"))
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = lines[0].split(" ", 2)
        if len(status) < 2 or status[1] != "101":
            raise Failed(f"handshake answered {lines[0]!r}, not 101")
        self.headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        if self.headers.get("sec-websocket-accept") != accept_key(key):
            raise Failed("handshake: wrong Sec-WebSocket-Accept")

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise Failed("the server closed the connection")
        self.buf += chunk

    def send_text(self, text):
        self.sock.sendall(encode_frame(TEXT, text.encode("utf-8"), os.urandom(4)))

    def next_message(self, timeout):
        """(opcode, payload) of the next text or binary message; raises
        socket.timeout when none comes within `timeout` seconds."""
        self.sock.settimeout(timeout)
        parts, first = [], None
        while True:
            frame = decode_frame(self.buf)
            if frame is None:
                self._fill()
                continue
            fin, opcode, payload, used = frame
            self.buf = self.buf[used:]
            if opcode == PING:
                self.sock.sendall(encode_frame(PONG, payload, os.urandom(4)))
            elif opcode == CLOSE:
                raise Failed(f"the server closed the WebSocket: {payload!r}")
            elif opcode in (TEXT, BINARY, CONTINUATION):
                first = opcode if first is None else first
                parts.append(payload)
                if fin:
                    return first, b"".join(parts)

    def close(self):
        try:
            self.sock.sendall(encode_frame(CLOSE, (1000).to_bytes(2, "big"), os.urandom(4)))
        except OSError:
            pass
        self.sock.close()


def subscribed(monitor, subject):
    """How many connections nats-server says subscribe to `subject`."""
    url = f"{monitor.rstrip('/')}/connz?subs=1&limit=1024"
    with urllib.request.urlopen(url, timeout=2) as answer:
        connz = json.load(answer)
    return sum(subject in (c.get("subscriptions_list") or []) for c in connz.get("connections") or [])


def self_test():
    # RFC 6455 section 5.7: "Hello" unmasked and masked, 256 and 65536
    # bytes unmasked; section 1.3: the handshake's accept key.
    hello = bytes([0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F])
    masked = bytes([0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58])
    assert encode_frame(TEXT, b"Hello", None) == hello
    assert encode_frame(TEXT, b"Hello", bytes([0x37, 0xFA, 0x21, 0x3D])) == masked
    assert decode_frame(hello) == (True, TEXT, b"Hello", 7)
    assert decode_frame(masked) == (True, TEXT, b"Hello", 11)
    assert decode_frame(masked[:10]) is None
    assert encode_frame(BINARY, bytes(256), None)[:4] == bytes([0x82, 0x7E, 0x01, 0x00])
    big = encode_frame(BINARY, bytes(65536), None)
    assert big[:10] == bytes([0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0])
    assert decode_frame(big) == (True, BINARY, bytes(65536), 65546)
    assert decode_frame(bytes([0x01, 0x03]) + b"Hel") == (False, TEXT, b"Hel", 5)
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    print("self-test: framing and handshake key as in RFC 6455: ok")


def chat(args):
    host, port = args.addr
    header = args.upstream_header.lower()
    members = []
    try:
        first = Member(host, port, args.path, args.timeout)
        members.append(first)
        where = [first.headers.get(header)]
        if where[0] is None:
            raise Failed(f"no {args.upstream_header} header on the 101: cannot tell the backends apart")
        print(f"member 1 on {where[0]}")
        for attempt in range(1, args.tries + 1):
            second = Member(host, port, args.path, args.timeout)
            if second.headers.get(header) != where[0]:
                break
            second.close()
            second = None
        if second is None:
            raise Failed(f"{args.tries} connections all went to {where[0]}")
        members.append(second)
        where.append(second.headers.get(header))
        print(f"member 2 on {where[1]} (connection {attempt})")

        if args.subscribers:
            monitor, subject = args.subscribers
            deadline = time.monotonic() + args.timeout
            while (count := subscribed(monitor, subject)) < 2:
                if time.monotonic() > deadline:
                    raise Failed(f"{count} connection(s) to NATS subscribe to {subject}, not 2")
                time.sleep(0.1)
            print(f"both backends subscribe to {subject} on NATS")

        message = f"hello from member 1 at {time.time():.6f}"
        first.send_text(message)
        print(f"member 1 sent {message!r}")
        for number, member in enumerate(members, 1):
            try:
                opcode, payload = member.next_message(args.timeout)
            except socket.timeout:
                raise Failed(f"member {number} heard nothing in {args.timeout} s") from None
            heard = payload.decode("utf-8", "replace")
            if opcode != TEXT or heard != message:
                raise Failed(f"member {number} heard {heard!r} (opcode {opcode}), not the message")
            print(f"member {number} heard it")
        for number, member in enumerate(members, 1):
            try:
                opcode, payload = member.next_message(1.0)
            except socket.timeout:
                continue
            raise Failed(f"member {number} heard more: {payload!r}")
        print("nothing more came in a second")
        return 0
    finally:
        for member in members:
            member.close()


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", maxsplit=1)[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("addr", nargs="?", type=parse_addr, help="the balancer, HOST:PORT")
    parser.add_argument("--path", default="/chat", help="the room's path (default /chat)")
    parser.add_argument(
        "--upstream-header",
        default="X-Upstream",
        help="response header naming the backend (default X-Upstream)",
    )
    parser.add_argument("--tries", type=int, default=20, help="connections for member 2 at most")
    parser.add_argument(
        "--subscribers",
        nargs=2,
        metavar=("MONITOR_URL", "SUBJECT"),
        help="wait until two NATS connections subscribe to SUBJECT",
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds for each wait")
    parser.add_argument("--self-test", action="store_true", help="check the framing offline")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return 0
    if args.addr is None:
        parser.error("ADDR is needed (or --self-test)")
    if args.tries < 1 or args.timeout <= 0:
        parser.error("--tries and --timeout must be positive")
    try:
        chat(args)
    except (Failed, OSError) as e:
        print(f"error: {e}")
        print("RESULT fail")
        return 1
    print("RESULT ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
