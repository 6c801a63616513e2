//! What crosses servers, as NATS messages: a header block saying what the
//! message is (`Upc-Kind`) and the fields it needs, and a payload of the
//! bytes themselves, never re-encoded.
//!
//! - **A request** (`Upc-Kind: request`): the HTTP request's head and body
//!   as they arrived, with where the head ends (`Upc-Head`), the client's
//!   address (`Upc-Peer`), the route's path parameters (`Upc-Params`)
//!   and the id a middleware gave the request (`Upc-Request-Id`).
//!   The other server reads the head again only to find the method, path
//!   and query, as the request line gives them.
//! - **An answer** (`Upc-Kind: answer`): the status (`Upc-Status`), the
//!   node that answered (`Upc-Node`), and the response's header lines
//!   followed by its body, split at `Upc-Fields`; `Upc-Error: 1` marks a
//!   rejection (the server's text, `CODE REASON: cause`, and no fields),
//!   whose body the answering server's error hook chooses. The lines are checked
//!   again on arrival, as a route's own are: a server on the other end is
//!   trusted no more than a client.
//! - **Bytes** (`Upc-Kind: vec`, `bytes`, `string`, `ws-text`,
//!   `ws-binary`): a message to an actor or a topic, with its sender
//!   (`Upc-From: address@node`).
//!
//! A message without a header block (a plain `nats pub`) is bytes from
//! nobody. Anything else that does not read is malformed: the caller drops
//! and counts it.

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::actors::remote::Payload;
use crate::http::method::Method;
use crate::http::response_fields::{check_header, check_status};
use crate::nats::headers::{HeaderBlock, HeaderWriter};
use crate::nats::proto;
use crate::routes::actor::RequestParts;
use crate::routes::actor_response::ActorResponse;
use crate::routes::middleware::IdValue;
use crate::routes::path_pattern::PathParams;

const KIND: &str = "Upc-Kind";
const FROM: &str = "Upc-From";
const HEAD: &str = "Upc-Head";
const PEER: &str = "Upc-Peer";
/// Present (as `1`) when the request came over TLS.
const SECURE: &str = "Upc-Secure";
const PARAMS: &str = "Upc-Params";
const STATUS: &str = "Upc-Status";
const NODE: &str = "Upc-Node";
const FIELDS: &str = "Upc-Fields";
const REQUEST_ID: &str = "Upc-Request-Id";
/// Present (as `1`) on an answer that is an error with a cause (a
/// rejection), whose body is the server's text: the answering server gives
/// it the error body its application chose.
const ERROR: &str = "Upc-Error";

/// A message that does not read as what it says it is; what was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) &'static str);

/// What a message from another server is.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A request for an actor route's actor, with its answer's subject.
    Request(RequestParts),
    /// The answer to a request of ours.
    Answer(ActorResponse),
    /// The actor dropped our request unanswered.
    Gone,
    /// Bytes, from `from` (empty when nobody said), sent on `node` (empty
    /// when not sent by a server of the cluster).
    Bytes {
        payload: Payload,
        from: String,
        node: Bytes,
    },
}

/// Writes a request for `subject`, answered at `reply`; its size on the
/// wire, or (writing nothing) the size past `max` it would have had.
pub(crate) fn write_request(
    out: &mut BytesMut,
    scratch: &mut BytesMut,
    subject: &[u8],
    reply: &[u8],
    parts: &RequestParts,
    max: usize,
) -> Result<usize, usize> {
    scratch.clear();
    let mut headers = HeaderWriter::begin(scratch);
    headers.field(KIND, b"request");
    let mut number = BytesMut::new();
    proto::put_number(&mut number, parts.head_len as u64);
    headers.field(HEAD, &number);
    if let Some(peer) = parts.peer {
        headers.field(PEER, peer.to_string().as_bytes());
    }
    if parts.secure {
        headers.field(SECURE, b"1");
    }
    if let Some(params) = &parts.params {
        let pairs: Vec<String> = params
            .pairs()
            .map(|(name, segment)| format!("{name}={segment}"))
            .collect();
        headers.field(PARAMS, pairs.join(",").as_bytes());
    }
    if let Some(id) = parts.request_id.get() {
        headers.field(REQUEST_ID, id.as_bytes());
    }
    headers.end();
    finish(out, subject, Some(reply), scratch, &parts.data, max)
}

/// Writes the message unless it is larger than `max`; its size.
fn finish(
    out: &mut BytesMut,
    subject: &[u8],
    reply: Option<&[u8]>,
    headers: &[u8],
    payload: &[u8],
    max: usize,
) -> Result<usize, usize> {
    let size = headers.len() + payload.len();
    if size > max {
        return Err(size);
    }
    proto::write_hpub(out, subject, reply, headers, payload);
    Ok(size)
}

/// Writes the answer `response`, given on `node`, to `reply` (see
/// [`write_request`] for the result).
pub(crate) fn write_answer(
    out: &mut BytesMut,
    scratch: &mut BytesMut,
    reply: &[u8],
    response: &ActorResponse,
    node: &str,
    max: usize,
) -> Result<usize, usize> {
    scratch.clear();
    // The payload: Content-Type (if the response has one of its own),
    // the header lines, the body.
    let mut fields = BytesMut::new();
    let error = response.cause().is_some();
    if let Some(content_type) = response.content_type.filter(|_| !error) {
        fields.extend_from_slice(b"Content-Type: ");
        fields.extend_from_slice(content_type.as_bytes());
        fields.extend_from_slice(b"\r\n");
    }
    fields.extend_from_slice(&response.headers);
    let mut headers = HeaderWriter::begin(scratch);
    headers.field(KIND, b"answer");
    let mut number = BytesMut::new();
    proto::put_number(&mut number, u64::from(response.status));
    headers.field(STATUS, &number);
    number.clear();
    proto::put_number(&mut number, fields.len() as u64);
    headers.field(FIELDS, &number);
    headers.field(NODE, node.as_bytes());
    if error {
        headers.field(ERROR, b"1");
    }
    headers.end();
    fields.extend_from_slice(&response.body);
    finish(out, reply, None, scratch, &fields, max)
}

/// Writes, to `reply`, that the actor dropped the request unanswered (the
/// asking server answers its 502).
pub(crate) fn write_gone(out: &mut BytesMut, scratch: &mut BytesMut, reply: &[u8]) {
    scratch.clear();
    let mut headers = HeaderWriter::begin(scratch);
    headers.field(KIND, b"gone");
    headers.end();
    proto::write_hpub(out, reply, None, scratch, b"");
}

/// Writes bytes from `from` on `node` for `subject` (see
/// [`write_request`] for the result).
pub(crate) fn write_bytes(
    out: &mut BytesMut,
    scratch: &mut BytesMut,
    subject: &[u8],
    payload: &Payload,
    from: &str,
    node: &str,
    max: usize,
) -> Result<usize, usize> {
    scratch.clear();
    let mut headers = HeaderWriter::begin(scratch);
    headers.field(KIND, payload.kind().as_bytes());
    if !from.is_empty() {
        headers.field(FROM, from.as_bytes());
    }
    headers.field(NODE, node.as_bytes());
    headers.end();
    finish(out, subject, None, scratch, payload.bytes(), max)
}

/// Reads a message: its header block `headers` and its payload.
pub(crate) fn read(headers: &[u8], payload: Bytes) -> Result<Inbound, Malformed> {
    if headers.is_empty() {
        return Ok(Inbound::Bytes {
            payload: Payload::Bytes(payload),
            from: String::new(),
            node: Bytes::new(),
        });
    }
    let block = HeaderBlock::parse(headers).map_err(|_| Malformed("header block"))?;
    let kind = block.get(KIND).ok_or(Malformed("Upc-Kind"))?;
    match kind {
        b"request" => read_request(&block, payload).map(Inbound::Request),
        b"answer" => read_answer(&block, payload),
        b"gone" => Ok(Inbound::Gone),
        kind => {
            let payload = Payload::from_kind(kind, payload).ok_or(Malformed("Upc-Kind"))?;
            let from = match block.get(FROM) {
                Some(from) => std::str::from_utf8(from)
                    .map_err(|_| Malformed("Upc-From"))?
                    .to_string(),
                None => String::new(),
            };
            let node = Bytes::copy_from_slice(block.get(NODE).unwrap_or_default());
            Ok(Inbound::Bytes {
                payload,
                from,
                node,
            })
        }
    }
}

fn read_request(block: &HeaderBlock<'_>, data: Bytes) -> Result<RequestParts, Malformed> {
    let head_len = block
        .get(HEAD)
        .and_then(number)
        .filter(|&len| len <= data.len())
        .ok_or(Malformed("Upc-Head"))?;
    let head = &data[..head_len];
    let line_end = head
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or(Malformed("request line"))?;
    let line = &head[..line_end];
    let mut words = line.split(|&b| b == b' ');
    let method_name = words.next().ok_or(Malformed("request line"))?;
    let method = std::str::from_utf8(method_name).map_err(|_| Malformed("method"))?;
    let target = words.next().ok_or(Malformed("request line"))?;
    if words.next().is_none() || !target.starts_with(b"/") {
        return Err(Malformed("request line"));
    }
    let (path, query) = split_target(method_name.len() + 1, target);
    let method = Method::parse(method);
    let peer = match block.get(PEER) {
        Some(peer) => Some(
            std::str::from_utf8(peer)
                .ok()
                .and_then(|peer| peer.parse::<SocketAddr>().ok())
                .ok_or(Malformed("Upc-Peer"))?,
        ),
        None => None,
    };
    let params = match block.get(PARAMS) {
        Some(params) => Some(Arc::new(read_params(params)?)),
        None => None,
    };
    let mut request_id = IdValue::NONE;
    if let Some(id) = block.get(REQUEST_ID) {
        if !request_id.set(id) {
            return Err(Malformed("Upc-Request-Id"));
        }
    }
    Ok(RequestParts {
        method,
        data,
        head_len,
        path,
        query,
        params,
        peer,
        secure: block.get(SECURE).is_some(),
        request_id,
    })
}

/// The path's and the query's ranges in the head, for a target at
/// `start`.
fn split_target(start: usize, target: &[u8]) -> (Range<usize>, Option<Range<usize>>) {
    match target.iter().position(|&b| b == b'?') {
        Some(mark) => (
            start..start + mark,
            Some(start + mark + 1..start + target.len()),
        ),
        None => (start..start + target.len(), None),
    }
}

fn read_params(params: &[u8]) -> Result<PathParams, Malformed> {
    let text = std::str::from_utf8(params).map_err(|_| Malformed("Upc-Params"))?;
    let pairs = text
        .split(',')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, segment) = pair.split_once('=')?;
            Some((name.into(), segment.parse().ok()?))
        })
        .collect::<Option<Vec<_>>>()
        .ok_or(Malformed("Upc-Params"))?;
    Ok(PathParams::from_pairs(pairs))
}

fn read_answer(block: &HeaderBlock<'_>, payload: Bytes) -> Result<Inbound, Malformed> {
    let status = block
        .get(STATUS)
        .and_then(number)
        .and_then(|status| u16::try_from(status).ok())
        .filter(|&status| check_status(status).is_ok())
        .ok_or(Malformed("Upc-Status"))?;
    let fields_len = block
        .get(FIELDS)
        .and_then(number)
        .filter(|&len| len <= payload.len())
        .ok_or(Malformed("Upc-Fields"))?;
    let node = block
        .get(NODE)
        .filter(|node| {
            node.iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .map(Bytes::copy_from_slice);
    let fields = payload.slice(..fields_len);
    check_fields(&fields)?;
    let body = payload.slice(fields_len..);
    let error = block.get(ERROR).is_some_and(|flag| flag == b"1");
    let mut response = if error {
        // An error with a cause: its text, which the answering server may
        // replace with its application's error body, as for a local one.
        if !fields.is_empty() {
            return Err(Malformed("Upc-Error"));
        }
        let response = ActorResponse::from_error_text(status, body);
        if response.cause().is_none() {
            return Err(Malformed("Upc-Error"));
        }
        response
    } else {
        ActorResponse::written(status, None, fields, body)
    };
    response.node = node;
    Ok(Inbound::Answer(response))
}

/// Each line is a field a route could have sent (`check_header`), ending
/// CRLF.
fn check_fields(fields: &[u8]) -> Result<(), Malformed> {
    let mut rest = fields;
    while !rest.is_empty() {
        let end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or(Malformed("answer fields"))?;
        let line = std::str::from_utf8(&rest[..end]).map_err(|_| Malformed("answer fields"))?;
        let (name, value) = line.split_once(':').ok_or(Malformed("answer fields"))?;
        check_header(name, value.trim_start_matches([' ', '\t']))
            .map_err(|_| Malformed("answer fields"))?;
        rest = &rest[end + 2..];
    }
    Ok(())
}

fn number(digits: &[u8]) -> Option<usize> {
    if digits.is_empty() || digits.len() > 12 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0, |n, d| n * 10 + usize::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nats::proto::{parse, ServerOp};
    use crate::routes::typed::Rejection;

    /// What `write` wrote, as the other server reads it.
    fn round_trip(write: impl FnOnce(&mut BytesMut, &mut BytesMut)) -> Result<Inbound, Malformed> {
        let (mut out, mut scratch) = (BytesMut::new(), BytesMut::new());
        write(&mut out, &mut scratch);
        // As the server relays it: HPUB becomes HMSG with a sid.
        let text = out.to_vec();
        let relayed = String::from_utf8_lossy(&text).replacen("HPUB ", "HMSG ", 1);
        let (line, rest) = relayed.split_once("\r\n").unwrap();
        let mut words: Vec<&str> = line.split(' ').collect();
        words.insert(2, "1");
        let mut relayed = BytesMut::from(format!("{}\r\n{rest}", words.join(" ")).as_bytes());
        let Ok(Some(ServerOp::Msg(msg))) = parse(&mut relayed, 1 << 20) else {
            panic!("not a message: {relayed:?}");
        };
        read(&msg.headers, msg.payload)
    }

    #[test]
    fn a_request_arrives_as_it_left() {
        let head = b"POST /users/7?full=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n";
        let mut data = head.to_vec();
        data.extend_from_slice(b"{}");
        let parts = RequestParts {
            method: Method::Post,
            data: Bytes::from(data),
            head_len: head.len(),
            path: 5..13,
            query: Some(14..20),
            params: Some(Arc::new(PathParams::from_pairs(vec![("id".into(), 1)]))),
            peer: Some("10.0.0.1:5000".parse().unwrap()),
            secure: true,
            request_id: {
                let mut id = IdValue::NONE;
                assert!(id.set(b"a-1-7"));
                id
            },
        };
        let inbound = round_trip(|out, scratch| {
            write_request(out, scratch, b"upc.a.b.users", b"upc.r.x", &parts, 1 << 20).unwrap();
        });
        let Ok(Inbound::Request(got)) = inbound else {
            panic!("{inbound:?}");
        };
        assert_eq!(got.method, Method::Post);
        assert_eq!(got.data, parts.data);
        assert_eq!(got.head_len, parts.head_len);
        assert_eq!(&got.data[got.path.clone()], b"/users/7");
        assert_eq!(&got.data[got.query.clone().unwrap()], b"full=1");
        assert_eq!(got.params, parts.params);
        assert_eq!(got.peer, parts.peer);
        assert!(got.secure, "came over TLS");
        assert_eq!(got.request_id, parts.request_id);
    }

    #[test]
    fn an_answer_arrives_as_it_left() {
        let response = ActorResponse::json("{\"n\":1}")
            .with_header("X-Count", "1")
            .unwrap();
        let inbound = round_trip(|out, scratch| {
            write_answer(out, scratch, b"r.1", &response, "b", 1 << 20).unwrap();
        });
        let Ok(Inbound::Answer(got)) = inbound else {
            panic!("{inbound:?}");
        };
        assert_eq!(got.status, 200);
        assert_eq!(
            &got.headers[..],
            b"Content-Type: application/json\r\nX-Count: 1\r\n"
        );
        assert_eq!(&got.body[..], b"{\"n\":1}");
        assert_eq!(got.node.as_deref(), Some(&b"b"[..]));
    }

    #[test]
    fn a_rejection_arrives_as_an_error_with_its_cause() {
        let response = ActorResponse::rejection(Rejection::new(404, "no note 7"));
        let inbound = round_trip(|out, scratch| {
            write_answer(out, scratch, b"r.1", &response, "b", 1 << 20).unwrap();
        });
        let Ok(Inbound::Answer(got)) = inbound else {
            panic!("{inbound:?}");
        };
        assert_eq!(got.status, 404);
        assert_eq!(got.cause(), Some("no note 7"));
        assert_eq!(&got.headers[..], b"");
        assert_eq!(&got.body[..], b"404 Not Found: no note 7\n");
    }

    #[test]
    fn an_error_answer_with_fields_or_no_cause_is_malformed() {
        let read_error = |fields: &[u8], body: &[u8]| {
            let mut headers = BytesMut::new();
            let mut writer = HeaderWriter::begin(&mut headers);
            writer.field(KIND, b"answer");
            writer.field(STATUS, b"404");
            writer.field(FIELDS, fields.len().to_string().as_bytes());
            writer.field(ERROR, b"1");
            writer.end();
            let payload = [fields, body].concat();
            read(&headers, Bytes::from(payload)).err()
        };
        assert_eq!(
            read_error(b"X-A: 1\r\n", b"404 Not Found: x\n"),
            Some(Malformed("Upc-Error"))
        );
        assert_eq!(read_error(b"", b"no cause"), Some(Malformed("Upc-Error")));
        assert_eq!(read_error(b"", b"404 Not Found: x\n"), None);
    }

    #[test]
    fn bytes_arrive_with_their_sender() {
        let payload = Payload::Text(Bytes::from_static("héllo".as_bytes()));
        let inbound = round_trip(|out, scratch| {
            write_bytes(
                out,
                scratch,
                b"upc.t.room",
                &payload,
                "ws/3@a",
                "a",
                1 << 20,
            )
            .unwrap();
        });
        let Ok(Inbound::Bytes {
            payload: got,
            from,
            node,
        }) = inbound
        else {
            panic!("{inbound:?}");
        };
        assert_eq!(
            (got, from.as_str(), &node[..]),
            (payload, "ws/3@a", &b"a"[..])
        );
        let plain = read(b"", Bytes::from_static(b"raw"));
        assert!(
            matches!(plain, Ok(Inbound::Bytes { payload: Payload::Bytes(b), from, .. }) if &b[..] == b"raw" && from.is_empty())
        );
    }

    #[test]
    fn nothing_past_max_payload_is_written() {
        let (mut out, mut scratch) = (BytesMut::new(), BytesMut::new());
        let payload = Payload::Vec(Bytes::from(vec![0u8; 100]));
        let written = write_bytes(&mut out, &mut scratch, b"s", &payload, "", "a", 120);
        assert_eq!(written, Err(100 + scratch.len()));
        assert!(out.is_empty());
        let written = write_bytes(&mut out, &mut scratch, b"s", &payload, "", "a", 200).unwrap();
        assert_eq!(written, 100 + scratch.len());
        assert!(round_trip(|out, scratch| write_gone(out, scratch, b"r.1"))
            .is_ok_and(|i| matches!(i, Inbound::Gone)));
    }

    /// A message exactly at `max` (headers and payload) is written whole;
    /// one byte over, nothing is, and the size says by how much.
    #[test]
    fn a_message_exactly_at_max_payload_goes_and_one_byte_more_does_not() {
        let (mut out, mut scratch) = (BytesMut::new(), BytesMut::new());
        let payload = Payload::Vec(Bytes::from(vec![7u8; 100]));
        let size =
            write_bytes(&mut out, &mut scratch, b"s", &payload, "f", "a", usize::MAX).unwrap();
        let whole = out.split();
        assert_eq!(size, 100 + scratch.len());
        let at = write_bytes(&mut out, &mut scratch, b"s", &payload, "f", "a", size);
        assert_eq!(at, Ok(size));
        assert_eq!(out.split(), whole, "the same bytes as with no limit");
        let over = write_bytes(&mut out, &mut scratch, b"s", &payload, "f", "a", size - 1);
        assert_eq!(over, Err(size));
        assert!(out.is_empty());
    }

    #[test]
    fn what_does_not_read_is_malformed() {
        let block = |fields: &str| format!("NATS/1.0\r\n{fields}\r\n");
        let cases = [
            (block("Upc-Kind: request\r\n"), "x", "Upc-Head"),
            (
                block("Upc-Kind: request\r\nUpc-Head: 99\r\n"),
                "GET / HTTP/1.1\r\n\r\n",
                "Upc-Head",
            ),
            (
                block("Upc-Kind: request\r\nUpc-Head: 4\r\n"),
                "GET / HTTP/1.1\r\n\r\n",
                "request line",
            ),
            (
                block("Upc-Kind: answer\r\nUpc-Status: 99\r\nUpc-Fields: 0\r\n"),
                "",
                "Upc-Status",
            ),
            (
                block("Upc-Kind: answer\r\nUpc-Status: 200\r\nUpc-Fields: 21\r\n"),
                "Content-Length: 9\r\n\r\n",
                "answer fields",
            ),
            (
                block("Upc-Kind: answer\r\nUpc-Status: 200\r\nUpc-Fields: 12\r\n"),
                "A: 1\r\nB\r\n\r\nxx",
                "answer fields",
            ),
            (block("Upc-Kind: u32\r\n"), "", "Upc-Kind"),
            (block("Upc-Kind: string\r\n"), "\u{fffd}", "Upc-Kind"),
            (block("Nothing: here\r\n"), "", "Upc-Kind"),
            ("HTTP/1.1 200\r\n\r\n".to_string(), "", "header block"),
        ];
        for (headers, payload, what) in cases {
            let payload = match what {
                "Upc-Kind" if payload == "\u{fffd}" => Bytes::from_static(b"\xff"),
                _ => Bytes::copy_from_slice(payload.as_bytes()),
            };
            let got = read(headers.as_bytes(), payload);
            assert!(
                matches!(got, Err(Malformed(w)) if w == what),
                "{headers:?}: {got:?}"
            );
        }
    }
}
