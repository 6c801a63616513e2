//! Placed actors across servers, on a real nats-server with JetStream: a
//! name is active on one server, whichever got a message for it first, and
//! the others forward to it; a holder that stops gives its names up and the
//! next server takes each at once; an idle name is unloaded and given up.
//! Exact bodies and the metrics that say where a name is, in both dispatch
//! modes. `tests/placed_process.rs` kills and pauses holders.

mod common;

use std::time::{Duration, Instant};

use common::durable::{self, exchange, ok, wait_cluster_ready, Counter};
use common::nats::Nats;
use common::{config, start_with, IO_TIMEOUT};
use uppercut_mio_server::{Config, Dispatch, Method, Routes, Server, StateConfig};

/// Server `node` on `nats`, its `/count` the placed `counter@*` and
/// `/carts/N` the placed `cart/N`, with the lease and idle times given.
fn node(nats: &Nats, node: &str, dispatch: Dispatch, lease: Duration, idle: Duration) -> Server {
    let routes = Routes::new()
        .actor(&[Method::Get, Method::Post], "/count", "counter@*")
        .spawn_placed("counter", |_| Counter::default())
        .actor(&[Method::Get, Method::Post], "/carts/{id}", "cart/{id}@*")
        .spawn_placed("cart", |_| Counter::default());
    let config = Config {
        cluster: Some(nats.cluster(node)),
        state: Some(StateConfig::JetStream {
            timeout: Duration::from_secs(5),
            replicas: 1,
        }),
        placement_lease: lease,
        placement_idle: idle,
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..config(dispatch)
    };
    let server = start_with(&config, routes);
    wait_cluster_ready(&server);
    server
}

/// `method /count` on `server`.
fn count(server: &Server, method: &str) -> (String, String) {
    exchange(server.local_addr(), method, "/count")
}

/// A metric of `server`.
fn sample(server: &Server, series: &str) -> u64 {
    durable::sample(server.metrics_addr().expect("metrics on"), series)
}

const ACTIVE: &str = "uppercut_actor_active{actor=\"counter\"}";
const LONG: Duration = Duration::from_secs(30);

/// The first server to get a message for the name holds it; the other
/// forwards there; one count for both, active on one.
fn a_name_is_active_on_one_server_and_the_other_forwards(dispatch: Dispatch) {
    let nats = Nats::start_jetstream("");
    let a = node(&nats, "a", dispatch, LONG, LONG);
    let b = node(&nats, "b", dispatch, LONG, LONG);
    for n in 1..=6u64 {
        let server = if n % 2 == 1 { &a } else { &b };
        assert_eq!(count(server, "POST"), ok(&n.to_string()), "request {n}");
    }
    assert_eq!(sample(&a, ACTIVE), 1);
    assert_eq!(sample(&b, ACTIVE), 0);
    assert_eq!(sample(&a, "uppercut_placement_activations_total"), 1);
    assert_eq!(sample(&b, "uppercut_placement_activations_total"), 0);
    assert_eq!(sample(&b, "uppercut_placement_forwarded_total"), 3);
    assert_eq!(sample(&a, "uppercut_placement_forwarded_total"), 0);
}

/// Posts on `server` until the count answers, at most `tries` times;
/// how many refusals came first: 503, or 504 for a request forwarded to
/// the holder as it stopped (never a silent success).
fn post_until_answered(server: &Server, want: &str, tries: usize) -> usize {
    for refused in 0..tries {
        let (status, body) = count(server, "POST");
        if status == "HTTP/1.1 200 OK" {
            assert_eq!(body, want);
            return refused;
        }
        assert!(
            status == "HTTP/1.1 503 Service Unavailable"
                || status == "HTTP/1.1 504 Gateway Timeout",
            "{status}: {body}"
        );
    }
    panic!("not answered after {tries} tries");
}

/// A holder that stops gives its names up: the next server takes the name
/// at once (the lease lives 30 s: a take after it ran out would not come
/// in this test), with the count where it was.
fn a_stopped_holder_hands_its_names_over_at_once(dispatch: Dispatch) {
    let nats = Nats::start_jetstream("");
    let a = node(&nats, "a", dispatch, LONG, LONG);
    let b = node(&nats, "b", dispatch, LONG, LONG);
    assert_eq!(count(&a, "POST"), ok("1"));
    assert_eq!(count(&b, "POST"), ok("2"));
    drop(a);
    // The forward to a may find it gone first (a 503 that forgets it), or
    // reach it as it stopped (a 504).
    let refused = post_until_answered(&b, "3", 3);
    assert!(refused <= 1, "{refused} refusals");
    assert_eq!(sample(&b, ACTIVE), 1);
    assert_eq!(sample(&b, "uppercut_placement_activations_total"), 1);
    assert_eq!(count(&b, "GET"), ok("3"));
}

/// A name with no message for the idle time is written, given up and
/// unloaded: another server takes it at once, with its count.
fn an_idle_name_is_unloaded_and_given_up(dispatch: Dispatch) {
    let nats = Nats::start_jetstream("");
    let idle = Duration::from_millis(200);
    let a = node(&nats, "a", dispatch, LONG, idle);
    let b = node(&nats, "b", dispatch, LONG, LONG);
    assert_eq!(count(&a, "POST"), ok("1"));
    assert_eq!(count(&a, "POST"), ok("2"));
    let deadline = Instant::now() + IO_TIMEOUT;
    while sample(&a, ACTIVE) != 0 {
        assert!(
            Instant::now() < deadline,
            "still active after {IO_TIMEOUT:?}"
        );
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(Duration::from_millis(10));
    }
    // Each activation on a ended in a hand-over (two, if a loaded machine
    // let the idle time pass between the two posts).
    let activations = sample(&a, "uppercut_placement_activations_total");
    assert!(activations >= 1);
    assert_eq!(
        sample(&a, "uppercut_placement_handovers_total"),
        activations
    );
    // The gauge drops when a stops serving; the lease is gone once NATS
    // has taken a's purge. Before that, b would find a's lease, forward
    // to a, and a would take the name again.
    wait_lease_gone(&nats, "counter");
    assert_eq!(count(&b, "POST"), ok("3"));
    assert_eq!(sample(&b, ACTIVE), 1);
}

/// Waits until the lease of `name` is not in JetStream (given up, or run
/// out), as JetStream itself answers.
fn wait_lease_gone(nats: &Nats, name: &str) {
    let body = format!(r#"{{"last_by_subj":"$KV.upc_leases.{name}"}}"#);
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        let answer = nats
            .raw_client()
            .request("$JS.API.STREAM.MSG.GET.KV_upc_leases", body.as_bytes());
        let answer: serde_json::Value = serde_json::from_slice(&answer).expect("JSON");
        // 10037: no message found.
        if answer["error"]["err_code"] == 10037 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the lease of {name} stays: {answer}"
        );
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Each name of a kind from the route's path parameters (`cart/{id}`) is
/// an actor of its own, placed on its own; an id that cannot be a name is
/// 400, saying why.
fn names_from_the_path_are_actors_of_their_own(dispatch: Dispatch) {
    let nats = Nats::start_jetstream("");
    let a = node(&nats, "a", dispatch, LONG, LONG);
    let b = node(&nats, "b", dispatch, LONG, LONG);
    assert_eq!(exchange(a.local_addr(), "POST", "/carts/1"), ok("1"));
    assert_eq!(exchange(b.local_addr(), "POST", "/carts/2"), ok("1"));
    assert_eq!(exchange(b.local_addr(), "POST", "/carts/1"), ok("2"));
    assert_eq!(exchange(a.local_addr(), "POST", "/carts/2"), ok("2"));
    assert_eq!(sample(&a, "uppercut_actor_active{actor=\"cart\"}"), 1);
    assert_eq!(sample(&b, "uppercut_actor_active{actor=\"cart\"}"), 1);
    assert_eq!(
        exchange(a.local_addr(), "POST", "/carts/a%20b"),
        (
            "HTTP/1.1 400 Bad Request".to_string(),
            "400 Bad Request: id \"a b\" is not a name: use letters, digits, '-', '_', '=' and \
             '.'\n"
                .to_string()
        )
    );
}

in_both_modes!(
    names_from_the_path_are_actors_of_their_own,
    a_name_is_active_on_one_server_and_the_other_forwards,
    a_stopped_holder_hands_its_names_over_at_once,
    an_idle_name_is_unloaded_and_given_up
);
