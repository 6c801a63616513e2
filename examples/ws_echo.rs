//! A WebSocket echo server: every message at `/` comes back as it came,
//! text as text and binary as binary. What the Autobahn suite runs against
//! (`scripts/autobahn.sh`).
//!
//!     cargo run --release --example ws_echo -- 127.0.0.1:9001 [local|system]

use uppercut_mio_server::{Config, Dispatch, Message, Routes, Server, WebSocket, WsContext};

/// Echoes each message on its connection; it has no state of its own.
struct Echo;

impl WebSocket for Echo {
    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        match message {
            Message::Text(text) => context.send_text(text),
            Message::Binary(bytes) => context.send_binary(bytes),
        }
    }
}

fn main() {
    // Before anything starts: a SIGTERM must wait for run_until_signal.
    Server::block_signals();
    let mut args = std::env::args().skip(1);
    let bind = args.next().unwrap_or_else(|| "127.0.0.1:9001".into());
    let dispatch = match args.next().as_deref() {
        Some("system") => Dispatch::System,
        _ => Dispatch::Local,
    };
    let config = Config {
        bind: bind.parse().expect("ADDR:PORT"),
        dispatch,
        ..Config::default()
    };
    let routes = Routes::new().websocket("/", |_request| Echo);
    let server = Server::start(&config, routes).expect("start the server");
    println!("listening on ws://{}/", server.local_addr());
    server.run_until_signal();
}
