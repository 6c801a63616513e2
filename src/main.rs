//! The `uppercut-mio-server` binary: flags, logging and the standard routes;
//! the server itself loads the static directory, reloads it on SIGHUP and
//! drains on SIGINT or SIGTERM.

use std::borrow::Cow;
use std::fmt::Write;
use std::process::ExitCode;

use log::warn;
use serde::{Deserialize, Serialize};
use uppercut::api::{AnyActor, AnySender, Envelope};
use uppercut_mio_server::cli::{
    more_listeners_line, parse_args, start_line, version_line, Command, USAGE,
};
use uppercut_mio_server::{export_state, import_state};
use uppercut_mio_server::{raise_open_files_limit, ActorRequest, ActorResponse, StatusCode};
use uppercut_mio_server::{Message, Method, Outgoing, Routes, Server, WebSocket, WsContext};

fn main() -> ExitCode {
    // Before anything else: a SIGTERM between the start line and
    // `run_until_signal` must wait for it, not kill the process.
    Server::block_signals();
    uppercut_mio_server::init_logging();
    let config = match parse_args(std::env::args_os().skip(1)) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version) => {
            println!("{}", version_line());
            return ExitCode::SUCCESS;
        }
        Ok(Command::ExportState(config, file)) => return export(&config, &file),
        Ok(Command::ImportState(config, file)) => return import(&config, &file),
        Err(message) => {
            eprintln!("uppercut-mio-server: {message} (try --help)");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = raise_open_files_limit() {
        warn!("could not raise the open-files limit: {e}");
    }
    let server = match Server::start(&config, routes(&config)) {
        Ok(server) => server,
        // The error names the address, the directory or the file itself.
        Err(e) => {
            eprintln!("uppercut-mio-server: {}", with_flag(e.to_string()));
            return ExitCode::FAILURE;
        }
    };
    if let Some(site) = server.static_site() {
        let skipped = site.summary().skipped_dotfiles;
        if skipped > 0 {
            warn!(
                "--static-dir {}: not serving {skipped} dotfiles or dot-directories \
                 (names starting with '.'); --static-dotfiles serves them",
                site.dir().display()
            );
        }
    }
    let files = server.static_site().map(|site| site.summary().files);
    // A closed standard output (a supervisor that stopped reading it)
    // must not stop the server: these lines are for whoever reads them.
    say(&start_line(server.local_addr(), &config, files));
    if let Some(line) = more_listeners_line(server.listeners()) {
        say(&line);
    }
    if let Some(addr) = server.metrics_addr() {
        say(&format!("metrics at http://{addr}/metrics"));
    }
    match server.run_until_signal() {
        true => ExitCode::SUCCESS,
        // Requests went unanswered: the shutdown timeout cut them short.
        false => ExitCode::from(EXIT_CUT_SHORT),
    }
}

/// `--state-export FILE`: every state to FILE (`-`: standard output).
fn export(config: &uppercut_mio_server::Config, file: &std::path::Path) -> ExitCode {
    let written = match file.to_str() {
        Some("-") => export_state(config, &mut std::io::stdout().lock()),
        _ => std::fs::File::create(file).and_then(|out| {
            let mut out = std::io::BufWriter::new(out);
            export_state(config, &mut out)
        }),
    };
    match written {
        Ok(count) => {
            eprintln!("uppercut-mio-server: exported {count} states");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "uppercut-mio-server: --state-export {}: {e}",
                file.display()
            );
            ExitCode::FAILURE
        }
    }
}

/// `--state-import FILE`: the states FILE (`-`: standard input) holds into
/// the store.
fn import(config: &uppercut_mio_server::Config, file: &std::path::Path) -> ExitCode {
    let read = match file.to_str() {
        Some("-") => import_state(config, &mut std::io::stdin().lock()),
        _ => std::fs::File::open(file)
            .and_then(|input| import_state(config, &mut std::io::BufReader::new(input))),
    };
    match read {
        Ok(count) => {
            eprintln!("uppercut-mio-server: imported {count} states");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "uppercut-mio-server: --state-import {}: {e}",
                file.display()
            );
            ExitCode::FAILURE
        }
    }
}

/// Writes `line` to standard output, if anyone still reads it.
fn say(line: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// The exit status when the shutdown timeout closed connections with a
/// request unanswered or a response not all sent (1: could not start;
/// 2: a bad command line).
const EXIT_CUT_SHORT: u8 = 3;

/// A start error as the operator reads it: the library names the file or
/// directory that failed by what it is, and here it goes by the flag that
/// gave it.
fn with_flag(message: String) -> String {
    const FLAGS: [(&str, &str); 4] = [
        ("TLS certificate ", "--tls-cert "),
        ("TLS key ", "--tls-key "),
        ("static directory ", "--static-dir "),
        ("NATS CA file ", "--nats-ca "),
    ];
    for (noun, flag) in FLAGS {
        if let Some(rest) = message.strip_prefix(noun) {
            return format!("{flag}{rest}");
        }
    }
    message
}

/// The standard routes, and the same `Hello, World!` as a handler route and
/// as actor routes (one actor; an actor per poller; an actor on blocking
/// threads), so that benchmarks can weigh each (`bench/run --routes`), a
/// typed JSON route, a WebSocket echo, and the counter: durable with
/// `--state`, and with `--state jetstream` placed (`counter@*`: one
/// counter for the cluster, on whichever server holds it, moving when that
/// server dies).
fn routes(config: &uppercut_mio_server::Config) -> Routes {
    let routes = match &config.state {
        Some(uppercut_mio_server::StateConfig::JetStream { .. }) => Routes::standard()
            .actor(&[Method::Get, Method::Post], "/count", "counter@*")
            // Counters of their own: `/count/a`, `/count/b`, each placed.
            .actor(
                &[Method::Get, Method::Post],
                "/count/{name}",
                "counter/{name}@*",
            )
            .spawn_placed("counter", |_| Counter { count: 0 }),
        _ => Routes::standard()
            .actor(&[Method::Get, Method::Post], "/count", "counter")
            .spawn_durable("counter", Counter { count: 0 }),
    };
    routes
        .handler(&[Method::Get], "/hello/handler", hello)
        // The same at a path pattern, to weigh matching one.
        .handler(&[Method::Get], "/hello/param/{name}", hello)
        // A small JSON body in, JSON out: `{"name":"World"}` answers
        // `{"message":"Hello, World!"}`.
        .json_handler(&[Method::Post], "/hello/json", |request| {
            let greet: Greet = request.json()?;
            Ok(Greeting {
                message: format!("Hello, {}!", greet.name),
            })
        })
        .actor(&[Method::Get], "/hello/actor", "hello")
        .spawn("hello", Hello::new())
        .actor(&[Method::Get], "/hello/per-poller", "hello-per-poller")
        .spawn_per_poller("hello-per-poller", |_| Hello::new())
        .actor(&[Method::Get], "/hello/blocking", "hello-blocking")
        .spawn_blocking("hello-blocking", BLOCKING_THREADS, |_| Hello::new())
        .websocket("/ws", |_| Echo)
        .websocket("/chat", |_| ChatMember)
}

/// What `POST /hello/json` reads: whom to greet (borrowed from the body
/// unless it has escapes).
#[derive(Deserialize)]
struct Greet<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

/// What `POST /hello/json` answers.
#[derive(Serialize)]
struct Greeting {
    message: String,
}

/// A member of the chat room at `/chat`: the topic `chat`, which with
/// `--nats` spans every server of the cluster.
struct ChatMember;

impl WebSocket for ChatMember {
    fn on_open(&mut self, context: &mut WsContext<'_>) {
        context.subscribe("chat");
    }

    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        let outgoing = match message {
            Message::Text(text) => Outgoing::text(text),
            Message::Binary(bytes) => Outgoing::binary(bytes.to_vec()),
        };
        // This server's members have it whatever happens: the error is
        // about the other servers, and the server logs and counts it.
        let _ = context.publish("chat", &outgoing);
    }
}

/// Counts `GET /count` and `POST /count`: with `--nats`, other servers
/// reach it as `counter@NODE` (`--actor-route /count=counter@NODE`). A
/// durable actor: with `--state`, its count outlives the process, and a
/// count is answered only once it is saved.
#[derive(Serialize, Deserialize)]
struct Counter {
    count: u64,
}

impl AnyActor for Counter {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.count += 1;
            request.respond(ActorResponse::text(format!("{}\n", self.count)));
        }
    }
}

/// Echoes every WebSocket message at `/ws`, for `bench/run --ws`.
struct Echo;

impl WebSocket for Echo {
    fn on_message(&mut self, message: Message<'_>, context: &mut WsContext<'_>) {
        match message {
            Message::Text(text) => context.send_text(text),
            Message::Binary(bytes) => context.send_binary(bytes),
        }
    }
}

/// `Hello, World!` from a handler.
fn hello(_: &uppercut_mio_server::Request<'_>, response: &mut uppercut_mio_server::Response<'_>) {
    let _ = response.header("Content-Type", "text/plain");
    let _ = response.write_str("Hello, World!");
}

/// Threads for `/hello/blocking`: as many as the default of blocking handlers.
const BLOCKING_THREADS: usize = 8;

/// Answers every request with `Hello, World!`, a response built once and
/// cloned (which shares its bytes) for each request.
struct Hello {
    response: Option<ActorResponse>,
}

impl Hello {
    fn new() -> Hello {
        let response = ActorResponse::new(StatusCode::OK)
            .with_header("Content-Type", "text/plain")
            .map(|response| response.with_body("Hello, World!"));
        Hello {
            response: response.ok(),
        }
    }
}

impl AnyActor for Hello {
    fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
        if let (Ok(request), Some(response)) =
            (envelope.message.downcast::<ActorRequest>(), &self.response)
        {
            request.respond(response.clone());
        }
    }
}
