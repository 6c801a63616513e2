//! Canned responses: every byte of a response but its `Date` value, built once
//! at start into `Bytes`, and copied into a connection's output with the date
//! and the `Connection` header the exchange needs. Nothing is formatted per request.

use bytes::{BufMut, Bytes, BytesMut};

pub(crate) use crate::http::head::Persistence;
use crate::http::head::{status_of, ResponseOut, SERVER_NAME};
pub use crate::http::response_fields::ResponseError;
use crate::http::response_fields::{check_header, check_status};

/// The interim response a client sending `Expect: 100-continue` waits for.
pub(crate) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// A complete response, but for its `Date` value and `Connection` header.
#[derive(Debug, Clone)]
pub struct CannedResponse {
    /// Status line and headers, ending with `Date: ` so the date goes last.
    head: Bytes,
    body: Bytes,
}

impl CannedResponse {
    /// Builds a response; `Server`, `Content-Length`, `Date` and, as the
    /// request needs it, `Connection` are added here.
    ///
    /// # Panics
    /// On a header the server writes itself, a malformed header, or a
    /// status that is not a final response's: see [`CannedResponse::try_new`],
    /// which returns the error instead.
    pub fn new(status: u16, reason: &str, headers: &[(&str, &str)], body: Bytes) -> Self {
        match CannedResponse::try_new(status, reason, headers, body) {
            Ok(response) => response,
            Err(e) => panic!("CannedResponse::new: {e}"),
        }
    }

    /// Builds a response as [`CannedResponse::new`] does, or says why not.
    pub fn try_new(
        status: u16,
        reason: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Self, ResponseError> {
        check_status(status)?;
        if reason.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(ResponseError::InvalidStatus(status));
        }
        for (name, value) in headers {
            check_header(name, value)?;
        }
        let length = body.len().to_string();
        let mut headers = headers.to_vec();
        headers.push(("Content-Length", &length));
        Ok(CannedResponse::with_exact_headers(
            status, reason, &headers, body,
        ))
    }

    /// A 304 Not Modified with these headers besides `Server` and `Date`.
    /// It has no body, and no `Content-Length` either: RFC 9110 §15.4.5 asks
    /// a 304 to leave out representation metadata that does not help a cache
    /// update its copy, and a length on a bodiless response is one more thing
    /// for a client or intermediary to misread as framing.
    pub fn not_modified(headers: &[(&str, &str)]) -> Self {
        CannedResponse::with_exact_headers(304, "Not Modified", headers, Bytes::new())
    }

    /// The response with `Server`, then `headers`, then `Date`, and nothing else.
    fn with_exact_headers(
        status: u16,
        reason: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Self {
        let mut head = BytesMut::with_capacity(256);
        head.put_slice(format!("HTTP/1.1 {status} {reason}\r\n").as_bytes());
        head.put_slice(format!("Server: {SERVER_NAME}\r\n").as_bytes());
        for (name, value) in headers {
            head.put_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        head.put_slice(b"Date: ");
        CannedResponse {
            head: head.freeze(),
            body,
        }
    }

    /// A 200 response with this content type and body.
    ///
    /// # Panics
    /// On a content type with a control character.
    pub fn ok(content_type: &str, body: impl Into<Bytes>) -> Self {
        CannedResponse::new(200, "OK", &[("Content-Type", content_type)], body.into())
    }

    /// The status code, read back from the status line built in `new`.
    pub fn status(&self) -> u16 {
        status_of(&self.head)
    }

    /// The length of the body a GET gets.
    pub fn body_len(&self) -> usize {
        self.body.len()
    }

    /// Appends the response: the head with the date and the `Connection`
    /// header `to` asks for, and the body unless it answers a HEAD request.
    pub(crate) fn write(&self, to: &mut ResponseOut<'_>) {
        to.put(&self.head);
        to.put_date_and_end();
        to.body(&self.body);
    }
}

/// The status and body length of one response just written whole.
pub(crate) fn status_and_body_len(response: &[u8]) -> (u16, usize) {
    let head_len = response
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .map_or(response.len(), |end| end + 4);
    (status_of(response), response.len() - head_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &[u8; crate::http::date::DATE_LEN] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    #[test]
    fn writes_head_date_and_persistence() {
        let response = CannedResponse::ok("text/plain", "hi");
        let mut out = BytesMut::new();
        response.write(&mut ResponseOut::new(
            &mut out,
            DATE,
            Persistence::Close,
            false,
        ));
        let http10 = Persistence::KeepAliveHttp10;
        response.write(&mut ResponseOut::new(&mut out, DATE, http10, true));
        let expected = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: text/plain\r\n\
            Content-Length: 2\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: close\r\n\r\nhi\
            HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: text/plain\r\n\
            Content-Length: 2\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: keep-alive\r\n\r\n";
        assert_eq!(std::str::from_utf8(&out).unwrap(), expected);
    }

    #[test]
    fn not_modified_has_neither_body_nor_length() {
        let response = CannedResponse::not_modified(&[("ETag", "\"1\"")]);
        let mut out = BytesMut::new();
        response.write(&mut ResponseOut::new(
            &mut out,
            DATE,
            Persistence::KeepAlive,
            false,
        ));
        let expected =
            "HTTP/1.1 304 Not Modified\r\nServer: uppercut-mio-server\r\nETag: \"1\"\r\n\
            Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n";
        assert_eq!(std::str::from_utf8(&out).unwrap(), expected);
    }
}
