"""bench/h2bench.py: `bench/run --h2`, HTTP/2 against nginx, actix-web and h2o.

Loads, each through h2load (nghttp2-client) for --duration seconds, one server
up at a time, rounds alternating within a load:

- tls-m16: `h2load -c64 -m16` on `/` (the canned `hello\\n`) over TLS (ALPN h2);
- tls-m1: `h2load -c64 -m1`, the same, one stream at a time per connection;
- h2c-m16: `h2load -c64 -m16` on http:// (HTTP/2 with prior knowledge);
- static-m16: `h2load -c64 -m16` over TLS on a 64 KiB file of random bytes;
- idle: --idle-conns connections over TLS, each sending the preface and an
  empty SETTINGS, acknowledging the server's SETTINGS, and then nothing: the
  server's RSS growth per connection, and its CPU over --idle-seconds with them
  open, in % of one core.

Rows: ours in both dispatch modes (`--bind`, with `--tls-cert`/`--tls-key`
for TLS, `--static-dir`), nginx (`listen ... ssl http2` and a plain `listen
... http2`, `return 200` for `/`, the file from `root`), actix-web 4 with
rustls and h2 (bench/actix-hello; `--h2c` binds with `bind_auto_h2c`; `--file`
serves the same bytes from memory) and h2o (an mruby handler for `/`,
`file.file` for the file). One ECDSA P-256 certificate for the run, made with
openssl as `--tls` makes it.

Besides requests/s, each row has its server CPU per request: user + system CPU
time of every process of the server's process group (nginx's master and its
workers), from /proc before and after h2load, over the requests h2load counted
as succeeded. The table holds medians over rounds and ratios against nginx and
actix (rps, and CPU per request).
"""

import argparse
import os
import re
import resource
import select
import shlex
import shutil
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time

from markdown_report import report, run_facts, table
from servers import (BenchError, make_certificate, first_log_line, group_cpu_seconds, log_tail, start_server, stop_server,
                     wait_until_accepting)

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
ACTIX_MANIFEST = "bench/actix-hello/Cargo.toml"

# (TLS port, plain port) per row; nginx and h2o listen on both at once, ours
# and actix are started with one or the other.
PORTS = {"ours-local": (19002, 19003), "ours-system": (19004, 19005), "nginx": (19402, 19403),
         "actix": (19202, 19203), "h2o": (19412, 19413)}
ROWS = ("ours-local", "ours-system", "nginx", "actix", "h2o")
BASES = ("nginx", "actix")
STATIC_NAME = "64k.bin"
STATIC_SIZE = 64 * 1024


class Load:
    """One h2load load (or the idle connections): its options, scheme and path."""

    def __init__(self, key, tls, path, h2load=None, what=""):
        self.key = key
        self.tls = tls
        self.path = path
        self.h2load = h2load  # None: the idle connections, not h2load
        self.what = what

    def display(self, args):
        if self.h2load is None:
            return (f"{args.idle_conns} idle h2 connections over TLS, RSS growth per connection and "
                    f"CPU over {args.idle_seconds:g} s")
        scheme = "https" if self.tls else "http"
        return f"h2load {' '.join(self.h2load)} -t{args.threads} -D {args.duration} {scheme}://HOST{self.path}"


LOADS = {
    "tls-m16": Load("tls-m16", True, "/", ["-c64", "-m16"], "canned hello over TLS"),
    "tls-m1": Load("tls-m1", True, "/", ["-c64", "-m1"], "canned hello over TLS, one stream at a time"),
    "h2c-m16": Load("h2c-m16", False, "/", ["-c64", "-m16"], "canned hello, h2c with prior knowledge"),
    "static-m16": Load("static-m16", True, "/" + STATIC_NAME, ["-c64", "-m16"], "a 64 KiB file over TLS"),
    "idle": Load("idle", True, "/"),
}


class Row:
    """One server: how to start it for a load, and where it listens."""

    def __init__(self, name, argv_for):
        self.name = name
        self.argv_for = argv_for  # load -> argv
        self.host = "127.0.0.1"
        self.tls_port, self.plain_port = PORTS[name]

    def port(self, load):
        return self.tls_port if load.tls else self.plain_port

    def url(self, load):
        return f"{'https' if load.tls else 'http'}://127.0.0.1:{self.port(load)}{load.path}"


# ---------------------------------------------------------------- command line


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/run --h2", description=__doc__.split("\n\n")[0])
    p.add_argument("--h2", action="store_true", help="this mode (bench/run passes it on)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per server and load (default 3)")
    p.add_argument("--duration", type=int, default=5, help="seconds of h2load per round (default 5)")
    p.add_argument("--threads", type=int, default=1, help="h2load threads, -t (default 1)")
    p.add_argument("--loads", default=",".join(LOADS),
                   help=f"comma-separated loads (default all: {','.join(LOADS)})")
    p.add_argument("--only", help="comma-separated rows: " + ", ".join(ROWS))
    p.add_argument("--idle-conns", type=int, default=1000, metavar="N",
                   help="connections the idle load opens (default 1000)")
    p.add_argument("--idle-seconds", type=float, default=5.0, metavar="S",
                   help="seconds the idle load measures CPU with them open (default 5)")
    p.add_argument("--pollers", type=int, help="passed to our server as --pollers N (default: its own)")
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)),
                   help="nginx worker processes, actix workers, h2o threads (default: number of CPUs)")
    p.add_argument("--no-build", action="store_true", help="use the binaries already built")
    p.add_argument("--markdown", action="store_true", help="print the tables as Markdown with the run's facts")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.duration < 1 or args.threads < 1 or args.workers < 1:
        p.error("--rounds, --duration, --threads and --workers must be at least 1")
    if args.idle_conns < 1 or args.idle_seconds <= 0 or (args.pollers is not None and args.pollers < 1):
        p.error("--idle-conns, --idle-seconds and --pollers must be above 0")
    args.load_keys = split_names(args.loads, LOADS, "--loads", p)
    args.rows = split_names(args.only or ",".join(ROWS), ROWS, "--only", p)
    return args


def split_names(text, known, option, parser):
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        parser.error(f"{option}: unknown or none {unknown}; choose from {', '.join(known)}")
    return names


def target_dir():
    return os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO_ROOT, "target"))


def tool(name, package):
    found = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}")
                                        if os.access(p, os.X_OK)), None)
    if not found:
        raise BenchError(f"{name} is missing: apt-get install {package}")
    return found


# ---------------------------------------------------------------- the servers and their files


def prepare(work, args):
    """The certificate, the 64 KiB file, and nginx's and h2o's configurations,
    in `work`; returns the paths the rows need."""
    files = {"cert": os.path.join(work, "cert.pem"), "key": os.path.join(work, "key.pem"),
             "static": os.path.join(work, "static")}
    make_certificate(files["cert"], files["key"])
    os.makedirs(files["static"])
    files["file"] = os.path.join(files["static"], STATIC_NAME)
    with open(files["file"], "wb") as f:
        f.write(os.urandom(STATIC_SIZE))  # random: no server finds anything to compress
    nginx_dir, h2o_dir = os.path.join(work, "nginx"), os.path.join(work, "h2o")
    os.makedirs(nginx_dir)
    os.makedirs(h2o_dir)
    files["nginx.conf"] = os.path.join(nginx_dir, "nginx.conf")
    with open(files["nginx.conf"], "w") as f:
        f.write(nginx_conf(nginx_dir, files, args.workers))
    files["h2o.conf"] = os.path.join(h2o_dir, "h2o.conf")
    with open(files["h2o.conf"], "w") as f:
        f.write(h2o_conf(h2o_dir, files, args.workers))
    return files


def nginx_conf(prefix, files, workers):
    """nginx as bench/run --tls sets it (no daemon, no access log, keep-alive
    never ended by a request count, TLS 1.2 and 1.3, a session cache), with
    HTTP/2 on a TLS and a plain (prior knowledge) listener. Debian's nginx
    1.22 spells `http2 on;` as the listen parameter."""
    tls, plain = PORTS["nginx"]
    temp = "\n".join(f"    {kind}_temp_path {prefix}/{kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                              "uwsgi", "scgi"))
    return f"""worker_processes {workers};
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
worker_rlimit_nofile 65536;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 75s;
{temp}
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    open_file_cache max=16;
    server {{
        listen 127.0.0.1:{tls} ssl http2;
        listen 127.0.0.1:{plain} http2;
        ssl_certificate {files['cert']};
        ssl_certificate_key {files['key']};
        root {files['static']};
        location = / {{
            default_type "text/plain; charset=utf-8";
            return 200 "hello\\n";
        }}
    }}
}}
"""


def h2o_conf(prefix, files, workers):
    """h2o 2.2 (Debian's): `/` from an mruby handler (h2o has no canned
    response), the file with file.file, TLS and plain (h2o takes the h2c
    preface on a plain port) listeners; HTTP/2 idle timeout raised from 10 s
    so the idle load's connections stay."""
    tls, plain = PORTS["h2o"]
    paths = f"""    paths:
      "/{STATIC_NAME}":
        file.file: "{files['file']}"
      "/":
        mruby.handler: |
          Proc.new do |env|
            [200, {{"content-type" => "text/plain; charset=utf-8"}}, ["hello\\n"]]
          end
"""
    return f"""num-threads: {workers}
error-log: {prefix}/error.log
http2-idle-timeout: 120
http1-request-timeout: 120
hosts:
  "127.0.0.1:{tls}":
    listen:
      host: 127.0.0.1
      port: {tls}
      ssl:
        certificate-file: "{files['cert']}"
        key-file: "{files['key']}"
        minimum-version: TLSv1.2
{paths}  "127.0.0.1:{plain}":
    listen:
      host: 127.0.0.1
      port: {plain}
{paths}"""


def plan(args, files):
    target = target_dir()
    ours = os.path.join(target, "release", "uppercut-mio-server")
    actix = os.path.join(target, "bench", "release", "actix-hello")
    pollers = ["--pollers", str(args.pollers)] if args.pollers else []
    rows = []
    for name in args.rows:
        if name.startswith("ours-"):
            mode = name[len("ours-"):]

            def argv_for(load, name=name, mode=mode):
                tls, plain = PORTS[name]
                argv = [ours, "--bind", f"127.0.0.1:{tls if load.tls else plain}", "--dispatch", mode, *pollers,
                        "--static-dir", files["static"]]
                return argv + (["--tls-cert", files["cert"], "--tls-key", files["key"]] if load.tls else [])
        elif name == "actix":
            def argv_for(load):
                tls, plain = PORTS["actix"]
                argv = [actix, f"127.0.0.1:{tls if load.tls else plain}", str(args.workers), "--file", files["file"]]
                return argv + ([files["cert"], files["key"]] if load.tls else ["--h2c"])
        elif name == "nginx":
            nginx = tool("nginx", "nginx")

            def argv_for(load, nginx=nginx):
                return [nginx, "-c", files["nginx.conf"]]
        else:
            h2o = tool("h2o", "h2o")

            def argv_for(load, h2o=h2o):
                return [h2o, "-c", files["h2o.conf"]]
        rows.append(Row(name, argv_for))
    return rows, ours, actix


def build(args, rows, ours, actix):
    names = [r.name for r in rows]
    steps = []
    if any(n.startswith("ours-") for n in names):
        steps.append((["cargo", "build", "--release"], target_dir(), "uppercut-mio-server", ours))
    if "actix" in names:
        steps.append((["cargo", "build", "--release", "--manifest-path", ACTIX_MANIFEST],
                      os.path.join(target_dir(), "bench"), "bench/actix-hello", actix))
    for cmd, directory, what, binary in steps:
        if not args.no_build:
            print(f"== building {what}: {' '.join(cmd)}", flush=True)
            if subprocess.run(cmd, env=dict(os.environ, CARGO_TARGET_DIR=directory)).returncode != 0:
                raise BenchError(f"building {what} failed")
        if not os.access(binary, os.X_OK):
            raise BenchError(f"{binary} is not built (drop --no-build)")


# ---------------------------------------------------------------- h2load


def h2load_argv(load, threads, duration, url):
    return ["h2load", *load.h2load, f"-t{threads}", "-D", str(duration), url]


def parse_h2load(out):
    """The numbers of one h2load run: req/s from its `finished in` line, the
    request and status counts, and the protocol it spoke. Requests still in
    flight when -D runs out are counted by h2load as failed and errored (at
    most -c times -m of them): they are `unanswered` here, not errors."""
    finished = re.search(r"^finished in ([\d.]+)(us|ms|s), ([\d.]+) req/s", out, re.M)
    counts = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                       r"(\d+) errored, (\d+) timeout", out, re.M)
    codes = re.search(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out, re.M)
    if not (finished and counts and codes):
        raise BenchError(f"h2load output not understood:\n{out[-2000:]}")
    protocol = re.search(r"^Application protocol: (\S+)", out, re.M)
    data = re.search(r"^traffic: .*\((\d+)\) data", out, re.M)
    total, started, done, succeeded, failed, errored, timeout = (int(x) for x in counts.groups())
    c2, c3, c4, c5 = (int(x) for x in codes.groups())
    return {"rps": float(finished.group(3)), "requests": succeeded, "done": done, "non_2xx": c3 + c4 + c5,
            "unanswered": errored + timeout, "protocol": protocol.group(1) if protocol else None,
            "body_bytes": int(data.group(1)) / done if data and done else 0.0}


def run_h2load(cmd, duration):
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    except subprocess.TimeoutExpired:
        raise BenchError(f"h2load did not finish: {shlex.join(cmd)}")
    if done.returncode != 0:
        raise BenchError(f"h2load failed ({done.returncode}): {shlex.join(cmd)}\n{done.stdout}{done.stderr}")
    result = parse_h2load(done.stdout)
    if result["protocol"] not in ("h2", "h2c"):
        raise BenchError(f"h2load did not speak HTTP/2 (protocol {result['protocol']}): {shlex.join(cmd)}\n"
                         f"{done.stdout[-2000:]}")
    if result["requests"] == 0:
        raise BenchError(f"no request succeeded: {shlex.join(cmd)}\n{done.stdout[-2000:]}")
    return result


# ---------------------------------------------------------------- idle HTTP/2 connections

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, GOAWAY = 0x4, 0x7
ACK = 0x1


def frame(kind, flags=0, stream=0, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def split_frames(buf):
    """The whole frames at the start of `buf` as (type, flags, stream, payload),
    and the bytes left over (a frame not yet complete)."""
    frames, at = [], 0
    while len(buf) - at >= 9:
        length = int.from_bytes(buf[at:at + 3], "big")
        if len(buf) - at < 9 + length:
            break
        kind, flags = buf[at + 3], buf[at + 4]
        stream = int.from_bytes(buf[at + 5:at + 9], "big") & 0x7FFFFFFF
        frames.append((kind, flags, stream, bytes(buf[at + 9:at + 9 + length])))
        at += 9 + length
    return frames, bytes(buf[at:])


def idle_h2_connection(host, port, context, timeout=10.0):
    """A TLS connection that chose h2 in ALPN, sent the preface and an empty
    SETTINGS, read the server's SETTINGS and acknowledged it; then nothing."""
    raw = socket.create_connection((host, port), timeout=timeout)
    try:
        conn = context.wrap_socket(raw, server_hostname="localhost")
    except (OSError, ssl.SSLError):
        raw.close()
        raise
    if conn.selected_alpn_protocol() != "h2":
        conn.close()
        raise BenchError(f"{host}:{port} chose {conn.selected_alpn_protocol()!r} in ALPN, not h2")
    conn.sendall(PREFACE + frame(SETTINGS))
    buf = b""
    while True:
        data = conn.recv(16384)
        if not data:
            conn.close()
            raise BenchError(f"{host}:{port} closed the connection before its SETTINGS")
        frames, buf = split_frames(buf + data)
        if any(kind == SETTINGS and not flags & ACK for kind, flags, _, _ in frames):
            conn.sendall(frame(SETTINGS, ACK))
            return conn


def client_context():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the run's own self-signed certificate
    context.set_alpn_protocols(["h2"])
    return context


def still_open(conns):
    """How many connections the server has neither closed nor sent GOAWAY on."""
    gone = 0
    for conn in conns:
        conn.setblocking(False)
        buf, closed = b"", False
        try:
            while select.select([conn], [], [], 0)[0] or conn.pending():
                data = conn.recv(16384)
                if not data:
                    closed = True
                    break
                buf += data
        except (ssl.SSLWantReadError, BlockingIOError):
            pass
        except OSError:
            closed = True
        frames, _ = split_frames(buf)
        if closed or any(kind == GOAWAY for kind, _, _, _ in frames):
            gone += 1
    return len(conns) - gone


def group_rss(pgid):
    """VmRSS summed over the process group (nginx's master and workers)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            if int(stat[stat.rindex(")") + 2:].split()[2]) != pgid:
                continue
            with open(f"/proc/{entry}/status") as f:
                total += next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:")), 0)
        except (OSError, ValueError):
            continue
    return total


def measure_idle(row, popen, args):
    time.sleep(0.5)  # let the start settle
    before = group_rss(popen.pid)
    context, conns = client_context(), []
    try:
        for _ in range(args.idle_conns):
            conns.append(idle_h2_connection(row.host, row.tls_port, context))
        time.sleep(1.0)
        after = group_rss(popen.pid)
        cpu0, t0 = group_cpu_seconds(popen.pid), time.monotonic()
        time.sleep(args.idle_seconds)
        idle = 100.0 * (group_cpu_seconds(popen.pid) - cpu0) / (time.monotonic() - t0)
        kept = still_open(conns)
    finally:
        for conn in conns:
            conn.close()
    return {"rss_before": before, "rss_after": after, "per_conn": (after - before) / args.idle_conns,
            "idle_cpu": idle, "open": kept}


# ---------------------------------------------------------------- one measurement


class Started:
    """What start_server and wait_until_accepting need of a row, for one load."""

    def __init__(self, row, load):
        self.name = row.name
        self.argv = row.argv_for(load)
        self.host = row.host
        self.port = row.port(load)


def measure(row, load, args, log_dir, round_no):
    spec = Started(row, load)
    popen = start_server(spec, log_dir, f"{load.key}-{round_no}")
    try:
        wait_until_accepting(spec, popen)
        if round_no == 1:
            banner = first_log_line(popen.log_path)
            if banner:
                print(f"   {row.name}: {banner}", flush=True)
        if load.h2load is None:
            result = measure_idle(row, popen, args)
        else:
            cmd = h2load_argv(load, args.threads, args.duration, row.url(load))
            before = group_cpu_seconds(popen.pid)
            result = run_h2load(cmd, args.duration)
            result["cpu_us"] = 1e6 * (group_cpu_seconds(popen.pid) - before) / result["requests"]
        if popen.poll() is not None:
            raise BenchError(f"{row.name} died under load (status {popen.returncode}):\n{log_tail(popen.log_path)}")
        return result
    finally:
        stop_server(popen)


def describe(r):
    if "per_conn" in r:
        return (f"RSS {r['rss_before'] / 2**20:.1f} -> {r['rss_after'] / 2**20:.1f} MiB, "
                f"{r['per_conn'] / 1024:.1f} KiB per connection, idle CPU {r['idle_cpu']:.2f}% of a core, "
                f"{r['open']} still open")
    text = (f"{r['rps']:.0f} rps ({r['protocol']}, {r['body_bytes']:.0f} B of body per response), "
            f"server CPU {r['cpu_us']:.1f} us/req")
    if r["non_2xx"]:
        text += f", {r['non_2xx']} non-2xx"
    return text + f", {r['unanswered']} unanswered at the stop"


# ---------------------------------------------------------------- tables


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summary(results):
    """{load: {row: medians over its rounds}}; non-2xx are totals."""
    out = {}
    for key, rows in results.items():
        out[key] = {}
        for name, rounds in rows.items():
            if not rounds:
                continue
            if "per_conn" in rounds[0]:
                row = {k: median([r[k] for r in rounds]) for k in ("rss_before", "per_conn", "idle_cpu", "open")}
            else:
                row = {k: median([r[k] for r in rounds]) for k in ("rps", "cpu_us")}
                row["non_2xx"] = sum(r["non_2xx"] for r in rounds)
            out[key][name] = row
    return out


def versus(row, base):
    """`rps 1.31x, CPU 0.74x`: this row's rps and CPU per request over the base's."""
    if base is None or not base.get("rps") or not base.get("cpu_us"):
        return "-"
    return f"rps {row['rps'] / base['rps']:.2f}x, CPU/req {row['cpu_us'] / base['cpu_us']:.2f}x"


def load_table(rows_by_load):
    header = ["load", "server", "rps", "server CPU/req", "non-2xx"] + [f"vs {b}" for b in BASES]
    cells = []
    for key, rows in rows_by_load.items():
        if LOADS[key].h2load is None:
            continue
        for name, row in rows.items():
            cells.append([key, name, f"{row['rps']:.0f}", f"{row['cpu_us']:.1f} us", str(row["non_2xx"])]
                         + ["" if name == b else versus(row, rows.get(b)) for b in BASES])
    return header, cells


def idle_table(rows):
    header = ["server", "RSS before", "RSS per idle connection", "idle CPU", "still open"] + \
        [f"vs {b}" for b in BASES]
    cells = []
    for name, row in rows.items():
        def per_conn_vs(b):
            base = rows.get(b)
            if name == b:
                return ""
            if base is None or not base["per_conn"] or base["per_conn"] <= 0:
                return "-"
            return f"{row['per_conn'] / base['per_conn']:.2f}x"
        cells.append([name, f"{row['rss_before'] / 2**20:.1f} MiB", f"{row['per_conn'] / 1024:.1f} KiB",
                      f"{row['idle_cpu']:.2f}%", f"{row['open']:.0f}"] + [per_conn_vs(b) for b in BASES])
    return header, cells


def print_plain(header, cells, text_columns):
    widths = [max(len(str(r[i])) for r in [header] + cells) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths]] + cells:
        print("  ".join(c.ljust(w) if i < text_columns or i >= len(header) - len(BASES) else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths))))


def load_average():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def raise_fd_limit(needed):
    """The idle load holds N sockets here, and the servers (our children) as many."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed + 1024
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise BenchError(f"--idle-conns {needed} needs {want} open files; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def main(argv):
    args = parse_args(argv)
    os.chdir(REPO_ROOT)
    command = "bench/run " + shlex.join(argv)
    try:
        if any(LOADS[k].h2load for k in args.load_keys):
            tool("h2load", "nghttp2-client")
        if "idle" in args.load_keys:
            raise_fd_limit(args.idle_conns)
        with tempfile.TemporaryDirectory(prefix="bench-h2-") as work:
            # Run as root, nginx's workers and h2o drop to nobody, who must read the file.
            os.chmod(work, 0o755)
            files = prepare(work, args)
            rows, ours, actix = plan(args, files)
            build(args, rows, ours, actix)
            load_before = load_average()
            print(f"$ {command}")
            print(f"== {args.rounds} round(s) of {args.duration} s, {len(os.sched_getaffinity(0))} CPUs, "
                  f"load average {load_before}; rows {[r.name for r in rows]}; loads:")
            for key in args.load_keys:
                print(f"   {key}: {LOADS[key].display(args)}")
            sys.stdout.flush()
            results = {key: {r.name: [] for r in rows} for key in args.load_keys}
            total = len(args.load_keys) * args.rounds * len(rows)
            done = 0
            for key in args.load_keys:
                load = LOADS[key]
                for round_no in range(1, args.rounds + 1):
                    for row in rows:
                        done += 1
                        print(f"bench/run --h2: [{done}/{total}] {key}, round {round_no}/{args.rounds}, {row.name}",
                              file=sys.stderr, flush=True)
                        print(f"== {key}, round {round_no}/{args.rounds}: {row.name} ({row.url(load)}), "
                              f"load average {load_average()}", flush=True)
                        result = measure(row, load, args, work, round_no)
                        results[key][row.name].append(result)
                        print(f"   {describe(result)}", flush=True)
        rows_by_load = summary(results)
        caption = (f"Medians over {args.rounds} round(s) of {args.duration} s of h2load -t{args.threads}; load "
                   f"average {load_before} at the start, {load_average()} at the end. Server CPU/req: user+system "
                   "CPU of the server's processes over the load, per succeeded request. non-2xx: totals. "
                   "vs: this row over the base row.")
        tables = []
        if any(LOADS[k].h2load for k in args.load_keys):
            tables.append((caption,) + load_table(rows_by_load) + (2,))
        if "idle" in rows_by_load:
            idle_caption = (f"{args.idle_conns} idle HTTP/2 connections over TLS (preface, SETTINGS, SETTINGS ACK, "
                            f"then nothing): RSS growth of the server's processes per connection, their CPU over "
                            f"{args.idle_seconds:g} s with the connections open (% of one core), and how many "
                            "were still open then; medians. vs: RSS per connection over the base row's.")
            tables.append((idle_caption,) + idle_table(rows_by_load["idle"]) + (1,))
        print()
        if not args.markdown:
            print(f"$ {command}\n")
        for i, (text, header, cells, text_columns) in enumerate(tables):
            if args.markdown and i == 0:
                print(report(run_facts(REPO_ROOT, command), text, header, cells, text_columns))
            elif args.markdown:  # the run's facts are above the first table
                print("\n".join([text, "", *table(header, cells, text_columns)]))
            else:
                print(f"{text}\n")
                print_plain(header, cells, text_columns)
            if i + 1 < len(tables):
                print()
        return 0
    except BenchError as e:
        print(f"bench/run --h2: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench/run --h2: interrupted", file=sys.stderr)
        return 130
