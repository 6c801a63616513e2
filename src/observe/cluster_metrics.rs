//! `--metrics` with `--nats`: what the cluster carried, refused and
//! dropped, and how long calls to other servers took. One block for the
//! server, written by the pollers' NATS links (a few relaxed atomic adds a
//! message) and read when `/metrics` is scraped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What a message between servers is, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carried {
    /// A request for an actor on another server.
    Request,
    /// The answer to one.
    Answer,
    /// Bytes to an actor or a topic.
    Publish,
}

impl Carried {
    pub(crate) const ALL: [Carried; 3] = [Carried::Request, Carried::Answer, Carried::Publish];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Carried::Request => "request",
            Carried::Answer => "reply",
            Carried::Publish => "publish",
        }
    }
}

/// Why a send to another server was refused at the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not connected to NATS.
    Unreachable,
    /// Past the NATS server's `max_payload`.
    TooLarge,
    /// Past the bound of what may wait for NATS.
    BufferFull,
    /// Not bytes nor an `ActorRequest`.
    NotBytes,
}

impl Refusal {
    pub(crate) const ALL: [Refusal; 4] = [
        Refusal::Unreachable,
        Refusal::TooLarge,
        Refusal::BufferFull,
        Refusal::NotBytes,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Refusal::Unreachable => "unreachable",
            Refusal::TooLarge => "too_large",
            Refusal::BufferFull => "buffer_full",
            Refusal::NotBytes => "not_bytes",
        }
    }
}

/// Why a message from NATS was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dropped {
    /// It did not read as what it said it was.
    Malformed,
    /// On a subject this node did not subscribe to (for this).
    Unasked,
    /// An answer to a request no longer awaited (timed out).
    Late,
    /// For an actor this node does not have.
    NoActor,
}

impl Dropped {
    pub(crate) const ALL: [Dropped; 4] = [
        Dropped::Malformed,
        Dropped::Unasked,
        Dropped::Late,
        Dropped::NoActor,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Dropped::Malformed => "malformed",
            Dropped::Unasked => "unasked",
            Dropped::Late => "late",
            Dropped::NoActor => "no_actor",
        }
    }
}

/// The upper bounds of the call-latency histogram's buckets, in
/// microseconds (then `+Inf`).
pub(crate) const LATENCY_BOUNDS_US: [u64; 14] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 5_000_000,
];

/// The cluster's counters.
#[derive(Debug, Default)]
pub(crate) struct ClusterMetrics {
    /// The server's pollers, each with a link.
    pub(crate) links: u64,
    /// Pollers whose NATS connection is up (a gauge).
    pub(crate) links_up: AtomicU64,
    /// Another server holds this node's name: this one left the cluster
    /// (a gauge, 0 or 1).
    pub(crate) name_taken: AtomicU64,
    /// Connections made after one was lost.
    pub(crate) reconnects: AtomicU64,
    /// Sends taken past `--nats-buffer`, whose senders then waited.
    pub(crate) pressed: AtomicU64,
    /// Bytes waiting for the links now, over every poller (a gauge).
    pub(crate) waiting_bytes: AtomicU64,
    /// Senders waiting for a link to drain now (a gauge).
    pub(crate) paused_senders: AtomicU64,
    messages_out: [AtomicU64; 3],
    messages_in: [AtomicU64; 3],
    bytes_out: [AtomicU64; 3],
    bytes_in: [AtomicU64; 3],
    refused: [AtomicU64; 4],
    dropped: [AtomicU64; 4],
    /// Per bucket (not cumulative), then the `+Inf` one.
    latency: [AtomicU64; LATENCY_BOUNDS_US.len() + 1],
    latency_sum_us: AtomicU64,
}

fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl ClusterMetrics {
    /// Counters for a server with `links` pollers.
    pub(crate) fn new(links: usize) -> ClusterMetrics {
        ClusterMetrics {
            links: links as u64,
            ..ClusterMetrics::default()
        }
    }

    /// Every poller is connected and subscribed.
    pub(crate) fn is_connected(&self) -> bool {
        self.links_up.load(Ordering::Acquire) == self.links
    }

    pub(crate) fn sent(&self, kind: Carried, bytes: usize) {
        bump(&self.messages_out[kind as usize], 1);
        bump(&self.bytes_out[kind as usize], bytes as u64);
    }

    pub(crate) fn received(&self, kind: Carried, bytes: usize) {
        bump(&self.messages_in[kind as usize], 1);
        bump(&self.bytes_in[kind as usize], bytes as u64);
    }

    /// A send was taken past the bound, and its sender waits for relief.
    pub(crate) fn pressed(&self) {
        bump(&self.pressed, 1);
    }

    pub(crate) fn refused(&self, why: Refusal) {
        bump(&self.refused[why as usize], 1);
    }

    pub(crate) fn dropped(&self, why: Dropped) {
        bump(&self.dropped[why as usize], 1);
    }

    /// A call to another server took `took`, request to answer.
    pub(crate) fn call(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let slot = LATENCY_BOUNDS_US
            .iter()
            .position(|&bound| us <= bound)
            .unwrap_or(LATENCY_BOUNDS_US.len());
        bump(&self.latency[slot], 1);
        bump(&self.latency_sum_us, us);
    }

    pub(crate) fn messages(&self, kind: Carried) -> (u64, u64) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        (
            load(&self.messages_in[kind as usize]),
            load(&self.messages_out[kind as usize]),
        )
    }

    pub(crate) fn bytes(&self, kind: Carried) -> (u64, u64) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        (
            load(&self.bytes_in[kind as usize]),
            load(&self.bytes_out[kind as usize]),
        )
    }

    pub(crate) fn refusals(&self, why: Refusal) -> u64 {
        self.refused[why as usize].load(Ordering::Relaxed)
    }

    pub(crate) fn drops(&self, why: Dropped) -> u64 {
        self.dropped[why as usize].load(Ordering::Relaxed)
    }

    /// The histogram, cumulative per bound (then `+Inf`), and the sum in
    /// microseconds.
    pub(crate) fn latency(&self) -> ([u64; LATENCY_BOUNDS_US.len() + 1], u64) {
        let mut total = 0;
        let buckets = std::array::from_fn(|slot| {
            total += self.latency[slot].load(Ordering::Relaxed);
            total
        });
        (buckets, self.latency_sum_us.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At every bound, a call of exactly the bound is counted in its
    /// bucket and one a microsecond longer in the next.
    #[test]
    fn each_bound_holds_its_own_edge_and_not_past_it() {
        let metrics = ClusterMetrics::default();
        for bound in LATENCY_BOUNDS_US {
            metrics.call(Duration::from_micros(bound));
            metrics.call(Duration::from_micros(bound + 1));
        }
        let (buckets, sum) = metrics.latency();
        let each: Vec<u64> = (0..LATENCY_BOUNDS_US.len() as u64)
            .map(|i| 2 * i + 1)
            .collect();
        assert_eq!(buckets[..LATENCY_BOUNDS_US.len()], each[..]);
        assert_eq!(
            buckets[LATENCY_BOUNDS_US.len()],
            2 * LATENCY_BOUNDS_US.len() as u64
        );
        let bounds: u64 = LATENCY_BOUNDS_US.iter().sum();
        assert_eq!(sum, 2 * bounds + LATENCY_BOUNDS_US.len() as u64);
    }

    #[test]
    fn latency_buckets_are_cumulative() {
        let metrics = ClusterMetrics::default();
        metrics.call(Duration::from_micros(100));
        metrics.call(Duration::from_micros(101));
        metrics.call(Duration::from_secs(9));
        let (buckets, sum) = metrics.latency();
        assert_eq!(buckets[0], 1);
        assert_eq!(buckets[1], 2);
        assert_eq!(buckets[LATENCY_BOUNDS_US.len() - 1], 2);
        assert_eq!(buckets[LATENCY_BOUNDS_US.len()], 3);
        assert_eq!(sum, 9_000_201);
    }
}
