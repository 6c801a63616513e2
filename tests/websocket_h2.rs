//! WebSockets over HTTP/2 streams (RFC 8441) over real sockets, in both
//! dispatch modes, h2c with prior knowledge and TLS with ALPN `h2`: the
//! server's `SETTINGS_ENABLE_CONNECT_PROTOCOL`, the extended CONNECT and
//! its `200`, echo both ways at sizes that cross frames and windows, a
//! chat room with a member over HTTP/1.1 and one over HTTP/2,
//! permessage-deflate, the refusals, other streams served while a
//! WebSocket is open, and the ends: a close, the client's `RST_STREAM` or
//! `END_STREAM`, a drain, a client that reads nothing.

mod common;

use std::fs;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::h2client::{Connected, H2Client, H2WebSocket};
use common::tls::Certificates;
use common::{assert_response, config, start_with, Client, Failures};
use flate2::{Compress, Compression, FlushCompress};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    ActorRequest, Closed, Config, Dispatch, Message, Method, Outgoing, Routes, Server, WebSocket,
    WsContext, WsDeflate, WsHandle,
};

/// A frame head: `first` (FIN, RSV1, opcode) and the shortest encoding of
/// `len`, with the mask bit if `masked`.
fn head(first: u8, len: usize, masked: bool) -> Vec<u8> {
    let mask_bit = if masked { 0x80 } else { 0 };
    let mut head = vec![first];
    match len {
        0..=125 => head.push(mask_bit | len as u8),
        126..=0xffff => {
            head.push(mask_bit | 126);
            head.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            head.push(mask_bit | 127);
            head.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    head
}

/// A client frame, masked (RFC 8441 keeps RFC 6455's framing).
fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut frame = head(first, payload.len(), true);
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

/// A server frame.
fn unmasked(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = head(first, payload.len(), false);
    frame.extend_from_slice(payload);
    frame
}

fn close_frame(code: u16) -> Vec<u8> {
    unmasked(0x88, &code.to_be_bytes())
}

/// `len` bytes that repeat only every 251.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// Echoes each message; tells the test how it ended.
struct Echo {
    closed: mpsc::Sender<Closed>,
}

impl WebSocket for Echo {
    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        match message {
            Message::Text("close please") => context.close(4000, "as asked"),
            Message::Text(text) => context.send_text(text),
            Message::Binary(bytes) => context.send_binary(bytes),
        }
    }

    fn on_close(&mut self, closed: &Closed, _context: &mut WsContext<'_>) {
        let _ = self.closed.send(closed.clone());
    }
}

/// A member of the chat room: the topic `chat`. Says `joined` once it is
/// in, so the test knows when it hears the room.
struct ChatMember {
    failures: Failures,
}

impl WebSocket for ChatMember {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        context.subscribe("chat");
        context.send_text("joined");
    }

    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        let outgoing = match message {
            Message::Text(text) => Outgoing::text(text),
            Message::Binary(bytes) => Outgoing::binary(bytes.to_vec()),
        };
        if let Err(e) = context.publish("chat", &outgoing) {
            self.failures.report(format!("publish: {e}"));
        }
    }
}

/// The routes: the standard ones, `/ws` (echo) and `/chat`.
fn routes(closed: mpsc::Sender<Closed>, failures: &Failures) -> Routes {
    let failures = failures.clone();
    Routes::standard()
        .websocket("/ws", move |_| Echo {
            closed: closed.clone(),
        })
        .websocket("/chat", move |_| ChatMember {
            failures: failures.clone(),
        })
}

/// How a test reaches its server: h2c, or TLS with ALPN `h2`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Over {
    H2c,
    Tls,
}

/// A server over `over`, and what its WebSocket actors tell.
struct Fixture {
    server: Server,
    tls: Option<(Certificates, Arc<rustls::ClientConfig>)>,
    closes: mpsc::Receiver<Closed>,
    failures: Failures,
}

impl Fixture {
    fn new(dispatch: Dispatch, over: Over, name: &str, settings: Config) -> Fixture {
        let (closed, closes) = mpsc::channel();
        let failures = Failures::default();
        let tls = (over == Over::Tls).then(|| {
            let certificates = Certificates::new(&format!("h2ws-{name}-{}", dispatch.name()));
            let mut offer = (*certificates.client_config()).clone();
            offer.alpn_protocols = vec![b"h2".to_vec()];
            (certificates, Arc::new(offer))
        });
        let settings = Config {
            tls: tls.as_ref().map(|(c, _)| c.files.clone()),
            ..settings
        };
        let server = start_with(&settings, routes(closed, &failures));
        Fixture {
            server,
            tls,
            closes,
            failures,
        }
    }

    fn client(&self) -> H2Client {
        match &self.tls {
            None => H2Client::plain(self.server.local_addr()),
            Some((_, config)) => H2Client::tls(self.server.local_addr(), config),
        }
    }

    fn scheme(&self) -> &'static str {
        match self.tls {
            None => "http",
            Some(_) => "https",
        }
    }

    /// Opens a WebSocket at `path` on `client`'s connection, checking its
    /// `200` (no `Sec-WebSocket-Accept`: RFC 8441 §5).
    fn open(&self, client: &mut H2Client, path: &str, fields: &[(&str, &str)]) -> Connected {
        let mut all = vec![("sec-websocket-version", "13")];
        all.extend_from_slice(fields);
        let connected = client.extended_connect(self.scheme(), "websocket", path, &all);
        assert_eq!(connected.answer.status, 200, "{:?}", connected.answer);
        assert_eq!(connected.answer.field("sec-websocket-accept"), None);
        connected
    }

    /// The next close an actor reported.
    fn closed(&self) -> Closed {
        self.failures.check();
        self.closes
            .recv_timeout(common::IO_TIMEOUT)
            .expect("the actor learns its WebSocket closed")
    }
}

/// An ordinary GET on `client`'s connection: `/` answers `hello\n`.
fn get_root(client: &mut H2Client, scheme: &str) {
    let request = http::Request::builder()
        .uri(format!("{scheme}://localhost/"))
        .body(())
        .unwrap();
    let answer = client.request(request, b"");
    assert_eq!((answer.status, &answer.body[..]), (200, &b"hello\n"[..]));
}

/// Sends `message` as one frame and expects it echoed.
fn echo(client: &mut H2Client, ws: &mut H2WebSocket, first: u8, message: &[u8]) {
    client.ws_send(ws, &masked(first, message));
    let expected = unmasked(first, message);
    let echoed = client.ws_read(ws, expected.len());
    assert!(
        echoed == expected,
        "the echo of {} bytes (first {first:#x}) differs",
        message.len()
    );
}

/// The server says `SETTINGS_ENABLE_CONNECT_PROTOCOL = 1`; a WebSocket
/// opens with `200` and exactly the fields a response carries; text and
/// binary messages echo at sizes past one frame (16 KiB), past the
/// client's initial window (65,535) and past the server's stream window
/// (256 KiB), so flow control works both ways; an ordinary GET on the same
/// connection is answered while the WebSocket is open, and the WebSocket
/// still works after it; a close ends the stream with `END_STREAM`.
fn echoes_over(dispatch: Dispatch, over: Over) {
    let name = match over {
        Over::H2c => "echo-h2c",
        Over::Tls => "echo-tls",
    };
    let fixture = Fixture::new(dispatch, over, name, config(dispatch));
    let mut client = fixture.client();
    get_root(&mut client, fixture.scheme());
    assert!(
        client.connect_protocol_enabled(),
        "SETTINGS_ENABLE_CONNECT_PROTOCOL = 1"
    );
    let Connected { answer, websocket } = fixture.open(&mut client, "/ws", &[]);
    let names: Vec<&str> = answer.fields.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["server", "date"], "{answer:?}");
    assert_eq!(answer.field("server"), Some("uppercut-mio-server"));
    let mut ws = websocket.unwrap();
    echo(&mut client, &mut ws, 0x81, "héllo".as_bytes());
    for len in [0, 1, 125, 126, 20_000, 100_000, 300_000] {
        echo(&mut client, &mut ws, 0x82, &pattern(len));
    }
    // A ping is answered on the stream.
    client.ws_send(&mut ws, &masked(0x89, b"are you there"));
    assert_eq!(
        client.ws_read(&mut ws, 15),
        unmasked(0x8a, b"are you there")
    );
    // Another stream meanwhile, then the WebSocket again.
    get_root(&mut client, fixture.scheme());
    echo(&mut client, &mut ws, 0x81, b"still here");
    // The client's close is echoed, and the stream ends.
    client.ws_send(&mut ws, &masked(0x88, &1000u16.to_be_bytes()));
    assert_eq!(client.ws_outcome(&mut ws), Ok(close_frame(1000)));
    assert_eq!(fixture.closed(), Closed::Handshake(Some(1000)));
    // The connection serves on.
    get_root(&mut client, fixture.scheme());
    fixture.failures.check();
}

fn echoes_over_h2c(dispatch: Dispatch) {
    echoes_over(dispatch, Over::H2c);
}

fn echoes_over_tls(dispatch: Dispatch) {
    echoes_over(dispatch, Over::Tls);
}

/// Several WebSockets on one connection, each its own: messages sent to
/// both come back on their own streams, the second's short echo before
/// the first's long one has been read (within the client's connection
/// window, 65,535 bytes, which unread data of any stream holds), and
/// closing one leaves the other open; the actor's close ends its stream
/// too.
fn websockets_share_a_connection(dispatch: Dispatch) {
    let fixture = Fixture::new(dispatch, Over::H2c, "share", config(dispatch));
    let mut client = fixture.client();
    let mut a = fixture.open(&mut client, "/ws", &[]).websocket.unwrap();
    let mut b = fixture.open(&mut client, "/ws", &[]).websocket.unwrap();
    let big = pattern(40_000);
    client.ws_send(&mut a, &masked(0x82, &big));
    client.ws_send(&mut b, &masked(0x81, b"to b"));
    assert_eq!(client.ws_read(&mut b, 6), unmasked(0x81, b"to b"));
    let expected = unmasked(0x82, &big);
    assert!(client.ws_read(&mut a, expected.len()) == expected);
    // The actor closes `a`: its close frame, then END_STREAM once the
    // client answers.
    client.ws_send(&mut a, &masked(0x81, b"close please"));
    let mut asked = 4000u16.to_be_bytes().to_vec();
    asked.extend_from_slice(b"as asked");
    assert_eq!(client.ws_read(&mut a, 12), unmasked(0x88, &asked));
    client.ws_send(&mut a, &masked(0x88, &4000u16.to_be_bytes()));
    assert_eq!(client.ws_outcome(&mut a), Ok(Vec::new()));
    assert_eq!(fixture.closed(), Closed::Handshake(Some(4000)));
    echo(&mut client, &mut b, 0x81, b"b lives");
}

/// One chat member over HTTP/1.1 and one over HTTP/2 hear the same
/// messages in the same order, whoever says them.
fn a_chat_room_spans_http11_and_http2(dispatch: Dispatch) {
    let fixture = Fixture::new(dispatch, Over::H2c, "chat", config(dispatch));
    let mut h1 = Client::connect(fixture.server.local_addr());
    h1.send(
        b"GET /chat HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    assert_response(
        &h1.response(true),
        "HTTP/1.1 101 Switching Protocols\r\nServer: uppercut-mio-server\r\n\
         Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\
         Date: {date}\r\n\r\n",
    );
    let joined = unmasked(0x81, b"joined");
    assert_eq!(h1.exactly(joined.len()), joined);
    let mut client = fixture.client();
    let mut h2 = fixture.open(&mut client, "/chat", &[]).websocket.unwrap();
    assert_eq!(client.ws_read(&mut h2, joined.len()), joined);
    let said: [(bool, &[u8]); 4] = [
        (true, b"one, from HTTP/1.1"),
        (false, b"two, from HTTP/2"),
        (false, b"three, from HTTP/2"),
        (true, b"four, from HTTP/1.1"),
    ];
    for (from_h1, text) in said {
        match from_h1 {
            true => h1.send(&masked(0x81, text)),
            false => client.ws_send(&mut h2, &masked(0x81, text)),
        }
        let expected = unmasked(0x81, text);
        fixture
            .failures
            .during(|| assert_eq!(h1.exactly(expected.len()), expected));
        assert_eq!(client.ws_read(&mut h2, expected.len()), expected);
    }
    fixture.failures.check();
}

/// `message` deflated as RFC 7692 §7.2.1 says (sync-flushed, without the
/// trailing `00 00 ff ff`), at zlib `level`.
fn deflated(message: &[u8], level: u32) -> Vec<u8> {
    let mut compressor = Compress::new(Compression::new(level), false);
    let mut out = Vec::with_capacity(message.len() + 64);
    compressor
        .compress_vec(message, &mut out, FlushCompress::Sync)
        .unwrap();
    assert_eq!(compressor.total_in(), message.len() as u64);
    assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
    out.truncate(out.len() - 4);
    out
}

/// With `--ws-deflate`, permessage-deflate is agreed in the `200` as in a
/// 101, and a compressed message comes back compressed.
fn permessage_deflate_is_agreed_over_http2(dispatch: Dispatch) {
    let settings = Config {
        ws_deflate: Some(WsDeflate::default()),
        ..config(dispatch)
    };
    let fixture = Fixture::new(dispatch, Over::H2c, "deflate", settings);
    let mut client = fixture.client();
    let offer = [(
        "sec-websocket-extensions",
        "permessage-deflate; client_max_window_bits",
    )];
    let connected = fixture.open(&mut client, "/ws", &offer);
    assert_eq!(
        connected.answer.field("sec-websocket-extensions"),
        Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover")
    );
    let mut ws = connected.websocket.unwrap();
    let text: Vec<u8> = (0..40)
        .flat_map(|i| format!("{{\"id\":{i},\"user\":\"user{i}\"}},").into_bytes())
        .collect();
    client.ws_send(&mut ws, &masked(0xc1, &deflated(&text, 6)));
    let expected = unmasked(0xc1, &deflated(&text, 1));
    assert_eq!(client.ws_read(&mut ws, expected.len()), expected);
    // Short messages go as they are.
    echo(&mut client, &mut ws, 0x81, b"short");
    // Without the offer, no extension.
    let plain = fixture.open(&mut client, "/ws", &[]);
    assert_eq!(plain.answer.field("sec-websocket-extensions"), None);
}

/// An extended CONNECT refused: its protocol, target, fields and status.
type Refused<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], u16);

/// What is not a WebSocket over HTTP/2 is refused, and the connection
/// serves on: an extended CONNECT for `websocket` to a path with no
/// WebSocket route (a canned route, no route) is 404; one for another
/// protocol 501; one without `sec-websocket-version: 13` 426, as over
/// HTTP/1.1; a plain GET of a WebSocket route 426, as before.
fn refusals_are_clear(dispatch: Dispatch) {
    let fixture = Fixture::new(dispatch, Over::H2c, "refuse", config(dispatch));
    let mut client = fixture.client();
    let scheme = fixture.scheme();
    let version = [("sec-websocket-version", "13")];
    let cases: [Refused; 5] = [
        ("websocket", "/", &version, 404),
        ("websocket", "/nowhere", &version, 404),
        (
            "websocket",
            "/ws?x=1",
            &[("sec-websocket-version", "8")],
            426,
        ),
        ("websocket", "/ws", &[], 426),
        ("connect-udp", "/ws", &version, 501),
    ];
    for (protocol, path, fields, status) in cases {
        let connected = client.extended_connect(scheme, protocol, path, fields);
        assert_eq!(
            connected.answer.status, status,
            "{protocol} {path}: {:?}",
            connected.answer
        );
        assert!(connected.websocket.is_none());
    }
    let request = http::Request::builder()
        .uri(format!("{scheme}://localhost/ws"))
        .body(())
        .unwrap();
    let answer = client.request(request, b"");
    assert_eq!(answer.status, 426);
    assert_eq!(answer.field("sec-websocket-version"), Some("13"));
    get_root(&mut client, scheme);
    // Nothing opened, so no actor was told of a close.
    assert!(fixture.closes.try_recv().is_err());
}

/// The client's `RST_STREAM` ends the WebSocket (the actor learns it was
/// cut), and so does its `END_STREAM` without a close, answered with the
/// server's `END_STREAM`; the connection serves on.
fn the_client_ends_the_stream(dispatch: Dispatch) {
    let fixture = Fixture::new(dispatch, Over::H2c, "ends", config(dispatch));
    let mut client = fixture.client();
    let mut ws = fixture.open(&mut client, "/ws", &[]).websocket.unwrap();
    echo(&mut client, &mut ws, 0x81, b"first");
    ws.send.send_reset(h2::Reason::CANCEL);
    client.flush();
    assert_eq!(fixture.closed(), Closed::Cut);
    get_root(&mut client, fixture.scheme());
    let mut ws = fixture.open(&mut client, "/ws", &[]).websocket.unwrap();
    echo(&mut client, &mut ws, 0x81, b"second");
    ws.send.send_data(bytes::Bytes::new(), true).unwrap();
    client.flush();
    assert_eq!(client.ws_outcome(&mut ws), Ok(Vec::new()));
    assert_eq!(fixture.closed(), Closed::Cut);
    get_root(&mut client, fixture.scheme());
}

/// A broken rule on a stream (an unmasked frame, a reserved opcode, text
/// that is not UTF-8) gets the close RFC 6455 prescribes and the stream's
/// end, whatever follows it; the connection serves on.
fn broken_rules_end_the_stream_with_their_close(dispatch: Dispatch) {
    let fixture = Fixture::new(dispatch, Over::H2c, "broken", config(dispatch));
    let mut client = fixture.client();
    let cases: [(Vec<u8>, u16); 3] = [
        (unmasked(0x81, b"not masked"), 1002),
        (masked(0x83, b"reserved"), 1002),
        (masked(0x81, &[0xff, 0xfe]), 1007),
    ];
    for (frame, code) in cases {
        let mut ws = fixture.open(&mut client, "/ws", &[]).websocket.unwrap();
        let mut bytes = frame;
        bytes.extend_from_slice(&masked(0x81, b"after"));
        client.ws_send(&mut ws, &bytes);
        assert_eq!(client.ws_outcome(&mut ws), Ok(close_frame(code)));
        assert_eq!(fixture.closed(), Closed::ProtocolError(code));
    }
    get_root(&mut client, fixture.scheme());
}

/// A drain closes a WebSocket on a stream with 1001; once the client
/// answers, the stream ends and so does the connection.
fn a_drain_closes_websockets_with_1001(dispatch: Dispatch) {
    let fixture = Fixture::new(dispatch, Over::H2c, "drain", config(dispatch));
    let mut client = fixture.client();
    let mut ws = fixture.open(&mut client, "/ws", &[]).websocket.unwrap();
    echo(&mut client, &mut ws, 0x81, b"before");
    let Fixture { server, closes, .. } = fixture;
    let stopping = std::thread::spawn(move || server.shutdown(Duration::from_secs(10)));
    assert_eq!(client.ws_read(&mut ws, 4), close_frame(1001));
    client.ws_send(&mut ws, &masked(0x88, &1001u16.to_be_bytes()));
    assert_eq!(client.ws_outcome(&mut ws), Ok(Vec::new()));
    assert!(stopping.join().unwrap(), "the drain finished in time");
    assert_eq!(
        closes.recv_timeout(common::IO_TIMEOUT),
        Ok(Closed::Handshake(Some(1001)))
    );
}

/// Keeps every request it gets, unanswered.
struct Hold(Vec<ActorRequest>);

impl AnyActor for Hold {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.0.push(*request);
        }
    }
}

/// A drain whose grace runs out: a WebSocket stream still open (its client
/// ignored the 1001) is no request cut short, as over HTTP/1.1, so the
/// shutdown reports every request answered; a stream awaiting its actor
/// is one, and the shutdown says so.
fn a_drain_cuts_short_requests_not_websockets(dispatch: Dispatch) {
    let routes = || {
        let (closed, _) = mpsc::channel();
        routes(closed, &Failures::default())
            .actor(&[Method::Get], "/held", "hold")
            .spawn("hold", Hold(Vec::new()))
    };
    let server = start_with(&config(dispatch), routes());
    let mut client = H2Client::plain(server.local_addr());
    let mut ws = client
        .extended_connect(
            "http",
            "websocket",
            "/ws",
            &[("sec-websocket-version", "13")],
        )
        .websocket
        .unwrap();
    echo(&mut client, &mut ws, 0x81, b"open");
    assert!(
        server.shutdown(Duration::from_millis(300)),
        "a WebSocket left open is no request cut short"
    );
    let server = start_with(&config(dispatch), routes());
    let mut client = H2Client::plain(server.local_addr());
    let held = client.send_only(
        http::Request::builder()
            .uri("http://localhost/held")
            .body(())
            .unwrap(),
        b"",
    );
    // The held request's stream is open, awaiting its actor, once a
    // stream opened after it is answered.
    get_root(&mut client, "http");
    assert!(
        !server.shutdown(Duration::from_millis(300)),
        "a request awaiting its actor is cut short"
    );
    drop(held);
}

/// The access log names the extended CONNECT as the client sent it, over
/// `HTTP/2.0`, with its `200`.
fn the_access_log_says_connect_over_http2(dispatch: Dispatch) {
    let dir = std::env::temp_dir().join(format!(
        "h2ws-log-{}-{}",
        std::process::id(),
        dispatch.name()
    ));
    fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let settings = Config {
        access_log: Some(uppercut_mio_server::AccessLogTarget::File(log.clone())),
        log_name: Some("h2ws".into()),
        ..config(dispatch)
    };
    let fixture = Fixture::new(dispatch, Over::H2c, "log", settings);
    let mut client = fixture.client();
    let mut ws = fixture
        .open(&mut client, "/ws", &[("user-agent", "h2ws-test")])
        .websocket
        .unwrap();
    client.ws_send(&mut ws, &masked(0x88, &1000u16.to_be_bytes()));
    assert_eq!(client.ws_outcome(&mut ws), Ok(close_frame(1000)));
    let refused = client.extended_connect(
        fixture.scheme(),
        "websocket",
        "/nowhere",
        &[("sec-websocket-version", "13"), ("user-agent", "h2ws-test")],
    );
    assert_eq!(refused.answer.status, 404);
    drop(fixture);
    let lines = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].ends_with("\"CONNECT /ws HTTP/2.0\" 200 0 \"-\" \"h2ws-test\" server=h2ws"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].ends_with("\"CONNECT /nowhere HTTP/2.0\" 404 14 \"-\" \"h2ws-test\" server=h2ws"),
        "{}",
        lines[1]
    );
    let _ = fs::remove_dir_all(&dir);
}

/// With only WebSockets open, a quiet client is pinged on each after the
/// keep-alive timeout; a pong keeps it, and quiet through the next ping
/// too, the connection ends (the actor learns it was cut).
fn a_quiet_client_is_pinged_then_closed(dispatch: Dispatch) {
    let mut quick = config(dispatch);
    quick.timeouts.keepalive = Duration::from_millis(300);
    quick.timeouts.sweep = Duration::from_millis(50);
    let fixture = Fixture::new(dispatch, Over::H2c, "idle", quick);
    let mut client = fixture.client();
    let mut ws = fixture.open(&mut client, "/ws", &[]).websocket.unwrap();
    assert_eq!(client.ws_read(&mut ws, 2), unmasked(0x89, b""));
    client.ws_send(&mut ws, &masked(0x8a, b""));
    let answered = std::time::Instant::now();
    assert_eq!(client.ws_read(&mut ws, 2), unmasked(0x89, b""));
    client.wait_for_end();
    // Heard last when the pong came: pinged a timeout later, ended a
    // timeout after that (the server read the pong after it went).
    let quiet = answered.elapsed();
    assert!(
        quiet >= Duration::from_millis(580),
        "ended {quiet:?} after the pong, not two keep-alive timeouts"
    );
    assert_eq!(fixture.closed(), Closed::Cut);
}

/// What a `Flooder` tells the test.
#[derive(Debug)]
enum Told {
    Opened(WsHandle),
    Flooded,
    Closed(Closed),
}

/// Hands the test its handle on opening; writes 64 KiB for each `Flood`
/// mailed to it, and tells the test once it has, and how it closed.
struct Flooder {
    told: mpsc::Sender<Told>,
}

#[derive(Debug)]
struct Flood;

impl WebSocket for Flooder {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        let _ = self.told.send(Told::Opened(context.handle()));
    }

    fn on_message(&mut self, _message: Message<'_>, _context: &mut WsContext<'_>) {}

    fn on_mail(&mut self, envelope: Envelope, context: &mut WsContext<'_>) {
        if envelope.message.is::<Flood>() {
            context.send_binary(&[7; 64 * 1024]);
            let _ = self.told.send(Told::Flooded);
        }
    }

    fn on_close(&mut self, closed: &Closed, _context: &mut WsContext<'_>) {
        let _ = self.told.send(Told::Closed(closed.clone()));
    }
}

/// A WebSocket stream whose client reads nothing holds what its window
/// refuses; past the outbound limit (the message limit and 1 MiB) it is
/// cut with `RST_STREAM CANCEL` (the 1008 could not reach it), its actor
/// told it closed with 1008, and the connection's other streams live.
fn a_stream_that_is_not_read_is_cut_at_the_outbound_limit(dispatch: Dispatch) {
    const MAX_MESSAGE: usize = 1024;
    const OUTBOUND: usize = MAX_MESSAGE + (1 << 20);
    const FRAME: usize = 10 + 64 * 1024;
    let (told, tells) = mpsc::channel();
    let routes = Routes::standard().websocket("/flood", move |_| Flooder { told: told.clone() });
    let settings = Config {
        ws_max_message: MAX_MESSAGE,
        ..config(dispatch)
    };
    let server = start_with(&settings, routes);
    let mut client = H2Client::plain(server.local_addr());
    let connected = client.extended_connect(
        "http",
        "websocket",
        "/flood",
        &[("sec-websocket-version", "13")],
    );
    assert_eq!(connected.answer.status, 200);
    let mut ws = connected.websocket.unwrap();
    let next = || {
        tells
            .recv_timeout(common::IO_TIMEOUT)
            .expect("the actor tells")
    };
    let Told::Opened(handle) = next() else {
        panic!("not opened first");
    };
    // A flood at a time, each written before the next is mailed, while the
    // client reads nothing, until the stream is cut (a flood mailed just
    // as it is may be dropped with it).
    let mut flooded = 0;
    let closed = loop {
        if !handle.mail(Envelope::of(Flood)) {
            break next();
        }
        match next() {
            Told::Flooded => flooded += 1,
            other => break other,
        }
        assert!(flooded < 200, "{flooded} floods written, and no cut");
    };
    assert!(
        matches!(closed, Told::Closed(Closed::Handshake(Some(1008)))),
        "{closed:?}"
    );
    // What the client's window (65,535 bytes) let through, then the
    // reset; the frame that took the rest past the limit was the last.
    assert_eq!(client.ws_outcome(&mut ws), Err(h2::Reason::CANCEL));
    let last = (OUTBOUND + 65_535) / FRAME + 1;
    assert_eq!(flooded, last, "floods written before the cut");
    get_root(&mut client, "http");
}

/// A WebSocket stream whose client reads nothing, with less than the
/// outbound limit waiting, makes no progress: the write timeout ends the
/// connection (`GOAWAY`, then the close), as for a response's body, and
/// the actor learns it was cut.
fn a_stream_that_is_not_read_meets_the_write_timeout(dispatch: Dispatch) {
    let (told, tells) = mpsc::channel();
    let routes = Routes::standard().websocket("/flood", move |_| Flooder { told: told.clone() });
    let mut settings = config(dispatch);
    settings.timeouts.write = Duration::from_millis(300);
    settings.timeouts.sweep = Duration::from_millis(50);
    let server = start_with(&settings, routes);
    let mut client = H2Client::plain(server.local_addr());
    let connected = client.extended_connect(
        "http",
        "websocket",
        "/flood",
        &[("sec-websocket-version", "13")],
    );
    assert_eq!(connected.answer.status, 200);
    let next = || {
        tells
            .recv_timeout(common::IO_TIMEOUT)
            .expect("the actor tells")
    };
    let Told::Opened(handle) = next() else {
        panic!("not opened first");
    };
    // Two floods: more than the client's window (65,535) lets go.
    for _ in 0..2 {
        assert!(handle.mail(Envelope::of(Flood)));
        assert!(matches!(next(), Told::Flooded));
    }
    // The client reads nothing from here on.
    let closed = next();
    assert!(matches!(closed, Told::Closed(Closed::Cut)), "{closed:?}");
    client.wait_for_end();
}

in_both_modes!(
    a_stream_that_is_not_read_meets_the_write_timeout,
    a_quiet_client_is_pinged_then_closed,
    a_stream_that_is_not_read_is_cut_at_the_outbound_limit,
    echoes_over_h2c,
    echoes_over_tls,
    websockets_share_a_connection,
    a_chat_room_spans_http11_and_http2,
    permessage_deflate_is_agreed_over_http2,
    refusals_are_clear,
    the_client_ends_the_stream,
    broken_rules_end_the_stream_with_their_close,
    a_drain_closes_websockets_with_1001,
    the_access_log_says_connect_over_http2,
    a_drain_cuts_short_requests_not_websockets,
);
