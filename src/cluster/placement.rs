//! Placed actors: each name of a placed kind has at most one activation in
//! the cluster, held by a lease in JetStream, and the other servers forward
//! its messages to the holder.
//!
//! - **Taking a name.** The first server to get a message for a name that
//!   no live server holds writes the name's lease, create-only (expected
//!   revision 0), in a bucket whose entries expire `ttl` after they were
//!   written (`{prefix}_leases`, JetStream's `max_age`). One server wins;
//!   it starts a durable activation, which reads the state and writes it
//!   again at once (the *fence*, below) before anything it answers leaves.
//!   The others read the lease and forward to the node it names.
//! - **Keeping it.** The holder renews the lease every quarter of its
//!   time to live, compare-and-set on its own last revision, and serves
//!   only until three quarters of it after it *sent* its last successful
//!   renewal (`state::lease`): by then nobody else can have taken the
//!   lease, which outlives that renewal by its whole time to live in the
//!   store's own clock. A renewal refused (the lease moved), or none
//!   answered in time, stops the activation: its queued messages are
//!   answered 503, and the name is the next taker's.
//! - **Fencing.** What the activation writes is a compare-and-set on the
//!   state's revision too, and a new activation's first act is a write,
//!   so an earlier activation that wakes from a pause (a stopped process,
//!   a partition) with a write to make expects a revision that has moved:
//!   JetStream refuses it. `docs/design.md` (placed actors) has the whole
//!   argument.
//! - **Moving on.** On a drain (SIGTERM) the holder gives its leases up
//!   (purges them), so the next server takes over at once; a name idle for
//!   `idle` is unloaded and given up the same way.
//!
//! Without a cluster (or without JetStream) there is nobody to share with:
//! a name is activated here at its first message, with no lease.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use bytes::Bytes;
use log::{debug, info, warn};
use uppercut::api::Envelope;

use crate::actors::cell::ActorCell;
use crate::actors::context::RunContext;
use crate::actors::directory::Directory;
use crate::actors::durable::{Durable, Plain};
use crate::actors::placed::Placement;
use crate::actors::remote::{Remote, RemoteAddr};
use crate::cluster::kv::Bucket;
use crate::cluster::Cluster;
use crate::log_limit::WarnLimiter;
use crate::routes::actor::ActorRequest;
use crate::routes::actor_response::ActorResponse;
use crate::routes::reply::{Outcome, ReplySink, ReplyTo};
use crate::routes::spawns::PlacedFactory;
use crate::state::lease::{now_ms, Ask, Lease, LeaseTimes, Renewals};
use crate::state::metrics::{PlacementMetrics, StateMetrics};
use crate::state::{DurableEnv, StateStore, StoreError, Stored, Wake};

/// Messages a name keeps while its lease is taken or read, at most.
const MAX_WAITING: usize = 1024;
/// Takes tried in a row for the messages waiting, before they are refused.
const MAX_TAKES: u32 = 3;

/// What the server knows of one placed name.
struct Entry {
    lease: Lease,
    /// The activation, while this server holds the name.
    cell: Option<Arc<ActorCell>>,
    /// Until when the activation may serve (its lease's `until`).
    until: Arc<AtomicU64>,
    /// Messages that wait for the lease to be taken or read, each with
    /// whether another server forwarded it.
    waiting: VecDeque<(Envelope, bool)>,
    /// A read of the lease is under way.
    reading: bool,
    /// Takes tried for what waits.
    takes: u32,
    /// The last message's time.
    used: u64,
    /// The holder before this server took the name, if it knew one.
    was_elsewhere: bool,
    /// Whether another holder's renewals still land, from the reads.
    renewals: Renewals,
    /// When to read the lease again, for messages that wait for a
    /// stalled holder's lease to run out.
    reread_at: Option<u64>,
}

impl Entry {
    fn new(now: u64) -> Entry {
        Entry {
            lease: Lease::Unknown,
            cell: None,
            until: Arc::new(AtomicU64::new(0)),
            waiting: VecDeque::new(),
            reading: false,
            takes: 0,
            used: now,
            was_elsewhere: false,
            renewals: Renewals::default(),
            reread_at: None,
        }
    }
}

/// What to do once the table's lock is let go.
enum Action {
    Run(Arc<ActorCell>, Envelope),
    Forward(String, String, Envelope),
    Refuse(Envelope, String),
    WriteLease {
        name: String,
        revision: u64,
        sent: u64,
    },
    ReadLease(String),
    Purge(String),
}

/// The leases, when there is a cluster with JetStream.
struct Leases {
    cluster: Arc<Cluster>,
    bucket: Arc<Bucket>,
    times: LeaseTimes,
}

/// Placed names: their leases, activations and forwarding.
pub(crate) struct Placed {
    /// This server in leases: its node name and a nonce of this process.
    here: String,
    kinds: Vec<(String, PlacedFactory)>,
    store: Option<Arc<dyn StateStore>>,
    state_metrics: Arc<StateMetrics>,
    leases: Option<Leases>,
    idle: u64,
    table: Mutex<HashMap<String, Entry>>,
    directory: OnceLock<Weak<Directory>>,
    pollers: usize,
    next_home: AtomicUsize,
    pub(crate) metrics: Arc<PlacementMetrics>,
    stopping: Mutex<bool>,
    tick: Condvar,
    /// The server drains: it takes no name any more.
    releasing: std::sync::atomic::AtomicBool,
    /// Releases sent and not yet answered.
    purging: Mutex<usize>,
    purged: Condvar,
    ticker: Mutex<Option<JoinHandle<()>>>,
    me: Weak<Placed>,
}

impl fmt::Debug for Placed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Placed")
            .field("here", &self.here)
            .finish_non_exhaustive()
    }
}

/// What the lease of a name holds: who holds it.
#[derive(serde::Serialize, serde::Deserialize)]
struct Holder {
    node: String,
    /// This process among the node's (a restart is another holder).
    process: String,
}

/// How placed names are kept.
pub(crate) struct PlacedConfig {
    pub(crate) kinds: Vec<(String, PlacedFactory)>,
    pub(crate) store: Option<Arc<dyn StateStore>>,
    pub(crate) state_metrics: Arc<StateMetrics>,
    /// With a cluster on JetStream: the cluster, the leases' time to live
    /// (ms), the store's timeout and its buckets' replicas.
    pub(crate) cluster: Option<(Arc<Cluster>, u64, Duration, usize)>,
    pub(crate) idle: Duration,
    pub(crate) pollers: usize,
}

impl Placed {
    /// The placement of `config.kinds`; its ticker thread renews leases and
    /// unloads idle names.
    pub(crate) fn start(config: PlacedConfig) -> std::io::Result<Arc<Placed>> {
        let here = match &config.cluster {
            Some((cluster, ..)) => cluster.node().to_string(),
            None => String::new(),
        };
        let leases = config.cluster.map(|(cluster, ttl, timeout, replicas)| {
            let name = format!("{}_leases", cluster.config().prefix);
            Leases {
                bucket: Bucket::new(Arc::clone(&cluster), name, replicas, ttl, timeout),
                cluster,
                times: LeaseTimes::for_ttl(ttl),
            }
        });
        let metrics = Arc::new(PlacementMetrics::default());
        *metrics.active.lock().unwrap_or_else(|e| e.into_inner()) = config
            .kinds
            .iter()
            .map(|(kind, _)| (kind.clone(), 0))
            .collect();
        let process = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let placed = Arc::new_cyclic(|me| Placed {
            here: serde_json::to_string(&Holder {
                node: here,
                process,
            })
            .unwrap_or_default(),
            kinds: config.kinds,
            store: config.store,
            state_metrics: config.state_metrics,
            leases,
            idle: u64::try_from(config.idle.as_millis()).unwrap_or(u64::MAX),
            table: Mutex::new(HashMap::new()),
            directory: OnceLock::new(),
            pollers: config.pollers.max(1),
            next_home: AtomicUsize::new(0),
            metrics,
            stopping: Mutex::new(false),
            tick: Condvar::new(),
            releasing: std::sync::atomic::AtomicBool::new(false),
            purging: Mutex::new(0),
            purged: Condvar::new(),
            ticker: Mutex::new(None),
            me: me.clone(),
        });
        let ticking = Arc::downgrade(&placed);
        let ticker = thread::Builder::new()
            .name("placement".into())
            .spawn(move || ticker(&ticking))?;
        *lock(&placed.ticker) = Some(ticker);
        Ok(placed)
    }

    /// Reaches the activations through `directory` from now on.
    pub(crate) fn attach(&self, directory: &Arc<Directory>) {
        let _ = self.directory.set(Arc::downgrade(directory));
    }

    /// The kind `name` is of, and its factory.
    fn kind_of(&self, name: &str) -> Option<&(String, PlacedFactory)> {
        self.kinds.iter().find(|(kind, _)| {
            name == kind
                || name
                    .strip_prefix(kind.as_str())
                    .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1)
        })
    }

    /// The node a lease's holder names (`""` without a cluster).
    fn node_of(holder: &str) -> Option<String> {
        serde_json::from_str::<Holder>(holder)
            .ok()
            .map(|holder| holder.node)
    }

    /// Starts `name`'s activation (the lease is held, or there are no
    /// leases): a durable actor on the state store, fenced when shared;
    /// the reason if its state cannot be had.
    fn activate(&self, name: &str, entry: &mut Entry) -> Result<Arc<ActorCell>, String> {
        let (kind, factory) = self.kind_of(name).ok_or("not a placed name")?;
        let directory = self
            .directory
            .get()
            .and_then(Weak::upgrade)
            .ok_or("the server is not running")?;
        let home = self.next_home.fetch_add(1, Ordering::Relaxed) % self.pollers;
        let wake = Wake::default();
        let actor: uppercut::api::Actor = match &self.store {
            Some(store) => {
                let env = DurableEnv {
                    key: name.to_string(),
                    store: Arc::clone(store),
                    wake: Arc::clone(&wake),
                    metrics: Arc::clone(&self.state_metrics),
                    serves_until: self.leases.as_ref().map(|_| Arc::clone(&entry.until)),
                    fence: self.leases.is_some(),
                };
                Box::new(Durable::start(factory(name), env)?)
            }
            None => Box::new(Plain(factory(name))),
        };
        let cell = Arc::new(ActorCell::new(name, home, actor));
        let port = directory.port(home).cloned();
        let mailed = Arc::downgrade(&cell);
        let _ = wake.set(Arc::new(move |envelope| {
            if let (Some(cell), Some(port)) = (mailed.upgrade(), &port) {
                cell.enqueue(envelope);
                port.schedule(cell);
            }
        }));
        self.metrics.activations.fetch_add(1, Ordering::Relaxed);
        if entry.was_elsewhere {
            self.metrics.failovers.fetch_add(1, Ordering::Relaxed);
        }
        self.metrics.activated(kind, 1);
        info!("placed actor {name}: active here");
        Ok(cell)
    }

    /// Stops `name`'s activation here: it serves nothing more (what is
    /// queued for it is answered 503), and the name is the next taker's.
    fn deactivate(&self, name: &str, entry: &mut Entry, why: &str) {
        entry.until.store(0, Ordering::Release);
        if entry.cell.take().is_some() {
            if let Some((kind, _)) = self.kind_of(name) {
                self.metrics.activated(kind, -1);
            }
            info!("placed actor {name}: no longer active here ({why})");
        }
    }

    /// What to do with what waits for `name`, now that its lease is known.
    fn settle(&self, name: &str, entry: &mut Entry, now: u64, actions: &mut Vec<Action>) {
        let servable = match &self.leases {
            Some(_) => entry.lease.can_serve(now),
            None => true,
        };
        if servable {
            if entry.cell.is_none() {
                match self.activate(name, entry) {
                    Ok(cell) => entry.cell = Some(cell),
                    Err(why) => {
                        static FAILED: WarnLimiter = WarnLimiter::new();
                        if FAILED.admit().is_some() {
                            warn!("placed actor {name}: cannot be activated: {why}");
                        }
                        for (envelope, _) in entry.waiting.drain(..) {
                            actions.push(Action::Refuse(envelope, why.clone()));
                        }
                        return;
                    }
                }
            }
            entry.takes = 0;
            if let Some(cell) = &entry.cell {
                for (envelope, _) in entry.waiting.drain(..) {
                    actions.push(Action::Run(Arc::clone(cell), envelope));
                }
            }
            return;
        }
        let stalled = self
            .leases
            .as_ref()
            .map(|leases| (entry.renewals.stalled(now, leases.times), leases.times));
        match &entry.lease {
            Lease::Elsewhere { .. }
                if !entry.waiting.is_empty() && stalled.is_some_and(|s| s.0) =>
            {
                // Its holder stopped renewing: what waits is served here
                // once the lease runs out, not sent to a holder that
                // cannot answer. Read again soon.
                entry.was_elsewhere = true;
                let times = stalled.map_or(LeaseTimes::for_ttl(1), |s| s.1);
                entry.reread_at = Some(now + Renewals::reread(times));
                self.tick.notify_all();
            }
            Lease::Elsewhere { node, .. } => {
                entry.was_elsewhere = true;
                for (envelope, forwarded) in entry.waiting.drain(..) {
                    actions.push(match forwarded {
                        true => Action::Refuse(envelope, format!("it moved to node {node}; retry")),
                        false => Action::Forward(node.clone(), name.to_string(), envelope),
                    });
                }
            }
            Lease::Unknown | Lease::Released if !entry.waiting.is_empty() => {
                if self.releasing.load(Ordering::Acquire) {
                    for (envelope, _) in entry.waiting.drain(..) {
                        let why = "this server drains; retry".to_string();
                        actions.push(Action::Refuse(envelope, why));
                    }
                    return;
                }
                if entry.takes >= MAX_TAKES {
                    entry.takes = 0;
                    for (envelope, _) in entry.waiting.drain(..) {
                        let why = "its lease could not be taken; retry".to_string();
                        actions.push(Action::Refuse(envelope, why));
                    }
                    return;
                }
                if let Some(Ask::Write { revision }) = entry.lease.take(now) {
                    entry.takes += 1;
                    actions.push(Action::WriteLease {
                        name: name.to_string(),
                        revision,
                        sent: now,
                    });
                }
            }
            _ => {}
        }
    }

    /// Does what the table's lock let through.
    fn perform(&self, actions: Vec<Action>, context: &RunContext<'_>) {
        for action in actions {
            match action {
                Action::Run(cell, envelope) => context.deliver(&cell, envelope),
                Action::Forward(node, name, envelope) => {
                    self.forward(&node, &name, envelope, context.poller())
                }
                Action::Refuse(envelope, why) => refuse(envelope, &why),
                Action::WriteLease {
                    name,
                    revision,
                    sent,
                } => self.write_lease(name, revision, sent),
                Action::ReadLease(name) => self.read_lease(name),
                Action::Purge(name) => self.purge(name),
            }
        }
    }

    /// Forwards `envelope` to `name` on `node`, its holder: a request
    /// through the link of `poller` (the asking connection's, whose answer
    /// comes back there), anything else as the cluster sends it.
    fn forward(&self, node: &str, name: &str, envelope: Envelope, poller: Option<usize>) {
        let Some(leases) = &self.leases else {
            return refuse(envelope, "no cluster to forward to");
        };
        self.metrics.forwarded.fetch_add(1, Ordering::Relaxed);
        let to = RemoteAddr {
            name: name.to_string(),
            node: node.to_string(),
        };
        let Envelope {
            message,
            from,
            to: _,
        } = envelope;
        // A request that cannot go is answered by the cluster (503).
        match message.downcast::<ActorRequest>() {
            Ok(request) => {
                let timeout = leases.cluster.config().call_timeout;
                let (parts, reply_to) = request.into_parts();
                let request = match reply_to {
                    // Its answer says whether the holder is still there.
                    Some(reply_to) => ActorRequest::new(
                        parts,
                        ReplyTo::Elsewhere(Box::new(Watch {
                            to: reply_to,
                            placed: self.me.clone(),
                            name: name.to_string(),
                        })),
                    ),
                    None => ActorRequest::unanswerable(parts),
                };
                // The holder may be paused, holding it: answered 504 once
                // a lease's time has passed, and the holder read again.
                // Not below 2 s: a loaded holder may be slow, not gone.
                let bound = Duration::from_millis(leases.times.ttl.max(2_000)).min(timeout);
                leases
                    .cluster
                    .request_bounded(poller.unwrap_or(0), &to, request, bound);
            }
            Err(message) => {
                let envelope = Envelope {
                    message,
                    from: from.clone(),
                    to: String::new(),
                };
                let _ = leases.cluster.send(&to, &from, envelope);
            }
        }
    }

    /// Writes `name`'s lease, expecting `revision` (0: takes it).
    fn write_lease(&self, name: String, revision: u64, sent: u64) {
        let Some(leases) = &self.leases else {
            return;
        };
        let me = self.me.clone();
        leases.bucket.put(
            &name.clone(),
            Bytes::from(self.here.clone()),
            revision,
            Box::new(move |outcome| {
                if let Some(placed) = me.upgrade() {
                    placed.lease_written(&name, sent, revision, outcome);
                }
            }),
        );
    }

    /// A lease write answered.
    fn lease_written(
        &self,
        name: &str,
        sent: u64,
        expected: u64,
        outcome: Result<u64, StoreError>,
    ) {
        let Some(leases) = &self.leases else {
            return;
        };
        let now = now_ms();
        let mut actions = Vec::new();
        debug!("placed actor {name}: lease write (expecting {expected}, sent {sent}): {outcome:?}");
        {
            let mut table = lock(&self.table);
            let Some(entry) = table.get_mut(name) else {
                return;
            };
            match outcome {
                Ok(revision) => {
                    match expected {
                        0 => entry.lease.written(sent, revision, leases.times),
                        _ => entry.lease.renewed(sent, revision, leases.times),
                    }
                    if let Lease::Held { until, .. } = entry.lease {
                        entry.until.store(until, Ordering::Release);
                        entry.renewals.forget();
                    }
                    self.settle(name, entry, now, &mut actions);
                    self.tick.notify_all();
                }
                Err(StoreError::Stale { .. }) => {
                    for ask in entry.lease.refused() {
                        self.ask(name, entry, ask, &mut actions);
                    }
                }
                Err(e) => {
                    if let Some(ask) = entry.lease.unanswered() {
                        self.ask(name, entry, ask, &mut actions);
                    }
                    if !matches!(entry.lease, Lease::Held { .. }) {
                        let why = format!("its lease could not be taken: {e}");
                        for (envelope, _) in entry.waiting.drain(..) {
                            actions.push(Action::Refuse(envelope, why.clone()));
                        }
                    }
                }
            }
        }
        self.perform_foreign(actions);
    }

    /// Does what the lease asks, for `name`.
    fn ask(&self, name: &str, entry: &mut Entry, ask: Ask, actions: &mut Vec<Action>) {
        match ask {
            Ask::Stop => {
                self.metrics.lost.fetch_add(1, Ordering::Relaxed);
                self.deactivate(name, entry, "its lease was lost");
            }
            Ask::Read if !entry.reading => {
                entry.reading = true;
                actions.push(Action::ReadLease(name.to_string()));
            }
            Ask::Read => {}
            Ask::Write { revision } => actions.push(Action::WriteLease {
                name: name.to_string(),
                revision,
                sent: now_ms(),
            }),
        }
    }

    /// Reads who holds `name`'s lease.
    fn read_lease(&self, name: String) {
        let Some(leases) = &self.leases else {
            return;
        };
        let me = self.me.clone();
        leases.bucket.get(
            &name.clone(),
            Box::new(move |read| {
                if let Some(placed) = me.upgrade() {
                    placed.lease_read(&name, read);
                }
            }),
        );
    }

    /// A lease read answered.
    fn lease_read(&self, name: &str, read: Result<Option<Stored>, StoreError>) {
        let now = now_ms();
        debug!("placed actor {name}: lease read: {read:?}");
        let mut actions = Vec::new();
        {
            let mut table = lock(&self.table);
            let Some(entry) = table.get_mut(name) else {
                return;
            };
            entry.reading = false;
            match read {
                Ok(holder) => {
                    let here = Placed::node_of(&self.here).unwrap_or_default();
                    let holder = holder.map(|stored| {
                        let text = String::from_utf8_lossy(&stored.bytes).into_owned();
                        // A lease written by another process of this node
                        // (before a restart) is another holder's.
                        let node = match text == self.here {
                            true => here.clone(),
                            false => Placed::node_of(&text)
                                .map(|node| match node == here {
                                    true => format!("{node} (an earlier process)"),
                                    false => node,
                                })
                                .unwrap_or_default(),
                        };
                        (node, stored.revision)
                    });
                    match &holder {
                        Some((node, revision)) if *node != here => {
                            entry.renewals.saw(*revision, now)
                        }
                        _ => entry.renewals.forget(),
                    }
                    let earlier = holder
                        .as_ref()
                        .is_some_and(|(node, _)| node.ends_with("(an earlier process)"));
                    match earlier {
                        // It runs out; until then the name waits.
                        true => {
                            let why = "an earlier run of this server holds it until its lease \
                                       runs out; retry"
                                .to_string();
                            for (envelope, _) in entry.waiting.drain(..) {
                                actions.push(Action::Refuse(envelope, why.clone()));
                            }
                        }
                        false => {
                            entry.lease.read(
                                holder.as_ref().map(|(node, rev)| (node.as_str(), *rev)),
                                &here,
                                now,
                            );
                            self.settle(name, entry, now, &mut actions);
                        }
                    }
                }
                Err(e) => {
                    let why = format!("its lease could not be read: {e}");
                    for (envelope, _) in entry.waiting.drain(..) {
                        actions.push(Action::Refuse(envelope, why.clone()));
                    }
                }
            }
        }
        self.perform_foreign(actions);
    }

    /// Gives `name`'s lease up.
    fn purge(&self, name: String) {
        let Some(leases) = &self.leases else {
            return;
        };
        self.metrics.released.fetch_add(1, Ordering::Relaxed);
        *lock(&self.purging) += 1;
        let me = self.me.clone();
        leases.bucket.purge(
            &name.clone(),
            Box::new(move |outcome| {
                if let Err(e) = outcome {
                    warn!("placed actor {name}: its lease was not given up ({e}); it runs out");
                }
                if let Some(placed) = me.upgrade() {
                    *lock(&placed.purging) -= 1;
                    placed.purged.notify_all();
                }
            }),
        );
    }

    /// Does `actions` from a thread that is not running a poller's actors
    /// (a store's answer): the activations run on their home pollers.
    fn perform_foreign(&self, actions: Vec<Action>) {
        if actions.is_empty() {
            return;
        }
        let Some(directory) = self.directory.get().and_then(Weak::upgrade) else {
            return;
        };
        let context = RunContext::new(&directory, None, None, None);
        self.perform(actions, &context);
    }

    /// The ticker's round: renewals due, leases past their time, idle
    /// names; when it has something to do next.
    fn round(&self) -> Option<u64> {
        let now = now_ms();
        let mut actions = Vec::new();
        let mut next: Option<u64> = None;
        {
            let mut table = lock(&self.table);
            let names: Vec<String> = table.keys().cloned().collect();
            for name in names {
                let Some(entry) = table.get_mut(&name) else {
                    continue;
                };
                if let Some(ask) = entry.lease.tick(now) {
                    self.ask(&name, entry, ask, &mut actions);
                }
                if entry.reread_at.is_some_and(|at| at <= now) {
                    entry.reread_at = None;
                    if !entry.reading && !entry.waiting.is_empty() {
                        entry.reading = true;
                        actions.push(Action::ReadLease(name.clone()));
                    }
                }
                let idle = now.saturating_sub(entry.used) >= self.idle;
                if idle && entry.waiting.is_empty() {
                    if entry.cell.is_some() {
                        self.deactivate(&name, entry, "idle");
                    }
                    if entry.lease.release().is_some() {
                        actions.push(Action::Purge(name.clone()));
                    }
                    if entry.cell.is_none() && !entry.reading {
                        table.remove(&name);
                        continue;
                    }
                }
                let wake = [
                    entry.lease.next_tick(),
                    Some(entry.used + self.idle),
                    entry.reread_at,
                ];
                for at in wake.into_iter().flatten() {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            }
        }
        self.perform_foreign(actions);
        next
    }

    /// Gives up every lease held here, as `release_all`, and waits up to
    /// `grace` for NATS to have taken each release.
    pub(crate) fn release_all_and_wait(&self, grace: Duration) {
        self.release_all();
        let deadline = std::time::Instant::now() + grace;
        let mut purging = lock(&self.purging);
        while *purging > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            purging = self
                .purged
                .wait_timeout(purging, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The server drains: every lease held here is given up, so the next
    /// server takes each name at once.
    pub(crate) fn release_all(&self) {
        self.releasing.store(true, Ordering::Release);
        let mut actions = Vec::new();
        {
            let mut table = lock(&self.table);
            for (name, entry) in table.iter_mut() {
                self.deactivate(name, entry, "the server drains");
                if entry.lease.release().is_some() {
                    actions.push(Action::Purge(name.clone()));
                }
            }
        }
        self.perform_foreign(actions);
    }

    /// Stops the ticker.
    pub(crate) fn stop(&self) {
        *lock(&self.stopping) = true;
        self.tick.notify_all();
        if let Some(ticker) = lock(&self.ticker).take() {
            let _ = ticker.join();
        }
    }
}

impl Placement for Placed {
    fn places(&self, name: &str) -> bool {
        self.kind_of(name).is_some()
    }

    fn deliver(&self, name: &str, envelope: Envelope, forwarded: bool, context: &RunContext<'_>) {
        let now = now_ms();
        let mut actions = Vec::new();
        {
            let mut table = lock(&self.table);
            let entry = table
                .entry(name.to_string())
                .or_insert_with(|| Entry::new(now));
            entry.used = now;
            let held = match &self.leases {
                Some(_) => entry.lease.can_serve(now),
                None => true,
            };
            match (&entry.cell, held) {
                (Some(cell), true) => actions.push(Action::Run(Arc::clone(cell), envelope)),
                _ if entry.waiting.len() >= MAX_WAITING => actions.push(Action::Refuse(
                    envelope,
                    "too many messages wait for its lease".into(),
                )),
                _ => {
                    let fresh = self.leases.as_ref().map_or(0, |l| l.times.renew);
                    let stalled = self
                        .leases
                        .as_ref()
                        .is_some_and(|l| entry.renewals.stalled(now, l.times));
                    match &entry.lease {
                        Lease::Elsewhere { node, seen }
                            if now.saturating_sub(*seen) < fresh && !forwarded && !stalled =>
                        {
                            entry.was_elsewhere = true;
                            let node = node.clone();
                            actions.push(Action::Forward(node, name.to_string(), envelope));
                        }
                        Lease::Elsewhere { .. } => {
                            // Read again: the holder may have moved (or,
                            // stalled, its lease run out: read when due).
                            entry.waiting.push_back((envelope, forwarded));
                            if !entry.reading && entry.reread_at.is_none() {
                                entry.reading = true;
                                actions.push(Action::ReadLease(name.to_string()));
                            }
                        }
                        _ => {
                            entry.waiting.push_back((envelope, forwarded));
                            if matches!(entry.lease, Lease::Held { .. }) {
                                // Held, but past its time: the ticker
                                // stops it; the messages wait for a take.
                                entry.lease = Lease::Unknown;
                                self.deactivate(name, entry, "its lease ran out");
                            }
                            if !matches!(entry.lease, Lease::Taking { .. }) && !entry.reading {
                                self.settle(name, entry, now, &mut actions);
                            }
                        }
                    }
                }
            }
        }
        // The ticker looks again once a lease is on its way.
        if actions
            .iter()
            .any(|a| matches!(a, Action::WriteLease { .. } | Action::ReadLease(_)))
        {
            self.tick.notify_all();
        }
        self.perform(actions, context);
    }
}

/// Where a forwarded request's answer goes first: if NATS said nobody
/// serves the holder's node (it is gone), the holder is forgotten, so the
/// next message reads the lease again instead of forwarding to nobody.
struct Watch {
    to: ReplyTo,
    placed: Weak<Placed>,
    name: String,
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch").field("name", &self.name).finish()
    }
}

impl ReplySink for Watch {
    fn send(self: Box<Self>, outcome: Outcome) {
        if let Outcome::Answered(response) = &outcome {
            let gone = match response.status() {
                503 => response
                    .cause()
                    .is_some_and(|cause| cause.starts_with("no server serves")),
                504 => true,
                _ => false,
            };
            if gone {
                if let Some(placed) = self.placed.upgrade() {
                    placed.forget_holder(&self.name);
                }
            }
        }
        self.to.send(outcome);
    }
}

impl Placed {
    /// The holder `name` was forwarded to is gone: read the lease again.
    fn forget_holder(&self, name: &str) {
        let mut table = lock(&self.table);
        if let Some(entry) = table.get_mut(name) {
            if let Lease::Elsewhere { .. } = entry.lease {
                entry.lease = Lease::Unknown;
            }
        }
    }
}

/// Answers a request 503, saying why; drops anything else (at most once).
fn refuse(envelope: Envelope, why: &str) {
    if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
        request.respond(ActorResponse::failure(
            503,
            &format!("the placed actor is unavailable here: {why}"),
        ));
    }
}

/// The ticker thread: a round whenever one is due (or a message came).
fn ticker(placed: &Weak<Placed>) {
    loop {
        let Some(placed) = placed.upgrade() else {
            return;
        };
        let next = placed.round();
        let wait = next.map_or(Duration::from_secs(1), |at| {
            Duration::from_millis(at.saturating_sub(now_ms()).clamp(1, 1000))
        });
        let stopping = lock(&placed.stopping);
        if *stopping {
            return;
        }
        let (stopping, _) = placed
            .tick
            .wait_timeout(stopping, wait)
            .unwrap_or_else(|e| e.into_inner());
        if *stopping {
            return;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
