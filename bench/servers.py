"""bench/servers.py: one server process under test, for bench/run.

Starting it in a session of its own, waiting until it accepts connections,
stopping its whole process group, and reading its CPU time and RSS from /proc.
Only the Python standard library is used.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

READY_TIMEOUT = 30.0  # how long a server may take to accept its first connection
STOP_GRACE = 5.0  # SIGTERM, then SIGKILL after this many seconds
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# It lives here, the lowest layer, so that wrk_report can raise it too without
# importing bench/run.
class BenchError(Exception):
    """A failure that ends the run with a message (and cleanup), not a traceback."""


# ---------------------------------------------------------------- server lifecycle


def port_accepts(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def start_server(server, log_dir, round_no):
    # A process with no listener of its own (a NATS responder) has port None.
    if server.port is not None and port_accepts(server.host, server.port):
        raise BenchError(f"{server.name}: something already listens on {server.host}:{server.port}; "
                         "stop it first, or the numbers would be of that process")
    log_path = os.path.join(log_dir, f"{server.name}.round{round_no}.log")
    log = open(log_path, "wb")
    try:
        # A session of its own: the server (and anything it spawns) is stopped as a
        # group, and a Ctrl-C at the terminal reaches us first, so we clean up in order.
        # With the kernel's autogroups it is also scheduled apart from wrk and oha, as
        # on a box of its own (see the README's Performance section).
        proc = subprocess.Popen(server.argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:
        raise BenchError(f"{server.name}: cannot start {server.argv[0]}: {e}")
    finally:
        log.close()
    proc.log_path = log_path
    return proc


def wait_until_accepting(server, proc):
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{server.name} exited with status {proc.returncode} before accepting "
                             f"connections:\n{log_tail(proc.log_path)}")
        if port_accepts(server.host, server.port):
            return
        time.sleep(0.05)
    raise BenchError(f"{server.name} did not accept connections on {server.host}:{server.port} "
                     f"within {READY_TIMEOUT:.0f} s:\n{log_tail(proc.log_path)}")


def stop_server(proc):
    """SIGTERM the server's process group, then SIGKILL it if it lingers."""
    if proc.poll() is None:
        signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            signal_group(proc, signal.SIGKILL)
            proc.wait()
    # The leader may be gone while children it spawned still hold the group.
    signal_group(proc, signal.SIGKILL)


def signal_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def log_tail(path, lines=15):
    try:
        with open(path, "rb") as f:
            text = f.read().decode(errors="replace").splitlines()
    except OSError:
        return "    (no log)"
    return "\n".join("    " + line for line in text[-lines:]) or "    (empty log)"


def first_log_line(path, wait=1.0):
    """The server's start-up banner, e.g. "listening on ... (2 pollers, dispatch local)".
    It may be written a moment after the port opens, so give it a short grace."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with open(path, "rb") as f:
                line = f.readline()
        except OSError:
            return ""
        if line.endswith(b"\n") or time.monotonic() >= deadline:
            return line.decode(errors="replace").strip()
        time.sleep(0.05)


# ---------------------------------------------------------------- /proc sampling


def cpu_seconds(pid):
    """User + system CPU time of the whole process (all threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # The command name (field 2) may contain spaces; fields after its ')' are fixed.
    fields = stat[stat.rindex(")") + 2:].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 in proc(5)
    return (utime + stime) / CLOCK_TICKS


def group_cpu_seconds(pgid):
    """User + system CPU time of every process in process group `pgid` (a
    server started by start_server leads its own: nginx's master and its
    workers, say). A process that exits between the listing and the read is
    left out."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid:  # field 5 in proc(5)
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024  # reported in kB
    return 0


def idle_cpu_percent(pid, seconds):
    """CPU used while nobody talks to the server, in % of one core: a busy-polling
    or timer-happy event loop shows up here."""
    before, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    after, t1 = cpu_seconds(pid), time.monotonic()
    return 100.0 * (after - before) / (t1 - t0)


def make_certificate(cert, key):
    """An ECDSA P-256 certificate for localhost (as every bench mode makes
    it), written to the paths `cert` and `key`."""
    if shutil.which("openssl") is None:
        raise BenchError("openssl is missing: apt-get install openssl")
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                           "-nodes", "-keyout", key, "-out", cert, "-days", "30", "-subj", "/CN=localhost",
                           "-addext", "subjectAltName=DNS:localhost"], capture_output=True, text=True)
    if made.returncode != 0:
        raise BenchError(f"openssl could not make the certificate:\n{made.stderr}")
