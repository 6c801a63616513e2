//! permessage-deflate (RFC 7692) over real sockets, in both dispatch modes:
//! the answers to a table of offers, exact compressed frames both ways
//! (built here with flate2, as a client would), fragments, the message
//! limit on inflated bytes, RSV1 where it has no meaning, a room's one
//! compressed frame for its members, `/metrics`, and `wss://`.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{assert_response, config, read_until_closed, start_with, text, Client};
use flate2::{Compress, Compression, FlushCompress};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    Config, Dispatch, Message, Outgoing, Routes, Server, WebSocket, WsContext, WsDeflate, WsHandle,
};

/// The RFC 6455 §1.3 example key.
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// The default answer: no context takeover either way.
const SHARED: &str = "permessage-deflate; server_no_context_takeover; client_no_context_takeover";

/// The limit the tests' servers have.
const MAX_MESSAGE: usize = 100_000;

/// An upgrade request with a `Sec-WebSocket-Extensions` field per offer.
fn upgrade(path: &str, offers: &[&str]) -> String {
    let fields: String = offers
        .iter()
        .map(|offer| format!("Sec-WebSocket-Extensions: {offer}\r\n"))
        .collect();
    format!(
        "GET {path} HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{fields}\r\n"
    )
}

/// The 101 with `answer` as its `Sec-WebSocket-Extensions`, if any.
fn switching(answer: Option<&str>) -> String {
    let extensions = answer
        .map(|answer| format!("Sec-WebSocket-Extensions: {answer}\r\n"))
        .unwrap_or_default();
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nServer: uppercut-mio-server\r\n\
         Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\
         {extensions}Date: {{date}}\r\n\r\n"
    )
}

/// A frame head: `first` and the shortest encoding of `len`, with the mask
/// bit if `masked`.
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

/// A client frame: `first` (FIN, RSV1, opcode) and `payload`, masked.
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

/// `message` deflated by `compressor` as RFC 7692 §7.2.1 says: sync-flushed,
/// without the flush's trailing `00 00 ff ff`.
fn deflate_with(compressor: &mut Compress, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 64);
    let before = compressor.total_in();
    loop {
        let taken = (compressor.total_in() - before) as usize;
        compressor
            .compress_vec(&message[taken..], &mut out, FlushCompress::Sync)
            .unwrap();
        let all_taken = compressor.total_in() - before == message.len() as u64;
        if all_taken && out.len() < out.capacity() {
            break;
        }
        out.reserve(out.capacity().max(64));
    }
    assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
    out.truncate(out.len() - 4);
    out
}

/// `message` as the server compresses it with the default settings.
fn server_deflated(message: &[u8]) -> Vec<u8> {
    deflate_with(&mut Compress::new(Compression::new(1), false), message)
}

/// `message` as a client compresses it.
fn client_deflated(message: &[u8]) -> Vec<u8> {
    deflate_with(&mut Compress::new(Compression::new(6), false), message)
}

/// A kilobyte of JSON, the shape a chat or a feed sends.
fn json() -> Vec<u8> {
    let mut text = String::from("[");
    let mut i = 0;
    while text.len() < 1024 {
        text.push_str(&format!(
            "{{\"id\":{i},\"user\":\"user{i}\",\"online\":true,\"score\":{}}},",
            i * 37 % 101
        ));
        i += 1;
    }
    text.truncate(1023);
    text.push(']');
    text.into_bytes()
}

/// Echoes each message.
struct Echo;

impl WebSocket for Echo {
    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        match message {
            Message::Text(text) => context.send_text(text),
            Message::Binary(bytes) => context.send_binary(bytes),
        }
    }
}

/// A room that relays each text to every member, keeping the last message
/// it sent.
#[derive(Default)]
struct Room {
    members: Vec<WsHandle>,
    joined: Arc<AtomicUsize>,
    last: Arc<Mutex<Option<Outgoing>>>,
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
            Ok(ToRoom::Say(text)) => {
                let message = Outgoing::text(text);
                *self.last.lock().unwrap() = Some(message.clone());
                self.members.retain(|member| member.send(message.clone()));
            }
            Err(_) => {}
        }
    }
}

struct Member;

impl WebSocket for Member {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        let me = context.handle();
        context.send_to("room", ToRoom::Join(me)).unwrap();
    }

    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        if let Message::Text(text) = message {
            let say = ToRoom::Say(text.to_string());
            context.send_to("room", say).unwrap();
        }
    }
}

fn routes(joined: &Arc<AtomicUsize>) -> Routes {
    routes_with(joined, &Arc::default())
}

fn routes_with(joined: &Arc<AtomicUsize>, last: &Arc<Mutex<Option<Outgoing>>>) -> Routes {
    let room = Room {
        members: Vec::new(),
        joined: Arc::clone(joined),
        last: Arc::clone(last),
    };
    Routes::new()
        .spawn("room", room)
        .websocket("/ws", |_| Echo)
        .websocket("/chat", |_| Member)
        .websocket_with_deflate("/plain", None, |_| Echo)
        .websocket_with_deflate("/takeover", Some(WsDeflate::context_takeover()), |_| Echo)
}

/// The server's own settings: `--ws-deflate`, a 100,000-byte limit, and
/// metrics.
fn deflate_config(dispatch: Dispatch) -> Config {
    Config {
        ws_deflate: Some(WsDeflate::default()),
        ws_max_message: MAX_MESSAGE,
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..config(dispatch)
    }
}

fn start(dispatch: Dispatch) -> Server {
    start_with(&deflate_config(dispatch), routes(&Arc::default()))
}

/// Upgrades a new connection at `path` with `offers`, expecting `answer`.
fn open(server: &Server, path: &str, offers: &[&str], answer: Option<&str>) -> Client {
    let mut client = Client::connect(server.local_addr());
    client.send(upgrade(path, offers).as_bytes());
    assert_response(&client.response(true), &switching(answer));
    client
}

fn negotiation_answers_each_offer_as_the_route_allows(dispatch: Dispatch) {
    let server = start(dispatch);
    let window_10 = format!("{SHARED}; server_max_window_bits=10");
    let cases: &[(&str, &[&str], Option<&str>)] = &[
        ("/ws", &[], None),
        (
            "/ws",
            &["permessage-deflate; client_max_window_bits"],
            Some(SHARED),
        ),
        (
            "/ws",
            &["permessage-deflate; server_max_window_bits=10"],
            Some(&window_10),
        ),
        // The first offer is declined (a window of 16 bits), the second taken.
        (
            "/ws",
            &["permessage-deflate; server_max_window_bits=16, permessage-deflate"],
            Some(SHARED),
        ),
        ("/ws", &["permessage-deflate; unknown=1"], None),
        ("/ws", &["x-webkit-deflate-frame"], None),
        ("/ws", &["foo", "permessage-deflate"], Some(SHARED)),
        // A route without it, and one with context takeover.
        ("/plain", &["permessage-deflate"], None),
        (
            "/takeover",
            &["permessage-deflate; client_max_window_bits"],
            Some("permessage-deflate"),
        ),
        (
            "/takeover",
            &["permessage-deflate; server_no_context_takeover"],
            Some("permessage-deflate; server_no_context_takeover"),
        ),
    ];
    for (path, offers, answer) in cases {
        open(&server, path, offers, *answer);
    }
    // Without --ws-deflate, the same offer goes unanswered.
    let plain = start_with(&config(dispatch), routes(&Arc::default()));
    open(&plain, "/ws", &["permessage-deflate"], None);
}

fn compressed_messages_echo_compressed(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = open(&server, "/ws", &["permessage-deflate"], Some(SHARED));
    let message = json();
    let expected = unmasked(0xc1, &server_deflated(&message));
    // Each message compressed on its own: the same bytes every time.
    for _ in 0..3 {
        client.send(&masked(0xc1, &client_deflated(&message)));
        assert_eq!(client.exactly(expected.len()), expected);
    }
    // A plain message may come on the same connection, and is answered
    // compressed; a short one is answered as it is.
    client.send(&masked(0x81, &message));
    assert_eq!(client.exactly(expected.len()), expected);
    client.send(&masked(0xc1, &client_deflated(b"hi")));
    assert_eq!(client.exactly(4), unmasked(0x81, b"hi"));
    // Binary too.
    client.send(&masked(0xc2, &client_deflated(&message)));
    assert_eq!(
        client.exactly(expected.len()),
        unmasked(0xc2, &server_deflated(&message))
    );
}

fn context_takeover_refers_back_to_earlier_messages(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = open(
        &server,
        "/takeover",
        &["permessage-deflate"],
        Some("permessage-deflate"),
    );
    let message = json();
    let mut ours = Compress::new(Compression::new(6), false);
    let mut theirs = Compress::new(Compression::new(1), false);
    let mut sizes = Vec::new();
    for _ in 0..3 {
        client.send(&masked(0xc1, &deflate_with(&mut ours, &message)));
        let expected = unmasked(0xc1, &deflate_with(&mut theirs, &message));
        assert_eq!(client.exactly(expected.len()), expected);
        sizes.push(expected.len());
    }
    assert!(sizes[1] < sizes[0] / 2, "{sizes:?}");
}

fn fragmented_compressed_messages_join_around_a_ping(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = open(&server, "/ws", &["permessage-deflate"], Some(SHARED));
    let message = json();
    let payload = client_deflated(&message);
    let (a, rest) = payload.split_at(10);
    let (b, c) = rest.split_at(rest.len() / 2);
    // RSV1 on the first frame only; written a byte at a time.
    let mut frames = masked(0x41, a);
    frames.extend(masked(0x00, b));
    frames.extend(masked(0x89, b"ping"));
    frames.extend(masked(0x80, c));
    for byte in frames {
        client.send(&[byte]);
    }
    let mut expected = unmasked(0x8a, b"ping");
    expected.extend(unmasked(0xc1, &server_deflated(&message)));
    assert_eq!(client.exactly(expected.len()), expected);
}

fn the_limit_holds_on_inflated_bytes(dispatch: Dispatch) {
    let server = start(dispatch);
    // Exactly the limit, inflated, comes back.
    let mut client = open(&server, "/ws", &["permessage-deflate"], Some(SHARED));
    let fits = vec![b'a'; MAX_MESSAGE];
    client.send(&masked(0xc2, &client_deflated(&fits)));
    let expected = unmasked(0xc2, &server_deflated(&fits));
    assert_eq!(client.exactly(expected.len()), expected);
    // Ten megabytes of zeros in about ten kilobytes: closed with 1009
    // once the limit is passed.
    let bomb = client_deflated(&vec![0; 10 << 20]);
    assert!(bomb.len() < 20_000, "{}", bomb.len());
    client.send(&masked(0xc2, &bomb));
    assert_eq!(client.rest_until_close(), close_frame(1009));
    // In fragments, one byte over.
    let mut client = open(&server, "/ws", &["permessage-deflate"], Some(SHARED));
    let over = client_deflated(&vec![b'a'; MAX_MESSAGE + 1]);
    let (a, b) = over.split_at(over.len() / 2);
    let mut frames = masked(0x42, a);
    frames.extend(masked(0x80, b));
    client.send(&frames);
    assert_eq!(client.rest_until_close(), close_frame(1009));
}

/// A path, the offers made there, the answer expected, and what is sent.
type Case = (
    &'static str,
    &'static [&'static str],
    Option<&'static str>,
    Vec<u8>,
);

fn rsv1_where_it_has_no_meaning_closes_with_1002(dispatch: Dispatch) {
    let server = start(dispatch);
    let compressed = client_deflated(b"hello, hello, hello");
    let mut continuation = masked(0x41, &compressed[..2]);
    continuation.extend(masked(0xc0, &compressed[2..]));
    let cases: [Case; 4] = [
        // A control frame is never compressed.
        (
            "/ws",
            &["permessage-deflate"],
            Some(SHARED),
            masked(0xc9, b""),
        ),
        // Only a message's first frame says so.
        ("/ws", &["permessage-deflate"], Some(SHARED), continuation),
        // Nothing was agreed: the client offered nothing, or the route
        // declined.
        ("/ws", &[], None, masked(0xc1, &compressed)),
        (
            "/plain",
            &["permessage-deflate"],
            None,
            masked(0xc1, &compressed),
        ),
    ];
    for (path, offers, answer, frames) in cases {
        let mut client = open(&server, path, offers, answer);
        client.send(&frames);
        assert_eq!(client.rest_until_close(), close_frame(1002), "{frames:?}");
    }
}

fn a_room_sends_one_compressed_frame_to_members_that_agreed(dispatch: Dispatch) {
    let joined = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(Mutex::new(None));
    let server = start_with(&deflate_config(dispatch), routes_with(&joined, &last));
    let mut members = [
        open(&server, "/chat", &["permessage-deflate"], Some(SHARED)),
        open(&server, "/chat", &[], None),
        open(&server, "/chat", &["permessage-deflate"], Some(SHARED)),
    ];
    let deadline = Instant::now() + Duration::from_secs(10);
    while joined.load(Ordering::SeqCst) < 3 {
        assert!(Instant::now() < deadline, "members joined");
        std::thread::yield_now();
    }
    let message = json();
    members[1].send(&masked(0x81, &message));
    let compressed = unmasked(0xc1, &server_deflated(&message));
    let plain = unmasked(0x81, &message);
    for (i, expected) in [&compressed, &plain, &compressed].into_iter().enumerate() {
        assert_eq!(&members[i].exactly(expected.len()), expected, "member {i}");
    }
    // Both compressed frames came from the one compressed form the message
    // carries.
    let last = last.lock().unwrap().clone().expect("the room sent it");
    assert_eq!(last.deflated_len(), Some(server_deflated(&message).len()));
}

/// The sum over pollers of `family`'s samples labelled `form`.
fn metric(page: &str, family: &str, form: &str) -> u64 {
    page.lines()
        .filter(|line| line.starts_with(&format!("{family}{{")))
        .filter(|line| line.contains(&format!("form=\"{form}\"")))
        .map(|line| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

fn metrics_count_bytes_before_and_after_compression(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = open(&server, "/ws", &["permessage-deflate"], Some(SHARED));
    let message = json();
    let sent = client_deflated(&message);
    client.send(&masked(0xc1, &sent));
    let echoed = server_deflated(&message);
    client.exactly(unmasked(0xc1, &echoed).len());
    let mut stream = TcpStream::connect(server.metrics_addr().unwrap()).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let page = text(&read_until_closed(&mut stream));
    let sent_family = "uppercut_websocket_deflate_sent_bytes_total";
    let received_family = "uppercut_websocket_deflate_received_bytes_total";
    assert_eq!(metric(&page, sent_family, "plain"), message.len() as u64);
    assert_eq!(metric(&page, sent_family, "deflated"), echoed.len() as u64);
    assert_eq!(
        metric(&page, received_family, "deflated"),
        sent.len() as u64
    );
    assert_eq!(
        metric(&page, received_family, "plain"),
        message.len() as u64
    );
}

fn compressed_echo_over_tls(dispatch: Dispatch) {
    let certificates = common::tls::Certificates::new(&format!("deflate-{dispatch:?}"));
    let config = Config {
        tls: Some(certificates.files.clone()),
        ..deflate_config(dispatch)
    };
    let server = start_with(&config, routes(&Arc::default()));
    let mut client = common::tls::connect(server.local_addr(), &certificates.client_config());
    client.send(upgrade("/ws", &["permessage-deflate"]).as_bytes());
    assert_response(&client.response(true), &switching(Some(SHARED)));
    let message = json();
    client.send(&masked(0xc1, &client_deflated(&message)));
    let expected = unmasked(0xc1, &server_deflated(&message));
    assert_eq!(client.exactly(expected.len()), expected);
    client.send(&masked(0x88, &1000u16.to_be_bytes()));
    assert_eq!(client.exactly(4), close_frame(1000));
}

in_both_modes!(
    negotiation_answers_each_offer_as_the_route_allows,
    compressed_messages_echo_compressed,
    context_takeover_refers_back_to_earlier_messages,
    fragmented_compressed_messages_join_around_a_ping,
    the_limit_holds_on_inflated_bytes,
    rsv1_where_it_has_no_meaning_closes_with_1002,
    a_room_sends_one_compressed_frame_to_members_that_agreed,
    metrics_count_bytes_before_and_after_compression,
    compressed_echo_over_tls,
);
