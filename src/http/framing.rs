//! Message framing (RFC 9112 §6): where the body after a head ends, as its
//! `Content-Length` and `Transfer-Encoding` fields say. Requests from clients
//! and responses from the upstream go through these same rules, because two
//! readers that disagree on where a message ends are how request smuggling
//! and response splitting start. Nothing here allocates.

use crate::http::status::ErrorStatus;

/// Largest body read by default, whether sized by Content-Length or chunked:
/// a request's unless `--max-body` (`Config::max_body`) sets another limit,
/// and always the upstream's answer.
pub(crate) const MAX_BODY_LEN: u64 = 1024 * 1024;

/// How the body that follows a head is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFraming {
    Empty,
    Length(u64),
    Chunked,
}

/// The non-empty, trimmed items of a comma-separated header value.
pub(crate) fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|item| !item.is_empty())
}

/// How the body after a head is delimited, before any limit is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// Neither field: a request has no body, a response runs to the close.
    Unframed,
    Length(u64),
    /// `chunked` is the one and final transfer coding.
    Chunked,
}

/// Why a head's framing fields cannot delimit its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FramingError {
    /// Malformed or contradictory fields.
    Faulty,
    /// A transfer coding this server does not decode.
    UnknownCoding,
}

impl FramingError {
    /// The answer a request with these fields gets.
    pub(crate) fn status(self) -> ErrorStatus {
        match self {
            FramingError::Faulty => ErrorStatus::BadRequest,
            FramingError::UnknownCoding => ErrorStatus::NotImplemented,
        }
    }
}

/// The framing fields of one head, taken in one field at a time, in order.
#[derive(Debug, Default)]
pub(crate) struct FramingFields {
    content_length: Option<u64>,
    transfer_coding: TransferCoding,
}

impl FramingFields {
    /// Takes in one header field; fields other than the two framing ones are
    /// ignored. A bad `Content-Length` is refused at once.
    pub(crate) fn read(&mut self, name: &str, value: &[u8]) -> Result<(), FramingError> {
        let value = value.trim_ascii();
        if name.eq_ignore_ascii_case("content-length") {
            let length = parse_content_length(value).ok_or(FramingError::Faulty)?;
            // Repeated, the values must agree: which one wins is ambiguous.
            if self.content_length.is_some_and(|seen| seen != length) {
                return Err(FramingError::Faulty);
            }
            self.content_length = Some(length);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            self.transfer_coding = self.transfer_coding.present();
            for coding in list_items(value) {
                self.transfer_coding = self.transfer_coding.then(coding);
            }
        }
        Ok(())
    }

    /// The framing, once every field of the head has been read.
    pub(crate) fn framing(self, http10: bool) -> Result<Framing, FramingError> {
        // HTTP/1.0 has no transfer codings: its framing is faulty (RFC 9112 6.1).
        if http10 && !matches!(self.transfer_coding, TransferCoding::Absent) {
            return Err(FramingError::Faulty);
        }
        match (self.transfer_coding, self.content_length) {
            (TransferCoding::Absent, None) => Ok(Framing::Unframed),
            (TransferCoding::Absent, Some(length)) => Ok(Framing::Length(length)),
            // Both framings at once is how request smuggling starts.
            (_, Some(_)) => Err(FramingError::Faulty),
            (TransferCoding::Chunked, None) => Ok(Framing::Chunked),
            (TransferCoding::Empty | TransferCoding::ChunkedNotLast, None) => {
                Err(FramingError::Faulty)
            }
            (TransferCoding::Unknown, None) => Err(FramingError::UnknownCoding),
        }
    }
}

/// What the Transfer-Encoding headers, read in order, amount to.
#[derive(Debug, Default, Clone, Copy)]
enum TransferCoding {
    #[default]
    Absent,
    /// A Transfer-Encoding header listing no coding: chunked is not the
    /// final coding, so the body cannot be delimited (RFC 9112 §6.3).
    Empty,
    /// `chunked` is the final coding: the only framing we decode.
    Chunked,
    /// A coding after `chunked`: the body cannot be delimited.
    ChunkedNotLast,
    /// A coding we do not implement (gzip, identity, ...).
    Unknown,
}

impl TransferCoding {
    /// A Transfer-Encoding header was seen, before its codings are read.
    fn present(self) -> TransferCoding {
        match self {
            TransferCoding::Absent => TransferCoding::Empty,
            seen => seen,
        }
    }

    fn then(self, coding: &[u8]) -> TransferCoding {
        match self {
            TransferCoding::Unknown => TransferCoding::Unknown,
            _ if !coding.eq_ignore_ascii_case(b"chunked") => match self {
                TransferCoding::Chunked | TransferCoding::ChunkedNotLast => {
                    TransferCoding::ChunkedNotLast
                }
                _ => TransferCoding::Unknown,
            },
            TransferCoding::Absent | TransferCoding::Empty => TransferCoding::Chunked,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Header fields, as names and values.
    type Fields<'a> = &'a [(&'a str, &'a str)];

    fn framing(fields: Fields, http10: bool) -> Result<Framing, FramingError> {
        let mut framing = FramingFields::default();
        for (name, value) in fields {
            framing.read(name, value.as_bytes())?;
        }
        framing.framing(http10)
    }

    #[test]
    fn reads_each_framing() {
        assert_eq!(framing(&[("Host", "a")], false), Ok(Framing::Unframed));
        let twice = [("Content-Length", " 5 "), ("content-length", "5")];
        assert_eq!(framing(&twice, false), Ok(Framing::Length(5)));
        let chunked = [("Transfer-Encoding", "Chunked")];
        assert_eq!(framing(&chunked, false), Ok(Framing::Chunked));
    }

    /// Nineteen digits always fit in a u64 and are read, leading zeros and
    /// all; twenty are refused unread (they could overflow).
    #[test]
    fn content_length_takes_up_to_nineteen_digits() {
        assert_eq!(parse_content_length(b"0000000000000000005"), Some(5));
        assert_eq!(
            parse_content_length(b"9999999999999999999"),
            Some(9_999_999_999_999_999_999)
        );
        assert_eq!(parse_content_length(b"00000000000000000005"), None);
        assert_eq!(parse_content_length(b"5"), Some(5));
        assert_eq!(parse_content_length(b""), None);
    }

    #[test]
    fn refuses_what_cannot_be_delimited() {
        use FramingError::*;
        let cases: [(Fields, bool, FramingError); 10] = [
            (&[("Content-Length", "+5")], false, Faulty),
            (&[("Content-Length", "2, 3")], false, Faulty),
            (&[("Content-Length", "5, 5")], false, Faulty),
            (&[("Content-Length", "")], false, Faulty),
            (
                &[("Content-Length", "2"), ("Content-Length", "3")],
                false,
                Faulty,
            ),
            (
                &[("Content-Length", "2"), ("Transfer-Encoding", "chunked")],
                false,
                Faulty,
            ),
            (
                &[
                    ("Transfer-Encoding", "chunked"),
                    ("Transfer-Encoding", "chunked"),
                ],
                false,
                Faulty,
            ),
            (&[("Transfer-Encoding", "chunked")], true, Faulty),
            (&[("Transfer-Encoding", "")], false, Faulty),
            (
                &[("Transfer-Encoding", "gzip, chunked")],
                false,
                UnknownCoding,
            ),
        ];
        for (fields, http10, error) in cases {
            assert_eq!(framing(fields, http10), Err(error), "{fields:?}");
        }
    }
}
