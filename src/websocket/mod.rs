//! WebSocket connections as actors: the [`WebSocket`] trait a route's
//! actor implements, the [`WsContext`] it is handed with each event, the
//! [`WsHandle`] that reaches it from anywhere, and the registry of their
//! addresses.
//!
//! A WebSocket route (`Routes::websocket`) answers a valid upgrade with 101
//! and turns the connection into its actor: from then on the connection
//! actor, on the poller that owns the socket, reads frames, hands each
//! complete message to the actor's [`WebSocket::on_message`], and writes
//! what the actor writes in the same batch. So an echo is one read, one
//! call and one write, with no message crossing a thread. Other actors
//! reach the connection through its [`WsHandle`] (a room keeps one per
//! member) or its address; what they send waits in the connection's mail
//! until its poller wakes it, as readiness does.
//!
//! The protocol itself (the handshake, frames, UTF-8, the close
//! handshake) is `crate::ws`, which does no I/O.

use uppercut::api::Envelope;

pub(crate) mod context;
pub(crate) mod handle;
pub(crate) mod outgoing;
pub(crate) mod registry;

pub use crate::ws::deflate::WsDeflate;
pub use context::WsContext;
pub use handle::WsHandle;
pub use outgoing::Outgoing;

/// The WebSocket message limit unless set (`Config::ws_max_message`):
/// room for the largest messages the Autobahn suite sends (16 MiB).
pub(crate) const DEFAULT_MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// How much a WebSocket connection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WsLimits {
    /// The most bytes a message from the client may carry (else 1009).
    pub(crate) max_message: usize,
    /// The most bytes waiting for a client that does not read, sent and
    /// mailed (else 1008).
    pub(crate) outbound: usize,
}

impl WsLimits {
    pub(crate) fn new(max_message: usize) -> WsLimits {
        WsLimits {
            max_message,
            outbound: max_message.saturating_add(1 << 20),
        }
    }
}

/// A complete message from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    /// A text message: valid UTF-8, checked as it arrived.
    Text(&'a str),
    /// A binary message.
    Binary(&'a [u8]),
}

/// How a WebSocket connection ended, as its actor learns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closed {
    /// The close handshake, with the code the client sent (`None` for a
    /// close frame without one) or the server's if it closed first.
    Handshake(Option<u16>),
    /// The client broke the protocol, and was sent this close code.
    ProtocolError(u16),
    /// The connection was cut without a close handshake: the client went
    /// away, a timeout, the server stopping, or its outbound limit (1008).
    Cut,
}

/// The actor of one WebSocket connection. It runs on the connection's
/// poller, one event at a time, so it must not block (send blocking work
/// to an actor of `Routes::spawn_blocking`).
pub trait WebSocket: Send + 'static {
    /// The upgrade is done: the client may be written to.
    fn on_open(&mut self, _context: &mut WsContext<'_>) {}

    /// A complete message from the client. The message borrows the
    /// connection's buffer: copy what is kept.
    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>);

    /// An envelope sent to this connection's address, or through its
    /// [`WsHandle::mail`].
    fn on_mail(&mut self, _envelope: Envelope, _context: &mut WsContext<'_>) {}

    /// The connection has ended; writes go nowhere now, but sends to other
    /// actors do (leave a room here).
    fn on_close(&mut self, _closed: &Closed, _context: &mut WsContext<'_>) {}
}
