//! The WebSocket protocol (RFC 6455) as bytes in, events and bytes out: the
//! opening handshake's checks and accept key (`handshake`), the frames a
//! server writes (`frame`), and an incremental decoder of what a client
//! sends (`session`). No sockets and no actors here: the connection actor
//! (`runtime::connection::websocket`) drives a [`session::Session`] with
//! each read and writes one batch, and the fuzz target drives it with
//! arbitrary bytes cut at arbitrary points.
//!
//! permessage-deflate (RFC 7692), when a route offers it, is `deflate`:
//! the negotiation, and each message compressed or inflated (the decoder
//! inflates as frames arrive, the connection's writers compress).

pub(crate) mod deflate;
pub(crate) mod frame;
pub(crate) mod handshake;
pub(crate) mod session;
mod utf8;

/// Whether an endpoint may send `code` in a close frame (RFC 6455
/// §7.4.1-2): the defined codes but 1004 (reserved), 1005 and 1006 (only
/// ever reported, never sent) and 1015 (TLS), and the ranges registered
/// (3000-3999) or private (4000-4999).
pub(crate) fn close_code_is_sendable(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}
