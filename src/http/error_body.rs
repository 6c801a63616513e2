//! The bodies of the error responses the server writes itself, which an
//! application may choose ([`Routes::error_body`](crate::Routes::error_body)):
//! what the hook is told ([`ServerError`]), the server's own text when there
//! is no hook, and the checks that keep a hook's answer a valid response.
//!
//! The hook costs nothing while unused, and little when used: the error
//! responses that do not depend on the request (404, 405, 408, 413 ...) are
//! canned, so the table asks the hook once for each when it is set (and for
//! each path's 405), and the hot path copies bytes as it always did. Only
//! errors with a cause of their own (a route's [`Rejection`](crate::Rejection),
//! a 502/503/504 saying why) and a static file's 416 (the site is loaded and
//! reloaded apart from the table) call it per response.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::http::head::reason_phrase;
use crate::http::response_fields::check_header;
pub(crate) use crate::http::status::TEXT;
use crate::log_limit::WarnLimiter;

/// An error response the server is about to write: its status and, for an
/// error with a cause of its own, why. The hook given to
/// [`Routes::error_body`](crate::Routes::error_body) turns it into a body.
///
/// Its `Display` is the server's own body without the line end:
/// `404 Not Found`, or `400 Bad Request: JSON body: missing field ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerError<'a> {
    status: u16,
    cause: Option<&'a str>,
}

impl<'a> ServerError<'a> {
    pub(crate) fn new(status: u16, cause: Option<&'a str>) -> ServerError<'a> {
        ServerError { status, cause }
    }

    /// The status code, 400 to 599.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The status's reason phrase (`Not Found`); empty for a code without
    /// a registered one.
    pub fn reason(&self) -> &'static str {
        reason_phrase(self.status)
    }

    /// Why, in one line, when the error has a cause of its own: a
    /// rejection's (`JSON body: missing field `name` at line 1 column 2`),
    /// an upstream's or another server's failure (`upstream timed out`).
    /// `None` for the errors every request of a kind gets (404, 405, 408,
    /// a malformed request's 400 ...), whose body is built once.
    pub fn cause(&self) -> Option<&'a str> {
        self.cause
    }
}

impl fmt::Display for ServerError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.reason())?;
        match self.cause {
            Some(cause) => write!(f, ": {cause}"),
            None => Ok(()),
        }
    }
}

/// The application's error hook: a content type and a body for an error.
pub(crate) type ErrorHook = Arc<dyn Fn(&ServerError<'_>) -> (&'static str, Bytes) + Send + Sync>;

/// A hook's content type that cannot be sent, reported at most once a second.
static BAD_CONTENT_TYPE: WarnLimiter = WarnLimiter::new();

/// The server's own body for `error`: its status line's words, the cause
/// after a colon, and a line end.
pub(crate) fn default_body(error: &ServerError<'_>) -> Bytes {
    Bytes::from(format!("{error}\n"))
}

/// The content type and body of `error`: the hook's, if there is one and
/// its content type can go in a header field, else the server's own.
pub(crate) fn error_body(
    hook: Option<&ErrorHook>,
    error: &ServerError<'_>,
) -> (&'static str, Bytes) {
    if let Some(hook) = hook {
        let (content_type, body) = hook(error);
        if check_header("Content-Type", content_type).is_ok() {
            return (content_type, body);
        }
        if let Some(left_out) = BAD_CONTENT_TYPE.admit() {
            log::warn!(
                "Routes::error_body: content type {content_type:?} cannot be sent, so the \
                 server's text was ({left_out} more since the last report)"
            );
        }
    }
    (TEXT, default_body(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_the_default_body_without_its_line_end() {
        let plain = ServerError::new(404, None);
        assert_eq!(plain.to_string(), "404 Not Found");
        assert_eq!(&default_body(&plain)[..], b"404 Not Found\n");
        let caused = ServerError::new(415, Some("expected application/json"));
        assert_eq!(
            caused.to_string(),
            "415 Unsupported Media Type: expected application/json"
        );
    }

    #[test]
    fn a_hook_answers_unless_its_content_type_is_malformed() {
        let hook: ErrorHook =
            Arc::new(|error| ("application/json", Bytes::from(error.status().to_string())));
        let error = ServerError::new(503, Some("busy"));
        assert_eq!(
            error_body(Some(&hook), &error),
            ("application/json", Bytes::from_static(b"503"))
        );
        let broken: ErrorHook = Arc::new(|_| ("text/plain\r\nX-Evil: 1", Bytes::new()));
        assert_eq!(
            error_body(Some(&broken), &error),
            (TEXT, Bytes::from_static(b"503 Service Unavailable: busy\n"))
        );
        assert_eq!(error_body(None, &error).0, TEXT);
    }
}
