//! Actor routes over real sockets, in both dispatch modes: answers in
//! request order, what the actor sees, and every way an actor can fail to
//! answer (never, gone, dropped, panicked), each an error on that request
//! only.

mod common;
mod route_common;

use std::time::Duration;

use common::{assert_response, config, error_response, start_with, Client};
use route_common::{built, text, Counter, Echo};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, ActorResponse, CannedResponse, Dispatch, Method};
use uppercut_mio_server::{Config, ResponseError, Routes, Server, StatusCode, Timeouts};

/// Keeps every request and answers none.
#[derive(Default)]
struct Hoarder {
    kept: Vec<ActorRequest>,
}

impl AnyActor for Hoarder {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.kept.push(*request);
        }
    }
}

/// Drops every request unanswered.
struct Dropper;

impl AnyActor for Dropper {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        drop(envelope);
    }
}

/// Panics holding the request.
struct Panicker;

impl AnyActor for Panicker {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            panic!("an actor route's actor panics on {:?}", request.request());
        }
    }
}

/// Passes every request on to another address.
struct ForwardTo(&'static str);

impl AnyActor for ForwardTo {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        sender.send(self.0, envelope);
    }
}

/// Answers `/status/{code}` with that status (through `StatusCode`, so
/// any number from 100 to 999) and a body naming it.
struct Statuses;

impl AnyActor for Statuses {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let code = request.request().param("code").unwrap_or_default();
            let status = code.parse().ok().and_then(|n| StatusCode::from_u16(n).ok());
            let response = ActorResponse::new(StatusCode::OK).with_body(format!("asked {code}"));
            request.respond(response.with_status(status.unwrap_or(StatusCode::IM_A_TEAPOT)));
        }
    }
}

/// How long `/stuck` waits for `Hoarder`.
const REPLY_TIMEOUT: Duration = Duration::from_millis(300);

fn server_config(dispatch: Dispatch) -> Config {
    Config {
        // Sweeps often enough for the short reply timeout.
        timeouts: Timeouts {
            sweep: Duration::from_millis(50),
            ..Timeouts::default()
        },
        ..config(dispatch)
    }
}

fn start(dispatch: Dispatch) -> Server {
    let routes = Routes::new()
        .route(
            "/plaintext",
            CannedResponse::ok("text/plain", "Hello, World!"),
        )
        .actor(&[Method::Get], "/count", "counter")
        .spawn("counter", Counter::default())
        .actor(&[Method::Post], "/echo/*", "echo")
        .spawn("echo", Echo)
        .actor(&[Method::Get], "/nobody", "forwarder")
        .spawn("forwarder", ForwardTo("nobody-spawned-this"))
        .actor(&[Method::Get], "/status/{code}", "statuses")
        .spawn("statuses", Statuses)
        .actor(&[Method::Get], "/drop", "dropper")
        .spawn("dropper", Dropper)
        .actor(&[Method::Get], "/panic", "panicker")
        .spawn("panicker", Panicker)
        .reply_timeout(REPLY_TIMEOUT)
        .actor(&[Method::Get], "/stuck", "hoarder")
        .spawn("hoarder", Hoarder::default());
    start_with(&server_config(dispatch), routes)
}

const PLAINTEXT: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain\r\nContent-Length: 13\r\nDate: {date}\r\n\r\nHello, World!";

fn get(client: &mut Client, path: &str) -> Vec<u8> {
    client.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    client.response(false)
}

/// `path`'s actor fails to answer with `code reason`, and the connection
/// then still serves a canned route and an actor route.
fn expect_failure(dispatch: Dispatch, path: &str, code: u16, reason: &str) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    let response = get(&mut client, path);
    assert_response(&response, &error_response(code, reason, "", false, false));
    assert_response(&get(&mut client, "/plaintext"), PLAINTEXT);
    assert_response(&get(&mut client, "/count"), &text("1"));
    // And so does any other connection.
    let mut other = Client::connect(server.local_addr());
    assert_response(&get(&mut other, "/count"), &text("2"));
}

fn a_counter_answers_in_turn(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    for count in ["1", "2", "3"] {
        assert_response(&get(&mut client, "/count"), &text(count));
    }
}

fn pipelined_answers_come_in_request_order(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    let request = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    let pipeline = [request("/count"), request("/plaintext"), request("/count")];
    client.send(pipeline.concat().as_bytes());
    assert_response(&client.response(false), &text("1"));
    assert_response(&client.response(false), PLAINTEXT);
    assert_response(&client.response(false), &text("2"));
}

fn the_actor_sees_the_whole_request(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(
        b"POST /echo/a%20b?x=1&y=%C3%BC HTTP/1.1\r\nHost: t\r\nx-test:  seen \r\n\
          Transfer-Encoding: chunked\r\n\r\n3\r\nbod\r\n1\r\ny\r\n0\r\n\r\n",
    );
    let fields = "Content-Type: text/plain; charset=utf-8\r\nX-Seen: yes\r\n";
    let seen = "Post\n/echo/a%20b\nSome(\"x=1&y=%C3%BC\")\nSome(\"seen\")\nbody";
    assert_response(&client.response(false), &built("200 OK", fields, seen));
    client.send(b"POST /echo/ HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
    let seen = "Post\n/echo/\nNone\nNone\nhi";
    assert_response(&client.response(false), &built("200 OK", fields, seen));
}

/// An actor's status goes out as given, with its reason phrase; one that
/// cannot end a request (1xx, or past 599) goes out as 500, and the
/// connection serves on.
fn the_actor_s_status_goes_out(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    for (code, status) in [
        ("201", "201 Created"),
        ("404", "404 Not Found"),
        ("599", "599 "),
        ("100", "500 Internal Server Error"),
        ("101", "500 Internal Server Error"),
        ("600", "500 Internal Server Error"),
    ] {
        let response = get(&mut client, &format!("/status/{code}"));
        assert_response(&response, &built(status, "", &format!("asked {code}")));
    }
    assert_response(&get(&mut client, "/count"), &text("1"));
}

/// A status number from elsewhere is checked where it is set.
#[test]
fn try_with_status_refuses_what_cannot_end_a_request() {
    let response = ActorResponse::text("x");
    for code in [0, 99, 100, 101, 199, 600, 999] {
        assert_eq!(
            response.clone().try_with_status(code).err(),
            Some(ResponseError::InvalidStatus(code))
        );
    }
    let created = response.try_with_status(201).expect("a final status");
    assert_eq!(created.status(), 201);
    assert_eq!(ActorResponse::new(StatusCode::CONTINUE).status(), 500);
}

fn no_answer_in_time_is_504(dispatch: Dispatch) {
    expect_failure(dispatch, "/stuck", 504, "Gateway Timeout");
}

fn a_request_sent_on_to_an_address_nobody_spawned_is_502(dispatch: Dispatch) {
    expect_failure(dispatch, "/nobody", 502, "Bad Gateway");
}

fn a_route_to_an_address_nobody_spawned_is_refused_at_start(dispatch: Dispatch) {
    let routes = Routes::new()
        .actor(
            &[Method::Get, Method::Post],
            "/nobody",
            "nobody-spawned-this",
        )
        .spawn("somebody", Counter::default());
    let error = Server::start(&server_config(dispatch), routes).expect_err("refused");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(
        error.to_string(),
        "route GET,POST /nobody: no actor at \"nobody-spawned-this\" (give one to \
         Routes::spawn, Routes::spawn_per_poller or Routes::spawn_blocking)"
    );
}

fn an_address_spawned_twice_is_refused_at_start(dispatch: Dispatch) {
    let routes = Routes::new()
        .spawn("counter", Counter::default())
        .spawn_per_poller("counter", |_| Counter::default());
    let error = Server::start(&server_config(dispatch), routes).expect_err("refused");
    assert_eq!(
        error.to_string(),
        "actor address \"counter\" is spawned twice"
    );
}

fn a_dropped_request_is_502(dispatch: Dispatch) {
    expect_failure(dispatch, "/drop", 502, "Bad Gateway");
}

fn a_panicking_actor_is_502(dispatch: Dispatch) {
    expect_failure(dispatch, "/panic", 502, "Bad Gateway");
}

in_both_modes!(
    a_counter_answers_in_turn,
    pipelined_answers_come_in_request_order,
    the_actor_sees_the_whole_request,
    the_actor_s_status_goes_out,
    no_answer_in_time_is_504,
    a_request_sent_on_to_an_address_nobody_spawned_is_502,
    a_route_to_an_address_nobody_spawned_is_refused_at_start,
    an_address_spawned_twice_is_refused_at_start,
    a_dropped_request_is_502,
    a_panicking_actor_is_502,
);

/// The 504 comes by the route's own reply timeout (300 ms), not by the
/// default for actor routes (5 s). A generous upper bound: ten times the
/// route's timeout and two seconds short of the default, so only a server
/// that waits for the default fails it, however loaded the machine.
fn the_504_comes_by_the_route_s_timeout(dispatch: Dispatch) {
    const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(5);
    let bound = DEFAULT_REPLY_TIMEOUT - Duration::from_secs(2);
    assert!(bound >= 10 * REPLY_TIMEOUT);
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    let asked = std::time::Instant::now();
    let response = get(&mut client, "/stuck");
    let waited = asked.elapsed();
    assert_response(
        &response,
        &error_response(504, "Gateway Timeout", "", false, false),
    );
    assert!(
        waited < bound,
        "the 504 took {waited:?} for a route whose reply timeout is {REPLY_TIMEOUT:?}"
    );
}

in_both_modes!(the_504_comes_by_the_route_s_timeout);
