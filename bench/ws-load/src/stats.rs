//! The numbers: latency samples and their percentiles, and the fixed
//! schedule an open-loop sender's messages fall due on.

use std::time::{Duration, Instant};

/// Latency samples, in microseconds.
#[derive(Debug, Default)]
pub(crate) struct Histogram {
    samples: Vec<u64>,
}

impl Histogram {
    pub(crate) fn record(&mut self, latency: Duration) {
        self.samples.push(latency.as_micros() as u64);
    }

    pub(crate) fn merge(&mut self, other: &Histogram) {
        self.samples.extend_from_slice(&other.samples);
    }

    /// The sample at quantile `q` (0 to 1) by the nearest-rank method.
    pub(crate) fn quantile(sorted: &[u64], q: f64) -> u64 {
        if sorted.is_empty() {
            return 0;
        }
        let rank = (q * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    /// `{"p50":..,"p90":..,"p99":..,"p999":..,"max":..}`, in microseconds.
    pub(crate) fn json(&self) -> String {
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let q = |q| Histogram::quantile(&sorted, q);
        format!(
            "{{\"p50\":{},\"p90\":{},\"p99\":{},\"p999\":{},\"max\":{}}}",
            q(0.5),
            q(0.9),
            q(0.99),
            q(0.999),
            sorted.last().copied().unwrap_or(0)
        )
    }
}

/// Messages due at `rate` a second from a start, offset by a fraction of
/// the interval (so many senders spread out rather than send at once).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    next: Instant,
    interval: Duration,
}

impl Schedule {
    pub(crate) fn new(start: Instant, rate: f64, phase: f64) -> Schedule {
        let interval = Duration::from_secs_f64(1.0 / rate.max(1e-3));
        Schedule {
            next: start + interval.mul_f64(phase.clamp(0.0, 1.0)),
            interval,
        }
    }

    /// The next message due by `now`, if any; its due time, not `now`, is
    /// what its latency is measured from.
    pub(crate) fn take_due(&mut self, now: Instant) -> Option<Instant> {
        if self.next > now {
            return None;
        }
        let due = self.next;
        self.next += self.interval;
        Some(due)
    }

    /// When the next message falls due.
    pub(crate) fn next(&self) -> Instant {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let sorted: Vec<u64> = (1..=100).collect();
        assert_eq!(Histogram::quantile(&sorted, 0.5), 50);
        assert_eq!(Histogram::quantile(&sorted, 0.99), 99);
        assert_eq!(Histogram::quantile(&sorted, 0.999), 100);
        assert_eq!(Histogram::quantile(&sorted, 0.0), 1);
        assert_eq!(Histogram::quantile(&[], 0.5), 0);
        let mut histogram = Histogram::default();
        for micros in [3, 1, 2] {
            histogram.record(Duration::from_micros(micros));
        }
        assert_eq!(
            histogram.json(),
            r#"{"p50":2,"p90":3,"p99":3,"p999":3,"max":3}"#
        );
    }

    #[test]
    fn a_late_sender_owes_every_message_due_and_is_charged_from_due() {
        let start = Instant::now();
        let mut schedule = Schedule::new(start, 100.0, 0.5);
        assert_eq!(schedule.next(), start + Duration::from_millis(5));
        assert_eq!(schedule.take_due(start), None);
        // 32 ms late: the messages due at 5, 15 and 25 ms are all owed,
        // each with its own due time.
        let late = start + Duration::from_millis(32);
        let owed: Vec<Duration> = std::iter::from_fn(|| schedule.take_due(late))
            .map(|due| due - start)
            .collect();
        assert_eq!(owed, [5, 15, 25].map(Duration::from_millis).to_vec());
        assert_eq!(schedule.next(), start + Duration::from_millis(35));
    }
}
