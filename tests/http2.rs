//! HTTP/2 over real sockets, in both dispatch modes, h2c with prior
//! knowledge and TLS with ALPN: every route answers as it does over
//! HTTP/1.1 (each request is sent both ways and the answers compared,
//! field for field and byte for byte), streams of one connection run
//! concurrently (a slow actor holds no other stream), and `--http2 off`
//! leaves HTTP/1.1 untouched.

mod common;

use std::fs;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::h2client::{answer_of_http11, Answer, H2Client};
use common::tls::{client_config, Certificates};
use common::upstream::{spawn, with_upstream};
use common::{config, start_with, Client};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, ActorResponse, Config, Dispatch, Method, Routes, Server};

/// Answers `/slow/*` only once told to, and everything else at once.
struct Gate {
    held: Arc<Mutex<Vec<ActorRequest>>>,
}

impl AnyActor for Gate {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        match envelope.message.downcast::<ActorRequest>() {
            Ok(request) => self.held.lock().unwrap().push(*request),
            Err(message) => {
                if message.is::<&str>() {
                    for request in self.held.lock().unwrap().drain(..) {
                        let path = request.request().path().to_string();
                        request.respond(ActorResponse::text(format!("released {path}")));
                    }
                }
            }
        }
    }
}

/// Answers with the request's method, path, query, the field `x-test` and
/// the body: what a route sees of a request.
struct Mirror;

impl AnyActor for Mirror {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let seen = request.request();
            let body = format!(
                "{} {} {:?} {:?} {}",
                seen.method().as_str(),
                seen.path(),
                seen.query(),
                seen.header("x-test")
                    .map(|v| String::from_utf8_lossy(v).into_owned()),
                String::from_utf8_lossy(seen.body())
            );
            request.respond(ActorResponse::text(body));
        }
    }
}

/// The routes every test here serves: the standard ones, each kind of
/// route, a static directory, and `/io` when given an upstream.
fn routes(www: &std::path::Path, held: Arc<Mutex<Vec<ActorRequest>>>) -> Routes {
    Routes::standard()
        .handler(&[Method::Get], "/hello/handler", |_, response| {
            let _ = response.header("Content-Type", "text/plain");
            response.body(b"Hello, World!");
        })
        .handler(
            &[Method::Get],
            "/hello/param/{name}",
            |request, response| {
                let name = request.param("name").unwrap_or_default();
                response.body(format!("Hello, {name}!").as_bytes());
            },
        )
        .handler(&[Method::Post], "/echo", |request, response| {
            let _ = response.header("Content-Type", "application/octet-stream");
            response.body(request.body());
        })
        .actor(&[Method::Get, Method::Post], "/mirror", "mirror")
        .spawn("mirror", Mirror)
        .actor(&[Method::Get], "/per-poller", "per-poller")
        .spawn_per_poller("per-poller", |_| Mirror)
        .actor(&[Method::Get], "/blocking", "blocking")
        .spawn_blocking("blocking", 2, |_| Mirror)
        .blocking_handler(&[Method::Get], "/report", |_, response| {
            response.body(b"a report");
        })
        .actor(&[Method::Get], "/slow/*", "gate")
        .spawn("gate", Gate { held })
        .with_static_dir(www, Default::default())
        .expect("the directory loads")
}

/// A static directory: a small text file, a larger CSS file (served
/// gzip-compressed to whoever accepts it), and a 1 MiB file.
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

/// A request as method, target, fields and body.
type Sent = (
    &'static str,
    &'static str,
    Vec<(&'static str, String)>,
    Vec<u8>,
);

/// The requests every route kind gets.
fn requests() -> Vec<Sent> {
    let none = Vec::new;
    vec![
        ("GET", "/", none(), vec![]),
        ("HEAD", "/", none(), vec![]),
        ("GET", "/plaintext", none(), vec![]),
        ("GET", "/json", none(), vec![]),
        ("GET", "/v1/user", none(), vec![]),
        ("GET", "/hello/handler", none(), vec![]),
        ("GET", "/hello/param/J%C3%BCrgen", none(), vec![]),
        ("POST", "/echo", none(), b"bytes in, bytes out".to_vec()),
        (
            "GET",
            "/mirror?q=1&r=two",
            vec![("x-test", "seen".into())],
            vec![],
        ),
        ("POST", "/mirror", none(), b"a body".to_vec()),
        ("GET", "/per-poller", none(), vec![]),
        ("GET", "/blocking", none(), vec![]),
        ("GET", "/report", none(), vec![]),
        ("GET", "/a.txt", none(), vec![]),
        ("HEAD", "/a.txt", none(), vec![]),
        ("GET", "/a.txt", vec![("range", "bytes=1-3".into())], vec![]),
        (
            "GET",
            "/site.css",
            vec![("accept-encoding", "gzip".into())],
            vec![],
        ),
        ("GET", "/big.bin", none(), vec![]),
        ("GET", "/nowhere", none(), vec![]),
        ("DELETE", "/", none(), vec![]),
        ("POST", "/echo", none(), vec![b'x'; 3000]),
        ("GET", "/io", none(), vec![]),
    ]
}

/// `answer` with its `date` field's value replaced, and the entity tag of
/// a conditional request's target filled in for comparison.
fn dated(mut answer: Answer) -> Answer {
    for (name, value) in &mut answer.fields {
        if name == "date" {
            common::assert_recent_date(value);
            *value = "{date}".into();
        }
    }
    answer
}

/// Sends `method target` with `fields` and `body` over HTTP/1.1, on a
/// connection of its own.
fn over_http11(server: &Server, tls: Option<&Arc<rustls::ClientConfig>>, request: &Sent) -> Answer {
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
    let head_only = *method == "HEAD";
    let response = match tls {
        None => {
            let mut client = Client::connect(server.local_addr());
            client.send(&bytes);
            client.response(head_only)
        }
        Some(config) => {
            let mut client = common::tls::connect(server.local_addr(), config);
            client.send(&bytes);
            client.response(head_only)
        }
    };
    dated(answer_of_http11(&response, head_only))
}

fn over_http2(client: &mut H2Client, scheme: &str, request: &Sent) -> Answer {
    let (method, target, fields, body) = request;
    let mut builder = http::Request::builder()
        .method(*method)
        .uri(format!("{scheme}://localhost{target}"));
    for (name, value) in fields {
        builder = builder.header(*name, value);
    }
    dated(client.request(builder.body(()).unwrap(), body))
}

/// Every route, both ways, on one server: the answers are the same.
fn every_route_answers_as_over_http11(dispatch: Dispatch, tls: bool) {
    let name = format!("routes-{}-{tls}", dispatch.name());
    let certificates = Certificates::new(&name);
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
        tls: tls.then(|| certificates.files.clone()),
        max_body: 2048,
        headers: vec![("X-Frame-Options".into(), "DENY".into())],
        ..with_upstream(dispatch, upstream.addr)
    };
    let server = start_with(&config, routes(&www, Arc::default()));
    let client_tls = client_config(&certificates.ca, &[&rustls::version::TLS13]);
    let mut h2_tls = (*client_tls).clone();
    h2_tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let h2_tls = Arc::new(h2_tls);
    let (mut h2, scheme) = match tls {
        true => (H2Client::tls(server.local_addr(), &h2_tls), "https"),
        false => (H2Client::plain(server.local_addr()), "http"),
    };
    for request in requests() {
        let expected = over_http11(&server, tls.then_some(&client_tls), &request);
        let got = over_http2(&mut h2, scheme, &request);
        assert_eq!(got, expected, "{} {}", request.0, request.1);
    }
}

fn every_route_answers_as_over_http11_h2c(dispatch: Dispatch) {
    every_route_answers_as_over_http11(dispatch, false);
}

fn every_route_answers_as_over_http11_tls(dispatch: Dispatch) {
    every_route_answers_as_over_http11(dispatch, true);
}

/// A stream whose actor holds its request holds no other stream: the
/// others are answered meanwhile, and it is answered once let go.
fn a_slow_actor_holds_no_other_stream(dispatch: Dispatch) {
    let dir = std::env::temp_dir().join(format!(
        "h2-slow-{}-{}",
        std::process::id(),
        dispatch.name()
    ));
    site(&dir);
    let held = Arc::new(Mutex::new(Vec::new()));
    let server = start_with(&config(dispatch), routes(&dir, Arc::clone(&held)));
    let mut client = H2Client::plain(server.local_addr());
    let get = |path: &str| {
        http::Request::builder()
            .uri(format!("http://localhost{path}"))
            .body(())
            .unwrap()
    };
    let slow: Vec<_> = (0..3)
        .map(|n| client.send_only(get(&format!("/slow/{n}")), b""))
        .collect();
    // Answered while the three wait.
    for _ in 0..5 {
        let answer = client.request(get("/"), b"");
        assert_eq!((answer.status, &answer.body[..]), (200, &b"hello\n"[..]));
    }
    let big = client.request(get("/big.bin"), b"");
    assert_eq!(big.body.len(), 1 << 20);
    // Each actor call is in by now (each stream's request was whole before
    // the next was sent); let them go.
    let deadline = std::time::Instant::now() + common::IO_TIMEOUT;
    while held.lock().unwrap().len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the gate has its requests"
        );
        std::thread::yield_now();
    }
    server.send("gate", Envelope::of("release")).unwrap();
    for (n, pending) in slow.into_iter().enumerate() {
        let answer = client.answer(pending);
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, format!("released /slow/{n}").into_bytes());
    }
    let _ = fs::remove_dir_all(&dir);
}

/// With `--http2 off`, the preface is what it was before HTTP/2: a
/// request line of version 2.0, answered 505; and ALPN offers only
/// `http/1.1`.
fn off_means_http11_only(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("h2off-{}", dispatch.name()));
    let plain = start_with(
        &Config {
            http2: false,
            ..config(dispatch)
        },
        Routes::standard(),
    );
    let mut client = Client::connect(plain.local_addr());
    client.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    let response = common::text(&client.rest_until_close());
    assert!(
        response.starts_with("HTTP/1.1 505 HTTP Version Not Supported\r\n"),
        "{response}"
    );
    let tls = start_with(
        &Config {
            http2: false,
            tls: Some(certificates.files.clone()),
            ..config(dispatch)
        },
        Routes::standard(),
    );
    let mut offer = (*certificates.client_config()).clone();
    offer.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let client = common::tls::connect(tls.local_addr(), &Arc::new(offer));
    assert_eq!(client.stream.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
}

in_both_modes!(
    every_route_answers_as_over_http11_h2c,
    every_route_answers_as_over_http11_tls,
    a_slow_actor_holds_no_other_stream,
    off_means_http11_only,
);

/// A drain sends GOAWAY naming the last stream taken; the streams in
/// flight are answered, then the connection ends.
fn a_drain_sends_goaway_and_finishes_the_streams_in_flight(dispatch: Dispatch) {
    let dir = std::env::temp_dir().join(format!(
        "h2-drain-{}-{}",
        std::process::id(),
        dispatch.name()
    ));
    site(&dir);
    let held = Arc::new(Mutex::new(Vec::new()));
    let server = start_with(&config(dispatch), routes(&dir, Arc::clone(&held)));
    let addr = server.local_addr();
    let mut client = H2Client::plain(addr);
    let get = |path: &str| {
        http::Request::builder()
            .uri(format!("http://localhost{path}"))
            .body(())
            .unwrap()
    };
    let pending = client.send_only(get("/slow/last"), b"");
    client.drive_until(|| !held.lock().unwrap().is_empty());
    // The drain begins with the stream in flight; the gate lets it go.
    let releaser = std::thread::spawn({
        let held = Arc::clone(&held);
        move || {
            // The gate's requests answered from this thread, as the drain
            // runs.
            for request in held.lock().unwrap().drain(..) {
                request.respond(ActorResponse::text("released in the drain"));
            }
        }
    });
    let stopping = std::thread::spawn(move || server.shutdown(Duration::from_secs(10)));
    releaser.join().unwrap();
    let answer = client.answer(pending);
    assert_eq!(
        (answer.status, &answer.body[..]),
        (200, &b"released in the drain"[..])
    );
    assert!(stopping.join().unwrap(), "the drain finished in time");
    let _ = fs::remove_dir_all(&dir);
}

/// The access log says `HTTP/2.0`, with each stream's own status and
/// bytes.
fn the_access_log_says_http2(dispatch: Dispatch) {
    let dir =
        std::env::temp_dir().join(format!("h2-log-{}-{}", std::process::id(), dispatch.name()));
    site(&dir);
    let log = dir.join("access.log");
    let server = start_with(
        &Config {
            access_log: Some(uppercut_mio_server::AccessLogTarget::File(log.clone())),
            log_name: Some("h2".into()),
            ..config(dispatch)
        },
        routes(&dir, Arc::default()),
    );
    let mut client = H2Client::plain(server.local_addr());
    for path in ["/", "/a.txt", "/nowhere"] {
        let request = http::Request::builder()
            .uri(format!("http://localhost{path}"))
            .header("user-agent", "h2-test")
            .body(())
            .unwrap();
        client.request(request, b"");
    }
    drop(server);
    let lines = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    for (line, (path, status, bytes)) in
        lines
            .iter()
            .zip([("/", 200, 6), ("/a.txt", 200, 6), ("/nowhere", 404, 14)])
    {
        let expected =
            format!("\"GET {path} HTTP/2.0\" {status} {bytes} \"-\" \"h2-test\" server=h2");
        assert!(line.ends_with(&expected), "{line} / {expected}");
    }
    let _ = fs::remove_dir_all(&dir);
}

in_both_modes!(
    a_drain_sends_goaway_and_finishes_the_streams_in_flight,
    the_access_log_says_http2,
);

/// With `--http2 only`, a plain listener speaks HTTP/2 alone: h2c is
/// served, and a connection that opens with anything else is closed with
/// nothing sent (RFC 9113 §3.4).
fn only_means_h2c_alone_on_plain_listeners(dispatch: Dispatch) {
    let server = start_with(
        &Config {
            http2_only: true,
            ..config(dispatch)
        },
        Routes::standard(),
    );
    let mut h1 = Client::connect(server.local_addr());
    h1.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    h1.assert_closed();
    let mut h2 = H2Client::plain(server.local_addr());
    let request = http::Request::builder()
        .uri("http://localhost/")
        .body(())
        .unwrap();
    let answer = h2.request(request, b"");
    assert_eq!((answer.status, &answer.body[..]), (200, &b"hello\n"[..]));
}

/// A TLS client that chose `h2` by ALPN speaks HTTP/2 from its first byte
/// (RFC 9113 §3.3): HTTP/1.1 sent on it is a broken preface, which ends
/// the connection after the server's SETTINGS; it is never served as
/// HTTP/1.1.
fn alpn_h2_binds_the_connection_to_http2(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("h2alpn-{}", dispatch.name()));
    let server = start_with(
        &Config {
            tls: Some(certificates.files.clone()),
            ..config(dispatch)
        },
        Routes::standard(),
    );
    let mut offer = (*certificates.client_config()).clone();
    offer.alpn_protocols = vec![b"h2".to_vec()];
    let mut client = common::tls::connect(server.local_addr(), &Arc::new(offer));
    assert_eq!(client.stream.conn.alpn_protocol(), Some(&b"h2"[..]));
    client.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let reply = client.rest_until_close();
    // Whole frames: (type, stream, payload).
    let mut frames = Vec::new();
    let mut rest = &reply[..];
    while !rest.is_empty() {
        assert!(rest.len() >= 9, "a cut frame header in {reply:?}");
        let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        assert!(rest.len() >= 9 + len, "a cut frame in {reply:?}");
        let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]);
        frames.push((rest[3], stream, rest[9..9 + len].to_vec()));
        rest = &rest[9 + len..];
    }
    // The server's SETTINGS, then the end (a GOAWAY may be left out after
    // a broken preface, §3.4), with close_notify: the client's read above
    // ends cleanly, not at a cut.
    let kinds: Vec<(u8, u32)> = frames
        .iter()
        .map(|&(kind, stream, _)| (kind, stream))
        .collect();
    assert_eq!(kinds, [(0x4, 0)], "{frames:?}");
}

/// A request whose first bytes could begin the HTTP/2 preface ("P" of
/// `POST`, `PUT`, `PATCH`), arriving a piece at a time, is served whole:
/// the bytes kept while the preface was in doubt go first.
fn bytes_kept_while_the_preface_is_in_doubt_are_served(dispatch: Dispatch) {
    let routes = Routes::standard().handler(&[Method::Post], "/echo", |request, response| {
        response.body(request.body());
    });
    let server = start_with(&config(dispatch), routes);
    let request = b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi";
    let mut whole = Client::connect(server.local_addr());
    whole.send(request);
    let expected = whole.response(false);
    for cut in [1, 2, 3] {
        let mut pieces = Client::connect(server.local_addr());
        pieces.stream.set_nodelay(true).unwrap();
        pieces.send(&request[..1]);
        common::wait_until_server_read(&pieces.stream);
        if cut > 1 {
            pieces.send(&request[1..cut]);
            common::wait_until_server_read(&pieces.stream);
        }
        pieces.send(&request[cut..]);
        let answer = pieces.response(false);
        let without_date = |bytes: &[u8]| {
            common::text(bytes)
                .lines()
                .filter(|line| !line.starts_with("Date: "))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(
            without_date(&answer),
            without_date(&expected),
            "cut at {cut}"
        );
        assert!(answer.starts_with(b"HTTP/1.1 200 OK\r\n") && answer.ends_with(b"\r\n\r\nhi"));
    }
}

in_both_modes!(
    only_means_h2c_alone_on_plain_listeners,
    bytes_kept_while_the_preface_is_in_doubt_are_served,
    alpn_h2_binds_the_connection_to_http2,
);
