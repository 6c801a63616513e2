//! An actor's answer to an actor route's request: a status, header fields
//! and a body, which the connection frames as it frames every response.

use bytes::{Bytes, BytesMut};

use crate::http::response_fields::{check_header, check_status, put_header, ResponseError};

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
}

impl ActorResponse {
    /// A response with this status (200 to 599), no header fields and no
    /// body.
    pub fn new(status: u16) -> Result<ActorResponse, ResponseError> {
        check_status(status)?;
        Ok(ActorResponse {
            status,
            content_type: None,
            headers: Bytes::new(),
            body: Bytes::new(),
            node: None,
        })
    }

    /// A 200 response with a `text/plain; charset=utf-8` body.
    pub fn text(body: impl Into<Bytes>) -> ActorResponse {
        ActorResponse::typed(200, "text/plain; charset=utf-8", body.into())
    }

    /// A 200 response with an `application/json` body.
    pub fn json(body: impl Into<Bytes>) -> ActorResponse {
        ActorResponse::typed(200, "application/json", body.into())
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
        }
    }

    /// A handler's response: a checked status, checked header lines.
    pub(crate) fn written(status: u16, headers: Bytes, body: Bytes) -> ActorResponse {
        ActorResponse {
            status,
            content_type: None,
            headers,
            body,
            node: None,
        }
    }

    /// The same response with another status (200 to 599).
    pub fn with_status(mut self, status: u16) -> Result<ActorResponse, ResponseError> {
        check_status(status)?;
        self.status = status;
        Ok(self)
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

    /// The same response with this body.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> ActorResponse {
        self.body = body.into();
        self
    }
}
