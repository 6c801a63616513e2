//! Several servers as one actor system, over a real nats-server, in both
//! dispatch modes: an actor route to another server's actor, sends between
//! servers' actors, a name served by several servers, topics across
//! servers, no responders, NATS down, restarted, stopped and continued, a
//! malformed message, refused credentials, NKEY and `.creds` keys. Exact
//! bytes where HTTP is involved.

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

/// A WebSocket member of the topic `room`: what its client sends is
/// published there.
struct RoomMember;

impl uppercut_mio_server::WebSocket for RoomMember {
    fn on_open(&mut self, context: &mut uppercut_mio_server::WsContext<'_>) {
        context.subscribe("room");
        context.send_text("joined");
    }

    fn on_message(
        &mut self,
        message: uppercut_mio_server::Message<'_>,
        context: &mut uppercut_mio_server::WsContext<'_>,
    ) {
        if let uppercut_mio_server::Message::Text(text) = message {
            context
                .publish("room", &uppercut_mio_server::Outgoing::text(text))
                .unwrap();
        }
    }
}

/// An owned actor subscribed to `room`, which keeps what it hears and
/// tells it (one line each) to a request.
struct Listener {
    heard: Vec<String>,
}

impl AnyActor for Listener {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        let from = envelope.from.clone();
        let message = match envelope.message.downcast::<ActorRequest>() {
            Ok(request) => {
                return request.respond(ActorResponse::text(self.heard.join("\n")));
            }
            Err(message) => message,
        };
        if message.is::<&str>() {
            // Told to subscribe (at start).
            sender.send("topic/room", Envelope::of(uppercut_mio_server::Subscribe));
            return;
        }
        // What a WebSocket published, as its Outgoing; what Server::publish
        // did, as the String it was.
        let text = match message.downcast::<uppercut_mio_server::Outgoing>() {
            Ok(outgoing) => String::from_utf8_lossy(outgoing.payload()).into_owned(),
            Err(message) => match message.downcast::<String>() {
                Ok(text) => *text,
                Err(_) => return,
            },
        };
        self.heard.push(format!("{text} from {from}"));
    }
}

fn ws_frame(text: &[u8]) -> Vec<u8> {
    common::integrity::client_frame(1, text, [1, 2, 3, 4])
}

fn a_topic_reaches_every_subscriber_on_every_server_once_in_order(dispatch: Dispatch) {
    let nats = Nats::start();
    let routes = || {
        Routes::new()
            .websocket("/room", |_| RoomMember)
            .spawn("listener", Listener { heard: Vec::new() })
            .actor(&[Method::Get], "/heard", "listener")
    };
    let a = node(&nats, "a", dispatch, routes());
    let b = node(&nats, "b", dispatch, routes());
    for server in [&a, &b] {
        server.send("listener", Envelope::of("subscribe")).unwrap();
    }
    let join = |server: &Server| {
        let stream =
            common::integrity::connect(server.local_addr(), None, common::integrity::Pace::Fast);
        let mut member = common::integrity::Reader::new(stream, common::integrity::Pace::Fast);
        common::integrity::upgrade(&mut member, "/room");
        assert_eq!(
            common::integrity::read_frame(&mut member).payload,
            b"joined"
        );
        member
    };
    let mut members = vec![join(&a), join(&a), join(&b), join(&b)];
    // Each server's subscription is made on NATS once its first member
    // subscribed; a message published meanwhile would not reach it, so
    // the test waits for both.
    nats.wait_for_subscribers("upc.t.room", 2);
    let count = 50;
    for n in 0..count {
        let speaker = n % members.len();
        members[speaker].send(&ws_frame(format!("m{n}").as_bytes()));
        // Every member hears each message once, in the order sent.
        for member in &mut members {
            let frame = common::integrity::read_frame(member);
            assert_eq!(
                (frame.head, frame.payload),
                (0x81, format!("m{n}").into_bytes())
            );
        }
    }
    // From outside the server (no address): once to each member, here and
    // there. Member 3 (on b) speaks only once it heard it, so NATS carries
    // its message to a after a's own (which a must not hand its members
    // twice): the next frame each reads is member 3's.
    a.publish("room", "from outside".to_string()).unwrap();
    for member in &mut members {
        let frame = common::integrity::read_frame(member);
        assert_eq!(
            (frame.head, &frame.payload[..]),
            (0x81, &b"from outside"[..])
        );
    }
    members[3].send(&ws_frame(b"last"));
    for member in &mut members {
        let frame = common::integrity::read_frame(member);
        assert_eq!((frame.head, &frame.payload[..]), (0x81, &b"last"[..]));
    }
    // The owned actors heard all of it too, from the members' addresses.
    for (server, here) in [(&a, "a"), (&b, "b")] {
        let mut client = Client::connect(server.local_addr());
        client.send(get("/heard").as_bytes());
        let response = common::text(&client.response(false));
        let body = response.split("\r\n\r\n").nth(1).unwrap();
        let lines: Vec<&str> = body.lines().take(count).collect();
        assert_eq!(body.lines().count(), count + 2, "{here}: {body}");
        // Server::publish is from no address; member 3 is ws/1 of b.
        let last = match here {
            "a" => "last from ws/1@b",
            _ => "last from ws/1",
        };
        let rest: Vec<&str> = body.lines().skip(count).collect();
        assert_eq!(rest, ["from outside from ", last], "{here}");
        for (n, line) in lines.iter().enumerate() {
            let speaker = n % 4;
            let (text, from) = line.split_once(" from ").unwrap();
            assert_eq!(text, format!("m{n}"));
            // Members 0 and 1 are on a, 2 and 3 on b: a remote speaker is
            // named with its node.
            let remote = (speaker < 2) != (here == "a");
            assert!(from.starts_with("ws/"), "{from}");
            assert_eq!(
                from.ends_with("@a") || from.ends_with("@b"),
                remote,
                "{here}: {from}"
            );
        }
    }
}

in_both_modes!(a_topic_reaches_every_subscriber_on_every_server_once_in_order);

fn a_name_on_several_servers_takes_each_request_on_one_and_moves_when_one_stops(
    dispatch: Dispatch,
) {
    let nats = Nats::start();
    let served = |name: &'static str| {
        Routes::new().spawn(
            "svc",
            Counter {
                node: name,
                count: 0,
            },
        )
    };
    let b = node(&nats, "b", dispatch, served("b"));
    let c = node(&nats, "c", dispatch, served("c"));
    // a has no svc of its own: svc@* goes to b or c.
    let a = node(
        &nats,
        "a",
        dispatch,
        Routes::new().actor(&[Method::Get], "/svc", "svc@*"),
    );
    // b and c each serve the service from every poller.
    nats.wait_for_subscribers("upc.s.svc", 4);
    let mut client = Client::connect(a.local_addr());
    let mut by_node = std::collections::HashMap::new();
    for _ in 0..40 {
        client.send(get("/svc").as_bytes());
        let response = common::text(&client.response(false));
        let body = response.split("\r\n\r\n").nth(1).unwrap().to_string();
        let node = body.split(' ').next().unwrap().to_string();
        *by_node.entry(node).or_insert(0) += 1;
    }
    assert_eq!(by_node.values().sum::<i32>(), 40);
    assert!(
        by_node.keys().all(|node| node == "b" || node == "c"),
        "{by_node:?}"
    );
    // c drains: its share moves to b, and no request is lost.
    assert!(c.shutdown(Duration::from_secs(5)));
    for _ in 0..20 {
        client.send(get("/svc").as_bytes());
        let response = common::text(&client.response(false));
        assert!(response.contains("\r\n\r\nb "), "{response}");
    }
    drop(b);
    // A server with its own svc answers svc@* itself.
    let own = node(
        &nats,
        "d",
        dispatch,
        served("d").actor(&[Method::Get], "/svc", "svc@*"),
    );
    let mut client = Client::connect(own.local_addr());
    client.send(get("/svc").as_bytes());
    assert_response(&client.response(false), &text_response("d 1 /svc"));
}

fn nats_restarted_under_load_comes_back_by_itself(dispatch: Dispatch) {
    let mut nats = Nats::start();
    let _b = node(
        &nats,
        "b",
        dispatch,
        Routes::new().spawn(
            "counter",
            Counter {
                node: "b",
                count: 0,
            },
        ),
    );
    let a = node(
        &nats,
        "a",
        dispatch,
        Routes::new().actor(&[Method::Get], "/count", "counter@b"),
    );
    let mut client = Client::connect(a.local_addr());
    client.send(get("/count").as_bytes());
    assert!(common::text(&client.response(false)).starts_with("HTTP/1.1 200 OK\r\n"));
    nats.restart();
    // While the links come back, a request is 200 or a 503 saying NATS
    // is unreachable, never a hang or another status.
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        client.send(get("/count").as_bytes());
        let response = common::text(&client.response(false));
        if response.starts_with("HTTP/1.1 200 OK\r\n") && a.cluster_ready() {
            break;
        }
        assert!(
            response.starts_with("HTTP/1.1 503 Service Unavailable\r\n")
                || response.starts_with("HTTP/1.1 200 OK\r\n"),
            "{response}"
        );
        assert!(Instant::now() < deadline, "the cluster did not come back");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn a_stopped_nats_is_noticed_and_traffic_resumes_after_it_continues(dispatch: Dispatch) {
    let nats = Nats::start();
    let _b = node(
        &nats,
        "b",
        dispatch,
        Routes::new().spawn(
            "counter",
            Counter {
                node: "b",
                count: 0,
            },
        ),
    );
    let mut cluster = nats.cluster("a");
    cluster.ping_interval = Duration::from_millis(300);
    let config = Config {
        cluster: Some(cluster),
        ..config(dispatch)
    };
    let a = start_with(
        &config,
        Routes::new()
            .actor(&[Method::Get], "/count", "counter@b")
            .reply_timeout(Duration::from_millis(500)),
    );
    wait_ready(&a);
    nats.pause(true);
    // Requests meanwhile end in time: 504 (the reply timeout) or 503.
    let mut client = Client::connect(a.local_addr());
    for _ in 0..3 {
        client.send(get("/count").as_bytes());
        let response = common::text(&client.response(false));
        assert!(
            response.starts_with("HTTP/1.1 504 ") || response.starts_with("HTTP/1.1 503 "),
            "{response}"
        );
    }
    nats.pause(false);
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        client.send(get("/count").as_bytes());
        if common::text(&client.response(false)).starts_with("HTTP/1.1 200 OK\r\n") {
            break;
        }
        assert!(Instant::now() < deadline, "traffic did not resume");
        std::thread::sleep(Duration::from_millis(10));
    }
}

in_both_modes!(
    a_name_on_several_servers_takes_each_request_on_one_and_moves_when_one_stops,
    nats_restarted_under_load_comes_back_by_itself,
    a_stopped_nats_is_noticed_and_traffic_resumes_after_it_continues,
);

/// The `/metrics` page of `server`.
fn metrics_page(server: &Server) -> String {
    let mut client = Client::connect(server.metrics_addr().expect("--metrics"));
    client.send(get("/metrics").as_bytes());
    common::text(&client.response(false))
}

/// The `/metrics` page of `server` once `series` reads `expected`; fails
/// naming the last value if it does not within `IO_TIMEOUT`.
fn wait_for_sample(server: &Server, series: &str, expected: u64) -> String {
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        let page = metrics_page(server);
        let value = sample(&page, series);
        if value == expected {
            return page;
        }
        assert!(
            value < expected && Instant::now() < deadline,
            "{series} is {value}, expected {expected}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The value of `series` on `page`.
fn sample(page: &str, series: &str) -> u64 {
    page.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{page}"))
        .parse()
        .unwrap()
}

fn malformed_messages_from_nats_are_dropped_and_counted(dispatch: Dispatch) {
    let nats = Nats::start();
    let config = Config {
        cluster: Some(nats.cluster("b")),
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..config(dispatch)
    };
    let b = start_with(
        &config,
        Routes::new().spawn(
            "counter",
            Counter {
                node: "b",
                count: 0,
            },
        ),
    );
    wait_ready(&b);
    let mut raw = nats.raw_client();
    raw.send(b"SUB reply.to 1\r\n");
    // Not a kind this server knows; a header block that is not one; a
    // request whose head does not read (answered 502, so its asker does
    // not wait); a request for an actor this node does not have (503).
    let hpub = |subject: &str, reply: &str, headers: &str, payload: &str| {
        format!(
            "HPUB {subject} {reply} {} {}\r\n{headers}{payload}\r\n",
            headers.len(),
            headers.len() + payload.len()
        )
    };
    raw.send(
        hpub(
            "upc.a.b.counter",
            "",
            "NATS/1.0\r\nUpc-Kind: u32\r\n\r\n",
            "x",
        )
        .as_bytes(),
    );
    raw.send(hpub("upc.a.b.counter", "", "NATS/1.1\r\n\r\n", "x").as_bytes());
    let request = "NATS/1.0\r\nUpc-Kind: request\r\nUpc-Head: 3\r\n\r\n";
    raw.send(hpub("upc.a.b.counter", "reply.to", request, "GET").as_bytes());
    let answer = raw.line();
    assert!(answer.starts_with("HMSG reply.to 1 "), "{answer}");
    let sizes: Vec<usize> = answer
        .split(' ')
        .skip(3)
        .map(|n| n.parse().unwrap())
        .collect();
    let message = String::from_utf8(raw.payload(sizes[1])).unwrap();
    assert!(message.contains("Upc-Status: 502\r\n"), "{message}");
    assert!(
        message.ends_with("502 Bad Gateway: the request did not read on this server\n"),
        "{message}"
    );
    let good = "NATS/1.0\r\nUpc-Kind: request\r\nUpc-Head: 18\r\n\r\n";
    raw.send(hpub("upc.a.b.ghost", "reply.to", good, "GET / HTTP/1.1\r\n\r\n").as_bytes());
    let answer = raw.line();
    let sizes: Vec<usize> = answer
        .split(' ')
        .skip(3)
        .map(|n| n.parse().unwrap())
        .collect();
    let message = String::from_utf8(raw.payload(sizes[1])).unwrap();
    assert!(
        message.ends_with("503 Service Unavailable: no actor \"ghost\" on node b\n"),
        "{message}"
    );
    // The two messages without a reply may be counted by another poller
    // than the one that answered: wait on the server's own count, not on
    // NATS having passed them on.
    let page = wait_for_sample(&b, "uppercut_nats_dropped_total{reason=\"malformed\"}", 3);
    assert_eq!(
        sample(&page, "uppercut_nats_dropped_total{reason=\"no_actor\"}"),
        1
    );
    assert_eq!(sample(&page, "uppercut_nats_connected"), 1);
    // And the server serves on.
    let a = node(
        &nats,
        "a",
        dispatch,
        Routes::new().actor(&[Method::Get], "/count", "counter@b"),
    );
    counts_once(&a);
}

fn refused_credentials_keep_the_server_local_and_say_so(dispatch: Dispatch) {
    let nats = Nats::start_with("authorization { user: ann, password: s3cret }");
    let with = |password: &str| {
        let url = format!("nats://ann:{password}@{}", nats.addr);
        let cluster = uppercut_mio_server::ClusterConfig::new(
            vec![uppercut_mio_server::NatsUrl::parse(&url).unwrap()],
            "a",
        );
        Config {
            cluster: Some(cluster),
            metrics: Some("127.0.0.1:0".parse().unwrap()),
            ..config(dispatch)
        }
    };
    let routes = || {
        Routes::standard()
            .spawn(
                "counter",
                Counter {
                    node: "a",
                    count: 0,
                },
            )
            .actor(&[Method::Get], "/count", "counter@elsewhere")
    };
    let refused = start_with(&with("wrong"), routes());
    let good = start_with(&with("s3cret"), routes());
    wait_ready(&good);
    assert!(!refused.cluster_ready());
    assert_eq!(
        sample(&metrics_page(&refused), "uppercut_nats_connected"),
        0
    );
    serves_only_local_routes(&refused);
}

/// A server that could not join: its remote route `/count` answers 503,
/// its local `/` as ever.
fn serves_only_local_routes(server: &Server) {
    let mut client = Client::connect(server.local_addr());
    client.send(get("/count").as_bytes());
    let body = "503 Service Unavailable: NATS is unreachable\n";
    assert_response(&client.response(false), &unavailable(body));
    client.send(get("/").as_bytes());
    assert_response(&client.response(false), common::HELLO);
}

/// Starts node `b` owning a `Counter` and node `a` routing `/count` to
/// it, each with `config(node)`, and checks a count across them.
fn counts_across(config: impl Fn(&str) -> Config) {
    let (a, _b) = counter_pair(config);
    counts_once(&a);
}

/// Node `a` routing `/count` to node `b`'s `Counter`, each started with
/// `config(node)` and ready.
fn counter_pair(config: impl Fn(&str) -> Config) -> (Server, Server) {
    let counter = Counter {
        node: "b",
        count: 0,
    };
    let b = start_with(&config("b"), Routes::new().spawn("counter", counter));
    let a = start_with(
        &config("a"),
        Routes::new().actor(&[Method::Get], "/count", "counter@b"),
    );
    wait_ready(&b);
    wait_ready(&a);
    (a, b)
}

/// `a`'s first count, from `b`'s counter.
fn counts_once(a: &Server) {
    let mut client = Client::connect(a.local_addr());
    client.send(get("/count").as_bytes());
    assert_response(&client.response(false), &text_response("b 1 /count"));
}

/// Keys and JWTs for NATS' NKEY and decentralized (operator) auth, made
/// here as `nk` and `nsc` would make them.
mod keys {
    use std::path::PathBuf;

    use base64::Engine;
    use nkeys::KeyPair;
    use serde_json::{json, Value};

    /// Writes `text` to a file of its own; returns its path.
    pub fn file(name: &str, text: &str) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "nats-keys-{}-{}",
            std::process::id(),
            KeyPair::new_user().public_key()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A seed file for `key`, as `nk -gen user` writes one.
    pub fn seed_file(key: &KeyPair) -> PathBuf {
        file("user.nk", &format!("{}\n", key.seed().unwrap()))
    }

    /// nats-server's configuration for users listed by NKEY: `key` only.
    pub fn nkey_users(key: &KeyPair) -> String {
        format!(
            "authorization {{ users = [ {{ nkey: {} }} ] }}",
            key.public_key()
        )
    }

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    /// A JWT for `subject` with `nats` claims, signed by `issuer`,
    /// expiring at `expires` (seconds since the epoch) if given.
    fn jwt(issuer: &KeyPair, subject: &str, nats: Value, expires: Option<u64>) -> String {
        let header = b64(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
        let mut claims = json!({
            "jti": subject, "iat": 1_764_000_000u64, "iss": issuer.public_key(),
            "name": subject, "sub": subject, "nats": nats,
        });
        if let Some(expires) = expires {
            claims["exp"] = json!(expires);
        }
        let signed = format!("{header}.{}", b64(claims.to_string().as_bytes()));
        format!("{signed}.{}", b64(&issuer.sign(signed.as_bytes()).unwrap()))
    }

    /// An operator that trusts one account, as `nsc` sets one up.
    pub struct Operator {
        /// The nats-server configuration: the operator JWT and the
        /// account's, in a memory resolver.
        pub config: String,
        account: KeyPair,
    }

    impl Operator {
        pub fn new() -> Operator {
            let (operator, account) = (KeyPair::new_operator(), KeyPair::new_account());
            let unlimited = json!({"subs": -1, "data": -1, "payload": -1, "imports": -1,
                "exports": -1, "wildcards": true, "conn": -1, "leaf": -1});
            let operator_jwt = jwt(
                &operator,
                &operator.public_key(),
                json!({"type": "operator", "version": 2}),
                None,
            );
            let account_jwt = jwt(
                &operator,
                &account.public_key(),
                json!({"limits": unlimited, "type": "account", "version": 2}),
                None,
            );
            let config = format!(
                "operator: \"{operator_jwt}\"\nresolver: MEMORY\n\
                 resolver_preload: {{ {}: \"{account_jwt}\" }}",
                account.public_key()
            );
            Operator { config, account }
        }

        /// A JWT the account issues to `user`, expiring at `expires`.
        pub fn user_jwt(&self, user: &KeyPair, expires: Option<u64>) -> String {
            let claims = json!({"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                "type": "user", "version": 2});
            jwt(&self.account, &user.public_key(), claims, expires)
        }
    }

    /// A `.creds` file as `nsc` writes it: `jwt`, then `seed`'s seed.
    pub fn creds(jwt: &str, seed: &KeyPair) -> PathBuf {
        file(
            "user.creds",
            &format!(
                "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
                 ************************* IMPORTANT *************************\n\
                 NKEY Seed printed below can be used to sign and prove identity.\n\n\
                 -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
                seed.seed().unwrap()
            ),
        )
    }
}

/// `--nats-nkey` against a server that lists users by NKEY, and
/// `--nats-creds` against one in operator mode: the right key joins and
/// carries a remote route; another key (the seed of someone else, or a
/// JWT with a seed not its own) is refused, and that server serves its
/// local routes and answers its remote ones 503.
fn nkey_and_creds_join_and_another_key_is_refused(dispatch: Dispatch) {
    use nkeys::KeyPair;
    let (user, stranger) = (KeyPair::new_user(), KeyPair::new_user());
    let nkey_nats = Nats::start_with(&keys::nkey_users(&user));
    let operator = keys::Operator::new();
    let user_jwt = operator.user_jwt(&user, None);
    let jwt_nats = Nats::start_with(&operator.config);
    type Key = fn(&mut uppercut_mio_server::ClusterConfig, std::path::PathBuf);
    let nkey: Key = |cluster, path| cluster.nkey = Some(path);
    let creds: Key = |cluster, path| cluster.creds = Some(path);
    let cases = [
        (
            &nkey_nats,
            nkey,
            keys::seed_file(&user),
            keys::seed_file(&stranger),
        ),
        (
            &jwt_nats,
            creds,
            keys::creds(&user_jwt, &user),
            keys::creds(&user_jwt, &stranger),
        ),
    ];
    for (nats, key, good, bad) in cases {
        let with = |name: &str, path: &std::path::Path| {
            let mut cluster = nats.cluster(name);
            key(&mut cluster, path.to_path_buf());
            Config {
                cluster: Some(cluster),
                ..config(dispatch)
            }
        };
        let refused = start_with(
            &with("c", &bad),
            Routes::standard().actor(&[Method::Get], "/count", "counter@b"),
        );
        counts_across(|node| with(node, &good));
        assert!(!refused.cluster_ready());
        serves_only_local_routes(&refused);
    }
    // A key file that is not one stops the start, saying why.
    let not_a_seed = keys::file("user.nk", "no seed here\n");
    let mut cluster = nkey_nats.cluster("d");
    cluster.nkey = Some(not_a_seed.clone());
    let config = Config {
        cluster: Some(cluster),
        ..config(dispatch)
    };
    let error = uppercut_mio_server::Server::start(&config, Routes::standard())
        .expect_err("a file without a seed is refused");
    assert_eq!(
        error.to_string(),
        format!("{}: no NKEY seed (SU...) in it", not_a_seed.display())
    );
}

/// Waits until every poller's link of each of `servers` reconnected
/// (each counts once) `times` times, and each is ready; they serve
/// `--metrics`.
fn wait_reconnected(servers: &[&Server], times: u64, what: &str) {
    let deadline = Instant::now() + IO_TIMEOUT;
    for server in servers {
        let pollers = server.connections_per_poller().len() as u64;
        while sample(&metrics_page(server), "uppercut_nats_reconnects_total") < times * pollers
            || !server.cluster_ready()
        {
            assert!(Instant::now() < deadline, "not back {what}");
            // A polling interval, not a wait standing in for the condition.
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A key file replaced while the server runs (a rotated NKEY, a renewed
/// `.creds` file): the next connection signs with the new key, read from
/// the file again, without a restart. Here NATS comes back knowing only
/// the new key, so a server still signing with the old one stays out.
/// While the file cannot be read, the key read before serves.
fn a_replaced_key_file_is_read_again_on_reconnect(dispatch: Dispatch) {
    use nkeys::KeyPair;
    let (old, new) = (KeyPair::new_user(), KeyPair::new_user());
    let mut nats = Nats::start_with(&keys::nkey_users(&old));
    let path = keys::seed_file(&old);
    let url = nats.cluster("a").servers;
    let with = |name: &str| {
        let mut cluster = uppercut_mio_server::ClusterConfig::new(url.clone(), name);
        cluster.nkey = Some(path.clone());
        Config {
            cluster: Some(cluster),
            metrics: Some("127.0.0.1:0".parse().unwrap()),
            ..config(dispatch)
        }
    };
    let (a, b) = counter_pair(with);
    // The file gone: the reconnection signs with the key read before.
    let kept = path.with_extension("kept");
    std::fs::rename(&path, &kept).unwrap();
    nats.restart();
    wait_reconnected(&[&a, &b], 1, "on the key read before");
    // The rotation, as a whole file put in place of the old.
    std::fs::rename(keys::seed_file(&new), &path).unwrap();
    nats.restart_with(&keys::nkey_users(&new));
    wait_reconnected(&[&a, &b], 2, "on the new key");
    counts_once(&a);
}

/// Given only the first server of a two-node NATS cluster, a server learns
/// the second from `connect_urls` in `INFO`; when the first is killed, it
/// reconnects to the second and calls cross servers again.
fn a_server_learned_from_info_is_reconnected_to(dispatch: Dispatch) {
    let mut nodes = Nats::jetstream_cluster(2);
    let first = nodes[0].cluster("a").servers;
    let with = |name: &str| Config {
        cluster: Some(uppercut_mio_server::ClusterConfig::new(first.clone(), name)),
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..config(dispatch)
    };
    let (a, b) = counter_pair(with);
    nodes[0].kill();
    wait_reconnected(&[&a, &b], 1, "through the learned server");
    counts_once(&a);
}

fn a_message_past_max_payload_is_refused_at_the_call(dispatch: Dispatch) {
    let nats = Nats::start_with("max_payload: 2048");
    let _b = node(
        &nats,
        "b",
        dispatch,
        Routes::new().spawn(
            "counter",
            Counter {
                node: "b",
                count: 0,
            },
        ),
    );
    let a = node(
        &nats,
        "a",
        dispatch,
        Routes::new().actor(&[Method::Post], "/count", "counter@b"),
    );
    let mut client = Client::connect(a.local_addr());
    let body = "x".repeat(4096);
    client.send(
        format!("POST /count HTTP/1.1\r\nHost: a\r\nContent-Length: 4096\r\n\r\n{body}").as_bytes(),
    );
    let response = common::text(&client.response(false));
    assert!(
        response.starts_with("HTTP/1.1 413 Payload Too Large\r\n"),
        "{response}"
    );
    assert!(
        response.contains("past the NATS server's max_payload of 2048\n"),
        "{response}"
    );
    // A small one still goes.
    client.send(b"POST /count HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nok");
    assert_response(&client.response(false), &text_response("b 1 /count"));
}

fn tls_to_nats_with_a_private_ca(dispatch: Dispatch) {
    let certificates = common::tls::Certificates::new(&format!("nats-{}", dispatch.name()));
    let ca = certificates.dir.join("ca.pem");
    std::fs::write(&ca, certificates.ca_pem()).unwrap();
    let nats = Nats::start_with(&format!(
        "tls {{ cert_file: \"{}\", key_file: \"{}\" }}",
        certificates.files.cert.display(),
        certificates.files.key.display()
    ));
    let cluster = |node: &str| {
        let url = format!("tls://localhost:{}", nats.addr.port());
        let mut cluster = uppercut_mio_server::ClusterConfig::new(
            vec![uppercut_mio_server::NatsUrl::parse(&url).unwrap()],
            node,
        );
        cluster.ca = Some(ca.clone());
        Config {
            cluster: Some(cluster),
            ..config(dispatch)
        }
    };
    counts_across(cluster);
}

/// Certificates for a NATS that verifies its clients' (`tls { verify:
/// true }`): its own, whose CA the servers trust (written to `nats_ca`),
/// and a client's, for the servers to present.
struct MutualTls {
    nats_side: common::tls::Certificates,
    client_side: common::tls::Certificates,
    nats_ca: std::path::PathBuf,
}

impl MutualTls {
    fn new(name: &str) -> MutualTls {
        let nats_side = common::tls::Certificates::new(&format!("{name}-server"));
        let client_side = common::tls::Certificates::new(&format!("{name}-client"));
        let nats_ca = nats_side.dir.join("ca.pem");
        std::fs::write(&nats_ca, nats_side.ca_pem()).unwrap();
        MutualTls {
            nats_side,
            client_side,
            nats_ca,
        }
    }

    /// nats-server's `tls` block: its certificate, and clients' verified
    /// against `client_ca` (PEM).
    fn nats_config(&self, client_ca: &str) -> String {
        let path = self.client_side.dir.join("trusted.pem");
        std::fs::write(&path, client_ca).unwrap();
        format!(
            "tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\", verify: true }}",
            self.nats_side.files.cert.display(),
            self.nats_side.files.key.display(),
            path.display()
        )
    }

    /// Node `node`'s cluster over TLS to the NATS on `port`, presenting
    /// the client certificate if `present`.
    fn cluster(&self, port: u16, node: &str, present: bool) -> uppercut_mio_server::ClusterConfig {
        let url = format!("tls://localhost:{port}");
        let mut cluster = uppercut_mio_server::ClusterConfig::new(
            vec![uppercut_mio_server::NatsUrl::parse(&url).unwrap()],
            node,
        );
        cluster.ca = Some(self.nats_ca.clone());
        cluster.client_cert = present.then(|| self.client_side.files.clone());
        cluster
    }
}

/// A NATS that verifies its clients' certificates (`tls { verify: true }`):
/// a server presenting one its CA signed joins and carries a remote
/// route; a server presenting none is refused, and serves its local
/// routes only.
fn tls_to_nats_with_a_client_certificate(dispatch: Dispatch) {
    let tls = MutualTls::new(&format!("nats-mutual-{}", dispatch.name()));
    let nats = Nats::start_with(&tls.nats_config(&tls.client_side.ca_pem()));
    let cluster = |node: &str, present: bool| Config {
        cluster: Some(tls.cluster(nats.addr.port(), node, present)),
        ..config(dispatch)
    };
    let refused = start_with(
        &cluster("c", false),
        Routes::standard().actor(&[Method::Get], "/count", "counter@b"),
    );
    counts_across(|node| cluster(node, true));
    assert!(!refused.cluster_ready());
    serves_only_local_routes(&refused);
}

/// A client certificate replaced while the server runs (renewed, here
/// by another CA): the next connection presents the new one, read from
/// its files again. NATS comes back trusting only the new CA.
fn a_replaced_client_certificate_is_read_again_on_reconnect(dispatch: Dispatch) {
    let name = format!("nats-rotate-{}", dispatch.name());
    let tls = MutualTls::new(&name);
    let mut nats = Nats::start_with(&tls.nats_config(&tls.client_side.ca_pem()));
    let port = nats.addr.port();
    let with = |node: &str| Config {
        cluster: Some(tls.cluster(port, node, true)),
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..config(dispatch)
    };
    let (a, b) = counter_pair(with);
    let new_ca = tls.client_side.replace(&format!("{name}-client-2"));
    nats.restart_with(&tls.nats_config(&common::tls::pem(&new_ca)));
    wait_reconnected(&[&a, &b], 1, "with the new certificate");
    counts_once(&a);
}

in_both_modes!(
    malformed_messages_from_nats_are_dropped_and_counted,
    refused_credentials_keep_the_server_local_and_say_so,
    nkey_and_creds_join_and_another_key_is_refused,
    a_replaced_key_file_is_read_again_on_reconnect,
    a_server_learned_from_info_is_reconnected_to,
    a_message_past_max_payload_is_refused_at_the_call,
    tls_to_nats_with_a_private_ca,
    tls_to_nats_with_a_client_certificate,
    a_replaced_client_certificate_is_read_again_on_reconnect,
);

/// `promtool check metrics` accepts the page with the cluster's series,
/// after remote calls (the histogram has samples); and the access log
/// names the node that answered a remote route.
fn the_cluster_series_pass_promtool_and_the_log_names_the_node(dispatch: Dispatch) {
    use std::io::Write;
    let nats = Nats::start();
    let _b = node(
        &nats,
        "b",
        dispatch,
        Routes::new().spawn(
            "counter",
            Counter {
                node: "b",
                count: 0,
            },
        ),
    );
    let log = std::env::temp_dir().join(format!(
        "cluster-access-{}-{}.log",
        std::process::id(),
        dispatch.name()
    ));
    let _ = std::fs::remove_file(&log);
    let config = Config {
        cluster: Some(nats.cluster("a")),
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        access_log: Some(uppercut_mio_server::AccessLogTarget::File(log.clone())),
        ..config(dispatch)
    };
    let a = start_with(
        &config,
        Routes::standard().actor(&[Method::Get], "/count", "counter@b"),
    );
    wait_ready(&a);
    let mut client = Client::connect(a.local_addr());
    for _ in 0..3 {
        client.send(get("/count").as_bytes());
        client.response(false);
    }
    client.send(get("/").as_bytes());
    client.response(false);
    let page = metrics_page(&a);
    let page = page.split("\r\n\r\n").nth(1).unwrap().to_string();
    assert_eq!(sample(&page, "uppercut_nats_call_seconds_count"), 3);
    assert_eq!(
        sample(
            &page,
            "uppercut_nats_messages_total{kind=\"request\",direction=\"out\"}"
        ),
        3
    );
    assert_eq!(
        sample(
            &page,
            "uppercut_nats_messages_total{kind=\"reply\",direction=\"in\"}"
        ),
        3
    );
    match std::process::Command::new("promtool")
        .arg("--version")
        .output()
    {
        Ok(_) => {
            let (status, said) = std::process::Command::new("promtool")
                .args(["check", "metrics"])
                .stdin(std::process::Stdio::piped())
                .output_with(page.as_bytes());
            assert!(status.success(), "promtool: {said}\n{page}");
        }
        Err(_) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "promtool is not installed"
            );
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: promtool not installed: the cluster series were not checked"
            );
        }
    }
    drop(a);
    let lines = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let counted: Vec<&str> = lines.lines().filter(|l| l.contains("GET /count")).collect();
    assert_eq!(counted.len(), 3, "{lines}");
    // Answered by b; written by a (its node name, as no log name is set).
    assert!(
        counted.iter().all(|l| l.ends_with(" node=b server=a")),
        "{lines}"
    );
    let hello = lines.lines().find(|l| l.contains("GET / HTTP")).unwrap();
    assert!(!hello.contains("node="), "{hello}");
}

/// Feeds a child its stdin and collects its status and output.
trait OutputWith {
    fn output_with(&mut self, input: &[u8]) -> (std::process::ExitStatus, String);
}

impl OutputWith for std::process::Command {
    fn output_with(&mut self, input: &[u8]) -> (std::process::ExitStatus, String) {
        use std::io::Write;
        let mut child = self
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let output = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        (output.status, text)
    }
}

in_both_modes!(the_cluster_series_pass_promtool_and_the_log_names_the_node);

/// Sends `count` numbered messages to `sink@b` when told to; a send
/// refused at the call is reported to the test thread.
struct Pump {
    count: u32,
    failures: common::Failures,
}

impl AnyActor for Pump {
    fn receive(&mut self, _envelope: Envelope, sender: &mut dyn AnySender) {
        for n in 0..self.count {
            sender.send("sink@b", Envelope::of(n.to_be_bytes().to_vec()));
            if let Some(error) = uppercut_mio_server::last_send_error() {
                self.failures
                    .report(format!("the send of message {n} was refused: {error:?}"));
                return;
            }
        }
    }
}

/// Counts what arrives and whether it came in order; tells a request.
#[derive(Default)]
struct Sink {
    next: u32,
    out_of_order: u32,
}

impl AnyActor for Sink {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        match envelope.message.downcast::<Vec<u8>>() {
            Ok(bytes) => {
                let n = u32::from_be_bytes(bytes[..4].try_into().unwrap());
                if n != self.next {
                    self.out_of_order += 1;
                }
                self.next = n + 1;
            }
            Err(message) => {
                if let Ok(request) = message.downcast::<ActorRequest>() {
                    let body = format!("{} {}", self.next, self.out_of_order);
                    request.respond(ActorResponse::text(body));
                }
            }
        }
    }
}

fn one_senders_messages_arrive_in_the_order_sent(dispatch: Dispatch) {
    let nats = Nats::start();
    let failures = common::Failures::default();
    let count = 3000;
    let b = node(
        &nats,
        "b",
        dispatch,
        Routes::new()
            .spawn("sink", Sink::default())
            .actor(&[Method::Get], "/sink", "sink"),
    );
    let a = node(
        &nats,
        "a",
        dispatch,
        Routes::new().spawn(
            "pump",
            Pump {
                count,
                failures: failures.clone(),
            },
        ),
    );
    a.send("pump", Envelope::of(())).unwrap();
    let deadline = Instant::now() + IO_TIMEOUT;
    let mut client = Client::connect(b.local_addr());
    loop {
        failures.check();
        client.send(get("/sink").as_bytes());
        let response = common::text(&client.response(false));
        let body = response.split("\r\n\r\n").nth(1).unwrap().to_string();
        if body.starts_with(&format!("{count} ")) {
            assert_eq!(
                body,
                format!("{count} 0"),
                "the last came last, and none out of order"
            );
            break;
        }
        assert!(Instant::now() < deadline, "only {body} arrived");
        std::thread::sleep(Duration::from_millis(5));
    }
}

in_both_modes!(one_senders_messages_arrive_in_the_order_sent);

/// Refuses every request with a 404 that has a cause.
struct Refuser;

impl AnyActor for Refuser {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let rejection = uppercut_mio_server::Rejection::new(404, "no note 7");
            request.respond(ActorResponse::rejection(rejection));
        }
    }
}

/// The JSON error body both servers choose.
fn json_errors(routes: Routes) -> Routes {
    routes.error_body(|error| {
        let body = format!(
            "{{\"error\":\"{} {}: {}\",\"status\":{}}}",
            error.status(),
            error.reason(),
            error.cause().unwrap_or(""),
            error.status()
        );
        ("application/json", body)
    })
}

/// A remote actor's rejection is shaped by the answering server's error
/// hook, byte for byte as the owning server shapes it.
fn a_remote_rejection_gets_the_answering_servers_error_body(dispatch: Dispatch) {
    let nats = Nats::start();
    let b = node(
        &nats,
        "b",
        dispatch,
        json_errors(Routes::new().spawn("notes", Refuser).actor(
            &[Method::Get],
            "/notes/{id}",
            "notes",
        )),
    );
    let a = node(
        &nats,
        "a",
        dispatch,
        json_errors(Routes::new().actor(&[Method::Get], "/notes/{id}", "notes@b")),
    );
    let body = "{\"error\":\"404 Not Found: no note 7\",\"status\":404}";
    let expected = format!(
        "HTTP/1.1 404 Not Found\r\nServer: uppercut-mio-server\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nDate: {{date}}\r\n\r\n{body}",
        body.len()
    );
    let mut owner = Client::connect(b.local_addr());
    owner.send(get("/notes/7").as_bytes());
    assert_response(&owner.response(false), &expected);
    let mut other = Client::connect(a.local_addr());
    other.send(get("/notes/7").as_bytes());
    assert_response(&other.response(false), &expected);
}

in_both_modes!(a_remote_rejection_gets_the_answering_servers_error_body);
