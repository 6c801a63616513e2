//! At most one warning a second for a kind of failure that a client or a
//! peer can cause at any rate (a failed TLS handshake, an actor's panic):
//! the log says that it happens, and how often, without becoming the load.
//! The same for what rustls logs, which a client can cause once per
//! connection ([`Limited`]). It depends on nothing else in the crate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use log::{Level, Log, Metadata, Record};

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

/// A logger that lets warnings and errors from rustls through at most
/// once a second (the next one says how many were left out), and
/// everything else as it is.
#[derive(Debug)]
pub(crate) struct Limited<L> {
    inner: L,
    rustls: WarnLimiter,
}

impl<L: Log> Limited<L> {
    pub(crate) fn new(inner: L) -> Limited<L> {
        Limited {
            inner,
            rustls: WarnLimiter::new(),
        }
    }
}

/// A record from rustls (or a module of it) at warn or error.
fn is_rustls_warning(record: &Record<'_>) -> bool {
    let target = record.target();
    let rustls = target == "rustls" || target.starts_with("rustls::");
    rustls && record.level() <= Level::Warn
}

impl<L: Log> Log for Limited<L> {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.inner.enabled(metadata)
    }

    fn log(&self, record: &Record<'_>) {
        // Only a record the logger would write takes the second's turn.
        if !is_rustls_warning(record) || !self.inner.enabled(record.metadata()) {
            return self.inner.log(record);
        }
        match self.rustls.admit() {
            None => {}
            Some(0) => self.inner.log(record),
            Some(left_out) => self.inner.log(
                &Record::builder()
                    .level(record.level())
                    .target(record.target())
                    .module_path(record.module_path())
                    .file(record.file())
                    .line(record.line())
                    .args(format_args!(
                        "{} ({left_out} more rustls warnings since the last)",
                        record.args()
                    ))
                    .build(),
            ),
        }
    }

    fn flush(&self) {
        self.inner.flush();
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

    /// Keeps what it is given to write.
    #[derive(Default)]
    struct Kept(std::sync::Mutex<Vec<String>>);

    impl Log for Kept {
        fn enabled(&self, metadata: &Metadata<'_>) -> bool {
            metadata.level() <= Level::Info
        }

        fn log(&self, record: &Record<'_>) {
            if self.enabled(record.metadata()) {
                let line = format!("{} {}: {}", record.level(), record.target(), record.args());
                self.0.lock().unwrap().push(line);
            }
        }

        fn flush(&self) {}
    }

    #[test]
    fn rustls_warnings_pass_once_a_second_and_the_rest_as_they_are() {
        let limited = Limited::new(Kept::default());
        let log = |level, target: &str, text: &str| {
            limited.log(
                &Record::builder()
                    .level(level)
                    .target(target)
                    .args(format_args!("{text}"))
                    .build(),
            );
        };
        for _ in 0..100 {
            log(
                Level::Warn,
                "rustls::msgs::handshake",
                "Illegal SNI hostname",
            );
            log(
                Level::Debug,
                "rustls::server",
                "not written: below the filter",
            );
            log(Level::Warn, "uppercut_mio_server::runtime", "ours");
        }
        log(Level::Error, "rustlsx", "not rustls");
        let kept = limited.inner.0.lock().unwrap();
        let rustls: Vec<&String> = kept.iter().filter(|l| l.contains(" rustls::")).collect();
        assert_eq!(
            rustls,
            ["WARN rustls::msgs::handshake: Illegal SNI hostname"]
        );
        assert_eq!(kept.iter().filter(|l| l.ends_with(": ours")).count(), 100);
        assert_eq!(kept.last().unwrap(), "ERROR rustlsx: not rustls");
        drop(kept);
        // A second on, the next says how many were left out.
        let last = limited.rustls.last_ms.load(Ordering::Relaxed);
        limited.rustls.last_ms.store(last - 1000, Ordering::Relaxed);
        log(Level::Warn, "rustls", "again");
        let kept = limited.inner.0.lock().unwrap();
        assert_eq!(
            kept.last().unwrap(),
            "WARN rustls: again (99 more rustls warnings since the last)"
        );
    }
}
