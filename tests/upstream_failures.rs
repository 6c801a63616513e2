//! /io failures name their cause in the body, one line each: an upstream
//! that answers with a status other than 200, with bytes that are not HTTP
//! or framed ambiguously, with a body over the limit, that closes or resets the connection before
//! answering; and HEAD gets the same head without the body. Both dispatch
//! modes; the connection stays usable after each.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::upstream::with_upstream;
use common::{assert_response, error_with_cause, start_with, Client};
use socket2::SockRef;
use uppercut_mio_server::{Dispatch, Routes};

const GET_IO: &[u8] = b"GET /io HTTP/1.1\r\nHost: t\r\n\r\n";

/// What the test upstream does once it has read a request head.
#[derive(Clone, Copy)]
enum Answer {
    /// Writes these bytes and keeps the connection open.
    Bytes(&'static str),
    /// A 200 whose declared body is over the server's 1 MiB limit.
    Huge,
    /// Closes the connection without a byte.
    Close,
    /// Resets the connection.
    Reset,
}

fn upstream(answer: Answer) -> SocketAddr {
    common::upstream::spawn(move |stream| respond(stream, answer)).addr
}

/// Answers one request as `answer` says; false once the connection is done.
fn respond(stream: &mut TcpStream, answer: Answer) -> bool {
    match answer {
        Answer::Bytes(bytes) => stream.write_all(bytes.as_bytes()).is_ok(),
        Answer::Huge => {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n");
            false
        }
        Answer::Close => false,
        Answer::Reset => {
            let _ = SockRef::from(&*stream).set_linger(Some(Duration::ZERO));
            false
        }
    }
}

/// Asks /io once with GET and once with HEAD, expecting 502 with `body`,
/// then checks that the connection still serves.
fn answers_502_with(dispatch: Dispatch, answer: Answer, body: &str) {
    let server = start_with(
        &with_upstream(dispatch, upstream(answer)),
        Routes::standard(),
    );
    let mut client = Client::connect(server.local_addr());
    client.send(GET_IO);
    let cause = body
        .strip_prefix("502 Bad Gateway: ")
        .and_then(|cause| cause.strip_suffix('\n'))
        .expect("a 502 body naming its cause");
    let expected = |head_only| error_with_cause(502, "Bad Gateway", cause, head_only);
    assert_response(&client.response(false), &expected(false));
    client.send(b"HEAD /io HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(&client.response(true), &expected(true));
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(client.response(false).starts_with(b"HTTP/1.1 200 OK\r\n"));
}

fn names_the_upstream_status(dispatch: Dispatch) {
    let answer = Answer::Bytes("HTTP/1.1 500 Oops\r\nContent-Length: 2\r\n\r\n{}");
    answers_502_with(dispatch, answer, "502 Bad Gateway: upstream status 500\n");
}

fn names_an_answer_that_is_not_http(dispatch: Dispatch) {
    let answer = Answer::Bytes("SSH-2.0-OpenSSH_9.2\r\n\r\n");
    answers_502_with(
        dispatch,
        answer,
        "502 Bad Gateway: upstream answer is not valid HTTP\n",
    );
}

/// A body the request side would refuse to delimit is no more valid from
/// the upstream: each of these is a JSON `{}` to a lax reader.
fn names_an_answer_with_ambiguous_framing(dispatch: Dispatch) {
    for answer in [
        "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}",
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n\
         2\r\n{}\r\n0\r\n\r\n",
    ] {
        answers_502_with(
            dispatch,
            Answer::Bytes(answer),
            "502 Bad Gateway: upstream answer is not valid HTTP\n",
        );
    }
}

fn names_an_answer_that_is_too_large(dispatch: Dispatch) {
    answers_502_with(
        dispatch,
        Answer::Huge,
        "502 Bad Gateway: upstream answer is too large\n",
    );
}

fn names_a_close_before_the_answer(dispatch: Dispatch) {
    let body = "502 Bad Gateway: upstream closed the connection before answering\n";
    answers_502_with(dispatch, Answer::Close, body);
}

fn names_a_reset(dispatch: Dispatch) {
    let body = "502 Bad Gateway: upstream reset the connection\n";
    answers_502_with(dispatch, Answer::Reset, body);
}

in_both_modes!(
    names_the_upstream_status,
    names_an_answer_that_is_not_http,
    names_an_answer_with_ambiguous_framing,
    names_an_answer_that_is_too_large,
    names_a_close_before_the_answer,
    names_a_reset,
);
