//! A WebSocket on an HTTP/2 stream (RFC 8441): after the `200` that
//! answers an extended CONNECT, the stream's `DATA` carries WebSocket
//! frames both ways. The session only moves bytes: what the client sends
//! waits here until the connection's WebSocket session takes it (its
//! window reopened only then, so a WebSocket that stops reading stops its
//! client, and no other stream); what that session writes waits here until
//! the client's window lets it go. The frames themselves are the
//! connection's business (`runtime::connection::websocket`).

use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use h2::{Reason, RecvStream, SendStream};

/// One WebSocket stream's bytes.
pub(super) struct Tunnel {
    recv: RecvStream,
    send: SendStream<Bytes>,
    /// Received from the client, not yet taken.
    input: BytesMut,
    /// To send, as the client's window allows.
    output: BytesMut,
    /// The client ended its side (`END_STREAM`).
    input_ended: bool,
    /// Once the output is out, this side ends too.
    finish: bool,
}

/// What a poll found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Still open.
    Open,
    /// The client ended its side just now: what it sent before is input.
    InputEnded,
    /// The stream was reset (by the client, or broken): it is gone.
    Reset,
    /// This side's `END_STREAM` went after the last output: it is done.
    Finished,
}

impl Tunnel {
    pub(super) fn new(recv: RecvStream, send: SendStream<Bytes>) -> Tunnel {
        // A client that ended its side with the CONNECT is told so by the
        // first poll, as any other end.
        Tunnel {
            recv,
            send,
            input: BytesMut::new(),
            output: BytesMut::new(),
            input_ended: false,
            finish: false,
        }
    }

    /// Takes what the client sent, reopening its window by as much.
    pub(super) fn take_input(&mut self) -> BytesMut {
        let input = self.input.split();
        if !input.is_empty() {
            let _ = self.recv.flow_control().release_capacity(input.len());
        }
        input
    }

    /// Queues `bytes` for the client; nothing after the end.
    pub(super) fn send(&mut self, bytes: &[u8]) {
        if !self.finish {
            self.output.extend_from_slice(bytes);
        }
    }

    /// Bytes queued that the client's window has not let go yet.
    pub(super) fn unsent(&self) -> usize {
        self.output.len()
    }

    /// Ends this side once the output is out; what comes in meanwhile is
    /// dropped.
    pub(super) fn finish(&mut self) {
        self.finish = true;
        let dropped = self.input.split();
        if !dropped.is_empty() {
            let _ = self.recv.flow_control().release_capacity(dropped.len());
        }
    }

    /// Ends the stream now (`RST_STREAM`), whatever is queued.
    pub(super) fn reset(&mut self, reason: Reason) {
        self.send.send_reset(reason);
    }

    /// Whether output waits for the client's window.
    pub(super) fn is_sending(&self) -> bool {
        !self.output.is_empty()
    }

    /// Takes what came in and sends what the window allows.
    pub(super) fn poll(&mut self, task: &mut Context<'_>) -> Step {
        let mut step = Step::Open;
        while !self.input_ended {
            match self.recv.poll_data(task) {
                Poll::Ready(Some(Ok(data))) if self.finish => {
                    let _ = self.recv.flow_control().release_capacity(data.len());
                }
                Poll::Ready(Some(Ok(data))) => self.input.extend_from_slice(&data),
                Poll::Ready(None) => {
                    self.input_ended = true;
                    step = Step::InputEnded;
                }
                Poll::Ready(Some(Err(_))) => return Step::Reset,
                Poll::Pending => break,
            }
        }
        loop {
            if self.output.is_empty() {
                if !self.finish {
                    break;
                }
                return match self.send.send_data(Bytes::new(), true) {
                    Ok(()) => Step::Finished,
                    Err(_) => Step::Reset,
                };
            }
            self.send.reserve_capacity(self.output.len());
            match self.send.poll_capacity(task) {
                Poll::Ready(Some(Ok(0))) | Poll::Pending => break,
                Poll::Ready(Some(Ok(granted))) => {
                    let chunk = self.output.split_to(granted.min(self.output.len()));
                    let end = self.finish && self.output.is_empty();
                    if self.send.send_data(chunk.freeze(), end).is_err() {
                        return Step::Reset;
                    }
                    if end {
                        return Step::Finished;
                    }
                }
                Poll::Ready(Some(Err(_)) | None) => return Step::Reset,
            }
        }
        // With its side ended, a reset is the only thing the client can
        // still say.
        if self.input_ended && step == Step::Open && self.send.poll_reset(task).is_ready() {
            return Step::Reset;
        }
        step
    }
}
