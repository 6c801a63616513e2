//! Where each actor the server owns is, by address, and how a message
//! reaches it from a thread that must not run it (a blocking thread, the
//! delay timer, an uppercut worker forwarding, `Server::send`): queued, and
//! its home poller woken to run it. Also the relay for sends into the
//! uppercut system from such threads. Read-only once the server started,
//! but for the open WebSocket connections (`ws/` addresses), which come
//! and go in their own registry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use uppercut::api::Envelope;

use crate::actors::blocking::BlockingPool;
use crate::actors::cell::ActorCell;
use crate::actors::port::{PollerPort, Relayed};
use crate::websocket::handle::WsHandle;
use crate::websocket::registry::WsRegistry;

/// An address the server owns.
pub(crate) enum Dest {
    /// One instance, run where its message is.
    Shared(Arc<ActorCell>),
    /// An instance per poller, by poller index; sends from no poller go to
    /// each in turn.
    PerPoller {
        cells: Box<[Arc<ActorCell>]>,
        next: AtomicUsize,
    },
    /// Threads of its own.
    Blocking(Arc<BlockingPool>),
}

/// Where a message for an owned address goes, for one sender.
pub(crate) enum Resolved<'a> {
    Cell(&'a Arc<ActorCell>),
    Blocking(&'a Arc<BlockingPool>),
    /// An open WebSocket connection: the envelope goes to its mail.
    WebSocket(WsHandle),
}

/// Every owned address, and every poller's port.
pub(crate) struct Directory {
    by_address: HashMap<Box<str>, Dest>,
    ports: Box<[Arc<PollerPort>]>,
    /// Spreads relayed sends over the pollers.
    next_relay: AtomicUsize,
    websockets: Arc<WsRegistry>,
}

impl Directory {
    pub(crate) fn new(
        by_address: HashMap<Box<str>, Dest>,
        ports: Vec<Arc<PollerPort>>,
    ) -> Directory {
        Directory {
            by_address,
            ports: ports.into(),
            next_relay: AtomicUsize::new(0),
            websockets: Arc::default(),
        }
    }

    /// Where `address` is for a sender on `poller`'s thread (or on none).
    pub(crate) fn resolve(&self, address: &str, poller: Option<usize>) -> Option<Resolved<'_>> {
        let Some(dest) = self.by_address.get(address) else {
            return self.websockets.get(address).map(Resolved::WebSocket);
        };
        Some(match dest {
            Dest::Shared(cell) => Resolved::Cell(cell),
            Dest::PerPoller { cells, next } => {
                let index = match poller {
                    Some(index) => index,
                    None => next.fetch_add(1, Ordering::Relaxed),
                };
                Resolved::Cell(&cells[index % cells.len()])
            }
            Dest::Blocking(pool) => Resolved::Blocking(pool),
        })
    }

    /// What the server owns at `address`.
    pub(crate) fn get(&self, address: &str) -> Option<&Dest> {
        self.by_address.get(address)
    }

    /// Whether a send to `address` reaches something the server runs: an
    /// owned actor, or an open WebSocket connection.
    pub(crate) fn reaches(&self, address: &str) -> bool {
        self.by_address.contains_key(address) || self.websockets.get(address).is_some()
    }

    /// The open WebSocket connections.
    pub(crate) fn websockets(&self) -> &Arc<WsRegistry> {
        &self.websockets
    }

    /// Every owned address and what is there.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&str, &Dest)> {
        self.by_address
            .iter()
            .map(|(address, dest)| (&**address, dest))
    }

    /// Sends `envelope` to `address` from a thread that must not run
    /// actors; gives it back when the server owns nothing there.
    pub(crate) fn deliver_foreign(
        &self,
        address: &str,
        envelope: Envelope,
    ) -> Result<(), Envelope> {
        match self.resolve(address, None) {
            Some(Resolved::Cell(cell)) => {
                cell.enqueue(envelope);
                self.schedule(cell);
                Ok(())
            }
            Some(Resolved::Blocking(pool)) => {
                pool.submit(envelope);
                Ok(())
            }
            // Closed: dropped, as uppercut drops a send to a stopped actor.
            Some(Resolved::WebSocket(handle)) => {
                handle.mail(envelope);
                Ok(())
            }
            None => Err(envelope),
        }
    }

    /// Has `cell`'s home poller run what it has queued.
    pub(crate) fn schedule(&self, cell: &Arc<ActorCell>) {
        if let Some(port) = self.ports.get(cell.home()) {
            port.schedule(Arc::clone(cell));
        }
    }

    /// Has a poller make `relayed` with its uppercut sender.
    pub(crate) fn relay(&self, relayed: Relayed) {
        if self.ports.is_empty() {
            return;
        }
        let index = self.next_relay.fetch_add(1, Ordering::Relaxed) % self.ports.len();
        self.ports[index].relay(relayed);
    }

    /// Poller `index`'s port.
    pub(crate) fn port(&self, index: usize) -> Option<&Arc<PollerPort>> {
        self.ports.get(index)
    }
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory")
            .field("addresses", &self.by_address.len())
            .finish_non_exhaustive()
    }
}
