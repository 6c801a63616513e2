//! A connection's socket I/O, through its transport (plain, or TLS):
//! reading, writing with backpressure, the readiness it asks its poller for,
//! and closing without losing the last response. The actor around it is
//! `connection`.

use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use mio::Interest;
use uppercut::api::AnySender;

use super::{http2, Connection, Flow, Scratch, MAX_DISCARD_ON_CLOSE};
use crate::http::head::ResponseOut;
use crate::net::transport::Received;
use crate::runtime::lifecycle::Phase;
use crate::runtime::wakeup::EXPIRE;

impl Connection {
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
    pub(super) fn drive(
        &mut self,
        scratch: &mut Scratch,
        sender: &dyn AnySender,
    ) -> io::Result<Flow> {
        // A wake with no readiness (an actor's answer) finds the socket as
        // the last read left it: emptied, if that read was short.
        let mut input_used_up = self.socket_drained;
        loop {
            // Output we owe goes first. While the client does not take it,
            // read nothing more: that is the backpressure.
            if self.transport.is_backed_up() && !self.flush()? {
                self.set_writable_interest(true)?;
                return Ok(Flow::Open);
            }
            if self.stream.is_closed() {
                return Ok(Flow::Finished);
            }
            // A request (read now, or kept behind an actor's answer)
            // upgraded the connection: frames from here on.
            if let Some((upgraded, leftover)) = self.stream.take_upgrade() {
                return self.begin_websocket(upgraded, leftover, scratch, sender);
            }
            // Nothing more is read until the actor has answered.
            if self.stream.is_awaiting_call() {
                return Ok(Flow::Open);
            }
            // Per read too: a drain may begin while this wake is handled.
            self.note_phase();
            let date = self.shared.date();
            if self.stream.is_held_back() {
                self.stream
                    .resume(self.shared.routes(), &date, &mut scratch.output);
                self.run_calls(&date, scratch, sender);
            } else if input_used_up {
                return self.wait_for_input();
            } else {
                let received = self.transport.read(scratch.http_input());
                self.note_wire();
                match received {
                    Ok(Received::End) => return Ok(Flow::Close),
                    Ok(Received::NotTls { http }) => return self.refuse_plain_http(http, scratch),
                    Ok(Received::Nothing) => {
                        self.socket_drained = true;
                        return self.wait_for_input();
                    }
                    Ok(Received::Data { len, drained }) => {
                        input_used_up =
                            drained && !self.mode.reads_until_blocked() && !self.hung_up;
                        self.socket_drained = input_used_up;
                        // HTTP/2 is chosen by the first bytes: ALPN's
                        // choice, or the preface.
                        match self.http2_begins(&scratch.input[..len]) {
                            Opening::Http2(first) => {
                                return self.begin_http2(&first, scratch, sender)
                            }
                            Opening::Unknown => return self.wait_for_input(),
                            // An HTTP/2-only server: not the preface, no
                            // HTTP/2 (RFC 9113 §3.4), and nothing else.
                            Opening::Refused => return Ok(Flow::Close),
                            Opening::Http1 => {}
                        }
                        self.stream.feed(
                            &scratch.input[..len],
                            self.shared.routes(),
                            &date,
                            &mut scratch.output,
                        );
                        self.run_calls(&date, scratch, sender);
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
            // One write for all the responses this read produced.
            self.write_batch(&mut scratch.output)?;
        }
    }

    /// What `read` (the bytes just read) opens: HTTP/2 (with everything
    /// read so far), not yet known (the bytes are kept), HTTP/1.1 (and the
    /// bytes kept while it was not known are served first), or nothing
    /// this server speaks.
    fn http2_begins(&mut self, read: &[u8]) -> Opening {
        let Some(mut sniffed) = self.sniffing.take() else {
            return Opening::Http1;
        };
        if self.transport.chose_http2() {
            sniffed.extend_from_slice(read);
            return Opening::Http2(sniffed.to_vec());
        }
        if self.stream.responses() > 0 || self.stream.is_mid_request() {
            return Opening::Http1;
        }
        sniffed.extend_from_slice(read);
        match http2::opens_with_preface(&sniffed) {
            Some(true) => Opening::Http2(sniffed.to_vec()),
            None => {
                self.sniffing = Some(sniffed);
                Opening::Unknown
            }
            Some(false) if self.shared.http2_only() && !self.transport.is_tls() => Opening::Refused,
            Some(false) => {
                // Served as HTTP/1.1: what was kept, then this read.
                let kept = sniffed.len() - read.len();
                if kept > 0 {
                    let date = self.shared.date();
                    let mut output = BytesMut::new();
                    self.stream
                        .feed(&sniffed[..kept], self.shared.routes(), &date, &mut output);
                    // Nothing is answered from a part of a head.
                    debug_assert!(output.is_empty());
                }
                Opening::Http1
            }
        }
    }

    /// Everything read so far is served: wait for the next readiness edge.
    pub(super) fn wait_for_input(&mut self) -> io::Result<Flow> {
        if self.shared.phase() == Phase::Draining {
            // Shutting down: a connection between requests is done. Every
            // request it sent before this point was served.
            if !self.stream.is_mid_request() {
                return Ok(Flow::Close);
            }
            // The first time all there is has been read, a head still
            // arriving is judged (see `note_phase`).
            if !self.head_judged && self.stream.is_awaiting_head() {
                self.judge_head();
            }
        }
        self.set_writable_interest(false)?;
        Ok(Flow::Open)
    }

    /// Sends a batch of responses (or frames) behind everything sent
    /// before it; what the socket does not take waits in the transport.
    pub(super) fn write_batch(&mut self, batch: &mut BytesMut) -> io::Result<()> {
        let sent = self.transport.send(batch);
        batch.clear();
        self.note_wire();
        sent
    }

    /// Writes what waits until all of it went (true), or the socket is
    /// full.
    pub(super) fn flush(&mut self) -> io::Result<bool> {
        let flushed = self.transport.flush();
        self.note_wire();
        flushed
    }

    /// A plain HTTP request to a TLS port gets nginx's answer, a 400 in
    /// plain text saying so, and the connection closes; any other bytes
    /// that are not TLS just close it. (Counted and logged as a failed
    /// handshake.)
    pub(super) fn refuse_plain_http(
        &mut self,
        http: bool,
        scratch: &mut Scratch,
    ) -> io::Result<Flow> {
        if http {
            scratch.output.clear();
            let cause = "a plain HTTP request was sent to an HTTPS port";
            let date = self.shared.date();
            let persistence = crate::http::head::Persistence::Close;
            let routes = self.shared.routes();
            let mut to = ResponseOut::new(&mut scratch.output, &date, persistence, false)
                .with_added(routes.added.lines());
            routes.write_error(&mut to, 400, Some(cause), b"");
            let _ = self.transport.write_unencrypted(&scratch.output);
            scratch.output.clear();
            self.note_wire();
        }
        Ok(Flow::Close)
    }

    pub(super) fn set_writable_interest(&mut self, writable: bool) -> io::Result<()> {
        if self.writable_interest == writable {
            return Ok(());
        }
        let interest = if writable {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        self.shared
            .registry()
            .reregister(self.transport.socket_mut(), self.token, interest)?;
        self.writable_interest = writable;
        Ok(())
    }

    /// Reads and drops what the client already sent, so that closing the
    /// socket sends a FIN after our last response rather than a reset.
    pub(super) fn discard_unread(&mut self, scratch: &mut Scratch) -> Unread {
        let mut discarded = 0;
        while discarded < MAX_DISCARD_ON_CLOSE {
            let received = self.transport.read(scratch.http_input());
            self.note_wire();
            match received {
                Ok(Received::Data { len, .. }) => discarded += len.max(1),
                Ok(Received::Nothing) => break,
                Ok(Received::End | Received::NotTls { .. }) => return Unread::Ended,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Unread::Ended,
            }
        }
        match discarded {
            0 => Unread::Quiet,
            _ => Unread::Sending,
        }
    }

    /// The last response is out: if the client is still sending (a body
    /// the server refused, requests pipelined past a drain), shut the write
    /// side, so the client reads the response and an end, and keep reading
    /// and dropping what comes for `LINGER`, as nginx's lingering close:
    /// closing with unread input would reset the connection, and a reset
    /// can destroy the response before the client reads it. True when the
    /// connection lingers; false to close now.
    pub(super) fn begin_lingering(&mut self, scratch: &mut Scratch) -> bool {
        if self.hung_up || self.shared.phase() == Phase::Stopping {
            self.discard_unread(scratch);
            return false;
        }
        // Linger when input is waiting, or may be coming: a refused body's
        // next part can be a moment behind its head.
        let unread = self.discard_unread(scratch);
        if unread == Unread::Ended || (unread == Unread::Quiet && !self.stream.was_cut_short()) {
            return false;
        }
        let shut = self.transport.shutdown_write();
        self.note_wire();
        if shut.is_err() {
            return false;
        }
        self.lingering = true;
        true
    }

    /// Lingering: drops what arrived; closes at the client's end, an error,
    /// or once `LINGER` has passed.
    pub(super) fn linger(&mut self, posted: u8, scratch: &mut Scratch) -> Flow {
        if posted & EXPIRE != 0 && self.timer.expired(self.shared.now_ms()).is_some() {
            return Flow::Close;
        }
        if self.shared.phase() == Phase::Stopping {
            return Flow::Close;
        }
        // To the end of what is waiting: readiness is edge-triggered, so
        // input left unread raises no new edge once the client's window is
        // full, and both sides would wait out `LINGER`. A client that keeps
        // the poller reading past `LINGER_WAKE_BUDGET` in one wake is closed.
        let began = Instant::now();
        loop {
            match self.discard_unread(scratch) {
                Unread::Ended => return Flow::Close,
                Unread::Quiet => return Flow::Open,
                Unread::Sending if began.elapsed() > LINGER_WAKE_BUDGET => return Flow::Close,
                Unread::Sending => {}
            }
        }
    }
}

/// What a connection's first bytes open.
pub(super) enum Opening {
    /// HTTP/2, with the bytes read so far.
    Http2(Vec<u8>),
    /// Too few bytes to tell.
    Unknown,
    /// HTTP/1.1.
    Http1,
    /// Neither, on a server that speaks only HTTP/2 in plain text.
    Refused,
}

/// The longest one wake may spend dropping a lingering client's input.
const LINGER_WAKE_BUDGET: Duration = Duration::from_millis(10);

/// What reading and dropping the client's input found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unread {
    /// The client ended (or the socket failed): nothing more will come.
    Ended,
    /// Nothing was waiting.
    Quiet,
    /// Input was waiting: the client may still be sending.
    Sending,
}
