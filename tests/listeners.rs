//! One server on several listeners, plain and TLS, in both dispatch
//! modes: they share the routes, the actors and the topics (an HTTP client
//! and an HTTPS client count on one counter; a `ws://` member and a
//! `wss://` member of one room hear each other), and a plain request to
//! the TLS listener gets the plain 400 it always did.

mod common;
mod route_common;

use std::sync::Arc;

use common::integrity::{client_frame, connect, read_frame, upgrade, Pace, Reader};
use common::tls::Certificates;
use common::{config, start_with, Client};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    ActorRequest, ActorResponse, Config, Dispatch, Listener, Message, Method, Outgoing, Routes,
    WebSocket, WsContext,
};

struct Counter(u64);

impl AnyActor for Counter {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.0 += 1;
            request.respond(ActorResponse::text(self.0.to_string()));
        }
    }
}

struct Member;

impl WebSocket for Member {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        context.subscribe("room");
        context.send_text("joined");
    }

    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        if let Message::Text(text) = message {
            let _ = context.publish("room", &Outgoing::text(text));
        }
    }
}

/// A test configuration listening on loopback ports of its own, one
/// listener per entry of `tls` (TLS or plain), with `certificates`.
fn on_listeners(dispatch: Dispatch, certificates: &Certificates, tls: &[bool]) -> Config {
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    Config {
        tls: Some(certificates.files.clone()),
        listeners: tls.iter().map(|&tls| Listener { addr: any, tls }).collect(),
        ..config(dispatch)
    }
}

fn listeners_share_routes_actors_and_topics(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("listeners-{}", dispatch.name()));
    let config = on_listeners(dispatch, &certificates, &[false, true, false]);
    let routes = Routes::new()
        .spawn("counter", Counter(0))
        .actor(&[Method::Get], "/count", "counter")
        .websocket("/room", |_| Member);
    let server = start_with(&config, routes);
    let listeners = server.listeners().to_vec();
    assert_eq!(
        listeners.iter().map(|l| l.tls).collect::<Vec<_>>(),
        [false, true, false]
    );
    assert_eq!(server.local_addr(), listeners[0].addr);
    assert!(
        listeners.iter().all(|l| l.addr.port() != 0),
        "ports resolved"
    );
    let tls_config = certificates.client_config();
    let get = b"GET /count HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let body = |response: Vec<u8>| {
        common::text(&response)
            .split("\r\n\r\n")
            .nth(1)
            .unwrap()
            .to_string()
    };
    let mut plain = Client::connect(listeners[0].addr);
    let mut secure = common::tls::connect(listeners[1].addr, &tls_config);
    let mut other = Client::connect(listeners[2].addr);
    for n in 1..=6 {
        let response = match n % 3 {
            0 => {
                secure.send(get);
                secure.response(false)
            }
            1 => {
                plain.send(get);
                plain.response(false)
            }
            _ => {
                other.send(get);
                other.response(false)
            }
        };
        assert_eq!(body(response), n.to_string(), "one counter");
    }
    // ws:// and wss:// in one room.
    let join = |addr, tls: Option<&Arc<rustls::ClientConfig>>| {
        let mut member = Reader::new(connect(addr, tls, Pace::Fast), Pace::Fast);
        upgrade(&mut member, "/room");
        assert_eq!(read_frame(&mut member).payload, b"joined");
        member
    };
    let mut ws = join(listeners[0].addr, None);
    let mut wss = join(listeners[1].addr, Some(&tls_config));
    ws.send(&client_frame(1, b"from ws", [1, 2, 3, 4]));
    wss.send(&client_frame(1, b"from wss", [5, 6, 7, 8]));
    for member in [&mut ws, &mut wss] {
        let mut heard: Vec<Vec<u8>> = (0..2).map(|_| read_frame(member).payload).collect();
        heard.sort();
        assert_eq!(heard, [b"from ws".to_vec(), b"from wss".to_vec()]);
    }
    // Plain HTTP to the TLS listener: the 400 it always got.
    let mut wrong = Client::connect(listeners[1].addr);
    wrong.send(get);
    let response = common::text(&wrong.rest_until_close());
    assert!(
        response.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{response}"
    );
}

in_both_modes!(listeners_share_routes_actors_and_topics);

/// With `--redirect-https`, a request that did not come over TLS is sent
/// to the same host, path and query over HTTPS (308, so a POST stays a
/// POST), whatever its route (a 404's too), on a kept connection; a
/// request over TLS is served; a request without a usable host gets 400.
fn plain_http_is_redirected_to_https(dispatch: Dispatch) {
    let certificates = Certificates::new(&format!("redirect-{}", dispatch.name()));
    let config = Config {
        redirect_https: Some(8443),
        ..on_listeners(dispatch, &certificates, &[false, true])
    };
    let server = start_with(&config, Routes::standard());
    let listeners = server.listeners().to_vec();
    let redirect = |location: &str| {
        route_common::built(
            "308 Permanent Redirect",
            &format!("Location: {location}\r\n"),
            "",
        )
    };
    let mut plain = Client::connect(listeners[0].addr);
    plain.send(b"GET /v1/user?id=7&x=%20 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n");
    common::assert_response(
        &plain.response(false),
        &redirect("https://example.com:8443/v1/user?id=7&x=%20"),
    );
    // The same connection, a path with no route, a body: redirected too.
    plain.send(b"POST /nowhere HTTP/1.1\r\nHost: [::1]\r\nContent-Length: 2\r\n\r\n{}");
    common::assert_response(
        &plain.response(false),
        &redirect("https://[::1]:8443/nowhere"),
    );
    // HTTP/1.0 may leave the host out.
    let mut hostless = Client::connect(listeners[0].addr);
    hostless.send(b"GET / HTTP/1.0\r\n\r\n");
    let body = "400 Bad Request: no host to redirect to\n";
    common::assert_response(
        &hostless.rest_until_close(),
        &format!(
            "HTTP/1.1 400 Bad Request\r\nServer: uppercut-mio-server\r\n\
             Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
             Date: {{date}}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    // Over TLS, the route answers.
    let mut secure = common::tls::connect(listeners[1].addr, &certificates.client_config());
    secure.send(b"GET / HTTP/1.1\r\nHost: example.com:8443\r\n\r\n");
    let response = common::text(&secure.response(false));
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
}

in_both_modes!(plain_http_is_redirected_to_https);
