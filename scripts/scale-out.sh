#!/usr/bin/env bash
# scripts/scale-out.sh: the load-balancer setup of cloud-setup.sh, on one box.
#
# Starts two server instances on loopback ports and a private nginx in front
# of them whose upstream/server config is exactly what
# `cloud-setup.sh balancer --print-config` writes on a real balancer. Sends
# 1,000 requests through nginx and counts, from nginx's own access log
# ($upstream_addr), how many each backend served. With --wrk it also compares
# throughput through nginx with throughput straight to one backend.
#
# With --cluster the two backends are nodes a and b of a cluster over a
# private nats-server (its config is what `cloud-setup.sh nats
# --print-config` writes, with a user and a random password), node b
# answering /count from node a's counter (--actor-route /count=counter@a).
# It checks that two WebSocket members of /chat connected through nginx
# land on different backends and both hear exactly what one of them says,
# and that requests to /count through nginx, served by both backends, count
# 1, 2, 3, ... with no gap and no repeat.
#
# Everything lives in a temp dir and is stopped and removed on exit; the
# system nginx and nats-server (if any) are not touched.
set -euo pipefail

PROG=$(basename "$0")
REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

REQUESTS=1000
RUN_WRK=0
CLUSTER=0
NATS_PASSWORD=""
NATS_URL=""
BASE_PORT=${BASE_PORT:-9300}
# Server to start; {addr} becomes 127.0.0.1:PORT. SERVER_CMD wins over
# SERVER_BIN; both are split on whitespace (no quoting inside).
SERVER_BIN=${SERVER_BIN:-$REPO_DIR/target/release/uppercut-mio-server}
# Whether the caller gave one (--cluster cannot run it).
SERVER_CMD_SET=${SERVER_CMD:+1}
default_cmd="$SERVER_BIN --bind {addr}"
SERVER_CMD=${SERVER_CMD:-$default_cmd}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
NATS_SERVER=${NATS_SERVER:-$(command -v nats-server || echo /usr/sbin/nats-server)}

usage() {
    cat <<EOF
Usage: $PROG [--wrk] [--requests N] [--base-port PORT]
       $PROG --cluster [--requests N] [--base-port PORT]

Two backends on 127.0.0.1:PORT+1 and :PORT+2, nginx on 127.0.0.1:PORT
(PORT defaults to 9300), N requests through nginx (default 1000); fails
unless every backend served a share.

  --wrk             also run wrk -t2 -c64 -d5s through nginx and directly
                    against the first backend, and print the ratio
  --cluster         the backends join a cluster as nodes a and b over a
                    private nats-server on :PORT+3 (monitoring :PORT+4;
                    the backends' /metrics on :PORT+5 and :PORT+6), node b
                    with --actor-route /count=counter@a. Instead of GET /:
                    two WebSocket members of /chat through nginx, on
                    different backends, must both hear exactly what one
                    says; N requests to /count through nginx, served by
                    both backends, must answer 1, 2, ..., N
  --requests N      how many requests to send through nginx
  --base-port PORT  nginx port; the backends take the next two
  --help, -h        show this help

Environment:
  SERVER_BIN   server binary (default target/release/uppercut-mio-server),
               started as "\$SERVER_BIN --bind {addr}"
  SERVER_CMD   full server command instead, {addr} = 127.0.0.1:PORT,
               e.g. SERVER_CMD='/path/to/rawmio {addr} 1'
  NGINX        nginx binary (default: nginx on PATH, else /usr/sbin/nginx)
  NATS_SERVER  nats-server binary for --cluster (default: nats-server on
               PATH, else /usr/sbin/nats-server); --cluster runs SERVER_BIN
               and refuses SERVER_CMD
EOF
}

# shellcheck source=scripts/messages.sh
. "$(dirname "$0")/messages.sh"

while (($#)); do
    if [[ $1 == --*=* ]]; then set -- "${1%%=*}" "${1#*=}" "${@:2}"; fi
    case $1 in
    -h | --help)
        usage
        exit 0
        ;;
    --wrk) RUN_WRK=1 ;;
    --cluster) CLUSTER=1 ;;
    --requests | --base-port)
        (($# >= 2)) || usage_error "$1 needs a value"
        [[ $2 =~ ^[1-9][0-9]*$ ]] || usage_error "$1 wants a positive number, got '$2'"
        if [[ $1 == --requests ]]; then REQUESTS=$2; else BASE_PORT=$2; fi
        shift
        ;;
    *) usage_error "unknown argument '$1'" ;;
    esac
    shift
done
if ((CLUSTER)); then
    ((!RUN_WRK)) || usage_error "--wrk and --cluster: one or the other"
    [[ -z $SERVER_CMD_SET ]] || usage_error "--cluster runs SERVER_BIN; unset SERVER_CMD"
fi
# nginx, two backends, and with --cluster NATS, its monitoring and two
# metrics listeners.
PORTS_USED=$((CLUSTER ? 7 : 3))
if ! [[ $BASE_PORT =~ ^[0-9]+$ ]] || ((BASE_PORT < 1024 || BASE_PORT > 65536 - PORTS_USED)); then
    usage_error "base port must be 1024..$((65536 - PORTS_USED)), got '$BASE_PORT'"
fi

LB_PORT=$BASE_PORT
BACKEND_PORTS=("$((BASE_PORT + 1))" "$((BASE_PORT + 2))")
LB_URL="http://127.0.0.1:$LB_PORT/"
NATS_PORT=$((BASE_PORT + 3))
NATS_MONITOR_PORT=$((BASE_PORT + 4))
METRICS_PORTS=("$((BASE_PORT + 5))" "$((BASE_PORT + 6))")
NODES=(a b)

[[ -x $NGINX ]] || die "nginx not found: sudo apt-get install nginx-light (or ./cloud-setup.sh balancer ...)"
command -v curl >/dev/null 2>&1 || die "curl not found"
if ((RUN_WRK)); then command -v wrk >/dev/null 2>&1 || die "wrk not found: ./cloud-setup.sh client --target 127.0.0.1"; fi
if ((CLUSTER)); then
    [[ -x $NATS_SERVER ]] || die "nats-server not found: sudo apt-get install nats-server (or set NATS_SERVER)"
    command -v python3 >/dev/null 2>&1 || die "python3 not found (for the WebSocket members)"
fi
first_word=${SERVER_CMD%% *}
[[ -x $first_word ]] || command -v "$first_word" >/dev/null 2>&1 ||
    die "server '$first_word' not found: cargo build --release, or set SERVER_BIN / SERVER_CMD"

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for ((port = BASE_PORT; port < BASE_PORT + PORTS_USED; port++)); do
    ! port_busy "$port" || die "127.0.0.1:$port is already in use; try --base-port"
done

# ------------------------------------------------------------ cleanup --

TMP=$(mktemp -d "${TMPDIR:-/tmp}/scale-out.XXXXXX")
# nginx workers may run as another user when we are root: let them in.
chmod 755 "$TMP"
PIDS=()
NGINX_PID=""
NATS_PID=""
cleanup() {
    local rc=$? pid log
    trap - EXIT INT TERM
    if ((rc == 1)); then
        # A failed check: what the processes said is the first thing to read.
        for log in "$TMP"/*.log "$TMP"/logs/error.log; do
            [[ -s $log ]] || continue
            printf '\n--- last lines of %s\n' "${log##*/}" >&2
            tail -n 15 "$log" >&2
        done
    fi
    if [[ -n $NGINX_PID ]]; then
        # QUIT = graceful stop; the master takes its workers with it.
        kill -QUIT "$NGINX_PID" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$NGINX_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$NGINX_PID" 2>/dev/null || true
        wait "$NGINX_PID" 2>/dev/null || true
    fi
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    # NATS last, so the servers leave it in order.
    if [[ -n $NATS_PID ]]; then
        kill -TERM "$NATS_PID" 2>/dev/null || true
        wait "$NATS_PID" 2>/dev/null || true
    fi
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_http URL PID LOG: wait up to 10 s for URL to answer 200, or fail early
# if PID died (showing LOG).
wait_http() {
    local url=$1 pid=$2 log=$3
    for _ in $(seq 100); do
        curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null && return 0
        if ! kill -0 "$pid" 2>/dev/null; then
            cat "$log" >&2
            die "process $pid exited before $url answered"
        fi
        sleep 0.1
    done
    cat "$log" >&2
    die "$url did not answer within 10 s"
}

# metric URL NAME: the value of the sample NAME (labels included, exactly
# as on the page) on the /metrics page at URL; empty if it is not there.
metric() {
    curl -fsS --max-time 2 "$1" 2>/dev/null | awk -v name="$2" '$1 == name { print $2; exit }'
}

# --------------------------------------------------------------- NATS --

if ((CLUSTER)); then
    mkdir -p "$TMP/conf"
    # A password for this run only: the servers log in as a real cluster's would.
    NATS_PASSWORD=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
    # The exact config a real NATS box gets; monitoring moved to our port.
    NATS_PASSWORD=$NATS_PASSWORD "$REPO_DIR/cloud-setup.sh" nats --print-config \
        --listen "127.0.0.1:$NATS_PORT" --user scale-out >"$TMP/conf/nats.conf"
    NATS_URL="nats://scale-out:$NATS_PASSWORD@127.0.0.1:$NATS_PORT"
    say "nats:    $NATS_SERVER -c $TMP/conf/nats.conf -m $NATS_MONITOR_PORT  (clients on 127.0.0.1:$NATS_PORT)"
    "$NATS_SERVER" -c "$TMP/conf/nats.conf" -m "$NATS_MONITOR_PORT" >"$TMP/nats.log" 2>&1 &
    NATS_PID=$!
    wait_http "http://127.0.0.1:$NATS_MONITOR_PORT/varz" "$NATS_PID" "$TMP/nats.log"
fi

# ----------------------------------------------------------- backends --

i=0
for port in "${BACKEND_PORTS[@]}"; do
    read -r -a cmd <<<"${SERVER_CMD//\{addr\}/127.0.0.1:$port}"
    if ((CLUSTER)); then
        cmd+=(--metrics "127.0.0.1:${METRICS_PORTS[$i]}" --nats "$NATS_URL" --node "${NODES[$i]}")
        # Node b's /count is node a's counter: one count for the cluster.
        ((i == 0)) || cmd+=(--actor-route /count=counter@a)
    fi
    shown="${cmd[*]}"
    say "backend: ${shown//$NATS_PASSWORD/***}"
    "${cmd[@]}" >"$TMP/backend-$port.log" 2>&1 &
    PIDS+=("$!")
    i=$((i + 1))
done
i=0
for port in "${BACKEND_PORTS[@]}"; do
    wait_http "http://127.0.0.1:$port/" "${PIDS[$i]}" "$TMP/backend-$port.log"
    i=$((i + 1))
done
if ((CLUSTER)); then
    # Joined: every poller of each backend connected and subscribed.
    for i in 0 1; do
        url="http://127.0.0.1:${METRICS_PORTS[$i]}/metrics"
        for _ in $(seq 100); do
            [[ $(metric "$url" uppercut_nats_connected) == 1 ]] && break
            sleep 0.1
        done
        [[ $(metric "$url" uppercut_nats_connected) == 1 ]] ||
            die "node ${NODES[$i]} did not connect to NATS within 10 s"
        say "node ${NODES[$i]} joined ($(metric "$url" uppercut_nats_links_up) pollers connected to NATS)"
    done
fi

# -------------------------------------------------------------- nginx --

mkdir -p "$TMP/conf" "$TMP/logs" "$TMP/tmp"
backend_args=()
for port in "${BACKEND_PORTS[@]}"; do backend_args+=(--backend "127.0.0.1:$port"); done
# The exact config a real balancer gets, ports swapped in.
"$REPO_DIR/cloud-setup.sh" balancer --print-config --listen "127.0.0.1:$LB_PORT" \
    "${backend_args[@]}" >"$TMP/conf/balancer.conf"

# Temp paths default to /var/lib/nginx (root only); point every one the
# build has a module for into the temp dir.
nginx_build=$("$NGINX" -V 2>&1)
temp_paths="    client_body_temp_path $TMP/tmp/body;"
for mod in proxy fastcgi uwsgi scgi; do
    [[ $nginx_build == *"--without-http_${mod}_module"* ]] && continue
    temp_paths+=$'\n'"    ${mod}_temp_path $TMP/tmp/$mod;"
done

# --cluster: each answer names the backend that served it, so that the
# WebSocket members can tell where they landed (nginx balances each worker
# on its own, so two connections in a row may go to the same backend).
upstream_header=""
if ((CLUSTER)); then
    upstream_header="    add_header X-Upstream \$upstream_addr always;"
fi

cat >"$TMP/conf/nginx.conf" <<EOF
# Private nginx for scripts/scale-out.sh; all of its files are in $TMP.
daemon off;
worker_processes auto;
pid $TMP/nginx.pid;
error_log $TMP/logs/error.log warn;

events {
    worker_connections 4096;
}

http {
$temp_paths
    # Which backend served each request. Only curl's requests are logged,
    # so logging does not slow down the wrk comparison.
    log_format upstream '\$upstream_addr \$status';
    map \$http_user_agent \$from_curl {
        ~^curl/ 1;
        default 0;
    }
    access_log $TMP/logs/access.log upstream if=\$from_curl;
$upstream_header

    include $TMP/conf/balancer.conf;
}
EOF

nginx_args=(-p "$TMP" -c "$TMP/conf/nginx.conf")
# -e (nginx >= 1.19.5) keeps nginx off the system error log before it has
# read our config; older builds just warn.
if "$NGINX" -h 2>&1 | grep -q -- '-e filename'; then nginx_args+=(-e "$TMP/logs/error.log"); fi
"$NGINX" -t "${nginx_args[@]}" 2>"$TMP/nginx-t.log" || {
    cat "$TMP/nginx-t.log" >&2
    die "nginx rejected the config"
}
say "nginx:   $NGINX ${nginx_args[*]}  (listening on 127.0.0.1:$LB_PORT)"
"$NGINX" "${nginx_args[@]}" >"$TMP/logs/nginx.out" 2>&1 &
NGINX_PID=$!
wait_http "$LB_URL" "$NGINX_PID" "$TMP/logs/error.log"
# The readiness probe was a request too; count only what follows.
: >"$TMP/logs/access.log"

# served: requests per backend, from nginx's access log. One line per
# request: "<upstream_addr> <status>"; after a retry the field lists several
# addresses ("a, b"), and the last one served the request.
declare -A served=()
tally() {
    local line addr
    served=()
    while read -r line; do
        addr=${line% *}
        addr=${addr##*, }
        served[$addr]=$((${served[$addr]:-0} + 1))
    done <"$TMP/logs/access.log"
}

# shares TOTAL: prints the requests per backend; missing = how many served none.
missing=0
shares() {
    local port count
    tally
    say ""
    say "Requests per backend (from nginx's \$upstream_addr):"
    missing=0
    for port in "${BACKEND_PORTS[@]}"; do
        count=${served["127.0.0.1:$port"]:-0}
        say "$(printf '  127.0.0.1:%-6s %6d  (%5.1f%%)' "$port" "$count" "$(awk -v c="$count" -v t="$1" 'BEGIN { print 100 * c / t }')")"
        ((count > 0)) || missing=$((missing + 1))
    done
}

# sum_of PAGE PREFIX: the sum of every sample whose name and labels start
# with PREFIX in the /metrics PAGE (its text).
sum_of() {
    awk -v p="$2" 'index($1, p) == 1 { n += $2 } END { print n + 0 }' <<<"$1"
}

# value_of PAGE NAME: the value of the sample NAME (labels included, exactly
# as on the page) in the /metrics PAGE; empty if it is not there.
value_of() {
    awk -v name="$2" '$1 == name { print $2; exit }' <<<"$1"
}

# ----------------------------------------------------- cluster checks --

if ((CLUSTER)); then
    say ""
    say "Chat: two WebSocket members of /chat through nginx, one says something..."
    chat_ok=1
    python3 "$REPO_DIR/scripts/ws_chat.py" "127.0.0.1:$LB_PORT" --path /chat \
        --subscribers "http://127.0.0.1:$NATS_MONITOR_PORT" upc.t.chat >"$TMP/chat.txt" 2>&1 || chat_ok=0
    sed 's/^/  /' "$TMP/chat.txt"
    ((chat_ok)) || die "chat: the members did not both hear exactly the message (above)"

    # Only /count from here on.
    : >"$TMP/logs/access.log"
    say ""
    say "Counter: $REQUESTS requests to /count through nginx..."
    wrong=0
    first_wrong=""
    for ((n = 1; n <= REQUESTS; n++)); do
        rm -f "$TMP/count.txt"
        code=$(curl -s -o "$TMP/count.txt" -w '%{http_code}' --max-time 5 "${LB_URL}count") || true
        body=$(cat "$TMP/count.txt" 2>/dev/null || true)
        if [[ $code != 200 || $body != "$n" ]]; then
            wrong=$((wrong + 1))
            [[ -n $first_wrong ]] || first_wrong="request $n got $code '$body', not 200 '$n'"
        fi
    done
    last=$body
    say "  the last answer was $last; $wrong of $REQUESTS were not the number they should be"
    shares "$REQUESTS"

    # What node b asked of node a went over NATS, once each.
    a_page=$(curl -fsS --max-time 2 "http://127.0.0.1:${METRICS_PORTS[0]}/metrics") ||
        die "cannot read node a's /metrics"
    b_page=$(curl -fsS --max-time 2 "http://127.0.0.1:${METRICS_PORTS[1]}/metrics") ||
        die "cannot read node b's /metrics"
    b_share=${served["127.0.0.1:${BACKEND_PORTS[1]}"]:-0}
    b_out=$(value_of "$b_page" 'uppercut_nats_messages_total{kind="request",direction="out"}')
    a_in=$(value_of "$a_page" 'uppercut_nats_messages_total{kind="request",direction="in"}')
    refused=$(($(sum_of "$a_page" uppercut_nats_refused_total) + $(sum_of "$b_page" uppercut_nats_refused_total)))
    dropped=$(($(sum_of "$a_page" uppercut_nats_dropped_total) + $(sum_of "$b_page" uppercut_nats_dropped_total)))
    say ""
    say "NATS: node b sent ${b_out:-?} requests, node a took ${a_in:-?}; refused $refused, dropped $dropped"

    say ""
    ((wrong == 0)) || die "counter: $first_wrong ($wrong of $REQUESTS wrong)"
    ((missing == 0)) || die "counter: $missing backend(s) served no /count request"
    [[ $b_out == "$b_share" && $a_in == "$b_share" ]] ||
        die "counter: node b served $b_share /count requests but sent ${b_out:-?} over NATS, and node a took ${a_in:-?}"
    ((refused == 0 && dropped == 0)) || die "NATS: $refused send(s) refused, $dropped message(s) dropped"
    say "OK: chat members on both backends heard exactly the one message; /count through"
    say "nginx answered 1 .. $REQUESTS in order from node a's counter, on both backends."
    exit 0
fi

# ---------------------------------------------------------- 1,000 GETs --

say ""
say "Sending $REQUESTS requests through nginx..."
ok=0
bad=0
for ((n = 0; n < REQUESTS; n++)); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$LB_URL") || true
    if [[ $code == 200 ]]; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
done
say "  $ok answered 200, $bad did not"
shares "$REQUESTS"

# ------------------------------------------------------ wrk comparison --

if ((RUN_WRK)); then
    # run_wrk URL NAME: a short wrk run, shown indented; RPS gets its rate.
    run_wrk() {
        say ""
        say "wrk -t2 -c64 -d5s $1   ($2)"
        wrk -t2 -c64 -d5s "$1" >"$TMP/wrk.txt"
        sed 's/^/    /' "$TMP/wrk.txt"
        RPS=$(awk '/^Requests\/sec:/ { print $2 }' "$TMP/wrk.txt")
        [[ -n $RPS ]] || die "no Requests/sec in wrk's output"
    }
    direct_url="http://127.0.0.1:${BACKEND_PORTS[0]}/"
    run_wrk "$LB_URL" "nginx over both backends"
    via_nginx=$RPS
    run_wrk "$direct_url" "first backend, no nginx"
    direct=$RPS
    say ""
    say "Requests/sec: nginx-fronted $via_nginx, direct $direct"
    say "Ratio nginx-fronted / direct: $(awk -v a="$via_nginx" -v b="$direct" 'BEGIN { printf "%.2f", a / b }')"
    say "(Everything shares this box's $(nproc) cores, so this measures the cost of"
    say " the proxy hop, not the gain of a second machine.)"
fi

say ""
if ((bad > 0)); then die "$bad of $REQUESTS requests through nginx failed"; fi
if ((missing > 0)); then die "$missing backend(s) served no request"; fi
say "OK: both backends served a share of the $REQUESTS requests."
