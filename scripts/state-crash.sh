#!/usr/bin/env bash
# scripts/state-crash.sh: the kill -9 checker of durable state, long.
#
# Builds tests/durable_crash.rs in release mode and runs it with
# CRASH_KILLS kills (20 by default) for each store: the embedded file
# (--state DIR) and JetStream (--state jetstream). Eight clients increment
# the binary's /count while the server is killed at random moments and
# started again; the history of every answer must show nothing answered
# lost or answered twice, and no read going backwards.
#
# JetStream runs with `sync_interval: always` (every write on disk before
# it is acknowledged): that needs nats-server 2.10 or later. If the one
# installed is older (Debian's 2.9.10) and Go is here, v2.12.3 is built
# with `go install` once, into target/; else the run says so and goes on
# without it (a killed process loses nothing either way; a lost machine
# would).
set -euo pipefail

PROG=$(basename "$0")
REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KILLS=20
SEED=""
STORES="embedded jetstream"

usage() {
    cat <<USAGE
Usage: $PROG [--kills N] [--seed S] [--store embedded|jetstream]

Runs the kill -9 checker of durable state with N kills (default 20) per
store (default both), in release mode, and prints each run's verdict:
increments answered, unknown (no answer, or 503), the final count.
USAGE
}

# shellcheck source=scripts/messages.sh
. "$(dirname "$0")/messages.sh"
# shellcheck source=scripts/nats-server.sh
. "$(dirname "$0")/nats-server.sh"

while (($#)); do
    if [[ $1 == --*=* ]]; then set -- "${1%%=*}" "${1#*=}" "${@:2}"; fi
    case $1 in
    -h | --help)
        usage
        exit 0
        ;;
    --kills | --seed | --store)
        (($# >= 2)) || usage_error "$1 needs a value"
        case $1 in
        --kills) KILLS=$2 ;;
        --seed) SEED=$2 ;;
        --store) STORES=$2 ;;
        esac
        shift
        ;;
    *) usage_error "unknown argument '$1'" ;;
    esac
    shift
done
[[ $KILLS =~ ^[1-9][0-9]*$ ]] || usage_error "--kills wants a positive number"
[[ -z $SEED || $SEED =~ ^[0-9]+$ ]] || usage_error "--seed wants a number"
for store in $STORES; do
    [[ $store == embedded || $store == jetstream ]] || usage_error "--store: embedded or jetstream"
done

cd "$REPO_DIR"
if [[ $STORES == *jetstream* ]]; then
    use_nats_that_syncs "$REPO_DIR"
fi

say "== build: nice cargo test --release --test durable_crash --no-run"
nice -n 10 cargo test --release --test durable_crash --no-run >/dev/null 2>&1 ||
    die "the build failed: cargo test --release --test durable_crash --no-run"

failed=0
for store in $STORES; do
    filter=kill_9_keeps_every_acknowledged_increment_in_
    case $store in
    embedded) filter+=the_embedded_store ;;
    jetstream) filter+=jetstream ;;
    esac
    say "== $store: $KILLS kills"
    seed_env=()
    [[ -z $SEED ]] || seed_env=("INTEGRITY_SEED=$SEED")
    log=$(env CRASH_KILLS="$KILLS" "${seed_env[@]}" \
        cargo test --release --test durable_crash -- --exact "$filter" --nocapture 2>&1) || failed=1
    grep -E '^crash|panicked|is lost|twice|backwards|test result' <<<"$log" || true
done
exit "$failed"
