//! WebSockets on an HTTP/2 connection's streams (RFC 8441): each stream an
//! extended CONNECT opened has a WebSocket session of its own, the same
//! one an upgraded socket has (`websocket::WsSession`: the decoder, the
//! actor, its mail, the close handshake, the limits). Only where the bytes
//! come from and go differs: the stream's `DATA`, through the HTTP/2
//! session (`http2::tunnel`), instead of the socket.
//!
//! The sessions run on the connection's poller after each drive of the
//! HTTP/2 session, and when their mail comes: what a stream brought is
//! decoded and handed to its actor, and what the actor wrote is queued on
//! the stream, to go as the client's window allows, behind nothing but
//! that stream's own output. A close ends the stream (`END_STREAM` after
//! the close frame; `RST_STREAM` for a client cut off for reading too
//! little), and the client's `END_STREAM` or `RST_STREAM` ends the
//! WebSocket as a socket's end would (`Closed::Cut` unless the handshake
//! was done).

use std::collections::HashMap;

use bytes::BytesMut;
use uppercut::api::AnySender;

use super::websocket::{WsIo, WsSession};
use super::Connection;
use crate::http2::session::{Session, TunnelEvent};
use crate::runtime::shared::Shared;
use crate::websocket::Closed;

/// An HTTP/2 connection's WebSockets, by stream.
#[derive(Default)]
pub(super) struct Http2WebSockets {
    open: HashMap<usize, Box<WsSession>>,
    /// Events taken from the session (kept, so taking allocates nothing
    /// once warm).
    events: Vec<TunnelEvent>,
    /// What a session writes, before it is queued on its stream.
    out: BytesMut,
}

/// What the sessions are run with.
struct Run<'a> {
    shared: &'a Shared,
    sender: &'a dyn AnySender,
    /// The connection's key on its poller: the WebSockets' mail wakes it.
    key: usize,
}

impl Http2WebSockets {
    /// WebSockets open.
    pub(super) fn len(&self) -> usize {
        self.open.len()
    }

    /// A quiet client's WebSockets are each pinged (RFC 6455 §5.5.2).
    fn ping(&mut self, session: &mut Session) {
        for (&key, ws) in &mut self.open {
            if ws.ping(&mut self.out) {
                session.tunnel_send(key, &self.out);
            }
            self.out.clear();
        }
    }

    /// Takes what happened to the WebSocket streams and what they brought,
    /// and runs their sessions; true when the HTTP/2 session was given
    /// something to send (drive it again).
    fn serve(&mut self, session: &mut Session, run: &Run<'_>) -> bool {
        session.take_tunnel_events(&mut self.events);
        let mut events = std::mem::take(&mut self.events);
        let mut moved = !events.is_empty();
        for event in events.drain(..) {
            match event {
                TunnelEvent::Opened(key, upgraded) => {
                    let mut ws = Box::new(WsSession::new(run.shared, run.key, upgraded));
                    let mut io = WsIo {
                        shared: run.shared,
                        sender: run.sender,
                        out: &mut self.out,
                    };
                    ws.open(&mut io);
                    // A stream of a key just freed is a new one: the old
                    // one's session ended with its reset.
                    if let Some(old) = self.open.insert(key, ws) {
                        old.end(run.shared, Some(run.sender));
                    }
                    self.settle(key, session, run);
                }
                TunnelEvent::InputEnded(key) => {
                    // What came before the end is read first.
                    self.feed(key, session, run);
                    if let Some(mut ws) = self.open.remove(&key) {
                        ws.ended(Closed::Cut);
                        session.tunnel_finish(key);
                        ws.end(run.shared, Some(run.sender));
                    }
                }
                TunnelEvent::Reset(key) => {
                    if let Some(mut ws) = self.open.remove(&key) {
                        ws.ended(Closed::Cut);
                        ws.end(run.shared, Some(run.sender));
                    }
                }
            }
        }
        self.events = events;
        let keys: Vec<usize> = self.open.keys().copied().collect();
        for key in keys {
            moved |= self.feed(key, session, run);
        }
        // What the clients have read since: the mail's limit counts what
        // they have not.
        for (&key, ws) in &self.open {
            ws.note_unsent(session.tunnel_unsent(key));
        }
        moved
    }

    /// Decodes what stream `key` brought (unless its session waits for a
    /// relief); true when there was something.
    fn feed(&mut self, key: usize, session: &mut Session, run: &Run<'_>) -> bool {
        let Some(ws) = self.open.get_mut(&key) else {
            return false;
        };
        if ws.is_paused() {
            return false;
        }
        let mut input = session.tunnel_input(key);
        if input.is_empty() {
            return false;
        }
        let mut io = WsIo {
            shared: run.shared,
            sender: run.sender,
            out: &mut self.out,
        };
        ws.frames(&mut input, &mut io);
        self.settle(key, session, run);
        true
    }

    /// Hands each WebSocket its mail, and reads again where a relief came.
    fn mail(&mut self, session: &mut Session, run: &Run<'_>) {
        let keys: Vec<usize> = self.open.keys().copied().collect();
        for key in keys {
            let unsent = session.tunnel_unsent(key);
            let Some(ws) = self.open.get_mut(&key) else {
                continue;
            };
            let mut io = WsIo {
                shared: run.shared,
                sender: run.sender,
                out: &mut self.out,
            };
            ws.mail(unsent, &mut io);
            let resumed = ws.resume();
            self.settle(key, session, run);
            if resumed {
                self.feed(key, session, run);
            }
        }
    }

    /// The server drains: each WebSocket is closed with 1001.
    fn go_away(&mut self, session: &mut Session, run: &Run<'_>) {
        let keys: Vec<usize> = self.open.keys().copied().collect();
        for key in keys {
            if let Some(ws) = self.open.get_mut(&key) {
                ws.go_away();
            }
            self.settle(key, session, run);
        }
    }

    /// Queues what stream `key`'s session wrote (a close it asked for, or
    /// the 1008 of a client too far behind, last) and ends the stream if
    /// the WebSocket is over.
    fn settle(&mut self, key: usize, session: &mut Session, run: &Run<'_>) {
        let Some(ws) = self.open.get_mut(&key) else {
            return;
        };
        let outbound = run.shared.routes().websocket_limits().outbound;
        let unsent = session.tunnel_unsent(key);
        ws.settle(unsent, outbound, &mut self.out);
        session.tunnel_send(key, &self.out);
        self.out.clear();
        ws.note_unsent(session.tunnel_unsent(key));
        if !ws.is_done() {
            return;
        }
        match ws.is_cut_off() {
            true => session.tunnel_cut(key),
            false => session.tunnel_finish(key),
        }
        if let Some(ws) = self.open.remove(&key) {
            ws.end(run.shared, Some(run.sender));
        }
    }

    /// The connection is over: every WebSocket on it ends (cut, unless its
    /// handshake was done), its actor told when there is a sender.
    fn end_all(&mut self, shared: &Shared, sender: Option<&dyn AnySender>) {
        for (_, mut ws) in self.open.drain() {
            ws.ended(Closed::Cut);
            ws.end(shared, sender);
        }
    }
}

impl Connection {
    /// Runs the WebSockets of this HTTP/2 connection: new ones opened,
    /// what their streams brought decoded, what they wrote queued; true
    /// when the session has more to send (drive it again).
    pub(super) fn http2_websockets(&mut self, sender: &dyn AnySender) -> bool {
        let run = Run {
            shared: &self.shared,
            sender,
            key: self.token.0,
        };
        let Some(h2) = self.http2.as_deref_mut() else {
            return false;
        };
        h2.websockets.serve(&mut h2.session, &run)
    }

    /// The WebSockets' mail came (or a relief).
    pub(super) fn http2_websocket_mail(&mut self, sender: &dyn AnySender) {
        let run = Run {
            shared: &self.shared,
            sender,
            key: self.token.0,
        };
        if let Some(h2) = self.http2.as_deref_mut() {
            h2.websockets.mail(&mut h2.session, &run);
        }
    }

    /// The client has been quiet for the keep-alive timeout with only
    /// WebSockets open: each is pinged.
    pub(super) fn http2_ping_websockets(&mut self) {
        if let Some(h2) = self.http2.as_deref_mut() {
            h2.websockets.ping(&mut h2.session);
        }
    }

    /// The server drains: the WebSockets close with 1001.
    pub(super) fn http2_websockets_go_away(&mut self, sender: &dyn AnySender) {
        let run = Run {
            shared: &self.shared,
            sender,
            key: self.token.0,
        };
        if let Some(h2) = self.http2.as_deref_mut() {
            h2.websockets.go_away(&mut h2.session, &run);
        }
    }

    /// The connection is over: its WebSockets end.
    pub(super) fn http2_end_websockets(&mut self, sender: Option<&dyn AnySender>) {
        if let Some(h2) = self.http2.as_deref_mut() {
            h2.websockets.end_all(&self.shared, sender);
        }
    }
}
