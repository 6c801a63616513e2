//! A WebSocket connection's mail bag (`websocket::handle::Mailbag`) and
//! the wake it asks for through its poller's port (`actors::port`): a
//! sender puts mail, counted in bytes against the limit, and posts the
//! connection's key to the port only when no wake is pending (`ASKED`);
//! the connection, woken, clears `ASKED` and then takes what is there.
//!
//! Claims checked: mail put is never left in the bag without a wake on its
//! way (once the senders are done, rounds of the poller until the port is
//! empty leave the bag empty); each message a put accepted reaches the
//! connection once, in its sender's order, and none it refused does; the
//! bytes in the bag never exceed the limit, and the counter comes back to
//! zero; a refusal past the limit reaches the connection (it closes with
//! 1008); at most one wake is pending at a time; a closed bag keeps nothing.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use loom::thread;

use super::{check_both, Fences, Loom};
use crate::actors::port::{PollerPort, PortWork};
use crate::websocket::handle::{cost, Mail, MailPoster, Mailbag};
use crate::websocket::outgoing::Outgoing;

/// The connection's key on its poller.
const KEY: usize = 7;

/// What the connection saw (bookkeeping of the model, outside loom's view).
#[derive(Default)]
struct Seen {
    /// The messages it took, in order.
    received: Vec<String>,
    /// A take said a send had overflowed.
    overflow: bool,
}

/// A bag, the port it asks, and what the connection saw.
struct Connection<F: Fences> {
    bag: Mailbag<Loom<F>>,
    port: Arc<PollerPort<Loom<F>>>,
    seen: Mutex<Seen>,
    limit: usize,
}

impl<F: Fences> Connection<F> {
    fn new(limit: usize) -> Arc<Connection<F>> {
        // The poller is never parked here: the port's wake is the park
        // flag's business (`model::port`).
        let port = Arc::new(PollerPort::<Loom<F>>::new(Box::new(|| {})));
        let poster: Arc<dyn MailPoster> = Arc::clone(&port) as Arc<dyn MailPoster>;
        Arc::new(Connection {
            bag: Mailbag::new(KEY, limit, poster),
            port,
            seen: Mutex::default(),
            limit,
        })
    }

    /// A sender's message `text`; whether the bag took it.
    fn send(&self, text: &str) -> bool {
        let mail = Mail::Out(Outgoing::text(text));
        let cost = cost(&mail);
        self.bag.put(mail, cost)
    }

    /// One round of the poller, and of the connection if the port woke it
    /// for its mail; false when the port had nothing.
    fn round(&self) -> bool {
        let mut work = PortWork::default();
        self.port.take(&mut work);
        assert!(work.mail.len() <= 1, "two wakes pending at once");
        if work.mail.is_empty() {
            return false;
        }
        assert_eq!(work.mail, [KEY]);
        let mut mail = VecDeque::new();
        let overflowed = self.bag.take(&mut mail);
        let bytes: usize = mail.iter().map(cost).sum();
        assert!(bytes <= self.limit, "{bytes} bytes waited, past the limit");
        let mut seen = self.seen.lock().expect("not poisoned");
        seen.overflow |= overflowed;
        for item in mail {
            let Mail::Out(message) = item else {
                unreachable!("only messages are sent here");
            };
            let text = String::from_utf8(message.payload.to_vec()).expect("text");
            seen.received.push(text);
        }
        drop(seen);
        self.bag.taken(bytes);
        true
    }

    /// Rounds until the port is empty, then what the connection saw; checks
    /// nothing is left in the bag and the counter is back to zero.
    fn settle(&self) -> Seen {
        while self.round() {}
        let (waiting, counted) = self.bag.waiting();
        assert_eq!(waiting, 0, "mail left in the bag with no wake on its way");
        assert_eq!(counted, 0, "the byte counter is off");
        std::mem::take(&mut *self.seen.lock().expect("not poisoned"))
    }
}

/// Each accepted message was received once, refused ones never, and each
/// sender's in the order it sent them.
fn received_as_sent(sent: &[(&str, bool)], seen: &Seen) {
    for (text, accepted) in sent {
        let times = seen.received.iter().filter(|r| r == text).count();
        assert_eq!(times, usize::from(*accepted), "{text}: {:?}", seen.received);
    }
    assert_eq!(
        seen.received.len(),
        sent.iter().filter(|(_, accepted)| *accepted).count()
    );
    // A message is named by its sender's letter and its place.
    for (i, a) in seen.received.iter().enumerate() {
        for b in &seen.received[i + 1..] {
            assert!(
                a[..1] != b[..1] || a < b,
                "out of order: {:?}",
                seen.received
            );
        }
    }
}

/// Two senders, one sending twice, and the connection taking its mail
/// meanwhile; room for all of it.
fn two_senders<F: Fences>() {
    let connection = Connection::<F>::new(1024);
    let other = Arc::clone(&connection);
    let sender = thread::spawn(move || [other.send("a0"), other.send("a1")]);
    let b0 = connection.send("b0");
    connection.round();
    let [a0, a1] = sender.join().expect("the sender ran");
    assert!(a0 && a1 && b0, "room for all");
    let seen = connection.settle();
    received_as_sent(&[("a0", a0), ("a1", a1), ("b0", b0)], &seen);
    assert!(!seen.overflow);
}

/// Room for two messages of three, while the connection takes some.
fn past_the_limit<F: Fences>() {
    // Each message costs 2 bytes and a frame's 14.
    let connection = Connection::<F>::new(40);
    let other = Arc::clone(&connection);
    let sender = thread::spawn(move || [other.send("a0"), other.send("a1")]);
    let b0 = connection.send("b0");
    connection.round();
    let [a0, a1] = sender.join().expect("the sender ran");
    let seen = connection.settle();
    received_as_sent(&[("a0", a0), ("a1", a1), ("b0", b0)], &seen);
    let refused = [a0, a1, b0].iter().any(|accepted| !accepted);
    assert_eq!(seen.overflow, refused, "a refusal the connection never saw");
}

/// The connection closes while a sender sends.
fn closed<F: Fences>() {
    let connection = Connection::<F>::new(1024);
    let other = Arc::clone(&connection);
    let sender = thread::spawn(move || [other.send("a0"), other.send("a1")]);
    connection.bag.close();
    let [a0, a1] = sender.join().expect("the sender ran");
    assert!(a0 || !a1, "a send after a refused one went through");
    let (waiting, _) = connection.bag.waiting();
    assert_eq!(waiting, 0, "a closed bag keeps mail");
}

#[test]
fn mail_put_is_taken_once_in_order() {
    check_both!(4, two_senders);
}

#[test]
fn past_the_limit_mail_is_refused_and_the_connection_told() {
    check_both!(4, past_the_limit);
}

#[test]
fn a_closed_bag_refuses_and_keeps_nothing() {
    check_both!(4, closed);
}
