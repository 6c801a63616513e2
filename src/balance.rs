//! How connections are spread over the pollers: it owns the count of open
//! connections (in all, for `--max-connections`, and per poller) and every
//! poller's waker, and decides which poller accepts next.
//!
//! All pollers watch one shared listening socket, and a poller accepts only
//! while it holds no more connections than the least loaded one. With a
//! listener per poller (SO_REUSEPORT) the kernel spreads connections by a
//! hash of their addresses instead, and a load of long-lived keep-alive
//! connections lands unevenly: 128 connections over 2 listeners split as
//! unevenly as 53/75, and the poller with 75 sets the latency tail. The cost
//! is that each new connection wakes every poller, which is cheap next to the
//! requests a keep-alive connection carries.

use std::sync::atomic::{AtomicUsize, Ordering};

use log::error;
use mio::Waker;

pub struct Balance {
    open: AtomicUsize,
    max_open: usize,
    open_per_poller: Box<[AtomicUsize]>,
    /// One per poller, in poller order.
    wakers: Box<[Waker]>,
}

impl Balance {
    pub fn new(wakers: Vec<Waker>, max_open: usize) -> Balance {
        Balance {
            open: AtomicUsize::new(0),
            max_open,
            open_per_poller: wakers.iter().map(|_| AtomicUsize::new(0)).collect(),
            wakers: wakers.into_boxed_slice(),
        }
    }

    /// Whether `poller` should accept the next connection. If another poller
    /// holds fewer, that one is woken to take its turn instead: the pending
    /// connection raises no new readiness edge for it.
    pub fn take_turn(&self, poller: usize) -> bool {
        let mine = self.open_per_poller[poller].load(Ordering::Relaxed);
        let (least_loaded, fewest) = self.least_loaded();
        if mine <= fewest {
            return true;
        }
        wake(&self.wakers[least_loaded]);
        false
    }

    fn least_loaded(&self) -> (usize, usize) {
        let counts = self
            .open_per_poller
            .iter()
            .map(|open| open.load(Ordering::Relaxed));
        counts
            .enumerate()
            .min_by_key(|&(_, open)| open)
            .unwrap_or((0, 0))
    }

    /// Counts a connection `poller` accepted, unless the server is full.
    pub fn admit(&self, poller: usize) -> bool {
        let open = self.open.fetch_add(1, Ordering::Relaxed);
        if open >= self.max_open {
            self.open.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        self.open_per_poller[poller].fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Counts out `connections` that `poller` closed.
    pub fn release(&self, poller: usize, connections: usize) {
        self.open.fetch_sub(connections, Ordering::Relaxed);
        self.open_per_poller[poller].fetch_sub(connections, Ordering::Relaxed);
    }

    /// Open connections per poller, in poller order.
    pub fn open_per_poller(&self) -> Vec<usize> {
        let counts = self.open_per_poller.iter();
        counts.map(|open| open.load(Ordering::Relaxed)).collect()
    }

    /// Wakes every poller, to see a change of phase.
    pub fn wake_all(&self) {
        self.wakers.iter().for_each(wake);
    }
}

fn wake(waker: &Waker) {
    if let Err(e) = waker.wake() {
        error!("waking a poller: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll, Token};
    use std::time::Duration;

    const WOKEN: Token = Token(7);

    fn balance(pollers: usize, max_open: usize) -> (Vec<Poll>, Balance) {
        let polls: Vec<Poll> = (0..pollers).map(|_| Poll::new().unwrap()).collect();
        let wakers = polls
            .iter()
            .map(|poll| Waker::new(poll.registry(), WOKEN).unwrap())
            .collect();
        (polls, Balance::new(wakers, max_open))
    }

    fn was_woken(poll: &mut Poll) -> bool {
        let mut events = Events::with_capacity(4);
        poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
        events.iter().any(|event| event.token() == WOKEN)
    }

    #[test]
    fn a_busier_poller_hands_its_turn_to_the_least_loaded() {
        let (mut polls, balance) = balance(3, 100);
        assert!(balance.take_turn(0) && balance.take_turn(1) && balance.take_turn(2));
        assert!(balance.admit(0) && balance.admit(1));
        assert!(!balance.take_turn(0));
        assert!(was_woken(&mut polls[2]));
        assert!(!was_woken(&mut polls[1]));
        assert!(balance.take_turn(2));
        balance.release(0, 1);
        assert!(balance.take_turn(0));
        assert!(!balance.take_turn(1));
        assert_eq!(balance.open_per_poller(), vec![0, 1, 0]);
    }

    #[test]
    fn admits_up_to_the_maximum_over_all_pollers() {
        let (_polls, balance) = balance(2, 3);
        assert!(balance.admit(0) && balance.admit(1) && balance.admit(0));
        assert!(!balance.admit(1));
        assert_eq!(balance.open_per_poller(), vec![2, 1]);
        balance.release(0, 2);
        assert!(balance.admit(1));
        assert_eq!(balance.open_per_poller(), vec![0, 2]);
    }
}
