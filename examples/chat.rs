//! One chat room: every WebSocket at `/chat` joins it, and each text
//! message a member sends goes to every member, sender included, through a
//! room actor the server owns. The room keeps its members' handles and
//! writes to them directly: a message is framed once per member, and its
//! bytes are shared, not copied.
//!
//!     cargo run --release --example chat -- 127.0.0.1:9002
//!
//! If the room panics, it closes every member with 1011 (`on_fail`), and
//! the server goes on serving.

use std::collections::HashMap;

use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    Closed, Config, Message, Outgoing, Routes, Server, WebSocket, WsContext, WsHandle,
};

/// What members tell the room.
#[derive(Debug)]
enum ToRoom {
    Join(WsHandle),
    Leave(String),
    Say(String),
}

/// The room: its members, by address.
#[derive(Default)]
struct Room {
    members: HashMap<String, WsHandle>,
}

impl AnyActor for Room {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        let Ok(message) = envelope.message.downcast::<ToRoom>() else {
            return;
        };
        match *message {
            ToRoom::Join(member) => {
                self.members.insert(member.address().to_string(), member);
            }
            ToRoom::Leave(address) => {
                self.members.remove(&address);
            }
            ToRoom::Say(text) => {
                let message = Outgoing::text(text);
                // A member that has gone, or fallen too far behind, is
                // dropped from the room.
                self.members
                    .retain(|_, member| member.send(message.clone()));
            }
        }
    }

    fn on_fail(&self, _error: Box<dyn std::any::Any + Send>, _sender: &mut dyn AnySender) {
        for member in self.members.values() {
            member.close(1011, "the room failed");
        }
    }
}

/// One member's connection: it joins on open, speaks for its client, and
/// leaves when the connection ends.
struct Member;

impl WebSocket for Member {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        let me = context.handle();
        context.send_to("room", ToRoom::Join(me));
    }

    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        if let Message::Text(text) = message {
            context.send_to("room", ToRoom::Say(text.to_string()));
        }
    }

    fn on_close(&mut self, _closed: &Closed, context: &mut WsContext<'_>) {
        let me = context.address().to_string();
        context.send_to("room", ToRoom::Leave(me));
    }
}

fn main() {
    // Before anything starts: a SIGTERM must wait for run_until_signal.
    Server::block_signals();
    let bind = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9002".into());
    let config = Config {
        bind: bind.parse().expect("ADDR:PORT"),
        ..Config::default()
    };
    let routes = Routes::new()
        .spawn("room", Room::default())
        .websocket("/chat", |_request| Member);
    let server = Server::start(&config, routes).expect("start the server");
    println!("listening on ws://{}/chat", server.local_addr());
    server.run_until_signal();
}
