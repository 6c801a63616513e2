//! HTTP/3 over real UDP sockets: every route answers as it does over
//! HTTP/1.1 (each request sent both ways, the answers compared field for
//! field and byte for byte), HTTPS responses advertise it with `Alt-Svc`,
//! the access log says `HTTP/3.0`; and each safety rule, driven by a real
//! QUIC client (quinn-proto's, in `common::h3client`) or a hand-made
//! datagram: the anti-amplification limit, Retry, the stream, field
//! section and QPACK limits, the idle timeout, a client that stops
//! acknowledging, a drain that sends CONNECTION_CLOSE, malformed requests.

mod common;

use std::fs;
use std::io::Write as _;
use std::net::UdpSocket;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::h2client::{answer_of_http11, Answer};
use common::h3client::{
    application_code, client_config, headers_frame, put_frame, H3Client, H3Response,
};
use common::tls::{self, Certificates};
use common::upstream::{spawn, with_upstream};
use common::{start_with, Client, IO_TIMEOUT};
use quinn_proto::{ConnectionError, Dir};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    AccessLogTarget, ActorRequest, ActorResponse, Config, Dispatch, Listener, Method, Routes,
    Server,
};

/// HTTP/3's error codes the tests look for (RFC 9114 §8.1, RFC 9204 §6).
const H3_NO_ERROR: u64 = 0x100;
const H3_FRAME_UNEXPECTED: u64 = 0x105;
const H3_EXCESSIVE_LOAD: u64 = 0x107;
const H3_MISSING_SETTINGS: u64 = 0x10a;
const H3_REQUEST_REJECTED: u64 = 0x10b;
const H3_MESSAGE_ERROR: u64 = 0x10e;
const QPACK_DECOMPRESSION_FAILED: u64 = 0x200;
const QPACK_ENCODER_STREAM_ERROR: u64 = 0x201;

/// A static directory: a small text file, a CSS file (served gzipped to
/// whoever accepts it) and a 1 MiB file.
fn site(dir: &std::path::Path) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("a.txt"), b"alpha\n").unwrap();
    let css: String = (0..100)
        .map(|i| format!(".r{i} {{ color: red; }}\n"))
        .collect();
    fs::write(dir.join("site.css"), css).unwrap();
    let big: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    fs::write(dir.join("big.bin"), big).unwrap();
}

/// A server in TLS with HTTP/3, two pollers, `dispatch`, on a free port.
fn h3_config(dispatch: Dispatch, certificates: &Certificates) -> Config {
    Config {
        listeners: vec![Listener {
            addr: "127.0.0.1:0".parse().unwrap(),
            tls: true,
        }],
        pollers: 2,
        dispatch,
        tls: Some(certificates.files.clone()),
        http3: true,
        ..Config::default()
    }
}

fn connect(server: &Server, certificates: &Certificates) -> H3Client {
    H3Client::connect(server.local_addr(), client_config(&certificates.ca))
}

/// Answers with the request's method, path, the field `x-test` and its
/// body: what a route sees of a request.
struct Mirror;

impl AnyActor for Mirror {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let seen = request.request();
            let body = format!(
                "{} {} {:?} {}",
                seen.method().as_str(),
                seen.path(),
                seen.header("x-test")
                    .map(|v| String::from_utf8_lossy(v).into_owned()),
                String::from_utf8_lossy(seen.body())
            );
            request.respond(ActorResponse::text(body));
        }
    }
}

#[derive(serde::Deserialize)]
struct Greet {
    name: String,
}

#[derive(serde::Serialize)]
struct Greeting {
    message: String,
}

/// Every kind of route: canned (the standard ones), handlers at a path and
/// at a pattern, a typed JSON route, and actors (one shared, one per
/// poller, one on blocking threads).
fn routes() -> Routes {
    use std::fmt::Write as _;
    fn hello(
        _: &uppercut_mio_server::Request<'_>,
        response: &mut uppercut_mio_server::Response<'_>,
    ) {
        let _ = response.header("Content-Type", "text/plain");
        let _ = response.write_str("Hello, World!");
    }
    Routes::standard()
        .handler(&[Method::Get], "/hello/handler", hello)
        .handler(&[Method::Get], "/hello/param/{name}", hello)
        .json_handler(&[Method::Post], "/hello/json", |request| {
            let greet: Greet = request.json()?;
            Ok(Greeting {
                message: format!("Hello, {}!", greet.name),
            })
        })
        .actor(&Method::ROUTABLE, "/mirror", "mirror")
        .spawn("mirror", Mirror)
        .actor(&[Method::Get], "/per-poller", "per-poller")
        .spawn_per_poller("per-poller", |_| Mirror)
        .actor(&[Method::Get], "/blocking", "blocking")
        .spawn_blocking("blocking", 2, |_| Mirror)
}

/// A request as method, target, fields and body.
type Sent = (
    &'static str,
    &'static str,
    Vec<(&'static str, &'static str)>,
    Vec<u8>,
);

/// Every kind of route, the static files with their ranges and gzip, the
/// errors, a body past the largest, and `/io`.
fn requests() -> Vec<Sent> {
    let none = Vec::new;
    vec![
        ("GET", "/", none(), vec![]),
        ("GET", "/plaintext", none(), vec![]),
        ("GET", "/json", none(), vec![]),
        ("GET", "/v1/user", none(), vec![]),
        ("GET", "/hello/handler", none(), vec![]),
        ("GET", "/hello/param/J%C3%BCrgen", none(), vec![]),
        ("GET", "/mirror?q=1", vec![("x-test", "seen")], vec![]),
        ("POST", "/mirror", none(), b"a body".to_vec()),
        ("GET", "/per-poller", none(), vec![]),
        ("GET", "/blocking", none(), vec![]),
        (
            "OPTIONS",
            "/mirror",
            vec![("origin", "https://app.example")],
            vec![],
        ),
        ("GET", "/", vec![("origin", "https://app.example")], vec![]),
        (
            "POST",
            "/hello/json",
            vec![("content-type", "application/json")],
            br#"{"name":"World"}"#.to_vec(),
        ),
        ("POST", "/hello/json", none(), b"{}".to_vec()),
        ("GET", "/a.txt", none(), vec![]),
        ("GET", "/a.txt", vec![("range", "bytes=1-3")], vec![]),
        (
            "GET",
            "/site.css",
            vec![("accept-encoding", "gzip")],
            vec![],
        ),
        ("GET", "/big.bin", none(), vec![]),
        ("GET", "/nowhere", none(), vec![]),
        ("DELETE", "/", none(), vec![]),
        ("POST", "/hello/json", none(), vec![b'x'; 3000]),
        ("GET", "/io", none(), vec![]),
    ]
}

/// `answer` with its date checked and set aside, and its fields of one
/// name together where the first of them was (as HTTP/2 and HTTP/3
/// carry them: the order of fields of different names means nothing,
/// RFC 9110 §5.3).
fn dated(mut answer: Answer) -> Answer {
    let mut grouped: Vec<(String, String)> = Vec::new();
    for (name, value) in answer.fields.drain(..) {
        match grouped.iter().rposition(|(n, _)| *n == name) {
            Some(at) => grouped.insert(at + 1, (name, value)),
            None => grouped.push((name, value)),
        }
    }
    answer.fields = grouped;
    for (name, value) in &mut answer.fields {
        if name == "date" {
            common::assert_recent_date(value);
            *value = "{date}".into();
        }
    }
    answer
}

fn over_http11(server: &Server, tls: &Arc<rustls::ClientConfig>, request: &Sent) -> Answer {
    let (method, target, fields, body) = request;
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\n");
    for (name, value) in fields {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    let mut client = tls::connect(server.local_addr(), tls);
    client.send(&bytes);
    dated(answer_of_http11(
        &client.response(*method == "HEAD"),
        *method == "HEAD",
    ))
}

fn over_http3(client: &mut H3Client, request: &Sent) -> Answer {
    let (method, target, fields, body) = request;
    let mut fields = fields.clone();
    let length = body.len().to_string();
    if !body.is_empty() {
        fields.push(("content-length", &length));
    }
    let H3Response {
        status,
        fields,
        body,
    } = client.request(method, target, &fields, body);
    dated(Answer {
        status,
        fields,
        body,
    })
}

fn every_route_answers_as_over_http11(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("h3-routes-{}", dispatch.name()));
    let www = certificates.dir.join("www");
    site(&www);
    let upstream = spawn(|stream| {
        let body = r#"{"status":"ok"}"#;
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        true
    });
    let config = Config {
        static_dir: Some(www),
        max_body: 2048,
        headers: vec![("X-Frame-Options".into(), "DENY".into())],
        cors: vec!["https://app.example".into()],
        upstream: with_upstream(dispatch, upstream.addr).upstream,
        ..h3_config(dispatch, &certificates)
    };
    let server = start_with(&config, routes());
    let tls = tls::client_config(&certificates.ca, &[&rustls::version::TLS13]);
    let mut h3 = connect(&server, &certificates);
    for request in requests() {
        let expected = over_http11(&server, &tls, &request);
        let got = over_http3(&mut h3, &request);
        assert_eq!(got, expected, "{} {}", request.0, request.1);
    }
    // Each answer over TCP and TLS advertised HTTP/3, on the TLS port.
    let port = server.local_addr().port();
    let alt_svc = format!("h3=\":{port}\"; ma=86400");
    let expected = over_http11(&server, &tls, &requests()[0]);
    assert_eq!(expected.field("alt-svc"), Some(alt_svc.as_str()));
    server.stop();
}

#[test]
fn every_route_answers_as_over_http11_local() {
    every_route_answers_as_over_http11(Dispatch::Local);
}

#[test]
fn every_route_answers_as_over_http11_system() {
    every_route_answers_as_over_http11(Dispatch::System);
}

/// A plain listener beside the TLS one says nothing of HTTP/3: a plain
/// client cannot use what Alt-Svc names (RFC 9114 §3.1.1 wants the
/// authority's certificate).
#[test]
fn plain_responses_do_not_advertise_http3() {
    let certificates = Certificates::new("h3-plain");
    let config = Config {
        listeners: vec![
            Listener {
                addr: "127.0.0.1:0".parse().unwrap(),
                tls: false,
            },
            Listener {
                addr: "127.0.0.1:0".parse().unwrap(),
                tls: true,
            },
        ],
        ..h3_config(Dispatch::Local, &certificates)
    };
    let server = start_with(&config, Routes::standard());
    let mut client = Client::connect(server.listeners()[0].addr);
    client.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let answer = answer_of_http11(&client.response(false), false);
    assert_eq!((answer.status, answer.field("alt-svc")), (200, None));
    // HTTP/3 is on the TLS listener's port.
    let tls_addr = server.listeners()[1].addr;
    let mut h3 = H3Client::connect(tls_addr, client_config(&certificates.ca));
    assert_eq!(h3.request("GET", "/", &[], b"").body, b"hello\n");
    server.stop();
}

/// Each request's access-log line says HTTP/3.0, with the client's
/// address and user agent.
#[test]
fn the_access_log_says_http3() {
    let certificates = Certificates::new("h3-log");
    let log = certificates.dir.join("access.log");
    let config = Config {
        access_log: Some(AccessLogTarget::File(log.clone())),
        log_name: Some("h3".into()),
        ..h3_config(Dispatch::Local, &certificates)
    };
    let server = start_with(&config, Routes::standard());
    let mut h3 = connect(&server, &certificates);
    let response = h3.request("GET", "/plaintext", &[("user-agent", "h3-test")], b"");
    assert_eq!(response.status, 200);
    assert_eq!(h3.request("GET", "/missing", &[], b"").status, 404);
    server.stop();
    let text = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("127.0.0.1 - - ["), "{}", lines[0]);
    assert!(
        lines[0].ends_with("\"GET /plaintext HTTP/3.0\" 200 13 \"-\" \"h3-test\" server=h3"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("\"GET /missing HTTP/3.0\" 404 14 "),
        "{}",
        lines[1]
    );
}

/// Before the client's address is validated the server sends at most
/// three times what it received (RFC 9000 §8.1): one Initial of 1,200
/// bytes, then silence, gets at most 3,600 bytes, resends included.
#[test]
fn the_server_sends_at_most_three_times_what_an_unvalidated_client_sent() {
    let certificates = Certificates::new("h3-amplification");
    let server = start_with(
        &h3_config(Dispatch::Local, &certificates),
        Routes::standard(),
    );
    let mut client = H3Client::start(server.local_addr(), client_config(&certificates.ca));
    // The client's first flight: one Initial datagram, and nothing more
    // (it never answers, so its address is never validated).
    client.flush();
    let sent = client.sent;
    assert_eq!(sent, 1200, "the client's Initial is padded to 1,200 bytes");
    client.deaf = true;
    let socket: &UdpSocket = client.socket();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut received = 0;
    let mut buf = vec![0; 65_536];
    let quiet_until = |at: Instant| at + Duration::from_secs(3);
    let mut last = Instant::now();
    // Until the server has been quiet for 3 s: its resends back off from
    // about a second, so one more would have come by then.
    while Instant::now() < quiet_until(last) {
        if let Ok((len, _)) = socket.recv_from(&mut buf) {
            received += len;
            last = Instant::now();
        }
    }
    assert!(received > 0, "the server answered");
    assert!(received <= 3 * sent as usize, "{received} bytes for {sent}");
    server.stop();
}

/// With `http3_retry_above` 0 every new client is sent a Retry first: the
/// server's first datagram is a Retry packet (long header, type 3), and a
/// client that follows it is served.
#[test]
fn a_retry_validates_the_address_before_the_handshake() {
    let certificates = Certificates::new("h3-retry");
    let config = Config {
        http3_retry_above: 0,
        ..h3_config(Dispatch::Local, &certificates)
    };
    let server = start_with(&config, Routes::standard());
    let mut client = H3Client::start(server.local_addr(), client_config(&certificates.ca));
    client.flush();
    let socket = client.socket().try_clone().unwrap();
    socket.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut buf = vec![0; 65_536];
    let (len, _) = socket.recv_from(&mut buf).expect("the server answers");
    assert_eq!(buf[0] & 0xf0, 0xf0, "a Retry packet: {:02x?}", &buf[..8]);
    // The client answers the Retry with its token, and is served.
    client.handle_datagram(&buf[..len]);
    client.drive_until(|c| (!c.conn.is_handshaking()).then_some(()));
    let control = client.conn.streams().open(Dir::Uni).unwrap();
    client.write(control, &[0x00, 0x04, 0x00], false);
    assert_eq!(client.request("GET", "/", &[], b"").body, b"hello\n");
    server.stop();
}

/// A client may keep 128 requests open at once; the 129th stream waits
/// for one of them to end (the server's MAX_STREAMS).
#[test]
fn a_client_has_128_request_streams_at_once() {
    let certificates = Certificates::new("h3-streams");
    let server = start_with(
        &h3_config(Dispatch::Local, &certificates),
        Routes::standard(),
    );
    let mut client = connect(&server, &certificates);
    let mut opened = Vec::new();
    while let Some(id) = client.conn.streams().open(Dir::Bi) {
        opened.push(id);
    }
    assert_eq!(opened.len(), 128);
    // Their requests are served; each one's end lets one more open.
    let request = headers_frame("GET", "/", &[]);
    for &id in &opened {
        client.write(id, &request, true);
    }
    let more = client.drive_until(|c| c.conn.streams().open(Dir::Bi));
    assert!(more.is_some(), "a stream opened once others ended");
    server.stop();
}

/// A field section past the limit the server announced is answered 431,
/// as an HTTP/1.1 head too long is; a HEADERS frame past four times that
/// ends the connection with H3_EXCESSIVE_LOAD.
#[test]
fn field_sections_past_the_limits() {
    let certificates = Certificates::new("h3-fields");
    let server = start_with(
        &h3_config(Dispatch::Local, &certificates),
        Routes::standard(),
    );
    let mut client = connect(&server, &certificates);
    let long = "v".repeat(10_000);
    let response = client.request("GET", "/", &[("x-long", &long)], b"");
    assert_eq!(response.status, 431);
    assert_eq!(
        client.request("GET", "/", &[], b"").status,
        200,
        "the connection lives on"
    );
    let huge = "v".repeat(40_000);
    client.send("GET", "/", &[("x-huge", &huge)], b"");
    let lost = client.closed();
    assert_eq!(application_code(&lost), Some(H3_EXCESSIVE_LOAD), "{lost:?}");
    server.stop();
}

/// QPACK with no dynamic table: a field section that refers to one is
/// QPACK_DECOMPRESSION_FAILED; an encoder stream that inserts into it is
/// QPACK_ENCODER_STREAM_ERROR.
#[test]
fn qpack_refuses_the_dynamic_table() {
    let certificates = Certificates::new("h3-qpack");
    let server = start_with(
        &h3_config(Dispatch::Local, &certificates),
        Routes::standard(),
    );
    let mut client = connect(&server, &certificates);
    // Required Insert Count 1: a section that needs an insert.
    let mut frame = Vec::new();
    put_frame(&mut frame, 0x1, &[0x02, 0x00, 0x80]);
    client.send_raw(&frame, true);
    let lost = client.closed();
    assert_eq!(
        application_code(&lost),
        Some(QPACK_DECOMPRESSION_FAILED),
        "{lost:?}"
    );

    let mut client = connect(&server, &certificates);
    let encoder = client.conn.streams().open(Dir::Uni).unwrap();
    // Type 2 (encoder), Set Dynamic Table Capacity 0 (allowed), then an
    // Insert With Literal Name.
    client.write(encoder, &[0x02, 0x20, 0x41, b'a', 0x01, b'b'], false);
    let lost = client.closed();
    assert_eq!(
        application_code(&lost),
        Some(QPACK_ENCODER_STREAM_ERROR),
        "{lost:?}"
    );
    server.stop();
}

/// A malformed request resets its own stream with H3_MESSAGE_ERROR and
/// leaves the connection serving; frames out of place, and a control
/// stream that does not open with SETTINGS, end the connection.
#[test]
fn malformed_requests_and_frames() {
    let certificates = Certificates::new("h3-malformed");
    let server = start_with(
        &h3_config(Dispatch::Local, &certificates),
        Routes::standard(),
    );
    let mut client = connect(&server, &certificates);
    let id = client.send("GET", "/", &[("connection", "close")], b"");
    assert_eq!(client.reply(id), Some(Err(H3_MESSAGE_ERROR)));
    let id = client.send("GET", "/", &[("Upper", "case")], b"");
    assert_eq!(client.reply(id), Some(Err(H3_MESSAGE_ERROR)));
    assert_eq!(client.request("GET", "/", &[], b"").status, 200);
    // DATA before HEADERS.
    let mut frame = Vec::new();
    put_frame(&mut frame, 0x0, b"early");
    client.send_raw(&frame, true);
    let lost = client.closed();
    assert_eq!(
        application_code(&lost),
        Some(H3_FRAME_UNEXPECTED),
        "{lost:?}"
    );

    let mut client = H3Client::start(server.local_addr(), client_config(&certificates.ca));
    client.drive_until(|c| (!c.conn.is_handshaking()).then_some(()));
    let control = client.conn.streams().open(Dir::Uni).unwrap();
    // A control stream whose first frame is GOAWAY.
    let mut bytes = vec![0x00];
    put_frame(&mut bytes, 0x7, &[0x00]);
    client.write(control, &bytes, false);
    let lost = client.closed();
    assert_eq!(
        application_code(&lost),
        Some(H3_MISSING_SETTINGS),
        "{lost:?}"
    );
    server.stop();
}

/// A client silent past the idle timeout is forgotten: its next packet
/// gets a stateless reset.
#[test]
fn an_idle_connection_is_closed() {
    let certificates = Certificates::new("h3-idle");
    let mut config = h3_config(Dispatch::Local, &certificates);
    config.timeouts.keepalive = Duration::from_millis(500);
    let server = start_with(&config, Routes::standard());
    let mut client = connect(&server, &certificates);
    assert_eq!(client.request("GET", "/", &[], b"").status, 200);
    // Past the server's idle timeout (the smaller of the two sides': the
    // client's is quinn-proto's 30 s), with nothing sent either way.
    let started = Instant::now();
    client.frozen = true;
    // Six times the timeout: the server's poller may run late on a busy
    // machine, not this early.
    while started.elapsed() < Duration::from_secs(3) {
        client.receive(Duration::from_millis(100));
    }
    let lost = client.thaw_with_request();
    assert!(matches!(lost, Some(ConnectionError::Reset)), "{lost:?}");
    server.stop();
}

/// A client that stops acknowledging in the middle of a large response:
/// the server resends with backoff, then gives up at the idle timeout
/// and forgets the connection (its next packet gets a stateless reset).
#[test]
fn a_client_that_stops_acknowledging_is_let_go() {
    let certificates = Certificates::new("h3-stall");
    let www = certificates.dir.join("www");
    site(&www);
    let mut config = Config {
        static_dir: Some(www),
        ..h3_config(Dispatch::Local, &certificates)
    };
    config.timeouts.keepalive = Duration::from_secs(1);
    let server = start_with(&config, Routes::standard());
    let mut client = connect(&server, &certificates);
    client.send("GET", "/big.bin", &[], b"");
    client.frozen = true;
    let started = Instant::now();
    let mut last = Instant::now();
    let before = client.received;
    // Until the server has been quiet for 2 s.
    while last.elapsed() < Duration::from_secs(2) {
        let received = client.received;
        client.receive(Duration::from_millis(100));
        if client.received > received {
            last = Instant::now();
        }
        assert!(
            started.elapsed() < IO_TIMEOUT,
            "the server never went quiet"
        );
    }
    let sent = client.received - before;
    // Its congestion window, and resends: far less than the 1 MiB body.
    assert!(
        sent > 0 && sent < 512 * 1024,
        "{sent} bytes while unacknowledged"
    );
    let lost = client.thaw_with_request();
    assert!(matches!(lost, Some(ConnectionError::Reset)), "{lost:?}");
    server.stop();
}

/// Keeps each request it gets, and says so.
struct Gate {
    held: Arc<Mutex<Vec<ActorRequest>>>,
    arrived: mpsc::Sender<()>,
}

impl AnyActor for Gate {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.held.lock().unwrap().push(*request);
            let _ = self.arrived.send(());
        }
    }
}

/// A drain sends each connection a GOAWAY naming the first request not
/// taken, answers the request in flight, then closes the connection with
/// CONNECTION_CLOSE, H3_NO_ERROR; a request sent after the GOAWAY is
/// refused with H3_REQUEST_REJECTED.
#[test]
fn a_drain_sends_goaway_and_connection_close() {
    let certificates = Certificates::new("h3-drain");
    let held = Arc::new(Mutex::new(Vec::new()));
    let (arrived, arrivals) = mpsc::channel();
    let gate = Gate {
        held: Arc::clone(&held),
        arrived,
    };
    let routes = routes()
        .actor(&[Method::Get], "/gate", "gate")
        .spawn("gate", gate);
    let server = start_with(&h3_config(Dispatch::Local, &certificates), routes);
    let mut client = connect(&server, &certificates);
    assert_eq!(client.request("GET", "/", &[], b"").status, 200);
    // A request whose actor holds it holds the drain open; the drain
    // begins once the actor has it.
    let in_flight = client.send("GET", "/gate", &[], b"");
    client.drive_until(|_| arrivals.try_recv().ok());
    let stopping = thread::spawn(move || server.shutdown(Duration::from_secs(10)));
    let goaway =
        client.drive_until(|c| c.server_streams.values().find_map(|bytes| goaway_in(bytes)));
    // Requests 0 and 4 were taken: the first refused is 8.
    assert_eq!(goaway, Some(8));
    let late = client.send("GET", "/", &[], b"");
    assert_eq!(client.reply(late), Some(Err(H3_REQUEST_REJECTED)));
    for request in held.lock().unwrap().drain(..) {
        request.respond(ActorResponse::text("the last one"));
    }
    let response = client.response(in_flight);
    assert_eq!(
        (response.status, &response.body[..]),
        (200, &b"the last one"[..])
    );
    let lost = client.closed();
    assert_eq!(application_code(&lost), Some(H3_NO_ERROR), "{lost:?}");
    assert!(stopping.join().unwrap(), "every request was answered");
}

/// The GOAWAY on a server's control stream, if its bytes hold one: the
/// stream type, SETTINGS, then GOAWAY's id.
fn goaway_in(bytes: &[u8]) -> Option<u64> {
    let frames = common::h3client::frames(bytes.get(1..)?);
    frames
        .into_iter()
        .find(|(kind, _)| *kind == 0x7)
        .and_then(|(_, payload)| common::h3client::varint(&payload))
}

/// The metrics count HTTP/3's connections, requests and Retry packets,
/// and requests by protocol; `promtool` accepts the page.
#[test]
fn metrics_count_http3_and_requests_by_protocol() {
    let certificates = Certificates::new("h3-metrics");
    let config = Config {
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        http3_retry_above: 0,
        ..h3_config(Dispatch::Local, &certificates)
    };
    let server = start_with(&config, routes());
    let mut client = connect(&server, &certificates);
    for _ in 0..3 {
        assert_eq!(client.request("GET", "/", &[], b"").status, 200);
    }
    let addr = server.metrics_addr().expect("metrics are on");
    let mut scrape = Client::connect(addr);
    scrape.send(b"GET /metrics HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n");
    let response = String::from_utf8(scrape.rest_until_close()).unwrap();
    let (_, page) = response.split_once("\r\n\r\n").expect("a whole response");
    let sum = |series: &str| -> u64 {
        page.lines()
            .filter(|line| line.starts_with(series))
            .filter_map(|line| line.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum()
    };
    assert_eq!(sum("uppercut_http3_connections_total{"), 1, "{page}");
    assert_eq!(sum("uppercut_http3_streams_total{"), 3);
    assert_eq!(sum("uppercut_quic_retries_total{"), 1);
    assert_eq!(sum("uppercut_http3_resets_total{"), 0);
    let h3 = page
        .lines()
        .filter(|line| {
            line.starts_with("uppercut_protocol_streams_total{") && line.contains("protocol=\"h3\"")
        })
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum::<u64>();
    assert_eq!(h3, 3);
    let file = certificates.dir.join("metrics.txt");
    fs::write(&file, page).unwrap();
    let checked = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(fs::File::open(&file).unwrap())
        .output()
        .expect("promtool (Debian package prometheus; .ci/run installs it)");
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    server.stop();
}
