//! What an actor route's request leaves for its connection to send: the
//! request's bytes, and where its path and query lie in them.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;

use crate::http::request::RequestHead;
use crate::routes::actor::RequestParts;
use crate::routes::middleware::IdValue;
use crate::routes::path_pattern::PathParams;

/// A request for an actor route, for the connection to send.
#[derive(Debug)]
pub(crate) struct Call {
    /// The route's index among the table's actor routes.
    pub(crate) actor: usize,
    pub(crate) parts: RequestParts,
}

/// The actor request for `head`: its bytes and where its path and query
/// are, its route's path parameters, the client's address and the id a
/// middleware gave it.
pub(super) fn call(
    actor: usize,
    head: &RequestHead,
    raw_head: &[u8],
    body: &[u8],
    params: Option<&Arc<PathParams>>,
    peer: Option<SocketAddr>,
    request_id: Option<&str>,
) -> Call {
    let mut id = IdValue::NONE;
    if let Some(request_id) = request_id {
        // It was set through the same check.
        id.set(request_id.as_bytes());
    }
    // The path and query lie in the head, but for a target that names no
    // path, whose empty path may lie anywhere.
    let offset = |part: &[u8]| {
        let start = (part.as_ptr() as usize).wrapping_sub(raw_head.as_ptr() as usize);
        match start.checked_add(part.len()) {
            Some(end) if end <= raw_head.len() => start..end,
            _ => 0..0,
        }
    };
    let mut data = BytesMut::with_capacity(raw_head.len() + body.len());
    data.extend_from_slice(raw_head);
    data.extend_from_slice(body);
    Call {
        actor,
        parts: RequestParts {
            method: head.method,
            data: data.freeze(),
            head_len: raw_head.len(),
            path: offset(head.path),
            query: head.query.map(offset),
            params: params.cloned(),
            peer,
            secure: false,
            request_id: id,
        },
    }
}
