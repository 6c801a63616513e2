//! The test client (`uppercut_mio_server::testing`): routes served without
//! sockets, as a server serves them. Handlers, typed routes and the error
//! bodies; actors of each kind, answers given later (a delay) or never
//! (502, 504); pipelined input, output past the high-water mark, the
//! configuration's fields and body limit; messages sent to an actor; a
//! table a server would refuse; and the actors stopped with the client.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uppercut_mio_server::testing::TestClient;
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    ActorRequest, ActorResponse, CannedResponse, Config, Method, Rejection, Routes,
};

#[derive(Deserialize)]
struct Order {
    item: String,
    quantity: u32,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Placed {
    item: String,
    quantity: u32,
    id: u32,
}

fn orders() -> Routes {
    Routes::new()
        .json_handler(&[Method::Post], "/orders/{id}", |request| {
            let id: u32 = request.params()?;
            let order: Order = request.json()?;
            if order.quantity == 0 {
                return Err(Rejection::new(422, "quantity must be at least 1"));
            }
            Ok(Placed {
                item: order.item,
                quantity: order.quantity,
                id,
            })
        })
        .handler(&[Method::Get], "/hello", |request, response| {
            let name = request.query_param("name").unwrap_or_default();
            response.body(format!("Hello, {name}!").as_bytes());
        })
}

/// Strips the `Date` line, the one part of a response that changes.
fn undated(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut lines: Vec<&str> = text.split("\r\n").collect();
    lines.retain(|line| !line.starts_with("Date: "));
    lines.join("\r\n")
}

#[test]
fn serves_handlers_and_typed_routes() {
    let client = TestClient::new(orders()).expect("valid routes");
    let order = serde_json::json!({"item": "tea", "quantity": 2});
    let placed = client.post_json("/orders/9", &order);
    assert_eq!(placed.status(), 200);
    assert_eq!(placed.header("Content-Type"), Some("application/json"));
    let expected = Placed {
        item: "tea".into(),
        quantity: 2,
        id: 9,
    };
    assert_eq!(placed.json::<Placed>().unwrap(), expected);
    assert_eq!(
        undated(placed.raw()),
        "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: application/json\r\n\
         Content-Length: 34\r\n\r\n{\"item\":\"tea\",\"quantity\":2,\"id\":9}"
    );

    let none = client.post_json(
        "/orders/9",
        &serde_json::json!({"item": "tea", "quantity": 0}),
    );
    assert_eq!(none.status(), 422);
    assert_eq!(
        none.text(),
        "422 Unprocessable Content: quantity must be at least 1\n"
    );
    let bad_id = client.post_json("/orders/x", &order);
    assert_eq!(bad_id.status(), 404);
    assert_eq!(
        bad_id.text(),
        "404 Not Found: path: `id` = \"x\" is not a valid u32\n"
    );

    let hello = client.get("/hello?name=J%C3%BCrgen");
    assert_eq!((hello.status(), &*hello.text()), (200, "Hello, Jürgen!"));
    let head = client.request(Method::Head, "/hello?name=Al", &[], b"");
    assert_eq!(head.header("content-length"), Some("10"));
    assert_eq!(head.body(), b"");
    assert_eq!(client.get("/nowhere").text(), "404 Not Found\n");
}

#[test]
fn error_bodies_are_the_applications() {
    let routes = orders().error_body(|error| {
        let body = serde_json::json!({"status": error.status(), "detail": error.cause()});
        ("application/problem+json", body.to_string())
    });
    let client = TestClient::new(routes).unwrap();
    let missing = client.get("/nowhere");
    assert_eq!(
        undated(missing.raw()),
        "HTTP/1.1 404 Not Found\r\nServer: uppercut-mio-server\r\n\
         Content-Type: application/problem+json\r\nContent-Length: 28\r\n\r\n\
         {\"detail\":null,\"status\":404}"
    );
    let refused = client.post("/orders/1", "text/plain", "tea");
    assert_eq!(refused.status(), 415);
    assert_eq!(
        refused.json::<serde_json::Value>().unwrap(),
        serde_json::json!({
            "status": 415,
            "detail": "expected Content-Type: application/json, got \"text/plain\""
        })
    );
    let not_allowed = client.get("/orders/1");
    assert_eq!(not_allowed.header("allow"), Some("POST"));
    assert_eq!(
        not_allowed.header("content-type"),
        Some("application/problem+json")
    );
}

/// Counts the requests it answers, from `start`; stops by raising `stopped`.
struct Counter {
    count: u64,
    stopped: Arc<AtomicBool>,
}

impl AnyActor for Counter {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        match envelope.message.downcast::<ActorRequest>() {
            Ok(request) => {
                self.count += 1;
                request.respond(ActorResponse::json_value(&self.count));
            }
            // A number sent to it adds to the count.
            Err(message) => {
                if let Ok(add) = message.downcast::<u64>() {
                    self.count += *add;
                }
            }
        }
    }

    fn on_stop(&self, _sender: &mut dyn AnySender) {
        self.stopped.store(true, Ordering::SeqCst);
    }
}

/// Answers each request only after a delay it asks the server for.
#[derive(Default)]
struct Later {
    waiting: Vec<ActorRequest>,
}

#[derive(Debug)]
struct Now;

impl AnyActor for Later {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        match envelope.message.downcast::<ActorRequest>() {
            Ok(request) => {
                self.waiting.push(*request);
                let me = sender.me().to_string();
                sender.delay(&me, Envelope::of(Now), Duration::from_millis(20));
            }
            Err(message) if message.is::<Now>() => {
                for request in self.waiting.drain(..) {
                    request.respond(ActorResponse::text("later"));
                }
            }
            Err(_) => {}
        }
    }
}

/// Keeps every request unanswered, in `held`; drops one for `/drop`.
struct Holder(Arc<Mutex<Vec<ActorRequest>>>);

impl AnyActor for Holder {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            if request.request().path() != "/drop" {
                self.0.lock().unwrap().push(*request);
            }
        }
    }
}

/// Answers with its thread's name: which thread ran it.
struct Where;

impl AnyActor for Where {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let name = std::thread::current().name().unwrap_or("").to_string();
            request.respond(ActorResponse::text(name));
        }
    }
}

#[test]
fn runs_the_actors_the_table_owns() {
    let stopped = Arc::new(AtomicBool::new(false));
    let held = Arc::new(Mutex::new(Vec::new()));
    let per_poller = Arc::new(AtomicU64::new(0));
    let made = Arc::clone(&per_poller);
    let routes = Routes::new()
        .actor(&[Method::Get], "/count", "counter")
        .spawn(
            "counter",
            Counter {
                count: 0,
                stopped: Arc::clone(&stopped),
            },
        )
        .actor(&[Method::Get], "/per-poller", "per-poller")
        .spawn_per_poller("per-poller", move |_| {
            made.fetch_add(1, Ordering::SeqCst);
            Where
        })
        .actor(&[Method::Get], "/blocking", "blocking")
        .spawn_blocking("blocking", 1, |_| Where)
        .blocking_handler(&[Method::Get], "/blocking-handler", |_, response| {
            let name = std::thread::current().name().unwrap_or("").to_string();
            response.body(name.as_bytes());
        })
        .actor(&[Method::Get], "/later", "later")
        .spawn("later", Later::default())
        .reply_timeout(Duration::from_millis(100))
        .actor(&[Method::Get], "/hold", "holder")
        .actor(&[Method::Get], "/drop", "holder")
        .spawn("holder", Holder(Arc::clone(&held)));
    let client = TestClient::new(routes).unwrap();
    assert_eq!(client.get("/count").text(), "1");
    assert_eq!(client.get("/count").text(), "2");
    client.send("counter", 40_u64);
    assert_eq!(client.get("/count").text(), "43");

    // Shared and per-poller actors run on the test's thread; blocking ones
    // on threads of their own.
    let here = std::thread::current().name().unwrap_or("").to_string();
    assert_eq!(client.get("/per-poller").text(), here);
    assert_eq!(
        per_poller.load(Ordering::SeqCst),
        1,
        "one poller, one instance"
    );
    assert_ne!(client.get("/blocking").text(), here);
    let blocking = client.get("/blocking-handler");
    assert_eq!(blocking.status(), 200);
    assert_ne!(blocking.text(), here);

    assert_eq!(client.get("/later").text(), "later");
    assert_eq!(client.get("/drop").text(), "502 Bad Gateway\n");
    assert_eq!(client.get("/hold").text(), "504 Gateway Timeout\n");
    // An answer after the timeout is dropped; the next call gets its own.
    let late = held.lock().unwrap().pop().expect("the held request");
    late.respond(ActorResponse::text("too late"));
    assert_eq!(client.get("/count").text(), "44");

    assert!(!stopped.load(Ordering::SeqCst));
    drop(client);
    assert!(
        stopped.load(Ordering::SeqCst),
        "on_stop ran with the client"
    );
}

#[test]
fn serves_what_one_connection_sends() {
    // 40 KiB each: two fill the output past its 64 KiB high-water mark,
    // where a connection holds the rest back until its output drains.
    let big = "x".repeat(40 * 1024);
    let routes = Routes::new()
        .route("/big", CannedResponse::ok("text/plain", big.clone()))
        .handler(&[Method::Post], "/echo", |request, response| {
            response.body(request.body());
        });
    let client = TestClient::new(routes).unwrap();
    let input = "GET /big HTTP/1.1\r\nHost: t\r\n\r\n".repeat(3)
        + "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
           3\r\nabc\r\n0\r\n\r\n\
           GET /big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n\
           GET /never HTTP/1.1\r\nHost: t\r\n\r\n";
    let output = String::from_utf8(client.raw(input.as_bytes())).unwrap();
    let responses: Vec<&str> = output.split("HTTP/1.1 ").skip(1).collect();
    assert_eq!(responses.len(), 5, "{}", &output[..output.len().min(500)]);
    for response in [0, 1, 2, 4].map(|at| responses[at]) {
        assert!(response.starts_with("200 OK\r\n"), "{response:.40}");
        assert!(response.ends_with(&big));
    }
    assert!(responses[3].ends_with("\r\n\r\nabc"));
    assert!(responses[4].contains("\r\nConnection: close\r\n"));
    // A malformed request: 400, and the connection's end.
    let refused = client.raw(b"GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let refused = undated(&refused);
    assert!(
        refused.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{refused}"
    );
    assert_eq!(refused.matches("HTTP/1.1").count(), 1);
}

#[test]
fn serves_as_the_configuration_says() {
    let config = Config {
        headers: vec![("X-Frame-Options".into(), "DENY".into())],
        max_body: 8,
        actor_routes: vec![("/tally".into(), "counter".into())],
        ..Config::default()
    };
    let routes = orders().spawn(
        "counter",
        Counter {
            count: 0,
            stopped: Arc::default(),
        },
    );
    let client = TestClient::with_config(&config, routes).unwrap();
    let hello = client.get("/hello?name=Al");
    assert_eq!(hello.header("x-frame-options"), Some("DENY"));
    let tally = client.request(Method::Post, "/tally", &[], b"");
    assert_eq!(tally.text(), "1");
    let large = client.post("/orders/1", "application/json", "{\"item\":\"tea\"}");
    assert_eq!(large.status(), 413);
    assert_eq!(large.header("connection"), Some("close"));
}

#[test]
fn refuses_what_a_server_refuses() {
    let to_nobody = Routes::new().actor(&[Method::Get], "/x", "nobody");
    let refused = TestClient::new(to_nobody).unwrap_err();
    assert!(
        refused.to_string().contains("no actor at \"nobody\""),
        "{refused}"
    );
    let overlapping = Routes::new()
        .handler(&[Method::Get], "/a/{x}", |_, _| {})
        .handler(&[Method::Get], "/a/{y}", |_, _| {});
    assert!(TestClient::new(overlapping).is_err());
}

/// A cart whose state is its items: each POST adds the body.
#[derive(Serialize, Deserialize, Default)]
struct Cart {
    items: Vec<String>,
}

impl AnyActor for Cart {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let item = String::from_utf8_lossy(request.request().body()).into_owned();
            self.items.push(item);
            request.respond(ActorResponse::json_value(&self.items));
        }
    }
}

/// Placed and durable actors in a test client: every name is activated
/// here, one per path parameter, with no store.
#[test]
fn serves_placed_and_durable_actors() {
    let routes = Routes::new()
        .actor(&[Method::Post], "/carts/{id}", "cart/{id}@*")
        .spawn_placed("cart", |_| Cart::default())
        .actor(&[Method::Post], "/one", "one")
        .spawn_durable("one", Cart::default());
    let client = TestClient::new(routes).expect("valid routes");
    let post = |path: &str, body: &str| {
        let response = client.post(path, "text/plain", body.as_bytes());
        (response.status(), response.text().into_owned())
    };
    assert_eq!(post("/carts/1", "milk"), (200, r#"["milk"]"#.to_string()));
    assert_eq!(post("/carts/2", "tea"), (200, r#"["tea"]"#.to_string()));
    assert_eq!(
        post("/carts/1", "eggs"),
        (200, r#"["milk","eggs"]"#.to_string())
    );
    assert_eq!(post("/one", "x"), (200, r#"["x"]"#.to_string()));
    assert_eq!(
        post("/carts/a%20b", "x"),
        (
            400,
            "400 Bad Request: id \"a b\" is not a name: use letters, digits, '-', '_', '=' \
             and '.'\n"
                .to_string()
        )
    );
}
