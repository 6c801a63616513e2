//! One actor instance the server owns, run where its message is.
//!
//! Whoever has a message for the actor tries to take it (one atomic
//! compare-and-swap): if it is free, the sender runs it right there, on its
//! own thread, then runs whatever others queued meanwhile; if it is busy,
//! the sender leaves the message in the queue and goes on, and the holder
//! runs it before letting the actor go. So the actor handles one message at
//! a time, in the order they were queued, its state is touched by one thread
//! at a time, and no sender ever waits for it.
//!
//! Letting go is the delicate step: a sender may queue a message just after
//! the holder looked at the queue for the last time. Both sides use
//! sequentially consistent operations on the same two atomics (the holder
//! clears `held`, then reads `queued`; a sender adds to `queued`, then tries
//! to take `held`), so at least one of them sees the other: either the holder
//! finds the message, or the sender takes the actor and runs it.
//!
//! The counter moves only under the queue's lock, with the queue: a stop
//! that empties the queue between a sender's push and its count would
//! otherwise leave a count with no message behind it, and the next holder
//! would take the actor back for it again and again, for ever.
//!
//! A holder runs at most [`BUDGET`] queued messages in a row; past that it
//! lets the actor go and has its home poller run the rest in a later round,
//! so that one busy actor cannot keep a poller from its own connections.
//!
//! An actor whose send to another server was taken past `--nats-buffer`
//! (`mail::press`) pauses: its holder *parks* it, keeping the claim with no
//! thread behind it, so senders only queue; when the NATS link has drained,
//! the relief releases the claim to the home poller, whose next round
//! holds it and runs what queued meanwhile, in order. A paused actor costs
//! no thread and drops nothing.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use uppercut::api::{Actor, Envelope};

use crate::actors::contain::WarnLimiter;
use crate::actors::port::PollerPort;
use crate::mail::{self, Pressure};
use crate::sync::{Atomic, AtomicInt, Exclusive, Kit, Lock, Std};

/// Queued messages a holder runs before it hands the rest to the home poller.
pub(crate) const BUDGET: usize = 64;

/// Runs an actor's messages, and finds a poller for what is left over.
pub(crate) trait Runner {
    /// Hands `envelope` to `actor` (the instance in `cell`).
    fn run(&self, cell: &ActorCell, actor: &mut Actor, envelope: Envelope);
    /// `cell` has queued messages and nobody running it: have its home
    /// poller run them.
    fn schedule(&self, cell: &Arc<ActorCell>);
    /// `cell`'s home poller's port, for a relief to schedule it from any
    /// thread.
    fn home_port(&self, cell: &ActorCell) -> Option<Arc<PollerPort>>;
}

/// What a holder does after running an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Runs the next.
    Go,
    /// Parks the state: keeps the claim, with nobody running it, until
    /// [`Baton::release`].
    Park,
}

/// An actor instance, whether it is held, and the messages waiting for it.
pub(crate) struct ActorCell {
    address: Box<str>,
    /// The poller that runs what queues up here when no sender does.
    home: usize,
    /// The instance, and who holds it.
    baton: Baton<Actor, Envelope>,
    /// Stopped: messages are dropped unread (an actor request then answers
    /// 502).
    stopped: AtomicBool,
    /// How often this actor's panics are logged.
    pub(crate) warnings: WarnLimiter,
    /// What the message that parked it pressed on, until the holder asks
    /// it for relief.
    parked_on: std::sync::Mutex<Option<Arc<dyn Pressure>>>,
}

impl ActorCell {
    pub(crate) fn new(address: &str, home: usize, actor: Actor) -> ActorCell {
        ActorCell {
            address: address.into(),
            home,
            baton: Baton::new(actor),
            stopped: AtomicBool::new(false),
            warnings: WarnLimiter::default(),
            parked_on: std::sync::Mutex::new(None),
        }
    }

    /// The address it was spawned at.
    pub(crate) fn address(&self) -> &str {
        &self.address
    }

    /// The poller that runs what nobody else does.
    pub(crate) fn home(&self) -> usize {
        self.home
    }

    /// Runs `envelope` now if the actor is free, with what others queued
    /// before it first; else queues it for the holder. For threads that may
    /// run actors: a poller's, or a connection's.
    pub(crate) fn deliver(self: &Arc<Self>, envelope: Envelope, runner: &dyn Runner) {
        let run = &mut |actor: &mut Actor, envelope| self.run(actor, envelope, runner);
        if self.baton.deliver(envelope, run) {
            runner.schedule(self);
        }
        self.await_relief(runner);
    }

    /// Queues `envelope` without running anything: for threads that must
    /// not run actors, which then `schedule` the cell on its home poller.
    pub(crate) fn enqueue(&self, envelope: Envelope) {
        self.baton.enqueue(envelope);
    }

    /// Runs what is queued, if the actor is free (a poller's round).
    pub(crate) fn run_queued(self: &Arc<Self>, runner: &dyn Runner) {
        let run = &mut |actor: &mut Actor, envelope| self.run(actor, envelope, runner);
        if self.baton.run_queued(run) {
            runner.schedule(self);
        }
        self.await_relief(runner);
    }

    /// The actor parked on a pressure: asks it for relief, which releases
    /// the actor to its home poller.
    fn await_relief(self: &Arc<Self>, runner: &dyn Runner) {
        let pressure = self
            .parked_on
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(pressure) = pressure else {
            return;
        };
        let cell = Arc::clone(self);
        let port = runner.home_port(self);
        pressure.on_relief(Box::new(move || {
            if cell.baton.release() {
                if let Some(port) = port {
                    port.schedule(cell);
                }
            }
        }));
    }

    /// Stops the actor: what is queued and what comes later is dropped.
    /// Returns the instance's queue, to be dropped by the caller outside
    /// any lock.
    pub(crate) fn stop(&self) -> VecDeque<Envelope> {
        self.stopped.store(true, Ordering::SeqCst);
        self.baton.clear()
    }

    /// Runs `f` with the instance if nobody holds it (stopping the server,
    /// once no poller runs).
    pub(crate) fn with_free_actor(&self, f: impl FnOnce(&mut Actor)) {
        self.baton.with_free(f);
    }

    fn run(&self, actor: &mut Actor, envelope: Envelope, runner: &dyn Runner) -> Step {
        if self.stopped.load(Ordering::Relaxed) {
            drop(envelope);
            return Step::Go;
        }
        // Only what this message's sends met counts.
        drop(mail::take_pressure());
        runner.run(self, actor, envelope);
        match mail::take_pressure() {
            Some(pressure) => {
                *self.parked_on.lock().unwrap_or_else(|e| e.into_inner()) = Some(pressure);
                Step::Park
            }
            None => Step::Go,
        }
    }
}

/// The hand-off itself, apart from what an actor cell adds to it (an
/// address, a home poller, stopping): a state `S` that one thread at a time
/// holds and runs items `T` on, and the items queued for the holder. At most
/// `N` queued items run in a row; past that the holder lets go and
/// leaves the rest to its caller. Generic over the [`Kit`] so that the model
/// (`crate::model::cell`) runs this very code on loom's primitives.
pub(crate) struct Baton<S: Send, T: Send, K: Kit = Std, const N: usize = BUDGET> {
    held: K::Bool,
    /// `NOT_PARKED`, or the claim of `held` is kept with nobody running
    /// (`PARKED`) until a relief hands it to the next `run_queued`
    /// (`RELEASED`).
    parked: K::U8,
    queued: K::Usize,
    queue: K::Mutex<VecDeque<T>>,
    /// Touched only by whoever holds `held`.
    state: K::Cell<S>,
}

/// `Baton::parked`: nobody parked the state.
const NOT_PARKED: u8 = 0;
/// The state is parked: `held` stays true, nobody runs it.
const PARKED: u8 = 1;
/// A relief came: the next `run_queued` (or `with_free`) holds it.
const RELEASED: u8 = 2;

// SAFETY: `state` is only reached through `Held`, and at most one `Held`
// exists at a time: it is made only by winning the compare-and-swap of
// `held` from false to true, or of `parked` from `RELEASED` (which only a
// `Held` parking, forgotten with `held` still true, sets up), and dropping
// it stores false. The other fields are `Sync` by the kit's bounds.
unsafe impl<S: Send, T: Send, K: Kit, const N: usize> Sync for Baton<S, T, K, N> {}

impl<S: Send, T: Send, K: Kit, const N: usize> Baton<S, T, K, N> {
    pub(crate) fn new(state: S) -> Self {
        Baton {
            held: K::Bool::new(false),
            parked: K::U8::new(NOT_PARKED),
            queued: K::Usize::new(0),
            queue: K::Mutex::new(VecDeque::new()),
            state: K::Cell::new(state),
        }
    }

    /// Runs `item` now if the state is free, with what others queued before
    /// it first; else queues it for the holder. True when items are left
    /// over past the budget with nobody running them: the caller has them
    /// run later (`run_queued`).
    pub(crate) fn deliver(&self, item: T, run: &mut impl FnMut(&mut S, T) -> Step) -> bool {
        match self.try_hold() {
            Some(held) if self.queued.load(Ordering::SeqCst) == 0 => {
                if held.run(run, item) == Step::Park {
                    return self.park(held);
                }
                self.drain(held, run)
            }
            Some(held) => {
                self.enqueue(item);
                self.drain(held, run)
            }
            None => self.leave_for_holder(item, run),
        }
    }

    /// The state was busy: queues `item` for its holder, and runs it after
    /// all if the holder let go before the item was queued.
    fn leave_for_holder(&self, item: T, run: &mut impl FnMut(&mut S, T) -> Step) -> bool {
        self.enqueue(item);
        match self.try_hold() {
            Some(held) => self.drain(held, run),
            None => false,
        }
    }

    /// Queues `item` without running anything.
    pub(crate) fn enqueue(&self, item: T) {
        let mut queue = self.queue.lock();
        queue.push_back(item);
        // Counted under the lock, as `pop` and `clear` count, so that the
        // counter and the queue agree whenever the lock is free.
        self.queued.fetch_add(1, Ordering::SeqCst);
    }

    /// Runs what is queued, if the state is free or a relief released it
    /// from its parking; true as for `deliver`.
    pub(crate) fn run_queued(&self, run: &mut impl FnMut(&mut S, T) -> Step) -> bool {
        match self.try_unpark().or_else(|| self.try_hold()) {
            Some(held) => self.drain(held, run),
            None => false,
        }
    }

    /// A relief came for a parked state: the next `run_queued` holds it.
    /// True when it was parked (and the caller has it run).
    pub(crate) fn release(&self) -> bool {
        self.parked
            .compare_exchange(PARKED, RELEASED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Keeps `held`'s claim with nobody running the state, until
    /// `release`; nothing is left for the caller.
    fn park(&self, held: Held<'_, S, T, K, N>) -> bool {
        self.parked.store(PARKED, Ordering::SeqCst);
        std::mem::forget(held);
        false
    }

    /// The claim a released parking kept, if there is one.
    fn try_unpark(&self) -> Option<Held<'_, S, T, K, N>> {
        self.parked
            .compare_exchange(RELEASED, NOT_PARKED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
            .then(|| Held { baton: self })
    }

    /// Takes everything queued out, unrun.
    pub(crate) fn clear(&self) -> VecDeque<T> {
        let mut queue = self.queue.lock();
        self.queued.store(0, Ordering::SeqCst);
        std::mem::take(&mut *queue)
    }

    /// Runs `f` with the state if nobody holds it (a parked state counts
    /// as free once released).
    pub(crate) fn with_free(&self, f: impl FnOnce(&mut S)) {
        if let Some(held) = self.try_unpark().or_else(|| self.try_hold()) {
            // SAFETY: `held` is the only `Held` (see `Baton`).
            unsafe { self.state.with_mut(f) };
            drop(held);
        }
    }

    /// The counter of queued items, and the queue's length (for the
    /// model).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> (usize, usize) {
        let queue = self.queue.lock();
        (self.queued.load(Ordering::SeqCst), queue.len())
    }

    fn try_hold(&self) -> Option<Held<'_, S, T, K, N>> {
        self.held
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
            // Lazily: a `Held` made and dropped on failure would let go
            // of the holder's claim.
            .then(|| Held { baton: self })
    }

    fn pop(&self) -> Option<T> {
        if self.queued.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut queue = self.queue.lock();
        let item = queue.pop_front();
        if item.is_some() {
            self.queued.fetch_sub(1, Ordering::SeqCst);
        }
        item
    }

    /// Runs queued items, at most `N`, then lets the state go; takes
    /// it back if an item came meanwhile and budget is left, else returns
    /// whether items are left for the caller to have run later.
    fn drain<'a>(
        &'a self,
        mut held: Held<'a, S, T, K, N>,
        run: &mut impl FnMut(&mut S, T) -> Step,
    ) -> bool {
        let mut budget = N;
        loop {
            while budget > 0 {
                let Some(item) = self.pop() else {
                    break;
                };
                if held.run(run, item) == Step::Park {
                    return self.park(held);
                }
                budget -= 1;
            }
            drop(held);
            if self.queued.load(Ordering::SeqCst) == 0 {
                return false;
            }
            if budget == 0 {
                return true;
            }
            match self.try_hold() {
                Some(again) => held = again,
                // Someone else holds it now, and will see the queue.
                None => return false,
            }
        }
    }
}

/// The right to run the state: whoever has it is the only one.
struct Held<'a, S: Send, T: Send, K: Kit, const N: usize> {
    baton: &'a Baton<S, T, K, N>,
}

impl<S: Send, T: Send, K: Kit, const N: usize> Held<'_, S, T, K, N> {
    fn run(&self, run: &mut impl FnMut(&mut S, T) -> Step, item: T) -> Step {
        // SAFETY: only one `Held` exists at a time (see `Baton`), and it is
        // not shared between threads: the reference ends before it drops.
        unsafe { self.baton.state.with_mut(|state| run(state, item)) }
    }
}

impl<S: Send, T: Send, K: Kit, const N: usize> Drop for Held<'_, S, T, K, N> {
    fn drop(&mut self) {
        self.baton.held.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;
    use std::thread;

    use uppercut::api::{AnyActor, AnySender};

    /// An instance the test runners never look into.
    struct Tally;

    impl AnyActor for Tally {
        fn receive(&mut self, _envelope: Envelope, _sender: &mut dyn AnySender) {}
    }

    /// Runs every message by counting it; notes what it was asked to schedule.
    #[derive(Default)]
    struct Counting {
        running: AtomicBool,
        runs: AtomicUsize,
        scheduled: RefCell<Vec<String>>,
        order: Mutex<Vec<u32>>,
    }

    impl Runner for Counting {
        fn run(&self, _cell: &ActorCell, _actor: &mut Actor, envelope: Envelope) {
            assert!(
                !self.running.swap(true, Ordering::SeqCst),
                "run twice at once"
            );
            if let Ok(n) = envelope.message.downcast::<u32>() {
                self.order.lock().unwrap().push(*n);
            }
            self.runs.fetch_add(1, Ordering::SeqCst);
            self.running.store(false, Ordering::SeqCst);
        }

        fn schedule(&self, cell: &Arc<ActorCell>) {
            self.scheduled.borrow_mut().push(cell.address().to_string());
        }

        fn home_port(&self, _cell: &ActorCell) -> Option<Arc<PollerPort>> {
            None
        }
    }

    // SAFETY for the test: `scheduled` is only touched on one thread.
    unsafe impl Sync for Counting {}

    fn cell() -> Arc<ActorCell> {
        let actor: Actor = Box::new(Tally);
        Arc::new(ActorCell::new("tally", 0, actor))
    }

    #[test]
    fn a_free_actor_runs_at_once_and_queued_messages_run_first() {
        let cell = cell();
        let runner = Counting::default();
        cell.deliver(Envelope::of(1u32), &runner);
        assert_eq!(*runner.order.lock().unwrap(), [1]);
        cell.enqueue(Envelope::of(2u32));
        cell.enqueue(Envelope::of(3u32));
        cell.deliver(Envelope::of(4u32), &runner);
        assert_eq!(*runner.order.lock().unwrap(), [1, 2, 3, 4], "in order");
        assert_eq!(cell.baton.queued.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_message_queued_just_after_the_holder_let_go_still_runs() {
        let cell = cell();
        let runner = Counting::default();
        let run = &mut |actor: &mut Actor, envelope| cell.run(actor, envelope, &runner);
        let held = cell.baton.try_hold().expect("free");
        assert!(cell.baton.try_hold().is_none(), "a sender finds it busy");
        // The holder finds nothing queued and lets go...
        assert!(!cell.baton.drain(held, run));
        // ...just before the sender queues its message.
        assert!(!cell.baton.leave_for_holder(Envelope::of(7u32), run));
        assert_eq!(*runner.order.lock().unwrap(), [7]);
        assert_eq!(cell.baton.queued.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn past_the_budget_the_rest_goes_to_the_home_poller() {
        let cell = cell();
        let runner = Counting::default();
        for n in 0..(BUDGET as u32 + 5) {
            cell.enqueue(Envelope::of(n));
        }
        cell.run_queued(&runner);
        assert_eq!(runner.runs.load(Ordering::SeqCst), BUDGET);
        assert_eq!(*runner.scheduled.borrow(), ["tally"]);
        cell.run_queued(&runner);
        assert_eq!(runner.runs.load(Ordering::SeqCst), BUDGET + 5);
    }

    #[test]
    fn a_stopped_actor_drops_its_messages() {
        let cell = cell();
        let runner = Counting::default();
        cell.enqueue(Envelope::of(1u32));
        assert_eq!(cell.stop().len(), 1);
        cell.deliver(Envelope::of(2u32), &runner);
        assert_eq!(runner.runs.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn senders_on_many_threads_never_run_it_twice_at_once_or_strand_a_message() {
        for _ in 0..20 {
            let cell = cell();
            let runner = Arc::new(ThreadRunner::default());
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let (cell, runner) = (Arc::clone(&cell), Arc::clone(&runner));
                    thread::spawn(move || {
                        for _ in 0..5_000 {
                            cell.deliver(Envelope::of(0u32), &*runner);
                        }
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
            // Only what went past a holder's budget was left, and to the
            // home poller: nothing may sit in the queue unscheduled.
            while runner.scheduled.swap(false, Ordering::SeqCst) {
                cell.run_queued(&*runner);
            }
            assert_eq!(
                cell.baton.queued.load(Ordering::SeqCst),
                0,
                "a message stranded"
            );
            assert_eq!(runner.runs.load(Ordering::SeqCst), 20_000);
        }
    }

    /// As `Counting`, for many threads.
    #[derive(Default)]
    struct ThreadRunner {
        running: AtomicBool,
        runs: AtomicUsize,
        scheduled: AtomicBool,
    }

    impl Runner for ThreadRunner {
        fn run(&self, _cell: &ActorCell, _actor: &mut Actor, _envelope: Envelope) {
            assert!(
                !self.running.swap(true, Ordering::SeqCst),
                "run twice at once"
            );
            self.runs.fetch_add(1, Ordering::SeqCst);
            self.running.store(false, Ordering::SeqCst);
        }

        fn schedule(&self, _cell: &Arc<ActorCell>) {
            self.scheduled.store(true, Ordering::SeqCst);
        }

        fn home_port(&self, _cell: &ActorCell) -> Option<Arc<PollerPort>> {
            None
        }
    }
}
