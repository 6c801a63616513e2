//! GET /io through the upstream pool, against an upstream server started in
//! the test, in both dispatch modes.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::upstream::{with_upstream, Upstream};
use common::{
    assert_response, config, error_response, error_with_cause, exchange, start_with, text, Client,
};
use uppercut_mio_server::{Config, Dispatch, Routes, Server};

const BODY: &str = r#"{"status": 200, "msg": "Good Luck!"}"#;
const IO_RESPONSE: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: application/json\r\nContent-Length: 36\r\nDate: {date}\r\n\r\n\
    {\"status\": 200, \"msg\": \"Good Luck!\"}";
const GET_IO: &[u8] = b"GET /io HTTP/1.1\r\nHost: t\r\n\r\n";

/// How the test upstream answers each request.
#[derive(Clone)]
enum Behaviour {
    Sized(&'static str),
    Chunked(&'static str),
    /// Answers, then closes the connection without saying so.
    SizedThenClose(&'static str),
    /// Answers only after this long.
    Slow(Duration),
    /// Answers each request once the test sends a token.
    Gated(Arc<Mutex<mpsc::Receiver<()>>>),
}

fn upstream(behaviour: Behaviour) -> Upstream {
    common::upstream::spawn(move |stream| answer(stream, &behaviour))
}

/// Answers one request as `behaviour` says; false once the connection is done.
fn answer(stream: &mut TcpStream, behaviour: &Behaviour) -> bool {
    let answer = match behaviour {
        Behaviour::Sized(body) | Behaviour::SizedThenClose(body) => {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        }
        Behaviour::Chunked(body) => {
            let (a, b) = body.split_at(body.len() / 2);
            format!(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
                a.len(),
                b.len()
            )
        }
        Behaviour::Slow(delay) => {
            thread::sleep(*delay);
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{BODY}",
                BODY.len()
            )
        }
        Behaviour::Gated(gate) => {
            let _ = gate.lock().unwrap().recv();
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{BODY}",
                BODY.len()
            )
        }
    };
    stream.write_all(answer.as_bytes()).is_ok()
        && !matches!(behaviour, Behaviour::SizedThenClose(_))
}

fn start_for(config: &Config) -> Server {
    start_with(config, Routes::standard())
}

fn round_trips_the_json(dispatch: Dispatch) {
    for behaviour in [Behaviour::Sized(BODY), Behaviour::Chunked(BODY)] {
        let upstream = upstream(behaviour);
        let server = start_for(&with_upstream(dispatch, upstream.addr));
        assert_response(
            &exchange(&server, "GET /io HTTP/1.1\r\nHost: t\r\n\r\n"),
            IO_RESPONSE,
        );
        let head = exchange(&server, "HEAD /io HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_response(&head, IO_RESPONSE.strip_suffix(BODY).unwrap());
    }
}

fn reuses_pooled_connections(dispatch: Dispatch) {
    let upstream = upstream(Behaviour::Sized(BODY));
    let server = start_for(&with_upstream(dispatch, upstream.addr));
    let mut client = Client::connect(server.local_addr());
    for _ in 0..1000 {
        client.send(GET_IO);
        assert_response(&client.response(false), IO_RESPONSE);
    }
    // One client connection lives on one poller, whose pool keeps one
    // upstream connection alive for all of its requests.
    assert_eq!(upstream.accepted.load(Ordering::Relaxed), 1);
}

fn replaces_connections_the_upstream_closes(dispatch: Dispatch) {
    let upstream = upstream(Behaviour::SizedThenClose(BODY));
    let server = start_for(&with_upstream(dispatch, upstream.addr));
    let mut client = Client::connect(server.local_addr());
    for _ in 0..20 {
        client.send(GET_IO);
        assert_response(&client.response(false), IO_RESPONSE);
    }
    assert_eq!(upstream.accepted.load(Ordering::Relaxed), 20);
}

fn answers_502_when_the_upstream_is_down(dispatch: Dispatch) {
    let (_bound, closed) = common::upstream::refusing();
    let server = start_for(&with_upstream(dispatch, closed));
    let mut client = Client::connect(server.local_addr());
    client.send(GET_IO);
    assert_response(
        &client.response(false),
        &error_with_cause(502, "Bad Gateway", "upstream refused the connection", false),
    );
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(client.response(false).starts_with(b"HTTP/1.1 200 OK\r\n"));
}

fn answers_502_for_a_body_that_is_not_json(dispatch: Dispatch) {
    let upstream = upstream(Behaviour::Sized("{\"unterminated\": "));
    let server = start_for(&with_upstream(dispatch, upstream.addr));
    let response = exchange(&server, "GET /io HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(
        &response,
        &error_with_cause(502, "Bad Gateway", "upstream answer is not JSON", false),
    );
}

fn answers_504_when_the_upstream_is_slow(dispatch: Dispatch) {
    let upstream = upstream(Behaviour::Slow(Duration::from_secs(3)));
    let mut config = with_upstream(dispatch, upstream.addr);
    if let Some(upstream) = &mut config.upstream {
        upstream.timeout = Duration::from_millis(300);
    }
    let server = start_for(&config);
    let mut client = Client::connect(server.local_addr());
    client.send(GET_IO);
    assert_response(
        &client.response(false),
        &error_with_cause(504, "Gateway Timeout", "upstream timed out", false),
    );
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(client.response(false).starts_with(b"HTTP/1.1 200 OK\r\n"));
}

fn keeps_pipelined_responses_in_order(dispatch: Dispatch) {
    let upstream = upstream(Behaviour::Sized(BODY));
    let server = start_for(&with_upstream(dispatch, upstream.addr));
    let mut client = Client::connect(server.local_addr());
    let batch =
        "GET /io HTTP/1.1\r\nHost: t\r\n\r\nGET /json HTTP/1.1\r\nHost: t\r\n\r\n".repeat(20);
    client.send(batch.as_bytes());
    for _ in 0..20 {
        assert_response(&client.response(false), IO_RESPONSE);
        let json = text(&client.response(false));
        assert!(json.ends_with("{\"message\":\"Hello, World!\"}"), "{json}");
    }
}

/// One upstream connection, a queue of one, and an upstream that answers only
/// when told: the first request takes the connection, of the next two one
/// waits in the queue and the other is turned away with 503 at once.
fn answers_503_when_the_queue_is_full(dispatch: Dispatch) {
    let (open_gate, gate) = mpsc::channel();
    let upstream = upstream(Behaviour::Gated(Arc::new(Mutex::new(gate))));
    let mut config = Config {
        pollers: 1,
        ..with_upstream(dispatch, upstream.addr)
    };
    if let Some(upstream) = &mut config.upstream {
        upstream.conns = 1;
        upstream.queue = 1;
    }
    let server = start_for(&config);
    let (answers, answered) = mpsc::channel();
    let mut first = Client::connect(server.local_addr());
    first.send(GET_IO);
    for _ in 0..2 {
        let answers = answers.clone();
        let mut client = Client::connect(server.local_addr());
        thread::spawn(move || {
            client.send(GET_IO);
            answers.send(client.response(false)).unwrap();
        });
    }
    // Nothing can answer 200 before the gate opens, so the first answer is the 503.
    assert_response(
        &answered.recv().unwrap(),
        &error_with_cause(503, "Service Unavailable", "upstream queue full", false),
    );
    open_gate.send(()).unwrap();
    open_gate.send(()).unwrap();
    assert_response(&first.response(false), IO_RESPONSE);
    assert_response(&answered.recv().unwrap(), IO_RESPONSE);
}

fn io_is_not_found_without_an_upstream(dispatch: Dispatch) {
    let server = start_with(&config(dispatch), Routes::standard());
    let response = exchange(&server, "GET /io HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(
        &response,
        &error_response(404, "Not Found", "", false, false),
    );
}

in_both_modes!(
    round_trips_the_json,
    reuses_pooled_connections,
    replaces_connections_the_upstream_closes,
    answers_502_when_the_upstream_is_down,
    answers_502_for_a_body_that_is_not_json,
    answers_504_when_the_upstream_is_slow,
    keeps_pipelined_responses_in_order,
    answers_503_when_the_queue_is_full,
    io_is_not_found_without_an_upstream,
);
