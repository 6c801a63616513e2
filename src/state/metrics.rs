//! The counters of the state store, which `/metrics` shows
//! (`observe::metrics_text`): writes by outcome, commits and their
//! duration, loads by outcome, answers held and refused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The upper bounds of the commit-duration buckets, in microseconds (then
/// `+Inf`).
pub(crate) const COMMIT_BOUNDS_US: [u64; 12] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 500_000, 5_000_000,
];

/// The outcomes a write or a load is counted under.
pub(crate) const OUTCOMES: [&str; 8] = [
    "ok",
    "missing",
    "stale",
    "full",
    "timeout",
    "unavailable",
    "unusable",
    "failed",
];

/// The store's counters.
#[derive(Debug, Default)]
pub(crate) struct StateMetrics {
    writes: [AtomicU64; OUTCOMES.len()],
    loads: [AtomicU64; OUTCOMES.len()],
    /// Commits the store made (each of one or more writes).
    commits: AtomicU64,
    /// Per bucket (not cumulative), then `+Inf`.
    commit_latency: [AtomicU64; COMMIT_BOUNDS_US.len() + 1],
    commit_sum_us: AtomicU64,
    /// Answers refused (503) because the state could not be saved or read.
    pub(crate) refused: AtomicU64,
    /// Answers waiting for their change to be durable now (a gauge).
    pub(crate) held: AtomicU64,
}

fn slot(outcome: &str) -> usize {
    OUTCOMES
        .iter()
        .position(|o| *o == outcome)
        .unwrap_or(OUTCOMES.len() - 1)
}

impl StateMetrics {
    /// An actor's write ended as `outcome` (`ok` or a `StoreError`'s label).
    pub(crate) fn write(&self, outcome: &str) {
        self.writes[slot(outcome)].fetch_add(1, Ordering::Relaxed);
    }

    /// A load ended as `outcome` (`ok`, `missing`, or an error's label).
    pub(crate) fn load(&self, outcome: &str) {
        self.loads[slot(outcome)].fetch_add(1, Ordering::Relaxed);
    }

    /// The store committed, taking `took`.
    pub(crate) fn commit(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let bucket = COMMIT_BOUNDS_US
            .iter()
            .position(|&bound| us <= bound)
            .unwrap_or(COMMIT_BOUNDS_US.len());
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.commit_latency[bucket].fetch_add(1, Ordering::Relaxed);
        self.commit_sum_us.fetch_add(us, Ordering::Relaxed);
    }

    pub(crate) fn writes(&self, outcome: &str) -> u64 {
        self.writes[slot(outcome)].load(Ordering::Relaxed)
    }

    pub(crate) fn loads(&self, outcome: &str) -> u64 {
        self.loads[slot(outcome)].load(Ordering::Relaxed)
    }

    #[cfg(test)]
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// The commit durations, cumulative per bound (then `+Inf`), and their
    /// sum in microseconds.
    pub(crate) fn commit_latency(&self) -> ([u64; COMMIT_BOUNDS_US.len() + 1], u64) {
        let mut total = 0;
        let buckets = std::array::from_fn(|bucket| {
            total += self.commit_latency[bucket].load(Ordering::Relaxed);
            total
        });
        (buckets, self.commit_sum_us.load(Ordering::Relaxed))
    }
}

/// The placement's counters, which `/metrics` shows.
#[derive(Debug, Default)]
pub(crate) struct PlacementMetrics {
    /// Names activated here.
    pub(crate) activations: AtomicU64,
    /// Names taken over after another server's lease ran out.
    pub(crate) failovers: AtomicU64,
    /// Leases given up here (a drain, an idle name): handovers.
    pub(crate) released: AtomicU64,
    /// Leases lost here (a renewal refused, or not answered in time).
    pub(crate) lost: AtomicU64,
    /// Messages forwarded to the holder on another server.
    pub(crate) forwarded: AtomicU64,
    /// Active names here, by kind (a gauge each).
    pub(crate) active: Mutex<Vec<(String, u64)>>,
}

impl PlacementMetrics {
    /// `by` more (or fewer) names of `kind` are active here.
    pub(crate) fn activated(&self, kind: &str, by: i64) {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, count)) = active.iter_mut().find(|(k, _)| k == kind) {
            *count = count.saturating_add_signed(by);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At every bound, a commit of exactly the bound is counted in its
    /// bucket and one a microsecond longer in the next.
    #[test]
    fn each_bound_holds_its_own_edge_and_not_past_it() {
        let metrics = StateMetrics::default();
        for bound in COMMIT_BOUNDS_US {
            metrics.commit(Duration::from_micros(bound));
            metrics.commit(Duration::from_micros(bound + 1));
        }
        let (buckets, sum) = metrics.commit_latency();
        let each: Vec<u64> = (0..COMMIT_BOUNDS_US.len() as u64)
            .map(|i| 2 * i + 1)
            .collect();
        assert_eq!(buckets[..COMMIT_BOUNDS_US.len()], each[..]);
        assert_eq!(
            buckets[COMMIT_BOUNDS_US.len()],
            2 * COMMIT_BOUNDS_US.len() as u64
        );
        let bounds: u64 = COMMIT_BOUNDS_US.iter().sum();
        assert_eq!(sum, 2 * bounds + COMMIT_BOUNDS_US.len() as u64);
    }

    #[test]
    fn a_duration_on_a_bound_is_in_that_bucket() {
        let metrics = StateMetrics::default();
        metrics.commit(Duration::from_micros(100));
        metrics.commit(Duration::from_micros(101));
        metrics.commit(Duration::from_secs(60));
        let (buckets, sum) = metrics.commit_latency();
        assert_eq!(buckets[0], 1);
        assert_eq!(buckets[1], 2);
        assert_eq!(buckets[COMMIT_BOUNDS_US.len() - 1], 2);
        assert_eq!(buckets[COMMIT_BOUNDS_US.len()], 3);
        assert_eq!(sum, 60_000_201);
        assert_eq!(metrics.commits(), 3);
    }

    #[test]
    fn outcomes_are_counted_apart() {
        let metrics = StateMetrics::default();
        metrics.write("ok");
        metrics.write("ok");
        metrics.write("stale");
        metrics.load("missing");
        assert_eq!(metrics.writes("ok"), 2);
        assert_eq!(metrics.writes("stale"), 1);
        assert_eq!(metrics.writes("full"), 0);
        assert_eq!(metrics.loads("missing"), 1);
        assert_eq!(metrics.loads("ok"), 0);
    }
}
