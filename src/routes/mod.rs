//! The route table: exact request paths to canned responses, built once at
//! start and shared by every connection, plus the canned error responses.
//! Paths are looked up percent-decoded; every route answers a matching
//! `If-None-Match` with its canned 304 (`*` matches any route, a list of
//! tags only a route with an entity tag).

pub(crate) mod conditional;
pub(crate) mod etag;
pub(crate) mod percent;
pub(crate) mod static_files;
pub(crate) mod static_response;
pub(crate) mod static_site;
pub(crate) mod static_table;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::http::date::DATE_LEN;

use crate::http::request::{Method, RequestHead, MAX_HEAD_LEN};
use crate::http::response::{CannedResponse, DynamicResponse, ErrorStatus, Persistence};
use crate::http::target::TargetForm;
use crate::routes::percent::decode_path;
use crate::routes::static_files::{StaticFilesError, StaticLimits};
use crate::routes::static_site::StaticSite;
use crate::routes::static_table::StaticReply;

/// The 20-user list served at `/v1/user`.
pub(crate) const V1_USER_JSON: &[u8] = include_bytes!("../../fixtures/v1-user.json");

/// Which response answers a request: a route's, or an error status.
pub(crate) type RouteAnswer = Result<Reply, ErrorStatus>;

/// A route's response to a request, by the route's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    Full(usize),
    /// The client's `If-None-Match` matched the route.
    NotModified(usize),
    /// The answer is the upstream's JSON, which the exchange waits for.
    Upstream,
    /// A static file's response (or a directory's redirect), which
    /// [`Routes::write`] writes.
    Static(StaticReply),
}

/// The route table: which response answers which request.
#[derive(Debug, Clone)]
pub struct Routes {
    by_path: HashMap<Box<[u8]>, usize>,
    routes: Vec<Route>,
    errors: Vec<CannedResponse>,
    /// The path answered with the upstream's JSON, if any.
    upstream_path: Option<Box<[u8]>>,
    upstream_response: DynamicResponse,
    /// Files served ahead of the routes above, reloadable.
    static_site: Option<Arc<StaticSite>>,
    #[cfg(feature = "fault-injection")]
    panic_path: Option<Box<[u8]>>,
}

/// A route's responses.
#[derive(Debug, Clone)]
struct Route {
    response: CannedResponse,
    /// The answer to a GET or HEAD whose `If-None-Match` matches.
    not_modified: CannedResponse,
    /// The strong entity tag of `response`, with its quotes. Without one,
    /// only `If-None-Match: *` matches: it asks whether the resource has any
    /// current representation (RFC 9110 §13.1.2), and every route has one.
    etag: Option<Box<[u8]>>,
}

/// How a route with an entity tag answers a conditional request.
#[derive(Debug, Clone)]
pub(crate) struct Revalidation {
    /// The strong entity tag of the route's response, with its quotes.
    pub etag: Box<[u8]>,
    pub not_modified: CannedResponse,
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
            routes: Vec::new(),
            errors: ErrorStatus::ALL
                .iter()
                .map(|status| status.canned())
                .collect(),
            upstream_path: None,
            upstream_response: DynamicResponse::ok("application/json"),
            static_site: None,
            #[cfg(feature = "fault-injection")]
            panic_path: None,
        }
    }

    /// Answers GET and HEAD at exactly `path` with the upstream's JSON.
    pub(crate) fn with_upstream(mut self, path: &str) -> Routes {
        self.upstream_path = Some(path.as_bytes().into());
        self
    }

    /// The response around an upstream's JSON body.
    pub(crate) fn upstream_response(&self) -> &DynamicResponse {
        &self.upstream_response
    }

    /// Test builds only: a request for `path` panics inside the connection
    /// actor, to show that a panic closes that connection and no other.
    #[cfg(feature = "fault-injection")]
    pub fn panic_at(mut self, path: &str) -> Routes {
        self.panic_path = Some(path.as_bytes().into());
        self
    }

    /// Serves `response` to GET and HEAD at exactly `path` (no query), which
    /// a request may spell percent-encoded. A later route for the same path
    /// replaces the earlier one.
    pub fn route(mut self, path: &str, response: CannedResponse) -> Routes {
        let route = Route {
            response,
            not_modified: CannedResponse::not_modified(&[]),
            etag: None,
        };
        self.insert(path.as_bytes(), route);
        self
    }

    /// Serves every regular file under `dir`, loaded now, dotfiles left
    /// out: see [`static_files`](crate::routes::static_files) for the paths, headers
    /// and limits.
    pub fn with_static_dir(
        self,
        dir: &Path,
        limits: StaticLimits,
    ) -> Result<Routes, StaticFilesError> {
        let site = StaticSite::load(dir, limits, false)?;
        Ok(self.with_static_site(Arc::new(site)))
    }

    /// Serves `site`'s files, as they are after each of its reloads. A file
    /// (or a directory, redirected to its path with a `/`) takes precedence
    /// over a route at the same path (`/` for `index.html`), but not over
    /// the upstream's path.
    pub fn with_static_site(mut self, site: Arc<StaticSite>) -> Routes {
        self.static_site = Some(site);
        self
    }

    fn insert(&mut self, path: &[u8], route: Route) {
        match self.by_path.get(path) {
            Some(&index) => self.routes[index] = route,
            None => {
                self.by_path.insert(path.into(), self.routes.len());
                self.routes.push(route);
            }
        }
    }

    /// The routes the server binary serves.
    pub fn standard() -> Routes {
        Routes::new()
            .route(
                "/",
                CannedResponse::ok("text/plain; charset=utf-8", "hello\n"),
            )
            .route(
                "/plaintext",
                CannedResponse::ok("text/plain", "Hello, World!"),
            )
            .route(
                "/json",
                CannedResponse::ok("application/json", r#"{"message":"Hello, World!"}"#),
            )
            .route(
                "/v1/user",
                CannedResponse::new(
                    200,
                    "OK",
                    &[
                        ("content-type", "application/json"),
                        ("engine", "Rust/Uppercut"),
                        ("location", "/v1/user"),
                    ],
                    Bytes::from_static(V1_USER_JSON),
                ),
            )
    }

    /// Which response answers `head`.
    pub(crate) fn answer(&self, head: &RequestHead) -> RouteAnswer {
        #[cfg(feature = "fault-injection")]
        if self.panic_path.as_deref() == Some(head.path) {
            panic!("fault injection: a request for a panicking route");
        }
        // Only OPTIONS may send `*` and only CONNECT an authority (the
        // parser refuses them with other methods); this server implements
        // neither method for any target.
        if matches!(head.form, TargetForm::Asterisk | TargetForm::Authority) {
            return Err(ErrorStatus::MethodNotAllowed);
        }
        if self.upstream_path.as_deref() == Some(head.path) {
            return match head.method {
                Method::Other => Err(ErrorStatus::MethodNotAllowed),
                Method::Get | Method::Head => Ok(Reply::Upstream),
            };
        }
        let index = match (self.route_index(head.path), head.method) {
            (None, _) => return Err(ErrorStatus::NotFound),
            (Some(_), Method::Other) => return Err(ErrorStatus::MethodNotAllowed),
            (Some(index), Method::Get | Method::Head) => index,
        };
        let matches = match (head.if_none_match, &self.routes[index].etag) {
            (None, _) => false,
            (Some(value), Some(tag)) => etag::if_none_match(value, tag),
            (Some(value), None) => value == b"*",
        };
        Ok(if matches {
            Reply::NotModified(index)
        } else {
            Reply::Full(index)
        })
    }

    /// Which response answers `head`, whose raw bytes are `raw_head`: a
    /// static file's (which reads more of the head: `Range`, `If-Range`,
    /// `If-Modified-Since`, the query), or else as [`Routes::answer`].
    pub(crate) fn answer_with_head(&self, head: &RequestHead, raw_head: &[u8]) -> RouteAnswer {
        if let Some(site) = &self.static_site {
            if self.upstream_path.as_deref() != Some(head.path) {
                if let Some(answer) = site.answer(head, raw_head) {
                    return answer.map(Reply::Static);
                }
            }
        }
        self.answer(head)
    }

    /// Appends the response `answer` names; `raw_head` is the head of the
    /// request it answers, or empty once that is gone (a request whose body
    /// came after it), which only drops a redirect's query.
    pub(crate) fn write(
        &self,
        answer: RouteAnswer,
        raw_head: &[u8],
        out: &mut BytesMut,
        date: &[u8; DATE_LEN],
        persistence: Persistence,
        head_only: bool,
    ) {
        if let Ok(Reply::Static(reply)) = answer {
            let written = self
                .static_site
                .as_ref()
                .is_some_and(|site| site.write(reply, raw_head, out, date, persistence, head_only));
            if !written {
                // Reloaded while this request's body arrived: try again.
                self.response(Err(ErrorStatus::ServiceUnavailable)).write(
                    out,
                    date,
                    persistence,
                    head_only,
                );
            }
            return;
        }
        self.response(answer)
            .write(out, date, persistence, head_only);
    }

    /// The route at `path`, looked up percent-decoded; a path that decodes
    /// to nothing a route could be keyed by (see [`decode_path`]) has none.
    fn route_index(&self, path: &[u8]) -> Option<usize> {
        if !path.contains(&b'%') {
            return self.by_path.get(path).copied();
        }
        // A path fits in the request head, so it fits here decoded.
        let mut decoded = [0u8; MAX_HEAD_LEN];
        let path = decode_path(path, &mut decoded)?;
        self.by_path.get(path).copied()
    }

    /// Every canned response of this table (each route's, its 304, and
    /// each error status's), with whether the connection may stay open
    /// after it: what the fuzz target checks output against.
    pub(crate) fn canned(&self) -> impl Iterator<Item = (&CannedResponse, bool)> {
        let routes = self
            .routes
            .iter()
            .flat_map(|route| [(&route.response, true), (&route.not_modified, true)]);
        let errors = ErrorStatus::ALL
            .iter()
            .map(|&status| (self.response(Err(status)), status.keeps_connection()));
        routes.chain(errors)
    }

    pub(crate) fn response(&self, answer: RouteAnswer) -> &CannedResponse {
        match answer {
            Ok(Reply::Full(index)) => &self.routes[index].response,
            Ok(Reply::NotModified(index)) => &self.routes[index].not_modified,
            // The exchange writes upstream answers itself, through
            // `upstream_response`, once they arrive; until then none is owed.
            Ok(Reply::Upstream) => &self.errors[ErrorStatus::BadGateway as usize],
            // Only `write` can write these, from the table that routed them.
            Ok(Reply::Static(_)) => &self.errors[ErrorStatus::ServiceUnavailable as usize],
            // `errors` is built from `ErrorStatus::ALL`, which lists the variants in order.
            Err(status) => &self.errors[status as usize],
        }
    }
}
