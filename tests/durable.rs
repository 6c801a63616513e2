//! Durable actors on the embedded store (`--state DIR`), against a real
//! redb file: an answer that depends on a change leaves only once the
//! change is committed; writes of many actors go in one commit, and the
//! changes a busy actor makes during a write go together in the next;
//! state survives a restart and a `kill -9`; a store held by another
//! server, a corrupt file and a state that does not read as its type stop
//! the start with a message that names them. Exact bodies and counts, in
//! both dispatch modes.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::durable::{self, answer, Counter};
use common::{config, start_with, Client, IO_TIMEOUT};
use serde::{Deserialize, Serialize};
use uppercut_mio_server::fault::hold_state_commits;
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{Config, Dispatch, Method, Routes, Server, StateConfig};

/// A directory of its own for one test's state.
fn fresh_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir =
        std::env::temp_dir().join(format!("upc-durable-{name}-{}-{nanos}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A server keeping its state in `dir`, with metrics.
fn server(dispatch: Dispatch, dir: &Path, routes: Routes) -> Server {
    let config = Config {
        state: Some(StateConfig::Dir(dir.to_path_buf())),
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..config(dispatch)
    };
    start_with(&config, routes)
}

/// `count` counters, `/c/N` each.
fn counters(count: usize) -> Routes {
    (0..count).fold(Routes::new(), |routes, n| {
        routes
            .actor(
                &[Method::Get, Method::Post],
                &format!("/c/{n}"),
                &format!("c{n}"),
            )
            .spawn_durable(&format!("c{n}"), Counter::default())
    })
}

fn request(method: &str, path: &str) -> Vec<u8> {
    format!("{method} {path} HTTP/1.1\r\nHost: a\r\n\r\n").into_bytes()
}

/// A metric of `server`.
fn sample(server: &Server, series: &str) -> u64 {
    durable::sample(server.metrics_addr().expect("metrics on"), series)
}

/// Waits until `series` on `server` reads `value`.
fn wait_for(server: &Server, series: &str, value: u64) {
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        let now = sample(server, series);
        if now == value {
            return;
        }
        assert!(Instant::now() < deadline, "{series} is {now}, not {value}");
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Holds the commits of `dir` until dropped, so a failing test does not
/// leave them held for the others.
struct Held<'a>(&'a Path);

impl<'a> Held<'a> {
    fn new(dir: &'a Path) -> Held<'a> {
        hold_state_commits(dir, true);
        Held(dir)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        hold_state_commits(self.0, false);
    }
}

/// While its commit is held, a count's answer waits (and nothing reaches
/// the client); once committed, it comes, and the count is on disk: a
/// server started again on the file goes on from it.
fn an_answer_leaves_only_once_its_change_is_durable(dispatch: Dispatch) {
    let dir = fresh_dir("answer");
    let a = server(dispatch, &dir, counters(1));
    let mut client = Client::connect(a.local_addr());
    client.send(&request("POST", "/c/0"));
    assert_eq!(answer(&mut client), ("HTTP/1.1 200 OK".into(), "1".into()));
    {
        let held = Held::new(&dir);
        client.send(&request("POST", "/c/0"));
        wait_for(&a, "uppercut_state_held_answers", 1);
        // The answer is held: nothing has reached the client.
        client.stream.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        let read = std::io::Read::read(&mut client.stream, &mut byte);
        assert_eq!(
            read.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::WouldBlock),
            "an answer before its commit"
        );
        client.stream.set_nonblocking(false).unwrap();
        drop(held);
    }
    assert_eq!(answer(&mut client), ("HTTP/1.1 200 OK".into(), "2".into()));
    assert_eq!(sample(&a, "uppercut_state_held_answers"), 0);
    drop(a);
    let b = server(dispatch, &dir, counters(1));
    let mut client = Client::connect(b.local_addr());
    client.send(&request("GET", "/c/0"));
    assert_eq!(answer(&mut client), ("HTTP/1.1 200 OK".into(), "2".into()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Eight actors' writes, made while a commit is held, go in one commit;
/// and a busy actor's changes made while its write is in flight go
/// together in its next write, not one each.
fn writes_are_committed_together(dispatch: Dispatch) {
    let dir = fresh_dir("group");
    let a = server(dispatch, &dir, counters(8));
    let mut clients: Vec<Client> = (0..8).map(|_| Client::connect(a.local_addr())).collect();
    {
        let _held = Held::new(&dir);
        for (n, client) in clients.iter_mut().enumerate() {
            client.send(&request("POST", &format!("/c/{n}")));
        }
        wait_for(&a, "uppercut_state_held_answers", 8);
    }
    for client in &mut clients {
        assert_eq!(answer(client), ("HTTP/1.1 200 OK".into(), "1".into()));
    }
    assert_eq!(sample(&a, "uppercut_state_commit_seconds_count"), 1);
    assert_eq!(sample(&a, "uppercut_state_writes_total{result=\"ok\"}"), 8);
    // One actor, three increments: the first's write in flight (held),
    // the two after it wait, and go in one write.
    {
        let _held = Held::new(&dir);
        for client in clients.iter_mut().take(3) {
            client.send(&request("POST", "/c/0"));
        }
        wait_for(&a, "uppercut_state_held_answers", 3);
    }
    let counts: Vec<String> = clients.iter_mut().take(3).map(|c| answer(c).1).collect();
    let mut sorted = counts.clone();
    sorted.sort();
    assert_eq!(sorted, ["2", "3", "4"], "{counts:?}");
    assert_eq!(sample(&a, "uppercut_state_writes_total{result=\"ok\"}"), 10);
    assert_eq!(sample(&a, "uppercut_state_commit_seconds_count"), 3);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A read of a count that is not yet durable waits for it too.
fn a_read_waits_for_the_change_it_sees(dispatch: Dispatch) {
    let dir = fresh_dir("read");
    let a = server(dispatch, &dir, counters(1));
    let mut writer = Client::connect(a.local_addr());
    let mut reader = Client::connect(a.local_addr());
    {
        let _held = Held::new(&dir);
        writer.send(&request("POST", "/c/0"));
        wait_for(&a, "uppercut_state_held_answers", 1);
        reader.send(&request("GET", "/c/0"));
        wait_for(&a, "uppercut_state_held_answers", 2);
    }
    assert_eq!(answer(&mut writer).1, "1");
    assert_eq!(answer(&mut reader).1, "1");
    // Nothing pending: a read leaves at once, and writes nothing.
    reader.send(&request("GET", "/c/0"));
    assert_eq!(answer(&mut reader).1, "1");
    assert_eq!(sample(&a, "uppercut_state_writes_total{result=\"ok\"}"), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

in_both_modes!(
    an_answer_leaves_only_once_its_change_is_durable,
    writes_are_committed_together,
    a_read_waits_for_the_change_it_sees
);

/// The start error of a server on `dir` with `routes`.
fn start_error(dir: &Path, routes: Routes) -> String {
    let config = Config {
        state: Some(StateConfig::Dir(dir.to_path_buf())),
        ..config(Dispatch::Local)
    };
    match Server::start(&config, routes) {
        Ok(_) => panic!("the server started"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_second_server_on_the_same_state_is_refused() {
    let dir = fresh_dir("locked");
    let _first = server(Dispatch::Local, &dir, counters(1));
    let error = start_error(&dir, counters(1));
    assert_eq!(
        error,
        format!(
            "state file {}: the store cannot be used: held by another process \
             (another server with the same --state?)",
            dir.join("state.redb").display()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_that_is_not_a_state_file_is_refused_by_name() {
    let dir = fresh_dir("corrupt");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("state.redb"), vec![0x5a; 64 * 1024]).unwrap();
    let error = start_error(&dir, counters(1));
    let file = dir.join("state.redb");
    let prefix = format!(
        "state file {}: the store cannot be used: not a state file (",
        file.display()
    );
    assert!(error.starts_with(&prefix), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A state the type cannot read.
#[derive(Serialize, Deserialize, Default)]
struct Named {
    name: String,
}

impl AnyActor for Named {
    fn receive(&mut self, _envelope: Envelope, _sender: &mut dyn AnySender) {}
}

#[test]
fn a_state_that_does_not_read_as_its_type_stops_the_start() {
    let dir = fresh_dir("type");
    {
        let a = server(Dispatch::Local, &dir, counters(1));
        let mut client = Client::connect(a.local_addr());
        client.send(&request("POST", "/c/0"));
        assert_eq!(answer(&mut client).1, "1");
    }
    let error = start_error(&dir, Routes::new().spawn_durable("c0", Named::default()));
    assert_eq!(
        error,
        "actor c0: its state in the embedded store: revision 1 does not read as the actor's \
         state: missing field `name` at line 1 column 11"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_key_the_stores_cannot_hold_is_refused_at_start() {
    let dir = fresh_dir("key");
    let error = start_error(&dir, Routes::new().spawn_durable("a b", Counter::default()));
    assert_eq!(
        error,
        "state key \"a b\": use letters, digits, '-', '_', '=', '/' and '.' between words"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
