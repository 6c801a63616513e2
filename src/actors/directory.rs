//! Where each actor the server owns is, by address, and how a message
//! reaches it from a thread that must not run it (a blocking thread, the
//! delay timer, an uppercut worker forwarding, `Server::send`): queued, and
//! its home poller woken to run it. Also the relay for sends into the
//! uppercut system from such threads. Read-only once the server started,
//! but for the open WebSocket connections (`ws/` addresses), which come
//! and go in their own registry, and the topics' subscribers.
//!
//! Beyond the owned actors: `name@node` on another server and `name@*`
//! on whichever serves it (this one first), carried by the cluster
//! (`remote`); and topics (`topic/room`), whose subscribers here are kept
//! in `topics`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use log::warn;

use uppercut::api::Envelope;

use crate::log_limit::WarnLimiter;

use crate::actors::blocking::BlockingPool;
use crate::actors::cell::ActorCell;
use crate::actors::context::RunContext;
use crate::actors::placed::Placement;
use crate::actors::port::{PollerPort, Relayed};
use crate::actors::remote::{split_node, Payload, Remote, RemoteAddr, ANY_NODE, TOPIC_PREFIX};
use crate::actors::topics::{Subscriber, Topics};
use crate::mail::{self, SendError, Subscribe, Unsubscribe};
use crate::websocket::handle::WsHandle;
use crate::websocket::registry::WsRegistry;

/// An address the server owns.
pub(crate) enum Dest {
    /// One instance, run where its message is.
    Shared(Arc<ActorCell>),
    /// An instance per poller, by poller index; sends from no poller go to
    /// each in turn.
    PerPoller {
        cells: Box<[Arc<ActorCell>]>,
        next: AtomicUsize,
    },
    /// Threads of its own.
    Blocking(Arc<BlockingPool>),
}

/// Where a message for an owned address goes, for one sender.
pub(crate) enum Resolved<'a> {
    Cell(&'a Arc<ActorCell>),
    Blocking(&'a Arc<BlockingPool>),
    /// An open WebSocket connection: the envelope goes to its mail.
    WebSocket(WsHandle),
    /// An actor on another server.
    Remote(RemoteAddr),
    /// A topic: every subscriber, here and on the other servers.
    Topic(&'a str),
    /// A placed actor's name: wherever it is active.
    Placed(&'a str),
}

/// Every owned address, and every poller's port.
pub(crate) struct Directory {
    by_address: HashMap<Box<str>, Dest>,
    ports: Box<[Arc<PollerPort>]>,
    /// Spreads relayed sends over the pollers.
    next_relay: AtomicUsize,
    websockets: Arc<WsRegistry>,
    /// The subscribers here of each topic.
    topics: Topics,
    /// The cluster, with `--nats`: set once, as the server starts.
    remote: OnceLock<Arc<dyn Remote>>,
    /// Placed actors' names, where the routes have any: set once, as the
    /// server starts.
    placement: OnceLock<Arc<dyn Placement>>,
}

impl Directory {
    pub(crate) fn new(
        by_address: HashMap<Box<str>, Dest>,
        ports: Vec<Arc<PollerPort>>,
    ) -> Directory {
        Directory {
            by_address,
            ports: ports.into(),
            next_relay: AtomicUsize::new(0),
            websockets: Arc::default(),
            topics: Topics::default(),
            remote: OnceLock::new(),
            placement: OnceLock::new(),
        }
    }

    /// Places actors by name from now on.
    pub(crate) fn place(&self, placement: Arc<dyn Placement>) {
        let _ = self.placement.set(placement);
    }

    /// Where placed names' messages go, if the routes place any.
    pub(crate) fn placement(&self) -> Option<&Arc<dyn Placement>> {
        self.placement.get()
    }

    /// Whether `name` is a placed actor's.
    pub(crate) fn is_placed(&self, name: &str) -> bool {
        self.placement.get().is_some_and(|p| p.places(name))
    }

    /// Joins the cluster: `name@node` addresses and topics reach other
    /// servers from now on.
    pub(crate) fn join(&self, remote: Arc<dyn Remote>) {
        let _ = self.remote.set(remote);
    }

    /// Where `address` is for a sender on `poller`'s thread (or on none).
    pub(crate) fn resolve<'a>(
        &'a self,
        address: &'a str,
        poller: Option<usize>,
    ) -> Option<Resolved<'a>> {
        if let Some(dest) = self.by_address.get(address) {
            return Some(local(dest, poller));
        }
        if let Some(handle) = self.websockets.get(address) {
            return Some(Resolved::WebSocket(handle));
        }
        if let Some(topic) = address.strip_prefix(TOPIC_PREFIX) {
            return Some(Resolved::Topic(topic));
        }
        if self.is_placed(address) {
            return Some(Resolved::Placed(address));
        }
        let (name, node) = split_node(address)?;
        let here = self
            .remote
            .get()
            .is_some_and(|remote| remote.node() == node);
        // A placed name belongs to no node: `name@*` (or this node's) is
        // wherever it is active.
        if (here || node == ANY_NODE) && self.is_placed(name) {
            return Some(Resolved::Placed(name));
        }
        if here || (node == ANY_NODE && self.reaches(name)) {
            // `name` alone means this server's `name`.
            return self.resolve(name, poller);
        }
        Some(Resolved::Remote(RemoteAddr {
            name: name.to_string(),
            node: node.to_string(),
        }))
    }

    /// What the server owns at `address`.
    pub(crate) fn get(&self, address: &str) -> Option<&Dest> {
        self.by_address.get(address)
    }

    /// Whether a send to `address` reaches something the server runs: an
    /// owned actor, or an open WebSocket connection.
    pub(crate) fn reaches(&self, address: &str) -> bool {
        self.by_address.contains_key(address)
            || self.websockets.get(address).is_some()
            || self.is_placed(address)
    }

    /// The open WebSocket connections.
    pub(crate) fn websockets(&self) -> &Arc<WsRegistry> {
        &self.websockets
    }

    /// Every owned address and what is there.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&str, &Dest)> {
        self.by_address
            .iter()
            .map(|(address, dest)| (&**address, dest))
    }

    /// Sends `envelope` to `address` from a thread that must not run
    /// actors; gives it back when the server owns nothing there.
    pub(crate) fn deliver_foreign(
        &self,
        address: &str,
        envelope: Envelope,
    ) -> Result<(), Envelope> {
        match self.resolve(address, None) {
            Some(Resolved::Cell(cell)) => {
                cell.enqueue(envelope);
                self.schedule(cell);
                Ok(())
            }
            Some(Resolved::Blocking(pool)) => {
                pool.submit(envelope);
                Ok(())
            }
            // Closed: dropped, as uppercut drops a send to a stopped actor.
            Some(Resolved::WebSocket(handle)) => {
                handle.mail(envelope);
                Ok(())
            }
            Some(Resolved::Remote(to)) => {
                self.send_remote(&to, &envelope.from.clone(), envelope);
                Ok(())
            }
            Some(Resolved::Topic(topic)) => {
                let from = envelope.from.clone();
                self.to_topic(topic, &from, envelope, |address, envelope| {
                    if let Err(envelope) = self.deliver_foreign(address, envelope) {
                        self.relay(Relayed::Send(address.to_string(), envelope));
                    }
                });
                Ok(())
            }
            Some(Resolved::Placed(name)) => {
                if let Some(placement) = self.placement.get() {
                    let context = RunContext::new(self, None, None, None);
                    placement.deliver(name, envelope, false, &context);
                }
                Ok(())
            }
            None => Err(envelope),
        }
    }

    /// Sends `envelope` from `from` to `to` on another server; a refusal
    /// is noted for the sending thread (`mail::last_send_error`) and
    /// logged.
    pub(crate) fn send_remote(&self, to: &RemoteAddr, from: &str, envelope: Envelope) {
        mail::clear();
        let sent = match self.remote.get() {
            Some(remote) => remote.send(to, from, envelope),
            None => Err(SendError::NoCluster { to: to.to_string() }),
        };
        if let Err(error) = sent {
            refused(from, error);
        }
    }

    /// What `envelope`, from `from`, does sent to `topic`: a [`Subscribe`]
    /// or [`Unsubscribe`] from an owned actor or WebSocket connection, or
    /// bytes to publish (to each subscriber here through `deliver`, to the
    /// other servers through the cluster).
    pub(crate) fn to_topic(
        &self,
        topic: &str,
        from: &str,
        envelope: Envelope,
        deliver: impl FnMut(&str, Envelope),
    ) {
        mail::clear();
        let message = envelope.message;
        if message.is::<Subscribe>() || message.is::<Unsubscribe>() {
            let Some(subscriber) = self.subscriber(from) else {
                let error = SendError::NotBytes {
                    to: format!("{TOPIC_PREFIX}{topic}"),
                };
                return refused(from, error);
            };
            return match message.is::<Subscribe>() {
                true => self.subscribe(topic, subscriber),
                false => self.unsubscribe(topic, &subscriber),
            };
        }
        match Payload::take(message) {
            Ok(payload) => self.publish(topic, from, &payload, deliver),
            Err(_) => refused(
                from,
                SendError::NotBytes {
                    to: format!("{TOPIC_PREFIX}{topic}"),
                },
            ),
        }
    }

    /// Publishes `payload` from `from` to `topic`: each subscriber here
    /// through `deliver` (actors) or its client (WebSocket connections),
    /// in this call; the other servers' through the cluster.
    pub(crate) fn publish(
        &self,
        topic: &str,
        from: &str,
        payload: &Payload,
        deliver: impl FnMut(&str, Envelope),
    ) {
        self.publish_here(topic, from, payload, deliver);
        if let Some(remote) = self.remote.get() {
            if let Err(error) = remote.publish(topic, from, payload) {
                refused(from, error);
            }
        }
    }

    /// Hands `payload` to each subscriber of `topic` on this server.
    pub(crate) fn publish_here(
        &self,
        topic: &str,
        from: &str,
        payload: &Payload,
        mut deliver: impl FnMut(&str, Envelope),
    ) {
        let mut actors = Vec::new();
        // One message for every connection: its bytes, and their compressed
        // form once made, are shared.
        let mut outgoing = None;
        self.topics.each(topic, |subscriber| match subscriber {
            Subscriber::Ws(handle) => {
                handle.send(outgoing.get_or_insert_with(|| payload.outgoing()).clone());
            }
            Subscriber::Actor(address) => actors.push(address.clone()),
        });
        // Outside the topics' lock: a delivery may run an actor, which may
        // subscribe.
        for address in actors {
            deliver(&address, payload.envelope(from));
        }
    }

    /// The subscriber at `address`: an open WebSocket connection, or an
    /// owned actor.
    fn subscriber(&self, address: &str) -> Option<Subscriber> {
        if let Some(handle) = self.websockets.get(address) {
            return Some(Subscriber::Ws(handle));
        }
        self.by_address
            .contains_key(address)
            .then(|| Subscriber::Actor(address.into()))
    }

    /// Adds `subscriber` to `topic`; the cluster subscribes this server
    /// with its first.
    pub(crate) fn subscribe(&self, topic: &str, subscriber: Subscriber) {
        if self.topics.subscribe(topic, subscriber) {
            if let Some(remote) = self.remote.get() {
                remote.interest(topic, true);
            }
        }
    }

    /// Takes `subscriber` off `topic`; the cluster unsubscribes this
    /// server when it was the last.
    pub(crate) fn unsubscribe(&self, topic: &str, subscriber: &Subscriber) {
        if self.topics.unsubscribe(topic, subscriber) {
            if let Some(remote) = self.remote.get() {
                remote.interest(topic, false);
            }
        }
    }

    /// The WebSocket connection `handle` closed: it leaves every topic.
    pub(crate) fn forget_websocket(&self, handle: &WsHandle) {
        let subscriber = Subscriber::Ws(handle.clone());
        for topic in self.topics.leave_all(&subscriber) {
            if let Some(remote) = self.remote.get() {
                remote.interest(&topic, false);
            }
        }
    }

    /// Has `cell`'s home poller run what it has queued.
    pub(crate) fn schedule(&self, cell: &Arc<ActorCell>) {
        if let Some(port) = self.ports.get(cell.home()) {
            port.schedule(Arc::clone(cell));
        }
    }

    /// Has a poller make `relayed` with its uppercut sender.
    pub(crate) fn relay(&self, relayed: Relayed) {
        if self.ports.is_empty() {
            return;
        }
        let index = self.next_relay.fetch_add(1, Ordering::Relaxed) % self.ports.len();
        self.ports[index].relay(relayed);
    }

    /// Poller `index`'s port.
    pub(crate) fn port(&self, index: usize) -> Option<&Arc<PollerPort>> {
        self.ports.get(index)
    }
}

/// Where `dest` is for a sender on `poller`'s thread (or on none).
fn local(dest: &Dest, poller: Option<usize>) -> Resolved<'_> {
    match dest {
        Dest::Shared(cell) => Resolved::Cell(cell),
        Dest::PerPoller { cells, next } => {
            let index = match poller {
                Some(index) => index,
                None => next.fetch_add(1, Ordering::Relaxed),
            };
            Resolved::Cell(&cells[index % cells.len()])
        }
        Dest::Blocking(pool) => Resolved::Blocking(pool),
    }
}

/// A send the server refused: noted for the sender's thread, and logged
/// (at most once a second for the whole server).
fn refused(from: &str, error: SendError) {
    static WARNINGS: WarnLimiter = WarnLimiter::new();
    if let Some(suppressed) = WARNINGS.admit() {
        match suppressed {
            0 => warn!("a send from {from:?} was refused: {error}"),
            n => {
                warn!("a send from {from:?} was refused: {error} ({n} more since the last report)")
            }
        }
    }
    mail::refuse(error);
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory")
            .field("addresses", &self.by_address.len())
            .finish_non_exhaustive()
    }
}
