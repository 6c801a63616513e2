//! Request heads: httparse over the caller's bytes, the request line's
//! version and target, then the rules on the header fields ([`crate::http::headers`])
//! and the limits. Nothing here allocates; a parsed head borrows the caller's
//! buffer.

use std::mem::MaybeUninit;

pub(crate) use crate::http::framing::{list_items, BodyFraming, MAX_BODY_LEN};
use crate::http::headers::read_headers;
pub(crate) use crate::http::method::Method;
use crate::http::status::ErrorStatus;
use crate::http::target::{parse_target, TargetForm};
use crate::http::version::{version_line, VersionLine};

/// Largest request head (request line and headers) accepted.
pub(crate) const MAX_HEAD_LEN: usize = 8 * 1024;
/// Header slots offered to httparse, for requests and upstream responses;
/// a request with more headers than this answers 431.
pub(crate) const MAX_HEADERS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestHead<'b> {
    pub method: Method,
    /// The form of the request target; origin-form and absolute-form name a
    /// path, the other two (`OPTIONS *`, `CONNECT host:port`) do not.
    pub form: TargetForm,
    /// The path of the request target, without its query: it starts with
    /// `/`, or is empty for a target that names no path.
    pub path: &'b [u8],
    /// The query of the request target, without its `?`.
    pub query: Option<&'b [u8]>,
    /// The host the request is for: the authority of an absolute-form or
    /// authority-form target (RFC 9112 §3.2.2 has it override `Host`), else
    /// the `Host` value; `None` only for HTTP/1.0 without `Host`.
    pub host: Option<&'b [u8]>,
    /// HTTP/1.0 rather than HTTP/1.1 (or a later HTTP/1.x, served as 1.1).
    pub http10: bool,
    /// The client wants the connection kept open after this exchange.
    pub keep_alive: bool,
    pub body: BodyFraming,
    /// `Expect: 100-continue`: the client waits for an interim response before the body.
    pub expect_continue: bool,
    /// The first `If-None-Match` value, trimmed. A second header line is
    /// ignored rather than joined (which would allocate): a tag it lists
    /// can only turn a 200 into a 304, so ignoring it is always safe.
    pub if_none_match: Option<&'b [u8]>,
    /// `Upgrade: websocket` with `Connection: upgrade`: the client asks
    /// for a WebSocket (the rest of the handshake is checked by `ws`).
    pub websocket_upgrade: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ParsedHead<'b> {
    /// A whole head, and how many bytes of the buffer it took.
    Complete(RequestHead<'b>, usize),
    /// The head is not all here yet.
    Partial,
    /// The head can never be served; answer with this status and close.
    /// A HEAD request (when the head got as far as to say so) gets no body
    /// (RFC 9110 §9.3.2).
    Rejected {
        status: ErrorStatus,
        head_only: bool,
    },
}

impl ParsedHead<'_> {
    fn rejected(status: ErrorStatus) -> Self {
        ParsedHead::Rejected {
            status,
            head_only: false,
        }
    }
}

/// Parses the request head at the start of `buf`; its body may carry at
/// most `max_body` bytes (a `Content-Length` over it is refused with 413).
pub(crate) fn parse_head(buf: &[u8], max_body: u64) -> ParsedHead<'_> {
    let mut slots = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    // Never parse past the limit: bytes beyond it must not change the answer,
    // or a head would get one status or another depending on where reads end.
    let limited = &buf[..buf.len().min(MAX_HEAD_LEN)];
    let head_len = match request.parse_with_uninit_headers(limited, &mut slots) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return incomplete(buf),
        // httparse knows HTTP/1.0 and HTTP/1.1 only.
        Err(httparse::Error::Version) => return parse_other_version(buf, limited, max_body),
        Err(httparse::Error::TooManyHeaders) => {
            return ParsedHead::rejected(ErrorStatus::HeaderFieldsTooLarge)
        }
        Err(_) => return ParsedHead::rejected(ErrorStatus::BadRequest),
    };
    let line = RequestLine {
        method: request.method.unwrap_or(""),
        target: request.path.unwrap_or("").as_bytes(),
        http10: request.version == Some(0),
    };
    complete(line, request.headers, head_len, max_body)
}

/// A head that has not all arrived: wait for more, unless it cannot fit.
fn incomplete(buf: &[u8]) -> ParsedHead<'_> {
    if buf.len() <= MAX_HEAD_LEN {
        ParsedHead::Partial
    } else {
        ParsedHead::rejected(oversized_head(buf))
    }
}

/// What the request line says, once parsed.
struct RequestLine<'b> {
    method: &'b str,
    target: &'b [u8],
    http10: bool,
}

/// The head once its request line and fields are parsed: the HTTP/1.1 rules.
fn complete<'b>(
    line: RequestLine<'b>,
    headers: &[httparse::Header<'b>],
    head_len: usize,
    max_body: u64,
) -> ParsedHead<'b> {
    let method = Method::parse(line.method);
    // A target in none of the forms its method may use is a malformed
    // request (RFC 9112 §3.2), not a missing resource.
    let Some(target) = parse_target(line.target, line.method) else {
        return ParsedHead::Rejected {
            status: ErrorStatus::BadRequest,
            head_only: method == Method::Head,
        };
    };
    // A method no route takes (`Other`) is routed all the same: 405 or 404,
    // and its body is skipped by its framing like any refused request's.
    match read_headers(headers, line.http10, max_body) {
        Ok(fields) => ParsedHead::Complete(
            RequestHead {
                method,
                form: target.form,
                path: target.path,
                query: target.query,
                host: target.authority.or(fields.host),
                http10: line.http10,
                keep_alive: fields.keep_alive,
                body: fields.body,
                expect_continue: fields.expect_continue,
                if_none_match: fields.if_none_match,
                websocket_upgrade: fields.websocket_upgrade,
            },
            head_len,
        ),
        Err(status) => ParsedHead::Rejected {
            status,
            head_only: method == Method::Head,
        },
    }
}

/// A request line whose version httparse refused. `HTTP/1.x` for any minor
/// version x is served as HTTP/1.1, the highest minor version this server
/// implements (RFC 9110 §2.5); another major version gets 505; anything
/// else that is not `HTTP/` DIGIT `.` DIGIT gets 400. httparse stops at the
/// version, so the method and target before it are known to be well formed,
/// and the fields after the line are left to httparse's field parser.
fn parse_other_version<'b>(buf: &'b [u8], limited: &'b [u8], max_body: u64) -> ParsedHead<'b> {
    // httparse skips empty lines (CRLF or LF) before the request line.
    let start = limited
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(limited.len());
    let mut parts = limited[start..].splitn(3, |&b| b == b' ');
    let (Some(method), Some(target), Some(rest)) = (parts.next(), parts.next(), parts.next())
    else {
        return incomplete(buf);
    };
    let version_end = match version_line(rest) {
        VersionLine::Partial => return incomplete(buf),
        VersionLine::Invalid => return ParsedHead::rejected(ErrorStatus::BadRequest),
        VersionLine::OtherMajor => {
            return ParsedHead::rejected(ErrorStatus::HttpVersionNotSupported)
        }
        VersionLine::Http1(end) => end,
    };
    let line_len = limited.len() - rest.len() + version_end;
    let line = RequestLine {
        method: std::str::from_utf8(method).unwrap_or(""),
        target,
        http10: false,
    };
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match httparse::parse_headers(&limited[line_len..], &mut headers) {
        Ok(httparse::Status::Complete((fields_len, headers))) => {
            complete(line, headers, line_len + fields_len, max_body)
        }
        Ok(httparse::Status::Partial) => incomplete(buf),
        Err(httparse::Error::TooManyHeaders) => {
            ParsedHead::rejected(ErrorStatus::HeaderFieldsTooLarge)
        }
        Err(_) => ParsedHead::rejected(ErrorStatus::BadRequest),
    }
}

/// 414 when the request line alone does not fit the head limit, else 431.
fn oversized_head(buf: &[u8]) -> ErrorStatus {
    let line_end = buf.iter().take(MAX_HEAD_LEN).position(|&b| b == b'\n');
    match line_end {
        None => ErrorStatus::UriTooLong,
        Some(_) => ErrorStatus::HeaderFieldsTooLarge,
    }
}

/// Parsing helpers for the unit tests of the head's parts.
#[cfg(test)]
pub(crate) mod testing {
    use super::{parse_head, ParsedHead, RequestHead, MAX_BODY_LEN};
    use crate::http::status::ErrorStatus;

    /// `raw` parsed whole into a head.
    pub(crate) fn head(raw: &str) -> RequestHead<'_> {
        match parse_head(raw.as_bytes(), MAX_BODY_LEN) {
            ParsedHead::Complete(head, len) => {
                assert_eq!(len, raw.len());
                head
            }
            other => panic!("{raw:?} parsed as {other:?}"),
        }
    }

    /// The status `raw` is refused with.
    pub(crate) fn rejected(raw: &[u8]) -> ErrorStatus {
        match parse_head(raw, MAX_BODY_LEN) {
            ParsedHead::Rejected { status, .. } => status,
            other => panic!("{:?} parsed as {other:?}", String::from_utf8_lossy(raw)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{head, rejected};
    use super::*;

    #[test]
    fn reads_method_path_and_persistence() {
        let get = head("GET /json?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(
            (get.method, get.path, get.keep_alive),
            (Method::Get, &b"/json"[..], true)
        );
        let close = head("HEAD / HTTP/1.1\r\nHost: a\r\nConnection: TE, Close\r\n\r\n");
        assert_eq!((close.method, close.keep_alive), (Method::Head, false));
        assert!(!head("GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(head("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
        assert_eq!(
            head("DELETE / HTTP/1.1\r\nHost: a\r\n\r\n").method,
            Method::Delete
        );
        assert_eq!(
            head("TRACE / HTTP/1.1\r\nHost: a\r\n\r\n").method,
            Method::Other
        );
    }

    #[test]
    fn reads_methods_it_does_not_know_as_other() {
        for (raw, body) in [
            ("PAUSE / HTTP/1.1\r\nHost: a\r\n\r\n", BodyFraming::Empty),
            ("G|T / HTTP/1.1\r\nHost: a\r\n\r\n", BodyFraming::Empty),
            ("get / HTTP/1.1\r\nHost: a\r\n\r\n", BodyFraming::Empty),
            (
                "PROPFIND /x HTTP/1.2\r\nHost: a\r\nContent-Length: 3\r\n\r\n",
                BodyFraming::Length(3),
            ),
        ] {
            let parsed = head(raw);
            assert_eq!(
                (parsed.method, parsed.body),
                (Method::Other, body),
                "{raw:?}"
            );
        }
        // A malformed head is a 400 first, whatever its method.
        assert_eq!(
            rejected(b"PAUSE / HTTP/1.1\r\n\r\n"),
            ErrorStatus::BadRequest
        );
        assert_eq!(
            rejected(b"PAUSE * HTTP/1.1\r\nHost: a\r\n\r\n"),
            ErrorStatus::BadRequest
        );
        for known in ["CONNECT a:1", "TRACE /", "OPTIONS *", "PATCH /"] {
            let raw = format!("{known} HTTP/1.1\r\nHost: a\r\n\r\n");
            assert!(matches!(
                parse_head(raw.as_bytes(), MAX_BODY_LEN),
                ParsedHead::Complete(..)
            ));
        }
    }

    #[test]
    fn reads_the_target_and_the_host() {
        let origin = head("GET /json?x=1 HTTP/1.1\r\nHost: example.com:80\r\n\r\n");
        assert_eq!(
            (origin.form, origin.query, origin.host),
            (
                TargetForm::Origin,
                Some(&b"x=1"[..]),
                Some(&b"example.com:80"[..])
            )
        );
        // The authority overrides Host, which must still be there and valid.
        let absolute = head("GET hTTp://127.0.0.1:9000/json HTTP/1.1\r\nHost: other\r\n\r\n");
        assert_eq!(
            (absolute.form, absolute.path, absolute.host),
            (
                TargetForm::Absolute,
                &b"/json"[..],
                Some(&b"127.0.0.1:9000"[..])
            )
        );
        assert_eq!(head("GET / HTTP/1.0\r\n\r\n").host, None);
        for empty in [
            "GET / HTTP/1.1\r\nHost:\r\n\r\n",
            "GET / HTTP/1.0\r\nHost: \r\n\r\n",
        ] {
            assert_eq!(rejected(empty.as_bytes()), ErrorStatus::BadRequest);
        }
        assert_eq!(
            head("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n").form,
            TargetForm::Asterisk
        );
        let connect = head("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
        assert_eq!(
            (connect.form, connect.path),
            (TargetForm::Authority, &b""[..])
        );
    }

    #[test]
    fn serves_later_minor_versions_as_http11() {
        let raw = "\r\nGET /json HTTP/1.2\r\nHost: a\r\nConnection: close\r\n\r\n";
        let later = head(raw);
        assert_eq!(
            (later.method, later.path, later.http10, later.keep_alive),
            (Method::Get, &b"/json"[..], false, false)
        );
        // Empty lines before the line are skipped, not read into the method.
        let after_lf = head("\n\r\nHEAD / HTTP/1.3\r\nHost: a\r\n\r\n");
        assert_eq!((after_lf.method, after_lf.path), (Method::Head, &b"/"[..]));
        assert_eq!(head("GET / HTTP/1.9\nHost: a\n\n").path, b"/");
        // Like HTTP/1.1, it needs a Host.
        assert_eq!(rejected(b"GET / HTTP/1.2\r\n\r\n"), ErrorStatus::BadRequest);
        for partial in [
            "GET / HTTP/2",
            "GET / HTTP/1.2",
            "GET / HTTP/1.2\r",
            "GET / HTTP/1.2\r\nHost: a\r\n",
        ] {
            assert_eq!(
                parse_head(partial.as_bytes(), MAX_BODY_LEN),
                ParsedHead::Partial,
                "{partial:?}"
            );
        }
        for other in [
            "GET / HTTP/2.0\r\n",
            "GET / HTTP/0.9\r\n",
            "PRI * HTTP/2.0\r\n",
        ] {
            assert_eq!(
                rejected(other.as_bytes()),
                ErrorStatus::HttpVersionNotSupported
            );
        }
        for malformed in [
            "GET / HTTP/1.10\r\n",
            "GET / HTTP/1.x",
            "GET / HTTX",
            "GET / HTTP/1.2 \r\n",
        ] {
            assert_eq!(
                rejected(malformed.as_bytes()),
                ErrorStatus::BadRequest,
                "{malformed:?}"
            );
        }
        let many: String = (0..MAX_HEADERS + 1)
            .map(|i| format!("X-{i}: 1\r\n"))
            .collect();
        let many = format!("GET / HTTP/1.2\r\nHost: a\r\n{many}\r\n");
        assert_eq!(rejected(many.as_bytes()), ErrorStatus::HeaderFieldsTooLarge);
    }

    #[test]
    fn rejects_oversized_heads() {
        let long_target = format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_HEAD_LEN));
        assert_eq!(rejected(long_target.as_bytes()), ErrorStatus::UriTooLong);
        let long_header = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n",
            "a".repeat(MAX_HEAD_LEN)
        );
        assert_eq!(
            rejected(long_header.as_bytes()),
            ErrorStatus::HeaderFieldsTooLarge
        );
        let many: String = (0..MAX_HEADERS + 1)
            .map(|i| format!("X-{i}: 1\r\n"))
            .collect();
        let many = format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n");
        assert_eq!(rejected(many.as_bytes()), ErrorStatus::HeaderFieldsTooLarge);
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nHost: a\r\n", MAX_BODY_LEN),
            ParsedHead::Partial
        );
    }

    /// Found by the fuzz target: a request line past the limit with a bad
    /// byte after the limit got 414 when a read ended before the bad byte,
    /// and 400 when it arrived in the same read. The answer must not depend
    /// on where reads end.
    #[test]
    fn oversized_heads_get_one_answer_however_they_arrive() {
        let mut line = format!("GET /{}", "a".repeat(MAX_HEAD_LEN)).into_bytes();
        let prefix = rejected(&line);
        line.push(0x01);
        assert_eq!(prefix, ErrorStatus::UriTooLong);
        assert_eq!(rejected(&line), prefix);

        let mut head = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(MAX_HEAD_LEN)).into_bytes();
        let prefix = rejected(&head);
        head.extend_from_slice(b"\r\n\x01\r\n");
        assert_eq!(prefix, ErrorStatus::HeaderFieldsTooLarge);
        assert_eq!(rejected(&head), prefix);
    }
}
