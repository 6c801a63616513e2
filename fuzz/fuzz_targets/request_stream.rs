//! Fuzz target: one connection's request stream, `RequestStream`, driven
//! exactly as a connection actor drives it, on arbitrary bytes.
//!
//! Input: byte 0 gives `n = byte % 8`; the next `n` bytes are read lengths
//! (see `read_len`); the rest is what the client sends. The stream is fed
//! once whole, in one read, and once cut into reads of those lengths, used in
//! turn (`n = 0` means byte by byte). The target checks that:
//!
//! - nothing panics (overflow checks and debug assertions are on);
//! - no batch of output (what one `feed` or `resume` appends) goes past
//!   `OUTPUT_HIGH_WATER` by more than one response;
//! - both ways of feeding give the same output bytes and the same closed
//!   state;
//! - the output is a sequence of whole, well-formed responses: each head
//!   parses with `httparse::Response`, its status is one this server sends,
//!   and it is byte for byte one of the responses written out below in
//!   `SPEC` (not taken from the server's own canned responses), so
//!   `Content-Length` is the length of the body the route serves (a route's
//!   `304 Not Modified` has neither length nor body), followed either by
//!   exactly that body or, for an answer to a HEAD request, by no body.
//!   Which one is decidable: no body starts like a status line, and after a
//!   body-less response comes the next status line or the end of the
//!   output. A response without its body needs a HEAD request to answer:
//!   there are never more of them than `HEAD` appears in the input.
//!   `100 Continue` carries no headers and is followed by a final response
//!   or the end. A `Connection: close` response is the last output, and the
//!   stream reports itself closed exactly when the last response says close.

#![no_main]

use std::collections::HashMap;
use std::sync::LazyLock;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use uppercut_mio_server::sans_io::{
    format_imf_fixdate, RequestStream, DATE_LEN, OUTPUT_HIGH_WATER,
};
use uppercut_mio_server::Routes;

/// The interim response to `Expect: 100-continue`.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
const STATUS_LINE: &[u8] = b"HTTP/1.1 ";
/// The statuses this server may send.
const STATUSES: [u16; 15] = [
    100, 200, 304, 400, 404, 405, 408, 413, 414, 431, 501, 502, 503, 504, 505,
];

/// `/v1/user` serves this file as it is.
const V1_USER: &[u8] = include_bytes!("../../fixtures/v1-user.json");

/// Every final response the standard routes can give, but 304: the status,
/// the header fields between `Server` and `Content-Length`, the body, and
/// whether it may keep the connection open (framing errors always close).
/// Written out here, as RFC 9112 and the routes' documentation say, so the
/// target checks the server against something other than itself.
const SPEC: &[(&str, &str, &[u8], bool)] = &[
    (
        "200 OK",
        "Content-Type: text/plain; charset=utf-8\r\n",
        b"hello\n",
        true,
    ),
    (
        "200 OK",
        "Content-Type: text/plain\r\n",
        b"Hello, World!",
        true,
    ),
    (
        "200 OK",
        "Content-Type: application/json\r\n",
        br#"{"message":"Hello, World!"}"#,
        true,
    ),
    (
        "200 OK",
        "content-type: application/json\r\nengine: Rust/Uppercut\r\nlocation: /v1/user\r\n",
        V1_USER,
        true,
    ),
    (
        "405 Method Not Allowed",
        "Content-Type: text/plain; charset=utf-8\r\nAllow: GET, HEAD\r\n",
        b"405 Method Not Allowed\n",
        true,
    ),
    ("404 Not Found", TEXT, b"404 Not Found\n", true),
    ("502 Bad Gateway", TEXT, b"502 Bad Gateway\n", true),
    (
        "503 Service Unavailable",
        TEXT,
        b"503 Service Unavailable\n",
        true,
    ),
    ("504 Gateway Timeout", TEXT, b"504 Gateway Timeout\n", true),
    ("400 Bad Request", TEXT, b"400 Bad Request\n", false),
    ("408 Request Timeout", TEXT, b"408 Request Timeout\n", false),
    (
        "413 Payload Too Large",
        TEXT,
        b"413 Payload Too Large\n",
        false,
    ),
    ("414 URI Too Long", TEXT, b"414 URI Too Long\n", false),
    (
        "431 Request Header Fields Too Large",
        TEXT,
        b"431 Request Header Fields Too Large\n",
        false,
    ),
    ("501 Not Implemented", TEXT, b"501 Not Implemented\n", false),
    (
        "505 HTTP Version Not Supported",
        TEXT,
        b"505 HTTP Version Not Supported\n",
        false,
    ),
];
const TEXT: &str = "Content-Type: text/plain; charset=utf-8\r\n";

/// A response head's body and whether it closes the connection.
struct Canned {
    body: Vec<u8>,
    closes: bool,
}

struct Fixture {
    routes: Routes,
    date: [u8; DATE_LEN],
    /// Every response head the server may write, with what follows it.
    by_head: HashMap<Vec<u8>, Canned>,
    /// No batch of output may pass the high-water mark by more than this.
    batch_slack: usize,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let date = format_imf_fixdate(1_700_000_000);
    let date_text = std::str::from_utf8(&date).expect("an ASCII date");
    let connections = [
        ("", false),
        ("Connection: keep-alive\r\n", false),
        ("Connection: close\r\n", true),
    ];
    let mut by_head = HashMap::new();
    let mut largest = 0;
    for &(status, fields, body, keeps) in SPEC {
        for &(connection, closes) in &connections {
            if !keeps && !closes {
                continue;
            }
            let head = format!(
                "HTTP/1.1 {status}\r\nServer: uppercut-mio-server\r\n{fields}\
                 Content-Length: {}\r\nDate: {date_text}\r\n{connection}\r\n",
                body.len()
            );
            // What the output check relies on.
            let start = body.len().min(STATUS_LINE.len());
            assert!(!body.is_empty() && body[..start] != STATUS_LINE[..start]);
            largest = largest.max(head.len() + body.len());
            let canned = Canned {
                body: body.to_vec(),
                closes,
            };
            assert!(by_head.insert(head.into_bytes(), canned).is_none());
        }
    }
    for &(connection, closes) in &connections {
        let head = format!(
            "HTTP/1.1 304 Not Modified\r\nServer: uppercut-mio-server\r\n\
             Date: {date_text}\r\n{connection}\r\n"
        );
        let canned = Canned {
            body: Vec::new(),
            closes,
        };
        by_head.insert(head.into_bytes(), canned);
    }
    Fixture {
        routes: Routes::standard(),
        date,
        by_head,
        batch_slack: largest + CONTINUE.len(),
    }
});

/// A read length from one input byte: 0 is an empty read, then 1 to 239
/// bytes, then 1 to 16 KiB in steps of 1 KiB.
fn read_len(byte: u8) -> usize {
    match byte {
        0..=0xEF => byte as usize,
        _ => (byte as usize - 0xEF) * 1024,
    }
}

struct Driven {
    output: Vec<u8>,
    closed: bool,
}

/// Feeds `input` in reads of `lens` (cycled) as a connection does: each batch
/// of output is written before anything else happens, held-back requests are
/// resumed before the next read, and nothing is read once closed.
fn drive(input: &[u8], lens: &[usize], fixture: &Fixture) -> Driven {
    let (routes, date) = (&fixture.routes, &fixture.date);
    let mut stream = RequestStream::default();
    let mut out = BytesMut::new();
    let mut output = Vec::new();
    let mut take = |out: &mut BytesMut| {
        assert!(
            out.len() <= OUTPUT_HIGH_WATER + fixture.batch_slack,
            "a batch of {} bytes",
            out.len()
        );
        output.extend_from_slice(out);
        out.clear();
    };
    let mut start = 0;
    for &len in lens.iter().cycle() {
        if start == input.len() || stream.is_closed() {
            break;
        }
        let end = (start + len).min(input.len());
        stream.feed(&input[start..end], routes, date, &mut out);
        start = end;
        take(&mut out);
        let mut resumes = 0;
        while stream.is_held_back() {
            resumes += 1;
            assert!(resumes <= input.len(), "resume makes no progress");
            stream.resume(routes, date, &mut out);
            take(&mut out);
        }
    }
    Driven {
        output,
        closed: stream.is_closed(),
    }
}

/// The status and Content-Length of the complete response head `head`.
fn parse_head(head: &[u8]) -> (u16, Option<usize>) {
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(head) {
        Ok(httparse::Status::Complete(len)) => assert_eq!(len, head.len()),
        other => panic!(
            "response head {:?}: {other:?}",
            String::from_utf8_lossy(head)
        ),
    }
    assert_eq!(response.version, Some(1));
    let content_length = response
        .headers
        .iter()
        .find(|header| header.name.eq_ignore_ascii_case("content-length"))
        .map(|header| {
            std::str::from_utf8(header.value)
                .ok()
                .and_then(|value| value.parse().ok())
                .expect("numeric Content-Length")
        });
    (response.code.expect("status code"), content_length)
}

fn find_head_end(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| at + 4)
}

/// Reads the output response by response (see the module comment).
fn check_output(driven: &Driven, input: &[u8], fixture: &Fixture) {
    let heads = input.windows(4).filter(|w| w == b"HEAD").count();
    let mut bodiless = 0;
    let mut rest = &driven.output[..];
    let mut last_closes = false;
    let mut after_continue = false;
    while !rest.is_empty() {
        assert!(!last_closes, "output after a Connection: close response");
        let text = || String::from_utf8_lossy(&rest[..rest.len().min(300)]).into_owned();
        let head_len = find_head_end(rest).unwrap_or_else(|| panic!("partial head {:?}", text()));
        let head = &rest[..head_len];
        let (status, content_length) = parse_head(head);
        assert!(STATUSES.contains(&status), "status {status}");
        if status == 100 {
            assert_eq!(head, CONTINUE);
            assert!(!after_continue, "two 100 Continue in a row");
            after_continue = true;
            rest = &rest[head_len..];
            continue;
        }
        assert!(
            content_length.is_some() || status == 304,
            "no Content-Length: {:?}",
            text()
        );
        let canned = fixture
            .by_head
            .get(head)
            .unwrap_or_else(|| panic!("not a canned response head: {:?}", text()));
        let after = &rest[head_len..];
        let body_len = if after.starts_with(&canned.body) {
            canned.body.len()
        } else if after.is_empty() || after.starts_with(STATUS_LINE) {
            if !canned.body.is_empty() {
                bodiless += 1;
                assert!(
                    bodiless <= heads,
                    "{bodiless} responses without their body, {heads} HEAD in the input: {:?}",
                    text()
                );
            }
            0
        } else {
            panic!("neither the body nor nothing follows {:?}", text());
        };
        last_closes = canned.closes;
        after_continue = false;
        rest = &after[body_len..];
    }
    assert_eq!(
        driven.closed, last_closes,
        "closed iff the last response says close"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let count = (first % 8) as usize;
    if rest.len() < count {
        return;
    }
    let (len_bytes, input) = rest.split_at(count);
    let mut lens: Vec<usize> = len_bytes.iter().map(|&b| read_len(b)).collect();
    if lens.iter().all(|&len| len == 0) {
        // Byte by byte, with the empty reads asked for in between.
        lens.push(1);
    }

    let fixture = &*FIXTURE;
    let whole = drive(input, &[input.len()], fixture);
    check_output(&whole, input, fixture);
    let split = drive(input, &lens, fixture);
    if split.output != whole.output {
        let at = split
            .output
            .iter()
            .zip(&whole.output)
            .position(|(a, b)| a != b)
            .unwrap_or(split.output.len().min(whole.output.len()));
        let show = |output: &[u8]| {
            let start = at.saturating_sub(60);
            String::from_utf8_lossy(&output[start..output.len().min(at + 60)]).into_owned()
        };
        panic!(
            "reads of {lens:?} give other output than one read, from byte {at}:\n\
             split: {:?}\nwhole: {:?}",
            show(&split.output),
            show(&whole.output)
        );
    }
    assert_eq!(split.closed, whole.closed);
});
