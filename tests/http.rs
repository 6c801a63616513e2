//! The routes, keep-alive, pipelining and HTTP/1.0 over real sockets, in both
//! dispatch modes.

mod common;

use common::{assert_response, exchange, start, v1_user, Client, HELLO, HELLO_HEAD};
use uppercut_mio_server::Dispatch;

const PLAINTEXT: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain\r\nContent-Length: 13\r\nDate: {date}\r\n\r\nHello, World!";
const JSON: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: application/json\r\nContent-Length: 27\r\nDate: {date}\r\n\r\n\
    {\"message\":\"Hello, World!\"}";

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n")
}

fn serves_every_route(dispatch: Dispatch) {
    let server = start(dispatch);
    assert_response(&exchange(&server, &get("/")), HELLO);
    assert_response(&exchange(&server, &get("/?name=value")), HELLO);
    assert_response(&exchange(&server, &get("/plaintext")), PLAINTEXT);
    assert_response(&exchange(&server, &get("/json")), JSON);
    assert_response(&exchange(&server, &get("/v1/user")), &v1_user());
    let head = exchange(&server, "HEAD / HTTP/1.1\r\nHost: test\r\n\r\n");
    assert_response(&head, HELLO_HEAD);
}

fn reuses_one_connection_for_1000_requests(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    let routes = [
        ("/", HELLO.to_string()),
        ("/json", JSON.to_string()),
        ("/v1/user", v1_user()),
    ];
    for i in 0..1000 {
        let (path, expected) = &routes[i % routes.len()];
        client.send(get(path).as_bytes());
        assert_response(&client.response(false), expected);
    }
}

fn answers_100_pipelined_requests_in_order(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    let paths = ["/", "/plaintext", "/json", "/v1/user", "/missing"];
    let batch: String = (0..100).map(|i| get(paths[i % paths.len()])).collect();
    client.send(batch.as_bytes());
    let user = v1_user();
    for i in 0..100 {
        let response = client.response(false);
        match paths[i % paths.len()] {
            "/" => assert_response(&response, HELLO),
            "/plaintext" => assert_response(&response, PLAINTEXT),
            "/json" => assert_response(&response, JSON),
            "/v1/user" => assert_response(&response, &user),
            _ => assert!(response.starts_with(b"HTTP/1.1 404 Not Found\r\n")),
        }
    }
}

fn parses_requests_sent_one_byte_at_a_time(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    let chunked = "POST /json HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
        4\r\nabcd\r\n0\r\n\r\n";
    let sized = "GET /json HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello";
    for request in [get("/plaintext").as_str(), chunked, sized] {
        for byte in request.as_bytes() {
            client.send(&[*byte]);
        }
        let response = client.response(false);
        if request.starts_with("POST") {
            assert!(response.starts_with(b"HTTP/1.1 405 Method Not Allowed\r\n"));
        } else if request.contains("/json") {
            assert_response(&response, JSON);
        } else {
            assert_response(&response, PLAINTEXT);
        }
    }
}

fn discards_bodies_between_pipelined_requests(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    let batch = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nGET /json x\
         GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3;ext\r\nabc\r\n0\r\nT: 1\r\n\r\n{}",
        get("/plaintext")
    );
    client.send(batch.as_bytes());
    assert_response(&client.response(false), HELLO);
    assert_response(&client.response(false), HELLO);
    assert_response(&client.response(false), PLAINTEXT);
}

fn sends_100_continue_before_reading_a_body(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
    assert_eq!(client.response(false), b"HTTP/1.1 100 Continue\r\n\r\n");
    client.send(b"abc");
    assert_response(&client.response(false), HELLO);
}

fn closes_http10_unless_kept_alive(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(b"GET / HTTP/1.0\r\n\r\n");
    let closing = HELLO.replace("{date}\r\n", "{date}\r\nConnection: close\r\n");
    assert_response(&client.response(false), &closing);
    client.assert_closed();

    let mut client = Client::connect(server.local_addr());
    let kept = HELLO.replace("{date}\r\n", "{date}\r\nConnection: keep-alive\r\n");
    for _ in 0..3 {
        client.send(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        assert_response(&client.response(false), &kept);
    }
}

fn honours_connection_close_after_the_response(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    // The request after the closing one must not be answered.
    client.send(
        b"GET /v1/user HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    let closing = v1_user().replace("{date}\r\n", "{date}\r\nConnection: close\r\n");
    assert_response(&client.response(false), &closing);
    client.assert_closed();
}

fn answers_when_the_client_half_closes(dispatch: Dispatch) {
    let server = start(dispatch);
    let mut client = Client::connect(server.local_addr());
    client.send(format!("{}{}", get("/"), get("/json")).as_bytes());
    client.close_write();
    assert_response(&client.response(false), HELLO);
    assert_response(&client.response(false), JSON);
    client.assert_closed();
}

in_both_modes!(
    serves_every_route,
    reuses_one_connection_for_1000_requests,
    answers_100_pipelined_requests_in_order,
    parses_requests_sent_one_byte_at_a_time,
    discards_bodies_between_pipelined_requests,
    sends_100_continue_before_reading_a_body,
    closes_http10_unless_kept_alive,
    honours_connection_close_after_the_response,
    answers_when_the_client_half_closes,
);
