//! Property: the responses to a pipelined request stream do not depend on how
//! the stream is cut into reads. Random valid streams (seeded, reproducible)
//! are fed to `RequestStream` whole and in many pieces, driven exactly as a
//! connection drives it, and every way of feeding must give the same bytes: one
//! well-formed response per request, in order, with the status, `Connection`
//! header and body that the request calls for.
//!
//! A failing case prints its seed; `PROPERTY_SEED=0x... cargo test --test
//! property` runs that case alone.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::BytesMut;
use uppercut_mio_server::date::{format_imf_fixdate, DATE_LEN};
use uppercut_mio_server::exchange::{RequestStream, OUTPUT_HIGH_WATER};
use uppercut_mio_server::Routes;

/// Random streams per run.
const CASES: u64 = 500;
/// The largest response the standard routes give (`/v1/user`) fits in this
/// with room to spare; a batch may pass the high-water mark by one response.
const LARGEST_RESPONSE: usize = 8 * 1024;
const DATE_SECONDS: u64 = 784_111_777;

/// xorshift64*: small, fast and good enough to drive a generator.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // Any seed, zero included, gives a non-zero state.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0), near enough for small n.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in `low..=high`.
    fn range(&mut self, low: usize, high: usize) -> usize {
        low + self.below(high - low + 1)
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The response a request must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Expected {
    /// `HTTP/1.1 100 Continue` comes first.
    interim: bool,
    status: u16,
    /// The value of the response's `Connection` header, if it has one.
    connection: Option<&'static str>,
    /// A HEAD request: the response has Content-Length but no body.
    head_only: bool,
}

const ROUTES: [&str; 4] = ["/", "/plaintext", "/json", "/v1/user"];
const UNKNOWN_PATHS: [&str; 7] = [
    "/nope",
    "/json/",
    "/JSON",
    "/v1/users",
    "/plaintext/x",
    "//",
    "/v1",
];
const OTHER_METHODS: [&str; 6] = ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "PROPFIND"];

/// A header name in one of the spellings clients use.
fn vary_case(rng: &mut Rng, name: &str) -> String {
    match rng.below(4) {
        0 => name.to_string(),
        1 => name.to_ascii_lowercase(),
        2 => name.to_ascii_uppercase(),
        _ => name
            .chars()
            .map(|c| {
                if rng.chance(50) {
                    c.to_ascii_uppercase()
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect(),
    }
}

/// `name: value\r\n` with the optional whitespace varied.
fn header_line(rng: &mut Rng, name: &str, value: &str) -> Vec<u8> {
    let name = vary_case(rng, name);
    let before = *rng.pick(&[" ", "", "\t", "  "]);
    let after = *rng.pick(&["", "", "", " ", "\t"]);
    format!("{name}:{before}{value}{after}\r\n").into_bytes()
}

fn random_bytes(rng: &mut Rng, len: usize) -> Vec<u8> {
    // Bodies that look like requests or chunk framing test the framing best.
    const PIECES: [&[u8]; 5] = [
        b"GET / HTTP/1.1\r\n",
        b"\r\n",
        b"0\r\n\r\n",
        b"HTTP/1.1 ",
        b"x",
    ];
    let mut bytes = Vec::with_capacity(len);
    while bytes.len() < len {
        if rng.chance(10) {
            bytes.extend_from_slice(PIECES[rng.below(PIECES.len())]);
        } else {
            bytes.push(rng.next() as u8);
        }
    }
    bytes.truncate(len);
    bytes
}

/// A chunked body: chunks with extensions, the last chunk, trailers.
fn chunked_body(rng: &mut Rng) -> Vec<u8> {
    let mut body = Vec::new();
    for _ in 0..rng.below(5) {
        let size = rng.range(1, 300);
        let digits = if rng.chance(50) {
            format!("{size:x}")
        } else {
            format!("{size:X}")
        };
        let zeros = "0".repeat(rng.below(3));
        let extension = *rng.pick(&["", "", ";name=value", ";a;b=\"q;x\"", " ;ext"]);
        body.extend_from_slice(format!("{zeros}{digits}{extension}\r\n").as_bytes());
        body.extend_from_slice(&random_bytes(rng, size));
        body.extend_from_slice(b"\r\n");
    }
    let extension = *rng.pick(&["", "", ";last=1"]);
    body.extend_from_slice(format!("0{extension}\r\n").as_bytes());
    for i in 0..rng.below(3) {
        body.extend_from_slice(&header_line(rng, "X-Trailer", &i.to_string()));
    }
    body.extend_from_slice(b"\r\n");
    body
}

/// One valid request and the response it must get; `last` asks for a request
/// after which the server closes.
fn request(rng: &mut Rng, last: bool) -> (Vec<u8>, Expected) {
    let method = match rng.below(10) {
        0..=3 => "GET",
        4..=5 => "HEAD",
        _ => *rng.pick(&OTHER_METHODS),
    };
    let known = rng.chance(75);
    let path = if known {
        *rng.pick(&ROUTES)
    } else {
        *rng.pick(&UNKNOWN_PATHS)
    };
    let query = if rng.chance(30) {
        *rng.pick(&["?", "?a=1", "?a=1&b=two%20words", "?q=/json?x"])
    } else {
        ""
    };
    let http10 = rng.chance(25);
    let version = if http10 { "HTTP/1.0" } else { "HTTP/1.1" };

    let mut headers: Vec<Vec<u8>> = Vec::new();
    if !http10 || rng.chance(50) {
        let host = *rng.pick(&["a", "localhost:9000", "example.com"]);
        headers.push(header_line(rng, "Host", host));
    }
    let connection = match (last, http10) {
        (true, _) if !http10 || rng.chance(50) => Some(*rng.pick(&["close", "Close", "TE, close"])),
        (true, _) => None, // HTTP/1.0 closes by default
        (false, true) => Some(*rng.pick(&["keep-alive", "Keep-Alive", "keep-alive, TE"])),
        (false, false) if rng.chance(20) => Some("keep-alive"),
        (false, false) => None,
    };
    if let Some(value) = connection {
        headers.push(header_line(rng, "Connection", value));
    }
    for _ in 0..rng.below(4) {
        let (name, value) = *rng.pick(&[
            ("User-Agent", "property/1.0"),
            ("Accept", "*/*"),
            ("Accept-Encoding", "gzip, br"),
            ("X-Request-Id", "12345"),
            ("Cookie", "a=b; c=d"),
            ("Content-Type", "application/octet-stream"),
        ]);
        headers.push(header_line(rng, name, value));
    }

    // HTTP/1.0 has no chunked framing (RFC 9112 6.1) and no 100-continue
    // (RFC 9110 10.1.1): its requests use Content-Length and never Expect.
    let mut body = Vec::new();
    let mut has_body = false;
    match rng.below(10) {
        0..=5 => {}
        n if n <= 7 || http10 => {
            let len = if rng.chance(10) {
                rng.range(0, 6000)
            } else {
                rng.range(0, 300)
            };
            headers.push(header_line(rng, "Content-Length", &len.to_string()));
            body = random_bytes(rng, len);
            has_body = len > 0;
        }
        _ => {
            let coding = *rng.pick(&["chunked", "Chunked", "CHUNKED"]);
            headers.push(header_line(rng, "Transfer-Encoding", coding));
            body = chunked_body(rng);
            has_body = true;
        }
    }
    let expect = !http10 && rng.chance(if has_body { 40 } else { 5 });
    if expect {
        let value = *rng.pick(&["100-continue", "100-Continue"]);
        headers.push(header_line(rng, "Expect", value));
    }
    // Header order does not matter: shuffle.
    for i in (1..headers.len()).rev() {
        headers.swap(i, rng.below(i + 1));
    }

    let mut bytes = format!("{method} {path}{query} {version}\r\n").into_bytes();
    headers
        .iter()
        .for_each(|line| bytes.extend_from_slice(line));
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(&body);

    let status = match (known, method) {
        (false, _) => 404,
        (true, "GET" | "HEAD") => 200,
        (true, _) => 405,
    };
    let expected = Expected {
        interim: expect && has_body,
        status,
        connection: match (last, http10) {
            (true, _) => Some("close"),
            (false, true) => Some("keep-alive"),
            (false, false) => None,
        },
        head_only: method == "HEAD",
    };
    (bytes, expected)
}

/// A pipelined stream of `count` requests, and what each must get.
fn request_stream(rng: &mut Rng, count: usize) -> (Vec<u8>, Vec<Expected>) {
    let close_at_end = rng.chance(30);
    let mut stream = Vec::new();
    let mut expected = Vec::new();
    for i in 0..count {
        let (bytes, answer) = request(rng, close_at_end && i + 1 == count);
        stream.extend_from_slice(&bytes);
        expected.push(answer);
    }
    if close_at_end && rng.chance(50) {
        // Whatever follows a closing request is never answered.
        let (bytes, _) = request(rng, false);
        stream.extend_from_slice(&bytes);
    }
    (stream, expected)
}

/// Piece lengths covering `len` bytes, in one of several styles.
fn split(rng: &mut Rng, len: usize) -> Vec<usize> {
    let mut pieces = Vec::new();
    match rng.below(3) {
        // Byte by byte.
        0 => pieces.resize(len, 1),
        // Mostly small reads, some empty, some large.
        1 => {
            let mut left = len;
            while left > 0 {
                let piece = match rng.below(10) {
                    0 => 0,
                    1..=5 => rng.range(1, 4),
                    6..=8 => rng.range(5, 64),
                    _ => rng.range(65, 2000),
                };
                let piece = piece.min(left);
                pieces.push(piece);
                left -= piece;
            }
        }
        // A few random cut points.
        _ => {
            let mut cuts: Vec<usize> = (0..rng.range(1, 8)).map(|_| rng.below(len + 1)).collect();
            cuts.push(len);
            cuts.sort_unstable();
            let mut start = 0;
            for cut in cuts {
                pieces.push(cut - start);
                start = cut;
            }
        }
    }
    pieces
}

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
    assert_eq!(start.max(input.len()), input.len());
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
        let body = if want.head_only { 0 } else { length };
        assert!(
            rest.len() >= head.len + body,
            "request {index}: body cut short"
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
