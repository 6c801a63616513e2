//! Starting and stopping a server: the SO_REUSEPORT listeners, one poller per
//! listener, and the uppercut system that runs the pollers.
//!
//! Uppercut's actor workers spin on `try_recv` whenever they have no actor to
//! run, so the system gets exactly one worker per poller: each worker spends
//! its idle time blocked in its poller's `poll`, and an idle server sleeps.
//! How the pool's threads are scheduled is `pool_threads`.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, SystemTime};

use log::{error, info};
use mio::net::TcpListener;
use mio::{Poll, Waker};
use socket2::{Domain, Socket, Type};
use uppercut::config::{Config as SystemConfig, SchedulerConfig};
use uppercut::core::System;
use uppercut::pool::ThreadPool;

use crate::access_log::AccessLog;
use crate::balance::Balance;
use crate::config::{Config, Dispatch};
use crate::date::DateCache;
use crate::metrics::PollerMetrics;
use crate::metrics_server::MetricsServer;
use crate::poller::{Poller, WAKER};
use crate::pool_threads::{PoolThreads, SYSTEM_WORKER_NICE};
use crate::routes::Routes;
use crate::shared::Shared;
use crate::timeouts::CoarseClock;
use crate::upstream::UpstreamPool;
use crate::wakeup::{Mail, Outstanding, Parking, Tick};
use uppercut::api::Envelope;

const LISTEN_BACKLOG: i32 = 4096;
/// Where `--upstream`'s JSON is served.
pub const UPSTREAM_PATH: &str = "/io";

/// Where the server is in its life; every poller and connection reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Running,
    /// Not accepting; connections finish the requests they have, then close.
    Draining,
    /// Everything closes now; the actor system is ending.
    Stopping,
}

/// What all pollers share: the phase and the count of open connections.
pub struct ServerState {
    phase: AtomicU8,
    open_connections: AtomicUsize,
    max_connections: usize,
}

impl ServerState {
    fn new(max_connections: usize) -> ServerState {
        ServerState {
            phase: AtomicU8::new(Phase::Running as u8),
            open_connections: AtomicUsize::new(0),
            max_connections,
        }
    }

    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Running,
            1 => Phase::Draining,
            _ => Phase::Stopping,
        }
    }

    fn set_phase(&self, phase: Phase) {
        self.phase.fetch_max(phase as u8, Ordering::Relaxed);
    }

    /// Counts a new connection in, unless the server is full.
    pub fn admit(&self) -> bool {
        let open = self.open_connections.fetch_add(1, Ordering::Relaxed);
        if open >= self.max_connections {
            self.release(1);
            return false;
        }
        true
    }

    pub fn release(&self, connections: usize) {
        self.open_connections
            .fetch_sub(connections, Ordering::Relaxed);
    }
}

/// A running server. Dropping it stops it at once; `shutdown` lets the
/// requests in flight finish first.
pub struct Server {
    local_addr: SocketAddr,
    /// Written out once the connections are gone.
    access_log: Option<Arc<AccessLog>>,
    state: Arc<ServerState>,
    wakers: Vec<Arc<Waker>>,
    balance: Arc<Balance>,
    system: Option<JoinHandle<()>>,
    /// Disconnects when the actor system has ended.
    ended: mpsc::Receiver<()>,
    /// Serves `/metrics`, with `--metrics`.
    metrics: Option<MetricsServer>,
}

impl Server {
    /// Binds the listeners and starts the pollers; returns once the server
    /// accepts connections.
    pub fn start(config: &Config, routes: Routes) -> io::Result<Server> {
        let pollers = config.pollers.max(1);
        // The first listener is bound alone, so that port 0 resolves to one
        // port that the others then share, and exclusively, so that a second
        // server on the same address fails instead of splitting the traffic.
        let first = exclusive_listener(config.bind)?;
        let local_addr = first.local_addr()?;
        let mut listeners = vec![first];
        for _ in 1..pollers {
            listeners.push(reuseport_listener(local_addr)?);
        }

        let routes = match config.upstream {
            Some(_) => routes.with_upstream(UPSTREAM_PATH),
            None => routes,
        };
        let routes = Arc::new(routes);
        let access_log = config
            .access_log
            .as_ref()
            .map(AccessLog::open)
            .transpose()?;
        let state = Arc::new(ServerState::new(config.max_connections));
        let counters: Vec<Arc<PollerMetrics>> = match config.metrics {
            Some(_) => (0..pollers)
                .map(|_| Arc::new(PollerMetrics::new(config.dispatch)))
                .collect(),
            None => Vec::new(),
        };
        let metrics = config
            .metrics
            .map(|addr| MetricsServer::start(addr, counters.clone(), config.dispatch))
            .transpose()?;
        let mut polls = Vec::with_capacity(pollers);
        let mut wakers = Vec::with_capacity(pollers);
        for _ in 0..pollers {
            let poll = Poll::new()?;
            wakers.push(Arc::new(Waker::new(poll.registry(), WAKER)?));
            polls.push(poll);
        }
        let parkings: Vec<Arc<Parking>> = wakers
            .iter()
            .map(|waker| Arc::new(Parking::new(Arc::clone(waker))))
            .collect();
        let balance = Arc::new(Balance::new(&parkings));
        let mut actors = Vec::with_capacity(pollers);
        let pollers_and_listeners = polls.into_iter().zip(listeners).zip(&parkings);
        for (index, ((poll, listener), parking)) in pollers_and_listeners.enumerate() {
            let shared = Arc::new(Shared {
                routes: Arc::clone(&routes),
                date: DateCache::new(SystemTime::now()),
                clock: CoarseClock::new(),
                timeouts: config.timeouts,
                dispatch: config.dispatch,
                registry: poll.registry().try_clone()?,
                poller: format!("poller-{index}"),
                server: Arc::clone(&state),
                upstream_ids: AtomicU64::new(0),
                outstanding: Outstanding::default(),
                mail: Mail::default(),
                parking: Arc::clone(parking),
                access_log: access_log.clone(),
                balance: Arc::clone(&balance),
                index,
                metrics: counters.get(index).cloned(),
            });
            let upstream = config.upstream.clone().map(UpstreamPool::new);
            let upstream = upstream.map(|pool| pool.count_to(counters.get(index).cloned()));
            let poller = Poller::new(poll, listener, shared, upstream)?;
            actors.push(poller);
        }

        let worker_nice = (config.dispatch == Dispatch::System).then_some(SYSTEM_WORKER_NICE);
        let pin = config.pin;
        let (started_tx, started_rx) = mpsc::sync_channel(1);
        let (ended_tx, ended) = mpsc::channel();
        let system = thread::Builder::new()
            .name("uppercut-system".into())
            .spawn(move || {
                run_system(actors, worker_nice, pin, started_tx);
                drop(ended_tx);
            })?;
        match started_rx.recv() {
            Ok(Ok(())) => Ok(Server {
                local_addr,
                access_log,
                state,
                wakers,
                balance,
                system: Some(system),
                ended,
                metrics,
            }),
            Ok(Err(message)) => Err(io::Error::other(message)),
            Err(_) => Err(io::Error::other(
                "the actor system thread died while starting",
            )),
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// How many connections each poller holds now, in poller order: for
    /// tests and operators, to see how evenly connections are dealt. A count
    /// includes connections handed to that poller and not yet taken and, in
    /// `system` dispatch, connections closed whose poller has not yet heard.
    pub fn connections_per_poller(&self) -> Vec<usize> {
        self.balance.open_per_poller()
    }

    /// Where `/metrics` is served, with `--metrics`.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(MetricsServer::local_addr)
    }

    /// Blocks until the server stops.
    pub fn join(mut self) {
        if let Some(system) = self.system.take() {
            let _ = system.join();
        }
    }

    /// Stops accepting at once, lets every connection finish the request it
    /// is in (its response then closes it) and closes idle ones; after
    /// `grace`, closes whatever is left. True when everything finished in time.
    pub fn shutdown(mut self, grace: Duration) -> bool {
        self.enter(Phase::Draining);
        let timed_out = matches!(
            self.ended.recv_timeout(grace),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
        self.stop_and_join();
        !timed_out
    }

    /// Closes every connection now and waits for the system to end.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.enter(Phase::Stopping);
        if let Some(system) = self.system.take() {
            let _ = system.join();
        }
        if let Some(log) = &self.access_log {
            log.close();
        }
        if let Some(metrics) = &mut self.metrics {
            metrics.stop();
        }
    }

    fn enter(&self, phase: Phase) {
        self.state.set_phase(phase);
        for waker in &self.wakers {
            if let Err(e) = waker.wake() {
                error!("waking a poller: {e}");
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Runs the uppercut system until every poller has stopped.
fn run_system(
    pollers: Vec<Poller>,
    worker_nice: Option<i32>,
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
    let pool_threads = PoolThreads::adopt(&pool, pollers.len(), worker_nice, pin);
    let run = match System::new("uppercut-mio-server", "localhost", &config).run(&pool) {
        Ok(run) => run,
        Err(e) => {
            let _ = started.send(Err(format!("starting the actor system: {e:?}")));
            return;
        }
    };
    for mut poller in pollers {
        poller.report_to(Arc::clone(&pool_threads));
        // The address its connections already send to.
        let address = poller.address().to_string();
        run.spawn(&address, move || Box::new(poller));
        run.send(&address, Envelope::of(Tick));
    }
    let _ = started.send(Ok(()));
    // Dropping the pool waits for its threads, which end with the scheduler.
    drop(run);
    drop(pool);
}

/// A non-blocking listener with SO_REUSEPORT, so the kernel spreads incoming
/// connections over the pollers' listeners.
fn reuseport_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into()).map_err(|e| bind_error(e, addr))?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(TcpListener::from_std(socket.into()))
}

/// The first listener: bound and listening *without* SO_REUSEPORT, which
/// fails with EADDRINUSE if anything listens on `addr` (whether or not it set
/// SO_REUSEPORT), and only then given SO_REUSEPORT so that the pollers' other
/// listeners can join it. There is no window between a check and the bind:
/// the bind is the check, and `listen` checks again, so of two servers
/// starting at once only one gets the port. (SO_REUSEADDR keeps connections
/// in TIME_WAIT from a previous run from blocking a restart.) What remains
/// open is deliberate sharing: a program of the same user that itself sets
/// SO_REUSEPORT may still join the group, as SO_REUSEPORT intends.
fn exclusive_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into()).map_err(|e| bind_error(e, addr))?;
    socket
        .listen(LISTEN_BACKLOG)
        .map_err(|e| bind_error(e, addr))?;
    socket.set_reuse_port(true)?;
    Ok(TcpListener::from_std(socket.into()))
}

/// A bind or listen error, of the same kind, worded to name the address.
fn bind_error(error: io::Error, addr: SocketAddr) -> io::Error {
    let reason = match error.kind() {
        io::ErrorKind::AddrInUse => "address already in use".to_string(),
        _ => error.to_string(),
    };
    io::Error::new(error.kind(), format!("cannot listen on {addr}: {reason}"))
}

/// Raises the open-files soft limit to the hard limit: every connection is a
/// descriptor. Returns the limit now in force.
pub fn raise_open_files_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(io::Error::last_os_error());
        }
        limit = raised;
    }
    info!("open-files limit: {}", limit.rlim_cur);
    Ok(limit.rlim_cur)
}
