"""bench/wrk_report.py: running wrk, reading its output, and printing the results,
for bench/run. Only the Python standard library is used.
"""

import re
import shlex
import statistics
import subprocess

from servers import BenchError

# ---------------------------------------------------------------- wrk


def wrk_argv(options, duration, script, url):
    cmd = ["wrk", "--latency", *options, "-d", f"{duration}s"]
    if script:
        cmd += ["-s", script]
    cmd.append(url)
    return cmd


def run_wrk(cmd, duration):
    try:
        # wrk stops by itself after -d; the timeout only guards against a hang.
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    except subprocess.TimeoutExpired:
        raise BenchError(f"wrk did not finish: {shlex.join(cmd)}")
    if done.returncode != 0:
        raise BenchError(f"wrk failed ({done.returncode}): {shlex.join(cmd)}\n{done.stdout}{done.stderr}")
    return parse_wrk(done.stdout)


LATENCY_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# wrk prints byte counts with binary prefixes (1 KB = 1024 B); we keep its meaning.
BYTE_UNITS = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


def parse_wrk(out):
    """Pull the numbers out of `wrk --latency` output. Lines wrk omits when they
    would be zero (Socket errors, Non-2xx) count as zero."""
    result = {"socket_errors": 0, "non_2xx": 0, "p50": None, "p90": None, "p99": None, "p999": None, "max": None}

    m = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M)
    if not m:
        raise BenchError(f"no Requests/sec in wrk output:\n{out}")
    result["rps"] = float(m.group(1))

    # "  1234567 requests in 10.00s, 150.00MB read": every response, of any status.
    m = re.search(r"^\s*(\d+) requests in ", out, re.M)
    result["requests"] = int(m.group(1)) if m else None

    m = re.search(r"^Transfer/sec:\s+([\d.]+)\s*([KMGT]?B)", out, re.M)
    result["bytes_per_sec"] = float(m.group(1)) * BYTE_UNITS[m.group(2)] if m else 0.0

    # The "Latency Distribution" block: "     50%    1.10ms".
    for pct, value, unit in re.findall(r"^\s+(\d+(?:\.\d+)?)%\s+([\d.]+)(us|ms|s|m|h)\s*$", out, re.M):
        key = {50.0: "p50", 90.0: "p90", 99.0: "p99"}.get(float(pct))
        if key:
            result[key] = float(value) * LATENCY_UNITS[unit]

    # "    Latency   308.47us  746.14us   7.18ms   91.08%": average, stdev, max.
    m = re.search(r"^\s+Latency\s+[\d.]+\w+\s+[\d.]+\w+\s+([\d.]+)(us|ms|s|m|h)\s", out, re.M)
    if m:
        result["max"] = float(m.group(1)) * LATENCY_UNITS[m.group(2)]

    m = re.search(r"Socket errors:\s*connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        result["socket_errors"] = sum(int(g) for g in m.groups())
        result["error_detail"] = m.group(0).strip()
    m = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    if m:
        result["non_2xx"] = int(m.group(1))
    return result


# ---------------------------------------------------------------- report


def fmt_latency(seconds):
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f}us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f}ms"
    return f"{seconds:.2f}s"


def median_of(rounds, key):
    values = [r[key] for r in rounds if r.get(key) is not None]
    return statistics.median(values) if values else None


def table_cells(servers, base_name):
    """The table's header and rows, as text cells."""
    base_rps = median_of(next(s.rounds for s in servers if s.name == base_name), "rps")
    header = ["server", "rps", "MB/s", "p50", "p99", "idle CPU", "RSS MB", "sock errs", "non-2xx", "ratio"]
    rows = []
    for s in servers:
        rps = median_of(s.rounds, "rps")
        ratio = f"{rps / base_rps:.2f}" if base_rps else "-"
        rows.append([
            s.name,
            f"{rps:.0f}",
            f"{median_of(s.rounds, 'bytes_per_sec') / 1024**2:.2f}",
            fmt_latency(median_of(s.rounds, "p50")),
            fmt_latency(median_of(s.rounds, "p99")),
            f"{median_of(s.rounds, 'idle_cpu'):.1f}%",
            f"{median_of(s.rounds, 'rss') / 1024**2:.1f}",
            # Errors are events, so they add up over rounds rather than take a median.
            str(sum(r["socket_errors"] for r in s.rounds)),
            str(sum(r["non_2xx"] for r in s.rounds)),
            ratio,
        ])
    return header, rows


def print_table(servers, base_name):
    header, rows = table_cells(servers, base_name)
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    print(line(header))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))
