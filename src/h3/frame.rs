//! HTTP/3 frames (RFC 9114 §7) as bytes: a reader fed a stream's bytes as
//! they come, which gives whole frames but DATA, whose payload it passes on
//! piece by piece; and the writers of what the server sends. Frames of
//! unknown types are skipped, as §9 asks; the HTTP/2 types HTTP/3 reserved
//! are errors.

use super::varint;
use super::H3Error;

/// Frame types (RFC 9114 §7.2).
pub(crate) const DATA: u64 = 0x0;
pub(crate) const HEADERS: u64 = 0x1;
pub(crate) const CANCEL_PUSH: u64 = 0x3;
pub(crate) const SETTINGS: u64 = 0x4;
pub(crate) const PUSH_PROMISE: u64 = 0x5;
pub(crate) const GOAWAY: u64 = 0x7;
pub(crate) const MAX_PUSH_ID: u64 = 0xd;

/// Settings (RFC 9114 §7.2.4.1, RFC 9204 §5).
pub(crate) const SETTINGS_QPACK_MAX_TABLE_CAPACITY: u64 = 0x1;
pub(crate) const SETTINGS_MAX_FIELD_SECTION_SIZE: u64 = 0x6;
pub(crate) const SETTINGS_QPACK_BLOCKED_STREAMS: u64 = 0x7;

/// One frame, or a piece of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    /// Some of a DATA frame's payload, in order.
    Data(Vec<u8>),
    /// A HEADERS frame's field section.
    Headers(Vec<u8>),
    /// SETTINGS: each identifier and value.
    Settings(Vec<(u64, u64)>),
    /// GOAWAY, with its stream or push id.
    GoAway(u64),
    /// CANCEL_PUSH, MAX_PUSH_ID or PUSH_PROMISE: their type and payload.
    Push(u64, Vec<u8>),
}

/// Reads the frames of one stream.
#[derive(Debug)]
pub(crate) struct FrameReader {
    /// Bytes read and not yet a frame.
    buffer: Vec<u8>,
    /// Left of the DATA frame being passed on.
    data_left: u64,
    /// Left of the unknown frame being skipped.
    skip_left: u64,
    /// The largest payload of a frame this reader holds whole (HEADERS,
    /// SETTINGS and the rest; DATA is never held).
    max_frame: u64,
}

impl FrameReader {
    /// A reader that holds whole frames of up to `max_frame` bytes.
    pub(crate) fn new(max_frame: u64) -> FrameReader {
        FrameReader {
            buffer: Vec::new(),
            data_left: 0,
            skip_left: 0,
            max_frame,
        }
    }

    /// Adds bytes read from the stream.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// Whether the stream's bytes so far end on a frame's boundary: a
    /// stream may end only there (RFC 9114 §7.1).
    pub(crate) fn at_boundary(&self) -> bool {
        self.buffer.is_empty() && self.data_left == 0 && self.skip_left == 0
    }

    /// The next frame (or piece of DATA) the bytes fed hold; `None` until
    /// more come.
    pub(crate) fn next(&mut self) -> Result<Option<Frame>, H3Error> {
        loop {
            // An unknown frame's payload: skipped as it comes (what is
            // left of it, if anything, leaves the buffer empty).
            let skip = self.skip_left.min(self.buffer.len() as u64) as usize;
            self.buffer.drain(..skip);
            self.skip_left -= skip as u64;
            if self.data_left > 0 {
                if self.buffer.is_empty() {
                    return Ok(None);
                }
                let take = self.data_left.min(self.buffer.len() as u64) as usize;
                self.data_left -= take as u64;
                let rest = self.buffer.split_off(take);
                return Ok(Some(Frame::Data(std::mem::replace(&mut self.buffer, rest))));
            }
            let Some((kind, kind_len)) = varint::read(&self.buffer) else {
                return Ok(None);
            };
            let Some((len, len_len)) = varint::read(&self.buffer[kind_len..]) else {
                return Ok(None);
            };
            let head = kind_len + len_len;
            match kind {
                DATA => {
                    self.buffer.drain(..head);
                    self.data_left = len;
                    if len == 0 {
                        return Ok(Some(Frame::Data(Vec::new())));
                    }
                    continue;
                }
                // HTTP/2's PRIORITY, PING, WINDOW_UPDATE and CONTINUATION
                // (§7.2.8).
                0x2 | 0x6 | 0x8 | 0x9 => return Err(H3Error::FrameUnexpected),
                HEADERS | SETTINGS | GOAWAY | CANCEL_PUSH | MAX_PUSH_ID | PUSH_PROMISE => {}
                _ => {
                    self.buffer.drain(..head);
                    self.skip_left = len;
                    continue;
                }
            }
            if len > self.max_frame {
                return Err(H3Error::ExcessiveLoad);
            }
            let end = head + len as usize;
            if self.buffer.len() < end {
                return Ok(None);
            }
            let payload = self.buffer[head..end].to_vec();
            self.buffer.drain(..end);
            return parse(kind, payload).map(Some);
        }
    }
}

/// The frame of type `kind` with `payload`.
fn parse(kind: u64, payload: Vec<u8>) -> Result<Frame, H3Error> {
    match kind {
        HEADERS => Ok(Frame::Headers(payload)),
        SETTINGS => {
            let mut settings = Vec::new();
            let mut rest = &payload[..];
            while !rest.is_empty() {
                let (id, a) = varint::read(rest).ok_or(H3Error::Frame)?;
                let (value, b) = varint::read(&rest[a..]).ok_or(H3Error::Frame)?;
                // HTTP/2's settings, reserved (§7.2.4.1); and no setting twice.
                if (0x2..=0x5).contains(&id) || settings.iter().any(|&(seen, _)| seen == id) {
                    return Err(H3Error::Settings);
                }
                settings.push((id, value));
                rest = &rest[a + b..];
            }
            Ok(Frame::Settings(settings))
        }
        GOAWAY => match varint::read(&payload) {
            Some((id, len)) if len == payload.len() => Ok(Frame::GoAway(id)),
            _ => Err(H3Error::Frame),
        },
        _ => Ok(Frame::Push(kind, payload)),
    }
}

/// Appends a frame's type and length.
pub(crate) fn put_head(out: &mut Vec<u8>, kind: u64, len: usize) {
    varint::put(out, kind);
    varint::put(out, len as u64);
}

/// Appends a SETTINGS frame with `settings`.
pub(crate) fn put_settings(out: &mut Vec<u8>, settings: &[(u64, u64)]) {
    let len: usize = settings
        .iter()
        .map(|&(id, value)| varint::len(id) + varint::len(value))
        .sum();
    put_head(out, SETTINGS, len);
    for &(id, value) in settings {
        varint::put(out, id);
        varint::put(out, value);
    }
}

/// Appends a GOAWAY frame naming `id`.
pub(crate) fn put_goaway(out: &mut Vec<u8>, id: u64) {
    put_head(out, GOAWAY, varint::len(id));
    varint::put(out, id);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(bytes: &[u8], max_frame: u64) -> Result<Vec<Frame>, H3Error> {
        let mut reader = FrameReader::new(max_frame);
        let mut out = Vec::new();
        for &byte in bytes {
            reader.feed(&[byte]);
            while let Some(frame) = reader.next()? {
                out.push(frame);
            }
        }
        Ok(out)
    }

    #[test]
    fn reads_frames_fed_byte_by_byte() {
        let mut bytes = Vec::new();
        put_head(&mut bytes, HEADERS, 3);
        bytes.extend_from_slice(&[0, 0, 0xd1]);
        // An unknown (reserved, 0x21) frame with a payload, skipped.
        put_head(&mut bytes, 0x21, 2);
        bytes.extend_from_slice(b"zz");
        put_head(&mut bytes, DATA, 2);
        bytes.extend_from_slice(b"hi");
        let read = frames(&bytes, 100).unwrap();
        assert_eq!(
            read,
            [
                Frame::Headers(vec![0, 0, 0xd1]),
                Frame::Data(b"h".to_vec()),
                Frame::Data(b"i".to_vec())
            ]
        );
        let mut reader = FrameReader::new(100);
        reader.feed(&bytes);
        assert_eq!(reader.next(), Ok(Some(Frame::Headers(vec![0, 0, 0xd1]))));
        assert_eq!(reader.next(), Ok(Some(Frame::Data(b"hi".to_vec()))));
        assert_eq!(reader.next(), Ok(None));
        assert!(reader.at_boundary());
        reader.feed(&[0x01]);
        assert!(!reader.at_boundary(), "a frame's type without the rest");
    }

    /// The settings this server sends, and what RFC 9114 forbids in them.
    #[test]
    fn settings_are_read_and_checked() {
        let mut bytes = Vec::new();
        put_settings(
            &mut bytes,
            &[
                (SETTINGS_QPACK_MAX_TABLE_CAPACITY, 0),
                (SETTINGS_MAX_FIELD_SECTION_SIZE, 16_384),
            ],
        );
        assert_eq!(
            bytes,
            [0x04, 0x07, 0x01, 0x00, 0x06, 0x80, 0x00, 0x40, 0x00]
        );
        assert_eq!(
            frames(&bytes, 100),
            Ok(vec![Frame::Settings(vec![(1, 0), (6, 16_384)])])
        );
        // SETTINGS_MAX_CONCURRENT_STREAMS of HTTP/2 (0x3).
        assert_eq!(
            frames(&[0x04, 0x02, 0x03, 0x00], 100),
            Err(H3Error::Settings)
        );
        assert_eq!(
            frames(&[0x04, 0x04, 0x01, 0x00, 0x01, 0x00], 100),
            Err(H3Error::Settings)
        );
        // A value cut short.
        assert_eq!(frames(&[0x04, 0x02, 0x06, 0x40], 100), Err(H3Error::Frame));
    }

    #[test]
    fn reserved_and_oversized_frames_are_errors() {
        // HTTP/2's PING type.
        assert_eq!(frames(&[0x06, 0x00], 100), Err(H3Error::FrameUnexpected));
        assert_eq!(
            frames(&[0x01, 0x40, 0x65], 100),
            Err(H3Error::ExcessiveLoad)
        );
        let mut goaway = Vec::new();
        put_goaway(&mut goaway, 8);
        assert_eq!(goaway, [0x07, 0x01, 0x08]);
        assert_eq!(frames(&goaway, 100), Ok(vec![Frame::GoAway(8)]));
        assert_eq!(frames(&[0x07, 0x02, 0x08, 0x00], 100), Err(H3Error::Frame));
    }
}
