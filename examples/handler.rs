//! Handler routes: a function of the request computes the response.
//!
//!     cargo run --release --example handler -- 127.0.0.1:8080
//!     curl -i 'localhost:8080/greet?name=J%C3%BCrgen'    # Hello, Jürgen!
//!     curl -i 'localhost:8080/greet'                     # 400
//!     curl -i 'localhost:8080/users/J%C3%BCrgen'         # user Jürgen
//!     curl -i 'localhost:8080/whoami'                    # 127.0.0.1

use std::fmt::Write;

use uppercut_mio_server::{Config, Method, Request, Response, Routes, Server, StatusCode};

/// `GET /greet?name=NAME` answers `Hello, NAME!`; without a name, 400.
fn greet(request: &Request<'_>, response: &mut Response<'_>) {
    let _ = response.header("Content-Type", "text/plain; charset=utf-8");
    match request.query_param("name") {
        Some(name) => {
            let _ = write!(response, "Hello, {name}!");
        }
        None => {
            response.set_status(StatusCode::BAD_REQUEST);
            response.body(b"400 Bad Request: /greet?name=NAME\n");
        }
    }
}

/// `GET /users/{id}` answers `user ID`, the segment decoded.
fn user(request: &Request<'_>, response: &mut Response<'_>) {
    let _ = response.header("Content-Type", "text/plain; charset=utf-8");
    let id = request.param("id").unwrap_or_default();
    let _ = write!(response, "user {id}");
}

/// `GET /whoami` answers the client's IP address.
fn whoami(request: &Request<'_>, response: &mut Response<'_>) {
    let _ = response.header("Content-Type", "text/plain; charset=utf-8");
    if let Some(peer) = request.peer_addr() {
        let _ = write!(response, "{}", peer.ip());
    }
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
    let routes = Routes::new()
        .handler(&[Method::Get], "/greet", greet)
        .handler(&[Method::Get], "/users/{id}", user)
        .handler(&[Method::Get], "/whoami", whoami);
    let server = Server::start(&config, routes).unwrap_or_else(|e| {
        // Display: the flag, file or address, and what is wrong.
        eprintln!("handler: {e}");
        std::process::exit(1)
    });
    println!("listening on http://{}", server.local_addr());
    // Drains on SIGINT or SIGTERM.
    server.run_until_signal();
}
