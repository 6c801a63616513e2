//! A connection's wake-up mailbox (`runtime::wakeup::Mailbox`) and the
//! poller's count of wakes not yet handled (`Outstanding`), as `system`
//! dispatch uses them: the poller posts bits and sends a `Wake` only when
//! the mailbox was empty, counting it; the connection takes every bit on a
//! `Wake` and counts it handled, and when it closes counts the `Wake` sent
//! since its last look, which it will never handle. An actor's answer is
//! left in the mailbox before its bit is posted, unless the connection
//! ended the call first (a timeout).
//!
//! Claims checked: every bit posted before the close is taken; every
//! `Wake` sent is counted handled exactly once, so the poller, which
//! stops only once none is outstanding, neither stops early nor waits for
//! ever; a call ends once, by its answer or by the connection; an answer
//! posted is in the mailbox when the connection sees its bit.

use std::sync::Arc;

use loom::sync::mpsc::{channel, Receiver, Sender};
use loom::thread;

use super::{check_both, Fences, Loom};
use crate::routes::reply::Outcome;
use crate::runtime::wakeup::{Mailbox, Outstanding, READY, REPLY};

/// What the poller sends the connection.
enum Event {
    Wake,
    /// The model's end: the poller has posted all it will.
    End,
}

/// The call the connection waits for an answer to.
const CALL: u64 = 1;

type Shared<F> = (Mailbox<Loom<F>>, Outstanding<Loom<F>>);

/// Posts `bits` as a poller does, sending a counted `Wake` when asked to.
fn wake_if_asked<F: Fences>(shared: &Shared<F>, asked: bool, wakes: &Sender<Event>) {
    if asked {
        shared.1.add();
        wakes.send(Event::Wake).expect("the connection listens");
    }
}

/// The poller: readiness, then the call's answer; whether the answer was
/// left (the call was still awaited).
fn poller<F: Fences>(shared: &Shared<F>, wakes: &Sender<Event>) -> bool {
    wake_if_asked(shared, shared.0.post(READY), wakes);
    let answered = shared.0.post_reply(CALL, Outcome::Gone);
    if let Some(asked) = answered {
        wake_if_asked(shared, asked, wakes);
    }
    wakes.send(Event::End).expect("the connection listens");
    answered.is_some()
}

/// What the connection saw.
#[derive(Default)]
struct Seen {
    bits: u8,
    /// It found the answer with the `REPLY` bit.
    answer: bool,
}

/// The connection: handles each `Wake` as `Connection::receive` does,
/// closing after the first one when `close_early`.
fn connection<F: Fences>(shared: &Shared<F>, wakes: &Receiver<Event>, close_early: bool) -> Seen {
    let (mailbox, outstanding) = shared;
    let mut seen = Seen::default();
    let mut closed = false;
    while let Event::Wake = wakes.recv().expect("the poller sends an end") {
        // None: closed, and this wake was counted at the close.
        let Some(bits) = mailbox.take() else {
            assert!(closed, "a mailbox closed by nobody");
            continue;
        };
        assert_ne!(bits, 0, "woken for nothing");
        seen.bits |= bits;
        if bits & REPLY != 0 {
            seen.answer = mailbox.take_reply().is_some();
            assert!(seen.answer, "the REPLY bit came before its answer");
        }
        if close_early {
            let unhandled = usize::from(mailbox.close());
            outstanding.done(1 + unhandled);
            closed = true;
        } else {
            outstanding.done(1);
        }
    }
    seen
}

fn shared<F: Fences>() -> Arc<Shared<F>> {
    let shared = Arc::new((Mailbox::default(), Outstanding::default()));
    shared.0.await_call(CALL);
    shared
}

/// The connection closes after its first wake while the poller posts on.
fn close_early<F: Fences>() {
    let shared = shared::<F>();
    let (wakes, woken) = channel();
    let poller_side = Arc::clone(&shared);
    let poller = thread::spawn(move || poller(&poller_side, &wakes));
    let seen = connection(&shared, &woken, true);
    poller.join().expect("the poller ran");
    assert!(shared.1.is_zero(), "a wake counted twice or never");
    assert_ne!(seen.bits & READY, 0, "readiness never taken");
}

/// The connection gives up on the call (a timeout) while the poller
/// answers it.
fn answer_or_timeout<F: Fences>() {
    let shared = shared::<F>();
    let (wakes, woken) = channel();
    let poller_side = Arc::clone(&shared);
    let poller = thread::spawn(move || poller(&poller_side, &wakes));
    let timed_out = shared.0.abandon(CALL);
    let seen = connection(&shared, &woken, false);
    let answered = poller.join().expect("the poller ran");
    assert!(answered != timed_out, "the call ended twice or never");
    assert_eq!(seen.answer, answered, "an answer left but never seen");
    assert_eq!(seen.bits & READY, READY, "readiness never taken");
    assert!(shared.1.is_zero(), "a wake counted twice or never");
}

#[test]
fn every_wake_is_handled_or_counted_at_the_close() {
    check_both!(4, close_early);
}

#[test]
fn a_call_ends_once_and_its_answer_arrives() {
    check_both!(4, answer_or_timeout);
}
