#!/usr/bin/env python3
"""An HTTP/3 client on aioquic (PyPI), a QUIC and HTTP/3 stack no one here
wrote: sends each request given on one connection and prints, per request,
the status, the header fields and the body's length and first bytes; or,
with --json, one JSON object per request.

    pip install aioquic
    scripts/h3_client.py https://localhost:9443/ GET /plaintext POST /hello/json '{"name":"A"}'

Requests are METHOD PATH [BODY] triples (a BODY only after POST or PUT).
The certificate is not verified (the test certificates are self-signed).
"""
import argparse
import asyncio
import json
import ssl
import sys
from urllib.parse import urlparse

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.waiting = {}
        self.responses = {}

    def quic_event_received(self, event):
        for h3_event in self.h3.handle_event(event):
            if not isinstance(h3_event, (HeadersReceived, DataReceived)):
                continue
            response = self.responses.setdefault(
                h3_event.stream_id, {"headers": [], "body": b""}
            )
            if isinstance(h3_event, HeadersReceived):
                response["headers"] += h3_event.headers
            else:
                response["body"] += h3_event.data
            if h3_event.stream_ended and h3_event.stream_id in self.waiting:
                self.waiting.pop(h3_event.stream_id).set_result(response)

    async def request(self, method, authority, path, body=b""):
        stream = self._quic.get_next_available_stream_id()
        fields = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
            (b"user-agent", b"aioquic"),
        ]
        if body:
            fields.append((b"content-length", str(len(body)).encode()))
            if body.startswith(b"{"):
                fields.append((b"content-type", b"application/json"))
        self.h3.send_headers(stream, fields, end_stream=not body)
        if body:
            self.h3.send_data(stream, body, end_stream=True)
        done = asyncio.get_running_loop().create_future()
        self.waiting[stream] = done
        self.transmit()
        return await asyncio.wait_for(done, 10)


def parse_requests(words):
    requests = []
    while words:
        method, path, words = words[0], words[1], words[2:]
        body = b""
        if method in ("POST", "PUT") and words and not words[0].isupper():
            body, words = words[0].encode(), words[1:]
        requests.append((method, path, body))
    return requests


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("requests", nargs="+")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    url = urlparse(args.url)
    configuration = QuicConfiguration(
        is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE
    )
    configuration.server_name = url.hostname
    async with connect(
        url.hostname, url.port or 443, configuration=configuration, create_protocol=Client
    ) as client:
        for method, path, body in parse_requests(args.requests):
            response = await client.request(method, url.netloc, path, body)
            headers = {k.decode(): v.decode() for k, v in response["headers"]}
            if args.json:
                print(json.dumps({"headers": headers, "body": response["body"].decode("latin-1")}))
            else:
                print(f"{method} {path}: {headers.get(':status')} {headers}")
                print(f"  {len(response['body'])} bytes: {response['body'][:80]!r}")
        client.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
