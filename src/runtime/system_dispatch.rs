//! `system` dispatch, the comparison mode: every connection actor is spawned
//! into the uppercut system and every wake is an envelope through its
//! scheduler. The poller knows where each connection is and reaches it by
//! address; it counts the wakes it sent until they are handled, and
//! connections count what they mail it (see `wakeup`), so a poller never
//! blocks in `poll` while a connection waits for a worker or for it.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use log::debug;
use mio::Token;
use slab::Slab;
use uppercut::api::{Actor, AnySender, Envelope};

use crate::net::transport::Accepted;
use crate::net::transport::Transport;
use crate::routes::reply::Delivery;
use crate::runtime::connection::{Connection, ConnectionMode};
use crate::runtime::connections::{ConnectionSet, Hosting, Outbox, Turn};
use crate::runtime::pool_threads::WorkerPriority;
use crate::runtime::shared::Shared;
use crate::runtime::timeouts::is_past;
use crate::runtime::wakeup::{Closed, Mailbox, Wake, EXPIRE, READY};

/// `system` dispatch.
pub(crate) struct SystemHosting;

impl Hosting for SystemHosting {
    fn connections(&self, shared: Arc<Shared>) -> Box<dyn ConnectionSet> {
        Box::new(SpawnedConnections {
            shared,
            connections: Slab::new(),
            spawned: 0,
            expired: Vec::new(),
        })
    }

    /// Workers spin between any two envelopes, and a spinning thread
    /// should yield to any thread with work.
    fn worker_priority(&self) -> WorkerPriority {
        WorkerPriority::Low
    }

    /// A poller's connections run on any worker.
    fn counters_exclusive(&self) -> bool {
        false
    }

    fn counts_envelopes(&self) -> bool {
        true
    }
}

/// A connection actor in the uppercut system, as its poller knows it.
struct SpawnedConnection {
    address: String,
    deadline: Arc<AtomicU64>,
    mailbox: Arc<Mailbox>,
}

/// Where a poller's connection actors are.
struct SpawnedConnections {
    shared: Arc<Shared>,
    connections: Slab<SpawnedConnection>,
    /// Numbers connection addresses, so no address is ever reused while the
    /// scheduler may still hold an actor under it.
    spawned: u64,
    /// Reused by each sweep, so sweeping allocates nothing.
    expired: Vec<usize>,
}

impl SpawnedConnections {
    /// Sends the connection a `Wake`, counted until it has been handled.
    fn wake(&self, key: usize, out: &mut Outbox<'_>) {
        if let Some(connection) = self.connections.get(key) {
            self.shared.count_envelope();
            self.shared.outstanding().add();
            out.sender.send(&connection.address, Envelope::of(Wake));
        }
    }
}

impl ConnectionSet for SpawnedConnections {
    fn len(&self) -> usize {
        self.connections.len()
    }

    fn next_token(&self) -> Token {
        Token(self.connections.vacant_key())
    }

    fn adopt(&mut self, socket: Accepted, out: &mut Outbox<'_>) {
        let Some(transport) = self.shared.transport(socket) else {
            return self.shared.release(1);
        };
        let token = self.next_token();
        let shared = Arc::clone(&self.shared);
        let connection = Connection::new(transport, token, shared, &SpawnedMode);
        self.spawned += 1;
        let address = format!("{}/{}", self.shared.poller_address(), self.spawned);
        let deadline = connection.deadline();
        let mailbox = Arc::clone(connection.mailbox());
        let actor: Box<dyn FnOnce() -> Actor> = Box::new(move || Box::new(connection));
        out.sender.spawn(&address, actor);
        self.connections.insert(SpawnedConnection {
            address,
            deadline,
            mailbox,
        });
    }

    fn notify(&mut self, key: usize, bits: u8, out: &mut Outbox<'_>) {
        let posted = self.connections.get(key).map(|c| c.mailbox.post(bits));
        if posted == Some(true) {
            self.wake(key, out);
        }
    }

    fn deliver(&mut self, delivery: Delivery, out: &mut Outbox<'_>) {
        let Delivery { key, call, outcome } = delivery;
        let Some(connection) = self.connections.get(key) else {
            return;
        };
        if connection.mailbox.post_reply(call, outcome) == Some(true) {
            self.wake(key, out);
        }
    }

    fn sweep(&mut self, now_ms: u64, out: &mut Outbox<'_>) {
        self.expired.clear();
        let expired = self
            .connections
            .iter()
            .filter(|(_, c)| is_past(&c.deadline, now_ms));
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

    fn stop_all(&mut self, sender: &mut dyn AnySender) {
        self.shared.release(self.connections.len());
        for connection in self.connections.drain() {
            sender.stop(&connection.address);
        }
    }

    /// The token is free once the closed connection's mail is here.
    fn forget(&mut self, token: Token) -> bool {
        self.connections.try_remove(token.0).is_some()
    }

    fn turn(&self) -> Turn {
        Turn::OneRound {
            may_block: self.shared.outstanding().is_zero(),
        }
    }

    /// A connection sends to its poller only while one of its wakes is
    /// outstanding, so a poller that stops only once none is is never sent
    /// to after it stopped (uppercut's senders panic once the system has
    /// ended).
    fn may_stop(&self) -> bool {
        self.shared.outstanding().is_zero()
    }
}

/// How a spawned connection deals with its poller: wakes are counted until
/// handled, mail to the poller is counted until taken, and a connection that
/// closes says so by mail, since its token may be reused before uppercut
/// drops the actor.
struct SpawnedMode;

impl ConnectionMode for SpawnedMode {
    /// Each wake-up is an envelope through the uppercut scheduler, which
    /// costs far more than a read, so a connection reads on until
    /// `WouldBlock`, serving what the client sent meanwhile.
    fn reads_until_blocked(&self) -> bool {
        true
    }

    fn handled(&self, shared: &Shared, wakes: usize) {
        shared.outstanding().done(wakes);
    }

    fn to_poller(&self, shared: &Shared, envelope: Envelope, sender: &dyn AnySender) {
        shared.count_envelope();
        shared.mail_poller(sender, envelope);
    }

    /// Off the poll set now (the token may be reused before uppercut drops
    /// the actor); the socket shut now, as uppercut drops a stopped actor
    /// only once a worker takes the stop, which can wait while every worker
    /// is blocked in its poller's `poll`; and the poller told.
    fn detach(
        &self,
        shared: &Shared,
        transport: &mut Transport,
        token: Token,
        sender: &dyn AnySender,
    ) {
        if let Err(e) = shared.registry().deregister(transport.socket_mut()) {
            debug!("deregister {token:?}: {e}");
        }
        let _ = transport.shutdown();
        // Sent while this wake is still outstanding: see `wakeup`.
        self.to_poller(shared, Envelope::of(Closed(token)), sender);
    }

    /// A panic: the scheduler drops the actor (and with it the socket); the
    /// poller must still learn of it and get its wake back.
    fn failed(&self, shared: &Shared, token: Token, unhandled: usize, sender: &dyn AnySender) {
        self.to_poller(shared, Envelope::of(Closed(token)), sender);
        self.handled(shared, 1 + unhandled);
    }
}
