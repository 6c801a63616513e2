//! The actors the server owns, over real sockets in both dispatch modes:
//! one shared instance counting exactly under concurrent clients, an
//! instance per poller, actors and handlers on blocking threads that stall
//! no other connection, a panic and a silence on blocking threads (an
//! actor's and a `blocking_handler`'s: 502, and 504 at the route's reply
//! timeout), sends
//! between owned actors, `delay`, a message from outside the server, an
//! actor uppercut runs sending to an owned address, and a shutdown that
//! ends the blocking threads.

mod common;
mod route_common;

use std::collections::BTreeSet;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{assert_response, config, error_response, start_with, Client};
use route_common::{text, Counter};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, ActorResponse, Dispatch, Method, Routes};
use uppercut_mio_server::{Config, Timeouts};

fn get(client: &mut Client, path: &str) -> Vec<u8> {
    client.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    client.response(false)
}

/// A gate a blocking actor or handler waits at: it reports each arrival,
/// then waits until the test opens the gate.
#[derive(Clone)]
struct Gate {
    arrived: Arc<Mutex<Sender<()>>>,
    open: Arc<(Mutex<bool>, Condvar)>,
}

impl Gate {
    fn new() -> (Gate, Receiver<()>) {
        let (arrived, arrivals) = mpsc::channel();
        let gate = Gate {
            arrived: Arc::new(Mutex::new(arrived)),
            open: Arc::default(),
        };
        (gate, arrivals)
    }

    fn wait(&self) {
        let _ = self.arrived.lock().unwrap().send(());
        let (open, opened) = &*self.open;
        let mut open = open.lock().unwrap();
        while !*open {
            open = opened.wait(open).unwrap();
        }
    }

    fn open(&self) {
        let (open, opened) = &*self.open;
        *open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        opened.notify_all();
    }

    /// Opens the gate when dropped: a failing test must not leave a
    /// blocking thread (and the server's stop) waiting for ever.
    fn opened_on_drop(&self) -> OpenOnDrop {
        OpenOnDrop(self.clone())
    }
}

struct OpenOnDrop(Gate);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// Waits at the gate, then answers `through`.
struct Gated(Gate);

impl AnyActor for Gated {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.0.wait();
            request.respond(ActorResponse::text("through"));
        }
    }
}

const FAST: &str = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
    Content-Type: text/plain\r\nContent-Length: 4\r\nDate: {date}\r\n\r\nfast";

/// `/gated` blocks on `gate` (on a blocking actor, or a blocking handler
/// with `handler`); `/fast` is a canned route, `/count` an inline actor.
fn gated_routes(gate: &Gate, handler: bool) -> Routes {
    let routes = Routes::new()
        .route(
            "/fast",
            uppercut_mio_server::CannedResponse::ok("text/plain", "fast"),
        )
        .actor(&[Method::Get], "/count", "counter")
        .spawn("counter", Counter::default());
    match handler {
        false => {
            let gate = gate.clone();
            routes
                .actor(&[Method::Get], "/gated", "gated")
                .spawn_blocking("gated", 2, move |_| Gated(gate.clone()))
        }
        true => {
            let gate = gate.clone();
            routes.blocking_handler(&[Method::Get], "/gated", move |_, response| {
                gate.wait();
                let _ = response.header("Content-Type", "text/plain; charset=utf-8");
                response.body(b"through");
            })
        }
    }
}

/// While `/gated` is held on a blocking thread, every other connection is
/// served: the held request's poller is not waiting for it.
fn held_blocking_work_stalls_no_other_connection(dispatch: Dispatch, handler: bool) {
    let (gate, arrivals) = Gate::new();
    let server = start_with(&config(dispatch), gated_routes(&gate, handler));
    // Declared after the server, so dropped (opened) before it.
    let _open = gate.opened_on_drop();
    let mut held = Client::connect(server.local_addr());
    held.send(b"GET /gated HTTP/1.1\r\nHost: t\r\n\r\n");
    arrivals
        .recv()
        .expect("the request reached the blocking thread");
    // Many connections, so both pollers (one is the held one's) serve some.
    for _ in 0..4 {
        let mut other = Client::connect(server.local_addr());
        assert_response(&get(&mut other, "/fast"), FAST);
    }
    let mut other = Client::connect(server.local_addr());
    assert_response(&get(&mut other, "/count"), &text("1"));
    gate.open();
    assert_response(&held.response(false), &text("through"));
    assert_response(&get(&mut held, "/count"), &text("2"));
}

fn a_blocking_actor_stalls_no_other_connection(dispatch: Dispatch) {
    held_blocking_work_stalls_no_other_connection(dispatch, false);
}

fn a_blocking_handler_stalls_no_other_connection(dispatch: Dispatch) {
    held_blocking_work_stalls_no_other_connection(dispatch, true);
}

/// Counts what it answered; panics on `/boom`, holds `/silent` forever.
#[derive(Default)]
struct Moody {
    count: u64,
    held: Vec<ActorRequest>,
}

impl AnyActor for Moody {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            match request.request().path() {
                "/boom" => panic!("a blocking actor panics"),
                "/silent" => self.held.push(*request),
                _ => {
                    self.count += 1;
                    request.respond(ActorResponse::text(self.count.to_string()));
                }
            }
        }
    }
}

const REPLY_TIMEOUT: Duration = Duration::from_millis(300);

fn moody_config(dispatch: Dispatch) -> Config {
    Config {
        timeouts: Timeouts {
            // Sweeps often enough for the short reply timeout.
            sweep: Duration::from_millis(50),
            ..Timeouts::default()
        },
        ..config(dispatch)
    }
}

/// `/silent` waits `REPLY_TIMEOUT` for its answer; every other path
/// longer than any test waits (the client's `IO_TIMEOUT` fails the test
/// first), so that an answer a loaded machine delays (a panic's backtrace
/// takes its time) is never mistaken for none.
fn moody_routes() -> Routes {
    Routes::new()
        .reply_timeout(common::IO_TIMEOUT * 3)
        .actor(&[Method::Get], "/*", "moody")
        .reply_timeout(REPLY_TIMEOUT)
        .actor(&[Method::Get], "/silent", "moody")
        // One thread: the same instance serves every request.
        .spawn_blocking("moody", 1, |_| Moody::default())
}

fn a_panic_on_a_blocking_thread_is_502_and_the_instance_serves_on(dispatch: Dispatch) {
    let server = start_with(&moody_config(dispatch), moody_routes());
    let mut client = Client::connect(server.local_addr());
    assert_response(&get(&mut client, "/"), &text("1"));
    let bad_gateway = error_response(502, "Bad Gateway", "", false, false);
    assert_response(&get(&mut client, "/boom"), &bad_gateway);
    // The same instance, its count kept.
    assert_response(&get(&mut client, "/"), &text("2"));
}

fn silence_on_a_blocking_thread_is_504_within_the_route_timeout(dispatch: Dispatch) {
    let server = start_with(&moody_config(dispatch), moody_routes());
    let mut client = Client::connect(server.local_addr());
    let asked = Instant::now();
    let timeout = error_response(504, "Gateway Timeout", "", false, false);
    assert_response(&get(&mut client, "/silent"), &timeout);
    // The route's 300 ms, not the 5 s default (a sweep and a loaded machine
    // are allowed for).
    let waited = asked.elapsed();
    assert!(
        waited >= REPLY_TIMEOUT,
        "504 before the timeout: {waited:?}"
    );
    assert!(waited < Duration::from_secs(4), "504 after {waited:?}");
    // The request was not sent again: the instance counts on from 0.
    assert_response(&get(&mut client, "/"), &text("1"));
}

/// `Routes::blocking_handler` with the same promises as a blocking actor:
/// `/slow` waits at `gate` (longer than its route's `REPLY_TIMEOUT`),
/// `/boom` panics, `/` answers; every route but `/slow` has a timeout
/// longer than any test waits.
fn moody_handler_routes(gate: Gate) -> Routes {
    Routes::new()
        .blocking_threads(1)
        .blocking_max_threads(2)
        .reply_timeout(common::IO_TIMEOUT * 3)
        .blocking_handler(&[Method::Get], "/*", |request, response| {
            match request.path() {
                "/boom" => panic!("a blocking handler panics"),
                _ => {
                    let _ = response.header("Content-Type", "text/plain; charset=utf-8");
                    response.body(b"handled");
                }
            }
        })
        .reply_timeout(REPLY_TIMEOUT)
        .blocking_handler(&[Method::Get], "/slow", move |_, response| {
            gate.wait();
            response.body(b"too late");
        })
}

fn a_panic_in_a_blocking_handler_is_502_and_the_pool_serves_on(dispatch: Dispatch) {
    let (gate, _arrivals) = Gate::new();
    let server = start_with(&moody_config(dispatch), moody_handler_routes(gate));
    let mut client = Client::connect(server.local_addr());
    assert_response(&get(&mut client, "/"), &text("handled"));
    let bad_gateway = error_response(502, "Bad Gateway", "", false, false);
    assert_response(&get(&mut client, "/boom"), &bad_gateway);
    // The connection and the pool go on.
    assert_response(&get(&mut client, "/"), &text("handled"));
}

fn a_blocking_handler_past_its_route_timeout_is_504(dispatch: Dispatch) {
    let (gate, arrivals) = Gate::new();
    let server = start_with(&moody_config(dispatch), moody_handler_routes(gate.clone()));
    // Declared after the server, so dropped (opened) before it.
    let _open = gate.opened_on_drop();
    let mut client = Client::connect(server.local_addr());
    let asked = Instant::now();
    client.send(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
    arrivals.recv().expect("the request reached the handler");
    let timeout = error_response(504, "Gateway Timeout", "", false, false);
    // The handler is still held at the gate: the 504 is the timeout's.
    assert_response(&client.response(false), &timeout);
    let waited = asked.elapsed();
    assert!(
        waited >= REPLY_TIMEOUT,
        "504 before the timeout: {waited:?}"
    );
    // The route's 300 ms, not the 5 s default nor the other routes'.
    assert!(waited < Duration::from_secs(4), "504 after {waited:?}");
    // The late answer, once the handler returns, goes nowhere: the next
    // request on the connection gets its own.
    gate.open();
    assert_response(&get(&mut client, "/"), &text("handled"));
}

/// Answers with the poller it belongs to and its own count.
struct PerPoller {
    poller: usize,
    count: u64,
}

impl AnyActor for PerPoller {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.count += 1;
            let answer = format!("poller {} count {}", self.poller, self.count);
            request.respond(ActorResponse::text(answer));
        }
    }
}

fn each_poller_has_its_own_instance(dispatch: Dispatch) {
    let routes = Routes::new()
        .actor(&[Method::Get], "/mine", "mine")
        .spawn_per_poller("mine", |poller| PerPoller { poller, count: 0 });
    let server = start_with(&config(dispatch), routes);
    // Two connections land on the two pollers (`balance`): the second is
    // made once the first is served, so the first is counted.
    let mut first = Client::connect(server.local_addr());
    let answer = String::from_utf8(get(&mut first, "/mine")).unwrap();
    let poller = if answer.ends_with("poller 0 count 1") {
        0
    } else {
        1
    };
    assert_response(
        answer.as_bytes(),
        &text(&format!("poller {poller} count 1")),
    );
    let mut second = Client::connect(server.local_addr());
    let other = 1 - poller;
    assert_response(
        &get(&mut second, "/mine"),
        &text(&format!("poller {other} count 1")),
    );
    assert_response(
        &get(&mut first, "/mine"),
        &text(&format!("poller {poller} count 2")),
    );
    assert_response(
        &get(&mut second, "/mine"),
        &text(&format!("poller {other} count 2")),
    );
}

/// 4 clients x 2,500 requests on 2 pollers get each count from 1 to 10,000
/// exactly once: one instance, one message at a time, nothing lost.
fn a_shared_actor_counts_exactly_under_concurrent_clients(dispatch: Dispatch) {
    let routes = Routes::new()
        .actor(&[Method::Get], "/count", "counter")
        .spawn("counter", Counter::default());
    let server = start_with(&config(dispatch), routes);
    let addr = server.local_addr();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            thread::spawn(move || {
                let mut client = Client::connect(addr);
                (0..2_500)
                    .map(|_| {
                        let response = String::from_utf8(get(&mut client, "/count")).unwrap();
                        let body = response.rsplit("\r\n\r\n").next().unwrap_or("");
                        body.parse::<u32>().expect("a count")
                    })
                    .collect::<Vec<u32>>()
            })
        })
        .collect();
    let mut seen = BTreeSet::new();
    for client in clients {
        let counts = client.join().expect("a client thread");
        assert!(
            counts.windows(2).all(|w| w[0] < w[1]),
            "one client's counts rise"
        );
        seen.extend(counts);
    }
    assert_eq!(seen, (1..=10_000).collect::<BTreeSet<u32>>());
}

/// Passes requests to `to` (an owned address, or one uppercut runs).
struct Front {
    to: &'static str,
}

impl AnyActor for Front {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        sender.send(self.to, envelope);
    }
}

/// Answers with its own address.
struct Named;

impl AnyActor for Named {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            request.respond(ActorResponse::text(format!("answered by {}", sender.me())));
        }
    }
}

fn owned_actors_send_to_each_other(dispatch: Dispatch) {
    let routes = Routes::new()
        .actor(&[Method::Get], "/shared", "to-shared")
        .spawn("to-shared", Front { to: "shared" })
        .spawn("shared", Named)
        .actor(&[Method::Get], "/per-poller", "to-per-poller")
        .spawn("to-per-poller", Front { to: "per-poller" })
        .spawn_per_poller("per-poller", |_| Named)
        .actor(&[Method::Get], "/blocking", "to-blocking")
        .spawn_per_poller("to-blocking", |_| Front { to: "blocking" })
        .spawn_blocking("blocking", 1, |_| Named);
    let server = start_with(&config(dispatch), routes);
    let mut client = Client::connect(server.local_addr());
    for to in ["shared", "per-poller", "blocking"] {
        let path = format!("/{to}");
        assert_response(
            &get(&mut client, &path),
            &text(&format!("answered by {to}")),
        );
    }
}

/// Holds each request until a `Tick` it sent itself with `delay` arrives.
#[derive(Default)]
struct Later {
    waiting: Vec<ActorRequest>,
}

#[derive(Debug)]
struct Tick;

impl AnyActor for Later {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        if envelope.message.is::<Tick>() {
            for request in self.waiting.drain(..) {
                request.respond(ActorResponse::text("ticked"));
            }
        } else if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.waiting.push(*request);
            let me = sender.me().to_string();
            sender.delay(&me, Envelope::of(Tick), Duration::from_millis(50));
        }
    }
}

fn a_delayed_message_reaches_an_owned_actor(dispatch: Dispatch) {
    let routes = Routes::new()
        .actor(&[Method::Get], "/shared", "later")
        .spawn("later", Later::default())
        .actor(&[Method::Get], "/blocking", "later-blocking")
        .spawn_blocking("later-blocking", 1, |_| Later::default());
    let server = start_with(&config(dispatch), routes);
    let mut client = Client::connect(server.local_addr());
    for path in ["/shared", "/blocking"] {
        let asked = Instant::now();
        assert_response(&get(&mut client, path), &text("ticked"));
        assert!(
            asked.elapsed() >= Duration::from_millis(50),
            "{path}: before its delay"
        );
    }
}

/// Adds what it is sent to its count.
#[derive(Default)]
struct Adder {
    count: u64,
}

#[derive(Debug)]
struct Add(u64);

impl AnyActor for Adder {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Some(Add(n)) = envelope.message.downcast_ref::<Add>() {
            self.count += n;
        } else if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.count += 1;
            request.respond(ActorResponse::text(self.count.to_string()));
        }
    }
}

fn a_message_from_outside_the_server_arrives(dispatch: Dispatch) {
    let routes = Routes::new()
        .actor(&[Method::Get], "/count", "adder")
        .spawn("adder", Adder::default());
    let server = start_with(&config(dispatch), routes);
    server.send("adder", Envelope::of(Add(40))).unwrap();
    let mut client = Client::connect(server.local_addr());
    // Queued before the request, so run before it.
    assert_response(&get(&mut client, "/count"), &text("41"));
    server.send("adder", Envelope::of(Add(10))).unwrap();
    assert_response(&get(&mut client, "/count"), &text("52"));
}

/// Spawned into uppercut by `Spawner`: passes what it gets to an owned
/// address, through uppercut (and so through the forwarder there).
struct Native;

impl AnyActor for Native {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        sender.send("named", envelope);
    }
}

/// Spawns `Native` into uppercut on its first message, and sends it every
/// request.
#[derive(Default)]
struct Spawner {
    spawned: bool,
}

impl AnyActor for Spawner {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        if !self.spawned {
            sender.spawn("native", Box::new(|| Box::new(Native)));
            self.spawned = true;
        }
        sender.send("native", envelope);
    }
}

fn an_actor_uppercut_runs_reaches_an_owned_address(dispatch: Dispatch) {
    let routes = Routes::new()
        .actor(&[Method::Get], "/native", "spawner")
        .spawn("spawner", Spawner::default())
        .spawn("named", Named);
    let server = start_with(&config(dispatch), routes);
    let mut client = Client::connect(server.local_addr());
    for _ in 0..3 {
        assert_response(&get(&mut client, "/native"), &text("answered by named"));
    }
}

/// A shutdown answers the request a blocking actor is on, with
/// `Connection: close`, closes the listeners, and ends the pool's threads.
fn shutdown_ends_the_blocking_threads(dispatch: Dispatch) {
    // A name of this test's own, so other tests' threads do not count.
    let address = match dispatch {
        Dispatch::Local => "shutl",
        Dispatch::System => "shuts",
    };
    let threads = format!("{address}#");
    let (gate, arrivals) = Gate::new();
    let held_gate = gate.clone();
    let routes = Routes::new()
        .actor(&[Method::Get], "/gated", address)
        .spawn_blocking(address, 2, move |_| Gated(held_gate.clone()));
    let server = start_with(&config(dispatch), routes);
    let _open = gate.opened_on_drop();
    let addr = server.local_addr();
    let listeners = common::listening_sockets(addr);
    assert_eq!(listeners.len(), 2, "a listener per poller");
    common::wait_for_threads(&threads, 2);
    let mut idle = common::idle_connection(addr);
    let mut held = Client::connect(addr);
    held.send(b"GET /gated HTTP/1.1\r\nHost: t\r\n\r\n");
    arrivals
        .recv()
        .expect("the request reached the blocking thread");
    let shutdown = thread::spawn(move || server.shutdown(Duration::from_secs(10)));
    // The drain closes the idle connection: it has begun, and the answer
    // the gate lets through is the held connection's last.
    idle.assert_closed();
    gate.open();
    let finished = shutdown.join().expect("shutdown returns");
    assert!(finished, "the call in flight was answered within the grace");
    let answer = String::from_utf8(held.rest_until_close()).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
    assert!(answer.contains("\r\nConnection: close\r\n"), "{answer:?}");
    assert!(answer.ends_with("\r\n\r\nthrough"), "{answer:?}");
    // Those sockets are closed; the port itself may be another's already.
    let listening = common::listening_sockets(addr);
    assert!(
        listeners.iter().all(|socket| !listening.contains(socket)),
        "still listening: {listeners:?}"
    );
    common::wait_for_threads(&threads, 0);
}

in_both_modes!(
    a_blocking_actor_stalls_no_other_connection,
    a_blocking_handler_stalls_no_other_connection,
    a_panic_on_a_blocking_thread_is_502_and_the_instance_serves_on,
    silence_on_a_blocking_thread_is_504_within_the_route_timeout,
    a_panic_in_a_blocking_handler_is_502_and_the_pool_serves_on,
    a_blocking_handler_past_its_route_timeout_is_504,
    each_poller_has_its_own_instance,
    a_shared_actor_counts_exactly_under_concurrent_clients,
    owned_actors_send_to_each_other,
    a_delayed_message_reaches_an_owned_actor,
    a_message_from_outside_the_server_arrives,
    an_actor_uppercut_runs_reaches_an_owned_address,
    shutdown_ends_the_blocking_threads,
);
