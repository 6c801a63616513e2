//! One chat room: every WebSocket at `/chat` subscribes to the topic
//! `chat`, and each text message a member sends is published there, so it
//! reaches every member, sender included. The message is framed once per
//! member, and its bytes are shared, not copied.
//!
//!     cargo run --release --example chat -- 127.0.0.1:9002
//!
//! With `--nats`, the room spans every server started so: a member on one
//! server hears a member on another.
//!
//!     nats-server &
//!     cargo run --release --example chat -- 127.0.0.1:9002 --nats nats://127.0.0.1:4222 --node a
//!     cargo run --release --example chat -- 127.0.0.1:9003 --nats nats://127.0.0.1:4222 --node b

use uppercut_mio_server::{
    host_node_name, ClusterConfig, Config, Message, NatsUrl, Outgoing, Routes, Server, WebSocket,
    WsContext,
};

/// The topic every member subscribes to.
const ROOM: &str = "chat";

/// One member's connection: it joins the room on open and speaks for its
/// client; it leaves the room when the connection ends.
struct Member;

impl WebSocket for Member {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        context.subscribe(ROOM);
    }

    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        if let Message::Text(text) = message {
            // Members here hear it whatever the error says: it is about the
            // other servers (NATS down, or the message past its size).
            if let Err(e) = context.publish(ROOM, &Outgoing::text(text)) {
                eprintln!("chat: not sent to the other servers: {e}");
            }
        }
    }
}

fn main() {
    // Before anything starts: a SIGTERM must wait for run_until_signal.
    Server::block_signals();
    uppercut_mio_server::init_logging();
    let mut args = std::env::args().skip(1);
    let bind = args.next().unwrap_or_else(|| "127.0.0.1:9002".into());
    let (mut nats, mut node) = (None, host_node_name());
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--nats", Some(urls)) => {
                nats = Some(NatsUrl::parse_list(&urls).expect("--nats nats://HOST:PORT"))
            }
            ("--node", Some(name)) => node = name,
            _ => panic!("usage: chat ADDR [--nats URL[,URL]... [--node NAME]]"),
        }
    }
    let config = Config {
        bind: bind.parse().expect("ADDR:PORT"),
        cluster: nats.map(|servers| ClusterConfig::new(servers, &node)),
        ..Config::default()
    };
    let routes = Routes::new().websocket("/chat", |_request| Member);
    let server = Server::start(&config, routes).unwrap_or_else(|e| {
        // Display: the flag, file or address, and what is wrong.
        eprintln!("chat: {e}");
        std::process::exit(1)
    });
    let addr = server.local_addr();
    println!("listening on http://{addr} (the room at ws://{addr}/chat)");
    server.run_until_signal();
}
