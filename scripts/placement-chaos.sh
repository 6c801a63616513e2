#!/usr/bin/env bash
# scripts/placement-chaos.sh: the chaos check of placed actors, long.
#
# Builds tests/placed_chaos.rs in release mode and runs it with
# CHAOS_ROUNDS rounds (50 by default): three servers (the binary, its
# /count and /count/NAME placed, --state jetstream with three replicas) on
# a three-node NATS JetStream cluster on loopback, clients on every server,
# and a driver that kills (-9) a server, pauses one past its lease
# (SIGSTOP, then SIGCONT), or kills a NATS node, round after round, and
# starts again what it killed. The history of every answer is checked per
# counter: nothing answered lost or answered twice, no read going
# backwards. Prints each round, the verdicts, and the failover times (p50,
# p99, max) of the rounds that hit the main counter's holder.
#
# NATS runs with `sync_interval: always` where it has it (2.10 and later):
# with Debian's 2.9.10 and Go present, v2.12.3 is built once into target/
# (as scripts/state-crash.sh does).
set -euo pipefail

PROG=$(basename "$0")
REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=50
SEED=""

usage() {
    cat <<USAGE
Usage: $PROG [--rounds N] [--seed S]

Runs the chaos check of placed actors for N rounds (default 50), in
release mode, and prints each round's fault, each counter's verdict, and
the failover times (p50, p99, max) of the rounds that hit the holder.
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
    --rounds | --seed)
        (($# >= 2)) || usage_error "$1 needs a value"
        case $1 in
        --rounds) ROUNDS=$2 ;;
        --seed) SEED=$2 ;;
        esac
        shift
        ;;
    *) usage_error "unknown argument '$1'" ;;
    esac
    shift
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || usage_error "--rounds wants a positive number"
[[ -z $SEED || $SEED =~ ^[0-9]+$ ]] || usage_error "--seed wants a number"

cd "$REPO_DIR"
use_nats_that_syncs "$REPO_DIR"
say "== build: nice cargo test --release --test placed_chaos --no-run"
nice -n 10 cargo test --release --test placed_chaos --no-run >/dev/null 2>&1 ||
    die "the build failed: cargo test --release --test placed_chaos --no-run"
seed_env=()
[[ -z $SEED ]] || seed_env=("INTEGRITY_SEED=$SEED")
status=0
log=$(env CHAOS_ROUNDS="$ROUNDS" "${seed_env[@]}" \
    cargo test --release --test placed_chaos -- --nocapture 2>&1) || status=1
grep -E '^chaos|panicked|is lost|twice|backwards|no count|no failover|never answered|nothing was answered|seed|test result' <<<"$log" || true
exit "$status"
