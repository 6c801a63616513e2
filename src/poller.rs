//! The poller actor: one mio event loop with its own SO_REUSEPORT listener.
//! It accepts connections, registers them on its `Poll`, and turns readiness
//! events into envelopes for their connection actors, in one of two ways:
//!
//! - `local`: the poller owns its connections in a slab keyed by token and
//!   hands each envelope to the actor directly, through its own `AnySender`,
//!   so a request never crosses the uppercut scheduler.
//! - `system`: each connection is an actor spawned into the uppercut system,
//!   and every envelope travels through the scheduler.
//!
//! It also sweeps its connections' deadlines once a second, pauses accepting
//! when the process runs out of descriptors, and drains on shutdown. A poller
//! never keeps its worker for long: it blocks in `poll` with a bounded timeout,
//! then sends itself a `Tick` and returns, so other actors can have the worker.

use std::io::{self, ErrorKind};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use log::{debug, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use uppercut::api::{Actor, AnyActor, AnySender, Envelope};

use crate::config::Dispatch;
use crate::connection::{Closed, Connection, Expire, Hangup, Ready, Shared};
use crate::local_dispatch::deliver_locally;
use crate::server::Phase;
use crate::slab::Slab;
use crate::timeouts::{is_past, SWEEP_INTERVAL};
use crate::upstream::{self, UpstreamPool, UpstreamReply, UpstreamRequest};

pub const LISTENER: Token = Token(usize::MAX - 1);
pub const WAKER: Token = Token(usize::MAX - 2);

/// Longest a poller with connections blocks in `poll` before handing its
/// worker back to the scheduler: its connections' deadlines are swept once a
/// second. Each hand-back costs about 3 ms of a worker spinning on `try_recv`
/// while the scheduler wakes up, so it is no more often than that. (The Date
/// cache is refreshed after every wake-up, and a stop wakes the poller at
/// once, so neither depends on this timeout.)
const POLL_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest a busy `local` poller keeps its worker before yielding. Each yield
/// costs a spinning worker while the scheduler thread, which needs a core too,
/// hands the poller back; under load that spin can last a whole time slice.
/// The system has one worker per poller, so nothing waits for this one.
const LOCAL_SLICE: Duration = Duration::from_secs(1);
/// How long accepting pauses when the process is out of descriptors (as nginx
/// does), instead of failing the same accept in a hot loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(200);
const EVENTS_CAPACITY: usize = 1024;

/// The poller's own message: run the event loop for another slice.
#[derive(Debug)]
pub struct Tick;

/// A connection actor in `system` dispatch, as its poller knows it.
struct SpawnedConnection {
    address: String,
    deadline: Arc<AtomicU64>,
}

pub struct Poller {
    poll: Poll,
    events: Option<Events>,
    /// None once the server drains.
    listener: Option<TcpListener>,
    shared: Arc<Shared>,
    /// `local` dispatch: the connection actors themselves.
    local: Slab<Connection>,
    /// `system` dispatch: where the connection actors are.
    system: Slab<SpawnedConnection>,
    /// Numbers `system` connection addresses, so no address is ever reused
    /// while the scheduler may still hold an actor under it.
    spawned: u64,
    /// `system` dispatch: polls in a row that found nothing (drives the backoff).
    idle_polls: u32,
    next_sweep_ms: u64,
    /// Accepting resumes at this time, after running out of descriptors.
    accept_paused_until_ms: Option<u64>,
    /// Reused by each sweep, so sweeping allocates nothing.
    expired: Vec<usize>,
    upstream: Option<UpstreamPool>,
    /// `local` dispatch: what connections sent to this poller.
    inbox: Vec<Envelope>,
}

impl Poller {
    pub fn new(
        poll: Poll,
        mut listener: TcpListener,
        shared: Arc<Shared>,
        upstream: Option<UpstreamPool>,
    ) -> io::Result<Poller> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        Ok(Poller {
            poll,
            events: Some(Events::with_capacity(EVENTS_CAPACITY)),
            listener: Some(listener),
            shared,
            local: Slab::default(),
            system: Slab::default(),
            spawned: 0,
            idle_polls: 0,
            next_sweep_ms: 0,
            accept_paused_until_ms: None,
            expired: Vec::new(),
            upstream,
            inbox: Vec::new(),
        })
    }

    /// This poller's actor address.
    pub fn address(&self) -> &str {
        &self.shared.poller
    }

    fn connection_count(&self) -> usize {
        self.local.len() + self.system.len()
    }

    /// Polls once and handles what it finds; false when nothing was ready.
    /// A poller without connections has nothing to sweep, so it blocks until a
    /// connection, a waker or the end of an accept pause: an idle server does
    /// not hand its workers back to the scheduler at all.
    fn poll_once(&mut self, timeout: Duration, sender: &mut dyn AnySender) -> bool {
        let mut events = self
            .events
            .take()
            .unwrap_or_else(|| Events::with_capacity(EVENTS_CAPACITY));
        let timeout = (self.connection_count() > 0).then_some(timeout);
        let timeout = match self.accept_paused_until_ms {
            Some(until) => {
                let pause = until.saturating_sub(self.shared.clock.now_ms());
                Some(Duration::from_millis(pause).min(timeout.unwrap_or(Duration::MAX)))
            }
            None => timeout,
        };
        if let Err(e) = self.poll.poll(&mut events, timeout) {
            if e.kind() != ErrorKind::Interrupted {
                warn!("poll failed: {e}");
            }
        }
        let now_ms = self.shared.clock.refresh();
        self.shared.date.refresh(SystemTime::now());
        let found = !events.is_empty();
        for event in events.iter() {
            match event.token() {
                LISTENER => self.accept(sender),
                WAKER => {}
                token if token.0 >= upstream::FIRST_TOKEN => {
                    if let Some(pool) = &mut self.upstream {
                        pool.on_event(token, self.poll.registry());
                    }
                }
                Token(key) if event.is_read_closed() || event.is_error() => {
                    self.deliver(key, Envelope::of(Hangup), sender)
                }
                Token(key) => self.deliver(key, Envelope::of(Ready), sender),
            }
        }
        self.events = Some(events);
        if self
            .accept_paused_until_ms
            .is_some_and(|until| now_ms >= until)
        {
            self.accept_paused_until_ms = None;
            self.accept(sender);
        }
        if now_ms >= self.next_sweep_ms {
            self.next_sweep_ms = now_ms + SWEEP_INTERVAL.as_millis() as u64;
            self.sweep(now_ms, sender);
        }
        self.settle_upstream(sender);
        found
    }

    /// Passes connections' requests to the upstream pool and its answers
    /// back, until neither is left (an answer can release the next request
    /// of a pipeline).
    fn settle_upstream(&mut self, sender: &mut dyn AnySender) {
        loop {
            let Some(pool) = &mut self.upstream else {
                return;
            };
            let now_ms = self.shared.clock.now_ms();
            for envelope in self.inbox.drain(..) {
                if let Ok(request) = envelope.message.downcast::<UpstreamRequest>() {
                    pool.submit(*request, now_ms, self.poll.registry());
                }
            }
            let replies = pool.take_replies();
            if replies.is_empty() {
                return;
            }
            for (request, result) in replies {
                let reply = Envelope::of(UpstreamReply {
                    id: request.id,
                    result,
                });
                match self.shared.dispatch {
                    Dispatch::Local => self.deliver(request.token.0, reply, sender),
                    Dispatch::System => sender.send(&request.reply_to, reply),
                }
            }
        }
    }

    fn accept(&mut self, sender: &mut dyn AnySender) {
        while self.accept_paused_until_ms.is_none() {
            let Some(listener) = &self.listener else {
                return;
            };
            match listener.accept() {
                Ok((socket, _)) => self.adopt(socket, sender),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if is_out_of_resources(&e) => {
                    warn!("accept: {e}; pausing accepts for {ACCEPT_BACKOFF:?}");
                    let resume = self.shared.clock.now_ms() + ACCEPT_BACKOFF.as_millis() as u64;
                    self.accept_paused_until_ms = Some(resume);
                }
                // The client gave up before we accepted (ECONNABORTED and the like).
                Err(e) => debug!("accept: {e}"),
            }
        }
    }

    fn adopt(&mut self, mut socket: TcpStream, sender: &mut dyn AnySender) {
        // Past the limit the connection is closed at once: dropped here.
        if !self.shared.server.admit() {
            return;
        }
        if let Err(e) = socket.set_nodelay(true) {
            debug!("set_nodelay: {e}");
        }
        let key = match self.shared.dispatch {
            Dispatch::Local => self.local.vacant_key(),
            Dispatch::System => self.system.vacant_key(),
        };
        let token = Token(key);
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut socket, token, Interest::READABLE)
        {
            warn!("register failed: {e}");
            self.shared.server.release(1);
            return;
        }
        let connection = Connection::new(socket, token, Arc::clone(&self.shared));
        match self.shared.dispatch {
            Dispatch::Local => {
                self.local.insert(connection);
            }
            Dispatch::System => {
                self.spawned += 1;
                let address = format!("{}/{}", self.shared.poller, self.spawned);
                let deadline = connection.deadline();
                let actor: Box<dyn FnOnce() -> Actor> = Box::new(move || Box::new(connection));
                sender.spawn(&address, actor);
                self.system.insert(SpawnedConnection { address, deadline });
            }
        }
    }

    fn deliver(&mut self, key: usize, envelope: Envelope, sender: &mut dyn AnySender) {
        match self.shared.dispatch {
            Dispatch::Local => {
                let Some(connection) = self.local.get_mut(key) else {
                    return;
                };
                if !deliver_locally(connection, envelope, sender, &mut self.inbox) {
                    // Dropping the connection closes its socket, which also
                    // removes it from the poll set.
                    self.local.remove(key);
                    self.shared.server.release(1);
                }
            }
            Dispatch::System => {
                if let Some(connection) = self.system.get(key) {
                    sender.send(&connection.address, envelope);
                }
            }
        }
    }

    /// Wakes every connection whose deadline has passed: it decides itself
    /// whether it timed out, as it may have moved on since it published it.
    fn sweep(&mut self, now_ms: u64, sender: &mut dyn AnySender) {
        self.expired.clear();
        let local = self
            .local
            .iter()
            .filter(|(_, c)| c.is_past_deadline(now_ms));
        self.expired.extend(local.map(|(key, _)| key));
        let system = self
            .system
            .iter()
            .filter(|(_, c)| is_past(&c.deadline, now_ms));
        self.expired.extend(system.map(|(key, _)| key));
        for index in 0..self.expired.len() {
            let key = self.expired[index];
            self.deliver(key, Envelope::of(Expire), sender);
        }
        if let Some(pool) = &mut self.upstream {
            pool.expire(now_ms, self.poll.registry());
        }
    }

    /// Stops accepting and wakes every connection, which closes once it has
    /// no request in progress (the phase tells it).
    fn begin_drain(&mut self, sender: &mut dyn AnySender) {
        let Some(mut listener) = self.listener.take() else {
            return;
        };
        if let Err(e) = self.poll.registry().deregister(&mut listener) {
            debug!("deregister listener: {e}");
        }
        drop(listener);
        let keys: Vec<usize> = match self.shared.dispatch {
            Dispatch::Local => self.local.iter().map(|(key, _)| key).collect(),
            Dispatch::System => self.system.iter().map(|(key, _)| key).collect(),
        };
        for key in keys {
            self.deliver(key, Envelope::of(Ready), sender);
        }
    }

    /// `local`: run the loop until idle, the slice is used up, or the phase changes.
    fn run_local(&mut self, sender: &mut dyn AnySender) {
        let slice_end = Instant::now() + LOCAL_SLICE;
        let phase = self.shared.server.phase();
        while self.poll_once(POLL_TIMEOUT, sender)
            && Instant::now() < slice_end
            && self.shared.server.phase() == phase
            && !(phase == Phase::Draining && self.local.is_empty())
        {}
    }

    /// `system`: poll once. The connection actors need this worker too, so
    /// do not block while they may have work, and back off when idle: 0, 1,
    /// 10, 100 ms, then 1 s. Each empty poll is a hand-back costing a few ms
    /// of spinning, so the ramp is steep (doubling from 1 ms took 11 of them
    /// to reach 1 s, 1.6% of a core in the first 5 s idle).
    fn run_system(&mut self, sender: &mut dyn AnySender) {
        let timeout = match self.idle_polls {
            0 => Duration::ZERO,
            n => Duration::from_millis(10u64.pow(n.min(4) - 1)).min(POLL_TIMEOUT),
        };
        if self.poll_once(timeout, sender) {
            self.idle_polls = 0;
        } else {
            self.idle_polls = self.idle_polls.saturating_add(1);
        }
    }

    /// Closes every connection and stops this actor.
    fn stop(&mut self, sender: &mut dyn AnySender) {
        self.shared.server.release(self.connection_count());
        drop(self.local.drain());
        for connection in self.system.drain() {
            sender.stop(&connection.address);
        }
        sender.stop(sender.me());
    }
}

impl AnyActor for Poller {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        if let Some(Closed(token)) = envelope.message.downcast_ref::<Closed>() {
            if self.system.remove(token.0).is_some() {
                self.shared.server.release(1);
            }
            return;
        }
        if envelope.message.is::<UpstreamRequest>() {
            self.inbox.push(envelope);
            return self.settle_upstream(sender);
        }
        if !envelope.message.is::<Tick>() {
            return;
        }
        match self.shared.server.phase() {
            Phase::Running => {}
            Phase::Draining => {
                self.begin_drain(sender);
                if self.connection_count() == 0 {
                    return self.stop(sender);
                }
            }
            Phase::Stopping => return self.stop(sender),
        }
        match self.shared.dispatch {
            Dispatch::Local => self.run_local(sender),
            Dispatch::System => self.run_system(sender),
        }
        sender.send(sender.me(), Envelope::of(Tick));
    }
}

/// Errors that mean the process or system is out of descriptors or memory:
/// accepting again at once would fail again.
fn is_out_of_resources(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}
