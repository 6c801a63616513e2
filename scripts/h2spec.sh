#!/usr/bin/env bash
# scripts/h2spec.sh: HTTP/2 conformance with h2spec 2.2.1, on loopback, over
# h2c (prior knowledge, the plain port) and over TLS (ALPN h2).
#
# Installs h2spec once with `go install` into target/h2spec/ (no root; Go
# from PATH or /usr/local/go), builds the server (release; --debug: the
# debug build, which after `cargo test` --no-build takes as it is), starts
# it on a free port of 127.0.0.1, runs every h2spec case against it, then
# does the same with a self-signed certificate made by openssl. Prints each
# failure (section, case, what was expected, what came) and the counts of
# each run; exits 1 if any case failed. The h2c run starts the server with
# --http2 only, as an h2c backend runs: a plain port that also serves
# HTTP/1.1 would answer h2spec's "invalid connection preface"
# (http2/3.5/2) as the HTTP/1.1 request it could be.
# A few seconds once h2spec and the server are built.
#
#   scripts/h2spec.sh [--no-build] [--debug] [--only h2c|tls] [--strict]
#                     [--dispatch local|system] [--verbose]
#
#   --strict    also the cases h2spec marks strict (-S)
#   --verbose   h2spec's full report of every case, not just the failures
set -euo pipefail
cd "$(dirname "$0")/.."

H2SPEC_VERSION=v2.2.1
BUILD=1
PROFILE=release
MODES=(h2c tls)
STRICT=()
DISPATCH=local
VERBOSE=0
usage() {
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
}
while (($#)); do
    case "$1" in
    --no-build) BUILD=0 ;;
    --debug) PROFILE=debug ;;
    --only)
        case "${2:-}" in
        h2c | tls) MODES=("$2") ;;
        *) echo "h2spec.sh: --only needs h2c or tls" >&2; exit 2 ;;
        esac
        shift
        ;;
    --strict) STRICT=(-S) ;;
    --dispatch) DISPATCH="${2:?--dispatch needs local or system}"; shift ;;
    --verbose) VERBOSE=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "h2spec.sh: unknown option: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

for tool in openssl python3; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "h2spec.sh: $tool is not installed (apt-get install $tool)" >&2
        exit 2
    }
done

TARGET="${CARGO_TARGET_DIR:-target}"
H2SPEC_DIR="$TARGET/h2spec/$H2SPEC_VERSION"
H2SPEC="$H2SPEC_DIR/bin/h2spec"
if [[ ! -x $H2SPEC ]]; then
    GO=$(command -v go || true)
    [[ -n $GO ]] || { [[ -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go; }
    [[ -n $GO ]] || {
        echo "h2spec.sh: h2spec is not in $H2SPEC_DIR and there is no Go to build it with" >&2
        exit 2
    }
    echo "h2spec.sh: installing h2spec $H2SPEC_VERSION into $H2SPEC_DIR (once)"
    mkdir -p "$H2SPEC_DIR/bin"
    GOBIN="$(cd "$H2SPEC_DIR/bin" && pwd)" "$GO" install \
        "github.com/summerwind/h2spec/cmd/h2spec@$H2SPEC_VERSION+incompatible"
fi

BINARY="$TARGET/$PROFILE/uppercut-mio-server"
if ((BUILD)); then
    if [[ $PROFILE == release ]]; then cargo build --release --bin uppercut-mio-server; else
        cargo build --bin uppercut-mio-server
    fi
fi
if [[ ! -x $BINARY ]]; then
    echo "h2spec.sh: no server binary at $BINARY" >&2
    exit 2
fi

WORK="$(mktemp -d)"
SERVER_PID=
stop_server() {
    if [[ -n $SERVER_PID ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=
    fi
}
cleanup() {
    stop_server
    rm -rf "$WORK"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 2 -subj "/CN=localhost" \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null

# start_server MODE: starts the server on a free port; sets PORT.
start_server() {
    local log="$WORK/server-$1.log" tls=() http2=only
    if [[ $1 == tls ]]; then
        tls=(--tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem")
        http2=on
    fi
    "$BINARY" --bind 127.0.0.1:0 --dispatch "$DISPATCH" --http2 "$http2" "${tls[@]}" >"$log" 2>&1 &
    SERVER_PID=$!
    PORT=
    for _ in $(seq 100); do
        PORT=$(sed -n 's|^listening on https\{0,1\}://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$log")
        [[ -n $PORT ]] && return 0
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi
        sleep 0.1
    done
    echo "h2spec.sh: the server did not start ($1):" >&2
    cat "$log" >&2
    exit 1
}

status=0
for mode in "${MODES[@]}"; do
    start_server "$mode"
    args=(-h 127.0.0.1 -p "$PORT" "${STRICT[@]}")
    [[ $mode == tls ]] && args+=(-t -k)
    echo "== h2spec ${args[*]} (${mode}, dispatch $DISPATCH)"
    "$H2SPEC" "${args[@]}" >"$WORK/h2spec-$mode.txt" 2>&1 || true
    stop_server
    if ((VERBOSE)); then cat "$WORK/h2spec-$mode.txt"; fi
    python3 - "$WORK/h2spec-$mode.txt" "$mode" <<'PY' || status=1
import re
import sys

path, mode = sys.argv[1], sys.argv[2]
text = open(path, encoding="utf-8", errors="replace").read()
SUITES = {
    "Generic tests for HTTP/2 server": "generic",
    "Hypertext Transfer Protocol Version 2 (HTTP/2)": "http2",
    "HPACK: Header Compression for HTTP/2": "hpack",
}
# Cases allowed to fail, with what they must show: none.
SHARED_PORT = {}

summary = re.search(r"^(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed$", text, re.M)
if not summary:
    print(text[-3000:])
    print(f"h2spec.sh: {mode}: h2spec printed no summary (did it run?)")
    sys.exit(1)
tests, passed, skipped, failed = map(int, summary.groups())

failures = []  # (id, title, detail lines)
suite = section = None
in_failures = False
for line in text.splitlines():
    if line.startswith("Failures:"):
        in_failures = True
        continue
    if not in_failures or not line.strip():
        continue
    if line.startswith("Finished in"):
        break
    if line in SUITES:
        suite = SUITES[line]
        continue
    heading = re.match(r"^ +(\d+(?:\.\d+)*)\. ", line)
    if heading:
        section = heading.group(1)
        continue
    case = re.match(r"^ +\S+ (\d+): (.*)$", line)
    if case and not line.strip().startswith(("->", "Expected:", "Actual:")):
        failures.append((f"{suite}/{section}/{case.group(1)}", case.group(2), []))
        continue
    if failures:
        failures[-1][2].append(line.strip())

expected = []
for case_id, title, detail in failures:
    allowed = SHARED_PORT.get((mode, case_id))
    if allowed and any(allowed in d for d in detail):
        expected.append(case_id)
        mark = "shared port (HTTP/1.1 answered)"
    else:
        mark = "FAIL"
    print(f"h2spec.sh: {mode}: {mark} {case_id} {title}")
    for d in detail:
        print(f"h2spec.sh: {mode}:      {d}")
if len(failures) != failed:
    print(f"h2spec.sh: {mode}: {failed} failed, but {len(failures)} failures were listed")
real = failed - len(expected)
print(f"h2spec.sh: {mode}: {tests} tests, {passed} passed, {skipped} skipped, "
      f"{len(expected)} answered as HTTP/1.1 on the shared port, {real} failed")
sys.exit(1 if real or len(failures) != failed or passed + skipped + failed != tests else 0)
PY
done
if ((status)); then echo "h2spec.sh: FAIL"; else echo "h2spec.sh: PASS"; fi
((status == 0))
