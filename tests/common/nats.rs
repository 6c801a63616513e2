//! A real nats-server for the cluster tests: started on a free loopback
//! port, with the options a test asks for, and killed when dropped.
//!
//! The binary is `NATS_SERVER` if set, else `nats-server` on the PATH (the
//! Debian package `.ci/run` installs), else one this harness builds once
//! with `go install` into the target directory (Go is on every machine
//! this project is built on), so that `cargo test` needs nothing more.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use uppercut_mio_server::{ClusterConfig, NatsUrl};

use super::IO_TIMEOUT;

/// The nats-server `go install` builds when none is installed.
const MODULE: &str = "github.com/nats-io/nats-server/v2@v2.10.29";

/// A running nats-server.
pub struct Nats {
    child: Child,
    pub addr: SocketAddr,
    /// Its monitoring port (`/connz`).
    monitor: SocketAddr,
    dir: PathBuf,
    /// What it was started with, to start it again on the same port.
    config: String,
}

/// The nats-server binary to run.
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("NATS_SERVER") {
        return PathBuf::from(path);
    }
    if Command::new("nats-server")
        .arg("--version")
        .output()
        .is_ok()
    {
        return PathBuf::from("nats-server");
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nats-server");
    let built = dir.join("nats-server");
    if built.exists() {
        return built;
    }
    // One builder at a time: a directory is made atomically.
    let lock = dir.with_extension("building");
    let deadline = Instant::now() + Duration::from_secs(600);
    while std::fs::create_dir_all(dir.parent().unwrap()).is_ok()
        && std::fs::create_dir(&lock).is_err()
    {
        assert!(
            Instant::now() < deadline,
            "another test is building nats-server"
        );
        if built.exists() {
            return built;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = writeln!(
        std::io::stderr(),
        "nats-server is not installed: building {MODULE} with go install (once)"
    );
    let status = Command::new("go")
        .args(["install", MODULE])
        .env("GOBIN", &dir)
        .status();
    let _ = std::fs::remove_dir(&lock);
    assert!(
        status.is_ok_and(|status| status.success()),
        "nats-server is not installed and `go install {MODULE}` failed: \
         install it (Debian package nats-server, as .ci/run does) or set NATS_SERVER"
    );
    built
}

/// Whether the nats-server in use takes `sync_interval` (2.10 and later).
fn syncs_always() -> bool {
    static SYNCS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SYNCS.get_or_init(|| {
        let version = Command::new(binary()).arg("--version").output();
        let version = version.map(|out| String::from_utf8_lossy(&out.stdout).to_string());
        // "nats-server: v2.12.3"
        let minor = version.ok().and_then(|line| {
            let v = line.trim().rsplit('v').next()?.to_string();
            let mut parts = v.split('.');
            let major: u32 = parts.next()?.parse().ok()?;
            let minor: u32 = parts.next()?.parse().ok()?;
            Some((major, minor))
        });
        minor.is_some_and(|version| version >= (2, 10))
    })
}

impl Nats {
    /// A nats-server on a free port, with `config` (nats-server's own
    /// configuration format) added to its defaults.
    pub fn start_with(config: &str) -> Nats {
        Nats::start_at(config, 0)
    }

    /// A nats-server with nothing but the defaults.
    pub fn start() -> Nats {
        Nats::start_with("")
    }

    /// A JetStream cluster of `size` nats-servers on loopback, routed to
    /// one another, each with its own store (kept across restarts) and
    /// `sync_interval: always` where the servers have it. Their JetStream
    /// meta leader is elected before this returns.
    pub fn jetstream_cluster(size: usize) -> Vec<Nats> {
        Nats::jetstream_cluster_on("127.0.0.1", size)
    }

    /// As `jetstream_cluster`, the clients' port on `host` (`0.0.0.0`: every
    /// address, for servers in other network namespaces).
    pub fn jetstream_cluster_on(host: &str, size: usize) -> Vec<Nats> {
        let free = || {
            let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            socket.local_addr().unwrap().port()
        };
        let clients: Vec<u16> = (0..size).map(|_| free()).collect();
        let routes: Vec<u16> = (0..size).map(|_| free()).collect();
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sync = match syncs_always() {
            true => ", sync_interval: always",
            false => "",
        };
        let nodes: Vec<Nats> = (0..size)
            .map(|n| {
                let store = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                    .join(format!("jetstream-cluster-{}-{id}-{n}", std::process::id()));
                let _ = std::fs::remove_dir_all(&store);
                let others: Vec<String> = routes
                    .iter()
                    .enumerate()
                    .filter(|&(m, _)| m != n)
                    .map(|(_, port)| format!("\"nats-route://127.0.0.1:{port}\""))
                    .collect();
                let config = format!(
                    "server_name: n{n}\njetstream {{ store_dir: \"{}\"{sync} }}\n\
                     cluster {{ name: c{id}, listen: \"127.0.0.1:{}\", routes: [{}] }}",
                    store.display(),
                    routes[n],
                    others.join(", ")
                );
                Nats::start_on(host, &config, clients[n])
            })
            .collect();
        // JetStream answers once the cluster has a meta leader.
        let deadline = Instant::now() + IO_TIMEOUT;
        for node in &nodes {
            while !node.jetstream_ready() {
                assert!(Instant::now() < deadline, "no JetStream meta leader");
                // A polling interval, not a wait standing in for the condition.
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        nodes
    }

    /// Whether this node's JetStream answers (`/jsz`: a meta leader).
    pub fn jetstream_ready(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(self.monitor) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
        if stream.write_all(b"GET /jsz HTTP/1.0\r\n\r\n").is_err() {
            return false;
        }
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|jsz| {
                jsz["meta_cluster"]["leader"]
                    .as_str()
                    .map(|l| !l.is_empty())
            })
            .unwrap_or(false)
    }

    /// A nats-server with JetStream, its store in a directory of its own
    /// that a restart keeps, and every write on disk before it is
    /// acknowledged (`sync_interval: always`) where the server has the
    /// option (2.10 and later; Debian's 2.9 syncs every two minutes, which
    /// a killed process does not lose, but a machine that loses power
    /// would). `config` is added.
    pub fn start_jetstream(config: &str) -> Nats {
        let store = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "jetstream-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&store);
        let sync = match syncs_always() {
            true => ", sync_interval: always",
            false => "",
        };
        Nats::start_with(&format!(
            "jetstream {{ store_dir: \"{}\"{sync} }}\n{config}",
            store.display()
        ))
    }

    pub fn start_at(config: &str, port: u16) -> Nats {
        Nats::start_on("127.0.0.1", config, port)
    }

    /// A nats-server whose clients' port is `port` on `host`.
    pub fn start_on(host: &str, config: &str, port: u16) -> Nats {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "nats-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("nats.conf");
        let port = if port == 0 {
            "-1".to_string()
        } else {
            port.to_string()
        };
        std::fs::write(
            &file,
            format!("listen: \"{host}:{port}\"\nhttp: \"127.0.0.1:-1\"\n{config}\n"),
        )
        .unwrap();
        let mut child = Command::new(binary())
            .arg("-c")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nats-server starts");
        // It says where it listens on its log; the rest of the log is
        // drained on a thread so it never blocks.
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                for (says, what) in [
                    ("Listening for client connections on ", "client"),
                    ("Starting http monitor on ", "monitor"),
                ] {
                    if let Some(at) = line.find(says) {
                        let addr = line[at + says.len()..].trim().trim_start_matches("http://");
                        let _ = tx.send((what, addr.to_string()));
                    }
                }
            }
        });
        let (mut addr, mut monitor) = (None, None);
        while addr.is_none() || monitor.is_none() {
            let (what, at) = rx
                .recv_timeout(IO_TIMEOUT)
                .expect("nats-server says where it listens");
            let at: SocketAddr = at.parse().expect("an address");
            match what {
                "client" => addr = Some(at),
                _ => monitor = Some(at),
            }
        }
        Nats {
            child,
            addr: addr.unwrap(),
            monitor: monitor.unwrap(),
            dir,
            config: config.to_string(),
        }
    }

    /// How many client connections subscribe to exactly `subject`, from
    /// nats-server's own monitoring (`/connz?subs=1`).
    pub fn subscribers(&self, subject: &str) -> usize {
        let mut stream = TcpStream::connect(self.monitor).unwrap();
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream
            .write_all(b"GET /connz?subs=1&limit=1024 HTTP/1.0\r\n\r\n")
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
        let connz: serde_json::Value = serde_json::from_str(body).expect("connz JSON");
        connz["connections"].as_array().map_or(0, |connections| {
            connections
                .iter()
                .filter(|c| {
                    c["subscriptions_list"]
                        .as_array()
                        .is_some_and(|subs| subs.iter().any(|s| s == subject))
                })
                .count()
        })
    }

    /// Waits until `count` connections subscribe to `subject`, as NATS's
    /// own monitoring counts them.
    pub fn wait_for_subscribers(&self, subject: &str, count: usize) {
        let deadline = std::time::Instant::now() + IO_TIMEOUT;
        while self.subscribers(subject) < count {
            assert!(
                std::time::Instant::now() < deadline,
                "{subject} has no {count} subscribers after {IO_TIMEOUT:?}"
            );
            // A polling interval, not a wait standing in for the condition.
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://{}", self.addr)
    }

    /// The cluster configuration of node `node` on this NATS.
    pub fn cluster(&self, node: &str) -> ClusterConfig {
        ClusterConfig::new(vec![NatsUrl::parse(&self.url()).unwrap()], node)
    }

    /// Stops it (SIGKILL) and starts it again on the same port.
    pub fn restart(&mut self) {
        self.restart_with(&self.config.clone());
    }

    /// Stops it (SIGKILL), runs `meanwhile`, and starts it again on the
    /// same port.
    pub fn restart_after(&mut self, meanwhile: impl FnOnce()) {
        self.kill();
        meanwhile();
        let host = self.addr.ip().to_string();
        *self = Nats::start_on(&host, &self.config.clone(), self.addr.port());
    }

    /// Stops it (SIGKILL) and starts it again on the same port, with
    /// `config` in place of what it had.
    pub fn restart_with(&mut self, config: &str) {
        self.kill();
        let host = self.addr.ip().to_string();
        *self = Nats::start_on(&host, config, self.addr.port());
    }

    /// Sends SIGSTOP (`true`) and waits until every thread of it has
    /// stopped, or sends SIGCONT (`false`).
    pub fn pause(&self, stop: bool) {
        let signal = if stop { libc::SIGSTOP } else { libc::SIGCONT };
        // SAFETY: a signal to a child process this test started.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        if !stop {
            return;
        }
        // A stop reaches each thread as it next runs: until then, one of
        // them may still pass a message on.
        let tasks = format!("/proc/{}/task", self.child.id());
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            let stopped = std::fs::read_dir(&tasks).unwrap().all(|task| {
                let stat = std::fs::read_to_string(task.unwrap().path().join("stat"));
                // The state follows the command's closing parenthesis.
                stat.ok()
                    .and_then(|stat| {
                        stat.rsplit_once(") ")
                            .map(|(_, rest)| rest.starts_with('T'))
                    })
                    .unwrap_or(true)
            });
            if stopped {
                return;
            }
            assert!(Instant::now() < deadline, "nats-server did not stop");
            std::thread::yield_now();
        }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A raw client: connected, `CONNECT` sent and answered.
    pub fn raw_client(&self) -> RawNats {
        self.try_raw_client(IO_TIMEOUT)
            .expect("a raw client connects to NATS")
    }

    /// A raw client whose reads wait at most `timeout`, or why there is
    /// none (the node is down, or did not answer).
    pub fn try_raw_client(&self, timeout: Duration) -> std::io::Result<RawNats> {
        let stream = TcpStream::connect_timeout(&self.addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        let mut client = RawNats {
            stream,
            pending: Vec::new(),
        };
        let info = client.try_line()?;
        if !info.starts_with("INFO ") {
            return Err(std::io::Error::other(format!("not an INFO: {info}")));
        }
        client.stream.write_all(
            b"CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\nPING\r\n",
        )?;
        match client.try_line()? {
            pong if pong == "PONG" => Ok(client),
            other => Err(std::io::Error::other(format!("not a PONG: {other}"))),
        }
    }
}

static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Drop for Nats {
    fn drop(&mut self) {
        self.pause(false);
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A NATS client speaking the protocol by hand.
pub struct RawNats {
    pub stream: TcpStream,
    pending: Vec<u8>,
}

impl RawNats {
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// The next line, without its CRLF (answering the server's PINGs).
    pub fn line(&mut self) -> String {
        self.try_line().expect("read a line from NATS")
    }

    /// The next line, or the error that ended the wait (the read timeout,
    /// or NATS closing the connection).
    fn try_line(&mut self) -> std::io::Result<String> {
        loop {
            if let Some(at) = self.pending.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.pending.drain(..at + 2).collect();
                let line = String::from_utf8_lossy(&line[..at]).into_owned();
                if line == "PING" {
                    self.stream.write_all(b"PONG\r\n")?;
                    continue;
                }
                return Ok(line);
            }
            self.fill()?;
        }
    }

    /// Reads what comes next into `pending`.
    fn fill(&mut self) -> std::io::Result<()> {
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk)? {
            0 => Err(std::io::ErrorKind::UnexpectedEof.into()),
            len => {
                self.pending.extend_from_slice(&chunk[..len]);
                Ok(())
            }
        }
    }

    /// Exactly `len` bytes, then the CRLF after them.
    pub fn payload(&mut self, len: usize) -> Vec<u8> {
        self.try_payload(len).expect("read a payload from NATS")
    }

    fn try_payload(&mut self, len: usize) -> std::io::Result<Vec<u8>> {
        while self.pending.len() < len + 2 {
            self.fill()?;
        }
        let payload: Vec<u8> = self.pending.drain(..len).collect();
        self.pending.drain(..2);
        Ok(payload)
    }

    /// Sends `body` to `subject` and returns the payload of the answer
    /// (subscribed and asked on an inbox of its own).
    pub fn request(&mut self, subject: &str, body: &[u8]) -> Vec<u8> {
        self.try_request(subject, body)
            .expect("an answer from NATS")
    }

    /// As `request`, or the error that ended the wait: for a node that
    /// may be restarting, or a JetStream that has no leader yet (whose
    /// requests go unanswered until the read timeout).
    pub fn try_request(&mut self, subject: &str, body: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut request = format!(
            "SUB _upc_test_inbox.* 77\r\nPUB {subject} _upc_test_inbox.1 {}\r\n",
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        request.extend_from_slice(b"\r\n");
        self.stream.write_all(&request)?;
        loop {
            let line = self.try_line()?;
            let parts: Vec<&str> = line.split(' ').collect();
            match parts.first() {
                Some(&"MSG") | Some(&"HMSG") => {
                    let len = parts.last().and_then(|n| n.parse().ok()).unwrap_or(0);
                    let payload = self.try_payload(len)?;
                    self.stream.write_all(b"UNSUB 77\r\n")?;
                    // An HMSG's headers come first: the payload follows them.
                    if parts[0] == "HMSG" {
                        let headers: usize = parts[parts.len() - 2].parse().unwrap_or(0);
                        return Ok(payload[headers.min(payload.len())..].to_vec());
                    }
                    return Ok(payload);
                }
                _ => continue,
            }
        }
    }

    /// Waits until the server has handled what was sent before.
    pub fn sync(&mut self) {
        self.send(b"PING\r\n");
        assert_eq!(self.line(), "PONG");
    }
}
