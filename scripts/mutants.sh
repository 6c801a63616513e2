#!/usr/bin/env bash
# Mutation testing with cargo-mutants: each mutant (a function body replaced,
# an operator swapped, a condition negated) is built and tested; a mutant the
# tests still pass with is a survivor, a change to the code no test notices.
#
# usage: scripts/mutants.sh [--iterate] [--list] [--shard K/N] [SRC_FILE ...]
#        scripts/mutants.sh --in-diff [BASE] [--shard K/N] [--list]
#
# --in-diff mutates only the lines a branch changed: the diff of src/ from
# where it left BASE (default main) to HEAD (`git diff BASE...HEAD`), each
# touched file tested with its own test files (tests_for). Run it on every
# change before it lands (docs/contributing.md). --shard K/N (0 <= K < N)
# passes through to cargo mutants: each group runs its K-th of N parts, so
# N machines or N evenings share one run.
#
# With no files, the modules least affected by the runtime rewrite (HTTP
# framing, chunked bodies, request and target parsing, the static and
# conditional routes, timeouts and the balance) and the newer ones: path
# patterns, the route table, the socket and TLS transport, the connection's
# socket I/O, TLS files, the WebSocket protocol (src/ws), its API
# (src/websocket) and the WebSocket connection. MUTANTS_LATER=1 adds the
# request stream, actor routes and the wake-up.
#
# Each module is tested with the unit tests and the integration test files
# that exercise it (the table in tests_for), not the whole suite: building
# all 27 test binaries per mutant would take hours on two cores. Modules
# with the same test files share one cargo-mutants run.
#
# Writes target/mutants/<tests>/mutants.out/ (cargo-mutants' own output, one
# directory per set of test files, e.g. lib-balance) and
# target/mutants/survivors.txt (every missed mutant); prints the counts.
# --iterate retests only what the previous run did not catch. Exits 0 even
# with survivors: docs/mutants.md says which are known equivalents.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
if ! cargo mutants --version >/dev/null 2>&1; then
    cargo install cargo-mutants --locked
fi

defaults=(
    src/http/framing.rs
    src/http/chunked.rs
    src/http/request.rs
    src/http/target.rs
    src/static_files/conditional.rs
    src/static_files/load.rs
    src/static_files/table.rs
    src/static_files/response.rs
    src/static_files/site.rs
    src/runtime/timeouts.rs
    src/runtime/balance.rs
    src/routes/path_pattern.rs
    src/routes/table.rs
    src/net/client_hello.rs
    src/net/socket.rs
    src/net/transport.rs
    src/runtime/connection/socket_io.rs
    src/tls/mod.rs
    src/ws/frame.rs
    src/ws/handshake.rs
    src/ws/utf8.rs
    src/ws/session.rs
    src/ws/deflate.rs
    src/websocket/context.rs
    src/websocket/handle.rs
    src/websocket/outgoing.rs
    src/websocket/registry.rs
    src/websocket/mod.rs
    src/runtime/connection/websocket.rs
)
later=(
    src/request_stream/framer.rs
    src/request_stream/mod.rs
    src/routes/actor.rs
    src/runtime/wakeup.rs
)

# The cargo test arguments that test one module.
tests_for() {
    case "$1" in
    src/static_files/* | src/http/percent.rs)
        echo "--lib --test static_files --test static_ranges --test static_paths --test static_reload"
        ;;
    src/http/*) echo "--lib --test rfc --test errors --test http --test property" ;;
    src/runtime/timeouts.rs) echo "--lib --test reliability --test metrics --test actor_routes --test http2_limits" ;;
    src/runtime/balance.rs) echo "--lib --test balance" ;;
    src/runtime/wakeup.rs) echo "--lib --test liveness --test balance" ;;
    src/request_stream/*) echo "--lib --test property --test http --test rfc --test errors --test websocket_h2" ;;
    src/routes/table.rs | src/routes/actor.rs)
        echo "--lib --test routes --test actor_routes --test error_bodies --test blocking_pool --test websocket --test durable --test testing --test owned_actors --test middleware --test websocket_deflate --test metrics"
        ;;
    src/routes/path_pattern.rs) echo "--lib --test path_params --test routes" ;;
    src/net/* | src/runtime/connection/socket_io.rs)
        echo "--lib --test http --test reliability --test integrity_http --test tls --test closing --test http2"
        ;;
    src/tls/*) echo "--lib --test tls --test tls_files --test http3" ;;
    src/ws/* | src/websocket/* | src/runtime/connection/websocket.rs)
        echo "--lib --test websocket --test websocket_deflate --test integrity --test websocket_h2"
        ;;
    src/runtime/connection.rs | src/runtime/connection/http2*.rs | src/gateway/*)
        echo "--lib --test http2 --test websocket_h2 --test websocket --test tls --test closing"
        ;;
    src/cluster/* | src/nats/* | src/actors/placed.rs | src/actors/remote.rs)
        echo "--lib --test cluster --test placed --test node_names"
        ;;
    src/http2/*) echo "--lib --test http2 --test http2_limits --test websocket_h2" ;;
    src/h3/* | src/http3/*) echo "--lib --test http3" ;;
    src/observe/*) echo "--lib --test metrics --test websocket_h2" ;;
    src/routes/cors.rs | src/routes/middleware.rs | src/routes/https_redirect.rs)
        echo "--lib --test middleware"
        ;;
    *) echo "--lib" ;;
    esac
}

iterate=()
list=false
files=()
shard=()
in_diff=false
base=main
while (($# > 0)); do
    case "$1" in
    --iterate) iterate=(--iterate) ;;
    --list) list=true ;;
    --shard)
        if (($# < 2)) || ! [[ "$2" =~ ^[0-9]+/[0-9]+$ ]]; then
            echo "scripts/mutants.sh: --shard wants K/N, e.g. 0/4" >&2
            exit 2
        fi
        shard=(--shard "$2")
        shift
        ;;
    --in-diff)
        in_diff=true
        # An optional BASE: the next word, when it is not an option.
        if (($# > 1)) && [[ "$2" != -* ]]; then
            base=$2
            shift
        fi
        ;;
    -*)
        echo "scripts/mutants.sh: unknown option $1" >&2
        exit 2
        ;;
    *) files+=("$1") ;;
    esac
    shift
done

out=target/mutants
mkdir -p "$out"
diff_args=()
prefix=""
if [ "$in_diff" = true ]; then
    prefix=diff-
    if ((${#files[@]} > 0)); then
        echo "scripts/mutants.sh: --in-diff takes its files from the diff" >&2
        exit 2
    fi
    if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
        echo "scripts/mutants.sh: no such commit: $base" >&2
        exit 2
    fi
    patch="$(pwd)/$out/in-diff.patch"
    git diff "$base...HEAD" -- src >"$patch"
    # The Rust files the branch changed and still has (a deleted file has
    # nothing left to mutate).
    while IFS= read -r file; do
        if [[ "$file" == *.rs ]] && [ -f "$file" ]; then
            files+=("$file")
        fi
    done < <(git diff --name-only "$base...HEAD" -- src)
    if ((${#files[@]} == 0)); then
        echo "scripts/mutants.sh: no Rust file under src/ changed since $base"
        exit 0
    fi
    diff_args=(--in-diff "$patch")
    echo "scripts/mutants.sh: the diff from $base: ${files[*]}"
elif ((${#files[@]} == 0)); then
    files=("${defaults[@]}")
    if [ "${MUTANTS_LATER:-}" = 1 ]; then
        files+=("${later[@]}")
    fi
fi
for file in "${files[@]}"; do
    if [ ! -f "$file" ]; then
        echo "scripts/mutants.sh: no such file: $file" >&2
        exit 2
    fi
done

# Groups: one per distinct set of test arguments, in first-seen order.
declare -A group_files=()
groups=()
for file in "${files[@]}"; do
    key=$(tests_for "$file")
    if [ -z "${group_files[$key]+set}" ]; then
        groups+=("$key")
        group_files[$key]=""
    fi
    group_files[$key]+=" $file"
done

survivors="$out/survivors.txt"
if [ "$list" = false ]; then
    : >"$survivors"
fi
total_caught=0 total_missed=0 total_timeout=0 total_unviable=0
index=0
for key in "${groups[@]}"; do
    index=$((index + 1))
    read -r -a test_args <<<"$key"
    file_args=()
    for file in ${group_files[$key]}; do
        file_args+=(-f "$file")
    done
    if [ "$list" = true ]; then
        echo "# cargo test ${test_args[*]}"
        cargo mutants --list "${diff_args[@]}" "${shard[@]}" "${file_args[@]}"
        continue
    fi
    # Named by its tests, so a later run of the same group (--iterate)
    # finds it whatever else that run includes.
    # A diff's run has its own directories: a full run's results stay.
    dir="$out/$prefix$(echo "$key" | sed -e 's/--test //g' -e 's/--//g' -e 's/ /-/g')"
    echo "scripts/mutants.sh: group $index:${group_files[$key]} -- cargo test $key"
    echo "scripts/mutants.sh: started $(date -u +%FT%TZ)"
    # cargo-mutants exits 2 when mutants were missed, 3 on timeouts: both are
    # results here, not failures of the run.
    # As --cargo-arg (-C), not after --: arguments after -- reach only the
    # test phase, and the build phase would build every test binary.
    cargo_args=()
    for arg in "${test_args[@]}"; do
        cargo_args+=(-C "$arg")
    done
    status=0
    cargo mutants --jobs "${MUTANTS_JOBS:-1}" --copy-target=true --output "$dir" "${iterate[@]}" \
        "${diff_args[@]}" "${shard[@]}" "${file_args[@]}" "${cargo_args[@]}" || status=$?
    if ((status != 0 && status != 2 && status != 3)); then
        echo "scripts/mutants.sh: cargo mutants failed (exit $status)" >&2
        exit "$status"
    fi
    count() {
        if [ -s "$dir/mutants.out/$1" ]; then grep -c . "$dir/mutants.out/$1"; else echo 0; fi
    }
    caught=$(count caught.txt) missed=$(count missed.txt)
    timeout=$(count timeout.txt) unviable=$(count unviable.txt)
    total_caught=$((total_caught + caught)) total_missed=$((total_missed + missed))
    total_timeout=$((total_timeout + timeout)) total_unviable=$((total_unviable + unviable))
    if [ -f "$dir/mutants.out/missed.txt" ]; then
        cat "$dir/mutants.out/missed.txt" >>"$survivors"
    fi
done
if [ "$list" = true ]; then
    exit 0
fi
sort -o "$survivors" "$survivors"
echo "scripts/mutants.sh: finished $(date -u +%FT%TZ)"
echo "scripts/mutants.sh: caught $total_caught, timed out $total_timeout (caught), \
missed $total_missed, unviable $total_unviable; survivors in $survivors"
