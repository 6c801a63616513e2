# shellcheck shell=bash
# scripts/nats-server.sh: sourced by the scripts that run JetStream checks.
#
# use_nats_that_syncs REPO_DIR: exports NATS_SERVER as a nats-server that
# takes `sync_interval: always` (2.10 and later), unless NATS_SERVER is set
# already or the installed one has it: with an older one installed
# (Debian's 2.9.10) and Go present, v2.12.3 is built once into
# REPO_DIR/target/nats-server-2.12; without Go, the run goes on with what
# is installed, and says so. Needs messages.sh's `say` and `die`.
use_nats_that_syncs() {
    local repo=$1 minor go
    if [[ -n ${NATS_SERVER:-} ]]; then
        say "== nats-server: $("$NATS_SERVER" --version)"
        return 0
    fi
    minor=$(nats-server --version 2>/dev/null | sed -n 's/.*v2\.\([0-9]*\)\..*/\1/p' || true)
    if [[ -z $minor || $minor -lt 10 ]]; then
        go=$(command -v go || echo /usr/local/go/bin/go)
        if [[ -x $go ]]; then
            if [[ ! -x $repo/target/nats-server-2.12/nats-server ]]; then
                say "== nats-server ${minor:+2.$minor }takes no sync_interval: building v2.12.3 (once)"
                GOBIN=$repo/target/nats-server-2.12 "$go" install \
                    github.com/nats-io/nats-server/v2@v2.12.3 || die "go install nats-server failed"
            fi
            export NATS_SERVER=$repo/target/nats-server-2.12/nats-server
        else
            say "== nats-server 2.$minor and no Go: JetStream runs without sync_interval: always"
        fi
    fi
    say "== nats-server: $("${NATS_SERVER:-nats-server}" --version)"
}
