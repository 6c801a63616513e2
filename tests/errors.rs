//! Every error status over real sockets, in both dispatch modes: the exact
//! response, and whether the connection then closes or stays usable.

mod common;

use std::fmt::Write;

use common::{assert_response, config, error_response, start, start_with, Client};
use uppercut_mio_server::{Config, Dispatch, Method, Routes, Server};

/// Sends `request`, expects the error, then checks the connection's fate:
/// closed, or still answering a plain request.
fn expect_error(
    dispatch: Dispatch,
    request: &[u8],
    code: u16,
    reason: &str,
    extra: &str,
    closes: bool,
) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(request);
    let head_only = request.starts_with(b"HEAD ");
    let expected = error_response(code, reason, extra, closes, head_only);
    assert_response(&client.response(head_only), &expected);
    if closes {
        client.assert_closed();
    } else {
        client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(client.response(false).starts_with(b"HTTP/1.1 200 OK\r\n"));
    }
}

fn bad_request_without_host(dispatch: Dispatch) {
    expect_error(
        dispatch,
        b"GET / HTTP/1.1\r\n\r\n",
        400,
        "Bad Request",
        "",
        true,
    );
}

fn bad_request_for_garbage(dispatch: Dispatch) {
    expect_error(
        dispatch,
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        400,
        "Bad Request",
        "",
        true,
    );
}

fn bad_request_for_both_framings(dispatch: Dispatch) {
    let request =
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n";
    expect_error(dispatch, request, 400, "Bad Request", "", true);
}

fn bad_request_for_conflicting_lengths(dispatch: Dispatch) {
    let request = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n";
    expect_error(dispatch, request, 400, "Bad Request", "", true);
}

fn bad_request_for_a_broken_chunk(dispatch: Dispatch) {
    let request = b"GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n";
    expect_error(dispatch, request, 400, "Bad Request", "", true);
}

fn not_found_keeps_the_connection(dispatch: Dispatch) {
    expect_error(
        dispatch,
        b"GET /nope HTTP/1.1\r\nHost: t\r\n\r\n",
        404,
        "Not Found",
        "",
        false,
    );
    expect_error(
        dispatch,
        b"HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\n",
        404,
        "Not Found",
        "",
        false,
    );
}

fn method_not_allowed_names_the_allowed(dispatch: Dispatch) {
    let request = b"DELETE /json HTTP/1.1\r\nHost: t\r\n\r\n";
    expect_error(
        dispatch,
        request,
        405,
        "Method Not Allowed",
        "Allow: GET, HEAD\r\n",
        false,
    );
    let with_body = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi";
    expect_error(
        dispatch,
        with_body,
        405,
        "Method Not Allowed",
        "Allow: GET, HEAD\r\n",
        false,
    );
}

fn payload_too_large_by_length(dispatch: Dispatch) {
    let request = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1048577\r\n\r\n";
    expect_error(dispatch, request, 413, "Payload Too Large", "", true);
}

fn payload_too_large_by_chunks(dispatch: Dispatch) {
    let request = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n100001\r\n";
    expect_error(dispatch, request, 413, "Payload Too Large", "", true);
}

/// A server whose bodies may carry 16 bytes (`--max-body 16`), with a
/// handler that answers with the length of the body it saw.
fn start_with_max_body_16(dispatch: Dispatch) -> Server {
    let config = Config {
        max_body: 16,
        ..config(dispatch)
    };
    let routes = Routes::standard().handler(&[Method::Post], "/size", |request, response| {
        let _ = write!(response, "{}", request.body().len());
    });
    start_with(&config, routes)
}

/// `Config::max_body` is the limit: 16 bytes are read, by length or in
/// chunks, and one more is refused with 413 at once, also before
/// `100 Continue`.
fn payload_too_large_above_max_body(dispatch: Dispatch) {
    let server = start_with_max_body_16(dispatch);
    let sixteen = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Length: 2\r\n\
        Date: {date}\r\n\r\n16";
    let mut client = Client::connect(server.local_addr());
    client.send(b"POST /size HTTP/1.1\r\nHost: t\r\nContent-Length: 16\r\n\r\n0123456789abcdef");
    assert_response(&client.response(false), sixteen);
    client.send(
        b"POST /size HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
          a\r\n0123456789\r\n6\r\nabcdef\r\n0\r\n\r\n",
    );
    assert_response(&client.response(false), sixteen);

    let too_large = error_response(413, "Payload Too Large", "", true, false);
    for request in [
        &b"POST /size HTTP/1.1\r\nHost: t\r\nContent-Length: 17\r\n\r\n"[..],
        b"POST /size HTTP/1.1\r\nHost: t\r\nContent-Length: 17\r\nExpect: 100-continue\r\n\r\n",
        b"POST /size HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
          a\r\n0123456789\r\n7\r\n",
    ] {
        let mut client = Client::connect(server.local_addr());
        client.send(request);
        assert_response(&client.response(false), &too_large);
        client.assert_closed();
    }
}

fn uri_too_long(dispatch: Dispatch) {
    let request = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(9000));
    expect_error(dispatch, request.as_bytes(), 414, "URI Too Long", "", true);
}

fn header_fields_too_large(dispatch: Dispatch) {
    let request = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nCookie: {}\r\n\r\n",
        "c".repeat(9000)
    );
    expect_error(
        dispatch,
        request.as_bytes(),
        431,
        "Request Header Fields Too Large",
        "",
        true,
    );
    let many: String = (0..100).map(|i| format!("X-{i}: {i}\r\n")).collect();
    let request = format!("GET / HTTP/1.1\r\nHost: t\r\n{many}\r\n");
    expect_error(
        dispatch,
        request.as_bytes(),
        431,
        "Request Header Fields Too Large",
        "",
        true,
    );
}

fn not_implemented_transfer_coding(dispatch: Dispatch) {
    let request = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
    expect_error(dispatch, request, 501, "Not Implemented", "", true);
}

in_both_modes!(
    bad_request_without_host,
    bad_request_for_garbage,
    bad_request_for_both_framings,
    bad_request_for_conflicting_lengths,
    bad_request_for_a_broken_chunk,
    not_found_keeps_the_connection,
    method_not_allowed_names_the_allowed,
    payload_too_large_by_length,
    payload_too_large_by_chunks,
    payload_too_large_above_max_body,
    uri_too_long,
    header_fields_too_large,
    not_implemented_transfer_coding,
);
