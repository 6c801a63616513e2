//! WebSocket routes over real sockets, in both dispatch modes: the upgrade
//! and its refusals, echo, ping, the close handshake, the closes a broken
//! rule gets, mail from other actors and from outside the server, an actor
//! that panics, and a drain.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{assert_response, config, error_response, start_with, Client};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    Closed, Config, Dispatch, Message, Outgoing, Routes, Server, WebSocket, WsContext, WsHandle,
};

/// The RFC 6455 §1.3 example key (`SWITCHING` has the accept value it gets).
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

fn upgrade(path: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
}

const SWITCHING: &str = "HTTP/1.1 101 Switching Protocols\r\nServer: uppercut-mio-server\r\n\
    Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\
    Date: {date}\r\n\r\n";

/// A client frame: final, masked, with a payload under 126 bytes.
fn masked(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut frame = vec![0x80 | opcode, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

/// A server frame: final, unmasked, with a payload under 126 bytes.
fn unmasked(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x80 | opcode, payload.len() as u8];
    frame.extend_from_slice(payload);
    frame
}

fn close_frame(code: u16) -> Vec<u8> {
    unmasked(8, &code.to_be_bytes())
}

/// Echoes each message; `/ws/panic` panics on any.
struct Echo {
    panics: bool,
}

impl WebSocket for Echo {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        // Its address, for the tests that mail it.
        let address = context.address().to_string();
        context.send_text(&address);
    }

    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        assert!(!self.panics, "fault injection: a WebSocket actor panics");
        match message {
            Message::Text("close please") => context.close(4000, "as asked"),
            Message::Text(text) => context.send_text(text),
            Message::Binary(bytes) => context.send_binary(bytes),
        }
    }

    fn on_mail(&mut self, envelope: Envelope, context: &mut WsContext<'_>) {
        if let Ok(text) = envelope.message.downcast::<String>() {
            context.send_text(&format!("mail: {text}"));
        }
    }
}

fn routes() -> Routes {
    Routes::standard()
        .websocket("/ws", |_| Echo { panics: false })
        .websocket("/ws/panic", |_| Echo { panics: true })
}

fn start(dispatch: Dispatch) -> Server {
    start_with(&config(dispatch), routes())
}

/// Upgrades a new connection at `path`; returns it and the actor's address
/// (its first message).
fn open(server: &Server, path: &str) -> (Client, String) {
    let mut client = Client::connect(server.local_addr());
    client.send(upgrade(path).as_bytes());
    assert_response(&client.response(true), SWITCHING);
    let head = client.exactly(2);
    assert_eq!(head[0], 0x81, "a final text frame");
    let address = String::from_utf8(client.exactly(head[1] as usize)).unwrap();
    assert!(address.starts_with("ws/"), "{address:?}");
    (client, address)
}

fn echoes_text_binary_and_pings(dispatch: Dispatch) {
    let server = start(dispatch);
    let (mut client, _) = open(&server, "/ws");
    let mut frames = masked(1, "héllo".as_bytes());
    frames.extend(masked(9, b"are you there"));
    frames.extend(masked(2, &[0, 255, 7]));
    client.send(&frames);
    let mut expected = unmasked(1, "héllo".as_bytes());
    expected.extend(unmasked(10, b"are you there"));
    expected.extend(unmasked(2, &[0, 255, 7]));
    assert_eq!(client.exactly(expected.len()), expected);
}

fn fragments_join_and_a_ping_between_them_is_answered_first(dispatch: Dispatch) {
    let server = start(dispatch);
    let (mut client, _) = open(&server, "/ws");
    // "Hello, κόσμε" in three fragments, the κ cut between two, a ping
    // in between; written a byte at a time.
    let text = "Hello, κόσμε".as_bytes();
    let mut frames = masked(1, &text[..7]);
    frames[0] &= 0x7f;
    let mut middle = masked(0, &text[7..8]);
    middle[0] &= 0x7f;
    frames.extend(middle);
    frames.extend(masked(9, b"ping"));
    frames.extend(masked(0, &text[8..]));
    for byte in frames {
        client.send(&[byte]);
    }
    let mut expected = unmasked(10, b"ping");
    expected.extend(unmasked(1, text));
    assert_eq!(client.exactly(expected.len()), expected);
}

fn a_quiet_client_is_pinged_then_closed(dispatch: Dispatch) {
    let mut quick = config(dispatch);
    quick.timeouts.keepalive = Duration::from_millis(300);
    quick.timeouts.sweep = Duration::from_millis(50);
    let server = start_with(&quick, routes());
    let (mut client, _) = open(&server, "/ws");
    // Quiet for the keep-alive timeout: a ping. Answered, the connection
    // lives on; quiet again through the next ping, it is closed.
    assert_eq!(client.exactly(2), unmasked(9, b""));
    client.send(&masked(10, b""));
    assert_eq!(client.exactly(2), unmasked(9, b""));
    client.assert_closed();
}

fn the_close_handshake_echoes_the_code_and_ends_the_connection(dispatch: Dispatch) {
    let server = start(dispatch);
    let (mut client, _) = open(&server, "/ws");
    let mut close = 1000u16.to_be_bytes().to_vec();
    close.extend_from_slice(b"bye");
    client.send(&masked(8, &close));
    assert_eq!(client.rest_until_close(), close_frame(1000));
}

fn the_actor_closes_with_its_code_and_reason(dispatch: Dispatch) {
    let server = start(dispatch);
    let (mut client, _) = open(&server, "/ws");
    client.send(&masked(1, b"close please"));
    let mut expected = 4000u16.to_be_bytes().to_vec();
    expected.extend_from_slice(b"as asked");
    assert_eq!(client.exactly(12), unmasked(8, &expected));
    // The client answers; then the server closes the socket.
    client.send(&masked(8, &4000u16.to_be_bytes()));
    client.assert_closed();
}

fn a_request_without_the_upgrade_gets_426(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    let refused = error_response(
        426,
        "Upgrade Required",
        "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n",
        false,
        false,
    );
    client.send(b"GET /ws HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_response(&client.response(false), &refused);
    // The connection stays open; a wrong version gets the same answer.
    let version_8 = upgrade("/ws").replace("Version: 13", "Version: 8");
    client.send(version_8.as_bytes());
    assert_response(&client.response(false), &refused);
    // And the connection still upgrades.
    client.send(upgrade("/ws").as_bytes());
    assert_response(&client.response(true), SWITCHING);
}

fn a_malformed_upgrade_gets_400_and_a_close(dispatch: Dispatch) {
    let server = start(dispatch);
    let bad_request = error_response(400, "Bad Request", "", true, false);
    let no_key = upgrade("/ws").replace(&format!("Sec-WebSocket-Key: {KEY}\r\n"), "");
    let with_body = upgrade("/ws").replace("\r\n\r\n", "\r\nContent-Length: 2\r\n\r\nhi");
    for request in [no_key, with_body] {
        let mut client = Client::connect(server.local_addr());
        client.send(request.as_bytes());
        assert_response(&client.response(false), &bad_request);
        client.assert_closed();
    }
}

fn broken_rules_get_the_close_rfc_6455_prescribes(dispatch: Dispatch) {
    let server = start_with(
        &Config {
            ws_max_message: 100,
            ..config(dispatch)
        },
        routes(),
    );
    let unmasked_text = unmasked(1, b"hi");
    let bad_utf8 = masked(1, &[b'a', 0xff]);
    let too_long = masked(2, &[7; 101]);
    let cases = [(unmasked_text, 1002), (bad_utf8, 1007), (too_long, 1009)];
    for (frame, code) in cases {
        let (mut client, _) = open(&server, "/ws");
        client.send(&frame);
        assert_eq!(client.rest_until_close(), close_frame(code), "{code}");
    }
}

fn mail_reaches_the_actor_by_address_and_by_handle(dispatch: Dispatch) {
    let server = start(dispatch);
    let (mut client, address) = open(&server, "/ws");
    server
        .send(&address, Envelope::of("from outside".to_string()))
        .unwrap();
    let expected = unmasked(1, b"mail: from outside");
    assert_eq!(client.exactly(expected.len()), expected);
    // A closed connection's address reaches nothing, and nothing breaks.
    client.send(&masked(8, &1000u16.to_be_bytes()));
    assert_eq!(client.rest_until_close(), close_frame(1000));
    // Closed: dropped, as uppercut drops a send to a stopped actor.
    server
        .send(&address, Envelope::of("too late".to_string()))
        .unwrap();
    let (mut other, _) = open(&server, "/ws");
    other.send(&masked(1, b"still here"));
    assert_eq!(other.exactly(12), unmasked(1, b"still here"));
}

fn a_panicking_actor_closes_its_connection_with_1011_only(dispatch: Dispatch) {
    let server = start(dispatch);
    let (mut calm, _) = open(&server, "/ws");
    let (mut failing, _) = open(&server, "/ws/panic");
    failing.send(&masked(1, b"boom"));
    assert_eq!(failing.exactly(4), close_frame(1011));
    calm.send(&masked(1, b"fine"));
    assert_eq!(calm.exactly(6), unmasked(1, b"fine"));
}

fn a_drain_closes_websockets_with_1001(dispatch: Dispatch) {
    let server = start(dispatch);
    let (mut client, _) = open(&server, "/ws");
    let stopping = std::thread::spawn(move || server.shutdown(Duration::from_secs(10)));
    assert_eq!(client.exactly(4), close_frame(1001));
    client.send(&masked(8, &1001u16.to_be_bytes()));
    client.assert_closed();
    assert!(stopping.join().unwrap(), "the drain finished in time");
}

/// A room that relays each text to every member, counting members.
#[derive(Default)]
struct Room {
    members: Vec<WsHandle>,
    joined: Arc<AtomicUsize>,
}

#[derive(Debug)]
enum ToRoom {
    Join(WsHandle),
    Say(String),
}

impl AnyActor for Room {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        match envelope.message.downcast::<ToRoom>().map(|m| *m) {
            Ok(ToRoom::Join(member)) => {
                self.members.push(member);
                self.joined.fetch_add(1, Ordering::SeqCst);
            }
            Ok(ToRoom::Say(text)) if text == "panic" => panic!("fault injection: the room fails"),
            Ok(ToRoom::Say(text)) => {
                let message = Outgoing::text(text);
                self.members.retain(|member| member.send(message.clone()));
            }
            Err(_) => {}
        }
    }

    fn on_fail(&self, _error: Box<dyn std::any::Any + Send>, _sender: &mut dyn AnySender) {
        for member in &self.members {
            member.close(1011, "room failed");
        }
    }
}

/// A room's member; tells the test how its connection ended.
struct Member {
    closed: mpsc::Sender<Closed>,
}

impl WebSocket for Member {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        let me = context.handle();
        context.send_to("room", ToRoom::Join(me)).unwrap();
    }

    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        if let Message::Text(text) = message {
            context
                .send_to("room", ToRoom::Say(text.to_string()))
                .unwrap();
        }
    }

    fn on_close(&mut self, closed: &Closed, _context: &mut WsContext<'_>) {
        // Asserted by the test: a panic here would only close this
        // connection (the server contains it).
        let _ = self.closed.send(closed.clone());
    }
}

fn a_room_actor_broadcasts_to_its_members(dispatch: Dispatch) {
    let joined = Arc::new(AtomicUsize::new(0));
    let room = Room {
        members: Vec::new(),
        joined: Arc::clone(&joined),
    };
    let (closed, closes) = mpsc::channel();
    let routes = Routes::new()
        .spawn("room", room)
        .websocket("/chat", move |_| Member {
            closed: closed.clone(),
        });
    let server = start_with(&config(dispatch), routes);
    let mut members: Vec<Client> = (0..3)
        .map(|_| {
            let mut client = Client::connect(server.local_addr());
            client.send(upgrade("/chat").as_bytes());
            assert_response(&client.response(true), SWITCHING);
            client
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while joined.load(Ordering::SeqCst) < 3 {
        assert!(std::time::Instant::now() < deadline, "members joined");
        std::thread::yield_now();
    }
    members[1].send(&masked(1, b"hello room"));
    for member in &mut members {
        assert_eq!(member.exactly(12), unmasked(1, b"hello room"));
    }
    // The room panics: its members are closed with 1011, and the server
    // serves on.
    members[0].send(&masked(1, b"panic"));
    let mut failed = 1011u16.to_be_bytes().to_vec();
    failed.extend_from_slice(b"room failed");
    for member in &mut members {
        assert_eq!(member.exactly(15), unmasked(8, &failed));
    }
    // Each member answers the close: the handshake is done, the socket
    // closes, and the actor learns the code its side sent.
    for member in &mut members {
        member.send(&masked(8, &1011u16.to_be_bytes()));
        member.assert_closed();
    }
    for _ in 0..3 {
        let closed = closes.recv_timeout(common::IO_TIMEOUT);
        assert_eq!(closed, Ok(Closed::Handshake(Some(1011))));
    }
    let mut late = Client::connect(server.local_addr());
    late.send(upgrade("/chat").as_bytes());
    assert_response(&late.response(true), SWITCHING);
    // No other connection has ended.
    assert_eq!(closes.try_recv(), Err(mpsc::TryRecvError::Empty));
}

/// Hands the test its handle on opening; writes 64 KiB for each `Flood`
/// mailed to it, and tells the test once it has.
struct Flooder {
    opened: mpsc::Sender<WsHandle>,
    flooded: mpsc::Sender<()>,
}

#[derive(Debug)]
struct Flood;

/// The frame `Flooder` writes for each `Flood`: a 10-byte head (length in
/// 8 bytes), 64 KiB of sevens.
fn flood_frame() -> Vec<u8> {
    let mut frame = vec![0x82, 127];
    frame.extend_from_slice(&(64u64 * 1024).to_be_bytes());
    frame.resize(10 + 64 * 1024, 7);
    frame
}

impl WebSocket for Flooder {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        let _ = self.opened.send(context.handle());
    }

    fn on_message(&mut self, _message: Message<'_>, _context: &mut WsContext<'_>) {}

    fn on_mail(&mut self, envelope: Envelope, context: &mut WsContext<'_>) {
        if envelope.message.is::<Flood>() {
            context.send_binary(&[7; 64 * 1024]);
            let _ = self.flooded.send(());
        }
    }
}

fn a_client_that_does_not_read_is_cut_at_the_outbound_limit(dispatch: Dispatch) {
    const MAX_MESSAGE: usize = 1024;
    // The outbound limit is the message limit and 1 MiB.
    const OUTBOUND: usize = MAX_MESSAGE + (1 << 20);
    let (opened, handles) = mpsc::channel();
    let (flooded, floods) = mpsc::channel();
    let routes = Routes::new().websocket("/flood", move |_| Flooder {
        opened: opened.clone(),
        flooded: flooded.clone(),
    });
    let config = Config {
        ws_max_message: MAX_MESSAGE,
        ..config(dispatch)
    };
    let server = start_with(&config, routes);
    let mut client = common::slow_reader(server.local_addr());
    client.send(upgrade("/flood").as_bytes());
    assert_response(&client.response(true), SWITCHING);
    let handle = handles.recv_timeout(common::IO_TIMEOUT).expect("opened");
    // What the kernel holds does not count against the limit: made small
    // and fixed here (the server's send buffer would otherwise grow to
    // megabytes), it stays under a frame.
    let send_buffer = common::set_server_send_buffer(&client.stream, 4096);
    let receive_buffer = socket2::SockRef::from(&client.stream)
        .recv_buffer_size()
        .unwrap();
    // A flood at a time, each written before the next is mailed, while the
    // client reads nothing, until the server refuses mail: the client is
    // being cut off.
    let mut mailed = 0;
    while handle.mail(Envelope::of(Flood)) {
        floods
            .recv_timeout(common::IO_TIMEOUT)
            .expect("the flood was handled");
        mailed += 1;
        assert!(mailed < 200, "{mailed} floods mailed, and no cut");
    }
    let rest = client.rest_until_close();
    let frame = flood_frame();
    let mut cut = 1008u16.to_be_bytes().to_vec();
    cut.extend_from_slice(b"too far behind");
    let close = unmasked(8, &cut);
    let sent = (rest.len() - close.len()) / frame.len();
    assert!(
        rest == [frame.repeat(sent), close].concat(),
        "whole frames, then the 1008 close: {} bytes",
        rest.len()
    );
    // A frame is written while what the socket has not taken is within the
    // limit: the one that takes it past is the last. So the limit's worth
    // and one more, and what the kernel's buffers took besides.
    let least = OUTBOUND / frame.len() + 1;
    let most = (OUTBOUND + send_buffer + receive_buffer) / frame.len() + 1;
    assert!(
        (least..=most).contains(&sent),
        "{sent} frames before the cut, not {least} to {most} \
         (send buffer {send_buffer}, receive buffer {receive_buffer})"
    );
}

in_both_modes!(
    echoes_text_binary_and_pings,
    fragments_join_and_a_ping_between_them_is_answered_first,
    a_quiet_client_is_pinged_then_closed,
    the_close_handshake_echoes_the_code_and_ends_the_connection,
    the_actor_closes_with_its_code_and_reason,
    a_request_without_the_upgrade_gets_426,
    a_malformed_upgrade_gets_400_and_a_close,
    broken_rules_get_the_close_rfc_6455_prescribes,
    mail_reaches_the_actor_by_address_and_by_handle,
    a_panicking_actor_closes_its_connection_with_1011_only,
    a_drain_closes_websockets_with_1001,
    a_room_actor_broadcasts_to_its_members,
    a_client_that_does_not_read_is_cut_at_the_outbound_limit,
);
