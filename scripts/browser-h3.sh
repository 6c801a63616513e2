#!/usr/bin/env bash
# scripts/browser-h3.sh: a real browser over HTTP/3. Headless Chromium,
# forced onto QUIC for the test origin (--origin-to-force-quic-on), loads a
# page of 20 small files from the server (--http3 on) over https:// on
# loopback; every file must arrive, and the browser must say it came over
# h3; the server's access log must have each request as HTTP/3.0 200.
#
# Needs Debian's chromium and chromium-driver (installed with apt-get when
# missing and root; else SKIPPED, exit 0) and openssl. Selenium goes into a
# venv under target/browser-h3/ (once, from PyPI). The certificate is
# self-signed; Chromium trusts it by its key's hash
# (--ignore-certificate-errors-spki-list), as QUIC wants a certificate it
# can verify. Builds the server (release; --debug: the debug build).
#
#   scripts/browser-h3.sh [--no-build] [--debug] [--screenshot PNG]
set -euo pipefail
cd "$(dirname "$0")/.."

SELENIUM_VERSION=4.51.0
BUILD=1
PROFILE=release
SCREENSHOT=
while (($#)); do
    case "$1" in
    --no-build) BUILD=0 ;;
    --debug) PROFILE=debug ;;
    --screenshot) SCREENSHOT="${2:?--screenshot needs a file name}"; shift ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "browser-h3.sh: unknown option: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

CHROMIUM=/usr/bin/chromium
CHROMEDRIVER=/usr/bin/chromedriver
if [[ ! -x $CHROMIUM || ! -x $CHROMEDRIVER ]]; then
    if ((EUID != 0)); then
        echo "browser-h3.sh: SKIPPED: chromium and chromium-driver are not installed (needs root)"
        exit 0
    fi
    echo "browser-h3.sh: installing chromium and chromium-driver with apt-get"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver
fi

TARGET="${CARGO_TARGET_DIR:-target}"
DIR="$TARGET/browser-h3"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
VENV="$DIR/venv"
if ! "$VENV/bin/python" -c "import selenium; assert selenium.__version__ == '$SELENIUM_VERSION'" 2>/dev/null; then
    echo "browser-h3.sh: setting up $VENV with selenium $SELENIUM_VERSION (once)"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "selenium==$SELENIUM_VERSION"
fi

BINARY="$TARGET/$PROFILE/uppercut-mio-server"
if ((BUILD)); then
    if [[ $PROFILE == release ]]; then cargo build --release --bin uppercut-mio-server; else
        cargo build --bin uppercut-mio-server
    fi
fi

WORK="$(mktemp -d)"
SERVER_PID=
cleanup() {
    if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 2 -subj "/CN=localhost" \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
SPKI=$(openssl x509 -pubkey -noout -in "$WORK/cert.pem" | openssl pkey -pubin -outform der |
    openssl dgst -sha256 -binary | base64)

mkdir -p "$WORK/site/js"
{
    echo '<!doctype html><html><head><meta charset="utf-8"><title>h3 browser check</title>'
    echo '<link rel="icon" href="data:,"><script>window.arrived = [];</script></head><body>'
    for n in $(seq -w 0 19); do
        echo "window.arrived.push($((10#$n)));" >"$WORK/site/js/$n.js"
        echo "<script src=\"/js/$n.js\"></script>"
    done
    echo '</body></html>'
} >"$WORK/site/index.html"

"$BINARY" --bind 127.0.0.1:0 --http3 on \
    --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem" \
    --static-dir "$WORK/site" --access-log "$WORK/access.log" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PORT=
for _ in $(seq 100); do
    PORT=$(sed -n 's|^listening on https://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$WORK/server.log")
    [[ -n $PORT ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
if [[ -z $PORT ]]; then
    echo "browser-h3.sh: the server did not start:" >&2
    cat "$WORK/server.log" >&2
    exit 1
fi

echo "== headless $("$CHROMIUM" --version 2>/dev/null) loads https://localhost:$PORT/ over QUIC"
mkdir "$WORK/profile"
SE_OFFLINE=true SE_AVOID_STATS=true "$VENV/bin/python" - "https://localhost:$PORT/" \
    "$WORK/profile" "$WORK/access.log" "$CHROMIUM" "$CHROMEDRIVER" "$SPKI" "$PORT" \
    "$SCREENSHOT" <<'PY'
import re
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

url, profile, access_log, chromium, chromedriver, spki, port, screenshot = sys.argv[1:9]
wanted = [f"/js/{n:02}.js" for n in range(20)]
options = webdriver.ChromeOptions()
options.binary_location = chromium
for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--enable-quic",
             # localhost is ::1 first; the server listens on 127.0.0.1.
             "--host-resolver-rules=MAP localhost 127.0.0.1",
             f"--origin-to-force-quic-on=localhost:{port}",
             f"--ignore-certificate-errors-spki-list={spki}"):
    options.add_argument(flag)
driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
problems = []
try:
    driver.set_page_load_timeout(30)
    driver.get(url)
    page = driver.execute_script("""
        const entries = performance.getEntries()
            .filter(e => e.entryType === 'navigation' || e.entryType === 'resource')
            .map(e => [e.entryType, new URL(e.name).pathname, e.nextHopProtocol]);
        return {scripts: window.arrived, entries};
    """)
    if screenshot:
        driver.save_screenshot(screenshot)
finally:
    driver.quit()

if sorted(page["scripts"]) != list(range(20)):
    problems.append(f"scripts: {sorted(page['scripts'])} ran")
entries = page["entries"]
navigation = [e[1:] for e in entries if e[0] == "navigation"]
if navigation != [["/", "h3"]]:
    problems.append(f"the page itself: {navigation}")
resources = {e[1]: e[2] for e in entries if e[0] == "resource"}
not_h3 = [(p, resources.get(p)) for p in wanted if resources.get(p) != "h3"]
if not_h3:
    problems.append(f"{len(not_h3)} files not over h3: {not_h3[:5]}")
served = {}
for _ in range(50):
    served = {}
    for line in open(access_log, encoding="utf-8", errors="replace"):
        m = re.search(r'"GET (\S+) (HTTP/[0-9.]+)" (\d{3}) ', line)
        if m:
            served[m.group(1)] = (m.group(2), m.group(3))
    if all(p in served for p in ["/"] + wanted):
        break
    time.sleep(0.1)
not_logged = [p for p in ["/"] + wanted if served.get(p) != ("HTTP/3.0", "200")]
if not_logged:
    problems.append(f"not logged as HTTP/3.0 200: {[(p, served.get(p)) for p in not_logged[:5]]}")
print(f"browser-h3.sh: {len(page['scripts'])} scripts ran; page over {navigation}; "
      f"files over {sorted(set(resources.values()))}; "
      f"{sum(1 for v in served.values() if v == ('HTTP/3.0', '200'))} HTTP/3.0 200 lines logged")
for problem in problems:
    print(f"browser-h3.sh: FAIL {problem}")
print("browser-h3.sh: " + ("FAIL" if problems else "PASS"))
sys.exit(1 if problems else 0)
PY
