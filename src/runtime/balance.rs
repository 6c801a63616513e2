//! Dealing connections evenly over the pollers.
//!
//! The kernel spreads connections over the pollers' `SO_REUSEPORT` listeners
//! by a hash of their addresses, which leaves some pollers with several times
//! the connections of others, for as long as keep-alive connections last. So
//! every poller counts the connections it holds here, and a poller that
//! accepts a connection while it holds more than the least-loaded poller
//! hands the socket to that poller instead of keeping it: through the
//! target's hand-off queue, waking it only if it is parked in `poll`. A
//! poller that holds no more than any other keeps what it accepts, which
//! costs a scan of the counts and one compare-and-swap, no syscall.
//!
//! Each count moves only by a compare-and-swap from the value its poller read
//! as the least of all counts (counts only grow between the reads and the
//! swap, unless connections close), so while connections open and none close,
//! no poller ever holds more than one connection more than another.
//!
//! The hand-off queue follows the rules of `wakeup` (`Parking`): a poller
//! parks before it blocks in `poll` and blocks only if its queue is empty; a
//! hand-off is counted before the parked flag is read, so one of the two
//! sides sees the other. A poller takes its queue on every round. A poller that drains or
//! stops closes its queue: what is handed to it later is closed at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::net::transport::Accepted;

use crate::runtime::wakeup::Parking;

/// Keeps what it holds on cache lines of its own: each poller writes its own
/// count and flags, and another poller's writes must not evict them. 128
/// bytes, as adjacent lines are fetched in pairs on x86.
#[repr(align(128))]
struct Padded<T>(T);

/// What the pollers share to balance their connections.
pub(crate) struct Balance {
    open: Vec<Padded<AtomicUsize>>,
    handoffs: Vec<Padded<Handoff>>,
}

/// One poller's hand-off queue.
struct Handoff {
    queue: Mutex<Queue>,
    /// Sockets in `queue`, readable without the lock.
    queued: AtomicUsize,
    parking: Arc<Parking>,
}

#[derive(Default)]
struct Queue {
    sockets: Vec<Accepted>,
    closed: bool,
}

/// Where a connection a poller accepted goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// The accepting poller keeps it.
    Keep,
    /// Hand it to this poller.
    HandTo(usize),
}

impl Balance {
    /// One entry per poller, woken through its parking.
    pub(crate) fn new(parkings: &[Arc<Parking>]) -> Balance {
        Balance {
            open: parkings
                .iter()
                .map(|_| Padded(AtomicUsize::new(0)))
                .collect(),
            handoffs: parkings
                .iter()
                .map(|parking| {
                    Padded(Handoff {
                        queue: Mutex::default(),
                        queued: AtomicUsize::new(0),
                        parking: Arc::clone(parking),
                    })
                })
                .collect(),
        }
    }

    /// Chooses the poller for a connection that poller `me` accepted, the
    /// least loaded, preferring `me` among equals, and counts it there.
    pub(crate) fn place(&self, me: usize) -> Placement {
        loop {
            let mut target = me;
            let mut least = self.open[me].0.load(Ordering::Relaxed);
            for (index, open) in self.open.iter().enumerate() {
                let open = open.0.load(Ordering::Relaxed);
                if open < least {
                    target = index;
                    least = open;
                }
            }
            let counted = self.open[target].0.compare_exchange(
                least,
                least + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            // Another poller counted a connection since the scan: look again.
            if counted.is_ok() {
                return match target == me {
                    true => Placement::Keep,
                    false => Placement::HandTo(target),
                };
            }
        }
    }

    /// `connections` that poller `index` held (or was handed) have closed.
    pub(crate) fn closed(&self, index: usize, connections: usize) {
        self.open[index].0.fetch_sub(connections, Ordering::Relaxed);
    }

    /// How many connections each poller holds, counting those handed to it
    /// and not yet taken, and (in `system` dispatch) those closed whose
    /// poller has not yet heard of it.
    pub(crate) fn open_per_poller(&self) -> Vec<usize> {
        self.open
            .iter()
            .map(|open| open.0.load(Ordering::Relaxed))
            .collect()
    }

    /// Queues `socket`, already counted by `place`, for poller `target`, and
    /// wakes it if it is parked. Gives the socket back when that poller has
    /// closed its queue, for the caller to close and account for.
    pub(crate) fn hand_off(&self, target: usize, socket: Accepted) -> Result<(), Accepted> {
        let handoff = &self.handoffs[target].0;
        {
            let mut queue = lock(&handoff.queue);
            if queue.closed {
                return Err(socket);
            }
            queue.sockets.push(socket);
            handoff.queued.fetch_add(1, Ordering::SeqCst);
        }
        handoff.parking.wake_if_parked();
        Ok(())
    }

    /// Sockets wait in poller `index`'s queue.
    pub(crate) fn has_queued(&self, index: usize) -> bool {
        self.handoffs[index].0.queued.load(Ordering::SeqCst) > 0
    }

    /// Moves the sockets handed to poller `index` into `into` (swapped, so
    /// neither side allocates once both have grown).
    pub(crate) fn take(&self, index: usize, into: &mut Vec<Accepted>) {
        let handoff = &self.handoffs[index].0;
        if handoff.queued.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut queue = lock(&handoff.queue);
        std::mem::swap(&mut queue.sockets, into);
        handoff.queued.store(0, Ordering::SeqCst);
    }

    /// Poller `index` takes no more hand-offs: closes those waiting and
    /// returns how many it closed.
    pub(crate) fn close(&self, index: usize) -> usize {
        let handoff = &self.handoffs[index].0;
        let mut queue = lock(&handoff.queue);
        queue.closed = true;
        handoff.queued.store(0, Ordering::SeqCst);
        let closed = queue.sockets.len();
        queue.sockets.clear();
        closed
    }
}

fn lock(queue: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    queue.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parkings, each waking a `Poll` of its own (kept alive with them).
    fn wakers(count: usize) -> (Vec<mio::Poll>, Vec<Arc<Parking>>) {
        let mut polls = Vec::new();
        let mut parkings = Vec::new();
        for _ in 0..count {
            let poll = mio::Poll::new().unwrap();
            let waker = mio::Waker::new(poll.registry(), mio::Token(0)).unwrap();
            parkings.push(Arc::new(Parking::new(Arc::new(waker))));
            polls.push(poll);
        }
        (polls, parkings)
    }

    fn connected(listener: &std::net::TcpListener) -> Accepted {
        let addr = listener.local_addr().unwrap();
        let socket = std::net::TcpStream::connect(addr).unwrap();
        let peer = socket.local_addr().unwrap();
        Accepted {
            socket: mio::net::TcpStream::from_std(socket),
            peer,
            tls: false,
        }
    }

    #[test]
    fn a_poller_keeps_what_it_accepts_while_it_holds_the_least() {
        let (_polls, wakers) = wakers(3);
        let balance = Balance::new(&wakers);
        assert_eq!(balance.place(1), Placement::Keep);
        assert_eq!(balance.place(1), Placement::HandTo(0));
        assert_eq!(balance.place(1), Placement::HandTo(2));
        assert_eq!(balance.place(1), Placement::Keep);
        assert_eq!(balance.open_per_poller(), vec![1, 2, 1]);
        balance.closed(1, 2);
        assert_eq!(balance.place(0), Placement::HandTo(1));
        assert_eq!(balance.open_per_poller(), vec![1, 1, 1]);
    }

    #[test]
    fn any_order_of_accepts_stays_within_one() {
        let (_polls, wakers) = wakers(8);
        let balance = Balance::new(&wakers);
        // Accepts landing as unevenly as a hash may put them.
        for accept in 0..1000usize {
            balance.place(accept * accept % 7 % 3);
            let open = balance.open_per_poller();
            let (max, min) = (open.iter().max(), open.iter().min());
            assert!(max.unwrap() - min.unwrap() <= 1, "{open:?}");
        }
    }

    #[test]
    fn a_parked_poller_with_a_hand_off_waiting_does_not_block() {
        let (_polls, parkings) = wakers(2);
        let balance = Balance::new(&parkings);
        let park = || parkings[1].park(|| balance.has_queued(1));
        assert!(park());
        parkings[1].unpark();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(balance.hand_off(1, connected(&listener)).is_ok());
        assert!(!park());
        let mut taken = Vec::new();
        balance.take(1, &mut taken);
        assert_eq!(taken.len(), 1);
        assert!(park());
        parkings[1].unpark();
        assert_eq!(balance.close(1), 0);
        let refused = balance.hand_off(1, connected(&listener));
        assert!(refused.is_err(), "a closed queue refuses");
    }
}
