//! Connection timeouts without a timer per read: each poller keeps a coarse
//! millisecond clock, refreshed after every `poll`; each connection publishes
//! one deadline (an atomic, so its poller can read it in either dispatch mode)
//! that moves with the stage the connection is in; and the poller sweeps the
//! deadlines of its connections once a second, waking the expired ones.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Timeouts;

/// Milliseconds since the poller started, as of its last wake-up.
pub(crate) struct CoarseClock {
    start: Instant,
    now_ms: AtomicU64,
}

impl CoarseClock {
    pub(crate) fn new() -> CoarseClock {
        CoarseClock {
            start: Instant::now(),
            now_ms: AtomicU64::new(0),
        }
    }

    /// Reads the real clock; only the owning poller calls this.
    pub(crate) fn refresh(&self) -> u64 {
        let now = self.start.elapsed().as_millis() as u64;
        self.now_ms.store(now, Ordering::Relaxed);
        now
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::Relaxed)
    }
}

impl Default for CoarseClock {
    fn default() -> Self {
        CoarseClock::new()
    }
}

/// What a connection was doing when its deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// A request (or, on a fresh connection, the first one) did not arrive
    /// whole in time: answer 408, then close.
    Request,
    /// Idle between requests: close quietly.
    Idle,
    /// The client took none of its backed-up output: close.
    Write,
    /// An actor route's answer did not come in time: answer 504.
    Reply,
    /// A lingering close ran its time: close.
    Linger,
    /// A WebSocket heard nothing for the keep-alive timeout: ping it, or
    /// close if the last ping went unanswered.
    WebSocketIdle,
}

/// How long a connection closing after its last response keeps reading and
/// dropping what the client still sends, as nginx's `lingering_timeout`.
pub(crate) const LINGER: Duration = Duration::from_secs(5);

/// What a connection reports after each round of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Activity {
    /// Part of a request (head or body) has arrived, not all of it.
    pub mid_request: bool,
    /// Responses written so far on this connection.
    pub responses: u64,
    /// Output waits for the client to read.
    pub backed_up: bool,
    /// Some output was written in this round.
    pub wrote: bool,
    /// The last request waits for an actor's answer, at most this long.
    pub awaiting: Option<Duration>,
    /// The last response is out and the write side shut: only reading and
    /// dropping what the client still sends.
    pub lingering: bool,
    /// The connection is a WebSocket; `responses` then counts frames
    /// received and pings sent, each of which restarts its clock.
    pub websocket: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Request,
    Idle,
    Writing,
    Reply {
        limit: Duration,
    },
    Linger,
    WebSocket,
    /// A deadline its connection worked out itself (HTTP/2, whose streams
    /// each have their own), and what its passing means.
    Fixed(Expiry),
}

/// One connection's stage, since when, and its published deadline.
pub(crate) struct ConnectionTimer {
    stage: Stage,
    since_ms: u64,
    responses: u64,
    deadline_ms: Arc<AtomicU64>,
}

impl ConnectionTimer {
    /// A fresh connection waits for its first request from `now_ms`.
    pub(crate) fn new(now_ms: u64, timeouts: &Timeouts) -> ConnectionTimer {
        let timer = ConnectionTimer {
            stage: Stage::Request,
            since_ms: now_ms,
            responses: 0,
            deadline_ms: Arc::new(AtomicU64::new(0)),
        };
        timer.publish(timeouts);
        timer
    }

    /// The deadline the poller sweeps.
    pub(crate) fn deadline(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.deadline_ms)
    }

    /// Moves to the stage `activity` shows. The clock of a stage restarts
    /// when the stage changes, when a request completes (a client that keeps
    /// pipelining is making progress) and when backed-up output moves.
    pub(crate) fn update(&mut self, now_ms: u64, activity: Activity, timeouts: &Timeouts) {
        let stage = if activity.lingering {
            Stage::Linger
        } else if activity.backed_up {
            Stage::Writing
        } else if activity.websocket {
            Stage::WebSocket
        } else if let Some(limit) = activity.awaiting {
            Stage::Reply { limit }
        } else if activity.mid_request {
            Stage::Request
        } else {
            Stage::Idle
        };
        let progressed = match stage {
            Stage::Writing => activity.wrote,
            Stage::Request | Stage::Reply { .. } | Stage::WebSocket => {
                activity.responses != self.responses
            }
            Stage::Idle | Stage::Linger | Stage::Fixed(_) => false,
        };
        if stage != self.stage || progressed {
            self.stage = stage;
            self.since_ms = now_ms;
        }
        self.responses = activity.responses;
        self.publish(timeouts);
    }

    /// Publishes `deadline_ms` as it is; its passing means `expiry`.
    pub(crate) fn set(&mut self, expiry: Expiry, deadline_ms: u64) {
        self.stage = Stage::Fixed(expiry);
        self.deadline_ms.store(deadline_ms, Ordering::Relaxed);
    }

    /// What expired, if the deadline has passed.
    pub(crate) fn expired(&self, now_ms: u64) -> Option<Expiry> {
        if !is_past(&self.deadline_ms, now_ms) {
            return None;
        }
        Some(match self.stage {
            Stage::Request => Expiry::Request,
            Stage::Idle => Expiry::Idle,
            Stage::Writing => Expiry::Write,
            Stage::Reply { .. } => Expiry::Reply,
            Stage::Linger => Expiry::Linger,
            Stage::WebSocket => Expiry::WebSocketIdle,
            Stage::Fixed(expiry) => expiry,
        })
    }

    fn publish(&self, timeouts: &Timeouts) {
        let limit = match self.stage {
            Stage::Request => timeouts.header,
            Stage::Idle | Stage::WebSocket => timeouts.keepalive,
            Stage::Writing => timeouts.write,
            Stage::Reply { limit } => limit,
            Stage::Linger => LINGER,
            // Published by `set`, as it is.
            Stage::Fixed(_) => return,
        };
        let deadline = self.since_ms.saturating_add(limit.as_millis() as u64);
        self.deadline_ms.store(deadline, Ordering::Relaxed);
    }
}

/// Whether a published deadline has passed.
pub(crate) fn is_past(deadline: &AtomicU64, now_ms: u64) -> bool {
    now_ms >= deadline.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUTS: Timeouts = Timeouts {
        header: Duration::from_millis(100),
        keepalive: Duration::from_millis(1000),
        write: Duration::from_millis(500),
        sweep: Duration::from_secs(1),
    };

    fn activity(mid_request: bool, responses: u64, backed_up: bool, wrote: bool) -> Activity {
        Activity {
            mid_request,
            responses,
            backed_up,
            wrote,
            awaiting: None,
            lingering: false,
            websocket: false,
        }
    }

    #[test]
    fn a_fresh_connection_must_send_a_request_in_time() {
        let mut timer = ConnectionTimer::new(0, &TIMEOUTS);
        timer.update(50, activity(true, 0, false, false), &TIMEOUTS);
        assert_eq!(timer.expired(99), None);
        assert_eq!(timer.expired(100), Some(Expiry::Request));
    }

    #[test]
    fn completed_requests_restart_the_request_clock() {
        let mut timer = ConnectionTimer::new(0, &TIMEOUTS);
        timer.update(90, activity(true, 1, false, false), &TIMEOUTS);
        assert_eq!(timer.expired(150), None);
        assert_eq!(timer.expired(190), Some(Expiry::Request));
    }

    #[test]
    fn idle_and_writing_have_their_own_limits() {
        let mut timer = ConnectionTimer::new(0, &TIMEOUTS);
        timer.update(10, activity(false, 1, false, false), &TIMEOUTS);
        assert_eq!(timer.expired(1009), None);
        assert_eq!(timer.expired(1010), Some(Expiry::Idle));

        timer.update(20, activity(false, 2, true, true), &TIMEOUTS);
        timer.update(400, activity(false, 2, true, false), &TIMEOUTS);
        assert_eq!(timer.expired(519), None);
        assert_eq!(timer.expired(520), Some(Expiry::Write));
        timer.update(510, activity(false, 2, true, true), &TIMEOUTS);
        assert_eq!(timer.expired(1009), None);
    }

    #[test]
    fn an_actor_answer_has_the_route_s_limit() {
        let mut timer = ConnectionTimer::new(0, &TIMEOUTS);
        let awaiting = Activity {
            awaiting: Some(Duration::from_millis(2000)),
            ..activity(true, 0, false, false)
        };
        timer.update(10, awaiting, &TIMEOUTS);
        assert_eq!(timer.expired(2009), None, "not the header timeout");
        assert_eq!(timer.expired(2010), Some(Expiry::Reply));
    }

    #[test]
    fn a_websocket_s_frames_restart_its_idle_clock() {
        let mut timer = ConnectionTimer::new(0, &TIMEOUTS);
        let open = |events| Activity {
            websocket: true,
            ..activity(false, events, false, false)
        };
        timer.update(10, open(1), &TIMEOUTS);
        timer.update(500, open(1), &TIMEOUTS);
        assert_eq!(timer.expired(1009), None);
        assert_eq!(timer.expired(1010), Some(Expiry::WebSocketIdle));
        timer.update(900, open(2), &TIMEOUTS);
        assert_eq!(timer.expired(1899), None);
        assert_eq!(timer.expired(1900), Some(Expiry::WebSocketIdle));
    }

    #[test]
    fn lingering_has_its_own_limit_and_no_progress_restarts_it() {
        let mut timer = ConnectionTimer::new(0, &TIMEOUTS);
        let lingering = Activity {
            lingering: true,
            ..activity(true, 1, true, true)
        };
        timer.update(10, lingering, &TIMEOUTS);
        timer.update(2000, lingering, &TIMEOUTS);
        let limit = LINGER.as_millis() as u64;
        assert_eq!(timer.expired(9 + limit), None);
        assert_eq!(timer.expired(10 + limit), Some(Expiry::Linger));
    }
}
