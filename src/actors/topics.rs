//! This server's subscribers to each topic: owned actors (by address) and
//! WebSocket connections (by handle). A message published here reaches
//! them without leaving the server, on the publisher's thread and in its
//! order; the cluster carries it to the other servers, whose own
//! subscribers it reaches the same way.
//!
//! The first subscriber of a topic and the last to leave are reported, so
//! that the cluster subscribes this server to the topic on NATS only
//! while someone here listens.

use std::collections::HashMap;
use std::sync::RwLock;

use crate::websocket::handle::WsHandle;

/// One subscriber.
#[derive(Debug, Clone)]
pub(crate) enum Subscriber {
    /// An owned actor, at its address.
    Actor(Box<str>),
    /// A WebSocket connection: what is published is written to its
    /// client.
    Ws(WsHandle),
}

impl Subscriber {
    fn is(&self, other: &Subscriber) -> bool {
        match (self, other) {
            (Subscriber::Actor(a), Subscriber::Actor(b)) => a == b,
            (Subscriber::Ws(a), Subscriber::Ws(b)) => a == b,
            _ => false,
        }
    }
}

/// Every topic with a subscriber here.
#[derive(Debug, Default)]
pub(crate) struct Topics {
    by_topic: RwLock<HashMap<Box<str>, Vec<Subscriber>>>,
}

impl Topics {
    /// Adds `subscriber` to `topic` (once); true when it is the topic's
    /// first here.
    pub(crate) fn subscribe(&self, topic: &str, subscriber: Subscriber) -> bool {
        let mut by_topic = self.by_topic.write().unwrap_or_else(|e| e.into_inner());
        let subscribers = by_topic.entry(topic.into()).or_default();
        if subscribers.iter().any(|s| s.is(&subscriber)) {
            return false;
        }
        subscribers.push(subscriber);
        subscribers.len() == 1
    }

    /// Takes `subscriber` off `topic`; true when it was the last here.
    pub(crate) fn unsubscribe(&self, topic: &str, subscriber: &Subscriber) -> bool {
        let mut by_topic = self.by_topic.write().unwrap_or_else(|e| e.into_inner());
        let Some(subscribers) = by_topic.get_mut(topic) else {
            return false;
        };
        let before = subscribers.len();
        subscribers.retain(|s| !s.is(subscriber));
        if subscribers.is_empty() {
            by_topic.remove(topic);
            return before > 0;
        }
        false
    }

    /// Takes `subscriber` off every topic; the topics it was the last of.
    pub(crate) fn leave_all(&self, subscriber: &Subscriber) -> Vec<Box<str>> {
        let mut by_topic = self.by_topic.write().unwrap_or_else(|e| e.into_inner());
        if by_topic.is_empty() {
            return Vec::new();
        }
        let mut emptied = Vec::new();
        by_topic.retain(|topic, subscribers| {
            let before = subscribers.len();
            subscribers.retain(|s| !s.is(subscriber));
            if subscribers.is_empty() && before > 0 {
                emptied.push(topic.clone());
                return false;
            }
            true
        });
        emptied
    }

    /// Calls `f` with each subscriber of `topic`, under the read lock (so
    /// `f` must not subscribe or unsubscribe); how many there were.
    pub(crate) fn each(&self, topic: &str, mut f: impl FnMut(&Subscriber)) -> usize {
        let by_topic = self.by_topic.read().unwrap_or_else(|e| e.into_inner());
        let Some(subscribers) = by_topic.get(topic) else {
            return 0;
        };
        subscribers.iter().for_each(&mut f);
        subscribers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_the_first_and_the_last() {
        let topics = Topics::default();
        let a = Subscriber::Actor("a".into());
        let b = Subscriber::Actor("b".into());
        assert!(topics.subscribe("room", a.clone()));
        assert!(!topics.subscribe("room", a.clone()), "once");
        assert!(!topics.subscribe("room", b.clone()));
        assert_eq!(topics.each("room", |_| {}), 2);
        assert!(!topics.unsubscribe("room", &a));
        assert!(!topics.unsubscribe("room", &a), "already gone");
        assert!(topics.unsubscribe("room", &b));
        assert_eq!(topics.each("room", |_| {}), 0);
        assert!(!topics.unsubscribe("hall", &b));
        topics.subscribe("room", a.clone());
        topics.subscribe("hall", a.clone());
        topics.subscribe("hall", b.clone());
        assert_eq!(topics.leave_all(&a), vec![Box::<str>::from("room")]);
        assert_eq!(topics.each("hall", |_| {}), 1);
    }
}
