"""bench/ws.py: `bench/run --ws`, WebSocket echo and broadcast loads.

Rows: our server's `/ws` echo in each dispatch mode, and echo servers of
the field: fastwebsockets and tokio-tungstenite (bench/ws-peers, crates.io)
and Node's `ws` (bench/ws-peers/node, npm; skipped without node). Loads,
through our own client (bench/ws-load: closed loop, or open loop measured
from when each message was due):

- echo: round trips per second, 64 and 1,000 connections, 32-byte and
  16 KiB messages, closed loop;
- open: 64 connections, 32-byte messages at a fixed total rate;
- broadcast (ours only: the chat example's room): one sender, 1,000
  members, a fixed rate; latency from when a message was due to each
  member's receipt;
- idle: server memory for 1,000 idle WebSocket connections, against 1,000
  idle HTTP keep-alive connections to the same server.

Servers run one at a time, rounds alternating; the table shows medians and
each row's ratio to the base row (round trips/s; for open and broadcast
loads, latency).
"""

import argparse
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from markdown_report import report, run_facts
from servers import (BenchError, rss_bytes, start_server, stop_server, wait_until_accepting)

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
PEERS_MANIFEST = "bench/ws-peers/Cargo.toml"
LOAD_MANIFEST = "bench/ws-load/Cargo.toml"
NODE_DIR = "bench/ws-peers/node"

PORTS = {"ours-local": 19300, "ours-system": 19301, "fastwebsockets": 19302,
         "tungstenite": 19303, "node-ws": 19304, "chat-local": 19305}

UPGRADE = ("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


class WsServer:
    """One row: how to start it, where its echo is."""

    def __init__(self, name, argv, path, built_by):
        self.name = name
        self.argv = argv
        self.host = "127.0.0.1"
        self.port = PORTS[name]
        self.path = path
        self.built_by = built_by

    @property
    def url(self):
        return f"ws://{self.host}:{self.port}{self.path}"


class Load:
    """One load: its label and ws-load's options (besides --url and --duration)."""

    def __init__(self, key, label, options, broadcast=False):
        self.key = key
        self.label = label
        self.options = options
        self.broadcast = broadcast


LOADS = [
    Load("echo-64-32", "echo, 64 conns, 32 B", ["--connections", "64", "--size", "32"]),
    Load("echo-64-16k", "echo, 64 conns, 16 KiB", ["--connections", "64", "--size", "16384"]),
    Load("echo-1000-32", "echo, 1000 conns, 32 B", ["--connections", "1000", "--size", "32"]),
    Load("open-64-32", "open loop 20000/s, 64 conns, 32 B",
         ["--connections", "64", "--size", "32", "--rate", "20000"]),
    Load("broadcast-1000", "broadcast 100/s to 1000 members, 64 B text",
         ["--broadcast", "--members", "1000", "--size", "64", "--rate", "100"], broadcast=True),
]


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/run --ws", description=__doc__.split("\n\n")[0])
    p.add_argument("--ws", action="store_true", help="this mode (bench/run passes it on)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per server (default 3)")
    p.add_argument("--duration", type=int, default=10, help="seconds of load per round (default 10)")
    p.add_argument("--no-build", action="store_true", help="use the binaries already built")
    p.add_argument("--only", help="comma-separated rows (ours-local, ours-system, fastwebsockets, "
                   "tungstenite, node-ws)")
    p.add_argument("--loads", help="comma-separated loads: " + ", ".join(l.key for l in LOADS) + ", idle")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown with the run's facts")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.duration < 1:
        p.error("--rounds and --duration must be at least 1")
    return args


def target_dir():
    return os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO_ROOT, "target")


def plan(args):
    target = target_dir()
    ours = os.path.join(target, "release", "uppercut-mio-server")
    peers = os.path.join(target, "bench-ws", "release")
    servers = [WsServer(f"ours-{mode}", [ours, "--bind", f"127.0.0.1:{PORTS['ours-' + mode]}",
                                         "--dispatch", mode], "/ws", "ours")
               for mode in ("local", "system")]
    servers.append(WsServer("fastwebsockets", [os.path.join(peers, "fastwebsockets-echo"),
                                               f"127.0.0.1:{PORTS['fastwebsockets']}"], "/", "peers"))
    servers.append(WsServer("tungstenite", [os.path.join(peers, "tungstenite-echo"),
                                            f"127.0.0.1:{PORTS['tungstenite']}"], "/", "peers"))
    if shutil.which("node"):
        servers.append(WsServer("node-ws", ["node", os.path.join(NODE_DIR, "echo.js"),
                                            str(PORTS["node-ws"])], "/", "node"))
    else:
        print("bench/run --ws: no node: the node-ws row is left out", file=sys.stderr)
    if args.only:
        wanted = [n.strip() for n in args.only.split(",")]
        servers = [s for s in servers if s.name in wanted]
    loads = LOADS + [Load("idle", "idle memory, 1000 conns", [])]
    if args.loads:
        wanted = [n.strip() for n in args.loads.split(",")]
        loads = [l for l in loads if l.key in wanted]
    chat = WsServer("chat-local", [os.path.join(target, "release", "examples", "chat"),
                                   f"127.0.0.1:{PORTS['chat-local']}"], "/chat", "ours")
    return servers, loads, chat, os.path.join(target, "bench-ws", "release", "ws-load")


def build(args, servers, load_bin):
    if args.no_build:
        for path in [load_bin] + [s.argv[0] for s in servers if s.built_by in ("ours", "peers")]:
            if not os.access(path, os.X_OK):
                raise BenchError(f"{path} is not built (drop --no-build)")
        return
    target = target_dir()
    steps = [(["cargo", "build", "--release", "--bin", "uppercut-mio-server", "--example", "chat"],
              target, "uppercut-mio-server and the chat example"),
             (["cargo", "build", "--release", "--manifest-path", LOAD_MANIFEST],
              os.path.join(target, "bench-ws"), "ws-load")]
    if any(s.built_by == "peers" for s in servers):
        steps.append((["cargo", "build", "--release", "--manifest-path", PEERS_MANIFEST],
                      os.path.join(target, "bench-ws"), "the Rust peers"))
    for cmd, directory, what in steps:
        print(f"== building {what}: {' '.join(cmd)}", flush=True)
        env = dict(os.environ, CARGO_TARGET_DIR=directory)
        if subprocess.run(cmd, env=env).returncode != 0:
            raise BenchError(f"building {what} failed")
    if any(s.built_by == "node" for s in servers) and not os.path.isdir(os.path.join(NODE_DIR, "node_modules")):
        print("== installing ws for node (npm install)", flush=True)
        if subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=NODE_DIR).returncode != 0:
            raise BenchError("npm install failed")


def run_load(load_bin, server, load, duration):
    cmd = [load_bin, "--url", server.url, "--duration", str(duration), "--warmup", "1"] + load.options
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 120)
    if done.returncode != 0:
        raise BenchError(f"{server.name}: ws-load failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def idle_memory(server, proc, kind, count=1000):
    """Server RSS growth per connection for `count` idle connections of
    `kind`: WebSockets, or HTTP keep-alive (ours only: the peers serve no
    HTTP). Each kind in a fresh process, so neither reuses the other's
    memory."""
    if kind == "ws":
        request, expect = UPGRADE.format(path=server.path).encode(), b"HTTP/1.1 101"
    else:
        request, expect = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b"HTTP/1.1 200"
    sockets = []
    before = rss_bytes(proc.pid)
    try:
        for _ in range(count):
            s = socket.create_connection((server.host, server.port))
            s.sendall(request)
            sockets.append(s)
        for s in sockets:
            got = b""
            while b"\r\n\r\n" not in got:
                chunk = s.recv(65536)
                if not chunk:
                    raise BenchError(f"{server.name}: closed while opening idle connections")
                got += chunk
            if not got.startswith(expect):
                raise BenchError(f"{server.name}: unexpected answer {got[:40]!r}")
        time.sleep(1.0)
        return (rss_bytes(proc.pid) - before) / count
    finally:
        for s in sockets:
            s.close()


def measure(server, load, args, load_bin, log_dir, round_no):
    proc = start_server(server, log_dir, round_no)
    try:
        wait_until_accepting(server, proc)
        if load.key != "idle":
            return run_load(load_bin, server, load, args.duration)
        ws = idle_memory(server, proc, "ws")
    finally:
        stop_server(proc)
    http = None
    if server.built_by == "ours":
        proc = start_server(server, log_dir, round_no)
        try:
            wait_until_accepting(server, proc)
            http = idle_memory(server, proc, "http")
        finally:
            stop_server(proc)
    return {"ws_bytes_per_conn": ws, "http_bytes_per_conn": http}


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def cells_for(load, results, base):
    """Table rows for one load: (row name, value cells, ratio)."""
    rows = []
    base_result = results.get(base)
    for name, rounds in results.items():
        if load.key == "idle":
            ws = median([r["ws_bytes_per_conn"] for r in rounds])
            http = median([r["http_bytes_per_conn"] for r in rounds])
            cells = [f"{ws / 1024:.1f} KiB" if ws is not None else "-",
                     f"{http / 1024:.1f} KiB" if http is not None else "-", "", ""]
            ratio = f"{ws / http:.2f}x of HTTP" if ws and http else ""
        else:
            rate = median([r["per_second"] for r in rounds])
            p50 = median([r["latency_us"]["p50"] for r in rounds])
            p99 = median([r["latency_us"]["p99"] for r in rounds])
            p999 = median([r["latency_us"]["p999"] for r in rounds])
            cells = [f"{rate:,.0f}", f"{p50:,.0f}", f"{p99:,.0f}", f"{p999:,.0f}"]
            ratio = ""
            if base_result and name != base:
                base_rate = median([r["per_second"] for r in base_result])
                base_p99 = median([r["latency_us"]["p99"] for r in base_result])
                if load.options and "--rate" in load.options:
                    ratio = f"p99 {p99 / base_p99:.2f}x" if base_p99 else ""
                else:
                    ratio = f"{rate / base_rate:.2f}x" if base_rate else ""
        rows.append((name, cells, ratio))
    return rows


def main(argv):
    args = parse_args(argv)
    os.chdir(REPO_ROOT)
    try:
        servers, loads, chat, load_bin = plan(args)
        build(args, servers, load_bin)
        command = "bench/run " + shlex.join(argv)
        print(f"$ {command}")
        print(f"== {args.rounds} round(s) of {args.duration} s, rows {[s.name for s in servers]}", flush=True)
        results = {}
        with tempfile.TemporaryDirectory(prefix="bench-ws-") as log_dir:
            for load in loads:
                rows = [chat] if load.broadcast else servers
                results[load.key] = {s.name: [] for s in rows}
                for round_no in range(args.rounds):
                    for server in rows:
                        result = measure(server, load, args, load_bin, log_dir, round_no)
                        results[load.key][server.name].append(result)
                        print(f"   {load.key} round {round_no + 1} {server.name}: {json.dumps(result)}", flush=True)
        header = ["load", "server", "msgs/s (idle: WS per conn)", "p50 us (idle: HTTP per conn)",
                  "p99 us", "p99.9 us", "vs first row"]
        table = []
        for load in loads:
            base = next(iter(results[load.key]))
            for name, cells, ratio in cells_for(load, results[load.key], base):
                table.append([load.label, name] + cells + [ratio])
        caption = (f"Medians over {args.rounds} round(s) of {args.duration} s; latency in microseconds (open "
                   "and broadcast loads: from when each message was due); ratio to the load's first row: "
                   "round trips/s, or p99 latency for fixed-rate loads.")
        if args.markdown:
            print(report(run_facts(REPO_ROOT, command), caption, header, table, text_columns=2))
        else:
            print()
            print(caption)
            widths = [max(len(str(r[i])) for r in [header] + table) for i in range(len(header))]
            for row in [header] + table:
                print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
        return 0
    except BenchError as e:
        print(f"bench/run --ws: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench/run --ws: interrupted", file=sys.stderr)
        return 130
