#!/usr/bin/env bash
# scripts/autobahn.sh: the Autobahn|Testsuite fuzzingclient against
# examples/ws_echo, on loopback, in both dispatch modes.
#
# Sets up (once) a Python 2.7 virtualenv with autobahntestsuite 25.10.1 and
# its pinned dependencies: the suite is Python 2 code. It needs pyenv's
# CPython 2.7.18 (or AUTOBAHN_PYTHON2=/path/to/python2.7) and a Python 3 to
# run virtualenv 20.21.1, the last release that makes Python 2
# environments; both go under target/autobahn. Then builds the example,
# runs cases 1-7, 9 and 10 against it in each mode, and prints the counts by
# behaviour. Exits 1 if any case is FAILED, NON-STRICT or UNIMPLEMENTED, or
# closed wrongly. About a minute once set up; the reports stay in
# target/autobahn/reports-MODE.
#
# --deflate adds sections 12 and 13 (permessage-deflate, about ten minutes
# a mode); --only-deflate runs those alone. The example offers the
# extension without context takeover (--takeover: with it). --tls runs over
# wss:// with a self-signed certificate made by openssl.
#
#   scripts/autobahn.sh [--no-build] [--port PORT] [--dispatch local|system]
#                       [--deflate | --only-deflate] [--takeover] [--tls]
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=19870
MODES=(local system)
BUILD=1
CASES='"1.*", "2.*", "3.*", "4.*", "5.*", "6.*", "7.*", "9.*", "10.*"'
DEFLATE=shared
TLS=0
usage() {
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
}
while (($#)); do
    case "$1" in
    --no-build) BUILD=0 ;;
    --port) PORT="${2:?--port needs a value}"; shift ;;
    --dispatch) MODES=("${2:?--dispatch needs local or system}"); shift ;;
    --deflate) CASES="$CASES"', "12.*", "13.*"' ;;
    --only-deflate) CASES='"12.*", "13.*"' ;;
    --takeover) DEFLATE=takeover ;;
    --tls) TLS=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "autobahn.sh: unknown option: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

DIR="${CARGO_TARGET_DIR:-target}/autobahn"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
VENV="$DIR/venv"
PYTHON2="${AUTOBAHN_PYTHON2:-$HOME/.pyenv/versions/2.7.18/bin/python2.7}"
if [[ ! -x $VENV/bin/wstest ]]; then
    [[ -x $PYTHON2 ]] || {
        echo "autobahn.sh: no Python 2.7 at $PYTHON2 (pyenv install 2.7.18, or set AUTOBAHN_PYTHON2)" >&2
        exit 2
    }
    command -v python3 >/dev/null 2>&1 || { echo "autobahn.sh: python3 is not installed" >&2; exit 2; }
    echo "autobahn.sh: setting up $VENV (once)"
    python3 -m venv "$DIR/tool"
    "$DIR/tool/bin/pip" install -q virtualenv==20.21.1
    "$DIR/tool/bin/virtualenv" -q -p "$PYTHON2" "$VENV"
    "$VENV/bin/pip" install -q autobahntestsuite==25.10.1 2>&1 | grep -v DEPRECATION || true
fi

EXAMPLE="${CARGO_TARGET_DIR:-target}/release/examples/ws_echo"
if ((BUILD)); then
    cargo build --release --example ws_echo
fi

SCHEME=ws
TLS_ARGS=()
if ((TLS)); then
    command -v openssl >/dev/null 2>&1 || { echo "autobahn.sh: --tls needs openssl" >&2; exit 2; }
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
        -keyout "$DIR/key.pem" -out "$DIR/cert.pem" >/dev/null 2>&1
    SCHEME=wss
    TLS_ARGS=("$DIR/cert.pem" "$DIR/key.pem")
fi

status=0
for mode in "${MODES[@]}"; do
    reports="$DIR/reports-$mode"
    rm -rf "$reports"
    cat >"$DIR/fuzzingclient-$mode.json" <<JSON
{
  "outdir": "$reports",
  "servers": [{"agent": "uppercut-mio-server-$mode", "url": "$SCHEME://127.0.0.1:$PORT"}],
  "cases": [$CASES],
  "exclude-cases": [],
  "exclude-agent-cases": {}
}
JSON
    "$EXAMPLE" "127.0.0.1:$PORT" "$mode" "$DEFLATE" "${TLS_ARGS[@]}" >"$DIR/server-$mode.log" 2>&1 &
    server=$!
    trap 'kill "$server" 2>/dev/null || true' EXIT
    for _ in $(seq 100); do
        grep -q listening "$DIR/server-$mode.log" && break
        sleep 0.1
    done
    (cd "$DIR" && "$VENV/bin/wstest" -m fuzzingclient -s "fuzzingclient-$mode.json" >"$DIR/wstest-$mode.log" 2>&1)
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    python3 - "$reports/index.json" "$mode" <<'PY' || status=1
import collections, json, sys
index, mode = json.load(open(sys.argv[1])), sys.argv[2]
bad = []
for agent, cases in index.items():
    counts = collections.Counter(case["behavior"] for case in cases.values())
    print("autobahn.sh: %s: %d cases: %s" % (mode, len(cases), ", ".join(
        "%d %s" % (n, b) for b, n in sorted(counts.items()))))
    for name, case in sorted(cases.items()):
        if case["behavior"] not in ("OK", "INFORMATIONAL") or \
                case["behaviorClose"] not in ("OK", "INFORMATIONAL"):
            bad.append("%s %s (close %s)" % (name, case["behavior"], case["behaviorClose"]))
for line in bad:
    print("autobahn.sh: %s: %s" % (mode, line))
sys.exit(1 if bad else 0)
PY
done
exit "$status"
