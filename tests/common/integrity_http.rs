//! The integrity harness for HTTP: pipelines of requests whose responses
//! are known to the byte (head and body), sent many at a time on a
//! connection whose reader may stall, each response checked in order.
//!
//! A body is a message of the harness (`integrity::message`), whole, in
//! part (a range of a static file) or as a JSON string (what `/io` passes
//! on), so a body that is cut, moved or mixed with another shows where.
//!
//! What the server answers with is `integrity_serve`.
//!
//! An actor's answer that comes while the responses before it still wait
//! in the server is what the runs are after. Two shapes make it common:
//! a burst of large responses first (`BURST`), which fills the kernel's
//! buffers so that what follows waits in the server; and answers under
//! the output high-water mark back to back, so that each is written in
//! one batch with the next call, and that call's answer comes while the
//! batch waits for the reader.

use std::ops::Range;

use uppercut_mio_server::Server;

use super::integrity::{
    difference, message, rounds, sizes, Pace, Reader, Rng, Transport, HIGH_WATER,
};
use super::{assert_recent_date, text, wait_for_open};

/// How much a pipeline keeps in flight: requests whose responses come to
/// this many bytes, more than the kernel buffers for a connection (on
/// Linux's loopback, 3 MiB in a send buffer that grows to 4 MiB), so that
/// responses wait in the server behind a stalled reader...
pub const AHEAD_BYTES: usize = 8 << 20;
/// ...but no more than this many requests: some 30 KiB, which the kernel
/// takes even from a client whose server has stopped reading.
pub const AHEAD: usize = 512;

/// A pipeline's first responses come to this many bytes: enough to fill
/// the kernel's buffers for the connection, so that what follows waits in
/// the server, behind the reader.
pub const BURST: usize = 4 << 20;

/// A response body the harness knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// `message(stream, seq, len)`.
    Message { stream: u32, seq: u32, len: usize },
    /// Bytes `range` of that message.
    Part {
        stream: u32,
        seq: u32,
        len: usize,
        range: Range<usize>,
    },
    /// That message as a JSON value of `len` bytes (`json_message`).
    Json { stream: u32, seq: u32, len: usize },
    /// Of the length the response's head gives, `json_message(stream,
    /// len, len)`: an answer whose size the asker does not choose.
    JsonOfItsLength { stream: u32 },
}

impl Body {
    /// The length, or for `JsonOfItsLength` what to count it as in flight.
    pub fn len(&self) -> usize {
        match self {
            Body::Message { len, .. } | Body::Json { len, .. } => *len,
            Body::Part { range, .. } => range.len(),
            Body::JsonOfItsLength { .. } => HIGH_WATER,
        }
    }

    /// The bytes, given the length the response's head says.
    pub fn bytes(&self, said: usize) -> Vec<u8> {
        match *self {
            Body::JsonOfItsLength { stream } => json_message(stream, said as u32, said),
            Body::Message { stream, seq, len } => message(stream, seq, len),
            Body::Part {
                stream,
                seq,
                len,
                ref range,
            } => message(stream, seq, len)[range.clone()].to_vec(),
            Body::Json { stream, seq, len } => json_message(stream, seq, len),
        }
    }
}

/// `message(stream, seq, ..)` as a JSON value of exactly `len` bytes: a
/// string of its letters, or for one byte a digit.
pub fn json_message(stream: u32, seq: u32, len: usize) -> Vec<u8> {
    match len {
        0 => Vec::new(),
        1 => vec![b'0' + message(stream, seq, 1)[0] % 10],
        _ => {
            let mut json = Vec::with_capacity(len);
            json.push(b'"');
            json.extend(message(stream, seq, len - 2));
            json.push(b'"');
            json
        }
    }
}

/// One request of a pipeline, and the response it must get: its head
/// exactly (`{date}` standing for the Date field) and its body.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub request: String,
    pub head: String,
    pub body: Body,
}

impl Exchange {
    /// `GET target`, answered 200 with `fields` (each line ending CRLF)
    /// before the length, and `body`.
    pub fn get(target: &str, fields: &str, body: Body) -> Exchange {
        Exchange {
            request: format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n"),
            head: head("200 OK", fields, body.len()),
            body,
        }
    }
}

/// A response head as the server frames it: the status line, `Server`,
/// `fields`, the length and the date.
pub fn head(status: &str, fields: &str, len: usize) -> String {
    format!(
        "HTTP/1.1 {status}\r\nServer: uppercut-mio-server\r\n{fields}Content-Length: {len}\r\n\
         Date: {{date}}\r\n\r\n"
    )
}

/// The fields of `ActorResponse::text`, and of the harness's handlers.
pub const TEXT: &str = "Content-Type: text/plain; charset=utf-8\r\n";

/// Sends `exchanges` on `reader`'s connection, keeping up to
/// `AHEAD_BYTES` of responses (and `AHEAD` requests) in flight, and checks
/// every response in order: its head exactly, its body byte for byte.
/// `name` and `seed` are said in every failure.
pub fn pipeline(reader: &mut Reader, exchanges: &[Exchange], name: &str, seed: u64) {
    let mut sent = 0;
    // Bytes of the responses sent for and not yet read.
    let mut ahead = 0;
    let mut date = DateCheck::default();
    for (index, exchange) in exchanges.iter().enumerate() {
        // Topped up in batches, so that many requests arrive at once.
        if sent < exchanges.len() && (ahead <= AHEAD_BYTES / 2 || sent - index <= AHEAD / 2) {
            let mut batch = String::new();
            while sent < exchanges.len() && ahead < AHEAD_BYTES && sent - index < AHEAD {
                batch.push_str(&exchanges[sent].request);
                ahead += exchanges[sent].body.len();
                sent += 1;
            }
            reader.send(batch.as_bytes());
        }
        let what = || {
            let line = exchange.request.lines().next().unwrap_or_default();
            format!("{name}: response {index} ({line}, seed {seed})")
        };
        let got = reader.until(b"\r\n\r\n");
        let len = match exchange.body {
            Body::JsonOfItsLength { .. } => content_length(&got)
                .unwrap_or_else(|| panic!("{}: no length in {:?}", what(), text(&got))),
            _ => exchange.body.len(),
        };
        let template = exchange.head.replace("{len}", &len.to_string());
        if let Err(wrong) = date.check(&got, &template) {
            panic!("{}: {wrong}", what());
        }
        let body = reader.exactly(len);
        let want = exchange.body.bytes(len);
        if body != want {
            panic!(
                "{}: the body is wrong: {}",
                what(),
                difference(&body, &want)
            );
        }
        ahead -= exchange.body.len();
    }
}

/// The `Content-Length` of a response head.
fn content_length(head: &[u8]) -> Option<usize> {
    let head = text(head);
    let value = head.split("\r\nContent-Length: ").nth(1)?;
    value.split("\r\n").next()?.parse().ok()
}

/// Checks heads against their templates, and each new Date once.
#[derive(Default)]
struct DateCheck {
    last: Vec<u8>,
}

impl DateCheck {
    fn check(&mut self, got: &[u8], template: &str) -> Result<(), String> {
        let shown = |bytes: &[u8]| {
            let shown = text(&bytes[..bytes.len().min(400)]);
            format!("{shown:?}{}", if bytes.len() > 400 { "..." } else { "" })
        };
        let Some(at) = super::find(got, b"\r\nDate: ") else {
            return Err(format!("no Date in the head {}", shown(got)));
        };
        let date = &got[at + 8..(at + 8 + 29).min(got.len())];
        let want = template.replace("{date}", &text(date));
        if got != want.as_bytes() {
            return Err(format!(
                "the head is wrong: got {}, expected {}",
                shown(got),
                shown(want.as_bytes())
            ));
        }
        if date != self.last {
            assert_recent_date(&text(date));
            self.last = date.to_vec();
        }
        Ok(())
    }
}

/// A byte range of a `len`-byte body (`len` > 0), as `Range: bytes=a-b`
/// names it: `a..b + 1`.
pub fn some_range(rng: &mut Rng, len: usize) -> Range<usize> {
    let first = rng.below(len as u64) as usize;
    let last = first + rng.below((len - first) as u64) as usize;
    first..last + 1
}

/// The largest body a run asks for: three times the high-water mark.
pub const MAX: usize = 200_000;

/// Bytes each connection asks for after its burst in a short run
/// (`INTEGRITY_ROUNDS` times as many in a longer one).
pub fn volume() -> usize {
    (2 << 20) * rounds()
}

/// The canned routes' bodies (`/canned/N`): message N of stream 100, of
/// these sizes.
pub const CANNED: [usize; 4] = [1, 4096, HIGH_WATER + 1, 3 * HIGH_WATER];
pub const CANNED_STREAM: u32 = 100;
pub const CANNED_FIELDS: &str = "Content-Type: text/plain\r\n";

/// A request for canned body `i`.
pub fn canned(i: usize) -> Exchange {
    let body = Body::Message {
        stream: CANNED_STREAM,
        seq: i as u32,
        len: CANNED[i],
    };
    Exchange::get(&format!("/canned/{i}"), CANNED_FIELDS, body)
}

/// A request for a canned body `rng` picks.
pub fn any_canned(rng: &mut Rng) -> Exchange {
    canned(rng.below(CANNED.len() as u64) as usize)
}

/// The largest canned body, until they come to `BURST` bytes.
pub fn burst() -> Vec<Exchange> {
    let largest = canned(CANNED.len() - 1);
    vec![largest; BURST.div_ceil(CANNED[CANNED.len() - 1])]
}

/// Where a request for a body goes.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// An actor of `Routes::spawn`: one instance, run by whichever
    /// poller's connection finds it free, the other's answer coming
    /// through its reply queue.
    Shared,
    /// An actor of `Routes::spawn_per_poller`.
    PerPoller,
    /// An actor of `Routes::spawn_blocking`: answers from its threads.
    Blocking,
    /// A `Routes::blocking_handler`: answers from the blocking threads.
    BlockingHandler,
    /// A `Routes::handler`, on the poller.
    Inline,
}

impl Kind {
    /// The routes whose answers come from an actor or a blocking thread.
    pub const CALLS: [Kind; 4] = [
        Kind::Shared,
        Kind::PerPoller,
        Kind::Blocking,
        Kind::BlockingHandler,
    ];

    pub fn path(self) -> &'static str {
        match self {
            Kind::Shared => "/shared",
            Kind::PerPoller => "/per-poller",
            Kind::Blocking => "/blocking",
            Kind::BlockingHandler => "/blocking-handler",
            Kind::Inline => "/inline",
        }
    }

    /// A call of a kind `rng` picks.
    pub fn any_call(rng: &mut Rng) -> Kind {
        Kind::CALLS[rng.below(Kind::CALLS.len() as u64) as usize]
    }

    /// Asks for message `seq` of `stream`, `len` bytes.
    pub fn exchange(self, stream: u32, seq: u32, len: usize) -> Exchange {
        let target = format!("{}?s={stream}&n={seq}&len={len}", self.path());
        Exchange::get(&target, TEXT, Body::Message { stream, seq, len })
    }
}

/// Calls back to back in each round of a `plan`.
const BACK_TO_BACK: usize = 100;

/// The sizes a connection asks for after its burst: rounds of the
/// schedule's sizes (30, every edge among them, to any route), each
/// followed by `BACK_TO_BACK` sizes under the high-water mark, spread
/// evenly (`true`: to calls back to back), until they come to `volume()`
/// bytes.
pub fn plan(rng: &mut Rng) -> Vec<(usize, bool)> {
    let mut plan = Vec::new();
    let mut bytes = 0;
    while bytes < volume() {
        plan.extend(sizes(rng, 30, MAX).into_iter().map(|len| (len, false)));
        let mut under_the_mark = || 1 + rng.below(HIGH_WATER as u64 - 1) as usize;
        plan.extend((0..BACK_TO_BACK).map(|_| (under_the_mark(), true)));
        bytes = plan.iter().map(|(len, _)| len).sum();
    }
    plan
}

/// A connection's pipeline: the `burst`, then the `plan`'s sizes, each
/// asked by `schedule` or, under the mark, `back_to_back` (given the
/// sequence number and the size).
pub fn rounds_of(
    rng: &mut Rng,
    mut schedule: impl FnMut(&mut Rng, u32, usize) -> Exchange,
    mut back_to_back: impl FnMut(&mut Rng, u32, usize) -> Vec<Exchange>,
) -> Vec<Exchange> {
    let mut exchanges = burst();
    for (seq, (len, back)) in plan(rng).into_iter().enumerate() {
        match back {
            false => exchanges.push(schedule(rng, seq as u32, len)),
            true => exchanges.extend(back_to_back(rng, seq as u32, len)),
        }
    }
    exchanges
}

/// Two connections that read slowly, one on each poller, each with its
/// pipeline (`pipelines(connection)`) at the same time.
pub fn run_on_both_pollers(
    server: &Server,
    transport: &Transport,
    pipelines: impl Fn(u32) -> Vec<Exchange>,
    name: &str,
    seed: u64,
) {
    let readers: Vec<Reader> = (0..2)
        .map(|open| {
            let reader = transport.connect(server, Pace::SLOW);
            // Counted before the next connects: one on each poller.
            wait_for_open(server, open + 1);
            reader
        })
        .collect();
    assert_eq!(server.connections_per_poller(), vec![1, 1], "both pollers");
    run_at_once(readers, pipelines, name, seed);
}

/// Each reader's pipeline (`pipelines(its index)`), all at the same time.
pub fn run_at_once(
    readers: Vec<Reader>,
    pipelines: impl Fn(u32) -> Vec<Exchange>,
    name: &str,
    seed: u64,
) {
    std::thread::scope(|scope| {
        let runs: Vec<_> = readers
            .into_iter()
            .enumerate()
            .map(|(c, mut reader)| {
                let exchanges = pipelines(c as u32);
                let name = format!("{name}, connection {c}");
                scope.spawn(move || pipeline(&mut reader, &exchanges, &name, seed))
            })
            .collect();
        for run in runs {
            if let Err(panic) = run.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

/// Connection `stream`'s pipeline of calls: requests for bodies of the
/// schedule's sizes to every kind of actor route, the inline handler and
/// the canned routes, in an order the seed picks; then calls back to back.
pub fn actor_pipeline(seed: u64, stream: u32) -> Vec<Exchange> {
    let any_route = |rng: &mut Rng, seq, len| match rng.below(6) {
        0 => Kind::Inline.exchange(stream, seq, len),
        1 => any_canned(rng),
        _ => Kind::any_call(rng).exchange(stream, seq, len),
    };
    let call = |rng: &mut Rng, seq, len| vec![Kind::any_call(rng).exchange(stream, seq, len)];
    rounds_of(
        &mut Rng::new(seed ^ u64::from(stream) << 32),
        any_route,
        call,
    )
}

/// Static files: file K holds message K of stream 200.
pub const STATIC_STREAM: u32 = 200;
/// Their mtime: Sun, 06 Nov 1994 08:49:37 GMT.
pub const MTIME: u64 = 784_111_777;

/// A static directory's files, one per size of a schedule
/// (`integrity_serve::write_files` writes them): file K, `/fK.bin`,
/// holds message K of `STATIC_STREAM`.
pub struct Files {
    /// Each file's length, and the fields of its response but the length.
    pub files: Vec<(usize, String)>,
}

impl Files {
    pub fn new(rng: &mut Rng) -> Files {
        let files = sizes(rng, 16 * rounds(), MAX)
            .into_iter()
            .enumerate()
            .map(|(k, len)| {
                let content = message(STATIC_STREAM, k as u32, len);
                let fields = format!(
                    "Content-Type: application/octet-stream\r\n\
                     Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
                     ETag: {}\r\nAccept-Ranges: bytes\r\n",
                    etag(&content)
                );
                (len, fields)
            })
            .collect();
        Files { files }
    }

    /// `GET` file `k` whole.
    pub fn whole(&self, k: usize) -> Exchange {
        let (len, fields) = &self.files[k];
        let body = Body::Message {
            stream: STATIC_STREAM,
            seq: k as u32,
            len: *len,
        };
        Exchange::get(&format!("/f{k}.bin"), fields, body)
    }

    /// `GET` a range of file `k` that `rng` picks, at most `most` bytes.
    pub fn part(&self, k: usize, rng: &mut Rng, most: usize) -> Exchange {
        let (len, fields) = &self.files[k];
        let mut range = some_range(rng, *len);
        range.end = range.end.min(range.start.saturating_add(most));
        let (first, last) = (range.start, range.end - 1);
        Exchange {
            request: format!(
                "GET /f{k}.bin HTTP/1.1\r\nHost: t\r\nRange: bytes={first}-{last}\r\n\r\n"
            ),
            head: head(
                "206 Partial Content",
                &format!("{fields}Content-Range: bytes {first}-{last}/{len}\r\n"),
                range.len(),
            ),
            body: Body::Part {
                stream: STATIC_STREAM,
                seq: k as u32,
                len: *len,
                range,
            },
        }
    }

    /// A file `rng` picks.
    pub fn any(&self, rng: &mut Rng) -> usize {
        rng.below(self.files.len() as u64) as usize
    }

    /// Connection `stream`'s pipeline: files of the schedule's sizes, whole
    /// and in ranges, with a blocking handler's answers among them; then
    /// calls back to back, each after a small range of a file.
    pub fn pipeline(&self, seed: u64, stream: u32) -> Vec<Exchange> {
        let any_file = |rng: &mut Rng, seq, len| match rng.below(6) {
            0 => Kind::BlockingHandler.exchange(stream, seq, len),
            1 => self.part(self.any(rng), rng, usize::MAX),
            _ => self.whole(self.any(rng)),
        };
        let part_then_call = |rng: &mut Rng, seq, len| {
            let part = self.part(self.any(rng), rng, 16 * 1024);
            vec![part, Kind::BlockingHandler.exchange(stream, seq, len)]
        };
        let rng = &mut Rng::new(seed ^ u64::from(stream) << 32);
        rounds_of(rng, any_file, part_then_call)
    }
}

/// The strong ETag the server should give `content`: FNV-1a 64 in hex,
/// computed here independently of the server's code.
fn etag(content: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in content {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("\"{hash:016x}\"")
}

/// The fields of `/io`'s answer but the length.
pub const JSON: &str = "Content-Type: application/json\r\n";

/// `GET /io`, answered with a body of the length its head says
/// (`Body::JsonOfItsLength`).
pub fn io_of_its_length(stream: u32) -> Exchange {
    Exchange {
        request: "GET /io HTTP/1.1\r\nHost: t\r\n\r\n".to_string(),
        head: head("200 OK", JSON, 0).replace("Content-Length: 0\r\n", "Content-Length: {len}\r\n"),
        body: Body::JsonOfItsLength { stream },
    }
}
