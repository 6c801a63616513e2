//! How an actor's answer gets back to the connection that asked.
//!
//! An answer goes to a queue of the poller that owns the connection
//! ([`Replies`]), which hands it on as it hands on readiness: only a poller
//! wakes its connections, so nothing reaches a connection behind its back.
//! A request dropped unanswered (its actor is gone, stopped or panicked, or
//! never existed) answers 502 as it drops.
//!
//! But when a connection runs its request's actor itself (the actor was
//! free), the actor usually answers before `receive` returns. Sending that
//! answer through the queue would cost a lock, a second wake of the
//! connection and a second write; instead the connection says which call it
//! is running ([`expect`]), [`ReplyTo`] leaves a matching answer in this
//! thread's slot, and the connection takes it when the actor returns and
//! writes it with the responses around it. Any other answer (another call's,
//! or this one's given later or on another thread) goes through the queue.
//! This is the last-in, first-out slot a work-stealing runtime keeps for the
//! task just woken, applied to answers.

use std::cell::RefCell;
use std::fmt;
use std::mem;
use std::sync::{Arc, Mutex};

use crate::routes::actor_response::ActorResponse;

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

/// Where an [`ActorRequest`](crate::ActorRequest)'s answer goes.
#[derive(Debug)]
pub(crate) enum ReplyTo {
    /// A connection of this server: the reply queue of the poller that
    /// owns it, unless the thread running the call takes it first.
    Connection {
        replies: Arc<Replies>,
        key: usize,
        call: u64,
    },
    /// Somewhere else: a request from another server goes back through the
    /// cluster.
    Elsewhere(Box<dyn ReplySink>),
}

/// Takes an answer somewhere other than a connection of this server.
pub(crate) trait ReplySink: Send + fmt::Debug {
    fn send(self: Box<Self>, outcome: Outcome);
}

impl ReplyTo {
    pub(crate) fn send(self, outcome: Outcome) {
        let (replies, key, call) = match self {
            ReplyTo::Connection { replies, key, call } => (replies, key, call),
            ReplyTo::Elsewhere(sink) => return sink.send(outcome),
        };
        let queue = Arc::as_ptr(&replies) as usize;
        let Err(outcome) = offer(queue, call, outcome) else {
            return;
        };
        let delivery = Delivery { key, call, outcome };
        replies.deliver(delivery);
    }
}

/// The call this thread awaits an answer to, and that answer once given.
#[derive(Default)]
struct Slot {
    /// The reply queue's address and the call's number.
    awaited: Option<(usize, u64)>,
    answer: Option<Outcome>,
}

thread_local! {
    static SLOT: RefCell<Slot> = const {
        RefCell::new(Slot {
            awaited: None,
            answer: None,
        })
    };
}

/// The answer to `call` of the reply queue at `queue`, if it comes on this
/// thread before [`Expected::finish`]; dropping the guard unexpected it, so a
/// panic cannot leave the slot waiting.
pub(crate) fn expect(queue: usize, call: u64) -> Expected {
    SLOT.with(|slot| {
        let mut slot = slot.borrow_mut();
        slot.awaited = Some((queue, call));
        slot.answer = None;
    });
    Expected { done: false }
}

/// Keeps `outcome` when it answers the call this thread awaits; otherwise
/// gives it back for the reply queue.
pub(crate) fn offer(queue: usize, call: u64, outcome: Outcome) -> Result<(), Outcome> {
    let kept = SLOT.try_with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.awaited != Some((queue, call)) {
            return false;
        }
        slot.awaited = None;
        true
    });
    match kept {
        Ok(true) => {
            SLOT.with(|slot| slot.borrow_mut().answer = Some(outcome));
            Ok(())
        }
        _ => Err(outcome),
    }
}

/// A call this thread awaits the answer to.
#[derive(Debug)]
pub(crate) struct Expected {
    done: bool,
}

impl Expected {
    /// Stops waiting; the answer, if it came.
    pub(crate) fn finish(mut self) -> Option<Outcome> {
        self.done = true;
        SLOT.with(|slot| {
            let mut slot = slot.borrow_mut();
            slot.awaited = None;
            slot.answer.take()
        })
    }
}

impl Drop for Expected {
    fn drop(&mut self) {
        if !self.done {
            let _ = SLOT.try_with(|slot| {
                let mut slot = slot.borrow_mut();
                slot.awaited = None;
                slot.answer = None;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_awaited_answer() {
        let expected = expect(1, 7);
        assert!(offer(1, 6, Outcome::Gone).is_err(), "another call");
        assert!(offer(2, 7, Outcome::Gone).is_err(), "another queue");
        assert!(offer(1, 7, Outcome::Gone).is_ok());
        assert!(offer(1, 7, Outcome::Gone).is_err(), "answered once");
        assert!(matches!(expected.finish(), Some(Outcome::Gone)));
        assert!(offer(1, 7, Outcome::Gone).is_err(), "no longer awaited");
    }

    #[test]
    fn another_thread_answers_through_the_queue() {
        let expected = expect(1, 7);
        let offered = std::thread::spawn(|| offer(1, 7, Outcome::Gone).is_ok());
        assert!(!offered.join().unwrap());
        assert!(expected.finish().is_none());
    }

    #[test]
    fn a_dropped_guard_leaves_nothing_awaited() {
        drop(expect(1, 7));
        assert!(offer(1, 7, Outcome::Gone).is_err());
    }
}
