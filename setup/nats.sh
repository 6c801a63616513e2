# shellcheck shell=bash
# setup/nats.sh: the nats role: a nats-server for a cluster of servers
# (uppercut-mio-server --nats). Sourced by cloud-setup.sh, which sets
# LISTEN, NATS_USER, NATS_SECRET, NATS_TLS_CERT, NATS_TLS_KEY, ROUTES and
# CLUSTER_LISTEN; nats_config is also what `cloud-setup.sh nats
# --print-config` prints.

# The Debian package's config file, which its systemd unit starts the
# server with (as user nats).
NATS_CONF=/etc/nats-server.conf
NATS_BIN=/usr/sbin/nats-server
NATS_MONITOR=127.0.0.1:8222
# Without systemd (containers) the server is started with start-stop-daemon.
NATS_PID_FILE=/run/nats-server.pid
NATS_LOG_FILE=/var/log/nats-server.log
NATS_HEADER='# nats-server for uppercut-mio-server, written by cloud-setup.sh nats.'

# [ADDR:]PORT as nats-server's "host:port": a bare port listens on every
# address.
nats_hostport() {
    if [[ $1 == *:* ]]; then printf '%s' "$1"; else printf '0.0.0.0:%s' "$1"; fi
}

# The nats-server config, on stdout; SECRET stands for the password or
# token (pass "***" to show it masked). scripts/scale-out.sh runs exactly
# this text, so keep anything box-specific (logs, pid file) out of it.
nats_config() {
    local secret=${1-$NATS_SECRET} route
    printf '%s\n' "$NATS_HEADER"
    printf '# Re-run the script to change it: hand edits are overwritten.\n'
    printf 'listen: "%s"\n' "$(nats_hostport "$LISTEN")"
    printf '# Monitoring (/varz, /connz, /subsz), on loopback only.\n'
    printf 'http: "%s"\n' "$NATS_MONITOR"
    if [[ -n $NATS_USER ]]; then
        printf '\nauthorization {\n    user: "%s"\n    password: "%s"\n}\n' "$NATS_USER" "$secret"
    elif [[ -n $NATS_SECRET ]]; then
        printf '\nauthorization {\n    token: "%s"\n}\n' "$secret"
    fi
    if [[ -n $NATS_TLS_CERT ]]; then
        printf '\n# Clients must use TLS (tls:// URLs, or the server notices).\n'
        printf 'tls {\n    cert_file: "%s"\n    key_file: "%s"\n}\n' "$NATS_TLS_CERT" "$NATS_TLS_KEY"
    fi
    if ((${#ROUTES[@]})); then
        printf '\n# Routes to the other NATS servers: one cluster, whichever server a\n'
        printf '# client is on. Plain TCP: keep the cluster port on a private network.\n'
        printf 'cluster {\n    name: "uppercut"\n'
        printf '    listen: "%s"\n' "$(nats_hostport "$CLUSTER_LISTEN")"
        local login=""
        if [[ -n $NATS_USER ]]; then
            printf '    authorization {\n        user: "%s"\n        password: "%s"\n    }\n' \
                "$NATS_USER" "$secret"
            login="$NATS_USER:$secret@"
        fi
        printf '    routes: [\n'
        for route in "${ROUTES[@]}"; do
            printf '        "nats-route://%s%s"\n' "$login" "$route"
        done
        printf '    ]\n}\n'
    fi
}

nats_installed() { [[ -x $NATS_BIN ]]; }

ensure_nats_server() {
    if nats_installed; then
        already "have $("$NATS_BIN" --version 2>&1 | head -n1) at $NATS_BIN"
        return 0
    fi
    apt_update_once
    if ! apt_has_package nats-server; then
        if ((DRY_RUN)) && [[ -z $(apt_candidate nats-server) ]]; then
            info "(package lists unknown before apt-get update: the real run stops here if there is no nats-server package)"
        else
            die "no nats-server package for $OS_ID $OS_VERSION (Debian 12 and Ubuntu's universe have one)"
        fi
    fi
    apt_install nats-server
}

# The package's own config is kept as nats-server.conf.orig, once; the
# file is made readable by root and group nats only before a password or
# token goes into it.
prepare_nats_conf() {
    if [[ ! -e $NATS_CONF ]]; then
        if ((DRY_RUN)); then
            info "[dry-run] after install: make $NATS_CONF mode 0640, owner root:nats"
            CHANGES=$((CHANGES + 1))
            return 0
        fi
        as_root install -m 0640 -o root -g nats /dev/null "$NATS_CONF"
        return 0
    fi
    if [[ -e $NATS_CONF.orig ]]; then
        already "kept the package's config as $NATS_CONF.orig"
    elif [[ -r $NATS_CONF && $(head -n1 "$NATS_CONF") != "$NATS_HEADER" ]]; then
        as_root cp -p "$NATS_CONF" "$NATS_CONF.orig"
    fi
    local have
    have=$(stat -c '%a %U:%G' "$NATS_CONF")
    if [[ $have == "640 root:nats" ]]; then
        already "mode 0640, owner root:nats: $NATS_CONF"
    else
        as_root chown root:nats "$NATS_CONF"
        as_root chmod 0640 "$NATS_CONF"
    fi
}

# Checks a TLS file exists and that user nats, which runs the server, can
# read it.
check_nats_tls_file() {
    local file=$1
    if [[ ! -e $file ]]; then
        ((DRY_RUN)) || die "$file does not exist"
        warn "$file does not exist (yet)"
        return 0
    fi
    if ((EUID == 0)) && id nats >/dev/null 2>&1 && command -v runuser >/dev/null 2>&1 &&
        ! runuser -u nats -- test -r "$file"; then
        warn "user nats cannot read $file: nats-server will not start until it can"
    fi
}

nats_pid() {
    local pid
    pid=$(cat "$NATS_PID_FILE" 2>/dev/null) || return 1
    [[ -n $pid && -d /proc/$pid ]] && printf '%s' "$pid"
}

nats_running() {
    if systemd_running; then
        systemctl is-active --quiet nats-server
    else
        nats_pid >/dev/null
    fi
}

# Without systemd: start it in the background as user nats, logging to
# $NATS_LOG_FILE.
start_nats_daemon() {
    if [[ ! -e $NATS_LOG_FILE ]]; then
        as_root install -m 0640 -o nats -g nats /dev/null "$NATS_LOG_FILE"
    fi
    as_root start-stop-daemon --start --background --make-pidfile --pidfile "$NATS_PID_FILE" \
        --chuid nats:nats --exec "$NATS_BIN" -- -c "$NATS_CONF" -l "$NATS_LOG_FILE"
}

# nats-server -t: check the config before a (re)start puts it in use.
test_nats_config() {
    if nats_installed && "$NATS_BIN" --help 2>&1 | grep -q -- '^ *-t '; then
        as_root "$NATS_BIN" -t -c "$NATS_CONF"
    fi
}

ensure_nats_running() {
    local changed=$1
    if systemd_running && nats_installed; then
        if systemctl is-enabled --quiet nats-server 2>/dev/null; then
            already "enabled at boot: nats-server"
        else
            as_root systemctl enable nats-server
        fi
    fi
    if nats_running; then
        if ((!changed)); then
            already "running with this config"
            return 0
        fi
        test_nats_config
        # A reload cannot move the listener, so restart.
        if systemd_running; then
            as_root systemctl restart nats-server
        else
            as_root start-stop-daemon --stop --pidfile "$NATS_PID_FILE" --retry TERM/5 --remove-pidfile
            start_nats_daemon
        fi
    else
        test_nats_config
        if systemd_running; then as_root systemctl start nats-server; else start_nats_daemon; fi
    fi
    ((DRY_RUN)) && return 0
    # Up when its client port takes a connection.
    local hostport host port
    hostport=$(nats_hostport "$LISTEN")
    host=${hostport%:*} port=${hostport##*:}
    case $host in
    0.0.0.0) host=127.0.0.1 ;;
    "[::]") host=::1 ;;
    \[*\]) host=${host#[} host=${host%]} ;;
    esac
    for _ in $(seq 50); do
        if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
            info "nats-server answers on $hostport"
            return 0
        fi
        sleep 0.1
    done
    if systemd_running; then
        die "nats-server is not listening on $hostport: see journalctl -u nats-server"
    fi
    die "nats-server is not listening on $hostport: see $NATS_LOG_FILE"
}

role_nats() {
    local hostport
    hostport=$(nats_hostport "$LISTEN")
    if [[ -z $NATS_SECRET && ${hostport%:*} != 127.* && ${hostport%:*} != "[::1]" && ${hostport%:*} != localhost ]]; then
        warn "no --user or --token: anyone who can reach $hostport can send requests to every server's actors"
    fi
    step "nats-server"
    ensure_nats_server
    if [[ -n $NATS_TLS_CERT ]]; then
        step "TLS files"
        check_nats_tls_file "$NATS_TLS_CERT"
        check_nats_tls_file "$NATS_TLS_KEY"
    fi
    step "nats-server config"
    local before=$CHANGES
    prepare_nats_conf
    write_root_file "$NATS_CONF" 0640 "$(nats_config)" "$(nats_config '***')"
    local changed=$((CHANGES > before))
    step "nats-server service"
    ensure_nats_running "$changed"

    local scheme=nats login=""
    [[ -n $NATS_TLS_CERT ]] && scheme=tls
    if [[ -n $NATS_USER ]]; then
        login="$NATS_USER:\$NATS_PASSWORD@"
    elif [[ -n $NATS_SECRET ]]; then
        login="\$NATS_TOKEN@"
    fi
    step "Next"
    say "Listening on $hostport; each server joins with (a --node of its own):"
    say "  --nats $scheme://$login<this-box>:${LISTEN##*:} --node NAME"
    if [[ -n $NATS_TLS_CERT ]]; then
        say "  and --nats-ca CA.pem unless $NATS_TLS_CERT chains to the system's roots;"
        say "  <this-box> must be a name the certificate holds."
    fi
    if ((${#ROUTES[@]})); then
        say "Routes to: ${ROUTES[*]} (cluster port ${CLUSTER_LISTEN##*:} here)."
    fi
    say "On a server box:  ./cloud-setup.sh server --nats $scheme://$login<this-box>:${LISTEN##*:} --node NAME"
    say "See who is connected (one connection per server poller, named NODE/N):"
    say "  curl -s http://$NATS_MONITOR/connz"
}
