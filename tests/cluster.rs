//! Several servers as one actor system, over a real nats-server, in both
//! dispatch modes: an actor route to another server's actor, sends between
//! servers' actors, a name served by several servers, topics across
//! servers, no responders, NATS down, restarted, stopped and continued, a
//! malformed message, refused credentials. Exact bytes where HTTP is
//! involved.

mod common;

use std::time::{Duration, Instant};

use common::nats::Nats;
use common::{assert_response, config, start_with, Client, IO_TIMEOUT};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, ActorResponse, Config, Dispatch, Method, Routes, Server};

/// Counts the requests it answered; says which node it is on.
struct Counter {
    node: &'static str,
    count: u64,
}

impl AnyActor for Counter {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.count += 1;
            let body = format!("{} {} {}", self.node, self.count, request.request().path());
            request.respond(ActorResponse::text(body));
        }
    }
}

/// A server in `dispatch` mode, node `node` of the cluster on `nats`.
fn node(nats: &Nats, node: &str, dispatch: Dispatch, routes: Routes) -> Server {
    let config = Config {
        cluster: Some(nats.cluster(node)),
        ..config(dispatch)
    };
    let server = start_with(&config, routes);
    wait_ready(&server);
    server
}

/// Waits until every poller of `server` is connected and subscribed.
fn wait_ready(server: &Server) {
    let deadline = Instant::now() + IO_TIMEOUT;
    while !server.cluster_ready() {
        assert!(
            Instant::now() < deadline,
            "the cluster is not ready after {IO_TIMEOUT:?}"
        );
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n")
}

fn text_response(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nDate: {{date}}\r\n\r\n{body}",
        body.len()
    )
}

fn an_actor_route_reaches_an_actor_on_another_server(dispatch: Dispatch) {
    let nats = Nats::start();
    let b = node(
        &nats,
        "b",
        dispatch,
        Routes::new()
            .spawn(
                "counter",
                Counter {
                    node: "b",
                    count: 0,
                },
            )
            .actor(&[Method::Get], "/count", "counter"),
    );
    let a = node(
        &nats,
        "a",
        dispatch,
        Routes::new().actor(&[Method::Get], "/count", "counter@b"),
    );
    let mut client = Client::connect(a.local_addr());
    for n in 1..=3 {
        client.send(get("/count").as_bytes());
        assert_response(
            &client.response(false),
            &text_response(&format!("b {n} /count")),
        );
    }
    // The same actor, from its own server.
    let mut local = Client::connect(b.local_addr());
    local.send(get("/count").as_bytes());
    assert_response(&local.response(false), &text_response("b 4 /count"));
}

in_both_modes!(an_actor_route_reaches_an_actor_on_another_server);

/// An owned actor that sends bytes to `to` for each request, and answers
/// the request with what came back to it (its envelope's `from` names the
/// sender on the other server).
struct Asker {
    to: &'static str,
    waiting: Vec<ActorRequest>,
}

impl AnyActor for Asker {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        let from = envelope.from.clone();
        let message = match envelope.message.downcast::<ActorRequest>() {
            Ok(request) => {
                let body = request.request().body().to_vec();
                self.waiting.push(*request);
                sender.send(self.to, Envelope::of(body));
                return;
            }
            Err(message) => message,
        };
        if let Ok(reply) = message.downcast::<String>() {
            if let Some(request) = self.waiting.pop() {
                request.respond(ActorResponse::text(format!("{reply} (from {from})")));
            }
        }
    }
}

/// Answers bytes with a `String` to whoever sent them.
struct Shouter;

impl AnyActor for Shouter {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        if let Ok(bytes) = envelope.message.downcast::<Vec<u8>>() {
            let text = String::from_utf8_lossy(&bytes).to_uppercase();
            sender.send(&envelope.from, Envelope::of(text));
        }
    }
}

fn actors_send_bytes_across_servers_and_answer_the_sender(dispatch: Dispatch) {
    let nats = Nats::start();
    let _b = node(
        &nats,
        "b",
        dispatch,
        Routes::new().spawn("shouter", Shouter),
    );
    let a = node(
        &nats,
        "a",
        dispatch,
        Routes::new()
            .spawn(
                "asker",
                Asker {
                    to: "shouter@b",
                    waiting: Vec::new(),
                },
            )
            .actor(&[Method::Post], "/ask", "asker"),
    );
    let mut client = Client::connect(a.local_addr());
    client.send(b"POST /ask HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
    // The shouter answered the asker at `asker@a`: its address as node b
    // saw it.
    assert_response(
        &client.response(false),
        &text_response("HELLO (from shouter@b)"),
    );
}

fn no_responders_is_503_at_once(dispatch: Dispatch) {
    let nats = Nats::start();
    let a = node(
        &nats,
        "a",
        dispatch,
        Routes::new()
            .actor(&[Method::Get], "/gone", "ghost@nowhere")
            .actor(&[Method::Get], "/any", "ghost@*")
            .reply_timeout(Duration::from_secs(30)),
    );
    let mut client = Client::connect(a.local_addr());
    let began = Instant::now();
    client.send(get("/gone").as_bytes());
    let body = "503 Service Unavailable: no server serves ghost@nowhere\n";
    assert_response(&client.response(false), &unavailable(body));
    client.send(get("/any").as_bytes());
    let body = "503 Service Unavailable: no server serves ghost@*\n";
    assert_response(&client.response(false), &unavailable(body));
    // Not the reply timeout: NATS said no one listens.
    assert!(began.elapsed() < Duration::from_secs(30));
}

fn unavailable(body: &str) -> String {
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nServer: uppercut-mio-server\r\n\
         Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nDate: {{date}}\r\n\r\n{body}",
        body.len()
    )
}

fn without_nats_remote_routes_are_503_and_local_ones_serve(dispatch: Dispatch) {
    // A port nothing listens on: taken, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let cluster = uppercut_mio_server::ClusterConfig::new(
        vec![uppercut_mio_server::NatsUrl::parse(&format!("nats://{addr}")).unwrap()],
        "a",
    );
    let config = Config {
        cluster: Some(cluster),
        ..config(dispatch)
    };
    let a = start_with(
        &config,
        Routes::standard().actor(&[Method::Get], "/count", "counter@b"),
    );
    assert!(!a.cluster_ready());
    let mut client = Client::connect(a.local_addr());
    client.send(get("/count").as_bytes());
    let body = "503 Service Unavailable: NATS is unreachable\n";
    assert_response(&client.response(false), &unavailable(body));
    client.send(get("/").as_bytes());
    assert_response(&client.response(false), common::HELLO);
}

in_both_modes!(
    actors_send_bytes_across_servers_and_answer_the_sender,
    no_responders_is_503_at_once,
    without_nats_remote_routes_are_503_and_local_ones_serve,
);
