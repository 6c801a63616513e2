//! Typed actors (`Routes::json_actor`): routes sharing one state, typed
//! requests, chosen statuses and rejections shaped by the error hook, for
//! shared, per-poller, blocking, durable and remote actors; typed messages
//! between actors and from `Server::send_typed`. Exact bytes, both
//! dispatch modes.

mod common;

use std::time::{Duration, Instant};

use common::nats::Nats;
use common::{assert_response, config, start_with, Client, IO_TIMEOUT};
use serde::{Deserialize, Serialize};
use uppercut_mio_server::{
    read_typed, typed_message, Config, Dispatch, Json, Method, Rejection, Routes, Server,
    StateConfig,
};

#[derive(Deserialize, Serialize)]
struct NewNote {
    text: String,
}

#[derive(Serialize, Deserialize, Clone)]
struct Note {
    id: usize,
    text: String,
}

#[derive(Default, Serialize, Deserialize)]
struct Notes(Vec<Note>);

/// The notes routes, on the typed actor `notes`, with JSON error bodies.
fn notes_routes(routes: Routes) -> Routes {
    routes
        .json_actor(
            &[Method::Post],
            "/notes",
            "notes",
            |notes: &mut Notes, req| {
                let new: NewNote = req.json()?;
                let note = Note {
                    id: notes.0.len() + 1,
                    text: new.text,
                };
                notes.0.push(note.clone());
                Ok((201, note))
            },
        )
        .json_actor(
            &[Method::Get],
            "/notes/{id}",
            "notes",
            |notes: &mut Notes, req| {
                let id: usize = req.params()?;
                match notes.0.get(id.wrapping_sub(1)) {
                    Some(note) => Ok(Json(note.clone())),
                    None => Err(Rejection::new(404, format!("no note {id}"))),
                }
            },
        )
        .error_body(|error| {
            let body = format!(
                "{{\"status\":{},\"detail\":\"{}\"}}",
                error.status(),
                error.cause().unwrap_or("")
            );
            ("application/json", body)
        })
}

fn post(path: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n")
}

fn json(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nServer: uppercut-mio-server\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nDate: {{date}}\r\n\r\n{body}",
        body.len()
    )
}

/// Posts a note, reads it back, and is refused a missing one and a body
/// that is not JSON, at `addr`.
fn exercise_notes(addr: std::net::SocketAddr, first_id: usize) {
    let mut client = Client::connect(addr);
    client.send(post("/notes", "{\"text\":\"milk\"}").as_bytes());
    let created = format!("{{\"id\":{first_id},\"text\":\"milk\"}}");
    assert_response(&client.response(false), &json("201 Created", &created));
    client.send(get(&format!("/notes/{first_id}")).as_bytes());
    assert_response(&client.response(false), &json("200 OK", &created));
    client.send(get("/notes/99").as_bytes());
    assert_response(
        &client.response(false),
        &json(
            "404 Not Found",
            "{\"status\":404,\"detail\":\"no note 99\"}",
        ),
    );
    client.send(post("/notes", "{\"txt\":1}").as_bytes());
    let response = String::from_utf8(client.response(false)).unwrap();
    assert!(
        response.starts_with("HTTP/1.1 400 Bad Request\r\n")
            && response.contains("Content-Type: application/json\r\n")
            && response.contains("\r\n\r\n{\"status\":400,\"detail\":\"JSON body: "),
        "{response}"
    );
}

fn routes_share_one_state(dispatch: Dispatch) {
    let server = start_with(&config(dispatch), notes_routes(Routes::new()));
    exercise_notes(server.local_addr(), 1);
    // The second note has the next id: one state behind both routes.
    exercise_notes(server.local_addr(), 2);
}

/// Counts requests per instance, and says which instance answered.
#[derive(Default)]
struct Tally {
    index: usize,
    count: u64,
}

fn tally_routes(routes: Routes) -> Routes {
    routes.json_actor(
        &[Method::Get],
        "/tally",
        "tally",
        |tally: &mut Tally, _req| {
            tally.count += 1;
            Ok(Json((tally.index, tally.count)))
        },
    )
}

fn per_poller_and_blocking_instances(dispatch: Dispatch) {
    let routes = tally_routes(Routes::new()).spawn_typed_per_poller("tally", |index| Tally {
        index: index + 10,
        count: 0,
    });
    let server = start_with(
        &Config {
            pollers: 1,
            ..config(dispatch)
        },
        routes,
    );
    let mut client = Client::connect(server.local_addr());
    for n in 1..=2 {
        client.send(get("/tally").as_bytes());
        assert_response(
            &client.response(false),
            &json("200 OK", &format!("[10,{n}]")),
        );
    }
    drop(server);
    let routes = Routes::new()
        .spawn_typed_blocking("tally", 1, |index| Tally {
            index: index + 20,
            count: 0,
        })
        .json_actor(
            &[Method::Get],
            "/tally",
            "tally",
            |tally: &mut Tally, _req| {
                // A blocking instance may block.
                std::thread::sleep(Duration::from_millis(1));
                tally.count += 1;
                Ok((202, (tally.index, tally.count)))
            },
        );
    let server = start_with(&config(dispatch), routes);
    let mut client = Client::connect(server.local_addr());
    for n in 1..=2 {
        client.send(get("/tally").as_bytes());
        assert_response(
            &client.response(false),
            &json("202 Accepted", &format!("[20,{n}]")),
        );
    }
}

fn fresh_dir(name: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::env::temp_dir().join(format!("upc-typed-{name}-{}-{nanos}", std::process::id()))
}

fn durable_state_outlives_the_server(dispatch: Dispatch) {
    let dir = fresh_dir("durable");
    let config = Config {
        state: Some(StateConfig::Dir(dir.clone())),
        ..config(dispatch)
    };
    let server = start_with(
        &config,
        notes_routes(Routes::new()).spawn_typed_durable("notes", Notes::default()),
    );
    exercise_notes(server.local_addr(), 1);
    server.stop();
    let server = start_with(
        &config,
        notes_routes(Routes::new()).spawn_typed_durable("notes", Notes::default()),
    );
    // The first note is still there; the next one is 2.
    let mut client = Client::connect(server.local_addr());
    client.send(get("/notes/1").as_bytes());
    assert_response(
        &client.response(false),
        &json("200 OK", "{\"id\":1,\"text\":\"milk\"}"),
    );
    exercise_notes(server.local_addr(), 2);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

fn wait_ready(server: &Server) {
    let deadline = Instant::now() + IO_TIMEOUT;
    while !server.cluster_ready() {
        assert!(Instant::now() < deadline, "the cluster is not ready");
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn node(nats: &Nats, node: &str, dispatch: Dispatch, routes: Routes) -> Server {
    let config = Config {
        cluster: Some(nats.cluster(node)),
        ..config(dispatch)
    };
    let server = start_with(&config, routes);
    wait_ready(&server);
    server
}

/// The same typed actor, through its own server and another (`notes@b`
/// and `notes@*`): the same bytes, rejections shaped alike.
fn a_remote_typed_actor_answers_as_a_local_one(dispatch: Dispatch) {
    let nats = Nats::start();
    let b = node(&nats, "b", dispatch, notes_routes(Routes::new()));
    // Server a routes the notes paths to b's actor.
    let a = node(
        &nats,
        "a",
        dispatch,
        Routes::new()
            .actor(&[Method::Post], "/notes", "notes@b")
            .actor(&[Method::Get], "/notes/{id}", "notes@*")
            .error_body(|error| {
                let body = format!(
                    "{{\"status\":{},\"detail\":\"{}\"}}",
                    error.status(),
                    error.cause().unwrap_or("")
                );
                ("application/json", body)
            }),
    );
    exercise_notes(a.local_addr(), 1);
    exercise_notes(b.local_addr(), 2);
}

/// The address a typed message goes to.
#[derive(Serialize, Deserialize)]
struct Append {
    text: String,
}

fn typed_messages_reach_a_typed_actor(dispatch: Dispatch) {
    let routes = notes_routes(Routes::new()).on_typed_message(
        "notes",
        |notes: &mut Notes, append: Append, _envelope, _sender| {
            let id = notes.0.len() + 1;
            notes.0.push(Note {
                id,
                text: append.text,
            });
        },
    );
    let server = start_with(&config(dispatch), routes);
    server
        .send_typed(
            "notes",
            &Append {
                text: "eggs".into(),
            },
        )
        .unwrap();
    server
        .sender()
        .send_typed("notes", &Append { text: "tea".into() })
        .unwrap();
    // A message that is not an Append is dropped.
    server.send("notes", typed_message(&7u32).unwrap()).unwrap();
    let mut client = Client::connect(server.local_addr());
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        client.send(get("/notes/2").as_bytes());
        let response = client.response(false);
        if response.starts_with(b"HTTP/1.1 200") {
            assert_response(&response, &json("200 OK", "{\"id\":2,\"text\":\"tea\"}"));
            break;
        }
        assert!(Instant::now() < deadline, "the messages did not arrive");
        // A polling interval, not a wait standing in for the condition.
        std::thread::sleep(Duration::from_millis(2));
    }
    client.send(get("/notes/1").as_bytes());
    assert_response(
        &client.response(false),
        &json("200 OK", "{\"id\":1,\"text\":\"eggs\"}"),
    );
    client.send(get("/notes/3").as_bytes());
    assert_response(
        &client.response(false),
        &json("404 Not Found", "{\"status\":404,\"detail\":\"no note 3\"}"),
    );
}

#[test]
fn read_typed_reads_bytes_strings_and_refuses_other_types() {
    let envelope = typed_message(&Append { text: "x".into() }).unwrap();
    let read: Append = read_typed(envelope).unwrap().unwrap();
    assert_eq!(read.text, "x");
    let text = uppercut_mio_server::uppercut::api::Envelope::of(String::from("{\"text\":\"y\"}"));
    assert_eq!(read_typed::<Append>(text).unwrap().unwrap().text, "y");
    let wrong = typed_message(&3u8).unwrap();
    let error = read_typed::<Append>(wrong).unwrap().err().unwrap();
    assert!(
        error.to_string().starts_with("typed message: invalid type"),
        "{error}"
    );
    let other = uppercut_mio_server::uppercut::api::Envelope::of(5u64);
    assert!(read_typed::<Append>(other).is_none());
}

in_both_modes!(
    routes_share_one_state,
    per_poller_and_blocking_instances,
    durable_state_outlives_the_server,
    a_remote_typed_actor_answers_as_a_local_one,
    typed_messages_reach_a_typed_actor,
);

#[test]
fn a_json_actor_on_another_server_is_refused_at_start() {
    let routes =
        Routes::new().json_actor(&[Method::Get], "/x", "notes@b", |_: &mut Notes, _req| {
            Ok(Json(1))
        });
    let Err(error) = Server::start(&config(Dispatch::Local), routes) else {
        panic!("a json_actor on another server's address starts");
    };
    assert!(
        error
            .to_string()
            .contains("json_actor /x: notes@b is on another server"),
        "{error}"
    );
}
