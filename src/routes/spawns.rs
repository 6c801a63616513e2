//! The actors a route table asks the server to own, and how each is to run:
//! one instance that runs where its message is (`Routes::spawn`), one
//! instance per poller (`Routes::spawn_per_poller`), or instances on threads
//! of their own that may block (`Routes::spawn_blocking`), or one instance
//! whose state the server keeps in its state store (`Routes::spawn_durable`).
//! The table only declares them; the server builds them at start
//! (`actors::house`).

use std::fmt;
use std::sync::{Arc, Mutex};

use uppercut::api::{Actor, AnyActor};

use crate::state::StateActor;

/// Makes the instance for one poller or one thread, given its index.
pub(crate) type Factory = Arc<dyn Fn(usize) -> Actor + Send + Sync>;

/// How the server runs an actor it owns.
#[derive(Clone)]
pub(crate) enum SpawnKind {
    /// One instance, which runs on whichever thread has a message for it
    /// and finds it free. Taken once, by the first server started with the
    /// table.
    Shared(Arc<Mutex<Option<Actor>>>),
    /// An instance per poller, each run only by its poller's connections.
    PerPoller(Factory),
    /// `threads` threads of its own, an instance each, that block while idle.
    Blocking { threads: usize, factory: Factory },
    /// One instance, as `Shared`, whose state is loaded from the server's
    /// state store and written back after each message that changed it.
    Durable(Arc<Mutex<Option<Box<dyn StateActor>>>>),
    /// Durable instances made on demand, one per name of the kind (the
    /// address, and `ADDRESS/ID`), each active on one server of the
    /// cluster at a time.
    Placed(PlacedFactory),
}

/// Makes the initial state of a placed name (for a name never written).
pub(crate) type PlacedFactory = Arc<dyn Fn(&str) -> Box<dyn StateActor> + Send + Sync>;

/// An actor the server owns, at its address.
#[derive(Clone)]
pub(crate) struct ActorSpec {
    pub(crate) address: String,
    pub(crate) kind: SpawnKind,
}

impl fmt::Debug for ActorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            SpawnKind::Shared(_) => "shared",
            SpawnKind::PerPoller(_) => "per poller",
            SpawnKind::Blocking { .. } => "blocking",
            SpawnKind::Durable(_) => "durable",
            SpawnKind::Placed(_) => "placed",
        };
        f.debug_struct("ActorSpec")
            .field("address", &self.address)
            .field("kind", &kind)
            .finish()
    }
}

impl ActorSpec {
    /// One instance of `actor` at `address`.
    pub(crate) fn shared(address: &str, actor: impl AnyActor + 'static) -> ActorSpec {
        let actor: Actor = Box::new(actor);
        ActorSpec {
            address: address.to_string(),
            kind: SpawnKind::Shared(Arc::new(Mutex::new(Some(actor)))),
        }
    }

    /// One durable instance at `address`, whose state starts as `initial`
    /// where the store has none.
    pub(crate) fn durable(address: &str, initial: Box<dyn StateActor>) -> ActorSpec {
        ActorSpec {
            address: address.to_string(),
            kind: SpawnKind::Durable(Arc::new(Mutex::new(Some(initial)))),
        }
    }

    /// Placed actors of kind `address`, whose initial state `factory`
    /// makes for each name.
    pub(crate) fn placed(address: &str, factory: PlacedFactory) -> ActorSpec {
        ActorSpec {
            address: address.to_string(),
            kind: SpawnKind::Placed(factory),
        }
    }

    /// An instance per poller, made by `factory`.
    pub(crate) fn per_poller<A, F>(address: &str, factory: F) -> ActorSpec
    where
        A: AnyActor + 'static,
        F: Fn(usize) -> A + Send + Sync + 'static,
    {
        ActorSpec {
            address: address.to_string(),
            kind: SpawnKind::PerPoller(boxed(factory)),
        }
    }

    /// `threads` blocking threads (at least one), an instance each.
    pub(crate) fn blocking<A, F>(address: &str, threads: usize, factory: F) -> ActorSpec
    where
        A: AnyActor + 'static,
        F: Fn(usize) -> A + Send + Sync + 'static,
    {
        ActorSpec {
            address: address.to_string(),
            kind: SpawnKind::Blocking {
                threads: threads.max(1),
                factory: boxed(factory),
            },
        }
    }
}

/// `factory`, making boxed actors.
fn boxed<A, F>(factory: F) -> Factory
where
    A: AnyActor + 'static,
    F: Fn(usize) -> A + Send + Sync + 'static,
{
    Arc::new(move |index| Box::new(factory(index)))
}
