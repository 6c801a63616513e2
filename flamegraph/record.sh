#!/usr/bin/env bash
# flamegraph/record.sh: a CPU flamegraph of uppercut-mio-server under wrk load.
#
# Builds the release binary (the release profile keeps debug symbols), starts
# it on 127.0.0.1 with the chosen --dispatch mode, puts wrk load on it while
# `perf record` samples the server process, then folds the stacks and renders
# an SVG (inferno, or cargo-flamegraph's `flamegraph --perfdata`).
# The server, wrk and perf are stopped and temp files removed on any exit.
set -euo pipefail

PROG=$(basename "$0")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$HERE")

DISPATCH=local
DURATION=10
THREADS=4
CONNECTIONS=128
PORT=9399
FREQ=999
CALL_GRAPH=""
OUT=""
DRY_RUN=0
KEEP=0
TLS=0
# The server to profile; {addr}, {port} and {mode} are filled in. Overridable (env or
# --server-cmd) so the script can be tried on a stand-in server. It is split
# on whitespace, so no quoting inside.
DEFAULT_SERVER_CMD="$REPO_DIR/target/release/uppercut-mio-server --bind {addr} --dispatch {mode}"
SERVER_CMD=${SERVER_CMD:-$DEFAULT_SERVER_CMD}

usage() {
    cat <<EOF
Usage: $PROG [options]

Record a flamegraph of the server under wrk load; writes flamegraph/<mode>.svg.

Options:
  --dispatch local|system   server dispatch mode to profile (default local)
  --duration SECS           load and sampling time (default 10)
  --out FILE                SVG to write (default flamegraph/<mode>.svg)
  --threads N               wrk threads (default 4)
  --connections N           wrk connections (default 128)
  --port PORT               loopback port for the server (default 9399)
  --call-graph MODE         perf unwinding: fp (default, same as -g), dwarf, lbr
  --server-cmd CMD          server command, {addr} (127.0.0.1:PORT), {port}
                            and {mode} substituted;
                            also \$SERVER_CMD (default: the release binary
                            with --bind {addr} --dispatch {mode}); a custom
                            command skips the cargo build
  --tls                     profile the HTTPS path: a self-signed certificate
                            made with openssl, the server started with
                            --tls-cert/--tls-key, wrk on https://; writes
                            flamegraph/<mode>-tls.svg by default
  --keep                    keep perf.data and the folded stacks (prints where)
  --dry-run, -n             print the commands instead of running them
  --help, -h                show this help

Needs perf and wrk (cloud-setup.sh server installs them); installs inferno
with cargo when neither inferno nor cargo-flamegraph is there. As non-root,
needs kernel.perf_event_paranoid <= 1.
EOF
}

# shellcheck source=scripts/messages.sh
. "$(dirname "$0")/../scripts/messages.sh"
show_cmd() {
    local out="" arg
    for arg in "$@"; do
        if [[ $arg =~ ^[A-Za-z0-9_./:=@%+,{}-]+$ ]]; then out+="$arg "; else out+="'${arg//\'/\'\\\'\'}' "; fi
    done
    printf '%s' "${out% }"
}
# Show a step; in a dry run that is all it does.
run() {
    if ((DRY_RUN)); then
        say "[dry-run] $(show_cmd "$@")"
        return 0
    fi
    say "+ $(show_cmd "$@")"
    "$@"
}

while (($#)); do
    if [[ $1 == --*=* ]]; then set -- "${1%%=*}" "${1#*=}" "${@:2}"; fi
    case $1 in
    -h | --help)
        usage
        exit 0
        ;;
    -n | --dry-run) DRY_RUN=1 ;;
    --keep) KEEP=1 ;;
    --tls) TLS=1 ;;
    --dispatch | --duration | --out | --threads | --connections | --port | --call-graph | --server-cmd)
        (($# >= 2)) || usage_error "$1 needs a value"
        case $1 in
        --dispatch) DISPATCH=$2 ;;
        --duration) DURATION=$2 ;;
        --out) OUT=$2 ;;
        --threads) THREADS=$2 ;;
        --connections) CONNECTIONS=$2 ;;
        --port) PORT=$2 ;;
        --call-graph) CALL_GRAPH=$2 ;;
        --server-cmd) SERVER_CMD=$2 ;;
        esac
        shift
        ;;
    *) usage_error "unknown argument '$1'" ;;
    esac
    shift
done

[[ $DISPATCH == local || $DISPATCH == system ]] || usage_error "--dispatch wants local or system, got '$DISPATCH'"
DURATION=${DURATION%s} # accept 10s as well as 10
for n in DURATION THREADS CONNECTIONS PORT; do
    [[ ${!n} =~ ^[1-9][0-9]*$ ]] || usage_error "--$(tr '[:upper:]' '[:lower:]' <<<"$n") wants a positive number, got '${!n}'"
done
((PORT <= 65535)) || usage_error "--port must be at most 65535"
((DURATION >= 2)) || usage_error "--duration must be at least 2 seconds"
case $CALL_GRAPH in "" | fp | dwarf | lbr) ;; *) usage_error "--call-graph wants fp, dwarf or lbr" ;; esac
((CONNECTIONS >= THREADS)) || usage_error "wrk needs at least one connection per thread"
SUFFIX="" SCHEME=http
if ((TLS)); then SUFFIX=-tls SCHEME=https; fi
OUT=${OUT:-$HERE/$DISPATCH$SUFFIX.svg}

ADDR="127.0.0.1:$PORT"
URL="$SCHEME://$ADDR/"
server_line=${SERVER_CMD//\{addr\}/$ADDR}
server_line=${server_line//\{port\}/$PORT}
server_line=${server_line//\{mode\}/$DISPATCH}
read -r -a SERVER <<<"$server_line"
((${#SERVER[@]})) || usage_error "empty server command"

# cargo-installed tools live in ~/.cargo/bin, which may not be on PATH.
export PATH="$PATH:$HOME/.cargo/bin"

# ------------------------------------------------------------- checks --

if ((!DRY_RUN)); then
    for tool in perf wrk curl; do
        command -v "$tool" >/dev/null 2>&1 || die "$tool not found: run ./cloud-setup.sh server (perf) / client (wrk) first"
    done
    paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 2)
    if ((EUID != 0 && paranoid > 1)); then
        die "perf cannot attach to a process as non-root with kernel.perf_event_paranoid=$paranoid; run as root or: sudo sysctl kernel.perf_event_paranoid=1"
    fi
fi

# VMs often expose no hardware counters: `perf stat` then reports cycles as
# "<not supported>" (and still exits 0), so look at its output.
PERF_EVENT=()
if ! stat_out=$(perf stat -e cycles true 2>&1) || grep -Eq 'not supported|not counted|<not ' <<<"$stat_out"; then
    PERF_EVENT=(-e cpu-clock)
    say "No hardware cycle counter here: sampling the software clock (-e cpu-clock)."
fi
if [[ -z $CALL_GRAPH || $CALL_GRAPH == fp ]]; then
    CALL_GRAPH_ARGS=(-g)
else
    CALL_GRAPH_ARGS=(--call-graph "$CALL_GRAPH")
fi

# Renderer: inferno's two tools, else cargo-flamegraph, else install inferno.
if command -v inferno-collapse-perf >/dev/null 2>&1 && command -v inferno-flamegraph >/dev/null 2>&1; then
    RENDERER=inferno
elif command -v flamegraph >/dev/null 2>&1 && flamegraph --help 2>/dev/null | grep -q -- --perfdata; then
    RENDERER=cargo-flamegraph
else
    RENDERER=inferno
    say "Neither inferno nor cargo-flamegraph found: installing inferno (a few minutes)."
    # Without --locked as a fallback: an upstream lockfile may pin a yanked crate.
    run cargo install --locked inferno || run cargo install inferno
fi

# --------------------------------------------------------------- run --

WORK=""
SERVER_PID=""
PERF_PID=""
WRK_PID=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    # wrk and perf first (SIGINT lets perf close its file), then the server.
    if [[ -n $WRK_PID ]]; then
        kill -TERM "$WRK_PID" 2>/dev/null || true
        wait "$WRK_PID" 2>/dev/null || true
    fi
    if [[ -n $PERF_PID ]] && kill -0 "$PERF_PID" 2>/dev/null; then
        kill -INT "$PERF_PID" 2>/dev/null || true
        wait "$PERF_PID" 2>/dev/null || true
    fi
    stop_server
    if [[ -n $WORK ]]; then
        if ((KEEP)); then say "Kept perf.data and stacks in $WORK"; else rm -rf "$WORK"; fi
    fi
    exit "$rc"
}
stop_server() {
    [[ -n $SERVER_PID ]] || return 0
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        # Give it a moment to exit cleanly, then insist.
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ $SERVER_CMD == "$DEFAULT_SERVER_CMD" ]]; then
    # Release profile has debug = true, so perf can name the frames.
    if ((DRY_RUN)); then
        say "[dry-run] cd $(show_cmd "$REPO_DIR") && cargo build --release"
    else
        say "+ cd $(show_cmd "$REPO_DIR") && cargo build --release"
        (cd "$REPO_DIR" && cargo build --release)
    fi
else
    say "Custom server command: not building."
fi

if ((DRY_RUN)); then
    WORK_SHOWN="<tmpdir>"
else
    # Something already answering on the port would get profiled instead.
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
        die "something already listens on $ADDR; pick another --port"
    fi
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/flamegraph.XXXXXX")
    WORK_SHOWN=$WORK
fi
if ((TLS)); then
    # A certificate for this run only; curl below is told not to verify it.
    run openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$WORK_SHOWN/key.pem" -out "$WORK_SHOWN/cert.pem" -days 2 -subj /CN=localhost
    SERVER+=(--tls-cert "$WORK_SHOWN/cert.pem" --tls-key "$WORK_SHOWN/key.pem")
fi

say "Starting server: $(show_cmd "${SERVER[@]}")"
if ((DRY_RUN)); then
    say "[dry-run] $(show_cmd "${SERVER[@]}") > $WORK_SHOWN/server.log 2>&1 &"
else
    "${SERVER[@]}" >"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    # Wait until it answers (up to 10 s), or give up if it died.
    for _ in $(seq 100); do
        curl -kfsS -o /dev/null --max-time 1 "$URL" 2>/dev/null && break
        kill -0 "$SERVER_PID" 2>/dev/null || {
            cat "$WORK/server.log" >&2
            die "server exited before answering on $URL"
        }
        sleep 0.1
    done
    curl -kfsS -o /dev/null --max-time 1 "$URL" || die "server does not answer on $URL after 10 s"
    say "Server up (pid $SERVER_PID): $(curl -kfsS --max-time 1 "$URL" | head -c 60 | tr '\n' ' ')"
fi

# perf samples the server for the whole load window: it starts first and
# stops (its `sleep`) as wrk finishes.
PERF_CMD=(perf record -F "$FREQ" "${CALL_GRAPH_ARGS[@]}" "${PERF_EVENT[@]}" -p "${SERVER_PID:-\$SERVER_PID}" -o "$WORK_SHOWN/perf.data" -- sleep "$DURATION")
WRK_CMD=(wrk "-t$THREADS" "-c$CONNECTIONS" "-d${DURATION}s" "$URL")
if ((DRY_RUN)); then
    say "[dry-run] $(show_cmd "${PERF_CMD[@]}") &"
    say "[dry-run] $(show_cmd "${WRK_CMD[@]}")"
else
    say "+ $(show_cmd "${PERF_CMD[@]}") &"
    "${PERF_CMD[@]}" 2>"$WORK/perf.log" &
    PERF_PID=$!
    sleep 0.5
    kill -0 "$PERF_PID" 2>/dev/null || {
        cat "$WORK/perf.log" >&2
        die "perf record failed to start"
    }
    # wrk runs in the background so a Ctrl-C or TERM is handled at once
    # (bash delays traps until a foreground command ends).
    say "+ $(show_cmd "${WRK_CMD[@]}")"
    "${WRK_CMD[@]}" &
    WRK_PID=$!
    wait "$WRK_PID" || die "wrk failed"
    WRK_PID=""
    wait "$PERF_PID" || {
        cat "$WORK/perf.log" >&2
        die "perf record failed"
    }
    PERF_PID=""
    grep -h 'perf record' "$WORK/perf.log" || true
fi
# Stop the server before rendering: perf script only needs the binary on disk.
((DRY_RUN)) || stop_server

TITLE="$(basename "${SERVER[0]}") --dispatch $DISPATCH | wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s | perf ${PERF_EVENT[*]:-cycles} ${FREQ}Hz"
out_dir=$(dirname "$OUT")
if [[ $RENDERER == inferno ]]; then
    if ((DRY_RUN)); then
        say "[dry-run] perf script -i $WORK_SHOWN/perf.data | inferno-collapse-perf > $WORK_SHOWN/stacks.folded"
        say "[dry-run] inferno-flamegraph --title $(show_cmd "$TITLE") $WORK_SHOWN/stacks.folded > $(show_cmd "$OUT")"
    else
        say "+ perf script | inferno-collapse-perf | inferno-flamegraph > $OUT"
        perf script -i "$WORK/perf.data" 2>"$WORK/script.log" | inferno-collapse-perf >"$WORK/stacks.folded"
        if [[ ! -s $WORK/stacks.folded ]]; then
            cat "$WORK/script.log" >&2
            die "no stacks recorded (perf script output above)"
        fi
        mkdir -p "$out_dir"
        inferno-flamegraph --title "$TITLE" "$WORK/stacks.folded" >"$OUT"
    fi
else
    run mkdir -p "$out_dir"
    run flamegraph --perfdata "$WORK_SHOWN/perf.data" --title "$TITLE" -o "$OUT"
fi

if ((!DRY_RUN)); then
    [[ -s $OUT ]] || die "no SVG written"
    if [[ -f $WORK/stacks.folded ]]; then
        say "Wrote $OUT ($(wc -c <"$OUT") bytes, $(wc -l <"$WORK/stacks.folded") distinct stacks)"
    else
        say "Wrote $OUT ($(wc -c <"$OUT") bytes)"
    fi
fi
