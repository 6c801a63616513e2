//! The HTTP/1.1 responses read from one upstream connection: the head
//! through httparse, the body delimited by Content-Length, chunked coding, or
//! the connection's close, under the same framing rules as requests
//! ([`crate::http::framing`]). The parser keeps where it stands between
//! reads: once the head has all arrived it is not parsed again, and each read
//! of the body only looks at the bytes it brought. It does no I/O: the caller appends what it reads to a buffer and
//! hands that over.

use std::cmp::Ordering;
use std::mem::{self, MaybeUninit};

use bytes::{Bytes, BytesMut};

use crate::http::chunked::{ChunkedDecoder, Skipped};
use crate::http::framing::{Framing, FramingFields};
use crate::http::request::{list_items, MAX_BODY_LEN, MAX_HEADERS, MAX_HEAD_LEN};
use crate::http::status::ErrorStatus;

/// A complete upstream response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UpstreamResponse {
    pub status: u16,
    pub body: Bytes,
    /// The connection can carry another request.
    pub keep_alive: bool,
}

/// What the bytes read so far amount to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// More bytes are needed; after `eof`, the upstream closed too early.
    Incomplete,
    Complete(UpstreamResponse),
    /// Not HTTP, or cut short: the connection is unusable.
    Invalid,
    /// A head or body over the limits: the connection is unusable.
    TooLarge,
}

/// Reads the responses of one upstream connection, one after another.
#[derive(Debug, Default)]
pub(crate) struct ResponseParser {
    /// The head of the response being read, once it has all arrived.
    head: Option<Head>,
}

#[derive(Debug)]
struct Head {
    /// How many bytes at the start of the buffer the head takes.
    len: usize,
    status: u16,
    keep_alive: bool,
    body: Body,
}

/// How the body is delimited, and how far it has come.
#[derive(Debug)]
enum Body {
    /// Exactly this many bytes follow the head.
    Length(usize),
    /// The first `fed` bytes after the head went through the decoder, which
    /// put their data in `data`; an incomplete chunk-size line is fed again.
    Chunked {
        decoder: ChunkedDecoder,
        fed: usize,
        data: BytesMut,
    },
    /// Everything up to the upstream's close.
    UntilClose,
}

impl ResponseParser {
    /// Reads the response in `buf`: every byte received since the previous
    /// response ended, to which the caller only appends between calls. `eof`
    /// says the upstream closed after them. A complete response is taken out
    /// of `buf`, and the parser is then ready for the next one.
    pub(crate) fn parse(&mut self, buf: &mut BytesMut, eof: bool) -> Parsed {
        let head = match &mut self.head {
            Some(head) => head,
            None => match read_head(buf) {
                Ok(head) => self.head.insert(head),
                Err(parsed) => return parsed,
            },
        };
        let rest = &buf[head.len..];
        let body = match &mut head.body {
            Body::Length(length) => match rest.len().cmp(length) {
                Ordering::Less => return Parsed::Incomplete,
                // Anything past the body would be an answer to a request never sent.
                Ordering::Greater => return Parsed::Invalid,
                Ordering::Equal => Bytes::copy_from_slice(rest),
            },
            Body::Chunked { decoder, fed, data } => match decoder.decode(&rest[*fed..], data) {
                Ok(Skipped::NeedMore(len)) => {
                    *fed += len;
                    return Parsed::Incomplete;
                }
                Ok(Skipped::Done(len)) if *fed + len < rest.len() => return Parsed::Invalid,
                Ok(Skipped::Done(_)) => mem::take(data).freeze(),
                Err(ErrorStatus::PayloadTooLarge | ErrorStatus::HeaderFieldsTooLarge) => {
                    return Parsed::TooLarge
                }
                Err(_) => return Parsed::Invalid,
            },
            Body::UntilClose if rest.len() as u64 > MAX_BODY_LEN => return Parsed::TooLarge,
            Body::UntilClose if eof => {
                head.keep_alive = false;
                Bytes::copy_from_slice(rest)
            }
            Body::UntilClose => return Parsed::Incomplete,
        };
        let response = UpstreamResponse {
            status: head.status,
            body,
            keep_alive: head.keep_alive,
        };
        self.head = None;
        buf.clear();
        Parsed::Complete(response)
    }
}

/// The head at the start of `buf`, or what to answer while there is none.
fn read_head(buf: &[u8]) -> Result<Head, Parsed> {
    let mut slots = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let parser = httparse::ParserConfig::default();
    // Nothing past the limit is parsed, so a head over it is refused
    // however the reads cut it.
    let limited = &buf[..buf.len().min(MAX_HEAD_LEN)];
    let len = match parser.parse_response_with_uninit_headers(&mut response, limited, &mut slots) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD_LEN => {
            return Err(Parsed::Incomplete)
        }
        Ok(httparse::Status::Partial) => return Err(Parsed::TooLarge),
        Err(_) => return Err(Parsed::Invalid),
    };
    let status = response.code.unwrap_or(0);
    let http10 = response.version == Some(0);
    let mut keep_alive = response.version == Some(1);
    let mut framing = FramingFields::default();
    for header in response.headers.iter() {
        if framing.read(header.name, header.value).is_err() {
            return Err(Parsed::Invalid);
        }
        if header.name.eq_ignore_ascii_case("connection") {
            for option in list_items(header.value.trim_ascii()) {
                keep_alive &= !option.eq_ignore_ascii_case(b"close");
                keep_alive |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    let Ok(framing) = framing.framing(http10) else {
        return Err(Parsed::Invalid);
    };
    // These never have a body, whatever their framing fields say.
    let body = if status < 200 || status == 204 || status == 304 {
        Body::Length(0)
    } else {
        match framing {
            Framing::Unframed => Body::UntilClose,
            Framing::Length(length) if length > MAX_BODY_LEN => return Err(Parsed::TooLarge),
            Framing::Length(length) => Body::Length(length as usize),
            Framing::Chunked => Body::Chunked {
                decoder: ChunkedDecoder::new(MAX_BODY_LEN),
                fed: 0,
                data: BytesMut::new(),
            },
        }
    };
    Ok(Head {
        len,
        status,
        keep_alive,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The response in `text`, arrived in one read.
    fn parse_str(text: &str, eof: bool) -> Parsed {
        ResponseParser::default().parse(&mut BytesMut::from(text.as_bytes()), eof)
    }

    /// The response in `text`, arrived in reads that end at each of `ends`
    /// and then at its end, fed to one parser as the pool does.
    fn parse_in_reads(text: &str, ends: &[usize], eof: bool) -> Parsed {
        let mut parser = ResponseParser::default();
        let mut buf = BytesMut::new();
        let mut start = 0;
        for &end in ends {
            buf.extend_from_slice(&text.as_bytes()[start..end]);
            start = end;
            match parser.parse(&mut buf, false) {
                Parsed::Incomplete => {}
                done => return done,
            }
        }
        buf.extend_from_slice(&text.as_bytes()[start..]);
        parser.parse(&mut buf, eof)
    }

    fn complete(status: u16, body: &str, keep_alive: bool) -> Parsed {
        Parsed::Complete(UpstreamResponse {
            status,
            body: Bytes::copy_from_slice(body.as_bytes()),
            keep_alive,
        })
    }

    #[test]
    fn reads_every_framing() {
        let sized = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_str(sized, false), complete(200, "{}", true));
        assert_eq!(
            parse_str(&sized[..sized.len() - 1], false),
            Parsed::Incomplete
        );
        let trailers =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: 1\r\nB: 2\r\n\r\n";
        assert_eq!(parse_str(trailers, false), complete(200, "", true));
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n[\r\n1;x=y\r\n]\r\n0\r\n\r\n";
        assert_eq!(parse_str(chunked, false), complete(200, "[]", true));
        for cut in 1..chunked.len() - 40 {
            assert_eq!(
                parse_str(&chunked[..chunked.len() - cut], false),
                Parsed::Incomplete
            );
        }
        let closing = "HTTP/1.0 200 OK\r\n\r\n[1]";
        assert_eq!(parse_str(closing, false), Parsed::Incomplete);
        assert_eq!(parse_str(closing, true), complete(200, "[1]", false));
        let close = "HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(parse_str(close, false), complete(503, "", false));
    }

    #[test]
    fn refuses_broken_responses() {
        for (text, eof) in [
            ("SMTP ready\r\n\r\n", false),
            ("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false),
            ("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n{}", false),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX",
                false,
            ),
        ] {
            assert_eq!(parse_str(text, eof), Parsed::Invalid, "{text:?}");
        }
        // Cut short by the upstream's close: the caller sees `eof` too.
        for text in [
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}",
            "HTTP/1.1 2",
            "",
        ] {
            assert_eq!(parse_str(text, true), Parsed::Incomplete, "{text:?}");
        }
        for text in [
            "HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n",
            // A chunk size near u64::MAX must not overflow the size check.
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\nffffffffffffffff\r\n",
        ] {
            assert_eq!(parse_str(text, false), Parsed::TooLarge, "{text:?}");
        }
    }

    #[test]
    fn applies_the_request_side_framing_rules() {
        for text in [
            "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}",
            "HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\n{}",
            "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\n{}",
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 2\r\n\r\n{}",
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ] {
            assert_eq!(parse_str(text, true), Parsed::Invalid, "{text:?}");
        }
        let repeated = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length:  2\r\n\r\n{}";
        assert_eq!(parse_str(repeated, false), complete(200, "{}", true));
        // Statuses without a body ignore a length past the limit, not a bad one.
        let not_modified = "HTTP/1.1 304 Not Modified\r\nContent-Length: 2000000\r\n\r\n";
        assert_eq!(parse_str(not_modified, false), complete(304, "", true));
        let bad = "HTTP/1.1 304 Not Modified\r\nContent-Length: +1\r\n\r\n";
        assert_eq!(parse_str(bad, false), Parsed::Invalid);
    }

    #[test]
    fn chunked_responses_read_the_same_at_every_split() {
        let trailer_line = format!("X: {}\r\n", "t".repeat(MAX_HEAD_LEN));
        let responses = [
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n[\r\n3;x=\"y\"\r\n1,2\r\n1\r\n]\r\n0\r\nA: 1\r\n\r\n".to_string(),
            "HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_string(),
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\nX".to_string(),
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;\r\n{}\r\n0\r\n\r\n".to_string(),
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n80000\r\n".to_string()
                + &"x".repeat(0x80000)
                + "\r\n80001\r\n",
            format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n{trailer_line}\r\n"),
        ];
        let whole: Vec<Parsed> = responses
            .iter()
            .map(|text| parse_str(text, false))
            .collect();
        assert_eq!(whole[0], complete(200, "[1,2]", true));
        assert_eq!(whole[1], complete(200, "", false));
        assert_eq!(
            whole[2..],
            [
                Parsed::Invalid,
                Parsed::Invalid,
                Parsed::TooLarge,
                Parsed::TooLarge
            ]
        );
        for (text, whole) in responses.iter().zip(&whole) {
            let cuts = (1..text.len()).step_by(if text.len() > 4096 { 997 } else { 1 });
            for cut in cuts {
                assert_eq!(
                    &parse_in_reads(text, &[cut], false),
                    whole,
                    "{text:.80?} cut at {cut}"
                );
            }
            let small: Vec<usize> = (1..text.len().min(300)).collect();
            assert_eq!(
                &parse_in_reads(text, &small, false),
                whole,
                "{text:.80?} byte by byte"
            );
        }
    }

    #[test]
    fn one_parser_reads_response_after_response() {
        let mut parser = ResponseParser::default();
        let mut buf = BytesMut::new();
        for (text, body) in [
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                "{}",
            ),
            ("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n[1]", "[1]"),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n7\r\n0\r\n\r\n",
                "7",
            ),
        ] {
            let (first, second) = text.split_at(text.len() - 5);
            buf.extend_from_slice(first.as_bytes());
            assert_eq!(
                parser.parse(&mut buf, false),
                Parsed::Incomplete,
                "{text:?}"
            );
            buf.extend_from_slice(second.as_bytes());
            assert_eq!(
                parser.parse(&mut buf, false),
                complete(200, body, true),
                "{text:?}"
            );
            assert!(buf.is_empty(), "{text:?}");
        }
    }

    #[test]
    fn refuses_what_follows_the_body_and_oversized_heads() {
        let trailing = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nHTTP";
        assert_eq!(parse_str(trailing, false), Parsed::Invalid);
        let head = format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "h".repeat(MAX_HEAD_LEN));
        assert_eq!(parse_str(&head, false), Parsed::TooLarge);
        assert_eq!(parse_in_reads(&head, &[4096], false), Parsed::TooLarge);
    }
}
