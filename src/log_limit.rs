//! At most one warning a second for a kind of failure that a client or a
//! peer can cause at any rate (a failed TLS handshake, an actor's panic):
//! the log says that it happens, and how often, without becoming the load.
//! It depends on nothing else in the crate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// At most one report a second.
#[derive(Debug, Default)]
pub(crate) struct WarnLimiter {
    /// When the last report was made, ms since the epoch (0: never).
    last_ms: AtomicU64,
    /// Reports left out since.
    suppressed: AtomicU64,
}

impl WarnLimiter {
    pub(crate) const fn new() -> WarnLimiter {
        WarnLimiter {
            last_ms: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Some(reports left out since the last one) when this one is due.
    pub(crate) fn admit(&self) -> Option<u64> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_millis() as u64);
        self.admit_at(now)
    }

    fn admit_at(&self, now_ms: u64) -> Option<u64> {
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = last == 0 || now_ms >= last.saturating_add(1000);
        if due
            && self
                .last_ms
                .compare_exchange(last, now_ms.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.suppressed.swap(0, Ordering::Relaxed));
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_at_most_once_a_second_and_counts_the_rest() {
        let limiter = WarnLimiter::new();
        assert_eq!(limiter.admit_at(10_000), Some(0));
        assert_eq!(limiter.admit_at(10_500), None);
        assert_eq!(limiter.admit_at(10_999), None);
        assert_eq!(limiter.admit_at(11_000), Some(2));
        assert_eq!(limiter.admit_at(11_001), None);
    }
}
