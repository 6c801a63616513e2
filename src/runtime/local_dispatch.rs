//! `local` dispatch: how a poller hands envelopes to the connection actors it
//! owns, directly and through an `AnySender` of its own, with no hop through
//! the uppercut scheduler, and with a panic contained to its connection.
//! What a connection sends to its poller lands in the poller's inbox.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, SystemTime};

use uppercut::api::{Actor, AnyActor, AnySender, Envelope};

use crate::runtime::connection::Connection;

/// Hands one envelope to a connection the poller owns; false when the
/// connection is done (it stopped itself, or it panicked: a panic closes that
/// connection only). Envelopes it sends to the poller go to `inbox`.
pub(crate) fn deliver_locally(
    connection: &mut Connection,
    envelope: Envelope,
    sender: &mut dyn AnySender,
    inbox: &mut Vec<Envelope>,
) -> bool {
    let mut local = LocalSender {
        outer: sender,
        stopped: Cell::new(false),
        inbox: RefCell::new(inbox),
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
