//! Actor routes: a request becomes an [`ActorRequest`] in an envelope to an
//! uppercut actor, which answers through the request with an
//! [`ActorResponse`]. The answer goes to a queue of the poller that owns the
//! connection, which hands it on as it hands on readiness: only a poller
//! wakes its connections, so nothing reaches a connection behind its back.
//! A request dropped unanswered (its actor is gone, stopped or panicked, or
//! never existed) answers 502 as it drops.

use std::fmt;
use std::mem;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};

use crate::http::method::Method;
use crate::http::response_fields::{check_header, check_status, put_header, ResponseError};
use crate::routes::request::Request;

/// An actor's answer to an [`ActorRequest`]: a status, header fields and a
/// body. The server adds `Server`, `Content-Length`, `Date` and
/// `Connection`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorResponse {
    pub(crate) status: u16,
    pub(crate) content_type: Option<&'static str>,
    /// Checked header lines, each ending CRLF.
    pub(crate) headers: BytesMut,
    pub(crate) body: Bytes,
}

impl ActorResponse {
    /// A response with this status (200 to 599), no header fields and no
    /// body.
    pub fn new(status: u16) -> Result<ActorResponse, ResponseError> {
        check_status(status)?;
        Ok(ActorResponse {
            status,
            content_type: None,
            headers: BytesMut::new(),
            body: Bytes::new(),
        })
    }

    /// A 200 response with a `text/plain; charset=utf-8` body.
    pub fn text(body: impl Into<Bytes>) -> ActorResponse {
        ActorResponse::typed(200, "text/plain; charset=utf-8", body.into())
    }

    /// A 200 response with an `application/json` body.
    pub fn json(body: impl Into<Bytes>) -> ActorResponse {
        ActorResponse::typed(200, "application/json", body.into())
    }

    /// A response the server builds itself, whose status is known to be a
    /// final response's.
    pub(crate) fn typed(status: u16, content_type: &'static str, body: Bytes) -> ActorResponse {
        ActorResponse {
            status,
            content_type: Some(content_type),
            headers: BytesMut::new(),
            body,
        }
    }

    /// The same response with another status (200 to 599).
    pub fn with_status(mut self, status: u16) -> Result<ActorResponse, ResponseError> {
        check_status(status)?;
        self.status = status;
        Ok(self)
    }

    /// The same response with one more header field; one the server writes
    /// itself, or a malformed one, is refused.
    pub fn with_header(mut self, name: &str, value: &str) -> Result<ActorResponse, ResponseError> {
        check_header(name, value)?;
        put_header(&mut self.headers, name, value);
        Ok(self)
    }

    /// The same response with this body.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> ActorResponse {
        self.body = body.into();
        self
    }
}

/// How an actor route's request ended, as its connection learns it.
#[derive(Debug)]
pub(crate) enum Outcome {
    Answered(ActorResponse),
    /// Dropped unanswered: 502.
    Gone,
}

/// One outcome on its way to a connection: the poller's slab key of the
/// connection, and the call it answers (keys are reused, calls are not).
#[derive(Debug)]
pub(crate) struct Delivery {
    pub(crate) key: usize,
    pub(crate) call: u64,
    pub(crate) outcome: Outcome,
}

/// A poller's queue of outcomes, filled from any thread. Whoever fills it
/// then calls `notify`, which wakes the poller if it is parked (see
/// `runtime::wakeup::Parking`: the lock orders the push before the check).
pub(crate) struct Replies {
    queue: Mutex<Vec<Delivery>>,
    notify: Box<dyn Fn() + Send + Sync>,
}

impl Replies {
    pub(crate) fn new(notify: Box<dyn Fn() + Send + Sync>) -> Replies {
        Replies {
            queue: Mutex::new(Vec::new()),
            notify,
        }
    }

    fn deliver(&self, delivery: Delivery) {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(delivery);
        (self.notify)();
    }

    /// Swaps what has arrived into `taken` (kept by the poller, so taking
    /// allocates nothing).
    pub(crate) fn take(&self, taken: &mut Vec<Delivery>) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        mem::swap(&mut *queue, taken);
    }

    pub(crate) fn is_pending(&self) -> bool {
        !self
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }
}

impl fmt::Debug for Replies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replies").finish_non_exhaustive()
    }
}

/// Where an [`ActorRequest`]'s answer goes.
#[derive(Debug)]
pub(crate) struct ReplyTo {
    pub(crate) replies: Arc<Replies>,
    pub(crate) key: usize,
    pub(crate) call: u64,
}

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

impl ReplyTo {
    fn send(self, outcome: Outcome) {
        let delivery = Delivery {
            key: self.key,
            call: self.call,
            outcome,
        };
        self.replies.deliver(delivery);
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
