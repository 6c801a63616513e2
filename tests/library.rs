//! The library as a program other than main.rs uses it: responses that
//! refuse the fields the server writes, `Config::static_dir` and its
//! limits through `Server::start`, and `run_until_signal` draining a
//! request in flight when its thread gets SIGTERM.

mod common;
mod static_common;

use std::io::ErrorKind;
use std::os::unix::thread::JoinHandleExt;
use std::thread;

use bytes::Bytes;
use common::{assert_response, config, exchange, start_with, Client};
use static_common::{TempTree, CSS, CSS_HEAD};
use uppercut_mio_server::{
    ActorResponse, CannedResponse, Config, Dispatch, Method, ResponseError, Routes, Server,
    StaticLimits,
};

const RESERVED: [&str; 6] = [
    "Content-Length",
    "Transfer-Encoding",
    "Date",
    "Server",
    "Connection",
    "content-length",
];

#[test]
fn canned_responses_refuse_reserved_and_broken_fields() {
    for name in RESERVED {
        let result = CannedResponse::try_new(200, "OK", &[(name, "1")], Bytes::new());
        assert_eq!(
            result.err(),
            Some(ResponseError::ReservedHeader(name.into()))
        );
    }
    for value in ["a\rb", "a\nb", "a\r\nX-Injected: 1"] {
        let result = CannedResponse::try_new(200, "OK", &[("X-A", value)], Bytes::new());
        assert_eq!(
            result.err(),
            Some(ResponseError::InvalidHeaderValue("X-A".into()))
        );
    }
    let fine = CannedResponse::try_new(201, "Created", &[("X-A", "v")], Bytes::from("hi"));
    let fine = fine.expect("a valid field is taken");
    assert_eq!((fine.status(), fine.body_len()), (201, 2));
}

#[test]
fn actor_responses_refuse_reserved_and_broken_fields() {
    for name in RESERVED {
        let result = ActorResponse::text("x").with_header(name, "1");
        assert_eq!(
            result.err(),
            Some(ResponseError::ReservedHeader(name.into()))
        );
    }
    for value in ["a\rb", "a\nb", "a\r\nX-Injected: 1"] {
        let result = ActorResponse::text("x").with_header("X-A", value);
        assert_eq!(
            result.err(),
            Some(ResponseError::InvalidHeaderValue("X-A".into()))
        );
    }
    assert!(ActorResponse::text("x").with_header("X-A", "v").is_ok());
}

fn static_config(dispatch: Dispatch, tree: &TempTree, limits: StaticLimits) -> Config {
    Config {
        static_dir: Some(tree.root.clone()),
        static_limits: limits,
        ..config(dispatch)
    }
}

fn serves_config_static_dir(dispatch: Dispatch) {
    let tree = TempTree::new("library");
    tree.file("css/a.css", CSS.as_bytes());
    let config = static_config(dispatch, &tree, StaticLimits::default());
    let server = start_with(&config, Routes::new());
    let response = exchange(&server, "GET /css/a.css HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(&response, &format!("{CSS_HEAD}{CSS}"));
    let site = server.static_site().expect("the site Config named");
    assert_eq!(site.summary().files, 1);
}

/// The error names the directory, not a flag: a library has none.
#[test]
fn static_limits_too_small_fail_start_naming_the_file() {
    let tree = TempTree::new("library-limits");
    let file = tree.file("css/a.css", CSS.as_bytes());
    let limits = StaticLimits {
        max_file: 20,
        ..StaticLimits::default()
    };
    let config = static_config(Dispatch::Local, &tree, limits);
    let error = Server::start(&config, Routes::new()).expect_err("a file over the limit");
    assert_eq!(error.kind(), ErrorKind::Other);
    let expected = format!(
        "static directory {}: {} is 21 bytes, over the per-file limit of 20 bytes",
        tree.root.display(),
        file.display()
    );
    assert_eq!(error.to_string(), expected);
}

fn sigterm_drains_a_request_in_flight(dispatch: Dispatch) {
    // The thread spawned below inherits the mask, so SIGTERM waits there
    // for `run_until_signal` and never reaches the default action. (The
    // test harness runs each test on a thread of its own, which ends here.)
    Server::block_signals();
    let routes = Routes::new().handler(&[Method::Post], "/echo", |request, response| {
        response.body(request.body());
    });
    let server = start_with(&config(dispatch), routes);
    let mut client = Client::connect(server.local_addr());
    let mut idle = Client::connect(server.local_addr());
    let running = thread::spawn(move || server.run_until_signal());
    // The 100 Continue says the server holds the request, head read.
    client.send(
        b"POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n",
    );
    assert_eq!(client.response(false), b"HTTP/1.1 100 Continue\r\n\r\n");
    // An answered request: the server has this connection, idle.
    idle.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    assert!(idle.response(false).starts_with(b"HTTP/1.1 200 OK\r\n"));
    // SAFETY: a signal to a thread of this process that has not been joined.
    let sent = unsafe { libc::pthread_kill(running.as_pthread_t(), libc::SIGTERM) };
    assert_eq!(sent, 0);
    // The idle connection closed: the server drains, so the body comes
    // after the signal took effect.
    idle.assert_closed();
    client.send(b"body");
    // The whole response, which announces the close that follows: the
    // request began before the drain, its response ends the connection.
    let expected = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Length: 4\r\n\
        Date: {date}\r\nConnection: close\r\n\r\nbody";
    assert_response(&client.response(false), expected);
    client.assert_closed();
    assert!(running.join().expect("run_until_signal returns"));
}

in_both_modes!(serves_config_static_dir, sigterm_drains_a_request_in_flight);
