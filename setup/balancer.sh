# shellcheck shell=bash
# setup/balancer.sh: the balancer role: nginx in front of the backends.
# Sourced by cloud-setup.sh, which sets BACKENDS and LISTEN; nginx_config is
# also what `cloud-setup.sh balancer --print-config` prints.

NGINX_CONF=/etc/nginx/conf.d/uppercut-mio-server.conf
NGINX_MAIN_CONF=/etc/nginx/nginx.conf
# Debian ships worker_connections 768; one proxied request holds two
# connections (client + upstream), so `wrk -c1000` needs more than that.
NGINX_WORKER_CONNECTIONS=4096

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

# WebSocket routes (/ws, /chat): a request asking for an upgrade is passed
# on with "Connection: upgrade"; every other request with no Connection
# header at all, which is what lets nginx put upstream connections back
# into the keepalive pool.
map $http_upgrade $uppercut_mio_server_connection {
    default upgrade;
    ''      '';
}

server {
EOF
    printf '    listen %s;\n' "$LISTEN"
    cat <<'EOF'
    # Keep client connections as long as a benchmark does, like a backend would.
    keepalive_requests 100000;

    location / {
        proxy_pass http://uppercut_mio_server;
        # HTTP/1.1, and no Connection header on a plain request (the map
        # above), are what let nginx put upstream connections back into
        # the keepalive pool.
        proxy_http_version 1.1;
        proxy_set_header Connection $uppercut_mio_server_connection;
        proxy_set_header Upgrade $http_upgrade;
        proxy_set_header Host $host;
        # An upgraded connection is closed when the backend sends nothing
        # for this long. The server pings a WebSocket that sent nothing for
        # its --keepalive-timeout (75 s by default), so wait longer.
        proxy_read_timeout 120s;
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
