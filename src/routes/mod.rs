//! What answers a request: the route table (canned, handler and actor
//! routes), the request and response types routes see (and their typed
//! readings, `typed`), the middleware around them (and the ready-made
//! ones: CORS, request ids), the error bodies the server writes, and the
//! static files served ahead of them.

pub(crate) mod actor;
pub(crate) mod actor_response;
pub(crate) mod conditional;
pub(crate) mod cors;
pub(crate) mod error_body;
pub(crate) mod etag;
pub(crate) mod handler;
pub(crate) mod https_redirect;
pub(crate) mod middleware;
pub(crate) mod path_entry;
pub(crate) mod path_pattern;
pub(crate) mod percent;
pub(crate) mod reply;
pub(crate) mod request;
pub(crate) mod request_id;
pub(crate) mod responses;
pub(crate) mod spawns;
pub(crate) mod static_files;
pub(crate) mod static_gzip;
pub(crate) mod static_loaded;
pub(crate) mod static_response;
pub(crate) mod static_site;
pub(crate) mod static_table;
pub(crate) mod table;
pub(crate) mod typed;

pub use table::Routes;
