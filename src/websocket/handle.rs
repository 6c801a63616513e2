//! [`WsHandle`]: how anything, on any thread, writes to one WebSocket
//! client or mails its actor.
//!
//! What a handle sends waits in the connection's [`Mailbag`] until the
//! poller that owns the connection wakes it, as it wakes a connection for
//! readiness or an actor's answer: nothing touches a connection behind its
//! poller's back. The first message into an empty bag asks the poller (one
//! lock and, if the poller is parked, one wake-up); the rest ride along.
//!
//! The bag is bounded by bytes: a client that does not read while others
//! send to it would otherwise grow it without end. Past the limit the
//! message is dropped and the connection closes with 1008 (policy
//! violation), as a slow consumer is cut off.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use uppercut::api::Envelope;

use crate::sync::{Atomic, AtomicInt, Kit, Lock, Std};
use crate::websocket::outgoing::Outgoing;

/// Asks a poller to wake one of its connections for its mail.
pub(crate) trait MailPoster: Send + Sync {
    /// The connection at `key` has mail.
    fn post_mail(&self, key: usize);
}

/// One item of a connection's mail.
#[derive(Debug)]
pub(crate) enum Mail {
    /// Written to the client as it is.
    Out(Outgoing),
    /// Handed to the connection's actor (`WebSocket::on_mail`).
    Envelope(Envelope),
}

/// The poller was asked to wake the connection and has not yet.
const ASKED: u8 = 1;
/// The connection has closed: sends fail.
const CLOSED: u8 = 2;
/// A send went past the limit: the connection closes with 1008.
const OVERFLOWED: u8 = 4;

/// Bytes counted for mail that is not a message to write (an envelope).
const ENVELOPE_COST: usize = 64;

/// The mail waiting for one WebSocket connection. Generic over the [`Kit`]
/// so that the model (`crate::model::mailbag`) runs this very code on
/// loom's primitives.
pub(crate) struct Mailbag<K: Kit = Std> {
    items: K::Mutex<VecDeque<Mail>>,
    /// Bytes waiting in `items`.
    queued: K::Usize,
    /// Bytes the connection holds that its socket has not taken yet (it
    /// updates this after each write).
    unsent: K::Usize,
    limit: usize,
    state: K::U8,
    /// The connection's key on its poller.
    key: usize,
    poster: Arc<dyn MailPoster>,
}

impl<K: Kit> Mailbag<K> {
    pub(crate) fn new(key: usize, limit: usize, poster: Arc<dyn MailPoster>) -> Mailbag<K> {
        Mailbag {
            items: K::Mutex::new(VecDeque::new()),
            queued: K::Usize::new(0),
            unsent: K::Usize::new(0),
            limit,
            state: K::U8::new(0),
            key,
            poster,
        }
    }

    /// Puts `mail`, counted as `cost` bytes, and asks the poller to wake the
    /// connection; false when it was refused (closed, or past the limit).
    pub(crate) fn put(&self, mail: Mail, cost: usize) -> bool {
        let state = self.state.load(Ordering::Acquire);
        if state & (CLOSED | OVERFLOWED) != 0 {
            return false;
        }
        let unsent = self.unsent.load(Ordering::Acquire);
        if self.queued.fetch_add(cost, Ordering::AcqRel) + cost + unsent > self.limit {
            self.queued.fetch_sub(cost, Ordering::AcqRel);
            self.state.fetch_or(OVERFLOWED, Ordering::AcqRel);
            self.ask();
            return false;
        }
        let mut items = self.items.lock();
        // Closed since the look above: `close` has taken what waited, and
        // would never see this.
        if self.state.load(Ordering::Acquire) & CLOSED != 0 {
            drop(items);
            self.queued.fetch_sub(cost, Ordering::AcqRel);
            return false;
        }
        items.push_back(mail);
        drop(items);
        self.ask();
        true
    }

    /// Has the poller wake the connection for its mail even with none
    /// waiting (a relief: it reads again).
    pub(crate) fn nudge(&self) {
        self.ask();
    }

    /// Asks the poller to wake the connection, unless it was asked since
    /// the connection last looked.
    fn ask(&self) {
        if self.state.fetch_or(ASKED, Ordering::AcqRel) & ASKED == 0 {
            self.poster.post_mail(self.key);
        }
    }

    /// The connection takes what is waiting into `into` (kept by the
    /// connection, so taking allocates nothing once warm); true when a send
    /// overflowed. Clears `ASKED` first, so mail put meanwhile asks again.
    pub(crate) fn take(&self, into: &mut VecDeque<Mail>) -> bool {
        let state = self.state.fetch_and(!ASKED, Ordering::AcqRel);
        let mut items = self.items.lock();
        std::mem::swap(&mut *items, into);
        state & OVERFLOWED != 0
    }

    /// The connection took `bytes` of what was counted out of the bag.
    pub(crate) fn taken(&self, bytes: usize) {
        self.queued.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// The connection holds `bytes` its socket has not taken yet.
    pub(crate) fn set_unsent(&self, bytes: usize) {
        self.unsent.store(bytes, Ordering::Release);
    }

    /// The connection is gone: later sends fail, and what waits is dropped.
    pub(crate) fn close(&self) {
        self.state.fetch_or(CLOSED, Ordering::AcqRel);
        let dropped = std::mem::take(&mut *self.items.lock());
        drop(dropped);
    }

    /// The items waiting, and the bytes counted (for the model).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> (usize, usize) {
        let items = self.items.lock();
        (items.len(), self.queued.load(Ordering::SeqCst))
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) & CLOSED != 0
    }
}

/// The bytes `mail` counts for against the limit.
pub(crate) fn cost(mail: &Mail) -> usize {
    match mail {
        Mail::Out(outgoing) => outgoing.payload.len() + 14,
        Mail::Envelope(_) => ENVELOPE_COST,
    }
}

/// Writes to one WebSocket client, or mails its actor, from any thread.
/// Cheap to clone; keeps working (its sends fail) once the connection has
/// closed.
#[derive(Clone)]
pub struct WsHandle {
    pub(crate) bag: Arc<Mailbag>,
    pub(crate) address: Arc<str>,
}

impl WsHandle {
    /// Writes `message` to the client, after what was sent before it.
    /// False when the connection has closed, or is closing because the
    /// client fell too far behind (then the message is dropped).
    pub fn send(&self, message: Outgoing) -> bool {
        let mail = Mail::Out(message);
        let cost = cost(&mail);
        self.bag.put(mail, cost)
    }

    /// Writes `text` to the client as a text message (see [`WsHandle::send`]).
    pub fn send_text(&self, text: &str) -> bool {
        self.send(Outgoing::text(text))
    }

    /// Closes the connection with `code` and `reason` once what was sent
    /// before is written (see [`Outgoing::close`]).
    pub fn close(&self, code: u16, reason: &str) -> bool {
        self.send(Outgoing::close(code, reason))
    }

    /// Hands `envelope` to the connection's actor
    /// ([`WebSocket::on_mail`](crate::WebSocket::on_mail)), on the
    /// connection's thread. False when the connection has closed.
    pub fn mail(&self, envelope: Envelope) -> bool {
        let mail = Mail::Envelope(envelope);
        let cost = cost(&mail);
        self.bag.put(mail, cost)
    }

    /// The connection's actor address: an owned actor, or
    /// [`Server::send`](crate::Server::send), reaches it there too.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Whether the connection has closed.
    pub fn is_closed(&self) -> bool {
        self.bag.is_closed()
    }
}

impl fmt::Debug for WsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WsHandle")
            .field("address", &self.address)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl PartialEq for WsHandle {
    fn eq(&self, other: &WsHandle) -> bool {
        Arc::ptr_eq(&self.bag, &other.bag)
    }
}

impl Eq for WsHandle {}
