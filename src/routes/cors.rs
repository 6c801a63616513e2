//! [`Cors`]: a middleware for cross-origin requests from browsers (the
//! Fetch standard's CORS protocol): it answers preflights and adds the
//! `Access-Control-*` fields to the responses of the origins it allows.

use std::time::Duration;

use crate::http::method::Method;
use crate::routes::middleware::{Exchange, Fields, Middleware};
use crate::routes::request::Request;

/// Which origins may read the responses.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origins {
    /// Any (`*`).
    Any,
    /// These, each as a browser sends it (`https://app.example:8443`).
    List(Vec<String>),
}

/// The `Access-Control-Allow-Headers` of a preflight's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AllowHeaders {
    /// These names, joined.
    List(String),
    /// Whatever the preflight asks for.
    Any,
}

/// Answers CORS preflights and marks the responses a browser may hand to
/// scripts of other origins.
///
/// - A **preflight** (`OPTIONS` with `Origin` and
///   `Access-Control-Request-Method`) is answered here, 204, whatever route
///   the path has: from an allowed origin, with the methods, the request
///   headers and the `max-age` allowed; from another, with none of them, so
///   the browser refuses the request it asked about.
/// - **Any other request** goes to its route; when its `Origin` is
///   allowed, the response gets `Access-Control-Allow-Origin` (and
///   `-Allow-Credentials`, `-Expose-Headers` as configured). A disallowed
///   origin gets no CORS field: the server answers, and the browser keeps
///   the response from the page.
/// - With a list of origins the response depends on `Origin`, so every
///   response says `Vary: Origin` (a cache must not hand one origin's
///   answer to another); with any origin it says `*` and varies by nothing.
///
/// Add it before a middleware that refuses requests without credentials:
/// a preflight carries none. With credentials allowed, `*` is not a value a
/// browser accepts, so each allowed origin is echoed instead.
///
/// ```
/// use std::time::Duration;
/// use uppercut_mio_server::{Cors, Method, Routes};
///
/// let cors = Cors::origins(&["https://app.example"])
///     .allow_methods(&[Method::Get, Method::Post, Method::Delete])
///     .allow_headers(&["Content-Type", "Authorization"])
///     .max_age(Duration::from_secs(600));
/// let routes = Routes::new().wrap_at("/api/*", cors);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cors {
    origins: Origins,
    /// `Access-Control-Allow-Methods`.
    methods: String,
    headers: AllowHeaders,
    /// `Access-Control-Expose-Headers`, if any.
    expose: Option<String>,
    /// `Access-Control-Max-Age` in seconds, if set.
    max_age: Option<String>,
    credentials: bool,
}

impl Cors {
    /// Allows every origin (`Access-Control-Allow-Origin: *`).
    pub fn any_origin() -> Cors {
        Cors::with(Origins::Any)
    }

    /// Allows these origins, each as a browser sends it in `Origin`:
    /// scheme, host and the port if not the scheme's (`https://app.example`,
    /// `http://localhost:3000`), without a path or a `/` at the end. The
    /// scheme and host match in any case. `*` among them allows any.
    pub fn origins(origins: &[&str]) -> Cors {
        match origins.contains(&"*") {
            true => Cors::any_origin(),
            false => Cors::with(Origins::List(
                origins.iter().map(|origin| origin.to_string()).collect(),
            )),
        }
    }

    fn with(origins: Origins) -> Cors {
        Cors {
            origins,
            methods: "GET, HEAD, POST".to_string(),
            headers: AllowHeaders::List(String::new()),
            expose: None,
            max_age: None,
            credentials: false,
        }
    }

    /// The methods a preflight is told are allowed (`GET, HEAD, POST`
    /// unless set).
    pub fn allow_methods(mut self, methods: &[Method]) -> Cors {
        self.methods = join(methods.iter().map(|method| method.as_str()));
        self
    }

    /// The request header fields a preflight is told are allowed (none
    /// unless set: only the ones browsers send anyway, such as `Accept`).
    pub fn allow_headers(mut self, names: &[&str]) -> Cors {
        self.headers = AllowHeaders::List(join(names.iter().copied()));
        self
    }

    /// Allows whatever request header fields a preflight asks for.
    pub fn allow_any_header(mut self) -> Cors {
        self.headers = AllowHeaders::Any;
        self
    }

    /// The response header fields scripts may read besides the few every
    /// response shows (`Access-Control-Expose-Headers`).
    pub fn expose_headers(mut self, names: &[&str]) -> Cors {
        self.expose = Some(join(names.iter().copied())).filter(|names| !names.is_empty());
        self
    }

    /// How long a browser may keep a preflight's answer
    /// (`Access-Control-Max-Age`, whole seconds; the browser's own default
    /// unless set, 5 s in most).
    pub fn max_age(mut self, max_age: Duration) -> Cors {
        self.max_age = Some(max_age.as_secs().to_string());
        self
    }

    /// Lets requests with credentials (cookies, HTTP authentication) read
    /// their responses (`Access-Control-Allow-Credentials: true`). Each
    /// allowed origin is then echoed rather than `*`.
    pub fn allow_credentials(mut self) -> Cors {
        self.credentials = true;
        self
    }

    /// The `Access-Control-Allow-Origin` value for a request from `origin`,
    /// if it is allowed.
    fn allow_origin<'a>(&self, origin: &'a [u8]) -> Option<&'a str> {
        let allowed = match &self.origins {
            Origins::Any => true,
            Origins::List(list) => list
                .iter()
                .any(|allowed| allowed.as_bytes().eq_ignore_ascii_case(origin)),
        };
        if !allowed {
            return None;
        }
        match (&self.origins, self.credentials) {
            (Origins::Any, false) => Some("*"),
            // The browser compares the value with its origin as it sent it.
            _ => std::str::from_utf8(origin).ok(),
        }
    }

    /// Whether the response depends on the request's `Origin`.
    fn varies(&self) -> bool {
        self.origins != Origins::Any || self.credentials
    }
}

/// Whether `request` is a CORS preflight.
fn is_preflight(request: &Request<'_>) -> bool {
    request.method() == Method::Options
        && request.header("origin").is_some()
        && request.header("access-control-request-method").is_some()
}

/// `names` joined with `, `.
fn join<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

impl Middleware for Cors {
    fn before(&self, request: &Request<'_>, exchange: &mut Exchange<'_>) {
        if !is_preflight(request) {
            return;
        }
        let allowed = request
            .header("origin")
            .and_then(|origin| self.allow_origin(origin))
            .is_some();
        let response = exchange.answer(204);
        if !allowed {
            // The origin gets nothing it could use (and `after` no
            // `Access-Control-Allow-Origin`): the browser refuses.
            return;
        }
        // Each value was joined from names and methods; a malformed name
        // given at start is left out here rather than sent.
        let _ = response.header("Access-Control-Allow-Methods", &self.methods);
        let asked = request.header("access-control-request-headers");
        let headers = match &self.headers {
            AllowHeaders::List(names) => Some(names.as_str()).filter(|names| !names.is_empty()),
            AllowHeaders::Any => asked.and_then(|names| std::str::from_utf8(names).ok()),
        };
        if let Some(headers) = headers {
            let _ = response.header("Access-Control-Allow-Headers", headers);
        }
        if let Some(max_age) = &self.max_age {
            let _ = response.header("Access-Control-Max-Age", max_age);
        }
    }

    fn after(&self, request: &Request<'_>, fields: &mut Fields<'_>) {
        let preflight = is_preflight(request);
        let allowed = request
            .header("origin")
            .and_then(|origin| self.allow_origin(origin));
        if let Some(origin) = allowed {
            // An origin with a control character is no origin: refused,
            // and the browser refuses in turn.
            if fields.add("Access-Control-Allow-Origin", origin).is_ok() {
                if self.credentials {
                    let _ = fields.add("Access-Control-Allow-Credentials", "true");
                }
                if let (Some(expose), false) = (&self.expose, preflight) {
                    let _ = fields.add("Access-Control-Expose-Headers", expose);
                }
            }
        }
        if self.varies() {
            let _ = fields.add(
                "Vary",
                match preflight {
                    true => "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
                    false => "Origin",
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_listed_origins_and_echoes_them_with_credentials() {
        let list = Cors::origins(&["https://App.example", "http://localhost:3000"]);
        assert_eq!(
            list.allow_origin(b"https://app.example"),
            Some("https://app.example")
        );
        assert_eq!(list.allow_origin(b"https://app.example.evil"), None);
        assert_eq!(list.allow_origin(b"null"), None);
        assert!(list.varies());
        let any = Cors::any_origin();
        assert_eq!(any.allow_origin(b"https://x.example"), Some("*"));
        assert!(!any.varies());
        let credentials = Cors::origins(&["*"]).allow_credentials();
        assert_eq!(
            credentials.allow_origin(b"https://x.example"),
            Some("https://x.example")
        );
        assert!(credentials.varies());
    }
}
