//! uppercut-mio-server: an HTTP/1.1 server whose event loops (pollers) and
//! connections are Uppercut actors, on mio.
//!
//! A [`Routes`] table holds three kinds of route: canned responses built
//! once at start, handler routes (a function of the [`Request`] writes the
//! [`Response`], in the connection actor), and actor routes (the request
//! goes as an [`ActorRequest`] to an uppercut actor in the server's
//! system, which answers with an [`ActorResponse`]).
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

mod http;
mod net;
mod observe;
mod request_stream;
mod routes;
mod runtime;
mod upstream;

/// The actor system the server runs on, re-exported so that actors behind
/// actor routes use the same version.
pub use uppercut;

pub use config::AccessLogTarget;
pub use config::{Config, Dispatch, Timeouts, UpstreamConfig};
pub use http::method::Method;
pub use http::response::{CannedResponse, ResponseError};
pub use routes::actor::{ActorRequest, ActorResponse};
pub use routes::handler::Response;
pub use routes::request::Request;
pub use routes::static_files::{StaticFilesError, StaticLimits};
pub use routes::static_site::{LoadSummary, StaticSite};
pub use routes::Routes;
pub use runtime::listeners::raise_open_files_limit;
pub use runtime::server::Server;
