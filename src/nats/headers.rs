//! NATS header blocks: `NATS/1.0[ status[ description]]\r\n`, then
//! `Name: value\r\n` lines, then a blank line. A server uses the status
//! line to say what happened to a request (`503`: no responders); clients
//! carry whatever fields they like.

use bytes::{BufMut, BytesMut};

/// The version line every block begins with.
const VERSION: &[u8] = b"NATS/1.0";

/// A header block, read where it lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeaderBlock<'a> {
    /// The status on the version line, if any (`503`).
    pub(crate) status: Option<u16>,
    /// The field lines, each ending CRLF.
    fields: &'a [u8],
}

/// A block that is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadHeaders;

impl<'a> HeaderBlock<'a> {
    /// Reads `block` (as an `HMSG` carries it); an empty block is a block
    /// with no status and no fields (a `MSG`).
    pub(crate) fn parse(block: &'a [u8]) -> Result<HeaderBlock<'a>, BadHeaders> {
        if block.is_empty() {
            return Ok(HeaderBlock {
                status: None,
                fields: &[],
            });
        }
        let line_end = find_crlf(block).ok_or(BadHeaders)?;
        let line = &block[..line_end];
        let rest = line.strip_prefix(VERSION).ok_or(BadHeaders)?;
        let status = match rest.trim_ascii_start() {
            [] => None,
            after => {
                let digits: &[u8] = after.split(|&b| b == b' ').next().unwrap_or(&[]);
                if digits.len() != 3 || !digits.iter().all(u8::is_ascii_digit) {
                    return Err(BadHeaders);
                }
                Some(
                    digits
                        .iter()
                        .fold(0u16, |n, d| n * 10 + u16::from(d - b'0')),
                )
            }
        };
        // The fields (each ending CRLF), then the blank line.
        let fields = match &block[line_end + 2..] {
            b"\r\n" => &[][..],
            fields if fields.ends_with(b"\r\n\r\n") => &fields[..fields.len() - 2],
            _ => return Err(BadHeaders),
        };
        Ok(HeaderBlock { status, fields })
    }

    /// The value of the first field named `name` (compared without regard
    /// to case), trimmed.
    pub(crate) fn get(&self, name: &str) -> Option<&'a [u8]> {
        self.fields()
            .find(|(field, _)| field.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, value)| value)
    }

    /// Every field, as name and trimmed value; a line without a colon is
    /// skipped.
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        let fields: &'a [u8] = self.fields;
        fields
            .split(|&b| b == b'\n')
            .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
            .filter_map(|line| {
                let colon = line.iter().position(|&b| b == b':')?;
                Some((line[..colon].trim_ascii(), line[colon + 1..].trim_ascii()))
            })
    }
}

fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}

/// Writes a header block: `begin`, then `field`s, then `end`.
#[derive(Debug)]
pub(crate) struct HeaderWriter<'a> {
    out: &'a mut BytesMut,
}

impl<'a> HeaderWriter<'a> {
    /// Starts a block with no status.
    pub(crate) fn begin(out: &'a mut BytesMut) -> HeaderWriter<'a> {
        out.put_slice(VERSION);
        out.put_slice(b"\r\n");
        HeaderWriter { out }
    }

    /// Adds `name: value`. Neither may hold CR or LF, and `name` no colon:
    /// such a field is not written (false).
    pub(crate) fn field(&mut self, name: &str, value: &[u8]) -> bool {
        let bad = |b: &u8| *b == b'\r' || *b == b'\n';
        if name.bytes().any(|b| bad(&b) || b == b':') || value.iter().any(bad) {
            return false;
        }
        self.out.put_slice(name.as_bytes());
        self.out.put_slice(b": ");
        self.out.put_slice(value);
        self.out.put_slice(b"\r\n");
        true
    }

    /// Ends the block.
    pub(crate) fn end(self) {
        self.out.put_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_status_and_fields() {
        let block = HeaderBlock::parse(b"NATS/1.0 503\r\n\r\n").unwrap();
        assert_eq!(block.status, Some(503));
        assert_eq!(block.fields().count(), 0);
        let block =
            HeaderBlock::parse(b"NATS/1.0 408 Request Timeout\r\nA: 1\r\nb-c:  two \r\n\r\n")
                .unwrap();
        assert_eq!(block.status, Some(408));
        assert_eq!(block.get("a"), Some(&b"1"[..]));
        assert_eq!(block.get("B-C"), Some(&b"two"[..]));
        assert_eq!(block.get("d"), None);
        let empty = HeaderBlock::parse(b"").unwrap();
        assert_eq!((empty.status, empty.get("a")), (None, None));
    }

    #[test]
    fn refuses_what_is_not_a_block() {
        for bad in [
            &b"HTTP/1.1 200\r\n\r\n"[..],
            b"NATS/1.0",
            b"NATS/1.0 5x3\r\n\r\n",
            b"NATS/1.0\r\nA: 1\r\n",
        ] {
            assert_eq!(HeaderBlock::parse(bad), Err(BadHeaders), "{bad:?}");
        }
    }

    #[test]
    fn writes_what_it_reads() {
        let mut out = BytesMut::new();
        let mut writer = HeaderWriter::begin(&mut out);
        assert!(writer.field("Upc-From", b"room@a"));
        assert!(!writer.field("Bad", b"a\r\nInjected: 1"));
        assert!(!writer.field("Ba:d", b"x"));
        writer.end();
        assert_eq!(&out[..], b"NATS/1.0\r\nUpc-From: room@a\r\n\r\n");
        let block = HeaderBlock::parse(&out).unwrap();
        assert_eq!(block.get("upc-from"), Some(&b"room@a"[..]));
        assert_eq!(block.get("Injected"), None);
    }
}
