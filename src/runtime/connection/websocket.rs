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
}

impl WsSession {
    /// Frames received and pings sent, for the idle clock.
    pub(super) fn events(&self) -> u64 {
        self.events
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
    fn is_paused(&self) -> bool {
        self.paused
            .as_ref()
            .is_some_and(|reliefs| reliefs.load(Ordering::Acquire) > 0)
    }

    /// Ends a pause whose reliefs have all come; true when it did.
    fn resume(&mut self) -> bool {
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
        let limits = self.shared.routes().websocket_limits();
        let handle = self.shared.open_websocket(self.token.0, limits.outbound);
        self.count(|m| &m.websocket_upgrades, 1);
        let Upgraded(actor, agreed) = upgraded;
        let frames = Session::new(limits.max_message);
        self.websocket = Some(Box::new(WsSession {
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
        }));
        self.ws_run(scratch, sender, |session, out, sender| {
            let written = session
                .peer
                .call(out, sender, |actor, context| actor.on_open(context));
            (0, written)
        });
        if !leftover.is_empty() {
            self.ws_frames(&mut leftover, scratch, sender);
        }
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
        let closing = self
            .websocket
            .as_deref()
            .is_some_and(|session| session.closing == Closing::Done);
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
            match session.closing {
                Closing::Done => return Ok(Flow::Finished),
                // Draining: going away (RFC 6455 §7.4.1).
                Closing::Open if self.shared.phase() != Phase::Running => {
                    session.peer.close.get_or_insert(CloseAsked {
                        code: 1001,
                        reason: Vec::new(),
                        cut: false,
                    });
                    self.ws_settle(scratch)?;
                    continue;
                }
                _ => {}
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
                    let mut input = std::mem::take(&mut scratch.input);
                    self.ws_frames(&mut input[..len], scratch, sender);
                    scratch.input = input;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            self.ws_settle(scratch)?;
        }
    }

    /// Runs `f` on the session as the connection's actor address, its
    /// output the scratch output; counts the messages it reports (received,
    /// sent).
    fn ws_run(
        &mut self,
        scratch: &mut Scratch,
        sender: &dyn AnySender,
        f: impl FnOnce(&mut WsSession, &mut BytesMut, &mut dyn AnySender) -> (u64, u64),
    ) {
        let Some(session) = self.websocket.as_deref_mut() else {
            return;
        };
        let shared = &*self.shared;
        let context = shared.actor_context(sender);
        let address = session.peer.handle.address.clone();
        let out = &mut scratch.output;
        // Only what this run's sends met counts.
        drop(mail::take_pressure());
        let (received, sent) = context.run_as(&address, |sender| f(session, out, sender));
        if let Some(pressure) = mail::take_pressure() {
            session.pause(&*pressure);
        }
        if let Some(metrics) = shared.metrics() {
            count_messages(metrics, received, sent);
            if session.peer.deflate.is_some() {
                let counts = session.take_compression_counts();
                metrics.websocket_deflate(counts);
            }
        }
    }

    /// Decodes `input` (unmasking it in place): each message to the actor,
    /// pings answered, and a close or a broken rule settled, all into the
    /// scratch output.
    fn ws_frames(&mut self, input: &mut [u8], scratch: &mut Scratch, sender: &dyn AnySender) {
        self.ws_run(scratch, sender, |session, out, sender| {
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

    /// Writes what the actor's mail holds, and hands it its envelopes.
    fn ws_mail(&mut self, scratch: &mut Scratch, sender: &dyn AnySender) -> io::Result<Flow> {
        let unsent = self.transport.backlog_len();
        let outbound = self.shared.routes().websocket_limits().outbound;
        self.ws_run(scratch, sender, |session, out, sender| {
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
        self.ws_settle(scratch)?;
        Ok(Flow::Open)
    }

    /// Writes a close the actor asked for, then the batch; a client that
    /// has left more than the outbound limit unread is sent a 1008 after
    /// it, and nothing more.
    fn ws_settle(&mut self, scratch: &mut Scratch) -> io::Result<()> {
        let outbound = self.shared.routes().websocket_limits().outbound;
        if let Some(session) = self.websocket.as_deref_mut() {
            if self.transport.backlog_len() + scratch.output.len() > outbound {
                session.peer.close.get_or_insert_with(too_far_behind);
            }
            if let Some(close) = session.peer.close.take() {
                if session.closing == Closing::Open {
                    write_close(&mut scratch.output, close.code, &close.reason);
                    session.closing = match close.cut {
                        true => Closing::Done,
                        false => Closing::Sent,
                    };
                    session.ended.get_or_insert(match session.peer.failed {
                        true => Closed::ProtocolError(close.code),
                        false => Closed::Handshake(Some(close.code)),
                    });
                }
                // Nothing written after a close reaches the client.
                session.peer.close = Some(close);
            }
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
            let unsent = self.transport.backlog_len();
            session.peer.handle.bag.set_unsent(unsent);
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
        match expiry {
            Expiry::WebSocketIdle
                if !session.ping_unanswered && session.closing == Closing::Open =>
            {
                session.ping_unanswered = true;
                session.events += 1;
                write_frame(&mut scratch.output, Opcode::Ping, b"");
                self.write_batch(&mut scratch.output)?;
                Ok(Flow::Open)
            }
            _ => {
                self.ws_ended(Closed::Cut);
                Ok(Flow::Close)
            }
        }
    }

    /// Notes how the connection ended, if nothing did before.
    fn ws_ended(&mut self, closed: Closed) {
        if let Some(session) = self.websocket.as_deref_mut() {
            session.ended.get_or_insert(closed);
        }
    }

    /// The connection is over: its address and handle go, and the actor
    /// learns how it ended (unless it panicked).
    pub(super) fn end_websocket(&mut self, sender: Option<&dyn AnySender>) {
        let Some(mut session) = self.websocket.take() else {
            return;
        };
        self.shared.websockets().close(&session.peer.handle);
        self.shared.forget_websocket(&session.peer.handle);
        let closed = session.ended.take().unwrap_or(Closed::Cut);
        if let Some(metrics) = self.shared.metrics() {
            metrics.websocket_close(match closed {
                Closed::Handshake(code) => Some(code.unwrap_or(1005)),
                Closed::ProtocolError(code) => Some(code),
                Closed::Cut => None,
            });
        }
        let (Some(sender), false) = (sender, session.peer.failed || std::thread::panicking())
        else {
            return;
        };
        let shared = &*self.shared;
        let context = shared.actor_context(sender);
        let address = session.peer.handle.address.clone();
        let mut out = BytesMut::new();
        context.run_as(&address, |sender| {
            session
                .peer
                .call(&mut out, sender, |actor, c| actor.on_close(&closed, c));
        });
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
