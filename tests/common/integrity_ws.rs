//! The integrity harness for WebSocket mail: targets that write what is
//! mailed to them, relays that mail their clients' messages to targets by
//! address, and a listener that checks every frame a target's client
//! gets.

use std::sync::{mpsc, Arc};

use uppercut_mio_server::uppercut::api::Envelope;
use uppercut_mio_server::{Message, Outgoing, WebSocket, WsContext, WsHandle};

use super::integrity::{client_frame, message, read_frame, Expected, Reader, Window};

/// Mail for a target: a message its `on_mail` writes.
#[derive(Debug)]
pub struct Deliver(pub Outgoing);

/// What a target tells whoever feeds it.
#[derive(Debug)]
pub enum ToFeeder {
    /// It opened: its handle (its address is `handle.address()`).
    Opened(WsHandle),
    /// Its client asks to be fed (`feed ...`, as the client wrote it).
    Feed(WsHandle, String),
}

/// A target writes the messages mailed to it, tells its client its
/// address (its first message), and tells its feeder its handle and what
/// its client asks to be fed.
pub struct Target {
    pub feeder: mpsc::Sender<ToFeeder>,
}

impl WebSocket for Target {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        let address = context.address().to_string();
        context.send_text(&address);
        let _ = self.feeder.send(ToFeeder::Opened(context.handle()));
    }

    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        if let Message::Text(text) = message {
            if text.starts_with("feed ") {
                let _ = self
                    .feeder
                    .send(ToFeeder::Feed(context.handle(), text.to_string()));
            }
        }
    }

    fn on_mail(&mut self, envelope: Envelope, context: &mut WsContext<'_>) {
        if let Ok(deliver) = envelope.message.downcast::<Deliver>() {
            context.send(&deliver.0);
        }
    }
}

/// A relay sends each message its client names (`relay_command`) to
/// every target by address, as mail from its own connection's actor;
/// `to ADDRESS...` names the targets first. It writes nothing to its
/// client.
#[derive(Default)]
pub struct Relay {
    targets: Vec<String>,
}

impl WebSocket for Relay {
    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        let Message::Text(text) = message else {
            return;
        };
        if let Some(targets) = text.strip_prefix("to ") {
            self.targets = targets.split(' ').map(String::from).collect();
            return;
        }
        let numbers: Vec<usize> = text.split(' ').filter_map(|n| n.parse().ok()).collect();
        let &[stream, seq, len] = &numbers[..] else {
            panic!("a relay command: {text:?}");
        };
        let outgoing = text_message(stream, seq, len);
        for target in &self.targets {
            context
                .send_to(target, Deliver(outgoing.clone()))
                .expect("a local address takes mail");
        }
    }
}

/// What a relay's client sends to have message `seq` of `stream` relayed.
pub fn relay_command(stream: usize, seq: usize, len: usize) -> String {
    format!("{stream} {seq} {len}")
}

/// Message `seq` of `stream`, as a text message.
pub fn text_message(stream: usize, seq: usize, len: usize) -> Outgoing {
    let text = String::from_utf8(message(stream as u32, seq as u32, len));
    Outgoing::text(text.expect("letters"))
}

/// Reads frames until every stream's messages came, checking each (they
/// are final text frames), and telling `window`, if any, what came.
pub fn listen(
    mut reader: Reader,
    mut expected: Expected,
    window: Option<(Arc<Window>, usize)>,
    name: String,
) {
    while expected.remaining() > 0 {
        let frame = read_frame(&mut reader);
        // A member that only listens is pinged once it has been quiet for
        // the keep-alive timeout (a run on a loaded machine can last that
        // long): it answers, as a client would.
        if frame.head == 0x89 {
            reader.send(&client_frame(0xa, &frame.payload, [1, 2, 3, 4]));
            continue;
        }
        assert_eq!(frame.head, 0x81, "{name}: a final text frame");
        expected.check(&frame.payload, &name);
        if let Some((window, reader)) = &window {
            window.received(*reader, frame.payload.len());
        }
    }
}
