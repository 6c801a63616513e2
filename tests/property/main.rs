//! Property: the responses to a pipelined request stream do not depend on how
//! the stream is cut into reads. Random valid streams (seeded, reproducible)
//! are fed to `RequestStream` whole and in many pieces, driven exactly as a
//! connection drives it, and every way of feeding must give the same bytes: one
//! well-formed response per request, in order, with the status, `Connection`
//! header and body that the request calls for (bodies written out in
//! `generate`, not taken from the server).
//!
//! A failing case prints its seed; `PROPERTY_SEED=0x... cargo test --test
//! property` runs that case alone.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::BytesMut;
use uppercut_mio_server::sans_io::{format_imf_fixdate, DATE_LEN};
use uppercut_mio_server::sans_io::{RequestStream, OUTPUT_HIGH_WATER};
use uppercut_mio_server::Routes;

/// Random streams per run.
const CASES: u64 = 500;
/// The largest response the standard routes give (`/v1/user`) fits in this
/// with room to spare; a batch may pass the high-water mark by one response.
const LARGEST_RESPONSE: usize = 8 * 1024;
const DATE_SECONDS: u64 = 784_111_777;

mod generate;

use generate::{request, request_stream, split, Expected, Rng};

/// What driving a stream produced.
struct Driven {
    output: Vec<u8>,
    closed: bool,
    /// `resume` calls made because the stream was held back.
    resumes: usize,
}

/// Feeds `input` in pieces of these lengths as a connection does: each
/// batch of output is taken (written) before the stream is resumed or fed
/// again, held-back requests are resumed before the next read, and nothing
/// is read once the stream is closed.
fn drive(input: &[u8], pieces: &[usize], routes: &Routes, date: &[u8; DATE_LEN]) -> Driven {
    let mut stream = RequestStream::default();
    let mut out = BytesMut::new();
    let mut driven = Driven {
        output: Vec::new(),
        closed: false,
        resumes: 0,
    };
    let take = |out: &mut BytesMut, driven: &mut Driven| {
        assert!(
            out.len() < OUTPUT_HIGH_WATER + LARGEST_RESPONSE,
            "one batch of output holds {} bytes, past the high-water mark",
            out.len()
        );
        driven.output.extend_from_slice(out);
        out.clear();
    };
    assert_eq!(
        pieces.iter().sum::<usize>(),
        input.len(),
        "the pieces {pieces:?} cover the input"
    );
    let mut start = 0;
    for &len in pieces {
        if stream.is_closed() {
            break;
        }
        stream.feed(&input[start..start + len], routes, date, &mut out);
        start += len;
        take(&mut out, &mut driven);
        while stream.is_held_back() {
            driven.resumes += 1;
            assert!(driven.resumes <= input.len(), "resume makes no progress");
            stream.resume(routes, date, &mut out);
            take(&mut out, &mut driven);
        }
    }
    driven.closed = stream.is_closed();
    driven
}

/// A response head read from the output.
struct ResponseHead {
    status: u16,
    len: usize,
    content_length: Option<usize>,
    connection: Option<String>,
    date: Option<Vec<u8>>,
}

fn parse_response_head(bytes: &[u8]) -> ResponseHead {
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        other => panic!(
            "no complete response head ({other:?}) at {:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        ),
    };
    assert_eq!(response.version, Some(1), "responses are HTTP/1.1");
    let value = |name: &str| {
        response
            .headers
            .iter()
            .find(|header| header.name.eq_ignore_ascii_case(name))
            .map(|header| header.value.to_vec())
    };
    let content_length = value("Content-Length").map(|v| {
        std::str::from_utf8(&v)
            .ok()
            .and_then(|v| v.parse().ok())
            .expect("a numeric Content-Length")
    });
    ResponseHead {
        status: response.code.expect("a status code"),
        len,
        content_length,
        connection: value("Connection").map(|v| String::from_utf8(v).unwrap()),
        date: value("Date"),
    }
}

/// Reads the output response by response against what each request must get.
fn check_responses(output: &[u8], expected: &[Expected], date: &[u8; DATE_LEN]) {
    let mut rest = output;
    for (index, want) in expected.iter().enumerate() {
        if want.interim {
            let head = parse_response_head(rest);
            assert_eq!(head.status, 100, "request {index}: 100 Continue first");
            assert_eq!(head.content_length, None);
            rest = &rest[head.len..];
        }
        let head = parse_response_head(rest);
        assert_eq!(head.status, want.status, "request {index}: {want:?}");
        assert_eq!(
            head.connection.as_deref(),
            want.connection,
            "request {index}"
        );
        assert_eq!(head.date.as_deref(), Some(&date[..]), "request {index}");
        let length = head
            .content_length
            .expect("every response has Content-Length");
        assert_eq!(length, want.body.len(), "request {index}: Content-Length");
        let body = if want.head_only { 0 } else { length };
        assert!(
            rest.len() >= head.len + body,
            "request {index}: body cut short"
        );
        assert!(
            rest[head.len..head.len + body] == want.body[..body],
            "request {index}: not the body {:?}",
            String::from_utf8_lossy(&want.body[..body.min(80)])
        );
        rest = &rest[head.len + body..];
    }
    assert!(
        rest.is_empty(),
        "{} bytes after the last expected response: {:?}",
        rest.len(),
        String::from_utf8_lossy(&rest[..rest.len().min(200)])
    );
}

/// Feeds one stream whole and in `splits` random ways; all must agree and
/// answer every request.
fn check_stream(
    rng: &mut Rng,
    input: &[u8],
    expected: &[Expected],
    splits: usize,
    routes: &Routes,
) -> usize {
    let date = format_imf_fixdate(DATE_SECONDS);
    let whole = drive(input, &[input.len()], routes, &date);
    check_responses(&whole.output, expected, &date);
    let closes = expected
        .last()
        .is_some_and(|last| last.connection == Some("close"));
    assert_eq!(whole.closed, closes, "closed after the stream");
    let mut resumes = whole.resumes;
    for _ in 0..splits {
        let pieces = split(rng, input.len());
        let driven = drive(input, &pieces, routes, &date);
        if driven.output != whole.output {
            let at = driven
                .output
                .iter()
                .zip(&whole.output)
                .position(|(a, b)| a != b)
                .unwrap_or(driven.output.len().min(whole.output.len()));
            panic!(
                "split feeding differs from whole feeding at output byte {at} \
                 ({} vs {} bytes); pieces {pieces:?}",
                driven.output.len(),
                whole.output.len()
            );
        }
        assert_eq!(driven.closed, whole.closed);
        resumes += driven.resumes;
    }
    resumes
}

/// Runs `case` for `seed`, naming the seed if it fails.
fn with_seed(seed: u64, case: impl FnOnce(&mut Rng)) {
    let mut rng = Rng::new(seed);
    if catch_unwind(AssertUnwindSafe(|| case(&mut rng))).is_err() {
        panic!("property failed for seed {seed:#x}: rerun with PROPERTY_SEED={seed:#x}");
    }
}

fn seeds() -> Vec<u64> {
    match std::env::var("PROPERTY_SEED") {
        Ok(seed) => {
            let digits = seed.trim_start_matches("0x");
            vec![u64::from_str_radix(digits, 16).expect("PROPERTY_SEED is hex")]
        }
        Err(_) => (0..CASES).collect(),
    }
}

#[test]
fn split_feeding_gives_the_same_responses() {
    let routes = Routes::standard();
    for seed in seeds() {
        with_seed(seed, |rng| {
            // Mostly short pipelines; now and then a long one.
            let count = if rng.chance(5) {
                rng.range(20, 120)
            } else {
                rng.range(1, 12)
            };
            let (input, expected) = request_stream(rng, count);
            check_stream(rng, &input, &expected, 3, &routes);
        });
    }
}

#[test]
fn held_back_output_gives_the_same_responses() {
    let routes = Routes::standard();
    let get = b"GET /v1/user HTTP/1.1\r\nHost: a\r\n\r\n";
    let mut input = Vec::new();
    for _ in 0..100 {
        input.extend_from_slice(get);
    }
    let one = Expected {
        interim: false,
        status: 200,
        connection: None,
        head_only: false,
        body: generate::V1_USER,
    };
    let expected = vec![one; 100];
    with_seed(0x4849_4748, |rng| {
        let resumes = check_stream(rng, &input, &expected, 6, &routes);
        assert!(resumes > 0, "the output never reached the high-water mark");
    });

    // The same with random requests mixed in, ending with a close.
    with_seed(0x4d49_5845, |rng| {
        let mut input = Vec::new();
        let mut expected = Vec::new();
        for i in 0..100 {
            if rng.chance(70) {
                input.extend_from_slice(get);
                expected.push(one);
            } else {
                let (bytes, answer) = request(rng, i == 99);
                input.extend_from_slice(&bytes);
                expected.push(answer);
            }
        }
        if expected.last() == Some(&one) {
            let (bytes, answer) = request(rng, true);
            input.extend_from_slice(&bytes);
            expected.push(answer);
        }
        let resumes = check_stream(rng, &input, &expected, 6, &routes);
        assert!(resumes > 0, "the output never reached the high-water mark");
    });
}
