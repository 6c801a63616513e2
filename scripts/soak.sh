#!/usr/bin/env bash
# scripts/soak.sh: a soak run of the release server on 127.0.0.1.
#
# Builds the release binary, raises the open-files limit, starts one server
# and runs three phases against it, each for --duration seconds:
#   a. wrk -t10 -c1000 --latency: req/s, socket errors, server RSS each second
#   b. 10,000 keep-alive connections held (hold_connections.py), each sending
#      GET / about every 10 s: errors, and the server's RSS with them open
#   c. wrk -t4 -c128 alone, then again beside 500 slowloris connections
#      (slowloris.py): the throughput ratio, and that the header timeout
#      closed every slowloris connection with a 408
# then stops the server with SIGTERM and checks that it exits 0. Prints a
# result line per phase and a summary; exits 1 if any criterion fails.
set -euo pipefail

PROG=$(basename "$0")
REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$REPO_DIR/scripts
BIN=$REPO_DIR/target/release/uppercut-mio-server

DISPATCH=local
DURATION=60
PORT=19500
HEADER_TIMEOUT=10s
CONNS=10000
SLOW=500
QUICK=0
IDLE_RSS_LIMIT_KB=$((64 * 1024)) # 64 MiB for CONNS idle keep-alive connections
RSS_GROWTH=1.10                  # phase a: end RSS <= 1.10 x RSS after 5 s
RATIO_MIN=0.90                   # phase c: rps with slowloris / rps alone

usage() {
    cat <<EOF
Usage: $PROG [--dispatch local|system] [--duration SECONDS] [--port PORT] [--quick]
             [--header-timeout T] [--connections N] [--slowloris N]

Soak run against one release server on 127.0.0.1:PORT; each of the three
phases lasts SECONDS (default 60).

  --dispatch MODE     the server's --dispatch (default local)
  --duration SECONDS  length of each phase, at least 10 (default 60)
  --quick             a smoke run: --duration 10
  --port PORT         the server's port (default 19500)
  --header-timeout T  the server's --header-timeout, e.g. 10s, 500ms, 1m (default 10s)
  --connections N     keep-alive connections held in phase b (default 10000)
  --slowloris N       slowloris connections in phase c (default 500)
  --help, -h          show this help

Criteria: a. no socket errors or non-2xx, end RSS <= $RSS_GROWTH x RSS after 5 s;
b. all N connected, 0 errors, RSS with N open <= 64 MiB; c. rps with slowloris
>= $RATIO_MIN x rps alone, every slowloris connection closed by the server with a
408 at T-0.5..T+2 s; and the server exits 0 on SIGTERM.
EOF
}

# shellcheck source=scripts/messages.sh
. "$(dirname "$0")/messages.sh"
say() { printf '%s\n' "$@"; } # unlike messages.sh's: one line per argument

while (($#)); do
    if [[ $1 == --*=* ]]; then set -- "${1%%=*}" "${1#*=}" "${@:2}"; fi
    case $1 in
    -h | --help)
        usage
        exit 0
        ;;
    --quick) QUICK=1 ;;
    --dispatch | --duration | --port | --header-timeout | --connections | --slowloris)
        (($# >= 2)) || usage_error "$1 needs a value"
        case $1 in
        --dispatch) DISPATCH=$2 ;;
        --duration) DURATION=$2 ;;
        --port) PORT=$2 ;;
        --header-timeout) HEADER_TIMEOUT=$2 ;;
        --connections) CONNS=$2 ;;
        --slowloris) SLOW=$2 ;;
        esac
        shift
        ;;
    *) usage_error "unknown argument '$1'" ;;
    esac
    shift
done
((QUICK)) && DURATION=10
[[ $DISPATCH == local || $DISPATCH == system ]] || usage_error "--dispatch wants local or system"
for value in "$DURATION" "$PORT" "$CONNS" "$SLOW"; do
    [[ $value =~ ^[1-9][0-9]*$ ]] || usage_error "not a positive number: '$value'"
done
((DURATION >= 10)) || usage_error "--duration must be at least 10"
((PORT >= 1024 && PORT <= 65535)) || usage_error "--port must be 1024..65535"
[[ $HEADER_TIMEOUT =~ ^([0-9]+)(ms|s|m)$ ]] || usage_error "--header-timeout wants e.g. 10s, 500ms, 2m"
HT_SECONDS=$(awk -v n="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[2]}" \
    'BEGIN { print (u == "ms") ? n / 1000 : (u == "m") ? n * 60 : n }')

for tool in wrk python3 cargo awk; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
! port_busy "$PORT" || die "127.0.0.1:$PORT is already in use; try --port"

# ------------------------------------------------------------- limits --

# Raise the hard limit first (works as root with CAP_SYS_RESOURCE), then the
# soft one as far as the hard one goes; the server and clients inherit it.
nr_open=$(cat /proc/sys/fs/nr_open 2>/dev/null || echo 1048576)
hard_wanted=$((nr_open < 1048576 ? nr_open : 1048576))
if [[ $(ulimit -Hn) != unlimited ]] && (($(ulimit -Hn) < hard_wanted)); then
    ulimit -Hn "$hard_wanted" 2>/dev/null || true
fi
ulimit -Sn "$(ulimit -Hn)"
NOFILE=$(ulimit -Sn)
need=$((CONNS + SLOW + 1000 + 256))
[[ $NOFILE == unlimited ]] || ((NOFILE >= need)) ||
    die "open-files limit is $NOFILE (hard $(ulimit -Hn)); the server needs about $need"

# ------------------------------------------------------------ cleanup --

TMP=$(mktemp -d "${TMPDIR:-/tmp}/soak.XXXXXX")
SERVER_PID=""
BG_PIDS=()
stop_pid() { # stop_pid PID: SIGTERM, up to 5 s, then SIGKILL
    local pid=$1
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local rc=$? pid
    trap - EXIT INT TERM
    for pid in "${BG_PIDS[@]}"; do stop_pid "$pid"; done
    [[ -z $SERVER_PID ]] || stop_pid "$SERVER_PID"
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# bg CMD...: start CMD in the background, remembered for cleanup; sets BG.
bg() {
    "$@" &
    BG=$!
    BG_PIDS+=("$BG")
}
# finish PID: wait for a bg process and forget it; sets RC to its status.
finish() {
    local pid=$1 keep=() p
    if wait "$pid"; then RC=0; else RC=$?; fi
    for p in "${BG_PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
    BG_PIDS=("${keep[@]}")
}
# wait_for_line FILE REGEX PID SECONDS: until a line of FILE matches, or fail.
wait_for_line() {
    local file=$1 regex=$2 pid=$3 limit=$(($4 * 10)) i
    for ((i = 0; i < limit; i++)); do
        grep -Eq "$regex" "$file" 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    grep -Eq "$regex" "$file" 2>/dev/null && return 0
    cat "$file" >&2
    die "no line matching '$regex' from process $pid within $4 s"
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
rss_kb() { # rss_kb PID: VmRSS in KiB, 0 if gone
    local key value _
    while read -r key value _; do
        if [[ $key == VmRSS: ]]; then
            printf '%s\n' "$value"
            return 0
        fi
    done <"/proc/$1/status" 2>/dev/null || true
    echo 0
}
# sample_rss OUT SECONDS: "unix-time rss-KiB" each second, at most SECONDS.
sample_rss() {
    local out=$1 count=$2 i
    for ((i = 0; i < count; i++)); do
        printf '%s %s\n' "$EPOCHREALTIME" "$(rss_kb "$SERVER_PID")" >>"$out"
        sleep 1
    done
}
# alive WHEN: fail at once if the server is gone.
alive() {
    kill -0 "$SERVER_PID" 2>/dev/null ||
        die "the server exited $1:"$'\n'"$(tail -n 20 "$TMP/server.log")"
}
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
# rss_summary FILE: sets RSS_START RSS_5S RSS_MAX RSS_END (KiB).
rss_summary() {
    read -r RSS_START RSS_5S RSS_MAX RSS_END < <(awk '
        NR == 1 { t0 = $1; start = $2; max = $2 }
        { if ($2 > max) max = $2; end = $2 }
        at5 == "" && $1 - t0 >= 4.9 { at5 = $2 }
        END { if (at5 == "") at5 = end; print start, at5, max, end }' "$1")
}
# wrk_stats FILE: sets RPS SOCK_ERRORS NON2XX.
wrk_stats() {
    RPS=$(awk '/^Requests\/sec:/ { print $2 }' "$1")
    [[ -n $RPS ]] || die "no Requests/sec in wrk's output: $(cat "$1")"
    SOCK_ERRORS=$(awk '/Socket errors:/ { gsub(",", ""); print $4 + $6 + $8 + $10 }' "$1")
    SOCK_ERRORS=${SOCK_ERRORS:-0}
    NON2XX=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$1")
    NON2XX=${NON2XX:-0}
}
# result_field FILE KEY: KEY's value on the RESULT line of FILE.
result_field() {
    awk -v k="$2" '/^RESULT / { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' "$1"
}
# run_wrk OUT ARGS...: wrk in the background (so traps fire at once), shown indented.
run_wrk() {
    local out=$1
    shift
    say "  \$ wrk $*"
    bg wrk "$@" >"$out" 2>&1
    finish "$BG"
    sed 's/^/    | /' "$out"
    ((RC == 0)) || die "wrk exited $RC"
}

FAILS=()
# verdict AWK-EXPR DESCRIPTION: VERDICT=PASS if the expression holds, else
# VERDICT=FAIL and DESCRIPTION joins the failed criteria.
verdict() {
    if awk "BEGIN { exit !($1) }"; then
        VERDICT=PASS
    else
        VERDICT=FAIL
        FAILS+=("$2")
    fi
}

URL="http://127.0.0.1:$PORT/"
LOAD_START=$(loadavg)
say "== soak: dispatch $DISPATCH, $DURATION s per phase, header-timeout $HEADER_TIMEOUT, port $PORT"
say "   $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, load average at start: $LOAD_START"
say "   open-files limit: soft $NOFILE, hard $(ulimit -Hn) (fs.nr_open $nr_open)"
say "   ephemeral ports: $(tr '\t' '-' </proc/sys/net/ipv4/ip_local_port_range)"

say "== build: nice cargo build --release"
(cd "$REPO_DIR" && nice -n 10 cargo build --release) >"$TMP/build.log" 2>&1 ||
    die "cargo build --release failed:"$'\n'"$(tail -n 30 "$TMP/build.log")"
tail -n 1 "$TMP/build.log"

"$BIN" --bind "127.0.0.1:$PORT" --dispatch "$DISPATCH" --header-timeout "$HEADER_TIMEOUT" \
    >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
wait_for_line "$TMP/server.log" '^listening on' "$SERVER_PID" 10
say "== server $SERVER_PID: $(head -n 1 "$TMP/server.log")"
say "   limits: $(grep 'Max open files' "/proc/$SERVER_PID/limits" | tr -s ' ')"
say "   RSS at start: $(mib "$(rss_kb "$SERVER_PID")") MiB"

# ------------------------------------------- phase a: wrk -c1000 ------

say "" "== phase a: wrk -t10 -c1000 -d${DURATION}s --latency (load $(loadavg))"
bg sample_rss "$TMP/rss-a.txt" $((DURATION + 2))
SAMPLER=$BG
run_wrk "$TMP/wrk-a.txt" -t10 -c1000 "-d${DURATION}s" --latency "$URL"
stop_pid "$SAMPLER"
finish "$SAMPLER"
alive "during phase a"
wrk_stats "$TMP/wrk-a.txt"
rss_summary "$TMP/rss-a.txt"
A_RPS=$RPS
A_ERRORS="socket errors $SOCK_ERRORS, non-2xx $NON2XX"
A_RSS="RSS start $(mib "$RSS_START") / after 5 s $(mib "$RSS_5S") / max $(mib "$RSS_MAX") / end $(mib "$RSS_END") MiB"
verdict "$SOCK_ERRORS == 0 && $NON2XX == 0" "a: $A_ERRORS (want 0)"
a_ok=$VERDICT
verdict "$RSS_END <= $RSS_GROWTH * $RSS_5S" "a: RSS not flat: end $(mib "$RSS_END") MiB > $RSS_GROWTH x $(mib "$RSS_5S") MiB"
flat=$VERDICT
A_LINE="a  wrk -c1000: $A_RPS req/s, $A_ERRORS [$a_ok]; $A_RSS, flat (end <= $RSS_GROWTH x after 5 s) [$flat]"
say "$A_LINE"

# ----------------------------------- phase b: 10,000 held connections --

say "" "== phase b: $CONNS keep-alive connections for ${DURATION}s, GET / every ~10 s each (load $(loadavg))"
RSS_BEFORE_B=$(rss_kb "$SERVER_PID")
bg sample_rss "$TMP/rss-b.txt" $((DURATION + 120))
SAMPLER=$BG
bg python3 "$SCRIPTS/hold_connections.py" "$CONNS" "$DURATION" "127.0.0.1:$PORT" >"$TMP/hold.txt" 2>&1
HOLD=$BG
wait_for_line "$TMP/hold.txt" '^READY' "$HOLD" 90
sleep 1
RSS_OPEN=$(rss_kb "$SERVER_PID")
FDS_OPEN=$(find "/proc/$SERVER_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
say "  with $CONNS connections open (1 s after READY): server RSS $(mib "$RSS_OPEN") MiB, $FDS_OPEN open fds"
finish "$HOLD"
HOLD_RC=$RC
alive "during phase b"
sleep 2 # one more sample after the clients closed
stop_pid "$SAMPLER"
finish "$SAMPLER"
sed 's/^/    | /' "$TMP/hold.txt"
rss_summary "$TMP/rss-b.txt"
B_EST=$(result_field "$TMP/hold.txt" established)
B_ANS=$(result_field "$TMP/hold.txt" answered)
B_ERR=$(result_field "$TMP/hold.txt" errors)
B_KINDS=""
for kind in connect_failed connect_timeout reset closed bad timeout; do
    B_KINDS+="${B_KINDS:+, }$kind $(result_field "$TMP/hold.txt" "$kind")"
done
[[ -n $B_EST && -n $B_ANS && -n $B_ERR ]] || die "no RESULT line from hold_connections.py (exit $HOLD_RC)"
per_conn=$(awk -v a="$RSS_OPEN" -v b="$RSS_BEFORE_B" -v n="$CONNS" 'BEGIN { printf "%.1f", (a - b) / n }')
verdict "$B_EST == $CONNS && $B_ERR == 0" "b: established $B_EST of $CONNS, errors $B_ERR (want all, 0)"
b_ok=$VERDICT
verdict "$RSS_OPEN > 0 && $RSS_OPEN <= $IDLE_RSS_LIMIT_KB" "b: RSS with $CONNS open $(mib "$RSS_OPEN") MiB > $(mib "$IDLE_RSS_LIMIT_KB") MiB"
b_rss=$VERDICT
B_LINE="b  $CONNS conns: established $B_EST, answered $B_ANS, errors $B_ERR ($B_KINDS) [$b_ok]; RSS with $CONNS open $(mib "$RSS_OPEN") MiB (<= $(mib "$IDLE_RSS_LIMIT_KB") MiB; $FDS_OPEN server fds) [$b_rss], ~$per_conn KiB/conn over the $(mib "$RSS_BEFORE_B") MiB before; RSS start $(mib "$RSS_START") / max $(mib "$RSS_MAX") / end $(mib "$RSS_END") MiB"
say "$B_LINE"

# ------------------------------------------------ phase c: slowloris --

say "" "== phase c1: baseline wrk -t4 -c128 -d${DURATION}s alone (load $(loadavg))"
run_wrk "$TMP/wrk-c1.txt" -t4 -c128 "-d${DURATION}s" "$URL"
alive "during phase c1"
wrk_stats "$TMP/wrk-c1.txt"
C_BASE=$RPS
C1_ERR=$((SOCK_ERRORS + NON2XX))

slow_seconds=$(awk -v d="$DURATION" -v t="$HT_SECONDS" 'BEGIN { s = d + 3; if (t + 5 > s) s = t + 5; print s }')
say "" "== phase c2: $SLOW slowloris connections for ${slow_seconds}s, same wrk once they are open (load $(loadavg))"
bg python3 "$SCRIPTS/slowloris.py" "$SLOW" "$slow_seconds" "127.0.0.1:$PORT" \
    --header-timeout "$HT_SECONDS" >"$TMP/slow.txt" 2>&1
SLOWPID=$BG
wait_for_line "$TMP/slow.txt" '^READY' "$SLOWPID" 30
run_wrk "$TMP/wrk-c2.txt" -t4 -c128 "-d${DURATION}s" "$URL"
wrk_stats "$TMP/wrk-c2.txt"
C_SLOW=$RPS
C2_ERR=$((SOCK_ERRORS + NON2XX))
finish "$SLOWPID"
SLOW_RC=$RC
alive "during phase c2"
sed 's/^/    | /' "$TMP/slow.txt"
[[ -n $(result_field "$TMP/slow.txt" opened) ]] || die "no RESULT line from slowloris.py (exit $SLOW_RC)"
s() { result_field "$TMP/slow.txt" "$1"; }
RATIO=$(awk -v a="$C_SLOW" -v b="$C_BASE" 'BEGIN { printf "%.3f", a / b }')
verdict "$RATIO >= $RATIO_MIN" "c: rps ratio $RATIO < $RATIO_MIN ($C_SLOW with slowloris vs $C_BASE alone)"
c_ratio=$VERDICT
verdict "$C1_ERR == 0 && $C2_ERR == 0" "c: wrk errors: $C1_ERR alone, $C2_ERR with slowloris"
c_err=$VERDICT
verdict "$SLOW_RC == 0" "c: slowloris: $(grep PROBLEM "$TMP/slow.txt" | sed 's/^ *PROBLEM: //' | paste -sd ';' -)"
c_slow=$VERDICT
C_LINE1="c  wrk -c128: $C_BASE req/s alone, $C_SLOW with $SLOW slowloris: ratio $RATIO (>= $RATIO_MIN) [$c_ratio], wrk errors $C1_ERR/$C2_ERR [$c_err]"
C_LINE2="c  slowloris: opened $(s opened), closed by server $(s closed_by_server), got 408 $(s got_408), other status $(s other_status), connect failures $(s connect_failed), still open at end $(s still_open) (overdue $(s overdue)); time to close min/median/max $(s ttc_min)/$(s ttc_median)/$(s ttc_max) s (want $(awk -v t="$HT_SECONDS" 'BEGIN { print t - 0.5 ".." t + 2 }') s) [$c_slow]"
say "$C_LINE1" "$C_LINE2"

# ------------------------------------------------------------ shutdown --

say "" "== stopping server $SERVER_PID with SIGTERM"
t_term=$EPOCHREALTIME
kill -TERM "$SERVER_PID" 2>/dev/null || true
for _ in $(seq 300); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    SERVER_RC=killed
fi
if wait "$SERVER_PID"; then SERVER_RC=${SERVER_RC:-0}; else SERVER_RC=${SERVER_RC:-$?}; fi
SERVER_PID=""
drain=$(awk -v a="$t_term" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
verdict "\"$SERVER_RC\" == \"0\"" "server: exit status $SERVER_RC after SIGTERM (want 0)"
S_LINE="server: exit status $SERVER_RC after SIGTERM, exited in $drain s [$VERDICT]"
if [[ -s $TMP/server.log ]] && (($(wc -l <"$TMP/server.log") > 1)); then
    say "server log (last lines):"
    tail -n 5 "$TMP/server.log" | sed 's/^/    | /'
fi

LOAD_END=$(loadavg)
say "" "== summary: dispatch $DISPATCH, $DURATION s per phase, header-timeout $HEADER_TIMEOUT"
say "load average: start $LOAD_START, end $LOAD_END ($(nproc) cores, shared)"
say "$A_LINE" "$B_LINE" "$C_LINE1" "$C_LINE2" "$S_LINE"
if ((${#FAILS[@]})); then
    say "FAIL: ${#FAILS[@]} criteria failed:"
    for f in "${FAILS[@]}"; do say "  - $f"; done
    exit 1
fi
say "PASS: every criterion met"
