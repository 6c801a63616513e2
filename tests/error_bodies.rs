//! `Routes::error_body` over real sockets, in both dispatch modes: every
//! error the server writes itself gets the application's body (404, 405
//! with each path's `Allow`, 426, a malformed request's 400, 413, a static
//! file's 416, an actor's 502 and 504, `/io`'s 502 with its cause, plain
//! HTTP on the TLS port), and so does every rejection, with its cause; the
//! fields the status calls for stay the server's, an HTTP/2 stream gets the
//! same bytes, and a body that cannot be sent refuses the table at start.

mod common;

use std::fs;
use std::io::{ErrorKind, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::h2client::{answer_of_http11, H2Client};
use common::tls::Certificates;
use common::upstream::{spawn, with_upstream};
use common::{assert_response, config, start_with, Client};
use serde::Serialize;
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    ActorRequest, ActorResponse, Config, Dispatch, Method, Rejection, Routes, Server, ServerError,
};

/// The application's error body: RFC 9457's problem details.
#[derive(Serialize)]
struct Problem<'a> {
    status: u16,
    title: &'static str,
    detail: Option<&'a str>,
}

fn problem(error: &ServerError<'_>) -> (&'static str, String) {
    let problem = Problem {
        status: error.status(),
        title: error.reason(),
        detail: error.cause(),
    };
    let body = serde_json::to_string(&problem).expect("a problem serializes");
    ("application/problem+json", body)
}

/// The response with the problem body for `code reason` and `detail`,
/// `extra` fields (each line ending CRLF) before the length, closing the
/// connection or not, without the body for HEAD.
fn expected(
    code: u16,
    reason: &str,
    extra: &str,
    detail: Option<&str>,
    closes: bool,
    head_only: bool,
) -> String {
    let detail = match detail {
        Some(detail) => serde_json::to_string(detail).unwrap(),
        None => "null".to_string(),
    };
    let body = format!(r#"{{"status":{code},"title":"{reason}","detail":{detail}}}"#);
    let connection = if closes { "Connection: close\r\n" } else { "" };
    format!(
        "HTTP/1.1 {code} {reason}\r\nServer: uppercut-mio-server\r\n\
         Content-Type: application/problem+json\r\n{extra}Content-Length: {}\r\n\
         Date: {{date}}\r\n{connection}\r\n{}",
        body.len(),
        if head_only { "" } else { &body }
    )
}

/// Holds every request it gets, unanswered, until the test drops them;
/// drops at once a request for `/drop`.
struct Holder(Arc<Mutex<Vec<ActorRequest>>>);

impl AnyActor for Holder {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            if request.request().path() != "/drop" {
                self.0.lock().unwrap().push(*request);
            }
        }
    }
}

/// Refuses every request: 409 with a cause.
struct Refuser;

impl AnyActor for Refuser {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            request.respond(ActorResponse::rejection(Rejection::new(409, "taken")));
        }
    }
}

/// Routes before the hook and after it: the hook covers both.
fn routes(held: &Arc<Mutex<Vec<ActorRequest>>>) -> Routes {
    Routes::new()
        .handler(&[Method::Post], "/before", |_, response| {
            response.body(b"ok")
        })
        .error_body(problem)
        .json_handler(&[Method::Post], "/greet", |request| {
            let body: serde_json::Value = request.json()?;
            Ok(body)
        })
        .handler(&[Method::Get, Method::Delete], "/private", |_, response| {
            response.reject(Rejection::new(401, "sign in first"));
            let _ = response.header("WWW-Authenticate", "Bearer");
        })
        .blocking_handler(&[Method::Get], "/blocking", |request, response| {
            match request.query_params::<std::collections::HashMap<String, u8>>() {
                Ok(_) => response.body(b"ok"),
                Err(rejection) => response.reject(rejection),
            }
        })
        .actor(&[Method::Get], "/refuse", "refuser")
        .spawn("refuser", Refuser)
        .reply_timeout(Duration::from_millis(300))
        .actor(&[Method::Get], "/hold", "holder")
        .actor(&[Method::Get], "/drop", "holder")
        .spawn("holder", Holder(Arc::clone(held)))
        .websocket("/ws", |_| Silent)
}

struct Silent;

impl uppercut_mio_server::WebSocket for Silent {
    fn on_message(
        &mut self,
        _message: uppercut_mio_server::Message<'_>,
        _context: &mut uppercut_mio_server::WsContext<'_>,
    ) {
    }
}

fn start(config: &Config) -> (Server, Arc<Mutex<Vec<ActorRequest>>>) {
    let held = Arc::new(Mutex::new(Vec::new()));
    (start_with(config, routes(&held)), held)
}

fn exchange(client: &mut Client, request: &str) -> Vec<u8> {
    client.send(request.as_bytes());
    client.response(request.starts_with("HEAD "))
}

fn errors_without_a_cause_get_the_applications_body(dispatch: Dispatch) {
    let (server, _held) = start(&config(dispatch));
    let mut client = Client::connect(server.local_addr());
    let cases = [
        (
            "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n",
            expected(404, "Not Found", "", None, false, false),
        ),
        (
            "HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\n",
            expected(404, "Not Found", "", None, false, true),
        ),
        (
            "GET /before HTTP/1.1\r\nHost: t\r\n\r\n",
            expected(
                405,
                "Method Not Allowed",
                "Allow: POST\r\n",
                None,
                false,
                false,
            ),
        ),
        (
            "POST /private HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n",
            expected(
                405,
                "Method Not Allowed",
                "Allow: GET, HEAD, DELETE\r\n",
                None,
                false,
                false,
            ),
        ),
        (
            "GET /ws HTTP/1.1\r\nHost: t\r\n\r\n",
            expected(
                426,
                "Upgrade Required",
                "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n",
                None,
                false,
                false,
            ),
        ),
    ];
    for (request, expected) in cases {
        assert_response(&exchange(&mut client, request), &expected);
    }
    // A malformed request: the 400, and the end.
    let answer = exchange(&mut client, "GET / HTTP/1.1\r\n\r\n");
    assert_response(
        &answer,
        &expected(400, "Bad Request", "", None, true, false),
    );
    client.assert_closed();
}

fn past_the_body_limit_the_413_is_the_applications(dispatch: Dispatch) {
    let config = Config {
        max_body: 4,
        ..config(dispatch)
    };
    let (server, _held) = start(&config);
    let mut client = Client::connect(server.local_addr());
    let request = "POST /greet HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello";
    let expected = expected(413, "Payload Too Large", "", None, true, false);
    assert_response(&exchange(&mut client, request), &expected);
}

fn rejections_and_failures_say_why(dispatch: Dispatch) {
    let (server, held) = start(&config(dispatch));
    let mut client = Client::connect(server.local_addr());
    let wrong_type = "POST /greet HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n\
        Content-Length: 2\r\n\r\n{}";
    let cause = r#"expected Content-Type: application/json, got "text/plain""#;
    let cases = [
        (
            wrong_type,
            expected(415, "Unsupported Media Type", "", Some(cause), false, false),
        ),
        (
            "GET /private HTTP/1.1\r\nHost: t\r\n\r\n",
            expected(
                401,
                "Unauthorized",
                "WWW-Authenticate: Bearer\r\n",
                Some("sign in first"),
                false,
                false,
            ),
        ),
        (
            "GET /blocking?a=300 HTTP/1.1\r\nHost: t\r\n\r\n",
            expected(
                400,
                "Bad Request",
                "",
                Some("query string: number too large to fit in target type"),
                false,
                false,
            ),
        ),
        (
            "GET /refuse HTTP/1.1\r\nHost: t\r\n\r\n",
            expected(409, "Conflict", "", Some("taken"), false, false),
        ),
        // Dropped unanswered, and not answered in time.
        (
            "GET /drop HTTP/1.1\r\nHost: t\r\n\r\n",
            expected(502, "Bad Gateway", "", None, false, false),
        ),
        (
            "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n",
            expected(504, "Gateway Timeout", "", None, false, false),
        ),
    ];
    for (request, expected) in cases {
        assert_response(&exchange(&mut client, request), &expected);
    }
    held.lock().unwrap().clear();
}

fn upstream_failures_say_why(dispatch: Dispatch) {
    let upstream = spawn(|stream| {
        let answer = b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n";
        stream.write_all(answer).is_ok()
    });
    let held = Arc::new(Mutex::new(Vec::new()));
    let server = start_with(&with_upstream(dispatch, upstream.addr), routes(&held));
    let mut client = Client::connect(server.local_addr());
    let detail = Some("upstream status 500");
    let answer = exchange(&mut client, "GET /io HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(
        &answer,
        &expected(502, "Bad Gateway", "", detail, false, false),
    );
    let answer = exchange(&mut client, "HEAD /io HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(
        &answer,
        &expected(502, "Bad Gateway", "", detail, false, true),
    );
}

fn a_static_files_416_is_the_applications(dispatch: Dispatch) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "error-bodies-{}-{}",
        dispatch.name(),
        std::process::id()
    ));
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("a.txt"), "hello").unwrap();
    let config = Config {
        static_dir: Some(dir.clone()),
        ..config(dispatch)
    };
    let (server, _held) = start(&config);
    let mut client = Client::connect(server.local_addr());
    let request = "GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=10-\r\n\r\n";
    let extra = "Accept-Ranges: bytes\r\nContent-Range: bytes */5\r\n";
    let expected = expected(416, "Range Not Satisfiable", extra, None, false, false);
    assert_response(&exchange(&mut client, request), &expected);
    drop(server);
    let _ = fs::remove_dir_all(&dir);
}

/// A request: method, target, fields and body.
type Sent<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a [u8]);

/// HTTP/2 streams are answered by the HTTP/1.1 code: the same bodies.
fn http2_gets_the_same_bodies(dispatch: Dispatch) {
    let (server, _held) = start(&config(dispatch));
    let mut h2 = H2Client::plain(server.local_addr());
    let mut client = Client::connect(server.local_addr());
    let requests: [Sent; 3] = [
        ("GET", "/nope", &[], b""),
        ("GET", "/private", &[], b""),
        ("POST", "/greet", &[("content-type", "text/plain")], b"{}"),
    ];
    for (method, target, fields, body) in requests {
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("http://localhost{target}"));
        let mut http11 = format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\n");
        for (name, value) in fields {
            request = request.header(*name, *value);
            http11.push_str(&format!("{name}: {value}\r\n"));
        }
        if !body.is_empty() {
            http11.push_str(&format!("content-length: {}\r\n", body.len()));
        }
        http11.push_str("\r\n");
        http11.push_str(std::str::from_utf8(body).unwrap());
        let mut over_h2 = h2.request(request.body(()).unwrap(), body);
        let mut over_h1 = answer_of_http11(&exchange(&mut client, &http11), false);
        for answer in [&mut over_h2, &mut over_h1] {
            answer.fields.retain(|(name, _)| name != "date");
        }
        assert_eq!(over_h2, over_h1, "{method} {target}");
        assert_eq!(
            over_h2.field("content-type"),
            Some("application/problem+json")
        );
    }
}

fn plain_http_on_the_tls_port(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("error-bodies-{}", dispatch.name()));
    let config = Config {
        tls: Some(certificates.files.clone()),
        ..config(dispatch)
    };
    let (server, _held) = start(&config);
    let mut plain = Client::connect(server.local_addr());
    plain.send(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let detail = Some("a plain HTTP request was sent to an HTTPS port");
    let expected = expected(400, "Bad Request", "", detail, true, false);
    assert_response(&plain.rest_until_close(), &expected);
}

in_both_modes!(
    errors_without_a_cause_get_the_applications_body,
    past_the_body_limit_the_413_is_the_applications,
    rejections_and_failures_say_why,
    upstream_failures_say_why,
    a_static_files_416_is_the_applications,
    http2_gets_the_same_bodies,
    plain_http_on_the_tls_port,
);

/// A content type that cannot go in a field refuses the table at start,
/// naming the hook and the status, rather than sending it.
#[test]
fn a_body_that_cannot_be_sent_refuses_the_table() {
    let routes = Routes::new().error_body(|_| ("text/plain\r\nX-Injected: 1", "no"));
    let refused = Server::start(&config(Dispatch::Local), routes).err();
    let refused = refused.expect("the server refuses the table");
    assert_eq!(refused.kind(), ErrorKind::InvalidInput);
    assert!(
        refused
            .to_string()
            .starts_with("Routes::error_body: the body of a 400:"),
        "{refused}"
    );
}
