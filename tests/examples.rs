//! The examples run as their doc comments say: each takes ADDR:PORT, prints
//! its start line, answers its route, and exits 0 on SIGTERM. `cargo test`
//! builds the examples next to the test binaries.

mod common;
mod route_common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use common::process::Running;
use common::{assert_response, Client};
use route_common::{built, text};

/// Starts example `name` on loopback port 0 (the example binds a free
/// port itself, so none can be taken between a probe and its bind) and
/// checks its start line names the port it got.
fn start_example(name: &str) -> Running {
    let mut command = Command::new(example_path(name));
    command.arg("127.0.0.1:0");
    let example = Running::start(command);
    assert_eq!(example.addr.ip().to_string(), "127.0.0.1");
    assert_ne!(example.addr.port(), 0, "the port the example got");
    assert_eq!(
        example.start_line,
        format!("listening on http://{}\n", example.addr)
    );
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
    let response = get(&mut client, "/users/J%C3%BCrgen");
    assert_response(&response, &built("200 OK", fields, "user Jürgen"));
    let response = get(&mut client, "/whoami");
    assert_response(&response, &built("200 OK", fields, "127.0.0.1"));
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

#[test]
fn the_notes_example_answers_json_and_json_problems() {
    let example = start_example("notes");
    let mut client = Client::connect(example.addr);
    let json = "Content-Type: application/json\r\n";
    let problem = "Content-Type: application/problem+json\r\n";
    client.send(
        b"POST /notes HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
          Content-Length: 15\r\n\r\n{\"text\":\"milk\"}",
    );
    let created = r#"{"id":1,"text":"milk"}"#;
    assert_response(
        &client.response(false),
        &built("201 Created", json, created),
    );
    assert_response(
        &get(&mut client, "/notes/1"),
        &built("200 OK", json, created),
    );
    let page = format!("[{created}]");
    assert_response(
        &get(&mut client, "/notes?limit=10"),
        &built("200 OK", json, &page),
    );
    let missing = r#"{"status":404,"detail":"no note 9"}"#;
    let response = get(&mut client, "/notes/9");
    assert_response(&response, &built("404 Not Found", problem, missing));
    let response = get(&mut client, "/notes");
    let no_limit = r#"{"status":400,"detail":"query string: missing field `limit`"}"#;
    assert_response(&response, &built("400 Bad Request", problem, no_limit));
    client.send(b"POST /notes HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nmilk");
    let wrong_type =
        r#"{"status":415,"detail":"expected Content-Type: application/json, got none"}"#;
    let expected = built("415 Unsupported Media Type", problem, wrong_type);
    assert_response(&client.response(false), &expected);
    let nowhere = r#"{"status":404,"detail":null}"#;
    let response = get(&mut client, "/nowhere");
    assert_response(&response, &built("404 Not Found", problem, nowhere));
    terminate_and_expect_success(example);
}

/// Every example compiles in a crate of a user's own that depends on this
/// one alone: no `uppercut` or `env_logger` of its own (the examples use
/// the re-exported `uppercut_mio_server::uppercut` and `init_logging`),
/// and for typed routes serde (with `derive`) and serde_json, as a user
/// of typed routes adds them.
/// `cargo check`, offline, in a target directory of its own (the user
/// crate's examples share our examples' names), so it runs in well under a
/// minute once its dependencies are checked.
#[test]
fn every_example_compiles_in_a_crate_that_depends_only_on_this_one() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let exe = std::env::current_exe().expect("the test binary's path");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf();
    let krate = target.join("user-crate");
    let examples = krate.join("examples");
    let _ = std::fs::remove_dir_all(&examples);
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::create_dir_all(&examples).unwrap();
    let manifest = format!(
        "[package]\nname = \"user-crate\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\nuppercut-mio-server = {{ path = {:?} }}\n\
         serde = {{ version = \"1\", features = [\"derive\"] }}\nserde_json = \"1\"\n\n[workspace]\n",
        repo.display().to_string()
    );
    std::fs::write(krate.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(krate.join("src/main.rs"), "fn main() {}\n").unwrap();
    // Our lock file, so the same versions resolve offline.
    std::fs::copy(repo.join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();
    let mut copied = 0;
    for entry in std::fs::read_dir(repo.join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "rs") {
            std::fs::copy(&path, examples.join(path.file_name().unwrap())).unwrap();
            copied += 1;
        }
    }
    assert!(copied >= 6, "the examples were found");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let checked = Command::new(cargo)
        .args(["check", "--offline", "--quiet", "--examples"])
        .current_dir(&krate)
        .env("CARGO_TARGET_DIR", target.join("user-crate-target"))
        .output()
        .expect("cargo runs");
    assert!(
        checked.status.success(),
        "an example does not compile in a user's crate:\n{}",
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// Example `name` with `args` after its address, on a port it binds.
fn start_example_with(name: &str, args: &[&str]) -> Running {
    let mut command = Command::new(example_path(name));
    command.arg("127.0.0.1:0").args(args);
    Running::start(command)
}

/// Sends `request` on `client` until it is answered other than 503 (its
/// poller's link to NATS is still coming up); that answer.
fn first_past_503(client: &mut Client, request: &[u8]) -> Vec<u8> {
    let deadline = std::time::Instant::now() + common::IO_TIMEOUT;
    loop {
        client.send(request);
        let response = client.response(false);
        if !response.starts_with(b"HTTP/1.1 503 ") {
            return response;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            common::text(&response)
        );
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn the_cluster_counter_example_counts_once_across_servers() {
    let nats = common::nats::Nats::start();
    let url = nats.url();
    let owner = start_example_with("cluster_counter", &[&url, "a", "--owner"]);
    let other = start_example_with("cluster_counter", &[&url, "b"]);
    let fields = "Content-Type: text/plain; charset=utf-8\r\n";
    // b's connection is served by one of its pollers, each with its own
    // link to NATS: asked again while that link comes up (a 503 of a
    // link not up is sent nowhere, so it does not count).
    let mut other_client = Client::connect(other.addr);
    let first = first_past_503(&mut other_client, b"GET /count HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(&first, &built("200 OK", fields, "1\n"));
    let mut owner_client = Client::connect(owner.addr);
    for n in 2..=5 {
        let client = if n % 2 == 0 {
            &mut owner_client
        } else {
            &mut other_client
        };
        let response = get(client, "/count");
        assert_response(&response, &built("200 OK", fields, &format!("{n}\n")));
    }
    terminate_and_expect_success(other);
    terminate_and_expect_success(owner);
}

#[test]
fn the_chat_example_joins_its_room_across_servers() {
    use common::integrity::{connect, read_frame, upgrade, Pace, Reader};
    let nats = common::nats::Nats::start();
    let url = nats.url();
    let a = start_example_with("chat", &["--nats", &url, "--node", "a"]);
    let b = start_example_with("chat", &["--nats", &url, "--node", "b"]);
    let join = |addr: SocketAddr| {
        let mut member = Reader::new(connect(addr, None, Pace::Fast), Pace::Fast);
        upgrade(&mut member, "/chat");
        member
    };
    let (mut on_a, mut on_b) = (join(a.addr), join(b.addr));
    let deadline = std::time::Instant::now() + common::IO_TIMEOUT;
    while nats.subscribers("upc.t.chat") < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "both servers subscribed"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    on_a.send(&common::integrity::client_frame(
        1,
        b"hello from a",
        [9, 8, 7, 6],
    ));
    for member in [&mut on_a, &mut on_b] {
        let frame = read_frame(member);
        assert_eq!(
            (frame.head, frame.payload),
            (0x81, b"hello from a".to_vec())
        );
    }
    on_b.send(&common::integrity::client_frame(
        1,
        b"and from b",
        [1, 2, 3, 4],
    ));
    for member in [&mut on_a, &mut on_b] {
        let frame = read_frame(member);
        assert_eq!((frame.head, frame.payload), (0x81, b"and from b".to_vec()));
    }
    // Gone before the drain, which would otherwise wait for their close.
    drop((on_a, on_b));
    terminate_and_expect_success(a);
    terminate_and_expect_success(b);
}

/// The notes service on typed actors, across two servers: a note posted
/// through b is kept by a's actor, and read and refused the same way,
/// JSON error bodies included, through either.
#[test]
fn the_notes_cluster_example_serves_one_set_of_notes_across_servers() {
    let nats = common::nats::Nats::start();
    let url = nats.url();
    let pollers = ["--pollers", "2"];
    let a = start_example_with(
        "notes_cluster",
        &[&["--nats", &url, "--node", "a"], &pollers[..]].concat(),
    );
    let b = start_example_with(
        "notes_cluster",
        &[&["--nats", &url, "--node", "b"], &pollers[..]].concat(),
    );
    let fields = "Content-Type: application/json\r\n";
    // Each poller has its own link to NATS, and a connection's requests
    // go through its poller's: until every link of both servers is up,
    // a request on a poller still connecting is answered 503.
    nats.wait_for_subscribers("upc.a.a.*", 2);
    nats.wait_for_subscribers("upc.a.b.*", 2);
    // NATS has seen each link's subscriptions; a poller may not yet have
    // read NATS's answer to them, so a connection's first request is
    // asked again on that connection (its poller) while it is a 503.
    let mut on_b = Client::connect(b.addr);
    let missing = first_past_503(&mut on_b, b"GET /notes/1 HTTP/1.1\r\nHost: t\r\n\r\n");
    let no_note = "{\"status\":404,\"detail\":\"no note 1\"}";
    assert_response(&missing, &built("404 Not Found", fields, no_note));
    let body = "{\"text\":\"milk\"}";
    on_b.send(
        format!(
            "POST /notes HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    let note = "{\"id\":1,\"text\":\"milk\"}";
    assert_response(&on_b.response(false), &built("201 Created", fields, note));
    let mut on_a = Client::connect(a.addr);
    let read = first_past_503(&mut on_a, b"GET /notes/1 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_response(&read, &built("200 OK", fields, note));
    let no_note = "{\"status\":404,\"detail\":\"no note 2\"}";
    assert_response(
        &get(&mut on_a, "/notes/2"),
        &built("404 Not Found", fields, no_note),
    );
    assert_response(
        &get(&mut on_b, "/notes/2"),
        &built("404 Not Found", fields, no_note),
    );
    terminate_and_expect_success(b);
    terminate_and_expect_success(a);
}

/// A configuration error is one plain sentence on stderr, not `Debug`.
#[test]
fn the_notes_cluster_example_prints_a_configuration_error_plainly() {
    let output = Command::new(example_path("notes_cluster"))
        .args(["127.0.0.1:0", "--tls-cert", "/nonexistent/cert.pem"])
        .args([
            "--tls-key",
            "/nonexistent/key.pem",
            "--bind-tls",
            "127.0.0.1:0",
        ])
        .output()
        .expect("the example runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.starts_with("notes_cluster: ")
            && stderr.contains("/nonexistent/cert.pem")
            && !stderr.contains("Custom {")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
}
