#!/usr/bin/env bash
# cloud-setup.sh: prepare a fresh cloud box to benchmark uppercut-mio-server.
#
# One script, three roles (server, client, balancer); run `--help` for usage.
# Every step checks the machine first and says "already ..." when there is
# nothing to do, so running it twice is safe and the second run changes
# nothing. `--dry-run` prints each command that would change the system
# instead of running it, and needs neither root nor network.
set -euo pipefail

PROG=$(basename "$0")
# The repository is wherever this script lives: the server role builds there.
REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

BIN_NAME=uppercut-mio-server
DEFAULT_PORT=9000
NGINX_CONF=/etc/nginx/conf.d/uppercut-mio-server.conf
NGINX_MAIN_CONF=/etc/nginx/nginx.conf
SYSCTL_FILE=/etc/sysctl.d/60-uppercut-mio-server.conf
LIMITS_FILE=/etc/security/limits.d/60-uppercut-mio-server.conf
NOFILE=1048576
# Debian ships worker_connections 768; one proxied request holds two
# connections (client + upstream), so `wrk -c1000` needs more than that.
NGINX_WORKER_CONNECTIONS=4096

usage() {
    cat <<EOF
Usage: $PROG [--dry-run] ROLE [options]

Roles:
  server   [--bind ADDR:PORT]
        Install build tools, Rust (rustup) if cargo is missing, perf and
        cargo-flamegraph; raise net.core.somaxconn and the open-files limit;
        build the release binary in $REPO_DIR;
        print how to start the server and how to record a flamegraph.
        --bind only changes the printed start command (default 0.0.0.0:$DEFAULT_PORT).

  client   --target HOST[:PORT]
        Install wrk (package, or from source where there is none) and print
        the seed loads aimed at HOST:PORT (port $DEFAULT_PORT if omitted).

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

# ---------------------------------------------------------------- output --

say() { printf '%s\n' "$*"; }
step() { printf '\n==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
already() { printf '    already %s\n' "$*"; }
warn() { printf '%s: warning: %s\n' "$PROG" "$*" >&2; }
die() {
    printf '%s: error: %s\n' "$PROG" "$*" >&2
    exit 1
}
usage_error() {
    printf '%s: %s\n\n' "$PROG" "$*" >&2
    usage >&2
    exit 2
}

# Quote a command for display so it can be pasted back into a shell.
show_cmd() {
    local out="" arg
    for arg in "$@"; do
        if [[ $arg =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
            out+="$arg "
        else
            out+="'${arg//\'/\'\\\'\'}' "
        fi
    done
    printf '%s' "${out% }"
}

# ------------------------------------------------------- changing things --

DRY_RUN=0
CHANGES=0
APT_UPDATED=0
SUDO=()
if ((EUID != 0)); then SUDO=(sudo); fi

# run CMD...: every command that changes the system goes through here, so
# --dry-run can print it instead and the final summary can count it.
run() {
    CHANGES=$((CHANGES + 1))
    if ((DRY_RUN)); then
        info "[dry-run] $(show_cmd "$@")"
        return 0
    fi
    info "+ $(show_cmd "$@")"
    "$@"
}

# as_root CMD...: run() with sudo in front unless we are root already.
as_root() {
    if ((${#SUDO[@]})) && ((!DRY_RUN)) && ! command -v sudo >/dev/null 2>&1; then
        die "'$(show_cmd "$@")' needs root: run as root or install sudo"
    fi
    run "${SUDO[@]}" "$@"
}

# write_root_file PATH MODE CONTENT: install a root-owned config file.
# Sets FILE_CHANGED=1 when it wrote something, 0 when the file was current.
FILE_CHANGED=0
write_root_file() {
    local path=$1 mode=$2 content=$3
    FILE_CHANGED=0
    if [[ -f $path ]] && printf '%s\n' "$content" | cmp -s - "$path"; then
        already "up to date: $path"
        return 0
    fi
    FILE_CHANGED=1
    CHANGES=$((CHANGES + 1))
    if ((DRY_RUN)); then
        info "[dry-run] write $path (mode $mode${SUDO[*]:+, via sudo tee}):"
        printf '%s\n' "$content" | sed 's/^/        | /'
        return 0
    fi
    info "+ write $path"
    if [[ ! -d $(dirname "$path") ]]; then
        "${SUDO[@]}" install -d -m 0755 "$(dirname "$path")"
    fi
    printf '%s\n' "$content" | "${SUDO[@]}" tee "$path" >/dev/null
    "${SUDO[@]}" chmod "$mode" "$path"
}

# ------------------------------------------------------------------ apt --

pkg_installed() {
    local status
    status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) || return 1
    [[ $status == "install ok installed" ]]
}

# Print the candidate version apt would install, "(none)" when there is no
# such package, or nothing when the package lists do not know it.
apt_candidate() {
    local policy
    policy=$(apt-cache policy "$1" 2>/dev/null) || true
    awk '/Candidate:/ { print $2; exit }' <<<"$policy"
}

apt_has_package() {
    local cand
    cand=$(apt_candidate "$1")
    [[ -n $cand && $cand != "(none)" ]]
}

# Fresh cloud images ship without package lists; refresh them once per run,
# and only when something is about to be installed.
apt_update_once() {
    ((APT_UPDATED)) && return 0
    APT_UPDATED=1
    as_root apt-get update
}

# apt_install PKG...: install whichever of the packages are missing.
apt_install() {
    local missing=() pkg
    for pkg in "$@"; do
        pkg_installed "$pkg" || missing+=("$pkg")
    done
    if ((${#missing[@]} == 0)); then
        already "installed: $*"
        return 0
    fi
    apt_update_once
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${missing[@]}"
}

# ------------------------------------------------------------ platform --

OS_ID=""
OS_VERSION=""
detect_os() {
    [[ -r /etc/os-release ]] || die "cannot read /etc/os-release: not a Debian or Ubuntu system?"
    local id like fields
    # A subshell keeps os-release's variables out of this script.
    # shellcheck source=/dev/null
    fields=$(. /etc/os-release && printf '%s\n%s\n%s\n' "${ID:-}" "${ID_LIKE:-}" "${VERSION_ID:-}")
    { read -r id; read -r like; read -r OS_VERSION; } <<<"$fields"
    case $id in
    debian)
        OS_ID=debian
        [[ $OS_VERSION == 12 ]] || warn "written for Debian 12, this is Debian ${OS_VERSION:-unknown}"
        ;;
    ubuntu)
        OS_ID=ubuntu
        [[ $OS_VERSION == 22.04 || $OS_VERSION == 24.04 ]] ||
            warn "written for Ubuntu 22.04/24.04, this is Ubuntu ${OS_VERSION:-unknown}"
        ;;
    *)
        case " $like " in
        *" ubuntu "*) OS_ID=ubuntu ;;
        *" debian "*) OS_ID=debian ;;
        *) die "unsupported system '$id': this script knows Debian and Ubuntu" ;;
        esac
        warn "untested system '$id', treating it as $OS_ID"
        ;;
    esac
    local who="(root)" mode=""
    ((EUID == 0)) || who="(sudo for system changes)"
    ((DRY_RUN)) && mode=", dry run"
    say "System: $OS_ID ${OS_VERSION:-?}, user $(id -un) $who$mode"
}

systemd_running() { [[ -d /run/systemd/system ]]; }

# Current value of a sysctl key, read from /proc so non-root dry runs work
# even where /usr/sbin is not on PATH.
sysctl_value() {
    local file="/proc/sys/${1//.//}"
    [[ -r $file ]] && tr -s '[:space:]' ' ' <"$file" | sed 's/ $//'
}

# ---------------------------------------------------------- server role --

ensure_rust() {
    # rustup installs into ~/.cargo/bin, which a fresh shell may not have on PATH yet.
    export PATH="$HOME/.cargo/bin:$PATH"
    if cargo --version >/dev/null 2>&1; then
        already "have $(cargo --version) at $(command -v cargo)"
        return 0
    fi
    if command -v rustup >/dev/null 2>&1; then
        # rustup present but no default toolchain: cargo is only a shim.
        run rustup default stable
        return 0
    fi
    # The official rustup.rs installer, for the invoking user (not root).
    run sh -c "curl --proto =https --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain stable"
    # sh has no pipefail: a failed download would look like success.
    if ((!DRY_RUN)) && ! cargo --version >/dev/null 2>&1; then
        die "rustup did not leave a working cargo in ~/.cargo/bin"
    fi
}

ensure_perf() {
    if perf --version >/dev/null 2>&1; then
        already "have $(perf --version)"
        return 0
    fi
    if [[ $OS_ID == ubuntu ]]; then
        # Ubuntu's perf is a wrapper that needs the tools built for the
        # running kernel (e.g. linux-tools-6.8.0-1012-aws).
        local kernel_pkg
        kernel_pkg="linux-tools-$(uname -r)"
        apt_update_once
        if ((!DRY_RUN)) && ! apt_has_package "$kernel_pkg"; then
            warn "no $kernel_pkg package for this kernel; installing linux-tools-generic instead"
            kernel_pkg=linux-tools-generic
        fi
        apt_install linux-tools-common "$kernel_pkg"
    else
        apt_install linux-perf
    fi
}

ensure_cargo_flamegraph() {
    if command -v cargo-flamegraph >/dev/null 2>&1; then
        already "have cargo-flamegraph at $(command -v cargo-flamegraph)"
        return 0
    fi
    # --locked builds what upstream tested; if its lockfile names a crate
    # version the registry no longer serves (yanked), resolve afresh.
    run cargo install --locked flamegraph || {
        warn "cargo install --locked flamegraph failed; retrying without --locked"
        run cargo install flamegraph
    }
}

ensure_sysctl() {
    local content
    content="# Written by cloud-setup.sh for uppercut-mio-server load tests.
# A deeper accept queue, so bursts of new connections are not dropped.
net.core.somaxconn = 65535
net.ipv4.tcp_max_syn_backlog = 65535
# Let a non-root user profile with perf (flamegraph/record.sh) and see
# kernel symbols. Meant for a dedicated benchmark box.
kernel.perf_event_paranoid = 1
kernel.kptr_restrict = 0"
    write_root_file "$SYSCTL_FILE" 0644 "$content"

    # Apply now if the file is new or the kernel does not match it yet.
    local key want have stale=0
    while IFS='=' read -r key want; do
        key=${key// /}
        want=${want# }
        [[ -z $key || $key == \#* ]] && continue
        have=$(sysctl_value "$key" || true)
        [[ $have == "$want" ]] || stale=1
    done <<<"$content"
    if ((FILE_CHANGED || stale)); then
        as_root sysctl -p "$SYSCTL_FILE" ||
            warn "could not apply $SYSCTL_FILE now (container?); it applies at next boot"
    else
        already "applied: net.core.somaxconn = $(sysctl_value net.core.somaxconn)"
    fi
}

ensure_limits() {
    local content
    content="# Written by cloud-setup.sh for uppercut-mio-server load tests:
# one file descriptor per connection, so allow many. Applies to new login
# sessions; '*' does not cover root, hence the root lines.
*    soft nofile $NOFILE
*    hard nofile $NOFILE
root soft nofile $NOFILE
root hard nofile $NOFILE"
    write_root_file "$LIMITS_FILE" 0644 "$content"
}

build_release() {
    local bin="$REPO_DIR/target/release/$BIN_NAME"
    if [[ ! -f $REPO_DIR/Cargo.toml ]]; then
        local why="no Cargo.toml in $REPO_DIR: run the copy of this script inside the repository"
        ((DRY_RUN)) || die "$why"
        warn "$why"
    fi
    if ((DRY_RUN)); then
        CHANGES=$((CHANGES + 1))
        info "[dry-run] cd $(show_cmd "$REPO_DIR") && cargo build --release"
        return 0
    fi
    # cargo is its own "check first": it relinks only when sources changed,
    # so an unchanged binary timestamp means there was nothing to do.
    local before after
    before=$(stat -c %Y "$bin" 2>/dev/null || echo none)
    info "+ cd $(show_cmd "$REPO_DIR") && cargo build --release"
    (cd "$REPO_DIR" && cargo build --release)
    after=$(stat -c %Y "$bin" 2>/dev/null || echo none)
    [[ -x $bin ]] || die "cargo build finished but $bin is missing"
    if [[ $before == "$after" ]]; then
        already "built, up to date: $bin"
    else
        CHANGES=$((CHANGES + 1))
        info "built $bin"
    fi
}

role_server() {
    step "Build tools"
    apt_install build-essential git curl pkg-config ca-certificates
    step "Rust toolchain"
    ensure_rust
    step "perf"
    ensure_perf
    step "cargo-flamegraph"
    ensure_cargo_flamegraph
    step "Kernel accept queue (sysctl)"
    ensure_sysctl
    step "Open-files limit"
    ensure_limits
    step "Release build"
    build_release

    local repo
    repo=$(show_cmd "$REPO_DIR")
    step "Next"
    say "Start the server (from a new login shell, so the open-files limit applies):"
    say "  cd $repo && ./target/release/$BIN_NAME --bind $BIND"
    say "Record a flamegraph under local wrk load (writes flamegraph/local.svg):"
    say "  cd $repo && flamegraph/record.sh --dispatch local"
}

# ---------------------------------------------------------- client role --

ensure_wrk() {
    if command -v wrk >/dev/null 2>&1; then
        already "have wrk at $(command -v wrk)"
        return 0
    fi
    apt_update_once
    # Debian main and Ubuntu universe both package wrk; `apt-cache policy`
    # says whether this box can see it.
    if apt_has_package wrk; then
        apt_install wrk
        return 0
    fi
    if ((DRY_RUN)) && [[ -z $(apt_candidate wrk) ]]; then
        info "(package lists unknown before apt-get update: the real run installs the wrk package if there is one, else builds it as below)"
    fi
    # No package: build from source with git, against the system OpenSSL.
    local src=/usr/local/src/wrk
    apt_install build-essential git libssl-dev
    if [[ -d $src/.git ]]; then
        already "cloned: $src"
    else
        as_root git clone --depth 1 https://github.com/wg/wrk.git "$src"
    fi
    as_root make -C "$src" -j "$(nproc)" WITH_OPENSSL=/usr
    as_root install -m 0755 "$src/wrk" /usr/local/bin/wrk
}

role_client() {
    step "wrk"
    ensure_wrk
    step "Seed loads (60 s each; add --latency for percentiles)"
    local t="http://$TARGET/"
    say "  wrk -t4 -c128 -d60s $t"
    say "  wrk -t2 -c10 -d60s $t"
    say "  wrk -t10 -c50 -d60s $t"
    say "  wrk -t10 -c1000 -d60s $t"
}

# -------------------------------------------------------- balancer role --

# The nginx config for the balancer, on stdout. It belongs in nginx's http
# context (conf.d/). scripts/scale-out.sh runs exactly this text, so keep
# anything box-specific (logs, pid, workers) out of it.
nginx_config() {
    local backend
    printf '# uppercut-mio-server load balancer, written by cloud-setup.sh balancer.\n'
    printf '# Re-run the script to change it: hand edits are overwritten.\n'
    printf 'upstream uppercut_mio_server {\n'
    for backend in "${BACKENDS[@]}"; do
        printf '    server %s;\n' "$backend"
    done
    cat <<'EOF'
    # Idle connections to the backends kept open per worker, so proxied
    # requests reuse them instead of paying a TCP handshake each.
    keepalive 64;
    keepalive_requests 100000;
}

server {
EOF
    printf '    listen %s;\n' "$LISTEN"
    cat <<'EOF'
    # Keep client connections as long as a benchmark does, like a backend would.
    keepalive_requests 100000;

    location / {
        proxy_pass http://uppercut_mio_server;
        # HTTP/1.1 and an empty Connection header are what let nginx put
        # upstream connections back into the keepalive pool.
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $host;
    }
}
EOF
}

nginx_installed() { [[ -x /usr/sbin/nginx ]] || command -v nginx >/dev/null 2>&1; }

ensure_nginx() {
    if nginx_installed; then
        local ng
        ng=$(command -v nginx || echo /usr/sbin/nginx)
        already "have nginx ($("$ng" -v 2>&1 | head -n1))"
        return 0
    fi
    apt_update_once
    # nginx-light is enough for proxying; newer releases dropped it.
    if apt_has_package nginx-light; then
        apt_install nginx-light
    else
        apt_install nginx
    fi
}

# Debian's nginx.conf allows 768 connections per worker; raise it (and the
# worker fd limit) so a -c1000 load through the balancer is not refused.
ensure_nginx_capacity() {
    if [[ ! -f $NGINX_MAIN_CONF ]]; then
        if ((DRY_RUN)); then
            info "[dry-run] after install: raise worker_connections in $NGINX_MAIN_CONF to $NGINX_WORKER_CONNECTIONS"
            CHANGES=$((CHANGES + 1))
            return 0
        fi
        die "$NGINX_MAIN_CONF is missing after installing nginx"
    fi
    local current
    current=$(awk '$1 == "worker_connections" { gsub(";", "", $2); print $2; exit }' "$NGINX_MAIN_CONF")
    if [[ -n $current && $current -ge $NGINX_WORKER_CONNECTIONS ]]; then
        already "worker_connections $current in $NGINX_MAIN_CONF"
    elif [[ -n $current ]]; then
        # The first edit keeps the distribution's file as nginx.conf.orig.
        as_root sed -i.orig -E \
            "s/^([[:space:]]*worker_connections[[:space:]]+)[0-9]+;/\\1$NGINX_WORKER_CONNECTIONS;/" \
            "$NGINX_MAIN_CONF"
    else
        warn "no worker_connections line in $NGINX_MAIN_CONF; leaving it as it is"
    fi
    if grep -Eq '^[[:space:]]*worker_rlimit_nofile[[:space:]]' "$NGINX_MAIN_CONF"; then
        already "worker_rlimit_nofile set in $NGINX_MAIN_CONF"
    else
        as_root sed -i -E \
            "0,/^[[:space:]]*worker_processes[[:space:]].*/s//&\\nworker_rlimit_nofile $((NGINX_WORKER_CONNECTIONS * 2));/" \
            "$NGINX_MAIN_CONF"
    fi
}

# The distribution's default site listens on port 80; disable it only when
# it would take the port we want.
disable_conflicting_default() {
    local port=${LISTEN##*:} site found=0
    if ((DRY_RUN)) && ! nginx_installed; then
        info "[dry-run] after install: disable the default site if it listens on port $port"
        CHANGES=$((CHANGES + 1))
        return 0
    fi
    for site in /etc/nginx/sites-enabled/default /etc/nginx/conf.d/default.conf; do
        [[ -e $site ]] || continue
        if grep -Eq "^[[:space:]]*listen[[:space:]]+([^;]*:)?$port([[:space:];]|$)" "$site"; then
            found=1
            if [[ -L $site ]]; then
                # A symlink into sites-available: removing it keeps the original.
                as_root rm "$site"
            else
                as_root mv "$site" "$site.disabled-by-cloud-setup"
            fi
        fi
    done
    ((found)) || already "no default site on port $port"
}

nginx_pid() {
    local pid
    pid=$(cat /run/nginx.pid 2>/dev/null) || return 1
    [[ -n $pid && -d /proc/$pid ]] && printf '%s' "$pid"
}

ensure_nginx_running() {
    local changed=$1
    if nginx_pid >/dev/null; then
        if ((changed)); then
            as_root nginx -t
            if systemd_running; then as_root systemctl reload nginx; else as_root nginx -s reload; fi
        else
            already "running (pid $(nginx_pid)) with this config"
        fi
        return 0
    fi
    as_root nginx -t
    if systemd_running; then
        as_root systemctl enable --now nginx
    else
        # No systemd (containers): start the daemon directly.
        as_root nginx
    fi
}

role_balancer() {
    step "nginx"
    ensure_nginx
    step "nginx config"
    local before=$CHANGES
    ensure_nginx_capacity
    disable_conflicting_default
    write_root_file "$NGINX_CONF" 0644 "$(nginx_config)"
    local changed=$((CHANGES > before))
    step "nginx service"
    ensure_nginx_running "$changed"

    step "Next"
    say "Balancing port ${LISTEN##*:} over: ${BACKENDS[*]}"
    say "Check it:  curl -s http://127.0.0.1:${LISTEN##*:}/"
    say "Load it from the client box:  ./cloud-setup.sh client --target <this-box>:${LISTEN##*:}"
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
