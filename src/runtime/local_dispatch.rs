//! `local` dispatch: a poller owns its connection actors and runs them
//! itself, through an `AnySender` of its own, with no hop through the
//! uppercut scheduler, and with a panic contained to its connection. What a
//! connection sends to its poller lands in the poller's inbox.
//!
//! The poller keeps its worker until it is idle (see `poller`), so its
//! connections, and the actors they call, all run on the thread that polled
//! their sockets.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use mio::Token;
use slab::Slab;
use uppercut::api::{Actor, AnyActor, AnySender, Envelope};

use crate::net::transport::Accepted;
use crate::net::transport::Transport;
use crate::routes::reply::Delivery;
use crate::runtime::connection::{Connection, ConnectionMode};
use crate::runtime::connections::{ConnectionSet, Hosting, Outbox, Turn};
use crate::runtime::pool_threads::WorkerPriority;
use crate::runtime::shared::Shared;
use crate::runtime::wakeup::{Wake, EXPIRE, READY};

/// `local` dispatch.
pub(crate) struct LocalHosting;

impl Hosting for LocalHosting {
    fn connections(&self, shared: Arc<Shared>) -> Box<dyn ConnectionSet> {
        Box::new(OwnedConnections {
            shared,
            connections: Slab::new(),
            expired: Vec::new(),
        })
    }

    /// A poller yields its core after a round that found work (see
    /// `poller`), and EEVDF lets a task that yields wait up to its slice.
    fn worker_priority(&self) -> WorkerPriority {
        WorkerPriority::ShortSlice
    }

    fn counters_exclusive(&self) -> bool {
        true
    }

    fn counts_envelopes(&self) -> bool {
        false
    }
}

/// The connection actors a poller owns, by token.
struct OwnedConnections {
    shared: Arc<Shared>,
    connections: Slab<Connection>,
    /// Reused by each sweep, so sweeping allocates nothing.
    expired: Vec<usize>,
}

impl OwnedConnections {
    /// Runs the connection now; a connection done (closed, or panicked)
    /// is dropped, which closes its socket and takes it off the poll set.
    fn wake(&mut self, key: usize, out: &mut Outbox<'_>) {
        let Some(connection) = self.connections.get_mut(key) else {
            return;
        };
        if !deliver_locally(connection, Envelope::of(Wake), out) {
            self.connections.remove(key);
            self.shared.release(1);
        }
    }
}

impl ConnectionSet for OwnedConnections {
    fn len(&self) -> usize {
        self.connections.len()
    }

    fn next_token(&self) -> Token {
        Token(self.connections.vacant_key())
    }

    fn adopt(&mut self, socket: Accepted, _out: &mut Outbox<'_>) {
        let Some(transport) = self.shared.transport(socket) else {
            return self.shared.release(1);
        };
        let token = self.next_token();
        let shared = Arc::clone(&self.shared);
        self.connections
            .insert(Connection::new(transport, token, shared, &OwnedMode));
    }

    fn notify(&mut self, key: usize, bits: u8, out: &mut Outbox<'_>) {
        let posted = self.connections.get(key).map(|c| c.mailbox().post(bits));
        if posted == Some(true) {
            self.wake(key, out);
        }
    }

    fn deliver(&mut self, delivery: Delivery, out: &mut Outbox<'_>) {
        let Delivery { key, call, outcome } = delivery;
        let Some(connection) = self.connections.get(key) else {
            return;
        };
        if connection.mailbox().post_reply(call, outcome) == Some(true) {
            self.wake(key, out);
        }
    }

    fn sweep(&mut self, now_ms: u64, out: &mut Outbox<'_>) {
        self.expired.clear();
        let expired = self
            .connections
            .iter()
            .filter(|(_, c)| c.is_past_deadline(now_ms));
        self.expired.extend(expired.map(|(key, _)| key));
        for index in 0..self.expired.len() {
            let key = self.expired[index];
            self.notify(key, EXPIRE, out);
        }
    }

    fn wake_all(&mut self, out: &mut Outbox<'_>) {
        let keys: Vec<usize> = self.connections.iter().map(|(key, _)| key).collect();
        for key in keys {
            self.notify(key, READY, out);
        }
    }

    fn stop_all(&mut self, _sender: &mut dyn AnySender) {
        self.shared.release(self.connections.len());
        drop(self.connections.drain());
    }

    /// Owned connections never mail their poller that they closed: the
    /// poller drops them itself.
    fn forget(&mut self, _token: Token) -> bool {
        false
    }

    fn turn(&self) -> Turn {
        Turn::UntilIdle
    }

    fn may_stop(&self) -> bool {
        true
    }
}

/// How an owned connection deals with its poller: its sends to the poller
/// go to the inbox (through `LocalSender`), and when it closes the poller
/// drops it, socket and all, as soon as the wake returns.
struct OwnedMode;

impl ConnectionMode for OwnedMode {
    /// A read shorter than the buffer emptied the socket, and the next
    /// edge will say when the client sends more: no read ends in
    /// `WouldBlock`, and no client is served twice while others woken by
    /// the same `poll` wait.
    fn reads_until_blocked(&self) -> bool {
        false
    }

    fn handled(&self, _shared: &Shared, _wakes: usize) {}

    fn to_poller(&self, shared: &Shared, envelope: Envelope, sender: &dyn AnySender) {
        sender.send(shared.poller_address(), envelope);
    }

    fn detach(
        &self,
        _shared: &Shared,
        _transport: &mut Transport,
        _token: Token,
        _sender: &dyn AnySender,
    ) {
    }

    /// Never called: the poller contains a panic itself.
    fn failed(&self, _shared: &Shared, _token: Token, _unhandled: usize, _sender: &dyn AnySender) {}
}

/// Hands one envelope to a connection the poller owns; false when the
/// connection is done (it stopped itself, or it panicked: a panic closes that
/// connection only). Envelopes it sends to the poller go to the inbox.
fn deliver_locally(connection: &mut Connection, envelope: Envelope, out: &mut Outbox<'_>) -> bool {
    let mut local = LocalSender {
        outer: &mut *out.sender,
        stopped: Cell::new(false),
        inbox: RefCell::new(&mut *out.inbox),
    };
    let delivered = panic::catch_unwind(AssertUnwindSafe(|| {
        connection.receive(envelope, &mut local);
    }));
    delivered.is_ok() && !local.stopped.get()
}

/// The `AnySender` a `local` poller gives its connections. In `local`
/// dispatch a connection's address is its poller's, so a connection stopping
/// itself (`stop(me)`) is noted here, and what it sends to `me` (requests for
/// the upstream pool) is kept for the poller, instead of going to the
/// scheduler; everything else passes through to the poller's own sender.
struct LocalSender<'a> {
    outer: &'a mut dyn AnySender,
    stopped: Cell<bool>,
    inbox: RefCell<&'a mut Vec<Envelope>>,
}

impl AnySender for LocalSender<'_> {
    fn me(&self) -> &str {
        self.outer.me()
    }

    fn send(&self, address: &str, envelope: Envelope) {
        if address == self.outer.me() {
            self.inbox.borrow_mut().push(envelope);
        } else {
            self.outer.send(address, envelope);
        }
    }

    fn spawn(&self, address: &str, f: Box<dyn FnOnce() -> Actor>) {
        self.outer.spawn(address, f);
    }

    fn delay(&self, address: &str, envelope: Envelope, duration: Duration) {
        self.outer.delay(address, envelope, duration);
    }

    fn stop(&self, address: &str) {
        if address == self.outer.me() {
            self.stopped.set(true);
        } else {
            self.outer.stop(address);
        }
    }

    fn log(&mut self, message: &str) {
        self.outer.log(message);
    }

    fn metric(&mut self, name: &str, value: f64) {
        self.outer.metric(name, value);
    }

    fn now(&self) -> SystemTime {
        self.outer.now()
    }
}
