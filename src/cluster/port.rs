//! What other threads leave for one poller's NATS link: requests for
//! actors on other servers, answers to other servers' requests, bytes to
//! send, topics to subscribe to. The poller takes it in order each round,
//! as much as the link's output has room for, and writes it to NATS in
//! that order, so what one sender leaves here goes out in the order it left
//! it.
//!
//! Bounded in bytes (`--nats-buffer`), with flow control rather than loss
//! for bytes: a sender of bytes (a WebSocket connection, an owned actor,
//! `Server::send`) that finds the port past its bound still has its
//! message taken, and is told to wait (`mail::press`): the connection stops
//! reading its socket, the actor pauses, the program's thread blocks, until
//! the port has drained to half its bound ([`LinkPort::on_relief`]). So
//! the port holds at most its bound plus what each waiting sender sent
//! before it stopped. A request for an actor is refused at the bound
//! instead (its client gets a 503 at once), and an answer at twice it.
//! While the link is not connected every send is refused at once: nothing
//! waits for a connection that may not come back, and the senders waiting
//! are let go.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use crate::actors::remote::Payload;
use crate::mail::{Pressure, Relief, SendError};
use crate::observe::cluster_metrics::ClusterMetrics;
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
        /// Past `timeout` the link answers it 504 itself, rather than
        /// leave it to its asker's own timeout (a request forwarded to a
        /// placed name's holder, which may be paused).
        bounded: bool,
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
    /// A request to JetStream (a key-value read or write), whose answer,
    /// or why there is none, goes to `done`.
    Js(JsRequest),
}

/// A JetStream request and where its answer goes.
pub(crate) struct JsRequest {
    pub(crate) subject: String,
    /// A header block, or empty.
    pub(crate) headers: Bytes,
    pub(crate) payload: Bytes,
    /// How long its answer is awaited, over every try.
    pub(crate) timeout: Duration,
    /// Whether it is sent again, and when.
    pub(crate) retry: JsRetry,
    pub(crate) done: JsDone,
}

/// When a JetStream request is sent again within its timeout.
///
/// A stream that was just made, or whose leader just went away, has no
/// one behind it for a moment: a publish to its subjects is answered "no
/// responders", and an API request about it goes unanswered until a
/// leader is elected (about a second). Neither is the store failing.
/// (An API request answered "no responders" is: JetStream is not
/// enabled.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsRetry {
    /// Never again: an API request that, done twice, could undo what
    /// someone did in between (a purge).
    Never,
    /// Again after "no responders", never after silence (it may have
    /// been done): a publish to a stream (a write).
    Unheard,
    /// Again after a try's silence: an API request that does the same
    /// however often it is done (a read, a creation with the same
    /// configuration).
    Idempotent,
}

/// Where a JetStream answer goes: the message, or why none came.
pub(crate) type JsDone = Box<dyn FnOnce(Result<crate::nats::proto::Msg, JsFailure>) + Send>;

/// Why a JetStream request has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JsFailure {
    /// It could not be sent (NATS down, too large, too much waiting).
    Refused(SendError),
    /// Nobody answers its subject (JetStream is not enabled, or the
    /// stream has had no leader) for as long as it was tried.
    NoResponders,
    /// No answer within its timeout, or the connection it left on was lost
    /// (it may have been done).
    Lost,
}

impl fmt::Debug for JsRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsRequest")
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
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
                Outbound::Js(request) => request.headers.len() + request.payload.len(),
            }
    }
}

impl Outbound {
    /// Tells whoever waits for `self` that it was refused for `error`
    /// (a request's asker gets its 503 or 413 elsewhere).
    pub(crate) fn refused(self, error: SendError) -> Option<Outbound> {
        match self {
            Outbound::Js(request) => {
                (request.done)(Err(JsFailure::Refused(error)));
                None
            }
            other => Some(other),
        }
    }
}

/// What a port would not take, and why.
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) item: Box<Outbound>,
    pub(crate) error: SendError,
}

/// How a port takes an item past its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Bytes from a sender that can wait: taken whatever waits, the sender
    /// told to wait when past the bound.
    Flow,
    /// A request for an actor: refused past the bound (503 at once).
    Bounded,
    /// An answer to another server's request: refused past twice the
    /// bound (the asker times out).
    Answer,
}

/// What the port did with an item it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Taken, within the bound.
    Within,
    /// Taken past the bound: the sender waits for relief.
    Past,
}

/// One poller's link's inbox.
pub(crate) struct LinkPort {
    queue: Mutex<VecDeque<Outbound>>,
    /// Bytes waiting here (not yet taken by the link).
    waiting: AtomicUsize,
    limit: usize,
    /// The link is connected and subscribed.
    up: AtomicBool,
    /// The NATS server's `max_payload`, once connected.
    max_payload: AtomicUsize,
    /// Senders waiting for the port to drain to half its bound.
    waiters: Mutex<Vec<Relief>>,
    /// Where the bytes waiting and the senders waiting are counted, over
    /// every port.
    metrics: Arc<ClusterMetrics>,
    /// Wakes the poller if it is parked in `poll`.
    wake: Box<dyn Fn() + Send + Sync>,
}

impl LinkPort {
    pub(crate) fn new(
        limit: usize,
        metrics: Arc<ClusterMetrics>,
        wake: Box<dyn Fn() + Send + Sync>,
    ) -> LinkPort {
        LinkPort {
            queue: Mutex::new(VecDeque::new()),
            waiting: AtomicUsize::new(0),
            limit,
            up: AtomicBool::new(false),
            max_payload: AtomicUsize::new(crate::nats::info::DEFAULT_MAX_PAYLOAD),
            waiters: Mutex::new(Vec::new()),
            metrics,
            wake,
        }
    }

    /// Leaves `item` for the link, as `admit` says; gives it back, with
    /// why, when the link is down, the item is too large, or (but for
    /// `Admit::Flow`) the bound is reached. Subscriptions always go in.
    pub(crate) fn push(&self, item: Outbound, admit: Admit) -> Result<Taken, Refused> {
        let mut taken = Taken::Within;
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
            let bound = match admit {
                Admit::Flow => usize::MAX,
                Admit::Bounded => self.limit,
                Admit::Answer => self.limit.saturating_mul(2),
            };
            let before = self.waiting.fetch_add(size, Ordering::AcqRel);
            if before + size > bound {
                self.waiting.fetch_sub(size, Ordering::AcqRel);
                return Err(refused(item, SendError::BufferFull));
            }
            if before + size > self.limit {
                taken = Taken::Past;
            }
            self.metrics
                .waiting_bytes
                .fetch_add(size as u64, Ordering::Relaxed);
        }
        let was_empty = {
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.push_back(item);
            queue.len() == 1
        };
        if was_empty {
            (self.wake)();
        }
        Ok(taken)
    }

    /// Moves what waits into `into` (kept by the link, so taking
    /// allocates nothing once warm), in order, up to about `room` bytes:
    /// at least one item when any waits and `room` is not zero. Counts what
    /// it took out, and lets the waiting senders go once half the bound or
    /// less is left.
    pub(crate) fn take(&self, into: &mut Vec<Outbound>, room: usize) {
        let mut took = 0;
        {
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            while let Some(item) = queue.front() {
                let size = counted(item);
                if room == 0 || (took > 0 && took + size > room) {
                    break;
                }
                took += size;
                into.extend(queue.pop_front());
            }
        }
        if took > 0 {
            self.done(took);
        }
    }

    /// Something waits.
    pub(crate) fn is_pending(&self) -> bool {
        !self
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// `bytes` of what was counted in left the port.
    fn done(&self, bytes: usize) {
        // Never below zero: what is dropped unsent is counted out once.
        let _ = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |waiting| {
                Some(waiting.saturating_sub(bytes))
            });
        self.metrics
            .waiting_bytes
            .fetch_sub(bytes as u64, Ordering::Relaxed);
        self.relieve(false);
    }

    /// Lets the waiting senders go, if the port has drained to half its
    /// bound (or `always`: the link went down).
    fn relieve(&self, always: bool) {
        let relieved = {
            let mut waiters = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
            if waiters.is_empty() || !(always || self.is_relieved()) {
                return;
            }
            let relieved = std::mem::take(&mut *waiters);
            self.metrics
                .paused_senders
                .fetch_sub(relieved.len() as u64, Ordering::Relaxed);
            relieved
        };
        // Outside the lock: a relief wakes a poller, or a thread.
        for relief in relieved {
            relief();
        }
    }

    /// Half the bound or less waits, or the link is down (what waits will
    /// be refused, not sent).
    fn is_relieved(&self) -> bool {
        self.waiting.load(Ordering::Acquire) <= self.limit / 2 || !self.is_up()
    }

    /// Bytes waiting here.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Wakes the link's poller if it is parked (the node's name was
    /// found taken: every link stands down).
    pub(crate) fn wake(&self) {
        (self.wake)();
    }

    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    pub(crate) fn set_up(&self, up: bool, max_payload: usize) {
        self.max_payload.store(max_payload, Ordering::Release);
        self.up.store(up, Ordering::Release);
        if !up {
            self.relieve(true);
        }
    }

    pub(crate) fn max_payload(&self) -> usize {
        self.max_payload.load(Ordering::Acquire)
    }
}

/// The bytes `item` was counted for in `waiting`.
fn counted(item: &Outbound) -> usize {
    match item {
        Outbound::Topic { .. } => 0,
        item => item.size(),
    }
}

impl Pressure for LinkPort {
    fn on_relief(&self, relief: Relief) {
        {
            let mut waiters = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
            // Checked under the lock `relieve` takes after counting out:
            // either it sees this waiter, or this sees what it counted.
            if !self.is_relieved() {
                self.metrics.paused_senders.fetch_add(1, Ordering::Relaxed);
                return waiters.push(relief);
            }
        }
        relief();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `len` bytes for a topic, counted as `len + 128`.
    fn bytes(len: usize) -> Outbound {
        Outbound::Bytes {
            subject: "upc.t.room".into(),
            from: String::new(),
            payload: Payload::Vec(Bytes::from(vec![b'x'; len])),
        }
    }

    fn port(limit: usize) -> Arc<LinkPort> {
        let metrics = Arc::new(ClusterMetrics::new(1));
        let port = Arc::new(LinkPort::new(limit, metrics, Box::new(|| {})));
        port.set_up(true, 1 << 20);
        port
    }

    /// A relief that counts itself.
    fn counted(reliefs: &Arc<AtomicUsize>) -> Relief {
        let reliefs = Arc::clone(reliefs);
        Box::new(move || {
            reliefs.fetch_add(1, Ordering::SeqCst);
        })
    }

    #[test]
    fn bytes_past_the_bound_are_taken_and_their_sender_told_to_wait() {
        let port = port(1000);
        assert_eq!(port.push(bytes(800), Admit::Flow).unwrap(), Taken::Within);
        assert_eq!(port.waiting(), 928);
        assert_eq!(port.push(bytes(72), Admit::Flow).unwrap(), Taken::Past);
        // However far past: bytes are never refused for the bound.
        assert_eq!(port.push(bytes(5000), Admit::Flow).unwrap(), Taken::Past);
        assert_eq!(port.waiting(), 928 + 200 + 5128);
    }

    #[test]
    fn a_request_is_refused_at_the_bound_and_an_answer_at_twice_it() {
        let port = port(1000);
        port.push(bytes(872), Admit::Flow).unwrap();
        // 1000 exactly is within.
        let request = port.push(bytes(0), Admit::Bounded);
        assert_eq!(request.unwrap_err().error, SendError::BufferFull);
        let answer = Outbound::Answer {
            reply: Bytes::from_static(b"r"),
            outcome: Outcome::Gone,
        };
        assert_eq!(port.push(answer, Admit::Answer).unwrap(), Taken::Past);
        let answer = Outbound::Answer {
            reply: Bytes::from_static(b"r"),
            outcome: Outcome::Gone,
        };
        assert_eq!(port.push(answer, Admit::Answer).unwrap(), Taken::Past);
        assert_eq!(port.waiting(), 1256);
        port.push(bytes(616), Admit::Flow).unwrap();
        assert_eq!(port.waiting(), 2000);
        let answer = Outbound::Answer {
            reply: Bytes::from_static(b"r"),
            outcome: Outcome::Gone,
        };
        let refused = port.push(answer, Admit::Answer).unwrap_err();
        assert_eq!(refused.error, SendError::BufferFull);
        assert_eq!(port.waiting(), 2000, "a refusal counts nothing");
    }

    #[test]
    fn the_bound_itself_is_within() {
        let port = port(1000);
        assert_eq!(
            port.push(bytes(872), Admit::Bounded).unwrap(),
            Taken::Within
        );
        assert_eq!(port.waiting(), 1000);
        assert_eq!(port.push(bytes(0), Admit::Flow).unwrap(), Taken::Past);
    }

    #[test]
    fn the_link_takes_in_order_as_far_as_it_has_room() {
        let port = port(1 << 20);
        for len in [100, 200, 300] {
            port.push(bytes(len), Admit::Flow).unwrap();
        }
        let mut taken = Vec::new();
        port.take(&mut taken, 0);
        assert!(taken.is_empty(), "no room, nothing taken");
        // Room for less than the first: it is taken all the same.
        port.take(&mut taken, 10);
        assert_eq!(taken.len(), 1);
        assert_eq!(port.waiting(), 328 + 428);
        // Room for the next but not the one after.
        port.take(&mut taken, 500);
        assert_eq!(taken.len(), 2);
        port.take(&mut taken, usize::MAX);
        let lens: Vec<usize> = taken.iter().map(Outbound::size).collect();
        assert_eq!(lens, [228, 328, 428], "in the order left");
        assert_eq!(port.waiting(), 0);
        assert!(!port.is_pending());
    }

    #[test]
    fn waiting_senders_go_once_half_the_bound_is_left() {
        let port = port(1000);
        let reliefs = Arc::new(AtomicUsize::new(0));
        port.push(bytes(472), Admit::Flow).unwrap();
        port.push(bytes(472), Admit::Flow).unwrap();
        port.push(bytes(472), Admit::Flow).unwrap();
        port.on_relief(counted(&reliefs));
        port.on_relief(counted(&reliefs));
        let mut taken = Vec::new();
        port.take(&mut taken, 1);
        assert_eq!(port.waiting(), 1200);
        assert_eq!(reliefs.load(Ordering::SeqCst), 0, "still past the bound");
        port.take(&mut taken, 1);
        assert_eq!(port.waiting(), 600);
        assert_eq!(reliefs.load(Ordering::SeqCst), 0, "past half of it");
        port.push(bytes(372), Admit::Flow).unwrap();
        port.take(&mut taken, 1);
        // 500: exactly half.
        assert_eq!(port.waiting(), 500);
        assert_eq!(reliefs.load(Ordering::SeqCst), 2, "each once");
        port.take(&mut taken, usize::MAX);
        assert_eq!(reliefs.load(Ordering::SeqCst), 2, "and only once");
    }

    #[test]
    fn a_sender_that_asks_after_the_drain_goes_at_once() {
        let port = port(1000);
        let reliefs = Arc::new(AtomicUsize::new(0));
        port.push(bytes(2000), Admit::Flow).unwrap();
        let mut taken = Vec::new();
        port.take(&mut taken, usize::MAX);
        port.on_relief(counted(&reliefs));
        assert_eq!(reliefs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_link_that_goes_down_lets_every_sender_go_and_refuses_the_rest() {
        let port = port(1000);
        let reliefs = Arc::new(AtomicUsize::new(0));
        port.push(bytes(2000), Admit::Flow).unwrap();
        port.on_relief(counted(&reliefs));
        port.set_up(false, 1 << 20);
        assert_eq!(reliefs.load(Ordering::SeqCst), 1);
        let refused = port.push(bytes(1), Admit::Flow).unwrap_err();
        assert_eq!(refused.error, SendError::Unreachable);
        // Asked while down: at once.
        port.on_relief(counted(&reliefs));
        assert_eq!(reliefs.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn too_large_is_refused_whatever_the_room() {
        let port = port(1 << 30);
        port.set_up(true, 4096);
        // 4096 + 1024 of slack for the headers, with the 128 counted.
        assert!(port.push(bytes(4096 + 1024 - 128), Admit::Flow).is_ok());
        let refused = port
            .push(bytes(4096 + 1024 - 127), Admit::Flow)
            .unwrap_err();
        assert_eq!(
            refused.error,
            SendError::TooLarge {
                len: 4096 + 1024 + 1,
                max: 4096
            }
        );
    }
}
