//! The notes service with typed actors, across servers joined by NATS: the
//! server that is node `a` owns the notes actor (`json_actor` routes), and
//! every other server routes the same paths to it (`notes@a`). The same
//! note, the same errors (one JSON error body), whichever server answers.
//! The server binary's flags come with `cli::parse_args`; a configuration
//! error is printed as a sentence, not as a `Debug` dump.
//!
//!     nats-server &
//!     cargo run --example notes_cluster -- 127.0.0.1:9010 --nats nats://127.0.0.1:4222 --node a
//!     cargo run --example notes_cluster -- 127.0.0.1:9011 --nats nats://127.0.0.1:4222 --node b
//!     curl -i localhost:9011/notes -H 'Content-Type: application/json' -d '{"text":"milk"}'
//!                                         # 201 {"id":1,"text":"milk"}, kept on a
//!     curl -i localhost:9010/notes/1      # {"id":1,"text":"milk"}
//!     curl -i localhost:9011/notes/9      # 404 {"status":404,"detail":"no note 9"}

use std::process::ExitCode;

use serde::{Deserialize, Serialize};
use uppercut_mio_server::cli::{parse_args, Command};
use uppercut_mio_server::{Json, Method, Rejection, Routes, Server};

#[derive(Deserialize)]
struct NewNote {
    text: String,
}

#[derive(Serialize, Clone)]
struct Note {
    id: usize,
    text: String,
}

/// The notes: one state, touched by one request at a time.
#[derive(Default)]
struct Notes(Vec<Note>);

#[derive(Serialize)]
struct Problem<'a> {
    status: u16,
    detail: Option<&'a str>,
}

/// The node that owns the notes.
const OWNER: &str = "a";

fn routes(owner: bool) -> Routes {
    let routes = if owner {
        Routes::new()
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
    } else {
        let notes = format!("notes@{OWNER}");
        Routes::new()
            .actor(&[Method::Post], "/notes", &notes)
            .actor(&[Method::Get], "/notes/{id}", &notes)
    };
    routes.error_body(|error| {
        let problem = Problem {
            status: error.status(),
            detail: error.cause(),
        };
        let body = serde_json::to_string(&problem).unwrap_or_default();
        ("application/json", body)
    })
}

fn main() -> ExitCode {
    // Before anything starts: a SIGTERM must wait for run_until_signal.
    Server::block_signals();
    uppercut_mio_server::init_logging();
    // ADDR, then any of the server binary's flags (--nats, --node, --tls-cert ...).
    let mut args = std::env::args().skip(1);
    let bind = args.next().unwrap_or_else(|| "127.0.0.1:9010".into());
    let flags = ["--bind".to_string(), bind].into_iter().chain(args);
    let config = match parse_args(flags) {
        Ok(Command::Run(config)) => config,
        Ok(_) => {
            eprintln!("usage: notes_cluster ADDR [--nats URL --node NAME] [server flags]");
            return ExitCode::from(2);
        }
        Err(message) => {
            eprintln!("notes_cluster: {message}");
            return ExitCode::from(2);
        }
    };
    let owner = config.cluster.as_ref().is_none_or(|c| c.node == OWNER);
    // An error's Display is the sentence to show; `{e:?}` (what `main`
    // returning `Result` prints) is for debugging.
    let server = match Server::start(&config, routes(owner)) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("notes_cluster: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("listening on http://{}", server.local_addr());
    // Drains on SIGINT or SIGTERM.
    server.run_until_signal();
    ExitCode::SUCCESS
}
