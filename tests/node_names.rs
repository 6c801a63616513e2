//! One name, one node: a server whose `--node` another live server of the
//! cluster already uses does not start and says which server holds it;
//! two started together with one name do not both start; two that meet
//! only once NATS comes up keep one of them in the cluster. Real
//! nats-server, both dispatch modes, servers in this process and the
//! binary twice on one box with the host name as the default node.

mod common;

use std::io;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::durable::{exchange, ok, sample, wait_cluster_ready};
use common::nats::Nats;
use common::process::{server_command, Running};
use common::{config, start_with, IO_TIMEOUT};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    host_node_name, ActorRequest, ActorResponse, ClusterConfig, Config, Dispatch, Method, NatsUrl,
    Routes, Server,
};

/// Answers with its node and its count.
struct Counter {
    node: String,
    count: u64,
}

impl AnyActor for Counter {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.count += 1;
            request.respond(ActorResponse::text(format!("{} {}", self.node, self.count)));
        }
    }
}

/// A counter at `/count`, owned as `counter`, answering as `label`.
fn counting(label: &str) -> Routes {
    Routes::new()
        .spawn(
            "counter",
            Counter {
                node: label.to_string(),
                count: 0,
            },
        )
        .actor(&[Method::Get], "/count", "counter")
}

fn config_of(cluster: ClusterConfig, dispatch: Dispatch) -> Config {
    Config {
        cluster: Some(cluster),
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..config(dispatch)
    }
}

/// The start error's text for a name held by the server listening at
/// `holder` in this process, up to the holder's start time, and after it.
fn taken_parts(node: &str, holder: SocketAddr) -> (String, &'static str) {
    let head = format!(
        "node name {node:?} is taken: another server in the cluster uses it (host {}, pid {}, listening on {holder}, started ",
        host_node_name(),
        std::process::id(),
    );
    (
        head,
        " ms after the epoch); give each server its own --node",
    )
}

/// Asserts that `error` is the refusal of a name `holder` holds.
fn assert_taken(error: &io::Error, node: &str, holder: SocketAddr) {
    assert_eq!(error.kind(), io::ErrorKind::AddrInUse, "{error}");
    let text = error.to_string();
    let (head, tail) = taken_parts(node, holder);
    let started = text
        .strip_prefix(&head)
        .and_then(|rest| rest.strip_suffix(tail))
        .unwrap_or_else(|| panic!("{text:?} is not {head:?}…{tail:?}"));
    assert!(started.parse::<u64>().is_ok(), "{started:?} in {text:?}");
}

/// A server on node `c` whose `/count` is `counter@node`: one request.
fn count_from_elsewhere(nats: &Nats, node: &str, dispatch: Dispatch) -> (String, String) {
    let routes = Routes::new().actor(&[Method::Get], "/count", &format!("counter@{node}"));
    let c = start_with(&config_of(nats.cluster("c"), dispatch), routes);
    wait_cluster_ready(&c);
    exchange(c.local_addr(), "GET", "/count")
}

fn a_second_server_with_a_taken_node_name_does_not_start(dispatch: Dispatch) {
    let nats = Nats::start();
    let a = start_with(&config_of(nats.cluster("a"), dispatch), counting("first"));
    wait_cluster_ready(&a);
    let error = Server::start(&config_of(nats.cluster("a"), dispatch), counting("second"))
        .expect_err("a second node named a");
    assert_taken(&error, "a", a.local_addr());
    // The first holds the name alone: every request to counter@a is its.
    for n in 1..=3 {
        assert_eq!(
            count_from_elsewhere(&nats, "a", dispatch),
            ok(&format!("first {n}"))
        );
    }
    let metrics = a.metrics_addr().expect("metrics");
    assert_eq!(sample(metrics, "uppercut_nats_node_name_taken"), 0);
    assert_eq!(sample(metrics, "uppercut_nats_connected"), 1);
    // A name nobody holds starts.
    let b = start_with(&config_of(nats.cluster("b"), dispatch), counting("b"));
    wait_cluster_ready(&b);
    assert_eq!(count_from_elsewhere(&nats, "b", dispatch), ok("b 1"));
}

fn servers_started_together_with_one_name_do_not_both_start(dispatch: Dispatch) {
    let nats = Nats::start();
    for round in 0..4 {
        let node = format!("twin-{round}");
        let barrier = Arc::new(Barrier::new(2));
        let starts: Vec<_> = ["left", "right"]
            .into_iter()
            .map(|label| {
                let config = config_of(nats.cluster(&node), dispatch);
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    Server::start(&config, counting(label)).map(|server| (label, server))
                })
            })
            .collect();
        let results: Vec<_> = starts
            .into_iter()
            .map(|start| start.join().expect("the start thread"))
            .collect();
        let (won, lost): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
        assert_eq!((won.len(), lost.len()), (1, 1), "round {round}");
        let (label, server) = won.into_iter().next().and_then(Result::ok).unwrap();
        let error = lost.into_iter().next().and_then(Result::err).unwrap();
        assert_taken(&error, &node, server.local_addr());
        wait_cluster_ready(&server);
        assert_eq!(
            count_from_elsewhere(&nats, &node, dispatch),
            ok(&format!("{label} 1"))
        );
    }
}

fn servers_that_meet_once_nats_is_up_keep_one_in_the_cluster(dispatch: Dispatch) {
    // NATS is not up when the two start: each serves, and asks once it is.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let url = NatsUrl::parse(&format!("nats://127.0.0.1:{port}")).unwrap();
    let cluster = ClusterConfig::new(vec![url], "a");
    let first = start_with(&config_of(cluster.clone(), dispatch), counting("first"));
    let second = start_with(&config_of(cluster, dispatch), counting("second"));
    let nats = Nats::start_at("", port);
    let taken = |server: &Server| {
        let metrics = server.metrics_addr().expect("metrics");
        sample(metrics, "uppercut_nats_node_name_taken") == 1
    };
    let deadline = Instant::now() + IO_TIMEOUT;
    let (stays, left) = loop {
        match (taken(&first), taken(&second)) {
            (false, true) => break (&first, &second),
            (true, false) => break (&second, &first),
            (true, true) => panic!("both stood down"),
            (false, false) => {
                assert!(Instant::now() < deadline, "neither stood down");
                // A polling interval, not a wait standing in for the
                // condition.
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };
    wait_cluster_ready(stays);
    let metrics = left.metrics_addr().expect("metrics");
    let deadline = Instant::now() + IO_TIMEOUT;
    while sample(metrics, "uppercut_nats_links_up") != 0 {
        assert!(Instant::now() < deadline, "the one taken is still linked");
        std::thread::sleep(Duration::from_millis(5));
    }
    // And gone from NATS: only the holder asks for or answers on the name.
    while nats.subscribers("upc.n.a") != 1 {
        assert!(
            Instant::now() < deadline,
            "the one taken still holds its connection"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let label = match std::ptr::eq(stays, &first) {
        true => "first",
        false => "second",
    };
    for n in 1..=3 {
        assert_eq!(
            count_from_elsewhere(&nats, "a", dispatch),
            ok(&format!("{label} {n}"))
        );
    }
    // The one that left still serves its own routes.
    assert_eq!(
        exchange(left.local_addr(), "GET", "/count"),
        ok(&format!(
            "{} 1",
            match label {
                "first" => "second",
                _ => "first",
            }
        ))
    );
}

in_both_modes!(
    a_second_server_with_a_taken_node_name_does_not_start,
    servers_started_together_with_one_name_do_not_both_start,
    servers_that_meet_once_nats_is_up_keep_one_in_the_cluster,
);

/// The binary twice on one box without `--node`: both take the host name,
/// and the second does not start, saying why and naming the first.
#[test]
fn the_binary_twice_without_node_refuses_the_second() {
    let nats = Nats::start();
    let url = nats.url();
    let mut command = server_command(&["--nats", &url]);
    command.env("RUST_LOG", "info");
    let mut first = Running::start_with_log(command);
    first.wait_for_log("NATS: connected to");
    let output = server_command(&["--nats", &url])
        .stdin(Stdio::null())
        .output()
        .expect("the second runs");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr
        .lines()
        .find(|line| line.starts_with("uppercut-mio-server: "))
        .unwrap_or_else(|| panic!("no error line in {stderr:?}"));
    let text = line.strip_prefix("uppercut-mio-server: ").unwrap();
    let node = host_node_name();
    let head = format!(
        "node name {node:?} is taken: another server in the cluster uses it (host {node}, pid {}, listening on {}, started ",
        first.child.id(),
        first.addr,
    );
    let tail = " ms after the epoch); give each server its own --node";
    assert!(
        text.starts_with(&head) && text.ends_with(tail),
        "{text:?} is not {head:?}…{tail:?}"
    );
    // The first serves on, and says it kept the name.
    first.log_until("another server asked for node name");
    assert_eq!(first.terminate(), Some(0));
}
