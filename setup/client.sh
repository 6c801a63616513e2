# shellcheck shell=bash
# setup/client.sh: the client role: wrk and oha, and the loads to run with
# them. Sourced by cloud-setup.sh, which sets TARGET; ensure_rust comes from
# setup/server.sh.

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

# oha sends requests at a fixed rate whether or not earlier ones came back
# (open loop), which wrk cannot; no distribution packages it, so it is
# built with cargo.
ensure_oha() {
    # cargo installs into ~/.cargo/bin, which a fresh shell may not have on PATH yet.
    export PATH="$HOME/.cargo/bin:$PATH"
    if command -v oha >/dev/null 2>&1; then
        already "have $(oha --version 2>/dev/null || echo oha) at $(command -v oha)"
        return 0
    fi
    # A C compiler and pkg-config for the crates oha builds with.
    apt_install build-essential curl pkg-config ca-certificates
    ensure_rust
    info "(building oha takes about 10 minutes on 2 cores)"
    # --locked builds what upstream tested; if its lockfile names a crate
    # version the registry no longer serves (yanked), resolve afresh.
    run cargo install --locked oha || {
        warn "cargo install --locked oha failed; retrying without --locked"
        run cargo install oha
    }
}

role_client() {
    step "wrk"
    ensure_wrk
    step "oha (open-loop load)"
    ensure_oha
    local t="http://$TARGET/"
    step "Seed loads (60 s each; add --latency for percentiles)"
    say "  wrk -t4 -c128 -d60s $t"
    say "  wrk -t2 -c10 -d60s $t"
    say "  wrk -t10 -c50 -d60s $t"
    say "  wrk -t10 -c1000 -d60s $t"
    step "A connection per request (closed loop)"
    say "  wrk -t2 -c32 -d60s -H 'Connection: close' --latency $t"
    step "Open loop: a fixed request rate, latency corrected for coordinated omission"
    say "  oha -z 60s -c 64 -q 2000 --latency-correction --no-tui $t"
    say "  oha -z 60s -c 64 -q 10000 --latency-correction --no-tui $t"
}
