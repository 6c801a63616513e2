//! How a poller takes connections in: accepting (pausing when out of
//! descriptors), placing each on the least-loaded poller, taking those other
//! pollers handed over, and registering them as connection actors.

use std::io::ErrorKind;

use crate::net::transport::Accepted;
use log::{debug, warn};
use mio::Interest;
use uppercut::api::AnySender;

use super::{Poller, ACCEPT_BACKOFF};
use crate::net::socket::is_out_of_resources;
use crate::runtime::balance::Placement;
use crate::runtime::connections::Outbox;
use crate::runtime::lifecycle::Phase;

impl Poller {
    /// Accepts what listener `index` has waiting.
    pub(super) fn accept(&mut self, index: usize, sender: &mut dyn AnySender) {
        while self.accept_paused_until_ms.is_none() {
            let Some((listener, tls)) = self.listeners.get(index) else {
                return;
            };
            let tls = *tls;
            match listener.accept() {
                Ok((socket, peer)) => self.place(Accepted { socket, peer, tls }, sender),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if is_out_of_resources(&e) => {
                    self.shared.count(|m| &m.accept_pauses, 1);
                    warn!("accept: {e}; pausing accepts for {ACCEPT_BACKOFF:?}");
                    let resume = self.shared.now_ms() + ACCEPT_BACKOFF.as_millis() as u64;
                    self.accept_paused_until_ms = Some(resume);
                }
                // The client gave up before we accepted (ECONNABORTED and the like).
                Err(e) => debug!("accept: {e}"),
            }
        }
    }

    /// Keeps a connection just accepted, or hands it to the least-loaded
    /// poller if this one holds more (see `balance`).
    fn place(&mut self, socket: Accepted, sender: &mut dyn AnySender) {
        // Past the limit the connection is closed at once: dropped here.
        if !self.shared.admit() {
            self.shared.count(|m| &m.refused, 1);
            return;
        }
        let balance = self.shared.balance();
        match balance.place(self.shared.index()) {
            Placement::Keep => self.adopt(socket, sender),
            Placement::HandTo(target) => {
                // That poller is draining or stopped: the socket closes here.
                if balance.hand_off(target, socket).is_err() {
                    self.shared.release_handed(target);
                }
            }
        }
    }

    /// Takes the sockets other pollers handed over: adopts them while the
    /// server runs, closes them once it drains. True when there were any.
    pub(super) fn take_handed(&mut self, sender: &mut dyn AnySender) -> bool {
        let mut handed = std::mem::take(&mut self.handed);
        self.shared.balance().take(self.shared.index(), &mut handed);
        let found = !handed.is_empty();
        for socket in handed.drain(..) {
            match self.shared.phase() {
                Phase::Running => self.adopt(socket, sender),
                _ => {
                    drop(socket);
                    self.shared.release(1);
                }
            }
        }
        self.handed = handed;
        found
    }

    /// Registers a connection, admitted and counted, and makes its actor.
    fn adopt(&mut self, mut accepted: Accepted, sender: &mut dyn AnySender) {
        let socket = &mut accepted.socket;
        if let Err(e) = socket.set_nodelay(true) {
            debug!("set_nodelay: {e}");
        }
        let token = self.connections.next_token();
        if let Err(e) = self
            .poll
            .registry()
            .register(socket, token, Interest::READABLE)
        {
            warn!("register failed: {e}");
            self.shared.release(1);
            return;
        }
        self.shared.count(|m| &m.accepted, 1);
        let mut out = Outbox {
            sender,
            inbox: &mut self.inbox,
        };
        self.connections.adopt(accepted, &mut out);
    }
}
