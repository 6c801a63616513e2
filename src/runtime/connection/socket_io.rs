//! A connection's socket I/O: reading, writing with backpressure, and the
//! readiness it asks its poller for. The actor around it is `connection`.

use std::io::{self, ErrorKind, Read};

use bytes::{Buf, BytesMut};
use mio::Interest;

use super::{Connection, Flow, Scratch, MAX_DISCARD_ON_CLOSE};
use crate::config::Dispatch;
use crate::net::socket::write_until_blocked;
use crate::runtime::lifecycle::Phase;

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
    pub(super) fn drive(&mut self, scratch: &mut Scratch) -> io::Result<Flow> {
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
            // Nothing more is read until the actor has answered.
            if self.stream.is_awaiting_call() {
                return Ok(Flow::Open);
            }
            // Per read too: a drain may begin while this wake is handled.
            self.note_phase();
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
                        self.count(|m| &m.bytes_received, len);
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
    pub(super) fn wait_for_input(&mut self) -> io::Result<Flow> {
        // Shutting down: a connection between requests is done. Every request
        // it sent before this point was served.
        if self.shared.server.phase() == Phase::Draining && !self.stream.is_mid_request() {
            return Ok(Flow::Close);
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
            .registry
            .reregister(&mut self.socket, self.token, interest)?;
        self.writable_interest = writable;
        Ok(())
    }

    /// Reads and drops what the client already sent, so that closing the
    /// socket sends a FIN after our last response rather than a reset.
    pub(super) fn discard_unread(&mut self, scratch: &mut Scratch) {
        let mut discarded = 0;
        while discarded < MAX_DISCARD_ON_CLOSE {
            match self.socket.read(&mut scratch.input) {
                Ok(0) => break,
                Ok(len) => {
                    self.count(|m| &m.bytes_received, len);
                    discarded += len;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }
}
