//! A request as a handler or an actor route sees it: method, path, query,
//! path parameters, header fields, body and the client's address, read
//! where they lie in the request's bytes.

use std::borrow::Cow;
use std::fmt;
use std::net::SocketAddr;

use crate::http::method::Method;
use crate::http::percent::{hex_digit, needs_normalizing, route_path};
use crate::http::request::MAX_HEAD_LEN;
use crate::routes::path_pattern::{segment, PathParams};

/// A request routed to a handler or an actor. It borrows the bytes the
/// request arrived in: looking at it allocates nothing, but for
/// [`Request::query_param`] on a percent-encoded value.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    method: Method,
    /// The request target's path, as sent (percent-encoded).
    path: &'a [u8],
    query: Option<&'a [u8]>,
    /// The whole head: the request line, the fields, the blank line.
    head: &'a [u8],
    body: &'a [u8],
    /// The parameters of the route's path pattern, if it has one.
    params: Option<&'a PathParams>,
    peer: Option<SocketAddr>,
    /// It came over TLS.
    secure: bool,
    /// The id a middleware gave the request (`RequestId`).
    request_id: Option<&'a str>,
}

impl<'a> Request<'a> {
    pub(crate) fn new(
        method: Method,
        path: &'a [u8],
        query: Option<&'a [u8]>,
        head: &'a [u8],
        body: &'a [u8],
    ) -> Request<'a> {
        Request {
            method,
            path,
            query,
            head,
            body,
            params: None,
            peer: None,
            secure: false,
            request_id: None,
        }
    }

    /// The same, routed by a pattern with `params`.
    pub(crate) fn with_params(self, params: Option<&'a PathParams>) -> Request<'a> {
        Request { params, ..self }
    }

    /// The same, from a client at `peer`.
    pub(crate) fn with_peer(self, peer: Option<SocketAddr>) -> Request<'a> {
        Request { peer, ..self }
    }

    /// The same, come over TLS or not.
    pub(crate) fn with_secure(self, secure: bool) -> Request<'a> {
        Request { secure, ..self }
    }

    /// The same, named `id` by a middleware.
    pub(crate) fn with_request_id(self, request_id: Option<&'a str>) -> Request<'a> {
        Request { request_id, ..self }
    }

    /// The request's id, when a middleware's `before` gave it one
    /// ([`Exchange::set_request_id`](crate::Exchange::set_request_id); the
    /// ready-made [`RequestId`](crate::RequestId) takes the client's
    /// `X-Request-Id` or makes one and sends it back), for a handler or an
    /// actor to put in its own logs or pass on. `None` without one, and in
    /// a `before` hook itself (its `Exchange` has the id so far).
    pub fn request_id(&self) -> Option<&'a str> {
        self.request_id
    }

    /// The value of the path parameter `name` of the route's pattern
    /// (`Routes::handler(&[Method::Get], "/users/{id}", ..)`, then
    /// `request.param("id")`), percent-decoded. `None` when the route has
    /// no such parameter, or the value does not decode to UTF-8. Borrows
    /// unless the path needed decoding.
    pub fn param(&self, name: &str) -> Option<Cow<'a, str>> {
        let index = self.params?.segment_of(name)?;
        if !needs_normalizing(self.path, false) {
            let value = segment(self.path, index)?;
            return std::str::from_utf8(value).ok().map(Cow::Borrowed);
        }
        // Matched in normal form, so read in normal form: decoded, and
        // with the segments dot segments removed.
        let mut buf = [0u8; MAX_HEAD_LEN];
        let normal = route_path(self.path, &mut buf).ok()??;
        let value = segment(normal, index)?;
        String::from_utf8(value.to_vec()).ok().map(Cow::Owned)
    }

    /// Every path parameter of the route's pattern, in order, with its
    /// value as [`Request::param`] gives it.
    pub(crate) fn path_params(&self) -> impl Iterator<Item = (&'a str, Option<Cow<'a, str>>)> {
        let request = *self;
        let pairs = self.params.into_iter().flat_map(|params| params.pairs());
        pairs.map(move |(name, _)| (name, request.param(name)))
    }

    /// The request came over TLS (HTTPS, or HTTP/2 over TLS), to this
    /// server: behind a proxy that ends TLS itself, false.
    pub fn is_secure(&self) -> bool {
        self.secure
    }

    /// The address of the client that sent the request (of the proxy in
    /// front of it, if any: this server reads no `Forwarded` header).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// The method; a HEAD request routed to a GET route says `Head`.
    pub fn method(&self) -> Method {
        self.method
    }

    /// The path of the request target as sent (percent-encoded), without
    /// the query. The request line admits only ASCII here.
    pub fn path(&self) -> &'a str {
        std::str::from_utf8(self.path).unwrap_or("")
    }

    /// The query of the request target as sent, without its `?`.
    pub fn query(&self) -> Option<&'a str> {
        self.query.and_then(|query| std::str::from_utf8(query).ok())
    }

    /// The value of the first `name=value` pair of the query named `name`,
    /// percent-decoded (`+` is a space); a name without `=` has the empty
    /// value. `None` when the query has no such pair, or its value does not
    /// decode to UTF-8. Borrows unless the value needed decoding.
    pub fn query_param(&self, name: &str) -> Option<Cow<'a, str>> {
        let query = self.query?;
        query.split(|&b| b == b'&').find_map(|pair| {
            let (key, value) = match pair.iter().position(|&b| b == b'=') {
                Some(at) => (&pair[..at], &pair[at + 1..]),
                None => (pair, &pair[pair.len()..]),
            };
            (decode_component(key)? == name).then(|| decode_component(value))?
        })
    }

    /// The value of the first header field named `name` (case-insensitive),
    /// without the whitespace around it.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers()
            .find(|(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
    }

    /// Every header field, in order, as (name, value).
    pub fn headers(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> {
        let head: &'a [u8] = self.head;
        // The request line first; the head was parsed, so each field line
        // has a colon, and the head ends with a blank line.
        head.split(|&b| b == b'\n').skip(1).filter_map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let colon = line.iter().position(|&b| b == b':')?;
            let name = std::str::from_utf8(&line[..colon]).ok()?;
            Some((name, line[colon + 1..].trim_ascii()))
        })
    }

    /// The body, de-chunked; empty without one.
    pub fn body(&self) -> &'a [u8] {
        self.body
    }
}

impl fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("path", &self.path())
            .field("query", &self.query())
            .field("body_len", &self.body.len())
            .field("peer", &self.peer)
            .field("request_id", &self.request_id)
            .finish()
    }
}

/// One component of a query, percent-decoded with `+` as a space.
fn decode_component(component: &[u8]) -> Option<Cow<'_, str>> {
    if !component.iter().any(|&b| b == b'%' || b == b'+') {
        return std::str::from_utf8(component).ok().map(Cow::Borrowed);
    }
    let mut decoded = Vec::with_capacity(component.len());
    let mut rest = component;
    while let Some((&byte, after)) = rest.split_first() {
        rest = after;
        decoded.push(match byte {
            b'+' => b' ',
            b'%' => match after {
                [high, low, more @ ..] => {
                    let value = hex_digit(*high)? << 4 | hex_digit(*low)?;
                    rest = more;
                    value
                }
                _ => return None,
            },
            other => other,
        });
    }
    String::from_utf8(decoded).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(query: &'a [u8], head: &'a [u8]) -> Request<'a> {
        Request::new(Method::Get, b"/greet", Some(query), head, b"")
    }

    #[test]
    fn decodes_query_values() {
        let r = request(b"a=1&name=J%C3%BCrgen+K&empty&x=%zz", b"");
        assert_eq!(r.query_param("name").as_deref(), Some("Jürgen K"));
        assert!(matches!(r.query_param("a"), Some(Cow::Borrowed("1"))));
        assert_eq!(r.query_param("empty").as_deref(), Some(""));
        assert_eq!(r.query_param("x"), None, "a broken escape");
        assert_eq!(r.query_param("missing"), None);
    }

    #[test]
    fn finds_header_fields() {
        let head = b"POST /greet HTTP/1.1\r\nHost: a\r\nX-Name:  b c \r\nx-name: d\r\n\r\n";
        let r = request(b"", head);
        assert_eq!(r.header("x-NAME"), Some(&b"b c"[..]));
        assert_eq!(r.headers().count(), 3);
        assert_eq!(r.header("Missing"), None);
    }
}
