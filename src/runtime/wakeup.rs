//! The wake-up protocol between a poller and its connection actors.
//!
//! A poller never sends a connection more than one envelope at a time: it
//! posts what happened (readable, hung up, deadline passed, an actor's answer)
//! as bits in the connection's [`Mailbox`], and sends a unit [`Wake`] only
//! when the mailbox was empty. The connection takes every posted bit at once.
//! So a connection's uppercut mailbox never grows, and a `Wake` costs no
//! allocation.
//!
//! In `system` dispatch the connection actors run on the same uppercut
//! workers as the pollers, so a poller must not hold its worker blocked in
//! `poll` while anything it owes an answer to waits for a worker or for it:
//!
//! - It counts its [`Outstanding`] wakes (sent, not yet handled) and blocks
//!   only when there are none; until then it polls without waiting and hands
//!   its worker back after each round (its one `Tick` goes round the
//!   scheduler, so the workers run the woken connections in between).
//! - What a connection sends its poller (`Closed`, a request for its upstream
//!   pool) is
//!   counted as [`Mail`] before it is sent; the poller blocks only when none
//!   is pending, and a connection that mails a poller which has just parked
//!   wakes it ([`Parking`], which hand-offs of sockets use too).
//! - An actor route's answer that is not given on the connection's own
//!   thread while the call runs comes back through the poller's reply queue
//!   (`routes::actor`), never to the connection directly; whoever fills the
//!   queue wakes the poller if it parked, as does whoever leaves an owned
//!   actor for it to run (`actors::port`). No actor the server owns needs an
//!   uppercut worker, so a poller waiting for an answer may block.
//! - A connection sends to its poller only while one of its wakes is
//!   outstanding, and a stopping poller stops only once none is: nothing is
//!   ever sent to a poller after it stopped (uppercut's senders panic once
//!   the system has ended).

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use mio::{Token, Waker};
use uppercut::api::{AnySender, Envelope};

use crate::routes::reply::Outcome;
use crate::sync::{Atomic, AtomicInt, Kit, Lock, Std};

/// A poller's own message: run the event loop.
#[derive(Debug)]
pub(crate) struct Tick;

/// A connection's message: take what its mailbox holds.
#[derive(Debug)]
pub(crate) struct Wake;

/// Sent to the poller (in `system` dispatch) by a connection that closed, so
/// it frees the token.
#[derive(Debug)]
pub(crate) struct Closed(pub Token);

/// The socket may be readable or writable.
pub(crate) const READY: u8 = 1;
/// The peer closed its side, or the socket failed: that edge has been
/// consumed, so read to the end.
pub(crate) const HANGUP: u8 = 2;
/// The poller's sweep found the connection's deadline passed.
pub(crate) const EXPIRE: u8 = 4;
/// An actor answered the connection's call; the answer is in the mailbox.
pub(crate) const REPLY: u8 = 8;
/// A WebSocket connection's mail waits (`websocket::handle`).
pub(crate) const MAIL: u8 = 16;
/// The connection is closed: nothing posted later is handled.
const CLOSED: u8 = 0x80;

/// What a poller has posted to one connection since it last looked.
/// Generic over the [`Kit`] so that the model (`crate::model::mailbox`)
/// runs this very code on loom's primitives.
pub(crate) struct Mailbox<K: Kit = Std> {
    bits: K::U8,
    /// The call the connection waits for an answer to; 0 for none. Whoever
    /// ends the call (the poller with an answer, the connection on timeout
    /// or close) swaps it out, so each call ends once.
    awaited: K::U64,
    /// Written by the poller before it posts `REPLY`; a connection has at
    /// most one call in flight, so this is never contended.
    reply: K::Mutex<Option<Outcome>>,
    /// With `awaited` at [`MANY`] (an HTTP/2 connection, whose streams
    /// make calls at once): every answer, with its call, for the
    /// connection to match.
    answers: K::Mutex<Vec<(u64, Outcome)>>,
}

/// `awaited` of a connection with many calls in flight (HTTP/2): no call
/// number is this large.
const MANY: u64 = u64::MAX;

impl<K: Kit> Default for Mailbox<K> {
    fn default() -> Self {
        Mailbox {
            bits: K::U8::new(0),
            awaited: K::U64::new(0),
            reply: K::Mutex::new(None),
            answers: K::Mutex::new(Vec::new()),
        }
    }
}

impl<K: Kit> fmt::Debug for Mailbox<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mailbox")
            .field("bits", &self.bits)
            .field("awaited", &self.awaited)
            .finish_non_exhaustive()
    }
}

impl<K: Kit> Mailbox<K> {
    /// Posts `bits`; true when the connection must be sent a [`Wake`] (none
    /// is pending, and it is open).
    pub(crate) fn post(&self, bits: u8) -> bool {
        self.bits.fetch_or(bits, Ordering::AcqRel) == 0
    }

    /// The connection now waits for an answer to `call` (never 0).
    pub(crate) fn await_call(&self, call: u64) {
        self.awaited.store(call, Ordering::Release);
    }

    /// Ends `call`, so an answer that comes later is dropped; true when it
    /// was still awaited (no answer had been left).
    pub(crate) fn abandon(&self, call: u64) -> bool {
        self.awaited
            .compare_exchange(call, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// From now on the connection has many calls in flight (HTTP/2): it
    /// takes every answer with [`Mailbox::take_answers`] and matches them.
    pub(crate) fn await_many(&self) {
        self.awaited.store(MANY, Ordering::Release);
    }

    /// Leaves the answer to `call` and posts `REPLY`: `None` when the call
    /// is no longer awaited (the answer is dropped), else as
    /// [`Mailbox::post`].
    pub(crate) fn post_reply(&self, call: u64, outcome: Outcome) -> Option<bool> {
        if self.awaited.load(Ordering::Acquire) == MANY {
            self.answers.lock().push((call, outcome));
            return Some(self.post(REPLY));
        }
        if !self.abandon(call) {
            return None;
        }
        *self.reply.lock() = Some(outcome);
        Some(self.post(REPLY))
    }

    /// Takes everything posted; None once closed.
    pub(crate) fn take(&self) -> Option<u8> {
        let bits = self.bits.fetch_and(CLOSED, Ordering::AcqRel);
        (bits & CLOSED == 0).then_some(bits)
    }

    /// The answer posted with `REPLY`.
    pub(crate) fn take_reply(&self) -> Option<Outcome> {
        self.reply.lock().take()
    }

    /// The answers posted to a connection with many calls, into `into`.
    pub(crate) fn take_answers(&self, into: &mut Vec<(u64, Outcome)>) {
        std::mem::swap(&mut *self.answers.lock(), into);
    }

    /// Closes the mailbox; true when a `Wake` was sent since the last `take`
    /// that will now never be handled (uppercut drops a stopped actor's
    /// queue), so the caller accounts for it.
    pub(crate) fn close(&self) -> bool {
        let bits = self.bits.swap(CLOSED, Ordering::AcqRel);
        bits != 0 && bits & CLOSED == 0
    }
}

/// `system` dispatch: the wakes a poller has sent that are not yet handled.
#[derive(Debug)]
pub(crate) struct Outstanding<K: Kit = Std>(K::Usize);

impl<K: Kit> Default for Outstanding<K> {
    fn default() -> Self {
        Outstanding(K::Usize::new(0))
    }
}

impl<K: Kit> Outstanding<K> {
    /// Counts a wake about to be sent.
    pub(crate) fn add(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    /// Counts `handled` wakes done.
    pub(crate) fn done(&self, handled: usize) {
        self.0.fetch_sub(handled, Ordering::AcqRel);
    }

    /// True when no wake is outstanding: the poller may block.
    pub(crate) fn is_zero(&self) -> bool {
        self.0.load(Ordering::Acquire) == 0
    }
}

/// Whether a poller is parked (about to block, or blocked, in `poll`), and
/// how to wake it. Whatever another thread leaves for a poller (mail, a
/// socket handed over) is counted first, SeqCst, then `wake_if_parked` is
/// called; the poller parks, SeqCst, then reads those counts: either it sees
/// the work and does not block, or the other side sees it parked and wakes
/// it. Generic over the [`Kit`] and the [`Alarm`] so that the model
/// (`crate::model::port`) runs this very code on loom's primitives.
#[derive(Debug)]
pub(crate) struct Parking<K: Kit = Std, A: Alarm = Waker> {
    parked: K::Bool,
    waker: Arc<A>,
}

/// What wakes a poller blocked in `poll`, or makes its next `poll` return
/// at once: mio's `Waker`.
pub(crate) trait Alarm: Send + Sync + fmt::Debug {
    fn wake(&self) -> io::Result<()>;
}

impl Alarm for Waker {
    #[inline]
    fn wake(&self) -> io::Result<()> {
        Waker::wake(self)
    }
}

impl<K: Kit, A: Alarm> Parking<K, A> {
    pub(crate) fn new(waker: Arc<A>) -> Parking<K, A> {
        Parking {
            parked: K::Bool::new(false),
            waker,
        }
    }

    /// Parks the poller unless `waiting` finds work left for it; true when
    /// it may block. A parked poller calls `unpark` once `poll` returns.
    pub(crate) fn park(&self, waiting: impl FnOnce() -> bool) -> bool {
        self.parked.store(true, Ordering::SeqCst);
        if !waiting() {
            return true;
        }
        self.unpark();
        false
    }

    pub(crate) fn unpark(&self) {
        self.parked.store(false, Ordering::SeqCst);
    }

    /// Work was just counted for the poller: wake it if it parked.
    pub(crate) fn wake_if_parked(&self) {
        if self.parked.load(Ordering::SeqCst) {
            if let Err(e) = self.waker.wake() {
                log::error!("waking a poller: {e}");
            }
        }
    }
}

/// `system` dispatch: messages on their way to a poller.
#[derive(Debug, Default)]
pub(crate) struct Mail {
    pending: AtomicUsize,
}

impl Mail {
    /// Sends `envelope` to the poller at `poller`, waking it if it parked.
    pub(crate) fn send(
        &self,
        sender: &dyn AnySender,
        poller: &str,
        envelope: Envelope,
        parking: &Parking,
    ) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        sender.send(poller, envelope);
        parking.wake_if_parked();
    }

    /// The poller took one message.
    pub(crate) fn received(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }

    /// A message is on its way to the poller.
    pub(crate) fn is_pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst) > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_post_asks_for_a_wake() {
        let mailbox: Mailbox = Mailbox::default();
        assert!(mailbox.post(READY));
        assert!(!mailbox.post(EXPIRE));
        assert_eq!(mailbox.take(), Some(READY | EXPIRE));
        assert!(mailbox.post(HANGUP));
    }

    #[test]
    fn closing_accounts_for_a_wake_sent_after_the_last_take() {
        let mailbox: Mailbox = Mailbox::default();
        assert!(mailbox.post(READY));
        assert_eq!(mailbox.take(), Some(READY));
        assert!(!mailbox.close(), "nothing was sent since the take");

        let mailbox: Mailbox = Mailbox::default();
        assert!(mailbox.post(READY));
        assert!(mailbox.close(), "the wake sent will never be handled");
        assert_eq!(mailbox.take(), None);
        assert!(!mailbox.post(READY), "a closed mailbox asks for no wake");
    }

    #[test]
    fn a_call_ends_once_whoever_ends_it() {
        let mailbox: Mailbox = Mailbox::default();
        mailbox.await_call(7);
        assert_eq!(mailbox.post_reply(6, Outcome::Gone), None, "not this call");
        assert!(mailbox.abandon(7), "timed out");
        assert_eq!(
            mailbox.post_reply(7, Outcome::Gone),
            None,
            "answered too late"
        );
        assert!(!mailbox.abandon(7));

        mailbox.await_call(8);
        assert_eq!(mailbox.post_reply(8, Outcome::Gone), Some(true));
        assert!(!mailbox.abandon(8), "already answered");
        assert!(matches!(mailbox.take_reply(), Some(Outcome::Gone)));
    }

    #[test]
    fn counts_wakes_until_all_are_handled() {
        let outstanding: Outstanding = Outstanding::default();
        outstanding.add();
        outstanding.add();
        outstanding.done(1);
        assert!(!outstanding.is_zero());
        outstanding.done(1);
        assert!(outstanding.is_zero());
    }

    #[test]
    fn a_poller_with_mail_on_its_way_does_not_park() {
        let poll = mio::Poll::new().unwrap();
        let parking: Parking =
            Parking::new(Arc::new(Waker::new(poll.registry(), Token(0)).unwrap()));
        let mail = Mail::default();
        assert!(parking.park(|| mail.is_pending()));
        parking.unpark();
        mail.pending.fetch_add(1, Ordering::SeqCst);
        assert!(!parking.park(|| mail.is_pending()));
        assert!(!parking.parked.load(Ordering::SeqCst));
        mail.received();
        assert!(parking.park(|| mail.is_pending()));
    }
}
