//! Actor routes: a request becomes an [`ActorRequest`] in an envelope to an
//! actor, which answers through the request with an [`ActorResponse`]; how
//! the answer gets back is `reply`.

use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::http::method::Method;
use crate::routes::actor_response::ActorResponse;
use crate::routes::middleware::IdValue;
use crate::routes::path_pattern::PathParams;
use crate::routes::reply::{Outcome, ReplyTo};
use crate::routes::request::Request;

/// A request routed to an actor: the message an actor route's actor
/// receives (`envelope.message.downcast::<ActorRequest>()`). Answer it with
/// [`ActorRequest::respond`], from any thread; dropped unanswered, it
/// answers 502 Bad Gateway. No answer within the route's timeout answers
/// 504 Gateway Timeout, and a later answer is dropped.
pub struct ActorRequest {
    parts: RequestParts,
    reply_to: Option<ReplyTo>,
}

/// What an actor request owns of the request that made it.
#[derive(Debug, Clone)]
pub(crate) struct RequestParts {
    pub(crate) method: Method,
    /// The head, then the body.
    pub(crate) data: Bytes,
    pub(crate) head_len: usize,
    /// Where the path and the query lie in the head.
    pub(crate) path: Range<usize>,
    pub(crate) query: Option<Range<usize>>,
    /// The route's path parameters, if it has a pattern.
    pub(crate) params: Option<Arc<PathParams>>,
    pub(crate) peer: Option<SocketAddr>,
    /// It came over TLS.
    pub(crate) secure: bool,
    /// The id a middleware gave the request, if one did.
    pub(crate) request_id: IdValue,
}

impl RequestParts {
    /// The request these parts hold.
    pub(crate) fn request(&self) -> Request<'_> {
        let head = &self.data[..self.head_len];
        Request::new(
            self.method,
            &head[self.path.clone()],
            self.query.clone().map(|query| &head[query]),
            head,
            &self.data[self.head_len..],
        )
        .with_params(self.params.as_deref())
        .with_peer(self.peer)
        .with_secure(self.secure)
        .with_request_id(self.request_id.get())
    }
}

impl ActorRequest {
    pub(crate) fn new(parts: RequestParts, reply_to: ReplyTo) -> ActorRequest {
        ActorRequest {
            parts,
            reply_to: Some(reply_to),
        }
    }

    /// A request whose answer goes nowhere (its asker's was taken).
    pub(crate) fn unanswerable(parts: RequestParts) -> ActorRequest {
        ActorRequest {
            parts,
            reply_to: None,
        }
    }

    /// What it carries, and where its answer goes (taken: dropping the
    /// request then answers nothing).
    pub(crate) fn into_parts(mut self) -> (RequestParts, Option<ReplyTo>) {
        let reply_to = self.reply_to.take();
        (self.parts.clone(), reply_to)
    }

    /// What it carries.
    pub(crate) fn parts(&self) -> &RequestParts {
        &self.parts
    }

    /// The request: method, path, query, path parameters, header fields,
    /// body, the client's address and the id a middleware gave it.
    pub fn request(&self) -> Request<'_> {
        self.parts.request()
    }

    /// Sends the answer to the connection that asked.
    pub fn respond(mut self, response: ActorResponse) {
        if let Some(reply_to) = self.reply_to.take() {
            reply_to.send(Outcome::Answered(response));
        }
    }
}

impl Drop for ActorRequest {
    fn drop(&mut self) {
        if let Some(reply_to) = self.reply_to.take() {
            reply_to.send(Outcome::Gone);
        }
    }
}

impl fmt::Debug for ActorRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActorRequest")
            .field("request", &self.request())
            .finish_non_exhaustive()
    }
}
