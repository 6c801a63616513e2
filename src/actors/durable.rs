//! Durable actors (`Routes::spawn_durable`): an owned actor whose state is
//! a serde type of the application's, loaded from the state store when the
//! actor first runs and written back after each message that changed it.
//!
//! The rule it keeps: **an answer that depends on a change leaves only
//! once the change is durable.** The actor wraps each request's reply in
//! a hold, runs the application's `receive`, and then compares the state's
//! JSON with what it was before: a changed state is a new epoch, and the
//! answers the message gave wait for it (`state::book`). One write is in
//! flight at a time; the changes made meanwhile go together in the next,
//! and the store commits the writes of many actors together, so a busy
//! actor pays neither one write nor one fsync per message.
//!
//! The store tells the actor how a write or a load went by mailing it
//! (the store works on a thread of its own, or on a poller's NATS link),
//! so everything here runs as the actor, one message at a time. A failed
//! write answers every held request 503 and puts the durable state back
//! (the changes since were never acknowledged); a write refused as stale
//! (someone else wrote the key) drops the state and reads it again. An
//! answer given after `receive` returned (from another thread, later)
//! waits for every change made before it.

use std::collections::VecDeque;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use log::{error, warn};
use uppercut::api::{AnyActor, AnySender, Envelope};

use crate::log_limit::WarnLimiter;
use crate::routes::actor::ActorRequest;
use crate::routes::actor_response::ActorResponse;
use crate::routes::reply::{Outcome, ReplySink, ReplyTo};
use crate::state::book::Book;
use crate::state::metrics::StateMetrics;
use crate::state::{DurableEnv, Revision, StateActor, StateStore, StoreError, Stored, Wake};

/// Messages that wait while the state loads, at most; past it, a request
/// is answered 503 at once.
const MAX_WAITING: usize = 4096;

/// What the store mails the actor.
#[derive(Debug)]
enum StateEvent {
    /// The state as read.
    Loaded(Result<Option<Stored>, StoreError>),
    /// The write of `epoch` went as `outcome` says.
    Committed {
        epoch: u64,
        outcome: Result<Revision, StoreError>,
    },
}

/// What a load read.
type Read = Result<Option<Stored>, StoreError>;

/// An answer, and where it goes.
type Answer = (ReplyTo, Outcome);

/// What the actor and the holds of its answers share.
#[derive(Default)]
struct Ledger {
    book: Book<Answer>,
    /// The application's `receive` runs: answers given now wait for its
    /// end, to learn whether it changed the state.
    running: bool,
    this_run: Vec<Answer>,
}

/// Where a request's answer goes first: held with the actor's ledger.
struct Hold {
    to: Option<ReplyTo>,
    ledger: Arc<Mutex<Ledger>>,
    metrics: Arc<StateMetrics>,
}

impl fmt::Debug for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hold").finish_non_exhaustive()
    }
}

impl ReplySink for Hold {
    fn send(mut self: Box<Self>, outcome: Outcome) {
        let Some(to) = self.to.take() else {
            return;
        };
        let mut ledger = lock(&self.ledger);
        if ledger.running {
            return ledger.this_run.push((to, outcome));
        }
        // Given after `receive` returned: it depends on every change so far.
        let released = ledger.book.answer((to, outcome));
        drop(ledger);
        match released {
            Some((to, outcome)) => to.send(outcome),
            None => {
                self.metrics.held.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Where the actor's state is.
enum Phase {
    Ready(Box<dyn StateActor>),
    /// A load is under way; messages wait.
    Loading,
    /// Not loaded (the store failed, or its bytes did not read): the next
    /// message tries again.
    Unloaded,
}

/// A durable actor around the application's state.
pub(crate) struct Durable {
    key: String,
    store: Arc<dyn StateStore>,
    wake: Wake,
    metrics: Arc<StateMetrics>,
    ledger: Arc<Mutex<Ledger>>,
    state: Phase,
    /// The state of a key never written.
    initial: Bytes,
    /// The state's JSON as of its newest change.
    latest: Bytes,
    /// What the write in flight writes.
    writing: Bytes,
    /// The state's JSON as last made durable (or read).
    durable: Bytes,
    /// `durable`'s revision in the store.
    revision: Revision,
    /// Messages that came while the state loads.
    waiting: VecDeque<Envelope>,
    /// An instance to read the state into while none is loaded.
    spare: Option<Box<dyn StateActor>>,
    /// A placed activation's lease: until when it may serve.
    serves_until: Option<Arc<AtomicU64>>,
    /// Write the state once read, before anything is answered.
    fence: bool,
}

impl Durable {
    /// The actor for `env.key` whose state starts as `initial` (for a key
    /// never written), read now where the store reads at once (the
    /// embedded file), else at its first message. An error says why the
    /// state cannot be had: the store cannot read it, or its bytes are not
    /// a state of this type.
    pub(crate) fn start(initial: Box<dyn StateActor>, env: DurableEnv) -> Result<Durable, String> {
        let json = initial
            .to_json()
            .map(Bytes::from)
            .map_err(|e| format!("actor {}: its state does not write as JSON: {e}", env.key))?;
        let mut actor = Durable {
            key: env.key,
            store: env.store,
            wake: env.wake,
            metrics: env.metrics,
            ledger: Arc::default(),
            state: Phase::Unloaded,
            latest: json.clone(),
            writing: json.clone(),
            durable: json.clone(),
            initial: json,
            spare: Some(initial),
            serves_until: env.serves_until,
            fence: env.fence,
            revision: 0,
            waiting: VecDeque::new(),
        };
        let loaded: Arc<Mutex<Option<Read>>> = Arc::default();
        if actor.store.reads_at_once() {
            let slot = Arc::clone(&loaded);
            actor
                .store
                .load(&actor.key, Box::new(move |read| *lock(&slot) = Some(read)));
        }
        let read = lock(&loaded).take();
        if let Some(read) = read {
            let key = actor.key.clone();
            let store = actor.store.kind();
            actor
                .loaded(read)
                .map_err(|why| format!("actor {key}: its state in the {store} store: {why}"))?;
        }
        Ok(actor)
    }

    /// Takes what a load read; the reason it cannot be used, if not.
    fn loaded(&mut self, read: Result<Option<Stored>, StoreError>) -> Result<(), String> {
        let stored = match read {
            Ok(Some(stored)) => stored,
            Ok(None) => Stored {
                bytes: self.initial.clone(),
                revision: 0,
            },
            Err(e) => {
                self.metrics.load(e.label());
                self.state = Phase::Unloaded;
                return Err(e.to_string());
            }
        };
        match self.read(&stored.bytes) {
            Ok(state) => {
                self.metrics.load(match stored.revision {
                    0 => "missing",
                    _ => "ok",
                });
                self.state = Phase::Ready(state);
                self.latest = stored.bytes.clone();
                self.writing = stored.bytes.clone();
                self.durable = stored.bytes;
                self.revision = stored.revision;
                if self.fence {
                    // The state as read, written again at once: a write an
                    // earlier activation still has in flight expects the
                    // revision this moves past, and is refused.
                    lock(&self.ledger).book.changed();
                    self.write_if_due();
                }
                Ok(())
            }
            Err(e) => {
                self.metrics.load("failed");
                Err(format!(
                    "revision {} does not read as the actor's state: {e}",
                    stored.revision
                ))
            }
        }
    }

    /// An instance holding the state `json` says; the actor has none
    /// meanwhile (on an error too: the caller says what it has).
    fn read(&mut self, json: &[u8]) -> Result<Box<dyn StateActor>, String> {
        let phase = std::mem::replace(&mut self.state, Phase::Unloaded);
        let mut state = match phase {
            Phase::Ready(state) => state,
            _ => self
                .spare
                .take()
                .ok_or("no instance to read the state into")?,
        };
        match state.read_json(json) {
            Ok(()) => Ok(state),
            Err(e) => {
                self.spare = Some(state);
                Err(e)
            }
        }
    }

    /// Asks the store for the state; messages wait for it.
    fn load(&mut self) {
        if let Phase::Ready(state) = std::mem::replace(&mut self.state, Phase::Loading) {
            self.spare = Some(state);
        }
        let wake = Arc::clone(&self.wake);
        self.store.load(
            &self.key,
            Box::new(move |read| mail(&wake, StateEvent::Loaded(read))),
        );
    }

    /// Keeps `envelope` until the state is loaded (at most `MAX_WAITING`).
    fn wait(&mut self, envelope: Envelope) {
        match self.waiting.len() < MAX_WAITING {
            true => self.waiting.push_back(envelope),
            false => self.refuse(envelope, "too many messages wait for the state to load"),
        }
    }

    /// Answers a request 503, saying `why`; drops anything else.
    fn refuse(&self, envelope: Envelope, why: &str) {
        if let Ok(request) = envelope.message.downcast::<ActorRequest>() {
            self.metrics.refused.fetch_add(1, Ordering::Relaxed);
            let why = format!("the state of {} is unavailable: {why}", self.key);
            request.respond(ActorResponse::failure(503, &why));
        }
    }

    /// Runs the application's `receive` with `envelope`, its answers held
    /// by the ledger; then notes whether the state changed, lets go the
    /// answers that can go, and starts a write if one is due. A panic
    /// puts the state back as it was before the message, and is handed
    /// back.
    fn run(
        &mut self,
        envelope: Envelope,
        sender: &mut dyn AnySender,
    ) -> Result<(), Box<dyn std::any::Any + Send>> {
        let Phase::Ready(state) = &mut self.state else {
            self.wait(envelope);
            return Ok(());
        };
        let envelope = hold(envelope, &self.ledger, &self.metrics);
        lock(&self.ledger).running = true;
        let ran = panic::catch_unwind(AssertUnwindSafe(|| state.receive(envelope, sender)));
        let mut answers = {
            let mut ledger = lock(&self.ledger);
            ledger.running = false;
            std::mem::take(&mut ledger.this_run)
        };
        let changed = match &ran {
            Ok(()) => state.to_json().map(Bytes::from),
            Err(_) => Ok(self.latest.clone()),
        };
        match changed {
            Ok(bytes) => {
                if ran.is_err() {
                    self.restore_latest();
                } else if bytes != self.latest {
                    self.latest = bytes;
                    lock(&self.ledger).book.changed();
                }
            }
            Err(e) => {
                error!(
                    "actor {}: its state does not write as JSON: {e}; the message's change is undone",
                    self.key
                );
                self.restore_latest();
                let why = format!("the state of {} does not write as JSON: {e}", self.key);
                for (_, outcome) in &mut answers {
                    *outcome = Outcome::Answered(ActorResponse::failure(500, &why));
                }
            }
        }
        self.answer(answers);
        self.write_if_due();
        ran
    }

    /// Puts the state back as of its newest change that was kept (after a
    /// panic, or a state that would not write).
    fn restore_latest(&mut self) {
        let latest = self.latest.clone();
        match self.read(&latest) {
            Ok(state) => self.state = Phase::Ready(state),
            Err(e) => {
                error!("actor {}: its state does not read back: {e}", self.key);
                self.state = Phase::Unloaded;
            }
        }
    }

    /// Lets `answers` go, or holds them for the change they depend on.
    fn answer(&self, answers: Vec<Answer>) {
        let mut released = Vec::new();
        {
            let mut ledger = lock(&self.ledger);
            for answer in answers {
                match ledger.book.answer(answer) {
                    Some(answer) => released.push(answer),
                    None => {
                        self.metrics.held.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        for (to, outcome) in released {
            to.send(outcome);
        }
    }

    /// Starts the write that is due, if one is: the state as it is now.
    fn write_if_due(&mut self) {
        let Some(epoch) = lock(&self.ledger).book.next_write() else {
            return;
        };
        self.writing = self.latest.clone();
        let wake = Arc::clone(&self.wake);
        self.store.write(
            &self.key,
            self.writing.clone(),
            self.revision,
            Box::new(move |outcome| mail(&wake, StateEvent::Committed { epoch, outcome })),
        );
    }

    /// What the store said.
    fn on_event(&mut self, event: StateEvent, sender: &mut dyn AnySender) {
        match event {
            StateEvent::Committed {
                epoch,
                outcome: Ok(revision),
            } => {
                self.revision = revision;
                self.durable = self.writing.clone();
                let released = lock(&self.ledger).book.committed(epoch);
                self.metrics
                    .held
                    .fetch_sub(released.len() as u64, Ordering::Relaxed);
                for (to, outcome) in released {
                    to.send(outcome);
                }
                self.write_if_due();
            }
            StateEvent::Committed {
                outcome: Err(e), ..
            } => self.write_failed(e),
            StateEvent::Loaded(read) => {
                if let Err(why) = self.loaded(read) {
                    static UNREAD: WarnLimiter = WarnLimiter::new();
                    if UNREAD.admit().is_some() {
                        warn!("actor {}: its state could not be read: {why}", self.key);
                    }
                    for envelope in std::mem::take(&mut self.waiting) {
                        self.refuse(envelope, &why);
                    }
                    return;
                }
                // In the order they came, before anything mailed since.
                while let Some(envelope) = self.waiting.pop_front() {
                    if let Err(panic) = self.run(envelope, sender) {
                        drop(panic);
                        warn!(
                            "actor {} panicked; its state is as before the message",
                            self.key
                        );
                    }
                }
            }
        }
    }

    /// A write failed: every answer held is refused, and the state goes
    /// back to what is durable (or, when someone else wrote the key, is
    /// read again).
    fn write_failed(&mut self, e: StoreError) {
        static FAILED: WarnLimiter = WarnLimiter::new();
        if let Some(suppressed) = FAILED.admit() {
            let more = match suppressed {
                0 => String::new(),
                n => format!(" ({n} more since the last report)"),
            };
            warn!(
                "actor {}: its state was not saved ({} store): {e}; held answers get 503{more}",
                self.key,
                self.store.kind()
            );
        }
        let failed = lock(&self.ledger).book.failed();
        let why = format!("the state of {} was not saved: {e}", self.key);
        self.metrics
            .held
            .fetch_sub(failed.len() as u64, Ordering::Relaxed);
        self.metrics
            .refused
            .fetch_add(failed.len() as u64, Ordering::Relaxed);
        for (to, _) in failed {
            to.send(Outcome::Answered(ActorResponse::failure(503, &why)));
        }
        match e {
            StoreError::Stale { .. } => self.load(),
            _ => {
                self.latest = self.durable.clone();
                self.restore_latest();
            }
        }
    }
}

impl Durable {
    /// Whether a placed activation's lease still lets it serve.
    fn may_serve(&self) -> bool {
        self.serves_until
            .as_ref()
            .is_none_or(|until| crate::state::lease::now_ms() < until.load(Ordering::Acquire))
    }
}

impl AnyActor for Durable {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        let Envelope { message, from, to } = envelope;
        let envelope = match message.downcast::<StateEvent>() {
            Ok(event) => return self.on_event(*event, sender),
            Err(message) => Envelope { message, from, to },
        };
        if !self.may_serve() {
            // Its lease is lost: another server may run the name now.
            return self.refuse(envelope, "its lease moved; retry");
        }
        match self.state {
            Phase::Ready(_) => {
                if let Err(panic) = self.run(envelope, sender) {
                    // The server's containment logs it and goes on.
                    panic::resume_unwind(panic);
                }
            }
            Phase::Loading => self.wait(envelope),
            Phase::Unloaded => {
                self.load();
                self.wait(envelope);
            }
        }
    }

    fn on_stop(&self, sender: &mut dyn AnySender) {
        if let Phase::Ready(state) = &self.state {
            state.on_stop(sender);
        }
    }
}

/// `envelope` with a request's reply held by `ledger`.
fn hold(envelope: Envelope, ledger: &Arc<Mutex<Ledger>>, metrics: &Arc<StateMetrics>) -> Envelope {
    let Envelope { message, from, to } = envelope;
    let message = match message.downcast::<ActorRequest>() {
        Ok(request) => {
            let (parts, reply_to) = request.into_parts();
            let held = reply_to.map(|to| {
                ReplyTo::Elsewhere(Box::new(Hold {
                    to: Some(to),
                    ledger: Arc::clone(ledger),
                    metrics: Arc::clone(metrics),
                }))
            });
            match held {
                Some(held) => Box::new(ActorRequest::new(parts, held)),
                None => Box::new(ActorRequest::unanswerable(parts)),
            }
        }
        Err(message) => message,
    };
    Envelope { message, from, to }
}

/// Mails `event` to the actor `wake` reaches.
fn mail(wake: &Wake, event: StateEvent) {
    match wake.get() {
        Some(wake) => wake(Envelope::of(event)),
        None => error!("a state event came before its actor could be reached: {event:?}"),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A durable actor's state run as a plain actor: without a store, its
/// state lives and dies with the process.
pub(crate) struct Plain(pub(crate) Box<dyn StateActor>);

impl AnyActor for Plain {
    fn receive(&mut self, envelope: Envelope, sender: &mut dyn AnySender) {
        self.0.receive(envelope, sender);
    }

    fn on_stop(&self, sender: &mut dyn AnySender) {
        self.0.on_stop(sender);
    }
}
