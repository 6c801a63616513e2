# shellcheck shell=bash
# setup/server.sh: the server role: toolchain, perf, kernel limits and the
# release build. Sourced by cloud-setup.sh, which sets REPO_DIR, BIND,
# NATS_URLS and NODE.

BIN_NAME=uppercut-mio-server
SYSCTL_FILE=/etc/sysctl.d/60-uppercut-mio-server.conf
LIMITS_FILE=/etc/security/limits.d/60-uppercut-mio-server.conf
NOFILE=1048576

# Current value of a sysctl key, read from /proc so non-root dry runs work
# even where /usr/sbin is not on PATH.
sysctl_value() {
    local file="/proc/sys/${1//.//}"
    [[ -r $file ]] && tr -s '[:space:]' ' ' <"$file" | sed 's/ $//'
}

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
        already "applied: net.core.somaxconn = $(sysctl_value net.core.somaxconn)," \
            "kernel.perf_event_paranoid = $(sysctl_value kernel.perf_event_paranoid)," \
            "kernel.kptr_restrict = $(sysctl_value kernel.kptr_restrict)"
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
root hard nofile $NOFILE
# Real-time priority 1, which the server gives uppercut's scheduler thread
# (root has it anyway).
*    soft rtprio 1
*    hard rtprio 1"
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
    step "Kernel settings (sysctl): accept queue; perf_event_paranoid=1 and kptr_restrict=0 for profiling"
    ensure_sysctl
    step "Limits: open files; real-time priority 1 for uppercut's scheduler thread"
    ensure_limits
    step "Release build"
    build_release

    local repo start
    repo=$(show_cmd "$REPO_DIR")
    start=(./target/release/"$BIN_NAME" --bind "$BIND")
    [[ -z $NATS_URLS ]] || start+=(--nats "$NATS_URLS")
    [[ -z $NODE ]] || start+=(--node "$NODE")
    step "Next"
    say "Start the server (from a new login shell, so the new limits apply):"
    say "  cd $repo && $(show_cmd "${start[@]}")"
    if [[ -n $NATS_URLS ]]; then
        say "In the cluster, its actors are NAME@${NODE:-HOSTNAME} to the other servers (--node, default"
        say "the host name: each server needs its own). A route answered by one node for all,"
        say "as the binary's /count:  --actor-route /count=counter@NODE  on the other servers."
        [[ $NATS_URLS != *tls://* ]] ||
            say "tls:// trusts the system's roots; --nats-ca CA.pem trusts a private CA instead."
        say "Add --metrics 127.0.0.1:9090 for the uppercut_nats_* series (docs/operations.md)."
    else
        say "To join a cluster (a NATS server from ./cloud-setup.sh nats), add:"
        say "  --nats nats://NATS-HOST:4222 --node NAME     (each server its own NAME)"
    fi
    say "For HTTPS, add the certificate chain and key (PEM; SIGHUP reloads them):"
    say "  --tls-cert /etc/ssl/example/fullchain.pem --tls-key /etc/ssl/example/privkey.pem"
    say "Record a flamegraph under local wrk load (writes flamegraph/local.svg):"
    say "  cd $repo && flamegraph/record.sh --dispatch local"
}
