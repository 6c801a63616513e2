//! The actors the server owns (given to `Routes::spawn`, `spawn_per_poller`
//! and `spawn_blocking`), and where they run.
//!
//! Uppercut runs an actor by sending every message through its one
//! scheduler thread to a worker, and this server's workers are held by its
//! pollers; an actor route answered that way cost two scheduler trips and a
//! worker handed back per request. So the server runs the actors it owns
//! itself, as actix runs an actor on the arbiter that started it and tokio
//! runs a task woken on a worker on that worker:
//!
//! - a request's call runs its actor right on the connection's thread when
//!   the actor is free (`cell`), and the answer is written with the
//!   responses around it (`routes::reply`); a busy actor's holder
//!   runs the message next;
//! - each poller can have an instance of its own, which only its own
//!   connections run;
//! - actors that block get threads of their own (`blocking`), and so do
//!   handlers that block (`blocking_handler`);
//! - every owned actor keeps its uppercut address (`forwarder`), sends
//!   between owned actors never leave the server (`context`), `delay` has a
//!   thread of its own (`timer`), and what other threads leave for a poller
//!   waits in its `port`.
//!
//! `house` builds all of it at start from the route table; `directory`
//! finds an actor by address.

pub(crate) mod blocking;
pub(crate) mod blocking_handler;
pub(crate) mod cell;
pub(crate) mod contain;
pub(crate) mod context;
pub(crate) mod directory;
pub(crate) mod durable;
pub(crate) mod forwarder;
pub(crate) mod house;
pub(crate) mod placed;
pub(crate) mod port;
pub(crate) mod remote;
pub(crate) mod timer;
pub(crate) mod topics;
