//! The route table, built once at start and shared by every connection:
//! paths (exact, patterns with `{name}` segments, or prefixes ending `/*`)
//! to what answers each method there (a canned response, a handler, an
//! actor, a WebSocket), the canned error responses, and the static site
//! served ahead of them. Paths are looked up
//! percent-decoded and without dot segments (`http::percent`); a canned route
//! answers a matching `If-None-Match` with its canned 304 (`*` matches any
//! route, a list of tags only a route with an entity tag).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rustc_hash::FxHashMap;
use serde::Serialize;
use uppercut::api::AnyActor;

use crate::http::error_body::{ErrorHook, ServerError};
use crate::http::method::Method;
use crate::http::percent::{needs_normalizing, route_path, AboveRoot};
use crate::http::request::{RequestHead, MAX_BODY_LEN, MAX_HEAD_LEN};
use crate::http::response::CannedResponse;
use crate::http::response_fields::AddedFields;
use crate::http::status::{not_allowed, ErrorStatus};
use crate::http::target::TargetForm;
use crate::routes::handler::Handler;
use crate::routes::handler::Response;
use crate::routes::middleware::{ChainIndex, Middleware, Middlewares};
use crate::routes::path_entry::{Entry, Target};
use crate::routes::path_pattern::{PathParams, PathPattern, PatternError};
use crate::routes::request::Request;
use crate::routes::spawns::{ActorSpec, PlacedFactory};
use crate::routes::typed::Rejection;
use crate::static_files::etag;
use crate::static_files::load::{StaticFilesError, StaticLimits};
use crate::static_files::site::StaticSite;
use crate::static_files::table::StaticReply;
use crate::websocket::{WebSocket, WsLimits};
use crate::ws::deflate::WsDeflate;

/// Where the server answers with `--upstream`'s JSON.
pub(crate) const UPSTREAM_ROUTE: &str = "/io";

/// How long an actor route waits for its actor's answer by default.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// Which response answers a request: a route's, or an error status.
pub(crate) type RouteAnswer = Result<Reply, ErrorStatus>;

/// Which route a request went to, as the metrics count it: a path's
/// entry (`ROUTE_SLOTS_BEFORE` on), the static files, or none (an error
/// before any route: a malformed request, a path without routes).
pub(crate) type RouteSlot = u32;
/// No route: errors, 404.
pub(crate) const NO_ROUTE: RouteSlot = 0;
/// The static files, all as one.
pub(crate) const STATIC_ROUTE: RouteSlot = 1;
/// The slots before the entries'.
const ROUTE_SLOTS_BEFORE: usize = 2;

/// A route's answer to a request, by index into the table's lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// A canned route's response.
    Full(usize),
    /// The client's `If-None-Match` matched the canned route.
    NotModified(usize),
    /// A handler route: the handler writes the response. The second index
    /// is the path pattern that matched, if a pattern did.
    Handler(usize, Option<usize>),
    /// An actor route: the answer comes in an actor's reply (and the
    /// pattern, as above).
    Actor(usize, Option<usize>),
    /// The path has routes, none for this method: 405 listing them.
    NotAllowed(usize),
    /// A static file's response (or a directory's redirect).
    Static(StaticReply),
    /// A WebSocket route asked to upgrade: the handshake decides (and the
    /// pattern, as above).
    WebSocket(usize, Option<usize>),
}

impl Reply {
    /// The request is refused without looking at its body.
    pub(crate) fn is_refusal(answer: &RouteAnswer) -> bool {
        matches!(answer, Err(_) | Ok(Reply::NotAllowed(_)))
    }
}

/// A canned route's responses.
#[derive(Debug, Clone)]
pub(crate) struct Canned {
    pub(crate) response: CannedResponse,
    /// The answer to a GET or HEAD whose `If-None-Match` matches.
    pub(crate) not_modified: CannedResponse,
    /// The strong entity tag of `response`, with its quotes. Without one,
    /// only `If-None-Match: *` matches: it asks whether the resource has any
    /// current representation (RFC 9110 §13.1.2), and every route has one.
    etag: Option<Box<[u8]>>,
}

/// Where an actor route's requests go, as the table declares it; the
/// server resolves it at start (`actors::house`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallTarget {
    /// The actor the server owns at this address.
    Address(String),
    /// A handler run on the server's blocking threads, by index.
    BlockingHandler(usize),
    /// The poller's own upstream pool (`/io`).
    Upstream,
}

/// An actor route: where its requests go and how long an answer may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActorRoute {
    pub(crate) target: CallTarget,
    /// How long the connection waits for the answer before 504.
    pub(crate) timeout: Duration,
    /// The route's methods and path, to name it in an error at start.
    pub(crate) name: String,
}

/// Makes the actor of a WebSocket connection from its upgrade request.
pub(crate) type WebSocketFactory = Arc<dyn Fn(&Request<'_>) -> Box<dyn WebSocket> + Send + Sync>;

/// How many threads run blocking handlers unless set.
const BLOCKING_THREADS: usize = 8;

/// The route table: which response answers which request.
///
/// A route's path is one of:
///
/// - **exact**, `/users`: that path, which a request may spell
///   percent-encoded or with dot segments (`/a/../users`);
/// - **a pattern**, `/users/{id}` or `/teams/{team}/members/{id}`: each
///   `{name}` matches one whole, non-empty segment, whose decoded value
///   [`Request::param`] gives (handler, actor and WebSocket routes; a
///   canned route has nothing to use one for, so a pattern there is
///   refused);
/// - **a prefix**, `/static/*`: that path and every path under it.
///
/// An exact path is looked up first, then the patterns, then the prefixes,
/// longest first: a pattern matches a fixed number of segments, so it is
/// more specific than a prefix. Two patterns that could both match one
/// path (`/users/{id}` and `/users/{name}`; `/a/{x}/c` and `/a/b/{y}`)
/// would leave which answers to chance, so [`Server::start`](crate::Server::start)
/// refuses them (an `InvalidInput` error naming both), as it does a brace
/// that is not a whole `{name}` segment. The same pattern added again for
/// other methods is the same route.
#[derive(Clone)]
pub struct Routes {
    /// Exact paths, hashed with rustc-hash's Fx rather than SipHash: the
    /// keys are fixed at start, so no client can grow a chain by inserting
    /// (the flooding SipHash guards against), and a lookup, once per
    /// request, hashes in a fraction of the instructions.
    by_path: FxHashMap<Box<[u8]>, usize>,
    /// Path patterns (`/users/{id}`), with their entries; tried after the
    /// exact paths, before the prefixes.
    patterns: Vec<(PathPattern, usize)>,
    /// Route paths refused as they were added (bad patterns, overlaps),
    /// for `Server::start` to report.
    pub(crate) refused: Vec<String>,
    /// Prefix routes, longest prefix first.
    prefixes: Vec<(Box<[u8]>, usize)>,
    pub(crate) entries: Vec<Entry>,
    pub(crate) canned: Vec<Canned>,
    handlers: Vec<Handler>,
    actors: Vec<ActorRoute>,
    websockets: Vec<WebSocketFactory>,
    /// Each WebSocket route's permessage-deflate: `None` for the server's
    /// (`websocket_deflate`), `Some(None)` for none.
    websocket_deflates: Vec<Option<Option<WsDeflate>>>,
    /// permessage-deflate for the WebSocket routes that do not say
    /// (`Config::ws_deflate`).
    websocket_deflate: Option<WsDeflate>,
    pub(crate) errors: Vec<CannedResponse>,
    /// The application's error bodies (`Routes::error_body`), if it chose.
    error_hook: Option<ErrorHook>,
    reply_timeout: Duration,
    pub(crate) spawns: Vec<ActorSpec>,
    /// The typed actors' routes (`Routes::json_actor`), by address: each an
    /// `Arc<TypedRoutes<S>>` for its state type `S`.
    pub(crate) typed: Vec<(String, Arc<dyn std::any::Any + Send + Sync>)>,
    /// Threads for blocking handlers.
    blocking_threads: usize,
    blocking_max_threads: usize,
    blocking_keep_alive: Duration,
    /// Files served ahead of the routes above, reloadable.
    pub(crate) static_site: Option<Arc<StaticSite>>,
    #[cfg(feature = "fault-injection")]
    panic_path: Option<Box<[u8]>>,
    /// The most bytes a request body may carry (`Config::max_body`).
    pub(crate) max_body: u64,
    /// Fields every response carries (`Config::headers`).
    pub(crate) added: AddedFields,
    /// The WebSocket routes' limits (`Config::ws_max_message`).
    websocket_limits: WsLimits,
    /// The middleware around the routes, and the chain each scope takes.
    middleware: Middlewares,
}

impl Default for Routes {
    fn default() -> Self {
        Routes::new()
    }
}

impl Routes {
    /// A table with no routes: every path answers 404.
    pub fn new() -> Routes {
        Routes {
            by_path: FxHashMap::default(),
            patterns: Vec::new(),
            refused: Vec::new(),
            prefixes: Vec::new(),
            entries: Vec::new(),
            canned: Vec::new(),
            handlers: Vec::new(),
            actors: Vec::new(),
            websockets: Vec::new(),
            websocket_deflates: Vec::new(),
            websocket_deflate: None,
            errors: ErrorStatus::ALL.iter().map(|s| s.canned()).collect(),
            error_hook: None,
            reply_timeout: REPLY_TIMEOUT,
            spawns: Vec::new(),
            typed: Vec::new(),
            blocking_threads: BLOCKING_THREADS,
            blocking_max_threads: 512,
            blocking_keep_alive: Duration::from_secs(10),
            static_site: None,
            #[cfg(feature = "fault-injection")]
            panic_path: None,
            max_body: MAX_BODY_LEN,
            added: AddedFields::default(),
            websocket_limits: WsLimits::new(crate::websocket::DEFAULT_MAX_MESSAGE),
            middleware: Middlewares::default(),
        }
    }

    /// Serves `response` to GET and HEAD at `path`, which a request may
    /// spell percent-encoded; a path ending `/*` is a prefix (`/static/*`
    /// takes `/static/` and every path under it). A later route for the
    /// same path and method replaces the earlier one.
    pub fn route(mut self, path: &str, response: CannedResponse) -> Routes {
        if path.contains(['{', '}']) {
            // Nothing in a canned response could use a parameter.
            self.refused.push(format!(
                "route path {path:?}: a canned route has no parameters (use a handler)"
            ));
            return self;
        }
        self.canned.push(Canned {
            response,
            not_modified: CannedResponse::not_modified(&[]),
            etag: None,
        });
        let target = Target::Canned(self.canned.len() - 1);
        self.insert(path, &[Method::Get], target);
        self
    }

    /// Answers `methods` at `path` (exact, or a prefix ending `/*`) with
    /// what `handler` writes, in the connection actor. GET also takes HEAD
    /// (the body is left out). The request's body, up to the body limit, is
    /// read before the handler runs.
    ///
    /// The handler runs on the connection's poller and must not block:
    /// while it runs, that poller serves no other connection. A handler
    /// that blocks belongs in [`Routes::blocking_handler`].
    pub fn handler<F>(mut self, methods: &[Method], path: &str, handler: F) -> Routes
    where
        F: Fn(&Request<'_>, &mut Response<'_>) + Send + Sync + 'static,
    {
        self.handlers.push(Arc::new(handler));
        let target = Target::Handler(self.handlers.len() - 1);
        self.insert(path, methods, target);
        self
    }

    /// Answers `methods` at `path` with the JSON of what `handler` returns
    /// (serde_json, `Content-Type: application/json`), or with the
    /// [`Rejection`] it returns: a typed handler, whose body, query and
    /// path parameters come from [`Request::json`], [`Request::query_params`]
    /// and [`Request::params`] with `?`. It is a [`Routes::handler`] underneath,
    /// run on the connection's poller, and must not block either.
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    /// use uppercut_mio_server::{Method, Rejection, Routes};
    ///
    /// #[derive(Deserialize)]
    /// struct Order {
    ///     item: String,
    ///     quantity: u32,
    /// }
    ///
    /// #[derive(Serialize)]
    /// struct Placed {
    ///     id: u64,
    ///     item: String,
    ///     quantity: u32,
    /// }
    ///
    /// let routes = Routes::new().json_handler(&[Method::Post], "/orders", |request| {
    ///     let order: Order = request.json()?;
    ///     if order.quantity == 0 {
    ///         return Err(Rejection::new(422, "quantity must be at least 1"));
    ///     }
    ///     Ok(Placed { id: 1, item: order.item, quantity: order.quantity })
    /// });
    /// ```
    pub fn json_handler<T, F>(self, methods: &[Method], path: &str, handler: F) -> Routes
    where
        T: Serialize,
        F: Fn(&Request<'_>) -> Result<T, Rejection> + Send + Sync + 'static,
    {
        self.handler(methods, path, move |request, response| {
            match handler(request) {
                Ok(value) => response.json(&value),
                Err(rejection) => response.reject(rejection),
            }
        })
    }

    /// Has the application choose the body of every error response the
    /// server writes itself (404, 405, 413, a malformed request's 400, an
    /// actor's 502 or 504, a 503 ...) and of every [`Rejection`]: `hook`
    /// gets the status, its reason and, for an error with a cause of its
    /// own, why ([`ServerError`]), and returns a content type and a body.
    /// The status and the fields the status calls for (`Allow`, `Upgrade`,
    /// `Content-Range`) stay the server's, and so does the protocol: an
    /// HTTP/2 stream gets the same body.
    ///
    /// The errors without a cause are built once, here and as routes are
    /// added, so serving them costs what it did; the hook runs per response
    /// only for errors with a cause (rejections, an upstream's or another
    /// server's failure, a static file's 416). It runs on the pollers and
    /// must not block. A content type that cannot go in a header field
    /// refuses the table at [`Server::start`](crate::Server::start) (or, for
    /// an error with a cause, sends the server's text instead).
    ///
    /// ```
    /// use uppercut_mio_server::Routes;
    ///
    /// let routes = Routes::new().error_body(|error| {
    ///     let body = serde_json::json!({
    ///         "status": error.status(),
    ///         "error": error.reason(),
    ///         "detail": error.cause(),
    ///     });
    ///     ("application/problem+json", body.to_string())
    /// });
    /// ```
    pub fn error_body<F, B>(mut self, hook: F) -> Routes
    where
        F: Fn(&ServerError<'_>) -> (&'static str, B) + Send + Sync + 'static,
        B: Into<Bytes>,
    {
        self.error_hook = Some(Arc::new(move |error: &ServerError<'_>| {
            let (content_type, body) = hook(error);
            (content_type, body.into())
        }));
        self.errors = ErrorStatus::ALL
            .iter()
            .map(|&status| self.canned_error(status, None))
            .collect();
        for index in 0..self.entries.len() {
            let allow = self.entries[index].allow();
            self.entries[index].not_allowed =
                self.canned_error(ErrorStatus::MethodNotAllowed, Some(&allow));
        }
        self
    }

    /// The application's error bodies, if it chose them.
    pub(crate) fn error_hook(&self) -> Option<&ErrorHook> {
        self.error_hook.as_ref()
    }

    /// The canned response of `status` (with `allow` in a 405's `Allow`),
    /// with the application's body if it chose one. A body that cannot be
    /// sent is noted for `Server::start` to refuse.
    fn canned_error(&mut self, status: ErrorStatus, allow: Option<&str>) -> CannedResponse {
        let own = || match allow {
            Some(allow) => not_allowed(allow),
            None => status.canned(),
        };
        let Some(hook) = &self.error_hook else {
            return own();
        };
        let (content_type, body) = hook(&ServerError::new(status.code(), None));
        match status.canned_as(content_type, body, allow) {
            Ok(response) => response,
            Err(e) => {
                let refused = format!("Routes::error_body: the body of a {}: {e}", status.code());
                if !self.refused.contains(&refused) {
                    self.refused.push(refused);
                }
                own()
            }
        }
    }

    /// As [`Routes::handler`], for a handler that may block (a file read, a
    /// synchronous database client, a long computation): it runs on the
    /// server's blocking threads (see [`Routes::blocking_threads`]), as
    /// tokio's `spawn_blocking` does, and its response comes back to the
    /// connection like an actor's: within the reply timeout or as a 504,
    /// and a panic answers 502.
    pub fn blocking_handler<F>(mut self, methods: &[Method], path: &str, handler: F) -> Routes
    where
        F: Fn(&Request<'_>, &mut Response<'_>) + Send + Sync + 'static,
    {
        self.handlers.push(Arc::new(handler));
        let target = CallTarget::BlockingHandler(self.handlers.len() - 1);
        self.insert_call(methods, path, target, self.reply_timeout);
        self
    }

    /// How many threads the blocking handlers keep (8 unless set; at
    /// least one). They start with the server, only if it has a blocking
    /// handler; more start while requests find none idle, up to
    /// [`Routes::blocking_max_threads`], and those end after 10 s idle.
    pub fn blocking_threads(mut self, threads: usize) -> Routes {
        self.blocking_threads = threads.max(1);
        self
    }

    /// The most threads the blocking handlers grow to (512 unless set, as
    /// tokio's blocking pool; at least as many as it keeps).
    pub fn blocking_max_threads(mut self, threads: usize) -> Routes {
        self.blocking_max_threads = threads.max(1);
        self
    }

    /// How long a blocking handlers' thread past those kept waits for a
    /// request before it ends (10 s unless set).
    pub fn blocking_keep_alive(mut self, keep_alive: Duration) -> Routes {
        self.blocking_keep_alive = keep_alive;
        self
    }

    /// How long a blocking handlers' thread past those kept stays idle.
    pub(crate) fn blocking_keep_alive_time(&self) -> Duration {
        self.blocking_keep_alive
    }

    /// Sends requests for `methods` at `path` to the actor at `address`,
    /// as an [`ActorRequest`](crate::ActorRequest); the connection writes
    /// its answer, in request order. A path is exact (`/count`), a pattern
    /// with `{name}` segments (`/notes/{id}`, read with
    /// [`Request::param`] or [`Request::params`]), or a prefix ending `/*`,
    /// as for every route.
    ///
    /// The address is an actor this server owns (given to
    /// [`Routes::spawn`], [`Routes::spawn_per_poller`],
    /// [`Routes::spawn_blocking`], [`Routes::spawn_durable`] or a typed
    /// actor's [`Routes::json_actor`]; `Server::start` refuses a route to
    /// a local address nobody spawned), or, in a cluster (`--nats`), one on
    /// another server: `name@node` for the actor `name` that node `node`
    /// owns, `name@*` for whichever server owns one (or the placed actor
    /// `name`). A remote actor's answers and rejections come back as a local
    /// one's, its rejections shaped by this server's [`Routes::error_body`];
    /// a remote route whose node or NATS is gone answers 503 at once.
    ///
    /// No answer within the reply timeout is a 504; a request the actor
    /// drops unanswered (or panics on), a 502.
    ///
    /// ```
    /// use uppercut_mio_server::{Method, Routes};
    ///
    /// let routes = Routes::new()
    ///     .actor(&[Method::Get, Method::Post], "/notes", "notes")
    ///     .actor(&[Method::Get], "/notes/{id}", "notes")
    ///     .actor(&[Method::Get], "/count", "counter@a")
    ///     .actor(&[Method::Post], "/orders/*", "orders@*");
    /// ```
    pub fn actor(mut self, methods: &[Method], path: &str, address: &str) -> Routes {
        let target = CallTarget::Address(address.to_string());
        self.insert_call(methods, path, target, self.reply_timeout);
        self
    }

    /// Serves WebSocket connections at `path` (GET): a valid upgrade
    /// (RFC 6455 §4.2) is answered 101, and the connection becomes the
    /// actor `factory` makes from the upgrade request (its path, query and
    /// header fields, as a handler sees them). The actor runs on the
    /// connection's poller, one event at a time, so like a handler it must
    /// not block. A request without the upgrade gets 426 naming
    /// `Sec-WebSocket-Version: 13`; a malformed upgrade 400.
    ///
    /// permessage-deflate is offered as the server's configuration says
    /// (`Config::ws_deflate`, `--ws-deflate`; off by default).
    pub fn websocket<W, F>(self, path: &str, factory: F) -> Routes
    where
        W: WebSocket,
        F: Fn(&Request<'_>) -> W + Send + Sync + 'static,
    {
        self.add_websocket(path, None, factory)
    }

    /// As [`Routes::websocket`], with permessage-deflate (RFC 7692) as
    /// `deflate` says for this route whatever the server's configuration:
    /// `None` never compresses, `Some(WsDeflate::default())` compresses
    /// each message on its own (no zlib state on an idle connection).
    pub fn websocket_with_deflate<W, F>(
        self,
        path: &str,
        deflate: Option<WsDeflate>,
        factory: F,
    ) -> Routes
    where
        W: WebSocket,
        F: Fn(&Request<'_>) -> W + Send + Sync + 'static,
    {
        self.add_websocket(path, Some(deflate), factory)
    }

    fn add_websocket<W, F>(
        mut self,
        path: &str,
        deflate: Option<Option<WsDeflate>>,
        factory: F,
    ) -> Routes
    where
        W: WebSocket,
        F: Fn(&Request<'_>) -> W + Send + Sync + 'static,
    {
        let factory: WebSocketFactory =
            Arc::new(move |request: &Request<'_>| Box::new(factory(request)) as Box<dyn WebSocket>);
        self.websockets.push(factory);
        self.websocket_deflates.push(deflate);
        let target = Target::WebSocket(self.websockets.len() - 1);
        self.insert(path, &[Method::Get], target);
        self
    }

    /// The permessage-deflate the WebSocket route at `index` offers.
    pub(crate) fn websocket_deflate_at(&self, index: usize) -> Option<&WsDeflate> {
        match &self.websocket_deflates[index] {
            Some(route) => route.as_ref(),
            None => self.websocket_deflate.as_ref(),
        }
    }

    /// Whether any route serves WebSockets.
    pub(crate) fn has_websockets(&self) -> bool {
        !self.websockets.is_empty()
    }

    /// The WebSocket route at `index`'s factory.
    pub(crate) fn websocket_at(&self, index: usize) -> &WebSocketFactory {
        &self.websockets[index]
    }

    /// How long actor routes and blocking handlers added after this call
    /// wait for an answer (5 s unless set).
    pub fn reply_timeout(mut self, timeout: Duration) -> Routes {
        self.reply_timeout = timeout;
        self
    }

    /// Gives the server `actor` to own at `address`: one instance that
    /// runs, one message at a time, on the thread of whoever sends to it
    /// when it is free (a connection's request runs it in that
    /// connection's poller, with no hop through uppercut's scheduler); a
    /// sender that finds it busy leaves the message, and whoever holds the
    /// actor runs it next. It keeps its uppercut address: other actors and
    /// [`Server::send`](crate::Server::send) reach it there.
    ///
    /// It must not block: while it runs, its poller serves no other
    /// connection. Work that blocks belongs in [`Routes::spawn_blocking`].
    /// Stopped (and `on_stop` called) when the server stops.
    pub fn spawn(mut self, address: &str, actor: impl AnyActor + 'static) -> Routes {
        self.spawns.push(ActorSpec::shared(address, actor));
        self
    }

    /// Gives the server a *durable* actor to own at `address`: as
    /// [`Routes::spawn`], and its state (the actor itself, a serde type of
    /// yours) outlives the process. With a state store configured
    /// ([`Config::state`](crate::Config::state), `--state DIR` or
    /// `--state jetstream`), the state is read from the store when the
    /// server starts (the embedded file) or at the first message
    /// (JetStream), `initial` standing for a state never written; after
    /// each message that changed it (its JSON differs), it is written back,
    /// and **every answer the actor gave leaves only once the change it
    /// depends on is durable**. A busy actor does not pay a write per
    /// message: changes made while a write is in flight go together in the
    /// next, and the store commits the writes of every actor together.
    ///
    /// While the store cannot write (a full disk, JetStream down), the
    /// answers that waited for a change are 503 and the state goes back to
    /// what is durable; a state someone else wrote meanwhile (another
    /// server, with JetStream) is read again, never written over. Without
    /// a store the actor runs as a plain [`Routes::spawn`], and its state
    /// is lost with the process. `docs/library.md` has an example, and
    /// `docs/operations.md` the guarantees.
    ///
    /// The address is also the state's key in the store: letters, digits,
    /// `-`, `_`, `=`, `/` and `.` between words.
    pub fn spawn_durable<S>(mut self, address: &str, initial: S) -> Routes
    where
        S: AnyActor + serde::Serialize + serde::de::DeserializeOwned + 'static,
    {
        self.spawns
            .push(ActorSpec::durable(address, Box::new(initial)));
        self
    }

    /// Gives the cluster *placed* actors of kind `kind`: durable actors
    /// (as [`Routes::spawn_durable`]) that belong to no server. Each name
    /// of the kind (`kind` itself, and `kind/ID` for any ID) has at most
    /// one activation in the cluster, on whichever server first receives a
    /// message for it while no server holds it; every other server
    /// forwards that name's messages there, in each sender's order. The
    /// holder keeps a lease on the name in JetStream, renewed well within
    /// its time to live: when the holder dies, the name moves to the next
    /// server that gets a message for it once the lease has run out (2 s by
    /// default), with its last acknowledged state. `factory` makes the
    /// initial state of a name never written.
    ///
    /// Address a placed name as `name@*` (or `name`): a route
    /// (`.actor(&[Method::Post], "/count", "counter@*")`), a send from an
    /// actor, `Server::send`. The lease and the state need a cluster with
    /// JetStream (`--nats` and `--state jetstream`); without a cluster the
    /// names are activated here, with the state in the state store if one
    /// is configured. A name with no message for `Config::placement_idle`
    /// is written, its lease given up, and unloaded. `docs/operations.md`
    /// (placed actors) has the guarantees, and `docs/design.md` why two
    /// activations cannot both commit a write.
    pub fn spawn_placed<S, F>(mut self, kind: &str, factory: F) -> Routes
    where
        S: AnyActor + serde::Serialize + serde::de::DeserializeOwned + 'static,
        F: Fn(&str) -> S + Send + Sync + 'static,
    {
        let factory: PlacedFactory = Arc::new(move |name| Box::new(factory(name)));
        self.spawns.push(ActorSpec::placed(kind, factory));
        self
    }

    /// Gives each poller its own instance of an actor at `address`, made by
    /// `factory` with the poller's index (0 to pollers - 1): per-core state
    /// such as a cache, or a counter that a reader sums over the instances.
    /// A request's call, and a send from an actor running on a poller, go
    /// to that poller's instance, which no other poller's connections
    /// touch: in `local` dispatch only its poller's thread ever runs it.
    /// A send from elsewhere (another thread, [`Server::send`](crate::Server::send))
    /// goes to the instances in turn. Like [`Routes::spawn`], it must not
    /// block.
    pub fn spawn_per_poller<A, F>(mut self, address: &str, factory: F) -> Routes
    where
        A: AnyActor + 'static,
        F: Fn(usize) -> A + Send + Sync + 'static,
    {
        self.spawns.push(ActorSpec::per_poller(address, factory));
        self
    }

    /// Runs an actor that may block at `address` on `threads` threads of
    /// its own (at least one), each with an instance made by `factory` with
    /// the thread's index, as actix's `SyncArbiter` does: a message goes to
    /// whichever thread is free, and idle threads sleep. The poller never
    /// waits for them; an answer comes back as any actor's does, within the
    /// route's reply timeout or as a 504. A panic answers 502 for the
    /// message it was handling, and the instance goes on to the next one.
    pub fn spawn_blocking<A, F>(mut self, address: &str, threads: usize, factory: F) -> Routes
    where
        A: AnyActor + 'static,
        F: Fn(usize) -> A + Send + Sync + 'static,
    {
        self.spawns
            .push(ActorSpec::blocking(address, threads, factory));
        self
    }

    /// The actors the server owns, as declared.
    pub(crate) fn spawns(&self) -> &[ActorSpec] {
        &self.spawns
    }

    /// Serves every regular file under `dir`, loaded now, dotfiles left
    /// out (see [`StaticSite`] for the paths, headers and limits).
    pub fn with_static_dir(
        self,
        dir: &std::path::Path,
        limits: StaticLimits,
    ) -> Result<Routes, StaticFilesError> {
        let site = StaticSite::load(dir, limits, false)?;
        Ok(self.with_static_site(Arc::new(site)))
    }

    /// Serves `site`'s files, as they are after each of its reloads. A file
    /// (or a directory, redirected to its path with a `/`) takes precedence
    /// over a route at the same path (`/` for `index.html`), but not over
    /// an actor route.
    pub fn with_static_site(mut self, site: Arc<StaticSite>) -> Routes {
        self.static_site = Some(site);
        self
    }

    /// Answers GET and HEAD at [`UPSTREAM_ROUTE`] with the upstream's JSON,
    /// through the poller's own upstream pool, which times requests out
    /// itself after `timeout`.
    pub(crate) fn with_upstream(mut self, timeout: Duration) -> Routes {
        // The pool's own 504 names the cause; this one is a backstop.
        let timeout = timeout + Duration::from_secs(1);
        let target = CallTarget::Upstream;
        self.insert_call(&[Method::Get], UPSTREAM_ROUTE, target, timeout);
        self
    }

    /// Routes `methods` at `path` to a call to `target`.
    fn insert_call(
        &mut self,
        methods: &[Method],
        path: &str,
        target: CallTarget,
        timeout: Duration,
    ) {
        let names: Vec<&str> = methods.iter().map(|m| m.as_str()).collect();
        self.actors.push(ActorRoute {
            target,
            timeout,
            name: format!("{} {path}", names.join(",")),
        });
        let target = Target::Actor(self.actors.len() - 1);
        self.insert(path, methods, target);
    }

    /// Refuses request bodies over `max_body` bytes with 413.
    pub(crate) fn with_max_body(mut self, max_body: u64) -> Routes {
        self.max_body = max_body;
        self
    }

    /// Closes WebSockets whose messages carry over `max_message` bytes.
    pub(crate) fn with_websocket_max_message(mut self, max_message: usize) -> Routes {
        self.websocket_limits = WsLimits::new(max_message);
        self
    }

    /// Offers permessage-deflate on the WebSocket routes that do not say.
    pub(crate) fn with_websocket_deflate(mut self, deflate: Option<WsDeflate>) -> Routes {
        self.websocket_deflate = deflate;
        self
    }

    /// The WebSocket routes' limits.
    pub(crate) fn websocket_limits(&self) -> WsLimits {
        self.websocket_limits
    }

    /// Adds `added`'s fields to every response.
    pub(crate) fn with_added_fields(mut self, added: AddedFields) -> Routes {
        self.added = added;
        self
    }

    /// Runs `middleware` around every route (and around the 404 of a path
    /// with none, and the static files), after the middleware added before
    /// it (see [`Middleware`] for when each hook runs).
    pub fn wrap(mut self, middleware: impl Middleware) -> Routes {
        let added = self.middleware.add(None, Arc::new(middleware), false);
        debug_assert!(added.is_ok(), "every request is a scope");
        self
    }

    /// Runs `middleware` around the routes at `path` only: an exact path,
    /// or a prefix ending `/*` (`/api/*` takes `/api/` and every path under
    /// it, whatever answers there: a route, a static file, a 404). A
    /// request passes the middleware of every scope it is in, in the order
    /// they were added: those of [`Routes::wrap`], those of `/api/*`, those
    /// of `/api/v2/*`. Its path is matched as the routes and files are
    /// looked up (percent-decoded, without dot segments), so no spelling
    /// of a path escapes its middleware. A path pattern (`{name}`) is
    /// refused at start.
    pub fn wrap_at(mut self, path: &str, middleware: impl Middleware) -> Routes {
        if let Err(refused) = self.middleware.add(Some(path), Arc::new(middleware), false) {
            self.refused.push(refused);
        }
        self
    }

    /// Runs `middleware` around every route ahead of all added so far
    /// (the server's own, from its configuration).
    pub(crate) fn wrap_first(mut self, middleware: Arc<dyn Middleware>) -> Routes {
        let added = self.middleware.add(None, middleware, true);
        debug_assert!(added.is_ok(), "every request is a scope");
        self
    }

    /// The chain of middleware `head` passes (0: none), looked at only
    /// when the table has middleware.
    pub(crate) fn chain_for(&self, head: &RequestHead) -> ChainIndex {
        match self.middleware.is_empty() {
            true => 0,
            false => self.middleware.chain_for(head),
        }
    }

    /// The middleware of the chain at `index`, in order.
    pub(crate) fn chain(&self, index: ChainIndex) -> &[Arc<dyn Middleware>] {
        self.middleware.chain(index)
    }

    /// Test builds only: a request for `path` panics inside the connection
    /// actor, to show that a panic closes that connection and no other.
    #[cfg(feature = "fault-injection")]
    pub fn panic_at(mut self, path: &str) -> Routes {
        self.panic_path = Some(path.as_bytes().into());
        self
    }

    fn insert(&mut self, path: &str, methods: &[Method], target: Target) {
        if let Some(pattern) = PathPattern::parse(path) {
            match pattern.and_then(|pattern| self.pattern_entry(pattern)) {
                Ok(index) => self.set_methods(index, methods, target),
                Err(refused) => self.refused.push(refused.0),
            }
            return;
        }
        let (key, prefix) = match path.strip_suffix('*') {
            Some(prefix) if prefix.ends_with('/') => (prefix.as_bytes(), true),
            _ => (path.as_bytes(), false),
        };
        let found = match prefix {
            true => self.prefixes.iter().find(|(p, _)| **p == *key).map(|p| p.1),
            false => self.by_path.get(key).copied(),
        };
        let index = found.unwrap_or_else(|| {
            let index = self.new_entry(path);
            match prefix {
                true => {
                    self.prefixes.push((key.into(), index));
                    self.prefixes
                        .sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
                }
                false => {
                    self.by_path.insert(key.into(), index);
                }
            }
            index
        });
        self.set_methods(index, methods, target);
    }

    /// A new entry with no routes, for `path` as declared.
    fn new_entry(&mut self, path: &str) -> usize {
        self.entries.push(Entry {
            path: path.into(),
            targets: [None; Method::ROUTABLE.len()],
            not_allowed: ErrorStatus::MethodNotAllowed.canned(),
        });
        self.entries.len() - 1
    }

    /// The entry of `pattern`: its own if the same pattern was added
    /// before (for other methods), else a new one, unless it overlaps
    /// another pattern (see `path_pattern`).
    fn pattern_entry(&mut self, pattern: PathPattern) -> Result<usize, PatternError> {
        if let Some((_, index)) = self.patterns.iter().find(|(p, _)| p.same_route(&pattern)) {
            return Ok(*index);
        }
        if let Some((other, _)) = self.patterns.iter().find(|(p, _)| p.overlaps(&pattern)) {
            return Err(PatternError(format!(
                "route paths {:?} and {:?} can match the same path: which answers would be a guess",
                other.source(),
                pattern.source()
            )));
        }
        let index = self.new_entry(pattern.source());
        self.patterns.push((pattern, index));
        Ok(index)
    }

    /// Routes `methods` at entry `index` to `target`.
    fn set_methods(&mut self, index: usize, methods: &[Method], target: Target) {
        let entry = &mut self.entries[index];
        for &method in methods {
            if let Some(slot) = Method::ROUTABLE.iter().position(|&m| m == method) {
                entry.targets[slot] = Some(target);
            }
        }
        let allow = entry.allow();
        self.entries[index].not_allowed =
            self.canned_error(ErrorStatus::MethodNotAllowed, Some(&allow));
    }

    /// Which response answers `head` (static files aside), and which
    /// route's it is.
    fn answer_routed(&self, head: &RequestHead) -> (RouteAnswer, RouteSlot) {
        #[cfg(feature = "fault-injection")]
        if self.panic_path.as_deref() == Some(head.path) {
            panic!("fault injection: a request for a panicking route");
        }
        // Only OPTIONS may send `*` and only CONNECT an authority (the
        // parser refuses them with other methods); no route takes either.
        if matches!(head.form, TargetForm::Asterisk | TargetForm::Authority) {
            return (Err(ErrorStatus::MethodNotAllowed), NO_ROUTE);
        }
        let (index, pattern) = match self.entry_index(head.path) {
            Ok(Some(found)) => found,
            Ok(None) => return (Err(ErrorStatus::NotFound), NO_ROUTE),
            Err(status) => return (Err(status), NO_ROUTE),
        };
        let slot = (ROUTE_SLOTS_BEFORE + index) as RouteSlot;
        (self.answer_at(head, index, pattern), slot)
    }

    /// Which response entry `index` gives `head` (`pattern`: the pattern
    /// that matched, if one did).
    fn answer_at(&self, head: &RequestHead, index: usize, pattern: Option<usize>) -> RouteAnswer {
        let entry = &self.entries[index];
        let target = match head.method {
            Method::Head => entry.target(Method::Head).or(entry.target(Method::Get)),
            method => entry.target(method),
        };
        Ok(match target {
            None => Reply::NotAllowed(index),
            Some(Target::Handler(handler)) => Reply::Handler(handler, pattern),
            Some(Target::Actor(actor)) => Reply::Actor(actor, pattern),
            Some(Target::WebSocket(index)) => {
                match head.websocket_upgrade && head.method == Method::Get {
                    true => Reply::WebSocket(index, pattern),
                    false => return Err(ErrorStatus::UpgradeRequired),
                }
            }
            Some(Target::Canned(canned)) => {
                let matches = match (head.if_none_match, &self.canned[canned].etag) {
                    (None, _) => false,
                    (Some(value), Some(tag)) => etag::if_none_match(value, tag),
                    (Some(value), None) => value == b"*",
                };
                match matches {
                    true => Reply::NotModified(canned),
                    false => Reply::Full(canned),
                }
            }
        })
    }

    /// Which response answers `head`, whose raw bytes are `raw_head`: a
    /// static file's (which reads more of the head: `Range`, `If-Range`,
    /// `If-Modified-Since`, the query), or else a route's; and which
    /// route's it is.
    pub(crate) fn answer_with_head(
        &self,
        head: &RequestHead,
        raw_head: &[u8],
    ) -> (RouteAnswer, RouteSlot) {
        let (answer, slot) = self.answer_routed(head);
        let dynamic = matches!(answer, Ok(Reply::Actor(..) | Reply::WebSocket(..)));
        if let (Some(site), false) = (&self.static_site, dynamic) {
            if let Some(static_answer) = site.answer(head, raw_head) {
                let slot = match static_answer {
                    Ok(_) => STATIC_ROUTE,
                    Err(_) => NO_ROUTE,
                };
                return (static_answer.map(Reply::Static), slot);
            }
        }
        (answer, slot)
    }

    /// What the metrics call each route slot: `none`, `static`, then each
    /// path as declared (`/users/{id}`, `/static/*`).
    pub(crate) fn route_names(&self) -> Vec<String> {
        let mut names = vec!["none".to_string(), "static".to_string()];
        names.extend(self.entries.iter().map(|entry| entry.path.to_string()));
        names
    }

    /// The entry for `path`, looked up percent-decoded and without dot
    /// segments ([`route_path`]): the exact path's, else the pattern's
    /// that matches (with its index), else the longest prefix's. Patterns
    /// come before prefixes as the more specific: a pattern matches a
    /// fixed number of segments, a prefix any number. A path that decodes
    /// to nothing a route could be keyed by has none; one that climbs
    /// above the root is a 400.
    fn entry_index(&self, path: &[u8]) -> Result<Option<(usize, Option<usize>)>, ErrorStatus> {
        let lookup = |path: &[u8]| {
            if let Some(&index) = self.by_path.get(path) {
                return Some((index, None));
            }
            let matched = self
                .patterns
                .iter()
                .enumerate()
                .find(|(_, (p, _))| p.matches(path));
            if let Some((at, (_, index))) = matched {
                return Some((*index, Some(at)));
            }
            self.prefixes
                .iter()
                .find(|(prefix, _)| path.starts_with(prefix))
                .map(|(_, index)| (*index, None))
        };
        if !needs_normalizing(path, false) {
            return Ok(lookup(path));
        }
        // A path fits in the request head, so it fits here decoded.
        let mut decoded = [0u8; MAX_HEAD_LEN];
        match route_path(path, &mut decoded) {
            Ok(normal) => Ok(normal.and_then(lookup)),
            Err(AboveRoot) => Err(ErrorStatus::BadRequest),
        }
    }

    /// The parameters of the pattern at `index` (as a `Reply` names it).
    pub(crate) fn pattern_params(&self, index: Option<usize>) -> Option<&Arc<PathParams>> {
        index.map(|index| self.patterns[index].0.params())
    }

    /// Route paths refused as they were added, each with why.
    pub(crate) fn refused(&self) -> &[String] {
        &self.refused
    }

    pub(crate) fn handler_at(&self, index: usize) -> &Handler {
        &self.handlers[index]
    }

    /// The actor routes, by index.
    pub(crate) fn actor_routes(&self) -> &[ActorRoute] {
        &self.actors
    }

    /// How many threads run blocking handlers: kept, and at most.
    pub(crate) fn blocking_thread_count(&self) -> (usize, usize) {
        (
            self.blocking_threads,
            self.blocking_max_threads.max(self.blocking_threads),
        )
    }
}

impl fmt::Debug for Routes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Routes")
            .field("paths", &self.by_path.len())
            .field("patterns", &self.patterns.len())
            .field("prefixes", &self.prefixes.len())
            .field("handlers", &self.handlers.len())
            .field("actors", &self.actors)
            .field("websockets", &self.websockets.len())
            .field("static_site", &self.static_site.is_some())
            .field("middleware", &self.middleware.len())
            .finish_non_exhaustive()
    }
}
