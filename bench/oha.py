"""bench/oha.py: open-loop load through oha, for bench/run.

Finding oha (installing it with cargo when it is missing), running it with JSON
output, and reading that output. Only the Python standard library is used.
"""

import json
import os
import shutil
import subprocess
import sys

from servers import BenchError

# cargo installs into ~/.cargo/bin, which a shell started before rustup may not
# have on PATH; look there too so an install from an earlier run is found.
CARGO_BIN = os.path.expanduser("~/.cargo/bin")
INSTALL_CMD = ["cargo", "install", "oha", "--locked"]

# oha counts the requests still in flight when -z runs out under this name. They
# were cut off by the load generator, not failed by the server.
DEADLINE_ABORT = "aborted due to deadline"

PERCENTILES = {"p50": "p50", "p90": "p90", "p99": "p99", "p99.9": "p999"}


def find_oha():
    found = shutil.which("oha")
    if found:
        return found
    candidate = os.path.join(CARGO_BIN, "oha")
    return candidate if os.access(candidate, os.X_OK) else None


def ensure_oha():
    """The path of an oha binary that writes JSON; installs oha once if needed."""
    path = find_oha()
    if path is None:
        cargo = shutil.which("cargo") or shutil.which(os.path.join(CARGO_BIN, "cargo"))
        if cargo is None:
            raise BenchError("oha is not installed and there is no cargo to install it with: install Rust "
                             "(https://rustup.rs) or run ./cloud-setup.sh client --target 127.0.0.1, "
                             "then rerun")
        print(f"bench/run: oha (open-loop load generator) is not installed; installing it now with "
              f"`{' '.join(INSTALL_CMD)}`. This takes about 10 minutes on 2 cores, once.",
              file=sys.stderr, flush=True)
        if subprocess.run([cargo, *INSTALL_CMD[1:]]).returncode != 0:
            raise BenchError(f"`{' '.join(INSTALL_CMD)}` failed")
        path = find_oha()
        if path is None:
            raise BenchError(f"`{' '.join(INSTALL_CMD)}` finished but no oha is on PATH or in {CARGO_BIN}")
    try:
        help_text = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BenchError(f"cannot run {path} --help: {e}")
    if "--output-format" not in help_text:
        raise BenchError(f"{path} is too old to write JSON (no --output-format); "
                         f"update it with `{' '.join(INSTALL_CMD)} --force`")
    return path


def oha_argv(oha, options, duration, url):
    return [oha, "-z", f"{duration}s", *options, "--no-tui", "--output-format", "json", url]


def run_oha(argv, duration):
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    except subprocess.TimeoutExpired:
        raise BenchError(f"oha did not finish: {' '.join(argv)}")
    if done.returncode != 0:
        raise BenchError(f"oha failed ({done.returncode}): {' '.join(argv)}\n{done.stdout}{done.stderr}")
    return parse_oha(done.stdout)


def parse_oha(text):
    """The numbers bench/run reports, from `oha --output-format json` output.

    Latencies are in seconds (None when no request succeeded). rps counts the
    responses that arrived, per second of the run: oha's own requestsPerSec also
    counts failed attempts. errors counts failed requests (but not the ones cut
    off at the deadline) and responses other than 2xx or 3xx, as wrk does.
    """
    try:
        data = json.loads(text)
        summary = data["summary"]
        percentiles = data["latencyPercentiles"]
        statuses = data.get("statusCodeDistribution") or {}
        failures = data.get("errorDistribution") or {}
        elapsed = float(summary["total"])
    except (ValueError, KeyError, TypeError) as e:
        raise BenchError(f"cannot read oha's JSON output ({e}):\n{text[:2000]}")

    responses = sum(statuses.values())
    result = {
        "rps": responses / elapsed if elapsed > 0 else 0.0,
        "max": summary.get("slowest"),
        "non_2xx": sum(n for code, n in statuses.items() if not code.startswith(("2", "3"))),
        "socket_errors": sum(n for what, n in failures.items() if what != DEADLINE_ABORT),
        "deadline_aborts": failures.get(DEADLINE_ABORT, 0),
        "error_detail": ", ".join(f"{what}: {n}" for what, n in sorted(failures.items()) if what != DEADLINE_ABORT),
    }
    for name, key in PERCENTILES.items():
        result[key] = percentiles.get(name)
    return result
