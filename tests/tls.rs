//! HTTPS over real sockets with a rustls client, in both dispatch modes: a
//! request, keep-alive, pipelining, a body, an actor route, a large static
//! file through backpressure, TLS 1.2, session resumption, the plain HTTP
//! request on the TLS port, a stalled handshake closed by the header
//! timeout, broken records, the handshake counters, and a WebSocket over
//! TLS.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::tls::{client_config, client_hello, connect, Certificates};
use common::{assert_response, config, error_response, start_with, Client, HELLO};
use rustls::HandshakeKind;
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, ActorResponse, Config, Dispatch, Method, Routes, Server};
use uppercut_mio_server::{StaticLimits, Timeouts};

/// Answers `tls actor`.
struct Answer;

impl AnyActor for Answer {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            request.respond(ActorResponse::text("tls actor"));
        }
    }
}

/// Echoes each WebSocket text message, upper-cased.
struct Shout;

impl uppercut_mio_server::WebSocket for Shout {
    fn on_message(
        &mut self,
        message: uppercut_mio_server::Message<'_>,
        context: &mut uppercut_mio_server::WsContext<'_>,
    ) {
        if let uppercut_mio_server::Message::Text(text) = message {
            context.send_text(&text.to_uppercase());
        }
    }
}

/// The size of `/big.bin`: far more than a socket and rustls queue hold.
const BIG: usize = 4 << 20;

fn big_content() -> Vec<u8> {
    (0..BIG).map(|i| (i % 251) as u8).collect()
}

/// A TLS server with the standard routes, an echo handler, an actor route
/// and a static directory holding `/big.bin`; `/metrics` on.
fn start_tls(dispatch: Dispatch, certificates: &Certificates, timeouts: Timeouts) -> Server {
    let www = certificates.dir.join("www");
    fs::create_dir_all(&www).unwrap();
    fs::write(www.join("big.bin"), big_content()).unwrap();
    let routes = Routes::standard()
        .handler(&[Method::Post], "/echo", |request, response| {
            let _ = response.header("Content-Type", "application/octet-stream");
            response.body(request.body());
        })
        .actor(&[Method::Get], "/actor", "answer")
        .spawn("answer", Answer)
        .websocket("/ws", |_| Shout)
        .with_static_dir(&www, StaticLimits::default())
        .expect("the directory loads");
    let config = Config {
        tls: Some(certificates.files.clone()),
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        timeouts,
        ..config(dispatch)
    };
    start_with(&config, routes)
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").into_bytes()
}

fn requests_keep_alive_pipelining_bodies_and_actors(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("basic-{}", dispatch.name()));
    let server = start_tls(dispatch, &certificates, Timeouts::default());
    let mut client = connect(server.local_addr(), &certificates.client_config());
    assert_eq!(client.stream.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(
        client.stream.conn.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );
    // Keep-alive: three in turn on one connection.
    for _ in 0..3 {
        client.send(&get("/"));
        assert_response(&client.response(false), HELLO);
    }
    // Pipelined: three in one write, answered in order.
    client.send(&[get("/"), get("/json"), get("/")].concat());
    assert_response(&client.response(false), HELLO);
    assert!(client
        .response(false)
        .ends_with(b"{\"message\":\"Hello, World!\"}"));
    assert_response(&client.response(false), HELLO);
    // A body.
    client.send(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello");
    let echoed = client.response(false);
    assert!(echoed.starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert!(echoed.ends_with(b"\r\n\r\nhello"));
    // An actor route.
    client.send(&get("/actor"));
    assert!(client.response(false).ends_with(b"\r\n\r\ntls actor"));
}

/// A 4 MiB file to a client that reads nothing until all of it is sent:
/// the server's writes back up, and every byte still arrives, in order.
fn a_large_file_goes_through_backpressure(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("big-{}", dispatch.name()));
    let server = start_tls(dispatch, &certificates, Timeouts::default());
    // 4 KiB buffers at both ends: the server's TLS records (16 KiB) meet
    // a full socket again and again, however fast this client reads.
    let socket = common::slow_reader(server.local_addr()).stream;
    let mut client = counting_client_over(socket, &certificates.client_config());
    common::set_server_send_buffer(&client.stream.sock.socket, 4096);
    client.send(&[get("/big.bin"), get("/")].concat());
    let response = client.response(false);
    assert!(
        response.starts_with(b"HTTP/1.1 200 OK\r\n"),
        "{:?}",
        &response[..64]
    );
    let head_end = common::find(&response, b"\r\n\r\n").unwrap() + 4;
    assert!(
        response[head_end..] == big_content()[..],
        "the file's bytes"
    );
    assert_response(&client.response(false), HELLO);
}

fn tls12_works_and_sessions_resume(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("resume-{}", dispatch.name()));
    let server = start_tls(dispatch, &certificates, Timeouts::default());
    for versions in [
        &[&rustls::version::TLS12][..],
        &[&rustls::version::TLS13][..],
    ] {
        let config = client_config(&certificates.ca, versions);
        let mut first = connect(server.local_addr(), &config);
        assert_eq!(
            first.stream.conn.handshake_kind(),
            Some(HandshakeKind::Full)
        );
        first.send(&get("/"));
        assert_response(&first.response(false), HELLO);
        // The same client configuration keeps the session (an ID or a
        // ticket) and offers it again.
        let mut second = connect(server.local_addr(), &config);
        second.send(&get("/"));
        assert_response(&second.response(false), HELLO);
        assert_eq!(
            second.stream.conn.handshake_kind(),
            Some(HandshakeKind::Resumed),
            "{versions:?}"
        );
    }
}

const PLAIN_ON_TLS: &str = "HTTP/1.1 400 Bad Request\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 64\r\nDate: {date}\r\n\
    Connection: close\r\n\r\n400 Bad Request: a plain HTTP request was sent to an HTTPS port\n";

/// Plain HTTP to the TLS port gets a plain 400 saying so, and the end;
/// other bytes that are not TLS just the end; a broken handshake record
/// the alert rustls has for it, if any, and the end; a broken record after
/// the handshake the encrypted alert, and the end. Each failed handshake
/// counts as one; a good one as a handshake.
fn what_is_not_tls_is_refused_and_counted(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("refused-{}", dispatch.name()));
    let server = start_tls(dispatch, &certificates, Timeouts::default());
    let mut plain = Client::connect(server.local_addr());
    plain.send(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_response(&plain.rest_until_close(), PLAIN_ON_TLS);

    let mut garbage = Client::connect(server.local_addr());
    garbage.send(b"\x00\x01\x02\x03 not TLS");
    garbage.assert_closed();

    // A handshake record announcing a message past rustls's size limit:
    // rustls sends no alert for it, so just the end (a reset fails the read).
    let mut broken = Client::connect(server.local_addr());
    broken.send(b"\x16\x03\x01\x00\x05\xff\xff\xff\xff\xff");
    assert_eq!(broken.rest_until_close(), b"");
    // A ClientHello too short to parse: a fatal decode_error alert (50) in
    // the clear, then the end.
    let mut malformed = Client::connect(server.local_addr());
    malformed.send(b"\x16\x03\x01\x00\x08\x01\x00\x00\x04\xff\xff\xff\xff");
    assert_eq!(
        malformed.rest_until_close(),
        b"\x15\x03\x03\x00\x02\x02\x32"
    );

    let mut good = connect(server.local_addr(), &certificates.client_config());
    good.send(&get("/"));
    assert_response(&good.response(false), HELLO);
    // A broken record after the handshake ends the connection, after one
    // record: TLS 1.3's encrypted alert, an application_data record of 19
    // bytes (2 of alert, 1 of inner content type, 16 of AEAD tag).
    good.stream
        .sock
        .write_all(b"\x17\x03\x03\x00\x10garbage-garbage!")
        .unwrap();
    let mut rest = Vec::new();
    good.stream
        .sock
        .read_to_end(&mut rest)
        .expect("an end, not a reset");
    assert_eq!(rest.len(), 5 + 19, "one record, then the end: {rest:?}");
    assert_eq!(rest[..5], [0x17, 0x03, 0x03, 0x00, 19], "{rest:?}");
    // The client's session decrypts it: a fatal bad_record_mac.
    let mut record = &rest[..];
    good.stream.conn.read_tls(&mut record).unwrap();
    assert_eq!(
        good.stream.conn.process_new_packets().unwrap_err(),
        rustls::Error::AlertReceived(rustls::AlertDescription::BadRecordMac)
    );

    let metrics = server.metrics_addr().unwrap();
    let (done, failed) = handshake_counts(metrics, 1, 4);
    assert_eq!((done, failed), (1, 4));
}

/// A client that connects and sends half a handshake is closed by the
/// header timeout, and counted as a failed handshake.
fn a_stalled_handshake_is_closed_by_the_header_timeout(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("stall-{}", dispatch.name()));
    let timeouts = Timeouts {
        header: Duration::from_millis(300),
        sweep: Duration::from_millis(50),
        ..Timeouts::default()
    };
    let server = start_tls(dispatch, &certificates, timeouts);
    let mut stalled = TcpStream::connect(server.local_addr()).unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let started = Instant::now();
    // The start of a ClientHello's record, and no more.
    stalled.write_all(b"\x16\x03\x01\x02\x00\x01").unwrap();
    let mut rest = Vec::new();
    stalled.read_to_end(&mut rest).expect("an end, not a reset");
    assert_eq!(rest, b"", "nothing is sent to a client mid-handshake");
    assert!(started.elapsed() >= Duration::from_millis(300));
    let metrics = server.metrics_addr().unwrap();
    assert_eq!(handshake_counts(metrics, 0, 1), (0, 1));
}

/// A client that completes the handshake and sends nothing is waiting for
/// its first request as a plain client would be: 408 at the header
/// timeout, not a quiet close at the keep-alive timeout. After its first
/// request, the keep-alive timeout applies.
fn a_silent_client_after_the_handshake_gets_408(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("silent-{}", dispatch.name()));
    let timeouts = Timeouts {
        header: Duration::from_millis(300),
        keepalive: Duration::from_secs(30),
        sweep: Duration::from_millis(50),
        ..Timeouts::default()
    };
    let server = start_tls(dispatch, &certificates, timeouts);
    let config = certificates.client_config();
    let started = Instant::now();
    let mut silent = connect(server.local_addr(), &config);
    let timed_out = silent.rest_until_close();
    assert_response(
        &timed_out,
        &error_response(408, "Request Timeout", "", true, false),
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(10),
        "the 408 came after {waited:?}"
    );

    // One request, then silence past the header timeout: still open.
    let mut served = connect(server.local_addr(), &config);
    served.send(&get("/"));
    assert_response(&served.response(false), HELLO);
    std::thread::sleep(Duration::from_millis(700));
    served.send(&get("/"));
    assert_response(&served.response(false), HELLO);
}

/// A client offering TLS 1.0 or 1.1 at most gets the `protocol_version`
/// alert (70) RFC 5246 E.1 asks for, rustls' `handshake_failure` (40)
/// never, and the end; a hello arriving in pieces too. One that lists TLS
/// 1.3 in `supported_versions` goes on to rustls. Each refusal counts as a
/// failed handshake.
fn old_tls_gets_protocol_version(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("old-{}", dispatch.name()));
    let server = start_tls(dispatch, &certificates, Timeouts::default());
    for version in [0x0301, 0x0302] {
        let mut old = Client::connect(server.local_addr());
        old.send(&client_hello(version, "localhost", &[]));
        assert_eq!(old.rest_until_close(), b"\x15\x03\x01\x00\x02\x02\x46");
    }
    // In three writes, the first a few bytes of the record header; each
    // read by the server before the next is sent, so it sees three reads.
    let hello = client_hello(0x0301, "localhost", &[]);
    let mut pieces = Client::connect(server.local_addr());
    pieces.stream.set_nodelay(true).unwrap();
    for piece in [&hello[..3], &hello[3..20]] {
        pieces.send(piece);
        common::wait_until_server_read(&pieces.stream);
    }
    pieces.send(&hello[20..]);
    assert_eq!(pieces.rest_until_close(), b"\x15\x03\x01\x00\x02\x02\x46");
    // Every byte of the refused hellos is counted as received, once each
    // connection has ended.
    let metrics = server.metrics_addr().unwrap();
    assert_eq!(handshake_counts(metrics, 0, 3).1, 3);
    let sent = 2 * client_hello(0x0301, "localhost", &[]).len() + hello.len();
    assert_eq!(
        common::page_sum(metrics, "uppercut_bytes_received_total{"),
        sent as u64
    );
    // And the three alerts' bytes as sent.
    assert_eq!(
        common::page_sum(metrics, "uppercut_bytes_sent_total{"),
        3 * 7
    );
    // A legacy version of 1.0 that lists 1.3: rustls answers (a TLS 1.3
    // hello with no key share gets a HelloRetryRequest or an alert of its
    // own), not this check.
    let listed = client_hello(0x0301, "localhost", &[(0x002b, b"\x02\x03\x04")]);
    let mut modern = Client::connect(server.local_addr());
    modern.send(&listed);
    let answer = modern.rest_until_close();
    assert_ne!(answer, b"\x15\x03\x01\x00\x02\x02\x46", "{answer:?}");
    let (_, failed) = handshake_counts(metrics, 0, 4);
    assert_eq!(failed, 4);
}

/// The handshake counters summed over the pollers, once they reach at
/// least `done` and `failed` (they are counted as connections end), or
/// after 10 s.
fn handshake_counts(metrics: std::net::SocketAddr, done: u64, failed: u64) -> (u64, u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let counts = (
            common::page_sum(metrics, "uppercut_tls_handshakes_total{"),
            common::page_sum(metrics, "uppercut_tls_handshake_failures_total{"),
        );
        if (counts.0 >= done && counts.1 >= failed) || Instant::now() > deadline {
            return counts;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A socket that counts the bytes written through it: what a TLS client
/// sent on the wire, handshake and records included.
struct Counting {
    socket: TcpStream,
    written: usize,
    read: usize,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.socket.read(buf)?;
        self.read += read;
        Ok(read)
    }
}

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.socket.write(buf)?;
        self.written += written;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.socket.flush()
    }
}

/// A TLS client whose socket counts what it writes and reads, handshake
/// done.
fn counting_client(
    server: &Server,
    config: &Arc<rustls::ClientConfig>,
) -> Client<rustls::StreamOwned<rustls::ClientConnection, Counting>> {
    counting_client_over(TcpStream::connect(server.local_addr()).unwrap(), config)
}

/// `counting_client` over a socket already connected.
fn counting_client_over(
    socket: TcpStream,
    config: &Arc<rustls::ClientConfig>,
) -> Client<rustls::StreamOwned<rustls::ClientConnection, Counting>> {
    let mut stream = unstarted_session(socket, config);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock).unwrap();
    }
    Client::over(stream)
}

/// A TLS session to `localhost` over `socket`, counting its bytes, with
/// no byte of the handshake sent yet.
fn unstarted_session(
    socket: TcpStream,
    config: &Arc<rustls::ClientConfig>,
) -> rustls::StreamOwned<rustls::ClientConnection, Counting> {
    socket.set_read_timeout(Some(common::IO_TIMEOUT)).unwrap();
    socket.set_nodelay(true).unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let session = rustls::ClientConnection::new(Arc::clone(config), name).unwrap();
    rustls::StreamOwned::new(
        session,
        Counting {
            socket,
            written: 0,
            read: 0,
        },
    )
}

/// Sessions cut with a bare FIN in `a_clean_end_is_not_a_failed_handshake`.
const CUTS: u64 = 10;

/// A TLS client that has read the server's Finished and not yet sent its
/// own.
fn handshake_but_finished(
    server: &Server,
    config: &Arc<rustls::ClientConfig>,
) -> rustls::StreamOwned<rustls::ClientConnection, Counting> {
    let socket = TcpStream::connect(server.local_addr()).unwrap();
    let mut stream = unstarted_session(socket, config);
    while stream.conn.is_handshaking() {
        while stream.conn.wants_write() {
            stream.conn.write_tls(&mut stream.sock).unwrap();
        }
        assert!(stream.conn.read_tls(&mut stream.sock).unwrap() > 0);
        stream.conn.process_new_packets().unwrap();
    }
    stream
}

/// A TLS client that says close_notify, flushed to the socket.
fn say_close_notify(client: &mut Client<rustls::StreamOwned<rustls::ClientConnection, Counting>>) {
    client.stream.conn.send_close_notify();
    while client.stream.conn.wants_write() {
        client
            .stream
            .conn
            .write_tls(&mut client.stream.sock)
            .unwrap();
    }
}

/// Every byte a TLS client sends (handshake, requests, close_notify) is
/// counted in `uppercut_bytes_received_total`, and every byte it reads in
/// `uppercut_bytes_sent_total`, exactly.
fn every_byte_of_a_tls_connection_is_counted(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("bytes-{}", dispatch.name()));
    let server = start_tls(dispatch, &certificates, Timeouts::default());
    let mut client = counting_client(&server, &certificates.client_config());
    for _ in 0..3 {
        client.send(&get("/"));
        assert_response(&client.response(false), HELLO);
    }
    say_close_notify(&mut client);
    assert_eq!(client.rest_until_close(), b"");
    common::wait_for_open(&server, 0);
    let metrics = server.metrics_addr().unwrap();
    let sent = client.stream.sock.written as u64;
    assert_eq!(
        common::page_sum(metrics, "uppercut_bytes_received_total{"),
        sent
    );
    let read = client.stream.sock.read as u64;
    assert_eq!(
        common::page_sum(metrics, "uppercut_bytes_sent_total{"),
        read
    );
}

/// A request and the client's close_notify in one flight: the request is
/// answered, whole, before the end (TLS 1.3 closes one direction at a
/// time, RFC 8446 §6.1).
fn a_request_then_close_notify_is_answered(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("halfclose-{}", dispatch.name()));
    let server = start_tls(dispatch, &certificates, Timeouts::default());
    let mut client = counting_client(&server, &certificates.client_config());
    client.stream.conn.writer().write_all(&get("/")).unwrap();
    say_close_notify(&mut client);
    assert_response(&client.rest_until_close(), HELLO);
    // Pipelined bodies past the server's read buffer, then close_notify:
    // every byte is echoed, in order, before the end.
    let mut client = counting_client(&server, &certificates.client_config());
    let mut sent = Vec::new();
    let mut bodies = Vec::new();
    for n in 0..4u8 {
        let body: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8 ^ n).collect();
        sent.extend_from_slice(
            format!(
                "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        );
        sent.extend_from_slice(&body);
        bodies.push(body);
    }
    for chunk in sent.chunks(16 * 1024) {
        client.stream.conn.writer().write_all(chunk).unwrap();
        while client.stream.conn.wants_write() {
            client
                .stream
                .conn
                .write_tls(&mut client.stream.sock)
                .unwrap();
        }
    }
    say_close_notify(&mut client);
    for body in &bodies {
        let echoed = client.response(false);
        assert!(echoed.starts_with(b"HTTP/1.1 200 OK\r\n"));
        assert!(echoed.ends_with(body), "a body lost or reordered");
    }
    assert_eq!(client.rest_until_close(), b"");
}

/// Only a handshake that began and failed counts as failed: a connection
/// closed before its first byte (a balancer's health check), a session
/// the client ends after its handshake and one it cuts with a bare FIN
/// count nothing as failed.
fn a_clean_end_is_not_a_failed_handshake(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("clean-{}", dispatch.name()));
    // No timeout ends a connection the server failed to see end.
    let server = start_tls(dispatch, &certificates, common::an_hour_to_wait());
    drop(TcpStream::connect(server.local_addr()).unwrap());
    let mut client = counting_client(&server, &certificates.client_config());
    say_close_notify(&mut client);
    assert_eq!(client.rest_until_close(), b"");
    drop(client);
    // Ended with a bare FIN after its handshake: a cut stream, but not a
    // failed handshake.
    // The client's Finished and its FIN back to back, as often as not in
    // one of the server's reads: the end is seen all the same.
    for _ in 0..CUTS {
        let mut cut = handshake_but_finished(&server, &certificates.client_config());
        while cut.conn.wants_write() {
            cut.conn.write_tls(&mut cut.sock).unwrap();
        }
        cut.sock.socket.shutdown(std::net::Shutdown::Write).unwrap();
        common::wait_until_peer_closes(&cut.sock.socket);
    }
    common::wait_for_open(&server, 0);
    let metrics = server.metrics_addr().unwrap();
    assert_eq!(handshake_counts(metrics, 1 + CUTS, 0), (1 + CUTS, 0));
}

/// A client that resets its connection (mid-request, after the handshake)
/// is closed at once, not left to a header timeout of an hour.
fn a_reset_tls_connection_is_closed_at_once(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("reset-{}", dispatch.name()));
    let server = start_tls(dispatch, &certificates, common::an_hour_to_wait());
    let mut client = counting_client(&server, &certificates.client_config());
    client.send(b"GET / HTTP/1.1\r\n");
    common::wait_until_server_read(&client.stream.sock.socket);
    common::wait_for_open(&server, 1);
    common::reset(&client.stream.sock.socket);
    drop(client);
    common::wait_for_open(&server, 0);
    // Mid-download, with the server's records waiting on a full socket:
    // its next write fails, and that ends the connection, not the poller.
    let socket = common::slow_reader(server.local_addr()).stream;
    let mut client = counting_client_over(socket, &certificates.client_config());
    common::set_server_send_buffer(&client.stream.sock.socket, 4096);
    client.send(&get("/big.bin"));
    let mut first = [0; 1024];
    client.stream.read_exact(&mut first).unwrap();
    assert!(first.starts_with(b"HTTP/1.1 200 OK\r\n"));
    common::reset(&client.stream.sock.socket);
    drop(client);
    common::wait_for_open(&server, 0);
    // Every poller still serves.
    for _ in 0..4 {
        let mut next = connect(server.local_addr(), &certificates.client_config());
        next.send(&get("/"));
        assert_response(&next.response(false), HELLO);
    }
}

/// `wss://`: the upgrade and frames ride the TLS session like any request.
fn a_websocket_works_over_tls(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("wss-{}", dispatch.name()));
    let server = start_tls(dispatch, &certificates, Timeouts::default());
    let mut client = connect(server.local_addr(), &certificates.client_config());
    client.send(
        b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    let switching = client.response(true);
    assert!(switching.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"));
    // "hey", masked with 0 (a zero mask is still a mask).
    client.send(b"\x81\x83\0\0\0\0hey");
    assert_eq!(client.exactly(5), b"\x81\x03HEY");
    client.send(b"\x88\x82\0\0\0\0\x03\xe8");
    assert_eq!(client.exactly(4), b"\x88\x02\x03\xe8");
    // The closing handshake done, the TLS session ends with close_notify:
    // the read ends cleanly, not at a cut.
    assert_eq!(client.rest_until_close(), b"");
}

/// An answer after which the server closes (`Connection: close`) is
/// followed by `close_notify`, so the client knows it is whole (RFC 8446
/// §6.1); without it, OpenSSL 3 clients report "unexpected eof".
fn a_closing_answer_ends_with_close_notify(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("notify-{}", dispatch.name()));
    let server = start_tls(dispatch, &certificates, Timeouts::default());
    let mut client = connect(server.local_addr(), &certificates.client_config());
    client.send(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    // `rest_until_close` fails on an end without close_notify.
    assert_response(
        &client.rest_until_close(),
        "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
         Content-Type: text/plain; charset=utf-8\r\nContent-Length: 6\r\n\
         Date: {date}\r\nConnection: close\r\n\r\nhello\n",
    );
}

in_both_modes!(
    every_byte_of_a_tls_connection_is_counted,
    a_request_then_close_notify_is_answered,
    a_clean_end_is_not_a_failed_handshake,
    a_reset_tls_connection_is_closed_at_once,
    a_websocket_works_over_tls,
    a_closing_answer_ends_with_close_notify,
    requests_keep_alive_pipelining_bodies_and_actors,
    a_large_file_goes_through_backpressure,
    tls12_works_and_sessions_resume,
    what_is_not_tls_is_refused_and_counted,
    a_stalled_handshake_is_closed_by_the_header_timeout,
    a_silent_client_after_the_handshake_gets_408,
    old_tls_gets_protocol_version,
);
