//! The WebSocket upgrade as the request stream answers it: the handshake
//! checked by `ws` (which does no parsing of its own), the 101 written with
//! the fields every response carries, and the route's actor made from the
//! request, for the connection to take with the bytes after the head.

use std::fmt;
use std::mem::MaybeUninit;

use crate::http::head::{ResponseOut, SERVER_NAME};
use crate::http::request::MAX_HEADERS;
use crate::http::status::ErrorStatus;
use crate::websocket::WebSocket;
use crate::ws::deflate::{self, Agreed, WsDeflate};
use crate::ws::handshake::{self, Accept};

/// The actor of a connection just upgraded to a WebSocket, and the
/// permessage-deflate it agreed to, if any.
pub(crate) struct Upgraded(pub(crate) Box<dyn WebSocket>, pub(crate) Option<Agreed>);

/// A valid upgrade: its accept value and, if a permessage-deflate offer
/// was taken, what was agreed and the `Sec-WebSocket-Extensions` answer.
#[derive(Debug)]
pub(super) struct Accepted {
    pub(super) accept: Accept,
    pub(super) deflate: Option<(Agreed, String)>,
}

impl fmt::Debug for Upgraded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Upgraded")
    }
}

/// Checks the upgrade request whose head is `raw_head` (already parsed
/// once, so well formed, a GET without a body, asking for `websocket`),
/// and answers its permessage-deflate offers if the route has `deflate`.
pub(super) fn check(raw_head: &[u8], deflate: Option<&WsDeflate>) -> Result<Accepted, ErrorStatus> {
    let mut slots = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut []);
    match request.parse_with_uninit_headers(raw_head, &mut slots) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(ErrorStatus::BadRequest),
    }
    let fields = request
        .headers
        .iter()
        .map(|field| (field.name.as_bytes(), field.value));
    let accept = handshake::check(fields).map_err(|refusal| match refusal.status() {
        426 => ErrorStatus::UpgradeRequired,
        _ => ErrorStatus::BadRequest,
    })?;
    let deflate = deflate.and_then(|config| {
        let offers = request
            .headers
            .iter()
            .filter(|field| field.name.eq_ignore_ascii_case("sec-websocket-extensions"))
            .map(|field| field.value);
        deflate::negotiate(config, offers)
    });
    Ok(Accepted { accept, deflate })
}

/// Writes the `200` that opens a WebSocket on an HTTP/2 stream (RFC 8441
/// §5): no `Upgrade`, `Connection` or `Sec-WebSocket-Accept` (the stream
/// is the tunnel, and no key was sent), the extension agreed as in a 101.
/// The gateway sends it as the stream's headers, without `END_STREAM`.
pub(super) fn write_established(to: &mut ResponseOut<'_>, accepted: &Accepted) {
    to.put(b"HTTP/1.1 200 OK\r\nServer: ");
    to.put(SERVER_NAME.as_bytes());
    end_opening(to, accepted);
}

/// Writes the 101 that completes the handshake.
pub(super) fn write_switching(to: &mut ResponseOut<'_>, accepted: &Accepted) {
    to.put(b"HTTP/1.1 101 Switching Protocols\r\nServer: ");
    to.put(SERVER_NAME.as_bytes());
    to.put(b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ");
    to.put(accepted.accept.as_bytes());
    end_opening(to, accepted);
}

/// The end of either opening (the 101 or HTTP/2's 200): the extension
/// agreed, the date, and the head's end. Not `Connection: close` even when
/// draining: this exchange is done, and the WebSocket's own close
/// handshake ends the connection.
fn end_opening(to: &mut ResponseOut<'_>, accepted: &Accepted) {
    if let Some((_, answer)) = &accepted.deflate {
        to.put(b"\r\nSec-WebSocket-Extensions: ");
        to.put(answer.as_bytes());
    }
    to.put(b"\r\nDate: ");
    to.persistence = crate::http::head::Persistence::KeepAlive;
    to.put_date_and_end();
}
