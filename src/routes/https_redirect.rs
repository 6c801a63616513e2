//! [`HttpsRedirect`]: a middleware that sends plain-HTTP requests to the
//! same place over HTTPS.

use std::fmt;

use crate::routes::middleware::{Exchange, Middleware};
use crate::routes::request::Request;

/// Answers every request that did not come over TLS with `308 Permanent
/// Redirect` to the same host, path and query over `https://`, on the
/// port given (none in the URL for 443); requests over TLS pass. 308, not
/// 301, so that a `POST` is repeated as a `POST`, with its body.
///
/// The host is the request's `Host` (`:authority` over HTTP/2) without its
/// port; a request without a usable one gets `400 Bad Request`, since
/// there is nowhere to send it. Put it first (`Routes::wrap_first`, or
/// `--redirect-https PORT` for the binary), so that no other middleware
/// works for a request about to be sent elsewhere.
///
/// ```
/// use uppercut_mio_server::{HttpsRedirect, Routes};
///
/// // Plain listeners redirect to the TLS listener on 8443.
/// let routes = Routes::standard().wrap(HttpsRedirect::to_port(8443));
/// ```
pub struct HttpsRedirect {
    /// `:PORT`, or empty for 443.
    port: String,
}

impl HttpsRedirect {
    /// Redirects to HTTPS on `port`.
    pub fn to_port(port: u16) -> HttpsRedirect {
        let port = match port {
            443 => String::new(),
            port => format!(":{port}"),
        };
        HttpsRedirect { port }
    }
}

impl Middleware for HttpsRedirect {
    fn before(&self, request: &Request<'_>, exchange: &mut Exchange<'_>) {
        if request.is_secure() {
            return;
        }
        let Some(host) = request.header("host").and_then(host_name) else {
            let response = exchange.answer(400);
            let _ = response.header("Content-Type", "text/plain; charset=utf-8");
            response.body(b"400 Bad Request: no host to redirect to\n");
            return;
        };
        let mut location =
            String::with_capacity(8 + host.len() + self.port.len() + request.path().len() + 64);
        location.push_str("https://");
        location.push_str(host);
        location.push_str(&self.port);
        location.push_str(request.path());
        if let Some(query) = request.query() {
            location.push('?');
            location.push_str(query);
        }
        let response = exchange.answer(308);
        // The path and query are as the request line had them, which the
        // parser took only from bytes a header value may hold.
        if response.header("Location", &location).is_err() {
            exchange.answer(400);
        }
    }
}

impl fmt::Debug for HttpsRedirect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpsRedirect")
            .field("port", &self.port)
            .finish()
    }
}

/// The host of a `Host` value, without its port: a name or an IPv4
/// address, or an IPv6 address in brackets; `None` for anything else.
fn host_name(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let host = match value.strip_prefix('[') {
        Some(rest) => {
            let end = rest.find(']')?;
            let after = &rest[end + 1..];
            if !(after.is_empty() || after.strip_prefix(':').is_some_and(valid_port)) {
                return None;
            }
            &value[..end + 2]
        }
        None => match value.rsplit_once(':') {
            Some((host, port)) if valid_port(port) => host,
            Some(_) => return None,
            None => value,
        },
    };
    // A colon only inside brackets (an IPv6 address): outside, it would
    // have been the port's.
    let (name, colon) = match host.strip_prefix('[') {
        Some(inner) => (inner.trim_end_matches(']'), true),
        None => (host, false),
    };
    let allowed = |b: u8| {
        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_') || (colon && b == b':')
    };
    (!name.is_empty() && name.bytes().all(allowed)).then_some(host)
}

/// 1 to 5 digits.
fn valid_port(digits: &str) -> bool {
    (1..=5).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::host_name;

    #[test]
    fn the_host_is_the_value_without_its_port() {
        assert_eq!(host_name(b"example.com"), Some("example.com"));
        assert_eq!(host_name(b"example.com:8080"), Some("example.com"));
        assert_eq!(host_name(b"10.0.0.1:80"), Some("10.0.0.1"));
        assert_eq!(host_name(b"[::1]:8080"), Some("[::1]"));
        assert_eq!(host_name(b"[::1]"), Some("[::1]"));
    }

    #[test]
    fn a_host_that_could_not_be_a_url_s_is_refused() {
        for bad in [
            &b""[..],
            b":80",
            b"a b",
            b"evil.example/x",
            b"a:port",
            b"a:123456",
            b"[::1",
            b"[::1]x",
            b"a@b",
            b"::1",
            b"a:b:80",
            b"\xff",
        ] {
            assert_eq!(host_name(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
