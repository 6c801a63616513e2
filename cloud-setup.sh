#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# cloud-setup.sh: prepare a fresh cloud box to benchmark uppercut-mio-server.
#
# One script, four roles (server, client, balancer, nats); run `--help` for usage.
# Every step checks the machine first and says "already ..." when there is
# nothing to do, so running it twice is safe and the second run changes
# nothing. `--dry-run` prints each command that would change the system
# instead of running it, and needs neither root nor network.
#
# The roles and their helpers live in setup/ next to this file (common.sh,
# apt.sh, server.sh, client.sh, balancer.sh, nats.sh); this file reads the
# command line and runs one role.
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
# nats-server's own defaults: clients, and routes between NATS servers.
NATS_DEFAULT_PORT=4222
NATS_ROUTE_PORT=6222

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
# shellcheck source=setup/nats.sh
. "$SETUP_DIR/nats.sh"

usage() {
    cat <<EOF
Usage: $PROG [--dry-run] ROLE [options]

Roles:
  server   [--bind ADDR:PORT] [--nats URL[,URL...] [--node NAME]]
        Install build tools, Rust (rustup) if cargo is missing, perf and
        cargo-flamegraph; raise net.core.somaxconn and the open-files limit,
        and allow real-time priority 1 (for uppercut's scheduler thread);
        lower kernel.perf_event_paranoid to 1 and kernel.kptr_restrict to 0
        so that a non-root user can profile (a dedicated benchmark box);
        build the release binary in $REPO_DIR;
        print how to start the server and how to record a flamegraph.
        --bind, --nats and --node only change the printed start command
        (default --bind 0.0.0.0:$DEFAULT_PORT): --nats joins a cluster through
        these NATS servers (nats://[USER:PASSWORD@]HOST:PORT, tls://...; see
        the nats role), --node names this server in it (default: the host
        name; each server needs its own).

  client   --target HOST[:PORT]
        Install wrk (package, or from source where there is none) and oha
        (cargo install; Rust through rustup if cargo is missing), and print
        the wrk and open-loop oha loads aimed at HOST:PORT (port $DEFAULT_PORT
        if omitted).

  balancer --backend HOST:PORT [--backend HOST:PORT ...] [--listen [ADDR:]PORT]
           [--print-config]
        Install nginx and point it at the backends through a keep-alive
        upstream (config in $NGINX_CONF), listening on
        port 80 unless --listen says otherwise; WebSocket upgrades pass
        through. --print-config only prints that config to stdout and
        touches nothing.

  nats     [--listen [ADDR:]PORT] [--user NAME | --token]
           [--tls-cert PATH --tls-key PATH]
           [--route HOST:PORT ... [--cluster-listen [ADDR:]PORT]] [--print-config]
        Install nats-server (Debian package) for servers started with --nats,
        write its config to $NATS_CONF (the package's own kept
        as .orig) and (re)start it: clients on port $NATS_DEFAULT_PORT of every address
        unless --listen says otherwise, monitoring on $NATS_MONITOR.
        --user NAME: clients log in as NAME with the password in
        \$NATS_PASSWORD; --token: with the token in \$NATS_TOKEN (either:
        letters, digits and . _ ~ -; e.g. openssl rand -hex 24). NKEYs and
        .creds files are not offered: the server cannot use them.
        --tls-cert/--tls-key (PEM, readable by user nats): clients must
        use TLS. --route: another NATS server's cluster port (port $NATS_ROUTE_PORT if
        omitted), once for each; the same list may go to every box (a route
        to itself is ignored). Routes listen on --cluster-listen (default
        port $NATS_ROUTE_PORT) and log in with --user's name and password (--token
        cannot secure them, so it is refused with --route); they are plain
        TCP. --print-config only prints the config (secrets included) to
        stdout and touches nothing.

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
NATS_URLS=""
NODE=""
TARGET=""
BACKENDS=()
LISTEN=""
PRINT_CONFIG=0
NATS_USER=""
USE_TOKEN=0
NATS_SECRET=""
NATS_TLS_CERT=""
NATS_TLS_KEY=""
ROUTES=()
CLUSTER_LISTEN=""

# A password or token: safe inside a URL and a nats-server config as it is.
valid_secret() { [[ $1 =~ ^[A-Za-z0-9._~-]+$ ]]; }

# URL[,URL...] as the server's --nats takes them: [nats:// or tls://]
# [USER:PASSWORD@ or TOKEN@]HOST[:PORT].
valid_nats_urls() {
    local url urls
    [[ -n $1 ]] || return 1
    IFS=, read -r -a urls <<<"$1"
    for url in "${urls[@]}"; do
        [[ $url =~ ^((nats|tls)://)?([A-Za-z0-9._~%:-]+@)?([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(:([0-9]+))?/?$ ]] || return 1
        [[ -z ${BASH_REMATCH[6]} ]] || valid_port "${BASH_REMATCH[6]}" || return 1
    done
}

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
        --token) USE_TOKEN=1 ;;
        --bind | --target | --backend | --listen | --nats | --node | --user | --tls-cert | --tls-key | \
            --route | --cluster-listen)
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
            --listen | --cluster-listen)
                valid_port "$2" || valid_hostport "$2" || usage_error "$opt wants PORT or ADDR:PORT, got '$2'"
                if [[ $opt == --listen ]]; then LISTEN=$2; else CLUSTER_LISTEN=$2; fi
                ;;
            --nats)
                valid_nats_urls "$2" ||
                    usage_error "--nats wants URL[,URL...], each [nats:// or tls://][USER:PASSWORD@]HOST[:PORT], got '$2'"
                NATS_URLS=$2
                ;;
            --node)
                [[ $2 =~ ^[A-Za-z0-9_-]+$ ]] || usage_error "--node wants letters, digits, - and _, got '$2'"
                NODE=$2
                ;;
            --user)
                [[ $2 =~ ^[A-Za-z0-9._-]+$ ]] || usage_error "--user wants letters, digits and . _ -, got '$2'"
                NATS_USER=$2
                ;;
            --tls-cert | --tls-key)
                [[ $2 == /* && $2 != *[\"\\]* ]] || usage_error "$opt wants an absolute path without quotes or backslashes, got '$2'"
                if [[ $opt == --tls-cert ]]; then NATS_TLS_CERT=$2; else NATS_TLS_KEY=$2; fi
                ;;
            --route)
                local route=$2
                # No port given: the cluster port.
                if [[ $route != *:* || $route == \[*\] ]]; then route="$route:$NATS_ROUTE_PORT"; fi
                valid_hostport "$route" || usage_error "--route wants HOST[:PORT], got '$2'"
                ROUTES+=("$route")
                ;;
            esac
            shift
            ;;
        -*) usage_error "unknown option '$opt'" ;;
        server | client | balancer | nats)
            [[ -z $ROLE ]] || usage_error "only one role at a time (got '$ROLE' and '$opt')"
            ROLE=$opt
            ;;
        *) usage_error "unknown role '$opt'" ;;
        esac
        shift
    done

    [[ -n $ROLE ]] || usage_error "no role given"
    # Options that belong to another role are mistakes, not no-ops.
    if [[ $ROLE != server ]] && ((BIND_SET)) || [[ $ROLE != server && -n $NATS_URLS$NODE ]]; then
        usage_error "--bind, --nats and --node are for the server role"
    fi
    if [[ $ROLE != client && -n $TARGET ]]; then usage_error "--target is for the client role"; fi
    if [[ $ROLE != balancer ]] && ((${#BACKENDS[@]})); then usage_error "--backend is for the balancer role"; fi
    if [[ $ROLE != balancer && $ROLE != nats ]] && { [[ -n $LISTEN ]] || ((PRINT_CONFIG)); }; then
        usage_error "--listen and --print-config are for the balancer and nats roles"
    fi
    if [[ $ROLE != nats ]] &&
        { [[ -n $NATS_USER$NATS_TLS_CERT$NATS_TLS_KEY$CLUSTER_LISTEN ]] || ((USE_TOKEN || ${#ROUTES[@]})); }; then
        usage_error "--user, --token, --tls-cert, --tls-key, --route and --cluster-listen are for the nats role"
    fi
    case $ROLE in
    server)
        [[ -z $NODE || -n $NATS_URLS ]] || usage_error "--node needs --nats"
        ;;
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
        LISTEN=${LISTEN:-80}
        ;;
    nats)
        LISTEN=${LISTEN:-$NATS_DEFAULT_PORT}
        CLUSTER_LISTEN=${CLUSTER_LISTEN:-$NATS_ROUTE_PORT}
        [[ -z $NATS_USER ]] || ((!USE_TOKEN)) || usage_error "--user and --token: one or the other"
        if [[ -n $NATS_USER ]]; then
            NATS_SECRET=${NATS_PASSWORD:-}
            [[ -n $NATS_SECRET ]] || usage_error "--user needs the password in \$NATS_PASSWORD"
        elif ((USE_TOKEN)); then
            NATS_SECRET=${NATS_TOKEN:-}
            [[ -n $NATS_SECRET ]] || usage_error "--token needs the token in \$NATS_TOKEN"
        fi
        if [[ -n $NATS_SECRET ]] && ! valid_secret "$NATS_SECRET"; then
            usage_error "the password or token may hold letters, digits and . _ ~ - only"
        fi
        if [[ -n $NATS_TLS_CERT && -z $NATS_TLS_KEY ]]; then usage_error "--tls-cert needs --tls-key"; fi
        if [[ -z $NATS_TLS_CERT && -n $NATS_TLS_KEY ]]; then usage_error "--tls-key needs --tls-cert"; fi
        if ((USE_TOKEN && ${#ROUTES[@]})); then
            usage_error "--route with --token: routes log in with a user and password; use --user"
        fi
        ;;
    esac
}

main() {
    parse_args "$@"
    if ((PRINT_CONFIG)); then
        if [[ $ROLE == balancer ]]; then nginx_config; else nats_config; fi
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
