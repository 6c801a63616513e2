//! An actor's answer to an actor route's request: a status, header fields
//! and a body, which the connection frames as it frames every response.

use bytes::{Bytes, BytesMut};
use http::StatusCode;

use crate::http::response_fields::{
    check_header, check_status, final_status, put_header, ResponseError,
};

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

    /// The same response with another status, as [`ActorResponse::new`]
    /// takes it (a status that is not a final response's is sent as 500).
    pub fn with_status(mut self, status: StatusCode) -> ActorResponse {
        self.status = final_status(status);
        self
    }

    /// The same response with the status `code`, a number from elsewhere
    /// (another service's answer, a table): one that is not a final
    /// response's (200 to 599) is refused.
    pub fn try_with_status(mut self, code: u16) -> Result<ActorResponse, ResponseError> {
        check_status(code)?;
        self.status = code;
        Ok(self)
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

    /// The same response with this body.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> ActorResponse {
        self.body = body.into();
        self
    }
}
