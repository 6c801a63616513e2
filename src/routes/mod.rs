//! What answers a request: the route table (canned, handler and actor
//! routes), the request and response types routes see (and their typed
//! readings, `typed`), and the middleware around them (and the ready-made
//! ones: CORS, request ids). Static files, served ahead of them, are
//! `static_files`; the error bodies the server writes, `http::error_body`.

pub(crate) mod actor;
pub(crate) mod actor_response;
pub(crate) mod cors;
pub(crate) mod handler;
pub(crate) mod https_redirect;
pub(crate) mod middleware;
pub(crate) mod path_entry;
pub(crate) mod path_pattern;
pub(crate) mod reply;
pub(crate) mod request;
pub(crate) mod request_id;
pub(crate) mod responses;
pub(crate) mod spawns;
pub(crate) mod table;
pub(crate) mod typed;
pub(crate) mod typed_actor;

pub use table::Routes;
