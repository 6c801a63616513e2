//! The examples run as their doc comments say: each takes ADDR:PORT, prints
//! its start line, answers its route, and exits 0 on SIGTERM. `cargo test`
//! builds the examples next to the test binaries.

mod common;
mod route_common;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use common::{assert_response, Client};
use route_common::{built, text};

/// An example's process, killed if the test fails before it exits.
struct Example {
    child: Child,
    addr: SocketAddr,
}

impl Example {
    /// Starts example `name` on a free loopback port and waits for its
    /// start line.
    fn start(name: &str) -> Example {
        let addr = free_port();
        let mut child = Command::new(example_path(name))
            .arg(addr.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("example {name} starts: {e}"));
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("read the start line");
        assert_eq!(line, format!("listening on http://{addr}\n"));
        Example { child, addr }
    }

    /// SIGTERM; the example drains and exits 0.
    fn terminate_and_expect_success(mut self) {
        let pid = i32::try_from(self.child.id()).expect("a pid fits");
        // SAFETY: a signal to our own child process, not yet waited for.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = self.child.wait().expect("wait for the example");
        assert_eq!(status.code(), Some(0), "{status}");
    }
}

impl Drop for Example {
    fn drop(&mut self) {
        // Already reaped when the test passed; then this does nothing.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn get(client: &mut Client, target: &str) -> Vec<u8> {
    client.send(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    client.response(false)
}

/// target/<profile>/examples/NAME, beside target/<profile>/deps/ where
/// this test binary runs.
fn example_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/<test>");
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo test`, which builds the examples",
        path.display()
    );
    path
}

/// A loopback address no one listened on a moment ago.
fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address")
}

#[test]
fn the_handler_example_greets_and_drains_on_sigterm() {
    let example = Example::start("handler");
    let mut client = Client::connect(example.addr);
    let fields = "Content-Type: text/plain; charset=utf-8\r\n";
    let response = get(&mut client, "/greet?name=Ann");
    assert_response(&response, &built("200 OK", fields, "Hello, Ann!"));
    let response = get(&mut client, "/greet?name=J%C3%BCrgen");
    assert_response(&response, &built("200 OK", fields, "Hello, Jürgen!"));
    let response = get(&mut client, "/greet");
    let body = "400 Bad Request: /greet?name=NAME\n";
    assert_response(&response, &built("400 Bad Request", fields, body));
    example.terminate_and_expect_success();
}

#[test]
fn the_actor_route_example_counts_and_drains_on_sigterm() {
    let example = Example::start("actor_route");
    let mut client = Client::connect(example.addr);
    for count in ["1", "2", "3"] {
        assert_response(&get(&mut client, "/count"), &text(count));
    }
    example.terminate_and_expect_success();
}

#[test]
fn the_slow_example_answers_both_routes_and_drains_on_sigterm() {
    let example = Example::start("slow");
    let mut client = Client::connect(example.addr);
    assert_response(&get(&mut client, "/slow"), &text("slow"));
    assert_response(&get(&mut client, "/fast"), &text("fast"));
    example.terminate_and_expect_success();
}
