//! Handler routes: a function of the request writes the response, in the
//! connection actor, into buffers kept per thread, so a small response
//! allocates nothing once the thread has served one.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::http::head::ResponseOut;
use http::StatusCode;

use crate::http::response_fields::{
    check_header, check_status, final_status, put_header, write_response, ResponseError,
};
use crate::routes::actor_response::ActorResponse;
use crate::routes::request::Request;

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
    headers: &'a mut BytesMut,
    body: &'a mut BytesMut,
}

impl Response<'_> {
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

/// Runs `handler` on `request` and appends its response to `out`; returns
/// the status.
pub(crate) fn respond(handler: &Handler, request: &Request<'_>, to: &mut ResponseOut<'_>) -> u16 {
    SCRATCH.with(|scratch| {
        let (headers, body) = &mut *scratch.borrow_mut();
        // Whatever a handler that panicked left here is not this one's.
        headers.clear();
        body.clear();
        let mut response = Response {
            status: 200,
            headers,
            body,
        };
        handler(request, &mut response);
        let status = response.status;
        write_response(to, status, None, headers, body);
        status
    })
}

/// Runs `handler` on `request` into a response of its own: for a blocking
/// handler, which runs on a thread with no connection to write into.
pub(crate) fn respond_owned(handler: &Handler, request: &Request<'_>) -> ActorResponse {
    SCRATCH.with(|scratch| {
        let (headers, body) = &mut *scratch.borrow_mut();
        headers.clear();
        body.clear();
        let mut response = Response {
            status: 200,
            headers,
            body,
        };
        handler(request, &mut response);
        let status = response.status;
        ActorResponse::written(
            status,
            Bytes::copy_from_slice(headers),
            Bytes::copy_from_slice(body),
        )
    })
}
