//! What a NATS server sends, parsed as it arrives, and what a client
//! writes.
//!
//! [`parse`] takes one operation off the front of the bytes read so far,
//! or nothing when the operation is not whole yet (then it consumes
//! nothing, and the next call, with more bytes, starts over). A message's
//! subject, reply and payload are slices of the bytes read (`Bytes`), so
//! parsing copies nothing. Anything that is not the protocol (an unknown
//! operation, a number that is not one, a control line past 4 KiB, a
//! payload past the server's own `max_payload`) is an error: the caller
//! drops the connection, as the official clients do.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The longest control line (`MSG …\r\n`) accepted, as nats-server's own
/// default `max_control_line`.
pub(crate) const MAX_CONTROL_LINE: usize = 4096;

/// One operation a server sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerOp {
    /// `INFO {…}`: the JSON, as sent.
    Info(Bytes),
    /// `MSG` or `HMSG`.
    Msg(Msg),
    Ping,
    Pong,
    /// `+OK` (only in verbose mode, which this client never asks for).
    Ok,
    /// `-ERR '…'`: the text between the quotes.
    Err(String),
}

/// A message delivered to a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Msg {
    pub(crate) subject: Bytes,
    pub(crate) sid: u64,
    pub(crate) reply: Option<Bytes>,
    /// The header block of an `HMSG` (`NATS/1.0…\r\n\r\n`); empty for `MSG`.
    pub(crate) headers: Bytes,
    pub(crate) payload: Bytes,
}

/// Bytes that are not the NATS protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProtoError {
    /// No line end within `MAX_CONTROL_LINE` bytes.
    LineTooLong,
    /// An operation this client does not know, as it began.
    Unknown(String),
    /// A known operation, malformed: what was wrong.
    Malformed(&'static str),
    /// A message larger than the server said it would send.
    TooLarge(usize),
}

impl std::fmt::Display for ProtoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtoError::LineTooLong => write!(f, "a control line past {MAX_CONTROL_LINE} bytes"),
            ProtoError::Unknown(op) => write!(f, "an unknown operation {op:?}"),
            ProtoError::Malformed(what) => write!(f, "a malformed {what}"),
            ProtoError::TooLarge(len) => write!(f, "a message of {len} bytes, past max_payload"),
        }
    }
}

/// Takes the first whole operation off `buf`; `Ok(None)` when the bytes
/// so far hold no whole operation (nothing is consumed then).
/// `max_payload` bounds a message (the server's own, with room for
/// headers).
pub(crate) fn parse(
    buf: &mut BytesMut,
    max_payload: usize,
) -> Result<Option<ServerOp>, ProtoError> {
    let window = &buf[..buf.len().min(MAX_CONTROL_LINE + 2)];
    let Some(newline) = window.iter().position(|&b| b == b'\n') else {
        return match buf.len() > MAX_CONTROL_LINE + 1 {
            true => Err(ProtoError::LineTooLong),
            false => Ok(None),
        };
    };
    let line_end = match newline > 0 && buf[newline - 1] == b'\r' {
        true => newline - 1,
        false => newline,
    };
    let line = &buf[..line_end];
    let (op, rest) = split_op(line);
    let op = op.to_ascii_uppercase();
    match op.as_slice() {
        b"MSG" | b"HMSG" => {
            let with_headers = op.as_slice() == b"HMSG";
            let args = MsgArgs::parse(rest, with_headers)?;
            if args.total > max_payload {
                return Err(ProtoError::TooLarge(args.total));
            }
            let needed = newline + 1 + args.total + 2;
            if buf.len() < needed {
                return Ok(None);
            }
            let line = buf.split_to(newline + 1).freeze();
            let mut body = buf.split_to(args.total).freeze();
            if &buf[..2] != b"\r\n" {
                return Err(ProtoError::Malformed("message end"));
            }
            buf.advance(2);
            let headers = body.split_to(args.header_len);
            let offset = op.len() + 1;
            let slice = |range: std::ops::Range<usize>| {
                line.slice(offset + range.start..offset + range.end)
            };
            Ok(Some(ServerOp::Msg(Msg {
                subject: slice(args.subject),
                sid: args.sid,
                reply: args.reply.map(slice),
                headers,
                payload: body,
            })))
        }
        b"PING" => consume(buf, newline, ServerOp::Ping),
        b"PONG" => consume(buf, newline, ServerOp::Pong),
        b"+OK" => consume(buf, newline, ServerOp::Ok),
        b"-ERR" => {
            let text = String::from_utf8_lossy(rest.trim_ascii())
                .trim_matches('\'')
                .to_string();
            consume(buf, newline, ServerOp::Err(text))
        }
        b"INFO" => {
            let start = line.len() - rest.len();
            let line = buf.split_to(newline + 1).freeze();
            Ok(Some(ServerOp::Info(
                line.slice(start..line_end).trim_ascii_bytes(),
            )))
        }
        _ => {
            let shown = String::from_utf8_lossy(&line[..line.len().min(16)]).into_owned();
            Err(ProtoError::Unknown(shown))
        }
    }
}

/// Drops the control line ending at `newline` and returns `op`.
fn consume(
    buf: &mut BytesMut,
    newline: usize,
    op: ServerOp,
) -> Result<Option<ServerOp>, ProtoError> {
    buf.advance(newline + 1);
    Ok(Some(op))
}

/// The operation's name and what follows it (after one run of spaces or
/// tabs).
fn split_op(line: &[u8]) -> (&[u8], &[u8]) {
    let end = line
        .iter()
        .position(|&b| b == b' ' || b == b'\t')
        .unwrap_or(line.len());
    let rest = &line[end..];
    let skip = rest
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(rest.len());
    (&line[..end], &rest[skip..])
}

trait TrimBytes {
    fn trim_ascii_bytes(self) -> Bytes;
}

impl TrimBytes for Bytes {
    fn trim_ascii_bytes(self) -> Bytes {
        let start = self
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(self.len());
        let end = self
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(start, |end| end + 1);
        self.slice(start..end.max(start))
    }
}

/// The arguments of `MSG subject sid [reply] size` or `HMSG subject sid
/// [reply] header_size total_size`, as ranges of the arguments' bytes.
struct MsgArgs {
    subject: std::ops::Range<usize>,
    sid: u64,
    reply: Option<std::ops::Range<usize>>,
    header_len: usize,
    total: usize,
}

impl MsgArgs {
    fn parse(args: &[u8], with_headers: bool) -> Result<MsgArgs, ProtoError> {
        let mut ranges: [std::ops::Range<usize>; 5] = Default::default();
        let mut count = 0;
        let mut at = 0;
        while at < args.len() {
            if args[at] == b' ' || args[at] == b'\t' {
                at += 1;
                continue;
            }
            let start = at;
            while at < args.len() && args[at] != b' ' && args[at] != b'\t' {
                at += 1;
            }
            if count == ranges.len() {
                return Err(ProtoError::Malformed("message line"));
            }
            ranges[count] = start..at;
            count += 1;
        }
        let sizes = if with_headers { 2 } else { 1 };
        if count != 2 + sizes && count != 3 + sizes {
            return Err(ProtoError::Malformed("message line"));
        }
        let number = |range: &std::ops::Range<usize>| parse_number(&args[range.clone()]);
        let sid = number(&ranges[1])?;
        let reply = (count == 3 + sizes).then(|| ranges[2].clone());
        let total = usize::try_from(number(&ranges[count - 1])?)
            .map_err(|_| ProtoError::Malformed("message size"))?;
        let header_len = match with_headers {
            true => usize::try_from(number(&ranges[count - 2])?)
                .map_err(|_| ProtoError::Malformed("header size"))?,
            false => 0,
        };
        if header_len > total {
            return Err(ProtoError::Malformed("header size"));
        }
        Ok(MsgArgs {
            subject: ranges[0].clone(),
            sid,
            reply,
            header_len,
            total,
        })
    }
}

/// A decimal number of at most 19 digits.
fn parse_number(digits: &[u8]) -> Result<u64, ProtoError> {
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(ProtoError::Malformed("number"));
    }
    Ok(digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

/// `PING`, as either side writes it.
pub(crate) const PING: &[u8] = b"PING\r\n";
/// `PONG`, as either side writes it.
pub(crate) const PONG: &[u8] = b"PONG\r\n";

/// Writes `CONNECT {json}`.
pub(crate) fn write_connect(out: &mut BytesMut, json: &str) {
    out.put_slice(b"CONNECT ");
    out.put_slice(json.as_bytes());
    out.put_slice(b"\r\n");
}

/// Writes `PUB subject [reply] size` and the payload.
pub(crate) fn write_pub(out: &mut BytesMut, subject: &[u8], reply: Option<&[u8]>, payload: &[u8]) {
    out.reserve(subject.len() + reply.map_or(0, <[u8]>::len) + payload.len() + 32);
    out.put_slice(b"PUB ");
    out.put_slice(subject);
    if let Some(reply) = reply {
        out.put_u8(b' ');
        out.put_slice(reply);
    }
    out.put_u8(b' ');
    put_number(out, payload.len() as u64);
    out.put_slice(b"\r\n");
    out.put_slice(payload);
    out.put_slice(b"\r\n");
}

/// Writes `HPUB subject [reply] header_size total_size`, the header
/// block (`NATS/1.0…\r\n\r\n`, see `headers`) and the payload.
pub(crate) fn write_hpub(
    out: &mut BytesMut,
    subject: &[u8],
    reply: Option<&[u8]>,
    headers: &[u8],
    payload: &[u8],
) {
    out.reserve(subject.len() + reply.map_or(0, <[u8]>::len) + headers.len() + payload.len() + 48);
    out.put_slice(b"HPUB ");
    out.put_slice(subject);
    if let Some(reply) = reply {
        out.put_u8(b' ');
        out.put_slice(reply);
    }
    out.put_u8(b' ');
    put_number(out, headers.len() as u64);
    out.put_u8(b' ');
    put_number(out, (headers.len() + payload.len()) as u64);
    out.put_slice(b"\r\n");
    out.put_slice(headers);
    out.put_slice(payload);
    out.put_slice(b"\r\n");
}

/// Writes `SUB subject [queue] sid`.
pub(crate) fn write_sub(out: &mut BytesMut, subject: &[u8], queue: Option<&[u8]>, sid: u64) {
    out.put_slice(b"SUB ");
    out.put_slice(subject);
    if let Some(queue) = queue {
        out.put_u8(b' ');
        out.put_slice(queue);
    }
    out.put_u8(b' ');
    put_number(out, sid);
    out.put_slice(b"\r\n");
}

/// Writes `UNSUB sid`.
pub(crate) fn write_unsub(out: &mut BytesMut, sid: u64) {
    out.put_slice(b"UNSUB ");
    put_number(out, sid);
    out.put_slice(b"\r\n");
}

/// Writes `n` in decimal.
pub(crate) fn put_number(out: &mut BytesMut, n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.put_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 << 20;

    /// Every operation of `input`, fed whole and then in cuts of `cut`
    /// bytes: both must give the same operations.
    fn parse_all(input: &[u8], cut: usize) -> Result<Vec<ServerOp>, ProtoError> {
        let mut buf = BytesMut::new();
        let mut ops = Vec::new();
        for chunk in input.chunks(cut.max(1)) {
            buf.extend_from_slice(chunk);
            while let Some(op) = parse(&mut buf, MAX)? {
                ops.push(op);
            }
        }
        assert!(buf.is_empty(), "left over: {buf:?}");
        Ok(ops)
    }

    fn msg(subject: &str, sid: u64, reply: Option<&str>, headers: &str, payload: &str) -> ServerOp {
        ServerOp::Msg(Msg {
            subject: Bytes::copy_from_slice(subject.as_bytes()),
            sid,
            reply: reply.map(|r| Bytes::copy_from_slice(r.as_bytes())),
            headers: Bytes::copy_from_slice(headers.as_bytes()),
            payload: Bytes::copy_from_slice(payload.as_bytes()),
        })
    }

    #[test]
    fn parses_every_operation_whole_and_in_cuts() {
        let input = b"INFO {\"server_id\":\"x\",\"max_payload\":1048576} \r\n\
            MSG a.b 7 5\r\nhello\r\n\
            MSG a.b 7 _INBOX.1 0\r\n\r\n\
            HMSG a.c 8 reply.to 12 14\r\nNATS/1.0\r\n\r\nhi\r\n\
            HMSG _INBOX.2 9 16 16\r\nNATS/1.0 503\r\n\r\n\r\n\
            ping\r\nPONG\r\n+OK\r\n-ERR 'Authorization Violation'\r\n";
        let expected = vec![
            ServerOp::Info(Bytes::from_static(
                b"{\"server_id\":\"x\",\"max_payload\":1048576}",
            )),
            msg("a.b", 7, None, "", "hello"),
            msg("a.b", 7, Some("_INBOX.1"), "", ""),
            msg("a.c", 8, Some("reply.to"), "NATS/1.0\r\n\r\n", "hi"),
            msg("_INBOX.2", 9, None, "NATS/1.0 503\r\n\r\n", ""),
            ServerOp::Ping,
            ServerOp::Pong,
            ServerOp::Ok,
            ServerOp::Err("Authorization Violation".into()),
        ];
        for cut in [input.len(), 1, 2, 3, 7, 64] {
            assert_eq!(parse_all(input, cut).unwrap(), expected, "cut {cut}");
        }
    }

    #[test]
    fn a_payload_may_hold_line_ends_and_be_large() {
        let payload = "a\r\nMSG x 1 1\r\n".repeat(10_000);
        let input = format!("MSG big 1 {}\r\n{payload}\r\n", payload.len());
        let ops = parse_all(input.as_bytes(), 4093).unwrap();
        assert_eq!(ops, vec![msg("big", 1, None, "", &payload)]);
    }

    #[test]
    fn refuses_what_is_not_the_protocol() {
        let cases: [(&[u8], ProtoError); 8] = [
            (b"HELLO\r\n", ProtoError::Unknown("HELLO".into())),
            (b"MSG a b 5\r\nhello\r\n", ProtoError::Malformed("number")),
            (b"MSG a 1\r\n", ProtoError::Malformed("message line")),
            (b"MSG a 1 2 3 4\r\n", ProtoError::Malformed("message line")),
            (
                b"MSG a 1 5\r\nhelloXX",
                ProtoError::Malformed("message end"),
            ),
            (b"HMSG a 1 9 5\r\n", ProtoError::Malformed("header size")),
            (
                b"MSG a 1 99999999999999999999\r\n",
                ProtoError::Malformed("number"),
            ),
            (b"MSG a 1 2000000\r\n", ProtoError::TooLarge(2_000_000)),
        ];
        for (input, error) in cases {
            assert_eq!(
                parse_all(input, 1000),
                Err(error),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
        let long = vec![b'x'; MAX_CONTROL_LINE + 2];
        assert_eq!(parse_all(&long, 100), Err(ProtoError::LineTooLong));
        // A line just under the limit is only incomplete.
        let mut buf = BytesMut::from(&vec![b'x'; MAX_CONTROL_LINE][..]);
        assert_eq!(parse(&mut buf, MAX), Ok(None));
    }

    #[test]
    fn writes_what_a_client_sends() {
        let mut out = BytesMut::new();
        write_connect(&mut out, "{\"verbose\":false}");
        write_hpub(&mut out, b"a.c", Some(b"r.2"), b"NATS/1.0\r\n\r\n", b"hi");
        write_sub(&mut out, b"a.>", Some(b"q"), 3);
        write_sub(&mut out, b"r.*", None, 12_345_678_901);
        write_unsub(&mut out, 3);
        out.put_slice(PING);
        assert_eq!(
            &out[..],
            b"CONNECT {\"verbose\":false}\r\n\
              HPUB a.c r.2 12 14\r\nNATS/1.0\r\n\r\nhi\r\nSUB a.> q 3\r\nSUB r.* 12345678901\r\n\
              UNSUB 3\r\nPING\r\n"
        );
    }
}
