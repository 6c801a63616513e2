#!/usr/bin/env python3
"""bench/durable.py: counters whose count outlives the process, under load.

`POST /count` at -c64 (wrk -t1), one configuration at a time, rounds
alternating, against:

- ours-memory: the binary's `/count` without --state (the state in memory);
- ours-dir: `/count` with `--state DIR` (redb, a count answered once saved);
- redb-peer: bench/durable-peer, actix-web 4 with a redb write transaction per
  request on actix's blocking pool: what a user would write instead;
- ours-jetstream: `/count` with `--state jetstream` (placed `counter@*`, its
  state in a JetStream KV bucket), on a nats-server with `-js` and
  `sync_interval: always`;
- kv-peer: bench/durable-peer, actix-web 4 with async-nats KV, get then update
  at the revision read.

With --pinned (the default), each server runs on CPU 0 (`taskset -c 0`, one
poller or one worker) beside its nats-server, and wrk on CPU 1; the table then
gives, besides requests per second, the server's CPU per request (user and
system, every thread, from /proc) and nats-server's. Rates on shared cores
swing with the scheduler; CPU per request does not. `--shared` runs them
unpinned (the default pollers and workers).

Each server's answers are checked before the load: a fresh count starts at 1,
and every request of the load must be a 200 (wrk's non-2xx count is zero).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from markdown_report import report, run_facts  # noqa: E402
from servers import BenchError, cpu_seconds, start_server, stop_server, wait_until_accepting  # noqa: E402
from wrk_report import run_wrk, wrk_argv  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
PEER_MANIFEST = os.path.join(BENCH_DIR, "durable-peer", "Cargo.toml")
PORT = 19310
NATS_PORT = 14322
CONFIGS = ("ours-memory", "ours-dir", "redb-peer", "ours-jetstream", "kv-peer")
POST_LUA = 'wrk.method = "POST"\n'
READY = 10.0


class Server:
    def __init__(self, name, argv, host="127.0.0.1", port=PORT):
        self.name, self.argv, self.host, self.port = name, argv, host, port
        self.url = f"http://{host}:{port}/count"


def build(args):
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release"], cwd=REPO_ROOT, check=True)
        subprocess.run(["cargo", "build", "--release", "--manifest-path", PEER_MANIFEST], check=True)
    ours = os.path.join(REPO_ROOT, "target", "release", "uppercut-mio-server")
    peer = os.path.join(BENCH_DIR, "durable-peer", "target", "release", "durable-peer")
    for binary in (ours, peer):
        if not os.access(binary, os.X_OK):
            raise BenchError(f"{binary} is missing: build it, or leave out --no-build")
    return ours, peer


def nats_server():
    """The nats-server to run: NATS_SERVER, else one on the PATH that takes
    sync_interval (2.10 and later), else the one scripts/nats-server.sh builds."""
    candidates = [os.environ.get("NATS_SERVER"), os.path.join(REPO_ROOT, "target", "nats-server-2.12", "nats-server"),
                  shutil.which("nats-server")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            version = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
            minor = int(version.split("v2.")[1].split(".")[0]) if "v2." in version else 0
            if minor >= 10:
                return candidate
    raise BenchError("no nats-server 2.10 or later (sync_interval: always): set NATS_SERVER, "
                     "or run a script that sources scripts/nats-server.sh once")


def configurations(args, ours, peer, scratch):
    pin = ["taskset", "-c", "0"] if args.pinned else []
    pollers = ["--pollers", "1"] if args.pinned else []
    workers = ["--workers", "1"] if args.pinned else []
    nats = f"nats://127.0.0.1:{NATS_PORT}"
    bind = ["--bind", f"127.0.0.1:{PORT}"]
    made = {
        "ours-memory": [*pin, ours, *bind, *pollers],
        "ours-dir": [*pin, ours, *bind, *pollers, "--state", os.path.join(scratch, "state")],
        "redb-peer": [*pin, peer, "redb", *bind[0:2], "--file", os.path.join(scratch, "peer.redb"), *workers],
        "ours-jetstream": [*pin, ours, *bind, *pollers, "--nats", nats, "--node", "a", "--state", "jetstream"],
        "kv-peer": [*pin, peer, "kv", *bind[0:2], "--nats", nats, *workers],
    }
    return [Server(name, made[name]) for name in args.configs]


def start_nats(args, scratch):
    store = os.path.join(scratch, "js")
    shutil.rmtree(store, ignore_errors=True)
    conf = os.path.join(scratch, "nats.conf")
    with open(conf, "w") as f:
        f.write(f'listen: "127.0.0.1:{NATS_PORT}"\njetstream {{ store_dir: "{store}", sync_interval: always }}\n')
    argv = ["taskset", "-c", "0"] if args.pinned else []
    argv += [args.nats_server, "-c", conf]
    nats = Server("nats-server", argv, port=NATS_PORT)
    proc = start_server(nats, scratch, 0)
    wait_until_accepting(nats, proc)
    return proc


def post(url):
    """The first POST's answer; a 503 (NATS not yet connected, a bucket being
    made) counted nothing, and is asked again for up to READY seconds."""
    deadline = time.monotonic() + READY
    while True:
        request = urllib.request.Request(url, method="POST", data=b"")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as e:
            if e.code != 503 or time.monotonic() > deadline:
                return e.code, e.read().decode()
        time.sleep(0.05)


def fresh(scratch):
    for name in ("state", "peer.redb"):
        path = os.path.join(scratch, name)
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else (os.path.exists(path) and os.remove(path))


def one_round(args, server, scratch, script, round_no):
    fresh(scratch)
    nats = start_nats(args, scratch) if server.name in ("ours-jetstream", "kv-peer") else None
    proc = None
    try:
        proc = start_server(server, scratch, round_no)
        wait_until_accepting(server, proc)
        status, body = post(server.url)
        if (status, body) != (200, "1\n"):
            raise BenchError(f"{server.name}: a fresh count answered {status} {body!r}, not 200 '1\\n'")
        before = cpu_times(proc.pid), nats and cpu_seconds(nats.pid)
        cmd = wrk_argv(["-t1", f"-c{args.connections}"], args.duration, script, server.url)
        if args.pinned:
            cmd = ["taskset", "-c", "1", *cmd]
        result = run_wrk(cmd, args.duration)
        after = cpu_times(proc.pid), nats and cpu_seconds(nats.pid)
        if result["non_2xx"] or result["socket_errors"]:
            raise BenchError(f"{server.name}: {result['non_2xx']} non-2xx answers, "
                             f"{result['socket_errors']} socket errors under load")
        requests = result["requests"] or 1
        user = (after[0][0] - before[0][0]) / requests * 1e6
        system = (after[0][1] - before[0][1]) / requests * 1e6
        store = (after[1] - before[1]) / requests * 1e6 if nats else None
        return {"rps": result["rps"], "p99": result["p99"], "user": user, "system": system, "nats": store}
    finally:
        if proc:
            stop_server(proc)
        if nats:
            stop_server(nats)


def cpu_times(pid):
    """User and system CPU seconds of process `pid` (every thread)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=5, help="seconds of load per round")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--shared", dest="pinned", action="store_false",
                        help="unpinned, default pollers and workers (shared-core rps)")
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if args.pinned and len(os.sched_getaffinity(0)) < 2:
        raise BenchError("--pinned needs two CPUs (server on 0, wrk on 1)")
    ours, peer = build(args)
    if any(name in ("ours-jetstream", "kv-peer") for name in args.configs):
        args.nats_server = nats_server()
    scratch = tempfile.mkdtemp(prefix="upc-durable-bench-")
    script = os.path.join(scratch, "post.lua")
    with open(script, "w") as f:
        f.write(POST_LUA)
    servers = configurations(args, ours, peer, scratch)
    results = {server.name: [] for server in servers}
    try:
        for round_no in range(args.rounds):
            for server in servers:
                outcome = one_round(args, server, scratch, script, round_no)
                results[server.name].append(outcome)
                print(f"round {round_no}: {server.name}: {outcome['rps']:.0f} rps, "
                      f"{outcome['user'] + outcome['system']:.1f} µs CPU/request", file=sys.stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rows = []
    median = lambda name, key: statistics.median(r[key] for r in results[name])  # noqa: E731
    for name in results:
        cpu = median(name, "user") + median(name, "system")
        nats = median(name, "nats") if results[name][0]["nats"] is not None else None
        rows.append([name, f"{median(name, 'rps'):.0f}", f"{median(name, 'p99') * 1e3:.2f}",
                     f"{median(name, 'user'):.1f}", f"{median(name, 'system'):.1f}", f"{cpu:.1f}",
                     "-" if nats is None else f"{nats:.1f}"])
    header = ["server", "rps", "p99 ms", "user µs/req", "system µs/req", "CPU µs/req", "nats-server µs/req"]
    mode = "pinned: server (and nats-server) on CPU 0, wrk on CPU 1" if args.pinned else "shared cores"
    caption = f"POST /count, wrk -t1 -c{args.connections}, {args.rounds} rounds of {args.duration} s, medians ({mode})"
    command = "bench/durable.py " + " ".join(sys.argv[1:])
    if args.markdown:
        print(report(run_facts(REPO_ROOT, command), caption, header, rows))
    else:
        print(caption)
        for row in [header, *rows]:
            print("  ".join(f"{cell:>14}" for cell in row))


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"durable.py: {e}", file=sys.stderr)
        sys.exit(1)
