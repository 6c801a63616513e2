//! Timeouts, the connection limit, panics and graceful shutdown, over real
//! sockets, in both dispatch modes. The timeout a case waits for is short
//! (300 ms) and the other kinds are a minute, so a connection closed by the
//! wrong kind fails the case; the poller sweeps once a second, so each case
//! takes one to two seconds.

mod common;

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use common::{
    assert_response, config, pipeline_from_thread, read_until_closed, slow_reader, start_with,
    text, v1_user, wait_until_peer_closes, Client, HELLO,
};
use uppercut_mio_server::config::Timeouts;
use uppercut_mio_server::{Config, Dispatch, Routes};

const TIMEOUT_408: &str = "HTTP/1.1 408 Request Timeout\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 20\r\nDate: {date}\r\n\
    Connection: close\r\n\r\n408 Request Timeout\n";
/// The timeout a test waits for.
const SHORT: Duration = Duration::from_millis(300);
/// The timeouts a test does not wait for: longer than the client's read
/// timeout (20 s), so a connection closed by one of them fails the test.
const LONG: Duration = Duration::from_secs(60);

/// Only the timeout of `short` is short; each kind is set apart, so a test
/// also fails when the wrong kind closes the connection.
fn timeouts(dispatch: Dispatch, short: fn(&mut Timeouts) -> &mut Duration) -> Config {
    let mut timeouts = Timeouts {
        header: LONG,
        keepalive: LONG,
        write: LONG,
        ..Timeouts::default()
    };
    *short(&mut timeouts) = SHORT;
    Config {
        timeouts,
        ..config(dispatch)
    }
}

fn hello_works(client: &mut Client) {
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(&client.response(false), HELLO);
}

const GET_USER: &str = "GET /v1/user HTTP/1.1\r\nHost: t\r\n\r\n";

fn answers_408_to_a_head_that_never_completes(dispatch: Dispatch) {
    let server = start_with(&timeouts(dispatch, |t| &mut t.header), Routes::standard());
    let mut slowloris = Client::connect(server.local_addr());
    slowloris.send(b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ");
    assert_response(&read_until_closed(&mut slowloris.stream), TIMEOUT_408);

    let mut silent = Client::connect(server.local_addr());
    assert_response(&read_until_closed(&mut silent.stream), TIMEOUT_408);
}

fn closes_idle_keep_alive_connections(dispatch: Dispatch) {
    let server = start_with(
        &timeouts(dispatch, |t| &mut t.keepalive),
        Routes::standard(),
    );
    let mut client = Client::connect(server.local_addr());
    hello_works(&mut client);
    assert_eq!(read_until_closed(&mut client.stream), b"");
}

/// The client sends far more requests than the socket buffers between it
/// and the server hold, and reads nothing until the server closes.
fn closes_a_client_that_stops_reading(dispatch: Dispatch) {
    let server = start_with(&timeouts(dispatch, |t| &mut t.write), Routes::standard());
    let mut client = slow_reader(server.local_addr());
    // 17 MB of requests: past what loopback buffers hold (a few MiB each
    // way), so the writer is still blocked when the server closes.
    let writing = pipeline_from_thread(&client, GET_USER, 500_000);
    wait_until_peer_closes(&client.stream);
    let received = read_until_closed(&mut client.stream);
    // What did arrive is whole responses, then at most part of one.
    let user = v1_user();
    let date_at = user.find("{date}").unwrap();
    let mut rest = &received[..];
    let mut whole = 0;
    while !rest.is_empty() {
        let date = rest
            .get(date_at..rest.len().min(date_at + 29))
            .unwrap_or(b"");
        let one = user.replace("{date}", &text(date));
        let len = one.len().min(rest.len());
        assert!(
            rest[..len] == one.as_bytes()[..len],
            "response {whole} differs: {:?}",
            text(&rest[..len])
        );
        rest = &rest[len..];
        whole += 1;
    }
    assert!(
        whole < 500_000,
        "{whole} responses to a client that read nothing"
    );
    // The close is a close, not a shutdown of the server's side alone: the
    // blocked writer fails.
    let error = writing
        .join()
        .unwrap()
        .expect_err("the server took every request");
    assert!(
        matches!(
            error.kind(),
            ErrorKind::BrokenPipe | ErrorKind::ConnectionReset
        ),
        "{error}"
    );
}

fn refuses_connections_past_the_limit(dispatch: Dispatch) {
    let limited = Config {
        max_connections: 2,
        ..config(dispatch)
    };
    let server = start_with(&limited, Routes::standard());
    let mut first = Client::connect(server.local_addr());
    let mut second = Client::connect(server.local_addr());
    hello_works(&mut first);
    hello_works(&mut second);

    let mut third = Client::connect(server.local_addr());
    assert_eq!(read_until_closed(&mut third.stream), b"");
    hello_works(&mut first);

    // Once a connection closes, its place is free again; the server notices the
    // close asynchronously, so a new connection may still be turned away first.
    drop(second);
    let mut admitted = false;
    for _ in 0..1000 {
        let mut next = Client::connect(server.local_addr());
        next.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        if !read_until_closed(&mut next.stream).is_empty() {
            admitted = true;
            break;
        }
    }
    assert!(
        admitted,
        "a freed place was never given to a new connection"
    );
}

fn a_panic_closes_only_its_own_connection(dispatch: Dispatch) {
    let routes = Routes::standard().panic_at("/panic");
    let server = start_with(&config(dispatch), routes);
    let mut bystander = Client::connect(server.local_addr());
    hello_works(&mut bystander);

    let mut victim = Client::connect(server.local_addr());
    victim.send(b"GET /panic HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(read_until_closed(&mut victim.stream), b"");

    hello_works(&mut bystander);
    hello_works(&mut Client::connect(server.local_addr()));
}

fn shutdown_finishes_in_flight_responses(dispatch: Dispatch) {
    // One poller: it drops its listener before it closes idle connections, so
    // once the idle client sees its close, no new connection can get in. (With
    // several, each drops its own listener when its waker fires.)
    let one_poller = Config {
        pollers: 1,
        ..config(dispatch)
    };
    let server = start_with(&one_poller, Routes::standard());
    let addr = server.local_addr();
    let mut idle = Client::connect(addr);
    hello_works(&mut idle);
    let mut busy = slow_reader(addr);
    let writing = pipeline_from_thread(&busy, GET_USER, 3000);
    // The first response proves the batch is being served.
    let user = v1_user();
    assert_response(&busy.response(false), &user);

    let shutdown = thread::spawn(move || server.shutdown(Duration::from_secs(20)));
    // Idle connections are closed at once, and nothing new is accepted.
    assert_eq!(read_until_closed(&mut idle.stream), b"");
    if let Ok(mut late) = TcpStream::connect(addr) {
        let _ = late.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(read_until_closed(&mut late), b"");
    }
    // Every request already sent gets its whole response, then the close.
    writing.join().unwrap().expect("all requests sent");
    for _ in 1..3000 {
        assert_response(&busy.response(false), &user);
    }
    busy.assert_closed();
    assert!(shutdown.join().unwrap(), "shutdown ran into its timeout");
}

/// A client that resets its connection mid-request is closed at once, not
/// left to a header timeout of an hour.
fn a_reset_connection_is_closed_at_once(dispatch: Dispatch) {
    let config = Config {
        timeouts: common::an_hour_to_wait(),
        ..common::config(dispatch)
    };
    let server = start_with(&config, Routes::standard());
    let mut client = Client::connect(server.local_addr());
    client.send(b"GET / HTTP/1.1\r\n");
    common::wait_until_server_read(&client.stream);
    common::wait_for_open(&server, 1);
    common::reset(&client.stream);
    drop(client);
    common::wait_for_open(&server, 0);
}

in_both_modes!(
    answers_408_to_a_head_that_never_completes,
    a_reset_connection_is_closed_at_once,
    closes_idle_keep_alive_connections,
    closes_a_client_that_stops_reading,
    refuses_connections_past_the_limit,
    a_panic_closes_only_its_own_connection,
    shutdown_finishes_in_flight_responses,
);
