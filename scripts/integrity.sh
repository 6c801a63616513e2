#!/usr/bin/env bash
# scripts/integrity.sh: the long integrity run.
#
# Builds the integrity tests in release mode, then, for --minutes:
#   - runs tests/integrity.rs (WebSocket mail), tests/integrity_http.rs
#     (actor answers, static files, /io) and tests/integrity_cluster.rs
#     (rooms and actor messages across two and three servers through a
#     real nats-server, bursts past --nats-buffer, and NATS stopped,
#     continued and restarted under a room: nothing corrupt, doubled or out
#     of order) with a new INTEGRITY_SEED each round and INTEGRITY_ROUNDS
#     times their short run's length, stopping at the first failure with
#     the command that runs its seed again;
#   - keeps one serving process up for the whole run (integrity_soak's
#     `serve`: a plain server in local dispatch and a TLS one in system
#     dispatch, with every route the runs ask) and sends each round through
#     it (`drive`, checking every byte), and reads the process's RSS from
#     /proc between rounds, once a minute: after the warm-up it must stay
#     within a bound.
# Prints a line per round and a summary; exits 1 on a corrupt or reordered
# message, a failed test, or memory that grows past the bound.
set -euo pipefail

PROG=$(basename "$0")
REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

MINUTES=30
ROUNDS=4
SEED=""
SOAK=1
WARMUP=5        # minutes of warm-up before the RSS baseline
RSS_GROWTH=1.25 # RSS between rounds <= 1.25 x the baseline...
RSS_SLACK=16    # ...+ 16 MiB

usage() {
    cat <<EOF
Usage: $PROG [--minutes N] [--rounds N] [--seed S] [--no-soak]
             [--warmup MINUTES] [--rss-growth FACTOR] [--rss-slack MIB]

The long integrity run: the integrity tests in release mode over new seeds
for N minutes (default 30), and one long-lived serving process that every
round also goes through, its memory sampled each minute.

  --minutes N          how long to run, at least 1 (default 30)
  --rounds N           INTEGRITY_ROUNDS: each test this many times its
                       short run's length (default 4)
  --seed S             the first round's seed, then S+1, S+2... (default:
                       from the clock)
  --no-soak            no serving process: the seeds only, no memory check
  --warmup MINUTES     the first round to end after this many minutes gives
                       the RSS baseline (default 5, at most a third of the
                       run)
  --rss-growth FACTOR  after it, the RSS between rounds must stay within
  --rss-slack MIB      FACTOR x the baseline + MIB (default 1.25 and 16)
  --help, -h           show this help

A failure prints the seed and the command that runs it again, e.g.
  INTEGRITY_SEED=123 INTEGRITY_ROUNDS=4 cargo test --release --test integrity_http
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
    --no-soak) SOAK=0 ;;
    --minutes | --rounds | --seed | --warmup | --rss-growth | --rss-slack)
        (($# >= 2)) || usage_error "$1 needs a value"
        case $1 in
        --minutes) MINUTES=$2 ;;
        --rounds) ROUNDS=$2 ;;
        --seed) SEED=$2 ;;
        --warmup) WARMUP=$2 ;;
        --rss-growth) RSS_GROWTH=$2 ;;
        --rss-slack) RSS_SLACK=$2 ;;
        esac
        shift
        ;;
    *) usage_error "unknown argument '$1'" ;;
    esac
    shift
done
for value in "$MINUTES" "$ROUNDS"; do
    [[ $value =~ ^[1-9][0-9]*$ ]] || usage_error "not a positive number: '$value'"
done
[[ -z $SEED || $SEED =~ ^[0-9]+$ ]] || usage_error "--seed wants a number"
[[ $WARMUP =~ ^[0-9]+$ ]] || usage_error "--warmup wants a number of minutes"
[[ $RSS_GROWTH =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage_error "--rss-growth wants a factor, e.g. 1.25"
[[ $RSS_SLACK =~ ^[0-9]+$ ]] || usage_error "--rss-slack wants MiB"
((WARMUP * 3 <= MINUTES)) || WARMUP=$((MINUTES / 3))
SEED=${SEED:-$(date +%s)}

for tool in cargo awk; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done

# ------------------------------------------------------------ cleanup --

TMP=$(mktemp -d "${TMPDIR:-/tmp}/integrity.XXXXXX")
SERVE_PID=""
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
    local rc=$?
    trap - EXIT INT TERM
    [[ -z $SERVE_PID ]] || stop_pid "$SERVE_PID"
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# -------------------------------------------------------------- build --

TESTS=(integrity integrity_http)
# Across servers: needs nats-server (Debian's package, or the tests build
# one with Go).
if command -v nats-server >/dev/null 2>&1 || command -v go >/dev/null 2>&1 ||
    [[ -x /usr/local/go/bin/go ]]; then
    TESTS+=(integrity_cluster)
else
    say "== no nats-server and no Go to build one: tests/integrity_cluster.rs left out"
fi
say "== build: nice cargo test --release --no-run (${TESTS[*]} integrity_soak)"
build_args=()
for test in "${TESTS[@]}" integrity_soak; do build_args+=(--test "$test"); done
(cd "$REPO_DIR" && nice -n 10 cargo test --release --no-run "${build_args[@]}" \
    --message-format=json 2>"$TMP/build.log" >"$TMP/build.json") ||
    die "the build failed:"$'\n'"$(tail -n 30 "$TMP/build.log")"
# executable BASENAME: the test binary the build made for tests/BASENAME.rs.
executable() {
    grep -o '"executable":"[^"]*/deps/'"$1"'-[^"]*"' "$TMP/build.json" | tail -n 1 |
        sed 's/^"executable":"//; s/"$//'
}
declare -A BIN
for test in "${TESTS[@]}" integrity_soak; do
    BIN[$test]=$(executable "$test")
    [[ -x ${BIN[$test]} ]] || die "no test binary for tests/$test.rs in the build's output"
done

cd "$REPO_DIR"
export INTEGRITY_ROUNDS=$ROUNDS
export INTEGRITY_SOAK_DIR=$TMP/soak
mkdir -p "$INTEGRITY_SOAK_DIR"

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
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
hwm_kb() { awk '$1 == "VmHWM:" { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

if ((SOAK)); then
    # Run directly, not through cargo, so that its pid is the process's.
    # Two malloc arenas and a fixed mmap threshold (glibc raises it as large
    # blocks are freed, then keeps them) make RSS follow what is live, not
    # the allocator's high-water mark in each of 16 arenas; either may be
    # set in the environment instead.
    MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2} MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-131072} \
        "${BIN[integrity_soak]}" --ignored --exact serve --nocapture >"$TMP/serve.log" 2>&1 &
    SERVE_PID=$!
    for _ in $(seq 300); do
        [[ -e $INTEGRITY_SOAK_DIR/addresses ]] && break
        kill -0 "$SERVE_PID" 2>/dev/null ||
            die "the serving process exited:"$'\n'"$(tail -n 20 "$TMP/serve.log")"
        sleep 0.1
    done
    [[ -e $INTEGRITY_SOAK_DIR/addresses ]] || die "the serving process did not start in 30 s"
    say "== serving process $SERVE_PID: $(tr '\n' ' ' <"$INTEGRITY_SOAK_DIR/addresses")"
    # "minute RSS-KiB", between rounds (the process's connections closed,
    # what it holds is what it kept), the first round to end in each minute.
    printf '0 %s\n' "$(rss_kb "$SERVE_PID")" >"$TMP/rss.txt"
fi
last_minute=0

# ------------------------------------------------------------- rounds --

# run NAME REPRODUCE CMD...: runs CMD with its output in $TMP/NAME.log; on
# failure shows the end of it and how to run it again, and exits 1.
run() {
    local name=$1 reproduce=$2
    shift 2
    if ! "$@" >"$TMP/$name.log" 2>&1; then
        say ""
        say "FAIL: $name, seed $seed:"
        grep -E 'panicked|is wrong|FAILED|failures:' "$TMP/$name.log" | head -n 20 | sed 's/^/    | /' || true
        say "  full output: (kept) $REPO_DIR/target/integrity-$name-$seed.log"
        cp "$TMP/$name.log" "$REPO_DIR/target/integrity-$name-$seed.log"
        say "  run it again: $reproduce"
        exit 1
    fi
}

say "== $MINUTES minutes from $(date -u '+%Y-%m-%d %H:%M:%S UTC'), INTEGRITY_ROUNDS=$ROUNDS, first seed $SEED"
say "   $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
START=$SECONDS
DEADLINE=$((START + MINUTES * 60))
seeds=0
seed=$SEED
while ((SECONDS < DEADLINE)); do
    elapsed=$((SECONDS - START))
    printf '[%02d:%02d] seed %s:' $((elapsed / 60)) $((elapsed % 60)) "$seed"
    for test in "${TESTS[@]}"; do
        run "$test" "INTEGRITY_SEED=$seed INTEGRITY_ROUNDS=$ROUNDS cargo test --release --test $test" \
            env INTEGRITY_SEED="$seed" "${BIN[$test]}" --test-threads 2
        printf ' %s ok' "$test"
    done
    if ((SOAK)); then
        run soak "scripts/integrity.sh --seed $seed --rounds $ROUNDS --minutes 1 (a new serving process)" \
            env INTEGRITY_SEED="$seed" "${BIN[integrity_soak]}" --ignored --exact drive
        rss=$(rss_kb "$SERVE_PID")
        printf ' soak ok, RSS %s MiB' "$(mib "$rss")"
        minute=$(((SECONDS - START) / 60))
        if ((minute > last_minute)); then
            printf '%s %s\n' "$minute" "$rss" >>"$TMP/rss.txt"
            last_minute=$minute
        fi
    fi
    printf '\n'
    seeds=$((seeds + 1))
    seed=$((seed + 1))
done
if ((SOAK)); then
    printf '%s %s\n' "$(((SECONDS - START) / 60))" "$rss" >>"$TMP/rss.txt"
fi

# ------------------------------------------------------------ summary --

say ""
say "== summary: $seeds seeds ($SEED to $((seed - 1))) in $(((SECONDS - START) / 60)) min, 0 failures"
if ((SOAK)); then
    read -r start base max end < <(awk -v w="$WARMUP" '
        NR == 1 { start = $2; next }
        base == "" && $1 >= w { base = $2 }
        base != "" { if ($2 > max) max = $2 }
        { end = $2 }
        END { if (base == "") base = end; print start, base, max + 0, end }' "$TMP/rss.txt")
    bound=$(awk -v b="$base" -v g="$RSS_GROWTH" -v s="$RSS_SLACK" 'BEGIN { printf "%d", b * g + s * 1024 }')
    say "RSS of the serving process between rounds (MiB), a minute apart: $(awk '{ printf "%.0f ", $2 / 1024 }' "$TMP/rss.txt")"
    say "RSS between rounds: start $(mib "$start"), after the $WARMUP-minute warm-up $(mib "$base"), max after it $(mib "$max"), end $(mib "$end") MiB; bound $(mib "$bound") MiB ($RSS_GROWTH x + $RSS_SLACK MiB); peak during a round $(mib "$(hwm_kb "$SERVE_PID")") MiB"
    if ((WARMUP == 0)); then
        say "PASS: no corrupt or reordered message (too short a run to judge memory: 3 minutes or more)"
        exit 0
    fi
    if ((max > bound)); then
        say "FAIL: the serving process's memory grew past the bound"
        exit 1
    fi
    say "PASS: no corrupt or reordered message, memory flat"
else
    say "PASS: no corrupt or reordered message"
fi
