//! Durable state under `kill -9`: eight clients increment and read the
//! binary's `/count` while its server is killed at random moments and
//! started again on the same state, and the history of every answer is
//! checked (`common::crash`): nothing answered is lost or answered twice,
//! and no read goes backwards. A short run here (a few kills);
//! `scripts/state-crash.sh` runs the same with `CRASH_KILLS=20` and more.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::crash::History;
use common::integrity::{seed, Rng};
use common::process::{server_command, Running};

/// How many times the server is killed (`CRASH_KILLS`, 3 by default).
fn kills() -> usize {
    std::env::var("CRASH_KILLS")
        .ok()
        .and_then(|kills| kills.parse().ok())
        .unwrap_or(3)
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("upc-crash-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The binary on `--state DIR`, two pollers.
fn start(dir: &std::path::Path) -> Running {
    let mut command = server_command(&["--pollers", "2", "--state"]);
    command.arg(dir);
    Running::start(command)
}

/// The count, read once nothing else runs (itself an increment: the count
/// before it is one less). With `--state jetstream` the counter is placed,
/// and a server started again waits for its killed self's lease to run
/// out: 503 until then.
fn final_count(addr: std::net::SocketAddr) -> u64 {
    let deadline = std::time::Instant::now() + common::IO_TIMEOUT;
    loop {
        let mut client = common::Client::connect(addr);
        client.send(b"GET /count HTTP/1.1\r\nHost: a\r\n\r\n");
        let response = common::text(&client.response(false));
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
        if response.starts_with("HTTP/1.1 200 ") {
            return body.trim().parse::<u64>().expect("a count") - 1;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no count after {:?}: {response}",
            common::IO_TIMEOUT
        );
        // A client's pause between retries.
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn kill_9_keeps_every_acknowledged_increment_in_the_embedded_store() {
    let seed = seed();
    let dir = fresh_dir("embedded");
    let history = History::new();
    let mut server = start(&dir);
    history.serve_at(vec![server.addr]);
    let clients: Vec<_> = (0..8)
        .map(|id| {
            let history = history.clone();
            std::thread::spawn(move || history.client(seed ^ id, "/count"))
        })
        .collect();
    let mut rng = Rng::new(seed);
    for _ in 0..kills() {
        // When to kill: a random moment of the load, the fault itself.
        std::thread::sleep(Duration::from_millis(50 + rng.below(300)));
        server.signal(libc::SIGKILL);
        let _ = server.child.wait();
        history.serve_at(Vec::new());
        server = start(&dir);
        history.serve_at(vec![server.addr]);
    }
    std::thread::sleep(Duration::from_millis(50 + rng.below(300)));
    history.stop();
    for client in clients {
        client.join().unwrap();
    }
    let count = final_count(server.addr);
    let verdict = history.check(count, &format!("seed {seed}"));
    assert!(verdict.acked > 0, "seed {seed}: nothing was answered");
    eprintln!("crash: seed {seed}, {} kills: {verdict:?}", kills());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kill_9_keeps_every_acknowledged_increment_in_jetstream() {
    let seed = seed();
    let nats = common::nats::Nats::start_jetstream("");
    let url = nats.url();
    let start = || {
        let command = server_command(&[
            "--pollers",
            "2",
            "--nats",
            &url,
            "--node",
            "a",
            "--state",
            "jetstream",
        ]);
        Running::start(command)
    };
    let history = History::new();
    let mut server = start();
    history.serve_at(vec![server.addr]);
    let clients: Vec<_> = (0..8)
        .map(|id| {
            let history = history.clone();
            std::thread::spawn(move || history.client(seed ^ id, "/count"))
        })
        .collect();
    let mut rng = Rng::new(seed);
    for _ in 0..kills() {
        // When to kill: a random moment of the load, the fault itself.
        std::thread::sleep(Duration::from_millis(100 + rng.below(300)));
        server.signal(libc::SIGKILL);
        let _ = server.child.wait();
        history.serve_at(Vec::new());
        server = start();
        history.serve_at(vec![server.addr]);
    }
    std::thread::sleep(Duration::from_millis(100 + rng.below(300)));
    history.stop();
    for client in clients {
        client.join().unwrap();
    }
    let count = final_count(server.addr);
    let verdict = history.check(count, &format!("seed {seed}"));
    assert!(verdict.acked > 0, "seed {seed}: nothing was answered");
    eprintln!(
        "crash (jetstream): seed {seed}, {} kills: {verdict:?}",
        kills()
    );
}

/// A full disk: the binary runs in a mount namespace of its own on a 1 MiB
/// tmpfs (`unshare`), which the test fills through `/proc/PID/root`. The
/// increment that finds the disk full is 503, saying so, and is not kept;
/// once the disk has room again the count goes on, with no restart.
#[test]
fn a_full_disk_is_503_and_the_count_goes_on_once_there_is_room() {
    let dir = fresh_dir("full");
    std::fs::create_dir_all(&dir).unwrap();
    let probe = std::process::Command::new("unshare")
        .args(["-rm", "true"])
        .status();
    if !probe.is_ok_and(|status| status.success()) {
        return common::say_skipped("unshare -rm (user and mount namespaces) is not allowed here");
    }
    let script = format!(
        "mount -t tmpfs -o size=1m tmpfs {dir} && exec {binary} --bind 127.0.0.1:0 \
         --pollers 1 --state {dir}",
        dir = dir.display(),
        binary = common::process::BINARY
    );
    let mut command = std::process::Command::new("unshare");
    command.args(["-rm", "sh", "-c", &script]);
    let server = Running::start_with_log(command);
    let post = || {
        let mut client = common::Client::connect(server.addr);
        client.send(b"POST /count HTTP/1.1\r\nHost: a\r\n\r\n");
        let response = common::text(&client.response(false));
        let status = response.lines().next().unwrap_or_default().to_string();
        let body = response
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_string();
        (status, body)
    };
    assert_eq!(post(), ("HTTP/1.1 200 OK".into(), "1\n".into()));
    // The server's view of the directory: its tmpfs.
    let filler = format!("/proc/{}/root{}/filler", server.child.id(), dir.display());
    let mut file = std::fs::File::create(&filler).expect("the tmpfs, seen from here");
    let block = vec![0u8; 4096];
    while std::io::Write::write_all(&mut file, &block).is_ok() {}
    drop(file);
    assert_eq!(
        post(),
        (
            "HTTP/1.1 503 Service Unavailable".into(),
            "503 Service Unavailable: the state of counter was not saved: the store's disk is \
             full: No space left on device (os error 28)\n"
                .into()
        )
    );
    server.wait_for_log("its state was not saved (embedded store): the store's disk is full");
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(post(), ("HTTP/1.1 200 OK".into(), "2\n".into()));
    assert_eq!(post(), ("HTTP/1.1 200 OK".into(), "3\n".into()));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// State moves between the stores: counted in the embedded file, exported,
/// imported into JetStream, and counted on there (by the placed counter
/// the binary runs with `--state jetstream`).
#[test]
fn state_moves_from_the_embedded_file_to_jetstream() {
    let dir = fresh_dir("move");
    let mut server = start(&dir);
    for n in 1..=3 {
        let (status, body) = common::durable::exchange(server.addr, "POST", "/count");
        assert_eq!(
            (status.as_str(), body),
            ("HTTP/1.1 200 OK", format!("{n}\n"))
        );
    }
    assert_eq!(server.terminate(), Some(0));
    let exported = dir.join("state.jsonl");
    let status = std::process::Command::new(common::process::BINARY)
        .arg("--state")
        .arg(&dir)
        .arg("--state-export")
        .arg(&exported)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        std::fs::read_to_string(&exported).unwrap(),
        "{\"key\":\"counter\",\"revision\":3,\"value\":{\"count\":3}}\n"
    );
    let nats = common::nats::Nats::start_jetstream("");
    let status = std::process::Command::new(common::process::BINARY)
        .args([
            "--nats",
            &nats.url(),
            "--state",
            "jetstream",
            "--state-import",
        ])
        .arg(&exported)
        .status()
        .unwrap();
    assert!(status.success());
    let server = Running::start(server_command(&[
        "--nats",
        &nats.url(),
        "--node",
        "a",
        "--state",
        "jetstream",
    ]));
    let deadline = std::time::Instant::now() + common::IO_TIMEOUT;
    loop {
        let (status, body) = common::durable::exchange(server.addr, "POST", "/count");
        if status == "HTTP/1.1 200 OK" {
            assert_eq!(body, "4\n");
            break;
        }
        // The server's links may still be connecting: 503 until then.
        assert!(std::time::Instant::now() < deadline, "{status}: {body}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = std::process::Command::new(common::process::BINARY)
        .args([
            "--nats",
            &nats.url(),
            "--state",
            "jetstream",
            "--state-export",
            "-",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "{\"key\":\"counter\",\"revision\":3,\"value\":{\"count\":4}}\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
