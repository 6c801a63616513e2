#!/usr/bin/env bash
# scripts/browser-h2.sh: a real browser over HTTP/2. Headless Chromium loads
# a page of 100 small files (50 images, 50 scripts) from the server over
# https:// on loopback; every file must arrive, and the browser must say it
# came over h2.
#
# Needs Debian's chromium and chromium-driver: installed with apt-get when
# missing, which needs root (or passwordless sudo); without either it
# prints SKIPPED and exits 0. Selenium 4.51.0 goes into a venv under
# target/browser-h2/ (once, from PyPI). Builds the server (release;
# --debug: the debug build), writes the page and its files into a temporary
# directory served with --static-dir, a self-signed certificate with
# openssl, and checks: each image decoded at its size, each script ran,
# and performance.getEntries() has the page and the 100 files, each with
# nextHopProtocol "h2"; the server's access log has each of the 101
# requests, as HTTP/2.0 with 200. Then, on that page, two members join the
# chat room (wss://.../chat) and one speaks: both must hear it, and the
# access log must have the two WebSockets as "CONNECT /chat HTTP/2.0" 200,
# that is, over the page's HTTP/2 connection (RFC 8441), not an HTTP/1.1
# upgrade (--no-websocket: skip this part). Exits 1 if any check fails.
# About ten seconds once set up.
#
#   scripts/browser-h2.sh [--no-build] [--debug] [--dispatch local|system]
#                         [--screenshot PNG] [--no-websocket]
set -euo pipefail
cd "$(dirname "$0")/.."

SELENIUM_VERSION=4.51.0
BUILD=1
PROFILE=release
DISPATCH=local
SCREENSHOT=
WEBSOCKET=1
usage() {
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
}
while (($#)); do
    case "$1" in
    --no-build) BUILD=0 ;;
    --debug) PROFILE=debug ;;
    --dispatch) DISPATCH="${2:?--dispatch needs local or system}"; shift ;;
    --screenshot) SCREENSHOT="${2:?--screenshot needs a file name}"; shift ;;
    --no-websocket) WEBSOCKET=0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "browser-h2.sh: unknown option: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

CHROMIUM=/usr/bin/chromium
CHROMEDRIVER=/usr/bin/chromedriver
if [[ ! -x $CHROMIUM || ! -x $CHROMEDRIVER ]]; then
    if ((EUID == 0)); then
        SUDO=()
    elif sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        echo "browser-h2.sh: SKIPPED: chromium and chromium-driver are not installed, and"
        echo "browser-h2.sh: installing them (apt-get install chromium chromium-driver) needs root"
        exit 0
    fi
    echo "browser-h2.sh: installing chromium and chromium-driver with apt-get"
    "${SUDO[@]}" apt-get update -q
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver
fi
for tool in openssl python3; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "browser-h2.sh: $tool is not installed (apt-get install $tool)" >&2
        exit 2
    }
done

TARGET="${CARGO_TARGET_DIR:-target}"
DIR="$TARGET/browser-h2"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
VENV="$DIR/venv"
if ! "$VENV/bin/python" -c "import selenium; assert selenium.__version__ == '$SELENIUM_VERSION'" 2>/dev/null; then
    echo "browser-h2.sh: setting up $VENV with selenium $SELENIUM_VERSION (once)"
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
if [[ ! -x $BINARY ]]; then
    echo "browser-h2.sh: no server binary at $BINARY" >&2
    exit 2
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

# The page: 50 PNG images of 8x8 pixels, each its own colour, and 50
# scripts that each note their number.
python3 - "$WORK/site" <<'PY'
import os
import struct
import sys
import zlib

site = sys.argv[1]
os.makedirs(f"{site}/img")
os.makedirs(f"{site}/js")


def png(width, height, rgb):
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    row = b"\x00" + bytes(rgb) * width
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(row * height))
            + chunk(b"IEND", b""))


body = []
for n in range(50):
    with open(f"{site}/img/{n:03}.png", "wb") as f:
        f.write(png(8, 8, (n * 5, 255 - n * 5, 128)))
    body.append(f'<img src="/img/{n:03}.png" width="8" height="8" alt="{n}">')
for n in range(50):
    with open(f"{site}/js/{n:03}.js", "w") as f:
        f.write(f"window.arrived.push({n});\n")
    body.append(f'<script src="/js/{n:03}.js"></script>')
with open(f"{site}/index.html", "w") as f:
    f.write("<!doctype html>\n<html><head><meta charset=\"utf-8\">\n"
            "<title>h2 browser check</title><link rel=\"icon\" href=\"data:,\">\n"
            "<script>window.arrived = [];</script></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")
PY

"$BINARY" --bind 127.0.0.1:0 --dispatch "$DISPATCH" --http2 on \
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
    echo "browser-h2.sh: the server did not start:" >&2
    cat "$WORK/server.log" >&2
    exit 1
fi

echo "== headless $("$CHROMIUM" --version 2>/dev/null) loads https://127.0.0.1:$PORT/ (dispatch $DISPATCH)"
mkdir "$WORK/profile"
# Selenium Manager is not needed (both paths are given): no downloads, no
# usage statistics.
SE_OFFLINE=true SE_AVOID_STATS=true "$VENV/bin/python" - "https://127.0.0.1:$PORT/" \
    "$WORK/profile" "$WORK/access.log" "$CHROMIUM" "$CHROMEDRIVER" "$SCREENSHOT" "$WEBSOCKET" <<'PY'
import re
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

url, profile, access_log, chromium, chromedriver, screenshot, websocket = sys.argv[1:8]
websocket = websocket == "1"
wanted = [f"/img/{n:03}.png" for n in range(50)] + [f"/js/{n:03}.js" for n in range(50)]

options = webdriver.ChromeOptions()
options.binary_location = chromium
for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--ignore-certificate-errors"):
    options.add_argument(flag)
driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
problems = []
try:
    driver.set_page_load_timeout(30)
    driver.get(url)
    page = driver.execute_script("""
        const images = [...document.images].map(img => [
            new URL(img.src).pathname, img.complete && img.naturalWidth === 8 && img.naturalHeight === 8]);
        const entries = performance.getEntries()
            .filter(e => e.entryType === 'navigation' || e.entryType === 'resource')
            .map(e => [e.entryType, new URL(e.name).pathname, e.nextHopProtocol, e.responseStatus || 0]);
        return {images, scripts: window.arrived, entries};
    """)
    if screenshot:
        driver.save_screenshot(screenshot)
    chat = None
    if websocket:
        # Two members of the room at /chat, on the page's origin: once both
        # are open, the first speaks; each must hear it (the room sends to
        # every member, the speaker too).
        driver.set_script_timeout(20)
        chat = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const url = 'wss://' + location.host + '/chat';
            const said = 'hello over h2 ' + Date.now();
            const heard = [[], []];
            const members = [new WebSocket(url), new WebSocket(url)];
            let open = 0, finished = false;
            const finish = error => finished || (finished = true) && done({said, heard, error,
                states: members.map(m => m.readyState),
                extensions: members.map(m => m.extensions)});
            setTimeout(() => finish('timed out'), 15000);
            members.forEach((member, i) => {
                member.onerror = () => finish('member ' + i + ' failed');
                member.onmessage = event => {
                    heard[i].push(event.data);
                    if (heard.every(h => h.includes(said))) {
                        members.forEach(m => m.close(1000));
                        finish(null);
                    }
                };
                member.onopen = () => { if (++open === 2) members[0].send(said); };
            });
        """)
finally:
    driver.quit()

bad_images = [path for path, ok in page["images"] if not ok]
if len(page["images"]) != 50 or bad_images:
    problems.append(f"images: {len(page['images'])} on the page, not decoded: {bad_images}")
if sorted(page["scripts"]) != list(range(50)):
    missing = sorted(set(range(50)) - set(page["scripts"]))
    problems.append(f"scripts: {len(page['scripts'])} ran, missing {missing}")

entries = page["entries"]
navigation = [e for e in entries if e[0] == "navigation"]
resources = {e[1]: e for e in entries if e[0] == "resource"}
if [e[1:3] for e in navigation] != [["/", "h2"]]:
    problems.append(f"the page itself: {navigation}")
missing = [path for path in wanted if path not in resources]
if missing:
    problems.append(f"no resource entry for {len(missing)} files: {missing[:5]}")
not_h2 = [(path, resources[path][2]) for path in wanted if path in resources
          and resources[path][2] != "h2"]
if not_h2:
    problems.append(f"{len(not_h2)} files not over h2: {not_h2[:5]}")
protocols = sorted({e[2] for e in entries})
statuses = sorted({e[3] for e in entries})

if chat is not None:
    if chat["error"] or not all(chat["said"] in h for h in chat["heard"]):
        problems.append(f"chat: {chat}")

# The server's side: one access log line per request, as HTTP/2.0 with 200.
# Lines are written as each response goes; give the last ones a moment.
served = {}
chats = []
for _ in range(50):
    served = {}
    chats = []
    for line in open(access_log, encoding="utf-8", errors="replace"):
        m = re.search(r'"GET (\S+) (HTTP/[0-9.]+)" (\d{3}) ', line)
        if m:
            served[m.group(1)] = (m.group(2), m.group(3))
        m = re.search(r'"(GET|CONNECT) /chat (HTTP/[0-9.]+)" (\d{3}) ', line)
        if m:
            chats.append(m.groups())
    if all(path in served for path in ["/"] + wanted) and (not websocket or len(chats) >= 2):
        break
    time.sleep(0.1)
if websocket and chats != [("CONNECT", "HTTP/2.0", "200")] * 2:
    problems.append(f"the chat WebSockets were not logged as two CONNECT over HTTP/2.0 "
                    f"answered 200: {chats}")
not_logged = [p for p in ["/"] + wanted if served.get(p) != ("HTTP/2.0", "200")]
if not_logged:
    problems.append(f"{len(not_logged)} requests not logged as HTTP/2.0 200: "
                    f"{[(p, served.get(p)) for p in not_logged[:5]]}")

print(f"browser-h2.sh: {len(page['images'])} images decoded, {len(page['scripts'])} scripts ran; "
      f"{len(navigation)} navigation and {len(resources)} resource entries, "
      f"nextHopProtocol {protocols}, responseStatus {statuses}; "
      f"{sum(1 for v in served.values() if v == ('HTTP/2.0', '200'))} HTTP/2.0 200 lines in the access log")
if chat is not None:
    print(f"browser-h2.sh: chat over wss: {len(chat['heard'][0])} and {len(chat['heard'][1])} "
          f"messages heard, error {chat['error']}; access log: {chats}")
for problem in problems:
    print(f"browser-h2.sh: FAIL {problem}")
print("browser-h2.sh: " + ("FAIL" if problems else "PASS"))
sys.exit(1 if problems else 0)
PY
