//! The NATS subjects the servers of one cluster use, under a prefix
//! (`upc` unless `--nats-prefix` says otherwise):
//!
//! | subject | what | who subscribes |
//! | --- | --- | --- |
//! | `upc.a.NODE.NAME` | a request for actor `NAME` on node `NODE` | each poller of `NODE`, as queue group `upc.a.NODE` |
//! | `upc.m.NODE.P.NAME` | bytes for actor `NAME` on node `NODE`; `P` is the name's partition | the one poller of `NODE` that holds partition `P` |
//! | `upc.s.NAME` | for `NAME@*`: whichever node serves `NAME` | each poller of each node that owns `NAME`, as queue group `upc.s.NAME` |
//! | `upc.r.NODE.NONCE.POLLER.ID` | the answer to request `ID` | poller `POLLER` of `NODE` (`…POLLER.*`) |
//! | `upc.t.TOPIC` | what is published to a topic | one poller per node with a subscriber |
//! | `upc.n.NODE` | a server asking whether another uses its node name (`presence`) | poller 0 of `NODE` |
//!
//! Requests spread over the receiving node's pollers (each is answered on
//! its own); bytes for one actor all reach the node on one poller, so one
//! sender's messages are handed on in the order sent. The partition is
//! [`partition`] of the name, the same on every server.
//!
//! A name becomes one token: bytes other than letters, digits, `-`, `_`
//! and `/` are written `%XX`, so a `.`, `*` or `>` in a name can neither
//! split a subject nor make a wildcard. The nonce (fresh at every start)
//! keeps a restarted node from taking the answers its last run asked for.

use std::fmt::Write;

/// What a subject a node subscribed to says the message is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Addressed {
    /// For the actor at this name on this node (`name@node` or `name@*`).
    Actor(String),
    /// Published to this topic.
    Topic(String),
}

/// The subjects of one node.
#[derive(Debug, Clone)]
pub(crate) struct Subjects {
    prefix: String,
    node: String,
    nonce: String,
}

impl Subjects {
    pub(crate) fn new(prefix: &str, node: &str, nonce: u64) -> Subjects {
        Subjects {
            prefix: prefix.to_string(),
            node: token(node),
            nonce: format!("{nonce:x}"),
        }
    }

    /// Where a message for `name` on `node` goes.
    pub(crate) fn actor(&self, node: &str, name: &str) -> String {
        format!("{}.a.{}.{}", self.prefix, token(node), token(name))
    }

    /// Where bytes for `name` on `node` go.
    pub(crate) fn message(&self, node: &str, name: &str) -> String {
        format!(
            "{}.m.{}.{}.{}",
            self.prefix,
            token(node),
            partition(name),
            token(name)
        )
    }

    /// What a poller subscribes to for bytes to this node's actors in
    /// partition `partition`.
    pub(crate) fn messages_here(&self, partition: u32) -> String {
        format!("{}.m.{}.{partition}.*", self.prefix, self.node)
    }

    /// What this node's pollers subscribe to for requests to its actors,
    /// and their queue group.
    pub(crate) fn actors_here(&self) -> (String, String) {
        let group = format!("{}.a.{}", self.prefix, self.node);
        (format!("{group}.*"), group)
    }

    /// Where a message for `name@*` goes, and the queue group that takes
    /// it.
    pub(crate) fn service(&self, name: &str) -> String {
        format!("{}.s.{}", self.prefix, token(name))
    }

    /// Where poller `poller` takes its answers: the subscription.
    pub(crate) fn answers(&self, poller: usize) -> String {
        format!("{}.r.{}.{}.{poller}.*", self.prefix, self.node, self.nonce)
    }

    /// Where a server asks whether another already uses this node's name
    /// (and the one that does subscribes).
    pub(crate) fn presence(&self) -> String {
        format!("{}.n.{}", self.prefix, self.node)
    }

    /// Where what is published to `topic` goes.
    pub(crate) fn topic(&self, topic: &str) -> String {
        format!("{}.t.{}", self.prefix, token(topic))
    }

    /// What a message on `subject` is for, if it is one of this node's
    /// actors' or topics' subjects (answers are told by their prefix).
    pub(crate) fn addressed(&self, subject: &[u8]) -> Option<Addressed> {
        let subject = std::str::from_utf8(subject).ok()?;
        let rest = subject.strip_prefix(&self.prefix)?.strip_prefix('.')?;
        let (kind, rest) = rest.split_once('.')?;
        match kind {
            "a" => {
                let (node, name) = rest.split_once('.')?;
                (node == self.node)
                    .then(|| untoken(name))
                    .flatten()
                    .map(Addressed::Actor)
            }
            "m" => {
                let (node, rest) = rest.split_once('.')?;
                let (_partition, name) = rest.split_once('.')?;
                (node == self.node)
                    .then(|| untoken(name))
                    .flatten()
                    .map(Addressed::Actor)
            }
            "s" => untoken(rest).map(Addressed::Actor),
            "t" => untoken(rest).map(Addressed::Topic),
            _ => None,
        }
    }
}

/// How many partitions bytes for a node's actors are spread over.
pub(crate) const PARTITIONS: u32 = 64;

/// The partition of actor `name`: FNV-1a of its bytes, so every server
/// (of any version) agrees.
pub(crate) fn partition(name: &str) -> u32 {
    let hash = name.bytes().fold(0x811c_9dc5u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    });
    hash % PARTITIONS
}

/// `text` as one subject token.
pub(crate) fn token(text: &str) -> String {
    let mut token = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'/' => {
                token.push(byte as char)
            }
            _ => {
                let _ = write!(token, "%{byte:02X}");
            }
        }
    }
    if token.is_empty() {
        token.push('%');
    }
    token
}

/// What [`token`] made `token` of; `None` if it could not have.
fn untoken(token: &str) -> Option<String> {
    if token == "%" {
        return Some(String::new());
    }
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'%' => {
                let hex = token.get(at + 1..at + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                at += 3;
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'/' => {
                out.push(bytes[at]);
                at += 1;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_stable_and_spread() {
        // FNV-1a 32 of "counter", whatever the platform or version.
        assert_eq!(partition("counter"), 0x9cac_de23 % PARTITIONS);
        let used: std::collections::HashSet<u32> =
            (0..1000).map(|n| partition(&format!("ws/{n}"))).collect();
        assert_eq!(used.len(), PARTITIONS as usize);
    }

    #[test]
    fn names_become_one_token_and_back() {
        for name in ["counter", "ws/12", "a.b", "*", ">", "x y", "ünï", ""] {
            let token = token(name);
            assert!(!token.contains(['.', '*', '>', ' ']), "{token}");
            assert!(!token.is_empty());
            assert_eq!(untoken(&token).as_deref(), Some(name));
        }
        assert_eq!(untoken("a.b"), None);
        assert_eq!(untoken("%zz"), None);
    }

    #[test]
    fn each_subject_says_what_it_is_for() {
        let subjects = Subjects::new("upc", "node-a", 0xbeef);
        let here = |subject: &str| subjects.addressed(subject.as_bytes());
        assert_eq!(subjects.actor("node-a", "ws/3"), "upc.a.node-a.ws/3");
        assert_eq!(
            here("upc.a.node-a.ws/3"),
            Some(Addressed::Actor("ws/3".into()))
        );
        assert_eq!(here("upc.a.node-b.ws/3"), None, "another node's");
        assert_eq!(
            subjects.actors_here(),
            ("upc.a.node-a.*".into(), "upc.a.node-a".into())
        );
        let p = partition("ws/3");
        assert_eq!(
            subjects.message("node-a", "ws/3"),
            format!("upc.m.node-a.{p}.ws/3")
        );
        assert_eq!(
            here(&format!("upc.m.node-a.{p}.ws/3")),
            Some(Addressed::Actor("ws/3".into()))
        );
        assert_eq!(
            here(&format!("upc.m.node-b.{p}.ws/3")),
            None,
            "another node's"
        );
        assert_eq!(subjects.messages_here(5), "upc.m.node-a.5.*");
        assert_eq!(subjects.service("count.er"), "upc.s.count%2Eer");
        assert_eq!(
            here("upc.s.count%2Eer"),
            Some(Addressed::Actor("count.er".into()))
        );
        assert_eq!(subjects.answers(1), "upc.r.node-a.beef.1.*");
        assert_eq!(here("upc.r.node-a.beef.1.42"), None, "answers go by prefix");
        assert_eq!(subjects.presence(), "upc.n.node-a");
        assert_eq!(here("upc.n.node-a"), None, "presence goes by its subject");
        assert_eq!(subjects.topic("room 1"), "upc.t.room%201");
        assert_eq!(
            here("upc.t.room%201"),
            Some(Addressed::Topic("room 1".into()))
        );
        assert_eq!(here("other.t.room"), None);
        assert_eq!(here("upc.q.x"), None);
    }
}
