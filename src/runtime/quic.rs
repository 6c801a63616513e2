//! HTTP/3 on a poller: its UDP socket (one per poller, SO_REUSEPORT on the
//! TLS port's number), its quinn-proto endpoint, and the HTTP/3 sessions
//! of the connections it owns, driven from the poller's loop as its
//! upstream pool and NATS link are. Nothing here blocks or has a thread.
//!
//! **Which poller owns a connection.** The kernel hashes each datagram's
//! four-tuple over the pollers' sockets, so a client's datagrams all reach
//! the poller its first one reached, which accepts the connection. The
//! connection IDs the server gives out carry that poller's index in their
//! first byte: a datagram that arrives elsewhere (the client's address
//! changed: a NAT rebinding, a migration) is handed to the owner, through
//! a queue the owner takes each round, as balanced sockets are.
//!
//! Each session's calls to actors go out as a TCP connection's do, through
//! [`Shared::dispatch_call`]; their answers come back through the poller's
//! reply queue under the key [`QUIC_CALLS`], and the endpoint finds the
//! session by the call's number.

use std::collections::{HashMap, HashSet};
use std::io::{self, ErrorKind};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use log::{debug, warn};
use mio::net::UdpSocket;
use mio::{Interest, Registry, Token};
use quinn_proto::{
    ConnectionHandle, ConnectionId, ConnectionIdGenerator, DatagramEvent, Endpoint, EndpointConfig,
    Incoming, ServerConfig, Transmit,
};
use uppercut::api::{AnySender, Envelope};

use crate::gateway::Serving;
use crate::h3::H3Error;
use crate::http3::session::{Limits, Session};
use crate::request_stream::CallEnd;
use crate::routes::reply::Delivery;
use crate::runtime::shared::Shared;
use crate::runtime::wakeup::Parking;

/// The poller's UDP socket's token.
pub(crate) const QUIC: Token = Token(usize::MAX - 4);
/// The key actors' answers to HTTP/3 requests come back under.
pub(crate) const QUIC_CALLS: usize = usize::MAX - 5;

/// The length of the connection IDs the server gives out: the poller's
/// index, then 7 random bytes.
const CID_LEN: usize = 8;
/// The largest datagram read.
const MAX_DATAGRAM: usize = 65_535;
/// Bytes of misrouted datagrams a poller may have waiting for it; past
/// it they are dropped (QUIC resends).
const HANDOFF_BYTES: usize = 4 << 20;

/// Connection IDs that name the poller that made them.
struct PollerCids {
    index: u8,
}

impl ConnectionIdGenerator for PollerCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut bytes = [0u8; CID_LEN];
        bytes[0] = self.index;
        let random = rustls::crypto::ring::default_provider().secure_random;
        // Without randomness the ID is still this poller's and unique
        // enough for quinn-proto, which checks collisions itself.
        let _ = random.fill(&mut bytes[1..]);
        ConnectionId::new(&bytes)
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// Datagrams that reached another poller's socket, by the poller that
/// owns their connection.
#[derive(Debug)]
pub(crate) struct QuicHandoff {
    queues: Vec<HandoffQueue>,
}

#[derive(Debug)]
struct HandoffQueue {
    datagrams: Mutex<(Vec<(SocketAddr, BytesMut)>, usize)>,
    queued: AtomicUsize,
    parking: Arc<Parking>,
}

impl QuicHandoff {
    /// Queues for the pollers whose parkings these are.
    pub(crate) fn new(parkings: &[Arc<Parking>]) -> QuicHandoff {
        QuicHandoff {
            queues: parkings
                .iter()
                .map(|parking| HandoffQueue {
                    datagrams: Mutex::new((Vec::new(), 0)),
                    queued: AtomicUsize::new(0),
                    parking: Arc::clone(parking),
                })
                .collect(),
        }
    }

    /// Hands `datagram` from `from` to poller `owner`; false when there is
    /// no such poller or its queue is full.
    fn hand(&self, owner: usize, from: SocketAddr, datagram: BytesMut) -> bool {
        let Some(queue) = self.queues.get(owner) else {
            return false;
        };
        {
            let mut held = queue.datagrams.lock().unwrap_or_else(|e| e.into_inner());
            if held.1 + datagram.len() > HANDOFF_BYTES {
                return false;
            }
            held.1 += datagram.len();
            held.0.push((from, datagram));
            queue.queued.fetch_add(1, Ordering::SeqCst);
        }
        queue.parking.wake_if_parked();
        true
    }

    /// Whether datagrams wait for poller `index`.
    pub(crate) fn has_queued(&self, index: usize) -> bool {
        self.queues
            .get(index)
            .is_some_and(|queue| queue.queued.load(Ordering::SeqCst) > 0)
    }

    /// Moves the datagrams waiting for poller `index` into `into`.
    fn take(&self, index: usize, into: &mut Vec<(SocketAddr, BytesMut)>) {
        let Some(queue) = self.queues.get(index) else {
            return;
        };
        if queue.queued.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut held = queue.datagrams.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::swap(&mut held.0, into);
        held.1 = 0;
        queue.queued.store(0, Ordering::SeqCst);
    }
}

/// The poller a datagram's connection belongs to, when its connection ID
/// is one the server gave out (a short header, or a Handshake packet);
/// `None` for what the kernel's hash must place (Initial and 0-RTT
/// packets name an ID the client chose).
pub(crate) fn owner_of(datagram: &[u8]) -> Option<usize> {
    let first = *datagram.first()?;
    let cid = if first & 0x80 == 0 {
        datagram.get(1..1 + CID_LEN)?
    } else {
        // Long header: version (4), DCID length, DCID. Handshake is type 2.
        if (first >> 4) & 0x3 != 2 || usize::from(*datagram.get(5)?) != CID_LEN {
            return None;
        }
        datagram.get(6..6 + CID_LEN)?
    };
    Some(usize::from(cid[0]))
}

/// One HTTP/3 connection the endpoint holds.
struct Held {
    session: Session,
    /// Counted against the server's connection limit.
    admitted: bool,
    /// Until the client's address is validated (a Retry's token, or the
    /// handshake done): the bytes it sent and the bytes sent to it, which
    /// may be at most three times as many (RFC 9000 §8.1). quinn-proto
    /// keeps the limit too, but lets a probe (PTO) pass it by up to a
    /// datagram; the endpoint drops what would pass it, as a loss.
    amplification: Option<(u64, u64)>,
}

/// A poller's HTTP/3: its socket, endpoint and sessions.
pub(crate) struct QuicEndpoint {
    socket: UdpSocket,
    index: usize,
    endpoint: Endpoint,
    handoff: Arc<QuicHandoff>,
    /// Where new connections' configuration comes from (SIGHUP replaces it).
    config: Box<dyn Fn() -> Option<Arc<ServerConfig>> + Send>,
    limits: Limits,
    sessions: HashMap<ConnectionHandle, Held>,
    /// Sessions to drive this round.
    dirty: HashSet<ConnectionHandle>,
    /// Calls sent, by number: the session, and when each times out (ms).
    calls: HashMap<u64, (ConnectionHandle, u64)>,
    readable: bool,
    recv: Box<[u8]>,
    send: Vec<u8>,
    handed: Vec<(SocketAddr, BytesMut)>,
    draining: bool,
    /// Unvalidated Initials past this many connections in their handshake
    /// get a Retry (RFC 9000 §8.1.2).
    retry_above: usize,
    /// Datagrams handed to another poller, and taken from others.
    pub(crate) handed_out: u64,
    pub(crate) handed_in: u64,
}

/// What every poller's endpoint shares.
pub(crate) struct QuicShared {
    /// The key of stateless resets: one for all, so that any poller can
    /// reset a connection another forgot.
    pub(crate) reset_key: Arc<dyn quinn_proto::crypto::HmacKey>,
    pub(crate) handoff: Arc<QuicHandoff>,
    pub(crate) limits: Limits,
    /// See `Config::http3_retry_above`.
    pub(crate) retry_above: usize,
}

impl QuicEndpoint {
    /// Poller `index`'s endpoint on `socket`, registered on `registry`,
    /// making connections with what `config` gives at the time.
    pub(crate) fn new(
        mut socket: UdpSocket,
        index: usize,
        shared: &QuicShared,
        config: Box<dyn Fn() -> Option<Arc<ServerConfig>> + Send>,
        registry: &Registry,
    ) -> io::Result<QuicEndpoint> {
        registry.register(&mut socket, QUIC, Interest::READABLE)?;
        let reset_key = Arc::clone(&shared.reset_key);
        let (handoff, limits, retry_above) = (
            Arc::clone(&shared.handoff),
            shared.limits,
            shared.retry_above,
        );
        let mut endpoint_config = EndpointConfig::new(reset_key);
        let poller = index as u8;
        endpoint_config.cid_generator(move || Box::new(PollerCids { index: poller }));
        let endpoint = Endpoint::new(Arc::new(endpoint_config), config(), true, None);
        Ok(QuicEndpoint {
            socket,
            index,
            endpoint,
            handoff,
            config,
            limits,
            sessions: HashMap::new(),
            dirty: HashSet::new(),
            calls: HashMap::new(),
            readable: true,
            recv: vec![0; MAX_DATAGRAM].into_boxed_slice(),
            send: Vec::with_capacity(MAX_DATAGRAM),
            handed: Vec::new(),
            draining: false,
            retry_above,
            handed_out: 0,
            handed_in: 0,
        })
    }

    /// The socket is readable.
    pub(crate) fn on_readable(&mut self) {
        self.readable = true;
    }

    /// When the nearest connection's timer (loss, idle, ack) falls due.
    pub(crate) fn next_timeout(&mut self) -> Option<Instant> {
        self.sessions
            .values_mut()
            .filter_map(|held| held.session.connection().poll_timeout())
            .min()
    }

    /// Runs a round: datagrams in (read and handed over), timers due,
    /// every session touched driven, its datagrams out. True when there
    /// was anything to do.
    pub(crate) fn run(
        &mut self,
        shared: &Shared,
        sender: &dyn AnySender,
        inbox: &mut Vec<Envelope>,
    ) -> bool {
        let now = Instant::now();
        let mut found = self.take_handed(now, shared);
        if std::mem::take(&mut self.readable) {
            found |= self.read_socket(now, shared);
        }
        for (&handle, held) in self.sessions.iter_mut() {
            let connection = held.session.connection();
            if connection.poll_timeout().is_some_and(|due| due <= now) {
                connection.handle_timeout(now);
                self.dirty.insert(handle);
            }
        }
        found |= !self.dirty.is_empty();
        let dirty: Vec<ConnectionHandle> = self.dirty.drain().collect();
        for handle in dirty {
            self.drive(handle, now, shared, sender, inbox);
        }
        found
    }

    /// Takes the datagrams other pollers handed over.
    fn take_handed(&mut self, now: Instant, shared: &Shared) -> bool {
        let mut handed = std::mem::take(&mut self.handed);
        self.handoff.take(self.index, &mut handed);
        let found = !handed.is_empty();
        for (from, datagram) in handed.drain(..) {
            self.handed_in += 1;
            self.handle(now, from, datagram, shared);
        }
        self.handed = handed;
        found
    }

    /// Reads the socket until it has nothing more.
    fn read_socket(&mut self, now: Instant, shared: &Shared) -> bool {
        let mut found = false;
        loop {
            match self.socket.recv_from(&mut self.recv) {
                Ok((len, from)) => {
                    found = true;
                    let datagram = BytesMut::from(&self.recv[..len]);
                    shared.count(|m| &m.bytes_received, len);
                    match owner_of(&datagram) {
                        Some(owner) if owner != self.index => {
                            if self.handoff.hand(owner, from, datagram) {
                                self.handed_out += 1;
                            }
                        }
                        _ => self.handle(now, from, datagram, shared),
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return found,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // An ICMP error for an earlier send, and the like.
                Err(e) => {
                    debug!("QUIC receive: {e}");
                    return found;
                }
            }
        }
    }

    /// One datagram from `from`.
    fn handle(&mut self, now: Instant, from: SocketAddr, datagram: BytesMut, shared: &Shared) {
        let len = datagram.len();
        let mut buf = std::mem::take(&mut self.send);
        buf.clear();
        match self
            .endpoint
            .handle(now, from, None, None, datagram, &mut buf)
        {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(held) = self.sessions.get_mut(&handle) {
                    if let Some((received, _)) = &mut held.amplification {
                        *received += len as u64;
                    }
                    held.session.connection().handle_event(event);
                    self.dirty.insert(handle);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                self.send = buf;
                return self.incoming(now, incoming, len, shared);
            }
            Some(DatagramEvent::Response(transmit)) => self.transmit(&buf, &transmit),
            None => {}
        }
        self.send = buf;
    }

    /// A client's first Initial: refused while draining or full, sent a
    /// Retry when many handshakes are under way and its address is not
    /// validated yet, else accepted.
    fn incoming(&mut self, now: Instant, incoming: Incoming, len: usize, shared: &Shared) {
        let validated = incoming.remote_address_validated();
        let mut buf = std::mem::take(&mut self.send);
        buf.clear();
        let handshaking = self.sessions.len();
        let outcome = if self.draining {
            Some(self.endpoint.refuse(incoming, &mut buf))
        } else if !incoming.remote_address_validated()
            && incoming.may_retry()
            && handshaking >= self.retry_above
        {
            shared.count(|m| &m.quic_retries, 1);
            self.endpoint.retry(incoming, &mut buf).ok()
        } else if !shared.admit() {
            shared.count(|m| &m.refused, 1);
            Some(self.endpoint.refuse(incoming, &mut buf))
        } else {
            let config = (self.config)();
            match self.endpoint.accept(incoming, now, &mut buf, config) {
                Ok((handle, connection)) => {
                    let peer = connection.remote_address();
                    shared.count(|m| &m.http3_connections, 1);
                    self.sessions.insert(
                        handle,
                        Held {
                            session: Session::new(connection, peer, self.limits),
                            admitted: true,
                            amplification: (!validated).then_some((len as u64, 0)),
                        },
                    );
                    self.dirty.insert(handle);
                    None
                }
                Err(error) => {
                    shared.release(1);
                    debug!("QUIC accept: {}", error.cause);
                    error.response
                }
            }
        };
        if let Some(transmit) = outcome {
            self.transmit(&buf, &transmit);
        }
        self.send = buf;
    }

    /// Drives one session: its streams served, its calls sent, its
    /// events passed to the endpoint and back, its datagrams sent; and
    /// forgets it once quinn-proto has drained it.
    fn drive(
        &mut self,
        handle: ConnectionHandle,
        now: Instant,
        shared: &Shared,
        sender: &dyn AnySender,
        inbox: &mut Vec<Envelope>,
    ) {
        let date = shared.date();
        let serving = Serving {
            routes: shared.routes(),
            date: &date,
            log: shared.access_log(),
            metrics: shared.metrics(),
        };
        let Some(held) = self.sessions.get_mut(&handle) else {
            return;
        };
        let session = &mut held.session;
        let (begun, _, resets) = session.progress();
        if self.draining {
            session.go_away(now);
        }
        session.drive(now, &serving);
        loop {
            let calls = session.take_calls();
            if calls.is_empty() {
                break;
            }
            for (stream, call) in calls {
                let timeout = shared.routes().actor_routes()[call.actor].timeout;
                let (id, reply_to) = shared.new_call(QUIC_CALLS);
                session.sent_call(stream, id);
                let mut upstream = |request: Envelope| inbox.push(request);
                match shared.dispatch_call(call, id, reply_to, sender, &mut upstream) {
                    Some(outcome) => session.complete_call(id, CallEnd::Outcome(outcome), &serving),
                    None => {
                        let deadline = shared.now_ms() + timeout.as_millis() as u64;
                        self.calls.insert(id, (handle, deadline));
                    }
                }
            }
            session.drive(now, &serving);
        }
        let (now_begun, _, now_resets) = session.progress();
        shared.count(|m| &m.http3_streams, (now_begun - begun) as usize);
        shared.count(|m| &m.http3_resets, (now_resets - resets) as usize);
        self.flush(handle, now, shared);
    }

    /// Passes a session's endpoint events along and sends its datagrams.
    fn flush(&mut self, handle: ConnectionHandle, now: Instant, shared: &Shared) {
        let mut buf = std::mem::take(&mut self.send);
        let Some(held) = self.sessions.get_mut(&handle) else {
            self.send = buf;
            return;
        };
        let connection = held.session.connection();
        if !connection.is_handshaking() {
            held.amplification = None;
        }
        while let Some(event) = connection.poll_endpoint_events() {
            if let Some(event) = self.endpoint.handle_event(handle, event) {
                connection.handle_event(event);
            }
        }
        loop {
            buf.clear();
            let Some(transmit) = connection.poll_transmit(now, 1, &mut buf) else {
                break;
            };
            if let Some((received, sent)) = &mut held.amplification {
                if *sent + transmit.size as u64 > 3 * *received {
                    continue;
                }
                *sent += transmit.size as u64;
            }
            shared.count(|m| &m.bytes_sent, transmit.size);
            send(&self.socket, &buf, &transmit);
        }
        let drained = connection.is_drained();
        self.send = buf;
        if drained {
            if let Some(held) = self.sessions.remove(&handle) {
                if held.admitted {
                    shared.release(1);
                }
            }
            self.calls.retain(|_, (owner, _)| *owner != handle);
        }
    }

    /// Sends what the endpoint answered for itself.
    fn transmit(&self, buf: &[u8], transmit: &Transmit) {
        send(&self.socket, buf, transmit);
    }

    /// An actor's answer to a call an HTTP/3 request made.
    pub(crate) fn deliver(
        &mut self,
        delivery: Delivery,
        shared: &Shared,
        sender: &dyn AnySender,
        inbox: &mut Vec<Envelope>,
    ) {
        let Some((handle, _)) = self.calls.remove(&delivery.call) else {
            return;
        };
        let date = shared.date();
        let serving = Serving {
            routes: shared.routes(),
            date: &date,
            log: shared.access_log(),
            metrics: shared.metrics(),
        };
        if let Some(held) = self.sessions.get_mut(&handle) {
            let end = CallEnd::Outcome(delivery.outcome);
            held.session.complete_call(delivery.call, end, &serving);
            self.drive(handle, Instant::now(), shared, sender, inbox);
        }
    }

    /// Calls past their timeout answer 504.
    pub(crate) fn sweep(
        &mut self,
        now_ms: u64,
        shared: &Shared,
        sender: &dyn AnySender,
        inbox: &mut Vec<Envelope>,
    ) {
        let late: Vec<(u64, ConnectionHandle)> = self
            .calls
            .iter()
            .filter(|(_, (_, deadline))| *deadline <= now_ms)
            .map(|(&id, &(handle, _))| (id, handle))
            .collect();
        if late.is_empty() {
            return;
        }
        let date = shared.date();
        let serving = Serving {
            routes: shared.routes(),
            date: &date,
            log: shared.access_log(),
            metrics: shared.metrics(),
        };
        for (id, handle) in late {
            self.calls.remove(&id);
            if let Some(held) = self.sessions.get_mut(&handle) {
                held.session.complete_call(id, CallEnd::TimedOut, &serving);
                self.dirty.insert(handle);
            }
        }
        let dirty: Vec<ConnectionHandle> = self.dirty.drain().collect();
        for handle in dirty {
            self.drive(handle, Instant::now(), shared, sender, inbox);
        }
    }

    /// The server drains: no new connection; each one is sent a GOAWAY,
    /// and closed (CONNECTION_CLOSE, `H3_NO_ERROR`) once its requests are
    /// answered.
    pub(crate) fn begin_drain(
        &mut self,
        shared: &Shared,
        sender: &dyn AnySender,
        inbox: &mut Vec<Envelope>,
    ) {
        if self.draining {
            return;
        }
        self.draining = true;
        let handles: Vec<ConnectionHandle> = self.sessions.keys().copied().collect();
        for handle in handles {
            self.drive(handle, Instant::now(), shared, sender, inbox);
        }
    }

    /// The server stops: every connection still open is closed now, with a
    /// CONNECTION_CLOSE sent.
    pub(crate) fn stop(&mut self, shared: &Shared) {
        let now = Instant::now();
        let handles: Vec<ConnectionHandle> = self.sessions.keys().copied().collect();
        for handle in handles {
            if let Some(held) = self.sessions.get_mut(&handle) {
                held.session.close(now, H3Error::NoError);
            }
            self.flush(handle, now, shared);
        }
        for (_, held) in self.sessions.drain() {
            if held.admitted {
                shared.release(1);
            }
        }
    }

    /// Nothing is open: a draining poller may stop.
    pub(crate) fn is_idle(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The socket, to deregister it.
    pub(crate) fn deregister(&mut self, registry: &Registry) {
        if let Err(e) = registry.deregister(&mut self.socket) {
            debug!("deregister the QUIC socket: {e}");
        }
    }
}

/// Sends one datagram (or, with a segment size, several) of `buf`. A
/// socket that refuses drops it: QUIC's loss recovery sends it again.
fn send(socket: &UdpSocket, buf: &[u8], transmit: &Transmit) {
    let bytes = &buf[..transmit.size];
    let segment = transmit.segment_size.unwrap_or(transmit.size).max(1);
    for datagram in bytes.chunks(segment) {
        match socket.send_to(datagram, transmit.destination) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            Err(e) => {
                warn!("QUIC send to {}: {e}", transmit.destination);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_is_read_from_the_servers_connection_ids() {
        // A short header: flags, then our 8-byte ID.
        let short = [0x40, 3, 1, 2, 3, 4, 5, 6, 7, 0xaa];
        assert_eq!(owner_of(&short), Some(3));
        // A Handshake packet (type 2): version, length 8, our ID.
        let handshake = [0xe0, 0, 0, 0, 1, 8, 5, 1, 2, 3, 4, 5, 6, 7, 0];
        assert_eq!(owner_of(&handshake), Some(5));
        // An Initial names the client's ID: the kernel's hash places it.
        let initial = [0xc0, 0, 0, 0, 1, 8, 5, 1, 2, 3, 4, 5, 6, 7, 0];
        assert_eq!(owner_of(&initial), None);
        assert_eq!(owner_of(&[0x40, 1]), None);
        assert_eq!(owner_of(&[]), None);
        let mut cids = PollerCids { index: 9 };
        let cid = cids.generate_cid();
        assert_eq!((cid.len(), cid[0]), (CID_LEN, 9));
    }
}
