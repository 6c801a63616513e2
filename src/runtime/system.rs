//! The thread that runs the uppercut system: its pool, the pollers and the
//! routes' actors spawned into it, and the order they stop in.
//!
//! Uppercut's actor workers spin on `try_recv` whenever they have no actor to
//! run, so the system gets exactly one worker per poller: each worker spends
//! its idle time blocked in its poller's `poll`, and an idle server sleeps.
//! How the pool's threads are scheduled is `pool_threads`.

use std::sync::{mpsc, Arc};
use std::time::Duration;

use uppercut::api::{Actor, Envelope};
use uppercut::config::{Config as SystemConfig, SchedulerConfig};
use uppercut::core::System;
use uppercut::pool::ThreadPool;

use crate::runtime::poller::Poller;
use crate::runtime::pool_threads::{PoolThreads, WorkerPriority};
use crate::runtime::wakeup::Tick;

/// What the server spawns into the system besides its pollers: a
/// forwarder at each owned actor's address (`actors::forwarder`).
pub(crate) struct RouteActors {
    pub forwarders: Vec<(String, Actor)>,
}

/// Runs the uppercut system until every poller has stopped, then stops the
/// forwarders and ends the system.
pub(crate) fn run_system(
    pollers: Vec<Poller>,
    route_actors: RouteActors,
    worker_priority: WorkerPriority,
    pin: bool,
    started: mpsc::SyncSender<Result<(), String>>,
) {
    let scheduler = SchedulerConfig {
        // One worker per poller: any more would spin while idle.
        actor_worker_threads: pollers.len(),
        // Uppercut's extra threads only report logs and metrics, which are off.
        extra_worker_threads: 0,
        logging_enabled: false,
        metric_reporting_enabled: false,
        metric_reporting_interval: Duration::from_secs(1),
        // The system ends once every poller (and connection) actor has stopped.
        eager_shutdown_enabled: true,
        ..SchedulerConfig::default()
    };
    let config = SystemConfig::new(scheduler, Default::default());
    let pool = ThreadPool::for_config(&config);
    let pool_threads = PoolThreads::adopt(&pool, pollers.len(), worker_priority, pin);
    let run = match System::new("uppercut-mio-server", "localhost", &config).run(&pool) {
        Ok(run) => run,
        Err(e) => {
            let _ = started.send(Err(format!("starting the actor system: {e:?}")));
            return;
        }
    };
    let addresses: Vec<String> = route_actors
        .forwarders
        .iter()
        .map(|(a, _)| a.clone())
        .collect();
    for (address, actor) in route_actors.forwarders {
        run.spawn(&address, move || actor);
    }
    let (running, pollers_stopped) = mpsc::channel::<()>();
    for mut poller in pollers {
        poller.report_to(Arc::clone(&pool_threads));
        poller.hold_until_dropped(running.clone());
        // The address its connections already send to.
        let address = poller.address().to_string();
        run.spawn(&address, move || Box::new(poller));
        run.send(&address, Envelope::of(Tick));
    }
    drop(running);
    let _ = started.send(Ok(()));
    // Every poller holds a sender until uppercut drops it, after it stopped.
    let _ = pollers_stopped.recv();
    for address in &addresses {
        run.stop(address);
    }
    // Whatever the owned actors spawned into uppercut ends with the system.
    run.shutdown();
    // Dropping the pool waits for its threads, which end with the scheduler.
    drop(pool);
}
