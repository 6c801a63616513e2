//! A `Transfer-Encoding: chunked` body decoder. It either discards the data
//! (`skip`: a request body no route looks at must still be read to find
//! where the next pipelined request starts) or delivers it (`decode`: bodies
//! that are used, such as the upstream's answers). The decoder is a state
//! machine fed whatever bytes have arrived, so a body split at any byte
//! boundary decodes.

use bytes::BytesMut;

use crate::http::request::MAX_HEAD_LEN;
use crate::http::status::ErrorStatus;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before a chunk-size line (`1a;ext=1\r\n`).
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// After a chunk's data: the CR then LF that end it.
    DataCr,
    DataLf,
    /// In the trailer section: the current line's length so far, and whether
    /// it holds anything but CR (a blank line ends the body).
    Trailer {
        line_len: usize,
        content: bool,
    },
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkedDecoder {
    state: State,
    body_len: u64,
    /// The most data the chunks may carry in all; past it, 413.
    max_body: u64,
}

/// What one call to [`ChunkedDecoder::skip`] or [`ChunkedDecoder::decode`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skipped {
    /// The body goes on. This many bytes were consumed: all of the input but
    /// an incomplete chunk-size line, which the caller keeps for the next call.
    NeedMore(usize),
    /// The body ended after this many bytes of the input.
    Done(usize),
}

impl ChunkedDecoder {
    /// A decoder for a body whose chunks carry at most `max_body` bytes.
    pub(crate) fn new(max_body: u64) -> Self {
        ChunkedDecoder {
            state: State::Size,
            body_len: 0,
            max_body,
        }
    }
}

/// Where the data of the chunks goes: nowhere, or into a buffer. Both ways
/// run the one state machine, and skipping never allocates.
trait Sink {
    fn put(&mut self, data: &[u8]);
}

impl Sink for () {
    fn put(&mut self, _data: &[u8]) {}
}

impl Sink for BytesMut {
    fn put(&mut self, data: &[u8]) {
        self.extend_from_slice(data);
    }
}

impl ChunkedDecoder {
    /// Consumes body bytes from the start of `input`, dropping the data.
    pub(crate) fn skip(&mut self, input: &[u8]) -> Result<Skipped, ErrorStatus> {
        self.run(input, &mut ())
    }

    /// Consumes body bytes from the start of `input` as [`Self::skip`] does,
    /// and appends the data of the chunks to `body`.
    pub(crate) fn decode(
        &mut self,
        input: &[u8],
        body: &mut BytesMut,
    ) -> Result<Skipped, ErrorStatus> {
        self.run(input, body)
    }

    fn run<S: Sink>(&mut self, input: &[u8], sink: &mut S) -> Result<Skipped, ErrorStatus> {
        let mut pos = 0;
        while pos < input.len() {
            let rest = &input[pos..];
            match self.state {
                State::Size => match size_line(up_to_limit(rest))? {
                    Some((line_len, size)) => {
                        pos += line_len;
                        self.body_len = self.body_len.saturating_add(size);
                        if self.body_len > self.max_body {
                            return Err(ErrorStatus::PayloadTooLarge);
                        }
                        self.state = if size == 0 {
                            State::Trailer {
                                line_len: 0,
                                content: false,
                            }
                        } else {
                            State::Data(size)
                        };
                    }
                    // Keep the partial size line for the next call, within reason.
                    None if rest.len() <= MAX_HEAD_LEN => return Ok(Skipped::NeedMore(pos)),
                    None => return Err(ErrorStatus::BadRequest),
                },
                State::Data(left) => {
                    let take = left.min(rest.len() as u64);
                    sink.put(&rest[..take as usize]);
                    pos += take as usize;
                    self.state = if take == left {
                        State::DataCr
                    } else {
                        State::Data(left - take)
                    };
                }
                State::DataCr | State::DataLf => {
                    let expected = if self.state == State::DataCr {
                        b'\r'
                    } else {
                        b'\n'
                    };
                    if rest[0] != expected {
                        return Err(ErrorStatus::BadRequest);
                    }
                    pos += 1;
                    self.state = if self.state == State::DataCr {
                        State::DataLf
                    } else {
                        State::Size
                    };
                }
                State::Trailer { line_len, content } => {
                    let end = rest.iter().position(|&b| b == b'\n');
                    let line = &rest[..end.unwrap_or(rest.len())];
                    let line_len = line_len + line.len();
                    if line_len > MAX_HEAD_LEN {
                        return Err(ErrorStatus::HeaderFieldsTooLarge);
                    }
                    let content = content || line.iter().any(|&b| b != b'\r');
                    pos += line.len();
                    self.state = match end {
                        None => State::Trailer { line_len, content },
                        Some(_) => {
                            pos += 1;
                            if content {
                                State::Trailer {
                                    line_len: 0,
                                    content: false,
                                }
                            } else {
                                State::Done
                            }
                        }
                    };
                }
                State::Done => break,
            }
            if self.state == State::Done {
                return Ok(Skipped::Done(pos));
            }
        }
        Ok(Skipped::NeedMore(pos))
    }
}

/// Where a chunk-size line parser stands after a byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// In the size; hex digits seen so far.
    Size(usize),
    /// Whitespace after the size or an extension, which only `;` may follow.
    Bws,
    /// After `;`: whitespace, then an extension name.
    NameStart,
    Name,
    /// Whitespace after a name: `=`, `;` or nothing else.
    NameBws,
    /// After `=`: whitespace, then a token or a quoted string.
    ValueStart,
    Token,
    Quoted,
    /// After a backslash in a quoted string.
    Escaped,
    /// After a quoted string's closing quote.
    QuotedEnd,
    /// After the CR that must end the line.
    Cr,
}

/// Parses the chunk-size line at the start of `input`: its length and the
/// size, or `None` if it has not all arrived. The grammar is RFC 9112
/// §7.1.1 taken strictly, `1*HEXDIG *( BWS ";" BWS name [ BWS "=" BWS
/// value ] ) CRLF` with a token for the name and a token or quoted string
/// for the value. Extensions are checked and ignored. The line is refused
/// at its first byte that cannot belong to it (a bare LF, a control byte,
/// whitespace before the line end), so the answer never depends on where
/// reads end and never waits for bytes that cannot help.
fn size_line(input: &[u8]) -> Result<Option<(usize, u64)>, ErrorStatus> {
    let mut size: u64 = 0;
    let mut line = Line::Size(0);
    for (at, &b) in input.iter().enumerate() {
        line = match (line, b) {
            (Line::Size(digits), _) => match (b as char).to_digit(16) {
                Some(digit) => {
                    // A size past the body limit is refused (413) once the
                    // line ends; one past any number is no size at all
                    // (Http11Probe's MAL-CHUNK-SIZE-OVERFLOW): 400, at the
                    // digit that overflows.
                    size = size
                        .checked_mul(16)
                        .and_then(|size| size.checked_add(u64::from(digit)))
                        .ok_or(ErrorStatus::BadRequest)?;
                    Line::Size(digits + 1)
                }
                None if digits == 0 => return Err(ErrorStatus::BadRequest),
                None if b == b' ' || b == b'\t' => Line::Bws,
                None if b == b';' => Line::NameStart,
                None if b == b'\r' => Line::Cr,
                None => return Err(ErrorStatus::BadRequest),
            },
            (Line::Bws, b' ' | b'\t') => Line::Bws,
            (Line::NameStart, b' ' | b'\t') => Line::NameStart,
            (Line::NameStart | Line::Name, _) if is_tchar(b) => Line::Name,
            (Line::Name | Line::NameBws, b' ' | b'\t') => Line::NameBws,
            (Line::Name | Line::NameBws, b'=') => Line::ValueStart,
            (Line::ValueStart, b' ' | b'\t') => Line::ValueStart,
            (Line::ValueStart, b'"') => Line::Quoted,
            (Line::ValueStart | Line::Token, _) if is_tchar(b) => Line::Token,
            (Line::Token | Line::QuotedEnd, b' ' | b'\t') => Line::Bws,
            (Line::Quoted, b'"') => Line::QuotedEnd,
            (Line::Quoted, b'\\') => Line::Escaped,
            (Line::Quoted, _) if is_qdtext(b) => Line::Quoted,
            (Line::Escaped, _) if is_qdtext(b) || b == b'"' || b == b'\\' => Line::Quoted,
            (Line::Bws | Line::Name | Line::NameBws | Line::Token | Line::QuotedEnd, b';') => {
                Line::NameStart
            }
            (Line::Name | Line::Token | Line::QuotedEnd, b'\r') => Line::Cr,
            (Line::Cr, b'\n') => return Ok(Some((at + 1, size))),
            _ => return Err(ErrorStatus::BadRequest),
        };
    }
    Ok(None)
}

/// A token character (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A character of a quoted string other than `"` and `\` (RFC 9110 §5.6.4).
fn is_qdtext(b: u8) -> bool {
    matches!(b, b'\t' | b' ' | 0x21 | 0x23..=0x5B | 0x5D..=0x7E | 0x80..=0xFF)
}

/// The bytes a size line may take. Nothing past the limit is parsed, so a
/// longer size line is refused whether it arrives in one read or in several.
fn up_to_limit(input: &[u8]) -> &[u8] {
    &input[..input.len().min(MAX_HEAD_LEN)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::MAX_BODY_LEN;

    /// Feeds `body` in pieces of `step` bytes, carrying unconsumed bytes over
    /// as a connection does; returns the offset where the body ended.
    fn decode_in_steps(body: &[u8], step: usize) -> Result<Option<usize>, ErrorStatus> {
        let mut decoder = ChunkedDecoder::new(MAX_BODY_LEN);
        let mut start = 0;
        let mut end = 0;
        while end < body.len() {
            end = (end + step).min(body.len());
            match decoder.skip(&body[start..end])? {
                Skipped::Done(len) => return Ok(Some(start + len)),
                Skipped::NeedMore(consumed) => start += consumed,
            }
        }
        Ok(None)
    }

    #[test]
    fn finds_the_end_at_every_split() {
        let body = b"5\r\nhello\r\n1a;name=value\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        for step in 1..body.len() {
            assert_eq!(
                decode_in_steps(body, step),
                Ok(Some(body.len() - 4)),
                "step {step}"
            );
        }
    }

    /// Feeds `body` in reads that end at each of `ends` and then at its end,
    /// through `decode`; returns where the body ended and the data delivered.
    fn decode_in_reads(body: &[u8], ends: &[usize]) -> (Option<usize>, BytesMut) {
        let mut decoder = ChunkedDecoder::new(MAX_BODY_LEN);
        let mut data = BytesMut::new();
        let mut start = 0;
        for &end in ends.iter().chain([&body.len()]) {
            match decoder.decode(&body[start..end], &mut data) {
                Ok(Skipped::Done(len)) => return (Some(start + len), data),
                Ok(Skipped::NeedMore(consumed)) => start += consumed,
                Err(status) => panic!("{status:?} at {end}"),
            }
        }
        (None, data)
    }

    #[test]
    fn decode_delivers_the_data_at_every_split() {
        let body = b"5\r\nhello\r\n1a;name=value\r\nabcdefghijklmnopqrstuvwxyz\r\n1\r\n!\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        let data = &b"helloabcdefghijklmnopqrstuvwxyz!"[..];
        let end = Some(body.len() - 4);
        assert_eq!(decode_in_reads(body, &[]), (end, BytesMut::from(data)));
        for cut in 0..body.len() {
            let (ended, got) = decode_in_reads(body, &[cut]);
            assert_eq!((ended, &got[..]), (end, data), "cut at {cut}");
        }
        let every_byte: Vec<usize> = (0..body.len()).collect();
        let (ended, got) = decode_in_reads(body, &every_byte);
        assert_eq!((ended, &got[..]), (end, data), "byte by byte");
        // A body not yet ended has delivered the data of what arrived.
        let (ended, got) = decode_in_reads(&body[..30], &[]);
        assert_eq!((ended, &got[..]), (None, &b"helloabcde"[..]));
    }

    #[test]
    fn rejects_bad_framing_and_large_bodies() {
        assert_eq!(
            decode_in_steps(b"5\r\nhelloXX", 3),
            Err(ErrorStatus::BadRequest)
        );
        assert_eq!(decode_in_steps(b"zz\r\n", 4), Err(ErrorStatus::BadRequest));
        assert_eq!(
            decode_in_steps(b"100001\r\n", 8),
            Err(ErrorStatus::PayloadTooLarge)
        );
        assert_eq!(decode_in_steps(b"5\r\nhel", 2), Ok(None));
    }

    /// A size that no `u64` holds is malformed (400); the largest that
    /// one does is a valid size over the limit (413); leading zeros are
    /// no overflow.
    #[test]
    fn a_size_past_any_number_is_malformed_not_too_large() {
        let overflow = b"FFFFFFFFFFFFFFFF0\r\n";
        assert_eq!(size_line(overflow), Err(ErrorStatus::BadRequest));
        assert_eq!(
            size_line(&overflow[..16]),
            Ok(None),
            "refused at the digit past"
        );
        assert_eq!(
            size_line(b"10000000000000000\r\n"),
            Err(ErrorStatus::BadRequest)
        );
        let largest = b"FFFFFFFFFFFFFFFF\r\n";
        assert_eq!(size_line(largest), Ok(Some((largest.len(), u64::MAX))));
        let padded = b"000000000000000000000005\r\n";
        assert_eq!(size_line(padded), Ok(Some((padded.len(), 5))));
        assert_eq!(
            decode_in_steps(overflow, 5),
            Err(ErrorStatus::BadRequest),
            "in pieces too"
        );
        assert_eq!(
            decode_in_steps(largest, 5),
            Err(ErrorStatus::PayloadTooLarge)
        );
    }

    #[test]
    fn accepts_extensions_by_the_grammar() {
        let lines: [&[u8]; 9] = [
            b"5\r\n",
            b"00005\r\n",
            b"5;a\r\n",
            b"5 ;a\r\n",
            b"5\t; a ;b\r\n",
            b"5;a=1\r\n",
            b"5;a = tok~en ; b\r\n",
            b"5;a=\"q \\\" \\\\ \t\x80\" ;b=\"\"\r\n",
            b"5;!#$%&'*+-.^_`|~=x\r\n",
        ];
        for line in lines {
            let text = String::from_utf8_lossy(line);
            assert_eq!(size_line(line), Ok(Some((line.len(), 5))), "{text:?}");
            let mut cut = line.to_vec();
            cut.pop();
            assert_eq!(size_line(&cut), Ok(None), "{text:?} without its LF");
        }
    }

    #[test]
    fn refuses_malformed_size_lines_at_the_first_bad_byte() {
        let lines: [&[u8]; 17] = [
            b"5;\n",
            b"5\n",
            b"5;a\n",
            b"5;\r",
            b"5; \r",
            b"5;bad[",
            b"5 \r",
            b"5;a \r",
            b"5;a=1 \r",
            b"5;a=\"x\" \r",
            b"5;a=\r",
            b"5;a=\x00",
            b"5;a\x01",
            b"5;a=\"\x7f",
            b"5;a=\"\\\n",
            b";",
            b"5\rx",
        ];
        for line in lines {
            let text = String::from_utf8_lossy(line);
            assert_eq!(size_line(line), Err(ErrorStatus::BadRequest), "{text:?}");
            let before = &line[..line.len() - 1];
            assert_eq!(size_line(before), Ok(None), "{text:?} refused early");
        }
    }

    /// The limits are reached, not passed: a body of exactly the body limit
    /// and a trailer line of exactly the head limit are taken; one byte
    /// more is refused, whether it comes in one chunk or in two.
    #[test]
    fn the_limits_themselves_are_allowed() {
        let mut at_limit = ChunkedDecoder::new(MAX_BODY_LEN);
        let size = format!("{MAX_BODY_LEN:x}\r\n");
        let len = size.len();
        assert_eq!(at_limit.skip(size.as_bytes()), Ok(Skipped::NeedMore(len)));
        let split = format!("1\r\nx\r\n{:x}\r\n", MAX_BODY_LEN - 1);
        assert_eq!(decode_in_steps(split.as_bytes(), split.len()), Ok(None));
        let over = format!("1\r\nx\r\n{MAX_BODY_LEN:x}\r\n");
        let refused = Err(ErrorStatus::PayloadTooLarge);
        assert_eq!(decode_in_steps(over.as_bytes(), over.len()), refused);

        // The trailer line's length counts its CR, not its LF.
        let trailer = |len: usize| format!("0\r\nX: {}\r\n\r\n", "t".repeat(len - 4));
        let longest = trailer(MAX_HEAD_LEN);
        let end = Ok(Some(longest.len()));
        assert_eq!(decode_in_steps(longest.as_bytes(), 7), end);
        let longer = trailer(MAX_HEAD_LEN + 1);
        let refused = Err(ErrorStatus::HeaderFieldsTooLarge);
        assert_eq!(decode_in_steps(longer.as_bytes(), 7), refused);
    }

    /// Whitespace after the size may be several bytes, spaces and tabs.
    #[test]
    fn whitespace_after_the_size_may_repeat() {
        for line in [&b"5  ;a\r\n"[..], b"5\t \t;a=b\r\n", b"5;a=b \t ;c\r\n"] {
            let text = String::from_utf8_lossy(line);
            assert_eq!(size_line(line), Ok(Some((line.len(), 5))), "{text:?}");
        }
    }

    /// A bare LF after an extension used to wait for a CRLF that never came.
    #[test]
    fn a_bare_lf_in_an_extension_is_refused_at_once() {
        assert_eq!(
            decode_in_steps(b"5;\nhello\n0\n\n", 16),
            Err(ErrorStatus::BadRequest)
        );
    }

    /// A chunk-size line longer than the limit was refused when a read ended
    /// inside it and accepted when it came whole: it must be refused both ways.
    #[test]
    fn long_size_lines_are_refused_however_they_arrive() {
        let body = format!("1;{}\r\nx\r\n0\r\n\r\n", "e".repeat(MAX_HEAD_LEN));
        let whole = decode_in_steps(body.as_bytes(), body.len());
        assert_eq!(whole, Err(ErrorStatus::BadRequest));
        assert_eq!(decode_in_steps(body.as_bytes(), 4096), whole);
    }
}
