//! A WebSocket echo server: every message at `/` comes back as it came,
//! text as text and binary as binary. What the Autobahn suite runs against
//! (`scripts/autobahn.sh`). permessage-deflate is offered unless the third
//! argument says `plain`; `takeover` offers it with context takeover. A
//! certificate and key (PEM) after it serve `wss://`.
//!
//!     cargo run --release --example ws_echo -- 127.0.0.1:9001 [local|system]
//!         [shared|plain|takeover] [CERT KEY]

use uppercut_mio_server::{
    Config, Dispatch, Message, Routes, Server, TlsFiles, WebSocket, WsContext, WsDeflate,
};

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
    let ws_deflate = match args.next().as_deref() {
        Some("plain") => None,
        Some("takeover") => Some(WsDeflate::context_takeover()),
        _ => Some(WsDeflate::default()),
    };
    let tls = match (args.next(), args.next()) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert: cert.into(),
            key: key.into(),
        }),
        _ => None,
    };
    let config = Config {
        bind: bind.parse().expect("ADDR:PORT"),
        dispatch,
        ws_deflate,
        tls,
        ..Config::default()
    };
    let routes = Routes::new().websocket("/", |_request| Echo);
    let server = Server::start(&config, routes).unwrap_or_else(|e| {
        // Display: the flag, file or address, and what is wrong.
        eprintln!("ws_echo: {e}");
        std::process::exit(1)
    });
    println!("listening on ws://{}/", server.local_addr());
    server.run_until_signal();
}
