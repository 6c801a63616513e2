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

pub mod access_line;
pub mod access_log;
pub mod balance;
pub mod chunked;
pub mod cli;
pub mod conditional;
pub mod config;
pub mod connection;
pub mod connections;
pub mod date;
pub mod etag;
pub mod exchange;
pub mod headers;
pub mod http_date;
pub mod json;
pub mod local_dispatch;
pub mod metrics;
pub mod metrics_server;
pub mod metrics_text;
pub mod percent;
pub mod poller;
pub mod pool_threads;
pub mod process_stats;
pub mod request;
pub mod response;
pub mod routes;
pub mod server;
pub mod shared;
pub mod slab;
pub mod socket;
pub mod static_files;
pub mod static_response;
pub mod static_site;
pub mod static_table;
pub mod target;
pub mod timeouts;
pub mod upstream;
pub mod upstream_failure;
pub mod upstream_response;
pub mod version;
pub mod wakeup;

pub use config::{Config, Dispatch};
pub use response::CannedResponse;
pub use routes::Routes;
pub use server::Server;
pub use static_files::{StaticFilesError, StaticLimits};
pub use static_site::{LoadSummary, StaticSite};
