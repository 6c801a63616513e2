//! Typed JSON routes: an actor keeps notes, read from JSON bodies, path
//! parameters and the query, answered in JSON; every error, the server's
//! own and the routes' refusals, as a JSON problem.
//!
//!     cargo run --release --example notes -- 127.0.0.1:8080
//!     curl -i localhost:8080/notes -H 'Content-Type: application/json' -d '{"text":"milk"}'
//!                                               # 201 {"id":1,"text":"milk"}
//!     curl -i localhost:8080/notes/1            # {"id":1,"text":"milk"}
//!     curl -i 'localhost:8080/notes?limit=10'   # [{"id":1,"text":"milk"}]
//!     curl -i localhost:8080/notes/9            # 404 {"status":404,"detail":"no note 9"}
//!     curl -i localhost:8080/notes -d milk      # 415 {"status":415,"detail":"expected ..."}
//!     curl -i localhost:8080/nowhere            # 404 {"status":404,"detail":null}

use serde::{Deserialize, Serialize};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    ActorRequest, ActorResponse, Config, Method, Rejection, Routes, Server, StatusCode,
};

#[derive(Deserialize)]
struct NewNote {
    text: String,
}

#[derive(Serialize)]
struct Note {
    id: usize,
    text: String,
}

#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    offset: usize,
    limit: usize,
}

/// The notes, touched by one message at a time: no lock.
#[derive(Default)]
struct Notes(Vec<Note>);

impl Notes {
    fn answer(&mut self, request: &ActorRequest) -> Result<ActorResponse, Rejection> {
        let request = request.request();
        if request.method() == Method::Post {
            let new: NewNote = request.json()?;
            let note = Note {
                id: self.0.len() + 1,
                text: new.text,
            };
            let created = ActorResponse::json_value(&note).with_status(StatusCode::CREATED);
            self.0.push(note);
            return Ok(created);
        }
        if request.param("id").is_none() {
            let page: Page = request.query_params()?;
            let notes: Vec<&Note> = self.0.iter().skip(page.offset).take(page.limit).collect();
            return Ok(ActorResponse::json_value(&notes));
        }
        let id: usize = request.params()?;
        match self.0.get(id.wrapping_sub(1)) {
            Some(note) => Ok(ActorResponse::json_value(note)),
            None => Err(Rejection::new(404, format!("no note {id}"))),
        }
    }
}

impl AnyActor for Notes {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let answer = self.answer(&request).unwrap_or_else(ActorResponse::from);
            request.respond(answer);
        }
    }
}

#[derive(Serialize)]
struct Problem<'a> {
    status: u16,
    detail: Option<&'a str>,
}

fn routes() -> Routes {
    Routes::new()
        .actor(&[Method::Get, Method::Post], "/notes", "notes")
        .actor(&[Method::Get], "/notes/{id}", "notes")
        .spawn("notes", Notes::default())
        .error_body(|error| {
            let problem = Problem {
                status: error.status(),
                detail: error.cause(),
            };
            let body = serde_json::to_string(&problem).unwrap_or_default();
            ("application/problem+json", body)
        })
}

fn main() {
    // Before anything starts: a SIGTERM must wait for run_until_signal.
    Server::block_signals();
    uppercut_mio_server::init_logging();
    let bind = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let config = Config {
        bind: bind.parse().expect("ADDR:PORT"),
        ..Config::default()
    };
    let server = Server::start(&config, routes()).unwrap_or_else(|e| {
        // Display: the flag, file or address, and what is wrong.
        eprintln!("notes: {e}");
        std::process::exit(1)
    });
    println!("listening on http://{}", server.local_addr());
    // Drains on SIGINT or SIGTERM.
    server.run_until_signal();
}
