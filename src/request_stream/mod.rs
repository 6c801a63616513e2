//! One connection's HTTP/1.1 request stream as pure bytes in, bytes out:
//! framing (heads, Content-Length and chunked bodies), routing, persistence,
//! the responses in request order, and the input kept between reads. No
//! sockets here, so tests and the fuzz target drive exactly the path a
//! connection actor uses.

use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};

use crate::http::chunked::{ChunkedDecoder, Skipped};
use crate::http::date::DATE_LEN;
use crate::http::request::{parse_head, BodyFraming, Method, ParsedHead, RequestHead};
use crate::http::response::{status_and_body_len, ErrorStatus, Persistence, CONTINUE};
use crate::observe::access_line::AccessRecorder;
use crate::observe::metrics::PollerMetrics;
use crate::routes::{Reply, RouteAnswer, Routes};
use crate::upstream::failure::UpstreamFailure;

/// No new request is started while this much output is waiting: a client that
/// pipelines without reading cannot make the server buffer without bound.
pub const OUTPUT_HIGH_WATER: usize = 64 * 1024;

/// The response owed for a request whose body is still arriving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Answer {
    route: RouteAnswer,
    persistence: Persistence,
    head_only: bool,
}

impl Answer {
    fn for_head(routes: &Routes, head: &RequestHead, raw_head: &[u8]) -> Answer {
        let route = routes.answer_with_head(head, raw_head);
        let keeps = route.is_ok() || route.is_err_and(ErrorStatus::keeps_connection);
        let persistence = match (head.keep_alive && keeps, head.http10) {
            (false, _) => Persistence::Close,
            (true, false) => Persistence::KeepAlive,
            (true, true) => Persistence::KeepAliveHttp10,
        };
        Answer {
            route,
            persistence,
            head_only: head.method == Method::Head,
        }
    }

    fn fatal(status: ErrorStatus) -> Answer {
        Answer {
            route: Err(status),
            persistence: Persistence::Close,
            head_only: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for a request head.
    Head,
    /// Discarding a Content-Length body, this many bytes left.
    Body { left: u64, answer: Answer },
    /// Discarding a chunked body.
    Chunked {
        decoder: ChunkedDecoder,
        answer: Answer,
    },
    /// Waiting for the upstream's answer to the last request; later input
    /// is kept, so responses stay in request order.
    AwaitingUpstream {
        persistence: Persistence,
        head_only: bool,
    },
    /// A response that closes the connection was written; input is ignored.
    Closed,
}

/// What one call to [`Framer::serve`] did with its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Served {
    /// Bytes of input used; the caller keeps the rest for the next call.
    consumed: usize,
    /// Requests were left unserved because the output reached the high-water
    /// mark: serve the kept bytes again once the output has drained.
    held_back: bool,
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

    /// Part of a request has arrived (head or body), not all of it.
    pub fn is_mid_request(&self) -> bool {
        !self.kept.is_empty() || !matches!(self.framer.state, State::Head | State::Closed)
    }

    /// Reports every request and its response to `recorder` (the access log).
    pub fn log_to(&mut self, recorder: AccessRecorder) {
        self.framer.log = Some(recorder);
    }

    /// Counts every response by its status in `metrics`.
    pub fn count_to(&mut self, metrics: Arc<PollerMetrics>) {
        self.framer.metrics = Some(metrics);
    }

    /// Responses written so far.
    pub fn responses(&self) -> u64 {
        self.framer.responses
    }

    /// The request in progress took too long: answer 408 and close.
    pub fn time_out(&mut self, routes: &Routes, date: &[u8; DATE_LEN], out: &mut BytesMut) {
        let answer = Answer::fatal(ErrorStatus::RequestTimeout);
        self.framer.respond(answer, routes, date, out);
    }

    /// The last request waits for the upstream: send it, and call
    /// [`RequestStream::complete_upstream`] with the answer.
    pub fn awaiting_upstream(&self) -> bool {
        matches!(self.framer.state, State::AwaitingUpstream { .. })
    }

    /// Writes the upstream's answer (its JSON, or an error status) and
    /// serves the requests kept behind it.
    pub fn complete_upstream(
        &mut self,
        result: Result<Bytes, UpstreamFailure>,
        routes: &Routes,
        date: &[u8; DATE_LEN],
        out: &mut BytesMut,
    ) {
        let State::AwaitingUpstream {
            persistence,
            head_only,
        } = self.framer.state
        else {
            return;
        };
        let (status, body_len) = match result {
            Ok(body) => {
                let response = routes.upstream_response();
                response.write(out, &body, date, persistence, head_only);
                (200, body.len())
            }
            Err(failure) => (
                failure.status().code(),
                failure.write_response(out, date, persistence, head_only),
            ),
        };
        if let Some(log) = &mut self.framer.log {
            log.response(status, if head_only { 0 } else { body_len }, date);
        }
        if let Some(metrics) = &self.framer.metrics {
            metrics.status(status);
        }
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

/// Framing, routing and responses over a byte slice.
#[derive(Debug)]
struct Framer {
    state: State,
    responses: u64,
    log: Option<AccessRecorder>,
    metrics: Option<Arc<PollerMetrics>>,
}

impl Default for Framer {
    fn default() -> Self {
        Framer {
            state: State::Head,
            responses: 0,
            log: None,
            metrics: None,
        }
    }
}

impl Framer {
    /// Serves every complete request at the start of `input`, in order,
    /// appending the responses to `out`.
    fn serve(
        &mut self,
        input: &[u8],
        routes: &Routes,
        date: &[u8; DATE_LEN],
        out: &mut BytesMut,
    ) -> Served {
        let mut pos = 0;
        let mut held_back = false;
        while pos < input.len() {
            let rest = &input[pos..];
            match &mut self.state {
                State::Closed => pos = input.len(),
                State::AwaitingUpstream { .. } => break,
                State::Head if out.len() >= OUTPUT_HIGH_WATER => {
                    held_back = true;
                    break;
                }
                State::Head => match parse_head(rest) {
                    ParsedHead::Partial => break,
                    ParsedHead::Rejected { status, head_only } => {
                        if let Some(log) = &mut self.log {
                            log.request(rest, date);
                        }
                        let answer = Answer {
                            head_only,
                            ..Answer::fatal(status)
                        };
                        self.respond(answer, routes, date, out)
                    }
                    ParsedHead::Complete(head, len) => {
                        if let Some(log) = &mut self.log {
                            log.request(&rest[..len], date);
                        }
                        pos += len;
                        let raw_head = &rest[..len];
                        let answer = Answer::for_head(routes, &head, raw_head);
                        if head.expect_continue {
                            if answer.route.is_err() {
                                // Answer before inviting a body the answer does
                                // not need. The client may then send that body or
                                // not, so where the next request starts is
                                // unknown: close (RFC 9110 §10.1.1).
                                let answer = Answer {
                                    persistence: Persistence::Close,
                                    ..answer
                                };
                                self.respond(answer, routes, date, out);
                                continue;
                            }
                            out.extend_from_slice(CONTINUE);
                        }
                        match head.body {
                            BodyFraming::Empty => {
                                self.respond_to(answer, raw_head, routes, date, out)
                            }
                            BodyFraming::Length(left) => self.state = State::Body { left, answer },
                            BodyFraming::Chunked => {
                                self.state = State::Chunked {
                                    decoder: ChunkedDecoder::default(),
                                    answer,
                                }
                            }
                        }
                    }
                },
                State::Body { left, answer } => {
                    let take = (*left).min(rest.len() as u64);
                    pos += take as usize;
                    *left -= take;
                    if *left == 0 {
                        let answer = *answer;
                        self.respond(answer, routes, date, out);
                    }
                }
                State::Chunked { decoder, answer } => {
                    let answer = *answer;
                    match decoder.skip(rest) {
                        Ok(Skipped::NeedMore(len)) => {
                            pos += len;
                            break;
                        }
                        Ok(Skipped::Done(len)) => {
                            pos += len;
                            self.respond(answer, routes, date, out);
                        }
                        Err(status) => {
                            let answer = Answer {
                                head_only: answer.head_only,
                                ..Answer::fatal(status)
                            };
                            self.respond(answer, routes, date, out)
                        }
                    }
                }
            }
        }
        Served {
            consumed: pos,
            held_back,
        }
    }

    fn respond(
        &mut self,
        answer: Answer,
        routes: &Routes,
        date: &[u8; DATE_LEN],
        out: &mut BytesMut,
    ) {
        self.respond_to(answer, &[], routes, date, out);
    }

    /// Responds to the request whose head is `raw_head`, or empty when the
    /// head is no longer at hand (its body came after it).
    fn respond_to(
        &mut self,
        answer: Answer,
        raw_head: &[u8],
        routes: &Routes,
        date: &[u8; DATE_LEN],
        out: &mut BytesMut,
    ) {
        if answer.route == Ok(Reply::Upstream) {
            self.state = State::AwaitingUpstream {
                persistence: answer.persistence,
                head_only: answer.head_only,
            };
            return;
        }
        let (persistence, head_only) = (answer.persistence, answer.head_only);
        let start = out.len();
        routes.write(answer.route, raw_head, out, date, persistence, head_only);
        if let Some(log) = &mut self.log {
            let (status, body_len) = status_and_body_len(&out[start..]);
            log.response(status, body_len, date);
        }
        if let Some(metrics) = &self.metrics {
            metrics.response(&out[start..]);
        }
        self.finish(answer.persistence);
    }

    /// A response was written: wait for the next request, or close.
    fn finish(&mut self, persistence: Persistence) {
        self.responses += 1;
        self.state = match persistence {
            Persistence::Close => State::Closed,
            Persistence::KeepAlive | Persistence::KeepAliveHttp10 => State::Head,
        };
    }
}

#[cfg(test)]
mod tests;
