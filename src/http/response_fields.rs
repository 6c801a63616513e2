//! What a route may put in a response: a status a final response can have,
//! and header fields that are well formed and not ones the server writes
//! itself. And the writer for responses whose head is built per request
//! (handler and actor routes), in the same layout as canned responses.

use std::fmt;

use bytes::BytesMut;

use crate::http::head::{reason_phrase, ResponseOut, SERVER_NAME};

/// Header fields the server writes itself: the framing of the body (two
/// `Content-Length`s, or one beside `Transfer-Encoding`, make a response
/// clients must reject, and a way to smuggle one response inside another),
/// and the ones it owns (`Date`, `Server`, and `Connection`, which follows
/// the request).
const RESERVED: [&str; 5] = [
    "content-length",
    "transfer-encoding",
    "date",
    "server",
    "connection",
];

/// Why a response, or a header field of one, was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseError {
    /// A header field the server writes itself (`Content-Length`,
    /// `Transfer-Encoding`, `Date`, `Server`, `Connection`).
    ReservedHeader(String),
    /// A field name that is empty or not an HTTP token.
    InvalidHeaderName(String),
    /// The value of this field has a CR, LF, NUL or other control byte.
    InvalidHeaderValue(String),
    /// Not the status of a final response (200 to 599).
    InvalidStatus(u16),
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseError::ReservedHeader(name) => write!(
                f,
                "the server writes the {name} header of each response itself"
            ),
            ResponseError::InvalidHeaderName(name) => {
                write!(f, "{name:?} is not a valid header field name")
            }
            ResponseError::InvalidHeaderValue(name) => write!(
                f,
                "the value of the {name} header has a control character (CR, LF, NUL ...)"
            ),
            ResponseError::InvalidStatus(code) => {
                write!(
                    f,
                    "{code} is not the status of a final response (200 to 599)"
                )
            }
        }
    }
}

impl std::error::Error for ResponseError {}

/// Checks one header field a route wants to send.
pub(crate) fn check_header(name: &str, value: &str) -> Result<(), ResponseError> {
    if name.is_empty() || !name.bytes().all(is_tchar) {
        return Err(ResponseError::InvalidHeaderName(name.to_string()));
    }
    if RESERVED
        .iter()
        .any(|reserved| name.eq_ignore_ascii_case(reserved))
    {
        return Err(ResponseError::ReservedHeader(name.to_string()));
    }
    // Field values are visible characters, spaces and tabs (RFC 9110 §5.5);
    // bytes past ASCII pass as obs-text.
    let valid = value
        .bytes()
        .all(|b| b == b'\t' || b == b' ' || (b > 0x20 && b != 0x7f));
    if !valid {
        return Err(ResponseError::InvalidHeaderValue(name.to_string()));
    }
    Ok(())
}

/// Checks a route's status: a final response's.
pub(crate) fn check_status(code: u16) -> Result<(), ResponseError> {
    match code {
        200..=599 => Ok(()),
        _ => Err(ResponseError::InvalidStatus(code)),
    }
}

/// The status a route sends for `status`: itself when it is a final
/// response's (200 to 599), else 500. An informational status cannot end
/// a request, and nothing past 599 is HTTP's; either is a bug in the route,
/// which the client should see as the server's fault rather than as a
/// broken connection.
pub(crate) fn final_status(status: ::http::StatusCode) -> u16 {
    let code = status.as_u16();
    match check_status(code) {
        Ok(()) => code,
        Err(_) => 500,
    }
}

/// Header fields every response carries, whatever answers it (`--header`,
/// [`Config::headers`](crate::Config::headers)): HSTS, `nosniff` and the
/// like. Checked once at start, as a route's fields are, and kept as the
/// bytes a head carries after `Date`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AddedFields {
    /// `\r\nName: value` per field.
    lines: Box<[u8]>,
    /// The same with `Alt-Svc` after them, for responses over TLS once
    /// HTTP/3 is served ([`AddedFields::advertise_h3`]).
    secure_lines: Option<Box<[u8]>>,
}

impl AddedFields {
    /// Checks `fields` and keeps them as head bytes. Refuses the fields a
    /// route may not set, and `Content-Type`, which every response has its
    /// own of: two would make it ambiguous.
    pub(crate) fn new(fields: &[(String, String)]) -> Result<AddedFields, ResponseError> {
        let mut lines = Vec::new();
        for (name, value) in fields {
            let value = value.trim_matches([' ', '\t']);
            check_header(name, value)?;
            if name.eq_ignore_ascii_case("content-type") {
                return Err(ResponseError::ReservedHeader(name.clone()));
            }
            lines.extend_from_slice(b"\r\n");
            lines.extend_from_slice(name.as_bytes());
            lines.extend_from_slice(b": ");
            lines.extend_from_slice(value.as_bytes());
        }
        Ok(AddedFields {
            lines: lines.into_boxed_slice(),
            secure_lines: None,
        })
    }

    /// Responses over TLS say that HTTP/3 is served on UDP `port` (RFC
    /// 9114 §3.1.1), for a day, as nginx and Caddy advertise it.
    pub(crate) fn advertise_h3(&mut self, port: u16) {
        let mut lines = self.lines.to_vec();
        lines.extend_from_slice(format!("\r\nAlt-Svc: h3=\":{port}\"; ma=86400").as_bytes());
        self.secure_lines = Some(lines.into_boxed_slice());
    }

    /// The lines, each starting with CRLF.
    pub(crate) fn lines(&self) -> &[u8] {
        &self.lines
    }

    /// The lines a response carries over TLS (`secure`) or not.
    pub(crate) fn lines_for(&self, secure: bool) -> &[u8] {
        match (secure, &self.secure_lines) {
            (true, Some(lines)) => lines,
            _ => &self.lines,
        }
    }
}

/// Appends one checked header field, as a head carries it.
pub(crate) fn put_header(headers: &mut BytesMut, name: &str, value: &str) {
    headers.extend_from_slice(name.as_bytes());
    headers.extend_from_slice(b": ");
    headers.extend_from_slice(value.as_bytes());
    headers.extend_from_slice(b"\r\n");
}

/// Appends a response built per request: the status line, `Server`, the
/// content type if given, the checked `headers` (each line ending CRLF),
/// `Content-Length`, `Date`, `Connection` as `to` asks, and the body unless
/// it answers a HEAD request. A 204 or 304 has neither length nor body
/// (RFC 9110 §8.6, §15.4.5).
pub(crate) fn write_response(
    to: &mut ResponseOut<'_>,
    status: u16,
    content_type: Option<&str>,
    headers: &[u8],
    body: &[u8],
) {
    to.put(b"HTTP/1.1 ");
    to.put_decimal(usize::from(status));
    to.put(b" ");
    to.put(reason_phrase(status).as_bytes());
    to.put(b"\r\nServer: ");
    to.put(SERVER_NAME.as_bytes());
    to.put(b"\r\n");
    if let Some(content_type) = content_type {
        to.put(b"Content-Type: ");
        to.put(content_type.as_bytes());
        to.put(b"\r\n");
    }
    to.put(headers);
    let bodiless = matches!(status, 204 | 304);
    if bodiless {
        // `end_head` starts with the CRLF that ends a header line.
        to.out.truncate(to.out.len() - 2);
    } else {
        to.put(b"Content-Length: ");
        to.put_decimal(body.len());
    }
    to.end_head();
    if !bodiless {
        to.body(body);
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::date::DATE_LEN;
    use crate::http::head::Persistence;

    const DATE: &[u8; DATE_LEN] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    #[test]
    fn refuses_what_the_server_writes_and_what_is_malformed() {
        for name in [
            "Content-Length",
            "transfer-encoding",
            "DATE",
            "Server",
            "Connection",
        ] {
            assert_eq!(
                check_header(name, "1"),
                Err(ResponseError::ReservedHeader(name.to_string()))
            );
        }
        assert!(matches!(
            check_header("", "x"),
            Err(ResponseError::InvalidHeaderName(_))
        ));
        assert!(matches!(
            check_header("A B", "x"),
            Err(ResponseError::InvalidHeaderName(_))
        ));
        for value in ["a\r\nSet-Cookie: x=1", "a\nb", "a\0"] {
            assert_eq!(
                check_header("X-A", value),
                Err(ResponseError::InvalidHeaderValue("X-A".to_string()))
            );
        }
        assert_eq!(check_header("X-A", "v 1\tü"), Ok(()));
        assert_eq!(check_status(101), Err(ResponseError::InvalidStatus(101)));
        assert_eq!(check_status(600), Err(ResponseError::InvalidStatus(600)));
        assert_eq!(check_status(204), Ok(()));
        use ::http::StatusCode;
        assert_eq!(final_status(StatusCode::NO_CONTENT), 204);
        assert_eq!(final_status(StatusCode::CONTINUE), 500);
        assert_eq!(final_status(StatusCode::SWITCHING_PROTOCOLS), 500);
        assert_eq!(final_status(StatusCode::from_u16(599).unwrap()), 599);
        assert_eq!(final_status(StatusCode::from_u16(600).unwrap()), 500);
    }

    #[test]
    fn writes_length_date_and_connection_in_the_canned_layout() {
        let mut headers = BytesMut::new();
        put_header(&mut headers, "X-Id", "7");
        let mut out = BytesMut::new();
        let text = Some("text/plain");
        let mut to = ResponseOut::new(&mut out, DATE, Persistence::Close, false);
        write_response(&mut to, 201, text, &headers, b"hi");
        to.persistence = Persistence::KeepAlive;
        write_response(&mut to, 204, None, b"", b"");
        to.head_only = true;
        write_response(&mut to, 299, None, b"", b"x");
        let expected = "HTTP/1.1 201 Created\r\nServer: uppercut-mio-server\r\n\
            Content-Type: text/plain\r\nX-Id: 7\r\nContent-Length: 2\r\n\
            Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: close\r\n\r\nhi\
            HTTP/1.1 204 No Content\r\nServer: uppercut-mio-server\r\n\
            Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n\
            HTTP/1.1 299 \r\nServer: uppercut-mio-server\r\nContent-Length: 1\r\n\
            Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n";
        assert_eq!(std::str::from_utf8(&out).unwrap(), expected);
    }
}
