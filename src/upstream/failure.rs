//! Why `/io` could not answer with the upstream's JSON. The 502, 503 or 504
//! body names the cause in one line (`502 Bad Gateway: upstream status 500`),
//! and the server warns about it, at most once a second per cause, so that a
//! failing upstream under load neither floods the log nor goes unseen.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use log::warn;

use crate::http::status::ErrorStatus;
use crate::observe::metrics::UpstreamResult;
use crate::routes::actor_response::ActorResponse;

/// Why the upstream's answer is not there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpstreamFailure {
    /// The connection was refused (nothing listens there).
    Refused,
    /// Connecting failed some other way (unreachable, no route, ...).
    ConnectFailed,
    /// The upstream reset the connection.
    Reset,
    /// The upstream closed the connection before a whole answer.
    Closed,
    /// Another error on the connection.
    Broken,
    /// The answer is not an HTTP response we can read.
    NotHttp,
    /// The answer's body is over the limit.
    TooLarge,
    /// The answer's status is not 200.
    Status(u16),
    /// The answer's body is not JSON.
    NotJson,
    /// No answer within `--upstream-timeout`.
    TimedOut,
    /// Every connection was busy and the queue full.
    QueueFull,
}

const CAUSES: usize = 11;

impl UpstreamFailure {
    /// The failure a socket error on the upstream connection means.
    pub(crate) fn from_io(error: &io::Error, connecting: bool) -> UpstreamFailure {
        match error.kind() {
            io::ErrorKind::ConnectionRefused => UpstreamFailure::Refused,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => UpstreamFailure::Reset,
            _ if connecting => UpstreamFailure::ConnectFailed,
            _ => UpstreamFailure::Broken,
        }
    }

    /// The `/metrics` result this failure counts as: refused covers every
    /// way of not getting a connection, bad_response every answer that
    /// arrived, or broke off, unusable.
    pub(crate) fn counted_as(self) -> UpstreamResult {
        match self {
            UpstreamFailure::Refused | UpstreamFailure::ConnectFailed => UpstreamResult::Refused,
            UpstreamFailure::TimedOut => UpstreamResult::Timeout,
            UpstreamFailure::QueueFull => UpstreamResult::QueueFull,
            _ => UpstreamResult::BadResponse,
        }
    }

    pub(crate) fn status(self) -> ErrorStatus {
        match self {
            UpstreamFailure::TimedOut => ErrorStatus::GatewayTimeout,
            UpstreamFailure::QueueFull => ErrorStatus::ServiceUnavailable,
            _ => ErrorStatus::BadGateway,
        }
    }

    /// The cause as the body and the log say it (the status code follows
    /// `upstream status `).
    fn cause(self) -> &'static str {
        match self {
            UpstreamFailure::Refused => "upstream refused the connection",
            UpstreamFailure::ConnectFailed => "cannot connect to the upstream",
            UpstreamFailure::Reset => "upstream reset the connection",
            UpstreamFailure::Closed => "upstream closed the connection before answering",
            UpstreamFailure::Broken => "upstream connection failed",
            UpstreamFailure::NotHttp => "upstream answer is not valid HTTP",
            UpstreamFailure::TooLarge => "upstream answer is too large",
            UpstreamFailure::Status(_) => "upstream status ",
            UpstreamFailure::NotJson => "upstream answer is not JSON",
            UpstreamFailure::TimedOut => "upstream timed out",
            UpstreamFailure::QueueFull => "upstream queue full",
        }
    }

    /// Distinct for each cause, whatever the status code: the rate limit's key.
    fn index(self) -> usize {
        match self {
            UpstreamFailure::Refused => 0,
            UpstreamFailure::ConnectFailed => 1,
            UpstreamFailure::Reset => 2,
            UpstreamFailure::Closed => 3,
            UpstreamFailure::Broken => 4,
            UpstreamFailure::NotHttp => 5,
            UpstreamFailure::TooLarge => 6,
            UpstreamFailure::Status(_) => 7,
            UpstreamFailure::NotJson => 8,
            UpstreamFailure::TimedOut => 9,
            UpstreamFailure::QueueFull => 10,
        }
    }

    /// Writes the cause, with the status code if there is one, into `buf`.
    fn describe(self, buf: &mut [u8; 64]) -> usize {
        let mut cursor = io::Cursor::new(&mut buf[..]);
        let _ = cursor.write_all(self.cause().as_bytes());
        if let UpstreamFailure::Status(code) = self {
            let _ = write!(cursor, "{code}");
        }
        cursor.position() as usize
    }

    /// The response: `CODE REASON: cause\n` as a text body, unless the
    /// application chose its error bodies.
    pub(crate) fn response(self) -> ActorResponse {
        let mut cause = [0u8; 64];
        let cause_len = self.describe(&mut cause);
        let cause = String::from_utf8_lossy(&cause[..cause_len]);
        ActorResponse::failure(self.status().code(), &cause)
    }

    /// Warns that `/io` failed this way, unless this cause was reported less
    /// than a second ago (then it is only counted, for the next report).
    pub(crate) fn warn(self, upstream: SocketAddr) {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64);
        let Some(suppressed) = WARNINGS.admit(self.index(), now_ms) else {
            return;
        };
        let mut cause = [0u8; 64];
        let len = self.describe(&mut cause);
        let cause = String::from_utf8_lossy(&cause[..len]);
        match suppressed {
            0 => warn!("/io: {cause} ({upstream})"),
            n => warn!("/io: {cause} ({upstream}; {n} more since the last report)"),
        }
    }
}

static WARNINGS: WarnLimiter = WarnLimiter::new();

/// At most one report a second per cause, shared by every poller: a fixed
/// array of atomics, touched only when a request fails.
struct WarnLimiter {
    /// When each cause was last reported, in ms since the epoch (0: never).
    last_ms: [AtomicU64; CAUSES],
    /// Failures not reported since.
    suppressed: [AtomicU64; CAUSES],
}

impl WarnLimiter {
    const fn new() -> WarnLimiter {
        WarnLimiter {
            last_ms: [const { AtomicU64::new(0) }; CAUSES],
            suppressed: [const { AtomicU64::new(0) }; CAUSES],
        }
    }

    /// Some(failures suppressed since the last report) when this one is to
    /// be reported.
    fn admit(&self, cause: usize, now_ms: u64) -> Option<u64> {
        let last = self.last_ms[cause].load(Ordering::Relaxed);
        let due = last == 0 || now_ms >= last.saturating_add(1000);
        if due
            && self.last_ms[cause]
                .compare_exchange(last, now_ms.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.suppressed[cause].swap(0, Ordering::Relaxed));
        }
        self.suppressed[cause].fetch_add(1, Ordering::Relaxed);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_each_cause_at_most_once_a_second() {
        let limiter = WarnLimiter::new();
        let (refused, status) = (UpstreamFailure::Refused.index(), 7);
        assert_eq!(limiter.admit(refused, 10_000), Some(0));
        assert_eq!(limiter.admit(refused, 10_500), None);
        assert_eq!(limiter.admit(status, 10_500), Some(0));
        assert_eq!(limiter.admit(refused, 10_999), None);
        assert_eq!(limiter.admit(refused, 11_000), Some(2));
        assert_eq!(limiter.admit(refused, 11_001), None);
    }

    #[test]
    fn every_cause_has_its_own_key() {
        let all = [
            UpstreamFailure::Refused,
            UpstreamFailure::ConnectFailed,
            UpstreamFailure::Reset,
            UpstreamFailure::Closed,
            UpstreamFailure::Broken,
            UpstreamFailure::NotHttp,
            UpstreamFailure::TooLarge,
            UpstreamFailure::Status(500),
            UpstreamFailure::NotJson,
            UpstreamFailure::TimedOut,
            UpstreamFailure::QueueFull,
        ];
        let mut keys: Vec<usize> = all.iter().map(|failure| failure.index()).collect();
        keys.sort_unstable();
        assert_eq!(keys, (0..CAUSES).collect::<Vec<_>>());
        assert_eq!(
            UpstreamFailure::Status(404).index(),
            UpstreamFailure::Status(500).index()
        );
    }

    #[test]
    fn names_the_cause_in_the_body() {
        let response = UpstreamFailure::Status(418).response();
        assert_eq!(response.status, 502);
        assert_eq!(response.content_type, Some("text/plain; charset=utf-8"));
        assert_eq!(
            &response.body[..],
            b"502 Bad Gateway: upstream status 418\n"
        );
        let response = UpstreamFailure::TimedOut.response();
        assert_eq!(
            &response.body[..],
            b"504 Gateway Timeout: upstream timed out\n"
        );
    }
}
