//! Running one message through an actor with its panic contained: the
//! message is lost (an actor request dropped in the unwinding answers 502),
//! the actor's `on_fail` runs, and the instance stays to take the next
//! message, as the issue of a single bad request should not cost every later
//! one. Logged at `warn`, at most once a second per actor.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use log::warn;
use uppercut::api::{Actor, AnySender, Envelope};

/// At most one report a second.
#[derive(Debug, Default)]
pub(crate) struct WarnLimiter {
    /// When the last report was made, ms since the epoch (0: never).
    last_ms: AtomicU64,
    /// Reports left out since.
    suppressed: AtomicU64,
}

impl WarnLimiter {
    /// Some(reports left out since the last one) when this one is due.
    pub(crate) fn admit(&self) -> Option<u64> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_millis() as u64);
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = last == 0 || now >= last.saturating_add(1000);
        if due
            && self
                .last_ms
                .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.suppressed.swap(0, Ordering::Relaxed));
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        None
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_at_most_once_a_second_and_counts_the_rest() {
        let limiter = WarnLimiter::default();
        assert_eq!(limiter.admit(), Some(0));
        assert_eq!(limiter.admit(), None);
        assert_eq!(limiter.admit(), None);
        limiter.last_ms.store(1, Ordering::Relaxed);
        assert_eq!(limiter.admit(), Some(2));
    }
}
