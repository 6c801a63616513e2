//! The request header fields this server acts on, and the HTTP/1.1 rules
//! that hold between them: one valid `Host` (required on HTTP/1.1), the
//! message framing (shared with responses, [`crate::http::framing`]), persistence
//! (`Connection`), `Expect`, `If-None-Match` and a WebSocket `Upgrade`. Nothing here allocates.

use crate::http::framing::{list_items, BodyFraming};
use crate::http::framing::{Framing, FramingError, FramingFields};
use crate::http::status::ErrorStatus;
use crate::http::target::is_valid_host;

/// What the header fields say, once checked.
pub(crate) struct HeaderFields<'b> {
    pub host: Option<&'b [u8]>,
    pub keep_alive: bool,
    pub body: BodyFraming,
    pub expect_continue: bool,
    pub if_none_match: Option<&'b [u8]>,
    pub websocket_upgrade: bool,
}

/// Applies the HTTP/1.1 rules to the header fields of a request head whose
/// body may carry at most `max_body` bytes.
pub(crate) fn read_headers<'b>(
    headers: &[httparse::Header<'b>],
    http10: bool,
    max_body: u64,
) -> Result<HeaderFields<'b>, ErrorStatus> {
    let mut hosts = 0;
    let mut host = None;
    let mut framing = FramingFields::default();
    let mut connection_close = false;
    let mut connection_keep_alive = false;
    let mut expect_continue = false;
    let mut if_none_match = None;
    let mut connection_upgrade = false;
    let mut upgrade_websocket = false;

    for header in headers {
        let name = header.name;
        let value = header.value.trim_ascii();
        framing.read(name, value).map_err(FramingError::status)?;
        if name.eq_ignore_ascii_case("host") {
            if !is_valid_host(value) {
                return Err(ErrorStatus::BadRequest);
            }
            hosts += 1;
            host = Some(value);
        } else if name.eq_ignore_ascii_case("connection") {
            for option in list_items(value) {
                connection_close |= option.eq_ignore_ascii_case(b"close");
                connection_keep_alive |= option.eq_ignore_ascii_case(b"keep-alive");
                connection_upgrade |= option.eq_ignore_ascii_case(b"upgrade");
            }
        } else if name.eq_ignore_ascii_case("upgrade") {
            // A protocol may carry a version (`websocket/13` is not one
            // RFC 6455 names): only the bare token counts.
            for protocol in list_items(value) {
                upgrade_websocket |= protocol.eq_ignore_ascii_case(b"websocket");
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
    let body = match framing.framing(http10).map_err(FramingError::status)? {
        Framing::Unframed | Framing::Length(0) => BodyFraming::Empty,
        Framing::Length(length) if length > max_body => return Err(ErrorStatus::PayloadTooLarge),
        Framing::Length(length) => BodyFraming::Length(length),
        Framing::Chunked => BodyFraming::Chunked,
    };
    let keep_alive = !connection_close && (!http10 || connection_keep_alive);
    Ok(HeaderFields {
        host,
        keep_alive,
        body,
        // An HTTP/1.0 client cannot expect 100 Continue (RFC 9110 10.1.1).
        expect_continue: expect_continue && !http10 && body != BodyFraming::Empty,
        if_none_match,
        // Upgrade only means something when `Connection` names it (RFC
        // 9110 §7.8), and HTTP/1.0 has no upgrade.
        websocket_upgrade: upgrade_websocket && connection_upgrade && !http10,
    })
}

#[cfg(test)]
mod tests {
    use crate::http::request::testing::{head, rejected};
    use crate::http::request::BodyFraming;
    use crate::http::status::ErrorStatus;

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
        let cases: [(&str, ErrorStatus); 19] = [
            ("GET / HTTP/1.1\r\n\r\n", BadRequest),
            ("GET / HTTP/1.1\r\nHost: 127.0.0.1:9000/path\r\n\r\n", BadRequest),
            ("GET / HTTP/1.1\r\nHost: a, b\r\n\r\n", BadRequest),
            ("GET / HTTP/1.0\r\nHost: Q a\r\n\r\n", BadRequest),
            ("GET http://a/ HTTP/1.1\r\n\r\n", BadRequest),
            ("GET * HTTP/1.1\r\nHost: a\r\n\r\n", BadRequest),
            ("GET :plaintext HTTP/1.1\r\nHost: a\r\n\r\n", BadRequest),
            ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\nContent-Length: 5\r\n\r\n", BadRequest),
            ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ,\r\n\r\n", BadRequest),
            ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: gzip\r\n\r\n", BadRequest),
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
}
