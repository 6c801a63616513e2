//! One counter for a whole cluster: the server started as `--owner` keeps
//! the counter actor, and `GET /count` on every server is answered by it,
//! through NATS, so behind a balancer every client counts on the same
//! count.
//!
//!     nats-server &
//!     cargo run --release --example cluster_counter -- 127.0.0.1:9010 nats://127.0.0.1:4222 a --owner
//!     cargo run --release --example cluster_counter -- 127.0.0.1:9011 nats://127.0.0.1:4222 b
//!     curl localhost:9010/count; curl localhost:9011/count; curl localhost:9010/count   # 1, 2, 3
//!
//! The owner's name goes in the route (`counter@a`); a server that is not
//! the owner answers 503 at once while the owner is gone.

use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    ActorRequest, ActorResponse, ClusterConfig, Config, Method, NatsUrl, Routes, Server,
};

/// The counter: state of its own, one message at a time.
struct Counter(u64);

impl AnyActor for Counter {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.0 += 1;
            request.respond(ActorResponse::text(format!("{}\n", self.0)));
        }
    }
}

/// The node that owns the counter.
const OWNER: &str = "a";

fn main() {
    Server::block_signals();
    uppercut_mio_server::init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: cluster_counter ADDR NATS_URL NODE [--owner]";
    let (Some(bind), Some(nats), Some(node)) = (args.first(), args.get(1), args.get(2)) else {
        panic!("{usage}");
    };
    let owner = args.get(3).map(String::as_str) == Some("--owner");
    assert!(!owner || node == OWNER, "the owner is node {OWNER}");
    let config = Config {
        bind: bind.parse().expect("ADDR:PORT"),
        cluster: Some(ClusterConfig::new(
            NatsUrl::parse_list(nats).expect("nats://HOST:PORT"),
            node,
        )),
        ..Config::default()
    };
    let mut routes = Routes::new().actor(&[Method::Get], "/count", &format!("counter@{OWNER}"));
    if owner {
        routes = routes.spawn("counter", Counter(0));
    }
    let server = Server::start(&config, routes).unwrap_or_else(|e| {
        // Display: the flag, file or address, and what is wrong.
        eprintln!("cluster_counter: {e}");
        std::process::exit(1)
    });
    println!(
        "listening on http://{} (GET /count, node {node})",
        server.local_addr()
    );
    server.run_until_signal();
}
