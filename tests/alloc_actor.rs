//! Allocations per request for an actor route run on the connection's own
//! poller (`local` dispatch), counted by a global allocator: at most two,
//! the request's bytes (the head and body an `ActorRequest` owns, as a
//! message must own what it carries) and the box uppercut's `Envelope` puts
//! every message in. The actor answers with a response built once and
//! cloned, which shares its bytes. This file is its own test binary with one
//! test, so nothing else allocates while it counts.

mod common;

use common::{config, start_with};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, ActorResponse, Dispatch, Method, Routes};

#[global_allocator]
static COUNTING: common::alloc::Counting = common::alloc::Counting;

const REQUESTS: usize = 10_000;

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
    let response = ActorResponse::new(200)
        .and_then(|response| response.with_header("Content-Type", "text/plain"))
        .expect("a valid response");
    Hello(response.with_body("Hello, World!"))
}

/// Allocations during `REQUESTS` round trips to `path`, and the allowance
/// of `common::alloc::during`.
fn allocations(path: &str) -> (usize, usize) {
    let routes = Routes::new()
        .actor(&[Method::Get], "/shared", "shared")
        .spawn("shared", hello())
        .actor(&[Method::Get], "/per-poller", "per-poller")
        .spawn_per_poller("per-poller", |_| hello());
    let server = start_with(&config(Dispatch::Local), routes);
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    common::alloc::during_round_trips(server.local_addr(), request.as_bytes(), &["200"], REQUESTS)
}

#[test]
fn an_inline_actor_route_allocates_at_most_twice_per_request() {
    for path in ["/shared", "/per-poller"] {
        let (counted, allowed) = allocations(path);
        println!("{path}: {counted} allocations in {REQUESTS} round trips");
        assert!(
            counted <= 2 * REQUESTS + allowed,
            "{path}: {counted} allocations in {REQUESTS} round trips"
        );
        // The envelope's box at least: the counter sees the server's threads.
        assert!(
            counted >= REQUESTS,
            "{path}: only {counted} allocations counted"
        );
    }
}
