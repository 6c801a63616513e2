//! Between an HTTP/2 or HTTP/3 stream's messages and the HTTP/1.1 the routes answer:
//! the request a stream's head and body mean, as HTTP/1.1 bytes a request
//! stream reads; and the response a request stream wrote, as the status,
//! header fields and body an HTTP/2 response carries.
//!
//! What HTTP/2 says another way is said the HTTP/1.1 way: `:authority` is
//! `Host`, several `cookie` fields are one (RFC 9113 §8.2.3), the body's
//! length is a `Content-Length`. What only HTTP/1.1 has is left out of the
//! response: `Connection`, `Keep-Alive`, `Transfer-Encoding`, `Upgrade`
//! (§8.2.2). A request that cannot be said in HTTP/1.1 is refused with the
//! same status an HTTP/1.1 request that broke the same rule gets.

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Response, StatusCode};

/// Header fields an HTTP/1.1 response may carry and an HTTP/2 one must not.
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "upgrade",
    "proxy-connection",
];

/// The most header fields a response of this server carries.
const MAX_RESPONSE_FIELDS: usize = 64;

/// Writes into `out` the HTTP/1.1 request `head` means, with `body` after
/// it, whose length the head gives as `Content-Length`: what the stream's
/// request stream reads.
pub(crate) fn write_request(head: &http::request::Parts, body: &[u8], out: &mut BytesMut) {
    write_fields(head, out);
    if !body.is_empty() || head.headers.contains_key(http::header::CONTENT_LENGTH) {
        out.put_slice(b"content-length: ");
        crate::nats::proto::put_number(out, body.len() as u64);
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"\r\n");
    out.put_slice(body);
}

/// The `Sec-WebSocket-Key` an extended CONNECT is said with: RFC 8441 has
/// no key (the stream is the proof the client asked), and the upgrade the
/// request stream checks needs one; its accept value is never sent.
const EXTENDED_CONNECT_KEY: &[u8] = b"AAAAAAAAAAAAAAAAAAAAAA==";

/// Writes into `out` the HTTP/1.1 upgrade an extended CONNECT for a
/// WebSocket (RFC 8441 §4) means: a `GET` of its `:path` asking to upgrade,
/// with its fields (`Sec-WebSocket-Version`, `-Extensions`, `-Protocol`);
/// a key the client sent anyway is left out, for the one above.
pub(crate) fn write_extended_connect(head: &http::request::Parts, out: &mut BytesMut) {
    write_fields_as("GET", head, out);
    out.put_slice(b"upgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-key: ");
    out.put_slice(EXTENDED_CONNECT_KEY);
    out.put_slice(b"\r\n\r\n");
}

/// Writes into `out` the request line and the fields of the HTTP/1.1
/// request `head` means, but its length: what is left is the
/// `Content-Length` (if any), the blank line and the body.
fn write_fields(head: &http::request::Parts, out: &mut BytesMut) {
    write_fields_as(head.method.as_str(), head, out);
}

/// As [`write_fields`], with `method` for the head's.
fn write_fields_as(method: &str, head: &http::request::Parts, out: &mut BytesMut) {
    out.clear();
    out.put_slice(method.as_bytes());
    out.put_u8(b' ');
    let target = head
        .uri
        .path_and_query()
        .map_or("/", |target| target.as_str());
    // An empty :path (CONNECT, or a malformed request h2 let by) is not a
    // target: the request stream answers it as HTTP/1.1 would.
    out.put_slice(if target.is_empty() { "/" } else { target }.as_bytes());
    out.put_slice(b" HTTP/1.1\r\n");
    let authority = head.uri.authority();
    if let Some(authority) = authority {
        out.put_slice(b"host: ");
        out.put_slice(authority.as_str().as_bytes());
        out.put_slice(b"\r\n");
    }
    let mut cookies = 0;
    for (name, value) in &head.headers {
        match name.as_str() {
            // :authority said it first.
            "host" if authority.is_some() => continue,
            // A body's length is the data's; and no interim response.
            "content-length" | "expect" => continue,
            // HTTP/2 has no key (RFC 8441 §5); an extended CONNECT's is
            // written after the fields.
            "sec-websocket-key" => continue,
            "cookie" => {
                cookies += 1;
                continue;
            }
            _ => {}
        }
        put_field(out, name.as_str(), value.as_bytes());
    }
    if cookies > 0 {
        out.put_slice(b"cookie: ");
        let values = head.headers.get_all(http::header::COOKIE);
        for (at, value) in values.iter().enumerate() {
            if at > 0 {
                out.put_slice(b"; ");
            }
            out.put_slice(value.as_bytes());
        }
        out.put_slice(b"\r\n");
    }
}

/// Writes `name: value` and its line end.
fn put_field(out: &mut BytesMut, name: &str, value: &[u8]) {
    out.put_slice(name.as_bytes());
    out.put_slice(b": ");
    out.put_slice(value);
    out.put_slice(b"\r\n");
}

/// The head of an HTTP/1.1 request of `head` whose body is `declared`
/// bytes: for a body refused before it all came (past the largest body),
/// which the request stream answers from the head alone.
pub(crate) fn write_request_head(head: &http::request::Parts, declared: u64, out: &mut BytesMut) {
    // The length the body would have had, whatever the head said of it.
    write_fields(head, out);
    out.put_slice(b"content-length: ");
    crate::nats::proto::put_number(out, declared);
    out.put_slice(b"\r\n\r\n");
}

/// An HTTP/1.1 response the request stream wrote, as HTTP/2 sends it.
#[derive(Debug)]
pub(crate) struct Converted {
    pub(crate) head: Response<()>,
    pub(crate) body: Bytes,
}

/// What a request stream wrote that is not one whole response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotAResponse;

/// Reads the first response in `written` (an interim `100 Continue` is
/// skipped): its status, its fields but the connection-specific ones, and
/// its body. `head_only` for a `HEAD` request, whose response has no body
/// whatever its `Content-Length` says.
pub(crate) fn read_response(written: Bytes, head_only: bool) -> Result<Converted, NotAResponse> {
    let mut written = written;
    loop {
        let mut fields = [httparse::EMPTY_HEADER; MAX_RESPONSE_FIELDS];
        let mut parsed = httparse::Response::new(&mut fields);
        let head_len = match parsed.parse(&written) {
            Ok(httparse::Status::Complete(len)) => len,
            _ => return Err(NotAResponse),
        };
        let status = parsed.code.ok_or(NotAResponse)?;
        if status == 100 {
            written = written.slice(head_len..);
            continue;
        }
        let status = StatusCode::from_u16(status).map_err(|_| NotAResponse)?;
        let mut headers = HeaderMap::with_capacity(parsed.headers.len());
        let mut length = None;
        for field in parsed.headers.iter() {
            let name = field.name;
            if CONNECTION_SPECIFIC
                .iter()
                .any(|specific| name.eq_ignore_ascii_case(specific))
            {
                continue;
            }
            if name.eq_ignore_ascii_case("content-length") {
                length = std::str::from_utf8(field.value)
                    .ok()
                    .and_then(|n| n.parse::<usize>().ok());
            }
            // Lower-cased by `http` as it reads it; a known name costs no
            // allocation.
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| NotAResponse)?;
            // The value shares the response's bytes rather than copying
            // them.
            let at = field.value.as_ptr() as usize - written.as_ptr() as usize;
            let shared = written.slice(at..at + field.value.len());
            let value = HeaderValue::from_maybe_shared(shared).map_err(|_| NotAResponse)?;
            headers.append(name, value);
        }
        let body_len = match (head_only, status.as_u16()) {
            (true, _) | (_, 204 | 304) => 0,
            _ => length.unwrap_or(written.len() - head_len),
        };
        if written.len() < head_len + body_len {
            return Err(NotAResponse);
        }
        let body = written.slice(head_len..head_len + body_len);
        let mut head = Response::new(());
        *head.status_mut() = status;
        *head.headers_mut() = headers;
        return Ok(Converted { head, body });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(request: http::Request<()>) -> http::request::Parts {
        request.into_parts().0
    }

    #[test]
    fn a_stream_is_the_http11_request_it_means() {
        let request = http::Request::builder()
            .method("POST")
            .uri("https://example.com:8443/users/7?full=1")
            .header("cookie", "a=1")
            .header("accept", "*/*")
            .header("cookie", "b=2")
            .header("host", "ignored.example")
            .header("expect", "100-continue")
            .body(())
            .unwrap();
        let mut out = BytesMut::new();
        write_request(&head(request), b"{}", &mut out);
        assert_eq!(
            &out[..],
            b"POST /users/7?full=1 HTTP/1.1\r\nhost: example.com:8443\r\naccept: */*\r\n\
              cookie: a=1; b=2\r\ncontent-length: 2\r\n\r\n{}"
        );
        let request = http::Request::builder().uri("/").body(()).unwrap();
        write_request(&head(request), b"", &mut out);
        assert_eq!(&out[..], b"GET / HTTP/1.1\r\n\r\n");
        let request = http::Request::builder()
            .method("PUT")
            .uri("http://a/up")
            .body(())
            .unwrap();
        write_request_head(&head(request), 5_000_000, &mut out);
        assert_eq!(
            &out[..],
            b"PUT /up HTTP/1.1\r\nhost: a\r\ncontent-length: 5000000\r\n\r\n"
        );
        // A head that gave its length says it once.
        let request = http::Request::builder()
            .method("PUT")
            .uri("http://a/up")
            .header("content-length", "5000000")
            .body(())
            .unwrap();
        write_request_head(&head(request), 5_000_000, &mut out);
        assert_eq!(
            &out[..],
            b"PUT /up HTTP/1.1\r\nhost: a\r\ncontent-length: 5000000\r\n\r\n"
        );
    }

    /// An extended CONNECT is the upgrade it means: a GET of its path, its
    /// fields but a key of its own, then the upgrade's fields and the key
    /// the handshake's check wants.
    #[test]
    fn an_extended_connect_is_the_upgrade_it_means() {
        let request = http::Request::builder()
            .method("CONNECT")
            .uri("https://example.com/chat?room=1")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
            .header("sec-websocket-extensions", "permessage-deflate")
            .header("content-length", "0")
            .body(())
            .unwrap();
        let mut out = BytesMut::from(&b"left over"[..]);
        write_extended_connect(&head(request), &mut out);
        assert_eq!(
            &out[..],
            b"GET /chat?room=1 HTTP/1.1\r\nhost: example.com\r\nsec-websocket-version: 13\r\n\
              sec-websocket-extensions: permessage-deflate\r\nupgrade: websocket\r\n\
              connection: upgrade\r\nsec-websocket-key: AAAAAAAAAAAAAAAAAAAAAA==\r\n\r\n"
        );
    }

    #[test]
    fn a_response_is_said_the_http2_way() {
        let written = Bytes::from_static(
            b"HTTP/1.1 200 OK\r\nServer: s\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\
              Date: d\r\nConnection: close\r\n\r\nhello",
        );
        let converted = read_response(written.clone(), false).unwrap();
        assert_eq!(converted.head.status(), 200);
        let names: Vec<&str> = converted
            .head
            .headers()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(names, ["server", "content-type", "content-length", "date"]);
        assert_eq!(&converted.body[..], b"hello");
        let head_only = read_response(written.slice(..written.len() - 5), true).unwrap();
        assert!(head_only.body.is_empty());
        assert_eq!(head_only.head.headers()["content-length"], "5");
        let interim = Bytes::from_static(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n",
        );
        assert_eq!(read_response(interim, false).unwrap().head.status(), 413);
        assert_eq!(
            read_response(Bytes::from_static(b"HTTP/1.1 200"), false).unwrap_err(),
            NotAResponse
        );
        let short = Bytes::from_static(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhi");
        assert_eq!(read_response(short, false).unwrap_err(), NotAResponse);
    }
}
