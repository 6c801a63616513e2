#!/usr/bin/env bash
# Mutation testing with cargo-mutants: each mutant (a function body replaced,
# an operator swapped, a condition negated) is built and tested; a mutant the
# tests still pass with is a survivor, a change to the code no test notices.
#
# usage: scripts/mutants.sh [--iterate] [--list] [SRC_FILE ...]
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
    src/runtime/timeouts.rs) echo "--lib --test reliability --test metrics --test actor_routes" ;;
    src/runtime/balance.rs) echo "--lib --test balance" ;;
    src/runtime/wakeup.rs) echo "--lib --test liveness --test balance" ;;
    src/request_stream/*) echo "--lib --test property --test http --test rfc --test errors" ;;
    src/routes/table.rs | src/routes/actor.rs) echo "--lib --test routes --test actor_routes" ;;
    src/routes/path_pattern.rs) echo "--lib --test path_params --test routes" ;;
    src/net/* | src/runtime/connection/socket_io.rs)
        echo "--lib --test http --test reliability --test integrity_http --test tls"
        ;;
    src/tls/*) echo "--lib --test tls --test tls_files" ;;
    src/ws/* | src/websocket/* | src/runtime/connection/websocket.rs)
        echo "--lib --test websocket --test websocket_deflate --test integrity"
        ;;
    *) echo "--lib" ;;
    esac
}

iterate=()
list=false
files=()
for arg in "$@"; do
    case "$arg" in
    --iterate) iterate=(--iterate) ;;
    --list) list=true ;;
    -*)
        echo "scripts/mutants.sh: unknown option $arg" >&2
        exit 2
        ;;
    *) files+=("$arg") ;;
    esac
done
if ((${#files[@]} == 0)); then
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

out=target/mutants
mkdir -p "$out"
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
        cargo mutants --list "${file_args[@]}"
        continue
    fi
    # Named by its tests, so a later run of the same group (--iterate)
    # finds it whatever else that run includes.
    dir="$out/$(echo "$key" | sed -e 's/--test //g' -e 's/--//g' -e 's/ /-/g')"
    echo "scripts/mutants.sh: group $index:${group_files[$key]} -- cargo test $key"
    echo "scripts/mutants.sh: started $(date -u +%FT%TZ)"
    # cargo-mutants exits 2 when mutants were missed, 3 on timeouts: both are
    # results here, not failures of the run.
    status=0
    cargo mutants --jobs 1 --copy-target=true --output "$dir" "${iterate[@]}" \
        "${file_args[@]}" -- "${test_args[@]}" || status=$?
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
