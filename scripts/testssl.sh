#!/usr/bin/env bash
# scripts/testssl.sh: testssl.sh against the server's HTTPS, on loopback.
#
# Builds the release binary (unless --no-build), makes a self-signed ECDSA
# P-256 certificate for localhost valid for a year, starts the server with it
# (and with HSTS and nosniff added to every response, as an operator serving
# HTTPS would), runs testssl.sh (Debian package testssl.sh) with JSON output,
# and lists every finding of severity LOW or above, each marked as caused by
# the self-signed test certificate (allowed) or not (a FINDING). Exits 1 if
# there is a FINDING, 0 if not. About a minute.
#
#   scripts/testssl.sh [--no-build] [--port PORT] [--dispatch local|system]
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=19860
DISPATCH=local
BUILD=1
usage() {
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
}
while (($#)); do
    case "$1" in
    --no-build) BUILD=0 ;;
    --port) PORT="${2:?--port needs a value}"; shift ;;
    --dispatch) DISPATCH="${2:?--dispatch needs local or system}"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "testssl.sh: unknown option: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

for tool in testssl openssl python3; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "testssl.sh: $tool is not installed (apt-get install testssl.sh openssl python3)" >&2
        exit 2
    }
done
BINARY="${CARGO_TARGET_DIR:-target}/release/uppercut-mio-server"
if ((BUILD)); then
    cargo build --release
fi
WORK="$(mktemp -d)"
SERVER_PID=
cleanup() {
    if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 365 -subj "/CN=localhost" \
    -addext "subjectAltName=DNS:localhost" 2>/dev/null
"$BINARY" --bind "127.0.0.1:$PORT" --dispatch "$DISPATCH" \
    --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem" \
    --header "Strict-Transport-Security: max-age=31536000" \
    --header "X-Content-Type-Options: nosniff" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do
    grep -q '^listening on https://' "$WORK/server.log" 2>/dev/null && break
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        cat "$WORK/server.log" >&2
        exit 1
    fi
    sleep 0.1
done

echo "== testssl.sh against https://localhost:$PORT/ (dispatch $DISPATCH)"
testssl --quiet --color 0 --warnings off --ip 127.0.0.1 --jsonfile "$WORK/testssl.json" \
    "localhost:$PORT" >"$WORK/testssl.txt" 2>&1 || true

python3 - "$WORK/testssl.json" <<'EOF'
import json
import sys

# What a self-signed certificate for localhost, trusted by nobody and served
# on loopback, causes by itself: no chain of trust, no revocation service, no
# stapling, no DNS CAA record for the name.
CAUSED_BY_TEST_CERTIFICATE = {
    "cert_chain_of_trust", "cert_trust", "cert_revocation", "cert_ocspRevoked",
    "cert_ocspURL", "cert_crlDistributionPoints", "OCSP_stapling", "cert_mustStapleExtension",
    "DNS_CAArecord", "cert_certificateTransparency", "cert_caIssuers",
}
SEVERE = ("LOW", "MEDIUM", "HIGH", "CRITICAL")
findings = [f for f in json.load(open(sys.argv[1])) if f.get("severity") in SEVERE]
real = 0
for f in findings:
    allowed = f["id"] in CAUSED_BY_TEST_CERTIFICATE
    real += not allowed
    mark = "allowed (self-signed test certificate)" if allowed else "FINDING"
    print(f"{f['severity']:<8} {f['id']:<28} {f['finding'][:70]:<72} {mark}")
print(f"testssl.sh: {len(findings)} at LOW or above, {real} not caused by the test certificate")
sys.exit(1 if real else 0)
EOF
