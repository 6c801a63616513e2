"""bench/h3bench.py: `bench/run --h3`, HTTP/3 against Caddy and a quinn peer.

Each server runs pinned to one CPU (`taskset -c 0` by default) and the load
generator, bench/h3-load, to another (`taskset -c 1`), as `bench/run --cost`
pins them. Rows, one server up at a time, rounds alternating:

- ours: `--http3 on --tls-cert --tls-key --pollers 1`, HTTP/3 on UDP at the
  TLS port;
- caddy: Caddy (installed with `go install` into the target directory) with
  `GOMAXPROCS=1`, `respond "Hello, World!"` at /plaintext over HTTPS with the
  same certificate, HTTP/3 on (Caddy's default with TLS);
- h3-quinn: bench/h3-peer, the h3 crate over quinn (h3-quinn) on a one-thread
  tokio runtime, `Hello, World!` at /plaintext.

Two measurements per server and round, each on a fresh process:

- load: `h3-load -c CONNS -m STREAMS -d SECONDS --insecure` on GET
  /plaintext; requests per second, p50 and p99 latency, failed requests,
  and the server's CPU per request: the user and system CPU time of its
  process and every thread of it (/proc/PID/stat, read before and after the
  load, with bench/cost.py's code), over the requests answered;
- idle: `h3-load --idle N` opens N connections, one GET on each, and holds
  them; the server's RSS with them open minus its RSS before, over N.

The table holds medians (CPU with its min-max spread), the ratios of every
row to Caddy's and to the quinn peer's, and ours against the targets: CPU per
request at most 0.67x Caddy's and 1.0x the quinn peer's, requests per second
at least Caddy's.
"""

import argparse
import contextlib
import json
import os
import resource
import select
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from cost import Proc, fmt_spread, measure_window, pinned, spread, tree_of
from markdown_report import report, run_facts
from servers import BenchError, first_log_line, log_tail, make_certificate, rss_bytes, start_server, stop_server

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)

H3_LOAD_MANIFEST = "bench/h3-load/Cargo.toml"
H3_PEER_MANIFEST = "bench/h3-peer/Cargo.toml"
# The newest Caddy the Go module proxy served when this mode was written.
CADDY_VERSION = "v2.11.9"
CADDY_MODULE = "github.com/caddyserver/caddy/v2/cmd/caddy"

ROWS = ("ours", "caddy", "h3-quinn")
PORTS = {"ours": 19600, "caddy": 19610, "h3-quinn": 19620}
PATH = "/plaintext"
BODY = b"Hello, World!"
# Targets for ours, from issue 43: (what, row compared with, key, bound, at most?).
TARGETS = [("CPU per request", "caddy", "cpu_us", 0.67, True),
           ("CPU per request", "h3-quinn", "cpu_us", 1.0, True),
           ("requests per second", "caddy", "rps", 1.0, False)]

READY_SECONDS = 30
SETTLE = 0.3  # after the server answers, before its process tree is read
IDLE_SETTLE = 1.0  # after the idle connections are up, before the RSS is read


class Row:
    """One server: its name, its command (before pinning) and environment."""

    def __init__(self, name, argv, env=()):
        self.name = name
        self.argv = argv
        self.env = list(env)
        self.port = PORTS[name]

    def url(self):
        return f"https://127.0.0.1:{self.port}{PATH}"


# ---------------------------------------------------------------- command line


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/run --h3", description=__doc__.split("\n\n")[0])
    p.add_argument("--h3", action="store_true", help="this mode (bench/run passes it on)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per server (default 3)")
    p.add_argument("--duration", type=int, default=10, help="seconds of load per round (default 10)")
    p.add_argument("--connections", "-c", type=int, default=16, metavar="N",
                   help="QUIC connections of the load (default 16)")
    p.add_argument("--streams", "-m", type=int, default=16, metavar="N",
                   help="requests at a time on each connection (default 16)")
    p.add_argument("--idle-conns", type=int, default=1000, metavar="N",
                   help="idle HTTP/3 connections for the memory figure; 0 leaves it out (default 1000)")
    p.add_argument("--only", help="comma-separated rows: " + ", ".join(ROWS))
    p.add_argument("--caddy-version", default=CADDY_VERSION,
                   help=f"the Caddy that go install brings (default {CADDY_VERSION})")
    p.add_argument("--server-cpu", type=int, default=0, help="the CPU the server runs on (default 0)")
    p.add_argument("--load-cpu", type=int, default=1, help="the CPU the load generator runs on (default 1)")
    p.add_argument("--calls", action="store_true",
                   help="also count the server's system calls per request (perf stat, as bench/run --cost)")
    p.add_argument("--no-build", action="store_true",
                   help="use the binaries already built and the Caddy already installed")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown with the run's facts")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.duration < 1 or args.connections < 1 or args.streams < 1:
        p.error("--rounds, --duration, --connections and --streams must be at least 1")
    if args.idle_conns < 0:
        p.error("--idle-conns must be 0 or more")
    if not args.caddy_version.startswith("v"):
        p.error("--caddy-version is a module version, e.g. v2.11.9")
    cpus = os.sched_getaffinity(0)
    if args.server_cpu == args.load_cpu or not {args.server_cpu, args.load_cpu} <= cpus:
        p.error(f"--server-cpu and --load-cpu must be two different CPUs of {sorted(cpus)}")
    names = [n.strip() for n in (args.only or ",".join(ROWS)).split(",") if n.strip()]
    unknown = [n for n in names if n not in ROWS]
    if unknown or not names:
        p.error(f"--only: unknown or none {unknown}; choose from {', '.join(ROWS)}")
    args.rows = [n for n in ROWS if n in names]
    # measure_window (bench/cost.py) counts system calls unless no_perf.
    args.no_perf, args.mix = not args.calls, False
    args.target_dir = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO_ROOT, "target"))
    return args


def bench_dir(target_dir):
    """Where h3-load, h3-peer and Caddy are built: a directory of their own
    in the target directory (the two share their quinn and h3 builds)."""
    return os.path.join(target_dir, "bench-h3")


def caddy_bin(target_dir, version):
    return os.path.join(bench_dir(target_dir), f"caddy-{version}", "caddy")


# ---------------------------------------------------------------- files, builds, rows


def prepare(work):
    """The run's certificate (ECDSA P-256 for localhost, as every bench mode
    makes it) in `work`."""
    files = {"cert": os.path.join(work, "cert.pem"), "key": os.path.join(work, "key.pem")}
    make_certificate(files["cert"], files["key"])
    return files


def caddyfile(cert, key, port):
    """Caddy serving the canned answer over HTTPS (HTTP/1.1, HTTP/2 and, by
    default with TLS, HTTP/3 on the same UDP port), on loopback only, with
    no admin endpoint, no redirect listener on :80 and no trust store
    install."""
    return f"""{{
	admin off
	auto_https disable_redirects
	persist_config off
	skip_install_trust
}}

https://:{port} {{
	bind 127.0.0.1
	tls {cert} {key}
	respond {PATH} "Hello, World!" 200
}}
"""


def plan(args, files, work):
    target = args.target_dir
    ours = os.path.join(target, "release", "uppercut-mio-server")
    peer = os.path.join(bench_dir(target), "release", "h3-peer")
    caddy = caddy_bin(target, args.caddy_version)
    rows = []
    for name in args.rows:
        port = PORTS[name]
        if name == "ours":
            rows.append(Row(name, [ours, "--bind", f"127.0.0.1:{port}", "--tls-cert", files["cert"], "--tls-key",
                                   files["key"], "--http3", "on", "--pollers", "1"]))
        elif name == "caddy":
            conf = os.path.join(work, "Caddyfile")
            with open(conf, "w") as f:
                f.write(caddyfile(files["cert"], files["key"], port))
            # Caddy's storage and autosave under the run's directory, not ~.
            xdg = os.path.join(work, "caddy-home")
            rows.append(Row(name, [caddy, "run", "--config", conf, "--adapter", "caddyfile"],
                            ["GOMAXPROCS=1", f"XDG_DATA_HOME={xdg}", f"XDG_CONFIG_HOME={xdg}"]))
        else:
            rows.append(Row(name, [peer, f"127.0.0.1:{port}", files["cert"], files["key"]]))
    return rows


def build(args, rows):
    """Our server, h3-load and h3-peer with cargo, Caddy with go install."""
    target = args.target_dir
    names = {r.name for r in rows}
    h3 = bench_dir(target)
    steps = [(["cargo", "build", "--release", "--manifest-path", H3_LOAD_MANIFEST], h3, "bench/h3-load",
              h3_load_bin(target))]
    if "ours" in names:
        steps.append((["cargo", "build", "--release"], target, "uppercut-mio-server",
                      os.path.join(target, "release", "uppercut-mio-server")))
    if "h3-quinn" in names:
        steps.append((["cargo", "build", "--release", "--manifest-path", H3_PEER_MANIFEST], h3, "bench/h3-peer",
                      os.path.join(h3, "release", "h3-peer")))
    for cmd, directory, what, binary in steps:
        if not args.no_build:
            print(f"== building {what}: {' '.join(cmd)}", flush=True)
            if subprocess.run(cmd, env=dict(os.environ, CARGO_TARGET_DIR=directory)).returncode != 0:
                raise BenchError(f"building {what} failed")
        if not os.access(binary, os.X_OK):
            raise BenchError(f"{binary} is not built (drop --no-build)")
    if "caddy" in names:
        ensure_caddy(target, args.caddy_version, args.no_build)


def ensure_caddy(target, version, no_build):
    """Caddy `version` in the target directory, installed with `go install`
    (from the Go module proxy) once; kept there for later runs."""
    binary = caddy_bin(target, version)
    if os.access(binary, os.X_OK):
        return binary
    if no_build:
        raise BenchError(f"{binary} is not installed (drop --no-build)")
    if shutil.which("go") is None:
        raise BenchError("go is missing: Caddy is installed with `go install` (apt-get install golang-go)")
    cmd = ["go", "install", f"{CADDY_MODULE}@{version}"]
    print(f"== installing Caddy {version}: GOBIN={os.path.dirname(binary)} {' '.join(cmd)}", flush=True)
    os.makedirs(os.path.dirname(binary), exist_ok=True)
    if subprocess.run(cmd, env=dict(os.environ, GOBIN=os.path.dirname(binary))).returncode != 0:
        raise BenchError(f"go install {CADDY_MODULE}@{version} failed")
    return binary


def h3_load_bin(target):
    return os.path.join(bench_dir(target), "release", "h3-load")


# ---------------------------------------------------------------- h3-load


def parse_h3_load(out):
    """The JSON line h3-load prints last."""
    lines = [line for line in out.splitlines() if line.strip()]
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        raise BenchError(f"h3-load output not understood:\n{out[-2000:]}")


def udp_port_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def wait_ready(row, popen, h3_load):
    """Until the server answers a GET over HTTP/3 (its UDP socket may open
    after its TCP one, and the quinn peer has no TCP one)."""
    cmd = [h3_load, "--wait-ready", str(READY_SECONDS), "--insecure", row.url()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=READY_SECONDS + 30)
    if popen.poll() is not None:
        raise BenchError(f"{row.name} exited with status {popen.returncode}:\n{log_tail(popen.log_path)}")
    if done.returncode != 0:
        raise BenchError(f"{row.name} did not answer over HTTP/3: {done.stderr.strip()}\n{log_tail(popen.log_path)}")


@contextlib.contextmanager
def started(row, args, work, tag):
    """The row's server on the server CPU, answering; stopped after."""
    if not udp_port_free(row.port):
        raise BenchError(f"{row.name}: UDP 127.0.0.1:{row.port} is taken; stop what holds it first")
    proc = Proc(row.name, pinned(args.server_cpu, row.argv, row.env), row.port)
    popen = start_server(proc, work, tag)
    try:
        wait_ready(row, popen, h3_load_bin(args.target_dir))
        time.sleep(SETTLE)
        yield popen
        if popen.poll() is not None:
            raise BenchError(f"{row.name} died under load (status {popen.returncode}):\n{log_tail(popen.log_path)}")
    finally:
        stop_server(popen)


def parse_snmp_udp(text):
    """The Udp counters of /proc/net/snmp ({"RcvbufErrors": n, ...})."""
    rows = [line.split()[1:] for line in text.splitlines() if line.startswith("Udp:")]
    if len(rows) < 2:
        return {}
    return {name: int(value) for name, value in zip(rows[0], rows[1])}


def udp_drops():
    """Datagrams the kernel dropped for a full socket buffer, receive and
    send, in this network namespace so far (loopback's included)."""
    try:
        with open("/proc/net/snmp") as f:
            udp = parse_snmp_udp(f.read())
    except OSError:
        return None
    return udp.get("RcvbufErrors", 0) + udp.get("SndbufErrors", 0)


def run_load(row, args):
    cmd = pinned(args.load_cpu, [h3_load_bin(args.target_dir), "-c", str(args.connections), "-m", str(args.streams),
                                 "-d", str(args.duration), "--insecure", row.url()])
    # h3-load's own CPU (the only child reaped meanwhile): near 100% of its
    # core, the load generator, not the server, set the rate.
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    drops = udp_drops()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 120)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{row.name}: h3-load did not finish: {shlex.join(cmd)}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    drops_after = udp_drops()
    load_cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    if done.returncode != 0:
        raise BenchError(f"{row.name}: h3-load failed: {done.stderr.strip()}")
    result = parse_h3_load(done.stdout)
    if not result.get("requests"):
        raise BenchError(f"{row.name}: no request answered: {result.get('first_error', '')}")
    if result["non_2xx"] or abs(result["body_bytes"] - len(BODY)) > 1e-6:
        raise BenchError(f"{row.name}: {result['non_2xx']} answers not 2xx, {result['body_bytes']:.1f} B of body "
                         f"on average, not {BODY.decode()!r}: {shlex.join(cmd)}")
    result["load_cpu"] = 100.0 * load_cpu / max(result["seconds"], 1e-9)
    result["udp_drops"] = None if drops is None or drops_after is None else drops_after - drops
    return result


def measure_load(row, args, work, round_no):
    with started(row, args, work, f"load-{round_no}") as popen:
        if round_no == 1:
            banner = first_log_line(popen.log_path)
            if banner:
                print(f"   {row.name}: {banner[:160]}", flush=True)
        pids = tree_of(popen.pid)
        result = measure_window(pids, args, work, lambda: run_load(row, args))
        result["processes"] = len(pids)
    return result


def read_line(proc, deadline, what):
    """One line of `proc`'s stdout before `deadline`; past it, or at its end,
    the process is killed and its stderr told."""
    line = b""
    fd = proc.stdout.fileno()
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        chunk = os.read(fd, 1) if left > 0 and select.select([fd], [], [], left)[0] else b""
        if not chunk:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            raise BenchError(f"h3-load --idle gave no {what} line (got {line!r}, status {proc.returncode}): "
                             f"{proc.stderr.read().decode(errors='replace')[-500:]}")
        line += chunk
    try:
        return json.loads(line)
    except ValueError:
        raise BenchError(f"h3-load --idle: not a {what} line: {line!r}")


def tree_rss(pid):
    total = 0
    for p in tree_of(pid):
        try:
            total += rss_bytes(p)
        except OSError:
            pass
    return total


def measure_idle(row, args, work, round_no):
    with started(row, args, work, f"idle-{round_no}") as popen:
        before = tree_rss(popen.pid)
        cmd = pinned(args.load_cpu, [h3_load_bin(args.target_dir), "--idle", str(args.idle_conns), "--insecure",
                                     row.url()])
        load = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            ready = read_line(load, time.monotonic() + 60 + args.idle_conns / 20, "ready")
            if not ready["ready"]:
                raise BenchError(f"{row.name}: no idle connection opened: {ready.get('first_error', '')}")
            time.sleep(IDLE_SETTLE)
            after = tree_rss(popen.pid)
            load.stdin.close()
            held = read_line(load, time.monotonic() + 30, "open")
            load.wait(timeout=30)
        finally:
            if load.poll() is None:
                load.kill()
                load.wait()
            for stream in (load.stdin, load.stdout, load.stderr):
                if not stream.closed:
                    stream.close()
    return {"rss_before": before, "rss_after": after, "idle_conns": ready["ready"],
            "idle_errors": ready["errors"], "open": held["open"], "per_conn": (after - before) / ready["ready"]}


def describe(r):
    if "per_conn" in r:
        return (f"RSS {r['rss_before'] / 2**20:.1f} -> {r['rss_after'] / 2**20:.1f} MiB with {r['idle_conns']} "
                f"connections, {r['per_conn'] / 1024:.1f} KiB each, {r['open']} still open, "
                f"{r['idle_errors']} failed")
    text = (f"{r['rps']:.0f}/s, CPU {r['cpu_us']:.2f} us/req (user {r['user_us']:.2f}, sys {r['sys_us']:.2f}), "
            f"p50 {r['p50_us'] / 1000:.2f} ms, p99 {r['p99_us'] / 1000:.2f} ms, {r['errors']} errors, "
            f"{r['threads_ran']} thread(s) ran, h3-load at {r['load_cpu']:.0f}% of its CPU, "
            f"{r['udp_drops']} UDP datagrams dropped")
    if r.get("calls") is not None:
        text += f", {r['calls']:.2f} calls/req"
    return text


# ---------------------------------------------------------------- the table


def summarize(loads, idles):
    """{row: medians (CPU, rps with their spread) over the rounds, error
    totals, idle memory per connection}."""
    out = {}
    for name in list(loads) + [n for n in idles if n not in loads]:
        rounds, idle = loads.get(name, []), idles.get(name, [])
        row = {k: spread([r.get(k) for r in rounds]) for k in ("rps", "cpu_us", "user_us", "sys_us", "p50_us",
                                                                 "p99_us", "calls", "load_cpu")}
        row["errors"] = sum(r["errors"] for r in rounds) if rounds else None
        drops = [r.get("udp_drops") for r in rounds if r.get("udp_drops") is not None]
        row["udp_drops"] = sum(drops) if drops else None
        row["per_conn"] = spread([r["per_conn"] for r in idle])
        row["open"] = min(r["open"] for r in idle) if idle else None
        out[name] = row
    return out


def ratio(summary, name, base, key):
    a, b = summary.get(name, {}).get(key), summary.get(base, {}).get(key)
    if not a or not b or not b[0]:
        return None
    return a[0] / b[0]


def fmt_ratio(value):
    return "-" if value is None else f"{value:.2f}x"


def table_cells(summary):
    header = ["server", "req/s", "CPU µs/req", "p50 ms", "p99 ms", "errors", "UDP drops", "load CPU",
              "idle KiB/conn",
              "CPU vs caddy", "CPU vs h3-quinn", "req/s vs caddy"]
    if any(row["calls"] for row in summary.values()):
        header.insert(3, "calls/req")
    cells = []
    for name, row in summary.items():
        def ms(key):
            return "-" if row[key] is None else f"{row[key][0] / 1000:.2f}"
        line = [name, "-" if row["rps"] is None else f"{row['rps'][0]:.0f}", fmt_spread(row["cpu_us"]),
                ms("p50_us"), ms("p99_us"), "-" if row["errors"] is None else str(row["errors"]),
                "-" if row["udp_drops"] is None else str(row["udp_drops"]),
                "-" if row["load_cpu"] is None else f"{row['load_cpu'][0]:.0f}%",
                "-" if row["per_conn"] is None else f"{row['per_conn'][0] / 1024:.1f}"]
        if len(header) == 13:
            line.insert(3, fmt_spread(row["calls"]))
        for base, key in (("caddy", "cpu_us"), ("h3-quinn", "cpu_us"), ("caddy", "rps")):
            line.append("" if name == base else fmt_ratio(ratio(summary, name, base, key)))
        cells.append(line)
    return header, cells


def target_lines(summary, ours="ours"):
    """Ours against each target: `CPU per request <= 0.67x caddy's: 0.52x, met`."""
    lines = []
    for what, base, key, bound, at_most in TARGETS:
        value = ratio(summary, ours, base, key)
        sign = "<=" if at_most else ">="
        if value is None:
            verdict = "not measured"
        else:
            met = value <= bound if at_most else value >= bound
            verdict = f"{value:.2f}x, {'met' if met else 'NOT met'}"
        lines.append(f"- {what} {sign} {bound:g}x {base}'s: {verdict}")
    return lines


def print_plain(header, cells):
    widths = [max(len(str(r[i])) for r in [header] + cells) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths]] + cells:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())


# ---------------------------------------------------------------- main


def raise_fd_limit(needed):
    """h3-load's idle connections share up to 64 sockets; the servers (our
    children) keep one per connection at most."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed + 1024
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))


def load_average():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv):
    args = parse_args(argv)
    os.chdir(REPO_ROOT)
    command = "bench/run " + shlex.join(argv)
    try:
        if shutil.which("taskset") is None:
            raise BenchError("taskset is missing: apt-get install util-linux")
        if args.calls and shutil.which("perf") is None:
            raise BenchError("perf is missing: apt-get install linux-perf")
        raise_fd_limit(args.idle_conns)
        with tempfile.TemporaryDirectory(prefix="bench-h3-") as work:
            files = prepare(work)
            rows = plan(args, files, work)
            build(args, rows)
            load_before = load_average()
            print(f"$ {command}")
            print(f"== {args.rounds} round(s) of {args.duration} s; server on CPU {args.server_cpu}, load on CPU "
                  f"{args.load_cpu}; load average {load_before}; rows {[r.name for r in rows]}")
            print(f"   load: h3-load -c {args.connections} -m {args.streams} -d {args.duration} --insecure "
                  f"https://HOST{PATH}")
            if args.idle_conns:
                print(f"   idle: h3-load --idle {args.idle_conns} --insecure https://HOST{PATH}")
            sys.stdout.flush()
            loads = {r.name: [] for r in rows}
            idles = {r.name: [] for r in rows}
            steps = [("load", measure_load, loads)] + ([("idle", measure_idle, idles)] if args.idle_conns else [])
            total, done = len(steps) * args.rounds * len(rows), 0
            for what, measure, results in steps:
                for round_no in range(1, args.rounds + 1):
                    for row in rows:
                        done += 1
                        print(f"bench/run --h3: [{done}/{total}] {what}, round {round_no}/{args.rounds}, {row.name}",
                              file=sys.stderr, flush=True)
                        result = measure(row, args, work, round_no)
                        results[row.name].append(result)
                        print(f"   {what} round {round_no} {row.name}: {describe(result)}", flush=True)
        summary = summarize(loads, idles)
        header, cells = table_cells(summary)
        caption = (f"HTTP/3, server pinned to CPU {args.server_cpu} (`taskset`; ours `--pollers 1`, Caddy "
                   f"`GOMAXPROCS=1`, the quinn peer one tokio thread), h3-load on CPU {args.load_cpu} "
                   f"(`-c {args.connections} -m {args.streams}`, GET {PATH}). Medians over {args.rounds} round(s) of "
                   f"{args.duration} s; load average {load_before} at the start, {load_average()} at the end. "
                   "CPU µs/req: user and system time of the server's process and threads (/proc) over the load, "
                   "per request answered (min-max in brackets); errors: failed requests, total; UDP drops: datagrams "
                   "the kernel dropped for a full socket buffer during the loads (/proc/net/snmp, the whole "
                   "machine), total; load CPU: h3-load's "
                   "user and system time over its run, in % of its one CPU (near 100%: the client, not the "
                   "server, set the rate); idle KiB/conn: RSS "
                   f"growth with {args.idle_conns} idle HTTP/3 connections open (one GET each), per connection. "
                   "vs: this row's median over that row's.")
        targets = target_lines(summary) if "ours" in summary else []
        print()
        if args.markdown:
            print(report(run_facts(REPO_ROOT, command), caption, header, cells, 1))
        else:
            print(f"$ {command}\n\n{caption}\n")
            print_plain(header, cells)
        if targets:
            print("\nOurs against the targets (issue 43):\n")
            print("\n".join(targets))
        return 0
    except BenchError as e:
        print(f"bench/run --h3: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench/run --h3: interrupted", file=sys.stderr)
        return 130

