//! The NATS client protocol as bytes: what a server sends, parsed as it
//! arrives (`proto`), what a client writes (`proto`), header blocks
//! (`headers`), the `INFO` a server opens with (`info`), server URLs and
//! their credentials (`url`), an NKEY or `.creds` file that answers the
//! server's nonce (`identity`), and one client's session, which says what
//! to write and what came, without a socket (`session`).
//!
//! The protocol is line-based: a control line (`MSG subject sid 5`),
//! then for messages a payload of the length it gave. A server may send
//! any of `INFO`, `MSG`, `HMSG`, `PING`, `PONG`, `+OK`, `-ERR`; a client
//! writes `CONNECT`, `PUB`, `HPUB`, `SUB`, `UNSUB`, `PING`, `PONG`. This
//! module knows nothing of pollers, actors or HTTP: `cluster` drives it.

pub(crate) mod headers;
pub(crate) mod identity;
pub(crate) mod info;
pub(crate) mod jetstream;
pub(crate) mod proto;
pub(crate) mod session;
pub(crate) mod url;
