//! A connection's socket I/O: reading, writing with backpressure, and the
//! readiness it asks its poller for. The actor around it is `connection`.

use std::io::{self, ErrorKind, Read};
use std::net::Shutdown;

use bytes::{Buf, BytesMut};
use mio::Interest;
use uppercut::api::AnySender;

use super::{Connection, Flow, Scratch, MAX_DISCARD_ON_CLOSE};
use crate::net::socket::write_until_blocked;
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
        let mut input_used_up = false;
        loop {
            // Output we owe goes first. While the client does not take it,
            // read nothing more: that is the backpressure.
            if !self.output.is_empty() && !self.flush()? {
                self.set_writable_interest(true)?;
                return Ok(Flow::Open);
            }
            if self.stream.is_closed() {
                return Ok(Flow::Finished);
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
                match self.socket.read(&mut scratch.input) {
                    Ok(0) => return Ok(Flow::Close),
                    Ok(len) => {
                        self.count(|m| &m.bytes_received, len);
                        input_used_up = len < scratch.input.len()
                            && !self.mode.reads_until_blocked()
                            && !self.hung_up;
                        self.stream.feed(
                            &scratch.input[..len],
                            self.shared.routes(),
                            &date,
                            &mut scratch.output,
                        );
                        self.run_calls(&date, scratch, sender);
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

    /// Writes a batch of responses; what the socket does not take is kept.
    pub(super) fn write_batch(&mut self, batch: &mut BytesMut) -> io::Result<()> {
        let written = write_until_blocked(&mut self.socket, batch);
        if let Ok(written) = written {
            self.count(|m| &m.bytes_sent, written);
            self.stream.sent(written);
            self.wrote |= written > 0;
            self.output.extend_from_slice(&batch[written..]);
        }
        batch.clear();
        written.map(drop)
    }

    /// Writes kept output; true when all of it went.
    pub(super) fn flush(&mut self) -> io::Result<bool> {
        let written = write_until_blocked(&mut self.socket, &self.output)?;
        self.count(|m| &m.bytes_sent, written);
        self.stream.sent(written);
        self.wrote |= written > 0;
        self.output.advance(written);
        if self.output.is_empty() {
            self.output = BytesMut::new();
            return Ok(true);
        }
        Ok(false)
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
            .reregister(&mut self.socket, self.token, interest)?;
        self.writable_interest = writable;
        Ok(())
    }

    /// Reads and drops what the client already sent, so that closing the
    /// socket sends a FIN after our last response rather than a reset.
    pub(super) fn discard_unread(&mut self, scratch: &mut Scratch) -> Unread {
        let mut discarded = 0;
        while discarded < MAX_DISCARD_ON_CLOSE {
            match self.socket.read(&mut scratch.input) {
                Ok(0) => return Unread::Ended,
                Ok(len) => {
                    self.count(|m| &m.bytes_received, len);
                    discarded += len;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
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
        if self.discard_unread(scratch) != Unread::Sending {
            return false;
        }
        if self.socket.shutdown(Shutdown::Write).is_err() {
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
        match self.discard_unread(scratch) {
            Unread::Ended => Flow::Close,
            // Up to the cap per wake, so a fast sender cannot hold the
            // poller: what comes next raises a new edge.
            Unread::Quiet | Unread::Sending => Flow::Open,
        }
    }
}

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
