//! Backpressure and concurrency over real sockets, in both dispatch modes.

mod common;

use std::io::Write;
use std::thread;

use common::{assert_response, slow_reader, start, Client, HELLO};
use uppercut_mio_server::raise_open_files_limit;
use uppercut_mio_server::Dispatch;

/// A client pipelines 3,000 requests for 7.6 MB of responses and reads them
/// through an 8 KiB receive window: more than a loopback socket can buffer
/// (tcp_wmem tops out at 4 MiB), so the server must meet WouldBlock, keep
/// the rest, wait for WRITABLE and resume, many times over, without losing
/// or reordering a byte. The requests go from a second thread, because the
/// server stops reading while its output is backed up.
fn slow_reader_gets_every_byte(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = slow_reader(server.local_addr());

    let is_user = |i: usize| i % 3 != 2;
    let batch: String = (0..3000)
        .map(|i| {
            if is_user(i) {
                "GET /v1/user HTTP/1.1\r\nHost: t\r\n\r\n"
            } else {
                "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
            }
        })
        .collect();
    let mut writer = client.stream.try_clone().unwrap();
    let writing = thread::spawn(move || writer.write_all(batch.as_bytes()));
    let user_body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/v1-user.json"
    ))
    .unwrap();
    for i in 0..3000 {
        let response = client.response(false);
        if is_user(i) {
            assert!(response.starts_with(b"HTTP/1.1 200 OK\r\n"));
            assert!(response.ends_with(&user_body), "response {i} lost bytes");
        } else {
            assert_response(&response, HELLO);
        }
    }
    writing.join().unwrap().expect("requests written");
}

/// 500 connections open at once, each sending its request before any reads.
fn serves_500_concurrent_connections(dispatch: Dispatch) {
    raise_open_files_limit().expect("open-files limit");
    let server = start(dispatch);
    let mut clients: Vec<Client> = (0..500)
        .map(|_| Client::connect(server.local_addr()))
        .collect();
    for client in &mut clients {
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    }
    for client in &mut clients {
        assert_response(&client.response(false), HELLO);
    }
    // And every one of them is still usable.
    for client in &mut clients {
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    }
    let closing = HELLO.replace("{date}\r\n", "{date}\r\nConnection: close\r\n");
    for client in &mut clients {
        assert_response(&client.response(false), &closing);
        client.assert_closed();
    }
}

in_both_modes!(
    slow_reader_gets_every_byte,
    serves_500_concurrent_connections
);
