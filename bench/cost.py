"""bench/cost.py: `bench/run --cost`, what each request costs the server, pinned.

The server runs on one CPU (`taskset -c 0`, our server with `--pollers 1`,
the peers with one worker), the load generator on another (`taskset -c 1`),
so neither takes the other's core and the scheduler's interleaving of the
two is out of the figures. Per server and load it reports:

- CPU per request: the user and system CPU time of the server's process
  tree (the process and every thread of it, from /proc/PID/stat, and the
  processes it forked, as nginx's workers, from theirs), read before and
  after the load, divided by the requests the load generator counted;
- system calls per request: `perf stat -e raw_syscalls:sys_enter -p PIDS`
  over the same window (perf starts disabled and is switched on and off
  through its control FIFO around the load); with --cost-mix also each
  call's share, from the `syscalls:sys_enter_*` tracepoints;
- requests per second (WebSocket loads: round trips per second).

Rounds alternate the servers within a load (one server up at a time, each
round a fresh process), and the table holds medians with the min-max spread,
and on every peer's row our figures over the peer's.

Loads: HTTP/1.1 keep-alive, a connection per request, pipelined and the typed
JSON route (wrk -t1); HTTPS keep-alive and a handshake per request; HTTP/2
over TLS and h2c (h2load -t1 -c16 -m16); WebSocket echo at 32 B and 16 KiB,
and compressed (bench/ws-load --threads 1); the cluster's remote call
(bench/cluster.py's ours-remote and actix-nats). Rows: ours, actix-web
(bench/actix-hello), nginx (one worker) where it serves the same, the limit
probe (bench/limit-probe) for plain keep-alive and pipelined HTTP/1.1, and
fastwebsockets and Node's ws for WebSockets.
"""

import argparse
import contextlib
import copy
import json
import os
import resource
import select
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from markdown_report import report, run_facts, table
from servers import BenchError, log_tail, make_certificate, start_server, stop_server, wait_until_accepting
from wrk_report import run_wrk, wrk_argv

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

ACTIX_MANIFEST = "bench/actix-hello/Cargo.toml"
PROBE_MANIFEST = "bench/limit-probe/Cargo.toml"
WS_LOAD_MANIFEST = "bench/ws-load/Cargo.toml"
WS_PEERS_MANIFEST = "bench/ws-peers/Cargo.toml"
CLUSTER_PEER_MANIFEST = "bench/cluster-peer/Cargo.toml"
NODE_DIR = "bench/ws-peers/node"

# Ports of this mode's own, away from the other modes'. nginx listens on
# all three of its ports at once: HTTP/1.1, TLS (h2 or http/1.1 by ALPN),
# and h2c with prior knowledge (nginx 1.22's `listen ... http2` takes
# nothing else on a plain port).
PORTS = {"ours": (19500, 19501), "actix": (19510, 19511), "nginx": (19520, 19521), "probe": (19530, None),
         "fastwebsockets": (19540, None), "node-ws": (19541, None)}
NGINX_H2C_PORT = 19522
# Extra builds or flags of ours (--ours-row) take ports from here on.
OURS_ROW_PORTS = 19560

# A peer's settle after it accepts, before its process tree is read: nginx
# forks its worker after opening its listeners.
SETTLE = 0.3
QUICK = (1, 2)  # --quick: rounds, seconds


class Load:
    """One load: the tool ("wrk", "h2load", "ws" or "cluster"), its
    options, its scheme and path, and the rows it runs."""

    def __init__(self, key, label, tool, options, rows, tls=False, path="/", script=None, h2c=False,
                 deflate=False):
        self.key = key
        self.label = label
        self.tool = tool
        self.options = options
        self.rows = rows
        self.tls = tls
        self.path = path
        self.script = script
        self.h2c = h2c
        self.deflate = deflate

    def display(self, duration):
        if self.tool == "wrk" or self.tool == "cluster":
            script = ["-s", self.script] if self.script else []
            return shlex.join(["wrk", *self.options, "-d", f"{duration}s", *script, self.scheme() + "://HOST" + self.path])
        if self.tool == "h2load":
            return shlex.join(["h2load", *self.options, "-D", str(duration), self.scheme() + "://HOST" + self.path])
        return shlex.join(["ws-load", *self.options, "--duration", str(duration), "--url", "ws://HOST/PATH"])

    def scheme(self):
        return "https" if self.tls else "http"


H1_ROWS = ("ours", "actix", "nginx", "probe")
LOADS = [
    Load("h1", "HTTP/1.1 keep-alive", "wrk", ["-t1", "-c64"], H1_ROWS),
    Load("h1-close", "HTTP/1.1 conn per request", "wrk", ["-t1", "-c32", "-H", "Connection: close"],
         ("ours", "actix", "nginx")),
    Load("h1-pipeline", "HTTP/1.1 pipelined x16", "wrk", ["-t1", "-c64"], H1_ROWS, script="bench/pipeline.lua"),
    Load("json", "typed JSON route", "wrk", ["-t1", "-c64"], ("ours", "actix"), path="/hello/json",
         script="bench/post-json.lua"),
    Load("tls", "HTTPS keep-alive", "wrk", ["-t1", "-c64"], ("ours", "actix", "nginx"), tls=True),
    Load("tls-close", "HTTPS handshake per request", "wrk", ["-t1", "-c32", "-H", "Connection: close"],
         ("ours", "actix", "nginx"), tls=True),
    Load("h2-tls", "HTTP/2 over TLS", "h2load", ["-t1", "-c16", "-m16"], ("ours", "actix", "nginx"), tls=True),
    Load("h2c", "HTTP/2 h2c", "h2load", ["-t1", "-c16", "-m16"], ("ours", "actix", "nginx"), h2c=True),
    Load("ws-32", "WebSocket echo 32 B", "ws", ["--connections", "64", "--size", "32", "--threads", "1"],
         ("ours", "fastwebsockets")),
    Load("ws-16k", "WebSocket echo 16 KiB", "ws", ["--connections", "64", "--size", "16384", "--threads", "1"],
         ("ours", "fastwebsockets")),
    Load("ws-deflate", "WebSocket compressed echo 1 KiB", "ws",
         ["--connections", "64", "--size", "1024", "--deflate", "--threads", "1"], ("ours", "node-ws"),
         deflate=True),
    Load("cluster", "cluster remote call", "cluster", ["-t1", "-c64"], ("ours", "actix"), path="/remote"),
]
LOAD_KEYS = [load.key for load in LOADS]
# The peers, by the names the rows carry in the table.
ROW_NAMES = {"ours": "ours", "actix": "actix-web", "nginx": "nginx", "probe": "limit probe",
             "fastwebsockets": "fastwebsockets", "node-ws": "node ws"}


# ---------------------------------------------------------------- /proc and perf (pure parts)


def parse_stat(text):
    """The fields of a /proc/PID/stat (or /proc/PID/task/TID/stat) line this
    mode needs: pid, ppid, and utime and stime in clock ticks. The command
    name may hold spaces and parentheses; the fields after its last ')' are
    fixed (proc(5): ppid is field 4, utime 14, stime 15)."""
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    if not head or len(fields) < 13:
        raise ValueError(f"not a /proc stat line: {text[:80]!r}")
    return {"pid": int(head.split("(", 1)[0]), "ppid": int(fields[1]), "utime": int(fields[11]),
            "stime": int(fields[12])}


def process_tree(root, parents):
    """`root` and every process under it, from `parents` ({pid: ppid}), in
    the order found (root first)."""
    children = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        if pid in tree:
            continue
        tree.append(pid)
        todo.extend(sorted(children.get(pid, [])))
    return tree


def parse_perf(text):
    """`perf stat -x,` output as {event: count}. `<not counted>` (the
    event's threads never ran while it was on) is 0; `<not supported>`
    is None."""
    counts = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) < 3:
            continue
        value, event = fields[0], fields[2]
        if value == "<not counted>":
            counts[event] = 0
        elif value == "<not supported>":
            counts[event] = None
        else:
            try:
                counts[event] = int(float(value))
            except ValueError:
                continue
    return counts


def syscall_mix(counts):
    """{name: count} from the `syscalls:sys_enter_NAME` events, without
    those that never happened."""
    prefix = "syscalls:sys_enter_"
    return {event[len(prefix):]: n for event, n in counts.items() if event.startswith(prefix) and n}


def per_request(cpu_before, cpu_after, requests):
    """µs of user, system and both per request from two readings of
    (user ticks, system ticks)."""
    if not requests:
        raise BenchError("the load counted no request")
    user = (cpu_after[0] - cpu_before[0]) / CLOCK_TICKS * 1e6 / requests
    system = (cpu_after[1] - cpu_before[1]) / CLOCK_TICKS * 1e6 / requests
    return {"user_us": user, "sys_us": system, "cpu_us": user + system}


def spread(values):
    """(median, min, max) of the values that are there; None without any."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


# ---------------------------------------------------------------- /proc and perf (reading)


def read_stat(path):
    try:
        with open(path) as f:
            return parse_stat(f.read())
    except (OSError, ValueError):
        return None


def tree_of(root):
    """The processes of `root`'s tree now."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_stat(f"/proc/{entry}/stat")
            if stat:
                parents[stat["pid"]] = stat["ppid"]
    return process_tree(root, parents)


def cpu_ticks(pids):
    """(user, system) clock ticks of `pids` (each process's line counts
    every thread of it, those gone too), and {tid: ticks} per live thread."""
    user = system = 0
    threads = {}
    for pid in pids:
        stat = read_stat(f"/proc/{pid}/stat")
        if stat is None:
            continue
        user += stat["utime"]
        system += stat["stime"]
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            task = read_stat(f"/proc/{pid}/task/{tid}/stat")
            if task:
                threads[int(tid)] = task["utime"] + task["stime"]
    return (user, system), threads


class SyscallCounter:
    """`perf stat` on `pids`, started disabled and switched on and off
    through its control FIFO, so it counts just the load's window."""

    def __init__(self, pids, mix, work):
        self.pids = pids
        self.mix = mix
        self.work = work
        self.proc = None

    def __enter__(self):
        ctl, ack = os.path.join(self.work, "perf-ctl"), os.path.join(self.work, "perf-ack")
        self.out = os.path.join(self.work, "perf.out")
        for fifo in (ctl, ack):
            if os.path.exists(fifo):
                os.unlink(fifo)
            os.mkfifo(fifo)
        events = ["-e", "raw_syscalls:sys_enter"] + (["-e", "syscalls:sys_enter_*"] if self.mix else [])
        cmd = ["perf", "stat", "-x,", "-o", self.out, "--control", f"fifo:{ctl},{ack}", "-D", "-1", *events,
               "-p", ",".join(str(p) for p in self.pids), "--", "head", "-c", "1"]
        self.errors = open(os.path.join(self.work, "perf.err"), "w+")
        # A workload that ends when our end of its stdin closes: perf with -p
        # and no workload counted nothing on the kernels tried (every event
        # `<not counted>`), and with one it stops when the workload does.
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.errors)
        # Our end of ack first (read and write: opening never blocks), then
        # ctl once perf has opened it.
        self.ack = os.open(ack, os.O_RDWR | os.O_NONBLOCK)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.ctl = os.open(ctl, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise BenchError(f"perf stat did not start: {self.perf_errors()}")
                time.sleep(0.01)
        return self

    def perf_errors(self):
        self.errors.seek(0)
        return self.errors.read().strip()[-1000:] or "(no message)"

    def command(self, word):
        os.write(self.ctl, f"{word}\n".encode())
        got, deadline = b"", time.monotonic() + 10
        while b"ack" not in got:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"perf stat did not acknowledge {word!r}: {self.perf_errors()}")
            if select.select([self.ack], [], [], 0.1)[0]:
                got += os.read(self.ack, 64)

    def enable(self):
        self.command("enable")

    def disable(self):
        self.command("disable")

    def counts(self):
        """Stops perf (its workload ends) and returns what it counted."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise BenchError("perf stat did not stop")
        with open(self.out) as f:
            counts = parse_perf(f.read())
        if counts.get("raw_syscalls:sys_enter") is None:
            raise BenchError(f"perf stat counted no system calls: {self.perf_errors()}")
        return counts

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc and not self.proc.stdin.closed:
            self.proc.stdin.close()
        for fd in (getattr(self, "ctl", None), getattr(self, "ack", None)):
            if fd is not None:
                os.close(fd)
        self.errors.close()
        return False


# ---------------------------------------------------------------- rows


class Proc:
    """A process start_server can start: name, argv, where it listens."""

    def __init__(self, name, argv, port):
        self.name = name
        self.argv = argv
        self.host = "127.0.0.1"
        self.port = port


class Row:
    """One server: `kind` is ours, actix, nginx, probe, fastwebsockets or
    node-ws; `argv_for(load)` its command (before pinning); `ports` its
    plain and TLS ports."""

    def __init__(self, name, kind, argv_for, ports, env=()):
        self.name = name
        self.kind = kind
        self.argv_for = argv_for
        self.ports = ports
        self.env = list(env)

    def port(self, load):
        if self.kind == "nginx" and load.h2c:
            return NGINX_H2C_PORT
        return self.ports[1] if load.tls else self.ports[0]

    def url(self, load):
        if load.tool == "ws":
            path = "/ws" if self.kind == "ours" else "/"
            return f"ws://127.0.0.1:{self.port(load)}{path}"
        return f"{load.scheme()}://127.0.0.1:{self.port(load)}{load.path}"


def pinned(cpu, argv, env=()):
    """`argv` on CPU `cpu` only (taskset execs it: same PID), with `env`."""
    return ["taskset", "-c", str(cpu), *(["env", *env] if env else []), *argv]


def plan_rows(args, files):
    target = args.target_dir
    ours = os.path.join(target, "release", "uppercut-mio-server")
    bench = os.path.join(target, "bench", "release")
    rows = []

    def ours_argv(binary, flags, ports):
        def argv_for(load):
            port = ports[1] if load.tls else ports[0]
            argv = [binary, "--bind", f"127.0.0.1:{port}", "--pollers", "1", "--dispatch", args.dispatch, *flags]
            if load.tls:
                argv += ["--tls-cert", files["cert"], "--tls-key", files["key"]]
            if load.deflate:
                argv.append("--ws-deflate")
            return argv
        return argv_for

    rows.append(Row("ours", "ours", ours_argv(ours, [], PORTS["ours"]), PORTS["ours"]))
    for i, (name, binary, flags) in enumerate(args.ours_rows):
        ports = (OURS_ROW_PORTS + 2 * i, OURS_ROW_PORTS + 2 * i + 1)
        rows.append(Row(name, "ours", ours_argv(binary or ours, flags, ports), ports))

    def actix_argv(load):
        plain, tls = PORTS["actix"]
        argv = [os.path.join(bench, "actix-hello"), f"127.0.0.1:{tls if load.tls else plain}", "1"]
        if load.tls:
            argv += [files["cert"], files["key"]]
        if load.h2c:
            argv.append("--h2c")
        return argv
    rows.append(Row("actix-web", "actix", actix_argv, PORTS["actix"], ["TOKIO_WORKER_THREADS=1"]))
    nginx = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if nginx:
        rows.append(Row("nginx", "nginx", lambda load: [nginx, "-c", files["nginx.conf"]], PORTS["nginx"]))
    else:
        print("bench/run --cost: no nginx: its rows are left out (apt-get install nginx-light)", file=sys.stderr)
    probe_port = PORTS["probe"][0]
    rows.append(Row("limit probe", "probe",
                    lambda load: [os.path.join(bench, "limit-probe"), f"127.0.0.1:{probe_port}"], PORTS["probe"]))
    ws_peers = os.path.join(target, "bench-ws", "release")
    fws_port = PORTS["fastwebsockets"][0]
    rows.append(Row("fastwebsockets", "fastwebsockets",
                    lambda load: [os.path.join(ws_peers, "fastwebsockets-echo"), f"127.0.0.1:{fws_port}"],
                    PORTS["fastwebsockets"], ["TOKIO_WORKER_THREADS=1"]))
    if shutil.which("node") and args.no_build and not os.path.isdir(os.path.join(NODE_DIR, "node_modules")):
        print("bench/run --cost: ws is not installed for node (drop --no-build): the node ws row is left out",
              file=sys.stderr)
    elif shutil.which("node"):
        node_port = PORTS["node-ws"][0]
        rows.append(Row("node ws", "node-ws",
                        lambda load: ["node", os.path.join(NODE_DIR, "echo.js"), str(node_port), "deflate"],
                        PORTS["node-ws"]))
    if args.only:
        rows = [r for r in rows if r.name in args.only or r.kind in args.only]
    return rows


def rows_for(load, rows):
    """The rows that run `load`, ours (and --ours-row builds) first. The
    remote call runs bench/cluster.py's configurations: ours and actix-web's."""
    if load.tool == "cluster":
        return [r for r in rows if r.name in ("ours", "actix-web")]
    return [r for r in rows if r.kind in load.rows]


# ---------------------------------------------------------------- files and builds


def prepare(work):
    """The run's certificate and nginx's configuration, in `work`."""
    files = {"cert": os.path.join(work, "cert.pem"), "key": os.path.join(work, "key.pem")}
    make_certificate(files["cert"], files["key"])
    prefix = os.path.join(work, "nginx")
    os.makedirs(prefix)
    plain, tls = PORTS["nginx"]
    temp = "\n".join(f"    {kind}_temp_path {prefix}/{kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                              "uwsgi", "scgi"))
    # One worker (the peer's one core), as bench/run --tls and --h2 set nginx otherwise.
    conf = f"""worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 75s;
{temp}
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    server {{
        listen 127.0.0.1:{plain};
        listen 127.0.0.1:{tls} ssl http2;
        listen 127.0.0.1:{NGINX_H2C_PORT} http2;
        ssl_certificate {files['cert']};
        ssl_certificate_key {files['key']};
        location = / {{
            default_type "text/plain; charset=utf-8";
            return 200 "hello\\n";
        }}
    }}
}}
"""
    files["nginx.conf"] = os.path.join(prefix, "nginx.conf")
    with open(files["nginx.conf"], "w") as f:
        f.write(conf)
    return files


def build(args, loads, rows):
    target = args.target_dir
    kinds = {r.kind for load in loads if load.tool != "cluster" for r in rows_for(load, rows)}
    tools = {load.tool for load in loads}
    steps = [(["cargo", "build", "--release"], target, "uppercut-mio-server")]
    bench = os.path.join(target, "bench")
    if "actix" in kinds:
        steps.append((["cargo", "build", "--release", "--manifest-path", ACTIX_MANIFEST], bench, "bench/actix-hello"))
    if "probe" in kinds:
        steps.append((["cargo", "build", "--release", "--manifest-path", PROBE_MANIFEST], bench, "bench/limit-probe"))
    if "ws" in tools:
        steps.append((["cargo", "build", "--release", "--manifest-path", WS_LOAD_MANIFEST],
                      os.path.join(target, "bench-ws"), "bench/ws-load"))
        if "fastwebsockets" in kinds:
            steps.append((["cargo", "build", "--release", "--manifest-path", WS_PEERS_MANIFEST],
                          os.path.join(target, "bench-ws"), "bench/ws-peers"))
    if any(load.tool == "cluster" and any(r.kind == "actix" for r in rows_for(load, rows)) for load in loads):
        steps.append((["cargo", "build", "--release", "--manifest-path", CLUSTER_PEER_MANIFEST], bench,
                      "bench/cluster-peer"))
    if not args.no_build:
        for cmd, directory, what in steps:
            print(f"== building {what}: {' '.join(cmd)}", flush=True)
            if subprocess.run(cmd, env=dict(os.environ, CARGO_TARGET_DIR=directory)).returncode != 0:
                raise BenchError(f"building {what} failed")
        if "node-ws" in kinds and not os.path.isdir(os.path.join(NODE_DIR, "node_modules")):
            print("== installing ws for node (npm install)", flush=True)
            if subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"], cwd=NODE_DIR).returncode:
                raise BenchError("npm install failed")


def require(tool, package):
    if shutil.which(tool) is None:
        raise BenchError(f"{tool} is missing: apt-get install {package}")


# ---------------------------------------------------------------- one measurement


def measure_window(pids, args, work, run_load):
    """CPU and system calls of `pids` over `run_load()`, which returns the
    load's result (with `requests`)."""
    counts = None
    with contextlib.nullcontext() if args.no_perf else SyscallCounter(pids, args.mix, work) as counter:
        if counter:
            counter.enable()
        before, threads_before = cpu_ticks(pids)
        result = run_load()
        after, threads_after = cpu_ticks(pids)
        if counter:
            counter.disable()
            counts = counter.counts()
    result.update(per_request(before, after, result["requests"]))
    result["threads_ran"] = sum(1 for tid, ticks in threads_after.items() if ticks > threads_before.get(tid, 0))
    if counts is not None:
        result["calls"] = counts["raw_syscalls:sys_enter"] / result["requests"]
        if args.mix:
            result["mix"] = {name: n / result["requests"] for name, n in syscall_mix(counts).items()}
    return result


def run_http_load(load, row, args):
    """wrk or h2load on the load CPU; their numbers with `requests`."""
    url = row.url(load)
    if load.tool == "h2load":
        from h2bench import run_h2load
        cmd = pinned(args.load_cpu, ["h2load", *load.options, "-D", str(args.duration), url])
        return run_h2load(cmd, args.duration)
    cmd = pinned(args.load_cpu, wrk_argv(load.options, args.duration, load.script, url))
    result = run_wrk(cmd, args.duration)
    if result["socket_errors"] or result["non_2xx"]:
        raise BenchError(f"{row.name}: {result['socket_errors']} socket errors and {result['non_2xx']} non-2xx "
                         f"under {load.label}: {shlex.join(cmd)}")
    return result


def run_ws_load(load, row, args):
    cmd = pinned(args.load_cpu, [args.ws_load, "--url", row.url(load), "--duration", str(args.duration),
                                 "--warmup", "1", *load.options])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 120)
    if done.returncode != 0:
        raise BenchError(f"{row.name}: ws-load failed: {done.stderr.strip()}")
    result = json.loads(done.stdout)
    # Every echo the client received, warm-up included, as the window
    # (CPU and calls) spans the warm-up too.
    result["requests"] = result.get("messages_all") or 0
    result["rps"] = result["per_second"]
    return result


def measure(load, row, args, work, round_no):
    proc = Proc(row.name, pinned(args.server_cpu, row.argv_for(load), row.env), row.port(load))
    popen = start_server(proc, work, f"{load.key}-{round_no}")
    try:
        wait_until_accepting(proc, popen)
        time.sleep(SETTLE)
        pids = tree_of(popen.pid)
        if load.tool == "ws":
            result = measure_window(pids, args, work, lambda: run_ws_load(load, row, args))
        else:
            result = measure_window(pids, args, work, lambda: run_http_load(load, row, args))
        if popen.poll() is not None:
            raise BenchError(f"{row.name} died under load (status {popen.returncode}):\n{log_tail(popen.log_path)}")
        result["processes"] = len(pids)
        return result
    finally:
        stop_server(popen)


def measure_cluster(load, row, args, work, round_no, nats_popen):
    """The remote call: ours-remote (nodes a and b) or actix-nats (requester
    and responder) on the server CPU, nats-server on the load CPU; nats-server's
    CPU per request is reported apart."""
    import cluster
    config = args.cluster_configs["ours-remote" if row.kind == "ours" else "actix-nats"]
    popens = []
    try:
        for spec in config.procs:
            started = copy.copy(spec)
            started.argv = pinned(args.server_cpu, spec.argv, ["TOKIO_WORKER_THREADS=1"])
            popen = start_server(started, work, f"{load.key}-{round_no}")
            popens.append(popen)
            cluster.wait_ready(started, popen)
        cluster.probe(config)
        time.sleep(SETTLE)
        pids = [pid for popen in popens for pid in tree_of(popen.pid)]
        nats_before, _ = cpu_ticks([nats_popen.pid])

        def run():
            cmd = pinned(args.load_cpu, wrk_argv(load.options, args.duration, None, config.url))
            return run_wrk(cmd, args.duration)
        result = measure_window(pids, args, work, run)
        nats_after, _ = cpu_ticks([nats_popen.pid])
        result["backend_us"] = per_request(nats_before, nats_after, result["requests"])["cpu_us"]
        for spec, popen in zip(config.procs, popens):
            if popen.poll() is not None:
                raise BenchError(f"{spec.name} died under load (status {popen.returncode}):\n"
                                 f"{log_tail(popen.log_path)}")
        result["processes"] = len(pids)
        return result
    finally:
        for popen in reversed(popens):
            stop_server(popen)


def describe(r):
    text = (f"{r['rps']:.0f}/s, CPU {r['cpu_us']:.2f} us/req (user {r['user_us']:.2f}, sys {r['sys_us']:.2f}), "
            f"{r['threads_ran']} thread(s) in {r['processes']} process(es) ran")
    if r.get("calls") is not None:
        text += f", {r['calls']:.2f} calls/req"
    if r.get("backend_us") is not None:
        text += f", nats-server {r['backend_us']:.2f} us/req"
    if r.get("mix"):
        text += "; " + mix_text(r["mix"])
    return text


def mix_text(mix, floor=0.01):
    """`read 1.00, write 1.00, epoll_wait 0.31`: calls per request, most
    first, those under `floor` left out."""
    kept = sorted(((n, name) for name, n in mix.items() if n >= floor), key=lambda x: (-x[0], x[1]))
    return ", ".join(f"{name} {n:.2f}" for n, name in kept) or "-"


# ---------------------------------------------------------------- tables


def summarize(results):
    """{load: {row: medians and spreads over its rounds}}."""
    out = {}
    for key, rows in results.items():
        out[key] = {}
        for name, rounds in rows.items():
            if not rounds:
                continue
            row = {k: spread([r.get(k) for r in rounds])
                   for k in ("rps", "user_us", "sys_us", "cpu_us", "calls", "backend_us")}
            mixes = [r["mix"] for r in rounds if r.get("mix")]
            names = {n for mix in mixes for n in mix}
            row["mix"] = {n: statistics.median([mix.get(n, 0.0) for mix in mixes]) for n in names}
            out[key][name] = row
    return out


def fmt_spread(s, digits=2):
    if s is None:
        return "-"
    median, low, high = s
    if f"{low:.{digits}f}" == f"{high:.{digits}f}":
        return f"{median:.{digits}f}"
    return f"{median:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


def versus(ours, peer):
    """`CPU 0.93x, calls 1.35x, rps 1.05x`: our medians over the peer's."""
    parts = []
    for label, key in (("CPU", "cpu_us"), ("calls", "calls"), ("rps", "rps")):
        a, b = ours.get(key), peer.get(key)
        if a and b and b[0]:
            parts.append(f"{label} {a[0] / b[0]:.2f}x")
    return ", ".join(parts) or "-"


def table_cells(summary, labels, ours="ours"):
    header = ["load", "server", "req/s", "user µs/req", "sys µs/req", "CPU µs/req", "calls/req", "ours / this"]
    if any(row.get("backend_us") for rows in summary.values() for row in rows.values()):
        header.insert(7, "nats-server µs/req")
    cells = []
    for key, rows in summary.items():
        base = rows.get(ours)
        for name, row in rows.items():
            line = [labels.get(key, key), name, fmt_spread(row["rps"], 0), fmt_spread(row["user_us"]),
                    fmt_spread(row["sys_us"]), fmt_spread(row["cpu_us"]), fmt_spread(row["calls"])]
            if len(header) == 9:
                line.append(fmt_spread(row["backend_us"]))
            line.append("" if name == ours or base is None else versus(base, row))
            cells.append(line)
    return header, cells


def mix_cells(summary, labels):
    header = ["load", "server", "system calls per request (median of rounds; 0.01 and above)"]
    cells = [[labels.get(key, key), name, mix_text(row["mix"])]
             for key, rows in summary.items() for name, row in rows.items() if row["mix"]]
    return header, cells


def print_plain(header, cells, text_columns=2):
    widths = [max(len(str(r[i])) for r in [header] + cells) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths]] + cells:
        print("  ".join(c.ljust(w) if i < text_columns or i == len(header) - 1 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths))).rstrip())


# ---------------------------------------------------------------- command line and main


def parse_ours_row(spec):
    """`NAME=ARGS`: another row of ours. ARGS are flags added to our
    server's, or, when the first is a path (it holds a /), another build
    of it, then its flags: `before=/tmp/old/uppercut-mio-server`."""
    name, eq, rest = spec.partition("=")
    if not eq or not name.strip():
        raise argparse.ArgumentTypeError(f'--ours-row must look like "NAME=FLAGS" or "NAME=PATH FLAGS", got {spec!r}')
    words = shlex.split(rest)
    binary = None
    if words and "/" in words[0]:
        binary = os.path.abspath(words.pop(0))
    return name.strip(), binary, words


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/run --cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--cost", action="store_true", help="this mode (bench/run passes it on)")
    p.add_argument("--rounds", type=int, default=5, help="rounds per server and load (default 5)")
    p.add_argument("--duration", type=int, default=5, help="seconds of load per round (default 5)")
    p.add_argument("--quick", action="store_true", help=f"a smoke test: {QUICK[0]} round of {QUICK[1]} s")
    p.add_argument("--loads", default=",".join(LOAD_KEYS), help=f"comma-separated loads (default all: "
                   f"{','.join(LOAD_KEYS)})")
    p.add_argument("--only", help="comma-separated rows by name or kind: ours, actix, nginx, probe, "
                   "fastwebsockets, node-ws, and --ours-row names")
    p.add_argument("--ours-row", action="append", default=[], type=parse_ours_row, metavar='"NAME=[PATH] FLAGS"',
                   dest="ours_rows", help="another row of ours beside `ours`, with more flags or another build "
                   "(a path first); repeatable. Its 'ours / this' column is then ours over it: a before/after.")
    p.add_argument("--dispatch", choices=["local", "system"], default="local",
                   help="our server's dispatch mode (default local)")
    p.add_argument("--server-cpu", type=int, default=0, help="the CPU the server runs on (default 0)")
    p.add_argument("--load-cpu", type=int, default=1, help="the CPU the load generator runs on (default 1)")
    p.add_argument("--cost-mix", dest="mix", action="store_true",
                   help="also count each system call (perf's syscalls:sys_enter_* tracepoints) and print the mix")
    p.add_argument("--no-perf", action="store_true",
                   help="count no system calls: CPU alone, with no tracepoint on the server's system calls")
    p.add_argument("--no-build", action="store_true", help="use the binaries already built")
    p.add_argument("--markdown", action="store_true", help="print the tables as Markdown with the run's facts")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.duration = QUICK
    if args.rounds < 1 or args.duration < 1:
        p.error("--rounds and --duration must be at least 1")
    if args.mix and args.no_perf:
        p.error("--cost-mix needs perf: drop --no-perf")
    cpus = os.sched_getaffinity(0)
    if args.server_cpu == args.load_cpu or not {args.server_cpu, args.load_cpu} <= cpus:
        p.error(f"--server-cpu and --load-cpu must be two different CPUs of {sorted(cpus)}")
    keys = [k.strip() for k in args.loads.split(",") if k.strip()]
    unknown = [k for k in keys if k not in LOAD_KEYS]
    if unknown or not keys:
        p.error(f"--loads: unknown or none {unknown}; choose from {', '.join(LOAD_KEYS)}")
    args.loads = [load for load in LOADS if load.key in keys]
    args.only = [n.strip() for n in args.only.split(",")] if args.only else None
    names = [name for name, _, _ in args.ours_rows]
    taken = set(ROW_NAMES) | set(ROW_NAMES.values())
    if len(set(names)) != len(names) or set(names) & taken:
        p.error("--ours-row names must be unique and not a row's or kind's name")
    args.target_dir = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO_ROOT, "target"))
    return args


def raise_fd_limit():
    """perf opens a counter per event and thread: the --cost-mix tracepoints
    on a few threads pass the usual 1024 descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def main(argv):
    args = parse_args(argv)
    os.chdir(REPO_ROOT)
    command = "bench/run " + shlex.join(argv)
    try:
        require("taskset", "util-linux")
        if not args.no_perf:
            require("perf", "linux-perf")
        tools = {load.tool for load in args.loads}
        if tools & {"wrk", "cluster"}:
            require("wrk", "wrk")
        if "h2load" in tools:
            require("h2load", "nghttp2-client")
        raise_fd_limit()
        args.ws_load = os.path.join(args.target_dir, "bench-ws", "release", "ws-load")
        with tempfile.TemporaryDirectory(prefix="bench-cost-") as work:
            os.chmod(work, 0o755)  # nginx's worker, as nobody, reads its files
            files = prepare(work)
            rows = plan_rows(args, files)
            build(args, args.loads, rows)
            nats_popen = None
            if "cluster" in tools:
                import cluster
                spec = argparse.Namespace(pollers=1, actix_workers=1, only="ours-remote,actix-nats")
                configs, _, _ = cluster.plan(spec, work)
                args.cluster_configs = {c.name: c for c in configs}
                nats = cluster.Proc("nats-server", pinned(args.load_cpu, [cluster.nats_server_bin(), "-a", "127.0.0.1",
                                                                         "-p", str(cluster.NATS_PORT)]),
                                    role="backend", port=cluster.NATS_PORT)
                nats_popen = start_server(nats, work, 0)
                cluster.wait_ready(nats, nats_popen)
            try:
                results = run_all(args, rows, work, nats_popen, command)
            finally:
                if nats_popen:
                    stop_server(nats_popen)
        print_results(args, results, command)
        return 0
    except BenchError as e:
        print(f"bench/run --cost: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench/run --cost: interrupted", file=sys.stderr)
        return 130


def run_all(args, rows, work, nats_popen, command):
    plan = [(load, rows_for(load, rows)) for load in args.loads]
    print(f"$ {command}")
    print(f"== {args.rounds} round(s) of {args.duration} s; server on CPU {args.server_cpu}, load on CPU "
          f"{args.load_cpu}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; loads:")
    for load, load_rows in plan:
        print(f"   {load.key}: {load.display(args.duration)}  [{', '.join(r.name for r in load_rows)}]")
    sys.stdout.flush()
    results = {load.key: {r.name: [] for r in load_rows} for load, load_rows in plan}
    total, done = sum(len(r) for _, r in plan) * args.rounds, 0
    for load, load_rows in plan:
        for round_no in range(1, args.rounds + 1):
            for row in load_rows:
                done += 1
                print(f"bench/run --cost: [{done}/{total}] {load.key}, round {round_no}/{args.rounds}, {row.name}",
                      file=sys.stderr, flush=True)
                if load.tool == "cluster":
                    result = measure_cluster(load, row, args, work, round_no, nats_popen)
                else:
                    result = measure(load, row, args, work, round_no)
                results[load.key][row.name].append(result)
                print(f"   {load.key} round {round_no} {row.name}: {describe(result)}", flush=True)
    return results


def print_results(args, results, command):
    summary = summarize(results)
    labels = {load.key: load.label for load in LOADS}
    header, cells = table_cells(summary, labels)
    caption = (f"Server pinned to CPU {args.server_cpu} (`taskset`, our `--pollers 1`, the peers one worker), load "
               f"generator to CPU {args.load_cpu}. Medians over {args.rounds} round(s) of {args.duration} s "
               "(min-max in brackets). CPU: user and system time of the server's processes and threads "
               "(/proc) over the load, per request; calls: `perf stat -e raw_syscalls:sys_enter` over the "
               "same window, per request. WebSocket loads count echoes. ours / this: our median over this "
               "row's (below 1: ours costs less, or calls less, or serves fewer).")
    tables = [(caption, header, cells, 2)]
    if args.mix:
        mix_header, mix_rows = mix_cells(summary, labels)
        tables.append(("System calls per request by call (perf's syscalls:sys_enter_* tracepoints).",
                       mix_header, mix_rows, 3))
    print()
    for i, (text, head, rows, text_columns) in enumerate(tables):
        if args.markdown and i == 0:
            print(report(run_facts(REPO_ROOT, command), text, head, rows, text_columns))
        elif args.markdown:
            print("\n".join([text, "", *table(head, rows, text_columns)]))
        else:
            print(f"{text}\n")
            print_plain(head, rows, text_columns)
        if i + 1 < len(tables):
            print()
