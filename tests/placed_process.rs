//! Placed actors whose holder dies or stops, with the binary's `/count`
//! (`--state jetstream`: the placed `counter@*`) on real processes and a
//! real nats-server with JetStream: after `kill -9` of the holder, the
//! count goes on from another server, from its last acknowledged value;
//! a holder paused past its lease (`SIGSTOP`) and continued never writes
//! again: it finds its lease gone, drops the name and forwards. And the
//! crash checker (`common::crash`) over two servers whose holder is killed
//! again and again: nothing answered is lost or answered twice.

mod common;

use std::time::{Duration, Instant};

use common::crash::History;
use common::durable::{exchange, sample};
use common::integrity::{seed, Rng};
use common::nats::Nats;
use common::process::{server_command, Running};

/// A port nothing listens on now, for a metrics listener.
fn free_port() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// The binary as node `node` on `nats`, `/count` placed, with metrics at
/// `metrics` and a lease of `lease`.
fn start_with_metrics(nats: &Nats, node: &str, lease: &str, metrics: &str) -> Running {
    let command = server_command(&[
        "--pollers",
        "2",
        "--nats",
        &nats.url(),
        "--node",
        node,
        "--state",
        "jetstream",
        "--placement-lease",
        lease,
        "--metrics",
        metrics,
    ]);
    let server = Running::start(command);
    wait_ready(metrics);
    server
}

/// The binary as node `node` on `nats`, `/count` placed, with a lease of
/// `lease`.
fn start(nats: &Nats, node: &str, lease: &str) -> Running {
    start_with_metrics(nats, node, lease, &free_port().to_string())
}

/// Waits until every poller of a server is connected to NATS and
/// subscribed, as its metrics at `metrics` say: each poller has a link of
/// its own, and a request on a poller whose link is still coming up is
/// answered 503.
fn wait_ready(metrics: &str) {
    let metrics: std::net::SocketAddr = metrics.parse().expect("a metrics address");
    let deadline = Instant::now() + common::IO_TIMEOUT;
    let connected = || {
        std::net::TcpStream::connect(metrics).is_ok()
            && sample(metrics, "uppercut_nats_connected") == 1
    };
    while !connected() {
        assert!(Instant::now() < deadline, "not connected to NATS");
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `POST /count` on `server`.
fn post(server: &Running) -> (String, String) {
    exchange(server.addr, "POST", "/count")
}

/// The binary's count `n`, as `exchange` says it.
fn ok(n: u64) -> (String, String) {
    ("HTTP/1.1 200 OK".to_string(), format!("{n}\n"))
}

/// Posts on `server` until one is answered 200; that answer, and how long
/// it took.
fn post_until_answered(server: &Running) -> ((String, String), Duration) {
    let started = Instant::now();
    loop {
        let answer = post(server);
        if answer.0 == "HTTP/1.1 200 OK" {
            return (answer, started.elapsed());
        }
        // Never a silent success: refused (503), or held by a holder that
        // stopped answering until the route's reply timeout (504).
        assert!(
            answer.0 == "HTTP/1.1 503 Service Unavailable"
                || answer.0 == "HTTP/1.1 504 Gateway Timeout",
            "{answer:?}"
        );
        assert!(
            started.elapsed() < common::IO_TIMEOUT,
            "no server took the name: {answer:?}"
        );
        // A client's pause between retries, as a client would make.
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn after_kill_9_of_the_holder_another_server_counts_on() {
    let nats = Nats::start_jetstream("");
    let mut a = start(&nats, "a", "1s");
    let b = start(&nats, "b", "1s");
    assert_eq!(post(&a), ok(1));
    assert_eq!(post(&b), ok(2));
    assert_eq!(post(&a), ok(3));
    a.signal(libc::SIGKILL);
    let _ = a.child.wait();
    let (answer, took) = post_until_answered(&b);
    assert_eq!(
        answer,
        ok(4),
        "the count goes on from the last acknowledged"
    );
    eprintln!("failover after kill -9, 1 s lease: {took:?}");
    assert_eq!(post(&b), ok(5));
}

#[test]
fn a_holder_paused_past_its_lease_never_writes_again() {
    let nats = Nats::start_jetstream("");
    let metrics = free_port();
    let a = start_with_metrics(&nats, "a", "1s", &metrics.to_string());
    let b = start(&nats, "b", "1s");
    assert_eq!(post(&a), ok(1));
    let written = sample(metrics, "uppercut_state_writes_total{result=\"ok\"}");
    a.signal(libc::SIGSTOP);
    // b takes the name once a's lease has run out in JetStream.
    let (answer, _) = post_until_answered(&b);
    assert_eq!(answer, ok(2));
    a.signal(libc::SIGCONT);
    // a finds its lease gone (by its own clock, and by NATS): the count it
    // answers is b's, forwarded, and it writes nothing.
    let (answer, _) = post_until_answered(&a);
    assert_eq!(answer, ok(3));
    assert_eq!(post(&b), ok(4));
    // On a loaded machine b may miss its own renewals (a 1 s lease) and a
    // take the name again: a new activation, which writes (its fence
    // first). What the paused activation did is what is checked.
    let activations = sample(metrics, "uppercut_placement_activations_total");
    assert!(activations >= 1);
    if activations == 1 {
        assert_eq!(
            sample(metrics, "uppercut_state_writes_total{result=\"ok\"}"),
            written,
            "the paused holder wrote after its lease ran out"
        );
        assert_eq!(
            sample(metrics, "uppercut_actor_active{actor=\"counter\"}"),
            0
        );
    }
}

#[test]
fn kill_9_of_holders_keeps_every_acknowledged_increment() {
    let seed = seed();
    let nats = Nats::start_jetstream("");
    let mut servers = [start(&nats, "a", "1s"), start(&nats, "b", "1s")];
    let history = History::new();
    history.serve_at(servers.iter().map(|s| s.addr).collect());
    let clients: Vec<_> = (0..8)
        .map(|id| {
            let history = history.clone();
            std::thread::spawn(move || history.client(seed ^ id, "/count"))
        })
        .collect();
    let mut rng = Rng::new(seed);
    let kills = std::env::var("CRASH_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(2);
    for round in 0..kills {
        // When to kill: a random moment of the load, the fault itself.
        std::thread::sleep(Duration::from_millis(200 + rng.below(500)));
        let victim = rng.below(2) as usize;
        servers[victim].signal(libc::SIGKILL);
        let _ = servers[victim].child.wait();
        let node = ["a", "b"][victim];
        servers[victim] = start(&nats, node, "1s");
        history.serve_at(servers.iter().map(|s| s.addr).collect());
        eprintln!("round {round}: killed {node}");
    }
    std::thread::sleep(Duration::from_millis(200 + rng.below(500)));
    history.stop();
    for client in clients {
        client.join().unwrap();
    }
    let (answer, _) = post_until_answered(&servers[0]);
    let count: u64 = answer.1.trim().parse().unwrap();
    // The count read is itself an increment.
    let verdict = history.check(count - 1, &format!("seed {seed}"));
    assert!(verdict.acked > 0, "seed {seed}: nothing was answered");
    eprintln!("placed crash: seed {seed}, {kills} kills: {verdict:?}");
}

/// Three servers on a three-node JetStream cluster, each connected to
/// NATS, are asked at once before anything is placed: each answer is a
/// 200. The first requests make the buckets; a lease written to a stream
/// just made finds no one behind its subject for a moment ("no
/// responders"), and a read of it goes unanswered until its stream has a
/// leader. Neither is the store failing: both are tried again within the
/// timeout, not answered 503 (nor after the whole timeout).
#[test]
fn the_first_requests_on_a_new_jetstream_cluster_are_answered() {
    let nats = Nats::jetstream_cluster(3);
    let urls: Vec<String> = nats.iter().map(|node| node.url()).collect();
    let urls = urls.join(",");
    let servers: Vec<(Running, std::net::SocketAddr)> = ["a", "b", "c"]
        .iter()
        .map(|node| {
            let metrics = free_port();
            let command = server_command(&[
                "--pollers",
                "2",
                "--nats",
                &urls,
                "--node",
                node,
                "--state",
                "jetstream",
                "--state-replicas",
                "3",
                "--metrics",
                &metrics.to_string(),
            ]);
            (Running::start(command), metrics)
        })
        .collect();
    for (_, metrics) in &servers {
        let deadline = Instant::now() + common::IO_TIMEOUT;
        while sample(*metrics, "uppercut_nats_links_up") < 2 {
            assert!(Instant::now() < deadline, "not connected to NATS");
            // A polling interval, not a wait standing in for the condition.
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let askers: Vec<_> = servers
        .iter()
        .map(|(server, _)| {
            let addr = server.addr;
            std::thread::spawn(move || exchange(addr, "POST", "/count"))
        })
        .collect();
    let mut counts: Vec<u64> = askers
        .into_iter()
        .map(|asker| {
            let (status, body) = asker.join().unwrap();
            assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
            body.trim().parse().unwrap()
        })
        .collect();
    counts.sort();
    assert_eq!(counts, [1, 2, 3]);
}
