//! What other threads leave for one poller's NATS link: requests for
//! actors on other servers, answers to other servers' requests, bytes to
//! send, topics to subscribe to. The poller takes all of it each round
//! and writes it to NATS in that order, so what one sender leaves here
//! goes out in the order it left it.
//!
//! Bounded in bytes: past the bound a send is refused at once (and
//! counted), rather than the server growing without end while NATS is
//! slow. While the link is not connected, sends are refused at once too:
//! nothing waits for a connection that may not come back.

use std::fmt;
use std::mem;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;

use crate::actors::remote::Payload;
use crate::mail::SendError;
use crate::routes::actor::ActorRequest;
use crate::routes::reply::Outcome;

/// One thing for the link to send.
#[derive(Debug)]
pub(crate) enum Outbound {
    /// A request for the actor at `subject`; its answer goes back through
    /// the request.
    Request {
        subject: String,
        request: ActorRequest,
        /// How long its answer is awaited (its asker's own timeout).
        timeout: Duration,
    },
    /// The answer to another server's request, to its reply subject.
    Answer { reply: Bytes, outcome: Outcome },
    /// Bytes for an actor or a topic, from `from` (`address@node`).
    Bytes {
        subject: String,
        from: String,
        payload: Payload,
    },
    /// This server gained its first subscriber of a topic, or lost its
    /// last.
    Topic { topic: String, subscribed: bool },
}

impl Outbound {
    /// About what it takes on the wire, for the bound.
    pub(crate) fn size(&self) -> usize {
        const OVERHEAD: usize = 128;
        OVERHEAD
            + match self {
                Outbound::Request { request, .. } => request.parts().data.len(),
                Outbound::Answer { outcome, .. } => match outcome {
                    Outcome::Answered(response) => response.body.len() + response.headers.len(),
                    Outcome::Gone => 0,
                },
                Outbound::Bytes { payload, .. } => payload.bytes().len(),
                Outbound::Topic { .. } => 0,
            }
    }
}

/// What a port would not take, and why.
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) item: Box<Outbound>,
    pub(crate) error: SendError,
}

/// One poller's link's inbox.
pub(crate) struct LinkPort {
    queue: Mutex<Vec<Outbound>>,
    /// Bytes waiting here and in the link's output.
    waiting: AtomicUsize,
    limit: usize,
    /// The link is connected and subscribed.
    up: AtomicBool,
    /// The NATS server's `max_payload`, once connected.
    max_payload: AtomicUsize,
    /// Wakes the poller if it is parked in `poll`.
    wake: Box<dyn Fn() + Send + Sync>,
}

impl LinkPort {
    pub(crate) fn new(limit: usize, wake: Box<dyn Fn() + Send + Sync>) -> LinkPort {
        LinkPort {
            queue: Mutex::new(Vec::new()),
            waiting: AtomicUsize::new(0),
            limit,
            up: AtomicBool::new(false),
            max_payload: AtomicUsize::new(crate::nats::info::DEFAULT_MAX_PAYLOAD),
            wake,
        }
    }

    /// Leaves `item` for the link; gives it back, with why, when the link
    /// is down or the bound is reached. Subscriptions always go in.
    pub(crate) fn push(&self, item: Outbound) -> Result<(), Refused> {
        if !matches!(item, Outbound::Topic { .. }) {
            let refused = |item, error| Refused {
                item: Box::new(item),
                error,
            };
            if !self.is_up() {
                return Err(refused(item, SendError::Unreachable));
            }
            let size = item.size();
            if size > self.max_payload() + 1024 {
                let max = self.max_payload();
                return Err(refused(item, SendError::TooLarge { len: size, max }));
            }
            if self.waiting.fetch_add(size, Ordering::AcqRel) + size > self.limit {
                self.waiting.fetch_sub(size, Ordering::AcqRel);
                return Err(refused(item, SendError::BufferFull));
            }
        }
        let was_empty = {
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.push(item);
            queue.len() == 1
        };
        if was_empty {
            (self.wake)();
        }
        Ok(())
    }

    /// Takes what waits into `into` (kept by the link, so taking allocates
    /// nothing once warm).
    pub(crate) fn take(&self, into: &mut Vec<Outbound>) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        mem::swap(&mut *queue, into);
    }

    /// Something waits.
    pub(crate) fn is_pending(&self) -> bool {
        !self
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// `bytes` of what was counted in went out (or were dropped).
    pub(crate) fn done(&self, bytes: usize) {
        // Never below zero: what is dropped unsent is counted out once.
        let _ = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |waiting| {
                Some(waiting.saturating_sub(bytes))
            });
    }

    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    pub(crate) fn set_up(&self, up: bool, max_payload: usize) {
        self.max_payload.store(max_payload, Ordering::Release);
        self.up.store(up, Ordering::Release);
    }

    pub(crate) fn max_payload(&self) -> usize {
        self.max_payload.load(Ordering::Acquire)
    }
}

impl fmt::Debug for LinkPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkPort")
            .field("up", &self.is_up())
            .field("waiting", &self.waiting.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}
