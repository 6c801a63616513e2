//! A connection speaking HTTP/2: chosen once, by ALPN on a TLS connection
//! or by the client's preface on a plain one (prior knowledge, `h2c`), and
//! from then on driven as an `http2::Session`: one read into it, its
//! streams answered, its calls sent, one write of what it wrote.
//!
//! The rules of HTTP/1.1 connections hold: only this connection writes its
//! socket, through its transport, behind what waits; while the client
//! leaves output unread nothing more is read (and `h2` itself stops
//! writing once its buffer is full), and the write timeout closes a client
//! that reads nothing, or whose responses make no progress however many
//! frames it sends (it measures the response data the socket takes), with a
//! `GOAWAY` first. Each stream's actor call has its route's reply
//! timeout; the connection's one deadline is the nearest of them and of
//! its own (the header timeout until a stream's request is whole, the
//! keep-alive timeout while idle, with a `PING` first).

use std::collections::HashMap;
use std::io::{self, ErrorKind};

use h2::Reason;
use uppercut::api::AnySender;

use super::http2_websocket::Http2WebSockets;
use super::{Connection, Flow, Scratch};
use crate::http2::session::{Drive, Limits, Serving, Session, PING_GRACE};
use crate::net::transport::Received;
use crate::observe::metrics::TimeoutKind;
use crate::request_stream::CallEnd;
use crate::routes::reply::Outcome;
use crate::runtime::lifecycle::Phase;
use crate::runtime::timeouts::Expiry;
use crate::runtime::wakeup::{EXPIRE, HANGUP, MAIL, READY, REPLY};

/// The code of the `GOAWAY` a write timeout sends: as every timeout's, no
/// protocol error, only time run out (the streams it names unfinished end
/// with the connection).
const WRITE_TIMEOUT_GOAWAY: Reason = Reason::NO_ERROR;

/// The client preface every HTTP/2 connection opens with (RFC 9113 §3.4).
pub(super) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether `bytes` (what a plain connection has read so far) open with the
/// preface: `Some(true)` yes, `Some(false)` no, `None` too few to tell.
pub(super) fn opens_with_preface(bytes: &[u8]) -> Option<bool> {
    let len = bytes.len().min(PREFACE.len());
    match bytes[..len] == PREFACE[..len] {
        false => Some(false),
        true if len == PREFACE.len() => Some(true),
        true => None,
    }
}

/// An HTTP/2 connection's state beyond its socket.
pub(super) struct Http2 {
    pub(super) session: Session,
    /// Calls sent and not answered: when each times out, in ms.
    calls: HashMap<u64, u64>,
    /// Answers taken from the mailbox (kept, so taking allocates nothing
    /// once warm).
    answers: Vec<(u64, Outcome)>,
    /// When the client last sent something, in ms.
    heard_ms: u64,
    /// When responses last made progress, in ms: the socket took bytes of
    /// their data (which the client's window let through), or the
    /// connection began to owe output. The write timeout runs from here,
    /// so frames the client sends (a `PING` every few seconds) do not hold
    /// a stalled response open.
    progress_ms: u64,
    /// Bytes of output the socket has taken, as of the last look.
    taken: u64,
    /// Output was owed at the last look: backed up, or a response's body
    /// waiting for the client's window.
    owing: bool,
    /// An idle connection was pinged, and nothing came since.
    pinged: bool,
    /// The session ended: the rest of the output goes, then the socket
    /// closes.
    ended: bool,
    /// WebSockets on streams (RFC 8441).
    pub(super) websockets: Http2WebSockets,
}

impl Connection {
    /// Begins HTTP/2 with what the client sent first (the preface and what
    /// followed it).
    pub(super) fn begin_http2(
        &mut self,
        first: &[u8],
        scratch: &mut Scratch,
        sender: &dyn AnySender,
    ) -> io::Result<Flow> {
        let limits = Limits::new(self.shared.routes().max_body);
        let now = self.shared.now_ms();
        let mut session = Session::new(limits, self.transport.peer_addr(), first, now);
        session.set_secure(self.transport.is_tls());
        self.mailbox.await_many();
        self.count(|m| &m.http2_connections, 1);
        self.http2 = Some(Box::new(Http2 {
            session,
            calls: HashMap::new(),
            answers: Vec::new(),
            heard_ms: now,
            progress_ms: now,
            taken: 0,
            owing: false,
            pinged: false,
            ended: false,
            websockets: Http2WebSockets::default(),
        }));
        self.http2_drive(scratch, sender)
    }

    /// Handles what the poller posted to an HTTP/2 connection.
    pub(super) fn handle_http2(
        &mut self,
        posted: u8,
        scratch: &mut Scratch,
        sender: &dyn AnySender,
    ) -> io::Result<Flow> {
        if posted & REPLY != 0 {
            self.http2_answers();
        }
        if posted & MAIL != 0 {
            self.http2_websocket_mail(sender);
        }
        if posted & EXPIRE != 0 {
            if let Some(flow) = self.http2_expire(scratch, sender)? {
                return Ok(flow);
            }
        }
        // Readiness, an answer, a drain: each may let streams move.
        let _ = posted & (READY | HANGUP);
        self.http2_drive(scratch, sender)
    }

    /// Hands each answer that came to its stream.
    fn http2_answers(&mut self) {
        let Some(mut h2) = self.http2.take() else {
            return;
        };
        self.mailbox.take_answers(&mut h2.answers);
        let shared = &*self.shared;
        let date = shared.date();
        let serving = Serving {
            routes: shared.routes(),
            date: &date,
            log: shared.access_log(),
            metrics: shared.metrics(),
        };
        let answers = std::mem::take(&mut h2.answers);
        let mut answers = answers;
        for (id, outcome) in answers.drain(..) {
            // An answer after its call timed out (or its stream was reset)
            // is dropped.
            if h2.calls.remove(&id).is_some() {
                h2.session
                    .complete_call(id, CallEnd::Outcome(outcome), &serving);
            }
        }
        h2.answers = answers;
        self.http2 = Some(h2);
    }

    /// The deadline passed: calls past their timeout answer 504; an idle
    /// connection is pinged, then closed; a client too slow to send its
    /// request, or to read, is closed with a `GOAWAY`. `Some` when the
    /// connection is done.
    fn http2_expire(
        &mut self,
        scratch: &mut Scratch,
        sender: &dyn AnySender,
    ) -> io::Result<Option<Flow>> {
        let now = self.shared.now_ms();
        let Some(expiry) = self.timer.expired(now) else {
            return Ok(None);
        };
        let Some(mut h2) = self.http2.take() else {
            return Ok(Some(Flow::Close));
        };
        let shared = &*self.shared;
        let date = shared.date();
        let serving = Serving {
            routes: shared.routes(),
            date: &date,
            log: shared.access_log(),
            metrics: shared.metrics(),
        };
        let late: Vec<u64> = h2
            .calls
            .iter()
            .filter(|(_, &deadline)| deadline <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            h2.calls.remove(&id);
            h2.session.complete_call(id, CallEnd::TimedOut, &serving);
        }
        match expiry {
            Expiry::Reply => {}
            Expiry::Idle if !h2.pinged => {
                h2.pinged = h2.session.ping();
                if !h2.pinged {
                    h2.session.abort(Reason::NO_ERROR);
                }
            }
            // Only WebSockets open, and the client quiet: a ping on each;
            // quiet through the next timeout too, the end.
            Expiry::WebSocketIdle if !h2.pinged => {
                h2.pinged = true;
                self.http2 = Some(h2);
                self.http2_ping_websockets();
                return Ok(None);
            }
            Expiry::Idle | Expiry::WebSocketIdle | Expiry::Linger => {
                self.count_timeout(TimeoutKind::Idle);
                h2.session.abort(Reason::NO_ERROR);
            }
            Expiry::Request => {
                self.count_timeout(TimeoutKind::Header);
                h2.session.abort(Reason::NO_ERROR);
            }
            Expiry::Write => {
                // Responses made no progress: a GOAWAY naming the last
                // stream taken, if the socket takes it now (one try: a
                // client this slow gets no more of our time), then the end.
                self.count_timeout(TimeoutKind::Write);
                h2.session.abort(WRITE_TIMEOUT_GOAWAY);
                self.http2 = Some(h2);
                self.http2_run(sender);
                self.http2_write(scratch)?;
                return Ok(Some(Flow::Close));
            }
        }
        self.http2 = Some(h2);
        let _ = (scratch, sender);
        Ok(None)
    }

    /// Reads what the client sent (unless it leaves output unread), drives
    /// the session, sends the calls its streams made, and writes what it
    /// wrote; until the socket has no more, or the connection is done.
    fn http2_drive(&mut self, scratch: &mut Scratch, sender: &dyn AnySender) -> io::Result<Flow> {
        let mut input_used_up = false;
        loop {
            let draining = self.shared.phase() != Phase::Running;
            if draining {
                if let Some(h2) = self.http2.as_deref_mut() {
                    h2.session.go_away();
                }
                self.http2_websockets_go_away(sender);
            }
            self.http2_run(sender);
            // Draining with nothing left in flight: the last GOAWAY now,
            // not after a PING round trip an idle client may never make.
            if let (true, Some(h2)) = (draining, self.http2.as_deref_mut()) {
                if h2.session.open_streams() == 0 && !h2.ended {
                    h2.session.abort(Reason::NO_ERROR);
                    self.http2_run(sender);
                }
            }
            let (ended, more) = self.http2_write(scratch)?;
            if ended {
                return Ok(Flow::Finished);
            }
            // Backpressure: nothing more is read while output waits.
            if self.transport.is_backed_up() {
                self.set_writable_interest(true)?;
                self.http2_note_deadline();
                return Ok(Flow::Open);
            }
            // h2 filled the pipe: the socket took it all, so let h2 go on.
            if more {
                continue;
            }
            if input_used_up {
                self.set_writable_interest(false)?;
                self.http2_note_deadline();
                return Ok(Flow::Open);
            }
            let received = self.transport.read(scratch.http_input());
            self.note_wire();
            let Some(h2) = self.http2.as_deref_mut() else {
                return Ok(Flow::Close);
            };
            match received {
                Ok(Received::Data { len, drained }) => {
                    input_used_up = drained && !self.mode.reads_until_blocked() && !self.hung_up;
                    h2.session.feed(&scratch.input[..len], self.shared.now_ms());
                    h2.heard_ms = self.shared.now_ms();
                    h2.pinged = false;
                }
                Ok(Received::Nothing) => {
                    self.set_writable_interest(false)?;
                    self.http2_note_deadline();
                    return Ok(Flow::Open);
                }
                Ok(Received::End | Received::NotTls { .. }) => {
                    h2.session.end_input();
                    input_used_up = true;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Drives the session, its streams' calls and its WebSockets until
    /// none has anything more for it.
    fn http2_run(&mut self, sender: &dyn AnySender) {
        loop {
            self.http2_run_streams(sender);
            if !self.http2_websockets(sender) {
                return;
            }
        }
    }

    /// Drives the session and sends the calls its streams made (an actor
    /// free on this thread answers at once, and its stream's response is
    /// written in the same batch), until none is left.
    fn http2_run_streams(&mut self, sender: &dyn AnySender) {
        let Some(mut h2) = self.http2.take() else {
            return;
        };
        loop {
            let shared = &*self.shared;
            let date = shared.date();
            let serving = Serving {
                routes: shared.routes(),
                date: &date,
                log: shared.access_log(),
                metrics: shared.metrics(),
            };
            let (begun, resets) = (h2.session.progress().0, h2.session.resets());
            let drive = h2.session.drive(&serving);
            let (now_begun, now_resets) = (h2.session.progress().0, h2.session.resets());
            self.count(|m| &m.http2_streams, (now_begun - begun) as usize);
            self.count(|m| &m.http2_resets, (now_resets - resets) as usize);
            if let Drive::Closed(goaway) = drive {
                if !h2.ended {
                    if let (Some(reason), Some(metrics)) = (goaway, shared.metrics()) {
                        metrics.http2_goaway(u32::from(reason));
                    }
                }
                h2.ended = true;
            }
            let calls = h2.session.take_calls();
            if calls.is_empty() {
                break;
            }
            for (key, call) in calls {
                let timeout = shared.routes().actor_routes()[call.actor].timeout;
                let (id, reply_to) = shared.new_call(self.token.0);
                h2.session.sent_call(key, id);
                match self.dispatch_call(call, id, reply_to, sender) {
                    Some(outcome) => {
                        let shared = &*self.shared;
                        let serving = Serving {
                            routes: shared.routes(),
                            date: &date,
                            log: shared.access_log(),
                            metrics: shared.metrics(),
                        };
                        h2.session
                            .complete_call(id, CallEnd::Outcome(outcome), &serving);
                    }
                    None => {
                        let deadline = self.shared.now_ms() + timeout.as_millis() as u64;
                        h2.calls.insert(id, deadline);
                    }
                }
            }
        }
        self.http2 = Some(h2);
    }

    /// Writes what the session wrote, unless the socket is behind (then
    /// it waits in the pipe, which refuses `h2` more once full): whether
    /// the session ended and all of it went (the socket may close), and
    /// whether `h2` has more to write.
    fn http2_write(&mut self, scratch: &mut Scratch) -> io::Result<(bool, bool)> {
        if self.transport.is_backed_up() && !self.flush()? {
            self.http2_note_taken();
            return Ok((false, false));
        }
        let Some(h2) = self.http2.as_deref_mut() else {
            return Ok((true, false));
        };
        scratch.output.clear();
        let more = h2.session.take_output(&mut scratch.output);
        let ended = h2.ended && !more;
        if !scratch.output.is_empty() {
            self.write_batch(&mut scratch.output)?;
        }
        self.http2_note_taken();
        Ok((ended && !self.transport.is_backed_up(), more))
    }

    /// Notes how much output the socket has taken: progress when it took
    /// bytes short of the end of the last response data.
    fn http2_note_taken(&mut self) {
        let backlog = self.transport.backlog_len() as u64;
        let now = self.shared.now_ms();
        let Some(h2) = self.http2.as_deref_mut() else {
            return;
        };
        let (handed, data_end) = h2.session.output_marks();
        let taken = handed.saturating_sub(backlog);
        if taken > h2.taken && h2.taken < data_end {
            h2.progress_ms = now;
        }
        h2.taken = taken;
    }

    /// Publishes the connection's deadline: the nearest call's timeout, or
    /// its own stage's.
    pub(super) fn http2_note_deadline(&mut self) {
        let backed_up = self.transport.is_backed_up();
        let now = self.shared.now_ms();
        let Some(h2) = self.http2.as_deref_mut() else {
            return;
        };
        let timeouts = self.shared.timeouts();
        let ms = |d: std::time::Duration| d.as_millis() as u64;
        let (begun, _) = h2.session.progress();
        let owing = backed_up || h2.session.is_sending();
        if owing && !h2.owing {
            h2.progress_ms = now;
        }
        h2.owing = owing;
        let (expiry, deadline) = if owing {
            (Expiry::Write, h2.progress_ms + ms(timeouts.write))
        } else if begun == 0 || h2.session.is_receiving() {
            (Expiry::Request, h2.heard_ms + ms(timeouts.header))
        } else if h2.session.open_requests() > 0 {
            // Streams wait for their actors: their own timeouts rule.
            (Expiry::Reply, u64::MAX)
        } else if h2.websockets.len() > 0 {
            // WebSockets, as over HTTP/1.1: a ping after the keep-alive
            // timeout, the end after another.
            let quiet = ms(timeouts.keepalive) * (1 + u64::from(h2.pinged));
            (Expiry::WebSocketIdle, h2.heard_ms + quiet)
        } else if h2.pinged {
            (
                Expiry::Idle,
                h2.heard_ms + ms(timeouts.keepalive) + ms(PING_GRACE),
            )
        } else {
            (Expiry::Idle, h2.heard_ms + ms(timeouts.keepalive))
        };
        let nearest_call = h2.calls.values().copied().min();
        match nearest_call {
            Some(call) if call < deadline => self.timer.set(Expiry::Reply, call),
            _ => self.timer.set(expiry, deadline),
        }
    }

    /// Speaking HTTP/2: the streams open but WebSockets (which, as over
    /// HTTP/1.1, are no request a close cuts short).
    pub(super) fn http2_open_streams(&self) -> Option<usize> {
        self.http2.as_deref().map(|h2| h2.session.open_requests())
    }

    /// An HTTP/2 connection is over: its calls end (answers that still
    /// come are dropped with the mailbox).
    pub(super) fn end_http2(&mut self) {
        self.http2_end_websockets(None);
        if let Some(h2) = self.http2.as_deref_mut() {
            h2.calls.clear();
        }
    }
}
