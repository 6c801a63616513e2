//! HTTP/1.1 as bytes: request heads and their fields, the normal form of a
//! path, chunked bodies, responses and statuses, the bodies of the errors
//! the server writes, dates, and the responses an upstream sends. No
//! sockets and no routes here.

pub(crate) mod accept_encoding;
pub(crate) mod chunked;
pub(crate) mod date;
pub(crate) mod error_body;
pub(crate) mod framing;
pub(crate) mod head;
pub(crate) mod headers;
pub(crate) mod http_date;
pub(crate) mod method;
pub(crate) mod percent;
pub(crate) mod request;
pub(crate) mod response;
pub(crate) mod response_fields;
pub(crate) mod response_parser;
pub(crate) mod status;
pub(crate) mod target;
pub(crate) mod version;
