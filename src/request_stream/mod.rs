//! One connection's HTTP/1.1 request stream as pure bytes in, bytes out:
//! framing (heads, Content-Length and chunked bodies), routing, persistence,
//! the responses in request order, and the input kept between reads. No
//! sockets here, so tests and the fuzz target drive exactly the path a
//! connection actor uses. An actor route's request leaves a [`Call`] for
//! the connection to send; its answer comes back through
//! [`RequestStream::complete_call`].

mod call;
mod framer;
mod upgrade;

use std::sync::Arc;

use bytes::{Buf, BytesMut};

use crate::http::date::DATE_LEN;
use crate::http::head::ResponseOut;
use crate::http::response_fields::write_response;
use crate::http::status::ErrorStatus;
use crate::observe::access_line::AccessRecorder;
use crate::observe::metrics::PollerMetrics;
use crate::routes::middleware::After;
use crate::routes::reply::Outcome;
use crate::routes::table::Routes;
pub(crate) use call::Call;
pub use framer::OUTPUT_HIGH_WATER;
use framer::{Answer, Framer, State};
pub(crate) use upgrade::Upgraded;

/// How an actor route's request ended, as far as its connection knows.
#[derive(Debug)]
pub(crate) enum CallEnd {
    /// The actor's answer, or its absence (502).
    Outcome(Outcome),
    /// No answer within the route's timeout: 504.
    TimedOut,
}

/// A connection's request stream: the framing state, and the input kept
/// between reads (a partial head, or requests held back by the high-water
/// mark), which stays unallocated while every read holds whole requests.
#[derive(Debug, Default)]
pub struct RequestStream {
    framer: Framer,
    kept: BytesMut,
    held_back: bool,
}

impl RequestStream {
    /// A response that closes the connection has been written.
    pub fn is_closed(&self) -> bool {
        self.framer.state == State::Closed
    }

    /// The next response says `Connection: close` and ends the stream, so
    /// the client learns before it reuses the connection (RFC 9112 §9.6);
    /// the server is draining.
    pub(crate) fn close_after_response(&mut self) {
        self.framer.closing = true;
    }

    /// A request has begun and nothing has arrived behind it: part of its
    /// head is kept, or its body or its actor's answer is awaited.
    pub(crate) fn is_in_flight_alone(&self) -> bool {
        match self.framer.state {
            // Kept input that is not held back is an incomplete head: every
            // whole request before it was served.
            State::Head => !self.kept.is_empty() && !self.held_back,
            State::Body { .. } | State::Chunked { .. } | State::AwaitingReply { .. } => {
                self.kept.is_empty()
            }
            State::Closed | State::Upgraded => false,
        }
    }

    /// The stream closed on a request refused before all of it arrived:
    /// the client may still be sending it.
    pub(crate) fn was_cut_short(&self) -> bool {
        self.framer.cut_short
    }

    /// The last request upgraded the connection to a WebSocket: its actor,
    /// and the bytes read after the upgrade request (the first frames).
    /// The stream serves nothing more.
    pub(crate) fn take_upgrade(&mut self) -> Option<(Upgraded, BytesMut)> {
        let upgraded = self.framer.upgraded.take()?;
        self.held_back = false;
        Some((upgraded, std::mem::take(&mut self.kept)))
    }

    /// Waiting for a request head (part of one may be kept).
    pub(crate) fn is_awaiting_head(&self) -> bool {
        self.framer.state == State::Head
    }

    /// Part of a request has arrived (head or body), not all of it.
    pub(crate) fn is_mid_request(&self) -> bool {
        !self.kept.is_empty()
            || !matches!(
                self.framer.state,
                State::Head | State::Closed | State::Upgraded
            )
    }

    /// The request is an HTTP/2 extended CONNECT (RFC 8441), written as an
    /// upgrade: for a WebSocket (`websocket`), a WebSocket route answers it
    /// `200` (and [`RequestStream::take_upgrade`] gives its actor), any
    /// other route 404; for another protocol, 501.
    pub(crate) fn set_extended_connect(&mut self, websocket: bool) {
        self.framer.extended_connect = Some(websocket);
        if let Some(log) = &mut self.framer.log {
            log.extended_connect();
        }
    }

    /// The requests come over TLS (`Request::is_secure`).
    pub(crate) fn set_secure(&mut self, secure: bool) {
        self.framer.secure = secure;
    }

    /// The requests come from a client at `peer` (`Request::peer_addr`).
    pub(crate) fn set_peer(&mut self, peer: Option<std::net::SocketAddr>) {
        self.framer.peer = peer;
    }

    /// Reports every request and its response to `recorder` (the access log).
    pub(crate) fn log_to(&mut self, recorder: AccessRecorder) {
        self.framer.log = Some(recorder);
    }

    /// The socket took `len` more bytes of the output: the access log
    /// records the responses now sent whole (and, when the stream is
    /// dropped, what was sent of the rest).
    pub(crate) fn sent(&mut self, len: usize) {
        if let Some(log) = &mut self.framer.log {
            log.sent(len);
        }
    }

    /// Counts every response by its status in `metrics`.
    pub(crate) fn count_to(&mut self, metrics: Arc<PollerMetrics>) {
        self.framer.metrics = Some(metrics);
    }

    /// Responses written so far.
    pub(crate) fn responses(&self) -> u64 {
        self.framer.responses
    }

    /// The request in progress took too long: answer 408 and close.
    pub(crate) fn time_out(&mut self, routes: &Routes, date: &[u8; DATE_LEN], out: &mut BytesMut) {
        let answer = Answer::fatal(ErrorStatus::RequestTimeout);
        self.framer.respond(answer, routes, date, out);
    }

    /// The actor request the last request made, for the connection to
    /// send; it then calls [`RequestStream::complete_call`] with the end.
    pub(crate) fn take_call(&mut self) -> Option<Call> {
        self.framer.call.take()
    }

    /// The last request waits for an actor's answer.
    pub(crate) fn is_awaiting_call(&self) -> bool {
        matches!(self.framer.state, State::AwaitingReply { .. })
    }

    /// Writes the response to the request that waited for an actor, and
    /// serves the requests kept behind it.
    pub(crate) fn complete_call(
        &mut self,
        end: CallEnd,
        routes: &Routes,
        date: &[u8; DATE_LEN],
        out: &mut BytesMut,
    ) {
        let State::AwaitingReply {
            persistence,
            head_only,
        } = self.framer.state
        else {
            return;
        };
        let persistence = self.framer.persistence(persistence);
        let start = out.len();
        // The route's middleware adds its fields to the answer, the 502
        // and the 504 alike.
        let kept = self.framer.after_call.take();
        let request = kept.as_ref().map(|kept| kept.parts.request());
        let after = kept
            .as_ref()
            .zip(request.as_ref())
            .map(|(kept, request)| After {
                chain: routes.chain(kept.chain),
                request,
            });
        let to = ResponseOut::new(out, date, persistence, head_only)
            .with_added(routes.added.lines_for(self.framer.secure));
        let mut to = match &after {
            Some(after) => to.with_after(after),
            None => to,
        };
        match end {
            CallEnd::Outcome(Outcome::Answered(r)) => {
                if let Some(node) = &r.node {
                    self.framer.answered_by(node);
                }
                match (r.cause(), routes.error_hook()) {
                    // An error with a cause, whose body the application chose.
                    (Some(cause), Some(_)) => {
                        routes.write_error(&mut to, r.status, Some(cause), &r.headers)
                    }
                    _ => write_response(&mut to, r.status, r.content_type, &r.headers, &r.body),
                }
            }
            CallEnd::Outcome(Outcome::Gone) => {
                routes.response(Err(ErrorStatus::BadGateway)).write(&mut to)
            }
            CallEnd::TimedOut => routes
                .response(Err(ErrorStatus::GatewayTimeout))
                .write(&mut to),
        }
        self.framer.written(&out[start..]);
        self.framer.finish(persistence);
        self.resume(routes, date, out);
    }

    /// Kept input holds requests that wait for the output to drain: call
    /// [`RequestStream::resume`] once it has, before reading more.
    pub fn is_held_back(&self) -> bool {
        self.held_back
    }

    /// Serves freshly read bytes, appending responses to `out`. They are
    /// parsed where they lie when nothing was kept from before.
    pub fn feed(
        &mut self,
        data: &[u8],
        routes: &Routes,
        date: &[u8; DATE_LEN],
        out: &mut BytesMut,
    ) {
        if !self.kept.is_empty() {
            self.kept.extend_from_slice(data);
            return self.resume(routes, date, out);
        }
        let served = self.framer.serve(data, routes, date, out);
        self.kept.extend_from_slice(&data[served.consumed..]);
        self.held_back = served.held_back;
    }

    /// Serves the kept input.
    pub fn resume(&mut self, routes: &Routes, date: &[u8; DATE_LEN], out: &mut BytesMut) {
        let served = self.framer.serve(&self.kept, routes, date, out);
        self.kept.advance(served.consumed);
        self.held_back = served.held_back;
        if self.kept.is_empty() {
            // Give the memory back: an idle connection keeps no buffer.
            self.kept = BytesMut::new();
        }
    }
}

#[cfg(test)]
mod tests;
