//! Actors that may block, on threads of their own (`Routes::spawn_blocking`,
//! and the pool behind `Routes::blocking_handler`): as actix's
//! `SyncArbiter`, a fixed set of threads, each with its own instance, taking
//! messages from one shared queue. An idle thread sleeps on a condition
//! variable, so an idle pool costs no CPU (uppercut's own workers spin, which
//! is why these are plain threads). No poller ever waits for one: a request's
//! answer goes back through its poller's reply queue like any actor's.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use log::{error, warn};
use uppercut::api::{Actor, Envelope};

use crate::actors::contain::WarnLimiter;
use crate::routes::spawns::Factory;

/// How a blocking thread runs its instance: given by the house, which
/// knows how actors send.
pub(crate) trait RunBlocking: Send + Sync {
    /// Hands `envelope` to the instance.
    fn run(&self, pool: &BlockingPool, actor: &mut Actor, envelope: Envelope);
    /// The pool stops: the instance's `on_stop`.
    fn stop(&self, pool: &BlockingPool, actor: &mut Actor);
}

/// A pool of threads running instances of one actor.
pub(crate) struct BlockingPool {
    address: Box<str>,
    queue: Mutex<Queue>,
    ready: Condvar,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// How often the instances' panics are logged.
    pub(crate) warnings: WarnLimiter,
}

#[derive(Default)]
struct Queue {
    envelopes: VecDeque<Envelope>,
    stopping: bool,
    /// Threads that have not ended yet.
    alive: usize,
}

/// How long stopping waits for the threads to finish the message each is
/// on; a thread still inside an actor after that is left to end by itself.
const STOP_WAIT: Duration = Duration::from_secs(2);

impl BlockingPool {
    /// A pool at `address` with no threads yet.
    pub(crate) fn new(address: &str) -> Arc<BlockingPool> {
        Arc::new(BlockingPool {
            address: address.into(),
            queue: Mutex::default(),
            ready: Condvar::new(),
            threads: Mutex::default(),
            warnings: WarnLimiter::default(),
        })
    }

    /// Starts `threads` threads, each running an instance `factory` makes
    /// with the thread's index; on an error, those started are stopped.
    pub(crate) fn start(
        self: &Arc<Self>,
        threads: usize,
        factory: Factory,
        run: Arc<dyn RunBlocking>,
    ) -> std::io::Result<()> {
        for index in 0..threads {
            let (pool, factory, run) = (Arc::clone(self), Arc::clone(&factory), Arc::clone(&run));
            self.lock().alive += 1;
            let spawned = thread::Builder::new()
                .name(thread_name(&self.address, index))
                .spawn(move || {
                    let _alive = Alive(&pool);
                    pool.serve(factory(index), &*run)
                });
            match spawned {
                Ok(handle) => self.threads().push(handle),
                Err(e) => {
                    self.lock().alive -= 1;
                    self.stop();
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// The address the actor was spawned at.
    pub(crate) fn address(&self) -> &str {
        &self.address
    }

    /// Queues `envelope` for the first free thread; dropped (an actor
    /// request then answers 502) once the pool stops.
    pub(crate) fn submit(&self, envelope: Envelope) {
        let mut queue = self.lock();
        if queue.stopping {
            drop(queue);
            return drop(envelope);
        }
        queue.envelopes.push_back(envelope);
        drop(queue);
        self.ready.notify_one();
    }

    /// Stops taking messages and drops those queued; each thread ends
    /// once done with the message it is on.
    pub(crate) fn close(&self) {
        let queued = {
            let mut queue = self.lock();
            queue.stopping = true;
            std::mem::take(&mut queue.envelopes)
        };
        self.ready.notify_all();
        drop(queued);
    }

    /// Closes the pool and waits for its threads to end, at most
    /// `STOP_WAIT`: a thread an actor keeps blocked past that is left to
    /// end by itself, with a warning.
    pub(crate) fn stop(&self) {
        self.close();
        let deadline = Instant::now() + STOP_WAIT;
        let mut queue = self.lock();
        while queue.alive > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                warn!(
                    "{} blocking thread(s) of {} still busy after {STOP_WAIT:?}; not waiting for them",
                    queue.alive, self.address
                );
                break;
            }
            queue = self
                .ready
                .wait_timeout(queue, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        // Every thread counted itself out: each is past its last message and
        // joins at once. Otherwise only those already ended are joined.
        let all_out = queue.alive == 0;
        drop(queue);
        let threads = std::mem::take(&mut *self.threads());
        for thread in threads.into_iter().filter(|t| all_out || t.is_finished()) {
            if thread.join().is_err() {
                error!("a blocking thread of {} panicked", self.address);
            }
        }
    }

    /// One thread: takes messages until the pool stops.
    fn serve(&self, mut actor: Actor, run: &dyn RunBlocking) {
        loop {
            let envelope = {
                let mut queue = self.lock();
                loop {
                    if queue.stopping {
                        drop(queue);
                        return run.stop(self, &mut actor);
                    }
                    if let Some(envelope) = queue.envelopes.pop_front() {
                        break envelope;
                    }
                    queue = self.ready.wait(queue).unwrap_or_else(|e| e.into_inner());
                }
            };
            run.run(self, &mut actor, envelope);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn threads(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Counts a thread alive until it ends, however it ends (a factory that
/// panics included).
struct Alive<'a>(&'a BlockingPool);

impl Drop for Alive<'_> {
    fn drop(&mut self) {
        self.0.lock().alive -= 1;
        self.0.ready.notify_all();
    }
}

/// `ADDRESS#N`, cut to the 15 bytes Linux keeps of a thread's name, so that
/// `top -H` and profiles say which actor a thread runs.
fn thread_name(address: &str, index: usize) -> String {
    let suffix = format!("#{index}");
    let mut cut = 15usize.saturating_sub(suffix.len()).min(address.len());
    while !address.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &address[..cut])
}

impl std::fmt::Debug for BlockingPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingPool")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_named_after_its_actor_within_15_bytes() {
        assert_eq!(thread_name("slow", 3), "slow#3");
        assert_eq!(thread_name("a-very-long-address", 12), "a-very-long-#12");
        assert_eq!(thread_name("ééééééé", 0), "éééééé#0");
    }
}
