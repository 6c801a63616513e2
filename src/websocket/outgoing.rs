//! [`Outgoing`]: a message for a WebSocket client, built once and cheap to
//! clone, so a room sends the same bytes to each member without copying
//! them, and, with permessage-deflate, compresses them once for all the
//! members that agreed to the same parameters.

use std::sync::Arc;

use bytes::Bytes;

use crate::ws::deflate::DeflateCache;

/// What an [`Outgoing`] message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutgoingKind {
    Text,
    Binary,
    /// A close frame with this code; the bytes are the reason.
    Close(u16),
}

/// A message to write to a WebSocket client: text, binary, or a close.
/// Cloning shares the bytes, and their compressed form once a connection
/// with permessage-deflate has made it.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub(crate) kind: OutgoingKind,
    pub(crate) payload: Bytes,
    /// The compressed payload, made by the first connection that needs it.
    pub(crate) deflated: Arc<DeflateCache>,
}

impl PartialEq for Outgoing {
    fn eq(&self, other: &Outgoing) -> bool {
        self.kind == other.kind && self.payload == other.payload
    }
}

impl Eq for Outgoing {}

impl Outgoing {
    /// A text message.
    pub fn text(text: impl Into<String>) -> Outgoing {
        Outgoing {
            kind: OutgoingKind::Text,
            payload: Bytes::from(text.into()),
            deflated: Arc::default(),
        }
    }

    /// A text message of `bytes`, which must be UTF-8; `None` if they are
    /// not.
    pub fn text_bytes(bytes: Bytes) -> Option<Outgoing> {
        std::str::from_utf8(&bytes).ok()?;
        Some(Outgoing {
            kind: OutgoingKind::Text,
            payload: bytes,
            deflated: Arc::default(),
        })
    }

    /// A binary message.
    pub fn binary(bytes: impl Into<Bytes>) -> Outgoing {
        Outgoing {
            kind: OutgoingKind::Binary,
            payload: bytes.into(),
            deflated: Arc::default(),
        }
    }

    /// Closes the connection with `code` and `reason` (RFC 6455 §7.4; the
    /// reason is cut to the 123 bytes a close frame has room for, at a
    /// character boundary). A code an endpoint may not send (below 1000,
    /// 1004 to 1006, 1015, 1016 to 2999 unregistered, 5000 and above) is
    /// sent as 1011.
    pub fn close(code: u16, reason: &str) -> Outgoing {
        let code = if crate::ws::close_code_is_sendable(code) {
            code
        } else {
            1011
        };
        let mut end = reason.len().min(123);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        Outgoing {
            kind: OutgoingKind::Close(code),
            payload: Bytes::copy_from_slice(&reason.as_bytes()[..end]),
            deflated: Arc::default(),
        }
    }

    /// The bytes the client's message will carry (the reason, for a close).
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The length of the compressed payload that connections with
    /// permessage-deflate (without context takeover) share, once the first
    /// of them has made it; `None` before, or if compressing did not make
    /// the message smaller.
    pub fn deflated_len(&self) -> Option<usize> {
        self.deflated.compressed_len()
    }
}
