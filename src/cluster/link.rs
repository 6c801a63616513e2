//! One poller's connection to NATS, driven from the poller's event loop:
//! connect (without blocking), the protocol's opening (`INFO`, TLS if
//! asked, `CONNECT`, the subscriptions, `PING`/`PONG`), then messages both
//! ways; on any failure, the connection is dropped and made again after a
//! backoff with jitter, subscribing to everything again.
//!
//! The link's state machine, as mio's examples keep one:
//!
//! - `Down`: no connection; the next try is due at a time.
//! - `Connecting`: a non-blocking connect is under way.
//! - `Up`: connected; the session says whether it is ready (subscribed).
//!
//! What other threads leave in the link's port is written out each round
//! while the session is ready, and refused at once otherwise (a request
//! gets its 503 then, not after its timeout). What comes in is handed on
//! on this poller's thread: an answer to the connection (or whoever) that
//! asked, a request or bytes to the local actor they name, a topic's
//! message to this server's subscribers.

use std::collections::HashMap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::ToSocketAddrs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use log::{debug, error, info, warn};
use mio::event::Event;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use rustls::pki_types::ServerName;
use rustls::ClientConnection;
use uppercut::api::Envelope;

use crate::actors::context::RunContext;
use crate::cluster::codec::{self, Inbound};
use crate::cluster::port::{Admit, JsFailure, JsRequest, JsRetry, LinkPort, Outbound};
use crate::cluster::presence::{self, Claim, Probe, Verdict};
use crate::cluster::subjects::{Addressed, PARTITIONS};
use crate::cluster::{failure, refusal_response, Cluster};
use crate::log_limit::WarnLimiter;
use crate::mail::SendError;
use crate::nats::headers::HeaderBlock;
use crate::nats::info::ServerInfo;
use crate::nats::proto::{self, Msg};
use crate::nats::session::{Event as NatsEvent, Phase, Session};
use crate::nats::url::NatsUrl;
use crate::observe::cluster_metrics::{Carried, ClusterMetrics, Dropped, Refusal};
use crate::routes::actor::ActorRequest;
use crate::routes::reply::{Outcome, ReplySink, ReplyTo};

/// The poller token of the link's socket.
pub(crate) const NATS: Token = Token(usize::MAX - 3);

/// The subscription of this node's actors (`…a.NODE.*`).
const ACTORS_SID: u64 = 1;
/// The subscription of this poller's answers.
const ANSWERS_SID: u64 = 2;
/// Poller 0's subscription of the node's presence subject.
const PRESENCE_SID: u64 = 3;
/// The last token of the subject other servers' claims come back on.
const CLAIM_ANSWER: &[u8] = b"n";
/// Services (`name@*`) from here, one per owned name.
const FIRST_SERVICE_SID: u64 = 100;
/// Bytes for this node's actors, one subscription per partition held.
const FIRST_PARTITION_SID: u64 = 10_000;
/// Topics from here.
const FIRST_TOPIC_SID: u64 = 1_000_000;

/// How long a connect may take.
const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// The first retry's delay, doubled per failure up to `MAX_BACKOFF_MS`.
const FIRST_BACKOFF_MS: u64 = 100;
const MAX_BACKOFF_MS: u64 = 5_000;
/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;

/// How long after its `failures`-th failure in a row (1 for the first) a
/// link tries again: `FIRST_BACKOFF_MS`, doubled per failure up to
/// `MAX_BACKOFF_MS`, with jitter from `random` between half and one and a
/// half of it, so that servers that lost NATS together do not come back
/// together.
fn retry_delay_ms(failures: u32, random: u64) -> u64 {
    let backoff = FIRST_BACKOFF_MS
        .saturating_mul(1 << failures.saturating_sub(1).min(16))
        .min(MAX_BACKOFF_MS);
    backoff / 2 + random % backoff
}

/// Whether the cluster has said it cannot connect, since it last was
/// connected (so that a NATS that stays down is reported once, not per
/// poller and per try).
static REPORTED_DOWN: AtomicBool = AtomicBool::new(false);

/// A request sent, awaiting its answer.
#[derive(Debug)]
struct Awaited {
    reply_to: ReplyTo,
    started: Instant,
    deadline_ms: u64,
    /// The subject it was sent to, for a "no responders" answer.
    to: String,
    /// Answered 504 here at its deadline (else forgotten: its asker has a
    /// timeout of its own).
    bounded: bool,
}

/// A JetStream request sent, awaiting its answer (or waiting to be sent
/// again).
struct JsAwaited {
    request: JsRequest,
    /// When this try's answer is given up on (or, waiting, when it goes
    /// again).
    deadline_ms: u64,
    /// When the request's own timeout ends, over every try.
    until_ms: u64,
    /// Tries sent so far.
    tries: u32,
}

/// How long the first try of an idempotent JetStream request waits for
/// its answer; each next try waits twice as long (a stream without a
/// leader leaves requests unanswered until one is elected).
const JS_FIRST_TRY_MS: u64 = 500;
/// The pause before a request answered "no responders" goes again, at
/// first; it doubles up to `JS_MAX_PAUSE_MS`.
const JS_FIRST_PAUSE_MS: u64 = 20;
const JS_MAX_PAUSE_MS: u64 = 500;

enum Conn {
    Down {
        retry_ms: u64,
    },
    Connecting {
        socket: TcpStream,
        server: usize,
        since_ms: u64,
    },
    Up(Box<Up>),
}

struct Up {
    socket: TcpStream,
    server: usize,
    tls: Option<ClientConnection>,
    session: Session,
}

/// One poller's link.
pub(crate) struct Link {
    index: usize,
    cluster: Arc<Cluster>,
    port: Arc<LinkPort>,
    conn: Conn,
    /// Which server the next connect tries (the configured ones, then
    /// the learned ones).
    next_server: usize,
    /// Servers the cluster's `INFO` named (`connect_urls`) that were not
    /// configured, tried after the configured ones, as NATS clients do.
    learned: Vec<NatsUrl>,
    /// Connects failed since the last that succeeded.
    failures: u32,
    /// Has been ready at least once.
    was_ready: bool,
    /// Ready now (counted in the cluster's `links_up`).
    ready: bool,
    /// The start of this poller's answer subjects (`…r.NODE.NONCE.N.`).
    answer_prefix: Bytes,
    /// The node's presence subject (poller 0 holds it).
    presence_subject: Bytes,
    /// Poller 0's probe of the node's name on this connection, while it
    /// is open.
    probe: Option<Probe>,
    /// Poller 0 has probed on this connection.
    probed: bool,
    /// The claim its last probe carried: answers to it are judged against
    /// it, as their senders judged it.
    probed_with: Option<Claim>,
    /// The nonces of servers told that the name is this one's (each is
    /// logged once).
    rivals: Vec<u64>,
    awaited: HashMap<u64, Awaited>,
    /// JetStream requests sent (their ids are the calls' too).
    js_awaited: HashMap<u64, JsAwaited>,
    /// JetStream requests answered "no responders", to go again.
    js_later: Vec<JsAwaited>,
    /// Bounded requests among `awaited`.
    bounded: usize,
    next_id: u64,
    /// Topics this link holds the subscription of, with their sids.
    topics: HashMap<String, u64>,
    next_topic_sid: u64,
    /// The server drains: no new requests are taken.
    draining: bool,
    /// Closed for good (the server stops): nothing is logged as lost.
    stopped: bool,
    taken: Vec<Outbound>,
    read_buf: Box<[u8]>,
    scratch: BytesMut,
    rng: u64,
}

impl Link {
    pub(crate) fn new(index: usize, cluster: Arc<Cluster>) -> Link {
        let mut answer_prefix = cluster.subjects().answers(index);
        answer_prefix.pop();
        let port = Arc::clone(cluster.port(index));
        let cluster_presence = cluster.subjects().presence();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Link {
            index,
            cluster,
            port,
            conn: Conn::Down { retry_ms: 0 },
            next_server: index,
            learned: Vec::new(),
            failures: 0,
            was_ready: false,
            ready: false,
            answer_prefix: Bytes::from(answer_prefix),
            presence_subject: Bytes::from(cluster_presence),
            probe: None,
            probed: false,
            probed_with: None,
            rivals: Vec::new(),
            awaited: HashMap::new(),
            js_awaited: HashMap::new(),
            js_later: Vec::new(),
            bounded: 0,
            next_id: 0,
            topics: HashMap::new(),
            next_topic_sid: FIRST_TOPIC_SID,
            draining: false,
            stopped: false,
            taken: Vec::new(),
            read_buf: vec![0; READ_CHUNK].into_boxed_slice(),
            scratch: BytesMut::new(),
            rng: seed | 1,
        }
    }

    /// When the link next needs its poller without an event: a retry, a
    /// connect's timeout.
    pub(crate) fn next_deadline_ms(&self) -> Option<u64> {
        let conn = match &self.conn {
            // Woken when poller 0 holds the name.
            Conn::Down { .. } if !self.may_connect() => None,
            Conn::Down { retry_ms } => Some(*retry_ms),
            Conn::Connecting { since_ms, .. } => Some(since_ms + CONNECT_TIMEOUT_MS),
            Conn::Up(_) => None,
        };
        // A JetStream request's timeout may come before the next sweep, as
        // may a bounded request's.
        let js = self
            .js_awaited
            .values()
            .chain(&self.js_later)
            .map(|js| js.deadline_ms)
            .min();
        let bounded = match self.bounded {
            0 => None,
            _ => self
                .awaited
                .values()
                .filter(|awaited| awaited.bounded)
                .map(|awaited| awaited.deadline_ms)
                .min(),
        };
        let js = match (js, bounded) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let js = match (js, self.probe.map(Probe::deadline_ms)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (conn, js) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Work that waits for this link from other threads, and that it can
    /// take now.
    pub(crate) fn is_pending(&self) -> bool {
        self.port.is_pending() && self.has_room()
    }

    /// Timers: a retry or a connect's timeout due, keepalive pings,
    /// JetStream requests past their timeout.
    pub(crate) fn tick(&mut self, registry: &Registry, now_ms: u64) {
        // Another server keeps the node's name: every link leaves.
        if !self.stopped && self.cluster.presence().is_taken() {
            return self.stop(registry);
        }
        self.probe_tick(registry, now_ms);
        self.expire_js(now_ms);
        self.resend_js(now_ms);
        self.expire_bounded(now_ms);
        let interval = self.cluster.config().ping_interval.as_millis() as u64;
        let stale = match &mut self.conn {
            Conn::Down { retry_ms } => {
                if now_ms >= *retry_ms && self.may_connect() {
                    self.connect(registry, now_ms);
                }
                return;
            }
            Conn::Connecting { since_ms, .. } => {
                if now_ms >= *since_ms + CONNECT_TIMEOUT_MS {
                    self.lose(registry, now_ms, "the connect timed out".into());
                }
                return;
            }
            Conn::Up(up) => up.session.keepalive(now_ms, interval),
        };
        match stale {
            Err(e) => self.lose(registry, now_ms, e.to_string()),
            Ok(()) => self.flush(registry, now_ms),
        }
    }

    /// Poller 0 connects first, alone, and asks for the node's name; the
    /// other pollers connect once it holds it (and may reconnect at any
    /// time after), so nothing for this node is taken while the name may
    /// be another server's.
    fn may_connect(&self) -> bool {
        self.index == 0 || self.cluster.presence().joined()
    }

    /// Once a second: forgets requests whose answer can no longer matter
    /// (each asker has its own timeout).
    pub(crate) fn sweep(&mut self, now_ms: u64) {
        // A call's asker has its own timeout.
        self.awaited
            .retain(|_, awaited| awaited.bounded || awaited.deadline_ms > now_ms);
        self.expire_bounded(now_ms);
        self.expire_js(now_ms);
    }

    /// Answers 504 each bounded request past its deadline.
    fn expire_bounded(&mut self, now_ms: u64) {
        if self.bounded == 0 {
            return;
        }
        let expired: Vec<u64> = self
            .awaited
            .iter()
            .filter(|(_, awaited)| awaited.bounded && awaited.deadline_ms <= now_ms)
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            if let Some(awaited) = self.awaited.remove(&id) {
                self.bounded -= 1;
                let why = format!("{} did not answer in time", describe_subject(&awaited.to));
                awaited.reply_to.send(Outcome::Answered(failure(504, &why)));
            }
        }
    }

    /// Tells each JetStream request past its timeout that its answer is
    /// lost, or sends it again when it is idempotent and has time left.
    fn expire_js(&mut self, now_ms: u64) {
        if self.js_awaited.is_empty() {
            return;
        }
        let expired: Vec<u64> = self
            .js_awaited
            .iter()
            .filter(|(_, js)| js.deadline_ms <= now_ms)
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            let Some(js) = self.js_awaited.remove(&id) else {
                continue;
            };
            match js.request.retry == JsRetry::Idempotent && now_ms < js.until_ms {
                true => self.send_js(js, now_ms),
                false => (js.request.done)(Err(JsFailure::Lost)),
            }
        }
    }

    /// Sends again the requests answered "no responders" whose pause is
    /// over.
    fn resend_js(&mut self, now_ms: u64) {
        if self.js_later.is_empty() {
            return;
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.js_later)
            .into_iter()
            .partition(|js| js.deadline_ms <= now_ms);
        self.js_later = later;
        for js in due {
            self.send_js(js, now_ms);
        }
    }

    /// Starts a connection to the next server.
    fn connect(&mut self, registry: &Registry, now_ms: u64) {
        let server = self.next_server % (self.cluster.config().servers.len() + self.learned.len());
        self.next_server += 1;
        let url = &self.url(server);
        let addr = match url.authority().to_socket_addrs() {
            Ok(mut addrs) => addrs.next(),
            Err(e) => return self.fail(now_ms, url, &format!("cannot resolve: {e}")),
        };
        let Some(addr) = addr else {
            return self.fail(now_ms, url, "the name has no address");
        };
        let mut socket = match TcpStream::connect(addr) {
            Ok(socket) => socket,
            Err(e) => return self.fail(now_ms, url, &e.to_string()),
        };
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = registry.register(&mut socket, NATS, interest) {
            return self.fail(now_ms, url, &format!("register: {e}"));
        }
        self.conn = Conn::Connecting {
            socket,
            server,
            since_ms: now_ms,
        };
    }

    /// Server `server`: a configured one, or one learned after them.
    fn url(&self, server: usize) -> NatsUrl {
        let servers = &self.cluster.config().servers;
        match servers.get(server) {
            Some(url) => url.clone(),
            None => self.learned[server - servers.len()].clone(),
        }
    }

    /// Takes the servers an `INFO` named that are not known yet; they are
    /// reached with the first configured URL's scheme and credentials.
    fn learn(&mut self, info: &ServerInfo) {
        let servers = &self.cluster.config().servers;
        for advertised in &info.connect_urls {
            let Ok(mut url) = NatsUrl::parse(advertised) else {
                continue;
            };
            let known = servers.iter().chain(&self.learned);
            if known.map(NatsUrl::authority).any(|a| a == url.authority()) {
                continue;
            }
            url.tls = servers[0].tls;
            url.credentials = servers[0].credentials.clone();
            debug!("NATS (poller {}): learned server {url}", self.index);
            self.learned.push(url);
        }
    }

    /// A connect failed: try again after the backoff.
    fn fail(&mut self, now_ms: u64, url: &NatsUrl, reason: &str) {
        if self.index == 0 {
            // The server starts without waiting on NATS; the name is
            // asked for once it is reached.
            self.cluster.presence().set(Verdict::Unreachable);
        }
        self.probe = None;
        self.probed = false;
        self.probed_with = None;
        if !REPORTED_DOWN.swap(true, Ordering::AcqRel) {
            warn!("NATS: cannot connect to {url}: {reason}; serving local routes and retrying");
        } else {
            debug!(
                "NATS (poller {}): cannot connect to {url}: {reason}",
                self.index
            );
        }
        self.failures = self.failures.saturating_add(1);
        let random = self.random();
        self.conn = Conn::Down {
            retry_ms: now_ms + retry_delay_ms(self.failures, random),
        };
    }

    /// The connection is lost (or never became ready): the requests it
    /// carried are answered 503, and a new one is made after the backoff.
    fn lose(&mut self, registry: &Registry, now_ms: u64, reason: String) {
        let conn = std::mem::replace(&mut self.conn, Conn::Down { retry_ms: now_ms });
        let (server, established) = match conn {
            Conn::Down { .. } => return,
            Conn::Connecting {
                mut socket, server, ..
            } => {
                let _ = registry.deregister(&mut socket);
                (server, false)
            }
            Conn::Up(mut up) => {
                let _ = registry.deregister(&mut up.socket);
                // Later INFOs may have named more servers since it was ready.
                if let Some(info) = up.session.info() {
                    self.learn(&info.clone());
                }
                (up.server, up.session.phase() == Phase::Ready)
            }
        };
        self.set_ready(false);
        let lost = SendError::Unreachable;
        self.bounded = 0;
        for (_, awaited) in self.awaited.drain() {
            awaited
                .reply_to
                .send(Outcome::Answered(refusal_response(&lost)));
        }
        for (_, js) in self.js_awaited.drain() {
            (js.request.done)(Err(JsFailure::Lost));
        }
        for js in self.js_later.drain(..) {
            (js.request.done)(Err(JsFailure::NoResponders));
        }
        let url = self.url(server);
        // A connection that was serving is lost, not refused: say so once
        // (for every poller), and let the retries report as connects do.
        if established && !REPORTED_DOWN.swap(true, Ordering::AcqRel) {
            warn!(
                "NATS: lost the connection to {url}: {reason}; serving local routes and reconnecting"
            );
        }
        self.fail(now_ms, &url, &reason);
    }

    fn set_ready(&mut self, ready: bool) {
        if self.ready == ready {
            return;
        }
        self.ready = ready;
        let max = match &self.conn {
            Conn::Up(up) => up.session.max_payload(),
            _ => crate::nats::info::DEFAULT_MAX_PAYLOAD,
        };
        self.port.set_up(ready, max);
        let links = &self.cluster.metrics().links_up;
        let node = &self.cluster.config().node;
        if ready {
            if links.fetch_add(1, Ordering::AcqRel) == 0 {
                REPORTED_DOWN.store(false, Ordering::Release);
                if let Conn::Up(up) = &self.conn {
                    let url = self.url(up.server);
                    let learned = match up.server >= self.cluster.config().servers.len() {
                        true => ", a server its cluster named",
                        false => "",
                    };
                    let version = up.session.info().map_or("", |i| i.version.as_str());
                    let again = if self.was_ready { "re" } else { "" };
                    info!(
                        "NATS: {again}connected to {url}{learned} (nats-server {version}) as node {node}"
                    );
                }
            }
            if self.was_ready {
                self.cluster
                    .metrics()
                    .reconnects
                    .fetch_add(1, Ordering::Relaxed);
            }
            self.was_ready = true;
            self.failures = 0;
        } else if links.fetch_sub(1, Ordering::AcqRel) == 1 {
            match self.stopped {
                true => info!("NATS: node {node} left the cluster"),
                false => warn!(
                    "NATS: node {node} lost its connection; remote sends fail until it is back"
                ),
            }
        }
    }

    fn random(&mut self) -> u64 {
        // xorshift64
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// A readiness event for the link's socket.
    pub(crate) fn on_event(
        &mut self,
        event: &Event,
        registry: &Registry,
        now_ms: u64,
        context: &RunContext<'_>,
    ) {
        let connected = match &mut self.conn {
            Conn::Connecting { socket, .. } => Some(connect_result(socket, event)),
            _ => None,
        };
        match connected {
            None | Some(Ok(true)) => {}
            // Still connecting: a later event says how it went.
            Some(Ok(false)) => return,
            Some(Err(reason)) => return self.lose(registry, now_ms, reason),
        }
        if let Conn::Connecting { .. } = self.conn {
            let Conn::Connecting { socket, server, .. } =
                std::mem::replace(&mut self.conn, Conn::Down { retry_ms: now_ms })
            else {
                return;
            };
            let _ = socket.set_nodelay(true);
            self.conn = Conn::Up(Box::new(Up {
                socket,
                server,
                tls: None,
                session: Session::new(now_ms),
            }));
        }
        let hung_up = event.is_read_closed() || event.is_error();
        if let Err(reason) = self.read(now_ms, hung_up, context) {
            return self.lose(registry, now_ms, reason);
        }
        self.flush(registry, now_ms);
    }

    /// Reads what the socket holds and handles it.
    ///
    /// A plain read shorter than the buffer emptied the socket, and with
    /// edge-triggered readiness whatever NATS sends after it raises a new
    /// event: the link stops there rather than spend a read on
    /// `WouldBlock` (half of a busy link's reads). After a hang-up, whose
    /// edge this event took, it reads on to the end.
    fn read(&mut self, now_ms: u64, hung_up: bool, context: &RunContext<'_>) -> Result<(), String> {
        loop {
            let Conn::Up(up) = &mut self.conn else {
                return Ok(());
            };
            let mut drained = false;
            let ended = match &mut up.tls {
                None => match up.socket.read(&mut self.read_buf) {
                    Ok(0) => true,
                    Ok(len) => {
                        up.session.input().extend_from_slice(&self.read_buf[..len]);
                        drained = len < self.read_buf.len() && !hung_up;
                        false
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e.to_string()),
                },
                Some(tls) => match tls.read_tls(&mut up.socket) {
                    Ok(0) => true,
                    Ok(_) => {
                        let state = tls.process_new_packets().map_err(|e| format!("TLS: {e}"))?;
                        let mut left = state.plaintext_bytes_to_read();
                        while left > 0 {
                            let len = tls
                                .reader()
                                .read(&mut self.read_buf)
                                .map_err(|e| e.to_string())?;
                            if len == 0 {
                                break;
                            }
                            up.session.input().extend_from_slice(&self.read_buf[..len]);
                            left = left.saturating_sub(len);
                        }
                        state.peer_has_closed()
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e.to_string()),
                },
            };
            up.session.heard(now_ms);
            self.handle_events(now_ms, context)?;
            if ended {
                return Err("the server closed the connection".into());
            }
            if drained {
                break;
            }
        }
        Ok(())
    }

    /// Handles what the session has whole.
    fn handle_events(&mut self, now_ms: u64, context: &RunContext<'_>) -> Result<(), String> {
        loop {
            let Conn::Up(up) = &mut self.conn else {
                return Ok(());
            };
            let event = match up.session.poll_event() {
                Ok(Some(event)) => event,
                Ok(None) => return Ok(()),
                Err(e) => return Err(e.to_string()),
            };
            match event {
                NatsEvent::Info(info) => {
                    self.learn(&info);
                    self.greet(&info)?
                }
                NatsEvent::Ready => {
                    // Poller 0 asks at every connection (a server that took
                    // the name while NATS was split is found then); it is
                    // ready once the name is held and all is subscribed.
                    if let Some(Probe::Sent { .. }) = self.probe {
                        // The server took the probe: the window opens.
                        self.probe = self.probe.map(|probe| probe.echoed(now_ms));
                    } else if self.index == 0 && !self.probed {
                        self.probed = true;
                        self.send_probe(now_ms);
                    }
                    if self.cluster.presence().joined() {
                        self.set_ready(true);
                    }
                }
                NatsEvent::Msg(msg) => self.dispatch(msg, now_ms, context),
                NatsEvent::ServerError(text) => {
                    static ERRORS: WarnLimiter = WarnLimiter::new();
                    if ERRORS.admit().is_some() {
                        warn!("NATS (poller {}): the server said: {text}", self.index);
                    }
                    let lower = text.to_ascii_lowercase();
                    if lower.contains("authorization") || lower.contains("authentication") {
                        return Err(format!("refused: {text}"));
                    }
                }
            }
        }
    }

    /// The server's `INFO` came: TLS if the URL or the server asks for
    /// it, then `CONNECT` (with the nonce signed, when it gave one and a
    /// key was given), every subscription, and the `PING` whose `PONG`
    /// makes the link ready.
    fn greet(&mut self, info: &ServerInfo) -> Result<(), String> {
        let subscriptions = self.subscriptions();
        let name = format!("{}/{}", self.cluster.config().node, self.index);
        let cluster = Arc::clone(&self.cluster);
        let url = match &self.conn {
            Conn::Up(up) => self.url(up.server),
            _ => return Ok(()),
        };
        let url = &url;
        let Conn::Up(up) = &mut self.conn else {
            return Ok(());
        };
        let tls = url.tls || info.tls_required;
        if tls {
            let config = cluster
                .tls()
                .ok_or("the server asks for TLS, and no TLS configuration could be made")?;
            let server_name = ServerName::try_from(url.host.clone())
                .map_err(|e| format!("TLS server name {:?}: {e}", url.host))?;
            let session =
                ClientConnection::new(config, server_name).map_err(|e| format!("TLS: {e}"))?;
            up.tls = Some(session);
        }
        if !info.headers {
            return Err("the NATS server does not support headers (2.2 and later do)".into());
        }
        let mut credentials = url.credentials.clone();
        // The key file is read only for a server that asks (a nonce).
        if let Some(nonce) = &info.nonce {
            if let Some(identity) = cluster.identity() {
                identity.answer(nonce, &mut credentials)?;
            }
        }
        up.session.connect(&name, &credentials, tls, |out| {
            for (subject, queue, sid) in &subscriptions {
                let queue = queue.as_deref().map(str::as_bytes);
                proto::write_sub(out, subject.as_bytes(), queue, *sid);
            }
        });
        Ok(())
    }

    /// Every subscription a new connection makes: subject, queue group,
    /// sid.
    fn subscriptions(&self) -> Vec<(String, Option<String>, u64)> {
        let mut subs = vec![(
            format!("{}*", String::from_utf8_lossy(&self.answer_prefix)),
            None,
            ANSWERS_SID,
        )];
        if self.index == 0 {
            subs.push((self.cluster.subjects().presence(), None, PRESENCE_SID));
        }
        if self.cluster.presence().joined() {
            subs.extend(self.node_subscriptions());
        }
        subs
    }

    /// The subscriptions that take what is sent to this node (or to its
    /// names and topics): made once the node's name is held.
    fn node_subscriptions(&self) -> Vec<(String, Option<String>, u64)> {
        let subjects = self.cluster.subjects();
        let mut subs = Vec::new();
        // Bytes for an actor come on one poller, partition by partition,
        // so they are handed on in the order they were sent.
        let pollers = self.cluster.pollers() as u32;
        for partition in (0..PARTITIONS).filter(|p| p % pollers == self.index as u32) {
            let sid = FIRST_PARTITION_SID + u64::from(partition);
            subs.push((subjects.messages_here(partition), None, sid));
        }
        if !self.draining {
            let (actors, group) = subjects.actors_here();
            subs.push((actors, Some(group), ACTORS_SID));
            for (at, name) in self.cluster.names().iter().enumerate() {
                let service = subjects.service(name);
                subs.push((
                    service.clone(),
                    Some(service),
                    FIRST_SERVICE_SID + at as u64,
                ));
            }
        }
        for (topic, sid) in &self.topics {
            subs.push((subjects.topic(topic), None, *sid));
        }
        subs
    }

    /// Hands on one message from NATS.
    fn dispatch(&mut self, msg: Msg, now_ms: u64, context: &RunContext<'_>) {
        let metrics = Arc::clone(self.cluster.metrics());
        let size = msg.headers.len() + msg.payload.len();
        if msg.subject == self.presence_subject {
            return self.on_probe(msg);
        }
        if let Some(id) = msg.subject.strip_prefix(&self.answer_prefix[..]) {
            if id == CLAIM_ANSWER {
                return self.on_claim(msg);
            }
            metrics.received(Carried::Answer, size);
            return match std::str::from_utf8(id).ok().and_then(|id| id.parse().ok()) {
                Some(id) => self.answered(id, msg, now_ms),
                None => metrics.dropped(Dropped::Unasked),
            };
        }
        let Some(addressed) = self.cluster.subjects().addressed(&msg.subject) else {
            return metrics.dropped(Dropped::Unasked);
        };
        let inbound = codec::read(&msg.headers, msg.payload.clone());
        match (addressed, inbound) {
            (Addressed::Actor(name), Ok(Inbound::Request(parts))) => {
                metrics.received(Carried::Request, size);
                let Some(reply) = msg.reply else {
                    return metrics.dropped(Dropped::Malformed);
                };
                let answer = Box::new(RemoteAnswer {
                    port: Arc::clone(&self.port),
                    reply,
                    metrics: Arc::clone(&metrics),
                });
                let request = ActorRequest::new(parts, ReplyTo::Elsewhere(answer));
                // A placed name another server took this one to hold: not
                // forwarded again.
                if let Some(placement) = context.directory().placement() {
                    if placement.places(&name) {
                        return placement.deliver(&name, Envelope::of(request), true, context);
                    }
                }
                if !context.directory().reaches(&name) {
                    metrics.dropped(Dropped::NoActor);
                    let node = &self.cluster.config().node;
                    let why = format!("no actor {name:?} on node {node}");
                    return request.respond(failure(503, &why));
                }
                context.send_as("", &name, Envelope::of(request));
            }
            (Addressed::Actor(name), Ok(Inbound::Bytes { payload, from, .. })) => {
                metrics.received(Carried::Publish, size);
                if let Some(placement) = context.directory().placement() {
                    if placement.places(&name) {
                        let envelope = payload.envelope(&from);
                        return placement.deliver(&name, envelope, true, context);
                    }
                }
                if !context.directory().reaches(&name) {
                    return metrics.dropped(Dropped::NoActor);
                }
                context.send_as(&from, &name, payload.envelope(&from));
            }
            (
                Addressed::Topic(topic),
                Ok(Inbound::Bytes {
                    payload,
                    from,
                    node,
                }),
            ) => {
                metrics.received(Carried::Publish, size);
                // This node's other pollers' messages: its subscribers had
                // them from the publisher itself.
                if node == self.cluster.config().node.as_bytes() {
                    return;
                }
                let directory = context.directory();
                directory.publish_here(&topic, &from, &payload, |address, envelope| {
                    context.send_as(&from, address, envelope)
                });
            }
            (_, Err(_)) => {
                metrics.dropped(Dropped::Malformed);
                // A request that does not read is still answered, so its
                // asker need not wait for its timeout.
                if let Some(reply) = msg.reply {
                    let why = "the request did not read on this server";
                    let answer = Outbound::Answer {
                        reply,
                        outcome: Outcome::Answered(failure(502, why)),
                    };
                    let _ = self.port.push(answer, Admit::Answer);
                }
            }
            _ => metrics.dropped(Dropped::Malformed),
        }
    }

    /// Poller 0 asks whoever else holds the node's name. Before the name
    /// is held, a `PING` follows, whose `PONG` says that NATS handed the
    /// probe to every other holder of the subject: the window opens then.
    /// Once held (a reconnect), the claim goes alone: a rival's answer,
    /// whenever it comes, is judged as any claim is.
    fn send_probe(&mut self, now_ms: u64) {
        let mine = self.cluster.claim();
        let claim = mine.encode();
        self.probed_with = Some(mine);
        let mut reply = BytesMut::from(&self.answer_prefix[..]);
        reply.extend_from_slice(CLAIM_ANSWER);
        let subject = &self.presence_subject;
        let held = self.cluster.presence().joined();
        let Conn::Up(up) = &mut self.conn else {
            return;
        };
        match held {
            true => proto::write_pub(up.session.output(), subject, Some(&reply), &claim),
            false => {
                up.session
                    .subscribe(|out| proto::write_pub(out, subject, Some(&reply), &claim));
                self.probe = Some(Probe::Sent { at_ms: now_ms });
            }
        }
    }

    /// The probe's timers: a connection whose server does not take the
    /// probe is dropped; the name is this server's once the window closed
    /// with no rival outranking it.
    fn probe_tick(&mut self, registry: &Registry, now_ms: u64) {
        let Some(probe) = self.probe else {
            return;
        };
        if now_ms < probe.deadline_ms() {
            return;
        }
        match probe {
            Probe::Sent { .. } => {
                let why = "NATS did not answer the node name's probe".to_string();
                self.lose(registry, now_ms, why);
            }
            Probe::Back { .. } => {
                self.probe = None;
                if self.cluster.presence().joined() {
                    return;
                }
                self.cluster.presence().set(Verdict::Joined);
                let subs = self.node_subscriptions();
                if let Conn::Up(up) = &mut self.conn {
                    up.session.subscribe(|out| {
                        for (subject, queue, sid) in &subs {
                            let queue = queue.as_deref().map(str::as_bytes);
                            proto::write_sub(out, subject.as_bytes(), queue, *sid);
                        }
                    });
                }
                // The other pollers connect now.
                for poller in 1..self.cluster.pollers() {
                    self.cluster.port(poller).wake();
                }
            }
        }
    }

    /// A claim on the node's presence subject: this server's own probe
    /// back, or another server's, answered with this one's claim.
    fn on_probe(&mut self, msg: Msg) {
        let Some(other) = Claim::decode(&msg.payload) else {
            return self.cluster.metrics().dropped(Dropped::Malformed);
        };
        if other.nonce == self.cluster.claim().nonce {
            // Not sent back to its sender (`echo` is off): a copy another
            // route brought.
            return;
        }
        // Judged against the claim it is answered with, as its sender
        // judges the answer.
        let mine = self.cluster.claim();
        if let Some(reply) = &msg.reply {
            let claim = mine.encode();
            if let Some(out) = self.ready_output() {
                proto::write_pub(out, reply, None, &claim);
            }
        }
        self.judge(other, mine);
    }

    /// An answer to poller 0's probe: another server's claim, or NATS
    /// saying that nobody else holds the subject (nothing to judge).
    fn on_claim(&mut self, msg: Msg) {
        let status = HeaderBlock::parse(&msg.headers)
            .ok()
            .and_then(|block| block.status);
        if status == Some(503) && msg.payload.is_empty() {
            return;
        }
        let Some(other) = Claim::decode(&msg.payload) else {
            return self.cluster.metrics().dropped(Dropped::Malformed);
        };
        let mine = match &self.probed_with {
            Some(probed) => probed.clone(),
            None => self.cluster.claim(),
        };
        self.judge(other, mine);
    }

    /// Another server claims the node's name: of `other` and `mine` (the
    /// claim it saw), the one `Claim::outranks` puts second stands down;
    /// both servers judge the same pair alike.
    fn judge(&mut self, other: Claim, mine: Claim) {
        let presence = self.cluster.presence();
        if other.nonce == mine.nonce || presence.is_taken() {
            return;
        }
        let node = &self.cluster.config().node;
        if !other.outranks(&mine) {
            if !self.rivals.contains(&other.nonce) {
                self.rivals.push(other.nonce);
                warn!(
                    "NATS: another server asked for node name {node:?} ({}); it was told the name is this server's",
                    other.describe()
                );
            }
            return;
        }
        let message = presence::taken_message(node, &other);
        // At start the start itself fails with the message.
        if presence.verdict() != Verdict::Pending {
            error!("NATS: {message}; this server leaves the cluster");
        }
        presence.set(Verdict::Taken(message));
        let taken = &self.cluster.metrics().name_taken;
        taken.store(1, Ordering::Relaxed);
        self.probe = None;
        for poller in 0..self.cluster.pollers() {
            self.cluster.port(poller).wake();
        }
    }

    /// The answer to request `id` came.
    fn answered(&mut self, id: u64, msg: Msg, now_ms: u64) {
        let metrics = Arc::clone(self.cluster.metrics());
        let status = HeaderBlock::parse(&msg.headers)
            .ok()
            .and_then(|block| block.status);
        if let Some(mut js) = self.js_awaited.remove(&id) {
            if status != Some(503) {
                return (js.request.done)(Ok(msg));
            }
            if js.request.retry != JsRetry::Unheard {
                return (js.request.done)(Err(JsFailure::NoResponders));
            }
            // Nobody behind the subject yet: nothing was done, and a
            // stream just made or without a leader gets one soon.
            let pause = (JS_FIRST_PAUSE_MS << js.tries.min(8)).min(JS_MAX_PAUSE_MS);
            return match now_ms + pause < js.until_ms {
                true => {
                    js.deadline_ms = now_ms + pause;
                    self.js_later.push(js);
                }
                false => (js.request.done)(Err(JsFailure::NoResponders)),
            };
        }
        let Some(awaited) = self.awaited.remove(&id) else {
            return metrics.dropped(Dropped::Late);
        };
        if awaited.bounded {
            self.bounded -= 1;
        }
        let reply_to = awaited.reply_to;
        metrics.call(awaited.started.elapsed());
        let outcome = match (status, codec::read(&msg.headers, msg.payload)) {
            // NATS itself says nobody subscribes to the subject.
            (Some(503), _) => {
                let why = format!("no server serves {}", describe_subject(&awaited.to));
                Outcome::Answered(failure(503, &why))
            }
            (_, Ok(Inbound::Answer(response))) => Outcome::Answered(response),
            (_, Ok(Inbound::Gone)) => Outcome::Gone,
            _ => {
                metrics.dropped(Dropped::Malformed);
                let why = "a malformed answer from another server";
                Outcome::Answered(failure(502, why))
            }
        };
        reply_to.send(outcome);
    }

    /// Writes what other threads left, in order, as far as the session's
    /// output has room (`--nats-buffer`: the rest waits in the port for
    /// the socket to take some), and sends what it can; true when
    /// something was taken. While the session is not ready, everything
    /// waiting is taken and refused.
    pub(crate) fn settle(&mut self, registry: &Registry, now_ms: u64) -> bool {
        let room = match &mut self.conn {
            Conn::Up(up) if up.session.phase() == Phase::Ready => {
                let limit = self.cluster.config().buffer;
                limit.saturating_sub(up.session.output().len())
            }
            _ => usize::MAX,
        };
        let mut taken = std::mem::take(&mut self.taken);
        self.port.take(&mut taken, room);
        let found = !taken.is_empty();
        for item in taken.drain(..) {
            self.write_item(item, now_ms);
        }
        self.taken = taken;
        if found {
            self.flush(registry, now_ms);
        }
        found
    }

    /// Whether the output has room for what waits in the port: while the
    /// socket holds the output back, what waits is not work for the
    /// poller (the writable edge is).
    fn has_room(&self) -> bool {
        match &self.conn {
            Conn::Up(up) if up.session.phase() == Phase::Ready => {
                up.session.output_len() < self.cluster.config().buffer
            }
            _ => true,
        }
    }

    /// Writes one item into the session's output, or refuses it.
    fn write_item(&mut self, item: Outbound, now_ms: u64) {
        let metrics = Arc::clone(self.cluster.metrics());
        if let Outbound::Topic { topic, subscribed } = item {
            return self.topic(topic, subscribed);
        }
        let up = match &mut self.conn {
            Conn::Up(up) if up.session.phase() == Phase::Ready => up,
            _ => return refuse(item, SendError::Unreachable, &metrics),
        };
        let max = up.session.max_payload();
        let scratch = &mut self.scratch;
        match item {
            Outbound::Request {
                subject,
                request,
                timeout,
                bounded,
            } => {
                self.next_id += 1;
                let id = self.next_id;
                let mut reply = BytesMut::from(&self.answer_prefix[..]);
                proto::put_number(&mut reply, id);
                let out = up.session.output();
                let written = codec::write_request(
                    out,
                    scratch,
                    subject.as_bytes(),
                    &reply,
                    request.parts(),
                    max,
                );
                match written {
                    Ok(size) => {
                        metrics.sent(Carried::Request, size);
                        let (_, reply_to) = request.into_parts();
                        if let Some(reply_to) = reply_to {
                            // A moment past the asker's own timeout, or
                            // its own when bounded.
                            let slack = if bounded { 0 } else { 1_000 };
                            let deadline_ms = now_ms + timeout.as_millis() as u64 + slack;
                            if bounded {
                                self.bounded += 1;
                            }
                            self.awaited.insert(
                                id,
                                Awaited {
                                    reply_to,
                                    started: Instant::now(),
                                    deadline_ms,
                                    to: subject,
                                    bounded,
                                },
                            );
                        }
                    }
                    Err(len) => {
                        metrics.refused(Refusal::TooLarge);
                        request.respond(refusal_response(&SendError::TooLarge { len, max }));
                    }
                }
            }
            Outbound::Answer { reply, outcome } => {
                let out = up.session.output();
                let node = &self.cluster.config().node;
                let written = match &outcome {
                    Outcome::Answered(response) => {
                        match codec::write_answer(out, scratch, &reply, response, node, max) {
                            Ok(size) => Ok(size),
                            Err(len) => {
                                // Too large to go back: the asker gets a
                                // 502 saying so.
                                metrics.refused(Refusal::TooLarge);
                                let why = SendError::TooLarge { len, max };
                                let failed = failure(502, &format!("the answer was {why}"));
                                codec::write_answer(out, scratch, &reply, &failed, node, max)
                            }
                        }
                    }
                    Outcome::Gone => {
                        codec::write_gone(out, scratch, &reply);
                        Ok(scratch.len())
                    }
                };
                if let Ok(size) = written {
                    metrics.sent(Carried::Answer, size);
                }
            }
            Outbound::Bytes {
                subject,
                from,
                payload,
            } => {
                let out = up.session.output();
                let node = &self.cluster.config().node;
                let subject = subject.as_bytes();
                match codec::write_bytes(out, scratch, subject, &payload, &from, node, max) {
                    Ok(size) => metrics.sent(Carried::Publish, size),
                    Err(_) => metrics.refused(Refusal::TooLarge),
                }
            }
            Outbound::Js(request) => {
                let until_ms = now_ms + request.timeout.as_millis() as u64;
                let js = JsAwaited {
                    request,
                    deadline_ms: until_ms,
                    until_ms,
                    tries: 0,
                };
                self.send_js(js, now_ms);
            }
            Outbound::Topic { .. } => {}
        }
    }

    /// Sends (a try of) a JetStream request, or tells it why it cannot go.
    fn send_js(&mut self, mut js: JsAwaited, now_ms: u64) {
        let up = match &mut self.conn {
            Conn::Up(up) if up.session.phase() == Phase::Ready => up,
            _ => return (js.request.done)(Err(JsFailure::Refused(SendError::Unreachable))),
        };
        self.next_id += 1;
        let id = self.next_id;
        let mut reply = BytesMut::from(&self.answer_prefix[..]);
        proto::put_number(&mut reply, id);
        let out = up.session.output();
        let request = &js.request;
        match request.headers.is_empty() {
            true => proto::write_pub(
                out,
                request.subject.as_bytes(),
                Some(&reply),
                &request.payload,
            ),
            false => proto::write_hpub(
                out,
                request.subject.as_bytes(),
                Some(&reply),
                &request.headers,
                &request.payload,
            ),
        }
        js.deadline_ms = match request.retry {
            JsRetry::Idempotent => (now_ms + (JS_FIRST_TRY_MS << js.tries.min(8))).min(js.until_ms),
            JsRetry::Unheard | JsRetry::Never => js.until_ms,
        };
        js.tries += 1;
        self.js_awaited.insert(id, js);
    }

    /// Subscribes to `topic`, or unsubscribes (now if connected; on every
    /// connection from now on either way).
    fn topic(&mut self, topic: String, subscribed: bool) {
        let subject = self.cluster.subjects().topic(&topic);
        let sid = match subscribed {
            true => {
                if self.topics.contains_key(&topic) {
                    return;
                }
                self.next_topic_sid += 1;
                self.topics.insert(topic, self.next_topic_sid);
                Some(self.next_topic_sid)
            }
            false => self.topics.remove(&topic).inspect(|&sid| {
                if let Some(out) = self.connected_output() {
                    proto::write_unsub(out, sid);
                }
            }),
        };
        if let (true, Some(sid)) = (subscribed, sid) {
            if let Some(out) = self.connected_output() {
                proto::write_sub(out, subject.as_bytes(), None, sid);
            }
        }
    }

    /// The session's output once `CONNECT` went out, the node's name held
    /// or not (the presence subject's claims).
    fn ready_output(&mut self) -> Option<&mut BytesMut> {
        match &mut self.conn {
            Conn::Up(up) if matches!(up.session.phase(), Phase::AwaitPong | Phase::Ready) => {
                Some(up.session.output())
            }
            _ => None,
        }
    }

    /// The session's output once `CONNECT` went out (before it, the
    /// subscriptions go with the `CONNECT`, and before the node's name is
    /// held, with the node's own).
    fn connected_output(&mut self) -> Option<&mut BytesMut> {
        if !self.cluster.presence().joined() {
            return None;
        }
        match &mut self.conn {
            Conn::Up(up) if matches!(up.session.phase(), Phase::AwaitPong | Phase::Ready) => {
                Some(up.session.output())
            }
            _ => None,
        }
    }

    /// The server drains: this node stops taking requests (its share of
    /// each queue group moves to the other nodes); the answers to its own
    /// requests, and its topics, still come.
    pub(crate) fn begin_drain(&mut self, registry: &Registry, now_ms: u64) {
        if self.draining {
            return;
        }
        self.draining = true;
        let services = self.cluster.names().len() as u64;
        if let Some(out) = self.connected_output() {
            proto::write_unsub(out, ACTORS_SID);
            for at in 0..services {
                proto::write_unsub(out, FIRST_SERVICE_SID + at);
            }
        }
        self.flush(registry, now_ms);
    }

    /// Closes the connection for good.
    pub(crate) fn stop(&mut self, registry: &Registry) {
        self.stopped = true;
        self.flush(registry, 0);
        if let Conn::Up(up) = &mut self.conn {
            let _ = registry.deregister(&mut up.socket);
        }
        self.set_ready(false);
        self.conn = Conn::Down { retry_ms: u64::MAX };
    }

    /// Writes what the session has for the server, until the socket is
    /// full.
    fn flush(&mut self, registry: &Registry, now_ms: u64) {
        let Conn::Up(up) = &mut self.conn else {
            return;
        };
        if let Err(e) = write_out(up) {
            self.lose(registry, now_ms, e.to_string());
        }
    }
}

/// How a non-blocking connect went, as of `event`: done (true), still
/// under way (false), or failed.
fn connect_result(socket: &TcpStream, event: &Event) -> Result<bool, String> {
    if let Ok(Some(e)) | Err(e) = socket.take_error() {
        return Err(e.to_string());
    }
    match socket.peer_addr() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotConnected => match event.is_error() {
            true => Err("refused".into()),
            false => Ok(false),
        },
        Err(e) => Err(e.to_string()),
    }
}

/// Writes the session's output: to the socket, or through TLS. What the
/// socket does not take stays in the output, where it counts against the
/// bound on what waits for NATS.
fn write_out(up: &mut Up) -> io::Result<()> {
    let output = up.session.output();
    match &mut up.tls {
        None => {
            while !output.is_empty() {
                match up.socket.write(output) {
                    Ok(0) => return Err(ErrorKind::WriteZero.into()),
                    Ok(len) => output.advance(len),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        Some(tls) => loop {
            while tls.wants_write() {
                match tls.write_tls(&mut up.socket) {
                    Ok(0) => return Err(ErrorKind::WriteZero.into()),
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
            if output.is_empty() {
                break;
            }
            // Up to rustls' own buffer limit; the rest waits here.
            let taken = tls.writer().write(output)?;
            if taken == 0 && !tls.wants_write() {
                break;
            }
            output.advance(taken);
        },
    }
    if output.is_empty() && output.capacity() > 1 << 20 {
        // A burst's buffer is not kept.
        *output = BytesMut::new();
    }
    Ok(())
}

/// Refuses `item`: a request is answered (503 or 413), a JetStream
/// request's waiter told, the rest counted.
fn refuse(item: Outbound, error: SendError, metrics: &ClusterMetrics) {
    metrics.refused(match error {
        SendError::TooLarge { .. } => Refusal::TooLarge,
        SendError::BufferFull => Refusal::BufferFull,
        _ => Refusal::Unreachable,
    });
    if let Some(Outbound::Request { request, .. }) = item.refused(error.clone()) {
        request.respond(refusal_response(&error));
    }
}

/// `upc.a.b.counter` as `counter@b`, `upc.s.counter` as `counter@*`.
fn describe_subject(subject: &str) -> String {
    let parts: Vec<&str> = subject.split('.').collect();
    match parts.as_slice() {
        [_, "a", node, name] => format!("{name}@{node}"),
        [_, "s", name] => format!("{name}@*"),
        _ => subject.to_string(),
    }
}

/// Where a request from another server is answered: its reply subject,
/// through this link.
#[derive(Debug)]
struct RemoteAnswer {
    port: Arc<LinkPort>,
    reply: Bytes,
    metrics: Arc<ClusterMetrics>,
}

impl ReplySink for RemoteAnswer {
    fn send(self: Box<Self>, outcome: Outcome) {
        let answer = Outbound::Answer {
            reply: self.reply,
            outcome,
        };
        // Refused when the link is down (which lost the asker's request
        // too) or too much waits: counted; the asker times out.
        if let Err(refused) = self.port.push(answer, Admit::Answer) {
            self.metrics.refused(match refused.error {
                SendError::BufferFull => Refusal::BufferFull,
                SendError::TooLarge { .. } => Refusal::TooLarge,
                _ => Refusal::Unreachable,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The times of the tries of a link whose NATS stays down for a
    /// minute from time 0, each jitter `random(backoff)` picks.
    fn tries_in_a_minute(random: impl Fn(u64) -> u64) -> Vec<u64> {
        let (mut now_ms, mut failures, mut tries) = (0, 0, Vec::new());
        loop {
            failures += 1;
            let backoff = (FIRST_BACKOFF_MS << (failures - 1)).min(MAX_BACKOFF_MS);
            now_ms += retry_delay_ms(failures, random(backoff));
            if now_ms > 60_000 {
                return tries;
            }
            tries.push(now_ms);
        }
    }

    /// A minute of a NATS that stays down, stepped through without
    /// waiting: the backoff starts at 100 ms and doubles to 5 s, each try
    /// between half and one and a half of it.
    #[test]
    fn a_minute_of_reconnect_backoff() {
        // Earliest: half of each backoff.
        let earliest = tries_in_a_minute(|_| 0);
        assert_eq!(earliest[..8], [50, 150, 350, 750, 1550, 3150, 5650, 8150]);
        assert_eq!(earliest.len(), 6 + (60_000 - 3150) / 2500);
        // Latest: just short of one and a half of it.
        let latest = tries_in_a_minute(|backoff| backoff - 1);
        assert_eq!(latest[..7], [149, 448, 1047, 2246, 4645, 9444, 16943]);
        assert_eq!(latest.len(), 6 + (60_000 - 9444) / 7499);
        // Past the cap the delay stays there, however many failures.
        for failures in [7, 8, 17, 40, u32::MAX] {
            assert_eq!(retry_delay_ms(failures, 0), 2_500);
            assert_eq!(retry_delay_ms(failures, 4_999), 7_499);
            // The jitter wraps at the backoff: 5000 is 0 again.
            assert_eq!(retry_delay_ms(failures, 5_000), 2_500);
        }
        assert_eq!(retry_delay_ms(1, 99), 149);
        assert_eq!(retry_delay_ms(1, 100), 50);
    }

    #[test]
    fn subjects_are_told_as_addresses() {
        assert_eq!(describe_subject("upc.a.b.counter"), "counter@b");
        assert_eq!(describe_subject("upc.s.counter"), "counter@*");
        assert_eq!(describe_subject("x"), "x");
    }
}
