//! How an HTTP/2 or HTTP/3 stream is answered by the HTTP/1.1 code: its
//! head and body become the HTTP/1.1 request they mean (`convert`), a
//! request stream of its own serves it ([`serve`]), and the response that
//! stream writes becomes the status, fields and body the stream sends
//! back. Every route kind, error, `HEAD`, `--header` field, middleware and
//! access-log line comes out as over HTTP/1.1, by construction; `http2/`
//! and `http3/` each drive their own protocol around this.

pub(crate) mod convert;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::http::date::DATE_LEN;
use crate::observe::access_line::AccessRecorder;
use crate::observe::access_log::AccessLog;
use crate::observe::metrics::PollerMetrics;
use crate::request_stream::{Call, CallEnd, RequestStream};
use crate::routes::table::Routes;

/// Everything a stream's request stream is served with.
pub(crate) struct Serving<'a> {
    pub(crate) routes: &'a Routes,
    pub(crate) date: &'a [u8; DATE_LEN],
    pub(crate) log: Option<&'a Arc<AccessLog>>,
    pub(crate) metrics: Option<&'a Arc<PollerMetrics>>,
}

/// The protocol a stream came over: what its access-log line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Http2,
    Http3,
}

/// Where a connection's streams come from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    pub(crate) peer: Option<SocketAddr>,
    /// Over TLS (`Request::is_secure`).
    pub(crate) secure: bool,
    pub(crate) protocol: Protocol,
}

/// A stream's request, served: answered (its response is in the output
/// given), or waiting for the answer of the call it made. Returned by
/// value and taken apart at once: boxing the stream of every request
/// answered would cost an allocation each; a call's is boxed, as it waits.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Served {
    Answered(RequestStream),
    Calling(Box<RequestStream>, Call),
}

/// Serves the HTTP/1.1 request `request` (written by `convert`) with a
/// request stream of its own, writing what it answers now into `response`.
pub(crate) fn serve(
    request: &[u8],
    origin: Origin,
    serving: &Serving<'_>,
    response: &mut BytesMut,
) -> Served {
    serve_on(stream_for(origin, serving), request, serving, response)
}

/// Serves the upgrade an HTTP/2 extended CONNECT means (written by
/// `convert::write_extended_connect`): for a WebSocket (`websocket`), a
/// WebSocket route answers `200` and leaves its actor in the stream
/// (`RequestStream::take_upgrade`), any other route 404; another protocol,
/// 501.
pub(crate) fn serve_extended_connect(
    request: &[u8],
    websocket: bool,
    origin: Origin,
    serving: &Serving<'_>,
    response: &mut BytesMut,
) -> Served {
    let mut stream = stream_for(origin, serving);
    stream.set_extended_connect(websocket);
    serve_on(stream, request, serving, response)
}

/// A request stream for one stream of a connection from `origin`.
fn stream_for(origin: Origin, serving: &Serving<'_>) -> RequestStream {
    let mut stream = RequestStream::default();
    stream.set_peer(origin.peer);
    stream.set_secure(origin.secure);
    if let Some(log) = serving.log {
        let mut recorder = AccessRecorder::new(log, origin.peer.map(|peer| peer.ip()));
        match origin.protocol {
            Protocol::Http2 => recorder.over_http2(),
            Protocol::Http3 => recorder.over_http3(),
        }
        stream.log_to(recorder);
    }
    if let Some(metrics) = serving.metrics {
        stream.count_to(Arc::clone(metrics));
    }
    stream
}

/// Serves `request` with `stream`.
fn serve_on(
    mut stream: RequestStream,
    request: &[u8],
    serving: &Serving<'_>,
    response: &mut BytesMut,
) -> Served {
    response.clear();
    stream.feed(request, serving.routes, serving.date, response);
    match stream.take_call() {
        Some(call) => Served::Calling(Box::new(stream), call),
        None => Served::Answered(stream),
    }
}

/// Ends the call `stream` made: its response is written into `response`.
pub(crate) fn complete(
    stream: &mut RequestStream,
    end: CallEnd,
    serving: &Serving<'_>,
    response: &mut BytesMut,
) {
    response.clear();
    stream.complete_call(end, serving.routes, serving.date, response);
}

/// What `stream` wrote, taken out of `response`: handed to the protocol,
/// which as far as the access log goes is sent.
pub(crate) fn written(mut stream: RequestStream, response: &mut BytesMut) -> Bytes {
    let written = response.split().freeze();
    stream.sent(written.len());
    drop(stream);
    written
}
