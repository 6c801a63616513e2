//! Work that blocks, kept off the pollers: `GET /slow` is answered by an
//! actor on threads of its own that sleeps 20 ms per request (a stand-in for
//! a synchronous database call), while `GET /fast`, a handler on the pollers,
//! stays fast however many `/slow` requests are waiting.
//!
//!     cargo run --release --example slow -- 127.0.0.1:8080
//!     curl localhost:8080/slow    # slow, after 20 ms
//!     curl localhost:8080/fast    # fast, at once

use std::thread;
use std::time::Duration;

use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, ActorResponse, Config, Method, Routes, Server};

/// Threads for `/slow`: with 20 ms a request, each serves 50 requests a
/// second, so 8 serve 400.
const SLOW_THREADS: usize = 8;

/// Sleeps, then answers `slow`.
struct Slow;

impl AnyActor for Slow {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            thread::sleep(Duration::from_millis(20));
            request.respond(ActorResponse::text("slow"));
        }
    }
}

fn main() {
    // Before anything starts: a SIGTERM must wait for run_until_signal.
    Server::block_signals();
    let bind = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let config = Config {
        bind: bind.parse().expect("ADDR:PORT"),
        ..Config::default()
    };
    let routes = Routes::new()
        .handler(&[Method::Get], "/fast", |_, response| {
            let _ = response.header("Content-Type", "text/plain; charset=utf-8");
            response.body(b"fast");
        })
        .actor(&[Method::Get], "/slow", "slow")
        .spawn_blocking("slow", SLOW_THREADS, |_| Slow);
    let server = Server::start(&config, routes).unwrap_or_else(|e| {
        // Display: the flag, file or address, and what is wrong.
        eprintln!("slow: {e}");
        std::process::exit(1)
    });
    println!("listening on http://{}", server.local_addr());
    // Drains on SIGINT or SIGTERM.
    server.run_until_signal();
}
