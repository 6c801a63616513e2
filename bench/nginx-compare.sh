#!/usr/bin/env bash
# bench/nginx-compare.sh: /io and a static file, this server against nginx,
# measured in one run on one machine, rounds alternating.
#
#   /io      ours: GET /io, whose upstream is nginx answering a JSON literal;
#            nginx: the same literal, hit directly.
#   static   ours: --static-dir serving fixtures/v1-user.json;
#            nginx: the same file from the same directory.
#
# Usage: bench/nginx-compare.sh [--rounds N] [--duration S] [--wrk "-t4 -c128"] [--no-build]
# Needs wrk and nginx (apt-get install wrk nginx-light). Loopback only; stops by itself.
set -euo pipefail

ROUNDS=3
DURATION=10
WRK_ARGS="-t4 -c128"
BUILD=1
NGINX_PORT=19400
OURS_PORT=19410

usage() {
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS="$2"; shift 2 ;;
        --duration) DURATION="$2"; shift 2 ;;
        --wrk) WRK_ARGS="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/.."
for tool in wrk nginx; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || {
        echo "bench/nginx-compare.sh: $tool is missing: apt-get install wrk nginx-light" >&2
        exit 2
    }
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ "$BUILD" = 1 ] && cargo build --release --quiet
SERVER=./target/release/uppercut-mio-server

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

mkdir -p "$WORK/www" "$WORK/nginx"
cp fixtures/v1-user.json "$WORK/www/"
# nginx's workers run as an unprivileged user: let them reach the file.
chmod 755 "$WORK" "$WORK/www"
chmod 644 "$WORK/www/v1-user.json"
JSON='{"status": 200, "msg": "Good Luck!"}'
# A private nginx: its own prefix, no daemon, no access log, on loopback.
cat >"$WORK/nginx/nginx.conf" <<EOF
worker_processes auto;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000000;
    client_body_temp_path $WORK/nginx;
    proxy_temp_path $WORK/nginx;
    fastcgi_temp_path $WORK/nginx;
    uwsgi_temp_path $WORK/nginx;
    scgi_temp_path $WORK/nginx;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $WORK/www;
        location = /status {
            default_type application/json;
            return 200 '$JSON';
        }
    }
}
EOF
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" &
PIDS+=($!)

wait_for_port() {
    local port=$1 tries=0
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        tries=$((tries + 1))
        [ "$tries" -lt 100 ] || { echo "nothing listens on $port" >&2; exit 1; }
        sleep 0.1
    done
}
wait_for_port "$NGINX_PORT"

# Requests per second from one wrk run, and its socket errors.
measure() {
    local url=$1 out
    # shellcheck disable=SC2086 # WRK_ARGS holds several words on purpose
    out=$(wrk $WRK_ARGS -d"${DURATION}s" "$url")
    local rps errors non2xx
    rps=$(awk '/^Requests\/sec/ { printf "%d", $2 }' <<<"$out")
    errors=$(awk '/Socket errors/ { n = 0; for (i = 4; i <= NF; i += 2) n += $i; print n }' <<<"$out")
    non2xx=$(awk '/Non-2xx/ { print $NF }' <<<"$out")
    echo "$rps ${errors:-0} ${non2xx:-0}"
}

run_ours() {
    "$SERVER" --bind "127.0.0.1:$OURS_PORT" "$@" >/dev/null &
    OURS_PID=$!
    wait_for_port "$OURS_PORT"
}

stop_ours() {
    kill "$OURS_PID"
    wait "$OURS_PID" 2>/dev/null || true
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# A run that got errors measured something else: say so and stop.
check() {
    local what=$1 errors=$2 non2xx=$3
    if [ "$errors" != 0 ] || [ "$non2xx" != 0 ]; then
        echo "$what: $errors socket errors, $non2xx non-2xx responses" >&2
        exit 1
    fi
}

declare -A RESULTS
# One measurement: print it, stop on errors, keep its rps under KEY.
record() {
    local round=$1 key=$2 label=$3 url=$4 rps errors non2xx
    read -r rps errors non2xx < <(measure "$url")
    printf 'round %s  %-17s %s rps  socket errors %s  non-2xx %s\n' "$round" "$label" "$rps" "$errors" "$non2xx"
    check "$label" "$errors" "$non2xx"
    RESULTS[$key]+="$rps "
}

for round in $(seq 1 "$ROUNDS"); do
    run_ours --upstream "http://127.0.0.1:$NGINX_PORT/status"
    record "$round" io_ours "ours /io" "http://127.0.0.1:$OURS_PORT/io"
    stop_ours
    record "$round" io_nginx "nginx /status" "http://127.0.0.1:$NGINX_PORT/status"

    run_ours --static-dir "$WORK/www"
    record "$round" static_ours "ours static" "http://127.0.0.1:$OURS_PORT/v1-user.json"
    stop_ours
    record "$round" static_nginx "nginx static" "http://127.0.0.1:$NGINX_PORT/v1-user.json"
done

echo
echo "wrk $WRK_ARGS -d${DURATION}s, $ROUNDS rounds alternating, medians"
for case in io static; do
    ours=$(tr ' ' '\n' <<<"${RESULTS[${case}_ours]}" | grep . | median)
    nginx=$(tr ' ' '\n' <<<"${RESULTS[${case}_nginx]}" | grep . | median)
    awk -v c="$case" -v o="$ours" -v n="$nginx" \
        'BEGIN { printf "%-7s ours %8d rps   nginx %8d rps   ours/nginx %.2f\n", c, o, n, o / n }'
done
