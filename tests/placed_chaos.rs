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

/// Server `n` of three, on the NATS cluster at `urls` (with a metrics
/// listener, which the chaos goes through too).
struct Node {
    running: Running,
}

/// A network namespace of the chaos check's own, joined to this one by a
/// veth pair: `10.99.N.1` here, `10.99.N.2` there. Removed when dropped.
struct Netns {
    name: String,
    link: String,
    inside: String,
}

impl Netns {
    fn new(n: usize) -> Netns {
        let netns = Netns {
            name: format!("upcchaos{n}-{}", std::process::id() % 10_000),
            link: format!("upcv{n}-{}", std::process::id() % 10_000),
            inside: format!("10.99.{n}.2"),
        };
        let peer = format!("{}p", netns.link);
        let ip = |args: &[&str]| {
            let status = std::process::Command::new("ip").args(args).status();
            assert!(status.is_ok_and(|s| s.success()), "ip {args:?}");
        };
        ip(&["netns", "add", &netns.name]);
        ip(&[
            "link",
            "add",
            &netns.link,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
        ]);
        ip(&["link", "set", &peer, "netns", &netns.name]);
        ip(&[
            "addr",
            "add",
            &format!("10.99.{n}.1/24"),
            "dev",
            &netns.link,
        ]);
        ip(&["link", "set", &netns.link, "up"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &netns.name, "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        inside(&["addr", "add", &format!("{}/24", netns.inside), "dev", &peer]);
        inside(&["link", "set", &peer, "up"]);
        inside(&["link", "set", "lo", "up"]);
        netns
    }

    /// Cuts it off (`false`) or joins it again (`true`).
    fn link(&self, up: bool) {
        let state = if up { "up" } else { "down" };
        let status = std::process::Command::new("ip")
            .args(["link", "set", &self.link, state])
            .status();
        assert!(status.is_ok_and(|s| s.success()), "ip link set {state}");
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.link])
            .status();
    }
}

/// Whether the check cuts a server off in a namespace: `CHAOS_NETNS=1`.
fn with_netns() -> bool {
    std::env::var("CHAOS_NETNS").is_ok_and(|v| v == "1")
}

/// Server `n`, in `netns` if given (bound on its address there, reaching
/// NATS on this side's).
fn start_in(n: usize, urls: &str, netns: Option<&Netns>) -> Node {
    let name = format!("s{n}");
    let metrics = match netns {
        Some(netns) => format!("{}:{}", netns.inside, free_port().port())
            .parse()
            .unwrap(),
        None => free_port(),
    };
    let bind = match netns {
        Some(netns) => format!("{}:0", netns.inside),
        None => "127.0.0.1:0".to_string(),
    };
    let urls = match netns {
        Some(_) => urls.replace("127.0.0.1", &format!("10.99.{n}.1")),
        None => urls.to_string(),
    };
    let mut command = match netns {
        Some(netns) => {
            let mut command = std::process::Command::new("ip");
            command.args(["netns", "exec", &netns.name, common::process::BINARY]);
            command
        }
        None => std::process::Command::new(common::process::BINARY),
    };
    command.args([
        "--bind",
        &bind,
        "--pollers",
        "2",
        "--nats",
        &urls,
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
    Node { running }
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
    Node { running }
}

/// The server (`sN`) whose lease on `name` is in JetStream now, if any, by
/// a read of the lease on a NATS node that answers.
fn holder_of(nats: &[Nats], name: &str) -> Option<usize> {
    for node in nats {
        // A node restarting, or a stream without a leader yet (whose
        // requests go unanswered): the next node is asked.
        let Ok(mut client) = node.try_raw_client(Duration::from_secs(2)) else {
            continue;
        };
        let body = format!(r#"{{"last_by_subj":"$KV.upc_leases.{name}"}}"#);
        let Ok(answer) =
            client.try_request("$JS.API.STREAM.MSG.GET.KV_upc_leases", body.as_bytes())
        else {
            continue;
        };
        let answer: serde_json::Value = serde_json::from_slice(&answer).ok()?;
        let data = answer["message"]["data"].as_str()?;
        use base64::Engine;
        let lease = base64::engine::general_purpose::STANDARD
            .decode(data)
            .ok()?;
        let lease: serde_json::Value = serde_json::from_slice(&lease).ok()?;
        let server = lease["node"].as_str()?.strip_prefix('s')?;
        return server.parse().ok();
    }
    None
}

/// The fault of a round.
#[derive(Debug, Clone, Copy)]
enum Fault {
    KillServer(usize),
    PauseServer(usize),
    KillNats(usize),
    CutServer(usize),
}

#[test]
fn placed_counters_survive_servers_and_nats_nodes_dying_and_pausing() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let netns = with_netns().then(|| Netns::new(2));
    let mut nats = match &netns {
        Some(_) => Nats::jetstream_cluster_on("0.0.0.0", 3),
        None => Nats::jetstream_cluster(3),
    };
    let urls: Vec<String> = nats
        .iter()
        .map(|node| format!("nats://127.0.0.1:{}", node.addr.port()))
        .collect();
    let urls = urls.join(",");
    let launch = |n: usize| match (&netns, n) {
        (Some(netns), 2) => start_in(n, &urls, Some(netns)),
        _ => start(n, &urls),
    };
    let mut servers: Vec<Node> = (0..3).map(launch).collect();
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
    // The faults hit a cluster that runs: every counter has answered
    // once (its bucket made, its lease taken, its state read).
    let warm = Instant::now();
    for (path, history) in paths.iter().zip(&histories) {
        while history.answers() == 0 {
            assert!(
                warm.elapsed() < common::IO_TIMEOUT,
                "seed {seed}: {path} never answered before any fault"
            );
            // A polling interval, not a wait standing in for the condition.
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    eprintln!(
        "chaos: every counter answered {:?} after the start",
        warm.elapsed()
    );
    let mut failovers = Vec::new();
    let lease = Duration::from_secs(2);
    for round in 0..rounds() {
        // Between faults: the load runs, the names settle.
        std::thread::sleep(Duration::from_millis(500 + rng.below(1000)));
        let holder = holder_of(&nats, "counter");
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
            2 if netns.is_some() && rng.below(2) == 0 => Fault::CutServer(2),
            2 => Fault::KillServer(rng.below(3) as usize),
            _ => Fault::KillNats(rng.below(3) as usize),
        };
        let started = Instant::now();
        let hits_holder = matches!(
            fault,
            Fault::KillServer(v) | Fault::PauseServer(v) | Fault::CutServer(v) if Some(v) == holder
        );
        match fault {
            Fault::KillServer(v) => {
                servers[v].running.signal(libc::SIGKILL);
                let _ = servers[v].running.child.wait();
                servers[v] = launch(v);
                for history in &histories {
                    history.serve_at(addrs(&servers));
                }
            }
            Fault::CutServer(_) => {
                if let Some(netns) = &netns {
                    netns.link(false);
                    // Past its lease, cut off: the fault itself.
                    std::thread::sleep(lease + Duration::from_millis(rng.below(1000)));
                    netns.link(true);
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
            // any server (it may have come while the fault lasted).
            let deadline = started + common::IO_TIMEOUT;
            let answered = loop {
                if let Some(at) = histories[0].first_answer_after(started) {
                    break at;
                }
                assert!(Instant::now() < deadline, "seed {seed}: no failover");
                // A polling interval, not a wait standing in for the condition.
                std::thread::sleep(Duration::from_millis(5));
            };
            failovers.push(answered - started);
        }
        eprintln!(
            "chaos round {round}: {fault:?}{}",
            match hits_holder {
                true => format!(
                    " (the holder): answered again after {:?}",
                    failovers[failovers.len() - 1]
                ),
                false => String::new(),
            }
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
            let addr = node.running.addr;
            let Ok(stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1))
            else {
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
