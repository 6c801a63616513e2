//! One HTTP/2 connection's streams, with no socket: the connection puts
//! what it read in, [`Session::drive`] runs `h2` and answers what it can,
//! and the connection writes what came out. A stream's request is served
//! by a request stream of its own (`gateway`), so a stream whose actor is
//! slow waits alone: the others are answered meanwhile.
//!
//! A stream goes through:
//!
//! - **receiving** its body (released to the client's window as it comes,
//!   so the client may send up to the largest body; past it, 413 at once);
//! - **awaiting** its actor's answer, when its route is an actor's (the
//!   connection sends the call and brings the answer back);
//! - **sending** its response's body as the client's window allows.
//!
//! The limits and the attacks HTTP/2 is known for (too many streams,
//! streams reset as fast as they open, header lists past their size, a
//! flood of `CONTINUATION`, `SETTINGS` or `PING` frames) are `h2`'s, set
//! from [`Limits`]; a connection that breaks them gets a `GOAWAY` with the
//! error's code, written before the connection closes. A header block that
//! does not decompress is caught here first (`FrameWatch`, `hpack_check`),
//! since `h2` would call it a `PROTOCOL_ERROR`: its code is
//! `COMPRESSION_ERROR`.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use h2::server::{Connection, Handshake, SendResponse};
use h2::{Reason, RecvStream, SendStream};
use slab::Slab;

use crate::gateway::convert::{self as gateway, read_response};
pub(crate) use crate::gateway::Serving;
use crate::gateway::{Origin, Protocol, Served};
use crate::http2::hpack_check;
use crate::http2::pipe::{Flag, Pipe};
use crate::http2::tunnel::{Step, Tunnel};
use crate::request_stream::{Call, CallEnd, RequestStream, Upgraded};

/// What `h2` is told to allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Streams open at once (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub(crate) max_concurrent_streams: u32,
    /// A request's header list, decoded (`SETTINGS_MAX_HEADER_LIST_SIZE`).
    pub(crate) max_header_list_size: u32,
    /// The window a stream's body starts with, and the connection's.
    pub(crate) stream_window: u32,
    pub(crate) connection_window: u32,
    /// The largest request body, as for HTTP/1.1.
    pub(crate) max_body: u64,
    /// Streams reset by the client before they were answered, kept
    /// counted for rapid-reset protection (CVE-2023-44487).
    pub(crate) max_pending_resets: usize,
}

impl Limits {
    /// The server's defaults, with `max_body`.
    pub(crate) fn new(max_body: u64) -> Limits {
        Limits {
            max_concurrent_streams: 128,
            max_header_list_size: crate::http::request::MAX_HEAD_LEN as u32,
            stream_window: 256 * 1024,
            connection_window: 1024 * 1024,
            max_body,
            max_pending_resets: 20,
        }
    }
}

/// What one stream is doing.
enum Phase {
    /// Its body is arriving.
    Receiving {
        head: Box<http::request::Parts>,
        recv: RecvStream,
        body: BytesMut,
    },
    /// Its route's actor has its request.
    Awaiting {
        stream: Box<RequestStream>,
        head_only: bool,
    },
    /// Its response's body goes out as the window allows.
    Sending {
        send: SendStream<Bytes>,
        body: Bytes,
    },
    /// A WebSocket's frames, both ways (RFC 8441).
    Tunnel(Box<Tunnel>),
    /// Answered, or reset.
    Done,
}

/// What happened to the WebSocket streams, in order: the connection
/// opens, feeds and ends their sessions by these.
#[derive(Debug)]
pub(crate) enum TunnelEvent {
    /// An extended CONNECT was answered `200`: the stream is this actor's.
    Opened(usize, Upgraded),
    /// The client ended its side of the stream (its input, taken first,
    /// is the last).
    InputEnded(usize),
    /// The stream was reset and is gone.
    Reset(usize),
}

struct Stream {
    respond: SendResponse<Bytes>,
    phase: Phase,
}

enum Conn {
    Handshaking(Handshake<Pipe, Bytes>),
    Open(Connection<Pipe, Bytes>),
    Closed,
}

/// How the connection stands after a drive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Drive {
    /// Open: write the output, and wait for the next read or answer.
    Open,
    /// Over (the client went away, a `GOAWAY` went out, or the protocol was
    /// broken): write the output, then close. The `GOAWAY`'s code, when one
    /// went out.
    Closed(Option<Reason>),
}

/// One HTTP/2 connection's state.
pub(crate) struct Session {
    conn: Conn,
    pipe: Pipe,
    flag: Arc<Flag>,
    waker: Waker,
    streams: Slab<Stream>,
    /// Calls streams made, for the connection to send.
    calls: Vec<(usize, Call)>,
    /// Calls sent, by call id: the stream awaiting the answer.
    awaited: HashMap<u64, usize>,
    limits: Limits,
    peer: Option<SocketAddr>,
    /// The connection is TLS (`Request::is_secure`).
    secure: bool,
    request: BytesMut,
    response: BytesMut,
    /// Streams begun and answered, for the connection's clock, and
    /// streams the client reset before their answer.
    begun: u64,
    answered: u64,
    resets: u64,
    /// A `GOAWAY` was asked for (the server drains).
    going_away: bool,
    /// The code of the `GOAWAY` this side sent, if it did.
    goaway_sent: Option<Reason>,
    /// Counts the client's control frames.
    watch: FrameWatch,
    /// Finds the response data in what `h2` writes.
    output: OutputWatch,
    /// A `GOAWAY` asked for before the handshake was done.
    abort_pending: Option<Reason>,
    /// A header block did not decompress: once `h2` has taken everything
    /// before it, `GOAWAY COMPRESSION_ERROR` (RFC 9113 §4.3).
    undecodable: bool,
    /// What happened to WebSocket streams since the connection last took.
    tunnel_events: Vec<TunnelEvent>,
}

impl Session {
    /// A session for a client whose first bytes (the preface, and what
    /// followed) are `first`, read at `now_ms`.
    pub(crate) fn new(
        limits: Limits,
        peer: Option<SocketAddr>,
        first: &[u8],
        now_ms: u64,
    ) -> Session {
        let pipe = Pipe::default();
        let mut builder = h2::server::Builder::new();
        builder
            .max_concurrent_streams(limits.max_concurrent_streams)
            .max_header_list_size(limits.max_header_list_size)
            .initial_window_size(limits.stream_window)
            .initial_connection_window_size(limits.connection_window)
            .max_pending_accept_reset_streams(limits.max_pending_resets)
            .max_send_buffer_size(64 * 1024)
            // SETTINGS_ENABLE_CONNECT_PROTOCOL: WebSockets over streams.
            .enable_connect_protocol();
        let flag = Arc::new(Flag::default());
        let mut session = Session {
            conn: Conn::Handshaking(builder.handshake(pipe.clone())),
            waker: flag.waker(),
            flag,
            pipe,
            streams: Slab::new(),
            calls: Vec::new(),
            awaited: HashMap::new(),
            limits,
            peer,
            secure: false,
            request: BytesMut::new(),
            response: BytesMut::new(),
            begun: 0,
            answered: 0,
            resets: 0,
            going_away: false,
            goaway_sent: None,
            watch: FrameWatch::new(),
            output: OutputWatch::default(),
            abort_pending: None,
            undecodable: false,
            tunnel_events: Vec::new(),
        };
        session.feed(first, now_ms);
        session
    }

    /// Adds what was read from the client at `now_ms`; a client flooding
    /// the connection with control frames is sent `GOAWAY`
    /// (`ENHANCE_YOUR_CALM`) and nothing more of it is read.
    pub(crate) fn feed(&mut self, input: &[u8], now_ms: u64) {
        if self.watch.stopped {
            return;
        }
        match self.watch.feed(input, now_ms) {
            Watched::Fine => self.pipe.buffers().input.extend_from_slice(input),
            Watched::Flood => {
                // The read that crossed the limit still goes in (it may
                // hold the preface, without which no GOAWAY can be sent);
                // none after it.
                self.pipe.buffers().input.extend_from_slice(input);
                self.abort(Reason::ENHANCE_YOUR_CALM);
            }
            Watched::Undecodable(at) => {
                // What came before the block is served; the block never
                // reaches `h2`, which would call it a PROTOCOL_ERROR.
                self.pipe
                    .buffers()
                    .input
                    .extend_from_slice(&input[..at.min(input.len())]);
                self.undecodable = true;
                self.flag.wake_by_ref();
            }
        }
    }

    /// The client ended its side.
    pub(crate) fn end_input(&mut self) {
        self.pipe.buffers().ended = true;
    }

    /// Takes what `h2` wrote for the client into `out`; true when `h2`
    /// had more to write and was refused (drive again to let it).
    pub(crate) fn take_output(&mut self, out: &mut BytesMut) -> bool {
        let mut buffers = self.pipe.buffers();
        self.output.feed(&buffers.output);
        if out.is_empty() {
            std::mem::swap(out, &mut buffers.output);
        } else {
            out.extend_from_slice(&buffers.output);
            buffers.output.clear();
        }
        std::mem::take(&mut buffers.refused)
    }

    /// Bytes of output taken so far, and how far into them the last
    /// response data (a `DATA` frame's payload, which the client's window
    /// let through) reaches: while the socket takes bytes short of that
    /// mark, responses make progress; past it, only frames such as `PING`
    /// acknowledgements go, which are no progress.
    pub(crate) fn output_marks(&self) -> (u64, u64) {
        (self.output.taken, self.output.data_end)
    }

    /// Calls streams made since the last take: send each, then
    /// [`Session::sent_call`] it.
    pub(crate) fn take_calls(&mut self) -> Vec<(usize, Call)> {
        std::mem::take(&mut self.calls)
    }

    /// The call `id` for stream `key` was sent.
    pub(crate) fn sent_call(&mut self, key: usize, id: u64) {
        self.awaited.insert(id, key);
    }

    /// Streams begun and streams answered so far.
    pub(crate) fn progress(&self) -> (u64, u64) {
        (self.begun, self.answered)
    }

    /// Streams the client reset before their answer, so far.
    pub(crate) fn resets(&self) -> u64 {
        self.resets
    }

    /// A stream's body is arriving.
    pub(crate) fn is_receiving(&self) -> bool {
        self.streams
            .iter()
            .any(|(_, s)| matches!(s.phase, Phase::Receiving { .. }))
    }

    /// A response's body, or a WebSocket's output, waits for the client's
    /// window.
    pub(crate) fn is_sending(&self) -> bool {
        self.streams.iter().any(|(_, s)| match &s.phase {
            Phase::Sending { .. } => true,
            Phase::Tunnel(tunnel) => tunnel.is_sending(),
            _ => false,
        })
    }

    /// Streams open that are not WebSockets.
    pub(crate) fn open_requests(&self) -> usize {
        self.streams
            .iter()
            .filter(|(_, s)| !matches!(s.phase, Phase::Tunnel(_)))
            .count()
    }

    /// What happened to WebSocket streams since the last take.
    pub(crate) fn take_tunnel_events(&mut self, into: &mut Vec<TunnelEvent>) {
        into.append(&mut self.tunnel_events);
    }

    /// The WebSocket stream `key`.
    fn tunnel(&mut self, key: usize) -> Option<&mut Tunnel> {
        match &mut self.streams.get_mut(key)?.phase {
            Phase::Tunnel(tunnel) => Some(tunnel),
            _ => None,
        }
    }

    /// Takes what the client sent on WebSocket stream `key` (empty when
    /// nothing, or no such stream); its window reopens by as much.
    pub(crate) fn tunnel_input(&mut self, key: usize) -> BytesMut {
        let Some(tunnel) = self.tunnel(key) else {
            return BytesMut::new();
        };
        let input = tunnel.take_input();
        if !input.is_empty() {
            // The WINDOW_UPDATE goes in the next round.
            self.flag.wake_by_ref();
        }
        input
    }

    /// Queues `bytes` for the client on WebSocket stream `key`.
    pub(crate) fn tunnel_send(&mut self, key: usize, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if let Some(tunnel) = self.tunnel(key) {
            tunnel.send(bytes);
            self.flag.wake_by_ref();
        }
    }

    /// Bytes queued on WebSocket stream `key` that the client's window has
    /// not let go yet.
    pub(crate) fn tunnel_unsent(&self, key: usize) -> usize {
        match self.streams.get(key).map(|s| &s.phase) {
            Some(Phase::Tunnel(tunnel)) => tunnel.unsent(),
            _ => 0,
        }
    }

    /// The WebSocket on stream `key` is over: `END_STREAM` once its output
    /// is out.
    pub(crate) fn tunnel_finish(&mut self, key: usize) {
        if let Some(tunnel) = self.tunnel(key) {
            tunnel.finish();
            self.flag.wake_by_ref();
        }
    }

    /// The WebSocket on stream `key` is cut off (its client reads too
    /// little): `RST_STREAM CANCEL` now, whatever is queued.
    pub(crate) fn tunnel_cut(&mut self, key: usize) {
        if let Some(tunnel) = self.tunnel(key) {
            tunnel.reset(Reason::CANCEL);
            self.end(key);
            self.flag.wake_by_ref();
        }
    }

    /// Streams open.
    pub(crate) fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Ends call `id`: its stream's response is written and sent.
    pub(crate) fn complete_call(&mut self, id: u64, end: CallEnd, serving: &Serving<'_>) {
        let Some(key) = self.awaited.remove(&id) else {
            return;
        };
        let Some(stream) = self.streams.get_mut(key) else {
            return;
        };
        let Phase::Awaiting {
            mut stream,
            head_only,
        } = std::mem::replace(&mut stream.phase, Phase::Done)
        else {
            return;
        };
        crate::gateway::complete(&mut stream, end, serving, &mut self.response);
        self.respond(key, *stream, head_only);
    }

    /// The server drains: a `GOAWAY` naming the last stream taken; the
    /// streams begun are answered, then the connection ends.
    pub(crate) fn go_away(&mut self) {
        if self.going_away {
            return;
        }
        self.going_away = true;
        self.goaway_sent = Some(Reason::NO_ERROR);
        if let Conn::Open(conn) = &mut self.conn {
            conn.graceful_shutdown();
        }
        self.flag.wake_by_ref();
    }

    /// The connection is TLS: its requests say so.
    pub(crate) fn set_secure(&mut self, secure: bool) {
        self.secure = secure;
    }

    /// Pings the client (an idle connection's last chance); false when a
    /// ping cannot be sent.
    pub(crate) fn ping(&mut self) -> bool {
        let Conn::Open(conn) = &mut self.conn else {
            return false;
        };
        let sent = conn
            .ping_pong()
            .is_some_and(|mut ping| ping.send_ping(h2::Ping::opaque()).is_ok());
        self.flag.wake_by_ref();
        sent
    }

    /// Ends the connection now with `GOAWAY` and `reason`.
    pub(crate) fn abort(&mut self, reason: Reason) {
        match &mut self.conn {
            Conn::Open(conn) => {
                conn.abrupt_shutdown(reason);
                self.goaway_sent = Some(reason);
            }
            Conn::Handshaking(_) => self.abort_pending = Some(reason),
            Conn::Closed => {}
        }
        self.flag.wake_by_ref();
    }

    /// Runs `h2` and the streams until nothing moves: new streams begun
    /// (and answered, when their routes answer at once), bodies taken,
    /// responses sent as windows open.
    pub(crate) fn drive(&mut self, serving: &Serving<'_>) -> Drive {
        let waker = self.waker.clone();
        let mut task = Context::from_waker(&waker);
        loop {
            self.flag.take();
            if let Some(closed) = self.poll_connection(&mut task, serving) {
                return closed;
            }
            let keys: Vec<usize> = self.streams.iter().map(|(key, _)| key).collect();
            for key in keys {
                self.poll_stream(key, &mut task, serving);
            }
            // `h2` has read all it was given, and so has acted on every
            // frame before the block that does not decompress.
            if self.undecodable && self.pipe.buffers().input.is_empty() {
                self.undecodable = false;
                self.abort(Reason::COMPRESSION_ERROR);
            }
            if !self.flag.take() {
                return Drive::Open;
            }
        }
    }

    /// Moves the connection: the handshake, then new streams. `Some` when
    /// it ended.
    fn poll_connection(&mut self, task: &mut Context<'_>, serving: &Serving<'_>) -> Option<Drive> {
        if let Conn::Handshaking(handshake) = &mut self.conn {
            match Pin::new(handshake).poll(task) {
                Poll::Ready(Ok(conn)) => {
                    self.conn = Conn::Open(conn);
                    if let Some(reason) = self.abort_pending.take() {
                        self.abort(reason);
                    }
                }
                Poll::Ready(Err(e)) => {
                    self.conn = Conn::Closed;
                    return Some(Drive::Closed(goaway(&e)));
                }
                Poll::Pending => return None,
            }
        }
        let mut accepted = Vec::new();
        let ended = match &mut self.conn {
            Conn::Open(conn) => loop {
                match conn.poll_accept(task) {
                    Poll::Ready(Some(Ok(stream))) => accepted.push(stream),
                    Poll::Ready(Some(Err(e))) => break Some(goaway(&e)),
                    Poll::Ready(None) => break Some(self.goaway_sent),
                    Poll::Pending => break None,
                }
            },
            _ => Some(None),
        };
        for (request, respond) in accepted {
            self.begin(request, respond, serving);
        }
        let reason = ended?;
        self.conn = Conn::Closed;
        Some(Drive::Closed(reason))
    }

    /// A stream's head came.
    fn begin(
        &mut self,
        request: http::Request<RecvStream>,
        respond: SendResponse<Bytes>,
        serving: &Serving<'_>,
    ) {
        self.begun += 1;
        let (head, recv) = request.into_parts();
        let declared = head
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        let key = self.streams.insert(Stream {
            respond,
            phase: Phase::Done,
        });
        if let Some(protocol) = head.extensions.get::<h2::ext::Protocol>() {
            return self.connect(key, &head, protocol.as_str() == "websocket", recv, serving);
        }
        if recv.is_end_stream() {
            return self.serve(key, &head, b"", serving);
        }
        if let Some(declared) = declared.filter(|&declared| declared > self.limits.max_body) {
            return self.refuse_body(key, &head, declared, serving);
        }
        self.streams[key].phase = Phase::Receiving {
            head: Box::new(head),
            recv,
            body: BytesMut::new(),
        };
    }

    /// Moves one stream: its body in, or its response's body out.
    fn poll_stream(&mut self, key: usize, task: &mut Context<'_>, serving: &Serving<'_>) {
        let Some(stream) = self.streams.get_mut(key) else {
            return;
        };
        match &mut stream.phase {
            Phase::Receiving { recv, body, .. } => loop {
                match recv.poll_data(task) {
                    Poll::Ready(Some(Ok(data))) => {
                        let _ = recv.flow_control().release_capacity(data.len());
                        body.extend_from_slice(&data);
                        if body.len() as u64 > self.limits.max_body {
                            let declared = body.len() as u64;
                            let Phase::Receiving { head, .. } =
                                std::mem::replace(&mut stream.phase, Phase::Done)
                            else {
                                return;
                            };
                            return self.refuse_body(key, &head, declared, serving);
                        }
                    }
                    Poll::Ready(None) => {
                        let Phase::Receiving { head, body, .. } =
                            std::mem::replace(&mut stream.phase, Phase::Done)
                        else {
                            return;
                        };
                        return self.serve(key, &head, &body, serving);
                    }
                    // Reset by the client.
                    Poll::Ready(Some(Err(_))) => {
                        self.resets += 1;
                        return self.end(key);
                    }
                    Poll::Pending => return,
                }
            },
            Phase::Sending { send, body } => loop {
                if body.is_empty() {
                    return self.end(key);
                }
                send.reserve_capacity(body.len());
                match send.poll_capacity(task) {
                    Poll::Ready(Some(Ok(0))) | Poll::Pending => return,
                    Poll::Ready(Some(Ok(granted))) => {
                        let chunk = body.split_to(granted.min(body.len()));
                        if send.send_data(chunk, body.is_empty()).is_err() {
                            return self.end(key);
                        }
                    }
                    Poll::Ready(Some(Err(_)) | None) => return self.end(key),
                }
            },
            Phase::Awaiting { .. } => {
                // A stream the client reset while its actor worked: the
                // answer, when it comes, is dropped.
                if stream.respond.poll_reset(task).is_ready() {
                    self.resets += 1;
                    self.end(key);
                }
            }
            Phase::Tunnel(tunnel) => match tunnel.poll(task) {
                Step::Open => {}
                Step::InputEnded => self.tunnel_events.push(TunnelEvent::InputEnded(key)),
                // Not one of `resets`: a WebSocket's stream was answered.
                Step::Reset => {
                    self.tunnel_events.push(TunnelEvent::Reset(key));
                    self.end(key);
                }
                Step::Finished => self.end(key),
            },
            Phase::Done => self.end(key),
        }
    }

    /// An extended CONNECT (RFC 8441 §4; `h2` has checked its pseudo-header
    /// fields): served as the upgrade it means, and a WebSocket route's
    /// `200` makes the stream a tunnel; another protocol is 501, as a
    /// method the server does not implement (`gateway`).
    fn connect(
        &mut self,
        key: usize,
        head: &http::request::Parts,
        websocket: bool,
        recv: RecvStream,
        serving: &Serving<'_>,
    ) {
        let origin = Origin {
            peer: self.peer,
            secure: self.secure,
            protocol: Protocol::Http2,
        };
        gateway::write_extended_connect(head, &mut self.request);
        let served = crate::gateway::serve_extended_connect(
            &self.request,
            websocket,
            origin,
            serving,
            &mut self.response,
        );
        let mut stream = match served {
            Served::Answered(stream) => stream,
            // No route but a WebSocket's answers, and it makes no call.
            Served::Calling(stream, _) => *stream,
        };
        let Some((upgraded, _)) = stream.take_upgrade() else {
            // Refused (404, 426, 400): the response ends the stream.
            return self.respond(key, stream, false);
        };
        let written = crate::gateway::written(stream, &mut self.response);
        self.answered += 1;
        let Ok(converted) = read_response(written, false) else {
            self.streams[key].respond.send_reset(Reason::INTERNAL_ERROR);
            return self.end(key);
        };
        match self.streams[key]
            .respond
            .send_response(converted.head, false)
        {
            Ok(send) => {
                self.streams[key].phase = Phase::Tunnel(Box::new(Tunnel::new(recv, send)));
                self.tunnel_events.push(TunnelEvent::Opened(key, upgraded));
                self.flag.wake_by_ref();
            }
            Err(_) => self.end(key),
        }
    }

    /// Serves the request `head` with `body`: answered now, or its call
    /// left for the connection.
    fn serve(
        &mut self,
        key: usize,
        head: &http::request::Parts,
        body: &[u8],
        serving: &Serving<'_>,
    ) {
        gateway::write_request(head, body, &mut self.request);
        self.serve_written(key, head, serving);
    }

    /// A body past the largest: the request stream answers 413 from the
    /// head alone.
    fn refuse_body(
        &mut self,
        key: usize,
        head: &http::request::Parts,
        declared: u64,
        serving: &Serving<'_>,
    ) {
        gateway::write_request_head(head, declared, &mut self.request);
        self.serve_written(key, head, serving);
    }

    fn serve_written(&mut self, key: usize, head: &http::request::Parts, serving: &Serving<'_>) {
        let origin = Origin {
            peer: self.peer,
            secure: self.secure,
            protocol: Protocol::Http2,
        };
        let head_only = head.method == http::Method::HEAD;
        match crate::gateway::serve(&self.request, origin, serving, &mut self.response) {
            Served::Calling(stream, call) => {
                self.calls.push((key, call));
                self.streams[key].phase = Phase::Awaiting { stream, head_only };
            }
            Served::Answered(stream) => self.respond(key, stream, head_only),
        }
    }

    /// Sends what `stream` wrote as the response of stream `key`.
    fn respond(&mut self, key: usize, stream: RequestStream, head_only: bool) {
        // Handed to h2: as far as the access log goes, sent.
        let written = crate::gateway::written(stream, &mut self.response);
        self.answered += 1;
        let Some(entry) = self.streams.get_mut(key) else {
            return;
        };
        let converted = match read_response(written, head_only) {
            Ok(converted) => converted,
            Err(_) => {
                entry.respond.send_reset(Reason::INTERNAL_ERROR);
                return self.end(key);
            }
        };
        let end = converted.body.is_empty();
        match entry.respond.send_response(converted.head, end) {
            Ok(send) if !end => {
                entry.phase = Phase::Sending {
                    send,
                    body: converted.body,
                };
                self.flag.wake_by_ref();
            }
            _ => self.end(key),
        }
    }

    /// Stream `key` is over.
    fn end(&mut self, key: usize) {
        if self.streams.contains(key) {
            self.streams.remove(key);
        }
    }
}

/// The `GOAWAY` an `h2` error sent, if it was one of this side's (a
/// protocol error the client made, a limit it broke).
fn goaway(error: &h2::Error) -> Option<Reason> {
    match (error.is_go_away(), error.is_remote()) {
        (true, false) => error.reason(),
        _ => None,
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("streams", &self.streams.len())
            .field("awaited", &self.awaited.len())
            .finish_non_exhaustive()
    }
}

/// Control frames (`PING`, `SETTINGS`, `WINDOW_UPDATE`, `PRIORITY`, empty
/// `DATA` without `END_STREAM`) a client may send in a burst, and per second
/// after it: a client past them is flooding (the `PING` and `SETTINGS`
/// floods of CVE-2019-9512 and -9515 and their kin), which `h2` would
/// answer frame by frame.
const FLOOD_BURST: u32 = 1_000;
const FLOOD_PER_SECOND: u32 = 200;

/// Reads the frame headers of what the client sends, to count its control
/// frames, and its header blocks, to find one that does not decompress,
/// before `h2` reads the frames themselves.
#[derive(Debug)]
struct FrameWatch {
    /// Bytes of the preface still to pass.
    preface: usize,
    /// A frame header read so far.
    header: [u8; 9],
    have: usize,
    /// Bytes of the current frame's payload still to pass.
    payload: usize,
    /// The bucket: tokens left, as of `at_ms`.
    tokens: u32,
    at_ms: u64,
    /// Bytes read so far.
    offset: u64,
    /// The header blocks, while they can be followed.
    blocks: Option<Box<Blocks>>,
    /// Past the flood limit, or at a block that does not decompress:
    /// nothing more is read.
    stopped: bool,
}

/// The header blocks of a client's frames as they pass, each checked
/// whole (`hpack_check`).
#[derive(Debug, Default)]
struct Blocks {
    check: hpack_check::Check,
    /// The payload of the `HEADERS` or `CONTINUATION` frame passing, so far.
    frame: Vec<u8>,
    /// Its flags; whether it is a `HEADERS` frame.
    flags: u8,
    headers: bool,
    /// The block so far, while its frames come.
    block: Vec<u8>,
    /// A block has begun and not ended: only `CONTINUATION` may follow.
    open: bool,
    /// Where the block's first frame began, in bytes read.
    began: u64,
}

/// The most of one header block followed: past it (`h2` ends such a
/// connection itself), blocks are no longer followed.
const BLOCK_LIMIT: usize = 256 * 1024;
/// The largest frame `h2` takes (`SETTINGS_MAX_FRAME_SIZE`, its default).
const MAX_FRAME: usize = 16_384;

/// What a read held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watched {
    /// Nothing wrong (so far).
    Fine,
    /// The client is past the flood limit.
    Flood,
    /// A header block that does not decompress begins at this byte of the
    /// read (0 if it began in an earlier one): `h2` reads nothing from
    /// there.
    Undecodable(usize),
}

impl FrameWatch {
    /// A watch of bytes that begin with the preface.
    fn new() -> FrameWatch {
        FrameWatch {
            preface: 24,
            header: [0; 9],
            have: 0,
            payload: 0,
            tokens: FLOOD_BURST,
            at_ms: 0,
            offset: 0,
            blocks: Some(Box::default()),
            stopped: false,
        }
    }

    /// Reads the frames `input` holds (or begins).
    fn feed(&mut self, input: &[u8], now_ms: u64) -> Watched {
        if self.stopped {
            return Watched::Fine;
        }
        // Whole seconds refill; the part of a second left over counts
        // towards the next (reads every 1.5 s get 200 a second, not 133).
        let seconds = now_ms.saturating_sub(self.at_ms) / 1000;
        if seconds > 0 {
            let refill = u32::try_from(seconds)
                .unwrap_or(u32::MAX)
                .saturating_mul(FLOOD_PER_SECOND);
            self.tokens = self.tokens.saturating_add(refill).min(FLOOD_BURST);
            self.at_ms += seconds * 1000;
        }
        let start = self.offset;
        let mut rest = input;
        while !rest.is_empty() {
            if self.preface > 0 {
                let skip = self.preface.min(rest.len());
                self.preface -= skip;
                rest = self.pass(rest, skip);
                continue;
            }
            if self.payload > 0 {
                let skip = self.payload.min(rest.len());
                if let Some(blocks) = self.blocks.as_deref_mut().filter(|b| b.collecting()) {
                    blocks.frame.extend_from_slice(&rest[..skip]);
                }
                self.payload -= skip;
                rest = self.pass(rest, skip);
                if self.payload == 0 {
                    if let Some(began) = self.frame_done() {
                        self.stopped = true;
                        return Watched::Undecodable(began.saturating_sub(start) as usize);
                    }
                }
                continue;
            }
            let take = (9 - self.have).min(rest.len());
            self.header[self.have..self.have + take].copy_from_slice(&rest[..take]);
            self.have += take;
            rest = self.pass(rest, take);
            if self.have < 9 {
                break;
            }
            self.have = 0;
            let header = self.header;
            let len =
                usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
            self.payload = len;
            let (kind, flags) = (header[3], header[4]);
            let control = match kind {
                // DATA: empty, and not ending its stream.
                0x0 => len == 0 && flags & 0x1 == 0,
                // PRIORITY, SETTINGS and PING that are not ACKs,
                // WINDOW_UPDATE.
                0x2 | 0x8 => true,
                0x4 | 0x6 => flags & 0x1 == 0,
                _ => false,
            };
            if control {
                if self.tokens == 0 {
                    self.stopped = true;
                    return Watched::Flood;
                }
                self.tokens -= 1;
            }
            let began = self.offset - 9;
            self.frame_begins(kind, flags, len, began);
            if len == 0 {
                if let Some(began) = self.frame_done() {
                    self.stopped = true;
                    return Watched::Undecodable(began.saturating_sub(start) as usize);
                }
            }
        }
        Watched::Fine
    }

    /// `rest` past its first `len` bytes, which are read.
    fn pass<'a>(&mut self, rest: &'a [u8], len: usize) -> &'a [u8] {
        self.offset += len as u64;
        &rest[len..]
    }

    /// A frame of `kind` begins at byte `began`: a header block's frames
    /// are followed, as long as they come as HTTP/2 has them (else `h2`
    /// ends the connection, and blocks are not followed).
    fn frame_begins(&mut self, kind: u8, flags: u8, len: usize, began: u64) {
        let Some(blocks) = self.blocks.as_deref_mut() else {
            return;
        };
        let stream = u32::from_be_bytes([
            self.header[5] & 0x7f,
            self.header[6],
            self.header[7],
            self.header[8],
        ]);
        let follows = match kind {
            // HEADERS, on a stream, not inside another block.
            0x1 => !blocks.open && stream != 0,
            // CONTINUATION, inside a block.
            0x9 => blocks.open,
            _ => !blocks.open,
        };
        if !follows || len > MAX_FRAME {
            self.blocks = None;
            return;
        }
        if kind == 0x1 {
            blocks.began = began;
            blocks.block.clear();
        }
        blocks.headers = kind == 0x1;
        blocks.flags = flags;
        blocks.frame.clear();
        blocks.open |= kind == 0x1;
    }

    /// The payload of the frame passing is all read: where its block began
    /// if the block ended with it and does not decompress.
    fn frame_done(&mut self) -> Option<u64> {
        let blocks = self.blocks.as_deref_mut()?;
        if !blocks.collecting() {
            return None;
        }
        let Some(fragment) = blocks.fragment() else {
            // Padding past the payload: `h2` ends the connection.
            self.blocks = None;
            return None;
        };
        let (start, end) = fragment;
        if blocks.block.len() + (end - start) > BLOCK_LIMIT {
            self.blocks = None;
            return None;
        }
        blocks.block.extend_from_slice(&blocks.frame[start..end]);
        blocks.frame.clear();
        if blocks.flags & 0x4 == 0 {
            return None;
        }
        blocks.open = false;
        let decompressed = blocks.check.block(&blocks.block);
        if blocks.block.capacity() > 4096 {
            blocks.block = Vec::new();
            blocks.frame = Vec::new();
        }
        blocks.block.clear();
        decompressed.err().map(|_| blocks.began)
    }
}

impl Blocks {
    /// The frame passing is one of a header block.
    fn collecting(&self) -> bool {
        self.open
    }

    /// Where, in the frame's payload, its part of the block lies: a
    /// `HEADERS` frame's pad length and priority fields and its padding
    /// are not. `None` when the padding does not fit.
    fn fragment(&self) -> Option<(usize, usize)> {
        if !self.headers {
            return Some((0, self.frame.len()));
        }
        let mut start = 0;
        let mut pad = 0;
        if self.flags & 0x8 != 0 {
            pad = usize::from(*self.frame.first()?);
            start = 1;
        }
        if self.flags & 0x20 != 0 {
            start += 5;
        }
        let end = self.frame.len().checked_sub(pad)?;
        (start <= end).then_some((start, end))
    }
}

/// Reads the frame headers of what `h2` writes, to know where in the
/// output its response data lies.
#[derive(Debug, Default)]
struct OutputWatch {
    /// Bytes of output read so far.
    taken: u64,
    /// A frame header read so far.
    header: [u8; 9],
    have: usize,
    /// Bytes of the current frame's payload still to pass.
    payload: usize,
    /// Where the last `DATA` frame with a payload ends.
    data_end: u64,
}

impl OutputWatch {
    /// Reads `output`, the next bytes `h2` wrote (the server writes no
    /// preface: frames from the first byte).
    fn feed(&mut self, output: &[u8]) {
        let mut rest = output;
        while !rest.is_empty() {
            if self.payload > 0 {
                let skip = self.payload.min(rest.len());
                self.payload -= skip;
                self.taken += skip as u64;
                rest = &rest[skip..];
                continue;
            }
            let take = (9 - self.have).min(rest.len());
            self.header[self.have..self.have + take].copy_from_slice(&rest[..take]);
            self.have += take;
            self.taken += take as u64;
            rest = &rest[take..];
            if self.have < 9 {
                break;
            }
            self.have = 0;
            let header = self.header;
            let len =
                usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
            self.payload = len;
            if header[3] == 0x0 && len > 0 {
                self.data_end = self.taken + len as u64;
            }
        }
    }
}

/// How long an idle connection's ping may go unanswered.
pub(crate) const PING_GRACE: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, len: usize) -> Vec<u8> {
        let mut frame = vec![
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
            kind,
            0,
            0,
            0,
            0,
            1,
        ];
        frame.resize(9 + len, 7);
        frame
    }

    /// `count` `PING` frames (not ACKs): control frames the flood
    /// allowance counts.
    fn pings(count: u32) -> Vec<u8> {
        (0..count).flat_map(|_| frame(0x6, 8)).collect()
    }

    /// A watch past the preface and its burst, spent at time 0.
    fn spent_watch() -> FrameWatch {
        let mut watch = FrameWatch::new();
        assert_eq!(
            watch.feed(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0),
            Watched::Fine
        );
        assert_eq!(watch.feed(&pings(FLOOD_BURST), 0), Watched::Fine);
        watch
    }

    /// Over a minute of a clock the test steps, a client that reads every
    /// 700 ms and sends all its allowance each time gets exactly 200
    /// control frames per whole second since it spent its burst, the
    /// part of a second between reads carried to the next; one frame
    /// more is a flood.
    #[test]
    fn the_flood_allowance_refills_200_a_second_over_a_minute() {
        let mut watch = spent_watch();
        let mut sent = 0;
        for now_ms in (700..=59_500).step_by(700) {
            let allowed = FLOOD_PER_SECOND * (now_ms / 1000) as u32 - sent;
            assert_eq!(
                watch.feed(&pings(allowed), now_ms),
                Watched::Fine,
                "at {now_ms} ms"
            );
            sent += allowed;
        }
        assert_eq!(sent, 59 * FLOOD_PER_SECOND);
        // At 60 s, 200 more, and not one past them.
        assert_eq!(watch.feed(&pings(FLOOD_PER_SECOND), 60_000), Watched::Fine);
        assert_eq!(watch.feed(&pings(1), 60_999), Watched::Flood);
        // Stopped: nothing more is looked at.
        assert_eq!(watch.feed(&pings(1), 120_000), Watched::Fine);
    }

    /// The allowance builds up to the burst and no further: after a quiet
    /// minute, the burst again and not one frame more; one second short of
    /// refilling it, 200 fewer.
    #[test]
    fn a_quiet_minute_refills_the_burst_and_no_more() {
        let mut watch = spent_watch();
        assert_eq!(watch.feed(&pings(FLOOD_BURST), 60_000), Watched::Fine);
        assert_eq!(watch.feed(&pings(1), 60_000), Watched::Flood);
        let mut watch = spent_watch();
        let refilled = FLOOD_BURST / FLOOD_PER_SECOND;
        let short = u64::from(refilled - 1) * 1000 + 999;
        assert_eq!(
            watch.feed(&pings(FLOOD_BURST - FLOOD_PER_SECOND), short),
            Watched::Fine
        );
        assert_eq!(watch.feed(&pings(1), short), Watched::Flood);
    }

    /// The end of the last DATA frame with a payload, wherever the output
    /// is cut: PINGs and empty DATA frames after it do not move it.
    #[test]
    fn the_output_watch_finds_where_response_data_ends() {
        let mut output = frame(0x4, 6);
        output.extend(frame(0x1, 20));
        output.extend(frame(0x0, 300));
        let data_end = output.len() as u64;
        output.extend(frame(0x6, 8));
        output.extend(frame(0x0, 0));
        for cut in 0..output.len() {
            let mut watch = OutputWatch::default();
            watch.feed(&output[..cut]);
            watch.feed(&output[cut..]);
            assert_eq!(watch.taken, output.len() as u64, "cut at {cut}");
            assert_eq!(watch.data_end, data_end, "cut at {cut}");
        }
        let mut watch = OutputWatch::default();
        watch.feed(&output[..40]);
        assert_eq!(watch.data_end, 0, "no DATA yet");
    }
}
