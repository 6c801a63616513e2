//! What a dispatch mode decides, as traits the rest of the runtime calls
//! without naming a mode: [`Hosting`] (chosen once, at start, in `hosting`),
//! and the [`ConnectionSet`] it gives each poller: where the poller's
//! connection actors live and how it wakes them. Either way a wake goes
//! through the connection's mailbox (`wakeup`).

use std::sync::Arc;

use mio::Token;
use uppercut::api::{AnySender, Envelope};

use crate::net::transport::Accepted;
use crate::routes::reply::Delivery;
use crate::runtime::pool_threads::WorkerPriority;
use crate::runtime::shared::Shared;

/// How a server runs its connection actors.
pub(crate) trait Hosting: Sync {
    /// The connections of the poller `shared` belongs to.
    fn connections(&self, shared: Arc<Shared>) -> Box<dyn ConnectionSet>;
    /// How uppercut's actor workers are scheduled.
    fn worker_priority(&self) -> WorkerPriority;
    /// Each poller's counters are written by one thread at a time (plain
    /// loads and stores), rather than by any worker (atomic adds).
    fn counters_exclusive(&self) -> bool;
    /// Envelopes go through uppercut's scheduler per request, and are worth
    /// counting in `/metrics`.
    fn counts_envelopes(&self) -> bool;
}

/// How a poller uses its worker this time round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Runs rounds until idle, its connections running in them.
    UntilIdle,
    /// One round, then the worker goes back to uppercut, which runs the
    /// connections it woke; it may block in `poll` only if `may_block`.
    OneRound { may_block: bool },
}

/// Where the poller's envelopes go while it runs its connections: its
/// uppercut sender, and its own inbox for what connections send it.
pub(crate) struct Outbox<'a> {
    pub(crate) sender: &'a mut dyn AnySender,
    pub(crate) inbox: &'a mut Vec<Envelope>,
}

/// One poller's connection actors, as a dispatch mode keeps them.
pub(crate) trait ConnectionSet: Send {
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The token the next connection will have.
    fn next_token(&self) -> Token;

    /// Makes a connection actor for a socket registered under `next_token`.
    fn adopt(&mut self, socket: Accepted, out: &mut Outbox<'_>);

    /// Posts `bits` to a connection's mailbox, and wakes it unless a wake
    /// is already on its way.
    fn notify(&mut self, key: usize, bits: u8, out: &mut Outbox<'_>);

    /// Leaves an actor's answer in the mailbox of the connection that
    /// awaits it and wakes it; an answer no longer awaited is dropped.
    fn deliver(&mut self, delivery: Delivery, out: &mut Outbox<'_>);

    /// Wakes every connection whose deadline has passed: it decides itself
    /// whether it timed out, as it may have moved on since it published it.
    fn sweep(&mut self, now_ms: u64, out: &mut Outbox<'_>);

    /// Wakes every connection, as when the server starts draining: each
    /// closes once it has no request in progress (the phase tells it).
    fn wake_all(&mut self, out: &mut Outbox<'_>);

    /// Closes every connection.
    fn stop_all(&mut self, sender: &mut dyn AnySender);

    /// A connection that closed itself told the poller so (by mail); true
    /// when it was still counted here.
    fn forget(&mut self, token: Token) -> bool;

    /// How the poller uses its worker now.
    fn turn(&self) -> Turn;

    /// The poller may stop: no connection it woke still has to be handled.
    fn may_stop(&self) -> bool;
}
