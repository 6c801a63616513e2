//! Timeouts, the connection limit, panics and graceful shutdown, over real
//! sockets, in both dispatch modes. Timeouts are short here (300 ms); the
//! poller sweeps once a second, so each case takes one to two seconds.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use common::{
    assert_response, config, read_until_closed, start_with, wait_until_peer_closes, Client,
};
use socket2::{Domain, Socket, Type};
use uppercut_mio_server::config::Timeouts;
use uppercut_mio_server::{Config, Dispatch, Routes};

const HELLO: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 6\r\nDate: {date}\r\n\r\nhello\n";
const TIMEOUT_408: &str = "HTTP/1.1 408 Request Timeout\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 20\r\nDate: {date}\r\n\
    Connection: close\r\n\r\n408 Request Timeout\n";
const SHORT: Duration = Duration::from_millis(300);

fn short_timeouts(dispatch: Dispatch) -> Config {
    Config {
        timeouts: Timeouts {
            header: SHORT,
            keepalive: SHORT,
            write: SHORT,
            ..Timeouts::default()
        },
        ..config(dispatch)
    }
}

fn hello_works(client: &mut Client) {
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(&client.response(false), HELLO);
}

/// A connection whose socket reads only 4 KiB at a time, so the server's
/// output backs up quickly.
fn slow_client(addr: std::net::SocketAddr) -> Client {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    Client::from_stream(TcpStream::from(socket))
}

/// Pipelines `count` requests for /v1/user from a second thread (the server
/// stops reading while its output is backed up).
fn pipeline_users(client: &Client, count: usize) -> thread::JoinHandle<std::io::Result<()>> {
    let mut writer = client.stream.try_clone().unwrap();
    let batch = "GET /v1/user HTTP/1.1\r\nHost: t\r\n\r\n".repeat(count);
    thread::spawn(move || writer.write_all(batch.as_bytes()))
}

fn answers_408_to_a_head_that_never_completes(dispatch: Dispatch) {
    let server = start_with(&short_timeouts(dispatch), Routes::standard());
    let mut slowloris = Client::connect(server.local_addr());
    slowloris.send(b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ");
    assert_response(&read_until_closed(&mut slowloris.stream), TIMEOUT_408);

    let mut silent = Client::connect(server.local_addr());
    assert_response(&read_until_closed(&mut silent.stream), TIMEOUT_408);
}

fn closes_idle_keep_alive_connections(dispatch: Dispatch) {
    let server = start_with(&short_timeouts(dispatch), Routes::standard());
    let mut client = Client::connect(server.local_addr());
    hello_works(&mut client);
    assert_eq!(read_until_closed(&mut client.stream), b"");
}

fn closes_a_client_that_stops_reading(dispatch: Dispatch) {
    let server = start_with(&short_timeouts(dispatch), Routes::standard());
    let mut client = slow_client(server.local_addr());
    let writing = pipeline_users(&client, 3000);
    wait_until_peer_closes(&client.stream);
    let received = read_until_closed(&mut client.stream);
    assert!(
        received.len() < 3000 * 3696,
        "the server kept writing to a client that read nothing"
    );
    // The server may have closed before taking every request: either way is fine.
    let _ = writing.join().unwrap();
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
    let mut busy = slow_client(addr);
    let writing = pipeline_users(&busy, 3000);
    // The first response proves the batch is being served.
    let first = busy.response(false);

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
        assert_eq!(busy.response(false).len(), first.len());
    }
    busy.assert_closed();
    assert!(shutdown.join().unwrap(), "shutdown ran into its timeout");
}

in_both_modes!(
    answers_408_to_a_head_that_never_completes,
    closes_idle_keep_alive_connections,
    closes_a_client_that_stops_reading,
    refuses_connections_past_the_limit,
    a_panic_closes_only_its_own_connection,
    shutdown_finishes_in_flight_responses,
);
