//! What actors send one another beyond the types they define: the
//! subscription messages of topics, and why a send was refused.
//!
//! [`AnySender::send`](uppercut::api::AnySender::send) returns nothing, so
//! a send the server refuses (a message that is not bytes, to an actor on
//! another server) is noted for the thread that made it:
//! [`last_send_error`] tells the actor at the call, and the server logs
//! and counts it besides.
//!
//! A send that was taken but went past a bound (bytes for NATS while more
//! than `--nats-buffer` waits) is noted for the thread the same way
//! ([`press`]), and whoever made the thread send waits for relief before
//! it sends again: a WebSocket connection stops reading its socket, an
//! owned actor pauses, a program's thread blocks in `Server::send`.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::{Arc, Condvar, Mutex};

/// Addresses of topics start with this: `topic/room`.
pub(crate) const TOPIC_PREFIX: &str = "topic/";

/// Subscribes the sender to the topic it is sent to: an owned actor
/// sends it to `topic/room` (`sender.send("topic/room",
/// Envelope::of(Subscribe))`) and from then on receives what is published
/// there, on every server, as it was published (a `Vec<u8>`, `Bytes`,
/// `String` or [`Outgoing`]), with `envelope.from` naming the publisher
/// (`address@node` when it is on another server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscribe;

/// Ends what [`Subscribe`] began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsubscribe;

/// Why a message was not sent to an address on another server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// Only bytes (`Vec<u8>`, `Bytes`, `String`, a text or binary
    /// `Outgoing`) and `ActorRequest`s cross servers.
    NotBytes {
        /// The address it was sent to.
        to: String,
    },
    /// The address names a node, and the server is in no cluster.
    NoCluster {
        /// The address it was sent to.
        to: String,
    },
    /// The server is not connected to NATS now.
    Unreachable,
    /// Larger than the NATS server takes (its `max_payload`).
    TooLarge {
        /// The message's size on the wire.
        len: usize,
        /// The NATS server's limit.
        max: usize,
    },
    /// More than the bound waits for NATS already.
    BufferFull,
    /// A typed message (`Server::send_typed`) that serde could not write
    /// as JSON.
    NotSerializable {
        /// The address it was sent to.
        to: String,
        /// What serde said.
        why: String,
    },
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::NotBytes { to } => write!(
                f,
                "{to} is on another server: only bytes (Vec<u8>, Bytes, String, Outgoing) \
                 and ActorRequests cross servers"
            ),
            SendError::NoCluster { to } => {
                write!(f, "{to} names a node, and this server is in no cluster")
            }
            SendError::Unreachable => f.write_str("NATS is unreachable"),
            SendError::TooLarge { len, max } => {
                write!(
                    f,
                    "{len} bytes, past the NATS server's max_payload of {max}"
                )
            }
            SendError::BufferFull => f.write_str("the NATS send buffer is full"),
            SendError::NotSerializable { to, why } => {
                write!(f, "the message to {to} is not JSON: {why}")
            }
        }
    }
}

impl std::error::Error for SendError {}

thread_local! {
    static REFUSED: RefCell<Option<SendError>> = const { RefCell::new(None) };
}

/// Notes that this thread's last send was refused.
pub(crate) fn refuse(error: SendError) {
    let _ = REFUSED.try_with(|refused| *refused.borrow_mut() = Some(error));
}

/// Clears what [`refuse`] noted, before a send.
pub(crate) fn clear() {
    let _ = REFUSED.try_with(|refused| refused.borrow_mut().take());
}

/// Why this thread's last send to an address on another server (or to a
/// topic) was refused, if it was; taking it clears it. An owned actor
/// calls it right after `sender.send(…)` to learn at the call what the
/// server also logs and counts.
pub fn last_send_error() -> Option<SendError> {
    REFUSED
        .try_with(|refused| refused.borrow_mut().take())
        .ok()
        .flatten()
}

/// Called once, from any thread, when a [`Pressure`] has eased.
pub(crate) type Relief = Box<dyn FnOnce() + Send>;

/// Something that took a send past its bound, and says when the sender
/// may go on.
pub(crate) trait Pressure: Send + Sync {
    /// Calls `relief` once the pressure has eased: at once if it has
    /// already.
    fn on_relief(&self, relief: Relief);
}

thread_local! {
    static PRESSED: RefCell<Option<Arc<dyn Pressure>>> = const { RefCell::new(None) };
    static SERVER_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Notes that a send this thread made was taken past a bound: whoever made
/// the thread send waits for `pressure` to ease before it sends again.
pub(crate) fn press(pressure: Arc<dyn Pressure>) {
    let _ = PRESSED.try_with(|pressed| *pressed.borrow_mut() = Some(pressure));
}

/// What [`press`] noted since the last call, if anything; taking it clears
/// it.
pub(crate) fn take_pressure() -> Option<Arc<dyn Pressure>> {
    PRESSED
        .try_with(|pressed| pressed.borrow_mut().take())
        .ok()
        .flatten()
}

/// Marks this thread as one of the server's own (a poller's worker), which
/// must never block waiting for relief: the relief may need this very
/// thread.
pub(crate) fn mark_server_thread() {
    let _ = SERVER_THREAD.try_with(|server| server.set(true));
}

/// Whether this is one of the server's own threads.
pub(crate) fn is_server_thread() -> bool {
    SERVER_THREAD.try_with(Cell::get).unwrap_or(false)
}

/// Blocks this thread until `pressure` eases (for threads that may block:
/// a blocking actor's, a program's own).
pub(crate) fn wait_for_relief(pressure: &dyn Pressure) {
    let eased = Arc::new((Mutex::new(false), Condvar::new()));
    let signal = Arc::clone(&eased);
    pressure.on_relief(Box::new(move || {
        let (flag, condvar) = &*signal;
        *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        condvar.notify_one();
    }));
    let (flag, condvar) = &*eased;
    let mut done = flag.lock().unwrap_or_else(|e| e.into_inner());
    while !*done {
        done = condvar.wait(done).unwrap_or_else(|e| e.into_inner());
    }
}
