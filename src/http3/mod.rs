//! HTTP/3 (RFC 9114) on the pollers: one QUIC connection's streams, driven
//! as `http2/` drives `h2`. quinn-proto speaks QUIC (packets, TLS through
//! rustls, loss recovery, flow control, the anti-amplification limit,
//! idle timeouts); `h3/` reads and writes HTTP/3's frames and QPACK; and
//! each request stream is answered by the HTTP/1.1 code through
//! `gateway/`, as an HTTP/2 stream is, so every route answers over HTTP/3
//! as it does over HTTP/1.1.

pub(crate) mod message;
pub(crate) mod request;
pub(crate) mod session;
