//! A request stream's bytes as the request they carry (RFC 9114 §4.1):
//! one HEADERS frame, then the body's DATA frames, then trailers (read
//! and dropped, as over HTTP/1.1), then the stream's end. No QUIC here:
//! the session feeds what the stream gave, and [`serve_whole`] is what a
//! whole request becomes, so the fuzz target drives exactly this path.

use bytes::BytesMut;

use crate::h3::frame::{Frame, FrameReader};
use crate::h3::qpack::{self, QpackError};
use crate::h3::H3Error;
use crate::http::request::MAX_HEAD_LEN;
use crate::http3::message::{self, Malformed};

/// The largest HEADERS (or SETTINGS) frame read: past it the client is
/// sending more than any request this server takes, `H3_EXCESSIVE_LOAD`.
pub(crate) const MAX_FRAME: u64 = 4 * MAX_HEAD_LEN as u64;

/// Why a request stream is refused: the whole connection's error, or its
/// own stream's (reset with that code, the connection serving on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    Connection(H3Error),
    Stream(H3Error),
}

/// How far a request has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// More is to come.
    More,
    /// The head and all of the body came, and the stream ended.
    Whole,
    /// The field section passes what the server reads: answered 431.
    FieldsTooLarge,
    /// The body passes the largest (as its `Content-Length` says, or as
    /// it came): answered 413 from the head, with this length.
    BodyTooLarge(u64),
}

/// One request stream's request, as it arrives.
#[derive(Debug)]
pub(crate) struct RequestReader {
    reader: FrameReader,
    head: Option<Box<http::request::Parts>>,
    body: Vec<u8>,
}

impl Default for RequestReader {
    fn default() -> RequestReader {
        RequestReader {
            reader: FrameReader::new(MAX_FRAME),
            head: None,
            body: Vec::new(),
        }
    }
}

impl RequestReader {
    /// Adds what the stream gave (`ended`: and then its FIN), for a
    /// server whose bodies may be `max_body` bytes.
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        ended: bool,
        max_body: u64,
    ) -> Result<Progress, Refused> {
        self.reader.feed(bytes);
        loop {
            let frame = self.reader.next().map_err(Refused::Connection)?;
            match frame {
                None => break,
                Some(Frame::Headers(block)) if self.head.is_none() => {
                    let fields = match qpack::decode(&block, MAX_FRAME as usize) {
                        Ok(fields) => fields,
                        Err(QpackError::TooLarge) => return Ok(Progress::FieldsTooLarge),
                        Err(QpackError::Decompression) => {
                            return Err(Refused::Connection(H3Error::QpackDecompression))
                        }
                    };
                    let head = message::request_head(fields)
                        .map_err(|Malformed| Refused::Stream(H3Error::Message))?;
                    let declared = head
                        .headers
                        .get(http::header::CONTENT_LENGTH)
                        .and_then(|value| value.to_str().ok())
                        .and_then(|value| value.parse::<u64>().ok());
                    self.head = Some(Box::new(head));
                    if let Some(declared) = declared.filter(|&declared| declared > max_body) {
                        return Ok(Progress::BodyTooLarge(declared));
                    }
                }
                // Trailers: read and dropped, as over HTTP/1.1.
                Some(Frame::Headers(_)) => {}
                Some(Frame::Data(data)) if self.head.is_some() => {
                    self.body.extend_from_slice(&data);
                    if self.body.len() as u64 > max_body {
                        return Ok(Progress::BodyTooLarge(self.body.len() as u64));
                    }
                }
                // DATA before HEADERS, or a frame of the control stream.
                Some(_) => return Err(Refused::Connection(H3Error::FrameUnexpected)),
            }
        }
        match (ended, &self.head) {
            (false, _) => Ok(Progress::More),
            (true, Some(_)) if self.reader.at_boundary() => Ok(Progress::Whole),
            // Ended without a head, or inside a frame.
            (true, _) => Err(Refused::Stream(H3Error::RequestIncomplete)),
        }
    }

    /// Whether the request is a HEAD (its response has no body).
    pub(crate) fn is_head(&self) -> bool {
        self.head
            .as_ref()
            .is_some_and(|head| head.method == http::Method::HEAD)
    }

    /// Writes into `out` the HTTP/1.1 request the stream meant, after
    /// `progress` said how it ended: the whole request; or, refused for
    /// its body's length, its head with that length; or, for a field
    /// section too large, a head as long as an HTTP/1.1 head may not be,
    /// which the request stream answers 431 as it answers such a head.
    pub(crate) fn write(&self, progress: Progress, out: &mut BytesMut) {
        use crate::gateway::convert::{write_request, write_request_head};
        match (progress, &self.head) {
            (Progress::Whole, Some(head)) => write_request(head, &self.body, out),
            (Progress::BodyTooLarge(length), Some(head)) => write_request_head(head, length, out),
            _ => {
                out.clear();
                out.extend_from_slice(b"GET / HTTP/1.1\r\nx-fields: ");
                out.resize(out.len() + MAX_HEAD_LEN, b'x');
                out.extend_from_slice(b"\r\n\r\n");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::frame::put_head;

    fn headers(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut block = Vec::new();
        qpack::encode(fields.iter().copied(), &mut block);
        let mut frame = Vec::new();
        put_head(&mut frame, crate::h3::frame::HEADERS, block.len());
        frame.extend_from_slice(&block);
        frame
    }

    fn data(body: &[u8]) -> Vec<u8> {
        let mut frame = Vec::new();
        put_head(&mut frame, crate::h3::frame::DATA, body.len());
        frame.extend_from_slice(body);
        frame
    }

    const GET: [(&[u8], &[u8]); 4] = [
        (b":method", b"POST"),
        (b":scheme", b"https"),
        (b":authority", b"a"),
        (b":path", b"/p"),
    ];

    #[test]
    fn a_request_is_its_head_and_body_at_its_end() {
        let mut reader = RequestReader::default();
        assert_eq!(reader.feed(&headers(&GET), false, 10), Ok(Progress::More));
        assert_eq!(reader.feed(&data(b"12345"), false, 10), Ok(Progress::More));
        // Trailers, dropped.
        let trailers = headers(&[(b"x-t", b"1")]);
        assert_eq!(reader.feed(&trailers, true, 10), Ok(Progress::Whole));
        let mut out = BytesMut::new();
        reader.write(Progress::Whole, &mut out);
        assert_eq!(
            &out[..],
            b"POST /p HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\n12345"
        );
        assert!(!reader.is_head());
    }

    #[test]
    fn bodies_past_the_largest_are_refused_as_they_are_seen() {
        let mut reader = RequestReader::default();
        let mut head = GET.to_vec();
        head.push((b"content-length", b"11"));
        assert_eq!(
            reader.feed(&headers(&head), false, 10),
            Ok(Progress::BodyTooLarge(11))
        );
        let mut out = BytesMut::new();
        reader.write(Progress::BodyTooLarge(11), &mut out);
        assert_eq!(
            &out[..],
            b"POST /p HTTP/1.1\r\nhost: a\r\ncontent-length: 11\r\n\r\n"
        );
        let mut reader = RequestReader::default();
        assert_eq!(reader.feed(&headers(&GET), false, 10), Ok(Progress::More));
        assert_eq!(
            reader.feed(&data(&[b'x'; 10]), false, 10),
            Ok(Progress::More)
        );
        assert_eq!(
            reader.feed(&data(b"y"), false, 10),
            Ok(Progress::BodyTooLarge(11))
        );
    }

    #[test]
    fn broken_streams_are_refused() {
        let stream = |error| Err(Refused::Stream(error));
        let connection = |error| Err(Refused::Connection(error));
        let mut reader = RequestReader::default();
        assert_eq!(
            reader.feed(&data(b"x"), false, 10),
            connection(H3Error::FrameUnexpected)
        );
        let mut reader = RequestReader::default();
        assert_eq!(
            reader.feed(b"", true, 10),
            stream(H3Error::RequestIncomplete)
        );
        let mut reader = RequestReader::default();
        let cut = &headers(&GET)[..3];
        assert_eq!(
            reader.feed(cut, true, 10),
            stream(H3Error::RequestIncomplete)
        );
        let mut reader = RequestReader::default();
        let upper = headers(&[(b":method", b"GET"), (b"X", b"y")]);
        assert_eq!(reader.feed(&upper, false, 10), stream(H3Error::Message));
        let mut reader = RequestReader::default();
        let mut dynamic = Vec::new();
        put_head(&mut dynamic, crate::h3::frame::HEADERS, 3);
        dynamic.extend_from_slice(&[0x02, 0x00, 0x80]);
        assert_eq!(
            reader.feed(&dynamic, false, 10),
            connection(H3Error::QpackDecompression)
        );
        // GOAWAY is the control stream's.
        let mut reader = RequestReader::default();
        assert_eq!(
            reader.feed(&[0x07, 0x01, 0x00], false, 10),
            connection(H3Error::FrameUnexpected)
        );
    }

    #[test]
    fn a_field_section_too_large_is_answered_as_a_head_too_long() {
        let mut reader = RequestReader::default();
        let long = vec![b'v'; MAX_FRAME as usize - 100];
        let mut fields = GET.to_vec();
        fields.push((b"x-long", &long));
        assert_eq!(
            reader.feed(&headers(&fields), false, 10),
            Ok(Progress::FieldsTooLarge)
        );
        let mut out = BytesMut::new();
        reader.write(Progress::FieldsTooLarge, &mut out);
        assert!(out.len() > MAX_HEAD_LEN && out.ends_with(b"\r\n\r\n"));
    }
}
