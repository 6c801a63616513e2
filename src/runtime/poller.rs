//! The poller actor: one mio event loop with its own SO_REUSEPORT listener.
//! It accepts connections, registers them on its `Poll`, and turns readiness
//! events into wakes of their connection actors, which live where the
//! dispatch mode keeps them (its `ConnectionSet`: run by the poller itself in
//! `local` dispatch, spawned into uppercut in `system`). Either way it wakes a
//! connection through the connection's mailbox (`wakeup`), so no connection
//! ever has more than one envelope queued.
//!
//! A connection accepted while this poller holds more than another is handed
//! to the least-loaded poller instead (`balance`); each round takes what
//! other pollers handed over.
//!
//! It also sweeps its connections' deadlines, pauses accepting when the
//! process runs out of descriptors, and drains on shutdown.
//!
//! The system has one uppercut worker per poller, and an idle poller holds
//! its worker blocked in `poll`, so no worker spins on an idle server. In
//! `system` dispatch a poller that has sent wakes gives its worker up until
//! the last of them is handled (see `wakeup`): a connection actor with an
//! envelope never waits for a poller blocked in `poll`.

use std::io::{self, ErrorKind};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use log::{debug, warn};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};
use uppercut::api::{AnyActor, AnySender, Envelope};

use crate::actors::port::PortWork;
use crate::cluster::link::{Link, NATS};
use crate::net::transport::Accepted;
use crate::routes::actor::ActorRequest;
use crate::routes::reply::Delivery;
use crate::runtime::connections::{ConnectionSet, Outbox, Turn};
use crate::runtime::lifecycle::Phase;
use crate::runtime::pool_threads::PoolThreads;
use crate::runtime::quic::{QuicEndpoint, QuicHandoff, QUIC, QUIC_CALLS};
use crate::runtime::shared::Shared;
use crate::runtime::wakeup::{Closed, Tick, HANGUP, MAIL, READY};
use crate::upstream::pool::{self as upstream, UpstreamPool};

pub(crate) const WAKER: Token = Token(usize::MAX - 2);
/// Listener `i` registers as `Token(FIRST_LISTENER - i)`.
const FIRST_LISTENER: usize = usize::MAX - 100;
/// The most listeners a server has.
pub(crate) const MAX_LISTENERS: usize = 64;

/// The token of listener `index`.
fn listener_token(index: usize) -> Token {
    Token(FIRST_LISTENER - index)
}

/// The listener `token` stands for, if it stands for one.
fn listener_of(token: Token) -> Option<usize> {
    let index = FIRST_LISTENER.checked_sub(token.0)?;
    (index < MAX_LISTENERS).then_some(index)
}

/// Longest a poller running until idle keeps its worker. Each yield
/// costs a spinning worker while the scheduler thread, which needs a core too,
/// hands the poller back; under load that spin can last a whole time slice.
/// The system has one worker per poller, so nothing waits for this one.
const SLICE: Duration = Duration::from_secs(1);
/// How long accepting pauses when the process is out of descriptors (as nginx
/// does), instead of failing the same accept in a hot loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(200);
const EVENTS_CAPACITY: usize = 1024;

mod accept;
mod yielding;

use yielding::YieldGauge;

pub(crate) struct Poller {
    poll: Poll,
    events: Option<Events>,
    /// Its listeners (each TLS or plain), with the others' of the same
    /// addresses sharing them by SO_REUSEPORT; empty once the server drains.
    listeners: Vec<(TcpListener, bool)>,
    shared: Arc<Shared>,
    connections: Box<dyn ConnectionSet>,
    /// What its connections sent it (`local` dispatch), and requests for its
    /// upstream pool (either), taken each round.
    inbox: Vec<Envelope>,
    next_sweep_ms: u64,
    /// Accepting resumes at this time, after running out of descriptors.
    accept_paused_until_ms: Option<u64>,
    upstream: Option<UpstreamPool>,
    /// Where to report the worker this poller runs on.
    pool_threads: Option<Arc<PoolThreads>>,
    /// Sockets other pollers handed over, taken each round (kept, so taking
    /// them allocates nothing).
    handed: Vec<Accepted>,
    /// Actors' answers, taken each round (kept, as above).
    deliveries: Vec<Delivery>,
    /// What the port held, in buffers kept from round to round.
    port_work: PortWork,
    /// Dropped with the poller, which tells the server it has stopped.
    running: Option<mpsc::Sender<()>>,
    /// With `--nats`: this poller's connection to NATS.
    link: Option<Link>,
    /// With `--http3`: this poller's UDP socket and QUIC connections.
    quic: Option<QuicEndpoint>,
    /// Datagrams other pollers handed to this one.
    quic_handoff: Option<Arc<QuicHandoff>>,
    /// Whether its yields after busy rounds give the core away.
    yields: YieldGauge,
}

impl Poller {
    /// A poller accepting on `listeners` (each TLS or not).
    pub(crate) fn new(
        poll: Poll,
        mut listeners: Vec<(TcpListener, bool)>,
        shared: Arc<Shared>,
        connections: Box<dyn ConnectionSet>,
        upstream: Option<UpstreamPool>,
    ) -> io::Result<Poller> {
        for (index, (listener, _)) in listeners.iter_mut().enumerate() {
            poll.registry()
                .register(listener, listener_token(index), Interest::READABLE)?;
        }
        Ok(Poller {
            poll,
            events: Some(Events::with_capacity(EVENTS_CAPACITY)),
            listeners,
            connections,
            inbox: Vec::new(),
            shared,
            next_sweep_ms: 0,
            accept_paused_until_ms: None,
            upstream,
            pool_threads: None,
            handed: Vec::new(),
            deliveries: Vec::new(),
            port_work: PortWork::default(),
            running: None,
            link: None,
            quic: None,
            quic_handoff: None,
            yields: YieldGauge::default(),
        })
    }

    /// Joins the cluster through `link`, which starts connecting at once.
    pub(crate) fn with_link(mut self, link: Option<Link>) -> Poller {
        self.link = link;
        if let Some(link) = &mut self.link {
            link.tick(self.poll.registry(), self.shared.now_ms());
        }
        self
    }

    /// Serves HTTP/3 through `quic`, taking what other pollers hand over
    /// through `handoff`.
    pub(crate) fn with_quic(
        mut self,
        quic: Option<QuicEndpoint>,
        handoff: Arc<QuicHandoff>,
    ) -> Poller {
        if quic.is_some() {
            self.quic_handoff = Some(handoff);
        }
        self.quic = quic;
        self
    }

    /// Reports each worker this poller runs on to `pool_threads`, which
    /// tells uppercut's scheduler thread from the workers by it.
    pub(crate) fn report_to(&mut self, pool_threads: Arc<PoolThreads>) {
        self.pool_threads = Some(pool_threads);
    }

    /// Keeps `running` until uppercut drops this poller, after it stopped.
    pub(crate) fn hold_until_dropped(&mut self, running: mpsc::Sender<()>) {
        self.running = Some(running);
    }

    /// This poller's actor address.
    pub(crate) fn address(&self) -> &str {
        self.shared.poller_address()
    }

    /// Polls once and handles what it finds; false when nothing was ready.
    /// A poller without connections has nothing to sweep, so it blocks until a
    /// connection, a waker or the end of an accept pause: an idle server does
    /// not hand its workers back to the scheduler at all. A draining poller
    /// without connections only looks: no connection can come (its
    /// listener is closed, hand-offs are refused), so a block would last
    /// until the server stops, well past the drain. It finds itself so
    /// when the answers it handed on in a round closed its last connection.
    /// With `block` false it only looks, without waiting.
    fn poll_once(&mut self, block: bool, sender: &mut dyn AnySender) -> bool {
        let mut events = self
            .events
            .take()
            .unwrap_or_else(|| Events::with_capacity(EVENTS_CAPACITY));
        let sweep = self.shared.timeouts().sweep;
        let drained = self.listeners.is_empty()
            && self.connections.is_empty()
            && self.quic.as_ref().is_none_or(QuicEndpoint::is_idle);
        // Mail or a socket handed over while this poller blocked would wait
        // for it (see `wakeup::Parking`).
        let shared = &self.shared;
        let link = &self.link;
        let handoff = &self.quic_handoff;
        let block = block
            && !drained
            && shared.parking().park(|| {
                shared.mail().is_pending()
                    || shared.balance().has_queued(shared.index())
                    || shared.replies().is_pending()
                    || shared.port().is_pending()
                    || link.as_ref().is_some_and(Link::is_pending)
                    || handoff
                        .as_ref()
                        .is_some_and(|handoff| handoff.has_queued(shared.index()))
            });
        let holds =
            !self.connections.is_empty() || self.quic.as_ref().is_some_and(|quic| !quic.is_idle());
        let timeout = match block {
            true => holds.then_some(sweep),
            false => Some(Duration::ZERO),
        };
        // A QUIC timer due (loss, acknowledgement, idle) wakes it too.
        let timeout = match self.quic.as_mut().and_then(QuicEndpoint::next_timeout) {
            Some(due) => {
                let wait = due.saturating_duration_since(Instant::now());
                Some(wait.min(timeout.unwrap_or(Duration::MAX)))
            }
            None => timeout,
        };
        // A reconnect due wakes the poller too.
        let timeout = match self.link.as_ref().and_then(Link::next_deadline_ms) {
            Some(due) => {
                let wait = Duration::from_millis(due.saturating_sub(self.shared.now_ms()));
                Some(wait.min(timeout.unwrap_or(Duration::MAX)))
            }
            None => timeout,
        };
        let timeout = match self.accept_paused_until_ms {
            Some(until) => {
                let pause = until.saturating_sub(self.shared.now_ms());
                Some(Duration::from_millis(pause).min(timeout.unwrap_or(Duration::MAX)))
            }
            None => timeout,
        };
        if let Err(e) = self.poll.poll(&mut events, timeout) {
            if e.kind() != ErrorKind::Interrupted {
                warn!("poll failed: {e}");
            }
        }
        if block {
            self.shared.parking().unpark();
        }
        let now_ms = self.shared.refresh_time();
        let found = !events.is_empty();
        for event in events.iter() {
            match event.token() {
                WAKER => {}
                token if listener_of(token).is_some() => {
                    if let Some(index) = listener_of(token) {
                        self.accept(index, sender);
                    }
                }
                QUIC => {
                    if let Some(quic) = &mut self.quic {
                        quic.on_readable();
                    }
                }
                NATS => {
                    if let Some(link) = &mut self.link {
                        let context = self.shared.actor_context(&*sender);
                        link.on_event(event, self.poll.registry(), now_ms, &context);
                    }
                }
                token if token.0 >= upstream::FIRST_TOKEN => {
                    if let Some(pool) = &mut self.upstream {
                        pool.on_event(token, self.poll.registry());
                    }
                }
                Token(key) => {
                    let hung_up = event.is_read_closed() || event.is_error();
                    let bits = if hung_up { HANGUP } else { READY };
                    let mut out = Outbox {
                        sender: &mut *sender,
                        inbox: &mut self.inbox,
                    };
                    self.connections.notify(key, bits, &mut out);
                }
            }
        }
        self.events = Some(events);
        let found = self.take_handed(sender) || found;
        let found = match &mut self.quic {
            Some(quic) => quic.run(&self.shared, &*sender, &mut self.inbox) || found,
            None => found,
        };
        if self
            .accept_paused_until_ms
            .is_some_and(|until| now_ms >= until)
        {
            self.accept_paused_until_ms = None;
            for index in 0..self.listeners.len() {
                self.accept(index, sender);
            }
        }
        if now_ms >= self.next_sweep_ms {
            self.next_sweep_ms = now_ms + sweep.as_millis() as u64;
            let mut out = Outbox {
                sender: &mut *sender,
                inbox: &mut self.inbox,
            };
            self.connections.sweep(now_ms, &mut out);
            if let Some(pool) = &mut self.upstream {
                pool.expire(now_ms, self.poll.registry());
            }
            if let Some(link) = &mut self.link {
                link.sweep(now_ms);
            }
            if let Some(quic) = &mut self.quic {
                quic.sweep(now_ms, &self.shared, &*sender, &mut self.inbox);
            }
        }
        if let Some(link) = &mut self.link {
            link.tick(self.poll.registry(), now_ms);
        }
        self.settle_calls(sender);
        found
    }

    /// Passes connections' requests to the upstream pool, runs the owned
    /// actors other threads left for this poller, and passes actors'
    /// answers to the connections, until nothing is left (an answer can
    /// release the next request of a pipeline).
    fn settle_calls(&mut self, sender: &mut dyn AnySender) {
        loop {
            self.run_port(sender);
            let now_ms = self.shared.now_ms();
            for envelope in self.inbox.drain(..) {
                if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
                    match &mut self.upstream {
                        Some(pool) => pool.submit(*request, now_ms, self.poll.registry()),
                        // Dropped unanswered: 502.
                        None => drop(request),
                    }
                }
            }
            let sent = match &mut self.link {
                Some(link) => link.settle(self.poll.registry(), now_ms),
                None => false,
            };
            let mut deliveries = std::mem::take(&mut self.deliveries);
            self.shared.replies().take(&mut deliveries);
            let found = sent || !deliveries.is_empty();
            for delivery in deliveries.drain(..) {
                if delivery.key == QUIC_CALLS {
                    if let Some(quic) = &mut self.quic {
                        quic.deliver(delivery, &self.shared, &*sender, &mut self.inbox);
                    }
                    continue;
                }
                let mut out = Outbox {
                    sender: &mut *sender,
                    inbox: &mut self.inbox,
                };
                self.connections.deliver(delivery, &mut out);
            }
            self.deliveries = deliveries;
            if !found {
                if let Some(pool) = &self.upstream {
                    pool.publish_links();
                }
                return;
            }
        }
    }

    /// Runs what other threads left in this poller's port: actors with
    /// queued messages nobody runs, and sends into the uppercut system.
    fn run_port(&mut self, sender: &mut dyn AnySender) {
        let shared = &self.shared;
        let work = &mut self.port_work;
        shared.port().take(work);
        if !work.ready.is_empty() {
            let context = shared.actor_context(&*sender);
            for cell in work.ready.drain(..) {
                context.run_queued(&cell);
            }
        }
        if !work.relay.is_empty() {
            for relayed in work.relay.drain(..) {
                relayed.perform(&*sender);
            }
            shared.port().note_system_send();
        }
        if !work.mail.is_empty() {
            let mut out = Outbox {
                sender: &mut *sender,
                inbox: &mut self.inbox,
            };
            for key in work.mail.drain(..) {
                self.connections.notify(key, MAIL, &mut out);
            }
        }
    }

    /// Stops accepting and wakes every connection, which closes once it has
    /// no request in progress (the phase tells it).
    fn begin_drain(&mut self, sender: &mut dyn AnySender) {
        if self.listeners.is_empty() {
            return;
        }
        for (mut listener, _) in self.listeners.drain(..) {
            if let Err(e) = self.poll.registry().deregister(&mut listener) {
                debug!("deregister listener: {e}");
            }
        }
        self.close_handoffs();
        if let Some(link) = &mut self.link {
            link.begin_drain(self.poll.registry(), self.shared.now_ms());
        }
        if let Some(quic) = &mut self.quic {
            quic.begin_drain(&self.shared, &*sender, &mut self.inbox);
        }
        let mut out = Outbox {
            sender,
            inbox: &mut self.inbox,
        };
        self.connections.wake_all(&mut out);
    }

    /// Takes no more hand-offs, and closes those not yet taken.
    fn close_handoffs(&mut self) {
        let closed = self.shared.balance().close(self.shared.index());
        self.shared.release(closed);
    }

    /// Runs the loop until idle, the slice is used up, or the phase
    /// changes; or for one round after an actor here sent into the uppercut
    /// system, where the message needs a worker to run on.
    ///
    /// After a round that found work the poller yields its core once
    /// before it polls again: where clients share the cores (or the box
    /// runs other work), the clients just answered often send their next
    /// requests meanwhile, and finding them costs a poll where blocking
    /// would cost a sleep and a wake-up. On a core nothing else wants, the
    /// yield returns at once and is a system call for nothing, so the
    /// poller yields only as often as its yields find someone to give the
    /// core to (`yielding`). Either way the next poll is one `epoll_wait`,
    /// which returns at once when events wait and blocks when none do.
    fn run_until_idle(&mut self, sender: &mut dyn AnySender) {
        let slice_end = Instant::now() + SLICE;
        let phase = self.shared.phase();
        let mut found = false;
        loop {
            if found && self.yields.should_yield() {
                let began = Instant::now();
                thread::yield_now();
                self.yields.yielded(began.elapsed());
            }
            found = self.poll_once(true, sender);
            if !found
                || self.shared.port().take_lend()
                || Instant::now() >= slice_end
                || self.shared.phase() != phase
                || (phase == Phase::Draining
                    && self.connections.is_empty()
                    && self.quic.as_ref().is_none_or(QuicEndpoint::is_idle))
            {
                return;
            }
        }
    }

    /// Closes every connection and stops this actor.
    fn stop(&mut self, sender: &mut dyn AnySender) {
        self.close_handoffs();
        if let Some(mut quic) = self.quic.take() {
            quic.stop(&self.shared);
            quic.deregister(self.poll.registry());
        }
        if let Some(link) = &mut self.link {
            link.stop(self.poll.registry());
        }
        self.connections.stop_all(sender);
        sender.stop(sender.me());
    }
}

impl AnyActor for Poller {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        if let Some(pool_threads) = &self.pool_threads {
            pool_threads.report_worker();
        }
        // Mail from a `system` connection (see `wakeup`).
        if let Some(Closed(token)) = envelope.message.downcast_ref::<Closed>() {
            self.shared.mail().received();
            // The actor stopped itself; the token is free once it is known here.
            if self.connections.forget(*token) {
                self.shared.release(1);
            }
            return;
        }
        if envelope.message.is::<ActorRequest>() {
            self.shared.mail().received();
            self.inbox.push(envelope);
            return self.settle_calls(sender);
        }
        if !envelope.message.is::<Tick>() {
            return;
        }
        let may_stop = self.connections.may_stop();
        match self.shared.phase() {
            Phase::Running => {}
            Phase::Draining => {
                self.begin_drain(sender);
                let quic_idle = self.quic.as_ref().is_none_or(QuicEndpoint::is_idle);
                if self.connections.is_empty() && quic_idle && may_stop {
                    return self.stop(sender);
                }
            }
            Phase::Stopping if may_stop => return self.stop(sender),
            // Wake nothing more; come back once the wakes out are handled.
            Phase::Stopping => return self.tick(sender),
        }
        match self.connections.turn() {
            Turn::UntilIdle => self.run_until_idle(sender),
            Turn::OneRound { may_block } => {
                self.poll_once(may_block, sender);
            }
        }
        self.tick(sender);
    }
}

impl Poller {
    /// Comes back to this poller through the scheduler.
    fn tick(&self, sender: &mut dyn AnySender) {
        self.shared.count_envelope();
        sender.send(sender.me(), Envelope::of(Tick));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::SystemTime;

    use mio::Waker;
    use uppercut::api::Actor;

    use super::*;
    use crate::actors::house::ActorHouse;
    use crate::actors::port::PollerPort;
    use crate::config::Timeouts;
    use crate::routes::Routes;
    use crate::runtime::balance::Balance;
    use crate::runtime::connections::Hosting;
    use crate::runtime::lifecycle::ServerState;
    use crate::runtime::local_dispatch::LocalHosting;
    use crate::runtime::shared::PollerParts;
    use crate::runtime::wakeup::Parking;

    /// Sends nowhere: a poller without connections sends nothing.
    struct Nowhere;

    impl AnySender for Nowhere {
        fn me(&self) -> &str {
            "poller-0"
        }
        fn send(&self, _address: &str, _envelope: Envelope) {}
        fn spawn(&self, _address: &str, _f: Box<dyn FnOnce() -> Actor>) {}
        fn delay(&self, _address: &str, _envelope: Envelope, _duration: Duration) {}
        fn stop(&self, _address: &str) {}
        fn log(&mut self, _message: &str) {}
        fn metric(&mut self, _name: &str, _value: f64) {}
        fn now(&self) -> SystemTime {
            SystemTime::now()
        }
    }

    /// The one poller of a server with no routes, listening on a free
    /// loopback port, and that server's state.
    fn lone_poller() -> (Poller, Arc<ServerState>) {
        let poll = Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).unwrap());
        let parking = Arc::new(Parking::new(waker));
        let port = Arc::new(PollerPort::new(Box::new(|| {})));
        let routes = Arc::new(Routes::new());
        let server = Arc::new(ServerState::new(16));
        let house = ActorHouse::start(&routes, vec![Arc::clone(&port)], None, None).unwrap();
        let shared = Arc::new(Shared::new(PollerParts {
            index: 0,
            routes,
            timeouts: Timeouts::default(),
            registry: poll.registry().try_clone().unwrap(),
            server: Arc::clone(&server),
            house: Arc::new(house),
            port,
            parking: Arc::clone(&parking),
            access_log: None,
            balance: Arc::new(Balance::new(&[parking])),
            metrics: None,
            tls: None,
            cluster: None,
            http2: true,
            http2_only: false,
        }));
        let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let connections = LocalHosting.connections(Arc::clone(&shared));
        let poller = Poller::new(poll, vec![(listener, false)], shared, connections, None).unwrap();
        (poller, server)
    }

    /// Draining, a poller whose connections have all closed has nothing
    /// to wait for: asked to block, it only looks. (Blocking, with no
    /// connection to sweep, only the server's stop would wake it.)
    #[test]
    fn a_drained_poller_does_not_block() {
        let (mut poller, server) = lone_poller();
        server.set_phase(Phase::Draining);
        poller.begin_drain(&mut Nowhere);
        let (polled, returned) = mpsc::channel();
        thread::spawn(move || {
            let found = poller.poll_once(true, &mut Nowhere);
            let _ = polled.send(found);
        });
        let found = returned.recv_timeout(Duration::from_secs(10));
        assert_eq!(found, Ok(false), "the poll returned, having found nothing");
    }
}
