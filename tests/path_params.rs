//! Path patterns (`/users/{id}`) over real sockets, in both dispatch modes:
//! parameters decoded for handler, actor and WebSocket routes, where
//! patterns rank against exact and prefix routes, methods and 405, the
//! client's address on a request, and overlapping patterns refused at
//! start.

mod common;
mod route_common;

use std::io::ErrorKind;

use common::{assert_response, config, error_response, start_with, Client};
use route_common::{built, text};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    ActorRequest, ActorResponse, CannedResponse, Dispatch, Message, Method, Routes, Server,
    WebSocket, WsContext,
};

/// Answers `team T member M from IP`, read from its request.
struct Members;

impl AnyActor for Members {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let seen = request.request();
            let team = seen.param("team").unwrap_or_default().into_owned();
            let member = seen.param("id").unwrap_or_default().into_owned();
            let ip = seen.peer_addr().map(|peer| peer.ip().to_string());
            let answer = format!(
                "team {team} member {member} from {}",
                ip.unwrap_or_default()
            );
            request.respond(ActorResponse::text(answer));
        }
    }
}

/// Sends the room it was opened for, then nothing.
struct Room(String);

impl WebSocket for Room {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        let room = format!("room {}", self.0);
        context.send_text(&room);
    }

    fn on_message(&mut self, _message: Message<'_>, _context: &mut WsContext<'_>) {}
}

fn routes() -> Routes {
    Routes::new()
        .handler(
            &[Method::Get, Method::Post],
            "/users/{id}",
            |request, response| {
                let _ = response.header("Content-Type", "text/plain; charset=utf-8");
                let id = request.param("id");
                let missing = request.param("name");
                response.body(format!("user {} {:?}", id.unwrap_or_default(), missing).as_bytes());
            },
        )
        .handler(&[Method::Get], "/users/me", |_, response| {
            response.body(b"exact");
        })
        .handler(&[Method::Get], "/files/{name}", |request, response| {
            response.body(format!("file {}", request.param("name").unwrap_or_default()).as_bytes());
        })
        .route("/files/*", CannedResponse::ok("text/plain", "prefix"))
        .handler(&[Method::Get], "/whoami", |request, response| {
            let peer = request.peer_addr().map(|peer| peer.ip().to_string());
            response.body(peer.unwrap_or_default().as_bytes());
        })
        .actor(&[Method::Get], "/teams/{team}/members/{id}", "members")
        .spawn("members", Members)
        .websocket("/rooms/{room}", |request| {
            Room(request.param("room").unwrap_or_default().into_owned())
        })
}

fn get(client: &mut Client, target: &str) -> Vec<u8> {
    client.send(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    client.response(false)
}

fn plain(body: &str) -> String {
    built("200 OK", "", body)
}

fn handlers_read_decoded_parameters(dispatch: Dispatch) {
    let server = start_with(&config(dispatch), routes());
    let mut client = Client::connect(server.local_addr());
    let utf8 = "Content-Type: text/plain; charset=utf-8\r\n";
    let cases = [
        ("/users/7", "user 7 None"),
        ("/users/J%C3%BCrgen", "user Jürgen None"),
        // Matched in normal form: the dot segment is gone.
        ("/users/x/../42", "user 42 None"),
    ];
    for (target, body) in cases {
        assert_response(&get(&mut client, target), &built("200 OK", utf8, body));
    }
    // A value that does not decode to UTF-8 reads as none.
    assert_response(
        &get(&mut client, "/users/%FF"),
        &built("200 OK", utf8, "user  None"),
    );
    client.send(b"POST /users/8 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    assert_response(
        &client.response(false),
        &built("200 OK", utf8, "user 8 None"),
    );
}

fn exact_routes_first_then_patterns_then_prefixes(dispatch: Dispatch) {
    let server = start_with(&config(dispatch), routes());
    let mut client = Client::connect(server.local_addr());
    assert_response(&get(&mut client, "/users/me"), &plain("exact"));
    assert_response(&get(&mut client, "/files/a"), &plain("file a"));
    let prefix = built("200 OK", "Content-Type: text/plain\r\n", "prefix");
    assert_response(&get(&mut client, "/files/a/b"), &prefix);
    let not_found = error_response(404, "Not Found", "", false, false);
    for target in ["/users/", "/users", "/users/7/posts", "/users/a%2Fb"] {
        assert_response(&get(&mut client, target), &not_found);
    }
    // Another method at the pattern: 405 with the pattern's methods.
    client.send(b"DELETE /users/7 HTTP/1.1\r\nHost: t\r\n\r\n");
    let not_allowed = error_response(
        405,
        "Method Not Allowed",
        "Allow: GET, HEAD, POST\r\n",
        false,
        false,
    );
    assert_response(&client.response(false), &not_allowed);
}

fn actors_and_websockets_read_parameters_and_the_peer(dispatch: Dispatch) {
    let server = start_with(&config(dispatch), routes());
    let mut client = Client::connect(server.local_addr());
    assert_response(
        &get(&mut client, "/teams/red%20sox/members/9"),
        &text("team red sox member 9 from 127.0.0.1"),
    );
    assert_response(&get(&mut client, "/whoami"), &plain("127.0.0.1"));
    let mut ws = Client::connect(server.local_addr());
    ws.send(
        b"GET /rooms/lobby HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    assert!(ws.response(true).starts_with(b"HTTP/1.1 101 "));
    assert_eq!(ws.exactly(12), b"\x81\x0aroom lobby");
}

in_both_modes!(
    handlers_read_decoded_parameters,
    exact_routes_first_then_patterns_then_prefixes,
    actors_and_websockets_read_parameters_and_the_peer,
);

fn refused(routes: Routes) -> String {
    match Server::start(&config(Dispatch::Local), routes) {
        Ok(_) => panic!("the server started"),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            e.to_string()
        }
    }
}

#[test]
fn overlapping_or_malformed_patterns_are_refused_at_start() {
    let noop = |_: &uppercut_mio_server::Request<'_>, _: &mut uppercut_mio_server::Response<'_>| {};
    let overlapping = Routes::new()
        .handler(&[Method::Get], "/a/{x}/c", noop)
        .handler(&[Method::Post], "/a/b/{y}", noop);
    assert_eq!(
        refused(overlapping),
        "route paths \"/a/{x}/c\" and \"/a/b/{y}\" can match the same path: which answers would be a guess"
    );
    let renamed = Routes::new()
        .handler(&[Method::Get], "/users/{id}", noop)
        .handler(&[Method::Post], "/users/{name}", noop);
    assert!(refused(renamed).contains("\"/users/{id}\" and \"/users/{name}\""));
    let partial = Routes::new().handler(&[Method::Get], "/users/x{id}", noop);
    assert_eq!(
        refused(partial),
        "route path \"/users/x{id}\": a parameter takes a whole segment, as /users/{id}"
    );
    let canned = Routes::new().route("/users/{id}", CannedResponse::ok("text/plain", "x"));
    assert_eq!(
        refused(canned),
        "route path \"/users/{id}\": a canned route has no parameters (use a handler)"
    );
}
