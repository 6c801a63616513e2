//! Handler routes over real sockets, in both dispatch modes: what a handler
//! sees of the request (query, body by length, chunks or after
//! `100 Continue`), what the server does with what it writes (HEAD, a
//! refused field, 204), prefix routes, and 405 listing every method a path
//! takes.

mod common;
mod route_common;

use std::fmt::Write;

use common::{assert_response, config, error_response, start_with, Client};
use route_common::{built, Echo};
use uppercut_mio_server::{
    CannedResponse, Dispatch, Method, Request, Response, Routes, Server, StatusCode,
};

/// `Hello, NAME!` from the query; 400 without a name.
fn greet(request: &Request<'_>, response: &mut Response<'_>) {
    let _ = response.header("Content-Type", "text/plain; charset=utf-8");
    match request.query_param("name") {
        Some(name) => {
            let _ = write!(response, "Hello, {name}!");
        }
        None => {
            response.set_status(StatusCode::BAD_REQUEST);
            response.body(b"no name\n");
        }
    }
}

/// The request body, as received.
fn echo(request: &Request<'_>, response: &mut Response<'_>) {
    let _ = response.header("Content-Type", "application/octet-stream");
    response.body(request.body());
}

/// Tries to set its own length; the body says what the server answered.
fn own_length(_: &Request<'_>, response: &mut Response<'_>) {
    let refused = response.header("Content-Length", "99");
    let _ = write!(response, "{refused:?}");
}

/// 204, with a body the server must leave out.
fn no_content(_: &Request<'_>, response: &mut Response<'_>) {
    response.set_status(StatusCode::NO_CONTENT);
    let _ = response.header("X-Kind", "empty");
    response.body(b"not sent");
}

/// The path the prefix route took.
fn file(request: &Request<'_>, response: &mut Response<'_>) {
    let _ = write!(response, "file {}", request.path());
}

/// Every handler above, a canned route, and `/mixed`: a GET handler and a
/// POST actor route at one path.
fn start(dispatch: Dispatch) -> Server {
    let routes = Routes::new()
        .route(
            "/plaintext",
            CannedResponse::ok("text/plain", "Hello, World!"),
        )
        .handler(&[Method::Get], "/greet", greet)
        .handler(&[Method::Post], "/echo", echo)
        .handler(&[Method::Get], "/own-length", own_length)
        .handler(&[Method::Get], "/empty", no_content)
        .handler(&[Method::Get], "/files/*", file)
        .handler(&[Method::Get], "/mixed", |_, response| {
            response.body(b"handler");
        })
        .actor(&[Method::Post], "/mixed", "echo")
        .spawn("echo", Echo);
    start_with(&config(dispatch), routes)
}

const PLAIN_UTF8: &str = "Content-Type: text/plain; charset=utf-8\r\n";
const OCTETS: &str = "Content-Type: application/octet-stream\r\n";

fn get(client: &mut Client, target: &str) -> Vec<u8> {
    client.send(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    client.response(false)
}

fn decodes_the_query(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    let hello = |name: &str| built("200 OK", PLAIN_UTF8, &format!("Hello, {name}!"));
    let response = get(&mut client, "/greet?name=J%C3%BCrgen");
    assert_response(&response, &hello("Jürgen"));
    let response = get(&mut client, "/greet?x=%zz&name=Ann+Lee&name=Bob");
    assert_response(&response, &hello("Ann Lee"));
    // The path is routed decoded; the query's name needs no value.
    let response = get(&mut client, "/gr%65et?name");
    assert_response(&response, &hello(""));
    let response = get(&mut client, "/greet?names=Ann");
    assert_response(
        &response,
        &built("400 Bad Request", PLAIN_UTF8, "no name\n"),
    );
}

fn head_to_a_get_handler_sends_the_head_only(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(b"HEAD /greet?name=Ann HTTP/1.1\r\nHost: t\r\n\r\n");
    let head = built("200 OK", PLAIN_UTF8, "Hello, Ann!");
    let head = head.strip_suffix("Hello, Ann!").unwrap();
    assert_response(&client.response(true), head);
    // Nothing of the body followed: the next response comes next.
    let response = get(&mut client, "/greet?name=Ann");
    assert_response(&response, &built("200 OK", PLAIN_UTF8, "Hello, Ann!"));
}

fn echoes_a_body_framed_by_length(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello\r\nbody");
    assert_response(
        &client.response(false),
        &built("200 OK", OCTETS, "hello\r\nbody"),
    );
    client.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    assert_response(&client.response(false), &built("200 OK", OCTETS, ""));
}

fn echoes_a_chunked_body_dechunked(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    // Each write ends inside a chunk or its size line.
    let parts: [&[u8]; 5] = [
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWi",
        b"ki\r\n5;ext=1\r\npedia\r",
        b"\nE\r\n in\r\n\r\nchunks.\r\n",
        b"0",
        b"\r\nX-Trailer: t\r\n\r\n",
    ];
    for part in parts {
        client.send(part);
    }
    let expected = built("200 OK", OCTETS, "Wikipedia in\r\n\r\nchunks.");
    assert_response(&client.response(false), &expected);
}

fn takes_a_body_after_100_continue(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(
        b"POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
    );
    assert_eq!(client.response(false), b"HTTP/1.1 100 Continue\r\n\r\n");
    client.send(b"later");
    assert_response(&client.response(false), &built("200 OK", OCTETS, "later"));
}

fn refuses_a_length_set_by_the_handler(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    let response = get(&mut client, "/own-length");
    let body = r#"Err(ReservedHeader("Content-Length"))"#;
    // One Content-Length, the server's.
    assert_response(&response, &built("200 OK", "", body));
}

fn no_content_has_no_body_and_no_length(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(b"GET /empty HTTP/1.1\r\nHost: t\r\n\r\n");
    let expected = "HTTP/1.1 204 No Content\r\nServer: uppercut-mio-server\r\n\
        X-Kind: empty\r\nDate: {date}\r\n\r\n";
    // Read as a head: a body sent after it would come before the next response.
    assert_response(&client.response(true), expected);
    let response = get(&mut client, "/greet?name=A");
    assert_response(&response, &built("200 OK", PLAIN_UTF8, "Hello, A!"));
}

fn a_prefix_route_takes_the_paths_under_it(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    for path in ["/files/", "/files/a/b", "/files/a%20b"] {
        let response = get(&mut client, path);
        assert_response(&response, &built("200 OK", "", &format!("file {path}")));
    }
    for path in ["/filesx", "/files", "/file/"] {
        let response = get(&mut client, path);
        assert_response(
            &response,
            &error_response(404, "Not Found", "", false, false),
        );
    }
}

fn method_not_allowed_lists_handler_and_actor_methods(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(b"PUT /mixed HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx");
    let allow = "Allow: GET, HEAD, POST\r\n";
    let expected = error_response(405, "Method Not Allowed", allow, false, false);
    assert_response(&client.response(false), &expected);
    client.send(b"DELETE /plaintext HTTP/1.1\r\nHost: t\r\n\r\n");
    let allow = "Allow: GET, HEAD\r\n";
    let expected = error_response(405, "Method Not Allowed", allow, false, false);
    assert_response(&client.response(false), &expected);
    // Each method the 405 named answers, on the same connection.
    assert_response(&get(&mut client, "/mixed"), &built("200 OK", "", "handler"));
    client.send(b"POST /mixed HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
    let fields = "Content-Type: text/plain; charset=utf-8\r\nX-Seen: yes\r\n";
    let seen = "Post\n/mixed\nNone\nNone\nhi";
    assert_response(&client.response(false), &built("200 OK", fields, seen));
}

in_both_modes!(
    decodes_the_query,
    head_to_a_get_handler_sends_the_head_only,
    echoes_a_body_framed_by_length,
    echoes_a_chunked_body_dechunked,
    takes_a_body_after_100_continue,
    refuses_a_length_set_by_the_handler,
    no_content_has_no_body_and_no_length,
    a_prefix_route_takes_the_paths_under_it,
    method_not_allowed_lists_handler_and_actor_methods,
);
