//! The connection actor: one accepted TCP connection, driven by readiness
//! envelopes from its poller, whether delivered directly (`local` dispatch) or
//! through the uppercut scheduler (`system` dispatch); the code is the same.
//!
//! It owns its socket, its request stream (whose read buffer keeps bytes
//! between reads) and a write buffer that keeps what the socket would not
//! take; both buffers are empty for an idle connection. Reads and the batch of
//! responses they produce go through a per-thread scratch pair instead, so
//! 10,000 idle keep-alive connections hold no buffer memory and a request
//! served in one read allocates nothing.

mod socket_io;

use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use log::debug;
use mio::net::TcpStream;
use mio::Token;
use uppercut::api::{AnyActor, AnySender, Envelope};

use crate::config::Dispatch;
use crate::net::socket::write_until_blocked;
use crate::observe::access_line::AccessRecorder;
use crate::observe::metrics::{PollerMetrics, TimeoutKind};
use crate::request_stream::{Call, CallEnd, RequestStream, OUTPUT_HIGH_WATER};
use crate::routes::actor::{ActorRequest, ReplyTo};
use crate::runtime::lifecycle::Phase;
use crate::runtime::shared::Shared;
use crate::runtime::timeouts::{Activity, ConnectionTimer, Expiry};
use crate::runtime::wakeup::{Closed, Mailbox, Wake, EXPIRE, HANGUP, READY, REPLY};

/// Bytes read per `read` call.
const READ_CHUNK: usize = 16 * 1024;
/// Unread input discarded before closing, so the close is a FIN rather than a
/// reset that could destroy the last response before the client reads it.
const MAX_DISCARD_ON_CLOSE: usize = 64 * 1024;

struct Scratch {
    input: Box<[u8]>,
    output: BytesMut,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch {
        input: vec![0; READ_CHUNK].into_boxed_slice(),
        output: BytesMut::with_capacity(2 * OUTPUT_HIGH_WATER),
    });
}

/// Whether the connection stays open after a readiness envelope.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Open,
    Close,
}

pub(crate) struct Connection {
    socket: TcpStream,
    token: Token,
    shared: Arc<Shared>,
    stream: RequestStream,
    output: BytesMut,
    /// WRITABLE is registered: output is backed up.
    writable_interest: bool,
    /// Some output was written in the current round of work.
    wrote: bool,
    timer: ConnectionTimer,
    /// The actor call this connection waits for.
    call: Option<AwaitedCall>,
    /// The peer closed its side or the socket failed: no further readiness
    /// edge will come, so reads go on to the end.
    hung_up: bool,
    /// What the poller has posted for this connection.
    mailbox: Arc<Mailbox>,
}

impl Connection {
    /// A connection for a socket already registered READABLE under `token`.
    pub(crate) fn new(socket: TcpStream, token: Token, shared: Arc<Shared>) -> Connection {
        let timer = ConnectionTimer::new(shared.clock.now_ms(), &shared.timeouts);
        let mut stream = RequestStream::default();
        if let Some(log) = &shared.access_log {
            let peer = socket.peer_addr().ok().map(|peer| peer.ip());
            stream.log_to(AccessRecorder::new(log, peer));
        }
        if let Some(metrics) = &shared.metrics {
            stream.count_to(Arc::clone(metrics));
        }
        Connection {
            socket,
            token,
            shared,
            stream,
            output: BytesMut::new(),
            writable_interest: false,
            wrote: false,
            timer,
            call: None,
            hung_up: false,
            mailbox: Arc::default(),
        }
    }

    /// Where the poller posts what happened to this connection.
    pub(crate) fn mailbox(&self) -> &Arc<Mailbox> {
        &self.mailbox
    }

    /// The deadline a `system` poller's sweep reads.
    pub(crate) fn deadline(&self) -> Arc<AtomicU64> {
        self.timer.deadline()
    }

    /// A `local` poller's sweep: the published deadline has passed.
    pub(crate) fn is_past_deadline(&self, now_ms: u64) -> bool {
        self.timer.expired(now_ms).is_some()
    }

    /// The call ended (answered, or not in time): write its response, then
    /// carry on.
    fn complete_call(&mut self, end: CallEnd, scratch: &mut Scratch) -> io::Result<Flow> {
        self.end_call();
        let date = self.shared.date.current();
        let routes = &self.shared.routes;
        self.stream
            .complete_call(end, routes, &date, &mut scratch.output);
        self.write_batch(&mut scratch.output)?;
        self.drive(scratch)
    }

    /// Sends the request an actor route made to its actor, with where the
    /// answer goes: the poller's reply queue.
    fn send_call(&mut self, call: Call, sender: &mut dyn AnySender) {
        let shared = &self.shared;
        let id = shared.call_ids.fetch_add(1, Ordering::Relaxed) + 1;
        let route = shared.routes.actor_at(call.actor);
        // The poller's own upstream pool answers from within the poller's
        // loop, woken by its sockets; only an actor elsewhere needs the
        // poller to keep looking (see `wakeup::Calls`).
        let away = route.address.is_some();
        self.call = Some(AwaitedCall {
            id,
            timeout: route.timeout,
            away,
        });
        self.mailbox.await_call(id);
        if away {
            shared.calls.started();
        }
        let reply_to = ReplyTo {
            replies: Arc::clone(&shared.replies),
            key: self.token.0,
            call: id,
        };
        let (data, head_len) = (call.data, call.head_len);
        let request =
            ActorRequest::new(call.method, data, head_len, call.path, call.query, reply_to);
        match &route.address {
            Some(address) => sender.send(address, Envelope::of(request)),
            // The poller's own upstream pool.
            None => to_poller(shared, Envelope::of(request), sender),
        }
    }

    /// Ends the call, however it ended: answered, timed out, or the
    /// connection closing. An answer that still comes is dropped.
    fn end_call(&mut self) {
        if let Some(call) = self.call.take() {
            self.mailbox.abandon(call.id);
            if call.away {
                self.shared.calls.ended();
            }
        }
    }

    /// The deadline passed when the poller swept: if it still stands, close,
    /// answering 408 to a request that did not arrive in time.
    fn expire(&mut self, scratch: &mut Scratch) -> io::Result<Flow> {
        match self.timer.expired(self.shared.clock.now_ms()) {
            None => Ok(Flow::Open),
            Some(Expiry::Request) => {
                self.count_timeout(TimeoutKind::Header);
                let date = self.shared.date.current();
                self.stream
                    .time_out(&self.shared.routes, &date, &mut scratch.output);
                // One try: a client this slow gets no more of our time.
                let written = write_until_blocked(&mut self.socket, &scratch.output)?;
                self.count(|m| &m.bytes_sent, written);
                self.stream.sent(written);
                Ok(Flow::Close)
            }
            Some(Expiry::Idle) => {
                self.count_timeout(TimeoutKind::Idle);
                Ok(Flow::Close)
            }
            Some(Expiry::Write) => {
                self.count_timeout(TimeoutKind::Write);
                Ok(Flow::Close)
            }
            Some(Expiry::Reply) => self.complete_call(CallEnd::TimedOut, scratch),
        }
    }

    /// Handles everything the poller posted: an actor's answer first (it
    /// may release pipelined requests), then readiness, then the deadline,
    /// which the work before it may have moved; then sends the call the
    /// last request made, if it made one.
    fn handle(&mut self, posted: u8, sender: &mut dyn AnySender) -> io::Result<Flow> {
        self.hung_up |= posted & HANGUP != 0;
        self.wrote = false;
        self.note_phase();
        SCRATCH.with(|scratch| {
            let scratch = &mut *scratch.borrow_mut();
            // The scratch is shared by every connection on this thread: never
            // trust what a previous user (or a panic) left in it.
            scratch.output.clear();
            let mut flow = Ok(Flow::Open);
            if posted & REPLY != 0 {
                if let Some(outcome) = self.mailbox.take_reply() {
                    flow = self.complete_call(CallEnd::Outcome(outcome), scratch);
                }
            }
            if matches!(flow, Ok(Flow::Open)) && posted & (READY | HANGUP) != 0 {
                flow = self.drive(scratch);
            }
            if matches!(flow, Ok(Flow::Open)) && posted & EXPIRE != 0 {
                // Judge the deadline by what the connection is doing now, but
                // only move it for work done: a silent client stays in its
                // first request's stage and gets its 408.
                if posted != EXPIRE {
                    self.note_activity();
                }
                flow = self.expire(scratch);
            }
            if matches!(flow, Ok(Flow::Open)) {
                if let Some(call) = self.stream.take_call() {
                    self.send_call(call, sender);
                }
                self.note_activity();
            } else {
                self.discard_unread(scratch);
            }
            flow
        })
    }

    /// Once the server drains, a request that was still arriving, or
    /// waiting for its actor, with nothing sent behind it, gets the last
    /// response. (A connection between requests closes at once, and one
    /// with requests pipelined is answered to the end of them: see
    /// `wait_for_input`.)
    pub(super) fn note_phase(&mut self) {
        if self.shared.server.phase() != Phase::Running && self.stream.is_in_flight_alone() {
            self.stream.close_after_response();
        }
    }

    /// Moves the deadline to what the connection is doing now.
    fn note_activity(&mut self) {
        let activity = Activity {
            mid_request: self.stream.is_mid_request(),
            responses: self.stream.responses(),
            backed_up: !self.output.is_empty(),
            wrote: self.wrote,
            awaiting: self.call.map(|call| call.timeout),
        };
        let now = self.shared.clock.now_ms();
        self.timer.update(now, activity, &self.shared.timeouts);
    }

    /// `system` dispatch: this wake (and `wakes - 1` more that will never
    /// be handled) is done.
    fn handled(&self, wakes: usize) {
        if self.shared.dispatch == Dispatch::System {
            self.shared.outstanding.done(wakes);
        }
    }

    /// Ends the connection. In `system` dispatch its token may be reused
    /// before uppercut drops the actor (and the socket), so the socket leaves
    /// the poll set now.
    fn close(&mut self, sender: &mut dyn AnySender) {
        let unhandled = usize::from(self.mailbox.close());
        // In `local` dispatch the poller drops the connection, socket and
        // all, as soon as this returns.
        if self.shared.dispatch == Dispatch::System {
            if let Err(e) = self.shared.registry.deregister(&mut self.socket) {
                debug!("deregister {:?}: {e}", self.token);
            }
            // Sent while this wake is still outstanding: see `wakeup`.
            to_poller(&self.shared, Envelope::of(Closed(self.token)), sender);
        }
        sender.stop(sender.me());
        self.handled(1 + unhandled);
    }

    /// Adds `n` to one of the poller's counters, with `--metrics`.
    #[inline]
    fn count(&self, counter: fn(&PollerMetrics) -> &AtomicU64, n: usize) {
        if let Some(metrics) = &self.shared.metrics {
            metrics.add(counter(metrics), n as u64);
        }
    }

    fn count_timeout(&self, kind: TimeoutKind) {
        if let Some(metrics) = &self.shared.metrics {
            metrics.timeout(kind);
        }
    }
}

/// Counted closed here, before the socket closes (it is dropped after this),
/// so a client that saw the close also sees it counted, on every way out:
/// closing itself, a panic, or the server stopping. The call it waited
/// for, if any, ends here too on every way out, so its poller does not
/// keep polling for an answer nobody waits for.
impl Drop for Connection {
    fn drop(&mut self) {
        self.end_call();
        self.count(|m| &m.closed, 1);
    }
}

impl AnyActor for Connection {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        if !envelope.message.is::<Wake>() {
            return;
        }
        // None: closed, and this wake was accounted for when it closed.
        let Some(posted) = self.mailbox.take() else {
            return;
        };
        match self.handle(posted, sender) {
            Ok(Flow::Open) => self.handled(1),
            Ok(Flow::Close) => self.close(sender),
            Err(e) => {
                debug!("connection {:?}: {e}", self.token);
                self.close(sender);
            }
        }
    }

    // A panic in `system` dispatch: the scheduler drops the actor (and with
    // it the socket); the poller must still learn of it and get its wake
    // back. (In `local` dispatch the poller contains the panic itself.)
    fn on_fail(&self, _error: Box<dyn std::any::Any + Send>, sender: &mut dyn AnySender) {
        if self.shared.dispatch == Dispatch::System {
            let unhandled = usize::from(self.mailbox.close());
            to_poller(&self.shared, Envelope::of(Closed(self.token)), sender);
            self.handled(1 + unhandled);
        }
    }
}

/// An actor call a connection waits for.
#[derive(Debug, Clone, Copy)]
struct AwaitedCall {
    id: u64,
    /// How long the answer may take.
    timeout: Duration,
    /// Sent to an actor other than the poller's upstream pool, and so
    /// counted in the poller's `Calls`.
    away: bool,
}

/// Sends `envelope` to the connection's poller: in `system` dispatch as
/// counted mail (see `wakeup`), in `local` dispatch into its inbox.
fn to_poller(shared: &Shared, envelope: Envelope, sender: &mut dyn AnySender) {
    match shared.dispatch {
        Dispatch::System => {
            if let Some(metrics) = &shared.metrics {
                metrics.add(&metrics.envelopes, 1);
            }
            shared
                .mail
                .send(sender, &shared.poller, envelope, &shared.parking)
        }
        Dispatch::Local => sender.send(&shared.poller, envelope),
    }
}
