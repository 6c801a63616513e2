//! What other threads leave for one poller to do on its thread: actors with
//! messages nobody is running (queued from a thread that must not run them,
//! or left over past a holder's budget), and sends into the uppercut system
//! from threads that have no uppercut sender (blocking threads, the delay
//! timer, `Server::send`), and the keys of WebSocket connections with mail
//! (`websocket::handle`). Whoever leaves work here wakes the poller if it
//! is parked; the poller takes everything each round.

use std::mem;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use uppercut::api::{Actor, AnySender, Envelope};

use crate::actors::cell::ActorCell;
use crate::sync::{Atomic, Kit, Lock, Std};
use crate::websocket::handle::MailPoster;

/// A send into the uppercut system, made for a thread without a sender.
#[derive(Debug)]
pub(crate) enum Relayed {
    Send(String, Envelope),
    Delay(String, Envelope, Duration),
    Spawn(String, ActorBox),
    Stop(String),
}

/// An actor to spawn, with a `Debug` that says so.
pub(crate) struct ActorBox(pub(crate) Actor);

impl std::fmt::Debug for ActorBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ActorBox")
    }
}

impl Relayed {
    /// Makes the send with a poller's uppercut sender.
    pub(crate) fn perform(self, sender: &dyn AnySender) {
        match self {
            Relayed::Send(to, envelope) => sender.send(&to, envelope),
            Relayed::Delay(to, envelope, after) => sender.delay(&to, envelope, after),
            Relayed::Spawn(at, ActorBox(actor)) => sender.spawn(&at, Box::new(move || actor)),
            Relayed::Stop(at) => sender.stop(&at),
        }
    }
}

/// One poller's port. Generic over the [`Kit`] so that the model
/// (`crate::model::port`) runs this very code on loom's primitives.
pub(crate) struct PollerPort<K: Kit = Std> {
    ready: K::Mutex<Vec<Arc<ActorCell>>>,
    relay: K::Mutex<Vec<Relayed>>,
    /// Connections (by key) whose WebSocket mail waits.
    mail: K::Mutex<Vec<usize>>,
    /// Something above is waiting.
    pending: K::Bool,
    /// An actor run on this poller sent into the uppercut system, where it
    /// needs a worker: in `local` dispatch the poller lends its worker
    /// after this round.
    lend: K::Bool,
    /// Wakes the poller if it is parked in `poll`.
    wake: Box<dyn Fn() + Send + Sync>,
}

impl<K: Kit> PollerPort<K> {
    pub(crate) fn new(wake: Box<dyn Fn() + Send + Sync>) -> PollerPort<K> {
        PollerPort {
            ready: K::Mutex::new(Vec::new()),
            relay: K::Mutex::new(Vec::new()),
            mail: K::Mutex::new(Vec::new()),
            pending: K::Bool::new(false),
            lend: K::Bool::new(false),
            wake,
        }
    }

    /// Has the poller run what `cell` has queued.
    pub(crate) fn schedule(&self, cell: Arc<ActorCell>) {
        self.ready.lock().push(cell);
        self.mark_pending();
    }

    /// Has the poller make `relayed` with its uppercut sender.
    pub(crate) fn relay(&self, relayed: Relayed) {
        self.relay.lock().push(relayed);
        self.mark_pending();
    }

    /// Work is waiting: the poller must not block.
    pub(crate) fn is_pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst)
    }

    /// Swaps what is waiting into `taken` (kept by the poller, so taking
    /// allocates nothing once warm).
    pub(crate) fn take(&self, taken: &mut PortWork) {
        if !self.pending.swap(false, Ordering::SeqCst) {
            return;
        }
        let PortWork { ready, relay, mail } = taken;
        mem::swap(&mut *self.mail.lock(), mail);
        mem::swap(&mut *self.ready.lock(), ready);
        mem::swap(&mut *self.relay.lock(), relay);
    }

    /// An actor on this poller sent into the uppercut system.
    pub(crate) fn note_system_send(&self) {
        self.lend.store(true, Ordering::Relaxed);
    }

    /// Whether to lend the worker after this round; resets it.
    pub(crate) fn take_lend(&self) -> bool {
        self.lend.swap(false, Ordering::Relaxed)
    }

    fn mark_pending(&self) {
        // Counted before the parked flag is read (see `runtime::wakeup`).
        self.pending.store(true, Ordering::SeqCst);
        (self.wake)();
    }
}

impl<K: Kit> MailPoster for PollerPort<K> {
    fn post_mail(&self, key: usize) {
        self.mail.lock().push(key);
        self.mark_pending();
    }
}

/// What a poller took from its port, in buffers it keeps.
#[derive(Default)]
pub(crate) struct PortWork {
    /// Actors with messages nobody runs.
    pub(crate) ready: Vec<Arc<ActorCell>>,
    /// Sends into the uppercut system.
    pub(crate) relay: Vec<Relayed>,
    /// Connections with WebSocket mail, by key.
    pub(crate) mail: Vec<usize>,
}

impl<K: Kit> std::fmt::Debug for PollerPort<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollerPort")
            .field("pending", &self.is_pending())
            .finish_non_exhaustive()
    }
}
