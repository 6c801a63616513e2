//! `--state jetstream`: durable actors' state in a JetStream key-value
//! bucket on the cluster's NATS, named after the cluster's prefix, shared
//! by every server.
//!
//! Reads and writes go over the pollers' NATS links like any request to
//! another server (a key always through the same link, so one actor's
//! requests leave in order), and their answers come back there: nothing
//! blocks and no thread is added. Each write is a publish with
//! `Nats-Expected-Last-Subject-Sequence` set to the revision the actor last
//! read or wrote: a write refused for a stale revision means someone else
//! wrote the key, and the actor reads it again rather than write over it.
//! The writes of one poller's round leave in one socket write, and
//! JetStream acknowledges each once stored (with `sync_interval: always`,
//! once on disk).
//!
//! The bucket is created (idempotently, as the NATS clients do) before the
//! first read or write; until that answer comes, requests wait in order.

use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use log::{info, warn};

use crate::cluster::port::{Admit, JsDone, JsFailure, JsRequest, Outbound};
use crate::cluster::Cluster;
use crate::log_limit::WarnLimiter;
use crate::nats::jetstream::{self, Answer, WRONG_LAST_SEQUENCE};
use crate::nats::proto::Msg;
use crate::state::metrics::StateMetrics;
use crate::state::{Done, Revision, StateStore, StoreError, Stored};

/// Where the bucket is.
enum Bucket {
    /// Not known to exist: the next request creates it first.
    Unknown,
    /// Its creation is under way: requests wait here, in order.
    Creating(Vec<Pending>),
    /// It exists.
    Ready,
}

/// A request that waits for the bucket.
enum Pending {
    Load(String, Done<Option<Stored>>),
    Write(String, Bytes, Revision, Done<Revision>),
}

/// The JetStream store.
pub(crate) struct JetStreamKv {
    cluster: Arc<Cluster>,
    bucket: String,
    timeout: Duration,
    replicas: usize,
    state: Arc<Mutex<Bucket>>,
    metrics: Arc<StateMetrics>,
    /// Itself, for the creation's answer to reach.
    me: std::sync::Weak<JetStreamKv>,
}

impl fmt::Debug for JetStreamKv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JetStreamKv")
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

impl JetStreamKv {
    /// The bucket named after `cluster`'s prefix, created with `replicas`
    /// when missing; requests wait `timeout` for their answers.
    pub(crate) fn new(
        cluster: Arc<Cluster>,
        timeout: Duration,
        replicas: usize,
        metrics: Arc<StateMetrics>,
    ) -> Arc<JetStreamKv> {
        let bucket = cluster.config().prefix.clone();
        Arc::new_cyclic(|me| JetStreamKv {
            cluster,
            bucket,
            timeout,
            replicas,
            state: Arc::new(Mutex::new(Bucket::Unknown)),
            metrics,
            me: me.clone(),
        })
    }

    /// Sends a request for `key` through its link; `done` gets the answer.
    fn send(&self, key: &str, subject: String, headers: Bytes, payload: Bytes, done: JsDone) {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        let port = self.cluster.port(hasher.finish() as usize);
        let request = JsRequest {
            subject,
            headers,
            payload,
            timeout: self.timeout,
            done,
        };
        if let Err(refused) = port.push(Outbound::Js(request), Admit::Answer) {
            let _ = refused.item.refused(refused.error);
        }
    }

    /// Runs `pending` now if the bucket exists; else has it wait for the
    /// bucket's creation (starting it).
    fn when_ready(&self, pending: Pending) {
        let mut state = lock(&self.state);
        match &mut *state {
            Bucket::Ready => {
                drop(state);
                self.run(pending);
            }
            Bucket::Creating(waiting) => waiting.push(pending),
            Bucket::Unknown => {
                *state = Bucket::Creating(vec![pending]);
                drop(state);
                self.create();
            }
        }
    }

    /// Creates the bucket; then runs what waited, or fails it.
    fn create(&self) {
        let (subject, body) = jetstream::create_request(&self.bucket, self.replicas);
        let me = self.me.clone();
        let done: JsDone = Box::new(move |answer| {
            let Some(kv) = me.upgrade() else {
                return;
            };
            let outcome = answer
                .map_err(failure)
                .and_then(|msg| jetstream::parse_create(&msg.payload).map_err(|e| api_failure(&e)));
            kv.created(outcome);
        });
        let bucket = self.bucket.clone();
        self.send(&bucket, subject, Bytes::new(), body, done);
    }

    /// The bucket's creation answered.
    fn created(&self, outcome: Result<(), StoreError>) {
        let waiting = {
            let mut state = lock(&self.state);
            let next = match outcome {
                Ok(()) => Bucket::Ready,
                Err(_) => Bucket::Unknown,
            };
            match std::mem::replace(&mut *state, next) {
                Bucket::Creating(waiting) => waiting,
                _ => Vec::new(),
            }
        };
        match outcome {
            Ok(()) => {
                info!(
                    "state: JetStream bucket {} ({})",
                    self.bucket,
                    jetstream::stream_name(&self.bucket)
                );
                for pending in waiting {
                    self.run(pending);
                }
            }
            Err(e) => {
                static FAILED: WarnLimiter = WarnLimiter::new();
                if FAILED.admit().is_some() {
                    warn!(
                        "state: the JetStream bucket {} could not be made: {e}",
                        self.bucket
                    );
                }
                for pending in waiting {
                    match pending {
                        Pending::Load(_, done) => done(Err(e.clone())),
                        Pending::Write(_, _, _, done) => done(Err(e.clone())),
                    }
                }
            }
        }
    }

    fn run(&self, pending: Pending) {
        match pending {
            Pending::Load(key, done) => {
                let (subject, body) = jetstream::get_request(&self.bucket, &key);
                let answer: JsDone = Box::new(move |answer| {
                    done(answer.map_err(failure).and_then(|msg| read(&msg)));
                });
                self.send(&key, subject, Bytes::new(), body, answer);
            }
            Pending::Write(key, bytes, expected, done) => {
                let subject = jetstream::key_subject(&self.bucket, &key);
                let headers = jetstream::put_headers(expected);
                let metrics = Arc::clone(&self.metrics);
                let started = std::time::Instant::now();
                let answer: JsDone = Box::new(move |answer| {
                    let outcome = answer.map_err(failure).and_then(|msg| {
                        jetstream::parse_pub_ack(&msg.payload).map_err(|e| match e {
                            Answer::Api(api) if api.err_code == WRONG_LAST_SEQUENCE => {
                                StoreError::Stale { expected }
                            }
                            other => api_failure(&other),
                        })
                    });
                    if outcome.is_ok() {
                        metrics.commit(started.elapsed());
                    }
                    metrics.write(match &outcome {
                        Ok(_) => "ok",
                        Err(e) => e.label(),
                    });
                    done(outcome);
                });
                self.send(&key, subject, headers, bytes, answer);
            }
        }
    }
}

impl StateStore for JetStreamKv {
    fn kind(&self) -> &'static str {
        "jetstream"
    }

    fn load(&self, key: &str, done: Done<Option<Stored>>) {
        self.when_ready(Pending::Load(key.to_string(), done));
    }

    fn write(&self, key: &str, bytes: Bytes, expected: Revision, done: Done<Revision>) {
        self.when_ready(Pending::Write(key.to_string(), bytes, expected, done));
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
            "JetStream is not enabled on the NATS server (start nats-server with -js)".into(),
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
