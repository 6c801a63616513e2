//! The owned-actor cell (`actors::cell::Baton`): whoever has a message
//! takes the cell with a compare-and-swap and runs it; a sender that finds
//! it busy queues, and the holder runs what was queued before letting go.
//!
//! Claims checked: one holder at a time (loom's cell check: two runs not
//! ordered one after the other fail the model); every message runs exactly
//! once, or is taken out by a stop, and none waits in the queue with
//! nobody holding the cell and no poller asked to run it; each sender's
//! messages run in the order it sent them; the queue's counter matches the
//! queue once all is done; no thread spins for ever.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use loom::thread;

use super::{check_both, Fences, Loom};
use crate::actors::cell::{Baton, Step};

/// A message: its sender, and its place in that sender's sequence.
type Message = (u8, u8);

/// A budget of one message in a row, so that the hand-over of the rest to
/// the home poller is reached with a few messages.
type Cell<F> = Baton<Vec<Message>, Message, Loom<F>, 1>;

/// A cell, and whether it asked its home poller to run what was left
/// (bookkeeping of the model, outside loom's view).
struct Shared<F: Fences> {
    cell: Cell<F>,
    scheduled: AtomicBool,
}

impl<F: Fences> Shared<F> {
    fn new() -> Arc<Shared<F>> {
        Arc::new(Shared {
            cell: Baton::new(Vec::new()),
            scheduled: AtomicBool::new(false),
        })
    }

    /// A sender on a thread that may run actors.
    fn deliver(&self, message: Message) {
        if self.cell.deliver(message, &mut run) {
            self.scheduled.store(true, SeqCst);
        }
    }

    /// The home poller's rounds, once the other threads are done: runs
    /// what it was asked to, until it is not asked again.
    fn rounds(&self) {
        while self.scheduled.swap(false, SeqCst) {
            if self.cell.run_queued(&mut run) {
                self.scheduled.store(true, SeqCst);
            }
        }
    }

    /// What ran, in order; checks nobody holds the cell and nothing is
    /// left queued.
    fn ran(&self) -> Vec<Message> {
        let (counted, queued) = self.cell.queued();
        assert_eq!(counted, queued, "the counter disagrees with the queue");
        assert_eq!(queued, 0, "a message stranded in the queue");
        let mut ran = None;
        self.cell.with_free(|messages| ran = Some(messages.clone()));
        ran.expect("nobody holds the cell once all is done")
    }
}

fn run(ran: &mut Vec<Message>, message: Message) -> Step {
    ran.push(message);
    Step::Go
}

/// Every message of `sent` is in `ran` or `dropped`, once; `ran` keeps
/// each sender's order.
fn all_once_in_order(sent: &[Message], ran: &[Message], dropped: &VecDeque<Message>) {
    for message in sent {
        let times = ran.iter().chain(dropped).filter(|m| *m == message).count();
        assert_eq!(
            times, 1,
            "{message:?} ran or was dropped {times} times: {ran:?}"
        );
    }
    assert_eq!(ran.len() + dropped.len(), sent.len(), "{ran:?}");
    for (i, a) in ran.iter().enumerate() {
        for b in &ran[i + 1..] {
            assert!(a.0 != b.0 || a.1 < b.1, "out of order: {ran:?}");
        }
    }
}

/// Two senders on threads that may run the actor, one sending twice.
fn two_senders<F: Fences>() {
    {
        let shared = Shared::<F>::new();
        let other = Arc::clone(&shared);
        let sender = thread::spawn(move || {
            other.deliver((1, 0));
            other.deliver((1, 1));
        });
        shared.deliver((2, 0));
        sender.join().expect("the sender ran");
        shared.rounds();
        let ran = shared.ran();
        all_once_in_order(&[(1, 0), (1, 1), (2, 0)], &ran, &VecDeque::new());
    }
}

/// A thread that must not run actors queues a message and has the home
/// poller run it, while a sender runs the actor.
fn poller_round<F: Fences>() {
    {
        let shared = Shared::<F>::new();
        let other = Arc::clone(&shared);
        let sender = thread::spawn(move || {
            other.deliver((1, 0));
            other.deliver((1, 1));
        });
        // The blocking thread's message, then the home poller's round.
        shared.cell.enqueue((2, 0));
        if shared.cell.run_queued(&mut run) {
            shared.scheduled.store(true, SeqCst);
        }
        sender.join().expect("the sender ran");
        shared.rounds();
        let ran = shared.ran();
        all_once_in_order(&[(1, 0), (1, 1), (2, 0)], &ran, &VecDeque::new());
    }
}

/// An actor stopped (its queue cleared) while another thread sends to it.
fn stop<F: Fences>() {
    {
        let shared = Shared::<F>::new();
        let other = Arc::clone(&shared);
        let sender = thread::spawn(move || {
            other.deliver((1, 0));
            other.deliver((1, 1));
        });
        shared.deliver((2, 0));
        let dropped = shared.cell.clear();
        sender.join().expect("the sender ran");
        shared.rounds();
        let ran = shared.ran();
        // What a sender queued after the stop's clear may run (a stopped
        // cell drops it unread), but it runs once and is not left behind.
        all_once_in_order(&[(1, 0), (1, 1), (2, 0)], &ran, &dropped);
    }
}

/// The actor parks on one message (its send went past a bound) while
/// another thread sends to it; the relief releases it to the home poller,
/// which runs what queued meanwhile. Nobody runs it while it is parked.
fn park<F: Fences>() {
    {
        let shared = Shared::<F>::new();
        let other = Arc::clone(&shared);
        let sender = thread::spawn(move || {
            other.deliver_parking((1, 0));
            other.deliver_parking((1, 1));
        });
        shared.deliver_parking((2, 0));
        sender.join().expect("the sender ran");
        shared.rounds();
        let ran = shared.ran();
        all_once_in_order(&[(1, 0), (1, 1), (2, 0)], &ran, &VecDeque::new());
    }
}

impl<F: Fences> Shared<F> {
    /// As `deliver`, with an actor that parks on message `(2, 0)`; the
    /// thread that parked it then has the relief come at once (the link
    /// had drained already), which hands it to the home poller.
    fn deliver_parking(&self, message: Message) {
        let parked = std::cell::Cell::new(false);
        let mut run = |ran: &mut Vec<Message>, message: Message| {
            ran.push(message);
            match message == (2, 0) {
                true => {
                    parked.set(true);
                    Step::Park
                }
                false => Step::Go,
            }
        };
        if self.cell.deliver(message, &mut run) {
            self.scheduled.store(true, SeqCst);
        }
        if parked.get() && self.cell.release() {
            self.scheduled.store(true, SeqCst);
        }
    }
}

#[test]
fn a_parked_actor_runs_nothing_until_its_relief() {
    check_both!(5, park);
}

#[test]
fn two_senders_each_message_runs_once_in_order() {
    check_both!(5, two_senders);
}

#[test]
fn a_poller_round_and_a_sender_share_the_cell() {
    check_both!(5, poller_round);
}

#[test]
fn a_stop_while_a_sender_queues() {
    check_both!(5, stop);
}
