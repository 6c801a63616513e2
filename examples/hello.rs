//! A minimal server on the library with routes of your own.
//!
//!     cargo run --release --example hello -- 127.0.0.1:8080
//!     curl -i localhost:8080/greeting

use uppercut_mio_server::{CannedResponse, Config, Dispatch, Routes, Server};

fn main() {
    // Before anything starts: a SIGTERM must wait for run_until_signal.
    Server::block_signals();
    uppercut_mio_server::init_logging();
    let bind = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let config = Config {
        bind: bind.parse().expect("ADDR:PORT"),
        dispatch: Dispatch::Local,
        ..Config::default()
    };

    // Each response is built once, here; requests only copy it out.
    let routes = Routes::new()
        .route("/greeting", CannedResponse::ok("text/plain", "Hi there!\n"))
        .route(
            "/status",
            CannedResponse::new(
                200,
                "OK",
                &[
                    ("Content-Type", "application/json"),
                    ("Cache-Control", "no-store"),
                ],
                r#"{"status":"up"}"#.into(),
            ),
        );

    let server = Server::start(&config, routes).unwrap_or_else(|e| {
        // Display: the flag, file or address, and what is wrong.
        eprintln!("hello: {e}");
        std::process::exit(1)
    });
    println!("listening on http://{}", server.local_addr());
    // Drains on SIGINT or SIGTERM.
    server.run_until_signal();
}
