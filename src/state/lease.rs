//! The lease of one placed actor's name, as this server sees it: a state
//! machine without I/O or a clock of its own, driven by the times it is
//! given (milliseconds of a monotonic clock) and by the answers of the
//! store the lease lives in.
//!
//! The lease is a key in a bucket whose entries expire `ttl` after they
//! were last written, by the store's own clock (JetStream's `max_age`).
//! Taking it is a create-only write (expected revision 0): one server wins.
//! Renewing it is a compare-and-set on the revision the holder last wrote.
//! Nobody else can take it until it has expired, that is `ttl` after the
//! store recorded the holder's last renewal, which was after the holder
//! *sent* it. So the holder may serve until `serve` after it sent its last
//! successful renewal (`serve` well short of `ttl`): by then no other
//! server can have taken the lease, whatever the network did to the
//! answer, provided the two clocks' rates differ by less than the margin
//! `ttl - serve` over a `ttl` (NTP keeps them within parts per million).
//! A holder that cannot renew stops serving by its own clock, before
//! anyone else could start.
//!
//! What the holder writes is fenced apart from this: see
//! `docs/design.md` (placed actors).

/// Milliseconds of this process's monotonic clock, the one leases are
/// timed by.
pub(crate) fn now_ms() -> u64 {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let origin = *ORIGIN.get_or_init(std::time::Instant::now);
    // From 1, so that 0 is "never".
    1 + u64::try_from(origin.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
}

/// The lease's timing, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeaseTimes {
    /// How long an entry lives in the store after its last write.
    pub(crate) ttl: u64,
    /// How long after sending a successful renewal the holder serves.
    pub(crate) serve: u64,
    /// How long after sending a renewal the next is sent.
    pub(crate) renew: u64,
}

impl LeaseTimes {
    /// For entries that live `ttl`: serve three quarters of it, renew
    /// every quarter, so three renewals in a row may be lost before the
    /// holder stops.
    pub(crate) fn for_ttl(ttl: u64) -> LeaseTimes {
        LeaseTimes {
            ttl,
            serve: ttl * 3 / 4,
            renew: (ttl / 4).max(1),
        }
    }
}

/// Where the lease is, as this server knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lease {
    /// Not held here; who holds it is not known.
    Unknown,
    /// A create-only write was sent at `sent`.
    Taking { sent: u64 },
    /// Held here, at `revision`, servable until `until`.
    Held {
        revision: u64,
        until: u64,
        /// When the next renewal is due.
        renew_at: u64,
        /// A renewal in flight: when it was sent.
        renewing: Option<u64>,
    },
    /// Held by another server, as read at `seen`.
    Elsewhere { node: String, seen: u64 },
    /// Given up (the server drains): the release was sent.
    Released,
}

/// What the lease asks its driver to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ask {
    /// Write the lease, expecting `revision` (0: create it).
    Write { revision: u64 },
    /// Read who holds it.
    Read,
    /// The lease is lost (or was never won): stop serving the name now.
    Stop,
}

impl Lease {
    /// This server may run the name's activation at `now`.
    pub(crate) fn can_serve(&self, now: u64) -> bool {
        matches!(self, Lease::Held { until, .. } if now < *until)
    }

    /// Starts taking the lease, at `now`.
    pub(crate) fn take(&mut self, now: u64) -> Option<Ask> {
        match self {
            Lease::Unknown | Lease::Elsewhere { .. } | Lease::Released => {
                *self = Lease::Taking { sent: now };
                Some(Ask::Write { revision: 0 })
            }
            Lease::Taking { .. } | Lease::Held { .. } => None,
        }
    }

    /// A write sent at `sent` was stored at `revision`.
    pub(crate) fn written(&mut self, sent: u64, revision: u64, times: LeaseTimes) {
        match self {
            Lease::Taking { .. } | Lease::Held { .. } => {
                *self = Lease::Held {
                    revision,
                    until: sent + times.serve,
                    renew_at: sent + times.renew,
                    renewing: None,
                };
            }
            _ => {}
        }
    }

    /// A write was refused: someone else holds the lease (a take lost), or
    /// it expired and moved (a renewal lost). The holder stops; the driver
    /// reads who holds it.
    pub(crate) fn refused(&mut self) -> Vec<Ask> {
        let held = matches!(self, Lease::Held { .. });
        *self = Lease::Unknown;
        match held {
            true => vec![Ask::Stop, Ask::Read],
            false => vec![Ask::Read],
        }
    }

    /// A write's answer did not come (a timeout, NATS gone): it may have
    /// been stored. A take is given up (the lease is read to learn); a
    /// renewal is left to the clock, the next one tries again.
    pub(crate) fn unanswered(&mut self) -> Option<Ask> {
        match self {
            Lease::Taking { .. } => {
                *self = Lease::Unknown;
                Some(Ask::Read)
            }
            Lease::Held { renewing, .. } => {
                *renewing = None;
                None
            }
            _ => None,
        }
    }

    /// A read found the lease held by `node` at `revision` (none: free),
    /// at `now`; `here` is this server's own name in the lease.
    pub(crate) fn read(&mut self, holder: Option<(&str, u64)>, here: &str, now: u64) {
        match (holder, &*self) {
            // Ours, as a take whose answer was lost wrote it: not served,
            // since when it was written is not known; it expires.
            (Some((node, _)), _) if node == here => *self = Lease::Unknown,
            (Some((node, _)), Lease::Unknown | Lease::Elsewhere { .. }) => {
                *self = Lease::Elsewhere {
                    node: node.to_string(),
                    seen: now,
                };
            }
            (None, Lease::Elsewhere { .. }) => *self = Lease::Unknown,
            _ => {}
        }
    }

    /// The clock reads `now`: a renewal due, or a lease past its time.
    pub(crate) fn tick(&mut self, now: u64) -> Option<Ask> {
        let Lease::Held {
            revision,
            until,
            renew_at,
            renewing,
        } = self
        else {
            return None;
        };
        if now >= *until {
            *self = Lease::Unknown;
            return Some(Ask::Stop);
        }
        if now >= *renew_at && renewing.is_none() {
            *renewing = Some(now);
            return Some(Ask::Write {
                revision: *revision,
            });
        }
        None
    }

    /// When `tick` has something to do next, if ever.
    pub(crate) fn next_tick(&self) -> Option<u64> {
        match self {
            Lease::Held {
                until,
                renew_at,
                renewing,
                ..
            } => Some(match renewing {
                Some(_) => *until,
                None => (*renew_at).min(*until),
            }),
            _ => None,
        }
    }

    /// A renewal sent at `sent` was stored at `revision`.
    pub(crate) fn renewed(&mut self, sent: u64, revision: u64, times: LeaseTimes) {
        if let Lease::Held { .. } = self {
            self.written(sent, revision, times);
        }
    }

    /// Gives the lease up (the server drains): the revision to release,
    /// if it is held.
    pub(crate) fn release(&mut self) -> Option<u64> {
        let Lease::Held { revision, .. } = *self else {
            return None;
        };
        *self = Lease::Released;
        Some(revision)
    }
}

/// Whether another server's lease is still being renewed, as this server
/// sees it from its reads: a revision that has not moved for two renewal
/// periods is a holder whose renewals do not land (paused, cut off,
/// dead). Its messages wait for the lease to run out instead of being
/// forwarded to a holder that cannot answer; past `2 * ttl` of silence
/// (a store whose expiry lags) they are forwarded again, as the holder
/// may be there after all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Renewals {
    /// The holder's revision last read, and when it was first read.
    seen: Option<(u64, u64)>,
}

impl Renewals {
    /// A read found the holder's lease at `revision`.
    pub(crate) fn saw(&mut self, revision: u64, now: u64) {
        match self.seen {
            Some((seen, _)) if seen == revision => {}
            _ => self.seen = Some((revision, now)),
        }
    }

    /// The lease is no other server's (gone, or taken here).
    pub(crate) fn forget(&mut self) {
        self.seen = None;
    }

    /// Whether the holder's renewals have stopped landing: its revision
    /// unchanged for two renewal periods, but not yet for twice the lease.
    pub(crate) fn stalled(&self, now: u64, times: LeaseTimes) -> bool {
        self.seen.is_some_and(|(_, since)| {
            let still = now.saturating_sub(since);
            still >= 2 * times.renew && still < 2 * times.ttl
        })
    }

    /// How long after a read that found it stalled to read again.
    pub(crate) fn reread(times: LeaseTimes) -> u64 {
        (times.renew / 4).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMES: LeaseTimes = LeaseTimes {
        ttl: 2000,
        serve: 1500,
        renew: 500,
    };

    #[test]
    fn the_timing_of_a_ttl() {
        assert_eq!(LeaseTimes::for_ttl(2000), TIMES);
    }

    #[test]
    fn a_holder_renews_each_quarter_and_serves_three_quarters_after_its_last_sent_renewal() {
        let mut lease = Lease::Unknown;
        assert_eq!(lease.take(1000), Some(Ask::Write { revision: 0 }));
        assert!(!lease.can_serve(1000), "not before the answer");
        assert_eq!(lease.take(1001), None, "one take at a time");
        // Answered at 1040 for a write sent at 1000: served from its send.
        lease.written(1000, 7, TIMES);
        assert!(lease.can_serve(1040));
        assert_eq!(lease.next_tick(), Some(1500));
        assert_eq!(lease.tick(1499), None);
        assert_eq!(lease.tick(1500), Some(Ask::Write { revision: 7 }));
        assert_eq!(lease.tick(1600), None, "one renewal in flight");
        assert_eq!(lease.next_tick(), Some(2500));
        lease.renewed(1500, 9, TIMES);
        assert!(lease.can_serve(2999));
        assert!(!lease.can_serve(3000));
        assert_eq!(lease.next_tick(), Some(2000));
    }

    #[test]
    fn a_holder_whose_renewals_are_lost_stops_by_its_own_clock_before_the_lease_expires() {
        let mut lease = Lease::Unknown;
        lease.take(0);
        lease.written(0, 1, TIMES);
        for at in [500, 1000] {
            assert_eq!(lease.tick(at), Some(Ask::Write { revision: 1 }));
            assert_eq!(lease.unanswered(), None);
        }
        assert!(lease.can_serve(1499));
        assert_eq!(lease.tick(1500), Some(Ask::Stop));
        assert!(!lease.can_serve(1500));
        // The store expires the entry 2000 after it recorded the write,
        // which was after 0: nobody else takes it before 2000.
        assert_eq!(lease, Lease::Unknown);
    }

    #[test]
    fn a_renewal_refused_stops_the_holder_at_once() {
        let mut lease = Lease::Unknown;
        lease.take(0);
        lease.written(0, 1, TIMES);
        assert_eq!(lease.tick(500), Some(Ask::Write { revision: 1 }));
        assert_eq!(lease.refused(), vec![Ask::Stop, Ask::Read]);
        assert!(!lease.can_serve(501));
    }

    #[test]
    fn a_lost_take_reads_the_holder_and_forwards_to_it() {
        let mut lease = Lease::Unknown;
        lease.take(0);
        assert_eq!(lease.refused(), vec![Ask::Read]);
        lease.read(Some(("b", 3)), "a", 10);
        assert_eq!(
            lease,
            Lease::Elsewhere {
                node: "b".into(),
                seen: 10
            }
        );
        // Gone by the next read: free to take.
        lease.read(None, "a", 20);
        assert_eq!(lease, Lease::Unknown);
        assert_eq!(lease.take(20), Some(Ask::Write { revision: 0 }));
    }

    #[test]
    fn a_take_whose_answer_was_lost_is_not_served_even_if_it_won() {
        let mut lease = Lease::Unknown;
        lease.take(0);
        assert_eq!(lease.unanswered(), Some(Ask::Read));
        lease.read(Some(("a", 1)), "a", 5000);
        assert_eq!(lease, Lease::Unknown);
        assert!(!lease.can_serve(5000));
    }

    #[test]
    fn release_gives_the_revision_of_a_held_lease_only() {
        let mut lease = Lease::Unknown;
        assert_eq!(lease.release(), None);
        lease.take(0);
        lease.written(0, 4, TIMES);
        assert_eq!(lease.release(), Some(4));
        assert_eq!(lease, Lease::Released);
        assert!(!lease.can_serve(1));
    }

    #[test]
    fn a_holder_whose_revision_stops_moving_is_stalled_after_two_renewals_until_twice_its_lease() {
        let mut renewals = Renewals::default();
        assert!(!renewals.stalled(0, TIMES), "nothing read");
        renewals.saw(3, 100);
        assert!(!renewals.stalled(1099, TIMES));
        renewals.saw(3, 900);
        assert!(renewals.stalled(1100, TIMES), "the same revision since 100");
        assert!(renewals.stalled(4099, TIMES));
        assert!(
            !renewals.stalled(4100, TIMES),
            "past twice the lease: forwarded again"
        );
        renewals.saw(4, 1200);
        assert!(!renewals.stalled(1300, TIMES), "a renewal landed");
        assert!(renewals.stalled(2200, TIMES));
        renewals.forget();
        assert!(!renewals.stalled(2200, TIMES));
        assert_eq!(Renewals::reread(TIMES), 125);
    }
}
