//! Middleware over real sockets, in both dispatch modes: an early answer
//! (an auth middleware's 401), CORS preflights and requests from allowed
//! and other origins, request ids made and taken and seen by handlers and
//! actors, several middleware in order (an early answer skipping the rest),
//! scopes by path however the path is spelled, the fields on every kind of
//! response, and routes outside every scope answering byte for byte as
//! without middleware. One case over HTTP/2.

mod common;
mod static_common;

use std::time::Duration;

use common::h2client::H2Client;
use common::{assert_response, config, error_response, start_with, text, Client, HELLO};
use static_common::{TempTree, CSS, CSS_HEAD};
use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::Server;
use uppercut_mio_server::{ActorRequest, ActorResponse, CannedResponse, Cors, Dispatch};
use uppercut_mio_server::{Exchange, Fields, Method, Middleware, Request, RequestId, Routes};

const ORIGIN: &str = "https://app.example";

/// Refuses requests without the bearer token.
struct Auth;

impl Middleware for Auth {
    fn before(&self, request: &Request<'_>, exchange: &mut Exchange<'_>) {
        if request.header("authorization") != Some(&b"Bearer s3cret"[..]) {
            let response = exchange.answer(401);
            let _ = response.header("WWW-Authenticate", "Bearer");
            let _ = response.header("Content-Type", "text/plain");
            response.body(b"401 Unauthorized\n");
        }
    }
}

/// Adds `X-Trace: NAME`; answers 403 when the request's `X-Stop` names it.
struct Trace(&'static str);

impl Middleware for Trace {
    fn before(&self, request: &Request<'_>, exchange: &mut Exchange<'_>) {
        if request.header("x-stop") == Some(self.0.as_bytes()) {
            let body = format!("stopped by {}\n", self.0);
            exchange.answer(403).body(body.as_bytes());
        }
    }

    fn after(&self, _request: &Request<'_>, fields: &mut Fields<'_>) {
        let _ = fields.add("X-Trace", self.0);
    }
}

/// Answers with the request's id.
struct Ids;

impl AnyActor for Ids {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let id = request.request().request_id().unwrap_or("none").to_string();
            request.respond(ActorResponse::text(format!("id={id}\n")));
        }
    }
}

fn hello() -> CannedResponse {
    CannedResponse::ok("text/plain; charset=utf-8", "hello\n")
}

/// `/` and `/plain` outside every scope; under `/mw/`, a request id and
/// CORS for `ORIGIN`; under `/mw/private/`, `Auth` too; under `/mw/order/`,
/// `Trace("a")` then `Trace("b")`. A static file at `/mw/site.css`.
fn start(dispatch: Dispatch, site: &TempTree) -> Server {
    let mut config = config(dispatch);
    config.static_dir = Some(site.root.clone());
    let cors = Cors::origins(&[ORIGIN])
        .allow_methods(&[Method::Get, Method::Post])
        .allow_headers(&["Content-Type"])
        .max_age(Duration::from_secs(600));
    let id = |request: &Request<'_>, response: &mut uppercut_mio_server::Response<'_>| {
        let _ = response.header("Content-Type", "text/plain");
        let id = request.request_id().unwrap_or("none");
        response.body(format!("id={id}\n").as_bytes());
    };
    let routes = Routes::new()
        .route("/", hello())
        .handler(&[Method::Get], "/plain", id)
        .route("/mw/hello", hello())
        .handler(&[Method::Get, Method::Post], "/mw/id", id)
        .actor(&[Method::Get], "/mw/actor-id", "ids")
        .spawn("ids", Ids)
        .route(
            "/mw/private/data",
            CannedResponse::ok("text/plain", "secret\n"),
        )
        .route("/mw/order/x", hello())
        .wrap_at("/mw/*", RequestId::new())
        .wrap_at("/mw/*", cors)
        .wrap_at("/mw/private/*", Auth)
        .wrap_at("/mw/order/*", Trace("a"))
        .wrap_at("/mw/order/*", Trace("b"));
    start_with(&config, routes)
}

fn site() -> TempTree {
    let site = TempTree::new("middleware");
    site.file("mw/site.css", CSS.as_bytes());
    site
}

/// `expected` with `fields` (lines ending CRLF) after its `Date` line.
fn with_fields(expected: &str, fields: &str) -> String {
    expected.replacen(
        "Date: {date}\r\n",
        &format!("Date: {{date}}\r\n{fields}"),
        1,
    )
}

/// One request on `client` (`fields`, each ending CRLF, after `Host`).
fn get(client: &mut Client, method: &str, path: &str, fields: &str) -> Vec<u8> {
    let request = format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{fields}\r\n");
    client.send(request.as_bytes());
    client.response(method == "HEAD")
}

/// The value of `name` in `response`'s head.
fn field<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    let head = &response[..response.find("\r\n\r\n")?];
    head.split("\r\n")
        .filter_map(|line| line.split_once(": "))
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, value)| value)
}

fn routes_outside_every_scope_answer_as_without_middleware(dispatch: Dispatch) {
    let site = site();
    let server = start(dispatch, &site);
    let mut client = Client::connect(server.local_addr());
    let origin = format!("Origin: {ORIGIN}\r\nX-Request-Id: t-1\r\n");
    assert_response(&get(&mut client, "GET", "/", &origin), HELLO);
    let plain = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: text/plain\r\n\
        Content-Length: 8\r\nDate: {date}\r\n\r\nid=none\n";
    assert_response(&get(&mut client, "GET", "/plain", &origin), plain);
    let not_found = error_response(404, "Not Found", "", false, false);
    assert_response(&get(&mut client, "GET", "/nowhere", &origin), &not_found);
    // A preflight outside: the route's answer (no OPTIONS route: 405).
    let preflight = format!("{origin}Access-Control-Request-Method: POST\r\n");
    let response = text(&get(&mut client, "OPTIONS", "/", &preflight));
    assert!(response.starts_with("HTTP/1.1 405 "), "{response}");
}

fn an_auth_middleware_answers_401_before_the_route(dispatch: Dispatch) {
    let site = site();
    let server = start(dispatch, &site);
    let mut client = Client::connect(server.local_addr());
    let unauthorized = "HTTP/1.1 401 Unauthorized\r\nServer: uppercut-mio-server\r\n\
        WWW-Authenticate: Bearer\r\nContent-Type: text/plain\r\nContent-Length: 17\r\n\
        Date: {date}\r\nX-Request-Id: t-1\r\nAccess-Control-Allow-Origin: https://app.example\r\n\
        Vary: Origin\r\n\r\n401 Unauthorized\n";
    let fields = format!("Origin: {ORIGIN}\r\nX-Request-Id: t-1\r\n");
    let refused = get(&mut client, "GET", "/mw/private/data", &fields);
    assert_response(&refused, unauthorized);
    // HEAD: the same head, no body.
    let head = get(&mut client, "HEAD", "/mw/private/data", &fields);
    let unauthorized_head = unauthorized.replace("401 Unauthorized\n", "");
    assert_response(&head, &unauthorized_head);
    // With the token, the route.
    let secret = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: text/plain\r\n\
        Content-Length: 7\r\nDate: {date}\r\n\r\nsecret\n";
    let authorized = format!("{fields}Authorization: Bearer s3cret\r\n");
    let expected = with_fields(
        secret,
        "X-Request-Id: t-1\r\nAccess-Control-Allow-Origin: https://app.example\r\nVary: Origin\r\n",
    );
    assert_response(
        &get(&mut client, "GET", "/mw/private/data", &authorized),
        &expected,
    );
    // A body the route would refuse (405) is read, the 401 given, and the
    // connection stays open for the next request.
    client.send(
        b"POST /mw/private/data HTTP/1.1\r\nHost: t\r\nX-Request-Id: t-2\r\n\
          Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    );
    let expected = unauthorized
        .replace("X-Request-Id: t-1", "X-Request-Id: t-2")
        .replace("Access-Control-Allow-Origin: https://app.example\r\n", "");
    assert_response(&client.response(false), &expected);
    let hello_fields = "X-Request-Id: t-1\r\nAccess-Control-Allow-Origin: https://app.example\r\n\
        Vary: Origin\r\n";
    assert_response(
        &get(&mut client, "GET", "/mw/hello", &fields),
        &with_fields(HELLO, hello_fields),
    );
    // Spelled otherwise, the same path and the same middleware.
    for path in [
        "/%6Dw/private/data",
        "/mw/./private/data",
        "/mw/x/../private/data",
        "//mw//private/data",
    ] {
        let response = get(&mut client, "GET", path, &fields);
        assert_response(&response, unauthorized);
    }
}

fn cors_answers_preflights_and_marks_allowed_origins(dispatch: Dispatch) {
    let site = site();
    let server = start(dispatch, &site);
    let mut client = Client::connect(server.local_addr());
    let preflight = |origin: &str| {
        format!(
            "Origin: {origin}\r\nAccess-Control-Request-Method: POST\r\n\
             Access-Control-Request-Headers: content-type\r\nX-Request-Id: t-1\r\n"
        )
    };
    let vary = "Vary: Origin, Access-Control-Request-Method, Access-Control-Request-Headers";
    let allowed = format!(
        "HTTP/1.1 204 No Content\r\nServer: uppercut-mio-server\r\n\
         Access-Control-Allow-Methods: GET, POST\r\nAccess-Control-Allow-Headers: Content-Type\r\n\
         Access-Control-Max-Age: 600\r\nDate: {{date}}\r\nX-Request-Id: t-1\r\n\
         Access-Control-Allow-Origin: https://app.example\r\n{vary}\r\n\r\n"
    );
    // At a route (GET only), at the handler's, and at no route at all.
    for path in ["/mw/hello", "/mw/id", "/mw/nowhere"] {
        let response = get(&mut client, "OPTIONS", path, &preflight(ORIGIN));
        assert_response(&response, &allowed);
    }
    // Another origin: answered, with nothing it could use.
    let refused = format!(
        "HTTP/1.1 204 No Content\r\nServer: uppercut-mio-server\r\nDate: {{date}}\r\n\
         X-Request-Id: t-1\r\n{vary}\r\n\r\n"
    );
    let other = preflight("https://evil.example");
    assert_response(&get(&mut client, "OPTIONS", "/mw/hello", &other), &refused);
    // Requests that are not preflights reach their routes.
    let allowed_fields =
        "X-Request-Id: t-2\r\nAccess-Control-Allow-Origin: https://app.example\r\n\
        Vary: Origin\r\n";
    let simple = format!("Origin: {ORIGIN}\r\nX-Request-Id: t-2\r\n");
    assert_response(
        &get(&mut client, "GET", "/mw/hello", &simple),
        &with_fields(HELLO, allowed_fields),
    );
    let id = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: text/plain\r\n\
        Content-Length: 7\r\nDate: {date}\r\n\r\nid=t-2\n";
    assert_response(
        &get(&mut client, "POST", "/mw/id", &simple),
        &with_fields(id, allowed_fields),
    );
    let other = "Origin: https://evil.example\r\nX-Request-Id: t-2\r\n";
    assert_response(
        &get(&mut client, "GET", "/mw/hello", other),
        &with_fields(HELLO, "X-Request-Id: t-2\r\nVary: Origin\r\n"),
    );
    // No Origin: not CORS, but the answer still varies by it.
    assert_response(
        &get(&mut client, "GET", "/mw/hello", "X-Request-Id: t-2\r\n"),
        &with_fields(HELLO, "X-Request-Id: t-2\r\nVary: Origin\r\n"),
    );
    // An OPTIONS with an Origin but no requested method is no preflight.
    let options = format!("Origin: {ORIGIN}\r\nX-Request-Id: t-3\r\n");
    let response = text(&get(&mut client, "OPTIONS", "/mw/hello", &options));
    assert!(response.starts_with("HTTP/1.1 405 "), "{response}");
    assert_eq!(
        field(&response, "Access-Control-Allow-Origin"),
        Some(ORIGIN)
    );
}

/// With credentials and a list of origins: each listed origin (in any
/// case) is echoed as it was sent, with `Access-Control-Allow-Credentials`;
/// an origin not listed, one that only begins as a listed one does, and
/// `null` get neither (a credentials header beside no origin, or an
/// origin echoed unlisted, would let any site read a user's answers).
fn cors_with_credentials_echoes_only_listed_origins(dispatch: Dispatch) {
    let cors = Cors::origins(&[ORIGIN, "http://localhost:3000"]).allow_credentials();
    let routes = Routes::new()
        .route("/mw/hello", hello())
        .wrap_at("/mw/*", cors);
    let server = start_with(&config(dispatch), routes);
    let mut client = Client::connect(server.local_addr());
    let vary = "Vary: Origin, Access-Control-Request-Method, Access-Control-Request-Headers";
    let preflight =
        |origin: &str| format!("Origin: {origin}\r\nAccess-Control-Request-Method: POST\r\n");
    for origin in ["http://localhost:3000", "https://APP.example"] {
        let allowed = format!(
            "HTTP/1.1 204 No Content\r\nServer: uppercut-mio-server\r\n\
             Access-Control-Allow-Methods: GET, HEAD, POST\r\nDate: {{date}}\r\n\
             Access-Control-Allow-Origin: {origin}\r\n\
             Access-Control-Allow-Credentials: true\r\n{vary}\r\n\r\n"
        );
        let response = get(&mut client, "OPTIONS", "/mw/hello", &preflight(origin));
        assert_response(&response, &allowed);
        let fields = format!(
            "Access-Control-Allow-Origin: {origin}\r\n\
             Access-Control-Allow-Credentials: true\r\nVary: Origin\r\n"
        );
        let response = get(
            &mut client,
            "GET",
            "/mw/hello",
            &format!("Origin: {origin}\r\n"),
        );
        assert_response(&response, &with_fields(HELLO, &fields));
    }
    let refused = format!(
        "HTTP/1.1 204 No Content\r\nServer: uppercut-mio-server\r\nDate: {{date}}\r\n\
         {vary}\r\n\r\n"
    );
    for origin in ["https://evil.example", "https://app.example.evil", "null"] {
        let response = get(&mut client, "OPTIONS", "/mw/hello", &preflight(origin));
        assert_response(&response, &refused);
        let response = get(
            &mut client,
            "GET",
            "/mw/hello",
            &format!("Origin: {origin}\r\n"),
        );
        assert_response(&response, &with_fields(HELLO, "Vary: Origin\r\n"));
    }
    // No Origin: no CORS fields, but the answer varies by it.
    let response = get(&mut client, "GET", "/mw/hello", "");
    assert_response(&response, &with_fields(HELLO, "Vary: Origin\r\n"));
}

fn a_request_id_is_taken_or_made_and_seen_by_the_route(dispatch: Dispatch) {
    let site = site();
    let server = start(dispatch, &site);
    let mut client = Client::connect(server.local_addr());
    let handler = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\nContent-Type: text/plain\r\n\
        Content-Length: LEN\r\nDate: {date}\r\nX-Request-Id: ID\r\nVary: Origin\r\n\r\nid=ID\n";
    let actor = "HTTP/1.1 200 OK\r\nServer: uppercut-mio-server\r\n\
        Content-Type: text/plain; charset=utf-8\r\nContent-Length: LEN\r\nDate: {date}\r\n\
        X-Request-Id: ID\r\nVary: Origin\r\n\r\nid=ID\n";
    let expect = |layout: &str, id: &str| {
        layout
            .replace("LEN", &(id.len() + 4).to_string())
            .replace("ID", id)
    };
    let mut made = Vec::new();
    for (path, layout) in [("/mw/id", handler), ("/mw/actor-id", actor)] {
        // The client's id, if valid.
        let taken = "X-Request-Id: Root=1-5759e988;Parent=53995c3f\r\n";
        let response = get(&mut client, "GET", path, taken);
        assert_response(
            &response,
            &expect(layout, "Root=1-5759e988;Parent=53995c3f"),
        );
        // Else one made here: PID-START-THREAD-COUNT, in hexadecimal.
        for fields in ["", "X-Request-Id: two words\r\n", "X-Request-Id: \r\n"] {
            let response = text(&get(&mut client, "GET", path, fields));
            let id = field(&response, "X-Request-Id").expect("an id").to_string();
            assert_response(response.as_bytes(), &expect(layout, &id));
            let parts: Vec<&str> = id.split('-').collect();
            assert_eq!(parts.len(), 4, "{id}");
            assert_eq!(parts[0], format!("{:x}", std::process::id()));
            assert!(parts
                .iter()
                .all(|part| u64::from_str_radix(part, 16).is_ok()));
            made.push(id);
        }
    }
    let mut distinct = made.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), made.len(), "{made:?}");
    // A static file, and a 404, carry it too.
    let fields = "X-Request-Id: t-5\r\nVary: Origin\r\n";
    let css = format!("{CSS_HEAD}{CSS}");
    assert_response(
        &get(&mut client, "GET", "/mw/site.css", "X-Request-Id: t-5\r\n"),
        &with_fields(&css, fields),
    );
    let not_found = error_response(404, "Not Found", "", false, false);
    assert_response(
        &get(&mut client, "GET", "/mw/nowhere", "X-Request-Id: t-5\r\n"),
        &with_fields(&not_found, fields),
    );
}

fn middleware_run_in_order_and_an_early_answer_skips_the_rest(dispatch: Dispatch) {
    let site = site();
    let server = start(dispatch, &site);
    let mut client = Client::connect(server.local_addr());
    let base = "X-Request-Id: t-1\r\nVary: Origin\r\n";
    assert_response(
        &get(&mut client, "GET", "/mw/order/x", "X-Request-Id: t-1\r\n"),
        &with_fields(HELLO, &format!("{base}X-Trace: a\r\nX-Trace: b\r\n")),
    );
    let stopped = |by: &str, traces: &str| {
        format!(
            "HTTP/1.1 403 Forbidden\r\nServer: uppercut-mio-server\r\nContent-Length: 13\r\n\
             Date: {{date}}\r\n{base}{traces}\r\nstopped by {by}\n"
        )
    };
    // `a` answers: `b` neither runs nor adds its field; `a`, and the
    // request id and CORS before it, add theirs.
    let by_a = get(
        &mut client,
        "GET",
        "/mw/order/x",
        "X-Request-Id: t-1\r\nX-Stop: a\r\n",
    );
    assert_response(&by_a, &stopped("a", "X-Trace: a\r\n"));
    let by_b = get(
        &mut client,
        "GET",
        "/mw/order/x",
        "X-Request-Id: t-1\r\nX-Stop: b\r\n",
    );
    assert_response(&by_b, &stopped("b", "X-Trace: a\r\nX-Trace: b\r\n"));
}

in_both_modes!(
    routes_outside_every_scope_answer_as_without_middleware,
    an_auth_middleware_answers_401_before_the_route,
    cors_answers_preflights_and_marks_allowed_origins,
    cors_with_credentials_echoes_only_listed_origins,
    a_request_id_is_taken_or_made_and_seen_by_the_route,
    middleware_run_in_order_and_an_early_answer_skips_the_rest,
);

/// Over HTTP/2 the same middleware answer the same: a preflight, a 401,
/// and a route's answer with the fields added.
#[test]
fn middleware_answer_over_http2_as_over_http11() {
    let site = site();
    let server = start(Dispatch::Local, &site);
    let mut client = H2Client::plain(server.local_addr());
    let request = |method: &str, path: &str, fields: &[(&str, &str)]| {
        let mut builder = http::Request::builder()
            .method(method)
            .uri(format!("http://localhost{path}"));
        for (name, value) in fields {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap()
    };
    let preflight = client.request(
        request(
            "OPTIONS",
            "/mw/hello",
            &[
                ("origin", ORIGIN),
                ("access-control-request-method", "POST"),
                ("x-request-id", "h2-1"),
            ],
        ),
        b"",
    );
    assert_eq!(preflight.status, 204);
    let names: Vec<&str> = preflight.fields.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "server",
            "access-control-allow-methods",
            "access-control-allow-headers",
            "access-control-max-age",
            "date",
            "x-request-id",
            "access-control-allow-origin",
            "vary"
        ]
    );
    assert_eq!(preflight.field("access-control-allow-origin"), Some(ORIGIN));
    assert_eq!(preflight.field("x-request-id"), Some("h2-1"));
    let refused = client.request(request("GET", "/mw/private/data", &[]), b"");
    assert_eq!(refused.status, 401);
    assert_eq!(refused.field("www-authenticate"), Some("Bearer"));
    assert_eq!(refused.body, b"401 Unauthorized\n");
    let id = refused
        .field("x-request-id")
        .expect("a made id")
        .to_string();
    let answered = client.request(request("GET", "/mw/id", &[("x-request-id", "h2-2")]), b"");
    assert_eq!(
        (answered.status, &answered.body[..]),
        (200, &b"id=h2-2\n"[..])
    );
    assert_eq!(answered.field("x-request-id"), Some("h2-2"));
    assert_ne!(id, "h2-2");
    // Outside every scope: nothing added.
    let plain = client.request(request("GET", "/", &[("origin", ORIGIN)]), b"");
    let names: Vec<&str> = plain.fields.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["server", "content-type", "content-length", "date"]);
}

/// A route table whose middleware has a path pattern does not start.
#[test]
fn a_pattern_scope_is_refused_at_start() {
    let routes = Routes::new().wrap_at("/users/{id}", Auth);
    match Server::start(&config(Dispatch::Local), routes) {
        Err(e) => assert!(e.to_string().contains("\"/users/{id}\""), "{e}"),
        Ok(_) => panic!("a pattern scope was accepted"),
    }
}

/// `--cors` and `--request-id` (`Config::cors`, `Config::request_id`) wrap
/// every route, the request id first and both ahead of the table's own.
#[test]
fn the_configured_cors_and_request_id_come_first() {
    let mut config = config(Dispatch::Local);
    config.cors = vec![ORIGIN.into()];
    config.request_id = true;
    let server = start_with(
        &config,
        Routes::new().route("/", hello()).wrap(Trace("own")),
    );
    let mut client = Client::connect(server.local_addr());
    let preflight = format!(
        "Origin: {ORIGIN}\r\nAccess-Control-Request-Method: PUT\r\n\
         Access-Control-Request-Headers: x-custom\r\nX-Request-Id: c-1\r\n"
    );
    // Answered before the table's own middleware ran: no `X-Trace`.
    let answered = "HTTP/1.1 204 No Content\r\nServer: uppercut-mio-server\r\n\
        Access-Control-Allow-Methods: GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS\r\n\
        Access-Control-Allow-Headers: x-custom\r\nAccess-Control-Max-Age: 600\r\n\
        Date: {date}\r\nX-Request-Id: c-1\r\nAccess-Control-Allow-Origin: https://app.example\r\n\
        Vary: Origin, Access-Control-Request-Method, Access-Control-Request-Headers\r\n\r\n";
    assert_response(&get(&mut client, "OPTIONS", "/", &preflight), answered);
    let fields = "X-Request-Id: c-2\r\nAccess-Control-Allow-Origin: https://app.example\r\n\
        Vary: Origin\r\nX-Trace: own\r\n";
    let simple = format!("Origin: {ORIGIN}\r\nX-Request-Id: c-2\r\n");
    assert_response(
        &get(&mut client, "GET", "/", &simple),
        &with_fields(HELLO, fields),
    );
}
