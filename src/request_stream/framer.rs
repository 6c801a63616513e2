//! Framing, routing and responses over a byte slice: the request stream's
//! state machine. Bodies are skipped, except those a handler or an actor
//! will see, which are collected after their head.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;

use crate::http::chunked::{ChunkedDecoder, Skipped};
use crate::http::date::DATE_LEN;
use crate::http::head::ResponseOut;
use crate::http::request::{parse_head, BodyFraming, Method, ParsedHead, RequestHead};
use crate::http::response::{status_and_body_len, Persistence, CONTINUE};
use crate::http::status::ErrorStatus;
use crate::observe::access_line::AccessRecorder;
use crate::observe::metrics::PollerMetrics;
use crate::request_stream::call::{call, Call};
use crate::request_stream::upgrade::{self, Upgraded};
use crate::routes::actor::RequestParts;
use crate::routes::middleware::{run_before, After, ChainIndex, IdValue};
use crate::routes::request::Request;
use crate::routes::table::{Reply, RouteAnswer, RouteSlot, Routes, NO_ROUTE};

/// No new request is started while this much output is waiting: a client that
/// pipelines without reading cannot make the server buffer without bound.
pub const OUTPUT_HIGH_WATER: usize = 64 * 1024;

/// The response owed for a request whose body is still arriving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Answer {
    route: RouteAnswer,
    /// Which route answers, for the metrics.
    slot: RouteSlot,
    pub(super) persistence: Persistence,
    pub(super) head_only: bool,
    /// The middleware the request passes (0: none).
    chain: ChainIndex,
}

/// What answers an extended CONNECT: for a WebSocket, a WebSocket route,
/// or a refusal; any other route's answer (a file, a handler, a method it
/// does not take) is no tunnel, so 404 (the route exists for other
/// requests, not for this one). A protocol other than `websocket` is one
/// this server does not implement: 501.
fn only_websockets(route: RouteAnswer, websocket: bool) -> RouteAnswer {
    match route {
        _ if !websocket => Err(ErrorStatus::NotImplemented),
        Ok(Reply::WebSocket(..)) => route,
        Ok(_) | Err(ErrorStatus::MethodNotAllowed) => Err(ErrorStatus::NotFound),
        Err(status) => Err(status),
    }
}

impl Answer {
    fn for_head(routes: &Routes, head: &RequestHead, raw_head: &[u8]) -> Answer {
        let (route, slot) = routes.answer_with_head(head, raw_head);
        let route = match route {
            // An upgrade request has no body (RFC 6455 §4.1): one with a
            // body is malformed, and where it ends is not worth learning.
            Ok(Reply::WebSocket(..)) if head.body != BodyFraming::Empty => {
                Err(ErrorStatus::BadRequest)
            }
            route => route,
        };
        let keeps = route.is_ok() || route.is_err_and(ErrorStatus::keeps_connection);
        let persistence = match (head.keep_alive && keeps, head.http10) {
            (false, _) => Persistence::Close,
            (true, false) => Persistence::KeepAlive,
            (true, true) => Persistence::KeepAliveHttp10,
        };
        Answer {
            route,
            slot,
            persistence,
            head_only: head.method == Method::Head,
            chain: routes.chain_for(head),
        }
    }

    pub(super) fn fatal(status: ErrorStatus) -> Answer {
        Answer {
            route: Err(status),
            slot: NO_ROUTE,
            persistence: Persistence::Close,
            head_only: false,
            chain: 0,
        }
    }

    /// A handler or an actor will see the request's body.
    fn reads_body(&self) -> bool {
        matches!(self.route, Ok(Reply::Handler(..) | Reply::Actor(..)))
    }

    /// The request's head is kept while its body arrives: the answer
    /// reads the body, or middleware will see the request.
    fn keeps_head(&self) -> bool {
        self.reads_body() || self.chain != 0
    }

    /// The path pattern that matched, for the routes that have one.
    fn pattern(&self) -> Option<usize> {
        match self.route {
            Ok(Reply::Handler(_, pattern) | Reply::Actor(_, pattern)) => pattern,
            Ok(Reply::WebSocket(_, pattern)) => pattern,
            _ => None,
        }
    }
}

/// What the `after` hooks of an actor route's middleware need once its
/// answer comes: the chain, and the request (its bytes shared with the
/// call, not copied).
#[derive(Debug)]
pub(super) struct AfterCall {
    pub(super) chain: ChainIndex,
    pub(super) parts: RequestParts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Waiting for a request head.
    Head,
    /// A Content-Length body, this many bytes left; kept in `collected`
    /// when the answer reads it, else skipped.
    Body { left: u64, answer: Answer },
    /// A chunked body, de-chunked into `collected` or skipped, as above.
    Chunked {
        decoder: ChunkedDecoder,
        answer: Answer,
    },
    /// Waiting for an actor's answer to the last request; later input is
    /// kept, so responses stay in request order.
    AwaitingReply {
        persistence: Persistence,
        head_only: bool,
    },
    /// A response that closes the connection was written; input is ignored.
    Closed,
    /// A WebSocket upgrade was answered 101: what follows is frames, left
    /// unread for the connection to hand to its WebSocket session.
    Upgraded,
}

/// What one call to [`Framer::serve`] did with its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Served {
    /// Bytes of input used; the caller keeps the rest for the next call.
    pub(super) consumed: usize,
    /// Requests were left unserved because the output reached the high-water
    /// mark: serve the kept bytes again once the output has drained.
    pub(super) held_back: bool,
}

/// Framing, routing and responses over a byte slice.
#[derive(Debug)]
pub(super) struct Framer {
    pub(super) state: State,
    pub(super) responses: u64,
    pub(super) log: Option<AccessRecorder>,
    pub(super) metrics: Option<Arc<PollerMetrics>>,
    /// With metrics: when the head of the request being answered was
    /// whole, and which route answers it.
    timing: Option<(Instant, RouteSlot)>,
    /// The head, then the body so far, of a request whose body a handler
    /// or an actor will see.
    collected: BytesMut,
    /// The actor request the last request made, until the connection takes it.
    pub(super) call: Option<Call>,
    /// The server is draining: the next response closes the connection.
    pub(super) closing: bool,
    /// A request was refused before all of it arrived (its head too long
    /// or malformed, a body refused or its chunks broken): the client may
    /// still be sending it.
    pub(super) cut_short: bool,
    /// The actor of the WebSocket the last request upgraded to, until the
    /// connection takes it.
    pub(super) upgraded: Option<Upgraded>,
    /// The client's address, for the requests handlers and actors see.
    pub(super) peer: Option<SocketAddr>,
    /// The requests come over TLS.
    pub(super) secure: bool,
    /// While an actor route's answer is awaited, what its middleware's
    /// `after` hooks need (none without middleware).
    pub(super) after_call: Option<Box<AfterCall>>,
    /// The request is an HTTP/2 extended CONNECT (RFC 8441), said as an
    /// upgrade: for a WebSocket (`Some(true)`), only a WebSocket route
    /// answers it, and with `200`, not `101`; for another protocol
    /// (`Some(false)`), 501.
    pub(super) extended_connect: Option<bool>,
}

impl Default for Framer {
    fn default() -> Self {
        Framer {
            state: State::Head,
            responses: 0,
            log: None,
            metrics: None,
            timing: None,
            collected: BytesMut::new(),
            call: None,
            closing: false,
            cut_short: false,
            upgraded: None,
            peer: None,
            secure: false,
            after_call: None,
            extended_connect: None,
        }
    }
}

impl Framer {
    /// Serves every complete request at the start of `input`, in order,
    /// appending the responses to `out`.
    pub(super) fn serve(
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
                State::AwaitingReply { .. } | State::Upgraded => break,
                State::Head if out.len() >= OUTPUT_HIGH_WATER => {
                    held_back = true;
                    break;
                }
                State::Head => match parse_head(rest, routes.max_body) {
                    ParsedHead::Partial => break,
                    ParsedHead::Rejected { status, head_only } => {
                        if let Some(log) = &mut self.log {
                            log.request(rest);
                        }
                        self.start_timing(NO_ROUTE);
                        let answer = Answer {
                            head_only,
                            ..Answer::fatal(status)
                        };
                        self.cut_short = true;
                        self.respond(answer, routes, date, out)
                    }
                    ParsedHead::Complete(head, len) => {
                        pos += len;
                        self.start(&head, &rest[..len], routes, date, out);
                    }
                },
                State::Body { left, answer } => {
                    let take = (*left).min(rest.len() as u64);
                    pos += take as usize;
                    *left -= take;
                    let (done, answer) = (*left == 0, *answer);
                    if answer.reads_body() {
                        self.collected.extend_from_slice(&rest[..take as usize]);
                    }
                    if done {
                        self.respond_collected(answer, routes, date, out);
                    }
                }
                State::Chunked { decoder, answer } => {
                    let answer = *answer;
                    let decoded = match answer.reads_body() {
                        true => decoder.decode(rest, &mut self.collected),
                        false => decoder.skip(rest),
                    };
                    match decoded {
                        Ok(Skipped::NeedMore(len)) => {
                            pos += len;
                            break;
                        }
                        Ok(Skipped::Done(len)) => {
                            pos += len;
                            self.respond_collected(answer, routes, date, out);
                        }
                        Err(status) => {
                            self.collected = BytesMut::new();
                            let answer = Answer {
                                head_only: answer.head_only,
                                ..Answer::fatal(status)
                            };
                            self.cut_short = true;
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

    /// A whole head has arrived: answer it, or wait for its body.
    fn start(
        &mut self,
        head: &RequestHead,
        raw_head: &[u8],
        routes: &Routes,
        date: &[u8; DATE_LEN],
        out: &mut BytesMut,
    ) {
        if let Some(log) = &mut self.log {
            log.request(raw_head);
        }
        let mut answer = Answer::for_head(routes, head, raw_head);
        if let Some(websocket) = self.extended_connect {
            answer.route = only_websockets(answer.route, websocket);
        }
        self.start_timing(answer.slot);
        if head.expect_continue {
            if Reply::is_refusal(&answer.route) {
                // Answer before inviting a body the answer does not need.
                // The client may then send that body or not, so where the
                // next request starts is unknown: close (RFC 9110 §10.1.1).
                let answer = Answer {
                    persistence: Persistence::Close,
                    ..answer
                };
                self.cut_short = true;
                let to = self.response_out(answer, routes, out, date);
                return self.respond_to(answer, head, raw_head, b"", routes, to);
            }
            out.extend_from_slice(CONTINUE);
            if let Some(log) = &mut self.log {
                log.interim(CONTINUE.len());
            }
        }
        match head.body {
            BodyFraming::Empty => {
                let to = self.response_out(answer, routes, out, date);
                self.respond_to(answer, head, raw_head, b"", routes, to)
            }
            BodyFraming::Length(left) => {
                self.collect_head(answer, raw_head);
                self.state = State::Body { left, answer };
            }
            BodyFraming::Chunked => {
                self.collect_head(answer, raw_head);
                self.state = State::Chunked {
                    decoder: ChunkedDecoder::new(routes.max_body),
                    answer,
                }
            }
        }
    }

    /// Keeps the head of a request whose body the answer reads, or whose
    /// middleware will see it.
    fn collect_head(&mut self, answer: Answer, raw_head: &[u8]) {
        if answer.keeps_head() {
            self.collected.clear();
            self.collected.extend_from_slice(raw_head);
        }
    }

    /// The body is complete: answer with the head and body collected (if
    /// the answer or its middleware reads them).
    fn respond_collected(
        &mut self,
        answer: Answer,
        routes: &Routes,
        date: &[u8; DATE_LEN],
        out: &mut BytesMut,
    ) {
        if !answer.keeps_head() {
            return self.respond(answer, routes, date, out);
        }
        let collected = std::mem::take(&mut self.collected);
        match parse_head(&collected, routes.max_body) {
            ParsedHead::Complete(head, head_len) => {
                let (raw_head, body) = collected.split_at(head_len);
                let to = self.response_out(answer, routes, out, date);
                self.respond_to(answer, &head, raw_head, body, routes, to);
            }
            // It parsed before it was kept.
            _ => self.respond(Answer::fatal(ErrorStatus::BadRequest), routes, date, out),
        }
    }

    /// Responds without the request at hand (an error, or a body skipped).
    pub(super) fn respond(
        &mut self,
        answer: Answer,
        routes: &Routes,
        date: &[u8; DATE_LEN],
        out: &mut BytesMut,
    ) {
        if let Some((_, slot)) = &mut self.timing {
            // An error ends the request whatever route it was for.
            *slot = answer.slot;
        }
        let mut to = self.response_out(answer, routes, out, date);
        self.write(&mut to, |to| routes.write(answer.route, &[], to));
    }

    /// Responds to the request `head`, whose bytes are `raw_head`, with its
    /// `body` (empty unless the answer reads it), into `to`, through its
    /// middleware if it has any.
    fn respond_to(
        &mut self,
        answer: Answer,
        head: &RequestHead,
        raw_head: &[u8],
        body: &[u8],
        routes: &Routes,
        to: ResponseOut<'_>,
    ) {
        let request = Request::new(head.method, head.path, head.query, raw_head, body)
            .with_params(routes.pattern_params(answer.pattern()).map(|p| &**p))
            .with_peer(self.peer)
            .with_secure(self.secure);
        match answer.chain {
            0 => self.dispatch(answer, head, raw_head, request, routes, to),
            _ => self.respond_wrapped(answer, head, raw_head, request, routes, to),
        }
    }

    /// Runs the request's `before` hooks: writes the early answer one
    /// gave, or else dispatches the request; either response gets the
    /// `after` hooks of those that ran.
    fn respond_wrapped(
        &mut self,
        answer: Answer,
        head: &RequestHead,
        raw_head: &[u8],
        request: Request<'_>,
        routes: &Routes,
        to: ResponseOut<'_>,
    ) {
        let chain = routes.chain(answer.chain);
        let mut id = IdValue::NONE;
        let mut unused = Some(to);
        let answered = run_before(chain, &request, &mut id, |ran, early, id| {
            let request = request.with_request_id(id.get());
            let after = After {
                chain: &chain[..ran],
                request: &request,
            };
            if let Some(to) = unused.take() {
                self.write(&mut to.with_after(&after), |to| early.write(to));
            }
        });
        let (false, Some(to)) = (answered, unused) else {
            return;
        };
        let request = request.with_request_id(id.get());
        let after = After {
            chain,
            request: &request,
        };
        self.dispatch(
            answer,
            head,
            raw_head,
            request,
            routes,
            to.with_after(&after),
        );
    }

    /// Answers `request` (whose head is `head`, its bytes `raw_head`) as
    /// its route does, into `to`.
    fn dispatch(
        &mut self,
        answer: Answer,
        head: &RequestHead,
        raw_head: &[u8],
        request: Request<'_>,
        routes: &Routes,
        mut to: ResponseOut<'_>,
    ) {
        match answer.route {
            Ok(Reply::Actor(actor, pattern)) => {
                let params = routes.pattern_params(pattern);
                let (body, peer, id) = (request.body(), self.peer, request.request_id());
                let mut call = call(actor, head, raw_head, body, params, peer, id);
                call.parts.secure = self.secure;
                if answer.chain != 0 {
                    self.after_call = Some(Box::new(AfterCall {
                        chain: answer.chain,
                        parts: call.parts.clone(),
                    }));
                }
                self.call = Some(call);
                self.state = State::AwaitingReply {
                    persistence: answer.persistence,
                    head_only: answer.head_only,
                };
            }
            Ok(Reply::WebSocket(index, _)) => {
                match upgrade::check(raw_head, routes.websocket_deflate_at(index)) {
                    Ok(accepted) => {
                        let start = to.out.len();
                        match self.extended_connect {
                            Some(_) => upgrade::write_established(&mut to, &accepted),
                            None => upgrade::write_switching(&mut to, &accepted),
                        }
                        self.written(&to.out[start..]);
                        self.responses += 1;
                        self.state = State::Upgraded;
                        let actor = routes.websocket_at(index)(&request);
                        let agreed = accepted.deflate.map(|(agreed, _)| agreed);
                        self.upgraded = Some(Upgraded(actor, agreed));
                    }
                    Err(status) => {
                        if !status.keeps_connection() {
                            to.persistence = Persistence::Close;
                        }
                        self.write(&mut to, |to| routes.write(Err(status), raw_head, to));
                    }
                }
            }
            Ok(Reply::Handler(handler, _)) => {
                self.write(&mut to, |to| {
                    routes.write_handler(handler, &request, to);
                });
            }
            _ => self.write(&mut to, |to| routes.write(answer.route, raw_head, to)),
        }
    }

    /// Where `answer`'s response goes: `out`, with the `Connection` header
    /// it decided unless the server has begun draining since.
    fn response_out<'a>(
        &self,
        answer: Answer,
        routes: &'a Routes,
        out: &'a mut BytesMut,
        date: &'a [u8; DATE_LEN],
    ) -> ResponseOut<'a> {
        let persistence = self.persistence(answer.persistence);
        ResponseOut::new(out, date, persistence, answer.head_only)
            .with_added(routes.added.lines_for(self.secure))
    }

    /// Writes one response into `to` with `write`, logs and counts it, and
    /// moves on.
    fn write(&mut self, to: &mut ResponseOut<'_>, write: impl FnOnce(&mut ResponseOut<'_>)) {
        let start = to.out.len();
        write(to);
        self.written(&to.out[start..]);
        self.finish(to.persistence);
    }

    /// What a response decided before the server began draining says now.
    pub(super) fn persistence(&self, decided: Persistence) -> Persistence {
        match self.closing {
            true => Persistence::Close,
            false => decided,
        }
    }

    /// With metrics: the request whose head is whole now goes to the
    /// route `slot`; its time runs until its response is written.
    fn start_timing(&mut self, slot: RouteSlot) {
        if self.metrics.is_some() {
            self.timing = Some((Instant::now(), slot));
        }
    }

    /// Logs and counts the response just written, and how long it took
    /// from its request's head (none for a request that never had one: a
    /// connection that timed out before sending a request).
    pub(super) fn written(&mut self, response: &[u8]) {
        if let Some(log) = &mut self.log {
            let (status, body_len) = status_and_body_len(response);
            log.response(status, response.len(), body_len);
        }
        if let Some(metrics) = &self.metrics {
            metrics.response(response);
            let (took, slot) = match self.timing.take() {
                Some((since, slot)) => (since.elapsed(), slot),
                None => (std::time::Duration::ZERO, NO_ROUTE),
            };
            metrics.latency(slot, took);
        }
    }

    /// The response about to be written was given by another server.
    pub(super) fn answered_by(&mut self, node: &[u8]) {
        if let Some(log) = &mut self.log {
            log.answered_by(node);
        }
    }

    /// A response was written: wait for the next request, or close.
    pub(super) fn finish(&mut self, persistence: Persistence) {
        self.responses += 1;
        self.state = match persistence {
            Persistence::Close => State::Closed,
            Persistence::KeepAlive | Persistence::KeepAliveHttp10 => State::Head,
        };
    }
}
