//! An actor's answer to an actor route's request: a status, header fields
//! and a body, which the connection frames as it frames every response.

use bytes::{BufMut, Bytes, BytesMut};
use http::StatusCode;
use serde::Serialize;

use crate::http::error_body::{default_body, ServerError, TEXT};
use crate::http::response_fields::{
    check_header, check_status, final_status, put_header, ResponseError,
};
use crate::routes::typed::Rejection;

/// An actor's answer to an [`ActorRequest`](crate::ActorRequest): a status, header fields and a
/// body. The server adds `Server`, `Content-Length`, `Date` and
/// `Connection`.
///
/// Cloning one shares its bytes, so an actor that answers with the same
/// response every time can build it once and send clones, allocating
/// nothing per request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorResponse {
    pub(crate) status: u16,
    pub(crate) content_type: Option<&'static str>,
    /// Checked header lines, each ending CRLF.
    pub(crate) headers: Bytes,
    pub(crate) body: Bytes,
    /// The node that gave it, when that was another server (for the access
    /// log).
    pub(crate) node: Option<Bytes>,
    /// An error the server or a route's rejection made: the body is the
    /// server's text, `CODE REASON: cause`, which the connection replaces
    /// with the application's error body if it has chosen one. (A flag, so
    /// that an answer stays small enough to move around cheaply: the cause
    /// is read back from the text.)
    pub(crate) error_text: bool,
}

impl ActorResponse {
    /// A response with this status, no header fields and no body:
    /// `ActorResponse::new(StatusCode::CREATED)`. A status that is not a
    /// final response's (an informational 1xx, or one past 599) is sent as
    /// 500 Internal Server Error; [`ActorResponse::try_with_status`] refuses
    /// it instead.
    pub fn new(status: StatusCode) -> ActorResponse {
        ActorResponse {
            status: final_status(status),
            content_type: None,
            headers: Bytes::new(),
            body: Bytes::new(),
            node: None,
            error_text: false,
        }
    }

    /// A 200 response with a `text/plain; charset=utf-8` body.
    pub fn text(body: impl Into<Bytes>) -> ActorResponse {
        ActorResponse::typed(200, "text/plain; charset=utf-8", body.into())
    }

    /// A 200 response with an `application/json` body.
    pub fn json(body: impl Into<Bytes>) -> ActorResponse {
        ActorResponse::typed(200, "application/json", body.into())
    }

    /// A 200 response whose body is `value` as JSON (serde_json), with
    /// `Content-Type: application/json`. A value serde cannot write as JSON
    /// (a map whose keys are not strings) answers 500 Internal Server Error
    /// instead, saying why, as a [`Rejection`] would.
    ///
    /// ```
    /// use serde::Serialize;
    /// use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
    /// use uppercut_mio_server::{ActorRequest, ActorResponse};
    ///
    /// #[derive(Serialize)]
    /// struct Count {
    ///     count: u64,
    /// }
    ///
    /// struct Counter(u64);
    ///
    /// impl AnyActor for Counter {
    ///     fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
    ///         if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
    ///             self.0 += 1;
    ///             request.respond(ActorResponse::json_value(&Count { count: self.0 }));
    ///         }
    ///     }
    /// }
    /// ```
    pub fn json_value<T: Serialize + ?Sized>(value: &T) -> ActorResponse {
        let mut body = BytesMut::new().writer();
        match serde_json::to_writer(&mut body, value) {
            Ok(()) => ActorResponse::json(body.into_inner().freeze()),
            Err(e) => ActorResponse::rejection(Rejection::new(500, format!("JSON response: {e}"))),
        }
    }

    /// The answer that refuses the request with `rejection`: its status,
    /// and the error body the application chose for it
    /// ([`Routes::error_body`](crate::Routes::error_body)), else the
    /// server's text, `404 Not Found: cause`.
    pub fn rejection(rejection: Rejection) -> ActorResponse {
        ActorResponse::failure(rejection.status(), rejection.cause())
    }

    /// An error the server gives, or a rejection: `status` (400 to 599)
    /// and why, in the server's text unless the application chose a body.
    pub(crate) fn failure(status: u16, cause: &str) -> ActorResponse {
        let body = default_body(&ServerError::new(status, Some(cause)));
        ActorResponse {
            error_text: true,
            ..ActorResponse::typed(status, TEXT, body)
        }
    }

    /// An error's text (`CODE REASON: cause`) that another server sent:
    /// it reads as one the server made here.
    pub(crate) fn from_error_text(status: u16, body: Bytes) -> ActorResponse {
        ActorResponse {
            error_text: status >= 400,
            ..ActorResponse::typed(status, TEXT, body)
        }
    }

    /// The cause of an error the server or a rejection made, read back
    /// from its text.
    pub(crate) fn cause(&self) -> Option<&str> {
        if !self.error_text {
            return None;
        }
        let text = std::str::from_utf8(&self.body).ok()?;
        // Neither the code nor a reason phrase has a colon.
        let (_, cause) = text.split_once(": ")?;
        Some(cause.strip_suffix('\n').unwrap_or(cause))
    }

    /// A response the server builds itself, whose status is known to be a
    /// final response's.
    pub(crate) fn typed(status: u16, content_type: &'static str, body: Bytes) -> ActorResponse {
        ActorResponse {
            status,
            content_type: Some(content_type),
            headers: Bytes::new(),
            body,
            node: None,
            error_text: false,
        }
    }

    /// A handler's response: a checked status, checked header lines.
    pub(crate) fn written(
        status: u16,
        content_type: Option<&'static str>,
        headers: Bytes,
        body: Bytes,
    ) -> ActorResponse {
        ActorResponse {
            status,
            content_type,
            headers,
            body,
            node: None,
            error_text: false,
        }
    }

    /// The same response with these checked header lines instead.
    pub(crate) fn with_checked_headers(mut self, headers: Bytes) -> ActorResponse {
        self.headers = headers;
        self
    }

    /// The same response with another status, as [`ActorResponse::new`]
    /// takes it (a status that is not a final response's is sent as 500).
    /// A rejection's text says the new status.
    pub fn with_status(mut self, status: StatusCode) -> ActorResponse {
        self.set_code(final_status(status));
        self
    }

    /// The same response with the status `code`, a number from elsewhere
    /// (another service's answer, a table): one that is not a final
    /// response's (200 to 599) is refused.
    pub fn try_with_status(mut self, code: u16) -> Result<ActorResponse, ResponseError> {
        check_status(code)?;
        self.set_code(code);
        Ok(self)
    }

    /// Sets the status; a rejection's text follows it.
    fn set_code(&mut self, status: u16) {
        self.status = status;
        if let Some(cause) = self.cause() {
            self.body = default_body(&ServerError::new(status, Some(cause)));
        }
    }

    /// The status it carries.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The same response with one more header field; one the server writes
    /// itself, or a malformed one, is refused.
    pub fn with_header(mut self, name: &str, value: &str) -> Result<ActorResponse, ResponseError> {
        check_header(name, value)?;
        let mut headers = BytesMut::from(&self.headers[..]);
        put_header(&mut headers, name, value);
        self.headers = headers.freeze();
        Ok(self)
    }

    /// The same response with this body (a rejection's becomes this
    /// body, which no error body replaces).
    pub fn with_body(mut self, body: impl Into<Bytes>) -> ActorResponse {
        self.body = body.into();
        self.error_text = false;
        self
    }
}

impl From<Rejection> for ActorResponse {
    fn from(rejection: Rejection) -> ActorResponse {
        ActorResponse::rejection(rejection)
    }
}
