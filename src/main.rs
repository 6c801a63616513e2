//! The `uppercut-mio-server` binary: flags, logging and the standard routes;
//! the server itself loads the static directory, reloads it on SIGHUP and
//! drains on SIGINT or SIGTERM.

use std::process::ExitCode;

use std::fmt::Write;

use log::warn;
use uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::cli::{parse_args, start_line, version_line, Command, USAGE};
use uppercut_mio_server::{raise_open_files_limit, ActorRequest, ActorResponse};
use uppercut_mio_server::{Method, Routes, Server};

fn main() -> ExitCode {
    // Before anything else: a SIGTERM between the start line and
    // `run_until_signal` must wait for it, not kill the process.
    Server::block_signals();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let config = match parse_args(std::env::args().skip(1)) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version) => {
            println!("{}", version_line());
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("uppercut-mio-server: {message} (try --help)");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = raise_open_files_limit() {
        warn!("could not raise the open-files limit: {e}");
    }
    let server = match Server::start(&config, routes()) {
        Ok(server) => server,
        // The error names the address, the directory or the file itself.
        Err(e) => {
            eprintln!("uppercut-mio-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let files = server.static_site().map(|site| site.summary().files);
    println!("{}", start_line(server.local_addr(), &config, files));
    if let Some(addr) = server.metrics_addr() {
        println!("metrics at http://{addr}/metrics");
    }
    server.run_until_signal();
    ExitCode::SUCCESS
}

/// The standard routes, and the same `Hello, World!` as a handler route and
/// as an actor route, so that benchmarks can weigh an actor hop.
fn routes() -> Routes {
    Routes::standard()
        .handler(&[Method::Get], "/hello/handler", |_, response| {
            let _ = response.header("Content-Type", "text/plain");
            let _ = response.write_str("Hello, World!");
        })
        .actor(&[Method::Get], "/hello/actor", "hello")
        .spawn("hello", Hello)
}

/// Answers every request with `Hello, World!`.
struct Hello;

impl AnyActor for Hello {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            let response = ActorResponse::new(200)
                .and_then(|response| response.with_header("Content-Type", "text/plain"));
            if let Ok(response) = response {
                request.respond(response.with_body("Hello, World!"));
            }
        }
    }
}
