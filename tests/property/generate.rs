//! Random valid request streams for the property test: a small seeded PRNG,
//! requests of every kind the server frames (bodies, chunks, HEAD, HTTP/1.0,
//! 100-continue), the response each must get, and ways to cut a stream into reads.

/// xorshift64*: small, fast and good enough to drive a generator.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        // Any seed, zero included, gives a non-zero state.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0), near enough for small n.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in `low..=high`.
    pub(crate) fn range(&mut self, low: usize, high: usize) -> usize {
        low + self.below(high - low + 1)
    }

    pub(crate) fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The response a request must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expected {
    /// `HTTP/1.1 100 Continue` comes first.
    pub(crate) interim: bool,
    pub(crate) status: u16,
    /// The value of the response's `Connection` header, if it has one.
    pub(crate) connection: Option<&'static str>,
    /// A HEAD request: the response has Content-Length but no body.
    pub(crate) head_only: bool,
    /// The body of the response (to GET; HEAD gets its length alone).
    pub(crate) body: &'static [u8],
}

/// The body each route and error serves, written out here rather than
/// taken from the server's own canned responses.
pub(crate) fn body_of(path: &str, status: u16) -> &'static [u8] {
    match (status, path) {
        (200, "/") => b"hello\n",
        (200, "/plaintext") => b"Hello, World!",
        (200, "/json") => br#"{"message":"Hello, World!"}"#,
        (200, "/v1/user") => V1_USER,
        (404, _) => b"404 Not Found\n",
        (405, _) => b"405 Method Not Allowed\n",
        _ => panic!("no body known for {status} {path}"),
    }
}

/// `/v1/user` serves this file as it is.
pub(crate) const V1_USER: &[u8] = include_bytes!("../../fixtures/v1-user.json");

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
/// Known methods the standard routes do not take: 405, and the connection
/// stays (as it does for an unknown method: `tests/rfc.rs`).
const OTHER_METHODS: [&str; 6] = ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"];

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
pub(crate) fn request(rng: &mut Rng, last: bool) -> (Vec<u8>, Expected) {
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
    let status = match (known, method) {
        (false, _) => 404,
        (true, "GET" | "HEAD") => 200,
        (true, _) => 405,
    };
    // A request whose route answers with an error gets no 100 Continue: the
    // error comes at once and the connection closes (the client may send the
    // body or not), so only the last request of a stream may be one.
    let invites = status == 200 || !has_body;
    let expect = !http10 && (invites || last) && rng.chance(if has_body { 40 } else { 5 });
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

    let expected = Expected {
        interim: expect && has_body && invites,
        status,
        connection: match (last, http10) {
            (true, _) => Some("close"),
            (false, true) => Some("keep-alive"),
            (false, false) => None,
        },
        head_only: method == "HEAD",
        body: body_of(path, status),
    };
    (bytes, expected)
}

/// A pipelined stream of `count` requests, and what each must get.
pub(crate) fn request_stream(rng: &mut Rng, count: usize) -> (Vec<u8>, Vec<Expected>) {
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
pub(crate) fn split(rng: &mut Rng, len: usize) -> Vec<usize> {
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
