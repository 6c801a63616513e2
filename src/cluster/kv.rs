//! JetStream key-value buckets over the pollers' NATS links: `--state
//! jetstream` (durable actors' state in a bucket named after the cluster's
//! prefix, shared by every server: [`JetStreamKv`]), and the leases of
//! placed actors (a bucket whose entries expire: `cluster::placement`).
//!
//! Reads and writes go over the links like any request to another server
//! (a key always through the same link, so its requests leave in order),
//! and their answers come back there: nothing blocks and no thread is
//! added. Each write is a publish with `Nats-Expected-Last-Subject-Sequence`
//! set to the revision the writer last read or wrote: a write refused for
//! a stale revision means someone else wrote the key, and the actor reads
//! it again rather than write over it. The writes of one poller's round
//! leave in one socket write, and JetStream acknowledges each once stored
//! (with `sync_interval: always`, once on disk).
//!
//! A bucket is created (idempotently, as the NATS clients do) before the
//! first request; until that answer comes, requests wait in order.

use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use log::{info, warn};

use crate::cluster::port::{Admit, JsDone, JsFailure, JsRequest, JsRetry, Outbound};
use crate::cluster::Cluster;
use crate::log_limit::WarnLimiter;
use crate::nats::jetstream::{self, Answer, WRONG_LAST_SEQUENCE};
use crate::nats::proto::Msg;
use crate::state::metrics::StateMetrics;
use crate::state::{Done, Revision, StateStore, StoreError, Stored};

/// Whether the bucket exists.
enum Made {
    /// Not known to: the next request creates it first.
    Unknown,
    /// Its creation is under way: requests wait here, in order.
    Creating(Vec<Op>),
    Ready,
}

/// A request to a bucket.
enum Op {
    Get(String, Done<Option<Stored>>),
    Put(String, Bytes, Revision, Done<Revision>),
    Purge(String, Done<()>),
}

impl Op {
    fn fail(self, error: StoreError) {
        match self {
            Op::Get(_, done) => done(Err(error)),
            Op::Put(.., done) => done(Err(error)),
            Op::Purge(_, done) => done(Err(error)),
        }
    }
}

/// One JetStream key-value bucket.
pub(crate) struct Bucket {
    cluster: Arc<Cluster>,
    name: String,
    replicas: usize,
    /// How long a value lives after it was written (0: for ever).
    max_age_ms: u64,
    /// How long a request's answer is awaited.
    timeout: Duration,
    made: Mutex<Made>,
    /// Itself, for the creation's answer to reach.
    me: Weak<Bucket>,
}

impl fmt::Debug for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bucket")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Bucket {
    /// The bucket `name` on `cluster`'s NATS, created with `replicas` and
    /// values that live `max_age_ms` (0: for ever) when missing.
    pub(crate) fn new(
        cluster: Arc<Cluster>,
        name: String,
        replicas: usize,
        max_age_ms: u64,
        timeout: Duration,
    ) -> Arc<Bucket> {
        Arc::new_cyclic(|me| Bucket {
            cluster,
            name,
            replicas,
            max_age_ms,
            timeout,
            made: Mutex::new(Made::Unknown),
            me: me.clone(),
        })
    }

    /// Reads `key`: its value and revision, or none.
    pub(crate) fn get(&self, key: &str, done: Done<Option<Stored>>) {
        self.when_made(Op::Get(key.to_string(), done));
    }

    /// Writes `bytes` at `key` if the key is at `expected` (0: has no
    /// value); gives the new revision, or `StoreError::Stale`.
    pub(crate) fn put(&self, key: &str, bytes: Bytes, expected: Revision, done: Done<Revision>) {
        self.when_made(Op::Put(key.to_string(), bytes, expected, done));
    }

    /// Removes every value of `key`.
    pub(crate) fn purge(&self, key: &str, done: Done<()>) {
        self.when_made(Op::Purge(key.to_string(), done));
    }

    /// Every key with a value, in order (for an export).
    pub(crate) fn keys(self: &Arc<Self>, done: Done<Vec<String>>) {
        self.keys_from(0, Vec::new(), done);
    }

    fn keys_from(self: &Arc<Self>, offset: usize, mut keys: Vec<String>, done: Done<Vec<String>>) {
        let (subject, body) = jetstream::keys_request(&self.name, offset);
        let bucket = Arc::clone(self);
        let answer: JsDone = Box::new(move |answer| {
            let page = answer.map_err(failure).and_then(|msg| {
                jetstream::parse_keys(&msg.payload, &bucket.name).map_err(|e| api_failure(&e))
            });
            match page {
                Ok((page, Some(next))) => {
                    keys.extend(page);
                    bucket.keys_from(next, keys, done);
                }
                Ok((page, None)) => {
                    keys.extend(page);
                    done(Ok(keys));
                }
                Err(e) => done(Err(e)),
            }
        });
        let name = self.name.clone();
        self.send(
            &name,
            (subject, Bytes::new(), body),
            JsRetry::Idempotent,
            answer,
        );
    }

    /// Sends a request for `key` through its link; `done` gets the answer.
    fn send(
        &self,
        key: &str,
        (subject, headers, payload): (String, Bytes, Bytes),
        retry: JsRetry,
        done: JsDone,
    ) {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        let port = self.cluster.port(hasher.finish() as usize);
        let request = JsRequest {
            subject,
            headers,
            payload,
            timeout: self.timeout,
            retry,
            done,
        };
        if let Err(refused) = port.push(Outbound::Js(request), Admit::Answer) {
            let _ = refused.item.refused(refused.error);
        }
    }

    /// Runs `op` now if the bucket exists; else has it wait for the
    /// bucket's creation (starting it).
    fn when_made(&self, op: Op) {
        let mut made = lock(&self.made);
        match &mut *made {
            Made::Ready => {
                drop(made);
                self.run(op);
            }
            Made::Creating(waiting) => waiting.push(op),
            Made::Unknown => {
                *made = Made::Creating(vec![op]);
                drop(made);
                self.create();
            }
        }
    }

    /// Creates the bucket; then runs what waited, or fails it.
    fn create(&self) {
        let (subject, body) = jetstream::create_request(&self.name, self.replicas, self.max_age_ms);
        let me = self.me.clone();
        let done: JsDone = Box::new(move |answer| {
            let Some(bucket) = me.upgrade() else {
                return;
            };
            let outcome = answer
                .map_err(failure)
                .and_then(|msg| jetstream::parse_create(&msg.payload).map_err(|e| api_failure(&e)));
            bucket.created(outcome);
        });
        let name = self.name.clone();
        self.send(
            &name,
            (subject, Bytes::new(), body),
            JsRetry::Idempotent,
            done,
        );
    }

    /// The bucket's creation answered.
    fn created(&self, outcome: Result<(), StoreError>) {
        let waiting = {
            let mut made = lock(&self.made);
            let next = match outcome {
                Ok(()) => Made::Ready,
                Err(_) => Made::Unknown,
            };
            match std::mem::replace(&mut *made, next) {
                Made::Creating(waiting) => waiting,
                _ => Vec::new(),
            }
        };
        match outcome {
            Ok(()) => {
                info!(
                    "JetStream bucket {} ({})",
                    self.name,
                    jetstream::stream_name(&self.name)
                );
                for op in waiting {
                    self.run(op);
                }
            }
            Err(e) => {
                static FAILED: WarnLimiter = WarnLimiter::new();
                if FAILED.admit().is_some() {
                    warn!("the JetStream bucket {} could not be made: {e}", self.name);
                }
                for op in waiting {
                    op.fail(e.clone());
                }
            }
        }
    }

    fn run(&self, op: Op) {
        match op {
            Op::Get(key, done) => {
                let (subject, body) = jetstream::get_request(&self.name, &key);
                let answer: JsDone = Box::new(move |answer| {
                    done(answer.map_err(failure).and_then(|msg| read(&msg)));
                });
                self.send(
                    &key,
                    (subject, Bytes::new(), body),
                    JsRetry::Idempotent,
                    answer,
                );
            }
            Op::Put(key, bytes, expected, done) => {
                let subject = jetstream::key_subject(&self.name, &key);
                let headers = jetstream::put_headers(expected);
                let answer: JsDone = Box::new(move |answer| {
                    done(answer.map_err(failure).and_then(|msg| {
                        jetstream::parse_pub_ack(&msg.payload).map_err(|e| match e {
                            Answer::Api(api) if api.err_code == WRONG_LAST_SEQUENCE => {
                                StoreError::Stale { expected }
                            }
                            other => api_failure(&other),
                        })
                    }));
                });
                self.send(&key, (subject, headers, bytes), JsRetry::Unheard, answer);
            }
            Op::Purge(key, done) => {
                let (subject, body) = jetstream::purge_request(&self.name, &key);
                let answer: JsDone = Box::new(move |answer| {
                    done(answer.map_err(failure).and_then(|msg| {
                        jetstream::parse_purge(&msg.payload).map_err(|e| api_failure(&e))
                    }));
                });
                // Not again after silence: a purge that was done, sent
                // again, could purge the next holder's lease.
                self.send(&key, (subject, Bytes::new(), body), JsRetry::Never, answer);
            }
        }
    }
}

/// The JetStream store of durable actors' state: a bucket named after the
/// cluster's prefix, whose values live for ever.
pub(crate) struct JetStreamKv {
    bucket: Arc<Bucket>,
    metrics: Arc<StateMetrics>,
}

impl fmt::Debug for JetStreamKv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.bucket.fmt(f)
    }
}

impl JetStreamKv {
    /// The bucket itself.
    pub(crate) fn bucket(&self) -> &Arc<Bucket> {
        &self.bucket
    }

    /// The bucket named after `cluster`'s prefix, created with `replicas`
    /// when missing; requests wait `timeout` for their answers.
    pub(crate) fn new(
        cluster: Arc<Cluster>,
        timeout: Duration,
        replicas: usize,
        metrics: Arc<StateMetrics>,
    ) -> Arc<JetStreamKv> {
        let name = cluster.config().prefix.clone();
        Arc::new(JetStreamKv {
            bucket: Bucket::new(cluster, name, replicas, 0, timeout),
            metrics,
        })
    }
}

impl StateStore for JetStreamKv {
    fn kind(&self) -> &'static str {
        "jetstream"
    }

    fn load(&self, key: &str, done: Done<Option<Stored>>) {
        self.bucket.get(key, done);
    }

    fn write(&self, key: &str, bytes: Bytes, expected: Revision, done: Done<Revision>) {
        let metrics = Arc::clone(&self.metrics);
        let started = Instant::now();
        self.bucket.put(
            key,
            bytes,
            expected,
            Box::new(move |outcome| {
                if outcome.is_ok() {
                    metrics.commit(started.elapsed());
                }
                metrics.write(match &outcome {
                    Ok(_) => "ok",
                    Err(e) => e.label(),
                });
                done(outcome);
            }),
        );
    }
}

/// What a read's answer says.
fn read(msg: &Msg) -> Result<Option<Stored>, StoreError> {
    jetstream::parse_get(&msg.payload)
        .map(|found| found.map(|(bytes, revision)| Stored { bytes, revision }))
        .map_err(|e| api_failure(&e))
}

/// Why a request has no answer, as a store error.
fn failure(why: JsFailure) -> StoreError {
    match why {
        JsFailure::Refused(e) => StoreError::Unavailable(e.to_string()),
        JsFailure::NoResponders => StoreError::Unavailable(
            "JetStream is not enabled on the NATS server (start nats-server with -js), \
             or the bucket's stream had no leader while it was tried"
                .into(),
        ),
        JsFailure::Lost => StoreError::Timeout,
    }
}

/// An answer JetStream gave that is an error.
fn api_failure(answer: &Answer) -> StoreError {
    match answer {
        Answer::Api(api) if api.code == 503 => StoreError::Unavailable(api.to_string()),
        Answer::Api(api) if api.description.contains("insufficient resources") => {
            StoreError::Full(api.to_string())
        }
        other => StoreError::Failed(other.to_string()),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
