//! One address, one server: a second `Server::start` on an address a server
//! (ours or another program, with or without SO_REUSEPORT) listens on fails
//! with AddrInUse instead of sharing the port, while a server's own pollers
//! share it, port 0 still works, and a restart is not blocked by its
//! predecessor's connections in TIME_WAIT.

mod common;

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener};

use common::{config, exchange, start, start_with};
use socket2::{Domain, Socket, Type};
use uppercut_mio_server::{Config, Dispatch, Routes, Server};

fn on(dispatch: Dispatch, addr: SocketAddr) -> Config {
    Config {
        bind: addr,
        ..config(dispatch)
    }
}

fn assert_refused(dispatch: Dispatch, addr: SocketAddr) {
    let Err(error) = Server::start(&on(dispatch, addr), Routes::standard()) else {
        panic!("a second server started on {addr}");
    };
    assert_eq!(error.kind(), ErrorKind::AddrInUse);
    assert_eq!(
        error.to_string(),
        format!("cannot listen on {addr}: address already in use")
    );
}

fn a_second_server_on_the_same_address_is_refused(dispatch: Dispatch) {
    let first = start(dispatch);
    let addr = first.local_addr();
    assert_refused(dispatch, addr);
    // The first one, with its two pollers, is untouched.
    let response = exchange(&first, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(response.starts_with(b"HTTP/1.1 200 OK\r\n"));
}

fn another_programs_listener_is_respected(dispatch: Dispatch) {
    let plain = TcpListener::bind("127.0.0.1:0").unwrap();
    assert_refused(dispatch, plain.local_addr().unwrap());

    // As an older build of this server listens: SO_REUSEPORT set before bind.
    let shared = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    shared.set_reuse_port(true).unwrap();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    shared.bind(&any.into()).unwrap();
    shared.listen(16).unwrap();
    let addr = shared.local_addr().unwrap().as_socket().unwrap();
    assert_refused(dispatch, addr);
}

/// The first server closes a connection itself (`Connection: close`), which
/// leaves it in TIME_WAIT on the server's side of the port.
fn a_restart_on_the_same_port_works(dispatch: Dispatch) {
    let first = start(dispatch);
    let addr = first.local_addr();
    let response = exchange(
        &first,
        "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(response.starts_with(b"HTTP/1.1 200 OK\r\n"));
    first.stop();
    let second = start_with(&on(dispatch, addr), Routes::standard());
    let response = exchange(&second, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(response.starts_with(b"HTTP/1.1 200 OK\r\n"));
}

in_both_modes!(
    a_second_server_on_the_same_address_is_refused,
    another_programs_listener_is_respected,
    a_restart_on_the_same_port_works,
);
