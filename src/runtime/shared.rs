//! What a poller shares with each of its connection actors, whichever thread
//! runs them.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use mio::Registry;

use crate::actors::house::{ActorHouse, CallPath};
use crate::actors::port::PollerPort;
use crate::config::{Dispatch, Timeouts};
use crate::http::date::DateCache;
use crate::observe::access_log::AccessLog;
use crate::observe::metrics::PollerMetrics;
use crate::routes::reply::Replies;
use crate::routes::Routes;
use crate::runtime::balance::Balance;
use crate::runtime::lifecycle::ServerState;
use crate::runtime::timeouts::CoarseClock;
use crate::runtime::wakeup::{Mail, Outstanding, Parking};

/// What a poller shares with each of its connections.
pub(crate) struct Shared {
    pub routes: Arc<Routes>,
    pub date: DateCache,
    pub clock: CoarseClock,
    pub timeouts: Timeouts,
    pub dispatch: Dispatch,
    /// The poller's registry, to ask for WRITABLE while output is backed up.
    pub registry: Registry,
    /// The poller's actor address.
    pub poller: String,
    pub server: Arc<ServerState>,
    /// Numbers actor calls from 1, so an answer finds the call it answers
    /// even after its token has passed to another connection.
    pub call_ids: AtomicU64,
    /// Where actors' answers to those calls arrive.
    pub replies: Arc<Replies>,
    /// The actors the server owns.
    pub house: Arc<ActorHouse>,
    /// Where each actor route's requests go from this poller.
    pub paths: Vec<CallPath>,
    /// What other threads leave for this poller.
    pub port: Arc<PollerPort>,
    /// `system` dispatch: the poller's wakes not yet handled.
    pub outstanding: Outstanding,
    /// `system` dispatch: what connections are sending the poller.
    pub mail: Mail,
    /// Whether the poller is parked in `poll`, and how to wake it.
    pub parking: Arc<Parking>,
    /// Where each request is logged, with `--access-log`.
    pub access_log: Option<Arc<AccessLog>>,
    /// The pollers' connection counts and hand-off queues.
    pub balance: Arc<Balance>,
    /// This poller's place in `balance`.
    pub index: usize,
    /// This poller's counters, with `--metrics`.
    pub metrics: Option<Arc<PollerMetrics>>,
}

impl Shared {
    /// `connections` this poller held have closed.
    pub(crate) fn release(&self, connections: usize) {
        self.server.release(connections);
        self.balance.closed(self.index, connections);
    }
}
