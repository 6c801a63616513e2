//! The wake-up protocol between a poller and its connection actors.
//!
//! A poller never sends a connection more than one envelope at a time: it
//! posts what happened (readable, hung up, deadline passed, upstream answer)
//! as bits in the connection's [`Mailbox`], and sends a unit [`Wake`] only
//! when the mailbox was empty. The connection takes every posted bit at once.
//! So a connection's uppercut mailbox never grows, and a `Wake` costs no
//! allocation.
//!
//! In `system` dispatch a poller also counts its [`Outstanding`] wakes. Once
//! it has sent one, it does not block in `poll`, because the connection
//! actors that must handle its wakes need the uppercut worker it would hold:
//! it returns the worker, without sending itself a `Tick`, and the connection
//! that handles the last outstanding wake sends the poller its `Tick`. So:
//!
//! - There is one `Tick` per poller, and only its holder (the poller running
//!   its loop) sends wakes; a message handler only queues what it was sent.
//!   A second `Tick` could start the loop while mail waits behind it.
//! - Everything a connection sends its poller (`Closed`, an upstream
//!   request) is sent while its own wake is still counted, so it reaches the
//!   poller before that `Tick`: a poller blocked in `poll` is never needed by
//!   anyone, and a poller stops (only with no wake outstanding) before no
//!   connection can still send to it.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

use mio::Token;

use crate::upstream::UpstreamReply;

/// A poller's own message: run the event loop.
#[derive(Debug)]
pub struct Tick;

/// A connection's message: take what its mailbox holds.
#[derive(Debug)]
pub struct Wake;

/// Sent to the poller (in `system` dispatch) by a connection that closed, so
/// it frees the token and stops the actor.
#[derive(Debug)]
pub struct Closed(pub Token);

/// The socket may be readable or writable.
pub const READY: u8 = 1;
/// The peer closed its side, or the socket failed: that edge has been
/// consumed, so read to the end.
pub const HANGUP: u8 = 2;
/// The poller's sweep found the connection's deadline passed.
pub const EXPIRE: u8 = 4;
/// The upstream answered; the answer is in the mailbox.
pub const UPSTREAM: u8 = 8;
/// The connection is closed: nothing posted later is handled.
const CLOSED: u8 = 0x80;

/// What a poller has posted to one connection since it last looked.
#[derive(Debug, Default)]
pub struct Mailbox {
    bits: AtomicU8,
    /// Written by the poller before it posts `UPSTREAM`; a connection has at
    /// most one upstream request in flight, so this is never contended.
    upstream: Mutex<Option<UpstreamReply>>,
}

impl Mailbox {
    /// Posts `bits`; true when the connection must be sent a [`Wake`] (none
    /// is pending, and it is open).
    pub fn post(&self, bits: u8) -> bool {
        self.bits.fetch_or(bits, Ordering::AcqRel) == 0
    }

    /// Leaves the upstream's answer and posts `UPSTREAM`; as [`Mailbox::post`].
    pub fn post_upstream(&self, reply: UpstreamReply) -> bool {
        *self.upstream.lock().unwrap_or_else(|e| e.into_inner()) = Some(reply);
        self.post(UPSTREAM)
    }

    /// Takes everything posted; None once closed.
    pub fn take(&self) -> Option<u8> {
        let bits = self.bits.fetch_and(CLOSED, Ordering::AcqRel);
        (bits & CLOSED == 0).then_some(bits)
    }

    /// The upstream answer posted with `UPSTREAM`.
    pub fn take_upstream(&self) -> Option<UpstreamReply> {
        self.upstream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Closes the mailbox; true when a `Wake` was sent since the last `take`
    /// that will now never be handled (uppercut drops a stopped actor's
    /// queue), so the caller accounts for it.
    pub fn close(&self) -> bool {
        let bits = self.bits.swap(CLOSED, Ordering::AcqRel);
        bits != 0 && bits & CLOSED == 0
    }
}

/// `system` dispatch: the wakes a poller has sent that are not yet handled.
#[derive(Debug, Default)]
pub struct Outstanding(AtomicUsize);

impl Outstanding {
    /// Counts a wake about to be sent.
    pub fn add(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    /// Counts `handled` wakes done; true when none is left, and so the caller
    /// must send the poller its `Tick`.
    pub fn done(&self, handled: usize) -> bool {
        handled > 0 && self.0.fetch_sub(handled, Ordering::AcqRel) == handled
    }

    /// True when no wake is outstanding: the poller may block.
    pub fn is_zero(&self) -> bool {
        self.0.load(Ordering::Acquire) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_post_asks_for_a_wake() {
        let mailbox = Mailbox::default();
        assert!(mailbox.post(READY));
        assert!(!mailbox.post(EXPIRE));
        assert_eq!(mailbox.take(), Some(READY | EXPIRE));
        assert!(mailbox.post(HANGUP));
    }

    #[test]
    fn closing_accounts_for_a_wake_sent_after_the_last_take() {
        let mailbox = Mailbox::default();
        assert!(mailbox.post(READY));
        assert_eq!(mailbox.take(), Some(READY));
        assert!(!mailbox.close(), "nothing was sent since the take");

        let mailbox = Mailbox::default();
        assert!(mailbox.post(READY));
        assert!(mailbox.close(), "the wake sent will never be handled");
        assert_eq!(mailbox.take(), None);
        assert!(!mailbox.post(READY), "a closed mailbox asks for no wake");
    }

    #[test]
    fn the_last_handled_wake_hands_the_tick_back() {
        let outstanding = Outstanding::default();
        outstanding.add();
        outstanding.add();
        assert!(!outstanding.is_zero());
        assert!(!outstanding.done(1));
        assert!(outstanding.done(1));
        assert!(outstanding.is_zero());
        assert!(!outstanding.done(0));
    }
}
