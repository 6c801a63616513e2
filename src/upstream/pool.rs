//! The upstream pool of one poller: up to `conns` keep-alive connections to the
//! `--upstream` service, registered on the poller's own `Poll`, a bounded queue
//! of requests waiting for one, and the replies owed to connection actors.
//! A request never opens a connection while one is idle; a connection that
//! breaks is dropped, and the next request that needs one opens a new one.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use log::debug;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use slab::Slab;

use crate::config::UpstreamConfig;
use crate::http::response_parser::{Parsed, ResponseParser};
use crate::net::socket::write_until_blocked;
use crate::observe::metrics::{PollerMetrics, UpstreamResult};
use crate::routes::actor::ActorRequest;
use crate::routes::actor_response::ActorResponse;
use crate::upstream::failure::UpstreamFailure;
use crate::upstream::json;

/// Upstream connections use tokens from here up; connection actors use small ones.
pub(crate) const FIRST_TOKEN: usize = usize::MAX / 2;
/// Bytes read from an upstream socket at a time.
const READ_CHUNK: usize = 16 * 1024;

/// A request, and when it must be answered by.
struct Job {
    request: ActorRequest,
    deadline_ms: u64,
    /// Retried once already on a fresh connection.
    retried: bool,
}

struct Link {
    socket: TcpStream,
    connected: bool,
    /// Has answered a request before: a failure before any byte of the next
    /// answer means the upstream closed it while idle, so retry elsewhere.
    reused: bool,
    job: Option<Job>,
    written: usize,
    /// The answer's bytes so far, kept whole until `response` has read it all.
    received: BytesMut,
    response: ResponseParser,
}

pub(crate) struct UpstreamPool {
    config: UpstreamConfig,
    request_bytes: Bytes,
    links: Slab<Link>,
    idle: Vec<usize>,
    queue: VecDeque<Job>,
    /// Where each read lands before it is added to its link's answer; kept,
    /// so a read event neither allocates nor zeroes a buffer.
    read_buf: Box<[u8]>,
    /// The poller's counters, with `--metrics`.
    metrics: Option<Arc<PollerMetrics>>,
}

impl UpstreamPool {
    pub(crate) fn new(config: UpstreamConfig) -> UpstreamPool {
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
            config.path, config.host
        );
        UpstreamPool {
            config,
            request_bytes: Bytes::from(request),
            links: Slab::new(),
            idle: Vec::new(),
            queue: VecDeque::new(),
            read_buf: vec![0; READ_CHUNK].into_boxed_slice(),
            metrics: None,
        }
    }

    /// Counts requests by how they end, and publishes the links' states.
    pub(crate) fn count_to(self, metrics: Option<Arc<PollerMetrics>>) -> UpstreamPool {
        UpstreamPool { metrics, ..self }
    }

    /// Publishes how many links are idle and busy, for `/metrics`.
    pub(crate) fn publish_links(&self) {
        if let Some(metrics) = &self.metrics {
            let idle = self.idle.len();
            metrics.set_upstream_links(idle, self.links.len().saturating_sub(idle));
        }
    }

    /// Takes `request` for the upstream's JSON; the answer goes back
    /// through the request, as an actor route's does.
    pub(crate) fn submit(&mut self, request: ActorRequest, now_ms: u64, registry: &Registry) {
        let job = Job {
            request,
            deadline_ms: now_ms + self.config.timeout.as_millis() as u64,
            retried: false,
        };
        self.dispatch(job, registry);
    }

    /// Gives `job` an idle connection, a new one, or a place in the queue.
    fn dispatch(&mut self, job: Job, registry: &Registry) {
        if let Some(key) = self.idle.pop() {
            if let Some(link) = self.links.get_mut(key) {
                link.job = Some(job);
                link.written = 0;
                return self.progress(key, registry);
            }
        }
        if self.links.len() < self.config.conns {
            return self.connect(job, registry);
        }
        if self.queue.len() < self.config.queue {
            self.queue.push_back(job);
        } else {
            self.answer(job, Err(UpstreamFailure::QueueFull));
        }
    }

    fn connect(&mut self, job: Job, registry: &Registry) {
        let mut socket = match TcpStream::connect(self.config.addr) {
            Ok(socket) => socket,
            Err(e) => return self.answer(job, Err(UpstreamFailure::from_io(&e, true))),
        };
        let key = self.links.vacant_key();
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = registry.register(&mut socket, Token(FIRST_TOKEN + key), interest) {
            debug!("upstream register: {e}");
            return self.answer(job, Err(UpstreamFailure::Broken));
        }
        self.links.insert(Link {
            socket,
            connected: false,
            reused: false,
            job: Some(job),
            written: 0,
            received: BytesMut::new(),
            response: ResponseParser::default(),
        });
    }

    /// A readiness event for the upstream connection behind `token`.
    pub(crate) fn on_event(&mut self, token: Token, registry: &Registry) {
        self.progress(token.0 - FIRST_TOKEN, registry);
    }

    /// Moves the link's exchange as far as its socket allows.
    fn progress(&mut self, key: usize, registry: &Registry) {
        let Some(link) = self.links.get_mut(key) else {
            return;
        };
        if !link.connected {
            if let Ok(Some(e)) | Err(e) = link.socket.take_error() {
                return self.fail(key, UpstreamFailure::from_io(&e, true), registry);
            }
            match link.socket.peer_addr() {
                Ok(_) => link.connected = true,
                // Still connecting: a later event will say how it went.
                Err(e) if e.kind() == ErrorKind::NotConnected => return,
                Err(e) => return self.fail(key, UpstreamFailure::from_io(&e, true), registry),
            }
        }
        if link.job.is_none() {
            // Idle: a writable edge is harmless, but the upstream closing the
            // connection, or sending what nobody asked for, ends it.
            let mut probe = [0u8; 1];
            return match link.socket.read(&mut probe) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                _ => self.drop_link(key, registry),
            };
        }
        match write_until_blocked(&mut link.socket, &self.request_bytes[link.written..]) {
            Ok(len) => link.written += len,
            Err(e) => return self.fail(key, UpstreamFailure::from_io(&e, false), registry),
        }
        if link.written < self.request_bytes.len() {
            return;
        }
        let mut eof = false;
        loop {
            match link.socket.read(&mut self.read_buf) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(len) => link.received.extend_from_slice(&self.read_buf[..len]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return self.fail(key, UpstreamFailure::from_io(&e, false), registry),
            }
        }
        match link.response.parse(&mut link.received, eof) {
            Parsed::Incomplete if eof => self.fail(key, UpstreamFailure::Closed, registry),
            Parsed::Incomplete => {}
            Parsed::Invalid => self.fail(key, UpstreamFailure::NotHttp, registry),
            Parsed::TooLarge => self.fail(key, UpstreamFailure::TooLarge, registry),
            Parsed::Complete(response) => {
                let result = if response.status != 200 {
                    Err(UpstreamFailure::Status(response.status))
                } else if !json::is_valid(&response.body) {
                    Err(UpstreamFailure::NotJson)
                } else {
                    Ok(response.body)
                };
                let job = link.job.take();
                link.reused = true;
                if let Some(job) = job {
                    self.answer(job, result);
                }
                if response.keep_alive && !eof {
                    self.idle.push(key);
                    self.next_in_queue(registry);
                } else {
                    self.drop_link(key, registry);
                }
            }
        }
    }

    /// The link broke: its request is retried once on a fresh connection if
    /// the upstream had closed an idle connection under it, else answered 502.
    fn fail(&mut self, key: usize, failure: UpstreamFailure, registry: &Registry) {
        let Some(mut link) = self.links.try_remove(key) else {
            return;
        };
        self.idle.retain(|&idle| idle != key);
        let _ = registry.deregister(&mut link.socket);
        if let Some(mut job) = link.job.take() {
            if link.reused && link.received.is_empty() && !job.retried {
                job.retried = true;
                self.connect(job, registry);
            } else {
                self.answer(job, Err(failure));
            }
        }
        self.next_in_queue(registry);
    }

    fn drop_link(&mut self, key: usize, registry: &Registry) {
        if let Some(mut link) = self.links.try_remove(key) {
            let _ = registry.deregister(&mut link.socket);
        }
        self.idle.retain(|&idle| idle != key);
        self.next_in_queue(registry);
    }

    /// A connection became idle or its place became free: serve the queue.
    fn next_in_queue(&mut self, registry: &Registry) {
        if let Some(job) = self.queue.pop_front() {
            self.dispatch(job, registry);
        }
    }

    /// Answers 504 for every request past its deadline; a connection whose
    /// request timed out is in an unknown state, so it is dropped.
    pub(crate) fn expire(&mut self, now_ms: u64, registry: &Registry) {
        while self
            .queue
            .front()
            .is_some_and(|job| job.deadline_ms <= now_ms)
        {
            if let Some(job) = self.queue.pop_front() {
                self.answer(job, Err(UpstreamFailure::TimedOut));
            }
        }
        let late: Vec<usize> = self
            .links
            .iter()
            .filter(|(_, link)| {
                link.job
                    .as_ref()
                    .is_some_and(|job| job.deadline_ms <= now_ms)
            })
            .map(|(key, _)| key)
            .collect();
        for key in late {
            if let Some(job) = self.links.get_mut(key).and_then(|link| link.job.take()) {
                self.answer(job, Err(UpstreamFailure::TimedOut));
            }
            self.drop_link(key, registry);
        }
    }

    fn answer(&mut self, job: Job, result: Result<Bytes, UpstreamFailure>) {
        if let Some(metrics) = &self.metrics {
            metrics.upstream(
                result
                    .as_ref()
                    .map_or_else(|f| f.counted_as(), |_| UpstreamResult::Ok),
            );
        }
        let response = match result {
            Ok(body) => ActorResponse::json(body),
            Err(failure) => {
                failure.warn(self.config.addr);
                failure.response()
            }
        };
        job.request.respond(response);
    }
}
