# shellcheck shell=bash
# setup/client.sh: the client role: wrk, and the seed loads to run with it.
# Sourced by cloud-setup.sh, which sets TARGET.

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
