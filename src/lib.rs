//! uppercut-mio-server: an HTTP/1.1 server whose event loops (pollers) and
//! connections are Uppercut actors, on mio, answering with canned responses.
//!
//! ```no_run
//! use uppercut_mio_server::{CannedResponse, Config, Routes, Server};
//!
//! let routes = Routes::new().route("/", CannedResponse::ok("text/plain", "hi\n"));
//! let server = Server::start(&Config::default(), routes).expect("bind");
//! println!("listening on {}", server.local_addr());
//! server.join();
//! ```

#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

pub mod cli;
pub mod config;
pub mod sans_io;

mod http;
mod observe;
mod request_stream;
mod routes;
mod runtime;
mod upstream;

/// The actor system the server runs on, re-exported so that actors behind
/// actor routes use the same version.
pub use uppercut;

pub use config::{Config, Dispatch, Timeouts, UpstreamConfig};
pub use http::method::Method;
pub use http::response::{CannedResponse, ResponseError};
pub use observe::access_log::AccessLogTarget;
pub use routes::actor::{ActorRequest, ActorResponse};
pub use routes::handler::Response;
pub use routes::request::Request;
pub use routes::static_files::{StaticFilesError, StaticLimits};
pub use routes::static_site::{LoadSummary, StaticSite};
pub use routes::Routes;
pub use runtime::listeners::raise_open_files_limit;
pub use runtime::server::Server;
