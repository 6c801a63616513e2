//! Unit tests of routes without a server: a [`TestClient`] serves requests
//! from a [`Routes`] table through the same request stream a connection
//! drives (framing, routing, the error bodies, the fields of
//! [`Config::headers`]), with no socket, no poller and no uppercut system.
//!
//! Handler routes run on the test's thread. Actor routes go to the actors
//! the table spawns, which the client owns as a server would: a shared or
//! per-poller actor runs on the test's thread when it is free, a blocking
//! one on its own threads, and the client waits for the answer (up to the
//! route's reply timeout, then 504, as a server would). What an actor
//! leaves for later (a `delay`, a send from a blocking thread) runs while
//! the client waits for an answer, or when [`TestClient::send`] is called.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use uppercut_mio_server::testing::TestClient;
//! use uppercut_mio_server::{Method, Routes};
//!
//! #[derive(Deserialize)]
//! struct Greet {
//!     name: String,
//! }
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Greeting {
//!     message: String,
//! }
//!
//! let routes = Routes::new().json_handler(&[Method::Post], "/greet", |request| {
//!     let greet: Greet = request.json()?;
//!     Ok(Greeting { message: format!("Hello, {}!", greet.name) })
//! });
//! let client = TestClient::new(routes).expect("valid routes");
//!
//! let response = client.post_json("/greet", &serde_json::json!({"name": "Ann"}));
//! assert_eq!(response.status(), 200);
//! assert_eq!(response.header("content-type"), Some("application/json"));
//! let greeting: Greeting = response.json().expect("a greeting");
//! assert_eq!(greeting.message, "Hello, Ann!");
//!
//! let refused = client.post("/greet", "text/plain", "Ann");
//! assert_eq!(refused.status(), 415);
//! assert_eq!(
//!     refused.text(),
//!     "415 Unsupported Media Type: expected Content-Type: application/json, got \"text/plain\"\n"
//! );
//! ```
//!
//! Not served here: WebSocket connections (the upgrade is answered 101, and
//! nothing follows), `/io` (no upstream pool: 502), other servers of a
//! cluster, and sends into the uppercut system (an actor's send to an
//! address the table does not own is dropped, with a warning).

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use bytes::BytesMut;
use log::warn;
use serde::de::DeserializeOwned;
use serde::Serialize;
use uppercut::api::Envelope;

use crate::actors::blocking_handler::HandlerJob;
use crate::actors::house::{ActorHouse, CallPath};
use crate::actors::placed::name_for;
use crate::actors::port::{PollerPort, PortWork};
use crate::cluster::placement::Placed;
use crate::config::Config;
use crate::http::date::{format_imf_fixdate, unix_seconds, DATE_LEN};
use crate::http::method::Method;
use crate::request_stream::{Call, CallEnd, RequestStream};
use crate::routes::actor::ActorRequest;
use crate::routes::actor_response::ActorResponse;
use crate::routes::reply::{Outcome, ReplySink, ReplyTo};
use crate::routes::Routes;
use crate::runtime::server::{configured, start_placement};

/// What the client waits for: an answer to a call, or work left in the
/// port that stands for its poller.
enum Event {
    Answer(u64, Outcome),
    Port,
}

/// Serves requests from a route table without sockets: see the
/// [module docs](self). Each request is a connection of its own, unless
/// sent together through [`TestClient::raw`]. Dropping the client stops
/// its actors (`on_stop`).
pub struct TestClient {
    routes: Arc<Routes>,
    house: ActorHouse,
    /// Where each actor route's calls go.
    paths: Vec<CallPath>,
    port: Arc<PollerPort>,
    answers: mpsc::Sender<Event>,
    events: Mutex<mpsc::Receiver<Event>>,
    next_call: AtomicU64,
    peer: Option<SocketAddr>,
    /// Placed actors' names, all activated here.
    placed: Option<Arc<Placed>>,
}

impl TestClient {
    /// A client of `routes` as a server with the default [`Config`] would
    /// serve them. An error for a table a server would refuse (a route to
    /// an actor nobody spawned, overlapping patterns, an error body that
    /// cannot be sent).
    pub fn new(routes: Routes) -> io::Result<TestClient> {
        TestClient::with_config(&Config::default(), routes)
    }

    /// A client of `routes` as a server with `config` would serve them:
    /// its body limit, the fields every response carries, its static
    /// directory and its actor routes. Sockets, pollers, timeouts and TLS
    /// have no part here.
    pub fn with_config(config: &Config, routes: Routes) -> io::Result<TestClient> {
        let routes = configured(config, routes)?;
        let (answers, events) = mpsc::channel();
        let wake = answers.clone();
        let port = Arc::new(PollerPort::new(Box::new(move || {
            let _ = wake.send(Event::Port);
        })));
        let house = ActorHouse::start(&routes, vec![Arc::clone(&port)], None, None)?;
        // Placed names are all here: no cluster to share them with.
        let placed = start_placement(config, &routes, &house, None, None)?;
        Ok(TestClient {
            placed,
            paths: house.paths(0),
            routes: Arc::new(routes),
            house,
            port,
            answers,
            events: Mutex::new(events),
            next_call: AtomicU64::new(0),
            peer: None,
        })
    }

    /// The same client, whose requests come from `peer`
    /// ([`Request::peer_addr`](crate::Request::peer_addr); none unless set).
    pub fn with_peer(mut self, peer: SocketAddr) -> TestClient {
        self.peer = Some(peer);
        self
    }

    /// `GET target` (a path, and a query if any).
    pub fn get(&self, target: &str) -> TestResponse {
        self.request(Method::Get, target, &[], b"")
    }

    /// `POST target` with `body` of `content_type`.
    pub fn post(&self, target: &str, content_type: &str, body: impl AsRef<[u8]>) -> TestResponse {
        self.request(
            Method::Post,
            target,
            &[("Content-Type", content_type)],
            body.as_ref(),
        )
    }

    /// `POST target` with `value` as a JSON body.
    ///
    /// # Panics
    /// If serde_json cannot write `value` (a map whose keys are not
    /// strings): a test's mistake.
    pub fn post_json<T: Serialize + ?Sized>(&self, target: &str, value: &T) -> TestResponse {
        let body = serde_json::to_vec(value).expect("the test's JSON body serializes");
        self.post(target, "application/json", body)
    }

    /// A request of `method` for `target`, with the header fields `fields`
    /// and `body`. `Host` and, with a body, `Content-Length` are added: a
    /// field of either in `fields` makes the request malformed (400).
    pub fn request(
        &self,
        method: Method,
        target: &str,
        fields: &[(&str, &str)],
        body: &[u8],
    ) -> TestResponse {
        let name = method.as_str();
        let mut request = format!("{name} {target} HTTP/1.1\r\nHost: localhost\r\n");
        for (field, value) in fields {
            request.push_str(&format!("{field}: {value}\r\n"));
        }
        if !body.is_empty() {
            request.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        request.push_str("\r\n");
        let mut bytes = request.into_bytes();
        bytes.extend_from_slice(body);
        let output = self.raw(&bytes);
        let head_only = method == Method::Head;
        let mut rest = &output[..];
        loop {
            match TestResponse::parse(rest, head_only) {
                // An interim response (100 Continue): the final one follows.
                Some((response, len)) if (100..200).contains(&response.status) => {
                    rest = &rest[len..];
                }
                Some((response, _)) => return response,
                None => panic!(
                    "no whole response to {name} {target}: {:?}",
                    String::from_utf8_lossy(&output)
                ),
            }
        }
    }

    /// Serves `input` as what one connection sent (one or more requests,
    /// pipelined, or a malformed one) and returns every byte the server
    /// wrote back, as a connection would write them to its socket.
    pub fn raw(&self, input: &[u8]) -> Vec<u8> {
        self.run_port();
        let date = now();
        let mut stream = RequestStream::default();
        stream.set_peer(self.peer);
        let mut out = BytesMut::new();
        let mut written = Vec::new();
        stream.feed(input, &self.routes, &date, &mut out);
        loop {
            // What a connection would have written by now: the request
            // stream holds requests back behind unwritten output.
            written.extend_from_slice(&out);
            out.clear();
            if let Some(call) = stream.take_call() {
                let end = self.call(call);
                stream.complete_call(end, &self.routes, &date, &mut out);
            } else if stream.is_held_back() {
                stream.resume(&self.routes, &date, &mut out);
            } else {
                return written;
            }
        }
    }

    /// Sends `message` to the actor the table owns at `address`, as
    /// [`Server::send`](crate::Server::send) would, and runs it (and what
    /// it sends on to other owned actors) before returning; an actor on
    /// blocking threads gets it there.
    pub fn send<M: Any + Send + fmt::Debug>(&self, address: &str, message: M) {
        self.house.send(address, Envelope::of(message));
        self.run_port();
    }

    /// Makes `call` where its route goes and waits for its end.
    fn call(&self, call: Call) -> CallEnd {
        let id = self.next_call.fetch_add(1, Ordering::Relaxed);
        let reply_to = ReplyTo::Elsewhere(Box::new(Answer {
            call: id,
            to: Mutex::new(self.answers.clone()),
        }));
        let timeout = self.routes.actor_routes()[call.actor].timeout;
        let request = ActorRequest::new(call.parts, reply_to);
        match &self.paths[call.actor] {
            CallPath::Cell(cell) => {
                let context = self.house.context_without_system(0);
                context.deliver(cell, Envelope::of(request));
            }
            CallPath::Blocking(pool) => pool.submit(Envelope::of(request)),
            CallPath::BlockingHandler(pool, handler) => {
                let handler = Arc::clone(handler);
                pool.submit(Envelope::of(HandlerJob { handler, request }));
            }
            CallPath::Upstream => {
                let cause = "a test client has no upstream pool";
                request.respond(ActorResponse::failure(502, cause));
            }
            CallPath::Placed(name) => self.place(name, request),
            CallPath::PlacedTemplate(template) => match name_for(template, &request.request()) {
                Ok(name) => self.place(&name, request),
                Err(why) => request.respond(ActorResponse::failure(400, &why)),
            },
            // A table with a remote route needs a cluster, which a test
            // client never joins: it refused the table.
            CallPath::Remote(_) => drop(request),
        }
        let deadline = Instant::now() + timeout;
        let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match events.recv_timeout(left) {
                Ok(Event::Answer(answered, outcome)) if answered == id => {
                    return CallEnd::Outcome(outcome)
                }
                // A call that timed out before: its answer is dropped.
                Ok(Event::Answer(..)) => {}
                Ok(Event::Port) => self.run_port(),
                Err(_) => return CallEnd::TimedOut,
            }
        }
    }

    /// Hands `request` to placed `name`, activated here.
    fn place(&self, name: &str, request: ActorRequest) {
        let context = self.house.context_without_system(0);
        match context.directory().placement() {
            Some(placement) => placement.deliver(name, Envelope::of(request), false, &context),
            None => drop(request),
        }
    }

    /// Runs what was left for the poller this client stands in for.
    fn run_port(&self) {
        let mut work = PortWork::default();
        self.port.take(&mut work);
        let context = self.house.context_without_system(0);
        for cell in work.ready.drain(..) {
            context.run_queued(&cell);
        }
        for relayed in work.relay.drain(..) {
            warn!("a test client has no uppercut system: dropped {relayed:?}");
        }
    }
}

impl Drop for TestClient {
    fn drop(&mut self) {
        if let Some(placed) = &self.placed {
            placed.stop();
        }
        self.house.stop();
    }
}

impl fmt::Debug for TestClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestClient")
            .field("routes", &self.routes)
            .finish_non_exhaustive()
    }
}

/// Where a call's answer goes: the client's events, with the call's id.
struct Answer {
    call: u64,
    to: Mutex<mpsc::Sender<Event>>,
}

impl ReplySink for Answer {
    fn send(self: Box<Self>, outcome: Outcome) {
        let to = self.to.lock().unwrap_or_else(PoisonError::into_inner);
        // A client dropped since has no one to tell.
        let _ = to.send(Event::Answer(self.call, outcome));
    }
}

impl fmt::Debug for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Answer").field("call", &self.call).finish()
    }
}

/// The date a response written now carries.
fn now() -> [u8; DATE_LEN] {
    format_imf_fixdate(unix_seconds(SystemTime::now()))
}

/// A response a [`TestClient`] got: status, header fields, body, and the
/// bytes as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    raw: Vec<u8>,
}

impl TestResponse {
    /// The response at the start of `bytes` and its length, framed by its
    /// `Content-Length` (no body after a HEAD, or with 1xx, 204 or 304).
    fn parse(bytes: &[u8], head_only: bool) -> Option<(TestResponse, usize)> {
        let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let head = std::str::from_utf8(&bytes[..head_end]).ok()?;
        let mut lines = head.split("\r\n");
        let status: u16 = lines.next()?.get(9..12)?.parse().ok()?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.to_string(), value.trim().to_string()))
            .collect();
        let bodiless = head_only || matches!(status, 100..=199 | 204 | 304);
        let length = match bodiless {
            true => 0,
            false => headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case("Content-Length"))
                .and_then(|(_, value)| value.parse().ok())
                .unwrap_or(0),
        };
        let end = head_end.checked_add(length)?;
        let body = bytes.get(head_end..end)?.to_vec();
        let response = TestResponse {
            status,
            headers,
            body,
            raw: bytes[..end].to_vec(),
        };
        Some((response, end))
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The value of the first header field named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// Every header field, in order, as (name, value).
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body as text (bytes that are not UTF-8 replaced).
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.body)
    }

    /// The body read as JSON into a `T`.
    pub fn json<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_slice(&self.body)
    }

    /// The whole response as the server wrote it, head and body (with its
    /// `Date`), for a test of exact bytes.
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }
}
