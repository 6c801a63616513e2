//! The actors a server owns, built at start from what the route table
//! declares: a cell per shared actor, a cell per poller for per-poller
//! actors, a pool of threads per blocking actor (and one for the blocking
//! handlers), the delay timer, and the directory that finds them by address.
//! Each actor route is resolved here once, per poller, to the [`CallPath`]
//! its connections use, so no request looks an address up. Start refuses a
//! route to an address nobody spawned, and an address spawned twice.

use std::collections::HashMap;
use std::io::{self, ErrorKind};
use std::sync::Arc;

use uppercut::api::{Actor, AnySender, Envelope};

use crate::actors::blocking::{BlockingPool, RunBlocking};
use crate::actors::blocking_handler::HandlerRunner;
use crate::actors::cell::ActorCell;
use crate::actors::context::RunContext;
use crate::actors::directory::{Dest, Directory};
use crate::actors::durable::{Durable, Plain};
use crate::actors::forwarder::Forwarder;
use crate::actors::port::{PollerPort, Relayed};
use crate::actors::remote::{split_node, Remote, RemoteAddr, ANY_NODE};
use crate::actors::timer::Timer;
use crate::mail;
use crate::routes::handler::Handler;
use crate::routes::spawns::{Factory, SpawnKind};
use crate::routes::table::{ActorRoute, CallTarget, Routes};
use crate::state::{check_key, DurableEnv, StateHost, Wake};
use crate::websocket::registry::WsRegistry;

/// Where an actor route's requests go, for the connections of one poller.
#[derive(Clone)]
pub(crate) enum CallPath {
    /// An actor run where its message is (shared, or this poller's own).
    Cell(Arc<ActorCell>),
    /// An actor on blocking threads.
    Blocking(Arc<BlockingPool>),
    /// A blocking handler, on the blocking handlers' threads.
    BlockingHandler(Arc<BlockingPool>, Handler),
    /// The poller's own upstream pool.
    Upstream,
    /// A placed actor's name, wherever it is active.
    Placed(Arc<str>),
    /// A placed actor's name made from the request's path parameters
    /// (`cart/{id}`), wherever it is active.
    PlacedTemplate(Arc<str>),
    /// An actor on another server (`name@node`, or `name@*` when no actor
    /// here has the name), through the poller's NATS link.
    Remote(RemoteAddr),
}

/// The owned actors of one server.
pub(crate) struct ActorHouse {
    directory: Arc<Directory>,
    timer: Option<Arc<Timer>>,
    /// Each with the threads and factory it starts with.
    pools: Vec<Arc<BlockingPool>>,
    cells: Vec<Arc<ActorCell>>,
    /// By poller, then by actor route.
    paths: Vec<Vec<CallPath>>,
}

/// How blocking threads run their instances.
struct BlockingRunner {
    directory: Arc<Directory>,
    timer: Option<Arc<Timer>>,
}

impl RunBlocking for BlockingRunner {
    fn run(&self, pool: &BlockingPool, actor: &mut Actor, envelope: Envelope) {
        let context = RunContext::new(&self.directory, self.timer.as_deref(), None, None);
        // Only what this message's sends met counts.
        drop(mail::take_pressure());
        context.run_actor(pool.address(), actor, envelope, &pool.warnings);
        // A send to another server went past its bound: this thread waits,
        // as a blocking write would, before its next message.
        if let Some(pressure) = mail::take_pressure() {
            mail::wait_for_relief(&*pressure);
        }
    }

    fn stop(&self, pool: &BlockingPool, actor: &mut Actor) {
        let context = RunContext::new(&self.directory, self.timer.as_deref(), None, None);
        context.stop_actor(pool.address(), actor);
    }
}

/// The blocking handlers' pool's name (no actor can send to it).
const HANDLER_POOL: &str = "blocking-handlers";

impl ActorHouse {
    /// Builds the actors `routes` declares, for pollers with `ports`, and
    /// starts their threads; an error names the route or address at fault.
    /// `node` is this server's name in its cluster, if it joins one.
    pub(crate) fn start(
        routes: &Routes,
        ports: Vec<Arc<PollerPort>>,
        node: Option<&str>,
        state: Option<&StateHost>,
    ) -> io::Result<ActorHouse> {
        let pollers = ports.len().max(1);
        check_routes(routes, node)?;
        let mut by_address = HashMap::new();
        let mut cells = Vec::new();
        // Durable actors' ways in, for the store's news, once the
        // directory exists.
        let mut wakes: Vec<(String, Wake)> = Vec::new();
        let mut to_start: Vec<(Arc<BlockingPool>, usize, usize, Factory)> = Vec::new();
        for (index, spec) in routes.spawns().iter().enumerate() {
            let address = spec.address.as_str();
            let dest = match &spec.kind {
                // Made on demand, wherever the cluster places each name.
                SpawnKind::Placed(_) => continue,
                SpawnKind::Shared(actor) => {
                    let actor = actor.lock().unwrap_or_else(|e| e.into_inner()).take();
                    let Some(actor) = actor else {
                        return Err(refused(format!(
                            "actor {address:?} belongs to another server started with these routes"
                        )));
                    };
                    let cell = Arc::new(ActorCell::new(address, index % pollers, actor));
                    cells.push(Arc::clone(&cell));
                    Dest::Shared(cell)
                }
                SpawnKind::PerPoller(factory) => {
                    let own: Box<[Arc<ActorCell>]> = (0..pollers)
                        .map(|poller| Arc::new(ActorCell::new(address, poller, factory(poller))))
                        .collect();
                    cells.extend(own.iter().cloned());
                    Dest::PerPoller {
                        cells: own,
                        next: Default::default(),
                    }
                }
                SpawnKind::Durable(initial) => {
                    let initial = initial.lock().unwrap_or_else(|e| e.into_inner()).take();
                    let Some(initial) = initial else {
                        return Err(refused(format!(
                            "actor {address:?} belongs to another server started with these routes"
                        )));
                    };
                    let actor: Actor = match state {
                        Some(host) => {
                            check_key(address).map_err(refused)?;
                            let wake = Wake::default();
                            wakes.push((address.to_string(), Arc::clone(&wake)));
                            let env = DurableEnv {
                                key: address.to_string(),
                                store: Arc::clone(&host.store),
                                wake,
                                metrics: Arc::clone(&host.metrics),
                                serves_until: None,
                                fence: false,
                            };
                            Box::new(Durable::start(initial, env).map_err(refused)?)
                        }
                        None => {
                            log::info!(
                                "actor {address:?} is durable, but no state store is configured \
                                 (--state): its state is lost with the process"
                            );
                            Box::new(Plain(initial))
                        }
                    };
                    let cell = Arc::new(ActorCell::new(address, index % pollers, actor));
                    cells.push(Arc::clone(&cell));
                    Dest::Shared(cell)
                }
                SpawnKind::Blocking { threads, factory } => {
                    let pool = BlockingPool::new(address);
                    to_start.push((Arc::clone(&pool), *threads, *threads, Arc::clone(factory)));
                    Dest::Blocking(pool)
                }
            };
            by_address.insert(address.into(), dest);
        }
        let has_blocking_handler = routes
            .actor_routes()
            .iter()
            .any(|route| matches!(route.target, CallTarget::BlockingHandler(_)));
        let handler_pool = has_blocking_handler.then(|| {
            let pool = BlockingPool::new(HANDLER_POOL);
            pool.keep_alive(routes.blocking_keep_alive_time());
            let factory: Factory = Arc::new(|_| Box::new(HandlerRunner));
            let (least, most) = routes.blocking_thread_count();
            to_start.push((Arc::clone(&pool), least, most, factory));
            pool
        });
        let directory = Arc::new(Directory::new(by_address, ports));
        for (address, wake) in wakes {
            // Weak: the directory holds the actor that holds this.
            let directory = Arc::downgrade(&directory);
            let _ = wake.set(Arc::new(move |envelope| {
                if let Some(directory) = directory.upgrade() {
                    let _ = directory.deliver_foreign(&address, envelope);
                }
            }));
        }
        let mut house = ActorHouse {
            directory: Arc::clone(&directory),
            timer: None,
            pools: to_start.iter().map(|(pool, ..)| Arc::clone(pool)).collect(),
            cells,
            paths: Vec::new(),
        };
        // WebSocket actors delay messages to themselves (an idle timer,
        // a rate) without owning any other actor.
        if !routes.spawns().is_empty() || routes.has_websockets() {
            house.timer = Some(Arc::new(Timer::start(Arc::clone(&directory))?));
        }
        let runner: Arc<dyn RunBlocking> = Arc::new(BlockingRunner {
            directory,
            timer: house.timer.clone(),
        });
        for (pool, least, most, factory) in to_start {
            // On an error, dropping the house stops what did start.
            pool.start_elastic(least, most, factory, Arc::clone(&runner))?;
        }
        house.paths = (0..pollers)
            .map(|poller| house.resolve(routes, poller, handler_pool.as_ref(), node))
            .collect::<io::Result<_>>()?;
        Ok(house)
    }

    /// Each actor route's path for poller `poller`'s connections.
    fn resolve(
        &self,
        routes: &Routes,
        poller: usize,
        handlers: Option<&Arc<BlockingPool>>,
        node: Option<&str>,
    ) -> io::Result<Vec<CallPath>> {
        let resolve = |route: &ActorRoute| {
            Ok(match &route.target {
                CallTarget::Upstream => CallPath::Upstream,
                CallTarget::BlockingHandler(index) => {
                    let pool = handlers
                        .ok_or_else(|| refused(format!("route {}: no pool", route.name)))?;
                    CallPath::BlockingHandler(
                        Arc::clone(pool),
                        Arc::clone(routes.handler_at(*index)),
                    )
                }
                CallTarget::Address(address) => {
                    let name = split_node(address).map_or(address.as_str(), |(name, _)| name);
                    let local_or_any = split_node(address)
                        .is_none_or(|(_, at)| Some(at) == node || at == ANY_NODE);
                    if local_or_any && placed_kind(routes, name).is_some() {
                        return Ok(match name.contains('{') {
                            true => CallPath::PlacedTemplate(name.into()),
                            false => CallPath::Placed(name.into()),
                        });
                    }
                    let local = match split_node(address) {
                        // This node's own, or any node's where this one
                        // has it: the local actor.
                        Some((name, at))
                            if Some(at) == node
                                || (at == ANY_NODE && self.directory.get(name).is_some()) =>
                        {
                            name
                        }
                        Some((name, at)) => {
                            return Ok(CallPath::Remote(RemoteAddr {
                                name: name.to_string(),
                                node: at.to_string(),
                            }))
                        }
                        None => address.as_str(),
                    };
                    match self.directory.get(local) {
                        Some(Dest::Shared(cell)) => CallPath::Cell(Arc::clone(cell)),
                        Some(Dest::PerPoller { cells, .. }) => {
                            CallPath::Cell(Arc::clone(&cells[poller % cells.len()]))
                        }
                        Some(Dest::Blocking(pool)) => CallPath::Blocking(Arc::clone(pool)),
                        None => return Err(no_actor(route, address)),
                    }
                }
            })
        };
        routes.actor_routes().iter().map(resolve).collect()
    }

    /// Where poller `poller`'s connections send each actor route's requests.
    pub(crate) fn paths(&self, poller: usize) -> Vec<CallPath> {
        self.paths.get(poller).cloned().unwrap_or_default()
    }

    /// How actors run on poller `poller`'s thread (or on a connection of
    /// it), with `outer` as the uppercut sender there.
    pub(crate) fn context<'a>(&'a self, poller: usize, outer: &'a dyn AnySender) -> RunContext<'a> {
        RunContext::new(
            &self.directory,
            self.timer.as_deref(),
            Some(poller),
            Some(outer),
        )
    }

    /// How actors run on a thread that stands in for poller `poller` and
    /// has no uppercut sender (the test client's): sends into the uppercut
    /// system are left in the poller's port.
    pub(crate) fn context_without_system(&self, poller: usize) -> RunContext<'_> {
        RunContext::new(&self.directory, self.timer.as_deref(), Some(poller), None)
    }

    /// A forwarder for each owned address, to spawn into the uppercut system
    /// there.
    pub(crate) fn forwarders(&self) -> Vec<(String, Actor)> {
        let forwarder = |address: &str| -> (String, Actor) {
            let directory = Arc::clone(&self.directory);
            let address = address.to_string();
            (address.clone(), Box::new(Forwarder { address, directory }))
        };
        self.directory
            .entries()
            .map(|(address, _)| forwarder(address))
            .collect()
    }

    /// Joins the cluster: addresses on other nodes and topics reach them.
    pub(crate) fn join(&self, remote: Arc<dyn Remote>) {
        self.directory.join(remote);
    }

    /// Where the server's actors are.
    pub(crate) fn directory(&self) -> &Arc<Directory> {
        &self.directory
    }

    /// The server's open WebSocket connections.
    pub(crate) fn websockets(&self) -> &Arc<WsRegistry> {
        self.directory.websockets()
    }

    /// Sends `envelope` to `address` from outside the server: to the actor
    /// the server owns there (or the WebSocket connection), else into the
    /// uppercut system.
    pub(crate) fn send(&self, address: &str, envelope: Envelope) {
        drop(mail::take_pressure());
        if let Err(envelope) = self.directory.deliver_foreign(address, envelope) {
            self.directory
                .relay(Relayed::Send(address.to_string(), envelope));
        }
        // Past the bound for NATS: a program's thread waits, as a blocking
        // write would; one of the server's own cannot (the relief may need
        // it), and its message is taken all the same.
        if let Some(pressure) = mail::take_pressure() {
            if !mail::is_server_thread() {
                mail::wait_for_relief(&*pressure);
            }
        }
    }

    /// Once no poller runs: stops the blocking threads and the timer, drops
    /// what is queued, and calls every instance's `on_stop`.
    pub(crate) fn stop(&self) {
        for pool in &self.pools {
            pool.stop();
        }
        if let Some(timer) = &self.timer {
            timer.stop();
        }
        let context = RunContext::new(&self.directory, None, None, None);
        for cell in &self.cells {
            drop(cell.stop());
            cell.with_free_actor(|actor| context.stop_actor(cell.address(), actor));
        }
    }
}

impl Drop for ActorHouse {
    fn drop(&mut self) {
        // A house that failed to start, or whose server never stopped it.
        for pool in &self.pools {
            pool.stop();
        }
        if let Some(timer) = &self.timer {
            timer.stop();
        }
    }
}

/// Every route path was taken (no bad or overlapping pattern), every actor
/// route names an owned address (or, in a cluster, another node's), and no
/// address is owned twice.
fn check_routes(routes: &Routes, node: Option<&str>) -> io::Result<()> {
    if let Some(refused_path) = routes.refused().first() {
        return Err(refused(refused_path.clone()));
    }
    let mut seen = std::collections::HashSet::new();
    for spec in routes.spawns() {
        if !seen.insert(spec.address.as_str()) {
            return Err(refused(format!(
                "actor address {:?} is spawned twice",
                spec.address
            )));
        }
    }
    for route in routes.actor_routes() {
        let CallTarget::Address(address) = &route.target else {
            continue;
        };
        match (split_node(address), node) {
            // A placed name belongs to no node: anywhere in the cluster, or
            // here without one.
            (Some((name, at)), _) if placed_kind(routes, name).is_some() && at == ANY_NODE => {}
            // Another server's, or this one's when it has the name.
            (Some((name, at)), Some(node)) if at == node && !seen.contains(name) => {
                return Err(no_actor(route, address));
            }
            (Some(_), Some(_)) => {}
            (Some(_), None) => {
                return Err(refused(format!(
                    "route {}: {address:?} names a node, and the server is in no cluster \
                     (Config::cluster)",
                    route.name
                )))
            }
            (None, _) if placed_kind(routes, address).is_some() => {}
            (None, _) if !seen.contains(address.as_str()) => return Err(no_actor(route, address)),
            (None, _) => {}
        }
    }
    Ok(())
}

/// The placed kind `name` is of (`kind`, or `kind/ID`, where the ID may
/// be a template of path parameters, `kind/{id}`), if any.
pub(crate) fn placed_kind<'a>(routes: &'a Routes, name: &str) -> Option<&'a str> {
    routes.spawns().iter().find_map(|spec| {
        let SpawnKind::Placed(_) = spec.kind else {
            return None;
        };
        let kind = spec.address.as_str();
        let of_kind = name == kind
            || name
                .strip_prefix(kind)
                .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1);
        of_kind.then_some(kind)
    })
}

fn no_actor(route: &ActorRoute, address: &str) -> io::Error {
    refused(format!(
        "route {}: no actor at {address:?} (give one to Routes::spawn, \
         Routes::spawn_per_poller or Routes::spawn_blocking)",
        route.name
    ))
}

fn refused(message: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, message)
}

impl std::fmt::Debug for ActorHouse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActorHouse")
            .field("directory", &self.directory)
            .field("pools", &self.pools.len())
            .finish_non_exhaustive()
    }
}
