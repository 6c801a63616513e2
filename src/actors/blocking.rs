//! Actors that may block, on threads of their own (`Routes::spawn_blocking`,
//! and the pool behind `Routes::blocking_handler`): as actix's
//! `SyncArbiter`, threads each with its own instance, taking messages from
//! one shared queue. An idle thread sleeps on a condition variable, so an
//! idle pool costs no CPU (uppercut's own workers spin, which is why these
//! are plain threads). No poller ever waits for one: a request's answer
//! goes back through its poller's reply queue like any actor's.
//!
//! A pool may be elastic, as tokio's blocking pool is: it starts with its
//! least number of threads, adds one when a message comes and none is idle
//! (up to its most), and a thread past the least that waits
//! [`KEEP_ALIVE`] for a message ends. So a route that blocks for a while
//! under many clients gets a thread per client, and an idle server keeps
//! only the least. `spawn_blocking`'s pools are fixed (their instances are
//! the user's to count); the blocking handlers' pool is elastic.

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
    /// The threads it keeps, and the most it grows to.
    least: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
    /// What a new thread runs, once started.
    spawn: std::sync::OnceLock<(Factory, Arc<dyn RunBlocking>)>,
    /// How long a thread past the least waits for a message before it ends.
    keep_alive: Mutex<Duration>,
}

#[derive(Default)]
struct Queue {
    envelopes: VecDeque<Envelope>,
    stopping: bool,
    /// Threads that have not ended yet.
    alive: usize,
    /// Threads waiting for a message.
    idle: usize,
    /// The index the next thread gets.
    next: usize,
}

/// How long a thread past a pool's least waits for a message before it
/// ends, unless set.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(10);

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
            least: Default::default(),
            most: Default::default(),
            spawn: std::sync::OnceLock::new(),
            keep_alive: Mutex::new(KEEP_ALIVE),
        })
    }

    /// Threads past the least end after waiting `keep_alive` for a message.
    pub(crate) fn keep_alive(&self, keep_alive: Duration) {
        *self.keep_alive.lock().unwrap_or_else(|e| e.into_inner()) = keep_alive;
    }

    /// Starts `least` threads, each running an instance `factory` makes
    /// with the thread's index, and lets the pool grow to `most` while
    /// messages find no idle thread (`most == least`: a fixed pool); on an
    /// error, those started are stopped.
    pub(crate) fn start_elastic(
        self: &Arc<Self>,
        least: usize,
        most: usize,
        factory: Factory,
        run: Arc<dyn RunBlocking>,
    ) -> std::io::Result<()> {
        use std::sync::atomic::Ordering;
        self.least.store(least, Ordering::Relaxed);
        self.most.store(most.max(least), Ordering::Relaxed);
        let _ = self.spawn.set((factory, run));
        for _ in 0..least {
            if let Err(e) = self.add_thread() {
                self.stop();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Starts one more thread.
    fn add_thread(self: &Arc<Self>) -> std::io::Result<()> {
        let Some((factory, run)) = self.spawn.get() else {
            return Ok(());
        };
        let (pool, factory, run) = (Arc::clone(self), Arc::clone(factory), Arc::clone(run));
        let index = {
            let mut queue = self.lock();
            queue.alive += 1;
            queue.next += 1;
            queue.next - 1
        };
        let spawned = thread::Builder::new()
            .name(thread_name(&self.address, index))
            .spawn(move || {
                let alive = Alive {
                    pool: &pool,
                    counted_out: std::cell::Cell::new(false),
                };
                pool.serve(factory(index), &*run, &alive)
            });
        match spawned {
            Ok(handle) => {
                let mut threads = self.threads();
                // Threads that ended (past the least, idle) are joined.
                threads.retain(|thread| !thread.is_finished());
                threads.push(handle);
                Ok(())
            }
            Err(e) => {
                self.lock().alive -= 1;
                Err(e)
            }
        }
    }

    /// The address the actor was spawned at.
    pub(crate) fn address(&self) -> &str {
        &self.address
    }

    /// Queues `envelope` for the first free thread, starting one more if
    /// none is idle and the pool may grow; dropped (an actor request then
    /// answers 502) once the pool stops.
    pub(crate) fn submit(self: &Arc<Self>, envelope: Envelope) {
        let mut queue = self.lock();
        if queue.stopping {
            drop(queue);
            return drop(envelope);
        }
        queue.envelopes.push_back(envelope);
        let most = self.most.load(std::sync::atomic::Ordering::Relaxed);
        let grow = queue.envelopes.len() > queue.idle && queue.alive < most;
        drop(queue);
        self.ready.notify_one();
        if grow {
            if let Err(e) = self.add_thread() {
                warn!(
                    "{}: no thread more ({e}); the queue waits for a busy one",
                    self.address
                );
            }
        }
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

    /// One thread: takes messages until the pool stops, or (past the
    /// pool's least) until it waited `KEEP_ALIVE` for one.
    fn serve(&self, mut actor: Actor, run: &dyn RunBlocking, alive: &Alive<'_>) {
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
                    let least = self.least.load(std::sync::atomic::Ordering::Relaxed);
                    let keep_alive = *self.keep_alive.lock().unwrap_or_else(|e| e.into_inner());
                    queue.idle += 1;
                    let (next, waited) = self
                        .ready
                        .wait_timeout(queue, keep_alive)
                        .unwrap_or_else(|e| e.into_inner());
                    queue = next;
                    queue.idle -= 1;
                    if waited.timed_out() && queue.envelopes.is_empty() && queue.alive > least {
                        // Counted out under the lock, so that threads timing
                        // out together never leave fewer than the least.
                        queue.alive -= 1;
                        alive.counted_out.set(true);
                        drop(queue);
                        self.ready.notify_all();
                        return run.stop(self, &mut actor);
                    }
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
/// panics included), unless it counted itself out already.
struct Alive<'a> {
    pool: &'a BlockingPool,
    counted_out: std::cell::Cell<bool>,
}

impl Drop for Alive<'_> {
    fn drop(&mut self) {
        if !self.counted_out.get() {
            self.pool.lock().alive -= 1;
        }
        self.pool.ready.notify_all();
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
