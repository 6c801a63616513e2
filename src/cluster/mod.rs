//! One actor system across several servers, over NATS.
//!
//! Each poller keeps a NATS connection of its own (`link`), driven from its
//! event loop as the upstream pool is: the socket is the poller's, the
//! protocol is sans-I/O (`nats::session`), and nothing blocks. A request a
//! connection makes for `counter@b` goes out on its own poller's link and
//! its answer comes back on the same link, so neither crosses a thread on
//! the way; on node `b`, the poller whose link the request arrived on runs
//! the actor (when it is free) and sends the answer back itself.
//!
//! What the server sends from elsewhere (an owned actor's `sender.send`, a
//! WebSocket actor's `send_to` or `publish`, `Server::send`) waits in a
//! link's port (`port`), chosen by the sender's address, so that one
//! sender's messages always leave on one connection, in order.
//!
//! The subjects are in `subjects`, the messages' format in `codec`. How
//! the server behaves when NATS is slow or gone is in `docs/operations.md`
//! (several servers), and why the client is written here rather than taken
//! from `async-nats` is in `docs/design.md`.

pub(crate) mod codec;
pub(crate) mod kv;
pub(crate) mod link;
pub(crate) mod placement;
pub(crate) mod port;
pub(crate) mod presence;
pub(crate) mod reread;
pub(crate) mod subjects;
pub(crate) mod tls;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use uppercut::api::Envelope;

use crate::actors::remote::{Payload, Remote, RemoteAddr};
use crate::cluster::port::{Admit, LinkPort, Outbound, Taken};
use crate::cluster::presence::{Claim, Presence};
use crate::cluster::reread::Reread;
use crate::cluster::subjects::Subjects;
use crate::config::ClusterConfig;
use crate::mail::{self, SendError};
use crate::nats::identity::Identity;
use crate::observe::cluster_metrics::{ClusterMetrics, Refusal};
use crate::routes::actor::ActorRequest;
use crate::routes::actor_response::ActorResponse;

/// The cluster as every thread of the server sees it.
pub(crate) struct Cluster {
    config: ClusterConfig,
    subjects: Subjects,
    /// Each poller's link's port, by poller.
    ports: Box<[Arc<LinkPort>]>,
    /// The names of the actors this server owns (each is also served as
    /// `name@*`).
    names: Vec<String>,
    metrics: Arc<ClusterMetrics>,
    /// What TLS trusts, for `tls://` servers (and servers that require
    /// TLS).
    tls_roots: Option<Arc<rustls::RootCertStore>>,
    /// The TLS configuration made with them, as last made (with the
    /// client certificate as last read).
    tls: Option<Reread<Arc<rustls::ClientConfig>>>,
    /// The key that answers a server's nonce (`--nats-creds`,
    /// `--nats-nkey`), as last read from its file.
    identity: Option<Reread<Identity>>,
    /// Whether the node's name is this server's (`presence`).
    presence: Presence,
    /// What this server says of itself under its name, but whether it
    /// has held it.
    claim: Claim,
}

/// The key `config` names (`creds` or `nkey`), read from its file; none
/// if it names none.
fn read_identity(config: &ClusterConfig) -> Option<Result<Identity, String>> {
    match (&config.creds, &config.nkey) {
        (Some(creds), _) => Some(Identity::from_creds_file(creds)),
        (None, Some(seed)) => Some(Identity::from_seed_file(seed)),
        (None, None) => None,
    }
}

impl Cluster {
    /// The cluster for a server whose pollers' links have `ports`, owning
    /// the actors at `names`, counted in `metrics` (the ports' too).
    /// Refuses a configuration whose `tls://` servers it cannot trust,
    /// whose client certificate cannot be presented, or whose `.creds` or
    /// seed file cannot be read as one. `listen` says where the server
    /// listens, to the operator of a server that claims the same name.
    pub(crate) fn new(
        config: ClusterConfig,
        ports: Vec<Arc<LinkPort>>,
        names: Vec<String>,
        metrics: Arc<ClusterMetrics>,
        listen: String,
    ) -> Result<Cluster, String> {
        config.check()?;
        let needs_tls = config.ca.is_some()
            || config.client_cert.is_some()
            || config.servers.iter().any(|url| url.tls);
        let tls_roots = match tls::roots(config.ca.as_deref()) {
            Ok(roots) => Some(roots),
            Err(e) if needs_tls => return Err(e),
            // Only a server that asks for TLS needs it; it is refused then.
            Err(_) => None,
        };
        let tls = match &tls_roots {
            Some(roots) => Some(Reread::new(
                "client certificate",
                tls::client_config(roots, config.client_cert.as_ref())?,
            )),
            None => None,
        };
        let identity = read_identity(&config)
            .transpose()?
            .map(|key| Reread::new("key file", key));
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let nonce = since_epoch.as_nanos() as u64 ^ u64::from(std::process::id()) << 32;
        let claim = Claim {
            nonce,
            started_ms: since_epoch.as_millis() as u64,
            joined: false,
            pid: std::process::id(),
            host: crate::config::host_node_name(),
            listen,
        };
        Ok(Cluster {
            presence: Presence::new(),
            claim,
            subjects: Subjects::new(&config.prefix, &config.node, nonce),
            config,
            metrics,
            ports: ports.into(),
            names,
            tls_roots,
            tls,
            identity,
        })
    }

    /// The TLS configuration for servers that need it, with the client
    /// certificate (if one was given) read again from its files for each
    /// connection, as the key is (see `identity`).
    pub(crate) fn tls(&self) -> Option<Arc<rustls::ClientConfig>> {
        let (roots, tls) = (self.tls_roots.as_ref()?, self.tls.as_ref()?);
        match &self.config.client_cert {
            Some(files) => Some(tls.refresh(tls::client_config(roots, Some(files)))),
            None => Some(tls.last()),
        }
    }

    /// The key that answers a server's nonce, if one was given: read
    /// again from its file for each connection, as NATS clients do, so
    /// that a `.creds` file renewed before its JWT expires is used when
    /// NATS closes the connection at the expiry. A file that cannot be
    /// read now leaves the key read before (and says so, once).
    pub(crate) fn identity(&self) -> Option<Identity> {
        let key = self.identity.as_ref()?;
        read_identity(&self.config).map(|fresh| key.refresh(fresh))
    }

    /// Whether the node's name is this server's.
    pub(crate) fn presence(&self) -> &Presence {
        &self.presence
    }

    /// What this server says of itself under its name, now.
    pub(crate) fn claim(&self) -> Claim {
        Claim {
            joined: self.presence.joined(),
            ..self.claim.clone()
        }
    }

    pub(crate) fn config(&self) -> &ClusterConfig {
        &self.config
    }

    pub(crate) fn subjects(&self) -> &Subjects {
        &self.subjects
    }

    /// The names of the actors this server owns.
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    pub(crate) fn metrics(&self) -> &Arc<ClusterMetrics> {
        &self.metrics
    }

    /// The server's pollers, each with a link.
    pub(crate) fn pollers(&self) -> usize {
        self.ports.len()
    }

    /// Poller `index`'s link's port.
    pub(crate) fn port(&self, index: usize) -> &Arc<LinkPort> {
        &self.ports[index % self.ports.len()]
    }

    /// The port of the link a sender at `address` always sends through.
    fn port_of(&self, address: &str) -> &Arc<LinkPort> {
        let mut hasher = DefaultHasher::new();
        address.hash(&mut hasher);
        self.port(hasher.finish() as usize)
    }

    /// Where a request for `to` goes.
    fn subject(&self, to: &RemoteAddr) -> String {
        match to.is_any() {
            true => self.subjects.service(&to.name),
            false => self.subjects.actor(&to.node, &to.name),
        }
    }

    /// Where bytes for `to` go.
    fn message_subject(&self, to: &RemoteAddr) -> String {
        match to.is_any() {
            true => self.subjects.service(&to.name),
            false => self.subjects.message(&to.node, &to.name),
        }
    }

    /// Sends an actor route's `request` to `to` through poller `poller`'s
    /// link (the one its answer comes back on), awaiting its answer for
    /// `timeout` (the route's); a request that cannot go is answered at
    /// once.
    pub(crate) fn request(
        &self,
        poller: usize,
        to: &RemoteAddr,
        request: ActorRequest,
        timeout: Duration,
    ) {
        let subject = self.subject(to);
        let _ = self.push_request(self.port(poller), subject, request, timeout, false);
    }

    /// As `request`, and answered 504 by the link itself if no answer
    /// came within `timeout` (a placed name's holder that may be paused).
    pub(crate) fn request_bounded(
        &self,
        poller: usize,
        to: &RemoteAddr,
        request: ActorRequest,
        timeout: Duration,
    ) {
        let subject = self.subject(to);
        let _ = self.push_request(self.port(poller), subject, request, timeout, true);
    }

    fn push_request(
        &self,
        port: &LinkPort,
        subject: String,
        request: ActorRequest,
        timeout: Duration,
        bounded: bool,
    ) -> Result<(), SendError> {
        let item = Outbound::Request {
            subject,
            request,
            timeout,
            bounded,
        };
        let Err(refused) = port.push(item, Admit::Bounded) else {
            return Ok(());
        };
        let error = refused.error;
        self.count_refusal(&error);
        if let Outbound::Request { request, .. } = *refused.item {
            request.respond(refusal_response(&error));
        }
        Err(error)
    }

    fn count_refusal(&self, error: &SendError) {
        self.metrics.refused(match error {
            SendError::Unreachable => Refusal::Unreachable,
            SendError::TooLarge { .. } => Refusal::TooLarge,
            SendError::BufferFull => Refusal::BufferFull,
            _ => Refusal::NotBytes,
        });
    }

    /// `from` as the other servers know it: `address@node`.
    fn address_here(&self, from: &str) -> String {
        match from.is_empty() {
            true => String::new(),
            false => format!("{from}@{}", self.config.node),
        }
    }
}

impl Remote for Cluster {
    fn node(&self) -> &str {
        &self.config.node
    }

    fn send(&self, to: &RemoteAddr, from: &str, envelope: Envelope) -> Result<(), SendError> {
        let port = self.port_of(from);
        let message = match envelope.message.downcast::<ActorRequest>() {
            Ok(request) => {
                let timeout = self.config.call_timeout;
                return self.push_request(port, self.subject(to), *request, timeout, false);
            }
            Err(message) => message,
        };
        let subject = self.message_subject(to);
        let Ok(payload) = Payload::take(message) else {
            self.metrics.refused(Refusal::NotBytes);
            return Err(SendError::NotBytes { to: to.to_string() });
        };
        let item = Outbound::Bytes {
            subject,
            from: self.address_here(from),
            payload,
        };
        self.push_flow(port, item)
    }

    fn publish(&self, topic: &str, from: &str, payload: &Payload) -> Result<(), SendError> {
        let item = Outbound::Bytes {
            subject: self.subjects.topic(topic),
            from: self.address_here(from),
            payload: payload.clone(),
        };
        self.push_flow(self.port_of(from), item)
    }

    fn interest(&self, topic: &str, subscribed: bool) {
        let item = Outbound::Topic {
            topic: topic.to_string(),
            subscribed,
        };
        // One poller per topic holds its subscription.
        let _ = self.port_of(topic).push(item, Admit::Flow);
    }
}

impl Cluster {
    /// Leaves bytes for `port`'s link: taken whatever waits there (but for
    /// NATS being down, or the message too large), and the sending thread
    /// told to wait for relief when more than the bound now waits.
    fn push_flow(&self, port: &Arc<LinkPort>, item: Outbound) -> Result<(), SendError> {
        match port.push(item, Admit::Flow) {
            Ok(Taken::Within) => Ok(()),
            Ok(Taken::Past) => {
                self.metrics.pressed();
                mail::press(Arc::clone(port) as Arc<dyn mail::Pressure>);
                Ok(())
            }
            Err(refused) => {
                self.count_refusal(&refused.error);
                Err(refused.error)
            }
        }
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node", &self.config.node)
            .finish_non_exhaustive()
    }
}

/// The answer to a request that could not be sent: 413 past the NATS
/// server's size limit, else 503, saying why.
pub(crate) fn refusal_response(error: &SendError) -> ActorResponse {
    match error {
        SendError::TooLarge { .. } => failure(413, &error.to_string()),
        _ => failure(503, &error.to_string()),
    }
}

/// An error answer in the server's own form, `503 Service Unavailable:
/// why`, unless the application chose its error bodies.
pub(crate) fn failure(status: u16, why: &str) -> ActorResponse {
    ActorResponse::failure(status, why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::presence::Verdict;
    use crate::nats::url::NatsUrl;

    fn cluster() -> Cluster {
        let url = NatsUrl::parse("nats://127.0.0.1:4222").expect("a URL");
        let config = ClusterConfig::new(vec![url], "a");
        let metrics = Arc::new(ClusterMetrics::new(1));
        let port = LinkPort::new(1024, Arc::clone(&metrics), Box::new(|| {}));
        let listen = "127.0.0.1:9000".to_string();
        Cluster::new(config, vec![Arc::new(port)], Vec::new(), metrics, listen).expect("a cluster")
    }

    #[test]
    fn the_claim_says_whether_the_name_is_held() {
        let cluster = cluster();
        let asking = cluster.claim();
        assert!(!asking.joined);
        assert_eq!(asking.pid, std::process::id());
        assert_eq!(asking.listen, "127.0.0.1:9000");
        assert_eq!(asking.host, crate::config::host_node_name());
        cluster.presence().set(Verdict::Joined);
        let held = cluster.claim();
        assert!(
            held.joined,
            "a holder says so, and outranks an elder asking"
        );
        assert_eq!(
            Claim {
                joined: false,
                ..held
            },
            asking,
            "the rest is the same"
        );
    }
}
