//! Durable actors on JetStream (`--state jetstream`), against a real
//! nats-server with JetStream: the state outlives its server and is the
//! same for every server; a write refused for a stale revision (someone
//! else wrote) is answered 503 and the state read again, never written
//! over; a write that times out is 503 and loses nothing acknowledged;
//! a NATS without JetStream is 503 saying so. Exact bodies, both
//! dispatch modes.

mod common;

use std::time::Duration;

use common::durable::{exchange, ok, wait_cluster_ready, Counter};
use common::nats::Nats;
use common::{config, start_with};
use uppercut_mio_server::{Config, Dispatch, Method, Routes, Server, StateConfig};

/// Server `node` on `nats`, its durable `counter` at `/count` (or, with
/// `route_to`, `/count` routed there), its state in JetStream.
fn node(
    nats: &Nats,
    node: &str,
    dispatch: Dispatch,
    timeout: Duration,
    route_to: Option<&str>,
) -> Server {
    let routes = Routes::new().spawn_durable("counter", Counter::default());
    let routes = routes.actor(
        &[Method::Get, Method::Post],
        "/count",
        route_to.unwrap_or("counter"),
    );
    let config = Config {
        cluster: Some(nats.cluster(node)),
        state: Some(StateConfig::JetStream {
            timeout,
            replicas: 1,
        }),
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

fn unavailable(body: &str) -> (String, String) {
    (
        "HTTP/1.1 503 Service Unavailable".to_string(),
        format!("503 Service Unavailable: {body}\n"),
    )
}

const TIMEOUT: Duration = Duration::from_secs(5);

/// A count outlives its server, and a server that routes `/count` to it
/// from elsewhere counts on: one state for the cluster.
fn the_state_outlives_its_server_and_is_one_for_the_cluster(dispatch: Dispatch) {
    let nats = Nats::start_jetstream("");
    let a = node(&nats, "a", dispatch, TIMEOUT, None);
    for n in 1..=3 {
        assert_eq!(count(&a, "POST"), ok(&n.to_string()));
    }
    drop(a);
    let a = node(&nats, "a", dispatch, TIMEOUT, None);
    assert_eq!(count(&a, "GET"), ok("3"));
    let b = node(&nats, "b", dispatch, TIMEOUT, Some("counter@a"));
    assert_eq!(count(&b, "POST"), ok("4"));
    assert_eq!(count(&a, "POST"), ok("5"));
    drop(a);
    let a = node(&nats, "a", dispatch, TIMEOUT, None);
    assert_eq!(count(&b, "POST"), ok("6"));
    drop(a);
}

/// Two servers that each run `counter` on the one key: a write from a
/// state that someone else has moved on is refused by JetStream, answered
/// 503, and the state read again; nothing is written over.
fn a_stale_state_is_read_again_never_written_over(dispatch: Dispatch) {
    let nats = Nats::start_jetstream("");
    let a = node(&nats, "a", dispatch, TIMEOUT, None);
    let b = node(&nats, "b", dispatch, TIMEOUT, None);
    assert_eq!(count(&a, "POST"), ok("1"));
    assert_eq!(count(&b, "POST"), ok("2"));
    assert_eq!(
        count(&a, "POST"),
        unavailable(
            "the state of counter was not saved: someone else wrote the state since \
             revision 1: read again, not written"
        )
    );
    assert_eq!(count(&a, "POST"), ok("3"));
    assert_eq!(
        count(&b, "POST"),
        unavailable(
            "the state of counter was not saved: someone else wrote the state since \
             revision 2: read again, not written"
        )
    );
    assert_eq!(count(&b, "POST"), ok("4"));
}

/// With NATS stopped past the state timeout, an increment is 503 (its
/// write may yet happen: NATS takes it when it continues); the next write,
/// from the state before it, is refused as stale and the state read
/// again, and the one after counts on from what NATS holds.
fn a_write_that_times_out_is_503_and_loses_nothing_acknowledged(dispatch: Dispatch) {
    let nats = Nats::start_jetstream("");
    let a = node(&nats, "a", dispatch, Duration::from_millis(300), None);
    assert_eq!(count(&a, "POST"), ok("1"));
    nats.pause(true);
    assert_eq!(
        count(&a, "POST"),
        unavailable("the state of counter was not saved: the store did not answer in time")
    );
    nats.pause(false);
    assert_eq!(
        count(&a, "POST"),
        unavailable(
            "the state of counter was not saved: someone else wrote the state since \
             revision 1: read again, not written"
        )
    );
    assert_eq!(count(&a, "POST"), ok("3"));
}

/// A NATS without JetStream: 503, saying what to do.
fn a_nats_without_jetstream_is_503_saying_so(dispatch: Dispatch) {
    let nats = Nats::start();
    let a = node(&nats, "a", dispatch, TIMEOUT, None);
    assert_eq!(
        count(&a, "POST"),
        unavailable(
            "the state of counter is unavailable: the store is unavailable: JetStream is not \
             enabled on the NATS server (start nats-server with -js), or the bucket's \
             stream had no leader while it was tried"
        )
    );
}

in_both_modes!(
    the_state_outlives_its_server_and_is_one_for_the_cluster,
    a_stale_state_is_read_again_never_written_over,
    a_write_that_times_out_is_503_and_loses_nothing_acknowledged,
    a_nats_without_jetstream_is_503_saying_so
);
