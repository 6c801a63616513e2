//! One HTTP/3 connection: a quinn-proto connection and its streams, with
//! no socket. The endpoint hands it what arrived for it and sends what it
//! has to send; [`Session::drive`] reads the streams, serves each request
//! through `gateway/` and writes the responses.
//!
//! A request stream goes through:
//!
//! - **receiving** its HEADERS frame, then its body's DATA frames until
//!   the stream ends (past the largest body, 413 at once, and the rest is
//!   refused with `STOP_SENDING`);
//! - **awaiting** its actor's answer, when its route is an actor's;
//! - **sending** its response (a HEADERS frame and a DATA frame) as the
//!   stream's flow control allows, then its end.
//!
//! The client's control stream must open with SETTINGS; its QPACK encoder
//! stream may only set the table's capacity to 0 (ours is 0); its decoder
//! stream is read and ignored (there is nothing to acknowledge). The
//! server opens one unidirectional stream, its control stream, with its
//! SETTINGS, and a GOAWAY there when it drains.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use quinn_proto::{Connection, Dir, Event, ReadError, StreamEvent, StreamId, VarInt, WriteError};

use crate::gateway::convert::read_response;
use crate::gateway::{Origin, Protocol, Served, Serving};
use crate::h3::frame::{self, Frame, FrameReader};
use crate::h3::{varint, H3Error};
use crate::http::request::MAX_HEAD_LEN;
use crate::http3::message;
use crate::http3::request::{Progress, Refused, RequestReader, MAX_FRAME};
use crate::request_stream::{Call, CallEnd, RequestStream};

/// The field section size announced (`SETTINGS_MAX_FIELD_SECTION_SIZE`),
/// an HTTP/1.1 head's limit as for HTTP/2. A larger one that still fits
/// in [`MAX_FRAME`] is answered 431, as over HTTP/1.1.
const MAX_FIELD_SECTION: u64 = MAX_HEAD_LEN as u64;

/// What the connection allows a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The largest request body, as for HTTP/1.1.
    pub(crate) max_body: u64,
}

/// What one request stream is doing.
enum Phase {
    /// Its HEADERS, then its body, are arriving.
    Receiving(RequestReader),
    /// Its route's actor has its request.
    Awaiting {
        stream: Box<RequestStream>,
        head_only: bool,
    },
    /// Its response's frames go out as the stream takes them.
    Sending { out: Bytes },
    /// All of it written and the stream finished: until the client has
    /// acknowledged it all (a drain closes the connection only then, or
    /// the response would be lost with it).
    Finishing,
}

/// A client's unidirectional stream.
enum Uni {
    /// Its type has not all come.
    Untyped(Vec<u8>),
    /// The control stream, and whether its SETTINGS came.
    Control { reader: FrameReader, settings: bool },
    /// QPACK's encoder stream: instructions for a table of capacity 0.
    Encoder(Vec<u8>),
    /// QPACK's decoder stream: read and dropped (nothing of ours waits
    /// for an acknowledgement).
    Decoder,
    /// A type unknown (grease, or an extension): refused with
    /// `STOP_SENDING`, what is read dropped.
    Ignored,
}

/// How the connection stands after a drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drive {
    Open,
    /// Closed (by either side, or lost): the endpoint forgets it once
    /// quinn-proto has drained it.
    Closed,
}

/// One HTTP/3 connection's state.
pub(crate) struct Session {
    conn: Connection,
    peer: SocketAddr,
    limits: Limits,
    requests: HashMap<StreamId, Phase>,
    uni: HashMap<StreamId, Uni>,
    /// Our control stream, once open, and what waits to go on it.
    control: Option<StreamId>,
    control_out: Vec<u8>,
    /// Calls streams made, for the endpoint to send.
    calls: Vec<(StreamId, Call)>,
    /// Calls sent, by call id: the stream awaiting the answer.
    awaited: HashMap<u64, StreamId>,
    request: BytesMut,
    response: BytesMut,
    /// Requests begun and answered, and streams the client reset.
    begun: u64,
    answered: u64,
    resets: u64,
    /// The first request stream a GOAWAY refused, once one was sent.
    goaway: Option<u64>,
    /// The highest client request stream seen, plus 4: what a GOAWAY names.
    next_request: u64,
    closed: bool,
}

impl Session {
    /// A session for a connection the endpoint just accepted.
    pub(crate) fn new(conn: Connection, peer: SocketAddr, limits: Limits) -> Session {
        Session {
            conn,
            peer,
            limits,
            requests: HashMap::new(),
            uni: HashMap::new(),
            control: None,
            control_out: Vec::new(),
            calls: Vec::new(),
            awaited: HashMap::new(),
            request: BytesMut::new(),
            response: BytesMut::new(),
            begun: 0,
            answered: 0,
            resets: 0,
            goaway: None,
            next_request: 0,
            closed: false,
        }
    }

    /// The QUIC connection, to hand it events and take its datagrams.
    pub(crate) fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Requests begun, requests answered, and streams reset, so far.
    pub(crate) fn progress(&self) -> (u64, u64, u64) {
        (self.begun, self.answered, self.resets)
    }

    /// Calls streams made since the last take: send each, then
    /// [`Session::sent_call`] it.
    pub(crate) fn take_calls(&mut self) -> Vec<(StreamId, Call)> {
        std::mem::take(&mut self.calls)
    }

    /// The call `id` for stream `stream` was sent.
    pub(crate) fn sent_call(&mut self, stream: StreamId, id: u64) {
        self.awaited.insert(id, stream);
    }

    /// Ends call `id`: its stream's response is written and sent.
    pub(crate) fn complete_call(&mut self, id: u64, end: CallEnd, serving: &Serving<'_>) {
        let Some(stream) = self.awaited.remove(&id) else {
            return;
        };
        let Some(Phase::Awaiting {
            stream: mut request,
            head_only,
        }) = self.requests.remove(&stream)
        else {
            return;
        };
        crate::gateway::complete(&mut request, end, serving, &mut self.response);
        self.respond(stream, *request, head_only);
    }

    /// The server drains: a GOAWAY naming the first request stream not
    /// taken; the requests begun are answered, then the connection closes.
    pub(crate) fn go_away(&mut self, now: Instant) {
        if self.goaway.is_none() && !self.closed {
            self.goaway = Some(self.next_request);
            frame::put_goaway(&mut self.control_out, self.next_request);
            self.flush_control();
        }
        if self.requests.is_empty() {
            self.close(now, H3Error::NoError);
        }
    }

    /// Closes the connection now with `error` (a CONNECTION_CLOSE).
    pub(crate) fn close(&mut self, now: Instant, error: H3Error) {
        if !self.closed {
            self.closed = true;
            let code = VarInt::from_u64(error.code()).unwrap_or(VarInt::from_u32(0x102));
            self.conn.close(now, code, Bytes::new());
        }
    }

    /// Handles what quinn-proto raised, reads every stream, serves what
    /// came whole and writes what waits, until nothing moves.
    pub(crate) fn drive(&mut self, now: Instant, serving: &Serving<'_>) -> Drive {
        while let Some(event) = self.conn.poll() {
            match event {
                Event::Connected => self.open_control(),
                Event::ConnectionLost { .. } => self.closed = true,
                Event::Stream(StreamEvent::Stopped { id, .. }) => {
                    // The client no longer wants this response.
                    if let Some(phase) = self.requests.remove(&id) {
                        if !matches!(phase, Phase::Finishing) {
                            self.resets += 1;
                        }
                    }
                }
                Event::Stream(StreamEvent::Finished { id }) => {
                    self.requests.remove(&id);
                }
                _ => {}
            }
        }
        if self.closed || self.conn.is_closed() {
            self.closed = true;
            return Drive::Closed;
        }
        if let Err(error) = self.accept_streams(now) {
            self.close(now, error);
            return Drive::Closed;
        }
        if let Err(error) = self.read_uni() {
            self.close(now, error);
            return Drive::Closed;
        }
        let ids: Vec<StreamId> = self.requests.keys().copied().collect();
        for id in ids {
            if let Err(error) = self.read_request(id, serving) {
                self.close(now, error);
                return Drive::Closed;
            }
            self.write_response(id);
        }
        self.flush_control();
        if self.goaway.is_some() && self.requests.is_empty() {
            self.close(now, H3Error::NoError);
        }
        Drive::Open
    }

    /// Opens the server's control stream with its SETTINGS (RFC 9114
    /// §6.2.1): no dynamic table, no blocked streams, the field section
    /// size HTTP/1.1 heads have.
    fn open_control(&mut self) {
        if self.control.is_some() {
            return;
        }
        let Some(id) = self.conn.streams().open(Dir::Uni) else {
            return;
        };
        self.control = Some(id);
        let mut out = Vec::new();
        varint::put(&mut out, crate::h3::CONTROL_STREAM);
        frame::put_settings(
            &mut out,
            &[
                (frame::SETTINGS_QPACK_MAX_TABLE_CAPACITY, 0),
                (frame::SETTINGS_QPACK_BLOCKED_STREAMS, 0),
                (frame::SETTINGS_MAX_FIELD_SECTION_SIZE, MAX_FIELD_SECTION),
            ],
        );
        out.append(&mut self.control_out);
        self.control_out = out;
        self.flush_control();
    }

    /// Writes what waits for the control stream.
    fn flush_control(&mut self) {
        let Some(id) = self.control else {
            return;
        };
        if self.control_out.is_empty() {
            return;
        }
        if let Ok(n) = self.conn.send_stream(id).write(&self.control_out) {
            self.control_out.drain(..n);
        }
    }

    /// Takes the streams the client opened: each bidirectional one a
    /// request (refused once a GOAWAY named an earlier one).
    fn accept_streams(&mut self, now: Instant) -> Result<(), H3Error> {
        let _ = now;
        while let Some(id) = self.conn.streams().accept(Dir::Bi) {
            let index = id.index();
            let number = index * 4;
            self.next_request = self.next_request.max(number + 4);
            if self.goaway.is_some_and(|first| number >= first) {
                let code = code(H3Error::RequestRejected);
                let _ = self.conn.send_stream(id).reset(code);
                let _ = self.conn.recv_stream(id).stop(code);
                continue;
            }
            self.begun += 1;
            self.requests
                .insert(id, Phase::Receiving(RequestReader::default()));
        }
        while let Some(id) = self.conn.streams().accept(Dir::Uni) {
            self.uni.insert(id, Uni::Untyped(Vec::new()));
        }
        Ok(())
    }

    /// Reads the client's unidirectional streams.
    fn read_uni(&mut self) -> Result<(), H3Error> {
        let ids: Vec<StreamId> = self.uni.keys().copied().collect();
        for id in ids {
            let (bytes, ended) = read_all(&mut self.conn, id);
            let ended = ended != Ended::No;
            let control_seen = self_has_control(&self.uni);
            let Some(state) = self.uni.get_mut(&id) else {
                continue;
            };
            if let Uni::Untyped(typed) = state {
                typed.extend_from_slice(&bytes);
                let Some((kind, len)) = varint::read(typed) else {
                    continue;
                };
                let rest = typed[len..].to_vec();
                *state = match kind {
                    crate::h3::CONTROL_STREAM if control_seen => {
                        return Err(H3Error::StreamCreation)
                    }
                    crate::h3::CONTROL_STREAM => Uni::Control {
                        reader: FrameReader::new(MAX_FRAME),
                        settings: false,
                    },
                    // Only a server pushes (§6.2.2).
                    crate::h3::PUSH_STREAM => return Err(H3Error::StreamCreation),
                    crate::h3::QPACK_ENCODER_STREAM => Uni::Encoder(Vec::new()),
                    crate::h3::QPACK_DECODER_STREAM => Uni::Decoder,
                    _ => {
                        let _ = self
                            .conn
                            .recv_stream(id)
                            .stop(code(H3Error::StreamCreation));
                        Uni::Ignored
                    }
                };
                feed_uni(state, &rest)?;
            } else {
                feed_uni(state, &bytes)?;
            }
            if ended {
                match self.uni.get(&id) {
                    Some(Uni::Control { .. } | Uni::Encoder(_) | Uni::Decoder) => {
                        return Err(H3Error::ClosedCriticalStream)
                    }
                    _ => {
                        self.uni.remove(&id);
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads request stream `id`: its frames, and when it ends, serves it.
    /// An error of the whole connection is returned; a malformed request
    /// resets its own stream.
    fn read_request(&mut self, id: StreamId, serving: &Serving<'_>) -> Result<(), H3Error> {
        let Some(Phase::Receiving(_)) = self.requests.get(&id) else {
            return Ok(());
        };
        let (bytes, ended) = read_all(&mut self.conn, id);
        if bytes.is_empty() && ended == Ended::No {
            return Ok(());
        }
        if ended == Ended::Reset {
            self.requests.remove(&id);
            self.resets += 1;
            return Ok(());
        }
        let Some(Phase::Receiving(reader)) = self.requests.get_mut(&id) else {
            return Ok(());
        };
        let progress = match reader.feed(&bytes, ended == Ended::Finished, self.limits.max_body) {
            Ok(Progress::More) => return Ok(()),
            Ok(progress) => progress,
            Err(Refused::Connection(error)) => return Err(error),
            Err(Refused::Stream(error)) => return self.refuse(id, error),
        };
        let Some(Phase::Receiving(reader)) = self.requests.remove(&id) else {
            return Ok(());
        };
        if progress != Progress::Whole {
            // Answered before the rest of the request: not wanted (§4.1.2).
            let _ = self.conn.recv_stream(id).stop(code(H3Error::NoError));
        }
        reader.write(progress, &mut self.request);
        self.serve(id, reader.is_head(), serving);
        Ok(())
    }

    /// Resets request stream `id` with `error` (a stream error).
    fn refuse(&mut self, id: StreamId, error: H3Error) -> Result<(), H3Error> {
        self.requests.remove(&id);
        let _ = self.conn.send_stream(id).reset(code(error));
        let _ = self.conn.recv_stream(id).stop(code(error));
        Ok(())
    }

    /// Serves the request written in `self.request` for stream `id`.
    fn serve(&mut self, id: StreamId, head_only: bool, serving: &Serving<'_>) {
        let origin = Origin {
            peer: Some(self.peer),
            secure: true,
            protocol: Protocol::Http3,
        };
        match crate::gateway::serve(&self.request, origin, serving, &mut self.response) {
            Served::Calling(stream, call) => {
                self.calls.push((id, call));
                self.requests
                    .insert(id, Phase::Awaiting { stream, head_only });
            }
            Served::Answered(stream) => self.respond(id, stream, head_only),
        }
    }

    /// Sends what `stream` wrote as the response of stream `id`.
    fn respond(&mut self, id: StreamId, stream: RequestStream, head_only: bool) {
        let written = crate::gateway::written(stream, &mut self.response);
        self.answered += 1;
        let Ok(converted) = read_response(written, head_only) else {
            let _ = self.conn.send_stream(id).reset(code(H3Error::Internal));
            return;
        };
        let mut block = Vec::new();
        message::response_fields(
            converted.head.status(),
            converted.head.headers(),
            &mut block,
        );
        let mut out = Vec::with_capacity(block.len() + converted.body.len() + 16);
        frame::put_head(&mut out, frame::HEADERS, block.len());
        out.extend_from_slice(&block);
        if !converted.body.is_empty() {
            frame::put_head(&mut out, frame::DATA, converted.body.len());
            out.extend_from_slice(&converted.body);
        }
        self.requests.insert(id, Phase::Sending { out: out.into() });
        self.write_response(id);
    }

    /// Writes what stream `id`'s response has left, and ends the stream
    /// once all of it went.
    fn write_response(&mut self, id: StreamId) {
        let Some(Phase::Sending { out }) = self.requests.get_mut(&id) else {
            return;
        };
        let mut send = self.conn.send_stream(id);
        while !out.is_empty() {
            match send.write(out) {
                Ok(n) => {
                    let _ = out.split_to(n);
                }
                Err(WriteError::Blocked) => return,
                Err(_) => {
                    self.requests.remove(&id);
                    return;
                }
            }
        }
        match send.finish() {
            Ok(()) => {
                self.requests.insert(id, Phase::Finishing);
            }
            Err(_) => {
                self.requests.remove(&id);
            }
        }
    }
}

/// Whether the client already opened its control stream.
fn self_has_control(uni: &HashMap<StreamId, Uni>) -> bool {
    uni.values()
        .any(|state| matches!(state, Uni::Control { .. }))
}

/// Feeds a typed unidirectional stream.
fn feed_uni(state: &mut Uni, bytes: &[u8]) -> Result<(), H3Error> {
    match state {
        Uni::Control { reader, settings } => {
            reader.feed(bytes);
            while let Some(frame) = reader.next()? {
                match (frame, *settings) {
                    (Frame::Settings(_), false) => *settings = true,
                    (_, false) => return Err(H3Error::MissingSettings),
                    (Frame::GoAway(_) | Frame::Push(..), true) => {}
                    (Frame::Settings(_) | Frame::Headers(_) | Frame::Data(_), true) => {
                        return Err(H3Error::FrameUnexpected)
                    }
                }
            }
            Ok(())
        }
        Uni::Encoder(pending) => {
            pending.extend_from_slice(bytes);
            // Only Set Dynamic Table Capacity (001xxxxx) to 0 fits a table
            // of capacity 0 (RFC 9204 §4.3.1).
            while let Some(&first) = pending.first() {
                if first != 0x20 {
                    return Err(H3Error::QpackEncoderStream);
                }
                pending.remove(0);
            }
            Ok(())
        }
        Uni::Untyped(_) | Uni::Decoder | Uni::Ignored => Ok(()),
    }
}

/// Whether a stream's incoming side ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    No,
    /// With its FIN: all of it came.
    Finished,
    /// Reset by the client (or already gone).
    Reset,
}

/// Everything stream `id` has for us now, and whether it ended.
fn read_all(conn: &mut Connection, id: StreamId) -> (Vec<u8>, Ended) {
    let mut bytes = Vec::new();
    let mut recv = conn.recv_stream(id);
    let Ok(mut chunks) = recv.read(true) else {
        return (bytes, Ended::Reset);
    };
    let ended = loop {
        match chunks.next(usize::MAX) {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk.bytes),
            Ok(None) => break Ended::Finished,
            Err(ReadError::Blocked) => break Ended::No,
            Err(ReadError::Reset(_)) => break Ended::Reset,
        }
    };
    let _ = chunks.finalize();
    (bytes, ended)
}

/// An error's code as quinn-proto takes it.
fn code(error: H3Error) -> VarInt {
    VarInt::from_u64(error.code()).unwrap_or(VarInt::from_u32(0x102))
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("peer", &self.peer)
            .field("requests", &self.requests.len())
            .finish_non_exhaustive()
    }
}
