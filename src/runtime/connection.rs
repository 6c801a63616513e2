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

mod http2;
mod http2_websocket;
mod socket_io;
mod websocket;

use std::cell::RefCell;
use std::io;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use log::{debug, warn};

use mio::Token;
use uppercut::api::{AnyActor, AnySender, Envelope};

use crate::http::date::DATE_LEN;
use crate::log_limit::WarnLimiter;
use crate::net::transport::{Handshake, Transport};
use crate::observe::access_line::AccessRecorder;
use crate::observe::metrics::{PollerMetrics, TimeoutKind};
use crate::request_stream::{Call, CallEnd, RequestStream, OUTPUT_HIGH_WATER};
use crate::routes::reply::{Outcome, ReplyTo};
use crate::runtime::lifecycle::Phase;
use crate::runtime::shared::Shared;
use crate::runtime::timeouts::{Activity, ConnectionTimer, Expiry};
use crate::runtime::wakeup::{Mailbox, Wake, EXPIRE, HANGUP, READY, REPLY};

/// Bytes read per `read` call of HTTP/1.1 and HTTP/2.
const READ_CHUNK: usize = 16 * 1024;
/// Bytes read per `read` call of a WebSocket: a 16 KiB message and its
/// frame head come in one read, where a 16 KiB read would take two.
const WS_READ_CHUNK: usize = 64 * 1024;
/// Unread input discarded before closing, so the close is a FIN rather than a
/// reset that could destroy the last response before the client reads it.
const MAX_DISCARD_ON_CLOSE: usize = 64 * 1024;

struct Scratch {
    /// `WS_READ_CHUNK` bytes; HTTP reads use the first `READ_CHUNK`.
    input: Box<[u8]>,
    output: BytesMut,
}

impl Scratch {
    /// Where an HTTP/1.1 or HTTP/2 read goes.
    fn http_input(&mut self) -> &mut [u8] {
        &mut self.input[..READ_CHUNK]
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch {
        input: vec![0; WS_READ_CHUNK].into_boxed_slice(),
        output: BytesMut::with_capacity(2 * OUTPUT_HIGH_WATER),
    });
}

/// Whether the connection stays open after a readiness envelope.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Open,
    /// The last response is out, and it closes the connection: close,
    /// after a lingering close if the client is still sending.
    Finished,
    Close,
}

pub(crate) struct Connection {
    transport: Transport,
    token: Token,
    shared: Arc<Shared>,
    /// How it reads, and deals with its poller, in its dispatch mode.
    mode: &'static dyn ConnectionMode,
    stream: RequestStream,
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
    /// The last response is out and the write side shut: reading and
    /// dropping what the client still sends, until it closes or `LINGER`.
    lingering: bool,
    /// Draining: a head that was still arriving has been judged (see
    /// `wait_for_input`).
    head_judged: bool,
    /// Counted closed (see `end`).
    ended: bool,
    /// Upgraded to a WebSocket: its session.
    websocket: Option<Box<websocket::WsSession>>,
    /// Speaking HTTP/2: its session.
    http2: Option<Box<http2::Http2>>,
    /// The last read was shorter than asked (`local` dispatch): the socket
    /// is empty until the poller posts readiness again, so a wake for an
    /// answer does not read it for nothing.
    socket_drained: bool,
    /// A plain connection's first bytes, while they may be HTTP/2's
    /// preface (prior knowledge): `None` once it is known.
    sniffing: Option<BytesMut>,
}

impl Connection {
    /// A connection for a socket already registered READABLE under `token`.
    pub(crate) fn new(
        transport: Transport,
        token: Token,
        shared: Arc<Shared>,
        mode: &'static dyn ConnectionMode,
    ) -> Connection {
        let timer = ConnectionTimer::new(shared.now_ms(), shared.timeouts());
        let sniffing = shared.http2().then(BytesMut::new);
        let mut stream = RequestStream::default();
        let peer = transport.peer_addr();
        stream.set_peer(peer);
        stream.set_secure(transport.is_tls());
        if let Some(log) = shared.access_log() {
            stream.log_to(AccessRecorder::new(log, peer.map(|peer| peer.ip())));
        }
        if let Some(metrics) = shared.metrics() {
            stream.count_to(Arc::clone(metrics));
        }
        Connection {
            transport,
            token,
            shared,
            mode,
            stream,
            writable_interest: false,
            wrote: false,
            timer,
            call: None,
            hung_up: false,
            mailbox: Arc::default(),
            lingering: false,
            head_judged: false,
            ended: false,
            websocket: None,
            http2: None,
            socket_drained: false,
            sniffing,
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
    fn complete_call(
        &mut self,
        end: CallEnd,
        scratch: &mut Scratch,
        sender: &dyn AnySender,
    ) -> io::Result<Flow> {
        self.end_call();
        let date = self.shared.date();
        let routes = self.shared.routes();
        self.stream
            .complete_call(end, routes, &date, &mut scratch.output);
        self.run_calls(&date, scratch, sender);
        self.write_batch(&mut scratch.output)?;
        self.drive(scratch, sender)
    }

    /// Sends the calls the request stream leaves, and writes each answer
    /// the actor gave at once (it ran on this thread) with the responses
    /// around it, until a call must wait for its answer.
    fn run_calls(&mut self, date: &[u8; DATE_LEN], scratch: &mut Scratch, sender: &dyn AnySender) {
        while let Some(call) = self.stream.take_call() {
            let Some(outcome) = self.send_call(call, sender) else {
                return;
            };
            let end = CallEnd::Outcome(outcome);
            self.stream
                .complete_call(end, self.shared.routes(), date, &mut scratch.output);
        }
    }

    /// Sends the request an actor route made where its route goes; the
    /// answer if the actor gave it before this returns (an actor that was
    /// free runs right here), else `None`: it will come through the
    /// poller's reply queue.
    fn send_call(&mut self, call: Call, sender: &dyn AnySender) -> Option<Outcome> {
        let (id, reply_to) = self.shared.new_call(self.token.0);
        let timeout = self.shared.routes().actor_routes()[call.actor].timeout;
        self.call = Some(AwaitedCall { id, timeout });
        self.mailbox.await_call(id);
        let outcome = self.dispatch_call(call, id, reply_to, sender)?;
        // Answered here: the mailbox never saw it.
        self.call = None;
        self.mailbox.abandon(id);
        Some(outcome)
    }

    /// Sends `call`, as call `id` answered through `reply_to`, where its
    /// route goes; its answer if given before this returns.
    fn dispatch_call(
        &self,
        call: Call,
        id: u64,
        reply_to: ReplyTo,
        sender: &dyn AnySender,
    ) -> Option<Outcome> {
        let shared = &*self.shared;
        let mut upstream = |request: Envelope| self.mode.to_poller(shared, request, sender);
        shared.dispatch_call(call, id, reply_to, sender, &mut upstream)
    }

    /// Ends the call, however it ended: answered, timed out, or the
    /// connection closing. An answer that still comes is dropped.
    fn end_call(&mut self) {
        if let Some(call) = self.call.take() {
            self.mailbox.abandon(call.id);
        }
    }

    /// The deadline passed when the poller swept: if it still stands, close,
    /// answering 408 to a request that did not arrive in time.
    fn expire(&mut self, scratch: &mut Scratch, sender: &dyn AnySender) -> io::Result<Flow> {
        match self.timer.expired(self.shared.now_ms()) {
            None => Ok(Flow::Open),
            Some(Expiry::Request) => {
                self.count_timeout(TimeoutKind::Header);
                // Mid-handshake there is no channel to answer on: just close.
                if self.transport.is_handshaking() {
                    self.note_handshake(Some(Handshake::Failed("no handshake in time".into())));
                    return Ok(Flow::Close);
                }
                let date = self.shared.date();
                self.stream
                    .time_out(self.shared.routes(), &date, &mut scratch.output);
                // One try, behind what waits: a client this slow gets no
                // more of our time. Over TLS, `handle` says `close_notify`
                // after it, as for every close without an error.
                let sent = self.transport.send(&scratch.output);
                scratch.output.clear();
                self.note_wire();
                sent?;
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
            Some(Expiry::Reply) => self.complete_call(CallEnd::TimedOut, scratch, sender),
            Some(Expiry::Linger | Expiry::WebSocketIdle) => Ok(Flow::Close),
        }
    }

    /// Handles everything the poller posted: an actor's answer first (it
    /// may release pipelined requests), then readiness, then the deadline,
    /// which the work before it may have moved. Calls are sent as the
    /// requests that make them are read.
    fn handle(&mut self, posted: u8, sender: &dyn AnySender) -> io::Result<Flow> {
        if posted & HANGUP != 0 {
            self.hung_up = true;
            self.transport.note_hangup();
        }
        if posted & (READY | HANGUP) != 0 {
            self.socket_drained = false;
        }
        self.wrote = false;
        SCRATCH.with(|scratch| {
            let scratch = &mut *scratch.borrow_mut();
            if self.lingering {
                return Ok(self.linger(posted, scratch));
            }
            self.note_phase();
            // The scratch is shared by every connection on this thread: never
            // trust what a previous user (or a panic) left in it.
            scratch.output.clear();
            let mut flow = Ok(Flow::Open);
            if self.http2.is_some() {
                flow = self.handle_http2(posted, scratch, sender);
            } else if self.websocket.is_some() {
                flow = self.handle_websocket(posted, scratch, sender);
            } else if posted & REPLY != 0 {
                if let Some(outcome) = self.mailbox.take_reply() {
                    flow = self.complete_call(CallEnd::Outcome(outcome), scratch, sender);
                }
            }
            let http1 = self.websocket.is_none() && self.http2.is_none();
            if http1 && matches!(flow, Ok(Flow::Open)) && posted & (READY | HANGUP) != 0 {
                flow = self.drive(scratch, sender);
            }
            let http1 = self.websocket.is_none() && self.http2.is_none();
            if http1 && matches!(flow, Ok(Flow::Open)) && posted & EXPIRE != 0 {
                // Judge the deadline by what the connection is doing now, but
                // only move it for work done: a silent client stays in its
                // first request's stage and gets its 408.
                if posted != EXPIRE {
                    self.note_activity();
                }
                flow = self.expire(scratch, sender);
            }
            match flow {
                Ok(Flow::Open) => self.note_activity(),
                Ok(Flow::Finished) if self.begin_lingering(scratch) => {
                    self.note_activity();
                    flow = Ok(Flow::Open);
                }
                Ok(_) => {
                    // Ended without an error, by either side, with nothing
                    // to linger for: over TLS, `close_notify` tells the
                    // client the last answer is whole, not cut off, and
                    // answers its own (RFC 8446 §6.1).
                    self.discard_unread(scratch);
                    let _ = self.transport.close_notify();
                    self.note_wire();
                    flow = Ok(Flow::Close);
                }
                Err(_) => {
                    self.discard_unread(scratch);
                }
            }
            flow
        })
    }

    /// Once the server drains, a request whose body or actor's answer is
    /// awaited, with nothing sent behind it, gets the last response, with
    /// `Connection: close`. Checked on every wake and before every read: a
    /// wake may have begun before the drain. A request whose head is still
    /// arriving is judged where the connection has read all there is
    /// (`wait_for_input`). A connection between requests closes at once,
    /// and one with requests pipelined is answered to the end of them.
    pub(super) fn note_phase(&mut self) {
        if self.shared.phase() == Phase::Running {
            return;
        }
        if !self.stream.is_awaiting_head() {
            if self.stream.is_in_flight_alone() {
                self.stream.close_after_response();
            }
            return;
        }
        // A head already partly read when the drain is first seen is judged
        // at once: the rest may come in the next read.
        if !self.head_judged && self.stream.is_mid_request() {
            self.judge_head();
        }
    }

    /// Draining, once: a head still arriving, with no output owed, is a
    /// request in flight alone, whose response closes. Judged once: later,
    /// a pipeline caught between two reads would look the same.
    pub(super) fn judge_head(&mut self) {
        self.head_judged = true;
        if self.stream.is_in_flight_alone() && !self.transport.is_backed_up() {
            self.stream.close_after_response();
        }
    }

    /// Moves the deadline to what the connection is doing now.
    fn note_activity(&mut self) {
        // A lingering HTTP/2 connection is past its session: `LINGER` bounds it.
        if self.http2.is_some() && !self.lingering {
            return self.http2_note_deadline();
        }
        let websocket = self.websocket.as_deref().map(|session| session.events());
        // Until its first request is answered, a connection waits for that
        // request, under the header timeout from its start: the TLS
        // handshake is part of it, and a client that completes the
        // handshake and sends nothing gets its 408 as a plain one does.
        let first_request = websocket.is_none() && self.stream.responses() == 0;
        let activity = Activity {
            mid_request: self.stream.is_mid_request()
                || self.transport.is_handshaking()
                || first_request,
            responses: websocket.unwrap_or_else(|| self.stream.responses()),
            backed_up: self.transport.is_backed_up(),
            wrote: self.wrote,
            awaiting: self.call.map(|call| call.timeout),
            lingering: self.lingering,
            websocket: websocket.is_some(),
        };
        let now = self.shared.now_ms();
        self.timer.update(now, activity, self.shared.timeouts());
    }

    /// Ends the connection: counted closed, detached from its poller as its
    /// mode needs, its actor stopped, and its wake (and those sent since
    /// its last look at the mailbox, which will never be handled) done.
    fn close(&mut self, sender: &mut dyn AnySender) {
        let unhandled = usize::from(self.mailbox.close());
        self.end_websocket(Some(&*sender));
        self.http2_end_websockets(Some(&*sender));
        self.end();
        self.mode
            .detach(&self.shared, &mut self.transport, self.token, sender);
        sender.stop(sender.me());
        self.mode.handled(&self.shared, 1 + unhandled);
    }

    /// The connection is over: the call it waited for ends (so its poller
    /// does not keep looking for an answer nobody waits for), and it is
    /// counted closed, once, before the client can see the end.
    fn end(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        if self.shared.phase() == Phase::Stopping && self.is_busy() {
            self.shared.note_cut_short();
        }
        self.end_call();
        self.end_websocket(None);
        self.end_http2();
        self.count(|m| &m.closed, 1);
    }

    /// A request is in progress or unanswered, or a response is not all
    /// sent: closing now cuts it short. A WebSocket is no request.
    fn is_busy(&self) -> bool {
        if self.websocket.is_some() || self.lingering {
            return false;
        }
        match self.http2_open_streams() {
            Some(streams) => streams > 0 || self.transport.is_backed_up(),
            None => {
                self.stream.is_mid_request() || self.call.is_some() || self.transport.is_backed_up()
            }
        }
    }

    /// Adds `n` to one of the poller's counters, with `--metrics`.
    #[inline]
    fn count(&self, counter: fn(&PollerMetrics) -> &AtomicU64, n: usize) {
        self.shared.count(counter, n);
    }

    /// Counts the bytes the socket carried since the last count (and tells
    /// the request stream how much of its output went), and the TLS
    /// handshake's fate if it was decided.
    fn note_wire(&mut self) {
        let counts = self.transport.take_wire_counts();
        self.count(|m| &m.bytes_received, counts.received);
        self.count(|m| &m.bytes_sent, counts.sent);
        self.wrote |= counts.sent > 0;
        if counts.taken > 0 {
            self.stream.sent(counts.taken);
        }
        let handshake = self.transport.take_handshake();
        self.note_handshake(handshake);
    }

    /// Counts a TLS handshake done or failed; a failure is logged, at most
    /// once a second for the whole server.
    fn note_handshake(&self, handshake: Option<Handshake>) {
        match handshake {
            None => {}
            Some(Handshake::Done) => self.count(|m| &m.tls_handshakes, 1),
            Some(Handshake::Failed(reason)) => {
                self.count(|m| &m.tls_handshake_failures, 1);
                tls_failure_warning(&reason, self.transport.peer_addr());
            }
        }
    }

    fn count_timeout(&self, kind: TimeoutKind) {
        if let Some(metrics) = self.shared.metrics() {
            metrics.timeout(kind);
        }
    }
}

/// Ended here at the latest, before the socket closes (it is dropped after
/// this), on every way out: closing itself, a panic, or the server stopping.
impl Drop for Connection {
    fn drop(&mut self) {
        self.end();
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
        match self.handle(posted, &*sender) {
            Ok(Flow::Open) => self.mode.handled(&self.shared, 1),
            Ok(Flow::Finished | Flow::Close) => self.close(sender),
            Err(e) => {
                debug!("connection {:?}: {e}", self.token);
                self.close(sender);
            }
        }
    }

    // Called by uppercut on a panic (a poller running its own connections
    // contains their panics itself): the mode tells the poller.
    fn on_fail(&self, _error: Box<dyn std::any::Any + Send>, sender: &mut dyn AnySender) {
        let unhandled = usize::from(self.mailbox.close());
        self.mode
            .failed(&self.shared, self.token, unhandled, sender);
    }
}

/// An actor call a connection waits for.
#[derive(Debug, Clone, Copy)]
struct AwaitedCall {
    id: u64,
    /// How long the answer may take.
    timeout: Duration,
}

/// Logs a failed TLS handshake, at most once a second for the whole server.
fn tls_failure_warning(reason: &str, peer: Option<std::net::SocketAddr>) {
    static WARNINGS: WarnLimiter = WarnLimiter::new();
    if let Some(suppressed) = WARNINGS.admit() {
        let peer = peer.map_or_else(|| "?".to_string(), |peer| peer.to_string());
        match suppressed {
            0 => warn!("TLS handshake with {peer} failed: {reason}"),
            n => warn!("TLS handshake with {peer} failed: {reason} ({n} more failures since the last report)"),
        }
    }
}

/// What differs between the dispatch modes for a connection: how it reads,
/// and how it deals with its poller (`local_dispatch`, `system_dispatch`).
pub(crate) trait ConnectionMode: Sync {
    /// Reads on until `WouldBlock`, rather than stopping at a read shorter
    /// than the buffer (which emptied the socket).
    fn reads_until_blocked(&self) -> bool;
    /// `wakes` wakes of this connection are done.
    fn handled(&self, shared: &Shared, wakes: usize);
    /// Sends `envelope` to the connection's poller.
    fn to_poller(&self, shared: &Shared, envelope: Envelope, sender: &dyn AnySender);
    /// The connection closes: what its poller must learn or do first.
    fn detach(
        &self,
        shared: &Shared,
        transport: &mut Transport,
        token: Token,
        sender: &dyn AnySender,
    );
    /// The connection's actor panicked in uppercut's hands, with
    /// `unhandled` wakes sent since it last looked.
    fn failed(&self, shared: &Shared, token: Token, unhandled: usize, sender: &dyn AnySender);
}
