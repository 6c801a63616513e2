//! The responses of static files that depend on the request: a 206 for one
//! byte range, and the 301 that adds the missing `/` to a directory's path
//! and keeps the query. Everything but the per-request values is built once
//! per load; the head is finished the way the upstream's responses are.

use bytes::Bytes;

use crate::http::head::{ResponseOut, SERVER_NAME};

/// A 206 for one byte range of a file: everything up to the `Content-Range`
/// value is built once; the range and its length are written per request,
/// and the body is copied into the output straight from the file's canned
/// bytes, as a full response's is.
#[derive(Debug, Clone)]
pub(crate) struct PartialResponse {
    /// Status line and headers, ending with `Content-Range: bytes `.
    head: Bytes,
}

impl PartialResponse {
    /// A 206 with `Server`, then `headers`, then `Content-Range`,
    /// `Content-Length` and `Date`.
    pub(crate) fn new(headers: &[(&str, &str)]) -> PartialResponse {
        let mut head = format!("HTTP/1.1 206 Partial Content\r\nServer: {SERVER_NAME}\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("Content-Range: bytes ");
        PartialResponse {
            head: Bytes::from(head),
        }
    }

    /// Appends the response carrying `content[first..=last]`; the caller has
    /// checked that `first <= last < content.len()`.
    pub(crate) fn write(
        &self,
        to: &mut ResponseOut<'_>,
        content: &[u8],
        first: usize,
        last: usize,
    ) {
        let part = &content[first..=last];
        to.put(&self.head);
        to.put_decimal(first);
        to.put(b"-");
        to.put_decimal(last);
        to.put(b"/");
        to.put_decimal(content.len());
        to.put(b"\r\nContent-Length: ");
        to.put_decimal(part.len());
        to.end_head();
        to.body(part);
    }
}

/// The short body of a redirect.
const MOVED_BODY: &[u8] = b"301 Moved Permanently\n";

/// A 301 to a fixed path, to which the request's query is appended, so the
/// `Location` keeps what the client asked for.
#[derive(Debug, Clone)]
pub(crate) struct RedirectResponse {
    /// Status line and headers, ending with the `Location` path.
    head: Bytes,
}

impl RedirectResponse {
    /// A redirect to the path `location`, percent-encoded here where a
    /// `Location` value needs it (RFC 3986 §3.3).
    pub(crate) fn new(location: &[u8]) -> RedirectResponse {
        let mut head = format!(
            "HTTP/1.1 301 Moved Permanently\r\nServer: {SERVER_NAME}\r\n\
             Content-Type: text/plain; charset=utf-8\r\nLocation: "
        );
        for &byte in location {
            if byte.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&byte) {
                head.push(char::from(byte));
            } else {
                head.push_str(&format!("%{byte:02X}"));
            }
        }
        RedirectResponse {
            head: Bytes::from(head),
        }
    }

    /// Appends the redirect, its `Location` followed by `?query` when the
    /// query is not empty. The query comes from a request head that httparse
    /// accepted, so it holds no control character that could end the header.
    pub(crate) fn write(&self, to: &mut ResponseOut<'_>, query: &[u8]) {
        to.put(&self.head);
        if !query.is_empty() {
            to.put(b"?");
            to.put(query);
        }
        to.put(b"\r\nContent-Length: ");
        to.put_decimal(MOVED_BODY.len());
        to.end_head();
        to.body(MOVED_BODY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::head::Persistence;
    use bytes::BytesMut;

    #[test]
    fn writes_a_range_and_a_redirect() {
        let date = b"Sun, 06 Nov 1994 08:49:37 GMT";
        let mut out = BytesMut::new();
        let mut to = ResponseOut::new(&mut out, date, Persistence::KeepAlive, false);
        let partial = PartialResponse::new(&[("Accept-Ranges", "bytes")]);
        partial.write(&mut to, b"0123456789", 2, 4);
        let redirect = RedirectResponse::new("/a b%/é/".as_bytes());
        to.persistence = Persistence::Close;
        redirect.write(&mut to, b"x=1");
        (to.persistence, to.head_only) = (Persistence::KeepAlive, true);
        redirect.write(&mut to, b"");
        let expected = "HTTP/1.1 206 Partial Content\r\nServer: uppercut-mio-server\r\n\
            Accept-Ranges: bytes\r\nContent-Range: bytes 2-4/10\r\nContent-Length: 3\r\n\
            Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n234\
            HTTP/1.1 301 Moved Permanently\r\nServer: uppercut-mio-server\r\n\
            Content-Type: text/plain; charset=utf-8\r\nLocation: /a%20b%25/%C3%A9/?x=1\r\n\
            Content-Length: 22\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
            Connection: close\r\n\r\n301 Moved Permanently\n\
            HTTP/1.1 301 Moved Permanently\r\nServer: uppercut-mio-server\r\n\
            Content-Type: text/plain; charset=utf-8\r\nLocation: /a%20b%25/%C3%A9/\r\n\
            Content-Length: 22\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n";
        assert_eq!(std::str::from_utf8(&out).unwrap(), expected);
    }
}
