//! A poller's connection actors, in either dispatch mode, and how it wakes
//! them: `local` connections live here and run when woken; `system` ones live
//! in the uppercut system, and here is where they are and how to reach them.
//! Either way a wake goes through the connection's mailbox (`wakeup`).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use mio::net::TcpStream;
use mio::Token;
use uppercut::api::{Actor, AnySender, Envelope};

use crate::config::Dispatch;
use crate::net::slab::Slab;
use crate::routes::reply::Delivery;
use crate::runtime::connection::Connection;
use crate::runtime::local_dispatch::deliver_locally;
use crate::runtime::shared::Shared;
use crate::runtime::timeouts::is_past;
use crate::runtime::wakeup::{Mailbox, Wake, EXPIRE, READY};

/// A connection actor in `system` dispatch, as its poller knows it.
struct SpawnedConnection {
    address: String,
    deadline: Arc<AtomicU64>,
    mailbox: Arc<Mailbox>,
}

pub(crate) struct Connections {
    shared: Arc<Shared>,
    /// `local` dispatch: the connection actors themselves.
    local: Slab<Connection>,
    /// `system` dispatch: where the connection actors are.
    system: Slab<SpawnedConnection>,
    /// Numbers `system` connection addresses, so no address is ever reused
    /// while the scheduler may still hold an actor under it.
    spawned: u64,
    /// `local` dispatch: what connections sent to their poller.
    pub inbox: Vec<Envelope>,
    /// Reused by each sweep, so sweeping allocates nothing.
    expired: Vec<usize>,
}

impl Connections {
    pub(crate) fn new(shared: Arc<Shared>) -> Connections {
        Connections {
            shared,
            local: Slab::default(),
            system: Slab::default(),
            spawned: 0,
            inbox: Vec::new(),
            expired: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.local.len() + self.system.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The token the next connection will have.
    pub(crate) fn next_token(&self) -> Token {
        Token(match self.shared.dispatch {
            Dispatch::Local => self.local.vacant_key(),
            Dispatch::System => self.system.vacant_key(),
        })
    }

    /// Makes a connection actor for a socket registered under `next_token`.
    pub(crate) fn adopt(&mut self, socket: TcpStream, sender: &mut dyn AnySender) {
        let token = self.next_token();
        let connection = Connection::new(socket, token, Arc::clone(&self.shared));
        match self.shared.dispatch {
            Dispatch::Local => {
                self.local.insert(connection);
            }
            Dispatch::System => {
                self.spawned += 1;
                let address = format!("{}/{}", self.shared.poller, self.spawned);
                let deadline = connection.deadline();
                let mailbox = Arc::clone(connection.mailbox());
                let actor: Box<dyn FnOnce() -> Actor> = Box::new(move || Box::new(connection));
                sender.spawn(&address, actor);
                self.system.insert(SpawnedConnection {
                    address,
                    deadline,
                    mailbox,
                });
            }
        }
    }

    /// A `system` connection closed itself; true when it was known here.
    pub(crate) fn forget(&mut self, token: Token) -> bool {
        self.system.remove(token.0).is_some()
    }

    /// Posts `bits` to a connection's mailbox, and wakes it unless a wake is
    /// already on its way.
    pub(crate) fn notify(&mut self, key: usize, bits: u8, sender: &mut dyn AnySender) {
        if self.mailbox(key).is_some_and(|mailbox| mailbox.post(bits)) {
            self.wake(key, sender);
        }
    }

    /// Leaves an actor's answer in the mailbox of the connection that
    /// awaits it and wakes it; an answer no longer awaited is dropped.
    pub(crate) fn deliver(&mut self, delivery: Delivery, sender: &mut dyn AnySender) {
        let Delivery { key, call, outcome } = delivery;
        let Some(mailbox) = self.mailbox(key) else {
            return;
        };
        if mailbox.post_reply(call, outcome) == Some(true) {
            self.wake(key, sender);
        }
    }

    fn mailbox(&self, key: usize) -> Option<&Arc<Mailbox>> {
        match self.shared.dispatch {
            Dispatch::Local => self.local.get(key).map(Connection::mailbox),
            Dispatch::System => self.system.get(key).map(|c| &c.mailbox),
        }
    }

    /// `local`: runs the connection now; `system`: sends it a `Wake`, counted
    /// until it has been handled.
    fn wake(&mut self, key: usize, sender: &mut dyn AnySender) {
        match self.shared.dispatch {
            Dispatch::Local => {
                let Some(connection) = self.local.get_mut(key) else {
                    return;
                };
                let wake = Envelope::of(Wake);
                if !deliver_locally(connection, wake, sender, &mut self.inbox) {
                    // Dropping the connection closes its socket, which also
                    // removes it from the poll set.
                    self.local.remove(key);
                    self.shared.release(1);
                }
            }
            Dispatch::System => {
                if let Some(connection) = self.system.get(key) {
                    if let Some(metrics) = &self.shared.metrics {
                        metrics.add(&metrics.envelopes, 1);
                    }
                    self.shared.outstanding.add();
                    sender.send(&connection.address, Envelope::of(Wake));
                }
            }
        }
    }

    /// Wakes every connection whose deadline has passed: it decides itself
    /// whether it timed out, as it may have moved on since it published it.
    pub(crate) fn sweep(&mut self, now_ms: u64, sender: &mut dyn AnySender) {
        self.expired.clear();
        let local = self
            .local
            .iter()
            .filter(|(_, c)| c.is_past_deadline(now_ms));
        self.expired.extend(local.map(|(key, _)| key));
        let system = self
            .system
            .iter()
            .filter(|(_, c)| is_past(&c.deadline, now_ms));
        self.expired.extend(system.map(|(key, _)| key));
        for index in 0..self.expired.len() {
            let key = self.expired[index];
            self.notify(key, EXPIRE, sender);
        }
    }

    /// Wakes every connection, as when the server starts draining: each
    /// closes once it has no request in progress (the phase tells it).
    pub(crate) fn wake_all(&mut self, sender: &mut dyn AnySender) {
        let keys: Vec<usize> = match self.shared.dispatch {
            Dispatch::Local => self.local.iter().map(|(key, _)| key).collect(),
            Dispatch::System => self.system.iter().map(|(key, _)| key).collect(),
        };
        for key in keys {
            self.notify(key, READY, sender);
        }
    }

    /// Closes every connection.
    pub(crate) fn stop_all(&mut self, sender: &mut dyn AnySender) {
        self.shared.release(self.len());
        drop(self.local.drain());
        for connection in self.system.drain() {
            sender.stop(&connection.address);
        }
    }
}
