# shellcheck shell=bash
# scripts/messages.sh: how every script here talks to its user. Sourced, never
# run; the caller sets PROG (its name) and defines usage().

say() { printf '%s\n' "$*"; }
warn() { printf '%s: warning: %s\n' "$PROG" "$*" >&2; }
die() {
    printf '%s: error: %s\n' "$PROG" "$*" >&2
    exit 1
}
# A bad command line: say what is wrong, show the usage, exit 2.
usage_error() {
    printf '%s: %s\n\n' "$PROG" "$*" >&2
    usage >&2
    exit 2
}
