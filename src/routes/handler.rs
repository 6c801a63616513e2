//! Handler routes: a function of the request writes the response, in the
//! connection actor, into buffers kept per thread, so a small response
//! allocates nothing once the thread has served one.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;

use crate::http::head::ResponseOut;
use http::StatusCode;

use crate::http::error_body::{error_body, ErrorHook, ServerError};
use crate::http::response_fields::{
    check_header, check_status, final_status, put_header, write_response, ResponseError,
};
use crate::routes::actor_response::ActorResponse;
use crate::routes::request::Request;
use crate::routes::typed::Rejection;

/// The function behind a handler route.
pub(crate) type Handler = Arc<dyn Fn(&Request<'_>, &mut Response<'_>) + Send + Sync>;

thread_local! {
    /// A handler's header fields and body, until the head can be written.
    static SCRATCH: RefCell<(BytesMut, BytesMut)> = RefCell::new((BytesMut::new(), BytesMut::new()));
}

/// What a handler writes: a status (200 unless set), header fields and a
/// body. The server adds `Server`, `Content-Length`, `Date` and
/// `Connection`, and leaves the body out for HEAD.
pub struct Response<'a> {
    status: u16,
    /// Set by [`Response::json`].
    content_type: Option<&'static str>,
    headers: &'a mut BytesMut,
    body: &'a mut BytesMut,
    /// Set by [`Response::reject`]: the response is this error's.
    rejection: Option<Rejection>,
}

impl<'a> Response<'a> {
    fn new(headers: &'a mut BytesMut, body: &'a mut BytesMut) -> Response<'a> {
        // Whatever a handler that panicked left here is not this one's.
        headers.clear();
        body.clear();
        Response {
            status: 200,
            content_type: None,
            headers,
            body,
            rejection: None,
        }
    }

    /// Sets the status: `response.set_status(StatusCode::NOT_FOUND)`; 204
    /// and 304 are sent without a body. A status that is not a final
    /// response's (an informational 1xx, or one past 599) is sent as 500
    /// Internal Server Error; [`Response::try_set_status`] refuses it
    /// instead.
    pub fn set_status(&mut self, status: StatusCode) {
        self.status = final_status(status);
    }

    /// Sets the status `code`, a number from elsewhere: one that is not a
    /// final response's (200 to 599) is refused, and the status stays.
    pub fn try_set_status(&mut self, code: u16) -> Result<(), ResponseError> {
        check_status(code)?;
        self.status = code;
        Ok(())
    }

    /// Adds a header field; one the server writes itself, or a malformed
    /// one, is refused and not sent.
    pub fn header(&mut self, name: &str, value: &str) -> Result<(), ResponseError> {
        check_header(name, value)?;
        put_header(self.headers, name, value);
        Ok(())
    }

    /// Appends to the body.
    pub fn body(&mut self, bytes: &[u8]) {
        self.body.extend_from_slice(bytes);
    }

    /// Makes the body `value` as JSON (serde_json), replacing what was
    /// written of it, with `Content-Type: application/json`; the status
    /// stays what it is. A value serde cannot write as JSON (a map whose
    /// keys are not strings) answers 500 Internal Server Error instead,
    /// saying why, as [`Response::reject`] would.
    ///
    /// ```
    /// use serde::Serialize;
    /// use uppercut_mio_server::{Method, Routes};
    ///
    /// #[derive(Serialize)]
    /// struct Status {
    ///     healthy: bool,
    ///     version: &'static str,
    /// }
    ///
    /// let routes = Routes::new().handler(&[Method::Get], "/status", |_, response| {
    ///     response.json(&Status { healthy: true, version: "1.2" });
    /// });
    /// ```
    pub fn json<T: Serialize + ?Sized>(&mut self, value: &T) {
        self.body.clear();
        match serde_json::to_writer((&mut *self.body).writer(), value) {
            Ok(()) => self.content_type = Some("application/json"),
            Err(e) => self.reject(Rejection::new(500, format!("JSON response: {e}"))),
        }
    }

    /// Answers with `rejection` (from [`Request::json`] and its kin, or
    /// made with [`Rejection::new`]): its status, and the error body the
    /// application chose for it ([`Routes::error_body`](crate::Routes::error_body)),
    /// else the server's text, `415 Unsupported Media Type: expected ...`.
    /// The status, fields and body written before are dropped, and a body
    /// written after; fields added after are sent (a `WWW-Authenticate`
    /// with a 401).
    pub fn reject(&mut self, rejection: Rejection) {
        self.headers.clear();
        self.body.clear();
        self.content_type = None;
        self.rejection = Some(rejection);
    }
}

impl<'a> Response<'a> {
    /// Lends a response in this thread's scratch buffers, emptied, to
    /// `use_it`: a middleware's early answer. Not while a handler runs on
    /// this thread (the buffers are its).
    pub(crate) fn with_scratch<R>(use_it: impl FnOnce(Response<'_>) -> R) -> R {
        SCRATCH.with(|scratch| {
            let (headers, body) = &mut *scratch.borrow_mut();
            headers.clear();
            body.clear();
            use_it(Response::new(headers, body))
        })
    }

    /// Starts over as a response of `status`, or 500 for a status a final
    /// response cannot have.
    pub(crate) fn restart(&mut self, status: u16) {
        self.headers.clear();
        self.body.clear();
        self.content_type = None;
        self.rejection = None;
        self.status = match check_status(status) {
            Ok(()) => status,
            Err(_) => 500,
        };
    }

    /// Appends the response to `to` (a rejection with the server's own
    /// error body).
    pub(crate) fn write(&self, to: &mut ResponseOut<'_>) {
        match &self.rejection {
            None => write_response(to, self.status, self.content_type, self.headers, self.body),
            Some(rejection) => {
                let error = ServerError::new(rejection.status(), Some(rejection.cause()));
                let (content_type, body) = error_body(None, &error);
                write_response(to, error.status(), Some(content_type), self.headers, &body);
            }
        }
    }
}

/// `write!` appends formatted text to the body, without allocating.
impl fmt::Write for Response<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.body(s.as_bytes());
        Ok(())
    }
}

impl fmt::Debug for Response<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// Runs `handler` on `request` and appends its response to `out`, with
/// the body `errors` gives a rejection; returns the status.
pub(crate) fn respond(
    handler: &Handler,
    request: &Request<'_>,
    to: &mut ResponseOut<'_>,
    errors: Option<&ErrorHook>,
) -> u16 {
    SCRATCH.with(|scratch| {
        let (headers, body) = &mut *scratch.borrow_mut();
        let mut response = Response::new(headers, body);
        handler(request, &mut response);
        let Response {
            status,
            content_type,
            rejection,
            ..
        } = response;
        match rejection {
            None => {
                write_response(to, status, content_type, headers, body);
                status
            }
            Some(rejection) => {
                let error = ServerError::new(rejection.status(), Some(rejection.cause()));
                let (content_type, body) = error_body(errors, &error);
                write_response(to, error.status(), Some(content_type), headers, &body);
                error.status()
            }
        }
    })
}

/// Runs `handler` on `request` into a response of its own: for a blocking
/// handler, which runs on a thread with no connection to write into. A
/// rejection's body is chosen where the answer is written.
pub(crate) fn respond_owned(handler: &Handler, request: &Request<'_>) -> ActorResponse {
    SCRATCH.with(|scratch| {
        let (headers, body) = &mut *scratch.borrow_mut();
        let mut response = Response::new(headers, body);
        handler(request, &mut response);
        let Response {
            status,
            content_type,
            rejection,
            ..
        } = response;
        let headers = Bytes::copy_from_slice(headers);
        match rejection {
            None => {
                ActorResponse::written(status, content_type, headers, Bytes::copy_from_slice(body))
            }
            Some(rejection) => ActorResponse::rejection(rejection).with_checked_headers(headers),
        }
    })
}
