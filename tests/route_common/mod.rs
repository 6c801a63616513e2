//! What the handler- and actor-route tests share: the layout of a response
//! built per request, and actors to route to.

#![allow(dead_code)] // each test file uses its own part of it

use std::fmt::Write;

use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{ActorRequest, ActorResponse, StatusCode};

/// A response a handler or an actor wrote, as the server frames it: the
/// status line, `Server`, `fields` (each line ending CRLF), the length, the
/// `{date}` placeholder `assert_response` fills in, and the body.
pub fn built(status: &str, fields: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nServer: uppercut-mio-server\r\n{fields}\
         Content-Length: {}\r\nDate: {{date}}\r\n\r\n{body}",
        body.len()
    )
}

/// A `text/plain; charset=utf-8` 200 with `body`, as `ActorResponse::text`
/// gives.
pub fn text(body: &str) -> String {
    built(
        "200 OK",
        "Content-Type: text/plain; charset=utf-8\r\n",
        body,
    )
}

/// Counts the requests it has answered.
#[derive(Default)]
pub struct Counter {
    count: u64,
}

impl AnyActor for Counter {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.count += 1;
            request.respond(ActorResponse::text(self.count.to_string()));
        }
    }
}

/// Answers with what it saw of the request: method, path, query, the
/// `X-Test` field and the body, one per line; with an `X-Seen` field too.
pub struct Echo;

impl AnyActor for Echo {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let seen = describe(&request);
            let response = ActorResponse::text(seen).with_header("X-Seen", "yes");
            match response {
                Ok(response) => request.respond(response),
                // Said in the answer the test reads, so its assertion on
                // the exact response fails at once and shows the cause (a
                // panic here would only show as the 502 of a request
                // dropped unanswered).
                Err(e) => request.respond(
                    ActorResponse::text(format!("Echo: a valid header refused: {e}"))
                        .with_status(StatusCode::INTERNAL_SERVER_ERROR),
                ),
            }
        }
    }
}

/// The request as `Echo` describes it.
pub fn describe(request: &ActorRequest) -> String {
    let request = request.request();
    let mut seen = String::new();
    let header = request.header("X-Test").map(String::from_utf8_lossy);
    let _ = write!(
        seen,
        "{:?}\n{}\n{:?}\n{:?}\n{}",
        request.method(),
        request.path(),
        request.query(),
        header,
        String::from_utf8_lossy(request.body())
    );
    seen
}
