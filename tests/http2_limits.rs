//! HTTP/2's limits and the attacks it is known for, each sent as raw
//! frames over a real socket, in both dispatch modes: too many streams,
//! rapid reset (CVE-2023-44487), a CONTINUATION flood (CVE-2024-27316), an
//! HPACK bomb, PING and SETTINGS floods, a client that never opens its
//! window (the write timeout), one that sends nothing after the preface
//! (the header timeout), an idle connection (a PING, then a GOAWAY), and
//! header blocks that do not decompress (COMPRESSION_ERROR).
//! Each ends as HTTP/2 says: a GOAWAY with its error code, or the stream
//! refused; and the server serves the next client.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{config, start_with, IO_TIMEOUT};
use uppercut_mio_server::{Config, Dispatch, Routes, Server, Timeouts};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// Error codes (RFC 9113 §7).
const NO_ERROR: u32 = 0x0;
const PROTOCOL_ERROR: u32 = 0x1;
const COMPRESSION_ERROR: u32 = 0x9;
const REFUSED_STREAM: u32 = 0x7;
const ENHANCE_YOUR_CALM: u32 = 0xb;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut frame = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// An HPACK integer with an `prefix`-bit prefix (RFC 7541 §5.1), the
/// prefix's other bits `first`.
fn hpack_int(out: &mut Vec<u8>, first: u8, prefix: u32, value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// A header block for `GET path`: `:method GET`, `:scheme http`,
/// `:authority localhost` from the static table or as literals (no
/// Huffman coding).
fn get_block(path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86];
    // :path, literal without indexing, name indexed (4).
    hpack_int(&mut block, 0x00, 4, 4);
    hpack_int(&mut block, 0x00, 7, path.len());
    block.extend_from_slice(path.as_bytes());
    // :authority, literal without indexing, name indexed (1).
    hpack_int(&mut block, 0x00, 4, 1);
    hpack_int(&mut block, 0x00, 7, 9);
    block.extend_from_slice(b"localhost");
    block
}

/// A frame read: kind, flags, stream, payload.
type Frame = (u8, u8, u32, Vec<u8>);

/// A client speaking frames by hand.
struct Raw {
    stream: TcpStream,
    pending: Vec<u8>,
}

impl Raw {
    /// Connected, with the preface and an empty SETTINGS sent, and
    /// `settings` (id, value) in it when given.
    fn connect(addr: SocketAddr, settings: &[(u16, u32)]) -> Raw {
        Raw::over(TcpStream::connect(addr).unwrap(), settings)
    }

    /// As [`Raw::connect`], over `stream`.
    fn over(stream: TcpStream, settings: &[(u16, u32)]) -> Raw {
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut raw = Raw {
            stream,
            pending: Vec::new(),
        };
        let mut payload = Vec::new();
        for (id, value) in settings {
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&value.to_be_bytes());
        }
        let mut hello = PREFACE.to_vec();
        hello.extend(frame(SETTINGS, 0, 0, &payload));
        raw.send(&hello);
        raw
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// The next frame (kind, flags, stream, payload); `None` at the end of
    /// the connection.
    fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self.whole_frame() {
                return Some(frame);
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(len) => self.pending.extend_from_slice(&chunk[..len]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    /// The next frame as [`Raw::next`], or `Err` when the read timeout
    /// passed with no whole frame.
    fn next_within(&mut self) -> Result<Option<Frame>, ()> {
        loop {
            if let Some(frame) = self.whole_frame() {
                return Ok(Some(frame));
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(None),
                Ok(len) => self.pending.extend_from_slice(&chunk[..len]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(None),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(())
                }
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    /// A whole frame from what was read, if one is there.
    fn whole_frame(&mut self) -> Option<Frame> {
        if self.pending.len() < 9 {
            return None;
        }
        let len = usize::from(self.pending[0]) << 16
            | usize::from(self.pending[1]) << 8
            | usize::from(self.pending[2]);
        if self.pending.len() < 9 + len {
            return None;
        }
        let frame: Vec<u8> = self.pending.drain(..9 + len).collect();
        let stream = u32::from_be_bytes(frame[5..9].try_into().unwrap()) & 0x7fff_ffff;
        Some((frame[3], frame[4], stream, frame[9..].to_vec()))
    }

    /// Reads until the server's GOAWAY: its error code (and the end of the
    /// connection follows).
    fn goaway(&mut self) -> u32 {
        while let Some((kind, _, _, payload)) = self.next() {
            if kind == GOAWAY {
                return u32::from_be_bytes(payload[4..8].try_into().unwrap());
            }
        }
        panic!("the connection ended without a GOAWAY");
    }
}

/// The server still serves a new client: a GET over HTTP/2 is answered.
fn still_serves(server: &Server) {
    let mut client = common::h2client::H2Client::plain(server.local_addr());
    let request = http::Request::builder()
        .uri("http://localhost/")
        .body(())
        .unwrap();
    let answer = client.request(request, b"");
    assert_eq!((answer.status, &answer.body[..]), (200, &b"hello\n"[..]));
}

fn server(dispatch: Dispatch, timeouts: Timeouts) -> Server {
    start_with(
        &Config {
            timeouts,
            ..config(dispatch)
        },
        Routes::standard()
            .actor(&[uppercut_mio_server::Method::Get], "/held", "hoarder")
            .spawn("hoarder", Hoarder(Vec::new())),
    )
}

/// Keeps every request and answers none.
struct Hoarder(Vec<uppercut_mio_server::ActorRequest>);

impl uppercut_mio_server::uppercut::api::AnyActor for Hoarder {
    fn receive(
        &mut self,
        envelope: uppercut_mio_server::uppercut::api::Envelope,
        _sender: &mut dyn uppercut_mio_server::uppercut::api::AnySender,
    ) {
        if let Ok(request) = envelope
            .message
            .downcast::<uppercut_mio_server::ActorRequest>()
        {
            self.0.push(*request);
        }
    }
}

fn the_server_announces_its_limits(dispatch: Dispatch) {
    let server = server(dispatch, Timeouts::default());
    let mut raw = Raw::connect(server.local_addr(), &[]);
    let (kind, flags, _, payload) = raw.next().unwrap();
    assert_eq!((kind, flags), (SETTINGS, 0), "the server's SETTINGS first");
    let settings: Vec<(u16, u32)> = payload
        .chunks(6)
        .map(|s| {
            (
                u16::from_be_bytes([s[0], s[1]]),
                u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
            )
        })
        .collect();
    // MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_HEADER_LIST_SIZE.
    assert!(settings.contains(&(0x3, 128)), "{settings:?}");
    assert!(settings.contains(&(0x4, 256 * 1024)), "{settings:?}");
    assert!(settings.iter().any(|&(id, _)| id == 0x6), "{settings:?}");
}

fn a_stream_past_the_concurrent_limit_is_refused(dispatch: Dispatch) {
    let server = server(dispatch, Timeouts::default());
    let mut raw = Raw::connect(server.local_addr(), &[]);
    // 129 streams whose actor never answers: the last one is one too many.
    let mut frames = Vec::new();
    for n in 0..129u32 {
        frames.extend(frame(
            HEADERS,
            END_STREAM | END_HEADERS,
            1 + 2 * n,
            &get_block("/held"),
        ));
    }
    raw.send(&frames);
    let refused = loop {
        let (kind, _, stream, payload) = raw.next().expect("an answer to stream 257");
        if kind == RST_STREAM {
            break (stream, u32::from_be_bytes(payload[..4].try_into().unwrap()));
        }
    };
    assert_eq!(refused, (257, REFUSED_STREAM));
    still_serves(&server);
}

fn rapid_reset_ends_in_enhance_your_calm(dispatch: Dispatch) {
    let server = server(dispatch, Timeouts::default());
    let mut raw = Raw::connect(server.local_addr(), &[]);
    let mut frames = Vec::new();
    for n in 0..1000u32 {
        let stream = 1 + 2 * n;
        frames.extend(frame(
            HEADERS,
            END_STREAM | END_HEADERS,
            stream,
            &get_block("/held"),
        ));
        frames.extend(frame(RST_STREAM, 0, stream, &8u32.to_be_bytes()));
    }
    raw.send(&frames);
    assert_eq!(raw.goaway(), ENHANCE_YOUR_CALM);
    still_serves(&server);
}

fn a_continuation_flood_ends_the_connection(dispatch: Dispatch) {
    let server = server(dispatch, Timeouts::default());
    let mut raw = Raw::connect(server.local_addr(), &[]);
    let mut frames = frame(HEADERS, 0, 1, &get_block("/"));
    // Small CONTINUATIONs that never end the headers, each a header field
    // of its own.
    for n in 0..10_000u32 {
        let mut field = vec![0x00];
        let name = format!("x-{n}");
        hpack_int(&mut field, 0x00, 7, name.len());
        field.extend_from_slice(name.as_bytes());
        hpack_int(&mut field, 0x00, 7, 1);
        field.push(b'v');
        frames.extend(frame(CONTINUATION, 0, 1, &field));
    }
    let sent = std::thread::spawn({
        let mut stream = raw.stream.try_clone().unwrap();
        // The server may stop reading first: a failed write is fine.
        move || {
            let _ = stream.write_all(&frames);
        }
    });
    let code = raw.goaway();
    assert!(
        code == ENHANCE_YOUR_CALM || code == 0x1 || code == 0x9,
        "GOAWAY {code:#x}"
    );
    sent.join().unwrap();
    still_serves(&server);
}

fn an_hpack_bomb_is_refused_at_the_header_list_limit(dispatch: Dispatch) {
    let server = server(dispatch, Timeouts::default());
    let mut raw = Raw::connect(server.local_addr(), &[]);
    // One 4 KiB field into the dynamic table, then referred to a thousand
    // times (a byte each): 4 MiB of header list from 5 KiB of frames.
    let mut block = get_block("/");
    hpack_int(&mut block, 0x40, 6, 0);
    hpack_int(&mut block, 0x00, 7, 6);
    block.extend_from_slice(b"x-bomb");
    hpack_int(&mut block, 0x00, 7, 4000);
    block.extend(std::iter::repeat_n(b'b', 4000));
    for _ in 0..1000 {
        // The newest dynamic entry: index 62.
        hpack_int(&mut block, 0x80, 7, 62);
    }
    raw.send(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &block));
    // Refused as a request whose fields are too large, or the connection
    // ended: either way, never decoded into 4 MiB.
    loop {
        match raw.next() {
            Some((HEADERS, _, 1, payload)) => {
                // :status 431 as a literal or indexed; h2 writes it so.
                assert!(payload.windows(3).any(|w| w == b"431"), "{payload:?}");
                break;
            }
            Some((RST_STREAM, _, 1, _)) | Some((GOAWAY, ..)) | None => break,
            Some(_) => {}
        }
    }
    still_serves(&server);
}

fn a_ping_flood_ends_in_enhance_your_calm(dispatch: Dispatch) {
    flood(dispatch, frame(PING, 0, 0, &[7; 8]));
}

fn a_settings_flood_ends_in_enhance_your_calm(dispatch: Dispatch) {
    flood(dispatch, frame(SETTINGS, 0, 0, &[]));
}

/// Sends `unit` 20,000 times from a thread, reading nothing but for the
/// GOAWAY it must bring.
fn flood(dispatch: Dispatch, unit: Vec<u8>) {
    let server = server(dispatch, Timeouts::default());
    let mut raw = Raw::connect(server.local_addr(), &[]);
    let frames = unit.repeat(20_000);
    let sent = std::thread::spawn({
        let mut stream = raw.stream.try_clone().unwrap();
        move || {
            let _ = stream.write_all(&frames);
        }
    });
    assert_eq!(raw.goaway(), ENHANCE_YOUR_CALM);
    sent.join().unwrap();
    still_serves(&server);
}

/// A server whose write timeout is `write`, swept every 50 ms.
fn write_timeout_server(dispatch: Dispatch, write: Duration) -> Server {
    let timeouts = Timeouts {
        write,
        sweep: Duration::from_millis(50),
        ..Timeouts::default()
    };
    server(dispatch, timeouts)
}

/// A client that grants no window (`INITIAL_WINDOW_SIZE` 0) asks for
/// `/v1/user` on stream 1.
fn stalled_request(server: &Server) -> Raw {
    let mut raw = Raw::connect(server.local_addr(), &[(0x4, 0)]);
    raw.send(&frame(
        HEADERS,
        END_STREAM | END_HEADERS,
        1,
        &get_block("/v1/user"),
    ));
    raw
}

/// Reads the rest of a connection the server ended after its GOAWAY:
/// nothing but the end may come.
fn assert_ends(raw: &mut Raw) {
    if let Some((kind, _, stream, _)) = raw.next() {
        panic!("frame {kind:#x} on stream {stream} after the GOAWAY");
    }
}

/// The GOAWAY's last stream and code.
fn goaway_fields(payload: &[u8]) -> (u32, u32) {
    let last = u32::from_be_bytes(payload[..4].try_into().unwrap()) & 0x7fff_ffff;
    (last, u32::from_be_bytes(payload[4..8].try_into().unwrap()))
}

fn a_client_that_never_opens_its_window_meets_the_write_timeout(dispatch: Dispatch) {
    let server = write_timeout_server(dispatch, Duration::from_millis(500));
    let mut raw = stalled_request(&server);
    let began = Instant::now();
    // The headers come; the body never can; a GOAWAY naming stream 1, the
    // last taken, with NO_ERROR; then the end.
    let mut headers = false;
    let goaway = loop {
        match raw.next() {
            Some((HEADERS, _, 1, _)) => headers = true,
            Some((DATA, _, 1, payload)) => assert!(payload.is_empty(), "data past a 0 window"),
            Some((GOAWAY, _, 0, payload)) => break goaway_fields(&payload),
            None => panic!("closed without a GOAWAY"),
            Some(_) => {}
        }
    };
    assert_eq!(goaway, (1, NO_ERROR));
    assert_ends(&mut raw);
    assert!(headers, "the response's headers came");
    assert!(
        began.elapsed() >= Duration::from_millis(500),
        "not before the write timeout"
    );
    still_serves(&server);
}

/// A client that grants no window but PINGs (every 100 ms, as a reply to
/// nothing: a read that waits that long for the end) keeps nothing open:
/// its PINGs are answered, and are no progress of the response, so the
/// write timeout ends the connection as if it were silent. (The PINGs
/// used to restart the timeout, and held the stream for ever.)
fn pings_do_not_hold_a_stalled_response_open(dispatch: Dispatch) {
    let write = Duration::from_millis(600);
    let server = write_timeout_server(dispatch, write);
    let mut raw = stalled_request(&server);
    raw.stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let began = Instant::now();
    let (mut sent, mut acked) = (0u64, 0u64);
    let goaway = 'pinging: loop {
        assert!(
            began.elapsed() < 20 * write,
            "pings held the connection open"
        );
        sent += 1;
        raw.send(&frame(PING, 0, 0, &sent.to_be_bytes()));
        // Frames until the read finds nothing for 100 ms.
        loop {
            match raw.next_within() {
                Ok(Some((PING, 0x1, 0, payload))) => {
                    acked = u64::from_be_bytes(payload[..8].try_into().unwrap());
                }
                Ok(Some((GOAWAY, _, 0, payload))) => break 'pinging goaway_fields(&payload),
                Ok(Some((DATA, _, 1, payload))) => {
                    assert!(payload.is_empty(), "data past a 0 window")
                }
                Ok(Some(_)) => {}
                Ok(None) => panic!("closed without a GOAWAY"),
                Err(()) => break,
            }
        }
    };
    let took = began.elapsed();
    assert_eq!(goaway, (1, NO_ERROR));
    raw.stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    assert_ends(&mut raw);
    assert!(acked >= 3, "the PINGs were answered meanwhile ({acked})");
    assert!(took >= write, "not before the write timeout: {took:?}");
    still_serves(&server);
}

/// The write timeouts counted so far, over every poller, as `/metrics`
/// says.
fn write_timeouts(server: &Server) -> u64 {
    let addr = server.metrics_addr().expect("metrics are on");
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    stream.read_to_string(&mut page).unwrap();
    page.lines()
        .filter(|line| {
            line.starts_with("uppercut_timeouts_total{") && line.contains("kind=\"write\"")
        })
        .map(|line| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// A client that reads nothing, so that the server's output backs up
/// (a 4 KiB receive buffer; windows of 16 MiB, an 8 MiB body), and PINGs
/// every 100 ms meanwhile, is closed after the write timeout: while output
/// waits, nothing of the client's is read, and only the socket taking
/// response data is progress.
fn a_client_that_reads_nothing_but_pings_meets_the_write_timeout(dispatch: Dispatch) {
    let write = Duration::from_millis(600);
    let server = start_with(
        &Config {
            timeouts: Timeouts {
                write,
                sweep: Duration::from_millis(50),
                ..Timeouts::default()
            },
            metrics: Some("127.0.0.1:0".parse().unwrap()),
            ..config(dispatch)
        },
        Routes::standard().route(
            "/big",
            uppercut_mio_server::CannedResponse::ok(
                "application/octet-stream",
                vec![b'x'; 8 << 20],
            ),
        ),
    );
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&server.local_addr().into()).unwrap();
    // INITIAL_WINDOW_SIZE 16 MiB, and as much for the connection.
    let mut raw = Raw::over(socket.into(), &[(0x4, 1 << 24)]);
    let mut frames = frame(0x8, 0, 0, &((1u32 << 24) - 65_535).to_be_bytes());
    frames.extend(frame(
        HEADERS,
        END_STREAM | END_HEADERS,
        1,
        &get_block("/big"),
    ));
    raw.send(&frames);
    let began = Instant::now();
    let mut pings = 0u64;
    // A PING, then a look at the count, every 100 ms or so.
    while write_timeouts(&server) == 0 {
        assert!(began.elapsed() < 20 * write, "the connection stayed open");
        pings += 1;
        raw.send(&frame(PING, 0, 0, &pings.to_be_bytes()));
        // The client's pace, not a wait for the server: the end is seen
        // in the count.
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = began.elapsed();
    assert!(took >= write, "not before the write timeout: {took:?}");
    assert!(pings >= 3, "PINGs went meanwhile ({pings})");
    // What the socket took before, then the end, short of the body's.
    let mut body = 0;
    while let Some((kind, flags, _, payload)) = raw.next() {
        if kind == DATA {
            assert_eq!(flags & END_STREAM, 0, "the whole body came");
            body += payload.len();
        }
    }
    assert!(body < 8 << 20, "{body} bytes of the body came");
    still_serves(&server);
}

/// A client that opens its window a little at a time, each step before
/// the write timeout runs out, gets the whole body however long it takes:
/// each step is progress.
fn a_window_opened_bit_by_bit_is_progress(dispatch: Dispatch) {
    let write = Duration::from_millis(600);
    let server = write_timeout_server(dispatch, write);
    let mut raw = stalled_request(&server);
    raw.stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/v1-user.json");
    let expected = std::fs::read(fixture).unwrap();
    let began = Instant::now();
    let mut body = Vec::new();
    let mut grants = 0;
    while body.len() < expected.len() {
        assert!(began.elapsed() < IO_TIMEOUT, "the body did not come");
        // 500 bytes more, to the stream and the connection.
        for stream in [0, 1] {
            raw.send(&frame(0x8, 0, stream, &500u32.to_be_bytes()));
        }
        grants += 1;
        // What the grant let through, until a read finds nothing for 200 ms.
        loop {
            match raw.next_within() {
                Ok(Some((DATA, _, 1, payload))) => body.extend_from_slice(&payload),
                Ok(Some((GOAWAY, ..))) => panic!("GOAWAY after {} bytes", body.len()),
                Ok(Some(_)) => {}
                Ok(None) => panic!("closed after {} bytes", body.len()),
                Err(()) => break,
            }
        }
    }
    assert_eq!(body, expected);
    assert!(
        began.elapsed() > write,
        "longer than the write timeout in all ({grants} grants)"
    );
}

fn a_client_silent_after_the_preface_meets_the_header_timeout(dispatch: Dispatch) {
    let timeouts = Timeouts {
        header: Duration::from_millis(500),
        ..Timeouts::default()
    };
    let server = server(dispatch, timeouts);
    let mut raw = Raw::connect(server.local_addr(), &[]);
    let began = Instant::now();
    assert_eq!(raw.goaway(), NO_ERROR);
    assert!(
        began.elapsed() >= Duration::from_millis(500),
        "not before the header timeout"
    );
    still_serves(&server);
}

fn an_idle_connection_is_pinged_then_closed(dispatch: Dispatch) {
    let timeouts = Timeouts {
        keepalive: Duration::from_millis(500),
        ..Timeouts::default()
    };
    let server = server(dispatch, timeouts);
    let mut raw = Raw::connect(server.local_addr(), &[]);
    raw.send(&frame(
        HEADERS,
        END_STREAM | END_HEADERS,
        1,
        &get_block("/"),
    ));
    // The answer, then (unanswered) a PING, then the GOAWAY.
    let mut pinged = false;
    loop {
        match raw.next() {
            Some((PING, flags, 0, _)) if flags & 0x1 == 0 => pinged = true,
            Some((GOAWAY, _, 0, payload)) => {
                assert_eq!(
                    u32::from_be_bytes(payload[4..8].try_into().unwrap()),
                    NO_ERROR
                );
                assert_eq!(
                    u32::from_be_bytes(payload[..4].try_into().unwrap()),
                    1,
                    "last stream"
                );
                break;
            }
            None => panic!("closed without a GOAWAY"),
            Some(_) => {}
        }
    }
    assert!(pinged, "a PING before the GOAWAY");
}

in_both_modes!(
    the_server_announces_its_limits,
    a_stream_past_the_concurrent_limit_is_refused,
    rapid_reset_ends_in_enhance_your_calm,
    a_continuation_flood_ends_the_connection,
    an_hpack_bomb_is_refused_at_the_header_list_limit,
    a_ping_flood_ends_in_enhance_your_calm,
    a_settings_flood_ends_in_enhance_your_calm,
    a_client_that_never_opens_its_window_meets_the_write_timeout,
    pings_do_not_hold_a_stalled_response_open,
    a_client_that_reads_nothing_but_pings_meets_the_write_timeout,
    a_window_opened_bit_by_bit_is_progress,
    a_client_silent_after_the_preface_meets_the_header_timeout,
    an_idle_connection_is_pinged_then_closed,
);

fn a_drain_says_goaway_with_the_last_stream_taken(dispatch: Dispatch) {
    let server = server(dispatch, Timeouts::default());
    let mut raw = Raw::connect(server.local_addr(), &[]);
    let mut frames = frame(HEADERS, END_STREAM | END_HEADERS, 1, &get_block("/held"));
    frames.extend(frame(HEADERS, END_STREAM | END_HEADERS, 3, &get_block("/")));
    raw.send(&frames);
    // Stream 3 is answered; stream 1 waits for its actor.
    loop {
        if let Some((DATA, flags, 3, _)) = raw.next() {
            if flags & END_STREAM != 0 {
                break;
            }
        }
    }
    let stopping = std::thread::spawn(move || server.shutdown(Duration::from_millis(500)));
    let goaway = loop {
        match raw.next() {
            Some((GOAWAY, _, 0, payload)) => {
                let last = u32::from_be_bytes(payload[..4].try_into().unwrap());
                let code = u32::from_be_bytes(payload[4..8].try_into().unwrap());
                // The first GOAWAY names the largest id, and a PING; once
                // answered, the second names the last stream taken.
                if last == 3 {
                    break code;
                }
            }
            Some((PING, 0, 0, payload)) => raw.send(&frame(PING, 0x1, 0, &payload)),
            Some(_) => {}
            None => panic!("closed without naming the last stream"),
        }
    };
    assert_eq!(goaway, NO_ERROR);
    // Stream 1's actor never answers: the grace runs out.
    assert!(!stopping.join().unwrap());
}

in_both_modes!(a_drain_says_goaway_with_the_last_stream_taken);

/// Sends GET / on stream 1 and reads its answer to the end.
fn served_first(raw: &mut Raw) {
    raw.send(&frame(
        HEADERS,
        END_STREAM | END_HEADERS,
        1,
        &get_block("/"),
    ));
    loop {
        match raw.next() {
            Some((DATA, flags, 1, _)) if flags & END_STREAM != 0 => return,
            Some((GOAWAY, ..)) | None => panic!("stream 1 was not answered"),
            Some(_) => {}
        }
    }
}

/// Reads to the server's GOAWAY, then to the end: its last stream and code.
fn goaway_then_end(raw: &mut Raw) -> (u32, u32) {
    let goaway = loop {
        match raw.next() {
            Some((GOAWAY, _, 0, payload)) => break goaway_fields(&payload),
            Some((RST_STREAM, _, stream, payload)) => {
                panic!("RST_STREAM {payload:?} on {stream}, not a GOAWAY")
            }
            None => panic!("closed without a GOAWAY"),
            Some(_) => {}
        }
    };
    assert_ends(raw);
    goaway
}

/// A GET / whose header block ends with `tail` (or begins with it, a
/// table size update).
fn block_with(tail: &[u8]) -> Vec<u8> {
    let mut block = get_block("/");
    match tail.first() {
        Some(first) if first & 0xe0 == 0x20 => {
            let mut first = tail.to_vec();
            first.extend(block);
            return first;
        }
        _ => block.extend_from_slice(tail),
    }
    block
}

/// The blocks that do not decompress (RFC 7541), each after a request
/// served: index 0, an index past both tables (62, the dynamic table
/// empty), a table size update to 4097 (over SETTINGS_HEADER_TABLE_SIZE,
/// 4096), a Huffman string holding EOS, one padded with 0s, and a string
/// cut off by the end of the block. Each is a connection error
/// COMPRESSION_ERROR (RFC 9113 §4.3), naming stream 1 as the last taken;
/// h2 alone said PROTOCOL_ERROR.
fn blocks_that_do_not_decompress_are_compression_errors(dispatch: Dispatch) {
    // user-agent (58), literal without indexing: its value is the string.
    let user_agent = |value: &[u8]| {
        let mut field = vec![0x0f, 58 - 15];
        field.extend_from_slice(value);
        field
    };
    let cases: [(&str, Vec<u8>); 7] = [
        ("index 0", block_with(&[0x80])),
        // A whole frame shorter than a frame header: none of it reaches h2.
        ("index 0 alone", vec![0x80]),
        ("index past the tables", block_with(&[0xbe])),
        ("table size over the limit", block_with(&[0x3f, 0xe2, 0x1f])),
        (
            "Huffman EOS",
            block_with(&user_agent(&[0x84, 0xff, 0xff, 0xff, 0xff])),
        ),
        ("Huffman padding", block_with(&user_agent(&[0x81, 0x18]))),
        (
            "string cut off",
            block_with(&user_agent(&[0x05, b'a', b'b'])),
        ),
    ];
    let server = server(dispatch, Timeouts::default());
    for (case, block) in cases {
        let mut raw = Raw::connect(server.local_addr(), &[]);
        served_first(&mut raw);
        raw.send(&frame(HEADERS, END_STREAM | END_HEADERS, 3, &block));
        assert_eq!(goaway_then_end(&mut raw), (1, COMPRESSION_ERROR), "{case}");
    }
    still_serves(&server);
}

/// The block is followed across frames and reads: split over a HEADERS
/// frame (padded, with priority fields) and a CONTINUATION, the bad part in
/// the CONTINUATION, sent in the same write as a good request before it,
/// which is taken (the GOAWAY names it) though the bad block is not.
fn a_block_is_judged_whole_across_its_frames(dispatch: Dispatch) {
    let server = server(dispatch, Timeouts::default());
    let mut raw = Raw::connect(server.local_addr(), &[]);
    let padded = |block: &[u8]| {
        // Pad length 3, dependency 0 with weight 16, the block, 3 zeros.
        let mut payload = vec![3, 0, 0, 0, 0, 15];
        payload.extend_from_slice(block);
        payload.extend_from_slice(&[0; 3]);
        payload
    };
    // A good padded request is served: its padding is not the block.
    raw.send(&frame(
        HEADERS,
        END_STREAM | END_HEADERS | PADDED | PRIORITY,
        1,
        &padded(&get_block("/")),
    ));
    loop {
        match raw.next() {
            Some((DATA, flags, 1, _)) if flags & END_STREAM != 0 => break,
            Some((GOAWAY, ..)) | None => panic!("the padded request was not answered"),
            Some(_) => {}
        }
    }
    let mut frames = frame(HEADERS, END_STREAM | END_HEADERS, 3, &get_block("/json"));
    frames.extend(frame(
        HEADERS,
        END_STREAM | PADDED | PRIORITY,
        5,
        &padded(&get_block("/")),
    ));
    frames.extend(frame(CONTINUATION, END_HEADERS, 5, &[0x80]));
    raw.send(&frames);
    assert_eq!(goaway_then_end(&mut raw), (3, COMPRESSION_ERROR));
}

/// A block that decompresses into a field h2 refuses (a name in upper
/// case) is no decoding error: h2 answers it as before, PROTOCOL_ERROR.
fn a_block_that_decompresses_to_a_bad_field_is_no_compression_error(dispatch: Dispatch) {
    let server = server(dispatch, Timeouts::default());
    let mut raw = Raw::connect(server.local_addr(), &[]);
    served_first(&mut raw);
    let block = block_with(&[0x00, 0x01, b'X', 0x01, b'v']);
    raw.send(&frame(HEADERS, END_STREAM | END_HEADERS, 3, &block));
    assert_eq!(goaway_then_end(&mut raw), (1, PROTOCOL_ERROR));
}

/// Entries the client added to the dynamic table, and a size update
/// within the limit, are followed: requests that use them are served.
fn the_dynamic_table_is_followed(dispatch: Dispatch) {
    let server = server(dispatch, Timeouts::default());
    let mut raw = Raw::connect(server.local_addr(), &[]);
    // x-a: 1 with incremental indexing (62), then a block using it and
    // one evicting it with a smaller table, then one using 62 again after
    // it was added anew.
    let mut first = get_block("/");
    first.extend_from_slice(&[0x40, 0x03, b'x', b'-', b'a', 0x01, b'1']);
    let mut uses = get_block("/");
    uses.push(0xbe);
    let mut evicts = vec![0x20, 0x3f, 0xe1, 0x1f];
    evicts.extend(get_block("/"));
    evicts.extend_from_slice(&[0x40, 0x03, b'x', b'-', b'b', 0x01, b'2']);
    for (n, block) in [first, uses.clone(), evicts, uses].iter().enumerate() {
        let stream = 1 + 2 * n as u32;
        raw.send(&frame(HEADERS, END_STREAM | END_HEADERS, stream, block));
        loop {
            match raw.next() {
                Some((DATA, flags, s, _)) if s == stream && flags & END_STREAM != 0 => break,
                Some((GOAWAY, _, _, payload)) => {
                    panic!("GOAWAY {:?} at stream {stream}", goaway_fields(&payload))
                }
                None => panic!("closed at stream {stream}"),
                Some(_) => {}
            }
        }
    }
}

in_both_modes!(
    blocks_that_do_not_decompress_are_compression_errors,
    a_block_is_judged_whole_across_its_frames,
    a_block_that_decompresses_to_a_bad_field_is_no_compression_error,
    the_dynamic_table_is_followed,
);
