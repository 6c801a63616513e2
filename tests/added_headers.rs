//! Header fields added to every response (`--header`, `Config::headers`):
//! canned, HEAD, error, handler, actor, static and 304 responses carry them
//! right after `Date`, before the `Connection` field a close adds, in both
//! dispatch modes; a field the server writes itself is refused at start.

mod common;
mod static_common;

use std::io::ErrorKind;

use common::{assert_response, config, error_response, start_with, Client, HELLO, HELLO_HEAD};
use static_common::{TempTree, CSS, CSS_HEAD, CSS_NOT_MODIFIED};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, ActorResponse, CannedResponse, Dispatch, Method};
use uppercut_mio_server::{Routes, Server, StatusCode};

const ADDED: &str = "Strict-Transport-Security: max-age=63072000\r\n\
    X-Content-Type-Options: nosniff\r\n";

/// `expected` with the added fields after its `Date` line.
fn with_added(expected: &str) -> String {
    expected.replacen("Date: {date}\r\n", &format!("Date: {{date}}\r\n{ADDED}"), 1)
}

/// Answers every request with `actor` in plain text.
struct Named;

impl AnyActor for Named {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let response = ActorResponse::new(StatusCode::OK)
                .with_header("Content-Type", "text/plain")
                .expect("a valid header");
            request.respond(response.with_body("actor"));
        }
    }
}

fn start(dispatch: Dispatch, site: &TempTree) -> Server {
    let mut config = config(dispatch);
    config.static_dir = Some(site.root.clone());
    config.max_body = 16;
    config.headers = vec![
        (
            "Strict-Transport-Security".into(),
            "max-age=63072000".into(),
        ),
        ("X-Content-Type-Options".into(), " nosniff".into()),
    ];
    let routes = Routes::new()
        .route(
            "/",
            CannedResponse::ok("text/plain; charset=utf-8", "hello\n"),
        )
        .handler(&[Method::Get], "/handler", |_, response| {
            let _ = response.header("Cache-Control", "no-store");
            response.body(b"handler");
        })
        .actor(&[Method::Get], "/actor", "named")
        .spawn("named", Named);
    start_with(&config, routes)
}

fn get(client: &mut Client, request: &str) -> Vec<u8> {
    client.send(request.as_bytes());
    client.response(request.starts_with("HEAD "))
}

fn every_kind_of_response_carries_the_added_fields(dispatch: Dispatch) {
    let site = TempTree::new("added-headers");
    site.file("site.css", CSS.as_bytes());
    let server = start(dispatch, &site);
    let mut client = Client::connect(server.local_addr());
    let handler = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nCache-Control: no-store\r\n\
        Content-Length: 7\r\nDate: {date}\r\n\r\nhandler";
    let actor = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: text/plain\r\n\
        Content-Length: 5\r\nDate: {date}\r\n\r\nactor";
    let css = format!("{CSS_HEAD}{CSS}");
    let cases = [
        ("GET / HTTP/1.1\r\nHost: t\r\n\r\n", HELLO.to_string()),
        ("HEAD / HTTP/1.1\r\nHost: t\r\n\r\n", HELLO_HEAD.into()),
        (
            "GET /nowhere HTTP/1.1\r\nHost: t\r\n\r\n",
            error_response(404, "Not Found", "", false, false),
        ),
        ("GET /handler HTTP/1.1\r\nHost: t\r\n\r\n", handler.into()),
        ("GET /actor HTTP/1.1\r\nHost: t\r\n\r\n", actor.into()),
        ("GET /site.css HTTP/1.1\r\nHost: t\r\n\r\n", css),
        (
            "GET /site.css HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"4e78ec085d82e2a8\"\r\n\r\n",
            CSS_NOT_MODIFIED.into(),
        ),
    ];
    for (request, expected) in cases {
        assert_response(&get(&mut client, request), &with_added(&expected));
    }
    // A refusal that closes: the added fields, then `Connection: close`.
    let too_large = "POST /handler HTTP/1.1\r\nHost: t\r\nContent-Length: 17\r\n\r\n";
    let refused = error_response(413, "Payload Too Large", "", true, false);
    assert_response(&get(&mut client, too_large), &with_added(&refused));
    client.assert_closed();
}

in_both_modes!(every_kind_of_response_carries_the_added_fields);

#[test]
fn a_field_the_server_writes_itself_is_refused_at_start() {
    for (name, value, message) in [
        (
            "Content-Length",
            "1",
            "a header for every response: the server writes the Content-Length header of each \
             response itself",
        ),
        (
            "X-Split",
            "a\r\nInjected: yes",
            "a header for every response: the value of the X-Split header has a control \
             character (CR, LF, NUL ...)",
        ),
    ] {
        let mut config = config(Dispatch::Local);
        config.headers = vec![(name.into(), value.into())];
        match Server::start(&config, Routes::new()) {
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::InvalidInput);
                assert_eq!(e.to_string(), message);
            }
            Ok(_) => panic!("{name}: {value:?} was accepted"),
        }
    }
}
