#!/usr/bin/env python3
"""Self-check of bench/run's parsing (wrk, oha, h2load), shape planning, tables (plain
and Markdown), SVG writer, and where it finds the binaries it builds.

Runs without wrk, oha or a server: the load generators' output comes from real
runs saved in bench/testdata/. Run it with `python3 bench/test_bench.py`.
"""

import argparse
import importlib.machinery
import importlib.util
import io
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET
from contextlib import redirect_stdout
from unittest import mock

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
sys.dont_write_bytecode = True

from markdown_report import git_commit, report  # noqa: E402
from oha import parse_oha  # noqa: E402
from poller_spread import requests_per_poller, spread_line  # noqa: E402
from servers import BenchError  # noqa: E402
from shapes import plan_shapes, print_shape_table, shape_table_cells, summarize  # noqa: E402
from svg import write_svg  # noqa: E402
from wrk_report import parse_wrk, table_cells  # noqa: E402

SVG_NS = "{http://www.w3.org/2000/svg}"


def sample(name):
    with open(os.path.join(BENCH_DIR, "testdata", name), encoding="utf-8") as f:
        return f.read()


def shape_args(**kw):
    args = dict(shapes=False, rate=None, close=False, open_connections=64, wrk=None, script=None)
    args.update(kw)
    return argparse.Namespace(**args)


class Server:
    def __init__(self, name, rounds=None):
        self.name = name
        self.rounds = rounds


def load_bench_run():
    """bench/run as a module (it has no .py suffix); main() does not run."""
    loader = importlib.machinery.SourceFileLoader("bench_run", os.path.join(BENCH_DIR, "run"))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


FACTS = {"date": "2026-01-02", "commit": "abc1234-dirty", "nproc": 2, "kernel": "6.1.0-test",
         "command": "bench/run --markdown --shapes"}


class OhaParsing(unittest.TestCase):
    def test_open_loop_run(self):
        # oha -z 2s -c 64 -q 2000 --latency-correction against ours-local.
        r = parse_oha(sample("oha-open-2000.json"))
        self.assertAlmostEqual(r["rps"], 3998 / 2.001834698)
        self.assertEqual(r["p50"], 7.6254e-05)
        self.assertEqual(r["p90"], 0.00012075)
        self.assertEqual(r["p99"], 0.000193909)
        self.assertEqual(r["p999"], 0.001120551)
        self.assertEqual(r["max"], 0.002264736)
        # Two requests were in flight when -z ran out: not the server's errors.
        self.assertEqual(r["deadline_aborts"], 2)
        self.assertEqual(r["socket_errors"], 0)
        self.assertEqual(r["non_2xx"], 0)

    def test_non_2xx_responses_count(self):
        r = parse_oha(sample("oha-404.json"))  # GET /nope: 100 responses, all 404
        self.assertEqual(r["non_2xx"], 100)
        self.assertAlmostEqual(r["rps"], 100 / 1.000847319)

    def test_refused_connections_are_errors_with_no_latency(self):
        r = parse_oha(sample("oha-refused.json"))  # nothing listening
        self.assertEqual(r["socket_errors"], 99)
        self.assertIn("Connection refused", r["error_detail"])
        self.assertEqual(r["rps"], 0.0)  # oha's own requestsPerSec counts the failures
        self.assertIsNone(r["p50"])
        self.assertIsNone(r["max"])

    def test_not_json_is_a_bench_error(self):
        with self.assertRaises(BenchError):
            parse_oha("Summary:\n  Success rate: 100.00%\n")
        with self.assertRaises(BenchError):
            parse_oha('{"summary": {}}')


class WrkParsing(unittest.TestCase):
    def test_latency_distribution_and_max(self):
        r = parse_wrk(sample("wrk-c10.txt"))  # wrk --latency -t2 -c10 -d1s
        self.assertEqual(r["rps"], 123212.25)
        self.assertAlmostEqual(r["p50"], 40.00e-6)
        self.assertAlmostEqual(r["p90"], 0.86e-3)
        self.assertAlmostEqual(r["p99"], 3.72e-3)
        self.assertAlmostEqual(r["max"], 7.18e-3)
        self.assertIsNone(r["p999"])  # wrk prints no p99.9
        self.assertEqual((r["socket_errors"], r["non_2xx"]), (0, 0))
        self.assertEqual(r["requests"], 135540)  # for CPU per request

    def test_errors(self):
        out = sample("wrk-c10.txt").replace(
            "Requests/sec:", "  Socket errors: connect 0, read 3, write 1, timeout 2\n"
            "  Non-2xx or 3xx responses: 7\nRequests/sec:")
        r = parse_wrk(out)
        self.assertEqual(r["socket_errors"], 6)
        self.assertEqual(r["non_2xx"], 7)


class ShapePlanning(unittest.TestCase):
    def test_all_shapes(self):
        shapes = plan_shapes(shape_args(shapes=True), "bench/pipeline.lua")
        self.assertEqual([s.key for s in shapes], ["open-2000", "open-10000", "close", "c10", "c128", "pipeline"])
        self.assertEqual(shapes[0].display(5), "oha -z 5s -c 64 -q 2000 --latency-correction --no-tui "
                         "--output-format json URL")
        self.assertEqual(shapes[2].display(5), "wrk --latency -t2 -c32 -H 'Connection: close' -d 5s URL")
        self.assertEqual(shapes[5].display(5), "wrk --latency -t4 -c128 -d 5s -s bench/pipeline.lua URL")

    def test_rates_replace_the_default_rates(self):
        shapes = plan_shapes(shape_args(shapes=True, rate=[500]), "p.lua")
        self.assertEqual([s.key for s in shapes if s.open_loop], ["open-500"])

    def test_single_shapes(self):
        shapes = plan_shapes(shape_args(rate=[3000], close=True, open_connections=8), "p.lua")
        self.assertEqual([s.key for s in shapes], ["open-3000", "close"])
        self.assertIn("-c 8 -q 3000 --latency-correction", shapes[0].display(1))
        wrk = plan_shapes(shape_args(wrk="-t2 -c10"), "p.lua")
        self.assertEqual(wrk[0].display(3), "wrk --latency -t2 -c10 -d 3s URL")


def results_for(shapes, names):
    """Round results as bench/run collects them, from the saved samples."""
    oha, wrk = parse_oha(sample("oha-open-2000.json")), parse_wrk(sample("wrk-c10.txt"))
    refused = parse_oha(sample("oha-refused.json"))
    results = {}
    for shape in shapes:
        results[shape.key] = {}
        for i, name in enumerate(names):
            base = refused if (shape.open_loop and i == 2) else (oha if shape.open_loop else wrk)
            scaled = {k: (v * (i + 1) if isinstance(v, float) else v) for k, v in base.items()}
            results[shape.key][name] = [scaled, dict(scaled)]
    return results


class TableAndPicture(unittest.TestCase):
    def setUp(self):
        self.shapes = plan_shapes(shape_args(shapes=True), "bench/pipeline.lua")
        self.names = ["ours-local", "ours-system", "actix"]
        self.servers = [Server(n) for n in self.names]
        self.rows = summarize(self.shapes, self.servers, results_for(self.shapes, self.names), "ours-local")

    def test_comparison_with_the_base(self):
        by = {(r["shape"].key, r["server"]): r for r in self.rows}
        # Closed loop: rps ratio. Open loop: latency ratios, as the rate is fixed.
        self.assertEqual(by[("c10", "ours-system")]["vs_base"], "2.00x")
        self.assertEqual(by[("open-2000", "ours-system")]["vs_base"], "p50 2.00x p99 2.00x")
        self.assertEqual(by[("open-2000", "actix")]["vs_base"], "-")  # no latency at all
        self.assertEqual(by[("open-2000", "actix")]["errors"], 2 * 99)  # summed over rounds

    def test_table_has_a_row_per_shape_and_server(self):
        out = io.StringIO()
        with redirect_stdout(out):
            print_shape_table(self.rows, "ours-local")
        lines = [line for line in out.getvalue().splitlines() if line.strip()]
        self.assertEqual(len(lines), 2 + len(self.shapes) * len(self.names))
        self.assertIn("p99.9", lines[0])

    def test_svg_is_well_formed_and_labelled(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.svg")
            write_svg(path, "title <&>", "bench/run --shapes", self.shapes, self.names, self.rows)
            root = ET.parse(path).getroot()
        texts = [t.text for t in root.iter(SVG_NS + "text")]
        for label in self.names + [s.label for s in self.shapes] + ["title <&>", "p99.9"]:
            self.assertIn(label, texts)
        # One bar per (shape, server), each with its value on hover.
        bars = [r for r in root.iter(SVG_NS + "rect")
                if r.find(SVG_NS + "title") is not None and "requests/s" in r.find(SVG_NS + "title").text]
        self.assertEqual(len(bars), len(self.shapes) * len(self.names))
        # One latency line per (shape, server) that has two or more percentiles.
        lines = list(root.iter(SVG_NS + "polyline"))
        open_loop = sum(s.open_loop for s in self.shapes)
        self.assertEqual(len(lines), len(self.shapes) * len(self.names) - open_loop)

    def test_svg_with_no_latency_at_all(self):
        shapes = plan_shapes(shape_args(rate=[100]), "p.lua")
        refused = parse_oha(sample("oha-refused.json"))
        rows = summarize(shapes, [Server("a")], {"open-100": {"a": [refused]}}, "a")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.svg")
            write_svg(path, "t", "c", shapes, ["a"], rows)
            ET.parse(path)


class Markdown(unittest.TestCase):
    def test_shape_table_with_where_and_how_it_was_measured(self):
        shapes = plan_shapes(shape_args(shapes=True), "bench/pipeline.lua")
        names = ["ours-local", "ours-system", "actix"]
        rows = summarize(shapes, [Server(n) for n in names], results_for(shapes, names), "ours-local")
        header, cells = shape_table_cells(rows, "ours-local")
        lines = report(FACTS, "Medians over 2 round(s).", header, cells, text_columns=2).split("\n")
        self.assertEqual(lines[:6], [
            "Measured 2026-01-02 on commit abc1234-dirty (nproc 2, kernel 6.1.0-test):",
            "",
            "    bench/run --markdown --shapes",
            "",
            "Medians over 2 round(s).",
            "",
        ])
        self.assertEqual(lines[6], "| shape | server | rps | p50 | p90 | p99 | p99.9 | max | errors | vs ours-local |")
        self.assertEqual(lines[7], "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        # One row per (shape, server), no blank line inside the table.
        self.assertEqual(len(lines), 8 + len(shapes) * len(names))
        # wrk-c10.txt, doubled for the second server: 2 x 123212.25 rps, 2 x 40 us.
        self.assertIn("| -t2 -c10 | ours-system | 246424 | 80us | 1.72ms | 7.44ms | - | 14.36ms | 0 | 2.00x |",
                      lines)
        self.assertIn("| open loop 2000/s | actix | 0 | - | - | - | - | - | 198 | - |", lines)

    def test_wrk_table(self):
        wrk = dict(parse_wrk(sample("wrk-c10.txt")), idle_cpu=0.4, rss=9.5 * 1024**2)
        servers = [Server("ours-local", [wrk, wrk]), Server("actix|2", [dict(wrk, rps=wrk["rps"] / 2)])]
        header, cells = table_cells(servers, "ours-local")
        lines = report(FACTS, "Medians.", header, cells).split("\n")[6:]
        self.assertEqual(lines, [
            "| server | rps | MB/s | p50 | p99 | idle CPU | RSS MB | sock errs | non-2xx | ratio |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            "| ours-local | 123212 | 17.74 | 40us | 3.72ms | 0.4% | 9.5 | 0 | 0 | 1.00 |",
            "| actix\\|2 | 61606 | 17.74 | 40us | 3.72ms | 0.4% | 9.5 | 0 | 0 | 0.50 |",
        ])

    def test_commit_is_marked_dirty_when_a_tracked_file_changed(self):
        with tempfile.TemporaryDirectory() as repo:
            self.assertIsNone(git_commit(repo))
            git = ["git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@t"]
            subprocess.run([*git, "init", "-q"], check=True)
            with open(os.path.join(repo, "a"), "w") as f:
                f.write("1\n")
            subprocess.run([*git, "add", "a"], check=True)
            subprocess.run([*git, "commit", "-q", "-m", "a"], check=True)
            head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True, check=True).stdout.strip()
            with open(os.path.join(repo, "untracked"), "w") as f:
                f.write("x\n")
            self.assertEqual(git_commit(repo), head)
            with open(os.path.join(repo, "a"), "w") as f:
                f.write("2\n")
            self.assertEqual(git_commit(repo), head + "-dirty")


class TargetDir(unittest.TestCase):
    def plan(self, env):
        bench_run = load_bench_run()
        with mock.patch.dict(os.environ, env, clear=True), \
                mock.patch.object(sys, "argv", ["bench/run", "--dispatch", "local"]):
            args = bench_run.parse_args()
        return {s.name: s.argv[0] for s in bench_run.plan_servers(args)}

    def test_binaries_are_looked_for_where_cargo_builds_them(self):
        repo = os.path.dirname(BENCH_DIR)
        self.assertEqual(self.plan({}), {
            "ours-local": os.path.join(repo, "target", "release", "uppercut-mio-server"),
            "actix": os.path.join(repo, "target", "bench", "release", "actix-hello"),
        })
        with tempfile.TemporaryDirectory() as target:
            self.assertEqual(self.plan({"CARGO_TARGET_DIR": target}), {
                "ours-local": os.path.join(target, "release", "uppercut-mio-server"),
                "actix": os.path.join(target, "bench", "release", "actix-hello"),
            })


class RouteRows(unittest.TestCase):
    def plan(self, *argv):
        bench_run = load_bench_run()
        with mock.patch.object(sys, "argv", ["bench/run", *argv]):
            args = bench_run.parse_args()
        return {s.name: s for s in bench_run.plan_servers(args)}

    def test_the_json_rows_post_with_their_own_script(self):
        rows = self.plan("--routes", "--dispatch", "local")
        self.assertEqual(rows["ours-local-json"].url, "http://127.0.0.1:19080/hello/json")
        self.assertEqual(rows["actix-json"].url, "http://127.0.0.1:19201/hello/json")
        for name in ("ours-local-json", "actix-json"):
            self.assertEqual(rows[name].script, "bench/post-json.lua")
        self.assertIsNone(rows["ours-local-handler"].script)
        self.assertIsNone(rows["actix"].script)
        self.assertNotIn("actix-json", self.plan("--dispatch", "local"))

    def test_a_rows_script_replaces_the_shapes_and_oha_has_none(self):
        wrk = plan_shapes(shape_args(wrk="-t4 -c128", script="bench/pipeline.lua"), "p.lua")[0]
        argv = wrk.argv(5, "http://h:1/hello/json", script="bench/post-json.lua")
        self.assertEqual(argv[argv.index("-s") + 1], "bench/post-json.lua")
        self.assertEqual(wrk.argv(5, "http://h:1/")[wrk.argv(5, "http://h:1/").index("-s") + 1],
                         "bench/pipeline.lua")
        oha = plan_shapes(shape_args(rate=[100]), "p.lua")[0]
        with self.assertRaises(BenchError):
            oha.argv(5, "http://h:1/hello/json", script="bench/post-json.lua")


class PollerSpread(unittest.TestCase):
    PAGE = """# HELP uppercut_requests_total Responses sent, by status code.
# TYPE uppercut_requests_total counter
uppercut_requests_total{poller="0",code="200"} 50
uppercut_requests_total{poller="0",code="404"} 1
uppercut_requests_total{poller="1",code="200"} 49
uppercut_requests_total_other{poller="1"} 7
uppercut_bytes_sent_total{poller="1"} 9000
"""

    def test_requests_are_summed_per_poller_over_codes(self):
        self.assertEqual(requests_per_poller(self.PAGE), [51, 49])

    def test_the_line_gives_each_pollers_share(self):
        self.assertEqual(spread_line([51, 49]), "requests per poller: 51% 49%")
        self.assertEqual(spread_line([0, 3, 1]), "requests per poller: 0% 75% 25%")

    def test_no_requests_no_line(self):
        self.assertEqual(requests_per_poller("# nothing\n"), [])
        self.assertIsNone(spread_line([0, 0]))


class WebSocketTable(unittest.TestCase):
    """bench/run --ws: medians over rounds, and each row against the first."""

    def result(self, per_second, p99, cpu=None):
        return {"per_second": per_second, "latency_us": {"p50": 10, "p99": p99, "p999": 2 * p99},
                "cpu_us_per_msg": cpu}

    def test_echo_rows_compare_round_trips(self):
        import ws
        echo = next(load for load in ws.LOADS if load.key == "echo-64-32")
        results = {"ours-local": [self.result(200, 5), self.result(210, 6), self.result(190, 7)],
                   "tungstenite": [self.result(100, 9), self.result(140, 9), self.result(130, 9)]}
        rows = ws.cells_for(echo, results, "ours-local")
        self.assertEqual(rows[0], ("ours-local", ["200", "-", "10", "6", "12"], ""))
        self.assertEqual(rows[1], ("tungstenite", ["130", "-", "10", "9", "18"], "0.65x"))

    def test_cpu_per_message_is_shown_and_compared(self):
        import ws
        echo = next(load for load in ws.LOADS if load.key == "echo-64-32")
        results = {"ours-local": [self.result(200, 5, 5.0), self.result(200, 5, 6.0)],
                   "fastwebsockets": [self.result(100, 9, 6.0)]}
        rows = ws.cells_for(echo, results, "ours-local")
        self.assertEqual(rows[0][1][1], "5.50")
        self.assertEqual(rows[1], ("fastwebsockets", ["100", "6.00", "10", "9", "18"],
                                   "0.50x, CPU/msg 0.92x"))

    def test_fixed_rate_rows_compare_p99(self):
        import ws
        open_loop = next(load for load in ws.LOADS if load.key == "open-64-32")
        results = {"ours-local": [self.result(20000, 100)], "node-ws": [self.result(20000, 150)]}
        self.assertEqual(ws.cells_for(open_loop, results, "ours-local")[1][2], "p99 1.50x")

    def test_compressed_idle_memory_is_against_plain_websockets(self):
        import ws
        idle = ws.Load("idle-deflate", "idle memory, compressed", [], deflate=True)
        results = {"ours-local-deflate": [{"ws_bytes_per_conn": 2048.0, "http_bytes_per_conn": 1638.4}]}
        rows = ws.cells_for(idle, results, "ours-local-deflate")
        self.assertEqual(rows[0], ("ours-local-deflate", ["2.0 KiB", "", "1.6 KiB", "", ""],
                                   "1.25x of plain WS"))

    def test_a_compressed_frame_is_one_permessage_deflate_message(self):
        import zlib
        import ws
        frame = ws.compressed_message(b"hello hello hello")
        self.assertEqual(frame[0], 0xc1)
        mask, payload = frame[2:6], frame[6:]
        self.assertEqual(frame[1], 0x80 | len(payload))
        unmasked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        inflate = zlib.decompressobj(-15)
        self.assertEqual(inflate.decompress(unmasked + b"\x00\x00\xff\xff"), b"hello hello hello")

    def test_idle_memory_is_per_connection_against_http(self):
        import ws
        idle = ws.Load("idle", "idle memory", [])
        results = {"ours-local": [{"ws_bytes_per_conn": 1536.0, "http_bytes_per_conn": 1024.0}],
                   "fastwebsockets": [{"ws_bytes_per_conn": 6144.0, "http_bytes_per_conn": None}]}
        rows = ws.cells_for(idle, results, "ours-local")
        self.assertEqual(rows[0], ("ours-local", ["1.5 KiB", "", "1.0 KiB", "", ""], "1.50x of HTTP"))
        self.assertEqual(rows[1], ("fastwebsockets", ["6.0 KiB", "", "-", "", ""], ""))

    def test_two_node_broadcast_p99_is_against_the_one_node_broadcast(self):
        import ws
        two = next(load for load in ws.LOADS if load.key == "broadcast-1000-2nodes")
        self.assertEqual(two.beside, "broadcast-1000")
        one_node = [self.result(100000, 400), self.result(100000, 500), self.result(100000, 600)]
        # Each round the sender sent 600 messages to the 1,000 members.
        delivered = [dict(self.result(100000, 900), sent=600, lost=0),
                     dict(self.result(100000, 800), sent=600, lost=0)]
        results = {"chat-2nodes": delivered}
        rows = ws.cells_for(two, results, "chat-2nodes", against=one_node)
        self.assertEqual(rows, [("chat-2nodes", ["100,000", "-", "10", "850", "1,700"],
                                 "p99 vs one node 1.70x; lost 0 of 1,200,000")])
        # Without the one-node load in the run there is nothing to divide by.
        self.assertEqual(ws.cells_for(two, results, "chat-2nodes")[0][2], "lost 0 of 1,200,000")
        # Messages a member never got, over every round.
        results["chat-2nodes"][1]["lost"] = 7
        self.assertEqual(ws.cells_for(two, results, "chat-2nodes")[0][2], "lost 7 of 1,200,000")

    def test_the_two_broadcasts_alternate_rounds_when_both_run(self):
        import ws
        by_key = {load.key: load for load in ws.LOADS}
        keys = lambda groups: [[l.key for l in g] for g in groups]  # noqa: E731
        loads = [by_key[k] for k in ("echo-64-32", "broadcast-1000", "broadcast-1000-2nodes")]
        self.assertEqual(keys(ws.round_groups(loads)),
                         [["echo-64-32"], ["broadcast-1000", "broadcast-1000-2nodes"]])
        self.assertEqual(keys(ws.round_groups([by_key["broadcast-1000-2nodes"]])), [["broadcast-1000-2nodes"]])

    def test_room_nodes_from_nats_connz(self):
        import ws
        connz = {"connections": [
            {"cid": 4, "name": "a/0", "subscriptions_list": ["upc.m.a.0.*", "upc.t.chat"]},
            {"cid": 5, "name": "a/1", "subscriptions_list": ["upc.m.a.1.*"]},
            {"cid": 6, "name": "b/0", "subscriptions_list": ["upc.m.b.0.*"]},
            {"cid": 7, "name": "b/1"},
        ]}
        self.assertEqual(ws.room_nodes(connz, "upc.t.chat"), {"a"})
        connz["connections"][3]["subscriptions_list"] = ["upc.t.chat"]
        self.assertEqual(ws.room_nodes(connz, "upc.t.chat"), {"a", "b"})
        self.assertEqual(ws.room_nodes({}, "upc.t.chat"), set())


class ClusterTable(unittest.TestCase):
    """bench/run --cluster: medians, CPU per request, ratios to actix-nats and ours-io."""

    def result(self, rps, cpu_us, backend_us=None, idle=None, non_2xx=0):
        return {"rps": rps, "p50": 1e-3, "p99": 4e-3, "cpu_us": cpu_us, "backend_us": backend_us,
                "idle_cpu": idle, "socket_errors": 0, "non_2xx": non_2xx}

    def test_rows_compare_with_both_bases(self):
        import cluster
        results = {"ours-remote": [self.result(30000, 40, 20, 0.1), self.result(26000, 44, 22, 0.3),
                                   self.result(28000, 42, 21, 0.2)],
                   "ours-io": [self.result(35000, 30, 10)],
                   "actix-nats": [self.result(20000, 60, 20, 0.5, non_2xx=3)]}
        header, cells = cluster.table_cells(cluster.summary(results))
        self.assertEqual(header[-2:], ["vs actix-nats", "vs ours-io"])
        self.assertEqual(cells[0], ["ours-remote", "28000", "1.00ms", "4.00ms", "42.0 us", "21.0 us", "0.20%", "0",
                                    "rps 1.40x, CPU/req 0.70x", "rps 0.80x, CPU/req 1.40x"])
        self.assertEqual(cells[1][5:], ["10.0 us", "-", "0", "rps 1.75x, CPU/req 0.50x", ""])
        self.assertEqual(cells[2][7:], ["3", "", "rps 0.57x, CPU/req 2.00x"])

    def test_a_missing_base_leaves_its_column_empty(self):
        import cluster
        header, cells = cluster.table_cells(cluster.summary({"ours-local-actor": [self.result(50000, 20)]}))
        self.assertEqual(cells[0][-2:], ["-", "-"])

    def test_process_group_cpu_counts_the_children_too(self):
        from servers import group_cpu_seconds
        # A group leader that only waits, and a child of it that burns CPU.
        burn = ("import time; t = time.process_time(); exec('while time.process_time() - t < 0.3: pass'); "
                "time.sleep(30)")
        leader = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time; "
                                   f"subprocess.run([sys.executable, '-c', {burn!r}]); time.sleep(30)"],
                                  start_new_session=True)
        try:
            deadline = time.monotonic() + 10
            while group_cpu_seconds(leader.pid) < 0.25 and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertGreaterEqual(group_cpu_seconds(leader.pid), 0.25)
        finally:
            os.killpg(leader.pid, signal.SIGKILL)
            leader.wait()


class H2loadParsing(unittest.TestCase):
    """bench/run --h2: h2load's summary, saved from h2load 1.52 against nginx."""

    def test_timed_run(self):
        from h2bench import parse_h2load
        r = parse_h2load(sample("h2load-h2c.txt"))  # h2load -c4 -m4 -D 1, h2c, `hello\n`
        self.assertEqual(r["rps"], 4000.0)
        self.assertEqual(r["requests"], 4000)  # succeeded: the CPU per request divides by it
        self.assertEqual(r["done"], 4006)
        self.assertEqual(r["non_2xx"], 0)
        self.assertEqual(r["unanswered"], 6)  # in flight when -D ran out
        self.assertEqual(r["protocol"], "h2c")
        self.assertAlmostEqual(r["body_bytes"], 24000 / 4006)

    def test_non_2xx(self):
        from h2bench import parse_h2load
        r = parse_h2load(sample("h2load-404.txt"))
        self.assertEqual((r["requests"], r["non_2xx"], r["unanswered"]), (0, 2000, 0))

    def test_refused_has_no_protocol(self):
        from h2bench import parse_h2load
        r = parse_h2load(sample("h2load-refused.txt"))
        self.assertEqual((r["rps"], r["requests"], r["unanswered"]), (0.0, 0, 10))
        self.assertIsNone(r["protocol"])

    def test_not_h2load_output_is_a_bench_error(self):
        from h2bench import parse_h2load
        with self.assertRaises(BenchError):
            parse_h2load("Requests/sec: 100\n")


class H2Frames(unittest.TestCase):
    """bench/run --h2's idle connections: the frames they write and read."""

    def test_settings_and_ack(self):
        from h2bench import ACK, SETTINGS, frame
        self.assertEqual(frame(SETTINGS), bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
        self.assertEqual(frame(SETTINGS, ACK), bytes([0, 0, 0, 4, 1, 0, 0, 0, 0]))

    def test_split_keeps_a_partial_frame(self):
        from h2bench import SETTINGS, frame, split_frames
        settings = frame(SETTINGS, payload=bytes([0, 3, 0, 0, 0, 100]))  # MAX_CONCURRENT_STREAMS 100
        window = frame(8, stream=0, payload=(65535).to_bytes(4, "big"))
        frames, rest = split_frames(settings + window[:5])
        self.assertEqual(frames, [(SETTINGS, 0, 0, bytes([0, 3, 0, 0, 0, 100]))])
        self.assertEqual(rest, window[:5])
        frames, rest = split_frames(rest + window[5:])
        self.assertEqual(frames, [(8, 0, 0, (65535).to_bytes(4, "big"))])
        self.assertEqual(rest, b"")

    def test_stream_reserved_bit_is_ignored(self):
        from h2bench import split_frames
        frames, _ = split_frames(bytes([0, 0, 0, 1, 4, 0x80, 0, 0, 3]))
        self.assertEqual(frames[0][2], 3)


class H2Table(unittest.TestCase):
    """bench/run --h2: medians, ratios to nginx and actix, and the idle table."""

    def load(self, rps, cpu_us, non_2xx=0):
        return {"rps": rps, "cpu_us": cpu_us, "non_2xx": non_2xx}

    def test_rows_compare_with_nginx_and_actix(self):
        from h2bench import load_table, summary
        results = {"tls-m16": {"ours-local": [self.load(90000, 10), self.load(110000, 8), self.load(100000, 9)],
                               "nginx": [self.load(50000, 18, non_2xx=1)],
                               "actix": [self.load(80000, 12)]}}
        header, cells = load_table(summary(results))
        self.assertEqual(header[-2:], ["vs nginx", "vs actix"])
        self.assertEqual(cells[0], ["tls-m16", "ours-local", "100000", "9.0 us", "0",
                                    "rps 2.00x, CPU/req 0.50x", "rps 1.25x, CPU/req 0.75x"])
        self.assertEqual(cells[1][4:], ["1", "", "rps 0.62x, CPU/req 1.50x"])
        self.assertEqual(cells[2][-1], "")

    def test_idle_rows_compare_memory_per_connection(self):
        from h2bench import idle_table, summary
        idle = {"rss_before": 8 * 2**20, "per_conn": 10 * 1024, "idle_cpu": 0.0, "open": 1000}
        results = {"idle": {"ours-local": [idle], "nginx": [dict(idle, per_conn=40 * 1024, idle_cpu=0.1)]}}
        header, cells = idle_table(summary(results)["idle"])
        self.assertEqual(cells[0], ["ours-local", "8.0 MiB", "10.0 KiB", "0.00%", "1000", "0.25x", "-"])
        self.assertEqual(cells[1][3:], ["0.10%", "1000", "", "-"])

    def test_unknown_load_or_row_exits_2(self):
        from h2bench import parse_args
        for argv in (["--loads", "tls-m3"], ["--only", "apache"], ["--rounds", "0"]):
            with self.assertRaises(SystemExit) as stop, redirect_stdout(io.StringIO()), \
                    mock.patch("sys.stderr", io.StringIO()):
                parse_args(argv)
            self.assertEqual(stop.exception.code, 2)


class CostParsing(unittest.TestCase):
    """bench/run --cost: /proc stat lines, the process tree, perf's CSV, medians and the table."""

    # /proc/PID/stat of nginx's worker, whose name has a space and parentheses.
    STAT = ("4242 (nginx: worker (x)) S 4241 4241 4241 0 -1 4194624 1209 0 0 0 "
            "731 1964 0 0 20 0 1 0 12345 11370496 1033 18446744073709551615 1 1 0 0 0 0 0 "
            "4096 134 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0")

    def test_stat_line(self):
        from cost import parse_stat
        self.assertEqual(parse_stat(self.STAT), {"pid": 4242, "ppid": 4241, "utime": 731, "stime": 1964})
        with self.assertRaises(ValueError):
            parse_stat("4242 (short) S 1 2")

    def test_process_tree_takes_children_and_theirs(self):
        from cost import process_tree
        parents = {1: 0, 10: 1, 11: 10, 12: 10, 13: 11, 20: 1, 21: 20}
        self.assertEqual(process_tree(10, parents), [10, 11, 12, 13])
        self.assertEqual(process_tree(21, parents), [21])
        self.assertEqual(process_tree(99, parents), [99])

    def test_perf_csv(self):
        from cost import parse_perf, syscall_mix
        counts = parse_perf(sample("perf-stat.csv"))  # a real perf stat -x, -p run, trimmed
        self.assertEqual(counts["raw_syscalls:sys_enter"], 2380)
        self.assertEqual(syscall_mix(counts), {"clock_nanosleep": 794, "openat": 794, "read": 797})
        self.assertEqual(counts["syscalls:sys_enter_write"], 0)  # <not counted>
        self.assertIsNone(parse_perf("<not supported>,,raw_syscalls:sys_enter,0,100.00,,\n")
                          ["raw_syscalls:sys_enter"])
        self.assertEqual(parse_perf("# started on Sat\n\n"), {})

    def test_cpu_per_request_from_ticks(self):
        from cost import CLOCK_TICKS, per_request
        r = per_request((100, 200), (100 + CLOCK_TICKS, 200 + 3 * CLOCK_TICKS), 1_000_000)
        self.assertAlmostEqual(r["user_us"], 1.0)
        self.assertAlmostEqual(r["sys_us"], 3.0)
        self.assertAlmostEqual(r["cpu_us"], 4.0)
        with self.assertRaises(BenchError):
            per_request((0, 0), (1, 1), 0)

    def test_median_and_spread(self):
        from cost import fmt_spread, spread
        self.assertEqual(spread([7.1, 6.9, None, 7.0, 7.4, 6.8]), (7.0, 6.8, 7.4))
        self.assertIsNone(spread([None]))
        self.assertEqual(fmt_spread((7.0, 6.8, 7.4)), "7.00 (6.80-7.40)")
        self.assertEqual(fmt_spread((2.001, 2.0, 2.004)), "2.00")
        self.assertEqual(fmt_spread(None), "-")

    def round(self, rps, user, system, calls, mix=None):
        return {"rps": rps, "user_us": user, "sys_us": system, "cpu_us": user + system, "calls": calls,
                "mix": mix}

    def test_table_has_ratios_of_ours_over_each_peer(self):
        from cost import mix_cells, summarize, table_cells
        results = {"h1": {
            "ours": [self.round(140000, 0.7, 6.3, 2.8, {"read": 1.0, "write": 1.0, "sched_yield": 0.4}),
                     self.round(150000, 0.6, 6.4, 2.9, {"read": 1.0, "write": 1.0, "sched_yield": 0.5}),
                     self.round(145000, 0.65, 6.35, 2.85, {"read": 1.0, "write": 1.0, "sched_yield": 0.3})],
            "actix-web": [self.round(130000, 1.25, 6.25, 2.1), self.round(130000, 1.25, 6.25, 2.1)],
        }}
        header, cells = table_cells(summarize(results), {"h1": "HTTP/1.1 keep-alive"})
        self.assertEqual(header, ["load", "server", "req/s", "user µs/req", "sys µs/req", "CPU µs/req", "calls/req",
                                  "ours / this"])
        self.assertEqual(cells[0], ["HTTP/1.1 keep-alive", "ours", "145000 (140000-150000)", "0.65 (0.60-0.70)",
                                    "6.35 (6.30-6.40)", "7.00", "2.85 (2.80-2.90)", ""])
        self.assertEqual(cells[1], ["HTTP/1.1 keep-alive", "actix-web", "130000", "1.25", "6.25", "7.50", "2.10",
                                    "CPU 0.93x, calls 1.36x, rps 1.12x"])
        _, mix = mix_cells(summarize(results), {})
        self.assertEqual(mix, [["h1", "ours", "read 1.00, write 1.00, sched_yield 0.40"]])

    def test_backend_column_only_for_the_remote_call(self):
        from cost import summarize, table_cells
        results = {"cluster": {"ours": [dict(self.round(50000, 5, 15, 4), backend_us=9.0)]}}
        header, cells = table_cells(summarize(results), {})
        self.assertEqual(header[7], "nats-server µs/req")
        self.assertEqual(cells[0][7], "9.00")

    def test_ours_rows_and_bad_options(self):
        from cost import parse_args, parse_ours_row
        self.assertEqual(parse_ours_row("always=--poller-yield always"), ("always", None, ["--poller-yield", "always"]))
        self.assertEqual(parse_ours_row("before=/tmp/old/server --pin"), ("before", "/tmp/old/server", ["--pin"]))
        args = parse_args(["--cost", "--quick", "--loads", "h1,h2c"])
        self.assertEqual((args.rounds, args.duration), (1, 2))
        self.assertEqual([load.key for load in args.loads], ["h1", "h2c"])
        for argv in (["--loads", "h3"], ["--server-cpu", "1", "--load-cpu", "1"], ["--cost-mix", "--no-perf"],
                     ["--ours-row", "nginx=--pin"], ["--ours-row", "nope"]):
            with self.assertRaises(SystemExit) as stop, redirect_stdout(io.StringIO()), \
                    mock.patch("sys.stderr", io.StringIO()):
                parse_args(argv)
            self.assertEqual(stop.exception.code, 2)

    def test_rows_each_load_runs(self):
        from cost import LOADS, Row, rows_for
        rows = [Row(name, kind, None, (1, 2)) for name, kind in (
            ("ours", "ours"), ("before", "ours"), ("actix-web", "actix"), ("nginx", "nginx"),
            ("limit probe", "probe"), ("fastwebsockets", "fastwebsockets"))]
        by_key = {load.key: [r.name for r in rows_for(load, rows)] for load in LOADS}
        self.assertEqual(by_key["h1"], ["ours", "before", "actix-web", "nginx", "limit probe"])
        self.assertEqual(by_key["json"], ["ours", "before", "actix-web"])
        self.assertEqual(by_key["ws-32"], ["ours", "before", "fastwebsockets"])
        self.assertEqual(by_key["cluster"], ["ours", "actix-web"])

    def test_process_tree_cpu_from_proc(self):
        from cost import cpu_ticks, tree_of
        # A leader that waits, and a child of it that burns CPU.
        burn = ("import time; t = time.process_time(); exec('while time.process_time() - t < 0.3: pass'); "
                "time.sleep(30)")
        leader = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time; "
                                   f"subprocess.run([sys.executable, '-c', {burn!r}]); time.sleep(30)"],
                                  start_new_session=True)
        try:
            deadline = time.monotonic() + 10
            while len(tree_of(leader.pid)) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            pids = tree_of(leader.pid)
            self.assertEqual(len(pids), 2)
            while sum(cpu_ticks(pids)[0]) < 0.25 * os.sysconf("SC_CLK_TCK") and time.monotonic() < deadline:
                time.sleep(0.05)
            (user, system), threads = cpu_ticks(pids)
            self.assertGreaterEqual(user + system, 0.25 * os.sysconf("SC_CLK_TCK"))
            self.assertEqual(set(threads) >= set(pids), True)
        finally:
            os.killpg(leader.pid, signal.SIGKILL)
            leader.wait()


class H3Bench(unittest.TestCase):
    """bench/run --h3: h3-load's line, medians, ratios to Caddy and the quinn peer, the targets."""

    def load(self, rps, cpu_us, p99_us=900, errors=0, load_cpu=95.0, udp_drops=0):
        return {"rps": rps, "cpu_us": cpu_us, "user_us": cpu_us * 0.8, "sys_us": cpu_us * 0.2, "p50_us": 400,
                "p99_us": p99_us, "errors": errors, "load_cpu": load_cpu, "udp_drops": udp_drops}

    def test_h3_load_line(self):
        from h3bench import parse_h3_load
        out = 'noise\n{"requests": 3000, "rps": 1000.0, "p99_us": 900, "errors": 0, "non_2xx": 0}\n'
        self.assertEqual(parse_h3_load(out)["requests"], 3000)
        for bad in ("", "not json\n"):
            with self.assertRaises(BenchError):
                parse_h3_load(bad)

    def test_table_ratios_and_targets(self):
        from h3bench import summarize, table_cells, target_lines
        loads = {"ours": [self.load(60000, 10.0), self.load(50000, 12.0, errors=2),
                          self.load(55000, 11.0, udp_drops=7)],
                 "caddy": [self.load(20000, 20.0, p99_us=5000)],
                 "h3-quinn": [self.load(70000, 10.0, load_cpu=99.4)]}
        idles = {"ours": [{"per_conn": 20 * 1024, "open": 1000}], "caddy": [{"per_conn": 90 * 1024, "open": 999}]}
        summary = summarize(loads, idles)
        header, cells = table_cells(summary)
        self.assertEqual(header, ["server", "req/s", "CPU µs/req", "p50 ms", "p99 ms", "errors", "UDP drops",
                                  "load CPU", "idle KiB/conn", "CPU vs caddy", "CPU vs h3-quinn", "req/s vs caddy"])
        self.assertEqual(cells[0], ["ours", "55000", "11.00 (10.00-12.00)", "0.40", "0.90", "2", "7", "95%", "20.0",
                                    "0.55x", "1.10x", "2.75x"])
        self.assertEqual(cells[1], ["caddy", "20000", "20.00", "0.40", "5.00", "0", "0", "95%", "90.0", "", "2.00x",
                                    ""])
        self.assertEqual(cells[2][7:], ["99%", "-", "0.50x", "", "3.50x"])
        self.assertEqual(target_lines(summary), [
            "- CPU per request <= 0.67x caddy's: 0.55x, met",
            "- CPU per request <= 1x h3-quinn's: 1.10x, NOT met",
            "- requests per second >= 1x caddy's: 2.75x, met"])
        self.assertEqual(target_lines(summarize({"ours": loads["ours"]}, {}))[0],
                         "- CPU per request <= 0.67x caddy's: not measured")

    def test_udp_counters(self):
        from h3bench import parse_snmp_udp
        text = ("Ip: Forwarding\nIp: 1\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n"
                "Udp: 742263 12 2916 745243 2916 3\nUdpLite: InDatagrams\nUdpLite: 0\n")
        self.assertEqual(parse_snmp_udp(text)["RcvbufErrors"], 2916)
        self.assertEqual(parse_snmp_udp(text)["SndbufErrors"], 3)
        self.assertEqual(parse_snmp_udp("Ip: 1\n"), {})

    def test_calls_column_only_when_counted(self):
        from h3bench import summarize, table_cells
        header, cells = table_cells(summarize({"ours": [dict(self.load(1000, 5.0), calls=1.5)]}, {}))
        self.assertEqual(header[3], "calls/req")
        self.assertEqual(cells[0][3], "1.50")

    def test_caddyfile_serves_the_route_on_loopback(self):
        from h3bench import caddyfile
        text = caddyfile("/w/cert.pem", "/w/key.pem", 19610)
        for part in ("https://:19610 {", "bind 127.0.0.1", "tls /w/cert.pem /w/key.pem",
                     'respond /plaintext "Hello, World!" 200', "admin off", "auto_https disable_redirects"):
            self.assertIn(part, text)

    def test_options(self):
        from h3bench import parse_args
        args = parse_args(["--h3", "--rounds", "1", "--duration", "3", "--only", "caddy,ours"])
        self.assertEqual((args.rounds, args.duration, args.rows), (1, 3, ["ours", "caddy"]))
        self.assertTrue(args.no_perf)
        self.assertFalse(parse_args(["--calls"]).no_perf)
        for argv in (["--only", "nginx"], ["--rounds", "0"], ["--server-cpu", "1", "--load-cpu", "1"],
                     ["--idle-conns", "-1"], ["--caddy-version", "2.11.9"], ["--streams", "0"]):
            with self.assertRaises(SystemExit) as stop, redirect_stdout(io.StringIO()), \
                    mock.patch("sys.stderr", io.StringIO()):
                parse_args(argv)
            self.assertEqual(stop.exception.code, 2)


if __name__ == "__main__":
    unittest.main()
