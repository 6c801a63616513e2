//! The request stream without sockets, for the fuzz target and the property
//! tests: exactly the bytes-in, bytes-out path a connection actor drives.
//! Not needed to run a server. Also the WebSocket frame decoder.

pub use crate::http::date::{format_imf_fixdate, DATE_LEN};
pub use crate::request_stream::{RequestStream, OUTPUT_HIGH_WATER};

use bytes::BytesMut;

use crate::http::head::{Persistence, ResponseOut};
use crate::routes::Routes;

/// Every whole response (head and body) that the canned routes of `routes`
/// and the error statuses can write on `date`, once for each `Connection`
/// header it may carry. A HEAD request gets the head alone. Static files,
/// handler and actor routes are not among them.
pub fn canned_responses(routes: &Routes, date: &[u8; DATE_LEN]) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    for (response, keeps) in routes.canned() {
        let persistences: &[Persistence] = match keeps {
            true => &[
                Persistence::KeepAlive,
                Persistence::KeepAliveHttp10,
                Persistence::Close,
            ],
            // Framing errors always close.
            false => &[Persistence::Close],
        };
        for &persistence in persistences {
            let mut out = BytesMut::new();
            response.write(&mut ResponseOut::new(&mut out, date, persistence, false));
            all.push(out.to_vec());
        }
    }
    all
}

/// A WebSocket client's frames decoded without sockets: what a
/// WebSocket connection feeds each read to (`ws::session`), for the fuzz
/// target.
#[derive(Debug)]
pub struct WsDecoder(crate::ws::session::Session);

/// What a [`WsDecoder`] made of the bytes so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsEvent<'a> {
    /// A complete text message.
    Text(&'a str),
    /// A complete binary message.
    Binary(&'a [u8]),
    /// The client's close, with its code if it sent one.
    Close(Option<u16>),
    /// A broken rule: the close code the server sends.
    Fail(u16),
}

impl WsDecoder {
    /// A decoder refusing messages over `max_message` bytes.
    pub fn new(max_message: usize) -> WsDecoder {
        WsDecoder(crate::ws::session::Session::new(max_message))
    }

    /// Decodes `input`, writing pongs into `out` and handing each event
    /// to `on_event`.
    pub fn feed(
        &mut self,
        input: &[u8],
        out: &mut BytesMut,
        mut on_event: impl FnMut(WsEvent<'_>),
    ) {
        use crate::ws::session::Event;
        self.0.feed(input, out, |event, _| {
            on_event(match event {
                Event::Text(text) => WsEvent::Text(text),
                Event::Binary(bytes) => WsEvent::Binary(bytes),
                Event::Close { code } => WsEvent::Close(code),
                Event::Fail(code) => WsEvent::Fail(code),
            })
        });
    }
}
