//! The request headers only static files read: `Range` (RFC 9110 §14.2),
//! `If-Range` (§13.1.5), `If-Modified-Since` (§13.1.3) and `Accept-Encoding`
//! (§12.5.3, read by [`crate::http::accept_encoding`]), found in the raw
//! head, which httparse has already validated, and read without allocating.
//!
//! Every rule here leans the same way: when a header is malformed, repeated
//! or otherwise doubtful, it is ignored, and the full 200 goes out, which is
//! always a correct answer; a 206 or a 304 only when the request clearly
//! asks for it.

use crate::http::accept_encoding::AcceptEncoding;
use crate::http::http_date::parse_http_date;

/// The static-file headers of one request, each trimmed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StaticHeaders<'b> {
    /// `Range`, unless absent or sent more than once (a single-valued field).
    pub range: Option<&'b [u8]>,
    /// `If-Range`: an entity tag or a date.
    pub if_range: Option<&'b [u8]>,
    /// `If-Modified-Since`.
    pub if_modified_since: Option<&'b [u8]>,
    /// Every `Accept-Encoding` field, taken together.
    pub accept_encoding: AcceptEncoding,
}

/// Reads the static-file headers of a complete request head. A header sent
/// twice counts as malformed: `Range` and `If-Modified-Since` are then
/// ignored, and `If-Range` matches nothing.
pub(crate) fn scan_headers(raw_head: &[u8]) -> StaticHeaders<'_> {
    let mut found = StaticHeaders::default();
    let (mut ranges, mut if_ranges, mut dates) = (0, 0, 0);
    // The first line is the request line; header lines follow, each ending
    // in LF (httparse accepts CRLF or a bare LF) and without folding.
    for line in raw_head.split(|&b| b == b'\n').skip(1) {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"range") {
            ranges += 1;
            found.range = Some(value);
        } else if name.eq_ignore_ascii_case(b"if-range") {
            if_ranges += 1;
            found.if_range = Some(value);
        } else if name.eq_ignore_ascii_case(b"if-modified-since") {
            dates += 1;
            found.if_modified_since = Some(value);
        } else if name.eq_ignore_ascii_case(b"accept-encoding") {
            found.accept_encoding.add(value);
        }
    }
    if ranges > 1 {
        found.range = None;
    }
    if if_ranges > 1 {
        // Not a valid validator: it matches nothing, so the range is ignored.
        found.if_range = Some(b"");
    }
    if dates > 1 {
        found.if_modified_since = None;
    }
    found
}

/// The query of the request target on a head's first line, without its `?`;
/// empty when there is none.
pub(crate) fn target_query(raw_head: &[u8]) -> &[u8] {
    let line = raw_head
        .split(|&b| b == b'\n')
        .find(|line| !line.trim_ascii().is_empty());
    let target = line.and_then(|line| line.split(|&b| b == b' ').nth(1));
    target
        .and_then(|target| {
            target
                .iter()
                .position(|&b| b == b'?')
                .map(|q| &target[q + 1..])
        })
        .unwrap_or_default()
}

/// What a `Range` header asks of a representation of `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeRequest {
    /// Not one valid byte range (absent, malformed, another unit, several
    /// ranges, or an empty file): send the whole representation.
    Whole,
    /// The bytes `first..=last`, both within the representation.
    Part { first: u64, last: u64 },
    /// A valid range that starts at or past the end: 416.
    Unsatisfiable,
}

/// Reads a `Range` value against a representation of `len` bytes. Only a
/// single range is honoured; several may be answered with the whole
/// representation (RFC 9110 §14.2), which also spares a multipart body.
pub(crate) fn parse_range(value: &[u8], len: u64) -> RangeRequest {
    let Some(set) = value
        .get(..6)
        .filter(|unit| unit.eq_ignore_ascii_case(b"bytes="))
        .map(|_| &value[6..])
    else {
        return RangeRequest::Whole;
    };
    // Empty list elements and the whitespace around them are allowed (§5.6.1).
    let mut specs = set
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|spec| !spec.is_empty());
    let (Some(spec), None) = (specs.next(), specs.next()) else {
        return RangeRequest::Whole;
    };
    let Some(dash) = spec.iter().position(|&b| b == b'-') else {
        return RangeRequest::Whole;
    };
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    if len == 0 {
        // No byte range of an empty representation has a Content-Range to
        // describe it; the (empty) whole answers every range.
        return RangeRequest::Whole;
    }
    match (first.is_empty(), digits(first), digits(last)) {
        // `-n`: the last n bytes, all of them when n is at least the length.
        (true, _, Some(0)) => RangeRequest::Unsatisfiable,
        (true, _, Some(suffix)) => RangeRequest::Part {
            first: len.saturating_sub(suffix),
            last: len - 1,
        },
        // `a-`, `a-b`: a last position past the end means the end.
        (false, Some(first), last_digits) if last.is_empty() || last_digits.is_some() => {
            let last = last_digits.unwrap_or(u64::MAX);
            if last < first {
                RangeRequest::Whole
            } else if first >= len {
                RangeRequest::Unsatisfiable
            } else {
                RangeRequest::Part {
                    first,
                    last: last.min(len - 1),
                }
            }
        }
        _ => RangeRequest::Whole,
    }
}

/// The value of a run of ASCII digits; `None` unless it is one (empty or
/// not all digits). A value past `u64::MAX` saturates: as a position it
/// lies past any representation this server holds.
fn digits(text: &[u8]) -> Option<u64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(text.iter().fold(0u64, |value, &digit| {
        value
            .saturating_mul(10)
            .saturating_add(u64::from(digit - b'0'))
    }))
}

/// Whether an `If-Range` value lets the range through: a strong entity tag
/// equal to `etag` (strong comparison, so a weak tag never matches), or an
/// HTTP-date equal to `last_modified` when that date is a strong validator.
pub(crate) fn if_range_matches(
    value: &[u8],
    etag: &[u8],
    last_modified: u64,
    date_is_strong: bool,
    now: u64,
) -> bool {
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        return value == etag;
    }
    date_is_strong && parse_http_date(value, now) == Some(last_modified)
}

/// Whether an `If-Modified-Since` value says the client's copy, last
/// modified at `last_modified`, is current: the value is a date no later
/// than now (a later one is invalid, RFC 9110 §13.1.3) and not before the
/// last modification, compared in whole seconds.
pub(crate) fn not_modified_since(value: &[u8], last_modified: u64, now: u64) -> bool {
    parse_http_date(value, now).is_some_and(|since| since <= now && last_modified <= since)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(first: u64, last: u64) -> RangeRequest {
        RangeRequest::Part { first, last }
    }

    #[test]
    fn reads_one_range_in_each_form() {
        for (value, expected) in [
            ("bytes=0-4", part(0, 4)),
            ("bytes=5-", part(5, 9)),
            ("bytes=-3", part(7, 9)),
            ("bytes=-30", part(0, 9)),
            ("bytes=9-9", part(9, 9)),
            ("bytes=2-99999999999999999999999", part(2, 9)),
            ("BYTES=1-2", part(1, 2)),
            ("bytes= 1-2 ,", part(1, 2)),
            ("bytes=10-", RangeRequest::Unsatisfiable),
            ("bytes=10-20", RangeRequest::Unsatisfiable),
            (
                "bytes=99999999999999999999999-",
                RangeRequest::Unsatisfiable,
            ),
            ("bytes=-0", RangeRequest::Unsatisfiable),
        ] {
            assert_eq!(parse_range(value.as_bytes(), 10), expected, "{value}");
        }
    }

    #[test]
    fn anything_else_gets_the_whole_representation() {
        for value in [
            "",
            "bytes",
            "bytes=",
            "bytes=,",
            "bytes=4-2",
            "bytes=a-b",
            "bytes=1",
            "bytes=-",
            "bytes=--1",
            "bytes=1-2-3",
            "bytes=+1-2",
            "bytes=0-1,3-4",
            "bytes=0-1, 20-",
            "items=0-1",
            "bytes =0-1",
            "bytes=0 -1",
        ] {
            assert_eq!(
                parse_range(value.as_bytes(), 10),
                RangeRequest::Whole,
                "{value}"
            );
        }
        assert_eq!(parse_range(b"bytes=0-0", 0), RangeRequest::Whole);
        assert_eq!(parse_range(b"bytes=-1", 0), RangeRequest::Whole);
    }

    #[test]
    fn finds_the_headers_and_the_query() {
        let head = b"GET /a?x=1&y HTTP/1.1\r\nHost: t\r\nrange:  bytes=0-1 \r\n\
            If-Range: \"e\"\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n";
        let found = scan_headers(head);
        assert_eq!(found.range, Some(&b"bytes=0-1"[..]));
        assert_eq!(found.if_range, Some(&b"\"e\""[..]));
        assert_eq!(
            found.if_modified_since,
            Some(&b"Sun, 06 Nov 1994 08:49:37 GMT"[..])
        );
        assert!(!found.accept_encoding.prefers_gzip());
        let accepting =
            scan_headers(b"GET / HTTP/1.1\r\nAccept-Encoding: br\r\naccept-encoding: GZIP\r\n\r\n");
        assert!(accepting.accept_encoding.prefers_gzip());
        assert_eq!(target_query(head), b"x=1&y");
        assert_eq!(target_query(b"GET /a HTTP/1.1\r\n\r\n"), b"");
        assert_eq!(target_query(b"\r\nGET /a? HTTP/1.1\n\n"), b"");
        assert_eq!(
            scan_headers(b"GET / HTTP/1.1\nHost: t\n\n"),
            StaticHeaders::default()
        );
    }

    #[test]
    fn a_repeated_header_is_not_honoured() {
        let head = b"GET / HTTP/1.1\r\nRange: bytes=0-1\r\nRange: bytes=0-1\r\n\
            If-Range: \"e\"\r\nIf-Range: \"e\"\r\nIf-Modified-Since: x\r\nIf-Modified-Since: x\r\n\r\n";
        let found = scan_headers(head);
        assert_eq!(found.range, None);
        assert!(!if_range_matches(
            found.if_range.unwrap(),
            b"\"e\"",
            0,
            true,
            0
        ));
        assert_eq!(found.if_modified_since, None);
    }

    #[test]
    fn if_range_needs_a_strong_match() {
        const LAST_MODIFIED: u64 = 784_111_777;
        const NOW: u64 = LAST_MODIFIED + 100;
        let date = b"Sun, 06 Nov 1994 08:49:37 GMT";
        let matches =
            |value: &[u8], strong| if_range_matches(value, b"\"e\"", LAST_MODIFIED, strong, NOW);
        assert!(matches(b"\"e\"", true));
        assert!(matches(date, true));
        assert!(!matches(date, false));
        assert!(!matches(b"W/\"e\"", true));
        assert!(!matches(b"\"f\"", true));
        assert!(!matches(b"\"e\", \"f\"", true));
        assert!(!matches(b"Sun, 06 Nov 1994 08:49:38 GMT", true));
        assert!(!matches(b"e", true));
    }

    #[test]
    fn not_modified_since_a_date_at_or_after_the_last_modification() {
        const LAST_MODIFIED: u64 = 784_111_777;
        let now = LAST_MODIFIED + 86_400;
        let at = |value: &str| not_modified_since(value.as_bytes(), LAST_MODIFIED, now);
        assert!(at("Sun, 06 Nov 1994 08:49:37 GMT"));
        assert!(at("Sunday, 06-Nov-94 08:49:38 GMT"));
        assert!(at("Sun Nov  6 08:49:38 1994"));
        assert!(!at("Sun, 06 Nov 1994 08:49:36 GMT"));
        // Later than now: invalid, so ignored.
        assert!(!at("Tue, 08 Nov 1994 08:49:37 GMT"));
        assert!(!at("not a date"));
    }
}
