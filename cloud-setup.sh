#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# cloud-setup.sh: prepare a fresh cloud box to benchmark uppercut-mio-server.
#
# One script, three roles (server, client, balancer); run `--help` for usage.
# Every step checks the machine first and says "already ..." when there is
# nothing to do, so running it twice is safe and the second run changes
# nothing. `--dry-run` prints each command that would change the system
# instead of running it, and needs neither root nor network.
#
# The roles and their helpers live in setup/ next to this file (common.sh,
# apt.sh, server.sh, client.sh, balancer.sh); this file reads the command
# line and runs one role.
set -euo pipefail

PROG=$(basename "$0")
# Follow a symlink to this script (say from /usr/local/bin) to the real file,
# so setup/ and the repository are found next to it. Only the link itself is
# resolved: the directory keeps the spelling the caller used.
SELF=${BASH_SOURCE[0]}
while [[ -L $SELF ]]; do
    LINK=$(readlink -- "$SELF")
    [[ $LINK == /* ]] || LINK=$(dirname -- "$SELF")/$LINK
    SELF=$LINK
done
# The repository is wherever this script lives: the server role builds there.
REPO_DIR=$(cd "$(dirname "$SELF")" && pwd)
SETUP_DIR=$REPO_DIR/setup
if [[ ! -r $SETUP_DIR/common.sh ]]; then
    printf '%s: error: %s is missing: run the copy of this script inside the repository\n' \
        "$PROG" "$SETUP_DIR" >&2
    exit 1
fi

DEFAULT_PORT=9000

# shellcheck source=setup/common.sh
. "$SETUP_DIR/common.sh"
# shellcheck source=setup/apt.sh
. "$SETUP_DIR/apt.sh"
# shellcheck source=setup/server.sh
. "$SETUP_DIR/server.sh"
# shellcheck source=setup/client.sh
. "$SETUP_DIR/client.sh"
# shellcheck source=setup/balancer.sh
. "$SETUP_DIR/balancer.sh"

usage() {
    cat <<EOF
Usage: $PROG [--dry-run] ROLE [options]

Roles:
  server   [--bind ADDR:PORT]
        Install build tools, Rust (rustup) if cargo is missing, perf and
        cargo-flamegraph; raise net.core.somaxconn and the open-files limit,
        and allow real-time priority 1 (for uppercut's scheduler thread);
        lower kernel.perf_event_paranoid to 1 and kernel.kptr_restrict to 0
        so that a non-root user can profile (a dedicated benchmark box);
        build the release binary in $REPO_DIR;
        print how to start the server and how to record a flamegraph.
        --bind only changes the printed start command (default 0.0.0.0:$DEFAULT_PORT).

  client   --target HOST[:PORT]
        Install wrk (package, or from source where there is none) and oha
        (cargo install; Rust through rustup if cargo is missing), and print
        the wrk and open-loop oha loads aimed at HOST:PORT (port $DEFAULT_PORT
        if omitted).

  balancer --backend HOST:PORT [--backend HOST:PORT ...] [--listen [ADDR:]PORT]
           [--print-config]
        Install nginx and point it at the backends through a keep-alive
        upstream (config in $NGINX_CONF), listening on
        port 80 unless --listen says otherwise. --print-config only prints
        that config to stdout and touches nothing.

Options for every role:
  --dry-run, -n   print every command that would change the system, run none
  --help, -h      show this help

Runs on Debian 12 and Ubuntu 22.04/24.04, as root or as a user with sudo.
EOF
}

# ------------------------------------------------------------ arguments --

valid_port() { [[ $1 =~ ^[0-9]{1,5}$ ]] && ((10#$1 >= 1 && 10#$1 <= 65535)); }

# HOST:PORT with a DNS name, IPv4 address or [IPv6] address.
valid_hostport() {
    [[ $1 =~ ^([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):([0-9]+)$ ]] && valid_port "${BASH_REMATCH[2]}"
}

ROLE=""
BIND="0.0.0.0:$DEFAULT_PORT"
BIND_SET=0
TARGET=""
BACKENDS=()
LISTEN=80
LISTEN_SET=0
PRINT_CONFIG=0

parse_args() {
    local opt
    while (($#)); do
        # Accept --opt=value as well as --opt value.
        if [[ $1 == --*=* ]]; then
            set -- "${1%%=*}" "${1#*=}" "${@:2}"
        fi
        opt=$1
        case $opt in
        -h | --help)
            usage
            exit 0
            ;;
        -n | --dry-run) DRY_RUN=1 ;;
        --print-config) PRINT_CONFIG=1 ;;
        --bind | --target | --backend | --listen)
            (($# >= 2)) || usage_error "$opt needs a value"
            case $opt in
            --bind)
                valid_hostport "$2" || usage_error "--bind wants ADDR:PORT, got '$2'"
                BIND=$2
                BIND_SET=1
                ;;
            --target) TARGET=$2 ;;
            --backend)
                valid_hostport "$2" || usage_error "--backend wants HOST:PORT, got '$2'"
                BACKENDS+=("$2")
                ;;
            --listen)
                valid_port "$2" || valid_hostport "$2" || usage_error "--listen wants PORT or ADDR:PORT, got '$2'"
                LISTEN=$2
                LISTEN_SET=1
                ;;
            esac
            shift
            ;;
        -*) usage_error "unknown option '$opt'" ;;
        server | client | balancer)
            [[ -z $ROLE ]] || usage_error "only one role at a time (got '$ROLE' and '$opt')"
            ROLE=$opt
            ;;
        *) usage_error "unknown role '$opt'" ;;
        esac
        shift
    done

    [[ -n $ROLE ]] || usage_error "no role given"
    # Options that belong to another role are mistakes, not no-ops.
    if [[ $ROLE != server ]] && ((BIND_SET)); then usage_error "--bind is for the server role"; fi
    if [[ $ROLE != client && -n $TARGET ]]; then usage_error "--target is for the client role"; fi
    if [[ $ROLE != balancer ]] && ((${#BACKENDS[@]} || LISTEN_SET || PRINT_CONFIG)); then
        usage_error "--backend, --listen and --print-config are for the balancer role"
    fi
    case $ROLE in
    client)
        [[ -n $TARGET ]] || usage_error "client needs --target HOST[:PORT]"
        TARGET=${TARGET#http://}
        TARGET=${TARGET%/}
        # No port given (a bare host, or a bare [IPv6]): use the server default.
        if [[ $TARGET != *:* || $TARGET == \[*\] ]]; then TARGET="$TARGET:$DEFAULT_PORT"; fi
        valid_hostport "$TARGET" || usage_error "--target wants HOST[:PORT], got '$TARGET'"
        ;;
    balancer)
        ((${#BACKENDS[@]})) || usage_error "balancer needs at least one --backend HOST:PORT"
        ;;
    esac
}

main() {
    parse_args "$@"
    if [[ $ROLE == balancer ]] && ((PRINT_CONFIG)); then
        nginx_config
        return 0
    fi
    detect_os
    "role_$ROLE"

    step "Summary"
    if ((DRY_RUN)); then
        say "Dry run: $CHANGES step(s) would change the system; nothing was changed."
    elif ((CHANGES == 0)); then
        say "Nothing changed: everything was already in place."
    else
        say "Done: $CHANGES change(s) made. A second run should report nothing changed."
    fi
}

main "$@"
