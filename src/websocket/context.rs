//! [`WsContext`]: what a WebSocket connection's actor is handed with each
//! event: its client, to write to at once, and the actors around it.

use std::any::Any;
use std::fmt;

use bytes::BytesMut;
use uppercut::api::{AnySender, Envelope};

use crate::mail::{self, SendError, Subscribe, Unsubscribe, TOPIC_PREFIX};
use crate::websocket::handle::WsHandle;
use crate::websocket::outgoing::{Outgoing, OutgoingKind};
use crate::ws::deflate::Deflate;
use crate::ws::frame::{write_frame, Opcode};

/// A close the actor asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CloseAsked {
    pub(crate) code: u16,
    pub(crate) reason: Vec<u8>,
    /// Close the socket once the frame is out, without waiting for the
    /// client's close: it is being cut off (too far behind, its actor
    /// failed).
    pub(crate) cut: bool,
}

/// A WebSocket connection's actor's view of its connection, for one event.
pub struct WsContext<'a> {
    /// The connection's output, written to the socket after the event.
    pub(crate) out: &'a mut BytesMut,
    pub(crate) sender: &'a mut dyn AnySender,
    pub(crate) handle: &'a WsHandle,
    /// Set once the actor asks to close, or the connection is closed: later
    /// writes are dropped.
    pub(crate) close: &'a mut Option<CloseAsked>,
    /// Messages written in this event.
    pub(crate) written: &'a mut u64,
    /// permessage-deflate, if the connection agreed to it.
    pub(crate) deflate: Option<&'a mut Deflate>,
}

/// Writes a text or binary `message` into `out`, compressed if the
/// connection agreed to it (`deflate`) and it is worth it; with a room's
/// message compressed once for all its members. False for a close, which
/// is not written here.
pub(crate) fn write_outgoing(
    out: &mut BytesMut,
    deflate: Option<&mut Deflate>,
    message: &Outgoing,
) -> bool {
    let opcode = match message.kind {
        OutgoingKind::Text => Opcode::Text,
        OutgoingKind::Binary => Opcode::Binary,
        OutgoingKind::Close(_) => return false,
    };
    match deflate {
        Some(deflate) => deflate.write_shared(out, opcode, &message.payload, &message.deflated),
        None => write_frame(out, opcode, &message.payload),
    }
    true
}

impl WsContext<'_> {
    /// Writes a text message to the client.
    pub fn send_text(&mut self, text: &str) {
        self.frame(Opcode::Text, text.as_bytes());
    }

    /// Writes a binary message to the client.
    pub fn send_binary(&mut self, bytes: &[u8]) {
        self.frame(Opcode::Binary, bytes);
    }

    /// Writes `message` to the client (a close as [`WsContext::close`]).
    pub fn send(&mut self, message: &Outgoing) {
        if let OutgoingKind::Close(code) = message.kind {
            return self.close_with(code, &message.payload);
        }
        if self.close.is_some() {
            return;
        }
        write_outgoing(self.out, self.deflate.as_deref_mut(), message);
        *self.written += 1;
    }

    /// Starts the close handshake with `code` and `reason` (see
    /// [`Outgoing::close`] for the codes sent as they are); nothing written
    /// after it reaches the client.
    pub fn close(&mut self, code: u16, reason: &str) {
        let close = Outgoing::close(code, reason);
        self.send(&close);
    }

    fn close_with(&mut self, code: u16, reason: &[u8]) {
        if self.close.is_none() {
            *self.close = Some(CloseAsked {
                code,
                reason: reason.to_vec(),
                cut: false,
            });
        }
    }

    fn frame(&mut self, opcode: Opcode, payload: &[u8]) {
        if self.close.is_some() {
            return;
        }
        match self.deflate.as_deref_mut() {
            Some(deflate) => deflate.write(self.out, opcode, payload),
            None => write_frame(self.out, opcode, payload),
        }
        *self.written += 1;
    }

    /// A handle to this connection, for other actors (a room keeps its
    /// members' handles) and other threads.
    pub fn handle(&self) -> WsHandle {
        self.handle.clone()
    }

    /// This connection's actor address.
    pub fn address(&self) -> &str {
        self.handle.address()
    }

    /// Sends `message` to the actor at `address` (an owned actor is run on
    /// this thread once this event is handled; any other goes through
    /// uppercut), from this connection's address. An address on another
    /// server (`name@node`, with `--nats`) takes bytes (`Vec<u8>`,
    /// `Bytes`, `String`, a text or binary [`Outgoing`]) and nothing else:
    /// anything else, or a send NATS cannot take now, is refused here.
    pub fn send_to<M: Any + Send + fmt::Debug>(
        &mut self,
        address: &str,
        message: M,
    ) -> Result<(), SendError> {
        let envelope = Envelope::of(message).from(self.handle.address());
        mail::clear();
        self.sender.send(address, envelope);
        match mail::last_send_error() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Subscribes this connection to `topic`: what is published there, on
    /// every server of the cluster, is written to its client (text as text,
    /// bytes as binary), until it unsubscribes or closes.
    pub fn subscribe(&mut self, topic: &str) {
        let _ = self.send_to(&topic_address(topic), Subscribe);
    }

    /// Ends what [`WsContext::subscribe`] began.
    pub fn unsubscribe(&mut self, topic: &str) {
        let _ = self.send_to(&topic_address(topic), Unsubscribe);
    }

    /// Publishes `message` to `topic`: each subscriber on this server gets
    /// it now, in this call's order, and those on the other servers
    /// through NATS (an error says they will not, and why).
    pub fn publish(&mut self, topic: &str, message: &Outgoing) -> Result<(), SendError> {
        self.send_to(&topic_address(topic), message.clone())
    }

    /// The sender this connection's actor sends with, for what
    /// [`WsContext::send_to`] does not cover (delays, spawns).
    pub fn sender(&mut self) -> &mut dyn AnySender {
        &mut *self.sender
    }
}

/// The address of `topic`.
pub(crate) fn topic_address(topic: &str) -> String {
    format!("{TOPIC_PREFIX}{topic}")
}

impl fmt::Debug for WsContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WsContext")
            .field("address", &self.handle.address())
            .finish_non_exhaustive()
    }
}
