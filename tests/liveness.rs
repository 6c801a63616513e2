//! Nothing waits for a poller's timeout. A poller blocks in `poll` for up to
//! its sweep interval; here that interval is an hour, far beyond the client's
//! read timeout, so every exchange below passes only if each envelope reaches
//! an actor without waiting for a blocked poller to wake by itself: a lone
//! request, a fresh connection, `Connection: close`, `/io` (whose request
//! goes from the connection actor to the poller and back), and a graceful
//! shutdown (whose `Closed` notices go to the poller).

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use common::upstream::with_upstream;
use common::{assert_response, config, start_with, Client, HELLO, HELLO_CLOSE};
use uppercut_mio_server::config::Timeouts;
use uppercut_mio_server::{Config, Dispatch, Routes};

const BODY: &str = r#"{"ok": true}"#;
const IO_RESPONSE: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: application/json\r\nContent-Length: 12\r\nDate: {date}\r\n\r\n{\"ok\": true}";
const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

/// Pollers that block in `poll` for an hour when nothing happens.
fn sleepy(dispatch: Dispatch) -> Config {
    Config {
        timeouts: Timeouts {
            sweep: Duration::from_secs(3600),
            ..Timeouts::default()
        },
        ..config(dispatch)
    }
}

/// An upstream that answers every request on a connection with `BODY`.
fn upstream() -> SocketAddr {
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    common::upstream::spawn(move |stream| stream.write_all(answer.as_bytes()).is_ok()).addr
}

fn answers_lone_requests_and_fresh_connections(dispatch: Dispatch) {
    let server = start_with(&sleepy(dispatch), Routes::standard());
    for _ in 0..3 {
        let mut client = Client::connect(server.local_addr());
        for _ in 0..3 {
            client.send(GET);
            assert_response(&client.response(false), HELLO);
        }
    }
}

fn answers_and_closes_connection_close(dispatch: Dispatch) {
    let server = start_with(&sleepy(dispatch), Routes::standard());
    for _ in 0..3 {
        let mut client = Client::connect(server.local_addr());
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        assert_response(&client.response(false), HELLO_CLOSE);
        client.assert_closed();
    }
}

fn answers_through_the_upstream(dispatch: Dispatch) {
    let config = Config {
        timeouts: sleepy(dispatch).timeouts,
        ..with_upstream(dispatch, upstream())
    };
    let server = start_with(&config, Routes::standard());
    let mut client = Client::connect(server.local_addr());
    // Enough round trips that an `/io` request queued behind a poller that
    // went back to `poll` is all but certain to happen if it can.
    for _ in 0..500 {
        client.send(b"GET /io HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_response(&client.response(false), IO_RESPONSE);
    }
}

fn drains_on_shutdown(dispatch: Dispatch) {
    let server = start_with(&sleepy(dispatch), Routes::standard());
    let mut idle = Client::connect(server.local_addr());
    idle.send(GET);
    assert_response(&idle.response(false), HELLO);
    // The grace period is far shorter than the sweep: the drain must not
    // need a sweep to see its connections close.
    assert!(server.shutdown(Duration::from_secs(15)), "drain timed out");
    idle.assert_closed();
}

in_both_modes!(
    answers_lone_requests_and_fresh_connections,
    answers_and_closes_connection_close,
    answers_through_the_upstream,
    drains_on_shutdown,
);
