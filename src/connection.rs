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

use std::cell::RefCell;
use std::io::{self, ErrorKind, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use log::debug;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use uppercut::api::{AnyActor, AnySender, Envelope};

use crate::access_log::AccessLog;
use crate::config::{Dispatch, Timeouts};
use crate::date::DateCache;
use crate::exchange::{RequestStream, OUTPUT_HIGH_WATER};
use crate::routes::Routes;
use crate::server::{Phase, ServerState};
use crate::timeouts::{Activity, CoarseClock, ConnectionTimer, Expiry};
use crate::upstream::{UpstreamReply, UpstreamRequest};

/// Bytes read per `read` call.
const READ_CHUNK: usize = 16 * 1024;
/// Unread input discarded before closing, so the close is a FIN rather than a
/// reset that could destroy the last response before the client reads it.
const MAX_DISCARD_ON_CLOSE: usize = 64 * 1024;

/// Readiness envelope: the socket may be readable or writable. A unit struct,
/// so boxing it into an envelope allocates nothing.
#[derive(Debug)]
pub struct Ready;

/// Readiness envelope for a socket whose peer has closed its side, or that
/// has an error: read it to the end, as no further edge will come.
#[derive(Debug)]
pub struct Hangup;

/// The poller's sweep found the connection's deadline passed: check it and,
/// if it still stands, time the connection out.
#[derive(Debug)]
pub struct Expire;

/// Sent to the poller (in `system` dispatch) when a connection actor is gone,
/// so it frees the token.
#[derive(Debug)]
pub struct Closed(pub Token);

/// What a poller shares with each of its connections.
pub struct Shared {
    pub routes: Arc<Routes>,
    pub date: DateCache,
    pub clock: CoarseClock,
    pub timeouts: Timeouts,
    pub dispatch: Dispatch,
    /// The poller's registry, to ask for WRITABLE while output is backed up.
    pub registry: Registry,
    /// The poller's actor address.
    pub poller: String,
    pub server: Arc<ServerState>,
    /// Numbers upstream requests, so a reply finds the request it answers
    /// even after its token has passed to another connection.
    pub upstream_ids: AtomicU64,
    pub access_log: Option<Arc<AccessLog>>,
}

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

pub struct Connection {
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
    /// The upstream request this connection waits for.
    upstream_id: Option<u64>,
    /// The peer closed its side or the socket failed: no further readiness
    /// edge will come, so reads go on to the end.
    hung_up: bool,
}

/// What a connection was woken for.
enum Wake {
    Ready,
    Expire,
    Upstream(UpstreamReply),
}

impl Connection {
    /// A connection for a socket already registered READABLE under `token`.
    pub fn new(socket: TcpStream, token: Token, shared: Arc<Shared>) -> Connection {
        let timer = ConnectionTimer::new(shared.clock.now_ms(), &shared.timeouts);
        let mut stream = RequestStream::default();
        if let Some(log) = &shared.access_log {
            stream.log_to(log.recorder(socket.peer_addr().ok().map(|peer| peer.ip())));
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
            upstream_id: None,
            hung_up: false,
        }
    }

    /// The deadline a `system` poller's sweep reads.
    pub fn deadline(&self) -> Arc<AtomicU64> {
        self.timer.deadline()
    }

    /// A `local` poller's sweep: the published deadline has passed.
    pub fn is_past_deadline(&self, now_ms: u64) -> bool {
        self.timer.expired(now_ms).is_some()
    }

    /// Runs the connection until its input is used up or the exchange ends.
    ///
    /// A read shorter than the buffer emptied the socket's receive queue, and
    /// with edge-triggered readiness anything the client sends after it raises
    /// a fresh edge. So in `local` dispatch the connection stops there rather
    /// than spend a read on `WouldBlock`, or serve this client's next request
    /// ahead of the others woken by the same poll. In `system` dispatch each
    /// wake-up is an envelope through the uppercut scheduler, which costs far
    /// more than a read, so the connection reads on until `WouldBlock`,
    /// serving what the client sent meanwhile (stopping at the short read cut
    /// `system` from 0.69 to 0.35 of `local`'s throughput). After a hangup,
    /// whose edge has been consumed, it always reads on to the end.
    fn drive(&mut self, scratch: &mut Scratch) -> io::Result<Flow> {
        let mut input_used_up = false;
        loop {
            // Output we owe goes first. While the client does not take it,
            // read nothing more: that is the backpressure.
            if !self.output.is_empty() && !self.flush()? {
                self.set_writable_interest(true)?;
                return Ok(Flow::Open);
            }
            if self.stream.is_closed() {
                return Ok(Flow::Close);
            }
            // Nothing more is read until the upstream has answered.
            if self.stream.awaiting_upstream() {
                return Ok(Flow::Open);
            }
            let date = self.shared.date.current();
            if self.stream.is_held_back() {
                self.stream
                    .resume(&self.shared.routes, &date, &mut scratch.output);
            } else if input_used_up {
                return self.wait_for_input();
            } else {
                match self.socket.read(&mut scratch.input) {
                    Ok(0) => return Ok(Flow::Close),
                    Ok(len) => {
                        input_used_up = len < scratch.input.len()
                            && self.shared.dispatch == Dispatch::Local
                            && !self.hung_up;
                        self.stream.feed(
                            &scratch.input[..len],
                            &self.shared.routes,
                            &date,
                            &mut scratch.output,
                        );
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return self.wait_for_input(),
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
            // One write for all the responses this read produced.
            self.write_batch(&mut scratch.output)?;
        }
    }

    /// Everything read so far is served: wait for the next readiness edge.
    fn wait_for_input(&mut self) -> io::Result<Flow> {
        // Shutting down: a connection between requests is done. Every request
        // it sent before this point was served.
        if self.shared.server.phase() == Phase::Draining && !self.stream.is_mid_request() {
            return Ok(Flow::Close);
        }
        self.set_writable_interest(false)?;
        Ok(Flow::Open)
    }

    /// The upstream answered: write its response, then carry on.
    fn complete_upstream(
        &mut self,
        reply: UpstreamReply,
        scratch: &mut Scratch,
    ) -> io::Result<Flow> {
        self.upstream_id = None;
        let date = self.shared.date.current();
        self.stream.complete_upstream(
            reply.result,
            &self.shared.routes,
            &date,
            &mut scratch.output,
        );
        self.write_batch(&mut scratch.output)?;
        self.drive(scratch)
    }

    /// Asks the poller's upstream pool for the answer the stream waits for.
    fn request_upstream(&mut self, sender: &mut dyn AnySender) {
        let id = self.shared.upstream_ids.fetch_add(1, Ordering::Relaxed);
        self.upstream_id = Some(id);
        let request = UpstreamRequest {
            id,
            token: self.token,
            reply_to: sender.me().to_string(),
        };
        sender.send(&self.shared.poller, Envelope::of(request));
    }

    /// The deadline passed when the poller swept: if it still stands, close,
    /// answering 408 to a request that did not arrive in time.
    fn expire(&mut self, scratch: &mut Scratch) -> io::Result<Flow> {
        match self.timer.expired(self.shared.clock.now_ms()) {
            None => Ok(Flow::Open),
            Some(Expiry::Request) => {
                let date = self.shared.date.current();
                self.stream
                    .time_out(&self.shared.routes, &date, &mut scratch.output);
                // One try: a client this slow gets no more of our time.
                write_until_blocked(&mut self.socket, &scratch.output)?;
                Ok(Flow::Close)
            }
            Some(Expiry::Idle | Expiry::Write) => Ok(Flow::Close),
        }
    }

    /// Writes a batch of responses; what the socket does not take is kept.
    fn write_batch(&mut self, batch: &mut BytesMut) -> io::Result<()> {
        let written = write_until_blocked(&mut self.socket, batch);
        if let Ok(written) = written {
            self.wrote |= written > 0;
            self.output.extend_from_slice(&batch[written..]);
        }
        batch.clear();
        written.map(drop)
    }

    /// Writes kept output; true when all of it went.
    fn flush(&mut self) -> io::Result<bool> {
        let written = write_until_blocked(&mut self.socket, &self.output)?;
        self.wrote |= written > 0;
        self.output.advance(written);
        if self.output.is_empty() {
            self.output = BytesMut::new();
            return Ok(true);
        }
        Ok(false)
    }

    fn set_writable_interest(&mut self, writable: bool) -> io::Result<()> {
        if self.writable_interest == writable {
            return Ok(());
        }
        let interest = if writable {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        self.shared
            .registry
            .reregister(&mut self.socket, self.token, interest)?;
        self.writable_interest = writable;
        Ok(())
    }

    /// Reads and drops what the client already sent, so that closing the
    /// socket sends a FIN after our last response rather than a reset.
    fn discard_unread(&mut self, scratch: &mut Scratch) {
        let mut discarded = 0;
        while discarded < MAX_DISCARD_ON_CLOSE {
            match self.socket.read(&mut scratch.input) {
                Ok(0) => break,
                Ok(len) => discarded += len,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }
}

/// Writes from `data` until done or the socket would block; returns the count.
pub fn write_until_blocked(socket: &mut TcpStream, data: &[u8]) -> io::Result<usize> {
    let mut written = 0;
    while written < data.len() {
        match socket.write(&data[written..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(len) => written += len,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

impl AnyActor for Connection {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        let message = envelope.message;
        let wake = if message.is::<Ready>() {
            Wake::Ready
        } else if message.is::<Hangup>() {
            self.hung_up = true;
            Wake::Ready
        } else if message.is::<Expire>() {
            Wake::Expire
        } else {
            match message.downcast::<UpstreamReply>() {
                Ok(reply) if self.upstream_id == Some(reply.id) => Wake::Upstream(*reply),
                _ => return,
            }
        };
        self.wrote = false;
        let flow = SCRATCH.with(|scratch| {
            let scratch = &mut *scratch.borrow_mut();
            // The scratch is shared by every connection on this thread: never
            // trust what a previous user (or a panic) left in it.
            scratch.output.clear();
            let flow = match wake {
                Wake::Ready => self.drive(scratch),
                Wake::Expire => self.expire(scratch),
                Wake::Upstream(reply) => self.complete_upstream(reply, scratch),
            };
            if !matches!(flow, Ok(Flow::Open)) {
                self.discard_unread(scratch);
            }
            flow
        });
        match flow {
            Ok(Flow::Open) => {
                if self.stream.awaiting_upstream() && self.upstream_id.is_none() {
                    self.request_upstream(sender);
                }
                let activity = Activity {
                    mid_request: self.stream.is_mid_request(),
                    responses: self.stream.responses(),
                    backed_up: !self.output.is_empty(),
                    wrote: self.wrote,
                };
                let now = self.shared.clock.now_ms();
                self.timer.update(now, activity, &self.shared.timeouts);
            }
            // Once the server is stopping, the poller stops every connection
            // actor itself and the scheduler may be gone: send nothing more,
            // as uppercut's senders panic on a closed channel. (Read the phase
            // now, not when the envelope arrived: the stop may have come since.)
            _ if self.shared.server.phase() == Phase::Stopping => {}
            Ok(Flow::Close) => sender.stop(sender.me()),
            Err(e) => {
                debug!("connection {:?}: {e}", self.token);
                sender.stop(sender.me());
            }
        }
    }

    // In `system` dispatch the scheduler owns the actor: tell the poller when
    // it is gone, so the token can be reused. (In `local` dispatch the poller
    // drops the connection itself and these hooks do not run.)
    fn on_stop(&self, sender: &mut dyn AnySender) {
        if self.shared.server.phase() != Phase::Stopping {
            sender.send(&self.shared.poller, Envelope::of(Closed(self.token)));
        }
    }

    fn on_fail(&self, _error: Box<dyn std::any::Any + Send>, sender: &mut dyn AnySender) {
        self.on_stop(sender);
    }
}
