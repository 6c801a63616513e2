//! Actor routes: a request becomes an [`ActorRequest`] in an envelope to an
//! actor, which answers through the request with an [`ActorResponse`]; how
//! the answer gets back is `reply`.

use std::fmt;
use std::ops::Range;

use bytes::Bytes;

use crate::http::method::Method;
use crate::routes::actor_response::ActorResponse;
use crate::routes::reply::{Outcome, ReplyTo};
use crate::routes::request::Request;

/// A request routed to an actor: the message an actor route's actor
/// receives (`envelope.message.downcast::<ActorRequest>()`). Answer it with
/// [`ActorRequest::respond`], from any thread; dropped unanswered, it
/// answers 502 Bad Gateway. No answer within the route's timeout answers
/// 504 Gateway Timeout, and a later answer is dropped.
pub struct ActorRequest {
    method: Method,
    /// The head, then the body.
    data: Bytes,
    head_len: usize,
    path: Range<usize>,
    query: Option<Range<usize>>,
    reply_to: Option<ReplyTo>,
}

impl ActorRequest {
    /// `data` holds the head (`head_len` bytes), then the body; `path` and
    /// `query` index into the head.
    pub(crate) fn new(
        method: Method,
        data: Bytes,
        head_len: usize,
        path: Range<usize>,
        query: Option<Range<usize>>,
        reply_to: ReplyTo,
    ) -> ActorRequest {
        ActorRequest {
            method,
            data,
            head_len,
            path,
            query,
            reply_to: Some(reply_to),
        }
    }

    /// The request: method, path, query, header fields and body.
    pub fn request(&self) -> Request<'_> {
        let head = &self.data[..self.head_len];
        Request::new(
            self.method,
            &head[self.path.clone()],
            self.query.clone().map(|query| &head[query]),
            head,
            &self.data[self.head_len..],
        )
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
