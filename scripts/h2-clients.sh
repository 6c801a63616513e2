#!/usr/bin/env bash
# scripts/h2-clients.sh: the HTTP/2 clients users have, against the server.
#
# Builds the release binary (unless --no-build), starts it on loopback with a
# self-signed certificate (a plain and a TLS listener), and asks GET / of it
# with each client there is, over TLS (ALPN h2) and over h2c with prior
# knowledge where the client offers it: curl (--http2, --http2-prior-knowledge),
# nghttp and h2load (Debian nghttp2-client), Python's httpx[http2] (in a
# virtualenv under target/, from PyPI) and Go's net/http (a program built under
# target/; its TLS client chooses h2 by ALPN). Each must get 200, `hello`, over
# HTTP/2. A client that is not installed is skipped, and said so; --strict
# fails instead. Exits 1 if any client got anything else.
#
#   scripts/h2-clients.sh [--no-build] [--strict] [--port PORT]
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=19870
BUILD=1
STRICT=0
usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
}
while (($#)); do
    case "$1" in
    --no-build) BUILD=0 ;;
    --strict) STRICT=1 ;;
    --port)
        PORT="${2:?--port needs a value}"
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        echo "h2-clients.sh: unknown option: $1 (try --help)" >&2
        exit 2
        ;;
    esac
    shift
done
TLS_PORT=$((PORT + 1))

command -v openssl >/dev/null 2>&1 || {
    echo "h2-clients.sh: openssl is not installed (apt-get install openssl)" >&2
    exit 2
}
TARGET="${CARGO_TARGET_DIR:-target}"
BINARY="$TARGET/release/uppercut-mio-server"
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
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 30 -subj "/CN=localhost" \
    -addext "subjectAltName=DNS:localhost" 2>/dev/null
"$BINARY" --bind "127.0.0.1:$PORT" --bind-tls "127.0.0.1:$TLS_PORT" \
    --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do
    grep -q '^listening on ' "$WORK/server.log" 2>/dev/null && break
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        cat "$WORK/server.log" >&2
        exit 1
    fi
    sleep 0.1
done
PLAIN="http://127.0.0.1:$PORT/"
SECURE="https://localhost:$TLS_PORT/"

passed=0
failed=0
skipped=0
# check NAME OUTPUT: the output must show HTTP/2, 200 and `hello`.
check() {
    local name=$1 output=$2
    if grep -qi 'HTTP/2' <<<"$output" && grep -q '200' <<<"$output" && grep -q 'hello' <<<"$output"; then
        echo "ok      $name"
        passed=$((passed + 1))
    else
        echo "FAILED  $name"
        head -20 <<<"$output" | while IFS= read -r line; do echo "        $line"; done
        failed=$((failed + 1))
    fi
}
skip() {
    echo "skipped $1 ($2)"
    skipped=$((skipped + 1))
}

if command -v curl >/dev/null 2>&1; then
    check "curl --http2 (TLS, ALPN)" "$(curl -sk -i --http2 --resolve "localhost:$TLS_PORT:127.0.0.1" "$SECURE" 2>&1 || true)"
    check "curl --http2-prior-knowledge (h2c)" "$(curl -s -i --http2-prior-knowledge "$PLAIN" 2>&1 || true)"
else
    skip curl "apt-get install curl"
fi

if command -v nghttp >/dev/null 2>&1; then
    # With -v nghttp prints the frames (the :status among them); without,
    # the body.
    for url in "$PLAIN" "https://127.0.0.1:$TLS_PORT/"; do
        status=$(nghttp -v "$url" 2>&1 | grep -o ':status: 200' | head -1 || true)
        body=$(nghttp "$url" 2>&1 || true)
        check "nghttp $url" "HTTP/2 $status $body"
    done
else
    skip nghttp "apt-get install nghttp2-client"
fi

if command -v h2load >/dev/null 2>&1; then
    for url in "$PLAIN" "https://127.0.0.1:$TLS_PORT/"; do
        out=$(h2load -n 100 -c 2 -m 4 "$url" 2>&1 || true)
        if grep -q 'status codes: 100 2xx' <<<"$out" && grep -q 'h2' <<<"$out"; then
            check "h2load $url" "HTTP/2 200 hello"
        else
            check "h2load $url" "$out"
        fi
    done
else
    skip h2load "apt-get install nghttp2-client"
fi

VENV="$TARGET/h2-clients/venv"
if [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV" >/dev/null 2>&1; then
    if "$VENV/bin/python" -c 'import httpx, h2' 2>/dev/null ||
        "$VENV/bin/pip" install -q 'httpx[http2]' >/dev/null 2>&1; then
        out=$("$VENV/bin/python" - "$SECURE" "$TLS_PORT" <<'EOF' 2>&1 || true
import sys
import httpx
transport = httpx.HTTPTransport(http2=True, verify=False)
with httpx.Client(transport=transport, http2=True, verify=False) as client:
    r = client.get(f"https://127.0.0.1:{sys.argv[2]}/")
    print(r.http_version, r.status_code, r.text)
EOF
        )
        check "python httpx[http2] (TLS)" "$out"
    else
        skip "python httpx" "pip install httpx[http2] failed"
    fi
else
    skip "python httpx" "python3 -m venv failed"
fi

GODIR="$TARGET/h2-clients/go"
if command -v go >/dev/null 2>&1; then
    mkdir -p "$GODIR"
    cat >"$GODIR/main.go" <<'EOF'
package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		ForceAttemptHTTP2: true,
	}}
	response, err := client.Get(os.Args[1])
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	defer response.Body.Close()
	body, _ := io.ReadAll(response.Body)
	fmt.Println(response.Proto, response.StatusCode, string(body))
}
EOF
    [[ -f "$GODIR/go.mod" ]] || (cd "$GODIR" && go mod init h2client >/dev/null 2>&1)
    if (cd "$GODIR" && go build -o h2client . >/dev/null 2>&1); then
        check "go net/http (TLS, ALPN)" "$("$GODIR/h2client" "https://127.0.0.1:$TLS_PORT/" 2>&1 || true)"
    else
        skip "go net/http" "go build failed"
    fi
else
    skip "go net/http" "go is not installed"
fi

echo "h2-clients: $passed passed, $failed failed, $skipped skipped"
if ((failed)) || ((STRICT && skipped)); then
    exit 1
fi
