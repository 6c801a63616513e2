//! Whether a poller's yield after a busy round pays, judged from the yields
//! themselves.
//!
//! A poller yields its core after a round that found work, so that clients
//! sharing its core can send their next requests before it polls again (see
//! `Poller::run_until_idle`). Where nothing else wants the core the yield
//! comes straight back and is a system call for nothing: the server pinned
//! to a core of its own, the clients on others. How long a yield took tells
//! the two apart: one that gave the core away lasts at least two context
//! switches and whatever ran meanwhile; one that found nobody waiting comes
//! back within a system call's time. Each yield that came back at once
//! doubles the number of busy rounds the poller goes without one (up to
//! `MAX_SKIP`), and the first that gave the core away brings back a yield
//! after every round.

use std::time::Duration;

/// A yield that took at least this long gave the core to another task: two
/// context switches and the other task's run take longer; a `sched_yield`
/// that found nobody waiting, well under a microsecond (a few under a
/// hypervisor or with its system calls traced), comes back sooner.
pub(super) const GAVE_WAY: Duration = Duration::from_micros(5);

/// The most busy rounds without a yield: on a core that becomes shared, the
/// poller yields again within this many rounds.
pub(super) const MAX_SKIP: u32 = 1024;

/// What the poller's last yields found, and how many busy rounds it goes
/// without one before it tries again.
#[derive(Debug, Default)]
pub(super) struct YieldGauge {
    /// Rounds skipped after the last yield that came back at once.
    skip: u32,
    /// Rounds still to go without a yield.
    left: u32,
}

impl YieldGauge {
    /// After a busy round: whether to yield now (and then tell `yielded`
    /// how long it took).
    pub(super) fn should_yield(&mut self) -> bool {
        if self.left == 0 {
            return true;
        }
        self.left -= 1;
        false
    }

    /// A yield took `took`: one that gave the core away keeps the poller
    /// yielding after every busy round; one that came back at once doubles
    /// the rounds without one.
    pub(super) fn yielded(&mut self, took: Duration) {
        self.skip = match took >= GAVE_WAY {
            true => 0,
            false => (self.skip * 2).clamp(1, MAX_SKIP),
        };
        self.left = self.skip;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The busy rounds in `rounds` after which the gauge yields, each yield
    /// taking `took`.
    fn yields(gauge: &mut YieldGauge, rounds: usize, took: Duration) -> Vec<usize> {
        let mut at = Vec::new();
        for round in 0..rounds {
            if gauge.should_yield() {
                gauge.yielded(took);
                at.push(round);
            }
        }
        at
    }

    #[test]
    fn yields_every_round_while_the_core_is_given_away() {
        let mut gauge = YieldGauge::default();
        assert_eq!(yields(&mut gauge, 5, GAVE_WAY), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn yields_that_come_back_at_once_thin_out_by_doubling() {
        let mut gauge = YieldGauge::default();
        let quick = Duration::from_nanos(300);
        // After each: 1, 2, 4, 8 rounds skipped.
        assert_eq!(yields(&mut gauge, 20, quick), vec![0, 2, 5, 10, 19]);
    }

    #[test]
    fn skipping_stops_growing_at_the_cap() {
        let mut gauge = YieldGauge::default();
        let quick = Duration::from_nanos(300);
        let at = yields(&mut gauge, 10 * MAX_SKIP as usize, quick);
        let gaps: Vec<usize> = at.windows(2).map(|w| w[1] - w[0] - 1).collect();
        assert_eq!(gaps.iter().max(), Some(&(MAX_SKIP as usize)));
        assert_eq!(gaps.last(), Some(&(MAX_SKIP as usize)));
    }

    #[test]
    fn a_yield_that_gives_the_core_away_brings_back_every_round() {
        let mut gauge = YieldGauge::default();
        yields(&mut gauge, 100, Duration::from_nanos(300));
        // Skipping now: the next yield comes once the skip runs out.
        let next = (0..).find(|_| gauge.should_yield()).unwrap();
        assert!(next > 0);
        gauge.yielded(Duration::from_micros(40));
        assert_eq!(yields(&mut gauge, 3, GAVE_WAY), vec![0, 1, 2]);
    }
}
