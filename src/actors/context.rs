//! Where an owned actor runs and how it sends: a [`RunContext`] says which
//! thread this is (a poller's, whose connections and actors may run actors
//! here, or one that must not: a blocking thread, the delay timer), and gives
//! each actor it runs a [`HostedSender`] under the actor's own address.
//!
//! A send from an actor to another owned actor, on a poller's thread, is run
//! on that same thread once the sending actor has returned (never inside it,
//! so no actor is ever entered twice and the stack stays flat), as a task
//! woken on a worker runs on that worker. A send from elsewhere is queued and
//! the target's home poller is woken to run it. A send to any other address
//! goes into the uppercut system: with this thread's uppercut sender if it
//! has one (and then, in `local` dispatch, the poller lends its worker after
//! the round, since that actor needs one), else relayed through a poller.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use log::{debug, info, warn};
use uppercut::api::{Actor, AnySender, Envelope};

use crate::actors::cell::{ActorCell, Runner};
use crate::actors::contain::{run_contained, WarnLimiter};
use crate::actors::directory::{Dest, Directory, Resolved};
use crate::actors::port::{ActorBox, PollerPort, Relayed};
use crate::actors::timer::Timer;

thread_local! {
    /// Sends from actors run on this thread, to run once the sender returned.
    static FOLLOW_UPS: RefCell<VecDeque<(Arc<ActorCell>, Envelope)>> =
        const { RefCell::new(VecDeque::new()) };
}

/// The thread actors run on now, and how they reach the others.
pub(crate) struct RunContext<'a> {
    directory: &'a Directory,
    timer: Option<&'a Timer>,
    /// The poller whose thread this is, or whose connection is running;
    /// `None` on a thread that must not run actors.
    poller: Option<usize>,
    /// This thread's uppercut sender, if it has one.
    outer: Option<&'a dyn AnySender>,
}

impl<'a> RunContext<'a> {
    pub(crate) fn new(
        directory: &'a Directory,
        timer: Option<&'a Timer>,
        poller: Option<usize>,
        outer: Option<&'a dyn AnySender>,
    ) -> RunContext<'a> {
        RunContext {
            directory,
            timer,
            poller,
            outer,
        }
    }

    /// Sends `envelope` to `cell` from this thread: on a poller's thread
    /// it runs here if the actor is free, and so does whatever that sends
    /// on; elsewhere it is queued for the cell's home poller.
    pub(crate) fn deliver(&self, cell: &Arc<ActorCell>, envelope: Envelope) {
        match self.poller {
            Some(_) => {
                cell.deliver(envelope, self);
                self.run_follow_ups();
            }
            None => {
                cell.enqueue(envelope);
                self.directory.schedule(cell);
            }
        }
    }

    /// Runs what `cell` has queued, if it is free (a poller's round).
    pub(crate) fn run_queued(&self, cell: &Arc<ActorCell>) {
        cell.run_queued(self);
        self.run_follow_ups();
    }

    /// Hands `envelope` to `actor` at `address` (a blocking thread's
    /// instance, or a cell's through `Runner`), with its own sender.
    pub(crate) fn run_actor(
        &self,
        address: &str,
        actor: &mut Actor,
        envelope: Envelope,
        warnings: &WarnLimiter,
    ) {
        let mut sender = HostedSender {
            context: self,
            me: address,
        };
        run_contained(address, actor, envelope, &mut sender, warnings);
    }

    /// Runs `f` with a sender under `me` (an actor the server does not
    /// keep in a cell: a WebSocket connection's), then whatever the sends
    /// it made to owned actors on this thread set running.
    pub(crate) fn run_as<R>(&self, me: &str, f: impl FnOnce(&mut dyn AnySender) -> R) -> R {
        let mut sender = HostedSender { context: self, me };
        let result = f(&mut sender);
        self.run_follow_ups();
        result
    }

    /// The poller whose thread this is, if any.
    pub(crate) fn poller(&self) -> Option<usize> {
        self.poller
    }

    /// Where the server's actors are.
    pub(crate) fn directory(&self) -> &Directory {
        self.directory
    }

    /// Sends `envelope` to `to` as `from` would (a message from another
    /// server, on this poller's thread), then runs what that set running.
    pub(crate) fn send_as(&self, from: &str, to: &str, envelope: Envelope) {
        self.run_as(from, |sender| sender.send(to, envelope));
    }

    /// Calls `actor`'s `on_stop`, with its own sender; a panic there is
    /// only logged.
    pub(crate) fn stop_actor(&self, address: &str, actor: &mut Actor) {
        let mut sender = HostedSender {
            context: self,
            me: address,
        };
        let stopped = panic::catch_unwind(AssertUnwindSafe(|| actor.on_stop(&mut sender)));
        if stopped.is_err() {
            warn!("actor {address}: on_stop panicked");
        }
    }

    /// Runs the sends actors made on this thread, until none is left.
    fn run_follow_ups(&self) {
        while let Some((cell, envelope)) = FOLLOW_UPS.with(|f| f.borrow_mut().pop_front()) {
            cell.deliver(envelope, self);
        }
    }

    /// Makes `relayed` in the uppercut system.
    fn to_system(&self, relayed: Relayed) {
        match self.outer {
            Some(outer) => {
                relayed.perform(outer);
                if let Some(port) = self.poller.and_then(|index| self.directory.port(index)) {
                    port.note_system_send();
                }
            }
            None => self.directory.relay(relayed),
        }
    }
}

impl Runner for RunContext<'_> {
    fn run(&self, cell: &ActorCell, actor: &mut Actor, envelope: Envelope) {
        self.run_actor(cell.address(), actor, envelope, &cell.warnings);
    }

    fn schedule(&self, cell: &Arc<ActorCell>) {
        self.directory.schedule(cell);
    }

    fn home_port(&self, cell: &ActorCell) -> Option<Arc<PollerPort>> {
        self.directory.port(cell.home()).cloned()
    }
}

/// Who a message is from: what its envelope says, else the sender.
fn sender_of(envelope: &Envelope, me: &str) -> String {
    match envelope.from.is_empty() {
        true => me.to_string(),
        false => envelope.from.clone(),
    }
}

/// The sender an owned actor gets: its own address, the server's actors
/// reached directly, and the uppercut system for the rest.
struct HostedSender<'a> {
    context: &'a RunContext<'a>,
    me: &'a str,
}

impl AnySender for HostedSender<'_> {
    fn me(&self) -> &str {
        self.me
    }

    fn send(&self, address: &str, envelope: Envelope) {
        let context = self.context;
        match context.directory.resolve(address, context.poller) {
            Some(Resolved::Cell(cell)) => match context.poller {
                Some(_) => {
                    FOLLOW_UPS.with(|f| f.borrow_mut().push_back((Arc::clone(cell), envelope)))
                }
                None => {
                    cell.enqueue(envelope);
                    context.directory.schedule(cell);
                }
            },
            Some(Resolved::Blocking(pool)) => pool.submit(envelope),
            Some(Resolved::WebSocket(handle)) => {
                handle.mail(envelope);
            }
            Some(Resolved::Remote(to)) => {
                let from = sender_of(&envelope, self.me);
                context.directory.send_remote(&to, &from, envelope);
            }
            Some(Resolved::Topic(topic)) => {
                let from = sender_of(&envelope, self.me);
                context
                    .directory
                    .to_topic(topic, &from, envelope, |address, envelope| {
                        self.send(address, envelope)
                    });
            }
            Some(Resolved::Placed(name)) => {
                let envelope = match envelope.from.is_empty() {
                    true => envelope.from(self.me),
                    false => envelope,
                };
                if let Some(placement) = context.directory.placement() {
                    placement.deliver(name, envelope, false, context);
                }
            }
            None => context.to_system(Relayed::Send(address.to_string(), envelope)),
        }
    }

    fn spawn(&self, address: &str, f: Box<dyn FnOnce() -> Actor>) {
        let actor = ActorBox(f());
        self.context
            .to_system(Relayed::Spawn(address.to_string(), actor));
    }

    fn delay(&self, address: &str, envelope: Envelope, duration: Duration) {
        let context = self.context;
        match (context.directory.reaches(address), context.timer) {
            (true, Some(timer)) => timer.delay(address, envelope, duration),
            _ => context.to_system(Relayed::Delay(address.to_string(), envelope, duration)),
        }
    }

    fn stop(&self, address: &str) {
        let Some(dest) = self.context.directory.get(address) else {
            return self.context.to_system(Relayed::Stop(address.to_string()));
        };
        match dest {
            Dest::Shared(cell) => drop(cell.stop()),
            Dest::PerPoller { cells, .. } => cells.iter().for_each(|cell| drop(cell.stop())),
            Dest::Blocking(pool) => pool.close(),
        }
    }

    fn log(&mut self, message: &str) {
        info!("actor {}: {message}", self.me);
    }

    fn metric(&mut self, name: &str, value: f64) {
        debug!("actor {}: metric {name} = {value}", self.me);
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}
