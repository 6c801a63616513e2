//! Starting and stopping a server: the SO_REUSEPORT listeners, one poller per
//! listener, and the thread that runs the uppercut system (`system`).

use std::any::Any;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use log::{error, info, warn};
use mio::{Poll, Waker};
use uppercut::api::Envelope;

use crate::actors::house::ActorHouse;
use crate::actors::placed::Placement;
use crate::actors::port::PollerPort;
use crate::actors::remote::Remote;
use crate::cluster::kv::JetStreamKv;
use crate::cluster::link::Link;
use crate::cluster::placement::{Placed, PlacedConfig};
use crate::cluster::port::LinkPort;
use crate::cluster::presence::Verdict;
use crate::cluster::Cluster;
use crate::config::{host_node_name, ClusterConfig, Config, Listener, StateConfig};
use crate::http::method::Method;
use crate::http::response_fields::AddedFields;
use crate::mail::{self, SendError, TOPIC_PREFIX};
use crate::observe::access_log::AccessLog;
use crate::observe::cluster_metrics::ClusterMetrics;
use crate::observe::metrics::PollerMetrics;
use crate::observe::metrics_server::MetricsServer;
use crate::observe::metrics_text::Series;
use crate::routes::cors::Cors;
use crate::routes::https_redirect::HttpsRedirect;
use crate::routes::request_id::RequestId;
use crate::routes::spawns::{PlacedFactory, SpawnKind};
use crate::routes::Routes;
use crate::runtime::balance::Balance;
use crate::runtime::hosting::hosting;
use crate::runtime::lifecycle::{Phase, ServerState};
use crate::runtime::listeners::{exclusive_listener, reuseport_listener, reuseport_udp};
use crate::runtime::poller::{Poller, MAX_LISTENERS, WAKER};
use crate::runtime::quic::{QuicEndpoint, QuicHandoff, QuicShared};
use crate::runtime::shared::{PollerParts, Shared};
use crate::runtime::signals::{self, Blocked, Signal};
use crate::runtime::state_file::StateFile;
use crate::runtime::system::{run_system, RouteActors};
use crate::runtime::wakeup::Parking;
use crate::state::metrics::StateMetrics;
use crate::state::{StateHost, StateStore};
use crate::static_files::site::StaticSite;
use crate::tls::TlsAcceptor;
use crate::upstream::pool::UpstreamPool;

/// A running server. Dropping it stops it at once; `shutdown` lets the
/// requests in flight finish first, and `run_until_signal` does so on
/// SIGINT or SIGTERM.
pub struct Server {
    local_addr: SocketAddr,
    /// Every listener, its port resolved.
    listeners: Vec<Listener>,
    /// With `--tls-cert`: what new connections' TLS sessions are made with.
    tls: Option<Arc<TlsAcceptor>>,
    /// The actors the server owns.
    house: Arc<ActorHouse>,
    /// The static directory `Config::static_dir` names, as loaded.
    site: Option<Arc<StaticSite>>,
    shutdown_timeout: Duration,
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
    /// With `--nats`: the cluster.
    cluster: Option<Arc<Cluster>>,
    /// With `--state DIR`: the embedded state file.
    state_file: Option<Arc<StateFile>>,
    /// Placed actors' names, when the routes place any.
    placed: Option<Arc<Placed>>,
}

/// Sends to the server's actors (and, with `--nats`, to other servers')
/// from any thread of the program: see [`Server::send`].
#[derive(Clone)]
pub struct ServerSender {
    house: Arc<ActorHouse>,
}

impl ServerSender {
    /// As [`Server::send`].
    pub fn send(&self, address: &str, envelope: Envelope) -> Result<(), SendError> {
        mail::clear();
        self.house.send(address, envelope);
        match mail::last_send_error() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// As [`Server::send_typed`].
    pub fn send_typed<T: serde::Serialize + ?Sized>(
        &self,
        address: &str,
        message: &T,
    ) -> Result<(), SendError> {
        match crate::routes::typed_actor::typed_message(message) {
            Ok(envelope) => self.send(address, envelope),
            Err(e) => Err(SendError::NotSerializable {
                to: address.to_string(),
                why: e.to_string(),
            }),
        }
    }

    /// As [`Server::publish`].
    pub fn publish<M: Any + Send + fmt::Debug>(
        &self,
        topic: &str,
        message: M,
    ) -> Result<(), SendError> {
        self.send(&format!("{TOPIC_PREFIX}{topic}"), Envelope::of(message))
    }
}

impl fmt::Debug for ServerSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerSender").finish_non_exhaustive()
    }
}

impl Server {
    /// Binds the listeners, loads the static directory if `config` names
    /// one, and starts the pollers; returns once the server accepts
    /// connections. Its threads start with SIGINT, SIGTERM, SIGHUP and SIGUSR1
    /// blocked: see [`Server::run_until_signal`].
    ///
    /// With `Config::cluster`, it also asks the cluster whether another
    /// live server already uses its node name (a moment once NATS answers;
    /// at once when NATS cannot be reached, asked again once it is): an
    /// error of kind `AddrInUse` naming that server if one does.
    pub fn start(config: &Config, routes: Routes) -> io::Result<Server> {
        // Every thread started below inherits the mask.
        let _blocked = Blocked::here();
        let pollers = config.pollers.max(1);
        let addrs = config.effective_listeners();
        if addrs.len() > MAX_LISTENERS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} listeners: at most {MAX_LISTENERS}", addrs.len()),
            ));
        }
        if addrs.iter().any(|listener| listener.tls) && config.tls.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a TLS listener needs a certificate and key (Config::tls, --tls-cert and --tls-key)",
            ));
        }
        // Each address's first listener is bound alone, so that port 0
        // resolves to one port that the other pollers then share, and
        // exclusively, so that a second server on the same address fails
        // instead of splitting the traffic.
        let mut listeners: Vec<Vec<(mio::net::TcpListener, bool)>> =
            (0..pollers).map(|_| Vec::new()).collect();
        let mut bound = Vec::with_capacity(addrs.len());
        for listener in &addrs {
            let first = exclusive_listener(listener.addr)?;
            let addr = first.local_addr()?;
            bound.push(Listener {
                addr,
                tls: listener.tls,
            });
            listeners[0].push((first, listener.tls));
            for poller in listeners.iter_mut().skip(1) {
                poller.push((reuseport_listener(addr)?, listener.tls));
            }
        }
        let local_addr = bound[0].addr;
        // HTTP/3: a UDP socket per poller on the first TLS listener's port.
        let h3_addr = match config.http3 {
            true => Some(
                bound
                    .iter()
                    .find(|l| l.tls)
                    .map(|l| l.addr)
                    .ok_or_else(|| {
                        io::Error::new(
                            io::ErrorKind::InvalidInput,
                            "HTTP/3 needs a TLS listener (Config::tls, --tls-cert and --tls-key)",
                        )
                    })?,
            ),
            false => None,
        };
        let mut udp = Vec::with_capacity(pollers);
        if let Some(addr) = h3_addr {
            for index in 0..pollers {
                udp.push(reuseport_udp(addr, index == 0)?);
            }
        }

        let mut routes = configured(config, routes)?;
        if let Some(addr) = h3_addr {
            routes.added.advertise_h3(addr.port());
        }
        let routes = Arc::new(routes);
        // The server reloads the directory it loaded, not a site the
        // routes came with.
        let site = match config.static_dir {
            Some(_) => routes.static_site.clone(),
            None => None,
        };
        let tls = config
            .tls
            .as_ref()
            .map(|files| {
                let acceptor = TlsAcceptor::new(files, config.http2)?;
                match config.http3 {
                    true => acceptor.with_quic(quic_transport(config)),
                    false => Ok(acceptor),
                }
                .map(Arc::new)
            })
            .transpose()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        if let Some(name) = &config.log_name {
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("log name {name:?}: use printable ASCII without spaces"),
                ));
            }
        }
        let access_log = config
            .access_log
            .as_ref()
            .map(|target| AccessLog::open(target, &log_name(config)))
            .transpose()?;
        let state = Arc::new(ServerState::new(config.max_connections));
        let hosting = hosting(config.dispatch);
        let counters: Vec<Arc<PollerMetrics>> = match config.metrics {
            Some(_) => (0..pollers)
                .map(|_| {
                    let routes = routes.route_names().len();
                    Arc::new(PollerMetrics::new(hosting.counters_exclusive(), routes))
                })
                .collect(),
            None => Vec::new(),
        };
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
        let ports: Vec<Arc<PollerPort>> = parkings
            .iter()
            .map(|parking| {
                let parking = Arc::clone(parking);
                Arc::new(PollerPort::new(Box::new(move || parking.wake_if_parked())))
            })
            .collect();
        // Refuses a route to an actor nobody spawned before any thread starts.
        let cluster = config
            .cluster
            .as_ref()
            .map(|cluster| join_cluster(cluster, &parkings, &routes, local_addr))
            .transpose()?;
        let node = config.cluster.as_ref().map(|cluster| cluster.node.as_str());
        let state_host = open_state(config, cluster.as_ref())?;
        let house = Arc::new(ActorHouse::start(
            &routes,
            ports.clone(),
            node,
            state_host.as_ref().map(|(host, _)| host),
        )?);
        if let Some(cluster) = &cluster {
            house.join(Arc::clone(cluster) as Arc<dyn Remote>);
        }
        let placed = start_placement(
            config,
            &routes,
            &house,
            cluster.as_ref(),
            state_host.as_ref(),
        )?;
        let metrics = config
            .metrics
            .map(|addr| {
                let series = Series {
                    envelopes: hosting.counts_envelopes(),
                    tls: config.tls.is_some(),
                    websocket: routes.has_websockets(),
                    upstream: config.upstream.is_some(),
                    http2: config.http2,
                    http3: config.http3,
                    routes: routes.route_names(),
                    cluster: cluster
                        .as_ref()
                        .map(|cluster| Arc::clone(cluster.metrics())),
                    state: state_host
                        .as_ref()
                        .map(|(host, _)| Arc::clone(&host.metrics)),
                    placement: placed.as_ref().map(|placed| Arc::clone(&placed.metrics)),
                };
                MetricsServer::start(addr, counters.clone(), series)
            })
            .transpose()?;
        let handoff = Arc::new(QuicHandoff::new(&parkings));
        let quic_shared = QuicShared {
            reset_key: Arc::new(
                ring::hmac::Key::generate(
                    ring::hmac::HMAC_SHA256,
                    &ring::rand::SystemRandom::new(),
                )
                .map_err(|_| io::Error::other("no randomness for QUIC's reset key"))?,
            ),
            handoff: Arc::clone(&handoff),
            limits: crate::http3::session::Limits {
                max_body: config.max_body,
            },
            retry_above: config.http3_retry_above,
        };
        let mut udp = udp.into_iter();
        let mut actors = Vec::with_capacity(pollers);
        let pollers_and_listeners = polls.into_iter().zip(listeners).zip(&parkings);
        for (index, ((poll, listeners), parking)) in pollers_and_listeners.enumerate() {
            let shared = Arc::new(Shared::new(PollerParts {
                index,
                routes: Arc::clone(&routes),
                timeouts: config.timeouts,
                registry: poll.registry().try_clone()?,
                server: Arc::clone(&state),
                house: Arc::clone(&house),
                port: Arc::clone(&ports[index]),
                parking: Arc::clone(parking),
                access_log: access_log.clone(),
                balance: Arc::clone(&balance),
                metrics: counters.get(index).cloned(),
                tls: tls.clone(),
                cluster: cluster.clone(),
                http2: config.http2,
                http2_only: config.http2 && config.http2_only,
            }));
            let upstream = config.upstream.clone().map(UpstreamPool::new);
            let upstream = upstream.map(|pool| pool.count_to(counters.get(index).cloned()));
            let connections = hosting.connections(Arc::clone(&shared));
            let link = cluster
                .as_ref()
                .map(|cluster| Link::new(index, Arc::clone(cluster)));
            let quic = match (udp.next(), &tls) {
                (Some(socket), Some(tls)) => {
                    let tls = Arc::clone(tls);
                    let config = Box::new(move || tls.quic());
                    Some(QuicEndpoint::new(
                        socket,
                        index,
                        &quic_shared,
                        config,
                        poll.registry(),
                    )?)
                }
                _ => None,
            };
            let poller = Poller::new(poll, listeners, shared, connections, upstream)?
                .with_link(link)
                .with_quic(quic, Arc::clone(&handoff));
            actors.push(poller);
        }

        let worker_priority = hosting.worker_priority();
        let pin = config.pin;
        let (started_tx, started_rx) = mpsc::sync_channel(1);
        let (ended_tx, ended) = mpsc::channel();
        let route_actors = RouteActors {
            forwarders: house.forwarders(),
        };
        let system = thread::Builder::new()
            .name("uppercut-system".into())
            .spawn(move || {
                run_system(actors, route_actors, worker_priority, pin, started_tx);
                drop(ended_tx);
            })?;
        let server = match started_rx.recv() {
            Ok(Ok(())) => Server {
                local_addr,
                listeners: bound,
                house,
                tls,
                site,
                shutdown_timeout: config.shutdown_timeout,
                access_log,
                state,
                wakers,
                balance,
                system: Some(system),
                ended,
                metrics,
                cluster,
                state_file: state_host.and_then(|(_, file)| file),
                placed,
            },
            Ok(Err(message)) => return Err(io::Error::other(message)),
            Err(_) => {
                return Err(io::Error::other(
                    "the actor system thread died while starting",
                ))
            }
        };
        server.hold_name()
    }

    /// With `--nats`: waits until the node's name is known to be this
    /// server's (or NATS cannot be reached: then it is asked once it is);
    /// a name another live server holds stops this one, and the start
    /// fails naming that server, as a port in use does.
    fn hold_name(self) -> io::Result<Server> {
        let Some(cluster) = &self.cluster else {
            return Ok(self);
        };
        match cluster.presence().wait(NAME_WAIT) {
            Verdict::Taken(message) => {
                self.shutdown(Duration::ZERO);
                Err(io::Error::new(io::ErrorKind::AddrInUse, message))
            }
            Verdict::Pending => {
                let node = &cluster.config().node;
                warn!(
                    "NATS: node name {node:?} not confirmed within {NAME_WAIT:?}; serving, and a server that holds it makes this one leave the cluster"
                );
                Ok(self)
            }
            Verdict::Unreachable | Verdict::Joined => Ok(self),
        }
    }

    /// The address the server listens on (the port resolved, when the
    /// configuration asked for port 0): its first listener's.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Every address the server listens on, in the configuration's
    /// order, each plain or TLS, the ports resolved.
    pub fn listeners(&self) -> &[Listener] {
        &self.listeners
    }

    /// Blocks SIGINT, SIGTERM, SIGHUP and SIGUSR1 in the calling thread for good,
    /// and so in every thread it starts from then on. Call it first in
    /// `main` when the program ends with [`Server::run_until_signal`]:
    /// otherwise a signal that arrives before that call (say, right after
    /// the program printed its address) kills the process instead of
    /// draining the server.
    pub fn block_signals() {
        signals::block();
    }

    /// The static directory `Config::static_dir` names, as loaded (and
    /// reloaded).
    pub fn static_site(&self) -> Option<&StaticSite> {
        self.site.as_deref()
    }

    /// Serves until SIGINT or SIGTERM, then shuts down as
    /// [`Server::shutdown`] does within `Config::shutdown_timeout`; SIGHUP
    /// meanwhile reloads the static directory (a failed reload keeps the
    /// files already served), and SIGUSR1 reopens the access log file (after
    /// logrotate has moved it). True when every request was answered;
    /// false when the shutdown timeout closed a connection with a request
    /// unanswered or a response not all sent (a program may then exit
    /// non-zero, as the binary does).
    pub fn run_until_signal(self) -> bool {
        let blocked = Blocked::here();
        let signal = loop {
            match blocked.wait() {
                Signal::Reload => self.reload(),
                Signal::Reopen => match &self.access_log {
                    Some(log) => log.reopen(),
                    None => info!("SIGUSR1: no access log to reopen"),
                },
                Signal::Stop(signal) => break signal,
            }
        };
        info!(
            "signal {signal}: shutting down within {:?}",
            self.shutdown_timeout
        );
        let grace = self.shutdown_timeout;
        self.shutdown(grace)
    }

    /// SIGHUP: reads the TLS certificate and key, and the static directory,
    /// again, in the thread that waits for signals, off every request path.
    fn reload(&self) {
        if let Some(tls) = &self.tls {
            let files = tls.files();
            match tls.reload() {
                Ok(()) => info!(
                    "SIGHUP: reloaded the TLS certificate {} and key {}",
                    files.cert.display(),
                    files.key.display()
                ),
                Err(e) => warn!(
                    "SIGHUP: TLS reload failed, still serving the certificate loaded before: {e}"
                ),
            }
        }
        let Some(site) = &self.site else {
            if self.tls.is_none() {
                info!("SIGHUP: no static directory or certificate to reload");
            }
            return;
        };
        match site.reload() {
            Ok(summary) => info!(
                "SIGHUP: reloaded {} static files, {} bytes, from {}",
                summary.files,
                summary.bytes,
                site.dir().display()
            ),
            Err(e) => warn!(
                "SIGHUP: reload failed, still serving the files loaded before: static directory {}: {e}",
                site.dir().display()
            ),
        }
    }

    /// How many connections each poller holds now, in poller order: for
    /// tests and operators, to see how evenly connections are dealt. A count
    /// includes connections handed to that poller and not yet taken and, in
    /// `system` dispatch, connections closed whose poller has not yet heard.
    pub fn connections_per_poller(&self) -> Vec<usize> {
        self.balance.open_per_poller()
    }

    /// Sends `envelope` to the actor at `address` from outside the server
    /// (a thread of the program's own): an actor the server owns (given to
    /// [`Routes::spawn`] and its kin) gets it on a poller's thread, any
    /// other address through the uppercut system. A message to an address
    /// nobody spawned is dropped, as uppercut drops it.
    ///
    /// With `--nats`, `name@node` is the actor `name` on that server and
    /// `topic/room` publishes to a topic's subscribers on every server:
    /// what crosses servers is bytes (`Vec<u8>`, `Bytes`, `String`, a text
    /// or binary [`Outgoing`](crate::Outgoing)) or an
    /// [`ActorRequest`](crate::ActorRequest); anything else, or a send NATS
    /// cannot take (not connected, past its `max_payload`), is refused
    /// here. While more than `--nats-buffer` waits to go to NATS, the call
    /// takes the message and then blocks until the backlog has drained to
    /// half of it, as a blocking socket write would: a program that sends
    /// faster than NATS takes is slowed, and loses nothing. (On one of the
    /// server's own threads, in a handler say, it never blocks.)
    ///
    /// [`Server::sender`] sends the same way from any thread.
    pub fn send(&self, address: &str, envelope: Envelope) -> Result<(), SendError> {
        self.sender().send(address, envelope)
    }

    /// Sends `message`, a serde value, to the actor at `address` as a typed
    /// message (JSON bytes, [`typed_message`](crate::typed_message)), which
    /// crosses servers as bytes do; a typed actor takes it with
    /// [`Routes::on_typed_message`](crate::Routes::on_typed_message), any
    /// actor with [`read_typed`](crate::read_typed).
    pub fn send_typed<T: serde::Serialize + ?Sized>(
        &self,
        address: &str,
        message: &T,
    ) -> Result<(), SendError> {
        self.sender().send_typed(address, message)
    }

    /// Publishes `message` (bytes, as [`Server::send`] takes them) to
    /// `topic`: its subscribers on this server get it now, those on the
    /// other servers through NATS.
    pub fn publish<M: Any + Send + fmt::Debug>(
        &self,
        topic: &str,
        message: M,
    ) -> Result<(), SendError> {
        self.sender().publish(topic, message)
    }

    /// A handle that sends as [`Server::send`] does, for other threads:
    /// cheap to clone, and `Send` and `Sync`. Sends after the server
    /// stopped are dropped.
    pub fn sender(&self) -> ServerSender {
        ServerSender {
            house: Arc::clone(&self.house),
        }
    }

    /// With `--nats`: whether every poller is connected to NATS and
    /// subscribed (so this server's actors are reachable from the others,
    /// and theirs from it).
    pub fn cluster_ready(&self) -> bool {
        self.cluster
            .as_ref()
            .is_some_and(|cluster| cluster.metrics().is_connected())
    }

    /// The cluster, with `--nats`.
    pub(crate) fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.as_ref()
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
    /// `grace`, closes whatever is left. True when every request was
    /// answered: false (and a warning) when a connection closed after
    /// `grace` had a request unanswered or a response not all sent.
    pub fn shutdown(mut self, grace: Duration) -> bool {
        // Placed names move on at once, not when their leases run out.
        if let Some(placed) = &self.placed {
            placed.release_all_and_wait(Duration::from_secs(1));
        }
        self.enter(Phase::Draining);
        let timed_out = matches!(
            self.ended.recv_timeout(grace),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
        self.stop_and_join();
        // Connections closed idle, or WebSockets, cut nothing short.
        let cut_short = timed_out && self.state.cut_short() > 0;
        if cut_short {
            warn!("shutdown timeout: closed the connections still busy");
        }
        !cut_short
    }

    /// Closes every connection now and waits for the system to end.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        // While the links still run, so that the releases reach NATS.
        if let Some(placed) = &self.placed {
            placed.release_all_and_wait(Duration::from_secs(1));
            placed.stop();
        }
        self.enter(Phase::Stopping);
        if let Some(system) = self.system.take() {
            let _ = system.join();
            // No poller runs now: the owned actors' threads stop too.
            self.house.stop();
        }
        // Last: what the actors wrote is committed before the file closes.
        if let Some(file) = &self.state_file {
            file.stop();
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

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .field("phase", &self.state.phase())
            .finish_non_exhaustive()
    }
}

/// How long a start waits to learn whether its node name is free: a
/// connect's timeout, the probe's echo and its window.
const NAME_WAIT: Duration = Duration::from_secs(8);

/// The cluster `config` describes, for pollers with `parkings` and the
/// actors `routes` spawns; each poller's link wakes its poller when work is
/// left for it.
fn join_cluster(
    config: &ClusterConfig,
    parkings: &[Arc<Parking>],
    routes: &Routes,
    listen: SocketAddr,
) -> io::Result<Arc<Cluster>> {
    let metrics = Arc::new(ClusterMetrics::new(parkings.len()));
    let ports = parkings
        .iter()
        .map(|parking| {
            let parking = Arc::clone(parking);
            let wake = Box::new(move || parking.wake_if_parked());
            Arc::new(LinkPort::new(config.buffer, Arc::clone(&metrics), wake))
        })
        .collect();
    let names = routes
        .spawns()
        .iter()
        .map(|spec| spec.address.clone())
        .collect();
    Cluster::new(config.clone(), ports, names, metrics, listen.to_string())
        .map(Arc::new)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// The placement of the placed kinds `routes` declare, if any: with leases
/// when the cluster keeps state in JetStream, else here alone.
pub(crate) fn start_placement(
    config: &Config,
    routes: &Routes,
    house: &ActorHouse,
    cluster: Option<&Arc<Cluster>>,
    state: Option<&(StateHost, Option<Arc<StateFile>>)>,
) -> io::Result<Option<Arc<Placed>>> {
    let kinds: Vec<(String, PlacedFactory)> = routes
        .spawns()
        .iter()
        .filter_map(|spec| match &spec.kind {
            SpawnKind::Placed(factory) => Some((spec.address.clone(), Arc::clone(factory))),
            _ => None,
        })
        .collect();
    if kinds.is_empty() {
        return Ok(None);
    }
    let shared = match (&config.state, cluster) {
        (Some(StateConfig::JetStream { timeout, replicas }), Some(cluster)) => {
            let ttl = u64::try_from(config.placement_lease.as_millis()).unwrap_or(u64::MAX);
            Some((Arc::clone(cluster), ttl.max(4), *timeout, *replicas))
        }
        _ => None,
    };
    let placed = Placed::start(PlacedConfig {
        kinds,
        store: state.map(|(host, _)| Arc::clone(&host.store)),
        state_metrics: state.map_or_else(Arc::default, |(host, _)| Arc::clone(&host.metrics)),
        cluster: shared,
        idle: config.placement_idle,
        pollers: config.pollers.max(1),
    })?;
    placed.attach(house.directory());
    house
        .directory()
        .place(Arc::clone(&placed) as Arc<dyn Placement>);
    Ok(Some(placed))
}

/// The state store `config` names, opened, and the embedded file (which
/// the server stops last) if that is the store.
fn open_state(
    config: &Config,
    cluster: Option<&Arc<Cluster>>,
) -> io::Result<Option<(StateHost, Option<Arc<StateFile>>)>> {
    let metrics = Arc::new(StateMetrics::default());
    match &config.state {
        None => Ok(None),
        Some(StateConfig::Dir(dir)) => {
            let file = Arc::new(StateFile::open(dir, Arc::clone(&metrics))?);
            let host = StateHost {
                store: Arc::clone(&file) as Arc<dyn StateStore>,
                metrics,
            };
            Ok(Some((host, Some(file))))
        }
        Some(StateConfig::JetStream { timeout, replicas }) => {
            let Some(cluster) = cluster else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "--state jetstream needs --nats (Config::cluster)",
                ));
            };
            let kv = JetStreamKv::new(
                Arc::clone(cluster),
                *timeout,
                *replicas,
                Arc::clone(&metrics),
            );
            let host = StateHost {
                store: kv as Arc<dyn StateStore>,
                metrics,
            };
            Ok(Some((host, None)))
        }
    }
}

/// `routes` inside the middleware the configuration asks for, ahead of
/// the routes' own: the HTTPS redirect first (a request sent elsewhere
/// needs no other), then the request id, so every other sees it.
fn server_middleware(routes: Routes, config: &Config) -> Routes {
    let routes = match config.cors.is_empty() {
        true => routes,
        false => {
            let origins: Vec<&str> = config.cors.iter().map(String::as_str).collect();
            let cors = Cors::origins(&origins)
                .allow_methods(&Method::ROUTABLE)
                .allow_any_header()
                .max_age(Duration::from_secs(600));
            routes.wrap_first(Arc::new(cors))
        }
    };
    let routes = match config.request_id {
        true => routes.wrap_first(Arc::new(RequestId::new())),
        false => routes,
    };
    // First of all: a request sent elsewhere needs no other.
    match config.redirect_https {
        Some(port) => routes.wrap_first(Arc::new(HttpsRedirect::to_port(port))),
        None => routes,
    }
}

/// `routes` with what `config` adds to them: the static directory, the
/// `--actor-route`s, `/io` with an upstream, the middleware of `--cors`
/// and `--request-id`, the body limit, the fields
/// every response carries and the WebSocket message limit.
pub(crate) fn configured(config: &Config, routes: Routes) -> io::Result<Routes> {
    let routes = match &config.static_dir {
        Some(dir) => routes.with_static_site(load_site(dir, config)?),
        None => routes,
    };
    let routes = config
        .actor_routes
        .iter()
        .fold(routes, |routes, (path, address)| {
            routes.actor(&Method::ROUTABLE, path, address)
        });
    let routes = match &config.upstream {
        Some(upstream) => routes.with_upstream(upstream.timeout),
        None => routes,
    };
    let routes = server_middleware(routes, config);
    let added = AddedFields::new(&config.headers).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a header for every response: {e}"),
        )
    })?;
    Ok(routes
        .with_max_body(config.max_body)
        .with_added_fields(added)
        .with_websocket_max_message(config.ws_max_message)
        .with_websocket_deflate(config.ws_deflate))
}

/// HTTP/3's QUIC transport: streams as HTTP/2's (128 requests open at
/// once), a few unidirectional ones (the client's control and QPACK
/// streams, and room for grease), the keep-alive timeout as the idle
/// timeout.
fn quic_transport(config: &Config) -> quinn_proto::TransportConfig {
    let mut transport = quinn_proto::TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(quinn_proto::VarInt::from_u32(128))
        .max_concurrent_uni_streams(quinn_proto::VarInt::from_u32(8))
        .max_idle_timeout(quinn_proto::IdleTimeout::try_from(config.timeouts.keepalive).ok());
    transport
}

/// What the access log calls this server: `Config::log_name`, else the
/// node name in a cluster, else the host name and the process's id.
fn log_name(config: &Config) -> String {
    if let Some(name) = &config.log_name {
        return name.clone();
    }
    match &config.cluster {
        Some(cluster) => cluster.node.clone(),
        None => format!("{}:{}", host_node_name(), std::process::id()),
    }
}

/// Loads the static directory `dir` as `config` asks. The dotfiles left
/// out are in its summary, for the program to say how to serve them.
fn load_site(dir: &std::path::Path, config: &Config) -> io::Result<Arc<StaticSite>> {
    let site = StaticSite::load(dir, config.static_limits, config.static_dotfiles)
        .map_err(|e| io::Error::other(format!("static directory {}: {e}", dir.display())))?;
    Ok(Arc::new(site))
}
