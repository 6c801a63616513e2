//! What actors send one another beyond the types they define: the
//! subscription messages of topics, and why a send was refused.
//!
//! [`AnySender::send`](uppercut::api::AnySender::send) returns nothing, so
//! a send the server refuses (a message that is not bytes, to an actor on
//! another server) is noted for the thread that made it:
//! [`last_send_error`] tells the actor at the call, and the server logs
//! and counts it besides.

use std::cell::RefCell;
use std::fmt;

/// Addresses of topics start with this: `topic/room`.
pub(crate) const TOPIC_PREFIX: &str = "topic/";

/// Subscribes the sender to the topic it is sent to: an owned actor
/// sends it to `topic/room` (`sender.send("topic/room",
/// Envelope::of(Subscribe))`) and from then on receives what is published
/// there, on every server, as it was published (a `Vec<u8>`, `Bytes`,
/// `String` or [`Outgoing`]), with `envelope.from` naming the publisher
/// (`address@node` when it is on another server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscribe;

/// Ends what [`Subscribe`] began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsubscribe;

/// Why a message was not sent to an address on another server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// Only bytes (`Vec<u8>`, `Bytes`, `String`, a text or binary
    /// `Outgoing`) and `ActorRequest`s cross servers.
    NotBytes {
        /// The address it was sent to.
        to: String,
    },
    /// The address names a node, and the server is in no cluster.
    NoCluster {
        /// The address it was sent to.
        to: String,
    },
    /// The server is not connected to NATS now.
    Unreachable,
    /// Larger than the NATS server takes (its `max_payload`).
    TooLarge {
        /// The message's size on the wire.
        len: usize,
        /// The NATS server's limit.
        max: usize,
    },
    /// More than the bound waits for NATS already.
    BufferFull,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::NotBytes { to } => write!(
                f,
                "{to} is on another server: only bytes (Vec<u8>, Bytes, String, Outgoing) \
                 and ActorRequests cross servers"
            ),
            SendError::NoCluster { to } => {
                write!(f, "{to} names a node, and this server is in no cluster")
            }
            SendError::Unreachable => f.write_str("NATS is unreachable"),
            SendError::TooLarge { len, max } => {
                write!(
                    f,
                    "{len} bytes, past the NATS server's max_payload of {max}"
                )
            }
            SendError::BufferFull => f.write_str("the NATS send buffer is full"),
        }
    }
}

impl std::error::Error for SendError {}

thread_local! {
    static REFUSED: RefCell<Option<SendError>> = const { RefCell::new(None) };
}

/// Notes that this thread's last send was refused.
pub(crate) fn refuse(error: SendError) {
    let _ = REFUSED.try_with(|refused| *refused.borrow_mut() = Some(error));
}

/// Clears what [`refuse`] noted, before a send.
pub(crate) fn clear() {
    let _ = REFUSED.try_with(|refused| refused.borrow_mut().take());
}

/// Why this thread's last send to an address on another server (or to a
/// topic) was refused, if it was; taking it clears it. An owned actor
/// calls it right after `sender.send(…)` to learn at the call what the
/// server also logs and counts.
pub fn last_send_error() -> Option<SendError> {
    REFUSED
        .try_with(|refused| refused.borrow_mut().take())
        .ok()
        .flatten()
}
