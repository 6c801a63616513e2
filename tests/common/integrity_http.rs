//! The integrity harness for HTTP: pipelines of requests whose responses
//! are known to the byte (head and body), sent many at a time on a
//! connection whose reader may stall, each response checked in order.
//!
//! A body is a message of the harness (`integrity::message`), whole, in
//! part (a range of a static file) or as a JSON string (what `/io` passes
//! on), so a body that is cut, moved or mixed with another shows where.
//!
//! The routes the runs ask (`routes`): an actor route to each kind of
//! actor the server owns, a handler and a blocking handler, each answering
//! with the message the request names (`?s=STREAM&n=SEQ&len=LEN`), and
//! canned bodies.
//!
//! An actor's answer that comes while the responses before it still wait
//! in the server is what the runs are after. Two shapes make it common:
//! a burst of large responses first (`BURST`), which fills the kernel's
//! buffers so that what follows waits in the server; and answers under
//! the output high-water mark back to back, so that each is written in
//! one batch with the next call, and that call's answer comes while the
//! batch waits for the reader.

use std::ops::Range;
use std::sync::mpsc;
use std::time::Duration;

use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    ActorRequest, ActorResponse, CannedResponse, Method, Request, Response, Routes, Server,
};

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
}

impl Body {
    pub fn len(&self) -> usize {
        match self {
            Body::Message { len, .. } | Body::Json { len, .. } => *len,
            Body::Part { range, .. } => range.len(),
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        match *self {
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
        if let Err(wrong) = date.check(&got, &exchange.head) {
            panic!("{}: {wrong}", what());
        }
        let body = reader.exactly(exchange.body.len());
        let want = exchange.body.bytes();
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

/// What a request for a body asks: `?s=STREAM&n=SEQ&len=LEN`.
fn asked(request: &Request<'_>) -> Option<(u32, u32, usize)> {
    let number = |name| request.query_param(name)?.parse().ok();
    Some((number("s")?, number("n")?, number("len")? as usize))
}

/// How long an answer from another thread takes: a moment that varies
/// with the message (up to 300 µs), so that answers land at different
/// points of a stalled reader's progress (a load shape, as the reader's
/// stalls are).
fn pause(seq: u32) -> Duration {
    Duration::from_micros(u64::from(seq % 4) * 100)
}

/// Answers each request with the message it asks for. On a poller: now,
/// or for every other message from another thread (a relay the run
/// starts, after a `pause`), so that the answer comes back through the
/// poller's reply queue. On a blocking thread: after a `pause`.
struct Blob {
    relay: mpsc::Sender<(ActorRequest, ActorResponse)>,
    blocking: bool,
}

impl AnyActor for Blob {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        let Ok(request) = envelope.message.downcast::<ActorRequest>() else {
            return;
        };
        // A request that asks for nothing is dropped: a 502 no run expects.
        let Some((stream, seq, len)) = asked(&request.request()) else {
            return;
        };
        let response = ActorResponse::text(message(stream, seq, len));
        if self.blocking {
            std::thread::sleep(pause(seq));
            request.respond(response);
        } else if seq % 2 == 1 {
            let _ = self.relay.send((*request, response));
        } else {
            request.respond(response);
        }
    }
}

/// The handlers: the message the request asks for; on a blocking thread,
/// after a `pause`.
fn blob_handler(blocking: bool) -> impl Fn(&Request<'_>, &mut Response<'_>) + Send + Sync {
    move |request, response| {
        let Some((stream, seq, len)) = asked(request) else {
            let _ = response.set_status(400);
            return;
        };
        if blocking {
            std::thread::sleep(pause(seq));
        }
        let _ = response.header("Content-Type", "text/plain; charset=utf-8");
        response.body(&message(stream, seq, len));
    }
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

    fn path(self) -> &'static str {
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

/// Every route the runs ask: an actor route to each kind of actor, the
/// handlers, and the canned bodies.
pub fn routes() -> Routes {
    let (relay, answers) = mpsc::channel::<(ActorRequest, ActorResponse)>();
    // Ends once the server has dropped its actors (and so every sender).
    std::thread::spawn(move || {
        for (request, response) in answers {
            let seq = asked(&request.request()).map_or(0, |(_, seq, _)| seq);
            std::thread::sleep(pause(seq));
            request.respond(response);
        }
    });
    let blob = move |blocking| {
        let relay = relay.clone();
        move |_| Blob {
            relay: relay.clone(),
            blocking,
        }
    };
    let mut routes = Routes::new()
        .actor(&[Method::Get], Kind::Shared.path(), "shared")
        .spawn("shared", blob(false)(0))
        .actor(&[Method::Get], Kind::PerPoller.path(), "per-poller")
        .spawn_per_poller("per-poller", blob(false))
        .actor(&[Method::Get], Kind::Blocking.path(), "blocking")
        .spawn_blocking("blocking", 2, blob(true))
        .handler(&[Method::Get], Kind::Inline.path(), blob_handler(false))
        .blocking_threads(2)
        .blocking_handler(
            &[Method::Get],
            Kind::BlockingHandler.path(),
            blob_handler(true),
        );
    for (i, &len) in CANNED.iter().enumerate() {
        let body = message(CANNED_STREAM, i as u32, len);
        let canned = CannedResponse::ok("text/plain", body);
        routes = routes.route(&format!("/canned/{i}"), canned);
    }
    routes
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
