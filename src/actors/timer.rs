//! `delay` for the actors the server owns: one thread keeps the delayed
//! messages in order of when they are due and sleeps until the first, then
//! sends it as any thread without a poller does (`Directory::deliver_foreign`).
//! Uppercut's own delays go through its scheduler to a worker, and the
//! workers are the pollers', which lend them only between rounds; a message
//! due to an owned actor should not wait for that.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use uppercut::api::Envelope;

use crate::actors::directory::Directory;

/// The delay thread.
pub(crate) struct Timer {
    state: Arc<(Mutex<Delays>, Condvar)>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct Delays {
    due: BinaryHeap<Delayed>,
    /// Numbers delays, so that two due at once keep their order.
    sequence: u64,
    stopping: bool,
}

struct Delayed {
    at: Instant,
    sequence: u64,
    address: String,
    envelope: Envelope,
}

impl PartialEq for Delayed {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.sequence) == (other.at, other.sequence)
    }
}

impl Eq for Delayed {}

impl PartialOrd for Delayed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Delayed {
    /// Reversed, so that the heap's greatest is the earliest.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.sequence).cmp(&(self.at, self.sequence))
    }
}

impl Timer {
    /// Starts the thread, which sends through `directory`.
    pub(crate) fn start(directory: Arc<Directory>) -> std::io::Result<Timer> {
        let state: Arc<(Mutex<Delays>, Condvar)> = Arc::default();
        let waiting = Arc::clone(&state);
        let thread = thread::Builder::new()
            .name("actor-delays".into())
            .spawn(move || run(&waiting, &directory))?;
        Ok(Timer {
            state,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Sends `envelope` to the owned `address` after `after`.
    pub(crate) fn delay(&self, address: &str, envelope: Envelope, after: Duration) {
        let (delays, changed) = &*self.state;
        let mut delays = delays.lock().unwrap_or_else(|e| e.into_inner());
        if delays.stopping {
            return;
        }
        delays.sequence += 1;
        let sequence = delays.sequence;
        delays.due.push(Delayed {
            at: Instant::now() + after,
            sequence,
            address: address.to_string(),
            envelope,
        });
        changed.notify_one();
    }

    /// Drops what is still delayed and ends the thread.
    pub(crate) fn stop(&self) {
        let (delays, changed) = &*self.state;
        let dropped = {
            let mut delays = delays.lock().unwrap_or_else(|e| e.into_inner());
            delays.stopping = true;
            std::mem::take(&mut delays.due)
        };
        changed.notify_all();
        drop(dropped);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

fn run(state: &(Mutex<Delays>, Condvar), directory: &Directory) {
    let (delays, changed) = state;
    let mut guard = delays.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if guard.stopping {
            return;
        }
        let now = Instant::now();
        match guard.due.peek().map(|first| first.at) {
            Some(at) if at <= now => {
                let Some(due) = guard.due.pop() else {
                    continue;
                };
                drop(guard);
                // An address nobody owns: the message is dropped.
                let _ = directory.deliver_foreign(&due.address, due.envelope);
                guard = delays.lock().unwrap_or_else(|e| e.into_inner());
            }
            Some(at) => {
                guard = changed
                    .wait_timeout(guard, at - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            None => guard = changed.wait(guard).unwrap_or_else(|e| e.into_inner()),
        }
    }
}
