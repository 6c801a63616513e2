//! Typed requests and responses over real sockets, in both dispatch modes:
//! JSON bodies in and out (415 for another content type, 400 with serde's
//! message, 413 past a route's limit and past the server's), query strings,
//! forms and path parameters into types, the same from an actor and a
//! blocking handler; exact bytes, and the connection usable after each
//! refusal.

mod common;
mod route_common;

use common::{assert_response, config, error_response, start_with, Client};
use route_common::built;
use serde::{Deserialize, Serialize};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::{
    ActorRequest, ActorResponse, Config, Dispatch, Method, Rejection, Routes,
};

#[derive(Deserialize)]
struct Greet<'a> {
    name: &'a str,
    #[serde(default)]
    times: Option<u8>,
}

#[derive(Serialize)]
struct Greeting {
    message: String,
}

impl Greet<'_> {
    fn greeting(&self) -> Greeting {
        let times = usize::from(self.times.unwrap_or(1));
        Greeting {
            message: format!("Hello, {}!", self.name).repeat(times),
        }
    }
}

#[derive(Deserialize, Serialize)]
struct Search {
    q: String,
    page: u32,
}

#[derive(Deserialize, Serialize)]
struct Login {
    user: String,
    remember: bool,
}

#[derive(Deserialize, Serialize)]
struct Member {
    team: String,
    id: u32,
}

/// Adds the `add` of each JSON request to a total it answers with.
struct Total(i64);

#[derive(Deserialize)]
struct Add {
    add: i64,
}

impl AnyActor for Total {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let answer = match request.request().json::<Add>() {
                Ok(add) => {
                    self.0 += add.add;
                    ActorResponse::json_value(&serde_json::json!({ "total": self.0 }))
                }
                Err(rejection) => ActorResponse::rejection(rejection),
            };
            request.respond(answer);
        }
    }
}

fn routes() -> Routes {
    Routes::new()
        .json_handler(&[Method::Post], "/greet", |request| {
            let greet: Greet = request.json()?;
            Ok(greet.greeting())
        })
        .handler(
            &[Method::Post],
            "/greet/small",
            |request, response| match request.json_within::<Greet>(32) {
                Ok(greet) => response.json(&greet.greeting()),
                Err(rejection) => response.reject(rejection),
            },
        )
        .json_handler(&[Method::Get], "/search", |request| {
            request.query_params::<Search>()
        })
        .json_handler(&[Method::Post], "/login", |request| request.form::<Login>())
        .json_handler(&[Method::Get], "/users/{id}", |request| {
            let id: u32 = request.params()?;
            match id {
                7 => Ok("Ann"),
                _ => Err(Rejection::new(404, format!("no user {id}"))),
            }
        })
        .json_handler(&[Method::Get], "/teams/{team}/members/{id}", |request| {
            request.params::<Member>()
        })
        .actor(&[Method::Post], "/total", "total")
        .spawn("total", Total(0))
        .blocking_handler(
            &[Method::Post],
            "/greet/blocking",
            |request, response| match request.json::<Greet>() {
                Ok(greet) => response.json(&greet.greeting()),
                Err(rejection) => response.reject(rejection),
            },
        )
}

/// `POST target` with `body` of `content_type`.
fn post(client: &mut Client, target: &str, content_type: &str, body: &str) -> Vec<u8> {
    let request = format!(
        "POST {target} HTTP/1.1\r\nHost: t\r\nContent-Type: {content_type}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    client.send(request.as_bytes());
    client.response(false)
}

fn get(client: &mut Client, target: &str) -> Vec<u8> {
    client.send(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    client.response(false)
}

/// A 200 with a JSON body.
fn json(body: &str) -> String {
    built("200 OK", "Content-Type: application/json\r\n", body)
}

/// A refusal in the server's text: `CODE REASON: cause`.
fn refused(status: &str, cause: &str) -> String {
    let fields = "Content-Type: text/plain; charset=utf-8\r\n";
    built(status, fields, &format!("{status}: {cause}\n"))
}

fn json_bodies_in_and_out(dispatch: Dispatch) {
    let server = start_with(&config(dispatch), routes());
    let mut client = Client::connect(server.local_addr());
    let cases = [
        (
            "application/json",
            r#"{"name":"Ann"}"#,
            json(r#"{"message":"Hello, Ann!"}"#),
        ),
        // Any JSON media type, any case, with parameters.
        (
            "Application/Merge-Patch+JSON; charset=utf-8",
            r#"{"name":"Bo","times":2}"#,
            json(r#"{"message":"Hello, Bo!Hello, Bo!"}"#),
        ),
        (
            "text/plain",
            r#"{"name":"Ann"}"#,
            refused(
                "415 Unsupported Media Type",
                r#"expected Content-Type: application/json, got "text/plain""#,
            ),
        ),
        (
            "application/json",
            r#"{"name":5}"#,
            refused(
                "400 Bad Request",
                "JSON body: invalid type: integer `5`, expected a borrowed string at line 1 column 9",
            ),
        ),
        (
            "application/json",
            r#"{"name":"Ann""#,
            refused(
                "400 Bad Request",
                "JSON body: EOF while parsing an object at line 1 column 13",
            ),
        ),
    ];
    for (content_type, body, expected) in cases {
        let answer = post(&mut client, "/greet", content_type, body);
        assert_response(&answer, &expected);
    }
    // No Content-Type at all.
    client.send(b"POST /greet HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}");
    let expected = refused(
        "415 Unsupported Media Type",
        "expected Content-Type: application/json, got none",
    );
    assert_response(&client.response(false), &expected);
    // Over this route's limit of 32 bytes, and within it.
    let long = r#"{"name":"Bartholomew Montgomery"}"#;
    let answer = post(&mut client, "/greet/small", "application/json", long);
    let cause = "the body is 33 bytes, over this route's limit of 32";
    assert_response(&answer, &refused("413 Payload Too Large", cause));
    let answer = post(
        &mut client,
        "/greet/small",
        "application/json",
        r#"{"name":"Al"}"#,
    );
    assert_response(&answer, &json(r#"{"message":"Hello, Al!"}"#));
}

/// Past the server's own body limit the request never reaches the route:
/// the server's 413, and the connection closes.
fn past_the_server_limit_the_server_refuses(dispatch: Dispatch) {
    let config = Config {
        max_body: 16,
        ..config(dispatch)
    };
    let server = start_with(&config, routes());
    let mut client = Client::connect(server.local_addr());
    let answer = post(
        &mut client,
        "/greet",
        "application/json",
        r#"{"name":"Bartholomew"}"#,
    );
    let expected = error_response(413, "Payload Too Large", "", true, false);
    assert_response(&answer, &expected);
    client.assert_closed();
}

fn queries_forms_and_path_parameters(dispatch: Dispatch) {
    let server = start_with(&config(dispatch), routes());
    let mut client = Client::connect(server.local_addr());
    let gets = [
        (
            "/search?q=caf%C3%A9+au+lait&page=2",
            json(r#"{"q":"café au lait","page":2}"#),
        ),
        (
            "/search?q=tea",
            refused("400 Bad Request", "query string: missing field `page`"),
        ),
        (
            "/search?q=tea&page=-1",
            refused(
                "400 Bad Request",
                "query string: invalid digit found in string",
            ),
        ),
        ("/users/7", json(r#""Ann""#)),
        ("/users/8", refused("404 Not Found", "no user 8")),
        (
            "/users/seven",
            refused(
                "404 Not Found",
                r#"path: `id` = "seven" is not a valid u32"#,
            ),
        ),
        (
            "/teams/r%C3%A9d/members/12",
            json(r#"{"team":"réd","id":12}"#),
        ),
    ];
    for (target, expected) in gets {
        assert_response(&get(&mut client, target), &expected);
    }
    let form = "application/x-www-form-urlencoded";
    let answer = post(
        &mut client,
        "/login",
        form,
        "user=ann%40example.org&remember=true",
    );
    assert_response(
        &answer,
        &json(r#"{"user":"ann@example.org","remember":true}"#),
    );
    let answer = post(&mut client, "/login", "application/json", "{}");
    let cause = format!("expected Content-Type: {form}, got \"application/json\"");
    assert_response(&answer, &refused("415 Unsupported Media Type", &cause));
    let answer = post(&mut client, "/login", form, "user=ann&remember=maybe");
    let cause = "form body: provided string was not `true` or `false`";
    assert_response(&answer, &refused("400 Bad Request", cause));
}

/// An actor and a blocking handler read and answer JSON as a handler does,
/// and refuse with the same bodies.
fn actors_and_blocking_handlers(dispatch: Dispatch) {
    let server = start_with(&config(dispatch), routes());
    let mut client = Client::connect(server.local_addr());
    let answer = post(&mut client, "/total", "application/json", r#"{"add":40}"#);
    assert_response(&answer, &json(r#"{"total":40}"#));
    let answer = post(&mut client, "/total", "application/json", r#"{"add":2}"#);
    assert_response(&answer, &json(r#"{"total":42}"#));
    let answer = post(&mut client, "/total", "application/json", r#"{"add":"x"}"#);
    let cause = r#"JSON body: invalid type: string "x", expected i64 at line 1 column 10"#;
    assert_response(&answer, &refused("400 Bad Request", cause));
    let answer = post(&mut client, "/total", "text/csv", "1");
    let cause = r#"expected Content-Type: application/json, got "text/csv""#;
    assert_response(&answer, &refused("415 Unsupported Media Type", cause));

    let answer = post(
        &mut client,
        "/greet/blocking",
        "application/json",
        r#"{"name":"Cy"}"#,
    );
    assert_response(&answer, &json(r#"{"message":"Hello, Cy!"}"#));
    let answer = post(&mut client, "/greet/blocking", "application/json", "[]");
    let cause =
        "JSON body: invalid length 0, expected struct Greet with 2 elements at line 1 column 2";
    assert_response(&answer, &refused("400 Bad Request", cause));
}

/// HEAD of a typed route: the head a GET gets, without the body.
fn head_leaves_the_body_out(dispatch: Dispatch) {
    let server = start_with(&config(dispatch), routes());
    let mut client = Client::connect(server.local_addr());
    client.send(b"HEAD /users/7 HTTP/1.1\r\nHost: t\r\n\r\n");
    let expected = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
        Content-Type: application/json\r\nContent-Length: 5\r\nDate: {date}\r\n\r\n";
    assert_response(&client.response(true), expected);
    client.send(b"HEAD /users/9 HTTP/1.1\r\nHost: t\r\n\r\n");
    let expected = "HTTP/1.1 404 Not Found\r\nServer: uppercut-mio-server\r\n\
        Content-Type: text/plain; charset=utf-8\r\nContent-Length: 25\r\nDate: {date}\r\n\r\n";
    assert_response(&client.response(true), expected);
}

in_both_modes!(
    json_bodies_in_and_out,
    past_the_server_limit_the_server_refuses,
    queries_forms_and_path_parameters,
    actors_and_blocking_handlers,
    head_leaves_the_body_out,
);
