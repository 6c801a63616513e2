//! The chaos check of placed actors: three servers (the binary, `/count`
//! and `/count/NAME` placed, `--state jetstream` with three replicas) on a
//! three-node NATS JetStream cluster, clients on every server incrementing
//! one counter and a handful of others, and a driver that, round after
//! round, `kill -9`s a server (the main counter's holder half the time),
//! pauses one past its lease (`SIGSTOP`, then `SIGCONT`), or kills a NATS
//! node, and starts again what it killed. The history of every answer is
//! checked per counter (`common::crash`): nothing answered is lost or
//! answered twice, no read goes backwards. It reports the failover times
//! of the rounds that hit the main counter's holder.
//!
//! A short run here (`CHAOS_ROUNDS`, 3 by default); `scripts/placement-chaos.sh`
//! runs 50 and more.

mod common;

use std::time::{Duration, Instant};

use common::crash::History;
use common::integrity::{seed, Rng};
use common::nats::Nats;
use common::process::{server_command, Running};

/// The lease of every server.
const LEASE: &str = "2s";

fn rounds() -> usize {
    std::env::var("CHAOS_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(3)
}

/// A port nothing listens on now.
fn free_port() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// Server `n` of three, on the NATS cluster at `urls`.
struct Node {
    metrics: std::net::SocketAddr,
    running: Running,
}

fn start(n: usize, urls: &str) -> Node {
    let name = format!("s{n}");
    let metrics = free_port();
    let command = server_command(&[
        "--pollers",
        "2",
        "--nats",
        urls,
        "--node",
        &name,
        "--state",
        "jetstream",
        "--state-replicas",
        "3",
        "--placement-lease",
        LEASE,
        "--metrics",
        &metrics.to_string(),
    ]);
    let running = Running::start(command);
    Node { metrics, running }
}

/// A metric of `node`, none if it does not answer.
fn sample(node: &Node, series: &str) -> Option<u64> {
    let stream = std::net::TcpStream::connect(node.metrics).ok()?;
    let mut client = common::Client::from_stream(stream);
    client.send(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
    let page = common::text(&client.response(false));
    page.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

/// The fault of a round.
#[derive(Debug, Clone, Copy)]
enum Fault {
    KillServer(usize),
    PauseServer(usize),
    KillNats(usize),
}

#[test]
fn placed_counters_survive_servers_and_nats_nodes_dying_and_pausing() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut nats = Nats::jetstream_cluster(3);
    let urls: Vec<String> = nats.iter().map(Nats::url).collect();
    let urls = urls.join(",");
    let mut servers: Vec<Node> = (0..3).map(|n| start(n, &urls)).collect();
    let addrs = |servers: &[Node]| servers.iter().map(|s| s.running.addr).collect::<Vec<_>>();
    let paths = ["/count", "/count/k1", "/count/k2", "/count/k3"];
    let histories: Vec<_> = paths.iter().map(|_| History::new()).collect();
    for history in &histories {
        history.serve_at(addrs(&servers));
    }
    let clients: Vec<_> = (0..8u64)
        .map(|id| {
            // Half of them on the main counter, the rest one each.
            let which = if id < 4 { 0 } else { 1 + (id as usize - 4) % 3 };
            let history = histories[which].clone();
            let path = paths[which];
            std::thread::spawn(move || history.client(seed ^ id, path))
        })
        .collect();
    let mut failovers = Vec::new();
    let lease = Duration::from_secs(2);
    for round in 0..rounds() {
        // Between faults: the load runs, the names settle.
        std::thread::sleep(Duration::from_millis(500 + rng.below(1000)));
        let holder = servers
            .iter()
            .position(|node| sample(node, "uppercut_actor_active{actor=\"counter\"}") == Some(1));
        let fault = match rng.below(4) {
            0 | 1 => {
                let victim = match (rng.below(2), holder) {
                    (0, Some(holder)) => holder,
                    _ => rng.below(3) as usize,
                };
                match rng.below(2) {
                    0 => Fault::KillServer(victim),
                    _ => Fault::PauseServer(victim),
                }
            }
            2 => Fault::KillServer(rng.below(3) as usize),
            _ => Fault::KillNats(rng.below(3) as usize),
        };
        let started = Instant::now();
        let hits_holder = matches!(
            fault,
            Fault::KillServer(v) | Fault::PauseServer(v) if Some(v) == holder
        );
        match fault {
            Fault::KillServer(v) => {
                servers[v].running.signal(libc::SIGKILL);
                let _ = servers[v].running.child.wait();
                servers[v] = start(v, &urls);
                for history in &histories {
                    history.serve_at(addrs(&servers));
                }
            }
            Fault::PauseServer(v) => {
                servers[v].running.signal(libc::SIGSTOP);
                // Past its lease: the fault itself.
                std::thread::sleep(lease + Duration::from_millis(rng.below(1000)));
                servers[v].running.signal(libc::SIGCONT);
            }
            Fault::KillNats(v) => {
                nats[v].restart_after(|| {
                    // How long the node stays down: the fault itself.
                    std::thread::sleep(Duration::from_millis(rng.below(1500)));
                });
            }
        }
        if hits_holder {
            // The first answer of the main counter after the fault, from
            // any server.
            let answered = histories[0].answers();
            let deadline = started + common::IO_TIMEOUT;
            while histories[0].answers() == answered {
                assert!(Instant::now() < deadline, "seed {seed}: no failover");
                std::thread::sleep(Duration::from_millis(5));
            }
            failovers.push(started.elapsed());
        }
        eprintln!(
            "chaos round {round}: {fault:?}{}",
            if hits_holder { " (the holder)" } else { "" }
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    for history in &histories {
        history.stop();
    }
    for client in clients {
        client.join().unwrap();
    }
    for (path, history) in paths.iter().zip(&histories) {
        let count = final_count(&servers, path);
        let verdict = history.check(count, &format!("seed {seed}, {path}"));
        eprintln!("chaos: {path}: {verdict:?}");
        assert!(
            verdict.acked > 0,
            "seed {seed}: {path}: nothing was answered"
        );
    }
    failovers.sort();
    let at = |q: f64| failovers.get(((failovers.len() as f64 - 1.0) * q).round() as usize);
    eprintln!(
        "chaos: seed {seed}, {} rounds, {} on the holder: failover p50 {:?}, p99 {:?}, max {:?}",
        rounds(),
        failovers.len(),
        at(0.5),
        at(0.99),
        failovers.last()
    );
}

/// The count at `path` once everything has settled (the read itself is
/// an increment, so one less), from whichever server answers first.
fn final_count(servers: &[Node], path: &str) -> u64 {
    let deadline = Instant::now() + common::IO_TIMEOUT;
    loop {
        for node in servers {
            let Ok(stream) = std::net::TcpStream::connect(node.running.addr) else {
                continue;
            };
            let mut client = common::Client::from_stream(stream);
            client.send(format!("POST {path} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes());
            let response = common::text(&client.response(false));
            if response.starts_with("HTTP/1.1 200 ") {
                let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
                return body.trim().parse::<u64>().expect("a count") - 1;
            }
        }
        assert!(Instant::now() < deadline, "{path}: no count");
        std::thread::sleep(Duration::from_millis(20));
    }
}
