"""bench/cluster.py: `bench/run --cluster`, an actor on another server over NATS.

One nats-server on loopback for the whole run; then, one configuration at a
time, rounds alternating, wrk against:

- ours-remote: node a's `/remote`, an actor route to `hello@b`, an owned actor
  on node b (two server processes, each poller with its own NATS connection);
- ours-placed: node b's `GET /count`, the binary's placed counter (`counter@*`,
  `--state jetstream`) held by node a: one forwarding hop to its holder, and a
  read (no write to JetStream);
- ours-local-actor: the same actor on the same server, `/hello/actor` (no NATS);
- ours-io: `/io`, whose upstream is nginx (one worker) answering a 13-byte JSON
  body (`/io` checks that its upstream answers JSON, so the body is JSON of the
  same length as `Hello, World!`, not those bytes);
- actix-nats: bench/cluster-peer, actix-web 4 with async-nats asking a responder
  of its own over the same nats-server, at `/remote`.

Besides wrk's rps and latency, each configuration's CPU per request: user +
system CPU time of its server processes (both nodes; both peer roles; our one
server), from /proc before and after the load, divided by the requests wrk
counted. What the configuration leans on (nats-server, or nginx behind /io) is
a column of its own: nats-server's share is the same work for ours and the
peer. Before the load, ours-remote and actix-nats sit idle, connected to NATS,
for --idle seconds: their idle CPU in % of one core.

The table has medians over rounds, and ratios against actix-nats and ours-io
(rps, and CPU per request).
"""

import argparse
import http.client
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from markdown_report import report, run_facts
from servers import (BenchError, first_log_line, group_cpu_seconds, log_tail, start_server, stop_server,
                     wait_until_accepting)
from wrk_report import fmt_latency, run_wrk, wrk_argv

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
PEER_MANIFEST = "bench/cluster-peer/Cargo.toml"

NATS_PORT = 14222
PORTS = {"a": 19010, "b": 19011, "a-metrics": 19012, "b-metrics": 19013, "local": 19014, "io": 19015,
         "nginx": 19420, "requester": 19210}
# What the peer asks; ours asks upc.a.b.hello (the subject of hello@b).
PEER_SUBJECT = "bench.hello"
# As long as `Hello, World!`, and JSON, which /io insists on.
IO_BODY = '{"msg":"Hi!"}'
CONFIGS = ("ours-remote", "ours-placed", "ours-local-actor", "ours-io", "actix-nats")
BASES = ("actix-nats", "ours-io")

READY_TIMEOUT = 30.0
# Requests over fresh connections that must all succeed before the load.
PROBES = 16


class Proc:
    """One process of a configuration. `role` is "server" (its CPU is the
    configuration's) or "backend" (counted apart: nginx behind /io).
    `ready` is how to know it is up: its port accepts, a line in its
    log, or (ours with --nats) its /metrics saying it is connected."""

    def __init__(self, name, argv, role="server", port=None, ready_line=None, metrics_port=None):
        self.name = name
        self.argv = argv
        self.role = role
        self.host = "127.0.0.1"
        self.port = port
        self.ready_line = ready_line
        self.metrics_port = metrics_port


class Config:
    def __init__(self, name, procs, path, port, nats=False, warm=None):
        self.name = name
        self.procs = procs
        self.path = path
        self.port = port
        self.nats = nats  # leans on nats-server: its CPU goes in the backend column
        self.warm = warm  # a URL POSTed once before the probes (the placed name's first holder)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}{self.path}"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/run --cluster", description=__doc__.split("\n\n")[0])
    p.add_argument("--cluster", action="store_true", help="this mode (bench/run passes it on)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per configuration (default 3)")
    p.add_argument("--duration", type=int, default=10, help="seconds of load per round (default 10)")
    p.add_argument("--wrk", default="-t4 -c128", help='wrk load options (default "-t4 -c128")')
    p.add_argument("--idle", type=float, default=10.0,
                   help="seconds ours-remote and actix-nats sit idle, connected, before the load; "
                   "0 skips (default 10)")
    p.add_argument("--pollers", type=int, help="passed to our servers as --pollers N (default: their own)")
    p.add_argument("--actix-workers", type=int, default=len(os.sched_getaffinity(0)),
                   help="the peer's actix workers (default: number of CPUs)")
    p.add_argument("--only", help="comma-separated configurations: " + ", ".join(CONFIGS))
    p.add_argument("--no-build", action="store_true", help="use the binaries already built")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown with the run's facts")
    args = p.parse_args(glue(argv))
    if args.rounds < 1 or args.duration < 1 or args.idle < 0:
        p.error("--rounds and --duration must be at least 1, --idle at least 0")
    if args.actix_workers < 1 or (args.pollers is not None and args.pollers < 1):
        p.error("--actix-workers and --pollers must be at least 1")
    return args


def glue(argv):
    """`--wrk -t2 -c10` as `--wrk=-t2 -c10`, as bench/run does."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--wrk" and i + 1 < len(argv):
            out.append(f"--wrk={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def target_dir():
    return os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO_ROOT, "target"))


def nats_server_bin():
    found = shutil.which("nats-server") or ("/usr/sbin/nats-server" if os.access("/usr/sbin/nats-server", os.X_OK)
                                            else None)
    if not found:
        raise BenchError("nats-server is missing: apt-get install nats-server")
    return found


def nginx_bin():
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if not found:
        raise BenchError("ours-io needs nginx: apt-get install nginx-light (or leave it out with --only)")
    return found


def plan(args, work):
    """The configurations, in table order."""
    target = target_dir()
    ours = os.path.join(target, "release", "uppercut-mio-server")
    peer = os.path.join(target, "bench", "release", "cluster-peer")
    nats = f"nats://127.0.0.1:{NATS_PORT}"
    pollers = ["--pollers", str(args.pollers)] if args.pollers else []

    def node(name, port, metrics, *more):
        argv = [ours, "--bind", f"127.0.0.1:{port}", *pollers, "--nats", nats, "--node", name,
                "--metrics", f"127.0.0.1:{metrics}", *more]
        return Proc(f"node-{name}", argv, port=port, metrics_port=metrics)

    configs = []
    for name in (n.strip() for n in (args.only or ",".join(CONFIGS)).split(",") if n.strip()):
        if name == "ours-remote":
            procs = [node("b", PORTS["b"], PORTS["b-metrics"]),
                     node("a", PORTS["a"], PORTS["a-metrics"], "--actor-route", "/remote=hello@b")]
            configs.append(Config(name, procs, "/remote", PORTS["a"], nats=True))
        elif name == "ours-placed":
            # a takes the name (the POST before the probes); b forwards to it.
            state = ["--state", "jetstream"]
            procs = [node("a", PORTS["a"], PORTS["a-metrics"], *state),
                     node("b", PORTS["b"], PORTS["b-metrics"], *state)]
            warm = f"http://127.0.0.1:{PORTS['a']}/count"
            configs.append(Config(name, procs, "/count", PORTS["b"], nats=True, warm=warm))
        elif name == "ours-local-actor":
            procs = [Proc("ours", [ours, "--bind", f"127.0.0.1:{PORTS['local']}", *pollers], port=PORTS["local"])]
            configs.append(Config(name, procs, "/hello/actor", PORTS["local"]))
        elif name == "ours-io":
            conf = write_nginx_conf(os.path.join(work, "nginx"))
            upstream = f"http://127.0.0.1:{PORTS['nginx']}/hello.json"
            procs = [Proc("nginx", [nginx_bin(), "-c", conf], role="backend", port=PORTS["nginx"]),
                     Proc("ours", [ours, "--bind", f"127.0.0.1:{PORTS['io']}", *pollers, "--upstream", upstream],
                          port=PORTS["io"])]
            configs.append(Config(name, procs, "/io", PORTS["io"]))
        elif name == "actix-nats":
            procs = [Proc("responder", [peer, "responder", "--nats", nats, "--subject", PEER_SUBJECT,
                                        "--queue", "bench"], ready_line="responding on"),
                     Proc("requester", [peer, "requester", "--nats", nats, "--bind",
                                        f"127.0.0.1:{PORTS['requester']}", "--subject", PEER_SUBJECT,
                                        "--workers", str(args.actix_workers)], port=PORTS["requester"])]
            configs.append(Config(name, procs, "/remote", PORTS["requester"], nats=True))
        else:
            raise BenchError(f"--only: unknown configuration {name!r}; they are {', '.join(CONFIGS)}")
    return configs, ours, peer


def write_nginx_conf(directory):
    """nginx behind /io: one worker, no daemon, no access log, keep-alive
    connections never closed by a request count, the JSON body from memory."""
    os.makedirs(directory, exist_ok=True)
    temp = "\n".join(f"    {kind}_temp_path {directory};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                          "scgi"))
    conf = f"""worker_processes 1;
daemon off;
pid {directory}/nginx.pid;
error_log {directory}/error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 75s;
{temp}
    server {{
        listen 127.0.0.1:{PORTS['nginx']};
        location = /hello.json {{
            default_type application/json;
            return 200 '{IO_BODY}';
        }}
    }}
}}
"""
    path = os.path.join(directory, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    return path


def build(args, configs, ours, peer):
    needs_peer = any(c.name == "actix-nats" for c in configs)
    if not args.no_build:
        target = target_dir()
        steps = [(["cargo", "build", "--release"], target, "uppercut-mio-server")]
        if needs_peer:
            # Beside bench/actix-hello, in a target directory of its own.
            steps.append((["cargo", "build", "--release", "--manifest-path", PEER_MANIFEST],
                          os.path.join(target, "bench"), "bench/cluster-peer"))
        for cmd, directory, what in steps:
            print(f"== building {what}: {' '.join(cmd)}", flush=True)
            if subprocess.run(cmd, env=dict(os.environ, CARGO_TARGET_DIR=directory)).returncode != 0:
                raise BenchError(f"building {what} failed")
    for path in [ours] + ([peer] if needs_peer else []):
        if not os.access(path, os.X_OK):
            raise BenchError(f"{path} is not built (drop --no-build)")


# ---------------------------------------------------------------- one measurement


def wait_ready(proc, popen):
    if proc.port is not None:
        wait_until_accepting(proc, popen)
    deadline = time.monotonic() + READY_TIMEOUT
    while proc.ready_line is not None:
        if popen.poll() is not None:
            raise BenchError(f"{proc.name} exited with status {popen.returncode}:\n{log_tail(popen.log_path)}")
        with open(popen.log_path, "rb") as f:
            if proc.ready_line.encode() in f.read():
                break
        if time.monotonic() > deadline:
            raise BenchError(f"{proc.name} did not say {proc.ready_line!r} in {READY_TIMEOUT:.0f} s:\n"
                             f"{log_tail(popen.log_path)}")
        time.sleep(0.05)
    while proc.metrics_port is not None:
        # Every poller connected to NATS and subscribed.
        if nats_connected(proc.metrics_port):
            break
        if popen.poll() is not None or time.monotonic() > deadline:
            raise BenchError(f"{proc.name} did not connect to NATS in {READY_TIMEOUT:.0f} s:\n"
                             f"{log_tail(popen.log_path)}")
        time.sleep(0.05)


def nats_connected(metrics_port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as page:
            text = page.read().decode()
    except OSError:
        return False
    return re.search(r"^uppercut_nats_connected 1$", text, re.M) is not None


def probe(config):
    """Until PROBES requests in a row, each on a fresh connection, are
    answered 200; returns the last answer's status line, type and length."""
    deadline = time.monotonic() + READY_TIMEOUT
    good, last = 0, None
    while good < PROBES:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", config.port, timeout=2)
            conn.request("GET", config.path)
            answer = conn.getresponse()
            body = answer.read()
            conn.close()
            last = f"{answer.status} {answer.getheader('Content-Type')} {len(body)} B {body[:40]!r}"
            good = good + 1 if answer.status == 200 else 0
        except OSError as e:
            good, last = 0, str(e)
        if good < PROBES:
            if time.monotonic() > deadline:
                raise BenchError(f"{config.name}: {config.url} did not answer 200 in {READY_TIMEOUT:.0f} s: {last}")
            if good == 0:
                time.sleep(0.05)
    return last


def cpu_of(popens):
    return sum(group_cpu_seconds(p.pid) for p in popens)


def measure(config, args, nats_popen, log_dir, round_no):
    started = []
    try:
        for proc in config.procs:
            popen = start_server(proc, log_dir, round_no)
            started.append((proc, popen))
            wait_ready(proc, popen)
        for proc, popen in started:
            banner = first_log_line(popen.log_path)
            if banner:
                print(f"   {proc.name}: {banner}", flush=True)
        if config.warm:
            request = urllib.request.Request(config.warm, method="POST", data=b"")
            with urllib.request.urlopen(request, timeout=READY_TIMEOUT) as answer:
                if answer.status != 200:
                    raise BenchError(f"{config.name}: POST {config.warm} answered {answer.status}")
        print(f"   GET {config.path}: {probe(config)}", flush=True)
        servers = [popen for proc, popen in started if proc.role == "server"]
        backend = [popen for proc, popen in started if proc.role == "backend"]
        if config.nats:
            backend.append(nats_popen)
        idle = None
        if config.nats and args.idle > 0:
            before, t0 = cpu_of(servers), time.monotonic()
            time.sleep(args.idle)
            idle = 100.0 * (cpu_of(servers) - before) / (time.monotonic() - t0)
        cmd = wrk_argv(args.wrk_options, args.duration, None, config.url)
        server_before, backend_before = cpu_of(servers), cpu_of(backend)
        result = run_wrk(cmd, args.duration)
        server_cpu, backend_cpu = cpu_of(servers) - server_before, cpu_of(backend) - backend_before
        for proc, popen in started:
            if popen.poll() is not None:
                raise BenchError(f"{proc.name} died under load (status {popen.returncode}):\n"
                                 f"{log_tail(popen.log_path)}")
        requests = result["requests"] or 1
        result["cpu_us"] = 1e6 * server_cpu / requests
        result["backend_us"] = 1e6 * backend_cpu / requests if backend else None
        result["idle_cpu"] = idle
        return result
    finally:
        for proc, popen in reversed(started):
            stop_server(popen)


def describe(r):
    text = (f"{r['rps']:.0f} rps, p50 {fmt_latency(r['p50'])}, p99 {fmt_latency(r['p99'])}, "
            f"server CPU {r['cpu_us']:.1f} us/req")
    if r["backend_us"] is not None:
        text += f", backend {r['backend_us']:.1f} us/req"
    if r["idle_cpu"] is not None:
        text += f", idle {r['idle_cpu']:.2f}% of a core"
    errors = r["socket_errors"] + r["non_2xx"]
    return text + (f", {errors} errors" if errors else "")


# ---------------------------------------------------------------- table


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summary(results):
    """{config: medians (and error totals) over its rounds}."""
    out = {}
    for name, rounds in results.items():
        row = {key: median([r[key] for r in rounds]) for key in ("rps", "p50", "p99", "cpu_us", "backend_us",
                                                                 "idle_cpu")}
        row["errors"] = sum(r["socket_errors"] + r["non_2xx"] for r in rounds)
        out[name] = row
    return out


def versus(row, base):
    """`rps 1.31x, CPU 0.74x`: this row's rps and CPU per request over the base's."""
    if base is None or not base["rps"] or not base["cpu_us"]:
        return "-"
    return f"rps {row['rps'] / base['rps']:.2f}x, CPU/req {row['cpu_us'] / base['cpu_us']:.2f}x"


def table_cells(rows):
    header = ["configuration", "rps", "p50", "p99", "server CPU/req", "NATS or nginx CPU/req", "idle CPU",
              "errors"] + [f"vs {b}" for b in BASES]
    cells = []
    for name, row in rows.items():
        us = lambda v: "-" if v is None else f"{v:.1f} us"  # noqa: E731
        cells.append([name, f"{row['rps']:.0f}", fmt_latency(row["p50"]), fmt_latency(row["p99"]),
                      us(row["cpu_us"]), us(row["backend_us"]),
                      "-" if row["idle_cpu"] is None else f"{row['idle_cpu']:.2f}%", str(row["errors"])]
                     + ["" if name == b else versus(row, rows.get(b)) for b in BASES])
    return header, cells


def print_plain(header, cells):
    widths = [max(len(str(r[i])) for r in [header] + cells) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths]] + cells:
        print("  ".join(c.ljust(w) if i == 0 or i >= len(header) - len(BASES) else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths))))


def load_average():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv):
    args = parse_args(argv)
    args.wrk_options = shlex.split(args.wrk)
    os.chdir(REPO_ROOT)
    if shutil.which("wrk") is None:
        print("bench/run --cluster: wrk is not installed: apt-get install wrk", file=sys.stderr)
        return 2
    command = "bench/run " + shlex.join(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as work:
            configs, ours, peer = plan(args, work)
            build(args, configs, ours, peer)
            # JetStream for ours-placed's leases and state; the others do not use it.
            nats = Proc("nats-server", [nats_server_bin(), "-a", "127.0.0.1", "-p", str(NATS_PORT),
                                        "-js", "-sd", os.path.join(work, "jetstream")],
                        role="backend", port=NATS_PORT)
            load_before = load_average()
            print(f"$ {command}")
            print(f"== {args.rounds} round(s) of {args.duration} s, wrk {args.wrk}, {len(os.sched_getaffinity(0))} "
                  f"CPUs, load average {load_before}; configurations {[c.name for c in configs]}", flush=True)
            results = {c.name: [] for c in configs}
            nats_popen = start_server(nats, work, 0)
            try:
                wait_ready(nats, nats_popen)
                for round_no in range(1, args.rounds + 1):
                    for config in configs:
                        print(f"== round {round_no}/{args.rounds}: {config.name} ({config.url}), "
                              f"load average {load_average()}", flush=True)
                        result = measure(config, args, nats_popen, work, round_no)
                        results[config.name].append(result)
                        print(f"   {describe(result)}", flush=True)
            finally:
                stop_server(nats_popen)
        header, cells = table_cells(summary(results))
        caption = (f"Medians over {args.rounds} round(s) of {args.duration} s of `wrk {args.wrk}`; load average "
                   f"{load_before} at the start, {load_average()} at the end. CPU/req: user+system CPU of the "
                   "configuration's server processes (ours-remote: both nodes; actix-nats: requester and "
                   "responder) over the load, per request; nats-server (ours-remote, actix-nats) and nginx "
                   f"(ours-io, a {len(IO_BODY)}-byte JSON body) apart. Idle CPU: those processes, connected, "
                   f"{args.idle:.0f} s before the load, % of one core. Errors: socket errors and non-2xx, totals. "
                   "vs: this row over the base row.")
        print()
        if args.markdown:
            print(report(run_facts(REPO_ROOT, command), caption, header, cells))
        else:
            print(f"$ {command}\n\n{caption}\n")
            print_plain(header, cells)
        return 0
    except BenchError as e:
        print(f"bench/run --cluster: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench/run --cluster: interrupted", file=sys.stderr)
        return 130
