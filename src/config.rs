//! The server's configuration: addresses, dispatch, timeouts, limits, the
//! static directory and the upstream, with the defaults of the binary.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::thread;
use std::time::Duration;

use crate::http::framing::MAX_BODY_LEN;
pub use crate::nats::url::NatsUrl;
use crate::static_files::load::StaticLimits;

/// How a poller's readiness events reach connection actors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatch {
    /// Each poller calls its connection actors directly: no scheduler hop.
    Local,
    /// Every envelope to a connection actor goes through uppercut's
    /// scheduler.
    System,
}

impl Dispatch {
    /// The name the command line uses.
    pub fn name(self) -> &'static str {
        match self {
            Dispatch::Local => "local",
            Dispatch::System => "system",
        }
    }
}

/// How long a connection may take at each stage before it is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From a request's first byte (or the accept) to its last.
    pub header: Duration,
    /// Idle between requests on a keep-alive connection.
    pub keepalive: Duration,
    /// Without write progress while output is backed up.
    pub write: Duration,
    /// How often a poller looks for connections past their deadline, and so
    /// the longest it blocks in `poll` while it has connections. Nothing else
    /// waits for a poller's timeout, so tests lengthen it to prove that.
    pub sweep: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            header: Duration::from_secs(10),
            keepalive: Duration::from_secs(75),
            write: Duration::from_secs(30),
            sweep: Duration::from_secs(1),
        }
    }
}

/// Where `GET /io` gets its JSON, and how the pool to it is sized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// Where the upstream listens.
    pub addr: SocketAddr,
    /// The `Host` header for upstream requests (as the URL spelled it).
    pub host: String,
    /// The path requested from the upstream.
    pub path: String,
    /// Connections each poller keeps to the upstream, at most.
    pub conns: usize,
    /// How long a request may wait for the upstream's answer; then 504.
    pub timeout: Duration,
    /// Requests each poller queues while every connection is busy; past
    /// that, 503.
    pub queue: usize,
}

impl UpstreamConfig {
    /// Where the server answers with the upstream's JSON.
    pub const ROUTE: &'static str = crate::routes::table::UPSTREAM_ROUTE;

    /// Defaults for everything but where the upstream is.
    pub fn new(addr: SocketAddr, host: &str, path: &str) -> UpstreamConfig {
        UpstreamConfig {
            addr,
            host: host.to_string(),
            path: path.to_string(),
            conns: 32,
            timeout: Duration::from_secs(5),
            queue: 1024,
        }
    }

    /// Parses `http://HOST[:PORT][/PATH]`, resolving HOST now.
    pub fn from_url(url: &str) -> Result<UpstreamConfig, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("only http:// URLs are supported: {url}"))?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => rest.split_at(slash),
            None => (rest, "/"),
        };
        let with_port = if authority.contains(':') {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| format!("cannot resolve {authority}"))?;
        Ok(UpstreamConfig::new(addr, authority, path))
    }
}

/// Where the access log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogTarget {
    /// The process's standard output.
    Stdout,
    /// Appended to, created if missing.
    File(PathBuf),
}

/// One address the server listens on, and whether it speaks TLS there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    /// Where to listen.
    pub addr: SocketAddr,
    /// TLS there (needs [`Config::tls`]), else plain.
    pub tls: bool,
}

/// Everything [`Server::start`](crate::Server::start) needs besides the
/// routes; `Default` gives the binary's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The address to listen on, when [`Config::listeners`] is empty: in
    /// TLS when [`Config::tls`] is set.
    pub bind: SocketAddr,
    /// Every address to listen on, each plain or TLS (`--bind`,
    /// `--bind-tls`); all share the routes, actors, topics and metrics.
    /// Empty: [`Config::bind`] alone.
    pub listeners: Vec<Listener>,
    /// Event loops, each with a listener of its own (at least 1).
    pub pollers: usize,
    /// How readiness reaches connection actors.
    pub dispatch: Dispatch,
    /// How long each stage of a connection may take.
    pub timeouts: Timeouts,
    /// Connections open at once; more are closed as soon as accepted.
    pub max_connections: usize,
    /// How long [`Server::run_until_signal`](crate::Server::run_until_signal)
    /// lets requests in flight finish after SIGINT or SIGTERM.
    pub shutdown_timeout: Duration,
    /// The directory whose files are served too, if any.
    pub static_dir: Option<PathBuf>,
    /// How large the static directory's files may be.
    pub static_limits: StaticLimits,
    /// Where `GET /io` gets its JSON; without it, `/io` is 404.
    pub upstream: Option<UpstreamConfig>,
    /// Where a line per request goes; without it, nothing is logged.
    pub access_log: Option<AccessLogTarget>,
    /// What each access-log line calls this server (` server=NAME` at its
    /// end), so that servers writing one file can be told apart; without
    /// it, the cluster's node name with one, else `HOST:PID`.
    pub log_name: Option<String>,
    /// Serve dotfiles (paths with a component starting with `.`) from the
    /// static directory too.
    pub static_dotfiles: bool,
    /// Pin each poller's worker thread to a CPU of its own, the Nth worker
    /// to the Nth CPU of the process's mask.
    pub pin: bool,
    /// Where `GET /metrics` is served, on a listener of its own; without
    /// it, nothing is counted.
    pub metrics: Option<SocketAddr>,
    /// The most bytes a request body may carry, by `Content-Length` or in
    /// chunks; a larger one gets 413. Handler and actor routes see bodies
    /// up to this size, held in memory.
    pub max_body: u64,
    /// The most bytes a WebSocket message may carry, whole or in
    /// fragments; a larger one closes its connection with 1009.
    pub ws_max_message: usize,
    /// permessage-deflate (RFC 7692) for the WebSocket routes that do not
    /// set their own (`Routes::websocket_with_deflate`); `None` (the
    /// default) offers none. `--ws-deflate` sets `WsDeflate::default()`:
    /// each message compressed on its own, no zlib state on an idle
    /// connection.
    pub ws_deflate: Option<crate::websocket::WsDeflate>,
    /// Serve HTTPS with this certificate and key; without it, plain HTTP.
    pub tls: Option<TlsFiles>,
    /// Header fields every response carries, as name and value
    /// (`--header`): `Strict-Transport-Security`, `X-Content-Type-Options`
    /// and the like. They follow `Date` in every response head, canned,
    /// static, handler, actor and error alike (not in `/metrics`, which is
    /// for the operator). [`Server::start`](crate::Server::start) refuses
    /// a malformed field and the ones the server writes itself
    /// (`Content-Length`, `Transfer-Encoding`, `Date`, `Server`,
    /// `Connection`, `Content-Type`).
    pub headers: Vec<(String, String)>,
    /// Origins whose browsers may read every response (`--cors ORIGIN`):
    /// each as a browser sends it in `Origin` (`https://app.example`), or
    /// `*` for any. Non-empty, every route is wrapped in a
    /// [`Cors`](crate::Cors) that allows them with every method a route
    /// can take and any request header, preflights kept 10 minutes.
    pub cors: Vec<String>,
    /// Give every request an id (`--request-id`): a
    /// [`RequestId`](crate::RequestId) around every route, ahead of all
    /// other middleware.
    pub request_id: bool,
    /// Send plain-HTTP requests to HTTPS on this port
    /// (`--redirect-https PORT`): a [`HttpsRedirect`](crate::HttpsRedirect)
    /// around every route, ahead of all other middleware.
    pub redirect_https: Option<u16>,
    /// Join a cluster of servers over NATS (`--nats`); without it, every
    /// actor is local and `name@node` addresses are refused.
    pub cluster: Option<ClusterConfig>,
    /// Actor routes added to the server's (`--actor-route PATH=ADDRESS`):
    /// every method at `PATH` goes to the actor at `ADDRESS`, which may be
    /// on another server (`name@node`, `name@*`).
    pub actor_routes: Vec<(String, String)>,
    /// Speak HTTP/2 (`--http2 on|off`): to clients whose TLS handshake
    /// chose `h2`, and to plain-text clients that open with HTTP/2's
    /// preface (prior knowledge, `h2c`).
    pub http2: bool,
    /// Plain-text listeners speak only HTTP/2 (`--http2 only`): a
    /// connection that does not open with HTTP/2's preface is closed (RFC
    /// 9113 §3.4), as gRPC backends behind a balancer want. TLS listeners
    /// still offer `http/1.1` too.
    pub http2_only: bool,
    /// Where durable actors ([`Routes::spawn_durable`](crate::Routes::spawn_durable))
    /// keep their state (`--state DIR`, `--state jetstream`); without it,
    /// their state is lost with the process.
    pub state: Option<StateConfig>,
    /// How long a placed actor's lease lives in JetStream after its last
    /// renewal (`--placement-lease`): when its holder dies, the name moves
    /// to another server within about this much (the holder renews it
    /// every quarter of it, and serves until three quarters after its last
    /// renewal was sent).
    pub placement_lease: Duration,
    /// How long a placed actor's name may go without a message before it
    /// is written, its lease given up and it is unloaded
    /// (`--placement-idle`).
    pub placement_idle: Duration,
    /// Serve HTTP/3 (`--http3 on`): QUIC on UDP at the first TLS
    /// listener's port, one socket per poller, and `Alt-Svc: h3=":PORT"`
    /// on the responses of TLS connections. Needs [`Config::tls`]. Off by
    /// default (docs/operations.md says why).
    pub http3: bool,
    /// HTTP/3: past this many connections open on a poller, a client's
    /// first Initial gets a Retry, so that its address is proven before
    /// the server spends a handshake on it (RFC 9000 §8.1.2); 0 asks it of
    /// every client. A flood of Initials from spoofed addresses then costs
    /// the server one small packet each.
    pub http3_retry_above: usize,
}

/// Where durable actors keep their state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateConfig {
    /// One embedded file, `DIR/state.redb`, for this server alone
    /// (`--state DIR`): created if missing, held by one process at a time.
    Dir(PathBuf),
    /// A JetStream key-value bucket on the cluster's NATS, named after its
    /// prefix (`--state jetstream`; needs [`Config::cluster`], and a
    /// nats-server with JetStream, `-js`): created if missing, shared by
    /// every server of the cluster.
    JetStream {
        /// How long a write or a read may take before the actors waiting
        /// for it answer 503 (`--state-timeout`).
        timeout: Duration,
        /// The bucket's replicas, when it is created (`--state-replicas`):
        /// 1, or 3 or 5 on a JetStream cluster.
        replicas: usize,
    },
}

impl Config {
    /// The listeners the server opens: [`Config::listeners`], or
    /// [`Config::bind`] (in TLS with [`Config::tls`]).
    pub fn effective_listeners(&self) -> Vec<Listener> {
        match self.listeners.is_empty() {
            true => vec![Listener {
                addr: self.bind,
                tls: self.tls.is_some(),
            }],
            false => self.listeners.clone(),
        }
    }
}

/// How the server joins its cluster: the NATS servers to connect to, the
/// name it goes by, and what TLS trusts and presents (`--nats`, `--node`,
/// `--nats-ca`, `--nats-tls-cert`).
/// Credentials: a user and password, or a token, in the URLs; or a key,
/// from a `.creds` file (`--nats-creds`) or an NKEY seed (`--nats-nkey`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The NATS servers, tried in turn (`nats://`, `tls://`; a user and
    /// password or a token may be in the URL).
    pub servers: Vec<NatsUrl>,
    /// This server's name in the cluster: `counter@NODE` reaches the actor
    /// `counter` spawned here. Letters, digits, `-` and `_`.
    pub node: String,
    /// PEM certificates to trust for `tls://` servers, instead of the
    /// system's.
    pub ca: Option<PathBuf>,
    /// A certificate and key to present to NATS servers that verify their
    /// clients (`tls { verify: true }`), as PEM files. Read at start, and
    /// again for each connection.
    pub client_cert: Option<TlsFiles>,
    /// A `.creds` file (a user JWT and its NKEY seed, as `nsc` writes
    /// them), for servers in operator (JWT) mode. Read at start, and
    /// again for each connection (so a renewed file is used).
    pub creds: Option<PathBuf>,
    /// A file holding an NKEY user seed (`SU...`), for servers that list
    /// users by NKEY. Read at start, and again for each connection.
    pub nkey: Option<PathBuf>,
    /// The first token of every subject the cluster uses, so that several
    /// clusters can share one NATS.
    pub prefix: String,
    /// How long the NATS server may be quiet before it is pinged; two
    /// pings unanswered drop the connection.
    pub ping_interval: Duration,
    /// The most bytes that may wait to be sent to NATS, per poller; past
    /// it, sends are refused (and counted).
    pub buffer: usize,
    /// How long a request to another server is remembered for its answer
    /// (the routes' own reply timeouts still apply).
    pub call_timeout: Duration,
}

impl ClusterConfig {
    /// Joins through `servers` as `node`, with the defaults for the rest.
    pub fn new(servers: Vec<NatsUrl>, node: &str) -> ClusterConfig {
        ClusterConfig {
            servers,
            node: node.to_string(),
            ca: None,
            client_cert: None,
            creds: None,
            nkey: None,
            prefix: "upc".to_string(),
            ping_interval: Duration::from_secs(20),
            buffer: 8 << 20,
            call_timeout: Duration::from_secs(60),
        }
    }

    /// Checks what a running server relies on: a server to connect to,
    /// a node name and a prefix that are each one subject token, and at
    /// most one key (`creds` or `nkey`).
    pub fn check(&self) -> Result<(), String> {
        if self.servers.is_empty() {
            return Err("no NATS server".into());
        }
        if !is_subject_token(&self.node) {
            return Err(format!(
                "node name {:?}: use letters, digits, '-' and '_'",
                self.node
            ));
        }
        if !is_subject_token(&self.prefix) {
            return Err(format!(
                "subject prefix {:?}: use letters, digits, '-' and '_'",
                self.prefix
            ));
        }
        if self.creds.is_some() && self.nkey.is_some() {
            return Err("a .creds file or an NKEY seed, not both".into());
        }
        Ok(())
    }
}

/// One token of a NATS subject as this server writes them: letters,
/// digits, `-` and `_`, at least one.
pub(crate) fn is_subject_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// This machine's host name, as a node name: what `--node` defaults to
/// (characters a node name may not hold become `-`).
pub fn host_node_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length, and gethostname writes
    // at most that many bytes.
    let written = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name = match written {
        0 => {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            String::from_utf8_lossy(&buf[..end]).into_owned()
        }
        _ => String::new(),
    };
    let name: String = name
        .split('.')
        .next()
        .unwrap_or_default()
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c,
                false => '-',
            },
        )
        .collect();
    match name.is_empty() {
        true => "node".to_string(),
        false => name,
    }
}

/// The certificate chain and private key HTTPS is served with, as PEM files
/// (`--tls-cert`, `--tls-key`): read at start and again on SIGHUP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain: the server's certificate first, then any
    /// intermediates.
    pub cert: PathBuf,
    /// The private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC).
    pub key: PathBuf,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: SocketAddr::from(([0, 0, 0, 0], 9000)),
            listeners: Vec::new(),
            pollers: thread::available_parallelism().map_or(1, usize::from),
            dispatch: Dispatch::Local,
            timeouts: Timeouts::default(),
            max_connections: 100_000,
            shutdown_timeout: Duration::from_secs(10),
            static_dir: None,
            static_limits: StaticLimits::default(),
            upstream: None,
            access_log: None,
            log_name: None,
            static_dotfiles: false,
            pin: false,
            metrics: None,
            max_body: MAX_BODY_LEN,
            ws_max_message: crate::websocket::DEFAULT_MAX_MESSAGE,
            ws_deflate: None,
            tls: None,
            headers: Vec::new(),
            cors: Vec::new(),
            request_id: false,
            redirect_https: None,
            cluster: None,
            actor_routes: Vec::new(),
            http2: true,
            http2_only: false,
            state: None,
            placement_lease: Duration::from_secs(2),
            placement_idle: Duration::from_secs(300),
            http3: false,
            http3_retry_above: 256,
        }
    }
}
