//! A poller's port (`actors::port::PollerPort`) and its park flag
//! (`runtime::wakeup::Parking`): other threads leave work in the port, mark
//! it pending, and wake the poller if it is parked; the poller parks, looks
//! once more for pending work, and only then blocks in `poll`.
//!
//! Claim checked: no work left in the port waits for a poller that stays
//! blocked. The poller here blocks for good unless woken, so a lost wake-up
//! is a deadlock, which loom reports; and everything left is taken once.

use std::io;
use std::sync::Arc;

use loom::sync::Notify;
use loom::thread;

use super::{check_both, Fences, Loom};
use crate::actors::port::{PollerPort, PortWork, Relayed};
use crate::runtime::wakeup::{Alarm, Parking};
use crate::websocket::handle::MailPoster;

/// mio's `Waker` as the model has it: a wake while the poller is not
/// blocked makes its next block return at once, and wakes coalesce.
#[derive(Debug)]
struct Waker(Notify);

impl Alarm for Waker {
    fn wake(&self) -> io::Result<()> {
        self.0.notify();
        Ok(())
    }
}

/// A poller's port and park flag, wired as the server wires them.
struct Poller<F: Fences> {
    port: Arc<PollerPort<Loom<F>>>,
    parking: Arc<Parking<Loom<F>, Waker>>,
    waker: Arc<Waker>,
}

impl<F: Fences> Poller<F> {
    fn new() -> Poller<F> {
        let waker = Arc::new(Waker(Notify::new()));
        let parking = Arc::new(Parking::<Loom<F>, Waker>::new(Arc::clone(&waker)));
        let wake_parked = Arc::clone(&parking);
        let port = Arc::new(PollerPort::new(Box::new(move || {
            wake_parked.wake_if_parked()
        })));
        Poller {
            port,
            parking,
            waker,
        }
    }

    /// The poller's rounds until it has taken `mail` keys and `relayed`
    /// sends: each round takes the port, then parks, looks for pending work
    /// once more, and blocks until woken unless it found some.
    fn run(&self, mail: usize, relayed: usize) -> (Vec<usize>, usize) {
        let mut work = PortWork::default();
        let mut keys = Vec::new();
        let mut sends = 0;
        loop {
            self.port.take(&mut work);
            keys.append(&mut work.mail);
            sends += work.relay.len();
            work.relay.clear();
            if keys.len() >= mail && sends >= relayed {
                return (keys, sends);
            }
            if self.parking.park(|| self.port.is_pending()) {
                self.waker.0.wait();
                self.parking.unpark();
            }
        }
    }
}

/// Two threads leave work for a parking poller: one WebSocket key each,
/// and one a send for the uppercut system too.
fn two_posters<F: Fences>() {
    let poller = Poller::<F>::new();
    let (port, other) = (Arc::clone(&poller.port), Arc::clone(&poller.port));
    let first = thread::spawn(move || port.post_mail(1));
    let second = thread::spawn(move || {
        other.post_mail(2);
        other.relay(Relayed::Stop("elsewhere".to_string()));
    });
    let (mut keys, sends) = poller.run(2, 1);
    first.join().expect("the poster ran");
    second.join().expect("the poster ran");
    keys.sort_unstable();
    assert_eq!(keys, [1, 2], "a key taken twice");
    assert_eq!(sends, 1);
}

#[test]
fn work_left_for_a_parked_poller_wakes_it() {
    check_both!(3, two_posters);
}
