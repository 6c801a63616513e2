"""bench/shapes.py: load shapes for bench/run, the rounds that measure them, and
their table. Only the Python standard library is used.

A shape is one way of loading a server: a load generator (wrk or oha) and its
options. `bench/run --shapes` measures every server under every shape; `--rate`
and `--close` pick single shapes; without any of them bench/run measures the one
wrk load given by --wrk and --script, as it always has.
"""

import os
import shlex
import sys
import time

from oha import oha_argv, run_oha
from servers import BenchError
from wrk_report import fmt_latency, median_of, run_wrk, wrk_argv

# Open-loop rates for --shapes: one the servers serve with time to spare, one
# that keeps a 2-core machine busy.
SHAPE_RATES = (2000, 10000)
CLOSE_WRK = "-t2 -c32"


class Shape:
    """One load: `tool` is "wrk" or "oha"; `options` go before -d/-z and the URL."""

    def __init__(self, key, label, tool, options, script=None):
        self.key = key
        self.label = label
        self.tool = tool
        self.options = options
        self.script = script
        # An open-loop load fixes the request rate, so latency is what differs.
        self.open_loop = tool == "oha"

    def argv(self, duration, url, oha="oha", headers=(), script=None):
        """`script`, a row's own wrk script (a POST body), replaces the shape's;
        `headers`, fields every request carries."""
        # wrk and oha both take a request header field as -H "Name: value".
        options = [*self.options, *(arg for field in headers for arg in ("-H", field))]
        if self.tool == "oha":
            if script:
                raise BenchError(f"{self.label}: a row that needs a wrk script ({script}) has no "
                                 "oha load; drop the open-loop shapes or that row (--only)")
            return oha_argv(oha, options, duration, url)
        return wrk_argv(options, duration, script or self.script, url)

    def display(self, duration, url="URL"):
        """The load command as a user would type it (oha without its full path)."""
        return shlex.join(self.argv(duration, url))


def open_loop_shape(rate, connections):
    options = ["-c", str(connections), "-q", str(rate), "--latency-correction"]
    return Shape(f"open-{rate}", f"open loop {rate}/s", "oha", options)


def close_shape(wrk_options, script=None):
    return Shape("close", "conn per request", "wrk", [*shlex.split(wrk_options), "-H", "Connection: close"], script)


def plan_shapes(args, pipeline_script):
    """The shapes to measure, in table order."""
    if getattr(args, "tls", False):
        return [
            Shape("tls-c128", "https -t4 -c128", "wrk", ["-t4", "-c128"]),
            Shape("tls-close", "https conn per request", "wrk",
                  [*shlex.split(CLOSE_WRK), "-H", "Connection: close"]),
        ]
    if args.shapes:
        rates = args.rate or list(SHAPE_RATES)
        return [
            *(open_loop_shape(r, args.open_connections) for r in rates),
            close_shape(CLOSE_WRK),
            Shape("c10", "-t2 -c10", "wrk", ["-t2", "-c10"]),
            Shape("c128", "-t4 -c128", "wrk", ["-t4", "-c128"]),
            Shape("pipeline", "pipelined x16", "wrk", ["-t4", "-c128"], pipeline_script),
        ]
    shapes = [open_loop_shape(r, args.open_connections) for r in args.rate or []]
    if args.close:
        shapes.append(close_shape(args.wrk or CLOSE_WRK, args.script))
    if not shapes:
        label = "wrk " + args.wrk + (" " + os.path.basename(args.script) if args.script else "")
        shapes.append(Shape("wrk", label, "wrk", shlex.split(args.wrk), args.script))
    return shapes


# ---------------------------------------------------------------- rounds


def fmt_duration(seconds):
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Progress:
    """Where a long run is and how long it has left, on stderr (stdout keeps
    the results, so it can be piped to a file without the chatter)."""

    def __init__(self, total, first_guess):
        self.total = total
        self.done = 0
        self.first_guess = first_guess  # seconds per measurement before any is timed
        self.started = time.monotonic()

    def step(self, shape, round_no, rounds, server):
        if self.done:
            per = (time.monotonic() - self.started) / self.done
        else:
            per = self.first_guess
        left = per * (self.total - self.done)
        print(f"bench/run: [{self.done + 1}/{self.total}] shape {shape.label}, round {round_no}/{rounds}, "
              f"{server.name}; about {fmt_duration(left)} left", file=sys.stderr, flush=True)

    def finish_one(self):
        self.done += 1


def run_rounds(shapes, servers, rounds, measure_one, overhead):
    """Shape by shape; within a shape, rounds alternate the servers, one server
    up at a time. measure_one(shape, server, round_no) returns a result dict.
    Returns {shape.key: {server.name: [result per round]}}."""
    results = {shape.key: {s.name: [] for s in servers} for shape in shapes}
    progress = Progress(len(shapes) * rounds * len(servers), overhead)
    for shape in shapes:
        for round_no in range(1, rounds + 1):
            for server in servers:
                progress.step(shape, round_no, rounds, server)
                print(f"== {shape.label}, round {round_no}/{rounds}: {server.name} ({server.url})", flush=True)
                result = measure_one(shape, server, round_no)
                results[shape.key][server.name].append(result)
                print(f"   {describe(result)}", flush=True)
                progress.finish_one()
    return results


def run_load(shape, url, duration, oha, headers=(), script=None):
    argv = shape.argv(duration, url, oha, headers, script)
    if shape.tool == "oha":
        return run_oha(argv, duration)
    return run_wrk(argv, duration)


def describe(r):
    parts = [f"{r['rps']:.0f} rps"]
    parts += [f"{name} {fmt_latency(r.get(key))}" for name, key in LATENCY_COLUMNS if r.get(key) is not None]
    if r.get("idle_cpu") is not None:
        parts.append(f"idle cpu {r['idle_cpu']:.1f}%")
    if r.get("rss"):
        parts.append(f"rss {r['rss'] / 1024**2:.1f} MB")
    if r["socket_errors"]:
        parts.append(f"errors {r['socket_errors']} ({r['error_detail']})")
    if r["non_2xx"]:
        parts.append(f"non-2xx {r['non_2xx']}")
    if r.get("deadline_aborts"):
        parts.append(f"{r['deadline_aborts']} in flight at the deadline (not errors)")
    return ", ".join(parts)


# ---------------------------------------------------------------- summary


LATENCY_COLUMNS = [("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p99.9", "p999"), ("max", "max")]


def summarize(shapes, servers, results, base_name):
    """Medians per (shape, server), plus errors summed over rounds (they are
    events, not a rate) and the comparison with the base server."""
    rows = []
    for shape in shapes:
        base = None
        for server in servers:
            rounds = results[shape.key][server.name]
            row = {"shape": shape, "server": server.name, "rps": median_of(rounds, "rps"),
                   "errors": sum(r["socket_errors"] + r["non_2xx"] for r in rounds)}
            for _, key in LATENCY_COLUMNS:
                row[key] = median_of(rounds, key)
            if server.name == base_name:
                base = row
            rows.append(row)
        for row in rows[-len(servers):]:
            row["vs_base"] = compare(shape, row, base)
    return rows


def ratio(a, b):
    return a / b if a is not None and b else None


def compare(shape, row, base):
    if base is None:
        return "-"
    if shape.open_loop:
        # The rate is fixed, so compare where the latency distribution sits.
        p50, p99 = ratio(row["p50"], base["p50"]), ratio(row["p99"], base["p99"])
        return " ".join(f"{name} {r:.2f}x" for name, r in (("p50", p50), ("p99", p99)) if r is not None) or "-"
    r = ratio(row["rps"], base["rps"])
    return f"{r:.2f}x" if r is not None else "-"


def shape_table_cells(rows, base_name):
    """The table's header and one row of text cells per (shape, server)."""
    header = ["shape", "server", "rps", *(name for name, _ in LATENCY_COLUMNS), "errors", f"vs {base_name}"]
    cells = [[row["shape"].label, row["server"], f"{row['rps']:.0f}",
              *(fmt_latency(row[key]) for _, key in LATENCY_COLUMNS), str(row["errors"]), row["vs_base"]]
             for row in rows]
    return header, cells


def print_shape_table(rows, base_name):
    header, cells = shape_table_cells(rows, base_name)
    widths = [max(len(r[i]) for r in [header] + cells) for i in range(len(header))]

    def line(c):
        return "  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(c, widths))).rstrip()

    print(line(header))
    print(line(["-" * w for w in widths]))
    previous = None
    for row, c in zip(rows, cells):
        if previous is not None and row["shape"] is not previous:
            print()
        previous = row["shape"]
        print(line(c))
