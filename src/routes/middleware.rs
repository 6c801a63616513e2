//! Middleware: hooks around the routes of a path scope, run on the
//! connection's poller. `before` may answer early (a 401, a CORS preflight)
//! or name the request; `after` adds header fields to the response,
//! whichever writer built it (canned, handler, actor, static, an error, an
//! early answer).
//!
//! Which middleware a request passes is decided at start, per scope: the
//! table keeps one chain (a slice of middleware, in the order added) for
//! every scope path, and a request takes the chain of the most specific
//! scope its path is in. A table without middleware looks at nothing but
//! the number of chains, and a request that takes the empty chain writes
//! its response exactly as it would without any.

use std::fmt;
use std::sync::Arc;

use bytes::BytesMut;

use crate::http::head::FieldsAfter;
use crate::http::percent::{needs_normalizing, normalize_path};
use crate::http::request::{RequestHead, MAX_HEAD_LEN};
use crate::http::response_fields::{check_header, ResponseError};
use crate::http::target::TargetForm;
use crate::routes::handler::Response;
use crate::routes::request::Request;

/// Hooks that run around every route of the paths they were added for
/// ([`Routes::wrap`](crate::Routes::wrap), [`Routes::wrap_at`](crate::Routes::wrap_at)),
/// in the order they were added, on the connection's poller: like a
/// handler, a hook must not block.
///
/// - [`before`](Middleware::before) runs once the whole request has arrived
///   (its body too, which the [`Request`] shows when the route reads one),
///   before the route. It may answer early with
///   [`Exchange::answer`]: the route and the `before` hooks after this one
///   are skipped, and that answer is the response (with the `--header`
///   fields and the connection kept alive or not, as for any response).
/// - [`after`](Middleware::after) runs as the response's head is written,
///   for every middleware whose `before` ran (so also on an early answer,
///   for those up to the one that answered), in the same order, and adds
///   fields after `Date` with [`Fields::add`]. It sees the request and the
///   response's status, for every kind of response: canned, handler,
///   actor (and its 502 or 504), static file, error, early answer.
///
/// A request that never parsed (a malformed or oversized head, a timeout
/// before its end, a body refused as too large) is answered without
/// middleware: there is no request to show it.
///
/// ```
/// use uppercut_mio_server::{Exchange, Fields, Middleware, Request, Routes, CannedResponse};
///
/// /// Lets through only requests that carry the right bearer token.
/// struct Token(&'static str);
///
/// impl Middleware for Token {
///     fn before(&self, request: &Request<'_>, exchange: &mut Exchange<'_>) {
///         let expected = format!("Bearer {}", self.0);
///         if request.header("authorization") != Some(expected.as_bytes()) {
///             let response = exchange.answer(401);
///             let _ = response.header("WWW-Authenticate", "Bearer");
///             response.body(b"401 Unauthorized\n");
///         }
///     }
///
///     fn after(&self, _request: &Request<'_>, fields: &mut Fields<'_>) {
///         if fields.status() < 300 {
///             let _ = fields.add("Cache-Control", "private");
///         }
///     }
/// }
///
/// let routes = Routes::new()
///     .route("/", CannedResponse::ok("text/plain", "public\n"))
///     .route("/admin/report", CannedResponse::ok("text/plain", "secret\n"))
///     .wrap_at("/admin/*", Token("s3cret"));
/// ```
pub trait Middleware: Send + Sync + 'static {
    /// Runs before the route; answering with [`Exchange::answer`] skips
    /// it. Does nothing unless implemented.
    fn before(&self, request: &Request<'_>, exchange: &mut Exchange<'_>) {
        let _ = (request, exchange);
    }

    /// Adds header fields to the response. Does nothing unless
    /// implemented.
    fn after(&self, request: &Request<'_>, fields: &mut Fields<'_>) {
        let _ = (request, fields);
    }
}

/// One middleware shared by several scopes (or tables).
impl<M: Middleware + ?Sized> Middleware for Arc<M> {
    fn before(&self, request: &Request<'_>, exchange: &mut Exchange<'_>) {
        (**self).before(request, exchange);
    }

    fn after(&self, request: &Request<'_>, fields: &mut Fields<'_>) {
        (**self).after(request, fields);
    }
}

/// What a [`Middleware::before`] may do to the exchange: answer it early,
/// or name the request.
pub struct Exchange<'a> {
    early: Response<'a>,
    answered: bool,
    id: &'a mut IdValue,
}

impl<'a> Exchange<'a> {
    /// Answers the request with `status` (500 for one a final response
    /// cannot have) instead of its route, with the fields and body written
    /// into the response this returns (empty so far; the server adds
    /// `Server`, `Content-Length`, `Date` and `Connection`, as for a
    /// handler). The `before` hooks after this one do not run. Called
    /// again, it starts the answer over.
    pub fn answer(&mut self, status: u16) -> &mut Response<'a> {
        self.answered = true;
        self.early.restart(status);
        &mut self.early
    }

    /// The request's id so far (set by an earlier middleware).
    pub fn request_id(&self) -> Option<&str> {
        self.id.get()
    }

    /// Names the request `id`, which the route sees as
    /// [`Request::request_id`] and the `after` hooks too; false (and
    /// nothing set) unless it is 1 to 128 ASCII letters, digits and
    /// `-_.:;=+/@`. [`RequestId`](crate::RequestId) sets it.
    pub fn set_request_id(&mut self, id: &str) -> bool {
        self.id.set(id.as_bytes())
    }
}

impl fmt::Debug for Exchange<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exchange")
            .field("answered", &self.answered)
            .field("request_id", &self.id.get())
            .finish_non_exhaustive()
    }
}

/// The fields a [`Middleware::after`] adds to a response, after `Date`
/// (and after the fields `--header` adds to every response).
pub struct Fields<'a> {
    status: u16,
    out: &'a mut BytesMut,
}

impl Fields<'_> {
    /// The response's status.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Adds a header field. One the server writes itself (`Content-Length`,
    /// `Transfer-Encoding`, `Date`, `Server`, `Connection`), `Content-Type`
    /// (every response has its own), or a malformed one is refused and not
    /// sent.
    pub fn add(&mut self, name: &str, value: &str) -> Result<(), ResponseError> {
        check_header(name, value)?;
        if name.eq_ignore_ascii_case("content-type") {
            return Err(ResponseError::ReservedHeader(name.to_string()));
        }
        self.out.extend_from_slice(b"\r\n");
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b": ");
        self.out.extend_from_slice(value.as_bytes());
        Ok(())
    }
}

impl fmt::Debug for Fields<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fields")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

/// The longest request id kept.
pub(crate) const MAX_REQUEST_ID: usize = 128;

/// A request's id, held in place (no allocation): what
/// [`Exchange::set_request_id`] accepts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct IdValue {
    len: u8,
    bytes: [u8; MAX_REQUEST_ID],
}

impl IdValue {
    /// No id.
    pub(crate) const NONE: IdValue = IdValue {
        len: 0,
        bytes: [0; MAX_REQUEST_ID],
    };

    /// The id, if one was set.
    pub(crate) fn get(&self) -> Option<&str> {
        match self.len {
            0 => None,
            // Only ASCII is ever set.
            len => std::str::from_utf8(&self.bytes[..usize::from(len)]).ok(),
        }
    }

    /// Sets the id to `id` if it is one (see [`IdValue::is_valid`]).
    pub(crate) fn set(&mut self, id: &[u8]) -> bool {
        if !IdValue::is_valid(id) {
            return false;
        }
        self.bytes[..id.len()].copy_from_slice(id);
        self.len = id.len() as u8;
        true
    }

    /// 1 to 128 ASCII letters, digits and `-_.:;=+/@`: safe to echo in a
    /// header field and to write in a log line as it is.
    pub(crate) fn is_valid(id: &[u8]) -> bool {
        (1..=MAX_REQUEST_ID).contains(&id.len())
            && id
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b"-_.:;=+/@".contains(&b))
    }
}

impl fmt::Debug for IdValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.get(), f)
    }
}

/// Runs the `before` hooks of `chain`, in order, on `request`, with `id`
/// the request's id so far. When one answers, stops there and hands
/// `answered` how many hooks ran, the answer and the id; returns whether
/// one did. The answer lives in this thread's handler scratch, so no
/// handler may run inside `answered`.
pub(crate) fn run_before(
    chain: &[Arc<dyn Middleware>],
    request: &Request<'_>,
    id: &mut IdValue,
    answered: impl FnOnce(usize, &Response<'_>, &IdValue),
) -> bool {
    Response::with_scratch(|early| {
        let mut exchange = Exchange {
            early,
            answered: false,
            id,
        };
        for (at, middleware) in chain.iter().enumerate() {
            middleware.before(request, &mut exchange);
            if exchange.answered {
                answered(at + 1, &exchange.early, exchange.id);
                return true;
            }
        }
        false
    })
}

/// The `after` hooks of a response: those of `chain`, on `request`.
pub(crate) struct After<'a> {
    pub(crate) chain: &'a [Arc<dyn Middleware>],
    pub(crate) request: &'a Request<'a>,
}

impl FieldsAfter for After<'_> {
    fn put(&self, status: u16, out: &mut BytesMut) {
        let mut fields = Fields { status, out };
        for middleware in self.chain {
            middleware.after(self.request, &mut fields);
        }
    }
}

/// Where a middleware was added.
#[derive(Clone, PartialEq, Eq)]
enum Scope {
    /// Every request.
    All,
    /// This path.
    Exact(Box<[u8]>),
    /// This path (ending `/`) and every path under it.
    Prefix(Box<[u8]>),
}

impl Scope {
    /// The scope of `path` as `Routes::wrap_at` takes it: a prefix ending
    /// `/*`, else an exact path.
    fn of(path: &str) -> Result<Scope, String> {
        if path.contains(['{', '}']) {
            return Err(format!(
                "middleware path {path:?}: a path pattern; wrap an exact path or a prefix (`/users/*`)"
            ));
        }
        if !path.starts_with('/') {
            return Err(format!(
                "middleware path {path:?}: not a path (it starts with `/`)"
            ));
        }
        Ok(match path.strip_suffix('*') {
            Some(prefix) if prefix.ends_with('/') => Scope::Prefix(prefix.as_bytes().into()),
            _ => Scope::Exact(path.as_bytes().into()),
        })
    }

    /// Whether every request the scope `key` takes is in this one.
    fn covers(&self, key: &Scope) -> bool {
        match (self, key) {
            (Scope::All, _) => true,
            (Scope::Prefix(prefix), Scope::Prefix(path) | Scope::Exact(path)) => {
                path.starts_with(prefix)
            }
            (Scope::Exact(exact), Scope::Exact(path)) => exact == path,
            _ => false,
        }
    }
}

/// Which chain of middleware a request takes, by index: 0 is none.
pub(crate) type ChainIndex = u32;

/// The table's middleware, as added and as the chains each scope takes.
#[derive(Clone, Default)]
pub(crate) struct Middlewares {
    added: Vec<(Scope, Arc<dyn Middleware>)>,
    /// Every chain, by index; the first is empty.
    chains: Vec<Box<[Arc<dyn Middleware>]>>,
    /// The chain of a path in no scope but the table's (0 for none).
    global: ChainIndex,
    /// The chains of exact paths.
    exact: Vec<(Box<[u8]>, ChainIndex)>,
    /// The chains of prefixes, longest first.
    prefixes: Vec<(Box<[u8]>, ChainIndex)>,
}

impl Middlewares {
    /// Adds `middleware` for every request (`path` none) or for `path`,
    /// after those added before (or ahead of them, `first`).
    pub(crate) fn add(
        &mut self,
        path: Option<&str>,
        middleware: Arc<dyn Middleware>,
        first: bool,
    ) -> Result<(), String> {
        let scope = match path {
            Some(path) => Scope::of(path)?,
            None => Scope::All,
        };
        match first {
            true => self.added.insert(0, (scope, middleware)),
            false => self.added.push((scope, middleware)),
        }
        self.rebuild();
        Ok(())
    }

    /// Builds the chain of every scope: for each, the middleware whose
    /// scope holds it, in the order added.
    fn rebuild(&mut self) {
        let chain_of = |key: &Scope| -> Box<[Arc<dyn Middleware>]> {
            self.added
                .iter()
                .filter(|(scope, _)| scope.covers(key))
                .map(|(_, middleware)| Arc::clone(middleware))
                .collect()
        };
        let mut chains: Vec<Box<[Arc<dyn Middleware>]>> = vec![Box::new([])];
        let global = chain_of(&Scope::All);
        let global = match global.is_empty() {
            true => 0,
            false => {
                chains.push(global);
                (chains.len() - 1) as ChainIndex
            }
        };
        let (mut exact, mut prefixes) = (Vec::new(), Vec::new());
        for (scope, _) in &self.added {
            let (list, path) = match scope {
                Scope::All => continue,
                Scope::Exact(path) => (&mut exact, path),
                Scope::Prefix(path) => (&mut prefixes, path),
            };
            if list.iter().any(|(known, _)| known == path) {
                continue;
            }
            chains.push(chain_of(scope));
            list.push((path.clone(), (chains.len() - 1) as ChainIndex));
        }
        prefixes.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        self.chains = chains;
        self.global = global;
        self.exact = exact;
        self.prefixes = prefixes;
    }

    /// Whether any middleware was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.added.is_empty()
    }

    /// How many middleware were added.
    pub(crate) fn len(&self) -> usize {
        self.added.len()
    }

    /// The chain `head` takes: that of its path's exact scope, else of the
    /// longest prefix scope it is under, else the table's. The path is
    /// matched as static files are looked up (percent-decoded, without dot
    /// segments, runs of `/` merged), so no spelling of a path that
    /// reaches a route or a file under a scope escapes its middleware.
    pub(crate) fn chain_for(&self, head: &RequestHead) -> ChainIndex {
        if matches!(head.form, TargetForm::Asterisk | TargetForm::Authority) {
            return self.global;
        }
        let find = |path: &[u8]| {
            self.exact
                .iter()
                .find(|(exact, _)| **exact == *path)
                .or_else(|| {
                    self.prefixes
                        .iter()
                        .find(|(prefix, _)| path.starts_with(prefix))
                })
                .map_or(self.global, |(_, chain)| *chain)
        };
        if !needs_normalizing(head.path, true) {
            return find(head.path);
        }
        // A path fits in the request head, so it fits here decoded.
        let mut decoded = [0u8; MAX_HEAD_LEN];
        match normalize_path(head.path, &mut decoded) {
            Ok(Some(normal)) => find(normal),
            // Nothing is served there, and a 400 it is.
            Ok(None) | Err(_) => self.global,
        }
    }

    /// The chain at `index`.
    pub(crate) fn chain(&self, index: ChainIndex) -> &[Arc<dyn Middleware>] {
        self.chains.get(index as usize).map_or(&[], |chain| chain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::testing::head;

    struct Named;
    impl Middleware for Named {}

    fn chains(middlewares: &Middlewares, raw: &str) -> usize {
        middlewares.chain(middlewares.chain_for(&head(raw))).len()
    }

    #[test]
    fn a_request_takes_the_chain_of_its_most_specific_scope() {
        let mut m = Middlewares::default();
        let get = |m: &Middlewares, path: &str| {
            chains(m, &format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n"))
        };
        assert_eq!(get(&m, "/a"), 0, "no middleware");
        m.add(Some("/api/*"), Arc::new(Named), false).unwrap();
        assert_eq!(get(&m, "/api"), 0, "a prefix is the path with its /");
        assert_eq!(get(&m, "/api/"), 1);
        m.add(None, Arc::new(Named), false).unwrap();
        m.add(Some("/api/v2/*"), Arc::new(Named), false).unwrap();
        m.add(Some("/api/v2/login"), Arc::new(Named), false)
            .unwrap();
        assert_eq!(get(&m, "/other"), 1, "the table's only");
        assert_eq!(get(&m, "/api/users"), 2);
        assert_eq!(get(&m, "/api/v2/users"), 3);
        assert_eq!(get(&m, "/api/v2/login"), 4);
        // Spelled otherwise, the same paths.
        assert_eq!(get(&m, "/%61pi/v2/login"), 4);
        assert_eq!(get(&m, "/x/../api//v2/./users"), 3);
        assert_eq!(get(&m, "/api%2Fusers"), 1, "an encoded / names nothing");
        assert_eq!(chains(&m, "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), 1);
        assert!(Middlewares::default()
            .add(Some("/users/{id}"), Arc::new(Named), false)
            .is_err());
    }

    #[test]
    fn one_added_first_runs_first() {
        let mut m = Middlewares::default();
        let a: Arc<dyn Middleware> = Arc::new(Named);
        let b: Arc<dyn Middleware> = Arc::new(Named);
        m.add(Some("/a/*"), Arc::clone(&a), false).unwrap();
        m.add(None, Arc::clone(&b), true).unwrap();
        let chain = m.chain(m.chain_for(&head("GET /a/x HTTP/1.1\r\nHost: a\r\n\r\n")));
        assert!(Arc::ptr_eq(&chain[0], &b) && Arc::ptr_eq(&chain[1], &a));
    }

    #[test]
    fn an_id_is_short_plain_ascii() {
        let mut id = IdValue::NONE;
        assert_eq!(id.get(), None);
        assert!(id.set(b"Root=1-5759e988;Parent=53995c3f/x@y+z_w.v:u"));
        assert!(!id.set(b""));
        assert!(!id.set(b"a b"));
        assert!(!id.set(b"a\r\nSet-Cookie: x"));
        assert!(!id.set("é".as_bytes()));
        assert!(!id.set(&[b'a'; MAX_REQUEST_ID + 1]));
        assert!(id.set(&[b'a'; MAX_REQUEST_ID]));
        assert_eq!(id.get().map(str::len), Some(MAX_REQUEST_ID));
    }
}
