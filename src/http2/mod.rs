//! HTTP/2 (RFC 9113) on the pollers, with the `h2` crate: one
//! connection's streams, bytes in and bytes out, as `request_stream` is for
//! HTTP/1.1.
//!
//! `h2` speaks the protocol (frames, HPACK, flow control, the limits and
//! the known attacks); it reads and writes through a [`pipe::Pipe`] of
//! in-memory buffers the connection fills and drains. Each stream's request
//! is answered by the same code that answers HTTP/1.1 (`gateway/`): it is
//! handed to a request stream of its own as the HTTP/1.1 request it means,
//! and the response that stream writes is sent back as HTTP/2 headers and
//! data. So every route (canned, handler, actor, static, `/io`, errors,
//! `HEAD`, `--header` fields) answers over HTTP/2 as it does over HTTP/1.1,
//! and streams whose actors are slow wait each on its own.
//!
//! An extended CONNECT for a WebSocket (RFC 8441) is answered the same way,
//! as the upgrade it means; its stream then becomes a tunnel (`tunnel`)
//! whose bytes the connection's WebSocket session reads and writes.

pub(crate) mod hpack_check;
pub(crate) mod pipe;
pub(crate) mod session;
mod tunnel;
