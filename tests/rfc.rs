//! The RFC 9112 / 9110 rules over real sockets, in both dispatch modes: Host
//! values, request-target forms, Transfer-Encoding with Content-Length,
//! chunk-size lines, `Expect: 100-continue` after routing, later HTTP/1.x
//! versions and `If-None-Match: *`, each with the exact response and the
//! connection's fate.

mod common;

use common::{assert_response, error_response as error, start, Client, HELLO, HELLO_HEAD};
use uppercut_mio_server::Dispatch;

const JSON: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: application/json\r\nContent-Length: 27\r\nDate: {date}\r\n\r\n\
    {\"message\":\"Hello, World!\"}";
const NOT_MODIFIED: &str =
    "HTTP/1.1 304 Not Modified\r\nServer: uppercut-mio-server\r\nDate: {date}\r\n\r\n";
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

fn bad_request(head_only: bool) -> String {
    error(400, "Bad Request", "", true, head_only)
}

fn method_not_allowed(closes: bool) -> String {
    error(
        405,
        "Method Not Allowed",
        "Allow: GET, HEAD\r\n",
        closes,
        false,
    )
}

/// Sends `request` on a fresh connection: the response is `expected`, and
/// then the connection closes.
fn answered_then_closed(dispatch: Dispatch, request: &[u8], expected: &str) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(request);
    let head_only = request.starts_with(b"HEAD ");
    assert_response(&client.response(head_only), expected);
    client.assert_closed();
}

/// Sends each request in turn on one connection; each gets its response.
fn answered_in_turn(dispatch: Dispatch, exchanges: &[(&str, &str)]) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    for (request, expected) in exchanges {
        client.send(request.as_bytes());
        let response = client.response(request.starts_with("HEAD "));
        assert_response(&response, expected);
    }
}

fn refuses_invalid_host_values(dispatch: Dispatch) {
    for host in ["127.0.0.1:9000/path", "a, b", "Q a", "[::1", "a:b"] {
        let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
        answered_then_closed(dispatch, request.as_bytes(), &bad_request(false));
    }
}

/// An `http` URI may not have an empty host (RFC 9110 §4.2.1), so neither
/// may the Host that stands for it, on HTTP/1.0 or 1.1, with an
/// absolute-form target too, or with a port alone.
fn refuses_an_empty_host(dispatch: Dispatch) {
    let requests: [&[u8]; 5] = [
        b"GET / HTTP/1.1\r\nHost:\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost:  \r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: :9000\r\n\r\n",
        b"GET / HTTP/1.0\r\nHost:\r\n\r\n",
        b"GET http://t/ HTTP/1.1\r\nHost:\r\n\r\n",
    ];
    for request in requests {
        answered_then_closed(dispatch, request, &bad_request(false));
    }
}

fn accepts_valid_host_values(dispatch: Dispatch) {
    let hosts = ["[::1]:9000", "127.0.0.1:", "xn--bcher-kva.example:80"];
    let requests: Vec<String> = hosts
        .iter()
        .map(|host| format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n"))
        .collect();
    let exchanges: Vec<(&str, &str)> = requests.iter().map(|r| (r.as_str(), HELLO)).collect();
    answered_in_turn(dispatch, &exchanges);
}

fn routes_absolute_form_by_its_path(dispatch: Dispatch) {
    answered_in_turn(
        dispatch,
        &[
            (
                "GET http://127.0.0.1:9000/json HTTP/1.1\r\nHost: 127.0.0.1:9000\r\n\r\n",
                JSON,
            ),
            // The Host value is ignored (but must be valid).
            (
                "GET HTTPS://example.com/json?x=1 HTTP/1.1\r\nHost: other\r\n\r\n",
                JSON,
            ),
            ("GET http://[::1]:9000 HTTP/1.1\r\nHost: a\r\n\r\n", HELLO),
            ("HEAD http://a/?q HTTP/1.1\r\nHost: a\r\n\r\n", HELLO_HEAD),
            (
                "GET http://a/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
                "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
              Content-Type: text/plain; charset=utf-8\r\nContent-Length: 6\r\nDate: {date}\r\n\
              Connection: keep-alive\r\n\r\nhello\n",
            ),
        ],
    );
}

fn refuses_bad_absolute_forms(dispatch: Dispatch) {
    let requests: [&[u8]; 5] = [
        // HTTP/1.1 still needs a valid Host.
        b"GET http://127.0.0.1:9000/json HTTP/1.1\r\n\r\n",
        b"GET http://127.0.0.1:9000/json HTTP/1.1\r\nHost: a b\r\n\r\n",
        b"GET http:///json HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET http://user@a/json HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET ftp://a/json HTTP/1.1\r\nHost: a\r\n\r\n",
    ];
    for request in requests {
        answered_then_closed(dispatch, request, &bad_request(false));
    }
}

fn refuses_any_transfer_encoding_with_content_length(dispatch: Dispatch) {
    let requests: [&[u8]; 3] = [
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: \r\nContent-Length: 5\r\n\r\nhello",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding:\r\n\r\nhello",
        // Alone, an empty Transfer-Encoding cannot frame a body either.
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: \r\n\r\n",
    ];
    for request in requests {
        answered_then_closed(dispatch, request, &bad_request(false));
    }
}

fn refuses_targets_in_a_form_the_method_may_not_use(dispatch: Dispatch) {
    let requests: [&[u8]; 7] = [
        b"GET * HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET A HTTP/1.1\r\nHost: t\r\n\r\n",
        b"HEAD %/ HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET :plaintext HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET example.com:443 HTTP/1.1\r\nHost: t\r\n\r\n",
        b"CONNECT / HTTP/1.1\r\nHost: t\r\n\r\n",
        b"CONNECT example.com HTTP/1.1\r\nHost: t\r\n\r\n",
    ];
    for request in requests {
        let head_only = request.starts_with(b"HEAD ");
        answered_then_closed(dispatch, request, &bad_request(head_only));
    }
}

/// A fragment, a backslash or a raw byte over 0x7F (valid UTF-8 or not)
/// has no place in a request target: 400, and the connection closes, in
/// every form and after a later minor version too.
fn refuses_fragments_backslashes_and_raw_non_ascii(dispatch: Dispatch) {
    let requests: [&[u8]; 10] = [
        b"GET /#frag HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /json#x HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /json?q=1#x HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET http://t/json#x HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /json\\ HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /?a\\b HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /caf\xe9 HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /caf\xc3\xa9 HTTP/1.2\r\nHost: t\r\n\r\n",
        b"HEAD /#x HTTP/1.1\r\nHost: t\r\n\r\n",
    ];
    for request in requests {
        let head_only = request.starts_with(b"HEAD ");
        answered_then_closed(dispatch, request, &bad_request(head_only));
    }
}

/// Every route is looked up without dot segments (RFC 3986 §5.2.4, encoded
/// or not), as nginx normalizes a path before any location matches it; a
/// path that would climb above the root is malformed: 400, and the
/// connection closes.
fn resolves_dot_segments_before_routing(dispatch: Dispatch) {
    let not_found = error(404, "Not Found", "", false, false);
    answered_in_turn(
        dispatch,
        &[
            ("GET /nope/../json HTTP/1.1\r\nHost: t\r\n\r\n", JSON),
            ("GET /./json HTTP/1.1\r\nHost: t\r\n\r\n", JSON),
            ("GET /v1/%2E%2e/json?x HTTP/1.1\r\nHost: t\r\n\r\n", JSON),
            (
                "GET http://t/a/b/../../json HTTP/1.1\r\nHost: t\r\n\r\n",
                JSON,
            ),
            ("HEAD /json/.. HTTP/1.1\r\nHost: t\r\n\r\n", HELLO_HEAD),
            // Not a dot segment, and `/json/` is no route.
            ("GET /.json HTTP/1.1\r\nHost: t\r\n\r\n", &not_found),
            ("GET /json/. HTTP/1.1\r\nHost: t\r\n\r\n", &not_found),
        ],
    );
    let requests: [&[u8]; 5] = [
        b"GET /.. HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /../json HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /json/../../json HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /%2e%2e/json HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET http://t/../json HTTP/1.1\r\nHost: t\r\n\r\n",
    ];
    for request in requests {
        answered_then_closed(dispatch, request, &bad_request(false));
    }
}

/// Neither method is implemented for any target: 405, as for `OPTIONS /`.
fn answers_options_asterisk_and_connect_with_405(dispatch: Dispatch) {
    let allowed = method_not_allowed(false);
    answered_in_turn(
        dispatch,
        &[
            ("OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n", &allowed),
            (
                "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
                &allowed,
            ),
            ("GET / HTTP/1.1\r\nHost: t\r\n\r\n", HELLO),
        ],
    );
}

/// A method that is a valid token but that no route takes (one this server
/// does not know, or `get`: methods are case-sensitive) is answered as
/// nginx answers it: 405 listing what the path takes, 404 where nothing is.
/// Its framing is known, so its body is skipped, the connection stays, and
/// the requests pipelined behind it, all sent in one write, are served.
fn answers_unknown_methods_with_405_and_serves_on(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(
        b"PAUSE / HTTP/1.1\r\nHost: t\r\n\r\n\
          PROPFIND / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello\
          G|T /json HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
          get / HTTP/1.1\r\nHost: t\r\n\r\n\
          PAUSE /nope HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /json HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    for _ in 0..4 {
        assert_response(&client.response(false), &method_not_allowed(false));
    }
    assert_response(
        &client.response(false),
        &error(404, "Not Found", "", false, false),
    );
    assert_response(&client.response(false), JSON);
    // And the connection stays for more.
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(&client.response(false), HELLO);
}

/// Known methods a route does not take keep their 405, which lists what
/// the path takes, and the connection stays.
fn answers_known_methods_a_route_lacks_with_405(dispatch: Dispatch) {
    let allowed = method_not_allowed(false);
    answered_in_turn(
        dispatch,
        &[
            ("TRACE / HTTP/1.1\r\nHost: t\r\n\r\n", &allowed),
            ("DELETE /json HTTP/1.1\r\nHost: t\r\n\r\n", &allowed),
            ("PATCH /json HTTP/1.1\r\nHost: t\r\n\r\n", &allowed),
            ("GET / HTTP/1.1\r\nHost: t\r\n\r\n", HELLO),
        ],
    );
}

fn refuses_malformed_chunk_size_lines_at_once(dispatch: Dispatch) {
    let bodies: [&[u8]; 6] = [
        b"5;\nhello\n0\n\n",
        b"5;\r\nhello\r\n0\r\n\r\n",
        b"5;bad[=x\r\nhello\r\n0\r\n\r\n",
        b"5 \r\nhello\r\n0\r\n\r\n",
        b"5;a=\x00\r\nhello\r\n0\r\n\r\n",
        b"5;a\x01\r\nhello\r\n0\r\n\r\n",
    ];
    for body in bodies {
        let mut request =
            b"GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        request.extend_from_slice(body);
        answered_then_closed(dispatch, &request, &bad_request(false));
    }
}

/// A chunk size no 64-bit number holds is malformed, 400 (Http11Probe's
/// MAL-CHUNK-SIZE-OVERFLOW, a MUST), where it was 413; the largest size
/// that is a number stays a body over the limit, 413. Either closes.
fn refuses_a_chunk_size_that_overflows_as_malformed(dispatch: Dispatch) {
    let head = "GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    let overflow = format!("{head}FFFFFFFFFFFFFFFF0\r\nhello\r\n0\r\n\r\n");
    answered_then_closed(dispatch, overflow.as_bytes(), &bad_request(false));
    let largest = format!("{head}FFFFFFFFFFFFFFFF\r\nhello\r\n0\r\n\r\n");
    let too_large = error(413, "Payload Too Large", "", true, false);
    answered_then_closed(dispatch, largest.as_bytes(), &too_large);
}

fn accepts_chunk_extensions_by_the_grammar(dispatch: Dispatch) {
    let chunked = "GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
        5 ; a = \"q\\\"s\" ;b\r\nhello\r\n3;c=tok\r\nabc\r\n0\r\n\r\n";
    answered_in_turn(dispatch, &[(chunked, HELLO), (chunked, HELLO)]);
}

/// A route that answers without the body must not invite it: the answer
/// comes at once, and the connection closes, since the client may send the
/// body or not.
fn expect_continue_only_for_a_route_that_takes_the_body(dispatch: Dispatch) {
    let cases = [
        (
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
            method_not_allowed(true),
        ),
        (
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
            method_not_allowed(true),
        ),
        (
            "GET /nope HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
            error(404, "Not Found", "", true, false),
        ),
        (
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1048577\r\nExpect: 100-continue\r\n\r\n",
            error(413, "Payload Too Large", "", true, false),
        ),
    ];
    for (request, expected) in cases {
        answered_then_closed(dispatch, request.as_bytes(), &expected);
    }

    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(
        b"GET /json HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    );
    assert_eq!(client.response(false), CONTINUE);
    client.send(b"hello");
    assert_response(&client.response(false), JSON);
}

fn serves_later_http1_minor_versions_as_http11(dispatch: Dispatch) {
    answered_in_turn(
        dispatch,
        &[
            ("GET / HTTP/1.2\r\nHost: t\r\n\r\n", HELLO),
            ("GET /json HTTP/1.9\r\nHost: t\r\n\r\n", JSON),
            ("HEAD / HTTP/1.2\r\nHost: t\r\n\r\n", HELLO_HEAD),
        ],
    );
    // Like HTTP/1.1, it needs a Host.
    answered_then_closed(dispatch, b"GET / HTTP/1.2\r\n\r\n", &bad_request(false));
}

fn refuses_other_major_versions_with_505(dispatch: Dispatch) {
    let unsupported = error(505, "HTTP Version Not Supported", "", true, false);
    for version in ["HTTP/2.0", "HTTP/0.9", "HTTP/3.0"] {
        let request = format!("GET / {version}\r\nHost: t\r\n\r\n");
        answered_then_closed(dispatch, request.as_bytes(), &unsupported);
    }
    let malformed = ["HTTP/1.10", "HTTP/1", "http/1.1"];
    for version in malformed {
        let request = format!("GET / {version}\r\nHost: t\r\n\r\n");
        answered_then_closed(dispatch, request.as_bytes(), &bad_request(false));
    }
}

fn answers_if_none_match_star_with_304(dispatch: Dispatch) {
    let star = |method: &str, path: &str| {
        format!("{method} {path} HTTP/1.1\r\nHost: t\r\nIf-None-Match: *\r\n\r\n")
    };
    let (get_json, head_root, get_user, missing, post) = (
        star("GET", "/json"),
        star("HEAD", "/"),
        star("GET", "/v1/user"),
        star("GET", "/nope"),
        star("DELETE", "/json"),
    );
    let not_found = error(404, "Not Found", "", false, false);
    let allowed = method_not_allowed(false);
    answered_in_turn(
        dispatch,
        &[
            (&get_json, NOT_MODIFIED),
            (&head_root, NOT_MODIFIED),
            (&get_user, NOT_MODIFIED),
            (&missing, &not_found),
            (&post, &allowed),
            // A route without an entity tag matches no tag.
            (
                "GET /json HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"x\", W/\"y\"\r\n\r\n",
                JSON,
            ),
        ],
    );
}

in_both_modes!(
    refuses_invalid_host_values,
    refuses_an_empty_host,
    accepts_valid_host_values,
    routes_absolute_form_by_its_path,
    refuses_bad_absolute_forms,
    refuses_any_transfer_encoding_with_content_length,
    refuses_targets_in_a_form_the_method_may_not_use,
    refuses_fragments_backslashes_and_raw_non_ascii,
    resolves_dot_segments_before_routing,
    answers_options_asterisk_and_connect_with_405,
    answers_unknown_methods_with_405_and_serves_on,
    answers_known_methods_a_route_lacks_with_405,
    refuses_malformed_chunk_size_lines_at_once,
    refuses_a_chunk_size_that_overflows_as_malformed,
    accepts_chunk_extensions_by_the_grammar,
    expect_continue_only_for_a_route_that_takes_the_body,
    serves_later_http1_minor_versions_as_http11,
    refuses_other_major_versions_with_505,
    answers_if_none_match_star_with_304,
);
