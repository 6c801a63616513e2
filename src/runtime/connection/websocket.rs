//! A connection after a WebSocket upgrade: frames in, through the sans-I/O
//! decoder (`ws`), to the route's actor (`websocket::WebSocket`), and what
//! it writes out in the same batch; its mail (`WsHandle` sends from other
//! actors and threads) when the poller posts `MAIL`; a ping when the client
//! has been quiet for the keep-alive timeout; and the close handshake.
//!
//! The actor runs here, on the connection's poller, as a handler does: one
//! read becomes one batch of calls and one write. Each call is contained:
//! an actor that panics gets its connection closed with 1011, and the
//! poller's other connections never notice.
//!
//! An actor whose send to another server went past `--nats-buffer`
//! (`mail::press`) has its connection stop reading, as TCP stops a sender
//! whose receiver is behind: nothing more is read from the client until
//! the NATS link has drained, and the relief mails the connection back to
//! reading. Mail, pings and the close handshake go on meanwhile.

use std::collections::VecDeque;
use std::io::{self, ErrorKind};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use log::warn;
use uppercut::api::AnySender;

use super::{Connection, Flow, Scratch};
use crate::mail;
use crate::net::transport::Received;
use crate::observe::metrics::PollerMetrics;
use crate::request_stream::Upgraded;
use crate::runtime::lifecycle::Phase;
use crate::runtime::shared::Shared;
use crate::runtime::timeouts::Expiry;
use crate::runtime::wakeup::{EXPIRE, HANGUP, MAIL, READY};
use crate::websocket::context::{write_outgoing, CloseAsked, WsContext};
use crate::websocket::handle::{cost, Mail, WsHandle};
use crate::websocket::outgoing::OutgoingKind;
use crate::websocket::{Closed, Message, WebSocket};
use crate::ws::deflate::Deflate;
use crate::ws::frame::{write_close, write_frame, Opcode};
use crate::ws::session::{Event, Session};

/// Where the close handshake is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    /// Neither side has sent a close frame.
    Open,
    /// This side sent its close frame; the client's is awaited.
    Sent,
    /// The handshake is over, or the protocol was broken: the socket
    /// closes once the output is written.
    Done,
}

/// The route's actor and what its calls share.
struct Peer {
    actor: Box<dyn WebSocket>,
    handle: WsHandle,
    /// A close the actor (or a handle) asked for, not yet written.
    close: Option<CloseAsked>,
    /// The actor panicked: it is not called again.
    failed: bool,
    /// permessage-deflate's sending side, if agreed.
    deflate: Option<Deflate>,
}

impl Peer {
    /// Calls the actor with a context writing into `out`, contained: a
    /// panic leaves the connection closing with 1011. Returns the messages
    /// it wrote.
    fn call(
        &mut self,
        out: &mut BytesMut,
        sender: &mut dyn AnySender,
        f: impl FnOnce(&mut dyn WebSocket, &mut WsContext<'_>),
    ) -> u64 {
        if self.failed {
            return 0;
        }
        let mut written = 0;
        let mut context = WsContext {
            out,
            sender,
            handle: &self.handle,
            close: &mut self.close,
            written: &mut written,
            deflate: self.deflate.as_mut(),
        };
        let actor = &mut *self.actor;
        let called = panic::catch_unwind(AssertUnwindSafe(|| f(actor, &mut context)));
        if called.is_err() {
            warn!(
                "WebSocket {}: its actor panicked; closing with 1011",
                self.handle.address()
            );
            self.failed = true;
            self.close = Some(CloseAsked {
                code: 1011,
                reason: Vec::new(),
                cut: true,
            });
        }
        written
    }
}

/// One WebSocket connection's state beyond its socket.
pub(super) struct WsSession {
    frames: Session,
    peer: Peer,
    /// Mail taken from the handle's bag (kept, so taking allocates nothing
    /// once warm).
    mail: VecDeque<Mail>,
    closing: Closing,
    /// Frames received and pings sent: each restarts the idle clock.
    events: u64,
    /// A ping went out after a quiet spell, and nothing has come since.
    ping_unanswered: bool,
    /// How the connection ended, once known; told to the actor at the end.
    ended: Option<Closed>,
    /// While its actor's sends wait for a NATS link to drain: the reliefs
    /// still to come. Nothing is read from the client meanwhile.
    paused: Option<Arc<AtomicUsize>>,
    /// Closed with 1008 for falling too far behind.
    cut_off: bool,
}

/// What a WebSocket session's calls need from their connection: the
/// poller's state, the sender its actor sends with, and where what it
/// writes goes.
pub(super) struct WsIo<'a> {
    pub(super) shared: &'a Shared,
    pub(super) sender: &'a dyn AnySender,
    pub(super) out: &'a mut BytesMut,
}

impl WsSession {
    /// The session of a WebSocket just accepted on the connection at `key`
    /// of its poller (a socket upgraded, or an HTTP/2 stream): registered,
    /// and counted; its actor not yet told ([`WsSession::open`]).
    pub(super) fn new(shared: &Shared, key: usize, upgraded: Upgraded) -> WsSession {
        let limits = shared.routes().websocket_limits();
        let handle = shared.open_websocket(key, limits.outbound);
        shared.count(|m| &m.websocket_upgrades, 1);
        let Upgraded(actor, agreed) = upgraded;
        let frames = Session::new(limits.max_message);
        WsSession {
            frames: match &agreed {
                Some(agreed) => frames.with_inflate(agreed),
                None => frames,
            },
            peer: Peer {
                actor,
                handle,
                close: None,
                failed: false,
                deflate: agreed.as_ref().map(Deflate::new),
            },
            mail: VecDeque::new(),
            closing: Closing::Open,
            events: 0,
            ping_unanswered: false,
            ended: None,
            paused: None,
            cut_off: false,
        }
    }

    /// Frames received and pings sent, for the idle clock.
    pub(super) fn events(&self) -> u64 {
        self.events
    }

    /// The close handshake is over, or the connection was cut off: nothing
    /// more is read, and the output written is the last.
    pub(super) fn is_done(&self) -> bool {
        self.closing == Closing::Done
    }

    /// Closed for falling too far behind (1008): its client reads too
    /// little for even the close to be sure to reach it.
    pub(super) fn is_cut_off(&self) -> bool {
        self.cut_off
    }

    /// Stops reading until `pressure` eases (and any pressure met before
    /// it): the relief mails the connection, which then reads again.
    fn pause(&mut self, pressure: &dyn mail::Pressure) {
        let reliefs = self
            .paused
            .get_or_insert_with(|| Arc::new(AtomicUsize::new(0)));
        reliefs.fetch_add(1, Ordering::AcqRel);
        let reliefs = Arc::clone(reliefs);
        let bag = Arc::clone(&self.peer.handle.bag);
        pressure.on_relief(Box::new(move || {
            if reliefs.fetch_sub(1, Ordering::AcqRel) == 1 {
                bag.nudge();
            }
        }));
    }

    /// Whether reading waits for a relief.
    pub(super) fn is_paused(&self) -> bool {
        self.paused
            .as_ref()
            .is_some_and(|reliefs| reliefs.load(Ordering::Acquire) > 0)
    }

    /// Ends a pause whose reliefs have all come; true when it did.
    pub(super) fn resume(&mut self) -> bool {
        if self.paused.is_none() || self.is_paused() {
            return false;
        }
        self.paused = None;
        true
    }

    /// Bytes through permessage-deflate since the last call: sent before
    /// and after compression, received before and after inflating.
    fn take_compression_counts(&mut self) -> [u64; 4] {
        let (sent_plain, sent_wire) = match &mut self.peer.deflate {
            Some(deflate) => (
                std::mem::take(&mut deflate.plain),
                std::mem::take(&mut deflate.wire),
            ),
            None => (0, 0),
        };
        let (received_wire, received_plain) = self.frames.take_inflated();
        [sent_plain, sent_wire, received_wire, received_plain]
    }

    /// Runs `f` on the session as its actor's address, writing into the
    /// output; counts the messages it reports (received, sent).
    fn run(
        &mut self,
        io: &mut WsIo<'_>,
        f: impl FnOnce(&mut WsSession, &mut BytesMut, &mut dyn AnySender) -> (u64, u64),
    ) {
        let shared = io.shared;
        let context = shared.actor_context(io.sender);
        let address = self.peer.handle.address.clone();
        let out = &mut *io.out;
        // Only what this run's sends met counts.
        drop(mail::take_pressure());
        let (received, sent) = context.run_as(&address, |sender| f(self, out, sender));
        if let Some(pressure) = mail::take_pressure() {
            self.pause(&*pressure);
        }
        if let Some(metrics) = shared.metrics() {
            count_messages(metrics, received, sent);
            if self.peer.deflate.is_some() {
                let counts = self.take_compression_counts();
                metrics.websocket_deflate(counts);
            }
        }
    }

    /// Tells the actor the WebSocket is open.
    pub(super) fn open(&mut self, io: &mut WsIo<'_>) {
        self.run(io, |session, out, sender| {
            let written = session
                .peer
                .call(out, sender, |actor, context| actor.on_open(context));
            (0, written)
        });
    }

    /// Decodes `input` (unmasking it in place): each message to the actor,
    /// pings answered, and a close or a broken rule settled, all into the
    /// output.
    pub(super) fn frames(&mut self, input: &mut [u8], io: &mut WsIo<'_>) {
        self.run(io, |session, out, sender| {
            let WsSession {
                frames,
                peer,
                closing,
                events,
                ping_unanswered,
                ended,
                ..
            } = session;
            let (mut received, mut sent) = (0, 0);
            let before = frames.frames();
            frames.feed(input, out, |event, out| {
                match event {
                    Event::Text(text) => {
                        received += 1;
                        let message = Message::Text(text);
                        sent += peer.call(out, sender, |actor, c| actor.on_message(message, c));
                    }
                    Event::Binary(bytes) => {
                        received += 1;
                        let message = Message::Binary(bytes);
                        sent += peer.call(out, sender, |actor, c| actor.on_message(message, c));
                    }
                    Event::Close { code } => {
                        // Echo the client's code (RFC 6455 §5.5.1), unless
                        // this side's close already went out.
                        if *closing == Closing::Open {
                            write_close(out, code.unwrap_or(1000), b"");
                        }
                        *closing = Closing::Done;
                        ended.get_or_insert(Closed::Handshake(code));
                    }
                    Event::Fail(code) => {
                        if *closing == Closing::Open {
                            write_close(out, code, b"");
                        }
                        *closing = Closing::Done;
                        ended.get_or_insert(Closed::ProtocolError(code));
                    }
                }
            });
            // Any frame, a pong or a ping included, shows the client alive.
            if frames.frames() != before {
                *events += frames.frames() - before;
                *ping_unanswered = false;
            }
            (received, sent)
        });
    }

    /// Writes what the actor's mail holds, and hands it its envelopes;
    /// `unsent` bytes written before wait for the client.
    pub(super) fn mail(&mut self, unsent: usize, io: &mut WsIo<'_>) {
        let outbound = io.shared.routes().websocket_limits().outbound;
        self.run(io, |session, out, sender| {
            let WsSession { peer, mail, .. } = session;
            let overflowed = peer.handle.bag.take(mail);
            let mut sent = 0;
            let mut taken = 0;
            for item in mail.drain(..) {
                taken += cost(&item);
                // What the actor writes for its mail counts too: past the
                // limit, the rest is dropped and the client cut off.
                if unsent + out.len() > outbound {
                    peer.close.get_or_insert_with(too_far_behind);
                }
                match item {
                    Mail::Out(message) => {
                        if peer.close.is_some() {
                            continue;
                        }
                        if let OutgoingKind::Close(code) = message.kind {
                            peer.close = Some(CloseAsked {
                                code,
                                reason: message.payload.to_vec(),
                                cut: false,
                            });
                            continue;
                        }
                        write_outgoing(out, peer.deflate.as_mut(), &message);
                        sent += 1;
                    }
                    Mail::Envelope(envelope) => {
                        sent += peer.call(out, sender, |actor, c| actor.on_mail(envelope, c));
                    }
                }
            }
            peer.handle.bag.taken(taken);
            if overflowed {
                peer.close.get_or_insert_with(too_far_behind);
            }
            (0, sent)
        });
    }

    /// The server drains: a close with 1001, going away (RFC 6455 §7.4.1),
    /// unless one was sent.
    pub(super) fn go_away(&mut self) {
        if self.closing == Closing::Open {
            self.peer.close.get_or_insert(CloseAsked {
                code: 1001,
                reason: Vec::new(),
                cut: false,
            });
        }
    }

    /// Writes into `out` a close the actor asked for; a client that has
    /// left more than the outbound limit unread (`unsent` bytes, and
    /// `out`) is sent a 1008 instead, and nothing more.
    pub(super) fn settle(&mut self, unsent: usize, outbound: usize, out: &mut BytesMut) {
        if unsent + out.len() > outbound {
            self.peer.close.get_or_insert_with(too_far_behind);
        }
        if let Some(close) = self.peer.close.take() {
            if self.closing == Closing::Open {
                write_close(out, close.code, &close.reason);
                self.cut_off |= close.code == 1008 && close.cut;
                self.closing = match close.cut {
                    true => Closing::Done,
                    false => Closing::Sent,
                };
                self.ended.get_or_insert(match self.peer.failed {
                    true => Closed::ProtocolError(close.code),
                    false => Closed::Handshake(Some(close.code)),
                });
            }
            // Nothing written after a close reaches the client.
            self.peer.close = Some(close);
        }
    }

    /// Tells the mail's limit what the client has not taken yet.
    pub(super) fn note_unsent(&self, unsent: usize) {
        self.peer.handle.bag.set_unsent(unsent);
    }

    /// Notes how the WebSocket ended, if nothing did before.
    pub(super) fn ended(&mut self, closed: Closed) {
        self.ended.get_or_insert(closed);
    }

    /// The WebSocket is over: its address and handle go, and the actor
    /// learns how it ended (unless it panicked; with no sender, as when
    /// the connection is dropped, it is not told).
    pub(super) fn end(mut self, shared: &Shared, sender: Option<&dyn AnySender>) {
        shared.websockets().close(&self.peer.handle);
        shared.forget_websocket(&self.peer.handle);
        let closed = self.ended.take().unwrap_or(Closed::Cut);
        if let Some(metrics) = shared.metrics() {
            metrics.websocket_close(match closed {
                Closed::Handshake(code) => Some(code.unwrap_or(1005)),
                Closed::ProtocolError(code) => Some(code),
                Closed::Cut => None,
            });
        }
        let (Some(sender), false) = (sender, self.peer.failed || std::thread::panicking()) else {
            return;
        };
        let context = shared.actor_context(sender);
        let address = self.peer.handle.address.clone();
        let mut out = BytesMut::new();
        context.run_as(&address, |sender| {
            self.peer
                .call(&mut out, sender, |actor, c| actor.on_close(&closed, c));
        });
    }

    /// A quiet client's ping is due: true when it is written into `out`
    /// (the first time); false when the client stayed quiet after one, or
    /// the close handshake has begun.
    pub(super) fn ping(&mut self, out: &mut BytesMut) -> bool {
        if self.ping_unanswered || self.closing != Closing::Open {
            return false;
        }
        self.ping_unanswered = true;
        self.events += 1;
        write_frame(out, Opcode::Ping, b"");
        true
    }
}

impl Connection {
    /// The request stream upgraded the connection: write the 101, make
    /// the session, open the actor, and serve the frames that came with
    /// the upgrade request.
    pub(super) fn begin_websocket(
        &mut self,
        upgraded: Upgraded,
        mut leftover: BytesMut,
        scratch: &mut Scratch,
        sender: &dyn AnySender,
    ) -> io::Result<Flow> {
        self.write_batch(&mut scratch.output)?;
        let mut session = WsSession::new(&self.shared, self.token.0, upgraded);
        let mut io = WsIo {
            shared: &self.shared,
            sender,
            out: &mut scratch.output,
        };
        session.open(&mut io);
        if !leftover.is_empty() {
            session.frames(&mut leftover, &mut io);
        }
        self.websocket = Some(Box::new(session));
        self.ws_settle(scratch)?;
        self.ws_drive(scratch, sender)
    }

    /// Handles what the poller posted to a WebSocket connection.
    pub(super) fn handle_websocket(
        &mut self,
        posted: u8,
        scratch: &mut Scratch,
        sender: &dyn AnySender,
    ) -> io::Result<Flow> {
        let mut flow = Ok(Flow::Open);
        if posted & MAIL != 0 {
            flow = self.ws_mail(scratch, sender);
        }
        // A relief comes as mail: reading goes on where it stopped, with no
        // edge to say so.
        let resumed = self.websocket.as_deref_mut().is_some_and(WsSession::resume);
        // Mail may have closed the connection; a drain closes it.
        let closing = self.websocket.as_deref().is_some_and(WsSession::is_done);
        if matches!(flow, Ok(Flow::Open))
            && (posted & (READY | HANGUP) != 0
                || resumed
                || closing
                || self.shared.phase() != Phase::Running)
        {
            flow = self.ws_drive(scratch, sender);
        }
        if matches!(flow, Ok(Flow::Open)) && posted & EXPIRE != 0 {
            flow = self.ws_expire(scratch);
        }
        flow
    }

    /// Reads and serves frames until the socket has no more, the output
    /// backs up, or the connection is done.
    fn ws_drive(&mut self, scratch: &mut Scratch, sender: &dyn AnySender) -> io::Result<Flow> {
        // As `drive`: in `local` dispatch a short read emptied the socket.
        let mut input_used_up = false;
        loop {
            if self.transport.is_backed_up() && !self.flush()? {
                self.ws_note_unsent();
                self.set_writable_interest(true)?;
                return Ok(Flow::Open);
            }
            self.ws_note_unsent();
            let Some(session) = self.websocket.as_deref_mut() else {
                return Ok(Flow::Close);
            };
            if session.is_done() {
                return Ok(Flow::Finished);
            }
            if session.closing == Closing::Open && self.shared.phase() != Phase::Running {
                session.go_away();
                self.ws_settle(scratch)?;
                continue;
            }
            if input_used_up || session.is_paused() {
                self.set_writable_interest(false)?;
                return Ok(Flow::Open);
            }
            let received = self.transport.read(&mut scratch.input);
            self.note_wire();
            match received {
                Ok(Received::End) | Ok(Received::NotTls { .. }) => {
                    self.ws_ended(Closed::Cut);
                    return Ok(Flow::Close);
                }
                Ok(Received::Nothing) => {
                    self.set_writable_interest(false)?;
                    return Ok(Flow::Open);
                }
                Ok(Received::Data { len, drained }) => {
                    input_used_up = drained && !self.mode.reads_until_blocked() && !self.hung_up;
                    if let Some(session) = self.websocket.as_deref_mut() {
                        let mut io = WsIo {
                            shared: &self.shared,
                            sender,
                            out: &mut scratch.output,
                        };
                        session.frames(&mut scratch.input[..len], &mut io);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            self.ws_settle(scratch)?;
        }
    }

    /// Writes what the actor's mail holds, and hands it its envelopes.
    fn ws_mail(&mut self, scratch: &mut Scratch, sender: &dyn AnySender) -> io::Result<Flow> {
        let unsent = self.transport.backlog_len();
        if let Some(session) = self.websocket.as_deref_mut() {
            let mut io = WsIo {
                shared: &self.shared,
                sender,
                out: &mut scratch.output,
            };
            session.mail(unsent, &mut io);
        }
        self.ws_settle(scratch)?;
        Ok(Flow::Open)
    }

    /// Writes a close the actor asked for, then the batch; a client that
    /// has left more than the outbound limit unread is sent a 1008 after
    /// it, and nothing more.
    fn ws_settle(&mut self, scratch: &mut Scratch) -> io::Result<()> {
        let outbound = self.shared.routes().websocket_limits().outbound;
        let unsent = self.transport.backlog_len();
        if let Some(session) = self.websocket.as_deref_mut() {
            session.settle(unsent, outbound, &mut scratch.output);
        }
        if !scratch.output.is_empty() {
            self.write_batch(&mut scratch.output)?;
        }
        self.ws_note_unsent();
        // Mail can back the output up between reads: ask for the edge
        // that says the client has taken some.
        if self.transport.is_backed_up() {
            self.set_writable_interest(true)?;
        }
        Ok(())
    }

    /// Tells the mail's limit what the socket has not taken yet.
    fn ws_note_unsent(&self) {
        if let Some(session) = self.websocket.as_deref() {
            session.note_unsent(self.transport.backlog_len());
        }
    }

    /// The deadline passed: a quiet client is pinged once, and closed if
    /// it stays quiet; a client that reads nothing is closed.
    fn ws_expire(&mut self, scratch: &mut Scratch) -> io::Result<Flow> {
        let Some(expiry) = self.timer.expired(self.shared.now_ms()) else {
            return Ok(Flow::Open);
        };
        let Some(session) = self.websocket.as_deref_mut() else {
            return Ok(Flow::Close);
        };
        if expiry == Expiry::WebSocketIdle && session.ping(&mut scratch.output) {
            self.write_batch(&mut scratch.output)?;
            return Ok(Flow::Open);
        }
        self.ws_ended(Closed::Cut);
        Ok(Flow::Close)
    }

    /// Notes how the connection ended, if nothing did before.
    fn ws_ended(&mut self, closed: Closed) {
        if let Some(session) = self.websocket.as_deref_mut() {
            session.ended(closed);
        }
    }

    /// The connection is over: its address and handle go, and the actor
    /// learns how it ended (unless it panicked).
    pub(super) fn end_websocket(&mut self, sender: Option<&dyn AnySender>) {
        if let Some(session) = self.websocket.take() {
            session.end(&self.shared, sender);
        }
    }
}

/// The close for a client that fell too far behind what is sent to it.
fn too_far_behind() -> CloseAsked {
    CloseAsked {
        code: 1008,
        reason: b"too far behind".to_vec(),
        cut: true,
    }
}

fn count_messages(metrics: &PollerMetrics, received: u64, sent: u64) {
    if received > 0 {
        metrics.add(&metrics.websocket_messages_received, received);
    }
    if sent > 0 {
        metrics.add(&metrics.websocket_messages_sent, sent);
    }
}
