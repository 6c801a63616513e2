//! An actor route: each request goes to an uppercut actor, which answers.
//!
//!     cargo run --release --example actor_route -- 127.0.0.1:8080
//!     curl localhost:8080/count    # 1, then 2, then 3 ...

use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, ActorResponse, Config, Method, Routes, Server};

/// Counts the requests it has answered; the count is its own, so no lock.
#[derive(Default)]
struct Counter {
    count: u64,
}

impl AnyActor for Counter {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.count += 1;
            request.respond(ActorResponse::text(self.count.to_string()));
        }
    }
}

fn main() {
    // Before anything starts: a SIGTERM must wait for run_until_signal.
    Server::block_signals();
    uppercut_mio_server::init_logging();
    let bind = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let config = Config {
        bind: bind.parse().expect("ADDR:PORT"),
        ..Config::default()
    };
    let routes = Routes::new()
        .actor(&[Method::Get], "/count", "counter")
        .spawn("counter", Counter::default());
    let server = Server::start(&config, routes).unwrap_or_else(|e| {
        // Display: the flag, file or address, and what is wrong.
        eprintln!("actor_route: {e}");
        std::process::exit(1)
    });
    println!("listening on http://{}", server.local_addr());
    // Drains on SIGINT or SIGTERM.
    server.run_until_signal();
}
