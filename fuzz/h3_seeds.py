#!/usr/bin/env python3
"""Writes the seeds of the h3_datagrams fuzz target into
fuzz/corpus/h3_datagrams/ (see the target's doc comment for the layout).

Request-stream seeds (mode 1) are HTTP/3 frames written here, QPACK by hand
(static references and plain literals). Datagram seeds (mode 0) hold a real
client's first flight, made with aioquic (pip install aioquic) when it is
installed, and hand-made packets: a short header naming each poller, a
long header of an unknown version, garbage.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "h3_datagrams")


def varint(v):
    if v < 64:
        return bytes([v])
    if v < 16384:
        return struct.pack(">H", v | 0x4000)
    if v < 1 << 30:
        return struct.pack(">I", v | 0x80000000)
    return struct.pack(">Q", v | 0xC000000000000000)


def frame(kind, payload):
    return varint(kind) + varint(len(payload)) + payload


def prefixed(value, bits, flags):
    mask = (1 << bits) - 1
    if value < mask:
        return bytes([flags | value])
    out = bytearray([flags | mask])
    value -= mask
    while value >= 0x80:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


STATIC = {(b":method", b"GET"): 17, (b":method", b"HEAD"): 18, (b":method", b"POST"): 20,
          (b":scheme", b"https"): 23, (b":path", b"/"): 1}
NAMES = {b":authority": 0, b":path": 1, b"content-length": 4, b"content-type": 44}


def qpack(fields):
    out = bytearray(b"\x00\x00")
    for name, value in fields:
        if (name, value) in STATIC:
            out += prefixed(STATIC[(name, value)], 6, 0xC0)
        elif name in NAMES:
            out += prefixed(NAMES[name], 4, 0x50) + prefixed(len(value), 7, 0) + value
        else:
            out += prefixed(len(name), 3, 0x20) + name + prefixed(len(value), 7, 0) + value
    return bytes(out)


def request(method, path, extra=(), body=b"", trailers=None):
    fields = [(b":method", method), (b":scheme", b"https"), (b":authority", b"localhost"),
              (b":path", path)] + list(extra)
    out = frame(0x1, qpack(fields))
    if body:
        out += frame(0x0, body)
    if trailers:
        out += frame(0x1, qpack(trailers))
    return out


def stream_seed(stream, control=b"\x00"):
    return b"\x01" + control + stream


def datagram_seed(datagrams):
    out = bytearray(b"\x00")
    for port, data in datagrams:
        out += bytes([port]) + struct.pack(">H", len(data)) + data
    return bytes(out)


def seeds():
    yield "get-root", stream_seed(request(b"GET", b"/"))
    yield "get-root-byte-by-byte", stream_seed(request(b"GET", b"/"), b"\x08")
    yield "get-json-cut", stream_seed(request(b"GET", b"/json"), b"\x02\x05\xf0")
    yield "head-v1-user", stream_seed(request(b"HEAD", b"/v1/user"))
    yield "post-body", stream_seed(request(b"POST", b"/", [(b"content-length", b"5")], b"hello"))
    yield "post-trailers", stream_seed(
        request(b"POST", b"/", [], b"abc", [(b"x-trailer", b"1")]), b"\x01\x03")
    yield "body-declared-too-large", stream_seed(
        request(b"POST", b"/", [(b"content-length", b"2000000")]))
    yield "fields-too-large", stream_seed(request(b"GET", b"/", [(b"x-big", b"v" * 20000)]))
    yield "uppercase-name", stream_seed(request(b"GET", b"/", [(b"Accept", b"*/*")]))
    yield "connection-field", stream_seed(request(b"GET", b"/", [(b"connection", b"close")]))
    yield "no-authority-host", stream_seed(
        frame(0x1, qpack([(b":method", b"GET"), (b":scheme", b"https"), (b":path", b"/"),
                          (b"host", b"a")])))
    yield "data-first", stream_seed(frame(0x0, b"x") + request(b"GET", b"/"))
    yield "dynamic-reference", stream_seed(frame(0x1, b"\x02\x00\x80"))
    yield "huffman-authority", stream_seed(frame(0x1, b"\x00\x00\xd1\xd7\xc1\x50\x8c"
                                                 b"\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff"))
    yield "cut-frame", stream_seed(request(b"GET", b"/")[:-2])
    yield "unknown-frame-skipped", stream_seed(frame(0x21, b"grease") + request(b"GET", b"/plaintext"))
    yield "h2-ping-type", stream_seed(frame(0x6, b"12345678"))
    yield "settings-on-request", stream_seed(frame(0x4, b"") + request(b"GET", b"/"))
    yield "empty-stream", stream_seed(b"")
    yield "short-header-each-poller", datagram_seed(
        [(p, bytes([0x40, p]) + bytes(7) + b"\x00" * 40) for p in range(4)])
    yield "unknown-version", datagram_seed(
        [(0, b"\xc0\x0a\x1a\x2a\x3a\x08" + bytes(8) + b"\x08" + bytes(8) + bytes(1200 - 23))])
    yield "garbage", datagram_seed([(1, b"\xff" * 30), (2, b""), (3, b"\x00" * 1200)])
    try:
        from aioquic.quic.configuration import QuicConfiguration
        from aioquic.quic.connection import QuicConnection
    except ImportError:
        print("aioquic is not installed: no seed of a real client's Initial")
        return
    configuration = QuicConfiguration(is_client=True, alpn_protocols=["h3"])
    client = QuicConnection(configuration=configuration)
    client.connect(("127.0.0.1", 4433), now=0.0)
    first = [data for data, _ in client.datagrams_to_send(now=0.0)]
    yield "client-initial", datagram_seed([(0, d) for d in first])
    yield "client-initial-twice", datagram_seed([(0, d) for d in first] + [(1, d) for d in first])


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(os.listdir(OUT))} seeds to {OUT}")


if __name__ == "__main__":
    main()
