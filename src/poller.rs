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
//! A poller never keeps its worker thread for long: it blocks in `poll` with a
//! bounded timeout, works for at most a time slice, then sends itself a `Tick`
//! and returns, so the scheduler can run other actors on that worker.

use std::cell::Cell;
use std::io::ErrorKind;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use log::{debug, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use uppercut::api::{Actor, AnyActor, AnySender, Envelope};

use crate::config::Dispatch;
use crate::connection::{Closed, Connection, Ready, Shared};
use crate::slab::Slab;

pub const LISTENER: Token = Token(usize::MAX - 1);
pub const WAKER: Token = Token(usize::MAX - 2);

/// Longest a poller blocks in `poll` before handing its worker back to the
/// scheduler. Each hand-back costs about 3 ms of a worker spinning on
/// `try_recv` while the scheduler wakes up, so an idle poller makes it only
/// once a second. (The Date cache is refreshed after every wake-up, and a stop
/// wakes the poller at once, so neither depends on this timeout.)
const POLL_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest a busy `local` poller keeps its worker before yielding. Each yield
/// costs a spinning worker while the scheduler thread, which needs a core too,
/// hands the poller back; under load that spin can last a whole time slice.
/// The system has one worker per poller, so nothing waits for this one.
const LOCAL_SLICE: Duration = Duration::from_secs(1);
const EVENTS_CAPACITY: usize = 1024;

/// The poller's own message: run the event loop for another slice.
#[derive(Debug)]
pub struct Tick;

pub struct Poller {
    poll: Poll,
    events: Option<Events>,
    listener: TcpListener,
    shared: Arc<Shared>,
    dispatch: Dispatch,
    /// `local` dispatch: the connection actors themselves.
    local: Slab<Connection>,
    /// `system` dispatch: the addresses of the connection actors.
    system: Slab<String>,
    /// Numbers `system` connection addresses, so no address is ever reused
    /// while the scheduler may still hold an actor under it.
    spawned: u64,
    /// `system` dispatch: polls in a row that found nothing (drives the backoff).
    idle_polls: u32,
}

impl Poller {
    pub fn new(
        poll: Poll,
        listener: TcpListener,
        shared: Arc<Shared>,
        dispatch: Dispatch,
    ) -> std::io::Result<Poller> {
        let mut poller = Poller {
            poll,
            events: Some(Events::with_capacity(EVENTS_CAPACITY)),
            listener,
            shared,
            dispatch,
            local: Slab::default(),
            system: Slab::default(),
            spawned: 0,
            idle_polls: 0,
        };
        poller
            .poll
            .registry()
            .register(&mut poller.listener, LISTENER, Interest::READABLE)?;
        Ok(poller)
    }

    /// Polls once and handles what it finds; false when nothing was ready.
    fn poll_once(&mut self, timeout: Duration, sender: &mut dyn AnySender) -> bool {
        let mut events = self
            .events
            .take()
            .unwrap_or_else(|| Events::with_capacity(EVENTS_CAPACITY));
        if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
            if e.kind() != ErrorKind::Interrupted {
                warn!("poll failed: {e}");
            }
        }
        self.shared.date.refresh(SystemTime::now());
        let found = !events.is_empty();
        for event in events.iter() {
            match event.token() {
                LISTENER => self.accept(sender),
                WAKER => {}
                Token(key) => self.deliver(key, sender),
            }
        }
        self.events = Some(events);
        found
    }

    fn accept(&mut self, sender: &mut dyn AnySender) {
        loop {
            match self.listener.accept() {
                Ok((socket, _)) => self.adopt(socket, sender),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    warn!("accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn adopt(&mut self, mut socket: TcpStream, sender: &mut dyn AnySender) {
        if let Err(e) = socket.set_nodelay(true) {
            debug!("set_nodelay: {e}");
        }
        let key = match self.dispatch {
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
            return;
        }
        let connection = Connection::new(socket, token, Arc::clone(&self.shared));
        match self.dispatch {
            Dispatch::Local => {
                self.local.insert(connection);
            }
            Dispatch::System => {
                self.spawned += 1;
                let address = format!("{}/{}", self.shared.poller, self.spawned);
                let actor: Box<dyn FnOnce() -> Actor> = Box::new(move || Box::new(connection));
                sender.spawn(&address, actor);
                self.system.insert(address);
            }
        }
    }

    fn deliver(&mut self, key: usize, sender: &mut dyn AnySender) {
        match self.dispatch {
            Dispatch::Local => {
                let Some(connection) = self.local.get_mut(key) else {
                    return;
                };
                if !deliver_locally(connection, sender) {
                    // Dropping the connection closes its socket, which also
                    // removes it from the poll set.
                    self.local.remove(key);
                }
            }
            Dispatch::System => {
                if let Some(address) = self.system.get(key) {
                    sender.send(address, Envelope::of(Ready));
                }
            }
        }
    }

    /// `local`: run the loop until idle or the slice is used up.
    fn run_local(&mut self, sender: &mut dyn AnySender) {
        let slice_end = Instant::now() + LOCAL_SLICE;
        while self.poll_once(POLL_TIMEOUT, sender)
            && Instant::now() < slice_end
            && !self.shared.is_stopping()
        {}
    }

    /// `system`: poll once. The connection actors need this worker too, so
    /// do not block while they may have work, and back off when idle.
    fn run_system(&mut self, sender: &mut dyn AnySender) {
        let timeout = match self.idle_polls {
            0 => Duration::ZERO,
            n => Duration::from_millis(1 << n.min(10)).min(POLL_TIMEOUT),
        };
        if self.poll_once(timeout, sender) {
            self.idle_polls = 0;
        } else {
            self.idle_polls = self.idle_polls.saturating_add(1);
        }
    }

    /// Closes every connection and stops this actor.
    fn stop(&mut self, sender: &mut dyn AnySender) {
        drop(self.local.drain());
        for address in self.system.drain() {
            sender.stop(&address);
        }
        sender.stop(sender.me());
    }
}

impl AnyActor for Poller {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        if let Some(Closed(token)) = envelope.message.downcast_ref::<Closed>() {
            self.system.remove(token.0);
            return;
        }
        if !envelope.message.is::<Tick>() {
            return;
        }
        if self.shared.is_stopping() {
            return self.stop(sender);
        }
        match self.dispatch {
            Dispatch::Local => self.run_local(sender),
            Dispatch::System => self.run_system(sender),
        }
        sender.send(sender.me(), Envelope::of(Tick));
    }
}

/// Hands one readiness envelope to a connection the poller owns; false when
/// the connection is done (it stopped itself, or it panicked: a panic closes
/// that connection only).
fn deliver_locally(connection: &mut Connection, sender: &mut dyn AnySender) -> bool {
    let mut local = LocalSender {
        outer: sender,
        stopped: Cell::new(false),
    };
    let delivered = panic::catch_unwind(AssertUnwindSafe(|| {
        connection.receive(Envelope::of(Ready), &mut local);
    }));
    delivered.is_ok() && !local.stopped.get()
}

/// The `AnySender` a `local` poller gives its connections. A connection
/// stopping itself (`stop(me)`) is noted here instead of going to the
/// scheduler; everything else passes through to the poller's own sender.
struct LocalSender<'a> {
    outer: &'a mut dyn AnySender,
    stopped: Cell<bool>,
}

impl AnySender for LocalSender<'_> {
    fn me(&self) -> &str {
        self.outer.me()
    }

    fn send(&self, address: &str, envelope: Envelope) {
        self.outer.send(address, envelope);
    }

    fn spawn(&self, address: &str, f: Box<dyn FnOnce() -> Actor>) {
        self.outer.spawn(address, f);
    }

    fn delay(&self, address: &str, envelope: Envelope, duration: Duration) {
        self.outer.delay(address, envelope, duration);
    }

    fn stop(&self, address: &str) {
        if address == self.outer.me() {
            self.stopped.set(true);
        } else {
            self.outer.stop(address);
        }
    }

    fn log(&mut self, message: &str) {
        self.outer.log(message);
    }

    fn metric(&mut self, name: &str, value: f64) {
        self.outer.metric(name, value);
    }

    fn now(&self) -> SystemTime {
        self.outer.now()
    }
}
