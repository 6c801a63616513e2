//! The route table, built once at start and shared by every connection:
//! paths (exact, or prefixes ending `/*`) to what answers each method there
//! (a canned response, a handler, an actor), the canned error responses, and
//! the static site served ahead of them. Paths are looked up
//! percent-decoded and without dot segments (`percent`); a canned route
//! answers a matching `If-None-Match` with its canned 304 (`*` matches any
//! route, a list of tags only a route with an entity tag).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use uppercut::api::{Actor, AnyActor};

use crate::http::method::Method;
use crate::http::request::{RequestHead, MAX_BODY_LEN, MAX_HEAD_LEN};
use crate::http::response::CannedResponse;
use crate::http::status::not_allowed;
use crate::http::status::ErrorStatus;
use crate::http::target::TargetForm;
use crate::routes::etag;
use crate::routes::handler::Handler;
use crate::routes::handler::Response;
use crate::routes::path_entry::{Entry, Target};
use crate::routes::percent::{needs_normalizing, route_path, AboveRoot};
use crate::routes::request::Request;
use crate::routes::static_files::{StaticFilesError, StaticLimits};
use crate::routes::static_site::StaticSite;
use crate::routes::static_table::StaticReply;

/// How long an actor route waits for its actor's answer by default.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// Which response answers a request: a route's, or an error status.
pub(crate) type RouteAnswer = Result<Reply, ErrorStatus>;

/// A route's answer to a request, by index into the table's lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// A canned route's response.
    Full(usize),
    /// The client's `If-None-Match` matched the canned route.
    NotModified(usize),
    /// A handler route: the handler writes the response.
    Handler(usize),
    /// An actor route: the answer comes in an actor's reply.
    Actor(usize),
    /// The path has routes, none for this method: 405 listing them.
    NotAllowed(usize),
    /// A static file's response (or a directory's redirect).
    Static(StaticReply),
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

/// Where an actor route's requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActorRoute {
    /// The actor's address; `None` for the poller's own upstream pool.
    pub(crate) address: Option<String>,
    /// How long the connection waits for the answer before 504.
    pub(crate) timeout: Duration,
}

/// An actor to spawn into the server's system at start.
type Spawn = (String, Arc<Mutex<Option<Actor>>>);

/// The route table: which response answers which request.
#[derive(Clone)]
pub struct Routes {
    by_path: HashMap<Box<[u8]>, usize>,
    /// Prefix routes, longest prefix first.
    prefixes: Vec<(Box<[u8]>, usize)>,
    pub(crate) entries: Vec<Entry>,
    pub(crate) canned: Vec<Canned>,
    handlers: Vec<Handler>,
    actors: Vec<ActorRoute>,
    pub(crate) errors: Vec<CannedResponse>,
    reply_timeout: Duration,
    spawns: Vec<Spawn>,
    /// Files served ahead of the routes above, reloadable.
    pub(crate) static_site: Option<Arc<StaticSite>>,
    #[cfg(feature = "fault-injection")]
    panic_path: Option<Box<[u8]>>,
    /// The most bytes a request body may carry (`Config::max_body`).
    pub(crate) max_body: u64,
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
            by_path: HashMap::new(),
            prefixes: Vec::new(),
            entries: Vec::new(),
            canned: Vec::new(),
            handlers: Vec::new(),
            actors: Vec::new(),
            errors: ErrorStatus::ALL.iter().map(|s| s.canned()).collect(),
            reply_timeout: REPLY_TIMEOUT,
            spawns: Vec::new(),
            static_site: None,
            #[cfg(feature = "fault-injection")]
            panic_path: None,
            max_body: MAX_BODY_LEN,
        }
    }

    /// Serves `response` to GET and HEAD at `path`, which a request may
    /// spell percent-encoded; a path ending `/*` is a prefix (`/static/*`
    /// takes `/static/` and every path under it). A later route for the
    /// same path and method replaces the earlier one.
    pub fn route(mut self, path: &str, response: CannedResponse) -> Routes {
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
    pub fn handler<F>(mut self, methods: &[Method], path: &str, handler: F) -> Routes
    where
        F: Fn(&Request<'_>, &mut Response<'_>) + Send + Sync + 'static,
    {
        self.handlers.push(Arc::new(handler));
        let target = Target::Handler(self.handlers.len() - 1);
        self.insert(path, methods, target);
        self
    }

    /// Sends requests for `methods` at `path` (exact, or a prefix ending
    /// `/*`) to the actor at `address` in the server's system, as an
    /// [`ActorRequest`](crate::ActorRequest); the connection writes its
    /// answer, in request order. No answer within the reply timeout is a
    /// 504; an actor that is gone, a 502.
    pub fn actor(mut self, methods: &[Method], path: &str, address: &str) -> Routes {
        self.actors.push(ActorRoute {
            address: Some(address.to_string()),
            timeout: self.reply_timeout,
        });
        let target = Target::Actor(self.actors.len() - 1);
        self.insert(path, methods, target);
        self
    }

    /// How long actor routes added after this call wait for an answer
    /// (5 s unless set).
    pub fn reply_timeout(mut self, timeout: Duration) -> Routes {
        self.reply_timeout = timeout;
        self
    }

    /// Spawns `actor` at `address` into the server's actor system when the
    /// server starts; the server stops it when it stops.
    pub fn spawn(mut self, address: &str, actor: impl AnyActor + 'static) -> Routes {
        let actor: Actor = Box::new(actor);
        let spawn = (address.to_string(), Arc::new(Mutex::new(Some(actor))));
        self.spawns.push(spawn);
        self
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

    /// Answers GET and HEAD at exactly `path` with the upstream's JSON,
    /// through the poller's own upstream pool, which times requests out
    /// itself after `timeout`.
    pub(crate) fn with_upstream(mut self, path: &str, timeout: Duration) -> Routes {
        self.actors.push(ActorRoute {
            address: None,
            // The pool's own 504 names the cause; this one is a backstop.
            timeout: timeout + Duration::from_secs(1),
        });
        let target = Target::Actor(self.actors.len() - 1);
        self.insert(path, &[Method::Get], target);
        self
    }

    /// Refuses request bodies over `max_body` bytes with 413.
    pub(crate) fn with_max_body(mut self, max_body: u64) -> Routes {
        self.max_body = max_body;
        self
    }

    /// Test builds only: a request for `path` panics inside the connection
    /// actor, to show that a panic closes that connection and no other.
    #[cfg(feature = "fault-injection")]
    pub fn panic_at(mut self, path: &str) -> Routes {
        self.panic_path = Some(path.as_bytes().into());
        self
    }

    fn insert(&mut self, path: &str, methods: &[Method], target: Target) {
        let (key, prefix) = match path.strip_suffix('*') {
            Some(prefix) if prefix.ends_with('/') => (prefix.as_bytes(), true),
            _ => (path.as_bytes(), false),
        };
        let found = match prefix {
            true => self.prefixes.iter().find(|(p, _)| **p == *key).map(|p| p.1),
            false => self.by_path.get(key).copied(),
        };
        let index = found.unwrap_or_else(|| {
            self.entries.push(Entry {
                targets: [None; Method::ROUTABLE.len()],
                not_allowed: ErrorStatus::MethodNotAllowed.canned(),
            });
            let index = self.entries.len() - 1;
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
        let entry = &mut self.entries[index];
        for &method in methods {
            if let Some(slot) = Method::ROUTABLE.iter().position(|&m| m == method) {
                entry.targets[slot] = Some(target);
            }
        }
        entry.not_allowed = not_allowed(&entry.allow());
    }

    /// Which response answers `head`.
    pub(crate) fn answer(&self, head: &RequestHead) -> RouteAnswer {
        #[cfg(feature = "fault-injection")]
        if self.panic_path.as_deref() == Some(head.path) {
            panic!("fault injection: a request for a panicking route");
        }
        // Only OPTIONS may send `*` and only CONNECT an authority (the
        // parser refuses them with other methods); no route takes either.
        if matches!(head.form, TargetForm::Asterisk | TargetForm::Authority) {
            return Err(ErrorStatus::MethodNotAllowed);
        }
        let Some(index) = self.entry_index(head.path)? else {
            return Err(ErrorStatus::NotFound);
        };
        let entry = &self.entries[index];
        let target = match head.method {
            Method::Head => entry.target(Method::Head).or(entry.target(Method::Get)),
            method => entry.target(method),
        };
        Ok(match target {
            None => Reply::NotAllowed(index),
            Some(Target::Handler(handler)) => Reply::Handler(handler),
            Some(Target::Actor(actor)) => Reply::Actor(actor),
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
    /// `If-Modified-Since`, the query), or else as [`Routes::answer`].
    pub(crate) fn answer_with_head(&self, head: &RequestHead, raw_head: &[u8]) -> RouteAnswer {
        let answer = self.answer(head);
        if let (Some(site), false) = (&self.static_site, matches!(answer, Ok(Reply::Actor(_)))) {
            if let Some(static_answer) = site.answer(head, raw_head) {
                return static_answer.map(Reply::Static);
            }
        }
        answer
    }

    /// The entry for `path`, looked up percent-decoded and without dot
    /// segments ([`route_path`]): the exact path's, or the longest
    /// prefix's. A path that decodes to nothing a route could be keyed by
    /// has none; one that climbs above the root is a 400.
    fn entry_index(&self, path: &[u8]) -> Result<Option<usize>, ErrorStatus> {
        let lookup = |path: &[u8]| {
            self.by_path.get(path).copied().or_else(|| {
                self.prefixes
                    .iter()
                    .find(|(prefix, _)| path.starts_with(prefix))
                    .map(|(_, index)| *index)
            })
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

    pub(crate) fn handler_at(&self, index: usize) -> &Handler {
        &self.handlers[index]
    }

    pub(crate) fn actor_at(&self, index: usize) -> &ActorRoute {
        &self.actors[index]
    }

    /// The actors to spawn at start, each handed out once.
    pub(crate) fn take_spawns(&self) -> Vec<(String, Actor)> {
        let take = |(address, actor): &Spawn| {
            let actor = actor.lock().unwrap_or_else(|e| e.into_inner()).take();
            actor.map(|actor| (address.clone(), actor))
        };
        self.spawns.iter().filter_map(take).collect()
    }

    /// The addresses of the actors spawned at start.
    pub(crate) fn spawned_addresses(&self) -> impl Iterator<Item = &str> {
        self.spawns.iter().map(|(address, _)| address.as_str())
    }
}

impl fmt::Debug for Routes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Routes")
            .field("paths", &self.by_path.len())
            .field("prefixes", &self.prefixes.len())
            .field("handlers", &self.handlers.len())
            .field("actors", &self.actors)
            .field("static_site", &self.static_site.is_some())
            .finish_non_exhaustive()
    }
}
