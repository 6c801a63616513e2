//! The request stream without sockets, for the fuzz target and the property
//! tests: exactly the bytes-in, bytes-out path a connection actor drives.
//! Not needed to run a server. Also the WebSocket frame decoder and an
//! HTTP/2 connection's session.

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
/// target. Each read is copied into a buffer of its own first, as the
/// connection's scratch buffer holds it, since the session unmasks in place.
#[derive(Debug)]
pub struct WsDecoder(crate::ws::session::Session, Vec<u8>);

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
        WsDecoder(crate::ws::session::Session::new(max_message), Vec::new())
    }

    /// As [`WsDecoder::new`], on a connection that agreed to
    /// permessage-deflate with the default settings: a message whose first
    /// frame has RSV1 set is inflated, against the same limit.
    pub fn with_deflate(max_message: usize) -> WsDecoder {
        let config = crate::ws::deflate::WsDeflate::default();
        let offer = std::iter::once(&b"permessage-deflate"[..]);
        let session = crate::ws::session::Session::new(max_message);
        match crate::ws::deflate::negotiate(&config, offer) {
            Some((agreed, _)) => WsDecoder(session.with_inflate(&agreed), Vec::new()),
            None => WsDecoder(session, Vec::new()),
        }
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
        self.1.clear();
        self.1.extend_from_slice(input);
        self.0.feed(&mut self.1, out, |event, _| {
            on_event(match event {
                Event::Text(text) => WsEvent::Text(text),
                Event::Binary(bytes) => WsEvent::Binary(bytes),
                Event::Close { code } => WsEvent::Close(code),
                Event::Fail(code) => WsEvent::Fail(code),
            })
        });
    }
}

/// An HTTP/2 connection's session without a socket: what an HTTP/2
/// connection feeds each read to and drives (`http2::session`), with the
/// server's limits, for the fuzz target. Streams are answered by the routes
/// given to [`H2Session::drive`]; calls to actors are not sent, so a stream
/// whose route is an actor's waits.
#[derive(Debug)]
pub struct H2Session(crate::http2::session::Session);

impl H2Session {
    /// A session whose client sent `first` (the preface, and what followed
    /// it) at `now_ms`, refusing request bodies over `max_body` bytes.
    pub fn new(max_body: u64, first: &[u8], now_ms: u64) -> H2Session {
        use crate::http2::session::{Limits, Session};
        H2Session(Session::new(Limits::new(max_body), None, first, now_ms))
    }

    /// Adds what was read from the client at `now_ms` (a client flooding
    /// the connection with control frames is sent `GOAWAY`, and nothing
    /// more of it is read).
    pub fn feed(&mut self, input: &[u8], now_ms: u64) {
        self.0.feed(input, now_ms);
    }

    /// The client ended its side.
    pub fn end_input(&mut self) {
        self.0.end_input();
    }

    /// Runs the session until nothing moves, answering streams from
    /// `routes` on `date`; false once the connection is over (nothing more
    /// is to be fed; the output is still to be taken).
    pub fn drive(&mut self, routes: &Routes, date: &[u8; DATE_LEN]) -> bool {
        use crate::http2::session::{Drive, Serving};
        let serving = Serving {
            routes,
            date,
            log: None,
            metrics: None,
        };
        let drive = self.0.drive(&serving);
        // Not sent: their streams wait, as for an actor that never answers.
        drop(self.0.take_calls());
        drive == Drive::Open
    }

    /// Appends what the session wrote for the client to `out`; true when
    /// its output was full and it has more to write: drive it again.
    pub fn take_output(&mut self, out: &mut BytesMut) -> bool {
        self.0.take_output(out)
    }

    /// The server drains: a `GOAWAY`, the streams begun are answered.
    pub fn go_away(&mut self) {
        self.0.go_away();
    }

    /// Pings the client; false when a ping cannot be sent.
    pub fn ping(&mut self) -> bool {
        self.0.ping()
    }
}

/// QPACK as the server reads and writes it (`h3::qpack`): no dynamic
/// table, static references and literals. For test clients, which
/// encode their requests' field sections with [`qpack_encode`] and read
/// the server's with [`qpack_decode`].
pub fn qpack_encode(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    crate::h3::qpack::encode(fields.iter().copied(), &mut out);
    out
}

/// The fields of the field section `block` (see [`qpack_encode`]); `None`
/// when it is malformed, refers to a dynamic table, or passes 64 KiB.
pub fn qpack_decode(block: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    crate::h3::qpack::decode(block, 64 * 1024)
        .ok()
        .map(|fields| fields.fields)
}

/// How an HTTP/3 request stream stood after the bytes given ([`H3Request`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum H3Outcome {
    /// More is to come.
    More,
    /// Served: the HTTP/1.1 response the routes wrote, and the field
    /// section and body the stream sends back (empty when the response
    /// could not be said in HTTP/3, which resets the stream).
    Answered {
        /// The HTTP/1.1 response the request stream wrote.
        response: Vec<u8>,
        /// Its field section, QPACK-encoded.
        fields: Vec<u8>,
        /// Its body (none for a HEAD request).
        body: Vec<u8>,
    },
    /// The request's route is an actor's: the call is not sent here.
    Calling,
    /// Refused: the stream reset (`false`) or the connection closed
    /// (`true`), with this HTTP/3 error code.
    Refused {
        /// The whole connection, not the stream alone.
        connection: bool,
        /// The HTTP/3 error code.
        code: u64,
    },
}

/// One HTTP/3 request stream without QUIC: what the server does with its
/// bytes (`http3::request`), and then with the request they carry (served
/// through `gateway/` as a session serves it), for the fuzz target.
#[derive(Debug)]
pub struct H3Request {
    reader: crate::http3::request::RequestReader,
    max_body: u64,
    done: bool,
}

impl H3Request {
    /// A stream on a server whose bodies may be `max_body` bytes.
    pub fn new(max_body: u64) -> H3Request {
        H3Request {
            reader: Default::default(),
            max_body,
            done: false,
        }
    }

    /// Adds what the stream gave (`ended`: then its FIN), answering from
    /// `routes` on `date` once the request is whole or refused. Nothing
    /// more is read once it was.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        ended: bool,
        routes: &Routes,
        date: &[u8; DATE_LEN],
    ) -> H3Outcome {
        use crate::gateway::{Origin, Protocol, Served, Serving};
        use crate::http3::request::{Progress, Refused};
        if self.done {
            return H3Outcome::More;
        }
        let progress = match self.reader.feed(bytes, ended, self.max_body) {
            Ok(Progress::More) => return H3Outcome::More,
            Ok(progress) => progress,
            Err(refused) => {
                self.done = true;
                let (connection, error) = match refused {
                    Refused::Connection(error) => (true, error),
                    Refused::Stream(error) => (false, error),
                };
                return H3Outcome::Refused {
                    connection,
                    code: error.code(),
                };
            }
        };
        self.done = true;
        let mut request = BytesMut::new();
        self.reader.write(progress, &mut request);
        let serving = Serving {
            routes,
            date,
            log: None,
            metrics: None,
        };
        let origin = Origin {
            peer: None,
            secure: true,
            protocol: Protocol::Http3,
        };
        let mut response = BytesMut::new();
        let stream = match crate::gateway::serve(&request, origin, &serving, &mut response) {
            Served::Calling(..) => return H3Outcome::Calling,
            Served::Answered(stream) => stream,
        };
        let written = crate::gateway::written(stream, &mut response);
        let whole = written.to_vec();
        let head_only = self.reader.is_head();
        let (fields, body) = match crate::gateway::convert::read_response(written, head_only) {
            Ok(converted) => {
                let mut fields = Vec::new();
                crate::http3::message::response_fields(
                    converted.head.status(),
                    converted.head.headers(),
                    &mut fields,
                );
                (fields, converted.body.to_vec())
            }
            Err(_) => (Vec::new(), Vec::new()),
        };
        H3Outcome::Answered {
            response: whole,
            fields,
            body,
        }
    }
}

/// Datagrams from anywhere into an HTTP/3 endpoint, as a poller's
/// (`runtime::quic`) takes them, with no socket: what it sends back is
/// counted, for the fuzz target, which checks that malformed datagrams
/// panic nothing and that no client whose address is unproven is sent
/// more than three times what it sent.
pub struct QuicDatagrams {
    endpoint: quinn_proto::Endpoint,
    config: std::sync::Arc<quinn_proto::ServerConfig>,
    sessions:
        std::collections::HashMap<quinn_proto::ConnectionHandle, crate::http3::session::Session>,
    received: u64,
    sent: u64,
    now: std::time::Instant,
}

impl std::fmt::Debug for QuicDatagrams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicDatagrams")
            .field("sessions", &self.sessions.len())
            .finish_non_exhaustive()
    }
}

impl QuicDatagrams {
    /// An endpoint serving the certificate and key in `files`; `None` when
    /// they cannot be read.
    pub fn new(files: &crate::config::TlsFiles) -> Option<QuicDatagrams> {
        let acceptor = crate::tls::TlsAcceptor::new(files, false)
            .ok()?
            .with_quic(quinn_proto::TransportConfig::default())
            .ok()?;
        let config = acceptor.quic()?;
        let endpoint_config = quinn_proto::EndpointConfig::default();
        let endpoint = quinn_proto::Endpoint::new(
            std::sync::Arc::new(endpoint_config),
            Some(std::sync::Arc::clone(&config)),
            true,
            Some([7; 32]),
        );
        Some(QuicDatagrams {
            endpoint,
            config,
            sessions: Default::default(),
            received: 0,
            sent: 0,
            now: std::time::Instant::now(),
        })
    }

    /// One datagram from `from`, handled as the endpoint handles it: a
    /// new connection accepted, a known one driven (its streams answered
    /// from `routes` on `date`), and what comes back counted.
    pub fn handle(
        &mut self,
        from: std::net::SocketAddr,
        datagram: &[u8],
        routes: &Routes,
        date: &[u8; DATE_LEN],
    ) {
        use quinn_proto::DatagramEvent;
        let _ = crate::runtime::quic::owner_of(datagram);
        self.received += datagram.len() as u64;
        let mut buf = Vec::new();
        let event = self.endpoint.handle(
            self.now,
            from,
            None,
            None,
            BytesMut::from(datagram),
            &mut buf,
        );
        let handle = match event {
            Some(DatagramEvent::NewConnection(incoming)) => {
                let config = Some(std::sync::Arc::clone(&self.config));
                match self.endpoint.accept(incoming, self.now, &mut buf, config) {
                    Ok((handle, connection)) => {
                        let limits = crate::http3::session::Limits { max_body: 1 << 20 };
                        let session = crate::http3::session::Session::new(connection, from, limits);
                        self.sessions.insert(handle, session);
                        handle
                    }
                    Err(error) => {
                        if let Some(transmit) = error.response {
                            self.sent += transmit.size as u64;
                        }
                        return;
                    }
                }
            }
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                let Some(session) = self.sessions.get_mut(&handle) else {
                    return;
                };
                session.connection().handle_event(event);
                handle
            }
            Some(DatagramEvent::Response(transmit)) => {
                self.sent += transmit.size as u64;
                return;
            }
            None => return,
        };
        let serving = crate::gateway::Serving {
            routes,
            date,
            log: None,
            metrics: None,
        };
        let Some(session) = self.sessions.get_mut(&handle) else {
            return;
        };
        session.drive(self.now, &serving);
        drop(session.take_calls());
        let connection = session.connection();
        while let Some(event) = connection.poll_endpoint_events() {
            if let Some(event) = self.endpoint.handle_event(handle, event) {
                connection.handle_event(event);
            }
        }
        loop {
            buf.clear();
            let Some(transmit) = connection.poll_transmit(self.now, 1, &mut buf) else {
                break;
            };
            self.sent += transmit.size as u64;
        }
    }

    /// Bytes handed in, and bytes the endpoint answered with.
    pub fn counts(&self) -> (u64, u64) {
        (self.received, self.sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frames in `bytes`: type, flags, stream, payload.
    fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        let mut all = Vec::new();
        while bytes.len() >= 9 {
            let len =
                usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
            let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
            all.push((bytes[3], bytes[4], stream, bytes[9..9 + len].to_vec()));
            bytes = &bytes[9 + len..];
        }
        assert!(bytes.is_empty(), "a partial frame");
        all
    }

    #[test]
    fn an_h2_session_answers_a_stream_without_a_socket() {
        let routes = Routes::standard();
        let date = format_imf_fixdate(1_700_000_000);
        let mut session = H2Session::new(1 << 20, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0);
        // SETTINGS, then HEADERS (END_STREAM | END_HEADERS) on stream 1:
        // GET, http, /, :authority localhost (HPACK, static table).
        let mut input = vec![0, 0, 0, 4, 0, 0, 0, 0, 0];
        let block = b"\x82\x86\x84\x41\x09localhost";
        input.extend_from_slice(&[0, 0, block.len() as u8, 1, 5, 0, 0, 0, 1]);
        input.extend_from_slice(block);
        session.feed(&input, 1);
        assert!(session.drive(&routes, &date));
        let mut out = BytesMut::new();
        assert!(!session.take_output(&mut out));
        let frames = frames(&out);
        assert_eq!(
            (frames[0].0, frames[0].1),
            (4, 0),
            "the server's SETTINGS first"
        );
        let on_stream: Vec<_> = frames.iter().filter(|f| f.2 == 1).collect();
        assert_eq!(on_stream.len(), 2, "{frames:?}");
        // HEADERS, END_HEADERS, beginning with :status 200 (static index 8).
        assert_eq!(
            (on_stream[0].0, on_stream[0].1, on_stream[0].3[0]),
            (1, 4, 0x88)
        );
        // DATA, END_STREAM: the body of /.
        assert_eq!((on_stream[1].0, on_stream[1].1), (0, 1));
        assert_eq!(on_stream[1].3, b"hello\n");
        session.end_input();
        assert!(!session.drive(&routes, &date));
    }
}
