//! One HTTP/1.1 response read from an upstream connection: the head through
//! httparse, the body delimited by Content-Length, chunked coding, or the
//! connection's close. Bytes accumulate in the connection's buffer, and each
//! read parses the response again from its start: upstream bodies are small
//! (at most `MAX_BODY_LEN`) and usually arrive in one or two reads.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};

use crate::http::request::{list_items, MAX_BODY_LEN, MAX_HEAD_LEN};

const MAX_HEADERS: usize = 64;

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

#[derive(Clone, Copy)]
enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

/// Parses the response in `buf`; `eof` says the upstream closed after it.
pub(crate) fn parse(buf: &BytesMut, eof: bool) -> Parsed {
    let mut slots = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let parser = httparse::ParserConfig::default();
    let head_len = match parser.parse_response_with_uninit_headers(&mut response, buf, &mut slots) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD_LEN => return Parsed::Incomplete,
        Ok(httparse::Status::Partial) => return Parsed::TooLarge,
        Err(_) => return Parsed::Invalid,
    };
    let status = response.code.unwrap_or(0);
    let mut framing = Framing::UntilClose;
    let mut keep_alive = response.version == Some(1);
    for header in response.headers.iter() {
        let value = header.value.trim_ascii();
        if header.name.eq_ignore_ascii_case("content-length") {
            match std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
                Some(length) => framing = Framing::Length(length),
                None => return Parsed::Invalid,
            }
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            framing = if value.eq_ignore_ascii_case(b"chunked") {
                Framing::Chunked
            } else {
                return Parsed::Invalid;
            };
        } else if header.name.eq_ignore_ascii_case("connection") {
            for option in list_items(value) {
                keep_alive &= !option.eq_ignore_ascii_case(b"close");
                keep_alive |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    if status < 200 || status == 204 || status == 304 {
        framing = Framing::Length(0);
    }

    let rest = &buf[head_len..];
    let body = match framing {
        Framing::Length(length) if length as u64 > MAX_BODY_LEN => return Parsed::TooLarge,
        // Anything past the body would be an answer to a request never sent.
        Framing::Length(length) if rest.len() > length => return Parsed::Invalid,
        Framing::Length(length) if rest.len() == length => Bytes::copy_from_slice(rest),
        Framing::Length(_) => return Parsed::Incomplete,
        Framing::Chunked => match dechunk(rest) {
            Ok(Some(body)) => body,
            Ok(None) => return Parsed::Incomplete,
            Err(parsed) => return parsed,
        },
        Framing::UntilClose if rest.len() as u64 > MAX_BODY_LEN => return Parsed::TooLarge,
        Framing::UntilClose if eof => {
            keep_alive = false;
            Bytes::copy_from_slice(rest)
        }
        Framing::UntilClose => return Parsed::Incomplete,
    };
    Parsed::Complete(UpstreamResponse {
        status,
        body,
        keep_alive,
    })
}

/// The data of a complete chunked body, `None` while more is needed.
fn dechunk(mut rest: &[u8]) -> Result<Option<Bytes>, Parsed> {
    let mut body = BytesMut::new();
    loop {
        let (line_len, size) = match httparse::parse_chunk_size(rest) {
            Ok(httparse::Status::Complete(sized)) => sized,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(Parsed::Invalid),
        };
        rest = &rest[line_len..];
        if size == 0 {
            // Trailers are not used. Nothing follows the response (we never
            // pipeline upstream), so it ends where the buffer ends a blank line.
            let ended = rest == b"\r\n" || rest.ends_with(b"\r\n\r\n");
            return Ok(ended.then(|| body.freeze()));
        }
        if (body.len() as u64).saturating_add(size) > MAX_BODY_LEN {
            return Err(Parsed::TooLarge);
        }
        let size = size as usize;
        if rest.len() < size + 2 {
            return Ok(None);
        }
        if &rest[size..size + 2] != b"\r\n" {
            return Err(Parsed::Invalid);
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str, eof: bool) -> Parsed {
        parse(&BytesMut::from(text.as_bytes()), eof)
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
}
