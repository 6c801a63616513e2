//! How a connection ends, over real sockets in both dispatch modes: a
//! request whose head was still arriving when the drain began gets its
//! response with `Connection: close`, and a refusal sent while the client
//! is still sending (a head or a body far over the limits) reaches the
//! client whole, followed by an end rather than a reset (lingering close).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::{assert_response, config, start_with, Client};
use uppercut_mio_server::{Config, Dispatch, Method, Routes};

fn routes() -> Routes {
    Routes::standard().handler(&[Method::Get], "/greet", |_, response| {
        let _ = response.header("Content-Type", "text/plain");
        response.body(b"hi");
    })
}

const JSON: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: application/json\r\nContent-Length: 27\r\nDate: {date}\r\n\
    Connection: close\r\n\r\n{\"message\":\"Hello, World!\"}";
const GREET: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain\r\nContent-Length: 2\r\nDate: {date}\r\n\
    Connection: close\r\n\r\nhi";
const NOT_FOUND: &str = "HTTP/1.1 404 Not Found\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 14\r\nDate: {date}\r\n\
    Connection: close\r\n\r\n404 Not Found\n";

/// A head half sent when the drain begins: its response, whatever answers
/// it (canned, handler, 404), says `Connection: close`, and the connection
/// then ends.
fn a_head_still_arriving_when_the_drain_begins_gets_the_close(dispatch: Dispatch) {
    let config = Config {
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..config(dispatch)
    };
    let server = start_with(&config, routes());
    let addr = server.local_addr();
    let cases = [("/json", JSON), ("/greet", GREET), ("/nope", NOT_FOUND)];
    let mut sent = 0;
    let mut clients: Vec<Client> = cases
        .iter()
        .map(|(path, _)| {
            let mut client = Client::connect(addr);
            let part = format!("GET {path} HTTP/1.1\r\nHost: x\r\n");
            client.send(part.as_bytes());
            sent += part.len();
            client
        })
        .collect();
    // Every first part accepted and read before the drain begins.
    let metrics = server.metrics_addr().expect("metrics");
    let deadline = Instant::now() + Duration::from_secs(10);
    while common::page_sum(metrics, "uppercut_bytes_received_total{") < sent as u64 {
        assert!(
            Instant::now() < deadline,
            "the first parts were not read in 10 s"
        );
        thread::sleep(Duration::from_millis(1));
    }
    let mut idle = common::idle_connection(addr);
    let shutdown = thread::spawn(move || server.shutdown(Duration::from_secs(10)));
    // The drain has begun once it closes the idle connection.
    idle.assert_closed();
    for (client, (_, expected)) in clients.iter_mut().zip(cases) {
        client.send(b"\r\n");
        assert_response(&client.response(false), expected);
        client.assert_closed();
    }
    assert!(shutdown.join().unwrap(), "drained in time");
}

/// Sends `head` and then `more` bytes, all of it before reading; then
/// reads the answer to the end. A server that closed without reading what
/// it refused makes the write fail or resets the read.
fn refused_while_still_sending(addr: SocketAddr, head: &[u8], more: usize) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(head).expect("the head is sent");
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = 0;
    while sent < more {
        match stream.write(&chunk[..chunk.len().min(more - sent)]) {
            Ok(n) => sent += n,
            Err(e) => panic!("write failed after {sent} bytes: {e}"),
        }
    }
    stream.shutdown(Shutdown::Write).unwrap();
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => String::from_utf8_lossy(&answer).into_owned(),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => panic!("reset, after {answer:?}"),
        Err(e) => panic!("read failed: {e}"),
    }
}

fn a_head_far_over_the_limit_gets_its_431_and_an_end(dispatch: Dispatch) {
    let server = start_with(&config(dispatch), routes());
    let head = b"GET / HTTP/1.1\r\nHost: t\r\nX-Big: ";
    let answer = refused_while_still_sending(server.local_addr(), head, 1024 * 1024);
    let expected = common::error_response(431, "Request Header Fields Too Large", "", true, false);
    assert_response(answer.as_bytes(), &expected);
}

fn a_body_far_over_the_limit_gets_its_413_and_an_end(dispatch: Dispatch) {
    let server = start_with(&config(dispatch), routes());
    let head = b"POST /greet HTTP/1.1\r\nHost: t\r\nContent-Length: 4194304\r\n\r\n";
    let answer = refused_while_still_sending(server.local_addr(), head, 4 * 1024 * 1024);
    let expected = common::error_response(413, "Payload Too Large", "", true, false);
    assert_response(answer.as_bytes(), &expected);
}

in_both_modes!(
    a_head_still_arriving_when_the_drain_begins_gets_the_close,
    a_head_far_over_the_limit_gets_its_431_and_an_end,
    a_body_far_over_the_limit_gets_its_413_and_an_end,
);
