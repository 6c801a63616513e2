#!/usr/bin/env python3
"""Writes the hand-made seeds of the h2_frames fuzz target into
fuzz/corpus/h2_frames/ (run from anywhere; rewrites only these files).

Each seed is the target's input: a control byte (n = byte % 8 read lengths
follow; 0x08 drains the server after the first read, 0x10 pings the client),
the read lengths, then what the client sends after the preface. Header blocks
are HPACK by hand: indexed fields from the static table and literal fields
without Huffman coding.
"""

import os
import struct

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0x0, 0x1, 0x3, 0x4, 0x6, 0x7, 0x8, 0x9)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4

# One read of up to 1 KiB, or byte by byte.
WHOLE = bytes([0x01, 0xF0])
BYTEWISE = bytes([0x00])


def frame(kind, flags, stream, payload=b"", length=None):
    length = len(payload) if length is None else length
    return struct.pack(">I", length)[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def settings(*pairs):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def literal(name_index, value):
    """A literal field with incremental indexing, its name from the static table."""
    value = value.encode()
    return bytes([0x40 | name_index, len(value)]) + value


def literal_new(name, value):
    """A literal field without indexing, its name given."""
    name, value = name.encode(), value.encode()
    return bytes([0x00, len(name)]) + name + bytes([len(value)]) + value


def request(method=b"\x82", path="/", extra=b""):
    """:method (GET 0x82, POST 0x83 or a literal), :scheme http, :path, :authority."""
    path_field = b"\x84" if path == "/" else literal(4, path)
    return method + b"\x86" + path_field + literal(1, "localhost") + extra


def get(stream, path="/", flags=END_STREAM | END_HEADERS):
    return frame(HEADERS, flags, stream, request(path=path))


SEEDS = {
    "get-root": WHOLE + settings() + get(1),
    "get-root-bytewise": BYTEWISE + settings() + get(1),
    "get-every-route": WHOLE + settings() + b"".join(
        get(2 * i + 1, path) for i, path in enumerate(
            ["/", "/plaintext", "/json", "/v1/user", "/nope", "/%zz", "*"])),
    "head-and-options": WHOLE + settings()
    + frame(HEADERS, END_STREAM | END_HEADERS, 1, request(method=literal(2, "HEAD"), path="/json"))
    + frame(HEADERS, END_STREAM | END_HEADERS, 3, request(method=literal(2, "OPTIONS"))),
    "post-body-405": WHOLE + settings()
    + frame(HEADERS, END_HEADERS, 1, request(method=b"\x83", extra=literal(28, "5")))
    + frame(DATA, 0, 1, b"hel") + frame(DATA, END_STREAM, 1, b"lo"),
    "post-too-large-413": WHOLE + settings()
    + frame(HEADERS, END_HEADERS, 1, request(method=b"\x83", extra=literal(28, "2000000")))
    + frame(DATA, 0, 1, b"x" * 100),
    "cookies-and-fields": WHOLE + settings() + frame(
        HEADERS, END_STREAM | END_HEADERS, 1,
        request(path="/json", extra=literal(32, "a=1") + literal(32, "b=2")
                + literal_new("x-test", "yes") + literal(58, "fuzz"))),
    "small-window": bytes([0x02, 0x10, 0xF0]) + settings((0x4, 1), (0x5, 16384)) + get(1, "/v1/user")
    + b"".join(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 16)) for _ in range(8))
    + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 100000)),
    "large-frames": WHOLE + settings((0x5, 16777215), (0x4, 1048576), (0x1, 0)) + get(1, "/v1/user"),
    "ping-and-settings-ack": WHOLE + settings() + frame(PING, 0, 0, b"12345678")
    + frame(SETTINGS, ACK, 0) + get(1),
    "continuation": WHOLE + settings() + frame(HEADERS, END_STREAM, 1, request()[:3])
    + frame(CONTINUATION, 0, 1, request()[3:5]) + frame(CONTINUATION, END_HEADERS, 1, request()[5:]),
    "drain-after-first-read": bytes([0x09, 0x20]) + settings() + get(1) + get(3, "/json")
    + frame(PING, ACK, 0, b"\x0b\x7b\xa2\xf0\x8b\x9b\xfe\x54") + get(5),
    "server-ping": bytes([0x11, 0x30]) + settings() + get(1) + frame(PING, ACK, 0, bytes(8)),
    "rapid-reset": WHOLE[:1] + bytes([0xF4]) + settings() + b"".join(
        frame(HEADERS, END_HEADERS, 2 * i + 1, request()) + frame(RST_STREAM, 0, 2 * i + 1, struct.pack(">I", 8))
        for i in range(40)),
    "client-goaway": WHOLE + settings() + get(1) + frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0)),
    "end-of-input-midstream": WHOLE + settings()
    + frame(HEADERS, END_HEADERS, 1, request(method=b"\x83")) + frame(DATA, 0, 1, b"partial"),
    # Broken: each is a connection or stream error the server must answer.
    "bad-headers-even-stream": WHOLE + settings() + get(2),
    "bad-hpack-index": WHOLE + settings() + frame(HEADERS, END_STREAM | END_HEADERS, 1, b"\xff\xff\x7f"),
    "bad-continuation-interrupted": WHOLE + settings() + frame(HEADERS, END_STREAM, 1, request())
    + frame(PING, 0, 0, bytes(8)),
    "bad-data-idle-stream": WHOLE + settings() + frame(DATA, 0, 5, b"abc"),
    "bad-window-update-zero": WHOLE + settings() + get(1) + frame(WINDOW_UPDATE, 0, 0, bytes(4)),
    "bad-settings-length": WHOLE + frame(SETTINGS, 0, 0, b"\x00\x04\x00\x00\x00"),
    "bad-frame-too-large": WHOLE + settings() + frame(DATA, 0, 1, b"", length=16385) + bytes(64),
    "bad-data-after-end": WHOLE + settings() + get(1) + frame(DATA, 0, 1, b"late"),
    "bad-missing-path": WHOLE + settings() + frame(HEADERS, END_STREAM | END_HEADERS, 1,
                                                    b"\x82\x86" + literal(1, "localhost")),
    "bad-connection-header": WHOLE + settings() + frame(
        HEADERS, END_STREAM | END_HEADERS, 1, request(extra=literal_new("connection", "close"))),
    "bad-no-settings-first": WHOLE + get(1),
    # h2 answers these two with RST_STREAM on the stream named, even an
    # even-numbered one.
    "bad-malformed-block-even-stream": WHOLE + settings() + frame(
        HEADERS, END_STREAM | END_HEADERS, 2, b"\x82\x86" + literal(1, "localhost")),
    "bad-priority-on-itself": WHOLE + settings() + frame(0x2, 0, 3, struct.pack(">IB", 3, 15)) + get(1),
}


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "h2_frames")
    os.makedirs(out, exist_ok=True)
    for name, seed in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(seed)
    print(f"{len(SEEDS)} seeds in {out}")


if __name__ == "__main__":
    main()
