#!/usr/bin/env bash
# scripts/metrics-check.sh: check --metrics with the real Prometheus tools.
#
#  1. starts the server (release build) with --metrics on loopback;
#  2. scrapes /metrics during a short load (wrk if installed, else curl) and
#     pipes the page into `promtool check metrics`;
#  3. runs a Prometheus server against it (scrape every 1s, data in a temp
#     dir), waits until it has samples, and prints the per-poller request
#     rate, rate(uppercut_requests_total[10s]), from its HTTP API;
#  4. stops everything it started.
#
# Needs promtool and prometheus (Debian: apt-get install -y prometheus),
# curl and python3. Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
    cat <<EOF
usage: scripts/metrics-check.sh [--port P] [--metrics-port P] [--prometheus-port P]
                                [--pollers N] [--dispatch local|system] [--no-build]

  --port P             the server's port (default 19300)
  --metrics-port P     its /metrics port (default 19301)
  --prometheus-port P  the Prometheus server's port (default 19302)
  --pollers N          the server's pollers (default 2)
  --dispatch MODE      local (default) or system
  --no-build           use target/release/uppercut-mio-server as it is
EOF
}

port=19300
metrics_port=19301
prom_port=19302
pollers=2
dispatch=local
build=1
while (($#)); do
    case $1 in
    --port) port=${2:?--port needs a value}; shift 2 ;;
    --metrics-port) metrics_port=${2:?--metrics-port needs a value}; shift 2 ;;
    --prometheus-port) prom_port=${2:?--prometheus-port needs a value}; shift 2 ;;
    --pollers) pollers=${2:?--pollers needs a value}; shift 2 ;;
    --dispatch) dispatch=${2:?--dispatch needs a value}; shift 2 ;;
    --no-build) build=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done

for tool in promtool prometheus curl python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "metrics-check: $tool is missing (promtool and prometheus: apt-get install -y prometheus)" >&2
        exit 1
    fi
done

work=$(mktemp -d)
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# wait_for WHAT SECONDS CMD...: runs CMD every 0.2 s until it succeeds.
wait_for() {
    local what=$1 tries=$(($2 * 5))
    shift 2
    until "$@" >/dev/null 2>&1; do
        tries=$((tries - 1))
        if ((tries <= 0)); then
            echo "metrics-check: gave up waiting for $what" >&2
            return 1
        fi
        sleep 0.2
    done
}

# load SECONDS CONNECTIONS: requests to the server in the background.
load() {
    if command -v wrk >/dev/null 2>&1; then
        wrk -t2 -c"$2" -d"$1"s "http://127.0.0.1:$port/" >"$work/wrk.log" 2>&1 &
    else
        local end=$((SECONDS + $1))
        while ((SECONDS < end)); do
            curl -s -o /dev/null "http://127.0.0.1:$port/" || true
        done &
    fi
    pids+=("$!")
}

requests_counted() {
    curl -sf "http://127.0.0.1:$metrics_port/metrics" |
        awk '/^uppercut_requests_total/ { n += $2 } END { exit !(n > 0) }'
}

if ((build)); then
    cargo build --release --quiet
fi
target/release/uppercut-mio-server --bind "127.0.0.1:$port" --pollers "$pollers" \
    --dispatch "$dispatch" --metrics "127.0.0.1:$metrics_port" >"$work/server.log" 2>&1 &
pids+=("$!")
wait_for "the server's /metrics" 10 curl -sf -o /dev/null "http://127.0.0.1:$metrics_port/metrics"
echo "== server: $(head -1 "$work/server.log")"

echo "== promtool check metrics, on a scrape taken under load"
load 3 10
wait_for "requests under load" 10 requests_counted
curl -sf "http://127.0.0.1:$metrics_port/metrics" >"$work/scrape.txt"
promtool check metrics <"$work/scrape.txt"
echo "promtool: ok ($(grep -c '^[a-z]' "$work/scrape.txt") samples)"
grep '^uppercut_requests_total' "$work/scrape.txt"

echo "== Prometheus on 127.0.0.1:$prom_port, scraping every 1s"
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: uppercut
    static_configs:
      - targets: ['127.0.0.1:$metrics_port']
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
    --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
pids+=("$!")
wait_for "Prometheus to be ready" 30 curl -sf -o /dev/null "http://127.0.0.1:$prom_port/-/ready"
# Load for as long as it takes Prometheus to see a rate. With few
# connections a poller may get none of them: its rate is then 0.
load 30 2

query='sum by (poller) (rate(uppercut_requests_total[10s]))'
rates() {
    curl -sf "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$query" >"$work/rates.json" &&
        python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]
sys.exit(not any(float(s["value"][1]) > 0 for s in r))' <"$work/rates.json"
}
wait_for "Prometheus to have a request rate" 30 rates
echo "$query:"
python3 -c 'import json, sys
for s in sorted(json.load(sys.stdin)["data"]["result"], key=lambda s: int(s["metric"]["poller"])):
    print("  poller %s: %.1f requests/s" % (s["metric"]["poller"], float(s["value"][1])))' <"$work/rates.json"
echo "metrics-check: ok"
