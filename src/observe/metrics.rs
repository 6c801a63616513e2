//! `--metrics`: the counters each poller keeps while it serves. Each poller
//! has its own block, aligned to its own cache lines, so counting on the
//! request path never touches a line another poller writes, and counting is
//! a few atomic adds into fixed slots: nothing allocates. The block is read
//! only when `/metrics` is scraped (`metrics_text`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::observe::cluster_metrics::LATENCY_BOUNDS_US;

/// The statuses counted each in a slot of its own: every status from 100
/// to 599, so any a route sends has its own label (4 KB a poller). A line
/// that says none of them goes to one more slot, `code="other"`.
pub(crate) const STATUSES: std::ops::RangeInclusive<u16> = 100..=599;
pub(crate) const STATUS_SLOTS: usize = 500 + 1;

/// The request-duration histogram's counters for one route on one poller:
/// a count per bucket (`LATENCY_BOUNDS_US`, then the rest), and the sum in
/// microseconds: 128 bytes, a cache line pair of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct RouteLatency {
    buckets: [AtomicU64; LATENCY_BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
}

/// Every status's count, by slot.
#[derive(Debug)]
struct StatusCounts([AtomicU64; STATUS_SLOTS]);

impl Default for StatusCounts {
    fn default() -> Self {
        StatusCounts(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// Why a connection timed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeoutKind {
    Header,
    Idle,
    Write,
}

impl TimeoutKind {
    pub(crate) const ALL: [TimeoutKind; 3] =
        [TimeoutKind::Header, TimeoutKind::Idle, TimeoutKind::Write];

    pub(crate) fn label(self) -> &'static str {
        match self {
            TimeoutKind::Header => "header",
            TimeoutKind::Idle => "idle",
            TimeoutKind::Write => "write",
        }
    }
}

/// How an upstream request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpstreamResult {
    Ok,
    Refused,
    Timeout,
    BadResponse,
    QueueFull,
}

impl UpstreamResult {
    pub(crate) const ALL: [UpstreamResult; 5] = [
        UpstreamResult::Ok,
        UpstreamResult::Refused,
        UpstreamResult::Timeout,
        UpstreamResult::BadResponse,
        UpstreamResult::QueueFull,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            UpstreamResult::Ok => "ok",
            UpstreamResult::Refused => "refused",
            UpstreamResult::Timeout => "timeout",
            UpstreamResult::BadResponse => "bad_response",
            UpstreamResult::QueueFull => "queue_full",
        }
    }
}

/// The close codes WebSocket closes are counted by; then any other code,
/// then a connection cut without a close handshake.
pub(crate) const WEBSOCKET_CLOSE_CODES: [u16; 9] =
    [1000, 1001, 1002, 1003, 1005, 1007, 1008, 1009, 1011];
pub(crate) const WEBSOCKET_CLOSE_SLOTS: usize = WEBSOCKET_CLOSE_CODES.len() + 2;

/// Why an HTTP/2 connection ended with a `GOAWAY` (its error code), as
/// counted; then any other code.
pub(crate) const GOAWAY_REASONS: [(u32, &str); 7] = [
    (0x0, "no_error"),
    (0x1, "protocol_error"),
    (0x2, "internal_error"),
    (0x3, "flow_control_error"),
    (0x6, "frame_size_error"),
    (0x9, "compression_error"),
    (0xb, "enhance_your_calm"),
];
pub(crate) const GOAWAY_SLOTS: usize = GOAWAY_REASONS.len() + 1;

/// One poller's counters. In `local` dispatch only the poller's current
/// thread runs its connections, so a counter is bumped with a plain load and
/// store; in `system` dispatch its connection actors run on any worker at
/// once, so with an atomic add.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct PollerMetrics {
    exclusive: bool,
    pub accepted: AtomicU64,
    pub closed: AtomicU64,
    pub refused: AtomicU64,
    pub bytes_received: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub accept_pauses: AtomicU64,
    pub tls_handshakes: AtomicU64,
    pub tls_handshake_failures: AtomicU64,
    pub websocket_upgrades: AtomicU64,
    pub websocket_messages_received: AtomicU64,
    pub websocket_messages_sent: AtomicU64,
    /// permessage-deflate: payload bytes sent before and after
    /// compression, received before and after inflating.
    pub websocket_deflate_sent_plain: AtomicU64,
    pub websocket_deflate_sent_wire: AtomicU64,
    pub websocket_deflate_received_wire: AtomicU64,
    pub websocket_deflate_received_plain: AtomicU64,
    /// HTTP/2 connections begun, streams begun, streams the client reset.
    pub http2_connections: AtomicU64,
    pub http2_streams: AtomicU64,
    pub http2_resets: AtomicU64,
    /// HTTP/3 connections accepted, requests begun, streams the client
    /// reset, and Retry packets sent to validate addresses.
    pub http3_connections: AtomicU64,
    pub http3_streams: AtomicU64,
    pub http3_resets: AtomicU64,
    pub quic_retries: AtomicU64,
    /// Envelopes this poller and its connections sent through the scheduler.
    pub envelopes: AtomicU64,
    /// Gauges, set by the poller that owns the pool.
    pub upstream_idle: AtomicU64,
    pub upstream_busy: AtomicU64,
    websocket_closes: [AtomicU64; WEBSOCKET_CLOSE_SLOTS],
    http2_goaways: [AtomicU64; GOAWAY_SLOTS],
    timeouts: [AtomicU64; 3],
    upstream: [AtomicU64; 5],
    responses: StatusCounts,
    /// Request durations, by route slot (`routes::table::RouteSlot`), made
    /// for every route of the table at start.
    latency: Box<[RouteLatency]>,
}

impl PollerMetrics {
    /// Counters for one poller serving `routes` route slots; `exclusive`
    /// when only one thread at a time writes them (plain loads and
    /// stores), else atomic adds.
    pub(crate) fn new(exclusive: bool, routes: usize) -> PollerMetrics {
        PollerMetrics {
            exclusive,
            latency: (0..routes).map(|_| RouteLatency::default()).collect(),
            ..PollerMetrics::default()
        }
    }

    /// Adds `n` to one of this poller's counters.
    #[inline]
    pub(crate) fn add(&self, counter: &AtomicU64, n: u64) {
        if self.exclusive {
            counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        } else {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Counts a response by the status on its first line (`HTTP/1.1 NNN`).
    #[inline]
    pub(crate) fn response(&self, response: &[u8]) {
        let status = match response.get(9..12) {
            Some(&[a, b, c]) if [a, b, c].iter().all(u8::is_ascii_digit) => {
                u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
            }
            _ => 0,
        };
        self.status(status);
    }

    /// Counts a response with `status`.
    #[inline]
    pub(crate) fn status(&self, status: u16) {
        let slot = match STATUSES.contains(&status) {
            true => usize::from(status - STATUSES.start()),
            false => STATUS_SLOTS - 1,
        };
        self.add(&self.responses.0[slot], 1);
    }

    /// A request to the route at `slot` took `took`, from its whole head to
    /// its response written.
    #[inline]
    pub(crate) fn latency(&self, slot: u32, took: Duration) {
        let Some(route) = self.latency.get(slot as usize) else {
            return;
        };
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let bucket = LATENCY_BOUNDS_US
            .iter()
            .position(|&bound| us <= bound)
            .unwrap_or(LATENCY_BOUNDS_US.len());
        self.add(&route.buckets[bucket], 1);
        self.add(&route.sum_us, us);
    }

    /// The duration histogram of each route slot: cumulative counts by
    /// bucket (the last is every request), and the sum in microseconds.
    pub(crate) fn latencies(
        &self,
    ) -> impl Iterator<Item = ([u64; LATENCY_BOUNDS_US.len() + 1], u64)> + '_ {
        self.latency.iter().map(|route| {
            let mut total = 0;
            let buckets = std::array::from_fn(|bucket| {
                total += route.buckets[bucket].load(Ordering::Relaxed);
                total
            });
            (buckets, route.sum_us.load(Ordering::Relaxed))
        })
    }

    /// Counts a WebSocket connection ended with `code` (the client's, or
    /// the server's if it closed first; 1005 for a close without a code),
    /// or `None` when it was cut without a close handshake.
    pub(crate) fn websocket_close(&self, code: Option<u16>) {
        let slot = match code {
            Some(code) => WEBSOCKET_CLOSE_CODES
                .iter()
                .position(|&known| known == code)
                .unwrap_or(WEBSOCKET_CLOSE_CODES.len()),
            None => WEBSOCKET_CLOSE_CODES.len() + 1,
        };
        self.add(&self.websocket_closes[slot], 1);
    }

    /// Counts bytes through permessage-deflate: sent before and after
    /// compression, received before and after inflating.
    pub(crate) fn websocket_deflate(
        &self,
        [sent_plain, sent_wire, received_wire, received_plain]: [u64; 4],
    ) {
        for (counter, n) in [
            (&self.websocket_deflate_sent_plain, sent_plain),
            (&self.websocket_deflate_sent_wire, sent_wire),
            (&self.websocket_deflate_received_wire, received_wire),
            (&self.websocket_deflate_received_plain, received_plain),
        ] {
            if n > 0 {
                self.add(counter, n);
            }
        }
    }

    /// Counts an HTTP/2 connection ended by a `GOAWAY` with `code`.
    pub(crate) fn http2_goaway(&self, code: u32) {
        let slot = GOAWAY_REASONS
            .iter()
            .position(|&(known, _)| known == code)
            .unwrap_or(GOAWAY_REASONS.len());
        self.add(&self.http2_goaways[slot], 1);
    }

    /// `GOAWAY`s by slot: `GOAWAY_REASONS` in order, then other codes.
    pub(crate) fn http2_goaways(&self) -> [u64; GOAWAY_SLOTS] {
        std::array::from_fn(|slot| self.http2_goaways[slot].load(Ordering::Relaxed))
    }

    /// WebSocket closes by slot: `WEBSOCKET_CLOSE_CODES` in order, other
    /// codes, then cuts.
    pub(crate) fn websocket_closes(&self) -> [u64; WEBSOCKET_CLOSE_SLOTS] {
        std::array::from_fn(|slot| self.websocket_closes[slot].load(Ordering::Relaxed))
    }

    pub(crate) fn timeout(&self, kind: TimeoutKind) {
        self.add(&self.timeouts[kind as usize], 1);
    }

    pub(crate) fn upstream(&self, result: UpstreamResult) {
        self.add(&self.upstream[result as usize], 1);
    }

    pub(crate) fn set_upstream_links(&self, idle: usize, busy: usize) {
        self.upstream_idle.store(idle as u64, Ordering::Relaxed);
        self.upstream_busy.store(busy as u64, Ordering::Relaxed);
    }

    /// Responses sent with each status: `STATUSES` in order, then others.
    pub(crate) fn responses(&self) -> [u64; STATUS_SLOTS] {
        std::array::from_fn(|slot| self.responses.0[slot].load(Ordering::Relaxed))
    }

    pub(crate) fn timeouts(&self, kind: TimeoutKind) -> u64 {
        self.timeouts[kind as usize].load(Ordering::Relaxed)
    }

    pub(crate) fn upstream_results(&self, result: UpstreamResult) -> u64 {
        self.upstream[result as usize].load(Ordering::Relaxed)
    }

    /// WebSocket connections open now (closes read first, as below).
    pub(crate) fn websockets_open(&self) -> u64 {
        let closed: u64 = self.websocket_closes().iter().sum();
        self.websocket_upgrades
            .load(Ordering::Relaxed)
            .saturating_sub(closed)
    }

    /// Connections open now. Closes are read first, so a connection accepted
    /// and closed between the two reads cannot make the count negative.
    pub(crate) fn open(&self) -> u64 {
        let closed = self.closed.load(Ordering::Relaxed);
        self.accepted.load(Ordering::Relaxed).saturating_sub(closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_lands_in_its_status_slot() {
        let metrics = PollerMetrics::new(false, 0);
        metrics.response(b"HTTP/1.1 404 Not Found\r\n\r\n");
        metrics.response(b"HTTP/1.1 404 Not Found\r\n\r\n");
        metrics.response(b"HTTP/1.1 299 Odd\r\n\r\n");
        metrics.response(b"HTTP/1.1 100 Continue\r\n\r\n");
        metrics.response(b"HTTP/1.1 599 \r\n\r\n");
        metrics.response(b"HTTP/1.1 600 Past\r\n\r\n");
        metrics.response(b"HTTP/1.1");
        let counts = metrics.responses();
        assert_eq!(counts[404 - 100], 2);
        assert_eq!(counts[299 - 100], 1);
        assert_eq!((counts[0], counts[499]), (1, 1), "100 and 599");
        assert_eq!(counts[STATUS_SLOTS - 1], 2, "600 and a cut line are other");
        assert_eq!(counts.iter().sum::<u64>(), 7);
    }

    /// At every bound, a request of exactly the bound is counted in its
    /// bucket and one a microsecond longer in the next.
    #[test]
    fn each_bound_holds_its_own_edge_and_not_past_it() {
        let metrics = PollerMetrics::new(true, 1);
        for bound in LATENCY_BOUNDS_US {
            metrics.latency(0, Duration::from_micros(bound));
            metrics.latency(0, Duration::from_micros(bound + 1));
        }
        let (buckets, _) = metrics.latencies().next().unwrap();
        let each: Vec<u64> = (0..LATENCY_BOUNDS_US.len() as u64)
            .map(|i| 2 * i + 1)
            .collect();
        assert_eq!(buckets[..LATENCY_BOUNDS_US.len()], each[..]);
        assert_eq!(
            buckets[LATENCY_BOUNDS_US.len()],
            2 * LATENCY_BOUNDS_US.len() as u64
        );
    }

    #[test]
    fn a_duration_lands_in_its_bucket_of_its_route() {
        let metrics = PollerMetrics::new(true, 3);
        metrics.latency(2, Duration::from_micros(100));
        metrics.latency(2, Duration::from_micros(101));
        metrics.latency(2, Duration::from_secs(9));
        metrics.latency(0, Duration::ZERO);
        // A slot past the table is not counted (nor a panic).
        metrics.latency(3, Duration::from_secs(1));
        let routes: Vec<_> = metrics.latencies().collect();
        assert_eq!(routes.len(), 3);
        let (buckets, sum) = routes[2];
        assert_eq!((buckets[0], buckets[1]), (1, 2));
        assert_eq!(buckets[LATENCY_BOUNDS_US.len() - 1], 2);
        assert_eq!(buckets[LATENCY_BOUNDS_US.len()], 3);
        assert_eq!(sum, 9_000_201);
        assert_eq!(routes[0].0[0], 1);
        assert_eq!(routes[1].0[LATENCY_BOUNDS_US.len()], 0);
        assert_eq!(std::mem::size_of::<RouteLatency>(), 128);
    }

    #[test]
    fn local_counting_adds_like_system_counting() {
        let local = PollerMetrics::new(true, 0);
        local.add(&local.bytes_sent, 5);
        local.add(&local.bytes_sent, 7);
        assert_eq!(local.bytes_sent.load(Ordering::Relaxed), 12);
    }
}
