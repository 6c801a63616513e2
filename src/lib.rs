//! uppercut-mio-server: an HTTP/1.1, HTTP/2 (over TLS and h2c) and HTTP/3
//! server with WebSockets, whose event loops (pollers) and connections are
//! Uppercut actors, on mio; several servers join one actor system through
//! NATS.
//!
//! A [`Routes`] table holds three kinds of route: canned responses built
//! once at start, handler routes (a function of the [`Request`] writes the
//! [`Response`], in the connection actor), and actor routes (the request
//! goes as an [`ActorRequest`] to an actor the server owns, which answers
//! with an [`ActorResponse`]).
//!
//! The server owns the actors given to it, and runs them itself rather than
//! through uppercut's scheduler:
//!
//! - [`Routes::spawn`]: one instance, run on the thread of whoever sends to
//!   it when it is free (a request's connection, on its poller), one message
//!   at a time; a sender that finds it busy leaves the message for the
//!   holder. An actor route to it costs about what a handler route costs.
//! - [`Routes::spawn_per_poller`]: an instance per poller, for per-core
//!   state, run only by its own poller's connections.
//! - [`Routes::spawn_blocking`]: instances on threads of their own that
//!   sleep while idle, for actors that block.
//!
//! Each keeps its uppercut address: other actors reach it there, and
//! [`Server::send`] from outside the server.
//!
//! A typed actor ([`Routes::json_actor`]) is the short form: its routes'
//! handlers take the actor's state and the typed request, and answer a
//! status and a serde value or a [`Rejection`]; typed messages
//! ([`Server::send_typed`], [`typed_message`], [`read_typed`]) reach it too.
//!
//! [`Middleware`] runs around the routes of a table ([`Routes::wrap`]) or
//! of a path ([`Routes::wrap_at`]): its hooks may answer a request early
//! or add fields to every response. [`Cors`] and [`RequestId`] are ready
//! made.
//!
//! Routes read a request into types of their own with serde
//! ([`Request::json`], [`Request::form`], [`Request::query_params`],
//! [`Request::params`]), refuse what does not fit with a [`Rejection`], and
//! answer JSON ([`Response::json`], [`ActorResponse::json_value`],
//! [`Routes::json_handler`]). [`Routes::error_body`] chooses the body of
//! every error the server writes, and of every rejection. The
//! [`testing`] module serves a table without sockets, for unit tests.
//!
//! **Handlers and inline actors must not block.** They run on a poller, and
//! while one runs, that poller serves none of its other connections: a
//! handler that sleeps a second delays every request on its poller by a
//! second. Anything that may block (a synchronous client, a file read, a
//! long computation) belongs in [`Routes::blocking_handler`] or
//! [`Routes::spawn_blocking`], whose answers come back to the connection
//! without any poller waiting for them.
//!
//! ```no_run
//! use std::fmt::Write;
//!
//! use uppercut_mio_server::uppercut::api::{AnyActor, AnySender, Envelope};
//! use uppercut_mio_server::{ActorRequest, ActorResponse, CannedResponse};
//! use uppercut_mio_server::{Config, Method, Routes, Server};
//!
//! /// Counts the requests it has answered.
//! struct Counter(u64);
//!
//! impl AnyActor for Counter {
//!     fn receive(&mut self, envelope: Envelope, _sender: &mut dyn AnySender) {
//!         if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
//!             self.0 += 1;
//!             request.respond(ActorResponse::text(self.0.to_string()));
//!         }
//!     }
//! }
//!
//! let routes = Routes::new()
//!     .route("/", CannedResponse::ok("text/plain", "hi\n"))
//!     .handler(&[Method::Get], "/greet", |request, response| {
//!         let name = request.query_param("name").unwrap_or_default();
//!         let _ = write!(response, "Hello, {name}!");
//!     })
//!     .actor(&[Method::Get], "/count", "counter")
//!     .spawn("counter", Counter(0));
//! let server = Server::start(&Config::default(), routes).expect("bind");
//! println!("listening on {}", server.local_addr());
//! // Serves until SIGINT or SIGTERM, then drains.
//! server.run_until_signal();
//! ```

#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

pub mod cli;
pub mod config;
pub mod sans_io;
pub mod testing;

/// Test builds only (the `fault-injection` feature): switches that hold
/// the server at a chosen point, for tests of what happens meanwhile.
#[cfg(feature = "fault-injection")]
#[doc(hidden)]
pub mod fault {
    /// Holds (`true`) or lets go the commits of the state file in `dir`
    /// (`--state DIR`): writes queue, and the answers that wait for them
    /// wait too.
    pub fn hold_state_commits(dir: &std::path::Path, hold: bool) {
        crate::runtime::state_file::gate::hold(dir, hold);
    }
}

mod actors;
mod cluster;
mod gateway;
mod h3;
mod http;
mod http2;
mod http3;
mod log_limit;
mod mail;
#[cfg(test)]
mod model;
mod nats;
mod net;
mod observe;
mod request_stream;
mod routes;
mod runtime;
mod state;
mod static_files;
mod sync;
mod tls;
mod upstream;
mod websocket;
mod ws;

/// The actor system the server runs on, re-exported so that actors behind
/// actor routes use the same version.
pub use uppercut;

/// The status of a response ([`ActorResponse::new`], [`Response::set_status`]),
/// from the `http` crate, re-exported so that routes need no dependency of
/// their own on it.
pub use ::http::StatusCode;

/// Logs to standard error at the levels `RUST_LOG` names (`warn` unless
/// set), as the server binary does, with `env_logger`; a library user who
/// has a logger of their own installs that instead (and should limit the
/// `rustls` target as below). Call it once, first.
///
/// rustls logs through the `log` crate too, a warning for things a client
/// chooses (an SNI with a port in it, as `hey` sends), once per connection:
/// its warnings and errors are let through at most once a second, the next
/// one saying how many were left out, as the server's own reports of failed
/// handshakes are. Its debug and trace lines, which only `RUST_LOG` asks
/// for, pass as they are.
pub fn init_logging() {
    let logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).build();
    let max_level = logger.filter();
    if log::set_boxed_logger(Box::new(log_limit::Limited::new(logger))).is_ok() {
        log::set_max_level(max_level);
    }
}

pub use config::AccessLogTarget;
pub use config::{host_node_name, ClusterConfig, NatsUrl};
pub use config::{Config, Dispatch, Listener, StateConfig, Timeouts, TlsFiles, UpstreamConfig};
pub use http::error_body::ServerError;
pub use http::method::Method;
pub use http::response::{CannedResponse, ResponseError};
pub use mail::{last_send_error, SendError, Subscribe, Unsubscribe};
pub use routes::actor::ActorRequest;
pub use routes::actor_response::ActorResponse;
pub use routes::cors::Cors;
pub use routes::handler::Response;
pub use routes::https_redirect::HttpsRedirect;
pub use routes::middleware::{Exchange, Fields, Middleware};
pub use routes::request::Request;
pub use routes::request_id::RequestId;
pub use routes::typed::Rejection;
pub use routes::typed_actor::{read_typed, typed_message, Json, TypedAnswer, TypedMessageError};
pub use routes::Routes;
pub use runtime::listeners::raise_open_files_limit;
pub use runtime::server::{Server, ServerSender};
pub use runtime::state_tools::{export_state, import_state};
pub use static_files::load::{StaticFilesError, StaticLimits};
pub use static_files::site::{LoadSummary, StaticSite};
pub use websocket::{Closed, Message, Outgoing, WebSocket, WsContext, WsDeflate, WsHandle};
