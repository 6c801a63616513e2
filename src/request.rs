//! Request heads: httparse over the caller's bytes, then the HTTP/1.1 rules this
//! server enforces on top (Host, message framing, connection persistence, limits).
//! Nothing here allocates; a parsed head borrows the caller's buffer.

use std::mem::MaybeUninit;

use crate::response::ErrorStatus;

/// Largest request head (request line and headers) accepted.
pub const MAX_HEAD_LEN: usize = 8 * 1024;
/// Largest request body accepted, whether sized by Content-Length or chunked.
pub const MAX_BODY_LEN: u64 = 1024 * 1024;
/// Header slots offered to httparse; more headers than this answer 431.
const MAX_HEADERS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Other,
}

/// How the body that follows a head is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    Empty,
    Length(u64),
    Chunked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHead<'b> {
    pub method: Method,
    /// The path of the request target, without its query.
    pub path: &'b [u8],
    /// HTTP/1.0 rather than HTTP/1.1.
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
}

#[derive(Debug, PartialEq, Eq)]
pub enum ParsedHead<'b> {
    /// A whole head, and how many bytes of the buffer it took.
    Complete(RequestHead<'b>, usize),
    /// The head is not all here yet.
    Partial,
    /// The head can never be served; answer with this status and close.
    Rejected(ErrorStatus),
}

/// Parses the request head at the start of `buf`.
pub fn parse_head(buf: &[u8]) -> ParsedHead<'_> {
    let mut slots = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    // Never parse past the limit: bytes beyond it must not change the answer,
    // or a head would get one status or another depending on where reads end.
    let limited = &buf[..buf.len().min(MAX_HEAD_LEN)];
    let head_len = match request.parse_with_uninit_headers(limited, &mut slots) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD_LEN => return ParsedHead::Partial,
        Ok(httparse::Status::Partial) => return ParsedHead::Rejected(oversized_head(buf)),
        Err(httparse::Error::TooManyHeaders) => {
            return ParsedHead::Rejected(ErrorStatus::HeaderFieldsTooLarge)
        }
        Err(_) => return ParsedHead::Rejected(ErrorStatus::BadRequest),
    };

    let method = match request.method {
        Some("GET") => Method::Get,
        Some("HEAD") => Method::Head,
        _ => Method::Other,
    };
    let target = request.path.unwrap_or("/").as_bytes();
    let path = match target.iter().position(|&b| b == b'?') {
        Some(query) => &target[..query],
        None => target,
    };
    let http10 = request.version == Some(0);

    match read_headers(request.headers, http10) {
        Ok(fields) => ParsedHead::Complete(
            RequestHead {
                method,
                path,
                http10,
                keep_alive: fields.keep_alive,
                body: fields.body,
                expect_continue: fields.expect_continue,
                if_none_match: fields.if_none_match,
            },
            head_len,
        ),
        Err(status) => ParsedHead::Rejected(status),
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

struct HeaderFields<'b> {
    keep_alive: bool,
    body: BodyFraming,
    expect_continue: bool,
    if_none_match: Option<&'b [u8]>,
}

fn read_headers<'b>(
    headers: &[httparse::Header<'b>],
    http10: bool,
) -> Result<HeaderFields<'b>, ErrorStatus> {
    let mut hosts = 0;
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding = TransferCoding::Absent;
    let mut connection_close = false;
    let mut connection_keep_alive = false;
    let mut expect_continue = false;
    let mut if_none_match = None;

    for header in headers {
        let name = header.name;
        let value = header.value.trim_ascii();
        if name.eq_ignore_ascii_case("host") {
            hosts += 1;
        } else if name.eq_ignore_ascii_case("content-length") {
            let length = parse_content_length(value).ok_or(ErrorStatus::BadRequest)?;
            if content_length.is_some_and(|seen| seen != length) {
                return Err(ErrorStatus::BadRequest);
            }
            content_length = Some(length);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            for coding in list_items(value) {
                transfer_encoding = transfer_encoding.then(coding);
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for option in list_items(value) {
                connection_close |= option.eq_ignore_ascii_case(b"close");
                connection_keep_alive |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("expect") {
            expect_continue = value.eq_ignore_ascii_case(b"100-continue");
        } else if name.eq_ignore_ascii_case("if-none-match") {
            if_none_match = if_none_match.or(Some(value));
        }
    }

    if hosts > 1 || (hosts == 0 && !http10) {
        return Err(ErrorStatus::BadRequest);
    }
    // HTTP/1.0 has no transfer codings: its framing is faulty (RFC 9112 6.1).
    if http10 && !matches!(transfer_encoding, TransferCoding::Absent) {
        return Err(ErrorStatus::BadRequest);
    }
    let body = match (transfer_encoding, content_length) {
        (TransferCoding::Absent, None | Some(0)) => BodyFraming::Empty,
        (TransferCoding::Absent, Some(length)) if length > MAX_BODY_LEN => {
            return Err(ErrorStatus::PayloadTooLarge)
        }
        (TransferCoding::Absent, Some(length)) => BodyFraming::Length(length),
        // Both framings at once is how request smuggling starts.
        (_, Some(_)) => return Err(ErrorStatus::BadRequest),
        (TransferCoding::Chunked, None) => BodyFraming::Chunked,
        (TransferCoding::ChunkedNotLast, None) => return Err(ErrorStatus::BadRequest),
        (TransferCoding::Unknown, None) => return Err(ErrorStatus::NotImplemented),
    };
    let keep_alive = !connection_close && (!http10 || connection_keep_alive);
    Ok(HeaderFields {
        keep_alive,
        body,
        // An HTTP/1.0 client cannot expect 100 Continue (RFC 9110 10.1.1).
        expect_continue: expect_continue && !http10 && body != BodyFraming::Empty,
        if_none_match,
    })
}

/// What the Transfer-Encoding headers, read in order, amount to.
#[derive(Clone, Copy)]
enum TransferCoding {
    Absent,
    /// `chunked` is the final coding: the only framing we decode.
    Chunked,
    /// A coding after `chunked`: the body cannot be delimited.
    ChunkedNotLast,
    /// A coding we do not implement (gzip, identity, ...).
    Unknown,
}

impl TransferCoding {
    fn then(self, coding: &[u8]) -> TransferCoding {
        match self {
            TransferCoding::Unknown => TransferCoding::Unknown,
            _ if !coding.eq_ignore_ascii_case(b"chunked") => match self {
                TransferCoding::Chunked | TransferCoding::ChunkedNotLast => {
                    TransferCoding::ChunkedNotLast
                }
                _ => TransferCoding::Unknown,
            },
            TransferCoding::Absent => TransferCoding::Chunked,
            // `chunked` twice is never valid.
            _ => TransferCoding::ChunkedNotLast,
        }
    }
}

/// A Content-Length value: digits only, no sign, no list, no overflow.
fn parse_content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        value
            .iter()
            .fold(0u64, |length, digit| length * 10 + u64::from(digit - b'0')),
    )
}

/// The non-empty, trimmed items of a comma-separated header value.
pub fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|item| !item.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> RequestHead<'_> {
        match parse_head(raw.as_bytes()) {
            ParsedHead::Complete(head, len) => {
                assert_eq!(len, raw.len());
                head
            }
            other => panic!("{raw:?} parsed as {other:?}"),
        }
    }

    fn rejected(raw: &[u8]) -> ErrorStatus {
        match parse_head(raw) {
            ParsedHead::Rejected(status) => status,
            other => panic!("{:?} parsed as {other:?}", String::from_utf8_lossy(raw)),
        }
    }

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
            Method::Other
        );
    }

    #[test]
    fn reads_body_framing() {
        let sized =
            head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(sized.body, BodyFraming::Length(5));
        let chunked = head("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(chunked.body, BodyFraming::Chunked);
        let expect =
            head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n");
        assert!(expect.expect_continue);
        let http10 = head("POST / HTTP/1.0\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n");
        assert!(!http10.expect_continue);
    }

    #[test]
    fn keeps_the_first_if_none_match() {
        let conditional =
            head("GET / HTTP/1.1\r\nHost: a\r\nIf-None-Match:  \"1\", \"2\" \r\nif-none-match: *\r\n\r\n");
        assert_eq!(conditional.if_none_match, Some(&b"\"1\", \"2\""[..]));
        assert_eq!(
            head("GET / HTTP/1.1\r\nHost: a\r\n\r\n").if_none_match,
            None
        );
    }

    #[test]
    fn rejects_what_cannot_be_framed() {
        use ErrorStatus::*;
        let cases: [(&str, ErrorStatus); 10] = [
            ("GET / HTTP/1.1\r\n\r\n", BadRequest),
            ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", BadRequest),
            ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", BadRequest),
            ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", BadRequest),
            ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", BadRequest),
            ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", BadRequest),
            ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", BadRequest),
            ("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", BadRequest),
            ("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", NotImplemented),
            ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n", PayloadTooLarge),
        ];
        for (raw, status) in cases {
            assert_eq!(rejected(raw.as_bytes()), status, "{raw:?}");
        }
        assert_eq!(rejected(b"\x01 / HTTP/1.1\r\n\r\n"), BadRequest);
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
            parse_head(b"GET / HTTP/1.1\r\nHost: a\r\n"),
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
