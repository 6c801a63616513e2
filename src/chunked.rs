//! A `Transfer-Encoding: chunked` request body decoder that discards the data.
//! The routes never look at request bodies, but the body must be read to find
//! where the next pipelined request starts. The decoder is a state machine fed
//! whatever bytes have arrived, so a body split at any byte boundary decodes.

use crate::request::{MAX_BODY_LEN, MAX_HEAD_LEN};
use crate::response::ErrorStatus;

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
pub struct ChunkedDecoder {
    state: State,
    body_len: u64,
}

/// What one call to [`ChunkedDecoder::skip`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// The body goes on. This many bytes were consumed: all of the input but
    /// an incomplete chunk-size line, which the caller keeps for the next call.
    NeedMore(usize),
    /// The body ended after this many bytes of the input.
    Done(usize),
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder {
            state: State::Size,
            body_len: 0,
        }
    }
}

impl ChunkedDecoder {
    /// Consumes body bytes from the start of `input`.
    pub fn skip(&mut self, input: &[u8]) -> Result<Skipped, ErrorStatus> {
        let mut pos = 0;
        while pos < input.len() {
            let rest = &input[pos..];
            match self.state {
                State::Size => match httparse::parse_chunk_size(up_to_limit(rest)) {
                    Ok(httparse::Status::Complete((line_len, size))) => {
                        pos += line_len;
                        self.body_len = self.body_len.saturating_add(size);
                        if self.body_len > MAX_BODY_LEN {
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
                    Ok(httparse::Status::Partial) if rest.len() <= MAX_HEAD_LEN => {
                        return Ok(Skipped::NeedMore(pos))
                    }
                    Ok(httparse::Status::Partial) | Err(_) => return Err(ErrorStatus::BadRequest),
                },
                State::Data(left) => {
                    let take = left.min(rest.len() as u64);
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

/// The bytes a size line may take. Nothing past the limit is parsed, so a
/// longer size line is refused whether it arrives in one read or in several.
fn up_to_limit(input: &[u8]) -> &[u8] {
    &input[..input.len().min(MAX_HEAD_LEN)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `body` in pieces of `step` bytes, carrying unconsumed bytes over
    /// as a connection does; returns the offset where the body ended.
    fn decode_in_steps(body: &[u8], step: usize) -> Result<Option<usize>, ErrorStatus> {
        let mut decoder = ChunkedDecoder::default();
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
