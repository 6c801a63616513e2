//! What a poller shares with each of its connection actors, whichever thread
//! runs them: the routes and the actors behind them, the clock and date,
//! the server's phase, the wake-up state, and the counters. Fields are
//! private; each method answers one question or does one thing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use log::warn;
use mio::Registry;
use uppercut::api::{AnySender, Envelope};

use crate::actors::blocking_handler::HandlerJob;
use crate::actors::context::RunContext;
use crate::actors::house::{ActorHouse, CallPath};
use crate::actors::placed::name_for;
use crate::actors::port::PollerPort;
use crate::cluster::Cluster;
use crate::config::Timeouts;
use crate::http::date::{DateCache, DATE_LEN};
use crate::net::transport::{Accepted, Transport};
use crate::observe::access_log::AccessLog;
use crate::observe::metrics::PollerMetrics;
use crate::request_stream::Call;
use crate::request_stream::OUTPUT_HIGH_WATER;
use crate::routes::actor::ActorRequest;
use crate::routes::actor_response::ActorResponse;
use crate::routes::reply::{self, Outcome, Replies, ReplyTo};
use crate::routes::Routes;
use crate::runtime::balance::Balance;
use crate::runtime::lifecycle::{Phase, ServerState};
use crate::runtime::timeouts::CoarseClock;
use crate::runtime::wakeup::{Mail, Outstanding, Parking};
use crate::tls::TlsAcceptor;
use crate::websocket::handle::{MailPoster, WsHandle};
use crate::websocket::registry::WsRegistry;

/// What a poller is built with, besides its `Poll`.
pub(crate) struct PollerParts {
    pub(crate) index: usize,
    pub(crate) routes: Arc<Routes>,
    pub(crate) timeouts: Timeouts,
    /// The poller's registry, to ask for WRITABLE while output is backed up.
    pub(crate) registry: Registry,
    pub(crate) server: Arc<ServerState>,
    pub(crate) house: Arc<ActorHouse>,
    pub(crate) port: Arc<PollerPort>,
    pub(crate) parking: Arc<Parking>,
    pub(crate) access_log: Option<Arc<AccessLog>>,
    pub(crate) balance: Arc<Balance>,
    pub(crate) metrics: Option<Arc<PollerMetrics>>,
    /// With `--tls-cert`: what new connections' TLS sessions are made with.
    pub(crate) tls: Option<Arc<TlsAcceptor>>,
    /// With `--nats`: the cluster.
    pub(crate) cluster: Option<Arc<Cluster>>,
    /// HTTP/2 is on (`--http2`).
    pub(crate) http2: bool,
    /// Plain connections speak only HTTP/2 (`--http2 only`).
    pub(crate) http2_only: bool,
}

/// What a poller shares with each of its connections.
pub(crate) struct Shared {
    index: usize,
    /// The poller's actor address.
    address: String,
    routes: Arc<Routes>,
    date: DateCache,
    clock: CoarseClock,
    timeouts: Timeouts,
    registry: Registry,
    server: Arc<ServerState>,
    /// Numbers actor calls from 1, so an answer finds the call it answers
    /// even after its token has passed to another connection.
    call_ids: AtomicU64,
    /// Where actors' answers to those calls arrive.
    replies: Arc<Replies>,
    house: Arc<ActorHouse>,
    /// Where each actor route's requests go from this poller.
    paths: Vec<CallPath>,
    /// What other threads leave for this poller.
    port: Arc<PollerPort>,
    /// `system` dispatch: the poller's wakes not yet handled.
    outstanding: Outstanding,
    /// `system` dispatch: what connections are sending the poller.
    mail: Mail,
    /// Whether the poller is parked in `poll`, and how to wake it.
    parking: Arc<Parking>,
    access_log: Option<Arc<AccessLog>>,
    /// The pollers' connection counts and hand-off queues.
    balance: Arc<Balance>,
    metrics: Option<Arc<PollerMetrics>>,
    tls: Option<Arc<TlsAcceptor>>,
    cluster: Option<Arc<Cluster>>,
    http2: bool,
    http2_only: bool,
}

impl Shared {
    pub(crate) fn new(parts: PollerParts) -> Shared {
        let wake_parked = Arc::clone(&parts.parking);
        let replies = Replies::new(Box::new(move || wake_parked.wake_if_parked()));
        Shared {
            index: parts.index,
            address: format!("poller-{}", parts.index),
            date: DateCache::new(SystemTime::now()),
            clock: CoarseClock::new(),
            timeouts: parts.timeouts,
            registry: parts.registry,
            server: parts.server,
            call_ids: AtomicU64::new(0),
            replies: Arc::new(replies),
            paths: parts.house.paths(parts.index),
            house: parts.house,
            routes: parts.routes,
            port: parts.port,
            outstanding: Outstanding::default(),
            mail: Mail::default(),
            parking: parts.parking,
            access_log: parts.access_log,
            balance: parts.balance,
            metrics: parts.metrics,
            tls: parts.tls,
            cluster: parts.cluster,
            http2: parts.http2,
            http2_only: parts.http2_only,
        }
    }

    /// The transport for a socket just accepted: TLS with `--tls-cert`,
    /// else plain. `None` when no TLS session could be made (logged): the
    /// socket closes.
    pub(crate) fn transport(&self, socket: Accepted) -> Option<Transport> {
        let (true, Some(tls)) = (socket.tls, &self.tls) else {
            return Some(Transport::plain(socket));
        };
        match tls.session() {
            Ok(session) => Some(Transport::tls(socket, session, OUTPUT_HIGH_WATER)),
            Err(e) => {
                warn!("cannot make a TLS session: {e}");
                None
            }
        }
    }

    /// This poller's place among the pollers.
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// The poller's actor address.
    pub(crate) fn poller_address(&self) -> &str {
        &self.address
    }

    pub(crate) fn routes(&self) -> &Routes {
        &self.routes
    }

    pub(crate) fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Where the server is in its life.
    pub(crate) fn phase(&self) -> Phase {
        self.server.phase()
    }

    /// A connection closed by the end of a shutdown had a request
    /// unanswered or a response not all sent.
    pub(crate) fn note_cut_short(&self) {
        self.server.note_cut_short();
    }

    /// The poller's clock, as of its last wake-up, in ms.
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The `Date` value, as of the poller's last wake-up.
    pub(crate) fn date(&self) -> [u8; DATE_LEN] {
        self.date.current()
    }

    /// The poller woke up: reads the clock and refreshes the date; the
    /// clock's new reading.
    pub(crate) fn refresh_time(&self) -> u64 {
        let now_ms = self.clock.refresh();
        self.date.refresh(SystemTime::now());
        now_ms
    }

    /// Counts a new connection in, unless the server is full.
    pub(crate) fn admit(&self) -> bool {
        self.server.admit()
    }

    /// `connections` this poller held have closed.
    pub(crate) fn release(&self, connections: usize) {
        self.server.release(connections);
        self.balance.closed(self.index, connections);
    }

    /// A connection counted on poller `target` could not be handed to it
    /// (it drains or stopped): it closes here.
    pub(crate) fn release_handed(&self, target: usize) {
        self.server.release(1);
        self.balance.closed(target, 1);
    }

    /// The pollers' connection counts and hand-off queues.
    pub(crate) fn balance(&self) -> &Balance {
        &self.balance
    }

    /// A new call for the connection at `key`: its number, and where its
    /// answer goes.
    pub(crate) fn new_call(&self, key: usize) -> (u64, ReplyTo) {
        let call = self.call_ids.fetch_add(1, Ordering::Relaxed) + 1;
        let reply_to = ReplyTo::Connection {
            replies: Arc::clone(&self.replies),
            key,
            call,
        };
        (call, reply_to)
    }

    /// Sends `call`, as call `id` answered through `reply_to`, where its
    /// route goes; its answer if given before this returns (an actor that
    /// was free runs right here). A request for the poller's own upstream
    /// pool goes to `upstream`.
    pub(crate) fn dispatch_call(
        &self,
        call: Call,
        id: u64,
        reply_to: ReplyTo,
        sender: &dyn AnySender,
        upstream: &mut dyn FnMut(Envelope),
    ) -> Option<Outcome> {
        let timeout = self.routes().actor_routes()[call.actor].timeout;
        let request = ActorRequest::new(call.parts, reply_to);
        match self.call_path(call.actor) {
            CallPath::Cell(cell) => {
                let expected = reply::expect(self.reply_queue_id(), id);
                let context = self.actor_context(sender);
                context.deliver(cell, Envelope::of(request));
                expected.finish()
            }
            CallPath::Blocking(pool) => {
                pool.submit(Envelope::of(request));
                None
            }
            CallPath::BlockingHandler(pool, handler) => {
                let handler = Arc::clone(handler);
                pool.submit(Envelope::of(HandlerJob { handler, request }));
                None
            }
            CallPath::Upstream => {
                upstream(Envelope::of(request));
                None
            }
            // A placed name: its activation here, or its holder's.
            CallPath::Placed(name) => {
                let expected = reply::expect(self.reply_queue_id(), id);
                let context = self.actor_context(sender);
                match context.directory().placement() {
                    Some(placement) => {
                        placement.deliver(name, Envelope::of(request), false, &context)
                    }
                    // Dropped unanswered: 502 (never, once the server runs).
                    None => drop(request),
                }
                expected.finish()
            }
            // A placed name made from the request's path parameters.
            CallPath::PlacedTemplate(template) => {
                let name = match name_for(template, &request.request()) {
                    Ok(name) => name,
                    Err(why) => {
                        request.respond(ActorResponse::failure(400, &why));
                        return None;
                    }
                };
                let expected = reply::expect(self.reply_queue_id(), id);
                let context = self.actor_context(sender);
                match context.directory().placement() {
                    Some(placement) => {
                        placement.deliver(&name, Envelope::of(request), false, &context)
                    }
                    None => drop(request),
                }
                expected.finish()
            }
            // Another server's actor, through the poller's NATS link; a
            // request that cannot go is answered here, at once.
            CallPath::Remote(to) => {
                let cluster = self.cluster()?;
                let expected = reply::expect(self.reply_queue_id(), id);
                cluster.request(self.index(), to, request, timeout);
                expected.finish()
            }
        }
    }

    /// The reply queue, as `reply::expect` names it.
    pub(crate) fn reply_queue_id(&self) -> usize {
        Arc::as_ptr(&self.replies) as usize
    }

    /// The reply queue.
    pub(crate) fn replies(&self) -> &Replies {
        &self.replies
    }

    /// Where actor route `actor`'s requests go from this poller.
    pub(crate) fn call_path(&self, actor: usize) -> &CallPath {
        &self.paths[actor]
    }

    /// How owned actors run on this poller's thread (or on one of its
    /// connections), with `sender` as the uppercut sender there.
    pub(crate) fn actor_context<'a>(&'a self, sender: &'a dyn AnySender) -> RunContext<'a> {
        self.house.context(self.index, sender)
    }

    /// What other threads leave for this poller.
    pub(crate) fn port(&self) -> &PollerPort {
        &self.port
    }

    /// Registers the WebSocket connection at `key` on this poller, with at
    /// most `limit` bytes waiting for its client: its handle.
    pub(crate) fn open_websocket(&self, key: usize, limit: usize) -> WsHandle {
        let poster: Arc<dyn MailPoster> = Arc::clone(&self.port) as Arc<dyn MailPoster>;
        self.websockets().open(key, limit, poster)
    }

    /// The WebSocket connection `handle` closed: it leaves its topics.
    pub(crate) fn forget_websocket(&self, handle: &WsHandle) {
        self.house.directory().forget_websocket(handle);
    }

    /// The server's open WebSocket connections.
    pub(crate) fn websockets(&self) -> &WsRegistry {
        self.house.websockets()
    }

    /// `system` dispatch: the poller's wakes not yet handled.
    pub(crate) fn outstanding(&self) -> &Outstanding {
        &self.outstanding
    }

    /// `system` dispatch: what connections are sending the poller.
    pub(crate) fn mail(&self) -> &Mail {
        &self.mail
    }

    /// `system` dispatch: sends `envelope` to the poller as counted mail.
    pub(crate) fn mail_poller(&self, sender: &dyn AnySender, envelope: Envelope) {
        self.mail
            .send(sender, &self.address, envelope, &self.parking);
    }

    /// Whether the poller is parked in `poll`, and how to wake it.
    pub(crate) fn parking(&self) -> &Parking {
        &self.parking
    }

    /// Where each request is logged, with `--access-log`.
    pub(crate) fn access_log(&self) -> Option<&Arc<AccessLog>> {
        self.access_log.as_ref()
    }

    /// This poller's counters, with `--metrics`.
    pub(crate) fn metrics(&self) -> Option<&Arc<PollerMetrics>> {
        self.metrics.as_ref()
    }

    /// Adds `n` to one of the counters, with `--metrics`.
    #[inline]
    pub(crate) fn count(&self, counter: fn(&PollerMetrics) -> &AtomicU64, n: usize) {
        if let Some(metrics) = &self.metrics {
            metrics.add(counter(metrics), n as u64);
        }
    }

    /// HTTP/2 is on.
    pub(crate) fn http2(&self) -> bool {
        self.http2
    }

    /// Plain connections speak only HTTP/2.
    pub(crate) fn http2_only(&self) -> bool {
        self.http2_only
    }

    /// The cluster, with `--nats`.
    pub(crate) fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.as_ref()
    }

    /// Counts an envelope sent through uppercut's scheduler.
    pub(crate) fn count_envelope(&self) {
        self.count(|m| &m.envelopes, 1);
    }
}
