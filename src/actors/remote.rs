//! Addresses beyond this server: `name@node` (the actor `name` on the
//! server started as `node`), `name@*` (whichever server serves `name`,
//! this one first), and topics (`topic/room`: every subscriber on every
//! server). The directory resolves them; the cluster (`crate::cluster`,
//! over NATS) carries them, behind the [`Remote`] trait so that the actors
//! below it need not know how.
//!
//! What crosses servers is bytes ([`Payload`]: a `Vec<u8>`, a `Bytes`, a
//! `String`, or a WebSocket text or binary [`Outgoing`]) or an
//! [`ActorRequest`](crate::ActorRequest), whose answer travels back to the
//! connection that asked. Anything else sent to a remote address is
//! refused at the call ([`SendError::NotBytes`](crate::mail::SendError)),
//! never dropped silently.

use std::fmt;

use bytes::Bytes;
use uppercut::api::{Envelope, Message};

use crate::mail::SendError;
use crate::websocket::outgoing::{Outgoing, OutgoingKind};

pub(crate) use crate::mail::TOPIC_PREFIX;

/// The node part of `name@*`: any node that serves `name`.
pub(crate) const ANY_NODE: &str = "*";

/// An address on another node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteAddr {
    pub(crate) name: String,
    /// A node's name, or [`ANY_NODE`].
    pub(crate) node: String,
}

impl RemoteAddr {
    /// Whichever node serves the name.
    pub(crate) fn is_any(&self) -> bool {
        self.node == ANY_NODE
    }
}

impl fmt::Display for RemoteAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.name, self.node)
    }
}

/// `name@node` split at its last `@`, when both parts are there.
pub(crate) fn split_node(address: &str) -> Option<(&str, &str)> {
    let (name, node) = address.rsplit_once('@')?;
    (!name.is_empty() && !node.is_empty()).then_some((name, node))
}

/// Bytes that may cross servers, as the type they were sent as, which is
/// the type they arrive as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Payload {
    Vec(Bytes),
    Bytes(Bytes),
    /// UTF-8.
    Text(Bytes),
    /// A WebSocket message ([`Outgoing`]): text or binary.
    Ws {
        text: bool,
        bytes: Bytes,
    },
}

impl Payload {
    /// The payload `message` is, or the message back when it is none.
    pub(crate) fn take(message: Message) -> Result<Payload, Message> {
        let message = match message.downcast::<Vec<u8>>() {
            Ok(vec) => return Ok(Payload::Vec(Bytes::from(*vec))),
            Err(message) => message,
        };
        let message = match message.downcast::<Bytes>() {
            Ok(bytes) => return Ok(Payload::Bytes(*bytes)),
            Err(message) => message,
        };
        let message = match message.downcast::<String>() {
            Ok(text) => return Ok(Payload::Text(Bytes::from(*text))),
            Err(message) => message,
        };
        match message.downcast::<Outgoing>() {
            Ok(outgoing) => match outgoing.kind {
                OutgoingKind::Text => Ok(Payload::Ws {
                    text: true,
                    bytes: outgoing.payload,
                }),
                OutgoingKind::Binary => Ok(Payload::Ws {
                    text: false,
                    bytes: outgoing.payload,
                }),
                OutgoingKind::Close(_) => Err(outgoing),
            },
            Err(message) => Err(message),
        }
    }

    /// The message, as the type it was sent as.
    pub(crate) fn to_message(&self) -> Message {
        match self {
            Payload::Vec(bytes) => Box::new(bytes.to_vec()),
            Payload::Bytes(bytes) => Box::new(bytes.clone()),
            Payload::Text(bytes) => Box::new(String::from_utf8_lossy(bytes).into_owned()),
            Payload::Ws { .. } => Box::new(self.outgoing()),
        }
    }

    /// The envelope an actor receives it in, from `from`.
    pub(crate) fn envelope(&self, from: &str) -> Envelope {
        let mut envelope = Envelope::of(());
        envelope.message = self.to_message();
        envelope.from = from.to_string();
        envelope
    }

    /// The WebSocket message a subscribed client is sent: text for text,
    /// binary for the rest.
    pub(crate) fn outgoing(&self) -> Outgoing {
        let text = matches!(self, Payload::Text(_) | Payload::Ws { text: true, .. });
        Outgoing {
            kind: match text {
                true => OutgoingKind::Text,
                false => OutgoingKind::Binary,
            },
            payload: self.bytes().clone(),
            deflated: Default::default(),
        }
    }

    /// The bytes.
    pub(crate) fn bytes(&self) -> &Bytes {
        match self {
            Payload::Vec(bytes) | Payload::Bytes(bytes) | Payload::Text(bytes) => bytes,
            Payload::Ws { bytes, .. } => bytes,
        }
    }

    /// The name of its type on the wire.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Payload::Vec(_) => "vec",
            Payload::Bytes(_) => "bytes",
            Payload::Text(_) => "string",
            Payload::Ws { text: true, .. } => "ws-text",
            Payload::Ws { text: false, .. } => "ws-binary",
        }
    }

    /// The payload of type `kind` (as [`Payload::kind`] names it) with
    /// `bytes`; `None` for a kind this server does not know, or text that
    /// is not UTF-8.
    pub(crate) fn from_kind(kind: &[u8], bytes: Bytes) -> Option<Payload> {
        let text = |bytes: Bytes| std::str::from_utf8(&bytes).is_ok().then_some(bytes);
        Some(match kind {
            b"vec" => Payload::Vec(bytes),
            b"bytes" => Payload::Bytes(bytes),
            b"string" => Payload::Text(text(bytes)?),
            b"ws-text" => Payload::Ws {
                text: true,
                bytes: text(bytes)?,
            },
            b"ws-binary" => Payload::Ws { text: false, bytes },
            _ => return None,
        })
    }
}

/// What carries messages to other servers (the cluster, over NATS).
pub(crate) trait Remote: Send + Sync {
    /// This server's node name.
    fn node(&self) -> &str;
    /// Sends `envelope` (bytes, or an `ActorRequest` whose answer goes
    /// back through it) to `to`, from the local address `from`. A request
    /// that cannot go is answered here (503, or 413 past the size limit).
    fn send(&self, to: &RemoteAddr, from: &str, envelope: Envelope) -> Result<(), SendError>;
    /// Publishes `payload` to topic `topic`'s subscribers on the other
    /// servers, from `from`.
    fn publish(&self, topic: &str, from: &str, payload: &Payload) -> Result<(), SendError>;
    /// This server gained its first subscriber of `topic` (true), or lost
    /// its last (false).
    fn interest(&self, topic: &str, subscribed: bool);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_keep_their_type_across() {
        let sent: [Message; 5] = [
            Box::new(vec![1u8, 2]),
            Box::new(Bytes::from_static(b"ab")),
            Box::new("héllo".to_string()),
            Box::new(Outgoing::text("hi")),
            Box::new(Outgoing::binary(vec![0u8])),
        ];
        for message in sent {
            let payload = Payload::take(message).unwrap();
            let back = Payload::from_kind(payload.kind().as_bytes(), payload.bytes().clone());
            assert_eq!(back.as_ref(), Some(&payload));
        }
        assert_eq!(
            *Payload::Vec(Bytes::from_static(b"x"))
                .to_message()
                .downcast::<Vec<u8>>()
                .unwrap(),
            b"x"
        );
        assert!(Payload::take(Box::new(7u32)).is_err());
        assert!(Payload::take(Box::new(Outgoing::close(1000, ""))).is_err());
        assert_eq!(
            Payload::from_kind(b"string", Bytes::from_static(b"\xff")),
            None
        );
        assert_eq!(Payload::from_kind(b"u32", Bytes::new()), None);
    }

    #[test]
    fn splits_name_and_node() {
        assert_eq!(split_node("counter@b"), Some(("counter", "b")));
        assert_eq!(split_node("a@b@c"), Some(("a@b", "c")));
        assert_eq!(split_node("counter"), None);
        assert_eq!(split_node("@b"), None);
        assert_eq!(split_node("a@"), None);
    }
}
