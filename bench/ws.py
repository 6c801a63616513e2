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
- broadcast over two nodes: the same room split over two chat servers
  joined through one nats-server (500 members on each, the sender on the
  first), its p99 against the one-node broadcast's of the same run;
- idle: server memory for 1,000 idle WebSocket connections, against 1,000
  idle HTTP keep-alive connections to the same server;
- deflate: compressed echo (permessage-deflate), 64 connections, 1 KiB of
  JSON, against Node's `ws` with `perMessageDeflate`, with our server
  started with `--ws-deflate`;
- idle-deflate: server memory for 1,000 idle compressed connections, each
  having echoed one compressed message, against 1,000 idle plain ones that
  echoed the same message plain.

Beside each echo's rate: the server's CPU time per echoed message (user +
system from /proc over the whole load, warm-up included, divided by every
echo the client received).

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
import urllib.request
import zlib

from cluster import NATS_PORT, Proc, nats_server_bin, wait_ready
from markdown_report import report, run_facts
from servers import (BenchError, cpu_seconds, log_tail, rss_bytes, start_server, stop_server,
                     wait_until_accepting)

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
PEERS_MANIFEST = "bench/ws-peers/Cargo.toml"
LOAD_MANIFEST = "bench/ws-load/Cargo.toml"
NODE_DIR = "bench/ws-peers/node"

PORTS = {"ours-local": 19300, "ours-system": 19301, "fastwebsockets": 19302,
         "tungstenite": 19303, "node-ws": 19304, "chat-local": 19305,
         "ours-local-deflate": 19306, "ours-system-deflate": 19307, "node-ws-deflate": 19308,
         "chat-a": 19320, "chat-b": 19321}
# The two-node broadcast: nats-server's monitoring (its /connz says which
# node has subscribed to the room), and the room's NATS subject (topic
# `chat` of examples/chat.rs, as src/cluster/subjects.rs names topics).
NATS_MONITOR_PORT = 14223
ROOM_SUBJECT = "upc.t.chat"
ROOM_READY_TIMEOUT = 30.0

UPGRADE = ("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n")
OFFER = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"


class WsServer:
    """One row: how to start it, where its echo is."""

    def __init__(self, name, argv, path, built_by, deflate=False):
        self.name = name
        self.argv = argv
        self.host = "127.0.0.1"
        self.port = PORTS[name]
        self.path = path
        self.built_by = built_by
        # Offers permessage-deflate: the rows of the compressed loads.
        self.deflate = deflate

    @property
    def url(self):
        return f"ws://{self.host}:{self.port}{self.path}"


class ChatCluster:
    """The row of the two-node broadcast: one chat server per node, all on
    one nats-server; members are dealt over their URLs, the sender on the
    first node's."""

    name = "chat-2nodes"

    def __init__(self, chat_bin, nodes=("a", "b")):
        nats = f"nats://127.0.0.1:{NATS_PORT}"
        self.nodes = [WsServer(f"chat-{node}", [chat_bin, f"127.0.0.1:{PORTS['chat-' + node]}", "--nats", nats,
                                                "--node", node], "/chat", "ours")
                      for node in nodes]
        self.node_names = list(nodes)
        self.nats = Proc("nats-server", [nats_server_bin(), "-a", "127.0.0.1", "-p", str(NATS_PORT),
                                         "-m", str(NATS_MONITOR_PORT)], role="backend", port=NATS_PORT)

    @property
    def urls(self):
        return [node.url for node in self.nodes]


class Load:
    """One load: its label and ws-load's options (besides --url and --duration).
    `beside`: the key of the load whose first row this one's p99 is held
    against, and whose rounds this one's alternate with."""

    def __init__(self, key, label, options, broadcast=False, deflate=False, nodes=1, beside=None):
        self.key = key
        self.label = label
        self.options = options
        self.broadcast = broadcast
        self.deflate = deflate
        self.nodes = nodes
        self.beside = beside


LOADS = [
    Load("echo-64-32", "echo, 64 conns, 32 B", ["--connections", "64", "--size", "32"]),
    Load("echo-64-16k", "echo, 64 conns, 16 KiB", ["--connections", "64", "--size", "16384"]),
    Load("echo-1000-32", "echo, 1000 conns, 32 B", ["--connections", "1000", "--size", "32"]),
    Load("open-64-32", "open loop 20000/s, 64 conns, 32 B",
         ["--connections", "64", "--size", "32", "--rate", "20000"]),
    Load("broadcast-1000", "broadcast 100/s to 1000 members, 64 B text",
         ["--broadcast", "--members", "1000", "--size", "64", "--rate", "100"], broadcast=True),
    Load("broadcast-1000-2nodes", "broadcast 100/s to 1000 members on 2 nodes (NATS), 64 B text",
         ["--broadcast", "--members", "1000", "--size", "64", "--rate", "100"], broadcast=True, nodes=2,
         beside="broadcast-1000"),
    Load("deflate-64-1k", "compressed echo, 64 conns, 1 KiB JSON",
         ["--connections", "64", "--size", "1024", "--deflate"], deflate=True),
]


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/run --ws", description=__doc__.split("\n\n")[0])
    p.add_argument("--ws", action="store_true", help="this mode (bench/run passes it on)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per server (default 3)")
    p.add_argument("--duration", type=int, default=10, help="seconds of load per round (default 10)")
    p.add_argument("--no-build", action="store_true", help="use the binaries already built")
    p.add_argument("--only", help="comma-separated rows (ours-local, ours-system, fastwebsockets, "
                   "tungstenite, node-ws, and for the compressed loads ours-local-deflate, "
                   "ours-system-deflate, node-ws-deflate)")
    p.add_argument("--loads", help="comma-separated loads: " + ", ".join(l.key for l in LOADS)
                   + ", idle, idle-deflate")
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
    servers += [WsServer(f"ours-{mode}-deflate",
                         [ours, "--bind", f"127.0.0.1:{PORTS['ours-' + mode + '-deflate']}",
                          "--dispatch", mode, "--ws-deflate"], "/ws", "ours", deflate=True)
                for mode in ("local", "system")]
    servers.append(WsServer("fastwebsockets", [os.path.join(peers, "fastwebsockets-echo"),
                                               f"127.0.0.1:{PORTS['fastwebsockets']}"], "/", "peers"))
    servers.append(WsServer("tungstenite", [os.path.join(peers, "tungstenite-echo"),
                                            f"127.0.0.1:{PORTS['tungstenite']}"], "/", "peers"))
    if shutil.which("node"):
        servers.append(WsServer("node-ws", ["node", os.path.join(NODE_DIR, "echo.js"),
                                            str(PORTS["node-ws"])], "/", "node"))
        servers.append(WsServer("node-ws-deflate", ["node", os.path.join(NODE_DIR, "echo.js"),
                                                    str(PORTS["node-ws-deflate"]), "deflate"],
                                "/", "node", deflate=True))
    else:
        print("bench/run --ws: no node: the node-ws row is left out", file=sys.stderr)
    if args.only:
        wanted = [n.strip() for n in args.only.split(",")]
        servers = [s for s in servers if s.name in wanted]
    loads = LOADS + [Load("idle", "idle memory, 1000 conns", []),
                     Load("idle-deflate", "idle memory, 1000 compressed conns", [], deflate=True)]
    if args.loads:
        wanted = [n.strip() for n in args.loads.split(",")]
        loads = [l for l in loads if l.key in wanted]
    chat = WsServer("chat-local", [os.path.join(target, "release", "examples", "chat"),
                                   f"127.0.0.1:{PORTS['chat-local']}"], "/chat", "ours")
    cluster = ChatCluster(chat.argv[0]) if any(l.nodes > 1 for l in loads) else None
    return servers, loads, chat, cluster, os.path.join(target, "bench-ws", "release", "ws-load")


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


def room_nodes(connz, subject):
    """The nodes with a NATS connection subscribed to `subject`, from
    nats-server's `/connz?subs=1` (our links name themselves NODE/POLLER)."""
    nodes = set()
    for conn in connz.get("connections") or []:
        if subject in (conn.get("subscriptions_list") or []):
            nodes.add((conn.get("name") or "").split("/")[0])
    return nodes


def connz():
    url = f"http://127.0.0.1:{NATS_MONITOR_PORT}/connz?subs=1&limit=4096"
    try:
        with urllib.request.urlopen(url, timeout=2) as page:
            return json.loads(page.read())
    except (OSError, ValueError):
        return {}


def run_cluster_load(load_bin, cluster, load, duration, popens):
    """ws-load over every node's URL, held once its connections are open
    until each node has subscribed to the room on NATS (a node subscribes
    when its first member joins), so no member misses a message for a
    subscription still on its way."""
    cmd = [load_bin, "--duration", str(duration), "--warmup", "1", "--hold"] + load.options
    for url in cluster.urls:
        cmd += ["--url", url]
    # Unbuffered: stderr is read line by line up to `open`, the rest by
    # communicate(), and nothing may sit in a Python buffer in between.
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            bufsize=0)
    try:
        said = b""
        while not said.startswith(b"open"):
            said = proc.stderr.readline()
            if not said:
                _, err = proc.communicate(timeout=10)
                raise BenchError(f"{cluster.name}: ws-load failed: {err.decode(errors='replace').strip()}")
        deadline = time.monotonic() + ROOM_READY_TIMEOUT
        while not set(cluster.node_names) <= room_nodes(connz(), ROOM_SUBJECT):
            for node, popen in zip(cluster.nodes, popens):
                if popen.poll() is not None:
                    raise BenchError(f"{node.name} exited with status {popen.returncode}:\n"
                                     f"{log_tail(popen.log_path)}")
            if time.monotonic() > deadline:
                subscribed = sorted(room_nodes(connz(), ROOM_SUBJECT))
                raise BenchError(f"{cluster.name}: only nodes {subscribed} subscribed to {ROOM_SUBJECT} in "
                                 f"{ROOM_READY_TIMEOUT:.0f} s:\n"
                                 + "\n".join(log_tail(p.log_path) for p in popens))
            time.sleep(0.02)
        out, err = proc.communicate(b"go\n", timeout=duration + 120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise BenchError(f"{cluster.name}: ws-load failed: {err.decode(errors='replace').strip()}")
    result = json.loads(out)
    for part in result.get("per_url") or []:
        if not part["messages"]:
            raise BenchError(f"{cluster.name}: the members at {part['url']} received nothing: "
                             "the room did not span the nodes")
    result["cpu_us_per_msg"] = None
    return result


def measure_cluster(cluster, load, args, load_bin, log_dir, round_no):
    """One round of the two-node broadcast: a fresh nats-server and chat
    servers (so no connection of an earlier round is still listed as
    subscribed), the load, and everything stopped again."""
    started = []
    try:
        popen = start_server(cluster.nats, log_dir, round_no)
        started.append(popen)
        wait_ready(cluster.nats, popen)
        nodes = []
        for node in cluster.nodes:
            popen = start_server(node, log_dir, round_no)
            started.append(popen)
            nodes.append(popen)
            wait_until_accepting(node, popen)
        return run_cluster_load(load_bin, cluster, load, args.duration, nodes)
    finally:
        for popen in reversed(started):
            stop_server(popen)


def run_load(load_bin, server, load, duration, pid):
    cmd = [load_bin, "--url", server.url, "--duration", str(duration), "--warmup", "1"] + load.options
    cpu_before = cpu_seconds(pid)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 120)
    cpu = cpu_seconds(pid) - cpu_before
    if done.returncode != 0:
        raise BenchError(f"{server.name}: ws-load failed: {done.stderr.strip()}")
    result = json.loads(done.stdout)
    # The server's CPU per echo, warm-up included on both sides of the
    # division (its rusage, as /proc keeps it, in clock ticks).
    echoes = result.get("messages_all") or 0
    result["cpu_us_per_msg"] = cpu * 1e6 / echoes if echoes and not load.broadcast else None
    return result


# What an idle connection says once before it idles (long enough for any
# server's compression threshold: Node's ws has 1 KiB).
HELLO = b'{"hello":"world","n":1},' * 60


def masked_frame(first, payload):
    """A masked client frame: `first` (FIN, RSV1, opcode) and `payload`."""
    mask = b"\x12\x34\x56\x78"
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    if len(payload) < 126:
        head = bytes([first, 0x80 | len(payload)])
    else:
        head = bytes([first, 0x80 | 126]) + len(payload).to_bytes(2, "big")
    return head + mask + masked


def compressed_message(text):
    """A masked client text frame carrying `text` compressed as one
    permessage-deflate message (RSV1 set, the sync flush's trailer off)."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    payload = compressor.compress(text) + compressor.flush(zlib.Z_SYNC_FLUSH)
    assert payload.endswith(b"\x00\x00\xff\xff")
    return masked_frame(0xc1, payload[:-4])


def idle_memory(server, proc, kind, count=1000):
    """Server RSS growth per connection for `count` idle connections of
    `kind`: WebSockets; compressed WebSockets, each having echoed one
    compressed message first (so any zlib state it keeps is made); plain
    ones having echoed the same message plain (what the compressed kind is
    held against); or HTTP keep-alive (ours only: the peers serve no HTTP).
    Each kind in a fresh process, so neither reuses the other's memory."""
    hello = None
    if kind == "ws":
        request, expect = UPGRADE.format(path=server.path, extra="").encode(), b"HTTP/1.1 101"
    elif kind == "ws-hello":
        request, expect = UPGRADE.format(path=server.path, extra="").encode(), b"HTTP/1.1 101"
        hello = masked_frame(0x81, HELLO)
    elif kind == "ws-deflate":
        request, expect = UPGRADE.format(path=server.path, extra=OFFER).encode(), b"HTTP/1.1 101"
        hello = compressed_message(HELLO)
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
            if hello is not None:
                compressed = kind == "ws-deflate"
                if compressed and b"permessage-deflate" not in got.lower():
                    raise BenchError(f"{server.name}: permessage-deflate was not agreed")
                s.sendall(hello)
                rest = got[got.index(b"\r\n\r\n") + 4:]
                while len(rest) < 2:
                    rest += s.recv(65536)
                if compressed and rest[0] & 0x40 == 0:
                    raise BenchError(f"{server.name}: the echo came back uncompressed")
        time.sleep(1.0)
        return (rss_bytes(proc.pid) - before) / count
    finally:
        for s in sockets:
            s.close()


def measure(server, load, args, load_bin, log_dir, round_no):
    proc = start_server(server, log_dir, round_no)
    try:
        wait_until_accepting(server, proc)
        if not load.key.startswith("idle"):
            return run_load(load_bin, server, load, args.duration, proc.pid)
        ws = idle_memory(server, proc, "ws-deflate" if load.deflate else "ws")
    finally:
        stop_server(proc)
    if load.deflate:
        # Against the same server's plain WebSockets, having echoed the
        # same message plain.
        proc = start_server(server, log_dir, round_no)
        try:
            wait_until_accepting(server, proc)
            plain = idle_memory(server, proc, "ws-hello")
        finally:
            stop_server(proc)
        return {"ws_bytes_per_conn": ws, "http_bytes_per_conn": plain}
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


def cells_for(load, results, base, against=None):
    """Table rows for one load: (row name, value cells, ratio). `against`:
    the rounds of the row a `beside` load is held against (the one-node
    broadcast's), whose median p99 its rows' p99 is divided by."""
    rows = []
    base_result = results.get(base)
    for name, rounds in results.items():
        if load.key.startswith("idle"):
            ws = median([r["ws_bytes_per_conn"] for r in rounds])
            http = median([r["http_bytes_per_conn"] for r in rounds])
            cells = [f"{ws / 1024:.1f} KiB" if ws is not None else "-", "",
                     f"{http / 1024:.1f} KiB" if http is not None else "-", "", ""]
            against = "plain WS" if load.deflate else "HTTP"
            ratio = f"{ws / http:.2f}x of {against}" if ws and http else ""
        else:
            rate = median([r["per_second"] for r in rounds])
            cpu = median([r.get("cpu_us_per_msg") for r in rounds])
            p50 = median([r["latency_us"]["p50"] for r in rounds])
            p99 = median([r["latency_us"]["p99"] for r in rounds])
            p999 = median([r["latency_us"]["p999"] for r in rounds])
            cells = [f"{rate:,.0f}", f"{cpu:.2f}" if cpu is not None else "-",
                     f"{p50:,.0f}", f"{p99:,.0f}", f"{p999:,.0f}"]
            ratio = ""
            if base_result and name != base:
                base_rate = median([r["per_second"] for r in base_result])
                base_cpu = median([r.get("cpu_us_per_msg") for r in base_result])
                base_p99 = median([r["latency_us"]["p99"] for r in base_result])
                if load.options and "--rate" in load.options:
                    ratio = f"p99 {p99 / base_p99:.2f}x" if base_p99 else ""
                else:
                    ratio = f"{rate / base_rate:.2f}x" if base_rate else ""
                    if base_cpu and cpu:
                        ratio += f", CPU/msg {base_cpu / cpu:.2f}x"
            if against:
                one_node = median([r["latency_us"]["p99"] for r in against])
                ratio = f"p99 vs one node {p99 / one_node:.2f}x" if one_node else ""
            if load.broadcast:
                lost = sum(r.get("lost", 0) for r in rounds)
                due = sum(r.get("sent", 0) * load_members(load) for r in rounds)
                ratio = "; ".join(part for part in [ratio, f"lost {lost:,} of {due:,}"] if part)
        rows.append((name, cells, ratio))
    return rows


def load_members(load):
    """The members of a broadcast load (its `--members`)."""
    return int(load.options[load.options.index("--members") + 1])


def round_groups(loads):
    """The loads in the order they run, grouped: a load `beside` another
    that runs too joins its group, and a group's rounds alternate its loads
    (round 1 of each, round 2 of each, ...), so a drift of a shared machine
    hits both figures of a ratio alike."""
    groups = []
    for load in loads:
        home = next((g for g in groups if load.beside in [l.key for l in g]), None)
        if home is None:
            groups.append([load])
        else:
            home.append(load)
    return groups


def main(argv):
    args = parse_args(argv)
    os.chdir(REPO_ROOT)
    try:
        servers, loads, chat, cluster, load_bin = plan(args)
        # The broadcast loads run the chat example only: no peer to build.
        build(args, servers if any(not l.broadcast for l in loads) else [], load_bin)
        command = "bench/run " + shlex.join(argv)
        print(f"$ {command}")
        print(f"== {args.rounds} round(s) of {args.duration} s, rows {[s.name for s in servers]}", flush=True)
        results = {}
        with tempfile.TemporaryDirectory(prefix="bench-ws-") as log_dir:
            for group in round_groups(loads):
                rows = {}
                for load in group:
                    if load.nodes > 1:
                        rows[load.key] = [cluster]
                    elif load.broadcast:
                        rows[load.key] = [chat]
                    else:
                        rows[load.key] = [s for s in servers if s.deflate == load.deflate]
                    results[load.key] = {s.name: [] for s in rows[load.key]}
                for round_no in range(args.rounds):
                    for load in group:
                        for server in rows[load.key]:
                            if load.nodes > 1:
                                result = measure_cluster(server, load, args, load_bin, log_dir, round_no)
                            else:
                                result = measure(server, load, args, load_bin, log_dir, round_no)
                            results[load.key][server.name].append(result)
                            print(f"   {load.key} round {round_no + 1} {server.name}: {json.dumps(result)}",
                                  flush=True)
        header = ["load", "server", "msgs/s (idle: WS per conn)", "server CPU us/msg",
                  "p50 us (idle: HTTP or plain WS per conn)", "p99 us", "p99.9 us",
                  "vs first row (2 nodes: p99 vs one node)"]
        table = []
        for load in loads:
            base = next(iter(results[load.key]))
            beside = results.get(load.beside)
            against = next(iter(beside.values())) if beside else None
            for name, cells, ratio in cells_for(load, results[load.key], base, against):
                table.append([load.label, name] + cells + [ratio])
        caption = (f"Medians over {args.rounds} round(s) of {args.duration} s; latency in microseconds (open "
                   "and broadcast loads: from when each message was due); server CPU per echoed message from "
                   "its user + system time over the load; ratio to the load's first row: round trips/s "
                   "(and the first row's CPU per message over this row's: above 1 costs this row less), "
                   "or p99 latency for fixed-rate loads; the two-node broadcast's p99 over the one-node "
                   "broadcast's of this run (issue #28's target: at most 2x); broadcasts: the messages "
                   "members never got (the members read on for up to 10 s after the run), over every "
                   "member of every round.")
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
