//! The examples run as their doc comments say: each takes ADDR:PORT, prints
//! its start line, answers its route, and exits 0 on SIGTERM. `cargo test`
//! builds the examples next to the test binaries.

mod common;
mod route_common;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::Command;

use common::process::Running;
use common::{assert_response, Client};
use route_common::{built, text};

/// Starts example `name` on a free loopback port and checks its start line.
fn start_example(name: &str) -> Running {
    let addr = free_port();
    let mut command = Command::new(example_path(name));
    command.arg(addr.to_string());
    let example = Running::start(command);
    assert_eq!(example.start_line, format!("listening on http://{addr}\n"));
    example
}

/// SIGTERM; the example drains and exits 0.
fn terminate_and_expect_success(mut example: Running) {
    assert_eq!(example.terminate(), Some(0));
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
    let example = start_example("handler");
    let mut client = Client::connect(example.addr);
    let fields = "Content-Type: text/plain; charset=utf-8\r\n";
    let response = get(&mut client, "/greet?name=Ann");
    assert_response(&response, &built("200 OK", fields, "Hello, Ann!"));
    let response = get(&mut client, "/greet?name=J%C3%BCrgen");
    assert_response(&response, &built("200 OK", fields, "Hello, Jürgen!"));
    let response = get(&mut client, "/greet");
    let body = "400 Bad Request: /greet?name=NAME\n";
    assert_response(&response, &built("400 Bad Request", fields, body));
    terminate_and_expect_success(example);
}

#[test]
fn the_actor_route_example_counts_and_drains_on_sigterm() {
    let example = start_example("actor_route");
    let mut client = Client::connect(example.addr);
    for count in ["1", "2", "3"] {
        assert_response(&get(&mut client, "/count"), &text(count));
    }
    terminate_and_expect_success(example);
}

#[test]
fn the_slow_example_answers_both_routes_and_drains_on_sigterm() {
    let example = start_example("slow");
    let mut client = Client::connect(example.addr);
    assert_response(&get(&mut client, "/slow"), &text("slow"));
    assert_response(&get(&mut client, "/fast"), &text("fast"));
    terminate_and_expect_success(example);
}
