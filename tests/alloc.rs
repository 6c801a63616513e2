//! No allocation per request on the hot path in `local` dispatch, counted by a
//! global allocator. This file is its own test binary, with one test, so no
//! other test allocates while it counts; the client loop allocates nothing.
//! The requests include a static file by a percent-encoded path,
//! conditional ones, answered 304 and 200, and a handler route with a path
//! parameter. Counting for `--metrics` must not
//! allocate either.
//!
//! An actor route run on the connection's own poller allocates at most twice
//! per request: the request's bytes (the head and body an `ActorRequest`
//! owns, as a message must own what it carries) and the box uppercut's
//! `Envelope` puts every message in. Its actors answer with a response built
//! once and cloned, which shares its bytes.
//!
//! Middleware (CORS and a request id, made or taken) cost a canned or a
//! handler route no allocation: the id is held in place and the fields are
//! written into the output. An actor route with middleware allocates twice
//! more: the box that keeps its request for the `after` hooks while the
//! answer is awaited, and the header its bytes get once they are shared.
//!
//! A WebSocket echo allocates nothing per message once warm: frames are
//! decoded into a buffer the connection reuses, and the echo is written
//! into the poller's scratch output.

mod common;

use std::path::Path;

use common::{config, start_with};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, ActorResponse, Cors, Method, RequestId};
use uppercut_mio_server::{Config, Dispatch, Routes, StaticLimits, StatusCode};

#[global_allocator]
static COUNTING: common::alloc::Counting = common::alloc::Counting;

const REQUESTS: usize = 10_000;
const PIPELINED: &[u8] =
    b"GET / HTTP/1.1\r\nHost: t\r\n\r\nGET /v1/user HTTP/1.1\r\nHost: t\r\n\r\n\
    GET /v1%2Duser.json HTTP/1.1\r\nHost: t\r\nIf-None-Match: *\r\n\r\n\
    GET /v1-user.json HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"x\", W/\"y\"\r\n\r\n\
    GET /users/42 HTTP/1.1\r\nHost: t\r\n\r\n";
/// The status of each response to `PIPELINED`.
const STATUSES: [&str; 5] = ["200", "200", "304", "200", "200"];

/// Allocations made anywhere in the process while one keep-alive connection
/// does `REQUESTS` round trips of `PIPELINED`, after a warm-up, and how many
/// are allowed without a per-request one (see `common::alloc::during`).
fn allocations_during_requests(dispatch: Dispatch, metrics: bool) -> (usize, usize) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    // A handler route with a path parameter, read back (borrowed).
    let routes = Routes::standard()
        .handler(&[Method::Get], "/users/{id}", |request, response| {
            let id = request.param("id").unwrap_or_default();
            response.body(id.as_bytes());
        })
        .with_static_dir(&fixtures, StaticLimits::default())
        .expect("the fixtures load");
    let config = Config {
        metrics: metrics.then(|| "127.0.0.1:0".parse().unwrap()),
        ..config(dispatch)
    };
    let server = start_with(&config, routes);
    common::alloc::during_round_trips(server.local_addr(), PIPELINED, &STATUSES, REQUESTS)
}

/// Answers with a clone of one response.
struct Hello(ActorResponse);

impl AnyActor for Hello {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            request.respond(self.0.clone());
        }
    }
}

fn hello() -> Hello {
    let response = ActorResponse::new(StatusCode::OK)
        .with_header("Content-Type", "text/plain")
        .expect("a valid header");
    Hello(response.with_body("Hello, World!"))
}

/// Allocations during `REQUESTS` round trips to the actor route at `path`
/// (one shared actor, or an actor per poller), and the allowance.
fn allocations_during_actor_calls(path: &str) -> (usize, usize) {
    let routes = Routes::new()
        .actor(&[Method::Get], "/shared", "shared")
        .spawn("shared", hello())
        .actor(&[Method::Get], "/per-poller", "per-poller")
        .spawn_per_poller("per-poller", |_| hello());
    let server = start_with(&config(Dispatch::Local), routes);
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    common::alloc::during_round_trips(server.local_addr(), request.as_bytes(), &["200"], REQUESTS)
}

/// The requests to the routes behind middleware: CORS from an allowed
/// origin (a request and a preflight), with ids given. (A made id grows in
/// length as the count does, and the probe reads answers of one length;
/// making one writes it on the stack.)
const WRAPPED: &[u8] =
    b"GET / HTTP/1.1\r\nHost: t\r\nOrigin: https://a.example\r\nX-Request-Id: r-1\r\n\r\n\
    GET /users/7 HTTP/1.1\r\nHost: t\r\nOrigin: https://a.example\r\nX-Request-Id: r-2\r\n\r\n\
    OPTIONS /json HTTP/1.1\r\nHost: t\r\nOrigin: https://a.example\r\nX-Request-Id: r-3\r\n\
    Access-Control-Request-Method: PUT\r\n\r\n";

/// Allocations during `REQUESTS` round trips through CORS and a request id
/// (to canned and handler routes, and to an actor route when `actor`), and
/// the allowance.
fn allocations_behind_middleware(actor: bool) -> (usize, usize) {
    let cors = Cors::origins(&["https://a.example"]).allow_methods(&[Method::Get, Method::Put]);
    let routes = Routes::standard()
        .handler(&[Method::Get], "/users/{id}", |request, response| {
            let id = request.request_id().unwrap_or_default();
            response.body(id.as_bytes());
        })
        .actor(&[Method::Get], "/shared", "shared")
        .spawn("shared", hello())
        .wrap(RequestId::new())
        .wrap(cors);
    let server = start_with(&config(Dispatch::Local), routes);
    let addr = server.local_addr();
    match actor {
        true => {
            let request = b"GET /shared HTTP/1.1\r\nHost: t\r\nOrigin: https://a.example\r\n\
                X-Request-Id: r-4\r\n\r\n";
            common::alloc::during_round_trips(addr, request, &["200"], REQUESTS)
        }
        false => common::alloc::during_round_trips(addr, WRAPPED, &["200", "200", "204"], REQUESTS),
    }
}

#[test]
fn local_dispatch_allocates_nothing_per_request() {
    let (local, allowed) = allocations_during_requests(Dispatch::Local, false);
    let (counted, counted_allowed) = allocations_during_requests(Dispatch::Local, true);
    println!("allocations for {REQUESTS} round trips: local {local}, local with metrics {counted}");
    assert!(
        local < allowed,
        "local dispatch allocated {local} times in {REQUESTS} round trips"
    );
    assert!(
        counted < counted_allowed,
        "local dispatch with --metrics allocated {counted} times in {REQUESTS} round trips"
    );
    for path in ["/shared", "/per-poller"] {
        let (counted, allowed) = allocations_during_actor_calls(path);
        println!("actor route {path}: {counted} allocations in {REQUESTS} round trips");
        assert!(
            counted <= 2 * REQUESTS + allowed,
            "actor route {path}: {counted} allocations in {REQUESTS} round trips"
        );
    }
    let (counted, allowed) = allocations_behind_middleware(false);
    println!("behind CORS and a request id: {counted} allocations in {REQUESTS} round trips");
    assert!(
        counted < allowed,
        "behind middleware: {counted} allocations in {REQUESTS} round trips"
    );
    let (counted, allowed) = allocations_behind_middleware(true);
    println!("actor route behind middleware: {counted} allocations in {REQUESTS} round trips");
    assert!(
        counted <= 4 * REQUESTS + allowed,
        "actor route behind middleware: {counted} allocations in {REQUESTS} round trips"
    );
    for size in [32, 16 * 1024] {
        let (counted, allowed) = allocations_during_echoes(size);
        println!("WebSocket echo of {size} bytes: {counted} allocations in {REQUESTS} messages");
        assert!(
            counted < allowed,
            "WebSocket echo of {size} bytes: {counted} allocations in {REQUESTS} messages"
        );
    }
    common::alloc::assert_counter_sees_server_threads(Dispatch::Local);
}

/// Echoes each binary message.
struct Echo;

impl uppercut_mio_server::WebSocket for Echo {
    fn on_message(
        &mut self,
        message: uppercut_mio_server::Message<'_>,
        context: &mut uppercut_mio_server::WsContext<'_>,
    ) {
        if let uppercut_mio_server::Message::Binary(bytes) = message {
            context.send_binary(bytes);
        }
    }
}

/// Allocations during `REQUESTS` echoes of a `size`-byte binary message on
/// one WebSocket, after a warm-up; the client loop allocates nothing.
fn allocations_during_echoes(size: usize) -> (usize, usize) {
    use std::io::{Read, Write};
    let server = start_with(
        &config(Dispatch::Local),
        Routes::new().websocket("/ws", |_| Echo),
    );
    let mut stream = std::net::TcpStream::connect(server.local_addr()).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
        .write_all(
            b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101 "));
    // A masked binary frame (a zero mask), and the echo it gets.
    let mut frame = vec![0x82];
    let mut echo = vec![0x82];
    if size < 126 {
        frame.push(0x80 | size as u8);
        echo.push(size as u8);
    } else {
        frame.extend_from_slice(&[0x80 | 126, (size >> 8) as u8, size as u8]);
        echo.extend_from_slice(&[126, (size >> 8) as u8, size as u8]);
    }
    frame.extend_from_slice(&[0; 4]);
    let payload: Vec<u8> = (0..size).map(|i| i as u8).collect();
    frame.extend_from_slice(&payload);
    echo.extend_from_slice(&payload);
    let mut received = vec![0u8; echo.len()];
    let mut round_trips = |count: usize| {
        for _ in 0..count {
            stream.write_all(&frame).unwrap();
            stream.read_exact(&mut received).unwrap();
            assert!(received == echo, "the echo");
        }
    };
    round_trips(100);
    common::alloc::during(|| round_trips(REQUESTS))
}
