//! The command line: the usage text, and flags parsed into a [`Config`].
//!
//! lexopt splits the arguments (`--flag value`, `--flag=value`, `-h`, `--`,
//! and arguments that are not UTF-8, which `std::env::args` would panic on);
//! the flags, their one-line refusals and the usage text are ours. clap's
//! derive, the convention users know, would have its generated help and
//! multi-line errors switched off here to keep those, for far more to build
//! and a larger binary (docs/performance.md has the comparison).

use std::ffi::OsString;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use crate::config::AccessLogTarget;
use crate::config::{host_node_name, is_subject_token, ClusterConfig, NatsUrl};
use crate::config::{Config, Dispatch, Listener, StateConfig, TlsFiles, UpstreamConfig};
use crate::http::response_fields::AddedFields;

/// What `--help` prints.
pub const USAGE: &str = "\
usage: uppercut-mio-server [--bind ADDR:PORT]... [--bind-tls ADDR:PORT]... [--pollers N [--pin]]
                           [--dispatch local|system]
                           [--header-timeout T] [--keepalive-timeout T] [--write-timeout T]
                           [--max-connections N] [--max-body SIZE] [--ws-max-message SIZE]
                           [--ws-deflate | --ws-deflate-takeover] [--shutdown-timeout T]
                           [--static-dir DIR [--static-max-file SIZE] [--static-max-total SIZE]
                                             [--static-dotfiles]]
                           [--upstream URL [--upstream-conns N] [--upstream-timeout T]
                                           [--upstream-queue N]]
                           [--tls-cert PATH --tls-key PATH] [--header 'NAME: VALUE']...
                           [--cors ORIGIN]... [--request-id] [--redirect-https PORT]
                           [--access-log PATH|- [--log-name NAME]] [--metrics ADDR:PORT]
                           [--nats URL[,URL]... [--node NAME] [--nats-ca PATH]
                                                [--nats-creds FILE | --nats-nkey FILE]
                                                [--nats-tls-cert PATH --nats-tls-key PATH]
                                                [--nats-prefix NAME] [--nats-buffer SIZE]]
                           [--state DIR|jetstream [--state-timeout T] [--state-replicas N]
                                                  [--placement-lease T] [--placement-idle T]]
                           [--actor-route PATH=ADDRESS]... [--http2 on|off|only] [--http3 on|off]
                           [--version] [--help]

  --bind ADDR:PORT          address to listen on (default 0.0.0.0:9000); a host
                            name is resolved now, to its first address; repeat for
                            more (each TLS with --tls-cert, unless --bind-tls is given)
  --bind-tls ADDR:PORT      also listen here in TLS (needs --tls-cert and --tls-key);
                            repeat for more; --bind listeners are then plain
  --pollers N               event loops, each with its own SO_REUSEPORT listener
                            (default: the number of available cores); connections
                            are dealt evenly over them
  --pin                     pin each poller's worker thread to a CPU of its own, the
                            Nth to the Nth CPU the process may use (default: off)
  --dispatch local|system   how readiness reaches connection actors: directly from
                            their poller (local, default) or through the uppercut
                            scheduler (system)
  --header-timeout T        a request (head and body) not complete in time gets 408
                            and the connection closes (default 10s)
  --keepalive-timeout T     an idle keep-alive connection is closed (default 75s)
  --write-timeout T         a client that reads nothing while its output is backed
                            up is closed (default 30s)
  --max-connections N       past N open connections, new ones are closed at once
                            (default 100000)
  --max-body SIZE           a request body over SIZE gets 413 (default 1M)
  --ws-max-message SIZE     a WebSocket message over SIZE closes its connection
                            with 1009 (default 16M)
  --ws-deflate              offer permessage-deflate on WebSocket routes: each
                            message compressed on its own, no zlib state kept
                            on an idle connection (default: off)
  --ws-deflate-takeover     offer permessage-deflate with context takeover: fewer
                            bytes for repetitive messages, about 340 KiB of zlib
                            state per connection that has used it
  --shutdown-timeout T      on SIGINT or SIGTERM, finish in-flight requests for at
                            most T, then exit (default 10s; 0 closes them at once)
  --static-dir DIR          also serve every file under DIR, loaded at start and
                            again on SIGHUP, at its path under DIR; DIR/index.html
                            also at /
  --static-max-file SIZE    refuse to start if a file under DIR is larger
                            (default 16M)
  --static-max-total SIZE   refuse to start if the files under DIR add up to more
                            (default 256M)
  --static-dotfiles         also serve dotfiles (/.env, /.git/config): by default
                            any path with a component starting with . is 404
  --upstream URL            serve GET /io with the JSON that GET URL returns
                            (http://HOST:PORT/PATH), over pooled keep-alive connections
  --upstream-conns N        upstream connections per poller at most (default 32)
  --upstream-timeout T      an upstream answer later than T gets 504 (default 5s)
  --upstream-queue N        requests waiting for an upstream connection, per poller;
                            past it, 503 (default 1024)
  --tls-cert PATH           serve HTTPS (TLS 1.3 and 1.2) with the certificate chain
                            in PATH (PEM, the server's certificate first)
  --tls-key PATH            the private key for --tls-cert (PEM: PKCS#8, PKCS#1 or
                            SEC1); SIGHUP reloads both
  --header 'NAME: VALUE'    add this header field to every response (canned, static,
                            handler, actor and error alike); repeat for more, e.g.
                            --header 'Strict-Transport-Security: max-age=63072000'
  --cors ORIGIN             let browsers on ORIGIN (https://app.example[:PORT], or *
                            for any) read every response: preflights answered 204,
                            Access-Control-Allow-Origin added; repeat for more
  --request-id              give every request an id (its valid X-Request-Id, or a
                            new one), sent back in X-Request-Id
  --redirect-https PORT     answer every request that did not come over TLS with
                            308 to the same URL over https:// on PORT (443: none
                            in the URL); requests over TLS are served
  --access-log PATH|-       append a line per request to PATH (- for stdout), in
                            the combined log format, in time order, each ending
                            server=NAME (default: no access log)
  --log-name NAME           the NAME in each access-log line, to tell servers
                            writing one file apart (default: --node with --nats,
                            else HOST:PID)
  --metrics ADDR:PORT       serve GET /metrics (Prometheus text format: per-poller
                            connections, requests by status, durations by route,
                            bytes, timeouts, upstream) on a listener of its own
                            (default: off)
  --nats URL[,URL]...       join a cluster of servers through these NATS servers
                            (nats://HOST:PORT, tls://HOST:PORT; user:password@ or
                            token@ before the host): actors become reachable from
                            every server as NAME@NODE, topics reach every server
  --node NAME               this server's name in the cluster (default: the host
                            name); letters, digits, - and _
  --nats-ca PATH            trust the certificates in PATH (PEM) for tls:// servers
                            (default: the system's)
  --nats-tls-cert PATH      present this certificate chain (PEM) to NATS servers that
                            verify clients; needs --nats-tls-key; read at each connect
  --nats-tls-key PATH       the private key (PEM) of --nats-tls-cert
  --nats-creds FILE         authenticate with the user JWT and NKEY seed in FILE
                            (a .creds file, as nsc writes it); read at each connect
  --nats-nkey FILE          authenticate with the NKEY user seed (SU...) in FILE;
                            read at each connect
  --nats-prefix NAME        the first token of the cluster's subjects (default upc),
                            so that clusters can share a NATS
  --nats-buffer SIZE        what may wait to be sent to NATS, per poller; past it,
                            a sender of bytes waits (a connection stops reading, an
                            actor pauses) and a request gets 503 (default 8M)
  --state DIR|jetstream     keep durable actors' state (/count's counter): in one
                            file in DIR (DIR/state.redb, created if missing), or in
                            a JetStream key-value bucket on --nats (named after
                            --nats-prefix, created if missing); an answer that
                            depends on a change leaves once the change is durable
  --state-timeout T         with --state jetstream: how long a write or a read may
                            take before the requests waiting for it get 503
                            (default 5s)
  --state-replicas N        with --state jetstream: the bucket's replicas when it
                            is created (default 1; 3 or 5 on a JetStream cluster)
  --placement-lease T       with --state jetstream: how long a placed actor's lease
                            lives after its holder's last renewal; when the holder
                            dies, its names move within about this (default 2s)
  --placement-idle T        a placed actor with no message this long is written,
                            given up and unloaded (default 5m)
  --state-export FILE|-     write every actor's state in the --state store to FILE
                            (or standard output), a line of JSON each, and exit
  --state-import FILE|-     write the states FILE holds (as --state-export wrote
                            them) into the --state store, and exit; run both
                            while no server uses the store
  --actor-route PATH=ADDRESS  answer PATH (every method) from the actor at ADDRESS:
                            one of this server's, or NAME@NODE on another server,
                            or NAME@* on whichever serves NAME; repeat for more
  --http2 on|off|only       speak HTTP/2 to TLS clients that choose h2 (ALPN) and to
                            plain clients that open with its preface (default on);
                            only: plain listeners speak HTTP/2 alone (h2c, as gRPC
                            backends do), closing any other opening
  --http3 on|off            also serve HTTP/3 (QUIC) on UDP at the first TLS listener's
                            port, and advertise it in Alt-Svc on HTTPS responses
                            (default off: open UDP on that port in the firewall
                            first; needs --tls-cert)
  --version                 print the version
  --help                    print this help

Durations T are 0, or a number and a unit: 500ms, 1.5s, 2m, 1h. Only
--shutdown-timeout takes 0. Sizes SIZE are bytes, or with a K, M or G suffix
(KiB, MiB, GiB).

Exit status: 0 after a clean shutdown (and for --help, --version); 1 when the
server cannot start; 2 for a bad command line; 3 when the shutdown timeout
closed connections with requests unanswered or responses not all sent.

Logging goes through env_logger: RUST_LOG=info or RUST_LOG=debug for more.";

/// The duration forms every flag accepts, for messages.
const DURATION_FORMS: &str = "0, 500ms, 1.5s, 2m or 1h";

/// A duration: `0`, or a decimal number and a unit (`ms`, `s`, `m`, `h`):
/// `500ms`, `1.5s`, `2m`, `1h`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (number, unit) = text.split_at(split);
    let nanos_per_unit: u128 = match unit {
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) || number.ends_with('.') {
        return None;
    }
    // Digits past nanoseconds cannot change the result.
    let fraction = &fraction[..fraction.len().min(18)];
    let scale = 10u128.pow(fraction.len() as u32);
    let whole: u128 = whole.parse().ok()?;
    let fraction: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().ok()?
    };
    let nanos = whole
        .checked_mul(nanos_per_unit)?
        .checked_add(fraction * nanos_per_unit / scale)?;
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    Some(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    /// Run a server with this configuration.
    Run(Box<Config>),
    /// Print the usage text.
    Help,
    /// Print the version line.
    Version,
    /// Write the store's every state to a file (`-`: standard output)
    /// (`--state-export`), and exit.
    ExportState(Box<Config>, PathBuf),
    /// Write the states a file (`-`: standard input) holds into the store
    /// (`--state-import`), and exit.
    ImportState(Box<Config>, PathBuf),
}

/// The line `--version` prints.
pub fn version_line() -> String {
    format!("uppercut-mio-server {}", env!("CARGO_PKG_VERSION"))
}

/// `NAME: VALUE`, checked as the server will check it at start.
fn header_field(flag: &str, text: &str) -> Result<(String, String), String> {
    let Some((name, value)) = text.split_once(':') else {
        return Err(format!("{flag}: not NAME: VALUE: {text}"));
    };
    let field = (
        name.to_string(),
        value.trim_matches([' ', '\t']).to_string(),
    );
    AddedFields::new(std::slice::from_ref(&field)).map_err(|e| format!("{flag}: {e}"))?;
    Ok(field)
}

/// An origin as a browser sends it in `Origin` (`scheme://host[:port]`,
/// no path), or `*`.
fn origin(flag: &str, text: &str) -> Result<String, String> {
    let well_formed = text == "*"
        || text.split_once("://").is_some_and(|(scheme, rest)| {
            !scheme.is_empty()
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
                && !rest.is_empty()
                && !rest.contains('/')
                && rest.bytes().all(|b| b.is_ascii_graphic())
        });
    match well_formed {
        true => Ok(text.to_string()),
        false => Err(format!(
            "{flag}: not an origin (https://app.example, http://localhost:3000) or *: {text}"
        )),
    }
}

/// Parses the arguments after the program name; `Err` says, in one line,
/// what is wrong. Both `--flag value` and `--flag=value` are accepted.
pub fn parse_args<I>(args: I) -> Result<Command, String>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    let mut config = Config::default();
    let mut parser = lexopt::Parser::from_args(args);
    let mut upstream_url = None;
    let (mut upstream_conns, mut upstream_timeout, mut upstream_queue) = (None, None, None);
    let mut static_limit_flag = None;
    let (mut tls_cert, mut tls_key) = (None, None);
    let (mut binds, mut tls_binds) = (Vec::new(), Vec::new());
    let mut nats: Option<Vec<NatsUrl>> = None;
    let mut node = None;
    let mut nats_ca = None;
    let mut nats_creds = None;
    let mut nats_tls_cert = None;
    let mut nats_tls_key = None;
    let mut nats_nkey = None;
    let mut nats_prefix = None;
    let mut nats_buffer = None;
    let (mut state, mut state_timeout, mut state_replicas) = (None, None, None);
    let (mut state_export, mut state_import) = (None, None);
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        let flag = match arg {
            lexopt::Arg::Long(name) => format!("--{name}"),
            lexopt::Arg::Short(letter) => format!("-{letter}"),
            lexopt::Arg::Value(value) => {
                return Err(format!("unexpected argument: {}", value.to_string_lossy()))
            }
        };
        // The flag's value as given, which may be any bytes (a path).
        let mut os_value = || parser.value().map_err(|_| format!("{flag} needs a value"));
        // The flag's value as text.
        let mut value = || {
            os_value()?
                .into_string()
                .map_err(|value| format!("{flag}: not UTF-8: {}", value.to_string_lossy()))
        };
        match flag.as_str() {
            "--help" | "-h" => return Ok(Command::Help),
            "--version" | "-V" => return Ok(Command::Version),
            "--bind" => binds.push(socket_addr(&flag, &value()?)?),
            "--bind-tls" => tls_binds.push(socket_addr(&flag, &value()?)?),
            "--pollers" => config.pollers = positive(&flag, &value()?)?,
            "--max-connections" => config.max_connections = positive(&flag, &value()?)?,
            "--max-body" => config.max_body = parse_size(&flag, &value()?)?,
            "--ws-max-message" => {
                let size = parse_size(&flag, &value()?)?;
                config.ws_max_message = usize::try_from(size).unwrap_or(usize::MAX);
            }
            "--ws-deflate" => config.ws_deflate = Some(crate::websocket::WsDeflate::default()),
            "--ws-deflate-takeover" => {
                config.ws_deflate = Some(crate::websocket::WsDeflate::context_takeover());
            }
            "--header-timeout" => config.timeouts.header = timeout(&flag, &value()?)?,
            "--keepalive-timeout" => config.timeouts.keepalive = timeout(&flag, &value()?)?,
            "--write-timeout" => config.timeouts.write = timeout(&flag, &value()?)?,
            "--shutdown-timeout" => config.shutdown_timeout = duration(&flag, &value()?)?,
            "--dispatch" => {
                config.dispatch = match value()?.as_str() {
                    "local" => Dispatch::Local,
                    "system" => Dispatch::System,
                    other => return Err(format!("--dispatch: not local or system: {other}")),
                };
            }
            "--static-dir" => config.static_dir = Some(path(&flag, os_value()?)?),
            "--static-max-file" => {
                config.static_limits.max_file = parse_size(&flag, &value()?)?;
                static_limit_flag = Some("--static-max-file");
            }
            "--static-max-total" => {
                config.static_limits.max_total = parse_size(&flag, &value()?)?;
                static_limit_flag = Some("--static-max-total");
            }
            "--static-dotfiles" => {
                no_value(&mut parser, &flag)?;
                config.static_dotfiles = true;
                static_limit_flag = Some("--static-dotfiles");
            }
            "--pin" => {
                no_value(&mut parser, &flag)?;
                config.pin = true;
            }
            "--metrics" => config.metrics = Some(socket_addr(&flag, &value()?)?),
            "--tls-cert" => tls_cert = Some(path(&flag, os_value()?)?),
            "--tls-key" => tls_key = Some(path(&flag, os_value()?)?),
            "--header" => config.headers.push(header_field(&flag, &value()?)?),
            "--cors" => config.cors.push(origin(&flag, &value()?)?),
            "--redirect-https" => {
                let text = value()?;
                let port = text
                    .parse::<u16>()
                    .ok()
                    .filter(|port| *port != 0)
                    .ok_or_else(|| format!("{flag} {text:?}: a port, 1 to 65535"))?;
                config.redirect_https = Some(port);
            }
            "--request-id" => {
                no_value(&mut parser, &flag)?;
                config.request_id = true;
            }
            "--upstream" => upstream_url = Some(value()?),
            "--upstream-conns" => upstream_conns = Some(positive(&flag, &value()?)?),
            "--upstream-timeout" => upstream_timeout = Some(timeout(&flag, &value()?)?),
            "--upstream-queue" => upstream_queue = Some(positive(&flag, &value()?)?),
            "--log-name" => {
                let name = value()?;
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(format!(
                        "--log-name {name:?}: use printable ASCII without spaces"
                    ));
                }
                config.log_name = Some(name);
            }
            "--access-log" => {
                let value = os_value()?;
                config.access_log = Some(match value.to_str() {
                    Some("") => return Err("--access-log needs a path, or - for stdout".into()),
                    Some("-") => AccessLogTarget::Stdout,
                    _ => AccessLogTarget::File(PathBuf::from(value)),
                })
            }
            "--nats" => {
                nats = Some(NatsUrl::parse_list(&value()?).map_err(|e| format!("--nats: {e}"))?)
            }
            "--node" => node = Some(value()?),
            "--http2" => {
                (config.http2, config.http2_only) = match value()?.as_str() {
                    "on" => (true, false),
                    "off" => (false, false),
                    "only" => (true, true),
                    other => return Err(format!("--http2: not on, off or only: {other}")),
                };
            }
            "--http3" => {
                config.http3 = match value()?.as_str() {
                    "on" => true,
                    "off" => false,
                    other => return Err(format!("--http3: not on or off: {other}")),
                };
            }
            "--nats-ca" => nats_ca = Some(path(&flag, os_value()?)?),
            "--nats-creds" => nats_creds = Some(path(&flag, os_value()?)?),
            "--nats-tls-cert" => nats_tls_cert = Some(path(&flag, os_value()?)?),
            "--nats-tls-key" => nats_tls_key = Some(path(&flag, os_value()?)?),
            "--nats-nkey" => nats_nkey = Some(path(&flag, os_value()?)?),
            "--nats-prefix" => nats_prefix = Some(value()?),
            "--state" => state = Some(os_value()?),
            "--placement-lease" => config.placement_lease = timeout(&flag, &value()?)?,
            "--placement-idle" => config.placement_idle = timeout(&flag, &value()?)?,
            "--state-export" => state_export = Some(PathBuf::from(os_value()?)),
            "--state-import" => state_import = Some(PathBuf::from(os_value()?)),
            "--state-timeout" => state_timeout = Some(duration(&flag, &value()?)?),
            "--state-replicas" => state_replicas = Some(positive(&flag, &value()?)?),
            "--nats-buffer" => {
                let size = parse_size(&flag, &value()?)?;
                nats_buffer = Some(usize::try_from(size).unwrap_or(usize::MAX));
            }
            "--actor-route" => {
                let value = value()?;
                let Some((path, address)) = value.split_once('=') else {
                    return Err(format!(
                        "--actor-route: expected PATH=ADDRESS, not {value:?}"
                    ));
                };
                if !path.starts_with('/') || address.is_empty() {
                    return Err(format!(
                        "--actor-route: expected /PATH=ADDRESS, not {value:?}"
                    ));
                }
                config
                    .actor_routes
                    .push((path.to_string(), address.to_string()));
            }
            _ => return Err(format!("unknown flag: {flag}")),
        }
    }
    match nats {
        Some(servers) => {
            let node = node.unwrap_or_else(host_node_name);
            let mut cluster = ClusterConfig::new(servers, &node);
            cluster.ca = nats_ca;
            if nats_creds.is_some() && nats_nkey.is_some() {
                return Err("--nats-creds and --nats-nkey: give one of them".into());
            }
            cluster.creds = nats_creds;
            cluster.nkey = nats_nkey;
            cluster.client_cert = match (nats_tls_cert, nats_tls_key) {
                (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
                (None, None) => None,
                _ => return Err("--nats-tls-cert and --nats-tls-key go together".into()),
            };
            cluster.prefix = nats_prefix.unwrap_or(cluster.prefix);
            cluster.buffer = nats_buffer.unwrap_or(cluster.buffer);
            for (flag, value) in [
                ("--node", &cluster.node),
                ("--nats-prefix", &cluster.prefix),
            ] {
                if !is_subject_token(value) {
                    return Err(format!(
                        "{flag} {value:?}: use letters, digits, '-' and '_'"
                    ));
                }
            }
            cluster.check()?;
            config.cluster = Some(cluster);
        }
        None if node.is_some()
            || nats_ca.is_some()
            || nats_creds.is_some()
            || nats_nkey.is_some()
            || nats_tls_cert.is_some()
            || nats_tls_key.is_some()
            || nats_prefix.is_some()
            || nats_buffer.is_some() =>
        {
            return Err(
                "--node, --nats-ca, --nats-tls-cert, --nats-tls-key, --nats-creds, --nats-nkey, \
                 --nats-prefix and --nats-buffer need --nats"
                    .into(),
            )
        }
        None => {}
    }
    config.state = match state {
        Some(state) if state == "jetstream" => {
            if config.cluster.is_none() {
                return Err("--state jetstream needs --nats".into());
            }
            let replicas = state_replicas.unwrap_or(1);
            if ![1, 3, 5].contains(&replicas) {
                return Err(format!("--state-replicas {replicas}: 1, 3 or 5"));
            }
            Some(StateConfig::JetStream {
                timeout: state_timeout.unwrap_or(Duration::from_secs(5)),
                replicas,
            })
        }
        Some(dir) => {
            if state_timeout.is_some() || state_replicas.is_some() {
                return Err(
                    "--state-timeout and --state-replicas are for --state jetstream".into(),
                );
            }
            Some(StateConfig::Dir(PathBuf::from(dir)))
        }
        None if state_timeout.is_some() || state_replicas.is_some() => {
            return Err("--state-timeout and --state-replicas need --state jetstream".into())
        }
        None => None,
    };
    if config.log_name.is_some() && config.access_log.is_none() {
        return Err("--log-name needs --access-log".into());
    }
    if let (Some(flag), None) = (static_limit_flag, &config.static_dir) {
        return Err(format!("{flag} needs --static-dir"));
    }
    config.tls = match (tls_cert, tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        (Some(_), None) => return Err("--tls-cert needs --tls-key".into()),
        (None, Some(_)) => return Err("--tls-key needs --tls-cert".into()),
        (None, None) => None,
    };
    if config.http3 && config.tls.is_none() {
        return Err("--http3 on needs --tls-cert and --tls-key".into());
    }
    // Without --bind-tls, --tls-cert makes every --bind TLS (as with one);
    // with it, --bind is plain (the default address, if none is given).
    if let Some(&first) = binds.first() {
        config.bind = first;
    }
    if !tls_binds.is_empty() {
        if config.tls.is_none() {
            return Err("--bind-tls needs --tls-cert and --tls-key".into());
        }
        if binds.is_empty() {
            binds.push(config.bind);
        }
        let plain = binds.iter().map(|&addr| Listener { addr, tls: false });
        let tls = tls_binds.iter().map(|&addr| Listener { addr, tls: true });
        config.listeners = plain.chain(tls).collect();
    } else if binds.len() > 1 {
        let tls = config.tls.is_some();
        config.listeners = binds.iter().map(|&addr| Listener { addr, tls }).collect();
    }
    // The pool flags may come before --upstream, so they apply at the end.
    let pool_flags =
        upstream_conns.is_some() || upstream_timeout.is_some() || upstream_queue.is_some();
    match upstream_url {
        Some(url) => {
            let mut upstream =
                UpstreamConfig::from_url(&url).map_err(|e| format!("--upstream: {e}"))?;
            upstream.conns = upstream_conns.unwrap_or(upstream.conns);
            upstream.timeout = upstream_timeout.unwrap_or(upstream.timeout);
            upstream.queue = upstream_queue.unwrap_or(upstream.queue);
            config.upstream = Some(upstream);
        }
        None if pool_flags => {
            return Err(
                "--upstream-conns, --upstream-timeout and --upstream-queue need --upstream".into(),
            )
        }
        None => {}
    }
    match (state_export, state_import) {
        (Some(_), Some(_)) => Err("--state-export and --state-import: give one of them".into()),
        (Some(_), None) | (None, Some(_)) if config.state.is_none() => {
            Err("--state-export and --state-import need --state".into())
        }
        (Some(file), None) => Ok(Command::ExportState(Box::new(config), file)),
        (None, Some(file)) => Ok(Command::ImportState(Box::new(config), file)),
        (None, None) => Ok(Command::Run(Box::new(config))),
    }
}

/// A flag that takes no value was given one (`--pin=yes`).
fn no_value(parser: &mut lexopt::Parser, flag: &str) -> Result<(), String> {
    match parser.optional_value() {
        Some(_) => Err(format!("{flag} takes no value")),
        None => Ok(()),
    }
}

/// The line the binary prints once it listens. Scripts and tests read its
/// beginning, `listening on http://ADDR (N pollers, dispatch MODE` (or
/// `https://` with `--tls-cert`; `1 poller` for one).
pub fn start_line(addr: SocketAddr, config: &Config, static_files: Option<usize>) -> String {
    let first_tls = config
        .effective_listeners()
        .first()
        .is_some_and(|listener| listener.tls);
    let scheme = if first_tls { "https" } else { "http" };
    let pollers = match config.pollers {
        1 => "1 poller".to_string(),
        n => format!("{n} pollers"),
    };
    let mut line = format!(
        "listening on {scheme}://{addr} ({pollers}, dispatch {}",
        config.dispatch.name()
    );
    if config.pin {
        line.push_str(", pinned");
    }
    if let Some(dir) = &config.static_dir {
        line.push_str(&format!(", static {}", dir.display()));
        if let Some(count) = static_files {
            let plural = if count == 1 { "" } else { "s" };
            line.push_str(&format!(": {count} file{plural}"));
        }
    }
    if let Some(upstream) = &config.upstream {
        line.push_str(&format!(
            ", upstream http://{}{}",
            upstream.host, upstream.path
        ));
    }
    if let Some(cluster) = &config.cluster {
        let servers: Vec<String> = cluster.servers.iter().map(ToString::to_string).collect();
        line.push_str(&format!(
            ", node {} via {}",
            cluster.node,
            servers.join(",")
        ));
    }
    line.push(')');
    line
}

/// The line the binary prints after the start line when it has more than
/// one listener: `also listening on https://ADDR, http://ADDR`.
pub fn more_listeners_line(listeners: &[Listener]) -> Option<String> {
    let more: Vec<String> = listeners
        .iter()
        .skip(1)
        .map(|listener| {
            let scheme = if listener.tls { "https" } else { "http" };
            format!("{scheme}://{}", listener.addr)
        })
        .collect();
    (!more.is_empty()).then(|| format!("also listening on {}", more.join(", ")))
}

/// A path given to `flag`, which may not be empty.
fn path(flag: &str, value: OsString) -> Result<PathBuf, String> {
    match value.is_empty() {
        true => Err(format!("{flag} needs a path")),
        false => Ok(PathBuf::from(value)),
    }
}

/// `ADDR:PORT`, or `HOST:PORT` resolved now to its first address.
fn socket_addr(flag: &str, value: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = value.parse() {
        return Ok(addr);
    }
    if value
        .rsplit_once(':')
        .is_none_or(|(_, port)| port.parse::<u16>().is_err())
    {
        return Err(format!("{flag}: not an ADDR:PORT or HOST:PORT: {value}"));
    }
    value
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| format!("{flag}: cannot resolve {value}"))
}

fn positive(flag: &str, value: &str) -> Result<usize, String> {
    match value.parse() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{flag}: not a positive number: {value}")),
    }
}

fn duration(flag: &str, value: &str) -> Result<Duration, String> {
    parse_duration(value)
        .ok_or_else(|| format!("{flag}: not a duration: {value} (use {DURATION_FORMS})"))
}

/// A duration that must not be zero: a zero timeout would end every
/// connection or request before it could start.
fn timeout(flag: &str, value: &str) -> Result<Duration, String> {
    match duration(flag, value)? {
        d if d.is_zero() => Err(format!("{flag}: must be more than 0: {value}")),
        d => Ok(d),
    }
}

/// A size in bytes: digits, then optionally a binary unit (`K`, `KiB`, `M`,
/// `MiB`, `G`, `GiB`, in any case).
fn parse_size(flag: &str, value: &str) -> Result<u64, String> {
    let digits_end = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (digits, unit) = value.split_at(digits_end);
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => return Err(format!("{flag}: not a size (bytes, K, M or G): {value}")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|count| count.checked_mul(1 << shift))
        .ok_or_else(|| format!("{flag}: not a size (bytes, K, M or G): {value}"))
}
