//! Running one message through an actor with its panic contained: the
//! message is lost (an actor request dropped in the unwinding answers 502),
//! the actor's `on_fail` runs, and the instance stays to take the next
//! message, as the issue of a single bad request should not cost every later
//! one. Logged at `warn`, at most once a second per actor.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};

use log::warn;
use uppercut::api::{Actor, AnySender, Envelope};

pub(crate) use crate::log_limit::WarnLimiter;

/// Hands `envelope` to `actor`, at `address`, containing a panic.
pub(crate) fn run_contained(
    address: &str,
    actor: &mut Actor,
    envelope: Envelope,
    sender: &mut dyn AnySender,
    warnings: &WarnLimiter,
) {
    let received = panic::catch_unwind(AssertUnwindSafe(|| actor.receive(envelope, sender)));
    let Err(error) = received else {
        return;
    };
    if let Some(suppressed) = warnings.admit() {
        let what = describe(&*error);
        match suppressed {
            0 => warn!("actor {address} panicked: {what}; it goes on with its next message"),
            n => warn!("actor {address} panicked: {what} ({n} more panics since the last report)"),
        }
    }
    let failed = panic::catch_unwind(AssertUnwindSafe(|| actor.on_fail(error, sender)));
    if failed.is_err() {
        warn!("actor {address}: on_fail panicked too");
    }
}

/// A panic's message, where it has one.
fn describe(error: &(dyn Any + Send)) -> &str {
    if let Some(message) = error.downcast_ref::<&str>() {
        message
    } else if let Some(message) = error.downcast_ref::<String>() {
        message
    } else {
        "(no message)"
    }
}
