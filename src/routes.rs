//! The route table: exact request paths to canned responses, built once at
//! start and shared by every connection, plus the canned error responses.
//! Paths are looked up percent-decoded; every route answers a matching
//! `If-None-Match` with its canned 304 (`*` matches any route, a list of
//! tags only a route with an entity tag).

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;

use crate::etag;
use crate::percent::decode_path;
use crate::request::{Method, RequestHead, MAX_HEAD_LEN};
use crate::response::{CannedResponse, DynamicResponse, ErrorStatus};
use crate::static_files::{self, StaticFilesError, StaticLimits};
use crate::target::TargetForm;

/// The 20-user list served at `/v1/user`.
pub const V1_USER_JSON: &[u8] = include_bytes!("../fixtures/v1-user.json");

/// Which response answers a request: a route's, or an error status.
pub type RouteAnswer = Result<Reply, ErrorStatus>;

/// A route's response to a request, by the route's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Full(usize),
    /// The client's `If-None-Match` matched the route.
    NotModified(usize),
    /// The answer is the upstream's JSON, which the exchange waits for.
    Upstream,
}

#[derive(Debug, Clone)]
pub struct Routes {
    by_path: HashMap<Box<[u8]>, usize>,
    routes: Vec<Route>,
    errors: Vec<CannedResponse>,
    /// The path answered with the upstream's JSON, if any.
    upstream_path: Option<Box<[u8]>>,
    upstream_response: DynamicResponse,
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
            #[cfg(feature = "fault-injection")]
            panic_path: None,
        }
    }

    /// Answers GET and HEAD at exactly `path` with the upstream's JSON.
    pub fn with_upstream(mut self, path: &str) -> Routes {
        self.upstream_path = Some(path.as_bytes().into());
        self
    }

    /// The response around an upstream's JSON body.
    pub fn upstream_response(&self) -> &DynamicResponse {
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

    /// Adds a route for every regular file under `dir`, loaded now: see
    /// [`static_files`] for the paths, headers and limits. A file's routes
    /// replace earlier routes for the same paths (`/` for `index.html`).
    pub fn with_static_dir(
        mut self,
        dir: &Path,
        limits: StaticLimits,
    ) -> Result<Routes, StaticFilesError> {
        for file in static_files::load(dir, limits)? {
            for path in &file.url_paths {
                let route = Route {
                    response: file.response.clone(),
                    not_modified: file.revalidation.not_modified.clone(),
                    etag: Some(file.revalidation.etag.clone()),
                };
                self.insert(path, route);
            }
        }
        Ok(self)
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
    pub fn answer(&self, head: &RequestHead) -> RouteAnswer {
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

    pub fn response(&self, answer: RouteAnswer) -> &CannedResponse {
        match answer {
            Ok(Reply::Full(index)) => &self.routes[index].response,
            Ok(Reply::NotModified(index)) => &self.routes[index].not_modified,
            // The exchange writes upstream answers itself, through
            // `upstream_response`, once they arrive; until then none is owed.
            Ok(Reply::Upstream) => &self.errors[ErrorStatus::BadGateway as usize],
            // `errors` is built from `ErrorStatus::ALL`, which lists the variants in order.
            Err(status) => &self.errors[status as usize],
        }
    }
}
