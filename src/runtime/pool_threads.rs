//! Uppercut's pool threads, as the operating system schedules them.
//!
//! Uppercut 0.4 pins pool thread N to core N; a worker spinning on the core
//! the scheduler thread is pinned to would delay every message by up to a
//! time slice, so every pool thread gets the process's own CPU mask back.
//!
//! Every uppercut message crosses the one scheduler thread, and an actor
//! worker with nothing to run spins on `try_recv` until that thread hands it
//! the next envelope. When the spinning workers (and whatever else runs) hold
//! every core, the scheduler thread waits for the kernel to preempt one of
//! them, a whole time slice, before any envelope moves; the spinning then
//! lasts longer, and the server settles at milliseconds per request. So the
//! scheduler thread runs at a real-time priority (`SCHED_FIFO` 1) where the
//! process may set one: it never spins (it blocks in `recv_timeout`), and it
//! then runs the moment it has a message. Where the process may not, it asks
//! for the shortest time slice (EEVDF, Linux 6.12 and later), which lets it
//! preempt a spinning worker when it wakes.
//!
//! In `system` dispatch a worker also spins between any two envelopes, and
//! a spinning thread should yield to any thread with work: the scheduler
//! thread, the kernel's network threads, other processes on the machine. So
//! there the actor workers run at a low priority (nice 15); they still get
//! every core nothing else wants.
//!
//! In `local` dispatch a poller yields its core after every round that found
//! work (see `poller`), and EEVDF lets a task that yields wait up to its own
//! slice before it runs again. So there the workers ask for the shortest
//! slice, which bounds what a yield can cost the requests that arrive
//! meanwhile.
//!
//! With `--pin`, each actor worker is pinned, when a poller first runs on
//! it, to a CPU of its own: the Nth worker reported to the Nth CPU of the
//! process's mask (wrapping round when there are more workers than CPUs).
//! The scheduler thread keeps the whole mask.
//!
//! Uppercut does not say which pool thread runs the scheduler. Every pool
//! thread reports its id at start, every poller reports the worker it runs
//! on, and the one pool thread no poller ever runs on is the scheduler's:
//! each poller blocks in `poll` on its first `Tick`, so the first `Tick`s
//! land on as many different workers as there are pollers.

use std::cell::Cell;
use std::io;
use std::sync::{Arc, Barrier, Mutex};

use log::{debug, error, info};
use uppercut::pool::ThreadPool;

/// How the actor workers are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkerPriority {
    /// `system` dispatch: nice 15, as they spin between envelopes.
    Low,
    /// `local` dispatch: the shortest slice, as their pollers yield.
    ShortSlice,
}

/// The nice value of actor workers in `system` dispatch.
const SYSTEM_WORKER_NICE: i32 = 15;

/// How the scheduler thread was given priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SchedulerPriority {
    /// `SCHED_FIFO`, priority 1.
    RealTime,
    /// `SCHED_OTHER` with the shortest time slice the kernel allows.
    ShortSlice,
    /// Neither was allowed: the kernel's default.
    Default,
}

/// The pool's thread ids, and which of them run actors.
#[derive(Debug)]
pub(crate) struct PoolThreads {
    all: Vec<i32>,
    workers: usize,
    seen: Mutex<Seen>,
    /// How actor workers are scheduled.
    worker_priority: WorkerPriority,
    /// With `--pin`: the CPUs of the process's mask, in order.
    pin_cpus: Option<Vec<usize>>,
}

#[derive(Debug, Default)]
struct Seen {
    workers: Vec<i32>,
    done: bool,
}

thread_local! {
    /// This thread has reported itself as an actor worker.
    static REPORTED: Cell<bool> = const { Cell::new(false) };
}

impl PoolThreads {
    /// Gives every thread of `pool` the CPU mask this thread has (the
    /// process's, as set by the user's `taskset` or cgroup), undoing
    /// uppercut's pinning, and notes each thread's id. Each thread runs
    /// exactly one job: each job waits at a barrier until all have started,
    /// so no thread can take a second one. Call it before the system starts.
    pub(crate) fn adopt(
        pool: &ThreadPool,
        workers: usize,
        worker_priority: WorkerPriority,
        pin: bool,
    ) -> Arc<PoolThreads> {
        // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for this thread.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let mask_ok = unsafe { libc::sched_getaffinity(0, size, &mut mask) } == 0;
        if !mask_ok {
            error!("sched_getaffinity: {}", io::Error::last_os_error());
        }
        let ids = Arc::new(Mutex::new(Vec::with_capacity(pool.size())));
        let barrier = Arc::new(Barrier::new(pool.size() + 1));
        for _ in 0..pool.size() {
            let barrier = Arc::clone(&barrier);
            let ids = Arc::clone(&ids);
            pool.submit(move || {
                // SAFETY: sets this thread's mask from a valid cpu_set_t.
                if mask_ok && unsafe { libc::sched_setaffinity(0, size, &mask) } != 0 {
                    error!("sched_setaffinity: {}", io::Error::last_os_error());
                }
                // A poller's worker: never blocks for relief.
                crate::mail::mark_server_thread();
                // SAFETY: gettid has no preconditions.
                let id = unsafe { libc::gettid() };
                ids.lock().unwrap_or_else(|e| e.into_inner()).push(id);
                barrier.wait();
            });
        }
        barrier.wait();
        let all = std::mem::take(&mut *ids.lock().unwrap_or_else(|e| e.into_inner()));
        let pin_cpus = (pin && mask_ok).then(|| {
            // SAFETY: CPU_ISSET reads a valid cpu_set_t.
            let cpus = (0..libc::CPU_SETSIZE as usize)
                .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &mask) });
            cpus.collect::<Vec<usize>>()
        });
        Arc::new(PoolThreads {
            all,
            workers,
            seen: Mutex::default(),
            worker_priority,
            pin_cpus: pin_cpus.filter(|cpus| !cpus.is_empty()),
        })
    }

    /// A poller reports the worker it runs on; once every worker is known,
    /// the remaining pool thread is the scheduler's and is raised. After the
    /// first call on a thread this is one thread-local read.
    pub(crate) fn report_worker(&self) {
        if REPORTED.with(Cell::get) {
            return;
        }
        REPORTED.with(|reported| reported.set(true));
        // SAFETY: gettid has no preconditions.
        let id = unsafe { libc::gettid() };
        match self.worker_priority {
            WorkerPriority::Low => {
                // SAFETY: sets the nice value of this thread (Linux: per thread).
                let set = unsafe {
                    libc::setpriority(libc::PRIO_PROCESS, id as libc::id_t, SYSTEM_WORKER_NICE)
                };
                if set != 0 {
                    debug!("setpriority: {}", io::Error::last_os_error());
                }
            }
            WorkerPriority::ShortSlice => {
                if !shortest_slice(id) {
                    debug!("sched_setattr: {}", io::Error::last_os_error());
                }
            }
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.done || seen.workers.contains(&id) {
            return;
        }
        seen.workers.push(id);
        if let Some(cpus) = &self.pin_cpus {
            pin(id, cpus[(seen.workers.len() - 1) % cpus.len()]);
        }
        if seen.workers.len() < self.workers {
            return;
        }
        seen.done = true;
        match scheduler_thread(&self.all, &seen.workers) {
            Some(scheduler) => {
                let priority = raise(scheduler);
                info!("uppercut scheduler thread {scheduler}: {priority:?} priority");
            }
            None => debug!("uppercut scheduler thread not found among {:?}", self.all),
        }
    }
}

/// The one pool thread that is not a worker, if exactly one is left.
fn scheduler_thread(all: &[i32], workers: &[i32]) -> Option<i32> {
    let mut rest = all.iter().filter(|id| !workers.contains(id));
    match (rest.next(), rest.next()) {
        (Some(&id), None) => Some(id),
        _ => None,
    }
}

/// Pins thread `id` to `cpu`.
fn pin(id: i32, cpu: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO and CPU_SET write within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
    }
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: sets the mask of one of this process's threads from a valid set.
    match unsafe { libc::sched_setaffinity(id, size, &set) } {
        0 => info!("actor worker thread {id} pinned to CPU {cpu}"),
        _ => error!(
            "pinning thread {id} to CPU {cpu}: {}",
            io::Error::last_os_error()
        ),
    }
}

/// `struct sched_attr` of `sched_setattr(2)`, which the libc crate lacks.
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// The shortest slice EEVDF accepts, in nanoseconds.
const SHORTEST_SLICE_NS: u64 = 100_000;

/// Gives thread `id` the best priority this process may set.
fn raise(id: i32) -> SchedulerPriority {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: sets the policy of one of this process's threads from a valid struct.
    if unsafe { libc::sched_setscheduler(id, libc::SCHED_FIFO, &param) } == 0 {
        return SchedulerPriority::RealTime;
    }
    if shortest_slice(id) {
        return SchedulerPriority::ShortSlice;
    }
    SchedulerPriority::Default
}

/// Gives thread `id` the default policy with the shortest slice EEVDF
/// allows (Linux 6.12 and later; earlier kernels ignore the slice); false
/// when the kernel refused.
fn shortest_slice(id: i32) -> bool {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice: 0,
        priority: 0,
        runtime: SHORTEST_SLICE_NS,
        deadline: 0,
        period: 0,
    };
    // SAFETY: the kernel reads `size` bytes of a valid sched_attr.
    unsafe { libc::syscall(libc::SYS_sched_setattr, id, &attr, 0) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheduler_is_the_one_thread_left() {
        assert_eq!(scheduler_thread(&[7, 8, 9], &[9, 7]), Some(8));
        assert_eq!(scheduler_thread(&[7, 8, 9], &[9]), None, "two left");
        assert_eq!(scheduler_thread(&[7, 8], &[7, 8]), None, "none left");
    }
}
